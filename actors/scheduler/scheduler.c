/* scheduler.c - the scheduler actor: cuts a subgraph into fused kernels (one reduce at most each), in dependency order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ast.h"
#include "dtype.h"
#include "hash.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"
#include "shape.h"

/*
 * SCHEDULE(realize, nodes, targets, ids, bufs) from the graph builder
 * becomes SCHEDULED (which nodes get buffers), the reply the graph awaits,
 * and KERNELS (with the temporaries) to the planner, under the same corr.
 *
 * A realize point is a base that gets a buffer: every target's base, every
 * CONTIGUOUS, and whatever fusion cannot absorb (DESIGN.md §4): a reduce
 * met inside another reduce or through a view that is not the identity, a
 * base read through an expanding view (realize before expand), a base with
 * an unsafe op read through a padding mask, and a node where a kernel would
 * outgrow its limits (nodes, buffers, views, depth): the kernel is split
 * there.  Each realize point is one kernel: its tree of unrealized bases,
 * movement composed into the loads.
 *
 * Realize points are found by a worklist: building a kernel either succeeds
 * or names one new realize point; then that kernel, the new point's own
 * kernel and every kernel that had computed the new point inline are built
 * again.  Each node becomes a realize point at most once, so this ends.
 *
 * A subgraph structurally identical to an earlier one (same ops, dtypes,
 * shapes, views, flags and wiring; other ids) reuses its schedule from a
 * small cache, so the steady-state step of a loop is not scheduled again.
 */

typedef struct {
    ta_op_t op;
    tact_dtype dtype;
    ta_shape_t shape;
    int nsrc;
    int src[3]; /* indices into the node table */
    int nargs;
    int64_t args[2 * TA_MAX_DIMS];
    int base; /* index; views only */
    int is_view;
    ta_vstack_t *st; /* views only */
    int has_buffer, keep, writes;
    int bufref;   /* the first node whose data is in the same buffer (an assign's target's) */
    int rp;       /* realize point */
    int queued;   /* in the worklist */
    uint32_t gen; /* builds of the kernel rooted here */
    int uses;     /* head of the list of kernels that computed it inline, -1 */
    int device;   /* NODE.device: where its buffer is, or its kernel runs */
    int target;   /* the base of a target of this realize */
    int konst;    /* its value comes from constants alone (no buffer under it) */
    int konst_copy; /* a COPY of constants, computing them where it is (see s_decode) */
} s_node_t;

/* Kernel `kernel` computed a node inline in its build number gen. */
typedef struct {
    int kernel, next;
    uint32_t gen;
    int pre; /* inside that kernel's reduce loop */
} s_use_t;

typedef struct {
    s_node_t *nodes;
    int n;
    uint64_t *ids, *bufs; /* per node: its id and its buffer's id */
    ta_error_t err;
    int forced; /* the node the failed build made a realize point, or -1 */
    s_use_t *uses;
    size_t nuses, uses_cap;
    int *work;
    size_t nwork, work_cap, head;
    int ndevices; /* the context's: a node's device is below */
    const ta_pipeline_t *w;  /* their URIs, for errors */
} s_graph_t;

/* A schedule in canonical form: nodes and buffers by position (a buffer
 * by its first node's), ASTs without their fused ids.  What the cache
 * keeps, and what every schedule is sent from. */
typedef struct {
    int nk;
    struct s_kres {
        size_t ast_off, ast_len; /* in bytes */
        size_t off;              /* in ints: nfused fused nodes, nbufs buffer positions, nbufs writes flags */
        size_t args_off;         /* in args: the values of its nargs argument CONSTs */
        int nfused, nbufs, nargs;
        int device, copy;        /* KERNEL.device and .copy (a COPY's source device + 1, else 0) */
    } *ks;
    msgpack_sbuffer bytes;
    int *ints;
    size_t nints, ints_cap;
    uint64_t *args; /* argument values: the cache key holds the CONSTs' values, so a hit has the same */
    size_t nargs, args_cap;
    size_t keep_off, temp_off, ref_off; /* in ints: node indices; every node's bufref */
    int nkeep, ntemp, n;
} s_result_t;

enum { S_CACHE_ENTRIES = 16 };

/* The key is the SCHEDULE's nodes as they travelled and its targets
 * (positions): they name no ids, so equal keys are equal structure. */
typedef struct {
    uint64_t hash;
    uint8_t *key;
    size_t key_len, nodes_len;
    s_result_t res;
} s_cached_t;

typedef struct {
    ta_pipeline_t w;
    ta_stage_local_t local;
    int configured;
    s_cached_t cache[S_CACHE_ENTRIES];
    int ncached, evict; /* entries used; the next to replace (oldest first) */
    int perturb;        /* TACT_TEST_PERTURB=scheduler: list fused ids backwards (tests of replay only) */
} s_state_t;

/* ------------------------------------------------------------- decoding */

static void s_graph_fini(s_graph_t *g) {
    for (int i = 0; i < g->n; i++) ta_free(g->nodes[i].st);
    ta_free(g->nodes);
    ta_free(g->ids);
    ta_free(g->bufs);
    ta_free(g->uses);
    ta_free(g->work);
}

/* Copies an array of exactly n uints into a fresh array. */
static int s_u64s(const ta_u64s_t *a, uint32_t n, uint64_t **out, const char *what, ta_error_t *err) {
    if (a->n != n) return ta_error_set(err, TACT_EPROTO, "schedule: %s: %u entries, expected %u", what, a->n, n);
    if (ta_u64s_copy(a, out) != TACT_OK) return ta_error_set(err, TACT_ENOMEM, "schedule: out of memory");
    return TACT_OK;
}


/* True when an unrealized base's sources and shape fit its op (what the
 * graph builder checked when it added it; a hostile peer may not have). */
static int s_shapes_follow(const s_graph_t *g, const s_node_t *d) {
    ta_op_class_t cls = ta_op_class(d->op);
    if (cls == TA_OPC_MOVEMENT || cls == TA_OPC_BUFFER || d->op == TA_OP_CUSTOM) return 0;
    if (d->nsrc != ta_op_arity(d->op)) return 0;
    /* A copy moves its source's elements as they are, to another device. */
    if (d->op == TA_OP_COPY && (d->dtype != g->nodes[d->src[0]].dtype || d->device == g->nodes[g->nodes[d->src[0]].base].device)) return 0;
    if (cls == TA_OPC_REDUCE) {
        const ta_shape_t *src = &g->nodes[d->src[0]].shape;
        if (d->nargs != 1 || d->args[0] < 0 || (uint64_t)d->args[0] >> src->ndim || src->ndim != d->shape.ndim) return 0;
        for (int k = 0; k < src->ndim; k++)
            if (d->shape.d[k] != (d->args[0] >> k & 1 ? 1 : src->d[k])) return 0;
        return 1;
    }
    for (int j = 0; j < d->nsrc; j++)
        if (!ta_shape_equal(&g->nodes[d->src[j]].shape, &d->shape)) return 0;
    return 1;
}

