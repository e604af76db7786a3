/* dtype.c - element types: the table from TACT_DTYPE_MAP, promotion, 16-bit floats and value casts. */
#include "dtype.h"

#include <math.h>
#include <string.h>

/*
 * Corners that dtype.h leaves open, decided here (the tests pin each one):
 *
 * - Invalid dtypes: the classifiers answer false, ta_dtype_promote and the
 *   other dtype-valued functions return TACT_DTYPE_COUNT (which
 *   ta_dtype_valid rejects), ta_value_convert/load/from_double return the
 *   all-zero value, ta_value_store writes nothing, ta_value_as_double
 *   returns 0.0, and ta_value_same finds any two values the same.
 * - NaN, in every conversion between float formats (16-bit helpers
 *   included): the result is a quiet NaN with the same sign whose payload
 *   keeps the source payload's top bits, shifted left when widening and
 *   truncated when narrowing, with the quiet bit set (what x86's F16C,
 *   AVX512-BF16 and SSE conversions do).  float -> int gives 0 for NaN, as
 *   the header says, and float -> bool gives 1 (NaN != 0).
 * - float -> int: a value whose integral part fits the target is the C cast
 *   (truncation toward zero); this includes uint64 values in [2^63, 2^64).
 *   Anything else saturates at the int64 range and wraps to the width, as
 *   the header says; so for uint64, x >= 2^64 gives 2^63-1 and x <= -1
 *   gives the two's complement of trunc(x) (or 2^63 past -2^63).
 * - int -> float32/float64 is one C cast (a single rounding to nearest
 *   even); int -> float16/bfloat16 goes through float32, as float64 does.
 * - A conversion to the same dtype returns the value unchanged (signalling
 *   NaNs included), as a C cast to the same type does.
 * - Values are first brought to their canonical form, the one that
 *   ta_value_load(ta_value_store(v)) gives: an out-of-range integer is
 *   wrapped to its width, a bool is 0 or 1, a float32 is rounded to float32.
 * - Storage keeps every bit pattern: a float32 NaN is held in the double
 *   with its payload shifted into the top bits and not quieted, so load and
 *   store round-trip all 2^32 float32 patterns.  A bool loads as
 *   (byte != 0) and stores as 0 or 1.
 * - ta_value_same compares the elements ta_value_store would write.
 */

/* ---------------------------------------------------------------- the table */

static const char *const s_names[TACT_DTYPE_COUNT] = {
#define S_NAME_(NAME, name, size) #name,
    TACT_DTYPE_MAP(S_NAME_)
#undef S_NAME_
};

static const unsigned char s_sizes[TACT_DTYPE_COUNT] = {
#define S_SIZE_(NAME, name, size) size,
    TACT_DTYPE_MAP(S_SIZE_)
#undef S_SIZE_
};

#define S_BIT(d) (1u << (d))

/* promo_lattice: the dtypes each dtype promotes to directly.  Every parent
 * comes later in the enum, which lets s_upward close the sets in one pass. */
static const unsigned s_parents[TACT_DTYPE_COUNT] = {
    [TACT_BOOL] = S_BIT(TACT_INT8) | S_BIT(TACT_UINT8),
    [TACT_INT8] = S_BIT(TACT_INT16),
    [TACT_UINT8] = S_BIT(TACT_INT16) | S_BIT(TACT_UINT16),
    [TACT_INT16] = S_BIT(TACT_INT32),
    [TACT_UINT16] = S_BIT(TACT_INT32) | S_BIT(TACT_UINT32),
    [TACT_INT32] = S_BIT(TACT_INT64),
    [TACT_UINT32] = S_BIT(TACT_INT64) | S_BIT(TACT_UINT64),
    [TACT_INT64] = S_BIT(TACT_FLOAT16) | S_BIT(TACT_BFLOAT16),
    [TACT_UINT64] = S_BIT(TACT_FLOAT16) | S_BIT(TACT_BFLOAT16),
    [TACT_FLOAT16] = S_BIT(TACT_FLOAT32),
    [TACT_BFLOAT16] = S_BIT(TACT_FLOAT32),
    [TACT_FLOAT32] = S_BIT(TACT_FLOAT64),
    [TACT_FLOAT64] = 0,
};

/* Returns 1 if d names a dtype of the enum, else 0. */
int ta_dtype_valid(int d) { return d >= 0 && d < TACT_DTYPE_COUNT; }

