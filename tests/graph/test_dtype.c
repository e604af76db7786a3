/* test_dtype.c - dtypes: table, promotion lattice, 16-bit floats and value casts against golden data. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dtype.h"
#include "golden_dtype.inc"
#include "testutil.h"

#define S_NGOLDEN(a) (sizeof(a) / sizeof((a)[0]))
#define S_MAX_REPORTS 20 /* mismatches reported one by one before the summary */

/* Writes the element bit pattern bits (its low size bytes) of dtype d at p. */
static void s_put_bits(tact_dtype d, void *p, uint64_t bits) {
    uint8_t u8 = (uint8_t)bits;
    uint16_t u16 = (uint16_t)bits;
    uint32_t u32 = (uint32_t)bits;
    switch (ta_dtype_size(d)) {
    case 1: memcpy(p, &u8, 1); break;
    case 2: memcpy(p, &u16, 2); break;
    case 4: memcpy(p, &u32, 4); break;
    default: memcpy(p, &bits, 8); break;
    }
}

/* Reads the element bit pattern of dtype d at p, zero-extended. */
static uint64_t s_get_bits(tact_dtype d, const void *p) {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    switch (ta_dtype_size(d)) {
    case 1: memcpy(&u8, p, 1); return u8;
    case 2: memcpy(&u16, p, 2); return u16;
    case 4: memcpy(&u32, p, 4); return u32;
    default: memcpy(&u64, p, 8); return u64;
    }
}

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

static double s_f64_from(uint64_t u) {
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static ta_value_t s_val_i(int64_t i) {
    ta_value_t v;
    memset(&v, 0, sizeof v);
    v.i = i;
    return v;
}

static ta_value_t s_val_u(uint64_t u) {
    ta_value_t v;
    memset(&v, 0, sizeof v);
    v.u = u;
    return v;
}

static ta_value_t s_val_f(double f) {
    ta_value_t v;
    memset(&v, 0, sizeof v);
    v.f = f;
    return v;
}

/* The bits ta_value_store writes for v as dtype d. */
static uint64_t s_stored(tact_dtype d, ta_value_t v) {
    unsigned char buf[8] = {0};
    ta_value_store(d, buf, v);
    return s_get_bits(d, buf);
}

/* ---------------------------------------------------------------- the table */

Test(graph_dtype, names_sizes_and_kinds_match_numpy) {
    cr_assert_eq(TACT_DTYPE_COUNT, GOLDEN_NDTYPES);
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
        tact_dtype t = (tact_dtype)d;
        cr_expect(ta_dtype_valid(d));
        cr_expect_str_eq(ta_dtype_name(t), golden_names[d], "dtype %d", d);
        cr_expect_eq(ta_dtype_size(t), golden_sizes[d], "%s size", golden_names[d]);
        char k = golden_kinds[d];
        cr_expect_eq(ta_dtype_is_bool(t), k == 'b', "%s is_bool", golden_names[d]);
        cr_expect_eq(ta_dtype_is_float(t), k == 'f', "%s is_float", golden_names[d]);
        cr_expect_eq(ta_dtype_is_int(t), k == 'i' || k == 'u', "%s is_int", golden_names[d]);
        cr_expect_eq(ta_dtype_is_unsigned(t), k == 'u', "%s is_unsigned", golden_names[d]);
    }
}

Test(graph_dtype, parse_inverts_name_and_rejects_unknown) {
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
        tact_dtype out = TACT_DTYPE_COUNT;
        cr_expect_eq(ta_dtype_parse(golden_names[d], &out), 0, "%s", golden_names[d]);
        cr_expect_eq(out, (tact_dtype)d, "%s", golden_names[d]);
    }
    const char *bad[] = {"", "invalid", "float", "Float32", "float32 ", "int", "half", "uint128"};
    for (size_t i = 0; i < S_NGOLDEN(bad); i++) {
        tact_dtype out = TACT_INT8;
        cr_expect_eq(ta_dtype_parse(bad[i], &out), -1, "'%s'", bad[i]);
        cr_expect_eq(out, TACT_INT8, "'%s' must leave *out alone", bad[i]);
    }
    cr_expect_eq(ta_dtype_parse(NULL, NULL), -1);
}

