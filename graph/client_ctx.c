/* client_ctx.c - opening and closing a context: its stages, its workers and devices, its run header; the options' defaults. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc.h"
#include "client_core.h"
#include "client_ctx.h"
#include "client_impl.h"
#include "device.h"
#include "handle.h"
#include "keys.h"
#include "link.h"
#include "mem.h"
#include "pipeline.h"
#include "rerun.h"
#include "tact.h"

static _Thread_local char s_open_error[512];

const char *tact_last_open_error(void) { return s_open_error; }

void tact_options_default(tact_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->transport = "inproc";
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
    for (size_t i = 0; i < n; i++)
        if (ta_actor_stop(all[i], &err) != TACT_OK && first && !first->code) *first = err;
    for (int i = 0; ctx->executors && i < ctx->wiring.ndevices; i++)
        if (ta_actor_stop(&ctx->executors[i], &err) != TACT_OK && first && !first->code) *first = err;
    if (ta_actor_stop(&ctx->autograd, &err) != TACT_OK && first && !first->code) *first = err;
    if (ta_group_stop(&ctx->control, &err) != TACT_OK && first && !first->code) *first = err;
    for (int i = 0; i < ctx->nlinks; i++) ta_link_close(&ctx->links[i]);
    /* The worker processes started for isolated devices, and their folder. */
    for (int i = 0; ctx->isolated && i < ctx->wiring.ndevices; i++)
        if (ctx->isolated[i]) ta_worker_stop(ctx->isolated[i], 2000), ctx->isolated[i] = 0;
    if (ctx->iso_dir[0]) {
        for (int i = 0; i < ctx->wiring.ndevices; i++) {
            char path[128];
            snprintf(path, sizeof path, "%s/%d.sock", ctx->iso_dir, i);
            unlink(path);
        }
        rmdir(ctx->iso_dir);
        ctx->iso_dir[0] = '\0';
    }
}

/* The workers of the context's devices: one link per worker address, each
 * with the key its URIs carry or known_workers gives (a tcp worker without
 * one is refused).  raw: the list as given (the keys are there). */
static int s_links(ti_ctx_t *ctx, const char *raw, const char *isolate, ta_error_t *err) {
    ta_pipeline_t *w = &ctx->wiring;
    char **names, **iso = NULL;
    int n = ta_device_split(raw, strlen(raw), &names, err), niso = 0;
    if (n < 0) return err->code;
    int rc = TACT_OK;
    if (isolate && *isolate && (niso = ta_device_list_parse(isolate, &iso, err)) < 0) rc = ta_error_set(err, err->code, "isolate '%s': %s", isolate, err->text);
    if (rc == TACT_OK && (n != w->ndevices || !(ctx->links = ta_calloc((size_t)n, sizeof *ctx->links)) ||
                          !(ctx->isolated = ta_calloc((size_t)n, sizeof *ctx->isolated)) ||
                          !(ctx->device_link = ta_malloc(sizeof *ctx->device_link * (size_t)n)) ||
                          !(ctx->device_local = ta_calloc((size_t)n, sizeof *ctx->device_local))))
        rc = ta_error_set(err, TACT_ENOMEM, "out of memory");
    for (int i = 0; rc == TACT_OK && i < n; i++) {
        char where[TA_URI_MAX + 1], key[TA_KEY_Z85 + 1];
        ctx->device_link[i] = -1;
        int l = ctx->nlinks;
        if (!ta_device_remote(names[i], where, ctx->device_local[i], key)) {
            /* A device of this machine in a worker process of its own. */
            int mine = 0;
            for (int k = 0; k < niso; k++) mine |= strcmp(iso[k], w->device[i].uri) == 0;
            if (!mine) continue;
            if (!ctx->iso_dir[0]) {
                snprintf(ctx->iso_dir, sizeof ctx->iso_dir, "/tmp/tact-iso-%ld-XXXXXX", (long)getpid());
                if (!mkdtemp(ctx->iso_dir)) {
                    rc = ta_error_set(err, TACT_EIO, "isolate: no private folder in /tmp: %s", strerror(errno));
                    ctx->iso_dir[0] = '\0';
                    break;
                }
            }
            char listen[128], uri[1024], name[TA_URI_MAX + 64];
            snprintf(listen, sizeof listen, "ipc://%s/%d.sock", ctx->iso_dir, i);
            snprintf(ctx->device_local[i], sizeof ctx->device_local[i], "%s", w->device[i].uri);
            rc = ta_worker_spawn(NULL, listen, w->device[i].uri, ctx->local.cpu_threads, ctx->timeout_ms < 30000 ? ctx->timeout_ms : 30000,
                                 &ctx->isolated[l], uri, sizeof uri, err);
            if (rc != TACT_OK) {
                rc = ta_error_set(err, rc, "isolate %s: %s", w->device[i].uri, err->text);
                break;
            }
            snprintf(name, sizeof name, "isolated device %s (worker process %d)", w->device[i].uri, ctx->isolated[l]);
            ctx->device_link[i] = l;
            rc = ta_link_new(ctx->rt, listen, NULL, name, &ctx->links[l], err);
            if (rc == TACT_OK) ctx->nlinks++;
            else ta_worker_stop(ctx->isolated[l], 1000), ctx->isolated[l] = 0;
            continue;
        }
        l = 0;
        while (l < ctx->nlinks && strcmp(ta_link_where(ctx->links[l]), where) != 0) l++;
        ctx->device_link[i] = l;
        if (l < ctx->nlinks) continue;
        int tcp = strncmp(where, "tcp://", 6) == 0;
        if (tcp && !key[0] && ta_keys_known_worker(where, key) != TACT_OK)
            rc = ta_error_set(err, TACT_EINVAL,
                              "device %s: a tcp worker's URI needs its public key (?key=..., as tact worker --print-uri prints it) unless "
                              "known_workers lists %s",
                              w->device[i].uri, where);
        if (rc == TACT_OK) rc = ta_link_new(ctx->rt, where, tcp ? key : NULL, NULL, &ctx->links[l], err);
        if (rc == TACT_OK) ctx->nlinks++;
    }
    ta_free(names);
    ta_free(iso);
    return rc;
}

