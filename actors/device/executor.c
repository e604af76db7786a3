/* executor.c - a device executor actor: buffers, programs and plans, run as their inputs become ready (dataflow). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ast.h"
#include "cc.h"
#include "device.h"
#include "dtype.h"
#include "hash.h"
#include "map.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"

/*
 * The graph builder's stream gives the executor its work, in order: WRITE,
 * FREE, COPY_OUT and RUN.  A RUN says "realize this plan here": the
 * executor then awaits the PLAN (from the planner, under the corr RUN
 * names), asks the compilers for the programs of its kernels that it does
 * not hold (by their ASTs, whose digests name them: s_ask), then runs the
 * steps in order, each as its program comes (or at once with one it
 * holds), and answers
 * the client (DONE, or ERROR for the first failure of that realize) before
 * it takes the graph's next message.  So everything the graph sent before a
 * RUN (the bytes a plan reads) is in place when the plan runs, and what it
 * sent after (a FREE of a buffer the plan reads, a COPY_OUT of its result)
 * waits until the plan has run, whatever the arrival order of the streams.
 */

typedef struct {
    uint64_t id;
    void *ptr;
    uint64_t bytes;
} s_buf_t;

typedef struct {
    int index, nbufs, nfrees;
    uint64_t program; /* a kernel: the corr of the PROGRAM asked for it, 0: the program held for its AST; a copy: its corr */
    uint64_t ast[2];  /* the digest of its AST's bytes */
    uint8_t *ast_bytes; /* a kernel's AST, what a compiler builds (s_ask) */
    size_t ast_len;
    uint64_t work;    /* iterations of the kernel (the planner's estimate) */
    uint64_t bufs[TA_AST_MAX_BUFS], bytes[TA_AST_MAX_BUFS], reuse;
    uint8_t writes[TA_AST_MAX_BUFS];
    int64_t numel;
    uint64_t *frees;
    uint64_t *args; /* the kernel's argument values */
    int nargs;
    int copy;      /* 0 a kernel, 1 send buffer bufs[0] to peer, 2 receive bufs[0] from peer (under corr program) */
    uint32_t peer; /* the other executor of a copy */
} s_step_t;

typedef struct {
    int nsteps;
    s_step_t *steps;
    uint64_t planned_peak, unplanned; /* the planner's figures, passed on in DONE */
} s_plan_t;

/* The realize being run: what its RUN said, and how far it got. */
typedef struct {
    int active;
    uint64_t realize, plan, reply_to, corr, final;
    s_plan_t *p; /* NULL until its PLAN came */
    int next;    /* the step whose PROGRAM (or copy) is awaited */
    int failed;  /* it failed: the rest is consumed, not run */
    int error_due; /* the client is owed its ERROR (code, what, failure), sent when the run ends */
    int error_code;
    char error_what[64];
    int silent;  /* an await of it timed out: the rest is not awaited (sends still answer) */
    int asked;   /* its COMPILEs went to every compiler (s_ask: once per RUN) */
    uint64_t acks[TA_MAX_COMPILERS]; /* the corr of each compiler's COMPILE: its DONE says it was taken */
    int next_ack;                    /* the compiler whose DONE is awaited next, once the steps are done */
    char failure[300]; /* why, for the executors awaiting a copy from this one */
    /* The small targets whose bytes DONE carries: (target, buffer, bytes) each. */
    uint64_t returns[3 * TA_RETURNS_MAX];
    int nreturns;
} s_run_t;

/* A program the device made runnable, by the digest of its bytes and the
 * kernel's name (a compiler's object may hold several kernels). */
typedef struct {
    char key[33];
    char name[64];
    void *prog;
} s_prog_t;

/* The program a kernel's AST got (the latest PROGRAM of a step with that
 * AST), or its compile error, for the steps that name no PROGRAM. */
typedef struct {
    uint64_t ast[2];
    int final;  /* the compiler's last word on it (a quick build and a failure are not: asked again in a later realize) */
    void *prog; /* NULL: the compile failed with rc, text */
    char name[64];
    int64_t align;
    uint64_t nargs;
    int rc;
    char text[256];
} s_known_t;

typedef struct {
    ta_pipeline_t w;
    ta_stage_local_t local;
    int configured;
    int alone; /* the only executor of its process: the compilers' only ordered input (s_ask) */
    const ta_device_ops_t *dev_ops;
    ta_device_t *dev;
    s_buf_t *bufs;
    size_t nbufs, bufs_cap;
    ta_map_t buf_index; /* buffer id -> index in bufs */
    s_run_t run;
    uint64_t failed_corr; /* the realize (client corr) whose ERROR went out last: one answer each */
    uint64_t *failed;     /* buffers whose WRITE failed: plans reading them fail */
    size_t nfailed, failed_cap;
    s_prog_t *loaded; /* every program loaded so far: loaded once */
    size_t nloaded, loaded_cap;
    ta_map_t loaded_index; /* s_prog_key(digest, name) -> index in loaded (a step per kernel looks it up) */
    s_known_t *known;
    size_t nknown, known_cap;
    ta_map_t known_index; /* ast[0] -> index in known */
    s_buf_t *cache;      /* freed allocations kept for reuse (see s_alloc) */
    size_t ncache, cache_cap;
    uint64_t cached_bytes;
    uint64_t done_corr, done_steps; /* steps run for the realize (client corr) whose parts are running: DONE counts them */
} s_state_t;

enum { S_CACHE_LIMIT = 1 << 30 };

/* Allocations come from the cache of freed ones of the same size when
 * possible (as the reference's LRU allocator): a fresh allocation of a big
 * buffer costs a page fault per 4 KiB on first touch, which can take longer
 * than the kernel writing it. */
static int s_alloc(s_state_t *s, uint64_t bytes, void **ptr, ta_error_t *err) {
    for (size_t i = 0; i < s->ncache; i++)
        if (s->cache[i].bytes == bytes) {
            *ptr = s->cache[i].ptr;
            s->cached_bytes -= bytes;
            s->cache[i] = s->cache[--s->ncache];
            return TACT_OK;
        }
    return s->dev_ops->alloc(s->dev, bytes, ptr, err);
}

static void s_release_memory(s_state_t *s, void *ptr, uint64_t bytes) {
    if (s->cached_bytes + bytes <= S_CACHE_LIMIT &&
        ta_grow((void **)&s->cache, &s->cache_cap, s->ncache + 1, sizeof *s->cache) == TACT_OK) {
        s->cache[s->ncache++] = (s_buf_t){0, ptr, bytes};
        s->cached_bytes += bytes;
        return;
    }
    s->dev_ops->free(s->dev, ptr);
}

/* ---------------------------------------------------------------- buffers */

static s_buf_t *s_buf(s_state_t *s, uint64_t id) {
    uint64_t i;
    return ta_map_get(&s->buf_index, id, &i) ? &s->bufs[i] : NULL;
}

