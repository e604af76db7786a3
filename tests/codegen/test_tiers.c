/* test_tiers.c - a CPU kernel's quick build serves its first realize, the full build every later one, with the same bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cc.h"
#include "tact.h"
#include "testutil.h"

/* A context whose compiler logs the optimization level of every build
 * that succeeded into dir/levels (one line each: -Og or -O3), with a fresh
 * cache.  A full (-O3) build takes 0.3 s more: a realize that returns with
 * all of them logged waited for them. */
static tact_ctx *s_open_with(const char *dir, int threads, const char *extra) {
    tu_fake_cc(dir,
               "[ \"$1\" = --version ] && exec cc \"$@\"\n"
               "level=\n"
               "for a; do case \"$a\" in -O*) level=$a;; esac; done\n"
               "%s\n"
               "[ \"$level\" = -O3 ] && sleep 0.3\n"
               "cc \"$@\" || exit 1\n"
               "echo $level >> %s/levels\n",
               extra, dir);
    tact_options o;
    tact_options_default(&o);
    o.cpu_threads = threads;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "open: %s", tact_last_open_error());
    unsetenv("TACT_CC");
    unsetenv("TACT_CACHE_DIR");
    return ctx;
}

static tact_ctx *s_open(const char *dir, int threads) { return s_open_with(dir, threads, ""); }

/* How many builds at level ("-Og" or "-O3") the log holds. */
static int s_builds(const char *dir, const char *level) {
    char path[1200], line[64];
    snprintf(path, sizeof path, "%s/levels", dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strncmp(line, level, strlen(level)) == 0;
    if (f) fclose(f);
    return n;
}

static char *s_dir(const char *tag) {
    char *dir = tu_tmpfile(tag);
    unlink(dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    return dir;
}

enum { N = 37, K = 61, M = 45 };

/* Kernels of every kind the quick build could compute otherwise: vector
 * math with the helpers (exp2, log2, sin, sqrt, fma in a matmul), reduces,
 * a float16 round trip, comparisons, halved reads (a 2x upsampling); their
 * outputs into out (N*M + 4*N*K + N*64). */
static void s_program(tact_ctx *ctx, const float *x, const float *w, float *out) {
    tact_scope_begin(ctx);
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, K}, x);
    tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){K, M}, w);
    tact_tensor *t[6] = {
        tact_matmul(a, b),
        tact_add(tact_mul(tact_exp2(a), tact_log2(tact_add(tact_abs(a), tact_scalar(ctx, 1.0)))), tact_sin(a)),
        tact_div(tact_sqrt(tact_abs(a)), tact_add(tact_sum(a, 1, (int[]){1}, 1), tact_scalar(ctx, 100.0))),
        tact_cast(tact_cast(tact_mul(a, tact_max(a, 1, (int[]){1}, 1)), TACT_FLOAT16), TACT_FLOAT32),
        tact_where(tact_gt(a, tact_scalar(ctx, 0.25)), tact_softmax(a, 1), tact_neg(a)),
        tact_mul(tact_repeat_interleave(tact_shrink(a, (const int64_t[][2]){{0, N}, {0, 32}}), 2, 1), tact_scalar(ctx, 1.5)),
    };
    size_t at = 0;
    for (int i = 0; i < 6; i++) {
        size_t n = i == 0 ? N * M : i == 5 ? N * 64 : N * K;
        cr_assert_eq(tact_read(t[i], out + at, n * sizeof *out), TACT_OK, "output %d: %s", i, tact_ctx_error(ctx));
        at += n;
    }
    tact_scope_end(ctx);
}

/* The program's inputs (seeded) and room for two sets of its outputs. */
enum { S_TOTAL = N * M + 4 * N * K + N * 64 };
typedef struct {
    float *x, *w, *first, *later;
} s_data_t;

