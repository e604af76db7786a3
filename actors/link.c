/* link.c - a client's connection to a tact worker: HELLO, then messages passed both ways, heartbeats, and the loss of a worker. */
#define _GNU_SOURCE /* pipe2 */
#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "keys.h"
#include "mem.h"
#include "pipeline.h"

struct ta_link {
    ta_rt_t *rt;
    char where[TA_URI_MAX + 1];
    char name[TA_URI_MAX + 64]; /* how errors name it: "worker WHERE", or an isolated device's */
    char key[TA_KEY_Z85 + 1]; /* the worker's public key; empty on ipc */
    char endpoint[96];        /* the mailbox the executors' routes point at */
    void *mailbox;            /* PULL, bound at endpoint */
    void *dealer;             /* to the worker */
    uint32_t *executors;
    int nexecutors;
    uint32_t ports;
    void **pushes; /* by port id, to the client's own mailboxes, connected on first use */
    void *monitor; /* the connection's events: a closed connection is a worker gone */
    ta_link_rx_t rx; /* a large bulk arriving in pieces */
    uint8_t *told; /* by port id: the worker was told that port is lost */
    pthread_t thread;
    int running, stop, lost;
};

static int64_t s_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ta_link_sockopts(void *sock, size_t max_bytes) {
    int linger = 0, hwm = 16384;
    int64_t max = (int64_t)max_bytes;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
}

static size_t s_max_bytes(ta_rt_t *rt) {
    const ta_rt_config_t *c = ta_rt_config(rt);
    return c->max_msg_bytes > c->max_bulk_bytes ? c->max_msg_bytes : c->max_bulk_bytes;
}