/* Adds buffer id over ptr; on failure the memory goes back to the cache. */
static s_buf_t *s_buf_add(s_state_t *s, uint64_t id, void *ptr, uint64_t bytes, ta_error_t *err) {
    if (ta_grow((void **)&s->bufs, &s->bufs_cap, s->nbufs + 1, sizeof *s->bufs) != TACT_OK ||
        ta_map_put(&s->buf_index, id, s->nbufs) != TACT_OK) {
        s_release_memory(s, ptr, bytes);
        ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
        return NULL;
    }
    s_buf_t *b = &s->bufs[s->nbufs++];
    *b = (s_buf_t){id, ptr, bytes};
    return b;
}

static s_buf_t *s_buf_new(s_state_t *s, uint64_t id, uint64_t bytes, int zero, ta_error_t *err) {
    void *ptr;
    if (s_alloc(s, bytes, &ptr, err) != TACT_OK) return NULL;
    if (zero && s->dev_ops->zero(s->dev, ptr, bytes, err) != TACT_OK) {
        s_release_memory(s, ptr, bytes);
        return NULL;
    }
    return s_buf_add(s, id, ptr, bytes, err);
}

/* Removes buffer id; frees its memory unless keep_memory. */
static void s_buf_drop(s_state_t *s, uint64_t id, int keep_memory) {
    uint64_t i;
    if (!ta_map_get(&s->buf_index, id, &i)) return;
    if (!keep_memory) s_release_memory(s, s->bufs[i].ptr, s->bufs[i].bytes);
    ta_map_del(&s->buf_index, id);
    if (i != s->nbufs - 1) {
        s->bufs[i] = s->bufs[s->nbufs - 1];
        ta_map_put(&s->buf_index, s->bufs[i].id, i); /* replaces a key: cannot fail */
    }
    s->nbufs--;
}

/* --------------------------------------------------------------- programs */

/* Loads kernel name of an object once, and returns the device's handle.
 * A load may take long (an OpenCL build): the client waiting for the
 * realize gets a heartbeat first. */
static uint64_t s_prog_key(const char *digest, const char *name) {
    char both[33 + 64];
    uint64_t h[2];
    int n = snprintf(both, sizeof both, "%s %s", digest, name);
    ta_hash128(both, (size_t)n < sizeof both ? (size_t)n : sizeof both - 1, h);
    return h[0];
}

static int s_load(ta_actor_t *self, s_state_t *s, const ta_bytes_t obj, const char *digest, const char *name, void **out, ta_error_t *err) {
    uint64_t key = s_prog_key(digest, name), i;
    if (ta_map_get(&s->loaded_index, key, &i) && strcmp(s->loaded[i].key, digest) == 0 && strcmp(s->loaded[i].name, name) == 0) {
        *out = s->loaded[i].prog;
        return TACT_OK;
    }
    if (!obj.len) return ta_error_set(err, TACT_EPROTO, "executor: program %s: digest %s names no object this executor was sent", name, digest);
    /* What is loaded is exactly what the compiler sent. */
    char want[33];
    ta_cc_digest(obj.ptr, obj.len, want);
    if (strcmp(digest, want) != 0)
        return ta_error_set(err, TACT_EPROTO, "executor: program %s: its %zu bytes do not match digest %s", name, obj.len, digest);
    if (ta_grow((void **)&s->loaded, &s->loaded_cap, s->nloaded + 1, sizeof *s->loaded) != TACT_OK)
        return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    s_prog_t *p = &s->loaded[s->nloaded];
    if (!s->dev_ops->host_memory) ta_actor_progress(self, (uint32_t)s->run.reply_to, s->run.corr);
    int rc = s->dev_ops->load(s->dev, obj.ptr, obj.len, name, &p->prog, err);
    if (rc != TACT_OK) return rc;
    if (ta_map_put(&s->loaded_index, key, s->nloaded) != TACT_OK) {
        s->dev_ops->unload(s->dev, p->prog);
        return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    }
    snprintf(p->key, sizeof p->key, "%s", digest);
    snprintf(p->name, sizeof p->name, "%s", name);
    s->nloaded++;
    *out = p->prog;
    return TACT_OK;
}

/* ------------------------------------------------------------------ plans */

static void s_plan_free(s_plan_t *p) {
    if (!p) return;
    for (int i = 0; i < p->nsteps; i++) ta_free(p->steps[i].frees), ta_free(p->steps[i].args), ta_free(p->steps[i].ast_bytes);
    ta_free(p->steps);
    ta_free(p);
}

static int s_parse_plan(const ta_pipeline_t *self_w, const ta_msg_t *m, s_plan_t **out, ta_error_t *err) {
    const ta_recs_t *steps = &m->as.plan.steps;
    s_plan_t *p = ta_calloc(1, sizeof *p);
    if (!p || !(p->steps = ta_calloc(steps->n ? steps->n : 1, sizeof *p->steps))) {
        ta_free(p);
        return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    }
    p->planned_peak = m->as.plan.planned_peak;
    p->unplanned = m->as.plan.unplanned;
    ta_recs_it_t it;
    ta_step_rec_t rec;
    ta_recs_begin(&it, steps);
    for (uint32_t i = 0; i < steps->n; i++) {
        s_step_t *st = &p->steps[p->nsteps];
        int ok = ta_recs_next(&it, &rec) && rec.n_bufs >= 1 && rec.n_bytes == rec.n_bufs && rec.n_writes == rec.n_bufs && rec.numel >= 0 &&
                 (rec.copy ? rec.program && !rec.ast.len : !rec.program && rec.ast.len) && rec.index <= INT32_MAX && rec.copy <= 2;
        /* A copy moves one buffer between this executor and another. */
        int peer = rec.copy && rec.peer <= UINT32_MAX ? ta_pipeline_device_of(self_w, (uint32_t)rec.peer) : -1;
        ok = ok && (!rec.copy || (rec.n_bufs == 1 && peer >= 0 && peer != self_w->self_device));
        /* The memory a step takes over must not be one it reads. */
        for (uint32_t b = 0; ok && b < rec.n_bufs; b++) ok = !rec.reuse || rec.bufs[b] != rec.reuse;
        if (!ok) {
            s_plan_free(p);
            return ta_error_set(err, TACT_EPROTO, "executor: malformed plan step %u", i);
        }
        p->nsteps++;
        st->index = (int)rec.index;
        st->program = rec.program;
        st->ast[0] = rec.ast0, st->ast[1] = rec.ast1;
        st->nbufs = (int)rec.n_bufs;
        memcpy(st->bufs, rec.bufs, sizeof *st->bufs * rec.n_bufs);
        memcpy(st->bytes, rec.bytes, sizeof *st->bytes * rec.n_bufs);
        for (uint32_t b = 0; b < rec.n_bufs; b++) st->writes[b] = (uint8_t)(rec.writes[b] & 3);
        st->numel = rec.numel;
        st->reuse = rec.reuse;
        st->work = rec.work;
        if (rec.frees.n && ta_u64s_copy(&rec.frees, &st->frees) != TACT_OK) {
            s_plan_free(p);
            return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
        }
        st->nfrees = (int)rec.frees.n;
        if (rec.args.n && ta_u64s_copy(&rec.args, &st->args) != TACT_OK) {
            s_plan_free(p);
            return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
        }
        st->nargs = (int)rec.args.n;
        if (rec.ast.len) {
            if (!(st->ast_bytes = ta_malloc(rec.ast.len))) {
                s_plan_free(p);
                return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
            }
            memcpy(st->ast_bytes, rec.ast.ptr, rec.ast.len);
            st->ast_len = rec.ast.len;
        }
        st->copy = (int)rec.copy;
        st->peer = (uint32_t)rec.peer;
    }
    *out = p;
    return TACT_OK;
}

