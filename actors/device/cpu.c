/* cpu.c - the CPU device: host memory, generated C compiled by the system compiler, a thread pool. */
#define _GNU_SOURCE /* pthread_setname_np, memfd_create */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cc.h"
#include "device.h"
#include "hash.h"
#include "mem.h"

/*
 * A launch splits the output into chunks of whole elements.  Each element is
 * computed entirely by the thread that takes its chunk (its whole reduce, in
 * a fixed order), so results are bitwise the same for any thread count; only
 * which thread does which chunk depends on timing.
 *
 * The pool has nthreads - 1 workers.  A launch runs on the launching
 * (executor's) thread, alone when it is small, else with nthreads - 1
 * workers.  A supervised one (a tick function given: long work) is cut in
 * chunks of at most S_TICK_WORK iterations, and the launching thread calls
 * tick between its chunks and every 20 ms while it waits for the workers'
 * last ones, so the executor can send heartbeats and stop handing out
 * chunks when told to.
 */
struct ta_device {
    int nthreads; /* computing threads of a launch */
    int nworkers;
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    /* The launch in flight. */
    uint64_t generation;
    ta_kernel_fn fn;
    void **bufs;
    const uint64_t *args;
    int64_t n, chunk, next; /* next chunk start, taken under the lock */
    int slots;              /* workers this launch still takes */
    uint64_t busy;          /* workers still in this launch */
    int quit;
    int guards;
    struct s_module *modules; /* every object loaded, once each */
    /* The queue: the launch enqueued and not yet run (sync runs it). */
    int pending;
    const ta_cpu_kernel_t *pending_prog;
    void *pending_bufs[64];
    const uint64_t *pending_args;
    int64_t pending_n, pending_align;
    uint64_t pending_work;
    uint64_t launched, finished; /* launches enqueued, and run: an event is a count of the first */
    /* A plan runs (the executor's hint): workers are woken as it starts
     * and watch for launches longer between them (S_HOT_NS). */
    int hot;
    uint64_t wakes; /* hints that woke the workers, under the lock */
};

/* A marker: the launches of dev enqueued when it was recorded. */
struct ta_event {
    ta_device_t *dev;
    uint64_t launched;
};

enum { S_MIN_CHUNK_WORK = 16384 }; /* iterations; below this, waking a thread costs more than it gives */
/* Iterations of a supervised launch's chunk: the launching thread runs
 * chunks too, and ticks between them.  A chunk is at least one tile (align
 * outputs), so a kernel whose tile iterates more goes that long between
 * ticks; reduces are split past 65536 elements, which keeps it well under
 * the quarter of a timeout a heartbeat may take. */
enum { S_TICK_WORK = 4 << 20 };

/* How long a thread that waits for the pool (a worker for the next launch,
 * the launching thread for the workers' last chunks) watches before it
 * sleeps.  A step launches kernels back to back, each often well under a
 * millisecond; waking a sleeping thread takes tens of microseconds (more
 * in a virtual machine), which would cost those kernels most of their
 * second thread.  Longer costs the rest of the pipeline (the graph, the
 * client) a core while a step is being built: the MLP step ran 380-530
 * steps/s at 200 us, 540-610 at 30. */
enum { S_SPIN_NS = 30 * 1000 };
/* While a plan runs (the executor's hint, s_hint): its launches come back
 * to back, often tens of microseconds apart while the executor prepares
 * the next, so a worker watches up to S_HOT_NS after each instead, and the
 * hint wakes the sleeping ones as the plan arrives, before its first
 * launch, so waking (tens of microseconds in a virtual machine, at times
 * hundreds) overlaps the executor's own preparation.  A gap longer than
 * that (a kernel still compiling) puts them back to sleep, so a plan
 * waiting on the compiler does not take its core. */
enum { S_HOT_NS = 200 * 1000 };

