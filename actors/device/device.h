/* device.h - the small asynchronous interface every device implements (DESIGN.md §5); one executor actor drives one device. */
#ifndef TACT_DEVICE_H
#define TACT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/*
 * A device is one kind's file behind this table (cpu.c, opencl.c).  Each
 * open device has one in-order queue: copy_in and launch enqueue work and
 * may return before it ran; sync waits for everything enqueued (the
 * queue's marker: what was enqueued before it is done after it);
 * copy_out returns with the bytes.  Errors are TACT_EDEVICE (the device
 * refused or failed), TACT_ENOMEM, TACT_ECOMPILE (a program that does not
 * build or load) or TACT_ESTOPPED, with err naming the cause.
 *
 * Buffers are the device's own (a host pointer on the CPU, a cl_mem on
 * OpenCL, a CUdeviceptr on CUDA): nothing but the device's own calls may
 * touch them.  Programs are the bytes the compiler pool built for the
 * device's kind: a shared object (CPU), OpenCL C source (CL), or a cubin
 * or PTX ending with a NUL (CUDA).  A kernel computes `align`
 * outputs per work item, n / align items in all (the launch's global
 * size); its arguments are its buffers, in order, then the values of its
 * argument CONSTs (ta_ast_arg_word's encoding) and n:
 *
 *     CPU:  void NAME(int64_t start, int64_t end, void **bufs, const uint64_t *args)
 *           computes outputs [start, end) (multiples of align)
 *     CL:   __kernel void NAME(__global T0 *data0, ..., __global const ulong *args, long n)
 *           work item i (below n / align) computes align outputs: on the CPU
 *           consecutive ones; on CL the kernel decodes which from i
 *     CUDA: extern "C" __global__ void NAME(T0 *data0, ..., struct { uint64_t v[max(nargs, 1)]; } args, int64_t n)
 *           thread blockIdx.x * blockDim.x + threadIdx.x is work item i, as
 *           on CL; a kernel with static shared memory of 4G bytes runs a
 *           block of G threads per item (they share its reduce)
 */

typedef struct ta_device ta_device_t;
typedef struct ta_event ta_event_t;
typedef int (*ta_device_tick_fn)(void *ud);

/* What an open device can do (ggml-backend's device properties): the
 * executor above it asks, never the device's name. */
typedef struct ta_device_caps {
    int host_memory; /* its buffers are host pointers the executor may read and write itself */
    int async_copy;  /* copy_in may return before the bytes moved (the host memory stays the caller's until sync) */
    int peer_copy;   /* copy_peer moves bytes between two open devices of this kind without the host, where the pair allows */
    int events;      /* event_wait makes one queue wait for another's marker on the device (else it waits on the host) */
} ta_device_caps_t;

/* How to open a device. */
typedef struct ta_device_options {
    int threads;           /* CPU: workers, 0 = one per core */
    int guards;            /* every buffer gets TA_GUARD_BYTES of a known pattern before and after it (check_guards) */
    const char *cache_dir; /* the private kernel cache folder (CL keeps program binaries there); NULL: none */
} ta_device_options_t;

/* What `tact devices` lists (tact_device_info in tact.h, field for field). */
typedef struct ta_device_info {
    char name[16];       /* "CPU", "CL:0" */
    char model[TA_REC_MAX_STR + 1];  /* the processor, or the OpenCL device's name */
    char driver[TA_REC_MAX_STR + 1]; /* the OpenCL platform and driver version; "" for the CPU */
    int compute_units;   /* cores, or compute units */
    uint64_t memory;     /* bytes */
    uint64_t max_buffer; /* the largest buffer, in bytes */
    int64_t max_group;   /* the largest work group (CPU: 1) */
    int fp16;            /* computes in half precision natively (CL: cl_khr_fp16) */
    int fp64;            /* computes in double precision (CL: cl_khr_fp64) */
    /* The target its programs are built for (the DEVICE record's TARGET):
     * the kernel language ("C", "OpenCL C"), the widest vector in bytes,
     * fused multiply-add, the local memory per work group in bytes (CPU: 0),
     * bfloat16 arithmetic, and the compiler that builds for it with its
     * flags (CL: the driver's; CPU: filled by whoever builds, codegen). */
    char language[32];
    int vector_bytes;
    int fma;
    int bf16;
    uint64_t local_memory;
    char compiler[TA_REC_MAX_STR + 1];
    char flags[TA_REC_MAX_STR + 1];
} ta_device_info_t;

/* One kernel launch. */
typedef struct ta_launch {
    void **bufs; /* the kernel's buffers, in its order */
    int nbufs;
    const uint64_t *args; /* its argument values (must stay valid until sync) */
    int nargs;
    int64_t n;     /* outputs */
    int64_t align; /* outputs per work item (n is a multiple) */
    uint64_t work; /* iterations over all n: sizes the CPU's ranges */
} ta_launch_t;

typedef struct ta_device_ops {
    const char *kind; /* "CPU", "CL" */
    int host_memory;  /* a buffer is a host pointer the executor may read and write itself */
    /* Devices of this kind present on this machine, and one's description. */
    int (*count)(void);
    /* Why there is none, when count is 0 ("no CUDA driver (libcuda.so.1
     * not found)"); NULL when there are some, or no reason to give. */
    const char *(*why_none)(void);
    int (*describe)(int index, ta_device_info_t *info, ta_error_t *err);
    /* Opens device index (the CPU has one device, which any number of
     * executors may open).  With guards (tests: TACT_CHECK_BOUNDS),
     * check_guards verifies them. */
    int (*open)(ta_device_t **out, int index, const ta_device_options_t *opt, ta_error_t *err);
    void (*close)(ta_device_t **dev);
    /* Buffers: bytes may be 0 (a valid, empty buffer). */
    int (*alloc)(ta_device_t *dev, size_t bytes, void **buf, ta_error_t *err);
    void (*free)(ta_device_t *dev, void *buf);
    /* host stays the caller's until sync. */
    int (*copy_in)(ta_device_t *dev, void *buf, const void *host, size_t bytes, ta_error_t *err);
    /* Enqueues zeroing the buffer's first bytes. */
    int (*zero)(ta_device_t *dev, void *buf, size_t bytes, ta_error_t *err);
    /* Returns when the bytes are in host (after everything enqueued before). */
    int (*copy_out)(ta_device_t *dev, void *host, const void *buf, size_t bytes, ta_error_t *err);
    /* Makes the program bytes runnable (CPU: loads the object; CL: builds
     * the source, keeping the build log in the error); *prog is the
     * device's handle for kernel `name` of it. */
    int (*load)(ta_device_t *dev, const void *bytes, size_t len, const char *name, void **prog, ta_error_t *err);
    void (*unload)(ta_device_t *dev, void *prog);
    /* Enqueues one launch of prog. */
    int (*launch)(ta_device_t *dev, void *prog, const ta_launch_t *l, ta_error_t *err);
    /* Waits for everything enqueued.  With tick (long work) the waiting
     * thread calls tick(ud) every 20 ms or so; when it returns nonzero,
     * work not yet started is dropped, and once what runs has ended sync
     * returns TACT_ESTOPPED. */
    int (*sync)(ta_device_t *dev, ta_device_tick_fn tick, void *ud, ta_error_t *err);
    int (*threads)(const ta_device_t *dev);
    /* Optional (NULL: nothing to do): busy 1 as a plan arrives, before its
     * launches, 0 once it has run, so a device with a pool of threads can
     * have them ready for the first launch and between launches (the CPU:
     * S_HOT_NS in cpu.c).  Never changes what a launch computes. */
    void (*hint)(ta_device_t *dev, int busy);
    /* With guards: TACT_OK if the guards of buf (of bytes) are intact,
     * else TACT_EDEVICE saying which side was written and where. */
    int (*check_guards)(ta_device_t *dev, void *buf, size_t bytes, ta_error_t *err);
    /* What this open device can do. */
    void (*caps)(const ta_device_t *dev, ta_device_caps_t *out);
    /* Enqueues a copy of bytes from src's buffer sbuf to dst's buffer
     * dbuf (two open devices of this kind, both driven by the calling
     * thread), after everything enqueued on either before it, without the
     * host where the pair allows (ggml-backend's cpy_tensor_async).
     * TACT_EDEVICE naming the pair when it does not (copy through the
     * host then: copy_out, copy_in). */
    int (*copy_peer)(ta_device_t *dst, void *dbuf, ta_device_t *src, const void *sbuf, size_t bytes, ta_error_t *err);
    /* Events: a marker after everything enqueued on dev so far
     * (event_record, *ev the caller's to event_free); event_wait makes
     * what dev runs next wait for the marker (on the device where caps
     * say events, else the calling thread waits); event_sync waits on the
     * host until the marker is reached.  An event is of one device of
     * this kind, driven by the calling thread. */
    int (*event_record)(ta_device_t *dev, ta_event_t **ev, ta_error_t *err);
    int (*event_wait)(ta_device_t *dev, ta_event_t *ev, ta_error_t *err);
    int (*event_sync)(ta_event_t *ev, ta_error_t *err);
    void (*event_free)(ta_event_t *ev);
} ta_device_ops_t;

/* A condition variable whose timed waits use the monotonic clock (a clock
 * step stops no heartbeat), and a wait of at most ms milliseconds on it. */
#include <pthread.h>
void ta_cond_init_monotonic(pthread_cond_t *c);
void ta_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, int ms);

