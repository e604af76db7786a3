/* opencl.c - the OpenCL device: every platform's devices through the ICD loader, one in-order queue each, programs built from OpenCL C. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ast.h"
#include "cc.h"
#include "device.h"
#include "hash.h"
#include "mem.h"

/*
 * Devices are numbered over every platform, in the loader's order (CL:0
 * is the first device of the first platform).  A device holds a context
 * and one in-order command queue: copies in and launches are enqueued and
 * return at once, sync waits for the queue, a copy out blocks.  A program
 * is OpenCL C source, built for the device (correctly rounded division
 * and square root where the device offers it, as the CPU computes them);
 * a build failure is TACT_ECOMPILE with the start of the build log.
 */

struct ta_device {
    cl_device_id id;
    cl_context ctx;
    cl_command_queue q;
    cl_command_queue warm_q; /* a loading kernel's trial run (s_warm), which waits for no other work */
    cl_mem no_args;          /* one ulong, the args of a kernel that has none */
    cl_mem warm;             /* zeros for every argument of a trial run: the most argument values a kernel reads before it returns */
    uint64_t max_buffer;
    int index;
    int exact_div_sqrt; /* CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT */
    int guards;         /* a buffer is a sub-buffer of one with guards around it */
    char cache_dir[900]; /* program binaries, by source, device and driver ("": none kept) */
    char identity[400];  /* the device's name and driver version */
    struct s_module *modules; /* the programs built, once each */
    int lost;                 /* a stopped wait gave up: the device is not waited for again */
    char last[64];            /* the last kernel launched since the last sync, and how many were */
    int launched;
};

/* A marker in a device's queue. */
struct ta_event {
    ta_device_t *dev;
    cl_event e;
};

static atomic_int s_binary_hits;
int ta_cl_binary_hits(void) { return atomic_load(&s_binary_hits); }

/* A program (the kernels a compiler built together), built once per
 * device however many of its kernels run; a kernel is a handle on it. */
typedef struct s_module {
    uint64_t h[2];
    size_t len;
    cl_program program;
    int refs;
    struct s_module *next;
} s_module_t;

typedef struct {
    struct s_module *module;
    cl_kernel kernel;
    size_t group; /* the largest work group the kernel takes here */
    size_t shared; /* the work group the kernel requires (reqd_work_group_size): its items share each output; 0: none */
    size_t local;  /* the work group of every launch (the driver builds code for each size it meets: one size, built at load) */
    char name[64];
} s_prog_t;

/* The names of the errors a device may give. */
static const char *s_cl_error(cl_int e) {
    switch (e) {
    case CL_DEVICE_NOT_FOUND: return "device not found";
    case CL_DEVICE_NOT_AVAILABLE: return "device not available";
    case CL_COMPILER_NOT_AVAILABLE: return "no compiler";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "buffer allocation failed";
    case CL_OUT_OF_RESOURCES: return "out of resources";
    case CL_OUT_OF_HOST_MEMORY: return "out of host memory";
    case CL_BUILD_PROGRAM_FAILURE: return "build failed";
    case CL_INVALID_VALUE: return "invalid value";
    case CL_INVALID_BUFFER_SIZE: return "invalid buffer size";
    case CL_INVALID_KERNEL_NAME: return "no such kernel";
    case CL_INVALID_KERNEL_ARGS: return "kernel arguments not set";
    case CL_INVALID_ARG_INDEX: return "argument index out of range";
    case CL_INVALID_ARG_SIZE: return "argument of the wrong size";
    case CL_INVALID_WORK_GROUP_SIZE: return "invalid work group size";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "invalid global work size";
    case CL_INVALID_MEM_OBJECT: return "invalid buffer";
    case -1001: return "no OpenCL platform (no ICD installed)"; /* CL_PLATFORM_NOT_FOUND_KHR */
    default: return "error";
    }
}

static int s_fail(ta_error_t *err, int code, const char *what, cl_int e) {
    return ta_error_set(err, code, "CL: %s: %s (%d)", what, s_cl_error(e), (int)e);
}

/* The device_ids of every platform, in order, into out (at most max);
 * returns how many there are. */
