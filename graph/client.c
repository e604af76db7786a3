/* client.c - the public tensor API (include/tact.h): runs in the user's thread, streams ops to the graph builder (a context's opening and closing: client_ctx.c). */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "client_core.h"
#include "client_ctx.h"
#include "client_impl.h"
#include "device.h"
#include "dtype.h"
#include "handle.h"
#include "mem.h"
#include "ops.h"
#include "pipeline.h"
#include "shape.h"
#include "tact.h"

/* ------------------------------------------------------------------ state */

/* Ops a batch gathers before it goes to the graph (a request sends it sooner). */
enum { S_BATCH_OPS = 512 };


void ti_rng_take(ti_ctx_t *ctx, uint64_t num, uint64_t *seed, uint32_t *counter) {
    /* The first call after manual_seed (or of a new context) uses counter
     * 0 as it is; every later one first advances it by its own count (what
     * tinygrad 0.9.2 does, checked against it: after manual_seed, calls of
     * 6, 5 and 3 numbers use counters 0, 5 and 8). */
    if (ctx->rng_seeded) ctx->rng_counter += (uint32_t)num;
    ctx->rng_seeded = 1;
    *seed = ctx->rng_seed;
    *counter = ctx->rng_counter;
}

void ti_manual_seed(ti_ctx_t *ctx, uint64_t seed) {
    ctx->rng_seed = seed;
    ctx->rng_counter = 0;
    ctx->rng_seeded = 0;
}


/* --------------------------------------------------------- tensor objects */

/* Adds t to the innermost scope and gives it its handle; returns t, or
 * NULL on allocation failure (t is freed). */
static ti_tensor_t *s_own(ti_ctx_t *ctx, ti_tensor_t *t) {
    tc_scope_t *sc = &ctx->scopes[ctx->nscopes - 1];
    if (ta_grow((void **)&sc->items, &sc->cap, sc->n + 1, sizeof *sc->items) != TACT_OK ||
        !(t->handle = ta_handle_new(t, TA_HANDLE_TENSOR))) {
        ta_free(t->message);
        ta_free(t);
        return NULL;
    }
    t->level = ctx->nscopes - 1;
    t->slot = sc->n;
    sc->items[sc->n++] = t;
    return t;
}

/* Error tensors of no context, made once and never freed: for a NULL
 * argument, a handle that names nothing alive, a context busy in another
 * thread, and an allocation that failed. */
static ti_tensor_t s_null_arg = {.dtype = TACT_FLOAT32, .status = TACT_EINVAL, .message = (char *)"a NULL tensor or context was passed"};
static ti_tensor_t s_stale_arg = {.dtype = TACT_FLOAT32,
                                  .status = TACT_EINVAL,
                                  .message = (char *)"a tensor used after its scope ended or its context closed (or not a tensor at all)"};
static ti_tensor_t s_busy_arg = {.dtype = TACT_FLOAT32,
                                 .status = TACT_EBUSY,
                                 .message = (char *)"the context is in use by another thread (one thread at a time per context)"};
static ti_tensor_t s_foreign_arg = {.dtype = TACT_FLOAT32,
                                    .status = TACT_EINVAL,
                                    .message = (char *)"a tensor of another context (tensors of two contexts in one op)"};
static ti_tensor_t s_oom = {.dtype = TACT_FLOAT32, .status = TACT_ENOMEM, .message = (char *)"out of memory"};
static pthread_once_t s_statics_once = PTHREAD_ONCE_INIT;

static void s_statics(void) {
    ti_tensor_t *all[5] = {&s_null_arg, &s_stale_arg, &s_busy_arg, &s_foreign_arg, &s_oom};
    for (int i = 0; i < 5; i++) all[i]->handle = ta_handle_new(all[i], TA_HANDLE_TENSOR);
}

uintptr_t ti_tensor_handle(ti_tensor_t *t) {
    if (!t->ctx) pthread_once(&s_statics_once, s_statics);
    return t->handle;
}

uintptr_t ti_ctx_handle(const ti_ctx_t *ctx) { return ctx->handle; }
ti_ctx_t *ti_tensor_ctx(const ti_tensor_t *t) { return t->ctx; }
ti_tensor_t *ti_null_arg(void) { return &s_null_arg; }
ti_tensor_t *ti_stale_arg(void) { return &s_stale_arg; }
ti_tensor_t *ti_busy_arg(void) { return &s_busy_arg; }
ti_tensor_t *ti_foreign_arg(void) { return &s_foreign_arg; }

/* A token naming the calling thread: the address of one of its own
 * variables (never 0). */
static uintptr_t s_thread_token(void) {
    static _Thread_local char mark;
    return (uintptr_t)&mark;
}

