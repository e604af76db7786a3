/* cuda.c - the CUDA device: NVIDIA GPUs through the driver API (dlopen'd libcuda.so.1), programs built by NVRTC into cubins for the device. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "hash.h"
#include "mem.h"
#include "nvrtc.h"

/*
 * The driver is loaded on first use; without it there are no CUDA devices
 * and naming one says "no CUDA driver (libcuda.so.1 not found)".  A device
 * is its primary context and one non-blocking stream: copies in, zeroing
 * and launches are enqueued and return at once, sync polls the stream
 * (ticking every 20 ms), a copy out blocks.  A program is what the
 * compiler pool built with the CUDA printer's build (printer_cuda.c): a
 * cubin for the device's compute capability, or PTX the driver finishes;
 * loaded once per device, by content.  A kernel's fault (an illegal
 * address) leaves the context unusable: the device reports it and is lost.
 */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

enum {
    S_CUDA_SUCCESS = 0,
    S_CUDA_NOT_READY = 600,
    S_ATTR_MAX_THREADS_PER_BLOCK = 1,
    S_ATTR_MAX_SHARED_PER_BLOCK = 8,
    S_ATTR_MULTIPROCESSORS = 16,
    S_ATTR_CC_MAJOR = 75,
    S_ATTR_CC_MINOR = 76,
    S_STREAM_NON_BLOCKING = 1,
    S_EVENT_DISABLE_TIMING = 2,
    S_FUNC_SHARED_SIZE_BYTES = 1,
};

/* The driver API as far as tact uses it. */
static struct {
    CUresult (*init)(unsigned);
    CUresult (*driver_version)(int *);
    CUresult (*device_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_name)(char *, int, CUdevice);
    CUresult (*device_mem)(size_t *, CUdevice);
    CUresult (*device_attr)(int *, int, CUdevice);
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_release)(CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_query)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*stream_wait_event)(CUstream, CUevent, unsigned);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*memset_async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
    CUresult (*module_load)(CUmodule *, const void *);
    CUresult (*module_unload)(CUmodule);
    CUresult (*module_function)(CUfunction *, CUmodule, const char *);
    CUresult (*func_attr)(int *, int, CUfunction);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_sync)(CUevent);
    CUresult (*event_destroy)(CUevent);
    CUresult (*error_name)(CUresult, const char **);
    CUresult (*error_string)(CUresult, const char **);
    int count;
    int version;
    char why[200]; /* why there is no device, when there is none */
} s_cu;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void s_load_driver(void) {
    void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(s_cu.why, sizeof s_cu.why, "no CUDA driver (libcuda.so.1 not found)");
        return;
    }
    int missing = 0;
#define S_SYM(field, sym) missing |= !(*(void **)&s_cu.field = dlsym(dl, sym))
    S_SYM(init, "cuInit");
    S_SYM(driver_version, "cuDriverGetVersion");
    S_SYM(device_count, "cuDeviceGetCount");
    S_SYM(device_get, "cuDeviceGet");
    S_SYM(device_name, "cuDeviceGetName");
    S_SYM(device_mem, "cuDeviceTotalMem_v2");
    S_SYM(device_attr, "cuDeviceGetAttribute");
    S_SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
    S_SYM(ctx_release, "cuDevicePrimaryCtxRelease_v2");
    S_SYM(ctx_set, "cuCtxSetCurrent");
    S_SYM(stream_create, "cuStreamCreate");
    S_SYM(stream_destroy, "cuStreamDestroy_v2");
    S_SYM(stream_query, "cuStreamQuery");
    S_SYM(stream_sync, "cuStreamSynchronize");
    S_SYM(stream_wait_event, "cuStreamWaitEvent");
    S_SYM(mem_alloc, "cuMemAlloc_v2");
    S_SYM(mem_free, "cuMemFree_v2");
    S_SYM(htod_async, "cuMemcpyHtoDAsync_v2");
    S_SYM(dtoh_async, "cuMemcpyDtoHAsync_v2");
    S_SYM(memset_async, "cuMemsetD8Async");
    S_SYM(peer_async, "cuMemcpyPeerAsync");
    S_SYM(module_load, "cuModuleLoadData");
    S_SYM(module_unload, "cuModuleUnload");
    S_SYM(module_function, "cuModuleGetFunction");
    S_SYM(func_attr, "cuFuncGetAttribute");
    S_SYM(launch, "cuLaunchKernel");
    S_SYM(event_create, "cuEventCreate");
    S_SYM(event_record, "cuEventRecord");
    S_SYM(event_sync, "cuEventSynchronize");
    S_SYM(event_destroy, "cuEventDestroy_v2");
    S_SYM(error_name, "cuGetErrorName");
    S_SYM(error_string, "cuGetErrorString");
