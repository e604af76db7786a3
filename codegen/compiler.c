/* compiler.c - a compiler pool worker: renders kernel ASTs as C (or OpenCL C), compiles them (or finds them cached), reports the programs. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ast.h"
#include "cc.h"
#include "lower.h"
#include "map.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"
#include "printer.h"
#include "render.h"

/*
 * COMPILE(realize, reply_to, jobs) from the planner: each job (index, corr,
 * ast) becomes PROGRAM(realize, index, status, name, digest, text, align,
 * nargs) with the object's bytes, sent to reply_to (the executor) under
 * the job's corr; on failure, the error (the kernel's name and the
 * compiler's message) is in text.  The kernels of one COMPILE that are not
 * in the memo are built together, one object per vector width and build
 * tier (cc.h: a quick build first, the full one for later realizes): one run of
 * the system compiler for several kernels (its start-up is most of a small
 * kernel's time).  Several workers compile different kernels at once; the
 * executor awaits their programs in schedule order, whatever order they
 * arrive in.
 */

enum { S_MEMO = 256 };

/* A kernel this worker built or found: the digest of its AST's bytes, its
 * target, and what PROGRAM carries for it. */
typedef struct {
    char key[33];
    uint64_t tag; /* the target it was built for (s_tag) */
    char name[64];
    int64_t align;
    int nargs;
    uint8_t *obj;
    size_t len;
    char digest[33];
    uint8_t *ast; /* the AST's bytes (memo entries only) */
    size_t ast_len;
    int tier;          /* TA_CC_QUICK: built for its first use; a later realize gets the full build */
    uint64_t realize;  /* the realize it was built for */
    struct s_up *up;   /* a quick build's full one, running in the background (NULL: none) */
} s_memo_t;

/* The full build of a group of quick-built kernels (one object for all),
 * shared by their memo entries: queued, then running in the background,
 * then done. */
typedef struct s_up {
    int refs;
    enum { S_QUEUED, S_RUNNING, S_DONE } state;
    char name[64];
    char *src; /* the file, kept until the entries take the build */
    /* refs: memo entries holding it, and the batch that made it until the
     * batch's entries are kept */
    int limit_s;
    ta_cc_job_t job;
    int rc;
    uint8_t *obj;
    size_t len;
    char digest[33];
    struct s_up *next, *prev; /* in the queue */
} s_up_t;

typedef struct {
    ta_pipeline_t w;
    ta_stage_local_t local;
    int configured;
    ta_ast_t ast;
    s_memo_t *memo; /* S_MEMO entries, replaced oldest first: a kernel seen
                     * again is neither rendered nor looked up on disk */
    int nmemo, next_memo;
    ta_map_t memo_index; /* the first 64 bits of a key -> its entry */
    ta_target_t target;  /* the COMPILE's device's target (its printer says whether the device builds the source) */
    /* Full builds of quick-built kernels, oldest first: one runs at a time
     * in the background, so they take the time the pipeline leaves and
     * not the first realize's. */
    s_up_t *queue, *queue_tail, *running;
    int in_background; /* waiting for the running one: the tick leaves the queue alone */
    const char *dump_asts; /* TACT_TEST_DUMP_ASTS: a folder that gets every kernel's AST (tests: test_cuda) */
} s_state_t;

static void s_unqueue(s_state_t *s, s_up_t *up) {
    if (up->prev) up->prev->next = up->next;
    else s->queue = up->next;
    if (up->next) up->next->prev = up->prev;
    else s->queue_tail = up->prev;
    up->next = up->prev = NULL;
}

static void s_up_release(s_state_t *s, s_up_t *up) {
    if (!up || --up->refs > 0) return;
    if (up->state == S_QUEUED) s_unqueue(s, up);
    if (up->state == S_RUNNING) ta_cc_cancel(&up->job);
    if (s->running == up) s->running = NULL;
    ta_free(up->src);
    ta_free(up->obj);
    ta_free(up);
}

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "compiler: out of memory");
    ta_stage_local(arg, &s->local);
    const char *dump = getenv("TACT_TEST_DUMP_ASTS");
    s->dump_asts = dump && *dump ? dump : NULL;
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static double s_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Writes a kernel's AST bytes to the dump folder as KEY.ast, once (tests
 * render every kernel of a suite for another target from these). */
