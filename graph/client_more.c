/* client_more.c - more of the reference's functions composed from the primitives: argmax, argmin, cumsum (with the
 * reference's two-stage split of long axes), triu, tril, masked_fill, pow (with its identities for constant
 * exponents), lshift, rshift and scaled_dot_product_attention. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "client_core.h"
#include "client_impl.h"
#include "dtype.h"
#include "shape.h"

static ti_tensor_t *s_int(ti_tensor_t *x, int64_t v) { return ti_scalar_int(ti_tensor_ctx(x), v); }
static ti_tensor_t *s_flt(ti_tensor_t *x, double v) { return ti_scalar(ti_tensor_ctx(x), v); }

static int s_axis(ti_tensor_t *x, int axis, const char *op, ti_tensor_t **err) {
    int nd = ti_ndim(x), n = nd > 1 ? nd : 1;
    *err = NULL;
    if (axis < -n || axis >= n) {
        *err = tc_fail(x, TACT_EINVAL, "%s: axis %d out of range [%d, %d] of a %d-dim tensor", op, axis, -n, n - 1, nd);
        return 0;
    }
    return axis < 0 ? axis + nd : axis;
}

/* The first index of the maximum: (x == max) times a descending arange,
 * its max, taken from the length (int32). */
ti_tensor_t *ti_argmax(ti_tensor_t *x, int axis, int all, int keepdim) {
    TC_CHECK(x);
    if (all) return ti_argmax(ti_flatten(x, 0, -1), 0, 0, 0);
    ti_tensor_t *err;
    int a = s_axis(x, axis, "argmax", &err);
    if (err) return err;
    if (!ti_ndim(x)) return ti_cast(ti_mul(x, s_int(x, 0)), TACT_INT32);
    int64_t len = ti_dim(x, a), sh[TA_MAX_DIMS];
    int nd = ti_ndim(x);
    ti_tensor_t *m = ti_eq(x, ti_max(x, 1, &a, 1));
    sh[0] = len;
    for (int k = 1; k < nd - a; k++) sh[k] = 1;
    ti_tensor_t *desc = ti_reshape(tc_arange_like(x, (double)len - 1, -1, -1, TACT_INT32), nd - a, sh);
    ti_tensor_t *idx = ti_mul(m, desc);
    return ti_cast(ti_sub(ti_sub(s_int(x, len), ti_max(idx, 1, &a, keepdim)), s_int(x, 1)), TACT_INT32);
}

ti_tensor_t *ti_argmin(ti_tensor_t *x, int axis, int all, int keepdim) { return ti_argmax(ti_neg(x), axis, all, keepdim); }

/* The reference's _cumsum: a pool of windows of the whole axis over x
 * padded on the left, summed (first_zero: shifted by one, from 0). */
static ti_tensor_t *s_cumsum1(ti_tensor_t *x, int axis, int first_zero) {
    int64_t len = ti_dim(x, axis), pl = len - (first_zero ? 0 : 1);
    ti_tensor_t *t = ti_pad2d(ti_transpose(x, axis, -1), 2, (int64_t[]){pl, first_zero ? -1 : 0}, 0);
    /* _pool((len,)) with stride 1: windows of len consecutive elements */
    int nd = ti_ndim(t);
    int64_t n = ti_dim(t, nd - 1), o = n - len + 1, rep[TA_MAX_DIMS], sh[TA_MAX_DIMS], r[TA_MAX_DIMS][2], dims[TA_MAX_DIMS];
    ti_shape(t, sh);
    for (int k = 0; k < nd - 1; k++) rep[k] = 1;
    rep[nd - 1] = (len * (n + 1) + n - 1) / n;
    ti_tensor_t *u = ti_repeat(t, nd, rep);
    for (int k = 0; k < nd - 1; k++) r[k][0] = 0, r[k][1] = sh[k], dims[k] = sh[k];
    r[nd - 1][0] = 0, r[nd - 1][1] = len * (n + 1);
    u = ti_shrink(u, r);
    dims[nd - 1] = len, dims[nd] = n + 1;
    u = ti_reshape(u, nd + 1, dims);
    for (int k = 0; k < nd - 1; k++) r[k][0] = 0, r[k][1] = sh[k];
    r[nd - 1][0] = 0, r[nd - 1][1] = len, r[nd][0] = 0, r[nd][1] = o;
    u = ti_shrink(u, r); /* (..., len, o): element j of window i is t[i + j] */
    int last = -2;       /* sum over the window */
    u = ti_sum(u, 1, &last, 0);
    return ti_transpose(u, axis, -1);
}

