/* train.c - `tact train` and `tact eval`: a classifier on Fashion-MNIST (Debian's dataset-fashion-mnist), the main job. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tact.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define PIXELS 784
#define CLASSES 10

/* The dataset's mean and standard deviation of pixel/255 (training set). */
static const float s_mean = 0.2860f, s_std = 0.3530f;

typedef struct {
    int64_t n;
    tact_tensor *images; /* uint8 (n, 28, 28), kept */
    tact_tensor *labels; /* uint8 (n), kept */
} h_data_t;

typedef struct {
    const char *model, *out, *log, *data;
    const char *devices; /* NULL: the context's default (TACT_DEVICE, else CPU) */
    int epochs, batch, threads, steps;
    double lr;
    uint64_t seed;
} h_opts_t;

/* The model: mlp (784-128-10) or cnn (conv-bn-relu-pool twice, then linear). */
typedef struct {
    int cnn;
    tact_layer l[6];
    int nl;
    tact_params params;
    const char *devices; /* data-parallel over these (comma-separated), or NULL: one device */
} h_model_t;

/* ------------------------------------------------------------------ data */

/* Reads one IDX file through tact (gzip, checks) into a kept tensor. */
static tact_tensor *s_load(tact_ctx *ctx, const char *dir, const char *name, int64_t want_dims) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tact_tensor *t = tact_load_idx(ctx, path);
    if (tact_status_of(t) != TACT_OK) {
        fprintf(stderr, "tact train: %s\n(install the Debian package dataset-fashion-mnist, or give --data DIR)\n", tact_error_message(t));
        return NULL;
    }
    if (tact_ndim(t) != want_dims || tact_dtype_of(t) != TACT_UINT8 || (want_dims == 3 && (tact_dim(t, 1) != 28 || tact_dim(t, 2) != 28))) {
        fprintf(stderr, "tact train: %s: not a Fashion-MNIST %s file\n", path, want_dims == 3 ? "image" : "label");
        return NULL;
    }
    return tact_keep(t);
}

static int s_load_set(tact_ctx *ctx, const char *dir, int train, h_data_t *d) {
    memset(d, 0, sizeof *d);
    d->images = s_load(ctx, dir, train ? "train-images-idx3-ubyte.gz" : "t10k-images-idx3-ubyte.gz", 3);
    d->labels = d->images ? s_load(ctx, dir, train ? "train-labels-idx1-ubyte.gz" : "t10k-labels-idx1-ubyte.gz", 1) : NULL;
    if (!d->labels) return -1;
    d->n = tact_dim(d->images, 0);
    if (d->n != tact_dim(d->labels, 0)) {
        fprintf(stderr, "tact train: %s: %" PRId64 " images but %" PRId64 " labels\n", dir, d->n, tact_dim(d->labels, 0));
        return -1;
    }
    double top = 0;
    int rc = tact_item(tact_max(d->labels, -1, NULL, 0), &top);
    if (rc != TACT_OK || top >= CLASSES) {
        fprintf(stderr, "tact train: %s: %s\n", dir, rc != TACT_OK ? tact_ctx_error(ctx) : "a label is not a class (10 classes)");
        return -1;
    }
    return 0;
}

/* A loader of the set's images and labels in batches of b: shuffled by the
 * seed (training; the last short batch dropped), or in order. */
static tact_loader *s_loader(tact_ctx *ctx, const h_data_t *d, int64_t b, int train, uint64_t seed) {
    tact_loader_options lo;
    tact_loader_options_default(&lo);
    lo.batch = b;
    lo.shuffle = train;
    lo.seed = seed;
    lo.drop_last = train;
    tact_loader *l = NULL;
    if (tact_loader_new(&l, ctx, 2, (tact_tensor *[]){d->images, d->labels}, &lo) != TACT_OK)
        fprintf(stderr, "tact train: %s\n", tact_ctx_error(ctx));
    return l;
}

/* --------------------------------------------------------------- model */

