/* test_nn.c - the nn functions of tact.h (conv2d, conv_transpose2d, max_pool2d, avg_pool2d, linear, layernorm, batchnorm, one_hot, the
 * cross entropies, argmax, argmin, cumsum, triu, tril, masked_fill, pow, scaled_dot_product_attention, interpolate, einsum) against PyTorch's answers (golden_nn.inc, made by gen_api_golden.py), comparisons by hand, and
 * the kernel counts the reference's fusion gives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#include "golden_nn.inc"

static tact_ctx *s_ctx; /* the test's context, for scalars */

static tact_tensor *s_apply(const golden_nn_t *g, tact_tensor **in) {
    tact_window w;
    tu_window(g->p, &w); /* then p[13]: bias, p[14..15]: output_padding */
    const char *f = g->fn;
    if (!strcmp(f, "conv2d") || !strcmp(f, "conv1d") || !strcmp(f, "conv3d")) return tact_conv2d(in[0], in[1], g->p[13] ? in[2] : NULL, &w);
    if (!strcmp(f, "max_pool1d") || !strcmp(f, "avg_pool1d")) {
        w.ndims = 1;
        return f[0] == 'm' ? tact_max_pool2d(in[0], &w) : tact_avg_pool2d(in[0], &w);
    }
    if (!strcmp(f, "max_pool2d")) return tact_max_pool2d(in[0], &w);
    if (!strcmp(f, "avg_pool2d")) return tact_avg_pool2d(in[0], &w);
    if (!strcmp(f, "linear")) return tact_linear(in[0], in[1], g->p[0] ? in[2] : NULL);
    /* layernorm p: 1 or 2 axes (a second axis of 0 means none), eps in units of 1e-9. */
    if (!strcmp(f, "layernorm")) return tact_layernorm(in[0], g->p[1] ? 2 : 1, (int[]){(int)g->p[0], (int)g->p[1]}, (double)g->p[2] * 1e-9);
    /* batchnorm p: axis, and 1 when there is no weight or bias (inputs x, mean, invstd). */
    if (!strcmp(f, "batchnorm"))
        return g->p[1] ? tact_batchnorm(in[0], NULL, NULL, in[1], in[2], (int)g->p[0]) : tact_batchnorm(in[0], in[1], in[2], in[3], in[4], (int)g->p[0]);
    if (!strcmp(f, "one_hot")) return tact_one_hot(in[0], g->p[0]);
    if (!strcmp(f, "binary_crossentropy")) return tact_binary_crossentropy(in[0], in[1]);
    if (!strcmp(f, "binary_crossentropy_logits")) return tact_binary_crossentropy_logits(in[0], in[1]);
    if (!strcmp(f, "sparse_categorical_crossentropy")) return tact_sparse_categorical_crossentropy(in[0], in[1], g->p[0], (double)g->p[1] / 100);
    const int64_t *p = g->p;
    if (!strcmp(f, "argmax")) return p[2] ? tact_argmax_flat(in[0]) : tact_argmax(in[0], (int)p[0], (int)p[1]);
    if (!strcmp(f, "argmin")) return p[2] ? tact_argmin_flat(in[0]) : tact_argmin(in[0], (int)p[0], (int)p[1]);
    if (!strcmp(f, "cumsum")) return tact_cumsum(in[0], (int)p[0]);
    if (!strcmp(f, "triu")) return tact_triu(in[0], p[0]);
    if (!strcmp(f, "tril")) return tact_tril(in[0], p[0]);
    if (!strcmp(f, "masked_fill")) return tact_masked_fill(in[0], in[1], tact_reshape(in[2], 0, NULL));
    if (!strcmp(f, "pow")) return tact_pow(in[0], p[0] ? tact_scalar(s_ctx, (double)p[1] / 100) : in[1]);
    if (!strcmp(f, "conv_transpose2d") || !strcmp(f, "conv_transpose1d") || !strcmp(f, "conv_transpose3d")) {
        w.output_padding[0] = p[14], w.output_padding[1] = p[15];
        return tact_conv_transpose2d(in[0], in[1], p[13] ? in[2] : NULL, &w);
    }
    /* interpolate p: n, align_corners, the n sizes. */
    if (!strcmp(f, "interpolate")) return tact_interpolate(in[0], (int)p[0], p + 2, (int)p[1]);
    if (!strcmp(f, "einsum")) {
        static const char *const formulas[] = {"ij,jk->ik", "ij->ji",          "bij,bjk->bik", "i,i->",     "ij,kj",        "abc->cb", "ij,j->i",
                                               "i,j->ij",   "bhqd,bhkd->bhqk", "ijk->",        "ij,ij->ij", "ij,jk,kl->il", "ij->j"};
        return tact_einsum(formulas[p[0]], g->nin, in);
    }
    if (!strcmp(f, "minimum")) return tact_minimum(in[0], in[1]);
    if (!strcmp(f, "maximum")) return tact_maximum(in[0], in[1]);
    if (!strcmp(f, "eq")) return tact_eq(in[0], in[1]);
    if (!strcmp(f, "lt")) return tact_lt(in[0], in[1]);
    if (!strcmp(f, "ge")) return tact_ge(in[0], in[1]);
    if (!strcmp(f, "lerp")) return tact_lerp(in[0], in[1], tact_scalar(s_ctx, 0.25));
    /* scaled_dot_product_attention p: is_causal, and the mask in[3]: 0 none, 1 float (added), 2 bool (an int 0/1 input cast). */
    if (!strcmp(f, "scaled_dot_product_attention")) {
        tact_tensor *mask = p[1] == 1 ? in[3] : p[1] == 2 ? tact_cast(in[3], TACT_BOOL) : NULL;
        return tact_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0, (int)p[0], 0);
    }
    cr_assert_fail("no function %s", f);
    return NULL;
}

