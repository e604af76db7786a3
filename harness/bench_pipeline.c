/* bench_pipeline.c - `tact bench pipeline`: fused elementwise, matmul, client overhead and realize latency, with peers. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tact.h"


static float *s_fill(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

/* The peer of the fused elementwise kernel: the same loop in plain C, built
 * with the harness's -O3. */
__attribute__((noinline)) static void s_fma_loop(float *restrict o, const float *a, const float *b, const float *c, size_t n) {
    for (size_t i = 0; i < n; i++) o[i] = a[i] * b[i] + c[i];
}

static int s_fma(int reps) {
    enum { N = 16 << 20 };
    float *a = s_fill(N, 1), *b = s_fill(N, 2), *c = s_fill(N, 3), *o = malloc((size_t)N * sizeof *o);
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) {
        fprintf(stderr, "bench: %s\n", tact_last_open_error());
        return 1;
    }
    int64_t shape[1] = {N};
    tact_tensor *ta = tact_from_data(ctx, TACT_FLOAT32, 1, shape, a), *tb = tact_from_data(ctx, TACT_FLOAT32, 1, shape, b),
                *tc = tact_from_data(ctx, TACT_FLOAT32, 1, shape, c);
    tact_tensor *in[3] = {ta, tb, tc};
    int rc = tact_realize(ctx, 3, in);
    double best = 1e30, peer = 1e30;
    for (int r = 0; r < reps && rc == TACT_OK; r++) {
        tact_scope_begin(ctx);
        tact_tensor *res = tact_add(tact_mul(ta, tb), tc);
        double t0 = h_now();
        rc = tact_realize(ctx, 1, &res);
        double t = h_now() - t0;
        if (t < best) best = t;
        tact_scope_end(ctx);
        t0 = h_now();
        s_fma_loop(o, a, b, c, N);
        t = h_now() - t0;
        if (t < peer) peer = t;
    }
    if (rc != TACT_OK) fprintf(stderr, "bench: fma: %s\n", tact_ctx_error(ctx));
    double bytes = 4.0 * N * sizeof(float);
    if (rc == TACT_OK) h_line("pipeline.fma_16M", bytes / best * 1e-9, "GB/s", "plain C loop -O3", bytes / peer * 1e-9, peer / best);
    tact_ctx_close(&ctx);
    free(a), free(b), free(c), free(o);
    return rc != TACT_OK;
}

/* ------------------------------------------------------------------ matmul */


__attribute__((noinline)) static void s_naive(float *o, const float *a, const float *b, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            o[i * n + j] = acc;
        }
}

typedef void (*s_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);

static int s_mm(int reps) {
    enum { N = 1024 };
    float *a = s_fill((size_t)N * N, 4), *b = s_fill((size_t)N * N, 5), *o = malloc((size_t)N * N * sizeof *o);
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) return 1;
    int64_t shape[2] = {N, N};
    tact_tensor *ta = tact_from_data(ctx, TACT_FLOAT32, 2, shape, a), *tb = tact_from_data(ctx, TACT_FLOAT32, 2, shape, b);
    tact_tensor *in[2] = {ta, tb};
    int rc = tact_realize(ctx, 2, in);
    double best = 1e30;
    for (int r = 0; r < reps && rc == TACT_OK; r++) {
        tact_scope_begin(ctx);
        tact_tensor *c = tact_matmul(ta, tb);
        double t0 = h_now();
        rc = tact_realize(ctx, 1, &c);
        double t = h_now() - t0;
        if (t < best) best = t;
        tact_scope_end(ctx);
    }
    if (rc != TACT_OK) fprintf(stderr, "bench: matmul: %s\n", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    double flops = 2.0 * N * N * N, t0 = h_now();
    s_naive(o, a, b, N);
    double naive = h_now() - t0;
    if (rc == TACT_OK) h_line("pipeline.matmul_1024", flops / best * 1e-9, "GFLOPS", "naive triple loop -O3", flops / naive * 1e-9, naive / best);
    /* OpenBLAS where installed, found at run time so it is no build dependency. */
    void *dl = dlopen("libopenblas.so.0", RTLD_NOW);
    s_sgemm_fn sgemm = NULL;
    if (dl) *(void **)&sgemm = dlsym(dl, "cblas_sgemm");
    if (sgemm && rc == TACT_OK) {
        double blas = 1e30;
        for (int r = 0; r < reps; r++) {
            t0 = h_now();
            sgemm(101, 111, 111, N, N, N, 1.0f, a, N, b, N, 0.0f, o, N); /* row major, no transposes */
            double t = h_now() - t0;
            if (t < blas) blas = t;
        }
        h_line("pipeline.matmul_1024", flops / best * 1e-9, "GFLOPS", "OpenBLAS cblas_sgemm", flops / blas * 1e-9, blas / best);
    }
    if (dl) dlclose(dl);
    free(a), free(b), free(o);
    return rc != TACT_OK;
}