#undef S_SYM
    if (missing) {
        snprintf(s_cu.why, sizeof s_cu.why, "no CUDA driver (libcuda.so.1 lacks the driver API tact needs; it is older than CUDA 11)");
        s_cu.init = NULL;
        return; /* the library stays loaded: dlclose of a driver is not worth the risk */
    }
    CUresult r = s_cu.init(0);
    if (r == S_CUDA_SUCCESS) r = s_cu.device_count(&s_cu.count);
    s_cu.driver_version(&s_cu.version);
    if (r != S_CUDA_SUCCESS) {
        const char *name = NULL;
        s_cu.error_name(r, &name);
        snprintf(s_cu.why, sizeof s_cu.why, "the CUDA driver does not start: cuInit failed with %s (%d)", name ? name : "?", r);
        s_cu.count = 0;
    } else if (s_cu.count == 0) {
        snprintf(s_cu.why, sizeof s_cu.why, "the CUDA driver (%d.%d) sees no GPU", s_cu.version / 1000, s_cu.version % 1000 / 10);
    }
}

static int s_ready(void) {
    pthread_once(&s_once, s_load_driver);
    return s_cu.count > 0;
}

/* A driver error as text: "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered". */
static int s_fail(ta_error_t *err, int code, int index, const char *what, CUresult r) {
    const char *name = NULL, *text = NULL;
    if (s_cu.error_name) s_cu.error_name(r, &name);
    if (s_cu.error_string) s_cu.error_string(r, &text);
    return ta_error_set(err, code, "CUDA:%d: %s: %s (%d)%s%s", index, what, name ? name : "unknown error", r, text ? ": " : "", text ? text : "");
}

struct ta_device {
    int index;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    int cc;     /* compute capability, major * 10 + minor */
    int guards; /* every buffer has TA_GUARD_BYTES of the pattern before and after it */
    int lost;   /* a fault or a stop left it unusable: nothing more is asked of it */
    struct s_module *modules;
    char last[64]; /* the last kernel launched since the last sync, and how many were */
    int launched;
};

struct ta_event {
    ta_device_t *dev;
    CUevent e;
};

/* A program (the kernels a compiler built together), loaded once per
 * device however many of its kernels run; a kernel is a handle on it. */
typedef struct s_module {
    uint64_t h[2];
    size_t len;
    CUmodule module;
    int refs;
    struct s_module *next;
} s_module_t;

typedef struct {
    s_module_t *module;
    CUfunction fn;
    unsigned block; /* threads per block: one per float of its shared memory when its block shares a reduce, else 128 */
    int shared;     /* a block per output (the block shares its reduce) */
    char name[64];
} s_prog_t;

static int s_count(void) { return s_ready() ? s_cu.count : 0; }

static const char *s_why_none(void) {
    pthread_once(&s_once, s_load_driver);
    return s_cu.count > 0 ? NULL : s_cu.why;
}

