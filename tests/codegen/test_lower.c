/* test_lower.c - the loop IR end to end: every float32 op on the vector and scalar paths, reduces, matmul tiles, gathers,
 * against C references, the same bits for any thread count, and the lowering's choices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ast.h"
#include "cc.h"
#include "device.h"
#include "log.h"
#include "lower.h"
#include "printer.h"
#include "mem.h"
#include "mpread.h"
#include "render.h"
#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open(int threads, const char *log) {
    tact_options o;
    tact_options_default(&o);
    o.cpu_threads = threads;
    o.log_path = log;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

static float *s_rand(uint64_t *rng, size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * (float)((double)(tu_rand(rng) >> 11) / 9007199254740992.0);
    return p;
}

enum { S_ROWS = 8 };
typedef enum { S_EXP2, S_LOG2, S_SIN, S_SQRT, S_RECIP, S_NEG, S_ADD, S_MUL, S_MAX, S_IDIV, S_MOD, S_MULACC, S_NOPS } s_op_t;
static const char *s_names[S_NOPS] = {"exp2", "log2", "sin", "sqrt", "recip", "neg", "add", "mul", "max", "idiv", "mod", "mulacc"};

static tact_tensor *s_apply(s_op_t op, tact_tensor *x, tact_tensor *y, tact_tensor *z) {
    switch (op) {
    case S_EXP2: return tact_exp2(x);
    case S_LOG2: return tact_log2(x);
    case S_SIN: return tact_sin(x);
    case S_SQRT: return tact_sqrt(x);
    case S_RECIP: return tact_recip(x);
    case S_NEG: return tact_neg(x);
    case S_ADD: return tact_add(x, y);
    case S_MUL: return tact_mul(x, y);
    case S_MAX: return tact_maximum(x, y);
    case S_IDIV: return tact_idiv(x, y);
    case S_MOD: return tact_mod(x, y);
    default: return tact_mulacc(x, y, z);
    }
}

/* The reference, in float as the reference Tensor computes float32: IEEE
 * operations are exact, libm's functions within a few ulp of double. */
static float s_ref(s_op_t op, float x, float y, float z) {
    switch (op) {
    case S_EXP2: return exp2f(x);
    case S_LOG2: return log2f(x);
    case S_SIN: return sinf(x);
    case S_SQRT: return sqrtf(x);
    case S_RECIP: return 1.0f / x;
    case S_NEG: return -x;
    case S_ADD: return x + y;
    case S_MUL: return x * y;
    case S_MAX: return x > y ? x : y;
    case S_IDIV: return truncf(x / y);
    case S_MOD: return fmodf(x, y);
    default: {
        float p = x * y;
        return p + z;
    }
    }
}

/* Every float32 op lowered with a vector (rows of 64), without one (8 rows
 * of 63: too few rows to pad) and with a padded vector (16 rows of 62: 3
 * whole vectors and 14 lanes), with a row-broadcast and a scalar
 * operand: IEEE operations give exactly C's float result, exp2, log2 and
 * sin are within 2 ulp of double, and the vector and scalar kernels agree
 * bitwise. */
Test(codegen_lower, every_float32_op_on_the_vector_and_the_scalar_path) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx = s_open(0, NULL);
    for (int op = 0; op < S_NOPS; op++)
        for (int v = 0; v < 3; v++) {
            int rows = v < 2 ? S_ROWS : 2 * S_ROWS, cols = v == 0 ? 64 : v == 1 ? 63 : 62;
            size_t n = (size_t)rows * cols;
            float lo = op == S_LOG2 || op == S_SQRT || op == S_RECIP ? 0.25f : -4.0f;
            float *x = s_rand(&rng, n, lo, 4.0f), *y = s_rand(&rng, (size_t)rows, 0.5f, 3.0f), *out = malloc(n * sizeof *out);
            int64_t shape[2] = {rows, cols}, col[2] = {rows, 1};
            tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
            tact_tensor *ty = tact_from_data(ctx, TACT_FLOAT32, 2, col, y); /* broadcast along the row */
            tact_tensor *r = s_apply((s_op_t)op, tx, ty, tact_scalar(ctx, 0.75));
            cr_assert_eq(tact_read(r, out, n * sizeof *out), TACT_OK, "%s: %s", s_names[op], tact_ctx_error(ctx));
            for (size_t i = 0; i < n; i++) {
                float want = s_ref((s_op_t)op, x[i], y[i / (size_t)cols], 0.75f);
                if (op <= S_SIN)
                    cr_assert(fabsf(out[i] - want) <= 2 * fabsf(nextafterf(want, INFINITY) - want), "seed %#llx: %s(%.9g) = %.9g, not %.9g",
                              (unsigned long long)seed, s_names[op], x[i], out[i], want);
                else
                    cr_assert(memcmp(&out[i], &want, sizeof want) == 0, "seed %#llx: %s of %.9g and %.9g over %d columns: %.9g, not %.9g",
                              (unsigned long long)seed, s_names[op], x[i], y[i / (size_t)cols], cols, out[i], want);
            }
            free(x), free(y), free(out);
        }
    /* NaN propagates through max on both paths. */
    float nan_row[64], ones[64], out[64];
    for (int i = 0; i < 64; i++) nan_row[i] = i % 3 ? (float)i : NAN, ones[i] = 1;
    int64_t s64[1] = {64};
    cr_assert_eq(tact_read(tact_maximum(tact_from_data(ctx, TACT_FLOAT32, 1, s64, nan_row), tact_from_data(ctx, TACT_FLOAT32, 1, s64, ones)),
                           out, sizeof out),
                 TACT_OK);
    for (int i = 0; i < 64; i++) cr_assert(i % 3 ? out[i] == (i ? (float)i : 1) : isnan(out[i]), "element %d: %g", i, out[i]);
    tact_ctx_close(&ctx);
}

/* exp2 is tact's own (a polynomial, not libm): over 64 values (a vector
 * kernel) and their first 63 (a scalar one) the two paths give the same
 * bits, within 1 ulp of double (the subnormal ulp below 2^-126), and the
 * edges exactly: NaN, +-inf, overflow at 128, the smallest subnormal,
 * underflow to 0 at -150, integers exact. */
Test(codegen_lower, exp2_on_both_paths_and_at_the_edges) {
    uint64_t seed = tu_seed(), rng = seed;
    float x[64] = {NAN, INFINITY, -INFINITY, 128.0f, 127.99999f, 127.0f, -126.0f, -149.0f, -149.5f, -150.0f, -149.99f, 0.0f, -0.0f,
                   1.0f, -1.0f, 0.5f, -0.5f, 1e-8f, -1e-8f, 3.0f, -140.3f, 200.0f, -1000.0f};
    for (int i = 23; i < 64; i++) x[i] = -160.0f + 290.0f * (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0);
    float out[64], out63[63];
    tact_ctx *ctx = s_open(0, NULL);
    int64_t s64[1] = {64}, s63[1] = {63};
    cr_assert_eq(tact_read(tact_exp2(tact_from_data(ctx, TACT_FLOAT32, 1, s64, x)), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_exp2(tact_from_data(ctx, TACT_FLOAT32, 1, s63, x)), out63, sizeof out63), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    cr_assert(isnan(out[0]) && out[1] == INFINITY && out[2] == 0 && out[3] == INFINITY && out[5] == 0x1p127f && out[6] == 0x1p-126f &&
                  out[7] == 0x1p-149f && out[8] == 0x1p-149f && out[9] == 0 && out[11] == 1 && out[12] == 1 && out[13] == 2 &&
                  out[14] == 0.5f && out[19] == 8 && out[21] == INFINITY && out[22] == 0,
              "edges");
    for (int i = 0; i < 63; i++) cr_assert(memcmp(&out[i], &out63[i], sizeof out[i]) == 0, "exp2(%a): vector %a, scalar %a", x[i], out[i], out63[i]);
    for (int i = 3; i < 64; i++) {
        double want = exp2((double)x[i]), ulp = fmax(fabs(nextafterf((float)want, INFINITY) - (float)want), 0x1p-149);
        if (want > 0x1.fffffep127) continue; /* overflows: inf, checked above */
        cr_assert_leq(fabs(out[i] - want), ulp, "seed %#llx: exp2(%a) = %a, not %a", (unsigned long long)seed, x[i], out[i], want);
    }
}

/* Reduces with the vector along the reduced dim (rows of 96, lane
 * partials) and along the output (columns), sums against double within
 * 1e-6 of the magnitudes, max exactly; and a transposed read (a gather
 * along the vector). */
Test(codegen_lower, reduces_and_gathers_against_loops) {
    enum { R = 64, C = 96 };
    uint64_t seed = tu_seed(), rng = seed;
    float *x = s_rand(&rng, (size_t)R * C, -2, 2), rows[R], cols[C], rmax[R], t[C * R];
    tact_ctx *ctx = s_open(0, NULL);
    int64_t shape[2] = {R, C};
    int one = 1, zero = 0, order[2] = {1, 0};
    tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    cr_assert_eq(tact_read(tact_sum(tx, 1, &one, 0), rows, sizeof rows), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_sum(tx, 1, &zero, 0), cols, sizeof cols), TACT_OK);
    cr_assert_eq(tact_read(tact_max(tx, 1, &one, 0), rmax, sizeof rmax), TACT_OK);
    cr_assert_eq(tact_read(tact_add(tact_contiguous(tact_permute(tx, order)), tact_scalar(ctx, 0.0)), t, sizeof t), TACT_OK);
    for (int r = 0; r < R; r++) {
        double s = 0, mag = 0;
        float m = -INFINITY;
        for (int c = 0; c < C; c++) s += x[r * C + c], mag += fabs(x[r * C + c]), m = fmaxf(m, x[r * C + c]);
        cr_assert_leq(fabs(rows[r] - s), 1e-6 * mag + 1e-30, "seed %#llx: row %d: %.9g, not %.9g", (unsigned long long)seed, r, rows[r], s);
        cr_assert_eq(rmax[r], m, "row %d max", r);
    }
    for (int c = 0; c < C; c++) {
        double s = 0, mag = 0;
        for (int r = 0; r < R; r++) s += x[r * C + c], mag += fabs(x[r * C + c]);
        cr_assert_leq(fabs(cols[c] - s), 1e-6 * mag, "seed %#llx: column %d", (unsigned long long)seed, c);
        for (int r = 0; r < R; r++) cr_assert_eq(t[c * R + r], x[r * C + c]);
    }
    tact_ctx_close(&ctx);
    free(x);
}

