/* client_nn.c - the reference's windowed and nn functions (conv2d, avg_pool2d, max_pool2d, linear, layernorm,
 * batchnorm, one_hot, the cross entropies) and comparisons, composed from the primitives as tensor.py composes
 * them: a convolution is a pooling view (_pool) times the weight, summed, which the scheduler makes one kernel, or,
 * for wide windows, the windows laid out as columns and a matmul (s_conv_unfolded). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client_core.h"
#include "client_impl.h"
#include "dtype.h"
#include "shape.h"

void tact_window_default(tact_window *w) {
    if (!w) return;
    memset(w, 0, sizeof *w);
    w->ndims = 2;
    for (int i = 0; i < 3; i++) w->kernel[i] = 2, w->dilation[i] = 1;
    w->groups = 1;
    w->count_include_pad = 1;
}

/* The reference's _padding2d: one amount for every side, one per dim (both
 * sides), or (left, right, top, bottom, ...) as pad2d takes them. */
static int s_padding(const tact_window *w, int64_t *out) {
    int n = w->ndims;
    if (w->npad == 0 || w->npad == 1) {
        for (int i = 0; i < 2 * n; i++) out[i] = w->npad ? w->padding[0] : 0;
    } else if (w->npad == n) {
        for (int i = 0; i < n; i++) out[2 * i] = out[2 * i + 1] = w->padding[n - 1 - i];
    } else if (w->npad == 2 * n) {
        for (int i = 0; i < 2 * n; i++) out[i] = w->padding[i];
    } else {
        return -1;
    }
    return 0;
}

/* Window sizes, strides, dilations and paddings are at most this: the
 * shapes computed from them cannot overflow. */
#define S_WINDOW_MAX (INT64_C(1) << 31)

static int s_window_ok(ti_tensor_t *x, const tact_window *w, const char *op, ti_tensor_t **err) {
    *err = NULL;
    if (w->ndims < 1 || w->ndims > 3 || w->ndims > ti_ndim(x))
        return *err = tc_fail(x, TACT_EINVAL, "%s: %d spatial dims for a %d-dim tensor (1 to 3, no more than its dims)", op, w->ndims, ti_ndim(x)), -1;
    for (int i = 0; i < w->ndims; i++)
        if (w->kernel[i] < 1 || w->stride[i] < 0 || w->dilation[i] < 1 || w->kernel[i] > S_WINDOW_MAX || w->stride[i] > S_WINDOW_MAX ||
            w->dilation[i] > S_WINDOW_MAX)
            return *err = tc_fail(x, TACT_EINVAL, "%s: kernel %lld, stride %lld, dilation %lld (kernel and dilation at least 1, each at most 2^31)", op,
                                 (long long)w->kernel[i], (long long)w->stride[i], (long long)w->dilation[i]),
                   -1;
    for (int i = 0; i < w->npad && i < 6; i++)
        if (w->padding[i] > S_WINDOW_MAX || w->padding[i] < -S_WINDOW_MAX)
            return *err = tc_fail(x, TACT_EINVAL, "%s: padding %lld (at most 2^31 either way)", op, (long long)w->padding[i]), -1;
    return 0;
}

/* The reference's _pool: (..., *i) to (..., *o, *k), each output's window
 * as a view (repeats where windows overlap or dilate, so no padding). */
