/* fold.h - evaluating elementwise ops on host values, for constant folding in the graph builder. */
#ifndef TACT_FOLD_H
#define TACT_FOLD_H

#include "dtype.h"
#include "ops.h"

/*
 * Computes op on n constant sources of dtype src_dtype (the first source's;
 * WHERE's condition is bool), giving a value of dtype out, with the same
 * semantics as a generated CPU kernel (codegen/render.c): integers wrap,
 * 16-bit floats round after the op, max propagates NaN.  Returns 0, or -1
 * when the op is not one this folds (then the graph keeps the op).
 */
int ta_fold_eval(ta_op_t op, tact_dtype out, tact_dtype src_dtype, int n, const ta_value_t *srcs, ta_value_t *result);

/* True if v (of dtype d) equals the integer k exactly (0, 1 or -1 tests). */
int ta_fold_is(tact_dtype d, ta_value_t v, int k);

#endif
