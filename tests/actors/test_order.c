/* test_order.c - a multi-sender actor orders its work by what messages carry, not by arrival. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "actor.h"
#include "mem.h"
#include "testutil.h"

enum { S_PRODUCERS = 4, S_PER_PRODUCER = 500, S_RUNS = 20 };

/* One processed message as the consumer saw it. */
typedef struct {
    uint32_t sender;
    uint32_t key;
    uint64_t seq;
} s_seen_t;

typedef struct {
    uint32_t report_to;
    size_t ninputs, eos;
    s_seen_t *seen;
    size_t n, cap;
} s_consumer_t;

static int s_consumer_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    (void)err;
    ta_actor_set_state(self, arg);
    return TACT_OK;
}

/* Records every NUMS; after the last EOS sends the whole record as TOTAL.digest. */
static int s_consumer_handle(ta_actor_t *self, ta_msg_t *m) {
    s_consumer_t *c = ta_actor_state(self);
    if (m->type == TA_MSG_NUMS) {
        if (ta_grow((void **)&c->seen, &c->cap, c->n + 1, sizeof *c->seen) != TACT_OK)
            return ta_actor_fail(self, TACT_ENOMEM, "consumer: out of memory");
        c->seen[c->n++] = (s_seen_t){m->sender, (uint32_t)m->as.nums.key, m->seq};
        return TACT_OK;
    }
    if (m->type == TA_MSG_EOS && ++c->eos == c->ninputs) {
        ta_msg_t out;
        ta_msg_init(&out, TA_MSG_TOTAL);
        out.as.total.count = c->n;
        out.as.total.digest.ptr = (const uint8_t *)c->seen;
        out.as.total.digest.len = c->n * sizeof *c->seen;
        return ta_actor_send(self, c->report_to, &out);
    }
    return TACT_OK;
}

static void s_consumer_fini(ta_actor_t *self) {
    s_consumer_t *c = ta_actor_state(self);
    ta_free(c->seen);
}

static const ta_actor_ops_t s_consumer_ops = {"consumer", s_consumer_init, s_consumer_handle, s_consumer_fini, NULL};

typedef struct {
    ta_port_t *port;
    uint32_t dest;
    int count;
    uint64_t rng; /* jitter, so arrival order differs from run to run */
} s_producer_t;

static void *s_produce(void *arg) {
    s_producer_t *p = arg;
    for (int k = 0; k < p->count; k++) {
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_NUMS);
        m.as.nums.key = (uint64_t)k;
        cr_assert_eq(ta_port_send(p->port, p->dest, &m, NULL), TACT_OK);
        if (tu_rand(&p->rng) % 64 == 0) usleep((useconds_t)(tu_rand(&p->rng) % 300));
    }
    ta_msg_t eos;
    ta_msg_init(&eos, TA_MSG_EOS);
    cr_assert_eq(ta_port_send(p->port, p->dest, &eos, NULL), TACT_OK);
    return NULL;
}

/* One run: S_PRODUCERS threads flood one consumer; returns what it processed
 * (caller frees) and its length in *n. */
static s_seen_t *s_flood(uint64_t jitter_seed, size_t *n, int drop_eos_of_last) {
    ta_rt_t *rt = tu_rt(TA_TRANSPORT_INPROC, drop_eos_of_last ? 300 : 10000, NULL);
    ta_error_t err;
    ta_port_t *report;
    cr_assert_eq(ta_port_new(rt, "report", &report, &err), TACT_OK);
    s_producer_t prod[S_PRODUCERS];
    uint32_t inputs[S_PRODUCERS];
    for (int i = 0; i < S_PRODUCERS; i++) {
        cr_assert_eq(ta_port_new(rt, "producer", &prod[i].port, &err), TACT_OK);
        inputs[i] = ta_port_id(prod[i].port);
        prod[i].count = S_PER_PRODUCER;
        prod[i].rng = jitter_seed + (uint64_t)i * 7919;
    }
    s_consumer_t state = {ta_port_id(report), S_PRODUCERS - (drop_eos_of_last ? 1 : 0), 0, NULL, 0, 0};
    /* The producer that "dies" is declared but never sends anything. */
    ta_actor_opts_t opts = {inputs, S_PRODUCERS, NULL};
    ta_actor_t *consumer;
    cr_assert_eq(ta_actor_start(rt, &s_consumer_ops, &state, &opts, &consumer, &err), TACT_OK);
    pthread_t th[S_PRODUCERS];
    int nthreads = S_PRODUCERS - (drop_eos_of_last ? 1 : 0);
    for (int i = 0; i < nthreads; i++) {
        prod[i].dest = ta_actor_id(consumer);
        pthread_create(&th[i], NULL, s_produce, &prod[i]);
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    ta_msg_t total;
    ta_msg_init(&total, TA_MSG_READY);
    cr_assert_eq(ta_port_recv(report, &total, 10000, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(total.type, TA_MSG_TOTAL);
    *n = total.as.total.count;
    s_seen_t *copy = malloc(total.as.total.digest.len + 1);
    memcpy(copy, total.as.total.digest.ptr, total.as.total.digest.len);
    ta_msg_release(&total);
    if (drop_eos_of_last) {
        char last[256];
        cr_assert_geq(ta_rt_reports(rt, last, sizeof last), 1);
        cr_assert(strstr(last, "silent for 300 ms after seq 0; treated as ended"), "%s", last);
    }
    cr_assert_eq(ta_actor_stop(&consumer, &err), TACT_OK);
    for (int i = 0; i < S_PRODUCERS; i++) ta_port_destroy(&prod[i].port);
    ta_port_destroy(&report);
    cr_assert_eq(ta_rt_destroy(&rt, &err), TACT_OK);
    return copy;
}

Test(actors_order, flood_from_four_threads_is_processed_identically_every_run) {
    uint64_t seed = tu_seed();
    size_t n0;
    s_seen_t *first = s_flood(seed, &n0, 0);
    cr_assert_eq(n0, (size_t)S_PRODUCERS * S_PER_PRODUCER, "seed %#llx", (unsigned long long)seed);
    /* The order is by (seq, sender): seq 1 of every producer, then seq 2, ... */
    for (size_t i = 0; i < n0; i++) {
        cr_assert_eq(first[i].seq, i / S_PRODUCERS + 1, "seed %#llx: message %zu", (unsigned long long)seed, i);
        cr_assert_eq(first[i].sender, 2 + i % S_PRODUCERS, "seed %#llx: message %zu", (unsigned long long)seed, i);
        cr_assert_eq(first[i].key, i / S_PRODUCERS);
    }
    for (int run = 1; run < S_RUNS; run++) {
        size_t n;
        s_seen_t *again = s_flood(seed + (uint64_t)run * 104729, &n, 0);
        cr_assert_eq(n, n0);
        cr_assert(memcmp(again, first, n * sizeof *first) == 0, "seed %#llx: run %d processed another order",
                  (unsigned long long)seed, run);
        free(again);
    }
    free(first);
}

Test(actors_order, a_silent_input_is_given_up_after_the_timeout, .timeout = 60) {
    size_t n;
    s_seen_t *seen = s_flood(tu_seed(), &n, 1);
    cr_assert_eq(n, (size_t)(S_PRODUCERS - 1) * S_PER_PRODUCER, "every message of the live producers arrives");
    free(seen);
}