static ti_tensor_t *s_pool(ti_tensor_t *x, int nk, const int64_t *k, const int64_t *s, const int64_t *d) {
    TC_CHECK(x);
    int nd = ti_ndim(x), nn = nd - nk;
    int64_t sh[TA_MAX_DIMS], in[3], o[3];
    ti_shape(x, sh);
    int overlap = 0;
    for (int j = 0; j < nk; j++) {
        in[j] = sh[nn + j];
        int64_t span = in[j] - d[j] * (k[j] - 1);
        o[j] = span > 0 ? (span + s[j] - 1) / s[j] : 0;
        overlap |= k[j] > s[j] || d[j] != 1;
        if (o[j] <= 0) return tc_fail(x, TACT_ESHAPE, "pool: a window of %lld (dilation %lld) does not fit in %lld", (long long)k[j], (long long)d[j], (long long)in[j]);
    }
    if (nn + 3 * nk > TA_MAX_DIMS) return tc_fail(x, TACT_ESHAPE, "pool: %d dims and %d windowed ones are too many", nd, nk);
    int64_t r[TA_MAX_DIMS][2], dims[TA_MAX_DIMS], rep[TA_MAX_DIMS];
    int m;
    if (overlap) {
        for (int i = 0; i < nn; i++) rep[i] = 1;
        for (int j = 0; j < nk; j++) rep[nn + j] = (k[j] * (in[j] + d[j]) + in[j] - 1) / in[j];
        ti_tensor_t *xup = ti_repeat(x, nd, rep);
        /* dilation */
        for (int i = 0; i < nn; i++) r[i][0] = 0, r[i][1] = sh[i], dims[i] = sh[i];
        for (int j = 0; j < nk; j++) r[nn + j][0] = 0, r[nn + j][1] = k[j] * (in[j] + d[j]);
        xup = ti_shrink(xup, r);
        m = nn;
        for (int j = 0; j < nk; j++) dims[m++] = k[j], dims[m++] = in[j] + d[j];
        xup = ti_reshape(xup, m, dims);
        /* stride */
        for (int j = 0; j < nk; j++) r[nn + 2 * j][0] = 0, r[nn + 2 * j][1] = k[j], r[nn + 2 * j + 1][0] = 0, r[nn + 2 * j + 1][1] = o[j] * s[j];
        for (int i = 0; i < nn; i++) r[i][0] = 0, r[i][1] = sh[i];
        xup = ti_shrink(xup, r);
        m = nn;
        for (int j = 0; j < nk; j++) dims[m++] = k[j], dims[m++] = o[j], dims[m++] = s[j];
        xup = ti_reshape(xup, m, dims);
        for (int i = 0; i < nn; i++) r[i][0] = 0, r[i][1] = sh[i];
        for (int j = 0; j < nk; j++) {
            int b = nn + 3 * j;
            r[b][0] = 0, r[b][1] = k[j], r[b + 1][0] = 0, r[b + 1][1] = o[j], r[b + 2][0] = 0, r[b + 2][1] = 1;
        }
        xup = ti_shrink(xup, r);
        m = nn;
        for (int j = 0; j < nk; j++) dims[m++] = k[j], dims[m++] = o[j];
        xup = ti_reshape(xup, m, dims);
        int order[TA_MAX_DIMS];
        for (int i = 0; i < nn; i++) order[i] = i;
        for (int j = 0; j < nk; j++) order[nn + j] = nn + 2 * j + 1, order[nn + nk + j] = nn + 2 * j;
        return ti_permute(xup, order);
    }
    int64_t pads[TA_MAX_DIMS][2] = {{0}};
    for (int j = 0; j < nk; j++) pads[nn + j][1] = o[j] * s[j] - in[j] > 0 ? o[j] * s[j] - in[j] : 0;
    ti_tensor_t *xup = ti_pad(x, pads, 0);
    for (int i = 0; i < nn; i++) r[i][0] = 0, r[i][1] = sh[i], dims[i] = sh[i];
    for (int j = 0; j < nk; j++) r[nn + j][0] = 0, r[nn + j][1] = o[j] * s[j];
    xup = ti_shrink(xup, r);
    m = nn;
    for (int j = 0; j < nk; j++) dims[m++] = o[j], dims[m++] = s[j];
    xup = ti_reshape(xup, m, dims);
    for (int j = 0; j < nk; j++) r[nn + 2 * j][0] = 0, r[nn + 2 * j][1] = o[j], r[nn + 2 * j + 1][0] = 0, r[nn + 2 * j + 1][1] = k[j];
    xup = ti_shrink(xup, r);
    int order[TA_MAX_DIMS];
    for (int i = 0; i < nn; i++) order[i] = i;
    for (int j = 0; j < nk; j++) order[nn + j] = nn + 2 * j, order[nn + nk + j] = nn + 2 * j + 1;
    return ti_permute(xup, order);
}

