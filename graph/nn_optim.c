/* nn_optim.c - the optimizers (SGD, Adam, AdamW), composed from the public tensor API as the reference composes them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client_impl.h"
#include "mem.h"
#include "tact.h"

struct tact_optim {
    tact_ctx *ctx;
    tact_optim_options o;
    int n;
    tact_tensor **params;
    tact_tensor **m, **v;   /* Adam's moments; SGD's momentum buffers in m */
    tact_tensor *b1_t, *b2_t; /* Adam's b1^t and b2^t */
    tact_tensor *lr;          /* one float32 */
    char *buffer;             /* parameters that require no gradient: realized with each step, not updated */
};

void tact_optim_options_default(tact_optim_options *o, tact_optim_kind kind) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = 0.001;
    o->b1 = 0.9;
    o->b2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = kind == TACT_OPTIM_ADAMW ? 0.01 : 0;
}

static tact_tensor *s_k(tact_ctx *ctx, double v) { return tact_scalar(ctx, v); }

/* The optimizer's state lives where its parameters do, as the
 * reference's: the learning rate and the bias corrections (one float32
 * each) where the first parameter is (on its device, or on each of its
 * devices), and each parameter's moments where that parameter is (sharded
 * as it is).  Made where they are needed, they need no copies. */
static tact_tensor *s_one_float(tact_ctx *ctx, tact_tensor *home, double value) {
    float v = (float)value;
    int64_t one = 1;
    return tact_contiguous(home ? ta_from_data_like(home, TACT_FLOAT32, 1, &one, &v) : tact_from_data(ctx, TACT_FLOAT32, 1, &one, &v));
}

/* A state tensor of zeros shaped like p (float32 for Adam's moments, p's
 * dtype for SGD's buffers), with a buffer of its own where p is. */
static tact_tensor *s_zeros_like(tact_tensor *p, tact_dtype dt) {
    int64_t shape[16];
    tact_shape(p, shape);
    return tact_keep(tact_contiguous(ta_place_like(tact_zeros(tact_tensor_ctx(p), dt, tact_ndim(p), shape), p)));
}

/* One of the shared state tensors as a parameter sees it: itself, or a
 * copy where the parameter is when it lives elsewhere than the first. */
static tact_tensor *s_at(tact_tensor *state, tact_tensor *param) { return ta_place_like(state, param); }

