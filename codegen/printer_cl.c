/* printer_cl.c - the OpenCL C printer: one work item per grid point (device.h's CL ABI), built by the OpenCL device's driver. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"
#include "printer.h"

/* OpenCL C: the C types, functions and macros the helpers and kernels use,
 * from OpenCL's own (a float's value as float64 bits needs cl_khr_fp64). */
static const char s_prelude[] =
    "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
    "#pragma OPENCL FP_CONTRACT OFF\n" /* a*b+c is two roundings, as on the CPU (-ffp-contract=off) */
    "typedef char int8_t; typedef uchar uint8_t; typedef short int16_t; typedef ushort uint16_t;\n"
    "typedef int int32_t; typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;\n"
    "#define INT64_MAX LONG_MAX\n#define INT64_MIN LONG_MIN\n"
    "#define fmaf fma\n#define sqrtf sqrt\n#define log2f log2\n#define sinf sin\n#define truncf trunc\n#define fmodf fmod\n"
    "static inline void tact_memcpy(void *d, const void *s, size_t n) {\n"
    "  uchar *o = (uchar *)d; const uchar *i = (const uchar *)s; for (size_t k = 0; k < n; k++) o[k] = i[k];\n"
    "}\n"
    "#define memcpy tact_memcpy\n" TA_PRINTER_HELPERS;

/* OpenCL C's own vector types and built-ins, lane by lane the same
 * operations as the C printer's (FP_CONTRACT is off here too): vloadn and
 * vstoren read and write floats at any float-aligned address. */
static void s_vectors(ta_out_t *o, int w) {
    ta_out_put(o,
          "#ifndef TACT_W\n"
          "typedef float%d tact_vf;\ntypedef int%d tact_vi;\n"
          "#define TACT_W %d\n"
          "#define TACT_LANE(v, l) (((float *)&(v))[l])\n"
          "static inline tact_vf tact_vload(__global const float *p) { return vload%d(0, p); }\n"
          "static inline void tact_vstore(__global float *p, tact_vf x) { vstore%d(x, 0, p); }\n"
          "static inline tact_vf tact_vsplat(float x) { return (tact_vf)(x); }\n"
          "static inline tact_vf tact_vload_n(__global const float *p, int64_t n) {\n"
          "  tact_vf r = (tact_vf)(0.0f); for (int l = 0; l < TACT_W; l++) if (l < n) TACT_LANE(r, l) = p[l]; return r;\n"
          "}\n"
          "static inline void tact_vstore_n(__global float *p, tact_vf x, int64_t n) { for (int l = 0; l < TACT_W; l++) if (l < n) p[l] = TACT_LANE(x, l); }\n"
          "static inline tact_vf tact_vmax(tact_vf a, tact_vf b) { return select(b, a, (a != a) | (a > b)); }\n"
          "static inline tact_vf tact_vfma(tact_vf a, tact_vf b, tact_vf c) { return fma(a, b, c); }\n"
          "static inline tact_vf tact_vexp2(tact_vf x) {\n"
          "  tact_vi nan = x != x;\n"
          "  tact_vf y = select(select(select(x, (tact_vf)(129.0f), x > 129.0f), (tact_vf)(-160.0f), x < -160.0f), (tact_vf)(0.0f), nan);\n"
          "  tact_vf n = (y + 12582912.0f) - 12582912.0f, f = y - n, p = TACT_EXP2_POLY(tact_vfma, tact_vsplat, f);\n"
          "  tact_vi k = convert_int%d(n), k1 = k >> 1, k2 = k - k1;\n"
          "  tact_vf r = p * as_float%d((k1 + 127) << 23) * as_float%d((k2 + 127) << 23);\n"
          "  return select(r, x + x, nan);\n"
          "}\n"
          "/* Lane by lane, as the scalar code: a vector built-in may round otherwise. */\n"
          "static inline tact_vf tact_vlog2(tact_vf x) { tact_vf r; for (int l = 0; l < TACT_W; l++) TACT_LANE(r, l) = log2(TACT_LANE(x, l)); return r; }\n"
          "static inline tact_vf tact_vsin(tact_vf x) { tact_vf r; for (int l = 0; l < TACT_W; l++) TACT_LANE(r, l) = sin(TACT_LANE(x, l)); return r; }\n"
          "static inline tact_vf tact_vxlog2(tact_vf x) { tact_vf r; for (int l = 0; l < TACT_W; l++) TACT_LANE(r, l) = tact_xlog2f(TACT_LANE(x, l)); return r; }\n"
          "static inline tact_vf tact_vxsin(tact_vf x) { tact_vf r; for (int l = 0; l < TACT_W; l++) TACT_LANE(r, l) = tact_xsinf(TACT_LANE(x, l)); return r; }\n"
          "static inline tact_vf tact_vsqrt(tact_vf x) { return sqrt(x); }\n"
          "static inline tact_vf tact_vtrunc(tact_vf x) { return trunc(x); }\n"
          "static inline tact_vf tact_vfmod(tact_vf x, tact_vf y) { return fmod(x, y); }\n"
          "static inline float tact_vsum(tact_vf a) {\n"
          "  float h[TACT_W]; for (int l = 0; l < TACT_W; l++) h[l] = TACT_LANE(a, l);\n"
          "  for (int w = TACT_W / 2; w; w /= 2) for (int l = 0; l < w; l++) h[l] = h[l] + h[l + w];\n"
          "  return h[0];\n"
          "}\n"
          "static inline float tact_vhmax(tact_vf a) {\n"
          "  float h[TACT_W]; for (int l = 0; l < TACT_W; l++) h[l] = TACT_LANE(a, l);\n"
          "  for (int w = TACT_W / 2; w; w /= 2) for (int l = 0; l < w; l++) h[l] = tact_maxf(h[l], h[l + w]);\n"
          "  return h[0];\n"
          "}\n"
          "#endif\n",
          w, w, w, w, w, w, w, w);
}

/* device.h's OpenCL kernel ABI; a bool is a byte in memory.  A kernel
 * whose reduce a work group shares says the group's size, which the
 * device reads (reqd_work_group_size), and has its local memory. */
static void s_signature(ta_out_t *o, const ta_ast_t *a, const ta_lir_t *l, const char *name) {
    if (l->group)
        ta_out_put(o, "; a work group of %d items per output */\n__kernel __attribute__((reqd_work_group_size(%d, 1, 1))) void %s(", l->group, l->group,
                   name);
    else ta_out_put(o, " */\n__kernel void %s(", name);
    for (int b = 0; b < a->nbufs; b++)
        ta_out_put(o, "__global %s%s *restrict data%d, ", b ? "const " : "", a->buf_dtype[b] == TACT_BOOL ? "uint8_t" : ta_render_mem_type(a->buf_dtype[b]), b);
    ta_out_put(o, "__global const ulong *restrict args, long n) {\n");
    if (l->group) ta_out_put(o, "  __local float tact_part[%d];\n", l->group);
}

/* A work item each, its number the grid's. */
static void s_items(ta_out_t *o, const ta_lir_t *l) {
    ta_printer_grid_items(o, l, "(int64_t)get_group_id(0)", "(int)get_local_id(0)", "(int64_t)get_global_id(0)");
}

const ta_printer_t ta_printer_cl = {
    .language = "OpenCL C",
    .ranges = 0,
    .half_loads = 0,
    .bool_masks = 0,
    .sum_tree = 0,
    .groups = 1,
    .device_builds = 1,
    .prelude = s_prelude,
    .barrier = "barrier(CLK_LOCAL_MEM_FENCE);",
    .vectors = s_vectors,
    .signature = s_signature,
    .items = s_items,
};