static void s_dump_ast(const char *dir, const char *key, ta_bytes_t ast) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.ast", dir, key) >= (int)sizeof path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return;
    ssize_t w = write(fd, ast.ptr, ast.len);
    close(fd);
    if (w != (ssize_t)ast.len) unlink(path);
}

/* A kept object is counted: every PROGRAM that carries it holds it until
 * the transport is done with its bytes (no copy per PROGRAM), and so does
 * the memo. */
typedef struct {
    atomic_int refs;
    size_t len;
    _Alignas(16) uint8_t bytes[];
} s_obj_t;

static s_obj_t *s_obj_of(const void *bytes) { return (s_obj_t *)((uint8_t *)(uintptr_t)bytes - offsetof(s_obj_t, bytes)); }

static void s_obj_release(void *bytes, void *owner) {
    (void)owner;
    s_obj_t *o = s_obj_of(bytes);
    if (atomic_fetch_sub(&o->refs, 1) == 1) ta_free(o);
}

static void s_fini(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    for (int i = 0; s->memo && i < S_MEMO; i++)
        if (s->memo[i].obj) s_obj_release(s->memo[i].obj, NULL), ta_free(s->memo[i].ast), s_up_release(s, s->memo[i].up);
    ta_free(s->memo);
    ta_map_fini(&s->memo_index);
    ta_pipeline_fini(&s->w);
    ta_free(s);
}

/* A target as one number: the same AST is another program for another
 * language, vector width or fma. */
static uint64_t s_tag(const ta_target_t *t) {
    uint64_t h = 0;
    for (const char *c = t->printer ? t->printer->language : ""; *c; c++) h = h * 131 + (uint8_t)*c;
    for (const char *c = t->flags ? t->flags : ""; *c; c++) h = h * 131 + (uint8_t)*c;
    return h ^ (uint64_t)t->vector_bytes << 40 ^ (uint64_t)(t->fma != 0) << 60 ^ (uint64_t)t->max_group << 20 ^ (uint64_t)t->local_memory;
}

/* The memo's index of a key's entry for a target: the key's first 64 bits
 * (of its 32 hex digits) mixed with the target's tag. */
static uint64_t s_key64(const char *key, uint64_t tag) {
    uint64_t v = 0;
    for (int i = 0; i < 16 && key[i]; i++) v = v << 4 | (uint64_t)(key[i] <= '9' ? key[i] - '0' : key[i] - 'a' + 10);
    return v ^ tag * 0x9E3779B97F4A7C15ULL;
}

/* The entry of a kernel by its AST's bytes: found by their digest, and
 * taken only if the bytes are the same (a digest can be made to collide). */
static s_memo_t *s_memo_find(s_state_t *s, const char *key, ta_bytes_t ast) {
    uint64_t i;
    uint64_t tag = s_tag(&s->target);
    if (ta_map_get(&s->memo_index, s_key64(key, tag), &i) && strcmp(s->memo[i].key, key) == 0 && s->memo[i].tag == tag &&
        s->memo[i].ast_len == ast.len &&
        memcmp(s->memo[i].ast, ast.ptr, ast.len) == 0)
        return &s->memo[i];
    return NULL;
}

/* Keeps a built kernel (its object copied into a counted one, its AST's
 * bytes copied; e->obj stays the caller's), replacing the oldest entry
 * when full. */