/* Decodes the node list (sources, bases and buffers by position). */
static int s_decode(s_graph_t *g, const ta_recs_t *nodes, ta_error_t *err) {
    uint32_t n = nodes->n;
    g->nodes = ta_malloc(sizeof *g->nodes * (n ? n : 1));
    ta_node_rec_t *rec = ta_malloc(sizeof *rec);
    if (!g->nodes || !rec) {
        ta_free(rec);
        return ta_error_set(err, TACT_ENOMEM, "schedule: out of memory");
    }
    ta_recs_it_t it;
    ta_recs_begin(&it, nodes);
    int rc = TACT_OK;
    for (uint32_t i = 0; i < n && rc == TACT_OK; i++) {
        s_node_t *d = &g->nodes[i];
        d->st = NULL;
        d->rp = d->queued = d->target = 0;
        d->gen = 0;
        d->uses = -1;
        g->n = (int)i + 1;
#define S_NEED(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            rc = ta_error_set(err, TACT_EPROTO, "schedule: malformed node %u (%s)", i, #c);         \
            goto next;                                                                             \
        }                                                                                          \
    } while (0)
        S_NEED(ta_recs_next(&it, rec));
        S_NEED(rec->id == i && rec->op < TA_OP__COUNT && ta_dtype_valid((int)rec->dtype) && rec->device < (uint64_t)g->ndevices);
        d->op = (ta_op_t)rec->op;
        d->dtype = (tact_dtype)rec->dtype;
        d->device = (int)rec->device;
        S_NEED(ta_shape_make(&d->shape, (int)rec->n_shape, rec->shape, "schedule", NULL) == TACT_OK);
        d->nsrc = (int)rec->n_srcs;
        for (int j = 0; j < d->nsrc; j++) {
            S_NEED(rec->srcs[j] < i); /* sources come first */
            d->src[j] = (int)rec->srcs[j];
        }
        d->nargs = (int)rec->n_args;
        memcpy(d->args, rec->args, sizeof *d->args * rec->n_args);
        if (!rec->st.n) {
            S_NEED(rec->base == i);
            d->is_view = 0;
            d->base = (int)i;
        } else {
            if (!(d->st = ta_malloc(sizeof *d->st))) {
                rc = ta_error_set(err, TACT_ENOMEM, "schedule: out of memory");
                break;
            }
            S_NEED(ta_vstack_from_recs(d->st, &rec->st) == 0);
            d->is_view = 1;
            S_NEED(rec->base < i && !g->nodes[rec->base].is_view);
            d->base = (int)rec->base;
            /* The stack maps the node's shape into its base's elements. */
            S_NEED(ta_vstack_ndim(d->st) == d->shape.ndim &&
                   memcmp(ta_vstack_shape(d->st), d->shape.d, sizeof(int64_t) * (size_t)d->shape.ndim) == 0 &&
                   ta_vstack_buffer_size(d->st) <= ta_shape_numel(&g->nodes[d->base].shape));
        }
        d->has_buffer = rec->flags & 1;
        d->keep = rec->flags >> 1 & 1;
        d->writes = rec->flags >> 2 & 1;
        S_NEED(rec->bufref <= i && g->bufs[rec->bufref] == g->bufs[i]);
        d->bufref = (int)rec->bufref;
        S_NEED(d->is_view || d->has_buffer || s_shapes_follow(g, d));
        /* Sources and bases come first: one pass. */
        d->konst = d->is_view ? g->nodes[d->base].konst : d->op == TA_OP_CONST || d->op == TA_OP_IOTA;
        if (!d->is_view && !d->has_buffer && d->nsrc && d->op != TA_OP_COPY) {
            d->konst = 1;
            for (int j = 0; j < d->nsrc; j++) d->konst &= g->nodes[d->src[j]].konst;
        }
        /* A copy of constants alone (the gradient engine's copy back of a
         * gradient that is a constant, a realized constant moved) computes
         * them where it is, as the client does for constants moved to a
         * device: they have no device of their own, and any buffer they got
         * is on whichever device read them first. */
        d->konst_copy = d->op == TA_OP_COPY && !d->is_view && !d->has_buffer && g->nodes[d->src[0]].konst;
        if (d->konst_copy) d->op = TA_OP_CONTIGUOUS, d->konst = 1;
#undef S_NEED
    next:;
    }
    ta_free(rec);
    return rc;
}

/* ------------------------------------------------------------ kernels */

/* Composes views: the result maps the kernel's index space through outer,
 * then through inner, to inner's buffer.  Returns 0, or -1 when the stack
 * would be too deep. */
static int s_compose(const ta_vstack_t *inner, const ta_vstack_t *outer, ta_vstack_t *out) {
    ta_vstack_t r;
    ta_vstack_copy(&r, inner);
    for (int i = 0; i < outer->nviews; i++) {
        const ta_view_t *w = &outer->views[i];
        /* A contiguous view is a reshape of what it reads only when it
         * covers all of it: a shrink from the start (offset 0, no mask) is
         * contiguous too, but covers less, and stays a view. */
        int64_t n = 1;
        for (int d = 0; d < w->ndim; d++) n *= w->shape[d];
        if (w->contiguous && n == ta_vstack_numel(&r)) {
            if (ta_vstack_reshape(&r, w->ndim, w->shape) != 0) return -1;
        } else {
            if (r.nviews >= TA_MAX_VIEWS) return -1;
            r.views[r.nviews++] = *w;
        }
    }
    ta_vstack_copy(out, &r);
    return 0;
}

static int s_masked(const ta_vstack_t *st) {
    for (int i = 0; i < st->nviews; i++)
        if (st->views[i].has_mask) return 1;
    return 0;
}

/* The walk recurses once per fused node, so a kernel's depth is bounded:
 * longer chains are cut into several kernels (past a few hundred fused ops
 * a kernel gains nothing). */
enum { S_MAX_DEPTH = 96 };

/* What a kernel can run out of; each is split off when it does. */
enum { S_RES_NODES, S_RES_BUFS, S_RES_VIEWS, S_NRES };

typedef struct {
    s_graph_t *g;
    ta_ast_t *ast;
    int root;
    int reduce;  /* the node index of the kernel's reduce, -1 if none */
    int reduce_ast; /* its AST node once emitted, -1 before */
    int bufs[TA_AST_MAX_BUFS]; /* buffer positions (the bufref of a node using it) */
    int buf_writes[TA_AST_MAX_BUFS];
    /* Loads and constants already emitted, to share them. */
    int memo_node[TA_AST_MAX_NODES], memo_ast[TA_AST_MAX_NODES], memo_view[TA_AST_MAX_NODES], memo_pre[TA_AST_MAX_NODES], nmemo;
    /* ALU nodes already emitted, by node and the view they were read through
     * (a node shared by two consumers is computed once per kernel). */
    int alu_node[TA_AST_MAX_NODES], alu_ast[TA_AST_MAX_NODES], alu_pre[TA_AST_MAX_NODES], nalu;
    int inline_node[TA_AST_MAX_NODES], ninline; /* nodes computed inline (ALU and the reduce), root excluded */
    int inline_pre[TA_AST_MAX_NODES];           /* ... inside the reduce's loop */
    int fused_node[TA_AST_MAX_NODES];            /* node indices of ast->fused */
    int arg_node[TA_AST_MAX_NODES];              /* node indices of the AST's argument CONSTs, in order */
    int depth;                                   /* of s_emit's recursion */
    int path[S_MAX_DEPTH + 2];                   /* the nodes being emitted, outermost first */
    int entry[S_MAX_DEPTH + 2][S_NRES];          /* what the kernel used when each was entered */
    /* Per path node and resource: its finished source subtree that used the
     * most, a split candidate that is known to fit in a kernel. */
    int child[S_MAX_DEPTH + 2][S_NRES], child_used[S_MAX_DEPTH + 2][S_NRES];
    ta_vstack_t *alu_st; /* TA_AST_MAX_NODES entries */
} s_kernel_t;

static int s_forcible(const s_node_t *n) {
    return !n->is_view && !n->has_buffer && !n->rp && n->op != TA_OP_CONST && n->op != TA_OP_IOTA && n->op != TA_OP_EMPTY;
}

/* Makes node a realize point: the build fails, and the worklist builds
 * again.  A node that cannot be one would only loop: that is an error. */
