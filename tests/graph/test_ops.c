/* test_ops.c - every primitive op on every dtype it supports against naive C references, through the public API. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dtype.h"
#include "tact.h"
#include "testutil.h"

/*
 * How the checks work: each Test builds host-side reference tensors (s_ref_t,
 * one ta_value_t per element), uploads them with tact_from_data, applies the
 * op through the public API and records the expected result.  All results of
 * a Test are realized by one tact_realize call (the compiler pool builds the
 * kernels side by side), then read back with tact_read.
 *
 * References compute in the precision the semantics prescribe: float32 in
 * float, float64 in double, float16/bfloat16 in float rounded to nearest even
 * after every op; ints wrap.  They are written in double and rounded to the
 * working precision, which for + - * / and sqrt is bit-identical to float
 * arithmetic (53 >= 2*24+2: double rounding is innocuous).  Comparisons are
 * exact, except that any NaN matches any NaN (no payload is specified; bitcast
 * alone compares every bit) and exp2/log2/sin, which have a stated ulp
 * tolerance (s_ulps).
 *
 * Behaviours nothing specifies, decided as the reference (tinygrad) does where it can:
 * - max/maximum: NaN from either side wins (the CPU device's stated rule), else
 *   a > b ? a : b as the reference's C renderer, so max(+0, -0) is -0.
 * - sub is a + (-b), and -b on bools is logical not (tensor.py neg): bool sub
 *   is a | !b; bool add is or, bool mul is and.
 * - idiv/mod on bools: as the unsigned ints 0 and 1 (division by false gives 0).
 * - idiv/mod on floats (the reference has none): trunc(x/y) with x/y in the
 *   working precision, and fmod, per the header's "C semantics".  No zero
 *   divisors there: "gives 0" is only pinned for ints (C gives inf/NaN).
 * - bitcast to bool: only from the bytes 0 and 1 (other bytes are no bool).
 */

enum { S_MAXD = 8, S_MAX_CHECKS = 320, S_RANDOM = 64, S_SHOWN = 4 };

/* ------------------------------------------------------ reference tensors */

typedef struct {
    tact_dtype d;
    int ndim;
    int64_t shape[S_MAXD];
    int64_t n;
    ta_value_t *v; /* row-major */
} s_ref_t;

typedef struct {
    char label[96];
    tact_tensor *t;
    s_ref_t want;
    int ulps; /* 0: exact (NaN matches NaN); > 0: that many ulps; < 0: every bit */
    int nin;
    s_ref_t in[3]; /* the operands at each output position, for messages */
} s_check_t;

typedef struct {
    tact_ctx *ctx;
    uint64_t seed, rng;
    int n;
    s_check_t c[S_MAX_CHECKS];
    void **owned;
    size_t nowned, cap;
} s_batch_t;

typedef enum {
    O_ADD, O_SUB, O_MUL, O_DIV, O_IDIV, O_MOD, O_MAX, O_CMPLT, O_CMPNE, O_XOR, O_AND, O_OR, O_SHL, O_SHR,
    O_EXP2, O_LOG2, O_SIN, O_SQRT, O_RECIP, O_NEG
} s_op_t;

static const struct {
    const char *name;
    tact_tensor *(*bin)(tact_tensor *, tact_tensor *);
    tact_tensor *(*un)(tact_tensor *);
} s_ops[] = {
    {"add", tact_add, NULL},     {"sub", tact_sub, NULL},       {"mul", tact_mul, NULL},     {"div", tact_div, NULL},
    {"idiv", tact_idiv, NULL},   {"mod", tact_mod, NULL},       {"maximum", tact_maximum, NULL},
    {"cmplt", tact_cmplt, NULL}, {"cmpne", tact_cmpne, NULL},   {"xor", tact_xor, NULL},     {"and", tact_and, NULL},
    {"or", tact_or, NULL},       {"shl", tact_shl, NULL},       {"shr", tact_shr, NULL},     {"exp2", NULL, tact_exp2},
    {"log2", NULL, tact_log2},   {"sin", NULL, tact_sin},       {"sqrt", NULL, tact_sqrt},   {"recip", NULL, tact_recip},
    {"neg", NULL, tact_neg},
}; /* in s_op_t's order */

/* Memory the batch frees when the Test ends. */
static void *s_alloc(s_batch_t *b, size_t bytes) {
    if (b->nowned == b->cap) b->cap = b->cap ? 2 * b->cap : 256, b->owned = realloc(b->owned, b->cap * sizeof *b->owned);
    void *p = calloc(1, bytes ? bytes : 1);
    cr_assert(p && b->owned, "out of memory");
    return b->owned[b->nowned++] = p;
}

static s_ref_t s_ref(s_batch_t *b, tact_dtype d, int ndim, const int64_t *shape) {
    s_ref_t r = {d, ndim, {0}, 1, NULL};
    for (int k = 0; k < ndim; k++) r.shape[k] = shape[k], r.n *= shape[k];
    r.v = s_alloc(b, (size_t)r.n * sizeof *r.v);
    return r;
}

static s_ref_t s_reshape(s_ref_t r, int ndim, const int64_t *shape) {
    r.ndim = ndim;
    for (int k = 0; k < ndim; k++) r.shape[k] = shape[k];
    return r;
}

static void s_unravel(int ndim, const int64_t *shape, int64_t flat, int64_t *idx) {
    for (int k = ndim - 1; k >= 0; k--) {
        idx[k] = shape[k] ? flat % shape[k] : 0;
        flat = shape[k] ? flat / shape[k] : 0;
    }
}

static int64_t s_ravel(int ndim, const int64_t *shape, const int64_t *idx) {
    int64_t f = 0;
    for (int k = 0; k < ndim; k++) f = f * shape[k] + idx[k];
    return f;
}

static tact_tensor *s_upload(s_batch_t *b, const s_ref_t *r) {
    size_t es = ta_dtype_size(r->d);
    uint8_t *buf = calloc((size_t)r->n * es + 1, 1);
    for (int64_t i = 0; i < r->n; i++) ta_value_store(r->d, buf + i * es, r->v[i]);
    tact_tensor *t = tact_from_data(b->ctx, r->d, r->ndim, r->shape, buf);
    free(buf);
    return t;
}

/* ------------------------------------------------------- scalar semantics */

static int s_signed(tact_dtype d) { return ta_dtype_is_int(d) && !ta_dtype_is_unsigned(d); }
static double s_dbl(tact_dtype d, ta_value_t v) { return ta_value_as_double(d, v); }
static ta_value_t s_flt(tact_dtype d, double x) { return ta_value_from_double(d, x); }
static uint64_t s_bits(tact_dtype d, ta_value_t v) { return d == TACT_BOOL ? v.b : s_signed(d) ? (uint64_t)v.i : v.u; }

/* The value of dtype d whose two's complement pattern is bits, wrapped to the width. */
static ta_value_t s_int(tact_dtype d, uint64_t bits) {
    ta_value_t v = {.u = bits};
    return ta_value_convert(d, TACT_UINT64, v);
}

/* Rounds x to d's precision as the CPU device does (16-bit floats through float). */
static double s_round(tact_dtype d, double x) {
    if (d == TACT_FLOAT64) return x;
    float f = (float)x;
    if (d == TACT_FLOAT16) return ta_half_to_float(ta_float_to_half(f));
    if (d == TACT_BFLOAT16) return ta_bf16_to_float(ta_float_to_bf16(f));
    return f;
}

static ta_value_t s_ref_float(s_op_t op, tact_dtype d, double x, double y) {
    double q = d == TACT_FLOAT64 ? x / y : (float)(x / y);
    switch (op) {
    case O_ADD: return s_flt(d, s_round(d, x + y));
    case O_SUB: return s_flt(d, s_round(d, x + -y));
    case O_MUL: return s_flt(d, s_round(d, x * y));
    case O_DIV: return s_flt(d, s_round(d, x * s_round(d, 1.0 / y))); /* x * recip(y), as the reference */
    case O_IDIV: return s_flt(d, s_round(d, trunc(q)));
    case O_MOD: return s_flt(d, s_round(d, fmod(x, y)));
    case O_MAX: return s_flt(d, isnan(x) ? x : isnan(y) ? y : x > y ? x : y);
    case O_CMPLT: return s_int(TACT_BOOL, x < y);
    case O_CMPNE: return s_int(TACT_BOOL, x != y);
    default: cr_assert_fail("%s is no float op", s_ops[op].name); return s_flt(d, 0);
    }
}

