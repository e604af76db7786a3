/* demo.c - `tact demo`: work fanned out to two actors, merged in a fixed order by a third. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "actor.h"
#include "harness.h"
#include "mem.h"

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

int h_demo(int argc, char **argv) {
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
    ta_actor_opts_t opts = {inputs, 2};
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