static double s_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The realize being run failed: its client hears of it once (a later part
 * of a realize that failed already says nothing), when the run ends as a
 * DONE would (s_finish_run: after every compiler's DONE, so a log ends the
 * same whenever the context closes), and the rest of the run is consumed
 * without running. */
static void s_fail_run_as(s_state_t *s, int code, const char *what, const char *text) {
    s_run_t *r = &s->run;
    if (!r->failed && s->failed_corr != r->corr) {
        r->error_due = 1, r->error_code = code;
        snprintf(r->error_what, sizeof r->error_what, "%s", what);
    }
    if (!r->failed) snprintf(r->failure, sizeof r->failure, "%s", text);
    s->failed_corr = r->corr;
    r->failed = 1;
}

static void s_fail_run(s_state_t *s, int code, const char *text) { s_fail_run_as(s, code, "PLAN", text); }

static void s_send_copy(ta_actor_t *self, s_state_t *s, s_step_t *st);
static void s_free_host(void *data, void *owner);
static int s_data_of(s_state_t *s, const s_buf_t *b, size_t len, ta_msg_t *d, ta_error_t *err);

static void s_ask(ta_actor_t *self, s_state_t *s);

/* Ends the run: once every compiler took this run's COMPILE (its DONE:
 * so at any answer to the client, every message of the realize was
 * processed, and a log ends the same whenever the context closes), the
 * client hears DONE after its last part, unless it failed. */
static void s_finish_run(ta_actor_t *self, s_state_t *s) {
    s_run_t *r = &s->run; /* every step was taken (s_await_next), or there was no plan */
    if (s->dev_ops->hint) s->dev_ops->hint(s->dev, 0);
    s_ask(self, s);       /* (a run without a plan asks for nothing, but every compiler hears so) */
    while (r->next_ack < s->w.ncompilers) {
        uint32_t c = s->w.compiler[r->next_ack];
        if (!r->silent && r->acks[r->next_ack]) {
            ta_actor_await(self, r->acks[r->next_ack], c);
            return;
        }
        if (r->acks[r->next_ack]) ta_actor_forget(self, r->acks[r->next_ack], c);
        r->next_ack++;
    }
    for (int i = 0; r->p && i < r->p->nsteps; i++) s->done_steps += r->p->steps[i].copy != 1; /* a copy counts once, where it arrives */
    if (!r->failed && r->final) {
        uint64_t live = 0;
        for (size_t i = 0; i < s->nbufs; i++) live += s->bufs[i].bytes;
        if (s->local.debug >= 1 && r->p)
            fprintf(stderr, "tact: realize %" PRIu64 ": %" PRIu64 " kernels, planned_peak=%" PRIu64 " unplanned=%" PRIu64 "\n", r->realize,
                    s->done_steps, r->p->planned_peak, r->p->unplanned);
        /* The last part's figures, and what the device holds now. */
        ta_msg_t d;
        ta_msg_init(&d, TA_MSG_DONE);
        d.corr = r->corr;
        d.as.done.kernels = s->done_steps;
        d.as.done.planned_peak = r->p ? r->p->planned_peak : 0;
        d.as.done.unplanned = r->p ? r->p->unplanned : 0;
        d.as.done.device_bytes = live;
        /* The small targets' bytes, one after another; one that cannot be
         * read is left out (the client reads it the long way). */
        uint64_t returned[2 * TA_RETURNS_MAX];
        size_t nret = 0, at = 0;
        uint8_t *host = r->nreturns ? ta_malloc((size_t)TA_RETURNS_MAX * TA_RETURN_BYTES) : NULL;
        for (int i = 0; host && i < r->nreturns; i++) {
            const uint64_t *q = &r->returns[3 * i];
            s_buf_t *b = s_buf(s, q[1]);
            ta_error_t e = {0, ""};
            if (!b || q[2] > b->bytes || q[2] > TA_RETURN_BYTES) continue;
            if (s->dev_ops->host_memory) memcpy(host + at, b->ptr, q[2]);
            else if (s->dev_ops->copy_out(s->dev, host + at, b->ptr, q[2], &e) != TACT_OK) continue;
            returned[nret++] = q[0], returned[nret++] = q[2];
            at += q[2];
        }
        d.as.done.returned = ta_u64s(returned, nret);
        if (host) d.bulk.ptr = host, d.bulk.len = at, d.bulk_free = s_free_host;
        ta_actor_send(self, (uint32_t)r->reply_to, &d);
    }
    if (r->error_due) ta_actor_send_error(self, (uint32_t)r->reply_to, r->corr, r->error_code, r->error_what, r->failure);
    s_plan_free(r->p);
    memset(r, 0, sizeof *r);
}

/* The compiler asked for a kernel's program: by its AST's digest, so the
 * same one every time (it answers a kernel's quick build first and its
 * full build in a later realize). */
static uint32_t s_compiler_of(const s_state_t *s, const s_step_t *st) {
    return s->w.ncompilers ? s->w.compiler[st->ast[0] % (uint64_t)s->w.ncompilers] : 0;
}

static const s_known_t *s_known(const s_state_t *s, const uint64_t ast[2]) {
    uint64_t i;
    return ta_map_get(&s->known_index, ast[0], &i) && s->known[i].ast[1] == ast[1] ? &s->known[i] : NULL;
}

/*
 * Asks the compilers for the programs of this run's kernels that this
 * executor does not hold for good: never held, held as a quick build or a
 * failure (asked again: the compiler's answer to a later realize is its
 * final word), or lost.  A kernel whose AST an earlier step of the plan
 * asked for waits for that program (it names no PROGRAM and runs what
 * that step's PROGRAM left).  Where the process has several executors,
 * every compiler gets one COMPILE per RUN, with no jobs when there is
 * nothing to build for it, so the compilers' merge of the executors'
 * streams never waits for one that has nothing to say; the only executor
 * of its process sends a compiler only the COMPILEs with jobs (each one
 * wakes the compiler's thread, and its DONE this one: tens of
 * microseconds a realize on a VM).  What is asked depends on the messages
 * this executor processed alone, never on timing.
 */
