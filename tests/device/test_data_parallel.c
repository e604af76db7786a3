/* test_data_parallel.c - data-parallel training through the documented entry points: a sharded batch, replicated parameters, every optimizer and loss. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "tact.h"
#include "testutil.h"

/* The model: x (B, I) -> relu(x W1 + b1) -> (.) W2 + b2 -> logits (B, O). */
enum { B = 10, I = 6, H = 5, O = 3, NP = 4, STEPS = 20 };
static const int64_t s_sizes[NP] = {I * H, H, H * O, O};
enum { NW = I * H + H + H * O + O };

typedef enum { LOSS_CE, LOSS_BCE, LOSS_BCE_LOGITS } loss_kind;

typedef struct {
    const char *devices; /* "CPU": one device, the batch whole */
    int threads;
    tact_optim_kind kind;
    loss_kind loss;
    int with; /* tact_optim_step_with(loss) rather than tact_optim_step */
    const char *place; /* not NULL: everything on this one of the devices, nothing sharded */
} run_t;

static double s_uniform(uint64_t *rng) { return (double)(tu_rand(rng) >> 11) / 9007199254740992.0; }

/* STEPS steps of the model as r says, from seeded inputs; the parameters
 * after them into w (NW floats: W1, b1, W2, b2), and the kernels each of
 * the first two devices ran into kernels (when not NULL). */