/* Up to 512 elements in one pass; longer axes in runs of 256, each run's
 * sums plus the sums of the runs before it, as the reference. */
ti_tensor_t *ti_cumsum(ti_tensor_t *x, int axis) {
    TC_CHECK(x);
    ti_tensor_t *err;
    int a = s_axis(x, axis, "cumsum", &err);
    if (err) return err;
    if (!ti_ndim(x) || !ti_numel(x)) return x;
    if (ti_ndim(x) + 2 > TA_MAX_DIMS) return tc_fail(x, TACT_ESHAPE, "cumsum: %d dims (at most %d)", ti_ndim(x), TA_MAX_DIMS - 2);
    enum { SPLIT = 256 };
    int64_t len = ti_dim(x, a);
    if (len <= 2 * SPLIT) return s_cumsum1(x, a, 0);
    int64_t up = (len + SPLIT - 1) / SPLIT * SPLIT;
    ti_tensor_t *ret = ti_pad2d(ti_transpose(x, a, -1), 2, (int64_t[]){up - len, 0}, 0);
    ret = ti_unflatten(ret, -1, 2, (int64_t[]){up / SPLIT, SPLIT});
    int nd = ti_ndim(ret);
    ret = s_cumsum1(ret, nd - 1, 0);
    int64_t r[TA_MAX_DIMS][2], sh[TA_MAX_DIMS];
    ti_shape(ret, sh);
    for (int k = 0; k < nd; k++) r[k][0] = 0, r[k][1] = sh[k];
    r[nd - 1][0] = SPLIT - 1;
    ti_tensor_t *last = ti_reshape(ti_shrink(ret, r), nd - 1, sh); /* ret[..., -1] */
    ti_tensor_t *base = s_cumsum1(last, nd - 2, 1);
    base = ti_expand(ti_unsqueeze(base, -1), nd, sh);
    /* fix: flatten the last two dims, keep the last len, transpose back */
    ti_tensor_t *parts[2] = {ret, base};
    for (int i = 0; i < 2; i++) {
        ti_tensor_t *f = ti_flatten(parts[i], nd - 2, nd - 1);
        int64_t fr[TA_MAX_DIMS][2], fs[TA_MAX_DIMS];
        ti_shape(f, fs);
        for (int k = 0; k < nd - 1; k++) fr[k][0] = 0, fr[k][1] = fs[k];
        fr[nd - 2][0] = fs[nd - 2] - len;
        parts[i] = ti_transpose(ti_shrink(f, fr), a, -1);
    }
    return ti_add(parts[0], parts[1]);
}

/* A bool (r, c) mask: true where column - row >= diagonal. */
static ti_tensor_t *s_tri(ti_tensor_t *x, int64_t r, int64_t c, int64_t diagonal) {
    ti_tensor_t *rows = ti_reshape(tc_arange_like(x, 0, (double)r, 1, TACT_INT32), 2, (int64_t[]){r, 1});
    ti_tensor_t *cols = ti_reshape(tc_arange_like(x, 0, (double)c, 1, TACT_INT32), 2, (int64_t[]){1, c});
    return ti_ge(ti_sub(cols, rows), s_int(x, diagonal));
}