static void s_ask(ta_actor_t *self, s_state_t *s) {
    s_run_t *r = &s->run;
    if (r->asked) return;
    r->asked = 1;
    int nc = s->w.ncompilers, nsteps = r->p && !r->failed ? r->p->nsteps : 0;
    ta_job_rec_t *jobs = nsteps ? ta_calloc((size_t)nsteps, sizeof *jobs) : NULL;
    int *of = nsteps ? ta_calloc((size_t)nsteps, sizeof *of) : NULL; /* the compiler of job j */
    ta_map_t asked = {0};                                            /* ast[0] -> a step that asked */
    int njobs = 0;
    if (nsteps && (!jobs || !of)) {
        s_fail_run(s, TACT_ENOMEM, "executor: out of memory asking for programs");
        nsteps = 0;
    }
    for (int i = 0; i < nsteps; i++) {
        s_step_t *st = &r->p->steps[i];
        if (st->copy) continue;
        const s_known_t *k = s_known(s, st->ast);
        if (k && k->final && k->prog) continue;
        uint64_t j;
        if (ta_map_get(&asked, st->ast[0], &j) && r->p->steps[j].ast[1] == st->ast[1]) continue; /* in flight here already */
        if (ta_map_put(&asked, st->ast[0], (uint64_t)i) != TACT_OK) {
            s_fail_run(s, TACT_ENOMEM, "executor: out of memory asking for programs");
            break;
        }
        st->program = ta_actor_new_corr(self);
        jobs[njobs] = (ta_job_rec_t){(uint64_t)st->index, st->program, {st->ast_bytes, st->ast_len}};
        of[njobs++] = (int)(st->ast[0] % (uint64_t)nc);
    }
    ta_map_fini(&asked);
    ta_job_rec_t *mine = njobs ? ta_malloc(sizeof *mine * (size_t)njobs) : NULL;
    unsigned unsent = 0; /* compilers a COMPILE could not reach: their programs will not come */
    for (int c = 0; c < nc; c++) {
        int n = 0;
        for (int j = 0; mine && j < njobs; j++)
            if (of[j] == c) mine[n++] = jobs[j];
        if (!n && s->alone) continue; /* nothing to build, no merge to keep going */
        ta_msg_t msg;
        ta_msg_init(&msg, TA_MSG_COMPILE);
        msg.corr = r->acks[c] = ta_actor_new_corr(self);
        msg.as.compile.realize = r->realize;
        msg.as.compile.reply_to = ta_actor_id(self);
        msg.as.compile.jobs = ta_recs(TA_REC_JOB, mine, (size_t)n);
        int rc = ta_actor_send(self, s->w.compiler[c], &msg);
        if (rc != TACT_OK) unsent |= 1u << c, r->acks[c] = 0;
        if (rc != TACT_OK && !r->failed) s_fail_run(s, rc, "executor: cannot ask a compiler for programs");
    }
    if (njobs && !mine) unsent = ~0u;
    if (njobs && !mine && !r->failed) s_fail_run(s, TACT_ENOMEM, "executor: out of memory asking for programs");
    for (int i = 0; unsent && i < nsteps; i++) { /* not awaited: they will not come */
        s_step_t *st = &r->p->steps[i];
        if (!st->copy && st->program && (unsent >> (st->ast[0] % (uint64_t)nc) & 1)) st->program = 0;
    }
    ta_free(mine);
    ta_free(jobs);
    ta_free(of);
}


/* The port a step awaits: its PROGRAM's compiler, or a received copy's sender. */
static uint32_t s_awaited_from(const s_state_t *s, const s_step_t *st) { return st->copy == 2 ? st->peer : s_compiler_of(s, st); }

static void s_run_known(ta_actor_t *self, s_state_t *s, s_step_t *st);

/* Sends the copies due next, then awaits the next step's PROGRAM (or
 * copy), or ends the run after the last.  A run that failed still awaits
 * (and so consumes) what its steps were promised, unless an await of it
 * went unanswered: then only its sends are answered. */
static void s_await_next(ta_actor_t *self, s_state_t *s) {
    s_run_t *r = &s->run;
    while (r->next < r->p->nsteps) {
        s_step_t *st = &r->p->steps[r->next];
        if (!st->copy && !st->program) { /* a kernel whose program is kept here */
            r->next++;
            if (!r->failed) s_run_known(self, s, st);
            continue;
        }
        if (st->copy == 1 || r->silent) {
            r->next++;
            if (st->copy == 1) s_send_copy(self, s, st);
            else ta_actor_forget(self, st->program, s_awaited_from(s, st)); /* not awaited: dropped when it comes */
            continue;
        }
        ta_actor_await(self, st->program, s_awaited_from(s, st));
        return;
    }
    s_finish_run(self, s);
}

static int s_was_written_and_failed(const s_state_t *s, uint64_t id) {
    for (size_t f = 0; f < s->nfailed; f++)
        if (s->failed[f] == id) return 1;
    return 0;
}

/* While a long kernel runs: a heartbeat to the client waiting for the
 * realize every quarter of the timeout, and the answer to "stop?". */
typedef struct {
    ta_actor_t *self;
    uint32_t reply_to;
    uint64_t corr;
    double last;
} s_tick_t;

static int s_tick(void *ud) {
    s_tick_t *t = ud;
    if (ta_actor_stopping(t->self)) return 1;
    double now = s_ms();
    if ((now - t->last) * 4 >= ta_actor_timeout_ms(t->self)) {
        ta_actor_progress(t->self, t->reply_to, t->corr);
        ta_actor_tell_peers(t->self); /* the other executors may await a copy from this one */
        t->last = now;
    }
    return 0;
}

/* Kernels touching more bytes or iterating more than this run supervised
 * (s_tick); smaller ones take milliseconds and run straight on the
 * executor's thread. */
enum { S_LONG_BYTES = 4 << 20, S_LONG_WORK = 4 << 20 };

/* The buffer a step writes (bufs[0]): the one there, the memory of the
 * dead temporary the planner named, or a fresh one.  NULL on error. */
static s_buf_t *s_output(s_state_t *s, const s_step_t *st, const char *name, ta_error_t *err) {
    s_buf_t *out = s_buf(s, st->bufs[0]);
    if (out && out->bytes < st->bytes[0]) {
        ta_error_set(err, TACT_EPROTO, "executor: buffer %" PRIu64 " holds %" PRIu64 " bytes, %s writes %" PRIu64, out->id, out->bytes, name,
                     st->bytes[0]);
        return NULL;
    }
    if (out) return out;
    s_buf_t *old = st->reuse ? s_buf(s, st->reuse) : NULL;
    if (old && old->bytes >= st->bytes[0]) {
        /* The planner found a dead temporary: its memory becomes the output. */
        void *ptr = old->ptr;
        uint64_t bytes = old->bytes;
        s_buf_drop(s, st->reuse, 1);
        return s_buf_add(s, st->bufs[0], ptr, bytes, err);
    }
    return s_buf_new(s, st->bufs[0], st->bytes[0], 0, err);
}

