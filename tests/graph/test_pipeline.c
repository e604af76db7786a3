/* test_pipeline.c - the public API end to end: values against naive C loops, fusion counts, errors, determinism. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "cc.h"
#include "dtype.h"
#include "log.h"
#include "pipeline.h"
#include "replay.h"
#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open(int threads, const char *log_path) {
    tact_options o;
    tact_options_default(&o);
    o.cpu_threads = threads;
    o.log_path = log_path;
    o.timeout_ms = 60000;
    tact_ctx *ctx = NULL;
    int rc = tact_ctx_open(&ctx, &o);
    cr_assert_eq(rc, TACT_OK, "open: %s", tact_last_open_error());
    return ctx;
}

static uint64_t s_kernels(tact_ctx *ctx) {
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    return st.kernels;
}

static float *s_randf(uint64_t *rng, size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)((double)(tu_rand(rng) >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    return p;
}

/* ------------------------------------------------------------- fusion */

Test(graph_pipeline, fma_is_one_kernel_and_exact) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open(0, NULL);
    enum { N = 10000 };
    float *x = s_randf(&rng, N), *y = s_randf(&rng, N), *z = s_randf(&rng, N), out[N];
    int64_t shape[1] = {N};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x);
    tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 1, shape, y);
    tact_tensor *c = tact_from_data(ctx, TACT_FLOAT32, 1, shape, z);
    tact_tensor *r = tact_add(tact_mul(a, b), c);
    cr_assert_eq(tact_realize(ctx, 1, &r), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_kernels(ctx), 1, "a*b+c is one kernel");
    cr_assert_eq(tact_read(r, out, sizeof out), TACT_OK);
    for (int i = 0; i < N; i++) {
        float want = x[i] * y[i];
        want = want + z[i];
        cr_assert(memcmp(&want, &out[i], 4) == 0, "seed %#llx: element %d: %a vs %a", (unsigned long long)seed, i, out[i], want);
    }
    free(x), free(y), free(z);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

Test(graph_pipeline, chain_of_ten_elementwise_ops_is_one_kernel) {
    tact_ctx *ctx = s_open(0, NULL);
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i * 0.25f - 4;
    int64_t shape[2] = {8, 8};
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    for (int k = 0; k < 10; k++) t = k % 2 ? tact_mul(t, tact_scalar(ctx, 0.5)) : tact_add(t, tact_scalar(ctx, 1.0));
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_kernels(ctx), 1);
    float out[64];
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK);
    for (int i = 0; i < 64; i++) {
        float v = x[i];
        for (int k = 0; k < 10; k++) v = k % 2 ? v * 0.5f : v + 1.0f;
        cr_assert_eq(out[i], v, "element %d", i);
    }
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, mul_then_sum_is_one_kernel) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open(0, NULL);
    enum { R = 33, C = 70 };
    float *x = s_randf(&rng, R * C), *y = s_randf(&rng, R * C), out[R];
    int64_t shape[2] = {R, C};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x), *b = tact_from_data(ctx, TACT_FLOAT32, 2, shape, y);
    int axis = 1;
    tact_tensor *s = tact_sum(tact_mul(a, b), 1, &axis, 0);
    cr_assert_eq(tact_ndim(s), 1);
    cr_assert_eq(tact_realize(ctx, 1, &s), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_kernels(ctx), 1);
    cr_assert_eq(tact_read(s, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    /* Against a double-precision sum: any summation order of 70 float
     * products of magnitude <= 4 lands within 70 * 4 * 2^-23 * 4. */
    for (int i = 0; i < R; i++) {
        double acc = 0;
        for (int j = 0; j < C; j++) acc += (double)x[i * C + j] * y[i * C + j];
        cr_assert(fabs(out[i] - acc) <= 1e-4, "seed %#llx: row %d: %a vs %a", (unsigned long long)seed, i, out[i], acc);
    }
    free(x), free(y);
    tact_ctx_close(&ctx);
}


Test(graph_pipeline, matmul_is_one_kernel_and_matches_a_double_loop) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open(0, NULL);
    enum { N = 20, K = 23, M = 24 }; /* the kernel computes 4x8 tiles of outputs */
    float *x = s_randf(&rng, N * K), *y = s_randf(&rng, K * M), out[N * M];
    int64_t sa[2] = {N, K}, sb[2] = {K, M};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, sa, x), *b = tact_from_data(ctx, TACT_FLOAT32, 2, sb, y);
    tact_tensor *c = tact_matmul(a, b);
    cr_assert_eq(tact_realize(ctx, 1, &c), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_kernels(ctx), 1);
    cr_assert_eq(tact_read(c, out, sizeof out), TACT_OK);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) {
            double acc = 0; /* within 23 * 4 * 2^-23 * 4 of any float summation order */
            for (int q = 0; q < K; q++) acc += (double)x[i * K + q] * y[q * M + j];
            cr_assert(fabs(out[i * M + j] - acc) <= 5e-5, "seed %#llx: (%d,%d): %a vs %a", (unsigned long long)seed, i, j,
                      out[i * M + j], acc);
        }
    free(x), free(y);
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, softmax_takes_at_most_three_kernels) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open(0, NULL);
    enum { R = 7, C = 13 };
    float *x = s_randf(&rng, R * C), out[R * C];
    int64_t shape[2] = {R, C};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    int axis = 1;
    /* softmax as the reference writes it: exp(x - max) / sum(exp(x - max)), exp via exp2. */
    tact_tensor *m = tact_max(a, 1, &axis, 1);
    tact_tensor *e = tact_exp2(tact_mul(tact_sub(a, m), tact_scalar(ctx, 1.0 / log(2.0))));
    tact_tensor *s = tact_div(e, tact_sum(e, 1, &axis, 1));
    cr_assert_eq(tact_realize(ctx, 1, &s), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_leq(s_kernels(ctx), 3, "softmax took %llu kernels", (unsigned long long)s_kernels(ctx));
    cr_assert_eq(tact_read(s, out, sizeof out), TACT_OK);
    for (int i = 0; i < R; i++) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < C; j++) mx = fmax(mx, x[i * C + j]);
        for (int j = 0; j < C; j++) sum += exp(x[i * C + j] - mx);
        for (int j = 0; j < C; j++) {
            double want = exp(x[i * C + j] - mx) / sum;
            cr_assert(fabs(out[i * C + j] - want) < 1e-6, "seed %#llx: (%d,%d): %g vs %g", (unsigned long long)seed, i, j,
                      out[i * C + j], want);
        }
    }
    free(x);
    tact_ctx_close(&ctx);
}

/* ------------------------------------------------------------ movement */

Test(graph_pipeline, movement_views_read_the_right_elements) {
    tact_ctx *ctx = s_open(0, NULL);
    int32_t x[24];
    for (int i = 0; i < 24; i++) x[i] = i;
    int64_t shape[3] = {2, 3, 4};
    tact_tensor *a = tact_from_data(ctx, TACT_INT32, 3, shape, x);
    /* permute (2,0,1) -> shape (4,2,3); element [i][j][k] = x[j][k][i]. */
    int order[3] = {2, 0, 1};
    int32_t out[64];
    tact_tensor *p = tact_permute(a, order);
    cr_assert_eq(tact_read(p, out, 24 * 4), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) cr_assert_eq(out[i * 6 + j * 3 + k], x[j * 12 + k * 4 + i]);
    /* flip the last axis, then shrink to [1,3) on it: [j][k][l] = x[j][k][3 - (l+1)]. */
    int ax = 2;
    int64_t rg[3][2] = {{0, 2}, {0, 3}, {1, 3}};
    tact_tensor *f = tact_shrink(tact_flip(a, 1, &ax), (const int64_t(*)[2])rg);
    cr_assert_eq(tact_read(f, out, 12 * 4), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 3; k++)
            for (int l = 0; l < 2; l++) cr_assert_eq(out[j * 6 + k * 2 + l], x[j * 12 + k * 4 + (3 - (l + 1))]);
    /* pad dim 1 by (1, 2) with 7: shape (2, 6, 4). */
    int64_t pads[3][2] = {{0, 0}, {1, 2}, {0, 0}};
    tact_tensor *pd = tact_pad(a, (const int64_t(*)[2])pads, 7);
    cr_assert_eq(tact_dim(pd, 1), 6);
    cr_assert_eq(tact_read(pd, out, 48 * 4), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 6; k++)
            for (int l = 0; l < 4; l++) {
                int32_t want = k >= 1 && k < 4 ? x[j * 12 + (k - 1) * 4 + l] : 7;
                cr_assert_eq(out[j * 24 + k * 4 + l], want, "pad (%d,%d,%d)", j, k, l);
            }
    /* reshape of the permuted tensor, then expand of a size-1 dim. */
    int64_t rs[2] = {8, 3}, ex_in[3] = {8, 1, 3}, ex[3] = {8, 2, 3};
    tact_tensor *e = tact_expand(tact_reshape(tact_reshape(p, 2, rs), 3, ex_in), 3, ex);
    cr_assert_eq(tact_read(e, out, 48 * 4), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 8; i++)
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 3; k++) {
                int flat = i * 3 + k; /* index into p's (4,2,3) row-major order */
                int pi = flat / 6, pj = flat / 3 % 2, pk = flat % 3;
                cr_assert_eq(out[i * 6 + r * 3 + k], x[pj * 12 + pk * 4 + pi]);
            }
    tact_ctx_close(&ctx);
}

/* --------------------------------------------------------------- errors */

