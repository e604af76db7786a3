/* test_loader.c - tact_loader: every sample once per epoch, the order fixed by the seed, batches the same for any thread count, the last batch kept or dropped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "tact.h"
#include "testutil.h"

enum { ROWS = 103, FEAT = 5 };

static tact_ctx *s_open(const char *devices, int threads) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    o.cpu_threads = threads;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

/* The dataset: row r of x is r*10 + k (k the feature); its label is r. */
static void s_data(tact_ctx *ctx, tact_tensor **x, tact_tensor **y) {
    static float xs[ROWS * FEAT];
    static int32_t ys[ROWS];
    for (int r = 0; r < ROWS; r++) {
        ys[r] = r;
        for (int k = 0; k < FEAT; k++) xs[r * FEAT + k] = (float)(r * 10 + k);
    }
    *x = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){ROWS, FEAT}, xs);
    *y = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){ROWS}, ys);
}

/* One epoch's labels in the order they came (count into *nb batches). */
static int s_epoch(tact_loader *l, int32_t *order, int *nb, int64_t batch) {
    int got = 0;
    *nb = 0;
    for (;;) {
        tact_tensor *b[2];
        int rc = tact_loader_next(l, b);
        cr_assert_geq(rc, 0, "next: %d", rc);
        if (!rc) break;
        int64_t n = tact_dim(b[1], 0);
        cr_assert(n >= 1 && n <= batch, "a batch of %lld", (long long)n);
        static float xs[ROWS * FEAT];
        cr_assert_eq(tact_read(b[0], xs, sizeof(float) * (size_t)n * FEAT), TACT_OK);
        cr_assert_eq(tact_read(b[1], order + got, sizeof(int32_t) * (size_t)n), TACT_OK);
        for (int64_t r = 0; r < n; r++)
            for (int k = 0; k < FEAT; k++)
                cr_assert_eq(xs[r * FEAT + k], (float)(order[got + r] * 10 + k), "the rows of x and y travel together");
        got += (int)n;
        (*nb)++;
    }
    return got;
}

Test(api_loader, every_sample_once_per_epoch_in_an_order_fixed_by_the_seed) {
    tact_ctx *ctx = s_open(NULL, 1);
    tact_tensor *ts[2];
    s_data(ctx, &ts[0], &ts[1]);
    tact_loader_options o;
    tact_loader_options_default(&o);
    o.batch = 16;
    o.seed = 7;
    tact_loader *l;
    cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, &o), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_loader_batches(l), 7);
    int32_t e1[ROWS], e2[ROWS];
    int nb;
    cr_assert_eq(s_epoch(l, e1, &nb, 16), ROWS);
    cr_assert_eq(nb, 7);
    cr_assert_eq(s_epoch(l, e2, &nb, 16), ROWS);
    int seen[ROWS] = {0}, moved = 0, changed = 0;
    for (int i = 0; i < ROWS; i++) seen[e1[i]]++, moved += e1[i] != i, changed += e1[i] != e2[i];
    for (int r = 0; r < ROWS; r++) cr_assert_eq(seen[r], 1, "row %d came %d times in an epoch", r, seen[r]);
    cr_assert_gt(moved, ROWS / 2, "shuffled");
    cr_assert_gt(changed, ROWS / 2, "a new order each epoch");
    tact_loader_free(&l);
    cr_assert_null(l);
    /* The same seed: the same epochs; another seed: another order. */
    int32_t again[ROWS];
    cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, &o), TACT_OK);
    s_epoch(l, again, &nb, 16);
    cr_assert(memcmp(again, e1, sizeof again) == 0, "the seed fixes the order");
    s_epoch(l, again, &nb, 16);
    cr_assert(memcmp(again, e2, sizeof again) == 0, "the seed fixes every epoch's order");
    tact_loader_free(&l);
    o.seed = 8;
    cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, &o), TACT_OK);
    s_epoch(l, again, &nb, 16);
    cr_assert(memcmp(again, e1, sizeof again) != 0, "another seed, another order");
    tact_loader_free(&l);
    tact_ctx_close(&ctx);
}

/* drop_last drops the short batch; shuffle 0 keeps the rows in order;
 * the batches are the same bits on 1 and 2 threads and on CPU:1. */