static void s_memo_add(s_state_t *s, const s_memo_t *e, ta_bytes_t ast) {
    if (!s->memo && !(s->memo = ta_calloc(S_MEMO, sizeof *s->memo))) return;
    s_obj_t *o = ta_malloc(sizeof *o + e->len);
    uint8_t *ast_copy = ta_malloc(ast.len ? ast.len : 1);
    if (!o || !ast_copy) {
        ta_free(o), ta_free(ast_copy);
        return;
    }
    memcpy(ast_copy, ast.ptr, ast.len);
    atomic_init(&o->refs, 1);
    o->len = e->len;
    memcpy(o->bytes, e->obj, e->len);
    s_memo_t *slot = &s->memo[s->next_memo];
    if (slot->obj) { /* the oldest entry goes; its slot stays empty if the new one cannot be kept */
        ta_map_del(&s->memo_index, s_key64(slot->key, slot->tag));
        s_obj_release(slot->obj, NULL);
        ta_free(slot->ast);
        s_up_release(s, slot->up);
        memset(slot, 0, sizeof *slot);
        s->nmemo--;
    }
    if (ta_map_put(&s->memo_index, s_key64(e->key, s_tag(&s->target)), (uint64_t)s->next_memo) != TACT_OK) {
        s_obj_release(o->bytes, NULL);
        ta_free(ast_copy);
        return;
    }
    *slot = *e;
    slot->tag = s_tag(&s->target);
    slot->obj = o->bytes;
    slot->ast = ast_copy;
    slot->ast_len = ast.len;
    if (slot->up) slot->up->refs++;
    s->next_memo = (s->next_memo + 1) % S_MEMO;
    s->nmemo++;
}

/* While the system compiler runs: a heartbeat to whoever waits for the
 * program (the executor, and the client waiting for the realize) every
 * quarter of the timeout, and the answer to "stop?". */
typedef struct {
    ta_actor_t *self;
    uint32_t reply_to, client;
    uint64_t corr;
    struct timespec last;
} s_tick_t;


/* One kernel of a COMPILE: its request, what PROGRAM will carry, and, while
 * its batch is built, its source. */
typedef struct {
    uint64_t index, corr;
    int rc;
    ta_error_t err;
    s_memo_t e;    /* e.obj is owned here only while the batch is built */
    int same_as;   /* -1, or an earlier job of the batch with the same kernel */
    char *src;     /* rendered, until built */
    int width;     /* its vector width (1: none): one file per width */
    int tier;      /* TA_CC_QUICK or TA_CC_FULL: one file per tier */
    int owns_up;   /* e.up was queued for this job's file (the first of its group) */
    int built;     /* e holds this job's answer */
    ta_bytes_t ast;
    int answered;
} s_job_t;

/* True when a kernel of the group other than j is named name (those
 * before j have their final names). */
static int s_taken(const s_job_t *jobs, int j, const int *group, int ng, const char *name) {
    for (int g = 0; g < ng; g++)
        if (group[g] != j && strcmp(jobs[group[g]].e.name, name) == 0) return 1;
    return 0;
}

/* Makes the function of job j unique in its file: a second E_16 is E_16_1. */
static int s_rename(s_job_t *jobs, int j, const int *group, int ng, ta_error_t *err) {
    int clash = 0;
    for (int g = 0; g < ng && group[g] != j; g++) clash |= strcmp(jobs[group[g]].e.name, jobs[j].e.name) == 0;
    if (!clash) return TACT_OK;
    char old[80], sym[64];
    snprintf(old, sizeof old, " void %s(", jobs[j].e.name); /* OpenCL's "__kernel void NAME(" */
    if (!strstr(jobs[j].src, old)) snprintf(old, sizeof old, "\nvoid %s(", jobs[j].e.name);
    for (int k = 1;; k++) { /* the first suffix no kernel of the file has */
        snprintf(sym, sizeof sym, "%.50s_%d", jobs[j].e.name, k);
        if (!s_taken(jobs, j, group, ng, sym)) break;
    }
    char *at = strstr(jobs[j].src, old);
    size_t len = strlen(jobs[j].src), grow = strlen(sym) - strlen(jobs[j].e.name);
    char *src = at ? ta_malloc(len + grow + 1) : NULL;
    if (!src) return ta_error_set(err, at ? TACT_ENOMEM : TACT_EINVAL, "compiler: kernel %s: cannot rename its function", jobs[j].e.name);
    size_t head = (size_t)(at - jobs[j].src) + 6; /* through "\nvoid " or " void " */
    memcpy(src, jobs[j].src, head);
    memcpy(src + head, sym, strlen(sym));
    strcpy(src + head + strlen(sym), at + strlen(old) - 1);
    ta_free(jobs[j].src);
    jobs[j].src = src;
    snprintf(jobs[j].e.name, sizeof jobs[j].e.name, "%s", sym);
    return TACT_OK;
}