/* Matmuls of tiled and untiled shapes (five blocked over K, packed on
 * AVX2: two in blocks of 200 with a padded last column tile, 80 rows of
 * them in two items; one with a single column tile, its pack inside the
 * K blocks' loop; on AVX2 items of 40, 56 and 64 rows in tiles of 6 and a
 * short one; six with a padded last tile: one vector, two, N below one
 * vector, many tiles, the only tile of a row of two vectors) against a double
 * loop within 1e-5 of the sum of magnitudes, with the same bits for 1 and
 * 8 threads, with the tiles of each x86 target (SSE, AVX2, AVX-512:
 * TACT_TEST_VECTOR_BYTES, whatever this machine has). */
Test(codegen_lower, matmuls_of_many_shapes_against_a_double_loop) {
    static const int shapes[][3] = {{64, 64, 64}, {24, 40, 48}, {1, 64, 16}, {9, 7, 5}, {16, 300, 32}, {40, 12, 100}, {128, 512, 640},
                                    {16, 70, 100}, {24, 33, 60}, {8, 10, 15}, {16, 5, 900}, {16, 8, 29}, {18, 64, 29}, {64, 768, 384},
                                    {40, 600, 452}, {56, 100, 64}, {80, 600, 452}, {48, 16384, 16}, {512, 64, 64}, {1000, 64, 64}};
    static const char *targets[] = {"16", "32", "64"};
    uint64_t seed = tu_seed(), rng = seed;
    for (size_t s = 0; s < 3 * sizeof shapes / sizeof shapes[0]; s++) {
        const char *vb = targets[s % 3];
        setenv("TACT_TEST_VECTOR_BYTES", vb, 1);
        int m = shapes[s / 3][0], k = shapes[s / 3][1], n = shapes[s / 3][2];
        float *a = s_rand(&rng, (size_t)m * k, -1, 1), *b = s_rand(&rng, (size_t)k * n, -1, 1);
        float *o1 = malloc(sizeof *o1 * (size_t)m * n), *o8 = malloc(sizeof *o8 * (size_t)m * n);
        for (int pass = 0; pass < 2; pass++) {
            tact_ctx *ctx = s_open(pass ? 8 : 1, NULL);
            int64_t sa[2] = {m, k}, sb[2] = {k, n};
            cr_assert_eq(tact_read(tact_matmul(tact_from_data(ctx, TACT_FLOAT32, 2, sa, a), tact_from_data(ctx, TACT_FLOAT32, 2, sb, b)),
                                   pass ? o8 : o1, sizeof *o1 * (size_t)m * n),
                         TACT_OK, "%s", tact_ctx_error(ctx));
            tact_ctx_close(&ctx);
        }
        cr_assert(memcmp(o1, o8, sizeof *o1 * (size_t)m * n) == 0, "%dx%dx%d, %s-byte vectors: 1 and 8 threads differ", m, k, n, vb);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double want = 0, mag = 0;
                for (int q = 0; q < k; q++) want += (double)a[i * k + q] * b[q * n + j], mag += fabs((double)a[i * k + q] * b[q * n + j]);
                cr_assert_leq(fabs(o1[i * n + j] - want), 1e-5 * mag + 1e-30, "seed %#llx: %dx%dx%d, %s-byte vectors [%d,%d]: %.9g, not %.9g",
                              (unsigned long long)seed, m, k, n, vb, i, j, o1[i * n + j], want);
            }
        free(a), free(b), free(o1), free(o8);
    }
    unsetenv("TACT_TEST_VECTOR_BYTES");
}

/* Padded convolutions (masked reduces, scalar-tiled over two output dims,
 * or columns and a matmul) and their input gradients against double
 * loops, within 1e-5 of the magnitudes; the same bits for 1 and 8
 * threads. */
