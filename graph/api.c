/* api.c - the public tensor API (include/tact.h): checks every handle and the one-thread rule, then calls client.c. */
#include <stdio.h>
#include <string.h>

#include "client_impl.h"
#include "device.h"
#include "dtype.h"
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

static tact_tensor *s_h(ti_tensor_t *t) { return (tact_tensor *)ti_tensor_handle(t); }

/* The object of a tensor handle, with the table's lock held: NULL and stale
 * handles become error tensors of no context. */
static ti_tensor_t *s_peek(const tact_tensor *h) {
    if (!h) return ti_null_arg();
    ti_tensor_t *t = ta_handle_peek((uintptr_t)h, TA_HANDLE_TENSOR);
    return t ? t : ti_stale_arg();
}

/*
 * Turns a call's n tensor handles into objects in xs and enters their
 * context (the first one's), all under the table's lock, so no other
 * thread can free any of them before the call is done: a tensor is freed
 * only by a thread inside its context.  A tensor of another context
 * becomes the foreign-context error tensor (it is not touched: its own
 * thread may free it any time).  Returns the context entered (NULL when
 * the tensors have none), or sets *busy when another thread is inside it.
 */
static ti_ctx_t *s_enter(int n, const tact_tensor *const *hs, ti_tensor_t **xs, int *busy) {
    ti_ctx_t *ctx = NULL;
    *busy = 0;
    ta_handle_lock();
    for (int i = 0; i < n; i++) {
        xs[i] = s_peek(hs[i]);
        ti_ctx_t *c = ti_tensor_ctx(xs[i]);
        if (!ctx) ctx = c;
        else if (c && c != ctx) xs[i] = ti_foreign_arg();
    }
    if (ctx && ti_ctx_enter(ctx) != 0) *busy = 1;
    ta_handle_unlock();
    return *busy ? NULL : ctx;
}

/* The object of a context handle, entered; NULL (with *stale or *busy
 * saying why) when there is none to use. */
static ti_ctx_t *s_enter_ctx(const tact_ctx *h, int *stale, int *busy) {
    *stale = *busy = 0;
    if (!h) return NULL;
    ta_handle_lock();
    ti_ctx_t *ctx = ta_handle_peek((uintptr_t)h, TA_HANDLE_CTX);
    if (!ctx) *stale = 1;
    else if (ti_ctx_enter(ctx) != 0) *busy = 1, ctx = NULL;
    ta_handle_unlock();
    return ctx;
}

/* A tensor-returning call on n of at most cap tensors: xs holds their
 * objects inside. */
#define S_TENSORS_N(cap, n, hs, expr)                                   \
    do {                                                                \
        ti_tensor_t *xs[cap];                                           \
        int busy_;                                                      \
        ti_ctx_t *c_ = s_enter(n, (const tact_tensor *const *)(hs), xs, &busy_); \
        if (busy_) return s_h(ti_busy_arg());                           \
        tact_tensor *h_ = s_h(expr);                                    \
        if (c_) ti_ctx_leave(c_);                                       \
        return h_;                                                      \
    } while (0)
#define S_TENSORS(n, hs, expr) S_TENSORS_N(3, n, hs, expr)

/* A tensor-returning call on a context `ctx`. */
#define S_CTX_TENSOR(hctx, expr)                                        \
    do {                                                                \
        int stale_, busy_;                                              \
        ti_ctx_t *ctx = s_enter_ctx(hctx, &stale_, &busy_);             \
        if (!ctx) return s_h(busy_ ? ti_busy_arg() : stale_ ? ti_stale_arg() : ti_null_arg()); \
        tact_tensor *h_ = s_h(expr);                                    \
        ti_ctx_leave(ctx);                                              \
        return h_;                                                      \
    } while (0)

/* A call returning int on a context `c_`. */
#define S_CTX_INT(hctx, expr)                                           \
    do {                                                                \
        int stale_, busy_;                                              \
        ti_ctx_t *c_ = s_enter_ctx(hctx, &stale_, &busy_);              \
        if (!c_) return busy_ ? TACT_EBUSY : TACT_EINVAL;               \
        int r_ = (expr);                                                \
        ti_ctx_leave(c_);                                               \
        return r_;                                                      \
    } while (0)

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
    int stale, busy;
    ti_ctx_t *ctx = s_enter_ctx(*pctx, &stale, &busy);
    if (busy) return TACT_EBUSY; /* *pctx stays: close it when the other thread is out */
    *pctx = NULL;
    if (!ctx) return TACT_EINVAL; /* closed already, or never a context */
    /* Held until it is gone: the handle goes first, so no thread finds the
     * context again, and one that found it before is refused (busy). */
    ta_handle_free(ti_ctx_handle(ctx));
    return ti_ctx_close(&ctx);
}

const char *tact_ctx_error(const tact_ctx *h) {
    int stale, busy;
    ti_ctx_t *ctx = s_enter_ctx(h, &stale, &busy);
    if (!ctx) return busy ? "the context is in use by another thread" : h ? "no context (closed already, or not a context)" : "no context (NULL)";
    const char *text = ti_ctx_error(ctx); /* stays valid until this thread's next call into the context */
    ti_ctx_leave(ctx);
    return text;
}

