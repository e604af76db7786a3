/* test_reduce.c - the reductions of tact.h composed from sum and max (mean, min, var, std, logsumexp, softmax,
 * log_softmax, any, all) against PyTorch's answers (golden_reduce.inc, made by gen_api_golden.py), by hand where
 * PyTorch refuses, and their dtypes, errors and kernel counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#include "golden_reduce.inc"

static tact_tensor *s_apply(const golden_reduce_t *g, tact_tensor *x) {
    const int *ax = g->naxes < 0 ? NULL : g->axes;
    if (!strcmp(g->fn, "mean")) return tact_mean(x, g->naxes, ax, g->keepdim);
    if (!strcmp(g->fn, "min")) return tact_min(x, g->naxes, ax, g->keepdim);
    if (!strcmp(g->fn, "prod")) return tact_prod(x, g->naxes, ax, g->keepdim);
    if (!strcmp(g->fn, "logsumexp")) return tact_logsumexp(x, g->naxes, ax, g->keepdim);
    if (!strcmp(g->fn, "var")) return tact_var(x, g->naxes, ax, g->keepdim, g->correction);
    if (!strcmp(g->fn, "std")) return tact_std(x, g->naxes, ax, g->keepdim, g->correction);
    if (!strcmp(g->fn, "softmax")) return tact_softmax(x, g->axes[0]);
    if (!strcmp(g->fn, "log_softmax")) return tact_log_softmax(x, g->axes[0]);
    cr_assert_fail("no function %s", g->fn);
    return NULL;
}

/* Within the reference suite's forward tolerance, 1e-6 + 1e-3 |want|, with
 * the output's shape (keepdim or not) as PyTorch's. */
Test(api_reduce, every_reduction_against_pytorch) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    int checked = 0;
    for (size_t c = 0; c < sizeof golden_reduce / sizeof golden_reduce[0]; c++) {
        const golden_reduce_t *g = &golden_reduce[c];
        tact_scope_begin(ctx);
        float zero = 0, *got = malloc(sizeof(float) * (size_t)(g->m ? g->m : 1));
        tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, g->ndim, g->shape, g->n ? (const void *)g->x : &zero);
        tact_tensor *y = s_apply(g, x);
        cr_assert_eq(tact_status_of(y), TACT_OK, "%s [case %zu]: %s", g->fn, c, tact_error_message(y));
        cr_assert_eq(tact_ndim(y), g->out_ndim, "%s [case %zu]: %d dims", g->fn, c, tact_ndim(y));
        for (int k = 0; k < g->out_ndim; k++) cr_assert_eq(tact_dim(y, k), g->out_shape[k], "%s [case %zu]: dim %d", g->fn, c, k);
        cr_assert_eq(tact_read(y, got, sizeof(float) * (size_t)g->m), TACT_OK, "%s: %s", g->fn, tact_ctx_error(ctx));
        for (int i = 0; i < g->m; i++) {
            float w = g->want[i], v = got[i];
            if (isnan(w)) {
                cr_assert(isnan(v), "%s [case %zu, %d]: %a, not NaN", g->fn, c, i, v);
                continue;
            }
            cr_assert(fabs((double)v - w) <= 1e-6 + 1e-3 * fabs((double)w) || v == w, "%s axes %d keepdim %d correction %g [case %zu, %d]: %.9g, not %.9g",
                      g->fn, g->naxes, g->keepdim, g->correction, c, i, v, w);
            checked++;
        }
        free(got);
        tact_scope_end(ctx);
    }
    cr_assert_gt(checked, 500);
    tact_ctx_close(&ctx);
}

/* By hand: min over an empty dim is +inf (max's identity, negated), as the
 * reference; mean of ints is float32 and exact here; min of unsigned ints is
 * exact; any and all are bools; var with correction >= count is inf or NaN
 * as the reference's division by 0. */
