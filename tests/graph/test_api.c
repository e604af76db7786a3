/* test_api.c - misuse of the public API: NULL arguments and tensors of another context give errors, never a crash. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open(void) {
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

#define S_NULL_TENSOR(expr)                                                                                 \
    do {                                                                                                    \
        tact_tensor *r_ = (expr);                                                                           \
        cr_assert(r_ != NULL, #expr " returned NULL");                                                      \
        cr_assert_eq(tact_status_of(r_), TACT_EINVAL, #expr ": status %s", tact_status_name(tact_status_of(r_))); \
    } while (0)

/* Every entry point that takes a tensor or a context, given n where a
 * tensor goes and c where a context goes (NULL, a stale or a made-up
 * handle): each refuses it with TACT_EINVAL or an error tensor, and the
 * context ctx, with its tensor x, works on after. */
static void s_every_entry_point(tact_ctx *ctx, tact_tensor *x, tact_tensor *n, tact_ctx *c) {
    int64_t shape[1] = {4}, pads[1][2] = {{1, 1}};
    int axis = 0, order[1] = {0};
    float data[4] = {1, 2, 3, 4};
    /* Contexts. */
    cr_assert_str_neq(tact_ctx_error(c), "");
    tact_stats st;
    tact_ctx_stats(c, &st);
    cr_assert_eq(st.kernels, 0);
    cr_assert_eq(tact_scope_begin(c), TACT_EINVAL);
    cr_assert_eq(tact_scope_end(c), TACT_EINVAL);
    /* Creation. */
    S_NULL_TENSOR(tact_scalar(c, 1.0));
    S_NULL_TENSOR(tact_scalar_int(c, 1));
    S_NULL_TENSOR(tact_scalar_bool(c, 1));
    S_NULL_TENSOR(tact_empty(c, TACT_FLOAT32, 1, shape));
    S_NULL_TENSOR(tact_from_data(c, TACT_FLOAT32, 1, shape, data));
    S_NULL_TENSOR(tact_full(c, TACT_FLOAT32, 1, shape, 1.0));
    S_NULL_TENSOR(tact_zeros(c, TACT_FLOAT32, 1, shape));
    S_NULL_TENSOR(tact_ones(c, TACT_FLOAT32, 1, shape));
    S_NULL_TENSOR(tact_arange(c, 0, 4, 1, TACT_FLOAT32));
    S_NULL_TENSOR(tact_eye(c, 3, TACT_FLOAT32));
    /* Ops: a bad operand, alone or beside a good one. */
    S_NULL_TENSOR(tact_cast(n, TACT_INT32));
    S_NULL_TENSOR(tact_bitcast(n, TACT_INT32));
    S_NULL_TENSOR(tact_exp2(n));
    S_NULL_TENSOR(tact_log2(n));
    S_NULL_TENSOR(tact_sin(n));
    S_NULL_TENSOR(tact_sqrt(n));
    S_NULL_TENSOR(tact_recip(n));
    S_NULL_TENSOR(tact_neg(n));
    tact_tensor *(*binary[])(tact_tensor *, tact_tensor *) = {tact_add, tact_mul, tact_idiv, tact_mod, tact_maximum, tact_cmplt,
                                                              tact_cmpne, tact_xor, tact_and, tact_or, tact_shl, tact_shr,
                                                              tact_sub, tact_div, tact_matmul, tact_assign};
    for (size_t i = 0; i < sizeof binary / sizeof *binary; i++) {
        S_NULL_TENSOR(binary[i](n, x));
        S_NULL_TENSOR(binary[i](x, n));
    }
    S_NULL_TENSOR(tact_where(n, x, x));
    S_NULL_TENSOR(tact_where(x, n, x));
    S_NULL_TENSOR(tact_mulacc(x, x, n));
    S_NULL_TENSOR(tact_sum(n, 1, &axis, 0));
    S_NULL_TENSOR(tact_max(n, -1, NULL, 0));
    S_NULL_TENSOR(tact_reshape(n, 1, shape));
    S_NULL_TENSOR(tact_permute(n, order));
    S_NULL_TENSOR(tact_expand(n, 1, shape));
    S_NULL_TENSOR(tact_pad(n, (const int64_t(*)[2])pads, 0));
    S_NULL_TENSOR(tact_shrink(n, (const int64_t(*)[2])pads));
    S_NULL_TENSOR(tact_flip(n, 1, &axis));
    S_NULL_TENSOR(tact_contiguous(n));
    S_NULL_TENSOR(tact_keep(n));
    /* An op on the error tensor keeps it. */
    S_NULL_TENSOR(tact_add(tact_exp2(n), x));
    /* Queries. */
    cr_assert_eq(tact_ndim(n), 0);
    cr_assert_eq(tact_dim(n, 0), -1);
    cr_assert_eq(tact_numel(n), 0);
    tact_shape(n, shape);
    cr_assert_eq(tact_status_of(n), TACT_EINVAL);
    cr_assert_str_neq(tact_error_message(n), "");
    cr_assert_str_eq(tact_device(n), "CPU");
    /* Sync points. */
    float out[4];
    double v;
    cr_assert_eq(tact_realize(c, 1, &x), TACT_EINVAL);
    cr_assert_eq(tact_realize(ctx, 1, &n), TACT_EINVAL);
    cr_assert_eq(tact_realize_async(c, 1, &x), TACT_EINVAL);
    cr_assert_eq(tact_wait(c), TACT_EINVAL);
    cr_assert_eq(tact_read(n, out, sizeof out), TACT_EINVAL);
    cr_assert_eq(tact_item(n, &v), TACT_EINVAL);
    tact_ctx *copy = c;
    cr_assert(tact_ctx_close(&copy) == TACT_OK || (c && copy == NULL), "closing a bad context is a no-op or refused");
    /* The context still works. */
    cr_assert_eq(tact_read(tact_add(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[3], 8.0f);
}

/* NULL where a tensor, context or buffer goes. */
Test(graph_api, null_arguments_give_errors_everywhere) {
    tact_ctx *ctx = s_open();
    int64_t shape[1] = {4}, pads[1][2] = {{1, 1}};
    int axis = 0, order[1] = {0};
    float data[4] = {1, 2, 3, 4}, out[4];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, shape, data);
    cr_assert_eq(tact_ctx_open(NULL, NULL), TACT_EINVAL);
    cr_assert_eq(tact_ctx_close(NULL), TACT_OK);
    tact_ctx *none = NULL;
    cr_assert_eq(tact_ctx_close(&none), TACT_OK);
    tact_ctx_stats(ctx, NULL);
    tact_options_default(NULL);
    S_NULL_TENSOR(tact_from_data(ctx, TACT_FLOAT32, 1, shape, NULL));
    S_NULL_TENSOR(tact_from_data(ctx, TACT_FLOAT32, 1, NULL, data));
    S_NULL_TENSOR(tact_sum(x, 1, NULL, 0));
    S_NULL_TENSOR(tact_reshape(x, 1, NULL));
    S_NULL_TENSOR(tact_permute(x, NULL));
    S_NULL_TENSOR(tact_expand(x, 1, NULL));
    S_NULL_TENSOR(tact_pad(x, NULL, 0));
    S_NULL_TENSOR(tact_shrink(x, NULL));
    S_NULL_TENSOR(tact_flip(x, 1, NULL));
    tact_shape(x, NULL);
    cr_assert_eq(tact_realize(ctx, 1, NULL), TACT_EINVAL);
    cr_assert_eq(tact_realize(ctx, -1, &x), TACT_EINVAL);
    cr_assert_eq(tact_read(x, NULL, sizeof out), TACT_EINVAL);
    cr_assert_eq(tact_item(tact_sum(x, -1, NULL, 0), NULL), TACT_EINVAL);
    (void)pads, (void)axis, (void)order;
    s_every_entry_point(ctx, x, NULL, NULL);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* A tensor whose scope ended and a context that was closed, at every entry
 * point; then values that were never handles. */
Test(graph_api, stale_and_made_up_handles_give_errors_everywhere) {
    tact_ctx *ctx = s_open(), *gone = s_open();
    int64_t shape[1] = {4};
    float data[4] = {1, 2, 3, 4};
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, shape, data);
    tact_scope_begin(ctx);
    tact_tensor *stale = tact_from_data(ctx, TACT_FLOAT32, 1, shape, data);
    tact_scope_end(ctx);
    tact_ctx *closed = gone;
    cr_assert_eq(tact_ctx_close(&gone), TACT_OK);
    s_every_entry_point(ctx, x, stale, closed);
    uint64_t rng = 0x5eed;
    for (int i = 0; i < 8; i++) {
        uintptr_t v = (uintptr_t)(rng = rng * 6364136223846793005ull + 1442695040888963407ull);
        s_every_entry_point(ctx, x, (tact_tensor *)(v | 1), (tact_ctx *)(v | 1));
    }
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

/* Settings that do not fit are refused when the context opens, not cut. */
Test(graph_api, an_overlong_cache_folder_is_refused_at_open) {
    char dir[1000];
    memset(dir, 'd', sizeof dir - 1);
    dir[0] = '/';
    dir[sizeof dir - 1] = '\0';
    setenv("TACT_CACHE_DIR", dir, 1);
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_EINVAL);
    cr_assert_null(ctx);
    cr_assert(strstr(tact_last_open_error(), "TACT_CACHE_DIR is 999 characters long"), "%s", tact_last_open_error());
    unsetenv("TACT_CACHE_DIR");
}

/* Ids of two contexts collide: mixing them is refused at the call. */
Test(graph_api, tensors_of_another_context_are_refused) {
    tact_ctx *a = s_open(), *b = s_open();
    int64_t shape[1] = {3};
    float xa[3] = {1, 2, 3}, xb[3] = {10, 20, 30};
    tact_tensor *ta = tact_from_data(a, TACT_FLOAT32, 1, shape, xa), *tb = tact_from_data(b, TACT_FLOAT32, 1, shape, xb);
    tact_tensor *mixed[] = {tact_add(ta, tb), tact_mul(tb, ta), tact_where(tact_cmplt(ta, ta), ta, tb), tact_where(tact_cmplt(tb, tb), ta, ta),
                            tact_mulacc(ta, ta, tb), tact_assign(ta, tb), tact_matmul(ta, tb), tact_maximum(ta, tb)};
    for (size_t i = 0; i < sizeof mixed / sizeof *mixed; i++) {
        cr_assert_eq(tact_status_of(mixed[i]), TACT_EINVAL, "op %zu", i);
        cr_assert(strstr(tact_error_message(mixed[i]), "two contexts"), "op %zu: %s", i, tact_error_message(mixed[i]));
    }
    cr_assert_eq(tact_realize(a, 1, &tb), TACT_EINVAL);
    cr_assert(strstr(tact_ctx_error(a), "another context"), "%s", tact_ctx_error(a));
    /* Both still compute their own values. */
    float out[3];
    cr_assert_eq(tact_read(ta, out, sizeof out), TACT_OK, "%s", tact_ctx_error(a));
    cr_assert_eq(out[2], 3.0f);
    cr_assert_eq(tact_read(tb, out, sizeof out), TACT_OK, "%s", tact_ctx_error(b));
    cr_assert_eq(out[2], 30.0f);
    tact_ctx_close(&a);
    tact_ctx_close(&b);
}

Test(graph_api, stale_and_foreign_handles_are_refused_never_followed) {
    tact_ctx *ctx = s_open();
    int64_t shape[1] = {4};
    float data[4] = {1, 2, 3, 4}, out[4];
    tact_tensor *keep = tact_from_data(ctx, TACT_FLOAT32, 1, shape, data);
    cr_assert_eq(tact_scope_begin(ctx), TACT_OK);
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, shape, data);
    cr_assert_eq(tact_scope_end(ctx), TACT_OK);
    /* Many tensors made since reuse the freed memory and table slots: the
     * old handle still names nothing. */
    for (int i = 0; i < 1000; i++) tact_add(keep, tact_scalar(ctx, i));
    tact_tensor *r = tact_add(t, keep);
    cr_assert_eq(tact_status_of(r), TACT_EINVAL);
    cr_assert(strstr(tact_error_message(r), "after its scope ended"), "%s", tact_error_message(r));
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_EINVAL);
    cr_assert_eq(tact_numel(t), 0);
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_EINVAL);
    /* A real pointer that was never a handle. */
    float junk[64] = {0};
    tact_tensor *fake = (tact_tensor *)junk;
    cr_assert_eq(tact_status_of(tact_exp2(fake)), TACT_EINVAL);
    cr_assert_eq(tact_scope_begin((tact_ctx *)junk), TACT_EINVAL);
    /* A context handle passed as a tensor, and the reverse. */
    cr_assert_eq(tact_status_of(tact_exp2((tact_tensor *)ctx)), TACT_EINVAL);
    cr_assert_eq(tact_scope_begin((tact_ctx *)keep), TACT_EINVAL);
    /* The context still works. */
    cr_assert_eq(tact_read(keep, out, sizeof out), TACT_OK);
    cr_assert_arr_eq(out, data, sizeof data);
    /* After close: copies of the context and its tensors are refused. */
    tact_ctx *copy = ctx;
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    cr_assert_null(ctx);
    cr_assert_eq(tact_status_of(tact_scalar(copy, 1.0)), TACT_EINVAL);
    cr_assert_eq(tact_status_of(tact_exp2(keep)), TACT_EINVAL);
    cr_assert_eq(tact_read(keep, out, sizeof out), TACT_EINVAL);
    cr_assert_eq(tact_realize(copy, 1, &keep), TACT_EINVAL);
    cr_assert_eq(tact_wait(copy), TACT_EINVAL);
    cr_assert(strstr(tact_ctx_error(copy), "closed"), "%s", tact_ctx_error(copy));
    cr_assert_eq(tact_ctx_close(&copy), TACT_EINVAL, "a second close is refused");
}