static int64_t s_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void s_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Watches *v (written under the pool's lock) for up to S_SPIN_NS while it
 * equals value (equal) or differs from it (!equal); called without the
 * lock. */
static void s_spin_while(const uint64_t *v, uint64_t value, int equal, const int *quit, const int *hot) {
    int64_t start = s_ns();
    for (int i = 1; (__atomic_load_n(v, __ATOMIC_ACQUIRE) == value) == equal && !__atomic_load_n(quit, __ATOMIC_ACQUIRE); i++) {
        s_relax();
        if (i % 64 == 0) {
            int64_t t = s_ns() - start;
            if (t > S_SPIN_NS && (t > S_HOT_NS || !hot || !__atomic_load_n(hot, __ATOMIC_ACQUIRE))) return;
        }
    }
}

/* Takes chunks of the current launch until none is left; with tick, calls
 * it after each chunk.  The thread that finds none left cancels the slots
 * no worker has taken yet: a worker not awake by then is not waited for.
 * Returns 1 when tick said stop (no chunk is handed out after that; those
 * running finish). */
static int s_drain(ta_device_t *d, ta_device_tick_fn tick, void *ud) {
    for (int stopped = 0;;) {
        pthread_mutex_lock(&d->lock);
        if (stopped) d->next = d->n;
        int64_t start = d->next;
        if (start < d->n) {
            d->next += d->chunk;
        } else {
            __atomic_store_n(&d->busy, d->busy - (uint64_t)d->slots, __ATOMIC_RELEASE);
            d->slots = 0;
        }
        pthread_mutex_unlock(&d->lock);
        if (start >= d->n) return stopped;
        int64_t end = start + d->chunk < d->n ? start + d->chunk : d->n;
        d->fn(start, end, d->bufs, d->args);
        stopped = tick && tick(ud);
    }
}

static void *s_worker(void *arg) {
    ta_device_t *d = arg;
    pthread_setname_np(pthread_self(), "cpu-worker");
    uint64_t seen = 0, woken = 0;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        if (!d->quit && d->generation == seen) {
            pthread_mutex_unlock(&d->lock);
            s_spin_while(&d->generation, seen, 1, &d->quit, &d->hot);
            pthread_mutex_lock(&d->lock);
        }
        while (!d->quit && d->generation == seen && d->wakes == woken) pthread_cond_wait(&d->work, &d->lock);
        if (d->quit) break;
        if (d->generation == seen) { /* a hint woke it: watch for the plan's first launch */
            woken = d->wakes;
            continue;
        }
        seen = d->generation;
        if (!d->slots) continue; /* this launch has all the workers it takes */
        d->slots--;
        pthread_mutex_unlock(&d->lock);
        s_drain(d, NULL, NULL);
        pthread_mutex_lock(&d->lock);
        __atomic_store_n(&d->busy, d->busy - 1, __ATOMIC_RELEASE);
        if (d->busy == 0) pthread_cond_signal(&d->done);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static void s_close(ta_device_t **pd) {
    ta_device_t *d = *pd;
    if (!d) return;
    *pd = NULL;
    pthread_mutex_lock(&d->lock);
    __atomic_store_n(&d->quit, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&d->work);
    pthread_mutex_unlock(&d->lock);
    for (int i = 0; i < d->nworkers; i++)
        if (d->workers[i]) pthread_join(d->workers[i], NULL);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->done);
    pthread_mutex_destroy(&d->lock);
    ta_free(d->workers);
    ta_free(d);
}

static int s_count(void) { return 1; }

static int s_describe(int index, ta_device_info_t *info, ta_error_t *err) {
    if (index != 0) return ta_error_set(err, TACT_EDEVICE, "CPU: there is one CPU device, not %d", index + 1);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        snprintf(info->model, sizeof info->model, "%s", colon + 2 + strspn(colon + 2, " "));
        info->model[strcspn(info->model, "\n")] = '\0';
        break;
    }
    if (f) fclose(f);
    long n = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->compute_units = n > 0 ? (int)n : 1;
    info->memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    info->max_buffer = info->memory;
    info->max_group = 1;
    info->fp64 = 1;
    /* The target: C for this processor (-march=native), as codegen builds it. */
    snprintf(info->language, sizeof info->language, "C");
    info->vector_bytes = 16;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) info->vector_bytes = 64;
    else if (__builtin_cpu_supports("avx")) info->vector_bytes = 32;
    info->fma = __builtin_cpu_supports("fma") != 0;
    info->bf16 = __builtin_cpu_supports("avx512bf16") != 0;
    /* A test switch: the vectors of another x86 target (16, 32 or 64
     * bytes), so tests pin the tile choices of AVX2 and AVX-512 on either
     * machine.  Kernels are still built for this processor: only slower. */
    const char *tv = getenv("TACT_TEST_VECTOR_BYTES");
    if (tv && (!strcmp(tv, "16") || !strcmp(tv, "32") || !strcmp(tv, "64"))) info->vector_bytes = atoi(tv);
