/* test_strict.c - strict determinism (tact_options.strict, TACT_STRICT): tact's own log2 and sin against double precision, the
 * same bits on every device, and what strict mode refuses (docs/replay.md, Strict mode). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open(const char *devices, int strict) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    o.strict = strict;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

enum { N = 1 << 18 };

/* Inputs over every magnitude: seeded random bit patterns (both signs,
 * subnormals, NaNs and infinities among them), then the special values
 * and numbers near multiples of pi/2 where sin's reduction cancels. */
static void s_inputs(float *x, uint64_t seed) {
    uint64_t st = seed;
    for (int i = 0; i < N; i++) {
        uint32_t b = (uint32_t)tu_rand(&st);
        memcpy(&x[i], &b, 4);
    }
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, 2.0f, 8.0f, 0.5f, 1024.0f, 0x1p-149f, 0x1p-126f, 0x1.fffffep127f, -1.0f,
                             1.5707964f, 3.1415927f, 4.712389f, 6.2831855f, 0x1.921fb6p+20f, 0x1.ca80aep+23f, 0x1.b45ec8p-1f};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) x[i] = special[i];
    for (int k = 1; k < 4096; k++) x[64 + k] = (float)(k * 1.5707963267948966);
}

/* |got - want| in units of the last place of want (as a float); 0 when
 * both are the same NaN or infinity. */
static double s_ulps(double want, float got) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got) ? 0 : INFINITY;
    if (isinf(want) || isinf(got)) return (double)got == want ? 0 : INFINITY;
    float w = fabsf((float)want);
    if (w < 0x1p-126f) w = 0x1p-126f;
    return fabs((double)got - want) / (double)(nextafterf(w, INFINITY) - w);
}

/* log2 and sin in strict mode on the CPU: within 2 ulp of double
 * precision at every input (measured over every positive float: log2
 * 1.37 ulp, sin 1.54), exact where the answer is exact, and the same
 * bits through a vector kernel and through a strided (scalar) one. */
Test(api_strict, log2_and_sin_are_tacts_own_and_within_2_ulp) {
    uint64_t seed = tu_seed();
    float *x = malloc(N * sizeof *x), *lg = malloc(N * sizeof *lg), *sn = malloc(N * sizeof *sn), *t = malloc(N * sizeof *t);
    cr_assert(x && lg && sn && t);
    s_inputs(x, seed);
    tact_ctx *ctx = s_open("CPU", 1);
    tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){N}, x);
    cr_assert_eq(tact_read(tact_log2(tx), lg, N * sizeof *lg), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_sin(tx), sn, N * sizeof *sn), TACT_OK, "%s", tact_ctx_error(ctx));
    double worst_l = 0, worst_s = 0;
    int at_l = 0, at_s = 0;
    for (int i = 0; i < N; i++) {
        double el = s_ulps(x[i] < 0 ? NAN : log2((double)x[i]), lg[i]), es = s_ulps(sin((double)x[i]), sn[i]);
        if (el > worst_l) worst_l = el, at_l = i;
        if (es > worst_s) worst_s = es, at_s = i;
    }
    cr_expect_leq(worst_l, 2.0, "seed %llu: log2(%a) = %a, %.2f ulp from %a", (unsigned long long)seed, x[at_l], lg[at_l], worst_l,
                  log2((double)x[at_l]));
    cr_expect_leq(worst_s, 2.0, "seed %llu: sin(%a) = %a, %.2f ulp from %a", (unsigned long long)seed, x[at_s], sn[at_s], worst_s,
                  sin((double)x[at_s]));
    /* Exact answers: log2 of a power of two, of 1, of 0; sin of a zero keeps its sign. */
    cr_expect(lg[5] == 0.0f && lg[6] == 1.0f && lg[7] == 3.0f && lg[8] == -1.0f && lg[9] == 10.0f && lg[10] == -149.0f && lg[11] == -126.0f,
              "%a %a %a %a %a %a %a", lg[5], lg[6], lg[7], lg[8], lg[9], lg[10], lg[11]);
    cr_expect(isinf(lg[0]) && lg[0] < 0 && isinf(lg[1]) && lg[1] < 0 && isinf(lg[2]) && isnan(lg[3]) && isnan(lg[4]) && isnan(lg[13]));
    cr_expect(sn[0] == 0.0f && !signbit(sn[0]) && sn[1] == 0.0f && signbit(sn[1]) && isnan(sn[2]) && isnan(sn[3]) && isnan(sn[4]));
    /* The same function lane by lane: a transposed read is a scalar kernel. */
    tact_tensor *m = tact_reshape(tx, 2, (int64_t[]){512, N / 512});
    cr_assert_eq(tact_read(tact_contiguous(tact_transpose(tact_log2(tact_transpose(m, 0, 1)), 0, 1)), t, N * sizeof *t), TACT_OK);
    cr_expect(memcmp(t, lg, N * sizeof *t) == 0, "log2 through a strided kernel differs");
    tact_ctx_close(&ctx);
    free(x), free(lg), free(sn), free(t);
}