ti_tensor_t *ti_triu(ti_tensor_t *x, int64_t diagonal) {
    TC_CHECK(x);
    int nd = ti_ndim(x);
    if (nd < 2) return tc_fail(x, TACT_ESHAPE, "triu: needs at least 2 dims, got %d", nd);
    if (!ti_numel(x)) return x;
    ti_tensor_t *m = s_tri(x, ti_dim(x, nd - 2), ti_dim(x, nd - 1), diagonal);
    return ti_cast(ti_where(m, x, s_int(x, 0)), ti_dtype_of(x));
}

ti_tensor_t *ti_tril(ti_tensor_t *x, int64_t diagonal) {
    TC_CHECK(x);
    int nd = ti_ndim(x);
    if (nd < 2) return tc_fail(x, TACT_ESHAPE, "tril: needs at least 2 dims, got %d", nd);
    if (!ti_numel(x)) return x;
    ti_tensor_t *m = s_tri(x, ti_dim(x, nd - 2), ti_dim(x, nd - 1), diagonal + 1);
    return ti_cast(ti_where(m, s_int(x, 0), x), ti_dtype_of(x));
}

ti_tensor_t *ti_masked_fill(ti_tensor_t *x, ti_tensor_t *mask, ti_tensor_t *value) { return ti_where(mask, value, x); }

/* b ** e = exp(e log|b|), the sign put back for a negative base with an odd
 * integer exponent, NaN for a negative base with a fractional one, and
 * 0 ** 0 = 1. */
static ti_tensor_t *s_pow_general(ti_tensor_t *b, ti_tensor_t *e) {
    ti_tensor_t *ret = ti_exp(ti_mul(ti_log(ti_abs(b)), e));
    ti_tensor_t *neg = ti_where(ti_lt(b, s_int(b, 0)), s_int(b, 1), s_int(b, 0));
    ti_tensor_t *sign = ti_add(s_int(b, 1), ti_mul(neg, ti_sub(ti_cos(ti_mul(e, s_flt(b, M_PI))), s_int(b, 1))));
    ti_tensor_t *nan = ti_where(ti_mul(neg, ti_ne(e, ti_trunc(e))), s_flt(b, NAN), s_int(b, 1));
    ti_tensor_t *zz = ti_mul(ti_eq(b, s_int(b, 0)), ti_eq(e, s_int(b, 0)));
    return ti_where(zz, s_int(b, 1), ti_mul(ti_mul(ret, sign), nan));
}

static ti_tensor_t *s_pow_const(ti_tensor_t *x, double e) {
    if (e < 0) return s_pow_const(ti_reciprocal(x), -e);
    if (e == 0) return ti_add(s_int(x, 1), ti_mul(x, s_int(x, 0)));
    if (e < 1 << 30 && (double)(int64_t)(e - 0.5) + 0.5 == e) return ti_mul(s_pow_const(x, (double)(int64_t)(e - 0.5)), ti_sqrt(x));
    if (e < 1 << 30 && (double)(int64_t)e == e) {
        ti_tensor_t *h = ti_square(s_pow_const(x, floor(e / 2)));
        return fmod(e, 2) == 0 ? h : ti_mul(h, x);
    }
    return s_pow_general(x, s_flt(x, e));
}

ti_tensor_t *ti_pow(ti_tensor_t *x, ti_tensor_t *exponent) {
    TC_CHECK(x);
    TC_CHECK(exponent);
    double e, xv;
    if (!ti_weak_value(x, &xv) && ti_weak_value(exponent, &e)) return s_pow_const(x, e);
    return s_pow_general(x, exponent);
}

