/* printer_cuda.c - the CUDA printer: one thread per grid point (device.h's CUDA ABI), built here by NVRTC into a cubin for the device (cuda.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc.h"
#include "lower.h"
#include "mem.h"
#include "nvrtc.h"
#include "printer.h"

/* CUDA C++ as NVRTC reads it with -default-device (every function without
 * an execution space is a device function) and --fmad=false (a*b+c is two
 * roundings, as on the CPU): the C types and macros the helpers and
 * kernels use, with no header (NVRTC has no C library's). */
static const char s_prelude[] =
    "typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t; typedef unsigned short uint16_t;\n"
    "typedef int int32_t; typedef unsigned int uint32_t; typedef long long int64_t; typedef unsigned long long uint64_t;\n"
    "#define INT64_MAX 9223372036854775807LL\n#define INT64_MIN (-INT64_MAX - 1)\n"
    "#define INFINITY __int_as_float(0x7f800000)\n#define NAN __int_as_float(0x7fc00000)\n"
    "#define _Bool bool\n#define memcpy tact_memcpy\n"
    "static inline void tact_memcpy(void *d, const void *s, unsigned long n) {\n"
    "  uint8_t *o = (uint8_t *)d; const uint8_t *i = (const uint8_t *)s; for (unsigned long k = 0; k < n; k++) o[k] = i[k];\n"
    "}\n"
    /* The helpers' C: `static inline` functions are device functions here. */
    TA_PRINTER_HELPERS;

/* No vectors: the target says 4 bytes (a GPU's threads are its lanes). */
static void s_vectors(ta_out_t *o, int w) {
    (void)w;
    ta_out_put(o, "#error the CUDA printer has no vector types\n");
}

/* device.h's CUDA kernel ABI: the buffers, then the argument values by
 * value (a struct of at least one word) and n.  A kernel whose reduce a
 * block shares says the block's size in __launch_bounds__ and has its
 * shared memory, whose size tells the device the block's size. */
static void s_signature(ta_out_t *o, const ta_ast_t *a, const ta_lir_t *l, const char *name) {
    int words = a->nargs > 0 ? a->nargs : 1;
    if (l->group) ta_out_put(o, "; a block of %d threads per output */\n", l->group);
    else ta_out_put(o, " */\n");
    /* Named by its size, not the kernel: the compiler may rename a kernel
     * whose name another of the file has (" void NAME(" is the name's one
     * place). */
    ta_out_put(o, "#ifndef TACT_ARGS_%d\n#define TACT_ARGS_%d\nstruct tact_args_%d { uint64_t v[%d]; };\n#endif\n", words, words, words, words);
    if (l->group) ta_out_put(o, "extern \"C\" __global__ __launch_bounds__(%d) void %s(", l->group, name);
    else ta_out_put(o, "extern \"C\" __global__ void %s(", name);
    for (int b = 0; b < a->nbufs; b++)
        ta_out_put(o, "%s%s *__restrict__ data%d, ", b ? "const " : "", a->buf_dtype[b] == TACT_BOOL ? "uint8_t" : ta_render_mem_type(a->buf_dtype[b]), b);
    ta_out_put(o, "const struct tact_args_%d args_, int64_t n) {\n  const uint64_t *args = args_.v;\n", words);
    if (l->group) ta_out_put(o, "  __shared__ float tact_part[%d];\n", l->group);
}

/* A thread each, its number the grid's. */
static void s_items(ta_out_t *o, const ta_lir_t *l) {
    ta_printer_grid_items(o, l, "(int64_t)blockIdx.x", "(int)threadIdx.x", "(int64_t)blockIdx.x * blockDim.x + threadIdx.x");
}

/* The compute capability in the target's flags ("-arch=sm_90"), 0 if none. */
static int s_arch(const ta_target_t *t) {
    const char *at = t->flags ? strstr(t->flags, "sm_") : NULL;
    return at ? atoi(at + 3) : 0;
}

/* NVRTC's cubin for the target's sm_NN, so the driver never has to JIT
 * PTX newer than itself; for an architecture this NVRTC lacks, its PTX
 * for compute_90, which the driver finishes.  Kept in the cache folder
 * under the digest of NVRTC's version, the architecture and the source,
 * with the image's digest beside it (a damaged file is never used); the
 * image ends with a NUL (PTX is text the driver reads to its end). */
static int s_build(const char *src, const char *name, const ta_target_t *t, const char *cache_dir, uint8_t **obj, size_t *len, int *cached,
                   ta_error_t *err) {
    *obj = NULL, *len = 0, *cached = 0;
    int arch = s_arch(t), major = 0, minor = 0;
    if (arch <= 0) return ta_error_set(err, TACT_ECOMPILE, "CUDA: kernel %s: the target's flags name no sm_ architecture ('%s')", name, t->flags ? t->flags : "");
    int rc = ta_nvrtc_version(&major, &minor, err);
    if (rc != TACT_OK) return rc;
    char path[1200] = "";
    if (cache_dir && *cache_dir) {
        char src_digest[33], key[33], ident[200];
        ta_cc_digest(src, strlen(src), src_digest);
        snprintf(ident, sizeof ident, "NVRTC %d.%d|sm_%d|%s", major, minor, arch, src_digest);
        ta_cc_digest(ident, strlen(ident), key);
        snprintf(path, sizeof path, "%s/cuda-%s.bin", cache_dir, key);
        if (ta_cc_cache_get(path, obj, len) == TACT_OK) {
            if (*len && (*obj)[*len - 1] == 0) return *cached = 1, TACT_OK;
            ta_free(*obj), *obj = NULL, *len = 0;
        }
    }
    size_t n;
    rc = ta_nvrtc_compile(src, name, arch, 1, obj, &n, err);
    if (rc == TACT_EDEVICE && arch > 90) { /* an architecture this NVRTC lacks */
        ta_error_t e2;
        if (ta_nvrtc_compile(src, name, 90, 0, obj, &n, &e2) == TACT_OK) rc = TACT_OK;
    }
    if (rc != TACT_OK) return rc == TACT_EDEVICE ? ta_error_set(err, TACT_ECOMPILE, "CUDA: %s", err->text) : rc;
    *len = n + 1; /* with the NUL ta_nvrtc_compile puts after it */
    if (path[0]) ta_cc_cache_put(cache_dir, path, *obj, *len); /* a cache that cannot be written only costs time */
    return TACT_OK;
}

const ta_printer_t ta_printer_cuda = {
    .language = "CUDA",
    .ranges = 0,
    .half_loads = 0,
    .bool_masks = 0,
    .sum_tree = 0,
    .groups = 1,
    .device_builds = 0,
    .build = s_build,
    .prelude = s_prelude,
    .barrier = "__syncthreads();",
    .vectors = s_vectors,
    .signature = s_signature,
    .items = s_items,
};