static int s_force(s_kernel_t *k, int node) {
    s_node_t *n = &k->g->nodes[node];
    if (!s_forcible(n)) {
        ta_error_set(&k->g->err, TACT_EINVAL, "cannot split the kernel at node %llu", (unsigned long long)k->g->ids[node]);
        return -1;
    }
    n->rp = 1;
    k->g->forced = node;
    return -1;
}

static int s_used(const s_kernel_t *k, int res) {
    return res == S_RES_NODES ? k->ast->nnodes : res == S_RES_BUFS ? k->ast->nbufs : k->ast->nviews;
}

/* The kernel ran out of res.  The best split is a finished source subtree
 * that used at least half the limit (the deepest such): it fit in this
 * kernel, so it fits in one of its own.  Failing that, the deepest node on
 * the walk's path that used half the limit below it, else the outermost
 * one, becomes a realize point. */
static int s_split(s_kernel_t *k, int res) {
    static const int limits[S_NRES] = {TA_AST_MAX_NODES, TA_AST_MAX_BUFS, TA_AST_MAX_VIEWS};
    static const char *what[S_NRES] = {"nodes", "buffers", "views"};
    int cur = s_used(k, res), half = limits[res] / 2;
    for (int d = k->depth - 1; d >= 0; d--)
        if (k->child[d][res] >= 0 && k->child_used[d][res] >= half) return s_force(k, k->child[d][res]);
    int pick = -1, first = -1;
    for (int d = 1; d < k->depth; d++) {
        if (!s_forcible(&k->g->nodes[k->path[d]])) continue;
        if (first < 0) first = d;
        if (cur - k->entry[d][res] >= half) pick = d;
    }
    if (pick < 0) pick = first;
    if (pick < 0) {
        ta_error_set(&k->g->err, TACT_EINVAL, "kernel at node %llu needs more than %d %s and cannot be split",
                     (unsigned long long)k->g->ids[k->root], limits[res], what[res]);
        return -1;
    }
    return s_force(k, k->path[pick]);
}

static int s_buf(s_kernel_t *k, int node) {
    s_node_t *n = &k->g->nodes[node];
    for (int b = 0; b < k->ast->nbufs; b++)
        if (k->bufs[b] == n->bufref) return b;
    if (k->ast->nbufs >= TA_AST_MAX_BUFS) return s_split(k, S_RES_BUFS);
    int b = k->ast->nbufs++;
    k->bufs[b] = n->bufref;
    /* Bit 0: the client writes its bytes; bit 1: an EMPTY nobody writes,
     * which the executor creates zero-filled.  Any other input was computed
     * earlier and must exist. */
    k->buf_writes[b] = n->writes | (n->op == TA_OP_EMPTY && !n->writes) << 1;
    k->ast->buf_dtype[b] = n->dtype;
    k->ast->buf_size[b] = ta_shape_numel(&n->shape);
    return b;
}

/* A view's index in the AST; one slot stays free for the STORE's. */
static int s_view(s_kernel_t *k, const ta_vstack_t *st) {
    for (int v = 0; v < k->ast->nviews; v++)
        if (ta_vstack_equal(&k->ast->views[v], st)) return v;
    if (k->ast->nviews >= TA_AST_MAX_VIEWS - 1) return s_split(k, S_RES_VIEWS);
    return ta_ast_view(k->ast, st);
}

/* Appends an AST node; one slot stays free for the STORE. */
static int s_add(s_kernel_t *k, ta_ast_node_t node) {
    if (node.op != TA_OP_STORE && k->ast->nnodes >= TA_AST_MAX_NODES - 1) return s_split(k, S_RES_NODES);
    return ta_ast_add(k->ast, node);
}

/*
 * Emits node i read through st (from the kernel's current index space to
 * node i's shape); pre is set inside the reduce.  Returns the AST index, or
 * -1 (with g->forced set when a new realize point was found).
 */
static int s_emit_at(s_kernel_t *k, int i, const ta_vstack_t *st, int pre);

static int s_emit(s_kernel_t *k, int i, const ta_vstack_t *st, int pre) {
    s_node_t *n = &k->g->nodes[i];
    if (k->depth >= S_MAX_DEPTH && s_forcible(n)) return s_force(k, i);
    int d = k->depth;
    for (int res = 0; res < S_NRES; res++) {
        k->entry[d][res] = s_used(k, res);
        k->child[d][res] = -1;
    }
    k->path[k->depth++] = i;
    int r = s_emit_at(k, i, st, pre);
    k->depth--;
    if (r >= 0 && d > 0 && s_forcible(n))
        for (int res = 0; res < S_NRES; res++) {
            int used = s_used(k, res) - k->entry[d][res];
            if (k->child[d - 1][res] < 0 || used > k->child_used[d - 1][res]) {
                k->child[d - 1][res] = i;
                k->child_used[d - 1][res] = used;
            }
        }
    return r;
}

