/* dtype.h - element types: sizes, kinds, the promotion lattice, and host-side value conversion. */
#ifndef TACT_DTYPE_H
#define TACT_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tact.h"

/* Returns 1 if d names a dtype (0 <= d < TACT_DTYPE_COUNT), else 0. */
int ta_dtype_valid(int d);
/* Bytes per element; 0 for an invalid dtype. */
size_t ta_dtype_size(tact_dtype d);
/* "float32", "bool", ...; "invalid" for an invalid dtype. */
const char *ta_dtype_name(tact_dtype d);
/* Parses a name as ta_dtype_name writes it; returns 0, or -1 if unknown. */
int ta_dtype_parse(const char *name, tact_dtype *out);

bool ta_dtype_is_bool(tact_dtype d);
bool ta_dtype_is_float(tact_dtype d);    /* float16, bfloat16, float32, float64 */
bool ta_dtype_is_half(tact_dtype d);     /* float16, bfloat16: stored in 16 bits, computed in float32 */
bool ta_dtype_is_int(tact_dtype d);      /* signed or unsigned integers, not bool */
bool ta_dtype_is_unsigned(tact_dtype d); /* uint8..uint64 */

/*
 * The reference's promotion lattice (tinygrad dtype.py promo_lattice):
 * bool < int8, uint8; int8 < int16 < int32 < int64 < float16, bfloat16;
 * uint8 < int16, uint16; uint16 < int32, uint32; uint32 < int64, uint64;
 * uint64 < float16, bfloat16; float16, bfloat16 < float32 < float64.
 * Returns the least upper bound of a and b: the dtype of lowest priority
 * (enum order) that both can be promoted to.  E.g. (int8, uint8) -> int16,
 * (int64, uint64) -> float16, (float16, bfloat16) -> float32.
 */
tact_dtype ta_dtype_promote(tact_dtype a, tact_dtype b);

/* least_upper_float: d itself if d is a float, else float32. */
tact_dtype ta_dtype_upper_float(tact_dtype d);

/* sum_acc_dtype: unsigned -> promote(d, uint32); bool/signed ints ->
 * promote(d, int32); float16/bfloat16 -> float32; others unchanged. */
tact_dtype ta_dtype_sum_acc(tact_dtype d);

/* Kinds of a host scalar as the reference sees Python scalars. */
typedef enum ta_scalar_kind { TA_SCALAR_BOOL, TA_SCALAR_INT, TA_SCALAR_FLOAT } ta_scalar_kind_t;

/* The dtype a weakly typed scalar takes next to a tensor of dtype d (the
 * reference's _broadcasted): d if d is a float, or if d is an int and the
 * scalar an int; otherwise bool/int32/float32 by the scalar's kind, which
 * is then promoted with d by the caller. */
tact_dtype ta_dtype_of_scalar(tact_dtype d, ta_scalar_kind_t kind);

/* IEEE binary16 and bfloat16 conversions, round to nearest even; NaN stays
 * NaN (quiet), infinities and signed zeros are kept, overflow gives inf. */
float ta_half_to_float(uint16_t h);
uint16_t ta_float_to_half(float f);
float ta_bf16_to_float(uint16_t b);
uint16_t ta_float_to_bf16(float f);

/*
 * A host-side value of any dtype, used for constants and reference checks.
 * ta_value_convert casts one element from src to dst with the semantics of
 * a C cast on the CPU device: float -> int truncates toward zero (values out
 * of the target's range, and NaN, give the value C's (int64_t) cast of a
 * double in range would give after wrapping: defined here as 0 for NaN and
 * saturation at the int64 range, then wrapping to the width); int -> narrower
 * int wraps (two's complement); anything -> bool is (x != 0); float64 ->
 * float32/float16/bfloat16 rounds to nearest even (via float for the 16-bit
 * types: first to float32, then to 16 bits, as the CPU device does).
 */
typedef union ta_value {
    uint8_t b;
    int64_t i;  /* every signed integer dtype, sign-extended */
    uint64_t u; /* every unsigned integer dtype */
    double f;   /* float32/float64 (float32 values exactly representable) */
    uint16_t h; /* float16 / bfloat16 bits */
} ta_value_t;

ta_value_t ta_value_convert(tact_dtype dst, tact_dtype src, ta_value_t v);
/* Reads/writes one element of dtype d at p (unaligned access is fine). */
ta_value_t ta_value_load(tact_dtype d, const void *p);
void ta_value_store(tact_dtype d, void *p, ta_value_t v);
/* Convenience: the value as a double (bool 0/1, ints exact up to 2^53). */
double ta_value_as_double(tact_dtype d, ta_value_t v);
/* Makes a value of dtype d from a double, as ta_value_convert from float64. */
ta_value_t ta_value_from_double(tact_dtype d, double x);
/* A value's bits as one uint64, from the union member its dtype uses (so
 * the union's unused bytes never leak into a message), and back.  This is
 * how op records, subgraphs and kernel ASTs carry constants. */
uint64_t ta_value_bits(tact_dtype d, ta_value_t v);
ta_value_t ta_value_from_bits(tact_dtype d, uint64_t bits);

/* Bitwise equality of two values of dtype d (NaN payloads compared as bits). */
bool ta_value_same(tact_dtype d, ta_value_t a, ta_value_t b);

#endif