static ta_value_t s_ref_int(s_op_t op, tact_dtype d, uint64_t x, uint64_t y) {
    int sg = s_signed(d);
    int64_t sx = (int64_t)x, sy = (int64_t)y;
    unsigned sh = (unsigned)(y & (ta_dtype_size(d) * 8 - 1)); /* the count is masked to the width */
    switch (op) {
    case O_ADD: return s_int(d, x + y);
    case O_SUB: return s_int(d, d == TACT_BOOL ? (x | !y) : x - y);
    case O_MUL: return s_int(d, x * y);
    case O_IDIV: return s_int(d, sg ? (sy == 0 ? 0 : sy == -1 ? 0 - x : (uint64_t)(sx / sy)) : (y ? x / y : 0));
    case O_MOD: return s_int(d, sg ? (sy == 0 || sy == -1 ? 0 : (uint64_t)(sx % sy)) : (y ? x % y : 0));
    case O_MAX: return s_int(d, (sg ? sx > sy : x > y) ? x : y);
    case O_CMPLT: return s_int(TACT_BOOL, sg ? sx < sy : x < y);
    case O_CMPNE: return s_int(TACT_BOOL, x != y);
    case O_XOR: return s_int(d, x ^ y);
    case O_AND: return s_int(d, x & y);
    case O_OR: return s_int(d, x | y);
    case O_SHL: return s_int(d, x << sh);
    case O_SHR: return s_int(d, sg ? (uint64_t)(sx >> sh) : x >> sh);
    default: cr_assert_fail("%s is no int op", s_ops[op].name); return s_int(d, 0);
    }
}

/* op(x, y) on two values of dtype c; div casts ints and bools to float32 first. */
static ta_value_t s_ref_bin(s_op_t op, tact_dtype c, ta_value_t x, ta_value_t y) {
    if (op == O_DIV && !ta_dtype_is_float(c)) {
        x = ta_value_convert(TACT_FLOAT32, c, x);
        y = ta_value_convert(TACT_FLOAT32, c, y);
        c = TACT_FLOAT32;
    }
    if (ta_dtype_is_float(c)) return s_ref_float(op, c, s_dbl(c, x), s_dbl(c, y));
    return s_ref_int(op, c, s_bits(c, x), s_bits(c, y));
}

static tact_dtype s_bin_dtype(s_op_t op, tact_dtype c) {
    if (op == O_CMPLT || op == O_CMPNE) return TACT_BOOL;
    return op == O_DIV && !ta_dtype_is_float(c) ? TACT_FLOAT32 : c;
}

/* op(x) on a value of dtype d; float ops cast ints and bools to float32 first. */
static ta_value_t s_ref_un(s_op_t op, tact_dtype d, ta_value_t x) {
    if (op == O_NEG) {
        if (ta_dtype_is_float(d)) return s_flt(d, -s_dbl(d, x));
        return s_int(d, d == TACT_BOOL ? !x.b : 0 - s_bits(d, x));
    }
    if (!ta_dtype_is_float(d)) x = ta_value_convert(TACT_FLOAT32, d, x), d = TACT_FLOAT32;
    double v = s_dbl(d, x);
    switch (op) {
    case O_EXP2: return s_flt(d, exp2(v));
    case O_LOG2: return s_flt(d, log2(v));
    case O_SIN: return s_flt(d, sin(v));
    case O_SQRT: return s_flt(d, s_round(d, sqrt(v)));
    default: return s_flt(d, s_round(d, 1.0 / v));
    }
}

/*
 * The tolerance of a unary op on d.  exp2/log2/sin are compared with libm in
 * double: the device calls its own exp2 and glibc's log2f/sinf, all within
 * 1 ulp of the true value, so 4 float32 ulps is generous; 16-bit results are exp2f's
 * float rounded again, which can land one 16-bit ulp from the double
 * result's rounding; float64 calls the same libm (2 ulps allows a
 * different libm build).  Everything else is exact.
 */
static int s_ulps(s_op_t op, tact_dtype d) {
    if (op != O_EXP2 && op != O_LOG2 && op != O_SIN) return 0;
    return d == TACT_FLOAT16 || d == TACT_BFLOAT16 ? 1 : d == TACT_FLOAT64 ? 2 : 4;
}

/* ------------------------------------------------------------ inputs */

typedef enum { D_ANY, D_UNIT, D_EXP, D_LOG, D_SIN, D_DYADIC } s_dist_t;

static double s_unit(uint64_t *rng) { return (double)(tu_rand(rng) >> 11) / 9007199254740992.0; }

/* One random value of d: ints mix full-width patterns and small values; floats follow dist. */
static ta_value_t s_random(s_batch_t *b, tact_dtype d, s_dist_t dist) {
    uint64_t r = tu_rand(&b->rng);
    if (d == TACT_BOOL) return s_int(d, r >> 63);
    if (!ta_dtype_is_float(d)) return s_int(d, r & 1 ? tu_rand(&b->rng) : (uint64_t)((int64_t)(r % 201) - 100));
    double u = s_unit(&b->rng), x;
    switch (dist) {
    case D_UNIT: x = u * 8 - 4; break;
    case D_EXP: x = u * 60 - 30; break;
    case D_LOG: x = exp2(u * 60 - 30); break;
    case D_SIN: x = u * 40 - 20; break;
    case D_DYADIC: x = (double)((int64_t)(r % 129) - 64) / 8; break; /* sums of these are exact in any order */
    default: x = r & 1 ? u * 8 - 4 : ldexp(1 + u, (int)(tu_rand(&b->rng) % 49) - 24) * (r & 2 ? -1 : 1);
    }
    return s_flt(d, x);
}

/* The corner values of d; returns how many (at most 16). */
static int s_specials(tact_dtype d, ta_value_t *out) {
    int k = 0;
    if (d == TACT_BOOL) return out[0] = s_int(d, 0), out[1] = s_int(d, 1), 2;
    if (ta_dtype_is_int(d)) {
        static const int64_t small[] = {0, 1, -1, 2, -3, 7, -7, 8, 64};
        uint64_t top = 1ull << (ta_dtype_size(d) * 8 - 1); /* MIN, or the top bit when unsigned */
        for (size_t i = 0; i < sizeof small / sizeof *small; i++) out[k++] = s_int(d, (uint64_t)small[i]);
        out[k++] = s_int(d, top), out[k++] = s_int(d, top - 1), out[k++] = s_int(d, top + 1);
        return k;
    }
    static const double vals[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1, -1, 0.5, -2.5, 3};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) out[k++] = s_flt(d, vals[i]);
    int mant = d == TACT_FLOAT16 ? 10 : d == TACT_BFLOAT16 ? 7 : d == TACT_FLOAT32 ? 23 : 52;
    out[k++] = s_flt(d, ldexp(1, -mant - 1)); /* 1 + this is a tie */
    out[k++] = s_flt(d, 1 + ldexp(1, -mant));
    ta_value_t big = s_int(TACT_UINT64, 0), tiny = big; /* the largest finite value, the smallest subnormal */
    if (d == TACT_FLOAT16) big.h = 0x7bff, tiny.h = 1;
    else if (d == TACT_BFLOAT16) big.h = 0x7f7f, tiny.h = 1;
    else if (d == TACT_FLOAT32) big.f = FLT_MAX, tiny.f = ldexp(1, -149);
    else big.f = DBL_MAX, tiny.f = ldexp(1, -1074);
    return out[k++] = big, out[k++] = tiny, k;
}

/* A 1-D input: d's corner values, then extra, then 2*S_RANDOM random ones. */
static s_ref_t s_values(s_batch_t *b, tact_dtype d, s_dist_t dist, int nextra, const ta_value_t *extra) {
    ta_value_t sp[16];
    int k = s_specials(d, sp);
    int64_t n = k + nextra + 2 * S_RANDOM;
    s_ref_t x = s_ref(b, d, 1, &n);
    for (int64_t i = 0; i < n; i++) x.v[i] = i < k ? sp[i] : i < k + nextra ? extra[i - k] : s_random(b, d, dist);
    return x;
}

/* Two 1-D inputs holding every pair of d's corner values, then random pairs. */
static void s_pairs(s_batch_t *b, tact_dtype d, s_ref_t *x, s_ref_t *y) {
    ta_value_t sp[16];
    int k = s_specials(d, sp);
    int64_t n = k * k + S_RANDOM;
    *x = s_ref(b, d, 1, &n), *y = s_ref(b, d, 1, &n);
    for (int64_t i = 0; i < n; i++) {
        x->v[i] = i < k * k ? sp[i / k] : s_random(b, d, D_ANY);
        y->v[i] = i < k * k ? sp[i % k] : s_random(b, d, D_ANY);
    }
}

static s_ref_t s_random_ref(s_batch_t *b, tact_dtype d, s_dist_t dist, int ndim, const int64_t *shape) {
    s_ref_t x = s_ref(b, d, ndim, shape);
    for (int64_t i = 0; i < x.n; i++) x.v[i] = s_random(b, d, dist);
    return x;
}

/* A random input uploaded; *x gets its values. */
static tact_tensor *s_input(s_batch_t *b, s_ref_t *x, tact_dtype d, s_dist_t dist, int ndim, const int64_t *shape) {
    *x = s_random_ref(b, d, dist, ndim, shape);
    return s_upload(b, x);
}

