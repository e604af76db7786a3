/* test_safetensors.c - model files: the golden file the Python safetensors package wrote (gen_safetensors_golden.py)
 * read value by value; tact's own files read back (and, kept with TACT_KEEP_SAFETENSORS, read by the Python
 * package); hostile files refused with the path and the cause. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Writes a safetensors file: the header's length, the header, then data
 * bytes of the value fill. */
static void s_write_file(const char *path, const char *header, int data, int fill) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    uint64_t n = strlen(header);
    for (int i = 0; i < 8; i++) fputc((int)(n >> (8 * i) & 0xff), f);
    fwrite(header, 1, n, f);
    for (int i = 0; i < data; i++) fputc(fill, f);
    fclose(f);
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
        /* What the format forbids beyond each entry: the data of two
         * tensors overlapping, a name given twice (the last would win), a
         * name with an escaped NUL ("x\\u0000y" would match "x"), names
         * that are not UTF-8, data no tensor covers, trailing bytes. */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
         "overlaps"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16,
         "\"x\" is given twice"},
        {"{\"x\\u0000y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "a NUL"},
        {"{\"x\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not UTF-8"},
        {"{\"x\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not UTF-8"},
        {"{\"x\\ud800\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "lone surrogate"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "bytes 0 to 4 of the data belong to no tensor"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "trailing bytes"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ given twice"},
        {"{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "a key given twice in an entry"},
        /* A name that would drive the terminal printing the error is shown escaped. */
        {"{\"\\u001b[31m\\u009b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "\"\\x1b[31m\\xc2\\x9b\""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        s_write_file(path, cases[c].header, cases[c].data, 0);
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
    /* a header over the stated limit */
    f = fopen(path, "wb");
    fwrite("\x01\x00\x40\x06\x00\x00\x00\x00{}", 1, 10, f);
    fclose(f);
    t = tact_load_safetensors(ctx, path, "x");
    cr_assert(strstr(tact_error_message(t), "at most 104857600"), "%s", tact_error_message(t));
    unlink(path);
    t = tact_load_safetensors(ctx, path, "x");
    cr_assert(strstr(tact_error_message(t), "cannot open"), "%s", tact_error_message(t));
    free(path);
    tact_ctx_close(&ctx);
}

/* A name written with the escapes JSON allows (a pair for one character
 * past U+FFFF) is read as its UTF-8. */
Test(api_safetensors, escaped_names_decode_to_utf8) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    char *path = tu_tmpfile("st");
    s_write_file(path, "{\"w\\u00e9\\ud83d\\ude00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 42);
    uint8_t v = 0;
    tact_tensor *t = tact_load_safetensors(ctx, path, "w\xc3\xa9\xf0\x9f\x98\x80");
    cr_assert_eq(tact_read(t, &v, 1), TACT_OK, "%s", tact_error_message(t));
    cr_assert_eq(v, 42);
    unlink(path);
    free(path);
    tact_ctx_close(&ctx);
}

/* Loading into parameters takes each stored tensor only when it is the
 * parameter's dtype and shape exactly (an assign would broadcast a [1]
 * into a [128]): the error names the tensor and both. */
Test(api_safetensors, parameters_load_only_their_exact_shape_and_dtype) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    char *path = tu_tmpfile("st");
    tact_params saved = {0}, p = {0};
    tact_params_add(&saved, "l1", "bias", tact_full(ctx, TACT_FLOAT32, 1, (int64_t[]){1}, 3.0));
    tact_params_add(&saved, "l1", "weight", tact_full(ctx, TACT_FLOAT32, 2, (int64_t[]){1, 4}, 1.0));
    tact_params_add(&saved, "l1", "step", tact_full(ctx, TACT_INT32, 1, (int64_t[]){4}, 1.0));
    cr_assert_eq(tact_params_save(ctx, path, &saved), TACT_OK, "%s", tact_ctx_error(ctx));
    static const struct {
        const char *name;
        tact_dtype dtype;
        int ndim;
        int64_t shape[2];
        int status;
        const char *why;
    } cases[] = {
        {"bias", TACT_FLOAT32, 1, {128}, TACT_ESHAPE, "\"l1.bias\" is stored as float32 (1,); the parameter is float32 (128,)"},
        {"weight", TACT_FLOAT32, 2, {10, 4}, TACT_ESHAPE, "\"l1.weight\" is stored as float32 (1, 4); the parameter is float32 (10, 4)"},
        {"step", TACT_FLOAT32, 1, {4}, TACT_EDTYPE, "\"l1.step\" is stored as int32 (4,); the parameter is float32 (4,)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tact_params_free(&p);
        tact_params_add(&p, "l1", cases[c].name, tact_zeros(ctx, cases[c].dtype, cases[c].ndim, cases[c].shape));
        cr_assert_eq(tact_params_load(ctx, path, &p), cases[c].status, "case %zu", c);
        cr_assert(strstr(tact_ctx_error(ctx), cases[c].why), "case %zu: %s", c, tact_ctx_error(ctx));
    }
    tact_params_free(&p);
    tact_params_add(&p, "l1", "bias", tact_contiguous(tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){1})));
    cr_assert_eq(tact_params_load(ctx, path, &p), TACT_OK, "%s", tact_ctx_error(ctx));
    double v;
    cr_assert_eq(tact_item(p.tensors[0], &v), TACT_OK);
    cr_assert_eq(v, 3.0);
    tact_params_free(&p);
    tact_params_free(&saved);
    unlink(path);
    free(path);
    tact_ctx_close(&ctx);
}

/* Every loader given a FIFO (which would block open() until a writer
 * came) returns an error at once, naming it; the timeout only catches a
 * hang. */
Test(api_safetensors, a_fifo_is_refused_by_every_loader, .timeout = 20) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    char *path = tu_tmpfile("fifo");
    unlink(path);
    cr_assert_eq(mkfifo(path, 0600), 0);
    tact_tensor *t = tact_load_safetensors(ctx, path, "x");
    cr_assert(strstr(tact_error_message(t), "not a regular file (a FIFO)"), "%s", tact_error_message(t));
    t = tact_load_idx(ctx, path);
    cr_assert(strstr(tact_error_message(t), "not a regular file (a FIFO)"), "%s", tact_error_message(t));
    tact_params p = {0};
    tact_params_add(&p, NULL, "x", tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){2}));
    cr_assert_eq(tact_params_load(ctx, path, &p), TACT_EINVAL);
    cr_assert(strstr(tact_ctx_error(ctx), "not a regular file (a FIFO)"), "%s", tact_ctx_error(ctx));
    tact_params_free(&p);
    /* A folder and a device, too. */
    t = tact_load_safetensors(ctx, "/tmp", "x");
    cr_assert(strstr(tact_error_message(t), "not a regular file (a folder)"), "%s", tact_error_message(t));
    t = tact_load_idx(ctx, "/dev/zero");
    cr_assert(strstr(tact_error_message(t), "not a regular file (a device)"), "%s", tact_error_message(t));
    tact_ctx_close(&ctx);
    /* The log of a context: a FIFO nobody reads fails the open. */
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EIO);
    cr_assert(strstr(tact_last_open_error(), "not a regular file"), "%s", tact_last_open_error());
    unlink(path);
    free(path);
}