#endif
    snprintf(info->compiler, sizeof info->compiler, "%s", ta_cc_compiler());
    snprintf(info->flags, sizeof info->flags, "%s", ta_cc_flags(TA_CC_FULL));
    return TACT_OK;
}

int ta_cpu_threads_max(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 8 ? (int)(n < 1 << 20 ? 8 * n : 8 << 20) : 64;
}

static int s_open(ta_device_t **out, int index, const ta_device_options_t *opt, ta_error_t *err) {
    (void)index; /* virtual CPU devices share the one CPU */
    int threads = opt->threads, guards = opt->guards;
    *out = NULL;
    if (threads > ta_cpu_threads_max())
        return ta_error_set(err, TACT_EINVAL, "CPU: %d threads; at most %d (8 per core, at least 64)", threads, ta_cpu_threads_max());
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    ta_device_t *d = ta_calloc(1, sizeof *d);
    if (!d || !(d->workers = ta_calloc((size_t)threads, sizeof *d->workers))) {
        ta_free(d);
        return ta_error_set(err, TACT_ENOMEM, "CPU: out of memory");
    }
    d->nthreads = threads;
    d->guards = guards;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->work, NULL);
    ta_cond_init_monotonic(&d->done);
    for (int i = 0; i < threads - 1; i++) { /* the launching thread is the last */
        if (ta_thread_create(&d->workers[i], s_worker, d) != 0) {
            s_close(&d);
            return ta_error_set(err, TACT_EDEVICE, "CPU: cannot start worker thread %d", i);
        }
        d->nworkers = i + 1;
    }
    *out = d;
    return TACT_OK;
}

static int s_alloc(ta_device_t *d, size_t bytes, void **buf, ta_error_t *err) {
    /* A buffer larger than the machine's memory is refused here: with
     * overcommit the allocation could succeed and the kernel writing it
     * would get the process killed instead of an error. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes / (size_t)page > (size_t)pages)
        return ta_error_set(err, TACT_ENOMEM, "CPU: a buffer of %zu bytes is larger than this machine's memory (%zu bytes)", bytes,
                            (size_t)pages * (size_t)page);
    size_t guard = d->guards ? TA_GUARD_BYTES : 0;
    /* 64-byte aligned so vector loads of the first element are aligned. */
    uint8_t *raw;
    if (posix_memalign((void **)&raw, 64, (bytes ? bytes : 64) + 2 * guard) != 0)
        return ta_error_set(err, TACT_ENOMEM, "CPU: cannot allocate a buffer of %zu bytes", bytes);
    for (size_t i = 0; i < guard; i++) raw[i] = raw[guard + bytes + i] = ta_guard_byte(i);
    *buf = raw + guard;
    return TACT_OK;
}

static int s_flush(ta_device_t *d, ta_error_t *err);

static void s_free(ta_device_t *d, void *buf) {
    ta_error_t err;
    s_flush(d, &err); /* the queued launch may use it; its error surfaces at sync */
    if (buf) free((uint8_t *)buf - (d->guards ? TA_GUARD_BYTES : 0));
}

