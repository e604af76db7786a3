/* client_grad.c - autograd on the client: requires_grad, detach, no-grad mode, and backward through the gradient engine. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client_core.h"
#include "mem.h"
#include "msg.h"

/*
 * The client marks every op record whose result requires a gradient
 * (NODE flags bit 0, set by tc_emit); tact_backward sends BACKWARD to the
 * graph builder with the tensors whose gradients the program asked for
 * (tact_set_requires_grad(t, 1)) and an id for each new gradient.  The
 * graph hands the forward records to the gradient engine
 * (actors/autograd/autograd.c), adds the gradient ops it makes, and
 * answers which of the tensors got one.  A gradient is a lazy tensor like
 * any other; a second backward adds to it (an ADD the engine makes under
 * the same handle).
 */

ti_tensor_t *ti_set_requires_grad(ti_tensor_t *t, int requires) {
    TC_CHECK(t);
    if (requires < -1 || requires > 1) return tc_fail(t, TACT_EINVAL, "set_requires_grad: %d (1 true, 0 false, -1 unset)", requires);
    if (t->weak) return tc_fail(t, TACT_EINVAL, "set_requires_grad: a scalar (tact_scalar) has no gradient; make a tensor of it");
    if (requires == 1 && !ta_dtype_is_float(t->dtype))
        return tc_fail(t, TACT_EDTYPE, "set_requires_grad: only float tensors can require a gradient (this one is %s)", ta_dtype_name(t->dtype));
    if (t->multi) {
        tc_multi_set_requires_grad(t, requires);
        return t;
    }
    t->requires_grad = requires;
    t->wants_grad = requires == 1;
    return t;
}

int ti_requires_grad(const ti_tensor_t *t) { return t && !t->status ? t->requires_grad : 0; }

/* The same data with no path back: a view (RESHAPE to its own shape)
 * recorded without the gradient flag. */
ti_tensor_t *ti_detach(ti_tensor_t *x) {
    TC_CHECK(x);
    x = tc_solid(x);
    if (x->status) return x;
    ti_tensor_t *out = tc_new(x->ctx, x->dtype, &x->shape);
    if (out->status) return out;
    out->view = 1;
    out->requires_grad = 0;
    const ti_tensor_t *src[1] = {x};
    return tc_emit_flagged(out, TA_OP_RESHAPE, 1, src, 0, NULL, 0);
}

typedef struct {
    ti_tensor_t **owners;
    size_t n, cap;
    int oom;
} s_targets_t;

static void s_collect_target(ti_tensor_t *t, void *ud) {
    s_targets_t *s = ud;
    if (!t->wants_grad || t->status || !t->id) return;
    if (ta_grow((void **)&s->owners, &s->cap, s->n + 1, sizeof *s->owners) != TACT_OK) s->oom = 1;
    else s->owners[s->n++] = t;
}

/*
 * A backward is sent, not waited for: tact_backward returns once the
 * graph has the request, and the client builds what comes next (an
 * optimizer's step) while the graph and the gradient engine work.  A
 * target without a gradient gets its handle at once, under the id its
 * gradient will have; one with a gradient keeps its handle on the old id
 * until the answer.  The answer, which says which targets got one, is
 * read at the client's next wait (ti_settle_backward: a realize's answer,
 * a read, tact_grad, the next backward, the close): a new handle whose
 * target got none goes, an old one moves to the sum.  Nothing outside the
 * client sees a new handle before its answer was read (tact_grad reads it
 * first), and an optimizer that built its step on the handles takes that
 * step back when the answer differs (nn_optim.c).
 */
enum { S_NEW, S_OLD, S_NONE }; /* a target's handle: made at once, its earlier one, none (out of memory) */

typedef struct {
    uint64_t corr;
    size_t n;
    ti_tensor_t **owners; /* the targets; NULL where one went before the answer */
    uint64_t *fresh;      /* the id each target's new gradient gets */
    uint64_t *olds;       /* its earlier gradient's id (0: none) */
    char *kind;           /* S_NEW, S_OLD or S_NONE */
} s_pending_t;

static void s_pending_free(s_pending_t *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++)
        if (p->owners[i]) p->owners[i]->target = 0;
    ta_free(p->owners);
    ta_free(p->fresh);
    ta_free(p->kind);
    ta_free(p);
}

void tc_backward_forget(ti_tensor_t *t) {
    s_pending_t *p = *tc_backward_slot(t->ctx);
    for (size_t i = 0; p && i < p->n; i++)
        if (p->owners[i] == t) p->owners[i] = NULL;
    t->target = 0;
}

