/* runtime.c - the runtime context, the id registry, and ports: mailboxes over inproc, ipc or tcp. */
#include "runtime.h"

#include <errno.h>
#include <stdlib.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "log.h"
#include "mem.h"

/* ---------------------------------------------------------------- runtime */

/* Copies the endpoint of port id into buf and its name into name (if not
 * NULL); returns 0, or -1 if the port is not bound. */
static int s_endpoint(ta_rt_t *rt, uint32_t id, char *buf, size_t len, char *name, size_t name_len);

typedef struct {
    char name[64];
    char endpoint[256]; /* empty until the port bound its mailbox */
    int route;          /* a port of another process, reached through a link (ta_rt_route) */
    int lost;           /* that process is gone (ta_rt_lose): the loss's number, from 1; lost_text says why */
    char lost_text[200];
} s_entry_t;

struct ta_rt {
    ta_rt_config_t cfg;
    int ending; /* ta_rt_ending: sends do not wait for room */
    char log_path[4096];
    char ipc_dir[1024]; /* ipc: the runtime's private folder of sockets (mode 0700), removed at destroy */
    int own_ipc_dir;
    void *zmq;
    unsigned serial; /* distinguishes runtimes of one process in endpoint names */
    pthread_mutex_t lock;
    s_entry_t *entries; /* by id; entry 0 is the owner pseudo-port */
    size_t nentries, cap;
    ta_log_writer_t *log;
    uint64_t reports;
    char last_report[256];
    int abandoned;     /* actors left running after a timeout */
    int failed;        /* ta_rt_fail's code, read without the lock by waits */
    char failure[256];
    size_t open_ports; /* ports not yet destroyed, actors' included */
    int any_lost;      /* how many ports were lost so far (read without the lock) */
    char last_lost[200]; /* the latest loss's text */
    /* CURVE on tcp (see runtime.h). */
    int curve;
    char public_key[41], secret_key[41];
    uint8_t public_bin[32];
    ta_curve_peer_t *peers;
    uint8_t (*peers_bin)[32];
    size_t npeers;
    pthread_t zap_thread;
    void *zap_pipe; /* owner side of the handler's stop pipe */
    int zap_running;
};

/* ------------------------------------------------------------ ZAP handler */

/* The runtime's own key is "self"; a configured peer's "peer:N". */
static int s_admit(const uint8_t key[32], char *user, size_t len, void *ud) {
    ta_rt_t *rt = ud;
    if (memcmp(key, rt->public_bin, 32) == 0) return snprintf(user, len, "self"), 1;
    for (size_t i = 0; i < rt->npeers; i++)
        if (memcmp(key, rt->peers_bin[i], 32) == 0) return snprintf(user, len, "peer:%zu", i), 1;
    return 0;
}