static int s_check_guards(ta_device_t *d, void *buf, size_t bytes, ta_error_t *err) {
    if (!d->guards) return TACT_OK;
    const uint8_t *b = buf;
    return ta_guards_verify(b - TA_GUARD_BYTES, b + bytes, "CPU", err);
}

/* Copies come after what was queued before them (device.h). */
static int s_copy_in(ta_device_t *d, void *buf, const void *host, size_t bytes, ta_error_t *err) {
    int rc = s_flush(d, err);
    if (rc == TACT_OK && bytes) memcpy(buf, host, bytes);
    return rc;
}

static int s_zero(ta_device_t *d, void *buf, size_t bytes, ta_error_t *err) {
    int rc = s_flush(d, err);
    if (rc == TACT_OK && bytes) memset(buf, 0, bytes);
    return rc;
}

static int s_copy_out(ta_device_t *d, void *host, const void *buf, size_t bytes, ta_error_t *err) {
    int rc = s_flush(d, err);
    if (rc == TACT_OK && bytes) memcpy(host, buf, bytes);
    return rc;
}

int ta_cpu_kernel_load(const void *bytes, size_t len, const char *name, ta_cpu_kernel_t *out, ta_error_t *err) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return ta_error_set(err, TACT_ECOMPILE, "kernel %s: no memory file to load it from: %s", name, strerror(errno));
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, (const char *)bytes + done, len - done);
        if (n <= 0) {
            close(fd);
            return ta_error_set(err, TACT_ECOMPILE, "kernel %s: cannot fill its memory file", name);
        }
        done += (size_t)n;
    }
    /* The fd stays open while the object is loaded: its /proc name must not
     * be reused by another object, which the loader would take for this one. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    out->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!out->dl) {
        const char *why = dlerror();
        close(fd);
        return ta_error_set(err, TACT_ECOMPILE, "kernel %s: cannot load its object: %s", name, why ? why : "?");
    }
    *(void **)&out->fn = dlsym(out->dl, name);
    if (!out->fn) {
        dlclose(out->dl);
        close(fd);
        out->dl = NULL;
        return ta_error_set(err, TACT_ECOMPILE, "kernel %s: its object defines no function %s", name, name);
    }
    out->memfd = fd + 1;
    return TACT_OK;
}

void ta_cpu_kernel_unload(ta_cpu_kernel_t *k) {
    if (k->dl) dlclose(k->dl);
    if (k->memfd) close(k->memfd - 1);
    k->memfd = 0;
    k->dl = NULL;
    k->fn = NULL;
}

/* An object holds the kernels a compiler built together: it is loaded
 * once, and each kernel of it is a handle on it. */
typedef struct s_module {
    uint64_t h[2];
    size_t len;
    ta_cpu_kernel_t prog; /* the loaded object */
    int refs;
    struct s_module *next;
} s_module_t;

typedef struct {
    ta_cpu_kernel_t p; /* the module's, with this kernel's name and function */
    s_module_t *m;
} s_handle_t;

static int s_load(ta_device_t *d, const void *obj, size_t len, const char *name, void **prog, ta_error_t *err) {
    s_handle_t *h = ta_calloc(1, sizeof *h);
    if (!h) return ta_error_set(err, TACT_ENOMEM, "CPU: out of memory");
    uint64_t hash[2];
    ta_hash128(obj, len, hash);
    s_module_t *m = d->modules;
    while (m && (m->h[0] != hash[0] || m->h[1] != hash[1] || m->len != len)) m = m->next;
    if (m) {
        h->p = m->prog;
        snprintf(h->p.name, sizeof h->p.name, "%s", name);
        *(void **)&h->p.fn = dlsym(m->prog.dl, name);
        if (!h->p.fn) {
            ta_free(h);
            return ta_error_set(err, TACT_ECOMPILE, "kernel %s: its object defines no function %s", name, name);
        }
    } else {
        if (!(m = ta_calloc(1, sizeof *m))) {
            ta_free(h);
            return ta_error_set(err, TACT_ENOMEM, "CPU: out of memory");
        }
        int rc = ta_cpu_kernel_load(obj, len, name, &m->prog, err);
        if (rc != TACT_OK) {
            ta_free(m), ta_free(h);
            return rc;
        }
        m->h[0] = hash[0], m->h[1] = hash[1], m->len = len;
        m->next = d->modules;
        d->modules = m;
        h->p = m->prog;
    }
    m->refs++;
    h->m = m;
    *prog = h;
    return TACT_OK;
}

