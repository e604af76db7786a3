/* test_optim.c - the optimizers against a naive double-precision loop of PyTorch's update rules, and steady-state
 * steps that compile nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#define N 6

/* loss = sum(c * p^2), so the gradient is 2 c p: the engine computes it,
 * the reference loop below uses it in double. */
static const double s_c[N] = {0.5, -1.25, 2, 0.75, 1.5, -0.25};

static void s_reference(const tact_optim_options *o, double *p, int steps) {
    double m[N] = {0}, v[N] = {0}, b1t = 1, b2t = 1;
    for (int s = 0; s < steps; s++) {
        b1t *= o->b1, b2t *= o->b2;
        for (int i = 0; i < N; i++) {
            double g = 2 * s_c[i] * p[i];
            if (o->kind == TACT_OPTIM_SGD) {
                g += o->weight_decay * p[i];
                if (o->momentum) {
                    m[i] = o->momentum * m[i] + g;
                    g = o->nesterov ? g + o->momentum * m[i] : m[i];
                }
                p[i] -= o->lr * g;
            } else {
                m[i] = o->b1 * m[i] + (1 - o->b1) * g;
                v[i] = o->b2 * v[i] + (1 - o->b2) * g * g;
                double up = (m[i] / (1 - b1t)) / (sqrt(v[i] / (1 - b2t)) + o->eps) + o->weight_decay * p[i];
                p[i] -= o->lr * up;
            }
        }
    }
}

static void s_run(const tact_optim_options *o, int steps) {
    double init[N] = {1, -2, 0.5, 3, -1.5, 2.5}, want[N];
    memcpy(want, init, sizeof want);
    s_reference(o, want, steps);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    float f[N], c[N];
    for (int i = 0; i < N; i++) f[i] = (float)init[i], c[i] = (float)s_c[i];
    tact_tensor *p = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){N}, f);
    tact_tensor *ct = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){N}, c);
    tact_optim *opt;
    cr_assert_eq(tact_optim_new(&opt, ctx, o, 1, &p), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(tact_requires_grad(p), 1, "an unset parameter is set to require a gradient");
    for (int s = 0; s < steps; s++) {
        tact_scope_begin(ctx);
        cr_assert_eq(tact_backward(tact_sum(tact_mul(ct, tact_mul(p, p)), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_optim_step(opt), TACT_OK, "step %d: %s", s, tact_ctx_error(ctx));
        tact_optim_zero_grad(opt);
        tact_scope_end(ctx);
    }
    cr_assert_eq(tact_read(p, f, sizeof f), TACT_OK);
    for (int i = 0; i < N; i++)
        cr_expect(fabs(f[i] - want[i]) <= 1e-5 + 1e-4 * fabs(want[i]), "kind %d, p[%d]: tact %.9g, reference %.9g", o->kind, i, f[i], want[i]);
    tact_optim_free(&opt);
    tact_ctx_close(&ctx);
}

Test(optim, sgd_plain) {
    tact_optim_options o;
    tact_optim_options_default(&o, TACT_OPTIM_SGD);
    o.lr = 0.1;
    s_run(&o, 5);
}

Test(optim, sgd_momentum_weight_decay) {
    tact_optim_options o;
    tact_optim_options_default(&o, TACT_OPTIM_SGD);
    o.lr = 0.05, o.momentum = 0.9, o.weight_decay = 0.01;
    s_run(&o, 6);
}

Test(optim, sgd_nesterov) {
    tact_optim_options o;
    tact_optim_options_default(&o, TACT_OPTIM_SGD);
    o.lr = 0.05, o.momentum = 0.8, o.nesterov = 1;
    s_run(&o, 6);
}

Test(optim, adam) {
    tact_optim_options o;
    tact_optim_options_default(&o, TACT_OPTIM_ADAM);
    o.lr = 0.01;
    s_run(&o, 7);
}

Test(optim, adamw) {
    tact_optim_options o;
    tact_optim_options_default(&o, TACT_OPTIM_ADAMW);
    o.lr = 0.02, o.weight_decay = 0.1;
    s_run(&o, 7);
}

Test(optim, bad_options_and_missing_gradients_are_errors) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *p = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2});
    tact_tensor *i = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){2}, (int[]){1, 2});
    tact_optim *opt = (tact_optim *)1;
    tact_optim_options o;
    tact_optim_options_default(&o, TACT_OPTIM_ADAM);
    o.b1 = 1.5;
    cr_expect_eq(tact_optim_new(&opt, ctx, &o, 1, &p), TACT_EINVAL);
    cr_expect_null(opt);
    cr_expect(strstr(tact_ctx_error(ctx), "b1 1.5"), "%s", tact_ctx_error(ctx));
    tact_optim_options_default(&o, TACT_OPTIM_ADAM);
    cr_expect_eq(tact_optim_new(&opt, ctx, &o, 1, &i), TACT_EINVAL);
    cr_expect(strstr(tact_ctx_error(ctx), "not a float"), "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_optim_new(&opt, ctx, &o, 1, &p), TACT_OK);
    cr_expect_neq(tact_optim_step(opt), TACT_OK, "a step before any backward");
    cr_expect(strstr(tact_ctx_error(ctx), "no gradient"), "%s", tact_ctx_error(ctx));
    tact_optim_free(&opt);
    cr_expect_null(opt);
    tact_ctx_close(&ctx);
}

