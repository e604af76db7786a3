/* test_layers.c - the nn layers (graph/nn_layers.c) against naive double-precision loops of the reference's
 * initialization and forward rules, their gradients, named parameter lists and bad arguments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

/* Float32 results against double references: |got - want| <= ATOL + RTOL |want|,
 * unless a test states another bound. */
#define ATOL 1e-5
#define RTOL 1e-4

/* ------------------------------------------------------------ helpers */

static double s_unit(uint64_t *rng) { return (double)(tu_rand(rng) >> 11) * 0x1p-53; }

static void s_fill(float *a, int64_t n, uint64_t *rng, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) a[i] = (float)(lo + (hi - lo) * s_unit(rng));
}

static tact_ctx *s_open(uint64_t manual_seed) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK, "%s", tact_last_open_error());
    cr_assert_eq(tact_manual_seed(ctx, manual_seed), TACT_OK);
    return ctx;
}

static tact_tensor *s_floats(tact_ctx *ctx, int ndim, const int64_t *shape, const float *data) {
    return tact_from_data(ctx, TACT_FLOAT32, ndim, shape, data);
}

/* Reads n float32 elements of t into buf (t must have exactly n). */
static void s_read(tact_tensor *t, float *buf, int64_t n, uint64_t seed) {
    cr_assert_eq(tact_numel(t), n, "numel %lld, expected %lld (seed %#llx): %s", (long long)tact_numel(t), (long long)n,
                 (unsigned long long)seed, tact_error_message(t));
    int rc = tact_read(t, buf, (size_t)n * sizeof *buf);
    cr_assert_eq(rc, TACT_OK, "read: %s / %s (seed %#llx)", tact_error_message(t),
                 tact_tensor_ctx(t) ? tact_ctx_error(tact_tensor_ctx(t)) : "", (unsigned long long)seed);
}

static void s_expect_shape(tact_tensor *t, int ndim, const int64_t *shape, const char *what) {
    cr_assert_eq(tact_status_of(t), TACT_OK, "%s: %s", what, tact_error_message(t));
    cr_assert_eq(tact_ndim(t), ndim, "%s: %d dims, expected %d", what, tact_ndim(t), ndim);
    for (int k = 0; k < ndim; k++)
        cr_assert_eq(tact_dim(t, k), shape[k], "%s: dim %d is %lld, expected %lld", what, k, (long long)tact_dim(t, k), (long long)shape[k]);
}

/* Expects got[i] within atol + rtol |want[i]| of want[i]; reports at most
 * five misses, naming what and the seed. */
static void s_expect_close(const float *got, const double *want, int64_t n, double atol, double rtol, const char *what, uint64_t seed) {
    int misses = 0;
    for (int64_t i = 0; i < n && misses < 5; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (err <= atol + rtol * fabs(want[i])) continue;
        misses++;
        cr_expect(0, "%s[%lld]: tact %.9g, reference %.9g, error %.3g > %.3g (seed %#llx)", what, (long long)i, (double)got[i], want[i], err,
                  atol + rtol * fabs(want[i]), (unsigned long long)seed);
    }
}

/* Replaces a parameter's contents (a layer's ones and zeros make the
 * affine part invisible). */
static void s_set(tact_ctx *ctx, tact_tensor *target, const float *data) {
    int64_t shape[16];
    tact_shape(target, shape);
    tact_tensor *t = tact_assign(target, s_floats(ctx, tact_ndim(target), shape, data));
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
}

/* Checks an initialization: every value within [-bound, bound], the
 * largest magnitude at least tight * bound (so a smaller bound is caught:
 * with n uniform draws the chance of missing is tight^n), not all equal. */
static void s_expect_uniform_init(tact_tensor *t, int64_t n, double bound, double tight, const char *what) {
    float *v = malloc((size_t)n * sizeof *v);
    cr_assert(v);
    s_read(t, v, n, 0);
    double lo = v[0], hi = v[0], big = 0;
    for (int64_t i = 0; i < n; i++) {
        cr_expect(fabs(v[i]) <= bound * (1 + 1e-6), "%s[%lld] = %.9g beyond the bound %.9g", what, (long long)i, (double)v[i], bound);
        lo = fmin(lo, v[i]), hi = fmax(hi, v[i]), big = fmax(big, fabs(v[i]));
    }
    cr_expect(big >= tight * bound, "%s: largest |value| %.9g of %lld draws, under %.2f of the bound %.9g", what, big, (long long)n, tight, bound);
    cr_expect(lo < 0 && hi > 0 && lo < hi, "%s: values in [%.9g, %.9g], expected both signs", what, lo, hi);
    free(v);
}

/* A layer zeroed by a refused constructor, byte for byte. */
static int s_is_zeroed(const tact_layer *l) {
    static const tact_layer zero;
    return memcmp(l, &zero, sizeof zero) == 0;
}

/* ------------------------------------------------------------- linear */

/* y = x W^T + b over the rows of x (the last dim is in). */
static void s_linear_ref(const float *x, int64_t rows, int64_t in, int64_t out, const float *w, const float *b, double *y, double *scale) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? b[o] : 0, mag = b ? fabs(b[o]) : 0;
            for (int64_t i = 0; i < in; i++) acc += (double)x[r * in + i] * w[o * in + i], mag += fabs((double)x[r * in + i] * w[o * in + i]);
            y[r * out + o] = acc, scale[r * out + o] = mag;
        }
}

static void s_linear_case(tact_ctx *ctx, const tact_layer *l, int ndim, const int64_t *xshape, uint64_t *rng, uint64_t seed) {
    int64_t in = tact_dim(l->weight, 1), out = tact_dim(l->weight, 0), numel = 1;
    for (int k = 0; k < ndim; k++) numel *= xshape[k];
    int64_t rows = numel / in;
    float *x = malloc((size_t)numel * sizeof *x), *w = malloc((size_t)(in * out) * sizeof *w), b[64], *got = malloc((size_t)(rows * out) * sizeof *got);
    double *want = malloc((size_t)(rows * out) * sizeof *want), *scale = malloc((size_t)(rows * out) * sizeof *scale);
    cr_assert(x && w && got && want && scale && out <= 64);
    s_fill(x, numel, rng, -1, 1);
    s_read(l->weight, w, in * out, seed);
    if (l->bias) s_read(l->bias, b, out, seed);
    s_linear_ref(x, rows, in, out, w, l->bias ? b : NULL, want, scale);
    tact_tensor *y = tact_layer_forward(l, s_floats(ctx, ndim, xshape, x), 0);
    int64_t yshape[16];
    memcpy(yshape, xshape, sizeof *xshape * (size_t)ndim);
    yshape[ndim - 1] = out;
    s_expect_shape(y, ndim, yshape, "linear output");
    s_read(y, got, rows * out, seed);
    /* Summation order differs: the bound scales with sum |x_i w_i|. */
    for (int64_t i = 0; i < rows * out; i++)
        cr_expect(fabs(got[i] - want[i]) <= 1e-6 + 1e-6 * scale[i], "linear %d-d input, y[%lld]: tact %.9g, reference %.9g (seed %#llx)", ndim,
                  (long long)i, (double)got[i], want[i], (unsigned long long)seed);
    free(x), free(w), free(got), free(want), free(scale);
}

