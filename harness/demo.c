/* demo.c - `tact demo`: a tensor program through the pipeline; `--actors`: the bare actor runtime. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "actor.h"
#include "harness.h"
#include "mem.h"
#include "tact.h"
#include <math.h>

enum { S_ITEMS = 64, S_VALUES = 4096 };

/* Shared wiring, written by the owner before any message is sent. */
typedef struct {
    uint32_t sum_id, client_id;
} s_wiring_t;

/* square: NUMS(values) -> NUMS(values squared) to the sum actor, zero-copy. */
static int s_square_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    (void)err;
    ta_actor_set_state(self, arg);
    return TACT_OK;
}

static void s_free_bulk(void *data, void *owner) {
    (void)owner;
    ta_free(data);
}

static int s_square_handle(ta_actor_t *self, ta_msg_t *m) {
    s_wiring_t *w = ta_actor_state(self);
    ta_msg_t out;
    if (m->type == TA_MSG_EOS) {
        ta_msg_init(&out, TA_MSG_EOS);
        return ta_actor_send(self, w->sum_id, &out);
    }
    if (m->type != TA_MSG_NUMS || m->bulk.len % sizeof(double))
        return ta_actor_fail(self, TACT_EINVAL, "square: expected NUMS with float64 values");
    size_t n = m->bulk.len / sizeof(double);
    double *sq = ta_malloc(m->bulk.len ? m->bulk.len : 1);
    if (!sq) return ta_actor_fail(self, TACT_ENOMEM, "square: out of memory");
    for (size_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, m->bulk.ptr + i * sizeof v, sizeof v);
        sq[i] = v * v;
    }
    ta_msg_init(&out, TA_MSG_NUMS);
    out.as.nums = m->as.nums;
    out.bulk.ptr = (const uint8_t *)sq;
    out.bulk.len = m->bulk.len;
    out.bulk_free = s_free_bulk; /* in-process the bytes travel without a copy */
    return ta_actor_send(self, w->sum_id, &out);
}

static const ta_actor_ops_t s_square_ops = {"square", s_square_init, s_square_handle, NULL, NULL};

/* sum: merges its inputs in (seq, sender) order, so the float sum is the same every run. */
typedef struct {
    s_wiring_t *w;
    double sum;
    uint64_t count, eos;
    size_t ninputs;
} s_sum_t;

static int s_sum_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_sum_t *st = ta_calloc(1, sizeof *st);
    if (!st) return ta_error_set(err, TACT_ENOMEM, "sum: out of memory");
    st->w = arg;
    st->ninputs = 2;
    ta_actor_set_state(self, st);
    return TACT_OK;
}

static int s_sum_handle(ta_actor_t *self, ta_msg_t *m) {
    s_sum_t *st = ta_actor_state(self);
    if (m->type == TA_MSG_NUMS) {
        for (size_t i = 0; i < m->bulk.len / sizeof(double); i++) {
            double v;
            memcpy(&v, m->bulk.ptr + i * sizeof v, sizeof v);
            st->sum += v;
        }
        st->count++;
        return TACT_OK;
    }
    if (m->type == TA_MSG_EOS && ++st->eos == st->ninputs) {
        ta_msg_t out;
        ta_msg_init(&out, TA_MSG_TOTAL);
        out.as.total.count = st->count;
        out.as.total.sum = st->sum;
        return ta_actor_send(self, st->w->client_id, &out);
    }
    return m->type == TA_MSG_EOS ? TACT_OK : ta_actor_fail(self, TACT_EINVAL, "sum: unexpected message");
}

static void s_sum_fini(ta_actor_t *self) { ta_free(ta_actor_state(self)); }

static const ta_actor_ops_t s_sum_ops = {"sum", s_sum_init, s_sum_handle, s_sum_fini, NULL};

