/* shape.h - shapes and the pure functions that validate ops and compute result shapes (client and graph builder). */
#ifndef TACT_SHAPE_H
#define TACT_SHAPE_H

#include <stdint.h>

#include "msg.h"
#include "view.h"

typedef struct ta_shape {
    int ndim;
    int64_t d[TA_MAX_DIMS];
} ta_shape_t;

/* Each function returns TACT_OK and fills *out, or TACT_ESHAPE (or
 * TACT_EINVAL) with a message naming the op and the shapes in err. */

/* Fills s from ndim dims; rejects negative dims and ndim > TA_MAX_DIMS. */
int ta_shape_make(ta_shape_t *s, int ndim, const int64_t *dims, const char *op, ta_error_t *err);
int64_t ta_shape_numel(const ta_shape_t *s);
/* Refuses a shape whose element count, times the widest element (8 bytes),
 * does not fit in an int64 (TACT_ESHAPE naming op); zero dims count as 1,
 * so the dims of an empty shape cannot overflow a product either. */
int ta_shape_check_size(const ta_shape_t *s, const char *op, ta_error_t *err);
int ta_shape_equal(const ta_shape_t *a, const ta_shape_t *b);
/* "(2, 3, 4)" */
void ta_shape_format(const ta_shape_t *s, char *buf, size_t len);

/* numpy broadcasting: align right, dims equal or 1. */
int ta_shape_broadcast(const ta_shape_t *a, const ta_shape_t *b, const char *op, ta_shape_t *out, ta_error_t *err);
/* One dim may be -1 (inferred); the element count must match. */
int ta_shape_reshape(const ta_shape_t *in, int ndim, const int64_t *dims, ta_shape_t *out, ta_error_t *err);
/* order must be a permutation of 0..ndim-1 (negative entries count from the end). */
int ta_shape_permute(const ta_shape_t *in, const int *order, int *norm, ta_shape_t *out, ta_error_t *err);
/* Expand to ndim >= in->ndim dims (new dims are prepended); -1 keeps a dim;
 * only size-1 dims may change.  *aligned gets in's shape with leading 1s. */
int ta_shape_expand(const ta_shape_t *in, int ndim, const int64_t *dims, ta_shape_t *aligned, ta_shape_t *out,
                    ta_error_t *err);
/* pads[k] = {before, after} >= 0. */
int ta_shape_pad(const ta_shape_t *in, const int64_t (*pads)[2], ta_shape_t *out, ta_error_t *err);
/* ranges[k] = {begin, end}, 0 <= begin <= end <= dim. */
int ta_shape_shrink(const ta_shape_t *in, const int64_t (*ranges)[2], ta_shape_t *out, ta_error_t *err);
/* axes (negative count from the end; naxes < 0: all axes) -> a bit mask;
 * out has the reduced dims set to 1 (keepdim); duplicates are an error. */
int ta_shape_reduce(const ta_shape_t *in, int naxes, const int *axes, const char *op, uint32_t *mask, ta_shape_t *out,
                    ta_error_t *err);

/* The shape a reduce (mask in args[0]) or movement op makes of its source
 * in, for the graph's checks and the gradient engine's alike: RESHAPE and
 * EXPAND take their target from to (the op's own shape), PERMUTE's
 * negative axes are resolved in args; any other op keeps in's shape.
 * Returns TACT_OK, or TACT_EINVAL/TACT_ESHAPE for args that do not fit. */
int ta_shape_of_op(int op, const ta_shape_t *in, int nargs, int64_t *args, const ta_shape_t *to, ta_shape_t *out, ta_error_t *err);

#endif
