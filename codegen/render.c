/* render.c - renders a kernel AST as a readable C function (STYLE.md: names, fused-node comment, loop depth). */
#include "render.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"
#include "mem.h"

/* ------------------------------------------------------------ the prelude */

/* The helpers every kernel may use, in C that OpenCL C also reads (with
 * the definitions of s_cl_prelude). */
#define S_HELPERS \
    "/* 16-bit floats: stored as bits, computed in float, rounded after every op.\n" \
    "   NaNs keep their bits both ways (arithmetic makes them quiet anyway), so\n" \
    "   a bitcast through a float register is exact. */\n" \
    "static inline float tact_h2f(uint16_t h) {\n" \
    "  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;\n" \
    "  if (e == 31) u = s | 0x7f800000u | (m << 13);\n" \
    "  else if (e) u = s | ((e + 112) << 23) | (m << 13);\n" \
    "  else if (!m) u = s;\n" \
    "  else { e = 113; while (!(m & 1024)) { m <<= 1; e--; } u = s | (e << 23) | ((m & 1023) << 13); }\n" \
    "  float f; memcpy(&f, &u, 4); return f;\n" \
    "}\n" \
    "static inline uint16_t tact_f2h(float f) {\n" \
    "  uint32_t u; memcpy(&u, &f, 4);\n" \
    "  uint32_t s = (u >> 16) & 0x8000, a = u & 0x7fffffffu;\n" \
    "  if (a > 0x7f800000u) { uint32_t m = (a >> 13) & 0x3ff; return (uint16_t)(s | 0x7c00 | (m ? m : 0x200)); }\n" \
    "  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00);\n" \
    "  if (a < 0x38800000u) {\n" \
    "    if (a < 0x33000000u) return (uint16_t)s;\n" \
    "    uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000, sh = 126 - e;\n" \
    "    uint32_t r = m >> sh, rem = m & ((1u << sh) - 1), hf = 1u << (sh - 1);\n" \
    "    if (rem > hf || (rem == hf && (r & 1))) r++;\n" \
    "    return (uint16_t)(s | r);\n" \
    "  }\n" \
    "  uint32_t r = a - 0x38000000u, h = r >> 13, rem = r & 0x1fff;\n" \
    "  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;\n" \
    "  return (uint16_t)(s | h);\n" \
    "}\n" \
    "static inline float tact_bf2f(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }\n" \
    "static inline uint16_t tact_f2bf(float f) {\n" \
    "  uint32_t u; memcpy(&u, &f, 4);\n" \
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | ((u >> 16) & 0x7f ? 0 : 0x40));\n" \
    "  u += 0x7fffu + ((u >> 16) & 1); return (uint16_t)(u >> 16);\n" \
    "}\n" \
    "static inline float tact_rh(float x) { return tact_h2f(tact_f2h(x)); }\n" \
    "/* A kernel argument: a float's value travels as a float64's bits. */\n" \
    "static inline double tact_argf(uint64_t w) { double d; memcpy(&d, &w, 8); return d; }\n" \
    "static inline float tact_rbf(float x) { return tact_bf2f(tact_f2bf(x)); }\n" \
    "/* Integer division and modulo truncate toward zero; by zero they give 0. */\n" \
    "static inline int64_t tact_idiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; }\n" \
    "static inline int64_t tact_imod(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }\n" \
    "static inline uint64_t tact_udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }\n" \
    "static inline uint64_t tact_umod(uint64_t a, uint64_t b) { return b ? a % b : 0; }\n" \
    "/* 2^x in float: 2^n times a degree-6 polynomial of f = x - n, |f| <= 1/2\n" \
    "   (relative error 2e-9), evaluated with fma; within 1 ulp of 2^x over every\n" \
    "   float (checked exhaustively), subnormal results rounded once.  The\n" \
    "   vector version does the same operations lane by lane: the same bits. */\n" \
    "#define TACT_EXP2_POLY(FMA, K, f) FMA(FMA(FMA(FMA(FMA(FMA(K(1.535336196e-04f), f, K(1.339887502e-03f)), f, K(9.618436918e-03f)), f, \\\n" \
    "  K(5.550332367e-02f)), f, K(2.402264774e-01f)), f, K(6.931471825e-01f)), f, K(1.0f))\n" \
    "#define TACT_EXP2_K(x) (x)\n" \
    "static inline float tact_bitsf(int32_t i) { float f; memcpy(&f, &i, 4); return f; }\n" \
    "static inline float tact_exp2f(float x) {\n" \
    "  if (x != x) return x + x;\n" \
    "  x = x > 129.0f ? 129.0f : x < -160.0f ? -160.0f : x;\n" \
    "  float n = (x + 12582912.0f) - 12582912.0f, f = x - n, p = TACT_EXP2_POLY(fmaf, TACT_EXP2_K, f);\n" \
    "  int32_t k = (int32_t)n, k1 = k >> 1, k2 = k - k1;\n" \
    "  return p * tact_bitsf((k1 + 127) << 23) * tact_bitsf((k2 + 127) << 23);\n" \
    "}\n" \
    "/* max propagates NaN from either side. */\n" \
    "static inline float tact_maxf(float a, float b) { return a != a || a > b ? a : b; }\n" \
    "static inline double tact_maxd(double a, double b) { return a != a || a > b ? a : b; }\n" \
    "/* float -> int: NaN gives 0, out of the int64 range saturates, then C truncation. */\n" \
    "static inline int64_t tact_f2i(double x) {\n" \
    "  return x != x ? 0 : x >= 9223372036854775807.0 ? INT64_MAX : x <= -9223372036854775808.0 ? INT64_MIN : (int64_t)x;\n" \
    "}\n" \
    "static inline uint64_t tact_f2u(double x) {\n" \
    "  return x >= 0 && x < 18446744073709551616.0 ? (uint64_t)x : (uint64_t)tact_f2i(x);\n" \
    "}\n"

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
    "#define fmodf __builtin_fmodf\n#define fmod __builtin_fmod\n" S_HELPERS;

/* OpenCL C: the C types, functions and macros the helpers and kernels use,
 * from OpenCL's own (a float's value as float64 bits needs cl_khr_fp64). */
static const char s_cl_prelude[] =
    "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
    "#pragma OPENCL FP_CONTRACT OFF\n" /* a*b+c is two roundings, as on the CPU (-ffp-contract=off) */
    "typedef char int8_t; typedef uchar uint8_t; typedef short int16_t; typedef ushort uint16_t;\n"
    "typedef int int32_t; typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;\n"
    "#define INT64_MAX LONG_MAX\n#define INT64_MIN LONG_MIN\n"
    "#define fmaf fma\n#define sqrtf sqrt\n#define log2f log2\n#define sinf sin\n#define truncf trunc\n#define fmodf fmod\n"
    "static inline void tact_memcpy(void *d, const void *s, size_t n) {\n"
    "  uchar *o = (uchar *)d; const uchar *i = (const uchar *)s; for (size_t k = 0; k < n; k++) o[k] = i[k];\n"
    "}\n"
    "#define memcpy tact_memcpy\n" S_HELPERS;