/* ------------------------------------------------------- one place for errors */

/* Runs one failing call: it must fail, and leave a message in the
 * context (and start from an empty one, so an old message cannot pass). */
#define S_FAILS(ctx, call)                                                                       \
    do {                                                                                         \
        tact_ctx_clear_error(ctx);                                                               \
        cr_assert_str_empty(tact_ctx_error(ctx));                                                \
        int rc_ = (call);                                                                        \
        cr_assert_lt(rc_, 0, "%s returned %d", #call, rc_);                                      \
        cr_assert(tact_ctx_error(ctx)[0], "%s failed (%s) with no message", #call, tact_status_name(rc_)); \
    } while (0)

/* Every status-returning entry point of a context, given a failing input:
 * each leaves its message in tact_ctx_error; each builder's error tensor
 * carries the same message as the context. */
Test(graph_api, every_failing_call_leaves_its_message_in_the_context) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    int64_t s2[1] = {2}, s23[2] = {2, 3};
    tact_tensor *x = tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 2, s23));
    tact_tensor *bad = tact_reshape(x, 1, (int64_t[]){5}); /* an error tensor */
    cr_assert_neq(tact_status_of(bad), TACT_OK);
    cr_assert_str_eq(tact_ctx_error(ctx), tact_error_message(bad), "a builder's error is the context's too");
    float buf[6];
    double v;
    tact_tensor *out[4];
    S_FAILS(ctx, tact_scope_end(ctx));
    S_FAILS(ctx, tact_realize(ctx, 1, &bad));
    S_FAILS(ctx, tact_realize_async(ctx, 1, &bad));
    S_FAILS(ctx, tact_realize(ctx, -1, NULL));
    S_FAILS(ctx, tact_read(bad, buf, sizeof buf));
    S_FAILS(ctx, tact_read(x, buf, 4));
    S_FAILS(ctx, tact_read(x, NULL, sizeof buf));
    S_FAILS(ctx, tact_item(bad, &v));
    S_FAILS(ctx, tact_item(x, &v));
    S_FAILS(ctx, tact_item(tact_sum(x, -1, NULL, 0), NULL));
    S_FAILS(ctx, tact_split(x, 2, (int64_t[]){1, 5}, 0, out));
    S_FAILS(ctx, tact_chunk(x, 0, 0, out));
    S_FAILS(ctx, tact_backward(bad, NULL));
    S_FAILS(ctx, tact_backward(x, NULL));
    S_FAILS(ctx, tact_backward(tact_sum(x, -1, NULL, 0), bad));
    tact_layer l;
    S_FAILS(ctx, tact_layer_linear(&l, ctx, -1, 3, 1));
    S_FAILS(ctx, tact_layer_conv2d(&l, ctx, 1, 2, 0, 3, NULL, 1));
    S_FAILS(ctx, tact_layer_conv_transpose2d(&l, ctx, 1, 2, 3, -3, NULL, 1));
    S_FAILS(ctx, tact_layer_batchnorm(&l, ctx, 0, 1e-5, 0.1, 1, 1));
    S_FAILS(ctx, tact_layer_layernorm(&l, ctx, 0, s2, 1e-5, 1));
    S_FAILS(ctx, tact_layer_groupnorm(&l, ctx, 3, 4, 1e-5, 1));
    S_FAILS(ctx, tact_layer_embedding(&l, ctx, 0, 4));
    tact_params p = {0};
    S_FAILS(ctx, tact_params_add(&p, NULL, "w", bad));
    cr_assert_eq(tact_params_add(&p, NULL, "w", x), TACT_OK);
    S_FAILS(ctx, tact_params_add(&p, NULL, "w", x));
    S_FAILS(ctx, tact_params_save(ctx, "/nonexistent/dir/m.safetensors", &p));
    S_FAILS(ctx, tact_params_load(ctx, "/nonexistent/m.safetensors", &p));
    const char *name = "w";
    S_FAILS(ctx, tact_save_safetensors(ctx, "/nonexistent/dir/m.safetensors", 1, &name, &bad));
    S_FAILS(ctx, tact_save_safetensors(ctx, "/nonexistent/dir/m.safetensors", 1, &name, &x));
    S_FAILS(ctx, tact_save_safetensors(ctx, "m.safetensors", -1, NULL, NULL));
    S_FAILS(ctx, tact_save_safetensors(ctx, NULL, 1, &name, &x));
    tact_tensor *nothing = NULL;
    S_FAILS(ctx, tact_save_safetensors(ctx, "m.safetensors", 1, &name, &nothing));
    tact_optim *o = NULL;
    tact_optim_options oo;
    tact_optim_options_default(&oo, TACT_OPTIM_ADAM);
    oo.lr = -1;
    S_FAILS(ctx, tact_optim_new(&o, ctx, &oo, 1, &x));
    tact_optim_options_default(&oo, TACT_OPTIM_SGD);
    S_FAILS(ctx, tact_optim_new(&o, ctx, &oo, 1, &bad));
    tact_tensor *w = tact_keep(tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 1, s2)));
    tact_set_requires_grad(w, 1);
    cr_assert_eq(tact_optim_new(&o, ctx, &oo, 1, &w), TACT_OK, "%s", tact_ctx_error(ctx));
    S_FAILS(ctx, tact_optim_step(o)); /* no gradient yet */
    S_FAILS(ctx, tact_optim_step_with(o, 1, &bad));
    S_FAILS(ctx, tact_optim_set_lr(o, -2));
    S_FAILS(ctx, tact_optim_state(o, NULL, NULL));
    tact_optim_free(&o);
    tact_params_free(&p);
    tact_ctx_close(&ctx);
}

