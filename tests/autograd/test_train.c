/* test_train.c - training end to end: a fixed-seed MLP reaches a pinned loss, bitwise-identical weights for two runs
 * and for 1 vs 2 threads, and its recorded log replays with every stage matching. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "rerun.h"
#include "tact.h"
#include "testutil.h"

enum { S_IN = 16, S_HID = 32, S_OUT = 4, S_N = 256, S_BATCH = 64 };

typedef struct {
    float w1[S_HID * S_IN], b1[S_HID], w2[S_OUT * S_HID], b2[S_OUT];
    double first_loss, last_loss;
} s_result_t;

/* Data: S_N inputs from tact_randn, labels the argmax of a fixed random
 * teacher's outputs (all from the context's seed); an MLP 16-32-4 trained
 * with Adam (lr 0.01) on batches of 64 taken in order. */
static void s_train(int threads, const char *log, int steps, s_result_t *r) {
    tact_options o;
    tact_options_default(&o);
    o.cpu_threads = threads;
    o.log_path = log;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    tact_manual_seed(ctx, 1234);
    tact_tensor *x = tact_keep(tact_contiguous(tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){S_N, S_IN})));
    tact_tensor *teacher = tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){S_IN, S_OUT});
    tact_tensor *y = tact_keep(tact_contiguous(tact_cast(tact_argmax(tact_matmul(x, teacher), 1, 0), TACT_INT32)));
    cr_assert_eq(tact_realize(ctx, 1, &y), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_layer l1, l2;
    cr_assert_eq(tact_layer_linear(&l1, ctx, S_IN, S_HID, 1), TACT_OK);
    cr_assert_eq(tact_layer_linear(&l2, ctx, S_HID, S_OUT, 1), TACT_OK);
    tact_params ps = {0};
    cr_assert_eq(tact_layer_params(&l1, "l1", &ps), TACT_OK);
    cr_assert_eq(tact_layer_params(&l2, "l2", &ps), TACT_OK);
    cr_assert_eq(ps.n, 4);
    cr_assert_str_eq(ps.names[2], "l2.weight");
    tact_optim *opt;
    tact_optim_options oo;
    tact_optim_options_default(&oo, TACT_OPTIM_ADAM);
    oo.lr = 0.01;
    cr_assert_eq(tact_optim_new(&opt, ctx, &oo, ps.n, ps.tensors), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int s = 0; s < steps; s++) {
        tact_scope_begin(ctx);
        int64_t b = (int64_t)(s % (S_N / S_BATCH)) * S_BATCH;
        tact_tensor *xb = tact_shrink(x, (const int64_t[][2]){{b, b + S_BATCH}, {0, S_IN}});
        tact_tensor *yb = tact_shrink(y, (const int64_t[][2]){{b, b + S_BATCH}});
        tact_tensor *logits = tact_layer_forward(&l2, tact_relu(tact_layer_forward(&l1, xb, 1)), 1);
        tact_tensor *loss = tact_sparse_categorical_crossentropy(logits, yb, -1, 0);
        cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "step %d: %s", s, tact_ctx_error(ctx));
        cr_assert_eq(tact_optim_step_with(opt, 1, &loss), TACT_OK, "step %d: %s", s, tact_ctx_error(ctx));
        tact_optim_zero_grad(opt);
        if (s == 0 || s == steps - 1) cr_assert_eq(tact_item(loss, s ? &r->last_loss : &r->first_loss), TACT_OK);
        tact_scope_end(ctx);
    }
    cr_assert_eq(tact_read(l1.weight, r->w1, sizeof r->w1), TACT_OK);
    cr_assert_eq(tact_read(l1.bias, r->b1, sizeof r->b1), TACT_OK);
    cr_assert_eq(tact_read(l2.weight, r->w2, sizeof r->w2), TACT_OK);
    cr_assert_eq(tact_read(l2.bias, r->b2, sizeof r->b2), TACT_OK);
    tact_optim_free(&opt);
    tact_params_free(&ps);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

static int s_same(const s_result_t *a, const s_result_t *b) {
    return !memcmp(a->w1, b->w1, sizeof a->w1) && !memcmp(a->b1, b->b1, sizeof a->b1) && !memcmp(a->w2, b->w2, sizeof a->w2) &&
           !memcmp(a->b2, b->b2, sizeof a->b2);
}

/* 300 steps: the loss falls from about ln 4 into a pinned range (measured
 * once: 0.00452; the range allows other kernels' rounding, not a broken
 * gradient), and the weights are bitwise the same for a second run and
 * for 2 threads. */
Test(train, mlp_300_steps_pinned_loss_and_identical_bits) {
    static s_result_t a, b, c;
    s_train(1, NULL, 300, &a);
    cr_expect(a.first_loss > 1.0 && a.first_loss < 2.5, "first loss %g", a.first_loss);
    cr_expect(a.last_loss > 0.0025 && a.last_loss < 0.008, "loss after 300 steps %g, pinned to (0.0025, 0.008)", a.last_loss);
    s_train(1, NULL, 300, &b);
    cr_expect(s_same(&a, &b), "two runs differ");
    cr_expect_eq(a.last_loss, b.last_loss);
    s_train(2, NULL, 300, &c);
    cr_expect(s_same(&a, &c), "1 and 2 threads differ");
}