/* The number of devices in a list ("CPU,CPU:1": 2). */
static int s_count(const char *devices) {
    int n = 1;
    for (const char *c = devices; c && *c; c++) n += *c == ',';
    return n;
}

/* The model's tensors replicated on every device of devices (data
 * parallel: each device computes its share of the batch with its own
 * copy; the optimizer updates every copy alike). */
static int s_replicate(tact_ctx *ctx, h_model_t *m, const char *devices) {
    for (int i = 0; i < m->nl; i++) {
        tact_tensor **ts[4] = {&m->l[i].weight, &m->l[i].bias, &m->l[i].running_mean, &m->l[i].running_var};
        for (int k = 0; k < 4; k++) {
            if (!*ts[k]) continue;
            /* A new leaf: each copy gets its own gradient, summed over the devices. */
            tact_tensor *r = tact_keep(tact_shard(tact_detach(*ts[k]), devices, TACT_REPLICATE));
            if (tact_requires_grad(*ts[k]) == 1) r = tact_set_requires_grad(r, 1);
            if (tact_status_of(r) != TACT_OK) {
                fprintf(stderr, "tact train: cannot replicate the model on %s: %s\n", devices, tact_error_message(r));
                return 1;
            }
            *ts[k] = r;
        }
    }
    /* The list again, now of the replicated tensors. */
    tact_params_free(&m->params);
    const char *names[6] = {"conv1", "bn1", "conv2", "bn2", "fc"};
    int rc = 0;
    for (int i = 0; !rc && i < m->nl; i++) rc = tact_layer_params(&m->l[i], m->cnn ? names[i] : i ? "l2" : "l1", &m->params);
    if (rc) fprintf(stderr, "tact train: %s\n", tact_ctx_error(ctx));
    m->devices = devices;
    return rc;
}

static int s_model(tact_ctx *ctx, int cnn, const char *devices, h_model_t *m) {
    memset(m, 0, sizeof *m);
    m->cnn = cnn;
    int rc;
    if (!cnn) {
        rc = tact_layer_linear(&m->l[0], ctx, PIXELS, 128, 1);
        if (!rc) rc = tact_layer_linear(&m->l[1], ctx, 128, CLASSES, 1);
        m->nl = 2;
        if (!rc) rc = tact_layer_params(&m->l[0], "l1", &m->params);
        if (!rc) rc = tact_layer_params(&m->l[1], "l2", &m->params);
    } else {
        tact_window w;
        tact_window_default(&w);
        w.npad = 1;
        w.padding[0] = 1;
        rc = tact_layer_conv2d(&m->l[0], ctx, 1, 16, 3, 3, &w, 1);
        if (!rc) rc = tact_layer_batchnorm(&m->l[1], ctx, 16, 1e-5, 0.1, 1, 1);
        if (!rc) rc = tact_layer_conv2d(&m->l[2], ctx, 16, 32, 3, 3, &w, 1);
        if (!rc) rc = tact_layer_batchnorm(&m->l[3], ctx, 32, 1e-5, 0.1, 1, 1);
        if (!rc) rc = tact_layer_linear(&m->l[4], ctx, 32 * 7 * 7, CLASSES, 1);
        m->nl = 5;
        const char *names[5] = {"conv1", "bn1", "conv2", "bn2", "fc"};
        for (int i = 0; !rc && i < 5; i++) rc = tact_layer_params(&m->l[i], names[i], &m->params);
    }
    if (rc) fprintf(stderr, "tact train: cannot make the model: %s\n", tact_ctx_error(ctx));
    if (!rc && s_count(devices) > 1) rc = s_replicate(ctx, m, devices);
    return rc;
}

static tact_tensor *s_forward(const h_model_t *m, tact_tensor *x, int training) {
    if (!m->cnn) return tact_layer_forward(&m->l[1], tact_relu(tact_layer_forward(&m->l[0], x, training)), training);
    tact_window pool;
    tact_window_default(&pool);
    for (int i = 0; i < 4; i += 2)
        x = tact_max_pool2d(tact_relu(tact_layer_forward(&m->l[i + 1], tact_layer_forward(&m->l[i], x, training), training)), &pool);
    return tact_layer_forward(&m->l[4], tact_flatten(x, 1, -1), training);
}

