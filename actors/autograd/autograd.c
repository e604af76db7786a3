/* autograd.c - the gradient engine actor: builds the gradient graph of a loss from per-primitive rules. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "map.h"
#include "mem.h"
#include "ops.h"
#include "pipeline.h"
#include "shape.h"

/*
 * Messages: BACKWARD from the graph builder (its ordered input) carries the
 * forward records a backward needs (sources before users): every node on a
 * path from the loss through differentiable ops (NODE flags bit 0, set by
 * the client when an op's result requires a gradient), and the sources
 * those nodes read, without their own sources.  The engine walks them from
 * the loss back, applies each op's rule, sums the contributions a node
 * gets, and answers GRADS: the gradient ops as NODE records (sources before
 * users, ids from 2^61 up in its own namespace, and for each target that
 * got a gradient, its last op under the id the client chose for it) and
 * those ids.  The graph builder adds the ops as a second producer.
 *
 * The rules are tinygrad's (function.py), on tact's primitives; composite
 * ops get gradients by decomposition.  DESIGN.md §4 trap 8: the reduce max
 * splits the gradient equally between ties, MAX (maximum) averages on ties.
 * Comparisons, integer and bitwise ops, BITCAST and ASSIGN pass none.
 */

enum { S_FLAG_GRAD = 1 };

typedef struct {
    uint64_t id;
    tact_dtype dt;
    ta_shape_t sh;
} a_val_t;

typedef struct {
    a_val_t v;
    ta_op_t op;
    int nsrc;
    uint64_t src[3];
    int nargs;
    int64_t args[2 * TA_MAX_DIMS];
    int grad;      /* flags bit 0: differentiable */
    int target;    /* the gradient is wanted */
    int dev;       /* its device (NODE.device): its gradient is computed there */
    a_val_t g;     /* the gradient so far (id 0: none) */
    /* When g is only a zero pad of another value (a shrink's gradient)
     * along padded_axes (a bit per axis): that value. */
    a_val_t unpadded;
    uint32_t padded_axes;
} a_node_t;

typedef struct {
    ta_pipeline_t w;
    int configured;
    uint64_t next_id; /* the engine's namespace: 2^61 up, never reused */
    /* One backward at a time. */
    a_node_t *nodes;
    size_t n, cap;
    ta_map_t pos; /* id -> index in nodes */
    msgpack_sbuffer out;
    msgpack_packer pk;
    size_t nout;
    int rc;
    ta_error_t err;
    /* A backward's forward records may come in several parts (BACKWARD
     * with more = 1) and its answer go in several GRADS (more = 1, the
     * graph asking for the next with next = 1), each within part_bytes. */
    int receiving;     /* parts came; the last is still to come */
    uint64_t nparts;   /* parts of this backward so far */
    size_t *off;       /* each emitted record's end in out */
    size_t off_cap;
    size_t sent;       /* records of out already answered */
    uint64_t *got;     /* the ids that got a gradient (the last GRADS carries them) */
    size_t ngot;
    size_t part_bytes;
    int dev; /* the device of the ops emitted now: the forward node's whose rule runs */
} a_state_t;

/* ------------------------------------------------------------- emitting */

/* Appends one op record; returns its value, or one with id 0 once
 * anything failed (a->rc says what). */