/* ----------------------------------------------------------------- copies */

/* A send step: the buffer's first bytes[0] bytes go to the executor that
 * receives them, as DATA under the step's corr; if the realize failed, or
 * the bytes cannot go, an ERROR goes in their place (that executor awaits
 * one or the other, never waits in vain). */
static void s_send_copy(ta_actor_t *self, s_state_t *s, s_step_t *st) {
    ta_error_t err = {0, ""};
    s_run_t *r = &s->run;
    s_buf_t *b = r->failed ? NULL : s_buf(s, st->bufs[0]);
    int rc = TACT_OK;
    if (r->failed)
        rc = ta_error_set(&err, TACT_EDEVICE, "on %s: %s", ta_pipeline_uri(&s->w, s->w.self_device), r->failure);
    else if (!b)
        rc = ta_error_set(&err, TACT_EDEVICE, "executor on %s: buffer %" PRIu64 " to copy does not exist (the realize that computes it failed)",
                          ta_pipeline_uri(&s->w, s->w.self_device), st->bufs[0]);
    else if (b->bytes < st->bytes[0])
        rc = ta_error_set(&err, TACT_EPROTO, "executor: buffer %" PRIu64 " holds %" PRIu64 " bytes, a copy of %" PRIu64 " was asked", b->id, b->bytes,
                          st->bytes[0]);
    ta_msg_t d;
    ta_msg_init(&d, TA_MSG_DATA);
    d.corr = st->program;
    if (rc == TACT_OK) rc = s_data_of(s, b, st->bytes[0], &d, &err);
    if (rc == TACT_OK) rc = ta_port_send(ta_actor_port(self), st->peer, &d, &err);
    if (rc != TACT_OK) {
        if (!r->failed) s_fail_run(s, rc, err.text);
        ta_actor_send_error(self, st->peer, st->program, rc, "COPY", err.text);
    }
    for (int f = 0; f < st->nfrees; f++) s_buf_drop(s, st->frees[f], 0);
}

/* The awaited DATA (or ERROR) of a receive step: the bytes become its buffer. */
static void s_receive_copy(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    s_run_t *r = &s->run;
    s_step_t *st = &r->p->steps[r->next++];
    ta_error_t err = {0, ""};
    int from = ta_pipeline_device_of(&s->w, st->peer);
    if (m->type == TA_MSG_ERROR) {
        ta_error_set(&err, m->as.error.code < 0 ? (int)m->as.error.code : TACT_EACTOR, "copy from %s failed: %.*s", ta_pipeline_uri(&s->w, from),
                     (int)m->as.error.text.len, m->as.error.text.ptr ? (const char *)m->as.error.text.ptr : "");
    } else if (m->bulk.len != st->bytes[0]) {
        ta_error_set(&err, TACT_EPROTO, "executor: a copy from %s brought %zu bytes for buffer %" PRIu64 " of %" PRIu64, ta_pipeline_uri(&s->w, from),
                     m->bulk.len, st->bufs[0], st->bytes[0]);
    } else if (!r->failed) {
        s_buf_t *out = s_output(s, st, "a copy", &err);
        if (out && (s->dev_ops->copy_in(s->dev, out->ptr, m->bulk.ptr, m->bulk.len, &err) != TACT_OK ||
                    s->dev_ops->sync(s->dev, NULL, NULL, &err) != TACT_OK) && !err.code)
            err.code = TACT_EDEVICE;
    }
    if (err.code && !r->failed) s_fail_run(s, err.code, err.text);
    for (int f = 0; f < st->nfrees; f++) s_buf_drop(s, st->frees[f], 0);
    s_await_next(self, s);
}

/* Executors of this process running a kernel now, and the most seen at
 * once: the record that devices of one context really work in parallel
 * (ta_executor_busy_peak). */
static atomic_int s_busy, s_busy_peak;

int ta_executor_busy_peak(int reset) {
    int v = atomic_load(&s_busy_peak);
    if (reset) atomic_store(&s_busy_peak, 0);
    return v;
}

static void s_busy_enter(void) {
    int now = atomic_fetch_add(&s_busy, 1) + 1, peak = atomic_load(&s_busy_peak);
    while (now > peak && !atomic_compare_exchange_weak(&s_busy_peak, &peak, now)) {
    }
}

/* Runs one step with its loaded program; returns TACT_OK or the error (err). */
static int s_step(ta_actor_t *self, s_state_t *s, s_step_t *st, void *prog, const char *name, int64_t align, ta_error_t *err) {
    for (int b = 1; b < st->nbufs; b++) {
        s_buf_t *in = s_buf(s, st->bufs[b]);
        if (!in) {
            if (st->writes[b] & 1 || s_was_written_and_failed(s, st->bufs[b]))
                return ta_error_set(err, TACT_ENOMEM, "executor: the bytes of buffer %" PRIu64 " could not be stored (out of memory when they came)", st->bufs[b]);
            if (!(st->writes[b] & 2))
                return ta_error_set(err, TACT_EDEVICE,
                                    "executor: kernel %s reads buffer %" PRIu64 ", which does not exist (the realize that computes it failed)",
                                    name, st->bufs[b]);
            if (!s_buf_new(s, st->bufs[b], st->bytes[b], 1, err)) return err->code;
        } else if (in->bytes < st->bytes[b]) {
            return ta_error_set(err, TACT_EPROTO, "executor: buffer %" PRIu64 " holds %" PRIu64 " bytes, kernel %s reads %" PRIu64, in->id,
                                in->bytes, name, st->bytes[b]);
        }
    }
    if (st->numel % align)
        return ta_error_set(err, TACT_EPROTO, "executor: kernel %s works on tiles of %lld outputs, not %lld", name, (long long)align,
                            (long long)st->numel);
    if (!s_output(s, st, name, err)) return err->code;
    void *ptrs[TA_AST_MAX_BUFS];
    for (int b = 0; b < st->nbufs; b++) ptrs[b] = s_buf(s, st->bufs[b])->ptr;
    double t0 = s_ms(), touched = 0;
    for (int b = 0; b < st->nbufs; b++) touched += (double)st->bytes[b];
    s_tick_t tick = {self, (uint32_t)s->run.reply_to, s->run.corr, t0};
    ta_launch_t l = {ptrs, st->nbufs, st->args, st->nargs, st->numel, align, st->work};
    s_busy_enter();
    int rc = s->dev_ops->launch(s->dev, prog, &l, err);
    if (rc == TACT_OK) rc = s->dev_ops->sync(s->dev, touched > S_LONG_BYTES || st->work > S_LONG_WORK ? s_tick : NULL, &tick, err);
    atomic_fetch_sub(&s_busy, 1);
    if (rc != TACT_OK) return err->code ? err->code : TACT_EDEVICE;
    /* TACT_CHECK_BOUNDS: nothing was written around any buffer it touched. */
    for (int b = 0; b < st->nbufs && s->local.check_bounds; b++) {
        s_buf_t *buf = s_buf(s, st->bufs[b]);
        ta_error_t g;
        if (buf && s->dev_ops->check_guards(s->dev, buf->ptr, buf->bytes, &g) != TACT_OK)
            return ta_error_set(err, TACT_EDEVICE, "executor: kernel %s, buffer %" PRIu64 " (%" PRIu64 " bytes): %s", name, buf->id, buf->bytes, g.text);
    }
    if (s->local.debug >= 2 || ta_port_recorded(ta_actor_port(self))) {
        double ms = s_ms() - t0, bytes = 0;
        for (int b = 0; b < st->nbufs; b++) bytes += (double)st->bytes[b];
        if (s->local.debug >= 2) fprintf(stderr, "tact: %-24s %9.3f ms %8.2f GB/s\n", name, ms, ms > 0 ? bytes / ms * 1e-6 : 0.0);
        /* Beside a log, never in it: the time depends on the machine. */
        ta_port_note(ta_actor_port(self), "kernel %s on %s: %.3f ms, %.2f GB/s", name, ta_pipeline_uri(&s->w, s->w.self_device), ms, ms > 0 ? bytes / ms * 1e-6 : 0.0);
    }
    for (int f = 0; f < st->nfrees; f++) s_buf_drop(s, st->frees[f], 0);
    return TACT_OK;
}

