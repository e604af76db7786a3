/* actor.c - the actor thread: ready handshake, the poll loop, ordered merge of inputs, stop. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "actor_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "mem.h"

static int64_t s_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------- control pipe */

/* The pipe between owner and actor carries READY, STOP and STOP_ACK, encoded
 * as every other message, so there is one codec for everything. */
static int s_pipe_send(void *pipe, ta_msg_t *m) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = ta_msg_encode(m, &sb);
    if (rc == TACT_OK && zmq_send(pipe, sb.data, sb.size, 0) < 0) rc = TACT_ETRANSPORT;
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* Receives one pipe message within timeout_ms; frees via zmq_msg_close into
 * a caller buffer for text (READY carries a text the owner copies out). */
static int s_pipe_recv(void *pipe, int timeout_ms, ta_msg_type_t *type, int64_t *status, char *text, size_t text_len,
                       uint64_t *processed) {
    zmq_pollitem_t item = {pipe, 0, ZMQ_POLLIN, 0};
    /* A signal (a compile's SIGCHLD, the user's SIGTERM) is no timeout. */
    int64_t deadline = s_now_ms() + timeout_ms;
    int n;
    while ((n = zmq_poll(&item, 1, timeout_ms < 0 ? -1 : (long)(deadline - s_now_ms() > 0 ? deadline - s_now_ms() : 0))) < 0 && errno == EINTR) {}
    if (n <= 0) return TACT_ETIMEDOUT;
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, pipe, 0) < 0) {
        zmq_msg_close(&frame);
        return TACT_ETRANSPORT;
    }
    ta_msg_t m;
    uint64_t bulk_len;
    int rc = ta_msg_decode(&m, zmq_msg_data(&frame), zmq_msg_size(&frame), 0, &bulk_len, NULL);
    if (rc == TACT_OK) {
        *type = m.type;
        if (m.type == TA_MSG_READY) {
            *status = m.as.ready.status;
            if (text_len)
                snprintf(text, text_len, "%.*s", (int)m.as.ready.text.len,
                         m.as.ready.text.ptr ? (const char *)m.as.ready.text.ptr : "");
        }
        if (m.type == TA_MSG_STOP_ACK && processed) *processed = m.as.stop_ack.processed;
    }
    zmq_msg_close(&frame);
    return rc;
}

/* ------------------------------------------------------------ dispatch */

void ta_actor_dispatch(ta_actor_t *a, ta_msg_t *m) {
    ta_port_record_in(a->port, m);
    a->processed++;
    int rc;
    if (a->dead.code) {
        a->err = a->dead;
        rc = TACT_EACTOR;
    } else {
        a->err.code = 0;
        a->err.text[0] = '\0';
        rc = a->ops->handle(a, m);
    }
    /* Out of memory, a handler may have left its work half done, and whoever
     * waits for it may not be the sender: the pipeline is broken for good,
     * and every wait says so (ta_rt_fail) rather than time out. */
    if (rc == TACT_ENOMEM) ta_rt_fail(a->rt, rc, "actor %s: %s", a->name, a->err.text[0] ? a->err.text : "out of memory");
    /* Errors are never answered with errors, so two failing actors cannot
     * ping-pong. */
    if (rc == TACT_OK || m->type == TA_MSG_ERROR) return;
    ta_actor_send_error(a, m->sender, m->corr, rc, ta_msg_type_name(m->type), a->err.text[0] ? a->err.text : tact_strerror(rc));
}

int ta_actor_send_error(ta_actor_t *self, uint32_t dest, uint64_t corr, int code, const char *what, const char *text) {
    ta_msg_t e;
    ta_msg_init(&e, TA_MSG_ERROR);
    e.corr = corr;
    e.as.error.code = code;
    e.as.error.what = ta_bytes_str(what);
    e.as.error.text = ta_bytes_str(text);
    ta_error_t err;
    int rc = ta_port_send(self->port, dest, &e, &err);
    if (rc == TACT_ENOMEM) ta_rt_fail(self->rt, rc, "actor %s: out of memory reporting: %s", self->name, text);
    if (rc != TACT_OK)
        ta_rt_report(self->rt, "actor %s: could not report an error to port %" PRIu32 ": %s", self->name, dest, err.text);
    return rc;
}

/* ------------------------------------------------------------- ordering */

/* The ordering rule is written down in actor.h; this is all of it. */

/* Replies kept before being awaited: at most this many, and this many
 * bytes (envelopes and bulk), beyond which a newcomer is dropped and
 * reported (a peer cannot fill memory with replies nobody asked for). */
enum { S_HELD_LIMIT = 1 << 20 };
#define S_HELD_BYTES ((size_t)256 << 20)

