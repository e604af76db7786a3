/* test_cuda.c - the CUDA device without a GPU: every kernel of the op suite through the CUDA printer, NVRTC and ptxas; a missing driver is a clear error. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ast.h"
#include "lower.h"
#include "mem.h"
#include "mpread.h"
#include "nvrtc.h"
#include "printer.h"
#include "render.h"
#include "tact.h"
#include "testutil.h"

/* NVRTC and ptxas come from the set-up step (harness/cuda-tools.sh), whose
 * folder CMake passes as TACT_CUDA_TOOLS. */
static const char *s_tools(void) {
    const char *t = getenv("TACT_CUDA_TOOLS");
    cr_assert(t && *t, "TACT_CUDA_TOOLS is not set: run the tests through ctest (make test fetches NVRTC and ptxas)");
    return t;
}

static void s_use_nvrtc(void) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/lib/libnvrtc.so.13", s_tools());
    cr_assert(access(path, R_OK) == 0, "%s is missing: run harness/cuda-tools.sh (make test does)", path);
    setenv("TACT_NVRTC", path, 1);
}

/* Some kernels of every kind, run on the CPU with their ASTs dumped to dir
 * (used when no op-suite run left its ASTs: the sanitized build). */
static void s_make_asts(const char *dir) {
    setenv("TACT_TEST_DUMP_ASTS", dir, 1);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK, "%s", tact_last_open_error());
    int64_t s[2] = {64, 1100};
    tact_tensor *x = tact_rand(ctx, TACT_FLOAT32, 2, s), *h = tact_cast(x, TACT_FLOAT16), *b = tact_cast(x, TACT_BFLOAT16);
    tact_tensor *w = tact_rand(ctx, TACT_FLOAT32, 2, (int64_t[]){1100, 32});
    tact_tensor *outs[] = {
        tact_sum_all(x),
        tact_softmax(x, -1),
        tact_matmul(x, w),
        tact_max_axis(x, 0),
        tact_cast(tact_add(h, h), TACT_FLOAT32),
        tact_cast(tact_mul(b, b), TACT_FLOAT32),
        tact_exp2(tact_sin(tact_sqrt(x))),
        tact_argmax(x, 1, 0),
        tact_cast(tact_idiv(tact_cast(x, TACT_INT64), tact_scalar(ctx, 3)), TACT_FLOAT32),
        tact_log_softmax(tact_permute(x, (int[]){1, 0}), 0),
    };
    int n = (int)(sizeof outs / sizeof *outs);
    cr_assert_eq(tact_realize(ctx, n, outs), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    unsetenv("TACT_TEST_DUMP_ASTS");
}

static int s_is_ast(const struct dirent *e) {
    size_t n = strlen(e->d_name);
    return n > 4 && strcmp(e->d_name + n - 4, ".ast") == 0;
}