Test(graph_dtype, invalid_dtypes_are_rejected) {
    tact_dtype bad[] = {TACT_DTYPE_COUNT, (tact_dtype)-1, (tact_dtype)99};
    for (size_t i = 0; i < S_NGOLDEN(bad); i++) {
        tact_dtype d = bad[i];
        cr_expect_not(ta_dtype_valid((int)d));
        cr_expect_eq(ta_dtype_size(d), 0);
        cr_expect_str_eq(ta_dtype_name(d), "invalid");
        cr_expect_not(ta_dtype_is_bool(d) || ta_dtype_is_float(d) || ta_dtype_is_int(d) ||
                      ta_dtype_is_unsigned(d));
        cr_expect_eq(ta_dtype_promote(d, TACT_INT8), TACT_DTYPE_COUNT);
        cr_expect_eq(ta_dtype_promote(TACT_FLOAT32, d), TACT_DTYPE_COUNT);
        cr_expect_eq(ta_dtype_upper_float(d), TACT_DTYPE_COUNT);
        cr_expect_eq(ta_dtype_sum_acc(d), TACT_DTYPE_COUNT);
        cr_expect_eq(ta_dtype_of_scalar(d, TA_SCALAR_INT), TACT_DTYPE_COUNT);
        ta_value_t v = ta_value_convert(d, TACT_INT32, s_val_i(7));
        cr_expect_eq(v.u, 0);
        v = ta_value_convert(TACT_INT32, d, s_val_i(7));
        cr_expect_eq(v.u, 0);
        unsigned char buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        ta_value_store(d, buf, s_val_u(~0ull));
        cr_expect_eq(buf[0], 1, "store of an invalid dtype must write nothing");
        cr_expect_eq(ta_value_load(d, buf).u, 0);
        cr_expect_eq(ta_value_as_double(d, s_val_i(3)), 0.0);
    }
    cr_expect_eq(ta_dtype_of_scalar(TACT_BOOL, (ta_scalar_kind_t)7), TACT_DTYPE_COUNT);
}

/* ---------------------------------------------------------------- promotion */

Test(graph_dtype, promotes_every_pair_like_the_lattice) {
    for (int a = 0; a < TACT_DTYPE_COUNT; a++)
        for (int b = 0; b < TACT_DTYPE_COUNT; b++) {
            tact_dtype got = ta_dtype_promote((tact_dtype)a, (tact_dtype)b);
            cr_expect_eq(got, golden_promote[a][b], "promote(%s, %s) = %s, want %s", golden_names[a],
                         golden_names[b], ta_dtype_name(got), golden_names[golden_promote[a][b]]);
        }
}

Test(graph_dtype, promotion_examples_from_the_header) {
    cr_expect_eq(ta_dtype_promote(TACT_INT8, TACT_UINT8), TACT_INT16);
    cr_expect_eq(ta_dtype_promote(TACT_INT64, TACT_UINT64), TACT_FLOAT16);
    cr_expect_eq(ta_dtype_promote(TACT_FLOAT16, TACT_BFLOAT16), TACT_FLOAT32);
    cr_expect_eq(ta_dtype_promote(TACT_BOOL, TACT_BOOL), TACT_BOOL);
    cr_expect_eq(ta_dtype_promote(TACT_UINT32, TACT_INT8), TACT_INT64);
}

Test(graph_dtype, sum_acc_and_upper_float_match_reference) {
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
        tact_dtype s = ta_dtype_sum_acc((tact_dtype)d), u = ta_dtype_upper_float((tact_dtype)d);
        cr_expect_eq(s, golden_sum_acc[d], "sum_acc(%s) = %s, want %s", golden_names[d], ta_dtype_name(s),
                     golden_names[golden_sum_acc[d]]);
        cr_expect_eq(u, golden_upper_float[d], "upper_float(%s) = %s, want %s", golden_names[d],
                     ta_dtype_name(u), golden_names[golden_upper_float[d]]);
    }
}