Test(codegen_lower, masked_tiles_of_convolutions_against_loops) {
    /* One input channel: windows of 9 values, the masked pooling view's
     * scalar tiles; more: the columns and the matmul (tact_conv2d). */
    static const int shapes[][6] = {{4, 6, 8, 10, 10, 1}, {3, 5, 12, 9, 7, 2}, {2, 16, 32, 14, 14, 1}, {5, 3, 4, 6, 11, 0}, {4, 1, 8, 10, 10, 1}, {3, 1, 16, 9, 7, 2}};
    uint64_t seed = tu_seed(), rng = seed;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int bn = shapes[s][0], ci = shapes[s][1], co = shapes[s][2], h = shapes[s][3], w = shapes[s][4], pd = shapes[s][5];
        int oh = h + 2 * pd - 2, ow = w + 2 * pd - 2;
        size_t nx = (size_t)bn * ci * h * w, nw = (size_t)co * ci * 9, no = (size_t)bn * co * oh * ow;
        float *x = s_rand(&rng, nx, -1, 1), *wt = s_rand(&rng, nw, -1, 1);
        float *out[2], *gx[2], *gw[2];
        for (int pass = 0; pass < 2; pass++) {
            out[pass] = malloc(sizeof(float) * no), gx[pass] = malloc(sizeof(float) * nx), gw[pass] = malloc(sizeof(float) * nw);
            tact_ctx *ctx = s_open(pass ? 8 : 1, NULL);
            tact_window win;
            tact_window_default(&win);
            win.npad = 1, win.padding[0] = pd;
            tact_tensor *tx = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){bn, ci, h, w}, x), 1);
            tact_tensor *tw = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){co, ci, 3, 3}, wt), 1);
            tact_tensor *y = tact_conv2d(tx, tw, NULL, &win);
            cr_assert_eq(tact_read(y, out[pass], sizeof(float) * no), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_assert_eq(tact_backward(tact_sum(y, -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_assert_eq(tact_read(tact_grad(tx), gx[pass], sizeof(float) * nx), TACT_OK, "%s", tact_ctx_error(ctx));
            cr_assert_eq(tact_read(tact_grad(tw), gw[pass], sizeof(float) * nw), TACT_OK, "%s", tact_ctx_error(ctx));
            tact_ctx_close(&ctx);
        }
        cr_assert(memcmp(out[0], out[1], sizeof(float) * no) == 0 && memcmp(gx[0], gx[1], sizeof(float) * nx) == 0 &&
                      memcmp(gw[0], gw[1], sizeof(float) * nw) == 0,
                  "conv %zu: 1 and 8 threads differ", s);
        /* d sum(y) / dw[o,c,u,v] = the sum of the inputs it touches. */
        for (int o = 0; o < co; o++)
            for (int c = 0; c < ci; c++)
                for (int u = 0; u < 3; u++)
                    for (int v = 0; v < 3; v++) {
                        double want = 0, mag = 0;
                        for (int b = 0; b < bn; b++)
                            for (int i = 0; i < oh; i++)
                                for (int j = 0; j < ow; j++) {
                                    int yy = i + u - pd, xx = j + v - pd;
                                    if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                                    double p = x[((size_t)(b * ci + c) * h + yy) * w + xx];
                                    want += p, mag += fabs(p);
                                }
                        float got = gw[0][(size_t)(o * ci + c) * 9 + u * 3 + v];
                        cr_assert_leq(fabs(got - want), 1e-5 * mag + 1e-30, "seed %#llx: conv %zu weight grad [%d,%d,%d,%d]: %.9g, not %.9g",
                                      (unsigned long long)seed, s, o, c, u, v, got, want);
                    }
        for (int b = 0; b < bn; b++)
            for (int o = 0; o < co; o++)
                for (int i = 0; i < oh; i++)
                    for (int j = 0; j < ow; j++) {
                        double want = 0, mag = 0;
                        for (int c = 0; c < ci; c++)
                            for (int u = 0; u < 3; u++)
                                for (int v = 0; v < 3; v++) {
                                    int yy = i + u - pd, xx = j + v - pd;
                                    if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                                    double p = (double)x[((size_t)(b * ci + c) * h + yy) * w + xx] * wt[(size_t)(o * ci + c) * 9 + u * 3 + v];
                                    want += p, mag += fabs(p);
                                }
                        float got = out[0][((size_t)(b * co + o) * oh + i) * ow + j];
                        cr_assert_leq(fabs(got - want), 1e-5 * mag + 1e-30, "seed %#llx: conv %zu [%d,%d,%d,%d]: %.9g, not %.9g",
                                      (unsigned long long)seed, s, b, o, i, j, got, want);
                    }
        /* d sum(y) / dx[b,c,yy,xx] = the sum of the weights that touch it. */
        for (int b = 0; b < bn; b++)
            for (int c = 0; c < ci; c++)
                for (int yy = 0; yy < h; yy++)
                    for (int xx = 0; xx < w; xx++) {
                        double want = 0, mag = 0;
                        for (int o = 0; o < co; o++)
                            for (int u = 0; u < 3; u++)
                                for (int v = 0; v < 3; v++) {
                                    int i = yy - u + pd, j = xx - v + pd;
                                    if (i < 0 || i >= oh || j < 0 || j >= ow) continue;
                                    double p = wt[(size_t)(o * ci + c) * 9 + u * 3 + v];
                                    want += p, mag += fabs(p);
                                }
                        float got = gx[0][((size_t)(b * ci + c) * h + yy) * w + xx];
                        cr_assert_leq(fabs(got - want), 1e-5 * mag + 1e-30, "seed %#llx: conv %zu grad [%d,%d,%d,%d]: %.9g, not %.9g",
                                      (unsigned long long)seed, s, b, c, yy, xx, got, want);
                    }
        free(x), free(wt);
        for (int p = 0; p < 2; p++) free(out[p]), free(gx[p]), free(gw[p]);
    }
}

/* Column sums and maxes of 512 x 640 (blocked: 8 rows at a time over runs
 * of 128 columns, the partials waiting in the output): sums within 1e-5 of
 * the magnitudes of a double loop (512 float additions in row order, the
 * order blocking keeps), maxes exact, the same bits for 1 and 8 threads. */
Test(codegen_lower, blocked_column_reduces_against_loops) {
    enum { R = 512, C = 640 };
    uint64_t seed = tu_seed(), rng = seed;
    float *x = s_rand(&rng, (size_t)R * C, -2, 2), sums[2][C], maxes[2][C];
    for (int pass = 0; pass < 2; pass++) {
        tact_ctx *ctx = s_open(pass ? 8 : 1, NULL);
        int64_t shape[2] = {R, C};
        int zero = 0;
        tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
        cr_assert_eq(tact_read(tact_sum(tx, 1, &zero, 0), sums[pass], sizeof sums[pass]), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(tact_max(tx, 1, &zero, 0), maxes[pass], sizeof maxes[pass]), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_ctx_close(&ctx);
    }
    cr_assert(memcmp(sums[0], sums[1], sizeof sums[0]) == 0 && memcmp(maxes[0], maxes[1], sizeof maxes[0]) == 0, "1 and 8 threads differ");
    for (int c = 0; c < C; c++) {
        double want = 0, mag = 0;
        float m = -INFINITY;
        for (int r = 0; r < R; r++) want += x[r * C + c], mag += fabs(x[r * C + c]), m = fmaxf(m, x[r * C + c]);
        cr_assert_leq(fabs(sums[0][c] - want), 1e-5 * mag, "seed %#llx: column %d: %.9g, not %.9g", (unsigned long long)seed, c, sums[0][c], want);
        cr_assert_eq(maxes[0][c], m, "seed %#llx: column %d max", (unsigned long long)seed, c);
    }
    free(x);
}

/* The kernels' ASTs of a recorded run (at most max), for lowering. */
typedef struct {
    ta_ast_t *asts;
    int n, max;
} s_asts_t;

static void s_take_asts(const ta_msg_t *m, void *ud) {
    s_asts_t *a = ud;
    ta_recs_it_t it;
    ta_kernel_rec_t kr;
    ta_error_t err;
    ta_recs_begin(&it, &m->as.kernels.kernels);
    while (a->n < a->max && ta_recs_next(&it, &kr)) {
        ta_mpr_t r;
        ta_mpr_init(&r, kr.ast.ptr, kr.ast.len);
        cr_assert_eq(ta_ast_unpack(&a->asts[a->n++], &r, &err), TACT_OK, "%s", err.text);
    }
}

/* The lanes of l's register tile: the product of its UPCAST axes. */
static int64_t s_upcasts(const ta_lir_t *l) {
    int64_t ups = 1;
    for (int x = 0; x < l->naxes; x++)
        if (l->axes[x].kind == TA_AXIS_UPCAST) ups *= l->axes[x].size;
    return ups;
}

static int s_recorded_asts(const char *log_path, ta_ast_t *asts, int max) {
    s_asts_t a = {asts, 0, max};
    tu_log_sent(log_path, "scheduler", TA_MSG_KERNELS, s_take_asts, &a);
    return a.n;
}

/* The one kernel the log at path recorded (the test fails unless there is exactly one). */
static const ta_ast_t *s_one_ast(const char *path) {
    static ta_ast_t asts[2];
    int n = s_recorded_asts(path, asts, 2);
    cr_assert_eq(n, 1, "%d kernels, not one", n);
    return &asts[0];
}

/* Kernel k lowered for the C printer on a machine of bytes-wide vector
 * registers with fused multiply-adds (AVX2: 32, AVX-512: 64). */
static const ta_lir_t *s_lower_for(const ta_ast_t *k, int bytes) {
    static ta_lir_t l;
    ta_error_t err;
    ta_target_t t = {&ta_printer_c, bytes, 1, 1, 0, NULL, 0};
    cr_assert_eq(ta_lower(k, &t, &l, &err), TACT_OK, "%s", err.text);
    return &l;
}

/* What lowering chooses: a matmul gets the 8-row x 2-vector register tile
 * of 16 lanes on a 64-byte target (8 rows of one padded vector of 8 lanes
 * for N = 36, no vector without vector registers), a large one also
 * blocks of 256 of K around work items of 64 rows (on a 32-byte target
 * with B's panel packed), a large column sum
 * blocks of 8 rows around runs of 128 columns, a row sum a vector
 * along the row with 4 rows side by side, an int32 kernel no vector. */
Test(codegen_lower, the_lowering_chooses_register_tiles_and_vectors) {
    char *path = tu_tmpfile("lower");
    tact_ctx *ctx = s_open(1, path);
    float *a = calloc(1024 * 1100, sizeof *a);
    int64_t s1[2] = {64, 64}, s2[2] = {40, 1100}, s3[2] = {1100, 36}, si[1] = {64}, s4[2] = {128, 512}, s5[2] = {512, 640}, s6[2] = {1024, 640};
    int one = 1;
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, s1, a);
    tact_tensor *outs[6] = {tact_matmul(x, x), tact_matmul(tact_from_data(ctx, TACT_FLOAT32, 2, s2, a), tact_from_data(ctx, TACT_FLOAT32, 2, s3, a)),
                            tact_sum(x, 1, &one, 0), tact_add(tact_zeros(ctx, TACT_INT32, 1, si), tact_scalar_int(ctx, 3)),
                            tact_matmul(tact_from_data(ctx, TACT_FLOAT32, 2, s4, a), tact_from_data(ctx, TACT_FLOAT32, 2, s5, a)),
                            tact_sum(tact_from_data(ctx, TACT_FLOAT32, 2, s6, a), 1, (int[]){0}, 0)};
    cr_assert_eq(tact_realize(ctx, 6, outs), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    static ta_ast_t asts[8];
    int n = s_recorded_asts(path, asts, 8);
    cr_assert_eq(n, 6, "%d kernels", n);
    static ta_lir_t l;
    ta_error_t err;
    ta_target_t avx512 = {&ta_printer_c, 64, 1, 1, 0, NULL, 0}, none = {&ta_printer_c, 0, 0, 1, 0, NULL, 0};
    int found[6] = {0};
    for (int i = 0; i < n; i++) {
        const ta_ast_t *k = &asts[i];
        cr_assert_eq(ta_lower(k, &avx512, &l, &err), TACT_OK, "%s", err.text);
        int vdim = l.vector >= 0 ? l.axes[l.vector].dim : -1;
        int64_t ups = s_upcasts(&l);
        if (k->ndim == 3 && k->shape[0] == 64) { /* 64x64x64: one item of 64 rows, five tiles of 12 x 2 vectors and one of 4 rows */
            cr_assert(l.width == 16 && vdim == 1 && ups == 24 && l.align == 64 * 64 && l.tail_rows == 4, "width %d dim %d upcasts %lld align %lld tail %lld",
                      l.width, vdim, (long long)ups, (long long)l.align, (long long)l.tail_rows);
            cr_assert(l.nodes[k->nodes[k->nnodes - 2].src[0]].fused, "the product is a fused multiply-add");
            for (int x2 = 0; x2 < l.naxes; x2++) cr_assert(!l.axes[x2].outer, "64x64x64 is not blocked");
            found[0] = 1;
        } else if (k->ndim == 3 && k->shape[0] == 128) { /* 128x512x640: blocks of 256 of K around 64-row work items */
            int outer = -1;
            for (int x2 = 0; x2 < l.naxes; x2++)
                if (l.axes[x2].outer) outer = x2;
            cr_assert(outer == 1 && l.axes[outer].kind == TA_AXIS_REDUCE && l.axes[outer].size == 2 && l.axes[outer].mult == 256,
                      "an outer reduce of 2 blocks of 256 (axis %d)", outer);
            /* AVX-512 (32 registers): tiles of 12 rows x 2 vectors of 16
             * (24 accumulators), five of them and a last one of 4 rows in
             * each 64, and B's panel (the load that does not depend on the
             * row tiles) packed inside the column tiles' loop, before the
             * row tiles. */
            int packed = 0;
            for (int i2 = 0; i2 < k->nnodes; i2++) packed += l.nodes[i2].packed;
            cr_assert(l.width == 16 && ups == 24 && l.align == 64 * 640 && l.post_level == 3 && l.pack_level == 2 && l.axes[2].size == 640 / 32 &&
                          l.axes[3].size == 6 && l.tail_axis == 3 && l.tail_rows == 4 && packed == 1,
                      "width %d upcasts %lld align %lld post_level %d pack_level %d tail %d/%lld packed %d", l.width, (long long)ups, (long long)l.align,
                      l.post_level, l.pack_level, l.tail_axis, (long long)l.tail_rows, packed);
            /* AVX2 (16 registers): the same blocks, tiles of 6 rows x 2
             * vectors of 8 (12 accumulators), ten of them and a last one
             * of 4 rows in each 64, B's panel packed, and A's rows (the
             * load that depends on the row tiles, not the column tiles)
             * packed once per block of K, around the column tiles. */
            ta_target_t avx2 = {&ta_printer_c, 32, 1, 1, 0, NULL, 0};
            cr_assert_eq(ta_lower(k, &avx2, &l, &err), TACT_OK, "%s", err.text);
            packed = 0;
            int apacked = 0;
            ups = s_upcasts(&l);
            for (int i2 = 0; i2 < k->nnodes; i2++) packed += l.nodes[i2].packed, apacked += l.nodes[i2].apacked;
            cr_assert(l.width == 8 && ups == 12 && l.align == 64 * 640 && l.post_level == 3 && l.pack_level == 2 && l.axes[2].kind == TA_AXIS_LOOP &&
                          l.axes[2].size == 640 / 16 && l.axes[3].size == 11 && l.tail_axis == 3 && l.tail_rows == 4 && packed == 1 &&
                          l.apack_level == 1 && apacked == 1,
                      "width %d upcasts %lld post_level %d pack_level %d tail %d/%lld packed %d apack_level %d apacked %d", l.width, (long long)ups,
                      l.post_level, l.pack_level, l.tail_axis, (long long)l.tail_rows, packed, l.apack_level, apacked);
            found[4] = 1;
        } else if (k->ndim == 3) {
            /* 40x1100x36: 16 lanes would pad 36 to 48, 8 lanes to 40 (at
             * most 1/8 more): 8 rows of one vector of 8, 4 whole tiles and
             * a masked last one; 4 lanes without padding. */
            cr_assert(l.width == 8 && vdim == 1 && ups == 8 && l.pad >= 0 && l.pad_dim == 1 && l.pad_full == 4 && l.axes[l.pad].size == 5,
                      "width %d dim %d upcasts %lld pad %d", l.width, vdim, (long long)ups, l.pad);
            ta_target_t avx = {&ta_printer_c, 16, 1, 1, 0, NULL, 0};
            cr_assert_eq(ta_lower(k, &avx, &l, &err), TACT_OK);
            cr_assert(l.width == 4 && l.pad < 0, "width %d pad %d", l.width, l.pad);
            found[1] = 1;
        } else if (k->reduce_mask == 1) { /* column sums of 1024 x 640: blocks of 8 rows around tiles of runs of 128 columns */
            cr_assert(l.width == 16 && l.axes[1].outer && l.axes[1].size == 128 && l.axes[1].mult == 8 && l.align == 128 && ups == 2,
                      "width %d outer %d size %lld align %lld", l.width, l.axes[1].outer, (long long)l.axes[1].size, (long long)l.align);
            found[5] = 1;
        } else if (k->reduce_mask) { /* row sums */
            cr_assert(l.width == 16 && l.axes[l.vector].reduce && ups == 4, "width %d upcasts %lld", l.width, (long long)ups);
            found[2] = 1;
        } else {
            cr_assert_eq(l.width, 1, "int32 kernels get no vector");
            found[3] = 1;
        }
        cr_assert_eq(ta_lower(k, &none, &l, &err), TACT_OK);
        cr_assert_eq(l.width, 1);
    }
    cr_assert(found[0] && found[1] && found[2] && found[3] && found[4] && found[5]);
    unlink(path);
    free(path);
    free(a);
}

/* A padded convolution of one input channel (the pooling view, not
 * columns) reads its padded input from a buffer of its own, so neither it
 * nor its weight gradient has masks: the convolution takes vectors along
 * the output's rows with rows of channels (x is the same along them), the
 * weight gradient (a reduce along the vector) a tile of the window's 3
 * column offsets (the output's gradient is the same along them) x 4
 * channels (the input is).  Values: masked_tiles_of_convolutions_against_loops. */
Test(codegen_lower, a_padded_convolution_reads_its_input_unmasked) {
    char *path = tu_tmpfile("padconv");
    tact_ctx *ctx = s_open(2, path);
    float *z = calloc(4 * 8 * 16 * 16, sizeof *z);
    tact_window win;
    tact_window_default(&win);
    win.npad = 1, win.padding[0] = 1;
    tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){4, 1, 16, 16}, z);
    tact_tensor *tw = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){8, 1, 3, 3}, z), 1);
    tact_tensor *y = tact_conv2d(tx, tw, NULL, &win), *r = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){4, 8, 16, 16}, z);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(y, r), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *outs[2] = {y, tact_grad(tw)};
    cr_assert_eq(tact_realize(ctx, 2, outs), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    static ta_ast_t asts[16];
    int n = s_recorded_asts(path, asts, 16), conv = 0, wgrad = 0;
    for (int i = 0; i < n; i++) {
        const ta_ast_t *k = &asts[i];
        if (!k->reduce_mask) continue;
        const ta_lir_t *l = s_lower_for(k, 32);
        char name[64];
        ta_ast_name(k, name, sizeof name);
        if (!strcmp(name, "r_4_8_16_16_3_3")) { /* the convolution: (4, 8, 16, 16) over the window */
            cr_assert(l->width == 8 && s_upcasts(l) >= 4, "%s: width %d, %lld lanes", name, l->width, (long long)s_upcasts(l));
            conv = 1;
        } else if (!strcmp(name, "r_8_3_3_4_16_16")) { /* the weight gradient: (8, 3, 3) over the batch and positions */
            cr_assert(l->width == 8 && s_upcasts(l) == 12, "%s: width %d, %lld lanes", name, l->width, (long long)s_upcasts(l));
            wgrad = 1;
        }
    }
    cr_assert(conv && wgrad, "%d kernels: convolution %d, weight gradient %d", n, conv, wgrad);
    unlink(path);
    free(path);
    free(z);
}