static int s_describe(int index, ta_device_info_t *info, ta_error_t *err) {
    if (!s_ready()) return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: %s", index, s_cu.why);
    if (index < 0 || index >= s_cu.count) return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: no such GPU (this machine has %d)", index, s_cu.count);
    CUdevice dev;
    CUresult r = s_cu.device_get(&dev, index);
    if (r != S_CUDA_SUCCESS) return s_fail(err, TACT_EDEVICE, index, "cannot get the device", r);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "CUDA:%d", index);
    s_cu.device_name(info->model, (int)sizeof info->model - 1, dev);
    size_t mem = 0;
    s_cu.device_mem(&mem, dev);
    int units = 0, threads = 0, shared = 0, major = 0, minor = 0;
    s_cu.device_attr(&units, S_ATTR_MULTIPROCESSORS, dev);
    s_cu.device_attr(&threads, S_ATTR_MAX_THREADS_PER_BLOCK, dev);
    s_cu.device_attr(&shared, S_ATTR_MAX_SHARED_PER_BLOCK, dev);
    s_cu.device_attr(&major, S_ATTR_CC_MAJOR, dev);
    s_cu.device_attr(&minor, S_ATTR_CC_MINOR, dev);
    snprintf(info->driver, sizeof info->driver, "CUDA driver %d.%d, compute capability %d.%d", s_cu.version / 1000, s_cu.version % 1000 / 10, major,
             minor);
    info->compute_units = units;
    info->memory = mem;
    info->max_buffer = mem;
    info->max_group = threads;
    info->fp16 = major >= 6;
    info->bf16 = major >= 8;
    info->fp64 = 1;
    /* The target: CUDA C++ for NVRTC, no vectors (threads are the lanes),
     * fma, blocks sharing a reduce in shared memory. */
    snprintf(info->language, sizeof info->language, "CUDA");
    info->vector_bytes = 4;
    info->fma = 1;
    info->local_memory = (uint64_t)shared;
    int nmajor = 0, nminor = 0;
    if (ta_nvrtc_version(&nmajor, &nminor, NULL) == TACT_OK) snprintf(info->compiler, sizeof info->compiler, "NVRTC %d.%d", nmajor, nminor);
    else snprintf(info->compiler, sizeof info->compiler, "NVRTC (not found)");
    snprintf(info->flags, sizeof info->flags, "-arch=sm_%d%d --fmad=false", major, minor);
    return TACT_OK;
}

static int s_current(ta_device_t *d, ta_error_t *err) {
    if (d->lost) return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: the device failed earlier (see the first error); it is not used again", d->index);
    CUresult r = s_cu.ctx_set(d->ctx);
    return r == S_CUDA_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, d->index, "cannot make its context current", r);
}

static void s_close(ta_device_t **pd) {
    ta_device_t *d = *pd;
    if (!d) return;
    *pd = NULL;
    if (d->ctx) s_cu.ctx_set(d->ctx);
    if (d->stream && !d->lost) s_cu.stream_sync(d->stream);
    while (d->modules) { /* programs whose kernels were not all unloaded */
        s_module_t *m = d->modules;
        d->modules = m->next;
        s_cu.module_unload(m->module);
        ta_free(m);
    }
    if (d->stream) s_cu.stream_destroy(d->stream);
    if (d->ctx) s_cu.ctx_release(d->dev);
    ta_free(d);
}

static int s_open(ta_device_t **out, int index, const ta_device_options_t *opt, ta_error_t *err) {
    *out = NULL;
    if (!s_ready()) return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: %s", index, s_cu.why);
    if (index < 0 || index >= s_cu.count) return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: no such GPU (this machine has %d)", index, s_cu.count);
    ta_device_t *d = ta_calloc(1, sizeof *d);
    if (!d) return ta_error_set(err, TACT_ENOMEM, "CUDA: out of memory");
    d->index = index;
    d->guards = opt && opt->guards;
    CUresult r = s_cu.device_get(&d->dev, index);
    if (r == S_CUDA_SUCCESS) r = s_cu.ctx_retain(&d->ctx, d->dev);
    if (r == S_CUDA_SUCCESS) r = s_cu.ctx_set(d->ctx);
    if (r == S_CUDA_SUCCESS) r = s_cu.stream_create(&d->stream, S_STREAM_NON_BLOCKING);
    int major = 0, minor = 0;
    if (r == S_CUDA_SUCCESS) r = s_cu.device_attr(&major, S_ATTR_CC_MAJOR, d->dev);
    if (r == S_CUDA_SUCCESS) r = s_cu.device_attr(&minor, S_ATTR_CC_MINOR, d->dev);
    if (r != S_CUDA_SUCCESS) {
        int rc = s_fail(err, TACT_EDEVICE, index, "cannot open the GPU", r);
        s_close(&d);
        return rc;
    }
    d->cc = major * 10 + minor;
    *out = d;
    return TACT_OK;
}