int ti_ctx_enter(ti_ctx_t *ctx) {
    uintptr_t me = s_thread_token(), none = 0;
    if (__atomic_load_n(&ctx->owner, __ATOMIC_ACQUIRE) == me) {
        ctx->depth++;
        return 0;
    }
    if (!__atomic_compare_exchange_n(&ctx->owner, &none, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return -1;
    ctx->depth = 1;
    return 0;
}

void ti_ctx_leave(ti_ctx_t *ctx) {
    if (--ctx->depth == 0) __atomic_store_n(&ctx->owner, 0, __ATOMIC_RELEASE);
}

/* An error tensor carrying code and the formatted message.  When even that
 * cannot be allocated, the static out-of-memory one stands in. */
__attribute__((format(printf, 3, 4))) ti_tensor_t *tc_error(ti_ctx_t *ctx, int code, const char *fmt, ...) {
    if (!ctx) return &s_null_arg;
    ti_tensor_t *t = ta_calloc(1, sizeof *t);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ti_ctx_set_error(ctx, msg); /* the one place for errors: the tensor and its context both say it */
    if (!t || !(t->message = ta_strdup(msg))) {
        ta_free(t);
        return &s_oom;
    }
    t->ctx = ctx;
    t->status = code;
    t = s_own(ctx, t);
    return t ? t : &s_oom;
}

ti_tensor_t *ti_error(ti_ctx_t *ctx, int code, const char *text) { return tc_error(ctx, code, "%s", text); }

int tc_report(const ti_tensor_t *t) {
    if (t->ctx && t->message) ti_ctx_set_error(t->ctx, t->message);
    return t->status;
}

ti_tensor_t *tc_fail(ti_tensor_t *x, int code, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return tc_error(x ? x->ctx : NULL, code, "%s", text);
}

ti_tensor_t *tc_k(ti_tensor_t *x, double v) {
    if (!x || x->status) return x;
    if (v == trunc(v) && fabs(v) < 1e15) return ti_scalar_int(x->ctx, (int64_t)v);
    return ti_scalar(x->ctx, v);
}

ti_tensor_t *tc_new(ti_ctx_t *ctx, tact_dtype dtype, const ta_shape_t *shape) {
    ti_tensor_t *t = ta_calloc(1, sizeof *t);
    if (!t) return tc_error(ctx, TACT_ENOMEM, "out of memory for a tensor");
    t->ctx = ctx;
    t->id = ctx->next_id++;
    t->dtype = dtype;
    t->shape = *shape;
    t->message = NULL;
    t->requires_grad = -1;
    t->device = -1;
    ti_tensor_t *owned = s_own(ctx, t);
    return owned ? owned : tc_error(ctx, TACT_ENOMEM, "out of memory for a tensor");
}

/* Frees a tensor of a scope (and its gradient): its handle is stale from now on. */
void tc_free_tensor(ti_tensor_t *t) {
    if (!t->ctx) return; /* a static error tensor */
    if (t->multi) tc_multi_free(t); /* its parts are tensors of the same scope */
    if (t->target) tc_backward_forget(t);
    tc_free_grad(t);
    ta_handle_free(t->handle);
    ta_free(t->message);
    ta_free(t);
}

/* ---------------------------------------------------------------- op records */

/*
 * Each op is a NODE record (actors/msg.h, docs/messages.md): its id, op,
 * dtype, shape, source ids and args.  Records accumulate in ctx->batch and
 * travel as one OP_BATCH message.
 */
static int s_flush(ti_ctx_t *ctx, ta_error_t *err);

static int s_record(ti_ctx_t *ctx, const ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs,
                    int nargs, const int64_t *args, int grad) {
    ta_node_rec_t r;
    memset(&r, 0, sizeof r);
    r.id = out->id;
    r.flags = grad ? TA_NODE_GRAD : 0;
    r.op = (uint64_t)op;
    r.dtype = (uint64_t)out->dtype;
    r.n_shape = (uint32_t)out->shape.ndim;
    memcpy(r.shape, out->shape.d, sizeof *r.shape * r.n_shape);
    r.n_srcs = (uint32_t)nsrc;
    for (int i = 0; i < nsrc; i++) r.srcs[i] = srcs[i]->id;
    r.n_args = (uint32_t)nargs;
    if (nargs) memcpy(r.args, args, sizeof *r.args * (size_t)nargs);
    r.device = out->device > 0 ? (uint64_t)out->device : 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &ctx->batch, msgpack_sbuffer_write);
    if (ta_rec_pack(TA_REC_NODE, &r, &pk) != 0) return TACT_ENOMEM;
    if (++ctx->nbatch >= S_BATCH_OPS && !ctx->hold) return s_flush(ctx, NULL);
    return TACT_OK;
}

static int s_flush(ti_ctx_t *ctx, ta_error_t *err) {
    if (!ctx->nbatch && !ctx->nreleased) return TACT_OK;
    int rc = TACT_OK;
    /* One message: the releases (which the graph handles first, so it
     * drops what they drop before new ops arrive), then the records
     * gathered so far behind their array header. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (ta_recs_pack_header(&pk, ctx->nbatch) || (ctx->nbatch && msgpack_sbuffer_write(&sb, ctx->batch.data, ctx->batch.size))) {
        rc = ta_error_set(err, TACT_ENOMEM, "out of memory sending ops");
    } else {
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_OP_BATCH);
        m.as.op_batch.released = ta_u64s(ctx->released, ctx->nreleased);
        m.as.op_batch.ops = ta_recs_raw(TA_REC_NODE, sb.data, sb.size, ctx->nbatch);
        rc = ta_port_send(ctx->port, ctx->wiring.graph, &m, err);
        ctx->unsynced = 1;
        ctx->flushes++;
    }
    msgpack_sbuffer_destroy(&sb);
    msgpack_sbuffer_clear(&ctx->batch);
    ctx->nbatch = 0;
    ctx->nreleased = 0;
    /* The ops that could read the deferred ids went: they go now, so the
     * request that follows a flush (a realize) knows every release made
     * before it (a scope's intermediates are temporaries). */
    if (ctx->ndeferred && rc == TACT_OK) {
        for (size_t i = 0; i < ctx->ndeferred; i++) tc_release_id(ctx, ctx->deferred[i]);
        ctx->ndeferred = 0;
        return s_flush(ctx, err); /* releases only: no deferral, one level deep */
    }
    ctx->ndeferred = 0;
    return rc;
}

ti_tensor_t *tc_emit_flagged(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs, const int64_t *args,
                             int grad) {
    if (out->status) return out;
    for (int i = 0; i < nsrc; i++)
        if (srcs[i]->multi) return tc_multi_emit(out, op, nsrc, srcs, nargs, args, grad);
    /* An op runs where its sources live (a COPY's device is its own); all
     * of them on one device, but for those made of constants only. */
    if (op == TA_OP_EMPTY && out->device < 0) out->device = 0;
    for (int i = 0; i < nsrc && op != TA_OP_COPY; i++) {
        if (srcs[i]->device < 0 || srcs[i]->device == out->device) continue;
        if (out->device < 0) {
            out->device = srcs[i]->device;
            continue;
        }
        const ta_pipeline_t *w = &out->ctx->wiring;
        out->status = TACT_EDEVICE;
        char text[200];
        snprintf(text, sizeof text, "%s: its sources are on two devices, %s and %s (move one with tact_to first)", ta_op_name(op),
                 ta_pipeline_uri(w, out->device), ta_pipeline_uri(w, srcs[i]->device));
        out->message = ta_strdup(text);
        return out;
    }
    /* Constants stay deviceless through elementwise and movement ops,
     * which fuse into whatever reads them; anything that gets a buffer of
     * its own (a reduce, a contiguous copy) is made on the first device. */
    ta_op_class_t cls = ta_op_class(op);
    if (out->device < 0 && op != TA_OP_CONST && op != TA_OP_IOTA && cls != TA_OPC_UNARY && cls != TA_OPC_BINARY && cls != TA_OPC_TERNARY && cls != TA_OPC_MOVEMENT)
        out->device = 0;
    if (s_record(out->ctx, out, op, nsrc, srcs, nargs, args, grad) != TACT_OK) {
        out->status = TACT_ENOMEM;
        out->message = ta_strdup("out of memory recording an op");
    }
    return out;
}

/* Makes the node of out from op and sources; on failure turns out into an
 * error.  out requires a gradient as the reference's Function.apply says:
 * true if a source requires one, unset if a source is unset, else false;
 * the record is differentiable when true and no-grad mode is off. */
ti_tensor_t *tc_emit(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs,
                           const int64_t *args) {
    if (out->status) return out;
    int any = 0, unset = 0;
    for (int i = 0; i < nsrc; i++) {
        any |= srcs[i]->requires_grad == 1;
        unset |= srcs[i]->requires_grad == -1;
    }
    if (nsrc) out->requires_grad = any ? 1 : unset ? -1 : 0;
    return tc_emit_flagged(out, op, nsrc, srcs, nargs, args, out->requires_grad == 1 && !out->ctx->no_grad);
}

/* ----------------------------------------------------------------- scopes */

int ti_scope_begin(ti_ctx_t *ctx) {
    if (!ctx) return TACT_EINVAL;
    if (ta_grow((void **)&ctx->scopes, &ctx->scopes_cap, ctx->nscopes + 1, sizeof *ctx->scopes) != TACT_OK) {
        ti_ctx_set_error(ctx, "scope_begin: out of memory");
        return TACT_ENOMEM;
    }
    memset(&ctx->scopes[ctx->nscopes], 0, sizeof ctx->scopes[0]);
    ctx->nscopes++;
    return TACT_OK;
}

int ti_scope_end(ti_ctx_t *ctx) {
    if (!ctx) return TACT_EINVAL;
    if (ctx->nscopes <= 1) {
        ti_ctx_set_error(ctx, "scope_end: no scope is open (only the context's root scope, which closing the context ends)");
        return TACT_EINVAL;
    }
    tc_scope_t *sc = &ctx->scopes[ctx->nscopes - 1], *parent = sc - 1;
    int rc = TACT_OK;
    for (size_t i = 0; i < sc->n; i++) {
        ti_tensor_t *t = sc->items[i];
        if (t->kept) {
            t->kept = 0;
            if (ta_grow((void **)&parent->items, &parent->cap, parent->n + 1, sizeof *parent->items) == TACT_OK) {
                t->level = ctx->nscopes - 2;
                t->slot = parent->n;
                parent->items[parent->n++] = t;
                continue;
            }
            rc = TACT_ENOMEM; /* cannot keep it: release it rather than leak */
            ti_ctx_set_error(ctx, "scope_end: out of memory keeping a tensor; it was released");
        }
        tc_release_id(ctx, t->id);
        tc_free_tensor(t);
    }
    ta_free(sc->items);
    ctx->nscopes--;
    /* Releases travel with a later flush (tc_release_id). */
    return rc;
}

void ti_release(ti_tensor_t *t) {
    ti_ctx_t *ctx = t ? t->ctx : NULL;
    if (!ctx || (size_t)t->level >= ctx->nscopes) return; /* a static error tensor */
    /* A sharded tensor's parts are tensors of their own scopes: they go with it. */
    for (int i = 0; t->multi; i++) {
        ti_tensor_t *part = tc_multi_part(t, i);
        if (!part) break;
        if (part != t) ti_release(part); /* parts are never sharded: one level deep */
    }
    tc_scope_t *sc = &ctx->scopes[t->level];
    if (t->slot >= sc->n || sc->items[t->slot] != t) return; /* not where it should be: never a wrong one freed */
    ti_tensor_t *last = sc->items[--sc->n];
    sc->items[t->slot] = last;
    last->slot = t->slot;
    tc_release_id(ctx, t->id);
    tc_free_tensor(t);
}

ti_tensor_t *ti_keep(ti_tensor_t *t) {
    if (!t) return &s_null_arg;
    if (t->ctx) t->kept = 1;
    if (t->ctx && t->multi) tc_multi_keep(t);
    return t;
}

/* ---------------------------------------------------------------- queries */

int ti_ndim(const ti_tensor_t *t) { return t ? t->shape.ndim : 0; }
int64_t ti_dim(const ti_tensor_t *t, int k) {
    if (!t) return -1;
    if (k < 0) k += t->shape.ndim;
    return k >= 0 && k < t->shape.ndim ? t->shape.d[k] : -1;
}
void ti_shape(const ti_tensor_t *t, int64_t *out) {
    if (t && out) memcpy(out, t->shape.d, sizeof(int64_t) * (size_t)t->shape.ndim);
}
int64_t ti_numel(const ti_tensor_t *t) { return t ? ta_shape_numel(&t->shape) : 0; }
tact_dtype ti_dtype_of(const ti_tensor_t *t) { return t ? t->dtype : TACT_FLOAT32; }
const char *ti_device(const ti_tensor_t *t) {
    if (!t || !t->ctx) return "CPU";
    if (t->multi) return tc_multi_name(t);
    return ta_pipeline_uri(&t->ctx->wiring, tc_home(t));
}
int ti_status_of(const ti_tensor_t *t) { return t ? t->status : TACT_EINVAL; }
const char *ti_error_message(const ti_tensor_t *t) { return !t ? s_null_arg.message : t->message ? t->message : ""; }
const char *tact_dtype_name(tact_dtype d) { return ta_dtype_name(d); }

/* --------------------------------------------------------------- creation */

/* A CONST node of shape () holding v. */
ti_tensor_t *tc_const(ti_ctx_t *ctx, tact_dtype d, ta_value_t v) {
    ta_shape_t scalar = {0, {0}};
    return tc_const_shaped(ctx, d, v, &scalar);
}

/* A constant of any shape is one node, as a scalar constant broadcast to
 * it is (CONST, RESHAPE, EXPAND): every element is the value. */
ti_tensor_t *tc_const_shaped(ti_ctx_t *ctx, tact_dtype d, ta_value_t v, const ta_shape_t *shape) {
    ti_tensor_t *t = tc_new(ctx, d, shape);
    int64_t bits = (int64_t)ta_value_bits(d, v);
    return tc_emit(t, TA_OP_CONST, 0, NULL, 1, &bits);
}

/* The tensor a weak scalar becomes as dtype d, of shape (). */
ti_tensor_t *tc_materialize(ti_tensor_t *w, tact_dtype d) {
    ta_shape_t scalar = {0, {0}};
    return tc_materialize_as(w, d, &scalar);
}

/* The same, of the given shape (the tensor it meets). */
ti_tensor_t *tc_materialize_as(ti_tensor_t *w, tact_dtype d, const ta_shape_t *shape) {
    ta_value_t v;
    if (w->kind == TA_SCALAR_FLOAT) {
        v = ta_value_from_double(d, w->fvalue);
    } else {
        ta_value_t iv;
        memset(&iv, 0, sizeof iv);
        iv.i = w->ivalue;
        v = ta_value_convert(d, TACT_INT64, iv);
    }
    return tc_const_shaped(w->ctx, d, v, shape);
}

/* A weak scalar on its own takes its kind's default dtype. */
ti_tensor_t *tc_solid(ti_tensor_t *t) {
    if (!t->weak || t->status) return t;
    return tc_materialize(t, t->kind == TA_SCALAR_BOOL ? TACT_BOOL : t->kind == TA_SCALAR_INT ? TACT_INT32 : TACT_FLOAT32);
}

static ti_tensor_t *s_weak(ti_ctx_t *ctx, ta_scalar_kind_t kind, double f, int64_t i) {
    if (!ctx) return &s_null_arg;
    ti_tensor_t *t = ta_calloc(1, sizeof *t);
    if (!t) return tc_error(ctx, TACT_ENOMEM, "out of memory for a scalar");
    t->ctx = ctx;
    t->weak = 1;
    t->kind = kind;
    t->fvalue = f;
    t->ivalue = i;
    t->dtype = kind == TA_SCALAR_BOOL ? TACT_BOOL : kind == TA_SCALAR_INT ? TACT_INT32 : TACT_FLOAT32;
    ti_tensor_t *owned = s_own(ctx, t);
    return owned ? owned : tc_error(ctx, TACT_ENOMEM, "out of memory for a scalar");
}

int ti_weak_value(const ti_tensor_t *t, double *v) {
    if (!t || t->status || !t->weak) return 0;
    *v = t->kind == TA_SCALAR_FLOAT ? t->fvalue : (double)t->ivalue;
    return 1;
}

ti_tensor_t *ti_scalar(ti_ctx_t *ctx, double v) { return s_weak(ctx, TA_SCALAR_FLOAT, v, 0); }
ti_tensor_t *ti_scalar_int(ti_ctx_t *ctx, int64_t v) { return s_weak(ctx, TA_SCALAR_INT, 0, v); }
ti_tensor_t *ti_scalar_bool(ti_ctx_t *ctx, int v) { return s_weak(ctx, TA_SCALAR_BOOL, 0, v != 0); }


ti_tensor_t *ti_from_data(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    return tc_from_data_at(ctx, 0, dtype, ndim, shape, data);
}

ti_tensor_t *tc_from_data_at(ti_ctx_t *ctx, int at, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (!ctx) return &s_null_arg;
    ta_shape_t s;
    ti_tensor_t *bad = tc_check_new(ctx, "from_data", dtype, ndim, shape, &s);
    if (bad) return bad;
    size_t bytes = (size_t)ta_shape_numel(&s) * ta_dtype_size(dtype);
    if (!data && bytes) return tc_error(ctx, TACT_EINVAL, "from_data: data is NULL");
    /* EMPTY with argument 1: its bytes follow in a WRITE, which the graph
     * builder passes to the executor. */
    int64_t data_follows = 1;
    ti_tensor_t *t = tc_new(ctx, dtype, &s);
    if (!t->status) t->device = at;
    t = tc_emit(t, TA_OP_EMPTY, 0, NULL, 1, &data_follows);
    if (t->status) return t;
    ta_error_t err;
    int rc = s_flush(ctx, &err);
    /* Bools are normalized to 0/1 so kernels can rely on it. */
    uint8_t *norm = NULL;
    if (rc == TACT_OK && dtype == TACT_BOOL && bytes) {
        norm = ta_malloc(bytes);
        if (!norm) rc = ta_error_set(&err, TACT_ENOMEM, "from_data: out of memory");
        for (size_t i = 0; norm && i < bytes; i++) norm[i] = ((const uint8_t *)data)[i] != 0;
    }
    if (rc == TACT_OK) {
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_WRITE);
        m.as.write.buf = t->id;
        m.bulk.ptr = norm ? norm : data;
        m.bulk.len = bytes;
        rc = ta_port_send(ctx->port, ctx->wiring.graph, &m, &err);
        ctx->unsynced = 1;
    }
    ta_free(norm);
    if (rc != TACT_OK) {
        t->status = rc;
        t->message = ta_strdup(err.text);
    }
    return t;
}