static int s_enumerate(cl_device_id *out, int max, cl_platform_id *platforms_of) {
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) return 0;
    cl_platform_id ps[16];
    if (np > 16) np = 16;
    if (clGetPlatformIDs(np, ps, NULL) != CL_SUCCESS) return 0;
    int n = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS) continue;
        cl_device_id ds[64];
        if (nd > 64) nd = 64;
        if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, nd, ds, NULL) != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < nd; d++, n++)
            if (n < max) {
                out[n] = ds[d];
                if (platforms_of) platforms_of[n] = ps[p];
            }
    }
    return n;
}

static int s_count(void) { return s_enumerate(NULL, 0, NULL); }

static int s_find(int index, cl_device_id *id, cl_platform_id *platform, ta_error_t *err) {
    cl_device_id ds[64];
    cl_platform_id ps[64];
    int n = s_enumerate(ds, 64, ps);
    if (index < 0 || index >= n || index >= 64)
        return ta_error_set(err, TACT_EDEVICE, "CL:%d: no such OpenCL device (this machine has %d)", index, n);
    *id = ds[index];
    if (platform) *platform = ps[index];
    return TACT_OK;
}

static int s_describe(int index, ta_device_info_t *info, ta_error_t *err) {
    cl_device_id id = NULL;
    cl_platform_id platform = NULL;
    int rc = s_find(index, &id, &platform, err);
    if (rc != TACT_OK) return rc;
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "CL:%d", index);
    char pname[128] = "", version[128] = "", ext[8192] = "";
    cl_uint units = 0;
    cl_ulong mem = 0, max_alloc = 0;
    size_t group = 0;
    clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof info->model - 1, info->model, NULL);
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
    clGetDeviceInfo(id, CL_DRIVER_VERSION, sizeof version - 1, version, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof group, &group, NULL);
    clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
    snprintf(info->driver, sizeof info->driver, "%s %s", pname, version);
    info->compute_units = (int)units;
    info->memory = mem;
    info->max_buffer = max_alloc;
    info->max_group = (int64_t)group;
    info->fp16 = strstr(ext, "cl_khr_fp16") != NULL;
    info->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    /* The target: OpenCL C as the driver compiles it, with the options
     * s_build gives it. */
    cl_uint width = 0;
    cl_ulong local = 0;
    cl_device_fp_config fp = 0;
    char clc[64] = "";
    clGetDeviceInfo(id, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof width, &width, NULL);
    clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    clGetDeviceInfo(id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    clGetDeviceInfo(id, CL_DEVICE_OPENCL_C_VERSION, sizeof clc - 1, clc, NULL);
    snprintf(info->language, sizeof info->language, "OpenCL C");
    info->vector_bytes = (int)(width ? width : 1) * 4;
    info->fma = (fp & CL_FP_FMA) != 0;
    info->local_memory = local;
    snprintf(info->compiler, sizeof info->compiler, "%s (%s)", clc, info->driver);
    snprintf(info->flags, sizeof info->flags, "%s",
             fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT ? "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt" : "-cl-std=CL1.2");
    return TACT_OK;
}

static void s_close(ta_device_t **pd) {
    ta_device_t *d = *pd;
    if (!d) return;
    *pd = NULL;
    if (d->q && !d->lost) clFinish(d->q);
    if (d->q) clReleaseCommandQueue(d->q);
    if (d->warm_q) clReleaseCommandQueue(d->warm_q);
    while (d->modules) { /* programs whose kernels were not all unloaded */
        struct s_module *m = d->modules;
        d->modules = m->next;
        clReleaseProgram(m->program);
        ta_free(m);
    }
    if (d->no_args) clReleaseMemObject(d->no_args);
    if (d->warm) clReleaseMemObject(d->warm);
    if (d->ctx) clReleaseContext(d->ctx);
    ta_free(d);
}