/* A recorded training run (backward and optimizer steps included) replays
 * from its log alone with every stage's messages matching. */
Test(train, recorded_training_replays) {
    char *path = tu_tmpfile("train");
    static s_result_t a;
    s_train(1, path, 20, &a);
    char verdict[1024];
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
    cr_expect_eq(rc, TACT_OK, "%s", verdict);
    unlink(path);
    free(path);
}

/* Training that stops, saves the model and the optimizer's state
 * (tact_params_save), and goes on in a fresh context from the file
 * (tact_params_load) ends with the weights, bit for bit, of training that
 * never stopped. */
typedef struct {
    tact_ctx *ctx;
    tact_layer l1, l2;
    tact_tensor *x, *y;
    tact_optim *opt;
    tact_params all;
} s_run_t;

static void s_run_open(s_run_t *r) {
    memset(r, 0, sizeof *r);
    cr_assert_eq(tact_ctx_open(&r->ctx, NULL), TACT_OK);
    tact_manual_seed(r->ctx, 99);
    r->x = tact_keep(tact_contiguous(tact_randn(r->ctx, TACT_FLOAT32, 2, (int64_t[]){S_BATCH, S_IN})));
    r->y = tact_keep(tact_contiguous(tact_cast(tact_argmax(tact_matmul(r->x, tact_randn(r->ctx, TACT_FLOAT32, 2, (int64_t[]){S_IN, S_OUT})), 1, 0), TACT_INT32)));
    cr_assert_eq(tact_layer_linear(&r->l1, r->ctx, S_IN, S_HID, 1), TACT_OK);
    cr_assert_eq(tact_layer_linear(&r->l2, r->ctx, S_HID, S_OUT, 1), TACT_OK);
    tact_params ps = {0};
    tact_layer_params(&r->l1, "l1", &ps);
    tact_layer_params(&r->l2, "l2", &ps);
    tact_optim_options oo;
    tact_optim_options_default(&oo, TACT_OPTIM_ADAMW);
    oo.lr = 0.01;
    cr_assert_eq(tact_optim_new(&r->opt, r->ctx, &oo, ps.n, ps.tensors), TACT_OK);
    for (int i = 0; i < ps.n; i++) tact_params_add(&r->all, NULL, ps.names[i], ps.tensors[i]);
    cr_assert_eq(tact_optim_state(r->opt, "optim", &r->all), TACT_OK);
    cr_assert_eq(r->all.n, 4 + 3 + 8, "parameters, lr, b1_t, b2_t, 4 m and 4 v");
    tact_params_free(&ps);
}

static void s_run_steps(s_run_t *r, int steps) {
    for (int s = 0; s < steps; s++) {
        tact_scope_begin(r->ctx);
        tact_tensor *loss = tact_sparse_categorical_crossentropy(
            tact_layer_forward(&r->l2, tact_relu(tact_layer_forward(&r->l1, r->x, 1)), 1), r->y, -1, 0);
        cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(r->ctx));
        cr_assert_eq(tact_optim_step(r->opt), TACT_OK, "%s", tact_ctx_error(r->ctx));
        tact_optim_zero_grad(r->opt);
        tact_scope_end(r->ctx);
    }
}

static void s_run_close(s_run_t *r, float *w2) {
    cr_assert_eq(tact_read(r->l2.weight, w2, sizeof(float) * S_OUT * S_HID), TACT_OK);
    tact_optim_free(&r->opt);
    tact_params_free(&r->all);
    tact_ctx_close(&r->ctx);
}

Test(train, saved_and_loaded_training_goes_on_bit_for_bit) {
    static float straight[S_OUT * S_HID], resumed[S_OUT * S_HID];
    s_run_t r;
    s_run_open(&r);
    s_run_steps(&r, 12);
    s_run_close(&r, straight);

    char *path = tu_tmpfile("resume");
    s_run_open(&r);
    s_run_steps(&r, 5);
    cr_assert_eq(tact_params_save(r.ctx, path, &r.all), TACT_OK, "%s", tact_ctx_error(r.ctx));
    s_run_close(&r, resumed);
    s_run_open(&r); /* the initial weights and fresh optimizer state, then the file's */
    cr_assert_eq(tact_params_load(r.ctx, path, &r.all), TACT_OK, "%s", tact_ctx_error(r.ctx));
    s_run_steps(&r, 7);
    s_run_close(&r, resumed);
    cr_expect(memcmp(straight, resumed, sizeof straight) == 0, "resumed training differs from training that never stopped");
    unlink(path);
    free(path);
}

/* A training loop holds nothing of its past steps: the device's buffers
 * after step 10 and after step 60 are the same bytes (before the graph let
 * realized nodes' sources go, every step's activations stayed). */
Test(train, device_memory_is_flat_across_steps) {
    s_run_t r;
    s_run_open(&r);
    tact_stats st;
    s_run_steps(&r, 10);
    tact_ctx_stats(r.ctx, &st);
    uint64_t at10 = st.device_bytes;
    s_run_steps(&r, 50);
    tact_ctx_stats(r.ctx, &st);
    cr_expect_gt(at10, 0);
    cr_expect_eq(st.device_bytes, at10, "device bytes after 10 steps %llu, after 60 %llu", (unsigned long long)at10,
                 (unsigned long long)st.device_bytes);
    float w2[S_OUT * S_HID];
    s_run_close(&r, w2);
}
