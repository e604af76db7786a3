/* builder.c - the graph builder actor: owns the lazy graph (bases and views), sends subgraphs to schedule. */
#include "builder_impl.h"

/*
 * Messages: the client's stream (CONFIG, OP_BATCH, WRITE, REALIZE,
 * READ) gives the graph its work; SCHEDULED (or ERROR) from the scheduler is
 * the reply it awaits after each SCHEDULE, before the client's next message.
 * It sends the executor its own stream (WRITE, FREE, COPY_OUT, and RUN: the
 * point where a scheduled part runs); the executor answers the client.
 *
 * A node is a base (an op that makes new values) or a view (a movement op:
 * a view stack over a base).  Movement ops are folded into the view stack
 * as they arrive, so a view always points straight at its base.  A base has
 * a buffer once a realize computed it (or the client wrote it); kernels
 * read such bases instead of recomputing them.
 */


/* --------------------------------------------------------------- the map */

static size_t s_slot(const g_state_t *g, uint64_t id) {
    size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull) & (g->cap - 1);
    while (g->slots[i].id && g->slots[i].id != id) i = (i + 1) & (g->cap - 1);
    return i;
}

g_node_t *g_find(const g_state_t *g, uint64_t id) {
    if (!g->cap || !id) return NULL;
    return g->slots[s_slot(g, id)].n;
}

static int s_insert(g_state_t *g, g_node_t *n) {
    if ((g->count + 1) * 2 > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 1024;
        g_slot_t *old = g->slots;
        size_t oldcap = g->cap;
        g->slots = ta_calloc(cap, sizeof *g->slots);
        if (!g->slots) {
            g->slots = old;
            return TACT_ENOMEM;
        }
        g->cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].id) g->slots[s_slot(g, old[i].id)] = old[i];
        ta_free(old);
    }
    g->slots[s_slot(g, n->id)] = (g_slot_t){n->id, n};
    g->count++;
    return TACT_OK;
}

/* Removes id, re-placing the entries after it (linear probing deletion). */
static void s_remove(g_state_t *g, uint64_t id) {
    size_t i = s_slot(g, id);
    if (!g->slots[i].id) return;
    g->slots[i] = (g_slot_t){0, NULL};
    g->count--;
    for (size_t j = (i + 1) & (g->cap - 1); g->slots[j].id; j = (j + 1) & (g->cap - 1)) {
        g_slot_t e = g->slots[j];
        g->slots[j] = (g_slot_t){0, NULL};
        g->slots[s_slot(g, e.id)] = e;
    }
}

enum { S_KEEP_FREED = 1024 };

/* Keeps block p (at least a pointer's size) on *list, or frees it when
 * the list is full. */
static void s_keep(void **list, int *n, void *p) {
    if (!p) return;
    if (*n >= S_KEEP_FREED) {
        ta_free(p);
        return;
    }
    *(void **)p = *list;
    *list = p;
    (*n)++;
}

static void *s_take(void **list, int *n, size_t size) {
    void *p = *list;
    if (!p) return ta_malloc(size);
    *list = *(void **)p;
    (*n)--;
    return p;
}

static ta_vstack_t *s_stack_new(g_state_t *g) { return s_take(&g->free_stacks, &g->nfree_stacks, sizeof(ta_vstack_t)); }

static void s_node_free(g_state_t *g, g_node_t *n) {
    s_keep(&g->free_stacks, &g->nfree_stacks, n->st);
    s_keep(&g->free_nodes, &g->nfree_nodes, n);
}

static void s_free_list(void *list) {
    while (list) {
        void *next = *(void **)list;
        ta_free(list);
        list = next;
    }
}

/* ------------------------------------------------- common subexpressions */

static uint64_t s_content_hash(const g_node_t *n) {
    uint64_t h = 0xcbf29ce484222325ull;
#define S_MIX(v) (h = (h ^ (uint64_t)(v)) * 0x100000001b3ull, h ^= h >> 31)
    S_MIX(n->op);
    S_MIX(n->dtype);
    S_MIX(n->shape.ndim);
    for (int k = 0; k < n->shape.ndim; k++) S_MIX(n->shape.d[k]);
    S_MIX(n->nsrc);
    for (int i = 0; i < n->nsrc; i++) S_MIX(n->src[i]);
    S_MIX(n->nargs);
    for (int i = 0; i < n->nargs; i++) S_MIX(n->args[i]);
    S_MIX(n->grad);
    S_MIX(n->device);
#undef S_MIX
    /* A finalizer (splitmix64's): the table indexes by the low bits, which
     * the multiplications above leave poorly mixed for ids that differ by
     * one (a chain of ops clustered into probe runs thousands long). */
    h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27, h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h ? h : 1;
}

static size_t s_cse_slot(const g_state_t *g, uint64_t hash) {
    size_t i = (size_t)hash & (g->cse_cap - 1);
    while (g->cse[i].id && g->cse[i].hash != hash) i = (i + 1) & (g->cse_cap - 1);
    return i;
}

/* A live node with the same content as n (same op on the same sources with
 * the same arguments), or NULL. */
static g_node_t *s_cse_find(g_state_t *g, const g_node_t *n) {
    if (!g->cse_cap) return NULL;
    g_cse_t *e = &g->cse[s_cse_slot(g, n->hash)];
    g_node_t *m = e->id ? g_find(g, e->id) : NULL;
    if (!m || m->op != n->op || m->dtype != n->dtype || !ta_shape_equal(&m->shape, &n->shape) || m->nsrc != n->nsrc ||
        m->nargs != n->nargs || m->grad != n->grad || m->device != n->device)
        return NULL;
    for (int i = 0; i < n->nsrc; i++)
        if (m->src[i] != n->src[i]) return NULL;
    for (int i = 0; i < n->nargs; i++)
        if (m->args[i] != n->args[i]) return NULL;
    return m;
}

static void s_cse_add(g_state_t *g, const g_node_t *n) {
    if ((g->cse_count + 1) * 2 > g->cse_cap) {
        size_t cap = g->cse_cap ? g->cse_cap * 2 : 1024;
        g_cse_t *old = g->cse, *fresh = ta_calloc(cap, sizeof *fresh);
        if (!fresh) return; /* sharing is an optimization: go without */
        size_t oldcap = g->cse_cap;
        g->cse = fresh;
        g->cse_cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].id) g->cse[s_cse_slot(g, old[i].hash)] = old[i];
        ta_free(old);
    }
    g_cse_t *e = &g->cse[s_cse_slot(g, n->hash)];
    if (!e->id) g->cse_count++;
    e->hash = n->hash;
    e->id = n->id;
}

void g_cse_remove(g_state_t *g, const g_node_t *n) {
    if (!g->cse_cap || !n->hash) return;
    size_t i = s_cse_slot(g, n->hash);
    if (g->cse[i].id != n->id) return;
    g->cse[i].id = 0;
    g->cse_count--;
    for (size_t j = (i + 1) & (g->cse_cap - 1); g->cse[j].id; j = (j + 1) & (g->cse_cap - 1)) {
        g_cse_t e = g->cse[j];
        g->cse[j].id = 0;
        g->cse[s_cse_slot(g, e.hash)] = e;
    }
}