/* pad2d then _pool with the window's stride (default: the kernel) and dilation. */
static ti_tensor_t *s_padded_pool(ti_tensor_t *x, const tact_window *w, const int64_t *k, double value, int stride_is_kernel, const char *op) {
    int64_t pad[6], s[3], d[3];
    if (s_padding(w, pad) != 0) return tc_fail(x, TACT_EINVAL, "%s: %d padding amounts for %d dims (0, 1, %d or %d)", op, w->npad, w->ndims, w->ndims, 2 * w->ndims);
    for (int j = 0; j < w->ndims; j++) s[j] = w->stride[j] ? w->stride[j] : stride_is_kernel ? k[j] : 1, d[j] = w->dilation[j];
    return s_pool(ti_pad2d(x, 2 * w->ndims, pad, value), w->ndims, k, s, d);
}

ti_tensor_t *ti_avg_pool2d(ti_tensor_t *x, const tact_window *opt) {
    TC_CHECK(x);
    tact_window w;
    if (!opt) tact_window_default(&w), opt = &w;
    ti_tensor_t *err;
    if (s_window_ok(x, opt, "avg_pool2d", &err)) return err;
    int axes[3], n = opt->ndims;
    for (int j = 0; j < n; j++) axes[j] = j - n;
    ti_tensor_t *p = s_padded_pool(x, opt, opt->kernel, 0, 1, "avg_pool2d");
    if (opt->count_include_pad) return ti_mean(p, n, axes, 0);
    int64_t sh[TA_MAX_DIMS];
    ti_shape(x, sh);
    ti_tensor_t *ones = s_padded_pool(ti_ones(ti_tensor_ctx(x), ti_dtype_of(x), ti_ndim(x), sh), opt, opt->kernel, 0, 1, "avg_pool2d");
    return ti_div(ti_sum(p, n, axes, 0), ti_sum(ones, n, axes, 0));
}

ti_tensor_t *ti_max_pool2d(ti_tensor_t *x, const tact_window *opt) {
    TC_CHECK(x);
    tact_window w;
    if (!opt) tact_window_default(&w), opt = &w;
    ti_tensor_t *err;
    if (s_window_ok(x, opt, "max_pool2d", &err)) return err;
    int axes[3], n = opt->ndims;
    for (int j = 0; j < n; j++) axes[j] = j - n;
    return ti_max(s_padded_pool(x, opt, opt->kernel, -INFINITY, 1, "max_pool2d"), n, axes, 0);
}

/* The convolution's sums r, of shape (bs, g, rc, *o, 1, ...) with n dims,
 * plus the bias, as (bs, g * rc, *o).  The bias is added before the
 * reshape, in the reduce's own shape, so the scheduler fuses it into the
 * reduce's kernel; the same values as the reference's add after it. */
/* The sums r of a convolution whose operands promote to d (16-bit floats
 * were widened: ti_widened), plus bias, in the output's shape. */
static ti_tensor_t *s_conv_out(ti_tensor_t *r, tact_dtype d, ti_tensor_t *bias, int n, int64_t bs, int64_t g, int64_t rc, int nk, const int64_t *o) {
    if (ta_dtype_is_half(d)) r = ti_cast(r, d);
    if (bias) {
        int64_t bsh[TA_MAX_DIMS];
        for (int j = 0; j < n; j++) bsh[j] = 1;
        bsh[1] = g, bsh[2] = rc;
        r = ti_add(r, ti_reshape(bias, n, bsh));
    }
    int k = 0;
    int64_t out[TA_MAX_DIMS];
    out[k++] = bs, out[k++] = g * rc;
    for (int j = 0; j < nk; j++) out[k++] = o[j];
    return ti_reshape(r, k, out);
}

/* Elements start, start+step, ... (count of them) of dim j. */
static ti_tensor_t *s_every(ti_tensor_t *x, int j, int64_t start, int64_t count, int64_t step) {
    int nd = ti_ndim(x);
    int64_t sh[TA_MAX_DIMS], r[TA_MAX_DIMS][2], pads[TA_MAX_DIMS][2] = {{0}};
    ti_shape(x, sh);
    for (int i = 0; i < nd; i++) r[i][0] = 0, r[i][1] = sh[i];
    r[j][0] = start, r[j][1] = start + (count - 1) * step + 1;
    x = ti_shrink(x, r);
    if (step == 1) return x;
    pads[j][1] = step - 1;
    x = ti_pad(x, pads, 0);
    int64_t d[TA_MAX_DIMS];
    int m = 0;
    for (int i = 0; i < nd; i++) {
        if (i == j) d[m++] = count, d[m++] = step;
        else d[m++] = sh[i];
    }
    x = ti_reshape(x, m, d);
    for (int i = 0; i < m; i++) r[i][0] = 0, r[i][1] = d[i];
    r[j + 1][1] = 1;
    x = ti_shrink(x, r);
    for (int i = 0; i < nd; i++) d[i] = i == j ? count : sh[i];
    return ti_reshape(x, nd, d);
}