int ta_zap_answer(void *rep, int (*admit)(const uint8_t key[32], char *user, size_t len, void *ud), void *ud) {
    /* version, request id, domain, address, identity, mechanism, credentials... */
    zmq_msg_t frames[8];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, rep, 0) < 0) {
            zmq_msg_close(&f);
            break;
        }
        more = zmq_msg_more(&f);
        if (n < 8) frames[n++] = f;
        else zmq_msg_close(&f);
    }
    if (n == 0) return -1;
    const char *status = "400", *text = "unknown key";
    char user[32] = "";
    if (n >= 7 && zmq_msg_size(&frames[0]) == 3 && memcmp(zmq_msg_data(&frames[0]), "1.0", 3) == 0 && zmq_msg_size(&frames[5]) == 5 &&
        memcmp(zmq_msg_data(&frames[5]), "CURVE", 5) == 0 && zmq_msg_size(&frames[6]) == 32) {
        if (admit(zmq_msg_data(&frames[6]), user, sizeof user, ud) && user[0]) status = "200", text = "OK";
        else user[0] = '\0';
    } else {
        text = "not a CURVE request";
    }
    zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
    if (n >= 2) zmq_send(rep, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]), ZMQ_SNDMORE);
    else zmq_send(rep, "", 0, ZMQ_SNDMORE);
    zmq_send(rep, status, 3, ZMQ_SNDMORE);
    zmq_send(rep, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(rep, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(rep, "", 0, 0);
    for (int i = 0; i < n; i++) zmq_msg_close(&frames[i]);
    return status[0] == '2';
}

/* The ZAP handler (ZeroMQ RFC 27) of a runtime on tcp: every connection to
 * one of its CURVE mailboxes is asked about here, on the runtime's own
 * ZeroMQ context, and admitted only with the runtime's own key (user id
 * "self") or a configured peer's ("peer:N").  It runs in a thread of its
 * own until the runtime is destroyed. */
static void *s_zap_run(void *arg) {
    ta_rt_t *rt = arg;
    void *rep = zmq_socket(rt->zmq, ZMQ_REP), *pipe = zmq_socket(rt->zmq, ZMQ_PAIR);
    char pipe_ep[64];
    snprintf(pipe_ep, sizeof pipe_ep, "inproc://tact-zap-stop-%p", (void *)rt);
    int linger = 0;
    if (rep) zmq_setsockopt(rep, ZMQ_LINGER, &linger, sizeof linger);
    if (pipe) zmq_setsockopt(pipe, ZMQ_LINGER, &linger, sizeof linger);
    int ok = rep && pipe && zmq_bind(rep, "inproc://zeromq.zap.01") == 0 && zmq_connect(pipe, pipe_ep) == 0;
    /* Tell the owner whether the handler is in place: without it nothing may be bound. */
    zmq_send(pipe, ok ? "1" : "0", 1, 0);
    while (ok) {
        zmq_pollitem_t items[2] = {{pipe, 0, ZMQ_POLLIN, 0}, {rep, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break; /* ETERM: the context is going away */
        }
        if (items[0].revents & ZMQ_POLLIN) break;
        if (!(items[1].revents & ZMQ_POLLIN)) continue;
        ta_zap_answer(rep, s_admit, rt);
    }
    if (rep) zmq_close(rep);
    if (pipe) zmq_close(pipe);
    return NULL;
}

/* Sets up CURVE for a tcp runtime: its key pair, the peers' keys, and the
 * ZAP handler, which is running (or the runtime fails) before any mailbox
 * is bound. */
static int s_curve_init(ta_rt_t *rt, ta_error_t *err) {
    const ta_rt_config_t *c = &rt->cfg;
    if (c->curve_secret_key) {
        if (strlen(c->curve_secret_key) != 40 || zmq_curve_public(rt->public_key, c->curve_secret_key) != 0)
            return ta_error_set(err, TACT_EINVAL, "runtime: the CURVE secret key is not 40 characters of Z85");
        snprintf(rt->secret_key, sizeof rt->secret_key, "%s", c->curve_secret_key);
    } else if (zmq_curve_keypair(rt->public_key, rt->secret_key) != 0) {
        return ta_error_set(err, TACT_ETRANSPORT, "runtime: no CURVE key pair: %s (libzmq without CURVE?)", zmq_strerror(errno));
    }
    zmq_z85_decode(rt->public_bin, rt->public_key);
    if (c->ncurve_peers) {
        rt->peers = ta_calloc(c->ncurve_peers, sizeof *rt->peers);
        rt->peers_bin = ta_calloc(c->ncurve_peers, sizeof *rt->peers_bin);
        if (!rt->peers || !rt->peers_bin) return ta_error_set(err, TACT_ENOMEM, "runtime: out of memory");
        for (size_t i = 0; i < c->ncurve_peers; i++) {
            rt->peers[i] = c->curve_peers[i];
            rt->peers[i].public_key[40] = '\0';
            if (strlen(rt->peers[i].public_key) != 40 || !zmq_z85_decode(rt->peers_bin[i], rt->peers[i].public_key))
                return ta_error_set(err, TACT_EINVAL, "runtime: CURVE peer %zu: the key is not 40 characters of Z85", i);
        }
        rt->npeers = c->ncurve_peers;
    }
    rt->cfg.curve_secret_key = NULL;
    rt->cfg.curve_peers = NULL;
    char ep[64], ok = '0';
    snprintf(ep, sizeof ep, "inproc://tact-zap-stop-%p", (void *)rt);
    rt->zap_pipe = zmq_socket(rt->zmq, ZMQ_PAIR);
    int linger = 0, timeout = rt->cfg.timeout_ms;
    if (!rt->zap_pipe || zmq_setsockopt(rt->zap_pipe, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(rt->zap_pipe, ZMQ_RCVTIMEO, &timeout, sizeof timeout) != 0 || zmq_bind(rt->zap_pipe, ep) != 0)
        return ta_error_set(err, TACT_ETRANSPORT, "runtime: no pipe for the ZAP handler: %s", zmq_strerror(errno));
    if (pthread_create(&rt->zap_thread, NULL, s_zap_run, rt) != 0)
        return ta_error_set(err, TACT_ENOMEM, "runtime: cannot start the ZAP handler");
    rt->zap_running = 1;
    if (zmq_recv(rt->zap_pipe, &ok, 1, 0) != 1 || ok != '1')
        return ta_error_set(err, TACT_ETRANSPORT, "runtime: the ZAP handler could not bind (another handler on this context?)");
    rt->curve = 1;
    return TACT_OK;
}

static void s_curve_fini(ta_rt_t *rt) {
    if (rt->zap_running) {
        zmq_send(rt->zap_pipe, "", 0, ZMQ_DONTWAIT);
        pthread_join(rt->zap_thread, NULL);
        rt->zap_running = 0;
    }
    if (rt->zap_pipe) zmq_close(rt->zap_pipe);
    rt->zap_pipe = NULL;
    memset(rt->secret_key, 0, sizeof rt->secret_key);
    ta_free(rt->peers);
    ta_free(rt->peers_bin);
    rt->peers = NULL;
    rt->peers_bin = NULL;
}

int ta_rt_public_key(const ta_rt_t *rt, char buf[41]) {
    if (!rt->curve) return -1;
    memcpy(buf, rt->public_key, 41);
    return 0;
}

/* Whether a message whose connection the ZAP handler admitted as user may
 * say it comes from sender. */
static int s_sender_allowed(ta_rt_t *rt, const char *user, uint32_t sender) {
    if (!user) return 0;
    if (strcmp(user, "self") == 0) {
        pthread_mutex_lock(&rt->lock);
        int ok = sender != 0 && sender < rt->nentries;
        pthread_mutex_unlock(&rt->lock);
        return ok;
    }
    unsigned long i;
    char *end;
    if (strncmp(user, "peer:", 5) != 0) return 0;
    i = strtoul(user + 5, &end, 10);
    return *end == '\0' && i < rt->npeers && sender >= rt->peers[i].first_id && sender <= rt->peers[i].last_id;
}

void ta_rt_config_default(ta_rt_config_t *c) {
    memset(c, 0, sizeof *c);
    c->transport = TA_TRANSPORT_INPROC;
    c->timeout_ms = 5000;
    c->max_msg_bytes = 16u << 20;
    c->max_bulk_bytes = (size_t)1 << 30;
    c->ipc_dir = "/tmp";
}

int ta_transport_parse(const char *name, ta_transport_t *out) {
    static const char *names[] = {"inproc", "ipc", "tcp"};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (ta_transport_t)i;
            return 0;
        }
    return -1;
}

const char *ta_transport_name(ta_transport_t t) {
    return t == TA_TRANSPORT_IPC ? "ipc" : t == TA_TRANSPORT_TCP ? "tcp" : "inproc";
}

int ta_rt_new(ta_rt_t **out, const ta_rt_config_t *cfg, ta_error_t *err) {
    static unsigned serial;
    *out = NULL;
    ta_rt_t *rt = ta_calloc(1, sizeof *rt);
    if (!rt) return ta_error_set(err, TACT_ENOMEM, "runtime: out of memory");
    if (cfg) rt->cfg = *cfg;
    else ta_rt_config_default(&rt->cfg);
    if (rt->cfg.timeout_ms <= 0 || rt->cfg.max_msg_bytes == 0 || rt->cfg.transport > TA_TRANSPORT_TCP) {
        ta_free(rt);
        return ta_error_set(err, TACT_EINVAL, "runtime: timeout_ms and max_msg_bytes must be positive");
    }
    snprintf(rt->ipc_dir, sizeof rt->ipc_dir, "%s", rt->cfg.ipc_dir ? rt->cfg.ipc_dir : "/tmp");
    rt->cfg.ipc_dir = rt->ipc_dir;
    if (rt->cfg.log_path) {
        snprintf(rt->log_path, sizeof rt->log_path, "%s", rt->cfg.log_path);
        rt->cfg.log_path = rt->log_path;
    }
    rt->serial = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
    if (rt->cfg.transport == TA_TRANSPORT_IPC) {
        /* Sockets go in a folder of this runtime's own, which no other user
         * can enter, and which goes away with the runtime. */
        char dir[1024];
        int n = snprintf(dir, sizeof dir, "%s/tact-%ld-XXXXXX", rt->ipc_dir, (long)getpid());
        if (n >= 80 || !mkdtemp(dir)) { /* a socket path must fit in sun_path (108 bytes) */
            int e = n >= 80 ? ENAMETOOLONG : errno;
            ta_free(rt);
            return ta_error_set(err, TACT_ETRANSPORT, "runtime: no private ipc folder in %s: %s", cfg && cfg->ipc_dir ? cfg->ipc_dir : "/tmp",
                                strerror(e));
        }
        snprintf(rt->ipc_dir, sizeof rt->ipc_dir, "%s", dir);
        rt->own_ipc_dir = 1;
    }
    pthread_mutex_init(&rt->lock, NULL);
    if (ta_grow((void **)&rt->entries, &rt->cap, 1, sizeof *rt->entries) != TACT_OK) goto nomem;
    memset(&rt->entries[0], 0, sizeof rt->entries[0]);
    snprintf(rt->entries[0].name, sizeof rt->entries[0].name, "owner");
    rt->nentries = 1;
    if (rt->cfg.log_path) {
        int rc = ta_log_writer_new(&rt->log, rt->cfg.log_path, rt->cfg.log_header, err);
        if (rc != TACT_OK) {
            if (rt->own_ipc_dir) rmdir(rt->ipc_dir);
            ta_free(rt->entries);
            pthread_mutex_destroy(&rt->lock);
            ta_free(rt);
            return rc;
        }
    }
    rt->zmq = zmq_ctx_new();
    if (!rt->zmq) {
        ta_rt_destroy(&rt, NULL);
        return ta_error_set(err, TACT_ETRANSPORT, "runtime: zmq_ctx_new: %s", zmq_strerror(errno));
    }
    if (rt->cfg.transport == TA_TRANSPORT_TCP && !rt->cfg.insecure_tcp) {
        int rc = s_curve_init(rt, err);
        if (rc != TACT_OK) {
            ta_rt_destroy(&rt, NULL);
            return rc;
        }
    } else {
        rt->cfg.curve_secret_key = NULL;
        rt->cfg.curve_peers = NULL;
        rt->cfg.ncurve_peers = 0;
    }
    *out = rt;
    return TACT_OK;
nomem:
    if (rt->own_ipc_dir) rmdir(rt->ipc_dir);
    pthread_mutex_destroy(&rt->lock);
    ta_free(rt);
    return ta_error_set(err, TACT_ENOMEM, "runtime: out of memory");
}

int ta_rt_destroy(ta_rt_t **prt, ta_error_t *err) {
    ta_rt_t *rt = *prt;
    int rc = TACT_OK;
    if (!rt) return TACT_OK;
    *prt = NULL;
    if (__atomic_load_n(&rt->abandoned, __ATOMIC_SEQ_CST)) {
        /* A stray thread still holds sockets and this memory: wake it with
         * ETERM and leave both to it instead of waiting forever.  The ZAP
         * handler is stopped first, so nothing new is admitted. */
        if (rt->zap_running) {
            zmq_send(rt->zap_pipe, "", 0, ZMQ_DONTWAIT);
            pthread_join(rt->zap_thread, NULL);
            rt->zap_running = 0;
        }
        zmq_ctx_shutdown(rt->zmq);
        if (rt->log) ta_log_writer_flush(rt->log); /* what was recorded stays readable */
        return ta_error_set(err, TACT_ETIMEDOUT, "runtime: %d actor(s) did not stop in time; left running",
                            rt->abandoned);
    }
    pthread_mutex_lock(&rt->lock);
    size_t open = rt->open_ports;
    pthread_mutex_unlock(&rt->lock);
    if (open) {
        /* zmq_ctx_term would wait for their sockets forever. */
        *prt = rt;
        return ta_error_set(err, TACT_EINVAL, "runtime: %zu port(s) still open; destroy them (and stop actors) first",
                            open);
    }
    s_curve_fini(rt);
    if (rt->zmq) zmq_ctx_term(rt->zmq);
    if (rt->own_ipc_dir) {
        for (size_t id = 1; id < rt->nentries; id++) {
            char path[1100];
            snprintf(path, sizeof path, "%s/%zu.sock", rt->ipc_dir, id);
            unlink(path);
        }
        rmdir(rt->ipc_dir);
    }
    if (rt->log) rc = ta_log_writer_finish(&rt->log, err);
    pthread_mutex_destroy(&rt->lock);
    ta_free(rt->entries);
    ta_free(rt);
    return rc;
}

const ta_rt_config_t *ta_rt_config(const ta_rt_t *rt) { return &rt->cfg; }
void *ta_rt_zmq(ta_rt_t *rt) { return rt->zmq; }

uint32_t ta_rt_reserve_id(ta_rt_t *rt, const char *name) {
    uint32_t id = 0;
    pthread_mutex_lock(&rt->lock);
    if (rt->nentries < UINT32_MAX &&
        ta_grow((void **)&rt->entries, &rt->cap, rt->nentries + 1, sizeof *rt->entries) == TACT_OK) {
        id = (uint32_t)rt->nentries++;
        memset(&rt->entries[id], 0, sizeof rt->entries[id]);
        snprintf(rt->entries[id].name, sizeof rt->entries[id].name, "%s", name ? name : "port");
    }
    pthread_mutex_unlock(&rt->lock);
    return id;
}

void ta_rt_abandon(ta_rt_t *rt) { __atomic_add_fetch(&rt->abandoned, 1, __ATOMIC_SEQ_CST); }

void ta_rt_ending(ta_rt_t *rt) { __atomic_store_n(&rt->ending, 1, __ATOMIC_SEQ_CST); }

void ta_rt_report(ta_rt_t *rt, const char *fmt, ...) {
    if (!rt) return;
    pthread_mutex_lock(&rt->lock);
    rt->reports++;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->last_report, sizeof rt->last_report, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&rt->lock);
}

void ta_rt_fail(ta_rt_t *rt, int code, const char *fmt, ...) {
    if (!rt) return;
    pthread_mutex_lock(&rt->lock);
    if (!rt->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rt->failure, sizeof rt->failure, fmt, ap);
        va_end(ap);
        __atomic_store_n(&rt->failed, code ? code : TACT_EACTOR, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&rt->lock);
}

int ta_rt_failure(ta_rt_t *rt, char *buf, size_t len) {
    if (!rt || !__atomic_load_n(&rt->failed, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&rt->lock);
    int code = rt->failed;
    if (buf && len) snprintf(buf, len, "%s", rt->failure);
    pthread_mutex_unlock(&rt->lock);
    return code;
}

uint64_t ta_rt_reports(ta_rt_t *rt, char *last, size_t last_len) {
    pthread_mutex_lock(&rt->lock);
    uint64_t n = rt->reports;
    if (last && last_len) snprintf(last, last_len, "%s", rt->last_report);
    pthread_mutex_unlock(&rt->lock);
    return n;
}

int ta_rt_endpoint(ta_rt_t *rt, uint32_t id, char *buf, size_t len) { return s_endpoint(rt, id, buf, len, NULL, 0); }

uint32_t ta_rt_route(ta_rt_t *rt, const char *name, const char *endpoint) {
    if (!endpoint || strlen(endpoint) >= sizeof rt->entries[0].endpoint) return 0;
    uint32_t id = ta_rt_reserve_id(rt, name);
    if (!id) return 0;
    pthread_mutex_lock(&rt->lock);
    snprintf(rt->entries[id].endpoint, sizeof rt->entries[id].endpoint, "%s", endpoint);
    rt->entries[id].route = 1;
    pthread_mutex_unlock(&rt->lock);
    return id;
}

int ta_rt_is_route(ta_rt_t *rt, uint32_t id) {
    if (!rt) return 0;
    pthread_mutex_lock(&rt->lock);
    int r = id < rt->nentries && rt->entries[id].route;
    pthread_mutex_unlock(&rt->lock);
    return r;
}

void ta_rt_lose(ta_rt_t *rt, uint32_t id, const char *fmt, ...) {
    pthread_mutex_lock(&rt->lock);
    if (id < rt->nentries && !rt->entries[id].lost) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rt->entries[id].lost_text, sizeof rt->entries[id].lost_text, fmt, ap);
        va_end(ap);
        /* Losses are numbered in the order they happen (from 1). */
        __atomic_store_n(&rt->entries[id].lost, __atomic_add_fetch(&rt->any_lost, 1, __ATOMIC_RELEASE), __ATOMIC_RELEASE);
        snprintf(rt->last_lost, sizeof rt->last_lost, "%s", rt->entries[id].lost_text);
    }
    pthread_mutex_unlock(&rt->lock);
}