static size_t s_msg_bytes(const ta_msg_t *m) { return m->wire_.len + m->bulk.len + sizeof(ta_queued_t); }

/* A held reply leaves the count (the replies asked for were never in it). */
static void s_uncount(ta_actor_t *a, const ta_queued_t *q) {
    if (!q->counted) return;
    a->nheld--;
    a->held_bytes -= q->counted;
}

static ta_input_t *s_input(ta_actor_t *a, uint32_t sender) {
    for (size_t i = 0; i < a->ninputs; i++)
        if (a->inputs[i].id == sender) return &a->inputs[i];
    return NULL;
}

/* Returns true if (seq_a, id_a) sorts before (seq_b, id_b). */
static int s_before(uint64_t seq_a, uint32_t id_a, uint64_t seq_b, uint32_t id_b) {
    return seq_a < seq_b || (seq_a == seq_b && id_a < id_b);
}

/*
 * Picks the input whose head message is next in (seq, sender) order, if it
 * may go now: every other live input's next message (its queued head, or
 * the one after its last processed, since sequence numbers are consecutive)
 * must sort after it.  Returns NULL when the merge has to wait.
 */
static ta_input_t *s_next_ready(ta_actor_t *a) {
    ta_input_t *best = NULL;
    for (size_t i = 0; i < a->ninputs; i++) {
        ta_input_t *in = &a->inputs[i];
        if (in->head && (!best || s_before(in->head->msg.seq, in->id, best->head->msg.seq, best->id))) best = in;
    }
    if (!best) return NULL;
    for (size_t i = 0; i < a->ninputs; i++) {
        ta_input_t *in = &a->inputs[i];
        if (in == best || in->ended || in->head) continue;
        if (!s_before(best->head->msg.seq, best->id, in->last + 1, in->id)) return NULL;
    }
    return best;
}

static void s_push(ta_queued_t **head, ta_queued_t **tail, ta_queued_t *q) {
    q->next = NULL;
    if (*tail) (*tail)->next = q;
    else *head = q;
    *tail = q;
}

/* The index of (corr, from) among the replies to drop, or -1. */
static long s_discarded(const ta_actor_t *a, uint64_t corr, uint32_t from) {
    for (size_t i = 0; i < a->ndiscard; i++)
        if (a->discard[i].corr == corr && a->discard[i].from == from) return (long)i;
    return -1;
}

static int s_peer(const ta_actor_t *a, uint32_t from) {
    for (size_t i = 0; i < a->npeers; i++)
        if (a->peers[i] == from) return 1;
    return 0;
}

/* The next message to process by the rule, unlinked; NULL when it has to wait. */
static ta_queued_t *s_next(ta_actor_t *a) {
    if (a->awaiting) {
        for (ta_queued_t **pq = &a->held, *prev = NULL; *pq; prev = *pq, pq = &(*pq)->next) {
            ta_queued_t *q = *pq;
            if (q->msg.corr != a->awaiting || q->msg.sender != a->awaiting_from) continue;
            *pq = q->next;
            if (a->held_tail == q) a->held_tail = prev;
            s_uncount(a, q);
            a->awaiting = 0;
            return q;
        }
        return NULL;
    }
    if (a->ninputs) {
        ta_input_t *in = s_next_ready(a);
        if (!in) return NULL;
        ta_queued_t *q = in->head;
        in->head = q->next;
        if (!in->head) in->tail = NULL;
        in->last = q->msg.seq;
        if (q->msg.type == TA_MSG_EOS) in->ended = 1;
        return q;
    }
    ta_queued_t *q = a->held;
    if (q) {
        a->held = q->next;
        if (!a->held) a->held_tail = NULL;
        s_uncount(a, q);
    }
    return q;
}

/* Processes whatever the rule lets go now, in its order. */
static void s_pump(ta_actor_t *a) {
    ta_queued_t *q;
    int progressed = 0;
    while ((q = s_next(a))) {
        progressed = 1;
        ta_actor_dispatch(a, &q->msg);
        ta_msg_release(&q->msg);
        ta_free(q);
    }
    int waiting = 0;
    for (size_t i = 0; i < a->ninputs; i++) waiting |= a->inputs[i].head != NULL;
    /* The stall clock measures time without progress, not time with a
     * non-empty queue: a slow but live input is never given up on. */
    if (!waiting) a->blocked_since_ms = 0;
    else if (progressed || !a->blocked_since_ms) a->blocked_since_ms = s_now_ms();
}

/* Takes a received message: queues it where the rule looks for it, then
 * processes what may go. */