/* A small MLP's training steps: once steady (from the fourth step: the
 * first ones see their predecessors' graphs let go as their realizes
 * settle), steps and a second new learning rate compile no kernel; a
 * fresh kernel cache makes the first step really compile. */
Test(optim, steady_state_steps_compile_nothing) {
    char dir[] = "/tmp/tact-optim-cache-XXXXXX";
    cr_assert(mkdtemp(dir));
    setenv("TACT_CACHE_DIR", dir, 1);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_manual_seed(ctx, 3);
    tact_tensor *w1 = tact_keep(tact_contiguous(tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){4, 8})));
    tact_tensor *w2 = tact_keep(tact_contiguous(tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){8, 2})));
    tact_tensor *x = tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){16, 4});
    tact_tensor *y = tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){16, 2});
    tact_tensor *ps[2] = {w1, w2};
    cr_assert_eq(tact_realize(ctx, 2, ps), TACT_OK);
    tact_optim *opt;
    tact_optim_options o;
    tact_optim_options_default(&o, TACT_OPTIM_ADAM);
    cr_assert_eq(tact_optim_new(&opt, ctx, &o, 2, ps), TACT_OK);
    tact_stats st;
    uint64_t after[7];
    double loss[7];
    for (int s = 0; s < 7; s++) {
        tact_scope_begin(ctx);
        tact_tensor *l = tact_mean(tact_square(tact_sub(tact_matmul(tact_relu(tact_matmul(x, w1)), w2), y)), -1, NULL, 0);
        cr_assert_eq(tact_item(l, &loss[s]), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_backward(l, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_optim_step(opt), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_optim_zero_grad(opt);
        /* The first change of the learning rate may build its copy
         * kernel; a later one builds nothing. */
        if (s == 1 || s == 5) cr_assert_eq(tact_optim_set_lr(opt, s == 1 ? 0.002 : 0.0005), TACT_OK);
        tact_scope_end(ctx);
        tact_ctx_stats(ctx, &st);
        after[s] = st.compiles;
    }
    cr_expect_gt(after[0], 0, "the first step compiles");
    cr_expect_eq(after[6], after[2], "steps 4 to 7 compiled %llu kernels", (unsigned long long)(after[6] - after[2]));
    cr_expect_lt(loss[6], loss[0], "the loss goes down: %g -> %g", loss[0], loss[6]);
    tact_optim_free(&opt);
    tact_ctx_close(&ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}

/* PyTorch's CosineAnnealingLR and StepLR, by hand. */
Test(optim, learning_rate_schedules) {
    cr_expect_float_eq(tact_lr_cosine(0.1, 0.0, 0, 100), 0.1, 1e-15);
    cr_expect_float_eq(tact_lr_cosine(0.1, 0.0, 50, 100), 0.05, 1e-15);
    cr_expect_float_eq(tact_lr_cosine(0.1, 0.01, 25, 100), 0.01 + 0.09 * 0.5 * (1 + cos(M_PI / 4)), 1e-15);
    cr_expect_float_eq(tact_lr_cosine(0.1, 0.01, 100, 100), 0.01, 1e-15);
    cr_expect_float_eq(tact_lr_cosine(0.1, 0.01, 500, 100), 0.01, 1e-15);
    cr_expect_float_eq(tact_lr_step(0.1, 0.5, 9, 10), 0.1, 1e-15);
    cr_expect_float_eq(tact_lr_step(0.1, 0.5, 10, 10), 0.05, 1e-15);
    cr_expect_float_eq(tact_lr_step(0.1, 0.5, 35, 10), 0.0125, 1e-15);
    cr_expect_float_eq(tact_lr_step(0.1, 0.5, 35, 0), 0.1, 1e-15);
}

/* An optimizer of kind with learning rate lr over a and b. */
static tact_optim *s_optim2(tact_ctx *ctx, tact_optim_kind kind, double lr, tact_tensor *a, tact_tensor *b) {
    tact_tensor *ps[2] = {a, b};
    tact_optim *o;
    tact_optim_options oo;
    tact_optim_options_default(&oo, kind);
    oo.lr = lr;
    cr_assert_eq(tact_optim_new(&o, ctx, &oo, 2, ps), TACT_OK, "%s", tact_ctx_error(ctx));
    return o;
}

/* A step that fails (a parameter without a gradient) changes nothing: no
 * assign of an earlier parameter runs later. */
Test(optim, a_failed_step_changes_nothing) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *w0 = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2});
    tact_tensor *w1 = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){3, 4});
    tact_optim *o = s_optim2(ctx, TACT_OPTIM_SGD, 0.5, w0, w1);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(w0, w0), -1, NULL, 0), NULL), TACT_OK);
    cr_expect_neq(tact_optim_step(o), TACT_OK, "w1 has no gradient");
    float v[2];
    cr_assert_eq(tact_read(w0, v, sizeof v), TACT_OK);
    cr_expect(v[0] == 1 && v[1] == 2, "w0 after the failed step: %g %g", v[0], v[1]);
    tact_optim_free(&o);
    tact_ctx_close(&ctx);
}

