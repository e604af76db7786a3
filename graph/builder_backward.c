/* builder_backward.c - the graph builder's backward: the forward records to the gradient engine, its gradient ops into the graph. */
#include "builder_impl.h"

/* Collects what a backward from loss needs, sources before users (depth
 * first with a stack: graphs can be long): every differentiable node on a
 * path from the loss, and the nodes they read.  A node that an earlier
 * backward went through is refused, as the reference frees its graph. */
static int s_bw_collect(g_state_t *g, g_node_t *loss, g_node_t ***list, size_t *len, ta_error_t *err) {
    g_visit_t *stack = NULL;
    size_t depth = 0, cap = 0, lcap = 0;
    int rc = TACT_OK;
    g->stamp++;
    if (ta_grow((void **)&stack, &cap, 1, sizeof *stack) != TACT_OK) return ta_error_set(err, TACT_ENOMEM, "backward: out of memory");
    stack[depth++] = (g_visit_t){loss, 0};
    while (depth && rc == TACT_OK) {
        g_visit_t v = stack[--depth];
        g_node_t *n = v.n;
        if (!v.exit && n->mark == g->stamp) continue;
        if (!v.exit) {
            n->mark = g->stamp;
            if (n->grad && n->consumed) {
                rc = ta_error_set(err, TACT_EINVAL,
                                  "backward: tensor %" PRIu64 " was already differentiated by an earlier backward, which consumed its graph "
                                  "(compute it again for a second backward)",
                                  n->id);
                break;
            }
            if (n->grad) {
                if (ta_grow((void **)&stack, &cap, depth + 1 + (size_t)n->nsrc, sizeof *stack) != TACT_OK) {
                    rc = ta_error_set(err, TACT_ENOMEM, "backward: out of memory");
                    break;
                }
                stack[depth++] = (g_visit_t){n, 1};
                for (int i = n->nsrc; i-- > 0;) {
                    g_node_t *d = g_find(g, n->src[i]);
                    if (d && d->mark != g->stamp) stack[depth++] = (g_visit_t){d, 0};
                }
                continue;
            }
        }
        if (ta_grow((void **)list, &lcap, *len + 1, sizeof **list) != TACT_OK) {
            rc = ta_error_set(err, TACT_ENOMEM, "backward: out of memory");
            break;
        }
        (*list)[(*len)++] = n;
    }
    ta_free(stack);
    return rc;
}

/* Adds n to list unless the walk has it (for the gradient given and the
 * old gradients, which the engine's ops read). */
static int s_bw_leaf(g_state_t *g, g_node_t *n, g_node_t ***list, size_t *len, size_t *cap) {
    if (!n || n->mark == g->stamp) return TACT_OK;
    n->mark = g->stamp;
    if (ta_grow((void **)list, cap, *len + 1, sizeof **list) != TACT_OK) return TACT_ENOMEM;
    (*list)[(*len)++] = n;
    return TACT_OK;
}

/* One forward node as the engine reads it: a view as the movement op that
 * made it, a duplicate as CONTIGUOUS of the node it duplicates, a node the
 * walk does not go through without sources. */
static int s_bw_pack(const g_node_t *n, int walked, msgpack_packer *pk) {
    ta_node_rec_t r;
    memset(&r, 0, sizeof r);
    r.id = n->id;
    r.op = (uint64_t)(n->alias && n->is_view ? TA_OP_CONTIGUOUS : n->op);
    r.dtype = (uint64_t)n->dtype;
    r.device = (uint64_t)n->device;
    r.n_shape = (uint32_t)n->shape.ndim;
    memcpy(r.shape, n->shape.d, sizeof *r.shape * r.n_shape);
    if (n->grad && walked) {
        r.n_srcs = (uint32_t)n->nsrc;
        memcpy(r.srcs, n->src, sizeof *r.srcs * r.n_srcs);
        if (!n->alias) {
            r.n_args = (uint32_t)n->nargs;
            memcpy(r.args, n->args, sizeof *r.args * r.n_args);
        }
        r.flags = TA_NODE_GRAD;
    }
    return ta_rec_pack(TA_REC_NODE, &r, pk);
}

/* What bw_chosen holds for an id the client chose for a gradient: chosen,
 * then listed by the engine's answer (each once). */
enum { S_CHOSEN = 1, S_LISTED = 2 };

/* BACKWARD from the client: the forward records go to the gradient engine,
 * whose GRADS the graph awaits before anything else. */