ti_tensor_t *ti_lshift(ti_tensor_t *x, int64_t bits) {
    TC_CHECK(x);
    if (!ta_dtype_is_unsigned(ti_dtype_of(x)) || bits < 0 || bits > 63)
        return tc_fail(x, TACT_EDTYPE, "lshift: needs an unsigned int tensor and 0 to 63 bits, got %s and %lld", tact_dtype_name(ti_dtype_of(x)), (long long)bits);
    return ti_mul(x, ti_cast(ti_scalar_int(ti_tensor_ctx(x), (int64_t)((uint64_t)1 << bits)), ti_dtype_of(x)));
}

ti_tensor_t *ti_rshift(ti_tensor_t *x, int64_t bits) {
    TC_CHECK(x);
    if (!ta_dtype_is_unsigned(ti_dtype_of(x)) || bits < 0 || bits > 63)
        return tc_fail(x, TACT_EDTYPE, "rshift: needs an unsigned int tensor and 0 to 63 bits, got %s and %lld", tact_dtype_name(ti_dtype_of(x)), (long long)bits);
    return ti_idiv(x, ti_cast(ti_scalar_int(ti_tensor_ctx(x), (int64_t)((uint64_t)1 << bits)), ti_dtype_of(x)));
}

/* softmax(q k^T / sqrt(d) + mask) v, a bool mask (or is_causal's lower
 * triangle) meaning -inf where false; dropout on the weights when training. */
ti_tensor_t *ti_scaled_dot_product_attention(ti_tensor_t *q, ti_tensor_t *k, ti_tensor_t *v, ti_tensor_t *mask, double dropout_p, int is_causal,
                                             int training) {
    TC_CHECK(q);
    TC_CHECK(k);
    TC_CHECK(v);
    if (mask) TC_CHECK(mask);
    int nq = ti_ndim(q), nk = ti_ndim(k);
    if (nq < 2 || nk < 2) return tc_fail(q, TACT_ESHAPE, "scaled_dot_product_attention: query and key need at least 2 dims");
    ti_ctx_t *ctx = ti_tensor_ctx(q);
    if (is_causal) mask = ti_tril(ti_ones(ctx, TACT_BOOL, 2, (int64_t[]){ti_dim(q, nq - 2), ti_dim(k, nk - 2)}), 0);
    if (mask && ti_dtype_of(mask) == TACT_BOOL) mask = ti_where(ti_eq(mask, ti_scalar_bool(ctx, 0)), s_flt(q, -INFINITY), s_int(q, 0));
    tact_dtype acc = ta_dtype_promote(ta_dtype_promote(ti_dtype_of(q), ti_dtype_of(k)), TACT_FLOAT32);
    ti_tensor_t *qk = ti_div(ti_cast(ti_matmul(ti_cast(q, acc), ti_cast(ti_transpose(k, -2, -1), acc)), acc), s_flt(q, sqrt((double)ti_dim(q, nq - 1))));
    if (mask) qk = ti_add(qk, mask);
    return ti_matmul(ti_dropout(ti_cast(ti_softmax(qk, -1), ti_dtype_of(q)), dropout_p, training), v);
}

/* The weight (groups*rcin... as (cin, cout/groups, *k)) regrouped, moved
 * and flipped, x spread by the stride, then a convolution with the padding
 * that undoes the forward one (output_padding more at the end). */