int ta_link_new(ta_rt_t *rt, const char *where, const char *server_key, const char *name, ta_link_t **out, ta_error_t *err) {
    static unsigned serial;
    *out = NULL;
    ta_link_t *l = ta_calloc(1, sizeof *l);
    if (!l) return ta_error_set(err, TACT_ENOMEM, "out of memory");
    l->rt = rt;
    snprintf(l->where, sizeof l->where, "%s", where);
    if (name) snprintf(l->name, sizeof l->name, "%s", name);
    else snprintf(l->name, sizeof l->name, "worker %s", where);
    if (server_key) snprintf(l->key, sizeof l->key, "%s", server_key);
    snprintf(l->endpoint, sizeof l->endpoint, "inproc://tact-link-%p-%u", (void *)rt, __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    l->mailbox = zmq_socket(ta_rt_zmq(rt), ZMQ_PULL);
    if (!l->mailbox || zmq_bind(l->mailbox, l->endpoint) != 0) {
        int e = errno;
        ta_link_close(&l);
        return ta_error_set(err, TACT_ETRANSPORT, "worker %s: no mailbox for its link: %s", where, zmq_strerror(e));
    }
    ta_link_sockopts(l->mailbox, s_max_bytes(rt));
    *out = l;
    return TACT_OK;
}

const char *ta_link_endpoint(const ta_link_t *l) { return l->endpoint; }
const char *ta_link_where(const ta_link_t *l) { return l->where; }

/* Sends one frame; more: ZMQ_SNDMORE or 0. */
static int s_send(void *sock, const void *data, size_t len, int more) { return zmq_send(sock, data, len, more) < 0 ? -1 : 0; }


/* The worker is gone (or broke the protocol): its executors are lost. */
static void s_lose(ta_link_t *l, const char *why) {
    if (l->lost) return;
    l->lost = 1;
    for (int i = 0; i < l->nexecutors; i++) ta_rt_lose(l->rt, l->executors[i], "%s lost: %s", l->name, why);
}

/* A monitor's event: its number, and its value (a ZAP status, an errno). */
static int s_event(void *mon, uint16_t *event, uint32_t *value) {
    zmq_msg_t f;
    zmq_msg_init(&f);
    if (zmq_msg_recv(&f, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&f);
        return -1;
    }
    int ok = zmq_msg_size(&f) >= 6;
    if (ok) {
        memcpy(event, zmq_msg_data(&f), 2);
        memcpy(value, (uint8_t *)zmq_msg_data(&f) + 2, 4);
    }
    zmq_msg_close(&f);
    ta_zmq_drain(mon);
    return ok ? 0 : -1;
}

static void *s_run(void *arg);

int ta_link_hello(ta_link_t *l, const char *const *devices, const uint32_t *executors, int n, const uint32_t *compilers, int ncompilers,
                  uint32_t ports, ta_device_info_t *infos, int timeout_ms, ta_error_t *err) {
    if (n < 1 || ports > TA_LINK_MAX_PORTS) return ta_error_set(err, TACT_EINVAL, "%s: %d devices, %" PRIu32 " ports", l->name, n, ports);
    if (!(l->executors = ta_malloc(sizeof *l->executors * (size_t)n)) || !(l->pushes = ta_calloc((size_t)ports + 1, sizeof *l->pushes)) ||
        !(l->told = ta_calloc((size_t)ports + 1, 1)))
        return ta_error_set(err, TACT_ENOMEM, "out of memory");
    memcpy(l->executors, executors, sizeof *executors * (size_t)n);
    l->nexecutors = n;
    l->ports = ports;
    void *zmq = ta_rt_zmq(l->rt);
    l->dealer = zmq_socket(zmq, ZMQ_DEALER);
    if (!l->dealer) return ta_error_set(err, TACT_ETRANSPORT, "%s: zmq_socket: %s", l->name, zmq_strerror(errno));
    ta_link_sockopts(l->dealer, s_max_bytes(l->rt));
    int timeout = ta_rt_config(l->rt)->timeout_ms;
    zmq_setsockopt(l->dealer, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    /* A worker that went away is not reconnected to: a new one at the same
     * address knows nothing of this client's buffers. */
    int never = -1;
    zmq_setsockopt(l->dealer, ZMQ_RECONNECT_IVL, &never, sizeof never);
    if (l->key[0]) {
        char pub[TA_KEY_Z85 + 1], sec[TA_KEY_Z85 + 1];
        int rc = ta_keys_own(pub, sec, 1, err);
        if (rc != TACT_OK) return ta_error_set(err, rc, "%s: this user's key: %s", l->name, err->text);
        int bad = zmq_setsockopt(l->dealer, ZMQ_CURVE_SERVERKEY, l->key, 40) != 0 || zmq_setsockopt(l->dealer, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
                  zmq_setsockopt(l->dealer, ZMQ_CURVE_SECRETKEY, sec, 40) != 0;
        memset(sec, 0, sizeof sec);
        if (bad) return ta_error_set(err, TACT_ETRANSPORT, "%s: CURVE client: %s", l->name, zmq_strerror(errno));
    }
    /* The connection's fate (refused, its keys refused) is watched until
     * WELCOME, so a refusal is named rather than waited out. */
    char mon_ep[96];
    snprintf(mon_ep, sizeof mon_ep, "inproc://tact-link-mon-%p", (void *)l);
    void *mon = NULL;
    if (zmq_socket_monitor(l->dealer, mon_ep, ZMQ_EVENT_ALL) == 0 && (mon = zmq_socket(zmq, ZMQ_PAIR)) && zmq_connect(mon, mon_ep) != 0) {
        zmq_close(mon);
        mon = NULL;
    }
    if (zmq_connect(l->dealer, l->where) != 0) {
        if (mon) zmq_close(mon);
        return ta_error_set(err, TACT_ETRANSPORT, "%s: connect: %s", l->name, zmq_strerror(errno));
    }
    /* HELLO: the devices, the ids they are to have, the ids of the rest. */
    char names[1024] = "";
    for (int i = 0; i < n; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? "," : "", devices[i]);
    }
    uint64_t ex[64], co[TA_MAX_COMPILERS];
    if (n > 64 || ncompilers > TA_MAX_COMPILERS) {
        if (mon) zmq_close(mon);
        return ta_error_set(err, TACT_EINVAL, "%s: too many devices", l->name);
    }
    for (int i = 0; i < n; i++) ex[i] = executors[i];
    for (int i = 0; i < ncompilers; i++) co[i] = compilers[i];
    ta_msg_t h;
    ta_msg_init(&h, TA_MSG_HELLO);
    h.seq = 1;
    h.as.hello.devices = ta_bytes_str(names);
    h.as.hello.executors = ta_u64s(ex, (size_t)n);
    h.as.hello.compilers = ta_u64s(co, (size_t)ncompilers);
    h.as.hello.ports = ports;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = ta_msg_encode(&h, &sb);
    if (rc == TACT_OK && (s_send(l->dealer, "H", 1, ZMQ_SNDMORE) != 0 || s_send(l->dealer, sb.data, sb.size, 0) != 0))
        rc = ta_error_set(err, TACT_ETRANSPORT, "%s: send HELLO: %s", l->name, zmq_strerror(errno));
    msgpack_sbuffer_destroy(&sb);
    int64_t deadline = s_now_ms() + timeout_ms;
    int connected = 0, refused = 0, auth = 0, handshake = 0;
    zmq_msg_t kind, env;
    zmq_msg_init(&kind);
    zmq_msg_init(&env);
    while (rc == TACT_OK) {
        int64_t left = deadline - s_now_ms();
        if (left <= 0) {
            rc = ta_error_set(err, auth || (refused && !connected) ? TACT_ETRANSPORT : TACT_ETIMEDOUT, "%s: %s within %d ms", l->name,
                              auth        ? "refused this client's key (add the public key `tact keygen --show` prints to the worker's authorized_keys)"
                              : handshake ? "the CURVE handshake failed (is the worker's key in the URI its own?)"
                              : connected ? "no answer to HELLO (the worker's key in the URI may be wrong, or this client's key is not admitted)"
                              : refused   ? "nothing listens there (connection refused)"
                                          : "no connection",
                              timeout_ms);
            break;
        }
        zmq_pollitem_t items[2] = {{l->dealer, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, mon ? 2 : 1, (long)(left < 100 ? left : 100)) < 0 && errno != EINTR) {
            rc = ta_error_set(err, TACT_ETRANSPORT, "%s: poll: %s", l->name, zmq_strerror(errno));
            break;
        }
        uint16_t ev;
        uint32_t val;
        while (mon && s_event(mon, &ev, &val) == 0) {
            if (ev == ZMQ_EVENT_CONNECTED) connected = 1;
            if (ev == ZMQ_EVENT_CONNECT_RETRIED || ev == ZMQ_EVENT_CLOSED) refused = 1;
#ifdef ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
            if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) auth = 1;
            if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) handshake = 1;
#endif
        }
        /* Refusals are final: the link never reconnects. */
        if (auth || (refused && !connected)) deadline = s_now_ms();
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        if (zmq_msg_recv(&kind, l->dealer, ZMQ_DONTWAIT) < 0) continue;
        int more = zmq_msg_more(&kind);
        const char *k = zmq_msg_data(&kind);
        if (zmq_msg_size(&kind) != 1 || !more || (k[0] != 'W' && k[0] != 'B')) {
            ta_zmq_drain(l->dealer);
            continue; /* nothing else may come before WELCOME */
        }
        if (zmq_msg_recv(&env, l->dealer, ZMQ_DONTWAIT) < 0) continue;
        ta_zmq_drain(l->dealer);
        if (k[0] == 'B') {
            char text[300];
            ta_printable(zmq_msg_data(&env), zmq_msg_size(&env), text, sizeof text);
            rc = ta_error_set(err, TACT_EDEVICE, "%s refused: %s", l->name, text);
            break;
        }
        ta_msg_t w;
        ta_msg_init(&w, TA_MSG_READY);
        uint64_t bulk_len;
        rc = ta_msg_decode(&w, zmq_msg_data(&env), zmq_msg_size(&env), ta_rt_config(l->rt)->max_msg_bytes, &bulk_len, err);
        if (rc == TACT_OK && w.type != TA_MSG_WELCOME) rc = ta_error_set(err, TACT_EPROTO, "a %s", ta_msg_type_name(w.type));
        if (rc != TACT_OK) {
            rc = ta_error_set(err, TACT_EPROTO, "%s: a bad WELCOME: %s", l->name, err->text);
            break;
        }
        if (w.as.welcome.status != 0) {
            ta_bytes_t t = w.as.welcome.text;
            char text[300];
            ta_printable(t.ptr, t.len, text, sizeof text);
            int code = w.as.welcome.status < 0 && w.as.welcome.status > -100 ? (int)w.as.welcome.status : TACT_EDEVICE;
            rc = ta_error_set(err, code, "%s: %s", l->name, text);
            break;
        }
        if (w.as.welcome.devices.n != (uint32_t)n) {
            rc = ta_error_set(err, TACT_EPROTO, "%s: WELCOME has %u devices for %d asked", l->name, w.as.welcome.devices.n, n);
            break;
        }
        ta_recs_it_t it;
        ta_device_rec_t rec;
        ta_recs_begin(&it, &w.as.welcome.devices);
        for (int i = 0; rc == TACT_OK && i < n; i++) {
            char uri[TA_URI_MAX + 1];
            if (!ta_recs_next(&it, &rec)) rc = ta_error_set(err, TACT_EPROTO, "%s: a DEVICE record does not decode", l->name);
            else rc = ta_device_info_of_rec(&rec, &infos[i], uri, err);
            if (rc == TACT_OK && strcmp(uri, devices[i]) != 0)
                rc = ta_error_set(err, TACT_EPROTO, "%s: described %s for %s", l->name, uri, devices[i]);
        }
        break;
    }
    zmq_msg_close(&kind);
    zmq_msg_close(&env);
    if (rc != TACT_OK) {
        zmq_socket_monitor(l->dealer, NULL, 0);
        if (mon) zmq_close(mon);
        return rc;
    }
    l->monitor = mon;
    if (pthread_create(&l->thread, NULL, s_run, l) != 0) return ta_error_set(err, TACT_ENOMEM, "%s: cannot start its link's thread", l->name);
    l->running = 1;
    return TACT_OK;
}