static int s_emit_at(s_kernel_t *k, int i, const ta_vstack_t *st, int pre) {
    s_graph_t *g = k->g;
    s_node_t *n = &g->nodes[i];
    if (n->is_view) {
        ta_vstack_t c;
        if (s_compose(n->st, st, &c) != 0) {
            /* Too deep to read through: the consumer that reads this view
             * becomes a realize point, and is then read through a fresh view. */
            for (int d = k->depth - 2; d >= 1; d--)
                if (!g->nodes[k->path[d]].is_view) return s_force(k, k->path[d]);
            return ta_error_set(&g->err, TACT_EINVAL, "kernel at node %llu reads a view stack too deep to compose",
                                (unsigned long long)g->ids[k->root]), -1;
        }
        return s_emit(k, n->base, &c, pre);
    }
    int64_t space = ta_vstack_numel(st);
    /* A copy of constants computes them all again (see s_decode). */
    int again = n->konst && g->nodes[k->root].konst_copy;
    int load = (!again && (n->has_buffer || (n->rp && i != k->root))) || n->op == TA_OP_EMPTY;
    /* (Constants alone are cheap to compute again, and have no device
     * until they have a buffer: never realized for this.) */
    if (!load && n->op != TA_OP_CONST && !n->konst && space > ta_shape_numel(&n->shape) && i != k->root)
        return s_force(k, i); /* realize before expand */
    if (load || n->op == TA_OP_CONST || n->op == TA_OP_IOTA) {
        int v = -1;
        if (load || n->op == TA_OP_IOTA || s_masked(st)) {
            if ((v = s_view(k, st)) < 0) return -1;
        }
        for (int m = 0; m < k->nmemo; m++)
            if (k->memo_node[m] == i && k->memo_view[m] == v && k->memo_pre[m] == pre) return k->memo_ast[m];
        ta_ast_node_t a;
        memset(&a, 0, sizeof a);
        a.dtype = n->dtype;
        a.view = (int16_t)v;
        if (load) {
            a.op = TA_OP_LOAD;
            int b = s_buf(k, i);
            if (b < 0) return -1;
            a.buf = (int16_t)b;
        } else if (n->op == TA_OP_IOTA) {
            a.op = TA_OP_IOTA; /* its value is the position its view reads */
        } else {
            /* A value that is not structural is a kernel argument: the AST
             * (and its program) stay the same when it changes. */
            a.op = TA_OP_CONST;
            a.value = ta_value_from_bits(n->dtype, n->nargs ? (uint64_t)n->args[0] : 0);
            if (!ta_ast_const_is_structural(n->dtype, a.value)) {
                a.arg = 1;
                a.value = ta_value_from_bits(n->dtype, 0);
            }
        }
        int nargs = k->ast->nargs;
        int idx = s_add(k, a);
        if (idx >= 0 && k->ast->nargs > nargs) k->arg_node[nargs] = i;
        if (idx >= 0 && k->nmemo < TA_AST_MAX_NODES) {
            k->memo_node[k->nmemo] = i;
            k->memo_view[k->nmemo] = v;
            k->memo_pre[k->nmemo] = pre;
            k->memo_ast[k->nmemo++] = idx;
        }
        return idx;
    }
    ta_op_class_t cls = ta_op_class(n->op);
    if (cls == TA_OPC_REDUCE) {
        /* The kernel's one reduce, read as-is from the output index space. */
        if (pre || (k->reduce >= 0 && k->reduce != i) || !ta_vstack_contiguous(st) || !ta_shape_equal(&n->shape, &g->nodes[k->root].shape))
            return s_force(k, i);
        /* Read again (through another contiguous view of the same shape):
         * the same value, not a second reduce. */
        if (k->reduce == i && k->reduce_ast >= 0) return k->reduce_ast;
        k->reduce = i;
        s_node_t *src = &g->nodes[n->src[0]];
        ta_vstack_t full;
        ta_vstack_init(&full, src->shape.ndim, src->shape.d);
        int s0 = s_emit(k, n->src[0], &full, 1);
        if (s0 < 0) return -1;
        ta_ast_node_t a = {n->op, n->dtype, 1, {(int16_t)s0, 0, 0}, 0, -1, {0}, 0};
        int idx = s_add(k, a);
        if (idx >= 0 && i != k->root) k->inline_pre[k->ninline] = 0, k->inline_node[k->ninline++] = i;
        k->reduce_ast = idx;
        return idx;
    }
    if (n->op == TA_OP_COPY && i == k->root) {
        /* A copy is a kernel of its own that reads its source's whole
         * buffer from the start: a realize point, or a contiguous view of one. */
        const s_node_t *src = &g->nodes[n->src[0]];
        if (src->is_view && !ta_vstack_contiguous(src->st))
            return ta_error_set(&g->err, TACT_EINVAL, "COPY at node %llu reads a view that is not contiguous", (unsigned long long)g->ids[i]), -1;
        return s_emit(k, n->src[0], st, pre);
    }
    if (cls != TA_OPC_UNARY && cls != TA_OPC_BINARY && cls != TA_OPC_TERNARY && n->op != TA_OP_CONTIGUOUS && n->op != TA_OP_ASSIGN)
        return ta_error_set(&g->err, TACT_EINVAL, "cannot schedule %s", ta_op_name(n->op)), -1;
    /* Padding fuses only through ops with f(0) = 0 (DESIGN.md trap 3); a bool
     * NEG is !x, so it is not one. */
    int unsafe = !ta_op_pad_safe(n->op) || (n->op == TA_OP_NEG && ta_dtype_is_bool(n->dtype));
    if (s_masked(st) && unsafe && i != k->root) return s_force(k, i);
    if (n->op == TA_OP_CONTIGUOUS) return s_emit(k, n->src[0], st, pre);
    if (n->op == TA_OP_ASSIGN) return s_emit(k, n->src[1], st, pre); /* only as a root: others load it */
    for (int m = 0; m < k->nalu; m++)
        if (k->alu_node[m] == i && k->alu_pre[m] == pre && ta_vstack_equal(&k->alu_st[m], st)) return k->alu_ast[m];
    ta_ast_node_t a;
    memset(&a, 0, sizeof a);
    a.op = n->op;
    a.dtype = n->dtype;
    a.nsrc = n->nsrc;
    a.view = -1;
    for (int s = 0; s < n->nsrc; s++) {
        int si = s_emit(k, n->src[s], st, pre);
        if (si < 0) return -1;
        a.src[s] = (int16_t)si;
    }
    int idx = s_add(k, a);
    if (idx < 0) return -1;
    if (i != k->root) {
        k->inline_pre[k->ninline] = pre;
        k->inline_node[k->ninline++] = i;
        k->fused_node[k->ast->nfused] = i;
        k->ast->fused[k->ast->nfused++] = g->ids[i];
    }
    k->alu_node[k->nalu] = i;
    k->alu_pre[k->nalu] = pre;
    ta_vstack_copy(&k->alu_st[k->nalu], st);
    k->alu_ast[k->nalu++] = idx;
    return idx;
}

/* Builds the kernel computing realize point root into ast.  Returns 0, or
 * -1 with g->forced (a new realize point: build again) or g->err set. */
static int s_build(s_graph_t *g, int root, ta_ast_t *ast, s_kernel_t *k) {
    s_node_t *n = &g->nodes[root];
    ta_vstack_t *alu_st = k->alu_st;
    memset(k, 0, offsetof(s_kernel_t, entry));
    k->alu_st = alu_st;
    k->g = g;
    k->ast = ast;
    k->root = root;
    k->reduce = -1;
    k->reduce_ast = -1;
    /* Find the kernel's shape: a reduce reachable without passing a
     * realized base sets the full shape; otherwise the output shape. */
    ta_ast_init(ast, n->shape.ndim, n->shape.d, 0);
    ast->nbufs = 1;
    ast->buf_dtype[0] = n->dtype;
    ast->buf_size[0] = ta_shape_numel(&n->shape);
    k->bufs[0] = n->bufref;
    ta_vstack_t out;
    ta_vstack_init(&out, n->shape.ndim, n->shape.d);
    int val = s_emit(k, root, &out, 0);
    if (val < 0) return -1;
    if (n->op == TA_OP_ASSIGN) {
        /* Writing in place is safe only if every read of the target's buffer
         * is of the element being written (DESIGN.md trap 6); otherwise the
         * value is computed into a buffer of its own first. */
        int vout = ta_ast_view(ast, &out);
        int value = g->nodes[n->src[1]].is_view ? g->nodes[n->src[1]].base : n->src[1];
        for (int i = 0; i < ast->nnodes; i++)
            if (ast->nodes[i].op == TA_OP_LOAD && ast->nodes[i].buf == 0 && ast->nodes[i].view != vout) return s_force(k, value);
    }
    if (k->reduce >= 0) {
        const s_node_t *src = &g->nodes[g->nodes[k->reduce].src[0]];
        ast->ndim = src->shape.ndim;
        memcpy(ast->shape, src->shape.d, sizeof(int64_t) * (size_t)src->shape.ndim);
        ast->reduce_mask = (uint32_t)g->nodes[k->reduce].args[0];
    }
    int v = ta_ast_view(ast, &out);
    if (v < 0) return ta_error_set(&g->err, TACT_EINVAL, "kernel has too many views"), -1;
    ta_ast_node_t st = {TA_OP_STORE, n->dtype, 1, {(int16_t)val, 0, 0}, 0, (int16_t)v, {0}, 0};
    if (s_add(k, st) < 0) return ta_error_set(&g->err, TACT_EINVAL, "kernel too large"), -1;
    k->fused_node[ast->nfused] = root;
    ast->fused[ast->nfused++] = g->ids[root];
    return ta_ast_check(ast, &g->err) == TACT_OK ? 0 : -1;
}

/* ------------------------------------------------------- the worklist */

static int s_push(s_graph_t *g, int i) {
    if (g->nodes[i].queued) return TACT_OK;
    if (ta_grow((void **)&g->work, &g->work_cap, g->nwork + 1, sizeof *g->work) != TACT_OK) return TACT_ENOMEM;
    g->nodes[i].queued = 1;
    g->work[g->nwork++] = i;
    return TACT_OK;
}

/* A realize point that gets a kernel (EMPTY is filled by the executor). */
static int s_is_kernel(const s_node_t *n) { return n->rp && !n->has_buffer && !n->is_view && n->op != TA_OP_EMPTY; }

