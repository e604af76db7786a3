/* test_gather.c - gathers: getitem with tensor indices, gather, embedding and one-hot picks become loads (lowering's
 * gathers), checked against naive loops of the reference's semantics with out-of-range and negative indices, on every
 * device present; the kernel takes one index instead of the long reduce. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ast.h"
#include "log.h"
#include "mpread.h"
#include "tact.h"
#include "testutil.h"

static const char *s_devices[] = {"CPU", "CL"};

static tact_ctx *s_open(const char *dev, const char *log) {
    tact_options o;
    tact_options_default(&o);
    o.devices = dev;
    o.log_path = log;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

/* x[idx] on dim 0 of an R x C table and x[:, idx] of a B x R x C one:
 * a negative index counts from the end (the reference's getitem), one
 * still out of range gives a row of zeros (its one-hot matches nothing). */
Test(gather, getitem_with_tensor_indices_against_the_reference) {
    enum { R = 37, C = 5, B = 3, N = 10 };
    uint64_t seed = tu_seed(), st = seed;
    float x[B * R * C];
    for (int i = 0; i < B * R * C; i++) x[i] = (float)(int64_t)(tu_rand(&st) % 2001) * 0.25f - 250.0f;
    int32_t idx[N] = {0, 5, R - 1, R, -1, -R, -R - 1, 2 * R, 17, -7};
    for (size_t d = 0; d < sizeof s_devices / sizeof *s_devices; d++) {
        if (!tu_have_device(s_devices[d])) continue;
        tact_ctx *ctx = s_open(s_devices[d], NULL);
        tact_tensor *t2 = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C}, x), *t3 = tact_from_data(ctx, TACT_FLOAT32, 3, (int64_t[]){B, R, C}, x);
        tact_tensor *ti = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, idx);
        float got2[N * C], got3[B * N * C];
        tact_index i2[1] = {TACT_TENSOR(ti)}, i3[2] = {TACT_ALL, TACT_TENSOR(ti)};
        cr_assert_eq(tact_read(tact_getitem(t2, 1, i2), got2, sizeof got2), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(tact_getitem(t3, 2, i3), got3, sizeof got3), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int n = 0; n < N; n++) {
            int v = idx[n] < 0 ? idx[n] + R : idx[n], in = v >= 0 && v < R;
            for (int c = 0; c < C; c++) {
                cr_expect_eq(got2[n * C + c], in ? x[v * C + c] : 0.0f, "%s seed %llu: x[%d][%d] = %g", s_devices[d], (unsigned long long)seed, idx[n], c,
                             got2[n * C + c]);
                for (int b = 0; b < B; b++)
                    cr_expect_eq(got3[(b * N + n) * C + c], in ? x[(b * R + v) * C + c] : 0.0f, "%s: x[%d, %d][%d]", s_devices[d], b, idx[n], c);
            }
        }
        tact_ctx_close(&ctx);
    }
}

/* Two tensor indices pick single elements: x[i, j], each pinned. */
Test(gather, two_tensor_indices) {
    enum { R = 9, C = 11, N = 6 };
    float x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = (float)i;
    int32_t ri[N] = {0, 8, -1, 9, 4, 2}, ci[N] = {10, 0, -11, 3, 11, -12};
    tact_ctx *ctx = s_open("CPU", NULL);
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C}, x);
    tact_index ix[2] = {TACT_TENSOR(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, ri)),
                        TACT_TENSOR(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, ci))};
    float got[N];
    cr_assert_eq(tact_read(tact_getitem(t, 2, ix), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int n = 0; n < N; n++) {
        int r = ri[n] < 0 ? ri[n] + R : ri[n], c = ci[n] < 0 ? ci[n] + C : ci[n];
        cr_expect_eq(got[n], r >= 0 && r < R && c >= 0 && c < C ? x[r * C + c] : 0.0f, "x[%d, %d] = %g", ri[n], ci[n], got[n]);
    }
    tact_ctx_close(&ctx);
}

/* gather(x, 1, index) and an embedding: an index outside [0, size), also
 * a negative one, picks nothing (0), as the reference's one-hot. */
