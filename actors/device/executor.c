/* executor.c - a device executor actor: buffers, programs and plans, run as their inputs become ready (dataflow). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "dtype.h"
#include "map.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"

/*
 * Messages: WRITE, COPY_OUT and FREE from the graph builder; PLAN and
 * PROGRAM from the planner.  They come from different
 * senders in any order, so nothing here assumes one: a plan step runs when
 * its program has arrived and every input buffer exists (inputs the client
 * writes are waited for; others, like tact_empty's, are zero-filled), and a
 * copy-out waits until its buffer has been computed.  Plans run one after
 * another, in arrival order, each step in schedule order.
 */

typedef struct {
    uint64_t id;
    void *ptr;
    uint64_t bytes;
} s_buf_t;

typedef struct {
    uint64_t realize, index;
    int status;
    char text[512];
    int64_t align; /* launch ranges are multiples of this */
    ta_program_t prog;
} s_prog_t;

typedef struct {
    int index, nbufs, nfrees;
    uint64_t bufs[TA_AST_MAX_BUFS], bytes[TA_AST_MAX_BUFS], reuse;
    uint8_t writes[TA_AST_MAX_BUFS];
    int64_t numel;
    uint64_t *frees;
} s_step_t;

typedef struct s_plan {
    struct s_plan *next;
    uint64_t realize, reply_to, corr;
    int nsteps, done;
    s_step_t *steps;
    uint64_t planned_peak, unplanned; /* the planner's figures, passed on in DONE */
} s_plan_t;

typedef struct s_copy {
    struct s_copy *next;
    uint64_t buf, bytes, reply_to, corr;
} s_copy_t;