/* Strict kernels on OpenCL compute the CPU's bits: log, exp, sin, cos,
 * tan, a softmax and a cross-entropy, float32, float16 and bfloat16. */
Test(api_strict, the_same_bits_on_the_cpu_and_opencl) {
    if (!tu_have_device("CL")) {
        cr_skip_test("no OpenCL device");
        return;
    }
    uint64_t seed = tu_seed(), st = seed;
    enum { M = 4096 };
    float *x = malloc(M * sizeof *x);
    cr_assert(x);
    for (int i = 0; i < M; i++) x[i] = (float)((double)(tu_rand(&st) >> 11) / 9007199254740992.0 * 200.0 - 100.0);
    tact_ctx *ctx = s_open("CPU,CL", 1);
    tact_dtype dts[] = {TACT_FLOAT32, TACT_FLOAT16, TACT_BFLOAT16};
    for (size_t d = 0; d < 3; d++) {
        tact_tensor *cpu = tact_cast(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){64, 64}, x), dts[d]);
        tact_tensor *cl = tact_to(cpu, "CL");
        tact_tensor *(*fns[])(tact_tensor *) = {tact_log, tact_exp, tact_sin, tact_cos, tact_tan, tact_log2};
        for (size_t f = 0; f < sizeof fns / sizeof *fns; f++) {
            tact_tensor *a = tact_cast(fns[f](tact_abs(cpu)), TACT_FLOAT32), *b = tact_cast(fns[f](tact_abs(cl)), TACT_FLOAT32);
            float ra[M], rb[M];
            cr_assert_eq(tact_read(a, ra, sizeof ra), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_assert_eq(tact_read(b, rb, sizeof rb), TACT_OK, "%s", tact_ctx_error(ctx));
            int first = -1;
            for (int i = 0; i < M && first < 0; i++)
                if (memcmp(&ra[i], &rb[i], 4) != 0) first = i;
            cr_expect_eq(first, -1, "seed %llu: dtype %s, function %zu: [%d] of %a: CPU %a, CL %a", (unsigned long long)seed,
                         tact_dtype_name(dts[d]), f, first, first < 0 ? 0.0 : (double)fabsf(x[first]), first < 0 ? 0.0 : (double)ra[first],
                         first < 0 ? 0.0 : (double)rb[first]);
        }
    }
    tact_ctx_close(&ctx);
    free(x);
}

/* float64 log2, sin and exp2 would be the platform's: refused at the op,
 * naming it; float32 is computed, and without strict mode float64 too. */