static int s_tick(void *ud);

/* Waits for a started full build (tick: heartbeats while it does; NULL
 * when it is ready and will not wait). */
static void s_up_wait(s_state_t *s, s_up_t *up, s_tick_t *tick) {
    ta_program_t prog;
    ta_error_t err = {0, ""};
    if (tick) ta_cc_restart_clock(&up->job); /* its time limit counts from now: it ran niced until now */
    s->in_background = 1;
    up->rc = ta_cc_finish(&up->job, &prog, &up->obj, &up->len, up->digest, up->limit_s, tick ? s_tick : NULL, tick, &err);
    s->in_background = 0;
    up->state = S_DONE;
    if (s->running == up) s->running = NULL;
}

/* Collects the running full build if it finished and starts the next
 * queued one, at the lowest CPU priority.  Called between messages and
 * while a compile of this worker runs; when it runs does not change which
 * build any PROGRAM carries. */
static void s_background(s_state_t *s) {
    if (s->in_background) return;
    if (s->running && ta_cc_ready(&s->running->job)) s_up_wait(s, s->running, NULL);
    if (s->running && ta_cc_elapsed_s(&s->running->job) > s->running->limit_s) { /* hung: it is built again if a realize needs it */
        ta_cc_cancel(&s->running->job);
        s->running->rc = TACT_ECOMPILE;
        s->running->state = S_DONE;
        s->running = NULL;
    }
    while (!s->running && s->queue) {
        s_up_t *up = s->queue;
        s_unqueue(s, up);
        ta_error_t err = {0, ""};
        up->rc = ta_cc_start(s->w.cc, s->local.cache_dir, up->name, up->src, TA_CC_FULL, 1, &up->job, &err);
        up->state = up->rc == TACT_OK ? S_RUNNING : S_DONE;
        if (up->rc == TACT_OK) s->running = up;
    }
}

static int s_tick(void *ud) {
    s_tick_t *t = ud;
    if (ta_actor_stopping(t->self)) return 1;
    s_background(ta_actor_state(t->self));
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t->last.tv_sec) * 1e3 + (double)(now.tv_nsec - t->last.tv_nsec) * 1e-6;
    if (ms * 4 >= ta_actor_timeout_ms(t->self)) {
        ta_actor_progress(t->self, t->reply_to, t->corr);
        ta_actor_progress(t->self, t->client, 0);
        t->last = now;
    }
    return 0;
}

/* Queues the full build of src (quick-built kernels); NULL when out of
 * memory (the kernels keep their quick build). */
static s_up_t *s_up_queue(s_state_t *s, const char *name, const char *src, int limit_s) {
    s_up_t *up = ta_calloc(1, sizeof *up);
    size_t n = strlen(src) + 1;
    if (up && (up->src = ta_malloc(n))) {
        memcpy(up->src, src, n);
        up->refs = 1; /* the batch's, until its entries are kept */
        snprintf(up->name, sizeof up->name, "%s", name);
        up->limit_s = limit_s;
        up->state = S_QUEUED;
        up->prev = s->queue_tail;
        if (s->queue_tail) s->queue_tail->next = up;
        else s->queue = up;
        s->queue_tail = up;
        return up;
    }
    ta_free(up);
    return NULL;
}

/*
 * The memo's entry for job, if any.  A quick build serves the realize it
 * was made for; a later realize gets the full build: taken if done,
 * waited for if running, built now (at normal priority) if still queued.
 * Which build a PROGRAM carries thus depends on the order of the COMPILEs
 * alone, never on timing, and both compute the same bits.  A full build
 * that failed leaves the quick one in place.
 */