static a_val_t s_emit_id(a_state_t *a, uint64_t id, ta_op_t op, tact_dtype dt, const ta_shape_t *sh, int nsrc, const a_val_t *src,
                         int nargs, const int64_t *args) {
    a_val_t r = {0, dt, *sh};
    if (a->rc) return r;
    for (int i = 0; i < nsrc; i++)
        if (!src[i].id) return r;
    ta_node_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.id = id ? id : a->next_id++;
    rec.op = (uint64_t)op;
    rec.dtype = (uint64_t)dt;
    rec.n_shape = (uint32_t)sh->ndim;
    memcpy(rec.shape, sh->d, sizeof *rec.shape * (size_t)sh->ndim);
    rec.n_srcs = (uint32_t)nsrc;
    for (int i = 0; i < nsrc; i++) rec.srcs[i] = src[i].id;
    rec.n_args = (uint32_t)nargs;
    if (nargs) memcpy(rec.args, args, sizeof *args * (size_t)nargs);
    rec.device = (uint64_t)a->dev;
    if (ta_rec_pack(TA_REC_NODE, &rec, &a->pk) != 0 || ta_grow((void **)&a->off, &a->off_cap, a->nout + 1, sizeof *a->off) != TACT_OK) {
        a->rc = ta_error_set(&a->err, TACT_ENOMEM, "autograd: out of memory");
        return r;
    }
    a->off[a->nout++] = a->out.size;
    r.id = rec.id;
    return r;
}

static a_val_t s_emit(a_state_t *a, ta_op_t op, tact_dtype dt, const ta_shape_t *sh, int nsrc, const a_val_t *src, int nargs,
                      const int64_t *args) {
    return s_emit_id(a, 0, op, dt, sh, nsrc, src, nargs, args);
}

static a_val_t s_un(a_state_t *a, ta_op_t op, a_val_t x) { return s_emit(a, op, x.dt, &x.sh, 1, &x, 0, NULL); }
static a_val_t s_cast(a_state_t *a, a_val_t x, tact_dtype dt) { return x.dt == dt ? x : s_emit(a, TA_OP_CAST, dt, &x.sh, 1, &x, 0, NULL); }
static a_val_t s_bin(a_state_t *a, ta_op_t op, a_val_t x, a_val_t y) {
    tact_dtype dt = op == TA_OP_CMPLT || op == TA_OP_CMPNE ? TACT_BOOL : x.dt;
    return s_emit(a, op, dt, &x.sh, 2, (a_val_t[]){x, y}, 0, NULL);
}
static a_val_t s_add(a_state_t *a, a_val_t x, a_val_t y) { return s_bin(a, TA_OP_ADD, x, y); }
static a_val_t s_mul(a_state_t *a, a_val_t x, a_val_t y) { return s_bin(a, TA_OP_MUL, x, y); }
static a_val_t s_where(a_state_t *a, a_val_t c, a_val_t x, a_val_t y) {
    return s_emit(a, TA_OP_WHERE, x.dt, &x.sh, 3, (a_val_t[]){c, x, y}, 0, NULL);
}
static a_val_t s_reshape(a_state_t *a, a_val_t x, const ta_shape_t *sh) { return s_emit(a, TA_OP_RESHAPE, x.dt, sh, 1, &x, 0, NULL); }
static a_val_t s_expand(a_state_t *a, a_val_t x, const ta_shape_t *sh) {
    return ta_shape_equal(&x.sh, sh) ? x : s_emit(a, TA_OP_EXPAND, x.dt, sh, 1, &x, 0, NULL);
}

/* v as dtype dt, of shape sh: one CONST record (every element is v). */
static a_val_t s_const(a_state_t *a, double v, tact_dtype dt, const ta_shape_t *sh) {
    int64_t bits = (int64_t)ta_value_bits(dt, ta_value_from_double(dt, v));
    return s_emit(a, TA_OP_CONST, dt, sh, 0, NULL, 1, &bits);
}
static a_val_t s_k(a_state_t *a, double v, a_val_t like) { return s_const(a, v, like.dt, &like.sh); }

/* The sum of x over the dims in mask, keeping them as 1; 16-bit floats
 * accumulate in float32 (DESIGN.md §4 trap 5), as the client's sum does. */