Test(graph_dtype, of_scalar_matches_header) {
    static const ta_scalar_kind_t kinds[3] = {TA_SCALAR_BOOL, TA_SCALAR_INT, TA_SCALAR_FLOAT};
    for (int d = 0; d < TACT_DTYPE_COUNT; d++)
        for (int k = 0; k < 3; k++) {
            tact_dtype got = ta_dtype_of_scalar((tact_dtype)d, kinds[k]);
            cr_expect_eq(got, golden_of_scalar[d][k], "of_scalar(%s, kind %d) = %s, want %s", golden_names[d], k,
                         ta_dtype_name(got), golden_names[golden_of_scalar[d][k]]);
        }
}

/* The caller's promote(d, of_scalar(d, kind)) lands where tinygrad's _broadcasted does,
 * even though tinygrad sees a bool scalar as an int. */
Test(graph_dtype, scalar_then_promote_matches_broadcasted) {
    static const ta_scalar_kind_t kinds[3] = {TA_SCALAR_BOOL, TA_SCALAR_INT, TA_SCALAR_FLOAT};
    for (int d = 0; d < TACT_DTYPE_COUNT; d++)
        for (int k = 0; k < 3; k++) {
            tact_dtype got = ta_dtype_promote((tact_dtype)d, ta_dtype_of_scalar((tact_dtype)d, kinds[k]));
            cr_expect_eq(got, golden_scalar_result[d][k], "%s with scalar kind %d gives %s, want %s",
                         golden_names[d], k, ta_dtype_name(got), golden_names[golden_scalar_result[d][k]]);
        }
}

/* ---------------------------------------------------------------- 16-bit floats */

Test(graph_dtype, half_to_float_matches_numpy_for_all_patterns) {
    int nfail = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t got = s_f32_bits(ta_half_to_float((uint16_t)h)), want = golden_half_to_float[h];
        if (got != want && nfail++ < S_MAX_REPORTS)
            cr_expect(0, "half 0x%04x -> float 0x%08x, want 0x%08x", h, got, want);
    }
    cr_assert_eq(nfail, 0, "%d of 65536 half patterns differ", nfail);
}

Test(graph_dtype, bf16_to_float_matches_ml_dtypes_for_all_patterns) {
    int nfail = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint32_t got = s_f32_bits(ta_bf16_to_float((uint16_t)b));
        uint32_t want = (uint32_t)golden_bf16_to_float_hi[b] << 16;
        if (got != want && nfail++ < S_MAX_REPORTS)
            cr_expect(0, "bf16 0x%04x -> float 0x%08x, want 0x%08x", b, got, want);
    }
    cr_assert_eq(nfail, 0, "%d of 65536 bf16 patterns differ", nfail);
}

static void s_check_f2h(const golden_f2h_t *g, size_t n, uint16_t (*fn)(float), const char *what) {
    int nfail = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t got = fn(s_f32_from(g[i].in));
        if (got != g[i].out && nfail++ < S_MAX_REPORTS)
            cr_expect(0, "%s(0x%08x = %a) = 0x%04x, want 0x%04x (golden seed 0x%x)", what, g[i].in,
                      (double)s_f32_from(g[i].in), got, g[i].out, GOLDEN_SEED);
    }
    cr_assert_eq(nfail, 0, "%s: %d of %zu tricky floats differ (golden seed 0x%x)", what, nfail, n, GOLDEN_SEED);
}

Test(graph_dtype, float_to_half_matches_numpy_on_tricky_floats) {
    s_check_f2h(golden_float_to_half, S_NGOLDEN(golden_float_to_half), ta_float_to_half, "float_to_half");
}

Test(graph_dtype, float_to_bf16_matches_ml_dtypes_on_tricky_floats) {
    s_check_f2h(golden_float_to_bf16, S_NGOLDEN(golden_float_to_bf16), ta_float_to_bf16, "float_to_bf16");
}