ti_tensor_t *ti_contiguous(ti_tensor_t *x) {
    if (!x) return &s_null_arg;
    x = tc_solid(x);
    return x->status ? x : tc_unary(x, TA_OP_CONTIGUOUS, x->dtype);
}

const ta_pipeline_t *tc_wiring(const ti_ctx_t *ctx) { return &ctx->wiring; }

int tc_device_index(const ti_ctx_t *ctx, const char *device, ta_error_t *err) {
    char uri[TA_URI_MAX + 1];
    int rc = ta_device_uri(device, strlen(device), uri, err);
    if (rc != TACT_OK) return -1;
    const ta_pipeline_t *w = &ctx->wiring;
    for (int i = 0; i < w->ndevices; i++)
        if (strcmp(w->device[i].uri, uri) == 0) return i;
    char list[400];
    ta_pipeline_device_list(w, ", ", list, sizeof list);
    ta_error_set(err, TACT_EDEVICE, "%s is not one of this context's devices (%s; tact_options.devices)", device, list);
    return -1;
}

ti_tensor_t *tc_to_index(ti_tensor_t *x, int at) {
    if (x->status) return x;
    if (x->multi) return tc_gather(x, at);
    if (x->device == at) return x;
    ti_tensor_t *out = tc_new(x->ctx, x->dtype, &x->shape);
    if (out->status) return out;
    out->device = at;
    /* Constants alone are computed where they are wanted; anything else
     * is made contiguous where it is, then copied as a whole buffer. */
    if (x->device < 0) return tc_emit(out, TA_OP_CONTIGUOUS, 1, (const ti_tensor_t *const[]){x}, 0, NULL);
    ti_tensor_t *src = ti_contiguous(x);
    if (src->status) return src;
    return tc_emit(out, TA_OP_COPY, 1, (const ti_tensor_t *const[]){src}, 0, NULL);
}