/* ------------------------------------------------------------- releasing */

/* Sends the executor the buffers a release dropped.  The executor frees them
 * after every RUN the graph sent before, so no plan in flight loses one. */
int g_send_frees(ta_actor_t *self, g_state_t *g, const uint64_t *ids, size_t n) {
    if (!n) return TACT_OK;
    /* Every executor hears (each frees those it holds): a dropped buffer's
     * node may be gone already, and with it which device had it. */
    for (int d = 0; d < g->w.ndevices; d++) {
        /* A lost worker's buffers went with it. */
        if (ta_rt_lost(ta_actor_rt(self), g->w.device[d].executor, NULL, 0)) continue;
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_FREE);
        m.as.free.bufs = ta_u64s(ids, n);
        int rc = ta_actor_send(self, g->w.device[d].executor, &m);
        if (rc != TACT_OK) return rc;
    }
    return TACT_OK;
}

/* Counts one more base naming buf; TACT_ENOMEM leaves the count as it was. */
static int s_buf_hold(g_state_t *g, uint64_t buf) {
    uint64_t v = 0;
    ta_map_get(&g->bufs, buf, &v);
    return ta_map_put(&g->bufs, buf, v + 2);
}

/* A base naming buf goes (allocated: it had the buffer); true when the
 * buffer is to be freed now. */
static int s_buf_release(g_state_t *g, uint64_t buf, int allocated) {
    uint64_t v;
    if (!ta_map_get(&g->bufs, buf, &v)) return 0;
    v |= (uint64_t)(allocated != 0);
    if (v >= 4) {
        ta_map_put(&g->bufs, buf, v - 2); /* replaces: no allocation */
        return 0;
    }
    ta_map_del(&g->bufs, buf);
    return (int)(v & 1);
}

/* Drops n if nothing refers to it any more, and then its sources in turn
 * (with a work list: chains of assigns can be very long); the buffers of
 * dropped bases are appended to *frees. */
void g_maybe_drop(g_state_t *g, g_node_t *n, uint64_t **frees, size_t *nfrees, size_t *frees_cap) {
    uint64_t *work = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (n && !n->client_ref && !n->children) {
            uint64_t deps[4];
            int nd = 0;
            for (int i = 0; i < n->nsrc; i++) deps[nd++] = n->src[i];
            if (n->is_view) deps[nd++] = n->base;
            /* An assign's buffer is its target's: the last base naming a
             * buffer frees it. */
            if (!n->is_view && s_buf_release(g, n->buf, n->buffer) &&
                ta_grow((void **)frees, frees_cap, *nfrees + 1, sizeof **frees) == TACT_OK)
                (*frees)[(*nfrees)++] = n->buf;
            g_cse_remove(g, n);
            s_remove(g, n->id);
            s_node_free(g, n);
            for (int i = 0; i < nd; i++) {
                g_node_t *d = g_find(g, deps[i]);
                if (!d) continue;
                d->children--;
                if (ta_grow((void **)&work, &cap, len + 1, sizeof *work) == TACT_OK) work[len++] = deps[i];
            }
        }
        if (!len) break;
        n = g_find(g, work[--len]);
    }
    ta_free(work);
}

/* A base whose buffer is final needs its sources no more (kernels read the
 * buffer), unless a backward may still go through it: they are let go, so
 * a training loop does not keep every step's graph alive through its
 * assigns.  An assign lets its target go too: the buffer they share stays
 * while either names it. */
void g_drop_sources(g_state_t *g, g_node_t *n, uint64_t **frees, size_t *nfrees, size_t *frees_cap) {
    if (n->is_view || !n->buffer || !n->sealed || (n->grad && !n->consumed)) return;
    int keep = 0;
    if (n->nsrc <= keep) return;
    g_cse_remove(g, n);
    n->hash = 0;
    uint64_t src[3];
    int ns = n->nsrc;
    memcpy(src, n->src, sizeof src);
    n->nsrc = keep;
    for (int i = keep; i < ns; i++) {
        g_node_t *d = g_find(g, src[i]);
        if (!d) continue;
        d->children--;
        g_maybe_drop(g, d, frees, nfrees, frees_cap);
    }
}

/* ------------------------------------------------------------ adding ops */