static a_val_t s_sum(a_state_t *a, a_val_t x, uint32_t mask) {
    if (!mask) return x;
    tact_dtype acc = x.dt == TACT_FLOAT16 || x.dt == TACT_BFLOAT16 ? TACT_FLOAT32 : x.dt;
    ta_shape_t sh = x.sh;
    for (int k = 0; k < sh.ndim; k++)
        if (mask >> k & 1) sh.d[k] = 1;
    int64_t arg = mask;
    a_val_t c = s_cast(a, x, acc);
    return s_cast(a, s_emit(a, TA_OP_SUM, acc, &sh, 1, &c, 1, &arg), x.dt);
}

/* ---------------------------------------------------------------- rules */

/* Adds contribution c to the gradient of source s (when s wants one). */
static void s_give(a_state_t *a, uint64_t s, a_val_t c) {
    uint64_t i;
    if (a->rc || !c.id || !ta_map_get(&a->pos, s, &i)) return;
    a_node_t *d = &a->nodes[i];
    if (!d->grad && !d->target) return;
    if (!ta_dtype_is_float(d->v.dt)) return;
    if (!ta_shape_equal(&c.sh, &d->v.sh) || c.dt != d->v.dt) {
        a->rc = ta_error_set(&a->err, TACT_EINVAL, "autograd: the gradient for %" PRIu64 " has the wrong shape or dtype", s);
        return;
    }
    d->g = d->g.id ? s_add(a, d->g, c) : c;
    d->padded_axes = 0;
}

static a_val_t s_src(a_state_t *a, const a_node_t *n, int i) {
    uint64_t k = 0;
    ta_map_get(&a->pos, n->src[i], &k);
    return a->nodes[k].v;
}

/* The gradient of a STRIDE's source: each output element back in the place
 * it was read from, zeros between (a pad of an inserted dim, then a
 * reshape and a shrink), flipped where the step was negative. */
static a_val_t s_stride_back(a_state_t *a, const a_node_t *n, a_val_t g, a_val_t x) {
    int64_t flips[TA_MAX_DIMS];
    int flip = 0;
    for (int k = 0; k < x.sh.ndim; k++) {
        int64_t m = n->args[k], am = m < 0 ? -m : m;
        flips[k] = m < 0 ? -1 : 1;
        flip |= m < 0;
        if (am == 1) continue;
        if (g.sh.ndim >= TA_MAX_DIMS || k >= g.sh.ndim) {
            a->rc = ta_error_set(&a->err, TACT_ESHAPE, "autograd: the gradient of a step over %d dims", g.sh.ndim);
            return g;
        }
        ta_shape_t in = g.sh, padded, wide = g.sh;
        memmove(&in.d[k + 2], &in.d[k + 1], sizeof *in.d * (size_t)(in.ndim - k - 1));
        in.d[k + 1] = 1;
        in.ndim++;
        padded = in;
        padded.d[k + 1] = am;
        int64_t pads[2 * TA_MAX_DIMS] = {0}, ranges[2 * TA_MAX_DIMS];
        pads[2 * (k + 1) + 1] = am - 1;
        wide.d[k] *= am;
        for (int j = 0; j < wide.ndim; j++) ranges[2 * j] = 0, ranges[2 * j + 1] = wide.d[j];
        ranges[2 * k + 1] = x.sh.d[k];
        ta_shape_t cut = wide;
        cut.d[k] = x.sh.d[k];
        g = s_reshape(a, g, &in);
        g = s_emit(a, TA_OP_PAD, g.dt, &padded, 1, &g, 2 * padded.ndim, pads);
        g = s_reshape(a, g, &wide);
        g = s_emit(a, TA_OP_SHRINK, g.dt, &cut, 1, &g, 2 * cut.ndim, ranges);
    }
    return flip ? s_emit(a, TA_OP_STRIDE, g.dt, &g.sh, 1, &g, g.sh.ndim, flips) : g;
}