static int s_open(ta_device_t **out, int index, const ta_device_options_t *opt, ta_error_t *err) {
    int guards = opt->guards;
    *out = NULL;
    ta_device_t *d = ta_calloc(1, sizeof *d);
    if (!d) return ta_error_set(err, TACT_ENOMEM, "CL: out of memory");
    d->index = index;
    d->guards = guards;
    if (opt->cache_dir) snprintf(d->cache_dir, sizeof d->cache_dir, "%s", opt->cache_dir);
    ta_device_info_t info;
    int rc = s_describe(index, &info, err);
    if (rc == TACT_OK) rc = s_find(index, &d->id, NULL, err);
    if (rc == TACT_OK && !info.fp64) /* kernel arguments and some helpers are float64 */
        rc = ta_error_set(err, TACT_EDEVICE, "CL:%d (%s) has no double precision (cl_khr_fp64), which tact's OpenCL kernels need for now", index,
                          info.model);
    cl_int e = CL_SUCCESS;
    if (rc == TACT_OK && !(d->ctx = clCreateContext(NULL, 1, &d->id, NULL, NULL, &e))) rc = s_fail(err, TACT_EDEVICE, "cannot create a context", e);
    if (rc == TACT_OK && !(d->q = clCreateCommandQueue(d->ctx, d->id, 0, &e))) rc = s_fail(err, TACT_EDEVICE, "cannot create a queue", e);
    if (rc == TACT_OK && !(d->warm_q = clCreateCommandQueue(d->ctx, d->id, 0, &e))) rc = s_fail(err, TACT_EDEVICE, "cannot create a queue", e);
    uint64_t zero = 0;
    if (rc == TACT_OK && !(d->no_args = clCreateBuffer(d->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero, &e)))
        rc = s_fail(err, TACT_EDEVICE, "cannot create a buffer", e);
    static const uint64_t zeros[TA_AST_MAX_NODES]; /* a kernel has at most one argument value per node */
    if (rc == TACT_OK && !(d->warm = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zeros, (void *)zeros, &e)))
        rc = s_fail(err, TACT_EDEVICE, "cannot create a buffer", e);
    cl_device_fp_config fp = 0;
    cl_uint base_align = 0;
    if (rc == TACT_OK && guards) {
        clGetDeviceInfo(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof base_align, &base_align, NULL);
        if (base_align / 8 > TA_GUARD_BYTES || (base_align / 8 && TA_GUARD_BYTES % (base_align / 8)))
            rc = ta_error_set(err, TACT_EDEVICE, "CL:%d: sub-buffers must start at multiples of %u bytes: no guards", index, base_align / 8);
    }
    if (rc == TACT_OK) {
        clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
        d->max_buffer = info.max_buffer;
        d->exact_div_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
        snprintf(d->identity, sizeof d->identity, "%s|%s", info.model, info.driver); /* the driver: the platform's name and the driver's version */
    }
    if (rc != TACT_OK) {
        s_close(&d);
        return rc;
    }
    *out = d;
    return TACT_OK;
}

static int s_alloc(ta_device_t *d, size_t bytes, void **buf, ta_error_t *err) {
    size_t guard = d->guards ? TA_GUARD_BYTES : 0;
    if (bytes > d->max_buffer - 2 * guard)
        return ta_error_set(err, TACT_ENOMEM, "CL:%d: a buffer of %zu bytes is larger than the device's largest (%llu bytes)", d->index, bytes,
                            (unsigned long long)d->max_buffer);
    cl_int e;
    size_t size = (bytes ? bytes : 1) + 2 * guard;
    cl_mem m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, size, NULL, &e);
    if (!m) return s_fail(err, e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_HOST_MEMORY ? TACT_ENOMEM : TACT_EDEVICE, "cannot allocate a buffer", e);
    if (guard) { /* the pattern before and after; the buffer is the region between */
        uint8_t pattern[TA_GUARD_BYTES];
        for (size_t i = 0; i < guard; i++) pattern[i] = ta_guard_byte(i);
        e = clEnqueueWriteBuffer(d->q, m, CL_TRUE, 0, guard, pattern, 0, NULL, NULL);
        if (e == CL_SUCCESS) e = clEnqueueWriteBuffer(d->q, m, CL_TRUE, size - guard, guard, pattern, 0, NULL, NULL);
        cl_buffer_region region = {guard, bytes ? bytes : 1};
        cl_mem inner = e == CL_SUCCESS ? clCreateSubBuffer(m, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &e) : NULL;
        clReleaseMemObject(m); /* the sub-buffer holds its parent */
        if (!inner) return s_fail(err, TACT_EDEVICE, "cannot make a guarded buffer", e);
        m = inner;
    }
    *buf = m;
    return TACT_OK;
}

