/* client.c - the public tensor API (include/tact.h): runs in the user's thread, streams ops to the graph builder. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc.h"
#include "client_impl.h"
#include "dtype.h"
#include "handle.h"
#include "mem.h"
#include "ops.h"
#include "pipeline.h"
#include "rerun.h"
#include "shape.h"
#include "tact.h"

/* ------------------------------------------------------------------ state */

struct ti_tensor {
    uintptr_t handle; /* what the user holds (handle.h) */
    ti_ctx_t *ctx;
    uint64_t id; /* 0 for error tensors and unmaterialized scalars */
    tact_dtype dtype;
    ta_shape_t shape;
    int status;
    char *message;
    int kept;
    int view; /* made by a movement op: not a buffer of its own, cannot be assigned to */
    /* Weakly typed scalars keep their value until they meet a tensor. */
    int weak;
    ta_scalar_kind_t kind;
    double fvalue;
    int64_t ivalue;
};

typedef struct {
    ti_tensor_t **items;
    size_t n, cap;
} s_scope_t;

enum { S_BATCH_OPS = 512 };

struct ti_ctx {
    uintptr_t handle;
    uintptr_t owner; /* the thread inside a call now (its token), 0: none */
    int depth;       /* nested entries of that thread */
    ta_rt_t *rt;
    ta_port_t *port;
    ta_pipeline_t wiring;
    ta_stage_local_t local; /* each stage's own settings (threads, debug, cache folder) */
    ta_actor_t *graph, *scheduler, *planner, *executor, *compilers[TA_MAX_COMPILERS];
    int timeout_ms;
    uint64_t next_id;
    s_scope_t *scopes;
    size_t nscopes, scopes_cap;
    msgpack_sbuffer batch; /* op records not yet sent */
    size_t nbatch;
    uint64_t *released;
    size_t nreleased, released_cap;
    struct s_inflight {
        uint64_t corr, realize;
    } *inflight; /* realizes started, not yet waited for */
    size_t ninflight, inflight_cap;
    uint64_t realizes;  /* realizes started so far: each is numbered */
    uint64_t settled;   /* the latest realize waited for */
    uint64_t *failed;   /* realizes that failed, not yet told to the graph */
    size_t nfailed, failed_cap;
    char error[512];
    tact_stats stats;
    /* The random numbers' key and counter (client_random.c): a new
     * context is as after tact_manual_seed(0) (the reference's default seed
     * is the time: runs must repeat). */
    uint64_t rng_seed;
    uint32_t rng_counter;
    int rng_seeded;
};

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

static _Thread_local char s_open_error[512];

const char *tact_last_open_error(void) { return s_open_error; }

void tact_options_default(tact_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->transport = "inproc";
}

/* --------------------------------------------------------- tensor objects */

/* Adds t to the innermost scope and gives it its handle; returns t, or
 * NULL on allocation failure (t is freed). */
static ti_tensor_t *s_own(ti_ctx_t *ctx, ti_tensor_t *t) {
    s_scope_t *sc = &ctx->scopes[ctx->nscopes - 1];
    if (ta_grow((void **)&sc->items, &sc->cap, sc->n + 1, sizeof *sc->items) != TACT_OK ||
        !(t->handle = ta_handle_new(t, TA_HANDLE_TENSOR))) {
        ta_free(t->message);
        ta_free(t);
        return NULL;
    }
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
__attribute__((format(printf, 3, 4))) static ti_tensor_t *s_error(ti_ctx_t *ctx, int code, const char *fmt, ...) {
    if (!ctx) return &s_null_arg;
    ti_tensor_t *t = ta_calloc(1, sizeof *t);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!t || !(t->message = ta_strdup(msg))) {
        ta_free(t);
        return &s_oom;
    }
    t->ctx = ctx;
    t->status = code;
    t = s_own(ctx, t);
    return t ? t : &s_oom;
}

ti_tensor_t *ti_error(ti_ctx_t *ctx, int code, const char *text) { return s_error(ctx, code, "%s", text); }

static ti_tensor_t *s_new(ti_ctx_t *ctx, tact_dtype dtype, const ta_shape_t *shape) {
    ti_tensor_t *t = ta_calloc(1, sizeof *t);
    if (!t) return s_error(ctx, TACT_ENOMEM, "out of memory for a tensor");
    t->ctx = ctx;
    t->id = ctx->next_id++;
    t->dtype = dtype;
    t->shape = *shape;
    t->message = NULL;
    ti_tensor_t *owned = s_own(ctx, t);
    return owned ? owned : s_error(ctx, TACT_ENOMEM, "out of memory for a tensor");
}

/* Frees a tensor of a scope: its handle is stale from now on. */
static void s_free_tensor(ti_tensor_t *t) {
    if (!t->ctx) return; /* a static error tensor */
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
static int s_wait(ti_ctx_t *ctx, int closing);

static int s_record(ti_ctx_t *ctx, const ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs,
                    int nargs, const int64_t *args) {
    ta_node_rec_t r;
    memset(&r, 0, sizeof r);
    r.id = out->id;
    r.op = (uint64_t)op;
    r.dtype = (uint64_t)out->dtype;
    r.n_shape = (uint32_t)out->shape.ndim;
    memcpy(r.shape, out->shape.d, sizeof *r.shape * r.n_shape);
    r.n_srcs = (uint32_t)nsrc;
    for (int i = 0; i < nsrc; i++) r.srcs[i] = srcs[i]->id;
    r.n_args = (uint32_t)nargs;
    if (nargs) memcpy(r.args, args, sizeof *r.args * (size_t)nargs);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &ctx->batch, msgpack_sbuffer_write);
    if (ta_rec_pack(TA_REC_NODE, &r, &pk) != 0) return TACT_ENOMEM;
    if (++ctx->nbatch >= S_BATCH_OPS) return s_flush(ctx, NULL);
    return TACT_OK;
}

static int s_flush(ti_ctx_t *ctx, ta_error_t *err) {
    int rc = TACT_OK;
    /* Releases first: the graph frees what they drop before new ops arrive. */
    if (ctx->nreleased) {
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_RELEASE);
        m.as.release.ids = ta_u64s(ctx->released, ctx->nreleased);
        rc = ta_port_send(ctx->port, ctx->wiring.graph, &m, err);
        ctx->nreleased = 0;
    }
    if (rc == TACT_OK && ctx->nbatch) {
        /* The array header goes in front of the records gathered so far. */
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (ta_recs_pack_header(&pk, ctx->nbatch) || msgpack_sbuffer_write(&sb, ctx->batch.data, ctx->batch.size)) {
            rc = ta_error_set(err, TACT_ENOMEM, "out of memory sending ops");
        } else {
            ta_msg_t m;
            ta_msg_init(&m, TA_MSG_OP_BATCH);
            m.as.op_batch.ops = ta_recs_raw(TA_REC_NODE, sb.data, sb.size, ctx->nbatch);
            rc = ta_port_send(ctx->port, ctx->wiring.graph, &m, err);
        }
        msgpack_sbuffer_destroy(&sb);
        msgpack_sbuffer_clear(&ctx->batch);
        ctx->nbatch = 0;
    }
    return rc;
}

/* Makes the node of out from op and sources; on failure turns out into an error. */
static ti_tensor_t *s_emit(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs,
                           const int64_t *args) {
    if (out->status) return out;
    if (s_record(out->ctx, out, op, nsrc, srcs, nargs, args) != TACT_OK) {
        out->status = TACT_ENOMEM;
        out->message = ta_strdup("out of memory recording an op");
    }
    return out;
}

/* -------------------------------------------------------------- contexts */

/* Stops the stages in the order work flows through them, so a stage never
 * sends its last message to one that stopped already (a send to a stopped
 * mailbox waits for room until the timeout). */
