#!/usr/bin/env python3
"""gen_dtype_golden.py - writes golden_dtype.inc (generated data, hence not a .h), the reference data for tests/graph/test_dtype.c.

Run from anywhere: python3 tests/graph/gen_dtype_golden.py (needs `pip install numpy ml_dtypes`).
The output depends only on the fixed seed below, never on the NumPy version's RNG or on the
machine, so rerunning it reproduces the committed header byte for byte.

Where the references come from:
- dtype names and sizes: NumPy's and ml_dtypes' own dtypes.
- promotion: tinygrad 0.9's promo_lattice and least_upper_dtype, written out below.
- float16 values: NumPy; bfloat16 values: ml_dtypes.  Both round to nearest even.
- value conversions: NumPy's astype (a C cast) for in-range values; NaN and out-of-range
  values follow the rules documented in graph/dtype.h, coded here from the header's words.
"""
import math
import os
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np

SEED = 0x7AC7
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_dtype.inc")

# The dtypes in tinygrad's priority order, which is tact's enum order (TACT_DTYPE_MAP).
NAMES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
         "float16", "bfloat16", "float32", "float64"]
IDX = {n: i for i, n in enumerate(NAMES)}
NP = {n: (ml_dtypes.bfloat16 if n == "bfloat16" else np.dtype(n).type) for n in NAMES}
SIZE = {n: np.dtype(NP[n]).itemsize for n in NAMES}
INTS = {"int8": (8, True), "uint8": (8, False), "int16": (16, True), "uint16": (16, False),
        "int32": (32, True), "uint32": (32, False), "int64": (64, True), "uint64": (64, False)}
# Float formats: (exponent bits, mantissa bits).
FLOATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def cname(n):
    return "TACT_" + n.upper()


# ---------------------------------------------------------------- promotion (tinygrad dtype.py)

PROMO_LATTICE = {
    "bool": ["int8", "uint8"], "int8": ["int16"], "int16": ["int32"], "int32": ["int64"],
    "int64": ["float16", "bfloat16"], "uint8": ["int16", "uint16"], "uint16": ["int32", "uint32"],
    "uint32": ["int64", "uint64"], "uint64": ["float16", "bfloat16"],
    "float16": ["float32"], "bfloat16": ["float32"], "float32": ["float64"],
}


def recursive_parents(d):
    if d == "float64":
        return {"float64"}
    return set.union(*[recursive_parents(p) for p in PROMO_LATTICE[d]], {d})


def least_upper_dtype(*ds):
    return min(set.intersection(*[recursive_parents(d) for d in ds]), key=IDX.__getitem__)


def is_float(d):
    return d in FLOATS


def is_unsigned(d):
    return d in INTS and not INTS[d][1]


def is_int(d):  # tinygrad's dtypes.is_int: signed or unsigned, not bool
    return d in INTS


def least_upper_float(d):
    return d if is_float(d) else least_upper_dtype(d, "float32")


def sum_acc_dtype(d):
    if is_unsigned(d):
        return least_upper_dtype(d, "uint32")
    if is_int(d) or d == "bool":
        return least_upper_dtype(d, "int32")
    return least_upper_dtype(d, "float32")


SCALAR_KINDS = ["bool", "int", "float"]  # ta_scalar_kind_t order
PY_SCALAR = {"bool": True, "int": 3, "float": 2.5}


def of_scalar_header(d, kind):
    """ta_dtype_of_scalar as graph/dtype.h words it (a bool scalar is not an int)."""
    if is_float(d) or (is_int(d) and kind == "int"):
        return d
    return {"bool": "bool", "int": "int32", "float": "float32"}[kind]


def broadcasted_result(d, y):
    """The dtype both operands end with in tinygrad's Tensor._broadcasted(x, y) for a Python
    scalar y, where isinstance(True, int) holds."""
    if is_float(d) or (is_int(d) and isinstance(y, int)):
        y_dtype = d
    else:  # dtypes.from_py
        y_dtype = "float32" if isinstance(y, float) else "bool" if isinstance(y, bool) else "int32"
    return d if d == y_dtype else least_upper_dtype(d, y_dtype)


# ---------------------------------------------------------------- bit helpers


class XorShift:
    """The same xorshift64* as tests/testutil.c's tu_rand."""

    def __init__(self, seed):
        self.s = seed & (2**64 - 1)

    def next(self):
        x = self.s or 0x9E3779B97F4A7C15
        x ^= x >> 12
        x ^= (x << 25) & (2**64 - 1)
        x ^= x >> 27
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & (2**64 - 1)


