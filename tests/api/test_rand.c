/* test_rand.c - tact's random numbers against the reference's own (golden_rand.inc, made by gen_rand_golden.py with
 * tinygrad 0.9.2): rand bit for bit, the float transforms within tolerance; the same bits for 1 and 8 threads and for
 * any realize order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#include "golden_rand.inc"

static tact_tensor *s_call(tact_ctx *ctx, const golden_rand_t *g) {
    const char *f = g->fn;
    tact_dtype d = TACT_FLOAT32;
    if (!strcmp(f, "rand")) return tact_rand(ctx, d, g->ndim, g->shape);
    if (!strcmp(f, "randn")) return tact_randn(ctx, d, g->ndim, g->shape);
    if (!strcmp(f, "uniform")) return tact_uniform(ctx, d, g->ndim, g->shape, g->p[0], g->p[1]);
    if (!strcmp(f, "randint")) return tact_cast(tact_randint(ctx, TACT_INT32, g->ndim, g->shape, (int64_t)g->p[0], (int64_t)g->p[1]), d);
    if (!strcmp(f, "normal")) return tact_normal(ctx, d, g->ndim, g->shape, g->p[0], g->p[1]);
    if (!strcmp(f, "scaled_uniform")) return tact_scaled_uniform(ctx, d, g->ndim, g->shape);
    if (!strcmp(f, "glorot_uniform")) return tact_glorot_uniform(ctx, d, g->ndim, g->shape);
    if (!strcmp(f, "kaiming_uniform")) return tact_kaiming_uniform(ctx, d, g->ndim, g->shape, g->p[0]);
    if (!strcmp(f, "kaiming_normal")) return tact_kaiming_normal(ctx, d, g->ndim, g->shape, g->p[0]);
    if (!strcmp(f, "multinomial")) {
        static const float weights[8] = {0.1f, 0.5f, 0.2f, 0.2f, 1.0f, 0.0f, 0.0f, 3.0f};
        tact_tensor *w = tact_from_data(ctx, TACT_FLOAT32, g->ndim, g->shape, weights);
        return tact_cast(tact_multinomial(w, (int64_t)g->p[0], (int)g->p[1]), d);
    }
    if (!strcmp(f, "dropout")) {
        tact_tensor *twos = tact_contiguous(tact_full(ctx, d, g->ndim, g->shape, 2.0));
        return tact_dropout(twos, g->p[0], 1);
    }
    cr_assert_fail("no function %s", f);
    return NULL;
}

/* Runs every sequence; realize_each: realize each call at once, else all
 * calls of a sequence together at its end. */
static void s_run(int threads, int realize_each, float **got) {
    tact_options o;
    tact_options_default(&o);
    o.cpu_threads = threads;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK);
    size_t n = sizeof golden_rand / sizeof golden_rand[0];
    tact_tensor **t = calloc(n, sizeof *t);
    for (size_t c = 0; c < n; c++) {
        const golden_rand_t *g = &golden_rand[c];
        if (g->first) cr_assert_eq(tact_manual_seed(ctx, g->seed), TACT_OK);
        t[c] = s_call(ctx, g);
        cr_assert_eq(tact_status_of(t[c]), TACT_OK, "%s: %s", g->fn, tact_error_message(t[c]));
        if (realize_each) cr_assert_eq(tact_realize(ctx, 1, &t[c]), TACT_OK, "%s", tact_ctx_error(ctx));
    }
    for (size_t c = n; c-- > 0;) { /* read in reverse order */
        got[c] = calloc((size_t)golden_rand[c].n + 1, sizeof(float));
        cr_assert_eq(tact_read(t[c], got[c], sizeof(float) * (size_t)golden_rand[c].n), TACT_OK, "%s", tact_ctx_error(ctx));
    }
    free(t);
    tact_ctx_close(&ctx);
}

/* rand and dropout are exact (integer Threefry, a shift, an exact scaling,
 * a comparison); the transforms of rand are within the reference suite's
 * 1e-6 + 1e-3 |want| (tinygrad's C compiler contracts low + (high - low) r
 * into a fused multiply-add, 1 ulp away at times; randn and the normals go
 * through cos, log and sqrt), and randint within 1 (that ulp can cross an
 * integer). */
Test(api_rand, the_references_numbers_for_any_threads_and_realize_order) {
    size_t n = sizeof golden_rand / sizeof golden_rand[0];
    float **a = calloc(n, sizeof *a), **b = calloc(n, sizeof *b);
    s_run(1, 1, a);
    s_run(8, 0, b);
    for (size_t c = 0; c < n; c++) {
        const golden_rand_t *g = &golden_rand[c];
        cr_assert(memcmp(a[c], b[c], sizeof(float) * (size_t)g->n) == 0, "%s [call %zu]: 1 thread realized at once and 8 threads at the end differ", g->fn, c);
        int exact = !strcmp(g->fn, "rand") || !strcmp(g->fn, "dropout") || !strcmp(g->fn, "multinomial"), ints = !strcmp(g->fn, "randint");
        for (int i = 0; i < g->n; i++) {
            float w = g->want[i], v = a[c][i];
            if (exact) cr_assert_eq(v, w, "%s [call %zu, %d]: %a, not %a", g->fn, c, i, v, w);
            else if (ints) cr_assert_leq(fabsf(v - w), 1, "%s [call %zu, %d]: %g, not %g", g->fn, c, i, v, w);
            else cr_assert(fabs((double)v - w) <= 1e-6 + 1e-3 * fabs((double)w), "%s [call %zu, %d]: %.9g, not %.9g", g->fn, c, i, v, w);
        }
        free(a[c]), free(b[c]);
    }
    free(a), free(b);
}

/* Errors and the eval-mode dropout; the _like creators take x's shape and dtype. */
Test(api_rand, errors_and_likes) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    cr_assert_eq(tact_status_of(tact_randint(ctx, TACT_FLOAT32, 1, (int64_t[]){3}, 0, 5)), TACT_EDTYPE);
    cr_assert_eq(tact_status_of(tact_rand(ctx, TACT_FLOAT32, 1, (int64_t[]){-1})), TACT_ESHAPE);
    cr_assert_eq(tact_status_of(tact_rand(NULL, TACT_FLOAT32, 1, (int64_t[]){3})), TACT_EINVAL);
    tact_tensor *x = tact_from_data(ctx, TACT_INT16, 1, (int64_t[]){3}, (int16_t[]){1, 2, 3});
    cr_assert_eq(tact_dropout(x, 0.5, 0), x, "dropout in eval mode is x itself");
    cr_assert_eq(tact_status_of(tact_dropout(x, 1.5, 1)), TACT_EINVAL);
    int16_t v[3];
    tact_tensor *f = tact_full_like(x, 7);
    cr_assert_eq(tact_dtype_of(f), TACT_INT16);
    cr_assert_eq(tact_read(f, v, sizeof v), TACT_OK);
    cr_assert(v[0] == 7 && v[1] == 7 && v[2] == 7);
    cr_assert_eq(tact_read(tact_ones_like(x), v, sizeof v), TACT_OK);
    cr_assert(v[0] == 1 && v[2] == 1);
    cr_assert_eq(tact_read(tact_zeros_like(x), v, sizeof v), TACT_OK);
    cr_assert(v[0] == 0 && v[2] == 0);
    tact_ctx_close(&ctx);
}