/* Asks each worker for its devices, as the executor ids reserved for them,
 * and takes what it says they are (their DEVICE records). */
static int s_hello(ti_ctx_t *ctx, ta_error_t *err) {
    ta_pipeline_t *w = &ctx->wiring;
    for (int l = 0; l < ctx->nlinks; l++) {
        const char *names[64];
        uint32_t ids[64];
        ta_device_info_t infos[64];
        int at[64], n = 0;
        for (int i = 0; i < w->ndevices; i++)
            if (ctx->device_link[i] == l) {
                if (n == 64) return ta_error_set(err, TACT_EINVAL, "more than 64 devices on worker %s", ta_link_where(ctx->links[l]));
                names[n] = ctx->device_local[i];
                ids[n] = w->device[i].executor;
                at[n++] = i;
            }
        int wait = ctx->timeout_ms < 10000 ? ctx->timeout_ms : 10000;
        int rc = ta_link_hello(ctx->links[l], names, ids, n, w->compiler, w->ncompilers, w->autograd, infos, wait, err);
        if (rc != TACT_OK) return rc;
        for (int k = 0; k < n; k++) w->device[at[k]].info = infos[k];
    }
    return TACT_OK;
}

/* Packs the run header of a recorded context (docs/log-format.md). */
static int s_run_header(const tact_options *o, const ta_pipeline_t *w, int timeout_ms, msgpack_sbuffer *sb) {
    ta_run_header_t h;
    memset(&h, 0, sizeof h);
    snprintf(h.library, sizeof h.library, "%s", tact_version());
    snprintf(h.build, sizeof h.build, "%s", "gcc " __VERSION__);
    snprintf(h.transport, sizeof h.transport, "%s", o->transport ? o->transport : "inproc");
    ta_pipeline_device_list(w, ",", h.devices, sizeof h.devices);
    h.cpu_threads = o->cpu_threads;
    h.compile_workers = w->ncompilers;
    h.timeout_ms = timeout_ms;
    snprintf(h.cc, sizeof h.cc, "%s", w->cc);
    snprintf(h.flags, sizeof h.flags, "%s", ta_cc_flags(TA_CC_FULL));
    snprintf(h.quick_flags, sizeof h.quick_flags, "%s", ta_cc_flags(TA_CC_QUICK));
    h.schedule_cache = w->schedule_cache;
    h.strict = w->strict;
    return ta_log_header_pack(&h, sb);
}