ti_tensor_t *ti_to(ti_tensor_t *x, const char *device) {
    if (!x) return &s_null_arg;
    x = tc_solid(x);
    if (x->status) return x;
    ti_ctx_t *ctx = x->ctx;
    if (!device) return tc_error(ctx, TACT_EINVAL, "to: device is NULL");
    ta_error_t err;
    int at = tc_device_index(ctx, device, &err);
    return at < 0 ? tc_error(ctx, err.code, "to: %s", err.text) : tc_to_index(x, at);
}

ti_tensor_t *ti_assign(ti_tensor_t *target, ti_tensor_t *value) {
    ti_tensor_t *e = tc_any_error(2, (ti_tensor_t *[]){target, value});
    if (e) return e;
    ti_ctx_t *ctx = target->ctx;
    if (target->multi || value->multi) { /* part by part, split the same way */
        if (!target->multi || (value->multi && !tc_multi_alike(value, target)))
            return tc_error(ctx, TACT_EDEVICE, "assign: value is on %s, target on %s%s", ti_device(value), ti_device(target),
                            target->multi && value->multi ? ", split another way" : "");
        if (value->weak) value = tc_materialize(value, target->dtype);
        if (!value->multi && value->device >= 0)
            return tc_error(ctx, TACT_EDEVICE, "assign: value is on %s, target on %s", ti_device(value), ti_device(target));
        for (int i = 0; tc_multi_part(target, i); i++) {
            if (!tc_multi_real(target, i)) return tc_error(ctx, TACT_EINVAL, "assign: the target is a shrink to one part of a sharded tensor");
        }
        for (int i = 0; tc_multi_part(target, i); i++) {
            ti_tensor_t *r = ti_assign(tc_multi_part(target, i), tc_multi_slice(value, target, i));
            if (r->status) return r;
        }
        return target;
    }
    if (target->weak || target->view)
        return tc_error(ctx, TACT_EINVAL, "assign: the target is a %s, not a tensor with its own buffer",
                       target->weak ? "scalar" : "view (reshape, permute, expand, pad, shrink or flip)");
    if (value->weak) value = tc_materialize(value, target->dtype);
    if (value->dtype != target->dtype)
        return tc_error(ctx, TACT_EDTYPE, "assign: value is %s, target is %s", ta_dtype_name(value->dtype), ta_dtype_name(target->dtype));
    if (value->device >= 0 && value->device != tc_home(target))
        return tc_error(ctx, TACT_EDEVICE, "assign: value is on %s, target on %s (move it with tact_to first)", ti_device(value), ti_device(target));
    ta_shape_t out;
    ta_error_t err;
    if (ta_shape_broadcast(&value->shape, &target->shape, "assign", &out, &err) != TACT_OK || !ta_shape_equal(&out, &target->shape)) {
        char st[128], sv[128];
        ta_shape_format(&target->shape, st, sizeof st);
        ta_shape_format(&value->shape, sv, sizeof sv);
        return tc_error(ctx, TACT_ESHAPE, "assign: value of shape %s does not fit target of shape %s", sv, st);
    }
    value = tc_broadcast_to(value, &target->shape);
    if (value->status) return value;
    /* The handle moves to the ASSIGN node; the node it named before is
     * released (the assign itself keeps it alive while it needs it). */
    ti_tensor_t next = *target;
    next.id = ctx->next_id++;
    const ti_tensor_t *src[2] = {target, value};
    /* While a mark holds, what the target named is noted (ti_mark_end). */
    if (ctx->hold && ta_grow((void **)&ctx->undo, &ctx->undo_cap, ctx->nundo + 1, sizeof *ctx->undo) != TACT_OK)
        return tc_error(ctx, TACT_ENOMEM, "assign: out of memory");
    if (s_record(ctx, &next, TA_OP_ASSIGN, 2, src, 0, NULL, 0) != TACT_OK) return tc_error(ctx, TACT_ENOMEM, "assign: out of memory");
    if (ctx->hold) ctx->undo[ctx->nundo++] = (struct s_undo){target, target->id, target->realized};
    /* The assign reads the node it releases: the release goes after it. */
    tc_release_id(ctx, target->id);
    target->id = next.id;
    target->realized = 0;
    /* The target's buffer will change under the views that share it. */
    ctx->assigns++;
    memset(ctx->returned, 0, sizeof ctx->returned);
    return target;
}