/* Adam over w and u from fixed values; each step runs the backwards of
 * losses (a bit mask: 1 sum(w^2), 2 sum(u^2), 3 sum(w^2 + u^2)), then,
 * if asked, reads u's gradient (so the step is built after the answer,
 * not ahead of it), then steps.  Returns the failed steps; out: w, u. */
static int s_two(const int *losses, int nsteps, int read_first, float out[4]) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *w = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){1, -2});
    tact_tensor *u = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){0.5f, 3});
    tact_optim *o = s_optim2(ctx, TACT_OPTIM_ADAM, 0.1, w, u);
    int failed = 0;
    for (int s = 0; s < nsteps; s++) {
        tact_scope_begin(ctx);
        for (int b = losses[s]; b; b >>= 4) {
            tact_tensor *lw = tact_sum(tact_mul(w, w), -1, NULL, 0), *lu = tact_sum(tact_mul(u, u), -1, NULL, 0);
            tact_tensor *loss = (b & 15) == 1 ? lw : (b & 15) == 2 ? lu : tact_add(lw, lu);
            cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        }
        if (read_first) tact_grad(u);
        if (tact_optim_step(o) != TACT_OK) {
            cr_expect(strstr(tact_ctx_error(ctx), "no gradient"), "step %d: %s", s, tact_ctx_error(ctx));
            failed++;
        } else {
            tact_optim_zero_grad(o);
        }
        tact_scope_end(ctx);
    }
    cr_assert_eq(tact_read(w, out, 2 * sizeof *out), TACT_OK);
    cr_assert_eq(tact_read(u, out + 2, 2 * sizeof *out), TACT_OK);
    tact_optim_free(&o);
    tact_ctx_close(&ctx);
    return failed;
}