static s_memo_t *s_hit(s_state_t *s, const s_job_t *job, uint64_t realize, s_tick_t *tick) {
    s_memo_t *e = s_memo_find(s, job->e.key, job->ast);
    if (!e || e->tier != TA_CC_QUICK || e->realize == realize) return e;
    s_up_t *up = e->up;
    e->tier = TA_CC_FULL;
    e->up = NULL;
    if (!up) return e;
    if (up->state == S_QUEUED) { /* never started: built below */
        s_unqueue(s, up);
        up->state = S_DONE;
        up->rc = TACT_ENOTFOUND;
    }
    if (up->state == S_RUNNING) s_up_wait(s, up, tick);
    if (up->rc != TACT_OK && up->rc != TACT_ESTOPPED) {
        /* Not started yet, or failed in the background for whatever
         * reason (out of time at the lowest priority, a full disk): built
         * now, so the answer does not depend on the background. */
        ta_program_t prog;
        ta_error_t err = {0, ""};
        ta_free(up->obj);
        up->obj = NULL;
        up->rc = ta_cc_build(s->w.cc, s->local.cache_dir, up->name, up->src, TA_CC_FULL, &prog, &up->obj, &up->len, up->digest,
                             up->limit_s, s_tick, tick, &err);
    }
    s_obj_t *o = up->rc == TACT_OK ? ta_malloc(sizeof *o + up->len) : NULL;
    if (o) {
        atomic_init(&o->refs, 1);
        o->len = up->len;
        memcpy(o->bytes, up->obj, up->len);
        s_obj_release(e->obj, NULL);
        e->obj = o->bytes;
        e->len = up->len;
        memcpy(e->digest, up->digest, sizeof e->digest);
    }
    s_up_release(s, up);
    return e;
}

/* Builds the jobs in group (sources of one vector width) as one object, or
 * finds it in the disk cache; every job of the group gets a copy.  When the
 * file does not build, each job is built alone, so each error names its
 * own kernel. */
static void s_build_group(s_state_t *s, s_job_t *jobs, const int *group, int ng, s_tick_t *tick) {
    ta_error_t err = {0, ""};
    int rc = TACT_OK;
    for (int g = 0; g < ng && rc == TACT_OK; g++) rc = s_rename(jobs, group[g], group, ng, &err);
    size_t len = 1;
    for (int g = 0; g < ng; g++) len += strlen(jobs[group[g]].src);
    char *src = rc == TACT_OK ? ta_malloc(len) : NULL;
    if (rc == TACT_OK && !src) rc = ta_error_set(&err, TACT_ENOMEM, "compiler: out of memory");
    if (src) {
        src[0] = '\0';
        for (int g = 0, at = 0; g < ng; g++) {
            strcpy(src + at, jobs[group[g]].src);
            at += (int)strlen(jobs[group[g]].src);
        }
    }
    s_job_t *first = &jobs[group[0]];
    ta_program_t prog;
    memset(&prog, 0, sizeof prog);
    if (rc == TACT_OK && s->target.printer->build) { /* the language's own compiler, here (CUDA: NVRTC) */
        const char *pre = s->target.printer->prelude;
        char *all = ta_malloc(strlen(pre) + strlen(src) + 1);
        if (!all) rc = ta_error_set(&err, TACT_ENOMEM, "compiler: out of memory");
        else {
            strcpy(all, pre);
            strcat(all, src);
            double t0 = s_now_ms();
            rc = s->target.printer->build(all, first->e.name, &s->target, s->local.cache_dir, &first->e.obj, &first->e.len, &prog.cached, &err);
            prog.compile_ms = s_now_ms() - t0;
            if (rc == TACT_OK) ta_cc_digest(first->e.obj, first->e.len, first->e.digest);
            ta_free(all);
        }
    } else if (rc == TACT_OK && s->target.printer->device_builds) { /* the source is the program: the device builds it */
        const char *pre = s->target.printer->prelude;
        size_t pl = strlen(pre), sl = strlen(src);
        if (!(first->e.obj = ta_malloc(pl + sl))) rc = ta_error_set(&err, TACT_ENOMEM, "compiler: out of memory");
        if (rc == TACT_OK) {
            memcpy(first->e.obj, pre, pl);
            memcpy(first->e.obj + pl, src, sl);
            first->e.len = pl + sl;
            ta_cc_digest(first->e.obj, first->e.len, first->e.digest);
        }
    } else if (rc == TACT_OK) {
        rc = ta_cc_build(s->w.cc, s->local.cache_dir, first->e.name, src, first->tier, &prog, &first->e.obj, &first->e.len,
                         first->e.digest, s->local.compile_limit_s * ng, s_tick, tick, &err);
        first->e.tier = first->tier;
        /* The full build starts now, in the background: by the next
         * realize that uses these kernels it has had time to finish. */
        if (rc == TACT_OK && first->tier == TA_CC_QUICK) {
            first->e.up = s_up_queue(s, first->e.name, src, s->local.compile_limit_s * ng);
            first->owns_up = first->e.up != NULL;
        }
    }
    ta_free(src);
    if (rc == TACT_OK && s->local.debug >= 2 && !prog.cached && !s->target.printer->device_builds) {
        fprintf(stderr, "tact: compiled %s", first->e.name);
        for (int g = 1; g < ng; g++) fprintf(stderr, ", %s", jobs[group[g]].e.name);
        fprintf(stderr, " in %.1f ms\n", prog.compile_ms);
    }
    if (rc == TACT_OK && !prog.cached) ta_actor_count(tick->self, TA_STAT_JOBS, (uint64_t)ng); /* tact_stats.compiles */
    if (rc != TACT_OK && ng > 1 && rc != TACT_ESTOPPED) {
        for (int g = 0; g < ng; g++) s_build_group(s, jobs, &group[g], 1, tick);
        return;
    }
    first->rc = rc;
    first->err = err;
    first->built = 1;
    for (int g = 1; g < ng; g++) {
        s_job_t *j = &jobs[group[g]];
        j->rc = rc;
        j->err = err;
        j->built = 1;
        if (rc != TACT_OK) continue;
        j->e.tier = first->e.tier;
        j->e.up = first->e.up;
        j->e.len = first->e.len;
        memcpy(j->e.digest, first->e.digest, sizeof j->e.digest);
        if (!(j->e.obj = ta_malloc(first->e.len))) j->rc = ta_error_set(&j->err, TACT_ENOMEM, "compiler: out of memory");
        else memcpy(j->e.obj, first->e.obj, first->e.len);
    }
}