Test(graph_pipeline, bad_calls_return_error_tensors_naming_op_and_shapes) {
    tact_ctx *ctx = s_open(0, NULL);
    int64_t s1[2] = {2, 3}, s2[2] = {4, 5};
    tact_tensor *a = tact_zeros(ctx, TACT_FLOAT32, 2, s1), *b = tact_zeros(ctx, TACT_FLOAT32, 2, s2);
    tact_tensor *c = tact_add(a, b);
    cr_assert_eq(tact_status_of(c), TACT_ESHAPE);
    cr_assert(strstr(tact_error_message(c), "add: shapes (2, 3) and (4, 5) do not broadcast"), "%s", tact_error_message(c));
    /* Sticky: ops on an error tensor return it; realize reports it. */
    tact_tensor *d = tact_exp2(tact_mul(c, a));
    cr_assert_eq(d, c);
    cr_assert_eq(tact_realize(ctx, 1, &d), TACT_ESHAPE);
    int axis = 5;
    tact_tensor *e = tact_sum(a, 1, &axis, 0);
    cr_assert(strstr(tact_error_message(e), "sum of (2, 3): axis 5 is out of range"), "%s", tact_error_message(e));
    int order[2] = {0, 0};
    cr_assert(strstr(tact_error_message(tact_permute(a, order)), "not a permutation"));
    int64_t r[1] = {7};
    cr_assert(strstr(tact_error_message(tact_reshape(a, 1, r)), "reshape of (2, 3) (6 elements) to (7,) (7 elements)"),
              "%s", tact_error_message(tact_reshape(a, 1, r)));
    cr_assert_eq(tact_status_of(tact_xor(a, a)), TACT_EDTYPE);
    cr_assert_eq(tact_status_of(tact_cast(a, (tact_dtype)99)), TACT_EDTYPE);
    /* The context still works after all that. */
    tact_tensor *ok = tact_add(a, tact_scalar(ctx, 2.0));
    float out[6];
    cr_assert_eq(tact_read(ok, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_assert_eq(out[i], 2.0f);
    tact_ctx_close(&ctx);
}

/* A context with an empty kernel cache whose compiler fails its first call
 * ("no such luck") and works after (the command is fixed when the context
 * opens).  *flag is the file that marks the first call; unlink and free it. */
static tact_ctx *s_open_failing_once(char **flag) {
    char *cache = tu_tmpfile("cache"), cc[1024];
    unlink(cache);
    setenv("TACT_CACHE_DIR", cache, 1);
    free(cache);
    *flag = tu_tmpfile("cc-failed-once");
    unlink(*flag);
    snprintf(cc, sizeof cc,
             "sh -c 'if [ \"$1\" = --version ] || [ -e %s ]; then exec cc \"$@\"; fi; touch %s; echo no such luck; exit 1' cc", *flag,
             *flag);
    setenv("TACT_CC", cc, 1);
    tact_ctx *ctx = s_open(0, NULL);
    unsetenv("TACT_CC");
    unsetenv("TACT_CACHE_DIR");
    return ctx;
}

Test(graph_pipeline, a_compile_failure_names_the_kernel_and_the_context_goes_on) {
    char *flag;
    tact_ctx *ctx = s_open_failing_once(&flag);
    int64_t s[1] = {5};
    tact_tensor *a = tact_full(ctx, TACT_FLOAT32, 1, s, 3.0);
    tact_tensor *b = tact_sqrt(a);
    int rc = tact_realize(ctx, 1, &b);
    cr_assert_eq(rc, TACT_ECOMPILE, "got %s: %s", tact_status_name(rc), tact_ctx_error(ctx));
    cr_assert(strstr(tact_ctx_error(ctx), "kernel E_5 failed to compile with `sh -c") && strstr(tact_ctx_error(ctx), "no such luck"),
              "%s", tact_ctx_error(ctx));
    float out[5];
    cr_assert_eq(tact_read(b, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 5; i++) cr_assert_eq(out[i], sqrtf(3.0f));
    unlink(flag);
    free(flag);
    tact_ctx_close(&ctx);
}

/* A compiler builds the kernels of one COMPILE in one file.  Six
 * elementwise kernels over 6 elements are all named E_6: kernels 0, 2 and
 * 4 share compiler 0's file, as E_6, E_6_1 and E_6_2, and 1, 3 and 5
 * compiler 1's: two runs of the system compiler in all.  A compiler that
 * refuses any file with the log kernel in it fails that file: each of its
 * kernels is then built alone, the error names the log kernel, and the
 * others are right. */
Test(graph_pipeline, kernels_built_together_keep_their_names_and_their_own_errors) {
    char *dir = tu_tmpfile("batch"), cc[1400], calls[1300];
    unlink(dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(calls, sizeof calls, "%s/calls", dir);
    snprintf(cc, sizeof cc,
             "sh -c 'for last; do :; done; [ \"$1\" = --version ] && exec cc \"$@\"; [ \"$1\" = -O3 ] || echo x >> %s; grep -q \"[ (=]log2f(\" \"$last\" && "
             "{ echo no logs here; exit 1; }; exec cc \"$@\"' cc", calls);
    char cache[1300];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("TACT_CACHE_DIR", cache, 1);
    setenv("TACT_CC", cc, 1);
    tact_ctx *ctx = s_open(0, NULL);
    unsetenv("TACT_CC");
    unsetenv("TACT_CACHE_DIR");
    int64_t s[1] = {6};
    float x[6] = {0.5f, 1, 2, 3, 4, 9};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, s, x);
    tact_tensor *t[6] = {tact_sqrt(a), tact_neg(a), tact_reciprocal(a), tact_mul(a, a), tact_add(a, a), tact_sub(a, tact_scalar(ctx, 1.0))};
    cr_assert_eq(tact_realize(ctx, 6, t), TACT_OK, "%s", tact_ctx_error(ctx));
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "test $(wc -l < '%s') -eq 2", calls);
    cr_assert_eq(system(cmd), 0, "six kernels took more than two runs of the compiler");
    float out[6];
    for (int k = 0; k < 6; k++) {
        cr_assert_eq(tact_read(t[k], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int i = 0; i < 6; i++) {
            float want = k == 0 ? sqrtf(x[i]) : k == 1 ? -x[i] : k == 2 ? 1.0f / x[i] : k == 3 ? x[i] * x[i] : k == 4 ? x[i] + x[i] : x[i] - 1.0f;
            cr_assert_eq(out[i], want, "kernel %d element %d: %g, want %g", k, i, (double)out[i], (double)want);
        }
    }
    /* Kernels 0 and 2 (compiler 0) build in one file with the log one. */
    tact_tensor *u[3] = {tact_add(a, tact_scalar(ctx, 2.0)), tact_mul(a, a), tact_log2(a)};
    int rc = tact_realize(ctx, 3, u);
    cr_assert_eq(rc, TACT_ECOMPILE, "got %s: %s", tact_status_name(rc), tact_ctx_error(ctx));
    cr_assert(strstr(tact_ctx_error(ctx), "kernel E_6") && strstr(tact_ctx_error(ctx), "no logs here"), "%s", tact_ctx_error(ctx));
    /* They were built alone after the file failed: nothing to compile. */
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    uint64_t compiles = st.compiles;
    tact_tensor *v[2] = {u[0], u[1]};
    cr_assert_eq(tact_realize(ctx, 2, v), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_stats(ctx, &st);
    cr_assert_eq(st.compiles, compiles, "%llu kernels compiled again", (unsigned long long)(st.compiles - compiles));
    cr_assert_eq(tact_read(u[0], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_assert_eq(out[i], x[i] + 2.0f);
    cr_assert_eq(tact_read(u[1], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_assert_eq(out[i], x[i] * x[i]);
    tact_ctx_close(&ctx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

/* ---------------------------------------------------------- determinism */

/* A small program with reduces and broadcasting; returns its bytes. */
static void s_program(tact_ctx *ctx, float *out, int n) {
    uint64_t rng = 42;
    float *x = s_randf(&rng, (size_t)n * 300);
    int64_t shape[2] = {n, 300};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    int axis = 1;
    tact_tensor *m = tact_sum(tact_mul(a, tact_sin(a)), 1, &axis, 1);
    tact_tensor *r = tact_sum(tact_div(a, tact_add(m, tact_scalar(ctx, 3.0))), 1, &axis, 0);
    cr_assert_eq(tact_read(r, out, (size_t)n * sizeof *out), TACT_OK, "%s", tact_ctx_error(ctx));
    free(x);
}

Test(graph_pipeline, results_are_bitwise_identical_for_one_and_many_threads) {
    enum { N = 20000 };
    static float one[N], many[N];
    tact_ctx *ctx = s_open(1, NULL);
    s_program(ctx, one, N);
    tact_ctx_close(&ctx);
    ctx = s_open(8, NULL);
    s_program(ctx, many, N);
    tact_ctx_close(&ctx);
    cr_assert(memcmp(one, many, sizeof one) == 0, "1 thread and 8 threads differ");
}

Test(graph_pipeline, two_runs_log_identical_messages) {
    char *a = tu_tmpfile("plog-a"), *b = tu_tmpfile("plog-b");
    enum { N = 50 };
    float ra[N], rb[N];
    tact_ctx *ctx = s_open(1, a);
    s_program(ctx, ra, N);
    tact_ctx_close(&ctx);
    ctx = s_open(2, b);
    s_program(ctx, rb, N);
    tact_ctx_close(&ctx);
    cr_assert(memcmp(ra, rb, sizeof ra) == 0);
    ta_log_t *la, *lb;
    ta_error_t err;
    cr_assert_eq(ta_log_load(a, &la, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_log_load(b, &lb, &err), TACT_OK, "%s", err.text);
    cr_assert_geq(la->nstreams, 7, "every actor recorded");
    char where[512] = "";
    cr_assert(ta_log_compare(la, lb, where, sizeof where), "the logs differ: %s", where);
    ta_log_free(&la);
    ta_log_free(&lb);
    unlink(a), unlink(b);
    free(a), free(b);
}

Test(graph_pipeline, the_planner_reuses_dead_temporaries) {
    tact_ctx *ctx = s_open(0, NULL);
    /* x (8,8,8,8,8,8) summed one axis at a time: each sum feeds the next
     * reduce, so each is its own kernel, and only the last is kept. */
    enum { D = 8 };
    static float x[D * D * D * D * D * D];
    for (int i = 0; i < D * D * D * D * D * D; i++) x[i] = (float)(i % 7) - 3;
    int64_t shape[6] = {D, D, D, D, D, D};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 6, shape, x);
    tact_scope_begin(ctx);
    tact_tensor *t = a;
    for (int axis = 5; axis >= 1; axis--) t = tact_sum(tact_mul(t, tact_scalar(ctx, 0.5)), 1, &axis, 0);
    tact_keep(t);
    tact_scope_end(ctx); /* the intermediates' handles are gone: they are temporaries now */
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    cr_assert_eq(st.kernels, 5);
    uint64_t unplanned = 4 * (32768 + 4096 + 512 + 64 + 8);
    cr_assert_eq(st.unplanned_bytes, unplanned);
    /* t1 and t2 live together; t3 and t4 take over their memory; t5 is kept. */
    cr_assert_lt(st.planned_peak_bytes, unplanned, "planned %llu, unplanned %llu", (unsigned long long)st.planned_peak_bytes,
                 (unsigned long long)unplanned);
    cr_assert_eq(st.planned_peak_bytes, 4 * (32768 + 4096 + 8));
    float out[8];
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK);
    for (int i = 0; i < D; i++) {
        double want = 0;
        for (int j = 0; j < D * D * D * D * D; j++) want += x[i * D * D * D * D * D + j];
        want *= 0.5 * 0.5 * 0.5 * 0.5 * 0.5;
        cr_assert(fabs(out[i] - want) < 1e-3, "row %d: %g vs %g", i, out[i], want);
    }
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, common_subexpressions_are_computed_once) {
    tact_ctx *ctx = s_open(0, NULL);
    float x[100], y[100];
    for (int i = 0; i < 100; i++) x[i] = (float)i / 7, y[i] = (float)(100 - i) / 3;
    int64_t shape[1] = {100};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x), *b = tact_from_data(ctx, TACT_FLOAT32, 1, shape, y);
    /* The same expression built twice is one node in the graph: one kernel
     * realizes both, and it computes exp2(a*b) once per element. */
    tact_tensor *p = tact_exp2(tact_mul(a, b)), *q = tact_exp2(tact_mul(a, b));
    tact_tensor *both[2] = {p, q};
    cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_kernels(ctx), 1, "p and q share one kernel");
    float op[100], oq[100];
    cr_assert_eq(tact_read(p, op, sizeof op), TACT_OK);
    cr_assert_eq(tact_read(q, oq, sizeof oq), TACT_OK);
    cr_assert(memcmp(op, oq, sizeof op) == 0);
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, constants_fold_in_the_graph) {
    tact_ctx *ctx = s_open(0, NULL);
    int64_t shape[1] = {6};
    float x[6] = {1, -2, NAN, INFINITY, -0.5f, 8}, out[6];
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x);
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK);
    /* x + 0 and x * 1 are x itself: nothing to compute. */
    tact_tensor *same = tact_mul(tact_add(t, tact_zeros(ctx, TACT_FLOAT32, 1, shape)), tact_scalar(ctx, 1.0));
    cr_assert_eq(tact_realize(ctx, 1, &same), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_kernels(ctx), 0, "x + 0 and x * 1 fold away");
    cr_assert_eq(tact_read(same, out, sizeof out), TACT_OK);
    cr_assert(memcmp(out, x, sizeof x) == 0);
    /* x * 0 is 0 even where x is NaN or inf, as in the reference (trap 2). */
    tact_tensor *zero = tact_mul(t, tact_scalar(ctx, 0.0));
    cr_assert_eq(tact_read(zero, out, sizeof out), TACT_OK);
    for (int i = 0; i < 6; i++) cr_assert_eq(out[i], 0.0f, "element %d", i);
    /* x * -1 is neg(x), and neg(neg(x)) is x. */
    tact_tensor *nn = tact_neg(tact_mul(t, tact_scalar(ctx, -1.0)));
    cr_assert_eq(tact_realize(ctx, 1, &nn), TACT_OK);
    cr_assert_eq(s_kernels(ctx), 0, "-(-x) folds to x");
    /* All-constant arithmetic happens in the graph: 2 * 3 + 1 = 7, cast to int8. */
    tact_tensor *c = tact_cast(tact_add(tact_mul(tact_full(ctx, TACT_FLOAT32, 1, shape, 2), tact_full(ctx, TACT_FLOAT32, 1, shape, 3)),
                                        tact_scalar(ctx, 1.0)),
                               TACT_INT8);
    int8_t seven[6];
    cr_assert_eq(tact_read(c, seven, sizeof seven), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_assert_eq(seven[i], 7);
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, the_worked_example_of_the_header_gives_62_in_one_kernel) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK, "%s", tact_last_open_error());
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {6, 5, 4, 3, 2, 1};
    int64_t shape[2] = {2, 3};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 2, shape, y);
    tact_tensor *s = tact_sum(tact_add(tact_mul(a, b), tact_scalar(ctx, 1.0)), -1, NULL, 0);
    double v = 0;
    cr_assert_eq(tact_item(s, &v), TACT_OK, "%s", tact_error_message(s));
    cr_assert_eq(v, 62.0); /* 6+10+12+12+10+6 + 6 */
    cr_assert_eq(s_kernels(ctx), 1);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    cr_assert_null(ctx);
}

Test(graph_pipeline, scheduler_and_planner_replay_a_recorded_run_byte_for_byte) {
    char *path = tu_tmpfile("stages");
    enum { N = 40 };
    float out[N];
    tact_ctx *ctx = s_open(2, path);
    s_program(ctx, out, N);
    tact_ctx_close(&ctx);
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    /* Port ids follow the start order of tact_ctx_open; each stage learns
     * the rest from the CONFIG at the head of its inbox. */
    cr_assert_str_eq(ta_log_find(log, 3)->name, "scheduler");
    cr_assert_str_eq(ta_log_find(log, 4)->name, "planner");
    const ta_actor_ops_t *ops[2] = {&ta_scheduler_ops, &ta_planner_ops};
    for (int i = 0; i < 2; i++) {
        ta_replay_report_t rep;
        int rc = ta_replay_actor(log, (uint32_t)(3 + i), ops[i], NULL, &rep, &err);
        cr_assert_eq(rc, TACT_OK, "%s: %s", ops[i]->name, err.text);
        cr_assert_gt(rep.out_count, 0);
    }
    ta_log_free(&log);
    unlink(path);
    free(path);
}

Test(graph_pipeline, the_pipeline_gives_the_same_bits_over_tcp_and_ipc) {
    enum { N = 30 };
    float ref[N], got[N];
    tact_ctx *ctx = s_open(0, NULL);
    s_program(ctx, ref, N);
    tact_ctx_close(&ctx);
    const char *transports[2] = {"tcp", "ipc"};
    for (int i = 0; i < 2; i++) {
        tact_options o;
        tact_options_default(&o);
        o.transport = transports[i];
        cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s: %s", transports[i], tact_last_open_error());
        s_program(ctx, got, N);
        tact_ctx_close(&ctx);
        cr_assert(memcmp(ref, got, sizeof ref) == 0, "%s differs from inproc", transports[i]);
    }
    tact_options o;
    tact_options_default(&o);
    o.devices = "CUDA:7"; /* no machine of this project's has eight GPUs, and here there is no driver */
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EDEVICE);
    cr_assert(strstr(tact_last_open_error(), "no CUDA driver") || strstr(tact_last_open_error(), "no device CUDA:7"), "%s", tact_last_open_error());
    tact_options_default(&o);
    o.transport = "carrier-pigeon";
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EINVAL);
    cr_assert_null(ctx);
    cr_assert(strstr(tact_last_open_error(), "unknown transport 'carrier-pigeon'"), "%s", tact_last_open_error());
}

Test(graph_pipeline, assign_writes_into_the_target_and_orders_its_readers_first) {
    tact_ctx *ctx = s_open(0, NULL);
    int64_t shape[1] = {4};
    float x[4] = {1, 2, 3, 4}, out[4];
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x);
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK);
    /* In place: x = x*2 + 1. */
    tact_tensor *r = tact_assign(t, tact_add(tact_mul(t, tact_scalar(ctx, 2.0)), tact_scalar(ctx, 1.0)));
    cr_assert_eq(r, t, "assign returns its target");
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(out[i], x[i] * 2 + 1);
    /* A self-read through another view (a flip) cannot be done in place: x = x + flip(x). */
    int ax = 0;
    tact_assign(t, tact_add(t, tact_flip(t, 1, &ax)));
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(out[i], (x[i] * 2 + 1) + (x[3 - i] * 2 + 1), "element %d", i);
    /* A reader of the old contents realized with the assign sees the old values. */
    float before[4];
    memcpy(before, out, sizeof out);
    tact_tensor *old = tact_mul(t, tact_scalar(ctx, 10.0));
    tact_assign(t, tact_full(ctx, TACT_FLOAT32, 1, shape, -1));
    tact_tensor *both[2] = {old, t};
    cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%s", tact_ctx_error(ctx));
    float o10[4];
    cr_assert_eq(tact_read(old, o10, sizeof o10), TACT_OK);
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(o10[i], before[i] * 10, "the old contents were read before the write");
        cr_assert_eq(out[i], -1.0f);
    }
    /* An optimizer-like loop in scopes: w -= 0.5 * w, ten times. */
    for (int k = 0; k < 10; k++) {
        tact_scope_begin(ctx);
        tact_assign(t, tact_sub(t, tact_mul(t, tact_scalar(ctx, 0.5))));
        cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK);
        tact_scope_end(ctx);
    }
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(out[i], -1.0f / 1024);
    /* Bad assigns. */
    int64_t other[1] = {5};
    cr_assert_eq(tact_status_of(tact_assign(t, tact_zeros(ctx, TACT_FLOAT32, 1, other))), TACT_ESHAPE);
    cr_assert_eq(tact_status_of(tact_assign(t, tact_zeros(ctx, TACT_INT32, 1, shape))), TACT_EDTYPE);
    int64_t two[2] = {2, 2};
    tact_tensor *bad = tact_assign(tact_reshape(t, 2, two), tact_zeros(ctx, TACT_FLOAT32, 2, two));
    cr_assert(strstr(tact_error_message(bad), "target is a view"), "%s", tact_error_message(bad));
    tact_ctx_close(&ctx);
}

