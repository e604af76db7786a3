/* test_limits.c - realizes that outgrow a kernel, a message or a stage's tables split the work instead of failing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open(void) {
    tact_ctx *ctx = NULL;
    int rc = tact_ctx_open(&ctx, NULL);
    cr_assert_eq(rc, TACT_OK, "open: %s", tact_last_open_error());
    return ctx;
}

static float *s_randf(uint64_t *rng, size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)((double)(tu_rand(rng) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    return p;
}

static tact_stats s_stats(tact_ctx *ctx) {
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    return st;
}

/* |got - want| <= tol * (1 + |want|), with the seed in the message. */
#define S_CLOSE(got, want, tol, seed, what, i)                                                                         \
    cr_assert(fabs((double)(got) - (want)) <= (tol) * (1 + fabs(want)), "seed %#llx: %s %d: %.9g, want %.9g",         \
              (unsigned long long)(seed), what, (int)(i), (double)(got), (double)(want))

/* One kernel reads at most 32 buffers: a sum of 100 tensors is split into
 * several kernels, each within the limit. */
Test(graph_limits, adding_100_tensors) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open();
    enum { T = 100, N = 64 };
    int64_t shape[1] = {N};
    float *x[T];
    tact_tensor *sum = NULL;
    for (int t = 0; t < T; t++) {
        x[t] = s_randf(&rng, N);
        tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x[t]);
        sum = sum ? tact_add(sum, a) : a;
    }
    cr_assert_eq(tact_realize(ctx, 1, &sum), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_gt(s_stats(ctx).kernels, 1, "the sum is split");
    float out[N];
    cr_assert_eq(tact_read(sum, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < N; i++) {
        double want = 0;
        for (int t = 0; t < T; t++) want += x[t][i];
        S_CLOSE(out[i], want, 1e-5, seed, "element", i); /* float adds in order against a double sum */
    }
    for (int t = 0; t < T; t++) free(x[t]);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* A balanced tree of 999 additions over 1000 leaves: more nodes and
 * buffers than one kernel holds. */
Test(graph_limits, elementwise_tree_of_1000_leaves) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open();
    enum { L = 1000, N = 16 };
    int64_t shape[1] = {N};
    float *x = s_randf(&rng, (size_t)L * N);
    tact_tensor **level = malloc(sizeof *level * L);
    for (int l = 0; l < L; l++) level[l] = tact_mul(tact_from_data(ctx, TACT_FLOAT32, 1, shape, x + (size_t)l * N), tact_scalar(ctx, 0.5));
    int n = L;
    while (n > 1) {
        int m = 0;
        for (int i = 0; i + 1 < n; i += 2) level[m++] = tact_add(level[i], level[i + 1]);
        if (n % 2) level[m++] = level[n - 1];
        n = m;
    }
    cr_assert_eq(tact_realize(ctx, 1, &level[0]), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_gt(s_stats(ctx).kernels, 1);
    float out[N];
    cr_assert_eq(tact_read(level[0], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < N; i++) {
        double want = 0;
        for (int l = 0; l < L; l++) want += 0.5 * x[(size_t)l * N + i];
        S_CLOSE(out[i], want, 1e-5, seed, "element", i);
    }
    free(level);
    free(x);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* 2500 steps of t = sum(expand(t * 0.5 + 1)) over two rows: each step is
 * two kernels (realize before expand), 5000 in one realize. */
Test(graph_limits, realize_of_5000_kernels) {
    tact_ctx *ctx = s_open();
    enum { STEPS = 2500, N = 8 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)i - 3.0f;
    int64_t shape[1] = {N}, row[2] = {1, N}, two[2] = {2, N};
    int axis = 0;
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x);
    tact_scope_begin(ctx);
    for (int s = 0; s < STEPS; s++) {
        tact_tensor *u = tact_add(tact_mul(t, tact_scalar(ctx, 0.5)), tact_scalar(ctx, 1.0));
        t = tact_sum(tact_expand(tact_reshape(u, 2, row), 2, two), 1, &axis, 0);
    }
    tact_keep(t);
    tact_scope_end(ctx);
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_stats(ctx).kernels, 2 * STEPS);
    float out[N];
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < N; i++) {
        float v = x[i];
        for (int s = 0; s < STEPS; s++) {
            float u = v * 0.5f;
            u = u + 1.0f;
            v = u + u;
        }
        cr_assert_eq(out[i], v, "element %d: %g, want %g", i, out[i], v); /* every step is exact in float */
    }
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* 2000 tensors realized at once, each its own kernel (all of one source,
 * so one compile). */
Test(graph_limits, realize_of_2000_targets) {
    tact_ctx *ctx = s_open();
    enum { T = 2000, N = 4 };
    int64_t shape[1] = {N};
    float *x = malloc(sizeof *x * T * N);
    for (int i = 0; i < T * N; i++) x[i] = (float)i;
    tact_tensor **ts = malloc(sizeof *ts * T);
    for (int t = 0; t < T; t++) ts[t] = tact_mul(tact_from_data(ctx, TACT_FLOAT32, 1, shape, x + t * N), tact_scalar(ctx, 3.0));
    cr_assert_eq(tact_realize(ctx, T, ts), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_stats(ctx).kernels, T);
    for (int t = 0; t < T; t++) {
        float out[N];
        cr_assert_eq(tact_read(ts[t], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], x[t * N + i] * 3.0f, "tensor %d element %d: %g", t, i, out[i]);
    }
    free(ts);
    free(x);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* A lazy chain of a million elementwise ops: walked without recursion, cut
 * into kernels of bounded depth and sent to the scheduler in parts. */
Test(graph_limits, chain_of_a_million_ops) {
    tact_ctx *ctx = s_open();
    enum { OPS = 1000000, N = 4 };
    float x[N] = {-2, 0.5f, 3, 100};
    int64_t shape[1] = {N};
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x);
    /* Operands of the chain's shape, so each op is one graph node. */
    float halves[N] = {0.5f, 0.5f, 0.5f, 0.5f}, ones[N] = {1, 1, 1, 1};
    tact_tensor *half = tact_from_data(ctx, TACT_FLOAT32, 1, shape, halves), *one = tact_from_data(ctx, TACT_FLOAT32, 1, shape, ones);
    for (int done = 0; done < OPS;) {
        /* Scopes of 10000 ops let the client drop its handles; the graph
         * keeps the nodes the chain still needs. */
        tact_scope_begin(ctx);
        for (int k = 0; k < 10000; k++, done++) t = done % 2 ? tact_mul(t, half) : tact_add(t, one);
        tact_keep(t);
        tact_scope_end(ctx);
    }
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_gt(s_stats(ctx).kernels, OPS / 200);
    float out[N];
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < N; i++) {
        float v = x[i];
        for (int k = 0; k < OPS; k++) v = k % 2 ? v * 0.5f : v + 1.0f;
        cr_assert_eq(out[i], v, "element %d: %g, want %g", i, out[i], v); /* the same float ops in the same order */
    }
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* A realize larger than one part whose first 32768 nodes compute nothing
 * (views of a buffer) still ends: each later part holds only what is left
 * to compute. */
Test(graph_limits, a_large_realize_of_views_makes_progress_part_by_part) {
    tact_ctx *ctx = s_open();
    enum { T = 40000 };
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    int order[2] = {1, 0};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    cr_assert_eq(tact_realize(ctx, 1, &a), TACT_OK);
    tact_tensor **ts = malloc(sizeof *ts * (T + 1));
    for (int t = 0; t < T; t++) ts[t] = tact_permute(a, order);
    ts[T] = tact_add(a, tact_scalar(ctx, 1.0));
    cr_assert_eq(tact_realize(ctx, T + 1, ts), TACT_OK, "%s", tact_ctx_error(ctx));
    float out[6];
    cr_assert_eq(tact_read(ts[T], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_assert_eq(out[i], x[i] + 1);
    cr_assert_eq(tact_read(ts[T - 1], out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[1], 4.0f, "the transposed view reads the buffer");
    free(ts);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* A realize sent in parts whose first nodes are realized already: a part
 * of those leaves alone would compute nothing, and the same part would go
 * again forever (a livelock until the timeout).  With parts of 100 bytes
 * (TACT_TEST_PART_BYTES) every part has a node to compute, and the value
 * is right. */
Test(graph_limits, parts_always_make_progress) {
    setenv("TACT_TEST_PART_BYTES", "100", 1);
    tact_options o;
    tact_options_default(&o);
    o.timeout_ms = 20000;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK);
    float v[6] = {1, 2, 3, 4, 5, 6};
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 3}, v);
    double want = 0, got = 0;
    for (int i = 0; i < 6; i++) want += exp2((double)v[i] * v[i] * 0.25);
    tact_tensor *y = tact_sum(tact_exp2(tact_mul(tact_mul(x, x), tact_scalar(ctx, 0.25))), -1, NULL, 0);
    cr_assert_eq(tact_item(y, &got), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect(fabs(got - want) <= 1e-5 * want, "%.9g, not %.9g", got, want);
    tact_ctx_close(&ctx);
    unsetenv("TACT_TEST_PART_BYTES");
}
