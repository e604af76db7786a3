/* bench_kernels.c - `tact bench kernels`: matmuls, reductions, a triad and softmax against peers
 * with the same thread count (OpenBLAS, OpenMP C loops, PyTorch or NumPy). */
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tact.h"

/* tact's CPU device runs one thread per core; every peer gets as many. */
static int s_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

float *h_fill(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; p && i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

double h_tact_best(const char *device, int nin, float **data, int64_t (*shapes)[2], const int *ndims, h_expr_fn expr, int reps) {
    tact_options o;
    tact_options_default(&o);
    o.devices = device;
    return h_tact_best_with(&o, nin, data, shapes, ndims, NULL, expr, reps);
}

double h_tact_best_with(const tact_options *o, int nin, float **data, int64_t (*shapes)[2], const int *ndims, h_prep_fn prep, h_expr_fn expr,
                        int reps) {
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, o) != TACT_OK) {
        fprintf(stderr, "bench: %s\n", tact_last_open_error());
        return -1;
    }
    tact_tensor *in[4];
    for (int i = 0; i < nin; i++) in[i] = tact_from_data(ctx, TACT_FLOAT32, ndims[i], shapes[i], data[i]);
    if (prep) prep(ctx, in);
    int rc = tact_realize(ctx, nin, in);
    double best = 1e30;
    for (int r = 0; r <= reps && rc == TACT_OK; r++) {
        tact_scope_begin(ctx);
        tact_tensor *out = expr(ctx, in);
        double t0 = h_now();
        rc = tact_realize(ctx, 1, &out);
        double t = h_now() - t0;
        if (r > 0 && t < best) best = t;
        tact_scope_end(ctx);
    }
    if (rc != TACT_OK) fprintf(stderr, "bench: %s\n", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    return rc == TACT_OK ? best : -1;
}

/* ------------------------------------------------------------------ matmul */

typedef void (*s_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);

tact_tensor *h_matmul(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    return tact_matmul(in[0], in[1]);
}

static char s_blas_name[64] = "OpenBLAS cblas_sgemm";

static int s_mm(s_sgemm_fn sgemm, const char *name, int m, int k, int n, int reps) {
    float *a = h_fill((size_t)m * k, 4), *b = h_fill((size_t)k * n, 5), *o = malloc((size_t)m * n * sizeof *o);
    float *data[2] = {a, b};
    int64_t shapes[2][2] = {{m, k}, {k, n}};
    int ndims[2] = {2, 2};
    double t = h_tact_best(NULL, 2, data, shapes, ndims, h_matmul, reps), blas = 1e30, flops = 2.0 * m * n * k;
    for (int r = 0; r <= reps; r++) {
        double t0 = h_now();
        sgemm(101, 111, 111, m, n, k, 1.0f, a, k, b, n, 0.0f, o, n); /* row major, no transposes */
        double dt = h_now() - t0;
        if (r > 0 && dt < blas) blas = dt;
    }
    if (t > 0) h_line(name, flops / t * 1e-9, "GFLOPS", s_blas_name, flops / blas * 1e-9, blas / t);
    free(a), free(b), free(o);
    return t < 0;
}

/* -------------------------------------------------------------- reductions */

static tact_tensor *s_sum_all(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    return tact_sum(in[0], -1, NULL, 0);
}
static tact_tensor *s_sum_rows(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    int axis = 1;
    return tact_sum(in[0], 1, &axis, 0);
}
static tact_tensor *s_sum_cols(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    int axis = 0;
    return tact_sum(in[0], 1, &axis, 0);
}

/* The peers: OpenMP loops over the same data with the same threads. */
__attribute__((noinline)) static float s_omp_sum(const float *x, int64_t n) {
    float s = 0;
#pragma omp parallel for simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}
__attribute__((noinline)) static void s_omp_rows(float *o, const float *x, int64_t rows, int64_t cols) {
#pragma omp parallel for
    for (int64_t r = 0; r < rows; r++) {
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < cols; c++) s += x[r * cols + c];
        o[r] = s;
    }
}
__attribute__((noinline)) static void s_omp_cols(float *o, const float *x, int64_t rows, int64_t cols) {
#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = cols * t / nt, hi = cols * (t + 1) / nt;
        for (int64_t c = lo; c < hi; c++) o[c] = 0;
        for (int64_t r = 0; r < rows; r++)
#pragma omp simd
            for (int64_t c = lo; c < hi; c++) o[c] += x[r * cols + c];
    }
}