Test(graph_dtype, sixteen_bit_corners_by_hand) {
    cr_expect_eq(ta_float_to_half(65504.0f), 0x7bff);
    cr_expect_eq(ta_float_to_half(65519.996f), 0x7bff);
    cr_expect_eq(ta_float_to_half(65520.0f), 0x7c00, "the tie above the largest half goes to inf");
    cr_expect_eq(ta_float_to_half(-1e9f), 0xfc00);
    cr_expect_eq(ta_float_to_half(-0.0f), 0x8000);
    cr_expect_eq(ta_float_to_half(0x1p-24f), 0x0001);
    cr_expect_eq(ta_float_to_half(0x1p-25f), 0x0000, "half the smallest subnormal ties to zero");
    cr_expect_eq(ta_float_to_half(0x1.000002p-25f), 0x0001);
    cr_expect_eq(ta_float_to_half(0x3p-25f), 0x0002, "1.5 subnormal units tie to 2");
    cr_expect_eq(ta_float_to_half(0x1.ffcp-15f), 0x0400, "the largest subnormal's tie rounds up to normal");
    cr_expect_eq(ta_float_to_half(s_f32_from(0x7f800001u)), 0x7e00, "a low-payload sNaN stays NaN, quiet");
    cr_expect_eq(ta_float_to_half(s_f32_from(0xffa00000u)), 0xff00);
    cr_expect_eq(s_f32_bits(ta_half_to_float(0x7c01)), 0x7fc02000u, "half sNaN widens quiet");
    cr_expect_eq(s_f32_bits(ta_half_to_float(0x8001)), s_f32_bits(-0x1p-24f));
    cr_expect_eq(ta_float_to_bf16(s_f32_from(0x3f808000u)), 0x3f80, "tie to even, down");
    cr_expect_eq(ta_float_to_bf16(s_f32_from(0x3f818000u)), 0x3f82, "tie to even, up");
    cr_expect_eq(ta_float_to_bf16(s_f32_from(0x7f7fffffu)), 0x7f80, "FLT_MAX overflows to inf");
    cr_expect_eq(ta_float_to_bf16(s_f32_from(0x7f800001u)), 0x7fc0);
    cr_expect_eq(ta_float_to_bf16(s_f32_from(0x80000001u)), 0x8000);
    cr_expect_eq(s_f32_bits(ta_bf16_to_float(0xff81)), 0xffc10000u, "bf16 sNaN widens quiet");
}

/* The magnitude of the 16-bit pattern a as a double, with a == inf_bits standing for the
 * next power of two past the largest finite value (the rounding boundary for overflow). */
static double s_mag(float (*dec)(uint16_t), uint16_t a, uint16_t inf_bits, double past_max) {
    return a == inf_bits ? past_max : (double)dec(a);
}

/* Checks that fn rounds random floats to nearest, ties to even, with an independent rule:
 * the result's magnitude a must have |x| between the midpoints to its neighbours. */
static void s_check_nearest(uint16_t (*fn)(float), float (*dec)(uint16_t), uint16_t inf_bits, double past_max,
                            int min_exp, int max_exp, const char *what) {
    uint64_t seed = tu_seed(), rng = seed;
    double mid_inf = ((double)dec((uint16_t)(inf_bits - 1)) + past_max) / 2;
    for (int i = 0; i < 200000; i++) {
        uint64_t r = tu_rand(&rng);
        uint32_t e = (uint32_t)(min_exp + (int)((r >> 32) % (uint64_t)(max_exp - min_exp + 1)));
        uint32_t x = (uint32_t)(r & 0x807fffffu) | (e << 23);
        float f = s_f32_from(x);
        uint16_t h = fn(f);
        cr_assert_eq(h >> 15, x >> 31, "%s(0x%08x) = 0x%04x: sign lost (seed 0x%llx)", what, x, h,
                     (unsigned long long)seed);
        uint16_t a = h & 0x7fff;
        double ax = fabs((double)f);
        if (ax >= mid_inf) {
            cr_assert_eq(a, inf_bits, "%s(0x%08x) = 0x%04x, want inf (seed 0x%llx)", what, x, h,
                         (unsigned long long)seed);
            continue;
        }
        cr_assert(a < inf_bits, "%s(0x%08x) = 0x%04x: inf below the overflow boundary (seed 0x%llx)", what, x, h,
                  (unsigned long long)seed);
        double v = s_mag(dec, a, inf_bits, past_max);
        double lo = a ? (s_mag(dec, (uint16_t)(a - 1), inf_bits, past_max) + v) / 2 : 0.0;
        double hi = (v + s_mag(dec, (uint16_t)(a + 1), inf_bits, past_max)) / 2;
        bool ok = ax > lo && ax < hi;
        if (ax == lo || ax == hi) ok = !(a & 1); /* a tie must land on the even pattern */
        if (a == 0 && ax == 0) ok = true;
        cr_assert(ok, "%s(0x%08x = %a) = 0x%04x, outside its rounding interval (seed 0x%llx)", what, x, (double)f, h,
                  (unsigned long long)seed);
    }
}