static void s_take(ta_actor_t *a, ta_msg_t *m) {
    if (m->type == TA_MSG_PROGRESS) {
        /* A heartbeat of the work awaited: its await does not time out yet.
         * Never dispatched or recorded (it depends on timing). */
        /* Corr 0: the sender is alive and working, whatever it works on. */
        if (a->awaiting && (m->corr == a->awaiting || !m->corr) && m->sender == a->awaiting_from) {
            a->await_since_ms = s_now_ms();
            ta_actor_tell_peers(a);
        }
        ta_msg_release(m);
        return;
    }
    ta_input_t *in = s_input(a, m->sender);
    int asked = 0;
    if (!in) {
        long d = m->corr ? s_discarded(a, m->corr, m->sender) : -1;
        if (d >= 0) { /* forgotten (or its await timed out): it came, and goes */
            a->discard[d] = a->discard[--a->ndiscard];
            ta_msg_release(m);
            return;
        }
        asked = (a->awaiting == m->corr && a->awaiting_from == m->sender) || s_peer(a, m->sender);
        if (!asked && (a->nheld >= S_HELD_LIMIT || a->held_bytes + s_msg_bytes(m) > S_HELD_BYTES)) {
            ta_rt_report(a->rt, "actor %s: %zu replies (%zu bytes) nobody awaits; dropped a %s from %" PRIu32, a->name, a->nheld,
                         a->held_bytes, ta_msg_type_name(m->type), m->sender);
            ta_msg_release(m);
            return;
        }
    }
    ta_queued_t *q = ta_malloc(sizeof *q);
    if (!q) {
        ta_rt_fail(a->rt, TACT_ENOMEM, "actor %s: out of memory queueing a %s from %" PRIu32 "; it was lost", a->name,
                   ta_msg_type_name(m->type), m->sender);
        ta_msg_release(m);
        return;
    }
    q->msg = *m;
    q->counted = 0;
    ta_msg_init(m, TA_MSG_READY);
    if (in) {
        s_push(&in->head, &in->tail, q);
    } else {
        s_push(&a->held, &a->held_tail, q);
        q->counted = asked ? 0 : s_msg_bytes(&q->msg);
        if (q->counted) a->nheld++, a->held_bytes += q->counted;
    }
    s_pump(a);
}

/* A merge that waited longer than the timeout gives up on the silent
 * inputs (a dead producer must not hang its consumer) and says so; an
 * await that did gets ERROR(TACT_ETIMEDOUT) in place of its reply. */
static void s_check_stall(ta_actor_t *a) {
    int timeout = ta_rt_config(a->rt)->timeout_ms;
    int64_t now = s_now_ms();
    char lost[200] = "";
    /* A worker that is gone answers nothing: its inputs end and an await of
     * it fails now, not after the timeout. */
    for (size_t i = 0; i < a->ninputs; i++)
        if (!a->inputs[i].ended && !a->inputs[i].head && ta_rt_lost(a->rt, a->inputs[i].id, NULL, 0)) {
            a->inputs[i].ended = 1;
            s_pump(a);
        }
    if (a->awaiting && (now - a->await_since_ms >= timeout || ta_rt_lost(a->rt, a->awaiting_from, lost, sizeof lost))) {
        uint64_t corr = a->awaiting;
        a->awaiting = 0;
        if (ta_actor_forget(a, corr, a->awaiting_from) != TACT_OK) /* its late reply is dropped when it comes */
            ta_rt_report(a->rt, "actor %s: out of memory forgetting corr %#" PRIx64, a->name, corr);
        ta_rt_report(a->rt, "actor %s: no reply with corr %#" PRIx64 " within %d ms", a->name, corr, timeout);
        char text[256];
        if (lost[0]) snprintf(text, sizeof text, "%s", lost);
        else snprintf(text, sizeof text, "actor %s: no reply within %d ms", a->name, timeout);
        ta_msg_t e;
        ta_msg_init(&e, TA_MSG_ERROR);
        e.corr = corr;
        e.as.error.code = lost[0] ? TACT_ETRANSPORT : TACT_ETIMEDOUT;
        e.as.error.what = ta_bytes_str("await");
        e.as.error.text = ta_bytes_str(text);
        ta_actor_dispatch(a, &e);
        s_pump(a);
    }
    if (!a->blocked_since_ms || now - a->blocked_since_ms < timeout) return;
    for (size_t i = 0; i < a->ninputs; i++) {
        ta_input_t *in = &a->inputs[i];
        if (!in->ended && !in->head) {
            in->ended = 1;
            ta_rt_report(a->rt, "actor %s: input %" PRIu32 " silent for %d ms after seq %" PRIu64 "; treated as ended",
                         a->name, in->id, timeout, in->last);
        }
    }
    s_pump(a);
}

/* ---------------------------------------------------------- the thread */

