/* ast.c - kernel ASTs: building, checking, naming, and their msgpack codec. */
#include "ast.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mpread.h"

void ta_ast_init(ta_ast_t *a, int ndim, const int64_t *shape, uint32_t reduce_mask) {
    a->nnodes = a->nviews = a->nbufs = a->nfused = 0;
    a->ndim = ndim;
    for (int k = 0; k < ndim; k++) a->shape[k] = shape[k];
    a->reduce_mask = reduce_mask;
}

int ta_ast_add(ta_ast_t *a, ta_ast_node_t node) {
    if (a->nnodes >= TA_AST_MAX_NODES) return -1;
    a->nodes[a->nnodes] = node;
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
    int nreduce = 0;
    for (int i = 0; i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        if (n->op < 0 || n->op >= TA_OP__COUNT) S_BAD("node %d: op %d", i, n->op);
        ta_op_class_t c = ta_op_class(n->op);
        if (c == TA_OPC_MOVEMENT || (c == TA_OPC_META && n->op != TA_OP_CONST))
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
        if ((n->op == TA_OP_LOAD || n->op == TA_OP_STORE || (n->op == TA_OP_CONST && n->view >= 0)) &&
            (n->view < 0 || n->view >= a->nviews))
            S_BAD("node %d: view %d", i, n->view);
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
    if (!nreduce && a->reduce_mask) S_BAD("reduce mask without a reduce");
#undef S_BAD
    return TACT_OK;
}

void ta_ast_name(const ta_ast_t *a, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "%s", a->reduce_mask ? "r" : "E");
    int any = 0;
    for (int pass = 0; pass < (a->reduce_mask ? 2 : 1); pass++)
        for (int k = 0; k < a->ndim; k++) {
            int reduced = a->reduce_mask >> k & 1;
            if (reduced != pass || (a->shape[k] == 1 && a->ndim > 1)) continue;
            if (at < len) at += (size_t)snprintf(buf + at, len - at, "_%" PRId64, a->shape[k]);
            any = 1;
        }
    if (!any && at < len) snprintf(buf + at, len - at, "_1");
}

/* ------------------------------------------------------------------ codec */

/* A view stack: [[[shape], [strides], offset, has_mask, [lo, hi, ...], contiguous], ...]. */
int ta_vstack_pack(const ta_vstack_t *st, msgpack_packer *pk) {
    int bad = msgpack_pack_array(pk, (size_t)st->nviews);
    for (int v = 0; !bad && v < st->nviews; v++) {
        const ta_view_t *w = &st->views[v];
        bad = msgpack_pack_array(pk, 6) || msgpack_pack_array(pk, (size_t)w->ndim);
        for (int k = 0; !bad && k < w->ndim; k++) bad = msgpack_pack_int64(pk, w->shape[k]);
        bad = bad || msgpack_pack_array(pk, (size_t)w->ndim);
        for (int k = 0; !bad && k < w->ndim; k++) bad = msgpack_pack_int64(pk, w->strides[k]);
        bad = bad || msgpack_pack_int64(pk, w->offset) || msgpack_pack_uint8(pk, w->has_mask) ||
              msgpack_pack_array(pk, w->has_mask ? (size_t)w->ndim * 2 : 0);
        for (int k = 0; !bad && w->has_mask && k < w->ndim; k++)
            bad = msgpack_pack_int64(pk, w->mask[k][0]) || msgpack_pack_int64(pk, w->mask[k][1]);
        bad = bad || msgpack_pack_uint8(pk, w->contiguous);
    }
    return bad ? -1 : 0;
}

int ta_ast_pack(const ta_ast_t *a, msgpack_packer *pk) {
    int bad = msgpack_pack_array(pk, 6) || msgpack_pack_array(pk, (size_t)a->ndim);
    for (int k = 0; !bad && k < a->ndim; k++) bad = msgpack_pack_int64(pk, a->shape[k]);
    bad = bad || msgpack_pack_uint32(pk, a->reduce_mask) || msgpack_pack_array(pk, (size_t)a->nbufs);
    for (int b = 0; !bad && b < a->nbufs; b++)
        bad = msgpack_pack_array(pk, 2) || msgpack_pack_uint8(pk, (uint8_t)a->buf_dtype[b]) ||
              msgpack_pack_int64(pk, a->buf_size[b]);
    bad = bad || msgpack_pack_array(pk, (size_t)a->nviews);
    for (int v = 0; !bad && v < a->nviews; v++) bad = ta_vstack_pack(&a->views[v], pk);
    bad = bad || msgpack_pack_array(pk, (size_t)a->nnodes);
    for (int i = 0; !bad && i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        bad = msgpack_pack_array(pk, 6) || msgpack_pack_uint8(pk, (uint8_t)n->op) ||
              msgpack_pack_uint8(pk, (uint8_t)n->dtype) || msgpack_pack_array(pk, (size_t)n->nsrc);
        for (int s = 0; !bad && s < n->nsrc; s++) bad = msgpack_pack_int16(pk, n->src[s]);
        bad = bad || msgpack_pack_int16(pk, n->buf) || msgpack_pack_int16(pk, n->view) ||
              msgpack_pack_uint64(pk, ta_value_bits(n->dtype, n->value));
    }
    bad = bad || msgpack_pack_array(pk, (size_t)a->nfused);
    for (int i = 0; !bad && i < a->nfused; i++) bad = msgpack_pack_uint64(pk, a->fused[i]);
    return bad ? -1 : 0;
}