int ta_rt_losses(ta_rt_t *rt) { return rt ? __atomic_load_n(&rt->any_lost, __ATOMIC_ACQUIRE) : 0; }

int ta_rt_lost(ta_rt_t *rt, uint32_t id, char *buf, size_t len) {
    if (!rt || !__atomic_load_n(&rt->any_lost, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&rt->lock);
    int lost = id < rt->nentries ? rt->entries[id].lost : 0;
    if (lost && buf && len) snprintf(buf, len, "%s", rt->entries[id].lost_text);
    pthread_mutex_unlock(&rt->lock);
    return lost;
}

static int s_endpoint(ta_rt_t *rt, uint32_t id, char *buf, size_t len, char *name, size_t name_len) {
    int rc = -1;
    pthread_mutex_lock(&rt->lock);
    if (id < rt->nentries && rt->entries[id].endpoint[0]) {
        snprintf(buf, len, "%s", rt->entries[id].endpoint);
        rc = 0;
    }
    if (name && id < rt->nentries) snprintf(name, name_len, "%s", rt->entries[id].name);
    pthread_mutex_unlock(&rt->lock);
    return rc;
}

/* ------------------------------------------------------------------ ports */

/* A message that arrived while a request waited for another one. */
typedef struct s_deferred {
    struct s_deferred *next;
    ta_msg_t msg;
} s_deferred_t;

typedef struct {
    void *sock;   /* PUSH connected to the destination's mailbox */
    uint64_t seq; /* last sequence number sent there */
} s_out_t;

struct ta_port {
    ta_rt_t *rt;
    uint32_t id;
    char name[64];
    void *mailbox; /* PULL, bound */
    s_out_t *outs; /* by destination id */
    size_t nouts;
    uint64_t next_corr;
    s_deferred_t *deferred, *deferred_tail;
    msgpack_sbuffer sb; /* encoding scratch, reused */
    ta_log_stream_t *log;
    ta_capture_fn capture;
    void *capture_ud;
};

/* The frames a received message owns. */
typedef struct {
    zmq_msg_t env, bulk;
    int has_bulk;
} s_frames_t;

static void s_frames_free(void *p) {
    s_frames_t *f = p;
    zmq_msg_close(&f->env);
    if (f->has_bulk) zmq_msg_close(&f->bulk);
    ta_free(f);
}

static void s_sockopts(void *sock, const ta_rt_config_t *cfg) {
    int linger = 0, timeout = cfg->timeout_ms;
    int64_t max = (int64_t)(cfg->max_msg_bytes > cfg->max_bulk_bytes ? cfg->max_msg_bytes : cfg->max_bulk_bytes);
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
    int hwm = 16384;
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
}

/* Binds p's mailbox on the configured transport and publishes the endpoint. */
static int s_bind(ta_port_t *p, ta_error_t *err) {
    ta_rt_t *rt = p->rt;
    char ep[256];
    switch (rt->cfg.transport) {
    case TA_TRANSPORT_INPROC: snprintf(ep, sizeof ep, "inproc://tact-%u-%" PRIu32, rt->serial, p->id); break;
    case TA_TRANSPORT_IPC:
        snprintf(ep, sizeof ep, "ipc://%s/%" PRIu32 ".sock", rt->ipc_dir, p->id);
        break;
    case TA_TRANSPORT_TCP: snprintf(ep, sizeof ep, "tcp://127.0.0.1:*"); break;
    }
    p->mailbox = zmq_socket(rt->zmq, ZMQ_PULL);
    if (!p->mailbox) return ta_error_set(err, TACT_ETRANSPORT, "port %s: zmq_socket: %s", p->name, zmq_strerror(errno));
    s_sockopts(p->mailbox, &rt->cfg);
    if (rt->curve) {
        int one = 1;
        if (zmq_setsockopt(p->mailbox, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
            zmq_setsockopt(p->mailbox, ZMQ_CURVE_SECRETKEY, rt->secret_key, 40) != 0 ||
            zmq_setsockopt(p->mailbox, ZMQ_ZAP_DOMAIN, "tact", 4) != 0)
            return ta_error_set(err, TACT_ETRANSPORT, "port %s: CURVE server: %s", p->name, zmq_strerror(errno));
        /* libzmq's draft option ZMQ_ZAP_ENFORCE_DOMAIN (93) refuses clients
         * even if the handler were gone; where it is not built in, the
         * handler, running before any bind, is what admits clients. */
        zmq_setsockopt(p->mailbox, 93, &one, sizeof one);
    }
    if (zmq_bind(p->mailbox, ep) != 0)
        return ta_error_set(err, TACT_ETRANSPORT, "port %s: bind %s: %s", p->name, ep, zmq_strerror(errno));
    size_t len = sizeof ep;
    if (zmq_getsockopt(p->mailbox, ZMQ_LAST_ENDPOINT, ep, &len) != 0)
        return ta_error_set(err, TACT_ETRANSPORT, "port %s: endpoint: %s", p->name, zmq_strerror(errno));
    pthread_mutex_lock(&rt->lock);
    snprintf(rt->entries[p->id].endpoint, sizeof rt->entries[p->id].endpoint, "%s", ep);
    pthread_mutex_unlock(&rt->lock);
    return TACT_OK;
}

int ta_port_open(ta_rt_t *rt, uint32_t id, ta_port_t **out, ta_error_t *err) {
    *out = NULL;
    pthread_mutex_lock(&rt->lock);
    int reserved = id != 0 && id < rt->nentries;
    pthread_mutex_unlock(&rt->lock);
    if (!reserved) return ta_error_set(err, TACT_EINVAL, "port: id %" PRIu32 " not reserved", id);
    ta_port_t *p = ta_calloc(1, sizeof *p);
    if (!p) return ta_error_set(err, TACT_ENOMEM, "port: out of memory");
    p->rt = rt;
    p->id = id;
    msgpack_sbuffer_init(&p->sb);
    pthread_mutex_lock(&rt->lock);
    snprintf(p->name, sizeof p->name, "%s", rt->entries[id].name);
    rt->open_ports++;
    pthread_mutex_unlock(&rt->lock);
    int rc = s_bind(p, err);
    if (rc == TACT_OK && rt->log && !(p->log = ta_log_writer_stream(rt->log, id, p->name)))
        rc = ta_error_set(err, TACT_ENOMEM, "port %s: out of memory for its log stream", p->name);
    if (rc != TACT_OK) {
        ta_port_destroy(&p);
        return rc;
    }
    *out = p;
    return TACT_OK;
}

int ta_port_new(ta_rt_t *rt, const char *name, ta_port_t **out, ta_error_t *err) {
    uint32_t id = ta_rt_reserve_id(rt, name);
    if (!id) {
        *out = NULL;
        return ta_error_set(err, TACT_ENOMEM, "port %s: out of memory for its id", name);
    }
    return ta_port_open(rt, id, out, err);
}

int ta_port_new_capture(uint32_t id, ta_capture_fn capture, void *ud, ta_port_t **out) {
    ta_port_t *p = ta_calloc(1, sizeof *p);
    *out = p;
    if (!p) return TACT_ENOMEM;
    p->id = id;
    snprintf(p->name, sizeof p->name, "replay-%" PRIu32, id);
    p->capture = capture;
    p->capture_ud = ud;
    msgpack_sbuffer_init(&p->sb);
    return TACT_OK;
}

void ta_port_destroy(ta_port_t **pp) {
    ta_port_t *p = *pp;
    if (!p) return;
    *pp = NULL;
    for (size_t i = 0; i < p->nouts; i++)
        if (p->outs[i].sock) zmq_close(p->outs[i].sock);
    if (p->mailbox) zmq_close(p->mailbox);
    if (p->rt) {
        pthread_mutex_lock(&p->rt->lock);
        p->rt->entries[p->id].endpoint[0] = '\0';
        p->rt->open_ports--;
        pthread_mutex_unlock(&p->rt->lock);
    }
    while (p->deferred) {
        s_deferred_t *d = p->deferred;
        p->deferred = d->next;
        ta_msg_release(&d->msg);
        ta_free(d);
    }
    msgpack_sbuffer_destroy(&p->sb);
    ta_free(p->outs);
    ta_free(p);
}

uint32_t ta_port_id(const ta_port_t *p) { return p->id; }
ta_rt_t *ta_port_rt(const ta_port_t *p) { return p->rt; }
void *ta_port_mailbox(ta_port_t *p) { return p->mailbox; }

int ta_rt_connect(ta_rt_t *rt, uint32_t id, void **out, ta_error_t *err) {
    *out = NULL;
    char ep[256], name[64] = "?";
    if (s_endpoint(rt, id, ep, sizeof ep, name, sizeof name) != 0)
        return ta_error_set(err, TACT_ENOTFOUND, "no port %" PRIu32 " is bound", id);
    void *s = zmq_socket(rt->zmq, ZMQ_PUSH);
    if (!s) return ta_error_set(err, TACT_ETRANSPORT, "zmq_socket: %s", zmq_strerror(errno));
    s_sockopts(s, &rt->cfg);
    if (rt->curve && strncmp(ep, "tcp://", 6) == 0 &&
        (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, rt->public_key, 40) != 0 || zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, rt->public_key, 40) != 0 ||
         zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, rt->secret_key, 40) != 0)) {
        zmq_close(s);
        return ta_error_set(err, TACT_ETRANSPORT, "CURVE client: %s", zmq_strerror(errno));
    }
    if (zmq_connect(s, ep) != 0) {
        int e = errno;
        zmq_close(s);
        return ta_error_set(err, TACT_ETRANSPORT, "connect to %s (%s): %s", name, ep, zmq_strerror(e));
    }
    *out = s;
    return TACT_OK;
}

