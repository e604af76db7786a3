/* test_half.c - float16 and bfloat16: conversions to and from float32 bit for bit (every 16-bit pattern, NaNs
 * included, and float32s at every rounding boundary, one way and there and back) on every vector width the CPU's kernels take, and matmuls and
 * convolutions of halves (products in float32, one rounding at the end: docs/api.md) against double loops, the
 * same bits for 1 and 8 threads and on the CPU and OpenCL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dtype.h"
#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open(const char *dev, int threads) {
    tact_options o;
    tact_options_default(&o);
    o.devices = dev;
    if (threads) o.cpu_threads = threads;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

static uint32_t s_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float s_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* float32 patterns: a stride through all 2^32, and for every finite
 * 16-bit value of both kinds the midpoint to the next one and the floats
 * on either side of it (where rounding to nearest even decides). */
static uint32_t *s_f32_patterns(size_t *n) {
    size_t cap = (1u << 20) + 6 * 2 * 0x7c00 + 6 * 2 * 0x7f80 + 16, k = 0;
    uint32_t *p = malloc(cap * sizeof *p);
    cr_assert(p);
    for (uint64_t u = 0; u < (1ull << 32); u += 4099) p[k++] = (uint32_t)u;
    for (uint32_t s = 0; s < 2; s++) {
        for (uint32_t h = 0; h < 0x7c00; h++) { /* float16: [h, h + 1] */
            double a = ta_half_to_float((uint16_t)h), b = h + 1 < 0x7c00 ? ta_half_to_float((uint16_t)(h + 1)) : 65536.0;
            uint32_t mid = s_bits((float)((a + b) / 2)) | s << 31;
            p[k++] = mid, p[k++] = mid - 1, p[k++] = mid + 1;
        }
        for (uint32_t h = 0; h < 0x7f80; h++) { /* bfloat16: its midpoints are float32's own */
            uint32_t mid = (h << 16 | 0x8000) | s << 31;
            p[k++] = mid, p[k++] = mid - 1, p[k++] = mid + 1;
        }
    }
    uint32_t special[] = {0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0x7fa00000, 0xffc12345, 0x7f802000, 0x477fefff, 0x477ff000, 0x33000000, 0x33000001};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) p[k++] = special[i];
    *n = k;
    return p;
}

/* The kernels' conversions: numbers as IEEE's (the host's ta_*
 * functions); a NaN keeps its sign and payload both ways, signalling or
 * not (a copy of 16-bit values through float32 registers is exact), and
 * a float32 NaN whose payload's top bits are all zero becomes a quiet one. */
static uint32_t s_want32(uint16_t h, int bf) {
    if (bf) return (h & 0x7fff) > 0x7f80 ? (uint32_t)h << 16 : s_bits(ta_bf16_to_float(h));
    if ((h & 0x7fff) > 0x7c00) return (uint32_t)(h & 0x8000) << 16 | 0x7f800000 | (uint32_t)(h & 0x3ff) << 13;
    return s_bits(ta_half_to_float(h));
}

static uint16_t s_want16(uint32_t u, int bf) {
    if ((u & 0x7fffffff) <= 0x7f800000) return bf ? ta_float_to_bf16(s_float(u)) : ta_float_to_half(s_float(u));
    uint32_t hi = u >> 16, m = (u >> 13) & 0x3ff;
    return (uint16_t)(bf ? hi | ((hi & 0x7f) ? 0 : 0x40) : (hi & 0x8000) | 0x7c00 | (m ? m : 0x200));
}

/* Every vector width the CPU's kernels take here: 16-byte vectors (a lane
 * loop converts), 32 (F16C where the CPU has it), 64 (AVX-512's) and the
 * CPU's own; each context reads TACT_TEST_VECTOR_BYTES as it opens. */
static const char *s_widths[] = {"16", "32", "64", ""};