/* --------------------------------------------------------------- checks */

__attribute__((format(printf, 5, 6))) static s_check_t *s_expect(s_batch_t *b, tact_tensor *t, s_ref_t want, int ulps,
                                                                 const char *fmt, ...) {
    cr_assert(b->n < S_MAX_CHECKS, "too many checks in one batch");
    s_check_t *c = &b->c[b->n++];
    memset(c, 0, sizeof *c);
    c->t = t, c->want = want, c->ulps = ulps;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->label, sizeof c->label, fmt, ap);
    va_end(ap);
    return c;
}

/* The element's bits (little-endian host), as many as d's size. */
static uint64_t s_raw(tact_dtype d, ta_value_t v) {
    uint8_t p[8] = {0};
    uint64_t u = 0;
    ta_value_store(d, p, v);
    memcpy(&u, p, ta_dtype_size(d));
    return u;
}

static const char *s_fmt(tact_dtype d, ta_value_t v, char *buf, size_t len) {
    if (ta_dtype_is_float(d))
        snprintf(buf, len, "%.17g (%s 0x%0*" PRIx64 ")", s_dbl(d, v), ta_dtype_name(d), (int)ta_dtype_size(d) * 2, s_raw(d, v));
    else if (d == TACT_BOOL) snprintf(buf, len, "%s", v.b ? "true" : "false");
    else if (s_signed(d)) snprintf(buf, len, "%" PRId64 " (%s)", v.i, ta_dtype_name(d));
    else snprintf(buf, len, "%" PRIu64 " (%s)", v.u, ta_dtype_name(d));
    return buf;
}

/* Float patterns as sign-magnitude integers, so neighbours differ by one. */
static int64_t s_ordered(tact_dtype d, ta_value_t v) {
    uint64_t u = s_raw(d, v), sign = 1ull << (ta_dtype_size(d) * 8 - 1);
    return u & sign ? -(int64_t)(u & ~sign) : (int64_t)u;
}

static int s_same(tact_dtype d, ta_value_t got, ta_value_t want, int ulps) {
    if (ta_value_same(d, got, want)) return 1;
    if (ulps < 0 || !ta_dtype_is_float(d)) return 0;
    int gn = isnan(s_dbl(d, got)), wn = isnan(s_dbl(d, want));
    if (gn || wn) return gn && wn;
    int64_t g = s_ordered(d, got), w = s_ordered(d, want);
    return (g > w ? (uint64_t)g - (uint64_t)w : (uint64_t)w - (uint64_t)g) <= (uint64_t)ulps;
}

static void s_compare(s_batch_t *b, const s_check_t *c) {
    unsigned long long seed = (unsigned long long)b->seed;
    const s_ref_t *w = &c->want;
    int64_t shape[S_MAXD] = {0};
    int ndim = tact_ndim(c->t), same = ndim == w->ndim, ok = tact_status_of(c->t) == TACT_OK;
    if (same) tact_shape(c->t, shape);
    for (int k = 0; same && k < ndim; k++) same = shape[k] == w->shape[k];
    if (!ok) cr_expect_fail("seed %#llx: %s: error tensor: %s", seed, c->label, tact_error_message(c->t));
    else if (tact_dtype_of(c->t) != w->d)
        cr_expect_fail("seed %#llx: %s: dtype %s, want %s", seed, c->label, tact_dtype_name(tact_dtype_of(c->t)),
                       tact_dtype_name(w->d));
    else if (!same)
        cr_expect_fail("seed %#llx: %s: shape of %d dims (dim 0: %" PRId64 "), want %d dims (dim 0: %" PRId64 ")", seed,
                       c->label, ndim, tact_dim(c->t, 0), w->ndim, w->ndim ? w->shape[0] : -1);
    if (!ok || !same || tact_dtype_of(c->t) != w->d) return;
    size_t es = ta_dtype_size(w->d);
    uint8_t *got = calloc((size_t)w->n * es + 1, 1);
    int rc = tact_read(c->t, got, (size_t)w->n * es);
    if (rc != TACT_OK)
        cr_expect_fail("seed %#llx: %s: read: %s: %s", seed, c->label, tact_strerror(rc), tact_ctx_error(b->ctx));
    int64_t bad = 0;
    for (int64_t i = 0; rc == TACT_OK && i < w->n; i++) {
        ta_value_t g = ta_value_load(w->d, got + i * es);
        if (s_same(w->d, g, w->v[i], c->ulps)) continue;
        if (bad++ >= S_SHOWN) continue;
        char in[3][80] = {"", "", ""}, gs[80], ws[80];
        for (int k = 0; k < c->nin; k++) s_fmt(c->in[k].d, c->in[k].v[i], in[k], sizeof in[k]);
        cr_expect_fail("seed %#llx: %s: element %" PRId64 ": inputs (%s%s%s%s%s): got %s, want %s%s", seed, c->label, i,
                       in[0], c->nin > 1 ? ", " : "", in[1], c->nin > 2 ? ", " : "", in[2], s_fmt(w->d, g, gs, sizeof gs),
                       s_fmt(w->d, w->v[i], ws, sizeof ws), c->ulps > 0 ? " (within the ulps allowed)" : "");
    }
    if (bad) cr_expect_fail("seed %#llx: %s: %" PRId64 " of %" PRId64 " elements differ", seed, c->label, bad, w->n);
    free(got);
}

/* Realizes every pending result with one call, then checks each. */
static void s_run(s_batch_t *b) {
    tact_tensor **ts = calloc((size_t)b->n + 1, sizeof *ts);
    int m = 0;
    for (int i = 0; i < b->n; i++)
        if (tact_status_of(b->c[i].t) == TACT_OK) ts[m++] = b->c[i].t;
    int rc = tact_realize(b->ctx, m, ts);
    /* On failure the reads below realize each result alone and name the culprit. */
    cr_expect_eq(rc, TACT_OK, "seed %#llx: realizing %d results: %s", (unsigned long long)b->seed, m, tact_ctx_error(b->ctx));
    for (int i = 0; i < b->n; i++) s_compare(b, &b->c[i]);
    free(ts);
    b->n = 0;
}

static s_batch_t *s_begin(void) {
    s_batch_t *b = calloc(1, sizeof *b);
    cr_assert(b, "out of memory");
    b->seed = b->rng = tu_seed();
    int rc = tact_ctx_open(&b->ctx, NULL);
    cr_assert_eq(rc, TACT_OK, "open: %s", tact_last_open_error());
    return b;
}

static void s_end(s_batch_t *b) {
    s_run(b);
    for (size_t i = 0; i < b->nowned; i++) free(b->owned[i]);
    free(b->owned);
    cr_assert_eq(tact_ctx_close(&b->ctx), TACT_OK);
    free(b);
}

/* --------------------------------------------------- expected results */

/* Broadcasts the n inputs to their common shape (numpy rules: align right, 1 stretches). */
static void s_broadcast(s_batch_t *b, int n, const s_ref_t *const *in, s_ref_t *out) {
    int ndim = 0;
    int64_t shape[S_MAXD], idx[S_MAXD];
    for (int i = 0; i < n; i++) ndim = in[i]->ndim > ndim ? in[i]->ndim : ndim;
    for (int k = 0; k < ndim; k++) {
        shape[k] = 1;
        for (int i = 0; i < n; i++) {
            int j = k - (ndim - in[i]->ndim);
            if (j >= 0 && in[i]->shape[j] != 1) shape[k] = in[i]->shape[j];
        }
    }
    for (int i = 0; i < n; i++) {
        const s_ref_t *x = in[i];
        out[i] = s_ref(b, x->d, ndim, shape);
        for (int64_t f = 0; f < out[i].n; f++) {
            s_unravel(ndim, shape, f, idx);
            int64_t g = 0;
            for (int k = 0; k < x->ndim; k++) g = g * x->shape[k] + (x->shape[k] == 1 ? 0 : idx[k + ndim - x->ndim]);
            out[i].v[f] = x->v[g];
        }
    }
}

/* Expects t == op(x, y), both converted to dtype c after broadcasting. */
static void s_expect_bin(s_batch_t *b, tact_tensor *t, s_op_t op, const s_ref_t *x, const s_ref_t *y, tact_dtype c,
                         const char *label) {
    s_ref_t in[2];
    s_broadcast(b, 2, (const s_ref_t *[]){x, y}, in);
    s_ref_t want = s_ref(b, s_bin_dtype(op, c), in[0].ndim, in[0].shape);
    for (int64_t i = 0; i < want.n; i++)
        want.v[i] = s_ref_bin(op, c, ta_value_convert(c, x->d, in[0].v[i]), ta_value_convert(c, y->d, in[1].v[i]));
    s_check_t *ch = s_expect(b, t, want, 0, "%s %s", s_ops[op].name, label);
    ch->nin = 2, ch->in[0] = in[0], ch->in[1] = in[1];
}