ti_tensor_t *ti_conv_transpose2d(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias, const tact_window *opt) {
    TC_CHECK(x);
    TC_CHECK(weight);
    tact_window w0;
    if (!opt) tact_window_default(&w0), opt = &w0;
    int nk = ti_ndim(weight) - 2, g = opt->groups;
    if (nk < 1 || nk > 3 || ti_ndim(x) != nk + 2 || g < 1 || ti_dim(weight, 0) % g)
        return tc_fail(x, TACT_ESHAPE, "conv_transpose2d: input of %d dims, weight of %d and %d groups do not match", ti_ndim(x), nk + 2, g);
    if (opt->npad != 0 && opt->npad != 1 && opt->npad != nk)
        return tc_fail(x, TACT_EINVAL, "conv_transpose2d: %d padding amounts for %d dims (0, 1 or %d)", opt->npad, nk, nk);
    int64_t ws[TA_MAX_DIMS], st[3], dl[3], pd[3], op[3];
    ti_shape(weight, ws);
    for (int j = 0; j < nk; j++) {
        st[j] = opt->stride[j] ? opt->stride[j] : 1, dl[j] = opt->dilation[j] ? opt->dilation[j] : 1;
        pd[j] = opt->npad == 0 ? 0 : opt->npad == 1 ? opt->padding[0] : opt->padding[j];
        op[j] = opt->output_padding[j];
    }
    /* w.unflatten(0, (groups, -1)).transpose(1, 2).flip(3..) */
    ti_tensor_t *w = ti_unflatten(weight, 0, 2, (int64_t[]){g, -1});
    w = ti_transpose(w, 1, 2);
    int flips[3];
    for (int j = 0; j < nk; j++) flips[j] = 3 + j;
    w = ti_flatten(ti_flip(w, nk, flips), 0, 1);
    int any = 0;
    for (int j = 0; j < nk; j++) any |= st[j] > 1;
    if (any) {
        int64_t xs[TA_MAX_DIMS], a[TA_MAX_DIMS], pads[TA_MAX_DIMS][2] = {{0}}, b[TA_MAX_DIMS], r[TA_MAX_DIMS][2];
        ti_shape(x, xs);
        a[0] = xs[0], a[1] = xs[1];
        for (int j = 0; j < nk; j++) a[2 + 2 * j] = xs[2 + j], a[3 + 2 * j] = 1, pads[3 + 2 * j][1] = st[j] - 1;
        x = ti_pad(ti_reshape(x, 2 + 2 * nk, a), pads, 0);
        b[0] = xs[0], b[1] = xs[1];
        for (int j = 0; j < nk; j++) b[2 + j] = xs[2 + j] * st[j];
        x = ti_reshape(x, 2 + nk, b);
        r[0][0] = 0, r[0][1] = xs[0], r[1][0] = 0, r[1][1] = xs[1];
        for (int j = 0; j < nk; j++) r[2 + j][0] = 0, r[2 + j][1] = b[2 + j] - (st[j] - 1);
        x = ti_shrink(x, r);
    }
    tact_window c;
    tact_window_default(&c);
    c.ndims = nk;
    c.groups = g;
    c.npad = 2 * nk;
    for (int j = 0; j < nk; j++) {
        int64_t k = ws[2 + nk - 1 - j], d = dl[nk - 1 - j], p = pd[nk - 1 - j];
        c.padding[2 * j] = (k - 1) * d - p, c.padding[2 * j + 1] = (k - 1) * d - p + op[nk - 1 - j];
        c.dilation[j] = dl[j];
    }
    return ti_conv2d(x, w, bias, &c);
}

/* Linear interpolation of the last n dims to size, the reference's: per
 * dim, the source index (scaled, or scaled from pixel centres), clipped,
 * its floor and ceil gathered and lerped. */