/* Returns the element size from TACT_DTYPE_MAP, or 0 for an invalid dtype. */
size_t ta_dtype_size(tact_dtype d) { return ta_dtype_valid((int)d) ? s_sizes[d] : 0; }

/* Returns the static name from TACT_DTYPE_MAP, or "invalid"; never NULL. */
const char *ta_dtype_name(tact_dtype d) { return ta_dtype_valid((int)d) ? s_names[d] : "invalid"; }

/* Returns 0 and sets *out (when out is not NULL) for an exact name; returns -1 and
 * leaves *out alone for any other string, NULL included. */
int ta_dtype_parse(const char *name, tact_dtype *out) {
    if (!name) return -1;
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
        if (strcmp(name, s_names[d]) == 0) {
            if (out) *out = (tact_dtype)d;
            return 0;
        }
    }
    return -1;
}

/* The five classifiers below answer false for an invalid dtype. */
bool ta_dtype_is_bool(tact_dtype d) { return d == TACT_BOOL; }

bool ta_dtype_is_half(tact_dtype d) { return d == TACT_FLOAT16 || d == TACT_BFLOAT16; }

bool ta_dtype_is_float(tact_dtype d) {
    return d == TACT_FLOAT16 || d == TACT_BFLOAT16 || d == TACT_FLOAT32 || d == TACT_FLOAT64;
}

bool ta_dtype_is_int(tact_dtype d) { return d >= TACT_INT8 && d <= TACT_UINT64; }

bool ta_dtype_is_unsigned(tact_dtype d) {
    return d == TACT_UINT8 || d == TACT_UINT16 || d == TACT_UINT32 || d == TACT_UINT64;
}

/* ---------------------------------------------------------------- promotion */

/* The upward closure of d in the lattice, as a bit set (d included). */
static unsigned s_upward(tact_dtype d) {
    unsigned closure[TACT_DTYPE_COUNT];
    for (int i = TACT_DTYPE_COUNT - 1; i >= (int)d; i--) {
        closure[i] = S_BIT(i);
        for (int p = i + 1; p < TACT_DTYPE_COUNT; p++)
            if (s_parents[i] & S_BIT(p)) closure[i] |= closure[p];
    }
    return closure[d];
}

/* Returns the least upper bound of a and b, or TACT_DTYPE_COUNT if either is invalid. */
tact_dtype ta_dtype_promote(tact_dtype a, tact_dtype b) {
    if (!ta_dtype_valid((int)a) || !ta_dtype_valid((int)b)) return TACT_DTYPE_COUNT;
    unsigned common = s_upward(a) & s_upward(b); /* never empty: float64 tops the lattice */
    int d = 0;
    while (!(common & S_BIT(d))) d++;
    return (tact_dtype)d;
}

/* Returns d for a float, float32 otherwise, or TACT_DTYPE_COUNT for an invalid d. */
tact_dtype ta_dtype_upper_float(tact_dtype d) {
    if (!ta_dtype_valid((int)d)) return TACT_DTYPE_COUNT;
    return ta_dtype_is_float(d) ? d : TACT_FLOAT32;
}

/* Returns the dtype sums of d accumulate in, or TACT_DTYPE_COUNT for an invalid d. */
tact_dtype ta_dtype_sum_acc(tact_dtype d) {
    if (!ta_dtype_valid((int)d)) return TACT_DTYPE_COUNT;
    if (ta_dtype_is_unsigned(d)) return ta_dtype_promote(d, TACT_UINT32);
    if (ta_dtype_is_int(d) || d == TACT_BOOL) return ta_dtype_promote(d, TACT_INT32);
    return ta_dtype_promote(d, TACT_FLOAT32);
}

/* Returns the dtype of a weak scalar of the given kind next to dtype d, or
 * TACT_DTYPE_COUNT if d or kind is invalid. */
tact_dtype ta_dtype_of_scalar(tact_dtype d, ta_scalar_kind_t kind) {
    if (!ta_dtype_valid((int)d)) return TACT_DTYPE_COUNT;
    if (ta_dtype_is_float(d) || (ta_dtype_is_int(d) && kind == TA_SCALAR_INT)) return d;
    switch (kind) {
    case TA_SCALAR_BOOL: return TACT_BOOL;
    case TA_SCALAR_INT: return TACT_INT32;
    case TA_SCALAR_FLOAT: return TACT_FLOAT32;
    }
    return TACT_DTYPE_COUNT;
}

