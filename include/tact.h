/* tact.h - the whole public API of tact, a lazy tensor library built from actors. */
#ifndef TACT_H
#define TACT_H

/*
 * tact ("tensor actors") is a lazy tensor library: building an expression
 * only records it; realizing it runs a pipeline of actors (graph builder,
 * scheduler, memory planner, compiler pool, device executor) that talk only
 * through ZeroMQ messages encoded with msgpack, fuse the expression into
 * kernels, generate C, compile it and run it on all CPU cores.
 *
 * Worked example: (a * b + 1).sum() over two 2x3 float32 tensors.
 *
 *     tact_ctx *ctx;
 *     if (tact_ctx_open(&ctx, NULL) != TACT_OK) return 1;  // in-process, CPU
 *     float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {6, 5, 4, 3, 2, 1};
 *     int64_t shape[2] = {2, 3};
 *     tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
 *     tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 2, shape, y);
 *     tact_tensor *s = tact_sum_all(tact_add(tact_mul(a, b), tact_scalar(ctx, 1.0)));
 *     double v;
 *     if (tact_item(s, &v) != TACT_OK)                  // the first sync point
 *         fprintf(stderr, "%s\n", tact_error_message(s)); // e.g. a shape mismatch
 *     else
 *         printf("%g\n", v);                               // 62
 *     tact_ctx_close(&ctx);                                 // frees every tensor
 *
 * Conventions:
 * - Functions that can fail return a tact_status (TACT_OK is 0, errors are
 *   negative) and never abort the host program on user error.
 * - Tensor builders never return NULL and never block: a bad call (wrong
 *   shapes, a bad axis, a bad dtype) returns an error tensor that carries the
 *   first error (code and message naming the op and the shapes); ops on an
 *   error tensor return it; realize/read/item report it.  This is cairo's
 *   sticky error: check once, at the end.
 * - Tensors belong to the innermost scope open when they were made;
 *   tact_scope_end releases them, except those passed to tact_keep.  There
 *   are no per-op frees.  Closing the context releases everything.
 * - Misuse is an error, not a crash: a NULL tensor, context or buffer
 *   argument gives TACT_EINVAL (from builders, an error tensor that belongs
 *   to no context); an op mixing tensors of two contexts gives an error
 *   tensor, and a realize of another context's tensor TACT_EINVAL.
 *   tact_ctx * and tact_tensor * are checked handles, not pointers: a
 *   tensor used after its scope ended, a context (or its tensors) used after
 *   tact_ctx_close, or a value that was never a handle gives TACT_EINVAL (or
 *   an error tensor saying so), never a crash or another tensor's data.
 * - Threads: a context and its tensors are used by one thread at a time
 *   (any thread, one after another; different contexts in parallel).  A
 *   call made while another thread is inside the same context is refused at
 *   once with TACT_EBUSY (or an error tensor with that status), never
 *   raced.
 * - Limits: a tensor has at most 16 dims and fewer than 2^63 bytes; an
 *   op's sources are at most 3; a message envelope is at most 16 MiB and a
 *   tensor's bytes in one message at most 1 GiB (tact_read of a larger
 *   tensor fails with TACT_ETOOBIG); everything else (tensors per realize,
 *   kernels, graph size) is split, never refused.
 * - Names are tact_<noun>_<verb> or tact_<op>; enum values TACT_<ENUM>_<VALUE>.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TACT_VERSION_MAJOR 0
#define TACT_VERSION_MINOR 1
#define TACT_VERSION_PATCH 0

/* Every status code with its message, defined once. */
#define TACT_STATUS_MAP(XX)                                                    \
    XX(OK,        0,   "success")                                               \
    XX(EINVAL,    -1,  "invalid argument")                                      \
    XX(ENOMEM,    -2,  "out of memory")                                         \
    XX(ETIMEDOUT, -3,  "timed out waiting for a peer")                          \
    XX(EPROTO,    -4,  "malformed message")                                     \
    XX(ETOOBIG,   -5,  "message exceeds the configured size limit")             \
    XX(ETRANSPORT,-6,  "transport error")                                       \
    XX(EIO,       -7,  "file input/output error")                               \
    XX(ECORRUPT,  -8,  "corrupted or truncated log")                            \
    XX(EVERSION,  -9,  "unsupported protocol or file version")                  \
    XX(EACTOR,    -10, "actor failed")                                          \
    XX(ESTOPPED,  -11, "actor is stopped")                                      \
    XX(EMISMATCH, -12, "replay diverged from the recording")                    \
    XX(ENOTFOUND, -13, "no such actor or record")                               \
    XX(ECOMPILE,  -14, "kernel failed to compile")                              \
    XX(ESHAPE,    -15, "invalid shape or axis")                                 \
    XX(EDTYPE,    -16, "unsupported dtype for this op")                         \
    XX(EDEVICE,   -17, "device unavailable or failed")                          \
    XX(EBUSY,     -18, "context in use by another thread")

typedef enum tact_status {
#define TACT_STATUS_ENUM_(name, code, text) TACT_##name = code,
    TACT_STATUS_MAP(TACT_STATUS_ENUM_)
#undef TACT_STATUS_ENUM_
} tact_status;

/* Returns a static, human-readable message for a status code; unknown codes
 * give "unknown status". Never returns NULL. */
const char *tact_strerror(int status);

/* Returns the status code's name, e.g. "ETIMEDOUT"; "UNKNOWN" if unknown. */
const char *tact_status_name(int status);

/* Returns the library version as "MAJOR.MINOR.PATCH" (static storage). */
const char *tact_version(void);

/* ================================================================= devices */

/* A device present on this machine, as `tact devices` lists it.  Names:
 * "CPU" (and virtual devices "CPU:0".."CPU:7", each an executor with
 * threads of its own on the one CPU), "CL:k" (the k-th OpenCL device over
 * every platform, in the ICD loader's order; "CL" is CL:0), "CUDA:k" (the
 * k-th GPU of the CUDA driver, which tact loads when present; "CUDA" is
 * CUDA:0; without the driver, naming one is the error "no CUDA driver
 * (libcuda.so.1 not found)"). */
typedef struct tact_device_info {
    char name[16];       /* "CPU", "CL:0" */
    char model[128];     /* the processor, or the OpenCL device's name */
    char driver[128];    /* the OpenCL platform and driver version; "" for the CPU */
    int compute_units;   /* cores, or OpenCL compute units */
    uint64_t memory;     /* bytes */
    uint64_t max_buffer; /* the largest buffer, in bytes */
    int64_t max_group;   /* the largest OpenCL work group (CPU: 1) */
    int fp16;            /* computes in half precision natively (OpenCL: cl_khr_fp16) */
} tact_device_info;

/* Describes the devices present into out (at most max entries; out may be
 * NULL with max 0) and returns how many there are, which may be more than
 * max.  Never fails: a device that cannot be described says why in its
 * model.  A context computes on one of them (tact_options.devices). */
int tact_devices(tact_device_info *out, int max);

/*
 * The allocator hook (as lua_Alloc): tact calls fn(ud, ptr, old_size, size)
 * for every allocation it makes itself.  size == 0 frees ptr and returns NULL;
 * otherwise it behaves as realloc (ptr may be NULL) and returns NULL on
 * failure, which tact reports as TACT_ENOMEM without losing state.  Passing
 * fn == NULL restores the default (malloc/realloc/free).  Install it before
 * creating any tact object; memory must be freed by the allocator that
 * allocated it.  ZeroMQ and msgpack-c keep their own allocators.
 */
/* The element types, in the reference's order of promotion priority. */
#define TACT_DTYPE_MAP(XX)                       \
    XX(BOOL, bool, 1)                            \
    XX(INT8, int8, 1)                            \
    XX(UINT8, uint8, 1)                          \
    XX(INT16, int16, 2)                          \
    XX(UINT16, uint16, 2)                        \
    XX(INT32, int32, 4)                          \
    XX(UINT32, uint32, 4)                        \
    XX(INT64, int64, 8)                          \
    XX(UINT64, uint64, 8)                        \
    XX(FLOAT16, float16, 2)                      \
    XX(BFLOAT16, bfloat16, 2)                    \
    XX(FLOAT32, float32, 4)                      \
    XX(FLOAT64, float64, 8)