static s_check_t *s_expect_un(s_batch_t *b, tact_tensor *t, s_op_t op, const s_ref_t *x) {
    tact_dtype out = op == O_NEG || ta_dtype_is_float(x->d) ? x->d : TACT_FLOAT32;
    s_ref_t want = s_ref(b, out, x->ndim, x->shape);
    for (int64_t i = 0; i < x->n; i++) want.v[i] = s_ref_un(op, x->d, x->v[i]);
    s_check_t *c = s_expect(b, t, want, s_ulps(op, out), "%s %s", s_ops[op].name, ta_dtype_name(x->d));
    c->nin = 1, c->in[0] = *x;
    return c;
}

/* where(x, y, z) or mulacc(x, y, z) = x*y+z, the operands converted to c after broadcasting. */
static void s_expect_tern(s_batch_t *b, tact_tensor *t, int where, const s_ref_t *x, const s_ref_t *y, const s_ref_t *z,
                          tact_dtype c, const char *label) {
    s_ref_t in[3];
    s_broadcast(b, 3, (const s_ref_t *[]){x, y, z}, in);
    s_ref_t want = s_ref(b, c, in[0].ndim, in[0].shape);
    for (int64_t i = 0; i < want.n; i++) {
        ta_value_t u = ta_value_convert(c, y->d, in[1].v[i]), v = ta_value_convert(c, z->d, in[2].v[i]);
        ta_value_t a = ta_value_convert(where ? TACT_BOOL : c, x->d, in[0].v[i]);
        if (where) want.v[i] = a.b ? u : v;
        else if (ta_dtype_is_float(c)) /* two roundings: the product, then the sum */
            want.v[i] = s_flt(c, s_round(c, s_round(c, s_dbl(c, a) * s_dbl(c, u)) + s_dbl(c, v)));
        else want.v[i] = s_int(c, s_bits(c, a) * s_bits(c, u) + s_bits(c, v));
    }
    s_check_t *ch = s_expect(b, t, want, 0, "%s %s", where ? "where" : "mulacc", label);
    ch->nin = 3, ch->in[0] = in[0], ch->in[1] = in[1], ch->in[2] = in[2];
}

/* sum_acc_dtype of the reference, written out. */
static tact_dtype s_sum_acc(tact_dtype d) {
    switch (d) {
    case TACT_BOOL: case TACT_INT8: case TACT_INT16: case TACT_INT32: return TACT_INT32;
    case TACT_UINT8: case TACT_UINT16: case TACT_UINT32: return TACT_UINT32;
    case TACT_FLOAT16: case TACT_BFLOAT16: return TACT_FLOAT32;
    default: return d;
    }
}

static unsigned s_mask(int ndim, int naxes, const int *axes) {
    unsigned m = 0;
    for (int i = 0; i < (naxes < 0 ? ndim : naxes); i++) m |= 1u << (naxes < 0 ? i : (axes[i] + ndim) % ndim);
    return m;
}

/* x summed (or maxed) over the axes in mask, left to right in row-major order, in the accumulate dtype. */
static s_ref_t s_ref_reduce(s_batch_t *b, const s_ref_t *x, int sum, unsigned mask, int keepdim) {
    tact_dtype acc = sum ? s_sum_acc(x->d) : x->d;
    int64_t kept[S_MAXD], shape[S_MAXD], idx[S_MAXD];
    int ndim = 0;
    for (int k = 0; k < x->ndim; k++) {
        kept[k] = mask >> k & 1 ? 1 : x->shape[k];
        if (keepdim || !(mask >> k & 1)) shape[ndim++] = kept[k];
    }
    s_ref_t a = s_ref(b, acc, x->ndim, kept);
    /* The identities: 0 for sum; -inf, int min or 0 (false) for max. */
    ta_value_t id = ta_dtype_is_float(acc) ? s_flt(acc, sum ? 0.0 : -INFINITY)
                  : s_int(acc, !sum && s_signed(acc) ? 1ull << (ta_dtype_size(acc) * 8 - 1) : 0);
    for (int64_t o = 0; o < a.n; o++) a.v[o] = id;
    for (int64_t i = 0; i < x->n; i++) {
        s_unravel(x->ndim, x->shape, i, idx);
        for (int k = 0; k < x->ndim; k++)
            if (mask >> k & 1) idx[k] = 0;
        int64_t o = s_ravel(x->ndim, kept, idx);
        a.v[o] = s_ref_bin(sum ? O_ADD : O_MAX, acc, a.v[o], ta_value_convert(acc, x->d, x->v[i]));
    }
    for (int64_t o = 0; ta_dtype_is_float(x->d) && o < a.n; o++) a.v[o] = ta_value_convert(x->d, acc, a.v[o]);
    a.d = ta_dtype_is_float(x->d) ? x->d : acc; /* 16-bit sums are cast back */
    return s_reshape(a, ndim, shape);
}

static void s_expect_reduce(s_batch_t *b, const s_ref_t *x, tact_tensor *tx, int sum, int naxes, const int *axes,
                            int keepdim, const char *what) {
    tact_tensor *t = sum ? tact_sum(tx, naxes, axes, keepdim) : tact_max(tx, naxes, axes, keepdim);
    s_ref_t want = s_ref_reduce(b, x, sum, s_mask(x->ndim, naxes, axes), keepdim);
    s_expect(b, t, want, 0, "%s %s %s keepdim=%d", sum ? "sum" : "max", ta_dtype_name(x->d), what, keepdim);
}

typedef enum { M_PERMUTE, M_FLIP, M_PAD, M_SHRINK, M_EXPAND } s_move_t;

/* x moved: a holds the order (permute), 0/1 flags (flip), {begin, end} pairs
 * (pad: before/after, shrink: the range) or the new sizes (expand). */
static s_ref_t s_ref_move(s_batch_t *b, const s_ref_t *x, s_move_t m, const int64_t *a, double fill) {
    int64_t shape[S_MAXD], idx[S_MAXD], src[S_MAXD];
    for (int k = 0; k < x->ndim; k++) {
        int64_t s = x->shape[k];
        shape[k] = m == M_PERMUTE ? x->shape[a[k]] : m == M_PAD ? s + a[2 * k] + a[2 * k + 1]
                 : m == M_SHRINK ? a[2 * k + 1] - a[2 * k] : m == M_EXPAND ? a[k] : s;
    }
    s_ref_t r = s_ref(b, x->d, x->ndim, shape);
    for (int64_t f = 0; f < r.n; f++) {
        s_unravel(x->ndim, shape, f, idx);
        int inside = 1;
        for (int k = 0; k < x->ndim; k++) {
            switch (m) {
            case M_PERMUTE: src[a[k]] = idx[k]; break;
            case M_FLIP: src[k] = a[k] ? x->shape[k] - 1 - idx[k] : idx[k]; break;
            case M_PAD: src[k] = idx[k] - a[2 * k]; inside &= src[k] >= 0 && src[k] < x->shape[k]; break;
            case M_SHRINK: src[k] = idx[k] + a[2 * k]; break;
            case M_EXPAND: src[k] = x->shape[k] == 1 ? 0 : idx[k]; break;
            }
        }
        r.v[f] = inside ? x->v[s_ravel(x->ndim, x->shape, src)] : s_flt(x->d, fill);
    }
    return r;
}

/* ======================================================== unary ops */

/* On floats each op gets inputs from its domain; ints and bools become float32 first. */
Test(graph_ops, float_unary_ops_round_per_dtype_match_libm_and_cast_ints_to_float32) {
    static const s_op_t ops[] = {O_EXP2, O_LOG2, O_SIN, O_SQRT, O_RECIP};
    static const s_dist_t dist[] = {D_EXP, D_LOG, D_SIN, D_ANY, D_ANY};
    s_batch_t *b = s_begin();
    for (int d = 0; d < TACT_DTYPE_COUNT; d++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
            s_ref_t x = s_values(b, (tact_dtype)d, dist[o], 0, NULL);
            s_expect_un(b, s_ops[ops[o]].un(s_upload(b, &x)), ops[o], &x);
        }
    s_end(b);
}

Test(graph_ops, neg_wraps_ints_negates_bools_and_flips_float_signs) {
    s_batch_t *b = s_begin();
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
        s_ref_t x = s_values(b, (tact_dtype)d, D_ANY, 0, NULL);
        s_expect_un(b, tact_neg(s_upload(b, &x)), O_NEG, &x);
    }
    s_end(b);
}

