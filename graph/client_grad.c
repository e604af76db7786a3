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

int ti_backward(ti_tensor_t *loss, ti_tensor_t *grad) {
    if (!loss) return TACT_EINVAL;
    if (loss->status) return tc_report(loss);
    ti_ctx_t *ctx = loss->ctx;
    char text[256];
    int rc = TACT_OK;
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
    /* For each: its id, the id its new gradient gets, its old gradient's. */
    uint64_t *ids = ta_malloc(sizeof *ids * 3 * (s.n + 1));
    if (s.oom || !ids) rc = TACT_ENOMEM;
    uint64_t *targets = ids, *fresh = ids + s.n, *olds = ids + 2 * s.n;
    for (size_t i = 0; rc == TACT_OK && i < s.n; i++) {
        targets[i] = s.owners[i]->id;
        fresh[i] = tc_new_id(ctx);
        olds[i] = s.owners[i]->grad ? s.owners[i]->grad->id : 0;
    }
    if (rc == TACT_OK) {
        ta_msg_t req, reply;
        ta_msg_init(&req, TA_MSG_BACKWARD);
        ta_msg_init(&reply, TA_MSG_READY);
        req.as.backward.loss = loss->id;
        req.as.backward.grad = grad ? grad->id : 0;
        req.as.backward.targets = ta_u64s(targets, s.n);
        req.as.backward.ids = ta_u64s(fresh, s.n);
        req.as.backward.olds = ta_u64s(olds, s.n);
        rc = tc_request(ctx, &req, &reply);
        if (rc == TACT_OK && reply.type != TA_MSG_GRADS) {
            ti_ctx_set_error(ctx, "backward: the graph answered with something else than GRADS");
            rc = TACT_EPROTO;
        }
        ta_u64s_it_t it;
        uint64_t id;
        if (rc == TACT_OK) ta_u64s_begin(&it, &reply.as.grads.ids);
        /* Every id of the answer is adopted or released, even after an
         * allocation failed: the graph holds each for the client. */
        int ok = rc == TACT_OK;
        while (ok && ta_u64s_next(&it, &id)) {
            size_t i = 0;
            while (i < s.n && (fresh[i] != id || !s.owners[i])) i++;
            if (i == s.n) {
                tc_release_id(ctx, id);
                continue;
            }
            ti_tensor_t *t = s.owners[i];
            s.owners[i] = NULL; /* an id listed twice is adopted once */
            if (t->grad) { /* the engine added the old gradient in: the handle moves to the sum */
                tc_release_id(ctx, t->grad->id);
                t->grad->id = id;
                t->grad->realized = 0;
            } else if (!(t->grad = tc_new_unscoped(ctx, id, t->dtype, &t->shape))) {
                tc_release_id(ctx, id);
                rc = TACT_ENOMEM;
            } else {
                t->grad->device = tc_home(t); /* made where its tensor is */
            }
        }
        ta_msg_release(&reply);
    }
    if (rc == TACT_ENOMEM) ti_ctx_set_error(ctx, "backward: out of memory");
    ta_free(ids);
    ta_free(s.owners);
    return rc;
}

ti_tensor_t *ti_grad(ti_tensor_t *t) {
    TC_CHECK(t);
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