/* Within the reference suite's forward tolerance, 1e-6 + 1e-3 |want|. */
Test(api_nn, every_function_against_pytorch) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    s_ctx = ctx;
    for (size_t c = 0; c < sizeof golden_nn / sizeof golden_nn[0]; c++) {
        const golden_nn_t *g = &golden_nn[c];
        tact_scope_begin(ctx);
        tact_tensor *in[5];
        const float *x = g->x;
        for (int i = 0; i < g->nin; i++) {
            int64_t n = 1;
            for (int k = 0; k < g->ndim[i]; k++) n *= g->shape[i][k];
            if (g->kind[i] == 'i') {
                int32_t *iv = malloc(sizeof *iv * (size_t)n);
                for (int64_t k = 0; k < n; k++) iv[k] = (int32_t)x[k];
                in[i] = tact_from_data(ctx, TACT_INT32, g->ndim[i], g->shape[i], iv);
                free(iv);
            } else {
                in[i] = tact_from_data(ctx, TACT_FLOAT32, g->ndim[i], g->shape[i], x);
            }
            x += n;
        }
        tact_tensor *y = s_apply(g, in);
        cr_assert_eq(tact_status_of(y), TACT_OK, "%s [case %zu]: %s", g->fn, c, tact_error_message(y));
        cr_assert_eq(tact_ndim(y), g->out_ndim, "%s [case %zu]: %d dims, not %d", g->fn, c, tact_ndim(y), g->out_ndim);
        for (int k = 0; k < g->out_ndim; k++)
            cr_assert_eq(tact_dim(y, k), g->out_shape[k], "%s [case %zu]: dim %d is %lld, not %lld", g->fn, c, k, (long long)tact_dim(y, k),
                         (long long)g->out_shape[k]);
        float *got = malloc(sizeof(float) * (size_t)g->m);
        tact_tensor *yf = tact_cast(y, TACT_FLOAT32);
        cr_assert_eq(tact_read(yf, got, sizeof(float) * (size_t)g->m), TACT_OK, "%s: %s", g->fn, tact_ctx_error(ctx));
        for (int i = 0; i < g->m; i++)
            cr_assert(fabs((double)got[i] - g->want[i]) <= 1e-6 + 1e-3 * fabs((double)g->want[i]), "%s [case %zu, %d]: %.9g, not %.9g", g->fn, c, i, got[i],
                      g->want[i]);
        free(got);
        tact_scope_end(ctx);
    }
    tact_ctx_close(&ctx);
}

