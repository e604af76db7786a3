/* fuzz_api.c - libFuzzer target: the public API driven by sequences of calls with hostile arguments read from the input. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include "tact.h"

/*
 * Each input is a little program: every byte chooses a call, and the bytes
 * after it its arguments.  Tensors go into a pool (ring) that keeps them
 * after their scope ended or their context closed, so calls get live,
 * stale and foreign handles, NULL, another context's tensors and values
 * that were never handles, besides bad shapes, axes, dtypes and sizes.
 * Nothing may crash, hang or trip a sanitizer; errors are the answers.
 * Realizes are rare and small: each new kernel runs the system compiler.
 */

enum { S_POOL = 64, S_STEPS = 48 };

static tact_ctx *s_ctx[2];
static tact_tensor *s_pool[S_POOL];
static unsigned s_next;
static long s_runs;

typedef struct {
    const uint8_t *p, *end;
} s_in_t;

static uint8_t s_byte(s_in_t *in) { return in->p < in->end ? *in->p++ : 0; }

static uint64_t s_u64(s_in_t *in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | s_byte(in);
    return v;
}

static void s_put(tact_tensor *t) { s_pool[s_next++ % S_POOL] = t; }

/* A tensor argument: a pooled handle (live or stale), NULL, or a value
 * that was never a handle. */
static tact_tensor *s_tensor(s_in_t *in) {
    uint8_t b = s_byte(in);
    if (b < 200) return s_pool[b % S_POOL];
    if (b < 220) return NULL;
    return (tact_tensor *)(uintptr_t)s_u64(in);
}

/* A context argument: one of the two, NULL, or garbage. */
static tact_ctx *s_context(s_in_t *in) {
    uint8_t b = s_byte(in);
    if (b < 240) return s_ctx[b & 1];
    if (b < 248) return NULL;
    return (tact_ctx *)(uintptr_t)s_u64(in);
}

/* A dim: small mostly, sometimes -1, 0 or huge. */
static int64_t s_dim(s_in_t *in) {
    uint8_t b = s_byte(in);
    if (b < 230) return b % 4;
    if (b < 240) return -1;
    if (b < 250) return 0;
    return (int64_t)(s_u64(in) >> (b % 8));
}

