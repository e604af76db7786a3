/* cpu.c - the CPU device: host memory, generated C compiled by the system compiler, a thread pool. */
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "mem.h"

/*
 * A launch splits the output into chunks of whole elements.  Each element is
 * computed entirely by the thread that takes its chunk (its whole reduce, in
 * a fixed order), so results are bitwise the same for any thread count; only
 * which thread does which chunk depends on timing.
 *
 * The pool has one worker per thread.  A small launch runs on the
 * launching (executor's) thread, alone or with nthreads - 1 workers; a
 * supervised one (a tick function given: long work) runs on all workers
 * while the launching thread waits, calling tick every 20 ms, so the
 * executor can send heartbeats and stop handing out chunks when told to.
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
    int busy;               /* workers still in this launch */
    int quit;
};

enum { S_MIN_CHUNK_WORK = 16384 }; /* iterations; below this, waking a thread costs more than it gives */

/* Takes chunks of the current launch until none is left. */
static void s_drain(ta_device_t *d) {
    for (;;) {
        pthread_mutex_lock(&d->lock);
        int64_t start = d->next;
        if (start < d->n) d->next += d->chunk;
        pthread_mutex_unlock(&d->lock);
        if (start >= d->n) return;
        int64_t end = start + d->chunk < d->n ? start + d->chunk : d->n;
        d->fn(start, end, d->bufs, d->args);
    }
}

static void *s_worker(void *arg) {
    ta_device_t *d = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->quit && d->generation == seen) pthread_cond_wait(&d->work, &d->lock);
        if (d->quit) break;
        seen = d->generation;
        if (!d->slots) continue; /* this launch has all the workers it takes */
        d->slots--;
        pthread_mutex_unlock(&d->lock);
        s_drain(d);
        pthread_mutex_lock(&d->lock);
        if (--d->busy == 0) pthread_cond_signal(&d->done);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static void s_close(ta_device_t **pd) {
    ta_device_t *d = *pd;
    if (!d) return;
    *pd = NULL;
    pthread_mutex_lock(&d->lock);
    d->quit = 1;
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

static int s_open(ta_device_t **out, int threads, ta_error_t *err) {
    *out = NULL;
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
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->done, NULL);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&d->workers[i], NULL, s_worker, d) != 0) {
            s_close(&d);
            return ta_error_set(err, TACT_EDEVICE, "CPU: cannot start worker thread %d", i);
        }
        d->nworkers = i + 1;
    }
    *out = d;
    return TACT_OK;
}

static int s_alloc(ta_device_t *d, size_t bytes, void **buf, ta_error_t *err) {
    (void)d;
    /* A buffer larger than the machine's memory is refused here: with
     * overcommit the allocation could succeed and the kernel writing it
     * would get the process killed instead of an error. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes / (size_t)page > (size_t)pages)
        return ta_error_set(err, TACT_ENOMEM, "CPU: a buffer of %zu bytes is larger than this machine's memory (%zu bytes)", bytes,
                            (size_t)pages * (size_t)page);
    /* 64-byte aligned so vector loads of the first element are aligned. */
    if (posix_memalign(buf, 64, bytes ? bytes : 64) != 0)
        return ta_error_set(err, TACT_ENOMEM, "CPU: cannot allocate a buffer of %zu bytes", bytes);
    return TACT_OK;
}

static void s_free(ta_device_t *d, void *buf) {
    (void)d;
    free(buf);
}

static int s_copy_in(ta_device_t *d, void *buf, const void *host, size_t bytes, ta_error_t *err) {
    (void)d;
    (void)err;
    if (bytes) memcpy(buf, host, bytes);
    return TACT_OK;
}

static int s_copy_out(ta_device_t *d, void *host, const void *buf, size_t bytes, ta_error_t *err) {
    (void)d;
    (void)err;
    if (bytes) memcpy(host, buf, bytes);
    return TACT_OK;
}

static int s_load(ta_device_t *d, const void *obj, size_t len, const char *name, ta_program_t *prog, ta_error_t *err) {
    (void)d;
    return ta_cc_load_bytes(obj, len, name, prog, err);
}

static void s_unload(ta_device_t *d, ta_program_t *prog) {
    (void)d;
    ta_cc_unload(prog);
}

static int s_launch(ta_device_t *d, const ta_program_t *prog, void **bufs, const uint64_t *args, int64_t n, int64_t align,
                    uint64_t work, ta_device_tick_fn tick, void *ud, ta_error_t *err) {
    if (n <= 0) return TACT_OK;
    /* Four chunks a thread, each at least S_MIN_CHUNK_WORK iterations: a
     * reduce's output is its whole reduce, so 256 sums of 65536 elements
     * are 8 chunks, not one.  Chunks never change bits: an output is
     * computed by one call whatever the cut. */
    uint64_t per = work / (uint64_t)n ? work / (uint64_t)n : 1;
    int64_t chunk = (n + d->nthreads * 4 - 1) / (d->nthreads * 4), least = (int64_t)((S_MIN_CHUNK_WORK + per - 1) / per);
    if (chunk < least) chunk = least;
    if (align < 1) align = 1;
    chunk = (chunk + align - 1) / align * align; /* kernels that compute tiles need whole tiles */
    if (!tick && (d->nthreads == 1 || chunk >= n)) {
        prog->fn(0, n, bufs, args);
        return TACT_OK;
    }
    int helpers = tick ? d->nthreads : d->nthreads - 1;
    pthread_mutex_lock(&d->lock);
    d->fn = prog->fn;
    d->bufs = bufs;
    d->args = args;
    d->n = n;
    d->chunk = chunk;
    d->next = 0;
    d->slots = d->busy = helpers;
    d->generation++;
    pthread_cond_broadcast(&d->work);
    pthread_mutex_unlock(&d->lock);
    int stopped = 0;
    if (!tick) s_drain(d);
    pthread_mutex_lock(&d->lock);
    while (d->busy) {
        if (!tick) {
            pthread_cond_wait(&d->done, &d->lock);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&d->done, &d->lock, &ts);
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

static int s_threads(const ta_device_t *d) { return d->nthreads; }

const ta_device_ops_t ta_cpu_device = {"CPU",   s_open,   s_close,  s_alloc,  s_free,   s_copy_in,
                                       s_copy_out, s_load, s_unload, s_launch, s_threads};
