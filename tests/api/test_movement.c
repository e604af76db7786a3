/* test_movement.c - the movement functions of tact.h composed from the movement primitives (squeeze, unsqueeze,
 * flatten, unflatten, transpose, T, repeat, repeat_interleave, pad2d, cat, stack, split, chunk, gather) against
 * PyTorch's answers (golden_movement.inc, made by gen_api_golden.py), exactly, and their errors and fusion. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#include "golden_movement.inc"

/* Applies case g to its inputs; pieces go to out, their count returned. */
static int s_apply(const golden_move_t *g, tact_tensor **in, tact_tensor **out) {
    const int64_t *p = g->p;
    int ip[8];
    for (int i = 0; i < 8; i++) ip[i] = (int)p[i];
    const char *f = g->fn;
    if (!strcmp(f, "squeeze")) out[0] = g->np == 1 && p[0] == -1 ? tact_squeeze(in[0], -1, NULL) : tact_squeeze(in[0], ip[0], ip + 1);
    else if (!strcmp(f, "unsqueeze")) out[0] = tact_unsqueeze(in[0], ip[0]);
    else if (!strcmp(f, "flatten")) out[0] = tact_flatten(in[0], ip[0], ip[1]);
    else if (!strcmp(f, "unflatten")) out[0] = tact_unflatten(in[0], ip[0], ip[1], p + 2);
    else if (!strcmp(f, "transpose")) out[0] = tact_transpose(in[0], ip[0], ip[1]);
    else if (!strcmp(f, "T")) out[0] = tact_T(in[0]);
    else if (!strcmp(f, "repeat")) out[0] = tact_repeat(in[0], g->np, p);
    else if (!strcmp(f, "repeat_interleave")) out[0] = tact_repeat_interleave(in[0], p[0], ip[1]);
    else if (!strcmp(f, "repeat_interleave_flat")) out[0] = tact_repeat_interleave_flat(in[0], p[0]);
    else if (!strcmp(f, "pad2d")) out[0] = tact_pad2d(in[0], g->np, p, 0.0);
    else if (!strcmp(f, "cat")) out[0] = tact_cat(g->nin, in, ip[0]);
    else if (!strcmp(f, "stack")) out[0] = tact_stack(g->nin, in, ip[0]);
    else if (!strcmp(f, "split")) return tact_split(in[0], ip[1], p + 2, ip[0], out);
    else if (!strcmp(f, "chunk")) return tact_chunk(in[0], ip[1], ip[0], out);
    else if (!strcmp(f, "gather")) out[0] = tact_gather(in[0], ip[0], in[1]);
    else cr_assert_fail("no function %s", f);
    return 1;
}

Test(api_movement, every_function_against_pytorch) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    for (size_t c = 0; c < sizeof golden_move / sizeof golden_move[0]; c++) {
        const golden_move_t *g = &golden_move[c];
        tact_scope_begin(ctx);
        tact_tensor *in[3], *out[8];
        const float *x = g->x;
        for (int i = 0; i < g->nin; i++) {
            int64_t n = 1;
            for (int k = 0; k < g->ndim[i]; k++) n *= g->shape[i][k];
            if (!strcmp(g->fn, "gather") && i == 1) {
                int32_t idx[64];
                for (int64_t k = 0; k < n; k++) idx[k] = (int32_t)x[k];
                in[i] = tact_from_data(ctx, TACT_INT32, g->ndim[i], g->shape[i], idx);
            } else {
                in[i] = tact_from_data(ctx, TACT_FLOAT32, g->ndim[i], g->shape[i], n ? (const void *)x : (const void *)"\0\0\0\0");
            }
            x += n;
        }
        int np = s_apply(g, in, out);
        cr_assert_eq(np, g->nout, "%s [case %zu]: %d pieces, not %d (%s)", g->fn, c, np, g->nout, np < 0 ? tact_error_message(out[0]) : "");
        const float *want = g->want;
        for (int q = 0; q < np; q++) {
            cr_assert_eq(tact_status_of(out[q]), TACT_OK, "%s [case %zu]: %s", g->fn, c, tact_error_message(out[q]));
            int nd = tact_ndim(out[q]);
            int64_t n = tact_numel(out[q]);
            cr_assert_eq(nd, g->out_ndim, "%s [case %zu]: %d dims, not %d", g->fn, c, nd, g->out_ndim);
            for (int k = 0; k < nd; k++)
                cr_assert_eq(tact_dim(out[q], k), g->out_shape[q][k], "%s [case %zu] piece %d: dim %d is %lld, not %lld", g->fn, c, q, k,
                             (long long)tact_dim(out[q], k), (long long)g->out_shape[q][k]);
            float got[256];
            cr_assert_leq(n, 256);
            cr_assert_eq(tact_read(out[q], got, sizeof(float) * (size_t)n), TACT_OK, "%s: %s", g->fn, tact_ctx_error(ctx));
            for (int64_t i = 0; i < n; i++) cr_assert_eq(got[i], want[i], "%s [case %zu] piece %d [%lld]: %g, not %g", g->fn, c, q, (long long)i, got[i], want[i]);
            want += n;
        }
        cr_assert_eq(want - g->want, g->m, "%s [case %zu]: %td elements, not %d", g->fn, c, want - g->want, g->m);
        tact_scope_end(ctx);
    }
    tact_ctx_close(&ctx);
}