/* -------------------------------------------------------------- sync points */

/* Keeps the small tensors' bytes a DONE carries (pairs of id and length
 * in returned, the bytes one after another in the bulk); a malformed list
 * is ignored (those tensors are read the long way). */
static void s_keep_returned(ti_ctx_t *ctx, const ta_msg_t *done) {
    ta_u64s_it_t it;
    uint64_t id, len;
    size_t at = 0;
    if (done->as.done.returned.n % 2) return;
    ta_u64s_begin(&it, &done->as.done.returned);
    while (ta_u64s_next(&it, &id) && ta_u64s_next(&it, &len)) {
        if (!len || len > TA_RETURN_BYTES || len > done->bulk.len - at) return;
        struct s_returned *e = NULL;
        for (int i = 0; i < TA_RETURNS_MAX && !e; i++)
            if (ctx->returned[i].id == id) e = &ctx->returned[i]; /* one entry an id */
        if (!e) {
            e = &ctx->returned[ctx->next_returned];
            ctx->next_returned = (ctx->next_returned + 1) % TA_RETURNS_MAX;
        }
        e->id = id;
        e->len = (size_t)len;
        memcpy(e->bytes, (const uint8_t *)done->bulk.ptr + at, (size_t)len);
        at += (size_t)len;
    }
}