def bits_of(name, value):
    """The element bit pattern (as an unsigned int) of a NumPy scalar/array value of dtype name."""
    a = np.array([value], dtype=NP[name])
    return int(a.view(UINT[SIZE[name]])[0])


def value_of(name, bits):
    """The NumPy scalar of dtype name whose element bits are bits."""
    return np.array([bits], dtype=UINT[SIZE[name]]).view(NP[name])[0]


def fbits(fmt, x):
    """Bits of the Python float x in float format fmt, which must represent x exactly."""
    b = bits_of(fmt, np.float64(x).astype(NP[fmt]) if fmt != "float64" else x)
    assert float(value_of(fmt, b)) == x or math.isnan(x)
    return b


def is_nan_bits(fmt, b):
    e, m = FLOATS[fmt]
    return (b >> m) & ((1 << e) - 1) == (1 << e) - 1 and b & ((1 << m) - 1) != 0


def nan_convert(src, dst, b):
    """The header's NaN rule: NaN stays NaN, quiet, with its sign; the payload keeps its top
    bits (shifted left when widening, truncated when narrowing) and the quiet bit is set."""
    es, ms = FLOATS[src]
    ed, md = FLOATS[dst]
    sign = b >> (es + ms)
    pay = b & ((1 << ms) - 1)
    pay = pay << (md - ms) if md >= ms else pay >> (ms - md)
    pay |= 1 << (md - 1)
    return (sign << (ed + md)) | (((1 << ed) - 1) << md) | pay


def quiet(np_call):
    with np.errstate(all="ignore"):
        return np_call()


def to16(fmt16, f32_bits):
    """float32 bits -> float16/bfloat16 bits, round to nearest even (NumPy / ml_dtypes)."""
    if is_nan_bits("float32", f32_bits):
        return nan_convert("float32", fmt16, f32_bits)
    f = np.array([f32_bits], np.uint32).view(np.float32)
    return int(quiet(lambda: f.astype(NP[fmt16])).view(np.uint16)[0])


def f64_to_f32(f64_bits):
    if is_nan_bits("float64", f64_bits):
        return nan_convert("float64", "float32", f64_bits)
    d = np.array([f64_bits], np.uint64).view(np.float64)
    return int(quiet(lambda: d.astype(np.float32)).view(np.uint32)[0])


# ---------------------------------------------------------------- value conversion semantics


def wrap(n, width, signed):
    n &= (1 << width) - 1
    return n - (1 << width) if signed and n >> (width - 1) else n


def exact_round_to_f32(n):
    """A Python int rounded once to the nearest float32 (ties to even), as a Python float.
    Cross-checks NumPy's int -> float32 astype; every 64-bit int is far below FLT_MAX."""
    if n == 0:
        return 0.0
    a = abs(n)
    shift = max(a.bit_length() - 24, 0)
    q, r = divmod(a, 1 << shift)
    half = Fraction(1 << shift, 2) if shift else Fraction(1, 2)
    if shift and (r > half or (r == half and q & 1)):
        q += 1
    return math.copysign(float(q << shift), n)


def convert(dst, src, sbits):
    """ta_value_convert on element bit patterns: the dst element's bits for the src element's bits."""
    if dst == src:
        return sbits
    sv = value_of(src, sbits)
    if src == "bool" or src in INTS:
        n = int(sv)  # exact Python int
        if dst == "bool":
            return int(n != 0)
        if dst in INTS:
            w, s = INTS[dst]
            r = wrap(n, w, s)
            assert int(quiet(lambda: np.array([sv]).astype(NP[dst]))[0]) == r  # NumPy wraps too
            return r & ((1 << w) - 1)
        # int -> float: one C cast to float64 or float32; the 16-bit types go through float32.
        f64 = np.array([sv]).astype(np.float64)
        assert float(f64[0]) == float(n)  # Python's int -> float is correctly rounded
        if dst == "float64":
            return int(f64.view(np.uint64)[0])
        f32 = np.array([sv]).astype(np.float32)
        assert float(f32[0]) == exact_round_to_f32(n), (src, n)  # single rounding
        f32b = int(f32.view(np.uint32)[0])
        return f32b if dst == "float32" else to16(dst, f32b)
    # A float source.
    x = float(sv)  # exact for every float format here
    if dst == "bool":
        return int(x != 0)  # NaN != 0
    if dst in INTS:
        w, s = INTS[dst]
        lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if s else (0, (1 << w) - 1)
        if math.isnan(x):
            return 0
        t = None if math.isinf(x) else math.trunc(x)
        if t is not None and lo <= t <= hi:  # in range: the C cast, truncation toward zero
            r = t
            assert int(np.array([sv]).astype(NP[dst])[0]) == r
        else:  # out of range: saturate at the int64 range, then wrap to the width
            p = (2**63 - 1) if x > 0 else -(2**63)
            if t is not None:
                p = max(-(2**63), min(2**63 - 1, t))
            r = wrap(p, w, s)
        return r & ((1 << w) - 1)
    # float -> float.
    if is_nan_bits(src, sbits):
        return nan_convert(src, dst, sbits)
    if dst == "float64" or (dst == "float32" and src != "float64"):
        return fbits(dst, x)  # widening is exact
    f32b = f64_to_f32(sbits) if src == "float64" else fbits("float32", x)
    return f32b if dst == "float32" else to16(dst, f32b)