/* Errors name the op and the range; cat of 8 tensors is one kernel. */
Test(api_movement, errors_and_cat_in_one_kernel) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *x = tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){3, 4});
    tact_tensor *e = tact_unsqueeze(x, 3);
    cr_assert_eq(tact_status_of(e), TACT_EINVAL);
    cr_assert(strstr(tact_error_message(e), "unsqueeze: dim 3 out of range [-3, 2]"), "%s", tact_error_message(e));
    e = tact_transpose(x, 0, -3);
    cr_assert(strstr(tact_error_message(e), "transpose: dim -3 out of range [-2, 1]"), "%s", tact_error_message(e));
    e = tact_cat(2, (tact_tensor *[]){x, tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){3, 5})}, 0);
    cr_assert(strstr(tact_error_message(e), "cat: tensor 1's shape differs"), "%s", tact_error_message(e));
    tact_tensor *pieces[4];
    cr_assert_eq(tact_split(x, 2, (int64_t[]){1, 1}, 0, pieces), -1);
    cr_assert(strstr(tact_error_message(pieces[0]), "split: sizes sum to 2, not dim 0's 3"), "%s", tact_error_message(pieces[0]));
    cr_assert_eq(tact_chunk(x, 0, 0, pieces), -1);
    e = tact_gather(x, 0, tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){1, 4}));
    cr_assert_eq(tact_status_of(e), TACT_EDTYPE, "%s", tact_error_message(e));
    cr_assert_eq(tact_status_of(tact_repeat(x, 1, (int64_t[]){2})), TACT_EINVAL);
    cr_assert_eq(tact_status_of(tact_cat(0, NULL, 0)), TACT_EINVAL);
    /* cat of 8 tensors: one kernel, values in order. */
    tact_tensor *parts[8];
    float vals[8][6];
    for (int i = 0; i < 8; i++) {
        for (int k = 0; k < 6; k++) vals[i][k] = (float)(i * 10 + k);
        parts[i] = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 3}, vals[i]);
    }
    cr_assert_eq(tact_realize(ctx, 8, parts), TACT_OK);
    float got[48];
    cr_assert_eq(tact_read(tact_cat(8, parts, 0), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    cr_assert_eq(st.kernels, 1, "cat of 8: %llu kernels", (unsigned long long)st.kernels);
    for (int i = 0; i < 48; i++) cr_assert_eq(got[i], vals[i / 6][i % 6]);
    tact_ctx_close(&ctx);
}

/* The reference's dtype quirks, as tinygrad 0.9.2 gives them: two scalar
 * branches of where take the condition's dtype; a pad with a non-zero
 * value has the dtype of x + where(pad(ones), 0, value). */
Test(api_movement, the_references_dtype_quirks) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *c8 = tact_from_data(ctx, TACT_INT8, 1, (int64_t[]){2}, (int8_t[]){5, 0});
    tact_tensor *cb = tact_from_data(ctx, TACT_BOOL, 1, (int64_t[]){2}, (uint8_t[]){1, 0});
    tact_tensor *w8 = tact_where(c8, tact_scalar_int(ctx, 3), tact_scalar_int(ctx, 4));
    cr_assert_eq(tact_dtype_of(w8), TACT_INT8);
    int8_t v8[2];
    cr_assert_eq(tact_read(w8, v8, 2), TACT_OK);
    cr_assert(v8[0] == 3 && v8[1] == 4);
    cr_assert_eq(tact_dtype_of(tact_where(cb, tact_scalar(ctx, 1.5), tact_scalar(ctx, 2.5))), TACT_FLOAT32);
    cr_assert_eq(tact_dtype_of(tact_where(cb, tact_scalar_int(ctx, 1), tact_scalar_int(ctx, 2))), TACT_INT32);
    cr_assert_eq(tact_dtype_of(tact_where(cb, tact_scalar_bool(ctx, 1), tact_scalar_bool(ctx, 0))), TACT_BOOL);
    cr_assert_eq(tact_dtype_of(tact_where(c8, tact_scalar(ctx, 1.5), tact_scalar_int(ctx, 2))), TACT_FLOAT32);
    tact_tensor *xi = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){2}, (int32_t[]){7, -3});
    tact_tensor *pf = tact_pad(xi, (int64_t[][2]){{1, 1}}, 0.5);
    cr_assert_eq(tact_dtype_of(pf), TACT_FLOAT32);
    float vf[4];
    cr_assert_eq(tact_read(pf, vf, sizeof vf), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert(vf[0] == 0.5f && vf[1] == 7 && vf[2] == -3 && vf[3] == 0.5f);
    tact_tensor *pb = tact_pad(cb, (int64_t[][2]){{1, 0}}, 1);
    cr_assert_eq(tact_dtype_of(pb), TACT_INT32);
    int32_t vb[3];
    cr_assert_eq(tact_read(pb, vb, sizeof vb), TACT_OK);
    cr_assert(vb[0] == 1 && vb[1] == 1 && vb[2] == 0);
    cr_assert_eq(tact_dtype_of(tact_pad(xi, (int64_t[][2]){{1, 1}}, 2)), TACT_INT32);
    cr_assert_eq(tact_dtype_of(tact_pad(cb, (int64_t[][2]){{1, 1}}, 0)), TACT_BOOL);
    cr_assert_eq(tact_dtype_of(tact_pad(tact_zeros(ctx, TACT_FLOAT16, 1, (int64_t[]){2}), (int64_t[][2]){{1, 1}}, 1)), TACT_FLOAT16);
    cr_assert_eq(tact_dtype_of(tact_pad(tact_zeros(ctx, TACT_UINT8, 1, (int64_t[]){2}), (int64_t[][2]){{1, 1}}, 1.5)), TACT_FLOAT32);
    tact_ctx_close(&ctx);
}
