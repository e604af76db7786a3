/* ast.c - kernel ASTs: building, checking, naming, and their msgpack codec. */
#include "ast.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"
#include "mem.h"
#include "mpread.h"
#include "sym.h"

void ta_ast_init(ta_ast_t *a, int ndim, const int64_t *shape, uint32_t reduce_mask) {
    a->nnodes = a->nviews = a->nbufs = a->nfused = a->nargs = 0;
    a->ndim = ndim;
    for (int k = 0; k < ndim; k++) a->shape[k] = shape[k];
    a->reduce_mask = reduce_mask;
}

int ta_ast_add(ta_ast_t *a, ta_ast_node_t node) {
    if (a->nnodes >= TA_AST_MAX_NODES) return -1;
    a->nodes[a->nnodes] = node;
    a->nargs += node.arg != 0;
    return a->nnodes++;
}

int ta_ast_view(ta_ast_t *a, const ta_vstack_t *view) {
    for (int i = 0; i < a->nviews; i++)
        if (ta_vstack_equal(&a->views[i], view)) return i;
    if (a->nviews >= TA_AST_MAX_VIEWS) return -1;
    a->views[a->nviews] = *view;
    return a->nviews++;
}

/* The shape a node works on: full before the reduce, output after. */
static void s_out_shape(const ta_ast_t *a, int64_t *out) {
    for (int k = 0; k < a->ndim; k++) out[k] = a->reduce_mask >> k & 1 ? 1 : a->shape[k];
}

static int s_same_shape(const ta_vstack_t *v, int ndim, const int64_t *shape) {
    if (ta_vstack_ndim(v) != ndim) return 0;
    for (int k = 0; k < ndim; k++)
        if (ta_vstack_shape(v)[k] != shape[k]) return 0;
    return 1;
}

int ta_ast_check(const ta_ast_t *a, ta_error_t *err) {
#define S_BAD(...) return ta_error_set(err, TACT_EINVAL, "kernel ast: " __VA_ARGS__)
    if (a->ndim < 0 || a->ndim > TA_MAX_DIMS) S_BAD("%d dims", a->ndim);
    if (a->nnodes < 1 || a->nnodes > TA_AST_MAX_NODES) S_BAD("%d nodes", a->nnodes);
    if (a->nviews < 0 || a->nviews > TA_AST_MAX_VIEWS) S_BAD("%d views", a->nviews);
    if (a->nbufs < 1 || a->nbufs > TA_AST_MAX_BUFS) S_BAD("%d buffers", a->nbufs);
    if (a->nfused < 0 || a->nfused > TA_AST_MAX_NODES) S_BAD("%d fused ids", a->nfused);
    if (a->reduce_mask >> a->ndim) S_BAD("reduce mask %#x beyond %d dims", a->reduce_mask, a->ndim);
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] < 0) S_BAD("negative dim %d", k);
    for (int b = 0; b < a->nbufs; b++)
        if (!ta_dtype_valid(a->buf_dtype[b]) || a->buf_size[b] < 0) S_BAD("buffer %d", b);
    int64_t out[TA_MAX_DIMS];
    s_out_shape(a, out);
    int nreduce = 0, nargs = 0;
    for (int i = 0; i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        if (n->op < 0 || n->op >= TA_OP__COUNT) S_BAD("node %d: op %d", i, n->op);
        if (n->arg && (n->arg != 1 || n->op != TA_OP_CONST || ta_value_bits(n->dtype, n->value) != 0))
            S_BAD("node %d: only a CONST of value 0 may be an argument", i);
        nargs += n->arg;
        ta_op_class_t c = ta_op_class(n->op);
        if (c == TA_OPC_MOVEMENT || (c == TA_OPC_META && n->op != TA_OP_CONST && n->op != TA_OP_IOTA))
            S_BAD("node %d: %s cannot appear in a kernel", i, ta_op_name(n->op));
        if (!ta_dtype_valid(n->dtype)) S_BAD("node %d: dtype %d", i, n->dtype);
        int arity = n->op == TA_OP_CONST ? 0 : ta_op_arity(n->op);
        if (n->nsrc != arity) S_BAD("node %d: %s takes %d sources, has %d", i, ta_op_name(n->op), arity, n->nsrc);
        for (int s = 0; s < n->nsrc; s++)
            if (n->src[s] < 0 || n->src[s] >= i) S_BAD("node %d: source %d out of order", i, n->src[s]);
        if (n->op == TA_OP_LOAD || n->op == TA_OP_STORE) {
            if (n->buf < 0 || n->buf >= a->nbufs) S_BAD("node %d: buffer %d", i, n->buf);
            if (a->buf_dtype[n->buf] != n->dtype) S_BAD("node %d: dtype differs from its buffer's", i);
        }
        if ((n->op == TA_OP_LOAD || n->op == TA_OP_STORE || n->op == TA_OP_IOTA || (n->op == TA_OP_CONST && n->view >= 0)) &&
            (n->view < 0 || n->view >= a->nviews))
            S_BAD("node %d: view %d", i, n->view);
        /* An IOTA's value is the position its view reads: an int32. */
        if (n->op == TA_OP_IOTA && (n->dtype != TACT_INT32 || !ta_vstack_valid(&a->views[n->view]) || ta_vstack_buffer_size(&a->views[n->view]) > INT32_MAX))
            S_BAD("node %d: IOTA must be int32 over at most 2^31-1 positions", i);
        /* A kernel never touches memory outside its buffers. */
        if ((n->op == TA_OP_LOAD || n->op == TA_OP_STORE) &&
            (!ta_vstack_valid(&a->views[n->view]) || ta_vstack_buffer_size(&a->views[n->view]) > a->buf_size[n->buf]))
            S_BAD("node %d: view %d reaches outside buffer %d (%lld elements)", i, n->view, n->buf, (long long)a->buf_size[n->buf]);
        if (n->op == TA_OP_STORE && (i != a->nnodes - 1 || n->buf != 0)) S_BAD("node %d: STORE must be last, to buffer 0", i);
        if (n->op == TA_OP_STORE && !s_same_shape(&a->views[n->view], a->ndim, out))
            S_BAD("STORE view is not over the output shape");
        if (c == TA_OPC_REDUCE && ++nreduce > 1) S_BAD("more than one reduce");
        if (c == TA_OPC_BINARY && n->op != TA_OP_CMPLT && n->op != TA_OP_CMPNE &&
            a->nodes[n->src[0]].dtype != a->nodes[n->src[1]].dtype)
            S_BAD("node %d: %s of %s and %s", i, ta_op_name(n->op), ta_dtype_name(a->nodes[n->src[0]].dtype),
                  ta_dtype_name(a->nodes[n->src[1]].dtype));
    }
    if (a->nodes[a->nnodes - 1].op != TA_OP_STORE) S_BAD("the last node is not a STORE");
    if (nargs != a->nargs) S_BAD("%d argument CONSTs, %d counted", nargs, a->nargs);
    if (!nreduce && a->reduce_mask) S_BAD("reduce mask without a reduce");