/* Comparisons by hand, NaN included: eq and ne as IEEE, le and ge false at
 * a NaN (PyTorch; the reference's not(lt) says true). */
Test(api_nn, comparisons_by_hand) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    float a[5] = {1, 2, NAN, -1, 3}, b[5] = {1, 3, 1, -2, NAN};
    tact_tensor *ta = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){5}, a), *tb = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){5}, b);
    tact_tensor *(*fns[6])(tact_tensor *, tact_tensor *) = {tact_eq, tact_ne, tact_lt, tact_gt, tact_le, tact_ge};
    for (int f = 0; f < 6; f++) {
        uint8_t got[5];
        tact_tensor *r = fns[f](ta, tb);
        cr_assert_eq(tact_dtype_of(r), TACT_BOOL);
        cr_assert_eq(tact_read(r, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int i = 0; i < 5; i++) {
            int want = f == 0 ? a[i] == b[i] : f == 1 ? a[i] != b[i] : f == 2 ? a[i] < b[i] : f == 3 ? a[i] > b[i] : f == 4 ? a[i] <= b[i] : a[i] >= b[i];
            cr_assert_eq(got[i], want, "comparison %d at %d: %d", f, i, got[i]);
        }
    }
    tact_ctx_close(&ctx);
}

/* The reference's fusion: conv2d with its bias is one reduce kernel;
 * errors name the op. */
/* A convolution whose windows hold few values (cin x kh x kw < 16) is one
 * kernel, as the reference fuses it; a wider one is two: the windows laid
 * out as columns, then one matmul-like reduce. */
Test(api_nn, conv2d_kernels_and_errors_name_the_op) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *x = tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 4, (int64_t[]){2, 3, 8, 8}));
    tact_tensor *w = tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 4, (int64_t[]){4, 3, 3, 3}));
    tact_tensor *b = tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){4}));
    tact_tensor *x1 = tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 4, (int64_t[]){2, 1, 8, 8}));
    tact_tensor *w1 = tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 4, (int64_t[]){4, 1, 3, 3}));
    tact_tensor *in[5] = {x, w, b, x1, w1};
    cr_assert_eq(tact_realize(ctx, 5, in), TACT_OK);
    float out[2 * 4 * 6 * 6];
    tact_stats st;
    const struct {
        tact_tensor *x, *w;
        uint64_t kernels;
        float value;
    } cases[2] = {{x1, w1, 1, 10.0f}, {x, w, 2, 28.0f}}; /* 9 or 27 ones times ones, plus the bias */
    for (int c = 0; c < 2; c++) {
        cr_assert_eq(tact_read(tact_conv2d(cases[c].x, cases[c].w, b, NULL), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_ctx_stats(ctx, &st);
        cr_assert_eq(st.kernels, cases[c].kernels, "conv2d %d: %llu kernels", c, (unsigned long long)st.kernels); /* of the last realize */
        for (int i = 0; i < 2 * 4 * 36; i++) cr_assert_eq(out[i], cases[c].value, "conv2d %d: out[%d] %g", c, i, (double)out[i]);
    }
    tact_window o;
    tact_window_default(&o);
    o.groups = 2;
    tact_tensor *e = tact_conv2d(x, w, NULL, &o);
    cr_assert(strstr(tact_error_message(e), "conv2d:"), "%s", tact_error_message(e));
    o.groups = 1, o.npad = 3;
    e = tact_conv2d(x, w, NULL, &o);
    cr_assert(strstr(tact_error_message(e), "conv2d: 3 padding amounts"), "%s", tact_error_message(e));
    tact_window_default(&o);
    o.kernel[0] = 9;
    e = tact_max_pool2d(x, &o);
    cr_assert(strstr(tact_error_message(e), "does not fit"), "%s", tact_error_message(e));
    e = tact_sparse_categorical_crossentropy(x, x, -1, 2.0);
    cr_assert(strstr(tact_error_message(e), "label_smoothing 2"), "%s", tact_error_message(e));
    tact_ctx_close(&ctx);
}

/* lshift and rshift of unsigned ints by hand (wrapping as C), refused for
 * signed ints as the reference. */
Test(api_nn, shifts_by_hand) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    uint8_t v[4] = {1, 7, 200, 255}, l[4], r[4];
    tact_tensor *x = tact_from_data(ctx, TACT_UINT8, 1, (int64_t[]){4}, v);
    cr_assert_eq(tact_read(tact_lshift(x, 2), l, sizeof l), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_rshift(x, 3), r, sizeof r), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(l[i], (uint8_t)(v[i] << 2), "%d << 2: %d", v[i], l[i]);
        cr_assert_eq(r[i], v[i] >> 3, "%d >> 3: %d", v[i], r[i]);
    }
    tact_tensor *e = tact_lshift(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){1}, (int32_t[]){1}), 1);
    cr_assert_eq(tact_status_of(e), TACT_EDTYPE, "%s", tact_error_message(e));
    tact_ctx_close(&ctx);
}