static int s_alloc(ta_device_t *d, size_t bytes, void **buf, ta_error_t *err) {
    *buf = NULL;
    int rc = s_current(d, err);
    if (rc != TACT_OK) return rc;
    size_t guard = d->guards ? TA_GUARD_BYTES : 0, total = bytes + 2 * guard;
    if (total < bytes) return ta_error_set(err, TACT_ENOMEM, "CUDA:%d: a buffer of %zu bytes is too large", d->index, bytes);
    CUdeviceptr p = 0;
    CUresult r = s_cu.mem_alloc(&p, total ? total : 1);
    if (r != S_CUDA_SUCCESS) return s_fail(err, r == 2 ? TACT_ENOMEM : TACT_EDEVICE, d->index, "cannot allocate a buffer", r);
    if (guard) { /* the pattern, copied in before the buffer is used */
        uint8_t pattern[TA_GUARD_BYTES];
        for (size_t i = 0; i < TA_GUARD_BYTES; i++) pattern[i] = ta_guard_byte(i);
        r = s_cu.htod_async(p, pattern, guard, d->stream);
        if (r == S_CUDA_SUCCESS) r = s_cu.htod_async(p + guard + bytes, pattern, guard, d->stream);
        if (r == S_CUDA_SUCCESS) r = s_cu.stream_sync(d->stream);
        if (r != S_CUDA_SUCCESS) {
            s_cu.mem_free(p);
            return s_fail(err, TACT_EDEVICE, d->index, "cannot write a buffer's guards", r);
        }
    }
    *buf = (void *)(uintptr_t)(p + guard);
    return TACT_OK;
}

static CUdeviceptr s_ptr(const void *buf) { return (CUdeviceptr)(uintptr_t)buf; }

static void s_free(ta_device_t *d, void *buf) {
    if (!buf || s_cu.ctx_set(d->ctx) != S_CUDA_SUCCESS) return;
    s_cu.mem_free(s_ptr(buf) - (d->guards ? TA_GUARD_BYTES : 0));
}

static int s_copy_in(ta_device_t *d, void *buf, const void *host, size_t bytes, ta_error_t *err) {
    int rc = s_current(d, err);
    if (rc != TACT_OK || !bytes) return rc;
    CUresult r = s_cu.htod_async(s_ptr(buf), host, bytes, d->stream);
    return r == S_CUDA_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, d->index, "cannot copy to the GPU", r);
}

static int s_zero(ta_device_t *d, void *buf, size_t bytes, ta_error_t *err) {
    int rc = s_current(d, err);
    if (rc != TACT_OK || !bytes) return rc;
    CUresult r = s_cu.memset_async(s_ptr(buf), 0, bytes, d->stream);
    return r == S_CUDA_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, d->index, "cannot zero a buffer", r);
}

/* A failure the stream reported, naming the kernels it ran since the last
 * sync (the driver does not say which one failed); the context is
 * unusable after a kernel's fault. */
static int s_stream_failed(ta_device_t *d, CUresult r, ta_error_t *err) {
    d->lost = 1;
    if (!d->launched) return s_fail(err, TACT_EDEVICE, d->index, "the stream failed (a copy)", r);
    char what[200];
    snprintf(what, sizeof what, "the stream failed running kernel %s%s", d->last,
             d->launched > 1 ? " or one of the kernels launched before it since the last sync" : "");
    return s_fail(err, TACT_EDEVICE, d->index, what, r);
}