/* A batch of b images (or their labels) for the model: split along the
 * batch over its devices when it has several. */
static tact_tensor *s_split(const h_model_t *m, tact_tensor *t) { return m->devices ? tact_shard(t, m->devices, 0) : t; }

static tact_tensor *s_input(tact_ctx *ctx, const h_model_t *m, int b, const float *x) {
    return s_split(m, m->cnn ? tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){b, 1, 28, 28}, x)
                             : tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){b, PIXELS}, x));
}

/* A loader's batch as the model takes it: the pixels normalized on the
 * device, (b, 1, 28, 28) or (b, 784) float32, and int32 labels. */
static tact_tensor *s_images(const h_model_t *m, tact_tensor *px) {
    int64_t b = tact_dim(px, 0);
    tact_tensor *x = tact_div(tact_sub(tact_div(tact_cast(px, TACT_FLOAT32), tact_scalar(tact_tensor_ctx(px), 255.0)),
                                       tact_scalar(tact_tensor_ctx(px), s_mean)),
                              tact_scalar(tact_tensor_ctx(px), s_std));
    return s_split(m, m->cnn ? tact_reshape(x, 4, (int64_t[]){b, 1, 28, 28}) : tact_reshape(x, 2, (int64_t[]){b, PIXELS}));
}

static tact_tensor *s_labels(const h_model_t *m, tact_tensor *y) { return s_split(m, tact_cast(y, TACT_INT32)); }

/* Correct predictions among the b rows of logits, as a tensor. */
static tact_tensor *s_correct(tact_tensor *logits, tact_tensor *y) { return tact_sum(tact_eq(tact_argmax(logits, 1, 0), y), -1, NULL, 0); }

/* Test-set accuracy, in batches of 1000 without gradients. */
static int s_evaluate(tact_ctx *ctx, const h_model_t *m, const h_data_t *test, double *acc) {
    tact_loader *l = s_loader(ctx, test, 1000, 0, 0);
    int64_t right = 0;
    int rc = l ? TACT_OK : TACT_ENOMEM;
    int was = tact_set_no_grad(ctx, 1);
    for (int got = 1; rc == TACT_OK && got;) {
        tact_scope_begin(ctx);
        tact_tensor *b[2];
        double c = 0;
        got = tact_loader_next(l, b);
        if (got < 0) rc = got;
        if (got > 0) rc = tact_item(s_correct(s_forward(m, s_images(m, b[0]), 0), s_labels(m, b[1])), &c);
        tact_scope_end(ctx);
        right += (int64_t)c;
    }
    tact_set_no_grad(ctx, was);
    tact_loader_free(&l);
    *acc = test->n ? (double)right / (double)test->n : 0;
    if (rc != TACT_OK) fprintf(stderr, "tact: evaluation failed: %s\n", tact_ctx_error(ctx));
    return rc;
}

/* ------------------------------------------------------------- training */

/* One training step on b images x (host floats) with labels y: forward,
 * backward, the optimizer's update realized with the loss (and, when
 * correct is not NULL, the count of right predictions), both read back.
 * Returns TACT_OK or the error (its text in tact_ctx_error). */
static int s_step(tact_ctx *ctx, const h_model_t *m, tact_optim *opt, tact_tensor *input, tact_tensor *labels, double *loss, double *correct) {
    tact_scope_begin(ctx);
    tact_tensor *logits = s_forward(m, input, 1);
    tact_tensor *also[2] = {tact_sparse_categorical_crossentropy(logits, labels, -1, 0), NULL};
    if (correct) also[1] = s_correct(tact_detach(logits), labels);
    int r = tact_backward(also[0], NULL);
    if (r == TACT_OK) r = tact_optim_step_with(opt, correct ? 2 : 1, also);
    tact_optim_zero_grad(opt);
    if (r == TACT_OK) r = tact_item(also[0], loss);
    if (r == TACT_OK && correct) r = tact_item(also[1], correct);
    tact_scope_end(ctx);
    return r;
}