/* Values where casts round, saturate or wrap. */
static s_ref_t s_cast_values(s_batch_t *b, tact_dtype d) {
    static const double fc[] = {0.49, -0.5, 0.99, -0.99, 1.5, -1.5, 2.5, 127.5, 128.5, -128.5, -129.5, 255.5, 256.5,
                                32767.5, 32768.5, -32769.5, 65504, 65519.9, 65520, 65535.5, 65536.5, 16777217,
                                2147483647.0, 2147483648.0, -2147483649.0, 4294967301.0, 1e10, -1e10, 9.2e18,
                                9.3e18, -9.3e18, 1.8e19, 2e19, -2e19, 1e30, -1e30, 3.4e38, 1e39, 1e-30, -1e-40};
    static const int64_t ic[] = {255, 256, 257, 2049, 32767, 65504, 65519, 65520, 65535, 65536, 16777217,
                                 16777219, 2147483647, 4294967295, 9007199254740993, -9007199254740993, -129};
    ta_value_t extra[64];
    int n = 0;
    if (ta_dtype_is_float(d))
        for (size_t i = 0; i < sizeof fc / sizeof *fc; i++) extra[n++] = s_flt(d, fc[i]);
    else if (d != TACT_BOOL)
        for (size_t i = 0; i < sizeof ic / sizeof *ic; i++) extra[n++] = s_int(d, (uint64_t)ic[i]);
    return s_values(b, d, D_ANY, n, extra);
}

Test(graph_ops, cast_between_every_pair_of_dtypes) {
    s_batch_t *b = s_begin();
    for (int src = 0; src < TACT_DTYPE_COUNT; src++) {
        s_ref_t x = s_cast_values(b, (tact_dtype)src);
        tact_tensor *tx = s_upload(b, &x);
        for (int dst = 0; dst < TACT_DTYPE_COUNT; dst++) {
            s_ref_t want = s_ref(b, (tact_dtype)dst, 1, x.shape);
            for (int64_t i = 0; i < x.n; i++) want.v[i] = ta_value_convert((tact_dtype)dst, (tact_dtype)src, x.v[i]);
            s_check_t *c = s_expect(b, tact_cast(tx, (tact_dtype)dst), want, 0, "cast %s -> %s",
                                    ta_dtype_name((tact_dtype)src), ta_dtype_name((tact_dtype)dst));
            c->nin = 1, c->in[0] = x;
        }
    }
    s_end(b);
}

/* Random bit patterns of d plus NaN patterns (signalling ones included) of its width's floats. */
static s_ref_t s_bit_values(s_batch_t *b, tact_dtype d, int bool_bytes) {
    static const uint64_t pat[3][6] = {
        {0x7c01, 0xfd55, 0x7e00, 0x7f81, 0xff80, 0x7c00}, /* float16 and bfloat16 NaNs, inf */
        {0x7f800001, 0xffa00000, 0x7fc00000, 0x80000000, 0x7f800000, 0xffffffff},
        {0x7ff0000000000001, 0xfff4000000000000, 0x7ff8000000000000, 0x8000000000000000, 0x7ff0000000000000, ~0ull}};
    size_t es = ta_dtype_size(d);
    int64_t n = 6 + S_RANDOM;
    s_ref_t x = s_ref(b, d, 1, &n);
    for (int64_t i = 0; i < n; i++) {
        uint64_t bits = i < 6 && es > 1 ? pat[es == 2 ? 0 : es == 4 ? 1 : 2][i] : tu_rand(&b->rng);
        if (bool_bytes) bits &= 1;
        x.v[i] = ta_value_load(d, &bits); /* little-endian: the low bytes */
    }
    return x;
}

Test(graph_ops, bitcast_keeps_every_bit_between_same_size_dtypes) {
    static const tact_dtype groups[][4] = {{TACT_BOOL, TACT_INT8, TACT_UINT8, TACT_DTYPE_COUNT},
                                           {TACT_INT16, TACT_UINT16, TACT_FLOAT16, TACT_BFLOAT16},
                                           {TACT_INT32, TACT_UINT32, TACT_FLOAT32, TACT_DTYPE_COUNT},
                                           {TACT_INT64, TACT_UINT64, TACT_FLOAT64, TACT_DTYPE_COUNT}};
    s_batch_t *b = s_begin();
    for (size_t g = 0; g < 4; g++)
        for (int i = 0; i < 4 && groups[g][i] != TACT_DTYPE_COUNT; i++)
            for (int j = 0; j < 4 && groups[g][j] != TACT_DTYPE_COUNT; j++) {
                tact_dtype src = groups[g][i], dst = groups[g][j];
                if (src == dst) continue;
                s_ref_t x = s_bit_values(b, src, dst == TACT_BOOL);
                s_ref_t want = s_ref(b, dst, 1, x.shape);
                for (int64_t e = 0; e < x.n; e++) {
                    uint8_t p[8] = {0};
                    ta_value_store(src, p, x.v[e]);
                    want.v[e] = ta_value_load(dst, p);
                }
                s_check_t *c = s_expect(b, tact_bitcast(s_upload(b, &x), dst), want, -1, "bitcast %s -> %s",
                                        ta_dtype_name(src), ta_dtype_name(dst));
                c->nin = 1, c->in[0] = x;
            }
    tact_tensor *bad = tact_bitcast(tact_ones(b->ctx, TACT_INT8, 0, NULL), TACT_INT16);
    cr_expect_eq(tact_status_of(bad), TACT_EDTYPE, "bitcast int8 -> int16: %s", tact_error_message(bad));
    s_end(b);
}

/* ======================================================= binary ops */

/* Each op on every dtype in the dtypes mask; ops that divide get no zero divisor on floats. */
static void s_binary_suite(s_batch_t *b, const s_op_t *ops, int nops, unsigned dtypes) {
    for (int d = 0; d < TACT_DTYPE_COUNT; d++) {
        if (!(dtypes >> d & 1)) continue;
        s_ref_t x, y;
        s_pairs(b, (tact_dtype)d, &x, &y);
        tact_tensor *tx = s_upload(b, &x), *ty = s_upload(b, &y), *tnz = NULL;
        for (int o = 0; o < nops; o++) {
            s_ref_t yy = y;
            tact_tensor *t = ty;
            if ((ops[o] == O_IDIV || ops[o] == O_MOD) && ta_dtype_is_float((tact_dtype)d)) {
                yy = s_ref(b, y.d, 1, y.shape);
                for (int64_t i = 0; i < y.n; i++) yy.v[i] = s_dbl(y.d, y.v[i]) == 0 ? s_flt(y.d, 1) : y.v[i];
                t = tnz ? tnz : (tnz = s_upload(b, &yy));
            }
            s_expect_bin(b, s_ops[ops[o]].bin(tx, t), ops[o], &x, &yy, (tact_dtype)d, ta_dtype_name((tact_dtype)d));
        }
    }
}

#define S_ALL ((1u << TACT_DTYPE_COUNT) - 1)
#define S_INTS (S_ALL & ~(1u << TACT_BOOL) & ~(1u << TACT_FLOAT16 | 1u << TACT_BFLOAT16 | 1u << TACT_FLOAT32 | 1u << TACT_FLOAT64))

Test(graph_ops, arithmetic_and_comparisons_on_every_dtype) {
    static const s_op_t ops[] = {O_ADD, O_SUB, O_MUL, O_DIV, O_MAX, O_CMPLT, O_CMPNE};
    s_batch_t *b = s_begin();
    s_binary_suite(b, ops, 7, S_ALL);
    s_end(b);
}

Test(graph_ops, idiv_and_mod_truncate_toward_zero_and_give_zero_on_zero_divisors) {
    static const s_op_t ops[] = {O_IDIV, O_MOD};
    s_batch_t *b = s_begin();
    s_binary_suite(b, ops, 2, S_ALL);
    s_end(b);
}

Test(graph_ops, bitwise_ops_on_ints_and_bools_and_shifts_on_ints) {
    static const s_op_t logic[] = {O_XOR, O_AND, O_OR}, shifts[] = {O_SHL, O_SHR};
    s_batch_t *b = s_begin();
    s_binary_suite(b, logic, 3, S_INTS | 1u << TACT_BOOL);
    s_binary_suite(b, shifts, 2, S_INTS);
    int64_t two = 2;
    tact_tensor *f = tact_ones(b->ctx, TACT_FLOAT32, 1, &two), *t = tact_ones(b->ctx, TACT_BOOL, 1, &two);
    tact_tensor *bad[] = {tact_xor(f, f), tact_and(f, f), tact_or(f, f), tact_shl(f, f), tact_shl(t, t), tact_shr(t, t)};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect_eq(tact_status_of(bad[i]), TACT_EDTYPE, "bitwise op %zu on floats/bools: %s", i,
                     tact_error_message(bad[i]));
    s_end(b);
}