/* A message from the worker: one of its executors' to a port of this
 * client, checked before it is passed on.  Returns 0, or -1 with why. */
static int s_from_worker(ta_link_t *l, zmq_msg_t *env, zmq_msg_t *bulk, char *why, size_t len) {
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_READY);
    uint64_t bulk_len;
    ta_error_t e;
    const ta_rt_config_t *c = ta_rt_config(l->rt);
    int rc = ta_msg_decode(&m, zmq_msg_data(env), zmq_msg_size(env), c->max_msg_bytes, &bulk_len, &e);
    if (rc != TACT_OK) return snprintf(why, len, "a malformed message: %s", e.text), -1;
    int mine = 0;
    for (int i = 0; i < l->nexecutors; i++) mine |= m.sender == l->executors[i];
    if (!mine) return snprintf(why, len, "a message as port %" PRIu32 ", not one of its executors", m.sender), -1;
    /* To a port of this client, or to another worker's executor (a copy
     * between devices of two workers goes through here). */
    int own = 0;
    for (int i = 0; i < l->nexecutors; i++) own |= m.dest == l->executors[i];
    if (m.dest == 0 || m.dest > l->ports || own) return snprintf(why, len, "a message for port %" PRIu32 ", not one of this client's", m.dest), -1;
    if (bulk_len != zmq_msg_size(bulk)) return snprintf(why, len, "a bulk of %zu bytes, its envelope says %" PRIu64, zmq_msg_size(bulk), bulk_len), -1;
    void **push = &l->pushes[m.dest];
    if (!*push && ta_rt_connect(l->rt, m.dest, push, &e) != TACT_OK) return snprintf(why, len, "%s", e.text), -1;
    if (zmq_msg_send(env, *push, bulk_len ? ZMQ_SNDMORE : 0) < 0) return snprintf(why, len, "pass on: %s", zmq_strerror(errno)), -1;
    if (bulk_len && zmq_msg_send(bulk, *push, 0) < 0) return snprintf(why, len, "pass on: %s", zmq_strerror(errno)), -1;
    return 0;
}