static void s_unload(ta_device_t *d, void *prog) {
    s_handle_t *h = prog;
    if (!h) return;
    if (--h->m->refs == 0) {
        s_module_t **at = &d->modules;
        while (*at != h->m) at = &(*at)->next;
        *at = h->m->next;
        ta_cpu_kernel_unload(&h->m->prog);
        ta_free(h->m);
    }
    ta_free(h);
}

/* Runs a launch to its end on the pool (with tick: supervised). */
static int s_run(ta_device_t *d, const ta_cpu_kernel_t *prog, void **bufs, const uint64_t *args, int64_t n, int64_t align, uint64_t work,
                 ta_device_tick_fn tick, void *ud, ta_error_t *err) {
    if (n <= 0) return TACT_OK;
    /* Four chunks a thread, each at least S_MIN_CHUNK_WORK iterations: a
     * reduce's output is its whole reduce, so 256 sums of 65536 elements
     * are 8 chunks, not one.  Chunks never change bits: an output is
     * computed by one call whatever the cut. */
    uint64_t per = work / (uint64_t)n ? work / (uint64_t)n : 1;
    int64_t chunk = (n + d->nthreads * 4 - 1) / (d->nthreads * 4), least = (int64_t)((S_MIN_CHUNK_WORK + per - 1) / per);
    if (chunk < least) chunk = least;
    if (tick && chunk > (int64_t)(S_TICK_WORK / per)) chunk = (int64_t)(S_TICK_WORK / per);
    if (chunk < 1) chunk = 1;
    if (align < 1) align = 1;
    chunk = (chunk + align - 1) / align * align; /* kernels that compute tiles need whole tiles */
    if (!tick && (d->nthreads == 1 || chunk >= n)) {
        prog->fn(0, n, bufs, args);
        return TACT_OK;
    }
    int helpers = d->nthreads - 1;
    pthread_mutex_lock(&d->lock);
    d->fn = prog->fn;
    d->bufs = bufs;
    d->args = args;
    d->n = n;
    d->chunk = chunk;
    d->next = 0;
    d->slots = d->busy = helpers;
    if (helpers) {
        __atomic_store_n(&d->generation, d->generation + 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&d->work);
    }
    pthread_mutex_unlock(&d->lock);
    int stopped = s_drain(d, tick, ud);
    s_spin_while(&d->busy, 0, 0, &d->quit, NULL);
    pthread_mutex_lock(&d->lock);
    while (d->busy) {
        if (!tick) {
            pthread_cond_wait(&d->done, &d->lock);
            continue;
        }
        ta_cond_wait_ms(&d->done, &d->lock, 20);
        if (!d->busy || stopped) continue;
        pthread_mutex_unlock(&d->lock);
        stopped = tick(ud) != 0;
        pthread_mutex_lock(&d->lock);
        if (stopped) d->next = d->n; /* no more chunks; those running finish */
    }
    pthread_mutex_unlock(&d->lock);
    if (stopped) return ta_error_set(err, TACT_ESTOPPED, "kernel %s stopped (the context is closing)", prog->name);
    return TACT_OK;
}

/* The queue holds one launch, run by sync (supervised when sync has a
 * tick) or, unsupervised, by whatever is enqueued or copied after it. */
static int s_flush(ta_device_t *d, ta_error_t *err) {
    if (!d->pending) return TACT_OK;
    d->pending = 0;
    d->finished = d->launched;
    return s_run(d, d->pending_prog, d->pending_bufs, d->pending_args, d->pending_n, d->pending_align, d->pending_work, NULL, NULL, err);
}