const char *ta_render_prelude(void) { return s_prelude; }
const char *ta_render_cl_prelude(void) { return s_cl_prelude; }

/* ------------------------------------------------------- a string builder */

typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} s_str_t;

__attribute__((format(printf, 2, 3))) static void s_put(s_str_t *s, const char *fmt, ...) {
    if (s->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->p ? s->p + s->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap;
        if (ta_grow((void **)&s->p, &cap, s->len + (size_t)n + 1, 1) != TACT_OK) {
            s->failed = 1;
            return;
        }
        s->cap = cap;
    }
}

/* ---------------------------------------------------------------- types */

/* The C type a value of d lives in while computing. */
static const char *s_reg(tact_dtype d) {
    static const char *t[TACT_DTYPE_COUNT] = {"_Bool",   "int8_t",   "uint8_t", "int16_t", "uint16_t",
                                              "int32_t", "uint32_t", "int64_t", "uint64_t", "float",
                                              "float",   "float",    "double"};
    return t[d];
}

/* The C type of an element in memory. */
static const char *s_mem(tact_dtype d) {
    return d == TACT_FLOAT16 || d == TACT_BFLOAT16 ? "uint16_t" : s_reg(d);
}

static int s_is16(tact_dtype d) { return d == TACT_FLOAT16 || d == TACT_BFLOAT16; }
static int s_signed(tact_dtype d) { return ta_dtype_is_int(d) && !ta_dtype_is_unsigned(d); }

/* Wraps expr so the result has d's precision: 16-bit rounding, int width. */
static void s_round(s_str_t *s, tact_dtype d, const char *expr) {
    if (d == TACT_FLOAT16) s_put(s, "tact_rh(%s)", expr);
    else if (d == TACT_BFLOAT16) s_put(s, "tact_rbf(%s)", expr);
    else if (ta_dtype_is_float(d)) s_put(s, "(%s)", expr);
    else s_put(s, "(%s)(%s)", s_reg(d), expr);
}

/* Renders a constant of dtype d as a C literal. */
static void s_literal(s_str_t *s, tact_dtype d, ta_value_t v) {
    if (ta_dtype_is_float(d)) {
        double x = s_is16(d) ? (double)(d == TACT_FLOAT16 ? ta_half_to_float(v.h) : ta_bf16_to_float(v.h)) : v.f;
        const char *suf = d == TACT_FLOAT64 ? "" : "f";
        if (isnan(x)) s_put(s, "NAN");
        else if (isinf(x)) s_put(s, x > 0 ? "INFINITY" : "(-INFINITY)");
        else s_put(s, x < 0 ? "(%a%s)" : "%a%s", x, suf);
    } else if (ta_dtype_is_bool(d)) {
        s_put(s, "%d", v.b ? 1 : 0);
    } else if (ta_dtype_is_unsigned(d)) {
        s_put(s, "%" PRIu64 "ull", v.u);
    } else if (v.i == INT64_MIN) {
        s_put(s, "(-9223372036854775807ll-1)");
    } else {
        s_put(s, v.i < 0 ? "(%" PRId64 "ll)" : "%" PRId64 "ll", v.i);
    }
}

/* ---------------------------------------------------------------- nodes */

/* ---------------------------------------------------------------- vectors */

/* Vector types and helpers for kernels with a VECTOR axis of w float32
 * lanes (GCC vector extensions; a scalar operand of + - * / is splat).
 * Functions without a vector instruction run lane by lane, which gcc
 * turns into one instruction where there is one (sqrt, fma). */
/* OpenCL C's own vector types and built-ins do the same, lane by lane the
 * same operations (FP_CONTRACT is off there too): vloadn and vstoren read
 * and write floats at any float-aligned address. */