static int s_copy_out(ta_device_t *d, void *host, const void *buf, size_t bytes, ta_error_t *err) {
    int rc = s_current(d, err);
    if (rc != TACT_OK || !bytes) return rc;
    CUresult r = s_cu.dtoh_async(host, s_ptr(buf), bytes, d->stream);
    if (r == S_CUDA_SUCCESS) r = s_cu.stream_sync(d->stream);
    return r == S_CUDA_SUCCESS ? TACT_OK : s_stream_failed(d, r, err);
}

static void s_unload(ta_device_t *d, void *prog) {
    s_prog_t *p = prog;
    if (!p) return;
    s_module_t *m = p->module;
    if (m && --m->refs == 0) {
        s_module_t **at = &d->modules;
        while (*at && *at != m) at = &(*at)->next;
        if (*at) *at = m->next;
        if (s_cu.ctx_set(d->ctx) == S_CUDA_SUCCESS) s_cu.module_unload(m->module);
        ta_free(m);
    }
    ta_free(p);
}

static int s_load(ta_device_t *d, const void *bytes, size_t len, const char *name, void **prog, ta_error_t *err) {
    *prog = NULL;
    int rc = s_current(d, err);
    if (rc != TACT_OK) return rc;
    s_prog_t *p = ta_calloc(1, sizeof *p);
    if (!p) return ta_error_set(err, TACT_ENOMEM, "CUDA: out of memory");
    snprintf(p->name, sizeof p->name, "%s", name);
    uint64_t h[2];
    ta_hash128(bytes, len, h);
    s_module_t *m = d->modules;
    while (m && (m->h[0] != h[0] || m->h[1] != h[1] || m->len != len)) m = m->next;
    if (!m) {
        /* A cubin (ELF) or PTX text, which the driver reads to its NUL:
         * the compiler's images end with one; anything else is refused. */
        const uint8_t *img = bytes;
        if (len < 5 || img[len - 1] != 0 || (memcmp(img, "\177ELF", 4) != 0 && !memchr(img, '.', len))) {
            ta_free(p);
            return ta_error_set(err, TACT_ECOMPILE, "CUDA:%d: kernel %s: the program is neither a cubin nor PTX ending with a NUL", d->index, name);
        }
        CUmodule module;
        CUresult r = s_cu.module_load(&module, bytes);
        if (r != S_CUDA_SUCCESS) {
            char what[128];
            snprintf(what, sizeof what, "kernel %s: the driver does not load its program", name);
            ta_free(p);
            return s_fail(err, TACT_ECOMPILE, d->index, what, r);
        }
        if (!(m = ta_calloc(1, sizeof *m))) {
            s_cu.module_unload(module);
            ta_free(p);
            return ta_error_set(err, TACT_ENOMEM, "CUDA: out of memory");
        }
        m->h[0] = h[0], m->h[1] = h[1], m->len = len, m->module = module;
        m->next = d->modules;
        d->modules = m;
    }
    m->refs++;
    p->module = m;
    CUresult r = s_cu.module_function(&p->fn, m->module, name);
    if (r != S_CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "the program defines no kernel %s", name);
        s_unload(d, p);
        return s_fail(err, TACT_ECOMPILE, d->index, what, r);
    }
    /* A kernel whose block shares a reduce has a float of shared memory
     * per thread (printer_cuda.c); the others have none. */
    int shared = 0;
    r = s_cu.func_attr(&shared, S_FUNC_SHARED_SIZE_BYTES, p->fn);
    if (r != S_CUDA_SUCCESS || shared < 0 || shared % 4 || shared / 4 > 1024) {
        s_unload(d, p);
        return ta_error_set(err, TACT_ECOMPILE, "CUDA:%d: kernel %s: %d bytes of shared memory are not a block's floats", d->index, name, shared);
    }
    p->shared = shared > 0;
    p->block = shared ? (unsigned)shared / 4 : 128;
    *prog = p;
    return TACT_OK;
}