/* ---------------------------------------------------------------- 16-bit floats */

static uint32_t s_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float s_f32_from(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t s_f64_bits(double f) {
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static double s_f64_from(uint64_t u) {
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Returns the float that half h stands for: always exact; a NaN comes back quiet. */
float ta_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or NaN made quiet */
        return s_f32_from(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        if (man == 0) return s_f32_from(sign);
        /* A subnormal, man * 2^-24: normalize so the leading one becomes implicit. */
        uint32_t e = 113;
        while (!(man & 0x400u)) man <<= 1, e--;
        return s_f32_from(sign | (e << 23) | ((man & 0x3ffu) << 13));
    }
    return s_f32_from(sign | ((exp + 112) << 23) | (man << 13));
}

/* Returns f rounded to the nearest half, ties to even; see the NaN rule at the top. */
uint16_t ta_float_to_half(float f) {
    uint32_t x = s_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax & 0x7fffffu) >> 13));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax >= 0x38800000u) {                                  /* a normal half, >= 2^-14 */
        uint32_t r = ax - (112u << 23);
        r += 0xfffu + ((r >> 13) & 1u); /* a mantissa carry moves into the exponent, as it should */
        return (uint16_t)(sign | (r >> 13));
    }
    /* A subnormal half: round (1.m * 2^(e-127)) / 2^-24 to an integer, ties to even.
     * Below 2^-25 (e < 102) everything rounds to zero, float subnormals included. */
    uint32_t e = ax >> 23;
    if (e < 102) return sign;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++; /* q == 0x400 is the smallest normal */
    return (uint16_t)(sign | q);
}

/* Returns the float that bfloat16 b stands for: exact; a NaN comes back quiet. */
float ta_bf16_to_float(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    if ((x & 0x7fffffffu) > 0x7f800000u) x |= 0x400000u;
    return s_f32_from(x);
}

/* Returns f rounded to the nearest bfloat16, ties to even; a NaN stays NaN, quiet. */
uint16_t ta_float_to_bf16(float f) {
    uint32_t x = s_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u); /* cannot wrap: the largest non-NaN input is 0xff800000 */
    return (uint16_t)(x >> 16);
}

/* ---------------------------------------------------------------- float32 inside a double */

static bool s_f32_is_nan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

static bool s_f64_is_nan(uint64_t u) { return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }

/* The double holding float32 bits u: exact for numbers; a NaN keeps its
 * payload in the top mantissa bits and is not quieted, so storage is lossless. */
static double s_f32_to_value(uint32_t u) {
    if (!s_f32_is_nan(u)) return (double)s_f32_from(u);
    uint64_t sign = (uint64_t)(u >> 31) << 63;
    return s_f64_from(sign | 0x7ff0000000000000ull | ((uint64_t)(u & 0x7fffffu) << 29));
}

/* The float32 bits a double stands for: the inverse of s_f32_to_value, and a
 * C cast (round to nearest even) for a double that is not a float32.  A NaN
 * whose payload lies only below float32's mantissa keeps the quiet bit. */
static uint32_t s_value_to_f32(double d) {
    uint64_t u = s_f64_bits(d);
    if (!s_f64_is_nan(u)) return s_f32_bits((float)d);
    uint32_t pay = (uint32_t)((u >> 29) & 0x7fffffu);
    return (uint32_t)(u >> 32 & 0x80000000u) | 0x7f800000u | (pay ? pay : 0x400000u);
}

static double s_quiet64(double d) {
    uint64_t u = s_f64_bits(d);
    return s_f64_is_nan(u) ? s_f64_from(u | 0x8000000000000ull) : d;
}

/* ---------------------------------------------------------------- values */

static ta_value_t s_zero(void) {
    ta_value_t v;
    memset(&v, 0, sizeof v);
    return v;
}

/* The width-bit pattern p as the value of integer dtype d (wrapping). */
static ta_value_t s_int_value(tact_dtype d, uint64_t p) {
    ta_value_t v = s_zero();
    unsigned bits = 8u * s_sizes[d];
    if (bits < 64) p &= (1ull << bits) - 1;
    if (ta_dtype_is_unsigned(d)) {
        v.u = p;
    } else {
        if (bits < 64 && (p >> (bits - 1)) & 1u) p |= ~0ull << bits; /* sign-extend */
        /* Two's complement without relying on implementation-defined conversion. */
        v.i = p <= (uint64_t)INT64_MAX ? (int64_t)p : -(int64_t)(~p) - 1;
    }
    return v;
}