/* Gives node n's gradient to its sources by n's rule. */
static void s_rule(a_state_t *a, const a_node_t *n) {
    a->dev = n->dev;
    a_val_t g = n->g, x = n->nsrc > 0 ? s_src(a, n, 0) : g, y = n->nsrc > 1 ? s_src(a, n, 1) : g, out = n->v;
    int64_t args[2 * TA_MAX_DIMS];
    switch (n->op) {
    case TA_OP_NEG: s_give(a, n->src[0], s_un(a, TA_OP_NEG, g)); break;
    case TA_OP_EXP2: s_give(a, n->src[0], s_mul(a, s_mul(a, g, out), s_k(a, M_LN2, g))); break;
    case TA_OP_LOG2: s_give(a, n->src[0], s_mul(a, g, s_un(a, TA_OP_RECIP, s_mul(a, x, s_k(a, M_LN2, x))))); break;
    case TA_OP_SIN: /* cos x = sin(pi/2 - x) */
        s_give(a, n->src[0], s_mul(a, g, s_un(a, TA_OP_SIN, s_add(a, s_k(a, M_PI / 2, x), s_un(a, TA_OP_NEG, x)))));
        break;
    case TA_OP_SQRT: s_give(a, n->src[0], s_mul(a, g, s_un(a, TA_OP_RECIP, s_mul(a, out, s_k(a, 2, out))))); break;
    case TA_OP_RECIP: s_give(a, n->src[0], s_un(a, TA_OP_NEG, s_mul(a, s_mul(a, g, out), out))); break;
    case TA_OP_CAST:
        if (ta_dtype_is_float(x.dt)) s_give(a, n->src[0], s_cast(a, g, x.dt));
        break;
    case TA_OP_ADD:
        s_give(a, n->src[0], g);
        s_give(a, n->src[1], g);
        break;
    case TA_OP_MUL:
        s_give(a, n->src[0], s_mul(a, y, g));
        s_give(a, n->src[1], s_mul(a, x, g));
        break;
    case TA_OP_MULACC:
        s_give(a, n->src[0], s_mul(a, y, g));
        s_give(a, n->src[1], s_mul(a, x, g));
        s_give(a, n->src[2], g);
        break;
    case TA_OP_MAX: { /* the larger side takes it all; a tie halves it */
        a_val_t zero = s_k(a, 0, g), half = s_mul(a, g, s_k(a, 0.5, g)), differ = s_bin(a, TA_OP_CMPNE, x, y);
        a_val_t tie = s_where(a, differ, zero, half);
        s_give(a, n->src[0], s_where(a, s_bin(a, TA_OP_CMPLT, y, x), g, tie));
        s_give(a, n->src[1], s_where(a, s_bin(a, TA_OP_CMPLT, x, y), g, tie));
        break;
    }
    case TA_OP_WHERE: {
        a_val_t zero = s_k(a, 0, g);
        s_give(a, n->src[1], s_where(a, x, g, zero));
        s_give(a, n->src[2], s_where(a, x, zero, g));
        break;
    }
    case TA_OP_SUM: s_give(a, n->src[0], s_expand(a, g, &x.sh)); break;
    case TA_OP_RMAX: { /* split equally between the places that hold the max */
        a_val_t at = s_where(a, s_bin(a, TA_OP_CMPNE, x, s_expand(a, out, &x.sh)), s_const(a, 0, TACT_FLOAT32, &x.sh),
                             s_const(a, 1, TACT_FLOAT32, &x.sh));
        a_val_t count = s_expand(a, s_sum(a, at, (uint32_t)n->args[0]), &x.sh);
        a_val_t share = s_cast(a, s_mul(a, at, s_un(a, TA_OP_RECIP, count)), g.dt);
        s_give(a, n->src[0], s_mul(a, share, s_expand(a, g, &x.sh)));
        break;
    }
    case TA_OP_RESHAPE: s_give(a, n->src[0], s_reshape(a, g, &x.sh)); break;
    case TA_OP_PERMUTE:
        for (int k = 0; k < n->nargs; k++) args[n->args[k]] = k;
        s_give(a, n->src[0], s_emit(a, TA_OP_PERMUTE, g.dt, &x.sh, 1, &g, n->nargs, args));
        break;
    case TA_OP_EXPAND: {
        uint32_t mask = 0;
        for (int k = 0; k < x.sh.ndim; k++)
            if (x.sh.d[k] != out.sh.d[k]) mask |= 1u << k;
        /* A sum over every padded axis of a zero pad is the sum of what
         * was padded: a shrink of an expand (each device's part of a
         * replicated tensor that met a split one) sums only that part,
         * not its zeros too. */
        int unpad = n->padded_axes && (n->padded_axes & ~mask) == 0;
        s_give(a, n->src[0], s_sum(a, unpad ? n->unpadded : g, mask));
        break;
    }
    case TA_OP_PAD:
        for (int k = 0; k < x.sh.ndim; k++) args[2 * k] = n->args[2 * k], args[2 * k + 1] = n->args[2 * k] + x.sh.d[k];
        s_give(a, n->src[0], s_emit(a, TA_OP_SHRINK, g.dt, &x.sh, 1, &g, 2 * x.sh.ndim, args));
        break;
    case TA_OP_SHRINK: {
        uint32_t padded = 0;
        for (int k = 0; k < x.sh.ndim; k++) {
            args[2 * k] = n->args[2 * k], args[2 * k + 1] = x.sh.d[k] - n->args[2 * k + 1];
            if (args[2 * k] || args[2 * k + 1]) padded |= 1u << k;
        }
        uint64_t i = 0;
        int first = ta_map_get(&a->pos, n->src[0], &i) && !a->nodes[i].g.id;
        s_give(a, n->src[0], s_emit(a, TA_OP_PAD, g.dt, &x.sh, 1, &g, 2 * x.sh.ndim, args));
        if (first && !a->rc && a->nodes[i].g.id) a->nodes[i].unpadded = g, a->nodes[i].padded_axes = padded;
        break;
    }
    case TA_OP_STRIDE: s_give(a, n->src[0], s_stride_back(a, n, g, x)); break;
    case TA_OP_CONTIGUOUS: s_give(a, n->src[0], g); break;
    case TA_OP_COPY: { /* the gradient goes back to the source's device */
        uint64_t k = 0;
        ta_map_get(&a->pos, n->src[0], &k);
        a->dev = a->nodes[k].dev;
        s_give(a, n->src[0], s_un(a, TA_OP_COPY, g));
        break;
    }
    default: break; /* comparisons, integer and bitwise ops, BITCAST, ASSIGN, leaves */
    }
}

