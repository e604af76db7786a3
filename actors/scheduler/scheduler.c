/* scheduler.c - the scheduler actor: cuts a subgraph into fused kernels (one reduce at most each), in dependency order. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ast.h"
#include "dtype.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"
#include "shape.h"

/*
 * SCHEDULE(realize, nodes, targets) from the graph builder becomes
 * SCHEDULED (which nodes get buffers) back to it and KERNELS to the planner.
 *
 * A realize point is a base that gets a buffer: every target's base, every
 * CONTIGUOUS, and whatever fusion cannot absorb (DESIGN.md §4): a reduce
 * met inside another reduce or through a view that is not the identity, a
 * base read through an expanding view (realize before expand), a base with
 * an unsafe op read through a padding mask.  Each realize point is one
 * kernel: its tree of unrealized bases, movement composed into the loads.
 */

typedef struct {
    uint64_t id;
    ta_op_t op;
    tact_dtype dtype;
    ta_shape_t shape;
    int nsrc;
    int src[3]; /* indices into the node table */
    int nargs;
    int64_t args[2 * TA_MAX_DIMS];
    int base; /* index; views only */
    int is_view;
    ta_vstack_t st;
    int has_buffer, keep, writes;
    uint64_t buf; /* the buffer holding its data (an assign's is its target's) */
    int rp;       /* realize point */
} s_node_t;

typedef struct {
    s_node_t *nodes;
    int n;
    ta_error_t err;
    int restart; /* a new realize point was found: build again */
} s_graph_t;

typedef struct {
    ta_pipeline_t *w;
} s_state_t;

/* ------------------------------------------------------------- decoding */

static int s_find(const s_graph_t *g, uint64_t id) {
    for (int i = g->n - 1; i >= 0; i--)
        if (g->nodes[i].id == id) return i;
    return -1;
}

static int s_decode(s_graph_t *g, ta_bytes_t nodes, ta_error_t *err) {
    ta_mpr_t r;
    uint32_t n, m, k;
    ta_mpr_init(&r, nodes.ptr, nodes.len);
    if (ta_mpr_array(&r, &n) || n > nodes.len) return ta_error_set(err, TACT_EPROTO, "schedule: malformed node list");
    g->nodes = ta_calloc(n ? n : 1, sizeof *g->nodes);
    if (!g->nodes) return ta_error_set(err, TACT_ENOMEM, "schedule: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        s_node_t *d = &g->nodes[i];
        uint64_t op, dtype, src, base, flags;
#define S_NEED(c)                                                                                                  \
    do {                                                                                                           \
        if (!(c)) return ta_error_set(err, TACT_EPROTO, "schedule: byte %zu: malformed node %u", ta_mpr_offset(&r), i); \
    } while (0)
        S_NEED(ta_mpr_array(&r, &m) == 0 && m == 10 && ta_mpr_u64(&r, &d->id) == 0);
        S_NEED(ta_mpr_u64(&r, &op) == 0 && op < TA_OP__COUNT && ta_mpr_u64(&r, &dtype) == 0 && ta_dtype_valid((int)dtype));
        d->op = (ta_op_t)op;
        d->dtype = (tact_dtype)dtype;
        S_NEED(ta_mpr_array(&r, &k) == 0 && k <= TA_MAX_DIMS);
        d->shape.ndim = (int)k;
        for (uint32_t j = 0; j < k; j++) S_NEED(ta_mpr_i64(&r, &d->shape.d[j]) == 0 && d->shape.d[j] >= 0);
        S_NEED(ta_mpr_array(&r, &k) == 0 && k <= 3);
        d->nsrc = (int)k;
        for (uint32_t j = 0; j < k; j++) {
            S_NEED(ta_mpr_u64(&r, &src) == 0);
            d->src[j] = s_find(g, src);
            S_NEED(d->src[j] >= 0); /* sources come first */
        }
        S_NEED(ta_mpr_array(&r, &k) == 0 && k <= 2 * TA_MAX_DIMS);
        d->nargs = (int)k;
        for (uint32_t j = 0; j < k; j++) S_NEED(ta_mpr_i64(&r, &d->args[j]) == 0);
        S_NEED(ta_mpr_u64(&r, &base) == 0);
        if (ta_mpr_nil(&r)) {
            d->is_view = 0;
            d->base = (int)i;
        } else {
            S_NEED(ta_vstack_unpack(&d->st, &r) == 0);
            d->is_view = 1;
            d->base = s_find(g, base);
            S_NEED(d->base >= 0 && !g->nodes[d->base].is_view);
        }
        S_NEED(ta_mpr_u64(&r, &flags) == 0);
        d->has_buffer = flags & 1;
        d->keep = flags >> 1 & 1;
        d->writes = flags >> 2 & 1;
        S_NEED(ta_mpr_u64(&r, &d->buf) == 0);
#undef S_NEED
        g->n = (int)i + 1;
    }
    return TACT_OK;
}