/* Returns the destination slot of dest, connecting its socket on first use. */
static int s_out(ta_port_t *p, uint32_t dest, s_out_t **out, ta_error_t *err) {
    char lost[200];
    if (!p->capture && ta_rt_lost(p->rt, dest, lost, sizeof lost))
        return ta_error_set(err, TACT_ETRANSPORT, "%s", lost);
    /* A destination must exist before the table grows for it: a hostile
     * sender id must not make a reply allocate gigabytes. */
    char probe[256];
    if (dest >= p->nouts && !p->capture && s_endpoint(p->rt, dest, probe, sizeof probe, NULL, 0) != 0)
        return ta_error_set(err, TACT_ENOTFOUND, "port %s: no port %" PRIu32 " is bound", p->name, dest);
    if (p->capture && dest > 65535) /* a capture port has no registry: bound the table instead */
        return ta_error_set(err, TACT_ENOTFOUND, "port %s: no port %" PRIu32 " is bound", p->name, dest);
    if (dest >= p->nouts) {
        size_t cap = p->nouts;
        if (ta_grow((void **)&p->outs, &cap, (size_t)dest + 1, sizeof *p->outs) != TACT_OK)
            return ta_error_set(err, TACT_ENOMEM, "port %s: out of memory", p->name);
        memset(p->outs + p->nouts, 0, (cap - p->nouts) * sizeof *p->outs);
        p->nouts = cap;
    }
    s_out_t *o = &p->outs[dest];
    if (!o->sock && !p->capture) {
        ta_error_t e;
        int rc = ta_rt_connect(p->rt, dest, &o->sock, &e);
        if (rc != TACT_OK) return ta_error_set(err, rc, "port %s: %s", p->name, e.text);
    }
    *out = o;
    return TACT_OK;
}

