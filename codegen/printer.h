/* printer.h - a language's printer: a table of the few spellings and functions in which C and OpenCL C kernels differ; render.c prints the rest. */
#ifndef TACT_PRINTER_H
#define TACT_PRINTER_H

#include <stddef.h>

#include "ast.h"

struct ta_lir;

/* A growing string: ta_out_put appends printf-style; a failed allocation
 * sets failed and makes every later put a no-op. */
typedef struct ta_out {
    char *p;
    size_t len, cap;
    int failed;
} ta_out_t;
__attribute__((format(printf, 2, 3))) void ta_out_put(ta_out_t *o, const char *fmt, ...);

/*
 * A printer (tinygrad's CStyleLanguage and its subclasses): render.c
 * prints a kernel's loops, loads, arithmetic and stores in the C syntax
 * every language here shares, and asks the printer for what differs.
 * Lowering (lower.c) reads the capabilities to choose how a kernel is cut;
 * nothing else asks which language a target has.  A new language is one
 * more table in a file of its own, listed in ta_printer_find.
 */
typedef struct ta_printer {
    const char *language; /* the TARGET record's language: "C", "OpenCL C" */
    /* Capabilities (lowering's choices). */
    int ranges;        /* a kernel computes a range [start, end) of work items on a thread of a pool; else one work item per grid point */
    int half_loads;    /* vector loads of W/2 floats, each into two lanes (TA_ACCESS_HALF) */
    int vector_halves; /* vector loads of float16 and bfloat16 values into float32 lanes (tact_vloadh, tact_vloadbf) */
    int bool_masks;    /* vector comparisons as lane masks that choose a WHERE's value */
    int sum_tree;      /* a reduce's vector partials added across lanes by shuffles */
    int bit_selects;   /* a scalar float WHERE picks its value's bits with an integer mask (tact_self, tact_seld), no branch */
    int groups;        /* work groups sharing local memory, with barriers: a long reduce shared by a group */
    int device_builds; /* the program is this source, which the device builds (else the system C compiler builds it here) */
    /* Builds a program (prelude and kernels) of this language here, into
     * the bytes its device loads (*obj ta_malloc'd, *len bytes), through
     * the kept copy in cache_dir (NULL: none) when one is there (*cached
     * set); NULL: device_builds says who does.  TACT_ECOMPILE with the
     * compiler's log naming the kernel, or another error. */
    int (*build)(const char *src, const char *name, const struct ta_target *t, const char *cache_dir, uint8_t **obj, size_t *len, int *cached,
                 ta_error_t *err);
    /* Spellings. */
    const char *prelude; /* every program starts with it: types, math, TA_PRINTER_HELPERS */
    const char *barrier; /* a work group's barrier over local memory */
    /* The vector type tact_vf of w float lanes and its helpers (guarded:
     * kernels of one width may share a file). */
    void (*vectors)(ta_out_t *o, int w);
    /* Closes the kernel's opening comment, then its signature and buffers
     * data0..data<nbufs-1> (data0 written, the others read) and args, up
     * to the body; then the loop over (or the guard of) the work item:
     * a block in which gidx is the item's number (and, for a flat launch,
     * the first LOOP axis's index the item's own). */
    void (*signature)(ta_out_t *o, const ta_ast_t *a, const struct ta_lir *l, const char *name);
    void (*items)(ta_out_t *o, const struct ta_lir *l);
} ta_printer_t;

/* A grid language's items block (CL's and CUDA's): group, lid and gid are
 * its spellings of the work group's number, the item's number in its
 * group and its number in the grid. */
void ta_printer_grid_items(ta_out_t *o, const struct ta_lir *l, const char *group, const char *lid, const char *gid);

extern const ta_printer_t ta_printer_c;  /* printer_c.c: the CPU device's shared objects */
extern const ta_printer_t ta_printer_cl; /* printer_cl.c: OpenCL C, built by the device */
extern const ta_printer_t ta_printer_cuda; /* printer_cuda.c: CUDA C++, built by the device with NVRTC */