/* A sample's convolution has the same bits in a batch of one as in a
 * larger batch (DESIGN.md §2, batch invariance), on both ways conv2d
 * computes: columns and a matmul (windows of 72 values), and the pooling
 * view (one sample's columns over 4 MiB: 16 x 9 x 96 x 96 floats). */
Test(api_nn, a_samples_convolution_does_not_depend_on_the_batch) {
    uint64_t seed = tu_seed(), rng = seed;
    static const int64_t cases[2][4] = {{5, 8, 12, 12}, {2, 16, 96, 96}}; /* batch, cin, h, w */
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    for (int c = 0; c < 2; c++) {
        int64_t bs = cases[c][0], cin = cases[c][1], h = cases[c][2], w = cases[c][3], n = bs * cin * h * w, per = 4 * h * w;
        float *x = malloc(sizeof *x * (size_t)n), wt[4 * 16 * 9], *all = malloc(sizeof *all * (size_t)(bs * per)), *one = malloc(sizeof *one * (size_t)per);
        cr_assert(x && all && one);
        for (int64_t i = 0; i < n; i++) x[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
        for (int i = 0; i < 4 * 16 * 9; i++) wt[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
        tact_window win;
        tact_window_default(&win);
        win.npad = 1, win.padding[0] = 1;
        tact_tensor *weight = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){4, cin, 3, 3}, wt);
        tact_tensor *xb = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){bs, cin, h, w}, x);
        tact_tensor *x1 = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){1, cin, h, w}, x);
        cr_assert_eq(tact_read(tact_conv2d(xb, weight, NULL, &win), all, sizeof *all * (size_t)(bs * per)), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(tact_conv2d(x1, weight, NULL, &win), one, sizeof *one * (size_t)per), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int64_t i = 0; i < per; i++)
            cr_assert(memcmp(&all[i], &one[i], sizeof one[i]) == 0, "seed %#llx: case %d, output %lld: %.9g in a batch of %lld, %.9g alone",
                      (unsigned long long)seed, c, (long long)i, (double)all[i], (long long)bs, (double)one[i]);
        free(x), free(all), free(one);
    }
    tact_ctx_close(&ctx);
}

/* Interpolation to one output with align_corners is the first corner, as
 * PyTorch gives (the reference divides by zero and gives NaN); without
 * align_corners it is the middle's linear mix, hand-computed. */