/* Waits for the answer of every realize started and not yet waited for, in
 * the order they were started.  Returns the first one's error (its text in
 * ctx->error), or TACT_OK; the stats come from the last one.  The graph
 * hears of the failed ones with the next REALIZE. */
int tc_wait(ti_ctx_t *ctx, int closing) {
    int first = ti_settle_backward(ctx, !closing); /* its answer came before theirs */
    const ta_pipeline_t *w = &ctx->wiring;
    for (size_t i = 0; i < ctx->ninflight; i++) {
        /* Every executor answers each realize, in the order of the devices. */
        int rc = TACT_OK;
        ta_error_t err = {0, ""};
        tact_stats sum;
        memset(&sum, 0, sizeof sum);
        for (int d = 0; d < w->ndevices; d++) {
            /* A worker lost before this realize went out has no part in it
             * (the graph sends it nothing; a realize that needed it failed
             * where it waited for it, or at its start). */
            int lost = ta_rt_lost(ctx->rt, w->device[d].executor, NULL, 0);
            if (lost && lost <= ctx->inflight[i].losses) continue;
            ta_msg_t reply;
            ta_error_t e = {0, ""};
            ta_msg_init(&reply, TA_MSG_READY);
            int r = ta_port_wait_from(ctx->port, ctx->inflight[i].corr, w->device[d].executor, &reply, ctx->timeout_ms, !closing, &e);
            if (r == TACT_ETIMEDOUT && closing)
                ta_error_set(&e, r, "close: realize %" PRIu64 " was still running after %d ms; stopped", ctx->inflight[i].realize, ctx->timeout_ms);
            else if (r == TACT_ETIMEDOUT)
                ta_error_set(&e, r, "no answer to realize %" PRIu64 ", and no sign of work on it, within %d ms", ctx->inflight[i].realize,
                             ctx->timeout_ms);
            if (r == TACT_OK && reply.type == TA_MSG_DONE) {
                if (ctx->inflight[i].assigns == ctx->assigns) s_keep_returned(ctx, &reply);
                sum.planned_peak_bytes += reply.as.done.planned_peak;
                sum.unplanned_bytes += reply.as.done.unplanned;
                sum.device_bytes += reply.as.done.device_bytes;
                sum.kernels += reply.as.done.kernels;
                ctx->device_stats[d].kernels += reply.as.done.kernels;
                ctx->device_stats[d].realizes += reply.as.done.kernels > 0;
            }
            if (r != TACT_OK && rc == TACT_OK) rc = r, err = e;
            ta_msg_release(&reply);
            if (r == TACT_ETIMEDOUT) break; /* the others are not waited for as long again */
        }
        if (rc == TACT_OK && sum.kernels) {
            ctx->stats.planned_peak_bytes = sum.planned_peak_bytes;
            ctx->stats.unplanned_bytes = sum.unplanned_bytes;
            ctx->stats.device_bytes = sum.device_bytes;
            ctx->stats.kernels = sum.kernels;
            ctx->stats.realizes++;
        } else if (rc == TACT_OK) {
            ctx->stats.kernels = 0;
        }
        if (rc != TACT_OK) {
            if (ta_grow((void **)&ctx->failed, &ctx->failed_cap, ctx->nfailed + 1, sizeof *ctx->failed) == TACT_OK)
                ctx->failed[ctx->nfailed++] = ctx->inflight[i].realize;
            if (first == TACT_OK) {
                first = rc;
                snprintf(ctx->error, sizeof ctx->error, "%s", err.text);
            }
        }
        ctx->settled = ctx->inflight[i].realize;
    }
    /* Answers that come after their wait gave up are dropped, not kept. */
    if (ctx->ninflight) ta_port_forget(ctx->port, ctx->inflight[ctx->ninflight - 1].corr);
    ctx->ninflight = 0;
    return first;
}

int ti_wait(ti_ctx_t *ctx) { return ctx ? tc_wait(ctx, 0) : TACT_EINVAL; }



/* Waits for the reply to req (after every realize in flight); returns its
 * status with ctx->error set. */
static int s_request(ti_ctx_t *ctx, ta_msg_t *req, ta_msg_t *reply) {
    ta_error_t err = {0, ""};
    int rc = ti_wait(ctx);
    if (rc != TACT_OK) return rc;
    rc = s_flush(ctx, &err);
    /* A READ is answered by the device that has the tensor: a worker lost
     * meanwhile ends the wait. */
    uint32_t watch = req->type == TA_MSG_READ ? TA_WATCH_LOSSES : ctx->wiring.graph;
    if (rc == TACT_OK) rc = ta_port_request_watching(ctx->port, ctx->wiring.graph, watch, req, reply, ctx->timeout_ms, &err);
    if (rc == TACT_OK) ctx->unsynced = 0; /* answered: the graph took everything before it */
    if (rc != TACT_OK) snprintf(ctx->error, sizeof ctx->error, "%s", err.text);
    return rc;
}

int tc_request(ti_ctx_t *ctx, ta_msg_t *req, ta_msg_t *reply) { return s_request(ctx, req, reply); }

int tc_send_request(ti_ctx_t *ctx, ta_msg_t *req) {
    ta_error_t err = {0, ""};
    int rc = s_flush(ctx, &err);
    if (rc == TACT_OK) rc = ta_port_send_request(ctx->port, ctx->wiring.graph, req, &err);
    if (rc == TACT_OK) ctx->unsynced = 1;
    else snprintf(ctx->error, sizeof ctx->error, "%s", err.text);
    return rc;
}