/* Returns the element of dtype d at p (any alignment), or the zero value for an
 * invalid d, in which case p is not read. */
ta_value_t ta_value_load(tact_dtype d, const void *p) {
    ta_value_t v = s_zero();
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    switch (d) {
    case TACT_BOOL: memcpy(&u8, p, 1), v.b = u8 != 0; break;
    case TACT_INT8: case TACT_UINT8: memcpy(&u8, p, 1), v = s_int_value(d, u8); break;
    case TACT_INT16: case TACT_UINT16: memcpy(&u16, p, 2), v = s_int_value(d, u16); break;
    case TACT_INT32: case TACT_UINT32: memcpy(&u32, p, 4), v = s_int_value(d, u32); break;
    case TACT_INT64: case TACT_UINT64: memcpy(&u64, p, 8), v = s_int_value(d, u64); break;
    case TACT_FLOAT16: case TACT_BFLOAT16: memcpy(&v.h, p, 2); break;
    case TACT_FLOAT32: memcpy(&u32, p, 4), v.f = s_f32_to_value(u32); break;
    case TACT_FLOAT64: memcpy(&v.f, p, 8); break;
    default: break;
    }
    return v;
}

/* Writes exactly ta_dtype_size(d) bytes at p (any alignment); nothing for an invalid d. */
void ta_value_store(tact_dtype d, void *p, ta_value_t v) {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64 = ta_dtype_is_unsigned(d) ? v.u : (uint64_t)v.i;
    switch (d) {
    case TACT_BOOL: u8 = v.b != 0, memcpy(p, &u8, 1); break;
    case TACT_INT8: case TACT_UINT8: u8 = (uint8_t)u64, memcpy(p, &u8, 1); break;
    case TACT_INT16: case TACT_UINT16: u16 = (uint16_t)u64, memcpy(p, &u16, 2); break;
    case TACT_INT32: case TACT_UINT32: u32 = (uint32_t)u64, memcpy(p, &u32, 4); break;
    case TACT_INT64: case TACT_UINT64: memcpy(p, &u64, 8); break;
    case TACT_FLOAT16: case TACT_BFLOAT16: memcpy(p, &v.h, 2); break;
    case TACT_FLOAT32: u32 = s_value_to_f32(v.f), memcpy(p, &u32, 4); break;
    case TACT_FLOAT64: memcpy(p, &v.f, 8); break;
    default: break;
    }
}

/* v as its dtype's storage would hold it (see the corner list at the top). */
static ta_value_t s_canonical(tact_dtype d, ta_value_t v) {
    unsigned char buf[8] = {0};
    ta_value_store(d, buf, v);
    return ta_value_load(d, buf);
}

/* A float source's value as a double: exact; a NaN is quiet with its payload on top. */
static double s_float_of(tact_dtype d, ta_value_t v) {
    switch (d) {
    case TACT_FLOAT16: return s_f32_to_value(s_f32_bits(ta_half_to_float(v.h)));
    case TACT_BFLOAT16: return s_f32_to_value(s_f32_bits(ta_bf16_to_float(v.h)));
    default: return s_quiet64(v.f); /* float32 (canonical) or float64 */
    }
}

/* A finite-or-not double cast to integer dtype d as the header defines it. */
static ta_value_t s_float_to_int(tact_dtype d, double x) {
    if (isnan(x)) return s_int_value(d, 0);
    double t = trunc(x);
    if (d == TACT_UINT64 && t >= 0.0 && t < 18446744073709551616.0) {
        ta_value_t v = s_zero();
        v.u = (uint64_t)t;
        return v;
    }
    int64_t p;
    if (t >= 9223372036854775808.0) p = INT64_MAX;
    else if (t < -9223372036854775808.0) p = INT64_MIN;
    else p = (int64_t)t;
    return s_int_value(d, (uint64_t)p); /* for in-range values of narrower types this is t */
}

/* The double x (from s_float_of, so a NaN is quiet) as float dtype d, the 16-bit
 * types through float32; a quiet NaN stays quiet as its payload is truncated. */
