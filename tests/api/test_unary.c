/* test_unary.c - the elementwise math and activation functions of tact.h against PyTorch's answers (golden_unary.inc,
 * made by gen_api_golden.py), and their dtypes and errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#include "golden_unary.inc"

/* The reference suite's forward tolerance: |got - want| <= 1e-6 + 1e-3 |want|
 * (every function meets it; none needs a looser one). */
enum { S_ATOL_E6 = 1, S_RTOL_E3 = 1 };

static tact_tensor *s_apply(const golden_unary_t *g, tact_tensor *x) {
    static const struct {
        const char *name;
        tact_tensor *(*fn)(tact_tensor *);
    } one[] = {{"exp", tact_exp},
               {"log", tact_log},
               {"relu", tact_relu},
               {"sigmoid", tact_sigmoid},
               {"rsqrt", tact_rsqrt},
               {"cos", tact_cos},
               {"tan", tact_tan},
               {"trunc", tact_trunc},
               {"ceil", tact_ceil},
               {"floor", tact_floor},
               {"round", tact_round},
               {"square", tact_square},
               {"sign", tact_sign},
               {"abs", tact_abs},
               {"reciprocal", tact_reciprocal},
               {"swish", tact_swish},
               {"silu", tact_silu},
               {"relu6", tact_relu6},
               {"hardswish", tact_hardswish},
               {"tanh", tact_tanh},
               {"sinh", tact_sinh},
               {"cosh", tact_cosh},
               {"atanh", tact_atanh},
               {"asinh", tact_asinh},
               {"acosh", tact_acosh},
               {"gelu", tact_gelu},
               {"quick_gelu", tact_quick_gelu},
               {"mish", tact_mish},
               {"softsign", tact_softsign}};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
        if (!strcmp(one[i].name, g->fn)) return one[i].fn(x);
    if (!strcmp(g->fn, "elu")) return tact_elu(x, g->p0);
    if (!strcmp(g->fn, "celu")) return tact_celu(x, g->p0);
    if (!strcmp(g->fn, "hardtanh")) return tact_hardtanh(x, g->p0, g->p1);
    if (!strcmp(g->fn, "leakyrelu")) return tact_leakyrelu(x, g->p0);
    if (!strcmp(g->fn, "softplus")) return tact_softplus(x, g->p0);
    cr_assert_fail("no function %s", g->fn);
    return NULL;
}

Test(api_unary, every_function_against_pytorch) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    int checked = 0;
    for (size_t c = 0; c < sizeof golden_unary / sizeof golden_unary[0]; c++) {
        const golden_unary_t *g = &golden_unary[c];
        tact_scope_begin(ctx);
        float zero = 0, *got = malloc(sizeof(float) * (size_t)(g->n ? g->n : 1));
        tact_tensor *x;
        if (g->ints) {
            int32_t iv[64];
            for (int i = 0; i < g->n; i++) iv[i] = (int32_t)g->x[i];
            x = tact_from_data(ctx, TACT_INT32, g->ndim, g->shape, iv);
        } else {
            x = tact_from_data(ctx, TACT_FLOAT32, g->ndim, g->shape, g->n ? (const void *)g->x : &zero);
        }
        tact_tensor *y = s_apply(g, x);
        cr_assert_eq(tact_status_of(y), TACT_OK, "%s: %s", g->fn, tact_error_message(y));
        cr_assert_eq(tact_dtype_of(y), g->out_float ? TACT_FLOAT32 : TACT_INT32, "%s of %s: %s", g->fn, g->ints ? "int32" : "float32",
                     tact_dtype_name(tact_dtype_of(y)));
        y = tact_cast(y, TACT_FLOAT32);
        cr_assert_eq(tact_ndim(y), g->ndim, "%s", g->fn);
        for (int k = 0; k < g->ndim; k++) cr_assert_eq(tact_dim(y, k), g->shape[k], "%s: dim %d", g->fn, k);
        cr_assert_eq(tact_read(y, got, sizeof(float) * (size_t)g->n), TACT_OK, "%s: %s", g->fn, tact_ctx_error(ctx));
        double atol = 1e-6 * S_ATOL_E6;
        for (int i = 0; i < g->n; i++) {
            float w = g->want[i], v = got[i];
            if (isnan(w)) {
                cr_assert(isnan(v), "%s(%a) [case %zu, %d]: %a, not NaN", g->fn, g->x[i], c, i, v);
                continue;
            }
            cr_assert(fabs((double)v - w) <= atol + 1e-3 * S_RTOL_E3 * fabs((double)w) || v == w, "%s(%.9g; %g, %g) [case %zu, %d]: %.9g, not %.9g",
                      g->fn, g->x[i], g->p0, g->p1, c, i, v, w);
            checked++;
        }
        free(got);
        tact_scope_end(ctx);
    }
    cr_assert_gt(checked, 1000);
    tact_ctx_close(&ctx);
}