static int s_demo_actors(int argc, char **argv) {
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    for (int i = 0; i < argc; i++) {
        int r = h_runtime_option(argc, argv, &i, &cfg);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "tact demo: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    ta_error_t err = {0, ""};
    ta_rt_t *rt = NULL;
    ta_port_t *client = NULL;
    ta_actor_t *sq[2] = {NULL, NULL}, *sum = NULL;
    s_wiring_t w = {0, 0};
    static double values[S_ITEMS][S_VALUES];
    int status = 1;
    double t0 = h_now();

    if (ta_rt_new(&rt, &cfg, &err) != TACT_OK) goto fail;
    printf("tact %s demo: actors over %s://%s%s\n", tact_version(), ta_transport_name(cfg.transport),
           cfg.log_path ? ", recording to " : "", cfg.log_path ? cfg.log_path : "");
    if (ta_port_new(rt, "client", &client, &err) != TACT_OK) goto fail;
    w.client_id = ta_port_id(client);
    for (int i = 0; i < 2; i++)
        if (ta_actor_start(rt, &s_square_ops, &w, NULL, &sq[i], &err) != TACT_OK) goto fail;
    uint32_t inputs[2] = {ta_actor_id(sq[0]), ta_actor_id(sq[1])};
    ta_actor_opts_t opts = {inputs, 2, NULL};
    if (ta_actor_start(rt, &s_sum_ops, &w, &opts, &sum, &err) != TACT_OK) goto fail;
    w.sum_id = ta_actor_id(sum);
    printf("  started: client (port %" PRIu32 "), square (%" PRIu32 "), square (%" PRIu32 "), sum (%" PRIu32
           ", merges both squares in (seq, sender) order)\n",
           w.client_id, inputs[0], inputs[1], w.sum_id);

    /* Work: item k goes to square k % 2; values are a fixed pseudo-random sequence. */
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int k = 0; k < S_ITEMS; k++) {
        for (int i = 0; i < S_VALUES; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            values[k][i] = (double)(x >> 11) / 9007199254740992.0 - 0.5;
        }
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_NUMS);
        m.as.nums.key = (uint64_t)k;
        m.as.nums.label = ta_bytes_str("values");
        m.bulk.ptr = (const uint8_t *)values[k];
        m.bulk.len = sizeof values[k];
        if (ta_port_send(client, inputs[k % 2], &m, &err) != TACT_OK) goto fail;
    }
    for (int i = 0; i < 2; i++) {
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_EOS);
        if (ta_port_send(client, inputs[i], &m, &err) != TACT_OK) goto fail;
    }
    printf("  sent %d NUMS messages of %d float64 (%zu KiB each, bulk frames) and 2 EOS\n", S_ITEMS, S_VALUES,
           sizeof values[0] / 1024);
    ta_msg_t total;
    ta_msg_init(&total, TA_MSG_TOTAL);
    if (ta_port_recv(client, &total, -1, &err) != TACT_OK) goto fail;
    if (total.type == TA_MSG_ERROR) {
        ta_error_set(&err, (int)total.as.error.code, "%.*s", (int)total.as.error.text.len,
                     (const char *)total.as.error.text.ptr);
        ta_msg_release(&total);
        goto fail;
    }

    /* The merge order is item order (seq 1 of square 1, seq 1 of square 2, ...),
     * so the same loop in plain C gives the same bits. */
    double want = 0;
    for (int k = 0; k < S_ITEMS; k++)
        for (int i = 0; i < S_VALUES; i++) want += values[k][i] * values[k][i];
    int same = memcmp(&want, &total.as.total.sum, sizeof want) == 0;
    printf("  sum received: %" PRIu64 " items, sum of squares %.17g\n", total.as.total.count, total.as.total.sum);
    printf("  plain C loop:           sum of squares %.17g -> %s\n", want, same ? "bitwise identical" : "MISMATCH");
    ta_msg_release(&total);
    for (int i = 0; i < 2; i++)
        if (ta_actor_stop(&sq[i], &err) != TACT_OK) goto fail;
    if (ta_actor_stop(&sum, &err) != TACT_OK) goto fail;
    ta_port_destroy(&client);
    if (ta_rt_destroy(&rt, &err) != TACT_OK) goto fail;
    printf("  stopped all actors cleanly in %.1f ms%s%s\n", (h_now() - t0) * 1e3, cfg.log_path ? "; log written to " : "",
           cfg.log_path ? cfg.log_path : "");
    return same ? 0 : 1;
fail:
    fprintf(stderr, "tact demo: %s (%s)\n", err.text, tact_status_name(err.code));
    for (int i = 0; i < 2; i++) ta_actor_stop(&sq[i], NULL);
    ta_actor_stop(&sum, NULL);
    ta_port_destroy(&client);
    ta_rt_destroy(&rt, NULL);
    return status;
}

/* ------------------------------------------------------- the tensor demo */

/* A plain C reference: logits = relu(x @ w1 + b1) @ w2, then softmax rows. */
static void s_reference(const float *x, const float *w1, const float *b1, const float *w2, float *out, int n, int d, int h, int k) {
    float *hid = calloc((size_t)n * h, sizeof *hid);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < h; j++) {
            float acc = 0;
            for (int q = 0; q < d; q++) acc = acc + x[i * d + q] * w1[q * h + j];
            acc = acc + b1[j];
            hid[i * h + j] = acc > 0 ? acc : 0;
        }
    for (int i = 0; i < n; i++) {
        double row[64], mx = -INFINITY, sum = 0;
        for (int j = 0; j < k; j++) {
            float acc = 0;
            for (int q = 0; q < h; q++) acc = acc + hid[i * h + q] * w2[q * k + j];
            row[j] = acc;
            mx = fmax(mx, row[j]);
        }
        for (int j = 0; j < k; j++) sum += exp(row[j] - mx);
        for (int j = 0; j < k; j++) out[i * k + j] = (float)(exp(row[j] - mx) / sum);
    }
    free(hid);
}