/* Reads an array header of exactly want elements (want < 0: at most -want). */
static int s_arr(ta_mpr_t *r, int64_t want, uint32_t *n) {
    if (ta_mpr_array(r, n) != 0) return -1;
    return want >= 0 ? (*n == want ? 0 : -1) : (*n <= -want ? 0 : -1);
}

static int s_i64(ta_mpr_t *r, int64_t *v) { return ta_mpr_i64(r, v); }

static int s_small(ta_mpr_t *r, int64_t lo, int64_t hi, int64_t *v) {
    return ta_mpr_i64(r, v) == 0 && *v >= lo && *v <= hi ? 0 : -1;
}

int ta_vstack_unpack(ta_vstack_t *st, ta_mpr_t *r) {
    uint32_t n, m;
    int64_t v;
    if (s_arr(r, -TA_MAX_VIEWS, &n) || n < 1) return -1;
    st->nviews = (int)n;
    for (uint32_t i = 0; i < n; i++) {
        ta_view_t *w = &st->views[i];
        if (s_arr(r, 6, &m) || s_arr(r, -TA_MAX_DIMS, &m)) return -1;
        w->ndim = (int)m;
        for (int k = 0; k < w->ndim; k++)
            if (s_i64(r, &w->shape[k]) || w->shape[k] < 0) return -1;
        if (s_arr(r, w->ndim, &m)) return -1;
        for (int k = 0; k < w->ndim; k++)
            if (s_i64(r, &w->strides[k])) return -1;
        if (s_i64(r, &w->offset) || s_small(r, 0, 1, &v)) return -1;
        w->has_mask = v;
        if (s_arr(r, w->has_mask ? w->ndim * 2 : 0, &m)) return -1;
        for (int k = 0; w->has_mask && k < w->ndim; k++)
            if (s_i64(r, &w->mask[k][0]) || s_i64(r, &w->mask[k][1])) return -1;
        if (s_small(r, 0, 1, &v)) return -1;
        w->contiguous = v != 0;
    }
    return ta_vstack_valid(st) ? 0 : -1;
}

int ta_ast_unpack(ta_ast_t *a, ta_mpr_t *r, ta_error_t *err) {
    uint32_t n, m;
    int64_t v;
    uint64_t u;
#define S_NEED(cond, what)                                                                                 \
    do {                                                                                                   \
        if (!(cond)) return ta_error_set(err, TACT_EPROTO, "kernel ast: byte %zu: expected %s", ta_mpr_offset(r), what); \
    } while (0)
    S_NEED(s_arr(r, 6, &n) == 0 && s_arr(r, -TA_MAX_DIMS, &n) == 0, "[shape, ...]");
    a->ndim = (int)n;
    for (int k = 0; k < a->ndim; k++) S_NEED(s_i64(r, &a->shape[k]) == 0, "a dim");
    S_NEED(ta_mpr_u64(r, &u) == 0 && u <= UINT32_MAX, "the reduce mask");
    a->reduce_mask = (uint32_t)u;
    S_NEED(s_arr(r, -TA_AST_MAX_BUFS, &n) == 0, "the buffers");
    a->nbufs = (int)n;
    for (int b = 0; b < a->nbufs; b++) {
        S_NEED(s_arr(r, 2, &m) == 0 && s_small(r, 0, TACT_DTYPE_COUNT - 1, &v) == 0, "a buffer dtype");
        a->buf_dtype[b] = (tact_dtype)v;
        S_NEED(s_i64(r, &a->buf_size[b]) == 0, "a buffer size");
    }
    S_NEED(s_arr(r, -TA_AST_MAX_VIEWS, &n) == 0, "the views");
    a->nviews = (int)n;
    for (int i = 0; i < a->nviews; i++) S_NEED(ta_vstack_unpack(&a->views[i], r) == 0, "a view stack");
    S_NEED(s_arr(r, -TA_AST_MAX_NODES, &n) == 0, "the nodes");
    a->nnodes = (int)n;
    for (int i = 0; i < a->nnodes; i++) {
        ta_ast_node_t *node = &a->nodes[i];
        S_NEED(s_arr(r, 6, &m) == 0 && s_small(r, 0, TA_OP__COUNT - 1, &v) == 0, "a node op");
        node->op = (ta_op_t)v;
        S_NEED(s_small(r, 0, TACT_DTYPE_COUNT - 1, &v) == 0, "a node dtype");
        node->dtype = (tact_dtype)v;
        S_NEED(s_arr(r, -3, &m) == 0, "node sources");
        node->nsrc = (int)m;
        for (int s = 0; s < node->nsrc; s++) {
            S_NEED(s_small(r, 0, TA_AST_MAX_NODES, &v) == 0, "a source");
            node->src[s] = (int16_t)v;
        }
        S_NEED(s_small(r, -1, TA_AST_MAX_BUFS, &v) == 0, "a buffer index");
        node->buf = (int16_t)v;
        S_NEED(s_small(r, -1, TA_AST_MAX_VIEWS, &v) == 0, "a view index");
        node->view = (int16_t)v;
        S_NEED(ta_mpr_u64(r, &u) == 0, "a value");
        node->value = ta_value_from_bits(node->dtype, u);
    }
    S_NEED(s_arr(r, -TA_AST_MAX_NODES, &n) == 0, "the fused ids");
    a->nfused = (int)n;
    for (int i = 0; i < a->nfused; i++) S_NEED(ta_mpr_u64(r, &a->fused[i]) == 0, "a fused id");
#undef S_NEED
    return ta_ast_check(a, err);
}