static void s_stop_all(ti_ctx_t *ctx, ta_error_t *first) {
    ta_error_t err;
    ta_actor_t **all[4 + TA_MAX_COMPILERS] = {&ctx->graph, &ctx->scheduler, &ctx->planner};
    size_t n = 3;
    for (int i = 0; i < TA_MAX_COMPILERS; i++) all[n++] = &ctx->compilers[i];
    all[n++] = &ctx->executor;
    for (size_t i = 0; i < n; i++)
        if (ta_actor_stop(all[i], &err) != TACT_OK && first && !first->code) *first = err;
}

/* Packs the run header of a recorded context (docs/log-format.md). */
static int s_run_header(const tact_options *o, const ta_pipeline_t *w, int timeout_ms, msgpack_sbuffer *sb) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
#define S_STR(k, v) (msgpack_pack_str_with_body(&pk, k, strlen(k)) || msgpack_pack_str_with_body(&pk, v, strlen(v)))
#define S_INT(k, v) (msgpack_pack_str_with_body(&pk, k, strlen(k)) || msgpack_pack_int64(&pk, v))
    int bad = msgpack_pack_map(&pk, 10) || S_STR("library", tact_version()) || S_STR("build", "gcc " __VERSION__) ||
              S_STR("transport", o->transport ? o->transport : "inproc") || S_STR("devices", o->devices ? o->devices : "CPU") ||
              S_INT("cpu_threads", o->cpu_threads) || S_INT("compile_workers", w->ncompilers) || S_INT("timeout_ms", timeout_ms) ||
              S_STR("cc", w->cc) || S_STR("flags", ta_cc_flags()) || S_INT("schedule_cache", w->schedule_cache);
#undef S_STR
#undef S_INT
    return bad ? -1 : 0;
}

int ti_ctx_open(ti_ctx_t **out, const tact_options *opts) {
    const char *sc = getenv("TACT_SCHEDULE_CACHE");
    return ti_ctx_open_as(out, opts, ta_cc_compiler(), !(sc && strcmp(sc, "0") == 0));
}

int ti_ctx_open_as(ti_ctx_t **out, const tact_options *opts, const char *cc, int schedule_cache) {
    s_open_error[0] = '\0';
    if (!out) {
        snprintf(s_open_error, sizeof s_open_error, "ti_ctx_open: out is NULL");
        return TACT_EINVAL;
    }
    *out = NULL;
    tact_options o;
    if (opts) o = *opts;
    else tact_options_default(&o);
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    if (o.transport && strcmp(o.transport, "tcp-insecure") == 0) {
        cfg.transport = TA_TRANSPORT_TCP;
        cfg.insecure_tcp = 1;
    } else if (o.transport && ta_transport_parse(o.transport, &cfg.transport) != 0) {
        snprintf(s_open_error, sizeof s_open_error, "unknown transport '%s' (inproc, ipc, tcp or tcp-insecure)", o.transport);
        return TACT_EINVAL;
    }
    cfg.log_path = o.log_path;
    if (o.devices && strcmp(o.devices, "CPU") != 0) {
        snprintf(s_open_error, sizeof s_open_error, "devices '%s': only CPU is available in this build", o.devices);
        return TACT_EDEVICE;
    }
    if (o.compile_workers < 0 || o.compile_workers > TA_MAX_COMPILERS || o.cpu_threads < 0 || o.timeout_ms < 0) {
        snprintf(s_open_error, sizeof s_open_error, "options out of range (compile_workers 0..%d, cpu_threads >= 0)",
                 TA_MAX_COMPILERS);
        return TACT_EINVAL;
    }
    /* The compiler and cache folder are kept with the context; names that
     * do not fit are refused, never cut. */
    const char *dir_env = getenv("TACT_CACHE_DIR");
    if (strlen(cc) > 500) {
        snprintf(s_open_error, sizeof s_open_error, "TACT_CC is %zu characters long; at most 500", strlen(cc));
        return TACT_EINVAL;
    }
    if (dir_env && strlen(dir_env) > 800) {
        snprintf(s_open_error, sizeof s_open_error, "TACT_CACHE_DIR is %zu characters long; at most 800", strlen(dir_env));
        return TACT_EINVAL;
    }
    ti_ctx_t *ctx = ta_calloc(1, sizeof *ctx);
    if (!ctx) {
        snprintf(s_open_error, sizeof s_open_error, "out of memory");
        return TACT_ENOMEM;
    }
    ctx->timeout_ms = o.timeout_ms ? o.timeout_ms : 60000;
    cfg.timeout_ms = ctx->timeout_ms; /* one timeout for every wait, the client's and the stages' */
    ctx->next_id = 1;
    msgpack_sbuffer_init(&ctx->batch);
    ta_error_t err = {0, ""};
    int rc = ta_grow((void **)&ctx->scopes, &ctx->scopes_cap, 1, sizeof *ctx->scopes);
    if (rc != TACT_OK) goto fail_nomem;
    memset(&ctx->scopes[0], 0, sizeof ctx->scopes[0]);
    ctx->nscopes = 1;
    ta_pipeline_t *w = &ctx->wiring;
    ta_stage_local_t *local = &ctx->local;
    const char *dbg = getenv("TACT_DEBUG");
    local->debug = dbg ? atoi(dbg) : 0;
    const char *limit = getenv("TACT_COMPILE_LIMIT_S");
    local->compile_limit_s = limit && atoi(limit) > 0 ? atoi(limit) : 300;
    local->cpu_threads = o.cpu_threads;
    ta_cc_cache_dir(local->cache_dir, sizeof local->cache_dir);
    if ((rc = ta_cc_check_dir(local->cache_dir, &err)) != TACT_OK) goto fail;
    w->schedule_cache = schedule_cache;
    w->ncompilers = o.compile_workers ? o.compile_workers : 2;
    snprintf(w->cc, sizeof w->cc, "%s", cc);
    /* The log's run header: what a replay needs to run the same pipeline. */
    msgpack_sbuffer header;
    msgpack_sbuffer_init(&header);
    if (o.log_path) {
        if (s_run_header(&o, w, ctx->timeout_ms, &header) != 0) goto fail_nomem;
        cfg.log_header.ptr = (const uint8_t *)header.data;
        cfg.log_header.len = header.size;
    }
    rc = ta_rt_new(&ctx->rt, &cfg, &err);
    msgpack_sbuffer_destroy(&header);
    if (rc != TACT_OK) goto fail;
    if ((rc = ta_port_new(ctx->rt, "client", &ctx->port, &err)) != TACT_OK) goto fail;
    w->client = ta_port_id(ctx->port);
    /* Start order fixes the port ids, so logs of two runs line up. */
    if ((rc = ta_actor_start(ctx->rt, &ta_graph_ops, local, NULL, &ctx->graph, &err)) != TACT_OK) goto fail;
    w->graph = ta_actor_id(ctx->graph);
    if ((rc = ta_actor_start(ctx->rt, &ta_scheduler_ops, local, NULL, &ctx->scheduler, &err)) != TACT_OK) goto fail;
    w->scheduler = ta_actor_id(ctx->scheduler);
    if ((rc = ta_actor_start(ctx->rt, &ta_planner_ops, local, NULL, &ctx->planner, &err)) != TACT_OK) goto fail;
    w->planner = ta_actor_id(ctx->planner);
    for (int i = 0; i < w->ncompilers; i++) {
        if ((rc = ta_actor_start(ctx->rt, &ta_compiler_ops, local, NULL, &ctx->compilers[i], &err)) != TACT_OK) goto fail;
        w->compiler[i] = ta_actor_id(ctx->compilers[i]);
    }
    if ((rc = ta_actor_start(ctx->rt, &ta_executor_ops, local, NULL, &ctx->executor, &err)) != TACT_OK) goto fail;
    w->executor = ta_actor_id(ctx->executor);
    /* Every stage learns the wiring from CONFIG (and its upstream from it)
     * before any work is sent: each is a request, answered in turn. */
    uint32_t stages[4 + TA_MAX_COMPILERS] = {w->graph, w->scheduler, w->planner};
    int nstages = 3;
    for (int i = 0; i < w->ncompilers; i++) stages[nstages++] = w->compiler[i];
    stages[nstages++] = w->executor;
    for (int i = 0; i < nstages; i++) {
        ta_msg_t cfg, reply;
        uint64_t compilers[TA_MAX_COMPILERS];
        ta_pipeline_to_msg(w, &cfg, compilers);
        ta_msg_init(&reply, TA_MSG_READY);
        rc = ta_port_request(ctx->port, stages[i], &cfg, &reply, ctx->timeout_ms, &err);
        ta_msg_release(&reply);
        if (rc != TACT_OK) goto fail;
    }
    if (!(ctx->handle = ta_handle_new(ctx, TA_HANDLE_CTX))) goto fail_nomem;
    *out = ctx;
    return TACT_OK;
fail_nomem:
    rc = ta_error_set(&err, TACT_ENOMEM, "out of memory");
fail:
    snprintf(s_open_error, sizeof s_open_error, "%s", err.text);
    s_stop_all(ctx, NULL);
    ta_port_destroy(&ctx->port);
    ta_rt_destroy(&ctx->rt, NULL);
    ta_free(ctx->scopes);
    msgpack_sbuffer_destroy(&ctx->batch);
    ta_free(ctx);
    return rc;
}