/* Finds job j's kernel in the memo or earlier in the batch (by the digest
 * of its AST's bytes: a kernel seen again is not even decoded), or decodes
 * and renders it. */
static void s_prepare(s_state_t *s, s_job_t *jobs, int j) {
    s_job_t *job = &jobs[j];
    const ta_bytes_t ast = job->ast;
    ta_cc_digest(ast.ptr, ast.len, job->e.key);
    if (s_memo_find(s, job->e.key, ast)) return;
    for (int k = 0; k < j; k++)
        if (jobs[k].same_as < 0 && jobs[k].rc == TACT_OK && jobs[k].ast.len == ast.len && memcmp(jobs[k].ast.ptr, ast.ptr, ast.len) == 0) {
            job->same_as = k;
            return;
        }
    ta_mpr_t r;
    ta_mpr_init(&r, ast.ptr, ast.len);
    job->rc = ta_ast_unpack(&s->ast, &r, &job->err);
    if (job->rc != TACT_OK) return;
    if (s->dump_asts) s_dump_ast(s->dump_asts, job->e.key, ast);
    job->e.nargs = s->ast.nargs;
    job->tier = !s->target.printer->device_builds && !s->target.printer->build && ta_ast_work(&s->ast) < TA_CC_QUICK_MAX_WORK ? TA_CC_QUICK : TA_CC_FULL;
    ta_target_t target = s->target;
    job->rc = ta_render_c_for(&s->ast, &target, &job->src, job->e.name, sizeof job->e.name, &job->e.align, &job->width, &job->err);
    if (job->rc == TACT_OK && s->local.debug >= 4) fprintf(stderr, "%s\n", job->src);
}