/* ------------------------------------------------------------- backward */

/* Reads the forward records into a->nodes, checking what the rules rely on:
 * unique ids, sources listed before their users, a loss among them. */
static int s_read_nodes(a_state_t *a, const ta_backward_msg_t *b) {
    ta_recs_it_t it;
    ta_node_rec_t r;
    if (b->nodes.n && b->nodes.type != TA_REC_NODE) return ta_error_set(&a->err, TACT_EPROTO, "backward: not NODE records");
    ta_recs_begin(&it, &b->nodes);
    while (ta_recs_next(&it, &r)) {
        if (ta_grow((void **)&a->nodes, &a->cap, a->n + 1, sizeof *a->nodes) != TACT_OK)
            return ta_error_set(&a->err, TACT_ENOMEM, "autograd: out of memory");
        a_node_t *n = &a->nodes[a->n];
        memset(n, 0, sizeof *n);
        n->v.id = r.id;
        n->op = (ta_op_t)r.op;
        n->v.dt = (tact_dtype)r.dtype;
        n->grad = (int)(r.flags & S_FLAG_GRAD);
        n->dev = (int)r.device;
        if (r.device >= (uint64_t)a->w.ndevices || !r.id || r.op >= TA_OP__COUNT || !ta_dtype_valid((int)r.dtype) || r.n_srcs > 3 ||
            ta_shape_make(&n->v.sh, (int)r.n_shape, r.shape, "backward", NULL) != TACT_OK || ta_map_get(&a->pos, r.id, NULL))
            return ta_error_set(&a->err, TACT_EPROTO, "backward: record %zu is malformed or repeats id %" PRIu64, a->n, r.id);
        n->nsrc = (int)r.n_srcs;
        n->nargs = (int)r.n_args;
        memcpy(n->args, r.args, sizeof *r.args * r.n_args);
        for (int i = 0; i < n->nsrc; i++) {
            uint64_t k;
            n->src[i] = r.srcs[i];
            if (!ta_map_get(&a->pos, r.srcs[i], &k))
                return ta_error_set(&a->err, TACT_EPROTO, "backward: node %" PRIu64 " reads %" PRIu64 ", not listed before it", r.id, r.srcs[i]);
            /* What the rules read must fit: sources of one shape for
             * elementwise ops, the arity the op takes. */
            ta_op_class_t cls = ta_op_class(n->op);
            if ((cls == TA_OPC_UNARY || cls == TA_OPC_BINARY || cls == TA_OPC_TERNARY) &&
                !ta_shape_equal(&a->nodes[k].v.sh, &n->v.sh))
                return ta_error_set(&a->err, TACT_EPROTO, "backward: node %" PRIu64 ": sources of another shape", r.id);
        }
        int arity = ta_op_arity(n->op);
        if (n->grad && n->nsrc != arity && n->op != TA_OP_CONST && n->op != TA_OP_EMPTY)
            return ta_error_set(&a->err, TACT_EPROTO, "backward: node %" PRIu64 " (%s) has %d sources", r.id, ta_op_name(n->op), n->nsrc);
        if (ta_map_put(&a->pos, r.id, a->n) != TACT_OK) return ta_error_set(&a->err, TACT_ENOMEM, "autograd: out of memory");
        a->n++;
    }
    return TACT_OK;
}