void tact_ctx_clear_error(tact_ctx *h) {
    int stale, busy;
    ti_ctx_t *ctx = s_enter_ctx(h, &stale, &busy);
    if (!ctx) return;
    ti_ctx_set_error(ctx, "");
    ti_ctx_leave(ctx);
}

int tact_ctx_device_stats(tact_ctx *h, const char *device, tact_device_stats *out) {
    if (out) memset(out, 0, sizeof *out);
    S_CTX_INT(h, ti_ctx_device_stats(c_, device, out));
}

void tact_ctx_stats(const tact_ctx *h, tact_stats *out) {
    int stale, busy;
    ti_ctx_t *ctx = s_enter_ctx(h, &stale, &busy);
    if (!ctx) {
        if (out) *out = (tact_stats){0};
        return;
    }
    ti_ctx_stats(ctx, out);
    ti_ctx_leave(ctx);
}

ta_port_t *ta_ctx_port(tact_ctx *h) {
    ti_ctx_t *ctx = ta_handle_get((uintptr_t)h, TA_HANDLE_CTX);
    return ctx ? ti_ctx_port(ctx) : NULL;
}

int ta_ctx_timeout_ms(const tact_ctx *h) {
    ti_ctx_t *ctx = ta_handle_get((uintptr_t)h, TA_HANDLE_CTX);
    return ctx ? ti_ctx_timeout_ms(ctx) : 0;
}

int tact_scope_begin(tact_ctx *h) { S_CTX_INT(h, ti_scope_begin(c_)); }
int tact_scope_end(tact_ctx *h) { S_CTX_INT(h, ti_scope_end(c_)); }
int tact_wait(tact_ctx *h) { S_CTX_INT(h, ti_wait(c_)); }

static int s_realize(tact_ctx *h, int n, tact_tensor *const *tensors, int async) {
    int stale, busy;
    if (n < 0 || (n > 0 && !tensors)) {
        ti_ctx_t *ctx = s_enter_ctx(h, &stale, &busy);
        if (!ctx) return busy ? TACT_EBUSY : TACT_EINVAL;
        int rc = async ? ti_realize_async(ctx, n, NULL) : ti_realize(ctx, n, NULL);
        ti_ctx_leave(ctx);
        return rc;
    }
    ti_tensor_t **xs = ta_malloc(sizeof *xs * (size_t)(n ? n : 1));
    if (!xs) {
        ta_ctx_set_error(h, "realize: out of memory");
        return TACT_ENOMEM;
    }
    /* The context, then its tensors, under the table's lock (s_enter). */
    ti_ctx_t *ctx = NULL;
    ta_handle_lock();
    if (h) ctx = ta_handle_peek((uintptr_t)h, TA_HANDLE_CTX);
    busy = ctx && ti_ctx_enter(ctx) != 0;
    for (int i = 0; ctx && !busy && i < n; i++) {
        xs[i] = tensors[i] ? s_peek(tensors[i]) : NULL;
        if (xs[i] && ti_tensor_ctx(xs[i]) && ti_tensor_ctx(xs[i]) != ctx) xs[i] = ti_foreign_arg();
    }
    ta_handle_unlock();
    int rc = !ctx ? TACT_EINVAL : busy ? TACT_EBUSY : async ? ti_realize_async(ctx, n, xs) : ti_realize(ctx, n, xs);
    if (ctx && !busy) ti_ctx_leave(ctx);
    ta_free(xs);
    return rc;
}

int tact_realize(tact_ctx *h, int n, tact_tensor *const *tensors) { return s_realize(h, n, tensors, 0); }
int tact_realize_async(tact_ctx *h, int n, tact_tensor *const *tensors) { return s_realize(h, n, tensors, 1); }

/* ----------------------------------------------------------- tensor queries */

/* A query: a NULL or stale handle gives `none` when it has no answer of
 * its own (shapes, counts), else the error tensor answers (status, text). */