/* Frees zero-copy bulk bytes that never reached the transport. */
static void s_drop_bulk(ta_msg_t *m) {
    if (m->bulk_free) m->bulk_free((void *)m->bulk.ptr, m->bulk_owner);
    m->bulk_free = NULL;
}

int ta_port_send(ta_port_t *p, uint32_t dest, ta_msg_t *m, ta_error_t *err) {
    s_out_t *o = NULL;
    int rc = s_out(p, dest, &o, err);
    if (rc != TACT_OK) {
        s_drop_bulk(m);
        return rc;
    }
    m->sender = p->id;
    m->dest = dest;
    /* A heartbeat takes no sequence number: how many were sent depends on
     * timing, and the numbers of the messages after it must not. */
    int counted = m->type != TA_MSG_PROGRESS;
    m->seq = counted ? o->seq + 1 : 0;
    if (ta_msg_encode(m, &p->sb) != TACT_OK) {
        s_drop_bulk(m);
        return ta_error_set(err, TACT_ENOMEM, "port %s: out of memory encoding %s", p->name, ta_msg_type_name(m->type));
    }
    if (p->capture) {
        o->seq += counted;
        rc = p->capture(p->capture_ud, m);
        s_drop_bulk(m);
        return rc;
    }
    const ta_rt_config_t *cfg = &p->rt->cfg;
    if (p->sb.size > cfg->max_msg_bytes || m->bulk.len > cfg->max_bulk_bytes) {
        s_drop_bulk(m);
        return ta_error_set(err, TACT_ETOOBIG, "port %s: %s of %zu+%zu bytes exceeds the configured limits", p->name,
                            ta_msg_type_name(m->type), p->sb.size, m->bulk.len);
    }
    int more = m->bulk.len ? ZMQ_SNDMORE : 0, now = __atomic_load_n(&p->rt->ending, __ATOMIC_SEQ_CST) ? ZMQ_DONTWAIT : 0;
    if (zmq_send(o->sock, p->sb.data, p->sb.size, more | now) < 0) goto fail;
    /* Recorded now, while zero-copy bulk bytes still belong to the sender:
     * once handed over, an in-process receiver may free them. */
    if (p->log && m->type != TA_MSG_PROGRESS) { /* heartbeats depend on timing: never logged */
        ta_bytes_t env = {(const uint8_t *)p->sb.data, p->sb.size};
        ta_log_stream_record(p->log, TA_LOG_OUT, m, &env);
    }
    if (more) {
        zmq_msg_t frame;
        if (m->bulk_free) {
            if (zmq_msg_init_data(&frame, (void *)m->bulk.ptr, m->bulk.len, m->bulk_free, m->bulk_owner) != 0) goto fail;
            m->bulk_free = NULL; /* the frame owns the bytes now */
        } else {
            if (zmq_msg_init_size(&frame, m->bulk.len) != 0) goto fail;
            memcpy(zmq_msg_data(&frame), m->bulk.ptr, m->bulk.len);
        }
        /* The envelope frame is queued already, so the bulk frame goes out
         * atomically with it (ZeroMQ sends multipart messages whole). */
        if (zmq_msg_send(&frame, o->sock, 0) < 0) {
            zmq_msg_close(&frame);
            goto fail;
        }
    }
    if (!more) s_drop_bulk(m); /* an empty bulk that came with its free: nothing travels, it is freed here */
    o->seq += counted;
    return TACT_OK;
fail:
    rc = errno == EAGAIN ? TACT_ETIMEDOUT : TACT_ETRANSPORT;
    s_drop_bulk(m);
    return ta_error_set(err, rc, "port %s: send %s to port %" PRIu32 ": %s", p->name, ta_msg_type_name(m->type), dest,
                        rc == TACT_ETIMEDOUT ? "no room within the timeout (is the peer alive?)" : zmq_strerror(errno));
}