/* A differentiable node's args and shape must follow from its source's,
 * as the graph checked them (ta_shape_of_op, the graph's own check): the
 * rules index one by the other. */
static int s_check_args(a_state_t *a) {
    for (size_t i = 0; i < a->n; i++) {
        a_node_t *n = &a->nodes[i];
        if (!n->grad || !n->nsrc) continue;
        a_val_t src0 = s_src(a, n, 0);
        ta_shape_t want;
        if (ta_shape_of_op(n->op, &src0.sh, n->nargs, n->args, &n->v.sh, &want, NULL) != TACT_OK || !ta_shape_equal(&want, &n->v.sh))
            return ta_error_set(&a->err, TACT_EPROTO, "backward: node %" PRIu64 " (%s): its args or shape do not follow from its source", n->v.id,
                                ta_op_name(n->op));
    }
    return TACT_OK;
}

/* Sends the next GRADS: the records from a->sent on that fit in
 * part_bytes (at least one), with more = 1 while some are left, and the
 * ids that got a gradient with the last. */
static int s_answer(ta_actor_t *self, a_state_t *a, const ta_msg_t *m) {
    size_t first = a->sent, last = first, start = first ? a->off[first - 1] : 0;
    while (last < a->nout && (last == first || a->off[last] - start <= a->part_bytes)) last++;
    int more = last < a->nout, rc = TACT_OK;
    msgpack_sbuffer chunk;
    msgpack_sbuffer_init(&chunk);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &chunk, msgpack_sbuffer_write);
    size_t end = last ? a->off[last - 1] : 0;
    if (ta_recs_pack_header(&pk, last - first) || (end > start && msgpack_sbuffer_write(&chunk, a->out.data + start, end - start))) {
        rc = ta_actor_fail(self, TACT_ENOMEM, "autograd: out of memory");
    } else {
        ta_msg_t r;
        ta_msg_init(&r, TA_MSG_GRADS);
        r.as.grads.ops = ta_recs_raw(TA_REC_NODE, chunk.data, chunk.size, last - first);
        r.as.grads.ids = more ? ta_u64s(NULL, 0) : ta_u64s(a->got, a->ngot);
        r.as.grads.more = (uint64_t)more;
        rc = ta_actor_reply(self, m, &r);
        a->sent = last;
    }
    msgpack_sbuffer_destroy(&chunk);
    return rc;
}