/* conv2d as columns and a matmul: the windows of the padded input laid
 * out contiguously (bs, g, *o, cin * prod(k)), one piece per window
 * offset, then summed against the weight's rows along that one contiguous
 * axis.  The reduce is then a matmul's (vectors, register tiles) instead
 * of a masked gather per product, and its gradients are matmuls too, plus
 * a sum of the pieces' shifted views for the input.  Taken when the
 * windows hold at least S_UNFOLD_MIN values (a shorter reduce gains
 * nothing from vectors), at most S_UNFOLD_PIECES offsets (the stack of
 * pieces then fits one kernel: TA_AST_MAX_VIEWS), and one sample's
 * columns take at most S_UNFOLD_SAMPLE_BYTES (they are its input copied
 * prod(k) times); NULL otherwise, and the pooling view below computes the
 * same values.  The choice never depends on the batch, so a sample's
 * bits do not either (DESIGN.md §2, batch invariance). */
enum { S_UNFOLD_MIN = 16, S_UNFOLD_PIECES = 27 };
#define S_UNFOLD_SAMPLE_BYTES (4.0 * 1024 * 1024)
static ti_tensor_t *s_conv_unfolded(ti_tensor_t *x, ti_tensor_t *weight, tact_dtype dt, ti_tensor_t *bias, const tact_window *w) {
    int nk = w->ndims;
    int64_t pad[6], xs[TA_MAX_DIMS], ws[TA_MAX_DIMS], o[3], s[3], kprod = 1;
    if (s_padding(w, pad) != 0) return NULL;
    ti_shape(weight, ws);
    for (int j = 0; j < nk; j++) kprod *= ws[2 + j];
    if (kprod > S_UNFOLD_PIECES || ws[1] * kprod < S_UNFOLD_MIN) return NULL;
    ti_shape(x, xs);
    double bytes = (double)ta_dtype_size(ti_dtype_of(x)) * (double)ws[1] * (double)w->groups * (double)kprod; /* one sample's */
    for (int j = 0; j < nk; j++) {
        s[j] = w->stride[j] ? w->stride[j] : 1;
        int64_t span = xs[2 + j] + pad[2 * (nk - 1 - j)] + pad[2 * (nk - 1 - j) + 1] - w->dilation[j] * (ws[2 + j] - 1);
        o[j] = span > 0 ? (span + s[j] - 1) / s[j] : 0;
        if (o[j] <= 0) return NULL;
        bytes *= (double)o[j];
    }
    if (bytes > S_UNFOLD_SAMPLE_BYTES) return NULL;
    ti_tensor_t *xp = ti_pad2d(x, 2 * nk, pad, 0);
    if (ti_status_of(xp)) return xp;
    ti_shape(xp, xs);
    ti_tensor_t *pieces[S_UNFOLD_PIECES];
    for (int64_t q = 0; q < kprod; q++) {
        ti_tensor_t *v = xp;
        int64_t rest = q;
        for (int j = nk - 1; j >= 0; j--) {
            int64_t kj = rest % ws[2 + j];
            rest /= ws[2 + j];
            v = s_every(v, 2 + j, kj * w->dilation[j], o[j], s[j]);
        }
        pieces[q] = v;
    }
    int64_t g = w->groups, bs = xs[0], cin = ws[1], rc = ws[0] / g, d[TA_MAX_DIMS];
    ti_tensor_t *cols = ti_stack((int)kprod, pieces, -1); /* (bs, g*cin, *o, K) */
    int m = 0;
    d[m++] = bs, d[m++] = g, d[m++] = cin;
    for (int j = 0; j < nk; j++) d[m++] = o[j];
    d[m++] = kprod;
    cols = ti_reshape(cols, m, d);
    int order[TA_MAX_DIMS], q = 0;
    order[q++] = 0, order[q++] = 1;
    for (int j = 0; j < nk; j++) order[q++] = 3 + j;
    order[q++] = 2, order[q++] = 3 + nk;
    cols = ti_contiguous(ti_permute(cols, order)); /* (bs, g, *o, cin, K) */
    m = 0;
    d[m++] = bs, d[m++] = g, d[m++] = 1;
    for (int j = 0; j < nk; j++) d[m++] = o[j];
    d[m++] = cin * kprod;
    cols = ti_reshape(cols, m, d);
    int64_t e[TA_MAX_DIMS], wr[TA_MAX_DIMS];
    memcpy(e, d, sizeof(int64_t) * (size_t)m);
    e[2] = rc;
    int n = 0;
    wr[n++] = 1, wr[n++] = g, wr[n++] = rc;
    for (int j = 0; j < nk; j++) wr[n++] = 1;
    wr[n++] = cin * kprod;
    int axis = -1;
    ti_tensor_t *r = ti_sum(ti_mul(ti_expand(cols, m, e), ti_reshape(weight, n, wr)), 1, &axis, 1);
    return s_conv_out(r, dt, bias, n, bs, g, rc, nk, o);
}