/* Device lists: a list where one device is expected says so. */
Test(graph_api, a_device_list_where_one_device_is_expected_is_named) {
    tact_ctx *ctx;
    tact_options opt;
    tact_options_default(&opt);
    opt.devices = "CPU,CPU:1";
    cr_assert_eq(tact_ctx_open(&ctx, &opt), TACT_OK, "%s", tact_last_open_error());
    tact_tensor *x = tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){4});
    tact_tensor *y = tact_to(x, "CPU:1,CPU");
    cr_assert(strstr(tact_error_message(y), "'CPU:1,CPU' is a list of devices where one device is expected"), "%s", tact_error_message(y));
    y = tact_to(x, "CPU:x");
    cr_assert(strstr(tact_error_message(y), "after 'CPU:' a device number is expected"), "%s", tact_error_message(y));
    tact_ctx_close(&ctx);
}

/* The cross-entropy takes class indices: float labels are an error. */
Test(graph_api, float_labels_are_refused_by_the_cross_entropy) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *logits = tact_ones(ctx, TACT_FLOAT32, 2, (int64_t[]){4, 3});
    tact_tensor *l = tact_sparse_categorical_crossentropy(logits, tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){4}), -1, 0);
    cr_assert_eq(tact_status_of(l), TACT_EDTYPE);
    cr_assert(strstr(tact_error_message(l), "labels are float32; they must be integers"), "%s", tact_error_message(l));
    l = tact_sparse_categorical_crossentropy(logits, tact_zeros(ctx, TACT_INT32, 1, (int64_t[]){3}), -1, 0);
    cr_assert_eq(tact_status_of(l), TACT_ESHAPE, "%s", tact_error_message(l));
    double v;
    l = tact_sparse_categorical_crossentropy(logits, tact_zeros(ctx, TACT_INT32, 1, (int64_t[]){4}), -1, 0);
    cr_assert_eq(tact_item(l, &v), TACT_OK, "%s", tact_error_message(l));
    cr_assert_float_eq(v, log(3.0), 1e-6);
    tact_ctx_close(&ctx);
}

