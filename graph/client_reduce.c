/* client_reduce.c - reductions: the primitives (sum, max, with split reductions, and matmul) and the reference's
 * reductions composed from them (min, any, all, mean, var, std, prod, softmax, log_softmax, logsumexp). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "client_core.h"
#include "client_impl.h"
#include "dtype.h"
#include "mem.h"
#include "shape.h"

/* -------------------------------------------------------------- reductions */

/* Reductions of more than 65536 elements are split in two (or more)
 * kernels: a reduce of R elements becomes x partials of R / x elements
 * (x <= 256, the largest that divides the first reduced axis it can), each
 * over a contiguous run, then a reduce of the partials.  The partials
 * spread over every core, and a float sum adds short runs (2^25 ones sum
 * to 2^25, not 2^24).  The split depends on the
 * reduced lengths alone, never on the batch dims or the thread count
 * (DESIGN.md §2), so a row's bits do not depend on its batch. */
enum { S_SPLIT_ABOVE = 1 << 16, S_SPLIT_MAX = 256, S_SPLIT_LEAST = 8 };

static ti_tensor_t *s_reduce_kept(ti_tensor_t *x, ta_op_t op, uint32_t mask, const ta_shape_t *kept) {
    const ta_shape_t *sh = &x->shape;
    int64_t reduced = 1;
    for (int k = 0; k < sh->ndim; k++)
        if (mask >> k & 1) reduced *= sh->d[k];
    int axis = -1;
    int64_t parts = 0;
    for (int k = 0; k < sh->ndim && axis < 0 && reduced > S_SPLIT_ABOVE && sh->ndim < TA_MAX_DIMS; k++)
        for (int64_t p = S_SPLIT_MAX; (mask >> k & 1) && p >= S_SPLIT_LEAST && axis < 0; p--)
            if (sh->d[k] % p == 0) axis = k, parts = p;
    if (axis < 0) {
        int64_t arg = mask;
        const ti_tensor_t *src[1] = {x};
        return tc_emit(tc_new(x->ctx, x->dtype, kept), op, 1, src, 1, &arg);
    }
    /* (.., n, ..) -> (.., parts, n / parts, ..) -> (.., n / parts, .., parts):
     * partial q covers elements q * n / parts .. (q + 1) * n / parts - 1. */
    int64_t split[TA_MAX_DIMS];
    int order[TA_MAX_DIMS], n = 0;
    for (int k = 0; k < sh->ndim; k++) {
        if (k == axis) split[n++] = parts;
        split[n++] = k == axis ? sh->d[k] / parts : sh->d[k];
    }
    for (int k = 0, j = 0; k < n; k++)
        if (k != axis) order[j++] = k;
    order[n - 1] = axis;
    ti_tensor_t *moved = ti_permute(ti_reshape(x, n, split), order);
    if (moved->status) return moved;
    /* The partials: the same reduced axes (the partial axis is last), which
     * may be split again (each level divides the length by 8 at least). */
    ta_shape_t partial_kept = moved->shape;
    for (int k = 0; k < sh->ndim; k++)
        if (mask >> k & 1) partial_kept.d[k] = 1;
    ti_tensor_t *partials = s_reduce_kept(moved, op, mask, &partial_kept);
    ta_shape_t done = partial_kept;
    done.d[n - 1] = 1;
    ti_tensor_t *total = s_reduce_kept(partials, op, 1u << (n - 1), &done);
    return ti_reshape(total, kept->ndim, kept->d);
}

static ti_tensor_t *s_reduce(ti_tensor_t *x, ta_op_t op, int naxes, const int *axes, int keepdim, const char *name) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    uint32_t mask;
    ta_shape_t kept;
    ta_error_t err;
    if (naxes > 0 && !axes) return tc_error(x->ctx, TACT_EINVAL, "%s: axes is NULL", name);
    if (ta_shape_reduce(&x->shape, naxes, axes, name, &mask, &kept, &err) != TACT_OK)
        return tc_error(x->ctx, err.code, "%s", err.text);
    ti_tensor_t *r = mask ? s_reduce_kept(x, op, mask, &kept) : x;
    if (keepdim || r->status) return r;
    int64_t dims[TA_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < x->shape.ndim; k++)
        if (!(mask >> k & 1)) dims[n++] = x->shape.d[k];
    return ti_reshape(r, n, dims);
}