/* ----------------------------------------------------------- the client */

/* The peer's figures, from harness/peer_tinygrad.py when tinygrad is installed. */
static int s_tinygrad(double *overhead_us, double *first_ms, double *cached_ms, char *version, size_t vlen) {
    FILE *p = h_peer_open("peer_tinygrad.py", "tinygrad", "", NULL, 0);
    if (!p) return -1;
    char buf[512] = "";
    size_t got = fread(buf, 1, sizeof buf - 1, p);
    buf[got] = '\0';
    int status = pclose(p);
    char v[32] = "?";
    if (status != 0 || sscanf(buf, "{\"client_overhead_us\": %lf, \"first_realize_ms\": %lf, \"cached_realize_ms\": %lf, \"version\": \"%31[^\"]",
                              overhead_us, first_ms, cached_ms, v) < 3)
        return -1;
    snprintf(version, vlen, "tinygrad %s (CLANG)", v);
    return 0;
}

static int s_client(void) {
    char dir[] = "/tmp/tact-bench-cache-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("TACT_CACHE_DIR", dir, 1); /* a first realize that really compiles */
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) return 1;
    int64_t shape[1] = {16};
    tact_tensor *x = tact_ones(ctx, TACT_FLOAT32, 1, shape), *one = tact_scalar(ctx, 1.0);
    double t0 = h_now();
    for (int i = 0; i < 10000; i++) x = tact_add(x, one);
    double overhead = (h_now() - t0) / 10000 * 1e6;
    /* Realize latency: a*b + c*3.5 on fresh inputs each time (inputs are
     * uploaded and realized before the clock starts), so nothing is shared
     * with an earlier result; the first compiles, the others hit the cache. */
    enum { M = 1 << 16 };
    float *host = s_fill(M, 7);
    int64_t big[1] = {M};
    double first = 0, cached = 1e30;
    int rc = TACT_OK;
    for (int i = 0; i < 6 && rc == TACT_OK; i++) {
        tact_scope_begin(ctx);
        tact_tensor *in[3];
        for (int j = 0; j < 3; j++) in[j] = tact_from_data(ctx, TACT_FLOAT32, 1, big, host);
        rc = tact_realize(ctx, 3, in);
        tact_tensor *r = tact_add(tact_mul(in[0], in[1]), tact_mul(in[2], tact_scalar(ctx, 3.5)));
        t0 = h_now();
        if (rc == TACT_OK) rc = tact_realize(ctx, 1, &r);
        double t = (h_now() - t0) * 1e3;
        if (i == 0) first = t;
        else if (t < cached) cached = t;
        tact_scope_end(ctx);
    }
    free(host);
    if (rc != TACT_OK) fprintf(stderr, "bench: client: %s\n", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "bench: could not remove %s\n", dir);
    unsetenv("TACT_CACHE_DIR");
    double tg_over, tg_first, tg_cached;
    char tg_name[64];
    int have = s_tinygrad(&tg_over, &tg_first, &tg_cached, tg_name, sizeof tg_name) == 0;
    const char *peer = have ? tg_name : "target (tinygrad not installed)";
    h_line("pipeline.client_overhead_us", overhead, "us", peer, have ? tg_over : 2.0, (have ? tg_over : 2.0) / overhead);
    if (rc == TACT_OK) {
        h_line("pipeline.first_realize_ms", first, "ms", have ? peer : "none", have ? tg_first : 0, have ? tg_first / first : 0);
        h_line("pipeline.cached_realize_ms", cached, "ms", have ? peer : "none", have ? tg_cached : 0, have ? tg_cached / cached : 0);
    }
    return rc != TACT_OK;
}

/* ------------------------------------------------------- scheduling */

/* Scheduler time of one step of 4000 elementwise ops on fresh inputs, the
 * best of reps steps after the first (which fills the schedule cache). */
