/* worker.c - `tact worker`: devices of this machine for clients elsewhere (docs/workers.md), and `tact keygen`. */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "cc.h"
#include "device.h"
#include "harness.h"
#include "keys.h"
#include "link.h"
#include "mem.h"
#include "pipeline.h"

/*
 * A worker serves any number of clients, each in a session of its own: a
 * runtime with the client's port ids, where the executors of the devices
 * the client asked for, and compilers for them (under the ids of the
 * client's compilers), are actors, and every other id is a route to the
 * session's mailbox, whose messages go back to the client.  One thread
 * passes messages between the clients' connection and the sessions,
 * checking each: a client may send only to its executors, as one of its
 * own ports; the worker runs no command a client names (its own compiler
 * replaces the client's in CONFIG) and reads no file but its cache.
 */

typedef struct {
    uint8_t rid[256]; /* the client's routing id on the ROUTER */
    size_t rid_len;
    ta_rt_t *rt;
    ta_actor_t **actors; /* the executors, then the compilers */
    uint32_t executors[64];
    int nexecutors;
    uint32_t compilers[TA_MAX_COMPILERS];
    int ncompilers, configured;
    uint32_t ports;
    ta_port_t *port; /* the session's own, which configures the compilers */
    void *mailbox;   /* PULL: what the session's actors send the client */
    void **pushes;   /* by id, to the executors' mailboxes */
    int64_t last_rx;
    /* Its life: started and ended in threads of their own (starting
     * actors, stopping them after a long kernel), so the thread passing
     * messages never waits for one session while the others need it. */
    int state;          /* S_STARTING, S_READY, S_ENDING */
    int busy;           /* a start or end thread runs (atomic done flag below) */
    int done;           /* set by that thread when it finished */
    pthread_t thread;
    uint8_t *hello;     /* HELLO's envelope, for the start thread */
    size_t hello_len;
    char endpoint[96];  /* the session mailbox's */
    msgpack_sbuffer welcome; /* WELCOME, made by the start thread */
    int hello_rc;
    char refused[256];
    int end_after_start; /* the client said bye (or broke the protocol) while it started */
    ta_link_rx_t rx;     /* a large bulk arriving in pieces */
} s_session_t;

enum { S_STARTING, S_READY, S_ENDING };

typedef struct {
    void *zmq, *router;
    char endpoint[256];
    char devices[64][TA_URI_MAX + 1]; /* the devices served (canonical) */
    int ndevices;
    ta_stage_local_t local;
    char cc[512];
    int timeout_ms;
    s_session_t **sessions;
    size_t nsessions, cap;
    unsigned serial;
    pthread_t zap;
    int zap_running;
    int zap_bound; /* the handler's bind: 1 done, -1 failed, 0 not yet */
} s_worker_t;

static volatile sig_atomic_t s_stop;
static int s_quiet; /* --quiet: no line per session (a context's own workers) */
static void s_on_signal(int sig) {
    (void)sig;
    s_stop = 1;
}

static int64_t s_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ ZAP */

/* Admits a CURVE client whose key the user's key folder admits
 * (ta_keys_admitted), nothing else: fail closed. */
static int s_admit(const uint8_t key[32], char *user, size_t len, void *ud) {
    (void)ud;
    return ta_keys_admitted(key) && snprintf(user, len, "client") > 0;
}