static void s_cl_vector_prelude(s_str_t *o, int w) {
    s_put(o,
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

static void s_vector_prelude(s_str_t *o, int w) {
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
    s_put(o,
          "#ifndef TACT_W\n"
          "typedef float tact_vf __attribute__((vector_size(%d)));\n"
          "typedef float tact_vfu __attribute__((vector_size(%d), aligned(4)));\n"
          "typedef int32_t tact_vi __attribute__((vector_size(%d)));\n"
          "#define TACT_W %d\n"
          "#define TACT_LANE(v, l) ((v)[l])\n"
          "static inline tact_vf tact_vload(const float *p) { return *(const tact_vfu *)p; }\n"
          "static inline void tact_vstore(float *p, tact_vf x) { *(tact_vfu *)p = x; }\n"
          "%s"
          "/* The first n lanes (n may be <= 0 or >= TACT_W): a padded dim's last tile. */\n"
          "static inline tact_vf tact_vload_n(const float *p, int64_t n) { tact_vf r = {0}; for (int l = 0; l < TACT_W; l++) if (l < n) r[l] = p[l]; return r; }\n"
          "/* Each of TACT_W / 2 floats for two lanes in turn. */\n"
          "%s"
          "static inline tact_vf tact_vload_half_n(const float *p, int64_t n) { tact_vf r = {0}; for (int l = 0; l < TACT_W; l++) if (l < n) r[l] = p[l / 2]; return r; }\n"
          "static inline void tact_vstore_n(float *p, tact_vf x, int64_t n) { for (int l = 0; l < TACT_W; l++) if (l < n) p[l] = x[l]; }\n"
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
          4 * w, 4 * w, 4 * w, w, splat, half);
}

/* ------------------------------------------------------------------ nodes */

typedef struct {
    const ta_ast_t *a;
    const ta_lir_t *l;
    s_str_t *out;
    ta_sym_arena_t *ar;
    /* Per upcast lane: every dim's index with the vector variable, and
     * with the vector at its first lane (a vector load's base). */
    const ta_sym_t *full[TA_LIR_MAX_LANES][TA_MAX_DIMS], *outi[TA_LIR_MAX_LANES][TA_MAX_DIMS];
    const ta_sym_t *full0[TA_LIR_MAX_LANES][TA_MAX_DIMS], *outi0[TA_LIR_MAX_LANES][TA_MAX_DIMS];
    char names[TA_AST_MAX_NODES][TA_LIR_MAX_LANES][16];
    int argno[TA_AST_MAX_NODES]; /* an argument CONST's argument index */
    int pre[TA_AST_MAX_NODES];   /* computed inside the reduce loops */
    int lane;                    /* the lane being emitted */
    int masked;                  /* emitting the padded dim's last tile */
    int flat;                    /* OpenCL: the first LOOP axis is part of the grid (a work item per iteration) */
    int group;                   /* OpenCL: a work group of this many items shares each output's reduce (0: none) */
    int nalu, nval, depth;
} s_ctx_t;

static void s_indent(s_ctx_t *c) {
    for (int i = 0; i < c->depth; i++) s_put(c->out, "  ");
}

/* The name of node i's value in the current lane. */
static const char *s_name(const s_ctx_t *c, int i) { return c->names[i][ta_lir_lane_of(c->l, i, c->lane)]; }

/* Node i's source s as a vector operand (a scalar is splat). */
static void s_vec_operand(s_ctx_t *c, s_str_t *e, int i) {
    if (c->l->nodes[i].vector) s_put(e, "%s", s_name(c, i));
    else s_put(e, "tact_vsplat(%s)", s_name(c, i));
}

/* Renders the position and validity of node n's view in the current lane
 * (base: the vector at its first lane); returns 0 or -1. */
static int s_index(s_ctx_t *c, const ta_ast_node_t *n, int pre, int base, char *pos, size_t pos_len, char *valid,
                   size_t valid_len, int *always, int *never) {
    const ta_sym_t *const *idx = base ? (pre ? c->full0[c->lane] : c->outi0[c->lane]) : (pre ? c->full[c->lane] : c->outi[c->lane]);
    const ta_sym_t *p, *v;
    if (ta_vstack_expr(&c->a->views[n->view], c->ar, idx, &p, &v) != 0) return -1;
    int64_t k;
    *always = ta_sym_is_const(v, &k) && k != 0;
    *never = ta_sym_is_const(v, &k) && k == 0;
    /* An expression too long for the buffer is an error, never a cut one. */
    if (ta_sym_render(p, pos, pos_len) >= pos_len || ta_sym_render(v, valid, valid_len) >= valid_len) return -1;
    return 0;
}
/* The lanes of the current lane's vector inside the padded dim (may be
 * <= 0 or > the width), as an expression; returns 0 or -1. */
static int s_count(s_ctx_t *c, char *buf, size_t len) {
    const ta_lir_t *l = c->l;
    char idx[4000];
    if (ta_sym_render(c->outi0[c->lane][l->pad_dim], idx, sizeof idx) >= sizeof idx) return -1;
    return snprintf(buf, len, "(%" PRId64 "-(%s))", c->a->shape[l->pad_dim], idx) >= (int)len ? -1 : 0;
}

/* Renders the expression of an ALU node from its sources' names. */
static void s_alu(s_ctx_t *c, s_str_t *e, const ta_ast_node_t *n) {
    const ta_ast_t *a = c->a;
    tact_dtype d = n->dtype, sd = a->nodes[n->src[0]].dtype;
    const char *x = s_name(c, n->src[0]), *y = n->nsrc > 1 ? s_name(c, n->src[1]) : "", *z = n->nsrc > 2 ? s_name(c, n->src[2]) : "";
    char tmp[256];
    int f64 = sd == TACT_FLOAT64, bits = (int)ta_dtype_size(d) * 8;
    switch (n->op) {
    case TA_OP_EXP2: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "exp2" : "tact_exp2f", x); s_round(e, d, tmp); break;
    case TA_OP_LOG2: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "log2" : "log2f", x); s_round(e, d, tmp); break;
    case TA_OP_SIN: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "sin" : "sinf", x); s_round(e, d, tmp); break;
    case TA_OP_SQRT: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "sqrt" : "sqrtf", x); s_round(e, d, tmp); break;
    case TA_OP_RECIP: snprintf(tmp, sizeof tmp, "%s/%s", f64 ? "1.0" : "1.0f", x); s_round(e, d, tmp); break;
    case TA_OP_NEG:
        if (ta_dtype_is_bool(d)) s_put(e, "(!%s)", x);
        else if (ta_dtype_is_float(d)) s_put(e, "(-%s)", x);
        else s_put(e, "(%s)(0-(uint64_t)%s)", s_reg(d), x);
        break;
    case TA_OP_CAST:
        if (ta_dtype_is_bool(d)) s_put(e, "(%s!=0)", x);
        else if (ta_dtype_is_float(sd) && ta_dtype_is_int(d))
            s_put(e, "(%s)%s(%s)", s_reg(d), ta_dtype_is_unsigned(d) && bits == 64 ? "tact_f2u" : "tact_f2i", x);
        else if (s_is16(d)) { snprintf(tmp, sizeof tmp, "(float)%s", x); s_round(e, d, tmp); }
        else s_put(e, "(%s)%s", s_reg(d), x);
        break;
    case TA_OP_ADD:
    case TA_OP_MUL: {
        char op = n->op == TA_OP_ADD ? '+' : '*';
        if (s_signed(d) || (ta_dtype_is_unsigned(d) && ta_dtype_size(d) < 4)) /* wrap; narrow unsigned would become int */
            s_put(e, "(%s)((uint64_t)%s%c(uint64_t)%s)", s_reg(d), x, op, y);
        else if (ta_dtype_is_bool(d)) s_put(e, n->op == TA_OP_ADD ? "(%s|%s)" : "(%s&%s)", x, y);
        else { snprintf(tmp, sizeof tmp, "%s%c%s", x, op, y); s_round(e, d, tmp); }
        break;
    }
    case TA_OP_IDIV:
    case TA_OP_MOD: {
        int div = n->op == TA_OP_IDIV;
        if (ta_dtype_is_float(d)) {
            snprintf(tmp, sizeof tmp, div ? "%s(%s/%s)" : "%s(%s,%s)", div ? (f64 ? "trunc" : "truncf") : (f64 ? "fmod" : "fmodf"), x, y);
            s_round(e, d, tmp);
        } else if (ta_dtype_is_unsigned(d) || ta_dtype_is_bool(d)) {
            s_put(e, "(%s)tact_u%s(%s,%s)", s_reg(d), div ? "div" : "mod", x, y);
        } else {
            s_put(e, "(%s)tact_i%s(%s,%s)", s_reg(d), div ? "div" : "mod", x, y);
        }
        break;
    }
    case TA_OP_MAX:
        if (ta_dtype_is_float(d)) s_put(e, "%s(%s,%s)", d == TACT_FLOAT64 ? "tact_maxd" : "tact_maxf", x, y);
        else s_put(e, "(%s>%s?%s:%s)", x, y, x, y);
        break;
    case TA_OP_CMPLT: s_put(e, "(%s<%s)", x, y); break;
    case TA_OP_CMPNE: s_put(e, "(%s!=%s)", x, y); break;
    case TA_OP_XOR: s_put(e, "(%s)(%s^%s)", s_reg(d), x, y); break;
    case TA_OP_AND: s_put(e, "(%s)(%s&%s)", s_reg(d), x, y); break;
    case TA_OP_OR: s_put(e, "(%s)(%s|%s)", s_reg(d), x, y); break;
    case TA_OP_SHL: s_put(e, "(%s)((uint64_t)%s<<(%s&%d))", s_reg(d), x, y, bits - 1); break;
    case TA_OP_SHR: s_put(e, "(%s)(%s>>(%s&%d))", s_reg(d), x, y, bits - 1); break;
    case TA_OP_WHERE: s_put(e, "(%s?%s:%s)", x, y, z); break;
    case TA_OP_MULACC:
        if (s_signed(d) || (ta_dtype_is_unsigned(d) && ta_dtype_size(d) < 4))
            s_put(e, "(%s)((uint64_t)%s*(uint64_t)%s+(uint64_t)%s)", s_reg(d), x, y, z);
        else if (s_is16(d)) s_put(e, "%s(%s(%s*%s)+%s)", d == TACT_FLOAT16 ? "tact_rh" : "tact_rbf",
                                  d == TACT_FLOAT16 ? "tact_rh" : "tact_rbf", x, y, z);
        else { snprintf(tmp, sizeof tmp, "%s*%s+%s", x, y, z); s_round(e, d, tmp); }
        break;
    default: s_put(e, "0"); break;
    }
}