/* ------------------------------------------------------------ kernels */

/* Composes views: the result maps the kernel's index space through outer,
 * then through inner, to inner's buffer.  Returns 0, or -1 when the stack
 * would be too deep. */
static int s_compose(const ta_vstack_t *inner, const ta_vstack_t *outer, ta_vstack_t *out) {
    ta_vstack_t r = *inner;
    for (int i = 0; i < outer->nviews; i++) {
        const ta_view_t *w = &outer->views[i];
        if (w->contiguous) {
            if (ta_vstack_reshape(&r, w->ndim, w->shape) != 0) return -1;
        } else {
            if (r.nviews >= TA_MAX_VIEWS) return -1;
            r.views[r.nviews++] = *w;
        }
    }
    *out = r;
    return 0;
}

static int s_masked(const ta_vstack_t *st) {
    for (int i = 0; i < st->nviews; i++)
        if (st->views[i].has_mask) return 1;
    return 0;
}

/* Long chains are cut into kernels of bounded depth: the walk recurses, and
 * a kernel past a few hundred fused ops gains nothing. */
enum { S_MAX_DEPTH = 96 };

typedef struct {
    s_graph_t *g;
    ta_ast_t *ast;
    int root;
    int reduce;  /* the node index of the kernel's reduce, -1 if none */
    uint64_t bufs[TA_AST_MAX_BUFS];
    int buf_writes[TA_AST_MAX_BUFS];
    /* Loads and constants already emitted, to share them. */
    int memo_node[TA_AST_MAX_NODES], memo_ast[TA_AST_MAX_NODES], memo_view[TA_AST_MAX_NODES], memo_pre[TA_AST_MAX_NODES], nmemo;
    /* ALU nodes already emitted, by node and the view they were read through
     * (a node shared by two consumers is computed once per kernel). */
    int alu_node[TA_AST_MAX_NODES], alu_ast[TA_AST_MAX_NODES], alu_pre[TA_AST_MAX_NODES], nalu;
    int depth;                /* of s_emit's recursion */
    int path[S_MAX_DEPTH + 2]; /* the nodes being emitted, outermost first */
    ta_vstack_t *alu_st; /* TA_AST_MAX_NODES entries */
} s_kernel_t;

/* Makes node a realize point and asks for the kernels to be built again.
 * A node that already is one (or a view, which cannot be) would only loop:
 * that is an error instead. */
static int s_force(s_kernel_t *k, int node) {
    s_node_t *n = &k->g->nodes[node];
    if (n->rp || n->is_view || n->has_buffer) {
        ta_error_set(&k->g->err, TACT_EINVAL, "cannot split the kernel at node %llu", (unsigned long long)n->id);
        return -1;
    }
    n->rp = 1;
    k->g->restart = 1;
    return -1;
}

static int s_buf(s_kernel_t *k, int node) {
    s_node_t *n = &k->g->nodes[node];
    for (int b = 0; b < k->ast->nbufs; b++)
        if (k->bufs[b] == n->buf) return b;
    if (k->ast->nbufs >= TA_AST_MAX_BUFS) return -1;
    int b = k->ast->nbufs++;
    k->bufs[b] = n->buf;
    k->buf_writes[b] = n->writes;
    k->ast->buf_dtype[b] = n->dtype;
    k->ast->buf_size[b] = ta_shape_numel(&n->shape);
    return b;
}