/* Dims every view reads as one run are merged before lowering (ast.c's
 * ta_ast_merge_dims): a batch norm's sum of squares over (8, 4, 14, 14)
 * reduces (8, 4, 196), whose 196 takes vectors of 4 where 14 took none;
 * a 2x nearest upsampling's rows and columns stay apart (merged, each
 * position would be a division), its batch and channels merge.  Values
 * against loops. */
Test(codegen_lower, dims_read_as_one_run_are_merged) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { N = 8, C = 4, H = 14 };
    float *x = s_rand(&rng, N * C * H * H, -1, 1), sq[C], up[N * C * 4 * H * H];
    char *path = tu_tmpfile("merge");
    tact_ctx *ctx = s_open(2, path);
    tact_tensor *xt = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){N, C, H, H}, x);
    int axes[3] = {0, 2, 3};
    cr_assert_eq(tact_read(tact_sum(tact_mul(xt, xt), 3, axes, 0), sq, sizeof sq), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *six = tact_reshape(xt, 6, (int64_t[]){N, C, H, 1, H, 1});
    tact_tensor *big = tact_reshape(tact_expand(six, 6, (int64_t[]){N, C, H, 2, H, 2}), 4, (int64_t[]){N, C, 2 * H, 2 * H});
    cr_assert_eq(tact_read(tact_add(big, tact_scalar(ctx, 1)), up, sizeof up), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    for (int c = 0; c < C; c++) {
        double want = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < H * H; i++) want += (double)x[(n * C + c) * H * H + i] * x[(n * C + c) * H * H + i];
        cr_assert_float_eq(sq[c], want, 1e-4 * want, "seed %llu: channel %d: %g, want %g", (unsigned long long)seed, c, sq[c], want);
    }
    for (int q = 0; q < N * C; q++)
        for (int y = 0; y < 2 * H; y++)
            for (int z = 0; z < 2 * H; z++)
                cr_assert_eq(up[(q * 2 * H + y) * 2 * H + z], x[(q * H + y / 2) * H + z / 2] + 1.0f, "seed %llu: (%d, %d, %d)", (unsigned long long)seed, q, y, z);
    static ta_ast_t asts[4];
    cr_assert_eq(s_recorded_asts(path, asts, 4), 2);
    static ta_lir_t l;
    ta_error_t err;
    ta_target_t avx512 = {&ta_printer_c, 64, 1, 1, 0, NULL, 0};
    for (int i = 0; i < 2; i++) {
        ta_ast_t *k = &asts[i];
        int n = ta_ast_merge_dims(k);
        if (k->reduce_mask) {
            cr_assert(n == 1 && k->ndim == 3 && k->shape[0] == N && k->shape[1] == C && k->shape[2] == H * H && k->reduce_mask == 5,
                      "%d merges: %d dims (%lld, %lld, %lld), mask %#x", n, k->ndim, (long long)k->shape[0], (long long)k->shape[1], (long long)k->shape[2],
                      k->reduce_mask);
            cr_assert_eq(ta_lower(k, &avx512, &l, &err), TACT_OK, "%s", err.text);
            cr_assert(l.vector >= 0 && l.axes[l.vector].dim == 2 && l.width == 4, "a vector of 4 over the 196 (width %d)", l.width);
        } else {
            cr_assert(n == 1 && k->ndim == 3 && k->shape[0] == N * C && k->shape[1] == 2 * H && k->shape[2] == 2 * H, "%d merges: %d dims (%lld, ...)",
                      n, k->ndim, (long long)k->shape[0]);
        }
    }
    unlink(path);
    free(path);
    free(x);
}

/* A matmul whose columns take one vector of 16 (144 = 9 x 16, not pairs
 * of them): tiles of 16 rows on a 64-byte target (32 registers); on a
 * 32-byte one 144 takes pairs of 8, in 6 x 2 tiles; values against a
 * double loop. */
Test(codegen_lower, one_vector_wide_matmuls_take_16_rows_with_32_registers) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { M = 32, K = 200, N = 144 };
    float *a = s_rand(&rng, M * K, -1, 1), *b = s_rand(&rng, K * N, -1, 1), got[M * N];
    char *path = tu_tmpfile("wide");
    tact_ctx *ctx = s_open(2, path);
    tact_tensor *r = tact_matmul(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){M, K}, a), tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){K, N}, b));
    cr_assert_eq(tact_read(r, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0, mag = 0;
            for (int q = 0; q < K; q++) want += (double)a[i * K + q] * b[q * N + j], mag += fabs((double)a[i * K + q] * b[q * N + j]);
            cr_assert_float_eq(got[i * N + j], want, K * mag * 6e-8, "seed %llu: [%d][%d] = %g, want %g", (unsigned long long)seed, i, j, got[i * N + j], want);
        }
    const ta_ast_t *k = s_one_ast(path);
    for (int bytes = 32; bytes <= 64; bytes *= 2) {
        const ta_lir_t *l = s_lower_for(k, bytes);
        int64_t ups = s_upcasts(l);
        int want = bytes == 64 ? 16 : 12;
        cr_assert(l->width == bytes / 4 && ups == want, "%d-byte target: width %d, %lld rows (want %d)", bytes, l->width, (long long)ups, want);
    }
    unlink(path);
    free(path);
    free(a), free(b);
}

/* A matmul summed over two dims, a convolution's weight gradient
 * (out[o][j] = sum over b and p of A[b][o][p] B[b][p][j]): tiles of 6 rows
 * (AVX2) or 12 (AVX-512) x 2 vectors in items of 16 rows, the outer sum's
 * steps as blocks (an outer REDUCE of B steps) so each step's block of B
 * serves the item's row tiles from L1.  Values against a double loop on
 * 16-, 32- and 64-byte vectors, 1 and 8 threads bitwise equal. */