static char *s_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    cr_assert(p && fread(p, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
    fclose(f);
    p[n] = '\0';
    *len = (size_t)n;
    return p;
}

/* Runs ptxas on the PTX text for sm_ARCH; returns its exit status, its
 * output in log. */
static int s_ptxas(const char *ptx, size_t len, int arch, const char *tmpdir, char *log, size_t loglen) {
    char in[4096], out[4096], cmd[16384];
    snprintf(in, sizeof in, "%s/k.ptx", tmpdir);
    snprintf(out, sizeof out, "%s/ptxas.txt", tmpdir);
    FILE *f = fopen(in, "wb");
    cr_assert(f && fwrite(ptx, 1, len, f) == len && fclose(f) == 0);
    snprintf(cmd, sizeof cmd, "'%s/bin/ptxas' -arch=sm_%d '%s' -o /dev/null > '%s' 2>&1", s_tools(), arch, in, out);
    int st = system(cmd);
    size_t n;
    char *text = s_read(out, &n);
    snprintf(log, loglen, "%s", text);
    free(text);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A batch of rendered kernels as one program: the prelude, then each. */
static char *s_program(char **srcs, int n) {
    size_t len = strlen(ta_printer_cuda.prelude) + 1;
    for (int i = 0; i < n; i++) len += strlen(srcs[i]);
    char *p = malloc(len);
    strcpy(p, ta_printer_cuda.prelude);
    for (int i = 0; i < n; i++) strcat(p, srcs[i]);
    return p;
}

/* Every kernel the op suite made (the ASTs its compilers dumped into
 * TACT_TEST_AST_DIR, else a few made here), rendered by the CUDA printer
 * (every other one in strict mode),
 * compiled to PTX by NVRTC for compute_80 and compute_90 and assembled by
 * ptxas for sm_80 and sm_90, 48 kernels a program (a failing program is
 * compiled kernel by kernel, to name the kernel). */
Test(cuda, op_suite_kernels_to_ptx) {
    s_use_nvrtc();
    char tmpdir[] = "/tmp/tact-cuda-XXXXXX";
    cr_assert(mkdtemp(tmpdir));
    const char *dir = getenv("TACT_TEST_AST_DIR");
    char own[4200];
    if (!dir || !*dir) {
        snprintf(own, sizeof own, "%s/asts", tmpdir);
        cr_assert_eq(mkdir(own, 0700), 0);
        s_make_asts(own);
        dir = own;
    }
    struct dirent **names;
    int nfiles = scandir(dir, &names, s_is_ast, alphasort);
    cr_assert(nfiles > 0, "no kernel ASTs in %s (the op suite's runs dump them there: TACT_TEST_DUMP_ASTS)", dir);
    enum { BATCH = 48 };
    char *srcs[BATCH], kname[BATCH][80];
    int n = 0, done = 0, archs[2] = {80, 90};
    ta_ast_t *a = ta_calloc(1, sizeof *a);
    for (int f = 0; f <= nfiles; f++) {
        if (f < nfiles) {
            char path[8192];
            size_t len;
            snprintf(path, sizeof path, "%s/%s", dir, names[f]->d_name);
            char *bytes = s_read(path, &len);
            ta_mpr_t r;
            ta_mpr_init(&r, bytes, len);
            ta_error_t err = {0, ""};
            cr_assert_eq(ta_ast_unpack(a, &r, &err), TACT_OK, "%s: %s", names[f]->d_name, err.text);
            free(bytes);
            /* Every other kernel as strict mode renders it (tact's own
             * log2 and sin; one of float64's that mode refuses as is). */
            ta_target_t t = ta_target_cuda();
            t.exact_math = f & 1;
            char name[64];
            int64_t align;
            char *src;
            if (t.exact_math && ta_render_c_for(a, &t, &src, name, sizeof name, &align, NULL, &err) == TACT_OK) ta_free(src);
            else t.exact_math = 0;
            cr_assert_eq(ta_render_c_for(a, &t, &src, name, sizeof name, &align, NULL, &err), TACT_OK, "%s: %s", names[f]->d_name, err.text);
            /* Its own name in the batch: " void NAME(" becomes " void kI(". */
            char old[96];
            snprintf(old, sizeof old, " void %s(", name);
            char *at = strstr(src, old);
            cr_assert(at, "kernel %s: no ' void %s(' in its source", name, name);
            snprintf(kname[n], sizeof kname[n], "k%d_%s", f, name);
            size_t len2 = strlen(src) + strlen(kname[n]) + 8;
            char *renamed = malloc(len2);
            snprintf(renamed, len2, "%.*s void %s(%s", (int)(at - src), src, kname[n], at + strlen(old));
            ta_free(src);
            srcs[n++] = renamed;
            free(names[f]);
        }
        if (n == 0 || (n < BATCH && f < nfiles)) continue;
        for (int ai = 0; ai < 2; ai++) {
            char *prog = s_program(srcs, n);
            uint8_t *ptx;
            size_t plen;
            ta_error_t err = {0, ""};
            int rc = ta_nvrtc_compile(prog, "op_suite.cu", archs[ai], 0, &ptx, &plen, &err);
            free(prog);
            char log[4096] = "";
            if (rc == TACT_OK && s_ptxas((char *)ptx, plen, archs[ai], tmpdir, log, sizeof log) == 0) {
                ta_free(ptx);
                continue;
            }
            ta_free(ptx);
            /* Which kernel: each alone. */
            for (int k = 0; k < n; k++) {
                char *one = s_program(&srcs[k], 1);
                rc = ta_nvrtc_compile(one, kname[k], archs[ai], 0, &ptx, &plen, &err);
                cr_assert_eq(rc, TACT_OK, "NVRTC refused kernel %s for compute_%d: %s\n--- its source:\n%s", kname[k], archs[ai], err.text, srcs[k]);
                int st = s_ptxas((char *)ptx, plen, archs[ai], tmpdir, log, sizeof log);
                ta_free(ptx);
                free(one);
                cr_assert_eq(st, 0, "ptxas refused kernel %s for sm_%d: %s\n--- its source:\n%s", kname[k], archs[ai], log, srcs[k]);
            }
            cr_assert_fail("a program of %d kernels failed for %d, each alone passed: %s", n, archs[ai], err.text);
        }
        for (int k = 0; k < n; k++) free(srcs[k]);
        done += n;
        n = 0;
    }
    free(names);
    ta_free(a);
    int major = 0, minor = 0;
    ta_nvrtc_version(&major, &minor, NULL);
    printf("%d kernels compiled to PTX (NVRTC %d.%d) and assembled by ptxas for sm_80 and sm_90\n", done, major, minor);
    fflush(stdout);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

/* A kernel that does not compile: ECOMPILE naming it, with NVRTC's log. */
Test(cuda, compile_error_names_the_kernel) {
    s_use_nvrtc();
    uint8_t *out;
    size_t len;
    ta_error_t err = {0, ""};
    const char *src = "extern \"C\" __global__ void broken(float *d) { d[0] = undefined_name; }\n";
    cr_assert_eq(ta_nvrtc_compile(src, "broken_kernel", 90, 1, &out, &len, &err), TACT_ECOMPILE, "%s", err.text);
    cr_assert(strstr(err.text, "broken_kernel") && strstr(err.text, "undefined_name"), "%s", err.text);
    cr_assert_null(out);
    /* A cubin for a real architecture does come back. */
    cr_assert_eq(ta_nvrtc_compile("extern \"C\" __global__ void ok(float *d) { d[threadIdx.x] = 1.0f; }\n", "ok", 90, 1, &out, &len, &err), TACT_OK,
                 "%s", err.text);
    cr_assert(len > 16 && memcmp(out, "\177ELF", 4) == 0, "a cubin is an ELF file");
    ta_free(out);
    /* An architecture that does not exist is the device's fault. */
    cr_assert_eq(ta_nvrtc_compile("extern \"C\" __global__ void ok(float *d) { }\n", "ok", 11, 1, &out, &len, &err), TACT_EDEVICE, "%s", err.text);
}

/* No libcuda.so.1 here: CUDA devices fail at once, naming the cause. */
Test(cuda, no_driver_is_a_clear_error) {
    /* tact devices lists none. */
    tact_device_info info[64];
    int nd = tact_devices(info, 64);
    for (int i = 0; i < nd && i < 64; i++) cr_assert(strncmp(info[i].name, "CUDA", 4) != 0, "%s listed", info[i].name);
    setenv("TACT_DEVICE", "CUDA", 1);
    tact_ctx *ctx = NULL;
    cr_assert_neq(tact_ctx_open(&ctx, NULL), TACT_OK);
    cr_assert(strstr(tact_last_open_error(), "no CUDA driver (libcuda.so.1 not found)"), "%s", tact_last_open_error());
    unsetenv("TACT_DEVICE");
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK, "%s", tact_last_open_error());
    tact_tensor *x = tact_to(tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){4}), "CUDA:0");
    cr_assert_neq(tact_status_of(x), TACT_OK);
    cr_assert(strstr(tact_error_message(x), "no CUDA driver"), "%s", tact_error_message(x));
    tact_ctx_close(&ctx);
}