/* Renders a vector ALU node (every vector kernel is float32, but for the
 * bools of comparisons, which only a WHERE reads). */
static int s_valu(s_ctx_t *c, s_str_t *e, const ta_ast_node_t *n) {
    s_str_t x = {0}, y = {0}, z = {0};
    if (n->op == TA_OP_WHERE) s_put(&x, "0"); /* its condition is read by name */
    else s_vec_operand(c, &x, n->src[0]);
    if (n->nsrc > 1) s_vec_operand(c, &y, n->src[1]);
    if (n->nsrc > 2) s_vec_operand(c, &z, n->src[2]);
    int rc = x.failed || y.failed || z.failed ? -1 : 0;
    switch (n->op) {
    case TA_OP_ADD: s_put(e, "(%s+%s)", x.p, y.p); break;
    case TA_OP_MUL: s_put(e, "(%s*%s)", x.p, y.p); break;
    case TA_OP_NEG: s_put(e, "(-%s)", x.p); break;
    case TA_OP_RECIP: s_put(e, "(1.0f/%s)", x.p); break;
    case TA_OP_MULACC: s_put(e, "(%s*%s+%s)", x.p, y.p, z.p); break;
    case TA_OP_MAX: s_put(e, "tact_vmax(%s,%s)", x.p, y.p); break;
    case TA_OP_EXP2: s_put(e, "tact_vexp2(%s)", x.p); break;
    case TA_OP_LOG2: s_put(e, "tact_vlog2(%s)", x.p); break;
    case TA_OP_SIN: s_put(e, "tact_vsin(%s)", x.p); break;
    case TA_OP_SQRT: s_put(e, "tact_vsqrt(%s)", x.p); break;
    case TA_OP_CAST: s_put(e, "%s", x.p); break; /* float32 to float32 */
    case TA_OP_IDIV: s_put(e, "tact_vtrunc(%s/%s)", x.p, y.p); break;
    case TA_OP_MOD: s_put(e, "tact_vfmod(%s,%s)", x.p, y.p); break;
    /* Comparisons give lanes of -1 or 0 (tact_vi), the same answers as
     * the scalar ones, NaN included; WHERE picks the bits of one value. */
    case TA_OP_CMPLT: s_put(e, "(tact_vi)(%s<%s)", x.p, y.p); break;
    case TA_OP_CMPNE: s_put(e, "(tact_vi)(%s!=%s)", x.p, y.p); break;
    case TA_OP_WHERE:
        if (c->l->nodes[n->src[0]].vector) s_put(e, "tact_vsel(%s,%s,%s)", s_name(c, n->src[0]), y.p, z.p);
        else s_put(e, "(%s?%s:%s)", s_name(c, n->src[0]), y.p, z.p);
        break;
    default: rc = -1; break; /* lowering vectorizes float32 kernels (and their comparisons) only */
    }
    ta_free(x.p), ta_free(y.p), ta_free(z.p);
    return rc;
}

/* The sums of a reduce's vector accumulators, all lanes at once (C
 * target): pairs of vectors are folded into one by two shuffles and an
 * add, halving the partials of every accumulator at each level, so m
 * accumulators (m >= W) take m - 1 vector adds instead of m sums of one
 * vector's lanes (fewer than W fold into one vector, then within it).
 * Every add pairs the same partials as tact_vsum's tree (lane l with lane
 * l + w, w = W/2 down to 1), so the bits are the same, and a compiler
 * without __builtin_shufflevector (gcc before 12) takes tact_vsum.  At
 * the first lane, emits the tree and its results red<lane> for every
 * lane; at the others, nothing.  Returns 1 when done, 0 when the
 * accumulators are not a power of two (tact_vsum then). */
static int s_sum_tree(s_ctx_t *c, int node) {
    const ta_lir_t *l = c->l;
    int nl = ta_lir_nlanes(l), acc[TA_LIR_MAX_LANES], m = 0, W = l->width;
    for (int L = 0; L < nl; L++)
        if (ta_lir_lane_of(l, node, L) == L) acc[m++] = L;
    if (m < 2 || (m & (m - 1)) || W < 2) return 0;
    if (c->lane != acc[0]) return 1;
    s_str_t *o = c->out;
    s_put(o, "#if defined(__clang__) || __GNUC__ >= 12\n");
    /* v: the vectors of this level (names), each holding groups of g
     * partials, accumulators in order. */
    char v[TA_LIR_MAX_LANES][16];
    int nv = m, g = W, level = 0;
    for (int k = 0; k < m; k++) snprintf(v[k], sizeof v[k], "acc%d", acc[k]);
    for (; g > 1; g /= 2, level++) {
        int w = g / 2, pairs = nv >= 2 ? nv / 2 : 1;
        for (int q = 0; q < pairs; q++) {
            const char *a = v[2 * q], *b = nv >= 2 ? v[2 * q + 1] : v[2 * q];
            char half[2][512];
            for (int h = 0; h < 2; h++) {
                int len = 0;
                /* a's groups, then b's: lane grp*g + l (+ w for the high half). */
                for (int side = 0; side < 2; side++)
                    for (int grp = 0; grp < W / g; grp++)
                        for (int x = 0; x < w; x++)
                            len += snprintf(half[h] + len, sizeof half[h] - (size_t)len, ", %d", side * W + grp * g + x + h * w);
            }
            s_indent(c);
            s_put(o, "tact_vf hs%d_%d = __builtin_shufflevector(%s, %s%s) + __builtin_shufflevector(%s, %s%s);\n", level, q, a, b, half[0], a, b,
                  half[1]);
        }
        for (int q = 0; q < pairs; q++) snprintf(v[q], sizeof v[q], "hs%d_%d", level, q);
        nv = pairs;
    }
    /* Vector k lane j holds accumulator k * W + j (one vector: lane j, j < m). */
    for (int k = 0; k < m; k++) {
        s_indent(c);
        s_put(o, "float red%d = %s[%d];\n", acc[k], v[k / W], k % W);
    }
    s_put(o, "#else\n");
    for (int k = 0; k < m; k++) {
        s_indent(c);
        s_put(o, "float red%d = tact_vsum(acc%d);\n", acc[k], acc[k]);
    }
    s_put(o, "#endif\n");
    return 1;
}