static int s_backward(ta_actor_t *self, a_state_t *a, const ta_msg_t *m) {
    const ta_backward_msg_t *b = &m->as.backward;
    if (b->next) {
        if (a->receiving || a->sent >= a->nout) return ta_actor_fail(self, TACT_EPROTO, "autograd: no answer is being sent");
        return s_answer(self, a, m);
    }
    /* Parts come numbered from 0: a first part starts afresh (whatever a
     * sender that failed half-way left), a part out of turn is an error. */
    if (b->part && (!a->receiving || b->part != a->nparts)) {
        a->receiving = 0;
        return ta_actor_fail(self, TACT_EPROTO, "autograd: part %" PRIu64 " of a backward out of turn", b->part);
    }
    a->nparts = b->part + 1;
    if (!b->part) { /* the first part of a backward */
        a->n = 0;
        a->nout = 0;
        a->sent = 0;
        a->ngot = 0;
        a->rc = 0;
        a->err.code = 0;
        ta_map_clear(&a->pos);
        msgpack_sbuffer_clear(&a->out);
        msgpack_packer_init(&a->pk, &a->out, msgpack_sbuffer_write);
    }
    /* Every part's records are read as they come; an error is kept for
     * the last part, the request the graph awaits. */
    if (!a->err.code) s_read_nodes(a, b);
    a->receiving = b->more != 0;
    if (a->receiving) return TACT_OK;
    uint64_t *ids = NULL, li = 0, gi = 0;
    int rc = a->err.code ? a->err.code : TACT_OK;
    if (rc == TACT_OK) rc = s_check_args(a);
    if (rc == TACT_OK && (b->targets.n != b->ids.n || b->targets.n != b->olds.n))
        rc = ta_error_set(&a->err, TACT_EPROTO, "backward: %u targets, %u ids, %u old gradients", b->targets.n, b->ids.n, b->olds.n);
    if (rc == TACT_OK && !ta_map_get(&a->pos, b->loss, &li)) rc = ta_error_set(&a->err, TACT_EPROTO, "backward: the loss is not listed");
    if (rc == TACT_OK && b->grad && !ta_map_get(&a->pos, b->grad, &gi)) rc = ta_error_set(&a->err, TACT_EPROTO, "backward: the gradient is not listed");
    uint64_t *tl = NULL, *ol = NULL;
    ta_free(a->got);
    a->got = NULL;
    if (rc == TACT_OK && (ta_u64s_copy(&b->targets, &tl) || ta_u64s_copy(&b->ids, &ids) || ta_u64s_copy(&b->olds, &ol) ||
                          !(a->got = ta_malloc(sizeof *a->got * (b->ids.n + 1)))))
        rc = ta_error_set(&a->err, TACT_ENOMEM, "autograd: out of memory");
    for (uint32_t t = 0; rc == TACT_OK && t < b->targets.n; t++) {
        uint64_t k;
        if (ta_map_get(&a->pos, tl[t], &k)) a->nodes[k].target = 1;
        if (ids[t] >= UINT64_C(1) << 61 || !ids[t] || (ol[t] && !ta_map_get(&a->pos, ol[t], NULL)))
            rc = ta_error_set(&a->err, TACT_EPROTO, "backward: target %u: bad id or old gradient", t);
    }
    if (rc == TACT_OK) {
        a_node_t *loss = &a->nodes[li];
        if (!ta_dtype_is_float(loss->v.dt)) rc = ta_error_set(&a->err, TACT_EDTYPE, "backward: the loss is %s, not a float", ta_dtype_name(loss->v.dt));
        else if (b->grad && (!ta_shape_equal(&a->nodes[gi].v.sh, &loss->v.sh) || a->nodes[gi].v.dt != loss->v.dt))
            rc = ta_error_set(&a->err, TACT_ESHAPE, "backward: the gradient's shape or dtype differs from the loss's");
        else loss->g = b->grad ? a->nodes[gi].v : (a->dev = loss->dev, s_k(a, 1, loss->v));
    }
    /* Users come after their sources, so walking back visits each node
     * after every contribution to it arrived. */
    for (size_t i = a->n; rc == TACT_OK && i-- > 0 && !a->rc;) {
        a_node_t *n = &a->nodes[i];
        if (n->grad && n->g.id) s_rule(a, n);
    }
    for (uint32_t t = 0; rc == TACT_OK && !a->rc && t < b->targets.n; t++) {
        uint64_t k;
        if (!ta_map_get(&a->pos, tl[t], &k) || !a->nodes[k].g.id) continue;
        a_val_t g = a->nodes[k].g;
        a->dev = a->nodes[k].dev;
        if (ol[t]) {
            uint64_t o;
            ta_map_get(&a->pos, ol[t], &o);
            a_val_t old = a->nodes[o].v;
            if (!ta_shape_equal(&old.sh, &g.sh) || old.dt != g.dt) {
                rc = ta_error_set(&a->err, TACT_EPROTO, "backward: target %u: the old gradient's shape or dtype", t);
                break;
            }
            s_emit_id(a, ids[t], TA_OP_ADD, g.dt, &g.sh, 2, (a_val_t[]){old, g}, 0, NULL);
        } else {
            s_emit_id(a, ids[t], TA_OP_RESHAPE, g.dt, &g.sh, 1, &g, 0, NULL);
        }
        a->got[a->ngot++] = ids[t];
    }
    if (rc == TACT_OK && a->rc) rc = a->rc;
    ta_free(tl);
    ta_free(ol);
    ta_free(ids);
    if (rc != TACT_OK) {
        a->nout = a->sent = 0;
        return a->err.code ? ta_actor_fail(self, rc, "%s", a->err.text) : rc;
    }
    return s_answer(self, a, m);
}