static uint64_t s_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void s_progress(int tty, int epoch, int epochs, int64_t step, int64_t steps, double loss, double acc, double rate, int final) {
    if (tty) {
        int width = 30, fill = steps ? (int)(width * step / steps) : width;
        char bar[64];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\repoch %d/%d [%s] %" PRId64 "/%" PRId64 "  loss %.4f  acc %.3f  %.1f steps/s%s", epoch, epochs, bar, step, steps, loss, acc,
                rate, final ? "\n" : "");
        fflush(stderr);
    } else {
        printf("epoch %d/%d step %" PRId64 "/%" PRId64 " loss %.4f acc %.3f %.1f steps/s\n", epoch, epochs, step, steps, loss, acc, rate);
        fflush(stdout);
    }
}

static int s_train(const h_opts_t *o) {
    double t0 = h_now();
    tact_options opts;
    tact_options_default(&opts);
    opts.cpu_threads = o->threads;
    opts.log_path = o->log;
    opts.devices = o->devices;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &opts) != TACT_OK) {
        fprintf(stderr, "tact train: %s\n", tact_last_open_error());
        return 1;
    }
    h_data_t train, test;
    h_model_t m;
    tact_optim *opt = NULL;
    memset(&train, 0, sizeof train);
    memset(&test, 0, sizeof test);
    int cnn = strcmp(o->model, "cnn") == 0, rc = 1;
    tact_loader *loader = NULL;
    memset(&m, 0, sizeof m);
    if (s_load_set(ctx, o->data, 1, &train) || s_load_set(ctx, o->data, 0, &test)) goto done;
    if (!(loader = s_loader(ctx, &train, o->batch, 1, o->seed))) goto done;
    printf("tact train: %s on Fashion-MNIST (%" PRId64 " training, %" PRId64 " test images), %d epoch%s of batches of %d, Adam lr %g (cosine), seed %" PRIu64
           ", %d thread%s\n",
           o->model, train.n, test.n, o->epochs, o->epochs == 1 ? "" : "s", o->batch, o->lr, o->seed, o->threads,
           o->threads == 1 ? "" : "s");
    tact_manual_seed(ctx, o->seed);
    if (s_model(ctx, cnn, o->devices, &m)) goto done;
    tact_optim_options oo;
    tact_optim_options_default(&oo, TACT_OPTIM_ADAM);
    oo.lr = o->lr;
    if (tact_optim_new(&opt, ctx, &oo, m.params.n, m.params.tensors) != TACT_OK) {
        fprintf(stderr, "tact train: %s\n", tact_ctx_error(ctx));
        goto done;
    }
    int tty = isatty(STDERR_FILENO);
    int64_t per_epoch = tact_loader_batches(loader), done_steps = 0, total = o->steps > 0 ? o->steps : per_epoch * o->epochs;
    double ema_loss = 0, ema_acc = 0, t_first = 0, t_start = h_now();
    for (int e = 0; e < o->epochs && done_steps < total; e++) {
        double t_epoch = h_now();
        int64_t steps = per_epoch < total - done_steps ? per_epoch : total - done_steps;
        for (int64_t s = 0; s < steps; s++) {
            /* Cosine annealing to 1/50 of the rate, set every 10 steps. */
            if (done_steps % 10 == 0 && tact_optim_set_lr(opt, tact_lr_cosine(o->lr, o->lr / 50, done_steps, total)) != TACT_OK) {
                fprintf(stderr, "\ntact train: %s\n", tact_ctx_error(ctx));
                goto done;
            }
            double lv = 0, cv = 0;
            tact_scope_begin(ctx);
            tact_tensor *b[2];
            int r = tact_loader_next(loader, b);
            if (r == 0) r = tact_loader_next(loader, b); /* (that was the end of the last epoch) */
            if (r == 1) r = s_step(ctx, &m, opt, s_images(&m, b[0]), s_labels(&m, b[1]), &lv, &cv);
            tact_scope_end(ctx);
            if (r != TACT_OK) {
                fprintf(stderr, "\ntact train: step %" PRId64 ": %s\n", done_steps, tact_ctx_error(ctx));
                goto done;
            }
            if (!done_steps) t_first = h_now() - t_start;
            done_steps++;
            double a = cv / o->batch;
            ema_loss = done_steps == 1 ? lv : 0.95 * ema_loss + 0.05 * lv;
            ema_acc = done_steps == 1 ? a : 0.95 * ema_acc + 0.05 * a;
            double rate = (double)(s + 1) / (h_now() - t_epoch);
            if ((tty && (s % 5 == 4 || s + 1 == steps)) || (!tty && (s % 100 == 99 || s + 1 == steps)))
                s_progress(tty, e + 1, o->epochs, s + 1, steps, ema_loss, ema_acc, rate, s + 1 == steps);
        }
    }
    double train_s = h_now() - t_start, acc = 0;
    if (s_evaluate(ctx, &m, &test, &acc) != TACT_OK) goto done;
    int nd = s_count(o->devices);
    printf("test accuracy %.2f%% (%" PRId64 " images); %" PRId64 " steps in %.1f s (first step %.2f s, with compilation), %.1f s in all; %d device%s (%s)\n",
           100 * acc, test.n, done_steps, train_s, t_first, h_now() - t0, nd, nd == 1 ? "" : "s", o->devices ? o->devices : "the default");
    if (o->out) {
        if (tact_save_safetensors(ctx, o->out, m.params.n, (const char *const *)m.params.names, m.params.tensors) != TACT_OK) {
            fprintf(stderr, "tact train: cannot save %s: %s\n", o->out, tact_ctx_error(ctx));
            goto done;
        }
        printf("model saved to %s (evaluate it with: tact eval %s)\n", o->out, o->out);
    }
    rc = 0;