enum { TA_GUARD_BYTES = 4096 };

/* The guard pattern's byte at offset i of a guard. */
static inline uint8_t ta_guard_byte(size_t i) { return (uint8_t)(i * 37 + 11); }

/* Checks the two guards of a buffer given as host bytes (before: the
 * TA_GUARD_BYTES before it, after: those after it). */
int ta_guards_verify(const uint8_t *before, const uint8_t *after, const char *what, ta_error_t *err);

extern const ta_device_ops_t ta_cpu_device;
/* The CPU device's programs: a kernel function of a shared object given
 * as bytes (as PROGRAM carries it), loaded through an anonymous memory
 * file, no path on any disk involved (device.h's CPU ABI).  Returns
 * TACT_OK or TACT_ECOMPILE with the loader's text; unload closes it.
 * The CPU device's load uses these; tools and tests run kernels with them. */
typedef void (*ta_kernel_fn)(int64_t start, int64_t end, void **bufs, const uint64_t *args);
typedef struct ta_cpu_kernel {
    char name[64];
    void *dl;
    int memfd; /* its memory file's fd + 1, 0 if none */
    ta_kernel_fn fn;
} ta_cpu_kernel_t;
int ta_cpu_kernel_load(const void *bytes, size_t len, const char *name, ta_cpu_kernel_t *out, ta_error_t *err);
void ta_cpu_kernel_unload(ta_cpu_kernel_t *k);
/* The most threads a CPU device takes: 8 per core, and at least 64. */
int ta_cpu_threads_max(void);
extern const ta_device_ops_t ta_cl_device;
extern const ta_device_ops_t ta_cuda_device;
/* Programs the CL device loaded from its binary cache, in this process (tests). */
int ta_cl_binary_hits(void);