Test(graph_ops, mixed_dtypes_promote_on_the_reference_lattice) {
    static const struct { tact_dtype a, b, want; s_op_t op; } cases[] = {
        {TACT_INT8, TACT_UINT8, TACT_INT16, O_ADD},     {TACT_UINT8, TACT_INT16, TACT_INT16, O_MUL},
        {TACT_BOOL, TACT_INT8, TACT_INT8, O_ADD},       {TACT_BOOL, TACT_UINT8, TACT_UINT8, O_MAX},
        {TACT_UINT16, TACT_INT16, TACT_INT32, O_SUB},   {TACT_UINT32, TACT_INT32, TACT_INT64, O_ADD},
        {TACT_UINT64, TACT_INT64, TACT_FLOAT16, O_ADD}, {TACT_INT32, TACT_FLOAT16, TACT_FLOAT16, O_MUL},
        {TACT_FLOAT16, TACT_BFLOAT16, TACT_FLOAT32, O_ADD}, {TACT_UINT16, TACT_FLOAT32, TACT_FLOAT32, O_SUB},
        {TACT_FLOAT32, TACT_FLOAT64, TACT_FLOAT64, O_MUL}, {TACT_INT64, TACT_UINT8, TACT_INT64, O_ADD},
        {TACT_UINT8, TACT_UINT32, TACT_UINT32, O_ADD},  {TACT_INT8, TACT_UINT8, TACT_INT16, O_CMPLT},
        {TACT_UINT8, TACT_INT8, TACT_INT16, O_DIV},     {TACT_BOOL, TACT_FLOAT16, TACT_FLOAT16, O_CMPNE},
    };
    s_batch_t *b = s_begin();
    char label[96];
    /* x as a column and y as a row: every pair of values meets once. */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s_ref_t x = s_values(b, cases[i].a, D_ANY, 0, NULL), y = s_values(b, cases[i].b, D_ANY, 0, NULL);
        x = s_reshape(x, 2, (int64_t[]){x.n, 1});
        snprintf(label, sizeof label, "%s,%s (in %s)", ta_dtype_name(cases[i].a), ta_dtype_name(cases[i].b),
                 ta_dtype_name(cases[i].want));
        s_expect_bin(b, s_ops[cases[i].op].bin(s_upload(b, &x), s_upload(b, &y)), cases[i].op, &x, &y, cases[i].want, label);
    }
    /* Weak scalars: they take the tensor's dtype when they can (DESIGN.md trap 10). */
    static const struct { tact_dtype a; int kind; double f; int64_t i; tact_dtype s, want; s_op_t op; int left; } sc[] = {
        {TACT_INT32, 'f', 2.5, 0, TACT_FLOAT32, TACT_FLOAT32, O_ADD, 0},
        {TACT_FLOAT16, 'i', 0, 3, TACT_FLOAT16, TACT_FLOAT16, O_ADD, 0},
        {TACT_FLOAT16, 'f', 0.1, 0, TACT_FLOAT16, TACT_FLOAT16, O_MUL, 0},
        {TACT_BFLOAT16, 'f', 0.1, 0, TACT_BFLOAT16, TACT_BFLOAT16, O_ADD, 0},
        {TACT_UINT8, 'i', 0, 3, TACT_UINT8, TACT_UINT8, O_ADD, 0},
        {TACT_INT64, 'i', 0, -3, TACT_INT64, TACT_INT64, O_MUL, 0},
        {TACT_BOOL, 'i', 0, 2, TACT_INT32, TACT_INT32, O_ADD, 0},
        {TACT_BOOL, 'f', 1.5, 0, TACT_FLOAT32, TACT_FLOAT32, O_MUL, 0},
        {TACT_INT8, 'b', 0, 1, TACT_BOOL, TACT_INT8, O_ADD, 0},
        {TACT_INT8, 'i', 0, 10, TACT_INT8, TACT_INT8, O_SUB, 1},
        {TACT_FLOAT64, 'f', 0.1, 0, TACT_FLOAT64, TACT_FLOAT64, O_ADD, 0},
        {TACT_UINT16, 'f', 0.5, 0, TACT_FLOAT32, TACT_FLOAT32, O_CMPLT, 1},
    };
    for (size_t i = 0; i < sizeof sc / sizeof *sc; i++) {
        s_ref_t x = s_values(b, sc[i].a, D_ANY, 0, NULL), s = s_ref(b, sc[i].s, 0, NULL);
        tact_tensor *ts = sc[i].kind == 'f' ? tact_scalar(b->ctx, sc[i].f)
                        : sc[i].kind == 'i' ? tact_scalar_int(b->ctx, sc[i].i) : tact_scalar_bool(b->ctx, (int)sc[i].i);
        s.v[0] = sc[i].kind == 'f' ? s_flt(sc[i].s, sc[i].f) : s_int(sc[i].s, (uint64_t)sc[i].i);
        tact_tensor *tx = s_upload(b, &x);
        snprintf(label, sizeof label, "%s %s scalar %g (in %s)", sc[i].left ? "scalar on the left of" : "",
                 ta_dtype_name(sc[i].a), sc[i].kind == 'f' ? sc[i].f : (double)sc[i].i, ta_dtype_name(sc[i].want));
        if (sc[i].left) s_expect_bin(b, s_ops[sc[i].op].bin(ts, tx), sc[i].op, &s, &x, sc[i].want, label);
        else s_expect_bin(b, s_ops[sc[i].op].bin(tx, ts), sc[i].op, &x, &s, sc[i].want, label);
    }
    /* Two weak scalars: the left one becomes float32, the right one follows. */
    tact_tensor *two = tact_add(tact_scalar(b->ctx, 2.5), tact_scalar_int(b->ctx, 3));
    s_ref_t want = s_ref(b, TACT_FLOAT32, 0, NULL);
    want.v[0] = s_flt(TACT_FLOAT32, 5.5);
    s_expect(b, two, want, 0, "add scalar 2.5 + scalar 3");
    s_end(b);
}

/* ====================================================== ternary ops */

Test(graph_ops, where_picks_and_mulacc_rounds_twice) {
    static const tact_dtype dts[] = {TACT_FLOAT16, TACT_BFLOAT16, TACT_FLOAT32, TACT_FLOAT64,
                                     TACT_BOOL,    TACT_INT8,     TACT_UINT32,  TACT_INT64};
    s_batch_t *b = s_begin();
    char label[64];
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        /* The condition is bool for floats, and an int16 (true when non-zero) for the others. */
        tact_dtype d = dts[i], cd = ta_dtype_is_float(d) ? TACT_BOOL : TACT_INT16;
        s_ref_t x, y, c, z;
        s_pairs(b, d, &x, &y);
        tact_tensor *tx = s_upload(b, &x), *ty = s_upload(b, &y), *tc = s_input(b, &c, cd, D_ANY, 1, x.shape);
        snprintf(label, sizeof label, "%s (%s condition)", ta_dtype_name(d), ta_dtype_name(cd));
        s_expect_tern(b, tact_where(tc, tx, ty), 1, &c, &x, &y, d, label);
        snprintf(label, sizeof label, "%s (itself as condition: NaN is true, -0 false)", ta_dtype_name(d));
        if (ta_dtype_is_float(d)) s_expect_tern(b, tact_where(tx, ty, tx), 1, &x, &y, &x, d, label);
        s_expect_tern(b, tact_mulacc(tx, ty, s_input(b, &z, d, D_ANY, 1, x.shape)), 0, &x, &y, &z, d, ta_dtype_name(d));
    }
    /* Broadcasting and promotion: an int32 (4,1) condition, int8 (1,5) and uint8 (5) -> int16 (4,5). */
    int64_t n = 200, col[2] = {4, 1}, row[2] = {1, 5}, five = 5;
    s_ref_t ic, i8, u8, c, h, m8, mu, mh, half = s_ref(b, TACT_FLOAT16, 0, NULL);
    ic = s_random_ref(b, TACT_INT32, D_ANY, 2, col);
    ic.v[1] = s_int(TACT_INT32, 0);
    s_expect_tern(b, tact_where(s_upload(b, &ic), s_input(b, &i8, TACT_INT8, D_ANY, 2, row), s_input(b, &u8, TACT_UINT8, D_ANY, 1, &five)),
                  1, &ic, &i8, &u8, TACT_INT16, "int32 (4,1) ? int8 (1,5) : uint8 (5)");
    half.v[0] = s_flt(TACT_FLOAT16, 0.5);
    tact_tensor *tc = s_input(b, &c, TACT_BOOL, D_ANY, 1, &n), *th = s_input(b, &h, TACT_FLOAT16, D_ANY, 1, &n);
    s_expect_tern(b, tact_where(tc, th, tact_scalar(b->ctx, 0.5)), 1, &c, &h, &half, TACT_FLOAT16, "bool ? float16 : scalar 0.5");
    tact_tensor *t8 = s_input(b, &m8, TACT_INT8, D_ANY, 1, &n), *tu = s_input(b, &mu, TACT_UINT8, D_ANY, 1, &n);
    s_expect_tern(b, tact_mulacc(t8, tu, s_input(b, &mh, TACT_FLOAT16, D_UNIT, 1, &n)), 0, &m8, &mu, &mh, TACT_FLOAT16,
                  "int8 * uint8 + float16 (in float16)");
    s_end(b);
}