Test(codegen_lower, a_sum_over_two_dims_is_blocked_by_its_outer_dim) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { B = 6, O = 32, P = 50, J = 64 };
    float *a = s_rand(&rng, B * O * P, -1, 1), *b = s_rand(&rng, B * P * J, -1, 1), got[2][O * J];
    static const char *targets[] = {"16", "32", "64"};
    char *path = tu_tmpfile("two");
    for (int t = 0; t < 3; t++) {
        setenv("TACT_TEST_VECTOR_BYTES", targets[t], 1);
        for (int pass = 0; pass < 2; pass++) {
            tact_ctx *ctx = s_open(pass ? 8 : 1, t == 0 && pass == 0 ? path : NULL);
            tact_tensor *ta = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){B, O, P, 1}, a);
            tact_tensor *tb = tact_from_data(ctx, TACT_FLOAT32, 4, (int64_t[]){B, 1, P, J}, b);
            tact_tensor *r = tact_sum(tact_mul(ta, tb), 2, (int[]){0, 2}, 0);
            cr_assert_eq(tact_read(r, got[pass], sizeof got[pass]), TACT_OK, "%s", tact_ctx_error(ctx));
            tact_ctx_close(&ctx);
        }
        cr_assert(memcmp(got[0], got[1], sizeof got[0]) == 0, "%s-byte vectors: 1 and 8 threads differ", targets[t]);
        for (int o = 0; o < O; o++)
            for (int j = 0; j < J; j++) {
                double want = 0, mag = 0;
                for (int q = 0; q < B; q++)
                    for (int p = 0; p < P; p++) {
                        double v = (double)a[(q * O + o) * P + p] * b[(q * P + p) * J + j];
                        want += v, mag += fabs(v);
                    }
                cr_assert_leq(fabs(got[0][o * J + j] - want), 1e-5 * mag + 1e-30, "seed %llu, %s-byte vectors: [%d][%d] = %g, want %g",
                              (unsigned long long)seed, targets[t], o, j, got[0][o * J + j], want);
            }
    }
    unsetenv("TACT_TEST_VECTOR_BYTES");
    const ta_ast_t *k = s_one_ast(path);
    for (int bytes = 32; bytes <= 64; bytes *= 2) {
        const ta_lir_t *l = s_lower_for(k, bytes);
        int outer = -1;
        for (int x = 0; x < l->naxes; x++)
            if (l->axes[x].outer) outer = x;
        int rows = bytes == 64 ? 12 : 6;
        cr_assert(outer >= 0 && l->axes[outer].size == B && l->align == 16 * J && s_upcasts(l) == 2 * rows && l->tail_rows == 16 % rows,
                  "%d-byte target: outer axis %d, align %lld, %lld lanes, tail %lld", bytes, outer, (long long)l->align, (long long)s_upcasts(l),
                  (long long)l->tail_rows);
    }
    unlink(path);
    free(path);
    free(a), free(b);
}

/* Work items of a matmul's rows: the most rows up to 128 that divide them,
 * leave 4 items and are whole tiles (of 6 or 5 rows on AVX2, 12 or 10 on
 * AVX-512), or a multiple of 8 wasting at most 1/20 of the tiles' rows
 * (512 rows: 4 items of 128, B's panel packed 4 times instead of 8;
 * 1000: 8 items of 125 in tiles of 5 on AVX2, 10 of 100 in tiles of 10
 * on AVX-512, no short tile), else 64 to 24 leaving 8 items (128 rows: 2
 * items of 64, 32 would waste 4 of every 36 rows on AVX2).  Values:
 * matmuls_of_many_shapes_against_a_double_loop. */
Test(codegen_lower, matmul_items_of_up_to_128_rows) {
    static const int rows[3] = {512, 128, 1000}, want[3][2] = {{128, 128}, {64, 64}, {125, 100}};
    for (int c = 0; c < 3; c++) {
        char *path = tu_tmpfile("items");
        float *z = calloc((size_t)rows[c] * 64, sizeof *z);
        tact_ctx *ctx = s_open(1, path);
        tact_tensor *r = tact_matmul(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){rows[c], 64}, z), tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){64, 64}, z));
        cr_assert_eq(tact_realize(ctx, 1, &r), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_ctx_close(&ctx);
        const ta_ast_t *k = s_one_ast(path);
        for (int bytes = 32; bytes <= 64; bytes *= 2) {
            const ta_lir_t *l = s_lower_for(k, bytes);
            int w = want[c][bytes == 64];
            cr_assert(l->align == (int64_t)w * 64, "%d rows, %d-byte target: items of %lld outputs, want %d rows", rows[c], bytes, (long long)l->align, w);
            if (rows[c] == 1000)
                cr_assert(s_upcasts(l) == (bytes == 32 ? 10 : 20) && l->tail_rows == 0, "1000 rows, %d-byte target: %lld lanes, a short tile of %lld",
                          bytes, (long long)s_upcasts(l), (long long)l->tail_rows);
        }
        unlink(path);
        free(path);
        free(z);
    }
}

/* Rows of 14 in vectors of 8 (a padded dim: a whole tile and a masked
 * one) reading a per-block parameter through a flat index
 * (p[(row * 14 + col) / 196], as a batch norm's gradient reads its
 * channel's statistics through a pool's windows): in the whole tile every
 * lane stays in its row, so the read is one value for all lanes; in the
 * last one a lane past the end would be in the next row, so it is read
 * lane by lane (q[row][col / 12]: one value in the whole tile, two in the
 * last).  Values exact on 16-, 32- and 64-byte vectors. */
Test(codegen_lower, a_padded_row_reads_a_per_block_value_once_in_its_whole_tiles) {
    enum { R = 56, W = 14, P = R * W / 196 };
    uint64_t seed = tu_seed(), rng = seed;
    float *x = s_rand(&rng, R * W + 2, -1, 1), *pv = s_rand(&rng, P, -1, 1), *q = s_rand(&rng, R * 2, -1, 1), got[R * W];
    static const char *targets[] = {"16", "32", "64"};
    char *path = tu_tmpfile("rows");
    for (int t = 0; t < 3; t++) {
        setenv("TACT_TEST_VECTOR_BYTES", targets[t], 1);
        tact_ctx *ctx = s_open(2, t == 1 ? path : NULL);
        tact_tensor *tp = tact_reshape(tact_expand(tact_reshape(tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){P}, pv), 2, (int64_t[]){P, 1}), 2,
                                                   (int64_t[]){P, 196}),
                                       2, (int64_t[]){R, W});
        cr_assert_eq(tact_read(tact_add(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, W}, x), tp), got, sizeof got), TACT_OK, "%s",
                     tact_ctx_error(ctx));
        for (int i = 0; i < R * W; i++)
            cr_assert_eq(got[i], x[i] + pv[i / 196], "seed %llu, %s-byte vectors: [%d] = %g, want %g", (unsigned long long)seed, targets[t], i, got[i],
                         x[i] + pv[i / 196]);
        /* q[row][col / 12]: one value in the whole tile (cols 0-7), two in
         * the last (cols 8-11, 12-13). */
        tact_tensor *tq = tact_reshape(tact_expand(tact_reshape(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, 2}, q), 3, (int64_t[]){R, 2, 1}), 3,
                                                   (int64_t[]){R, 2, 12}),
                                       2, (int64_t[]){R, 24});
        tq = tact_shrink(tq, (const int64_t[][2]){{0, R}, {0, W}});
        /* (three rows read along the vector make it worth one, though q's read is not) */
        tact_tensor *sum3 = tact_add(tact_add(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, W}, x), tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, W}, x + 1)),
                                     tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, W}, x + 2));
        cr_assert_eq(tact_read(tact_add(sum3, tq), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_ctx_close(&ctx);
        for (int i = 0; i < R * W; i++) {
            float want = x[i] + x[i + 1] + x[i + 2] + q[i / W * 2 + i % W / 12];
            cr_assert_eq(got[i], want, "seed %llu, %s-byte vectors: [%d][%d] = %g, want %g", (unsigned long long)seed, targets[t], i / W, i % W, got[i], want);
        }
    }
    unsetenv("TACT_TEST_VECTOR_BYTES");
    static ta_ast_t asts[4];
    cr_assert_eq(s_recorded_asts(path, asts, 4), 2);
    int found = 0;
    for (int k = 0; k < 2; k++) {
        const ta_lir_t *l = s_lower_for(&asts[k], 32);
        cr_assert(l->width == 8 && l->pad >= 0 && l->pad_full == 1, "width %d pad %d full %lld", l->width, l->pad, (long long)l->pad_full);
        for (int i = 0; i < asts[k].nnodes; i++) {
            const ta_ast_node_t *n = &asts[k].nodes[i];
            if (n->op != TA_OP_LOAD || (asts[k].buf_size[n->buf] != P && asts[k].buf_size[n->buf] != 2 * R)) continue;
            cr_assert(l->nodes[i].access == TA_ACCESS_BROADCAST && l->nodes[i].access_last == TA_ACCESS_GATHER,
                      "kernel %d: the parameter's read: %d in whole tiles, %d in the last", k, l->nodes[i].access, l->nodes[i].access_last);
            found++;
        }
    }
    cr_assert_eq(found, 2, "%d loads of the parameters", found);
    unlink(path);
    free(path);
    free(x), free(pv), free(q);
}

/* x @ W^T read as it is (both operands along the reduce, x of 16 rows:
 * no copy of W^T): 4 rows of W^T x 2 of x side by side with 16 vector
 * registers (4 x 4 spills), 4 x 4 with 32.  Values against a double loop. */