/* Finds every realize point: builds kernels until every one of them builds
 * with the realize points as they are at the end. */
static int s_fixpoint(s_graph_t *g, ta_ast_t *ast, s_kernel_t *k) {
    for (int i = 0; i < g->n; i++)
        if (s_is_kernel(&g->nodes[i]) && s_push(g, i) != TACT_OK) return ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
    while (g->head < g->nwork) {
        int root = g->work[g->head++];
        s_node_t *n = &g->nodes[root];
        n->queued = 0;
        g->forced = -1;
        if (s_build(g, root, ast, k) == 0) {
            n->gen++;
            for (int j = 0; j < k->ninline; j++) {
                if (ta_grow((void **)&g->uses, &g->uses_cap, g->nuses + 1, sizeof *g->uses) != TACT_OK)
                    return ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
                s_node_t *x = &g->nodes[k->inline_node[j]];
                g->uses[g->nuses] = (s_use_t){root, x->uses, n->gen, k->inline_pre[j]};
                x->uses = (int)g->nuses++;
            }
            continue;
        }
        if (g->forced < 0) return g->err.code ? g->err.code : TACT_EINVAL;
        /* The new realize point, this kernel, and the kernels whose latest
         * build computed the new point inline are built (again). */
        int rc = s_push(g, g->forced);
        if (rc == TACT_OK) rc = s_push(g, root);
        for (int u = g->nodes[g->forced].uses; rc == TACT_OK && u >= 0; u = g->uses[u].next)
            if (g->uses[u].gen == g->nodes[g->uses[u].kernel].gen) rc = s_push(g, g->uses[u].kernel);
        if (rc != TACT_OK) return ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
        if (g->head > 4096 && g->head * 2 > g->nwork) { /* keep the list short */
            memmove(g->work, g->work + g->head, sizeof *g->work * (g->nwork - g->head));
            g->nwork -= g->head;
            g->head = 0;
        }
    }
    return TACT_OK;
}

/* ----------------------------------------------------------- results */

/* ------------------------------------------------- shared expensive work */

enum { S_SHARED_COST = 12, S_SHARED_NUMEL = 4096 };

/* The ops a kernel computes to inline node i: the nodes reachable from it
 * that are neither realized nor views' stand-ins (a view counts its base),
 * counted up to cap (an explicit stack: graphs can be deep). */
static int s_inline_cost(s_graph_t *g, int i, int cap, uint8_t *seen, int *stack) {
    int depth = 0, cost = 0;
    stack[depth++] = i;
    while (depth && cost < cap) {
        int j = stack[--depth];
        s_node_t *x = &g->nodes[j];
        if (x->is_view) j = x->base, x = &g->nodes[j];
        if (seen[j] || x->has_buffer || (x->rp && j != i) || x->op == TA_OP_CONST || x->op == TA_OP_IOTA || x->op == TA_OP_EMPTY) continue;
        seen[j] = 1;
        cost++;
        for (int s = 0; s < x->nsrc; s++) stack[depth++] = x->src[s];
    }
    return cost;
}

/*
 * Work fused into several kernels is done once per kernel.  That is right
 * for a few cheap ops (softmax's exp(x - max) feeds its sum and its
 * quotient), but a large elementwise tree inlined into a reduce's loop
 * and into another kernel too (a batch norm's backward reads the gradient
 * that came through relu and max pool three times) costs more than a
 * buffer: such a node becomes a realize point.  Returns the number of new
 * realize points (their kernels and users queued), or -1 out of memory.
 */
static int s_shared_work(s_graph_t *g) {
    uint8_t *seen = ta_calloc((size_t)g->n + 1, 1), *covered = ta_calloc((size_t)g->n + 1, 1);
    int *stack = ta_malloc(sizeof *stack * (size_t)(3 * g->n + 4));
    int added = 0;
    if (!seen || !covered || !stack) {
        ta_free(seen);
        ta_free(covered);
        ta_free(stack);
        return -1;
    }
    /* Users first (nodes come sources first): the latest shared node is the
     * one to keep, the gradient every consumer reads; what it computes is
     * then inside one kernel only, so this pass leaves it alone (the next,
     * with fresh uses, sees whether it is still shared). */
    for (int i = g->n - 1; i >= 0 && added >= 0; i--) {
        s_node_t *x = &g->nodes[i];
        if (covered[i] || !s_forcible(x) || x->konst || ta_shape_numel(&x->shape) < S_SHARED_NUMEL) continue;
        ta_op_class_t cls = ta_op_class(x->op);
        if (cls != TA_OPC_UNARY && cls != TA_OPC_BINARY && cls != TA_OPC_TERNARY) continue;
        /* Inlined (by the kernels' latest builds) into two kernels or more,
         * and inside some reduce's loop. */
        int two = 0, pre = 0, first = -1;
        for (int u = x->uses; u >= 0 && !(two && pre); u = g->uses[u].next) {
            const s_use_t *us = &g->uses[u];
            if (us->gen != g->nodes[us->kernel].gen) continue;
            pre |= us->pre;
            if (first < 0) first = us->kernel;
            else two |= us->kernel != first;
        }
        if (!two || !pre) continue;
        memset(seen, 0, (size_t)g->n);
        if (s_inline_cost(g, i, S_SHARED_COST, seen, stack) < S_SHARED_COST) continue;
        x->rp = 1;
        s_inline_cost(g, i, g->n + 1, covered, stack);
        if (s_push(g, i) != TACT_OK) added = -1;
        for (int u = x->uses; added >= 0 && u >= 0; u = g->uses[u].next)
            if (g->uses[u].gen == g->nodes[g->uses[u].kernel].gen && s_push(g, g->uses[u].kernel) != TACT_OK) added = -1;
        if (added >= 0) added++;
    }
    ta_free(seen);
    ta_free(covered);
    ta_free(stack);
    return added;
}

static void s_result_fini(s_result_t *res) {
    ta_free(res->ks);
    msgpack_sbuffer_destroy(&res->bytes);
    ta_free(res->ints);
    ta_free(res->args);
    memset(res, 0, sizeof *res);
}

static int s_int(s_result_t *res, int v) {
    if (ta_grow((void **)&res->ints, &res->ints_cap, res->nints + 1, sizeof *res->ints) != TACT_OK) return -1;
    res->ints[res->nints++] = v;
    return 0;
}

/* Appends the kernel just built to res in canonical form. */
static int s_result_add(s_result_t *res, s_kernel_t *k) {
    struct s_kres *kr = &res->ks[res->nk++];
    ta_ast_t *ast = k->ast;
    int nfused = ast->nfused;
    /* The AST without its fused ids, which alone name graph nodes. */
    msgpack_packer pk;
    msgpack_packer_init(&pk, &res->bytes, msgpack_sbuffer_write);
    kr->ast_off = res->bytes.size;
    if (ta_ast_pack(ast, &pk)) return -1;
    kr->ast_len = res->bytes.size - kr->ast_off;
    kr->off = res->nints;
    kr->nfused = nfused;
    kr->nbufs = ast->nbufs;
    kr->nargs = ast->nargs;
    const s_node_t *root = &k->g->nodes[k->root];
    kr->device = root->device;
    kr->copy = root->op == TA_OP_COPY ? k->g->nodes[k->g->nodes[root->src[0]].base].device + 1 : 0;
    for (int i = 0; i < nfused; i++)
        if (s_int(res, k->fused_node[i])) return -1;
    for (int b = 0; b < ast->nbufs; b++)
        if (s_int(res, k->bufs[b])) return -1;
    for (int b = 0; b < ast->nbufs; b++)
        if (s_int(res, k->buf_writes[b])) return -1;
    kr->args_off = res->nargs;
    if (ta_grow((void **)&res->args, &res->args_cap, res->nargs + (size_t)ast->nargs + 1, sizeof *res->args) != TACT_OK) return -1;
    for (int j = 0; j < ast->nargs; j++) {
        const s_node_t *c = &k->g->nodes[k->arg_node[j]];
        res->args[res->nargs++] = ta_ast_arg_word(c->dtype, ta_value_from_bits(c->dtype, c->nargs ? (uint64_t)c->args[0] : 0));
    }
    return 0;
}