/* x (bs, groups*cin, *i), weight (cout, cin, *k): the pool view (bs,
 * groups, rcout, *o, cin, *k) times the weight, summed over cin and *k. */
ti_tensor_t *ti_conv2d(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias, const tact_window *opt) {
    TC_CHECK(x);
    TC_CHECK(weight);
    if (bias) TC_CHECK(bias);
    tact_window w;
    if (!opt) tact_window_default(&w), opt = &w;
    int nk = ti_ndim(weight) - 2, nd = ti_ndim(x);
    tact_window ww = *opt;
    ww.ndims = nk;
    int64_t xs[TA_MAX_DIMS], ws[TA_MAX_DIMS];
    ti_shape(x, xs);
    ti_shape(weight, ws);
    if (nk < 1 || nk > 3 || nd != nk + 2) return tc_fail(x, TACT_ESHAPE, "conv2d: input of %d dims and weight of %d (the same, 3 to 5)", nd, nk + 2);
    for (int j = 0; j < nk; j++) ww.kernel[j] = ws[2 + j];
    ti_tensor_t *err;
    if (s_window_ok(x, &ww, "conv2d", &err)) return err;
    int64_t g = opt->groups, bs = xs[0], cout = ws[0], cin = ws[1];
    if (g < 1 || g * cin != xs[1] || cout % g)
        return tc_fail(x, TACT_ESHAPE, "conv2d: input of %lld channels, weight (%lld, %lld, ...) and %lld groups do not match (groups x weight's in = input's, groups divide out)",
                      (long long)xs[1], (long long)cout, (long long)cin, (long long)g);
    tact_dtype dt = ta_dtype_promote(ti_dtype_of(x), ti_dtype_of(weight));
    x = ti_widened(x, dt), weight = ti_widened(weight, dt);
    ti_tensor_t *unfolded = s_conv_unfolded(x, weight, dt, bias, &ww);
    if (unfolded) return unfolded;
    /* The padded input gets a buffer of its own (a copy of its size), so
     * the convolution and its weight gradient read it without masks:
     * masked kernels get no vectors (docs/codegen-ir.md). */
    int64_t pad[6];
    int padded = 0;
    if (s_padding(&ww, pad) == 0)
        for (int j = 0; j < 2 * nk; j++) padded |= pad[j] > 0;
    if (padded) {
        x = ti_contiguous(ti_pad2d(x, 2 * nk, pad, 0));
        ww.npad = 0;
    }
    ti_tensor_t *p = s_padded_pool(x, &ww, ww.kernel, 0, 0, "conv2d"); /* (bs, g*cin, *o, *k) */
    if (ti_status_of(p)) return p;
    int64_t ps[TA_MAX_DIMS], rc = cout / g, a[TA_MAX_DIMS], e[TA_MAX_DIMS], wr[TA_MAX_DIMS];
    ti_shape(p, ps);
    int m = 0;
    a[m++] = bs, a[m++] = g, a[m++] = cin, a[m++] = 1;
    for (int j = 0; j < 2 * nk; j++) a[m++] = ps[2 + j];
    memcpy(e, a, sizeof(int64_t) * (size_t)m);
    e[3] = rc;
    int order[TA_MAX_DIMS], q = 0;
    order[q++] = 0, order[q++] = 1, order[q++] = 3;
    for (int j = 0; j < nk; j++) order[q++] = 4 + j;
    order[q++] = 2;
    for (int j = 0; j < nk; j++) order[q++] = 4 + nk + j;
    ti_tensor_t *v = ti_permute(ti_expand(ti_reshape(p, m, a), m, e), order);
    int n = 0;
    wr[n++] = 1, wr[n++] = g, wr[n++] = rc;
    for (int j = 0; j < nk; j++) wr[n++] = 1;
    wr[n++] = cin;
    for (int j = 0; j < nk; j++) wr[n++] = ws[2 + j];
    int axes[4];
    for (int j = 0; j <= nk; j++) axes[j] = -1 - j;
    ti_tensor_t *r = ti_sum(ti_mul(v, ti_reshape(weight, n, wr)), nk + 1, axes, 1);
    return s_conv_out(r, dt, bias, n, bs, g, rc, nk, ps + 2);
}