static double s_best(int reps, void (*fn)(void *), void *ud) {
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = h_now();
        fn(ud);
        double t = h_now() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

typedef struct {
    float *o;
    const float *x, *y, *z;
    int64_t rows, cols;
    volatile float sink;
} s_args_t;

static void s_run_sum(void *p) {
    s_args_t *a = p;
    a->sink = s_omp_sum(a->x, a->rows * a->cols);
}
static void s_run_rows(void *p) {
    s_args_t *a = p;
    s_omp_rows(a->o, a->x, a->rows, a->cols);
}
static void s_run_cols(void *p) {
    s_args_t *a = p;
    s_omp_cols(a->o, a->x, a->rows, a->cols);
}

static int s_reduce(const char *name, int64_t rows, int64_t cols, h_expr_fn expr, void (*peer)(void *), int reps) {
    float *x = h_fill((size_t)(rows * cols), 6), *o = malloc((size_t)(rows > cols ? rows : cols) * sizeof *o);
    float *data[1] = {x};
    int64_t shapes[1][2] = {{rows, cols}};
    int ndims[1] = {rows == 1 ? 1 : 2};
    if (rows == 1) shapes[0][0] = cols;
    double t = h_tact_best(NULL, 1, data, shapes, ndims, expr, reps);
    s_args_t args = {o, x, NULL, NULL, rows, cols, 0};
    double p = s_best(reps, peer, &args), bytes = 4.0 * (double)(rows * cols);
    if (t > 0) h_line(name, bytes / t * 1e-9, "GB/s", "OpenMP C loop", bytes / p * 1e-9, p / t);
    free(x), free(o);
    return t < 0;
}

/* ------------------------------------------------------------------- triad */

static tact_tensor *s_fma_expr(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    return tact_add(tact_mul(in[0], in[1]), in[2]);
}

__attribute__((noinline)) static void s_omp_triad(void *p) {
    s_args_t *a = p;
    float *restrict o = a->o;
    const float *x = a->x, *y = a->y, *z = a->z;
    int64_t n = a->cols;
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; i++) o[i] = x[i] * y[i] + z[i];
}

static int s_fma(int reps) {
    enum { N = 16 << 20 };
    float *data[3] = {h_fill(N, 1), h_fill(N, 2), h_fill(N, 3)}, *o = malloc((size_t)N * sizeof *o);
    int64_t shapes[3][2] = {{N}, {N}, {N}};
    int ndims[3] = {1, 1, 1};
    double t = h_tact_best(NULL, 3, data, shapes, ndims, s_fma_expr, reps);
    s_args_t args = {o, data[0], data[1], data[2], 1, N, 0};
    double p = s_best(reps, s_omp_triad, &args), bytes = 4.0 * N * sizeof(float);
    if (t > 0) h_line("kernels.fma_16M", bytes / t * 1e-9, "GB/s", "OpenMP C triad", bytes / p * 1e-9, p / t);
    for (int i = 0; i < 3; i++) free(data[i]);
    free(o);
    return t < 0;
}

/* ----------------------------------------------------------------- softmax */

static tact_tensor *s_softmax(tact_ctx *ctx, tact_tensor **in) {
    int last = 1;
    tact_tensor *x = in[0], *shifted = tact_sub(x, tact_max(x, 1, &last, 1));
    tact_tensor *e = tact_exp2(tact_mul(shifted, tact_scalar(ctx, 1.4426950408889634)));
    return tact_div(e, tact_sum(e, 1, &last, 1));
}

__attribute__((noinline)) static void s_omp_softmax(void *p) {
    s_args_t *a = p;
#pragma omp parallel for
    for (int64_t r = 0; r < a->rows; r++) {
        const float *x = a->x + r * a->cols;
        float *o = a->o + r * a->cols, m = -INFINITY, s = 0;
        for (int64_t c = 0; c < a->cols; c++) m = x[c] > m ? x[c] : m;
        for (int64_t c = 0; c < a->cols; c++) s += o[c] = expf(x[c] - m);
        for (int64_t c = 0; c < a->cols; c++) o[c] /= s;
    }
}

/* PyTorch, or NumPy, timing a kernel through harness/peer_kernels.py
 * ("softmax", "gather"; h_peer_open picks the Python): seconds, and the
 * peer's name with its version; 0 when neither is installed. */
static int s_python_peer(const char *kernel, int threads, double *secs, char *name, size_t len) {
    char args[64], why[200] = "", peer[200];
    snprintf(args, sizeof args, "%s %d", kernel, threads);
    FILE *f = h_peer_open("peer_kernels.py", "torch", args, why, sizeof why);
    if (!f) return 0;
    int ok = fscanf(f, "%lf %199s", secs, peer) == 2;
    pclose(f);
    if (ok) snprintf(name, len, "%s%s%s", peer, why[0] ? " " : "", why);
    return ok;
}