int ti_settle_backward(ti_ctx_t *ctx, int extend) {
    void **slot = tc_backward_slot(ctx);
    s_pending_t *p = *slot;
    if (!p) return TACT_OK;
    *slot = NULL;
    ta_msg_t reply;
    ta_msg_init(&reply, TA_MSG_READY);
    int rc = tc_wait_reply(ctx, p->corr, &reply, extend);
    char text[400];
    if (rc == TACT_OK && reply.type != TA_MSG_GRADS) rc = TACT_EPROTO, ti_ctx_set_error(ctx, "the graph answered with something else than GRADS");
    char *listed = ta_calloc(p->n + 1, 1);
    if (!listed && rc == TACT_OK) rc = TACT_ENOMEM, ti_ctx_set_error(ctx, "out of memory reading the answer");
    if (rc != TACT_OK) { /* the call that reads it returns it: named as the backward's */
        snprintf(text, sizeof text, "the last backward failed: %s", ti_ctx_error(ctx));
        ti_ctx_set_error(ctx, text);
    }
    /* Every id of the answer is the client's to keep or release: the
     * graph holds each for it. */
    ta_u64s_it_t it;
    uint64_t id;
    if (rc == TACT_OK) ta_u64s_begin(&it, &reply.as.grads.ids);
    while (rc == TACT_OK && ta_u64s_next(&it, &id)) {
        size_t i = 0;
        while (i < p->n && (p->fresh[i] != id || listed[i])) i++;
        if (i == p->n) tc_release_id(ctx, id); /* not asked for, or listed twice */
        else listed[i] = 1;
    }
    ta_msg_release(&reply);
    for (size_t i = 0; i < p->n; i++) {
        ti_tensor_t *t = p->owners[i], *h = t ? t->grad : NULL;
        int got = listed && listed[i];
        if (p->kind[i] == S_NEW) {
            /* Gone with its tensor or cleared: its id went with it. */
            if (!got && h && h->id == p->fresh[i]) tc_free_grad(t);
        } else if (got && p->kind[i] == S_OLD && h && h->id == p->olds[i]) {
            tc_release_id(ctx, h->id); /* the new gradient added it in */
            h->id = p->fresh[i];
            h->realized = 0;
        } else if (got) {
            tc_release_id(ctx, p->fresh[i]); /* its handle went (or was never made) */
        }
    }
    ta_free(listed);
    s_pending_free(p);
    return rc;
}