/* ------------------------------------------------ on a GPU (skipped here) */

/* The device these tests run on: CUDA, or TACT_TEST_GPU (CL, to check the
 * tests themselves where there is no GPU). */
static const char *s_gpu(void) {
    const char *g = getenv("TACT_TEST_GPU");
    return g && *g ? g : "CUDA";
}

/* A context on devices, or a skip naming why there is no GPU. */
static tact_ctx *s_gpu_ctx(const char *devices) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    tact_ctx *ctx = NULL;
    if (tact_ctx_open(&ctx, &o) != TACT_OK) {
        const char *why = tact_last_open_error();
        if (strstr(why, "no CUDA driver") || strstr(why, "sees no GPU")) cr_skip_test("no GPU here: %s", why);
        cr_assert_fail("%s: %s", devices, why);
    }
    return ctx;
}

static float *s_random(size_t n, uint64_t *rng) {
    float *p = malloc(sizeof *p * n);
    for (size_t i = 0; i < n; i++) p[i] = (float)((double)(tu_rand(rng) >> 11) / 9007199254740992.0 - 0.5);
    return p;
}

/* got (m x n) against a @ b (m x k, k x n) in double precision, within 1e-4. */
static void s_check_matmul(const float *got, const float *a, const float *b, int m, int k, int n, uint64_t seed) {
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++) {
            double want = 0;
            for (int i = 0; i < k; i++) want += (double)a[r * k + i] * b[i * n + c];
            cr_assert(fabs(got[r * n + c] - want) <= 1e-4, "matmul[%d,%d]: %g, want %g (seed %llu)", r, c, got[r * n + c], want, (unsigned long long)seed);
        }
}

