/* test_print.c - tensors in and out of the host: tact_format and tact_print (small tensors whole, large ones summarized as NumPy does, sharded ones with their split, errors as the error) and tact_from_host (host data of any dtype). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "tact.h"

static tact_ctx *s_open(const char *devices) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

static void s_is(tact_tensor *t, const char *want) {
    char got[4096];
    int n = tact_format(t, got, sizeof got);
    cr_assert_eq(n, (int)strlen(want), "length %d for:\n%s\nwant:\n%s", n, got, want);
    cr_assert_str_eq(got, want);
}

Test(api_print, small_tensors_print_every_value_aligned) {
    tact_ctx *ctx = s_open(NULL);
    float v[6] = {1, 2.5f, -3, 4, 5, 6};
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 3}, v);
    s_is(x, "tensor([[  1, 2.5,  -3],\n"
            "        [  4,   5,   6]], shape=(2, 3), dtype=float32, device=CPU)");
    s_is(tact_scalar(ctx, 0.1), "tensor(0.1, shape=(), dtype=float32, device=CPU)");
    s_is(tact_arange(ctx, 0, 5, 1, TACT_INT64), "tensor([0, 1, 2, 3, 4], shape=(5,), dtype=int64, device=CPU)");
    s_is(tact_gt(x, tact_scalar(ctx, 2)), "tensor([[False,  True, False],\n"
                                          "        [ True,  True,  True]], shape=(2, 3), dtype=bool, device=CPU)");
    s_is(tact_reshape(tact_arange(ctx, 0, 8, 1, TACT_UINT8), 3, (int64_t[]){2, 2, 2}),
         "tensor([[[0, 1],\n"
         "         [2, 3]],\n"
         "\n"
         "        [[4, 5],\n"
         "         [6, 7]]], shape=(2, 2, 2), dtype=uint8, device=CPU)");
    float odd[3] = {0.0f / 0.0f, 1.0f / 0.0f, -1e-7f};
    s_is(tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){3}, odd), "tensor([   nan,    inf, -1e-07], shape=(3,), dtype=float32, device=CPU)");
    s_is(tact_zeros(ctx, TACT_FLOAT16, 2, (int64_t[]){0, 3}), "tensor([], shape=(0, 3), dtype=float16, device=CPU)");
    tact_ctx_close(&ctx);
}

/* Past 1000 elements, the first and last 3 of each axis around "...". */
Test(api_print, large_tensors_are_summarized_as_numpy_does) {
    tact_ctx *ctx = s_open(NULL);
    s_is(tact_arange(ctx, 0, 2000, 1, TACT_INT32), "tensor([   0,    1,    2, ..., 1997, 1998, 1999], shape=(2000,), dtype=int32, device=CPU)");
    s_is(tact_reshape(tact_arange(ctx, 0, 2000, 1, TACT_INT32), 2, (int64_t[]){40, 50}),
         "tensor([[   0,    1,    2, ...,   47,   48,   49],\n"
         "        [  50,   51,   52, ...,   97,   98,   99],\n"
         "        [ 100,  101,  102, ...,  147,  148,  149],\n"
         "        ...,\n"
         "        [1850, 1851, 1852, ..., 1897, 1898, 1899],\n"
         "        [1900, 1901, 1902, ..., 1947, 1948, 1949],\n"
         "        [1950, 1951, 1952, ..., 1997, 1998, 1999]], shape=(40, 50), dtype=int32, device=CPU)");
    /* 1000 elements exactly: every one (a row of 1000 numbers). */
    char *big = malloc(20000);
    int n = tact_format(tact_arange(ctx, 0, 1000, 1, TACT_INT32), big, 20000);
    cr_assert(n > 4000 && !strstr(big, "...") && strstr(big, " 999]"), "%d: %.80s", n, big);
    free(big);
    tact_ctx_close(&ctx);
}

/* Errors print as the error; a short buffer gets the start and the whole
 * length back, as snprintf; print ends with a newline and returns the
 * status. */
Test(api_print, errors_print_as_the_error_and_format_is_snprintf) {
    tact_ctx *ctx = s_open(NULL);
    tact_tensor *x = tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){3});
    tact_tensor *bad = tact_add(x, tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){4}));
    char got[512];
    tact_format(bad, got, sizeof got);
    cr_assert(strncmp(got, "tensor(error: add: ", 19) == 0 && strstr(got, "broadcast"), "%s", got);
    s_is(NULL, "tensor(error: a NULL tensor or context was passed)");
    char small[8];
    int whole = tact_format(x, small, sizeof small);
    cr_assert_eq(whole, (int)strlen("tensor([0, 0, 0], shape=(3,), dtype=float32, device=CPU)"));
    cr_assert_str_eq(small, "tensor(");
    cr_assert_eq(tact_format(x, NULL, 0), whole);
    char *path = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&path, &len);
    cr_assert_eq(tact_print(f, x), TACT_OK);
    cr_assert_neq(tact_print(f, bad), TACT_OK);
    fclose(f);
    cr_assert_str_eq(path, "tensor([0, 0, 0], shape=(3,), dtype=float32, device=CPU)\n"
                           "tensor(error: add: shapes (3,) and (4,) do not broadcast (dim 0: 3 vs 4))\n");
    free(path);
    cr_assert_eq(tact_print(NULL, x), TACT_EINVAL);
    tact_ctx_close(&ctx);
}