# ---------------------------------------------------------------- the value sets


def int_specials(name):
    w, s = INTS[name]
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if s else (0, (1 << w) - 1)
    cands = [0, 1, -1, 2, -2, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769,
             65535, 65536, 2**24 + 1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32,
             2**53 + 1, 2**60 + 2**36 + 1, -(2**60 + 2**36 + 1), 2**63 - 1, 2**63, 2**64 - 1,
             lo, lo + 1, hi, hi - 1]
    out = []
    for c in cands:
        if lo <= c <= hi and c not in out:
            out.append(c)
    return [c & ((1 << w) - 1) for c in out]


FLOAT_SPECIALS = [
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.99, -0.99, 1.5, 2.5, -2.5, 3.75, -7.5, 127.9, 128.0,
    128.5, -128.9, -129.0, 255.5, 256.0, 300.7, -300.7, 32767.5, 32768.0, -32768.9, -32769.0,
    65504.0, 65519.0, 65520.0, 65535.9, 65536.0, 1e6 + 0.5, 2147483520.0, 2147483648.0,
    -2147483648.0, -2147483904.0, 4294967040.0, 4294967296.0, 1e10, -1e10,
    float(2**63 - 1024), 2.0**63, -(2.0**63), -(2.0**63) - 2048.0, float(2**64 - 2048),
    1.8446742974197924e19, 2.0**64, 1e19, -1e19, 1e20, -1e20, 1e30, -1e30,
    1 + 2**-11 + 2**-30, 1 + 2**-8 + 2**-30,  # round differently direct and via float32
    2**-24, 2**-25, 3 * 2**-25, 2**-14, 2**-149, -(2**-149), 1e-30, 5e-324, -5e-324,
    3.4028234663852886e38, float.fromhex("0x1.fffffefffffffp127"), float.fromhex("0x1.ffffffp127"),
    1.7976931348623157e308, math.inf, -math.inf,
]
NAN_BITS = {  # a quiet NaN, a negative quiet NaN, a signalling NaN, one with a low-only payload
    "float16": [0x7E00, 0xFE00, 0x7D01, 0x7C01],
    "bfloat16": [0x7FC0, 0xFFC0, 0x7FA1, 0x7F81],
    "float32": [0x7FC00000, 0xFFC00000, 0x7FA00001, 0x7F800001, 0x7FC12345],
    "float64": [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF4000000000001,
                0x7FF0000000000001, 0x7FF8123456789ABC],
}
N_RANDOM = 40


def from_f64(name, x):
    """The bits of the non-NaN Python float x cast to float dtype name, as the header casts
    float64 (the 16-bit types through float32)."""
    a = np.array([x], np.float64)
    if name in ("float16", "bfloat16"):
        a = quiet(lambda: a.astype(np.float32))
    return bits_of(name, quiet(lambda: a.astype(NP[name]))[0])


def value_set(name, rng):
    """The source element bit patterns for name: fixed corner cases, then seeded random ones."""
    if name == "bool":
        return [0, 1]
    size = SIZE[name]
    if name in INTS:
        out = int_specials(name)
        w = INTS[name][0]
        for i in range(N_RANDOM):
            r = rng.next()
            out.append((r >> (rng.next() % w)) & ((1 << w) - 1) if i % 2 else r & ((1 << w) - 1))
        return out
    out = []
    for x in FLOAT_SPECIALS:
        b = from_f64(name, x)
        if b not in out:
            out.append(b)
    out += NAN_BITS[name]
    for i in range(N_RANDOM):
        r = rng.next()
        if i % 4 == 0:  # any bit pattern
            out.append(r & ((1 << (8 * size)) - 1))
            continue
        # A value of random sign and magnitude below 2^-20 .. 2^70.
        mag = (r % 1000003) / 1000003.0 * (2.0 ** ((rng.next() % 91) - 20))
        x = -mag if r >> 63 else mag
        b = from_f64(name, x)
        out.append(b)
    return out