void ta_zmq_drain(void *sock) {
    int more;
    size_t len = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more) {
        zmq_msg_t junk;
        zmq_msg_init(&junk);
        if (zmq_msg_recv(&junk, sock, ZMQ_DONTWAIT) < 0) more = 0;
        zmq_msg_close(&junk);
        len = sizeof more;
    }
}

int ta_port_recv_raw(ta_port_t *p, ta_msg_t *m, ta_error_t *err) {
    ta_msg_release(m);
    s_frames_t *f = ta_malloc(sizeof *f);
    if (!f) {
        /* Consume the message anyway so the mailbox keeps moving. */
        zmq_msg_t junk;
        zmq_msg_init(&junk);
        zmq_msg_recv(&junk, p->mailbox, ZMQ_DONTWAIT);
        zmq_msg_close(&junk);
        ta_zmq_drain(p->mailbox);
        return ta_error_set(err, TACT_ENOMEM, "port %s: out of memory receiving", p->name);
    }
    f->has_bulk = 0;
    zmq_msg_init(&f->env);
    if (zmq_msg_recv(&f->env, p->mailbox, ZMQ_DONTWAIT) < 0) {
        int e = errno;
        zmq_msg_close(&f->env);
        ta_free(f);
        return ta_error_set(err, e == EAGAIN ? TACT_ETIMEDOUT : TACT_ETRANSPORT, "port %s: receive: %s", p->name,
                            zmq_strerror(e));
    }
    uint64_t bulk_len = 0;
    int rc = ta_msg_decode(m, zmq_msg_data(&f->env), zmq_msg_size(&f->env), p->rt->cfg.max_msg_bytes, &bulk_len, err);
    if (rc == TACT_OK && bulk_len > p->rt->cfg.max_bulk_bytes)
        rc = ta_error_set(err, TACT_ETOOBIG, "bulk of %" PRIu64 " bytes exceeds the limit", bulk_len);
    if (rc == TACT_OK && bulk_len) {
        zmq_msg_init(&f->bulk);
        f->has_bulk = 1;
        if (!zmq_msg_more(&f->env) || zmq_msg_recv(&f->bulk, p->mailbox, ZMQ_DONTWAIT) < 0)
            rc = ta_error_set(err, TACT_EPROTO, "bulk frame missing");
        else if (zmq_msg_size(&f->bulk) != bulk_len)
            rc = ta_error_set(err, TACT_EPROTO, "bulk frame of %zu bytes, envelope announced %" PRIu64,
                              zmq_msg_size(&f->bulk), bulk_len);
    }
    int more = zmq_msg_more(f->has_bulk ? &f->bulk : &f->env);
    if (rc == TACT_OK && more) rc = ta_error_set(err, TACT_EPROTO, "unexpected extra frames");
    /* Over CURVE the envelope's sender must be one the authenticated key
     * may send as, and every message must be for this port. */
    if (rc == TACT_OK && p->rt->curve && !s_sender_allowed(p->rt, zmq_msg_gets(&f->env, "User-Id"), m->sender))
        rc = ta_error_set(err, TACT_EPROTO, "sender %" PRIu32 " does not match the authenticated peer (%s)", m->sender,
                          zmq_msg_gets(&f->env, "User-Id") ? zmq_msg_gets(&f->env, "User-Id") : "none");
    if (rc == TACT_OK && m->dest != p->id) rc = ta_error_set(err, TACT_EPROTO, "addressed to port %" PRIu32 ", not this one", m->dest);
    if (more) ta_zmq_drain(p->mailbox);
    if (rc != TACT_OK) {
        char text[256];
        snprintf(text, sizeof text, "%s", err ? err->text : "");
        ta_error_set(err, rc, "port %s: rejected a message: %s", p->name, text);
        ta_msg_init(m, TA_MSG_READY);
        s_frames_free(f);
        return rc;
    }
    if (f->has_bulk) {
        m->bulk.ptr = zmq_msg_data(&f->bulk);
        m->bulk.len = zmq_msg_size(&f->bulk);
    }
    m->wire_.ptr = zmq_msg_data(&f->env);
    m->wire_.len = zmq_msg_size(&f->env);
    m->storage_ = f;
    m->storage_free_ = s_frames_free;
    return TACT_OK;
}

