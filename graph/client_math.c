/* client_math.c - the reference's elementwise math and activation functions, composed from the primitives as
 * tensor.py composes them (so the scheduler fuses them the same way), on the ti_ layer of client_impl.h. */
#include <math.h>

#include "client_core.h"
#include "client_impl.h"
#include "dtype.h"

/* x as the reference's least_upper_float: ints and bools become float32. */
static ti_tensor_t *s_float(ti_tensor_t *x) {
    if (!x || ti_status_of(x)) return x;
    return ti_cast(x, ta_dtype_upper_float(ti_dtype_of(x)));
}

ti_tensor_t *ti_exp(ti_tensor_t *x) {
    TC_CHECK(x);
    x = s_float(x);
    return ti_exp2(ti_mul(x, tc_k(x, 1 / M_LN2)));
}

ti_tensor_t *ti_log(ti_tensor_t *x) {
    TC_CHECK(x);
    x = s_float(x);
    return ti_mul(ti_log2(x), tc_k(x, M_LN2));
}

/* maximum(x, 0); where x needs a gradient, x > 0 selects x and the rest
 * comes detached, so the gradient at 0 is 0 as the reference's Relu gives
 * it (maximum would halve it on the tie: DESIGN.md §4 trap 8). */
ti_tensor_t *ti_relu(ti_tensor_t *x) {
    TC_CHECK(x);
    ti_tensor_t *m = ti_maximum(x, tc_k(x, 0));
    if (x->requires_grad != 1 || m->status) return m;
    return ti_where(ti_cmplt(tc_k(x, 0), x), x, ti_detach(m));
}

/* 1 / (1 + exp(-x)), with -x clipped to where exp stays finite in x's
 * dtype (88 for float32 and bfloat16, 11 for float16, 709 for float64):
 * past it exp(-x) was infinite and the gradient inf * 0 = NaN, where the
 * reference's dedicated backward, ret * (1 - ret), gives 0.  The values
 * there differ from the exact ones by less than 1e-38 in float32
 * (sigmoid(-88) is 6e-39; below it the exact value is a smaller
 * subnormal, which the unclipped form rounded to 0).  tanh, gelu,
 * quick_gelu, swish and mish go through it. */
ti_tensor_t *ti_sigmoid(ti_tensor_t *x) {
    TC_CHECK(x);
    x = s_float(x);
    if (x->status) return x;
    double b = x->dtype == TACT_FLOAT16 ? 11.0 : x->dtype == TACT_FLOAT64 ? 709.0 : 88.0;
    return ti_recip(ti_add(tc_k(x, 1), ti_exp2(ti_mul(ti_clip(x, -b, b), tc_k(x, -1 / M_LN2)))));
}

ti_tensor_t *ti_reciprocal(ti_tensor_t *x) { return ti_recip(x); }
ti_tensor_t *ti_rsqrt(ti_tensor_t *x) { return ti_sqrt(ti_recip(x)); }

ti_tensor_t *ti_cos(ti_tensor_t *x) {
    TC_CHECK(x);
    x = s_float(x);
    return ti_sin(ti_sub(tc_k(x, M_PI / 2), x));
}

ti_tensor_t *ti_tan(ti_tensor_t *x) { return ti_div(ti_sin(x), ti_cos(x)); }

/* trunc, ceil, floor and round go through int32, as the reference does:
 * values beyond its range saturate. */
ti_tensor_t *ti_trunc(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_cast(ti_cast(x, TACT_INT32), ti_dtype_of(x));
}

ti_tensor_t *ti_ceil(ti_tensor_t *x) {
    ti_tensor_t *b = ti_trunc(x);
    return ti_where(ti_cmplt(b, x), ti_add(b, tc_k(b, 1)), b);
}

ti_tensor_t *ti_floor(ti_tensor_t *x) {
    ti_tensor_t *b = ti_trunc(x);
    return ti_where(ti_cmplt(x, b), ti_sub(b, tc_k(b, 1)), b);
}

/* Half to even: ((x > 0) == (int(x)/2 is whole)) picks ceil(x - 0.5), else floor(x + 0.5). */
ti_tensor_t *ti_round(ti_tensor_t *x) {
    TC_CHECK(x);
    ti_tensor_t *b = ti_div(ti_cast(x, TACT_INT32), tc_k(x, 2.0));
    ti_tensor_t *even = ti_logical_not(ti_cmpne(ti_cast(ti_cast(b, TACT_INT32), ti_dtype_of(b)), b));
    ti_tensor_t *pos = ti_cmplt(tc_k(x, 0), x);
    return ti_where(ti_logical_not(ti_cmpne(pos, even)), ti_ceil(ti_sub(x, tc_k(x, 0.5))), ti_floor(ti_add(x, tc_k(x, 0.5))));
}

ti_tensor_t *ti_square(ti_tensor_t *x) { return ti_mul(x, x); }

/* The reference's sign (-1, 0, 1 through two wheres), and NaN for NaN as
 * PyTorch (the reference gives 1). */
ti_tensor_t *ti_sign(ti_tensor_t *x) {
    TC_CHECK(x);
    ti_tensor_t *s = ti_where(ti_cmpne(x, tc_k(x, 0)), ti_where(ti_cmplt(x, tc_k(x, 0)), tc_k(x, -1), tc_k(x, 1)), tc_k(x, 0));
    s = ti_cast(s, ti_dtype_of(x));
    if (!ta_dtype_is_float(ti_dtype_of(x))) return s;
    return ti_where(ti_cmpne(x, x), x, s);
}