typedef enum tact_dtype {
#define TACT_DTYPE_ENUM_(NAME, name, size) TACT_##NAME,
    TACT_DTYPE_MAP(TACT_DTYPE_ENUM_)
#undef TACT_DTYPE_ENUM_
    TACT_DTYPE_COUNT
} tact_dtype;

typedef void *(*tact_alloc_fn)(void *ud, void *ptr, size_t old_size, size_t size);
void tact_set_allocator(tact_alloc_fn fn, void *ud);

/* ================================================================ contexts */

typedef struct tact_ctx tact_ctx;
typedef struct tact_tensor tact_tensor;

typedef struct tact_options {
    /* How the actors reach each other: "inproc" (default), "ipc" (Unix
     * sockets in a private 0700 folder, removed at close), "tcp" (loopback,
     * authenticated and encrypted with CURVE: only this context's own key
     * is admitted, and a message whose sender does not match its key is
     * refused), or "tcp-insecure" (plain tcp: any local process that finds
     * the port can send as anyone; for benchmarks and debugging only). */
    const char *transport;
    /* The devices the context computes on, device URIs separated by
     * commas: "CPU", virtual CPU devices "CPU:1".."CPU:7" (each its own
     * executor with cpu_threads threads; "CPU:0" is "CPU"), OpenCL
     * devices "CL" (CL:0) or "CL:k" (tact_devices lists them), as many as
     * the machine has: "CPU,CPU:1", "CPU,CL"; and devices of `tact worker`
     * processes, here or on other machines: tcp://HOST:PORT/DEVICE?key=KEY
     * (KEY the worker's public key, as `tact worker --print-uri` prints it;
     * it may be left out when known_workers lists the worker) or
     * ipc://PATH/DEVICE (docs/workers.md), mixed freely with local ones.  A
     * worker that dies or hangs fails the realizes that need it within 2 s,
     * naming it; the other devices go on.  The first is where new tensors are made; each has its own executor, and
     * they run at the same time.  NULL: $TACT_DEVICE, else "CPU".  An
     * absent, malformed or repeated device fails the open, naming the
     * devices present. */
    const char *devices;
    /* Threads of each CPU device: 0 (one per core) to 8 per core (at
     * least 64); more fails the open at once with TACT_EINVAL. */
    int cpu_threads;
    int compile_workers;   /* compiler pool size: 0 (2) to 8 */
    /* Record every message to this file (created private, mode 0600: it
     * holds every tensor's bytes; a FIFO or device is refused); NULL: off. */
    const char *log_path;
    /* How long any wait lasts without a sign of life: a stage that works
     * (a long compile, a long kernel) sends heartbeats, so only a stage that
     * is gone or stuck makes a wait fail with TACT_ETIMEDOUT.  0 (60000)
     * to INT_MAX milliseconds.  Compiles are also limited to
     * TACT_COMPILE_LIMIT_S seconds (1 to 86400; 300). */
    int timeout_ms;
    /* Devices of this machine (of devices) to run in a worker process of
     * their own, started by the context and stopped with it, as a comma
     * list ("CL", "CL:0,CL:1"): a driver that aborts or crashes there
     * takes its process down, not the program's, and is an error naming
     * the device (docs/workers.md, Isolation).  The tact command runs the
     * worker: $TACT_WORKER, else the installed one, else the build tree's.
     * NULL: $TACT_ISOLATE, else none.  Entries not among devices are
     * ignored; logs and results are those of the devices in-process. */
    const char *isolate;
    /* Strict determinism (docs/replay.md, Strict mode): 1 holds the run
     * to bits that tact's own code fixes, whatever the machine's math
     * library or drivers: float32 log2 and sin are computed by tact's own
     * routines on every device (the same bits on CPU, OpenCL and CUDA),
     * and what cannot be held to that is refused, naming it: float64
     * log2, sin and exp2 (the platform's), a kernel compiler whose flags
     * relax floating point (TACT_CC="cc -ffast-math"), a device that does
     * not round division and square root correctly.  0: $TACT_STRICT
     * ("1" on, "0" or unset off); -1: off whatever the environment says. */
    int strict;
} tact_options;

/* Fills o with the defaults above (all zero: a zero-filled struct is the
 * defaults too). */
void tact_options_default(tact_options *o);

/*
 * Opens a context: starts the actors and returns once they are all ready.
 * opts may be NULL for the defaults.  Returns TACT_OK and *out, or an error
 * with *out NULL (the reason is printed by nobody: call
 * tact_last_open_error for its text).
 */
int tact_ctx_open(tact_ctx **out, const tact_options *opts);
/* The text of the last tact_ctx_open failure in this thread. */
const char *tact_last_open_error(void);

/* Releases every tensor, stops the actors and frees the context; *ctx is
 * set to NULL, and every copy of the handle, and every tensor of the
 * context, is refused from now on.  Realizes still in flight get the
 * context's timeout to end (call tact_wait first to wait for them however
 * long they take); after it they are stopped: a compile is killed, a kernel
 * starts no further range, and TACT_ETIMEDOUT is returned.  Returns TACT_OK
 * or the first error met (the context is freed either way; TACT_ETIMEDOUT
 * also when a stage did not stop in time and was left running).  Safe with
 * *ctx == NULL; TACT_EINVAL for a context closed already, TACT_EBUSY while
 * another thread is inside it. */
int tact_ctx_close(tact_ctx **ctx);

/*
 * The text of the context's last failure, "" if none.  Every failure leaves
 * its message here: an error tensor made by a builder (its text is also
 * tact_error_message's), and every call of the context that returns an
 * error status (a realize, a read, a backward, a load, a layer or
 * optimizer call), also when it fails because it was given an error
 * tensor.  Successful calls leave it as it is (as errno): read it after a
 * call failed.  Only tact_ctx_clear_error empties it.  The text stays
 * valid until this thread's next call into the context.
 */
const char *tact_ctx_error(const tact_ctx *ctx);
void tact_ctx_clear_error(tact_ctx *ctx);

/* Counters: kernels the last realize ran, its buffer memory as the memory
 * planner placed it (peak bytes live at once) and without reuse (the sum of
 * every kernel output), the bytes of all buffers the device held when it
 * finished, and how many realizes ran kernels. */
typedef struct tact_stats {
    uint64_t kernels;
    uint64_t planned_peak_bytes;
    uint64_t unplanned_bytes;
    uint64_t device_bytes;
    uint64_t realizes;
    /* Subgraphs the scheduler has taken (one per realize that computes
     * anything, more for a realize sent in parts), those whose schedule
     * came from its cache of structurally identical subgraphs, and the time
     * it spent working, all since the context opened (in-process stages). */
    uint64_t schedules;
    uint64_t schedule_cache_hits;
    uint64_t schedule_ns;
    /* Kernels the compiler pool built with the C compiler for a realize
     * (not found in its memory or the disk cache) since the context
     * opened; the full builds that replace quick ones in the background
     * (docs/architecture.md) are not counted.  A scalar
     * that changes between steps is a kernel argument, not part of the
     * source, so a loop compiles its kernels once (in-process stages). */
    uint64_t compiles;
} tact_stats;
void tact_ctx_stats(const tact_ctx *ctx, tact_stats *out);
/* What one of the context's devices ("CPU:1") did since the context
 * opened: the kernels its executor ran (copies into it included) and the
 * realizes it ran any for.  Returns TACT_OK, or TACT_EDEVICE for a device
 * the context does not have, TACT_EINVAL for a NULL argument (*out is
 * zeroed; the text in tact_ctx_error). */
typedef struct tact_device_stats {
    uint64_t kernels;
    uint64_t realizes;
} tact_device_stats;
int tact_ctx_device_stats(tact_ctx *ctx, const char *device, tact_device_stats *out);

/* ================================================================== scopes */

/* Opens a scope; tensors made until the matching tact_scope_end belong to it. */
int tact_scope_begin(tact_ctx *ctx);
/* Releases the tensors of the innermost scope except the kept ones, which
 * move to the enclosing scope.  Returns TACT_EINVAL if only the root scope
 * is open. */
int tact_scope_end(tact_ctx *ctx);
/* Keeps t beyond its scope (it moves to the enclosing one when its scope
 * ends).  Returns t. */