Test(api_strict, float64_transcendentals_are_refused_naming_the_op) {
    tact_ctx *ctx = s_open("CPU", 1);
    tact_tensor *d = tact_from_data(ctx, TACT_FLOAT64, 1, (int64_t[]){2}, (double[]){1.0, 2.0});
    struct {
        tact_tensor *t;
        const char *op;
    } cases[] = {{tact_log(d), "LOG2"}, {tact_sin(d), "SIN"}, {tact_exp(d), "EXP2"}, {tact_cos(d), "SIN"}, {tact_sigmoid(d), "EXP2"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_expect_eq(tact_status_of(cases[i].t), TACT_EDTYPE, "case %zu", i);
        const char *msg = tact_error_message(cases[i].t);
        cr_expect(msg && strstr(msg, "strict mode") && strstr(msg, cases[i].op) && strstr(msg, "float64"), "case %zu: %s", i, msg ? msg : "(none)");
    }
    float f[2];
    cr_expect_eq(tact_read(tact_log(tact_cast(d, TACT_FLOAT32)), f, sizeof f), TACT_OK);
    cr_expect(fabsf(f[1] - 0.6931472f) < 1e-7f, "%a", f[1]);
    tact_ctx_close(&ctx);
    ctx = s_open("CPU", -1);
    double g[2];
    d = tact_from_data(ctx, TACT_FLOAT64, 1, (int64_t[]){2}, (double[]){1.0, 2.0});
    cr_expect_eq(tact_read(tact_log(d), g, sizeof g), TACT_OK);
    cr_expect(fabs(g[1] - 0.6931471805599453) < 1e-15, "%a", g[1]);
    tact_ctx_close(&ctx);
}

/* TACT_STRICT turns it on; tact_options.strict -1 keeps it off; another
 * value is refused; a compiler that relaxes floating point is refused. */
Test(api_strict, the_environment_and_a_relaxing_compiler) {
    setenv("TACT_STRICT", "1", 1);
    tact_ctx *ctx = s_open("CPU", 0);
    tact_tensor *d = tact_from_data(ctx, TACT_FLOAT64, 1, (int64_t[]){1}, (double[]){1.0});
    cr_expect_eq(tact_status_of(tact_log(d)), TACT_EDTYPE, "TACT_STRICT=1 turns strict mode on");
    tact_ctx_close(&ctx);
    ctx = s_open("CPU", -1);
    d = tact_from_data(ctx, TACT_FLOAT64, 1, (int64_t[]){1}, (double[]){1.0});
    cr_expect_eq(tact_status_of(tact_log(d)), TACT_OK, "strict -1 is off whatever TACT_STRICT says");
    tact_ctx_close(&ctx);
    setenv("TACT_STRICT", "yes", 1);
    cr_expect_eq(tact_ctx_open(&ctx, NULL), TACT_EINVAL);
    cr_expect(strstr(tact_last_open_error(), "TACT_STRICT is 'yes'"), "%s", tact_last_open_error());
    unsetenv("TACT_STRICT");
    tact_options o;
    tact_options_default(&o);
    o.strict = 2;
    cr_expect_eq(tact_ctx_open(&ctx, &o), TACT_EINVAL);
    cr_expect(strstr(tact_last_open_error(), "option strict out of range"), "%s", tact_last_open_error());
    const char *relaxing[] = {"cc -ffast-math", "cc -Ofast", "cc -O2 -mrecip=all"};
    for (size_t i = 0; i < 3; i++) {
        setenv("TACT_CC", relaxing[i], 1);
        o.strict = 1;
        cr_expect_eq(tact_ctx_open(&ctx, &o), TACT_EINVAL, "%s", relaxing[i]);
        cr_expect(strstr(tact_last_open_error(), "strict mode") && strstr(tact_last_open_error(), "relaxes floating point"), "%s: %s", relaxing[i],
                  tact_last_open_error());
        o.strict = 0;
        cr_expect_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s outside strict mode: %s", relaxing[i], tact_last_open_error());
        tact_ctx_close(&ctx);
    }
    unsetenv("TACT_CC");
}