static void *s_run(void *arg) {
    ta_link_t *l = arg;
    int64_t last_rx = s_now_ms(), last_tx = 0;
    zmq_msg_t a, b;
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
        zmq_pollitem_t items[3] = {{l->dealer, 0, ZMQ_POLLIN, 0}, {l->mailbox, 0, ZMQ_POLLIN, 0}, {l->monitor, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, l->monitor ? 3 : 2, 50) < 0 && errno != EINTR) break;
        uint16_t ev;
        uint32_t val;
        while (l->monitor && (items[2].revents & ZMQ_POLLIN) && s_event(l->monitor, &ev, &val) == 0)
            if (ev == ZMQ_EVENT_DISCONNECTED) s_lose(l, "the connection closed (the worker stopped, or its process died)");
        /* At most 256 frames and a quarter of a heartbeat's time, so the
         * pieces of a large bulk never hold up the heartbeat below. */
        int64_t until = s_now_ms() + TA_LINK_BEAT_MS / 4;
        for (int i = 0; i < 256 && (items[0].revents & ZMQ_POLLIN) && (i == 0 || s_now_ms() < until); i++) {
            zmq_msg_init(&a);
            if (zmq_msg_recv(&a, l->dealer, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&a);
                break;
            }
            last_rx = s_now_ms();
            char why[256] = "";
            const char *k = zmq_msg_data(&a);
            int more = zmq_msg_more(&a);
            char kind = zmq_msg_size(&a) == 1 ? k[0] : '?';
            zmq_msg_close(&a);
            if (kind == 'P' && !more) continue;
            if ((kind == 'M' || kind == 'N' || kind == 'C') && !l->lost) {
                zmq_msg_t env, bulk;
                int got = ta_link_take(&l->rx, l->dealer, kind, more, ta_rt_config(l->rt)->max_bulk_bytes, &env, &bulk, why, sizeof why);
                if (got == 1 && s_from_worker(l, &env, &bulk, why, sizeof why) != 0) got = -1;
                zmq_msg_close(&env);
                zmq_msg_close(&bulk);
                if (got >= 0) continue;
            } else if (kind == 'B') {
                zmq_msg_init(&b);
                char text[200] = "it closed the session";
                if (more && zmq_msg_recv(&b, l->dealer, ZMQ_DONTWAIT) >= 0) ta_printable(zmq_msg_data(&b), zmq_msg_size(&b), text, sizeof text);
                zmq_msg_close(&b);
                snprintf(why, sizeof why, "the worker ended the session: %s", text);
            } else if (!l->lost) {
                snprintf(why, sizeof why, "a frame of unknown kind");
            }
            ta_zmq_drain(l->dealer);
            if (why[0]) {
                s_lose(l, why);
                s_send(l->dealer, "B", 1, ZMQ_DONTWAIT);
            }
        }
        if (items[1].revents & ZMQ_POLLIN) {
            /* What this client's stages send the worker's executors (dropped once it is lost). */
            int n = ta_link_pass(l->mailbox, l->lost ? NULL : l->dealer, NULL, 0);
            if (n < 0) {
                char why[200];
                snprintf(why, sizeof why, "cannot send to it: %s", zmq_strerror(errno));
                s_lose(l, why);
            }
            if (n) last_tx = s_now_ms();
        }
        int64_t now = s_now_ms();
        if (now - last_tx >= TA_LINK_BEAT_MS && !l->lost) {
            s_send(l->dealer, "P", 1, ZMQ_DONTWAIT);
            last_tx = now;
        }
        /* Another worker lost: this one's executors may be waiting for it
         * (a copy between devices); they are told, and fail at once. */
        for (uint32_t id = 1; !l->lost && id <= l->ports; id++) {
            char text[200];
            if (l->told[id] || !ta_rt_lost(l->rt, id, text, sizeof text)) continue;
            uint8_t be[4] = {(uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
            l->told[id] = 1;
            s_send(l->dealer, "L", 1, ZMQ_SNDMORE | ZMQ_DONTWAIT);
            s_send(l->dealer, be, 4, ZMQ_SNDMORE | ZMQ_DONTWAIT);
            s_send(l->dealer, text, strlen(text), ZMQ_DONTWAIT);
        }
        if (!l->lost && now - last_rx > TA_LINK_LOST_MS) {
            char why[200];
            snprintf(why, sizeof why, "no heartbeat for %d ms (the worker died or hung, or the network is down)", TA_LINK_LOST_MS);
            s_lose(l, why);
        }
    }
    return NULL;
}

void ta_link_close(ta_link_t **pl) {
    ta_link_t *l = *pl;
    if (!l) return;
    *pl = NULL;
    if (l->running) {
        __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
        pthread_join(l->thread, NULL);
    }
    if (l->dealer) {
        if (l->monitor) zmq_socket_monitor(l->dealer, NULL, 0);
        int linger = 200; /* the bye has a moment to leave */
        zmq_setsockopt(l->dealer, ZMQ_LINGER, &linger, sizeof linger);
        if (l->running && !l->lost) s_send(l->dealer, "B", 1, ZMQ_DONTWAIT);
        zmq_close(l->dealer);
    }
    for (uint32_t i = 0; l->pushes && i <= l->ports; i++)
        if (l->pushes[i]) zmq_close(l->pushes[i]);
    if (l->monitor) zmq_close(l->monitor);
    ta_link_rx_fini(&l->rx);
    ta_free(l->told);
    if (l->mailbox) zmq_close(l->mailbox);
    ta_free(l->pushes);
    ta_free(l->executors);
    ta_free(l);
}


/* ------------------------------------------------------------- the wire */

/* A large bulk's frame, shared by the pieces that point into it. */
typedef struct {
    zmq_msg_t frame;
    int refs;
} s_shared_t;

static void s_piece_free(void *data, void *hint) {
    (void)data;
    s_shared_t *sh = hint;
    if (__atomic_sub_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        zmq_msg_close(&sh->frame);
        ta_free(sh);
    }
}

int ta_link_put(void *sock, const void *rid, size_t rid_len, zmq_msg_t *env, zmq_msg_t *bulk) {
    size_t n = bulk ? zmq_msg_size(bulk) : 0;
    int big = n > TA_LINK_CHUNK, ok = 1;
    if (rid) ok = zmq_send(sock, rid, rid_len, ZMQ_SNDMORE) >= 0;
    ok = ok && zmq_send(sock, big ? "N" : "M", 1, ZMQ_SNDMORE) >= 0;
    ok = ok && zmq_msg_send(env, sock, n || big ? ZMQ_SNDMORE : 0) >= 0;
    if (!big) {
        if (ok && n) ok = zmq_msg_send(bulk, sock, 0) >= 0;
        return ok ? 0 : -1; /* what was not sent, the caller closes */
    }
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)n >> (8 * i));
    ok = ok && zmq_send(sock, le, 8, 0) >= 0;
    s_shared_t *sh = ok ? ta_malloc(sizeof *sh) : NULL;
    if (!sh) return -1;
    zmq_msg_init(&sh->frame);
    zmq_msg_move(&sh->frame, bulk);
    sh->refs = 1; /* this function's, dropped at the end */
    const uint8_t *data = zmq_msg_data(&sh->frame);
    for (size_t at = 0; ok && at < n; at += TA_LINK_CHUNK) {
        size_t len = n - at < TA_LINK_CHUNK ? n - at : TA_LINK_CHUNK;
        zmq_msg_t piece;
        __atomic_add_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL);
        if (zmq_msg_init_data(&piece, (void *)(data + at), len, s_piece_free, sh) != 0) {
            __atomic_sub_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL);
            ok = 0;
            break;
        }
        ok = (!rid || zmq_send(sock, rid, rid_len, ZMQ_SNDMORE) >= 0) && zmq_send(sock, "C", 1, ZMQ_SNDMORE) >= 0 && zmq_msg_send(&piece, sock, 0) >= 0;
        if (!ok) zmq_msg_close(&piece);
    }
    s_piece_free(NULL, sh);
    return ok ? 0 : -1;
}