#undef S_BAD
    return TACT_OK;
}

int ta_ast_const_is_structural(tact_dtype d, ta_value_t v) {
    if (ta_dtype_is_bool(d)) return 1;
    if (ta_dtype_is_float(d)) {
        double x = d == TACT_FLOAT16 ? ta_half_to_float(v.h) : d == TACT_BFLOAT16 ? ta_bf16_to_float(v.h) : v.f;
        return x == 0 || x == 1 || x == -1 || !isfinite(x);
    }
    if (ta_dtype_is_unsigned(d)) return v.u <= 1;
    return v.i >= -1 && v.i <= 1;
}

uint64_t ta_ast_arg_word(tact_dtype d, ta_value_t v) {
    if (ta_dtype_is_float(d)) {
        double x = d == TACT_FLOAT16 ? ta_half_to_float(v.h) : d == TACT_BFLOAT16 ? ta_bf16_to_float(v.h) : v.f;
        uint64_t w;
        memcpy(&w, &x, sizeof w);
        return w;
    }
    if (ta_dtype_is_bool(d)) return v.b ? 1 : 0;
    return ta_dtype_is_unsigned(d) ? v.u : (uint64_t)v.i;
}

uint64_t ta_ast_work(const ta_ast_t *a) {
    uint64_t work = 1;
    int pin[TA_MAX_DIMS];
    ta_ast_gathers(a, pin);
    for (int d = 0; d < a->ndim; d++) {
        uint64_t dim = a->shape[d] > 0 ? (uint64_t)(pin[d] >= 0 ? 1 : a->shape[d]) : 0; /* a gathered dim takes one index */
        work = dim && work > UINT64_MAX / dim ? UINT64_MAX : work * dim;
    }
    return work;
}

/* Whether two shapes of n dims are equal. */
static int s_same(int n, const int64_t *x, const int64_t *y) { return memcmp(x, y, (size_t)n * sizeof *x) == 0; }

/* Whether view stack st over nd dims of shape sh reads dims d and d + 1
 * (merged: d alone, run 0) as one run of stride k: its position is e +
 * k * (x_d * sh[d + 1] + x_{d+1}) (or e + k * x_d) with e using neither,
 * its validity neither.  *k is set from the unmerged stack, checked
 * against the merged one.  0 also when out of memory. */