/* Ints and bools: functions that need floats compute in float32 (the
 * reference's least_upper_float), the others keep the dtype; values as a
 * hand computation gives them. */
Test(api_unary, dtypes_follow_the_reference) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    int32_t v[5] = {-3, -1, 0, 2, 5};
    int64_t n = 5;
    tact_tensor *x = tact_from_data(ctx, TACT_INT32, 1, &n, v);
    tact_tensor *e = tact_exp(x), *r = tact_relu(x), *a = tact_abs(x), *s = tact_sign(x), *q = tact_square(x), *t = tact_tanh(x);
    cr_assert_eq(tact_dtype_of(e), TACT_FLOAT32);
    cr_assert_eq(tact_dtype_of(t), TACT_FLOAT32);
    cr_assert_eq(tact_dtype_of(r), TACT_INT32);
    cr_assert_eq(tact_dtype_of(a), TACT_INT32);
    cr_assert_eq(tact_dtype_of(s), TACT_INT32);
    cr_assert_eq(tact_dtype_of(q), TACT_INT32);
    float ef[5];
    int32_t ri[5], ai[5], si[5], qi[5];
    cr_assert_eq(tact_read(e, ef, sizeof ef), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(r, ri, sizeof ri), TACT_OK);
    cr_assert_eq(tact_read(a, ai, sizeof ai), TACT_OK);
    cr_assert_eq(tact_read(s, si, sizeof si), TACT_OK);
    cr_assert_eq(tact_read(q, qi, sizeof qi), TACT_OK);
    for (int i = 0; i < 5; i++) {
        cr_assert_leq(fabs(ef[i] - exp(v[i])), 1e-6 + 1e-6 * exp(v[i]), "exp(%d) = %.9g", v[i], ef[i]);
        cr_assert_eq(ri[i], v[i] > 0 ? v[i] : 0);
        cr_assert_eq(ai[i], abs(v[i]));
        cr_assert_eq(si[i], (v[i] > 0) - (v[i] < 0));
        cr_assert_eq(qi[i], v[i] * v[i]);
    }
    /* logical_not of an int is a bool: true where the value is 0. */
    uint8_t nb[5];
    tact_tensor *nt = tact_logical_not(x);
    cr_assert_eq(tact_dtype_of(nt), TACT_BOOL);
    cr_assert_eq(tact_read(nt, nb, sizeof nb), TACT_OK);
    for (int i = 0; i < 5; i++) cr_assert_eq(nb[i], v[i] == 0);
    /* clip with one side open, minimum and lerp with a scalar weight. */
    float f[5] = {-2, -0.5f, 0, NAN, 3}, c[5], m[5], l[5];
    tact_tensor *xf = tact_from_data(ctx, TACT_FLOAT32, 1, &n, f);
    cr_assert_eq(tact_read(tact_clip(xf, -1, INFINITY), c, sizeof c), TACT_OK);
    cr_assert_eq(tact_read(tact_minimum(xf, tact_scalar(ctx, 0.25)), m, sizeof m), TACT_OK);
    cr_assert_eq(tact_read(tact_lerp(xf, tact_scalar(ctx, 1.0), tact_scalar(ctx, 0.5)), l, sizeof l), TACT_OK);
    for (int i = 0; i < 5; i++) {
        if (isnan(f[i])) {
            cr_assert(isnan(c[i]) && isnan(m[i]) && isnan(l[i]), "NaN propagates");
            continue;
        }
        cr_assert_eq(c[i], f[i] < -1 ? -1 : f[i]);
        cr_assert_eq(m[i], f[i] < 0.25f ? f[i] : 0.25f);
        cr_assert_eq(l[i], f[i] + (1 - f[i]) * 0.5f);
    }
    tact_ctx_close(&ctx);
}

/* Errors: a NULL argument or an error tensor gives an error tensor naming
 * the cause; a chain of functions fuses into one kernel. */
Test(api_unary, errors_propagate_and_chains_fuse) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    cr_assert_eq(tact_status_of(tact_gelu(NULL)), TACT_EINVAL);
    cr_assert_eq(tact_status_of(tact_softplus(NULL, 1)), TACT_EINVAL);
    tact_tensor *bad = tact_reshape(tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){6}), 1, (int64_t[]){7});
    cr_assert_neq(tact_status_of(bad), TACT_OK);
    tact_tensor *chain = tact_mish(tact_elu(tact_tanh(bad), 1.0));
    cr_assert_eq(tact_status_of(chain), tact_status_of(bad));
    cr_assert_str_eq(tact_error_message(chain), tact_error_message(bad));
    float out[64];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){64}, (float[64]){0});
    cr_assert_eq(tact_realize(ctx, 1, &x), TACT_OK);
    cr_assert_eq(tact_read(tact_gelu(tact_mish(tact_softplus(tact_hardswish(x), 2.0))), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    cr_assert_eq(st.kernels, 1, "%llu kernels", (unsigned long long)st.kernels);
    tact_ctx_close(&ctx);
}