/* Emits node i for the current lane as a statement (for constants, just a
 * name to use). */
static int s_node(s_ctx_t *c, int i) {
    const ta_ast_node_t *n = &c->a->nodes[i];
    const ta_lir_node_t *ln = &c->l->nodes[i];
    s_str_t *o = c->out;
    char *name = c->names[i][c->lane];
    char pos[4096], valid[4096];
    int always, never;
    tact_dtype d = n->dtype;
    switch (n->op) {
    case TA_OP_CONST: {
        s_str_t lit = {0};
        if (n->arg) s_put(&lit, "arg%d", c->argno[i]);
        else s_literal(&lit, d, n->value);
        if (lit.failed) return -1;
        if (n->view >= 0) {
            if (s_index(c, n, c->pre[i], 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) {
                ta_free(lit.p);
                return -1;
            }
            if (!always) {
                snprintf(name, 16, "alu%d", c->nalu++);
                s_indent(c);
                s_put(o, "%s %s = %s ? %s : 0;\n", s_reg(d), name, never ? "0" : valid, lit.p);
                ta_free(lit.p);
                return 0;
            }
        }
        snprintf(name, 16, n->arg ? "%s" : "(%s)", lit.p);
        if (strlen(lit.p) + 2 >= 16) { /* long literals get a variable */
            snprintf(name, 16, "alu%d", c->nalu++);
            s_indent(c);
            s_put(o, "const %s %s = %s;\n", s_reg(d), name, lit.p);
        }
        ta_free(lit.p);
        return 0;
    }
    case TA_OP_LOAD: {
        snprintf(name, 16, "val%d", c->nval++);
        s_indent(c);
        /* In the padded dim's last tile, only the lanes inside it are read. */
        char cnt[4100] = "";
        if (c->masked && ln->padded && s_count(c, cnt, sizeof cnt) != 0) return -1;
        if (ln->access == TA_ACCESS_HALF) { /* unmasked (lowering) */
            if (s_index(c, n, c->pre[i], 1, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
            if (*cnt) s_put(o, "tact_vf %s = tact_vload_half_n(data%d+%s, %s);\n", name, n->buf, pos, cnt);
            else s_put(o, "tact_vf %s = tact_vload_half(data%d+%s);\n", name, n->buf, pos);
            return 0;
        }
        if (ln->access == TA_ACCESS_CONTIGUOUS) {
            if (s_index(c, n, c->pre[i], 1, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
            if (*cnt) s_put(o, "tact_vf %s = tact_vload_n(data%d+%s, %s);\n", name, n->buf, pos, cnt);
            else s_put(o, "tact_vf %s = tact_vload(data%d+%s);\n", name, n->buf, pos);
            return 0;
        }
        if (s_index(c, n, c->pre[i], 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
        if (*cnt && !never) { /* the validity includes the lanes inside */
            char both[8400];
            int len = snprintf(both, sizeof both, "%s%s%s%s%s", ln->access == TA_ACCESS_GATHER ? "vl < " : "0 < ", cnt, always ? "" : " && (",
                               always ? "" : valid, always ? "" : ")");
            if (len < 0 || len >= (int)sizeof valid) return -1;
            memcpy(valid, both, (size_t)len + 1);
            always = 0;
        }
        if (ln->access == TA_ACCESS_GATHER) { /* lane by lane */
            s_put(o, "tact_vf %s;\n", name);
            s_indent(c);
            if (never) s_put(o, "for (int64_t vl = 0; vl < TACT_W; vl++) TACT_LANE(%s, vl) = 0;\n", name);
            else if (always) s_put(o, "for (int64_t vl = 0; vl < TACT_W; vl++) TACT_LANE(%s, vl) = data%d[%s];\n", name, n->buf, pos);
            else s_put(o, "for (int64_t vl = 0; vl < TACT_W; vl++) TACT_LANE(%s, vl) = (%s) ? data%d[%s] : 0;\n", name, valid, n->buf, pos);
            return 0;
        }
        char load[4200];
        if (d == TACT_FLOAT16) snprintf(load, sizeof load, "tact_h2f(data%d[%s])", n->buf, pos);
        else if (d == TACT_BFLOAT16) snprintf(load, sizeof load, "tact_bf2f(data%d[%s])", n->buf, pos);
        else snprintf(load, sizeof load, "data%d[%s]", n->buf, pos);
        if (never) s_put(o, "%s %s = 0;\n", s_reg(d), name);
        else if (always) s_put(o, "%s %s = %s;\n", s_reg(d), name, load);
        else s_put(o, "%s %s = (%s) ? %s : 0;\n", s_reg(d), name, valid, load);
        return 0;
    }
    case TA_OP_SUM:
    case TA_OP_RMAX: /* its accumulators were updated in the loops; a VECTOR over the reduced dim is summed here */
        if (c->l->vector >= 0 && c->l->axes[c->l->vector].reduce) {
            snprintf(name, 16, "red%d", c->lane);
            if (n->op != TA_OP_SUM || c->l->target.opencl || !s_sum_tree(c, i)) {
                s_indent(c);
                s_put(o, "float %s = %s(acc%d);\n", name, n->op == TA_OP_SUM ? "tact_vsum" : "tact_vhmax", c->lane);
            }
        } else {
            snprintf(name, 16, "acc%d", c->lane);
        }
        return 0;
    case TA_OP_STORE: {
        const char *x = s_name(c, n->src[0]);
        s_indent(c);
        if (ln->vector) {
            if (s_index(c, n, 0, 1, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
            char cnt[4100];
            int masked = c->masked && ln->padded;
            if (masked && s_count(c, cnt, sizeof cnt) != 0) return -1;
            if (masked) s_put(o, "tact_vstore_n(data0+%s, ", pos);
            else s_put(o, "tact_vstore(data0+%s, ", pos);
            if (c->l->nodes[n->src[0]].vector) s_put(o, "%s", x);
            else s_put(o, "tact_vsplat(%s)", x);
            if (masked) s_put(o, ", %s);\n", cnt);
            else s_put(o, ");\n");
            return 0;
        }
        if (s_index(c, n, 0, 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
        if (d == TACT_FLOAT16) s_put(o, "data0[%s] = tact_f2h(%s);\n", pos, x);
        else if (d == TACT_BFLOAT16) s_put(o, "data0[%s] = tact_f2bf(%s);\n", pos, x);
        else s_put(o, "data0[%s] = %s;\n", pos, x);
        return 0;
    }
    case TA_OP_BITCAST: {
        tact_dtype sd = c->a->nodes[n->src[0]].dtype;
        snprintf(name, 16, "alu%d", c->nalu++);
        const char *x = s_name(c, n->src[0]);
        s_indent(c);
        s_put(o, "%s %s; { %s tmp = ", s_reg(d), name, s_mem(sd));
        if (sd == TACT_FLOAT16) s_put(o, "tact_f2h(%s)", x);
        else if (sd == TACT_BFLOAT16) s_put(o, "tact_f2bf(%s)", x);
        else s_put(o, "%s", x);
        if (s_is16(d))
            s_put(o, "; uint16_t bits; memcpy(&bits, &tmp, 2); %s = %s(bits); }\n", name, d == TACT_FLOAT16 ? "tact_h2f" : "tact_bf2f");
        else s_put(o, "; memcpy(&%s, &tmp, sizeof tmp); }\n", name);
        return 0;
    }
    default: {
        s_str_t e = {0};
        int rc = 0;
        if (ln->vector) rc = s_valu(c, &e, n);
        else s_alu(c, &e, n);
        if (rc || e.failed) {
            ta_free(e.p);
            return -1;
        }
        snprintf(name, 16, "alu%d", c->nalu++);
        s_indent(c);
        s_put(o, "%s %s = %s;\n", ln->vector ? (d == TACT_BOOL ? "tact_vi" : "tact_vf") : s_reg(d), name, e.p);
        ta_free(e.p);
        return 0;
    }
    }
}

/* Emits node i once per lane it varies along. */
static int s_emit_node(s_ctx_t *c, int i) {
    int nl = ta_lir_nlanes(c->l), rc = 0;
    for (c->lane = 0; c->lane < nl && !rc; c->lane++)
        if (ta_lir_lane_of(c->l, i, c->lane) == c->lane) rc = s_node(c, i);
    return rc;
}
/* The reduce identity of dtype d. */
static void s_identity(s_str_t *s, ta_op_t op, tact_dtype d) {
    if (op == TA_OP_SUM) {
        s_put(s, ta_dtype_is_float(d) ? (d == TACT_FLOAT64 ? "0.0" : "0.0f") : "0");
        return;
    }
    if (ta_dtype_is_float(d)) s_put(s, "(-INFINITY)");
    else if (ta_dtype_is_bool(d) || ta_dtype_is_unsigned(d)) s_put(s, "0");
    else s_put(s, "(%s)(-((int64_t)1 << %zu))", s_reg(d), ta_dtype_size(d) * 8 - 1);
}

/* The accumulator update of the reduce for the current lane. */
static int s_update(s_ctx_t *c, const ta_ast_node_t *r) {
    const ta_lir_t *l = c->l;
    int src = r->src[0], vec = l->nodes[src].vector;
    tact_dtype d = r->dtype;
    char acc[16];
    snprintf(acc, sizeof acc, "acc%d", c->lane);
    s_str_t e = {0};
    const ta_ast_node_t *m = &c->a->nodes[src];
    if (l->nodes[src].fused) { /* acc += x*y as one fused multiply-add */
        if (vec) {
            s_str_t x = {0}, y = {0};
            s_vec_operand(c, &x, m->src[0]);
            s_vec_operand(c, &y, m->src[1]);
            s_put(&e, "tact_vfma(%s,%s,%s)", x.p, y.p, acc);
            if (x.failed || y.failed) e.failed = 1;
            ta_free(x.p), ta_free(y.p);
        } else {
            s_put(&e, "%s(%s,%s,%s)", d == TACT_FLOAT64 ? "fma" : "fmaf", s_name(c, m->src[0]), s_name(c, m->src[1]), acc);
        }
    } else if (vec) {
        if (r->op == TA_OP_SUM) s_put(&e, "%s+%s", acc, s_name(c, src));
        else s_put(&e, "tact_vmax(%s,%s)", acc, s_name(c, src));
    } else {
        const char *x = s_name(c, src);
        char upd[300];
        if (r->op == TA_OP_RMAX) {
            if (ta_dtype_is_float(d)) s_put(&e, "%s(%s,%s)", d == TACT_FLOAT64 ? "tact_maxd" : "tact_maxf", acc, x);
            else s_put(&e, "(%s>%s?%s:%s)", acc, x, acc, x);
        } else if (s_signed(d)) {
            s_put(&e, "(%s)((uint64_t)%s+(uint64_t)%s)", s_reg(d), acc, x);
        } else if (ta_dtype_is_bool(d)) {
            s_put(&e, "(%s|%s)", acc, x);
        } else {
            snprintf(upd, sizeof upd, "%s+%s", acc, x);
            s_round(&e, d, upd);
        }
    }
    if (e.failed) return -1;
    s_indent(c);
    s_put(c->out, "%s = %s;\n", acc, e.p);
    ta_free(e.p);
    return 0;
}

/* Emits the pre-reduce (phase 0) or other (phase 1) nodes computed at
 * loop level lv, in AST order. */
static int s_emit_level(s_ctx_t *c, int lv, int phase) {
    const ta_lir_t *l = c->l;
    for (int i = 0; i < c->a->nnodes; i++) {
        const ta_lir_node_t *ln = &l->nodes[i];
        int in_phase = l->reduce < 0 || (phase == 0 ? c->pre[i] : !c->pre[i]);
        if (!in_phase || ln->fused || (phase == 0 && ln->level != lv)) continue;
        if (s_emit_node(c, i)) return -1;
    }
    return 0;
}

static void s_open(s_ctx_t *c, const ta_axis_t *ax) {
    s_indent(c);
    if (c->flat && ax == &c->l->axes[1]) s_put(c->out, "{ /* %s: the work item's */\n", ax->name);
    else if (c->group && ax == &c->l->axes[1]) /* each item of the group takes every group-th element */
        s_put(c->out, "for (int64_t %s = tact_lid; %s < %" PRId64 "; %s += %d) {\n", ax->name, ax->name, ax->size, ax->name, c->group);
    else s_put(c->out, "for (int64_t %s = 0; %s < %" PRId64 "; %s++) {\n", ax->name, ax->name, ax->size, ax->name);
    c->depth++;
}

static void s_close(s_ctx_t *c) {
    c->depth--;
    s_indent(c);
    s_put(c->out, "}\n");
}

/* The accumulators, the reduce's loops and the update, then what follows
 * the reduce. */
static int s_reduce(s_ctx_t *c) {
    const ta_lir_t *l = c->l;
    const ta_ast_t *a = c->a;
    const ta_ast_node_t *r = &a->nodes[l->reduce];
    int vec = l->nodes[r->src[0]].vector, nl = ta_lir_nlanes(l), status = 0;
    /* Under an outer block of the reduce, the partial sums wait in the
     * output (a SUM stored as is: lowering checks). */
    const ta_axis_t *outer = NULL;
    for (int x = 1; x <= l->post_level; x++)
        if (l->axes[x].outer) outer = &l->axes[x];
    for (c->lane = 0; c->lane < nl && !status; c->lane++) {
        if (ta_lir_lane_of(l, l->reduce, c->lane) != c->lane) continue;
        s_str_t id = {0};
        if (vec) s_put(&id, "tact_vsplat(");
        s_identity(&id, r->op, r->dtype);
        if (vec) s_put(&id, ")");
        s_indent(c);
        s_put(c->out, "%s acc%d = ", vec ? "tact_vf" : s_reg(r->dtype), c->lane);
        if (outer) {
            const ta_ast_node_t *st = &a->nodes[a->nnodes - 1];
            char pos[4096], valid[4096];
            int always, never;
            status = s_index(c, st, 0, l->nodes[a->nnodes - 1].vector, pos, sizeof pos, valid, sizeof valid, &always, &never);
            if (vec) s_put(c->out, "%s == 0 ? %s : tact_vload(data0+%s);\n", outer->name, id.p, pos);
            else s_put(c->out, "%s == 0 ? %s : data0[%s];\n", outer->name, id.p, pos);
        } else {
            s_put(c->out, "%s;\n", id.p);
        }
        if (id.failed) status = -1;
        ta_free(id.p);
    }
    for (int x = l->post_level + 1; x <= l->nloops && !status; x++) {
        s_open(c, &l->axes[x]);
        status = s_emit_level(c, x, 0);
    }
    for (c->lane = 0; c->lane < nl && !status; c->lane++)
        if (ta_lir_lane_of(l, l->reduce, c->lane) == c->lane) status = s_update(c, r);
    for (int x = l->post_level + 1; x <= l->nloops; x++) s_close(c);
    if (c->group && !status) {
        /* The group's partial results meet in local memory and are
         * combined in a fixed tree; the first item finishes the output. */
        s_indent(c);
        s_put(c->out, "tact_part[tact_lid] = acc0;\n");
        s_indent(c);
        s_put(c->out, "barrier(CLK_LOCAL_MEM_FENCE);\n");
        s_indent(c);
        s_put(c->out, "for (int w = %d; w > 0; w >>= 1) {\n", c->group / 2);
        s_indent(c);
        s_put(c->out, "  if (tact_lid < w) tact_part[tact_lid] = %s;\n",
              r->op == TA_OP_SUM ? "tact_part[tact_lid] + tact_part[tact_lid + w]" : "tact_maxf(tact_part[tact_lid], tact_part[tact_lid + w])");
        s_indent(c);
        s_put(c->out, "  barrier(CLK_LOCAL_MEM_FENCE);\n");
        s_indent(c);
        s_put(c->out, "}\n");
        s_indent(c);
        s_put(c->out, "if (tact_lid == 0) {\n");
        c->depth++;
        s_indent(c);
        s_put(c->out, "acc0 = tact_part[0];\n");
        status = s_emit_level(c, 0, 1);
        s_close(c);
        return status;
    }
    return status ? status : s_emit_level(c, 0, 1);
}

/* The loops from level x to post_level with what each computes, then the
 * reduce.  Inside the padded dim's loop the body comes twice: for the
 * whole tiles, and masked for the last one.  (Recursion over the IR's
 * axes: at most TA_LIR_MAX_AXES deep.) */
static int s_loops(s_ctx_t *c, int x) {
    const ta_lir_t *l = c->l;
    if (x > l->post_level) return l->reduce >= 0 ? s_reduce(c) : 0;
    s_open(c, &l->axes[x]);
    int status;
    if (x == l->pad && !c->masked) {
        s_indent(c);
        s_put(c->out, "if (%s < %" PRId64 ") {\n", l->axes[x].name, l->pad_full);
        c->depth++;
        status = s_emit_level(c, x, 0) || s_loops(c, x + 1);
        c->depth--;
        s_indent(c);
        s_put(c->out, "} else { /* the last tile, past the end of dim %d */\n", l->pad_dim);
        c->depth++;
        c->masked = 1;
        if (!status) status = s_emit_level(c, x, 0) || s_loops(c, x + 1);
        c->masked = 0;
        c->depth--;
        s_indent(c);
        s_put(c->out, "}\n");
    } else {
        status = s_emit_level(c, x, 0) || s_loops(c, x + 1);
    }
    s_close(c);
    return status;
}

static const char *s_kind_name(ta_axis_kind_t k) {
    static const char *n[] = {"global", "loop", "reduce", "upcast", "vector"};
    return n[k];
}

int ta_render_c_for(const ta_ast_t *a, const ta_target_t *t, char **src, char *name, size_t name_len, int64_t *align, int *width,
                    ta_error_t *err) {
    *src = NULL;
    int rc = ta_ast_check(a, err);
    if (rc != TACT_OK) return rc;
    ta_ast_name(a, name, name_len);
    s_ctx_t *cp = ta_calloc(1, sizeof *cp); /* the name tables are large for a stack */
    ta_lir_t *l = ta_malloc(sizeof *l);
    if (!cp || !l) {
        ta_free(cp), ta_free(l);
        return ta_error_set(err, TACT_ENOMEM, "render: out of memory");
    }
    if ((rc = ta_lower(a, t, l, err)) != TACT_OK) {
        ta_free(cp), ta_free(l);
        return rc;
    }
    s_str_t o = {0};
#define c (*cp)
    c.a = a;
    c.l = l;
    c.out = &o;
    c.ar = ta_sym_arena_new();
    int status = c.ar ? 0 : -1;
    int nl = ta_lir_nlanes(l);
    for (int lane = 0; lane < nl && !status; lane++)
        status = ta_lir_index(l, c.ar, lane, 0, c.full[lane], c.outi[lane]) || ta_lir_index(l, c.ar, lane, 1, c.full0[lane], c.outi0[lane]);
    if (l->reduce >= 0) {
        int stack[TA_AST_MAX_NODES], n = 0;
        stack[n++] = a->nodes[l->reduce].src[0];
        while (n) {
            int i = stack[--n];
            if (c.pre[i]) continue;
            c.pre[i] = 1;
            for (int s = 0; s < a->nodes[i].nsrc; s++) stack[n++] = a->nodes[i].src[s];
        }
    }
    *align = l->align;
    if (width) *width = l->width > 1 ? l->width : 1;
    /* On OpenCL an outer loop over outputs becomes work items: a work
     * item computes align / size outputs (not contiguous ones: the launch
     * only counts items), and many items keep a device busy. */
    c.flat = t->opencl && l->naxes > 1 && l->axes[1].kind == TA_AXIS_LOOP && l->post_level >= 1 && l->pad != 1 &&
             l->align % l->axes[1].size == 0; /* whole outputs per item: never a padded dim's tiles */
    int64_t per = c.flat ? l->axes[1].size : 1;
    if (c.flat) *align = l->align / per;
    /* A long float32 reduce, one output per work item (no tiles, no
     * vectors), is shared by a work group of 64 items instead, each taking
     * every 64th element, their partial sums meeting in local memory in a
     * fixed tree: a long reduce of few outputs no longer leaves most of a
     * device idle.  The choice depends on the reduce's length, never on
     * how many outputs there are (batch invariance, DESIGN.md §2); the
     * device reads the group's size from the kernel (reqd_work_group_size). */
    c.group = t->opencl && l->reduce >= 0 && l->vector < 0 && l->nupcast == 0 && l->post_level == 0 && l->align == 1 && l->nloops == 1 &&
                      l->axes[1].kind == TA_AXIS_REDUCE && !l->axes[1].outer && l->axes[1].size >= 1024 &&
                      a->nodes[l->reduce].dtype == TACT_FLOAT32 &&
                      (a->nodes[l->reduce].op == TA_OP_SUM || a->nodes[l->reduce].op == TA_OP_RMAX)
                  ? 64
                  : 0;

    /* Vector helpers, then the kernel: what it fuses and how it is cut. */
    if (l->width > 1 && t->opencl) s_cl_vector_prelude(&o, l->width);
    else if (l->width > 1) s_vector_prelude(&o, l->width);
    s_put(&o, "/* %s: fuses graph nodes", name);
    for (int i = 0; i < a->nfused; i++) s_put(&o, " %" PRIu64, a->fused[i]);
    s_put(&o, "\n   %" PRId64 " output%s per work item", l->align, l->align == 1 ? "" : "s");
    for (int x = 1; x < l->naxes; x++) s_put(&o, "%s %s %s %" PRId64, x == 1 ? ";" : ",", s_kind_name(l->axes[x].kind), l->axes[x].name, l->axes[x].size);
    if (t->opencl) { /* device.h's OpenCL kernel ABI; a bool is a byte in memory */
        if (c.group) s_put(&o, "; a work group of %d items per output */\n__kernel __attribute__((reqd_work_group_size(%d, 1, 1))) void %s(", c.group, c.group, name);
        else s_put(&o, " */\n__kernel void %s(", name);
        for (int b = 0; b < a->nbufs; b++)
            s_put(&o, "__global %s%s *restrict data%d, ", b ? "const " : "", a->buf_dtype[b] == TACT_BOOL ? "uint8_t" : s_mem(a->buf_dtype[b]), b);
        s_put(&o, "__global const ulong *restrict args, long n) {\n");
        if (c.group) s_put(&o, "  __local float tact_part[%d];\n", c.group);
    } else {
        s_put(&o, " */\nvoid %s(int64_t start, int64_t end, void **restrict bufs, const uint64_t *restrict args) {\n", name);
        for (int b = 0; b < a->nbufs; b++)
            s_put(&o, "  %s%s *restrict data%d = bufs[%d];\n", b ? "const " : "", s_mem(a->buf_dtype[b]), b, b);
    }
    /* Scalars that are not structural come as arguments (the same program
     * serves every value). */
    if (!a->nargs) s_put(&o, "  (void)args;\n");
    for (int i = 0, j = 0; i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        if (!n->arg) continue;
        c.argno[i] = j;
        if (ta_dtype_is_float(n->dtype)) s_put(&o, "  const %s arg%d = (%s)tact_argf(args[%d]);\n", s_reg(n->dtype), j, s_reg(n->dtype), j);
        else s_put(&o, "  const %s arg%d = (%s)args[%d];\n", s_reg(n->dtype), j, s_reg(n->dtype), j);
        j++;
    }
    if (t->opencl && c.group)
        s_put(&o, "  { int64_t gidx = (int64_t)get_group_id(0); int tact_lid = (int)get_local_id(0); if (gidx >= n) return;\n");
    else if (t->opencl && c.flat)
        s_put(&o, "  { int64_t w = (int64_t)get_global_id(0); if (w >= n/%" PRId64 ") return; int64_t gidx = w/%" PRId64 ", %s = w%%%" PRId64 ";\n",
              *align, per, l->axes[1].name, per);
    else if (t->opencl) /* a work item each */
        s_put(&o, "  { int64_t gidx = (int64_t)get_global_id(0); if (gidx >= n/%" PRId64 ") return;\n", l->align);
    else if (l->align > 1)
        s_put(&o, "  for (int64_t gidx = start/%" PRId64 "; gidx < end/%" PRId64 "; gidx++) {\n", l->align, l->align);
    else
        s_put(&o, "  for (int64_t gidx = start; gidx < end; gidx++) {\n");
    c.depth = 2;
    if (!status) status = s_emit_level(&c, 0, 0) || s_loops(&c, 1);
    s_put(&o, "  }\n}\n");
    ta_sym_arena_destroy(&c.ar);
#undef c
    ta_free(cp);
    ta_free(l);
    if (status || o.failed) {
        ta_free(o.p);
        return ta_error_set(err, TACT_ENOMEM, "render %s: an index expression too long, or out of memory", name);
    }
    *src = o.p;
    return TACT_OK;
}

int ta_render_c(const ta_ast_t *a, char **src, char *name, size_t name_len, int64_t *align, ta_error_t *err) {
    ta_target_t t = ta_target_host();
    return ta_render_c_for(a, &t, src, name, name_len, align, NULL, err);
}