static int s_one_run(const ta_vstack_t *st, int nd, const int64_t *sh, int d, int merged, int64_t *k) {
    ta_sym_arena_t *ar = ta_sym_arena_new();
    const ta_sym_t *idx[TA_MAX_DIMS], *pos = NULL, *valid = NULL;
    for (int j = 0; ar && j < nd; j++) {
        char name[8];
        snprintf(name, sizeof name, "x%d", j);
        idx[j] = ta_sym_var(ar, j, name, 0, sh[j] > 0 ? sh[j] - 1 : 0);
    }
    int64_t k0, k1 = 0;
    int ok = ar && ta_vstack_expr(st, ar, idx, &pos, &valid) == 0 && !(ta_sym_slots(valid) >> d & (merged ? 1 : 3)) && ta_sym_linear(pos, d, &k0);
    if (ok && merged) ok = k0 == *k;
    else if (ok) ok = ta_sym_linear(pos, d + 1, &k1) && k0 == k1 * sh[d + 1], *k = k1;
    ta_sym_arena_destroy(&ar);
    return ok;
}

int ta_ast_merge_dims(ta_ast_t *a) {
    int pin[TA_MAX_DIMS], merged = 0;
    if (ta_ast_gathers(a, pin) > 0) return 0;
    for (int i = 0; i < a->nnodes; i++)
        if (a->nodes[i].op == TA_OP_IOTA) return 0;
    ta_vstack_t *tmp = ta_malloc(TA_AST_MAX_VIEWS * sizeof *tmp); /* each view merged (none when out of memory) */
    if (!tmp) return 0;
    for (int d = a->ndim - 2; d >= 0; d--) {
        int reduced = a->reduce_mask >> d & 1;
        if (reduced != (int)(a->reduce_mask >> (d + 1) & 1)) continue;
        /* The full and output shapes, and both merged at d. */
        int64_t full[TA_MAX_DIMS], out[TA_MAX_DIMS], mfull[TA_MAX_DIMS], mout[TA_MAX_DIMS];
        for (int k = 0; k < a->ndim; k++) full[k] = a->shape[k], out[k] = a->reduce_mask >> k & 1 ? 1 : a->shape[k];
        for (int k = 0, j = 0; k < a->ndim; k++) {
            if (k == d + 1) continue;
            mfull[j] = k == d ? full[d] * full[d + 1] : full[k];
            mout[j++] = k == d ? out[d] * out[d + 1] : out[k];
        }
        int ok = 1;
        for (int v = 0; v < a->nviews && ok; v++) {
            const ta_vstack_t *st = &a->views[v];
            const int64_t *sh = ta_vstack_shape(st);
            const int64_t *to = ta_vstack_ndim(st) != a->ndim ? NULL : s_same(a->ndim, sh, full) ? mfull : s_same(a->ndim, sh, out) ? mout : NULL;
            ta_vstack_copy(&tmp[v], st);
            /* Merged into the last view, never through a view of its own,
             * its position as simple as it was (a pool's view reads a dim
             * of 28 as 14 pairs: merged with its neighbour, each would be
             * a division). */
            int64_t k = 0;
            ok = to && s_one_run(st, a->ndim, sh, d, 0, &k) && ta_vstack_reshape(&tmp[v], a->ndim - 1, to) == 0 && tmp[v].nviews == st->nviews &&
                 s_one_run(&tmp[v], a->ndim - 1, to, d, 1, &k);
        }
        if (!ok) continue;
        for (int v = 0; v < a->nviews; v++) ta_vstack_copy(&a->views[v], &tmp[v]);
        uint32_t low = a->reduce_mask & ((1u << (d + 1)) - 1), high = a->reduce_mask >> (d + 2);
        a->reduce_mask = low | high << (d + 1);
        for (int k = 0; k < a->ndim - 1; k++) a->shape[k] = mfull[k];
        a->ndim--;
        merged++;
    }
    ta_free(tmp);
    return merged;
}

void ta_ast_name(const ta_ast_t *a, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "%s", a->reduce_mask ? "r" : "E");
    int any = 0, pin[TA_MAX_DIMS];
    ta_ast_gathers(a, pin);
    for (int pass = 0; pass < (a->reduce_mask ? 2 : 1); pass++)
        for (int k = 0; k < a->ndim; k++) {
            int reduced = a->reduce_mask >> k & 1;
            if (reduced != pass || (a->shape[k] == 1 && a->ndim > 1)) continue;
            /* A gathered dim is "g" and its size: r_128_784_g60000. */
            if (at < len) at += (size_t)snprintf(buf + at, len - at, "_%s%" PRId64, pin[k] >= 0 ? "g" : "", a->shape[k]);
            any = 1;
        }
    if (!any && at < len) snprintf(buf + at, len - at, "_1");
}