Test(api_loader, the_last_batch_order_and_devices) {
    int32_t one[ROWS], two[ROWS];
    int nb;
    for (int k = 0; k < 2; k++) {
        tact_ctx *ctx = s_open("CPU,CPU:1", k + 1);
        tact_tensor *ts[2];
        s_data(ctx, &ts[0], &ts[1]);
        if (k) ts[0] = tact_to(ts[0], "CPU:1"), ts[1] = tact_to(ts[1], "CPU:1");
        tact_loader *l;
        cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_tensor *b[2];
        cr_assert_eq(tact_loader_next(l, b), 1);
        cr_assert_str_eq(tact_device(b[0]), k ? "CPU:1" : "CPU");
        tact_loader_free(&l);
        cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, NULL), TACT_OK);
        cr_assert_eq(s_epoch(l, k ? two : one, &nb, 32), ROWS);
        tact_loader_free(&l);
        tact_loader_options o;
        tact_loader_options_default(&o);
        o.batch = 10;
        o.drop_last = 1;
        o.shuffle = 0;
        cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, &o), TACT_OK);
        cr_assert_eq(tact_loader_batches(l), 10);
        int32_t in_order[ROWS];
        cr_assert_eq(s_epoch(l, in_order, &nb, 10), 100, "the last 3 rows are dropped");
        for (int i = 0; i < 100; i++) cr_assert_eq(in_order[i], i);
        tact_loader_free(&l);
        tact_ctx_close(&ctx);
    }
    cr_assert(memcmp(one, two, sizeof one) == 0, "1 thread on CPU and 2 on CPU:1 differ");
}

Test(api_loader, bad_datasets_are_refused_naming_the_tensor) {
    tact_ctx *ctx = s_open("CPU,CPU:1", 1);
    tact_tensor *ts[2];
    s_data(ctx, &ts[0], &ts[1]);
    tact_loader *l = (tact_loader *)1;
    tact_tensor *short_y = tact_zeros(ctx, TACT_INT32, 1, (int64_t[]){ROWS - 1});
    cr_assert_eq(tact_loader_new(&l, ctx, 2, (tact_tensor *[]){ts[0], short_y}, NULL), TACT_EINVAL);
    cr_assert_null(l);
    cr_assert(strstr(tact_ctx_error(ctx), "tensor 1: its rows differ"), "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_loader_new(&l, ctx, 1, (tact_tensor *[]){tact_shard(ts[0], "CPU,CPU:1", 0)}, NULL), TACT_EINVAL);
    cr_assert(strstr(tact_ctx_error(ctx), "sharded"), "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_loader_new(&l, ctx, 1, (tact_tensor *[]){tact_scalar(ctx, 1)}, NULL), TACT_EINVAL);
    tact_loader_options o;
    tact_loader_options_default(&o);
    o.batch = -3;
    cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, &o), TACT_EINVAL);
    cr_assert_eq(tact_loader_new(&l, ctx, 0, ts, NULL), TACT_EINVAL);
    cr_assert_eq(tact_loader_new(NULL, ctx, 2, ts, NULL), TACT_EINVAL);
    cr_assert_eq(tact_loader_next(NULL, ts), TACT_EINVAL);
    tact_loader_free(NULL);
    tact_ctx_close(&ctx);
}

static void s_count_bytes(const ta_msg_t *m, void *ud) { *(size_t *)ud += m->bulk.len; }

/* The rows are gathered where the tensors are: what the client sends per
 * batch is its row numbers (32 int32), not its rows (32 rows of x and y,
 * 768 bytes); a loader whose tensors' scope ended fails with TACT_EINVAL
 * naming it instead of reading freed memory. */
Test(api_loader, rows_are_gathered_on_the_device_and_tensors_must_outlive_it) {
    char *path = tu_tmpfile("loader.tlog");
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    tact_scope_begin(ctx);
    tact_tensor *ts[2];
    s_data(ctx, &ts[0], &ts[1]);
    tact_loader *l;
    cr_assert_eq(tact_loader_new(&l, ctx, 2, ts, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *b[2];
    cr_assert_eq(tact_loader_next(l, b), 1);
    float x[32 * FEAT];
    int32_t y[32];
    cr_assert_eq(tact_read(b[1], y, sizeof y), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(b[0], x, sizeof x), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int r = 0; r < 32; r++) cr_expect_eq(x[r * FEAT + 3], (float)(y[r] * 10 + 3));
    tact_scope_end(ctx);
    int rc = tact_loader_next(l, b);
    cr_expect_eq(rc, TACT_EINVAL, "a loader over released tensors: %d", rc);
    cr_expect(strstr(tact_ctx_error(ctx), "scope"), "%s", tact_ctx_error(ctx));
    tact_loader_free(&l);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    size_t sent = 0;
    tu_log_sent(path, "client", TA_MSG_WRITE, s_count_bytes, &sent);
    cr_expect_eq(sent, sizeof(float) * ROWS * FEAT + sizeof(int32_t) * ROWS + 32 * sizeof(int32_t), "the client wrote %zu bytes", sent);
    unlink(path);
    free(path);
}