/* ======================================================= reductions */

Test(graph_ops, sum_and_max_over_axes_accumulate_in_the_reference_dtypes) {
    static const tact_dtype dts[] = {TACT_INT8, TACT_UINT8, TACT_BOOL, TACT_INT32,
                                     TACT_FLOAT16, TACT_BFLOAT16, TACT_FLOAT32, TACT_FLOAT64};
    static const int last[] = {-1}, first[] = {0}, outer[] = {0, 2}, inner[] = {1, -1};
    int64_t shape[3] = {4, 5, 6}, s34[2] = {3, 4};
    s_batch_t *b = s_begin();
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        /* Random values for one-axis sums (left to right, bit for bit); dyadic
         * ones for several axes, whose order the reference leaves open: their
         * sums are exact, so any order gives the same bits. */
        s_ref_t x, y;
        tact_tensor *tx = s_input(b, &x, dts[i], D_UNIT, 3, shape), *ty = s_input(b, &y, dts[i], D_DYADIC, 3, shape);
        for (int sum = 0; sum < 2; sum++) {
            s_expect_reduce(b, &x, tx, sum, 1, last, 0, "axis -1");
            s_expect_reduce(b, &x, tx, sum, 1, first, 1, "axis 0");
            s_expect_reduce(b, &y, ty, sum, 2, outer, 1, "axes 0,2");
            s_expect_reduce(b, &y, ty, sum, 2, inner, 0, "axes 1,-1");
            s_expect_reduce(b, &y, ty, sum, -1, NULL, 0, "all axes");
        }
    }
    /* Long rows: still one left-to-right accumulation per output on the
     * CPU.  OpenCL shares a long float32 reduce of few outputs among a work
     * group (docs/api.md's table): there the sum is within the bound of any
     * order, n * eps * sum |x|. */
    int64_t wide[2] = {2, 4099};
    for (int i = 0; i < 3; i++) {
        s_ref_t l;
        tact_tensor *tl = s_input(b, &l, i == 0 ? TACT_FLOAT32 : i == 1 ? TACT_FLOAT16 : TACT_UINT8, D_ANY, 2, wide);
        if (i > 0 || strcmp(tact_device(tl), "CPU") == 0) {
            s_expect_reduce(b, &l, tl, 1, 1, last, 0, "(2,4099) axis -1");
            continue;
        }
        float got[2];
        int one = 1;
        cr_assert_eq(tact_read(tact_sum(tl, 1, &one, 0), got, sizeof got), TACT_OK, "%s", tact_ctx_error(b->ctx));
        for (int r = 0; r < 2; r++) {
            int64_t n = wide[1];
            double want = 0, mag = 0;
            for (int64_t c = 0; c < n; c++) want += (double)l.v[r * n + c].f, mag += fabs((double)l.v[r * n + c].f);
            cr_expect(fabs(got[r] - want) <= (double)n * 0x1p-24 * mag, "seed %#llx: (2,4099) float32 sum, row %d on %s: %.9g, want %.9g",
                      (unsigned long long)b->seed, r, tact_device(tl), got[r], want);
        }
    }
    /* max propagates NaN; -inf is an ordinary value. */
    s_ref_t z = s_random_ref(b, TACT_FLOAT32, D_UNIT, 2, s34);
    z.v[6] = s_flt(TACT_FLOAT32, NAN), z.v[8] = s_flt(TACT_FLOAT32, -INFINITY), z.v[0] = s_flt(TACT_FLOAT32, INFINITY);
    tact_tensor *tz = s_upload(b, &z);
    s_expect_reduce(b, &z, tz, 0, 1, last, 0, "with NaN/inf, axis -1");
    s_expect_reduce(b, &z, tz, 1, 1, first, 0, "with NaN/inf, axis 0");
    s_end(b);
}

Test(graph_ops, reductions_of_size_zero_and_size_one_dims) {
    static const int a0[] = {0}, a1[] = {1}, a02[] = {0, 2};
    static const struct { tact_dtype d; int ndim; int64_t shape[3]; } cases[] = {
        {TACT_FLOAT32, 2, {0, 3}}, {TACT_INT8, 2, {0, 3}},   {TACT_UINT8, 2, {2, 0}},    {TACT_BOOL, 1, {0}},
        {TACT_FLOAT16, 2, {0, 4}}, {TACT_FLOAT64, 2, {3, 0}}, {TACT_INT8, 3, {1, 5, 1}}, {TACT_FLOAT16, 2, {1, 4}},
        {TACT_FLOAT32, 2, {3, 1}}, {TACT_UINT8, 3, {1, 1, 3}},
    };
    s_batch_t *b = s_begin();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s_ref_t x;
        tact_tensor *tx = s_input(b, &x, cases[i].d, D_UNIT, cases[i].ndim, cases[i].shape);
        for (int sum = 0; sum < 2; sum++) {
            s_expect_reduce(b, &x, tx, sum, 1, a0, sum, "axis 0");
            s_expect_reduce(b, &x, tx, sum, -1, NULL, !sum, "all axes");
            if (x.ndim > 1) s_expect_reduce(b, &x, tx, sum, 1, a1, 0, "axis 1");
            if (x.ndim > 2) s_expect_reduce(b, &x, tx, sum, 2, a02, 1, "axes 0,2");
        }
    }
    /* Elementwise ops and movement on size-0 tensors: a size-0 result, a pad
     * that is all fill, a shrink down to nothing. */
    static const int64_t grow[2][2] = {{1, 1}, {0, 0}}, none[2][2] = {{1, 1}, {0, 3}};
    int64_t s03[2] = {0, 3}, s13[2] = {1, 3};
    s_ref_t e, r;
    tact_tensor *te = s_input(b, &e, TACT_FLOAT32, D_ANY, 2, s03), *tr = s_input(b, &r, TACT_FLOAT32, D_ANY, 2, s13);
    s_expect_bin(b, tact_add(te, tr), O_ADD, &e, &r, TACT_FLOAT32, "float32 (0,3) + (1,3)");
    s_expect(b, tact_pad(te, grow, 2.5), s_ref_move(b, &e, M_PAD, &grow[0][0], 2.5), 0, "pad float32 (0,3) with 2.5");
    s_expect(b, tact_shrink(tr, none), s_ref_move(b, &r, M_SHRINK, &none[0][0], 0), 0, "shrink float32 (1,3) to (0,3)");
    s_end(b);
}

/* ========================================================= movement */

Test(graph_ops, broadcasting_aligns_dims_right_and_stretches_ones) {
    static const struct { tact_dtype d; int na, nb; int64_t a[3], b[3]; s_op_t op; const char *what; } cases[] = {
        {TACT_FLOAT32, 2, 2, {3, 1}, {1, 4}, O_ADD, "float32 (3,1) + (1,4)"},
        {TACT_INT16, 0, 2, {0}, {2, 3}, O_MUL, "int16 () * (2,3)"},
        {TACT_FLOAT64, 1, 3, {4}, {2, 3, 4}, O_SUB, "float64 (4) - (2,3,4)"},
        {TACT_INT32, 3, 2, {2, 1, 4}, {3, 1}, O_MAX, "int32 max((2,1,4), (3,1))"},
        {TACT_UINT8, 2, 1, {5, 1}, {5}, O_CMPLT, "uint8 (5,1) < (5)"},
        {TACT_FLOAT16, 3, 3, {1, 3, 1}, {2, 1, 4}, O_MUL, "float16 (1,3,1) * (2,1,4)"},
    };
    s_batch_t *b = s_begin();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s_ref_t x, y;
        tact_tensor *tx = s_input(b, &x, cases[i].d, D_ANY, cases[i].na, cases[i].a);
        tact_tensor *ty = s_input(b, &y, cases[i].d, D_ANY, cases[i].nb, cases[i].b);
        s_expect_bin(b, s_ops[cases[i].op].bin(tx, ty), cases[i].op, &x, &y, cases[i].d, cases[i].what);
    }
    int64_t three = 3, four = 4;
    tact_tensor *bad = tact_add(tact_ones(b->ctx, TACT_FLOAT32, 1, &three), tact_ones(b->ctx, TACT_FLOAT32, 1, &four));
    cr_expect_eq(tact_status_of(bad), TACT_ESHAPE, "(3) + (4): %s", tact_error_message(bad));
    s_end(b);
}