/* tact_release: a tensor goes alone, before its scope ends.  Its handle is
 * stale at once; its buffer goes at the next realize (device_bytes); a
 * release of an op still waiting in the client's batch, read by a tensor
 * that stays, keeps the value right; NULL and stale handles are nothing to
 * release; 10,000 tensors made and released leave the device's memory as
 * it was; a release in a nested scope is not freed again when the scope
 * ends (ASan); a sharded tensor's parts go with it. */
Test(graph_api, released_tensors_go_one_by_one) {
    tact_ctx *ctx = s_open();
    enum { N = 1 << 18 };
    float *x = malloc(sizeof *x * N), got[4];
    cr_assert(x);
    for (int i = 0; i < N; i++) x[i] = (float)(i % 100);
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){N}, x), *b = tact_add(a, tact_scalar(ctx, 1.0));
    cr_assert_eq(tact_realize(ctx, 1, &b), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_stats st;
    tact_ctx_stats(ctx, &st);
    cr_assert_geq(st.device_bytes, 2 * sizeof(float) * N, "a and b held: %llu bytes", (unsigned long long)st.device_bytes);
    uint64_t both = st.device_bytes;
    cr_assert_eq(tact_release(a), TACT_OK);
    cr_assert_eq(tact_status_of(a), TACT_EINVAL, "a released handle is stale");
    cr_assert_eq(tact_status_of(tact_add(a, b)), TACT_EINVAL, "an op on a released handle is refused");
    cr_assert_eq(tact_release(a), TACT_OK, "a stale handle: nothing to release");
    cr_assert_eq(tact_release(NULL), TACT_OK);
    /* b's data stays; a's goes with the next realize. */
    tact_tensor *c = tact_mul(b, tact_scalar(ctx, 2.0));
    cr_assert_eq(tact_realize(ctx, 1, &c), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_stats(ctx, &st);
    cr_assert_eq(st.device_bytes, both, "a's buffer went, c's came: %llu bytes, %llu before", (unsigned long long)st.device_bytes, (unsigned long long)both);
    /* A release of an op not sent yet, read by one that stays. */
    tact_tensor *u = tact_add(b, tact_scalar(ctx, 3.0)), *v = tact_mul(u, tact_scalar(ctx, 2.0));
    cr_assert_eq(tact_release(u), TACT_OK);
    float want[4] = {8, 10, 12, 14}; /* ((i % 100) + 1 + 3) * 2 */
    cr_assert_eq(tact_read(tact_shrink(v, (int64_t[][2]){{0, 4}}), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], want[i], "[%d] = %g", i, got[i]);
    cr_assert_eq(tact_release(v), TACT_OK);
    cr_assert_eq(tact_release(c), TACT_OK);
    cr_assert_eq(tact_realize(ctx, 1, &b), TACT_OK);
    tact_ctx_stats(ctx, &st);
    uint64_t base = st.device_bytes;
    /* 10,000 made and released, every 1000th realized first. */
    for (int i = 0; i < 10000; i++) {
        tact_tensor *t = tact_mul(b, tact_scalar(ctx, (double)i));
        if (i % 1000 == 0) cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_release(t), TACT_OK);
    }
    tact_tensor *one = tact_add(b, tact_scalar(ctx, 0.0));
    cr_assert_eq(tact_realize(ctx, 1, &one), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_release(one);
    cr_assert_eq(tact_realize(ctx, 1, &b), TACT_OK);
    tact_ctx_stats(ctx, &st);
    cr_assert_leq(st.device_bytes, base + sizeof(float) * N, "10,000 released tensors: %llu bytes, %llu before", (unsigned long long)st.device_bytes,
                  (unsigned long long)base);
    /* Released in a nested scope: the scope's end does not free it again. */
    tact_scope_begin(ctx);
    tact_tensor *w = tact_add(b, tact_scalar(ctx, 1.0)), *k = tact_keep(tact_add(b, tact_scalar(ctx, 2.0)));
    cr_assert_eq(tact_release(w), TACT_OK);
    cr_assert_eq(tact_scope_end(ctx), TACT_OK);
    cr_assert_eq(tact_read(tact_shrink(k, (int64_t[][2]){{0, 4}}), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(got[1], 4.0f, "kept: %g", got[1]);
    cr_assert_eq(tact_release(k), TACT_OK, "kept into the root scope, released from there");
    tact_ctx_close(&ctx);

    tact_options o;
    tact_options_default(&o);
    o.devices = "CPU,CPU:1";
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    tact_tensor *s = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){8}, x), "CPU,CPU:1", 0);
    cr_assert_eq(tact_status_of(s), TACT_OK, "%s", tact_error_message(s));
    cr_assert_eq(tact_release(s), TACT_OK);
    cr_assert_eq(tact_status_of(s), TACT_EINVAL, "a released sharded tensor is stale");
    tact_tensor *r = tact_sum_all(tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){8}, x));
    float sum;
    cr_assert_eq(tact_read(r, &sum, sizeof sum), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(sum, 28.0f);
    tact_ctx_close(&ctx);
    free(x);
}