/* Runs a step with a program that reads nargs argument values: a step
 * with another count would have it read past them. */
static int s_run_step(ta_actor_t *self, s_state_t *s, s_step_t *st, void *prog, const char *name, int64_t align, uint64_t nargs,
                      ta_error_t *err) {
    if (nargs != (uint64_t)st->nargs)
        return ta_error_set(err, TACT_EPROTO, "executor: program %s reads %" PRIu64 " arguments, its step gives %d", name, nargs, st->nargs);
    return s_step(self, s, st, prog, name, align, err);
}

/* The program a step's AST got (or its compile error, rc and text), for
 * later steps of that AST that name no PROGRAM. */
static int s_remember(s_state_t *s, const s_step_t *st, void *prog, const char *name, int64_t align, uint64_t nargs, int final, int rc,
                      const char *text, ta_error_t *err) {
    uint64_t i;
    if (!st->ast[0] && !st->ast[1]) return TACT_OK;
    if (!ta_map_get(&s->known_index, st->ast[0], &i)) {
        if (ta_grow((void **)&s->known, &s->known_cap, s->nknown + 1, sizeof *s->known) != TACT_OK ||
            ta_map_put(&s->known_index, st->ast[0], s->nknown) != TACT_OK)
            return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
        i = s->nknown++;
    } else if (s->known[i].ast[1] != st->ast[1]) {
        return TACT_OK; /* another AST with that first word: neither is held, both are asked for */
    }
    s_known_t *k = &s->known[i];
    k->ast[0] = st->ast[0], k->ast[1] = st->ast[1];
    k->final = final;
    k->prog = prog;
    snprintf(k->name, sizeof k->name, "%s", name);
    k->align = align;
    k->nargs = nargs;
    k->rc = rc;
    snprintf(k->text, sizeof k->text, "%s", text);
    return TACT_OK;
}

/* PROGRAM for the awaited step: loaded (always: its bytes come once), then
 * run unless the realize failed already. */
static void s_program(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    s_run_t *r = &s->run;
    s_step_t *st = &r->p->steps[r->next++];
    ta_error_t err = {0, ""};
    void *prog = NULL;
    int rc = (int)m->as.program.status;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)m->as.program.name.len, m->as.program.name.ptr ? (const char *)m->as.program.name.ptr : "");
    if (rc == TACT_OK) {
        char digest[33];
        snprintf(digest, sizeof digest, "%.*s", (int)m->as.program.digest.len, (const char *)m->as.program.digest.ptr);
        /* The object travels in every PROGRAM and is loaded once per digest. */
        rc = m->as.program.digest.len != 32 ? ta_error_set(&err, TACT_EPROTO, "executor: program %s: its digest is not 32 characters", name)
                                            : s_load(self, s, m->bulk, digest, name, &prog, &err);
    } else {
        if (rc > 0 || rc < -100) rc = TACT_ECOMPILE;
        ta_error_set(&err, rc, "%.*s", (int)m->as.program.text.len, m->as.program.text.ptr ? (const char *)m->as.program.text.ptr : "");
    }
    int64_t align = m->as.program.align >= 1 && m->as.program.align <= (1u << 30) ? (int64_t)m->as.program.align : 1;
    /* Its compiler's answer is kept for the AST: a compile error too, which
     * the steps that name no PROGRAM then report. */
    if (rc == TACT_OK) rc = s_remember(s, st, prog, name, align, m->as.program.nargs, m->as.program.final != 0, TACT_OK, "", &err);
    else if (rc == TACT_ECOMPILE) s_remember(s, st, NULL, name, align, 0, 0, rc, err.text, &(ta_error_t){0, ""});
    if (!r->failed && rc == TACT_OK) rc = s_run_step(self, s, st, prog, name, align, m->as.program.nargs, &err);
    if (rc != TACT_OK) s_fail_run(s, rc, err.text);
    s_await_next(self, s);
}

/* A step that names no PROGRAM runs the program kept for its AST. */
static void s_run_known(ta_actor_t *self, s_state_t *s, s_step_t *st) {
    ta_error_t err = {0, ""};
    uint64_t i;
    int rc;
    if (!ta_map_get(&s->known_index, st->ast[0], &i) || s->known[i].ast[1] != st->ast[1])
        rc = ta_error_set(&err, TACT_EPROTO, "executor: kernel %d: no program for its AST came (the step that asked for it was abandoned)",
                          st->index);
    else if (!s->known[i].prog)
        rc = ta_error_set(&err, s->known[i].rc, "%s", s->known[i].text);
    else
        rc = s_run_step(self, s, st, s->known[i].prog, s->known[i].name, s->known[i].align, s->known[i].nargs, &err);
    if (rc != TACT_OK) s_fail_run(s, rc, err.text);
}