Test(graph_dtype, float_to_half_rounds_to_nearest_even) {
    /* Exponents from far below the subnormal halves to past the overflow boundary. */
    s_check_nearest(ta_float_to_half, ta_half_to_float, 0x7c00, 65536.0, 95, 145, "float_to_half");
}

Test(graph_dtype, float_to_bf16_rounds_to_nearest_even) {
    s_check_nearest(ta_float_to_bf16, ta_bf16_to_float, 0x7f80, ldexp(1.0, 128), 0, 254, "float_to_bf16");
}

Test(graph_dtype, sixteen_bit_round_trip_every_pattern) {
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t want = (uint16_t)h;
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) want |= 0x200; /* NaN: comes back quiet */
        cr_assert_eq(ta_float_to_half(ta_half_to_float((uint16_t)h)), want, "half 0x%04x", h);
        want = (uint16_t)h;
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) want |= 0x40;
        cr_assert_eq(ta_float_to_bf16(ta_bf16_to_float((uint16_t)h)), want, "bf16 0x%04x", h);
    }
}

/* ---------------------------------------------------------------- value conversion */

Test(graph_dtype, convert_matches_golden_for_every_pair) {
    int nfail = 0, ncase = 0;
    int seen[GOLDEN_NDTYPES] = {0};
    for (size_t i = 0; i < S_NGOLDEN(golden_conv); i++) {
        const golden_conv_t *g = &golden_conv[i];
        unsigned char in[8] = {0};
        s_put_bits(g->src, in, g->bits);
        ta_value_t v = ta_value_load(g->src, in);
        seen[g->src]++;
        for (int d = 0; d < TACT_DTYPE_COUNT; d++, ncase++) {
            uint64_t got = s_stored((tact_dtype)d, ta_value_convert((tact_dtype)d, g->src, v));
            if (got != g->out[d] && nfail++ < S_MAX_REPORTS)
                cr_expect(0, "convert %s 0x%llx -> %s = 0x%llx, want 0x%llx (golden seed 0x%x)",
                          golden_names[g->src], (unsigned long long)g->bits, golden_names[d],
                          (unsigned long long)got, (unsigned long long)g->out[d], GOLDEN_SEED);
        }
    }
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) cr_expect(seen[d] >= 2, "no golden values for %s", golden_names[d]);
    cr_assert_eq(nfail, 0, "%d of %d conversions differ (golden seed 0x%x)", nfail, ncase, GOLDEN_SEED);
}

/* ta_value_from_double is ta_value_convert from float64; as_double reads any value. */
Test(graph_dtype, from_double_agrees_with_convert) {
    int nfail = 0;
    for (size_t i = 0; i < S_NGOLDEN(golden_conv); i++) {
        const golden_conv_t *g = &golden_conv[i];
        if (g->src != TACT_FLOAT64) continue;
        for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
            uint64_t got = s_stored((tact_dtype)d, ta_value_from_double((tact_dtype)d, s_f64_from(g->bits)));
            if (got != g->out[d] && nfail++ < S_MAX_REPORTS)
                cr_expect(0, "from_double(%s, 0x%llx) = 0x%llx, want 0x%llx (golden seed 0x%x)", golden_names[d],
                          (unsigned long long)g->bits, (unsigned long long)got, (unsigned long long)g->out[d],
                          GOLDEN_SEED);
        }
    }
    cr_assert_eq(nfail, 0);
}