typedef struct {
    ta_pipeline_t *w;
    const ta_device_ops_t *dev_ops;
    ta_device_t *dev;
    s_buf_t *bufs;
    size_t nbufs, bufs_cap;
    ta_map_t buf_index; /* buffer id -> index in bufs */
    s_prog_t *progs;
    size_t nprogs, progs_cap;
    s_plan_t *plans, *plans_tail;
    s_copy_t *copies;
    uint64_t from_graph; /* messages processed from the graph builder */
    uint64_t last_plan;  /* realize of the newest plan taken */
    uint64_t *failed;    /* buffers whose WRITE failed: plans reading them fail */
    size_t nfailed, failed_cap;
    ta_program_t *loaded; /* every object loaded so far, by path: loaded once */
    size_t nloaded, loaded_cap;
    s_buf_t *cache;      /* freed allocations kept for reuse (see s_alloc) */
    size_t ncache, cache_cap;
    uint64_t cached_bytes;
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
    if (zero) memset(ptr, 0, bytes);
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

static s_prog_t *s_prog(s_state_t *s, uint64_t realize, uint64_t index) {
    for (size_t i = 0; i < s->nprogs; i++)
        if (s->progs[i].realize == realize && s->progs[i].index == index) return &s->progs[i];
    return NULL;
}

/* Forgets a realize's programs; their objects stay loaded for the next
 * realize that runs the same kernels. */
static void s_drop_programs(s_state_t *s, uint64_t realize) {
    for (size_t i = 0; i < s->nprogs;) {
        if (s->progs[i].realize == realize) s->progs[i] = s->progs[--s->nprogs];
        else i++;
    }
}

/* Loads an object once per digest, and returns the loaded program. */
static int s_load(s_state_t *s, const ta_bytes_t obj, const char *digest, const char *name, ta_program_t *out, ta_error_t *err) {
    for (size_t i = 0; i < s->nloaded; i++)
        if (strcmp(s->loaded[i].key, digest) == 0 && strcmp(s->loaded[i].name, name) == 0) {
            *out = s->loaded[i];
            return TACT_OK;
        }
    if (!obj.len) return ta_error_set(err, TACT_EPROTO, "executor: program %s: digest %s names no object this executor was sent", name, digest);
    int rc = s->dev_ops->load(s->dev, obj.ptr, obj.len, name, out, err);
    if (rc != TACT_OK) return rc;
    snprintf(out->key, sizeof out->key, "%s", digest);
    if (ta_grow((void **)&s->loaded, &s->loaded_cap, s->nloaded + 1, sizeof *s->loaded) != TACT_OK) {
        s->dev_ops->unload(s->dev, out);
        return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    }
    s->loaded[s->nloaded++] = *out;
    return TACT_OK;
}

/* ------------------------------------------------------------------ plans */

static void s_plan_free(s_plan_t *p) {
    for (int i = 0; i < p->nsteps; i++) ta_free(p->steps[i].frees);
    ta_free(p->steps);
    ta_free(p);
}

static int s_parse_plan(const ta_msg_t *m, s_plan_t **out, ta_error_t *err) {
    ta_mpr_t r;
    uint32_t n, k;
    uint64_t v;
    ta_mpr_init(&r, m->as.plan.steps.ptr, m->as.plan.steps.len);
    if (ta_mpr_array(&r, &n) || n > m->as.plan.steps.len) return ta_error_set(err, TACT_EPROTO, "executor: malformed plan");
    s_plan_t *p = ta_calloc(1, sizeof *p);
    if (!p || !(p->steps = ta_calloc(n ? n : 1, sizeof *p->steps))) {
        ta_free(p);
        return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    }
    p->nsteps = (int)n;
    p->realize = m->as.plan.realize;
    p->reply_to = m->as.plan.reply_to;
    p->corr = m->corr;
    p->planned_peak = m->as.plan.planned_peak;
    p->unplanned = m->as.plan.unplanned;
    for (uint32_t i = 0; i < n; i++) {
        s_step_t *st = &p->steps[i];
        int ok = ta_mpr_array(&r, &k) == 0 && k == 7 && ta_mpr_u64(&r, &v) == 0;
        st->index = (int)v;
        ok = ok && ta_mpr_array(&r, &k) == 0 && k >= 1 && k <= TA_AST_MAX_BUFS;
        st->nbufs = (int)k;
        for (int b = 0; ok && b < st->nbufs; b++) ok = ta_mpr_u64(&r, &st->bufs[b]) == 0;
        ok = ok && ta_mpr_i64(&r, &st->numel) == 0 && ta_mpr_array(&r, &k) == 0 && (int)k == st->nbufs;
        for (int b = 0; ok && b < st->nbufs; b++) ok = ta_mpr_u64(&r, &st->bytes[b]) == 0;
        ok = ok && ta_mpr_array(&r, &k) == 0 && (int)k == st->nbufs;
        for (int b = 0; ok && b < st->nbufs; b++) {
            ok = ta_mpr_u64(&r, &v) == 0;
            st->writes[b] = (uint8_t)(v != 0);
        }
        ok = ok && ta_mpr_u64(&r, &st->reuse) == 0 && ta_mpr_array(&r, &k) == 0 && k <= m->as.plan.steps.len;
        if (ok && k && !(st->frees = ta_calloc(k, sizeof *st->frees))) {
            s_plan_free(p);
            return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
        }
        st->nfrees = ok ? (int)k : 0;
        for (int f = 0; ok && f < st->nfrees; f++) ok = ta_mpr_u64(&r, &st->frees[f]) == 0;
        if (!ok) {
            s_plan_free(p);
            return ta_error_set(err, TACT_EPROTO, "executor: byte %zu: malformed plan step %u", ta_mpr_offset(&r), i);
        }
    }
    *out = p;
    return TACT_OK;
}

static double s_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Tells the plan's requester that it failed, and drops it. */
static void s_fail_plan(ta_actor_t *self, s_state_t *s, s_plan_t *p, int code, const char *text) {
    ta_actor_send_error(self, (uint32_t)p->reply_to, p->corr, code, "PLAN", text);
    s_drop_programs(s, p->realize);
}

/* Runs one step if it can; returns 1 if it ran, 0 if it must wait, -1 on failure. */
static int s_step(ta_actor_t *self, s_state_t *s, s_plan_t *p, s_step_t *st) {
    ta_error_t err = {0, ""};
    s_prog_t *pr = s_prog(s, p->realize, (uint64_t)st->index);
    if (!pr) return 0;
    if (pr->status != TACT_OK) {
        s_fail_plan(self, s, p, pr->status, pr->text);
        return -1;
    }
    for (int b = 1; b < st->nbufs; b++) {
        s_buf_t *in = s_buf(s, st->bufs[b]);
        if (!in) {
            for (size_t f = 0; f < s->nfailed; f++)
                if (s->failed[f] == st->bufs[b]) {
                    ta_error_set(&err, TACT_ENOMEM, "executor: the bytes of buffer %llu could not be stored",
                                 (unsigned long long)st->bufs[b]);
                    goto fail;
                }
            if (st->writes[b]) return 0; /* its bytes are still on their way */
            if (!s_buf_new(s, st->bufs[b], st->bytes[b], 1, &err)) goto fail;
        } else if (in->bytes < st->bytes[b]) {
            ta_error_set(&err, TACT_EPROTO, "executor: buffer %llu holds %llu bytes, kernel %s reads %llu",
                         (unsigned long long)in->id, (unsigned long long)in->bytes, pr->prog.name, (unsigned long long)st->bytes[b]);
            goto fail;
        }
    }
    s_buf_t *out = s_buf(s, st->bufs[0]);
    if (out && out->bytes < st->bytes[0]) {
        ta_error_set(&err, TACT_EPROTO, "executor: buffer %llu holds %llu bytes, kernel %s writes %llu", (unsigned long long)out->id,
                     (unsigned long long)out->bytes, pr->prog.name, (unsigned long long)st->bytes[0]);
        goto fail;
    }
    if (!out) {
        s_buf_t *old = st->reuse ? s_buf(s, st->reuse) : NULL;
        if (old && old->bytes >= st->bytes[0]) {
            /* The planner found a dead temporary: its memory becomes the output. */
            void *ptr = old->ptr;
            uint64_t bytes = old->bytes;
            s_buf_drop(s, st->reuse, 1);
            if (!s_buf_add(s, st->bufs[0], ptr, bytes, &err)) goto fail;
        } else if (!s_buf_new(s, st->bufs[0], st->bytes[0], 0, &err)) {
            goto fail;
        }
    }
    void *ptrs[TA_AST_MAX_BUFS];
    for (int b = 0; b < st->nbufs; b++) ptrs[b] = s_buf(s, st->bufs[b])->ptr;
    double t0 = s_ms();
    if (st->numel % pr->align) {
        ta_error_set(&err, TACT_EPROTO, "executor: kernel %s works on tiles of %lld outputs, not %lld", pr->prog.name,
                     (long long)pr->align, (long long)st->numel);
        goto fail;
    }
    if (s->dev_ops->launch(s->dev, &pr->prog, ptrs, st->numel, pr->align, &err) != TACT_OK) goto fail;
    if (s->w->debug >= 2) {
        double ms = s_ms() - t0, bytes = 0;
        for (int b = 0; b < st->nbufs; b++) bytes += (double)st->bytes[b];
        fprintf(stderr, "tact: %-24s %9.3f ms %8.2f GB/s\n", pr->prog.name, ms, ms > 0 ? bytes / ms * 1e-6 : 0.0);
    }
    for (int f = 0; f < st->nfrees; f++) s_buf_drop(s, st->frees[f], 0);
    return 1;
fail:
    s_fail_plan(self, s, p, err.code ? err.code : TACT_EDEVICE, err.text);
    return -1;
}

/* Sends what waiting copy-outs can now send. */
static void s_copies(ta_actor_t *self, s_state_t *s) {
    for (s_copy_t **pc = &s->copies; *pc;) {
        s_copy_t *c = *pc;
        s_buf_t *b = s_buf(s, c->buf);
        if (!b) {
            pc = &c->next;
            continue;
        }
        ta_msg_t d;
        ta_msg_init(&d, TA_MSG_DATA);
        d.corr = c->corr;
        d.bulk.ptr = b->ptr;
        d.bulk.len = c->bytes <= b->bytes ? c->bytes : b->bytes;
        ta_error_t err;
        if (ta_port_send(ta_actor_port(self), (uint32_t)c->reply_to, &d, &err) != TACT_OK)
            ta_actor_send_error(self, (uint32_t)c->reply_to, c->corr, err.code, "COPY_OUT", err.text); /* e.g. too big to send */
        *pc = c->next;
        ta_free(c);
    }
}

/* Runs whatever can run now. */
static void s_pump(ta_actor_t *self, s_state_t *s) {
    while (s->plans) {
        s_plan_t *p = s->plans;
        int rc = 1;
        while (p->done < p->nsteps && (rc = s_step(self, s, p, &p->steps[p->done])) == 1) p->done++;
        if (rc == 0) break;
        if (rc == 1) {
            if (s->w->debug >= 1)
                fprintf(stderr, "tact: realize %" PRIu64 ": %d kernels, planned_peak=%" PRIu64 " unplanned=%" PRIu64 "\n", p->realize,
                        p->nsteps, p->planned_peak, p->unplanned);
            /* The planner's figures, and what the device holds now. */
            uint64_t live = 0;
            for (size_t i = 0; i < s->nbufs; i++) live += s->bufs[i].bytes;
            ta_msg_t d;
            ta_msg_init(&d, TA_MSG_DONE);
            d.corr = p->corr;
            d.as.done.kernels = (uint64_t)p->nsteps;
            d.as.done.planned_peak = p->planned_peak;
            d.as.done.unplanned = p->unplanned;
            d.as.done.device_bytes = live;
            ta_actor_send(self, (uint32_t)p->reply_to, &d);
            s_drop_programs(s, p->realize);
        }
        s->plans = p->next;
        if (!s->plans) s->plans_tail = NULL;
        s_plan_free(p);
    }
    s_copies(self, s);
}

/* ----------------------------------------------------------------- actor */

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "executor: out of memory");
    s->w = arg;
    s->dev_ops = &ta_cpu_device;
    int rc = s->dev_ops->open(&s->dev, s->w->cpu_threads, err);
    if (rc != TACT_OK) {
        ta_free(s);
        return rc;
    }
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    for (size_t i = 0; i < s->nbufs; i++) s->dev_ops->free(s->dev, s->bufs[i].ptr);
    ta_map_fini(&s->buf_index);
    for (size_t i = 0; i < s->ncache; i++) s->dev_ops->free(s->dev, s->cache[i].ptr);
    ta_free(s->cache);
    for (size_t i = 0; i < s->nloaded; i++) s->dev_ops->unload(s->dev, &s->loaded[i]);
    ta_free(s->loaded);
    while (s->plans) {
        s_plan_t *p = s->plans;
        s->plans = p->next;
        s_plan_free(p);
    }
    while (s->copies) {
        s_copy_t *c = s->copies;
        s->copies = c->next;
        ta_free(c);
    }
    ta_free(s->bufs);
    ta_free(s->progs);
    ta_free(s->failed);
    s->dev_ops->close(&s->dev);
    ta_free(s);
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    ta_error_t err = {0, ""};
    if (m->sender == s->w->graph) s->from_graph++;
    switch (m->type) {
    case TA_MSG_WRITE: {
        s_buf_t *b = s_buf(s, m->as.write.buf);
        if (b && b->bytes != m->bulk.len) {
            s_buf_drop(s, m->as.write.buf, 0);
            b = NULL;
        }
        if (!b && !(b = s_buf_new(s, m->as.write.buf, m->bulk.len, 0, &err))) {
            /* Remember it, so the plan that waits for these bytes fails instead. */
            if (ta_grow((void **)&s->failed, &s->failed_cap, s->nfailed + 1, sizeof *s->failed) == TACT_OK)
                s->failed[s->nfailed++] = m->as.write.buf;
            s_pump(self, s);
            return ta_actor_fail(self, err.code, "%s", err.text);
        }
        if (s->dev_ops->copy_in(s->dev, b->ptr, m->bulk.ptr, m->bulk.len, &err) != TACT_OK)
            return ta_actor_fail(self, err.code, "%s", err.text);
        break;
    }
    case TA_MSG_PROGRAM: {
        if (ta_grow((void **)&s->progs, &s->progs_cap, s->nprogs + 1, sizeof *s->progs) != TACT_OK)
            return ta_actor_fail(self, TACT_ENOMEM, "executor: out of memory");
        s_prog_t *pr = &s->progs[s->nprogs];
        memset(pr, 0, sizeof *pr);
        pr->realize = m->as.program.realize;
        pr->index = m->as.program.index;
        pr->status = (int)m->as.program.status;
        pr->align = m->as.program.align >= 1 && m->as.program.align <= (1u << 30) ? (int64_t)m->as.program.align : 1;
        snprintf(pr->text, sizeof pr->text, "%.*s", (int)m->as.program.text.len,
                 m->as.program.text.ptr ? (const char *)m->as.program.text.ptr : "");
        if (pr->status == TACT_OK) {
            char digest[33], want[33], name[64];
            snprintf(digest, sizeof digest, "%.*s", (int)m->as.program.digest.len, (const char *)m->as.program.digest.ptr);
            snprintf(name, sizeof name, "%.*s", (int)m->as.program.name.len, (const char *)m->as.program.name.ptr);
            /* The object travels in the message the first time, then its
             * digest alone; what is loaded is exactly what the compiler sent. */
            if (m->bulk.len) ta_cc_digest(m->bulk.ptr, m->bulk.len, want);
            if (m->as.program.digest.len != 32 || (m->bulk.len && strcmp(digest, want) != 0))
                pr->status = ta_error_set(&err, TACT_EPROTO, "executor: program %s: its %zu bytes do not match digest %s", name,
                                          m->bulk.len, digest);
            else
                pr->status = s_load(s, m->bulk, digest, name, &pr->prog, &err);
            if (pr->status != TACT_OK) snprintf(pr->text, sizeof pr->text, "%s", err.text);
        } else if (pr->status > 0 || pr->status < -100) {
            pr->status = TACT_ECOMPILE;
        }
        s->nprogs++;
        break;
    }
    case TA_MSG_PLAN: {
        s->last_plan = m->as.plan.realize; /* its programs may come in now, whatever happens to it */
        s_plan_t *p = NULL;
        int rc = s_parse_plan(m, &p, &err);
        if (rc != TACT_OK) {
            ta_actor_send_error(self, (uint32_t)m->as.plan.reply_to, m->corr, rc, "PLAN", err.text);
            return TACT_OK;
        }
        if (s->plans_tail) s->plans_tail->next = p;
        else s->plans = p;
        s->plans_tail = p;
        break;
    }
    case TA_MSG_COPY_OUT: {
        s_copy_t *c = ta_calloc(1, sizeof *c);
        if (!c) return ta_actor_fail(self, TACT_ENOMEM, "executor: out of memory");
        c->buf = m->as.copy_out.buf;
        c->bytes = m->as.copy_out.bytes;
        c->reply_to = m->as.copy_out.reply_to;
        c->corr = m->corr;
        c->next = s->copies;
        s->copies = c;
        break;
    }
    case TA_MSG_FREE: {
        ta_mpr_t r;
        uint32_t n;
        uint64_t id;
        ta_mpr_init(&r, m->as.free.bufs.ptr, m->as.free.bufs.len);
        if (ta_mpr_array(&r, &n) || n > m->as.free.bufs.len) return ta_actor_fail(self, TACT_EPROTO, "executor: malformed free list");
        for (uint32_t i = 0; i < n; i++) {
            if (ta_mpr_u64(&r, &id)) return ta_actor_fail(self, TACT_EPROTO, "executor: malformed free list (entry %u)", i);
            s_buf_drop(s, id, 0);
        }
        break;
    }
    default: return ta_actor_fail(self, TACT_EINVAL, "executor: cannot handle %s", ta_msg_type_name(m->type));
    }
    s_pump(self, s);
    return TACT_OK;
}

/* A plan waits until everything the graph sent before it has been processed
 * (its barrier), so it always follows the writes it reads; its programs
 * wait for it, so they never overtake a held plan. */
static int s_accept(ta_actor_t *self, const ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type == TA_MSG_PLAN) return s->from_graph >= m->as.plan.barrier;
    if (m->type == TA_MSG_PROGRAM) return s->last_plan >= m->as.program.realize;
    return 1;
}

const ta_actor_ops_t ta_executor_ops = {"executor", s_init, s_handle, s_fini, s_accept};