def tricky_f32_for(fmt16):
    """float32 bit patterns around fmt16's rounding boundaries, plus seeded random ones."""
    e, m = FLOATS[fmt16]
    out = []

    def add(b):
        b &= 0xFFFFFFFF
        if b not in out:
            out.append(b)

    # Values of fmt16 (subnormal, normal, odd and even mantissas, largest finite), and the
    # midpoints to their successors with the floats just either side of each midpoint.
    one = ((1 << (e - 1)) - 1) << m  # the bits of 1.0
    largest = (((1 << e) - 2) << m) | ((1 << m) - 1)
    picks = [0x0000, 0x0001, 0x0002, 0x0003, 0x0010, 0x0155, (1 << m) - 2, (1 << m) - 1, 1 << m,
             (1 << m) + 1, one, one + 1, largest - 1, largest]
    for h in picks:
        lo = float(value_of(fmt16, h))
        hi = math.ldexp(1.0, 2 ** (e - 1)) if h == largest else float(value_of(fmt16, h + 1))
        mid = (lo + hi) / 2
        mb = fbits("float32", mid)
        for b in (fbits("float32", lo), mb - 1 if mid else mb, mb, mb + 1):
            add(b)
            add(b ^ 0x80000000)
    add(0x00000000), add(0x80000000), add(0x00000001), add(0x80000001), add(0x007FFFFF)
    add(0x00800000), add(0x7F7FFFFF), add(0xFF7FFFFF), add(0x7F800000), add(0xFF800000)
    add(fbits("float32", 65504.0)), add(fbits("float32", 65519.0)), add(fbits("float32", 65520.0))
    add(fbits("float32", 65536.0)), add(fbits("float32", 1e10)), add(fbits("float32", -1e10))
    add(fbits("float32", 2**-25)), add(fbits("float32", 2**-26)), add(fbits("float32", float(np.float32(1.0 / 3))))
    add(fbits("float32", float(np.float32(math.pi))))
    for b in NAN_BITS["float32"] + [0xFFA00001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F802000, 0x7F810000]:
        add(b)
    rng = XorShift(SEED ^ (0xF16 if fmt16 == "float16" else 0xBF16))
    for i in range(1500):
        r = rng.next()
        if i % 3 == 0:
            add(r)  # any bit pattern
        elif fmt16 == "float16":
            add(((r >> 32) & 0x80000000) | (((r % 44) + 100) << 23) | (r >> 20 & 0x7FFFFF))
        else:  # bfloat16 keeps float32's range: random exponent, ties often
            add((r & 0xFFFF0000) | (0x8000 if i % 3 == 1 else (r >> 40) & 0xFFFF))
    return out


# ---------------------------------------------------------------- output


def hexlist(vals, digits, per_line):
    lines = []
    for i in range(0, len(vals), per_line):
        lines.append("    " + ",".join("0x%0*x" % (digits, v) for v in vals[i:i + per_line]) + ",")
    return "\n".join(lines)


