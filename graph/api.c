/* api.c - the public tensor API (include/tact.h): checks every handle and the one-thread rule, then calls client.c. */
#include <stdio.h>

#include "client_impl.h"
#include "handle.h"
#include "mem.h"

/*
 * tact_ctx * and tact_tensor * are handles (handle.h), never pointers a
 * caller could follow into freed memory.  Every entry point here turns them
 * into objects: NULL becomes the NULL-argument error tensor, a stale or
 * foreign handle the stale-handle one, and the call then goes to the ti_
 * function of the same name.  It also holds the context for the call: a
 * context is used by one thread at a time, and a second thread that calls
 * into it meanwhile gets TACT_EBUSY (or an error tensor saying so) at once,
 * never a race.
 */

static ti_tensor_t *s_t(const tact_tensor *h) {
    if (!h) return ti_null_arg();
    ti_tensor_t *t = ta_handle_get((uintptr_t)h, TA_HANDLE_TENSOR);
    return t ? t : ti_stale_arg();
}

static tact_tensor *s_h(ti_tensor_t *t) { return (tact_tensor *)ti_tensor_handle(t); }

/* The context a call works in: the first of its tensors that has one. */
static ti_ctx_t *s_ctx_of(ti_tensor_t *a, ti_tensor_t *b, ti_tensor_t *c) {
    ti_ctx_t *ctx = a ? ti_tensor_ctx(a) : NULL;
    if (!ctx && b) ctx = ti_tensor_ctx(b);
    if (!ctx && c) ctx = ti_tensor_ctx(c);
    return ctx;
}

/* A tensor-returning call inside ctx (NULL: no context to hold). */
#define S_TENSOR(ctx, expr)                                           \
    do {                                                              \
        ti_ctx_t *c_ = (ctx);                                         \
        if (c_ && ti_ctx_enter(c_) != 0) return s_h(ti_busy_arg());   \
        tact_tensor *h_ = s_h(expr);                                  \
        if (c_) ti_ctx_leave(c_);                                     \
        return h_;                                                    \
    } while (0)

/* A call returning type T inside ctx, or `bad` without a context. */
#define S_VALUE(T, ctx, bad, busy, expr)              \
    do {                                              \
        ti_ctx_t *c_ = (ctx);                         \
        if (!c_) return bad;                          \
        if (ti_ctx_enter(c_) != 0) return busy;       \
        T r_ = (expr);                                \
        ti_ctx_leave(c_);                             \
        return r_;                                    \
    } while (0)

/* A context argument: NULL or stale gives the NULL-argument or the
 * stale-handle error tensor. */
#define S_CTX_TENSOR(hctx, expr)                                                \
    do {                                                                        \
        if (!(hctx)) return s_h(ti_null_arg());                                 \
        ti_ctx_t *ctx = ta_handle_get((uintptr_t)(hctx), TA_HANDLE_CTX);        \
        if (!ctx) return s_h(ti_stale_arg());                                   \
        S_TENSOR(ctx, expr);                                                    \
    } while (0)

static ti_ctx_t *s_c(const tact_ctx *h) { return h ? ta_handle_get((uintptr_t)h, TA_HANDLE_CTX) : NULL; }

/* ---------------------------------------------------------------- contexts */

int tact_ctx_open(tact_ctx **out, const tact_options *opts) {
    ti_ctx_t *ctx = NULL;
    int rc = ti_ctx_open(out ? &ctx : NULL, opts);
    if (out) *out = rc == TACT_OK ? (tact_ctx *)ti_ctx_handle(ctx) : NULL;
    return rc;
}

int ta_ctx_open_as(tact_ctx **out, const tact_options *opts, const char *cc, int schedule_cache) {
    ti_ctx_t *ctx = NULL;
    int rc = ti_ctx_open_as(&ctx, opts, cc, schedule_cache);
    *out = rc == TACT_OK ? (tact_ctx *)ti_ctx_handle(ctx) : NULL;
    return rc;
}

int tact_ctx_close(tact_ctx **pctx) {
    if (!pctx || !*pctx) return TACT_OK;
    ti_ctx_t *ctx = s_c(*pctx);
    *pctx = NULL;
    if (!ctx) return TACT_EINVAL; /* closed already, or never a context */
    if (ti_ctx_enter(ctx) != 0) return TACT_EBUSY;
    ti_ctx_leave(ctx); /* nobody else is inside; the context goes now */
    return ti_ctx_close(&ctx);
}

const char *tact_ctx_error(const tact_ctx *h) {
    ti_ctx_t *ctx = s_c(h);
    return ctx ? ti_ctx_error(ctx) : h ? "no context (closed already, or not a context)" : "no context (NULL)";
}

void tact_ctx_stats(const tact_ctx *h, tact_stats *out) {
    ti_ctx_t *ctx = s_c(h);
    if (!ctx || ti_ctx_enter(ctx) != 0) {
        if (out) *out = (tact_stats){0};
        return;
    }
    ti_ctx_stats(ctx, out);
    ti_ctx_leave(ctx);
}