static void s_train(const run_t *r, uint64_t seed, float *w, uint64_t *kernels) {
    tact_options o;
    tact_options_default(&o);
    o.devices = r->devices;
    o.cpu_threads = r->threads;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s: %s", r->devices, tact_last_open_error());
    int sharded = strchr(r->devices, ',') != NULL && !r->place;
    uint64_t rng = seed;
    float x[B * I], y[B * O], init[NW];
    int32_t labels[B];
    for (int i = 0; i < B * I; i++) x[i] = (float)(s_uniform(&rng) * 2 - 1);
    for (int i = 0; i < NW; i++) init[i] = (float)(s_uniform(&rng) - 0.5);
    for (int i = 0; i < B; i++) labels[i] = (int32_t)(tu_rand(&rng) % O);
    for (int i = 0; i < B * O; i++) y[i] = (float)s_uniform(&rng); /* soft targets for the binary losses */
    static const int64_t shapes[NP][2] = {{I, H}, {H, 0}, {H, O}, {O, 0}};
    tact_tensor *p[NP];
    for (int k = 0, at = 0; k < NP; at += (int)s_sizes[k], k++) {
        p[k] = tact_from_data(ctx, TACT_FLOAT32, shapes[k][1] ? 2 : 1, shapes[k], init + at);
        if (sharded) p[k] = tact_shard(p[k], r->devices, TACT_REPLICATE);
        if (r->place) p[k] = tact_to(p[k], r->place);
        p[k] = tact_keep(p[k]);
    }
    tact_optim_options oo;
    tact_optim_options_default(&oo, r->kind);
    oo.lr = r->kind == TACT_OPTIM_SGD ? 0.1 : 0.02;
    if (r->kind == TACT_OPTIM_SGD) oo.momentum = 0.9, oo.weight_decay = 0.01, oo.nesterov = 1;
    if (r->kind == TACT_OPTIM_ADAM) oo.weight_decay = 0.001;
    tact_optim *opt = NULL;
    cr_assert_eq(tact_optim_new(&opt, ctx, &oo, NP, p), TACT_OK, "%s: %s", r->devices, tact_ctx_error(ctx));
    tact_tensor *tx = tact_keep(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){B, I}, x));
    tact_tensor *ty = tact_keep(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){B, O}, y));
    tact_tensor *tl = tact_keep(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){B}, labels));
    if (r->place) tx = tact_keep(tact_to(tx, r->place)), ty = tact_keep(tact_to(ty, r->place)), tl = tact_keep(tact_to(tl, r->place));
    double last = 0;
    for (int s = 0; s < STEPS; s++) {
        /* A schedule: the rate changes every 5 steps. */
        if (s % 5 == 0) cr_assert_eq(tact_optim_set_lr(opt, tact_lr_cosine(oo.lr, oo.lr / 10, s, STEPS)), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_scope_begin(ctx);
        tact_tensor *xs = sharded ? tact_shard(tx, r->devices, 0) : tx;
        tact_tensor *logits = tact_linear(tact_relu(tact_linear(xs, p[0], p[1])), p[2], p[3]);
        tact_tensor *loss;
        if (r->loss == LOSS_CE) loss = tact_sparse_categorical_crossentropy(logits, sharded ? tact_shard(tl, r->devices, 0) : tl, -1, 0);
        else if (r->loss == LOSS_BCE) loss = tact_binary_crossentropy(tact_sigmoid(logits), sharded ? tact_shard(ty, r->devices, 0) : ty);
        else loss = tact_binary_crossentropy_logits(logits, sharded ? tact_shard(ty, r->devices, 0) : ty);
        cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s, step %d: %s", r->devices, s, tact_ctx_error(ctx));
        int rc = r->with ? tact_optim_step_with(opt, 1, &loss) : tact_optim_step(opt);
        cr_assert_eq(rc, TACT_OK, "%s, step %d: %s", r->devices, s, tact_ctx_error(ctx));
        if (r->with) {
            cr_assert_eq(tact_item(loss, &last), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_assert(isfinite(last) && last > 0, "%s, step %d: loss %g", r->devices, s, last);
        }
        tact_optim_zero_grad(opt);
        tact_scope_end(ctx);
    }
    for (int k = 0, at = 0; k < NP; at += (int)s_sizes[k], k++)
        cr_assert_eq(tact_read(p[k], w + at, sizeof(float) * (size_t)s_sizes[k]), TACT_OK, "%s: %s", r->devices, tact_ctx_error(ctx));
    if (kernels) {
        char list[64];
        snprintf(list, sizeof list, "%s", r->devices);
        char *second = strchr(list, ',');
        if (second) *second++ = '\0';
        tact_device_stats st;
        for (int d = 0; d < 2; d++) {
            kernels[d] = 0;
            if (d == 1 && !second) break;
            cr_assert_eq(tact_ctx_device_stats(ctx, d ? second : list, &st), TACT_OK, "%s", tact_ctx_error(ctx));
            kernels[d] = st.kernels;
        }
    }
    tact_optim_free(&opt);
    tact_ctx_close(&ctx);
}

static const char *s_kind(tact_optim_kind k) { return k == TACT_OPTIM_SGD ? "SGD" : k == TACT_OPTIM_ADAM ? "Adam" : "AdamW"; }
static const char *s_loss(loss_kind l) { return l == LOSS_CE ? "cross-entropy" : l == LOSS_BCE ? "binary cross-entropy" : "binary cross-entropy (logits)"; }

/* The parameters trained over devices (w) are one device's (w1) within
 * 1e-5 relative (with 1e-5 absolute for weights near 0), and moved. */
static void s_same(const float *w1, const float *w, const float *w0, const run_t *r, uint64_t seed) {
    double moved = 0;
    for (int i = 0; i < NW; i++) {
        cr_assert(fabs(w[i] - w1[i]) <= 1e-5 + 1e-5 * fabs(w1[i]), "seed %llu, %s, %s, %s, %s: parameter %d is %.9g, on one device %.9g",
                  (unsigned long long)seed, r->devices, s_kind(r->kind), s_loss(r->loss), r->with ? "step_with" : "step", i, w[i], w1[i]);
        moved += fabs(w1[i] - w0[i]);
    }
    cr_assert_gt(moved, 1e-2, "seed %llu, %s, %s: the training did not move the parameters", (unsigned long long)seed, s_kind(r->kind), s_loss(r->loss));
}

/* The untrained parameters (the same seed's start). */
static void s_start(uint64_t seed, float *w0) {
    uint64_t rng = seed;
    for (int i = 0; i < B * I; i++) s_uniform(&rng);
    for (int i = 0; i < NW; i++) w0[i] = (float)(s_uniform(&rng) - 0.5);
}

/* Each optimizer, through step and step_with, on cross-entropy over two
 * devices: one device's parameters after 20 steps; step and step_with
 * give the same bits. */
static void s_every_optimizer(const char *devices) {
    uint64_t seed = tu_seed();
    float w0[NW], w1[NW], w[NW], wwith[NW];
    s_start(seed, w0);
    for (int kind = TACT_OPTIM_SGD; kind <= TACT_OPTIM_ADAMW; kind++) {
        run_t one = {"CPU", 1, (tact_optim_kind)kind, LOSS_CE, 0, NULL}, dp = {devices, 1, (tact_optim_kind)kind, LOSS_CE, 0, NULL};
        s_train(&one, seed, w1, NULL);
        s_train(&dp, seed, w, NULL);
        s_same(w1, w, w0, &dp, seed);
        dp.with = 1;
        s_train(&dp, seed, wwith, NULL);
        cr_assert(memcmp(w, wwith, sizeof w) == 0, "seed %llu, %s: step and step_with differ", (unsigned long long)seed, s_kind(dp.kind));
    }
}

Test(data_parallel, every_optimizer_through_step_and_step_with_matches_one_device) { s_every_optimizer("CPU,CPU:1"); }

Test(data_parallel, every_optimizer_over_the_cpu_and_opencl_matches_one_device) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    s_every_optimizer("CPU,CL");
}