/* Sends job's PROGRAM: its memo entry's (or its failure). */
static void s_answer(ta_actor_t *self, const s_job_t *job, const s_memo_t *hit, uint32_t dest, uint64_t realize) {
    ta_msg_t out;
    ta_msg_init(&out, TA_MSG_PROGRAM);
    out.corr = job->corr;
    out.as.program.realize = realize;
    out.as.program.index = job->index;
    out.as.program.status = hit ? TACT_OK : job->rc;
    out.as.program.name = ta_bytes_str(hit ? hit->name : job->e.name);
    out.as.program.digest = ta_bytes_str(hit ? hit->digest : "");
    out.as.program.text = ta_bytes_str(hit ? "" : job->err.text);
    out.as.program.align = (uint64_t)(hit ? hit->align : job->e.align);
    out.as.program.nargs = hit ? (uint64_t)hit->nargs : 0;
    /* Final: the build this compiler gives for the kernel from now on (a
     * quick one is replaced by the full one in a later realize); a failure
     * is not, the executor asks again in a later realize. */
    out.as.program.final = hit && hit->tier == TA_CC_FULL;
    if (hit) { /* the memo's bytes, held until the transport is done with them */
        out.bulk.ptr = hit->obj;
        out.bulk.len = hit->len;
        out.bulk_free = s_obj_release;
        atomic_fetch_add(&s_obj_of(hit->obj)->refs, 1);
    }
    int src = ta_actor_send(self, dest, &out);
    if (src != TACT_OK && src != TACT_ENOTFOUND) {
        /* The executor awaits an answer: the failure, without the bytes. */
        char text[300];
        snprintf(text, sizeof text, "kernel %s: its program could not be sent: %s", hit ? hit->name : job->e.name, tact_strerror(src));
        out.as.program.status = src;
        out.as.program.digest = ta_bytes_str("");
        out.as.program.text = ta_bytes_str(text);
        out.bulk.ptr = NULL;
        out.bulk.len = 0;
        ta_actor_send(self, dest, &out);
    }
}

enum { S_BATCH = 16 }; /* kernels built together at most (the planner sends no more) */

/* Builds and answers a batch of jobs: memo hits as they are, the rest
 * rendered and built in one object per vector width and tier. */
static void s_batch(ta_actor_t *self, s_state_t *s, const ta_msg_t *m, s_job_t *jobs, int n) {
    s_tick_t tick = {self, (uint32_t)m->as.compile.reply_to, s->w.client, jobs[0].corr, {0, 0}};
    clock_gettime(CLOCK_MONOTONIC, &tick.last);
    for (int j = 0; j < n; j++) s_prepare(s, jobs, j);
    /* Kernels known already go out before anything is built (the executor
     * may be waiting for one), and before new entries replace old ones. */
    uint32_t dest = (uint32_t)m->as.compile.reply_to;
    uint64_t realize = m->as.compile.realize;
    for (int j = 0; j < n; j++)
        if (jobs[j].rc == TACT_OK && !jobs[j].src && jobs[j].same_as < 0) {
            s_answer(self, &jobs[j], s_hit(s, &jobs[j], realize, &tick), dest, realize);
            jobs[j].answered = 1;
        }
    int group[S_BATCH];
    for (int j = 0; j < n; j++) {
        if (!jobs[j].src || jobs[j].built) continue;
        /* Scalar kernels go with the first vector width left of their
         * tier, if any. */
        int w = jobs[j].width, t = jobs[j].tier, ng = 0;
        for (int k = j; k < n && w == 1; k++)
            if (jobs[k].src && !jobs[k].built && jobs[k].tier == t) w = jobs[k].width;
        for (int k = j; k < n; k++)
            if (jobs[k].src && !jobs[k].built && jobs[k].tier == t && (jobs[k].width == w || jobs[k].width == 1)) group[ng++] = k;
        s_build_group(s, jobs, group, ng, &tick);
    }
    for (int j = 0; j < n; j++) {
        jobs[j].e.realize = realize;
        if (jobs[j].rc == TACT_OK && jobs[j].built) s_memo_add(s, &jobs[j].e, jobs[j].ast);
    }
    /* The batch lets its full builds go: one no entry took (out of
     * memory) stops. */
    for (int j = 0; j < n; j++)
        if (jobs[j].owns_up) s_up_release(s, jobs[j].e.up);
    for (int j = 0; j < n; j++) {
        s_job_t *job = &jobs[j];
        if (!job->answered) {
            if (job->rc == TACT_OK && job->same_as >= 0 && jobs[job->same_as].rc != TACT_OK) {
                job->rc = jobs[job->same_as].rc;
                job->err = jobs[job->same_as].err;
            }
            const s_memo_t *hit = job->rc == TACT_OK ? s_memo_find(s, job->e.key, job->ast) : NULL;
            if (job->rc == TACT_OK && !hit) job->rc = ta_error_set(&job->err, TACT_ENOMEM, "compiler: out of memory keeping kernel %s", job->e.name);
            s_answer(self, job, hit, dest, m->as.compile.realize);
        }
        ta_free(job->e.obj);
        ta_free(job->src);
    }
}