/* A sharded tensor prints whole, with its devices and how it is split. */
Test(api_print, sharded_tensors_say_how_they_are_split) {
    tact_ctx *ctx = s_open("CPU,CPU:1");
    float v[6] = {1, 2, 3, 4, 5, 6};
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){3, 2}, v);
    s_is(tact_shard(x, "CPU,CPU:1", 0), "tensor([[1, 2],\n"
                                       "        [3, 4],\n"
                                       "        [5, 6]], shape=(3, 2), dtype=float32, device=CPU,CPU:1, split along axis 0)");
    s_is(tact_shard(x, "CPU,CPU:1", TACT_REPLICATE), "tensor([[1, 2],\n"
                                                    "        [3, 4],\n"
                                                    "        [5, 6]], shape=(3, 2), dtype=float32, device=CPU,CPU:1, replicated)");
    s_is(tact_to(x, "CPU:1"), "tensor([[1, 2],\n"
                              "        [3, 4],\n"
                              "        [5, 6]], shape=(3, 2), dtype=float32, device=CPU:1)");
    cr_assert_eq(tact_shard_axis(x), -1);
    cr_assert_eq(tact_shard_axis(tact_shard(x, "CPU,CPU:1", -1)), 1);
    tact_ctx_close(&ctx);
}

/* Host data of any dtype into a tensor of any other: the values
 * tact_cast gives on the device, bit for bit, for every pair of the 13
 * dtypes (the host values made by casting float64 ones: fractions,
 * negatives, out of range, NaN and infinities); and by hand, pixels into
 * floats and floats into ints. */
Test(api_print, host_data_of_any_dtype_converts_at_upload_as_cast_does) {
    tact_ctx *ctx = s_open(NULL);
    double base[] = {0, 1, -1, 2.7, -2.7, 100.5, 255, 300, 65504, -129, 1e10, -0.0, 0.0 / 0.0, 1.0 / 0.0, -1.0 / 0.0, 0.25};
    enum { N = sizeof base / sizeof *base };
    int64_t n = N;
    tact_tensor *f64 = tact_from_data(ctx, TACT_FLOAT64, 1, &n, base);
    for (int src = 0; src < TACT_DTYPE_COUNT; src++) {
        uint8_t host[N * 8], want[N * 8], got[N * 8];
        size_t ss = tact_element_size((tact_dtype)src);
        cr_assert_eq(tact_read(tact_cast(f64, (tact_dtype)src), host, ss * N), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_tensor *on_device = tact_from_data(ctx, (tact_dtype)src, 1, &n, host);
        for (int dst = 0; dst < TACT_DTYPE_COUNT; dst++) {
            size_t ds = tact_element_size((tact_dtype)dst);
            tact_tensor *up = tact_from_host(ctx, (tact_dtype)dst, 1, &n, host, (tact_dtype)src);
            cr_assert_eq(tact_dtype_of(up), (tact_dtype)dst);
            cr_assert_eq(tact_read(up, got, ds * N), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_assert_eq(tact_read(tact_cast(on_device, (tact_dtype)dst), want, ds * N), TACT_OK, "%s", tact_ctx_error(ctx));
            for (int i = 0; i < N; i++)
                cr_assert(memcmp(got + i * ds, want + i * ds, ds) == 0, "%s -> %s, element %d (%g)", tact_dtype_name((tact_dtype)src),
                          tact_dtype_name((tact_dtype)dst), i, base[i]);
        }
    }
    uint8_t px[3] = {0, 255, 7};
    float fx[3];
    cr_assert_eq(tact_read(tact_from_host(ctx, TACT_FLOAT32, 1, (int64_t[]){3}, px, TACT_UINT8), fx, sizeof fx), TACT_OK);
    cr_assert(fx[0] == 0 && fx[1] == 255 && fx[2] == 7, "%g %g %g", (double)fx[0], (double)fx[1], (double)fx[2]);
    float fl[3] = {2.7f, -2.7f, 0.0f / 0.0f};
    int32_t ix[3];
    cr_assert_eq(tact_read(tact_from_host(ctx, TACT_INT32, 1, (int64_t[]){3}, fl, TACT_FLOAT32), ix, sizeof ix), TACT_OK);
    cr_assert(ix[0] == 2 && ix[1] == -2 && ix[2] == 0, "%d %d %d", ix[0], ix[1], ix[2]);
    cr_assert_eq(tact_status_of(tact_from_host(ctx, TACT_INT32, 1, (int64_t[]){3}, fl, (tact_dtype)99)), TACT_EDTYPE);
    cr_assert_eq(tact_status_of(tact_from_host(ctx, TACT_INT32, 1, (int64_t[]){3}, NULL, TACT_FLOAT32)), TACT_EINVAL);
    tact_ctx_close(&ctx);
}
