/* test_cc.c - the kernel cache on disk: damaged or planted objects are never loaded, unsafe folders are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

/* A fresh private cache folder, set as TACT_CACHE_DIR; free() it. */
static char *s_cache(void) {
    char *dir = tu_tmpfile("kcache-cc");
    unlink(dir);
    setenv("TACT_CACHE_DIR", dir, 1);
    return dir;
}

/* sqrt of 2.0 over 100 elements in a new context: checks every value. */
static void s_run(void) {
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK, "%s", tact_last_open_error());
    int64_t shape[1] = {100};
    float out[100];
    cr_assert_eq(tact_read(tact_sqrt(tact_full(ctx, TACT_FLOAT32, 1, shape, 2.0)), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 100; i++) cr_assert_eq(out[i], sqrtf(2.0f), "element %d", i);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* The one object in dir (its path into so). */
static void s_object(const char *dir, char *so, size_t len) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls %s/*.so", dir);
    FILE *p = popen(cmd, "r");
    cr_assert(p && fgets(so, (int)len, p), "no object in %s", dir);
    pclose(p);
    so[strcspn(so, "\n")] = '\0';
}

static uint8_t *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*len);
    cr_assert_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void s_spit(const char *path, const uint8_t *b, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(b, 1, len, f) == len);
    fclose(f);
}

/* Truncated and bit-flipped cached objects (100 seeded mutations) never
 * crash the host and never change a result: their digest does not match,
 * so they are rebuilt and replaced. */
Test(codegen_cc, damaged_cached_objects_are_rebuilt_never_loaded) {
    uint64_t seed = tu_seed(), rng = seed;
    char *dir = s_cache(), so[1100];
    s_run();
    s_object(dir, so, sizeof so);
    size_t len;
    uint8_t *good = s_slurp(so, &len), *bad = malloc(len);
    for (int rep = 0; rep < 100; rep++) {
        memcpy(bad, good, len);
        size_t n = len;
        uint64_t r = tu_rand(&rng);
        if (r % 3 == 0) n = (size_t)(tu_rand(&rng) % len); /* cut */
        else
            for (int k = 0; k < 1 + (int)(r % 4); k++) bad[tu_rand(&rng) % len] ^= (uint8_t)(1 + tu_rand(&rng) % 255);
        s_spit(so, bad, n);
        s_run();
        size_t now;
        uint8_t *back = s_slurp(so, &now);
        cr_assert(now == len && memcmp(back, good, len) == 0, "seed %#llx, mutation %d: the object was not rebuilt",
                  (unsigned long long)seed, rep);
        free(back);
    }
    free(good);
    free(bad);
    unsetenv("TACT_CACHE_DIR");
    free(dir);
}

/* An object put in place of a kernel, without the digest of what it is or
 * with a forged one, is not loaded. */
Test(codegen_cc, a_planted_object_is_not_loaded) {
    char *dir = s_cache(), so[1100], sum[1200];
    s_run();
    s_object(dir, so, sizeof so);
    snprintf(sum, sizeof sum, "%.*s.sum", (int)(strlen(so) - 3), so);
    /* A valid shared object of another kernel: its function writes 42. */
    char src[1300], cmd[4000];
    snprintf(src, sizeof src, "%s/planted.c", dir);
    FILE *f = fopen(src, "w");
    char name[256];
    const char *base = strrchr(so, '/') + 1;
    snprintf(name, sizeof name, "%.*s", (int)(strchr(base, '-') - base), base);
    fprintf(f, "#include <stdint.h>\nvoid %s(int64_t s, int64_t e, void **b) { float *o = b[0]; for (int64_t i = s; i < e; i++) o[i] = 42; }\n", name);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", so, src);
    cr_assert_eq(system(cmd), 0);
    unlink(sum);
    s_run(); /* no digest: rebuilt */
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s' && echo 00000000000000000000000000000000 > '%s'", so, src, sum);
    cr_assert_eq(system(cmd), 0);
    s_run(); /* a digest that is not the object's: rebuilt */
    unsetenv("TACT_CACHE_DIR");
    free(dir);
}

/* A cache folder others can write to, or another user's, is refused when
 * the context opens, with its name in the error. */
Test(codegen_cc, unsafe_cache_folders_are_refused) {
    char *dir = s_cache();
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_EIO);
    cr_assert_null(ctx);
    cr_assert(strstr(tact_last_open_error(), dir) && strstr(tact_last_open_error(), "can be written by other users"), "%s",
              tact_last_open_error());
    cr_assert_eq(chmod(dir, 0700), 0);
    if (geteuid() == 0) {
        cr_assert_eq(chown(dir, 65534, 65534), 0);
        cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_EIO);
        cr_assert(strstr(tact_last_open_error(), "belongs to user 65534"), "%s", tact_last_open_error());
        cr_assert_eq(chown(dir, 0, 0), 0);
    }
    s_run(); /* a private folder works */
    unsetenv("TACT_CACHE_DIR");
    free(dir);
}

/* A compiler that succeeds without writing its output is named as such. */
Test(codegen_cc, a_compiler_that_writes_nothing_is_named) {
    char *dir = s_cache();
    setenv("TACT_CC", "true", 1);
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK, "%s", tact_last_open_error());
    unsetenv("TACT_CC");
    int64_t shape[1] = {3};
    float out[3];
    int rc = tact_read(tact_sqrt(tact_full(ctx, TACT_FLOAT32, 1, shape, 2.0)), out, sizeof out);
    cr_assert_eq(rc, TACT_ECOMPILE, "got %s: %s", tact_status_name(rc), tact_ctx_error(ctx));
    cr_assert(strstr(tact_ctx_error(ctx), "exited 0 but wrote no object"), "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    unsetenv("TACT_CACHE_DIR");
    free(dir);
}