int ti_ctx_close(ti_ctx_t **pctx) {
    if (!pctx) return TACT_OK;
    ti_ctx_t *ctx = *pctx;
    if (!ctx) return TACT_OK;
    *pctx = NULL;
    ta_error_t first = {0, ""};
    /* Realizes in flight get timeout_ms to end, then stop with the stages. */
    int wrc = s_wait(ctx, 1);
    if (wrc != TACT_OK) ta_error_set(&first, wrc, "%s", ctx->error);
    for (size_t s = ctx->nscopes; s-- > 0;) {
        for (size_t i = 0; i < ctx->scopes[s].n; i++) s_free_tensor(ctx->scopes[s].items[i]);
        ta_free(ctx->scopes[s].items);
    }
    ta_free(ctx->scopes);
    s_stop_all(ctx, &first);
    ta_port_destroy(&ctx->port);
    ta_error_t err;
    int rc = ta_rt_destroy(&ctx->rt, &err);
    if (rc != TACT_OK && !first.code) first = err;
    msgpack_sbuffer_destroy(&ctx->batch);
    ta_free(ctx->released);
    ta_free(ctx->inflight);
    ta_free(ctx->failed);
    ta_handle_free(ctx->handle); /* every copy of it is stale now */
    ta_free(ctx);
    return first.code;
}

void ti_ctx_set_error(ti_ctx_t *ctx, const char *text) { snprintf(ctx->error, sizeof ctx->error, "%s", text); }

const char *ti_ctx_error(const ti_ctx_t *ctx) { return ctx ? ctx->error : "no context (NULL)"; }

ta_port_t *ti_ctx_port(ti_ctx_t *ctx) { return ctx->port; }
int ti_ctx_timeout_ms(const ti_ctx_t *ctx) { return ctx->timeout_ms; }
void ti_ctx_stats(const ti_ctx_t *ctx, tact_stats *out) {
    if (!out) return;
    if (!ctx) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = ctx->stats;
    /* In-process counters of the stages themselves (never in messages). */
    out->schedules = ta_actor_stat(ctx->scheduler, TA_STAT_JOBS);
    out->schedule_cache_hits = ta_actor_stat(ctx->scheduler, TA_STAT_CACHE_HITS);
    out->schedule_ns = ta_actor_stat(ctx->scheduler, TA_STAT_BUSY_NS);
    out->compiles = 0;
    for (int i = 0; i < TA_MAX_COMPILERS; i++)
        if (ctx->compilers[i]) out->compiles += ta_actor_stat(ctx->compilers[i], TA_STAT_JOBS);
}

/* ----------------------------------------------------------------- scopes */

int ti_scope_begin(ti_ctx_t *ctx) {
    if (!ctx) return TACT_EINVAL;
    if (ta_grow((void **)&ctx->scopes, &ctx->scopes_cap, ctx->nscopes + 1, sizeof *ctx->scopes) != TACT_OK)
        return TACT_ENOMEM;
    memset(&ctx->scopes[ctx->nscopes], 0, sizeof ctx->scopes[0]);
    ctx->nscopes++;
    return TACT_OK;
}

int ti_scope_end(ti_ctx_t *ctx) {
    if (!ctx) return TACT_EINVAL;
    if (ctx->nscopes <= 1) return TACT_EINVAL;
    s_scope_t *sc = &ctx->scopes[ctx->nscopes - 1], *parent = sc - 1;
    /* The ops that made these tensors go out before their release does
     * (the next flush sends releases ahead of newer ops). */
    int rc = s_flush(ctx, NULL);
    for (size_t i = 0; i < sc->n; i++) {
        ti_tensor_t *t = sc->items[i];
        if (t->kept) {
            t->kept = 0;
            if (ta_grow((void **)&parent->items, &parent->cap, parent->n + 1, sizeof *parent->items) == TACT_OK) {
                parent->items[parent->n++] = t;
                continue;
            }
            rc = TACT_ENOMEM; /* cannot keep it: release it rather than leak */
        }
        if (t->id && ta_grow((void **)&ctx->released, &ctx->released_cap, ctx->nreleased + 1, sizeof *ctx->released) == TACT_OK)
            ctx->released[ctx->nreleased++] = t->id;
        s_free_tensor(t);
    }
    ta_free(sc->items);
    ctx->nscopes--;
    /* Releases travel with the next flush. */
    return rc;
}

ti_tensor_t *ti_keep(ti_tensor_t *t) {
    if (!t) return &s_null_arg;
    if (t->ctx) t->kept = 1;
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
    if (!t) return "CPU";
    (void)t;
    return "CPU";
}
int ti_status_of(const ti_tensor_t *t) { return t ? t->status : TACT_EINVAL; }
const char *ti_error_message(const ti_tensor_t *t) { return !t ? s_null_arg.message : t->message ? t->message : ""; }
const char *tact_dtype_name(tact_dtype d) { return ta_dtype_name(d); }

/* --------------------------------------------------------------- creation */

/* A CONST node of shape () holding v. */
static ti_tensor_t *s_const(ti_ctx_t *ctx, tact_dtype d, ta_value_t v) {
    ta_shape_t scalar = {0, {0}};
    ti_tensor_t *t = s_new(ctx, d, &scalar);
    int64_t bits = (int64_t)ta_value_bits(d, v);
    return s_emit(t, TA_OP_CONST, 0, NULL, 1, &bits);
}

/* The tensor a weak scalar becomes as dtype d. */
static ti_tensor_t *s_materialize(ti_tensor_t *w, tact_dtype d) {
    ta_value_t v;
    if (w->kind == TA_SCALAR_FLOAT) {
        v = ta_value_from_double(d, w->fvalue);
    } else {
        ta_value_t iv;
        memset(&iv, 0, sizeof iv);
        iv.i = w->ivalue;
        v = ta_value_convert(d, TACT_INT64, iv);
    }
    return s_const(w->ctx, d, v);
}

/* A weak scalar on its own takes its kind's default dtype. */
static ti_tensor_t *s_solid(ti_tensor_t *t) {
    if (!t->weak || t->status) return t;
    return s_materialize(t, t->kind == TA_SCALAR_BOOL ? TACT_BOOL : t->kind == TA_SCALAR_INT ? TACT_INT32 : TACT_FLOAT32);
}