Test(api_nn, interpolate_to_one_output_is_the_corner) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    float v[2][4] = {{2, 3, 5, 7}, {-1, 4, 0, 8}}, out[2];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 3, (int64_t[]){1, 2, 4}, v);
    int64_t one = 1;
    cr_assert_eq(tact_read(tact_interpolate(x, 1, &one, 1), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert(out[0] == 2 && out[1] == -1, "align_corners: %g %g, want the first corners 2, -1", (double)out[0], (double)out[1]);
    /* Without: the source position (0 + 0.5) * 4 - 0.5 = 1.5, between elements 1 and 2. */
    cr_assert_eq(tact_read(tact_interpolate(x, 1, &one, 0), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert(out[0] == 4 && out[1] == 2, "no align_corners: %g %g, want 4, 2", (double)out[0], (double)out[1]);
    tact_ctx_close(&ctx);
}

/* A zero-filled window is the defaults (count_include_pad aside, which
 * only padding makes a difference to): pools and a convolution give the
 * same bits as with tact_window_default's window; a designated
 * initializer names only what differs. */
Test(api_nn, a_zero_window_field_is_its_default) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    float v[2 * 3 * 6 * 6], k[4 * 3 * 3 * 3], a[2 * 4 * 6 * 6], b[2 * 4 * 6 * 6];
    for (int i = 0; i < 2 * 3 * 6 * 6; i++) v[i] = (float)((i * 37) % 11) - 5;
    for (int i = 0; i < 4 * 3 * 3 * 3; i++) k[i] = (float)((i * 13) % 7) * 0.25f - 0.75f;
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){2, 3, 6, 6}, v);
    tact_tensor *w = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){4, 3, 3, 3}, k);
    tact_window def;
    tact_window_default(&def);
    cr_assert_eq(tact_read(tact_max_pool2d(x, &(tact_window){0}), a, 2 * 3 * 3 * 3 * 4), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_max_pool2d(x, &def), b, 2 * 3 * 3 * 3 * 4), TACT_OK);
    cr_assert(memcmp(a, b, 2 * 3 * 3 * 3 * 4) == 0, "max_pool2d");
    cr_assert_eq(tact_read(tact_avg_pool2d(x, &(tact_window){0}), a, 2 * 3 * 3 * 3 * 4), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_avg_pool2d(x, NULL), b, 2 * 3 * 3 * 3 * 4), TACT_OK);
    cr_assert(memcmp(a, b, 2 * 3 * 3 * 3 * 4) == 0, "avg_pool2d");
    def.npad = 1, def.padding[0] = 1;
    cr_assert_eq(tact_read(tact_conv2d(x, w, NULL, &(tact_window){.npad = 1, .padding = {1}}), a, sizeof a), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_conv2d(x, w, NULL, &def), b, sizeof b), TACT_OK);
    cr_assert(memcmp(a, b, sizeof a) == 0, "conv2d with a padding of 1");
    tact_ctx_close(&ctx);
}