static int s_add(s_kernel_t *k, ta_ast_node_t node) {
    int i = ta_ast_add(k->ast, node);
    if (i < 0) ta_error_set(&k->g->err, TACT_EINVAL, "kernel too large (more than %d nodes)", TA_AST_MAX_NODES);
    return i;
}

/*
 * Emits node i read through st (from the kernel's current index space to
 * node i's shape); pre is set inside the reduce.  Returns the AST index, or
 * -1 (with g->restart set when a new realize point was found).
 */
static int s_emit_at(s_kernel_t *k, int i, const ta_vstack_t *st, int pre);


static int s_emit(s_kernel_t *k, int i, const ta_vstack_t *st, int pre) {
    s_node_t *n = &k->g->nodes[i];
    if (k->depth >= S_MAX_DEPTH && !n->is_view && !n->has_buffer && !n->rp && n->op != TA_OP_CONST && n->op != TA_OP_EMPTY)
        return s_force(k, i);
    k->path[k->depth++] = i;
    int r = s_emit_at(k, i, st, pre);
    k->depth--;
    return r;
}

static int s_emit_at(s_kernel_t *k, int i, const ta_vstack_t *st, int pre) {
    s_graph_t *g = k->g;
    s_node_t *n = &g->nodes[i];
    if (n->is_view) {
        ta_vstack_t c;
        if (s_compose(&n->st, st, &c) != 0) {
            /* Too deep to read through: the consumer that reads this view
             * becomes a realize point, and is then read through a fresh view. */
            for (int d = k->depth - 2; d >= 0; d--)
                if (!k->g->nodes[k->path[d]].is_view) return s_force(k, k->path[d]);
            return ta_error_set(&g->err, TACT_EINVAL, "view stack too deep"), -1;
        }
        return s_emit(k, n->base, &c, pre);
    }
    int64_t space = ta_vstack_numel(st);
    int load = n->has_buffer || (n->rp && i != k->root) || n->op == TA_OP_EMPTY;
    if (!load && n->op != TA_OP_CONST && space > ta_shape_numel(&n->shape) && i != k->root)
        return s_force(k, i); /* realize before expand */
    if (load || n->op == TA_OP_CONST) {
        int v = n->op == TA_OP_CONST && !load && !s_masked(st) ? -1 : ta_ast_view(k->ast, st);
        if (v < 0 && !(n->op == TA_OP_CONST && !load)) return ta_error_set(&g->err, TACT_EINVAL, "kernel has too many views"), -1;
        for (int m = 0; m < k->nmemo; m++)
            if (k->memo_node[m] == i && k->memo_view[m] == v && k->memo_pre[m] == pre) return k->memo_ast[m];
        ta_ast_node_t a;
        memset(&a, 0, sizeof a);
        a.dtype = n->dtype;
        a.view = (int16_t)v;
        if (load) {
            a.op = TA_OP_LOAD;
            int b = s_buf(k, i);
            if (b < 0) return ta_error_set(&g->err, TACT_EINVAL, "kernel reads too many buffers"), -1;
            a.buf = (int16_t)b;
        } else {
            a.op = TA_OP_CONST;
            a.value = ta_value_from_bits(n->dtype, n->nargs ? (uint64_t)n->args[0] : 0);
        }
        int idx = s_add(k, a);
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
        k->reduce = i;
        s_node_t *src = &g->nodes[n->src[0]];
        ta_vstack_t full;
        ta_vstack_init(&full, src->shape.ndim, src->shape.d);
        int s0 = s_emit(k, n->src[0], &full, 1);
        if (s0 < 0) return -1;
        ta_ast_node_t a = {n->op, n->dtype, 1, {(int16_t)s0, 0, 0}, 0, -1, {0}};
        return s_add(k, a);
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
    if (i != k->root && k->ast->nfused < TA_AST_MAX_NODES) k->ast->fused[k->ast->nfused++] = n->id;
    int idx = s_add(k, a);
    if (idx >= 0 && k->nalu < TA_AST_MAX_NODES) {
        k->alu_node[k->nalu] = i;
        k->alu_pre[k->nalu] = pre;
        k->alu_st[k->nalu] = *st;
        k->alu_ast[k->nalu++] = idx;
    }
    return idx;
}

/* True if the kernel just built loaded node i. */
static int s_reads(const s_kernel_t *k, int i) {
    for (int m = 0; m < k->nmemo; m++)
        if (k->memo_node[m] == i) return 1;
    return 0;
}

/* Builds the kernel computing realize point root into ast. */
static int s_build(s_graph_t *g, int root, ta_ast_t *ast, s_kernel_t *k) {
    s_node_t *n = &g->nodes[root];
    ta_vstack_t *alu_st = k->alu_st;
    memset(k, 0, sizeof *k);
    k->alu_st = alu_st;
    k->g = g;
    k->ast = ast;
    k->root = root;
    k->reduce = -1;
    /* Find the kernel's shape: a reduce reachable without passing a
     * realized base sets the full shape; otherwise the output shape. */
    ta_ast_init(ast, n->shape.ndim, n->shape.d, 0);
    ast->nbufs = 1;
    ast->buf_dtype[0] = n->dtype;
    ast->buf_size[0] = ta_shape_numel(&n->shape);
    k->bufs[0] = n->buf;
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
    ta_ast_node_t st = {TA_OP_STORE, n->dtype, 1, {(int16_t)val, 0, 0}, 0, (int16_t)v, {0}};
    if (s_add(k, st) < 0) return -1;
    if (ast->nfused < TA_AST_MAX_NODES) ast->fused[ast->nfused++] = n->id;
    return ta_ast_check(ast, &g->err) == TACT_OK ? 0 : -1;
}

/* ------------------------------------------------------------- the actor */

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "scheduler: out of memory");
    s->w = arg;
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) { ta_free(ta_actor_state(self)); }