ti_tensor_t *ti_sum(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    tact_dtype d = x->dtype, acc = ta_dtype_sum_acc(d);
    ti_tensor_t *r = s_reduce(ti_cast(x, acc), TA_OP_SUM, naxes, axes, keepdim, "sum");
    return ta_dtype_is_half(d) ? ti_cast(r, d) : r;
}

ti_tensor_t *ti_max(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    if (!x) return ti_null_arg();
    return s_reduce(x, TA_OP_RMAX, naxes, axes, keepdim, "max");
}

ti_tensor_t *ti_matmul(ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = tc_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    a = tc_solid(a);
    b = tc_solid(b);
    int n1 = a->shape.ndim, n2 = b->shape.ndim, tail = n2 < 2 ? n2 : 2;
    if (!n1 || !n2 || a->shape.d[n1 - 1] != b->shape.d[n2 - tail]) {
        char sa[128], sb[128];
        ta_shape_format(&a->shape, sa, sizeof sa);
        ta_shape_format(&b->shape, sb, sizeof sb);
        if (!n1 || !n2) return tc_error(a->ctx, TACT_ESHAPE, "matmul of %s and %s: both need at least one dim", sa, sb);
        return tc_error(a->ctx, TACT_ESHAPE, "matmul of %s and %s: %" PRId64 " columns against %" PRId64 " rows", sa, sb,
                        a->shape.d[n1 - 1], b->shape.d[n2 - tail]);
    }
    tact_dtype d = ta_dtype_promote(a->dtype, b->dtype);
    a = ti_widened(a, d), b = ti_widened(b, d);
    /* x @ W^T with W a buffer (a linear layer): both operands run along
     * the reduce, where a register tile's products share no loaded value
     * (Zen 3: 47 GFLOPS a core, against 88 for x @ W).  With rows and
     * columns enough to pay for it, W^T is copied first (a kernel of
     * K x N) and the matmul reads it along N.  Not where x wants a
     * gradient: that gradient (g @ W) would then read the copy along the
     * reduce instead of W along its rows, giving back what was won. */
    int64_t k = a->shape.d[n1 - 1];
    if (b->swapped && n2 >= 2 && k > 0 && ti_numel(a) / k >= 32 && b->shape.d[n2 - 1] >= 32 && a->requires_grad != 1) b = ti_contiguous(b);
    /* As the reference: x (..., [1,] k) times w (..., [1,] k, m) moved to
     * (..., m, k), multiplied with broadcasting and summed over k. */
    int ones = n1 - 1 < n2 - 1 ? n1 - 1 : n2 - 1;
    if (ones > 1) ones = 1;
    int64_t xs[TA_MAX_DIMS], ws[TA_MAX_DIMS];
    int nx = 0, nw = 0;
    if (n1 + ones > TA_MAX_DIMS || n2 + ones > TA_MAX_DIMS) return tc_error(a->ctx, TACT_ESHAPE, "matmul: too many dims");
    for (int k = 0; k < n1 - 1; k++) xs[nx++] = a->shape.d[k];
    for (int k = 0; k < ones; k++) xs[nx++] = 1;
    xs[nx++] = a->shape.d[n1 - 1];
    for (int k = 0; k < n2 - 2; k++) ws[nw++] = b->shape.d[k];
    for (int k = 0; k < ones; k++) ws[nw++] = 1;
    for (int k = n2 - tail; k < n2; k++) ws[nw++] = b->shape.d[k];
    int order[TA_MAX_DIMS];
    for (int k = 0; k < nw; k++) order[k] = k;
    order[nw - 1] = nw - tail;
    order[nw - tail] = nw - 1;
    ti_tensor_t *x = ti_reshape(a, nx, xs), *w = ti_permute(ti_reshape(b, nw, ws), order);
    int last = -1;
    return ti_cast(ti_sum(ti_mul(x, w), 1, &last, 0), d);
}

/* An operand of a matmul or a convolution whose result has dtype d.
 * Float16 and bfloat16 are multiplied in float32, where each product is
 * exact, summed in float32 and rounded once to their type at the end, as
 * PyTorch and tensor cores do; the reference rounds each product to 16
 * bits before its float32 sum (docs/api.md).  The operands are converted
 * by kernels of their own (realized before the expand, in their own
 * layout), so the matmul is float32's, at its rate. */
ti_tensor_t *ti_widened(ti_tensor_t *x, tact_dtype d) { return ta_dtype_is_half(d) ? ti_cast(x, TACT_FLOAT32) : x; }



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
