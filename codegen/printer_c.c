/* printer_c.c - the C printer: kernels the CPU device runs, built by the system C compiler into shared objects (device.h's CPU ABI). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"
#include "printer.h"

/* The C library's names a kernel uses, from the compiler's own builtins
 * rather than <stdint.h>, <string.h> and <math.h>: parsing those took a
 * quarter of a small kernel's compile.  A call that is not inlined goes
 * to the C library the process has loaded, as before. */
static const char s_prelude[] =
    "typedef __INT8_TYPE__ int8_t; typedef __UINT8_TYPE__ uint8_t; typedef __INT16_TYPE__ int16_t; typedef __UINT16_TYPE__ uint16_t;\n"
    "typedef __INT32_TYPE__ int32_t; typedef __UINT32_TYPE__ uint32_t; typedef __INT64_TYPE__ int64_t; typedef __UINT64_TYPE__ uint64_t;\n"
    "typedef __SIZE_TYPE__ size_t;\n"
    "#define INT64_MAX __INT64_MAX__\n#define INT64_MIN (-__INT64_MAX__ - 1)\n"
    "#define INFINITY __builtin_inff()\n#define NAN __builtin_nanf(\"\")\n"
    "#define memcpy __builtin_memcpy\n"
    "#define fmaf __builtin_fmaf\n#define fma __builtin_fma\n#define sqrtf __builtin_sqrtf\n#define sqrt __builtin_sqrt\n"
    "#define log2f __builtin_log2f\n#define log2 __builtin_log2\n#define sinf __builtin_sinf\n#define sin __builtin_sin\n"
    "#define exp2 __builtin_exp2\n#define truncf __builtin_truncf\n#define trunc __builtin_trunc\n"
    "#define fmodf __builtin_fmodf\n#define fmod __builtin_fmod\n"
    "#if defined(__F16C__) && defined(__GNUC__) && !defined(__clang__)\n" /* x86's float16 conversions (clang 22 dropped their builtins) */
    "#define TACT_F16C 1\n"
    "typedef short tact_v8hi __attribute__((vector_size(16)));\n"
    "typedef float tact_v4sf __attribute__((vector_size(16)));\n"
    "static inline float tact_h2f_hw(uint16_t h) { return __builtin_ia32_vcvtph2ps((tact_v8hi){(short)h})[0]; }\n"
    "static inline uint16_t tact_f2h_hw(float f) { return (uint16_t)__builtin_ia32_vcvtps2ph((tact_v4sf){f}, 0)[0]; }\n"
    "#endif\n"
    /* A scalar WHERE of floats as an integer mask of its condition, not a
     * branch: gcc branches on a float select, and a condition that follows
     * the data (is this the window's max?) is guessed wrong half the time
     * (the CNN's max-pool gradient: 3.9 ms, 1.2 ms with the masks). */
    "static inline float tact_self(_Bool c, float x, float y) {\n"
    "  uint32_t a, b, m = -(uint32_t)c; memcpy(&a, &x, 4); memcpy(&b, &y, 4); a = (a & m) | (b & ~m); memcpy(&x, &a, 4); return x;\n"
    "}\n"
    "static inline double tact_seld(_Bool c, double x, double y) {\n"
    "  uint64_t a, b, m = -(uint64_t)c; memcpy(&a, &x, 8); memcpy(&b, &y, 8); a = (a & m) | (b & ~m); memcpy(&x, &a, 8); return x;\n"
    "}\n" TA_PRINTER_HELPERS;

/* Vector types and helpers for kernels with a VECTOR axis of w float32
 * lanes (GCC vector extensions; a scalar operand of + - * / is splat).
 * Functions without a vector instruction run lane by lane, which gcc
 * turns into one instruction where there is one (sqrt, fma). */