Test(codegen_lower, a_matmul_along_its_reduce_takes_tiles_that_fit_the_registers) {
    enum { M = 16, K = 64, N = 32 };
    uint64_t seed = tu_seed(), rng = seed;
    float *x = s_rand(&rng, M * K, -1, 1), *w = s_rand(&rng, N * K, -1, 1), got[M * N];
    char *path = tu_tmpfile("nt");
    tact_ctx *ctx = s_open(2, path);
    tact_tensor *r = tact_matmul(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){M, K}, x),
                                 tact_transpose(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, K}, w), 0, 1));
    cr_assert_eq(tact_read(r, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0, mag = 0;
            for (int q = 0; q < K; q++) want += (double)x[i * K + q] * w[j * K + q], mag += fabs((double)x[i * K + q] * w[j * K + q]);
            cr_assert_leq(fabs(got[i * N + j] - want), 1e-5 * mag + 1e-30, "seed %llu: [%d][%d] = %g, want %g", (unsigned long long)seed, i, j, got[i * N + j], want);
        }
    const ta_ast_t *k = s_one_ast(path);
    for (int bytes = 32; bytes <= 64; bytes *= 2) {
        const ta_lir_t *l = s_lower_for(k, bytes);
        cr_assert(l->vector >= 0 && l->axes[l->vector].reduce && s_upcasts(l) == (bytes == 32 ? 8 : 16), "%d-byte target: %lld lanes", bytes,
                  (long long)s_upcasts(l));
    }
    unlink(path);
    free(path);
    free(x), free(w);
}

/* The windows of a padded image stacked along a new last dim (an unfold):
 * each load's mask picks its piece by that dim's index, so the lowering
 * unrolls the dim whole (an UPCAST of 9 lanes) and every lane keeps only
 * its own piece's load.  Values against a loop. */
Test(codegen_lower, stacked_windows_are_unrolled_along_the_stack) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { N = 3, H = 5, W = 7 };
    float *x = s_rand(&rng, N * H * W, -1, 1), got[N * H * W * 9];
    char *path = tu_tmpfile("stack");
    tact_ctx *ctx = s_open(2, path);
    tact_tensor *xt = tact_from_data(ctx, TACT_FLOAT32, 3, (int64_t[]){N, H, W}, x);
    tact_tensor *padded = tact_pad2d(xt, 4, (int64_t[]){1, 1, 1, 1}, 0), *pieces[9];
    for (int q = 0; q < 9; q++) pieces[q] = tact_shrink(padded, (const int64_t[][2]){{0, N}, {q / 3, q / 3 + H}, {q % 3, q % 3 + W}});
    cr_assert_eq(tact_read(tact_stack(9, pieces, -1), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    for (int n = 0; n < N; n++)
        for (int y = 0; y < H; y++)
            for (int xx = 0; xx < W; xx++)
                for (int q = 0; q < 9; q++) {
                    int sy = y + q / 3 - 1, sx = xx + q % 3 - 1;
                    float want = sy < 0 || sy >= H || sx < 0 || sx >= W ? 0 : x[(n * H + sy) * W + sx];
                    float g = got[((n * H + y) * W + xx) * 9 + q];
                    cr_assert_eq(g, want, "seed %#llx: (%d, %d, %d) window %d: %g, not %g", (unsigned long long)seed, n, y, xx, q, (double)g, (double)want);
                }
    static ta_ast_t asts[2];
    cr_assert_eq(s_recorded_asts(path, asts, 2), 1);
    static ta_lir_t l;
    ta_error_t err;
    ta_target_t avx512 = {&ta_printer_c, 64, 1, 1, 0, NULL, 0};
    cr_assert_eq(ta_lower(&asts[0], &avx512, &l, &err), TACT_OK, "%s", err.text);
    int up = -1;
    for (int a = 0; a < l.naxes; a++)
        if (l.axes[a].kind == TA_AXIS_UPCAST) up = a;
    cr_assert(up >= 0 && l.axes[up].size == 9 && l.axes[up].dim == asts[0].ndim - 1, "an UPCAST of the 9 windows (axis %d)", up);
    unlink(path);
    /* Two long pieces stacked along dim 0: unrolling it would leave one
     * work item (one thread), so it is not. */
    ctx = s_open(2, path);
    float *y = s_rand(&rng, 2 * 4096, -1, 1), out2[2 * 4096];
    tact_tensor *two[2] = {tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){4096}, y), tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){4096}, y + 4096)};
    cr_assert_eq(tact_read(tact_stack(2, two, 0), out2, sizeof out2), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    cr_assert(memcmp(out2, y, sizeof out2) == 0, "stack along dim 0");
    cr_assert_eq(s_recorded_asts(path, asts, 2), 1);
    cr_assert_eq(ta_lower(&asts[0], &avx512, &l, &err), TACT_OK, "%s", err.text);
    cr_assert_geq(l.items, 16, "%lld work items", (long long)l.items);
    unlink(path);
    free(path);
    free(x), free(y);
}

/* Row sums (the vector on the reduced dim, rows side by side): the
 * printer folds the rows' vector accumulators pairwise with shuffles, and
 * every output keeps the bits of one vector's fixed tree (lane l sums
 * elements l, l + W, ...; then lanes l and l + w are added, w = W/2 down
 * to 1), computed here on the host. */
Test(codegen_lower, row_sums_fold_their_lanes_in_the_fixed_tree) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { R = 8, C = 256 };
    float *x = s_rand(&rng, R * C, -1, 1), got[R];
    for (int i = 0; i < R * C; i += 7) x[i] *= 1e4f; /* the order of the additions shows in the bits */
    char *path = tu_tmpfile("rowsum");
    tact_ctx *ctx = s_open(2, path);
    int one = 1;
    cr_assert_eq(tact_read(tact_sum(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C}, x), 1, &one, 0), got, sizeof got), TACT_OK, "%s",
                 tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    static ta_ast_t asts[2];
    cr_assert_eq(s_recorded_asts(path, asts, 2), 1);
    static ta_lir_t l;
    ta_error_t err;
    ta_target_t host = ta_target_host();
    cr_assert_eq(ta_lower(&asts[0], &host, &l, &err), TACT_OK, "%s", err.text);
    int W = l.width;
    if (W > 1) {
        cr_assert(l.axes[l.vector].reduce && ta_lir_nlanes(&l) >= 2, "a vector along the row, rows side by side");
        char *src, name[64];
        int64_t align;
        cr_assert_eq(ta_render_c(&asts[0], &src, name, sizeof name, &align, &err), TACT_OK, "%s", err.text);
        cr_assert(strstr(src, "__builtin_shufflevector"), "%s", src);
        ta_free(src);
    }
    for (int r = 0; r < R; r++) {
        float h[64] = {0};
        for (int k = 0; k < C; k++) h[k % W] = h[k % W] + x[r * C + k];
        for (int w = W / 2; w; w /= 2)
            for (int i = 0; i < w; i++) h[i] = h[i] + h[i + w];
        cr_assert_eq(got[r], h[0], "seed %#llx: row %d: %.9g, the tree gives %.9g", (unsigned long long)seed, r, (double)got[r], (double)h[0]);
    }
    unlink(path);
    free(path);
    free(x);
}

/* The fold of more accumulators than lanes: x @ w^T (both along the
 * reduce) rendered for 4-lane vectors gets 4 x 4 accumulators of 4 lanes,
 * built and run here; every output keeps the bits of its own lanes' fused
 * multiply-adds added in tact_vsum's tree, computed on the host. */
Test(codegen_lower, a_tile_of_more_accumulators_than_lanes_folds_in_the_tree) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { M = 8, N = 8, K = 64, W = 4 };
    float *x = s_rand(&rng, M * K, -1, 1), *w = s_rand(&rng, N * K, -1, 1), got[M * N];
    for (int i = 0; i < M * K; i += 5) x[i] *= 1e3f;
    char *path = tu_tmpfile("tree4");
    tact_ctx *ctx = s_open(1, path);
    tact_tensor *xt = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){M, K}, x), *wt = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, K}, w);
    cr_assert_eq(tact_read(tact_matmul(xt, tact_transpose(wt, 0, 1)), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    static ta_ast_t asts[2];
    cr_assert_eq(s_recorded_asts(path, asts, 2), 1);
    ta_target_t narrow = {&ta_printer_c, 4 * W, 1, 1, 0, NULL, 0};
    char *src, name[64];
    int64_t align;
    int width;
    ta_error_t err;
    cr_assert_eq(ta_render_c_for(&asts[0], &narrow, &src, name, sizeof name, &align, &width, &err), TACT_OK, "%s", err.text);
    cr_assert(width == W && strstr(src, "hs1_0") && strstr(src, "float red15"), "16 accumulators of %d lanes: %s", width, src);
    char *dir = tu_tmpfile("tree4cache");
    unlink(dir);
    ta_program_t prog;
    uint8_t *obj = NULL;
    size_t len;
    char digest[33];
    cr_assert_eq(ta_cc_build(ta_cc_compiler(), dir, name, src, TA_CC_FULL, &prog, &obj, &len, digest, 60, NULL, NULL, &err), TACT_OK, "%s", err.text);
    ta_cpu_kernel_t run;
    cr_assert_eq(ta_cpu_kernel_load(obj, len, name, &run, &err), TACT_OK, "%s", err.text);
    cr_assert(run.fn && asts[0].nbufs == 3);
    float out[M * N];
    void *bufs[3] = {out, x, w};
    run.fn(0, M * N, bufs, NULL);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float h[W] = {0};
            for (int k = 0; k < K; k++) h[k % W] = fmaf(x[m * K + k], w[n * K + k], h[k % W]);
            for (int s = W / 2; s; s /= 2)
                for (int i = 0; i < s; i++) h[i] = h[i] + h[i + s];
            cr_assert_eq(out[m * N + n], h[0], "seed %#llx: [%d, %d]: %.9g, the tree gives %.9g", (unsigned long long)seed, m, n, (double)out[m * N + n],
                         (double)h[0]);
            cr_assert(fabsf(out[m * N + n] - got[m * N + n]) <= 1e-3f * (1 + fabsf(got[m * N + n])), "[%d, %d] against the host's kernel", m, n);
        }
    ta_cpu_kernel_unload(&run);
    ta_free(obj), ta_free(src);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    unlink(path);
    free(dir), free(path), free(x), free(w);
}

