/* client_reduce.c - the reference's reductions beyond sum and max (min, any, all, mean, var, std, softmax,
 * log_softmax, logsumexp), composed from the primitives as tensor.py composes them. */
#include <math.h>

#include "client_impl.h"
#include "dtype.h"
#include "shape.h"

/* The number of elements each output of a reduce over axes covers: the
 * product of the dims the reduce changes (the reference's prod over
 * si != so), from the shape of the kept reduce. */
static int64_t s_count(ti_tensor_t *x, ti_tensor_t *kept) {
    int64_t n = 1, xs[TA_MAX_DIMS], ks[TA_MAX_DIMS];
    ti_shape(x, xs);
    ti_shape(kept, ks);
    for (int k = 0; k < ti_ndim(x); k++)
        if (xs[k] != ks[k]) n *= xs[k];
    return n;
}

/* min is -max(-x); unsigned ints (where -x wraps) and bools use ~x, which
 * orders the other way round as well. */
ti_tensor_t *ti_min(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    tact_dtype d = ti_dtype_of(x);
    if (ta_dtype_is_unsigned(d)) {
        ti_tensor_t *ones = ti_cast(ti_scalar_int(ti_tensor_ctx(x), -1), d);
        return ti_xor(ti_max(ti_xor(x, ones), naxes, axes, keepdim), ones);
    }
    return ti_neg(ti_max(ti_neg(x), naxes, axes, keepdim));
}

ti_tensor_t *ti_any(ti_tensor_t *x, int naxes, const int *axes, int keepdim) { return ti_max(ti_cast(x, TACT_BOOL), naxes, axes, keepdim); }

ti_tensor_t *ti_all(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    return ti_logical_not(ti_any(ti_logical_not(x), naxes, axes, keepdim));
}

ti_tensor_t *ti_mean(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    tact_dtype d = ti_dtype_of(x), out = ta_dtype_is_float(d) ? d : TACT_FLOAT32;
    ti_tensor_t *num = ti_sum(ti_cast(x, ta_dtype_sum_acc(d)), naxes, axes, keepdim);
    ti_tensor_t *kept = ti_sum(x, naxes, axes, 1);
    if (ti_status_of(kept)) return kept;
    return ti_cast(ti_div(num, ti_scalar_int(ti_tensor_ctx(x), s_count(x, kept))), out);
}

ti_tensor_t *ti_var(ti_tensor_t *x, int naxes, const int *axes, int keepdim, double correction) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    ti_tensor_t *sq = ti_square(ti_sub(x, ti_mean(x, naxes, axes, 1)));
    ti_tensor_t *kept = ti_sum(sq, naxes, axes, 1);
    if (ti_status_of(kept)) return kept;
    double n = (double)s_count(x, kept) - correction;
    return ti_div(ti_sum(sq, naxes, axes, keepdim), ti_scalar(ti_tensor_ctx(x), n > 0 ? n : 0));
}

ti_tensor_t *ti_std(ti_tensor_t *x, int naxes, const int *axes, int keepdim, double correction) {
    return ti_sqrt(ti_var(x, naxes, axes, keepdim, correction));
}

/* The reference's _softmax: m = x - max, e = exp(m), and e's sum, kept. */
static ti_tensor_t *s_softmax(ti_tensor_t *x, int axis, ti_tensor_t **m, ti_tensor_t **e) {
    *m = ti_sub(x, ti_max(x, 1, &axis, 1));
    *e = ti_exp(*m);
    return ti_sum(*e, 1, &axis, 1);
}

ti_tensor_t *ti_softmax(ti_tensor_t *x, int axis) {
    ti_tensor_t *m, *e, *ss = s_softmax(x, axis, &m, &e);
    return ti_div(e, ss);
}

ti_tensor_t *ti_log_softmax(ti_tensor_t *x, int axis) {
    ti_tensor_t *m, *e, *ss = s_softmax(x, axis, &m, &e);
    return ti_sub(m, ti_log(ss));
}

ti_tensor_t *ti_logsumexp(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    ti_tensor_t *m = ti_max(x, naxes, axes, 1);
    ti_tensor_t *r = ti_log(ti_sum(ti_exp(ti_sub(x, m)), naxes, axes, keepdim));
    if (keepdim || ti_status_of(r)) return ti_add(r, m);
    int64_t dims[TA_MAX_DIMS];
    ti_shape(r, dims);
    return ti_add(r, ti_reshape(m, ti_ndim(r), dims));
}

/* Products by a tree of multiplies (there is no product reduce among the
 * primitives): the reduced dims moved last and flattened to R, padded with
 * ones to a power of two, and halved log2(R) times, each half times the
 * other; ints and bools in the sum's accumulation dtype. */
ti_tensor_t *ti_prod(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    ti_tensor_t *kept = ti_sum(x, naxes, axes, 1); /* checks the axes; the kept shape */
    if (ti_status_of(kept)) return kept;
    tact_dtype acc = ta_dtype_sum_acc(ti_dtype_of(x));
    int nd = ti_ndim(x), order[TA_MAX_DIMS], o = 0;
    int64_t xs[TA_MAX_DIMS], ks[TA_MAX_DIMS], outer = 1, r = 1;
    ti_shape(x, xs);
    ti_shape(kept, ks);
    for (int k = 0; k < nd; k++)
        if (xs[k] == ks[k] && !(xs[k] == 1 && naxes < 0)) order[o++] = k, outer *= xs[k];
    for (int k = 0; k < nd; k++)
        if (!(xs[k] == ks[k] && !(xs[k] == 1 && naxes < 0))) order[o++] = k, r *= xs[k];
    ti_tensor_t *t = ti_reshape(ti_permute(ti_cast(x, acc), order), 2, (int64_t[]){outer, r});
    int64_t p2 = 1;
    while (p2 < r) p2 *= 2;
    if (p2 > r) { /* ones after the end (an empty product is 1) */
        const int64_t pads[2][2] = {{0, 0}, {0, p2 - r}};
        t = ti_pad(t, pads, 1);
    }
    for (int64_t n = p2; n > 1; n /= 2) {
        ti_tensor_t *h = ti_reshape(t, 3, (int64_t[]){outer, 2, n / 2}), *half[2];
        if (ti_split(h, 2, (int64_t[]){1, 1}, 1, half) != 2) return half[0];
        t = ti_reshape(ti_mul(half[0], half[1]), 2, (int64_t[]){outer, n / 2});
    }
    /* The shape a sum with the same axes and keepdim has. */
    ti_tensor_t *like = ti_sum(x, naxes, axes, keepdim);
    int64_t out[TA_MAX_DIMS];
    ti_shape(like, out);
    return ti_reshape(t, ti_ndim(like), out);
}
