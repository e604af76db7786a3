/* client_random.c - random numbers as the reference makes them: counter-based Threefry-2x32 (20 rounds) keyed by
 * the context's seed, composed from uint32 ops, so a number depends on the seed and the call's place in the
 * program alone (never on the device, the thread count or the realize order), and the initializers and dropout
 * built on it. */
#include <math.h>
#include <stdio.h>

#include "client_core.h"
#include "client_impl.h"
#include "dtype.h"
#include "shape.h"

static ti_tensor_t *s_u32(ti_ctx_t *ctx, uint64_t v) { return ti_cast(ti_scalar_int(ctx, (int64_t)(v & 0xffffffffu)), TACT_UINT32); }

/* (x << r) + (x >> (32 - r)), as the reference writes the rotation. */
static ti_tensor_t *s_rotl(ti_ctx_t *ctx, ti_tensor_t *x, int r) {
    return ti_add(ti_shl(x, s_u32(ctx, (uint64_t)r)), ti_shr(x, s_u32(ctx, (uint64_t)(32 - r))));
}

/* Threefry-2x32 of the counter words (x0, x1) under key (seed, 0): the
 * reference's threefry2x32, its key schedule ks = (0, k ^ 0x1BD11BDA, k). */
static void s_threefry(ti_ctx_t *ctx, uint64_t seed, ti_tensor_t **x0, ti_tensor_t **x1) {
    static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    uint32_t k = (uint32_t)seed, ks[3] = {0, k ^ 0x1BD11BDAu, k};
    ti_tensor_t *a = ti_add(*x0, s_u32(ctx, ks[2])), *b = ti_add(*x1, s_u32(ctx, ks[0]));
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 4; j++) {
            a = ti_add(a, b);
            b = ti_xor(a, s_rotl(ctx, b, rot[i % 2][j]));
        }
        a = ti_add(a, s_u32(ctx, ks[i % 3]));
        b = ti_add(ti_add(b, s_u32(ctx, ks[(i + 1) % 3])), s_u32(ctx, (uint64_t)i + 1));
    }
    *x0 = a, *x1 = b;
}

static int64_t s_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int k = 0; k < ndim; k++) n *= shape[k];
    return n;
}

/* Uniform in [0, 1): the words of counters arange(ceil(n/2)) + counter and
 * those plus ceil(n/2), through Threefry, the low words then the high
 * ones, shifted right by 8 and scaled by 2^-24 (exact in float32). */
ti_tensor_t *ti_rand(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    ti_tensor_t *z = ti_zeros(ctx, dtype, ndim, shape); /* checks ctx, dtype and shape */
    if (ti_status_of(z)) return z;
    int64_t num = s_numel(ndim, shape);
    if (num == 0) return z;
    if (num > ((int64_t)1 << 32)) return ti_error(ctx, TACT_ESHAPE, "rand: more than 2^32 numbers in one call");
    uint64_t seed;
    uint32_t counter;
    ti_rng_take(ctx, (uint64_t)num, &seed, &counter);
    int64_t half = (num + 1) / 2;
    ti_tensor_t *c1 = ti_add(ti_arange(ctx, 0, (double)half, 1, TACT_UINT32), s_u32(ctx, counter));
    ti_tensor_t *c2 = ti_add(c1, s_u32(ctx, (uint64_t)half));
    s_threefry(ctx, seed, &c1, &c2);
    ti_tensor_t *words = ti_cat(2, (ti_tensor_t *[]){c1, c2}, 0);
    ti_tensor_t *u = ti_mul(ti_cast(ti_shr(words, s_u32(ctx, 8)), TACT_FLOAT32), ti_scalar(ctx, 1.0 / 16777216));
    const int64_t first[1][2] = {{0, num}};
    u = ti_shrink(u, first);
    return ti_contiguous(ti_cast(ti_reshape(u, ndim, shape), dtype));
}

/* Box-Muller over rand((2, *shape)) in float32: cos(2 pi u0) sqrt(-2 log(1 - u1)). */
ti_tensor_t *ti_randn(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim >= TA_MAX_DIMS || (ndim && !shape)) return ti_zeros(ctx, dtype, ndim, shape);
    int64_t sh[TA_MAX_DIMS];
    sh[0] = 2;
    for (int k = 0; k < ndim; k++) sh[k + 1] = shape[k];
    ti_tensor_t *src = ti_rand(ctx, TACT_FLOAT32, ndim + 1, sh);
    if (ti_status_of(src) || s_numel(ndim, shape) == 0) return ti_status_of(src) ? src : ti_zeros(ctx, dtype, ndim, shape);
    ti_tensor_t *p[2];
    if (ti_split(src, 2, (int64_t[]){1, 1}, 0, p) != 2) return p[0];
    ti_tensor_t *u0 = ti_reshape(p[0], ndim, shape), *u1 = ti_reshape(p[1], ndim, shape);
    ti_tensor_t *c = ti_cos(ti_mul(u0, ti_scalar(ctx, 2 * M_PI)));
    ti_tensor_t *r = ti_sqrt(ti_mul(ti_log(ti_sub(ti_scalar_int(ctx, 1), u1)), ti_scalar_int(ctx, -2)));
    return ti_cast(ti_mul(c, r), dtype);
}