int g_backward(ta_actor_t *self, g_state_t *g, const ta_msg_t *m) {
    const ta_backward_msg_t *b = &m->as.backward;
    if (g->refused.code) return g_refused(self, g);
    ta_error_t err = {0, ""};
    g_node_t *loss = g_find(g, b->loss), *grad = b->grad ? g_find(g, b->grad) : NULL;
    if (!loss || (b->grad && !grad)) return ta_actor_fail(self, TACT_EINVAL, "backward: unknown tensor %" PRIu64, loss ? b->grad : b->loss);
    if (b->targets.n != b->ids.n || b->targets.n != b->olds.n || b->nodes.n)
        return ta_actor_fail(self, TACT_EPROTO, "backward: %u targets, %u ids, %u old gradients, %u nodes", b->targets.n, b->ids.n, b->olds.n, b->nodes.n);
    uint64_t *olds = NULL;
    g->bw_nids = 0;
    ta_map_clear(&g->bw_chosen);
    g->bw_nwalked = 0;
    if (ta_u64s_copy(&b->olds, &olds) != TACT_OK || ta_grow((void **)&g->bw_ids, &g->bw_ids_cap, b->ids.n + 1, sizeof *g->bw_ids) != TACT_OK) {
        ta_free(olds);
        return ta_actor_fail(self, TACT_ENOMEM, "backward: out of memory");
    }
    ta_u64s_it_t it;
    uint64_t id;
    ta_u64s_begin(&it, &b->ids);
    while (ta_u64s_next(&it, &id)) {
        if (!id || id >= UINT64_C(1) << 61 || g_find(g, id)) {
            ta_free(olds);
            return ta_actor_fail(self, TACT_EPROTO, "backward: gradient id %" PRIu64 " is taken or out of the client's range", id);
        }
        g->bw_ids[g->bw_nids++] = id;
        if (ta_map_put(&g->bw_chosen, id, S_CHOSEN) != TACT_OK) {
            ta_free(olds);
            return ta_actor_fail(self, TACT_ENOMEM, "backward: out of memory");
        }
    }
    g_node_t **list = NULL;
    size_t len = 0;
    int rc = s_bw_collect(g, loss, &list, &len, &err);
    size_t cap = len, walked = len; /* the nodes after these are leaves the engine reads (the gradients given) */
    if (rc == TACT_OK && s_bw_leaf(g, grad, &list, &len, &cap) != TACT_OK) rc = ta_error_set(&err, TACT_ENOMEM, "backward: out of memory");
    for (uint32_t i = 0; rc == TACT_OK && i < b->olds.n; i++) {
        g_node_t *o = olds[i] ? g_find(g, olds[i]) : NULL;
        if (olds[i] && !o) rc = ta_error_set(&err, TACT_EINVAL, "backward: unknown gradient %" PRIu64, olds[i]);
        else if (s_bw_leaf(g, o, &list, &len, &cap) != TACT_OK) rc = ta_error_set(&err, TACT_ENOMEM, "backward: out of memory");
    }
    ta_free(olds);
    for (size_t i = 0; rc == TACT_OK && i < walked; i++)
        if (list[i]->grad) {
            if (ta_grow((void **)&g->bw_walked, &g->bw_walked_cap, g->bw_nwalked + 1, sizeof *g->bw_walked) != TACT_OK)
                rc = ta_error_set(&err, TACT_ENOMEM, "backward: out of memory");
            else g->bw_walked[g->bw_nwalked++] = list[i]->id;
        }
    /* The records go in parts of at most part_bytes (any size of graph
     * fits the message limit): every part but the last one-way, in the
     * graph's stream; the last, with the targets, a request. */
    g->bw_nadded = 0;
    uint64_t nparts = 0;
    msgpack_sbuffer nodes;
    msgpack_sbuffer_init(&nodes);
    for (size_t i = 0; rc == TACT_OK;) {
        msgpack_sbuffer_clear(&nodes);
        msgpack_sbuffer one;
        msgpack_sbuffer_init(&one);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &one, msgpack_sbuffer_write);
        size_t first = i;
        while (rc == TACT_OK && i < len && (i == first || one.size < g->part_bytes)) {
            if (s_bw_pack(list[i], i < walked, &pk)) rc = ta_error_set(&err, TACT_ENOMEM, "backward: out of memory");
            i++;
        }
        msgpack_packer_init(&pk, &nodes, msgpack_sbuffer_write);
        if (rc == TACT_OK && (ta_recs_pack_header(&pk, i - first) || (one.size && msgpack_sbuffer_write(&nodes, one.data, one.size))))
            rc = ta_error_set(&err, TACT_ENOMEM, "backward: out of memory");
        msgpack_sbuffer_destroy(&one);
        if (rc != TACT_OK) break;
        ta_msg_t q;
        ta_msg_init(&q, TA_MSG_BACKWARD);
        int last = i >= len;
        q.as.backward = *b;
        q.as.backward.nodes = ta_recs_raw(TA_REC_NODE, nodes.data, nodes.size, i - first);
        q.as.backward.more = (uint64_t)!last;
        q.as.backward.next = 0;
        q.as.backward.part = nparts++;
        if (!last) q.as.backward.targets = q.as.backward.ids = q.as.backward.olds = ta_u64s(NULL, 0);
        if (last) q.corr = ta_actor_new_corr(self);
        rc = ta_actor_send(self, g->w.autograd, &q);
        if (rc != TACT_OK) {
            ta_error_set(&err, rc, "backward: cannot reach the gradient engine");
        } else if (last) {
            g->bw_awaited = q.corr;
            g->bw_corr = m->corr;
            g->bw_reply_to = m->sender;
            ta_actor_await(self, q.corr, g->w.autograd);
            break;
        }
    }
    ta_free(list);
    msgpack_sbuffer_destroy(&nodes);
    return rc == TACT_OK ? TACT_OK : ta_actor_fail(self, rc, "%s", err.text);
}