done:
    tact_optim_free(&opt);
    tact_params_free(&m.params);
    tact_loader_free(&loader);
    tact_ctx_close(&ctx);
    return rc;
}

/* `tact eval MODEL`: the model's parameters from the file into a fresh model of the kind its names say. */
static int s_eval(const char *path, const h_opts_t *o) {
    tact_options opts;
    tact_options_default(&opts);
    opts.cpu_threads = o->threads;
    opts.devices = o->devices;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &opts) != TACT_OK) {
        fprintf(stderr, "tact eval: %s\n", tact_last_open_error());
        return 1;
    }
    h_data_t test;
    h_model_t m;
    memset(&m, 0, sizeof m);
    memset(&test, 0, sizeof test);
    int rc = 1;
    /* The kind of model its names say; a file that is neither (or no
     * model file at all) is refused before the data is read. */
    int cnn = tact_status_of(tact_load_safetensors(ctx, path, "conv1.weight")) == TACT_OK;
    tact_tensor *mlp = cnn ? NULL : tact_load_safetensors(ctx, path, "l1.weight");
    if (mlp && tact_status_of(mlp) != TACT_OK) {
        fprintf(stderr, "tact eval: %s\n", tact_error_message(mlp));
        goto done;
    }
    if (s_load_set(ctx, o->data, 0, &test) || s_model(ctx, cnn, NULL, &m)) goto done;
    if (tact_params_load(ctx, path, &m.params) != TACT_OK) {
        fprintf(stderr, "tact eval: %s (a %s model)\n", tact_ctx_error(ctx), cnn ? "cnn" : "mlp");
        goto done;
    }
    if (s_count(o->devices) > 1 && s_replicate(ctx, &m, o->devices)) goto done;
    double acc = 0;
    if (s_evaluate(ctx, &m, &test, &acc) != TACT_OK) goto done;
    printf("%s (%s): test accuracy %.2f%% (%" PRId64 " images)\n", path, cnn ? "cnn" : "mlp", 100 * acc, test.n);
    rc = 0;