int tact_optim_new(tact_optim **out, tact_ctx *ctx, const tact_optim_options *opts, int n, tact_tensor *const *params) {
    if (!out) return TACT_EINVAL;
    *out = NULL;
    if (!ctx || !opts || n < 0 || (n && !params)) return TACT_EINVAL;
    tact_optim_options o = *opts;
    char text[256] = "";
    if (o.kind < TACT_OPTIM_SGD || o.kind > TACT_OPTIM_ADAMW || !(o.lr >= 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0) ||
        (o.kind != TACT_OPTIM_SGD && (!(o.b1 >= 0 && o.b1 < 1) || !(o.b2 >= 0 && o.b2 < 1) || !(o.eps > 0))))
        snprintf(text, sizeof text, "optim: options out of range (lr %g, momentum %g, weight_decay %g, b1 %g, b2 %g, eps %g)", o.lr, o.momentum,
                 o.weight_decay, o.b1, o.b2, o.eps);
    for (int i = 0; !text[0] && i < n; i++) {
        if (tact_status_of(params[i]) != TACT_OK)
            snprintf(text, sizeof text, "optim: parameter %d is an error tensor: %s", i, tact_error_message(params[i]));
        else if (tact_tensor_ctx(params[i]) != ctx) snprintf(text, sizeof text, "optim: parameter %d belongs to another context", i);
        else if (tact_dtype_of(params[i]) < TACT_FLOAT16) snprintf(text, sizeof text, "optim: parameter %d is not a float tensor", i);
    }
    if (text[0]) {
        ta_ctx_set_error(ctx, text);
        return TACT_EINVAL;
    }
    tact_optim *p = ta_calloc(1, sizeof *p);
    if (!p || !(p->params = ta_calloc((size_t)n + 1, sizeof *p->params)) || !(p->m = ta_calloc((size_t)n + 1, sizeof *p->m)) ||
        !(p->v = ta_calloc((size_t)n + 1, sizeof *p->v)) || !(p->buffer = ta_calloc((size_t)n + 1, 1))) {
        tact_optim_free(&p);
        return TACT_ENOMEM;
    }
    p->ctx = ctx;
    p->o = o;
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->params[i] = params[i];
        if (tact_requires_grad(params[i]) == -1) tact_set_requires_grad(params[i], 1);
        p->buffer[i] = tact_requires_grad(params[i]) == 0;
    }
    int adam = o.kind != TACT_OPTIM_SGD;
    tact_tensor *home = n ? params[0] : NULL;
    p->lr = tact_keep(s_one_float(ctx, home, o.lr));
    if (adam) {
        p->b1_t = tact_keep(s_one_float(ctx, home, 1));
        p->b2_t = tact_keep(s_one_float(ctx, home, 1));
    }
    for (int i = 0; i < n; i++) {
        if (p->buffer[i]) continue;
        if (adam) {
            p->m[i] = s_zeros_like(params[i], TACT_FLOAT32);
            p->v[i] = s_zeros_like(params[i], TACT_FLOAT32);
        } else if (o.momentum) {
            p->m[i] = s_zeros_like(params[i], tact_dtype_of(params[i]));
        }
    }
    /* The state gets its buffers now, so a step only updates them. */
    tact_tensor **all = ta_calloc(2 * (size_t)n + 3, sizeof *all);
    int na = 0, rc = all ? TACT_OK : TACT_ENOMEM;
    if (all) {
        all[na++] = p->lr;
        if (adam) all[na++] = p->b1_t, all[na++] = p->b2_t;
        for (int i = 0; i < n; i++) {
            if (p->m[i]) all[na++] = p->m[i];
            if (p->v[i]) all[na++] = p->v[i];
        }
        rc = tact_realize(ctx, na, all);
        ta_free(all);
    }
    if (rc != TACT_OK) {
        tact_optim_free(&p);
        return rc;
    }
    *out = p;
    return TACT_OK;
}

/* The reference's LARS with tcoef 0 and classic off: PyTorch's SGD. */
static tact_tensor *s_sgd(tact_optim *p, int i, tact_tensor *t, tact_tensor *g) {
    tact_ctx *ctx = p->ctx;
    if (p->o.weight_decay) g = tact_add(g, tact_mul(s_k(ctx, p->o.weight_decay), t));
    if (p->o.momentum) {
        tact_assign(p->m[i], tact_add(tact_mul(s_k(ctx, p->o.momentum), p->m[i]), g));
        g = p->o.nesterov ? tact_add(g, tact_mul(s_k(ctx, p->o.momentum), p->m[i])) : p->m[i];
    }
    return tact_mul(g, s_at(p->lr, t));
}

/* The reference's LAMB with adam on (r = 1): Adam, and AdamW with weight decay. */
static tact_tensor *s_adam(tact_optim *p, int i, tact_tensor *t, tact_tensor *g) {
    tact_ctx *ctx = p->ctx;
    const tact_optim_options *o = &p->o;
    tact_assign(p->m[i], tact_add(tact_mul(s_k(ctx, o->b1), p->m[i]), tact_mul(s_k(ctx, 1.0 - o->b1), g)));
    tact_assign(p->v[i], tact_add(tact_mul(s_k(ctx, o->b2), p->v[i]), tact_mul(s_k(ctx, 1.0 - o->b2), tact_mul(g, g))));
    tact_tensor *m_hat = tact_div(p->m[i], tact_sub(s_k(ctx, 1.0), s_at(p->b1_t, t)));
    tact_tensor *v_hat = tact_div(p->v[i], tact_sub(s_k(ctx, 1.0), s_at(p->b2_t, t)));
    tact_tensor *up = tact_div(m_hat, tact_add(tact_sqrt(v_hat), s_k(ctx, o->eps)));
    if (o->weight_decay) up = tact_add(up, tact_mul(s_k(ctx, o->weight_decay), t));
    return tact_mul(s_at(p->lr, t), up);
}