static int s_launch(ta_device_t *d, void *prog, const ta_launch_t *l, ta_error_t *err) {
    s_prog_t *p = prog;
    int64_t align = l->align < 1 ? 1 : l->align, items = l->n / align;
    if (l->n <= 0) return TACT_OK;
    if (l->n % align) return ta_error_set(err, TACT_EDEVICE, "CUDA: kernel %s: %lld outputs are not whole items of %lld", p->name, (long long)l->n, (long long)align);
    int rc = s_current(d, err);
    if (rc != TACT_OK) return rc;
    /* A block per output where the block shares its reduce, else blocks
     * of 128 threads over the items (the kernel returns past n / align). */
    int64_t blocks = p->shared ? items : (items + p->block - 1) / p->block;
    if (blocks > INT32_MAX) return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: kernel %s: %lld blocks are more than a grid takes", d->index, p->name, (long long)blocks);
    if (l->nbufs > 64) return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: kernel %s: %d buffers are more than a launch takes here (64)", d->index, p->name, l->nbufs);
    CUdeviceptr ptrs[64];
    void *params[66];
    for (int b = 0; b < l->nbufs; b++) {
        ptrs[b] = s_ptr(l->bufs[b]);
        params[b] = &ptrs[b];
    }
    /* The argument values by value (the kernel's struct of at least one word), then n. */
    uint64_t none = 0;
    long long n = (long long)l->n;
    params[l->nbufs] = l->nargs > 0 ? (void *)(uintptr_t)l->args : (void *)&none;
    params[l->nbufs + 1] = &n;
    CUresult r = s_cu.launch(p->fn, (unsigned)blocks, 1, 1, p->block, 1, 1, 0, d->stream, params, NULL);
    if (r != S_CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "kernel %s: cannot launch", p->name);
        return s_fail(err, TACT_EDEVICE, d->index, what, r);
    }
    snprintf(d->last, sizeof d->last, "%s", p->name);
    d->launched++;
    return TACT_OK;
}

enum { S_STOP_GRACE_MS = 10000 }; /* after a stop, how long a running kernel may take to end */

static int s_sync(ta_device_t *d, ta_device_tick_fn tick, void *ud, ta_error_t *err) {
    int rc = s_current(d, err);
    if (rc != TACT_OK) return rc;
    /* Polled: 10 us doubling to 1 ms between queries, a tick every 20 ms. */
    struct timespec pause = {0, 10000}, t0, now, since = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int stopped = 0;
    CUresult r;
    while ((r = s_cu.stream_query(d->stream)) == S_CUDA_NOT_READY) {
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 1000000) pause.tv_nsec *= 2;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (stopped) {
            if ((now.tv_sec - since.tv_sec) * 1000 + (now.tv_nsec - since.tv_nsec) / 1000000 > S_STOP_GRACE_MS) {
                d->lost = 1;
                return ta_error_set(err, TACT_EDEVICE, "CUDA:%d: stopped, and the GPU did not finish its work within %d s; it may be lost", d->index,
                                    S_STOP_GRACE_MS / 1000);
            }
        } else if (tick && ms >= 20) {
            t0 = now;
            if ((stopped = tick(ud) != 0)) since = now;
        }
    }
    int launched = d->launched;
    d->launched = 0;
    if (r != S_CUDA_SUCCESS) {
        d->launched = launched;
        rc = s_stream_failed(d, r, err);
        d->launched = 0;
        return rc;
    }
    return stopped ? ta_error_set(err, TACT_ESTOPPED, "CUDA:%d: stopped (the context is closing)", d->index) : TACT_OK;
}

static int s_threads(const ta_device_t *d) {
    (void)d;
    return 1;
}

static int s_check_guards(ta_device_t *d, void *buf, size_t bytes, ta_error_t *err) {
    if (!d->guards) return TACT_OK;
    static _Thread_local uint8_t before[TA_GUARD_BYTES], after[TA_GUARD_BYTES];
    int rc = s_copy_out(d, before, (const void *)(uintptr_t)(s_ptr(buf) - TA_GUARD_BYTES), TA_GUARD_BYTES, err);
    if (rc == TACT_OK) rc = s_copy_out(d, after, (const void *)(uintptr_t)(s_ptr(buf) + bytes), TA_GUARD_BYTES, err);
    if (rc != TACT_OK) return rc;
    char what[32];
    snprintf(what, sizeof what, "CUDA:%d", d->index);
    return ta_guards_verify(before, after, what, err);
}