/* Elementwise, a long reduce (a block of 64 threads sharing it), a matmul
 * and float16 on the GPU against double-precision loops. */
Test(cuda, gpu_ops_match_double_loops) {
    tact_ctx *ctx = s_gpu_ctx(s_gpu());
    uint64_t seed = tu_seed(), rng = seed;
    enum { M = 67, K = 1300, N = 45 };
    float *a = s_random(M * K, &rng), *b = s_random(K * N, &rng), *c = s_random(M * K, &rng);
    tact_tensor *ta = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){M, K}, a);
    tact_tensor *tb = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){K, N}, b);
    tact_tensor *tc = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){M, K}, c);
    tact_tensor *fma = tact_add(tact_mul(ta, tc), tact_sqrt(tact_mul(tc, tc)));
    tact_tensor *rows = tact_sum_axis(ta, 1), *mm = tact_matmul(ta, tb);
    tact_tensor *half = tact_cast(tact_add(tact_cast(ta, TACT_FLOAT16), tact_cast(tc, TACT_FLOAT16)), TACT_FLOAT32);
    float *got = malloc(sizeof *got * M * K), grows[M], gmm[M * N];
    cr_assert_eq(tact_read(fma, got, sizeof *got * M * K), TACT_OK, "%s (seed %llu)", tact_error_message(fma), (unsigned long long)seed);
    for (int i = 0; i < M * K; i++) {
        double want = (double)a[i] * c[i] + fabs((double)c[i]);
        cr_assert(fabs(got[i] - want) <= 1e-6 + 1e-6 * fabs(want), "x*z+sqrt(z*z)[%d]: %g, want %g (seed %llu)", i, got[i], want, (unsigned long long)seed);
    }
    cr_assert_eq(tact_read(rows, grows, sizeof grows), TACT_OK, "%s", tact_error_message(rows));
    for (int r = 0; r < M; r++) {
        double want = 0;
        for (int k = 0; k < K; k++) want += a[r * K + k];
        cr_assert(fabs(grows[r] - want) <= 1e-4, "row sum %d: %g, want %g (seed %llu)", r, grows[r], want, (unsigned long long)seed);
    }
    cr_assert_eq(tact_read(mm, gmm, sizeof gmm), TACT_OK, "%s", tact_error_message(mm));
    s_check_matmul(gmm, a, b, M, K, N, seed);
    cr_assert_eq(tact_read(half, got, sizeof *got * M * K), TACT_OK, "%s", tact_error_message(half));
    for (int i = 0; i < M * K; i++) /* three roundings to float16: within 2 ulp of 1/2 (2^-10) */
        cr_assert(fabs(got[i] - ((double)a[i] + c[i])) <= 2e-3, "float16 sum[%d]: %g (seed %llu)", i, got[i], (unsigned long long)seed);
    /* The same program again: the same bits (no atomics, a fixed order). */
    float again[M * N];
    cr_assert_eq(tact_read(tact_matmul(ta, tb), again, sizeof again), TACT_OK);
    cr_assert(memcmp(again, gmm, sizeof again) == 0, "a second matmul differs in its bits");
    free(a), free(b), free(c), free(got);
    tact_ctx_close(&ctx);
}

/* A matmul whose rows are split over the GPU and the CPU, B on both. */
Test(cuda, gpu_sharded_matmul_over_cuda_and_cpu) {
    char devices[64];
    snprintf(devices, sizeof devices, "%s,CPU", s_gpu());
    tact_ctx *ctx = s_gpu_ctx(devices);
    uint64_t seed = tu_seed(), rng = seed;
    enum { M = 96, K = 70, N = 33 };
    float *a = s_random(M * K, &rng), *b = s_random(K * N, &rng), got[M * N];
    tact_tensor *ta = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){M, K}, a), devices, 0);
    tact_tensor *tb = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){K, N}, b), devices, TACT_REPLICATE);
    tact_tensor *mm = tact_matmul(ta, tb);
    cr_assert_eq(tact_read(mm, got, sizeof got), TACT_OK, "%s", tact_error_message(mm));
    s_check_matmul(got, a, b, M, K, N, seed);
    free(a), free(b);
    tact_ctx_close(&ctx);
}
