/* test_safetensors.c - model files: the golden file the Python safetensors package wrote (gen_safetensors_golden.py)
 * read value by value; tact's own files read back (and, kept with TACT_KEEP_SAFETENSORS, read by the Python
 * package); hostile files refused with the path and the cause. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

static char *s_golden(void) {
    static char path[4096];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "golden.safetensors");
    return path;
}

/* The tensors of gen_safetensors_golden.py, checked (load) or made (save). */
static const float s_weight[6] = {-1, -0.5f, 0, 0.5f, 1, 1.5f}, s_bias[3] = {1.25f, -2.5f, 3.0f};

static void s_check_all(tact_ctx *ctx, const char *path) {
    float w[6], b[3];
    int64_t step;
    uint8_t mask[4], bytes[5];
    uint16_t half[4];
    int16_t q;
    tact_tensor *t = tact_load_safetensors(ctx, path, "weight");
    cr_assert_eq(tact_status_of(t), TACT_OK, "%s", tact_error_message(t));
    cr_assert(tact_dtype_of(t) == TACT_FLOAT32 && tact_ndim(t) == 2 && tact_dim(t, 0) == 2 && tact_dim(t, 1) == 3);
    cr_assert_eq(tact_read(t, w, sizeof w), TACT_OK);
    cr_assert(memcmp(w, s_weight, sizeof w) == 0);
    cr_assert_eq(tact_read(tact_load_safetensors(ctx, path, "bias"), b, sizeof b), TACT_OK);
    cr_assert(memcmp(b, s_bias, sizeof b) == 0);
    t = tact_load_safetensors(ctx, path, "step");
    cr_assert(tact_dtype_of(t) == TACT_INT64 && tact_ndim(t) == 0);
    cr_assert_eq(tact_read(t, &step, sizeof step), TACT_OK);
    cr_assert_eq(step, 7);
    t = tact_load_safetensors(ctx, path, "mask");
    cr_assert_eq(tact_dtype_of(t), TACT_BOOL);
    cr_assert_eq(tact_read(t, mask, sizeof mask), TACT_OK);
    cr_assert(mask[0] == 1 && mask[1] == 0 && mask[2] == 1 && mask[3] == 1);
    t = tact_load_safetensors(ctx, path, "half");
    cr_assert_eq(tact_dtype_of(t), TACT_FLOAT16);
    cr_assert_eq(tact_read(t, half, sizeof half), TACT_OK);
    cr_assert(half[0] == 0x3800 && half[1] == 0xbc00 && half[2] == 0x7bff && half[3] == 0, "%x %x %x %x", half[0], half[1], half[2], half[3]);
    cr_assert_eq(tact_read(tact_load_safetensors(ctx, path, "bytes"), bytes, sizeof bytes), TACT_OK);
    for (int i = 0; i < 5; i++) cr_assert_eq(bytes[i], 50 * i);
    t = tact_load_safetensors(ctx, path, "empty");
    cr_assert(tact_dtype_of(t) == TACT_FLOAT64 && tact_ndim(t) == 2 && tact_dim(t, 0) == 0 && tact_dim(t, 1) == 3, "%s", tact_error_message(t));
    cr_assert_eq(tact_read(tact_load_safetensors(ctx, path, "q\"uote"), &q, sizeof q), TACT_OK);
    cr_assert_eq(q, -3);
}

Test(api_safetensors, the_python_packages_file) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    s_check_all(ctx, s_golden());
    tact_tensor *e = tact_load_safetensors(ctx, s_golden(), "nope");
    cr_assert(strstr(tact_error_message(e), "holds no tensor named \"nope\""), "%s", tact_error_message(e));
    tact_ctx_close(&ctx);
}

/* tact writes the same tensors and reads them back (set
 * TACT_KEEP_SAFETENSORS=FILE to keep the file for the Python check). */
