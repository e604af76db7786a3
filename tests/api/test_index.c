/* test_index.c - tact_getitem and tact_setitem (the reference's __getitem__ and __setitem__) against NumPy's answers
 * (golden_index.inc, made by gen_api_golden.py), exactly, and their errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#include "golden_index.inc"

Test(api_index, getitem_and_setitem_against_numpy) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    for (size_t c = 0; c < sizeof golden_index / sizeof golden_index[0]; c++) {
        const golden_index_t *g = &golden_index[c];
        tact_scope_begin(ctx);
        tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, g->ndim, g->shape, g->x);
        tact_index idx[6];
        memcpy(idx, g->idx, sizeof idx);
        for (int i = 0, t = 0; i < g->nidx; i++)
            if (idx[i].kind == TACT_IDX_TENSOR) {
                idx[i].tensor = tact_from_data(ctx, TACT_INT32, g->tens_ndim[t], g->tens_shape[t], g->tens[t]);
                t++;
            }
        tact_tensor *y;
        if (!g->set) {
            y = tact_getitem(x, g->nidx, idx);
        } else {
            tact_tensor *v = g->set == 1 ? tact_scalar(ctx, g->v0) : tact_from_data(ctx, TACT_FLOAT32, g->v_ndim, g->v_shape, g->v);
            y = tact_setitem(x, g->nidx, idx, v);
            cr_assert_eq(y, x, "[case %zu] setitem returns x", c);
        }
        cr_assert_eq(tact_status_of(y), TACT_OK, "[case %zu]: %s", c, tact_error_message(y));
        cr_assert_eq(tact_ndim(y), g->out_ndim, "[case %zu]: %d dims, not %d", c, tact_ndim(y), g->out_ndim);
        for (int k = 0; k < g->out_ndim; k++)
            cr_assert_eq(tact_dim(y, k), g->out_shape[k], "[case %zu]: dim %d is %lld, not %lld", c, k, (long long)tact_dim(y, k), (long long)g->out_shape[k]);
        float got[256];
        cr_assert_leq(g->m, 256);
        cr_assert_eq(tact_read(y, got, sizeof(float) * (size_t)g->m), TACT_OK, "[case %zu]: %s", c, tact_ctx_error(ctx));
        for (int i = 0; i < g->m; i++) cr_assert_eq(got[i], g->want[i], "[case %zu, %d]: %g, not %g", c, i, got[i], g->want[i]);
        tact_scope_end(ctx);
    }
    tact_ctx_close(&ctx);
}

/* Errors name the cause; getitem without tensors is a view; setitem on a
 * view is refused as the reference's needs a contiguous target. */
Test(api_index, errors) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *x = tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){3, 4});
    tact_tensor *e = tact_getitem(x, 1, (tact_index[]){TACT_AT(3)});
    cr_assert(strstr(tact_error_message(e), "index 3 is out of bounds on dim 0 of size 3"), "%s", tact_error_message(e));
    e = tact_getitem(x, 2, (tact_index[]){TACT_ELLIPSIS, TACT_ELLIPSIS});
    cr_assert(strstr(tact_error_message(e), "single ellipsis"), "%s", tact_error_message(e));
    e = tact_getitem(x, 3, (tact_index[]){TACT_AT(0), TACT_AT(0), TACT_AT(0)});
    cr_assert(strstr(tact_error_message(e), "3 indices for a 2-dim tensor"), "%s", tact_error_message(e));
    e = tact_getitem(x, 1, (tact_index[]){TACT_SLICE(0, 3, 0)});
    cr_assert(strstr(tact_error_message(e), "cannot have 0 as step"), "%s", tact_error_message(e));
    e = tact_getitem(x, 1, (tact_index[]){TACT_TENSOR(tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){2}))});
    cr_assert_eq(tact_status_of(e), TACT_EDTYPE, "%s", tact_error_message(e));
    e = tact_setitem(x, 1, (tact_index[]){TACT_TENSOR(tact_zeros(ctx, TACT_INT32, 1, (int64_t[]){2}))}, tact_scalar(ctx, 1));
    cr_assert(strstr(tact_error_message(e), "tensor indices are not supported"), "%s", tact_error_message(e));
    tact_tensor *row = tact_getitem(x, 1, (tact_index[]){TACT_AT(1)});
    e = tact_setitem(row, 1, (tact_index[]){TACT_AT(0)}, tact_scalar(ctx, 1));
    cr_assert(strstr(tact_error_message(e), "assign: the target is a view"), "%s", tact_error_message(e));
    e = tact_setitem(x, 1, (tact_index[]){TACT_AT(0)}, tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){5}));
    cr_assert_neq(tact_status_of(e), TACT_OK, "a value of 5 does not fit a row of 4");
    /* 31 newaxis and an ellipsis standing for 16 dims: too many, an error
     * (the plan's table overflowed before) */
    int64_t ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    tact_index many[32];
    for (int i = 0; i < 31; i++) many[i] = TACT_NEWAXIS;
    many[31] = TACT_ELLIPSIS;
    e = tact_getitem(tact_zeros(ctx, TACT_FLOAT32, 16, ones), 32, many);
    cr_assert(strstr(tact_error_message(e), "too many indices"), "%s", tact_error_message(e));
    tact_ctx_close(&ctx);
}