/* Masks on vectors: a relu's gradient (where(x > 0, g, 0)), a max pool's
 * (where(x != m, 0, 1) / count * g with m and count read at x / 2: each
 * element for two lanes), a 2x upsampling, in rows of 64 and of 14 (a
 * padded last tile), and a WHERE whose condition is one per row take a
 * VECTOR, comparisons as lanes of -1 or 0, and give the bits of a loop
 * doing the same float operations, NaN included. */
Test(codegen_lower, comparisons_wheres_and_halved_reads_on_vectors_against_loops) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { R = 16, C = 64 };
    float *x = s_rand(&rng, R * C, -1, 1), *g = s_rand(&rng, R * C, -1, 1), *m = s_rand(&rng, R * C / 2, -1, 1), *cnt = s_rand(&rng, R * C / 2, 1, 2);
    for (int i = 0; i < R * C; i += 9) x[i] = 0.0f;
    for (int i = 0; i < R * C; i += 31) x[i] = NAN;
    for (int i = 0; i < R * C / 2; i += 3) m[i] = x[2 * i + 1]; /* ties with the max */
    char *path = tu_tmpfile("vmask");
    tact_ctx *ctx = s_open(2, path);
    int64_t full[2] = {R, C}, half[2] = {R, C / 2};
    tact_tensor *xt = tact_from_data(ctx, TACT_FLOAT32, 2, full, x), *gt = tact_from_data(ctx, TACT_FLOAT32, 2, full, g);
    tact_tensor *mt = tact_repeat_interleave(tact_from_data(ctx, TACT_FLOAT32, 2, half, m), 2, 1);
    tact_tensor *ct = tact_repeat_interleave(tact_from_data(ctx, TACT_FLOAT32, 2, half, cnt), 2, 1);
    tact_tensor *zero = tact_zeros(ctx, TACT_FLOAT32, 2, full), *one = tact_ones(ctx, TACT_FLOAT32, 2, full);
    /* A condition the same along the vector (one per row): a scalar. */
    tact_tensor *rowc = tact_expand(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, 1}, g), 2, full);
    tact_tensor *outs[4] = {tact_where(tact_gt(xt, zero), gt, zero),
                            tact_mul(tact_mul(tact_where(tact_ne(xt, mt), zero, one), tact_recip(ct)), gt), tact_mul(mt, gt),
                            tact_where(tact_lt(rowc, zero), xt, gt)};
    cr_assert_eq(tact_realize(ctx, 4, outs), TACT_OK, "%s", tact_ctx_error(ctx));
    float got[4][R * C];
    for (int k = 0; k < 4; k++) cr_assert_eq(tact_read(outs[k], got[k], sizeof got[k]), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    for (int i = 0; i < R * C; i++) {
        int r = i / C, c = i % C;
        float mi = m[r * (C / 2) + c / 2], ci = cnt[r * (C / 2) + c / 2];
        float want[4] = {0.0f < x[i] ? g[i] : 0.0f, (x[i] != mi ? 0.0f : 1.0f) * (1.0f / ci) * g[i], mi * g[i], g[r] < 0.0f ? x[i] : g[i]};
        for (int k = 0; k < 4; k++)
            cr_assert(memcmp(&got[k][i], &want[k], sizeof want[k]) == 0, "seed %#llx: output %d [%d]: %.9g, not %.9g", (unsigned long long)seed, k, i,
                      (double)got[k][i], (double)want[k]);
    }
    /* The lowering's choices: every kernel a vector, the halved reads HALF. */
    static ta_ast_t asts[8];
    int n = s_recorded_asts(path, asts, 8), halves = 0;
    cr_assert_geq(n, 1);
    static ta_lir_t l;
    ta_error_t err;
    ta_target_t avx512 = {&ta_printer_c, 64, 1, 1, 0, NULL, 0};
    for (int k = 0; k < n; k++) {
        cr_assert_eq(ta_lower(&asts[k], &avx512, &l, &err), TACT_OK, "%s", err.text);
        cr_assert_gt(l.width, 1, "kernel %d has no vector", k);
        for (int i = 0; i < asts[k].nnodes; i++) halves += l.nodes[i].access == TA_ACCESS_HALF;
    }
    cr_assert_geq(halves, 2, "%d HALF loads", halves);
    int scalar_cond = 0;
    for (int k = 0; k < n; k++) {
        cr_assert_eq(ta_lower(&asts[k], &avx512, &l, &err), TACT_OK, "%s", err.text);
        for (int i = 0; i < asts[k].nnodes; i++)
            scalar_cond += asts[k].nodes[i].op == TA_OP_WHERE && !l.nodes[asts[k].nodes[i].src[0]].vector && l.nodes[i].vector;
    }
    cr_assert_geq(scalar_cond, 1, "a WHERE with a scalar condition on vectors");
    unlink(path);
    /* Rows of 14 upsampled from 7: no width divides 14, so its tiles of 8
     * are padded and the last one reads only the lanes inside it. */
    enum { S = 14 };
    float *h = s_rand(&rng, R * S / 2, -1, 1), *w14 = s_rand(&rng, R * S, -1, 1), up[R * S];
    ctx = s_open(2, path);
    tact_tensor *u = tact_mul(tact_repeat_interleave(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, S / 2}, h), 2, 1),
                              tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, S}, w14));
    cr_assert_eq(tact_read(u, up, sizeof up), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    for (int i = 0; i < R * S; i++) {
        float want = h[i / S * (S / 2) + i % S / 2] * w14[i];
        cr_assert(memcmp(&up[i], &want, sizeof want) == 0, "seed %#llx: upsampled [%d]: %.9g, not %.9g", (unsigned long long)seed, i, (double)up[i],
                  (double)want);
    }
    cr_assert_eq(s_recorded_asts(path, asts, 8), 1);
    cr_assert_eq(ta_lower(&asts[0], &avx512, &l, &err), TACT_OK, "%s", err.text);
    halves = 0;
    for (int i = 0; i < asts[0].nnodes; i++) halves += l.nodes[i].access == TA_ACCESS_HALF;
    cr_assert(l.width > 1 && l.pad >= 0 && halves == 1, "width %d pad %d, %d HALF loads", l.width, l.pad, halves);
    unlink(path);
    free(path), free(x), free(g), free(m), free(cnt), free(h), free(w14);
}

/* A new target costs one table: a printer made here from C's spellings
 * (without half loads or the lanes' shuffle tree) at 16-byte vectors
 * renders the kernels of x w and of a row sum of squares; built and
 * run here, they give the host target's results (the sums in another
 * order: within 1e-5).  ta_printer_find knows the languages it speaks. */