/* x.dot(weight) (weight (in, out), as the reference: not PyTorch's (out, in)),
 * or x * weight for a 1-dim weight, plus bias. */
ti_tensor_t *ti_linear(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias) {
    TC_CHECK(weight);
    ti_tensor_t *r = ti_ndim(weight) == 1 ? ti_mul(x, weight) : ti_matmul(x, weight);
    return bias ? ti_add(r, bias) : r;
}

ti_tensor_t *ti_layernorm(ti_tensor_t *x, int naxes, const int *axes, double eps) {
    TC_CHECK(x);
    ti_tensor_t *y = ti_sub(x, ti_mean(x, naxes, axes, 1));
    return ti_mul(y, ti_rsqrt(ti_add(ti_mean(ti_mul(y, y), naxes, axes, 1), tc_k(x, eps))));
}

/* (x - mean) * weight * invstd + bias, the per-channel tensors along axis
 * (weight and bias may be NULL). */
ti_tensor_t *ti_batchnorm(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias, ti_tensor_t *mean, ti_tensor_t *invstd, int axis) {
    TC_CHECK(x);
    TC_CHECK(mean);
    TC_CHECK(invstd);
    int nd = ti_ndim(x), a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd) return tc_fail(x, TACT_EINVAL, "batchnorm: axis %d of a %d-dim tensor", axis, nd);
    int64_t sh[TA_MAX_DIMS];
    for (int k = 0; k < nd; k++) sh[k] = k == a ? ti_dim(x, k) : 1;
    ti_tensor_t *y = ti_sub(x, ti_reshape(mean, nd, sh));
    if (weight) y = ti_mul(y, ti_reshape(weight, nd, sh));
    y = ti_mul(y, ti_ndim(invstd) == 1 ? ti_reshape(invstd, nd, sh) : invstd);
    return bias ? ti_add(y, ti_reshape(bias, nd, sh)) : y;
}

/* int32: 1 where the last dim's index equals x's value. */
ti_tensor_t *ti_one_hot(ti_tensor_t *x, int64_t num_classes) {
    TC_CHECK(x);
    if (num_classes < 0) return tc_fail(x, TACT_EINVAL, "one_hot: %lld classes", (long long)num_classes);
    ti_tensor_t *ar = tc_arange_like(x, 0, (double)num_classes, 1, TACT_INT32);
    ti_tensor_t *eq = ti_logical_not(ti_cmpne(ti_unsqueeze(x, -1), ar));
    return ti_where(eq, ti_scalar_int(ti_tensor_ctx(x), 1), ti_scalar_int(ti_tensor_ctx(x), 0));
}

ti_tensor_t *ti_binary_crossentropy(ti_tensor_t *x, ti_tensor_t *y) {
    TC_CHECK(x);
    TC_CHECK(y);
    ti_tensor_t *a = ti_mul(ti_neg(y), ti_log(x)), *b = ti_mul(ti_sub(tc_k(y, 1), y), ti_log(ti_sub(tc_k(x, 1), x)));
    return ti_mean(ti_sub(a, b), -1, NULL, 0);
}

ti_tensor_t *ti_binary_crossentropy_logits(ti_tensor_t *x, ti_tensor_t *y) {
    TC_CHECK(x);
    TC_CHECK(y);
    ti_tensor_t *t = ti_add(ti_sub(ti_maximum(x, tc_k(x, 0)), ti_mul(y, x)), ti_log(ti_add(tc_k(x, 1), ti_exp(ti_neg(ti_abs(x))))));
    return ti_mean(t, -1, NULL, 0);
}

