/* view.h - view stacks (the reference's ShapeTracker): how a tensor's elements map into its buffer. */
#ifndef TACT_VIEW_H
#define TACT_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "sym.h"

#define TA_MAX_DIMS 16
#define TA_MAX_VIEWS 6

/*
 * A view maps an index tuple (i0..i{n-1}), 0 <= ik < shape[k], to the buffer
 * position offset + sum(ik * strides[k]), valid only inside the mask
 * (mask[k][0] <= ik < mask[k][1] for every k) when has_mask is set; masked
 * positions read as the pad value and are never loaded.  A stack applies its
 * views from the last (the tensor's own shape) to the first (the buffer):
 * the position computed by view j is unflattened into the shape of view
 * j-1 (row-major) and mapped again.
 *
 * Views are kept canonical as in the reference (tinygrad-internals.md §3):
 * size-1 dims have stride 0; a shape containing 0 has all-zero strides and
 * no mask; a mask covering everything is dropped; contiguous is true when
 * the view is the row-major layout of its shape with offset 0 and no mask.
 */
typedef struct ta_view {
    int ndim;
    int64_t shape[TA_MAX_DIMS];
    int64_t strides[TA_MAX_DIMS];
    int64_t offset;
    bool has_mask;
    int64_t mask[TA_MAX_DIMS][2];
    bool contiguous;
} ta_view_t;

typedef struct ta_vstack {
    int nviews; /* >= 1 */
    ta_view_t views[TA_MAX_VIEWS];
} ta_vstack_t;

/* A single contiguous view of shape (ndim 0 is a scalar).  Only the first
 * nviews views of a stack are ever read or written. */
void ta_vstack_init(ta_vstack_t *st, int ndim, const int64_t *shape);
/* Copies src's views into dst (its first nviews only). */
void ta_vstack_copy(ta_vstack_t *dst, const ta_vstack_t *src);

/* The shape of the tensor the stack describes (its last view's). */
int ta_vstack_ndim(const ta_vstack_t *st);
const int64_t *ta_vstack_shape(const ta_vstack_t *st);
int64_t ta_vstack_numel(const ta_vstack_t *st);

/* True when the stack is one contiguous view: the tensor is its buffer. */
bool ta_vstack_contiguous(const ta_vstack_t *st);

/* The number of buffer elements the stack can address (max position + 1
 * over valid indices; 0 when there are none). */
int64_t ta_vstack_buffer_size(const ta_vstack_t *st);

/* True when a stack that came from outside is one this module could have
 * made: dims and masks in range, the contiguous flags right, no position
 * arithmetic that overflows, and every position a view produces inside the
 * view before it (and not negative).  Whether the first view fits its
 * buffer is the caller's to check, with ta_vstack_buffer_size. */
bool ta_vstack_valid(const ta_vstack_t *st);

/*
 * Movement ops.  The caller has validated the arguments (graph/shape.c
 * does, with messages for the user); these assert on invalid ones.  Each
 * returns 0, or -1 if the result would need more than TA_MAX_VIEWS views,
 * in which case st is unchanged (the graph builder then realizes the
 * tensor and starts a fresh stack).
 *  - reshape: same number of elements; merges into the last view when
 *    expressible (always for a contiguous view), else pushes a new view.
 *  - permute: order is a permutation of 0..ndim-1.
 *  - expand: same ndim; only size-1 dims may grow (to any size >= 0).
 *  - pad: pads[k] = {before, after}, both >= 0.
 *  - shrink: ranges[k] = {begin, end}, 0 <= begin <= end <= shape[k].
 *  - stride: mul[k] != 0; size becomes ceil(shape/|mul|); negative mul
 *    walks the dim backwards (flip is mul -1).
 */
int ta_vstack_reshape(ta_vstack_t *st, int ndim, const int64_t *shape);
int ta_vstack_permute(ta_vstack_t *st, const int *order);
int ta_vstack_expand(ta_vstack_t *st, const int64_t *shape);
int ta_vstack_pad(ta_vstack_t *st, const int64_t (*pads)[2]);
int ta_vstack_shrink(ta_vstack_t *st, const int64_t (*ranges)[2]);
int ta_vstack_stride(ta_vstack_t *st, const int64_t *mul);

/* Numeric mapping of one index tuple: returns true and sets *pos if the
 * element is valid (not masked at any level), false otherwise. */
bool ta_vstack_index(const ta_vstack_t *st, const int64_t *idx, int64_t *pos);

/*
 * Symbolic mapping: idx[k] are expressions for the index in dim k; sets
 * *pos to the buffer position and *valid to the validity (1 when nothing is
 * masked).  Returns 0, or -1 on allocation failure in ar.
 */
int ta_vstack_expr(const ta_vstack_t *st, ta_sym_arena_t *ar, const ta_sym_t *const *idx, const ta_sym_t **pos,
                   const ta_sym_t **valid);

/* Structural equality and a hash consistent with it (for common subexpressions). */
bool ta_vstack_equal(const ta_vstack_t *a, const ta_vstack_t *b);
uint64_t ta_vstack_hash(const ta_vstack_t *st);

#endif