static g_node_t *s_new_node(g_state_t *g, uint64_t id) {
    if (g_find(g, id)) return NULL; /* never two nodes of one id (the map would lose one) */
    g_node_t *n = s_take(&g->free_nodes, &g->nfree_nodes, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->id = id;
    n->base = id;
    if (s_insert(g, n) != TACT_OK) {
        s_keep(&g->free_nodes, &g->nfree_nodes, n);
        return NULL;
    }
    return n;
}

static void s_ref(g_state_t *g, uint64_t id) {
    g_node_t *n = g_find(g, id);
    if (n) n->children++;
}

/* The view stack of src as seen from a new view: its own, or a fresh one. */
static int s_view_of(const g_node_t *src, ta_vstack_t *st) {
    if (src->is_view) ta_vstack_copy(st, src->st);
    else ta_vstack_init(st, src->shape.ndim, src->shape.d);
    return 0;
}

/* Applies movement op n->op (with n's args and shape) to st. */
static int s_apply(const g_node_t *n, ta_vstack_t *st) {
    int64_t pairs[TA_MAX_DIMS][2];
    int order[TA_MAX_DIMS];
    switch (n->op) {
    case TA_OP_RESHAPE: return ta_vstack_reshape(st, n->shape.ndim, n->shape.d);
    case TA_OP_EXPAND: return ta_vstack_expand(st, n->shape.d);
    case TA_OP_PERMUTE:
        for (int k = 0; k < n->nargs; k++) order[k] = (int)n->args[k];
        return ta_vstack_permute(st, order);
    case TA_OP_PAD:
    case TA_OP_SHRINK:
        for (int k = 0; k < n->nargs / 2; k++) pairs[k][0] = n->args[2 * k], pairs[k][1] = n->args[2 * k + 1];
        return n->op == TA_OP_PAD ? ta_vstack_pad(st, (const int64_t(*)[2])pairs) : ta_vstack_shrink(st, (const int64_t(*)[2])pairs);
    case TA_OP_STRIDE: return ta_vstack_stride(st, n->args);
    default: return -1;
    }
}

/* Recomputes an op's result shape from its sources with the client's own
 * functions, so a malformed batch is refused instead of corrupting the graph. */
static int s_validate(g_state_t *g, g_node_t *n, ta_error_t *err) {
    g_node_t *src[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n->nsrc; i++)
        if (!(src[i] = g_find(g, n->src[i])))
            return ta_error_set(err, TACT_EINVAL, "op %" PRIu64 " (%s): unknown source %" PRIu64, n->id, ta_op_name(n->op), n->src[i]);
    ta_shape_t want;
    int rc = TACT_OK, arity = ta_op_arity(n->op);
    ta_op_class_t cls = ta_op_class(n->op);
    if (n->op == TA_OP_CONST || n->op == TA_OP_EMPTY) arity = 0;
    if (n->nsrc != arity) return ta_error_set(err, TACT_EINVAL, "op %" PRIu64 " (%s): %d sources", n->id, ta_op_name(n->op), n->nsrc);
    if (n->op == TA_OP_IOTA && (n->dtype != TACT_INT32 || n->shape.ndim != 1 || n->shape.d[0] > INT32_MAX || n->nargs))
        return ta_error_set(err, TACT_EINVAL, "op %" PRIu64 " (IOTA): one dim of at most 2^31-1 int32 positions, no arguments", n->id);
    if (n->op == TA_OP_COPY && (src[0]->dtype != n->dtype || src[0]->device == n->device))
        return ta_error_set(err, TACT_EINVAL, "op %" PRIu64 " (COPY): a copy goes to another device, with its source's dtype", n->id);
    switch (cls) {
    case TA_OPC_UNARY:
    case TA_OPC_BINARY:
    case TA_OPC_TERNARY:
        want = src[0]->shape;
        for (int i = 1; i < n->nsrc; i++)
            if (!ta_shape_equal(&src[i]->shape, &want)) rc = TACT_ESHAPE;
        break;
    case TA_OPC_REDUCE:
    case TA_OPC_MOVEMENT:
        rc = ta_shape_of_op(n->op, &src[0]->shape, n->nargs, n->args, &n->shape, &want, NULL);
        break;
    default: /* CONST, IOTA, EMPTY, CONTIGUOUS */
        want = n->nsrc ? src[0]->shape : n->shape;
        break;
    }
    if (rc == TACT_OK && !ta_shape_equal(&want, &n->shape)) rc = TACT_ESHAPE;
    if (rc == TACT_OK && ta_shape_check_size(&n->shape, ta_op_name(n->op), err) != TACT_OK) return TACT_ESHAPE;
    if (rc != TACT_OK) return ta_error_set(err, rc, "op %" PRIu64 " (%s): shape does not follow from its sources", n->id, ta_op_name(n->op));
    return TACT_OK;
}

/* Makes nd (a fresh node) a view of same with the same shape: a duplicate
 * or a folded identity (x+0, x*1) reads same's data. */
static int s_make_alias(g_state_t *g, g_node_t *nd, g_node_t *same, ta_error_t *err) {
    if (!(nd->st = s_stack_new(g))) return ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
    nd->op = same->op;
    nd->dtype = same->dtype;
    nd->shape = same->shape;
    nd->nsrc = 1;
    nd->src[0] = same->id;
    nd->client_ref = 1;
    s_view_of(same, nd->st);
    nd->is_view = 1;
    nd->base = same->is_view ? same->base : same->id;
    nd->alias = same->alias ? same->alias : same->id;
    nd->buf = nd->base;
    nd->device = same->device; /* a view is where its base is */
    s_ref(g, same->id);
    s_ref(g, nd->base);
    return TACT_OK;
}

/* True (with the value) when n holds one value everywhere: a CONST, or a
 * view of one without a mask (padding would bring zeros in). */
static int s_const_value(g_state_t *g, const g_node_t *n, ta_value_t *v) {
    const g_node_t *b = n->is_view ? g_find(g, n->base) : n;
    if (!b || b->op != TA_OP_CONST || b->nargs != 1) return 0;
    if (n->is_view)
        for (int i = 0; i < n->st->nviews; i++)
            if (n->st->views[i].has_mask) return 0;
    *v = ta_value_from_bits(b->dtype, (uint64_t)b->args[0]);
    return 1;
}

/*
 * Constant folding, as the reference folds: an elementwise op on constants
 * becomes a constant; x+0 and x*1 are x; x*0 is 0 (ignoring a NaN or inf
 * in x, as the reference does: DESIGN.md trap 2); x*-1 is -x; -(-x) is x.
 * Returns 1 when tmp was rewritten (into a CONST, or *alias set to the node
 * it equals), 0 when nothing folds.
 */
static int s_fold(g_state_t *g, g_node_t *tmp, g_node_t **alias) {
    ta_op_class_t cls = ta_op_class(tmp->op);
    if (cls != TA_OPC_UNARY && cls != TA_OPC_BINARY && cls != TA_OPC_TERNARY) return 0;
    g_node_t *src[3];
    ta_value_t val[3];
    int nconst = 0, isconst[3] = {0, 0, 0};
    for (int i = 0; i < tmp->nsrc; i++) {
        src[i] = g_find(g, tmp->src[i]);
        if (src[i] && s_const_value(g, src[i], &val[i])) isconst[i] = 1, nconst++;
    }
    /* A differentiable op on constants stays: a constant the program asked
     * a gradient for must keep its path to the loss. */
    if (nconst == tmp->nsrc && tmp->op != TA_OP_BITCAST && !tmp->grad) {
        ta_value_t r;
        if (ta_fold_eval(tmp->op, tmp->dtype, src[tmp->op == TA_OP_WHERE ? 1 : 0]->dtype, tmp->nsrc, val, &r) == 0) {
            tmp->op = TA_OP_CONST;
            tmp->nsrc = 0;
            tmp->nargs = 1;
            tmp->args[0] = (int64_t)ta_value_bits(tmp->dtype, r);
            return 1;
        }
    }
    if (tmp->op == TA_OP_NEG && src[0]->op == TA_OP_NEG && !src[0]->is_view) {
        *alias = g_find(g, src[0]->src[0]);
        return *alias != NULL;
    }
    if ((tmp->op != TA_OP_ADD && tmp->op != TA_OP_MUL) || nconst != 1) return 0;
    int c = isconst[0] ? 0 : 1, x = 1 - c;
    tact_dtype d = tmp->dtype;
    if (tmp->op == TA_OP_ADD && ta_fold_is(d, val[c], 0)) *alias = src[x];
    else if (tmp->op == TA_OP_MUL && ta_fold_is(d, val[c], 1)) *alias = src[x];
    else if (tmp->op == TA_OP_MUL && ta_fold_is(d, val[c], 0) && !tmp->grad) *alias = src[c]; /* differentiable: x keeps its (zero) gradient */
    else if (tmp->op == TA_OP_MUL && ta_fold_is(d, val[c], -1) && !ta_dtype_is_bool(d)) {
        tmp->op = TA_OP_NEG;
        tmp->nsrc = 1;
        tmp->src[0] = src[x]->id;
        return 1;
    } else {
        return 0;
    }
    return 1;
}

/* A CONTIGUOUS base the builder makes itself (an id above the client's):
 * a copy of src with a buffer of its own, for a view stack that grew too
 * deep or an assign that reads its own target through a view.  Returns it,
 * or NULL on allocation failure. */
static g_node_t *s_internal_copy(g_state_t *g, g_node_t *src) {
    g_node_t *c = s_new_node(g, g->next_internal++);
    if (!c) return NULL;
    c->op = TA_OP_CONTIGUOUS;
    c->dtype = src->dtype;
    c->shape = src->shape;
    c->nsrc = 1;
    c->src[0] = src->id;
    c->buf = c->id;
    c->grad = 1; /* a copy passes a gradient on */
    c->device = src->device;
    if (s_buf_hold(g, c->buf) != TACT_OK) {
        s_remove(g, c->id);
        s_node_free(g, c);
        return NULL;
    }
    s_ref(g, src->id);
    return c;
}

/* Adds one op record [id, op, dtype, [shape], [srcs], [args]]. */
int g_add_op(g_state_t *g, const ta_node_rec_t *r, ta_error_t *err) {
    uint64_t id = r->id;
    if (r->op >= TA_OP__COUNT || !ta_dtype_valid((int)r->dtype) || r->base || r->st.n || (r->flags & ~(uint64_t)TA_NODE_GRAD) ||
        r->bufref || r->device >= (uint64_t)g->w.ndevices)
        return ta_error_set(err, TACT_EPROTO, "op batch: op %" PRIu64 ": malformed record", id);
    if (!id || g_find(g, id)) return ta_error_set(err, TACT_EPROTO, "op batch: id %" PRIu64 " is %s", id, id ? "taken" : "0");
    g_node_t tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.id = id;
    tmp.op = (ta_op_t)r->op;
    tmp.dtype = (tact_dtype)r->dtype;
    if (ta_shape_make(&tmp.shape, (int)r->n_shape, r->shape, "op batch", NULL) != TACT_OK)
        return ta_error_set(err, TACT_EPROTO, "op batch: op %" PRIu64 ": bad shape", id);
    tmp.nsrc = (int)r->n_srcs;
    for (int i = 0; i < tmp.nsrc; i++) tmp.src[i] = r->srcs[i];
    tmp.nargs = (int)r->n_args;
    memcpy(tmp.args, r->args, sizeof *tmp.args * r->n_args);
    tmp.grad = (r->flags & TA_NODE_GRAD) != 0;
    tmp.device = (int)r->device;
    /* A source that duplicates another node is read as that node, so
     * chains of duplicates are found duplicate too; but not by a
     * differentiable op (never shared anyway): its source may be a leaf
     * the program asks a gradient for, the duplicate of another one's
     * (two zeros() of one shape), and must stay on its own path.  A
     * differentiable alias stays on the path too (it may be a target). */
    for (int i = 0; i < tmp.nsrc; i++) {
        g_node_t *sn = g_find(g, tmp.src[i]);
        if (sn && sn->alias && !sn->grad && !tmp.grad) tmp.src[i] = sn->alias;
    }
    ta_op_class_t cls = ta_op_class(tmp.op);
    if (cls == TA_OPC_BUFFER || tmp.op == TA_OP_CUSTOM)
        return ta_error_set(err, TACT_EINVAL, "op %" PRIu64 ": %s is not supported yet", id, ta_op_name(tmp.op));
    int rc = s_validate(g, &tmp, err);
    if (rc != TACT_OK) return rc;
    tmp.buf = id;
    if (tmp.op == TA_OP_COPY) {
        /* A copy moves a whole buffer from its start: a view that is not
         * laid out so (a gradient's expand, say) is made contiguous first. */
        g_node_t *src = g_find(g, tmp.src[0]);
        if (src->is_view && !ta_vstack_contiguous(src->st)) {
            g_node_t *c = s_internal_copy(g, src);
            if (!c) return ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
            tmp.src[0] = c->id;
        }
    }
    if (tmp.op == TA_OP_ASSIGN) {
        /* An assign writes into its target's buffer: the target must be a
         * base, and the value must match it. */
        g_node_t *t = g_find(g, tmp.src[0]), *v = g_find(g, tmp.src[1]);
        if (v->dtype != t->dtype || !ta_shape_equal(&v->shape, &t->shape))
            return ta_error_set(err, TACT_EINVAL, "assign %" PRIu64 ": value and target differ in dtype or shape", id);
        /* A target that is a view (say a shared duplicate, or contiguous() of
         * a buffer) shares its base's buffer with others, and a lazy target
         * has none yet: the assign gets a buffer of its own, which is what
         * the client sees. */
        tmp.buf = t->is_view || !t->buffer ? id : t->buf;
        g_node_t *vb = v->is_view ? g_find(g, v->base) : NULL;
        if (vb && vb->buf == tmp.buf) {
            g_node_t *c = s_internal_copy(g, v);
            if (!c) return ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
            tmp.src[1] = c->id;
        }
    }
    /* Folding first, then common subexpressions: an op already in the
     * graph makes this node a view of the existing one (never EMPTY, which
     * holds new data, ASSIGN, or CONTIGUOUS, the user's way to a buffer of
     * one's own). */
    g_node_t *same = NULL;
    if (tmp.op != TA_OP_ASSIGN && tmp.op != TA_OP_COPY) s_fold(g, &tmp, &same);
    /* A node stays on its device: no folding into a node of another. */
    if (same && same->device != tmp.device) same = NULL;
    /* A differentiable op is never shared: a backward consumes what it
     * goes through, and a graph built again must be new (as in the
     * reference, where each op is a Function of its own). */
    if (tmp.op != TA_OP_EMPTY && tmp.op != TA_OP_ASSIGN && tmp.op != TA_OP_CONTIGUOUS && !same && !tmp.grad) {
        tmp.hash = s_content_hash(&tmp);
        same = s_cse_find(g, &tmp);
    }
    g_node_t *nd = s_new_node(g, id);
    if (!nd) return ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
    if (same) {
        g->cse_hits++;
        nd->grad = tmp.grad;
        return s_make_alias(g, nd, same, err);
    }
    *nd = tmp;
    nd->base = id;
    if (nd->hash) s_cse_add(g, nd);
    nd->client_ref = 1;
    nd->writes = tmp.op == TA_OP_EMPTY && tmp.nargs == 1 && tmp.args[0] == 1;
    nd->buffer = nd->writes; /* the client's bytes are on their way to the executor */
    for (int i = 0; i < nd->nsrc; i++) s_ref(g, nd->src[i]);
    g_node_t *s0 = nd->nsrc ? g_find(g, nd->src[0]) : NULL;
    int same_device = s0 && s0->device == nd->device;
    if (cls == TA_OPC_MOVEMENT || (tmp.op == TA_OP_CONTIGUOUS && same_device && s0->is_view && ta_vstack_contiguous(s0->st)) ||
        (tmp.op == TA_OP_CONTIGUOUS && same_device && !s0->is_view)) {
        /* A view: movement folded into the source's stack.  contiguous()
         * of something already laid out contiguously is a view too. */
        ta_vstack_t *st = s_stack_new(g); /* built in place: a stack is 3 KiB */
        if (!st) return ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
        s_view_of(s0, st);
        if (cls == TA_OPC_MOVEMENT && s_apply(nd, st) != 0) {
            /* Too many stacked views: the movement applies to a copy. */
            g_node_t *c = s_internal_copy(g, s0);
            if (c) {
                g_find(g, nd->src[0])->children--;
                nd->src[0] = c->id;
                c->children++;
                s0 = c;
                s_view_of(s0, st);
            }
            if (!c || s_apply(nd, st) != 0) {
                s_keep(&g->free_stacks, &g->nfree_stacks, st);
                return c ? ta_error_set(err, TACT_EINVAL, "op %" PRIu64 ": cannot apply %s", id, ta_op_name(nd->op))
                         : ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
            }
        }
        nd->st = st;
        nd->is_view = 1;
        nd->base = s0->is_view ? s0->base : s0->id;
        nd->buf = nd->base;
        nd->device = g_find(g, nd->base)->device; /* a view is where its base is */
        s_ref(g, nd->base);
    }
    /* A base not counted would free its buffer early: the op is refused. */
    if (!nd->is_view && s_buf_hold(g, nd->buf) != TACT_OK) {
        for (int i = 0; i < nd->nsrc; i++) {
            g_node_t *d = g_find(g, nd->src[i]);
            if (d) d->children--;
        }
        g_cse_remove(g, nd);
        s_remove(g, nd->id);
        s_node_free(g, nd);
        return ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
    }
    return TACT_OK;
}

/* -------------------------------------------------------------- realizing */

/* A realize whose subgraph is larger than this goes to the scheduler in
 * consecutive parts, each within the message limit: the nodes of a part
 * that later parts read become its targets. */
enum { S_PART_NODES = 1 << 15, S_PART_BYTES = 4 << 20 };


/* Collects everything the pending targets need that has no buffer yet,
 * sources before users (depth first, with a stack: chains can be millions
 * long).  A view brings its base; a base with a buffer is a leaf.  Sets
 * each node's pos to its index in *list. */
static int s_collect(g_state_t *g, g_node_t ***list, size_t *len) {
    g_visit_t *stack = NULL;
    size_t depth = 0, cap = 0, lcap = 0;
    int rc = TACT_OK;
    g->stamp++;
    for (size_t t = g->ntargets; t-- > 0 && rc == TACT_OK;) {
        g_node_t *root = g_find(g, g->targets[t]), *b = root && root->is_view ? g_find(g, root->base) : root;
        if (!root || !b) {
            rc = TACT_EINVAL;
            break;
        }
        /* A target whose data exists needs nothing (a view of a buffer is
         * read through its view); leaving it out makes every part of a
         * large realize compute something. */
        if (b->buffer) continue;
        if (ta_grow((void **)&stack, &cap, depth + 1, sizeof *stack) != TACT_OK) {
            rc = TACT_ENOMEM;
            break;
        }
        stack[depth++] = (g_visit_t){root, 0};
    }
    /* The targets were pushed last first, so the first is collected first. */
    while (depth && rc == TACT_OK) {
        g_visit_t v = stack[--depth];
        g_node_t *n = v.n;
        if (v.exit) {
            if (ta_grow((void **)list, &lcap, *len + 1, sizeof **list) != TACT_OK) {
                rc = TACT_ENOMEM;
                break;
            }
            n->pos = *len;
            (*list)[(*len)++] = n;
            continue;
        }
        if (n->mark == g->stamp) continue;
        n->mark = g->stamp;
        n->internal = 0;
        uint64_t next[3];
        int nn = 0;
        if (n->is_view) next[nn++] = n->base;
        else if (!n->buffer)
            for (int i = 0; i < n->nsrc; i++) next[nn++] = n->src[i];
        if (ta_grow((void **)&stack, &cap, depth + 1 + (size_t)nn, sizeof *stack) != TACT_OK) {
            rc = TACT_ENOMEM;
            break;
        }
        stack[depth++] = (g_visit_t){n, 1};
        for (int i = nn; i-- > 0;) {
            g_node_t *d = g_find(g, next[i]);
            if (d && d->mark != g->stamp) stack[depth++] = (g_visit_t){d, 0};
        }
    }
    ta_free(stack);
    return rc;
}

/*
 * Packs one node of the subgraph as a NODE record by position, so that two
 * subgraphs of the same structure pack to the same bytes whatever their
 * ids: id, srcs and base are positions of the node and of earlier nodes (a
 * base's base is its own position); st is a view's stack; flags bit 0 =
 * has a buffer, 1 = must be kept after this realize (the client holds it,
 * or a node outside the subgraph reads it), 2 = its bytes come from the
 * client; bufref is the position of the first node whose data lives in the
 * same buffer (an assign's is its target's).  The ids and buffer ids travel
 * beside it, one per node.
 */
static int s_pack_node(g_state_t *g, const g_node_t *n, uint64_t bufref, ta_node_rec_t *r, msgpack_packer *pk) {
    ta_view_rec_t views[TA_MAX_VIEWS];
    int leaf = !n->is_view && n->buffer;
    memset(r, 0, sizeof *r);
    r->id = n->pos;
    r->op = (uint64_t)n->op;
    r->dtype = (uint64_t)n->dtype;
    r->n_shape = (uint32_t)n->shape.ndim;
    memcpy(r->shape, n->shape.d, sizeof *r->shape * r->n_shape);
    r->n_srcs = leaf || n->is_view ? 0 : (uint32_t)n->nsrc;
    for (uint32_t i = 0; i < r->n_srcs; i++) r->srcs[i] = g_find(g, n->src[i])->pos;
    r->n_args = (uint32_t)n->nargs;
    memcpy(r->args, n->args, sizeof *r->args * r->n_args);
    r->device = (uint64_t)n->device;
    r->base = n->is_view ? g_find(g, n->base)->pos : n->pos;
    if (n->is_view) r->st = ta_vstack_recs(n->st, views);
    int keep = n->client_ref || n->children > n->internal;
    r->flags = (uint64_t)((n->buffer ? 1 : 0) | (keep ? 2 : 0) | (n->writes ? 4 : 0));
    r->bufref = bufref;
    return ta_rec_pack(TA_REC_NODE, r, pk);
}

/* True while some target's base has no buffer yet. */
static int s_targets_pending(g_state_t *g) {
    for (size_t i = 0; i < g->ntargets; i++) {
        g_node_t *t = g_find(g, g->targets[i]);
        g_node_t *b = t && t->is_view ? g_find(g, t->base) : t;
        if (b && !b->buffer) return 1;
    }
    return 0;
}

/* Sends the next part of the pending realize to the scheduler: the whole
 * subgraph when it is small enough, else its first nodes with the ones
 * later nodes read as extra targets. */
static int s_schedule_next(ta_actor_t *self, g_state_t *g) {
    g_node_t **list = NULL;
    size_t len = 0;
    int rc = s_collect(g, &list, &len);
    msgpack_sbuffer nodes;
    msgpack_sbuffer_init(&nodes);
    msgpack_packer pk;
    /* Where the part ends: its last node brings it past either bound. */
    size_t cut = len, bytes = 0;
    int computes = 0; /* the part has a node to compute: a part of leaves alone would make no progress, forever */
    for (size_t i = 0; i < len; i++) {
        /* An upper bound of its packed size (msgpack integers take at most 9 bytes). */
        const g_node_t *c = list[i];
        bytes += 64 + 9 * (size_t)(c->shape.ndim + c->nsrc + c->nargs);
        for (int v = 0; c->is_view && v < c->st->nviews; v++) bytes += 40 * (size_t)(c->st->views[v].ndim + 1);
        computes |= !c->is_view && !c->buffer;
        if (i + 1 < len && computes && (i + 1 >= g->part_nodes || bytes >= g->part_bytes)) {
            cut = i + 1;
            break;
        }
    }
    /* Consumers inside the part, counted as children counts them. */
    for (size_t i = 0; i < cut; i++) {
        g_node_t *c = list[i];
        for (int k = 0; k < c->nsrc; k++) {
            g_node_t *d = g_find(g, c->src[k]);
            if (d && d->mark == g->stamp && d->pos < cut) d->internal++;
        }
        g_node_t *b = c->is_view ? g_find(g, c->base) : NULL;
        if (b && b->mark == g->stamp && b->pos < cut) b->internal++;
    }
    /* The nodes, by position. */
    msgpack_packer_init(&pk, &nodes, msgpack_sbuffer_write);
    ta_node_rec_t *rec = ta_malloc(sizeof *rec);
    int bad = rc != TACT_OK || !rec || ta_recs_pack_header(&pk, cut);
    ta_map_t first = {0}; /* buffer id -> position of its first node */
    for (size_t i = 0; i < cut && !bad; i++) {
        uint64_t ref = i;
        if (!ta_map_get(&first, list[i]->buf, &ref)) bad = ta_map_put(&first, list[i]->buf, i) != TACT_OK;
        bad = bad || s_pack_node(g, list[i], ref, rec, &pk);
    }
    ta_map_fini(&first);
    ta_free(rec);
    /* Ids and buffer ids beside the nodes, then the targets: the realize's
     * own, and in a part, what later nodes read. */
    uint64_t *ids = ta_malloc(sizeof *ids * (cut + 1)), *bufs = ta_malloc(sizeof *bufs * (cut + 1));
    bad = bad || !ids || !bufs;
    for (size_t i = 0; i < cut && !bad; i++) {
        ids[i] = list[i]->id;
        bufs[i] = list[i]->buf;
    }
    uint64_t *tpos = NULL;
    size_t ntpos = 0, tpos_cap = 0;
    for (size_t i = 0; !bad && i < g->ntargets; i++) {
        g_node_t *t = g_find(g, g->targets[i]);
        if (!t || t->mark != g->stamp || t->pos >= cut) continue;
        bad = ta_grow((void **)&tpos, &tpos_cap, ntpos + 1, sizeof *tpos) != TACT_OK;
        if (!bad) tpos[ntpos++] = t->pos;
    }
    for (size_t j = cut; j < len && !bad; j++) {
        g_node_t *c = list[j];
        uint64_t deps[3];
        int nd = 0;
        if (c->is_view) deps[nd++] = c->base;
        else if (!c->buffer)
            for (int k = 0; k < c->nsrc; k++) deps[nd++] = c->src[k];
        for (int k = 0; k < nd && !bad; k++) {
            g_node_t *d = g_find(g, deps[k]);
            if (!d || d->pos >= cut || d->mark != g->stamp || d->internal < 0) continue;
            d->internal = -1; /* listed once */
            bad = ta_grow((void **)&tpos, &tpos_cap, ntpos + 1, sizeof *tpos) != TACT_OK;
            if (!bad) tpos[ntpos++] = d->pos;
        }
    }
    ta_free(list);
    if (rc == TACT_OK) rc = bad ? TACT_ENOMEM : TACT_OK;
    if (rc == TACT_OK) {
        ta_msg_t s;
        ta_msg_init(&s, TA_MSG_SCHEDULE);
        s.corr = ta_actor_new_corr(self);
        s.as.schedule.realize = g->realize;
        s.as.schedule.nodes = ta_recs_raw(TA_REC_NODE, nodes.data, nodes.size, cut);
        s.as.schedule.targets = ta_u64s(tpos, ntpos);
        s.as.schedule.ids = ta_u64s(ids, cut);
        s.as.schedule.bufs = ta_u64s(bufs, cut);
        rc = ta_actor_send(self, g->w.scheduler, &s);
        /* The part's SCHEDULED comes before anything else is processed. */
        if (rc == TACT_OK) {
            g->awaited = s.corr;
            ta_actor_await(self, s.corr, g->w.scheduler);
        }
    }
    msgpack_sbuffer_destroy(&nodes);
    ta_free(ids);
    ta_free(bufs);
    ta_free(tpos);
    return rc;
}

static void s_end_realize(g_state_t *g) {
    g->realize = g->corr = g->awaited = 0;
    g->ntargets = 0;
    g->nreturns = 0;
}

/* Tells the executor where the part just scheduled runs in the graph's
 * stream (plan 0: nothing to run, only the answer), and that the client's
 * answer follows its last part. */
static int s_send_run(ta_actor_t *self, g_state_t *g, uint64_t plan, int final) {
    ta_msg_t r;
    ta_msg_init(&r, TA_MSG_RUN);
    r.corr = g->corr;
    r.as.run.realize = g->realize;
    r.as.run.plan = plan;
    r.as.run.reply_to = g->reply_to;
    r.as.run.final = (uint64_t)final;
    /* Every executor runs its share of the part and answers the client,
     * after the last part with the bytes of the small targets it holds. */
    for (int d = 0; d < g->w.ndevices; d++) {
        uint64_t mine[3 * TA_RETURNS_MAX];
        size_t n = 0;
        for (int i = 0; final && i < g->nreturns; i++)
            if (g->returns[4 * i] == (uint64_t)d) memcpy(&mine[n], &g->returns[4 * i + 1], 3 * sizeof *mine), n += 3;
        r.as.run.returns = ta_u64s(mine, n);
        /* A lost worker takes no part (what needed it fails where it waits for it). */
        if (ta_rt_lost(ta_actor_rt(self), g->w.device[d].executor, NULL, 0)) continue;
        int rc = ta_actor_send(self, g->w.device[d].executor, &r);
        if (rc != TACT_OK) return rc;
    }
    return TACT_OK;
}

/* The realize failed here (its next part could not be scheduled): the
 * executor gives the client the one answer, after the parts sent before,
 * so every realize is answered once, in order, by the executor. */
static void s_fail_realize(ta_actor_t *self, g_state_t *g, int code, const char *what, const char *text) {
    ta_msg_t r;
    ta_msg_init(&r, TA_MSG_RUN);
    r.corr = g->corr;
    r.as.run.realize = g->realize;
    r.as.run.reply_to = g->reply_to;
    r.as.run.final = 1;
    r.as.run.status = code < 0 ? code : TACT_EACTOR;
    r.as.run.what = ta_bytes_str(what);
    r.as.run.text = ta_bytes_str(text);
    /* Each executor answers (a send that fails broke the pipeline, which
     * the client's wait notices). */
    for (int d = 0; d < g->w.ndevices; d++)
        if (!ta_rt_lost(ta_actor_rt(self), g->w.device[d].executor, NULL, 0)) ta_actor_send(self, g->w.device[d].executor, &r);
    s_end_realize(g);
}


/* What the client says in a REALIZE about realizes it has waited for: the
 * nodes of failed ones lose their buffers (a later realize computes them
 * again), and the buffers of settled ones are final (their sources may go:
 * the buffers dropped with them are appended to *frees). */
static void s_settle(g_state_t *g, const ta_realize_msg_t *r, uint64_t **frees, size_t *nfrees, size_t *frees_cap) {
    ta_u64s_it_t it;
    uint64_t failed;
    ta_u64s_begin(&it, &r->failed);
    while (ta_u64s_next(&it, &failed))
        for (size_t i = 0; i < g->ngiven; i++) {
            g_node_t *nd = g->given[i].realize == failed ? g_find(g, g->given[i].id) : NULL;
            if (nd) nd->buffer = 0;
        }
    size_t keep = 0;
    while (keep < g->ngiven && g->given[keep].realize <= r->settled) {
        g_node_t *nd = g_find(g, g->given[keep].id);
        if (nd && nd->buffer) {
            nd->sealed = 1;
            g_drop_sources(g, nd, frees, nfrees, frees_cap);
        }
        keep++;
    }
    if (!keep) return;
    memmove(g->given, g->given + keep, sizeof *g->given * (g->ngiven - keep));
    g->ngiven -= keep;
}

/* A request of the client after a one-way message of its was refused is
 * answered with that error (once): the client reports it there. */
int g_refused(ta_actor_t *self, g_state_t *g) {
    int code = g->refused.code;
    g->refused.code = 0;
    return ta_actor_fail(self, code, "%s", g->refused.text);
}

/* Starts realizing the ids of a REALIZE: sends the first part to the
 * scheduler, or only the RUN when everything already has a buffer. */
static int s_realize(ta_actor_t *self, g_state_t *g, const ta_msg_t *m) {
    const ta_realize_msg_t *rq = &m->as.realize;
    uint64_t *frees = NULL;
    size_t nfrees = 0, frees_cap = 0;
    s_settle(g, rq, &frees, &nfrees, &frees_cap);
    int frc = g_send_frees(self, g, frees, nfrees);
    ta_free(frees);
    if (frc != TACT_OK) return ta_actor_fail(self, frc, "realize: cannot send the frees to the executor");
    if (!rq->realize) return ta_actor_fail(self, TACT_EPROTO, "realize: number 0");
    /* The client awaits a realize's answer from the executors: a realize
     * refused here reaches it through them (s_fail_realize). */
    g->realize = rq->realize;
    g->corr = m->corr;
    g->reply_to = m->sender;
    if (g->refused.code) {
        int code = g->refused.code;
        g->refused.code = 0;
        s_fail_realize(self, g, code, "REALIZE", g->refused.text);
        return TACT_OK;
    }
    if (ta_grow((void **)&g->targets, &g->targets_cap, rq->ids.n, sizeof *g->targets) != TACT_OK) {
        s_fail_realize(self, g, TACT_ENOMEM, "REALIZE", "graph: out of memory");
        return TACT_OK;
    }
    ta_u64s_it_t it;
    uint64_t id;
    int needed = 0;
    g->ntargets = 0;
    g->nreturns = 0;
    ta_u64s_begin(&it, &rq->ids);
    while (ta_u64s_next(&it, &id)) {
        g_node_t *t = g_find(g, id);
        if (!t) {
            char text[96];
            snprintf(text, sizeof text, "realize: unknown tensor %" PRIu64, id);
            s_fail_realize(self, g, TACT_EINVAL, "REALIZE", text);
            return TACT_OK;
        }
        g->targets[g->ntargets++] = id;
        g_node_t *b = t->is_view ? g_find(g, t->base) : t;
        int contiguous = !t->is_view || ta_vstack_contiguous(t->st);
        if (!b->buffer || !contiguous) needed = 1;
        /* A small target read through its base, as READ would (a view
         * that is not contiguous is made so by this realize: read later). */
        uint64_t bytes = (uint64_t)ta_shape_numel(&t->shape) * ta_dtype_size(t->dtype);
        if (contiguous && bytes && bytes <= TA_RETURN_BYTES && g->nreturns < TA_RETURNS_MAX) {
            uint64_t *q = &g->returns[4 * g->nreturns++];
            q[0] = (uint64_t)b->device, q[1] = id, q[2] = b->buf, q[3] = bytes; /* an assign's node names its target's buffer */
        }
    }
    int rc = needed ? s_schedule_next(self, g) : s_send_run(self, g, 0, 1);
    if (!needed || rc != TACT_OK) s_end_realize(g);
    if (rc != TACT_OK) return rc == TACT_ENOMEM ? ta_actor_fail(self, rc, "realize: out of memory") : rc;
    return TACT_OK;
}

/* The awaited SCHEDULED of a part: its nodes get buffers, the executor is
 * told where it runs, and the next part (if any) goes to the scheduler. */
static int s_scheduled(ta_actor_t *self, g_state_t *g, const ta_msg_t *m) {
    ta_u64s_it_t it;
    uint64_t id;
    g->awaited = 0;
    ta_u64s_begin(&it, &m->as.scheduled.ids);
    while (ta_u64s_next(&it, &id)) {
        g_node_t *nd = g_find(g, id);
        if (nd && !nd->is_view && !nd->buffer) {
            if (ta_grow((void **)&g->given, &g->given_cap, g->ngiven + 1, sizeof *g->given) != TACT_OK) {
                s_end_realize(g);
                return ta_actor_fail(self, TACT_ENOMEM, "graph: out of memory");
            }
            g->given[g->ngiven++] = (g_given_t){g->realize, id};
            nd->buffer = 1;
        }
    }
    int more = s_targets_pending(g);
    int rc = s_send_run(self, g, m->corr, !more);
    if (rc == TACT_OK && more) rc = s_schedule_next(self, g);
    if (rc != TACT_OK) s_fail_realize(self, g, rc, "SCHEDULE", rc == TACT_ENOMEM ? "graph: out of memory" : tact_strerror(rc));
    else if (!more) s_end_realize(g);
    return TACT_OK;
}

/* READ: the executor sends the bytes of the tensor's buffer to the client. */
static int s_read(ta_actor_t *self, g_state_t *g, const ta_msg_t *m) {
    if (g->refused.code) return g_refused(self, g);
    g_node_t *t = g_find(g, m->as.read.id);
    if (!t) return ta_actor_fail(self, TACT_EINVAL, "read: unknown tensor %" PRIu64, m->as.read.id);
    g_node_t *b = t->is_view ? g_find(g, t->base) : t;
    if (!b->buffer || (t->is_view && !ta_vstack_contiguous(t->st)))
        return ta_actor_fail(self, TACT_EINVAL, "read: tensor %" PRIu64 " is not realized contiguously", t->id);
    ta_msg_t c;
    ta_msg_init(&c, TA_MSG_COPY_OUT);
    c.corr = m->corr;
    c.as.copy_out.buf = b->buf;
    c.as.copy_out.bytes = (uint64_t)ta_shape_numel(&t->shape) * ta_dtype_size(t->dtype);
    c.as.copy_out.reply_to = m->sender;
    return ta_actor_send(self, g->w.device[b->device].executor, &c);
}

/* ---------------------------------------------------------------- actor */

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    (void)arg;
    g_state_t *g = ta_calloc(1, sizeof *g);
    if (!g) return ta_error_set(err, TACT_ENOMEM, "graph: out of memory");
    g->next_internal = 1ull << 62;
    /* TACT_TEST_PART_BYTES: smaller parts (of SCHEDULEs and BACKWARDs), for
     * the tests of parts. */
    const char *pb = getenv("TACT_TEST_PART_BYTES");
    g->part_bytes = pb && atol(pb) > 0 ? (size_t)atol(pb) : S_PART_BYTES;
    g->part_nodes = S_PART_NODES;
    ta_actor_set_state(self, g);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    g_state_t *g = ta_actor_state(self);
    for (size_t i = 0; i < g->cap; i++)
        if (g->slots[i].id) s_node_free(g, g->slots[i].n);
    s_free_list(g->free_nodes);
    s_free_list(g->free_stacks);
    ta_free(g->slots);
    ta_free(g->given);
    ta_free(g->targets);
    ta_free(g->bw_walked);
    ta_free(g->bw_ids);
    ta_free(g->bw_added);
    ta_map_fini(&g->bw_chosen);
    ta_map_fini(&g->bufs);
    ta_free(g->cse);
    ta_pipeline_fini(&g->w);
    ta_free(g);
}