static void s_free(ta_device_t *d, void *buf) {
    (void)d;
    if (buf) clReleaseMemObject(buf);
}

static int s_check_guards(ta_device_t *d, void *buf, size_t bytes, ta_error_t *err) {
    if (!d->guards) return TACT_OK;
    cl_mem parent = NULL;
    cl_int e = clGetMemObjectInfo(buf, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL);
    if (e != CL_SUCCESS || !parent) return s_fail(err, TACT_EDEVICE, "a guarded buffer has no parent", e);
    uint8_t before[TA_GUARD_BYTES], after[TA_GUARD_BYTES];
    size_t end = TA_GUARD_BYTES + (bytes ? bytes : 1);
    e = clEnqueueReadBuffer(d->q, parent, CL_TRUE, 0, sizeof before, before, 0, NULL, NULL);
    if (e == CL_SUCCESS) e = clEnqueueReadBuffer(d->q, parent, CL_TRUE, end, sizeof after, after, 0, NULL, NULL);
    if (e != CL_SUCCESS) return s_fail(err, TACT_EDEVICE, "cannot read the guards", e);
    char what[16];
    snprintf(what, sizeof what, "CL:%d", d->index);
    return ta_guards_verify(before, after, what, err);
}

static int s_copy_in(ta_device_t *d, void *buf, const void *host, size_t bytes, ta_error_t *err) {
    if (!bytes) return TACT_OK;
    cl_int e = clEnqueueWriteBuffer(d->q, buf, CL_FALSE, 0, bytes, host, 0, NULL, NULL);
    return e == CL_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, "cannot copy into a buffer", e);
}

static int s_zero(ta_device_t *d, void *buf, size_t bytes, ta_error_t *err) {
    if (!bytes) return TACT_OK;
    cl_uchar zero = 0;
    cl_int e = clEnqueueFillBuffer(d->q, buf, &zero, 1, 0, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, "cannot zero a buffer", e);
}

static int s_copy_out(ta_device_t *d, void *host, const void *buf, size_t bytes, ta_error_t *err) {
    if (!bytes) return TACT_OK;
    cl_int e = clEnqueueReadBuffer(d->q, (cl_mem)(uintptr_t)buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    return e == CL_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, "cannot copy out of a buffer", e);
}

static void s_unload(ta_device_t *d, void *prog) {
    s_prog_t *p = prog;
    if (!p) return;
    if (p->kernel) clReleaseKernel(p->kernel);
    s_module_t *m = p->module;
    if (m && --m->refs == 0) {
        s_module_t **at = &d->modules;
        while (*at != m) at = &(*at)->next;
        *at = m->next;
        clReleaseProgram(m->program);
        ta_free(m);
    }
    ta_free(p);
}

/* Builds a program from its binary in the cache folder, if one is there
 * and builds; NULL otherwise. */
static cl_program s_from_binary(ta_device_t *d, const char *path, const char *opts) {
    uint8_t *bin;
    size_t blen;
    if (ta_cc_cache_get(path, &bin, &blen) != TACT_OK) return NULL;
    const unsigned char *bp = bin;
    cl_int status = CL_SUCCESS, e;
    cl_program program = clCreateProgramWithBinary(d->ctx, 1, &d->id, &blen, &bp, &status, &e);
    ta_free(bin);
    if (program && (status != CL_SUCCESS || clBuildProgram(program, 1, &d->id, opts, NULL, NULL) != CL_SUCCESS)) {
        clReleaseProgram(program);
        program = NULL;
    }
    return program;
}