Test(graph_ops, flips_pads_and_shrinks_index_and_mask_loads) {
    static const int a02[] = {0, 2}, a1[] = {1}, a0[] = {0};
    static const int64_t sh[3][2] = {{1, 3}, {0, 4}, {2, 5}}, pp[2][2] = {{2, 2}, {2, 2}}, ps[2][2] = {{1, 5}, {3, 8}};
    static const int64_t pd[2][2] = {{1, 2}, {2, 0}}, f02[3] = {1, 0, 1}, f1[3] = {0, 1, 0}, fall[2] = {1, 1};
    int64_t s345[3] = {3, 4, 5}, s34[2] = {3, 4};
    s_batch_t *b = s_begin();
    s_ref_t x, q, p;
    tact_tensor *tx = s_input(b, &x, TACT_FLOAT32, D_ANY, 3, s345), *tq = s_input(b, &q, TACT_FLOAT32, D_ANY, 2, s34);
    tact_tensor *tp = s_input(b, &p, TACT_INT8, D_ANY, 2, s34);
    /* Flips: negative strides, alone and fused with an unflipped read. */
    s_ref_t x1 = s_ref_move(b, &x, M_FLIP, f1, 0);
    s_expect(b, tact_flip(tx, 2, a02), s_ref_move(b, &x, M_FLIP, f02, 0), 0, "flip float32 (3,4,5) axes 0,2");
    s_expect_bin(b, tact_add(tact_flip(tx, 1, a1), tx), O_ADD, &x1, &x, TACT_FLOAT32, "flip(x, 1) + x float32");
    /* Shrinks: an offset view, and a shrink reaching into a pad. */
    s_ref_t qp = s_ref_move(b, &q, M_PAD, &pp[0][0], 0);
    s_expect(b, tact_shrink(tx, sh), s_ref_move(b, &x, M_SHRINK, &sh[0][0], 0), 0, "shrink float32 (3,4,5)");
    s_expect(b, tact_shrink(tact_pad(tq, pp, 0), ps), s_ref_move(b, &qp, M_SHRINK, &ps[0][0], 0), 0,
             "shrink(pad(float32 (3,4)))");
    /* Pads: zero fill, a non-zero fill, padding then reducing, and a pad
     * under recip (f(0) != 0: the pad must be realized first). */
    s_ref_t p0 = s_ref_move(b, &p, M_PAD, &pd[0][0], 0), p3 = s_ref_move(b, &p, M_PAD, &pd[0][0], -3);
    s_ref_t qi = s_ref_move(b, &q, M_PAD, &pd[0][0], -INFINITY), q0 = s_ref_move(b, &q, M_PAD, &pd[0][0], 0);
    s_expect(b, tact_pad(tp, pd, 0), p0, 0, "pad int8 (3,4) with 0");
    s_expect(b, tact_pad(tp, pd, -3), p3, 0, "pad int8 (3,4) with -3");
    s_expect(b, tact_sum(tact_pad(tp, pd, 0), 1, a1, 0), s_ref_reduce(b, &p0, 1, 2, 0), 0, "sum(pad(int8), axis 1)");
    s_expect(b, tact_max(tact_pad(tp, pd, -3), 1, a0, 1), s_ref_reduce(b, &p3, 0, 1, 1), 0, "max(pad(int8, -3), axis 0)");
    s_expect(b, tact_max(tact_pad(tq, pd, -INFINITY), 1, a0, 0), s_ref_reduce(b, &qi, 0, 1, 0), 0,
             "max(pad(float32, -inf), axis 0)");
    snprintf(s_expect_un(b, tact_recip(tact_pad(tq, pd, 0)), O_RECIP, &q0)->label, 96, "recip(pad(float32 (3,4)))");
    /* Flip, then pad, then a sum across the padding; and a flip of a padded view. */
    s_expect(b, tact_flip(tact_pad(tp, pd, -3), 2, (const int[]){0, 1}), s_ref_move(b, &p3, M_FLIP, fall, 0), 0,
             "flip(pad(int8, -3))");
    s_ref_t fq = s_ref_move(b, &q, M_FLIP, fall, 0), fqp = s_ref_move(b, &fq, M_PAD, &pd[0][0], 0);
    s_expect(b, tact_sum(tact_pad(tact_flip(tq, -1, NULL), pd, 0), 1, a0, 0), s_ref_reduce(b, &fqp, 1, 1, 0), 0,
             "sum(pad(flip(float32)), axis 0)");
    s_end(b);
}

Test(graph_ops, reshapes_of_permuted_views_and_expands_then_reduces) {
    static const int order[3] = {2, 0, 1}, swap[2] = {1, 0}, a0[] = {0}, a1[] = {1}, a01[] = {0, 1};
    static const int64_t ord64[3] = {2, 0, 1}, swap64[2] = {1, 0}, f1[3] = {0, 1, 0}, cut[3][2] = {{0, 3}, {0, 2}, {1, 3}};
    int64_t s234[3] = {2, 3, 4}, s83[2] = {8, 3}, s38[2] = {3, 8}, s46[2] = {4, 6}, s324[3] = {3, 2, 4}, s34[2] = {3, 4};
    int64_t s31[2] = {3, 1}, s35[2] = {3, 5}, s14[2] = {1, 4}, s64[2] = {6, 4}, s114[3] = {1, 1, 4}, twelve = 12;
    s_batch_t *b = s_begin();
    s_ref_t x, y, z, v, w, u, ar;
    tact_tensor *tx = s_input(b, &x, TACT_FLOAT32, D_ANY, 3, s234);
    /* permute -> reshape -> reshape: the second reshape cannot merge into a permuted view. */
    s_ref_t px = s_ref_move(b, &x, M_PERMUTE, ord64, 0);
    tact_tensor *r83 = tact_reshape(tact_permute(tx, order), 2, s83);
    s_expect(b, r83, s_reshape(px, 2, s83), 0, "reshape(permute(float32 (2,3,4)), (8,3))");
    s_expect(b, tact_reshape(r83, 2, s38), s_reshape(px, 2, s38), 0, "reshape(reshape(permute(float32)), (3,8))");
    s_expect(b, tact_sum(tact_permute(tx, order), 1, a0, 0), s_ref_reduce(b, &px, 1, 1, 0), 0, "sum(permute(float32), axis 0)");
    /* A long chain over int16: permute, reshape, flip, shrink, reshape, then add. */
    tact_tensor *tc = tact_reshape(tact_permute(s_input(b, &y, TACT_INT16, D_ANY, 2, s46), swap), 3, s324);
    tc = tact_reshape(tact_shrink(tact_flip(tc, 1, a1), cut), 2, s34);
    s_ref_t c = s_reshape(s_ref_move(b, &y, M_PERMUTE, swap64, 0), 3, s324);
    c = s_ref_move(b, &c, M_FLIP, f1, 0);
    c = s_reshape(s_ref_move(b, &c, M_SHRINK, &cut[0][0], 0), 2, s34);
    s_expect_bin(b, tact_add(tc, s_input(b, &z, TACT_INT16, D_ANY, 2, s34)), O_ADD, &c, &z, TACT_INT16,
                 "chain of views + int16 (3,4)");
    /* Expands: then sum (left to right over the copies), then max, then reshape. */
    tact_tensor *tv = s_input(b, &v, TACT_FLOAT32, D_ANY, 2, s31), *tw = s_input(b, &w, TACT_INT8, D_ANY, 2, s14);
    tact_tensor *tu = s_input(b, &u, TACT_FLOAT16, D_ANY, 1, &s14[1]);
    s_ref_t ve = s_ref_move(b, &v, M_EXPAND, s35, 0), we = s_ref_move(b, &w, M_EXPAND, s64, 0);
    s_ref_t u3 = s_reshape(u, 3, s114), ue = s_ref_move(b, &u3, M_EXPAND, s234, 0);
    s_ref_t vr = s_reshape(s_ref_move(b, &v, M_EXPAND, s34, 0), 1, &twelve);
    s_expect(b, tact_sum(tact_expand(tv, 2, s35), 1, a1, 0), s_ref_reduce(b, &ve, 1, 2, 0), 0,
             "sum(expand float32 (3,1) to (3,5), axis 1)");
    s_expect(b, tact_sum(tact_expand(tw, 2, s64), 1, a0, 0), s_ref_reduce(b, &we, 1, 1, 0), 0,
             "sum(expand int8 (1,4) to (6,4), axis 0)");
    s_expect(b, tact_max(tact_expand(tu, 3, s234), 2, a01, 0), s_ref_reduce(b, &ue, 0, 3, 0), 0,
             "max(expand float16 (4) to (2,3,4), axes 0,1)");
    s_expect_bin(b, tact_mul(tact_reshape(tact_expand(tv, 2, s34), 1, &twelve), s_input(b, &ar, TACT_FLOAT32, D_ANY, 1, &twelve)),
                 O_MUL, &vr, &ar, TACT_FLOAT32, "reshape(expand float32 (3,1) to (3,4), (12)) * (12)");
    s_end(b);
}