/* The client's one-way messages: a refusal is kept for its next request. */
static int s_one_way(ta_actor_t *self, g_state_t *g, ta_msg_t *m, ta_error_t *err) {
    switch (m->type) {
    case TA_MSG_OP_BATCH: {
        /* The releases first: what they drop is gone before the new ops
         * come (a new op is never taken for a duplicate of a dropped one). */
        ta_u64s_it_t ri;
        uint64_t id, *frees = NULL;
        size_t nfrees = 0, frees_cap = 0;
        ta_u64s_begin(&ri, &m->as.op_batch.released);
        while (ta_u64s_next(&ri, &id)) {
            g_node_t *nd = g_find(g, id);
            if (nd) {
                nd->client_ref = 0;
                g_maybe_drop(g, nd, &frees, &nfrees, &frees_cap);
            }
        }
        int frc = g_send_frees(self, g, frees, nfrees);
        ta_free(frees);
        if (frc != TACT_OK) return ta_error_set(err, frc, "op batch: cannot send the frees of its releases to the executor");
        ta_recs_it_t it;
        ta_node_rec_t rec;
        if (m->as.op_batch.ops.type != TA_REC_NODE) return ta_error_set(err, TACT_EPROTO, "op batch: not NODE records");
        ta_recs_begin(&it, &m->as.op_batch.ops);
        while (ta_recs_next(&it, &rec)) {
            /* The client's namespace: the gradient engine's ids start at
             * 2^61 and the graph's own at 2^62. */
            if (rec.id >= UINT64_C(1) << 61) return ta_error_set(err, TACT_EPROTO, "op batch: id %" PRIu64 " is outside the client's range", rec.id);
            /* The client computed every shape itself, so this is a bug or a
             * hostile peer: the ops before it stay, the rest is refused. */
            int rc = g_add_op(g, &rec, err);
            if (rc != TACT_OK) return rc;
        }
        return TACT_OK;
    }
    default: { /* WRITE */
        g_node_t *nd = g_find(g, m->as.write.buf);
        if (!nd || !nd->writes) return ta_error_set(err, TACT_EINVAL, "write: tensor %" PRIu64 " takes no data", m->as.write.buf);
        uint64_t want = (uint64_t)ta_shape_numel(&nd->shape) * ta_dtype_size(nd->dtype);
        if (m->bulk.len != want)
            return ta_error_set(err, TACT_EINVAL, "write: tensor %" PRIu64 " holds %" PRIu64 " bytes, got %zu", nd->id, want, m->bulk.len);
        ta_msg_t w;
        ta_msg_init(&w, TA_MSG_WRITE);
        w.as.write.buf = m->as.write.buf;
        ta_msg_pass_bulk(m, &w); /* the client's bytes go on as they came, uncopied */
        int rc = ta_actor_send(self, g->w.device[nd->device].executor, &w);
        return rc == TACT_OK ? TACT_OK : ta_error_set(err, rc, "write: cannot send the bytes to the executor");
    }
    }
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    g_state_t *g = ta_actor_state(self);
    ta_error_t err = {0, ""};
    if (m->type == TA_MSG_CONFIG) {
        int rc = ta_pipeline_configure(self, m, &g->w, &g->configured, TA_ROLE_GRAPH);
        return rc != TACT_OK ? rc : ta_pipeline_ack(self, m);
    }
    if (!g->configured) return ta_actor_fail(self, TACT_EINVAL, "graph: %s before CONFIG", ta_msg_type_name(m->type));
    /* The awaited reply to a BACKWARD. */
    if (g->bw_awaited && (m->type == TA_MSG_GRADS || (m->type == TA_MSG_ERROR && m->corr == g->bw_awaited))) {
        if (m->corr != g->bw_awaited || (m->sender != g->w.autograd && m->sender != 0))
            return ta_actor_fail(self, TACT_EPROTO, "graph: a GRADS nobody awaits");
        if (m->type == TA_MSG_GRADS) return g_grads(self, g, m);
        g->bw_awaited = 0;
        g_bw_unhold(g, 0); /* ops of earlier parts of the answer go, the chosen ids too */
        char what[64], text[256];
        snprintf(what, sizeof what, "%.*s", (int)m->as.error.what.len, m->as.error.what.ptr ? (const char *)m->as.error.what.ptr : "");
        snprintf(text, sizeof text, "%.*s", (int)m->as.error.text.len, m->as.error.text.ptr ? (const char *)m->as.error.text.ptr : "");
        ta_actor_send_error(self, (uint32_t)g->bw_reply_to, g->bw_corr, (int)m->as.error.code, what, text);
        return TACT_OK;
    }
    /* The awaited reply to a SCHEDULE (a stage driven by hand may offer
     * anything, so it is checked against the await). */
    if (m->type == TA_MSG_SCHEDULED || (m->type == TA_MSG_ERROR && m->corr)) {
        if (!g->awaited || m->corr != g->awaited || (m->sender != g->w.scheduler && m->sender != 0))
            return m->type == TA_MSG_ERROR ? TACT_OK : ta_actor_fail(self, TACT_EPROTO, "graph: a SCHEDULED nobody awaits");
        if (m->type == TA_MSG_SCHEDULED) return s_scheduled(self, g, m);
        char what[64], text[256];
        snprintf(what, sizeof what, "%.*s", (int)m->as.error.what.len, m->as.error.what.ptr ? (const char *)m->as.error.what.ptr : "");
        snprintf(text, sizeof text, "%.*s", (int)m->as.error.text.len, m->as.error.text.ptr ? (const char *)m->as.error.text.ptr : "");
        s_fail_realize(self, g, (int)m->as.error.code, what, text);
        return TACT_OK;
    }
    if (g->awaited || g->bw_awaited)
        return ta_actor_fail(self, TACT_EPROTO, "graph: %s while a reply is awaited", ta_msg_type_name(m->type));
    switch (m->type) {
    case TA_MSG_REALIZE: return s_realize(self, g, m);
    case TA_MSG_BACKWARD: return g_backward(self, g, m);
    case TA_MSG_READ: return s_read(self, g, m);
    case TA_MSG_OP_BATCH:
    case TA_MSG_WRITE: {
        int rc = s_one_way(self, g, m, &err);
        /* Nobody waits for a one-way message: the first refusal is kept and
         * answered to the client's next request, in its order. */
        if (rc != TACT_OK && !g->refused.code) ta_error_set(&g->refused, rc, "an earlier %s was refused: %s", ta_msg_type_name(m->type), err.text);
        return TACT_OK;
    }
    default: return ta_actor_fail(self, TACT_EINVAL, "graph: cannot handle %s", ta_msg_type_name(m->type));
    }
}

const ta_actor_ops_t ta_graph_ops = {"graph", s_init, s_handle, s_fini, NULL};