/* Both binary cross-entropies on sharded logits, with Adam and SGD. */
Test(data_parallel, binary_cross_entropy_on_sharded_logits_matches_one_device) {
    uint64_t seed = tu_seed();
    float w0[NW], w1[NW], w[NW];
    s_start(seed, w0);
    for (int loss = LOSS_BCE; loss <= LOSS_BCE_LOGITS; loss++)
        for (int kind = TACT_OPTIM_SGD; kind <= TACT_OPTIM_ADAM; kind++) {
            run_t one = {"CPU", 1, (tact_optim_kind)kind, (loss_kind)loss, 1, NULL}, dp = {"CPU,CPU:1", 1, (tact_optim_kind)kind, (loss_kind)loss, 1, NULL};
            s_train(&one, seed, w1, NULL);
            s_train(&dp, seed, w, NULL);
            s_same(w1, w, w0, &dp, seed);
        }
}

Test(data_parallel, binary_cross_entropy_over_the_cpu_and_opencl_matches_one_device) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    uint64_t seed = tu_seed();
    float w0[NW], w1[NW], w[NW];
    s_start(seed, w0);
    run_t one = {"CPU", 1, TACT_OPTIM_ADAMW, LOSS_BCE_LOGITS, 1, NULL}, dp = {"CPU,CL", 1, TACT_OPTIM_ADAMW, LOSS_BCE_LOGITS, 1, NULL};
    s_train(&one, seed, w1, NULL);
    s_train(&dp, seed, w, NULL);
    s_same(w1, w, w0, &dp, seed);
}

/* The same run again, and with another thread count: the same bits; each
 * device ran its share of the kernels (the shards' forward and backward,
 * the replicated updates), about as many as the other. */
Test(data_parallel, repeats_bit_for_bit_and_each_device_runs_its_share) {
    uint64_t seed = tu_seed();
    float a[NW], b[NW], c[NW];
    uint64_t ka[2], kb[2];
    run_t r = {"CPU,CPU:1", 1, TACT_OPTIM_ADAM, LOSS_CE, 1, NULL};
    s_train(&r, seed, a, ka);
    s_train(&r, seed, b, kb);
    r.threads = 2;
    s_train(&r, seed, c, NULL);
    cr_assert(memcmp(a, b, sizeof a) == 0, "seed %llu: two runs differ", (unsigned long long)seed);
    cr_assert(memcmp(a, c, sizeof a) == 0, "seed %llu: 1 and 2 threads differ", (unsigned long long)seed);
    cr_assert(ka[0] == kb[0] && ka[1] == kb[1], "kernels per device differ between runs: %llu,%llu and %llu,%llu", (unsigned long long)ka[0],
              (unsigned long long)ka[1], (unsigned long long)kb[0], (unsigned long long)kb[1]);
    /* Every step runs the forward, backward and update on both devices. */
    for (int d = 0; d < 2; d++) cr_assert_geq(ka[d], 3 * STEPS, "device %d ran %llu kernels in %d steps", d, (unsigned long long)ka[d], STEPS);
    cr_assert(ka[1] * 2 >= ka[0] && ka[0] * 2 >= ka[1], "the devices' shares are uneven: %llu and %llu kernels", (unsigned long long)ka[0],
              (unsigned long long)ka[1]);
}

/* Constants an op makes for itself (the cross-entropy's and one_hot's
 * aranges, the optimizer's state) join the device of the tensor they
 * meet: training on CPU:1 alone works as on the first device, and runs
 * there. */
Test(data_parallel, a_model_on_the_second_device_alone_trains_there) {
    uint64_t seed = tu_seed();
    float w0[NW], w1[NW], w[NW];
    s_start(seed, w0);
    run_t one = {"CPU", 1, TACT_OPTIM_ADAM, LOSS_CE, 1, NULL};
    s_train(&one, seed, w1, NULL);
    run_t other = {"CPU,CPU:1", 1, TACT_OPTIM_ADAM, LOSS_CE, 1, "CPU:1"};
    uint64_t k[2];
    s_train(&other, seed, w, k);
    s_same(w1, w, w0, &other, seed);
    /* The first device ran only the copies of the data to CPU:1. */
    cr_assert_geq(k[1], 3 * STEPS, "CPU:1 ran %llu kernels", (unsigned long long)k[1]);
    cr_assert_leq(k[0], 10, "CPU ran %llu kernels", (unsigned long long)k[0]);
}
