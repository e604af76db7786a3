/* client_ctx.h - a context's state, shared by client.c (tensors, ops,
 * sync points) and client_ctx.c (opening and closing a context): private
 * to the client. */
#ifndef TACT_CLIENT_CTX_H
#define TACT_CLIENT_CTX_H

#include <msgpack.h>
#include <stdint.h>

#include "actor.h"
#include "client_core.h"
#include "link.h"
#include "pipeline.h"

typedef struct {
    ti_tensor_t **items;
    size_t n, cap;
} tc_scope_t;

struct ti_ctx {
    uintptr_t handle;
    uintptr_t owner; /* the thread inside a call now (its token), 0: none */
    int depth;       /* nested entries of that thread */
    ta_rt_t *rt;
    ta_port_t *port;
    ta_pipeline_t wiring;
    ta_stage_local_t local; /* each stage's own settings (threads, debug, cache folder) */
    ta_actor_t *graph, *scheduler, *planner, **executors, *autograd, *compilers[TA_MAX_COMPILERS]; /* executors: one per device (NULL: a worker's) */
    ta_group_t *control; /* the thread the graph, scheduler, planner and gradient engine share */
    /* The workers hosting devices (docs/workers.md): one link each, and
     * for each device the link it is reached through (-1: this process's)
     * and its name there. */
    ta_link_t **links;
    int nlinks;
    int *isolated; /* by link: the pid of the worker process the context started for it (0: none) */
    char iso_dir[64]; /* their sockets' private folder */
    int *device_link;
    char (*device_local)[TA_URI_MAX + 1];
    int timeout_ms;
    uint64_t next_id;
    tc_scope_t *scopes;
    size_t nscopes, scopes_cap;
    msgpack_sbuffer batch; /* op records not yet sent */
    size_t nbatch;
    uint64_t flushes; /* batches sent so far (ti_mark_ahead) */
    int hold;         /* a mark holds: the batch is not sent when it grows long, assigns are noted */
    struct s_undo {
        ti_tensor_t *t;
        uint64_t id;
        int realized;
    } *undo; /* the assigns since the mark: the node each target named before */
    size_t nundo, undo_cap;
    /* Ids the client released: those the graph may drop with the next
     * OP_BATCH (which it handles before that batch's ops), and those
     * released while ops that may read them wait in the batch, which go
     * with the batch after it. */
    uint64_t *released, *deferred;
    size_t nreleased, released_cap, ndeferred, deferred_cap;
    int unsynced; /* a message went to the graph after the last request (a realize, a read): close waits for it */
    struct s_inflight {
        uint64_t corr, realize, assigns;
        int losses; /* the workers lost when it was sent (ta_rt_losses): those take no part */
    } *inflight; /* realizes started, not yet waited for */
    size_t ninflight, inflight_cap;
    uint64_t realizes;  /* realizes started so far: each is numbered */
    uint64_t settled;   /* the latest realize waited for */
    uint64_t *failed;   /* realizes that failed, not yet told to the graph */
    size_t nfailed, failed_cap;
    char error[512];
    tact_stats stats;
    tact_device_stats *device_stats; /* per device, since the context opened */
    /* The random numbers' key and counter (client_random.c): a new
     * context is as after tact_manual_seed(0) (the reference's default seed
     * is the time: runs must repeat). */
    uint64_t rng_seed;
    uint32_t rng_counter;
    int rng_seeded;
    int no_grad; /* tact_set_no_grad: new ops get no gradient flag */
    /* The bytes of small tensors that came back with realizes' answers
     * (DONE.returned), the latest TA_RETURNS_MAX: a read of one of them
     * needs no request.  An assign writes its target's buffer in place,
     * which views made before it share, so every assign forgets them all,
     * and the answer of a realize sent before an assign is not kept
     * (assigns counts them; a realize in flight notes the count). */
    struct s_returned {
        uint64_t id;
        size_t len;
        uint8_t bytes[TA_RETURN_BYTES];
    } returned[TA_RETURNS_MAX];
    int next_returned;
    uint64_t assigns;
    void *backward; /* a backward sent and not yet answered (client_grad.c) */
};

/* A tensor of a scope freed (and its gradient): its handle is stale from
 * now on; the answers of every realize started, waited for in order
 * (closing: heartbeats do not extend the wait), the first error returned. */
void tc_free_tensor(ti_tensor_t *t);
int tc_wait(ti_ctx_t *ctx, int closing);

#endif