static ti_tensor_t *s_weak(ti_ctx_t *ctx, ta_scalar_kind_t kind, double f, int64_t i) {
    if (!ctx) return &s_null_arg;
    ti_tensor_t *t = ta_calloc(1, sizeof *t);
    if (!t) return s_error(ctx, TACT_ENOMEM, "out of memory for a scalar");
    t->ctx = ctx;
    t->weak = 1;
    t->kind = kind;
    t->fvalue = f;
    t->ivalue = i;
    t->dtype = kind == TA_SCALAR_BOOL ? TACT_BOOL : kind == TA_SCALAR_INT ? TACT_INT32 : TACT_FLOAT32;
    ti_tensor_t *owned = s_own(ctx, t);
    return owned ? owned : s_error(ctx, TACT_ENOMEM, "out of memory for a scalar");
}

int ti_weak_value(const ti_tensor_t *t, double *v) {
    if (!t || t->status || !t->weak) return 0;
    *v = t->kind == TA_SCALAR_FLOAT ? t->fvalue : (double)t->ivalue;
    return 1;
}

ti_tensor_t *ti_scalar(ti_ctx_t *ctx, double v) { return s_weak(ctx, TA_SCALAR_FLOAT, v, 0); }
ti_tensor_t *ti_scalar_int(ti_ctx_t *ctx, int64_t v) { return s_weak(ctx, TA_SCALAR_INT, 0, v); }
ti_tensor_t *ti_scalar_bool(ti_ctx_t *ctx, int v) { return s_weak(ctx, TA_SCALAR_BOOL, 0, v != 0); }

/* Checks dtype and shape of a creation call. */
static ti_tensor_t *s_check_new(ti_ctx_t *ctx, const char *op, int dtype, int ndim, const int64_t *shape, ta_shape_t *s) {
    ta_error_t err;
    if (!ta_dtype_valid(dtype)) return s_error(ctx, TACT_EDTYPE, "%s: dtype %d is not a tact_dtype", op, dtype);
    if (ndim > 0 && !shape) return s_error(ctx, TACT_EINVAL, "%s: shape is NULL", op);
    if (ta_shape_make(s, ndim, shape, op, &err) != TACT_OK) return s_error(ctx, err.code, "%s", err.text);
    return NULL;
}

ti_tensor_t *ti_empty(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx) return &s_null_arg;
    ta_shape_t s;
    ti_tensor_t *bad = s_check_new(ctx, "empty", dtype, ndim, shape, &s);
    if (bad) return bad;
    /* "Unspecified" contents are zeros: runs stay deterministic. */
    size_t bytes = (size_t)ta_shape_numel(&s) * ta_dtype_size(dtype);
    void *zeros = ta_calloc(bytes ? bytes : 1, 1);
    if (!zeros) return s_error(ctx, TACT_ENOMEM, "empty: out of memory for %zu bytes", bytes);
    ti_tensor_t *t = ti_from_data(ctx, dtype, ndim, shape, zeros);
    ta_free(zeros);
    return t;
}

ti_tensor_t *ti_from_data(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (!ctx) return &s_null_arg;
    ta_shape_t s;
    ti_tensor_t *bad = s_check_new(ctx, "from_data", dtype, ndim, shape, &s);
    if (bad) return bad;
    size_t bytes = (size_t)ta_shape_numel(&s) * ta_dtype_size(dtype);
    if (!data && bytes) return s_error(ctx, TACT_EINVAL, "from_data: data is NULL");
    /* EMPTY with argument 1: its bytes follow in a WRITE, which the graph
     * builder passes to the executor. */
    int64_t data_follows = 1;
    ti_tensor_t *t = s_emit(s_new(ctx, dtype, &s), TA_OP_EMPTY, 0, NULL, 1, &data_follows);
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
    }
    ta_free(norm);
    if (rc != TACT_OK) {
        t->status = rc;
        t->message = ta_strdup(err.text);
    }
    return t;
}

ti_tensor_t *ti_full(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double value) {
    if (!ctx) return &s_null_arg;
    ta_shape_t s;
    ti_tensor_t *bad = s_check_new(ctx, "full", dtype, ndim, shape, &s);
    if (bad) return bad;
    ti_tensor_t *c = s_const(ctx, dtype, ta_value_from_double(dtype, value));
    int64_t ones[TA_MAX_DIMS];
    for (int k = 0; k < ndim; k++) ones[k] = 1;
    return ti_expand(ti_reshape(c, ndim, ones), ndim, shape);
}

ti_tensor_t *ti_zeros(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx) return &s_null_arg;
    return ti_full(ctx, dtype, ndim, shape, 0);
}
ti_tensor_t *ti_ones(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx) return &s_null_arg;
    return ti_full(ctx, dtype, ndim, shape, 1);
}

ti_tensor_t *ti_arange(ti_ctx_t *ctx, double start, double stop, double step, int dtype) {
    if (!ctx) return &s_null_arg;
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
        return s_error(ctx, TACT_EINVAL, "arange(%g, %g, %g): step must be non-zero and all finite", start, stop, step);
    if (dtype < 0) {
        int fractional = start != floor(start) || stop != floor(stop) || step != floor(step);
        dtype = fractional ? TACT_FLOAT32 : TACT_INT32;
    }
    if (!ta_dtype_valid(dtype)) return s_error(ctx, TACT_EDTYPE, "arange: dtype %d is not a tact_dtype", dtype);
    double count = ceil((stop - start) / step);
    if (count > (double)(1ll << 40)) return s_error(ctx, TACT_ESHAPE, "arange(%g, %g, %g): %g elements is too many", start, stop, step, count);
    int64_t n = count > 0 ? (int64_t)count : 0;
    size_t es = ta_dtype_size((tact_dtype)dtype);
    uint8_t *buf = ta_malloc(n ? (size_t)n * es : 1);
    if (!buf) return s_error(ctx, TACT_ENOMEM, "arange: out of memory for %" PRId64 " elements", n);
    for (int64_t i = 0; i < n; i++) ta_value_store((tact_dtype)dtype, buf + i * es, ta_value_from_double((tact_dtype)dtype, start + (double)i * step));
    ti_tensor_t *t = ti_from_data(ctx, (tact_dtype)dtype, 1, &n, buf);
    ta_free(buf);
    return t;
}

ti_tensor_t *ti_eye(ti_ctx_t *ctx, int64_t n, tact_dtype dtype) {
    if (!ctx) return &s_null_arg;
    if (n < 0 || n > (1 << 28)) return s_error(ctx, TACT_ESHAPE, "eye: n is %" PRId64 " (0 to 2^28)", n);
    if (!ta_dtype_valid(dtype)) return s_error(ctx, TACT_EDTYPE, "eye: dtype %d is not a tact_dtype", dtype);
    size_t es = ta_dtype_size(dtype);
    uint8_t *buf = ta_calloc(n ? (size_t)(n * n) : 1, es);
    if (!buf) return s_error(ctx, TACT_ENOMEM, "eye: out of memory");
    for (int64_t i = 0; i < n; i++) ta_value_store(dtype, buf + (i * n + i) * es, ta_value_from_double(dtype, 1));
    int64_t shape[2] = {n, n};
    ti_tensor_t *t = ti_from_data(ctx, dtype, 2, shape, buf);
    ta_free(buf);
    return t;
}

/* ------------------------------------------------------------- op helpers */

/* Returns the first error among xs (a NULL tensor, an error tensor, or
 * tensors of two contexts, as an error tensor), or NULL. */
static ti_tensor_t *s_any_error(int n, ti_tensor_t *const *xs) {
    for (int i = 0; i < n; i++) {
        if (!xs[i]) return &s_null_arg;
        if (xs[i]->status) return xs[i];
    }
    for (int i = 1; i < n; i++)
        if (xs[i]->ctx != xs[0]->ctx) return s_error(xs[0]->ctx, TACT_EINVAL, "tensors of two contexts in one op");
    return NULL;
}