Test(codegen_lower, a_new_target_is_one_printer_table) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { M = 8, K = 64, N = 12 };
    float *x = s_rand(&rng, M * K, -1, 1), *w = s_rand(&rng, K * N, -1, 1), mm[M * N], rows[M];
    char *path = tu_tmpfile("fake_target");
    tact_ctx *ctx = s_open(1, path);
    tact_tensor *xt = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){M, K}, x), *wt = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){K, N}, w);
    tact_tensor *outs[2] = {tact_matmul(xt, wt), tact_sum(tact_mul(xt, xt), 1, (int[]){1}, 0)};
    cr_assert_eq(tact_realize(ctx, 2, outs), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(outs[0], mm, sizeof mm), TACT_OK);
    cr_assert_eq(tact_read(outs[1], rows, sizeof rows), TACT_OK);
    tact_ctx_close(&ctx);
    static ta_ast_t asts[4];
    int nk = s_recorded_asts(path, asts, 4);
    char names[200] = "";
    for (int k = 0; k < nk; k++) ta_ast_name(&asts[k], names + strlen(names), sizeof names - strlen(names)), strcat(names, " ");
    cr_assert_eq(nk, 2, "kernels: %s", names);
    static ta_printer_t fake;
    fake = ta_printer_c;
    fake.language = "C (a test's: 16-byte vectors, no shuffles)";
    fake.half_loads = 0;
    fake.sum_tree = 0;
    ta_target_t t = {&fake, 16, 1, 1, 0, NULL, 0};
    char *dir = tu_tmpfile("fake_target_cache");
    unlink(dir);
    for (int k = 0; k < 2; k++) {
        char *src, name[64];
        int64_t align;
        int width;
        ta_error_t err;
        cr_assert_eq(ta_render_c_for(&asts[k], &t, &src, name, sizeof name, &align, &width, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(width, 4, "kernel %d: vectors of 4 lanes: %s", k, src);
        cr_assert(!strstr(src, "tact_vload_half(data") && !strstr(src, "hs0_0"), "no half loads, no shuffle tree: %s", src);
        ta_program_t prog;
        ta_cpu_kernel_t run;
        uint8_t *obj = NULL;
        size_t len;
        char digest[33];
        cr_assert_eq(ta_cc_build(ta_cc_compiler(), dir, name, src, TA_CC_FULL, &prog, &obj, &len, digest, 60, NULL, NULL, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ta_cpu_kernel_load(obj, len, name, &run, &err), TACT_OK, "%s", err.text);
        float got[M * N];
        int64_t n = k ? M : M * N;
        cr_assert_eq(asts[k].nbufs, k ? 2 : 3);
        void *bufs[3] = {got, x, w};
        run.fn(0, n, bufs, NULL);
        const float *want = k ? rows : mm;
        for (int64_t i = 0; i < n; i++)
            cr_assert(fabsf(got[i] - want[i]) <= 1e-5f * (1 + fabsf(want[i])), "seed %#llx, kernel %d, output %lld: %.9g, host target %.9g",
                      (unsigned long long)seed, k, (long long)i, (double)got[i], (double)want[i]);
        ta_cpu_kernel_unload(&run);
        ta_free(obj), ta_free(src);
    }
    cr_assert_eq(ta_printer_find("C"), &ta_printer_c);
    cr_assert_eq(ta_printer_find("OpenCL C"), &ta_printer_cl);
    cr_assert_null(ta_printer_find("CUDA C"));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    unlink(path);
    free(path), free(dir), free(x), free(w);
}

/* An embedding's weight gradient (d W[j][c] = sum over n of (words[n] ==
 * j) * g[n][c]) is a scatter: the reduce over the words outside the row
 * (an outer REDUCE that skips each word of another row), one row a work
 * item, vectors along the row on 32- and 64-byte targets, scalars without
 * vectors; no other kernel of the step is one.  Values against a double loop on 16-, 32- and
 * 64-byte vectors with repeated and out-of-range words, 1 and 8 threads
 * bitwise equal. */
Test(codegen_lower, an_embeddings_gradient_is_a_scatter) {
    uint64_t seed = tu_seed(), rng = seed;
    enum { R = 300, C = 32, N = 64 };
    float *g = s_rand(&rng, N * C, -1, 1), got[2][R * C];
    int32_t words[N];
    for (int n = 0; n < N; n++) words[n] = (int32_t)(tu_rand(&rng) % (R + 20)) - 10; /* some out of range, some repeated */
    static const char *targets[] = {"16", "32", "64"};
    char *path = tu_tmpfile("scatter");
    for (int t = 0; t < 3; t++) {
        setenv("TACT_TEST_VECTOR_BYTES", targets[t], 1);
        for (int pass = 0; pass < 2; pass++) {
            tact_ctx *ctx = s_open(pass ? 8 : 1, t == 0 && pass == 0 ? path : NULL);
            tact_layer emb;
            cr_assert_eq(tact_layer_embedding(&emb, ctx, R, C), TACT_OK);
            tact_tensor *y = tact_layer_forward(&emb, tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, words), 1);
            cr_assert_eq(tact_backward(tact_sum_all(tact_mul(y, tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, C}, g))), NULL), TACT_OK, "%s",
                         tact_ctx_error(ctx));
            cr_assert_eq(tact_read(tact_grad(emb.weight), got[pass], sizeof got[pass]), TACT_OK, "%s", tact_ctx_error(ctx));
            tact_ctx_close(&ctx);
        }
        cr_assert(memcmp(got[0], got[1], sizeof got[0]) == 0, "%s-byte vectors: 1 and 8 threads differ", targets[t]);
        for (int j = 0; j < R; j++)
            for (int c = 0; c < C; c++) {
                double want = 0, mag = 0;
                for (int n = 0; n < N; n++)
                    if (words[n] == j) want += g[n * C + c], mag += fabs(g[n * C + c]);
                cr_assert_float_eq(got[0][j * C + c], want, N * mag * 6e-8 + 1e-30, "seed %llu, %s bytes: [%d][%d] = %g, want %g", (unsigned long long)seed,
                                   targets[t], j, c, got[0][j * C + c], want);
            }
    }
    unsetenv("TACT_TEST_VECTOR_BYTES");
    static ta_ast_t asts[16];
    int n = s_recorded_asts(path, asts, 16), scatters = 0, dim;
    for (int i = 0; i < n; i++) {
        int guard = ta_ast_scatter(&asts[i], &dim);
        if (guard < 0) continue;
        char name[64];
        ta_ast_name(&asts[i], name, sizeof name);
        scatters++;
        for (int bytes = 0; bytes <= 64; bytes += 32) {
            const ta_lir_t *l = s_lower_for(&asts[i], bytes);
            cr_expect(l->naxes > 1 && l->axes[1].kind == TA_AXIS_REDUCE && l->axes[1].outer && l->axes[1].skip == guard, "%s, %d bytes: no skipping outer reduce",
                      name, bytes);
            cr_expect_eq(l->items, R, "%s, %d bytes: %lld items, not a row each", name, bytes, (long long)l->items);
            cr_expect_eq(l->width, bytes ? bytes / 4 : 1, "%s, %d bytes: width %d", name, bytes, l->width);
        }
    }
    cr_expect_eq(scatters, 1, "%d scatters among %d kernels", scatters, n);
    unlink(path);
    free(path);
    free(g);
}

/* A transposing copy (x.T.contiguous(), W^T for x @ W^T) on a 32-byte
 * target: the store's row as the vector, an upcast of 8 along the dim
 * the load runs along, and the load a block of 8 vectors transposed in
 * registers; elsewhere (64-byte vectors, a dim of 12) lane by lane.  The
 * values are the input's, exactly, with 1 and 8 threads, including a
 * transposed view of a slice and a three-dim permute. */
Test(codegen_lower, a_transposing_copy_loads_blocks_of_vectors) {
    uint64_t seed = tu_seed(), rng = seed;
    static const int shapes[][2] = {{128, 784}, {16, 8}, {40, 24}, {12, 16}, {24, 12}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int r = shapes[s][0], c = shapes[s][1];
        float *x = s_rand(&rng, (size_t)r * c, -1, 1), *o = malloc(sizeof *o * (size_t)r * c);
        for (int threads = 1; threads <= 8; threads += 7) {
            char *path = tu_tmpfile("transpose");
            tact_ctx *ctx = s_open(threads, path);
            tact_tensor *t = tact_contiguous(tact_T(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){r, c}, x)));
            cr_assert_eq(tact_read(t, o, sizeof *o * (size_t)r * c), TACT_OK, "%s", tact_ctx_error(ctx));
            tact_ctx_close(&ctx);
            for (int i = 0; i < c; i++)
                for (int j = 0; j < r; j++)
                    cr_assert_eq(o[i * r + j], x[j * c + i], "seed %#llx, %dx%d, %d threads: [%d,%d]", (unsigned long long)seed, r, c, threads, i, j);
            const ta_ast_t *k = s_one_ast(path);
            const ta_lir_t *l = s_lower_for(k, 32);
            int transposed = 0;
            for (int i = 0; i < k->nnodes; i++) transposed += l->nodes[i].transposed;
            int want = r % 8 == 0 && c % 8 == 0;
            cr_assert_eq(transposed, want, "%dx%d on AVX2: %d transposed loads", r, c, transposed);
            if (want) cr_assert(l->width == 8 && s_upcasts(l) == 8, "%dx%d: %d lanes, %lld upcast", r, c, l->width, (long long)s_upcasts(l));
            l = s_lower_for(k, 64);
            transposed = 0;
            for (int i = 0; i < k->nnodes; i++) transposed += l->nodes[i].transposed;
            cr_assert_eq(transposed, 0, "%dx%d on AVX-512: lane by lane", r, c);
            unlink(path);
            free(path);
        }
        free(x), free(o);
    }
    /* A transposed slice, and a three-dim permute, through the op suite's path. */
    float *x = s_rand(&rng, 16 * 24 * 8, -1, 1), o[16 * 24 * 8];
    tact_ctx *ctx = s_open(2, NULL);
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 3, (int64_t[]){16, 24, 8}, x);
    tact_tensor *p = tact_contiguous(tact_permute(t, (int[]){2, 0, 1}));
    cr_assert_eq(tact_read(p, o, sizeof o), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 16; b++)
            for (int d = 0; d < 24; d++) cr_assert_eq(o[(a * 16 + b) * 24 + d], x[(b * 24 + d) * 8 + a], "seed %#llx: permute [%d,%d,%d]", (unsigned long long)seed, a, b, d);
    tact_tensor *sl = tact_contiguous(tact_T(tact_shrink(tact_reshape(t, 2, (int64_t[]){16, 192}), (const int64_t[][2]){{0, 16}, {8, 40}})));
    cr_assert_eq(tact_read(sl, o, sizeof *o * 32 * 16), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 16; j++) cr_assert_eq(o[i * 16 + j], x[j * 192 + 8 + i], "seed %#llx: slice [%d,%d]", (unsigned long long)seed, i, j);
    /* 16-bit floats (converted lane by lane, never as blocks of floats):
     * a transposed copy of float16 and bfloat16, read back as float32, is
     * the untransposed one's transposition; so is a float16 x @ W^T (the
     * client's copy of W^T) against a double loop. */
    for (int h = 0; h < 2; h++) {
        tact_dtype dt = h ? TACT_BFLOAT16 : TACT_FLOAT16;
        float *y = s_rand(&rng, 16 * 8, -1, 1), plain[16 * 8], trans[16 * 8];
        tact_tensor *yt = tact_cast(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){16, 8}, y), dt);
        cr_assert_eq(tact_realize(ctx, 1, &yt), TACT_OK, "%s", tact_ctx_error(ctx)); /* a buffer of 16-bit floats */
        cr_assert_eq(tact_read(tact_cast(yt, TACT_FLOAT32), plain, sizeof plain), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(tact_cast(tact_contiguous(tact_T(yt)), TACT_FLOAT32), trans, sizeof trans), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 16; j++) cr_assert_eq(trans[i * 16 + j], plain[j * 8 + i], "seed %#llx: dtype %d [%d,%d]", (unsigned long long)seed, dt, i, j);
        free(y);
    }
    float *xs = s_rand(&rng, 64 * 128, -1, 1), *ws = s_rand(&rng, 256 * 128, -1, 1), *lin = malloc(sizeof *lin * 64 * 256);
    tact_tensor *xh = tact_cast(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){64, 128}, xs), TACT_FLOAT16);
    tact_tensor *wh = tact_cast(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){256, 128}, ws), TACT_FLOAT16);
    tact_tensor *both[2] = {xh, wh};
    cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%s", tact_ctx_error(ctx));
    float xr[64 * 128], wr[256 * 128];
    cr_assert_eq(tact_read(tact_cast(xh, TACT_FLOAT32), xr, sizeof xr), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_cast(wh, TACT_FLOAT32), wr, sizeof wr), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_cast(tact_matmul(xh, tact_T(wh)), TACT_FLOAT32), lin, sizeof *lin * 64 * 256), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 256; j++) {
            double want = 0;
            for (int q = 0; q < 128; q++) want += (double)xr[i * 128 + q] * wr[j * 128 + q];
            cr_assert_leq(fabs(lin[i * 256 + j] - want), 2e-2 + 2e-3 * fabs(want), "seed %#llx: float16 x @ W^T [%d,%d]: %g, not %g", (unsigned long long)seed, i, j, lin[i * 256 + j], want);
        }
    free(xs), free(ws), free(lin);
    tact_ctx_close(&ctx);
    free(x);
}