/* On the actor's thread: connects its end of the pipe, opens its port,
 * runs init and says READY (or why not).  Returns 0 when it runs. */
static int s_open(ta_actor_t *a) {
    ta_error_t err = {0, ""};
    a->tpipe = zmq_socket(ta_rt_zmq(a->rt), ZMQ_PAIR);
    if (!a->tpipe || zmq_connect(a->tpipe, a->pipe_endpoint) != 0) {
        /* The owner times out waiting for READY and reports it. */
        if (a->tpipe) zmq_close(a->tpipe);
        a->tpipe = NULL;
        return -1;
    }
    int rc = ta_port_open(a->rt, a->id, &a->port, &err);
    if (rc == TACT_OK && a->ops->init) rc = a->ops->init(a, a->arg, &err);
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_READY);
    m.sender = a->id;
    m.as.ready.status = rc;
    m.as.ready.text = ta_bytes_str(rc == TACT_OK ? "" : err.text);
    a->idle_ms = -1;
    if (rc == TACT_OK) return s_pipe_send(a->tpipe, &m), 0;
    /* Refused: a is the owner's to free once it hears so (a shared thread
     * is not joined first), so nothing of it is touched after. */
    void *tpipe = a->tpipe;
    a->tpipe = NULL;
    ta_port_destroy(&a->port);
    s_pipe_send(tpipe, &m);
    zmq_close(tpipe);
    return -1;
}

/* How long its thread may wait for it: without a bound when idle (the pipe
 * wakes it for a stop); a merge that is waiting wakes up to check for a
 * stall, and an actor with idle work when that asks. */
static int s_wait_ms(const ta_actor_t *a) {
    int timeout = ta_rt_config(a->rt)->timeout_ms;
    int wait = a->blocked_since_ms || a->awaiting ? timeout / 4 + 1 : -1;
    if (wait > 100) wait = 100; /* a lost worker is noticed within 100 ms */
    if (a->idle_ms >= 0 && (wait < 0 || a->idle_ms < wait)) wait = a->idle_ms;
    return wait;
}

/* After a wait: what its pipe (pipe_in) and mailbox (mail_in) hold;
 * quiet: nothing came for it.  Returns 0 when it was told to stop. */
static int s_serve(ta_actor_t *a, int pipe_in, int mail_in, int quiet) {
    int running = 1;
    ta_error_t err = {0, ""};
    if (pipe_in) {
        ta_msg_type_t type = TA_MSG_READY;
        int64_t st;
        if (s_pipe_recv(a->tpipe, 0, &type, &st, NULL, 0, NULL) == TACT_OK && type == TA_MSG_STOP) running = 0;
    }
    /* Take what is queued in the mailbox, a bounded batch per wake-up so
     * the pipe is never starved. */
    for (int i = 0; running && i < 256 && mail_in; i++) {
        ta_msg_t in;
        ta_msg_init(&in, TA_MSG_READY);
        int rc = ta_port_recv_raw(a->port, &in, &err);
        if (rc == TACT_ETIMEDOUT) break; /* mailbox empty */
        if (rc == TACT_ENOMEM) ta_rt_fail(a->rt, rc, "actor %s: %s; a message was lost", a->name, err.text);
        if (rc != TACT_OK) {
            ta_rt_report(a->rt, "actor %s: %s", a->name, err.text);
            continue;
        }
        s_take(a, &in);
    }
    s_check_stall(a);
    if (running && a->ops->idle && quiet) a->idle_ms = a->ops->idle(a);
    else if (a->ops->idle && a->idle_ms < 0) a->idle_ms = 0; /* after a message: look again once it is quiet */
    return running;
}

/* Stopping: what the merge still holds is processed in merge order, then
 * fini, and the owner hears STOP_ACK. */
static void s_close(ta_actor_t *a) {
    for (size_t i = 0; i < a->ninputs; i++) a->inputs[i].ended = 1;
    s_pump(a);
    if (a->ops->fini) a->ops->fini(a);
    ta_port_destroy(&a->port);
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_STOP_ACK);
    m.sender = a->id;
    m.as.stop_ack.processed = a->processed;
    void *tpipe = a->tpipe; /* a is the owner's to free once it hears this: not touched after */
    a->tpipe = NULL;
    s_pipe_send(tpipe, &m);
    zmq_close(tpipe);
}