/* The bulk frame a received message held, kept for a message that passes
 * it on; freed once its send is done with it. */
static void s_kept_bulk_free(void *data, void *owner) {
    (void)data;
    zmq_msg_close(owner);
    ta_free(owner);
}

void ta_msg_pass_bulk(ta_msg_t *from, ta_msg_t *to) {
    to->bulk = from->bulk;
    s_frames_t *f = from->storage_free_ == s_frames_free ? from->storage_ : NULL;
    zmq_msg_t *keep = f && f->has_bulk ? ta_malloc(sizeof *keep) : NULL;
    if (!keep) return; /* the send copies the bytes */
    zmq_msg_init(keep);
    zmq_msg_move(keep, &f->bulk);
    f->has_bulk = 0;
    to->bulk.ptr = zmq_msg_data(keep); /* a small frame's bytes live inside it, and moved */
    to->bulk_owner = keep;
    to->bulk_free = s_kept_bulk_free;
    from->bulk.ptr = NULL;
    from->bulk.len = 0;
}

int ta_port_recorded(const ta_port_t *p) { return p && p->log != NULL; }

void ta_port_note(ta_port_t *p, const char *fmt, ...) {
    if (!p || !p->log) return;
    char text[201];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ta_log_stream_note(p->log, "%s", text);
}

void ta_port_record_in(ta_port_t *p, const ta_msg_t *m) {
    if (p->log && m->type != TA_MSG_PROGRESS) ta_log_stream_record(p->log, TA_LOG_IN, m, m->wire_.len ? &m->wire_ : NULL);
}

/* Waits until the mailbox is readable; returns TACT_OK or TACT_ETIMEDOUT. */
static int s_wait(ta_port_t *p, int timeout_ms, ta_error_t *err) {
    zmq_pollitem_t item = {p->mailbox, 0, ZMQ_POLLIN, 0};
    int n = zmq_poll(&item, 1, timeout_ms);
    if (n > 0) return TACT_OK;
    if (n == 0) return ta_error_set(err, TACT_ETIMEDOUT, "port %s: nothing received within %d ms", p->name, timeout_ms);
    return ta_error_set(err, TACT_ETRANSPORT, "port %s: poll: %s", p->name, zmq_strerror(errno));
}

int ta_port_recv(ta_port_t *p, ta_msg_t *m, int timeout_ms, ta_error_t *err) {
    if (p->deferred) {
        s_deferred_t *d = p->deferred;
        p->deferred = d->next;
        if (!p->deferred) p->deferred_tail = NULL;
        ta_msg_release(m);
        *m = d->msg;
        ta_free(d);
        ta_port_record_in(p, m);
        return TACT_OK;
    }
    for (;;) {
        int rc = s_wait(p, timeout_ms < 0 ? p->rt->cfg.timeout_ms : timeout_ms, err);
        if (rc == TACT_OK) rc = ta_port_recv_raw(p, m, err);
        if (rc == TACT_OK && m->type == TA_MSG_PROGRESS) continue; /* a heartbeat is nobody's message */
        if (rc == TACT_OK) ta_port_record_in(p, m);
        return rc;
    }
}

/* Milliseconds on a monotonic clock. */
static int64_t s_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t ta_port_new_corr(ta_port_t *p) { return ++p->next_corr | (uint64_t)p->id << 40; }

int ta_port_send_request(ta_port_t *p, uint32_t dest, ta_msg_t *req, ta_error_t *err) {
    req->corr = ta_port_new_corr(p);
    return ta_port_send(p, dest, req, err);
}

static int s_port_wait(ta_port_t *p, uint64_t corr, uint32_t from, uint32_t watch, ta_msg_t *reply, int timeout_ms, int extend, ta_error_t *err);

int ta_port_request(ta_port_t *p, uint32_t dest, ta_msg_t *req, ta_msg_t *reply, int timeout_ms, ta_error_t *err) {
    return ta_port_request_watching(p, dest, dest, req, reply, timeout_ms, err);
}