static int s_launch(ta_device_t *d, void *prog, const ta_launch_t *l, ta_error_t *err) {
    if (l->nbufs < 0 || l->nbufs > 64) return ta_error_set(err, TACT_EDEVICE, "CPU: a launch of %d buffers", l->nbufs);
    int rc = s_flush(d, err);
    if (rc != TACT_OK) return rc;
    d->pending_prog = &((const s_handle_t *)prog)->p;
    memcpy(d->pending_bufs, l->bufs, sizeof *l->bufs * (size_t)l->nbufs);
    d->pending_args = l->args;
    d->pending_n = l->n;
    d->pending_align = l->align;
    d->pending_work = l->work;
    d->pending = 1;
    d->launched++;
    return TACT_OK;
}

static int s_sync(ta_device_t *d, ta_device_tick_fn tick, void *ud, ta_error_t *err) {
    if (!d->pending) return TACT_OK;
    d->pending = 0;
    d->finished = d->launched;
    return s_run(d, d->pending_prog, d->pending_bufs, d->pending_args, d->pending_n, d->pending_align, d->pending_work, tick, ud, err);
}

static int s_threads(const ta_device_t *d) { return d->nthreads; }

static void s_hint(ta_device_t *d, int busy) {
    if (d->nworkers == 0 || __atomic_load_n(&d->hot, __ATOMIC_RELAXED) == busy) return;
    __atomic_store_n(&d->hot, busy, __ATOMIC_RELEASE);
    if (!busy) return;
    pthread_mutex_lock(&d->lock);
    d->wakes++;
    pthread_cond_broadcast(&d->work);
    pthread_mutex_unlock(&d->lock);
}

static void s_caps(const ta_device_t *d, ta_device_caps_t *out) {
    (void)d;
    *out = (ta_device_caps_t){.host_memory = 1, .async_copy = 0, .peer_copy = 1, .events = 1};
}

/* Host memory both: the copy runs once what either queued before it has. */
static int s_copy_peer(ta_device_t *dst, void *dbuf, ta_device_t *src, const void *sbuf, size_t bytes, ta_error_t *err) {
    int rc = s_flush(src, err);
    if (rc == TACT_OK) rc = s_flush(dst, err);
    if (rc == TACT_OK && bytes) memmove(dbuf, sbuf, bytes);
    return rc;
}

static int s_event_record(ta_device_t *d, ta_event_t **ev, ta_error_t *err) {
    if (!(*ev = ta_malloc(sizeof **ev))) return ta_error_set(err, TACT_ENOMEM, "CPU: out of memory for an event");
    (*ev)->dev = d;
    (*ev)->launched = d->launched;
    return TACT_OK;
}

/* The marker is reached once the launches before it ran: the one still
 * queued then runs now, on the calling thread. */
static int s_event_sync(ta_event_t *ev, ta_error_t *err) { return ev->dev->finished >= ev->launched ? TACT_OK : s_flush(ev->dev, err); }

/* A queue holds one launch and runs it on the calling thread: waiting for
 * another device's marker is reaching it now; for its own, nothing. */
static int s_event_wait(ta_device_t *d, ta_event_t *ev, ta_error_t *err) { return ev->dev == d ? TACT_OK : s_event_sync(ev, err); }

static void s_event_free(ta_event_t *ev) { ta_free(ev); }

const ta_device_ops_t ta_cpu_device = {
    .kind = "CPU",
    .host_memory = 1,
    .count = s_count,
    .describe = s_describe,
    .open = s_open,
    .close = s_close,
    .alloc = s_alloc,
    .free = s_free,
    .copy_in = s_copy_in,
    .zero = s_zero,
    .copy_out = s_copy_out,
    .load = s_load,
    .unload = s_unload,
    .launch = s_launch,
    .sync = s_sync,
    .threads = s_threads,
    .hint = s_hint,
    .check_guards = s_check_guards,
    .caps = s_caps,
    .copy_peer = s_copy_peer,
    .event_record = s_event_record,
    .event_wait = s_event_wait,
    .event_sync = s_event_sync,
    .event_free = s_event_free,
};