/* ---------------------------------------------------------------- actor */

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    (void)arg;
    a_state_t *a = ta_calloc(1, sizeof *a);
    if (!a) return ta_error_set(err, TACT_ENOMEM, "autograd: out of memory");
    a->next_id = UINT64_C(1) << 61;
    /* Parts of at most 4 MiB, as the graph's SCHEDULE (TACT_TEST_PART_BYTES:
     * smaller, for the tests of parts). */
    const char *pb = getenv("TACT_TEST_PART_BYTES");
    a->part_bytes = pb && atol(pb) > 0 ? (size_t)atol(pb) : (size_t)4 << 20;
    msgpack_sbuffer_init(&a->out);
    ta_actor_set_state(self, a);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    a_state_t *a = ta_actor_state(self);
    ta_free(a->nodes);
    ta_free(a->off);
    ta_free(a->got);
    ta_map_fini(&a->pos);
    msgpack_sbuffer_destroy(&a->out);
    ta_pipeline_fini(&a->w);
    ta_free(a);
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    a_state_t *a = ta_actor_state(self);
    if (m->type == TA_MSG_CONFIG) {
        int rc = ta_pipeline_configure(self, m, &a->w, &a->configured, TA_ROLE_AUTOGRAD);
        return rc != TACT_OK ? rc : ta_pipeline_ack(self, m);
    }
    if (m->type != TA_MSG_BACKWARD || !a->configured)
        return ta_actor_fail(self, TACT_EINVAL, "autograd: cannot handle %s%s", ta_msg_type_name(m->type), a->configured ? "" : " before CONFIG");
    return s_backward(self, a, m);
}

const ta_actor_ops_t ta_autograd_ops = {"autograd", s_init, s_handle, s_fini, NULL};