Test(graph_dtype, as_double_reads_every_dtype) {
    ta_value_t b = {0};
    b.b = 1;
    cr_expect_eq(ta_value_as_double(TACT_BOOL, b), 1.0);
    cr_expect_eq(ta_value_as_double(TACT_INT8, s_val_i(-128)), -128.0);
    cr_expect_eq(ta_value_as_double(TACT_UINT64, s_val_u(1ull << 53)), 9007199254740992.0);
    cr_expect_eq(ta_value_as_double(TACT_INT64, s_val_i(-(1ll << 53))), -9007199254740992.0);
    ta_value_t h = {0};
    h.h = 0x3e00;
    cr_expect_eq(ta_value_as_double(TACT_FLOAT16, h), 1.5);
    h.h = 0xc0a0;
    cr_expect_eq(ta_value_as_double(TACT_BFLOAT16, h), -5.0);
    cr_expect_eq(ta_value_as_double(TACT_FLOAT32, s_val_f(0.25)), 0.25);
    cr_expect_eq(ta_value_as_double(TACT_FLOAT64, s_val_f(0.1)), 0.1);
    cr_expect(isnan(ta_value_as_double(TACT_FLOAT64, s_val_f(NAN))));
}

/* The header's float -> int rules, spelled out (the golden table holds the same cases). */
Test(graph_dtype, convert_float_to_int_corners) {
    cr_expect_eq(ta_value_from_double(TACT_INT32, -2.9).i, -2, "truncates toward zero");
    cr_expect_eq(ta_value_from_double(TACT_UINT8, -0.9).u, 0);
    cr_expect_eq(ta_value_from_double(TACT_INT8, 200.5).i, -56, "out of range wraps after (int64_t)");
    cr_expect_eq(ta_value_from_double(TACT_UINT8, -1.0).u, 255);
    cr_expect_eq(ta_value_from_double(TACT_INT32, 3e9).i, -1294967296);
    cr_expect_eq(ta_value_from_double(TACT_INT64, NAN).i, 0, "NaN gives 0");
    cr_expect_eq(ta_value_from_double(TACT_UINT16, -NAN).u, 0);
    cr_expect_eq(ta_value_from_double(TACT_INT64, 1e30).i, INT64_MAX, "saturates at the int64 range");
    cr_expect_eq(ta_value_from_double(TACT_INT64, -INFINITY).i, INT64_MIN);
    cr_expect_eq(ta_value_from_double(TACT_INT32, 1e30).i, -1, "INT64_MAX wrapped to 32 bits");
    cr_expect_eq(ta_value_from_double(TACT_INT16, -1e30).i, 0, "INT64_MIN wrapped to 16 bits");
    cr_expect_eq(ta_value_from_double(TACT_UINT64, 1e19).u, 10000000000000000000ull, "in uint64 range");
    cr_expect_eq(ta_value_from_double(TACT_UINT64, 0x1p64).u, (uint64_t)INT64_MAX, "past uint64: int64 saturation");
    cr_expect_eq(ta_value_from_double(TACT_UINT64, -2.0).u, ~0ull - 1);
    cr_expect_eq(ta_value_from_double(TACT_BOOL, NAN).b, 1, "NaN != 0");
    cr_expect_eq(ta_value_from_double(TACT_BOOL, -0.0).b, 0);
}