static void s_reopen(void) {
    for (int i = 0; i < 2; i++) tact_ctx_close(&s_ctx[i]);
    tact_options o;
    tact_options_default(&o);
    o.cpu_threads = 1;
    o.compile_workers = 1;
    o.timeout_ms = 20000;
    for (int i = 0; i < 2; i++)
        if (tact_ctx_open(&s_ctx[i], &o) != TACT_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (s_runs++ % 200 == 0) s_reopen(); /* what the pool still holds goes stale */
    s_in_t in = {data, data + size};
    static const double values[4] = {0.0, -1.5, 1e300, 3.0};
    for (int step = 0; step < S_STEPS && in.p < in.end; step++) {
        uint8_t op = s_byte(&in);
        int64_t shape[24], pads[24][2];
        int axes[24], ndim = s_byte(&in) % 20;
        for (int k = 0; k < 24; k++) {
            shape[k] = s_dim(&in);
            pads[k][0] = s_dim(&in) % 3, pads[k][1] = s_dim(&in) % 3;
            axes[k] = (int)(int8_t)s_byte(&in) % 20;
        }
        int dtype = s_byte(&in) % 15; /* 13 and 14 are not dtypes */
        tact_tensor *a = s_tensor(&in), *b = s_tensor(&in), *c = s_tensor(&in);
        tact_ctx *ctx = s_context(&in);
        switch (op % 33) {
        case 0: {
            double buf[64] = {0};
            int64_t n = 1;
            for (int k = 0; k < ndim && k < 16 && n <= 64; k++) n *= shape[k] > 0 && shape[k] <= 64 ? shape[k] : shape[k] > 64 ? 65 : 1;
            s_put(n <= 64 && ndim <= 16 ? tact_from_data(ctx, (tact_dtype)dtype, ndim, shape, buf) : tact_scalar(ctx, 2.0));
            break;
        }
        case 1: s_put(tact_full(ctx, (tact_dtype)dtype, ndim <= 16 ? ndim : 16, shape, values[dtype & 3])); break;
        case 2: s_put(tact_scalar(ctx, values[dtype & 3])); break;
        case 3: s_put(tact_scalar_int(ctx, (int64_t)s_u64(&in))); break;
        case 4: s_put(tact_arange(ctx, s_dim(&in), s_dim(&in), s_dim(&in) ? s_dim(&in) : 1, dtype)); break;
        case 5: {
            tact_tensor *(*const un[])(tact_tensor *) = {tact_exp2, tact_log2, tact_sin, tact_sqrt, tact_recip, tact_neg, tact_contiguous, tact_keep};
            s_put(un[dtype % 8](a));
            break;
        }
        case 6: {
            tact_tensor *(*const bin[])(tact_tensor *, tact_tensor *) = {tact_add, tact_sub, tact_mul,    tact_div, tact_idiv,   tact_mod,
                                                                         tact_maximum, tact_cmplt, tact_cmpne, tact_xor, tact_and, tact_or,
                                                                         tact_shl, tact_shr, tact_matmul};
            s_put(bin[dtype % 15](a, b));
            break;
        }
        case 7: s_put(tact_where(a, b, c)); break;
        case 8: s_put(tact_mulacc(a, b, c)); break;
        case 9: s_put(dtype & 1 ? tact_sum(a, ndim - 4, axes, dtype & 2) : tact_max(a, ndim - 4, axes, dtype & 2)); break;
        case 10: s_put(tact_reshape(a, ndim, shape)); break;
        case 11: s_put(tact_permute(a, axes)); break;
        case 12: s_put(tact_expand(a, ndim, shape)); break;
        case 13: s_put(dtype & 1 ? tact_pad(a, (const int64_t(*)[2])pads, values[dtype & 3]) : tact_shrink(a, (const int64_t(*)[2])pads)); break;
        case 14: s_put(tact_flip(a, ndim - 4, axes)); break;
        case 15: s_put(dtype & 1 ? tact_cast(a, (tact_dtype)dtype) : tact_bitcast(a, (tact_dtype)dtype)); break;
        case 16: s_put(tact_assign(a, b)); break;
        case 17: tact_scope_begin(ctx); break;
        case 18: tact_scope_end(ctx); break;
        case 19: { /* a realize, rarely: every new kernel is a compile */
            if (s_byte(&in) % 8) break;
            tact_tensor *xs[3] = {a, b, c};
            int n = ndim % 4 ? ndim % 4 : -1;
            if (tact_numel(a) <= 64 && tact_numel(b) <= 64 && tact_numel(c) <= 64) tact_realize(ctx, n, xs);
            break;
        }
        case 20: {
            uint8_t buf[512];
            if (tact_numel(a) <= 64) tact_read(a, s_byte(&in) & 1 ? buf : NULL, (size_t)s_byte(&in) * 2);
            break;
        }
        case 21: {
            double v;
            if (tact_numel(a) <= 64) tact_item(a, s_byte(&in) & 1 ? &v : NULL);
            break;
        }
        case 22: { /* queries */
            int64_t sh[16];
            tact_stats st;
            (void)tact_ndim(a), (void)tact_dim(a, axes[0]), (void)tact_numel(a), (void)tact_dtype_of(a), (void)tact_device(a);
            (void)tact_status_of(a), (void)tact_error_message(a), (void)tact_ctx_error(ctx);
            if (tact_ndim(a) <= 16) tact_shape(a, sh);
            tact_ctx_stats(ctx, &st);
            break;
        }
        case 23: { /* the composed elementwise functions */
            tact_tensor *(*const un[])(tact_tensor *) = {tact_exp,   tact_log,        tact_relu,      tact_sigmoid, tact_rsqrt,     tact_cos,
                                                         tact_tan,   tact_trunc,      tact_ceil,      tact_floor,   tact_round,     tact_square,
                                                         tact_sign,  tact_abs,        tact_reciprocal, tact_logical_not, tact_swish, tact_relu6,
                                                         tact_hardswish, tact_tanh,   tact_sinh,      tact_atanh,   tact_asinh,     tact_gelu,
                                                         tact_quick_gelu, tact_mish,  tact_softsign,  tact_T,       tact_zeros_like, tact_rand_like};
            s_put(un[s_byte(&in) % (sizeof un / sizeof un[0])](a));
            break;
        }
        case 24: {
            tact_tensor *(*const bin[])(tact_tensor *, tact_tensor *) = {tact_minimum, tact_eq, tact_ne, tact_lt, tact_gt, tact_le, tact_ge, tact_pow,
                                                                         tact_dot, tact_binary_crossentropy, tact_binary_crossentropy_logits};
            s_put(bin[s_byte(&in) % (sizeof bin / sizeof bin[0])](a, b));
            break;
        }
        case 25: { /* composed reductions, with hostile axes */
            int k = axes[1], keep = dtype & 1, na = ndim - 4;
            switch (s_byte(&in) % 12) {
            case 0: s_put(tact_min(a, na, axes, keep)); break;
            case 1: s_put(tact_any(a, na, axes, keep)); break;
            case 2: s_put(tact_all(a, na, axes, keep)); break;
            case 3: s_put(tact_mean(a, na, axes, keep)); break;
            case 4: s_put(tact_var(a, na, axes, keep, values[dtype & 3])); break;
            case 5: s_put(tact_std(a, na, axes, keep, 1)); break;
            case 6: s_put(tact_logsumexp(a, na, axes, keep)); break;
            case 7: s_put(tact_softmax(a, k)); break;
            case 8: s_put(tact_log_softmax(a, k)); break;
            case 9: s_put(keep ? tact_argmax(a, k, dtype & 2) : tact_argmin_flat(a)); break;
            case 10: s_put(tact_cumsum(a, k)); break;
            default: s_put(tact_layernorm(a, na, axes, 1e-5)); break;
            }
            break;
        }
        case 26: { /* composed movement and indexing */
            tact_tensor *pieces[8], *three[3] = {a, b, c};
            int k = axes[1];
            switch (s_byte(&in) % 14) {
            case 0: s_put(tact_squeeze(a, ndim - 4, axes)); break;
            case 1: s_put(tact_unsqueeze(a, k)); break;
            case 2: s_put(tact_flatten(a, k, axes[2])); break;
            case 3: s_put(tact_unflatten(a, k, ndim - 4, shape)); break;
            case 4: s_put(tact_transpose(a, k, axes[2])); break;
            case 5: s_put(tact_repeat(a, ndim - 4, shape)); break;
            case 6: s_put(tact_repeat_interleave(a, shape[0], k)); break;
            case 7: s_put(dtype & 1 ? tact_cat(1 + dtype % 3, three, k) : tact_stack(1 + dtype % 3, three, k)); break;
            case 8: if (tact_split(a, ndim % 8, shape, k, pieces) > 0) s_put(pieces[0]); break;
            case 9: if (tact_chunk(a, (int)shape[0] % 9, k, pieces) > 0) s_put(pieces[0]); break;
            case 10: s_put(tact_gather(a, k, b)); break;
            case 11: s_put(tact_pad2d(a, ndim - 4, shape, values[dtype & 3])); break;
            default: {
                tact_index idx[20];
                int n = ndim - 2;
                for (int i = 0; i < 20; i++) {
                    uint8_t kind = s_byte(&in) % 5;
                    idx[i] = (tact_index){(tact_index_kind)kind, shape[i], shape[i + 1], shape[i + 2] - 1, kind & 1, axes[i] & 1, axes[i] & 2, i & 1 ? a : b};
                }
                s_put(dtype & 1 ? tact_getitem(a, n, idx) : tact_setitem(a, n, idx, c));
                break;
            }
            }
            break;
        }
        case 27: { /* nn, with hostile windows */
            tact_window w;
            tact_window_default(&w);
            w.ndims = (int)shape[0] - 1;
            for (int i = 0; i < 3; i++) w.kernel[i] = shape[1 + i], w.stride[i] = shape[4 + i], w.dilation[i] = shape[7 + i], w.output_padding[i] = shape[10 + i];
            w.npad = (int)shape[13] + 1;
            for (int i = 0; i < 6; i++) w.padding[i] = shape[14 + i];
            w.groups = (int)shape[20] + 1;
            switch (s_byte(&in) % 9) {
            case 0: s_put(tact_conv2d(a, b, dtype & 1 ? c : NULL, dtype & 2 ? &w : NULL)); break;
            case 1: s_put(tact_conv_transpose2d(a, b, dtype & 1 ? c : NULL, &w)); break;
            case 2: s_put(dtype & 1 ? tact_max_pool2d(a, &w) : tact_avg_pool2d(a, &w)); break;
            case 3: s_put(tact_linear(a, b, dtype & 1 ? c : NULL)); break;
            case 4: s_put(tact_batchnorm(a, dtype & 1 ? b : NULL, NULL, c, b, axes[1])); break;
            case 5: s_put(tact_one_hot(a, shape[0])); break;
            case 6: s_put(tact_sparse_categorical_crossentropy(a, b, shape[1], values[dtype & 3])); break;
            case 7: s_put(tact_interpolate(a, ndim - 4, shape, dtype & 1)); break;
            default: s_put(tact_scaled_dot_product_attention(a, b, c, NULL, 0, dtype & 1, 0)); break;
            }
            break;
        }
        case 28: { /* random numbers */
            switch (s_byte(&in) % 6) {
            case 0: tact_manual_seed(ctx, s_u64(&in)); break;
            case 1: s_put(tact_rand(ctx, (tact_dtype)dtype, ndim, shape)); break;
            case 2: s_put(tact_randn(ctx, (tact_dtype)dtype, ndim, shape)); break;
            case 3: s_put(tact_randint(ctx, (tact_dtype)dtype, ndim, shape, shape[0], shape[1])); break;
            case 4: s_put(tact_dropout(a, values[dtype & 3], 1)); break;
            default: s_put(tact_multinomial(a, shape[0], dtype & 1)); break;
            }
            break;
        }
        case 29: { /* einsum with a formula from the input */
            char f[24];
            for (int i = 0; i < 23; i++) f[i] = "ij,k->. "[s_byte(&in) % 8];
            f[23] = 0;
            tact_tensor *ops[3] = {a, b, c};
            s_put(tact_einsum(dtype & 1 ? f : "ij,jk->ik", 1 + dtype % 3, ops));
            break;
        }
        case 30: { /* files from the input: a safetensors file and an IDX file, hostile */
            static char path[64];
            if (!path[0]) snprintf(path, sizeof path, "/tmp/tact-fuzz-file-%d", (int)getpid());
            size_t n = (size_t)s_byte(&in) * 4;
            if (n > (size_t)(in.end - in.p)) n = (size_t)(in.end - in.p);
            FILE *f = fopen(path, "wb");
            if (f) {
                if (n) fwrite(in.p, 1, n, f);
                fclose(f);
                in.p += n;
                s_put(dtype & 1 ? tact_load_safetensors(ctx, path, "x") : tact_load_idx(ctx, path));
            }
            break;
        }
        case 31: { /* autograd: flags, detach, no-grad, backward with hostile losses and gradients, grads */
            switch (s_byte(&in) % 6) {
            case 0: s_put(tact_set_requires_grad(a, (int)(s_byte(&in) % 4) - 1)); break;
            case 1: s_put(tact_detach(a)); break;
            case 2: tact_set_no_grad(ctx, s_byte(&in) & 1); break;
            case 3: tact_backward(a, s_byte(&in) & 1 ? b : NULL); break;
            case 4: s_put(tact_grad(a)); break;
            default: tact_grad_clear(a); break;
            }
            break;
        }
        case 32: { /* layers and an optimizer over pooled tensors, sizes from the input */
            tact_layer l;
            tact_window w;
            tact_window_default(&w);
            w.groups = (int)(s_byte(&in) % 3);
            int64_t i = s_dim(&in), o = s_dim(&in);
            switch (s_byte(&in) % 5) {
            case 0: tact_layer_linear(&l, ctx, i, o, dtype & 1); break;
            case 1: tact_layer_conv2d(&l, ctx, i, o, s_dim(&in), s_dim(&in), &w, dtype & 1); break;
            case 2: tact_layer_batchnorm(&l, ctx, i, values[dtype & 3], 0.1, dtype & 1, dtype & 2); break;
            case 3: tact_layer_embedding(&l, ctx, i, o); break;
            default: tact_layer_dropout(&l, values[dtype & 3]); break;
            }
            s_put(tact_layer_forward(&l, a, dtype & 1));
            tact_optim *opt = NULL;
            tact_optim_options oo;
            tact_optim_options_default(&oo, (tact_optim_kind)(dtype % 4));
            tact_tensor *ps[3] = {a, b, c};
            if (tact_optim_new(&opt, ctx, &oo, 1 + dtype % 3, ps) == TACT_OK) {
                tact_optim_step(opt);
                tact_optim_zero_grad(opt);
                tact_optim_free(&opt);
            }
            break;
        }
        default: tact_wait(ctx); break;
        }
    }
    return 0;
}