/* Builds the program of source bytes: from the binary kept for this source
 * on this device and driver with these options, in the private cache
 * folder and checked against its digest, else from the source (then its
 * binary is kept).  Anything wrong with a binary and the source is built. */
static int s_build(ta_device_t *d, const void *bytes, size_t len, const char *name, cl_program *out, ta_error_t *err) {
    const char *opts = d->exact_div_sqrt ? "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt" : "-cl-std=CL1.2";
    char path[1200] = "";
    if (d->cache_dir[0]) {
        char src_digest[33], key[33], ident[600];
        ta_cc_digest(bytes, len, src_digest);
        snprintf(ident, sizeof ident, "%s|%s|%s", d->identity, opts, src_digest);
        ta_cc_digest(ident, strlen(ident), key);
        snprintf(path, sizeof path, "%s/cl-%s.bin", d->cache_dir, key);
        if ((*out = s_from_binary(d, path, opts))) {
            atomic_fetch_add(&s_binary_hits, 1);
            return TACT_OK;
        }
    }
    const char *src = bytes;
    cl_int e;
    cl_program program = clCreateProgramWithSource(d->ctx, 1, &src, &len, &e);
    if (!program) return s_fail(err, TACT_ECOMPILE, "cannot create a program", e);
    e = clBuildProgram(program, 1, &d->id, opts, NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(program, d->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        for (char *c = log; *c; c++)
            if (*c == '\n') *c = ' ';
        clReleaseProgram(program);
        return ta_error_set(err, TACT_ECOMPILE, "CL:%d: kernel %s does not build: %s", d->index, name, log[0] ? log : s_cl_error(e));
    }
    size_t blen = 0;
    if (path[0] && clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) == CL_SUCCESS && blen) {
        unsigned char *bin = ta_malloc(blen);
        if (bin && clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
            ta_cc_cache_put(d->cache_dir, path, bin, blen); /* a cache that cannot be written only costs time */
        ta_free(bin);
    }
    *out = program;
    return TACT_OK;
}

/* Runs the kernel once over no outputs (n = 0: every work item returns
 * at once), with the work group its launches use, and waits for it: a
 * driver that builds code per launch shape (PoCL links it then) does so
 * now, while the program loads, so a failure it reports is the kernel's
 * compile error, not a failed realize later.  A driver that aborts the
 * process instead cannot be caught here (docs/architecture.md, Devices). */
enum { S_WARM_MS = 300000 }; /* the driver's code generation for the launch shape happens in the trial run: a compile's limit */

static int s_warm(ta_device_t *d, s_prog_t *p, ta_error_t *err) {
    cl_uint nargs = 0;
    cl_int e = clGetKernelInfo(p->kernel, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL);
    if (e == CL_SUCCESS && nargs < 2) e = CL_INVALID_KERNEL_ARGS; /* every kernel ends with its argument values and n */
    for (cl_uint a = 0; e == CL_SUCCESS && a + 1 < nargs; a++) e = clSetKernelArg(p->kernel, a, sizeof(cl_mem), &d->warm);
    cl_long none = 0;
    if (e == CL_SUCCESS) e = clSetKernelArg(p->kernel, nargs - 1, sizeof none, &none);
    size_t local = p->local, global = p->local;
    cl_event ev = NULL;
    if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(d->warm_q, p->kernel, 1, NULL, &global, &local, 0, NULL, &ev);
    if (e == CL_SUCCESS) clFlush(d->warm_q);
    /* Polled, not waited for without end: a driver that never finishes a
     * run over nothing has lost the device. */
    cl_int status = CL_QUEUED;
    struct timespec t0, now, pause = {0, 10000}; /* 10 us, doubling to 1 ms */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (e == CL_SUCCESS && (e = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL)) == CL_SUCCESS &&
           status > CL_COMPLETE) {
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 1000000) pause.tv_nsec *= 2;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > S_WARM_MS) {
            if (ev) clReleaseEvent(ev);
            d->lost = 1;
            return ta_error_set(err, TACT_EDEVICE, "CL:%d: kernel %s: the driver did not finish its trial run over nothing in %d s; the device may be lost",
                                d->index, p->name, S_WARM_MS / 1000);
        }
    }
    if (e == CL_SUCCESS && status < 0) e = status;
    if (ev) clReleaseEvent(ev);
    if (e != CL_SUCCESS)
        return ta_error_set(err, TACT_ECOMPILE, "CL:%d: kernel %s builds but the driver cannot run it: %s (%d)", d->index, p->name, s_cl_error(e), (int)e);
    return TACT_OK;
}

