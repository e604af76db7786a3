/* test_misc.c - the API's small remainders by hand: bitwise_and/or, rand_like, version. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"

/* The reference's bitwise_and and bitwise_or: ints and bools, with a Python
 * int broadcast; floats refused. */
Test(api_misc, bitwise_and_or_on_ints_and_bools) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    int32_t a[4] = {12, -1, 5, 0}, b[4] = {10, 7, -6, 3}, got[4];
    tact_tensor *ta = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){4}, a), *tb = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){4}, b);
    cr_assert_eq(tact_read(tact_bitwise_and(ta, tb), got, sizeof got), TACT_OK);
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], a[i] & b[i], "and [%d]: %d", i, got[i]);
    cr_assert_eq(tact_read(tact_bitwise_or(ta, tb), got, sizeof got), TACT_OK);
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], a[i] | b[i], "or [%d]: %d", i, got[i]);
    cr_assert_eq(tact_read(tact_bitwise_and(ta, tact_scalar_int(ctx, 6)), got, sizeof got), TACT_OK);
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], a[i] & 6, "and 6 [%d]: %d", i, got[i]);
    uint8_t p[4] = {1, 1, 0, 0}, q[4] = {1, 0, 1, 0}, r[4];
    tact_tensor *tp = tact_from_data(ctx, TACT_BOOL, 1, (int64_t[]){4}, p), *tq = tact_from_data(ctx, TACT_BOOL, 1, (int64_t[]){4}, q);
    cr_assert_eq(tact_dtype_of(tact_bitwise_or(tp, tq)), TACT_BOOL);
    cr_assert_eq(tact_read(tact_bitwise_or(tp, tq), r, sizeof r), TACT_OK);
    cr_expect(r[0] == 1 && r[1] == 1 && r[2] == 1 && r[3] == 0, "%d %d %d %d", r[0], r[1], r[2], r[3]);
    cr_assert_eq(tact_read(tact_bitwise_and(tp, tq), r, sizeof r), TACT_OK);
    cr_expect(r[0] == 1 && r[1] == 0 && r[2] == 0 && r[3] == 0, "%d %d %d %d", r[0], r[1], r[2], r[3]);
    tact_tensor *f = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){1}, (float[]){1});
    cr_expect_eq(tact_status_of(tact_bitwise_and(f, f)), TACT_EDTYPE);
    cr_expect_eq(tact_status_of(tact_bitwise_or(ta, NULL)), TACT_EINVAL);
    tact_ctx_close(&ctx);
}

/* rand_like(x) is rand with x's shape and dtype: after the same seed, the
 * same numbers. */
Test(api_misc, rand_like_is_rand_of_the_same_shape) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *x = tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){3, 5});
    float a[15], b[15];
    tact_manual_seed(ctx, 7);
    tact_tensor *l = tact_rand_like(x);
    cr_expect_eq(tact_ndim(l), 2);
    cr_expect_eq(tact_dim(l, 1), 5);
    cr_expect_eq(tact_dtype_of(l), TACT_FLOAT32);
    cr_assert_eq(tact_read(l, a, sizeof a), TACT_OK);
    tact_manual_seed(ctx, 7);
    cr_assert_eq(tact_read(tact_rand(ctx, TACT_FLOAT32, 2, (int64_t[]){3, 5}), b, sizeof b), TACT_OK);
    cr_expect(memcmp(a, b, sizeof a) == 0);
    for (int i = 0; i < 15; i++) cr_expect(a[i] >= 0 && a[i] < 1, "[%d] %g", i, a[i]);
    cr_expect_eq(tact_status_of(tact_rand_like(NULL)), TACT_EINVAL);
    tact_ctx_close(&ctx);
}

Test(api_misc, version_is_a_dotted_number) {
    int major = -1, minor = -1;
    cr_expect_eq(sscanf(tact_version(), "%d.%d", &major, &minor), 2, "%s", tact_version());
    cr_expect_geq(major, 0);
}

Test(api_misc, optimizer_reports_its_learning_rate) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *p = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2});
    tact_optim *o;
    tact_optim_options oo;
    tact_optim_options_default(&oo, TACT_OPTIM_SGD);
    oo.lr = 0.25;
    cr_assert_eq(tact_optim_new(&o, ctx, &oo, 1, &p), TACT_OK);
    cr_expect_eq(tact_optim_lr(o), 0.25);
    cr_assert_eq(tact_optim_set_lr(o, 0.125), TACT_OK);
    cr_expect_eq(tact_optim_lr(o), 0.125);
    cr_expect_eq(tact_optim_set_lr(o, -1), TACT_EINVAL);
    cr_expect_eq(tact_optim_lr(NULL), 0);
    tact_optim_free(&o);
    tact_ctx_close(&ctx);
}