int ta_port_request_watching(ta_port_t *p, uint32_t dest, uint32_t watch, ta_msg_t *req, ta_msg_t *reply, int timeout_ms, ta_error_t *err) {
    int rc = ta_port_send_request(p, dest, req, err);
    if (rc != TACT_OK) return rc;
    rc = s_port_wait(p, req->corr, 0, watch, reply, timeout_ms, 1, err);
    if (rc == TACT_ETIMEDOUT)
        ta_error_set(err, rc, "port %s: no reply to %s from port %" PRIu32 " within %d ms", p->name, ta_msg_type_name(req->type),
                     dest, timeout_ms < 0 ? p->rt->cfg.timeout_ms : timeout_ms);
    return rc;
}

int ta_port_wait(ta_port_t *p, uint64_t corr, ta_msg_t *reply, int timeout_ms, ta_error_t *err) {
    return s_port_wait(p, corr, 0, 0, reply, timeout_ms, 1, err);
}

int ta_port_wait_from(ta_port_t *p, uint64_t corr, uint32_t from, ta_msg_t *reply, int timeout_ms, int extend, ta_error_t *err) {
    return s_port_wait(p, corr, from, from, reply, timeout_ms, extend, err);
}

void ta_port_forget(ta_port_t *p, uint64_t upto) {
    uint64_t mine = (uint64_t)p->id << 40;
    for (s_deferred_t **pd = &p->deferred, *prev = NULL; *pd;) {
        s_deferred_t *d = *pd;
        uint64_t c = d->msg.corr;
        if (c && (c >> 40 << 40) == mine && c <= upto) {
            *pd = d->next;
            if (p->deferred_tail == d) p->deferred_tail = prev;
            ta_msg_release(&d->msg);
            ta_free(d);
            continue;
        }
        prev = d;
        pd = &d->next;
    }
}

int ta_port_wait_within(ta_port_t *p, uint64_t corr, ta_msg_t *reply, int timeout_ms, ta_error_t *err) {
    return s_port_wait(p, corr, 0, 0, reply, timeout_ms, 0, err);
}

/* Waits for the message carrying corr (from port from, if not 0); the
 * loss of port watch (a worker's, if not 0) ends the wait at once. */
static int s_port_wait(ta_port_t *p, uint64_t corr, uint32_t from, uint32_t watch, ta_msg_t *reply, int timeout_ms, int extend, ta_error_t *err) {
    if (timeout_ms < 0) timeout_ms = p->rt->cfg.timeout_ms;
    int rc;
    /* A reply that came while the port waited for another one was kept. */
    for (s_deferred_t **pd = &p->deferred, *prev = NULL; *pd; prev = *pd, pd = &(*pd)->next) {
        if ((*pd)->msg.corr != corr || (from && (*pd)->msg.sender != from)) continue;
        s_deferred_t *d = *pd;
        *pd = d->next;
        if (p->deferred_tail == d) p->deferred_tail = prev;
        ta_msg_release(reply);
        *reply = d->msg;
        ta_free(d);
        goto got;
    }
    int64_t deadline = s_now_ms() + timeout_ms;
    int losses = __atomic_load_n(&p->rt->any_lost, __ATOMIC_ACQUIRE);
    for (;;) {
        /* In slices, so a pipeline that broke for good is noticed at once. */
        char why[256];
        int failed = ta_rt_failure(p->rt, why, sizeof why);
        if (failed) return ta_error_set(err, failed, "the pipeline failed: %s", why);
        if (watch && watch != TA_WATCH_LOSSES && ta_rt_lost(p->rt, watch, why, sizeof why)) return ta_error_set(err, TACT_ETRANSPORT, "%s", why);
        if (watch == TA_WATCH_LOSSES && __atomic_load_n(&p->rt->any_lost, __ATOMIC_ACQUIRE) != losses) {
            pthread_mutex_lock(&p->rt->lock);
            snprintf(why, sizeof why, "%s", p->rt->last_lost);
            pthread_mutex_unlock(&p->rt->lock);
            return ta_error_set(err, TACT_ETRANSPORT, "%s", why);
        }
        int64_t left = deadline - s_now_ms();
        if (left < 0) left = 0;
        rc = s_wait(p, (int)(left < 100 ? left : 100), err);
        if (rc == TACT_ETIMEDOUT && left > 100) continue;
        if (rc != TACT_OK) return ta_error_set(err, rc, "port %s: no reply within %d ms", p->name, timeout_ms);
        rc = ta_port_recv_raw(p, reply, err);
        if (rc == TACT_ENOMEM) ta_rt_fail(p->rt, rc, "port %s: out of memory receiving; a message was lost", p->name);
        if (rc != TACT_OK) continue; /* a bad message is not the reply; keep waiting */
        if (reply->type == TA_MSG_PROGRESS) {
            /* A stage is still working on what was asked: the wait goes on. */
            if (extend) deadline = s_now_ms() + timeout_ms;
            ta_msg_release(reply);
            continue;
        }
        if (reply->corr == corr && (!from || reply->sender == from)) break;
        s_deferred_t *d = ta_malloc(sizeof *d);
        if (!d) {
            ta_msg_release(reply);
            ta_rt_fail(p->rt, TACT_ENOMEM, "port %s: out of memory keeping a message; it was lost", p->name);
            return ta_error_set(err, TACT_ENOMEM, "port %s: out of memory keeping a message", p->name);
        }
        d->next = NULL;
        d->msg = *reply;
        ta_msg_init(reply, TA_MSG_READY);
        if (p->deferred_tail) p->deferred_tail->next = d;
        else p->deferred = d;
        p->deferred_tail = d;
    }
got:
    /* Recorded when taken, not when it arrived, so the port's record is in
     * the order its owner consumed (DESIGN.md §2), whatever the timing. */
    ta_port_record_in(p, reply);
    {
        /* Once the pipeline broke, no answer can be trusted whole (it may
         * follow from a message that was lost). */
        char why[256];
        int failed = ta_rt_failure(p->rt, why, sizeof why);
        if (failed) {
            ta_msg_release(reply);
            return ta_error_set(err, failed, "the pipeline failed: %s", why);
        }
    }
    if (reply->type == TA_MSG_ERROR) {
        int code = (int)reply->as.error.code;
        ta_bytes_t what = reply->as.error.what, text = reply->as.error.text;
        return ta_error_set(err, code < 0 ? code : TACT_EACTOR, "%.*s: %.*s", (int)what.len,
                            what.ptr ? (const char *)what.ptr : "", (int)text.len, text.ptr ? (const char *)text.ptr : "");
    }
    return TACT_OK;
}
