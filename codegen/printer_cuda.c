/* printer_cuda.c - the CUDA printer: one thread per grid point (device.h's CUDA ABI), built by NVRTC for the device (cuda.c). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"
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
 * block shares says the block's size in __launch_bounds__, which the
 * device reads from the source, and has its shared memory. */
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

const ta_printer_t ta_printer_cuda = {
    .language = "CUDA",
    .ranges = 0,
    .half_loads = 0,
    .bool_masks = 0,
    .sum_tree = 0,
    .groups = 1,
    .device_builds = 1,
    .prelude = s_prelude,
    .barrier = "__syncthreads();",
    .vectors = s_vectors,
    .signature = s_signature,
    .items = s_items,
};