/* Mean over the labels not ignore_index of -log_softmax at the label, with
 * label smoothing as the reference. */
ti_tensor_t *ti_sparse_categorical_crossentropy(ti_tensor_t *x, ti_tensor_t *labels, int64_t ignore_index, double label_smoothing) {
    TC_CHECK(x);
    TC_CHECK(labels);
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return tc_fail(x, TACT_EINVAL, "sparse_categorical_crossentropy: label_smoothing %g is not in [0, 1]", label_smoothing);
    if (ti_ndim(x) < 1) return tc_fail(x, TACT_ESHAPE, "sparse_categorical_crossentropy: logits need a class dim");
    /* Labels are class indices: a float label (a one-hot row, a
     * probability) would be compared with the indices and silently give a
     * wrong loss. */
    if (!ta_dtype_is_int(ti_dtype_of(labels)))
        return tc_fail(x, TACT_EDTYPE, "sparse_categorical_crossentropy: the labels are %s; they must be integers (class indices)",
                       ta_dtype_name(ti_dtype_of(labels)));
    ta_shape_t want = x->shape;
    want.ndim--;
    if (!ta_shape_equal(&want, &labels->shape)) {
        char a[128], b[128];
        ta_shape_format(&x->shape, a, sizeof a);
        ta_shape_format(&labels->shape, b, sizeof b);
        return tc_fail(x, TACT_ESHAPE, "sparse_categorical_crossentropy: labels of shape %s for logits of shape %s (want the logits' shape without its last dim)",
                       b, a);
    }
    int64_t c = ti_dim(x, ti_ndim(x) - 1), n = ti_numel(labels), ysh[TA_MAX_DIMS];
    ti_tensor_t *lp = ti_log_softmax(x, -1);
    ti_tensor_t *mask = ti_cmpne(labels, ti_scalar_int(ti_tensor_ctx(x), ignore_index));
    ti_tensor_t *counter = ti_expand(ti_unsqueeze(tc_arange_like(labels, 0, (double)c, 1, TACT_INT32), 0), 2, (int64_t[]){n, c});
    ti_tensor_t *hit = ti_logical_not(ti_cmpne(counter, ti_reshape(ti_flatten(labels, 0, -1), 2, (int64_t[]){-1, 1})));
    int nl = ti_ndim(labels);
    ti_shape(labels, ysh);
    ysh[nl] = c;
    ti_tensor_t *y = ti_reshape(ti_mul(hit, ti_reshape(mask, 2, (int64_t[]){-1, 1})), nl + 1, ysh);
    int last = -1;
    ti_tensor_t *smooth = ti_mul(tc_k(x, label_smoothing), ti_sum(ti_mul(ti_mean(lp, 1, &last, 0), mask), -1, NULL, 0));
    ti_tensor_t *main = ti_mul(tc_k(x, 1 - label_smoothing), ti_sum(ti_mul(lp, y), -1, NULL, 0));
    return ti_div(ti_neg(ti_add(main, smooth)), ti_sum(mask, -1, NULL, 0));
}

/* Comparisons: eq is not(ne), as the reference. */
ti_tensor_t *ti_eq(ti_tensor_t *a, ti_tensor_t *b) { return ti_logical_not(ti_cmpne(a, b)); }
ti_tensor_t *ti_lt(ti_tensor_t *a, ti_tensor_t *b) { return ti_cmplt(a, b); }
ti_tensor_t *ti_gt(ti_tensor_t *a, ti_tensor_t *b) { return ti_cmplt(b, a); }
/* ge and le are false at a NaN, as PyTorch (the reference's not(lt) is true). */
ti_tensor_t *ti_ge(ti_tensor_t *a, ti_tensor_t *b) { return ti_or(ti_cmplt(b, a), ti_eq(a, b)); }
ti_tensor_t *ti_le(ti_tensor_t *a, ti_tensor_t *b) { return ti_or(ti_cmplt(a, b), ti_eq(a, b)); }
ti_tensor_t *ti_ne(ti_tensor_t *a, ti_tensor_t *b) { return ti_cmpne(a, b); }