tact_tensor *tact_keep(tact_tensor *t);
/* Releases t now, before its scope ends (a language binding's handles
 * go one by one, as its objects do): the handle is stale from then on (a
 * later use is the stale-handle error, never a crash); its data goes once
 * no other tensor needs it.  A sharded tensor's parts go with it.  Costs
 * no message: the graph hears of it with the next ops sent.  Returns
 * TACT_OK (also for NULL, a stale handle or an error tensor of no context:
 * nothing to release), or TACT_EBUSY when another thread is inside the
 * context (t stays). */
int tact_release(tact_tensor *t);

/* ================================================================ creation */

/* A tensor holding a copy of numel(shape) elements of dtype at data. */
tact_tensor *tact_from_data(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, const void *data);
/* The same from host elements of another dtype (uint8 pixels into a
 * float32 tensor), converted as they are copied, as tact_cast converts
 * (floats to ints truncate toward zero; NaN to an int is 0). */
tact_tensor *tact_from_host(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, const void *data, tact_dtype host_dtype);
/* A tensor whose contents are unspecified until written. */
tact_tensor *tact_empty(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
tact_tensor *tact_full(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double value);
tact_tensor *tact_zeros(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
tact_tensor *tact_ones(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
/* [start, stop) by step, as the reference's arange (dtype float32 if any
 * argument is fractional, else int32, unless dtype >= 0 is given). */
tact_tensor *tact_arange(tact_ctx *ctx, double start, double stop, double step, int dtype);
/* The n x n identity. */
tact_tensor *tact_eye(tact_ctx *ctx, int64_t n, tact_dtype dtype);
/* Weakly typed scalars (Python numbers in the reference): next to a tensor
 * they take its dtype when they can (see DESIGN.md trap 10). */
tact_tensor *tact_scalar(tact_ctx *ctx, double value);
tact_tensor *tact_scalar_int(tact_ctx *ctx, int64_t value);
tact_tensor *tact_scalar_bool(tact_ctx *ctx, int value);

/* ================================================================ printing */

/*
 * A tensor as text, as PyTorch prints one:
 *
 *     tensor([[1, 2.5, -3],
 *             [4, 5, 6]], shape=(2, 3), dtype=float32, device=CPU)
 *
 * realizing it as needed: every value for up to 1000 elements, else the
 * first and last 3 entries of each axis around "..." (NumPy's
 * summarization); floats in %.6g, bools True/False; a sharded tensor says
 * "split along axis K" or "replicated" after its devices; an error tensor
 * (or one whose realize fails) prints "tensor(error: <its message>)".
 * tact_format writes at most n bytes of it (NUL-terminated; buf may be
 * NULL with n 0) and returns the length of the whole text, as snprintf.
 * tact_print writes it and a newline to f; returns TACT_OK, or the
 * tensor's (or its realize's) error, TACT_EINVAL for a NULL f.
 */
int tact_format(tact_tensor *t, char *buf, size_t n);
int tact_print(FILE *f, tact_tensor *t);

/* ================================================================= queries */

int tact_ndim(const tact_tensor *t);
/* Dim k (negative counts from the end); -1 if out of range. */
int64_t tact_dim(const tact_tensor *t, int k);
/* Copies the shape into out (tact_ndim(t) entries). */
void tact_shape(const tact_tensor *t, int64_t *out);
int64_t tact_numel(const tact_tensor *t);
tact_dtype tact_dtype_of(const tact_tensor *t);
/* The context t belongs to (NULL for the error tensors of no context:
 * a NULL or stale handle). */
tact_ctx *tact_tensor_ctx(const tact_tensor *t);
/* The device the tensor lives on, as the context lists it ("CPU",
 * "CPU:1", "CL:0"; tact_options.devices).  Creation ops put tensors on the
 * context's first device; an op runs on its sources' device (constants
 * join whichever device they meet), and sources on two devices give an
 * error tensor (TACT_EDEVICE) naming both. */
const char *tact_device(const tact_tensor *t);
/* How a tensor is spread over devices: the axis a sharded tensor is split
 * along (0..ndim-1), TACT_REPLICATE (-1000) for one copied whole to each of
 * its devices, -1 for a tensor on one device (tact_shard). */
int tact_shard_axis(const tact_tensor *t);
/* The tensor's sticky status (TACT_OK unless it is an error tensor) and the
 * message of its first error ("" if none). */
int tact_status_of(const tact_tensor *t);
const char *tact_error_message(const tact_tensor *t);
const char *tact_dtype_name(tact_dtype d);
/* The reference's element_size, nbytes (numel * element_size) and
 * is_floating_point; element size of a dtype that is not one is 0. */
size_t tact_element_size(tact_dtype d);
int64_t tact_nbytes(const tact_tensor *t);
int tact_is_floating_point(const tact_tensor *t);

/* ===================================================================== ops */

/* Unary.  Float ops cast ints to float32 first, as the reference does. */
tact_tensor *tact_exp2(tact_tensor *x);
tact_tensor *tact_log2(tact_tensor *x);
tact_tensor *tact_sin(tact_tensor *x);
tact_tensor *tact_sqrt(tact_tensor *x);
tact_tensor *tact_recip(tact_tensor *x);
tact_tensor *tact_neg(tact_tensor *x);
tact_tensor *tact_cast(tact_tensor *x, tact_dtype dtype);
/* Reinterprets the bits; dtype must have the same size. */
tact_tensor *tact_bitcast(tact_tensor *x, tact_dtype dtype);

/* Binary, with broadcasting and dtype promotion.  idiv and mod truncate
 * toward zero (C semantics; division by zero gives 0); cmplt/cmpne give
 * bool; xor/and/or/shl/shr need ints or bools. */
tact_tensor *tact_add(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_sub(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_mul(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_div(tact_tensor *a, tact_tensor *b); /* true division: ints become float32 */
tact_tensor *tact_idiv(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_mod(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_maximum(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_cmplt(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_cmpne(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_xor(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_and(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_or(tact_tensor *a, tact_tensor *b);
/* The reference's names for and, or (ints and bools). */
tact_tensor *tact_bitwise_and(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_bitwise_or(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_shl(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_shr(tact_tensor *a, tact_tensor *b);

/* Ternary: where(cond, a, b) picks a where cond is true (two scalar
 * branches take their dtype from cond's, as the reference: an int8 cond
 * with 3 and 4 gives int8); mulacc is a*b+c. */
tact_tensor *tact_where(tact_tensor *cond, tact_tensor *a, tact_tensor *b);
tact_tensor *tact_mulacc(tact_tensor *a, tact_tensor *b, tact_tensor *c);

/*
 * Random numbers as the reference makes them: counter-based Threefry-2x32
 * keyed by the context's seed, so tact_rand after tact_manual_seed(ctx, 42)
 * gives the reference's numbers bit for bit, on any device and thread
 * count and whatever the realize order: a number depends only on the seed
 * and the call's place among the context's random calls (each call of n
 * numbers advances the counter by n, as the reference's).  A context
 * starts as the reference before its first manual_seed, with seed 0 (the
 * reference's default seed is the time, which would make runs differ).
 * dtype is the result's (the reference's default: TACT_FLOAT32).
 */
int tact_manual_seed(tact_ctx *ctx, uint64_t seed);
tact_tensor *tact_rand(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape);  /* [0, 1) */
tact_tensor *tact_randn(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape); /* Box-Muller */
tact_tensor *tact_uniform(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double low, double high);
tact_tensor *tact_randint(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, int64_t low, int64_t high);
tact_tensor *tact_normal(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double mean, double std);
tact_tensor *tact_scaled_uniform(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
tact_tensor *tact_glorot_uniform(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
tact_tensor *tact_kaiming_uniform(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double a); /* a: 0.01 */
tact_tensor *tact_kaiming_normal(tact_ctx *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double a);  /* a: 0.01 */
/* x * (rand >= p) / (1 - p) when training (the reference's Tensor.training)
 * and p > 0, else x itself. */
tact_tensor *tact_dropout(tact_tensor *x, double p, int training);
/* x's shape and dtype. */
tact_tensor *tact_full_like(tact_tensor *x, double value);
tact_tensor *tact_zeros_like(tact_tensor *x);
tact_tensor *tact_ones_like(tact_tensor *x);
tact_tensor *tact_rand_like(tact_tensor *x);

/*
 * Elementwise math and activation functions, composed from the primitives
 * as the reference composes them (the scheduler fuses a chain of them into
 * one kernel), with PyTorch's answers within the reference suite's
 * tolerances (tests/api/test_unary.c).  Conventions of this section and the
 * ones after it:
 * - Functions that need floats (exp, log, sigmoid, the trigonometric and
 *   hyperbolic ones, ...) compute ints and bools in float32, as the
 *   reference's least_upper_float; the others keep the input's dtype.
 * - A parameter the reference gives a default is a plain argument; the
 *   reference's defaults are named in the comment (pass them for the
 *   reference's behaviour).
 * - Where the reference drops a NaN, PyTorch's NaN is given: sign(NaN) and
 *   abs(NaN) are NaN, relu, clip, maximum and minimum propagate NaN.
 * - trunc, ceil, floor and round go through int32 as the reference does:
 *   values beyond its range saturate (and NaN gives 0).
 */
tact_tensor *tact_exp(tact_tensor *x);
tact_tensor *tact_log(tact_tensor *x); /* natural log */
tact_tensor *tact_relu(tact_tensor *x);
tact_tensor *tact_sigmoid(tact_tensor *x);
tact_tensor *tact_reciprocal(tact_tensor *x); /* as tact_recip */
tact_tensor *tact_rsqrt(tact_tensor *x);
tact_tensor *tact_cos(tact_tensor *x);
tact_tensor *tact_tan(tact_tensor *x);
tact_tensor *tact_trunc(tact_tensor *x);
tact_tensor *tact_ceil(tact_tensor *x);
tact_tensor *tact_floor(tact_tensor *x);
tact_tensor *tact_round(tact_tensor *x); /* half to even */
tact_tensor *tact_square(tact_tensor *x);
tact_tensor *tact_sign(tact_tensor *x);
tact_tensor *tact_abs(tact_tensor *x);
tact_tensor *tact_logical_not(tact_tensor *x); /* bool */
tact_tensor *tact_minimum(tact_tensor *a, tact_tensor *b);
/* Clamps to [lo, hi]; -INFINITY or INFINITY leaves that side open (the
 * reference's None). */
tact_tensor *tact_clip(tact_tensor *x, double lo, double hi);
/* x + (end - x) * weight (weight may be a tact_scalar). */
tact_tensor *tact_lerp(tact_tensor *x, tact_tensor *end, tact_tensor *weight);
tact_tensor *tact_elu(tact_tensor *x, double alpha);  /* reference default alpha 1.0 */
tact_tensor *tact_celu(tact_tensor *x, double alpha); /* 1.0 */
tact_tensor *tact_swish(tact_tensor *x);
tact_tensor *tact_silu(tact_tensor *x); /* swish */
tact_tensor *tact_relu6(tact_tensor *x);
tact_tensor *tact_hardswish(tact_tensor *x);
tact_tensor *tact_tanh(tact_tensor *x);
tact_tensor *tact_sinh(tact_tensor *x);
tact_tensor *tact_cosh(tact_tensor *x);
tact_tensor *tact_atanh(tact_tensor *x);
tact_tensor *tact_asinh(tact_tensor *x);
tact_tensor *tact_acosh(tact_tensor *x);
tact_tensor *tact_hardtanh(tact_tensor *x, double min_val, double max_val); /* -1, 1 */
tact_tensor *tact_gelu(tact_tensor *x);                                     /* the tanh approximation */
tact_tensor *tact_quick_gelu(tact_tensor *x);
tact_tensor *tact_leakyrelu(tact_tensor *x, double neg_slope); /* 0.01 */
tact_tensor *tact_mish(tact_tensor *x);
tact_tensor *tact_softplus(tact_tensor *x, double beta); /* 1 */
tact_tensor *tact_softsign(tact_tensor *x);

/* Reductions over naxes axes (negative count from the end; naxes < 0: all
 * axes, axes may be NULL).  keepdim keeps reduced dims as size 1.  sum
 * accumulates ints in at least int32 (unsigned: uint32) and returns that,
 * and 16-bit floats in float32, cast back (DESIGN.md trap 5). */
tact_tensor *tact_sum(tact_tensor *x, int naxes, const int *axes, int keepdim);
tact_tensor *tact_max(tact_tensor *x, int naxes, const int *axes, int keepdim);

/* Reductions composed from sum and max, with the same axes convention.
 * mean of ints is float32 (sums in the accumulation dtype first); var and
 * std divide by (count - correction), the reference's default correction
 * being 1, and give inf or NaN where that is not positive as the reference
 * does.  min of unsigned ints and bools is exact (the reference's -max(-x)
 * wraps).  any and all are bools. */
tact_tensor *tact_min(tact_tensor *x, int naxes, const int *axes, int keepdim);
tact_tensor *tact_any(tact_tensor *x, int naxes, const int *axes, int keepdim);
tact_tensor *tact_all(tact_tensor *x, int naxes, const int *axes, int keepdim);
tact_tensor *tact_mean(tact_tensor *x, int naxes, const int *axes, int keepdim);
/* The common calls, short: over every element (a scalar), and over one
 * axis (negative counts from the end), that axis dropped. */
tact_tensor *tact_sum_all(tact_tensor *x);
tact_tensor *tact_mean_all(tact_tensor *x);
tact_tensor *tact_max_all(tact_tensor *x);
tact_tensor *tact_min_all(tact_tensor *x);
tact_tensor *tact_sum_axis(tact_tensor *x, int axis);
tact_tensor *tact_mean_axis(tact_tensor *x, int axis);
tact_tensor *tact_max_axis(tact_tensor *x, int axis);
/* Products, by a tree of multiplies (ints in the sum's accumulation dtype;
 * an empty product is 1). */
tact_tensor *tact_prod(tact_tensor *x, int naxes, const int *axes, int keepdim);
tact_tensor *tact_var(tact_tensor *x, int naxes, const int *axes, int keepdim, double correction);
tact_tensor *tact_std(tact_tensor *x, int naxes, const int *axes, int keepdim, double correction);
tact_tensor *tact_logsumexp(tact_tensor *x, int naxes, const int *axes, int keepdim);
/* The first index of the maximum (minimum) along axis, int32; _flat: of
 * the flattened x (the reference's axis None).  cumsum along axis, long
 * axes in runs of 256 as the reference. */
tact_tensor *tact_argmax(tact_tensor *x, int axis, int keepdim);
tact_tensor *tact_argmax_flat(tact_tensor *x);
tact_tensor *tact_argmin(tact_tensor *x, int axis, int keepdim);
tact_tensor *tact_argmin_flat(tact_tensor *x);
tact_tensor *tact_cumsum(tact_tensor *x, int axis);
/* Along one axis (negative counts from the end; the reference's default is -1). */
tact_tensor *tact_softmax(tact_tensor *x, int axis);
tact_tensor *tact_log_softmax(tact_tensor *x, int axis);

/* Matrix product with the reference's broadcasting (its dot): a's last dim
 * against b's second to last (or only) dim; leading dims broadcast.  It is
 * a broadcast multiply and a sum, which the scheduler fuses into one kernel. */
tact_tensor *tact_matmul(tact_tensor *a, tact_tensor *b);

/* Movement (views: no data moves until a kernel reads them).  reshape
 * accepts one -1; expand prepends dims and grows size-1 dims (-1 keeps a
 * dim); pad takes {before, after} per dim and a fill value (a non-zero one
 * with the reference's dtype: a whole value keeps an int tensor's dtype and
 * makes a bool's int32, a fractional one makes ints and bools float32);
 * shrink takes {begin, end} per dim; flip reverses the given axes. */
tact_tensor *tact_reshape(tact_tensor *x, int ndim, const int64_t *shape);
tact_tensor *tact_permute(tact_tensor *x, const int *order);
tact_tensor *tact_expand(tact_tensor *x, int ndim, const int64_t *shape);
tact_tensor *tact_pad(tact_tensor *x, const int64_t (*pads)[2], double value);
tact_tensor *tact_shrink(tact_tensor *x, const int64_t (*ranges)[2]);
tact_tensor *tact_flip(tact_tensor *x, int naxes, const int *axes);

/*
 * Movement composed from the above, as the reference composes it.  dim
 * arguments count from the end when negative; out of range is an error
 * naming the range.  Where the reference takes an optional dim, naxes < 0
 * (squeeze: every size-1 dim) or a _flat variant stands for None.
 */
tact_tensor *tact_squeeze(tact_tensor *x, int naxes, const int *axes); /* dims that are not 1 stay */
tact_tensor *tact_unsqueeze(tact_tensor *x, int dim);
tact_tensor *tact_flatten(tact_tensor *x, int start_dim, int end_dim); /* reference: 0, -1 */
tact_tensor *tact_unflatten(tact_tensor *x, int dim, int n, const int64_t *sizes);
tact_tensor *tact_transpose(tact_tensor *x, int dim0, int dim1); /* reference: 1, 0 */
tact_tensor *tact_T(tact_tensor *x);                             /* transpose(1, 0) */
/* n repeats, n >= ndim (extra leading dims are new dims). */
tact_tensor *tact_repeat(tact_tensor *x, int n, const int64_t *repeats);
tact_tensor *tact_repeat_interleave(tact_tensor *x, int64_t repeats, int dim);
tact_tensor *tact_repeat_interleave_flat(tact_tensor *x, int64_t repeats); /* dim None: of the flattened x */
/* Joins n tensors (1 to 4096) that agree off dim: a sum of padded tensors,
 * one kernel.  stack joins along a new dim. */
tact_tensor *tact_cat(int n, tact_tensor *const *xs, int dim);
tact_tensor *tact_stack(int n, tact_tensor *const *xs, int dim);
/* Pieces along dim as views, into out (room for n pieces; chunk: for
 * chunks): split takes their sizes, which must sum to dim's length; chunk
 * takes ceil(len / chunks) each, the last shorter (fewer pieces when they
 * run out, as the reference).  Return the number of pieces, or -1 with the
 * error tensor in out[0]. */
int tact_split(tact_tensor *x, int n, const int64_t *sizes, int dim, tact_tensor **out);
int tact_chunk(tact_tensor *x, int chunks, int dim, tact_tensor **out);
/* out[i][j] = x[index[i][j]][j] for dim 0 (and so on): index is ints with
 * x's number of dims, no larger than x off dim.  An index out of range
 * gives 0 (the reference's one-hot sum). */
tact_tensor *tact_gather(tact_tensor *x, int dim, tact_tensor *index);
/* padding: n amounts (left, right, top, bottom, ...) from the last dim
 * backwards; a negative amount crops. */
tact_tensor *tact_pad2d(tact_tensor *x, int n, const int64_t *padding, double value);

/*
 * Windowed functions (convolution, pooling) take their options in a
 * tact_window, which tact_window_default fills with the reference's
 * defaults; NULL means those defaults.  A zero field means its default
 * too (ndims 2, kernel 2, stride the default, dilation 1, groups 1, no
 * padding), but for count_include_pad, whose zero leaves the padding out
 * of the mean (the reference, and tact_window_default, count it): so
 * `&(tact_window){.npad = 1, .padding = {1}}` pads by 1 and takes every
 * other default.  Functions of 2 spatial dims work on 1 to 3 as the
 * reference's do (ndims; a convolution takes it from its weight).
 */
typedef struct tact_window {
    int ndims;            /* spatial dims, the last ones of the input: 2 */
    int64_t kernel[3];    /* pools: the window, (2, 2); a convolution's comes from its weight */
    int64_t stride[3];    /* 0: the default, the kernel for pools and 1 for convolutions */
    int64_t dilation[3];  /* 1 */
    int npad;             /* padding amounts given: 0, 1 (every side), ndims (per dim, both
                           * sides) or 2 * ndims (left, right, top, bottom, ... as pad2d) */
    int64_t padding[6];   /* 0 */
    int groups;           /* convolutions: 1 */
    int count_include_pad; /* avg_pool2d: 1 (padding counts in the mean) */
    int64_t output_padding[3]; /* conv_transpose2d: 0 */
} tact_window;
void tact_window_default(tact_window *w);

/* x (batch, groups * cin, *spatial) with weight (cout, cin, *kernel) and an
 * optional bias (cout) (NULL: none).  When a window holds at least 16
 * values (cin x prod(kernel)), it has at most 27 offsets (3x3x3) and one
 * sample's columns (its input copied prod(kernel) times) take at most 4
 * MiB, the windows are first laid out in a buffer of their own and then
 * summed against the weight as a matmul (two kernels, faster ones, the
 * gradients matmuls too); otherwise the reference's one fused kernel.
 * The values are the same within rounding; the choice does not depend on
 * the batch size.  Window sizes, strides, dilations and paddings above
 * 2^31 are refused. */
tact_tensor *tact_conv2d(tact_tensor *x, tact_tensor *weight, tact_tensor *bias, const tact_window *opt);
/* x (batch, cin, *spatial) with weight (cin, cout / groups, *kernel), the
 * gradient of conv2d; padding is 1 amount or one per dim, output_padding
 * adds at the end. */
tact_tensor *tact_conv_transpose2d(tact_tensor *x, tact_tensor *weight, tact_tensor *bias, const tact_window *opt);
tact_tensor *tact_avg_pool2d(tact_tensor *x, const tact_window *opt);
tact_tensor *tact_max_pool2d(tact_tensor *x, const tact_window *opt); /* padding with -inf */
/* x.dot(weight) + bias with weight (in, out), the reference's layout (the
 * transpose of PyTorch's), or x * weight for a 1-dim weight; bias may be NULL. */
tact_tensor *tact_linear(tact_tensor *x, tact_tensor *weight, tact_tensor *bias);
/* Normalizes over axes (reference: axis -1, eps 1e-5), no affine part. */
tact_tensor *tact_layernorm(tact_tensor *x, int naxes, const int *axes, double eps);
/* (x - mean) * weight * invstd + bias, the per-channel tensors along axis
 * (reference: 1); weight and bias may be NULL. */
tact_tensor *tact_batchnorm(tact_tensor *x, tact_tensor *weight, tact_tensor *bias, tact_tensor *mean, tact_tensor *invstd, int axis);
/* int32 with a new last dim of num_classes: 1 at x's value. */
tact_tensor *tact_one_hot(tact_tensor *x, int64_t num_classes);
/* Means over every element: x holds probabilities (binary_crossentropy) or
 * logits (_logits), y the targets. */
tact_tensor *tact_binary_crossentropy(tact_tensor *x, tact_tensor *y);
tact_tensor *tact_binary_crossentropy_logits(tact_tensor *x, tact_tensor *y);
/* x: logits (..., classes); labels: ints of x's shape without the last dim.
 * The mean over labels not equal to ignore_index (reference: -1), with
 * label_smoothing in [0, 1] (reference: 0). */
tact_tensor *tact_sparse_categorical_crossentropy(tact_tensor *x, tact_tensor *labels, int64_t ignore_index, double label_smoothing);
/* The same with the reference's defaults (no label ignored, no smoothing). */
tact_tensor *tact_cross_entropy(tact_tensor *x, tact_tensor *labels);
/* Linear interpolation of the last n dims to size (the reference's only
 * mode), align_corners as PyTorch's. */
tact_tensor *tact_interpolate(tact_tensor *x, int n, const int64_t *size, int align_corners);
/* Sums of products named by a formula ("ij,jk->ik"; without "->", the
 * letters used once, sorted), as the reference: no repeated letter within
 * one operand, no ellipsis. */
tact_tensor *tact_einsum(const char *formula, int n, tact_tensor *const *xs);
/* matmul under its other reference name. */
tact_tensor *tact_dot(tact_tensor *a, tact_tensor *b);
/* Indices (int32) drawn from the rows of x (1 or 2 dims) as weights, by
 * the context's random numbers; without replacement only one sample. */
tact_tensor *tact_multinomial(tact_tensor *x, int64_t num_samples, int replacement);
/* The upper (lower) triangle of the last two dims from diagonal on
 * (reference: 0), zeros elsewhere. */
tact_tensor *tact_triu(tact_tensor *x, int64_t diagonal);
tact_tensor *tact_tril(tact_tensor *x, int64_t diagonal);
/* value (a tensor or a tact_scalar) where mask is true, else x. */
tact_tensor *tact_masked_fill(tact_tensor *x, tact_tensor *mask, tact_tensor *value);
/* x ** exponent: a constant exponent (a tact_scalar) goes through the
 * reference's identities (negative: of the reciprocal; integers by
 * squaring; halves with a sqrt), any other through exp(e log|x|) with the
 * sign of a negative base put back for odd integers, NaN for a negative
 * base with a fractional exponent, and 0 ** 0 = 1. */
tact_tensor *tact_pow(tact_tensor *x, tact_tensor *exponent);
/* Unsigned ints only, as the reference: x * 2^bits and x / 2^bits. */
tact_tensor *tact_lshift(tact_tensor *x, int64_t bits);
tact_tensor *tact_rshift(tact_tensor *x, int64_t bits);
/* softmax(q k^T / sqrt(d) + mask) v; mask may be NULL, a bool mask is -inf
 * where false; is_causal uses the lower triangle; dropout_p applies when
 * training. */
tact_tensor *tact_scaled_dot_product_attention(tact_tensor *q, tact_tensor *k, tact_tensor *v, tact_tensor *mask, double dropout_p, int is_causal,
                                               int training);
/* Comparisons (bool), broadcasting as the binary ops: eq is not(ne) as the
 * reference; le and ge are false at a NaN as PyTorch. */
tact_tensor *tact_eq(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_ne(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_lt(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_gt(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_le(tact_tensor *a, tact_tensor *b);
tact_tensor *tact_ge(tact_tensor *a, tact_tensor *b);

/*
 * Indexing, the reference's __getitem__ and __setitem__: an index list of n
 * entries, one per Python index, built with the macros below:
 *   x[1, -1]          {TACT_AT(1), TACT_AT(-1)}
 *   x[:, 2:8:3]       {TACT_ALL, TACT_SLICE(2, 8, 3)}
 *   x[::-1, :5]       {TACT_SLICE_STEP(-1), TACT_SLICE_TO(5)}
 *   x[None, ..., 0]   {TACT_NEWAXIS, TACT_ELLIPSIS, TACT_AT(0)}
 *   x[t]              {TACT_TENSOR(t)} (an int tensor: advanced indexing, a copy)
 * Slices clamp as Python's do; an int out of range, a second ellipsis, too
 * many indices or a zero step is an error naming the dim.  getitem gives a
 * view (no copy) unless an index is a tensor.  setitem writes value (a
 * tensor or a tact_scalar, cast to x's dtype, broadcast to the region) into
 * the region of x, which must have a buffer of its own, and returns x,
 * which names the new contents (as tact_assign); tensor indices are refused
 * there, as in the reference.
 */
typedef enum { TACT_IDX_INT, TACT_IDX_SLICE, TACT_IDX_NEWAXIS, TACT_IDX_ELLIPSIS, TACT_IDX_TENSOR } tact_index_kind;
typedef struct tact_index {
    tact_index_kind kind;
    int64_t start, stop, step;         /* INT: start is the index; SLICE: the bounds given */
    int has_start, has_stop, has_step; /* SLICE: 0 where Python's slice has None */
    tact_tensor *tensor;               /* TENSOR */
} tact_index;
#define TACT_AT(i) ((tact_index){TACT_IDX_INT, (i), 0, 0, 1, 0, 0, NULL})
#define TACT_ALL ((tact_index){TACT_IDX_SLICE, 0, 0, 0, 0, 0, 0, NULL})
#define TACT_SLICE(a, b, s) ((tact_index){TACT_IDX_SLICE, (a), (b), (s), 1, 1, 1, NULL})
#define TACT_SLICE_FROM(a) ((tact_index){TACT_IDX_SLICE, (a), 0, 0, 1, 0, 0, NULL})
#define TACT_SLICE_TO(b) ((tact_index){TACT_IDX_SLICE, 0, (b), 0, 0, 1, 0, NULL})
#define TACT_SLICE_STEP(s) ((tact_index){TACT_IDX_SLICE, 0, 0, (s), 0, 0, 1, NULL})
#define TACT_NEWAXIS ((tact_index){TACT_IDX_NEWAXIS, 0, 0, 0, 0, 0, 0, NULL})
#define TACT_ELLIPSIS ((tact_index){TACT_IDX_ELLIPSIS, 0, 0, 0, 0, 0, 0, NULL})
#define TACT_TENSOR(t) ((tact_index){TACT_IDX_TENSOR, 0, 0, 0, 0, 0, 0, (t)})
tact_tensor *tact_getitem(tact_tensor *x, int n, const tact_index *idx);
tact_tensor *tact_setitem(tact_tensor *x, int n, const tact_index *idx, tact_tensor *value);

/* A contiguous copy (or x itself once it is realized and contiguous). */
tact_tensor *tact_contiguous(tact_tensor *x);

/* x on device (one of the context's devices: "CPU", "CPU:1", "CL:0"; "CL"
 * is "CL:0"), or x itself if it is there already.  The copy is a step of
 * the realize like a kernel: it waits only for x, and what reads it waits
 * only for the copy.  A device the context does not have is an error
 * tensor (TACT_EDEVICE). */
tact_tensor *tact_to(tact_tensor *x, const char *device);

/*
 * x split over devices (some of the context's, separated by commas:
 * "CPU,CPU:1") along axis (negative counts from the end), or copied whole
 * to each (axis TACT_REPLICATE).  Along the axis each device holds
 * ceil(n / devices) elements, in order, the last ones short or empty (the
 * reference's shard).  The result is one tensor to every op of this API:
 * each op runs on every device on its part, at the same time.
 *  - An elementwise op is split as its last split source (one split
 *    another way is gathered and split that way; replicated ones and
 *    constants are cut to each part).
 *  - A reduce over the split axis reduces each part, then combines the
 *    partial results on every device, in device order, into a replicated
 *    result.
 *  - Reshape moves the axis as the reference does; expand and flip may
 *    not change it; a shrink along it only to exactly one part's bounds
 *    (the other parts become zeros until a pad back to the whole axis).
 * tact_to(s, device) gathers it onto one device, tact_read reads it
 * (gathered on its first device), tact_device names its devices
 * ("CPU,CPU:1"), and a replicated loss differentiates through every
 * device's share, back to parameters on one device or sharded themselves
 * (tact_grad of a replicated one is its parts' gradients summed on every
 * device, as the reference's).  Not supported (an error
 * tensor saying so): ops mixing a sharded tensor with one on a single
 * device, sharding a sharded tensor.
 */
#define TACT_REPLICATE (-1000)
tact_tensor *tact_shard(tact_tensor *x, const char *devices, int axis);

/*
 * Writes value into target's buffer when next realized, and returns target,
 * which from now on names the new contents (as the reference's assign).
 * value must have target's dtype (a scalar takes it) and broadcast to its
 * shape; target must have a buffer of its own (not a view).  Kernels in the
 * same realize that read target's old contents run before the write.  A
 * lazy tensor computed from target but realized only after the assign sees
 * the new contents, as in the reference: realize it first if it needs the
 * old ones.
 */
tact_tensor *tact_assign(tact_tensor *target, tact_tensor *value);

/* ================================================================ autograd */

/*
 * Gradients, as the reference's autograd.  A tensor's requires_grad is
 * true (1), false (0) or unset (-1, the default); an op's result has 1 if
 * a source has 1, else -1 if a source is unset, else 0.  The program asks
 * for the gradient of a tensor with tact_set_requires_grad(t, 1) (a float
 * tensor) before computing from it; tact_backward(loss, NULL) then gives
 * every such tensor that the loss depends on a gradient (tact_grad), a
 * lazy tensor of the same shape and dtype.  A second backward adds to the
 * gradients (same handle); tact_grad_clear drops one.  Only the tensors
 * the program asked for get one (the reference also fills .grad of
 * intermediate results: ask for those explicitly).
 *
 * Every primitive has a backward rule and the composed functions
 * differentiate through their decomposition: the max reduce splits the
 * gradient equally between ties, maximum (and minimum) halves it on a tie,
 * relu passes none at 0.  Comparisons, integer, bitwise and random ops
 * pass none.  A backward consumes the graph it goes through: a second
 * backward through the same results is an error (compute them again).
 * Ops made in no-grad mode (tact_set_no_grad) or from tact_detach have no
 * path back.  Gradients of gradients are not supported (their ops have
 * none).
 */
tact_tensor *tact_set_requires_grad(tact_tensor *t, int requires);
/* 1, 0 or -1 as above (0 for an error tensor). */
int tact_requires_grad(tact_tensor *t);
/* t's data with no path back (requires_grad 0); costs no copy. */
tact_tensor *tact_detach(tact_tensor *t);
/* Sets no-grad mode (on != 0) for ops made from now on; returns the
 * previous setting, or a negative error code for a bad context. */
int tact_set_no_grad(tact_ctx *ctx, int on);
/*
 * Computes the gradients of loss (a float scalar, or any shape with grad,
 * the loss's upstream gradient, of the same shape) with respect to every
 * tensor that asked for one.  It computes nothing (the gradients are lazy
 * until realized) and does not wait: it sends the request and returns,
 * and the program goes on (builds an optimizer's step) while the graph
 * works out the gradients.  Returns TACT_OK, or an error found at once
 * with its text in tact_ctx_error (a loss that is not a float or not a
 * scalar, a gradient of another shape).  The graph's answer (which
 * tensors got a gradient, or its error: a graph an earlier backward
 * consumed) is read at the next call that waits: tact_grad, a read, a
 * realize's answer (tact_wait), an optimizer step, the next backward, the
 * close; that call returns the backward's error ("the last backward
 * failed: ...").  A tensor off the loss's path keeps an earlier gradient,
 * or has none.  A gradient handle held from before keeps its values until
 * the answer moves it to the sum.
 */
int tact_backward(tact_tensor *loss, tact_tensor *grad);
/* t's gradient (owned by t: it lives as long as t, whatever the scopes),
 * or an error tensor saying t has none. */
tact_tensor *tact_grad(tact_tensor *t);
/* Drops t's gradient (the reference's t.grad = None). */
void tact_grad_clear(tact_tensor *t);

/* ================================================================ nn layers */

/*
 * The reference's nn layers, each a tact_layer made by its constructor
 * with the reference's initialization (from the context's random numbers:
 * tact_manual_seed first for repeatable runs) and applied with
 * tact_layer_forward.  The tensors are kept (tact_keep) in the scope open
 * when the layer was made, realized; what drawing them took (a uniform's
 * random bits) is released by then; weight and bias require gradients, a batch
 * norm's running statistics do not (an optimizer given them as parameters
 * realizes their updates with each step, as the reference's buffers).
 * tact_layer_params lists them under PyTorch's state-dict names
 * ("<prefix>.weight", "<prefix>.running_mean", ...).  A constructor
 * returns TACT_OK or an error (bad sizes), with the layer zeroed.
 */
typedef enum {
    TACT_LAYER_LINEAR,
    TACT_LAYER_CONV2D,
    TACT_LAYER_CONV_TRANSPOSE2D,
    TACT_LAYER_BATCHNORM,
    TACT_LAYER_LAYERNORM,
    TACT_LAYER_GROUPNORM,
    TACT_LAYER_EMBEDDING,
    TACT_LAYER_DROPOUT
} tact_layer_kind;
typedef struct tact_layer {
    tact_layer_kind kind;
    tact_tensor *weight, *bias;               /* NULL where the layer has none */
    tact_tensor *running_mean, *running_var;  /* batch norm with running statistics */
    tact_window window;                       /* convolutions */
    double eps, momentum, p;                  /* norms; batch norm's momentum; dropout's p */
    int64_t groups, features;                 /* group norm's groups; channels, features or vocabulary */
    int naxes;                                /* layer norm: normalized trailing dims */
    int64_t norm_shape[8];                    /* layer norm: their sizes */
} tact_layer;
int tact_layer_linear(tact_layer *l, tact_ctx *ctx, int64_t in, int64_t out, int bias);
/* kernel (kh, kw); opt's stride, dilation, padding and groups (NULL: the defaults). */
int tact_layer_conv2d(tact_layer *l, tact_ctx *ctx, int64_t in, int64_t out, int64_t kh, int64_t kw, const tact_window *opt, int bias);
int tact_layer_conv_transpose2d(tact_layer *l, tact_ctx *ctx, int64_t in, int64_t out, int64_t kh, int64_t kw, const tact_window *opt,
                                int bias);
/* eps 1e-5, momentum 0.1 in the reference; affine: weight and bias; track: running statistics. */
int tact_layer_batchnorm(tact_layer *l, tact_ctx *ctx, int64_t features, double eps, double momentum, int affine, int track);
/* Normalizes the last ndims dims, of sizes shape. */
int tact_layer_layernorm(tact_layer *l, tact_ctx *ctx, int ndims, const int64_t *shape, double eps, int affine);
int tact_layer_groupnorm(tact_layer *l, tact_ctx *ctx, int64_t groups, int64_t channels, double eps, int affine);
int tact_layer_embedding(tact_layer *l, tact_ctx *ctx, int64_t vocab, int64_t embed);
int tact_layer_dropout(tact_layer *l, double p);
/* The layer applied to x; training selects batch statistics (updating the
 * running ones) and active dropout, as the reference's Tensor.training. */
tact_tensor *tact_layer_forward(const tact_layer *l, tact_tensor *x, int training);

/* Named tensors: a model's parameters and buffers, in the order added.
 * A list starts zero-filled (`tact_params p = {0};`); tact_params_free
 * empties it (the tensors stay their scope's). */
typedef struct tact_params {
    int n, cap;
    char **names;
    tact_tensor **tensors;
} tact_params;
/* Adds "<prefix>.<name>" (or name alone for a NULL or empty prefix);
 * TACT_EINVAL for a NULL tensor or a name in use, TACT_ENOMEM. */
int tact_params_add(tact_params *p, const char *prefix, const char *name, tact_tensor *t);
/* Adds the layer's tensors under their state-dict names. */
int tact_layer_params(const tact_layer *l, const char *prefix, tact_params *p);
/* The tensor named name, or NULL. */
tact_tensor *tact_params_get(const tact_params *p, const char *name);
/* Frees the list (not the tensors) and zeroes it. */
void tact_params_free(tact_params *p);
/* Saves every tensor of the list under its name (tact_save_safetensors). */
int tact_params_save(tact_ctx *ctx, const char *path, const tact_params *p);
/* Loads every tensor of the list from the file, by name, into the tensor
 * (an assign), and realizes them.  The stored tensor must have the
 * parameter's dtype and shape exactly: anything else (a [1] for a [128])
 * is TACT_ESHAPE naming the tensor and both.  Returns TACT_OK, or the
 * first error (a missing name, a mismatch, a bad file) with its text in
 * tact_ctx_error; tensors before it are loaded. */
int tact_params_load(tact_ctx *ctx, const char *path, const tact_params *p);

/* ============================================================ data loader */

/*
 * Minibatches of a dataset: n tensors (on one device each) whose first dim
 * is the sample, all with the same number of rows; each call of
 * tact_loader_next gives the next batch of each (new tensors of the scope
 * open then, on the device the tensor was on), the rows in the epoch's
 * order: every row once per epoch, shuffled by the seed and the epoch
 * (the same for any thread count or device), or in order.  The rows are
 * gathered on the tensors' devices (only the row numbers travel), so the
 * tensors must outlive the loader: one whose scope ended makes
 * tact_loader_next fail with TACT_EINVAL.  They are realized when the
 * loader is made, and a batch holds their contents at tact_loader_next.
 */
typedef struct tact_loader tact_loader;
/* Zero-filled: batches of 32 rows in order, the last kept (the defaults
 * below shuffle). */
typedef struct tact_loader_options {
    int64_t batch;  /* rows per batch; 0: 32 */
    int shuffle;    /* a new order each epoch; 0: the rows in order */
    uint64_t seed;  /* the shuffle's seed */
    int drop_last;  /* drop the last, short batch of an epoch (0: it comes) */
} tact_loader_options;
/* batch 32, shuffled, seed 0, the last batch kept. */
void tact_loader_options_default(tact_loader_options *o);
/* Makes a loader of the n tensors into *out (NULL on error); opts NULL
 * takes the defaults.  Returns TACT_OK or an error (its text in
 * tact_ctx_error): no tensors, an error tensor, one of another context, a
 * sharded one, rows that differ, out of memory. */
int tact_loader_new(tact_loader **out, tact_ctx *ctx, int n, tact_tensor *const *tensors, const tact_loader_options *opts);
/* The next batch into out[0..n-1]: returns 1, or 0 at the end of an epoch
 * (out untouched; the next call begins the next epoch), or an error. */
int tact_loader_next(tact_loader *l, tact_tensor **out);
/* Batches per epoch. */
int64_t tact_loader_batches(const tact_loader *l);
void tact_loader_free(tact_loader **l);

/* ============================================================== optimizers */

/*
 * The reference's optimizers (tinygrad 0.9.2 nn/optim.py): SGD (momentum,
 * Nesterov, weight decay; PyTorch's update), Adam and AdamW.  The
 * optimizer holds the parameters' handles (those that require no gradient,
 * as a batch norm's running statistics, are buffers: realized with each
 * step, not updated; each other one must require a gradient;
 * an unset one is set to 1, as the reference does) and its state: the
 * learning rate as a one-element tensor, Adam's moments and bias
 * corrections, SGD's momentum buffers, all tensors of the scope open when
 * the optimizer was made (make it where the parameters live).  The state
 * lives on the parameters' devices: each parameter's moments where it is
 * (sharded as it is), the learning rate and bias corrections where the
 * first parameter is.  Data-parallel training is parameters replicated
 * with tact_shard(p, devices, TACT_REPLICATE) (a new leaf: detach it first,
 * or set requires_grad on the result) and a batch split along axis 0; each
 * replicated parameter's gradient is its copies' summed, so every copy
 * takes the same update.  A step assigns every update and realizes them
 * all in one call; its kernels depend on nothing that changes between
 * steps (the learning rate and the bias corrections are tensors), so after
 * the first step nothing is compiled again.
 */
typedef enum { TACT_OPTIM_SGD, TACT_OPTIM_ADAM, TACT_OPTIM_ADAMW } tact_optim_kind;
/* Not zero-filled: a zero learning rate learns nothing, and zero betas
 * are no Adam; fill it with tact_optim_options_default, then change what
 * differs. */
typedef struct tact_optim_options {
    tact_optim_kind kind;
    double lr;           /* 0.001 */
    double momentum;     /* SGD: 0 */
    double weight_decay; /* SGD and Adam: 0; AdamW: 0.01 */
    int nesterov;        /* SGD: 0 */
    double b1, b2, eps;  /* Adam, AdamW: 0.9, 0.999, 1e-8 */
} tact_optim_options;
typedef struct tact_optim tact_optim;
/* The reference's defaults for kind. */
void tact_optim_options_default(tact_optim_options *o, tact_optim_kind kind);
/* Makes an optimizer of the n parameters into *out (NULL on error).
 * Returns TACT_OK or an error (its text in tact_ctx_error): a bad option,
 * a parameter that is an error, not a float, or of another context. */
int tact_optim_new(tact_optim **out, tact_ctx *ctx, const tact_optim_options *opts, int n, tact_tensor *const *params);
/* One update of every parameter from its gradient (each must have one:
 * call tact_backward first), realized.  Returns TACT_OK or an error. */
int tact_optim_step(tact_optim *o);
/* The same, realizing the n tensors in also (the loss, an accuracy) in the
 * same call: they read the parameters before the update. */
int tact_optim_step_with(tact_optim *o, int n, tact_tensor *const *also);
/* Drops every parameter's gradient (the reference's zero_grad). */
void tact_optim_zero_grad(tact_optim *o);
/* Changes the learning rate for the next steps (no recompilation). */
int tact_optim_set_lr(tact_optim *o, double lr);
double tact_optim_lr(const tact_optim *o);
/* Adds the optimizer's state under "<prefix>.lr", "<prefix>.b1_t",
 * "<prefix>.b2_t", "<prefix>.m.<i>", "<prefix>.v.<i>" (Adam), "<prefix>.b.<i>"
 * (SGD's momentum), i the parameter's index: saved and loaded with the
 * model, a run goes on where it stopped. */
int tact_optim_state(const tact_optim *o, const char *prefix, tact_params *p);
/* Learning-rate schedules, as PyTorch's: the rate for step (from 0) of
 * total: cosine annealing from lr to lr_min; and lr * gamma^(step / every)
 * (step decay).  Give the result to tact_optim_set_lr (it changes a tensor:
 * no recompilation). */
double tact_lr_cosine(double lr, double lr_min, int64_t step, int64_t total);
double tact_lr_step(double lr, double gamma, int64_t step, int64_t every);
/* Frees the optimizer (its state tensors go with their scope) and NULLs *o. */
void tact_optim_free(tact_optim **o);

/* ================================================================ datasets */

/* Reads an IDX file (the format of MNIST and Fashion-MNIST, gzipped or
 * not: Debian's dataset-fashion-mnist installs them under
 * /usr/share/datasets/fashion-mnist) into a tensor of its shape and type
 * (ubyte as uint8, then int8, int16, int32, float32, float64).  Nothing in
 * the file is trusted: a missing file, a path that is not a regular file
 * (a FIFO, a folder, a device), a bad magic, a truncated file, data past
 * the end or more than 1 GiB is an error tensor naming the path and the
 * cause. */
tact_tensor *tact_load_idx(tact_ctx *ctx, const char *path);

/* Model files in the safetensors format (readable and writable by the
 * Python safetensors package).  save realizes the n tensors (of ctx) and
 * writes them under their names (unique, 1 to 1000 bytes, not
 * "__metadata__") through a temporary file renamed over path; it returns
 * TACT_OK or an error (its text in tact_ctx_error).  load gives the tensor
 * stored under name.  The file is checked as strictly as the format is
 * written: a header of at most 100 MiB of JSON whose strings are UTF-8
 * (no escaped NUL, no lone surrogate), known dtypes, offsets that match
 * each shape, no name twice, and tensors whose data cover the data
 * section exactly (in order, no overlap, no gap, no trailing bytes).  A
 * missing, truncated or hostile file, a path that is not a regular file
 * (a FIFO is refused at once, never waited on), or a missing name is an
 * error tensor naming the path and the cause. */
int tact_save_safetensors(tact_ctx *ctx, const char *path, int n, const char *const *names, tact_tensor *const *tensors);
tact_tensor *tact_load_safetensors(tact_ctx *ctx, const char *path, const char *name);

/* ============================================================ sync points */

/* Computes the tensors (they stay computed).  Any number of tensors and
 * any graph size: kernels that would outgrow a device's limits are split,
 * and very large graphs are scheduled in parts.  Returns TACT_OK, the first
 * error of an error tensor among them, or the pipeline's error (a compile
 * failure, a timeout); the message is in tact_ctx_error. */
int tact_realize(tact_ctx *ctx, int n, tact_tensor *const *tensors);
/* Starts computing the tensors and returns at once: the program may go on
 * building (and start more realizes) while the pipeline works, which hides
 * scheduling, compiling and running behind the program's own work; the
 * pipeline's stages also work on several realizes at once (realize k+1 is
 * scheduled and compiled while realize k runs).  Realizes run in the order
 * they were started, and results, bits and logs are the same as with
 * tact_realize.  Returns TACT_OK, or an error tensor's error, or a send
 * failure; the realize's own errors surface at the next sync point
 * (tact_wait, tact_realize, tact_read, tact_item).  A realize started
 * before an earlier one failed, and reading what that one should have
 * computed, fails too (never reads garbage); after the sync point both
 * compute again when asked. */
int tact_realize_async(tact_ctx *ctx, int n, tact_tensor *const *tensors);
/* Waits for every realize started and not yet waited for.  Returns TACT_OK
 * or the first one's error (its text in tact_ctx_error). */
int tact_wait(tact_ctx *ctx);
/* Realizes t and copies its elements (row-major, numel * dtype size bytes)
 * into buf; bytes must be at least that.  Returns TACT_OK or an error.
 * The bytes of small tensors a tact_realize named (at most 64 bytes each,
 * the first 16 of a realize: a loss) come back with the realize's answer,
 * and reading one of them sends nothing. */
int tact_read(tact_tensor *t, void *buf, size_t bytes);
/* Reads a one-element tensor as a double. */
int tact_item(tact_tensor *t, double *out);

#ifdef __cplusplus
}
#endif
#endif /* TACT_H */