/* True when id is one the client chose for a gradient of this backward. */
static int s_bw_chosen(const g_state_t *g, uint64_t id) { return ta_map_get(&g->bw_chosen, id, NULL); }

/* Drops the nodes of ops the engine sent (all of them, or all but the
 * gradients the client asked for) that nobody holds. */
void g_bw_unhold(g_state_t *g, int keep_chosen) {
    uint64_t *frees = NULL;
    size_t nfrees = 0, frees_cap = 0;
    for (size_t k = 0; k < g->bw_nadded; k++) {
        g_node_t *nd = keep_chosen && s_bw_chosen(g, g->bw_added[k]) ? NULL : g_find(g, g->bw_added[k]);
        if (!nd) continue;
        nd->client_ref = 0;
        g_maybe_drop(g, nd, &frees, &nfrees, &frees_cap);
    }
    ta_free(frees); /* nothing the engine made has a buffer yet */
    g->bw_nadded = 0;
}

/* The last part's list of the gradients made, checked (each one the client
 * chose, listed once), and told to the client before its ops join the
 * graph: the client builds what reads them (an optimizer's step) while
 * the graph adds them, its next ops queued behind them.  Marks each listed
 * id S_LISTED in bw_chosen. */
static int s_bw_answer(ta_actor_t *self, g_state_t *g, const ta_msg_t *m, ta_error_t *err) {
    ta_u64s_it_t ui;
    uint64_t id, v;
    ta_u64s_begin(&ui, &m->as.grads.ids);
    while (ta_u64s_next(&ui, &id)) {
        if (!ta_map_get(&g->bw_chosen, id, &v) || v == S_LISTED)
            return ta_error_set(err, TACT_EPROTO, "grads: gradient %" PRIu64 " was not asked for or listed twice", id);
        if (ta_map_put(&g->bw_chosen, id, S_LISTED) != TACT_OK) return ta_error_set(err, TACT_ENOMEM, "grads: out of memory");
    }
    ta_msg_t r;
    ta_msg_init(&r, TA_MSG_GRADS);
    r.corr = g->bw_corr;
    r.as.grads.ids = m->as.grads.ids;
    int rc = ta_actor_send(self, (uint32_t)g->bw_reply_to, &r);
    return rc == TACT_OK ? TACT_OK : ta_error_set(err, rc, "grads: cannot answer the client");
}

/* The awaited GRADS: its ops join the graph (ids in the engine's range, or
 * the ones the client chose), the nodes the backward went through are
 * consumed, and the client hears which gradients exist: with the last
 * part, before its ops are added (s_bw_answer).  What fails after that
 * answer is the client's next request's error (refused), as a one-way
 * message's. */