/* tact_backward does not wait, so a step usually builds its ops on the
 * gradients before the graph said which exist (nn_optim.c).  Built ahead
 * or after the answer, a step is the same ops: the same bits.  Where the
 * answer differs from what the step assumed, it is taken back whole (its
 * ops, and the assigns of w, the moments and b1^t, b2^t) and built again:
 * a parameter without a gradient fails it and leaves no trace (the next
 * steps are those of a run without it), one whose earlier gradient stays
 * steps with that gradient. */
Test(optim, a_step_built_ahead_of_the_backward_answer_is_the_step_built_after) {
    float a[4], b[4];
    int every[3] = {3, 3, 3};
    cr_expect_eq(s_two(every, 3, 0, a), 0);
    cr_expect_eq(s_two(every, 3, 1, b), 0);
    cr_expect(memcmp(a, b, sizeof a) == 0, "ahead %g %g %g %g, after %g %g %g %g", a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
    /* u has no gradient at the first step: it fails; the second step's
     * backward adds to w's gradient, as in a run without the first step. */
    int missing[2] = {1, 3}, without[1] = {0x31};
    cr_expect_eq(s_two(missing, 2, 0, a), 1);
    cr_expect_eq(s_two(without, 1, 0, b), 0);
    cr_expect(memcmp(a, b, sizeof a) == 0, "after a failed step %g %g %g %g, without it %g %g %g %g", a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
    /* u's gradient from the first backward stays through the second. */
    int kept[1] = {0x12};
    cr_expect_eq(s_two(kept, 1, 0, a), 0);
    cr_expect_eq(s_two(kept, 1, 1, b), 0);
    cr_expect(memcmp(a, b, sizeof a) == 0, "kept, ahead %g %g %g %g, after %g %g %g %g", a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
    cr_expect(a[2] != 0.5f && a[3] != 3, "u stepped with its kept gradient: %g %g", a[2], a[3]);
}


/* Steps taken back and built again, each after two backwards (w's
 * gradient accumulates, u keeps its earlier one): what reading the
 * answer released (w's earlier gradient) stays released when the step is
 * taken back, so memory stays flat. */
Test(optim, steps_taken_back_leave_memory_flat) {
    tact_set_allocator(tu_counting, NULL);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *w = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){1, -2});
    tact_tensor *u = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){2}, (float[]){0.5f, 3});
    tact_optim *o = s_optim2(ctx, TACT_OPTIM_ADAM, 0.01, w, u);
    long at[2] = {0, 0};
    for (int s = 0; s < 300; s++) {
        tact_scope_begin(ctx);
        cr_assert_eq(tact_backward(tact_sum(tact_add(tact_mul(w, w), tact_mul(u, u)), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_backward(tact_sum(tact_mul(w, w), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_optim_step(o), TACT_OK, "step %d: %s", s, tact_ctx_error(ctx));
        tact_optim_zero_grad(o);
        tact_scope_end(ctx);
        if (s == 99 || s == 299) {
            cr_assert_eq(tact_realize(ctx, 1, &w), TACT_OK, "%s", tact_ctx_error(ctx)); /* the graph took every release */
            at[s == 299] = __atomic_load_n(&tu_live_bytes, __ATOMIC_RELAXED);
        }
    }
    cr_expect_lt(at[1] - at[0], 64 * 1024, "live bytes after 100 steps: %ld, after 300: %ld", at[0], at[1]);
    tact_optim_free(&o);
    tact_ctx_close(&ctx);
    tact_set_allocator(NULL, NULL);
}