static int s_schedule_step(int cache, int reps, double *best_us) {
    enum { OPS = 4000, N = 16 };
    setenv("TACT_SCHEDULE_CACHE", cache ? "1" : "0", 1);
    tact_ctx *ctx;
    int rc = tact_ctx_open(&ctx, NULL);
    unsetenv("TACT_SCHEDULE_CACHE");
    if (rc != TACT_OK) return 1;
    int64_t shape[1] = {N};
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)i;
    tact_tensor *half = tact_full(ctx, TACT_FLOAT32, 1, shape, 0.5), *one = tact_full(ctx, TACT_FLOAT32, 1, shape, 1.0);
    tact_tensor *in[2] = {half, one};
    rc = tact_realize(ctx, 2, in);
    *best_us = 1e30;
    for (int r = 0; r <= reps && rc == TACT_OK; r++) {
        tact_scope_begin(ctx);
        tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, shape, host);
        for (int k = 0; k < OPS; k++) t = k % 2 ? tact_mul(t, half) : tact_add(t, one);
        tact_stats a, b;
        tact_ctx_stats(ctx, &a);
        rc = tact_realize(ctx, 1, &t);
        tact_ctx_stats(ctx, &b);
        double us = (double)(b.schedule_ns - a.schedule_ns) * 1e-3;
        if (r > 0 && us < *best_us) *best_us = us;
        tact_scope_end(ctx);
    }
    if (rc != TACT_OK) fprintf(stderr, "bench: schedule: %s\n", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    return rc != TACT_OK;
}

static int s_schedule(int quick) {
    double cached, uncached;
    int reps = quick ? 3 : 10;
    if (s_schedule_step(1, reps, &cached) || s_schedule_step(0, reps, &uncached)) return 1;
    h_line("pipeline.schedule_4000_ops_us", cached, "us", "tact, schedule cache off", uncached, uncached / cached);
    return 0;
}

/* ------------------------------------------------------- pipelining */

/* Steps per second of a loop whose step reads fresh inputs and the last
 * step's state (s = relu(x @ w) + 0.5 * s, then its sum), every realize
 * started without waiting (the stages work on step k+1 while step k runs)
 * or, for the peer, waited for. */
static int s_steps(int async, int steps, const char *log_path, double *per_s) {
    enum { B = 64, K = 256, M = 64 };
    float *x = s_fill((size_t)B * K, 5), *w = s_fill((size_t)K * M, 6);
    tact_ctx *ctx;
    tact_options o;
    tact_options_default(&o);
    o.log_path = log_path;
    if (tact_ctx_open(&ctx, &o) != TACT_OK) return 1;
    int64_t xs[2] = {B, K}, ws[2] = {K, M}, ss[2] = {B, M};
    tact_tensor *tw = tact_keep(tact_from_data(ctx, TACT_FLOAT32, 2, ws, w));
    tact_tensor *st = tact_keep(tact_zeros(ctx, TACT_FLOAT32, 2, ss));
    int rc = TACT_OK;
    double t0 = 0;
    for (int k = 0; k < steps + 2 && rc == TACT_OK; k++) {
        if (k == 2) { /* the first two steps compile (the state is a constant in the first): not counted */
            rc = tact_wait(ctx);
            t0 = h_now();
        }
        tact_scope_begin(ctx);
        tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, xs, x);
        tact_tensor *h = tact_maximum(tact_matmul(tx, tw), tact_scalar(ctx, 0.0));
        st = tact_keep(tact_add(h, tact_mul(st, tact_scalar(ctx, 0.5))));
        tact_tensor *total = tact_keep(tact_sum(st, -1, NULL, 0));
        tact_tensor *both[2] = {st, total};
        rc = async ? tact_realize_async(ctx, 2, both) : tact_realize(ctx, 2, both);
        tact_scope_end(ctx);
    }
    if (rc == TACT_OK) rc = tact_wait(ctx);
    *per_s = steps / (h_now() - t0);
    if (rc != TACT_OK) fprintf(stderr, "bench: steps: %s\n", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    free(x), free(w);
    return rc != TACT_OK;
}

static int s_pipelining(int quick) {
    double async, sync;
    int steps = quick ? 100 : 400;
    if (s_steps(1, steps, NULL, &async) || s_steps(0, steps, NULL, &sync)) return 1;
    h_line("pipeline.async_steps_per_s", async, "steps/s", "tact, each realize waited for", sync, async / sync);
    /* Recording every message (its log rewritten canonical at close, not
     * timed): the same steps, recorded and not, best of 3 each in turn. */
    char path[] = "/tmp/tact-bench-log-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    double rec = 0, plain = 0;
    for (int r = 0; r < 3; r++) {
        double a, b;
        if (s_steps(1, steps, path, &a) || s_steps(1, steps, NULL, &b)) return 1;
        rec = a > rec ? a : rec;
        plain = b > plain ? b : plain;
    }
    char times[64];
    snprintf(times, sizeof times, "%s.times", path);
    unlink(path), unlink(times);
    h_line("pipeline.recorded_steps_per_s", rec, "steps/s", "tact, not recorded", plain, rec / plain);
    return 0;
}

int h_bench_pipeline(int quick) {
    int bad = s_fma(quick ? 2 : 5);
    bad |= s_mm(quick ? 1 : 3);
    bad |= s_client();
    bad |= s_schedule(quick);
    bad |= s_pipelining(quick);
    return bad;
}