/* The most executors of this process seen running a kernel at the same
 * moment (from a launch to its sync), since the last reset; reset 1 sets
 * it back to 0 after reading.  For tests that devices run in parallel. */
int ta_executor_busy_peak(int reset);

/*
 * Device names: "CPU" or "CPU:k" (k < TA_MAX_CPU_DEVICES: virtual CPU
 * devices, each an executor with threads of its own on the one CPU), "CL"
 * (CL:0) or "CL:k" (the k-th OpenCL device over every platform, in the
 * loader's order).  ta_device_find parses name and checks the device is
 * present: TACT_OK with its kind's table and index, or TACT_EINVAL/
 * TACT_EDEVICE with err saying what is wrong and what is present.
 */
enum { TA_MAX_CPU_DEVICES = 8 };
int ta_device_find(const char *name, const ta_device_ops_t **ops, int *index, ta_error_t *err);

/*
 * Device URIs (DESIGN.md section 5): a device of this process, KIND or
 * KIND:k ("CPU" is CPU:0, "CL" is CL:0, "CUDA:0"), or one in a tact worker,
 * tcp://HOST:PORT/DEVICE[?key=KEY] or ipc://PATH/DEVICE, KEY the worker's
 * CURVE public key (40 characters of Z85).  At most TA_URI_MAX bytes of
 * printable ASCII without spaces or commas.  ta_device_uri checks one
 * (len bytes) and writes it canonical into out (TA_URI_MAX + 1 bytes): a
 * local device must be present ("CPU" for CPU:0, "KIND:k" otherwise); a
 * worker's is its grammar checked, its key left out (the key only says how
 * to reach it).  Returns TACT_OK, TACT_EINVAL for a malformed URI, or
 * TACT_EDEVICE for a device that is not there, err saying which and why.
 */