/* Steps built on the gradients of a backward whose answer was not read
 * yet (tact_backward does not wait for it) take at most this many
 * parameters: their ops wait in the client's batch until the answer is
 * read, so they can be taken back. */
enum { S_AHEAD_PARAMS = 64, S_AGAIN = 1 /* not a status: build again on tact_grad */ };

/* Builds the step (its assigns; all gets what it realizes) on each
 * parameter's gradient: as it stands (now: ids gets each one's id, and a
 * parameter without one gives S_AGAIN), or as tact_grad gives it.
 * Returns TACT_OK, S_AGAIN or an error with text set. */
static int s_build(tact_optim *p, int now, uint64_t *ids, tact_tensor **all, int *na, char *text, size_t len) {
    tact_ctx *ctx = p->ctx;
    int adam = p->o.kind != TACT_OPTIM_SGD;
    /* Every gradient first: a step that fails changes nothing (an assign
     * made before the failure would still run at the next realize). */
    for (int i = 0; i < p->n; i++) {
        if (p->buffer[i]) continue;
        tact_tensor *g = now ? ta_grad_now(p->params[i], &ids[i]) : tact_grad(p->params[i]);
        if (now && !g) return S_AGAIN; /* none as it stands: the answer says */
        if (tact_status_of(g) != TACT_OK) {
            snprintf(text, len, "optim step: parameter %d: %s", i, tact_error_message(g));
            return tact_status_of(g);
        }
    }
    if (adam) {
        tact_assign(p->b1_t, tact_mul(p->b1_t, s_k(ctx, p->o.b1)));
        tact_assign(p->b2_t, tact_mul(p->b2_t, s_k(ctx, p->o.b2)));
        all[(*na)++] = p->b1_t, all[(*na)++] = p->b2_t;
    }
    for (int i = 0; i < p->n; i++) {
        tact_tensor *param = p->params[i];
        if (p->buffer[i]) { /* a running statistic: its assigns realize now */
            all[(*na)++] = param;
            continue;
        }
        uint64_t id;
        tact_tensor *g = now ? ta_grad_now(param, &id) : tact_grad(param);
        tact_tensor *t = tact_detach(param);
        tact_tensor *delta = adam ? s_adam(p, i, t, g) : s_sgd(p, i, t, g);
        tact_tensor *r = tact_assign(param, tact_cast(tact_sub(t, delta), tact_dtype_of(param)));
        if (tact_status_of(r) != TACT_OK) {
            snprintf(text, len, "optim step: parameter %d: %s", i, tact_error_message(r));
            return tact_status_of(r);
        }
        all[(*na)++] = param;
        if (p->m[i]) all[(*na)++] = p->m[i];
        if (p->v[i]) all[(*na)++] = p->v[i];
    }
    return TACT_OK;
}

int tact_optim_step(tact_optim *p) { return tact_optim_step_with(p, 0, NULL); }

int tact_optim_step_with(tact_optim *p, int nalso, tact_tensor *const *also) {
    if (!p || nalso < 0 || (nalso && !also)) return TACT_EINVAL;
    tact_ctx *ctx = p->ctx;
    int rc = tact_scope_begin(ctx);
    if (rc != TACT_OK) return rc;
    int was = tact_set_no_grad(ctx, 1);
    char text[256] = "";
    tact_tensor **all = ta_calloc(3 * (size_t)p->n + 3 + (size_t)nalso, sizeof *all);
    uint64_t *ids = ta_calloc((size_t)p->n + 1, sizeof *ids);
    int na = 0;
    if (!all || !ids) rc = TACT_ENOMEM;
    for (int i = 0; rc == TACT_OK && i < nalso; i++) all[na++] = also[i];
    ta_mark_t mark;
    int ahead = rc == TACT_OK && p->n <= S_AHEAD_PARAMS && ta_mark_ahead(ctx, &mark);
    if (rc == TACT_OK) rc = S_AGAIN;
    /* A backward not answered yet: the step is built on the gradients as
     * they stand while the graph works, and kept when the answer leaves
     * each as it was; else it is taken back (its ops never sent, its
     * assigns undone) and built again on the answer. */
    if (ahead) {
        int n0 = na, built = s_build(p, 1, ids, all, &na, text, sizeof text) == TACT_OK;
        int settled = ta_settle_backward(ctx), same = built && settled == TACT_OK;
        for (int i = 0; same && i < p->n; i++) {
            uint64_t id;
            same = p->buffer[i] || (ta_grad_now(p->params[i], &id) && id == ids[i]);
        }
        text[0] = '\0';
        if (ta_mark_end(ctx, &mark, same) != TACT_OK) {
            snprintf(text, sizeof text, "optim step: the step built ahead of the backward's answer could not be taken back");
            rc = TACT_EPROTO;
        } else if (same) {
            rc = TACT_OK;
        } else {
            na = n0;
            rc = settled != TACT_OK ? settled : S_AGAIN; /* the backward's error (its text is the context's) */
        }
    }
    if (rc == S_AGAIN) rc = s_build(p, 0, ids, all, &na, text, sizeof text);
    if (rc == TACT_OK) rc = tact_realize(ctx, na, all);
    else if (text[0]) ta_ctx_set_error(ctx, text);
    ta_free(all);
    ta_free(ids);
    tact_set_no_grad(ctx, was);
    tact_scope_end(ctx);
    return rc;
}