static void s_vectors(ta_out_t *o, int w) {
    /* A splat spelled as an initializer: gcc 12 made a lane loop a masked
     * broadcast per lane, inside the loops. */
    char splat[400] = "static inline tact_vf tact_vsplat(float x) { return (tact_vf){x";
    for (int l = 1; l < w && l < 64; l++) strcat(splat, ",x");
    strcat(splat, "}; }\n");
    /* The HALF load as one load of half a vector and a shuffle (a quick
     * -Og build keeps a lane loop a lane loop). */
    char half[1024] = "", dup[400] = ""; /* w <= 64 lanes */
    for (int l = 0; l < w && l < 64; l++) snprintf(dup + strlen(dup), sizeof dup - strlen(dup), ", %d", l / 2);
    snprintf(half, sizeof half,
             "#if defined(__clang__) || __GNUC__ >= 12\n"
             "typedef float tact_vhu __attribute__((vector_size(%d), aligned(4)));\n"
             "static inline tact_vf tact_vload_half(const float *p) { tact_vhu h = *(const tact_vhu *)p; return __builtin_shufflevector(h, h%s); }\n"
             "#else\n"
             "static inline tact_vf tact_vload_half(const float *p) { tact_vf r; for (int l = 0; l < TACT_W; l++) r[l] = p[l / 2]; return r; }\n"
             "#endif\n",
             2 * w, dup);
    /* Kernels of one width share a file (compiler.c): the helpers once. */
    ta_out_put(o,
          "#ifndef TACT_W\n"
          "typedef float tact_vf __attribute__((vector_size(%d)));\n"
          "typedef float tact_vfu __attribute__((vector_size(%d), aligned(4)));\n"
          "typedef int32_t tact_vi __attribute__((vector_size(%d)));\n"
          "#define TACT_W %d\n"
          "#define TACT_LANE(v, l) ((v)[l])\n"
          "static inline tact_vf tact_vload(const float *p) { return *(const tact_vfu *)p; }\n"
          "static inline void tact_vstore(float *p, tact_vf x) { *(tact_vfu *)p = x; }\n"
          "/* TACT_W vectors as the rows of a square, transposed in place (a transposing copy's loads). */\n"
          "#if TACT_W == 8 && (defined(__clang__) || __GNUC__ >= 12)\n"
          "#define TACT_LO2(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 4, 12, 5, 13)\n"
          "#define TACT_HI2(a, b) __builtin_shufflevector(a, b, 2, 10, 3, 11, 6, 14, 7, 15)\n"
          "#define TACT_LO4(a, b) __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13)\n"
          "#define TACT_HI4(a, b) __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15)\n"
          "#define TACT_LO8(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11)\n"
          "#define TACT_HI8(a, b) __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15)\n"
          "static inline void tact_vtranspose(tact_vf *v) {\n"
          "  tact_vf t0 = TACT_LO2(v[0], v[1]), t1 = TACT_HI2(v[0], v[1]), t2 = TACT_LO2(v[2], v[3]), t3 = TACT_HI2(v[2], v[3]);\n"
          "  tact_vf t4 = TACT_LO2(v[4], v[5]), t5 = TACT_HI2(v[4], v[5]), t6 = TACT_LO2(v[6], v[7]), t7 = TACT_HI2(v[6], v[7]);\n"
          "  tact_vf u0 = TACT_LO4(t0, t2), u1 = TACT_HI4(t0, t2), u2 = TACT_LO4(t1, t3), u3 = TACT_HI4(t1, t3);\n"
          "  tact_vf u4 = TACT_LO4(t4, t6), u5 = TACT_HI4(t4, t6), u6 = TACT_LO4(t5, t7), u7 = TACT_HI4(t5, t7);\n"
          "  v[0] = TACT_LO8(u0, u4), v[4] = TACT_HI8(u0, u4), v[1] = TACT_LO8(u1, u5), v[5] = TACT_HI8(u1, u5);\n"
          "  v[2] = TACT_LO8(u2, u6), v[6] = TACT_HI8(u2, u6), v[3] = TACT_LO8(u3, u7), v[7] = TACT_HI8(u3, u7);\n"
          "}\n"
          "#else\n"
          "static inline void tact_vtranspose(tact_vf *v) {\n"
          "  tact_vf r[TACT_W];\n"
          "  for (int i = 0; i < TACT_W; i++) for (int j = 0; j < TACT_W; j++) r[i][j] = v[j][i];\n"
          "  for (int i = 0; i < TACT_W; i++) v[i] = r[i];\n"
          "}\n"
          "#endif\n"
          "%s"
          "/* The first n lanes (n may be <= 0 or >= TACT_W): a padded dim's last tile. */\n"
          "static inline tact_vf tact_vload_n(const float *p, int64_t n) { tact_vf r = {0}; for (int l = 0; l < TACT_W; l++) if (l < n) r[l] = p[l]; return r; }\n"
          "/* Each of TACT_W / 2 floats for two lanes in turn. */\n"
          "%s"
          "static inline tact_vf tact_vload_half_n(const float *p, int64_t n) { tact_vf r = {0}; for (int l = 0; l < TACT_W; l++) if (l < n) r[l] = p[l / 2]; return r; }\n"
          "static inline void tact_vstore_n(float *p, tact_vf x, int64_t n) { for (int l = 0; l < TACT_W; l++) if (l < n) p[l] = x[l]; }\n"
          "/* float16 and bfloat16 into float32 lanes, exactly, NaNs keeping their\n"
          "   bits (as tact_h2f, tact_bf2f): integer lanes, no F16C needed. */\n"
          "typedef uint16_t tact_v16u __attribute__((vector_size(%d), aligned(2)));\n"
          "typedef uint32_t tact_vu __attribute__((vector_size(%d)));\n"
          "static inline tact_vf tact_vh2f(tact_vu x) {\n"
          "  tact_vu e = x & 0x7c00, m = x & 0x3ff, z = (tact_vu)(e == 0), big = (tact_vu)(e == 0x7c00);\n"
          "  tact_vu norm = ((x & 0x7fff) << 13) + 0x38000000, sub = (tact_vu)(__builtin_convertvector(m, tact_vf) * 5.9604644775390625e-8f);\n"
          "  return (tact_vf)(((x & 0x8000) << 16) | (sub & z) | ((0x7f800000 | m << 13) & big) | (norm & ~(z | big)));\n"
          "}\n"
          "static inline tact_vf tact_vloadh(const uint16_t *p) {\n"
          "  tact_v16u h = *(const tact_v16u *)p;\n"
          "  tact_vu x = __builtin_convertvector(h, tact_vu);\n"
          "#if defined(TACT_F16C) && (TACT_W == 8 || (TACT_W == 16 && defined(__AVX512F__)))\n"
          "  /* The machine's conversion, which makes a signalling NaN quiet: that\n"
          "     lane's quiet bit put back as it was. */\n"
          "  typedef short tact_vhs __attribute__((vector_size(2 * TACT_W)));\n"
          "#if TACT_W == 8\n"
          "  tact_vf r = __builtin_ia32_vcvtph2ps256((tact_vhs)h);\n"
          "#else\n"
          "  tact_vf r = __builtin_ia32_vcvtph2ps512_mask((tact_vhs)h, tact_vsplat(0), (unsigned short)-1, 4);\n"
          "#endif\n"
          "  return (tact_vf)((tact_vu)r & ~((tact_vu)(r != r) & ((~x & 0x200) << 13)));\n"
          "#else\n"
          "  return tact_vh2f(x);\n"
          "#endif\n"
          "}\n"
          "static inline tact_vf tact_vloadbf(const uint16_t *p) { return (tact_vf)(__builtin_convertvector(*(const tact_v16u *)p, tact_vu) << 16); }\n"
          "/* float32 lanes rounded to float16 or bfloat16 (to nearest even) and\n"
          "   stored, NaNs as tact_f2h and tact_f2bf make them. */\n"
          "static inline tact_v16u tact_vf2h(tact_vf x) {\n"
          "#if defined(TACT_F16C) && (TACT_W == 8 || (TACT_W == 16 && defined(__AVX512F__)))\n"
          "  typedef short tact_vhs __attribute__((vector_size(2 * TACT_W)));\n"
          "#if TACT_W == 8\n"
          "  tact_v16u r = (tact_v16u)__builtin_ia32_vcvtps2ph256(x, 0);\n"
          "#else\n"
          "  tact_v16u r = (tact_v16u)__builtin_ia32_vcvtps2ph512_mask(x, 0, (tact_vhs){0}, (unsigned short)-1);\n"
          "#endif\n"
          "  tact_vu u = (tact_vu)x, m = (u >> 13) & 0x3ff;\n"
          "  tact_v16u nan = __builtin_convertvector((tact_vu)(x != x), tact_v16u);\n"
          "  tact_v16u q = __builtin_convertvector(((u >> 16) & 0x8000) | 0x7c00 | m | ((tact_vu)(m == 0) & 0x200), tact_v16u);\n"
          "  return (r & ~nan) | (q & nan);\n"
          "#else\n"
          "  tact_v16u r; for (int l = 0; l < TACT_W; l++) r[l] = tact_f2h(x[l]); return r;\n"
          "#endif\n"
          "}\n"
          "static inline tact_v16u tact_vf2bf(tact_vf x) {\n"
          "  tact_vu u = (tact_vu)x, hi = u >> 16, nan = (tact_vu)((u & 0x7fffffffu) > 0x7f800000u);\n"
          "  tact_vu r = ((u + 0x7fffu + (hi & 1)) >> 16 & ~nan) | ((hi | ((tact_vu)((hi & 0x7f) == 0) & 0x40)) & nan);\n"
          "  return __builtin_convertvector(r, tact_v16u);\n"
          "}\n"
          "static inline void tact_vstoreh(uint16_t *p, tact_vf x) { *(tact_v16u *)p = tact_vf2h(x); }\n"
          "static inline void tact_vstorebf(uint16_t *p, tact_vf x) { *(tact_v16u *)p = tact_vf2bf(x); }\n"
          "static inline void tact_vstoreh_n(uint16_t *p, tact_vf x, int64_t n) { tact_v16u r = tact_vf2h(x); for (int l = 0; l < TACT_W; l++) if (l < n) p[l] = r[l]; }\n"
          "static inline void tact_vstorebf_n(uint16_t *p, tact_vf x, int64_t n) { tact_v16u r = tact_vf2bf(x); for (int l = 0; l < TACT_W; l++) if (l < n) p[l] = r[l]; }\n"
          "static inline tact_vf tact_vloadh_n(const uint16_t *p, int64_t n) { tact_vu x = {0}; for (int l = 0; l < TACT_W; l++) if (l < n) x[l] = p[l]; return tact_vh2f(x); }\n"
          "static inline tact_vf tact_vloadbf_n(const uint16_t *p, int64_t n) { tact_vu x = {0}; for (int l = 0; l < TACT_W; l++) if (l < n) x[l] = p[l]; return (tact_vf)(x << 16); }\n"
          "/* max propagates NaN from either side, as tact_maxf. */\n"
          "static inline tact_vf tact_vmax(tact_vf a, tact_vf b) {\n"
          "  tact_vi m = (a != a) | (a > b); return (tact_vf)(((tact_vi)a & m) | ((tact_vi)b & ~m));\n"
          "}\n"
          "/* The lanes of x where c is -1, of y where it is 0. */\n"
          "static inline tact_vf tact_vsel(tact_vi c, tact_vf x, tact_vf y) { return (tact_vf)(((tact_vi)x & c) | ((tact_vi)y & ~c)); }\n"
          "/* One rounding per lane, as fmaf: the machine's instruction where gcc\n"
          "   has a builtin for it (a quick -Og build does not vectorize the loop). */\n"
          "static inline tact_vf tact_vfma(tact_vf a, tact_vf b, tact_vf c) {\n"
          "#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__AVX512F__) && TACT_W == 16\n"
          "  return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4);\n"
          "#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__FMA__) && TACT_W == 8\n"
          "  return __builtin_ia32_vfmaddps256(a, b, c);\n"
          "#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__FMA__) && TACT_W == 4\n"
          "  return __builtin_ia32_vfmaddps(a, b, c);\n"
          "#else\n"
          "  tact_vf r; for (int l = 0; l < TACT_W; l++) r[l] = fmaf(a[l], b[l], c[l]); return r;\n"
          "#endif\n"
          "}\n"
          "#define TACT_VMAP(NAME, F) static inline tact_vf NAME(tact_vf x) { tact_vf r; for (int l = 0; l < TACT_W; l++) r[l] = F(x[l]); return r; }\n"
          "static inline tact_vf tact_vexp2(tact_vf x) {\n"
          "  tact_vi nan = x != x, hi = x > 129.0f, lo = x < -160.0f;\n"
          "  tact_vf y = (tact_vf)(((tact_vi)x & ~(hi | lo | nan)) | ((tact_vi)tact_vsplat(129.0f) & hi) | ((tact_vi)tact_vsplat(-160.0f) & lo));\n"
          "  tact_vf n = (y + 12582912.0f) - 12582912.0f, f = y - n, p = TACT_EXP2_POLY(tact_vfma, tact_vsplat, f);\n"
          "  tact_vi k = __builtin_convertvector(n, tact_vi), k1 = k >> 1, k2 = k - k1;\n"
          "  tact_vf r = p * (tact_vf)((k1 + 127) << 23) * (tact_vf)((k2 + 127) << 23), q = x + x;\n"
          "  return (tact_vf)(((tact_vi)r & ~nan) | ((tact_vi)q & nan));\n"
          "}\n"
          "TACT_VMAP(tact_vlog2, log2f) TACT_VMAP(tact_vsin, sinf) TACT_VMAP(tact_vsqrt, sqrtf) TACT_VMAP(tact_vtrunc, truncf)\n"
          "TACT_VMAP(tact_vxlog2, tact_xlog2f) TACT_VMAP(tact_vxsin, tact_xsinf)\n"
          "static inline tact_vf tact_vfmod(tact_vf x, tact_vf y) { tact_vf r; for (int l = 0; l < TACT_W; l++) r[l] = fmodf(x[l], y[l]); return r; }\n"
          "/* The lanes of a reduce's partials, added (or maxed) in a fixed tree. */\n"
          "static inline float tact_vsum(tact_vf a) {\n"
          "  float h[TACT_W]; memcpy(h, &a, sizeof h);\n"
          "  for (int w = TACT_W / 2; w; w /= 2) for (int l = 0; l < w; l++) h[l] = h[l] + h[l + w];\n"
          "  return h[0];\n"
          "}\n"
          "static inline float tact_vhmax(tact_vf a) {\n"
          "  float h[TACT_W]; memcpy(h, &a, sizeof h);\n"
          "  for (int w = TACT_W / 2; w; w /= 2) for (int l = 0; l < w; l++) h[l] = tact_maxf(h[l], h[l + w]);\n"
          "  return h[0];\n"
          "}\n"
          "#endif\n",
          4 * w, 4 * w, 4 * w, w, splat, half, 2 * w, 4 * w);
}