/* The printer of a TARGET record's language, or NULL for one no printer speaks. */
const ta_printer_t *ta_printer_find(const char *language);

/* The C type of a dtype's element in memory, and while computing. */
const char *ta_render_mem_type(tact_dtype d);
const char *ta_render_reg_type(tact_dtype d);

/* The helpers every kernel may use, in C that OpenCL C also reads (with
 * the definitions of the OpenCL printer's prelude): each printer's prelude
 * ends with them. */
#define TA_PRINTER_HELPERS \
    "/* 16-bit floats: stored as bits, computed in float, rounded after every op.\n" \
    "   NaNs keep their bits both ways (arithmetic makes them quiet anyway), so\n" \
    "   a bitcast through a float register is exact.  Where a printer has the\n" \
    "   machine's conversions (TACT_F16C: IEEE's, round to nearest even), they\n" \
    "   convert all but NaNs: the same bits. */\n" \
    "static inline float tact_h2f(uint16_t h) {\n" \
    "#ifdef TACT_F16C\n" \
    "  if ((h & 0x7fff) <= 0x7c00) return tact_h2f_hw(h); /* not a NaN */\n" \
    "#endif\n" \
    "  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;\n" \
    "  if (e == 31) u = s | 0x7f800000u | (m << 13);\n" \
    "  else if (e) u = s | ((e + 112) << 23) | (m << 13);\n" \
    "  else if (!m) u = s;\n" \
    "  else { e = 113; while (!(m & 1024)) { m <<= 1; e--; } u = s | (e << 23) | ((m & 1023) << 13); }\n" \
    "  float f; memcpy(&f, &u, 4); return f;\n" \
    "}\n" \
    "static inline uint16_t tact_f2h(float f) {\n" \
    "#ifdef TACT_F16C\n" \
    "  if (f == f) return tact_f2h_hw(f);\n" \
    "#endif\n" \
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
    "/* Strict mode's (tact_options.strict) log2 and sin: tact's own, from\n" \
    "   IEEE-754's exactly rounded operations alone (fma included), so the same\n" \
    "   bits on every device and with every math library.  sin reduces its\n" \
    "   argument by 2/pi's bits in integers (Payne-Hanek, exact at every\n" \
    "   magnitude), then Cephes' polynomials; log2 splits off the exponent,\n" \
    "   then Cephes' polynomial of the mantissa.  Measured over every positive\n" \
    "   float against double precision: sin within 1.59 ulp, log2 within 1.47. */\n" \
    "/* 2/pi's bits, 32 at a time (word q: bits 32q+1 .. 32q+32 after the point). */\n" \
    "static inline uint32_t tact_2opi_word(int32_t q) {\n" \
    "  return q == 0 ? 0xA2F9836Eu : q == 1 ? 0x4E441529u : q == 2 ? 0xFC2757D1u : q == 3 ? 0xF534DDC0u : q == 4 ? 0xDB629599u\n" \
    "       : q == 5 ? 0x3C439041u : q == 6 ? 0xFE5163ABu : 0xDEBBC561u;\n" \
    "}\n" \
    "/* 32 bits of 2/pi from bit k. */\n" \
    "static inline uint32_t tact_2opi_bits(int32_t k) {\n" \
    "  int32_t q = k >> 5, r = k & 31;\n" \
    "  return r ? (tact_2opi_word(q) << r) | (tact_2opi_word(q + 1) >> (32 - r)) : tact_2opi_word(q);\n" \
    "}\n" \
    "static inline float tact_xsinf(float x) {\n" \
    "  uint32_t u; memcpy(&u, &x, 4);\n" \
    "  uint32_t a = u & 0x7fffffffu;\n" \
    "  if (a >= 0x7f800000u) return x - x;\n" \
    "  if (a < 0x39800000u) return x;\n" \
    "  float ax; memcpy(&ax, &a, 4);\n" \
    "  float r; uint32_t q = 0;\n" \
    "  if (a < 0x3f490fdbu) r = ax;\n" \
    "  else {\n" \
    "    int32_t e = (int32_t)(a >> 23) - 150, s = e > 2 ? e - 2 : 0, pt = 96 + s - e;\n" \
    "    uint64_t m = (a & 0x7fffffu) | 0x800000u;\n" \
    "    uint64_t p0 = m * tact_2opi_bits(s), p1 = m * tact_2opi_bits(s + 32), p2 = m * tact_2opi_bits(s + 64);\n" \
    "    uint64_t lo = p2 + (p1 << 32), hi = p0 + (p1 >> 32) + (lo < p2 ? 1u : 0u);\n" \
    "    uint64_t f = (hi << (128 - pt)) | (lo >> (pt - 64));\n" \
    "    q = (uint32_t)(hi >> (pt - 64)) & 3u;\n" \
    "    int neg = (int)(f >> 63);\n" \
    "    if (neg) { q = (q + 1) & 3u; f = 0 - f; }\n" \
    "    float fa = (float)f, fb = (float)(int64_t)(f - (uint64_t)fa), k = tact_bitsf(63 << 23);\n" \
    "    fa = fa * k; fb = fb * k;\n" \
    "    float rh = fa * 1.57079637050628662f, rl = fmaf(fa, 1.57079637050628662f, -rh) + (fa * -4.37113882867379e-08f + fb * 1.57079637050628662f);\n" \
    "    r = rh + rl;\n" \
    "    if (neg) r = -r;\n" \
    "  }\n" \
    "  float z = r * r, y;\n" \
    "  if (q & 1u) y = ((2.443315711809948e-05f * z - 1.388731625493765e-03f) * z + 4.166664568298827e-02f) * z * z - 0.5f * z + 1.0f;\n" \
    "  else y = ((-1.9515295891e-04f * z + 8.3321608736e-03f) * z - 1.6666654611e-01f) * z * r + r;\n" \
    "  if (q & 2u) y = -y;\n" \
    "  return u >> 31 ? -y : y;\n" \
    "}\n" \
    "static inline float tact_xlog2f(float x) {\n" \
    "  uint32_t u; memcpy(&u, &x, 4);\n" \
    "  if (x != x) return x + x;\n" \
    "  if ((u & 0x7fffffffu) == 0) return -INFINITY;\n" \
    "  if (u >> 31) return NAN;\n" \
    "  if (u == 0x7f800000u) return x;\n" \
    "  int32_t e = -127;\n" \
    "  if (u < 0x00800000u) { x = x * 8388608.0f; memcpy(&u, &x, 4); e -= 23; }\n" \
    "  e += (int32_t)(u >> 23);\n" \
    "  uint32_t mb = (u & 0x007fffffu) | 0x3f800000u;\n" \
    "  if (mb > 0x3fb504f3u) { mb -= 0x00800000u; e += 1; }\n" \
    "  float f; memcpy(&f, &mb, 4);\n" \
    "  f = f - 1.0f;\n" \
    "  float z = f * f;\n" \
    "  float y = ((((((((7.0376836292e-2f * f - 1.1514610310e-1f) * f + 1.1676998740e-1f) * f - 1.2420140846e-1f) * f + 1.4249322787e-1f) * f\n" \
    "              - 1.6668057665e-1f) * f + 2.0000714765e-1f) * f - 2.4999993993e-1f) * f + 3.3333331174e-1f) * f * z;\n" \
    "  y = y - 0.5f * z;\n" \
    "  float r = y * 0.44269504088896340736f;\n" \
    "  r = r + f * 0.44269504088896340736f;\n" \
    "  r = r + y;\n" \
    "  r = r + f;\n" \
    "  return r + (float)e;\n" \
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

#endif