/* ------------------------------------------------------------------ codec */

/* View stacks and ASTs travel as the VIEW, VSTACK, ANODE and AST records of
 * msg.h; these functions only move values between those records and the
 * structs here, and check what the schema cannot (ranges, consistency). */

ta_recs_t ta_vstack_recs(const ta_vstack_t *st, ta_view_rec_t *recs) {
    for (int v = 0; v < st->nviews; v++) {
        const ta_view_t *w = &st->views[v];
        ta_view_rec_t *r = &recs[v];
        memset(r, 0, sizeof *r);
        r->n_shape = r->n_strides = (uint32_t)w->ndim;
        memcpy(r->shape, w->shape, sizeof(int64_t) * (size_t)w->ndim);
        memcpy(r->strides, w->strides, sizeof(int64_t) * (size_t)w->ndim);
        r->offset = w->offset;
        r->has_mask = w->has_mask;
        r->n_mask = w->has_mask ? (uint32_t)w->ndim * 2 : 0;
        for (int d = 0; w->has_mask && d < w->ndim; d++) r->mask[2 * d] = w->mask[d][0], r->mask[2 * d + 1] = w->mask[d][1];
        r->contiguous = w->contiguous;
    }
    return ta_recs(TA_REC_VIEW, recs, (size_t)st->nviews);
}

int ta_vstack_from_recs(ta_vstack_t *st, const ta_recs_t *views) {
    if (views->type != TA_REC_VIEW || views->n < 1 || views->n > TA_MAX_VIEWS) return -1;
    ta_recs_it_t it;
    ta_view_rec_t r;
    ta_recs_begin(&it, views);
    st->nviews = 0;
    while (ta_recs_next(&it, &r)) {
        ta_view_t *w = &st->views[st->nviews++];
        if (r.n_shape > TA_MAX_DIMS || r.n_strides != r.n_shape || r.has_mask > 1 || r.contiguous > 1 ||
            r.n_mask != (r.has_mask ? 2 * r.n_shape : 0))
            return -1;
        w->ndim = (int)r.n_shape;
        for (int d = 0; d < w->ndim; d++) {
            if (r.shape[d] < 0) return -1;
            w->shape[d] = r.shape[d];
            w->strides[d] = r.strides[d];
            w->mask[d][0] = r.has_mask ? r.mask[2 * d] : 0;
            w->mask[d][1] = r.has_mask ? r.mask[2 * d + 1] : 0;
        }
        w->offset = r.offset;
        w->has_mask = r.has_mask != 0;
        w->contiguous = r.contiguous != 0;
    }
    return st->nviews == (int)views->n && ta_vstack_valid(st) ? 0 : -1;
}