/* The context's memory, once its stages stopped and its runtime went
 * (an open that failed, or the close); its handle goes stale. */
static void s_free_ctx(ti_ctx_t *ctx) {
    msgpack_sbuffer_destroy(&ctx->batch);
    ta_free(ctx->released);
    ta_free(ctx->deferred);
    ta_free(ctx->undo);
    ta_free(ctx->inflight);
    ta_free(ctx->failed);
    ta_handle_free(ctx->handle);
    ta_free(ctx->executors);
    ta_free(ctx->device_stats);
    ta_free(ctx->links);
    ta_free(ctx->isolated);
    ta_free(ctx->device_link);
    ta_free(ctx->device_local);
    ta_pipeline_fini(&ctx->wiring);
    ta_free(ctx);
}

int ti_ctx_open(ti_ctx_t **out, const tact_options *opts) {
    const char *sc = getenv("TACT_SCHEDULE_CACHE");
    return ti_ctx_open_as(out, opts, ta_cc_compiler(), !(sc && strcmp(sc, "0") == 0));
}

/* The devices of the list ("CPU", "CPU:0,CPU:1", "CPU,CL"), each at its
 * canonical URI ("CPU" for the CPU's device 0, "CL:k" for OpenCL) and
 * described by itself, into w->device (its executors' ports come later).
 * Returns TACT_OK, or the error's code with s_open_error set. */