ta_port_t *ta_ctx_port(tact_ctx *h) {
    ti_ctx_t *ctx = s_c(h);
    return ctx ? ti_ctx_port(ctx) : NULL;
}

int ta_ctx_timeout_ms(const tact_ctx *h) {
    ti_ctx_t *ctx = s_c(h);
    return ctx ? ti_ctx_timeout_ms(ctx) : 0;
}

int tact_scope_begin(tact_ctx *h) { S_VALUE(int, s_c(h), TACT_EINVAL, TACT_EBUSY, ti_scope_begin(c_)); }
int tact_scope_end(tact_ctx *h) { S_VALUE(int, s_c(h), TACT_EINVAL, TACT_EBUSY, ti_scope_end(c_)); }
int tact_wait(tact_ctx *h) { S_VALUE(int, s_c(h), TACT_EINVAL, TACT_EBUSY, ti_wait(c_)); }

/* A realize's tensors as objects (a stale one becomes the stale-handle
 * error tensor, which the realize reports); NULL on allocation failure. */
static ti_tensor_t **s_all(int n, tact_tensor *const *tensors) {
    ti_tensor_t **xs = ta_malloc(sizeof *xs * (size_t)(n > 0 ? n : 1));
    for (int i = 0; xs && i < n; i++) xs[i] = tensors[i] ? s_t(tensors[i]) : NULL;
    return xs;
}

static int s_realize(tact_ctx *h, int n, tact_tensor *const *tensors, int async) {
    ti_ctx_t *ctx = s_c(h);
    if (!ctx) return TACT_EINVAL;
    if (ti_ctx_enter(ctx) != 0) return TACT_EBUSY;
    int rc;
    if (n < 0 || (n > 0 && !tensors)) {
        rc = async ? ti_realize_async(ctx, n, NULL) : ti_realize(ctx, n, NULL);
    } else {
        ti_tensor_t **xs = s_all(n, tensors);
        if (!xs) ti_ctx_set_error(ctx, "realize: out of memory");
        rc = !xs ? TACT_ENOMEM : async ? ti_realize_async(ctx, n, xs) : ti_realize(ctx, n, xs);
        ta_free(xs);
    }
    ti_ctx_leave(ctx);
    return rc;
}

int tact_realize(tact_ctx *h, int n, tact_tensor *const *tensors) { return s_realize(h, n, tensors, 0); }
int tact_realize_async(tact_ctx *h, int n, tact_tensor *const *tensors) { return s_realize(h, n, tensors, 1); }

/* ----------------------------------------------------------- tensor queries */

/* A query: a NULL or stale handle gives `none` when it has no answer of
 * its own (shapes, counts), else the error tensor answers (status, text). */