Test(gather, gather_and_embedding_out_of_range_give_zero) {
    enum { R = 4, C = 6, K = 5 };
    float x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = (float)i + 0.5f;
    int32_t index[R * K] = {0, 5, -1, 6, 3, 1, 1, 1, 1, 1, 5, 4, 3, 2, 1, -6, 0, 2, 7, 5};
    for (size_t d = 0; d < sizeof s_devices / sizeof *s_devices; d++) {
        if (!tu_have_device(s_devices[d])) continue;
        tact_ctx *ctx = s_open(s_devices[d], NULL);
        tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C}, x);
        tact_tensor *ti = tact_from_data(ctx, TACT_INT32, 2, (int64_t[]){R, K}, index);
        float got[R * K];
        cr_assert_eq(tact_read(tact_gather(t, 1, ti), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) {
                int v = index[r * K + k];
                cr_expect_eq(got[r * K + k], v >= 0 && v < C ? x[r * C + v] : 0.0f, "%s: gather [%d][%d] of %d = %g", s_devices[d], r, k, v, got[r * K + k]);
            }
        tact_layer emb;
        cr_assert_eq(tact_layer_embedding(&emb, ctx, R, C), TACT_OK);
        float w[R * C];
        cr_assert_eq(tact_read(emb.weight, w, sizeof w), TACT_OK);
        int32_t words[5] = {3, 0, 4, -1, 2};
        float e[5 * C];
        cr_assert_eq(tact_read(tact_layer_forward(&emb, tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){5}, words), 0), e, sizeof e), TACT_OK,
                     "%s", tact_ctx_error(ctx));
        for (int n = 0; n < 5; n++)
            for (int c = 0; c < C; c++)
                cr_expect_eq(e[n * C + c], words[n] >= 0 && words[n] < R ? w[words[n] * C + c] : 0.0f, "%s: embedding of %d [%d]", s_devices[d], words[n], c);
        tact_ctx_close(&ctx);
    }
}

/* A row the index does not pick may hold a NaN or an infinity: a gather
 * reads only the picked row (docs/api.md: the reference's one-hot sum
 * would spread the NaN, as 0 * NaN is NaN). */
Test(gather, rows_not_picked_do_not_matter) {
    float x[4 * 2] = {1, 2, NAN, INFINITY, 5, 6, -INFINITY, 8};
    int32_t idx[2] = {2, 0};
    tact_ctx *ctx = s_open("CPU", NULL);
    tact_index ix[1] = {TACT_TENSOR(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){2}, idx))};
    float got[4];
    cr_assert_eq(tact_read(tact_getitem(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){4, 2}, x), 1, ix), got, sizeof got), TACT_OK);
    cr_expect(got[0] == 5 && got[1] == 6 && got[2] == 1 && got[3] == 2, "%g %g %g %g", got[0], got[1], got[2], got[3]);
    tact_ctx_close(&ctx);
}

static int s_found;
static void s_kernel_names(const ta_msg_t *m, void *ud) {
    (void)ud;
    ta_recs_it_t it;
    ta_kernel_rec_t k;
    ta_recs_begin(&it, &m->as.kernels.kernels);
    static ta_ast_t a;
    while (ta_recs_next(&it, &k)) {
        ta_mpr_t r;
        ta_error_t err;
        ta_mpr_init(&r, k.ast.ptr, k.ast.len);
        cr_assert_eq(ta_ast_unpack(&a, &r, &err), TACT_OK, "%s", err.text);
        char name[64];
        ta_ast_name(&a, name, sizeof name);
        if (a.reduce_mask) {
            /* The minibatch's kernel: 128 rows of 16, one index each. */
            cr_expect_str_eq(name, "r_128_16_g60000");
            cr_expect_eq(ta_ast_work(&a), 128 * 16, "%s: work %llu", name, (unsigned long long)ta_ast_work(&a));
            s_found++;
        }
    }
}