int tc_wait_reply(ti_ctx_t *ctx, uint64_t corr, ta_msg_t *reply, int extend) {
    ta_error_t err = {0, ""};
    int rc = ta_port_wait_from(ctx->port, corr, ctx->wiring.graph, reply, ctx->timeout_ms, extend, &err);
    if (rc != TACT_OK) snprintf(ctx->error, sizeof ctx->error, "%s", err.text);
    return rc;
}

void **tc_backward_slot(ti_ctx_t *ctx) { return &ctx->backward; }

/* Takes id out of list[from..*n) (its last release there); 1 if found. */
static int s_unrelease(uint64_t *list, size_t *n, size_t from, uint64_t id) {
    for (size_t i = *n; i-- > from;) {
        if (list[i] != id) continue;
        memmove(&list[i], &list[i + 1], (*n - i - 1) * sizeof *list);
        (*n)--;
        return 1;
    }
    return 0;
}

/* One mark at a time: the optimizer's (nn_optim.c), which frees no
 * tensor between its mark and its end. */
int ti_mark_ahead(ti_ctx_t *ctx, ta_mark_t *m) {
    if (!ctx->backward) return 0;
    *m = (ta_mark_t){ctx->batch.size, ctx->nbatch, ctx->nreleased, ctx->ndeferred, ctx->flushes};
    ctx->hold = 1;
    ctx->nundo = 0;
    return 1;
}

int ti_mark_end(ti_ctx_t *ctx, const ta_mark_t *m, int keep) {
    int was = ctx->hold;
    ctx->hold = 0;
    if (keep) return TACT_OK;
    /* Nothing was sent while the mark held (no flush but a request's,
     * and the step makes none before its end). */
    if (!was || ctx->flushes != m->flushes) return TACT_EINVAL;
    ctx->batch.size = m->bytes;
    ctx->nbatch = m->nbatch;
    /* Each assign released what its target named: that release goes (the
     * others made since, the answer's, stay). */
    for (size_t i = ctx->nundo; i-- > 0;) {
        struct s_undo *u = &ctx->undo[i];
        u->t->id = u->id, u->t->realized = u->realized;
        if (!s_unrelease(ctx->deferred, &ctx->ndeferred, m->ndeferred, u->id)) s_unrelease(ctx->released, &ctx->nreleased, m->nreleased, u->id);
    }
    return TACT_OK;
}

uint64_t tc_new_id(ti_ctx_t *ctx) { return ctx->next_id++; }

void tc_release_id(ti_ctx_t *ctx, uint64_t id) {
    if (!id) return;
    /* An op of the batch may read it: after the batch, in the next one. */
    int later = ctx->nbatch > 0;
    uint64_t **list = later ? &ctx->deferred : &ctx->released;
    size_t *n = later ? &ctx->ndeferred : &ctx->nreleased, *cap = later ? &ctx->deferred_cap : &ctx->released_cap;
    if (ta_grow((void **)list, cap, *n + 1, sizeof **list) == TACT_OK) (*list)[(*n)++] = id;
}

void tc_each_tensor(ti_ctx_t *ctx, void (*fn)(ti_tensor_t *t, void *ud), void *ud) {
    for (size_t s = 0; s < ctx->nscopes; s++)
        for (size_t i = 0; i < ctx->scopes[s].n; i++) fn(ctx->scopes[s].items[i], ud);
}

ti_tensor_t *tc_new_unscoped(ti_ctx_t *ctx, uint64_t id, tact_dtype dtype, const ta_shape_t *shape) {
    ti_tensor_t *t = ta_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ctx = ctx;
    t->id = id;
    t->dtype = dtype;
    t->shape = *shape;
    t->requires_grad = 0;
    if (!(t->handle = ta_handle_new(t, TA_HANDLE_TENSOR))) {
        ta_free(t);
        return NULL;
    }
    return t;
}

void tc_free_grad(ti_tensor_t *t) {
    ti_tensor_t *g = t->grad;
    if (!g) return;
    t->grad = NULL;
    tc_release_id(t->ctx, g->id);
    ta_handle_free(g->handle);
    ta_free(g->message);
    ta_free(g);
}

int ti_set_no_grad(ti_ctx_t *ctx, int on) {
    int was = ctx->no_grad;
    ctx->no_grad = on != 0;
    return was;
}

int ti_realize_async(ti_ctx_t *ctx, int n, ti_tensor_t *const *tensors) {
    if (!ctx) return TACT_EINVAL;
    if (n < 0 || (n > 0 && !tensors)) {
        snprintf(ctx->error, sizeof ctx->error, "realize: %d tensors at %p", n, (const void *)tensors);
        return TACT_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (!tensors[i] || (tensors[i]->ctx != ctx && !tensors[i]->status)) {
            snprintf(ctx->error, sizeof ctx->error, "realize: tensor %d is %s", i, tensors[i] ? "of another context" : "NULL");
            return TACT_EINVAL;
        }
        if (tensors[i]->status) {
            snprintf(ctx->error, sizeof ctx->error, "%s", tensors[i]->message ? tensors[i]->message : "");
            return tensors[i]->status;
        }
    }
    /* A sharded tensor is its parts. */
    size_t nids = 0;
    for (int i = 0; i < n; i++) nids += tensors[i]->multi ? (size_t)ctx->wiring.ndevices : 1;
    uint64_t *ids = ta_malloc(sizeof *ids * (nids ? nids : 1));
    ta_error_t err = {0, ""};
    int rc = !ids || ta_grow((void **)&ctx->inflight, &ctx->inflight_cap, ctx->ninflight + 1, sizeof *ctx->inflight) != TACT_OK
                 ? ta_error_set(&err, TACT_ENOMEM, "realize: out of memory")
                 : TACT_OK;
    nids = 0;
    for (int i = 0; rc == TACT_OK && i < n; i++) {
        /* Constants realized get a buffer on the first device: there they are now. */
        if (!tensors[i]->multi && tensors[i]->device < 0) tensors[i]->device = 0;
        if (!tensors[i]->multi) ids[nids++] = tc_solid(tensors[i])->id;
        for (int j = 0; tensors[i]->multi && tc_multi_part(tensors[i], j); j++)
            if (tc_multi_real(tensors[i], j)) ids[nids++] = tc_multi_part(tensors[i], j)->id;
    }
    /* A target on a lost worker cannot be computed: said now, naming it. */
    for (int d = 0; d < ctx->wiring.ndevices; d++) {
        char why[200];
        if (!ta_rt_lost(ctx->rt, ctx->wiring.device[d].executor, why, sizeof why)) continue;
        for (int i = 0; rc == TACT_OK && i < n; i++)
            if (tensors[i]->multi ? tc_multi_part(tensors[i], d) != NULL : tensors[i]->device == d)
                rc = ta_error_set(&err, TACT_ETRANSPORT, "realize: tensor %d is on %s: %s", i, ctx->wiring.device[d].uri, why);
    }
    int losses = ta_rt_losses(ctx->rt);
    if (rc == TACT_OK) rc = s_flush(ctx, &err);
    if (rc == TACT_OK) {
        /* Realizes are numbered; each REALIZE also tells the graph which of
         * the earlier ones failed, so their nodes are computed again. */
        ta_msg_t req;
        ta_msg_init(&req, TA_MSG_REALIZE);
        req.as.realize.realize = ctx->realizes + 1;
        req.as.realize.ids = ta_u64s(ids, nids);
        req.as.realize.settled = ctx->settled;
        req.as.realize.failed = ta_u64s(ctx->failed, ctx->nfailed);
        rc = ta_port_send_request(ctx->port, ctx->wiring.graph, &req, &err);
        if (rc == TACT_OK) ctx->unsynced = 0; /* its answer comes after everything before it */
        if (rc == TACT_OK) {
            ctx->inflight[ctx->ninflight++] = (struct s_inflight){req.corr, ++ctx->realizes, ctx->assigns, losses};
            ctx->nfailed = 0;
        }
    }
    if (rc != TACT_OK) snprintf(ctx->error, sizeof ctx->error, "%s", err.text);
    ta_free(ids);
    return rc;
}

