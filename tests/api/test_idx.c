/* test_idx.c - tact_load_idx: IDX files written here (gzipped and plain) read back with their shapes, types and
 * values; every kind of broken file an error naming the path and the cause; Fashion-MNIST's real files when
 * installed (make's set-up installs them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

/* Writes bytes to path, gzipped or plain. */
static void s_write(const char *path, const void *bytes, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert(f != NULL);
        if (n) cr_assert_eq(gzwrite(f, bytes, (unsigned)n), (int)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert(f != NULL);
        if (n) cr_assert_eq(fwrite(bytes, 1, n, f), n);
        fclose(f);
    }
}

Test(api_idx, files_read_back_with_shapes_types_and_values) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    char *path = tu_tmpfile("idx");
    /* uint8 images 2 x 2 x 3, gzipped */
    uint8_t u8[4 + 12 + 12] = {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
    for (int i = 0; i < 12; i++) u8[16 + i] = (uint8_t)(i * 20);
    s_write(path, u8, sizeof u8, 1);
    tact_tensor *t = tact_load_idx(ctx, path);
    cr_assert_eq(tact_status_of(t), TACT_OK, "%s", tact_error_message(t));
    cr_assert(tact_dtype_of(t) == TACT_UINT8 && tact_ndim(t) == 3 && tact_dim(t, 0) == 2 && tact_dim(t, 1) == 2 && tact_dim(t, 2) == 3);
    uint8_t got[12];
    cr_assert_eq(tact_read(t, got, sizeof got), TACT_OK);
    cr_assert(memcmp(got, u8 + 16, 12) == 0);
    /* big-endian int32 and float32, plain files */
    uint8_t i32[4 + 4 + 8] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0xFF, 0xFF, 0xFF, 0xFE, 0, 1, 0, 0};
    s_write(path, i32, sizeof i32, 0);
    int32_t iv[2];
    t = tact_load_idx(ctx, path);
    cr_assert_eq(tact_dtype_of(t), TACT_INT32);
    cr_assert_eq(tact_read(t, iv, sizeof iv), TACT_OK, "%s", tact_error_message(t));
    cr_assert(iv[0] == -2 && iv[1] == 65536, "%d %d", iv[0], iv[1]);
    uint8_t f32[4 + 4 + 4] = {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0, 0}; /* 1.5 */
    s_write(path, f32, sizeof f32, 1);
    float fv;
    cr_assert_eq(tact_read(tact_load_idx(ctx, path), &fv, sizeof fv), TACT_OK);
    cr_assert_eq(fv, 1.5f);
    unlink(path);
    free(path);
    tact_ctx_close(&ctx);
}

Test(api_idx, broken_files_are_errors_naming_path_and_cause) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    char *path = tu_tmpfile("idx");
    static const struct {
        uint8_t bytes[24];
        size_t n;
        int gz;
        const char *why;
    } cases[] = {
        {{0}, 0, 0, "shorter than an IDX header"},
        {{1, 0, 0x08, 1, 0, 0, 0, 1, 7}, 9, 1, "not an IDX file"},
        {{0, 0, 0x07, 1, 0, 0, 0, 1, 7}, 9, 1, "not an IDX file"},
        {{0, 0, 0x08, 0}, 4, 1, "not an IDX file"},
        {{0, 0, 0x08, 2, 0, 0, 0, 1}, 8, 1, "in its 2 dims"},
        {{0, 0, 0x08, 1, 0, 0, 0, 5, 1, 2, 3}, 11, 1, "the header promises 5 bytes"},
        {{0, 0, 0x08, 1, 0, 0, 0, 2, 1, 2, 3}, 11, 0, "data past the 2 bytes"},
        {{0, 0, 0x0E, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 2}, 16, 1, "more than 1073741824 bytes"},
        {{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6}, 20, 0, "load_idx"}, /* corrupt gzip */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        s_write(path, cases[c].bytes, cases[c].n, cases[c].gz);
        tact_tensor *t = tact_load_idx(ctx, path);
        cr_assert_eq(tact_status_of(t), TACT_EINVAL, "case %zu: %s", c, tact_error_message(t));
        cr_assert(strstr(tact_error_message(t), path) && strstr(tact_error_message(t), cases[c].why), "case %zu: %s", c, tact_error_message(t));
    }
    unlink(path);
    tact_tensor *t = tact_load_idx(ctx, path);
    cr_assert(strstr(tact_error_message(t), "cannot open") && strstr(tact_error_message(t), path), "%s", tact_error_message(t));
    cr_assert_eq(tact_status_of(tact_load_idx(ctx, NULL)), TACT_EINVAL);
    free(path);
    tact_ctx_close(&ctx);
}

/* The real training labels: 60000 of them, every class 6000 times. */
Test(api_idx, fashion_mnist_labels_when_installed) {
    const char *path = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";
    if (access(path, R_OK) != 0) cr_skip_test("%s is not installed", path);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *t = tact_load_idx(ctx, path);
    cr_assert_eq(tact_status_of(t), TACT_OK, "%s", tact_error_message(t));
    cr_assert(tact_ndim(t) == 1 && tact_dim(t, 0) == 60000);
    static uint8_t y[60000];
    cr_assert_eq(tact_read(t, y, sizeof y), TACT_OK);
    int count[10] = {0};
    for (int i = 0; i < 60000; i++) {
        cr_assert_lt(y[i], 10);
        count[y[i]]++;
    }
    for (int k = 0; k < 10; k++) cr_assert_eq(count[k], 6000, "class %d: %d", k, count[k]);
    tact_ctx_close(&ctx);
}