ti_tensor_t *ti_interpolate(ti_tensor_t *x, int n, const int64_t *size, int align_corners) {
    TC_CHECK(x);
    int nd = ti_ndim(x);
    if (n < 1 || n > nd || !size) return tc_fail(x, TACT_EINVAL, "interpolate: %d sizes for a %d-dim tensor (1 to its dims)", n, nd);
    int64_t sh[TA_MAX_DIMS], expand[TA_MAX_DIMS];
    ti_shape(x, sh);
    ti_shape(x, expand);
    ti_ctx_t *ctx = ti_tensor_ctx(x);
    for (int i = -n; i < 0; i++) {
        int d = nd + i;
        int64_t out = size[n + i];
        if (out < 1) return tc_fail(x, TACT_EINVAL, "interpolate: size %lld", (long long)out);
        /* One output with align_corners is the first corner, as PyTorch
         * (the reference divides by zero there and gives NaN). */
        double scale = align_corners && out == 1 ? 0 : (double)(sh[d] - align_corners) / (double)(out - align_corners);
        ti_tensor_t *arr = tc_arange_like(x, 0, (double)out, 1, TACT_FLOAT32);
        ti_tensor_t *index = align_corners ? ti_mul(ti_scalar(ctx, scale), arr) : ti_sub(ti_mul(ti_scalar(ctx, scale), ti_add(arr, ti_scalar(ctx, 0.5))), ti_scalar(ctx, 0.5));
        index = ti_clip(index, 0, (double)(sh[d] - 1));
        int64_t rs[TA_MAX_DIMS];
        for (int k = 0; k < nd; k++) rs[k] = 1;
        rs[d] = out, expand[d] = out;
        ti_tensor_t *lo = ti_expand(ti_reshape(ti_floor(index), nd, rs), nd, expand);
        ti_tensor_t *hi = ti_expand(ti_reshape(ti_ceil(index), nd, rs), nd, expand);
        ti_tensor_t *perc = ti_expand(ti_reshape(ti_sub(index, ti_floor(index)), nd, rs), nd, expand);
        x = ti_lerp(ti_gather(x, d, ti_cast(lo, TACT_INT32)), ti_gather(x, d, ti_cast(hi, TACT_INT32)), perc);
    }
    return x;
}

/* The reference's einsum: every operand permuted to sorted letters and
 * expanded to all of them, multiplied, summed over the letters not in the
 * output, permuted to the output's order. */
ti_tensor_t *ti_einsum(const char *formula, int n, ti_tensor_t *const *xs) {
    if (!formula || n < 1 || !xs) return ti_neg(NULL);
    for (int i = 0; i < n; i++) TC_CHECK(xs[i]);
    char f[256], in[256], outl[64];
    int fl = 0;
    for (const char *c = formula; *c && fl < 255; c++)
        if (*c != ' ') f[fl++] = *c;
    f[fl] = 0;
    char *arrow = strstr(f, "->");
    if (arrow) {
        *arrow = 0;
        snprintf(outl, sizeof outl, "%s", arrow + 2);
    }
    snprintf(in, sizeof in, "%s", f);
    if (!arrow) { /* letters used once, sorted */
        int m = 0;
        for (int c = 'A'; c <= 'z'; c++) {
            int cnt = 0;
            for (const char *p = in; *p; p++) cnt += *p == c;
            if (cnt == 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) outl[m++] = (char)c;
        }
        outl[m] = 0;
    }
    /* operands' letters */
    const char *ops[TA_MAX_DIMS];
    int nops = 0;
    char *save = NULL;
    for (char *tok = strtok_r(in, ",", &save); tok && nops < TA_MAX_DIMS; tok = strtok_r(NULL, ",", &save)) ops[nops++] = tok;
    if (nops != n) return tc_fail(xs[0], TACT_EINVAL, "einsum: the formula has %d operands, %d tensors given", nops, n);
    /* the letters, sorted, with their sizes */
    char letters[64];
    int64_t val[64];
    int nl = 0;
    for (int i = 0; i < n; i++) {
        if ((int)strlen(ops[i]) != ti_ndim(xs[i])) return tc_fail(xs[0], TACT_ESHAPE, "einsum: operand %d has %d dims, its letters %zu", i, ti_ndim(xs[i]), strlen(ops[i]));
        for (int k = 0; ops[i][k]; k++) {
            int found = -1;
            for (int j = 0; j < nl; j++)
                if (letters[j] == ops[i][k]) found = j;
            if (found < 0 && nl < 16) letters[nl] = ops[i][k], val[nl++] = ti_dim(xs[i], k);
        }
    }
    if (nl > TA_MAX_DIMS) return tc_fail(xs[0], TACT_ESHAPE, "einsum: %d letters", nl);
    for (int a = 0; a < nl; a++) /* sort */
        for (int b = a + 1; b < nl; b++)
            if (letters[b] < letters[a]) {
                char t = letters[a];
                letters[a] = letters[b], letters[b] = t;
                int64_t v = val[a];
                val[a] = val[b], val[b] = v;
            }
    ti_tensor_t *prod = NULL;
    for (int i = 0; i < n; i++) {
        int nd = ti_ndim(xs[i]), order[TA_MAX_DIMS], o = 0;
        for (int j = 0; j < nl; j++)
            for (int k = 0; k < nd; k++)
                if (ops[i][k] == letters[j]) order[o++] = k;
        if (o != nd) return tc_fail(xs[0], TACT_EINVAL, "einsum: operand %d repeats a letter (not supported)", i);
        int64_t rs[TA_MAX_DIMS];
        for (int j = 0; j < nl; j++) rs[j] = strchr(ops[i], letters[j]) ? val[j] : 1;
        ti_tensor_t *t = ti_expand(ti_reshape(ti_permute(xs[i], order), nl, rs), nl, val);
        prod = prod ? ti_mul(prod, t) : t;
    }
    int axes[TA_MAX_DIMS], na = 0;
    for (int j = 0; j < nl; j++)
        if (!strchr(outl, letters[j])) axes[na++] = j;
    ti_tensor_t *r = na ? ti_sum(prod, na, axes, 0) : prod;
    /* kept letters are in sorted order; permute to the output's */
    int no = (int)strlen(outl), perm[TA_MAX_DIMS];
    char kept[64];
    int nkept = 0;
    for (int j = 0; j < nl; j++)
        if (strchr(outl, letters[j])) kept[nkept++] = letters[j];
    if (nkept != no) return tc_fail(xs[0], TACT_EINVAL, "einsum: the output names a letter no operand has");
    for (int k = 0; k < no; k++)
        for (int j = 0; j < nkept; j++)
            if (kept[j] == outl[k]) perm[k] = j;
    return no ? ti_permute(r, perm) : r;
}