static int s_load(ta_device_t *d, const void *bytes, size_t len, const char *name, void **prog, ta_error_t *err) {
    s_prog_t *p = ta_calloc(1, sizeof *p);
    if (!p) return ta_error_set(err, TACT_ENOMEM, "CL: out of memory");
    snprintf(p->name, sizeof p->name, "%s", name);
    uint64_t h[2];
    ta_hash128(bytes, len, h);
    s_module_t *m = d->modules;
    while (m && (m->h[0] != h[0] || m->h[1] != h[1] || m->len != len)) m = m->next;
    if (!m) {
        cl_program program;
        int rc = s_build(d, bytes, len, name, &program, err);
        if (rc != TACT_OK) {
            ta_free(p);
            return rc;
        }
        if (!(m = ta_calloc(1, sizeof *m))) {
            clReleaseProgram(program);
            ta_free(p);
            return ta_error_set(err, TACT_ENOMEM, "CL: out of memory");
        }
        m->h[0] = h[0], m->h[1] = h[1], m->len = len, m->program = program;
        m->next = d->modules;
        d->modules = m;
    }
    m->refs++;
    p->module = m;
    cl_int e;
    p->kernel = clCreateKernel(m->program, name, &e);
    if (!p->kernel) {
        ta_error_set(err, TACT_ECOMPILE, "CL:%d: the program defines no kernel %s (%s)", d->index, name, s_cl_error(e));
        s_unload(d, p);
        return TACT_ECOMPILE;
    }
    clGetKernelWorkGroupInfo(p->kernel, d->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof p->group, &p->group, NULL);
    size_t req[3] = {0, 0, 0};
    clGetKernelWorkGroupInfo(p->kernel, d->id, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof req, req, NULL);
    p->shared = req[0] > 1 ? req[0] : 0;
    if (p->shared && p->group && p->shared > p->group) {
        ta_error_set(err, TACT_ECOMPILE, "CL:%d: kernel %s needs work groups of %zu items; the device takes %zu", d->index, name, p->shared, p->group);
        s_unload(d, p);
        return TACT_ECOMPILE;
    }
    p->local = p->shared ? p->shared : p->group && p->group < 64 ? p->group : 64;
    int rc = s_warm(d, p, err);
    if (rc != TACT_OK) {
        s_unload(d, p);
        return rc;
    }
    *prog = p;
    return TACT_OK;
}

static int s_launch(ta_device_t *d, void *prog, const ta_launch_t *l, ta_error_t *err) {
    s_prog_t *p = prog;
    int64_t align = l->align < 1 ? 1 : l->align, items = l->n / align;
    if (l->n <= 0) return TACT_OK;
    if (l->n % align) return ta_error_set(err, TACT_EDEVICE, "CL: kernel %s: %lld outputs are not whole items of %lld", p->name, (long long)l->n, (long long)align);
    cl_int e = CL_SUCCESS;
    for (int b = 0; b < l->nbufs && e == CL_SUCCESS; b++) e = clSetKernelArg(p->kernel, (cl_uint)b, sizeof(cl_mem), &l->bufs[b]);
    if (e != CL_SUCCESS) return ta_error_set(err, TACT_EDEVICE, "CL:%d: kernel %s: cannot pass a buffer: %s (%d)", d->index, p->name, s_cl_error(e), (int)e);
    /* The argument values travel in a buffer of their own, released once
     * enqueued (the queue holds it until the kernel ran). */
    cl_mem args = d->no_args;
    if (l->nargs > 0 && !(args = clCreateBuffer(d->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof *l->args * (size_t)l->nargs,
                                                (void *)(uintptr_t)l->args, &e)))
        return ta_error_set(err, TACT_EDEVICE, "CL:%d: kernel %s: cannot pass its argument values: %s (%d)", d->index, p->name, s_cl_error(e), (int)e);
    cl_long n = (cl_long)l->n;
    e = clSetKernelArg(p->kernel, (cl_uint)l->nbufs, sizeof(cl_mem), &args);
    if (e == CL_SUCCESS) e = clSetKernelArg(p->kernel, (cl_uint)l->nbufs + 1, sizeof n, &n);
    /* The kernel's one work group (64 items, or what it requires), the
     * global size rounded up to whole groups: the kernel returns for items
     * past n / align. */
    size_t local = p->local;
    size_t global = ((size_t)items + local - 1) / local * local;
    if (p->shared) global = (size_t)items * p->shared; /* a group per item */
    if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(d->q, p->kernel, 1, NULL, &global, &local, 0, NULL, NULL);
    if (args != d->no_args) clReleaseMemObject(args);
    if (e != CL_SUCCESS) return ta_error_set(err, TACT_EDEVICE, "CL:%d: kernel %s: cannot launch: %s (%d)", d->index, p->name, s_cl_error(e), (int)e);
    snprintf(d->last, sizeof d->last, "%s", p->name);
    d->launched++;
    return TACT_OK;
}