static ti_tensor_t *s_unary(ti_tensor_t *x, ta_op_t op, tact_dtype out_dtype) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    const ti_tensor_t *src[1] = {x};
    return s_emit(s_new(x->ctx, out_dtype, &x->shape), op, 1, src, 0, NULL);
}

ti_tensor_t *ti_cast(ti_tensor_t *x, tact_dtype dtype) {
    if (!x) return &s_null_arg;
    if (x->status) return x;
    if (!ta_dtype_valid(dtype)) return s_error(x->ctx, TACT_EDTYPE, "cast: dtype %d is not a tact_dtype", dtype);
    x = s_solid(x);
    if (x->dtype == dtype) return x;
    return s_unary(x, TA_OP_CAST, dtype);
}

ti_tensor_t *ti_bitcast(ti_tensor_t *x, tact_dtype dtype) {
    if (!x) return &s_null_arg;
    if (x->status) return x;
    x = s_solid(x);
    if (!ta_dtype_valid(dtype) || ta_dtype_size(dtype) != ta_dtype_size(x->dtype))
        return s_error(x->ctx, TACT_EDTYPE, "bitcast: %s to %s needs dtypes of the same size", ta_dtype_name(x->dtype),
                       ta_dtype_valid(dtype) ? ta_dtype_name(dtype) : "an invalid dtype");
    if (x->dtype == dtype) return x;
    return s_unary(x, TA_OP_BITCAST, dtype);
}

/* Float-only unary ops cast ints (and bools) to float32 first. */
static ti_tensor_t *s_float_unary(ti_tensor_t *x, ta_op_t op) {
    if (!x) return &s_null_arg;
    if (x->status) return x;
    x = ti_cast(s_solid(x), ta_dtype_upper_float(s_solid(x)->dtype));
    return s_unary(x, op, x->dtype);
}

ti_tensor_t *ti_exp2(ti_tensor_t *x) { return s_float_unary(x, TA_OP_EXP2); }
ti_tensor_t *ti_log2(ti_tensor_t *x) { return s_float_unary(x, TA_OP_LOG2); }
ti_tensor_t *ti_sin(ti_tensor_t *x) { return s_float_unary(x, TA_OP_SIN); }
ti_tensor_t *ti_sqrt(ti_tensor_t *x) { return s_float_unary(x, TA_OP_SQRT); }
ti_tensor_t *ti_recip(ti_tensor_t *x) { return s_float_unary(x, TA_OP_RECIP); }
ti_tensor_t *ti_neg(ti_tensor_t *x) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    return x->status ? x : s_unary(x, TA_OP_NEG, x->dtype);
}

/* Broadcasts x to shape (prepending 1s, then expanding). */
static ti_tensor_t *s_broadcast_to(ti_tensor_t *x, const ta_shape_t *shape) {
    if (ta_shape_equal(&x->shape, shape)) return x;
    int64_t dims[TA_MAX_DIMS];
    int pad = shape->ndim - x->shape.ndim;
    for (int k = 0; k < shape->ndim; k++) dims[k] = k < pad ? 1 : x->shape.d[k - pad];
    if (pad) x = ti_reshape(x, shape->ndim, dims);
    return ti_expand(x, shape->ndim, shape->d);
}

/* The reference's _broadcasted: weak scalars take the other side's dtype
 * when they can, then both sides promote and broadcast. */
static int s_match(ti_tensor_t **pa, ti_tensor_t **pb, const char *op) {
    ti_tensor_t *a = *pa, *b = *pb;
    if (a->weak && b->weak) a = s_solid(a);
    if (b->weak) b = s_materialize(b, ta_dtype_of_scalar(a->dtype, b->kind));
    if (a->weak) a = s_materialize(a, ta_dtype_of_scalar(b->dtype, a->kind));
    if (a->status || b->status) {
        *pa = a->status ? a : b;
        return -1;
    }
    if (a->dtype != b->dtype) {
        tact_dtype d = ta_dtype_promote(a->dtype, b->dtype);
        a = ti_cast(a, d);
        b = ti_cast(b, d);
    }
    ta_shape_t out;
    ta_error_t err;
    if (ta_shape_broadcast(&a->shape, &b->shape, op, &out, &err) != TACT_OK) {
        *pa = s_error(a->ctx, err.code, "%s", err.text);
        return -1;
    }
    *pa = s_broadcast_to(a, &out);
    *pb = s_broadcast_to(b, &out);
    return (*pa)->status || (*pb)->status ? ((*pa = (*pa)->status ? *pa : *pb), -1) : 0;
}

static ti_tensor_t *s_binary(ti_tensor_t *a, ti_tensor_t *b, ta_op_t op, const char *name) {
    ti_tensor_t *e = s_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    if (s_match(&a, &b, name) != 0) return a;
    int bitwise = op == TA_OP_XOR || op == TA_OP_AND || op == TA_OP_OR || op == TA_OP_SHL || op == TA_OP_SHR;
    if (bitwise && ta_dtype_is_float(a->dtype))
        return s_error(a->ctx, TACT_EDTYPE, "%s: needs ints or bools, got %s", name, ta_dtype_name(a->dtype));
    if ((op == TA_OP_SHL || op == TA_OP_SHR) && ta_dtype_is_bool(a->dtype))
        return s_error(a->ctx, TACT_EDTYPE, "%s: needs ints, got bool", name);
    tact_dtype out = op == TA_OP_CMPLT || op == TA_OP_CMPNE ? TACT_BOOL : a->dtype;
    const ti_tensor_t *src[2] = {a, b};
    return s_emit(s_new(a->ctx, out, &a->shape), op, 2, src, 0, NULL);
}

ti_tensor_t *ti_add(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_ADD, "add"); }
ti_tensor_t *ti_mul(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_MUL, "mul"); }
ti_tensor_t *ti_idiv(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_IDIV, "idiv"); }
ti_tensor_t *ti_mod(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_MOD, "mod"); }
ti_tensor_t *ti_maximum(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_MAX, "maximum"); }
ti_tensor_t *ti_cmplt(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_CMPLT, "cmplt"); }
ti_tensor_t *ti_cmpne(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_CMPNE, "cmpne"); }
ti_tensor_t *ti_xor(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_XOR, "xor"); }
ti_tensor_t *ti_and(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_AND, "and"); }
ti_tensor_t *ti_or(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_OR, "or"); }
ti_tensor_t *ti_shl(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_SHL, "shl"); }
ti_tensor_t *ti_shr(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_SHR, "shr"); }
ti_tensor_t *ti_sub(ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = s_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    if (s_match(&a, &b, "sub") != 0) return a;
    return ti_add(a, ti_neg(b));
}

ti_tensor_t *ti_div(ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = s_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    if (s_match(&a, &b, "div") != 0) return a;
    /* True division upcasts ints, then multiplies by the reciprocal, as the reference does. */
    tact_dtype f = ta_dtype_upper_float(a->dtype);
    a = ti_cast(a, f);
    b = ti_cast(b, f);
    return ti_mul(a, ti_recip(b));
}

ti_tensor_t *ti_where(ti_tensor_t *cond, ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = s_any_error(3, (ti_tensor_t *[]){cond, a, b});
    if (e) return e;
    cond = s_solid(cond);
    /* Two scalar branches take their dtype from the condition's, as the
     * reference's (an int8 condition with 3 and 4 gives int8). */
    if (a->weak && b->weak) {
        a = s_materialize(a, ta_dtype_of_scalar(cond->dtype, a->kind));
        b = s_materialize(b, ta_dtype_of_scalar(cond->dtype, b->kind));
    }
    cond = ti_cast(cond, TACT_BOOL);
    if (s_match(&a, &b, "where") != 0) return a;
    ta_shape_t out;
    ta_error_t err;
    if (ta_shape_broadcast(&cond->shape, &a->shape, "where", &out, &err) != TACT_OK)
        return s_error(a->ctx, err.code, "%s", err.text);
    cond = s_broadcast_to(cond, &out);
    a = s_broadcast_to(a, &out);
    b = s_broadcast_to(b, &out);
    if ((e = s_any_error(3, (ti_tensor_t *[]){cond, a, b}))) return e;
    const ti_tensor_t *src[3] = {cond, a, b};
    return s_emit(s_new(a->ctx, a->dtype, &out), TA_OP_WHERE, 3, src, 0, NULL);
}