/* True if the loads of kernel q (loads[lo[q]..lo[q+1])) include node i. */
static int s_reads(const int *loads, const size_t *lo, int q, int i) {
    for (size_t m = lo[q]; m < lo[q + 1]; m++)
        if (loads[m] == i) return 1;
    return 0;
}

/* Node i is read from a buffer (not a constant in the kernel). */
static int s_is_load(const s_graph_t *g, int i) { return g->nodes[i].has_buffer || g->nodes[i].rp || g->nodes[i].op == TA_OP_EMPTY; }

/*
 * Devices of the kernels (roots[q], built in node order): a kernel runs on
 * its output's device and reads only buffers there (a COPY reads the other
 * device's).  A kernel made of constants alone that the scheduler made a
 * realize point of its own (a split, a shared value, a value read through
 * an expand) has no device of its own: it runs where its first reader
 * does, and its buffer does not outlive the realize (a later one computes
 * it again, wherever it is read then).  Returns TACT_OK, or an error
 * naming a kernel that reads another device's buffer.
 */
static int s_place(s_graph_t *g, const int *roots, const size_t *lo, const int *loads, struct s_kres *built, int nk) {
    /* Readers first (kernels come in node order, sources first): a
     * constant read by another constant's kernel follows that one. */
    for (int q = nk - 1; q >= 0; q--) {
        s_node_t *r = &g->nodes[roots[q]];
        if (!r->konst || r->target || r->op == TA_OP_CONTIGUOUS || r->op == TA_OP_ASSIGN) continue;
        for (int p = q + 1; p < nk; p++)
            if (s_reads(loads, lo, p, roots[q])) {
                if (g->nodes[roots[p]].op == TA_OP_COPY) break;
                r->device = built[q].device = g->nodes[roots[p]].device;
                r->keep = 0;
                break;
            }
    }
    for (int p = 0; p < nk; p++) {
        const s_node_t *root = &g->nodes[roots[p]];
        for (size_t m = lo[p]; m < lo[p + 1] && root->op != TA_OP_COPY; m++) {
            int i = loads[m];
            if (s_is_load(g, i) && g->nodes[i].device != root->device)
                return ta_error_set(&g->err, TACT_EDEVICE, "kernel at node %llu runs on %s but reads node %llu (%s%s), which is on %s",
                                    (unsigned long long)g->ids[roots[p]], ta_pipeline_uri(g->w, root->device), (unsigned long long)g->ids[i],
                                    ta_op_name((ta_op_t)g->nodes[i].op), g->nodes[i].konst ? ", of constants only" : "", ta_pipeline_uri(g->w, g->nodes[i].device));
        }
    }
    return TACT_OK;
}

/*
 * Builds every kernel in node order into res, then orders the assigns: an
 * assign overwrites its target's buffer, so every kernel that reads the
 * target's old contents goes first (DESIGN.md trap 6), and assigns to one
 * buffer keep their order.  Each move is forward, so a bound on the moves
 * catches a cycle (two assigns each reading the other's old value).
 */
static int s_schedule_graph(s_graph_t *g, s_result_t *res, ta_ast_t *ast, s_kernel_t *k, int debug) {
    int rc = s_fixpoint(g, ast, k), more = 0;
    while (rc == TACT_OK && (more = s_shared_work(g)) > 0) rc = s_fixpoint(g, ast, k);
    if (rc == TACT_OK && more < 0) rc = ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
    if (rc != TACT_OK) return rc;
    int nk = 0;
    for (int i = 0; i < g->n; i++) nk += s_is_kernel(&g->nodes[i]);
    int *roots = ta_malloc(sizeof *roots * (size_t)(nk + 1));
    size_t *lo = ta_malloc(sizeof *lo * (size_t)(nk + 1)), nloads = 0, loads_cap = 0;
    int *loads = NULL;
    struct s_kres *built = ta_calloc((size_t)nk + 1, sizeof *built);
    res->ks = ta_calloc((size_t)nk + 1, sizeof *res->ks);
    if (!roots || !lo || !built || !res->ks) rc = ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
    s_result_t tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.ks = built;
    msgpack_sbuffer_init(&tmp.bytes);
    for (int i = 0, q = 0; rc == TACT_OK && i < g->n; i++) {
        if (!s_is_kernel(&g->nodes[i])) continue;
        g->forced = -1;
        if (s_build(g, i, ast, k) != 0) {
            rc = ta_error_set(&g->err, TACT_EINVAL, "scheduler: kernel at node %llu changed after the fixpoint",
                              (unsigned long long)g->ids[i]);
            break;
        }
        if (debug >= 3) {
            char name[64];
            ta_ast_name(ast, name, sizeof name);
            fprintf(stderr, "tact: kernel %d %s: %d nodes, %d buffers, reduce mask %#x\n", q, name, ast->nnodes, ast->nbufs,
                    ast->reduce_mask);
            for (int a = 0; a < ast->nnodes; a++)
                fprintf(stderr, "  %3d %-8s %-8s src %d %d %d buf %d view %d%s\n", a, ta_op_name(ast->nodes[a].op),
                        ta_dtype_name(ast->nodes[a].dtype), ast->nodes[a].src[0], ast->nodes[a].src[1], ast->nodes[a].src[2],
                        ast->nodes[a].buf, ast->nodes[a].view, ast->nodes[a].arg ? " argument" : "");
        }
        roots[q] = i;
        lo[q] = nloads;
        if (s_result_add(&tmp, k) != 0 ||
            ta_grow((void **)&loads, &loads_cap, nloads + (size_t)k->nmemo + 1, sizeof *loads) != TACT_OK)
            rc = ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
        for (int m = 0; rc == TACT_OK && m < k->nmemo; m++)
            if (!(g->nodes[i].konst_copy && g->nodes[k->memo_node[m]].konst)) loads[nloads++] = k->memo_node[m]; /* (computed again there) */
        lo[++q] = nloads;
    }
    if (rc == TACT_OK) rc = s_place(g, roots, lo, loads, built, nk);
    /* order[p]: the kernel (index into tmp) that runs p-th. */
    int *order = rc == TACT_OK ? ta_malloc(sizeof *order * (size_t)(nk + 1)) : NULL;
    if (rc == TACT_OK && !order) rc = ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
    for (int q = 0; rc == TACT_OK && q < nk; q++) order[q] = q;
    long moves = 0;
    for (int p = 0; rc == TACT_OK && p < nk; p++) {
        const s_node_t *a = &g->nodes[roots[order[p]]];
        if (a->op != TA_OP_ASSIGN) continue;
        int last = -1;
        for (int q = p + 1; q < nk; q++) {
            const s_node_t *b = &g->nodes[roots[order[q]]];
            if (b->op == TA_OP_ASSIGN && b->bufref == a->bufref) break; /* a later write: a stays before it */
            if (s_reads(loads, lo, order[q], a->src[0])) last = q;
        }
        if (last < 0) continue;
        /* Kernels it would jump over must not read its new contents. */
        for (int q = p + 1; q <= last && rc == TACT_OK; q++)
            if (s_reads(loads, lo, order[q], roots[order[p]]))
                rc = ta_error_set(&g->err, TACT_EINVAL, "one realize reads both the old and the new contents of an assign's target; realize them separately");
        if (rc != TACT_OK) break;
        if (++moves > (long)nk * nk) {
            rc = ta_error_set(&g->err, TACT_EINVAL, "assigns read each other's old contents in a cycle; realize one of the values first");
            break;
        }
        int moved = order[p];
        memmove(&order[p], &order[p + 1], sizeof *order * (size_t)(last - p));
        order[last] = moved;
        p--; /* the kernel now at p has not been looked at */
    }
    /* The result in run order; buffers that outlive this realize, and
     * temporaries the planner may free. */
    if (rc == TACT_OK) {
        res->ints = tmp.ints;
        res->nints = tmp.nints;
        res->ints_cap = tmp.ints_cap;
        tmp.ints = NULL;
        res->args = tmp.args;
        res->nargs = tmp.nargs;
        res->args_cap = tmp.args_cap;
        tmp.args = NULL;
        res->bytes = tmp.bytes;
        msgpack_sbuffer_init(&tmp.bytes);
        for (int p = 0; p < nk; p++) res->ks[p] = built[order[p]];
        res->nk = nk;
        res->keep_off = res->nints;
        for (int pass = 0; pass < 2 && rc == TACT_OK; pass++) {
            if (pass) res->temp_off = res->nints;
            for (int i = 0; i < g->n && rc == TACT_OK; i++) {
                s_node_t *n = &g->nodes[i];
                if (n->is_view || n->has_buffer || !(n->rp || n->op == TA_OP_EMPTY) || n->keep == pass) continue;
                if (s_int(res, i)) rc = ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
            }
            *(pass ? &res->ntemp : &res->nkeep) = (int)(res->nints - (pass ? res->temp_off : res->keep_off));
        }
        /* Every node's bufref, to check a later subgraph of this shape
         * against (its buffer ids must pair up the same way). */
        res->ref_off = res->nints;
        res->n = g->n;
        for (int i = 0; i < g->n && rc == TACT_OK; i++)
            if (s_int(res, g->nodes[i].bufref)) rc = ta_error_set(&g->err, TACT_ENOMEM, "scheduler: out of memory");
    }
    msgpack_sbuffer_destroy(&tmp.bytes);
    ta_free(tmp.ints);
    ta_free(tmp.args);
    ta_free(built);
    ta_free(order);
    ta_free(roots);
    ta_free(lo);
    ta_free(loads);
    return rc;
}