/* A language binding's pattern: each op in a scope of its own, its result
 * kept and later released (while its op may still wait in the batch).
 * 10,000 of them leave tact's memory as 1,000 did: every release reaches
 * the graph after the op it releases (a release before the op would leave
 * the node held forever). */
Test(graph_api, ten_thousand_released_tensors_leave_memory_flat) {
    tact_set_allocator(tu_counting, NULL);
    tact_ctx *ctx = s_open();
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){64}, x);
    cr_assert_eq(tact_realize(ctx, 1, &b), TACT_OK, "%s", tact_ctx_error(ctx));
    long after[2] = {0, 0};
    for (int i = 0; i < 10000; i++) {
        tact_scope_begin(ctx);
        tact_tensor *t = tact_keep(tact_mul(tact_add(b, tact_scalar(ctx, (double)i)), tact_scalar(ctx, 0.5)));
        tact_scope_end(ctx);
        if (i % 100 == 0) cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_release(t), TACT_OK);
        if (i == 999 || i == 9999) {
            cr_assert_eq(tact_realize(ctx, 1, &b), TACT_OK);
            after[i == 9999] = __atomic_load_n(&tu_live_bytes, __ATOMIC_RELAXED);
        }
    }
    cr_expect_lt(after[1] - after[0], 256 * 1024, "live bytes after 1,000 released tensors: %ld, after 10,000: %ld", after[0], after[1]);
    tact_ctx_close(&ctx);
    /* (What stays is the process's: the handle table and its static entries.) */
    cr_expect_lt(__atomic_load_n(&tu_live_bytes, __ATOMIC_RELAXED), 4096, "%ld bytes live after close", tu_live_bytes);
    tact_set_allocator(NULL, NULL);
}