ti_tensor_t *ti_mulacc(ti_tensor_t *a, ti_tensor_t *b, ti_tensor_t *c) {
    ti_tensor_t *e = s_any_error(3, (ti_tensor_t *[]){a, b, c});
    if (e) return e;
    if (s_match(&a, &b, "mulacc") != 0) return a;
    if (s_match(&a, &c, "mulacc") != 0) return a;
    b = s_broadcast_to(b, &a->shape);
    if ((e = s_any_error(3, (ti_tensor_t *[]){a, b, c}))) return e;
    b = ti_cast(b, a->dtype);
    const ti_tensor_t *src[3] = {a, b, c};
    return s_emit(s_new(a->ctx, a->dtype, &a->shape), TA_OP_MULACC, 3, src, 0, NULL);
}

/* -------------------------------------------------------------- reductions */

/* Reductions of more than 65536 elements are split in two (or more)
 * kernels: a reduce of R elements becomes x partials of R / x elements
 * (x <= 256, the largest that divides the first reduced axis it can), each
 * over a contiguous run, then a reduce of the partials.  The partials
 * spread over every core, and a float sum adds short runs (2^25 ones sum
 * to 2^25, not 2^24).  The split depends on the
 * reduced lengths alone, never on the batch dims or the thread count
 * (DESIGN.md §2), so a row's bits do not depend on its batch. */
enum { S_SPLIT_ABOVE = 1 << 16, S_SPLIT_MAX = 256, S_SPLIT_LEAST = 8 };

static ti_tensor_t *s_reduce_kept(ti_tensor_t *x, ta_op_t op, uint32_t mask, const ta_shape_t *kept) {
    const ta_shape_t *sh = &x->shape;
    int64_t reduced = 1;
    for (int k = 0; k < sh->ndim; k++)
        if (mask >> k & 1) reduced *= sh->d[k];
    int axis = -1;
    int64_t parts = 0;
    for (int k = 0; k < sh->ndim && axis < 0 && reduced > S_SPLIT_ABOVE && sh->ndim < TA_MAX_DIMS; k++)
        for (int64_t p = S_SPLIT_MAX; (mask >> k & 1) && p >= S_SPLIT_LEAST && axis < 0; p--)
            if (sh->d[k] % p == 0) axis = k, parts = p;
    if (axis < 0) {
        int64_t arg = mask;
        const ti_tensor_t *src[1] = {x};
        return s_emit(s_new(x->ctx, x->dtype, kept), op, 1, src, 1, &arg);
    }
    /* (.., n, ..) -> (.., parts, n / parts, ..) -> (.., n / parts, .., parts):
     * partial q covers elements q * n / parts .. (q + 1) * n / parts - 1. */
    int64_t split[TA_MAX_DIMS];
    int order[TA_MAX_DIMS], n = 0;
    for (int k = 0; k < sh->ndim; k++) {
        if (k == axis) split[n++] = parts;
        split[n++] = k == axis ? sh->d[k] / parts : sh->d[k];
    }
    for (int k = 0, j = 0; k < n; k++)
        if (k != axis) order[j++] = k;
    order[n - 1] = axis;
    ti_tensor_t *moved = ti_permute(ti_reshape(x, n, split), order);
    if (moved->status) return moved;
    /* The partials: the same reduced axes (the partial axis is last), which
     * may be split again (each level divides the length by 8 at least). */
    ta_shape_t partial_kept = moved->shape;
    for (int k = 0; k < sh->ndim; k++)
        if (mask >> k & 1) partial_kept.d[k] = 1;
    ti_tensor_t *partials = s_reduce_kept(moved, op, mask, &partial_kept);
    ta_shape_t done = partial_kept;
    done.d[n - 1] = 1;
    ti_tensor_t *total = s_reduce_kept(partials, op, 1u << (n - 1), &done);
    return ti_reshape(total, kept->ndim, kept->d);
}

static ti_tensor_t *s_reduce(ti_tensor_t *x, ta_op_t op, int naxes, const int *axes, int keepdim, const char *name) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    uint32_t mask;
    ta_shape_t kept;
    ta_error_t err;
    if (naxes > 0 && !axes) return s_error(x->ctx, TACT_EINVAL, "%s: axes is NULL", name);
    if (ta_shape_reduce(&x->shape, naxes, axes, name, &mask, &kept, &err) != TACT_OK)
        return s_error(x->ctx, err.code, "%s", err.text);
    ti_tensor_t *r = mask ? s_reduce_kept(x, op, mask, &kept) : x;
    if (keepdim || r->status) return r;
    int64_t dims[TA_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < x->shape.ndim; k++)
        if (!(mask >> k & 1)) dims[n++] = x->shape.d[k];
    return ti_reshape(r, n, dims);
}

ti_tensor_t *ti_sum(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    tact_dtype d = x->dtype, acc = ta_dtype_sum_acc(d);
    ti_tensor_t *r = s_reduce(ti_cast(x, acc), TA_OP_SUM, naxes, axes, keepdim, "sum");
    return d == TACT_FLOAT16 || d == TACT_BFLOAT16 ? ti_cast(r, d) : r;
}

ti_tensor_t *ti_max(ti_tensor_t *x, int naxes, const int *axes, int keepdim) {
    if (!x) return &s_null_arg;
    return s_reduce(x, TA_OP_RMAX, naxes, axes, keepdim, "max");
}

ti_tensor_t *ti_matmul(ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = s_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    a = s_solid(a);
    b = s_solid(b);
    int n1 = a->shape.ndim, n2 = b->shape.ndim, tail = n2 < 2 ? n2 : 2;
    char sa[128], sb[128];
    ta_shape_format(&a->shape, sa, sizeof sa);
    ta_shape_format(&b->shape, sb, sizeof sb);
    if (!n1 || !n2) return s_error(a->ctx, TACT_ESHAPE, "matmul of %s and %s: both need at least one dim", sa, sb);
    if (a->shape.d[n1 - 1] != b->shape.d[n2 - tail])
        return s_error(a->ctx, TACT_ESHAPE, "matmul of %s and %s: %" PRId64 " columns against %" PRId64 " rows", sa, sb,
                       a->shape.d[n1 - 1], b->shape.d[n2 - tail]);
    /* As the reference: x (..., [1,] k) times w (..., [1,] k, m) moved to
     * (..., m, k), multiplied with broadcasting and summed over k. */
    int ones = n1 - 1 < n2 - 1 ? n1 - 1 : n2 - 1;
    if (ones > 1) ones = 1;
    int64_t xs[TA_MAX_DIMS], ws[TA_MAX_DIMS];
    int nx = 0, nw = 0;
    if (n1 + ones > TA_MAX_DIMS || n2 + ones > TA_MAX_DIMS) return s_error(a->ctx, TACT_ESHAPE, "matmul: too many dims");
    for (int k = 0; k < n1 - 1; k++) xs[nx++] = a->shape.d[k];
    for (int k = 0; k < ones; k++) xs[nx++] = 1;
    xs[nx++] = a->shape.d[n1 - 1];
    for (int k = 0; k < n2 - 2; k++) ws[nw++] = b->shape.d[k];
    for (int k = 0; k < ones; k++) ws[nw++] = 1;
    for (int k = n2 - tail; k < n2; k++) ws[nw++] = b->shape.d[k];
    int order[TA_MAX_DIMS];
    for (int k = 0; k < nw; k++) order[k] = k;
    order[nw - 1] = nw - tail;
    order[nw - tail] = nw - 1;
    ti_tensor_t *x = ti_reshape(a, nx, xs), *w = ti_permute(ti_reshape(b, nw, ws), order);
    int last = -1;
    return ti_cast(ti_sum(ti_mul(x, w), 1, &last, 0), ta_dtype_promote(a->dtype, b->dtype));
}