#define S_QUERY(T, h, none, busy, expr)                                      \
    do {                                                                     \
        ti_tensor_t *t = s_t(h);                                             \
        if ((t == ti_null_arg() || t == ti_stale_arg()) && (none##_USE)) return none; \
        ti_ctx_t *c_ = ti_tensor_ctx(t);                                     \
        if (c_ && ti_ctx_enter(c_) != 0) return busy;                        \
        T r_ = (expr);                                                       \
        if (c_) ti_ctx_leave(c_);                                            \
        return r_;                                                           \
    } while (0)
#define S_ZERO 0
#define S_ZERO_USE 1
#define S_NODIM (-1)
#define S_NODIM_USE 1
#define S_F32 TACT_FLOAT32
#define S_F32_USE 1
#define S_ASK 0
#define S_ASK_USE 0

int tact_ndim(const tact_tensor *h) { S_QUERY(int, h, S_ZERO, 0, ti_ndim(t)); }
int64_t tact_dim(const tact_tensor *h, int k) { S_QUERY(int64_t, h, S_NODIM, -1, ti_dim(t, k)); }
int64_t tact_numel(const tact_tensor *h) { S_QUERY(int64_t, h, S_ZERO, 0, ti_numel(t)); }
tact_dtype tact_dtype_of(const tact_tensor *h) { S_QUERY(tact_dtype, h, S_F32, TACT_FLOAT32, ti_dtype_of(t)); }
const char *tact_device(const tact_tensor *h) { S_QUERY(const char *, h, S_ASK, "CPU", ti_device(t)); }
int tact_status_of(const tact_tensor *h) { S_QUERY(int, h, S_ASK, TACT_EBUSY, ti_status_of(t)); }
const char *tact_error_message(const tact_tensor *h) { S_QUERY(const char *, h, S_ASK, "the context is in use by another thread", ti_error_message(t)); }
int tact_read(tact_tensor *h, void *buf, size_t bytes) { S_QUERY(int, h, S_ASK, TACT_EBUSY, ti_read(t, buf, bytes)); }
int tact_item(tact_tensor *h, double *out) { S_QUERY(int, h, S_ASK, TACT_EBUSY, ti_item(t, out)); }

void tact_shape(const tact_tensor *h, int64_t *out) {
    ti_tensor_t *t = s_t(h);
    if (t == ti_null_arg() || t == ti_stale_arg()) return;
    ti_ctx_t *c = ti_tensor_ctx(t);
    if (c && ti_ctx_enter(c) != 0) return;
    ti_shape(t, out);
    if (c) ti_ctx_leave(c);
}

/* ----------------------------------------------------------------- creation */

tact_tensor *tact_from_data(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    S_CTX_TENSOR(h, ti_from_data(ctx, dtype, ndim, shape, data));
}
tact_tensor *tact_empty(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape) { S_CTX_TENSOR(h, ti_empty(ctx, dtype, ndim, shape)); }
tact_tensor *tact_full(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, double value) {
    S_CTX_TENSOR(h, ti_full(ctx, dtype, ndim, shape, value));
}
tact_tensor *tact_zeros(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape) { S_CTX_TENSOR(h, ti_zeros(ctx, dtype, ndim, shape)); }
tact_tensor *tact_ones(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape) { S_CTX_TENSOR(h, ti_ones(ctx, dtype, ndim, shape)); }
tact_tensor *tact_arange(tact_ctx *h, double start, double stop, double step, int dtype) {
    S_CTX_TENSOR(h, ti_arange(ctx, start, stop, step, dtype));
}
tact_tensor *tact_eye(tact_ctx *h, int64_t n, tact_dtype dtype) { S_CTX_TENSOR(h, ti_eye(ctx, n, dtype)); }
tact_tensor *tact_scalar(tact_ctx *h, double value) { S_CTX_TENSOR(h, ti_scalar(ctx, value)); }
tact_tensor *tact_scalar_int(tact_ctx *h, int64_t value) { S_CTX_TENSOR(h, ti_scalar_int(ctx, value)); }
tact_tensor *tact_scalar_bool(tact_ctx *h, int value) { S_CTX_TENSOR(h, ti_scalar_bool(ctx, value)); }

/* --------------------------------------------------------------------- ops */

#define S_OP1(name)                                            \
    tact_tensor *tact_##name(tact_tensor *hx) {                \
        ti_tensor_t *x = s_t(hx);                              \
        S_TENSOR(ti_tensor_ctx(x), ti_##name(x));              \
    }
#define S_OP2(name)                                                  \
    tact_tensor *tact_##name(tact_tensor *ha, tact_tensor *hb) {     \
        ti_tensor_t *a = s_t(ha), *b = s_t(hb);                      \
        S_TENSOR(s_ctx_of(a, b, NULL), ti_##name(a, b));             \
    }
S_OP1(keep)
S_OP1(exp2)
S_OP1(log2)
S_OP1(sin)
S_OP1(sqrt)
S_OP1(recip)
S_OP1(neg)
S_OP1(contiguous)
S_OP2(add)
S_OP2(sub)
S_OP2(mul)
S_OP2(div)
S_OP2(idiv)
S_OP2(mod)
S_OP2(maximum)
S_OP2(cmplt)
S_OP2(cmpne)
S_OP2(xor)
S_OP2(and)
S_OP2(or)
S_OP2(shl)
S_OP2(shr)
S_OP2(matmul)
S_OP2(assign)

tact_tensor *tact_cast(tact_tensor *hx, tact_dtype dtype) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_cast(x, dtype));
}
tact_tensor *tact_bitcast(tact_tensor *hx, tact_dtype dtype) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_bitcast(x, dtype));
}
tact_tensor *tact_where(tact_tensor *hc, tact_tensor *ha, tact_tensor *hb) {
    ti_tensor_t *c = s_t(hc), *a = s_t(ha), *b = s_t(hb);
    S_TENSOR(s_ctx_of(c, a, b), ti_where(c, a, b));
}
tact_tensor *tact_mulacc(tact_tensor *ha, tact_tensor *hb, tact_tensor *hc) {
    ti_tensor_t *a = s_t(ha), *b = s_t(hb), *c = s_t(hc);
    S_TENSOR(s_ctx_of(a, b, c), ti_mulacc(a, b, c));
}
tact_tensor *tact_sum(tact_tensor *hx, int naxes, const int *axes, int keepdim) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_sum(x, naxes, axes, keepdim));
}
tact_tensor *tact_max(tact_tensor *hx, int naxes, const int *axes, int keepdim) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_max(x, naxes, axes, keepdim));
}
tact_tensor *tact_reshape(tact_tensor *hx, int ndim, const int64_t *shape) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_reshape(x, ndim, shape));
}
tact_tensor *tact_permute(tact_tensor *hx, const int *order) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_permute(x, order));
}
tact_tensor *tact_expand(tact_tensor *hx, int ndim, const int64_t *shape) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_expand(x, ndim, shape));
}
tact_tensor *tact_pad(tact_tensor *hx, const int64_t (*pads)[2], double value) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_pad(x, pads, value));
}
tact_tensor *tact_shrink(tact_tensor *hx, const int64_t (*ranges)[2]) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_shrink(x, ranges));
}
tact_tensor *tact_flip(tact_tensor *hx, int naxes, const int *axes) {
    ti_tensor_t *x = s_t(hx);
    S_TENSOR(ti_tensor_ctx(x), ti_flip(x, naxes, axes));
}