/* A minibatch of 128 rows of a 60000-row table: the kernel's reduce over
 * the 60000 rows is a gather ("g60000" in its name, TACT_DEBUG=3's
 * listing) of 128 x 16 iterations, not 128 x 16 x 60000. */
Test(gather, a_minibatch_kernel_takes_one_row_per_output) {
    enum { R = 60000, C = 16, B = 128 };
    char *path = tu_tmpfile("gather.tlog");
    float *x = malloc(sizeof *x * R * C);
    cr_assert(x);
    for (int i = 0; i < R * C; i++) x[i] = (float)(i % 977);
    int32_t idx[B];
    for (int b = 0; b < B; b++) idx[b] = (b * 7919) % R;
    tact_ctx *ctx = s_open("CPU", path);
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C}, x);
    tact_index ix[1] = {TACT_TENSOR(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){B}, idx))};
    float got[B * C];
    cr_assert_eq(tact_read(tact_getitem(t, 1, ix), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) cr_expect_eq(got[b * C + c], x[idx[b] * C + c], "[%d][%d]", b, c);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    s_found = 0;
    tu_log_sent(path, "scheduler", TA_MSG_KERNELS, s_kernel_names, NULL);
    cr_expect_eq(s_found, 1, "the gather kernel was not among the scheduler's");
    unlink(path);
    free(path);
    free(x);
}

/* The gradient of a gather with respect to its table, as a loop in double:
 * d table[rows[n]][c] += g[n][c] for each n whose row is in [0, R). */
static void s_scatter_ref(int R, int C, int N, const int32_t *rows, const float *g, double *want) {
    memset(want, 0, sizeof *want * (size_t)R * (size_t)C);
    for (int n = 0; n < N; n++)
        for (int c = 0; rows[n] >= 0 && rows[n] < R && c < C; c++) want[rows[n] * C + c] += g[n * C + c];
}

/* The gradients of an embedding and of a getitem with a tensor index with
 * respect to their tables (lowering's scatters: rows of 24 and of 5) and of
 * gather's with respect to its source (one element a row: the whole
 * loop), on every device present, against loops: repeated rows sum, an
 * index out of range (a negative one too, for the embedding and gather)
 * takes no part, one counting from the end (getitem) does.  The terms are
 * multiples of 1/4 below 2^10 and their sums exact: compared within 1e-6. */