/* ((high - low) * rand).cast(dtype) + low. */
ti_tensor_t *ti_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double low, double high) {
    ti_tensor_t *r = ti_rand(ctx, TACT_FLOAT32, ndim, shape);
    if (ti_status_of(r)) return r;
    ti_tensor_t *lo = ta_dtype_is_float(dtype) ? ti_scalar(ctx, low) : ti_scalar_int(ctx, (int64_t)low);
    return ti_add(ti_cast(ti_mul(ti_scalar(ctx, high - low), r), dtype), lo);
}

ti_tensor_t *ti_randint(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, int64_t low, int64_t high) {
    if (!ta_dtype_valid(dtype) || ta_dtype_is_float(dtype) || ta_dtype_is_bool(dtype))
        return ti_error(ctx, TACT_EDTYPE, "randint: the dtype must be an int");
    return ti_uniform(ctx, dtype, ndim, shape, (double)low, (double)high);
}

ti_tensor_t *ti_normal(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double mean, double std) {
    return ti_add(ti_mul(ti_scalar(ctx, std), ti_randn(ctx, dtype, ndim, shape)), ti_scalar(ctx, mean));
}

ti_tensor_t *ti_scaled_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    ti_tensor_t *u = ti_uniform(ctx, dtype, ndim, shape, -1.0, 1.0);
    return ti_status_of(u) ? u : ti_mul(u, ti_scalar(ctx, pow((double)s_numel(ndim, shape), -0.5)));
}

static int64_t s_fan_in(int ndim, const int64_t *shape) { return ndim > 1 ? s_numel(ndim - 1, shape + 1) : 1; }

ti_tensor_t *ti_glorot_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    ti_tensor_t *u = ti_uniform(ctx, dtype, ndim, shape, -1.0, 1.0);
    if (ti_status_of(u)) return u;
    if (ndim < 1) return ti_error(ctx, TACT_ESHAPE, "glorot_uniform: needs at least one dim");
    return ti_mul(u, ti_scalar(ctx, sqrt(6.0 / (double)(shape[0] + s_fan_in(ndim, shape)))));
}

ti_tensor_t *ti_kaiming_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double a) {
    double bound = sqrt(3.0) * sqrt(2.0 / (1 + a * a)) / sqrt((double)s_fan_in(ndim, shape));
    return ti_uniform(ctx, dtype, ndim, shape, -bound, bound);
}

ti_tensor_t *ti_kaiming_normal(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double a) {
    double std = sqrt(2.0 / (1 + a * a)) / sqrt((double)s_fan_in(ndim, shape));
    return ti_normal(ctx, dtype, ndim, shape, 0.0, std);
}

/* x * (rand >= p) / (1 - p) when training (and p > 0), else x. */
ti_tensor_t *ti_dropout(ti_tensor_t *x, double p, int training) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    if (!(p >= 0 && p <= 1)) return ti_error(ti_tensor_ctx(x), TACT_EINVAL, "dropout: p must be in [0, 1]");
    if (!training || p == 0) return x;
    /* Everything dropped: zeros, as PyTorch (the reference's 1/(1-p) divides by zero). */
    if (p == 1) return ti_mul(x, ti_scalar(ti_tensor_ctx(x), 0.0));
    int64_t sh[TA_MAX_DIMS];
    ti_shape(x, sh);
    ti_ctx_t *ctx = ti_tensor_ctx(x);
    /* The mask is drawn as on one device (the same numbers), then put where x is. */
    ti_tensor_t *keep = ti_ge(tc_place_like(ti_rand(ctx, TACT_FLOAT32, ti_ndim(x), sh), x), ti_scalar(ctx, p));
    return ti_mul(ti_mul(x, keep), ti_scalar(ctx, 1 / (1.0 - p)));
}

/* full_like (what 0, with value), zeros_like (1), ones_like (2), rand_like (3), in x's dtype. */
ti_tensor_t *ti_like(ti_tensor_t *x, int what, double value) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    int64_t sh[TA_MAX_DIMS];
    ti_shape(x, sh);
    ti_ctx_t *ctx = ti_tensor_ctx(x);
    tact_dtype d = ti_dtype_of(x);
    if (what == 3) return tc_place_like(ti_rand(ctx, d, ti_ndim(x), sh), x);
    return ti_full(ctx, d, ti_ndim(x), sh, what == 0 ? value : what == 2 ? 1.0 : 0.0);
}