Test(api_reduce, dtypes_and_edges_by_hand) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    int one = 1, zero = 0;
    float e[4];
    tact_tensor *empty = tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){4, 0});
    cr_assert_eq(tact_read(tact_min(empty, 1, &one, 0), e, sizeof e), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(e[i], INFINITY);
    int32_t iv[6] = {1, 2, 4, -7, 0, 3};
    tact_tensor *xi = tact_from_data(ctx, TACT_INT32, 2, (int64_t[]){2, 3}, iv);
    tact_tensor *mi = tact_mean(xi, 1, &one, 0);
    cr_assert_eq(tact_dtype_of(mi), TACT_FLOAT32);
    float m[2];
    cr_assert_eq(tact_read(mi, m, sizeof m), TACT_OK);
    cr_assert(fabsf(m[0] - 7.0f / 3) < 1e-6f && fabsf(m[1] - (-4.0f / 3)) < 1e-6f, "%g %g", m[0], m[1]);
    uint8_t uv[5] = {200, 3, 255, 0, 17}, um[1];
    tact_tensor *xu = tact_from_data(ctx, TACT_UINT8, 1, (int64_t[]){5}, uv);
    cr_assert_eq(tact_read(tact_min(xu, 1, &zero, 0), um, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(um[0], 0);
    cr_assert_eq(tact_read(tact_min(tact_shrink(xu, (int64_t[][2]){{0, 3}}), 1, &zero, 0), um, 1), TACT_OK);
    cr_assert_eq(um[0], 3);
    uint8_t any[2], all[2];
    tact_tensor *ta = tact_any(xi, 1, &one, 0), *tl = tact_all(xi, 1, &one, 0);
    cr_assert(tact_dtype_of(ta) == TACT_BOOL && tact_dtype_of(tl) == TACT_BOOL);
    cr_assert_eq(tact_read(ta, any, 2), TACT_OK);
    cr_assert_eq(tact_read(tl, all, 2), TACT_OK);
    cr_assert(any[0] == 1 && any[1] == 1 && all[0] == 1 && all[1] == 0, "any %d %d all %d %d", any[0], any[1], all[0], all[1]);
    float v[2];
    tact_tensor *xf = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 1}, (float[]){1, 2});
    cr_assert_eq(tact_read(tact_var(xf, 1, &one, 0, 1), v, sizeof v), TACT_OK);
    cr_assert(isnan(v[0]) && isnan(v[1]), "0/0 is NaN: %g %g", v[0], v[1]);
    /* prod of ints: exact, in int32 (the sum's accumulation dtype), over 13
     * elements (padded to 16 with ones) */
    int16_t pv[13] = {1, -2, 3, 1, 1, 2, -1, 5, 1, 1, 7, 1, 2};
    int32_t pr[1];
    tact_tensor *tp = tact_prod(tact_from_data(ctx, TACT_INT16, 1, (int64_t[]){13}, pv), -1, NULL, 0);
    cr_assert_eq(tact_dtype_of(tp), TACT_INT32);
    cr_assert_eq(tact_read(tp, pr, sizeof pr), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(pr[0], 1 * -2 * 3 * 2 * -1 * 5 * 7 * 2, "%d", pr[0]);
    /* the reference's element_size, nbytes, is_floating_point */
    cr_assert(tact_element_size(TACT_FLOAT16) == 2 && tact_element_size(TACT_INT64) == 8 && tact_element_size((tact_dtype)99) == 0);
    cr_assert_eq(tact_nbytes(xi), 6 * 4);
    cr_assert(!tact_is_floating_point(xi) && tact_is_floating_point(xf) && !tact_is_floating_point(NULL));
    tact_ctx_close(&ctx);
}

/* Errors name the op; softmax over rows runs in at most 3 kernels, and
 * log_softmax and layernorm too (the reference's fusion). */
Test(api_reduce, errors_and_kernel_counts) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *x = tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){64, 100});
    int bad = 2;
    tact_tensor *e = tact_softmax(x, bad);
    cr_assert_neq(tact_status_of(e), TACT_OK);
    cr_assert(strstr(tact_error_message(e), "max") != NULL, "%s", tact_error_message(e));
    cr_assert_neq(tact_status_of(tact_mean(x, 1, (int[]){5}, 0)), TACT_OK);
    cr_assert_eq(tact_status_of(tact_std(NULL, -1, NULL, 0, 1)), TACT_EINVAL);
    cr_assert_eq(tact_realize(ctx, 1, &x), TACT_OK);
    tact_stats st;
    float out[6400];
    cr_assert_eq(tact_read(tact_softmax(x, -1), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_stats(ctx, &st);
    cr_assert_leq(st.kernels, 3, "softmax: %llu kernels", (unsigned long long)st.kernels);
    for (int i = 0; i < 6400; i++) cr_assert_eq(out[i], 0.01f);
    cr_assert_eq(tact_read(tact_log_softmax(x, 0), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_stats(ctx, &st);
    cr_assert_leq(st.kernels, 3, "log_softmax: %llu kernels", (unsigned long long)st.kernels);
    int last = -1;
    cr_assert_eq(tact_read(tact_layernorm(x, 1, &last, 1e-5), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_stats(ctx, &st);
    cr_assert_leq(st.kernels, 3, "layernorm: %llu kernels", (unsigned long long)st.kernels);
    tact_ctx_close(&ctx);
}

/* A 0-dim tensor's axis 0 or -1 is its one element, as the reference's
 * (_reduce: axis in [-1, 0] of a 0-dim tensor reduces nothing): sum, max,
 * mean and logsumexp give the value, softmax 1 and log_softmax 0 (and its
 * gradient 0); axis 1 is still out of range. */
Test(api_reduce, a_zero_dim_tensors_axis_is_its_element) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    float v = 2.5f;
    tact_tensor *x = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 0, NULL, &v), 1);
    int zero = 0, minus = -1, one = 1;
    double got;
    struct {
        tact_tensor *t;
        double want;
        const char *what;
    } cases[] = {{tact_sum(x, 1, &zero, 0), 2.5, "sum(axis 0)"},   {tact_max(x, 1, &minus, 1), 2.5, "max(axis -1, keepdim)"},
                 {tact_mean(x, 1, &zero, 0), 2.5, "mean(axis 0)"}, {tact_logsumexp(x, 1, &zero, 0), 2.5, "logsumexp(axis 0)"},
                 {tact_softmax(x, -1), 1.0, "softmax"},            {tact_log_softmax(x, 0), 0.0, "log_softmax"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert_eq(tact_ndim(cases[i].t), 0, "%s: %d dims (%s)", cases[i].what, tact_ndim(cases[i].t), tact_error_message(cases[i].t));
        cr_assert_eq(tact_item(cases[i].t, &got), TACT_OK, "%s: %s", cases[i].what, tact_ctx_error(ctx));
        cr_expect_float_eq(got, cases[i].want, 1e-6, "%s: %g", cases[i].what, got);
    }
    cr_assert_eq(tact_backward(tact_softmax(x, -1), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_item(tact_grad(x), &got), TACT_OK);
    cr_expect_float_eq(got, 0.0, 1e-7, "softmax's gradient: %g", got);
    tact_tensor *e = tact_sum(x, 1, &one, 0);
    cr_assert_eq(tact_status_of(e), TACT_ESHAPE, "axis 1 of a 0-dim tensor");
    tact_ctx_close(&ctx);
}