/* ----------------------------------------------------------------- actor */

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    ta_stage_local(arg, &s->local);
    ta_actor_set_state(self, s); /* the device opens with CONFIG, which names it */
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    for (size_t i = 0; i < s->nbufs; i++) s->dev_ops->free(s->dev, s->bufs[i].ptr);
    ta_map_fini(&s->buf_index);
    for (size_t i = 0; i < s->ncache; i++) s->dev_ops->free(s->dev, s->cache[i].ptr);
    ta_free(s->cache);
    for (size_t i = 0; i < s->nloaded; i++) s->dev_ops->unload(s->dev, s->loaded[i].prog);
    ta_free(s->loaded);
    ta_map_fini(&s->loaded_index);
    ta_free(s->known);
    ta_map_fini(&s->known_index);
    s_plan_free(s->run.p);
    ta_free(s->bufs);
    ta_free(s->failed);
    if (s->dev) s->dev_ops->close(&s->dev);
    ta_pipeline_fini(&s->w);
    ta_free(s);
}

static void s_free_host(void *data, void *owner) {
    (void)owner;
    ta_free(data);
}

/* Puts the first len bytes of buffer b in d's bulk frame: from where they
 * are in host memory (the send copies them into the frame), else copied
 * out of the device into host memory the send frees. */
static int s_data_of(s_state_t *s, const s_buf_t *b, size_t len, ta_msg_t *d, ta_error_t *err) {
    d->bulk.len = len;
    if (s->dev_ops->host_memory) {
        d->bulk.ptr = b->ptr;
        return TACT_OK;
    }
    void *host = ta_malloc(len ? len : 1);
    int rc = host ? s->dev_ops->copy_out(s->dev, host, b->ptr, len, err) : ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    if (rc != TACT_OK) {
        ta_free(host);
        return rc;
    }
    d->bulk.ptr = host;
    d->bulk_free = s_free_host;
    return TACT_OK;
}

/* COPY_OUT: the buffer's bytes to the port that asked (everything the graph
 * sent before has run, so a buffer missing now will never come). */
static int s_copy_out(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    const ta_copy_out_msg_t *c = &m->as.copy_out;
    s_buf_t *b = s_buf(s, c->buf);
    if (!c->reply_to || c->reply_to > UINT32_MAX) return ta_actor_fail(self, TACT_EPROTO, "executor: COPY_OUT names no port");
    if (!b) {
        char text[160];
        snprintf(text, sizeof text, "executor: buffer %" PRIu64 " does not exist (the realize that computes it failed)", c->buf);
        ta_actor_send_error(self, (uint32_t)c->reply_to, m->corr, TACT_EDEVICE, "COPY_OUT", text);
        return TACT_OK;
    }
    ta_msg_t d;
    ta_msg_init(&d, TA_MSG_DATA);
    d.corr = m->corr;
    ta_error_t err;
    int rc = s_data_of(s, b, c->bytes <= b->bytes ? c->bytes : b->bytes, &d, &err);
    if (rc != TACT_OK) {
        ta_actor_send_error(self, (uint32_t)c->reply_to, m->corr, rc, "COPY_OUT", err.text);
        return TACT_OK;
    }
    if (ta_port_send(ta_actor_port(self), (uint32_t)c->reply_to, &d, &err) != TACT_OK)
        ta_actor_send_error(self, (uint32_t)c->reply_to, m->corr, err.code, "COPY_OUT", err.text); /* e.g. too big to send */
    return TACT_OK;
}

/* RUN from the graph: the plan it names is awaited here, in the graph's order. */
static int s_run(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    const ta_run_msg_t *r = &m->as.run;
    if (s->run.active) return ta_actor_fail(self, TACT_EPROTO, "executor: RUN while realize %" PRIu64 " runs", s->run.realize);
    if (!r->reply_to || r->reply_to > UINT32_MAX) return ta_actor_fail(self, TACT_EPROTO, "executor: RUN names no port to answer");
    if (r->returns.n % 3 || r->returns.n > 3 * TA_RETURNS_MAX)
        return ta_actor_fail(self, TACT_EPROTO, "executor: RUN returns %u values, not at most %d triples", r->returns.n, TA_RETURNS_MAX);
    s->run = (s_run_t){.active = 1, .realize = r->realize, .plan = r->plan, .reply_to = r->reply_to, .corr = m->corr, .final = r->final};
    ta_u64s_it_t rit;
    uint64_t rv;
    ta_u64s_begin(&rit, &r->returns);
    for (int k = 0; ta_u64s_next(&rit, &rv); k++) s->run.returns[k] = rv;
    s->run.nreturns = (int)(r->returns.n / 3);
    if (s->done_corr != m->corr) s->done_corr = m->corr, s->done_steps = 0; /* the first part of a realize */
    /* A later part of a realize that failed runs nothing; the client heard. */
    s->run.failed = s->failed_corr == m->corr;
    if (r->status) { /* the graph could not schedule it: the one answer comes from here */
        char what[64], text[300];
        snprintf(what, sizeof what, "%.*s", (int)r->what.len, r->what.ptr ? (const char *)r->what.ptr : "");
        snprintf(text, sizeof text, "%.*s", (int)r->text.len, r->text.ptr ? (const char *)r->text.ptr : "");
        s_fail_run_as(s, r->status > 0 || r->status < -100 ? TACT_EACTOR : (int)r->status, what, text);
        s_finish_run(self, s);
    } else if (!r->plan) {
        s_finish_run(self, s);
    } else {
        if (s->dev_ops->hint) s->dev_ops->hint(s->dev, 1); /* launches are coming (device.h) */
        ta_actor_await(self, r->plan, s->w.planner);
    }
    return TACT_OK;
}