/* The short forms are the long calls with the defaults, bit for bit. */
Test(api_nn, the_short_forms_are_the_long_calls) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    float v[12] = {3, -1, 2.5f, 7, 0, -4, 1, 1, 9, -2, 6, 0.5f};
    int32_t lab[3] = {1, 0, 3};
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){3, 4}, v), *y = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){3}, lab);
    int one = 1, last = -1;
    struct {
        tact_tensor *shortf, *longf;
        int n;
    } pairs[] = {{tact_sum_all(x), tact_sum(x, -1, NULL, 0), 1},       {tact_mean_all(x), tact_mean(x, -1, NULL, 0), 1},
                 {tact_max_all(x), tact_max(x, -1, NULL, 0), 1},       {tact_min_all(x), tact_min(x, -1, NULL, 0), 1},
                 {tact_sum_axis(x, 1), tact_sum(x, 1, &one, 0), 3},    {tact_mean_axis(x, -1), tact_mean(x, 1, &last, 0), 3},
                 {tact_max_axis(x, 1), tact_max(x, 1, &one, 0), 3},    {tact_cross_entropy(x, y), tact_sparse_categorical_crossentropy(x, y, -1, 0), 1}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        float a[4], b[4];
        cr_assert_eq(tact_read(pairs[i].shortf, a, sizeof(float) * (size_t)pairs[i].n), TACT_OK, "pair %zu: %s", i, tact_ctx_error(ctx));
        cr_assert_eq(tact_read(pairs[i].longf, b, sizeof(float) * (size_t)pairs[i].n), TACT_OK, "pair %zu: %s", i, tact_ctx_error(ctx));
        cr_assert(memcmp(a, b, sizeof(float) * (size_t)pairs[i].n) == 0, "pair %zu differs", i);
        cr_assert_eq(tact_ndim(pairs[i].shortf), tact_ndim(pairs[i].longf), "pair %zu: %d dims, the long call %d", i, tact_ndim(pairs[i].shortf),
                     tact_ndim(pairs[i].longf));
    }
    double s;
    cr_assert_eq(tact_item(tact_sum_all(x), &s), TACT_OK);
    cr_assert_eq(s, 23.0, "hand-summed: %g", s);
    tact_ctx_close(&ctx);
}

/* A uniform double in [0, 1) from tu_rand. */
static double s_unit(uint64_t *seed) { return (double)(tu_rand(seed) >> 11) / 9007199254740992.0; }

/* x @ W^T (a linear layer's forward) with rows enough: W^T is copied to a
 * buffer of its own first (2 kernels), so the matmul reads it along its
 * columns; with few rows, or when x wants a gradient (whose kernel would
 * then read the copy along the reduce), it is read as it is (1 kernel).
 * Values against a double loop within 1e-5 relative either way. */
Test(api_nn, linear_copies_w_transposed_where_that_pays) {
    enum { M = 64, K = 100, N = 48 };
    uint64_t seed = 11;
    float x[M * K], w[N * K], out[M * N];
    for (int i = 0; i < M * K; i++) x[i] = (float)(s_unit(&seed) * 2 - 1);
    for (int i = 0; i < N * K; i++) w[i] = (float)(s_unit(&seed) * 2 - 1);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    const struct {
        int rows, grad;
        uint64_t kernels;
    } cases[3] = {{M, 0, 2}, {16, 0, 1}, {M, 1, 1}};
    for (int c = 0; c < 3; c++) {
        int m = cases[c].rows;
        tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){m, K}, x), *tw = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, K}, w);
        if (cases[c].grad) tact_set_requires_grad(tx, 1);
        tact_tensor *in[2] = {tx, tw};
        cr_assert_eq(tact_realize(ctx, 2, in), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(tact_linear(tx, tact_transpose(tw, 0, 1), NULL), out, sizeof(float) * (size_t)(m * N)), TACT_OK, "%s",
                     tact_ctx_error(ctx));
        tact_stats st;
        tact_ctx_stats(ctx, &st);
        cr_expect_eq(st.kernels, cases[c].kernels, "case %d: %llu kernels", c, (unsigned long long)st.kernels);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < N; j++) {
                double want = 0;
                for (int k = 0; k < K; k++) want += (double)x[i * K + k] * w[j * K + k];
                cr_assert(fabs(out[i * N + j] - want) <= 1e-5 * (1 + fabs(want)), "case %d seed 11: [%d][%d] %g, want %g", c, i, j,
                          (double)out[i * N + j], want);
            }
    }
    /* The path a user takes: a linear layer's forward (its bias added),
     * 64 rows against 16: the one more kernel is the copy. */
    tact_layer layer;
    cr_assert_eq(tact_layer_linear(&layer, ctx, K, N, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    float lw[N * K], lb[N];
    cr_assert_eq(tact_read(layer.weight, lw, sizeof lw), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(layer.bias, lb, sizeof lb), TACT_OK, "%s", tact_ctx_error(ctx));
    uint64_t kernels[2];
    for (int c = 0; c < 2; c++) {
        int m = c ? 16 : M;
        tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){m, K}, x);
        cr_assert_eq(tact_realize(ctx, 1, &tx), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(tact_layer_forward(&layer, tx, 1), out, sizeof(float) * (size_t)(m * N)), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_stats st;
        tact_ctx_stats(ctx, &st);
        kernels[c] = st.kernels;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < N; j++) {
                double want = lb[j];
                for (int k = 0; k < K; k++) want += (double)x[i * K + k] * lw[j * K + k];
                cr_assert(fabs(out[i * N + j] - want) <= 1e-5 * (1 + fabs(want)), "layer, %d rows: [%d][%d] %g, want %g", m, i, j,
                          (double)out[i * N + j], want);
            }
    }
    cr_expect_eq(kernels[0], kernels[1] + 1, "the layer's forward: %llu kernels for 64 rows, %llu for 16", (unsigned long long)kernels[0],
                 (unsigned long long)kernels[1]);
    tact_ctx_close(&ctx);
}