/* A GB/s line: tact's time t for bytes against the Python peer's kernel
 * (peer_kernels.py); returns whether tact's run failed. */
static int s_gbs_line(const char *name, const char *kernel, double bytes, double t) {
    char peer[200];
    double p = 0;
    int have = s_python_peer(kernel, s_threads(), &p, peer, sizeof peer);
    if (t > 0) h_line(name, bytes / t * 1e-9, "GB/s", have ? peer : "none (neither PyTorch nor NumPy installed)", have ? bytes / p * 1e-9 : 0, have ? p / t : 0);
    return t < 0;
}

static int s_softmax_bench(int reps) {
    enum { R = 4096, C = 4096 };
    float *x = h_fill((size_t)R * C, 7), *o = malloc((size_t)R * C * sizeof *o);
    float *data[1] = {x};
    int64_t shapes[1][2] = {{R, C}};
    int ndims[1] = {2};
    double t = h_tact_best(NULL, 1, data, shapes, ndims, s_softmax, reps), p;
    char peer[200];
    if (!s_python_peer("softmax", s_threads(), &p, peer, sizeof peer)) {
        s_args_t args = {o, x, NULL, NULL, R, C, 0};
        p = s_best(reps, s_omp_softmax, &args);
        snprintf(peer, sizeof peer, "OpenMP C loop (neither PyTorch nor NumPy installed)");
    }
    double bytes = 8.0 * R * C; /* read once, written once */
    if (t > 0) h_line("kernels.softmax_4096", bytes / t * 1e-9, "GB/s", peer, bytes / p * 1e-9, p / t);
    free(x), free(o);
    return t < 0;
}

/* Every row of a 60000x784 float32 table (Fashion-MNIST's size) in a
 * shuffled order: getitem with a tensor index, a gather kernel (the
 * lowering's), in GB/s of rows gathered, against PyTorch's index_select
 * (peer_kernels.py gather). */
static void s_gather_prep(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    in[1] = tact_cast(in[1], TACT_INT32);
}

static tact_tensor *s_gather(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    tact_index ix[1] = {TACT_TENSOR(in[1])};
    return tact_getitem(in[0], 1, ix);
}

static int s_gather_bench(int reps) {
    enum { R = 60000, C = 784 };
    float *table = h_fill((size_t)R * C, 8), *order = malloc(R * sizeof *order);
    if (!order) return 1;
    for (int i = 0; i < R; i++) order[i] = (float)i;
    unsigned long long st = 7;
    for (int i = R - 1; i > 0; i--) { /* Fisher-Yates with a fixed seed */
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((st >> 33) % (unsigned long long)(i + 1));
        float t = order[i];
        order[i] = order[j], order[j] = t;
    }
    float *data[2] = {table, order};
    int64_t shapes[2][2] = {{R, C}, {R, 0}};
    int ndims[2] = {2, 1};
    tact_options o;
    tact_options_default(&o);
    double t = h_tact_best_with(&o, 2, data, shapes, ndims, s_gather_prep, s_gather, reps);
    free(table), free(order);
    return s_gbs_line("kernels.gather", "gather", 4.0 * R * C /* the rows gathered */, t);
}

/* The gradient of 128 rows picked from a 60000x784 float32 table (an
 * embedding's weight, a minibatch's getitem): a scatter (lowering's), in
 * GB/s of the gradient written, against PyTorch's embedding backward of the
 * same rows into a fresh dense gradient (peer_kernels.py embedding_grad). */
enum { S_WORDS = 128 };

static void s_emb_prep(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    in[0] = tact_set_requires_grad(in[0], 1);
    in[1] = tact_cast(in[1], TACT_INT32);
}

static tact_tensor *s_emb_grad(tact_ctx *ctx, tact_tensor **in) {
    tact_grad_clear(in[0]); /* a fresh gradient each time, as the peer's */
    tact_index ix[1] = {TACT_TENSOR(in[1])};
    if (tact_backward(tact_getitem(in[0], 1, ix), in[2]) != TACT_OK) fprintf(stderr, "bench: embedding_grad: %s\n", tact_ctx_error(ctx));
    return tact_grad(in[0]); /* without one, an error tensor: the realize fails */
}

