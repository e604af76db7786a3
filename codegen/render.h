/* render.h - the renderer: a kernel AST becomes one function in its target's language (C for the CPU device, OpenCL C; printer.h). */
#ifndef TACT_RENDER_H
#define TACT_RENDER_H

#include <stddef.h>

#include "ast.h"

/*
 * Every kernel has the signature
 *
 *     void NAME(int64_t start, int64_t end, void **bufs, const uint64_t *args)
 *
 * and computes the output elements with flat (row-major) output index in
 * [start, end), each one completely (all of its reduce, in a fixed order)
 * in the calling thread; bufs[b] is kernel buffer b and args[j] the value
 * of the AST's j-th argument CONST (ta_ast_arg_word's encoding).  The CPU device splits
 * the output into ranges, so results do not depend on the thread count.
 * 16-bit floats are stored as their bits and computed in float, rounded
 * back after every op, which gives the results of native 16-bit arithmetic.
 */

/* Renders a (checked first) into *src (allocated with ta_malloc; the caller
 * frees it with ta_free), the kernel's name into name, and into *align the
 * number of outputs start and end must be multiples of (a kernel computing
 * tiles of outputs needs whole tiles).  Returns TACT_OK, TACT_EINVAL for a
 * malformed AST or TACT_ENOMEM, with err filled. */
int ta_render_c(const ta_ast_t *a, char **src, char *name, size_t name_len, int64_t *align, ta_error_t *err);
/* The same for a given target (ta_render_c lowers for this machine's C),
 * in its printer's language, with
 * the vector width the source uses into *width (1: none; width may be
 * NULL).  Sources of one width may be compiled together in one file: each
 * defines its helpers only if no earlier one did; sources of different
 * widths may not. */
struct ta_target;
int ta_render_c_for(const ta_ast_t *a, const struct ta_target *t, char **src, char *name, size_t name_len, int64_t *align, int *width,
                    ta_error_t *err);

/* The source every C kernel file starts with (types and helpers: the C
 * printer's prelude; each printer has its own, printer.h). */
const char *ta_render_prelude(void);

#endif