int ta_link_pass(void *mailbox, void *sock, const void *rid, size_t rid_len) {
    int n = 0;
    for (; n < 256; n++) {
        zmq_msg_t env, bulk;
        zmq_msg_init(&env);
        zmq_msg_init(&bulk);
        int got = zmq_msg_recv(&env, mailbox, ZMQ_DONTWAIT) >= 0, more = got && zmq_msg_more(&env);
        if (more && zmq_msg_recv(&bulk, mailbox, ZMQ_DONTWAIT) < 0) more = 0;
        if (got) ta_zmq_drain(mailbox);
        int failed = got && sock && ta_link_put(sock, rid, rid_len, &env, more ? &bulk : NULL) != 0;
        int e = errno;
        zmq_msg_close(&env);
        zmq_msg_close(&bulk);
        errno = e;
        if (failed) return -1;
        if (!got) break;
    }
    return n;
}

static void s_buf_free(void *data, void *hint) {
    (void)hint;
    ta_free(data);
}

void ta_link_rx_fini(ta_link_rx_t *rx) {
    if (rx->active) zmq_msg_close(&rx->env);
    ta_free(rx->buf);
    memset(rx, 0, sizeof *rx);
}

int ta_link_take(ta_link_rx_t *rx, void *sock, char kind, int more, size_t max_bulk, zmq_msg_t *env, zmq_msg_t *bulk, char *why, size_t len) {
    zmq_msg_init(env);
    zmq_msg_init(bulk);
    if (kind == 'C') {
        zmq_msg_t piece;
        zmq_msg_init(&piece);
        int ok = rx->active && more && zmq_msg_recv(&piece, sock, ZMQ_DONTWAIT) >= 0 && !zmq_msg_more(&piece) &&
                 zmq_msg_size(&piece) <= rx->len - rx->got;
        if (ok) memcpy(rx->buf + rx->got, zmq_msg_data(&piece), zmq_msg_size(&piece)), rx->got += zmq_msg_size(&piece);
        zmq_msg_close(&piece);
        if (!ok) return snprintf(why, len, "a piece of a bulk nobody announced, or too long"), -1;
        if (rx->got < rx->len) return 0;
        zmq_msg_move(env, &rx->env);
        zmq_msg_close(bulk);
        zmq_msg_init_data(bulk, rx->buf, rx->len, s_buf_free, NULL); /* cannot fail: no allocation */
        rx->buf = NULL;
        rx->active = 0;
        return 1;
    }
    if (rx->active) return snprintf(why, len, "a message in the middle of a bulk's pieces"), -1;
    if (!more || zmq_msg_recv(env, sock, ZMQ_DONTWAIT) < 0) return snprintf(why, len, "a message cut short"), -1;
    if (kind == 'M') {
        if (zmq_msg_more(env) && (zmq_msg_recv(bulk, sock, ZMQ_DONTWAIT) < 0 || zmq_msg_more(bulk) || zmq_msg_size(bulk) == 0))
            return snprintf(why, len, "a bulk frame missing or followed by more"), -1;
        return 1;
    }
    /* 'N': the bulk's length, then its pieces. */
    uint8_t le[8];
    uint64_t n = 0;
    if (!zmq_msg_more(env) || zmq_recv(sock, le, sizeof le, ZMQ_DONTWAIT) != 8) return snprintf(why, len, "a bulk's length missing"), -1;
    for (int i = 0; i < 8; i++) n |= (uint64_t)le[i] << (8 * i);
    if (n <= TA_LINK_CHUNK || n > max_bulk) return snprintf(why, len, "a bulk of %" PRIu64 " bytes in pieces", n), -1;
    if (!(rx->buf = ta_malloc((size_t)n))) return snprintf(why, len, "out of memory for a bulk of %" PRIu64 " bytes", n), -1;
    zmq_msg_init(&rx->env);
    zmq_msg_move(&rx->env, env);
    rx->len = (size_t)n;
    rx->got = 0;
    rx->active = 1;
    return 0;
}