/* ---------------------------------------------------------------- movement */

static ti_tensor_t *s_movement(ti_tensor_t *x, ta_op_t op, const ta_shape_t *out, int nargs, const int64_t *args) {
    const ti_tensor_t *src[1] = {x};
    ti_tensor_t *t = s_emit(s_new(x->ctx, x->dtype, out), op, 1, src, nargs, args);
    if (!t->status) t->view = 1;
    return t;
}

ti_tensor_t *ti_reshape(ti_tensor_t *x, int ndim, const int64_t *shape) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    ta_shape_t out;
    ta_error_t err;
    if (ndim > 0 && !shape) return s_error(x->ctx, TACT_EINVAL, "reshape: shape is NULL");
    if (ta_shape_reshape(&x->shape, ndim, shape, &out, &err) != TACT_OK) return s_error(x->ctx, err.code, "%s", err.text);
    if (ta_shape_equal(&out, &x->shape)) return x;
    return s_movement(x, TA_OP_RESHAPE, &out, 0, NULL);
}

ti_tensor_t *ti_permute(ti_tensor_t *x, const int *order) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    int norm[TA_MAX_DIMS];
    ta_shape_t out;
    ta_error_t err;
    if (x->shape.ndim && !order) return s_error(x->ctx, TACT_EINVAL, "permute: order is NULL");
    if (ta_shape_permute(&x->shape, order, norm, &out, &err) != TACT_OK) return s_error(x->ctx, err.code, "%s", err.text);
    int64_t args[TA_MAX_DIMS];
    int identity = 1;
    for (int k = 0; k < x->shape.ndim; k++) {
        args[k] = norm[k];
        identity &= norm[k] == k;
    }
    return identity ? x : s_movement(x, TA_OP_PERMUTE, &out, x->shape.ndim, args);
}

ti_tensor_t *ti_expand(ti_tensor_t *x, int ndim, const int64_t *shape) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    ta_shape_t aligned, out;
    ta_error_t err;
    if (ndim > 0 && !shape) return s_error(x->ctx, TACT_EINVAL, "expand: shape is NULL");
    if (ta_shape_expand(&x->shape, ndim, shape, &aligned, &out, &err) != TACT_OK)
        return s_error(x->ctx, err.code, "%s", err.text);
    if (aligned.ndim != x->shape.ndim) x = ti_reshape(x, aligned.ndim, aligned.d);
    if (x->status || ta_shape_equal(&out, &x->shape)) return x;
    return s_movement(x, TA_OP_EXPAND, &out, 0, NULL);
}

ti_tensor_t *ti_pad(ti_tensor_t *x, const int64_t (*pads)[2], double value) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    ta_shape_t out;
    ta_error_t err;
    if (x->shape.ndim && !pads) return s_error(x->ctx, TACT_EINVAL, "pad: pads is NULL");
    if (ta_shape_pad(&x->shape, pads, &out, &err) != TACT_OK) return s_error(x->ctx, err.code, "%s", err.text);
    if (ta_shape_equal(&out, &x->shape)) return x;
    int64_t args[2 * TA_MAX_DIMS];
    for (int k = 0; k < x->shape.ndim; k++) args[2 * k] = pads[k][0], args[2 * k + 1] = pads[k][1];
    ti_tensor_t *p = s_movement(x, TA_OP_PAD, &out, 2 * x->shape.ndim, args);
    if (value == 0 || p->status) return p;
    /* A non-zero fill: where(pad(ones), pad(x), value), in the reference's
     * dtype for pad(x) + where(pad(ones), 0, value): a whole value is an int
     * and keeps an int tensor's dtype (a bool's becomes int32), a
     * fractional one makes ints and bools float32. */
    ta_scalar_kind_t kind = value == trunc(value) && fabs(value) < 9.2e18 ? TA_SCALAR_INT : TA_SCALAR_FLOAT;
    tact_dtype wd = ta_dtype_promote(ta_dtype_of_scalar(x->dtype, TA_SCALAR_INT), ta_dtype_of_scalar(x->dtype, kind));
    tact_dtype od = ta_dtype_promote(x->dtype, wd);
    ti_tensor_t *inside = s_movement(ti_ones(x->ctx, TACT_BOOL, x->shape.ndim, x->shape.d), TA_OP_PAD, &out,
                                     2 * x->shape.ndim, args);
    ta_value_t v = ta_value_from_double(od, value);
    return ti_where(inside, ti_cast(p, od), s_broadcast_to(s_const(x->ctx, od, v), &out));
}

ti_tensor_t *ti_shrink(ti_tensor_t *x, const int64_t (*ranges)[2]) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    ta_shape_t out;
    ta_error_t err;
    if (x->shape.ndim && !ranges) return s_error(x->ctx, TACT_EINVAL, "shrink: ranges is NULL");
    if (ta_shape_shrink(&x->shape, ranges, &out, &err) != TACT_OK) return s_error(x->ctx, err.code, "%s", err.text);
    int64_t args[2 * TA_MAX_DIMS];
    int identity = 1;
    for (int k = 0; k < x->shape.ndim; k++) {
        args[2 * k] = ranges[k][0], args[2 * k + 1] = ranges[k][1];
        identity &= ranges[k][0] == 0 && ranges[k][1] == x->shape.d[k];
    }
    return identity ? x : s_movement(x, TA_OP_SHRINK, &out, 2 * x->shape.ndim, args);
}

ti_tensor_t *ti_flip(ti_tensor_t *x, int naxes, const int *axes) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    if (x->status) return x;
    uint32_t mask;
    ta_shape_t ignored;
    ta_error_t err;
    if (naxes > 0 && !axes) return s_error(x->ctx, TACT_EINVAL, "flip: axes is NULL");
    if (ta_shape_reduce(&x->shape, naxes, axes, "flip", &mask, &ignored, &err) != TACT_OK)
        return s_error(x->ctx, err.code, "%s", err.text);
    if (!mask) return x;
    int64_t args[TA_MAX_DIMS];
    for (int k = 0; k < x->shape.ndim; k++) args[k] = mask >> k & 1 ? -1 : 1;
    return s_movement(x, TA_OP_STRIDE, &x->shape, x->shape.ndim, args);
}

ti_tensor_t *ti_contiguous(ti_tensor_t *x) {
    if (!x) return &s_null_arg;
    x = s_solid(x);
    return x->status ? x : s_unary(x, TA_OP_CONTIGUOUS, x->dtype);
}