Test(half, conversions_are_exact_on_every_vector_width) {
    enum { N16 = 65536 };
    uint16_t all[N16];
    for (int i = 0; i < N16; i++) all[i] = (uint16_t)i;
    size_t nf;
    uint32_t *f32 = s_f32_patterns(&nf);
    uint32_t *got32 = malloc(N16 * sizeof *got32);
    uint16_t *got16 = malloc((nf > N16 ? nf : N16) * sizeof *got16);
    uint32_t *back = malloc(nf * sizeof *back);
    cr_assert(got32 && got16 && back);
    for (size_t w = 0; w < sizeof s_widths / sizeof *s_widths; w++) {
        setenv("TACT_TEST_VECTOR_BYTES", s_widths[w], 1);
        tact_ctx *ctx = s_open("CPU", 0);
        for (int bf = 0; bf < 2; bf++) {
            tact_dtype d = bf ? TACT_BFLOAT16 : TACT_FLOAT16;
            const char *dn = bf ? "bfloat16" : "float16";
            tact_tensor *h = tact_from_data(ctx, d, 1, (int64_t[]){N16}, all);
            /* 16 bits to float32: exact, a NaN keeping its bits. */
            cr_assert_eq(tact_read(tact_cast(h, TACT_FLOAT32), got32, N16 * 4), TACT_OK, "%s", tact_ctx_error(ctx));
            int bad = 0;
            for (int i = 0; i < N16 && bad < 5; i++) {
                uint32_t want = s_want32((uint16_t)i, bf);
                if (got32[i] != want) {
                    bad++;
                    cr_expect_eq(got32[i], want, "vectors of %s bytes: %s 0x%04x to float32: 0x%08x, want 0x%08x", s_widths[w], dn, i, got32[i], want);
                }
            }
            /* And back: every pattern, NaNs included, as it was. */
            cr_assert_eq(tact_read(tact_cast(tact_cast(h, TACT_FLOAT32), d), got16, N16 * 2), TACT_OK, "%s", tact_ctx_error(ctx));
            for (int i = 0; i < N16 && bad < 5; i++)
                if (got16[i] != i) {
                    bad++;
                    cr_expect_eq(got16[i], i, "vectors of %s bytes: %s 0x%04x there and back: 0x%04x", s_widths[w], dn, i, got16[i]);
                }
            /* float32 to 16 bits: rounded to nearest even, NaNs as the software makes them. */
            tact_tensor *f = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){(int64_t)nf}, f32);
            cr_assert_eq(tact_read(tact_cast(f, d), got16, nf * 2), TACT_OK, "%s", tact_ctx_error(ctx));
            for (size_t i = 0; i < nf && bad < 5; i++) {
                uint16_t want = s_want16(f32[i], bf);
                if (got16[i] != want) {
                    bad++;
                    cr_expect_eq(got16[i], want, "vectors of %s bytes: float32 0x%08x to %s: 0x%04x, want 0x%04x", s_widths[w], f32[i], dn, got16[i], want);
                }
            }
            /* float32 to 16 bits and back, in one kernel (a tensor of its
             * own: the one above has its 16-bit copy realized): the
             * rounding kept. */
            tact_tensor *f2 = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){(int64_t)nf}, f32);
            cr_assert_eq(tact_read(tact_cast(tact_cast(f2, d), TACT_FLOAT32), back, nf * 4), TACT_OK, "%s", tact_ctx_error(ctx));
            for (size_t i = 0; i < nf && bad < 5; i++) {
                uint32_t want = s_want32(s_want16(f32[i], bf), bf);
                if (back[i] != want) {
                    bad++;
                    cr_expect_eq(back[i], want, "vectors of %s bytes: float32 0x%08x to %s and back: 0x%08x, want 0x%08x", s_widths[w], f32[i], dn, back[i], want);
                }
            }
        }
        tact_ctx_close(&ctx);
    }
    unsetenv("TACT_TEST_VECTOR_BYTES");
    free(f32), free(got32), free(got16), free(back);
}

/* Random 16-bit values in [-2, 2] (their float32 values in x). */
static void s_fill(uint16_t *h, float *x, size_t n, int bf, uint64_t *st) {
    for (size_t i = 0; i < n; i++) {
        float v = (float)((double)(tu_rand(st) % 40001) / 10000.0 - 2.0);
        h[i] = bf ? ta_float_to_bf16(v) : ta_float_to_half(v);
        x[i] = bf ? ta_bf16_to_float(h[i]) : ta_half_to_float(h[i]);
    }
}

/* The spacing of the 16-bit values around |v| (an ulp). */
static double s_ulp(double v, int bf) {
    int e;
    frexp(fabs(v) > 6.2e-5 ? fabs(v) : 6.2e-5, &e);
    return ldexp(1.0, e - (bf ? 8 : 11));
}

/* m x k times k x n of halves: each product exact in float32, the sum in
 * float32 and rounded once, so within half an ulp of the 16-bit result
 * plus the float32 sum's error (k * 2^-24 * sum |a b|) of the double sum. */