/* The COMPILE was taken (every job answered): the executor awaits this
 * before it answers its client, so nothing it sent is left unprocessed. */
static int s_ack(ta_actor_t *self, const ta_msg_t *m) {
    ta_msg_t d;
    ta_msg_init(&d, TA_MSG_DONE);
    d.corr = m->corr;
    ta_actor_send(self, m->sender, &d);
    return TACT_OK;
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type == TA_MSG_CONFIG) {
        int rc = ta_pipeline_configure(self, m, &s->w, &s->configured, TA_ROLE_COMPILER);
        return rc != TACT_OK ? rc : ta_pipeline_ack(self, m);
    }
    if (m->type != TA_MSG_COMPILE || !s->configured)
        return ta_actor_fail(self, TACT_EINVAL, "compiler: cannot handle %s%s", ta_msg_type_name(m->type), s->configured ? "" : " before CONFIG");
    /* An executor asks for the programs it lacks, for itself: they are
     * built for its device.  Every executor sends one COMPILE per realize
     * part to every compiler (most of them empty), so the merge of the
     * executors' streams always moves on. */
    int device = m->as.compile.reply_to <= UINT32_MAX ? ta_pipeline_device_of(&s->w, (uint32_t)m->as.compile.reply_to) : -1;
    if (device < 0 || m->as.compile.reply_to != m->sender)
        return ta_actor_fail(self, TACT_EPROTO, "compiler: a COMPILE from port %u for port %" PRIu64 ": an executor asks for itself", m->sender,
                             m->as.compile.reply_to);
    if (!m->as.compile.jobs.n) return s_ack(self, m);
    /* What to build: the device's target (its DEVICE record). */
    const ta_device_info_t *info = &s->w.device[device].info;
    s->target = ta_target_of(info->language, info->vector_bytes, info->fma, info->max_group, (int64_t)info->local_memory, info->flags);
    s->target.exact_math = s->w.strict;
    if (!s->target.printer)
        return ta_actor_fail(self, TACT_ECOMPILE, "compiler: no printer for %s's language '%s' (this build speaks C, OpenCL C and CUDA)",
                             s->w.device[device].uri, info->language);
    s_background(s);
    /* Built in one run of the system compiler a batch at a time (its
     * start-up costs more than a small kernel): 4, then 8, then at most
     * 16, so the executor starts on the first while the rest build.  The
     * batches depend on the COMPILE alone, so the objects, which travel
     * in PROGRAMs and the log, are the same in every run. */
    s_job_t jobs[S_BATCH];
    ta_recs_it_t it;
    ta_job_rec_t rec;
    ta_recs_begin(&it, &m->as.compile.jobs);
    int n = 0, cap = 4;
    for (;;) {
        int more = ta_recs_next(&it, &rec);
        if (more) {
            memset(&jobs[n], 0, sizeof jobs[n]);
            jobs[n].index = rec.index;
            jobs[n].corr = rec.corr;
            jobs[n].same_as = -1;
            snprintf(jobs[n].e.name, sizeof jobs[n].e.name, "?");
            jobs[n].e.align = 1;
            jobs[n++].ast = rec.ast;
        }
        if (n && (n == cap || !more)) {
            s_batch(self, s, m, jobs, n);
            n = 0;
            cap = cap * 2 < S_BATCH ? cap * 2 : S_BATCH;
        }
        if (!more) break;
    }
    return s_ack(self, m); /* an error goes to the executor in its PROGRAM */
}

/* With no COMPILE coming, full builds still finish, go to the disk cache
 * and make way for the next: every 20 ms while one is queued or running. */
static int s_idle(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    s_background(s);
    return s->running || s->queue ? 20 : -1;
}

const ta_actor_ops_t ta_compiler_ops = {"compiler", s_init, s_handle, s_fini, s_idle};