static s_data_t s_data(uint64_t seed) {
    uint64_t rng = seed;
    s_data_t d = {malloc(sizeof(float) * N * K), malloc(sizeof(float) * K * M), malloc(sizeof(float) * S_TOTAL), malloc(sizeof(float) * S_TOTAL)};
    cr_assert(d.x && d.w && d.first && d.later);
    for (int i = 0; i < N * K; i++) d.x[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 4 - 2);
    for (int i = 0; i < K * M; i++) d.w[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
    return d;
}

static void s_data_free(s_data_t *d) { free(d->x), free(d->w), free(d->first), free(d->later); }

/* Runs the program twice in a fresh context in dir whose compiler runs
 * extra first: the first realize builds quick, the second takes a full
 * build for every quick one (waiting for them) and gives the same bits.
 * Returns the open context; *quick gets the number of quick builds. */
static tact_ctx *s_twice(const char *dir, const char *extra, s_data_t *d, uint64_t seed, int *quick) {
    tact_ctx *ctx = s_open_with(dir, 2, extra);
    s_program(ctx, d->x, d->w, d->first);
    *quick = s_builds(dir, "-Og");
    cr_assert_gt(*quick, 0, "the first realize built nothing quick");
    /* The full builds may have started in the background (when is a matter
     * of timing); the same kernels again wait for them all (one per file
     * the quick builds made) and use them. */
    cr_assert_leq(s_builds(dir, "-O3"), *quick);
    s_program(ctx, d->x, d->w, d->later);
    cr_assert_eq(s_builds(dir, "-O3"), *quick, "%d full builds for %d quick ones", s_builds(dir, "-O3"), *quick);
    cr_assert_eq(s_builds(dir, "-Og"), *quick, "the second realize built quick again");
    for (size_t i = 0; i < S_TOTAL; i++)
        cr_assert_eq(memcmp(&d->first[i], &d->later[i], sizeof *d->first), 0, "value %zu: %a quick, %a full (seed %llu)", i,
                     (double)d->first[i], (double)d->later[i], (unsigned long long)seed);
    return ctx;
}

static void s_remove(char *dir) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

Test(codegen_tiers, the_full_build_replaces_the_quick_one_with_the_same_bits) {
    uint64_t seed = tu_seed();
    s_data_t d = s_data(seed);
    float *x = d.x, *w = d.w, *first = d.first, *later = d.later;
    char *dir = s_dir("tiers");
    int quick;
    tact_ctx *ctx = s_twice(dir, "", &d, seed, &quick);
    /* And the values are right: the matmul against a double loop. */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) {
            double want = 0;
            for (int k = 0; k < K; k++) want += (double)x[i * K + k] * w[k * M + j];
            cr_assert(fabs(first[i * M + j] - want) <= 1e-5 * K, "matmul (%d, %d): %g, want %g (seed %llu)", i, j, (double)first[i * M + j],
                      want, (unsigned long long)seed);
        }
    /* A third realize compiles nothing. */
    s_program(ctx, x, w, later);
    cr_assert_eq(s_builds(dir, "-Og") + s_builds(dir, "-O3"), 2 * quick);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    /* A new context finds both builds in the cache: nothing compiles, and
     * the first realize is quick again, the same bits as ever. */
    ctx = s_open(dir, 1);
    s_program(ctx, x, w, later);
    s_program(ctx, x, w, later);
    cr_assert_eq(s_builds(dir, "-Og") + s_builds(dir, "-O3"), 2 * quick, "the cached builds were compiled again");
    for (size_t i = 0; i < S_TOTAL; i++) cr_assert_eq(memcmp(&first[i], &later[i], sizeof *first), 0, "value %zu in a new context", i);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    s_remove(dir);
    s_data_free(&d);
}

/* A kernel of TA_CC_QUICK_MAX_WORK iterations or more would lose more time
 * running its quick build than its full build takes: it is built full at
 * once.  A matmul of exactly that many multiply-adds. */
Test(codegen_tiers, a_kernel_of_much_work_is_built_full_at_once) {
    enum { R = 512, P = 512 };
    const int C = (int)(TA_CC_QUICK_MAX_WORK / (R * P));
    cr_assert_eq((uint64_t)R * P * C, TA_CC_QUICK_MAX_WORK);
    float *x = malloc(sizeof *x * R * C), *w = malloc(sizeof *w * C * P), *out = malloc(sizeof *out * R * P);
    cr_assert(x && w && out);
    for (int i = 0; i < R * C; i++) x[i] = (float)(i % 7) - 3;
    for (int i = 0; i < C * P; i++) w[i] = (float)(i % 5) - 2;
    char *dir = s_dir("tiers-big");
    tact_ctx *ctx = s_open(dir, 0);
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C}, x);
    tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){C, P}, w);
    cr_assert_eq(tact_read(tact_matmul(a, b), out, sizeof *out * R * P), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(s_builds(dir, "-Og"), 0, "the big matmul was built quick");
    cr_assert_eq(s_builds(dir, "-O3"), 1);
    /* Small integers: every sum is exact. */
    for (int i = 0; i < R; i += 37)
        for (int j = 0; j < P; j += 29) {
            double want = 0;
            for (int k = 0; k < C; k++) want += (double)x[i * C + k] * w[k * P + j];
            cr_assert_eq(out[i * P + j], (float)want, "(%d, %d)", i, j);
        }
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    s_remove(dir);
    free(x), free(w), free(out);
}

/* A full build that fails in the background (here: every build at the
 * lowest priority) is built again by the realize that needs it, at normal
 * priority: the answer is the same as when nothing failed. */
Test(codegen_tiers, a_failed_background_build_is_built_again_when_needed) {
    uint64_t seed = tu_seed();
    s_data_t d = s_data(seed);
    char *dir = s_dir("tiers-fail");
    int quick;
    char refuse[1400];
    snprintf(refuse, sizeof refuse, "[ \"$(nice)\" = 19 ] && { echo x >> %s/refused; echo refused in the background; exit 1; }", dir);
    tact_ctx *ctx = s_twice(dir, refuse, &d, seed, &quick);
    /* The background builds did run (niced), and were refused. */
    char path[1300];
    snprintf(path, sizeof path, "%s/refused", dir);
    cr_assert(access(path, F_OK) == 0, "no build ran at the lowest priority");
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    s_remove(dir);
    s_data_free(&d);
}