ti_tensor_t *ti_abs(ti_tensor_t *x) { return ti_mul(x, ti_sign(x)); }

ti_tensor_t *ti_logical_not(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_cmpne(ti_cast(x, TACT_BOOL), ti_scalar_bool(ti_tensor_ctx(x), 1));
}

ti_tensor_t *ti_minimum(ti_tensor_t *a, ti_tensor_t *b) { return ti_neg(ti_maximum(ti_neg(a), ti_neg(b))); }

ti_tensor_t *ti_clip(ti_tensor_t *x, double lo, double hi) {
    TC_CHECK(x);
    if (lo == -INFINITY && hi == INFINITY) return x;
    ti_tensor_t *r = lo == -INFINITY ? x : ti_maximum(x, tc_k(x, lo));
    return hi == INFINITY ? r : ti_minimum(r, tc_k(x, hi));
}

ti_tensor_t *ti_lerp(ti_tensor_t *x, ti_tensor_t *end, ti_tensor_t *weight) { return ti_add(x, ti_mul(ti_sub(end, x), weight)); }

/* ------------------------------------------------------------ activations */

ti_tensor_t *ti_elu(ti_tensor_t *x, double alpha) {
    TC_CHECK(x);
    return ti_sub(ti_relu(x), ti_mul(tc_k(x, alpha), ti_relu(ti_sub(tc_k(x, 1), ti_exp(x)))));
}

ti_tensor_t *ti_celu(ti_tensor_t *x, double alpha) {
    TC_CHECK(x);
    ti_tensor_t *e = ti_sub(ti_exp(ti_div(x, tc_k(x, alpha))), tc_k(x, 1));
    return ti_add(ti_maximum(x, tc_k(x, 0)), ti_minimum(ti_mul(tc_k(x, alpha), e), tc_k(x, 0)));
}

ti_tensor_t *ti_swish(ti_tensor_t *x) { return ti_mul(x, ti_sigmoid(x)); }
ti_tensor_t *ti_silu(ti_tensor_t *x) { return ti_swish(x); }

ti_tensor_t *ti_relu6(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_sub(ti_relu(x), ti_relu(ti_sub(x, tc_k(x, 6))));
}

ti_tensor_t *ti_hardswish(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_mul(ti_mul(x, ti_relu6(ti_add(x, tc_k(x, 3)))), tc_k(x, 1.0 / 6));
}

ti_tensor_t *ti_tanh(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_sub(ti_mul(tc_k(x, 2), ti_sigmoid(ti_mul(tc_k(x, 2), x))), tc_k(x, 1));
}

ti_tensor_t *ti_sinh(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_div(ti_sub(ti_exp(x), ti_exp(ti_neg(x))), tc_k(x, 2));
}

ti_tensor_t *ti_cosh(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_div(ti_add(ti_exp(x), ti_exp(ti_neg(x))), tc_k(x, 2));
}

ti_tensor_t *ti_atanh(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_div(ti_log(ti_div(ti_add(tc_k(x, 1), x), ti_sub(tc_k(x, 1), x))), tc_k(x, 2));
}

ti_tensor_t *ti_asinh(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_log(ti_add(x, ti_sqrt(ti_add(ti_square(x), tc_k(x, 1)))));
}

ti_tensor_t *ti_acosh(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_log(ti_add(x, ti_sqrt(ti_sub(ti_square(x), tc_k(x, 1)))));
}

ti_tensor_t *ti_hardtanh(ti_tensor_t *x, double min_val, double max_val) { return ti_clip(x, min_val, max_val); }

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); x^3 is x*x*x (the
 * reference's pow gives the same product for finite x). */
ti_tensor_t *ti_gelu(ti_tensor_t *x) {
    TC_CHECK(x);
    ti_tensor_t *cube = ti_mul(ti_mul(x, x), x);
    ti_tensor_t *in = ti_mul(tc_k(x, sqrt(2 / M_PI)), ti_add(x, ti_mul(tc_k(x, 0.044715), cube)));
    return ti_mul(ti_mul(tc_k(x, 0.5), x), ti_add(tc_k(x, 1), ti_tanh(in)));
}

ti_tensor_t *ti_quick_gelu(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_mul(x, ti_sigmoid(ti_mul(x, tc_k(x, 1.702))));
}

ti_tensor_t *ti_leakyrelu(ti_tensor_t *x, double neg_slope) {
    TC_CHECK(x);
    return ti_sub(ti_relu(x), ti_relu(ti_mul(tc_k(x, -neg_slope), x)));
}

ti_tensor_t *ti_softplus(ti_tensor_t *x, double beta) {
    TC_CHECK(x);
    return ti_mul(tc_k(x, 1 / beta), ti_log(ti_add(tc_k(x, 1), ti_exp(ti_mul(x, tc_k(x, beta))))));
}

ti_tensor_t *ti_mish(ti_tensor_t *x) { return ti_mul(x, ti_tanh(ti_softplus(x, 1))); }

ti_tensor_t *ti_softsign(ti_tensor_t *x) {
    TC_CHECK(x);
    return ti_div(x, ti_add(tc_k(x, 1), ti_abs(x)));
}