#define S_QUERY(T, h, none, busy, expr)                                      \
    do {                                                                     \
        ti_tensor_t *xs[1];                                                  \
        int busy_;                                                           \
        const tact_tensor *hs_[1] = {(h)};                                   \
        ti_ctx_t *c_ = s_enter(1, hs_, xs, &busy_);                          \
        if (busy_) return busy;                                              \
        ti_tensor_t *t = xs[0];                                              \
        if ((t == ti_null_arg() || t == ti_stale_arg()) && (none##_USE)) {   \
            if (c_) ti_ctx_leave(c_);                                        \
            return none;                                                     \
        }                                                                    \
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
int tact_shard_axis(const tact_tensor *h) { S_QUERY(int, h, S_ASK, -1, ti_shard_axis(t)); }
int tact_status_of(const tact_tensor *h) { S_QUERY(int, h, S_ASK, TACT_EBUSY, ti_status_of(t)); }
const char *tact_error_message(const tact_tensor *h) { S_QUERY(const char *, h, S_ASK, "the context is in use by another thread", ti_error_message(t)); }
int tact_read(tact_tensor *h, void *buf, size_t bytes) { S_QUERY(int, h, S_ASK, TACT_EBUSY, ti_read(t, buf, bytes)); }
int tact_item(tact_tensor *h, double *out) { S_QUERY(int, h, S_ASK, TACT_EBUSY, ti_item(t, out)); }

void tact_shape(const tact_tensor *h, int64_t *out) {
    ti_tensor_t *xs[1];
    int busy;
    const tact_tensor *hs[1] = {h};
    ti_ctx_t *c = s_enter(1, hs, xs, &busy);
    if (busy) return;
    if (xs[0] != ti_null_arg() && xs[0] != ti_stale_arg()) ti_shape(xs[0], out);
    if (c) ti_ctx_leave(c);
}

/* ----------------------------------------------------------------- creation */

tact_tensor *tact_from_data(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    S_CTX_TENSOR(h, ti_from_data(ctx, dtype, ndim, shape, data));
}
tact_tensor *tact_from_host(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, const void *data, tact_dtype host_dtype) {
    S_CTX_TENSOR(h, ti_from_host(ctx, dtype, ndim, shape, data, host_dtype));
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
        tact_tensor *hs[1] = {hx};                             \
        S_TENSORS(1, hs, ti_##name(xs[0]));                    \
    }
#define S_OP2(name)                                                  \
    tact_tensor *tact_##name(tact_tensor *ha, tact_tensor *hb) {     \
        tact_tensor *hs[2] = {ha, hb};                               \
        S_TENSORS(2, hs, ti_##name(xs[0], xs[1]));                   \
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
S_OP2(minimum)
S_OP2(eq)
S_OP2(ne)
S_OP2(lt)
S_OP2(gt)
S_OP2(le)
S_OP2(ge)
S_OP2(pow)
S_OP2(binary_crossentropy)
S_OP2(binary_crossentropy_logits)
S_OP1(exp)
S_OP1(log)
S_OP1(relu)
S_OP1(sigmoid)
S_OP1(reciprocal)
S_OP1(rsqrt)
S_OP1(cos)
S_OP1(tan)
S_OP1(trunc)
S_OP1(ceil)
S_OP1(floor)
S_OP1(round)
S_OP1(square)
S_OP1(sign)
S_OP1(abs)
S_OP1(logical_not)
S_OP1(swish)
S_OP1(silu)
S_OP1(relu6)
S_OP1(hardswish)
S_OP1(tanh)
S_OP1(sinh)
S_OP1(cosh)
S_OP1(atanh)
S_OP1(asinh)
S_OP1(acosh)
S_OP1(gelu)
S_OP1(quick_gelu)
S_OP1(mish)
S_OP1(softsign)

/* One tensor and other arguments. */
#define S_ONE(hx, expr)              \
    do {                             \
        tact_tensor *hs[1] = {(hx)}; \
        S_TENSORS(1, hs, expr);      \
    } while (0)

tact_tensor *tact_cast(tact_tensor *hx, tact_dtype dtype) { S_ONE(hx, ti_cast(xs[0], dtype)); }
tact_tensor *tact_to(tact_tensor *hx, const char *device) { S_ONE(hx, ti_to(xs[0], device)); }
tact_tensor *tact_shard(tact_tensor *hx, const char *devices, int axis) { S_ONE(hx, ti_shard(xs[0], devices, axis)); }
tact_tensor *tact_min(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_min(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_any(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_any(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_all(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_all(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_prod(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_prod(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_mean(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_mean(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_var(tact_tensor *hx, int naxes, const int *axes, int keepdim, double correction) {
    S_ONE(hx, ti_var(xs[0], naxes, axes, keepdim, correction));
}
tact_tensor *tact_std(tact_tensor *hx, int naxes, const int *axes, int keepdim, double correction) {
    S_ONE(hx, ti_std(xs[0], naxes, axes, keepdim, correction));
}
tact_tensor *tact_softmax(tact_tensor *hx, int axis) { S_ONE(hx, ti_softmax(xs[0], axis)); }
tact_tensor *tact_log_softmax(tact_tensor *hx, int axis) { S_ONE(hx, ti_log_softmax(xs[0], axis)); }
tact_tensor *tact_logsumexp(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_logsumexp(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_squeeze(tact_tensor *hx, int naxes, const int *axes) { S_ONE(hx, ti_squeeze(xs[0], naxes, axes)); }
tact_tensor *tact_unsqueeze(tact_tensor *hx, int dim) { S_ONE(hx, ti_unsqueeze(xs[0], dim)); }
tact_tensor *tact_flatten(tact_tensor *hx, int start_dim, int end_dim) { S_ONE(hx, ti_flatten(xs[0], start_dim, end_dim)); }
tact_tensor *tact_unflatten(tact_tensor *hx, int dim, int n, const int64_t *sizes) { S_ONE(hx, ti_unflatten(xs[0], dim, n, sizes)); }
tact_tensor *tact_transpose(tact_tensor *hx, int dim0, int dim1) { S_ONE(hx, ti_transpose(xs[0], dim0, dim1)); }
tact_tensor *tact_T(tact_tensor *hx) { S_ONE(hx, ti_transpose(xs[0], 1, 0)); }
tact_tensor *tact_repeat(tact_tensor *hx, int n, const int64_t *repeats) { S_ONE(hx, ti_repeat(xs[0], n, repeats)); }
tact_tensor *tact_repeat_interleave(tact_tensor *hx, int64_t repeats, int dim) { S_ONE(hx, ti_repeat_interleave(xs[0], repeats, dim, 0)); }
tact_tensor *tact_repeat_interleave_flat(tact_tensor *hx, int64_t repeats) { S_ONE(hx, ti_repeat_interleave(xs[0], repeats, 0, 1)); }
tact_tensor *tact_pad2d(tact_tensor *hx, int n, const int64_t *padding, double value) { S_ONE(hx, ti_pad2d(xs[0], n, padding, value)); }
tact_tensor *tact_gather(tact_tensor *hx, int dim, tact_tensor *hindex) {
    tact_tensor *hs[2] = {hx, hindex};
    S_TENSORS(2, hs, ti_gather(xs[0], dim, xs[1]));
}

/* cat and stack take any number of tensors (at most 4096). */
static tact_tensor *s_many(int n, tact_tensor *const *hs, int dim, int stack) {
    if (n < 1 || n > 4096 || !hs) return s_h(ti_null_arg());
    ti_tensor_t **xs = ta_malloc(sizeof *xs * (size_t)n);
    if (!xs) return s_h(ti_null_arg());
    int busy;
    ti_ctx_t *c = s_enter(n, (const tact_tensor *const *)hs, xs, &busy);
    tact_tensor *h = busy ? s_h(ti_busy_arg()) : s_h(stack ? ti_stack(n, xs, dim) : ti_cat(n, xs, dim));
    if (c) ti_ctx_leave(c);
    ta_free(xs);
    return h;
}
tact_tensor *tact_cat(int n, tact_tensor *const *xs, int dim) { return s_many(n, xs, dim, 0); }
tact_tensor *tact_stack(int n, tact_tensor *const *xs, int dim) { return s_many(n, xs, dim, 1); }

/* split and chunk: pieces as handles in out. */
static int s_pieces(tact_tensor *hx, int n, const int64_t *sizes, int chunks, int dim, tact_tensor **out) {
    if (!out) return -1;
    ti_tensor_t *xs[1], *pieces[4096];
    const tact_tensor *hs[1] = {hx};
    int busy;
    ti_ctx_t *c = s_enter(1, hs, xs, &busy);
    if (busy) {
        out[0] = s_h(ti_busy_arg());
        return -1;
    }
    int r;
    if (sizes && n > 4096) r = -1, pieces[0] = ti_neg(NULL);
    else r = sizes ? ti_split(xs[0], n, sizes, dim, pieces) : ti_chunk(xs[0], chunks, dim, pieces);
    for (int i = 0; i < (r < 0 ? 1 : r); i++) out[i] = s_h(pieces[i]);
    if (c) ti_ctx_leave(c);
    return r;
}
int tact_split(tact_tensor *x, int n, const int64_t *sizes, int dim, tact_tensor **out) {
    if (!sizes) {
        if (out) out[0] = s_h(ti_null_arg());
        return -1;
    }
    return s_pieces(x, n, sizes, 0, dim, out);
}
int tact_chunk(tact_tensor *x, int chunks, int dim, tact_tensor **out) { return s_pieces(x, 0, NULL, chunks, dim, out); }
/* Calls with optional tensors (NULL: none): the handles that are there. */
/* A window's zero fields as their defaults (tact.h): into *w, which is
 * returned (NULL stays NULL: every default). */
static const tact_window *s_window(const tact_window *opt, tact_window *w) {
    if (!opt) return NULL;
    *w = *opt;
    if (!w->ndims) w->ndims = 2;
    for (int i = 0; i < 3; i++) {
        if (!w->kernel[i]) w->kernel[i] = 2;
        if (!w->dilation[i]) w->dilation[i] = 1;
    }
    if (!w->groups) w->groups = 1;
    return w;
}

static tact_tensor *s_conv(tact_tensor *hx, tact_tensor *hw, tact_tensor *hb, const tact_window *opt) {
    tact_tensor *hs[3] = {hx, hw, hb};
    tact_window w;
    S_TENSORS(hb ? 3 : 2, hs, ti_conv2d(xs[0], xs[1], hb ? xs[2] : NULL, s_window(opt, &w)));
}
tact_tensor *tact_conv2d(tact_tensor *x, tact_tensor *weight, tact_tensor *bias, const tact_window *opt) { return s_conv(x, weight, bias, opt); }
tact_tensor *tact_avg_pool2d(tact_tensor *hx, const tact_window *opt) {
    tact_window w;
    S_ONE(hx, ti_avg_pool2d(xs[0], s_window(opt, &w)));
}
tact_tensor *tact_max_pool2d(tact_tensor *hx, const tact_window *opt) {
    tact_window w;
    S_ONE(hx, ti_max_pool2d(xs[0], s_window(opt, &w)));
}
tact_tensor *tact_linear(tact_tensor *hx, tact_tensor *hw, tact_tensor *hb) {
    tact_tensor *hs[3] = {hx, hw, hb};
    S_TENSORS(hb ? 3 : 2, hs, ti_linear(xs[0], xs[1], hb ? xs[2] : NULL));
}
tact_tensor *tact_layernorm(tact_tensor *hx, int naxes, const int *axes, double eps) { S_ONE(hx, ti_layernorm(xs[0], naxes, axes, eps)); }
tact_tensor *tact_batchnorm(tact_tensor *hx, tact_tensor *hweight, tact_tensor *hbias, tact_tensor *hmean, tact_tensor *hinvstd, int axis) {
    /* The optional ones go last, so the ones present are the first n. */
    tact_tensor *hs[5] = {hx, hmean, hinvstd, hweight, hbias};
    int nw = hweight != NULL, n = 3 + nw + (hbias != NULL);
    if (!hweight) hs[3] = hbias;
    S_TENSORS_N(5, n, hs, ti_batchnorm(xs[0], hweight ? xs[3] : NULL, hbias ? xs[3 + nw] : NULL, xs[1], xs[2], axis));
}
tact_tensor *tact_one_hot(tact_tensor *hx, int64_t num_classes) { S_ONE(hx, ti_one_hot(xs[0], num_classes)); }
tact_tensor *tact_sparse_categorical_crossentropy(tact_tensor *hx, tact_tensor *hy, int64_t ignore_index, double label_smoothing) {
    tact_tensor *hs[2] = {hx, hy};
    S_TENSORS(2, hs, ti_sparse_categorical_crossentropy(xs[0], xs[1], ignore_index, label_smoothing));
}
int tact_manual_seed(tact_ctx *h, uint64_t seed) { S_CTX_INT(h, (ti_manual_seed(c_, seed), TACT_OK)); }
tact_tensor *tact_rand(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape) { S_CTX_TENSOR(h, ti_rand(ctx, dtype, ndim, shape)); }
tact_tensor *tact_randn(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape) { S_CTX_TENSOR(h, ti_randn(ctx, dtype, ndim, shape)); }
tact_tensor *tact_uniform(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, double low, double high) {
    S_CTX_TENSOR(h, ti_uniform(ctx, dtype, ndim, shape, low, high));
}
tact_tensor *tact_randint(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, int64_t low, int64_t high) {
    S_CTX_TENSOR(h, ti_randint(ctx, dtype, ndim, shape, low, high));
}
tact_tensor *tact_normal(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, double mean, double std) {
    S_CTX_TENSOR(h, ti_normal(ctx, dtype, ndim, shape, mean, std));
}
tact_tensor *tact_scaled_uniform(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape) {
    S_CTX_TENSOR(h, ti_scaled_uniform(ctx, dtype, ndim, shape));
}
tact_tensor *tact_glorot_uniform(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape) {
    S_CTX_TENSOR(h, ti_glorot_uniform(ctx, dtype, ndim, shape));
}
tact_tensor *tact_kaiming_uniform(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, double a) {
    S_CTX_TENSOR(h, ti_kaiming_uniform(ctx, dtype, ndim, shape, a));
}
tact_tensor *tact_kaiming_normal(tact_ctx *h, tact_dtype dtype, int ndim, const int64_t *shape, double a) {
    S_CTX_TENSOR(h, ti_kaiming_normal(ctx, dtype, ndim, shape, a));
}
tact_tensor *tact_dropout(tact_tensor *hx, double p, int training) { S_ONE(hx, ti_dropout(xs[0], p, training)); }
tact_tensor *tact_full_like(tact_tensor *hx, double value) { S_ONE(hx, ti_like(xs[0], 0, value)); }
tact_tensor *tact_zeros_like(tact_tensor *hx) { S_ONE(hx, ti_like(xs[0], 1, 0)); }
tact_tensor *tact_ones_like(tact_tensor *hx) { S_ONE(hx, ti_like(xs[0], 2, 0)); }
tact_tensor *tact_rand_like(tact_tensor *hx) { S_ONE(hx, ti_like(xs[0], 3, 0)); }
tact_tensor *tact_argmax(tact_tensor *hx, int axis, int keepdim) { S_ONE(hx, ti_argmax(xs[0], axis, 0, keepdim)); }
tact_tensor *tact_argmax_flat(tact_tensor *hx) { S_ONE(hx, ti_argmax(xs[0], 0, 1, 0)); }
tact_tensor *tact_argmin(tact_tensor *hx, int axis, int keepdim) { S_ONE(hx, ti_argmin(xs[0], axis, 0, keepdim)); }
tact_tensor *tact_argmin_flat(tact_tensor *hx) { S_ONE(hx, ti_argmin(xs[0], 0, 1, 0)); }
tact_tensor *tact_cumsum(tact_tensor *hx, int axis) { S_ONE(hx, ti_cumsum(xs[0], axis)); }
tact_tensor *tact_triu(tact_tensor *hx, int64_t diagonal) { S_ONE(hx, ti_triu(xs[0], diagonal)); }
tact_tensor *tact_tril(tact_tensor *hx, int64_t diagonal) { S_ONE(hx, ti_tril(xs[0], diagonal)); }
tact_tensor *tact_lshift(tact_tensor *hx, int64_t bits) { S_ONE(hx, ti_lshift(xs[0], bits)); }
tact_tensor *tact_rshift(tact_tensor *hx, int64_t bits) { S_ONE(hx, ti_rshift(xs[0], bits)); }
tact_tensor *tact_masked_fill(tact_tensor *hx, tact_tensor *hmask, tact_tensor *hvalue) {
    tact_tensor *hs[3] = {hx, hmask, hvalue};
    S_TENSORS(3, hs, ti_masked_fill(xs[0], xs[1], xs[2]));
}
tact_tensor *tact_scaled_dot_product_attention(tact_tensor *hq, tact_tensor *hk, tact_tensor *hv, tact_tensor *hmask, double dropout_p, int is_causal,
                                               int training) {
    tact_tensor *hs[4] = {hq, hk, hv, hmask};
    S_TENSORS_N(4, hmask ? 4 : 3, hs, ti_scaled_dot_product_attention(xs[0], xs[1], xs[2], hmask ? xs[3] : NULL, dropout_p, is_causal, training));
}
/* Indexing: x, the index tensors and the value are entered together. */
enum { TACT_INDEX_MAX = 16 };
static tact_tensor *s_index(tact_tensor *hx, int n, const tact_index *idx, tact_tensor *hvalue, int set) {
    if (n < 0 || n > 2 * TACT_INDEX_MAX || (n && !idx)) return s_h(ti_null_arg());
    const tact_tensor *hs[2 + 2 * TACT_INDEX_MAX];
    int slot[2 * TACT_INDEX_MAX], nh = 0;
    hs[nh++] = hx;
    if (set) hs[nh++] = hvalue;
    for (int i = 0; i < n; i++) slot[i] = idx[i].kind == TACT_IDX_TENSOR ? (hs[nh] = idx[i].tensor, nh++) : -1;
    ti_tensor_t *xs[2 + 2 * TACT_INDEX_MAX];
    ti_index_t ix[2 * TACT_INDEX_MAX];
    int busy;
    ti_ctx_t *c = s_enter(nh, hs, xs, &busy);
    if (busy) return s_h(ti_busy_arg());
    for (int i = 0; i < n; i++) {
        ix[i] = (ti_index_t){idx[i].kind, idx[i].start, idx[i].stop, idx[i].step, idx[i].has_start, idx[i].has_stop, idx[i].has_step, NULL};
        if (slot[i] >= 0) ix[i].tensor = xs[slot[i]];
    }
    tact_tensor *h = s_h(set ? ti_setitem(xs[0], n, ix, xs[1]) : ti_getitem(xs[0], n, ix));
    if (c) ti_ctx_leave(c);
    return h;
}
tact_tensor *tact_getitem(tact_tensor *x, int n, const tact_index *idx) { return s_index(x, n, idx, NULL, 0); }
tact_tensor *tact_setitem(tact_tensor *x, int n, const tact_index *idx, tact_tensor *value) { return s_index(x, n, idx, value, 1); }
tact_tensor *tact_conv_transpose2d(tact_tensor *hx, tact_tensor *hw, tact_tensor *hb, const tact_window *opt) {
    tact_tensor *hs[3] = {hx, hw, hb};
    tact_window w;
    S_TENSORS(hb ? 3 : 2, hs, ti_conv_transpose2d(xs[0], xs[1], hb ? xs[2] : NULL, s_window(opt, &w)));
}
tact_tensor *tact_interpolate(tact_tensor *hx, int n, const int64_t *size, int align_corners) { S_ONE(hx, ti_interpolate(xs[0], n, size, align_corners)); }
tact_tensor *tact_dot(tact_tensor *ha, tact_tensor *hb) { return tact_matmul(ha, hb); }
tact_tensor *tact_bitwise_and(tact_tensor *ha, tact_tensor *hb) { return tact_and(ha, hb); }
tact_tensor *tact_bitwise_or(tact_tensor *ha, tact_tensor *hb) { return tact_or(ha, hb); }
size_t tact_element_size(tact_dtype d) { return d >= 0 && d < TACT_DTYPE_COUNT ? ta_dtype_size(d) : 0; }
int64_t tact_nbytes(const tact_tensor *h) { return tact_numel(h) * (int64_t)tact_element_size(tact_dtype_of(h)); }
int tact_is_floating_point(const tact_tensor *h) { return tact_status_of(h) == TACT_OK && ta_dtype_is_float(tact_dtype_of(h)); }
tact_tensor *tact_multinomial(tact_tensor *hx, int64_t num_samples, int replacement) { S_ONE(hx, ti_multinomial(xs[0], num_samples, replacement)); }
tact_tensor *tact_einsum(const char *formula, int n, tact_tensor *const *hs) {
    if (n < 1 || n > 16 || !hs) return s_h(ti_null_arg());
    ti_tensor_t *xs[16];
    int busy;
    ti_ctx_t *c = s_enter(n, (const tact_tensor *const *)hs, xs, &busy);
    if (busy) return s_h(ti_busy_arg());
    tact_tensor *h = s_h(ti_einsum(formula, n, xs));
    if (c) ti_ctx_leave(c);
    return h;
}
tact_tensor *tact_load_idx(tact_ctx *h, const char *path) { S_CTX_TENSOR(h, ti_load_idx(ctx, path)); }
tact_tensor *tact_load_safetensors(tact_ctx *h, const char *path, const char *name) { S_CTX_TENSOR(h, ti_load_safetensors(ctx, path, name)); }
int tact_save_safetensors(tact_ctx *h, const char *path, int n, const char *const *names, tact_tensor *const *hs) {
    int stale, busy;
    ti_ctx_t *c = s_enter_ctx(h, &stale, &busy);
    if (!c) return busy ? TACT_EBUSY : TACT_EINVAL;
    ti_ctx_leave(c);
    if (n < 0 || n > 4096 || (n && (!names || !hs))) {
        ta_ctx_set_error(h, "save_safetensors: 0 to 4096 tensors, each with a name");
        return TACT_EINVAL;
    }
    ti_tensor_t **xs = ta_malloc(sizeof *xs * (size_t)(n ? n : 1));
    if (!xs) {
        ta_ctx_set_error(h, "save_safetensors: out of memory");
        return TACT_ENOMEM;
    }
    ti_ctx_t *tc = n ? s_enter(n, (const tact_tensor *const *)hs, xs, &busy) : NULL;
    int rc;
    if (busy) rc = TACT_EBUSY;
    else if (n && tc != c) rc = TACT_EINVAL; /* tensors of another context */
    else {
        if (!n && ti_ctx_enter(c) != 0) rc = TACT_EBUSY;
        else {
            rc = ti_save_safetensors(c, path, n, names, xs);
            if (!n) ti_ctx_leave(c);
        }
    }
    if (tc) ti_ctx_leave(tc);
    if (n && !busy && tc != c) ta_ctx_set_error(h, "save_safetensors: a tensor of another context (or a NULL or stale one)");
    ta_free(xs);
    return rc;
}
tact_tensor *tact_clip(tact_tensor *hx, double lo, double hi) { S_ONE(hx, ti_clip(xs[0], lo, hi)); }
tact_tensor *tact_elu(tact_tensor *hx, double alpha) { S_ONE(hx, ti_elu(xs[0], alpha)); }
tact_tensor *tact_celu(tact_tensor *hx, double alpha) { S_ONE(hx, ti_celu(xs[0], alpha)); }
tact_tensor *tact_hardtanh(tact_tensor *hx, double min_val, double max_val) { S_ONE(hx, ti_hardtanh(xs[0], min_val, max_val)); }
tact_tensor *tact_leakyrelu(tact_tensor *hx, double neg_slope) { S_ONE(hx, ti_leakyrelu(xs[0], neg_slope)); }
tact_tensor *tact_softplus(tact_tensor *hx, double beta) { S_ONE(hx, ti_softplus(xs[0], beta)); }
tact_tensor *tact_lerp(tact_tensor *hx, tact_tensor *hend, tact_tensor *hweight) {
    tact_tensor *hs[3] = {hx, hend, hweight};
    S_TENSORS(3, hs, ti_lerp(xs[0], xs[1], xs[2]));
}
tact_tensor *tact_bitcast(tact_tensor *hx, tact_dtype dtype) { S_ONE(hx, ti_bitcast(xs[0], dtype)); }
tact_tensor *tact_where(tact_tensor *hc, tact_tensor *ha, tact_tensor *hb) {
    tact_tensor *hs[3] = {hc, ha, hb};
    S_TENSORS(3, hs, ti_where(xs[0], xs[1], xs[2]));
}
tact_tensor *tact_mulacc(tact_tensor *ha, tact_tensor *hb, tact_tensor *hc) {
    tact_tensor *hs[3] = {ha, hb, hc};
    S_TENSORS(3, hs, ti_mulacc(xs[0], xs[1], xs[2]));
}
tact_tensor *tact_sum(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_sum(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_sum_all(tact_tensor *x) { return tact_sum(x, -1, NULL, 0); }
tact_tensor *tact_mean_all(tact_tensor *x) { return tact_mean(x, -1, NULL, 0); }
tact_tensor *tact_max_all(tact_tensor *x) { return tact_max(x, -1, NULL, 0); }
tact_tensor *tact_min_all(tact_tensor *x) { return tact_min(x, -1, NULL, 0); }
tact_tensor *tact_sum_axis(tact_tensor *x, int axis) { return tact_sum(x, 1, &axis, 0); }
tact_tensor *tact_mean_axis(tact_tensor *x, int axis) { return tact_mean(x, 1, &axis, 0); }
tact_tensor *tact_max_axis(tact_tensor *x, int axis) { return tact_max(x, 1, &axis, 0); }
tact_tensor *tact_cross_entropy(tact_tensor *x, tact_tensor *labels) { return tact_sparse_categorical_crossentropy(x, labels, -1, 0); }
tact_tensor *tact_max(tact_tensor *hx, int naxes, const int *axes, int keepdim) { S_ONE(hx, ti_max(xs[0], naxes, axes, keepdim)); }
tact_tensor *tact_reshape(tact_tensor *hx, int ndim, const int64_t *shape) { S_ONE(hx, ti_reshape(xs[0], ndim, shape)); }
tact_tensor *tact_permute(tact_tensor *hx, const int *order) { S_ONE(hx, ti_permute(xs[0], order)); }
tact_tensor *tact_expand(tact_tensor *hx, int ndim, const int64_t *shape) { S_ONE(hx, ti_expand(xs[0], ndim, shape)); }
tact_tensor *tact_pad(tact_tensor *hx, const int64_t (*pads)[2], double value) { S_ONE(hx, ti_pad(xs[0], pads, value)); }
tact_tensor *tact_shrink(tact_tensor *hx, const int64_t (*ranges)[2]) { S_ONE(hx, ti_shrink(xs[0], ranges)); }
tact_tensor *tact_flip(tact_tensor *hx, int naxes, const int *axes) { S_ONE(hx, ti_flip(xs[0], naxes, axes)); }

/* ----------------------------------------------------------------- autograd */

tact_tensor *tact_set_requires_grad(tact_tensor *t, int requires) { S_TENSORS(1, &t, ti_set_requires_grad(xs[0], requires)); }
int tact_requires_grad(tact_tensor *h) { S_QUERY(int, h, S_ZERO, 0, ti_requires_grad(t)); }
tact_tensor *tact_detach(tact_tensor *t) { S_TENSORS(1, &t, ti_detach(xs[0])); }
tact_tensor *tact_grad(tact_tensor *t) { S_TENSORS(1, &t, ti_grad(xs[0])); }
int tact_release(tact_tensor *h) {
    ti_tensor_t *xs[1];
    int busy;
    const tact_tensor *hs[1] = {h};
    ti_ctx_t *c = s_enter(1, hs, xs, &busy);
    if (busy) return TACT_EBUSY;
    if (c) {
        ti_release(xs[0]);
        ti_ctx_leave(c);
    }
    return TACT_OK;
}

void tact_grad_clear(tact_tensor *h) {
    ti_tensor_t *xs[1];
    int busy;
    const tact_tensor *hs[1] = {h};
    ti_ctx_t *c = s_enter(1, hs, xs, &busy);
    if (busy) return;
    ti_grad_clear(xs[0]);
    if (c) ti_ctx_leave(c);
}
int tact_set_no_grad(tact_ctx *h, int on) { S_CTX_INT(h, ti_set_no_grad(c_, on)); }

int tact_backward(tact_tensor *loss, tact_tensor *grad) {
    ti_tensor_t *xs[2];
    int busy;
    const tact_tensor *hs[2] = {loss, grad};
    ti_ctx_t *c = s_enter(grad ? 2 : 1, hs, xs, &busy);
    if (busy) return TACT_EBUSY;
    int rc = ti_backward(xs[0], grad ? xs[1] : NULL);
    if (c) ti_ctx_leave(c);
    return rc;
}

tact_ctx *tact_tensor_ctx(const tact_tensor *h) {
    ta_handle_lock();
    ti_tensor_t *t = ta_handle_peek((uintptr_t)h, TA_HANDLE_TENSOR);
    ti_ctx_t *c = t ? ti_tensor_ctx(t) : NULL;
    ta_handle_unlock();
    return c ? (tact_ctx *)ti_ctx_handle(c) : NULL;
}

void ta_ctx_set_error(tact_ctx *h, const char *text) {
    int stale, busy;
    ti_ctx_t *ctx = s_enter_ctx(h, &stale, &busy);
    if (!ctx) return;
    ti_ctx_set_error(ctx, text);
    ti_ctx_leave(ctx);
}

int ta_mark_ahead(tact_ctx *h, ta_mark_t *m) {
    int stale, busy;
    ti_ctx_t *ctx = s_enter_ctx(h, &stale, &busy);
    if (!ctx) return 0;
    int ahead = ti_mark_ahead(ctx, m);
    ti_ctx_leave(ctx);
    return ahead;
}
int ta_mark_end(tact_ctx *h, const ta_mark_t *m, int keep) { S_CTX_INT(h, ti_mark_end(c_, m, keep)); }
int ta_settle_backward(tact_ctx *h) { S_CTX_INT(h, ti_settle_backward(c_, 1)); }

tact_tensor *ta_grad_now(tact_tensor *h, uint64_t *id) {
    ti_tensor_t *xs[1];
    int busy;
    const tact_tensor *hs[1] = {h};
    ti_ctx_t *ctx = s_enter(1, hs, xs, &busy);
    ti_tensor_t *g = ctx ? ti_grad_now(xs[0]) : NULL;
    *id = g ? ti_id(g) : 0;
    if (ctx) ti_ctx_leave(ctx);
    return g ? s_h(g) : NULL;
}

tact_tensor *ta_place_like(tact_tensor *hv, tact_tensor *hlike) {
    tact_tensor *hs[2] = {hv, hlike};
    S_TENSORS(2, hs, ti_place_like(xs[0], xs[1]));
}

tact_tensor *ta_from_data_like(tact_tensor *hlike, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    S_TENSORS(1, &hlike, ti_from_data_like(xs[0], dtype, ndim, shape, data));
}

tact_tensor *ta_error_tensor(tact_ctx *h, int code, const char *text) {
    int stale, busy;
    ti_ctx_t *ctx = s_enter_ctx(h, &stale, &busy);
    if (!ctx) return s_h(busy ? ti_busy_arg() : stale ? ti_stale_arg() : ti_null_arg());
    tact_tensor *t = s_h(ti_error(ctx, code, text));
    ti_ctx_leave(ctx);
    return t;
}

/* ----------------------------------------------------------------- devices */

int tact_devices(tact_device_info *out, int max) {
    if (!out || max < 0) max = 0;
    ta_device_info_t info[64];
    int n = ta_device_list(info, max < 64 ? max : 64);
    for (int i = 0; i < n && i < max && i < 64; i++) {
        tact_device_info *o = &out[i];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", info[i].name);
        snprintf(o->model, sizeof o->model, "%s", info[i].model);
        snprintf(o->driver, sizeof o->driver, "%s", info[i].driver);
        o->compute_units = info[i].compute_units;
        o->memory = info[i].memory;
        o->max_buffer = info[i].max_buffer;
        o->max_group = info[i].max_group;
        o->fp16 = info[i].fp16;
    }
    return n;
}