/* Packs the KERNELS list (KERNEL records) into kb and fills the SCHEDULED
 * and temporary id lists of res for graph g: the cached ASTs with this
 * graph's buffer and fused ids. */
static int s_pack(const s_result_t *res, const s_graph_t *g, int perturb, msgpack_sbuffer *kb, uint64_t *ids, uint64_t *temps) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, kb, msgpack_sbuffer_write);
    ta_kernel_rec_t *k = ta_malloc(sizeof *k);
    uint64_t *fused = ta_malloc(sizeof *fused * TA_AST_MAX_NODES);
    int bad = !k || !fused || ta_recs_pack_header(&pk, (size_t)res->nk);
    for (int q = 0; !bad && q < res->nk; q++) {
        const struct s_kres *kr = &res->ks[q];
        const int *v = res->ints + kr->off;
        for (int i = 0; i < kr->nfused; i++) fused[i] = g->ids[v[perturb ? kr->nfused - 1 - i : i]];
        k->fused = ta_u64s(fused, (size_t)kr->nfused);
        v += kr->nfused;
        k->ast = (ta_bytes_t){(const uint8_t *)res->bytes.data + kr->ast_off, kr->ast_len};
        k->n_bufs = k->n_writes = (uint32_t)kr->nbufs;
        for (int b = 0; b < kr->nbufs; b++) k->bufs[b] = g->bufs[v[b]], k->writes[b] = (uint64_t)v[kr->nbufs + b];
        k->args = ta_u64s(res->args + kr->args_off, (size_t)kr->nargs);
        k->device = (uint64_t)kr->device;
        k->copy = (uint64_t)kr->copy;
        bad = bad || ta_rec_pack(TA_REC_KERNEL, k, &pk);
    }
    for (int i = 0; i < res->nkeep; i++) ids[i] = g->ids[res->ints[res->keep_off + (size_t)i]];
    for (int i = 0; i < res->ntemp; i++) temps[i] = g->ids[res->ints[res->temp_off + (size_t)i]];
    ta_free(k);
    ta_free(fused);
    return bad ? -1 : 0;
}

/* ------------------------------------------------------ the schedule cache */

/* A hash of a cache key (keys are hundreds of KiB). */
static uint64_t s_hash(const char *p, size_t n) {
    uint64_t h[2];
    ta_hash128(p, n, h);
    return h[0] ^ h[1];
}

static const s_result_t *s_cache_find(const s_state_t *s, ta_bytes_t nodes, ta_bytes_t targets, uint64_t hash) {
    for (int i = 0; i < s->ncached; i++) {
        const s_cached_t *c = &s->cache[i];
        if (c->hash == hash && c->nodes_len == nodes.len && c->key_len == nodes.len + targets.len &&
            memcmp(c->key, nodes.ptr, nodes.len) == 0 && memcmp(c->key + nodes.len, targets.ptr, targets.len) == 0)
            return &c->res;
    }
    return NULL;
}

/* Keeps res (taking it over) under its key, replacing the oldest entry
 * when full.  On allocation failure nothing is kept and res is freed. */
static void s_cache_put(s_state_t *s, ta_bytes_t nodes, ta_bytes_t targets, uint64_t hash, s_result_t *res) {
    uint8_t *key = ta_malloc(nodes.len + targets.len + 1);
    if (!key) {
        s_result_fini(res);
        return;
    }
    memcpy(key, nodes.ptr, nodes.len);
    memcpy(key + nodes.len, targets.ptr, targets.len);
    int slot = s->ncached < S_CACHE_ENTRIES ? s->ncached++ : s->evict;
    if (s->ncached == S_CACHE_ENTRIES && slot == s->evict) s->evict = (s->evict + 1) % S_CACHE_ENTRIES;
    s_cached_t *c = &s->cache[slot];
    ta_free(c->key);
    s_result_fini(&c->res);
    c->hash = hash;
    c->key = key;
    c->nodes_len = nodes.len;
    c->key_len = nodes.len + targets.len;
    c->res = *res;
    memset(res, 0, sizeof *res);
}

/* ------------------------------------------------------------- the actor */

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "scheduler: out of memory");
    const char *p = getenv("TACT_TEST_PERTURB");
    s->perturb = p && strcmp(p, "scheduler") == 0;
    ta_stage_local(arg, &s->local);
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    for (int i = 0; i < s->ncached; i++) {
        ta_free(s->cache[i].key);
        s_result_fini(&s->cache[i].res);
    }
    ta_pipeline_fini(&s->w);
    ta_free(s);
}

/* Reads the targets (positions): each one's base becomes a realize point
 * (unless it has a buffer) and is kept. */
static int s_targets(s_graph_t *g, const uint64_t *targets, uint32_t nt) {
    for (uint32_t i = 0; i < nt; i++) {
        uint64_t t = targets[i];
        if (t >= (uint64_t)g->n) return ta_error_set(&g->err, TACT_EPROTO, "schedule: unknown target");
        s_node_t *b = &g->nodes[g->nodes[t].base];
        if (!b->has_buffer) b->rp = 1;
        b->keep = 1; /* a target's data is its base's buffer, whoever holds the base */
        b->target = 1;
    }
    for (int i = 0; i < g->n; i++) {
        s_node_t *n = &g->nodes[i];
        if (!n->is_view && !n->has_buffer && (n->op == TA_OP_CONTIGUOUS || n->op == TA_OP_ASSIGN || n->op == TA_OP_COPY)) n->rp = 1;
        /* A copy reads a buffer: its source is realized first. */
        s_node_t *b = n->op == TA_OP_COPY && !n->is_view && !n->has_buffer ? &g->nodes[g->nodes[n->src[0]].base] : NULL;
        if (b && !b->has_buffer) b->rp = 1;
    }
    return TACT_OK;
}