static void s_caps(const ta_device_t *d, ta_device_caps_t *out) {
    (void)d;
    *out = (ta_device_caps_t){.host_memory = 0, .async_copy = 1, .peer_copy = 1, .events = 1};
}

/* Between two GPUs (or within one): the driver copies peer to peer where
 * the pair allows, else through the host itself.  dst's stream waits for
 * what src enqueued before. */
static int s_copy_peer(ta_device_t *dst, void *dbuf, ta_device_t *src, const void *sbuf, size_t bytes, ta_error_t *err) {
    CUevent e = NULL;
    int rc = s_current(src, err);
    if (rc != TACT_OK) return rc;
    CUresult r = s_cu.event_create(&e, S_EVENT_DISABLE_TIMING);
    if (r == S_CUDA_SUCCESS) r = s_cu.event_record(e, src->stream);
    if (r == S_CUDA_SUCCESS && (rc = s_current(dst, err)) != TACT_OK) {
        s_cu.event_destroy(e);
        return rc;
    }
    if (r == S_CUDA_SUCCESS) r = s_cu.stream_wait_event(dst->stream, e, 0);
    if (r == S_CUDA_SUCCESS && bytes) r = s_cu.peer_async(s_ptr(dbuf), dst->ctx, s_ptr(sbuf), src->ctx, bytes, dst->stream);
    if (e) s_cu.event_destroy(e); /* released once reached */
    if (r != S_CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "cannot copy from CUDA:%d", src->index);
        return s_fail(err, TACT_EDEVICE, dst->index, what, r);
    }
    return TACT_OK;
}

static int s_event_record(ta_device_t *d, ta_event_t **ev, ta_error_t *err) {
    *ev = NULL;
    int rc = s_current(d, err);
    if (rc != TACT_OK) return rc;
    ta_event_t *e = ta_calloc(1, sizeof *e);
    if (!e) return ta_error_set(err, TACT_ENOMEM, "CUDA: out of memory for an event");
    CUresult r = s_cu.event_create(&e->e, S_EVENT_DISABLE_TIMING);
    if (r == S_CUDA_SUCCESS) r = s_cu.event_record(e->e, d->stream);
    if (r != S_CUDA_SUCCESS) {
        if (e->e) s_cu.event_destroy(e->e);
        ta_free(e);
        return s_fail(err, TACT_EDEVICE, d->index, "cannot record an event", r);
    }
    e->dev = d;
    *ev = e;
    return TACT_OK;
}

static int s_event_wait(ta_device_t *d, ta_event_t *ev, ta_error_t *err) {
    int rc = s_current(d, err);
    if (rc != TACT_OK) return rc;
    CUresult r = s_cu.stream_wait_event(d->stream, ev->e, 0);
    return r == S_CUDA_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, d->index, "cannot wait for an event", r);
}

static int s_event_sync(ta_event_t *ev, ta_error_t *err) {
    CUresult r = s_cu.ctx_set(ev->dev->ctx);
    if (r == S_CUDA_SUCCESS) r = s_cu.event_sync(ev->e);
    return r == S_CUDA_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, ev->dev->index, "an event's work failed", r);
}

static void s_event_free(ta_event_t *ev) {
    if (!ev) return;
    s_cu.event_destroy(ev->e);
    ta_free(ev);
}

const ta_device_ops_t ta_cuda_device = {
    .kind = "CUDA",
    .host_memory = 0,
    .count = s_count,
    .why_none = s_why_none,
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
    .check_guards = s_check_guards,
    .caps = s_caps,
    .copy_peer = s_copy_peer,
    .event_record = s_event_record,
    .event_wait = s_event_wait,
    .event_sync = s_event_sync,
    .event_free = s_event_free,
};
