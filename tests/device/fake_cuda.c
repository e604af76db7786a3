/* fake_cuda.c - a stand-in libcuda.so.1 for test_cuda_fake: the driver API over host memory, so the CUDA device's host side runs without a GPU.
 *
 * Buffers are calloc'd host memory, copies are memcpy, streams finish at
 * once, a module is any cubin (ELF) or PTX text, and a launch is counted
 * but runs nothing (outputs stay as they were).  FAKE_CUDA_FAIL injects a
 * failure: "launch" (cuLaunchKernel fails), "sync" (the stream reports an
 * illegal address), "init" (cuInit fails), "load" (cuModuleLoadData
 * refuses the image); FAKE_CUDA_MEM caps the bytes allocated at once.
 * fake_cuda_stats tells the test what is live. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { OK = 0, E_INVALID_VALUE = 1, E_OUT_OF_MEMORY = 2, E_NOT_INITIALIZED = 3, E_INVALID_IMAGE = 200, E_NOT_FOUND = 500, E_ILLEGAL_ADDRESS = 700, E_LAUNCH_FAILED = 719 };

static long s_live_bufs, s_live_modules, s_launches, s_bytes;

static int s_fail(const char *what) {
    const char *f = getenv("FAKE_CUDA_FAIL");
    return f && strcmp(f, what) == 0;
}

void fake_cuda_stats(long *bufs, long *modules, long *launches) {
    *bufs = s_live_bufs, *modules = s_live_modules, *launches = s_launches;
}

CUresult cuInit(unsigned flags) { return flags ? E_INVALID_VALUE : s_fail("init") ? E_NOT_INITIALIZED : OK; }
CUresult cuDriverGetVersion(int *v) { return *v = 13000, OK; }
CUresult cuDeviceGetCount(int *n) { return *n = 1, OK; }
CUresult cuDeviceGet(int *d, int i) { return i == 0 ? (*d = 0, OK) : E_INVALID_VALUE; }
CUresult cuDeviceGetName(char *name, int len, int d) {
    (void)d;
    strncpy(name, "tact fake GPU", (size_t)len);
    return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { return (void)d, *b = (size_t)1 << 30, OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d;
    switch (attr) {
    case 1: *v = 1024; break;  /* max threads per block */
    case 8: *v = 49152; break; /* shared memory per block */
    case 16: *v = 4; break;    /* multiprocessors */
    case 75: *v = 9; break;    /* compute capability 9.0 */
    case 76: *v = 0; break;
    default: return E_INVALID_VALUE;
    }
    return OK;
}
static int s_ctx;
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { return (void)d, *c = &s_ctx, OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { return (void)d, OK; }
CUresult cuCtxSetCurrent(void *c) { return c == &s_ctx ? OK : E_INVALID_VALUE; }
static int s_stream;
CUresult cuStreamCreate(void **s, unsigned f) { return (void)f, *s = &s_stream, OK; }
CUresult cuStreamDestroy_v2(void *s) { return s == &s_stream ? OK : E_INVALID_VALUE; }
CUresult cuStreamQuery(void *s) { return (void)s, s_fail("sync") && s_launches ? E_ILLEGAL_ADDRESS : OK; }
CUresult cuStreamSynchronize(void *s) { return cuStreamQuery(s); }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { return (void)s, (void)e, (void)f, OK; }

typedef struct {
    size_t size;
    _Alignas(16) unsigned char bytes[];
} s_buf_t;

CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) {
    const char *cap = getenv("FAKE_CUDA_MEM");
    if (cap && s_bytes + (long)n > atol(cap)) return E_OUT_OF_MEMORY;
    s_buf_t *b = calloc(1, sizeof *b + n);
    if (!b) return E_OUT_OF_MEMORY;
    b->size = n;
    s_bytes += (long)n;
    s_live_bufs++;
    *p = (unsigned long long)(uintptr_t)b->bytes;
    return OK;
}
CUresult cuMemFree_v2(unsigned long long p) {
    s_buf_t *b = (s_buf_t *)((unsigned char *)(uintptr_t)p - offsetof(s_buf_t, bytes));
    s_bytes -= (long)b->size;
    s_live_bufs--;
    free(b);
    return OK;
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long d, const void *h, size_t n, void *s) { return (void)s, memcpy((void *)(uintptr_t)d, h, n), OK; }
CUresult cuMemcpyDtoHAsync_v2(void *h, unsigned long long d, size_t n, void *s) { return (void)s, memcpy(h, (const void *)(uintptr_t)d, n), OK; }
CUresult cuMemsetD8Async(unsigned long long d, unsigned char v, size_t n, void *s) { return (void)s, memset((void *)(uintptr_t)d, v, n), OK; }
CUresult cuMemcpyPeerAsync(unsigned long long d, void *dc, unsigned long long s, void *sc, size_t n, void *st) {
    (void)dc, (void)sc, (void)st;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return OK;
}

CUresult cuModuleLoadData(void **m, const void *image) {
    const char *p = image;
    if (s_fail("load") || !(memcmp(p, "\177ELF", 4) == 0 || strstr(p, ".version"))) return E_INVALID_IMAGE;
    *m = malloc(1);
    s_live_modules++;
    return OK;
}
CUresult cuModuleUnload(void *m) { return free(m), s_live_modules--, OK; }
static int s_fn;
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { return (void)m, (void)name, *f = &s_fn, OK; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, void *s, void **params,
                        void **extra) {
    (void)gy, (void)gz, (void)by, (void)bz, (void)shared, (void)s, (void)extra;
    if (f != &s_fn || !params || gx == 0 || bx == 0 || bx > 1024) return E_INVALID_VALUE;
    if (s_fail("launch")) return E_LAUNCH_FAILED;
    s_launches++;
    return OK;
}
/* Static shared memory: 0 (the fake cannot read a cubin; every kernel runs in blocks of 128). */
CUresult cuFuncGetAttribute(int *v, int attr, void *f) { return (void)f, *v = 0, attr == 1 ? OK : E_INVALID_VALUE; }
static int s_event;
CUresult cuEventCreate(void **e, unsigned f) { return (void)f, *e = &s_event, OK; }
CUresult cuEventRecord(void *e, void *s) { return (void)e, (void)s, OK; }
CUresult cuEventSynchronize(void *e) { return (void)e, OK; }
CUresult cuEventDestroy_v2(void *e) { return (void)e, OK; }
/* NVRTC itself opens libcuda.so.1 and asks for this; a driver without it is fine. */
CUresult cuGetExportTable(const void **table, const void *id) { return (void)id, *table = NULL, 801; /* CUDA_ERROR_NOT_SUPPORTED */ }
CUresult cuGetErrorName(CUresult r, const char **s) {
    *s = r == E_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS" : r == E_LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED" : r == E_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY"
         : r == E_INVALID_IMAGE ? "CUDA_ERROR_INVALID_IMAGE" : r == E_NOT_INITIALIZED ? "CUDA_ERROR_NOT_INITIALIZED" : "CUDA_ERROR_UNKNOWN";
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == E_ILLEGAL_ADDRESS ? "an illegal memory access was encountered" : r == E_OUT_OF_MEMORY ? "out of memory" : "fake failure";
    return OK;
}