/* Regressions found in review: each of these once computed the wrong thing, hung, or crashed. */
Test(graph_pipeline, review_regressions) {
    tact_ctx *ctx = s_open(0, NULL);
    /* assign(a, a^T): the value reads the target through another view. */
    float x[9], out[9];
    for (int i = 0; i < 9; i++) x[i] = (float)i;
    int64_t sq[2] = {3, 3};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, sq, x);
    cr_assert_eq(tact_realize(ctx, 1, &a), TACT_OK);
    int tr[2] = {1, 0};
    tact_assign(a, tact_permute(a, tr));
    cr_assert_eq(tact_read(a, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) cr_assert_eq(out[i * 3 + j], x[j * 3 + i], "transpose (%d,%d)", i, j);
    /* Nested transposes of sums: a deep view stack splits into kernels. */
    tact_tensor *y = a;
    for (int k = 0; k < 9; k++) y = tact_permute(tact_add(y, tact_scalar(ctx, 1.0)), tr);
    cr_assert_eq(tact_read(y, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) cr_assert_eq(out[i * 3 + j], x[i * 3 + j] + 9, "nested (%d,%d)", i, j);
    /* Swapping by assigns reads each other's old contents: an error, not a hang. */
    tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 2, sq, x);
    tact_tensor *c = tact_add(a, tact_scalar(ctx, 1.0));
    tact_assign(a, tact_add(b, tact_scalar(ctx, 1.0)));
    tact_assign(b, c);
    tact_tensor *ab[2] = {a, b};
    int rc = tact_realize(ctx, 2, ab);
    cr_assert_neq(rc, TACT_OK);
    cr_assert(strstr(tact_ctx_error(ctx), "cycle"), "%s", tact_ctx_error(ctx));
    /* A reduce over a size-1 axis next to a use of its input outside the reduce. */
    int64_t col[2] = {4, 1};
    float v[4] = {1, -2, 3, 4}, z[4];
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, col, v);
    int axis = 1;
    tact_tensor *d = tact_sub(t, tact_max(t, 1, &axis, 1));
    cr_assert_eq(tact_read(d, z, sizeof z), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(z[i], 0.0f);
    /* Sizes that overflow are refused, not allocated short. */
    int64_t huge[1] = {1ll << 62};
    cr_assert_eq(tact_status_of(tact_zeros(ctx, TACT_FLOAT32, 1, huge)), TACT_ESHAPE);
    int64_t two[2] = {1ll << 40, 1}, other[2] = {1, 1ll << 40};
    cr_assert_eq(tact_status_of(tact_add(tact_zeros(ctx, TACT_INT8, 2, two), tact_zeros(ctx, TACT_INT8, 2, other))), TACT_ESHAPE);
    /* Two buffers made the same way stay two buffers under assign. */
    int64_t n4[1] = {4};
    tact_tensor *w1 = tact_contiguous(tact_zeros(ctx, TACT_FLOAT32, 1, n4)), *w2 = tact_contiguous(tact_zeros(ctx, TACT_FLOAT32, 1, n4));
    tact_tensor *ws[2] = {w1, w2};
    cr_assert_eq(tact_realize(ctx, 2, ws), TACT_OK);
    tact_assign(w2, tact_full(ctx, TACT_FLOAT32, 1, n4, 5));
    cr_assert_eq(tact_realize(ctx, 1, &w2), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(w1, z, sizeof z), TACT_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(z[i], 0.0f, "w1 untouched");
    cr_assert_eq(tact_read(w2, z, sizeof z), TACT_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(z[i], 5.0f);
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, creation_functions_and_queries) {
    tact_ctx *ctx = s_open(0, NULL);
    /* arange: int32 for whole arguments, float32 otherwise; eye; empty is zeros. */
    tact_tensor *r = tact_arange(ctx, 2, 11, 3, -1);
    cr_assert_eq(tact_dtype_of(r), TACT_INT32);
    cr_assert_eq(tact_numel(r), 3);
    int32_t ri[3];
    cr_assert_eq(tact_read(r, ri, sizeof ri), TACT_OK);
    cr_assert(ri[0] == 2 && ri[1] == 5 && ri[2] == 8);
    tact_tensor *f = tact_arange(ctx, 0, 1, 0.25, -1);
    cr_assert_eq(tact_dtype_of(f), TACT_FLOAT32);
    float rf[4];
    cr_assert_eq(tact_read(f, rf, sizeof rf), TACT_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(rf[i], 0.25f * i);
    cr_assert_eq(tact_status_of(tact_arange(ctx, 0, 1, 0, -1)), TACT_EINVAL);
    tact_tensor *e = tact_eye(ctx, 3, TACT_INT8);
    int8_t ei[9];
    cr_assert_eq(tact_read(e, ei, sizeof ei), TACT_OK);
    for (int i = 0; i < 9; i++) cr_assert_eq(ei[i], i % 4 == 0);
    int64_t shape[3] = {2, 3, 4};
    tact_tensor *z = tact_empty(ctx, TACT_FLOAT64, 3, shape);
    double zd[24];
    cr_assert_eq(tact_read(z, zd, sizeof zd), TACT_OK);
    for (int i = 0; i < 24; i++) cr_assert_eq(zd[i], 0.0);
    /* Queries, and reshape with -1. */
    int64_t req[2] = {-1, 6}, got[3];
    tact_tensor *m = tact_reshape(z, 2, req);
    cr_assert_eq(tact_ndim(m), 2);
    cr_assert_eq(tact_dim(m, 0), 4);
    cr_assert_eq(tact_dim(m, -1), 6);
    cr_assert_eq(tact_dim(m, 2), -1);
    tact_shape(z, got);
    cr_assert(got[0] == 2 && got[1] == 3 && got[2] == 4);
    cr_assert_str_eq(tact_device(z), "CPU");
    cr_assert_str_eq(tact_dtype_name(tact_dtype_of(z)), "float64");
    double v;
    cr_assert_eq(tact_item(m, &v), TACT_ESHAPE);
    cr_assert(strstr(tact_ctx_error(ctx), "has 24 elements, not 1"), "%s", tact_ctx_error(ctx));
    int64_t bad[2] = {-1, 5};
    cr_assert(strstr(tact_error_message(tact_reshape(z, 2, bad)), "cannot infer the -1 dim"));
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, releasing_tensors_frees_their_device_buffers) {
    tact_ctx *ctx = s_open(0, NULL);
    int64_t shape[1] = {1 << 18}; /* 1 MiB of float32 */
    tact_tensor *keep = tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 1, shape));
    cr_assert_eq(tact_realize(ctx, 1, &keep), TACT_OK);
    tact_stats st;
    uint64_t first = 0;
    for (int k = 0; k < 20; k++) {
        tact_scope_begin(ctx);
        tact_tensor *t = tact_add(keep, tact_scalar(ctx, (double)k + 1));
        cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_scope_end(ctx);
        tact_ctx_stats(ctx, &st);
        if (k == 0) first = st.device_bytes;
    }
    /* Each round's 1 MiB result is freed when its scope ends: what the device
     * holds stays at the kept tensor plus the current result. */
    cr_assert_eq(first, 2u << 20);
    cr_assert_eq(st.device_bytes, first, "device holds %llu bytes after 20 rounds", (unsigned long long)st.device_bytes);
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, kernels_come_from_the_disk_cache_in_a_new_context) {
    char *dir = tu_tmpfile("kcache");
    unlink(dir);
    setenv("TACT_CACHE_DIR", dir, 1);
    /* The compiler is a wrapper that logs each call, so the test sees that
     * the second context compiled nothing. */
    char *calls = tu_tmpfile("cc-calls"), wrapper[1024];
    snprintf(wrapper, sizeof wrapper, "sh -c '[ \"$1\" = --version ] || [ \"$1\" = -O3 ] || echo x >> %s; exec cc \"$@\"' cc",
             calls); /* quick compiles only (a full build may run in the background) */
    setenv("TACT_CC", wrapper, 1);
    for (int run = 0; run < 2; run++) {
        tact_ctx *ctx = s_open(0, NULL);
        int64_t shape[1] = {1000};
        tact_tensor *t = tact_sqrt(tact_full(ctx, TACT_FLOAT32, 1, shape, 2.0));
        float out[1000];
        cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(out[999], sqrtf(2.0f));
        tact_ctx_close(&ctx);
        /* One quick object, made by the first run and only read by the
         * second (and its full build, if the background got to it). */
        char cmd[512];
        snprintf(cmd, sizeof cmd, "n=$(ls '%s' | grep -c '\\.so$'); test $n -ge 1 && test $n -le 2", dir);
        cr_assert_eq(system(cmd), 0, "run %d: the cache holds one kernel, in one or two builds", run);
        snprintf(cmd, sizeof cmd, "test $(wc -l < '%s') -eq 1", calls);
        cr_assert_eq(system(cmd), 0, "run %d: one compile in all", run);
    }
    unlink(calls);
    free(calls);
    unsetenv("TACT_CACHE_DIR");
    unsetenv("TACT_CC");
    free(dir);
}

/* A step repeated with fresh inputs has the same structure: its schedule
 * comes from the scheduler's cache, and the results are still right. */
static void s_repeated_steps(uint64_t want_hits_per_step) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open(0, NULL);
    enum { N = 6, K = 5, M = 7, STEPS = 4 };
    float *wv = s_randf(&rng, K * M);
    int64_t sw[2] = {K, M}, sx[2] = {N, K};
    tact_tensor *w = tact_from_data(ctx, TACT_FLOAT32, 2, sw, wv);
    cr_assert_eq(tact_realize(ctx, 1, &w), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_stats st;
    uint64_t hits0 = 0;
    for (int step = 0; step < STEPS; step++) {
        tact_scope_begin(ctx);
        float *xv = s_randf(&rng, N * K), out[N * M];
        tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, sx, xv);
        tact_tensor *y = tact_maximum(tact_add(tact_matmul(x, w), tact_scalar(ctx, 0.25)), tact_scalar(ctx, 0.0));
        cr_assert_eq(tact_read(y, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int i = 0; i < N; i++)
            for (int j = 0; j < M; j++) {
                double acc = 0.25;
                for (int q = 0; q < K; q++) acc += (double)xv[i * K + q] * wv[q * M + j];
                acc = acc > 0 ? acc : 0;
                cr_assert(fabs(out[i * M + j] - acc) <= 1e-5, "seed %#llx: step %d (%d,%d): %g vs %g", (unsigned long long)seed,
                          step, i, j, out[i * M + j], acc);
            }
        free(xv);
        tact_scope_end(ctx);
        tact_ctx_stats(ctx, &st);
        if (step == 0) hits0 = st.schedule_cache_hits;
        else cr_assert_eq(st.schedule_cache_hits, hits0 + want_hits_per_step * (uint64_t)step, "step %d", step);
    }
    free(wv);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

Test(graph_pipeline, the_schedule_cache_hits_on_a_repeated_step) { s_repeated_steps(1); }

Test(graph_pipeline, the_schedule_cache_can_be_turned_off) {
    setenv("TACT_SCHEDULE_CACHE", "0", 1);
    s_repeated_steps(0);
}

Test(graph_pipeline, tact_debug_prints_counts_times_asts_and_source, .init = cr_redirect_stderr) {
    setenv("TACT_DEBUG", "4", 1);
    tact_ctx *ctx = s_open(0, NULL);
    int64_t shape[2] = {4, 8};
    tact_tensor *t = tact_sum(tact_mul(tact_full(ctx, TACT_FLOAT32, 2, shape, 3.0), tact_arange(ctx, 0, 8, 1, TACT_FLOAT32)), -1, NULL, 0);
    double v;
    cr_assert_eq(tact_item(t, &v), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(v, 3.0 * 4 * 28);
    tact_ctx_close(&ctx);
    unsetenv("TACT_DEBUG");
    fflush(stderr);
    FILE *f = cr_get_redirected_stderr();
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    cr_assert(strstr(text, "tact: realize 1: 1 kernels"), "level 1: kernel count per realize");
    cr_assert(strstr(text, "GB/s"), "level 2: one line per kernel with its time and bandwidth");
    cr_assert(strstr(text, "tact: kernel 0 r_"), "level 3: the kernel ASTs");
    cr_assert(strstr(text, "void r_"), "level 4: the generated source");
}

/* Regressions from the second review. */
Test(graph_pipeline, second_review_regressions) {
    tact_ctx *ctx = s_open(1, NULL);
    /* A padded reduce over two axes (gcc once miscompiled its vectorized tile). */
    int64_t b3[3] = {6, 1, 8};
    float x[48], g[8];
    for (int i = 0; i < 48; i++) x[i] = (float)(i % 7 - 3);
    int64_t pads[3][2] = {{0, 1}, {0, 1}, {0, 0}};
    int ax[2] = {0, 1};
    tact_tensor *s = tact_sum(tact_pad(tact_from_data(ctx, TACT_FLOAT32, 3, b3, x), (const int64_t(*)[2])pads, -2.0), 2, ax, 1);
    cr_assert_eq(tact_read(s, g, sizeof g), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int j = 0; j < 8; j++) {
        float e = 0;
        for (int i = 0; i < 7; i++)
            for (int k = 0; k < 2; k++) e += i < 6 && k < 1 ? x[i * 8 + j] : -2;
        cr_assert_eq(g[j], e, "column %d", j);
    }
    /* Assigning to a lazy target: its own buffer, nothing freed under it, no leak. */
    int64_t n4[1] = {4};
    float a4[4] = {1, 2, 3, 4}, c4[4] = {10, 20, 30, 40}, o[4];
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, n4, a4), *c = tact_from_data(ctx, TACT_FLOAT32, 1, n4, c4);
    tact_tensor *t = tact_add(a, a);
    int64_t sq[2] = {2, 2};
    tact_tensor *v = tact_reshape(t, 2, sq);
    tact_assign(t, c);
    cr_assert_eq(tact_read(t, o, sizeof o), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert(memcmp(o, c4, sizeof o) == 0);
    cr_assert_eq(tact_read(v, o, sizeof o), TACT_OK); /* the old view computes t's old value... */
    for (int i = 0; i < 4; i++) cr_assert_eq(o[i], 2 * a4[i]);
    cr_assert_eq(tact_read(t, o, sizeof o), TACT_OK); /* ...without touching the assigned one */
    cr_assert(memcmp(o, c4, sizeof o) == 0);
    uint64_t before = 0;
    for (int k = 0; k < 30; k++) {
        tact_scope_begin(ctx);
        tact_tensor *w = tact_add(a, a);
        tact_assign(w, tact_full(ctx, TACT_FLOAT32, 1, n4, 3.0));
        cr_assert_eq(tact_read(w, o, sizeof o), TACT_OK);
        cr_assert_eq(o[0], 3.0f);
        tact_scope_end(ctx);
        tact_stats st;
        tact_ctx_stats(ctx, &st);
        if (k == 1) before = st.device_bytes;
        if (k > 1) cr_assert_eq(st.device_bytes, before, "round %d: device memory grew", k);
    }
    /* The value is a view of an op on the target. */
    tact_tensor *u = tact_from_data(ctx, TACT_FLOAT32, 1, n4, a4);
    cr_assert_eq(tact_realize(ctx, 1, &u), TACT_OK);
    int ax0 = 0;
    tact_assign(u, tact_flip(tact_mul(u, tact_scalar(ctx, 2.0)), 1, &ax0));
    cr_assert_eq(tact_read(u, o, sizeof o), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(o[i], 2 * a4[3 - i]);
    /* One realize reading both the old and the new contents is refused. */
    tact_tensor *old = tact_mul(tact_reshape(u, 2, sq), tact_scalar(ctx, 2.0));
    tact_assign(u, c);
    tact_tensor *newer = tact_add(u, tact_scalar(ctx, 1.0));
    tact_tensor *both[2] = {newer, old};
    int rc = tact_realize(ctx, 2, both);
    cr_assert_neq(rc, TACT_OK);
    cr_assert(strstr(tact_ctx_error(ctx), "both the old and the new contents"), "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(newer, o, sizeof o), TACT_OK, "the context goes on: %s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(o[i], c4[i] + 1);
    tact_ctx_close(&ctx);
}

/* PROGRAM carries the compiled object itself with its digest, never a
 * path: the executor loads exactly the bytes it was sent. */
Test(graph_pipeline, programs_travel_as_bytes_with_their_digest) {
    char *log = tu_tmpfile("plog-prog"), *dir = tu_tmpfile("kcache-prog");
    unlink(dir);
    setenv("TACT_CACHE_DIR", dir, 1);
    enum { N = 50 };
    float r[N];
    tact_ctx *ctx = s_open(1, log);
    s_program(ctx, r, N);
    s_program(ctx, r, N); /* the same kernels again */
    tact_ctx_close(&ctx);
    ta_log_t *l;
    ta_error_t err;
    cr_assert_eq(ta_log_load(log, &l, &err), TACT_OK, "%s", err.text);
    int programs = 0, with_bytes = 0;
    for (size_t s = 0; s < l->nstreams; s++) {
        if (strcmp(l->streams[s].name, "executor") != 0) continue;
        for (size_t i = 0; i < l->streams[s].nrecords; i++) {
            const ta_log_record_t *rec = &l->streams[s].records[i];
            ta_msg_t m;
            ta_msg_init(&m, TA_MSG_EOS);
            cr_assert_eq(ta_log_record_msg(rec, &m, &err), TACT_OK, "%s", err.text);
            if (rec->dir != TA_LOG_IN || m.type != TA_MSG_PROGRAM) continue;
            programs++;
            cr_assert_eq(m.as.program.status, TACT_OK);
            cr_assert_eq(m.as.program.digest.len, 32);
            cr_assert_gt(rec->bulk_len, 0, "every PROGRAM carries its object");
            with_bytes++;
            cr_assert_geq(rec->bulk_len, 4);
            cr_assert(memcmp(rec->bulk, "\177ELF", 4) == 0, "a shared object");
            char want[33];
            ta_cc_digest(rec->bulk, rec->bulk_len, want);
            cr_assert(memcmp(m.as.program.digest.ptr, want, 32) == 0, "its digest");
        }
    }
    cr_assert_gt(programs, 0);
    cr_assert_eq(programs, with_bytes);
    /* No message names the cache folder. */
    cr_assert_null(memmem(l->data, l->len, dir, strlen(dir)), "a path travelled in a message");
    ta_log_free(&l);
    unsetenv("TACT_CACHE_DIR");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    unlink(log);
    free(log), free(dir);
}

/* ---------------------------------------------------------- async realizes */

/* Three steps, each reading the last one's result, then a read; returns
 * the bytes.  With async the steps are started without waiting, so each
 * reads an unsynced result. */
static void s_steps(tact_ctx *ctx, float *out, int n, int async) {
    uint64_t rng = 7;
    float *x = s_randf(&rng, (size_t)n * 40);
    int64_t shape[2] = {n, 40};
    int axis = 1;
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    for (int step = 0; step < 3; step++) {
        tact_tensor *m = tact_max(t, 1, &axis, 1);
        t = tact_exp2(tact_sub(t, m)); /* a softmax numerator of the last step's result */
        t = tact_mul(t, tact_add(tact_sum(t, 1, &axis, 1), tact_scalar(ctx, 1.0)));
        cr_assert_eq(async ? tact_realize_async(ctx, 1, &t) : tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
    }
    cr_assert_eq(tact_read(t, out, (size_t)n * 40 * sizeof *out), TACT_OK, "%s", tact_ctx_error(ctx));
    free(x);
}

Test(graph_pipeline, async_realizes_in_flight_give_identical_bits_and_logs) {
    enum { N = 30, RUNS = 20 };
    float first[N * 40], out[N * 40];
    ta_log_t *ref = NULL;
    for (int run = 0; run < RUNS; run++) {
        static const int threads[3] = {1, 2, 8};
        char *path = tu_tmpfile("async");
        tact_ctx *ctx = s_open(threads[run % 3], path);
        s_steps(ctx, run ? out : first, N, 1);
        cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
        ta_log_t *log;
        ta_error_t err;
        cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
        if (run) {
            cr_assert(memcmp(first, out, sizeof out) == 0, "run %d (%d threads): other bits", run, threads[run % 3]);
            char where[512] = "";
            cr_assert(ta_log_compare(ref, log, where, sizeof where), "run %d (%d threads): %s", run, threads[run % 3], where);
            ta_log_free(&log);
        } else {
            ref = log;
        }
        unlink(path);
        free(path);
    }
    ta_log_free(&ref);
    /* The same program realized step by step computes the same bits. */
    tact_ctx *ctx = s_open(0, NULL);
    s_steps(ctx, out, N, 0);
    cr_assert(memcmp(first, out, sizeof out) == 0, "async and synchronous realizes differ");
    tact_ctx_close(&ctx);
}

Test(graph_pipeline, async_errors_surface_at_the_next_sync_point) {
    char *flag;
    tact_ctx *ctx = s_open_failing_once(&flag);
    int64_t s[1] = {7};
    tact_tensor *bad = tact_sqrt(tact_full(ctx, TACT_FLOAT32, 1, s, 5.0));
    cr_assert_eq(tact_realize_async(ctx, 1, &bad), TACT_OK, "the failure is not known yet");
    tact_tensor *next = tact_add(tact_full(ctx, TACT_FLOAT32, 1, s, 2.0), tact_scalar(ctx, 1.0));
    cr_assert_eq(tact_realize_async(ctx, 1, &next), TACT_OK);
    int rc = tact_wait(ctx);
    cr_assert_eq(rc, TACT_ECOMPILE, "got %s: %s", tact_status_name(rc), tact_ctx_error(ctx));
    cr_assert(strstr(tact_ctx_error(ctx), "kernel E_7 failed to compile"), "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_wait(ctx), TACT_OK, "nothing is left in flight");
    float out[7];
    cr_assert_eq(tact_read(next, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 7; i++) cr_assert_eq(out[i], 3.0f);
    cr_assert_eq(tact_read(bad, out, sizeof out), TACT_OK, "the failed realize runs again: %s", tact_ctx_error(ctx));
    for (int i = 0; i < 7; i++) cr_assert_eq(out[i], sqrtf(5.0f));
    cr_assert_eq(tact_realize(ctx, -1, &bad), TACT_EINVAL, "a negative count is refused at once");
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    unlink(flag);
    free(flag);
}

Test(graph_pipeline, a_realize_reading_a_failed_one_fails_too_and_both_run_again) {
    char *flag;
    tact_ctx *ctx = s_open_failing_once(&flag);
    int64_t s[1] = {7};
    tact_tensor *bad = tact_sqrt(tact_full(ctx, TACT_FLOAT32, 1, s, 5.0));
    cr_assert_eq(tact_realize_async(ctx, 1, &bad), TACT_OK);
    /* Started before the failure is known: it reads bad's buffer, which the
     * failed realize never computed.  It must fail, not read zeros. */
    tact_tensor *dep = tact_add(bad, tact_scalar(ctx, 1.0));
    cr_assert_eq(tact_realize_async(ctx, 1, &dep), TACT_OK);
    int rc = tact_wait(ctx);
    cr_assert_eq(rc, TACT_ECOMPILE, "got %s: %s", tact_status_name(rc), tact_ctx_error(ctx));
    /* The graph hears of both failures with the next realize: both run again. */
    float out[7];
    cr_assert_eq(tact_read(dep, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 7; i++) cr_assert_eq(out[i], sqrtf(5.0f) + 1.0f, "element %d: %g", i, (double)out[i]);
    cr_assert_eq(tact_read(bad, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 7; i++) cr_assert_eq(out[i], sqrtf(5.0f));
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    unlink(flag);
    free(flag);
}

Test(graph_pipeline, the_stages_take_the_next_realize_while_one_is_still_in_flight) {
    /* A compiler that holds the kernel E_9 (elementwise over 9 elements)
     * until a flag file exists, and logs the others' quick builds. */
    char *dir = tu_tmpfile("overlap"), path[1200];
    unlink(dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    tu_fake_cc(dir,
               "for last; do :; done\n"
               "case \"$1\" in --version) exec cc \"$@\";; esac\n"
               "case \" $* \" in *\" -O3 \"*) exec cc \"$@\";; esac\n" /* a full build in the background */
               "if ! grep -q ' E_9(' \"$last\"; then echo marked >> %s/marked\n"
               "else n=0; while [ ! -e %s/go ] && [ $n -lt 3000 ]; do sleep 0.01; n=$((n+1)); done; fi\n"
               "exec cc \"$@\"\n",
               dir, dir);
    tact_ctx *ctx = s_open(0, NULL);
    unsetenv("TACT_CC");
    unsetenv("TACT_CACHE_DIR");
    int64_t s[1] = {9};
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, s, x);
    /* Realize 1: kernel 0 (compiler 0), the sum, is marked; kernel 1
     * (compiler 1), which adds the sum to every element, is held. */
    tact_tensor *t1 = tact_sum(tact_mul(a, tact_scalar(ctx, 1234.5)), -1, NULL, 1);
    tact_tensor *t2 = tact_add(a, t1);
    cr_assert_eq(tact_realize_async(ctx, 1, &t2), TACT_OK, "%s", tact_ctx_error(ctx));
    /* Realize 2: one marked kernel (compiler 0), over 7 elements. */
    int64_t s7[1] = {7};
    tact_tensor *a7 = tact_from_data(ctx, TACT_FLOAT32, 1, s7, x);
    tact_tensor *b = tact_add(tact_mul(a7, tact_scalar(ctx, 1234.5)), tact_scalar(ctx, 7.0));
    cr_assert_eq(tact_realize_async(ctx, 1, &b), TACT_OK, "%s", tact_ctx_error(ctx));
    /* Realize 2 is scheduled (and planned) while realize 1 cannot have run
     * (its kernel E_9 is still being compiled); its programs are asked for
     * when its executor takes its plan, after realize 1. */
    tact_stats st;
    for (int i = 0; i < 3000; i++) {
        tact_ctx_stats(ctx, &st);
        if (st.schedules == 2) break;
        usleep(10000);
    }
    snprintf(path, sizeof path, "%s/go", dir);
    fclose(fopen(path, "w"));
    cr_assert_eq(st.schedules, 2, "realize 2 was not scheduled while realize 1 waited");
    cr_assert_eq(tact_wait(ctx), TACT_OK, "%s", tact_ctx_error(ctx));
    float out[9];
    cr_assert_eq(tact_read(t2, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 9; i++) cr_assert_float_eq(out[i], x[i] + 45 * 1234.5, 1e-2);
    cr_assert_eq(tact_read(b, out, 7 * sizeof *out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 7; i++) cr_assert_eq(out[i], x[i] * 1234.5f + 7.0f);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

/* ------------------------------------------------------- split reductions */

/* A float32 sum of 2^25 ones: one accumulator stops at 2^24 (adding 1 to
 * 2^24 rounds back); split into partials the sum is exact. */
Test(graph_pipeline, a_sum_of_2_to_the_25_ones_is_exact) {
    tact_ctx *ctx = s_open(0, NULL);
    int64_t n[1] = {1 << 25};
    double v = 0;
    cr_assert_eq(tact_item(tact_sum(tact_ones(ctx, TACT_FLOAT32, 1, n), -1, NULL, 0), &v), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(v, 33554432.0, "got %.1f", v);
    cr_assert_geq(s_kernels(ctx), 2, "the reduce was split");
    tact_ctx_close(&ctx);
}

/* The error of a float32 sum of 2^24 values in [0, 1) against the sum in
 * double: at most 4e-6 of the sum.  Measured: 6e-8 to 5e-7 with the
 * partials (runs of 65536), 3e-5 with one float accumulator, about 1e-7
 * for NumPy's pairwise sum. */
Test(graph_pipeline, a_long_float_sum_is_accurate) {
    enum { N = 1 << 24 };
    uint64_t seed = tu_seed(), rng = seed;
    float *x = malloc((size_t)N * sizeof *x);
    double want = 0;
    for (size_t i = 0; i < N; i++) {
        x[i] = (float)((double)(tu_rand(&rng) >> 40) / 16777216.0);
        want += x[i];
    }
    tact_ctx *ctx = s_open(0, NULL);
    int64_t n[1] = {N};
    double got = 0;
    cr_assert_eq(tact_item(tact_sum(tact_from_data(ctx, TACT_FLOAT32, 1, n, x), -1, NULL, 0), &got), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_leq(fabs(got - want), 4e-6 * want, "seed %#llx: %.9g against %.9g (relative %.3g)", (unsigned long long)seed, got, want,
                  fabs(got - want) / want);
    tact_ctx_close(&ctx);
    free(x);
}

/* Split reductions give the same bits for 1, 2 and 8 threads and in every
 * run, and a row's result does not depend on how many rows share the
 * batch: sum and max over rows of 70000 (split into 250 partials), a full
 * sum and a max over two reduced axes. */
Test(graph_pipeline, split_reductions_are_deterministic_and_batch_invariant) {
    enum { B = 3, R = 70000 };
    uint64_t seed = tu_seed(), rng = seed;
    float *x = s_randf(&rng, (size_t)B * R);
    float first[4 + 2 * B], out[4 + 2 * B];
    for (int run = 0; run < 4; run++) {
        static const int threads[4] = {1, 2, 8, 2};
        tact_ctx *ctx = s_open(threads[run], NULL);
        int64_t shape[2] = {B, R}, three[3] = {B, 700, 100};
        int axis = 1, both[2] = {1, 2};
        tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
        tact_tensor *rows = tact_sum(t, 1, &axis, 0), *rmax = tact_max(t, 1, &axis, 0);
        tact_tensor *all = tact_sum(t, -1, NULL, 0), *two = tact_max(tact_reshape(t, 3, three), 2, both, 0);
        float *o = run ? out : first;
        cr_assert_eq(tact_read(rows, o, B * sizeof *o), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(rmax, o + B, B * sizeof *o), TACT_OK);
        cr_assert_eq(tact_read(all, o + 2 * B, sizeof *o), TACT_OK);
        cr_assert_eq(tact_read(two, o + 2 * B + 1, B * sizeof *o), TACT_OK);
        /* Row 1 alone, as a batch of one. */
        int64_t one[2] = {1, R};
        tact_tensor *row1 = tact_from_data(ctx, TACT_FLOAT32, 2, one, x + R);
        float alone[2];
        cr_assert_eq(tact_read(tact_sum(row1, 1, &axis, 0), &alone[0], sizeof *alone), TACT_OK);
        cr_assert_eq(tact_read(tact_max(row1, 1, &axis, 0), &alone[1], sizeof *alone), TACT_OK);
        cr_assert(memcmp(&alone[0], &o[1], sizeof *alone) == 0 && memcmp(&alone[1], &o[B + 1], sizeof *alone) == 0,
                  "seed %#llx: row 1 alone gives other bits (%.9g %.9g against %.9g %.9g)", (unsigned long long)seed, alone[0],
                  alone[1], o[1], o[B + 1]);
        if (run) cr_assert(memcmp(first, out, (size_t)(3 * B + 1) * sizeof *out) == 0, "seed %#llx: run %d (%d threads) differs",
                           (unsigned long long)seed, run, threads[run]);
        tact_ctx_close(&ctx);
    }
    /* The values, against double loops (max exactly). */
    double total = 0;
    for (int b = 0; b < B; b++) {
        double s = 0;
        float m = -INFINITY;
        for (int i = 0; i < R; i++) s += x[(size_t)b * R + i], m = fmaxf(m, x[(size_t)b * R + i]);
        total += s;
        cr_assert_leq(fabs(first[b] - s), 1e-4 * R, "seed %#llx: row %d sums to %.9g, not %.9g", (unsigned long long)seed, b, first[b], s);
        cr_assert_eq(first[B + b], m);
        cr_assert_eq(first[2 * B + 1 + b], m);
    }
    cr_assert_leq(fabs(first[2 * B] - total), 1e-4 * B * R);
    free(x);
}

/* ------------------------------------------------------ kernel arguments */

/* A scalar that changes every step (a decaying learning rate) is a kernel
 * argument: 100 steps compile their kernels once, with the values of a
 * plain C loop.  Structural constants (0, 1, -1) stay in the source. */
Test(graph_pipeline, a_scalar_that_changes_every_step_compiles_once) {
    char *dir = tu_tmpfile("kcache-args"), cmd[1200];
    unlink(dir);
    setenv("TACT_CACHE_DIR", dir, 1); /* nothing cached before */
    tact_ctx *ctx = s_open(0, NULL);
    unsetenv("TACT_CACHE_DIR");
    enum { N = 64, STEPS = 100 };
    float w0[N], out[N];
    double want[N];
    for (int i = 0; i < N; i++) w0[i] = want[i] = (float)(i - 20) / 8;
    int64_t shape[1] = {N};
    tact_tensor *w = tact_from_data(ctx, TACT_FLOAT32, 1, shape, w0);
    uint64_t after_first = 0;
    for (int k = 0; k < STEPS; k++) {
        float lr = 0.1f * powf(0.97f, (float)k), bias = 0.25f + (float)k / 7; /* never 0, 1 or -1 */
        tact_scope_begin(ctx);
        /* w = w - lr * (w - bias) */
        tact_assign(w, tact_sub(w, tact_mul(tact_scalar(ctx, lr), tact_sub(w, tact_scalar(ctx, bias)))));
        cr_assert_eq(tact_realize(ctx, 1, &w), TACT_OK, "step %d: %s", k, tact_ctx_error(ctx));
        tact_scope_end(ctx);
        for (int i = 0; i < N; i++) want[i] = (float)((float)want[i] - lr * (float)((float)want[i] - bias));
        tact_stats st;
        tact_ctx_stats(ctx, &st);
        if (k == 0) after_first = st.compiles;
        cr_assert_eq(st.compiles, after_first, "step %d compiled again (%llu compiles)", k, (unsigned long long)st.compiles);
    }
    cr_assert_geq(after_first, 1, "the first step compiled");
    cr_assert_eq(tact_read(w, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < N; i++) cr_assert_eq(out[i], (float)want[i], "element %d: %.9g, not %.9g", i, out[i], want[i]);
    tact_ctx_close(&ctx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

/* An expensive elementwise tree (16 ops) over 64x128 that a reduce reads
 * inside its loop and another kernel reads too is computed once, into a
 * buffer of its own (3 kernels, not 2 that both compute it); a cheap one
 * (softmax's exp(x - max)) stays fused.  Values against a double loop. */
Test(pipeline, shared_expensive_work_is_computed_once) {
    enum { R = 64, C = 128 };
    uint64_t seed = tu_seed(), rng = seed;
    float *x = s_randf(&rng, (size_t)R * C), out[R];
    tact_ctx *ctx = s_open(2, NULL);
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C}, x);
    tact_tensor *e = t;
    for (int i = 0; i < 8; i++) e = tact_add(tact_mul(e, tact_scalar(ctx, 0.5)), tact_scalar(ctx, 0.25));
    /* mean(e) per row, then e - mean, then its row max: e feeds two kernels. */
    tact_tensor *m = tact_max(tact_sub(e, tact_mean(e, 1, (int[]){1}, 1)), 1, (int[]){1}, 0);
    cr_assert_eq(tact_read(m, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(s_kernels(ctx), 3, "%llu kernels", (unsigned long long)s_kernels(ctx));
    for (int r = 0; r < R; r++) {
        double ev[C], mean = 0, mx = -1e300;
        for (int c = 0; c < C; c++) {
            double v = x[r * C + c];
            for (int i = 0; i < 8; i++) v = v * 0.5 + 0.25;
            ev[c] = v, mean += v / C;
        }
        for (int c = 0; c < C; c++) mx = ev[c] - mean > mx ? ev[c] - mean : mx;
        cr_expect(fabs(out[r] - mx) <= 1e-5, "seed %llu row %d: %g, not %g", (unsigned long long)seed, r, out[r], mx);
    }
    tact_tensor *sm = tact_softmax(t, 1);
    float o2[R * C];
    cr_assert_eq(tact_read(sm, o2, sizeof o2), TACT_OK);
    cr_expect_leq(s_kernels(ctx), 3, "softmax: %llu kernels", (unsigned long long)s_kernels(ctx));
    free(x);
    tact_ctx_close(&ctx);
}

/* A read of a tensor a realize computed asks for its bytes at once; a
 * realized view that is not laid out contiguously (a transpose) falls back
 * to a realize of its contiguous copy; an assign makes the next read see
 * the new contents. */
Test(pipeline, reads_after_realizes_are_right_for_views_and_assigns) {
    tact_ctx *ctx = s_open(1, NULL);
    float x[6] = {1, 2, 3, 4, 5, 6}, out[6];
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 3}, x);
    tact_tensor *s = tact_mul(a, tact_scalar(ctx, 2.0));
    cr_assert_eq(tact_realize(ctx, 1, &s), TACT_OK);
    cr_assert_eq(tact_read(s, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], 2 * x[i]);
    tact_tensor *t = tact_permute(s, (int[]){1, 0});
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK);
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) cr_expect_eq(out[r * 2 + c], 2 * x[c * 3 + r], "[%d,%d] %g", r, c, out[r * 2 + c]);
    cr_expect_str_eq(tact_ctx_error(ctx), "", "the fallback leaves no error behind");
    tact_tensor *c = tact_contiguous(s);
    cr_assert_eq(tact_realize(ctx, 1, &c), TACT_OK);
    tact_assign(c, tact_add(c, tact_scalar(ctx, 1.0)));
    cr_assert_eq(tact_read(c, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], 2 * x[i] + 1, "after assign [%d] %g", i, out[i]);
    tact_ctx_close(&ctx);
}

/* A scope's releases reach the graph before the next scope's ops: the
 * same expression built again after its scope ended is computed again,
 * not taken for a duplicate of the dropped result (what benchmarks that
 * repeat a computation rely on). */
Test(graph_pipeline, an_expression_built_again_after_its_scope_ended_runs_again) {
    tact_ctx *ctx = s_open(0, NULL);
    int64_t s[1] = {1000};
    tact_tensor *x = tact_full(ctx, TACT_FLOAT32, 1, s, 2.0);
    cr_assert_eq(tact_realize(ctx, 1, &x), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int rep = 0; rep < 3; rep++) {
        tact_scope_begin(ctx);
        tact_tensor *y = tact_exp(tact_mul(x, x));
        cr_assert_eq(tact_realize(ctx, 1, &y), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(s_kernels(ctx), 1, "repetition %d ran %llu kernels", rep, (unsigned long long)s_kernels(ctx));
        tact_scope_end(ctx);
    }
    tact_ctx_close(&ctx);
}

/* ------------------------------------------------- small results come back */

/* The bytes of a realize's small targets (at most TA_RETURN_BYTES each, at
 * most TA_RETURNS_MAX) come back with its answer: reading them sends no
 * READ, a scalar and a contiguous view alike; a larger target, and the
 * small ones past the limit, are read with a READ each.  An assign makes a
 * new node: a read after it gives the new value.  Values by hand. */
Test(graph_pipeline, small_results_come_back_with_the_realize) {
    char *path = tu_tmpfile("returned");
    tact_ctx *ctx = s_open(2, path);
    float v[100];
    for (int i = 0; i < 100; i++) v[i] = (float)(i + 1);
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){100}, v);
    tact_tensor *four = tact_shrink(x, (const int64_t[][2]){{0, 4}});                  /* 1 2 3 4 */
    tact_tensor *loss = tact_sum(tact_mul(four, four), -1, NULL, 0);                    /* 30 */
    tact_tensor *twice = tact_contiguous(tact_mul(four, tact_scalar(ctx, 2.0)));        /* 2 4 6 8 */
    tact_tensor *square = tact_reshape(twice, 2, (int64_t[]){2, 2});                   /* a view of it */
    tact_tensor *big = tact_add(x, tact_scalar(ctx, 1.0));                              /* 400 bytes */
    tact_tensor *outs[4] = {loss, twice, square, big};
    cr_assert_eq(tact_realize(ctx, 4, outs), TACT_OK, "%s", tact_ctx_error(ctx));
    double l;
    float t[4], q[4], b[100];
    cr_assert_eq(tact_item(loss, &l), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(twice, t, sizeof t), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(square, q, sizeof q), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(big, b, sizeof b), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(l, 30.0);
    for (int i = 0; i < 4; i++) cr_assert(t[i] == 2.0f * (float)(i + 1) && q[i] == t[i], "[%d]: %g %g", i, (double)t[i], (double)q[i]);
    for (int i = 0; i < 100; i++) cr_assert_eq(b[i], (float)(i + 2));
    /* An assign: the same handle names a new node, computed and read anew. */
    tact_assign(twice, tact_mul(twice, tact_scalar(ctx, 10.0)));
    cr_assert_eq(tact_realize(ctx, 1, &twice), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(twice, t, sizeof t), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(t[i], 20.0f * (float)(i + 1));
    /* A view shares its base's buffer, which an assign writes in place:
     * read after the assign, it has the new values, never kept old ones. */
    float pv[4] = {1, 2, 3, 4}, got[4];
    tact_tensor *pt = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){4}, pv);
    tact_tensor *sq = tact_reshape(pt, 2, (int64_t[]){2, 2}), *both[2] = {pt, sq};
    cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(sq, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(got[i], pv[i]);
    tact_assign(pt, tact_mul(pt, tact_scalar(ctx, 10.0)));
    cr_assert_eq(tact_realize(ctx, 1, &pt), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(pt, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx)); /* the assign's result came back */
    for (int i = 0; i < 4; i++) cr_assert_eq(got[i], 10 * pv[i], "p[%d] %g", i, (double)got[i]);
    cr_assert_eq(tact_read(sq, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx)); /* a READ: the kept bytes were forgotten */
    for (int i = 0; i < 4; i++) cr_assert_eq(got[i], 10 * pv[i], "the view [%d]: %g after the assign", i, (double)got[i]);
    /* More small targets than come back: the rest are read with READs. */
    enum { N = TA_RETURNS_MAX + 4 };
    tact_tensor *many[N];
    for (int i = 0; i < N; i++) many[i] = tact_sum(tact_mul(four, tact_scalar(ctx, (double)i)), -1, NULL, 0); /* 10 i */
    cr_assert_eq(tact_realize(ctx, N, many), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < N; i++) {
        cr_assert_eq(tact_item(many[i], &l), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(l, 10.0 * i, "many[%d]: %g", i, l);
    }
    tact_ctx_close(&ctx);
    int reads = tu_log_sent(path, "client", TA_MSG_READ, NULL, NULL);
    cr_assert_eq(reads, 2 + N - TA_RETURNS_MAX, "%d READs: only the large target, the view after the assign and the small ones past the limit", reads);
    unlink(path);
    free(path);
}

/* Jobs the executors asked compilers for, per realize (realizes 1..15). */
static void s_count_jobs(const ta_msg_t *m, void *ud) {
    int *jobs = ud;
    if (m->as.compile.realize < 16) jobs[m->as.compile.realize] += (int)m->as.compile.jobs.n;
}

static void s_count_compiles(const ta_msg_t *m, void *ud) {
    int *sent = ud;
    if (m->as.compile.realize < 16) sent[m->as.compile.realize]++;
}

/* A kernel is compiled in the first two realizes that use it (the quick
 * build, then the full one, which the compiler says is final); after that
 * the executor runs the program it holds for its AST and asks for
 * nothing.  A realize whose new kernel fails to compile leaves the
 * programs the executor holds alone: the next realizes ask for nothing.
 * Every result is right. */
Test(graph_pipeline, a_kernel_is_compiled_twice_then_run_from_the_executor) {
    char *path = tu_tmpfile("known-log");
    unlink(path);
    char *flag = tu_tmpfile("cc-fails");
    unlink(flag);
    char *cache = tu_tmpfile("known-cache"), cc[1400];
    unlink(cache);
    setenv("TACT_CACHE_DIR", cache, 1);
    /* The compiler fails any file with a square root in it while the flag file exists. */
    snprintf(cc, sizeof cc, "sh -c 'for last; do :; done; [ -e %s ] && grep -q tact_vsqrt \"$last\" && { echo not now; exit 1; }; exec cc \"$@\"' cc",
             flag);
    setenv("TACT_CC", cc, 1);
    tact_ctx *ctx = s_open(2, path);
    unsetenv("TACT_CC");
    unsetenv("TACT_CACHE_DIR");
    int64_t s[1] = {64};
    float x[64], out[64];
    int fails = 0;
    for (int r = 1; r <= 8; r++) {
        if (r == 5) fclose(fopen(flag, "w")); /* realize 5 fails to compile its square root */
        if (r == 6) unlink(flag);
        for (int i = 0; i < 64; i++) x[i] = (float)(i + r);
        tact_scope_begin(ctx);
        tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, s, x);
        tact_tensor *y = tact_add(tact_mul(a, a), tact_scalar(ctx, 1.0)); /* the same kernel every realize */
        tact_tensor *both[2] = {y, r == 5 ? tact_sqrt(a) : y};
        int rc = tact_realize(ctx, 2, both);
        if (r == 5) {
            cr_assert_eq(rc, TACT_ECOMPILE, "realize 5: %s", tact_ctx_error(ctx));
            fails++;
        } else {
            cr_assert_eq(rc, TACT_OK, "realize %d: %s", r, tact_ctx_error(ctx));
            cr_assert_eq(tact_read(y, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
            for (int i = 0; i < 64; i++) cr_assert_eq(out[i], x[i] * x[i] + 1.0f, "realize %d, [%d]: %g", r, i, (double)out[i]);
        }
        tact_scope_end(ctx);
    }
    tact_ctx_close(&ctx);
    cr_assert_eq(fails, 1);
    int jobs[16] = {0};
    tu_log_sent(path, "executor", TA_MSG_COMPILE, s_count_jobs, jobs);
    /* Realize r is the loop's r-th (reads of 256 bytes are READs, not realizes). */
    cr_assert(jobs[1] >= 1 && jobs[2] >= 1, "the first two realizes compile (%d, %d jobs)", jobs[1], jobs[2]);
    cr_assert(jobs[3] == 0 && jobs[4] == 0, "realizes 3 and 4 compile nothing (%d, %d jobs)", jobs[3], jobs[4]);
    cr_assert_eq(jobs[5], 1, "realize 5 compiles its new kernel alone (%d jobs)", jobs[5]);
    for (int r = 6; r <= 8; r++) cr_assert_eq(jobs[r], 0, "realize %d compiles nothing (%d jobs)", r, jobs[r]);
    /* The context's only executor sends a compiler a COMPILE only with
     * jobs for it (no merge of several executors to keep going). */
    int sent[16] = {0};
    tu_log_sent(path, "executor", TA_MSG_COMPILE, s_count_compiles, sent);
    cr_assert(sent[1] >= 1 && sent[1] <= 2 && sent[5] == 1, "COMPILEs sent by realizes 1 and 5: %d, %d", sent[1], sent[5]);
    for (int r = 3; r <= 8; r++) cr_assert(r == 5 || sent[r] == 0, "realize %d sent %d COMPILEs for no job", r, sent[r]);
    unlink(path), unlink(flag);
    free(path), free(flag), free(cache);
}

/* Realizes started without waiting get the kept programs too: a kernel is
 * compiled in the first two, then runs from the executor's keeping; every
 * result is right. */
Test(graph_pipeline, realizes_in_flight_run_kept_programs_too) {
    char *path = tu_tmpfile("inflight-log");
    unlink(path);
    tact_ctx *ctx = s_open(2, path);
    int64_t s[1] = {64};
    float x[64], out[64];
    tact_tensor *ys[6];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, s, x);
    for (int r = 1; r <= 6; r++) {
        ys[r - 1] = tact_add(tact_mul(a, a), tact_scalar(ctx, 0.5 + r)); /* one kernel, its constant an argument */
        if (r <= 4) cr_assert_eq(tact_realize_async(ctx, 1, &ys[r - 1]), TACT_OK, "%s", tact_ctx_error(ctx));
        else cr_assert_eq(tact_realize(ctx, 1, &ys[r - 1]), TACT_OK, "%s", tact_ctx_error(ctx));
        if (r == 4) cr_assert_eq(tact_wait(ctx), TACT_OK, "%s", tact_ctx_error(ctx));
    }
    for (int r = 1; r <= 6; r++) {
        cr_assert_eq(tact_read(ys[r - 1], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int i = 0; i < 64; i++) cr_assert_eq(out[i], x[i] * x[i] + (float)(0.5 + r), "realize %d, [%d]: %g", r, i, (double)out[i]);
    }
    tact_ctx_close(&ctx);
    int jobs[16] = {0};
    tu_log_sent(path, "executor", TA_MSG_COMPILE, s_count_jobs, jobs);
    cr_assert(jobs[1] == 1 && jobs[2] == 1, "the first two realizes in flight compile the kernel (%d, %d jobs)", jobs[1], jobs[2]);
    for (int r = 3; r <= 6; r++) cr_assert_eq(jobs[r], 0, "realize %d compiles nothing (%d jobs; %d %d %d %d %d %d)", r, jobs[r], jobs[1], jobs[2], jobs[3], jobs[4], jobs[5], jobs[6]);
    unlink(path);
    free(path);
}