Test(api_safetensors, tacts_file_reads_back) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    const char *keep = getenv("TACT_KEEP_SAFETENSORS");
    char *path = keep ? strdup(keep) : tu_tmpfile("st");
    const char *names[8] = {"weight", "bias", "step", "mask", "half", "bytes", "empty", "q\"uote"};
    tact_tensor *ts[8] = {
        tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 3}, s_weight),
        tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){3}, s_bias),
        tact_from_data(ctx, TACT_INT64, 0, NULL, (int64_t[]){7}),
        tact_from_data(ctx, TACT_BOOL, 1, (int64_t[]){4}, (uint8_t[]){1, 0, 1, 1}),
        tact_from_data(ctx, TACT_FLOAT16, 2, (int64_t[]){2, 2}, (uint16_t[]){0x3800, 0xbc00, 0x7bff, 0}),
        tact_mul(tact_arange(ctx, 0, 5, 1, TACT_UINT8), tact_scalar_int(ctx, 50)), /* computed: save realizes it */
        tact_zeros(ctx, TACT_FLOAT64, 2, (int64_t[]){0, 3}),
        tact_from_data(ctx, TACT_INT16, 1, (int64_t[]){1}, (int16_t[]){-3}),
    };
    cr_assert_eq(tact_save_safetensors(ctx, path, 8, names, ts), TACT_OK, "%s", tact_ctx_error(ctx));
    s_check_all(ctx, path);
    /* errors: a duplicate name, an error tensor */
    const char *dup[2] = {"a", "a"};
    cr_assert_eq(tact_save_safetensors(ctx, path, 2, dup, ts), TACT_EINVAL);
    cr_assert(strstr(tact_ctx_error(ctx), "two tensors with one name"), "%s", tact_ctx_error(ctx));
    tact_tensor *bad[1] = {tact_reshape(ts[0], 1, (int64_t[]){7})};
    cr_assert_neq(tact_save_safetensors(ctx, path, 1, names, bad), TACT_OK);
    if (!keep) unlink(path);
    free(path);
    tact_ctx_close(&ctx);
}

/* Hostile files: each an error naming the path and the cause, never a crash. */
Test(api_safetensors, hostile_files_are_errors) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    char *path = tu_tmpfile("st");
    static const struct {
        const char *header; /* the JSON; NULL: raw bytes below */
        int data;           /* data bytes after the header */
        const char *why;
    } cases[] = {
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "do not match"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "do not match"},
        {"{\"x\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", 8, "integer too large"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}}", 8, "do not match"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1099511627777],\"data_offsets\":[0,8]}}", 8, "dim too large"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "do not match"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "without dtype"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8, "unknown key"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "unterminated"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} junk", 8, "bytes after"},
        {"[1,2]", 8, "not a JSON object"},
        {"{\"x\\q\":{}}", 8, "bad escape"},
        {"{\"__metadata__\":[1]}", 8, "__metadata__ must be an object"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        FILE *f = fopen(path, "wb");
        uint64_t n = strlen(cases[c].header);
        uint8_t len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(n >> (8 * i));
        fwrite(len8, 1, 8, f);
        fwrite(cases[c].header, 1, n, f);
        for (int i = 0; i < cases[c].data; i++) fputc(0, f);
        fclose(f);
        tact_tensor *t = tact_load_safetensors(ctx, path, "x");
        cr_assert_eq(tact_status_of(t), TACT_EINVAL, "case %zu", c);
        cr_assert(strstr(tact_error_message(t), path) && strstr(tact_error_message(t), cases[c].why), "case %zu: %s", c, tact_error_message(t));
    }
    /* a header length past the end, and a file too short for one */
    FILE *f = fopen(path, "wb");
    fwrite("\xff\xff\xff\xff\x00\x00\x00\x00{}", 1, 10, f);
    fclose(f);
    tact_tensor *t = tact_load_safetensors(ctx, path, "x");
    cr_assert(strstr(tact_error_message(t), "a header of 4294967295 bytes"), "%s", tact_error_message(t));
    f = fopen(path, "wb");
    fwrite("\x02\x00", 1, 2, f);
    fclose(f);
    t = tact_load_safetensors(ctx, path, "x");
    cr_assert(strstr(tact_error_message(t), "shorter than a safetensors header"), "%s", tact_error_message(t));
    unlink(path);
    t = tact_load_safetensors(ctx, path, "x");
    cr_assert(strstr(tact_error_message(t), "cannot open"), "%s", tact_error_message(t));
    free(path);
    tact_ctx_close(&ctx);
}