int g_grads(ta_actor_t *self, g_state_t *g, const ta_msg_t *m) {
    ta_error_t err = {0, ""};
    ta_recs_it_t it;
    ta_node_rec_t rec;
    int rc = !m->as.grads.ops.n || m->as.grads.ops.type == TA_REC_NODE ? TACT_OK : ta_error_set(&err, TACT_EPROTO, "grads: not NODE records");
    g->bw_awaited = 0;
    int answered = rc == TACT_OK && !m->as.grads.more && (rc = s_bw_answer(self, g, m, &err)) == TACT_OK;
    ta_recs_begin(&it, &m->as.grads.ops);
    while (rc == TACT_OK && ta_recs_next(&it, &rec)) {
        if (!s_bw_chosen(g, rec.id) && (rec.id < UINT64_C(1) << 61 || rec.id >= UINT64_C(1) << 62)) {
            rc = ta_error_set(&err, TACT_EPROTO, "grads: op id %" PRIu64 " is outside the gradient engine's range", rec.id);
            break;
        }
        /* Only what the rules make: computations, never data or writes. */
        if (rec.op == TA_OP_EMPTY || rec.op == TA_OP_ASSIGN || rec.op == TA_OP_CUSTOM || rec.flags) {
            rc = ta_error_set(&err, TACT_EPROTO, "grads: op %" PRIu64 " is not a gradient op", rec.id);
            break;
        }
        if ((rc = g_add_op(g, &rec, &err)) == TACT_OK) {
            if (ta_grow((void **)&g->bw_added, &g->bw_added_cap, g->bw_nadded + 1, sizeof *g->bw_added) != TACT_OK)
                rc = ta_error_set(&err, TACT_ENOMEM, "grads: out of memory");
            else g->bw_added[g->bw_nadded++] = rec.id;
        }
    }
    /* More to come: ask for the next part of the answer. */
    if (rc == TACT_OK && m->as.grads.more) {
        ta_msg_t q;
        ta_msg_init(&q, TA_MSG_BACKWARD);
        q.corr = ta_actor_new_corr(self);
        q.as.backward.next = 1;
        rc = ta_actor_send(self, g->w.autograd, &q);
        if (rc == TACT_OK) {
            g->bw_awaited = q.corr;
            ta_actor_await(self, q.corr, g->w.autograd);
            return TACT_OK;
        }
        ta_error_set(&err, rc, "grads: cannot reach the gradient engine");
    }
    ta_u64s_it_t ui;
    uint64_t id, v;
    ta_u64s_begin(&ui, &m->as.grads.ids);
    while (rc == TACT_OK && ta_u64s_next(&ui, &id))
        if (!g_find(g, id)) rc = ta_error_set(&err, TACT_EPROTO, "grads: gradient %" PRIu64 " was not made", id);
    /* A chosen id the answer does not list is nobody's: it goes. */
    for (size_t i = 0; i < g->bw_nids; i++)
        if (!ta_map_get(&g->bw_chosen, g->bw_ids[i], &v) || v != S_LISTED) ta_map_del(&g->bw_chosen, g->bw_ids[i]), g->bw_ids[i] = 0;

    if (rc != TACT_OK) {
        g_bw_unhold(g, 0); /* the chosen ids too: the client keeps none */
        if (!answered) ta_actor_send_error(self, (uint32_t)g->bw_reply_to, g->bw_corr, rc, "GRADS", err.text);
        else if (!g->refused.code) ta_error_set(&g->refused, rc, "the gradients of the last backward were refused: %s", err.text);
        return TACT_OK;
    }
    g_bw_unhold(g, 1);
    uint64_t *frees = NULL;
    size_t nfrees = 0, frees_cap = 0;
    for (size_t i = 0; i < g->bw_nwalked; i++) {
        g_node_t *nd = g_find(g, g->bw_walked[i]);
        if (!nd) continue;
        nd->consumed = 1;
        g_cse_remove(g, nd); /* a new forward makes new nodes, not aliases of consumed ones */
    }
    /* The gradient ops read the forward nodes they need: what the backward
     * went through may now let its sources go, as any realized node. */
    for (size_t i = 0; i < g->bw_nwalked; i++) {
        g_node_t *nd = g_find(g, g->bw_walked[i]);
        if (nd) g_drop_sources(g, nd, &frees, &nfrees, &frees_cap);
    }
    int frc = g_send_frees(self, g, frees, nfrees);
    ta_free(frees);
    if (frc != TACT_OK) return ta_actor_fail(self, frc, "grads: cannot send the frees to the executor");
    return TACT_OK;
}