ti_tensor_t *ti_assign(ti_tensor_t *target, ti_tensor_t *value) {
    ti_tensor_t *e = s_any_error(2, (ti_tensor_t *[]){target, value});
    if (e) return e;
    ti_ctx_t *ctx = target->ctx;
    if (target->weak || target->view)
        return s_error(ctx, TACT_EINVAL, "assign: the target is a %s, not a tensor with its own buffer",
                       target->weak ? "scalar" : "view (reshape, permute, expand, pad, shrink or flip)");
    if (value->weak) value = s_materialize(value, target->dtype);
    if (value->dtype != target->dtype)
        return s_error(ctx, TACT_EDTYPE, "assign: value is %s, target is %s", ta_dtype_name(value->dtype), ta_dtype_name(target->dtype));
    ta_shape_t out;
    ta_error_t err;
    if (ta_shape_broadcast(&value->shape, &target->shape, "assign", &out, &err) != TACT_OK || !ta_shape_equal(&out, &target->shape)) {
        char st[128], sv[128];
        ta_shape_format(&target->shape, st, sizeof st);
        ta_shape_format(&value->shape, sv, sizeof sv);
        return s_error(ctx, TACT_ESHAPE, "assign: value of shape %s does not fit target of shape %s", sv, st);
    }
    value = s_broadcast_to(value, &target->shape);
    if (value->status) return value;
    /* The handle moves to the ASSIGN node; the node it named before is
     * released (the assign itself keeps it alive while it needs it). */
    ti_tensor_t next = *target;
    next.id = ctx->next_id++;
    const ti_tensor_t *src[2] = {target, value};
    if (s_record(ctx, &next, TA_OP_ASSIGN, 2, src, 0, NULL) != TACT_OK) return s_error(ctx, TACT_ENOMEM, "assign: out of memory");
    /* The assign goes out before the release of what it reads. */
    s_flush(ctx, NULL);
    if (ta_grow((void **)&ctx->released, &ctx->released_cap, ctx->nreleased + 1, sizeof *ctx->released) == TACT_OK)
        ctx->released[ctx->nreleased++] = target->id;
    target->id = next.id;
    return target;
}

/* -------------------------------------------------------------- sync points */

/* Waits for the answer of every realize started and not yet waited for, in
 * the order they were started.  Returns the first one's error (its text in
 * ctx->error), or TACT_OK; the stats come from the last one.  The graph
 * hears of the failed ones with the next REALIZE. */
static int s_wait(ti_ctx_t *ctx, int closing) {
    int first = TACT_OK;
    for (size_t i = 0; i < ctx->ninflight; i++) {
        ta_msg_t reply;
        ta_error_t err = {0, ""};
        ta_msg_init(&reply, TA_MSG_READY);
        int rc = closing ? ta_port_wait_within(ctx->port, ctx->inflight[i].corr, &reply, ctx->timeout_ms, &err)
                         : ta_port_wait(ctx->port, ctx->inflight[i].corr, &reply, ctx->timeout_ms, &err);
        if (rc == TACT_ETIMEDOUT && closing)
            ta_error_set(&err, rc, "close: realize %" PRIu64 " was still running after %d ms; stopped", ctx->inflight[i].realize, ctx->timeout_ms);
        else if (rc == TACT_ETIMEDOUT)
            ta_error_set(&err, rc, "no answer to realize %" PRIu64 ", and no sign of work on it, within %d ms", ctx->inflight[i].realize, ctx->timeout_ms);
        if (rc == TACT_OK && reply.type == TA_MSG_DONE && reply.as.done.kernels) {
            ctx->stats.planned_peak_bytes = reply.as.done.planned_peak;
            ctx->stats.unplanned_bytes = reply.as.done.unplanned;
            ctx->stats.device_bytes = reply.as.done.device_bytes;
            ctx->stats.kernels = reply.as.done.kernels;
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
        ta_msg_release(&reply);
    }
    /* Answers that come after their wait gave up are dropped, not kept. */
    if (ctx->ninflight) ta_port_forget(ctx->port, ctx->inflight[ctx->ninflight - 1].corr);
    ctx->ninflight = 0;
    return first;
}

int ti_wait(ti_ctx_t *ctx) { return ctx ? s_wait(ctx, 0) : TACT_EINVAL; }

/* Waits for the reply to req (after every realize in flight); returns its
 * status with ctx->error set. */
static int s_request(ti_ctx_t *ctx, ta_msg_t *req, ta_msg_t *reply) {
    ta_error_t err = {0, ""};
    int rc = ti_wait(ctx);
    if (rc != TACT_OK) return rc;
    rc = s_flush(ctx, &err);
    if (rc == TACT_OK) rc = ta_port_request(ctx->port, ctx->wiring.graph, req, reply, ctx->timeout_ms, &err);
    if (rc != TACT_OK) snprintf(ctx->error, sizeof ctx->error, "%s", err.text);
    return rc;
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
    uint64_t *ids = ta_malloc(sizeof *ids * (size_t)(n ? n : 1));
    ta_error_t err = {0, ""};
    int rc = !ids || ta_grow((void **)&ctx->inflight, &ctx->inflight_cap, ctx->ninflight + 1, sizeof *ctx->inflight) != TACT_OK
                 ? ta_error_set(&err, TACT_ENOMEM, "realize: out of memory")
                 : TACT_OK;
    for (int i = 0; rc == TACT_OK && i < n; i++) ids[i] = s_solid(tensors[i])->id;
    if (rc == TACT_OK) rc = s_flush(ctx, &err);
    if (rc == TACT_OK) {
        /* Realizes are numbered; each REALIZE also tells the graph which of
         * the earlier ones failed, so their nodes are computed again. */
        ta_msg_t req;
        ta_msg_init(&req, TA_MSG_REALIZE);
        req.as.realize.realize = ctx->realizes + 1;
        req.as.realize.ids = ta_u64s(ids, (size_t)n);
        req.as.realize.settled = ctx->settled;
        req.as.realize.failed = ta_u64s(ctx->failed, ctx->nfailed);
        rc = ta_port_send_request(ctx->port, ctx->wiring.graph, &req, &err);
        if (rc == TACT_OK) {
            ctx->inflight[ctx->ninflight++] = (struct s_inflight){req.corr, ++ctx->realizes};
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
    return rc != TACT_OK ? rc : wrc;
}

int ti_read(ti_tensor_t *t, void *buf, size_t bytes) {
    if (!t) return TACT_EINVAL;
    if (t->status) return t->status;
    ti_ctx_t *ctx = t->ctx;
    if (!buf && bytes) {
        snprintf(ctx->error, sizeof ctx->error, "read: buf is NULL");
        return TACT_EINVAL;
    }
    t = s_solid(t);
    size_t need = (size_t)ti_numel(t) * ta_dtype_size(t->dtype);
    if (bytes < need) {
        snprintf(ctx->error, sizeof ctx->error, "read: buffer of %zu bytes, the tensor has %zu", bytes, need);
        return TACT_EINVAL;
    }
    /* Reading goes through a contiguous copy, which is t itself when t is
     * already a realized contiguous buffer. */
    ti_tensor_t *c = ti_contiguous(t);
    int rc = ti_realize(ctx, 1, &c);
    if (rc != TACT_OK) return rc;
    ta_msg_t req, reply;
    ta_msg_init(&req, TA_MSG_READ);
    ta_msg_init(&reply, TA_MSG_READY);
    req.as.read.id = c->id;
    rc = s_request(ctx, &req, &reply);
    if (rc == TACT_OK && (reply.type != TA_MSG_DATA || reply.bulk.len != need)) {
        snprintf(ctx->error, sizeof ctx->error, "read: expected %zu bytes, got %zu", need, reply.bulk.len);
        rc = TACT_EPROTO;
    }
    if (rc == TACT_OK && need) memcpy(buf, reply.bulk.ptr, need);
    ta_msg_release(&reply);
    return rc;
}

int ti_item(ti_tensor_t *t, double *out) {
    if (!t || !out) return TACT_EINVAL;
    if (t->status) return t->status;
    if (ti_numel(t) != 1) {
        snprintf(t->ctx->error, sizeof t->ctx->error, "item: the tensor has %" PRId64 " elements, not 1", ti_numel(t));
        return TACT_ESHAPE;
    }
    uint8_t buf[8];
    ti_tensor_t *s = s_solid(t);
    int rc = ti_read(s, buf, sizeof buf);
    if (rc == TACT_OK) *out = ta_value_as_double(s->dtype, ta_value_load(s->dtype, buf));
    return rc;
}