Test(gather, gradients_of_gathers_against_loops) {
    enum { R = 37, C = 24, N = 12, C2 = 5, K = 4 };
    uint64_t seed = tu_seed(), st = seed;
    int32_t words[N] = {3, 0, 36, 3, -1, 37, 12, 3, 0, 99, 20, 36}, items[N] = {5, -1, 5, 36, -37, 37, -38, 0, 5, 17, -20, 2};
    int32_t index[R * K];
    float g[N * C], g2[N * C2], g3[R * K];
    for (int i = 0; i < N * C; i++) g[i] = (float)(int64_t)(tu_rand(&st) % 801) * 0.25f - 100.0f;
    for (int i = 0; i < N * C2; i++) g2[i] = (float)(int64_t)(tu_rand(&st) % 801) * 0.25f - 100.0f;
    for (int i = 0; i < R * K; i++) g3[i] = (float)(int64_t)(tu_rand(&st) % 801) * 0.25f - 100.0f, index[i] = (int32_t)(tu_rand(&st) % (C2 + 2)) - 1;
    int32_t norm[N]; /* getitem's index, negatives from the end */
    for (int n = 0; n < N; n++) norm[n] = items[n] < 0 ? items[n] + R : items[n];
    static double want[R * C];
    for (size_t d = 0; d < sizeof s_devices / sizeof *s_devices; d++) {
        if (!tu_have_device(s_devices[d])) continue;
        tact_ctx *ctx = s_open(s_devices[d], NULL);
        tact_layer emb;
        cr_assert_eq(tact_layer_embedding(&emb, ctx, R, C), TACT_OK);
        static float zero[R * C2];
        tact_tensor *table = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C2}, zero), 1);
        tact_tensor *src = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, C2}, zero), 1);
        tact_index ix[1] = {TACT_TENSOR(tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, items))};
        /* sum(y * g): the gradient reaching each gathered row is g's. */
        tact_tensor *y1 = tact_layer_forward(&emb, tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, words), 1);
        tact_tensor *y2 = tact_getitem(table, 1, ix);
        tact_tensor *y3 = tact_gather(src, 1, tact_from_data(ctx, TACT_INT32, 2, (int64_t[]){R, K}, index));
        tact_tensor *loss = tact_add(tact_add(tact_sum_all(tact_mul(y1, tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, C}, g))),
                                              tact_sum_all(tact_mul(y2, tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, C2}, g2)))),
                                     tact_sum_all(tact_mul(y3, tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){R, K}, g3))));
        cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        static float got[R * C];
        cr_assert_eq(tact_read(tact_grad(emb.weight), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
        s_scatter_ref(R, C, N, words, g, want);
        for (int i = 0; i < R * C; i++)
            cr_expect(fabs(got[i] - want[i]) <= 1e-6, "%s seed %llu: embedding's gradient [%d][%d] = %g, want %g", s_devices[d], (unsigned long long)seed,
                      i / C, i % C, got[i], want[i]);
        cr_assert_eq(tact_read(tact_grad(table), got, sizeof(float) * R * C2), TACT_OK, "%s", tact_ctx_error(ctx));
        s_scatter_ref(R, C2, N, norm, g2, want);
        for (int i = 0; i < R * C2; i++)
            cr_expect(fabs(got[i] - want[i]) <= 1e-6, "%s seed %llu: getitem's gradient [%d][%d] = %g, want %g", s_devices[d], (unsigned long long)seed,
                      i / C2, i % C2, got[i], want[i]);
        cr_assert_eq(tact_read(tact_grad(src), got, sizeof(float) * R * C2), TACT_OK, "%s", tact_ctx_error(ctx));
        memset(want, 0, sizeof want);
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++)
                if (index[r * K + k] >= 0 && index[r * K + k] < C2) want[r * C2 + index[r * K + k]] += g3[r * K + k];
        for (int i = 0; i < R * C2; i++)
            cr_expect(fabs(got[i] - want[i]) <= 1e-6, "%s seed %llu: gather's gradient [%d][%d] = %g, want %g", s_devices[d], (unsigned long long)seed,
                      i / C2, i % C2, got[i], want[i]);
        tact_ctx_close(&ctx);
    }
}

/* A NaN in the gradient of one gathered row reaches only the table's row
 * it came from, also from the first one (the scatter's first step writes
 * every row), as PyTorch's index_add; the reference's one-hot sum would
 * spread it over the whole table (0 * NaN; docs/api.md). */
Test(gather, a_nan_in_a_gathered_rows_gradient_stays_in_its_row) {
    enum { R = 6, C = 16, N = 4 };
    int32_t words[N] = {2, 4, 2, 9};
    for (int at = 0; at < 2; at++) {
        float g[N * C];
        for (int i = 0; i < N * C; i++) g[i] = 1.0f;
        g[(at ? 1 : 0) * C + 3] = NAN;
        tact_ctx *ctx = s_open("CPU", NULL);
        tact_layer emb;
        cr_assert_eq(tact_layer_embedding(&emb, ctx, R, C), TACT_OK);
        tact_tensor *y = tact_layer_forward(&emb, tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){N}, words), 1);
        cr_assert_eq(tact_backward(tact_sum_all(tact_mul(y, tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){N, C}, g))), NULL), TACT_OK);
        float got[R * C];
        cr_assert_eq(tact_read(tact_grad(emb.weight), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
        int row = words[at ? 1 : 0];
        for (int i = 0; i < R * C; i++) {
            float want = i / C == row && i % C == 3 ? NAN : i / C == 2 ? 2.0f : i / C == 4 ? 1.0f : 0.0f;
            cr_expect(isnan(want) ? isnan(got[i]) : got[i] == want, "NaN in row %d of the gradient: [%d][%d] = %g", at ? 1 : 0, i / C, i % C, got[i]);
        }
        tact_ctx_close(&ctx);
    }
}