Test(half, matmul_of_halves_against_a_double_loop) {
    static const int shapes[][3] = {{64, 64, 64}, {130, 50, 70}, {96, 1024, 256}, {1, 300, 17}, {256, 512, 384}};
    uint64_t seed = tu_seed();
    for (int bf = 0; bf < 2; bf++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
            uint64_t st = seed + s;
            uint16_t *a = malloc((size_t)m * k * 2), *b = malloc((size_t)k * n * 2), *got = malloc((size_t)m * n * 2), *again = malloc((size_t)m * n * 2);
            float *fa = malloc((size_t)m * k * 4), *fb = malloc((size_t)k * n * 4);
            cr_assert(a && b && got && again && fa && fb);
            s_fill(a, fa, (size_t)m * k, bf, &st);
            s_fill(b, fb, (size_t)k * n, bf, &st);
            tact_dtype d = bf ? TACT_BFLOAT16 : TACT_FLOAT16;
            for (int threads = 1; threads <= 8; threads += 7) {
                tact_ctx *ctx = s_open("CPU", threads);
                tact_tensor *r = tact_matmul(tact_from_data(ctx, d, 2, (int64_t[]){m, k}, a), tact_from_data(ctx, d, 2, (int64_t[]){k, n}, b));
                cr_assert_eq(tact_dtype_of(r), d);
                cr_assert_eq(tact_read(r, threads == 1 ? got : again, (size_t)m * n * 2), TACT_OK, "%s", tact_ctx_error(ctx));
                tact_ctx_close(&ctx);
            }
            cr_expect_eq(memcmp(got, again, (size_t)m * n * 2), 0, "%dx%dx%d %s: 1 and 8 threads differ", m, k, n, bf ? "bfloat16" : "float16");
            int bad = 0;
            for (int i = 0; i < m && bad < 5; i++)
                for (int j = 0; j < n && bad < 5; j++) {
                    double ref = 0, mag = 0;
                    for (int q = 0; q < k; q++) ref += (double)fa[i * k + q] * fb[q * n + j], mag += fabs((double)fa[i * k + q] * fb[q * n + j]);
                    double v = bf ? ta_bf16_to_float(got[i * n + j]) : ta_half_to_float(got[i * n + j]), tol = s_ulp(ref, bf) / 2 + k * ldexp(mag, -24);
                    if (fabs(v - ref) > tol) {
                        bad++;
                        cr_expect(0, "seed %llu %s %dx%dx%d [%d][%d] = %.8g, want %.8g (tolerance %.3g)", (unsigned long long)seed, bf ? "bfloat16" : "float16", m, k, n, i, j, v, ref, tol);
                    }
                }
            free(a), free(b), free(got), free(again), free(fa), free(fb);
        }
}

/* The same matmul and a convolution of halves give the CPU's bits on OpenCL. */
Test(half, cpu_and_opencl_agree_bit_for_bit) {
    if (!tu_have_device("CL")) cr_skip_test("no OpenCL device");
    enum { M = 48, K = 80, N = 40 };
    uint64_t seed = tu_seed(), st = seed;
    static uint16_t a[M * K], b[K * N], x[2 * 3 * 10 * 10], w[4 * 3 * 3 * 3], out[2][M * N + 2 * 4 * 8 * 8];
    static float fa[M * K], fb[K * N], fx[2 * 3 * 10 * 10], fw[4 * 3 * 3 * 3];
    for (int bf = 0; bf < 2; bf++) {
        tact_dtype d = bf ? TACT_BFLOAT16 : TACT_FLOAT16;
        s_fill(a, fa, M * K, bf, &st), s_fill(b, fb, K * N, bf, &st), s_fill(x, fx, sizeof x / 2, bf, &st), s_fill(w, fw, sizeof w / 2, bf, &st);
        for (int dev = 0; dev < 2; dev++) {
            tact_ctx *ctx = s_open(dev ? "CL" : "CPU", 0);
            tact_tensor *r = tact_matmul(tact_from_data(ctx, d, 2, (int64_t[]){M, K}, a), tact_from_data(ctx, d, 2, (int64_t[]){K, N}, b));
            tact_tensor *c = tact_conv2d(tact_from_data(ctx, d, 4, (int64_t[]){2, 3, 10, 10}, x), tact_from_data(ctx, d, 4, (int64_t[]){4, 3, 3, 3}, w), NULL, NULL);
            cr_assert_eq(tact_read(r, out[dev], M * N * 2), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_assert_eq(tact_read(c, out[dev] + M * N, 2 * 4 * 8 * 8 * 2), TACT_OK, "%s", tact_ctx_error(ctx));
            tact_ctx_close(&ctx);
        }
        for (int i = 0; i < M * N + 2 * 4 * 8 * 8; i++)
            if (out[0][i] != out[1][i]) cr_assert_fail("seed %llu %s: %s element %d: CPU 0x%04x, CL 0x%04x", (unsigned long long)seed, bf ? "bfloat16" : "float16",
                                                     i < M * N ? "matmul" : "conv2d", i < M * N ? i : i - M * N, out[0][i], out[1][i]);
        /* The convolution against a double loop too. */
        for (int n = 0; n < 2; n++)
            for (int co = 0; co < 4; co++)
                for (int y = 0; y < 8; y++)
                    for (int z = 0; z < 8; z++) {
                        double ref = 0, mag = 0;
                        for (int ci = 0; ci < 3; ci++)
                            for (int p = 0; p < 3; p++)
                                for (int q = 0; q < 3; q++) {
                                    double t = (double)fx[((n * 3 + ci) * 10 + y + p) * 10 + z + q] * fw[((co * 3 + ci) * 3 + p) * 3 + q];
                                    ref += t, mag += fabs(t);
                                }
                        uint16_t g = out[0][M * N + ((n * 4 + co) * 8 + y) * 8 + z];
                        double v = bf ? ta_bf16_to_float(g) : ta_half_to_float(g);
                        cr_expect_leq(fabs(v - ref), s_ulp(ref, bf) / 2 + 27 * ldexp(mag, -24), "seed %llu conv2d [%d][%d][%d][%d] = %.8g, want %.8g",
                                      (unsigned long long)seed, n, co, y, z, v, ref);
                    }
    }
}