int ti_backward(ti_tensor_t *loss, ti_tensor_t *grad) {
    if (!loss) return TACT_EINVAL;
    if (loss->status) return tc_report(loss);
    ti_ctx_t *ctx = loss->ctx;
    char text[256];
    /* An earlier backward's answer first: this one's targets start from it. */
    int rc = ti_settle_backward(ctx, 1);
    if (rc != TACT_OK) return rc;
    loss = tc_solid(loss);
    if (loss->status) return tc_report(loss);
    if (loss->multi) {
        /* A replicated loss is the same on every device: its first part
         * leads back through every device's share of the work. */
        if (tc_multi_split(loss)) {
            ti_ctx_set_error(ctx, "backward: the loss is split over devices; reduce it over the split axis first");
            return TACT_EINVAL;
        }
        if (grad && grad->multi) grad = tc_multi_first(grad);
        loss = tc_multi_first(loss);
    }
    if (!ta_dtype_is_float(loss->dtype)) {
        snprintf(text, sizeof text, "backward: the loss is %s; only a float tensor has a gradient", ta_dtype_name(loss->dtype));
        ti_ctx_set_error(ctx, text);
        return TACT_EDTYPE;
    }
    if (grad) {
        if (grad->status) return tc_report(grad);
        if (grad->ctx && grad->ctx != ctx) {
            ti_ctx_set_error(ctx, "backward: the gradient belongs to another context");
            return TACT_EINVAL;
        }
        grad = grad->weak ? tc_materialize(grad, loss->dtype) : ti_cast(grad, loss->dtype);
        if (grad->status) return tc_report(grad);
        if (grad->multi || (grad->device >= 0 && grad->device != tc_home(loss))) {
            snprintf(text, sizeof text, "backward: the gradient is on %s, the loss on %s", ti_device(grad), ti_device(loss));
            ti_ctx_set_error(ctx, text);
            return TACT_EDEVICE;
        }
        if (!ta_shape_equal(&grad->shape, &loss->shape)) {
            char a[128], b[128];
            ta_shape_format(&loss->shape, a, sizeof a);
            ta_shape_format(&grad->shape, b, sizeof b);
            snprintf(text, sizeof text, "backward: the gradient has shape %s, the loss %s", b, a);
            ti_ctx_set_error(ctx, text);
            return TACT_ESHAPE;
        }
    } else if (loss->shape.ndim) {
        char a[128];
        ta_shape_format(&loss->shape, a, sizeof a);
        snprintf(text, sizeof text, "backward: the loss has shape %s; without a gradient it must be a scalar (shape ())", a);
        ti_ctx_set_error(ctx, text);
        return TACT_ESHAPE;
    }
    s_targets_t s;
    memset(&s, 0, sizeof s);
    tc_each_tensor(ctx, s_collect_target, &s);
    s_pending_t *p = ta_calloc(1, sizeof *p);
    uint64_t *ids = ta_malloc(sizeof *ids * 3 * (s.n + 1));
    char *kind = ta_calloc(s.n + 1, 1);
    if (p) {
        p->fresh = ids, p->owners = s.owners, p->n = s.n, p->kind = kind;
    } else {
        ta_free(s.owners);
        ta_free(ids);
        ta_free(kind);
    }
    if (s.oom || !p || !ids || !kind) {
        if (p) p->n = 0; /* no target is marked yet */
        s_pending_free(p);
        ti_ctx_set_error(ctx, "backward: out of memory");
        return TACT_ENOMEM;
    }
    /* For each target: its id, the id its new gradient gets, its old gradient's. */
    uint64_t *targets = ids + 2 * s.n;
    p->olds = ids + s.n;
    for (size_t i = 0; i < s.n; i++) {
        targets[i] = s.owners[i]->id;
        p->fresh[i] = tc_new_id(ctx);
        p->olds[i] = s.owners[i]->grad ? s.owners[i]->grad->id : 0;
    }
    ta_msg_t req;
    ta_msg_init(&req, TA_MSG_BACKWARD);
    req.as.backward.loss = loss->id;
    req.as.backward.grad = grad ? grad->id : 0;
    req.as.backward.targets = ta_u64s(targets, s.n);
    req.as.backward.ids = ta_u64s(p->fresh, s.n);
    req.as.backward.olds = ta_u64s(p->olds, s.n);
    rc = tc_send_request(ctx, &req);
    if (rc != TACT_OK) {
        p->n = 0;
        s_pending_free(p);
        return rc;
    }
    p->corr = req.corr;
    /* A target without a gradient gets its handle now. */
    for (size_t i = 0; i < s.n; i++) {
        ti_tensor_t *t = s.owners[i];
        t->target = 1;
        if (t->grad) {
            p->kind[i] = S_OLD;
        } else if ((t->grad = tc_new_unscoped(ctx, p->fresh[i], t->dtype, &t->shape))) {
            p->kind[i] = S_NEW;
            t->grad->device = tc_home(t); /* made where its tensor is */
        } else {
            p->kind[i] = S_NONE; /* its gradient, if made, is released with the answer */
            rc = TACT_ENOMEM;
        }
    }
    *tc_backward_slot(ctx) = p;
    if (rc == TACT_ENOMEM) ti_ctx_set_error(ctx, "backward: out of memory");
    return rc;
}

ti_tensor_t *ti_grad_now(ti_tensor_t *t) { return t && !t->status && !t->multi ? t->grad : NULL; }
uint64_t ti_id(const ti_tensor_t *t) { return t->id; }

ti_tensor_t *ti_grad(ti_tensor_t *t) {
    TC_CHECK(t);
    /* The answer of a backward says which gradients exist. */
    int rc = ti_settle_backward(t->ctx, 1);
    if (rc != TACT_OK) return tc_fail(t, rc, "%s", ti_ctx_error(t->ctx));
    if (t->multi) return tc_multi_grad(t);
    if (!t->grad)
        return tc_fail(t, TACT_EINVAL,
                       "grad: tensor %" PRIu64 " has no gradient (ask for one with tact_set_requires_grad(t, 1) before the forward, "
                       "then call tact_backward on a loss that depends on it)",
                       t->id);
    return t->grad;
}

void ti_grad_clear(ti_tensor_t *t) {
    if (t && !t->status && t->ctx && t->multi) tc_multi_grad_clear(t);
    if (t && !t->status && t->ctx) tc_free_grad(t);
}
