/* client_impl.h - the tensor API's implementation (client.c) behind the handle layer (api.c): the same calls on objects. */
#ifndef TACT_CLIENT_IMPL_H
#define TACT_CLIENT_IMPL_H

#include <stdint.h>

#include "runtime.h"
#include "tact.h"

/* The objects behind the handles of tact.h (api.c checks and translates
 * every handle, then calls these with the objects).  Each ti_ function
 * does what the tact_ function of the same name documents. */
typedef struct ti_tensor ti_tensor_t;
typedef struct ti_ctx ti_ctx_t;

/* The handle of an object (set when it is made; a static error tensor gets
 * one on first use), and the context a tensor belongs to (NULL for the
 * static error tensors). */
uintptr_t ti_tensor_handle(ti_tensor_t *t);
uintptr_t ti_ctx_handle(const ti_ctx_t *ctx);
ti_ctx_t *ti_tensor_ctx(const ti_tensor_t *t);

/* An error tensor of ctx with code and text (the composed ops' own errors). */
ti_tensor_t *ti_error(ti_ctx_t *ctx, int code, const char *text);

/* Error tensors of no context, for calls the handle layer refuses. */
ti_tensor_t *ti_null_arg(void);
ti_tensor_t *ti_stale_arg(void);
ti_tensor_t *ti_busy_arg(void);
ti_tensor_t *ti_foreign_arg(void);

/* One thread at a time per context: ti_ctx_enter returns 0 when the
 * calling thread may go on (it may enter again while inside), or -1 when
 * another thread is inside the context now; each 0 is matched by a leave. */
int ti_ctx_enter(ti_ctx_t *ctx);
void ti_ctx_leave(ti_ctx_t *ctx);
void ti_ctx_set_error(ti_ctx_t *ctx, const char *text);