/* A layer's constructor keeps its tensors and lets go of what drawing
 * them took (a uniform's random bits: hundreds of graph nodes, held until
 * the context closed before): thirty layers made in one scope cost little
 * more than their tensors, and the last one computes x W^T + b. */
Test(graph_api, layers_keep_their_tensors_and_drop_their_initialization) {
    tact_set_allocator(tu_counting, NULL);
    tact_ctx *ctx = s_open();
    tact_layer first, l;
    cr_assert_eq(tact_layer_linear(&first, ctx, 16, 16, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_realize(ctx, 1, &first.weight), TACT_OK, "%s", tact_ctx_error(ctx));
    long before = __atomic_load_n(&tu_live_bytes, __ATOMIC_RELAXED);
    for (int i = 0; i < 30; i++) cr_assert_eq(tact_layer_linear(&l, ctx, 16, 16, 1), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_realize(ctx, 1, &first.weight), TACT_OK, "%s", tact_ctx_error(ctx)); /* the graph has taken every release */
    long per = (__atomic_load_n(&tu_live_bytes, __ATOMIC_RELAXED) - before) / 30;
    /* 36 KB a layer here (tables growing by doubling: 19 KB over 90), 2.5 MB
     * when a layer's initialization stayed held. */
    cr_expect_lt(per, 256 * 1024, "each linear layer left %ld bytes live", per);
    /* The last one is whole and usable. */
    float x[16], y[16], w[256], b[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i / 16;
    tact_tensor *out = tact_layer_forward(&l, tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){1, 16}, x), 0);
    cr_assert_eq(tact_read(out, y, sizeof y), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(l.weight, w, sizeof w), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(l.bias, b, sizeof b), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int o = 0; o < 16; o++) {
        double want = b[o];
        for (int i = 0; i < 16; i++) want += (double)w[o * 16 + i] * x[i];
        cr_assert_float_eq(y[o], want, 1e-5, "output %d: %g, want %g", o, (double)y[o], want);
        cr_assert(w[o] >= -0.25f && w[o] <= 0.25f, "weight %g outside the reference's bound 1/sqrt(16)", (double)w[o]);
    }
    tact_ctx_close(&ctx);
    tact_set_allocator(NULL, NULL);
}