int ta_ast_pack(const ta_ast_t *a, msgpack_packer *pk) {
    /* The nested lists are packed first, each into its own buffer, and the
     * AST record refers to their bytes. */
    msgpack_sbuffer vb, nb;
    msgpack_sbuffer_init(&vb);
    msgpack_sbuffer_init(&nb);
    msgpack_packer vp, np;
    msgpack_packer_init(&vp, &vb, msgpack_sbuffer_write);
    msgpack_packer_init(&np, &nb, msgpack_sbuffer_write);
    ta_view_rec_t views[TA_MAX_VIEWS];
    int bad = ta_recs_pack_header(&vp, (size_t)a->nviews);
    for (int v = 0; !bad && v < a->nviews; v++) {
        ta_vstack_rec_t st = {ta_vstack_recs(&a->views[v], views)};
        bad = ta_rec_pack(TA_REC_VSTACK, &st, &vp);
    }
    bad = bad || ta_recs_pack_header(&np, (size_t)a->nnodes);
    for (int i = 0; !bad && i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        ta_anode_rec_t r;
        memset(&r, 0, sizeof r);
        r.op = (uint64_t)n->op;
        r.dtype = (uint64_t)n->dtype;
        r.n_srcs = (uint32_t)n->nsrc;
        for (int s = 0; s < n->nsrc; s++) r.srcs[s] = (uint64_t)n->src[s];
        r.buf = n->buf;
        r.view = n->view;
        r.value = ta_value_bits(n->dtype, n->value);
        r.arg = (uint64_t)n->arg;
        bad = ta_rec_pack(TA_REC_ANODE, &r, &np);
    }
    ta_ast_rec_t r;
    memset(&r, 0, sizeof r);
    r.n_shape = (uint32_t)a->ndim;
    memcpy(r.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    r.reduce_mask = a->reduce_mask;
    r.n_buf_dtypes = r.n_buf_sizes = (uint32_t)a->nbufs;
    for (int b = 0; b < a->nbufs; b++) r.buf_dtypes[b] = (uint64_t)a->buf_dtype[b], r.buf_sizes[b] = a->buf_size[b];
    r.views = ta_recs_raw(TA_REC_VSTACK, vb.data, vb.size, (size_t)a->nviews);
    r.nodes = ta_recs_raw(TA_REC_ANODE, nb.data, nb.size, (size_t)a->nnodes);
    bad = bad || ta_rec_pack(TA_REC_AST, &r, pk);
    msgpack_sbuffer_destroy(&vb);
    msgpack_sbuffer_destroy(&nb);
    return bad ? -1 : 0;
}

int ta_ast_unpack(ta_ast_t *a, ta_mpr_t *r, ta_error_t *err) {
    ta_ast_rec_t rec;
    size_t off = ta_mpr_offset(r);
    ta_error_t e;
    if (ta_rec_unpack(TA_REC_AST, &rec, r->start, (size_t)(r->end - r->start), &off, &e) != TACT_OK)
        return ta_error_set(err, TACT_EPROTO, "kernel ast: %s", e.text);
    r->p = r->start + off;
#define S_NEED(cond, what)                                                         \
    do {                                                                           \
        if (!(cond)) return ta_error_set(err, TACT_EPROTO, "kernel ast: %s", what); \
    } while (0)
    S_NEED(rec.reduce_mask <= UINT32_MAX, "the reduce mask out of range");
    a->ndim = (int)rec.n_shape;
    memcpy(a->shape, rec.shape, sizeof(int64_t) * rec.n_shape);
    a->reduce_mask = (uint32_t)rec.reduce_mask;
    S_NEED(rec.n_buf_dtypes == rec.n_buf_sizes, "one dtype and one size per buffer");
    a->nbufs = (int)rec.n_buf_dtypes;
    for (int b = 0; b < a->nbufs; b++) {
        S_NEED(rec.buf_dtypes[b] < TACT_DTYPE_COUNT, "a buffer dtype");
        a->buf_dtype[b] = (tact_dtype)rec.buf_dtypes[b];
        a->buf_size[b] = rec.buf_sizes[b];
    }
    S_NEED(rec.views.n <= TA_AST_MAX_VIEWS && rec.nodes.n <= TA_AST_MAX_NODES, "at most 32 views and 256 nodes");
    ta_recs_it_t it;
    ta_vstack_rec_t st;
    a->nviews = 0;
    ta_recs_begin(&it, &rec.views);
    while (ta_recs_next(&it, &st)) S_NEED(ta_vstack_from_recs(&a->views[a->nviews++], &st.views) == 0, "a well-formed view stack");
    ta_anode_rec_t n;
    a->nnodes = a->nargs = 0;
    ta_recs_begin(&it, &rec.nodes);
    while (ta_recs_next(&it, &n)) {
        ta_ast_node_t *node = &a->nodes[a->nnodes++];
        S_NEED(n.op < TA_OP__COUNT && n.dtype < TACT_DTYPE_COUNT, "a node's op and dtype");
        node->op = (ta_op_t)n.op;
        node->dtype = (tact_dtype)n.dtype;
        node->nsrc = (int)n.n_srcs;
        for (int s = 0; s < node->nsrc; s++) {
            S_NEED(n.srcs[s] <= TA_AST_MAX_NODES, "a source index");
            node->src[s] = (int16_t)n.srcs[s];
        }
        S_NEED(n.buf >= -1 && n.buf <= TA_AST_MAX_BUFS && n.view >= -1 && n.view <= TA_AST_MAX_VIEWS, "a buffer and view index");
        node->buf = (int16_t)n.buf;
        node->view = (int16_t)n.view;
        node->value = ta_value_from_bits(node->dtype, n.value);
        S_NEED(n.arg <= 1, "an argument flag of 0 or 1");
        node->arg = (int8_t)n.arg;
        a->nargs += node->arg;
    }
    S_NEED(a->nviews == (int)rec.views.n && a->nnodes == (int)rec.nodes.n, "every view and node");
    /* The bytes are the record and nothing more: two different byte
     * strings never stand for one AST (they key the caches). */
    S_NEED(r->p == r->end, "bytes after the record");
    a->nfused = 0; /* they travel beside the AST (KERNEL.fused) */
#undef S_NEED
    return ta_ast_check(a, err);
}