/* The awaited PLAN. */
static void s_plan(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    ta_error_t err = {0, ""};
    int rc = (int)m->as.plan.status;
    if (rc != TACT_OK)
        ta_error_set(&err, rc > 0 || rc < -100 ? TACT_EPROTO : rc, "%.*s", (int)m->as.plan.text.len,
                     m->as.plan.text.ptr ? (const char *)m->as.plan.text.ptr : "");
    else
        s_parse_plan(&s->w, m, &s->run.p, &err);
    if (!s->run.p) {
        s_fail_run(s, err.code, err.text);
        s_finish_run(self, s);
        return;
    }
    s_ask(self, s);
    s_await_next(self, s);
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    ta_error_t err = {0, ""};
    if (m->type == TA_MSG_CONFIG) {
        int rc = ta_pipeline_configure(self, m, &s->w, &s->configured, TA_ROLE_EXECUTOR);
        int index;
        /* The device this executor drives: its record's local name. */
        if (rc == TACT_OK) rc = ta_device_find(s->w.device[s->w.self_device].info.name, &s->dev_ops, &index, &err);
        /* The other executors are peers: their copies are kept whenever
         * they come, and they hear this one is alive. */
        for (int d = 0; rc == TACT_OK && d < s->w.ndevices; d++)
            if (d != s->w.self_device && ta_actor_add_peer(self, s->w.device[d].executor) != TACT_OK) rc = ta_error_set(&err, TACT_ENOMEM, "out of memory");
        /* The compilers merge the executors of this process (pipeline.c). */
        int local = 0;
        for (int d = 0; d < s->w.ndevices; d++) local += !ta_rt_is_route(ta_actor_rt(self), s->w.device[d].executor);
        s->alone = local == 1;
        ta_device_options_t opt = {s->local.cpu_threads, s->local.check_bounds, s->local.cache_dir};
        if (rc == TACT_OK) rc = s->dev_ops->open(&s->dev, index, &opt, &err);
        if (rc != TACT_OK && err.code) {
            s->configured = 0;
            ta_pipeline_fini(&s->w);
            return ta_actor_fail(self, rc, "executor: %s", err.text);
        }
        return rc != TACT_OK ? rc : ta_pipeline_ack(self, m);
    }
    if (!s->configured) return ta_actor_fail(self, TACT_EINVAL, "executor: %s before CONFIG", ta_msg_type_name(m->type));
    s_run_t *run = &s->run;
    /* Replies come only when awaited (actor.h); a stage driven by hand (tests,
     * fuzzing) may offer anything, so each is checked against the await. */
    switch (m->type) {
    case TA_MSG_PLAN:
        if (!run->active || run->p || m->corr != run->plan || m->sender != s->w.planner)
            return ta_actor_fail(self, TACT_EPROTO, "executor: a PLAN nobody awaits");
        s_plan(self, s, m);
        return TACT_OK;
    case TA_MSG_PROGRAM:
        if (!run->active || !run->p || run->next >= run->p->nsteps || m->corr != run->p->steps[run->next].program ||
            run->p->steps[run->next].copy || m->sender != s_compiler_of(s, &run->p->steps[run->next]))
            return ta_actor_fail(self, TACT_EPROTO, "executor: a PROGRAM nobody awaits");
        s_program(self, s, m);
        return TACT_OK;
    case TA_MSG_DONE: /* a compiler took this run's COMPILE */
        if (!run->active || run->next_ack >= s->w.ncompilers || m->corr != run->acks[run->next_ack] ||
            m->sender != s->w.compiler[run->next_ack])
            return ta_actor_fail(self, TACT_EPROTO, "executor: a DONE nobody awaits");
        run->next_ack++;
        s_finish_run(self, s);
        return TACT_OK;
    case TA_MSG_DATA:
        if (!run->active || !run->p || run->next >= run->p->nsteps || m->corr != run->p->steps[run->next].program ||
            run->p->steps[run->next].copy != 2 || m->sender != run->p->steps[run->next].peer)
            return ta_actor_fail(self, TACT_EPROTO, "executor: a DATA nobody awaits");
        s_receive_copy(self, s, m);
        return TACT_OK;
    case TA_MSG_ERROR:
        /* A copy that failed where it came from: this realize fails too. */
        if (run->active && run->p && run->next < run->p->nsteps && run->p->steps[run->next].copy == 2 &&
            m->corr == run->p->steps[run->next].program && m->sender == run->p->steps[run->next].peer) {
            s_receive_copy(self, s, m);
            return TACT_OK;
        }
        /* A compiler that did not take the COMPILE: the realize fails. */
        if (run->active && run->next_ack < s->w.ncompilers && m->corr == run->acks[run->next_ack]) {
            char text[300];
            snprintf(text, sizeof text, "compiler: %.*s", (int)m->as.error.text.len, m->as.error.text.ptr ? (const char *)m->as.error.text.ptr : "");
            s_fail_run(s, m->as.error.code < 0 ? (int)m->as.error.code : TACT_EACTOR, text);
            run->silent |= m->as.error.code == TACT_ETIMEDOUT;
            run->next_ack++;
            s_finish_run(self, s);
            return TACT_OK;
        }
        /* An awaited reply that failed (or never came): the realize fails;
         * the rest of its plan is consumed (after a timeout, only its sends
         * are answered). */
        if (run->active && (m->corr == run->plan || (run->p && run->next < run->p->nsteps && m->corr == run->p->steps[run->next].program))) {
            char text[300];
            snprintf(text, sizeof text, "%.*s: %.*s", (int)m->as.error.what.len, m->as.error.what.ptr ? (const char *)m->as.error.what.ptr : "",
                     (int)m->as.error.text.len, m->as.error.text.ptr ? (const char *)m->as.error.text.ptr : "");
            s_fail_run(s, m->as.error.code < 0 ? (int)m->as.error.code : TACT_EACTOR, text);
            if (!run->p) {
                s_finish_run(self, s);
                return TACT_OK;
            }
            run->silent |= m->as.error.code == TACT_ETIMEDOUT;
            run->next++;
            s_await_next(self, s);
        }
        return TACT_OK;
    default: break;
    }
    if (run->active) return ta_actor_fail(self, TACT_EPROTO, "executor: %s while realize %" PRIu64 " runs", ta_msg_type_name(m->type), run->realize);
    switch (m->type) {
    case TA_MSG_RUN: return s_run(self, s, m);
    case TA_MSG_COPY_OUT: return s_copy_out(self, s, m);
    case TA_MSG_WRITE: {
        s_buf_t *b = s_buf(s, m->as.write.buf);
        if (b && b->bytes != m->bulk.len) {
            s_buf_drop(s, m->as.write.buf, 0);
            b = NULL;
        }
        if (!b && !(b = s_buf_new(s, m->as.write.buf, m->bulk.len, 0, &err))) {
            /* Remembered, so the plan that reads these bytes fails with the cause. */
            if (ta_grow((void **)&s->failed, &s->failed_cap, s->nfailed + 1, sizeof *s->failed) == TACT_OK)
                s->failed[s->nfailed++] = m->as.write.buf;
            return TACT_OK;
        }
        /* The bulk is the message's: on the device before the handler returns. */
        if (s->dev_ops->copy_in(s->dev, b->ptr, m->bulk.ptr, m->bulk.len, &err) != TACT_OK ||
            s->dev_ops->sync(s->dev, NULL, NULL, &err) != TACT_OK)
            return ta_actor_fail(self, err.code, "%s", err.text);
        return TACT_OK;
    }
    case TA_MSG_FREE: {
        ta_u64s_it_t it;
        uint64_t id;
        ta_u64s_begin(&it, &m->as.free.bufs);
        while (ta_u64s_next(&it, &id)) {
            s_buf_drop(s, id, 0);
            for (size_t f = 0; f < s->nfailed; f++)
                if (s->failed[f] == id) s->failed[f--] = s->failed[--s->nfailed];
        }
        return TACT_OK;
    }
    default: return ta_actor_fail(self, TACT_EINVAL, "executor: cannot handle %s", ta_msg_type_name(m->type));
    }
}

const ta_actor_ops_t ta_executor_ops = {"executor", s_init, s_handle, s_fini, NULL};