Test(graph_dtype, convert_int_and_float_corners) {
    cr_expect_eq(ta_value_convert(TACT_INT8, TACT_INT64, s_val_i(0x1ff)).i, -1, "wraps two's complement");
    cr_expect_eq(ta_value_convert(TACT_INT64, TACT_UINT64, s_val_u(~0ull)).i, -1);
    cr_expect_eq(ta_value_convert(TACT_UINT32, TACT_INT8, s_val_i(-1)).u, 0xffffffffu);
    /* 2^60 + 2^36 + 1 rounds once to float32 (up); through double it would tie down to 2^60. */
    ta_value_t f = ta_value_convert(TACT_FLOAT32, TACT_INT64, s_val_i((1ll << 60) + (1ll << 36) + 1));
    cr_expect_eq(f.f, 0x1p60 + 0x1p37);
    /* float64 -> float16 rounds through float32: 1 + 2^-11 + 2^-30 ties down, not up. */
    cr_expect_eq(ta_value_from_double(TACT_FLOAT16, 1 + 0x1p-11 + 0x1p-30).h, 0x3c00);
    cr_expect_eq(ta_value_from_double(TACT_FLOAT32, 0x1.ffffffp127).f, INFINITY, "tie past FLT_MAX");
    cr_expect_eq(ta_value_from_double(TACT_FLOAT32, -0x1p-1000).f, 0.0);
    cr_expect(signbit(ta_value_from_double(TACT_FLOAT32, -0x1p-1000).f));
    ta_value_t nan = s_val_f(s_f64_from(0x7ff4000000000001ull)); /* a signalling NaN */
    cr_expect_eq(s_stored(TACT_FLOAT32, ta_value_convert(TACT_FLOAT32, TACT_FLOAT64, nan)), 0x7fe00000u);
    cr_expect_eq(ta_value_convert(TACT_FLOAT16, TACT_FLOAT64, nan).h, 0x7f00);
}

Test(graph_dtype, convert_to_same_dtype_is_identity) {
    uint64_t seed = tu_seed(), rng = seed;
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
        for (int i = 0; i < 2000; i++) {
            unsigned char buf[8] = {0};
            uint64_t bits = tu_rand(&rng);
            if (d == TACT_BOOL) bits &= 1;
            s_put_bits((tact_dtype)d, buf, bits);
            ta_value_t v = ta_value_load((tact_dtype)d, buf);
            uint64_t got = s_stored((tact_dtype)d, ta_value_convert((tact_dtype)d, (tact_dtype)d, v));
            cr_assert_eq(got, s_get_bits((tact_dtype)d, buf), "%s 0x%llx changed (seed 0x%llx)", golden_names[d],
                         (unsigned long long)bits, (unsigned long long)seed);
        }
    }
    /* Signalling NaNs too: a cast to the same type does not touch them. */
    ta_value_t h = {0};
    h.h = 0x7c01;
    cr_expect_eq(ta_value_convert(TACT_FLOAT16, TACT_FLOAT16, h).h, 0x7c01);
}

/* A value outside its dtype's range is first brought to what storage would hold. */
Test(graph_dtype, convert_canonicalizes_its_input) {
    cr_expect_eq(ta_value_convert(TACT_INT32, TACT_INT8, s_val_i(300)).i, 44);
    cr_expect_eq(ta_value_convert(TACT_INT32, TACT_UINT8, s_val_u(0x1ff)).i, 255);
    ta_value_t b = {0};
    b.b = 7;
    cr_expect_eq(ta_value_convert(TACT_INT32, TACT_BOOL, b).i, 1);
    cr_expect_eq(ta_value_convert(TACT_FLOAT64, TACT_FLOAT32, s_val_f(0.1)).f, (double)0.1f);
}

/* ---------------------------------------------------------------- storage */

Test(graph_dtype, load_store_round_trip_every_bit_pattern_kind) {
    uint64_t seed = tu_seed(), rng = seed;
    static const uint64_t specials[] = {0, 1, 0x7f800001u, 0xffa00000u, 0x7c01, 0x7f81, 0x7ff0000000000001ull,
                                        0x8000000000000000ull, ~0ull};
    for (int d = 1; d < TACT_DTYPE_COUNT; d++) { /* bool is checked below: it normalizes */
        for (int i = 0; i < 5000; i++) {
            uint64_t bits = i < (int)S_NGOLDEN(specials) ? specials[i] : tu_rand(&rng);
            unsigned char in[8] = {0}, out[8] = {0};
            s_put_bits((tact_dtype)d, in, bits);
            ta_value_store((tact_dtype)d, out, ta_value_load((tact_dtype)d, in));
            cr_assert_eq(memcmp(in, out, 8), 0, "%s 0x%llx does not round-trip (seed 0x%llx)", golden_names[d],
                         (unsigned long long)bits, (unsigned long long)seed);
        }
    }
}