def main():
    out = []
    w = out.append
    w("/* golden_dtype.inc - reference data for test_dtype.c, generated by gen_dtype_golden.py: do not edit. */")
    w("#ifndef TACT_GOLDEN_DTYPE_H")
    w("#define TACT_GOLDEN_DTYPE_H")
    w("")
    w("#include <stdint.h>")
    w("")
    w('#include "tact.h"')
    w("")
    w("/* The seed of the value sets below (the generator's xorshift64*, as tu_rand). */")
    w("#define GOLDEN_SEED 0x%xu" % SEED)
    w("#define GOLDEN_NDTYPES %d" % len(NAMES))
    w("")
    w("/* Names and element sizes from NumPy and ml_dtypes; kinds as tinygrad's dtypes.is_*. */")
    w("static const char *const golden_names[GOLDEN_NDTYPES] = {%s};" % ", ".join('"%s"' % n for n in NAMES))
    w("static const unsigned golden_sizes[GOLDEN_NDTYPES] = {%s};" % ", ".join(str(SIZE[n]) for n in NAMES))
    kinds = ["'b'" if n == "bool" else "'f'" if is_float(n) else "'u'" if is_unsigned(n) else "'i'" for n in NAMES]
    w("static const char golden_kinds[GOLDEN_NDTYPES] = {%s};" % ", ".join(kinds))
    w("")
    w("/* least_upper_dtype(row, column) from tinygrad's promo_lattice. */")
    w("static const tact_dtype golden_promote[GOLDEN_NDTYPES][GOLDEN_NDTYPES] = {")
    for a in NAMES:
        w("    {%s}, /* %s */" % (", ".join(cname(least_upper_dtype(a, b)) for b in NAMES), a))
    w("};")
    w("static const tact_dtype golden_sum_acc[GOLDEN_NDTYPES] = {%s};" % ", ".join(cname(sum_acc_dtype(n)) for n in NAMES))
    w("static const tact_dtype golden_upper_float[GOLDEN_NDTYPES] = {%s};" % ", ".join(cname(least_upper_float(n)) for n in NAMES))
    w("/* [dtype][bool, int, float scalar]: ta_dtype_of_scalar as the header words it, and the dtype")
    w(" * both operands end with in tinygrad's _broadcasted (True, 3, 2.5 as the scalar). */")
    w("static const tact_dtype golden_of_scalar[GOLDEN_NDTYPES][3] = {")
    for n in NAMES:
        w("    {%s}," % ", ".join(cname(of_scalar_header(n, k)) for k in SCALAR_KINDS))
    w("};")
    w("static const tact_dtype golden_scalar_result[GOLDEN_NDTYPES][3] = {")
    for n in NAMES:
        w("    {%s}," % ", ".join(cname(broadcasted_result(n, PY_SCALAR[k])) for k in SCALAR_KINDS))
    w("};")
    w("")

    # float16 -> float32 for every bit pattern.
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    f = h.view(np.float16).astype(np.float32).view(np.uint32).astype(np.int64).tolist()
    for i in range(65536):
        if is_nan_bits("float16", i):
            f[i] = nan_convert("float16", "float32", i)
    w("/* float16 bits -> float32 bits (NumPy), for every pattern; NaNs quiet as the header says. */")
    w("static const uint32_t golden_half_to_float[65536] = {")
    w(hexlist(f, 8, 16))
    w("};")
    b = h.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32).astype(np.int64).tolist()
    for i in range(65536):
        if is_nan_bits("bfloat16", i):
            b[i] = nan_convert("bfloat16", "float32", i)
        assert b[i] & 0xFFFF == 0
    w("/* bfloat16 bits -> float32 bits (ml_dtypes), for every pattern; the low 16 bits of every")
    w(" * result are zero (checked by the generator), so only the high 16 are stored. */")
    w("static const uint16_t golden_bf16_to_float_hi[65536] = {")
    w(hexlist([x >> 16 for x in b], 4, 24))
    w("};")
    w("")

    w("typedef struct golden_f2h {")
    w("    uint32_t in;  /* float32 bits */")
    w("    uint16_t out; /* float16 or bfloat16 bits */")
    w("} golden_f2h_t;")
    for fmt, cn in (("float16", "golden_float_to_half"), ("bfloat16", "golden_float_to_bf16")):
        ins = tricky_f32_for(fmt)
        w("/* float32 -> %s around the rounding boundaries, then seeded random patterns. */" % fmt)
        w("static const golden_f2h_t %s[] = {" % cn)
        pairs = ["{0x%08x,0x%04x}" % (i, to16(fmt, i)) for i in ins]
        for i in range(0, len(pairs), 8):
            w("    " + ",".join(pairs[i:i + 8]) + ",")
        w("};")
    w("")

    w("/* ta_value_convert: a source element's bits and the bits of its conversion to each dtype. */")
    w("typedef struct golden_conv {")
    w("    tact_dtype src;")
    w("    uint64_t bits;")
    w("    uint64_t out[GOLDEN_NDTYPES];")
    w("} golden_conv_t;")
    w("static const golden_conv_t golden_conv[] = {")
    rng = XorShift(SEED)
    for src in NAMES:
        for sb in value_set(src, rng):
            outs = ",".join("0x%x" % convert(d, src, sb) for d in NAMES)
            w("    {%s,0x%x,{%s}}," % (cname(src), sb, outs))
    w("};")
    w("")
    w("#endif")
    text = "\n".join(out) + "\n"
    with open(OUT, "w") as fh:
        fh.write(text)
    print("wrote %s (%d bytes)" % (OUT, len(text)), file=sys.stderr)


if __name__ == "__main__":
    main()