static ta_value_t s_to_float(tact_dtype d, double x) {
    ta_value_t v = s_zero();
    if (d == TACT_FLOAT64) {
        v.f = x;
        return v;
    }
    uint32_t f32 = s_value_to_f32(x);
    if (d == TACT_FLOAT32) v.f = s_f32_to_value(f32);
    else if (d == TACT_FLOAT16) v.h = ta_float_to_half(s_f32_from(f32));
    else v.h = ta_float_to_bf16(s_f32_from(f32));
    return v;
}

/* Returns v cast from src to dst as the header and the list at the top define it,
 * or the zero value if either dtype is invalid. */
ta_value_t ta_value_convert(tact_dtype dst, tact_dtype src, ta_value_t v) {
    if (!ta_dtype_valid((int)dst) || !ta_dtype_valid((int)src)) return s_zero();
    v = s_canonical(src, v);
    if (dst == src) return v;
    ta_value_t r = s_zero();
    if (ta_dtype_is_float(src)) {
        double x = s_float_of(src, v);
        if (dst == TACT_BOOL) r.b = x != 0.0;
        else if (ta_dtype_is_int(dst)) r = s_float_to_int(dst, x);
        else r = s_to_float(dst, x);
        return r;
    }
    /* An integer or bool source, as its 64-bit pattern and signedness. */
    bool is_signed = ta_dtype_is_int(src) && !ta_dtype_is_unsigned(src);
    uint64_t p = src == TACT_BOOL ? v.b : is_signed ? (uint64_t)v.i : v.u;
    if (dst == TACT_BOOL) {
        r.b = p != 0;
    } else if (ta_dtype_is_int(dst)) {
        r = s_int_value(dst, p);
    } else if (dst == TACT_FLOAT64) {
        r.f = is_signed ? (double)v.i : (double)p;
    } else {
        float f = is_signed ? (float)v.i : (float)p; /* one rounding, as the C cast */
        if (dst == TACT_FLOAT32) r.f = f;
        else if (dst == TACT_FLOAT16) r.h = ta_float_to_half(f);
        else r.h = ta_float_to_bf16(f);
    }
    return r;
}

/* Returns v as a double (rounded past 2^53), or 0.0 for an invalid d. */
double ta_value_as_double(tact_dtype d, ta_value_t v) {
    if (!ta_dtype_valid((int)d)) return 0.0;
    v = s_canonical(d, v);
    switch (d) {
    case TACT_BOOL: return v.b;
    case TACT_FLOAT16: return ta_half_to_float(v.h);
    case TACT_BFLOAT16: return ta_bf16_to_float(v.h);
    case TACT_FLOAT32: case TACT_FLOAT64: return v.f;
    default: return ta_dtype_is_unsigned(d) ? (double)v.u : (double)v.i;
    }
}

/* Returns x cast from float64 to d, or the zero value for an invalid d. */
ta_value_t ta_value_from_double(tact_dtype d, double x) {
    ta_value_t v = s_zero();
    v.f = x;
    return ta_value_convert(d, TACT_FLOAT64, v);
}

/* Returns whether a and b store as the same bytes in dtype d (true for an invalid d). */
bool ta_value_same(tact_dtype d, ta_value_t a, ta_value_t b) {
    unsigned char pa[8] = {0}, pb[8] = {0};
    ta_value_store(d, pa, a);
    ta_value_store(d, pb, b);
    return memcmp(pa, pb, sizeof pa) == 0;
}

uint64_t ta_value_bits(tact_dtype d, ta_value_t v) {
    if (ta_dtype_is_bool(d)) return v.b;
    if (d == TACT_FLOAT16 || d == TACT_BFLOAT16) return v.h;
    if (ta_dtype_is_float(d)) return s_f64_bits(v.f);
    return ta_dtype_is_unsigned(d) ? v.u : (uint64_t)v.i;
}

ta_value_t ta_value_from_bits(tact_dtype d, uint64_t bits) {
    ta_value_t v;
    memset(&v, 0, sizeof v);
    if (ta_dtype_is_bool(d)) v.b = (uint8_t)(bits != 0);
    else if (d == TACT_FLOAT16 || d == TACT_BFLOAT16) v.h = (uint16_t)bits;
    else if (ta_dtype_is_float(d)) v.f = s_f64_from(bits);
    else if (ta_dtype_is_unsigned(d)) v.u = bits;
    else v.i = (int64_t)bits;
    return v;
}