static int s_emb_bench(int reps) {
    enum { R = 60000, C = 784 };
    float *table = h_fill((size_t)R * C, 9), *words = malloc(S_WORDS * sizeof *words), *g = h_fill((size_t)S_WORDS * C, 10);
    if (!words || !table || !g) {
        free(table), free(words), free(g);
        return 1;
    }
    unsigned long long st = 11;
    for (int i = 0; i < S_WORDS; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        words[i] = (float)((st >> 33) % R);
    }
    float *data[3] = {table, words, g};
    int64_t shapes[3][2] = {{R, C}, {S_WORDS, 0}, {S_WORDS, C}};
    int ndims[3] = {2, 1, 2};
    tact_options o;
    tact_options_default(&o);
    double t = h_tact_best_with(&o, 3, data, shapes, ndims, s_emb_prep, s_emb_grad, reps);
    free(table), free(words), free(g);
    return s_gbs_line("kernels.embedding_grad", "embedding_grad", 4.0 * R * C /* the gradient written */, t);
}

/* A 1024^2 matmul of float16 or bfloat16 (tact_matmul: products in
 * float32, summed in float32, rounded once), against PyTorch's matmul in
 * that dtype on the CPU with as many threads (peer_kernels.py). */
static void s_to_f16(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    in[0] = tact_cast(in[0], TACT_FLOAT16), in[1] = tact_cast(in[1], TACT_FLOAT16);
}
static void s_to_bf16(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    in[0] = tact_cast(in[0], TACT_BFLOAT16), in[1] = tact_cast(in[1], TACT_BFLOAT16);
}

static int s_low_matmul(tact_dtype d, const char *dname, int reps) {
    enum { N = 1024 };
    float *a = h_fill((size_t)N * N, 4), *b = h_fill((size_t)N * N, 5);
    float *data[2] = {a, b};
    int64_t shapes[2][2] = {{N, N}, {N, N}};
    int ndims[2] = {2, 2};
    tact_options o;
    tact_options_default(&o);
    double t = h_tact_best_with(&o, 2, data, shapes, ndims, d == TACT_FLOAT16 ? s_to_f16 : s_to_bf16, h_matmul, reps), p, flops = 2.0 * N * N * N;
    char kernel[32], peer[200], name[64];
    snprintf(kernel, sizeof kernel, "matmul_%s", dname);
    snprintf(name, sizeof name, "kernels.matmul_%s_1024", dname);
    int have = s_python_peer(kernel, s_threads(), &p, peer, sizeof peer);
    if (t > 0) h_line(name, flops / t * 1e-9, "GFLOPS", have ? peer : "none (neither PyTorch nor NumPy installed)", have ? flops / p * 1e-9 : 0, have ? p / t : 0);
    free(a), free(b);
    return t < 0;
}

int h_bench_kernels(int quick) {
    int reps = quick ? 1 : 15, threads = s_threads(), bad = 0;
    omp_set_num_threads(threads);
    void *dl = dlopen("libopenblas.so.0", RTLD_NOW);
    s_sgemm_fn sgemm = NULL;
    void (*set_threads)(int) = NULL;
    char *(*config)(void) = NULL;
    if (dl) {
        *(void **)&sgemm = dlsym(dl, "cblas_sgemm");
        *(void **)&set_threads = dlsym(dl, "openblas_set_num_threads");
        *(void **)&config = dlsym(dl, "openblas_get_config");
    }
    char version[32];
    if (config && sscanf(config(), "OpenBLAS %31s", version) == 1) /* "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
        snprintf(s_blas_name, sizeof s_blas_name, "OpenBLAS %s cblas_sgemm", version);
    if (set_threads) set_threads(threads);
    if (sgemm) {
        bad |= s_mm(sgemm, "kernels.matmul_1024", 1024, 1024, 1024, reps);
        bad |= s_mm(sgemm, "kernels.matmul_512", 512, 512, 512, reps);
        if (!quick) bad |= s_mm(sgemm, "kernels.matmul_2048", 2048, 2048, 2048, 2);
        bad |= s_mm(sgemm, "kernels.matmul_1000x1100x900", 1000, 900, 1100, reps); /* M x N x K */
    } else {
        fprintf(stderr, "bench: libopenblas.so.0 not found (Debian: libopenblas0): no matmul lines\n");
    }
    bad |= s_reduce("kernels.sum_16M", 1, 16 << 20, s_sum_all, s_run_sum, reps);
    bad |= s_reduce("kernels.rowsum_4096", 4096, 4096, s_sum_rows, s_run_rows, reps);
    bad |= s_reduce("kernels.colsum_4096", 4096, 4096, s_sum_cols, s_run_cols, reps);
    bad |= s_fma(reps);
    bad |= s_softmax_bench(quick ? 1 : 3);
    bad |= s_gather_bench(quick ? 1 : 5);
    bad |= s_emb_bench(quick ? 1 : 5);
    bad |= s_low_matmul(TACT_FLOAT16, "float16", quick ? 1 : 5);
    bad |= s_low_matmul(TACT_BFLOAT16, "bfloat16", quick ? 1 : 5);
    if (dl) dlclose(dl);
    return bad;
}