enum { TA_URI_MAX = 255 };
int ta_device_uri(const char *uri, size_t len, char *out, ta_error_t *err);

/* For a worker's device URI that ta_device_uri accepted: where the worker
 * is ("tcp://HOST:PORT", "ipc://PATH"), the device's name there ("CPU")
 * and the key the URI carries ("" if none), each at most TA_URI_MAX + 1
 * bytes (key: 41).  Returns 1, or 0 for a device of this process. */
int ta_device_remote(const char *uri, char *where, char *local, char *key);

/* Splits a list of device names joined by commas (len bytes, no NUL
 * needed) into *out, one allocation (ta_free it) of n pointers to
 * NUL-terminated names as written (not checked against the devices
 * present).  Returns n, or -1 with err saying what is wrong (an empty
 * name, one longer than TA_URI_MAX).  tact_shard's list is read by it. */
int ta_device_split(const char *list, size_t len, char ***out, ta_error_t *err);

/* A device list as a context takes it ("CPU,CL"): split, each made
 * canonical (ta_device_uri), none twice.  Returns how many into *out (one
 * allocation, ta_free it), or a negative status with err naming the
 * list's fault. */
int ta_device_list_parse(const char *list, char ***out, ta_error_t *err);

/* Describes the devices present into out (at most max); returns how many
 * there are (which may be more than max). */
int ta_device_list(ta_device_info_t *out, int max);

/* Describes the device of this process at uri (canonical: "CPU:1",
 * "CL:0") into *info, its name the uri.  Returns TACT_OK or the error. */
int ta_device_describe(const char *uri, ta_device_info_t *info, ta_error_t *err);

/* The DEVICE record (actors/msg.h) of a described device at uri ("CPU",
 * "CL:0"; later "tcp://host:port/CUDA:0"), its TARGET in *target (rec's
 * target list points at it; the strings point into info, which must
 * outlive both). */
void ta_device_rec_of(const ta_device_info_t *info, const char *uri, ta_device_rec_t *rec, ta_target_rec_t *target);
/* The reverse: a DEVICE record (checked by the codec) into *info and its
 * URI into uri (TA_URI_MAX + 1 bytes).  Returns TACT_OK, or TACT_EPROTO
 * when it has not exactly one TARGET or a string does not fit. */
int ta_device_info_of_rec(const ta_device_rec_t *rec, ta_device_info_t *info, char *uri, ta_error_t *err);

/* Strict determinism (tact_options.strict): the first of the words of a
 * compiler command or its flags that lets the compiler relax floating
 * point ("-ffast-math", "-cl-mad-enable", "--use_fast_math"; "-mrecip"
 * for "-mrecip=all"), or NULL. */
const char *ta_strict_relaxing_flag(const char *words);
/* Why a described device cannot keep strict determinism, into why (""
 * when it can): its compiler or flags relax floating point, or, for
 * OpenCL, its driver does not round float32 division and square root
 * correctly.  Returns 1 when it cannot, else 0. */
int ta_device_strict_why(const ta_device_info_t *info, char *why, size_t len);

#endif