/* device.h's CPU ABI: outputs [start, end) of the work items' outputs,
 * the buffers in bufs. */
static void s_signature(ta_out_t *o, const ta_ast_t *a, const ta_lir_t *l, const char *name) {
    (void)l;
    ta_out_put(o, " */\nvoid %s(int64_t start, int64_t end, void **restrict bufs, const uint64_t *restrict args) {\n", name);
    for (int b = 0; b < a->nbufs; b++) ta_out_put(o, "  %s%s *restrict data%d = bufs[%d];\n", b ? "const " : "", ta_render_mem_type(a->buf_dtype[b]), b, b);
}

static void s_items(ta_out_t *o, const ta_lir_t *l) {
    if (l->align > 1) ta_out_put(o, "  for (int64_t gidx = start/%" PRId64 "; gidx < end/%" PRId64 "; gidx++) {\n", l->align, l->align);
    else ta_out_put(o, "  for (int64_t gidx = start; gidx < end; gidx++) {\n");
}

const ta_printer_t ta_printer_c = {
    .language = "C",
    .ranges = 1,
    .half_loads = 1,
    .vector_halves = 1,
    .bit_selects = 1,
    .bool_masks = 1,
    .sum_tree = 1,
    .groups = 0,
    .device_builds = 0,
    .prelude = s_prelude,
    .barrier = "",
    .vectors = s_vectors,
    .signature = s_signature,
    .items = s_items,
};