/* Samples by inverse CDF: uniform numbers against the normalized cumsum. */
ti_tensor_t *ti_multinomial(ti_tensor_t *x, int64_t num_samples, int replacement) {
    TC_CHECK(x);
    int nd = ti_ndim(x);
    if (nd < 1 || nd > 2 || num_samples < 1) return tc_fail(x, TACT_EINVAL, "multinomial: a %d-dim tensor and %lld samples (1 or 2 dims, at least 1)", nd, (long long)num_samples);
    if (!replacement && num_samples != 1) return tc_fail(x, TACT_EINVAL, "multinomial: without replacement only one sample (as the reference)");
    ti_tensor_t *w = nd == 1 ? ti_unsqueeze(x, 0) : x;
    ti_tensor_t *cw = ti_cast(ti_cumsum(w, 1), TACT_FLOAT32);
    int64_t rows = ti_dim(w, 0), cols = ti_dim(w, 1);
    ti_tensor_t *lastcol = ti_getitem(cw, 2, (ti_index_t[]){{TACT_IDX_SLICE, 0, 0, 0, 0, 0, 0, NULL}, {TACT_IDX_INT, -1, 0, 0, 1, 0, 0, NULL}});
    ti_tensor_t *cdf = ti_div(cw, ti_unsqueeze(lastcol, 1));
    ti_tensor_t *u = ti_rand(ti_tensor_ctx(x), TACT_FLOAT32, 3, (int64_t[]){num_samples, rows, 1});
    ti_tensor_t *idx = ti_sum(ti_ge(ti_expand(u, 3, (int64_t[]){num_samples, rows, cols}), cdf), 1, (int[]){2}, 0);
    idx = ti_permute(idx, (int[]){1, 0});
    return ti_cast(nd == 1 ? ti_squeeze(idx, 1, (int[]){0}) : idx, TACT_INT32);
}