done:
    tact_params_free(&m.params);
    tact_ctx_close(&ctx);
    return rc;
}

void h_train_usage(FILE *f) {
    fprintf(f, "usage: tact train [--model mlp|cnn] [--epochs N] [--steps N] [--batch N] [--lr X] [--threads N] [--seed N]\n"
               "                  [--devices LIST] [--out FILE.safetensors] [--log FILE] [--data DIR]\n"
               "       tact eval MODEL.safetensors [--threads N] [--devices LIST] [--data DIR]\n"
               "--devices CPU,CPU:1 trains data-parallel: the model replicated on each device, every batch split over them\n"
               "defaults: cnn, 3 epochs, batch 128, lr 0.002 (cosine), all cores, seed 42, data in " DATA_DIR "\n"
               "ranges: --epochs 1..999, --steps 1 or more (stop early), --batch 1..4096, --lr above 0, --threads 0 (one per core)\n"
               "        to 8 per core (at least 64), --seed 0 or more\n");
}

static int s_parse(int argc, char **argv, h_opts_t *o, const char **file) {
    *o = (h_opts_t){"cnn", NULL, NULL, DATA_DIR, NULL, 3, 128, 0, 0, 0.002, 42};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (a[0] != '-' && file && !*file) {
            *file = a;
            continue;
        }
        if (!strcmp(a, "--help")) {
            h_train_usage(stdout);
            return 1;
        }
        if (!v) {
            fprintf(stderr, "tact: %s needs a value\n", a);
            return -1;
        }
        i++;
        long n = strtol(v, &end, 10);
        int num = end && *end == '\0' && end != v;
        if (!strcmp(a, "--model") && (!strcmp(v, "mlp") || !strcmp(v, "cnn"))) o->model = v;
        else if (!strcmp(a, "--epochs") && num && n > 0 && n < 1000) o->epochs = (int)n;
        else if (!strcmp(a, "--steps") && num && n > 0) o->steps = (int)n;
        else if (!strcmp(a, "--batch") && num && n > 0 && n <= 4096) o->batch = (int)n;
        else if (!strcmp(a, "--threads") && num && n >= 0 && n <= 65536) o->threads = (int)n; /* the context checks the real maximum */
        else if (!strcmp(a, "--seed") && num && n >= 0) o->seed = (uint64_t)n;
        else if (!strcmp(a, "--lr") && (o->lr = strtod(v, &end)) > 0 && *end == '\0') continue;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--log")) o->log = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--devices") && *v) o->devices = v; /* the context checks the list */
        else {
            fprintf(stderr, "tact: bad option %s %s\n", a, v);
            h_train_usage(stderr);
            return -1;
        }
    }
    return 0;
}

int h_train(int argc, char **argv) {
    h_opts_t o;
    int r = s_parse(argc, argv, &o, NULL);
    return r ? (r > 0 ? 0 : 2) : s_train(&o);
}

int h_eval(int argc, char **argv) {
    h_opts_t o;
    const char *file = NULL;
    int r = s_parse(argc, argv, &o, &file);
    if (r) return r > 0 ? 0 : 2;
    if (!file) {
        h_train_usage(stderr);
        return 2;
    }
    return s_eval(file, &o);
}

/* ---------------------------------------------------------------- bench */

/* Milliseconds per training step of the model on one fixed random batch
 * (the loss read every step, as a training loop does), after warm-up
 * steps; *first gets the first step's time, compilation included. */