static float *s_rand(size_t n, uint64_t *x, float scale) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
        p[i] = ((float)(*x >> 40) / 16777216.0f - 0.5f) * scale;
    }
    return p;
}

int h_demo(int argc, char **argv) {
    if (argc > 0 && strcmp(argv[0], "--actors") == 0) return s_demo_actors(argc - 1, argv + 1);
    tact_options o;
    tact_options_default(&o);
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--log") == 0 && i + 1 < argc) o.log_path = argv[++i];
        else if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc) o.transport = argv[++i];
        else {
            fprintf(stderr, "usage: tact demo [--transport inproc|ipc|tcp|tcp-insecure] [--log FILE] | tact demo --actors [...]\n");
            return 2;
        }
    }
    enum { N = 256, D = 64, H = 32, K = 10 };
    uint64_t seed = 0x5eed;
    float *x = s_rand(N * D, &seed, 2), *w1 = s_rand(D * H, &seed, 0.5f), *b1 = s_rand(H, &seed, 0.1f),
          *w2 = s_rand(H * K, &seed, 0.5f), *want = malloc(N * K * sizeof *want), *got = malloc(N * K * sizeof *got);
    double t0 = h_now();
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &o) != TACT_OK) {
        fprintf(stderr, "tact demo: %s\n", tact_last_open_error());
        return 1;
    }
    printf("tact %s demo: a 2-layer MLP forward pass, softmax(relu(x @ w1 + b1) @ w2), x %dx%d\n", tact_version(), N, D);
    printf("  pipeline: client -> graph -> scheduler -> planner -> 2 compilers -> CPU executor, over %s%s%s\n",
           o.transport ? o.transport : "inproc", o.log_path ? ", recording to " : "", o.log_path ? o.log_path : "");
    int64_t sx[2] = {N, D}, sw1[2] = {D, H}, sb1[2] = {1, H}, sw2[2] = {H, K};
    tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, sx, x), *tw1 = tact_from_data(ctx, TACT_FLOAT32, 2, sw1, w1),
                *tb1 = tact_from_data(ctx, TACT_FLOAT32, 2, sb1, b1), *tw2 = tact_from_data(ctx, TACT_FLOAT32, 2, sw2, w2);
    tact_tensor *hid = tact_maximum(tact_add(tact_matmul(tx, tw1), tb1), tact_scalar(ctx, 0.0));
    tact_tensor *logits = tact_matmul(hid, tw2);
    int axis = 1;
    tact_tensor *m = tact_max(logits, 1, &axis, 1);
    tact_tensor *e = tact_exp2(tact_mul(tact_sub(logits, m), tact_scalar(ctx, 1.4426950408889634)));
    tact_tensor *p = tact_div(e, tact_sum(e, 1, &axis, 1));
    int rc = tact_realize(ctx, 1, &p);
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    double t_first = h_now() - t0;
    if (rc == TACT_OK) rc = tact_read(p, got, N * K * sizeof *got);
    if (rc != TACT_OK) {
        fprintf(stderr, "tact demo: %s\n", tact_ctx_error(ctx));
        tact_ctx_close(&ctx);
        return 1;
    }
    printf("  built %s lazily, then realized it in %llu fused kernels (%.1f ms incl. start-up and compiles)\n",
           "matmul, bias, relu, matmul, max, exp2, sum, div", (unsigned long long)st.kernels, t_first * 1e3);
    s_reference(x, w1, b1, w2, want, N, D, H, K);
    double worst = 0;
    for (int i = 0; i < N * K; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    printf("  checked against a plain C loop: max |difference| %.3g over %d probabilities -> %s\n", worst, N * K,
           worst < 1e-5 ? "OK" : "MISMATCH");
    /* One more realize on the computed result: the pipeline is warm now. */
    t0 = h_now();
    tact_scope_begin(ctx);
    tact_tensor *again = tact_sum(tact_mul(p, tact_scalar(ctx, 1.0)), -1, NULL, 0);
    double total = 0;
    rc = tact_item(again, &total);
    tact_scope_end(ctx);
    printf("  sum of all probabilities = %.4f (expect %d), one more realize: %.2f ms\n", total, N,
           (h_now() - t0) * 1e3);
    rc = tact_ctx_close(&ctx);
    free(x), free(w1), free(b1), free(w2), free(want), free(got);
    return rc == TACT_OK && worst < 1e-5 ? 0 : 1;
}