/* The marker's completion, signalled from the driver's callback.  Held by
 * the waiting thread and the callback: a wait that gives up leaves it to
 * the callback, which may come later or never. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, refs;
    cl_int status;
} s_wait_t;

static void s_wait_release(s_wait_t *w) {
    pthread_mutex_lock(&w->lock);
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->lock);
    if (!last) return;
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    ta_free(w);
}

static void CL_CALLBACK s_marked(cl_event ev, cl_int status, void *ud) {
    (void)ev;
    s_wait_t *w = ud;
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    w->status = status;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    s_wait_release(w);
}

enum { S_STOP_GRACE_MS = 10000 }; /* after a stop, how long a running kernel may take to end */

/* A failure the queue reported, naming the kernels it ran since the last
 * sync (the driver does not say which one failed). */
static int s_queue_failed(ta_device_t *d, cl_int e, ta_error_t *err) {
    if (!d->launched) return s_fail(err, TACT_EDEVICE, "the queue failed (a copy)", e);
    return ta_error_set(err, TACT_EDEVICE, "CL:%d: the queue failed running kernel %s%s: %s (%d)", d->index, d->last,
                        d->launched > 1 ? " or one of the kernels launched before it since the last sync" : "", s_cl_error(e), (int)e);
}

static int s_sync_queue(ta_device_t *d, ta_device_tick_fn tick, void *ud, ta_error_t *err) {
    cl_int e;
    if (d->lost) return ta_error_set(err, TACT_EDEVICE, "CL:%d: the device did not finish earlier work; it may be lost", d->index);
    if (!tick) {
        e = clFinish(d->q);
        return e == CL_SUCCESS ? TACT_OK : s_queue_failed(d, e, err);
    }
    /* A marker whose completion wakes this thread at once; between, a
     * tick every 20 ms. */
    s_wait_t *w = ta_calloc(1, sizeof *w);
    if (!w) return ta_error_set(err, TACT_ENOMEM, "CL: out of memory");
    pthread_mutex_init(&w->lock, NULL);
    ta_cond_init_monotonic(&w->cond);
    w->refs = 2;
    cl_event marker;
    e = clEnqueueMarkerWithWaitList(d->q, 0, NULL, &marker);
    if (e == CL_SUCCESS && (e = clSetEventCallback(marker, CL_COMPLETE, s_marked, w)) != CL_SUCCESS) clReleaseEvent(marker);
    if (e != CL_SUCCESS) {
        w->refs = 1; /* no callback will come */
        s_wait_release(w);
        clFinish(d->q);
        return s_fail(err, TACT_EDEVICE, "cannot mark the queue", e);
    }
    clFlush(d->q);
    int stopped = 0, gave_up = 0;
    struct timespec since;
    pthread_mutex_lock(&w->lock);
    while (!w->done && !gave_up) {
        ta_cond_wait_ms(&w->cond, &w->lock, 20);
        if (w->done) continue;
        if (stopped) { /* a kernel that runs cannot be stopped: it gets a grace period */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            gave_up = (ts.tv_sec - since.tv_sec) * 1000 + (ts.tv_nsec - since.tv_nsec) / 1000000 > S_STOP_GRACE_MS;
            continue;
        }
        pthread_mutex_unlock(&w->lock);
        stopped = tick(ud) != 0;
        if (stopped) clock_gettime(CLOCK_MONOTONIC, &since);
        pthread_mutex_lock(&w->lock);
    }
    cl_int status = w->status;
    int done = w->done;
    pthread_mutex_unlock(&w->lock);
    clReleaseEvent(marker);
    s_wait_release(w);
    if (!done) {
        d->lost = 1; /* nothing more is asked of it, not even to finish at close */
        return ta_error_set(err, TACT_EDEVICE, "CL:%d: stopped, and the device did not finish its work within %d s; it may be lost", d->index,
                            S_STOP_GRACE_MS / 1000);
    }
    if (status < 0) return s_queue_failed(d, status, err);
    return stopped ? ta_error_set(err, TACT_ESTOPPED, "CL:%d: stopped (the context is closing)", d->index) : TACT_OK;
}