static void *s_zap_run(void *arg) {
    s_worker_t *wk = arg;
    void *rep = zmq_socket(wk->zmq, ZMQ_REP);
    int timeout = 200;
    zmq_setsockopt(rep, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    if (!rep || zmq_bind(rep, "inproc://zeromq.zap.01") != 0) {
        if (rep) zmq_close(rep);
        __atomic_store_n(&wk->zap_bound, -1, __ATOMIC_RELEASE);
        return NULL;
    }
    __atomic_store_n(&wk->zap_bound, 1, __ATOMIC_RELEASE);
    while (!s_stop && __atomic_load_n(&wk->zap_running, __ATOMIC_ACQUIRE))
        ta_zap_answer(rep, s_admit, NULL);
    zmq_close(rep);
    return NULL;
}

/* ------------------------------------------------------------ sessions */


/* Sends [rid, kind, text] (a bye, a refusal). */
static void s_bye(s_worker_t *wk, const uint8_t *rid, size_t rid_len, const char *text) {
    zmq_send(wk->router, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(wk->router, "B", 1, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(wk->router, text, strlen(text), ZMQ_DONTWAIT);
}

/* What a session holds, released: its actors stopped (their buffers
 * freed), its runtime destroyed.  In the end thread. */
static void *s_teardown(void *arg) {
    s_session_t *s = arg;
    ta_error_t err;
    /* A compiler may still be answering an executor that stops first. */
    if (s->rt) ta_rt_ending(s->rt);
    for (int i = 0; s->actors && i < s->nexecutors + s->ncompilers; i++)
        if (ta_actor_stop(&s->actors[i], &err) != TACT_OK) fprintf(stderr, "tact worker: %s\n", err.text);
    ta_port_destroy(&s->port);
    for (uint32_t i = 0; s->pushes && i <= s->ports; i++)
        if (s->pushes[i]) zmq_close(s->pushes[i]);
    if (s->mailbox) zmq_close(s->mailbox);
    s->mailbox = NULL;
    if (s->rt && ta_rt_destroy(&s->rt, &err) != TACT_OK) fprintf(stderr, "tact worker: a session's end: %s\n", err.text);
    ta_free(s->pushes);
    ta_free(s->actors);
    s->pushes = NULL;
    s->actors = NULL;
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Ends a session: a bye saying why (if why), nothing more passed to or
 * from it, and its release in a thread of its own (s_reap frees it). */
static void s_session_end(s_worker_t *wk, s_session_t *s, const char *why) {
    if (s->state == S_ENDING) return;
    if (why) {
        s_bye(wk, s->rid, s->rid_len, why);
        if (!s_quiet) fprintf(stderr, "tact worker: a session ended: %s\n", why);
    }
    if (s->state == S_STARTING) { /* ended once started */
        s->end_after_start = 1;
        return;
    }
    s->state = S_ENDING;
    s->done = 0;
    s->busy = pthread_create(&s->thread, NULL, s_teardown, s) == 0;
    if (!s->busy) s_teardown(s);
}

static int s_has(const uint32_t *ids, int n, uint64_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

/* The worker a start thread reads (what never changes once it serves). */
static const s_worker_t *s_wk;

/* HELLO: checks what the client asks, starts the session and makes its
 * WELCOME (with the status and text of a refusal).  In the start thread. */
static void *s_start(void *arg) {
    s_session_t *s = arg;
    const s_worker_t *wk = s_wk;
    ta_msg_t h;
    ta_msg_init(&h, TA_MSG_READY);
    uint64_t bulk_len;
    ta_error_t err = {TACT_EINVAL, ""};
    char names[64][TA_URI_MAX + 1];
    ta_device_info_t infos[64];
    int rc = ta_msg_decode(&h, s->hello, s->hello_len, 1 << 16, &bulk_len, &err);
    if (rc == TACT_OK && (h.type != TA_MSG_HELLO || bulk_len)) rc = ta_error_set(&err, TACT_EPROTO, "the first message is not a HELLO");
    const ta_hello_msg_t *m = &h.as.hello;
    if (rc == TACT_OK && (m->ports < 2 || m->ports > TA_LINK_MAX_PORTS || m->executors.n < 1 || m->executors.n > 64 || m->compilers.n < 1 ||
                          m->compilers.n > TA_MAX_COMPILERS))
        rc = ta_error_set(&err, TACT_EPROTO, "HELLO out of range (%u executors, %u compilers, %" PRIu64 " ports)", m->executors.n, m->compilers.n, m->ports);
    ta_u64s_it_t it;
    uint64_t id;
    if (rc == TACT_OK) {
        ta_u64s_begin(&it, &m->executors);
        while (rc == TACT_OK && ta_u64s_next(&it, &id)) {
            if (id < 1 || id > m->ports || s_has(s->executors, s->nexecutors, id)) rc = ta_error_set(&err, TACT_EPROTO, "HELLO: executor id %" PRIu64, id);
            else s->executors[s->nexecutors++] = (uint32_t)id;
        }
        ta_u64s_begin(&it, &m->compilers);
        while (rc == TACT_OK && ta_u64s_next(&it, &id)) {
            if (id < 1 || id > m->ports || s_has(s->executors, s->nexecutors, id) || s_has(s->compilers, s->ncompilers, id))
                rc = ta_error_set(&err, TACT_EPROTO, "HELLO: compiler id %" PRIu64, id);
            else s->compilers[s->ncompilers++] = (uint32_t)id;
        }
        s->ports = (uint32_t)m->ports;
    }
    /* The devices: each one this worker serves, none twice. */
    char **list = NULL;
    int n = rc == TACT_OK ? ta_device_split((const char *)m->devices.ptr, m->devices.len, &list, &err) : -1;
    if (rc == TACT_OK && n < 0) rc = err.code;
    if (rc == TACT_OK && n != s->nexecutors) rc = ta_error_set(&err, TACT_EPROTO, "HELLO names %d devices for %d executors", n, s->nexecutors);
    for (int i = 0; rc == TACT_OK && i < n; i++) {
        char canon[TA_URI_MAX + 1];
        rc = ta_device_uri(list[i], strlen(list[i]), canon, &err);
        int served = 0;
        for (int k = 0; rc == TACT_OK && k < wk->ndevices; k++) served |= strcmp(wk->devices[k], canon) == 0;
        if (rc == TACT_OK && (!served || strchr(canon, '/'))) rc = ta_error_set(&err, TACT_EDEVICE, "this worker does not serve %s", list[i]);
        for (int k = 0; rc == TACT_OK && k < i; k++)
            if (strcmp(names[k], canon) == 0) rc = ta_error_set(&err, TACT_EINVAL, "%s asked twice", canon);
        if (rc == TACT_OK) snprintf(names[i], sizeof names[i], "%s", canon);
        if (rc == TACT_OK) rc = ta_device_describe(canon, &infos[i], &err);
    }
    /* The session: ids 1..ports as the client has them. */
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    cfg.timeout_ms = wk->timeout_ms;
    if (rc == TACT_OK) rc = ta_rt_new(&s->rt, &cfg, &err);
    const char *ep = s->endpoint;
    if (rc == TACT_OK && (!(s->mailbox = zmq_socket(ta_rt_zmq(s->rt), ZMQ_PULL)) || zmq_bind(s->mailbox, ep) != 0))
        rc = ta_error_set(&err, TACT_ETRANSPORT, "session mailbox: %s", zmq_strerror(errno));
    if (rc == TACT_OK) ta_link_sockopts(s->mailbox, (size_t)1 << 30);
    if (rc == TACT_OK && (!(s->actors = ta_calloc((size_t)(s->nexecutors + s->ncompilers), sizeof *s->actors)) ||
                          !(s->pushes = ta_calloc((size_t)s->ports + 1, sizeof *s->pushes))))
        rc = ta_error_set(&err, TACT_ENOMEM, "out of memory");
    for (uint32_t p = 1; rc == TACT_OK && p <= s->ports; p++) {
        int ex = -1, co = -1;
        for (int i = 0; i < s->nexecutors; i++) ex = s->executors[i] == p ? i : ex;
        for (int i = 0; i < s->ncompilers; i++) co = s->compilers[i] == p ? i : co;
        uint32_t got = 0;
        if (ex >= 0 || co >= 0) {
            ta_actor_t **a = &s->actors[ex >= 0 ? ex : s->nexecutors + co];
            rc = ta_actor_start(s->rt, ex >= 0 ? &ta_executor_ops : &ta_compiler_ops, (void *)&wk->local, NULL, a, &err);
            if (rc == TACT_OK) got = ta_actor_id(*a);
        } else if (!(got = ta_rt_route(s->rt, "client", ep))) {
            rc = ta_error_set(&err, TACT_ENOMEM, "out of memory");
        }
        if (rc == TACT_OK && got != p) rc = ta_error_set(&err, TACT_EINVAL, "session ids out of step (%" PRIu32 " for %" PRIu32 ")", got, p);
    }
    if (rc == TACT_OK) rc = ta_port_new(s->rt, "worker", &s->port, &err);
    /* WELCOME: what the devices are, under the names the client used. */
    ta_msg_t w;
    ta_msg_init(&w, TA_MSG_WELCOME);
    w.seq = 1;
    ta_device_rec_t recs[64];
    ta_target_rec_t targets[64];
    if (rc == TACT_OK) {
        for (int i = 0; i < n; i++) ta_device_rec_of(&infos[i], list[i], &recs[i], &targets[i]);
        w.as.welcome.devices = ta_recs(TA_REC_DEVICE, recs, (size_t)n);
    } else {
        w.as.welcome.status = rc;
        w.as.welcome.text = ta_bytes_str(err.text);
    }
    msgpack_sbuffer_init(&s->welcome);
    if (ta_msg_encode(&w, &s->welcome) != TACT_OK && rc == TACT_OK) rc = ta_error_set(&err, TACT_ENOMEM, "out of memory");
    ta_free(list);
    ta_msg_release(&h);
    s->hello_rc = rc;
    snprintf(s->refused, sizeof s->refused, "%s", rc == TACT_OK ? "" : err.text);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A start or end thread that finished: a started session gets its WELCOME
 * (or, refused, its end); an ended one is freed (returns 1). */
static int s_reap(s_worker_t *wk, s_session_t *s) {
    if (s->busy) {
        if (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) return 0;
        pthread_join(s->thread, NULL);
        s->busy = 0;
    }
    if (s->state == S_ENDING) {
        ta_free(s->hello);
        ta_link_rx_fini(&s->rx);
        ta_free(s);
        return 1;
    }
    if (s->state != S_STARTING || !__atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) return 0;
    zmq_send(wk->router, s->rid, s->rid_len, ZMQ_SNDMORE);
    zmq_send(wk->router, "W", 1, ZMQ_SNDMORE);
    zmq_send(wk->router, s->welcome.data, s->welcome.size, 0);
    msgpack_sbuffer_destroy(&s->welcome);
    s->state = S_READY;
    s->last_rx = s_now_ms();
    if (s->hello_rc != TACT_OK) {
        if (!s_quiet) fprintf(stderr, "tact worker: refused a client: %s\n", s->refused);
        s_session_end(wk, s, NULL);
    } else if (s->end_after_start) {
        s_session_end(wk, s, NULL);
    }
    return 0;
}

/* The compilers get the client's CONFIG with this worker's compiler in it,
 * from the session's own port (their answers stay here). */
static int s_configure_compilers(s_worker_t *wk, s_session_t *s, const ta_msg_t *config, char *why, size_t len) {
    for (int i = 0; i < s->ncompilers; i++) {
        ta_msg_t c = *config, reply;
        c.wire_ = (ta_bytes_t){0};
        c.storage_ = NULL;
        c.storage_free_ = NULL;
        c.bulk = (ta_bytes_t){0};
        c.bulk_free = NULL;
        c.as.config.cc = ta_bytes_str(wk->cc);
        ta_msg_init(&reply, TA_MSG_READY);
        ta_error_t err;
        int rc = ta_port_request(s->port, s->compilers[i], &c, &reply, wk->timeout_ms, &err);
        ta_msg_release(&reply);
        if (rc != TACT_OK) return snprintf(why, len, "configuring a compiler: %s", err.text), -1;
    }
    s->configured = 1;
    return 0;
}

/* A message of the client's for one of its executors, checked and passed
 * on (CONFIG with this worker's compiler in place of the client's). */
static int s_to_session(s_worker_t *wk, s_session_t *s, zmq_msg_t *env, zmq_msg_t *bulk, char *why, size_t len) {
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_READY);
    uint64_t bulk_len;
    ta_error_t err;
    if (ta_msg_decode(&m, zmq_msg_data(env), zmq_msg_size(env), (size_t)16 << 20, &bulk_len, &err) != TACT_OK)
        return snprintf(why, len, "a malformed message: %s", err.text), -1;
    int rc = 0;
    if (!s_has(s->executors, s->nexecutors, m.dest)) rc = snprintf(why, len, "a message for port %" PRIu32 ", not one of its executors here", m.dest);
    else if (m.sender == 0 || m.sender > s->ports || s_has(s->executors, s->nexecutors, m.sender) || s_has(s->compilers, s->ncompilers, m.sender))
        rc = snprintf(why, len, "a message as port %" PRIu32 ", not one of the client's", m.sender);
    else if (bulk_len != zmq_msg_size(bulk)) rc = snprintf(why, len, "a bulk of %zu bytes, its envelope says %" PRIu64, zmq_msg_size(bulk), bulk_len);
    if (rc) {
        ta_msg_release(&m);
        return -1;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (m.type == TA_MSG_CONFIG) {
        if (!s->configured && s_configure_compilers(wk, s, &m, why, len) != 0) rc = -1;
        m.as.config.cc = ta_bytes_str(wk->cc);
        if (!rc && ta_msg_encode(&m, &sb) != TACT_OK) rc = snprintf(why, len, "out of memory");
    }
    uint32_t dest = m.dest;
    ta_msg_release(&m);
    void **push = &s->pushes[dest];
    if (!rc && !*push && ta_rt_connect(s->rt, dest, push, &err) != TACT_OK) rc = snprintf(why, len, "%s", err.text);
    int more = bulk_len ? ZMQ_SNDMORE : 0;
    if (!rc && (sb.size ? zmq_send(*push, sb.data, sb.size, more) : zmq_msg_send(env, *push, more)) < 0) rc = snprintf(why, len, "pass on: %s", zmq_strerror(errno));
    if (!rc && bulk_len && zmq_msg_send(bulk, *push, 0) < 0) rc = snprintf(why, len, "pass on: %s", zmq_strerror(errno));
    msgpack_sbuffer_destroy(&sb);
    return rc ? -1 : 0;
}

static s_session_t *s_find(s_worker_t *wk, const void *rid, size_t len) {
    for (size_t i = 0; i < wk->nsessions; i++)
        if (wk->sessions[i]->rid_len == len && memcmp(wk->sessions[i]->rid, rid, len) == 0) return wk->sessions[i];
    return NULL;
}

/* One message from the ROUTER: [rid, kind, ...]. */
static void s_from_client(s_worker_t *wk) {
    zmq_msg_t rid, kind, body;
    zmq_msg_init(&rid);
    zmq_msg_init(&kind);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&rid, wk->router, ZMQ_DONTWAIT) < 0) goto out;
    if (zmq_msg_size(&rid) > sizeof((s_session_t *)0)->rid || !zmq_msg_more(&rid) || zmq_msg_recv(&kind, wk->router, ZMQ_DONTWAIT) < 0) goto drain;
    s_session_t *s = s_find(wk, zmq_msg_data(&rid), zmq_msg_size(&rid));
    char k = zmq_msg_size(&kind) == 1 ? *(const char *)zmq_msg_data(&kind) : '?';
    int more = zmq_msg_more(&kind);
    char why[300] = "";
    if (s) s->last_rx = s_now_ms();
    if (!s) {
        if (k != 'H' || !more || zmq_msg_recv(&body, wk->router, ZMQ_DONTWAIT) < 0 || zmq_msg_more(&body)) {
            if (k != 'B' && k != 'P') s_bye(wk, zmq_msg_data(&rid), zmq_msg_size(&rid), "say HELLO first");
            goto drain;
        }
        s = ta_calloc(1, sizeof *s);
        if (!s || ta_grow((void **)&wk->sessions, &wk->cap, wk->nsessions + 1, sizeof *wk->sessions) != TACT_OK) {
            ta_free(s);
            s_bye(wk, zmq_msg_data(&rid), zmq_msg_size(&rid), "the worker is out of memory");
            goto drain;
        }
        memcpy(s->rid, zmq_msg_data(&rid), zmq_msg_size(&rid));
        s->rid_len = zmq_msg_size(&rid);
        s->last_rx = s_now_ms();
        s->state = S_STARTING;
        snprintf(s->endpoint, sizeof s->endpoint, "inproc://tact-worker-session-%u", ++wk->serial);
        s->hello_len = zmq_msg_size(&body);
        if (!(s->hello = ta_malloc(s->hello_len ? s->hello_len : 1))) {
            ta_free(s);
            s_bye(wk, zmq_msg_data(&rid), zmq_msg_size(&rid), "the worker is out of memory");
            goto drain;
        }
        memcpy(s->hello, zmq_msg_data(&body), s->hello_len);
        wk->sessions[wk->nsessions++] = s;
        s->busy = pthread_create(&s->thread, NULL, s_start, s) == 0;
        if (!s->busy) s_start(s);
        goto drain;
    }
    if (s->state == S_ENDING) goto drain; /* its last messages: nobody takes them */
    if (k == 'P' && !more) goto out;
    if (s->state == S_STARTING && k != 'B') {
        /* Nothing but a bye may come before WELCOME. */
        s->end_after_start = 1;
        goto drain;
    }
    if (k == 'B') {
        s_session_end(wk, s, NULL);
        goto drain;
    }
    if (k == 'L' && more && zmq_msg_recv(&body, wk->router, ZMQ_DONTWAIT) >= 0 && zmq_msg_size(&body) == 4 && zmq_msg_more(&body)) {
        /* Another worker of the client is gone: what waits for it here ends. */
        const uint8_t *b = zmq_msg_data(&body);
        uint32_t id = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        zmq_msg_t text;
        zmq_msg_init(&text);
        char t[200] = "";
        if (zmq_msg_recv(&text, wk->router, ZMQ_DONTWAIT) >= 0) ta_printable(zmq_msg_data(&text), zmq_msg_size(&text), t, sizeof t);
        zmq_msg_close(&text);
        if (id >= 1 && id <= s->ports && !s_has(s->executors, s->nexecutors, id) && !s_has(s->compilers, s->ncompilers, id)) {
            ta_rt_lose(s->rt, id, "%s", t);
            goto drain;
        }
        snprintf(why, sizeof why, "a loss of port %" PRIu32 ", not another worker's", id);
    } else if (k == 'M' || k == 'N' || k == 'C') {
        zmq_msg_t env, bulk;
        int got = ta_link_take(&s->rx, wk->router, k, more, (size_t)1 << 30, &env, &bulk, why, sizeof why);
        if (got == 1 && s_to_session(wk, s, &env, &bulk, why, sizeof why) != 0) got = -1;
        zmq_msg_close(&env);
        zmq_msg_close(&bulk);
        if (got >= 0) goto out;
    } else {
        snprintf(why, sizeof why, "a frame of unknown kind");
    }
    s_session_end(wk, s, why[0] ? why : "a message cut short");
drain:
    ta_zmq_drain(wk->router);
out:
    zmq_msg_close(&rid);
    zmq_msg_close(&kind);
    zmq_msg_close(&body);
}

void h_worker_usage(FILE *f) {
    fprintf(f,
            "usage: tact worker --listen tcp://HOST:PORT|ipc://PATH [--devices LIST] [--print-uri] [--threads N] [--timeout-ms N]\n"
            "  Hosts this machine's devices for tact clients elsewhere (docs/workers.md).\n"
            "  --listen      where clients connect: tcp (CURVE: only keys this user's key folder admits) or ipc\n"
            "                (a socket only this user can reach); tcp://127.0.0.1:0 picks a free port\n"
            "  --devices     the devices served (default: all of this machine's: CPU and every CL:k)\n"
            "  --print-uri   print the device URIs a client passes, comma-separated, as the first line\n"
            "  --threads     threads of each CPU device (default: one per core)\n"
            "  --timeout-ms  how long a session's stages wait without a sign of life (default 60000)\n"
            "  --quiet       no line per session on standard error (errors still)\n"
            "  Serves until killed (SIGINT/SIGTERM end it cleanly).\n");
}

int h_worker(int argc, char **argv) {
    const char *listen = NULL, *devices = NULL;
    int print_uri = 0, threads = 0;
    s_worker_t wk;
    memset(&wk, 0, sizeof wk);
    wk.timeout_ms = 60000;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--print-uri")) print_uri = 1;
        else if (!strcmp(a, "--quiet")) s_quiet = 1;
        else if (!strcmp(a, "--listen") && i + 1 < argc) listen = argv[++i];
        else if (!strcmp(a, "--devices") && i + 1 < argc) devices = argv[++i];
        else if (!strcmp(a, "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--timeout-ms") && i + 1 < argc) wk.timeout_ms = atoi(argv[++i]);
        else {
            fprintf(stderr, "tact worker: unknown or incomplete option '%s'\n", a);
            h_worker_usage(stderr);
            return 2;
        }
    }
    if (!listen || (strncmp(listen, "tcp://", 6) != 0 && strncmp(listen, "ipc://", 6) != 0)) {
        fprintf(stderr, "tact worker: --listen tcp://HOST:PORT or ipc://PATH is required\n");
        h_worker_usage(stderr);
        return 2;
    }
    if (threads < 0 || threads > ta_cpu_threads_max() || wk.timeout_ms <= 0) {
        fprintf(stderr, "tact worker: --threads 0..%d and a positive --timeout-ms\n", ta_cpu_threads_max());
        return 2;
    }
    /* The devices: those listed, else all of this machine's. */
    ta_error_t err;
    char all[2048] = "CPU";
    if (!devices) {
        ta_device_info_t infos[64];
        int n = ta_device_list(infos, 64);
        for (int i = 0; i < n && i < 64; i++)
            if (strncmp(infos[i].name, "CPU", 3) != 0 && infos[i].model[0] != '(') {
                size_t used = strlen(all);
                snprintf(all + used, sizeof all - used, ",%s", infos[i].name);
            }
        devices = all;
    }
    char **list;
    int n = ta_device_list_parse(devices, &list, &err);
    if (n < 0) {
        fprintf(stderr, "tact worker: --devices %s: %s\n", devices, err.text);
        return 2;
    }
    for (int i = 0; i < n && i < 64; i++) {
        if (strchr(list[i], '/')) {
            fprintf(stderr, "tact worker: %s is not a device of this machine\n", list[i]);
            ta_free(list);
            return 2;
        }
        snprintf(wk.devices[wk.ndevices++], sizeof wk.devices[0], "%s", list[i]);
    }
    ta_free(list);
    /* The stages' own settings, as a context's (graph/client.c). */
    wk.local.cpu_threads = threads;
    wk.local.compile_limit_s = 300;
    const char *dbg = getenv("TACT_DEBUG");
    wk.local.debug = dbg ? atoi(dbg) : 0;
    ta_cc_cache_dir(wk.local.cache_dir, sizeof wk.local.cache_dir);
    snprintf(wk.cc, sizeof wk.cc, "%s", ta_cc_compiler());
    if (ta_cc_check_dir(wk.local.cache_dir, &err) != TACT_OK || ta_cc_probe(wk.cc, 300, &err) != TACT_OK) {
        fprintf(stderr, "tact worker: %s\n", err.text);
        return 1;
    }
    char pub[TA_KEY_Z85 + 1] = "", sec[TA_KEY_Z85 + 1] = "";
    int tcp = strncmp(listen, "tcp://", 6) == 0;
    if (tcp && ta_keys_own(pub, sec, 1, &err) != TACT_OK) {
        fprintf(stderr, "tact worker: %s\n", err.text);
        return 1;
    }
    wk.zmq = zmq_ctx_new();
    wk.router = zmq_socket(wk.zmq, ZMQ_ROUTER);
    ta_link_sockopts(wk.router, (size_t)1 << 30);
    int rc = 0;
    if (tcp) {
        /* Fail closed: the handler runs before the bind, and admits only
         * the keys this user's key folder admits. */
        int one = 1;
        wk.zap_running = 1;
        if (pthread_create(&wk.zap, NULL, s_zap_run, &wk) != 0) wk.zap_running = 0;
        /* Nothing is bound until the handler is in place. */
        for (int i = 0; wk.zap_running && i < 5000 && !__atomic_load_n(&wk.zap_bound, __ATOMIC_ACQUIRE); i++) usleep(1000);
        if (wk.zap_running && __atomic_load_n(&wk.zap_bound, __ATOMIC_ACQUIRE) != 1) fprintf(stderr, "tact worker: the ZAP handler could not bind\n");
        if (!wk.zap_running || __atomic_load_n(&wk.zap_bound, __ATOMIC_ACQUIRE) != 1 || zmq_setsockopt(wk.router, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
            zmq_setsockopt(wk.router, ZMQ_CURVE_SECRETKEY, sec, 40) != 0 || zmq_setsockopt(wk.router, ZMQ_ZAP_DOMAIN, "tact", 4) != 0)
            rc = 1;
        zmq_setsockopt(wk.router, 93, &one, sizeof one); /* ZMQ_ZAP_ENFORCE_DOMAIN where built in */
    }
    memset(sec, 0, sizeof sec);
    mode_t old = umask(077); /* an ipc socket only this user can reach */
    if (!rc && zmq_bind(wk.router, listen) != 0) {
        fprintf(stderr, "tact worker: cannot listen on %s: %s\n", listen, zmq_strerror(errno));
        rc = 1;
    }
    umask(old);
    size_t len = sizeof wk.endpoint;
    if (!rc) zmq_getsockopt(wk.router, ZMQ_LAST_ENDPOINT, wk.endpoint, &len);
    if (!rc && print_uri) {
        for (int i = 0; i < wk.ndevices; i++)
            printf("%s%s/%s%s%s", i ? "," : "", wk.endpoint, wk.devices[i], tcp ? "?key=" : "", tcp ? pub : "");
        printf("\n");
        fflush(stdout);
    }
    if (!rc && !s_quiet) fprintf(stderr, "tact worker: serving %d device(s) at %s\n", wk.ndevices, wk.endpoint);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int64_t last_beat = 0;
    s_wk = &wk;
    zmq_pollitem_t *items = NULL;
    s_session_t **polled = NULL; /* the session of each mailbox polled */
    size_t items_cap = 0, polled_cap = 0;
    while (!rc && !s_stop) {
        /* The ROUTER and every session's mailbox (as many as there are clients). */
        size_t pcap = polled_cap;
        if (ta_grow((void **)&items, &items_cap, wk.nsessions + 1, sizeof *items) != TACT_OK ||
            ta_grow((void **)&polled, &pcap, wk.nsessions + 1, sizeof *polled) != TACT_OK) {
            fprintf(stderr, "tact worker: out of memory\n");
            rc = 1;
            break;
        }
        polled_cap = pcap;
        int np = 1;
        items[0] = (zmq_pollitem_t){wk.router, 0, ZMQ_POLLIN, 0};
        for (size_t i = 0; i < wk.nsessions; i++) /* only a ready session's mailbox is this thread's */
            if (wk.sessions[i]->state == S_READY) polled[np - 1] = wk.sessions[i], items[np++] = (zmq_pollitem_t){wk.sessions[i]->mailbox, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(items, np, 20) < 0 && errno != EINTR) break;
        /* At most 256 frames, and at most a quarter of a heartbeat's time:
         * the pieces of a large bulk (1 MB each, copied as they come) must
         * not hold up the heartbeats below on a loaded machine. */
        int64_t until = s_now_ms() + TA_LINK_BEAT_MS / 4;
        for (int i = 0; i < 256 && (items[0].revents & ZMQ_POLLIN) && (i == 0 || s_now_ms() < until); i++) {
            int ev = 0;
            size_t el = sizeof ev;
            if (zmq_getsockopt(wk.router, ZMQ_EVENTS, &ev, &el) != 0 || !(ev & ZMQ_POLLIN)) break;
            s_from_client(&wk);
        }
        for (int i = 1; i < np; i++)
            if (items[i].revents & ZMQ_POLLIN && polled[i - 1]->state == S_READY) ta_link_pass(polled[i - 1]->mailbox, wk.router, polled[i - 1]->rid, polled[i - 1]->rid_len);
        int64_t now = s_now_ms();
        int beat = now - last_beat >= TA_LINK_BEAT_MS;
        if (beat) last_beat = now;
        for (size_t i = 0; i < wk.nsessions; i++) {
            s_session_t *s = wk.sessions[i];
            if (s_reap(&wk, s)) {
                wk.sessions[i] = wk.sessions[--wk.nsessions];
                i--;
                continue;
            }
            if (s->state == S_READY && now - s->last_rx > TA_LINK_LOST_MS + 500) {
                if (!s_quiet) fprintf(stderr, "tact worker: a client went silent for %d ms; its session ends\n", TA_LINK_LOST_MS + 500);
                s_session_end(&wk, s, NULL);
            }
            if (s->state == S_READY && beat) {
                zmq_send(wk.router, s->rid, s->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
                zmq_send(wk.router, "P", 1, ZMQ_DONTWAIT);
            }
        }
    }
    /* Stopping: every session ends (those starting once started), then all are reaped. */
    while (wk.nsessions) {
        for (size_t i = 0; i < wk.nsessions; i++) {
            s_session_t *s = wk.sessions[i];
            if (s->state == S_READY) s_session_end(&wk, s, "the worker is stopping");
            if (s_reap(&wk, s)) {
                wk.sessions[i] = wk.sessions[--wk.nsessions];
                i--;
            }
        }
        usleep(5000);
    }
    ta_free(wk.sessions);
    ta_free(items);
    ta_free(polled);
    if (wk.router) zmq_close(wk.router);
    if (wk.zap_running) {
        __atomic_store_n(&wk.zap_running, 0, __ATOMIC_RELEASE);
        pthread_join(wk.zap, NULL);
    }
    zmq_ctx_term(wk.zmq);
    return rc;
}

int h_keygen(int argc, char **argv) {
    int force = 0, show = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--force")) force = 1;
        else if (!strcmp(argv[i], "--show")) show = 1;
        else {
            fprintf(stderr, "usage: tact keygen [--force | --show]\n");
            return 2;
        }
    }
    char pub[TA_KEY_Z85 + 1], sec[TA_KEY_Z85 + 1], dir[900];
    ta_error_t err;
    int rc = show ? ta_keys_own(pub, sec, 0, &err) : ta_keys_generate(force, pub, &err);
    memset(sec, 0, sizeof sec);
    if (rc != TACT_OK) {
        fprintf(stderr, "tact keygen: %s\n", err.text);
        return 1;
    }
    ta_keys_dir(dir, sizeof dir, NULL);
    if (!show) fprintf(stderr, "tact keygen: a new key in %s/key; its public half (give it to the workers that are to admit you):\n", dir);
    printf("%s\n", pub);
    return 0;
}