/* ------------------------------------------------------- worker processes */

extern char **environ;

const char *ta_worker_command(void) {
    const char *env = getenv("TACT_WORKER");
    if (env && *env) return access(env, X_OK) == 0 ? env : NULL;
#ifdef TACT_INSTALL_BIN
    if (access(TACT_INSTALL_BIN, X_OK) == 0) return TACT_INSTALL_BIN;
#endif
#ifdef TACT_BUILD_BIN
    if (access(TACT_BUILD_BIN, X_OK) == 0) return TACT_BUILD_BIN;
#endif
    return NULL;
}

int ta_worker_spawn(const char *bin, const char *listen, const char *devices, int threads, int timeout_ms, int *pid, char *uri,
                    size_t len, ta_error_t *err) {
    *pid = 0;
    if (!bin && !(bin = ta_worker_command()))
        return ta_error_set(err, TACT_EDEVICE, "no tact command to run a worker with (set TACT_WORKER to its path)");
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return ta_error_set(err, TACT_EIO, "worker: pipe: %s", strerror(errno));
    char nthreads[16];
    snprintf(nthreads, sizeof nthreads, "%d", threads);
    char *argv[] = {(char *)bin, "worker", "--listen", (char *)listen, "--devices", (char *)devices, "--print-uri", "--quiet", "--threads", nthreads, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    pid_t child;
    int rc = posix_spawn(&child, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return ta_error_set(err, TACT_EDEVICE, "worker: cannot run %s: %s", bin, strerror(rc));
    }
    /* Its first line, within the time given. */
    size_t got = 0;
    int64_t deadline = s_now_ms() + timeout_ms;
    int done = 0;
    while (!done && got + 1 < len) {
        int64_t left = deadline - s_now_ms();
        struct pollfd p = {fds[0], POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
        ssize_t n = read(fds[0], uri + got, len - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
        uri[got] = '\0';
        done = memchr(uri, '\n', got) != NULL;
    }
    close(fds[0]);
    uri[got] = '\0';
    if (!done) {
        ta_worker_stop(child, 1000);
        return ta_error_set(err, TACT_EDEVICE, "worker %s for %s: %s", bin, devices, got ? "its URI line is too long" : "printed no URI (see its messages above)");
    }
    uri[strcspn(uri, "\n")] = '\0';
    *pid = child;
    return TACT_OK;
}

void ta_worker_stop(int pid, int timeout_ms) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int64_t end = s_now_ms() + timeout_ms;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) return;
        if (s_now_ms() >= end) break;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}