double h_bench_step(int cnn, const char *device, int steps, int threads, double *first) {
    tact_options opts;
    tact_options_default(&opts);
    opts.cpu_threads = threads;
    opts.devices = device;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &opts) != TACT_OK) {
        fprintf(stderr, "bench: %s\n", tact_last_open_error());
        return -1;
    }
    enum { B = 128 };
    float *x = malloc(sizeof *x * B * PIXELS);
    int32_t y[B];
    uint64_t rng = 7;
    for (int i = 0; x && i < B * PIXELS; i++) x[i] = (float)((double)(s_rand(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
    for (int i = 0; i < B; i++) y[i] = (int32_t)(s_rand(&rng) % CLASSES);
    h_model_t m;
    tact_optim *opt = NULL;
    double ms = -1, t0 = 0;
    tact_optim_options oo;
    tact_optim_options_default(&oo, TACT_OPTIM_ADAM);
    oo.lr = 0.002;
    tact_manual_seed(ctx, 1);
    if (!x || s_model(ctx, cnn, NULL, &m) || tact_optim_new(&opt, ctx, &oo, m.params.n, m.params.tensors) != TACT_OK) goto done;
    /* The model exists before the first step, as PyTorch's does when the
     * peer starts its clock: its parameters are drawn here, untimed. */
    if (tact_realize(ctx, (int)m.params.n, m.params.tensors) != TACT_OK) goto done;
    /* One batch for every step, as the peer's. */
    tact_tensor *in = s_input(ctx, &m, B, x), *labels = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){B}, y);
    /* 3 warm-up steps, then the best of 3 windows of `steps` (the box is
     * shared: the best window is the machine's speed; the peer is timed the
     * same way). */
    for (int s = 0; s < 3 + 3 * steps; s++) {
        if (s >= 3 && (s - 3) % steps == 0) t0 = h_now();
        double t = h_now(), lv;
        if (s_step(ctx, &m, opt, in, labels, &lv, NULL) != TACT_OK) {
            fprintf(stderr, "bench train: %s\n", tact_ctx_error(ctx));
            ms = -1;
            goto done;
        }
        if (s == 0) *first = (h_now() - t) * 1e3;
        if (s >= 3 && (s - 3) % steps == steps - 1) {
            double w = (h_now() - t0) / steps * 1e3;
            if (ms < 0 || w < ms) ms = w;
        }
    }
done:
    tact_optim_free(&opt);
    tact_params_free(&m.params);
    free(x);
    tact_ctx_close(&ctx);
    return ms;
}

int h_bench_train(int quick) {
    int steps = quick ? 5 : 30;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = nproc > 0 ? (int)nproc : 1;
    /* The first step compiles into a fresh kernel cache, so it counts the
     * compilation a new program pays. */
    char dir[] = "/tmp/tact-bench-train-XXXXXX", cmd[1400];
    const char *old = getenv("TACT_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    if (!mkdtemp(dir)) return 1;
    setenv("TACT_CACHE_DIR", dir, 1);
    double first = 0, unused = 0, cnn = h_bench_step(1, NULL, steps, threads, &first);
    if (saved) setenv("TACT_CACHE_DIR", saved, 1);
    else unsetenv("TACT_CACHE_DIR");
    free(saved);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench train: cannot remove %s\n", dir);
    double mlp = h_bench_step(0, NULL, steps * 4, threads, &unused);
    if (cnn < 0 || mlp < 0) return 1;
    /* PyTorch through harness/peer_train.py (h_peer_open picks the Python). */
    char peer[400] = "", name[200], why[200] = "", args[64];
    double pm = 0, pc = 0, pf = 0;
    int found = 0;
    snprintf(args, sizeof args, "%d %d", threads, steps);
    FILE *f = h_peer_open("peer_train.py", "torch", args, why, sizeof why);
    if (f) {
        found = fscanf(f, "%lf %lf %lf %199s", &pm, &pc, &pf, name) == 4;
        pclose(f);
        if (found) snprintf(peer, sizeof peer, "%s%s%s", name, why[0] ? " " : "", why);
    }
    if (!found) {
        snprintf(peer, sizeof peer, "none (PyTorch not installed)");
        pm = pc = pf = 0;
    }
    h_line("train.mlp_step_ms", mlp, "ms", peer, pm, found ? pm / mlp : 0);
    h_line("train.cnn_step_ms", cnn, "ms", peer, pc, found ? pc / cnn : 0);
    h_line("train.first_step_ms", first, "ms", peer, pf, found ? pf / first : 0);
    return 0;
}