Test(graph_dtype, load_sign_extends_and_stores_low_bytes) {
    unsigned char buf[8] = {0x80, 0xff, 0x00, 0x80, 0, 0, 0, 0};
    cr_expect_eq(ta_value_load(TACT_INT8, buf).i, -128);
    cr_expect_eq(ta_value_load(TACT_UINT8, buf).u, 128);
    cr_expect_eq(ta_value_load(TACT_INT16, buf).i, (int16_t)0xff80);
    cr_expect_eq(ta_value_load(TACT_INT32, buf).i, (int32_t)0x8000ff80u);
    cr_expect_eq(ta_value_load(TACT_UINT32, buf).u, 0x8000ff80u);
    unsigned char out[8] = {0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa};
    ta_value_store(TACT_INT16, out, s_val_i(-2));
    cr_expect_eq(s_get_bits(TACT_INT16, out), 0xfffe);
    cr_expect_eq(out[2], 0xaa, "a store writes exactly the element's bytes");
    ta_value_store(TACT_FLOAT32, out, s_val_f(1.5));
    cr_expect_eq(s_get_bits(TACT_FLOAT32, out), 0x3fc00000u);
    cr_expect_eq(out[4], 0xaa);
}

Test(graph_dtype, load_store_unaligned) {
    uint64_t seed = tu_seed(), rng = seed;
    for (int d = 1; d < TACT_DTYPE_COUNT; d++)
        for (size_t off = 1; off < 8; off++) {
            unsigned char buf[24] = {0}, ref[8] = {0};
            uint64_t bits = tu_rand(&rng);
            s_put_bits((tact_dtype)d, ref, bits);
            memcpy(buf + off, ref, ta_dtype_size((tact_dtype)d));
            ta_value_t v = ta_value_load((tact_dtype)d, buf + off);
            memset(buf, 0, sizeof buf);
            ta_value_store((tact_dtype)d, buf + off + 8, v);
            cr_assert_eq(memcmp(buf + off + 8, ref, ta_dtype_size((tact_dtype)d)), 0,
                         "%s at offset %zu (seed 0x%llx)", golden_names[d], off, (unsigned long long)seed);
        }
}

Test(graph_dtype, bool_loads_nonzero_bytes_as_true) {
    for (int byte = 0; byte < 256; byte++) {
        unsigned char in = (unsigned char)byte, out = 0xaa;
        ta_value_t v = ta_value_load(TACT_BOOL, &in);
        cr_expect_eq(v.b, byte != 0, "byte %d", byte);
        ta_value_store(TACT_BOOL, &out, v);
        cr_expect_eq(out, byte != 0, "byte %d", byte);
    }
}

Test(graph_dtype, same_compares_stored_bits) {
    cr_expect(ta_value_same(TACT_FLOAT64, s_val_f(1.0), s_val_f(1.0)));
    cr_expect_not(ta_value_same(TACT_FLOAT64, s_val_f(0.0), s_val_f(-0.0)), "signed zeros differ");
    cr_expect(ta_value_same(TACT_FLOAT64, s_val_f(s_f64_from(0x7ff8000000000001ull)),
                            s_val_f(s_f64_from(0x7ff8000000000001ull))),
              "a NaN is the same as itself");
    cr_expect_not(ta_value_same(TACT_FLOAT64, s_val_f(s_f64_from(0x7ff8000000000001ull)),
                                s_val_f(s_f64_from(0x7ff8000000000002ull))),
                  "NaN payloads are compared");
    ta_value_t a = {0}, b = {0};
    a.h = 0x7e00, b.h = 0x7e01;
    cr_expect_not(ta_value_same(TACT_FLOAT16, a, b));
    cr_expect(ta_value_same(TACT_INT8, s_val_i(-1), s_val_i(255)), "same element bits");
    cr_expect_not(ta_value_same(TACT_INT16, s_val_i(-1), s_val_i(255)));
    a.b = 1, b.b = 9;
    cr_expect(ta_value_same(TACT_BOOL, a, b), "both store as true");
}