static int s_schedule(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    s_graph_t g;
    memset(&g, 0, sizeof g);
    s_result_t fresh;
    memset(&fresh, 0, sizeof fresh);
    msgpack_sbuffer_init(&fresh.bytes);
    const ta_schedule_msg_t *sm = &m->as.schedule;
    uint32_t n = sm->nodes.n, nt = sm->targets.n;
    uint64_t *tv = NULL;
    /* The cache key: the nodes as they travelled (a message driven by hand
     * carries them as structs: encoded here) and the target positions. */
    msgpack_sbuffer nb;
    msgpack_sbuffer_init(&nb);
    ta_bytes_t nodes = sm->nodes.raw;
    int rc = TACT_OK;
    if (!nodes.len) {
        msgpack_packer pk;
        msgpack_packer_init(&pk, &nb, msgpack_sbuffer_write);
        int bad = ta_recs_pack_header(&pk, n);
        for (uint32_t i = 0; !bad && i < n; i++) bad = ta_rec_pack(TA_REC_NODE, (const ta_node_rec_t *)sm->nodes.vals + i, &pk);
        if (bad) rc = ta_error_set(&g.err, TACT_ENOMEM, "schedule: out of memory");
        nodes = (ta_bytes_t){(const uint8_t *)nb.data, nb.size};
    }
    if (rc == TACT_OK && sm->nodes.type != TA_REC_NODE) rc = ta_error_set(&g.err, TACT_EPROTO, "schedule: the nodes are not NODE records");
    if (rc == TACT_OK) rc = s_u64s(&sm->ids, n, &g.ids, "ids", &g.err);
    if (rc == TACT_OK) rc = s_u64s(&sm->bufs, n, &g.bufs, "bufs", &g.err);
    if (rc == TACT_OK) rc = s_u64s(&sm->targets, nt, &tv, "targets", &g.err);
    ta_bytes_t targets = {(const uint8_t *)tv, tv ? sizeof *tv * nt : 0};
    uint64_t hash = rc == TACT_OK ? s_hash((const char *)nodes.ptr, nodes.len) ^ s_hash((const char *)targets.ptr, targets.len) * 31 : 0;
    const s_result_t *res = rc == TACT_OK && s->w.schedule_cache ? s_cache_find(s, nodes, targets, hash) : NULL;
    if (res) {
        /* The same structure: only the ids are new.  Buffers must pair up
         * as they did (nodes sharing a buffer still share one). */
        g.n = (int)n;
        for (uint32_t i = 0; i < n && rc == TACT_OK; i++)
            if (g.bufs[i] != g.bufs[res->ints[res->ref_off + i]]) rc = ta_error_set(&g.err, TACT_EPROTO, "schedule: node %u: buffer id does not match its bufref", i);
        g.n = 0;
        if (rc == TACT_OK) ta_actor_count(self, TA_STAT_CACHE_HITS, 1);
    } else if (rc == TACT_OK) {
        g.ndevices = s->w.ndevices;
        g.w = &s->w;
        rc = s_decode(&g, &sm->nodes, &g.err);
        if (rc == TACT_OK) rc = s_targets(&g, tv, nt);
        ta_ast_t *ast = rc == TACT_OK ? ta_malloc(sizeof *ast) : NULL;
        s_kernel_t *k = rc == TACT_OK ? ta_calloc(1, sizeof *k) : NULL;
        if (k) k->alu_st = ta_malloc(sizeof *k->alu_st * TA_AST_MAX_NODES);
        if (rc == TACT_OK)
            rc = ast && k && k->alu_st ? s_schedule_graph(&g, &fresh, ast, k, s->local.debug)
                                       : ta_error_set(&g.err, TACT_ENOMEM, "scheduler: out of memory");
        if (k) ta_free(k->alu_st);
        ta_free(k);
        ta_free(ast);
        res = &fresh;
    }
    msgpack_sbuffer kb;
    msgpack_sbuffer_init(&kb);
    uint64_t *ids = rc == TACT_OK ? ta_malloc(sizeof *ids * ((size_t)res->nkeep + 1)) : NULL;
    uint64_t *temps = rc == TACT_OK ? ta_malloc(sizeof *temps * ((size_t)res->ntemp + 1)) : NULL;
    if (rc == TACT_OK && (!ids || !temps || s_pack(res, &g, s->perturb, &kb, ids, temps) != 0))
        rc = ta_error_set(&g.err, TACT_ENOMEM, "scheduler: out of memory");
    if (rc == TACT_OK) {
        /* SCHEDULED to the graph (which buffers will exist: the reply it
         * awaits), KERNELS with the temporaries to the planner. */
        ta_msg_t sch, ker;
        ta_msg_init(&sch, TA_MSG_SCHEDULED);
        sch.corr = m->corr;
        sch.as.scheduled.realize = sm->realize;
        sch.as.scheduled.kernels = (uint64_t)res->nk;
        sch.as.scheduled.ids = ta_u64s(ids, (size_t)res->nkeep);
        ta_msg_init(&ker, TA_MSG_KERNELS);
        ker.corr = m->corr;
        ker.as.kernels.realize = sm->realize;
        ker.as.kernels.kernels = ta_recs_raw(TA_REC_KERNEL, kb.data, kb.size, (size_t)res->nk);
        ker.as.kernels.temps = ta_u64s(temps, (size_t)res->ntemp);
        /* KERNELS first: if it cannot go, the graph hears ERROR instead of
         * a SCHEDULED whose plan would never come. */
        rc = ta_actor_send(self, s->w.planner, &ker);
        if (rc == TACT_OK) rc = ta_actor_send(self, s->w.graph, &sch);
    }
    if (rc == TACT_OK && res == &fresh && s->w.schedule_cache) s_cache_put(s, nodes, targets, hash, &fresh);
    s_result_fini(&fresh);
    msgpack_sbuffer_destroy(&kb);
    msgpack_sbuffer_destroy(&nb);
    ta_free(ids);
    ta_free(temps);
    s_graph_fini(&g);
    ta_free(tv);
    if (rc != TACT_OK) {
        /* The graph is waiting for this realize: tell it, as the executor would. */
        ta_actor_send_error(self, s->w.graph, m->corr, rc, "SCHEDULE", g.err.text[0] ? g.err.text : tact_strerror(rc));
    }
    return TACT_OK;
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type == TA_MSG_CONFIG) {
        int rc = ta_pipeline_configure(self, m, &s->w, &s->configured, TA_ROLE_SCHEDULER);
        return rc != TACT_OK ? rc : ta_pipeline_ack(self, m);
    }
    if (m->type == TA_MSG_SCHEDULE && s->configured) {
        /* CPU time, so a busy machine does not inflate it (tact_stats.schedule_ns). */
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        int rc = s_schedule(self, s, m);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        ta_actor_count(self, TA_STAT_BUSY_NS, (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec)));
        ta_actor_count(self, TA_STAT_JOBS, 1);
        return rc;
    }
    return ta_actor_fail(self, TACT_EINVAL, "scheduler: cannot handle %s", ta_msg_type_name(m->type));
}

const ta_actor_ops_t ta_scheduler_ops = {"scheduler", s_init, s_handle, s_fini, NULL};