int ti_realize(ti_ctx_t *ctx, int n, ti_tensor_t *const *tensors) {
    if (!ctx) return TACT_EINVAL;
    int rc = ti_realize_async(ctx, n, tensors);
    int wrc = ti_wait(ctx);
    if (rc == TACT_OK && wrc == TACT_OK)
        for (int i = 0; i < n; i++) {
            tc_solid(tensors[i])->realized = 1;
            for (int j = 0; tensors[i]->multi && tc_multi_part(tensors[i], j); j++)
                if (tc_multi_real(tensors[i], j)) tc_multi_part(tensors[i], j)->realized = 1;
        }
    return rc != TACT_OK ? rc : wrc;
}

/* READ of tensor id: its need bytes into buf.  Returns the request's
 * status (the graph refuses a tensor not realized contiguously), with
 * ctx->error set on failure. */
static int s_read_bytes(ti_ctx_t *ctx, uint64_t id, void *buf, size_t need) {
    ta_msg_t req, reply;
    ta_msg_init(&req, TA_MSG_READ);
    ta_msg_init(&reply, TA_MSG_READY);
    req.as.read.id = id;
    int rc = s_request(ctx, &req, &reply);
    if (rc == TACT_OK && (reply.type != TA_MSG_DATA || reply.bulk.len != need)) {
        snprintf(ctx->error, sizeof ctx->error, "read: expected %zu bytes, got %zu", need, reply.bulk.len);
        rc = TACT_EPROTO;
    }
    if (rc == TACT_OK && need) memcpy(buf, reply.bulk.ptr, need);
    ta_msg_release(&reply);
    return rc;
}

int ti_read(ti_tensor_t *t, void *buf, size_t bytes) {
    if (!t) return TACT_EINVAL;
    if (t->status) return tc_report(t);
    ti_ctx_t *ctx = t->ctx;
    if (!buf && bytes) {
        snprintf(ctx->error, sizeof ctx->error, "read: buf is NULL");
        return TACT_EINVAL;
    }
    t = tc_solid(t);
    if (t->multi) t = tc_gather(t, tc_multi_first(t)->device); /* read on its first (real) part's device */
    if (t->status) return tc_report(t);
    size_t need = (size_t)ti_numel(t) * ta_dtype_size(t->dtype);
    if (bytes < need) {
        snprintf(ctx->error, sizeof ctx->error, "read: buffer of %zu bytes, the tensor has %zu", bytes, need);
        return TACT_EINVAL;
    }
    /* Realized already: one request, not a realize and then a read (a
     * training loop reads its loss every step). */
    if (t->realized && t->id) {
        /* Came with a realize's answer: no request (unless realizes are in
         * flight, whose errors a read reports as it waits for them). */
        for (int i = 0; i < TA_RETURNS_MAX && !ctx->ninflight; i++)
            if (ctx->returned[i].id == t->id && ctx->returned[i].len == need) {
                memcpy(buf, ctx->returned[i].bytes, need);
                return TACT_OK;
            }
        char before[sizeof ctx->error];
        memcpy(before, ctx->error, sizeof before);
        if (s_read_bytes(ctx, t->id, buf, need) == TACT_OK) return TACT_OK;
        t->realized = 0; /* not there after all (a view, say): the long way, and no failure */
        memcpy(ctx->error, before, sizeof before);
    }
    /* Reading goes through a contiguous copy, which is t itself when t is
     * already a realized contiguous buffer. */
    ti_tensor_t *c = ti_contiguous(t);
    int rc = ti_realize(ctx, 1, &c);
    if (rc != TACT_OK) return rc;
    return s_read_bytes(ctx, c->id, buf, need);
}

int ti_item(ti_tensor_t *t, double *out) {
    if (!t) return TACT_EINVAL;
    if (t->status) return tc_report(t);
    if (!out) {
        ti_ctx_set_error(t->ctx, "item: out is NULL");
        return TACT_EINVAL;
    }
    if (ti_numel(t) != 1) {
        snprintf(t->ctx->error, sizeof t->ctx->error, "item: the tensor has %" PRId64 " elements, not 1", ti_numel(t));
        return TACT_ESHAPE;
    }
    uint8_t buf[8];
    ti_tensor_t *s = tc_solid(t);
    int rc = ti_read(s, buf, sizeof buf);
    if (rc == TACT_OK) *out = ta_value_as_double(s->dtype, ta_value_load(s->dtype, buf));
    return rc;
}