static int s_schedule(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    s_graph_t g;
    memset(&g, 0, sizeof g);
    int rc = s_decode(&g, m->as.schedule.nodes, &g.err);
    ta_mpr_t r;
    uint32_t nt;
    uint64_t id;
    ta_mpr_init(&r, m->as.schedule.targets.ptr, m->as.schedule.targets.len);
    if (rc == TACT_OK && ta_mpr_array(&r, &nt)) rc = ta_error_set(&g.err, TACT_EPROTO, "schedule: malformed targets");
    for (uint32_t i = 0; rc == TACT_OK && i < nt; i++) {
        int t;
        if (ta_mpr_u64(&r, &id) || (t = s_find(&g, id)) < 0) {
            rc = ta_error_set(&g.err, TACT_EPROTO, "schedule: unknown target");
            break;
        }
        s_node_t *b = &g.nodes[g.nodes[t].base];
        if (!b->has_buffer) b->rp = 1;
        b->keep = 1; /* a target's data is its base's buffer, whoever holds the base */
    }
    for (int i = 0; rc == TACT_OK && i < g.n; i++)
        if (!g.nodes[i].is_view && !g.nodes[i].has_buffer &&
            (g.nodes[i].op == TA_OP_CONTIGUOUS || g.nodes[i].op == TA_OP_EMPTY || g.nodes[i].op == TA_OP_ASSIGN))
            g.nodes[i].rp = g.nodes[i].rp || g.nodes[i].op == TA_OP_CONTIGUOUS || g.nodes[i].op == TA_OP_ASSIGN;
    /* Build every kernel; a newly found realize point restarts the pass. */
    ta_ast_t *asts = NULL;
    s_kernel_t *ks = NULL;
    int *roots = NULL, nk = 0;
    if (rc == TACT_OK && !(asts = ta_malloc(sizeof *asts * (size_t)(g.n ? g.n : 1))) ) rc = ta_error_set(&g.err, TACT_ENOMEM, "scheduler: out of memory");
    if (rc == TACT_OK && (!(ks = ta_calloc(1, sizeof *ks)) || !(ks->alu_st = ta_malloc(sizeof *ks->alu_st * TA_AST_MAX_NODES))))
        rc = ta_error_set(&g.err, TACT_ENOMEM, "scheduler: out of memory");
    if (rc == TACT_OK && !(roots = ta_malloc(sizeof *roots * (size_t)(g.n ? g.n : 1)))) rc = ta_error_set(&g.err, TACT_ENOMEM, "scheduler: out of memory");
    for (int pass = 0; rc == TACT_OK && pass <= g.n; pass++) {
        g.restart = 0;
        nk = 0;
        for (int i = 0; i < g.n && !g.restart; i++) {
            s_node_t *n = &g.nodes[i];
            if (!n->rp || n->has_buffer || n->is_view || n->op == TA_OP_EMPTY) continue;
            if (s_build(&g, i, &asts[nk], ks) != 0) {
                if (!g.restart) rc = g.err.code ? g.err.code : TACT_EINVAL;
                break;
            }
            roots[nk++] = i;
        }
        if (!g.restart) break;
    }
    if (rc == TACT_OK && g.restart)
        rc = ta_error_set(&g.err, TACT_EINVAL, "schedule did not converge (a view stack too deep to fuse?); contiguous() on an intermediate helps");
    /* An assign overwrites its target's buffer: every kernel that reads the
     * target's old contents goes first (DESIGN.md trap 6), and assigns to one
     * buffer keep their order.  Each move is forward, so a bound on the moves
     * catches a cycle (two assigns each reading the other's old value). */
    int moves = 0;
    for (int p = 0; rc == TACT_OK && p < nk; p++) {
        const s_node_t *a = &g.nodes[roots[p]];
        if (a->op != TA_OP_ASSIGN) continue;
        int last = -1;
        for (int q = p + 1; q < nk; q++) {
            const s_node_t *b = &g.nodes[roots[q]];
            if (b->op == TA_OP_ASSIGN && b->buf == a->buf) break; /* a later write: a stays before it */
            if (s_build(&g, roots[q], &asts[q], ks) == 0 && s_reads(ks, a->src[0])) last = q;
        }
        if (last < 0) continue;
        /* Kernels it would jump over must not read its new contents. */
        for (int q = p + 1; q <= last && rc == TACT_OK; q++)
            if (s_build(&g, roots[q], &asts[q], ks) == 0 && s_reads(ks, roots[p]))
                rc = ta_error_set(&g.err, TACT_EINVAL, "one realize reads both the old and the new contents of an assign's target; realize them separately");
        if (rc != TACT_OK) break;
        if (++moves > nk * nk) {
            rc = ta_error_set(&g.err, TACT_EINVAL, "assigns read each other's old contents in a cycle; realize one of the values first");
            break;
        }
        int moved = roots[p];
        memmove(&roots[p], &roots[p + 1], sizeof *roots * (size_t)(last - p));
        roots[last] = moved;
        p--; /* the kernel now at p has not been looked at */
    }
    /* Kernels to the planner: [[ast, [buffer ids], [writes flags]], ...]. */
    msgpack_sbuffer kb, ids, temps;
    msgpack_sbuffer_init(&kb);
    msgpack_sbuffer_init(&ids);
    msgpack_sbuffer_init(&temps);
    if (rc == TACT_OK) {
        msgpack_packer pk, pi, pt;
        msgpack_packer_init(&pk, &kb, msgpack_sbuffer_write);
        msgpack_packer_init(&pi, &ids, msgpack_sbuffer_write);
        msgpack_packer_init(&pt, &temps, msgpack_sbuffer_write);
        int bad = msgpack_pack_array(&pk, (size_t)nk);
        for (int q = 0; !bad && q < nk; q++) {
            /* Rebuilding gives the same AST and the buffer ids alongside it. */
            s_build(&g, roots[q], &asts[q], ks);
            if (s->w->debug >= 3) {
                char name[64];
                ta_ast_name(&asts[q], name, sizeof name);
                fprintf(stderr, "tact: kernel %d %s: %d nodes, %d buffers, reduce mask %#x\n", q, name, asts[q].nnodes,
                        asts[q].nbufs, asts[q].reduce_mask);
                for (int a = 0; a < asts[q].nnodes; a++)
                    fprintf(stderr, "  %3d %-8s %-8s src %d %d %d buf %d view %d\n", a, ta_op_name(asts[q].nodes[a].op),
                            ta_dtype_name(asts[q].nodes[a].dtype), asts[q].nodes[a].src[0], asts[q].nodes[a].src[1],
                            asts[q].nodes[a].src[2], asts[q].nodes[a].buf, asts[q].nodes[a].view);
            }
            bad = msgpack_pack_array(&pk, 3) || ta_ast_pack(&asts[q], &pk) || msgpack_pack_array(&pk, (size_t)asts[q].nbufs);
            for (int b = 0; !bad && b < asts[q].nbufs; b++) bad = msgpack_pack_uint64(&pk, ks->bufs[b]);
            bad = bad || msgpack_pack_array(&pk, (size_t)asts[q].nbufs);
            for (int b = 0; !bad && b < asts[q].nbufs; b++) bad = msgpack_pack_uint8(&pk, (uint8_t)ks->buf_writes[b]);
        }
        /* Buffers that outlive this realize, and temporaries the planner may free. */
        int nkeep = 0, ntemp = 0;
        for (int i = 0; i < g.n; i++) {
            s_node_t *n = &g.nodes[i];
            if (n->is_view || n->has_buffer || !(n->rp || n->op == TA_OP_EMPTY)) continue;
            if (n->keep) nkeep++;
            else ntemp++;
        }
        bad = bad || msgpack_pack_array(&pi, (size_t)nkeep) || msgpack_pack_array(&pt, (size_t)ntemp);
        for (int i = 0; !bad && i < g.n; i++) {
            s_node_t *n = &g.nodes[i];
            if (n->is_view || n->has_buffer || !(n->rp || n->op == TA_OP_EMPTY)) continue;
            bad = msgpack_pack_uint64(n->keep ? &pi : &pt, n->id);
        }
        if (bad) rc = ta_error_set(&g.err, TACT_ENOMEM, "scheduler: out of memory");
    }
    if (rc == TACT_OK) {
        /* SCHEDULED to the graph (which buffers will exist), then KERNELS and
         * the same SCHEDULED to the planner (which are temporaries). */
        ta_msg_t sch, ker;
        ta_msg_init(&sch, TA_MSG_SCHEDULED);
        sch.corr = m->corr;
        sch.as.scheduled.realize = m->as.schedule.realize;
        sch.as.scheduled.kernels = (uint64_t)nk;
        sch.as.scheduled.ids.ptr = (const uint8_t *)ids.data;
        sch.as.scheduled.ids.len = ids.size;
        sch.as.scheduled.temps.ptr = (const uint8_t *)temps.data;
        sch.as.scheduled.temps.len = temps.size;
        ta_msg_t again = sch;
        ta_msg_init(&ker, TA_MSG_KERNELS);
        ker.corr = m->corr;
        ker.as.kernels.realize = m->as.schedule.realize;
        ker.as.kernels.barrier = m->as.schedule.barrier;
        ker.as.kernels.kernels.ptr = (const uint8_t *)kb.data;
        ker.as.kernels.kernels.len = kb.size;
        rc = ta_actor_send(self, s->w->graph, &sch);
        if (rc == TACT_OK) rc = ta_actor_send(self, s->w->planner, &ker);
        if (rc == TACT_OK) rc = ta_actor_send(self, s->w->planner, &again);
    }
    msgpack_sbuffer_destroy(&kb);
    msgpack_sbuffer_destroy(&ids);
    msgpack_sbuffer_destroy(&temps);
    ta_free(asts);
    if (ks) ta_free(ks->alu_st);
    ta_free(ks);
    ta_free(roots);
    ta_free(g.nodes);
    if (rc != TACT_OK) {
        /* The graph is waiting for this realize: tell it, as the executor would. */
        ta_actor_send_error(self, s->w->graph, m->corr, rc, "SCHEDULE", g.err.text[0] ? g.err.text : tact_strerror(rc));
    }
    return TACT_OK;
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type == TA_MSG_SCHEDULE) return s_schedule(self, s, m);
    return ta_actor_fail(self, TACT_EINVAL, "scheduler: cannot handle %s", ta_msg_type_name(m->type));
}

const ta_actor_ops_t ta_scheduler_ops = {"scheduler", s_init, s_handle, s_fini, NULL};