static int s_sync(ta_device_t *d, ta_device_tick_fn tick, void *ud, ta_error_t *err) {
    int rc = s_sync_queue(d, tick, ud, err);
    d->launched = 0;
    return rc;
}

static int s_threads(const ta_device_t *d) {
    (void)d;
    return 1;
}

static void s_caps(const ta_device_t *d, ta_device_caps_t *out) {
    (void)d; /* each device has a context of its own: no buffer of one is another's */
    *out = (ta_device_caps_t){.host_memory = 0, .async_copy = 1, .peer_copy = 0, .events = 1};
}

static int s_copy_peer(ta_device_t *dst, void *dbuf, ta_device_t *src, const void *sbuf, size_t bytes, ta_error_t *err) {
    (void)dbuf, (void)sbuf, (void)bytes;
    return ta_error_set(err, TACT_EDEVICE, "CL:%d to CL:%d: no copy without the host (each device has an OpenCL context of its own)", src->index,
                        dst->index);
}

static int s_event_record(ta_device_t *d, ta_event_t **ev, ta_error_t *err) {
    if (!(*ev = ta_calloc(1, sizeof **ev))) return ta_error_set(err, TACT_ENOMEM, "CL: out of memory for an event");
    cl_int e = clEnqueueMarkerWithWaitList(d->q, 0, NULL, &(*ev)->e);
    if (e != CL_SUCCESS) {
        ta_free(*ev);
        *ev = NULL;
        return s_fail(err, TACT_EDEVICE, "cannot record an event", e);
    }
    (*ev)->dev = d;
    return TACT_OK;
}

static int s_event_sync(ta_event_t *ev, ta_error_t *err) {
    cl_int e = clWaitForEvents(1, &ev->e);
    return e == CL_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, "an event's work failed", e);
}

/* In the device's queue within one context; a marker of another
 * context's queue is waited for on the host. */
static int s_event_wait(ta_device_t *d, ta_event_t *ev, ta_error_t *err) {
    if (ev->dev->ctx != d->ctx) return s_event_sync(ev, err);
    cl_int e = clEnqueueBarrierWithWaitList(d->q, 1, &ev->e, NULL);
    return e == CL_SUCCESS ? TACT_OK : s_fail(err, TACT_EDEVICE, "cannot wait for an event", e);
}

static void s_event_free(ta_event_t *ev) {
    if (!ev) return;
    clReleaseEvent(ev->e);
    ta_free(ev);
}

const ta_device_ops_t ta_cl_device = {
    .kind = "CL",
    .host_memory = 0,
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
    .check_guards = s_check_guards,
    .caps = s_caps,
    .copy_peer = s_copy_peer,
    .event_record = s_event_record,
    .event_wait = s_event_wait,
    .event_sync = s_event_sync,
    .event_free = s_event_free,
};