/* where() picks the bits of one of its values, NaN payloads, -0 and
 * infinities included, in scalar kernels (the condition from int32s: the
 * C printer's integer masks) and vector ones (from float32s), float32 and
 * float64. */
Test(api_nn, where_picks_exact_bits) {
    enum { N = 67 };
    uint32_t xb[N], yb[N];
    int32_t ci[N];
    float cf[N];
    uint64_t seed = 5;
    const uint32_t special[6] = {0x7fc01234u, 0xffa00001u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x00000001u};
    for (int i = 0; i < N; i++) {
        xb[i] = i < 6 ? special[i] : (uint32_t)(s_unit(&seed) * 4294967295.0);
        yb[i] = i >= 6 && i < 12 ? special[i - 6] : (uint32_t)(s_unit(&seed) * 4294967295.0);
        ci[i] = (int32_t)(s_unit(&seed) * 4) - 2;
        cf[i] = (float)ci[i];
    }
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    for (int f64 = 0; f64 < 2; f64++)
        for (int vec = 0; vec < 2; vec++) {
            double xd[N], yd[N];
            for (int i = 0; i < N; i++) {
                float a, b;
                memcpy(&a, &xb[i], 4), memcpy(&b, &yb[i], 4);
                xd[i] = a, yd[i] = b; /* float64: the float32 values widened (NaNs keep being NaNs) */
            }
            tact_dtype d = f64 ? TACT_FLOAT64 : TACT_FLOAT32;
            tact_tensor *tx = tact_from_data(ctx, d, 1, (int64_t[]){N}, f64 ? (void *)xd : (void *)xb);
            tact_tensor *ty = tact_from_data(ctx, d, 1, (int64_t[]){N}, f64 ? (void *)yd : (void *)yb);
            tact_tensor *c = vec ? tact_lt(tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){N}, cf), tact_scalar(ctx, 0))
                                 : tact_lt(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, ci), tact_scalar(ctx, 0));
            uint64_t got[N];
            cr_assert_eq(tact_read(tact_where(c, tx, ty), got, (f64 ? 8 : 4) * N), TACT_OK, "%s", tact_ctx_error(ctx));
            for (int i = 0; i < N; i++) {
                int take = ci[i] < 0;
                if (f64) {
                    uint64_t want;
                    memcpy(&want, take ? &xd[i] : &yd[i], 8);
                    cr_assert_eq(got[i], want, "float64 %s [%d]: %016llx, want %016llx", vec ? "vector" : "scalar", i, (unsigned long long)got[i],
                                 (unsigned long long)want);
                } else {
                    uint32_t g, want = take ? xb[i] : yb[i];
                    memcpy(&g, (char *)got + 4 * i, 4);
                    cr_assert_eq(g, want, "float32 %s [%d]: %08x, want %08x", vec ? "vector" : "scalar", i, g, want);
                }
            }
        }
    tact_ctx_close(&ctx);
}