int ti_ctx_open(ti_ctx_t **out, const tact_options *opts);
int ti_ctx_open_as(ti_ctx_t **out, const tact_options *opts, const char *cc, int schedule_cache);
int ti_ctx_close(ti_ctx_t **pctx);
const char *ti_ctx_error(const ti_ctx_t *ctx);
ta_port_t *ti_ctx_port(ti_ctx_t *ctx);
int ti_ctx_timeout_ms(const ti_ctx_t *ctx);
void ti_ctx_stats(const ti_ctx_t *ctx, tact_stats *out);
int ti_ctx_device_stats(ti_ctx_t *ctx, const char *device, tact_device_stats *out);
int ti_scope_begin(ti_ctx_t *ctx);
int ti_scope_end(ti_ctx_t *ctx);
ti_tensor_t *ti_keep(ti_tensor_t *t);
void ti_release(ti_tensor_t *t);
int ti_ndim(const ti_tensor_t *t);
int64_t ti_dim(const ti_tensor_t *t, int k);
void ti_shape(const ti_tensor_t *t, int64_t *out);
int64_t ti_numel(const ti_tensor_t *t);
tact_dtype ti_dtype_of(const ti_tensor_t *t);
const char *ti_device(const ti_tensor_t *t);
int ti_shard_axis(const ti_tensor_t *t);
int ti_status_of(const ti_tensor_t *t);
const char *ti_error_message(const ti_tensor_t *t);
ti_tensor_t *ti_scalar(ti_ctx_t *ctx, double v);
ti_tensor_t *ti_scalar_int(ti_ctx_t *ctx, int64_t v);
ti_tensor_t *ti_scalar_bool(ti_ctx_t *ctx, int v);
ti_tensor_t *ti_empty(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
ti_tensor_t *ti_from_data(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, const void *data);
ti_tensor_t *ti_from_host(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, const void *data, tact_dtype host_dtype);
ti_tensor_t *ti_full(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double value);
ti_tensor_t *ti_zeros(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
ti_tensor_t *ti_ones(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
ti_tensor_t *ti_arange(ti_ctx_t *ctx, double start, double stop, double step, int dtype);
ti_tensor_t *ti_eye(ti_ctx_t *ctx, int64_t n, tact_dtype dtype);
ti_tensor_t *ti_cast(ti_tensor_t *x, tact_dtype dtype);
ti_tensor_t *ti_bitcast(ti_tensor_t *x, tact_dtype dtype);
ti_tensor_t *ti_exp2(ti_tensor_t *x);
ti_tensor_t *ti_log2(ti_tensor_t *x);
ti_tensor_t *ti_sin(ti_tensor_t *x);
ti_tensor_t *ti_sqrt(ti_tensor_t *x);
ti_tensor_t *ti_recip(ti_tensor_t *x);
ti_tensor_t *ti_neg(ti_tensor_t *x);
ti_tensor_t *ti_add(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_mul(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_idiv(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_mod(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_maximum(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_cmplt(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_cmpne(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_xor(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_and(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_or(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_shl(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_shr(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_sub(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_div(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_where(ti_tensor_t *cond, ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_mulacc(ti_tensor_t *a, ti_tensor_t *b, ti_tensor_t *c);
ti_tensor_t *ti_sum(ti_tensor_t *x, int naxes, const int *axes, int keepdim);
ti_tensor_t *ti_max(ti_tensor_t *x, int naxes, const int *axes, int keepdim);
ti_tensor_t *ti_matmul(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_widened(ti_tensor_t *x, tact_dtype d); /* a matmul's or conv's operand: 16-bit floats as float32 */
ti_tensor_t *ti_reshape(ti_tensor_t *x, int ndim, const int64_t *shape);
ti_tensor_t *ti_permute(ti_tensor_t *x, const int *order);
ti_tensor_t *ti_expand(ti_tensor_t *x, int ndim, const int64_t *shape);
ti_tensor_t *ti_pad(ti_tensor_t *x, const int64_t (*pads)[2], double value);
ti_tensor_t *ti_shrink(ti_tensor_t *x, const int64_t (*ranges)[2]);
ti_tensor_t *ti_flip(ti_tensor_t *x, int naxes, const int *axes);
ti_tensor_t *ti_contiguous(ti_tensor_t *x);
ti_tensor_t *ti_to(ti_tensor_t *x, const char *device);
ti_tensor_t *ti_shard(ti_tensor_t *x, const char *devices, int axis);
ti_tensor_t *ti_assign(ti_tensor_t *target, ti_tensor_t *value);
/* client_math.c: the elementwise functions composed from the above. */
ti_tensor_t *ti_exp(ti_tensor_t *x);
ti_tensor_t *ti_log(ti_tensor_t *x);
ti_tensor_t *ti_relu(ti_tensor_t *x);
ti_tensor_t *ti_sigmoid(ti_tensor_t *x);
ti_tensor_t *ti_reciprocal(ti_tensor_t *x);
ti_tensor_t *ti_rsqrt(ti_tensor_t *x);
ti_tensor_t *ti_cos(ti_tensor_t *x);
ti_tensor_t *ti_tan(ti_tensor_t *x);
ti_tensor_t *ti_trunc(ti_tensor_t *x);
ti_tensor_t *ti_ceil(ti_tensor_t *x);
ti_tensor_t *ti_floor(ti_tensor_t *x);
ti_tensor_t *ti_round(ti_tensor_t *x);
ti_tensor_t *ti_square(ti_tensor_t *x);
ti_tensor_t *ti_sign(ti_tensor_t *x);
ti_tensor_t *ti_abs(ti_tensor_t *x);
ti_tensor_t *ti_logical_not(ti_tensor_t *x);
ti_tensor_t *ti_minimum(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_clip(ti_tensor_t *x, double lo, double hi);
ti_tensor_t *ti_lerp(ti_tensor_t *x, ti_tensor_t *end, ti_tensor_t *weight);
ti_tensor_t *ti_elu(ti_tensor_t *x, double alpha);
ti_tensor_t *ti_celu(ti_tensor_t *x, double alpha);
ti_tensor_t *ti_swish(ti_tensor_t *x);
ti_tensor_t *ti_silu(ti_tensor_t *x);
ti_tensor_t *ti_relu6(ti_tensor_t *x);
ti_tensor_t *ti_hardswish(ti_tensor_t *x);
ti_tensor_t *ti_tanh(ti_tensor_t *x);
ti_tensor_t *ti_sinh(ti_tensor_t *x);
ti_tensor_t *ti_cosh(ti_tensor_t *x);
ti_tensor_t *ti_atanh(ti_tensor_t *x);
ti_tensor_t *ti_asinh(ti_tensor_t *x);
ti_tensor_t *ti_acosh(ti_tensor_t *x);
ti_tensor_t *ti_hardtanh(ti_tensor_t *x, double min_val, double max_val);
ti_tensor_t *ti_gelu(ti_tensor_t *x);
ti_tensor_t *ti_quick_gelu(ti_tensor_t *x);
ti_tensor_t *ti_leakyrelu(ti_tensor_t *x, double neg_slope);
ti_tensor_t *ti_mish(ti_tensor_t *x);
ti_tensor_t *ti_softplus(ti_tensor_t *x, double beta);
ti_tensor_t *ti_softsign(ti_tensor_t *x);

/* client_reduce.c: reductions composed from sum and max. */
ti_tensor_t *ti_min(ti_tensor_t *x, int naxes, const int *axes, int keepdim);
ti_tensor_t *ti_any(ti_tensor_t *x, int naxes, const int *axes, int keepdim);
ti_tensor_t *ti_all(ti_tensor_t *x, int naxes, const int *axes, int keepdim);
ti_tensor_t *ti_mean(ti_tensor_t *x, int naxes, const int *axes, int keepdim);
ti_tensor_t *ti_var(ti_tensor_t *x, int naxes, const int *axes, int keepdim, double correction);
ti_tensor_t *ti_std(ti_tensor_t *x, int naxes, const int *axes, int keepdim, double correction);
ti_tensor_t *ti_prod(ti_tensor_t *x, int naxes, const int *axes, int keepdim);
ti_tensor_t *ti_softmax(ti_tensor_t *x, int axis);
ti_tensor_t *ti_log_softmax(ti_tensor_t *x, int axis);
ti_tensor_t *ti_logsumexp(ti_tensor_t *x, int naxes, const int *axes, int keepdim);

/* client_movement.c: movement composed from reshape, permute, expand, pad
 * and shrink.  ti_split and ti_chunk fill out and return their count, or
 * -1 with out[0] an error tensor. */
ti_tensor_t *ti_squeeze(ti_tensor_t *x, int naxes, const int *axes);
ti_tensor_t *ti_unsqueeze(ti_tensor_t *x, int dim);
ti_tensor_t *ti_flatten(ti_tensor_t *x, int start_dim, int end_dim);
ti_tensor_t *ti_unflatten(ti_tensor_t *x, int dim, int n, const int64_t *sizes);
ti_tensor_t *ti_transpose(ti_tensor_t *x, int dim0, int dim1);
ti_tensor_t *ti_repeat(ti_tensor_t *x, int n, const int64_t *repeats);
ti_tensor_t *ti_repeat_interleave(ti_tensor_t *x, int64_t repeats, int dim, int flat);
ti_tensor_t *ti_cat(int n, ti_tensor_t *const *xs, int dim);
ti_tensor_t *ti_stack(int n, ti_tensor_t *const *xs, int dim);
int ti_split(ti_tensor_t *x, int n, const int64_t *sizes, int dim, ti_tensor_t **out);
int ti_chunk(ti_tensor_t *x, int chunks, int dim, ti_tensor_t **out);
ti_tensor_t *ti_gather(ti_tensor_t *x, int dim, ti_tensor_t *index);
ti_tensor_t *ti_pad2d(ti_tensor_t *x, int n, const int64_t *padding, double value);

/* client_nn.c: windowed and nn functions, comparisons. */
ti_tensor_t *ti_conv2d(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias, const tact_window *opt);
ti_tensor_t *ti_avg_pool2d(ti_tensor_t *x, const tact_window *opt);
ti_tensor_t *ti_max_pool2d(ti_tensor_t *x, const tact_window *opt);
ti_tensor_t *ti_linear(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias);
ti_tensor_t *ti_layernorm(ti_tensor_t *x, int naxes, const int *axes, double eps);
ti_tensor_t *ti_batchnorm(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias, ti_tensor_t *mean, ti_tensor_t *invstd, int axis);
ti_tensor_t *ti_one_hot(ti_tensor_t *x, int64_t num_classes);
ti_tensor_t *ti_binary_crossentropy(ti_tensor_t *x, ti_tensor_t *y);
ti_tensor_t *ti_binary_crossentropy_logits(ti_tensor_t *x, ti_tensor_t *y);
ti_tensor_t *ti_sparse_categorical_crossentropy(ti_tensor_t *x, ti_tensor_t *labels, int64_t ignore_index, double label_smoothing);
ti_tensor_t *ti_eq(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_ne(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_lt(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_gt(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_le(ti_tensor_t *a, ti_tensor_t *b);
ti_tensor_t *ti_ge(ti_tensor_t *a, ti_tensor_t *b);

/* Random numbers (client_random.c): the context's key and counter.
 * ti_rng_take gives the seed and the counter for a call of num numbers. */
void ti_manual_seed(ti_ctx_t *ctx, uint64_t seed);
void ti_rng_take(ti_ctx_t *ctx, uint64_t num, uint64_t *seed, uint32_t *counter);
ti_tensor_t *ti_rand(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
ti_tensor_t *ti_randn(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
ti_tensor_t *ti_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double low, double high);
ti_tensor_t *ti_randint(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, int64_t low, int64_t high);
ti_tensor_t *ti_normal(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double mean, double std);
ti_tensor_t *ti_scaled_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
ti_tensor_t *ti_glorot_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape);
ti_tensor_t *ti_kaiming_uniform(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double a);
ti_tensor_t *ti_kaiming_normal(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double a);
ti_tensor_t *ti_dropout(ti_tensor_t *x, double p, int training);
ti_tensor_t *ti_like(ti_tensor_t *x, int what, double value);

/* A weak scalar's value (tact_scalar and friends): 1, or 0 for anything else. */
int ti_weak_value(const ti_tensor_t *t, double *v);
/* client_more.c */
ti_tensor_t *ti_argmax(ti_tensor_t *x, int axis, int all, int keepdim);
ti_tensor_t *ti_argmin(ti_tensor_t *x, int axis, int all, int keepdim);
ti_tensor_t *ti_cumsum(ti_tensor_t *x, int axis);
ti_tensor_t *ti_triu(ti_tensor_t *x, int64_t diagonal);
ti_tensor_t *ti_tril(ti_tensor_t *x, int64_t diagonal);
ti_tensor_t *ti_masked_fill(ti_tensor_t *x, ti_tensor_t *mask, ti_tensor_t *value);
ti_tensor_t *ti_pow(ti_tensor_t *x, ti_tensor_t *exponent);
ti_tensor_t *ti_lshift(ti_tensor_t *x, int64_t bits);
ti_tensor_t *ti_rshift(ti_tensor_t *x, int64_t bits);
ti_tensor_t *ti_scaled_dot_product_attention(ti_tensor_t *q, ti_tensor_t *k, ti_tensor_t *v, ti_tensor_t *mask, double dropout_p, int is_causal,
                                             int training);

ti_tensor_t *ti_conv_transpose2d(ti_tensor_t *x, ti_tensor_t *weight, ti_tensor_t *bias, const tact_window *opt);
ti_tensor_t *ti_interpolate(ti_tensor_t *x, int n, const int64_t *size, int align_corners);
ti_tensor_t *ti_einsum(const char *formula, int n, ti_tensor_t *const *xs);
ti_tensor_t *ti_multinomial(ti_tensor_t *x, int64_t num_samples, int replacement);

/* client_index.c: tact_index with the tensor as an object. */
typedef struct {
    tact_index_kind kind;
    int64_t start, stop, step;
    int has_start, has_stop, has_step;
    ti_tensor_t *tensor;
} ti_index_t;
ti_tensor_t *ti_getitem(ti_tensor_t *x, int n, const ti_index_t *idx);
ti_tensor_t *ti_setitem(ti_tensor_t *x, int n, const ti_index_t *idx, ti_tensor_t *value);

/* client_io.c */
ti_tensor_t *ti_load_idx(ti_ctx_t *ctx, const char *path);
ti_tensor_t *ti_load_safetensors(ti_ctx_t *ctx, const char *path, const char *name);
int ti_save_safetensors(ti_ctx_t *ctx, const char *path, int n, const char *const *names, ti_tensor_t *const *tensors);

/* client_grad.c: autograd. */
int ti_set_no_grad(ti_ctx_t *ctx, int on);
ti_tensor_t *ti_set_requires_grad(ti_tensor_t *t, int requires);
int ti_requires_grad(const ti_tensor_t *t);
ti_tensor_t *ti_detach(ti_tensor_t *x);
int ti_backward(ti_tensor_t *loss, ti_tensor_t *grad);
ti_tensor_t *ti_grad(ti_tensor_t *t);
void ti_grad_clear(ti_tensor_t *t);
/* Inside ta_grad_now and ta_settle_backward (below). */
ti_tensor_t *ti_grad_now(ti_tensor_t *t);
uint64_t ti_id(const ti_tensor_t *t);
int ti_settle_backward(ti_ctx_t *ctx, int extend);

int ti_wait(ti_ctx_t *ctx);

/* A mark in a context's unsent ops (the client's batch and the releases
 * queued behind it), to take back what was built after it. */
typedef struct {
    size_t bytes, nbatch, nreleased, ndeferred;
    uint64_t flushes;
} ta_mark_t;
/* Inside ta_mark_ahead and ta_mark_end (below). */
int ti_mark_ahead(ti_ctx_t *ctx, ta_mark_t *m);
int ti_mark_end(ti_ctx_t *ctx, const ta_mark_t *m, int keep);

/* For the code above the API (nn_optim.c): sets a context's error text. */
void ta_ctx_set_error(tact_ctx *h, const char *text);
/* For an optimizer that builds its step before the answer of the backward
 * it follows was read (client_grad.c).  ta_mark_ahead: 0 where no backward
 * is unanswered; else 1, and a mark in the unsent ops: until ta_mark_end,
 * no batch is sent for its length and each assign notes what its target
 * named.  ta_mark_end keeps what was built since (keep 1) or takes it back
 * (keep 0: the ops never sent, the assigns undone; TACT_EINVAL where some
 * were sent).  A tensor's gradient handle as it stands, not waiting (NULL
 * where there is none, or the tensor is sharded), *id its id (0: none).
 * ta_settle_backward reads the answer, returning its error. */
int ta_mark_ahead(tact_ctx *h, ta_mark_t *m);
int ta_mark_end(tact_ctx *h, const ta_mark_t *m, int keep);
tact_tensor *ta_grad_now(tact_tensor *t, uint64_t *id);
int ta_settle_backward(tact_ctx *h);
/* An error tensor of a context with code and text (the layers' own errors). */
tact_tensor *ta_error_tensor(tact_ctx *h, int code, const char *text);
/* For the optimizers' state: v where like is (on its device, or sharded as
 * it is; v itself when it is there already), and data (a new tensor) on
 * like's device or on each of its devices.  Error tensors as the API's. */
tact_tensor *ta_place_like(tact_tensor *v, tact_tensor *like);
tact_tensor *ta_from_data_like(tact_tensor *like, tact_dtype dtype, int ndim, const int64_t *shape, const void *data);
ti_tensor_t *ti_place_like(ti_tensor_t *v, ti_tensor_t *like);
ti_tensor_t *ti_from_data_like(ti_tensor_t *like, tact_dtype dtype, int ndim, const int64_t *shape, const void *data);
int ti_realize_async(ti_ctx_t *ctx, int n, ti_tensor_t *const *tensors);
int ti_realize(ti_ctx_t *ctx, int n, ti_tensor_t *const *tensors);
int ti_read(ti_tensor_t *t, void *buf, size_t bytes);
int ti_item(ti_tensor_t *t, double *out);

#endif
