/* actor_impl.h - the actor's state, shared by the actor loop (actor.c) and stage replay (replay.c). */
#ifndef TACT_ACTOR_IMPL_H
#define TACT_ACTOR_IMPL_H

#include <pthread.h>

#include "actor.h"

/* A message held back until the ordered merge releases it. */
typedef struct ta_queued {
    struct ta_queued *next;
    ta_msg_t msg;
    size_t counted; /* bytes it counts against the limit on held replies (0: a reply asked for) */
} ta_queued_t;

/* One sender whose stream is merged in (seq, id) order. */
typedef struct ta_input {
    uint32_t id;
    uint64_t last; /* seq of the last message processed from it */
    int ended;     /* its EOS was processed (or it was given up on) */
    ta_queued_t *head, *tail;
} ta_input_t;

struct ta_actor {
    ta_rt_t *rt; /* NULL in replay */
    const ta_actor_ops_t *ops;
    void *arg;
    void *state;
    uint32_t id;
    char name[64];
    ta_port_t *port;
    ta_input_t *inputs;
    size_t ninputs;
    ta_queued_t *held, *held_tail; /* replies not yet awaited (and, without ordered inputs, all work), oldest first */
    size_t nheld, held_bytes;
    uint64_t awaiting;        /* the corr of the reply awaited, or 0 */
    uint32_t awaiting_from;   /* the port it must come from */
    int64_t await_since_ms;   /* when the await began */
    int64_t blocked_since_ms; /* when the merge last found nothing to release; 0: not blocked */
    struct ta_expect {
        uint64_t corr;
        uint32_t from;
    } *discard;      /* replies to drop when they come (ta_actor_forget) */
    size_t ndiscard, discard_cap;
    uint32_t *peers; /* actors working beside this one (ta_actor_add_peer) */
    size_t npeers, peers_cap;
    uint64_t processed;
    int stopping;             /* set (atomically) when the owner asked it to stop */
    uint64_t stats[TA_STAT__COUNT]; /* written by the actor's thread, read by its owner (atomics) */
    ta_error_t err;  /* text of the error the current handler returns */
    ta_error_t dead; /* set by ta_actor_fatal: every later message gets this */
    /* Owner side. */
    pthread_t thread;
    ta_group_t *group; /* the thread it shares (ta_group_start), or NULL: a thread of its own */
    void *pipe;
    char pipe_endpoint[64];
    /* Its thread's side. */
    void *tpipe;
    int idle_ms;
};

/* Processes one message now: records it, runs the handler, replies ERROR on
 * failure.  The caller keeps ownership of m. */
void ta_actor_dispatch(ta_actor_t *a, ta_msg_t *m);

/* Frees what the actor's queues hold and its ordered inputs. */
void ta_actor_free_queues(ta_actor_t *a);

#endif