void tact_optim_zero_grad(tact_optim *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) tact_grad_clear(p->params[i]);
}

int tact_optim_set_lr(tact_optim *p, double lr) {
    if (!p) return TACT_EINVAL;
    if (!(lr >= 0)) {
        char text[100];
        snprintf(text, sizeof text, "optim_set_lr: the learning rate %g is not 0 or more", lr);
        ta_ctx_set_error(p->ctx, text);
        return TACT_EINVAL;
    }
    int rc0 = tact_scope_begin(p->ctx);
    if (rc0 != TACT_OK) return rc0;
    p->o.lr = lr;
    float v = (float)lr;
    tact_assign(p->lr, ta_from_data_like(p->lr, TACT_FLOAT32, 1, (int64_t[]){1}, &v));
    int rc = tact_realize(p->ctx, 1, &p->lr);
    tact_scope_end(p->ctx);
    return rc;
}

double tact_optim_lr(const tact_optim *p) { return p ? p->o.lr : 0; }

int tact_optim_state(const tact_optim *p, const char *prefix, tact_params *out) {
    if (!p) return TACT_EINVAL;
    if (!out) {
        ta_ctx_set_error(p->ctx, "optim_state: the list to add to is NULL");
        return TACT_EINVAL;
    }
    int before = out->n, adam = p->o.kind != TACT_OPTIM_SGD;
    int rc = tact_params_add(out, prefix, "lr", p->lr);
    if (rc == TACT_OK && adam) rc = tact_params_add(out, prefix, "b1_t", p->b1_t);
    if (rc == TACT_OK && adam) rc = tact_params_add(out, prefix, "b2_t", p->b2_t);
    for (int i = 0; rc == TACT_OK && i < p->n; i++) {
        char name[48];
        if (p->m[i]) {
            snprintf(name, sizeof name, "%s.%d", adam ? "m" : "b", i);
            rc = tact_params_add(out, prefix, name, p->m[i]);
        }
        if (rc == TACT_OK && p->v[i]) {
            snprintf(name, sizeof name, "v.%d", i);
            rc = tact_params_add(out, prefix, name, p->v[i]);
        }
    }
    if (rc != TACT_OK)
        while (out->n > before) ta_free(out->names[--out->n]);
    return rc;
}

double tact_lr_cosine(double lr, double lr_min, int64_t step, int64_t total) {
    if (total <= 0 || step >= total) return lr_min;
    if (step <= 0) return lr;
    return lr_min + (lr - lr_min) * 0.5 * (1 + cos(M_PI * (double)step / (double)total));
}

double tact_lr_step(double lr, double gamma, int64_t step, int64_t every) {
    if (every <= 0 || step <= 0) return lr;
    return lr * pow(gamma, (double)(step / every));
}

void tact_optim_free(tact_optim **pp) {
    if (!pp || !*pp) return;
    tact_optim *p = *pp;
    *pp = NULL;
    ta_free(p->params);
    ta_free(p->m);
    ta_free(p->v);
    ta_free(p->buffer);
    ta_free(p);
}