static int s_describe_devices(const char *list, ta_pipeline_t *w) {
    ta_error_t err = {TACT_EINVAL, "bad device list"};
    char **uris = NULL;
    int n = ta_device_list_parse(list, &uris, &err), rc = n < 0 ? n : TACT_OK;
    if (rc == TACT_OK && !(w->device = ta_calloc((size_t)n, sizeof *w->device))) rc = ta_error_set(&err, TACT_ENOMEM, "out of memory");
    for (int i = 0; rc == TACT_OK && i < n; i++) {
        snprintf(w->device[i].uri, sizeof w->device[i].uri, "%s", uris[i]);
        char where[TA_URI_MAX + 1], local[TA_URI_MAX + 1], key[TA_KEY_Z85 + 1];
        /* A worker's device is described by the worker (s_hello). */
        if (!ta_device_remote(uris[i], where, local, key)) rc = ta_device_describe(uris[i], &w->device[i].info, &err);
        w->ndevices = i + 1;
    }
    ta_free(uris);
    if (rc != TACT_OK) {
        ta_pipeline_fini(w);
        snprintf(s_open_error, sizeof s_open_error, "devices '%s': %s", list, err.text);
    }
    return rc;
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
    /* The devices: the option, else TACT_DEVICE, else the CPU. */
    const char *devices = o.devices ? o.devices : getenv("TACT_DEVICE");
    if (!devices || !*devices) devices = "CPU";
    /* Every number is checked here, before anything starts: 100000
     * threads are refused now, not after 30000 of them ran. */
    const char *bad = o.compile_workers < 0 || o.compile_workers > TA_MAX_COMPILERS ? "compile_workers"
                      : o.cpu_threads < 0 || o.cpu_threads > ta_cpu_threads_max() ? "cpu_threads"
                      : o.timeout_ms < 0                                          ? "timeout_ms"
                      : o.strict < -1 || o.strict > 1                             ? "strict"
                                                                                  : NULL;
    if (bad) {
        snprintf(s_open_error, sizeof s_open_error,
                 "option %s out of range (compile_workers 0..%d, cpu_threads 0..%d on this machine, timeout_ms 0..%d, strict -1..1): "
                 "compile_workers %d, cpu_threads %d, timeout_ms %d, strict %d",
                 bad, TA_MAX_COMPILERS, ta_cpu_threads_max(), INT_MAX, o.compile_workers, o.cpu_threads, o.timeout_ms, o.strict);
        return TACT_EINVAL;
    }
    /* Strict determinism: the option, else TACT_STRICT. */
    const char *strict_env = getenv("TACT_STRICT");
    if (!o.strict && strict_env && *strict_env && strcmp(strict_env, "0") != 0 && strcmp(strict_env, "1") != 0) {
        snprintf(s_open_error, sizeof s_open_error, "TACT_STRICT is '%.64s'; it must be 1 (strict determinism) or 0 (off)", strict_env);
        return TACT_EINVAL;
    }
    int strict = o.strict > 0 || (!o.strict && strict_env && strcmp(strict_env, "1") == 0);
    const char *relaxing = strict ? ta_strict_relaxing_flag(cc) : NULL;
    if (relaxing) {
        snprintf(s_open_error, sizeof s_open_error,
                 "strict mode: the kernel compiler '%.400s' (TACT_CC) relaxes floating point (%s), so kernels' results would be the compiler's "
                 "choice: drop the flag, or leave strict mode",
                 cc, relaxing);
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
    int drc = s_describe_devices(devices, &ctx->wiring);
    if (drc == TACT_OK && (!(ctx->executors = ta_calloc((size_t)ctx->wiring.ndevices, sizeof *ctx->executors)) ||
                           !(ctx->device_stats = ta_calloc((size_t)ctx->wiring.ndevices, sizeof *ctx->device_stats)))) {
        snprintf(s_open_error, sizeof s_open_error, "out of memory");
        drc = TACT_ENOMEM;
    }
    if (drc != TACT_OK) {
        ta_pipeline_fini(&ctx->wiring);
        ta_free(ctx->executors);
        ta_free(ctx->device_stats);
        ta_free(ctx);
        return drc;
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
    local->compile_limit_s = limit && atoi(limit) > 0 ? (atoi(limit) < 86400 ? atoi(limit) : 86400) : 300; /* a day at most: times a batch, it stays an int */
    local->cpu_threads = o.cpu_threads;
    const char *bounds = getenv("TACT_CHECK_BOUNDS");
    local->check_bounds = bounds && atoi(bounds) > 0;
    ta_cc_cache_dir(local->cache_dir, sizeof local->cache_dir);
    if ((rc = ta_cc_check_dir(local->cache_dir, &err)) != TACT_OK) goto fail;
    /* The compiler's identity (part of every kernel's cache key) is found
     * here, under the compile limit, not inside a stage whose silence a
     * realize would take for a dead stage. */
    if ((rc = ta_cc_probe(cc, local->compile_limit_s, &err)) != TACT_OK) goto fail;
    w->schedule_cache = schedule_cache;
    w->strict = strict;
    w->ncompilers = o.compile_workers ? o.compile_workers : 2;
    snprintf(w->cc, sizeof w->cc, "%s", cc);
    w->self_device = -1;
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
    /* Start order fixes the port ids, so logs of two runs line up.  The
     * light stages that hand work to each other in turn share a thread
     * (ta_group_start): a hand-off among them wakes no other thread. */
    if ((rc = ta_group_start(ctx->rt, "control", &ctx->control, &err)) != TACT_OK) goto fail;
    ta_actor_opts_t shared = {NULL, 0, ctx->control};
    if ((rc = ta_actor_start(ctx->rt, &ta_graph_ops, local, &shared, &ctx->graph, &err)) != TACT_OK) goto fail;
    w->graph = ta_actor_id(ctx->graph);
    if ((rc = ta_actor_start(ctx->rt, &ta_scheduler_ops, local, &shared, &ctx->scheduler, &err)) != TACT_OK) goto fail;
    w->scheduler = ta_actor_id(ctx->scheduler);
    if ((rc = ta_actor_start(ctx->rt, &ta_planner_ops, local, &shared, &ctx->planner, &err)) != TACT_OK) goto fail;
    w->planner = ta_actor_id(ctx->planner);
    for (int i = 0; i < w->ncompilers; i++) {
        if ((rc = ta_actor_start(ctx->rt, &ta_compiler_ops, local, NULL, &ctx->compilers[i], &err)) != TACT_OK) goto fail;
        w->compiler[i] = ta_actor_id(ctx->compilers[i]);
    }
    const char *isolate = o.isolate ? o.isolate : getenv("TACT_ISOLATE");
    if ((rc = s_links(ctx, devices, isolate, &err)) != TACT_OK) goto fail;
    for (int i = 0; i < w->ndevices; i++) {
        /* A worker's executor: an id like the others, its mailbox the link's. */
        int l = ctx->device_link[i];
        if (l >= 0) {
            if (!(w->device[i].executor = ta_rt_route(ctx->rt, ta_executor_ops.name, ta_link_endpoint(ctx->links[l])))) goto fail_nomem;
            continue;
        }
        if ((rc = ta_actor_start(ctx->rt, &ta_executor_ops, local, NULL, &ctx->executors[i], &err)) != TACT_OK) goto fail;
        w->device[i].executor = ta_actor_id(ctx->executors[i]);
    }
    if ((rc = ta_actor_start(ctx->rt, &ta_autograd_ops, local, &shared, &ctx->autograd, &err)) != TACT_OK) goto fail;
    w->autograd = ta_actor_id(ctx->autograd);
    if ((rc = s_hello(ctx, &err)) != TACT_OK) goto fail;
    /* Every device, this process's and the workers' (their WELCOME). */
    for (int i = 0; strict && i < w->ndevices; i++) {
        char why[200];
        if (ta_device_strict_why(&w->device[i].info, why, sizeof why)) {
            rc = ta_error_set(&err, TACT_EINVAL, "strict mode: device %s: %s; leave it out, or leave strict mode", w->device[i].uri, why);
            goto fail;
        }
    }
    /* Every stage learns the wiring from CONFIG (and its upstream from it)
     * before any work is sent: each is a request, answered in turn. */
    int nstages = 4 + w->ncompilers + w->ndevices;
    for (int i = 0; i < nstages; i++) {
        uint32_t stage = i < 3                      ? (i == 0 ? w->graph : i == 1 ? w->scheduler : w->planner)
                         : i < 3 + w->ncompilers    ? w->compiler[i - 3]
                         : i < nstages - 1          ? w->device[i - 3 - w->ncompilers].executor
                                                    : w->autograd;
        ta_msg_t cfg, reply;
        ta_pipeline_msg_t store;
        if (ta_pipeline_to_msg(w, &cfg, &store) != TACT_OK) goto fail_nomem;
        ta_msg_init(&reply, TA_MSG_READY);
        rc = ta_port_request(ctx->port, stage, &cfg, &reply, ctx->timeout_ms, &err);
        ta_msg_release(&reply);
        ta_pipeline_msg_fini(&store);
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
    s_free_ctx(ctx);
    return rc;
}

int ti_ctx_close(ti_ctx_t **pctx) {
    if (!pctx) return TACT_OK;
    ti_ctx_t *ctx = *pctx;
    if (!ctx) return TACT_OK;
    *pctx = NULL;
    ta_error_t first = {0, ""};
    /* A backward not answered yet: its failure is the close's (and the
     * last realize below still goes). */
    int brc = ti_settle_backward(ctx, 0);
    if (brc != TACT_OK) ta_error_set(&first, brc, "%s", ctx->error);
    /* Realizes in flight get timeout_ms to end, then stop with the stages. */
    int wrc = tc_wait(ctx, 1);
    if (wrc != TACT_OK && !first.code) ta_error_set(&first, wrc, "%s", ctx->error);
    /* A last realize of nothing: the stages process everything sent
     * before it (ops and releases no answer was awaited for) before they
     * are stopped, so how a run ends, and its log, does not depend on
     * timing. */
    if (wrc == TACT_OK && ctx->unsynced && ti_realize(ctx, 0, NULL) != TACT_OK && !first.code) ta_error_set(&first, TACT_EPROTO, "%s", ctx->error);
    for (size_t s = ctx->nscopes; s-- > 0;) {
        for (size_t i = 0; i < ctx->scopes[s].n; i++) tc_free_tensor(ctx->scopes[s].items[i]);
        ta_free(ctx->scopes[s].items);
    }
    ta_free(ctx->scopes);
    s_stop_all(ctx, &first);
    ta_port_destroy(&ctx->port);
    ta_error_t err;
    int rc = ta_rt_destroy(&ctx->rt, &err);
    if (rc != TACT_OK && !first.code) first = err;
    s_free_ctx(ctx);
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

int ti_ctx_device_stats(ti_ctx_t *ctx, const char *device, tact_device_stats *out) {
    if (out) memset(out, 0, sizeof *out);
    ta_error_t err;
    int at = !device ? ta_error_set(&err, TACT_EINVAL, "device_stats: device is NULL") : tc_device_index(ctx, device, &err);
    if (at >= 0 && !out) at = ta_error_set(&err, TACT_EINVAL, "device_stats: out is NULL");
    if (at < 0) {
        snprintf(ctx->error, sizeof ctx->error, "%s", err.text);
        return err.code;
    }
    *out = ctx->device_stats[at];
    return TACT_OK;
}