Test(layers, linear_forward_is_x_times_weight_transposed_plus_bias) {
    uint64_t seed = tu_seed(), rng = seed ^ 0x11;
    tact_ctx *ctx = s_open(1);
    tact_layer l;
    cr_assert_eq(tact_layer_linear(&l, ctx, 5, 3, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(l.kind, TACT_LAYER_LINEAR);
    s_expect_shape(l.weight, 2, (int64_t[]){3, 5}, "linear weight (out, in)");
    s_expect_shape(l.bias, 1, (int64_t[]){3}, "linear bias");
    cr_expect_eq(tact_requires_grad(l.weight), 1);
    cr_expect_eq(tact_requires_grad(l.bias), 1);
    s_linear_case(ctx, &l, 1, (int64_t[]){5}, &rng, seed);
    s_linear_case(ctx, &l, 2, (int64_t[]){4, 5}, &rng, seed);
    s_linear_case(ctx, &l, 3, (int64_t[]){2, 3, 5}, &rng, seed);
    tact_layer nb;
    cr_assert_eq(tact_layer_linear(&nb, ctx, 7, 2, 0), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_null(nb.bias, "bias 0: no bias tensor");
    s_linear_case(ctx, &nb, 2, (int64_t[]){6, 7}, &rng, seed);
    /* A last dim that is not in: an error tensor, not a crash. */
    float bad[4] = {0};
    cr_expect_neq(tact_status_of(tact_layer_forward(&l, s_floats(ctx, 2, (int64_t[]){1, 4}, bad), 0)), TACT_OK);
    tact_ctx_close(&ctx);
}

/* The reference: uniform(-1/sqrt(in), 1/sqrt(in)) for the weight and the bias. */
Test(layers, linear_init_is_uniform_within_one_over_sqrt_in) {
    tact_ctx *ctx = s_open(2);
    tact_layer l;
    cr_assert_eq(tact_layer_linear(&l, ctx, 64, 48, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    s_expect_uniform_init(l.weight, 64 * 48, 1 / sqrt(64.0), 0.95, "linear weight");
    s_expect_uniform_init(l.bias, 48, 1 / sqrt(64.0), 0.7, "linear bias");
    /* Another seed, other weights; the same seed, the same weights. */
    float a[6], b[6], c[6];
    tact_layer l2, l3;
    cr_assert_eq(tact_manual_seed(ctx, 3), TACT_OK);
    cr_assert_eq(tact_layer_linear(&l2, ctx, 3, 2, 0), TACT_OK);
    cr_assert_eq(tact_manual_seed(ctx, 3), TACT_OK);
    cr_assert_eq(tact_layer_linear(&l3, ctx, 3, 2, 0), TACT_OK);
    s_read(l2.weight, a, 6, 0);
    s_read(l3.weight, b, 6, 0);
    cr_assert_eq(tact_manual_seed(ctx, 4), TACT_OK);
    cr_assert_eq(tact_layer_linear(&l3, ctx, 3, 2, 0), TACT_OK);
    s_read(l3.weight, c, 6, 0);
    cr_expect(memcmp(a, b, sizeof a) == 0, "manual_seed 3 twice gives the same weights");
    cr_expect(memcmp(a, c, sizeof a) != 0, "manual_seed 4 gives other weights");
    tact_ctx_close(&ctx);
}

/* -------------------------------------------------------- convolutions */

typedef struct {
    int64_t n, cin, cout, h, w, kh, kw, stride[2], pad[2], dil[2], groups, outpad[2];
    int bias;
} s_conv_case;

static void s_window(const s_conv_case *c, tact_window *w) {
    tact_window_default(w);
    for (int j = 0; j < 2; j++) {
        w->stride[j] = c->stride[j];
        w->dilation[j] = c->dil[j];
        w->padding[j] = c->pad[j];
        w->output_padding[j] = c->outpad[j];
    }
    w->npad = 2; /* one amount per dim, both sides */
    w->groups = (int)c->groups;
}

static int64_t s_conv_out(const s_conv_case *c, int j, int transposed) {
    int64_t in = j ? c->w : c->h, k = j ? c->kw : c->kh;
    if (transposed) return (in - 1) * c->stride[j] - 2 * c->pad[j] + c->dil[j] * (k - 1) + c->outpad[j] + 1;
    return (in + 2 * c->pad[j] - c->dil[j] * (k - 1) - 1) / c->stride[j] + 1;
}

/* PyTorch's conv2d (weight (cout, cin/g, kh, kw)) and conv_transpose2d
 * (weight (cin, cout/g, kh, kw)) as direct sums; scale gets sum |x w|. */
static void s_conv_ref(const s_conv_case *c, int transposed, const float *x, const float *w, const float *b, double *y, double *scale) {
    int64_t oh = s_conv_out(c, 0, transposed), ow = s_conv_out(c, 1, transposed), cig = c->cin / c->groups, cog = c->cout / c->groups;
    for (int64_t i = 0; i < c->n * c->cout * oh * ow; i++) y[i] = b ? b[(i / (oh * ow)) % c->cout] : 0, scale[i] = fabs(y[i]);
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t ci = 0; ci < c->cin; ci++)
            for (int64_t oc = 0; oc < cog; oc++)
                for (int64_t ky = 0; ky < c->kh; ky++)
                    for (int64_t kx = 0; kx < c->kw; kx++)
                        for (int64_t iy = 0; iy < c->h; iy++)
                            for (int64_t ix = 0; ix < c->w; ix++) {
                                int64_t g = ci / cig, co = g * cog + oc, oy, ox;
                                double wv;
                                if (transposed) {
                                    /* Input pixel (iy, ix) spreads to iy*s - p + ky*d. */
                                    oy = iy * c->stride[0] - c->pad[0] + ky * c->dil[0];
                                    ox = ix * c->stride[1] - c->pad[1] + kx * c->dil[1];
                                    wv = w[((ci * cog + oc) * c->kh + ky) * c->kw + kx];
                                } else {
                                    /* Output pixel (oy, ox) reads iy = oy*s - p + ky*d. */
                                    int64_t ry = iy + c->pad[0] - ky * c->dil[0], rx = ix + c->pad[1] - kx * c->dil[1];
                                    if (ry % c->stride[0] || rx % c->stride[1]) continue;
                                    oy = ry / c->stride[0], ox = rx / c->stride[1];
                                    wv = w[((co * cig + ci % cig) * c->kh + ky) * c->kw + kx];
                                }
                                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                                double p = (double)x[((n * c->cin + ci) * c->h + iy) * c->w + ix] * wv;
                                int64_t at = ((n * c->cout + co) * oh + oy) * ow + ox;
                                y[at] += p, scale[at] += fabs(p);
                            }
}

/* The layer's forward against the direct sum, and against tact_conv2d
 * (tact_conv_transpose2d) called with the layer's own tensors. */
static void s_conv_layer_case(const s_conv_case *c, int transposed, uint64_t seed) {
    uint64_t rng = seed ^ (0x2c0 + (uint64_t)transposed);
    tact_ctx *ctx = s_open(10 + (uint64_t)transposed);
    tact_window win;
    s_window(c, &win);
    tact_layer l;
    int rc = transposed ? tact_layer_conv_transpose2d(&l, ctx, c->cin, c->cout, c->kh, c->kw, &win, c->bias)
                        : tact_layer_conv2d(&l, ctx, c->cin, c->cout, c->kh, c->kw, &win, c->bias);
    cr_assert_eq(rc, TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(l.kind, transposed ? TACT_LAYER_CONV_TRANSPOSE2D : TACT_LAYER_CONV2D);
    int64_t wshape[4] = {transposed ? c->cin : c->cout, transposed ? c->cout / c->groups : c->cin / c->groups, c->kh, c->kw};
    s_expect_shape(l.weight, 4, wshape, transposed ? "conv_transpose2d weight (in, out/groups, kh, kw)" : "conv2d weight (out, in/groups, kh, kw)");
    if (c->bias) s_expect_shape(l.bias, 1, (int64_t[]){c->cout}, "conv bias");
    else cr_expect_null(l.bias);
    int64_t oh = s_conv_out(c, 0, transposed), ow = s_conv_out(c, 1, transposed), nx = c->n * c->cin * c->h * c->w, ny = c->n * c->cout * oh * ow,
            nw = wshape[0] * wshape[1] * c->kh * c->kw;
    float *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w), b[64], *got = malloc((size_t)ny * sizeof *got),
          *direct = malloc((size_t)ny * sizeof *direct);
    double *want = malloc((size_t)ny * sizeof *want), *scale = malloc((size_t)ny * sizeof *scale);
    cr_assert(x && w && got && direct && want && scale && c->cout <= 64);
    s_fill(x, nx, &rng, -1, 1);
    s_read(l.weight, w, nw, seed);
    if (c->bias) s_read(l.bias, b, c->cout, seed);
    s_conv_ref(c, transposed, x, w, c->bias ? b : NULL, want, scale);

    tact_tensor *xt = s_floats(ctx, 4, (int64_t[]){c->n, c->cin, c->h, c->w}, x);
    tact_tensor *y = tact_layer_forward(&l, xt, 1);
    s_expect_shape(y, 4, (int64_t[]){c->n, c->cout, oh, ow}, "conv layer output");
    s_read(y, got, ny, seed);
    s_read(transposed ? tact_conv_transpose2d(xt, l.weight, l.bias, &win) : tact_conv2d(xt, l.weight, l.bias, &win), direct, ny, seed);
    for (int64_t i = 0; i < ny; i++) {
        cr_expect(fabs(got[i] - want[i]) <= 1e-6 + 1e-6 * scale[i], "%s y[%lld]: tact %.9g, direct sum %.9g (seed %#llx)",
                  transposed ? "conv_transpose2d" : "conv2d", (long long)i, (double)got[i], want[i], (unsigned long long)seed);
        /* The same graph as the plain op: the same bits. */
        cr_expect(got[i] == direct[i], "y[%lld]: layer %.9g, plain op %.9g", (long long)i, (double)got[i], (double)direct[i]);
    }
    free(x), free(w), free(got), free(direct), free(want), free(scale);
    tact_ctx_close(&ctx);
}

Test(layers, conv2d_forward_is_the_convolution_with_the_layers_weight_and_options) {
    uint64_t seed = tu_seed();
    s_conv_case plain = {.n = 2, .cin = 3, .cout = 4, .h = 5, .w = 6, .kh = 3, .kw = 3, .stride = {1, 1}, .dil = {1, 1}, .groups = 1, .bias = 1};
    s_conv_layer_case(&plain, 0, seed);
    /* Stride, padding and dilation differing per dim, groups, no bias. */
    s_conv_case opts = {.n = 2, .cin = 4, .cout = 6, .h = 7, .w = 6, .kh = 3, .kw = 2, .stride = {2, 1}, .pad = {1, 2}, .dil = {1, 2}, .groups = 2};
    s_conv_layer_case(&opts, 0, seed);
}

Test(layers, conv_transpose2d_forward_is_the_transposed_convolution_with_the_layers_weight_and_options) {
    uint64_t seed = tu_seed();
    s_conv_case plain = {.n = 2, .cin = 3, .cout = 2, .h = 4, .w = 3, .kh = 3, .kw = 3, .stride = {1, 1}, .dil = {1, 1}, .groups = 1, .bias = 1};
    s_conv_layer_case(&plain, 1, seed);
    s_conv_case opts = {.n = 1,
                        .cin = 4,
                        .cout = 6,
                        .h = 3,
                        .w = 4,
                        .kh = 3,
                        .kw = 2,
                        .stride = {2, 3},
                        .pad = {1, 0},
                        .dil = {1, 1},
                        .groups = 2,
                        .outpad = {1, 2},
                        .bias = 1};
    s_conv_layer_case(&opts, 1, seed);
}

/* kaiming_uniform(a = sqrt 5): bound sqrt(6 / ((1 + a^2) fan_in)) =
 * 1/sqrt(fan_in), fan_in = weight.shape[1] * kh * kw; the bias's bound is
 * the same.  Groups make the difference between in and in/groups visible. */
Test(layers, conv_init_is_kaiming_uniform_with_the_fan_in_of_the_weight) {
    tact_ctx *ctx = s_open(12);
    tact_window win;
    tact_window_default(&win);
    win.groups = 4;
    tact_layer c, t;
    cr_assert_eq(tact_layer_conv2d(&c, ctx, 8, 64, 3, 3, &win, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    double a = sqrt(5.0), bound = sqrt(6 / ((1 + a * a) * (2 * 3 * 3)));
    cr_assert(fabs(bound - 1 / sqrt(18.0)) < 1e-12);
    s_expect_uniform_init(c.weight, 64 * 2 * 3 * 3, bound, 0.95, "conv2d weight");
    s_expect_uniform_init(c.bias, 64, bound, 0.7, "conv2d bias");
    cr_assert_eq(tact_layer_conv_transpose2d(&t, ctx, 64, 32, 3, 2, &win, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    bound = 1 / sqrt(8.0 * 3 * 2);
    s_expect_shape(t.weight, 4, (int64_t[]){64, 8, 3, 2}, "conv_transpose2d weight");
    s_expect_uniform_init(t.weight, 64 * 8 * 3 * 2, bound, 0.95, "conv_transpose2d weight");
    s_expect_uniform_init(t.bias, 32, bound, 0.7, "conv_transpose2d bias");
    tact_ctx_close(&ctx);
}

/* ---------------------------------------------------------- batch norm */

/* x as (n, c, s): per channel mean and biased variance over n and s. */
static void s_bn_stats(const float *x, int64_t n, int64_t c, int64_t s, double *mean, double *var) {
    for (int64_t ch = 0; ch < c; ch++) {
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) sum += x[(i * c + ch) * s + j];
        mean[ch] = sum / (double)(n * s);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) sq += (x[(i * c + ch) * s + j] - mean[ch]) * (x[(i * c + ch) * s + j] - mean[ch]);
        var[ch] = sq / (double)(n * s);
    }
}

/* (x - mean) / sqrt(var + eps) * w + b per channel (w, b NULL: 1, 0). */
static void s_bn_apply(const float *x, int64_t n, int64_t c, int64_t s, const double *mean, const double *var, double eps, const float *w,
                       const float *b, double *y) {
    for (int64_t i = 0; i < n * c * s; i++) {
        int64_t ch = (i / s) % c;
        y[i] = (x[i] - mean[ch]) / sqrt(var[ch] + eps) * (w ? w[ch] : 1) + (b ? b[ch] : 0);
    }
}

/* Training forwards on two batches of shape (n, c, s...) and an eval one:
 * outputs from batch statistics, running statistics after each step
 * (momentum m, the unbiased variance), eval from the running ones. */
static void s_batchnorm_case(int ndim, const int64_t *shape, double momentum, uint64_t seed) {
    uint64_t rng = seed ^ 0xb4;
    int64_t n = shape[0], c = shape[1], s = 1;
    for (int k = 2; k < ndim; k++) s *= shape[k];
    int64_t total = n * c * s, cnt = n * s;
    tact_ctx *ctx = s_open(20);
    tact_layer l;
    cr_assert_eq(tact_layer_batchnorm(&l, ctx, c, 1e-5, momentum, 1, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(l.kind, TACT_LAYER_BATCHNORM);
    cr_expect_eq(tact_requires_grad(l.running_mean), 0, "running statistics need no gradient");
    cr_expect_eq(tact_requires_grad(l.running_var), 0);
    float w[8], b[8], rm[8], rv[8], *x = malloc((size_t)total * sizeof *x), *got = malloc((size_t)total * sizeof *got);
    double mean[8], var[8], run_mean[8], run_var[8], *want = malloc((size_t)total * sizeof *want);
    cr_assert(x && got && want && c <= 8);
    s_read(l.weight, w, c, seed);
    s_read(l.bias, b, c, seed);
    s_read(l.running_mean, rm, c, seed);
    s_read(l.running_var, rv, c, seed);
    for (int64_t ch = 0; ch < c; ch++) {
        cr_expect(w[ch] == 1 && b[ch] == 0 && rm[ch] == 0 && rv[ch] == 1, "initial weight 1, bias 0, running mean 0, running var 1");
        run_mean[ch] = 0, run_var[ch] = 1;
    }
    s_fill(w, c, &rng, 0.5, 2), s_fill(b, c, &rng, -1, 1);
    s_set(ctx, l.weight, w);
    s_set(ctx, l.bias, b);

    for (int step = 0; step < 2; step++) {
        /* Each channel its own offset and spread. */
        for (int64_t i = 0; i < total; i++) {
            int64_t ch = (i / s) % c;
            x[i] = (float)((double)ch - 1 + (1 + 0.5 * (double)ch) * (2 * s_unit(&rng) - 1));
        }
        s_bn_stats(x, n, c, s, mean, var);
        s_bn_apply(x, n, c, s, mean, var, 1e-5, w, b, want);
        tact_tensor *y = tact_layer_forward(&l, s_floats(ctx, ndim, shape, x), 1);
        s_expect_shape(y, ndim, shape, "batchnorm output");
        tact_tensor *all[3] = {y, l.running_mean, l.running_var};
        cr_assert_eq(tact_realize(ctx, 3, all), TACT_OK, "%s", tact_ctx_error(ctx));
        s_read(y, got, total, seed);
        s_expect_close(got, want, total, ATOL, RTOL, step ? "batchnorm training output, second batch" : "batchnorm training output", seed);
        for (int64_t ch = 0; ch < c; ch++) {
            run_mean[ch] = (1 - momentum) * run_mean[ch] + momentum * mean[ch];
            run_var[ch] = (1 - momentum) * run_var[ch] + momentum * var[ch] * (double)cnt / (double)(cnt - 1);
        }
        s_read(l.running_mean, rm, c, seed);
        s_read(l.running_var, rv, c, seed);
        s_expect_close(rm, run_mean, c, ATOL, RTOL, step ? "running_mean after two steps" : "running_mean after one step", seed);
        s_expect_close(rv, run_var, c, ATOL, RTOL, step ? "running_var after two steps" : "running_var after one step", seed);
    }

    /* Eval: the running statistics, which stay as they are. */
    s_fill(x, total, &rng, -2, 2);
    s_bn_apply(x, n, c, s, run_mean, run_var, 1e-5, w, b, want);
    tact_tensor *y = tact_layer_forward(&l, s_floats(ctx, ndim, shape, x), 0);
    tact_tensor *all[3] = {y, l.running_mean, l.running_var};
    cr_assert_eq(tact_realize(ctx, 3, all), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(y, got, total, seed);
    s_expect_close(got, want, total, ATOL, RTOL, "batchnorm eval output", seed);
    s_read(l.running_mean, rm, c, seed);
    s_expect_close(rm, run_mean, c, ATOL, RTOL, "running_mean after an eval forward", seed);
    free(x), free(got), free(want);
    tact_ctx_close(&ctx);
}

Test(layers, batchnorm_nchw_normalizes_by_batch_statistics_and_tracks_running_ones) {
    s_batchnorm_case(4, (int64_t[]){4, 3, 2, 3}, 0.1, tu_seed());
}

Test(layers, batchnorm_nc_normalizes_by_batch_statistics_and_tracks_running_ones) {
    s_batchnorm_case(2, (int64_t[]){5, 3}, 0.3, tu_seed());
}

/* affine 0: no weight or bias; track 0: no running statistics, and batch
 * statistics in eval too (the reference without running statistics). */
Test(layers, batchnorm_without_affine_or_tracking) {
    uint64_t seed = tu_seed(), rng = seed ^ 0xb5;
    tact_ctx *ctx = s_open(21);
    tact_layer na, nt;
    cr_assert_eq(tact_layer_batchnorm(&na, ctx, 2, 1e-5, 0.1, 0, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect(na.weight == NULL && na.bias == NULL && na.running_mean && na.running_var);
    cr_assert_eq(tact_layer_batchnorm(&nt, ctx, 2, 1e-3, 0.1, 1, 0), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect(nt.weight && nt.bias && nt.running_mean == NULL && nt.running_var == NULL);
    float x[3 * 2 * 4], got[24], rm[2];
    double mean[2], var[2], want[24];
    int64_t shape[3] = {3, 2, 4};
    s_fill(x, 24, &rng, -3, 3);
    s_bn_stats(x, 3, 2, 4, mean, var);

    s_bn_apply(x, 3, 2, 4, mean, var, 1e-5, NULL, NULL, want);
    tact_tensor *y = tact_layer_forward(&na, s_floats(ctx, 3, shape, x), 1);
    tact_tensor *all[2] = {y, na.running_mean};
    cr_assert_eq(tact_realize(ctx, 2, all), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(y, got, 24, seed);
    s_expect_close(got, want, 24, ATOL, RTOL, "batchnorm affine 0, training", seed);
    s_read(na.running_mean, rm, 2, seed);
    double run_mean[2] = {0.1 * mean[0], 0.1 * mean[1]};
    s_expect_close(rm, run_mean, 2, ATOL, RTOL, "batchnorm affine 0, running_mean", seed);

    s_bn_apply(x, 3, 2, 4, mean, var, 1e-3, NULL, NULL, want); /* weight 1, bias 0 */
    for (int training = 0; training < 2; training++) {
        s_read(tact_layer_forward(&nt, s_floats(ctx, 3, shape, x), training), got, 24, seed);
        s_expect_close(got, want, 24, ATOL, RTOL, training ? "batchnorm track 0, training" : "batchnorm track 0, eval", seed);
    }
    tact_ctx_close(&ctx);
}

/* Two training forwards with nothing realized between them: the second
 * update starts from the first one's pending result. */
Test(layers, batchnorm_running_statistics_chain_across_unrealized_forwards) {
    uint64_t seed = tu_seed(), rng = seed ^ 0xb7;
    tact_ctx *ctx = s_open(23);
    tact_layer l;
    cr_assert_eq(tact_layer_batchnorm(&l, ctx, 2, 1e-5, 0.5, 0, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    int64_t shape[3] = {3, 2, 2};
    float xa[12], xb[12], rm[2], rv[2];
    double mean[2], var[2], run_mean[2] = {0, 0}, run_var[2] = {1, 1};
    s_fill(xa, 12, &rng, -1, 3);
    s_fill(xb, 12, &rng, -4, 1);
    for (int k = 0; k < 2; k++) {
        s_bn_stats(k ? xb : xa, 3, 2, 2, mean, var);
        for (int ch = 0; ch < 2; ch++)
            run_mean[ch] = 0.5 * run_mean[ch] + 0.5 * mean[ch], run_var[ch] = 0.5 * run_var[ch] + 0.5 * var[ch] * 6 / 5;
        cr_assert_eq(tact_status_of(tact_layer_forward(&l, s_floats(ctx, 3, shape, k ? xb : xa), 1)), TACT_OK);
    }
    s_read(l.running_mean, rm, 2, seed);
    s_read(l.running_var, rv, 2, seed);
    s_expect_close(rm, run_mean, 2, ATOL, RTOL, "running_mean after two unrealized steps", seed);
    s_expect_close(rv, run_var, 2, ATOL, RTOL, "running_var after two unrealized steps", seed);
    tact_ctx_close(&ctx);
}

/* loss = sum(r * y): d/dbias = sum r, d/dweight = sum r * xhat per channel.
 * The backward comes before the running statistics are realized, as in a
 * training step (the optimizer realizes them). */
Test(layers, batchnorm_backward_gives_weight_and_bias_gradients) {
    uint64_t seed = tu_seed(), rng = seed ^ 0xb6;
    tact_ctx *ctx = s_open(22);
    tact_layer l;
    cr_assert_eq(tact_layer_batchnorm(&l, ctx, 3, 1e-5, 0.1, 1, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    int64_t shape[4] = {2, 3, 2, 2};
    float x[24], r[24], gw[3], gb[3], rm[3];
    double mean[3], var[3], xhat[24], want_w[3] = {0}, want_b[3] = {0};
    s_fill(x, 24, &rng, -2, 2);
    s_fill(r, 24, &rng, -1, 1);
    s_bn_stats(x, 2, 3, 4, mean, var);
    s_bn_apply(x, 2, 3, 4, mean, var, 1e-5, NULL, NULL, xhat);
    for (int i = 0; i < 24; i++) want_w[(i / 4) % 3] += r[i] * xhat[i], want_b[(i / 4) % 3] += r[i];
    tact_tensor *y = tact_layer_forward(&l, s_floats(ctx, 4, shape, x), 1);
    tact_tensor *loss = tact_sum(tact_mul(y, s_floats(ctx, 4, shape, r)), -1, NULL, 0);
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *gs[4] = {tact_grad(l.weight), tact_grad(l.bias), l.running_mean, l.running_var};
    cr_assert_eq(tact_realize(ctx, 4, gs), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(gs[0], gw, 3, seed);
    s_read(gs[1], gb, 3, seed);
    s_expect_close(gw, want_w, 3, 1e-4, RTOL, "d loss / d weight", seed);
    s_expect_close(gb, want_b, 3, 1e-5, RTOL, "d loss / d bias", seed);
    cr_expect_neq(tact_status_of(tact_grad(l.running_mean)), TACT_OK, "running statistics get no gradient");
    s_read(l.running_mean, rm, 3, seed);
    double run_mean[3] = {0.1 * mean[0], 0.1 * mean[1], 0.1 * mean[2]};
    s_expect_close(rm, run_mean, 3, ATOL, RTOL, "running_mean realized after the backward", seed);
    tact_ctx_close(&ctx);
}

/* ------------------------------------------------ layer and group norm */

/* x as (rows, cols), each row normalized (biased variance), then w, b per column. */
static void s_rownorm_ref(const float *x, int64_t rows, int64_t cols, double eps, const float *w, const float *b, double *y) {
    for (int64_t r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < cols; j++) mean += x[r * cols + j];
        mean /= (double)cols;
        for (int64_t j = 0; j < cols; j++) var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
        var /= (double)cols;
        for (int64_t j = 0; j < cols; j++) y[r * cols + j] = (x[r * cols + j] - mean) / sqrt(var + eps) * (w ? w[j] : 1) + (b ? b[j] : 0);
    }
}

static void s_layernorm_case(tact_ctx *ctx, int naxes, int affine, uint64_t *rng, uint64_t seed) {
    int64_t shape[3] = {2, 3, 4}, rows = naxes == 1 ? 6 : 2, cols = naxes == 1 ? 4 : 12;
    tact_layer l;
    cr_assert_eq(tact_layer_layernorm(&l, ctx, naxes, shape + 3 - naxes, 1e-5, affine), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(l.kind, TACT_LAYER_LAYERNORM);
    float x[24], w[12], b[12], got[24];
    double want[24];
    if (affine) {
        s_expect_shape(l.weight, naxes, shape + 3 - naxes, "layernorm weight");
        s_fill(w, cols, rng, 0.5, 2), s_fill(b, cols, rng, -1, 1);
        s_set(ctx, l.weight, w);
        s_set(ctx, l.bias, b);
    } else {
        cr_expect(l.weight == NULL && l.bias == NULL);
    }
    s_fill(x, 24, rng, -3, 3);
    s_rownorm_ref(x, rows, cols, 1e-5, affine ? w : NULL, affine ? b : NULL, want);
    tact_tensor *y = tact_layer_forward(&l, s_floats(ctx, 3, shape, x), 1);
    s_expect_shape(y, 3, shape, "layernorm output");
    s_read(y, got, 24, seed);
    char what[64];
    snprintf(what, sizeof what, "layernorm of %d dims, affine %d", naxes, affine);
    s_expect_close(got, want, 24, ATOL, RTOL, what, seed);
}

Test(layers, layernorm_normalizes_the_trailing_dims) {
    uint64_t seed = tu_seed(), rng = seed ^ 0x1a;
    tact_ctx *ctx = s_open(30);
    for (int naxes = 1; naxes <= 2; naxes++)
        for (int affine = 0; affine < 2; affine++) s_layernorm_case(ctx, naxes, affine, &rng, seed);
    tact_ctx_close(&ctx);
}

/* x (n, c, s): each sample's group of c/groups channels normalized over
 * its channels and s, then w, b per channel. */
static void s_groupnorm_ref(const float *x, int64_t n, int64_t c, int64_t s, int64_t groups, const float *w, const float *b, double *y) {
    int64_t per = c / groups * s;
    s_rownorm_ref(x, n * groups, per, 1e-5, NULL, NULL, y);
    for (int64_t i = 0; i < n * c * s; i++)
        if (w) y[i] = y[i] * w[(i / s) % c] + b[(i / s) % c];
}

Test(layers, groupnorm_normalizes_each_group_of_channels) {
    uint64_t seed = tu_seed(), rng = seed ^ 0x6a;
    tact_ctx *ctx = s_open(31);
    int64_t shape[4] = {2, 4, 3, 2}, groups[3] = {1, 2, 4};
    float x[48], w[4], b[4], got[48];
    double want[48];
    for (int gi = 0; gi < 3; gi++)
        for (int affine = 0; affine < 2; affine++) {
            tact_layer l;
            cr_assert_eq(tact_layer_groupnorm(&l, ctx, groups[gi], 4, 1e-5, affine), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_expect_eq(l.kind, TACT_LAYER_GROUPNORM);
            if (affine) {
                s_expect_shape(l.weight, 1, (int64_t[]){4}, "groupnorm weight");
                s_fill(w, 4, &rng, 0.5, 2), s_fill(b, 4, &rng, -1, 1);
                s_set(ctx, l.weight, w);
                s_set(ctx, l.bias, b);
            } else {
                cr_expect(l.weight == NULL && l.bias == NULL);
            }
            /* Channels far apart, so a group taken wrongly shows. */
            for (int i = 0; i < 48; i++) x[i] = (float)(3.0 * (double)((i / 6) % 4) + 2 * s_unit(&rng) - 1);
            s_groupnorm_ref(x, 2, 4, 6, groups[gi], affine ? w : NULL, affine ? b : NULL, want);
            s_read(tact_layer_forward(&l, s_floats(ctx, 4, shape, x), 0), got, 48, seed);
            char what[64];
            snprintf(what, sizeof what, "groupnorm, %lld groups, affine %d", (long long)groups[gi], affine);
            s_expect_close(got, want, 48, ATOL, RTOL, what, seed);
        }
    tact_ctx_close(&ctx);
}

/* ----------------------------------------------------------- embedding */

Test(layers, embedding_gathers_rows_and_its_gradient_counts_indices) {
    uint64_t seed = tu_seed(), rng = seed ^ 0xe3;
    tact_ctx *ctx = s_open(40);
    enum { V = 5, E = 4 };
    tact_layer l;
    cr_assert_eq(tact_layer_embedding(&l, ctx, V, E), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(l.kind, TACT_LAYER_EMBEDDING);
    s_expect_shape(l.weight, 2, (int64_t[]){V, E}, "embedding weight (vocab, embed)");
    float w[V * E], got[12 * E], grad[V * E];
    s_read(l.weight, w, V * E, seed);
    double glorot = sqrt(6.0 / (V + E));
    for (int i = 0; i < V * E; i++) cr_expect(fabs(w[i]) <= glorot * (1 + 1e-6), "weight[%d] = %.9g beyond glorot's %.9g", i, (double)w[i], glorot);

    /* 1-d: each index's row, exactly (one product by 1, the rest by 0). */
    int32_t i1[6] = {3, 0, 4, 4, 1, 3};
    tact_tensor *y = tact_layer_forward(&l, tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){6}, i1), 0);
    s_expect_shape(y, 2, (int64_t[]){6, E}, "embedding of 6 indices");
    s_read(y, got, 6 * E, seed);
    for (int i = 0; i < 6; i++)
        for (int e = 0; e < E; e++) cr_expect(got[i * E + e] == w[i1[i] * E + e], "row %d (index %d), col %d: %.9g, weight %.9g", i, i1[i], e, (double)got[i * E + e], (double)w[i1[i] * E + e]);

    /* 2-d: 12 seeded indices of 5 (some repeat); the gradient of the sum
     * is each row's count. */
    int32_t i2[12];
    int count[V] = {0};
    for (int i = 0; i < 12; i++) i2[i] = (int32_t)(tu_rand(&rng) % V), count[i2[i]]++;
    y = tact_layer_forward(&l, tact_from_data(ctx, TACT_INT32, 2, (int64_t[]){3, 4}, i2), 1);
    s_expect_shape(y, 3, (int64_t[]){3, 4, E}, "embedding of 3x4 indices");
    s_read(y, got, 12 * E, seed);
    for (int i = 0; i < 12; i++)
        for (int e = 0; e < E; e++)
            cr_expect(got[i * E + e] == w[i2[i] * E + e], "(%d, %d) index %d, col %d: %.9g, weight %.9g (seed %#llx)", i / 4, i % 4, i2[i], e,
                      (double)got[i * E + e], (double)w[i2[i] * E + e], (unsigned long long)seed);
    cr_assert_eq(tact_backward(tact_sum(y, -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(tact_grad(l.weight), grad, V * E, seed);
    for (int v = 0; v < V; v++)
        for (int e = 0; e < E; e++)
            cr_expect(grad[v * E + e] == count[v], "grad[%d][%d] = %.9g, index %d occurs %d times (seed %#llx)", v, e, (double)grad[v * E + e], v, count[v],
                      (unsigned long long)seed);
    tact_ctx_close(&ctx);
}

/* ------------------------------------------------------------- dropout */

Test(layers, dropout_zeroes_with_probability_p_and_scales_the_rest) {
    uint64_t seed = tu_seed(), rng = seed ^ 0xd0;
    tact_ctx *ctx = s_open(50);
    enum { N = 1000 };
    float x[N], got[N];
    s_fill(x, N, &rng, 0.5, 1.5); /* no zeros of its own */
    tact_tensor *xt = s_floats(ctx, 2, (int64_t[]){4, N / 4}, x);
    tact_layer half, none, all;
    cr_assert_eq(tact_layer_dropout(&half, 0.5), TACT_OK);
    cr_assert_eq(tact_layer_dropout(&none, 0), TACT_OK);
    cr_assert_eq(tact_layer_dropout(&all, 1), TACT_OK);
    cr_expect_eq(half.kind, TACT_LAYER_DROPOUT);

    const tact_layer *identity[3] = {&none, &half, &all};
    for (int k = 0; k < 3; k++) {
        int training = k == 0; /* p = 0 in training; p = 0.5 and 1 in eval */
        s_read(tact_layer_forward(identity[k], xt, training), got, N, seed);
        cr_expect(memcmp(got, x, sizeof x) == 0, "dropout p %g, training %d is the identity", identity[k]->p, training);
    }

    /* x * keep * 2: exactly 0 or exactly 2x (a power of two). */
    tact_tensor *y = tact_layer_forward(&half, xt, 1);
    s_expect_shape(y, 2, (int64_t[]){4, N / 4}, "dropout output");
    s_read(y, got, N, seed);
    int zeros = 0, other = 0;
    for (int i = 0; i < N; i++) {
        if (got[i] == 0) zeros++;
        else if (got[i] != 2 * x[i]) other++;
    }
    cr_expect_eq(other, 0, "%d of %d outputs neither 0 nor 2x", other, N);
    cr_expect(zeros > 400 && zeros < 600, "p 0.5 zeroed %d of %d", zeros, N);

    /* p 1 drops everything, as PyTorch (the reference's 1 / (1 - p) would
     * divide by zero; x * 0 * inf is NaN). */
    s_read(tact_layer_forward(&all, xt, 1), got, N, seed);
    int nonzero = 0;
    for (int i = 0; i < N; i++) nonzero += got[i] != 0;
    cr_expect_eq(nonzero, 0, "p 1 leaves %d of %d elements not 0 (the first: %.9g)", nonzero, N, (double)got[0]);
    tact_ctx_close(&ctx);
}

/* ---------------------------------------------------------- parameters */

Test(layers, params_are_named_as_pytorchs_state_dict) {
    tact_ctx *ctx = s_open(60);
    tact_layer fc, bn, conv;
    cr_assert_eq(tact_layer_linear(&fc, ctx, 4, 3, 1), TACT_OK);
    cr_assert_eq(tact_layer_batchnorm(&bn, ctx, 3, 1e-5, 0.1, 1, 1), TACT_OK);
    cr_assert_eq(tact_layer_conv2d(&conv, ctx, 2, 3, 1, 1, NULL, 0), TACT_OK);
    tact_params p = {0};
    cr_assert_eq(tact_layer_params(&fc, "fc", &p), TACT_OK);
    cr_assert_eq(tact_layer_params(&bn, "bn", &p), TACT_OK);
    cr_assert_eq(tact_layer_params(&conv, "features.0", &p), TACT_OK);
    const char *names[7] = {"fc.weight", "fc.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "features.0.weight"};
    tact_tensor *tensors[7] = {fc.weight, fc.bias, bn.weight, bn.bias, bn.running_mean, bn.running_var, conv.weight};
    cr_assert_eq(p.n, 7, "%d names", p.n);
    for (int i = 0; i < 7; i++) {
        cr_expect_str_eq(p.names[i], names[i]);
        cr_expect_eq(p.tensors[i], tensors[i], "%s", names[i]);
        cr_expect_eq(tact_params_get(&p, names[i]), tensors[i], "get %s", names[i]);
    }
    cr_expect_null(tact_params_get(&p, "fc"));
    cr_expect_null(tact_params_get(&p, "features.0.bias"));
    cr_expect_null(tact_params_get(&p, NULL));

    /* A name in use is refused and nothing is added. */
    cr_expect_eq(tact_layer_params(&fc, "fc", &p), TACT_EINVAL);
    cr_expect_eq(tact_params_add(&p, "bn", "weight", fc.weight), TACT_EINVAL);
    cr_expect_eq(p.n, 7);
    /* NULL and empty prefixes give the bare name; NULL tensors are refused. */
    cr_expect_eq(tact_params_add(&p, NULL, "scale", fc.bias), TACT_OK);
    cr_expect_eq(tact_params_add(&p, "", "scale", fc.bias), TACT_EINVAL, "\"\" and NULL name the same");
    cr_expect_eq(tact_params_add(&p, "", "shift", fc.bias), TACT_OK);
    cr_expect_eq(tact_params_add(&p, "x", "y", NULL), TACT_EINVAL);
    cr_expect_eq(tact_params_add(NULL, "x", "y", fc.bias), TACT_EINVAL);
    cr_assert_eq(p.n, 9);
    cr_expect_str_eq(p.names[7], "scale");
    cr_expect_str_eq(p.names[8], "shift");
    cr_expect_eq(tact_params_get(&p, "shift"), fc.bias);
    /* More than the first allocation holds. */
    for (int i = 0; i < 40; i++) {
        char name[16];
        snprintf(name, sizeof name, "extra%d", i);
        cr_assert_eq(tact_params_add(&p, "m", name, conv.weight), TACT_OK);
    }
    cr_expect_eq(tact_params_get(&p, "m.extra39"), conv.weight);
    cr_expect_eq(tact_params_get(&p, "fc.weight"), fc.weight);
    tact_params_free(&p);
    cr_expect(p.n == 0 && p.cap == 0 && p.names == NULL && p.tensors == NULL, "freed list zeroed");
    tact_params_free(&p); /* safe twice */
    tact_ctx_close(&ctx);
}

/* A trained model (running statistics assigned and not yet realized)
 * saved and loaded back: the same bytes under each name. */
Test(layers, params_round_trip_through_safetensors) {
    uint64_t seed = tu_seed(), rng = seed ^ 0x5a;
    tact_ctx *ctx = s_open(61);
    tact_layer fc, bn;
    cr_assert_eq(tact_layer_linear(&fc, ctx, 4, 3, 1), TACT_OK);
    cr_assert_eq(tact_layer_batchnorm(&bn, ctx, 3, 1e-5, 0.1, 1, 1), TACT_OK);
    float x[8];
    s_fill(x, 8, &rng, -1, 1);
    tact_tensor *h = tact_layer_forward(&bn, tact_layer_forward(&fc, s_floats(ctx, 2, (int64_t[]){2, 4}, x), 1), 1);
    cr_assert_eq(tact_status_of(h), TACT_OK, "%s", tact_error_message(h));
    tact_params p = {0};
    cr_assert_eq(tact_layer_params(&fc, "fc", &p), TACT_OK);
    cr_assert_eq(tact_layer_params(&bn, "bn", &p), TACT_OK);
    char *path = tu_tmpfile("layers");
    cr_assert_eq(tact_save_safetensors(ctx, path, p.n, (const char *const *)p.names, p.tensors), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < p.n; i++) {
        float a[12], b[12];
        int64_t n = tact_numel(p.tensors[i]);
        cr_assert(n <= 12);
        tact_tensor *t = tact_load_safetensors(ctx, path, p.names[i]);
        cr_assert_eq(tact_status_of(t), TACT_OK, "%s: %s", p.names[i], tact_error_message(t));
        cr_expect_eq(tact_dtype_of(t), TACT_FLOAT32);
        int64_t shape[16];
        tact_shape(p.tensors[i], shape);
        s_expect_shape(t, tact_ndim(p.tensors[i]), shape, p.names[i]);
        s_read(p.tensors[i], a, n, seed);
        s_read(t, b, n, seed);
        cr_expect(memcmp(a, b, (size_t)n * sizeof *a) == 0, "%s: loaded bytes differ", p.names[i]);
    }
    /* The saved running mean is the updated one, not the initial zeros. */
    float rm[3];
    s_read(tact_load_safetensors(ctx, path, "bn.running_mean"), rm, 3, seed);
    cr_expect(rm[0] != 0 || rm[1] != 0 || rm[2] != 0, "running_mean saved before its update was realized");
    unlink(path);
    free(path);
    tact_params_free(&p);
    tact_ctx_close(&ctx);
}

/* Layers made in a scope are kept: they outlive it. */
Test(layers, layer_tensors_outlive_the_scope_they_were_made_in) {
    tact_ctx *ctx = s_open(62);
    tact_layer l;
    cr_assert_eq(tact_scope_begin(ctx), TACT_OK);
    cr_assert_eq(tact_layer_linear(&l, ctx, 3, 2, 1), TACT_OK);
    cr_assert_eq(tact_scope_end(ctx), TACT_OK);
    float w[6], b[2];
    s_read(l.weight, w, 6, 0);
    s_read(l.bias, b, 2, 0);
    tact_ctx_close(&ctx);
}

/* -------------------------------------------------------- bad arguments */

/* A refused constructor: TACT_EINVAL, the layer zeroed, and (text not
 * NULL) the cause in the context's error. */
static void s_expect_refused(int rc, const tact_layer *l, tact_ctx *ctx, const char *text, const char *call) {
    cr_expect_eq(rc, TACT_EINVAL, "%s gives %d", call, rc);
    cr_expect(s_is_zeroed(l), "%s leaves the layer not zeroed", call);
    if (text) cr_expect(strstr(tact_ctx_error(ctx), text), "%s: error \"%s\", expected \"%s\"", call, tact_ctx_error(ctx), text);
}

/* Each constructor called on a layer full of garbage. */
#define EXPECT_REFUSED(call, text)                      \
    do {                                                \
        memset(&l, 0x5a, sizeof l);                     \
        s_expect_refused((call), &l, ctx, text, #call); \
    } while (0)

Test(layers, bad_arguments_are_refused_with_a_zeroed_layer) {
    tact_ctx *ctx = s_open(70);
    tact_layer l;
    tact_window win;
    tact_window_default(&win);
    win.groups = 2;
    EXPECT_REFUSED(tact_layer_conv2d(&l, ctx, 3, 4, 3, 3, &win, 1), "groups");
    EXPECT_REFUSED(tact_layer_conv2d(&l, ctx, 4, 3, 3, 3, &win, 1), "groups");
    EXPECT_REFUSED(tact_layer_conv_transpose2d(&l, ctx, 3, 4, 3, 3, &win, 1), "groups");
    EXPECT_REFUSED(tact_layer_conv2d(&l, ctx, 4, 4, 0, 3, NULL, 1), "positive");
    EXPECT_REFUSED(tact_layer_conv2d(&l, NULL, 4, 4, 3, 3, NULL, 1), NULL);
    EXPECT_REFUSED(tact_layer_linear(&l, ctx, 0, 3, 1), "positive");
    EXPECT_REFUSED(tact_layer_linear(&l, ctx, 3, -1, 1), "positive");
    EXPECT_REFUSED(tact_layer_linear(&l, NULL, 3, 3, 1), NULL);
    EXPECT_REFUSED(tact_layer_batchnorm(&l, ctx, 3, 0, 0.1, 1, 1), "eps");
    EXPECT_REFUSED(tact_layer_batchnorm(&l, ctx, 3, NAN, 0.1, 1, 1), "eps");
    EXPECT_REFUSED(tact_layer_batchnorm(&l, ctx, 3, 1e-5, 1.5, 1, 1), "momentum");
    EXPECT_REFUSED(tact_layer_batchnorm(&l, ctx, 0, 1e-5, 0.1, 1, 1), "features");
    EXPECT_REFUSED(tact_layer_batchnorm(&l, NULL, 3, 1e-5, 0.1, 1, 1), NULL);
    EXPECT_REFUSED(tact_layer_layernorm(&l, ctx, 0, (int64_t[]){3}, 1e-5, 1), "dims");
    EXPECT_REFUSED(tact_layer_layernorm(&l, ctx, 2, (int64_t[]){3, 0}, 1e-5, 1), "dims");
    EXPECT_REFUSED(tact_layer_layernorm(&l, ctx, 1, NULL, 1e-5, 1), "dims");
    EXPECT_REFUSED(tact_layer_layernorm(&l, ctx, 1, (int64_t[]){3}, -1, 1), "eps");
    EXPECT_REFUSED(tact_layer_groupnorm(&l, ctx, 3, 4, 1e-5, 1), "divisible");
    EXPECT_REFUSED(tact_layer_groupnorm(&l, ctx, 2, 4, 0, 1), "eps");
    EXPECT_REFUSED(tact_layer_embedding(&l, ctx, 0, 4), "positive");
    EXPECT_REFUSED(tact_layer_embedding(&l, NULL, 5, 4), NULL);
    EXPECT_REFUSED(tact_layer_dropout(&l, -0.1), NULL);
    EXPECT_REFUSED(tact_layer_dropout(&l, 1.5), NULL);
    EXPECT_REFUSED(tact_layer_dropout(&l, NAN), NULL);
    /* A NULL layer. */
    cr_expect_eq(tact_layer_linear(NULL, ctx, 3, 3, 1), TACT_EINVAL);
    cr_expect_eq(tact_layer_dropout(NULL, 0.5), TACT_EINVAL);
    cr_expect_eq(tact_layer_params(NULL, "x", &(tact_params){0}), TACT_EINVAL);
    float x[3] = {1, 2, 3};
    cr_expect_neq(tact_status_of(tact_layer_forward(NULL, s_floats(ctx, 1, (int64_t[]){3}, x), 0)), TACT_OK);
    /* A refused (zeroed) layer applied: an error tensor. */
    memset(&l, 0, sizeof l);
    cr_expect_neq(tact_status_of(tact_layer_forward(&l, s_floats(ctx, 1, (int64_t[]){3}, x), 0)), TACT_OK);
    /* A batch norm of one dim: an error tensor, not a crash. */
    tact_layer bn;
    cr_assert_eq(tact_layer_batchnorm(&bn, ctx, 3, 1e-5, 0.1, 1, 1), TACT_OK);
    cr_expect_neq(tact_status_of(tact_layer_forward(&bn, s_floats(ctx, 1, (int64_t[]){3}, x), 1)), TACT_OK);
    tact_ctx_close(&ctx);
}

/* Inputs the reference refuses: a layer norm over dims that are not the
 * layer's, a training batch norm with one value per channel (PyTorch's
 * error; the reference would divide by zero). */
Test(layers, forward_refuses_inputs_the_reference_refuses) {
    tact_ctx *ctx = s_open(71);
    tact_layer ln, bn;
    cr_assert_eq(tact_layer_layernorm(&ln, ctx, 1, (int64_t[]){4}, 1e-5, 0), TACT_OK);
    tact_tensor *x = tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){4, 6});
    tact_tensor *y = tact_layer_forward(&ln, x, 1);
    cr_expect_eq(tact_status_of(y), TACT_ESHAPE);
    cr_expect(strstr(tact_error_message(y), "layernorm"), "%s", tact_error_message(y));
    cr_expect_eq(tact_status_of(tact_layer_forward(&ln, tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){6, 4}), 1)), TACT_OK);
    cr_assert_eq(tact_layer_batchnorm(&bn, ctx, 4, 1e-5, 0.1, 1, 1), TACT_OK);
    tact_tensor *z = tact_layer_forward(&bn, tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){1, 4}), 1);
    cr_expect_eq(tact_status_of(z), TACT_ESHAPE);
    cr_expect(strstr(tact_error_message(z), "more than one value per channel"), "%s", tact_error_message(z));
    cr_expect_eq(tact_status_of(tact_layer_forward(&bn, tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){1, 4}), 0)), TACT_OK, "eval is fine");
    tact_ctx_close(&ctx);
}