static void *s_run(void *arg) {
    ta_actor_t *a = arg;
    char name[16]; /* the thread's name in top, perf and gdb: the actor's, cut to 15 characters */
    snprintf(name, sizeof name, "%s", ta_actor_name(a));
    pthread_setname_np(pthread_self(), name);
    if (s_open(a) != 0) return NULL;
    void *mailbox = ta_port_mailbox(a->port);
    for (int running = 1; running;) {
        zmq_pollitem_t items[2] = {{a->tpipe, 0, ZMQ_POLLIN, 0}, {mailbox, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(items, 2, s_wait_ms(a));
        if (n < 0 && errno != EINTR) {
            if (errno != ETERM) ta_rt_report(a->rt, "actor %s: poll: %s", a->name, zmq_strerror(errno));
            break;
        }
        running = s_serve(a, n > 0 && items[0].revents & ZMQ_POLLIN, n > 0 && items[1].revents & ZMQ_POLLIN, n == 0);
    }
    s_close(a);
    return NULL;
}

/* ------------------------------------------------------ shared threads */

struct ta_group {
    ta_rt_t *rt;
    pthread_t thread;
    void *ctl; /* the owner's end of the control pipe: 'A' and an actor to take in, 'Q' to quit */
    char ctl_endpoint[64];
    char name[16];
    ta_actor_t **members; /* the thread's */
    size_t n, cap;
};

static void *s_group_run(void *arg) {
    ta_group_t *g = arg;
    pthread_setname_np(pthread_self(), g->name);
    void *ctl = zmq_socket(ta_rt_zmq(g->rt), ZMQ_PAIR);
    if (!ctl || zmq_connect(ctl, g->ctl_endpoint) != 0) { /* the owner's sends to it time out */
        if (ctl) zmq_close(ctl);
        return NULL;
    }
    zmq_pollitem_t *items = NULL;
    size_t items_cap = 0;
    for (int quit = 0; !quit;) {
        size_t np = g->n; /* the members this wait covers; one taken in after it waits for the next */
        if (ta_grow((void **)&items, &items_cap, 1 + 2 * np, sizeof *items) != TACT_OK) {
            ta_rt_fail(g->rt, TACT_ENOMEM, "thread %s: out of memory", g->name);
            break;
        }
        items[0] = (zmq_pollitem_t){ctl, 0, ZMQ_POLLIN, 0};
        int wait = -1;
        for (size_t i = 0; i < np; i++) {
            ta_actor_t *a = g->members[i];
            items[1 + 2 * i] = (zmq_pollitem_t){a->tpipe, 0, ZMQ_POLLIN, 0};
            items[2 + 2 * i] = (zmq_pollitem_t){ta_port_mailbox(a->port), 0, ZMQ_POLLIN, 0};
            int w = s_wait_ms(a);
            if (w >= 0 && (wait < 0 || w < wait)) wait = w;
        }
        int n = zmq_poll(items, (int)(1 + 2 * np), wait);
        if (n < 0 && errno != EINTR) {
            if (errno != ETERM) ta_rt_report(g->rt, "thread %s: poll: %s", g->name, zmq_strerror(errno));
            break;
        }
        if (n > 0 && items[0].revents & ZMQ_POLLIN) {
            uint8_t cmd[1 + sizeof(ta_actor_t *)];
            int len = zmq_recv(ctl, cmd, sizeof cmd, 0);
            ta_actor_t *a = NULL;
            if (len == (int)sizeof cmd && cmd[0] == 'A') memcpy(&a, cmd + 1, sizeof a);
            quit = len >= 1 && cmd[0] == 'Q';
            if (a && s_open(a) == 0) {
                if (ta_grow((void **)&g->members, &g->cap, g->n + 1, sizeof *g->members) == TACT_OK) g->members[g->n++] = a;
                else s_close(a), ta_rt_fail(g->rt, TACT_ENOMEM, "thread %s: out of memory taking in %s", g->name, a->name);
            }
        }
        for (size_t i = np; i-- > 0;) {
            ta_actor_t *a = g->members[i];
            int pipe_in = n > 0 && items[1 + 2 * i].revents & ZMQ_POLLIN, mail_in = n > 0 && items[2 + 2 * i].revents & ZMQ_POLLIN;
            if (s_serve(a, pipe_in, mail_in, !pipe_in && !mail_in)) continue;
            s_close(a);
            memmove(&g->members[i], &g->members[i + 1], (g->n - i - 1) * sizeof *g->members);
            g->n--;
        }
    }
    /* Left without a stop (its owner gave up on it, or the poll failed). */
    while (g->n) s_close(g->members[--g->n]);
    ta_free(items);
    zmq_close(ctl);
    return NULL;
}

int ta_group_start(ta_rt_t *rt, const char *name, ta_group_t **out, ta_error_t *err) {
    *out = NULL;
    ta_group_t *g = ta_calloc(1, sizeof *g);
    if (!g) return ta_error_set(err, TACT_ENOMEM, "thread %s: out of memory", name);
    g->rt = rt;
    snprintf(g->name, sizeof g->name, "%s", name);
    static uint64_t serial; /* as an actor's pipe's: unique against a freed group's */
    snprintf(g->ctl_endpoint, sizeof g->ctl_endpoint, "inproc://tact-group-%p-%" PRIu64, (void *)g, __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    g->ctl = zmq_socket(ta_rt_zmq(rt), ZMQ_PAIR);
    /* A send waits at most the timeout for the thread's end: one that never
     * connected (or failed) makes a start fail, not hang. */
    int linger = 0, timeout = ta_rt_config(rt)->timeout_ms;
    if (!g->ctl || zmq_setsockopt(g->ctl, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(g->ctl, ZMQ_SNDTIMEO, &timeout, sizeof timeout) != 0 || zmq_bind(g->ctl, g->ctl_endpoint) != 0) {
        if (g->ctl) zmq_close(g->ctl);
        ta_free(g);
        return ta_error_set(err, TACT_ETRANSPORT, "thread %s: cannot create its control pipe", name);
    }
    if (ta_thread_create(&g->thread, s_group_run, g) != 0) {
        zmq_close(g->ctl);
        ta_free(g);
        return ta_error_set(err, TACT_ENOMEM, "thread %s: cannot create it", name);
    }
    *out = g;
    return TACT_OK;
}

int ta_group_stop(ta_group_t **pg, ta_error_t *err) {
    ta_group_t *g = *pg;
    if (!g) return TACT_OK;
    *pg = NULL;
    int rc = zmq_send(g->ctl, "Q", 1, 0) == 1 ? TACT_OK : TACT_ETRANSPORT;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int timeout = ta_rt_config(g->rt)->timeout_ms;
    until.tv_sec += timeout / 1000;
    until.tv_nsec += (long)(timeout % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    if (rc == TACT_OK && pthread_timedjoin_np(g->thread, NULL, &until) == 0) {
        zmq_close(g->ctl);
        ta_free(g->members);
        ta_free(g);
        return TACT_OK;
    }
    /* A member's handler that never returns: the thread is abandoned. */
    pthread_detach(g->thread);
    ta_rt_abandon(g->rt);
    return ta_error_set(err, TACT_ETIMEDOUT, "thread %s: did not end within %d ms", g->name, timeout);
}

static void s_free_queue(ta_queued_t *q) {
    while (q) {
        ta_queued_t *next = q->next;
        ta_msg_release(&q->msg);
        ta_free(q);
        q = next;
    }
}

void ta_actor_free_queues(ta_actor_t *a) {
    ta_free(a->discard), ta_free(a->peers);
    a->discard = NULL;
    a->peers = NULL;
    a->ndiscard = a->discard_cap = a->npeers = a->peers_cap = 0;
    s_free_queue(a->held);
    a->held = a->held_tail = NULL;
    a->nheld = 0;
    a->held_bytes = 0;
    for (size_t i = 0; i < a->ninputs; i++) s_free_queue(a->inputs[i].head);
    ta_free(a->inputs);
    a->inputs = NULL;
    a->ninputs = 0;
}

static void s_free(ta_actor_t *a) {
    ta_actor_free_queues(a);
    if (a->pipe) zmq_close(a->pipe);
    ta_free(a);
}

int ta_actor_start(ta_rt_t *rt, const ta_actor_ops_t *ops, void *arg, const ta_actor_opts_t *opts,
                   ta_actor_t **out, ta_error_t *err) {
    *out = NULL;
    if (!ops || !ops->handle) return ta_error_set(err, TACT_EINVAL, "actor: ops with a handle function required");
    const char *name = ops->name ? ops->name : "actor";
    ta_actor_t *a = ta_calloc(1, sizeof *a);
    if (!a) return ta_error_set(err, TACT_ENOMEM, "actor %s: out of memory", name);
    a->rt = rt;
    a->ops = ops;
    a->arg = arg;
    snprintf(a->name, sizeof a->name, "%s", name);
    if (opts && opts->n_ordered_inputs) {
        a->inputs = ta_calloc(opts->n_ordered_inputs, sizeof *a->inputs);
        if (!a->inputs) {
            s_free(a);
            return ta_error_set(err, TACT_ENOMEM, "actor %s: out of memory", name);
        }
        a->ninputs = opts->n_ordered_inputs;
        for (size_t i = 0; i < a->ninputs; i++) a->inputs[i].id = opts->ordered_inputs[i];
    }
    a->id = ta_rt_reserve_id(rt, name);
    a->pipe = zmq_socket(ta_rt_zmq(rt), ZMQ_PAIR);
    /* Unique also against a freed actor's endpoint at the same address,
     * which ZeroMQ may still hold bound for a moment after its close. */
    static uint64_t serial;
    snprintf(a->pipe_endpoint, sizeof a->pipe_endpoint, "inproc://tact-pipe-%p-%" PRIu64, (void *)a, __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    int linger = 0;
    if (!a->id || !a->pipe || zmq_setsockopt(a->pipe, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_bind(a->pipe, a->pipe_endpoint) != 0) {
        int code = a->id ? TACT_ETRANSPORT : TACT_ENOMEM;
        s_free(a);
        return ta_error_set(err, code, "actor %s: cannot create its control pipe", name);
    }
    a->group = opts ? opts->group : NULL;
    uint8_t cmd[1 + sizeof a];
    cmd[0] = 'A';
    memcpy(cmd + 1, &a, sizeof a);
    if (a->group ? zmq_send(a->group->ctl, cmd, sizeof cmd, 0) != (int)sizeof cmd : ta_thread_create(&a->thread, s_run, a) != 0) {
        s_free(a);
        return ta_error_set(err, TACT_ENOMEM, "actor %s: cannot create its thread", name);
    }
    ta_msg_type_t type = TA_MSG_STOP;
    int64_t status = TACT_EPROTO;
    char text[256] = "";
    int timeout = ta_rt_config(rt)->timeout_ms;
    int rc = s_pipe_recv(a->pipe, timeout, &type, &status, text, sizeof text, NULL);
    if (rc == TACT_ETIMEDOUT) {
        /* The thread may still wake up and use a: abandon it rather than free. */
        if (!a->group) pthread_detach(a->thread);
        ta_rt_abandon(rt);
        return ta_error_set(err, TACT_ETIMEDOUT, "actor %s: not ready within %d ms", name, timeout);
    }
    if (rc == TACT_OK && (type != TA_MSG_READY || status != TACT_OK)) {
        rc = type == TA_MSG_READY ? (int)status : TACT_EPROTO;
        ta_error_set(err, rc, "actor %s: failed to start: %s", name, text[0] ? text : tact_strerror(rc));
    } else if (rc != TACT_OK) {
        ta_error_set(err, rc, "actor %s: bad ready handshake", name);
    }
    if (rc != TACT_OK) {
        if (!a->group) pthread_join(a->thread, NULL); /* a shared thread did not take it in */
        s_free(a);
        return rc;
    }
    *out = a;
    return TACT_OK;
}

int ta_actor_stop(ta_actor_t **pa, ta_error_t *err) {
    ta_actor_t *a = *pa;
    if (!a) return TACT_OK;
    *pa = NULL;
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_STOP);
    /* Long work in a handler (a compile, a kernel) sees this and gives up. */
    __atomic_store_n(&a->stopping, 1, __ATOMIC_SEQ_CST);
    int timeout = ta_rt_config(a->rt)->timeout_ms;
    ta_msg_type_t type = TA_MSG_READY;
    int64_t st;
    int rc = s_pipe_send(a->pipe, &m);
    /* Anything but the acknowledgement on the pipe is out of protocol: skip it. */
    while (rc == TACT_OK && type != TA_MSG_STOP_ACK)
        rc = s_pipe_recv(a->pipe, timeout, &type, &st, NULL, 0, &a->processed);
    if (rc != TACT_OK) {
        if (!a->group) pthread_detach(a->thread);
        ta_rt_abandon(a->rt);
        return ta_error_set(err, TACT_ETIMEDOUT, "actor %s: did not acknowledge stop within %d ms", a->name, timeout);
    }
    if (!a->group) pthread_join(a->thread, NULL); /* a shared thread dropped it before its STOP_ACK */
    s_free(a);
    return TACT_OK;
}

uint32_t ta_actor_id(const ta_actor_t *a) { return a->id; }
ta_port_t *ta_actor_port(ta_actor_t *a) { return a->port; }
const char *ta_actor_name(const ta_actor_t *a) { return a->name; }
void *ta_actor_state(ta_actor_t *a) { return a->state; }
ta_rt_t *ta_actor_rt(const ta_actor_t *a) { return a->rt; }
void ta_actor_set_state(ta_actor_t *a, void *state) { a->state = state; }
uint64_t ta_actor_processed(const ta_actor_t *a) { return a->processed; }

void ta_actor_count(ta_actor_t *self, ta_stat_t stat, uint64_t n) { __atomic_add_fetch(&self->stats[stat], n, __ATOMIC_RELAXED); }

uint64_t ta_actor_stat(const ta_actor_t *a, ta_stat_t stat) { return __atomic_load_n(&a->stats[stat], __ATOMIC_RELAXED); }

int ta_actor_send(ta_actor_t *self, uint32_t dest, ta_msg_t *m) {
    ta_error_t err;
    int rc = ta_port_send(self->port, dest, m, &err);
    if (rc != TACT_OK) ta_error_set(&self->err, rc, "%s", err.text);
    /* A message that could not be built is lost to whoever waits for it. */
    if (rc == TACT_ENOMEM) ta_rt_fail(self->rt, rc, "actor %s: %s", self->name, err.text);
    return rc;
}

int ta_actor_reply(ta_actor_t *self, const ta_msg_t *req, ta_msg_t *reply) {
    reply->corr = req->corr;
    return ta_actor_send(self, req->sender, reply);
}

uint64_t ta_actor_new_corr(ta_actor_t *self) { return ta_port_new_corr(self->port); }

int ta_actor_stopping(const ta_actor_t *self) { return __atomic_load_n(&self->stopping, __ATOMIC_SEQ_CST); }

int ta_actor_timeout_ms(const ta_actor_t *self) { return self->rt ? ta_rt_config(self->rt)->timeout_ms : 0; }

void ta_actor_progress(ta_actor_t *self, uint32_t dest, uint64_t corr) {
    if (!self->rt) return; /* a stage driven by hand has nobody waiting */
    ta_msg_t m;
    ta_error_t err;
    ta_msg_init(&m, TA_MSG_PROGRESS);
    m.corr = corr;
    ta_port_send(self->port, dest, &m, &err);
}

void ta_actor_await(ta_actor_t *self, uint64_t corr, uint32_t from) {
    self->awaiting = corr;
    self->awaiting_from = from;
    self->await_since_ms = self->rt ? s_now_ms() : 0;
}

int ta_actor_add_peer(ta_actor_t *self, uint32_t port) {
    if (s_peer(self, port)) return TACT_OK;
    if (ta_grow((void **)&self->peers, &self->peers_cap, self->npeers + 1, sizeof *self->peers) != TACT_OK) return TACT_ENOMEM;
    self->peers[self->npeers++] = port;
    return TACT_OK;
}

void ta_actor_tell_peers(ta_actor_t *self) {
    for (size_t i = 0; i < self->npeers; i++) ta_actor_progress(self, self->peers[i], 0);
}

int ta_actor_forget(ta_actor_t *self, uint64_t corr, uint32_t from) {
    for (ta_queued_t **pq = &self->held, *prev = NULL; *pq; prev = *pq, pq = &(*pq)->next) {
        ta_queued_t *q = *pq;
        if (q->msg.corr != corr || q->msg.sender != from) continue;
        *pq = q->next;
        if (self->held_tail == q) self->held_tail = prev;
        s_uncount(self, q);
        ta_msg_release(&q->msg);
        ta_free(q);
        return TACT_OK; /* it came already: nothing more will */
    }
    if (ta_grow((void **)&self->discard, &self->discard_cap, self->ndiscard + 1, sizeof *self->discard) != TACT_OK) return TACT_ENOMEM;
    self->discard[self->ndiscard++] = (struct ta_expect){corr, from};
    return TACT_OK;
}

int ta_actor_set_inputs(ta_actor_t *self, const uint32_t *ids, size_t n) {
    ta_input_t *inputs = n ? ta_calloc(n, sizeof *inputs) : NULL;
    if (n && !inputs) return TACT_ENOMEM;
    for (size_t i = 0; i < n; i++) inputs[i].id = ids[i];
    /* Work already queued from a new input moves over in arrival order;
     * nothing is queued under an old one (inputs change only in CONFIG,
     * before any work). */
    for (size_t i = 0; i < self->ninputs; i++) s_free_queue(self->inputs[i].head);
    ta_free(self->inputs);
    self->inputs = inputs;
    self->ninputs = n;
    for (ta_queued_t **pq = &self->held, *prev = NULL; *pq;) {
        ta_queued_t *q = *pq;
        ta_input_t *in = s_input(self, q->msg.sender);
        if (!in) {
            prev = q;
            pq = &q->next;
            continue;
        }
        *pq = q->next;
        if (self->held_tail == q) self->held_tail = prev;
        s_uncount(self, q);
        s_push(&in->head, &in->tail, q);
    }
    return TACT_OK;
}

static void s_vfail(ta_actor_t *self, int code, const char *fmt, va_list ap) {
    self->err.code = code;
    vsnprintf(self->err.text, sizeof self->err.text, fmt, ap);
}

int ta_actor_fail(ta_actor_t *self, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s_vfail(self, code, fmt, ap);
    va_end(ap);
    return code;
}

int ta_actor_fatal(ta_actor_t *self, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s_vfail(self, code, fmt, ap);
    va_end(ap);
    self->dead.code = TACT_EACTOR;
    snprintf(self->dead.text, sizeof self->dead.text, "actor %s failed earlier: %s", self->name, self->err.text);
    return code;
}
