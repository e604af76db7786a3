/* builder_impl.h - the graph builder's state and the helpers its backward (builder_backward.c) shares with builder.c. */
#ifndef TACT_BUILDER_IMPL_H
#define TACT_BUILDER_IMPL_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "dtype.h"
#include "fold.h"
#include "map.h"
#include "mem.h"
#include "mpread.h"
#include "ops.h"
#include "pipeline.h"
#include "shape.h"

typedef struct g_node {
    uint64_t id;
    ta_op_t op; /* for views: the movement op that made it */
    tact_dtype dtype;
    ta_shape_t shape;
    int nsrc;
    uint64_t src[3];
    int nargs;
    int64_t args[2 * TA_MAX_DIMS];
    int is_view;
    uint64_t base;   /* views: the base; bases: their own id */
    ta_vstack_t *st; /* views: over the base's shape */
    int buffer;      /* the base has a buffer on the executor */
    int writes;      /* EMPTY whose bytes the client sends */
    int client_ref;  /* the client still holds the tensor */
    int children;    /* live nodes naming this one as a source or base */
    uint64_t mark;   /* traversal stamp */
    uint64_t hash;   /* of its op, dtype, shape, sources and args (0: not shareable) */
    uint64_t alias;  /* the node this one duplicates (common subexpression), or 0 */
    uint64_t buf;    /* the buffer holding its data: its own id, or an ASSIGN's target's */
    int internal;    /* while realizing: consumers inside the subgraph */
    size_t pos;      /* while realizing: index in the collected subgraph */
    int grad;        /* differentiable: the client's record had flags bit 0 (its result requires a gradient) */
    int consumed;    /* a backward went through it (a second one is refused) */
    int sealed;      /* its buffer is final (the realize that gave it was waited for and did not fail) */
    int device;      /* the index of its device (NODE.device): where its buffer is, or its kernel runs; a view's is its base's */
} g_node_t;

/* A slot of the node map: the id (0: empty) and its node. */
typedef struct {
    uint64_t id;
    g_node_t *n;
} g_slot_t;

/* Common subexpressions: the hash of an op's content -> a live node with it. */
typedef struct {
    uint64_t hash, id; /* id 0: empty slot */
} g_cse_t;

/* A node a realize gave a buffer to, kept until the client has heard how
 * that realize ended: if it failed, the node loses its buffer again. */
typedef struct {
    uint64_t realize, id;
} g_given_t;

typedef struct {
    ta_pipeline_t w;
    int configured;
    g_slot_t *slots; /* open addressing by id (the id beside the node: a probe reads no node) */
    size_t cap, count;
    g_cse_t *cse;
    size_t cse_cap, cse_count;
    uint64_t cse_hits;
    uint64_t next_internal; /* ids of nodes the builder makes itself */
    uint64_t stamp;
    ta_error_t refused; /* a one-way message of the client that was refused: reported at its next request */
    /* The realize being scheduled (one at a time: the graph awaits each
     * part's SCHEDULED before the client's next message). */
    uint64_t realize;         /* the client's number for it, or 0 */
    uint64_t corr, reply_to;  /* the client's REALIZE */
    uint64_t awaited;         /* the corr of the SCHEDULE whose reply is awaited */
    uint64_t *targets;        /* its tensors */
    size_t ntargets, targets_cap;
    /* Its small targets, whose bytes come back with the executors' DONE:
     * (device, target id, buffer id, bytes) each. */
    uint64_t returns[4 * TA_RETURNS_MAX];
    int nreturns;
    g_given_t *given;         /* by realize, oldest first */
    size_t ngiven, given_cap;
    /* The backward being built (one at a time: the graph awaits the
     * gradient engine's GRADS before the client's next message). */
    uint64_t bw_awaited, bw_corr, bw_reply_to;
    uint64_t *bw_walked; /* the differentiable nodes it went through */
    size_t bw_nwalked, bw_walked_cap;
    uint64_t *bw_ids;    /* the ids the client chose for the gradients */
    size_t bw_nids, bw_ids_cap;
    ta_map_t bw_chosen;  /* the same ids, for lookups (an answer has an op per gradient op) */
    uint64_t *bw_added;  /* the engine's ops added so far (its answer may come in parts) */
    size_t bw_nadded, bw_added_cap;
    size_t part_bytes;   /* the most bytes of records a part (of a SCHEDULE or a BACKWARD) carries */
    size_t part_nodes;   /* the most nodes of a SCHEDULE part */
    /* Buffers by id: 2 * (live bases whose data is in it) + 1 once one that
     * had it allocated was dropped.  An assign writes its target's buffer,
     * so a buffer is freed when the last base naming it goes. */
    ta_map_t bufs;
    /* Freed nodes and view stacks, for the next ones: a step makes and
     * drops hundreds of each, and a 3 KiB stack is slow to allocate. */
    void *free_nodes, *free_stacks;
    int nfree_nodes, nfree_stacks;
} g_state_t;

/* A node on a depth-first walk's stack (the walks over user-sized graphs
 * keep their own stack, never the C one). */
typedef struct {
    g_node_t *n;
    int exit; /* its sources are done: append it */
} g_visit_t;

/* builder.c: the node of id (NULL: none), taking an op record into the
 * graph, dropping a node nobody holds (its buffer appended to *frees) and
 * what a realized node no longer needs, the common-subexpression entry of
 * a node, the FREE of dropped buffers, and the answer to a request while a
 * one-way message stands refused. */
g_node_t *g_find(const g_state_t *g, uint64_t id);
int g_add_op(g_state_t *g, const ta_node_rec_t *r, ta_error_t *err);
void g_maybe_drop(g_state_t *g, g_node_t *n, uint64_t **frees, size_t *nfrees, size_t *frees_cap);
void g_drop_sources(g_state_t *g, g_node_t *n, uint64_t **frees, size_t *nfrees, size_t *frees_cap);
void g_cse_remove(g_state_t *g, const g_node_t *n);
int g_send_frees(ta_actor_t *self, g_state_t *g, const uint64_t *ids, size_t n);
int g_refused(ta_actor_t *self, g_state_t *g);

/* builder_backward.c: BACKWARD from the client (the forward records to the
 * gradient engine), the engine's awaited GRADS, and dropping the ops of an
 * answer that failed (keep_chosen 0) or the unasked ones (1). */
int g_backward(ta_actor_t *self, g_state_t *g, const ta_msg_t *m);
int g_grads(ta_actor_t *self, g_state_t *g, const ta_msg_t *m);
void g_bw_unhold(g_state_t *g, int keep_chosen);

#endif
