/* nn_layers.c - the reference's nn layers and named parameter lists, composed from the public tensor API. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"
#include "mem.h"
#include "shape.h"
#include "tact.h"

/* ------------------------------------------------------------ parameters */

int tact_params_add(tact_params *p, const char *prefix, const char *name, tact_tensor *t) {
    if (!p || !name || !t) return TACT_EINVAL;
    tact_ctx *ctx = tact_tensor_ctx(t);
    char text[300];
    if (tact_status_of(t) != TACT_OK) {
        snprintf(text, sizeof text, "params_add %s: the tensor is an error: %s", name, tact_error_message(t));
        ta_ctx_set_error(ctx, text);
        return tact_status_of(t);
    }
    size_t len = (prefix ? strlen(prefix) : 0) + strlen(name) + 2;
    char *full = ta_malloc(len);
    if (!full) {
        ta_ctx_set_error(ctx, "params_add: out of memory");
        return TACT_ENOMEM;
    }
    snprintf(full, len, "%s%s%s", prefix && *prefix ? prefix : "", prefix && *prefix ? "." : "", name);
    if (tact_params_get(p, full)) {
        snprintf(text, sizeof text, "params_add: the name %.200s is in use", full);
        ta_ctx_set_error(ctx, text);
        ta_free(full);
        return TACT_EINVAL;
    }
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        char **names = ta_realloc(p->names, sizeof *names * (size_t)cap);
        if (names) p->names = names;
        tact_tensor **ts = names ? ta_realloc(p->tensors, sizeof *ts * (size_t)cap) : NULL;
        if (ts) p->tensors = ts;
        if (!names || !ts) {
            ta_free(full);
            ta_ctx_set_error(ctx, "params_add: out of memory");
            return TACT_ENOMEM;
        }
        p->cap = cap;
    }
    p->names[p->n] = full;
    p->tensors[p->n++] = t;
    return TACT_OK;
}

tact_tensor *tact_params_get(const tact_params *p, const char *name) {
    for (int i = 0; p && name && i < p->n; i++)
        if (strcmp(p->names[i], name) == 0) return p->tensors[i];
    return NULL;
}

void tact_params_free(tact_params *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) ta_free(p->names[i]);
    ta_free(p->names);
    ta_free(p->tensors);
    memset(p, 0, sizeof *p);
}

/* All of the layer's tensors or none: a refused name takes back the ones
 * added before it. */
int tact_layer_params(const tact_layer *l, const char *prefix, tact_params *p) {
    if (!l || !p) return TACT_EINVAL;
    int before = p->n;
    struct {
        const char *name;
        tact_tensor *t;
    } all[4] = {{"weight", l->weight}, {"bias", l->bias}, {"running_mean", l->running_mean}, {"running_var", l->running_var}};
    for (int i = 0; i < 4; i++) {
        int rc = all[i].t ? tact_params_add(p, prefix, all[i].name, all[i].t) : TACT_OK;
        if (rc != TACT_OK) {
            while (p->n > before) ta_free(p->names[--p->n]);
            return rc;
        }
    }
    return TACT_OK;
}

/* ---------------------------------------------------------- constructors */

/* A parameter: realized now (its random numbers drawn in construction
 * order), kept, requiring a gradient. */
static tact_tensor *s_param(tact_tensor *t) { return tact_set_requires_grad(tact_keep(tact_contiguous(t)), 1); }

/* Realizes the layer's tensors and ends the scope the constructor made
 * them in, so what initializing them took (a uniform's random bits:
 * hundreds of nodes) goes; only the layer's tensors stay, kept in the
 * caller's scope (before, every layer's intermediates stayed held there
 * until the context closed).  Any error tensor among them fails the layer. */
static int s_finish(tact_layer *l, tact_ctx *ctx) {
    tact_tensor *all[4] = {l->weight, l->bias, l->running_mean, l->running_var}, *some[4];
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (all[i]) some[n++] = all[i];
    int rc = n ? tact_realize(ctx, n, some) : TACT_OK;
    tact_scope_end(ctx);
    for (int i = 0; rc == TACT_OK && i < n; i++) tact_keep(some[i]); /* kept where the layer was made, as before */
    if (rc != TACT_OK) memset(l, 0, sizeof *l);
    return rc;
}

/* A refused constructor: the layer zeroed, the cause in the context's error. */
static int s_bad(tact_layer *l, tact_ctx *ctx, const char *text) {
    memset(l, 0, sizeof *l);
    if (ctx) ta_ctx_set_error(ctx, text);
    return TACT_EINVAL;
}

static double s_uniform_bound(double fan_in) { return 1 / sqrt(fan_in); }

int tact_layer_linear(tact_layer *l, tact_ctx *ctx, int64_t in, int64_t out, int bias) {
    if (!l) return TACT_EINVAL;
    if (!ctx || in <= 0 || out <= 0) return s_bad(l, ctx, "linear: sizes must be positive");
    memset(l, 0, sizeof *l);
    l->kind = TACT_LAYER_LINEAR;
    l->features = out;
    double b = s_uniform_bound((double)in);
    tact_scope_begin(ctx); /* ended by s_finish */
    l->weight = s_param(tact_uniform(ctx, TACT_FLOAT32, 2, (int64_t[]){out, in}, -b, b));
    if (bias) l->bias = s_param(tact_uniform(ctx, TACT_FLOAT32, 1, (int64_t[]){out}, -b, b));
    return s_finish(l, ctx);
}

static int s_conv(tact_layer *l, tact_ctx *ctx, int transposed, int64_t in, int64_t out, int64_t kh, int64_t kw, const tact_window *opt,
                  int bias) {
    if (!l) return TACT_EINVAL;
    tact_window w;
    if (opt) w = *opt;
    else tact_window_default(&w);
    int64_t g = w.groups > 0 ? w.groups : 1;
    if (!ctx || in <= 0 || out <= 0 || kh <= 0 || kw <= 0 || in % g || out % g) return s_bad(l, ctx, "conv2d: sizes must be positive, channels divisible by groups");
    memset(l, 0, sizeof *l);
    l->kind = transposed ? TACT_LAYER_CONV_TRANSPOSE2D : TACT_LAYER_CONV2D;
    l->window = w;
    l->features = out;
    /* The reference: kaiming_uniform(a = sqrt 5) of (out, in/groups, kh, kw),
     * or (in, out/groups, kh, kw) transposed; the bias bound from the fan in
     * of that weight's shape. */
    int64_t shape[4] = {transposed ? in : out, transposed ? out / g : in / g, kh, kw};
    tact_scope_begin(ctx); /* ended by s_finish */
    l->weight = s_param(tact_kaiming_uniform(ctx, TACT_FLOAT32, 4, shape, sqrt(5.0)));
    double b = s_uniform_bound((double)(shape[1] * kh * kw));
    if (bias) l->bias = s_param(tact_uniform(ctx, TACT_FLOAT32, 1, (int64_t[]){out}, -b, b));
    return s_finish(l, ctx);
}

int tact_layer_conv2d(tact_layer *l, tact_ctx *ctx, int64_t in, int64_t out, int64_t kh, int64_t kw, const tact_window *opt, int bias) {
    return s_conv(l, ctx, 0, in, out, kh, kw, opt, bias);
}

int tact_layer_conv_transpose2d(tact_layer *l, tact_ctx *ctx, int64_t in, int64_t out, int64_t kh, int64_t kw, const tact_window *opt,
                                int bias) {
    return s_conv(l, ctx, 1, in, out, kh, kw, opt, bias);
}

int tact_layer_batchnorm(tact_layer *l, tact_ctx *ctx, int64_t features, double eps, double momentum, int affine, int track) {
    if (!l) return TACT_EINVAL;
    if (!ctx || features <= 0 || !(eps > 0) || !(momentum >= 0 && momentum <= 1)) return s_bad(l, ctx, "batchnorm: features > 0, eps > 0, momentum in [0, 1]");
    memset(l, 0, sizeof *l);
    l->kind = TACT_LAYER_BATCHNORM;
    l->features = features;
    l->eps = eps;
    l->momentum = momentum;
    int64_t shape[1] = {features};
    tact_scope_begin(ctx); /* ended by s_finish */
    if (affine) {
        l->weight = s_param(tact_ones(ctx, TACT_FLOAT32, 1, shape));
        l->bias = s_param(tact_zeros(ctx, TACT_FLOAT32, 1, shape));
    }
    if (track) {
        l->running_mean = tact_set_requires_grad(tact_keep(tact_contiguous(tact_zeros(ctx, TACT_FLOAT32, 1, shape))), 0);
        l->running_var = tact_set_requires_grad(tact_keep(tact_contiguous(tact_ones(ctx, TACT_FLOAT32, 1, shape))), 0);
    }
    return s_finish(l, ctx);
}

int tact_layer_layernorm(tact_layer *l, tact_ctx *ctx, int ndims, const int64_t *shape, double eps, int affine) {
    if (!l) return TACT_EINVAL;
    if (!ctx || ndims <= 0 || ndims > 8 || !shape || !(eps > 0)) return s_bad(l, ctx, "layernorm: 1 to 8 positive dims, eps > 0");
    for (int k = 0; k < ndims; k++)
        if (shape[k] <= 0) return s_bad(l, ctx, "layernorm: 1 to 8 positive dims, eps > 0");
    memset(l, 0, sizeof *l);
    l->kind = TACT_LAYER_LAYERNORM;
    l->naxes = ndims;
    memcpy(l->norm_shape, shape, sizeof *shape * (size_t)ndims);
    l->eps = eps;
    tact_scope_begin(ctx); /* ended by s_finish */
    if (affine) {
        l->weight = s_param(tact_ones(ctx, TACT_FLOAT32, ndims, shape));
        l->bias = s_param(tact_zeros(ctx, TACT_FLOAT32, ndims, shape));
    }
    return s_finish(l, ctx);
}

int tact_layer_groupnorm(tact_layer *l, tact_ctx *ctx, int64_t groups, int64_t channels, double eps, int affine) {
    if (!l) return TACT_EINVAL;
    if (!ctx || groups <= 0 || channels <= 0 || channels % groups || !(eps > 0)) return s_bad(l, ctx, "groupnorm: channels divisible by groups, eps > 0");
    memset(l, 0, sizeof *l);
    l->kind = TACT_LAYER_GROUPNORM;
    l->groups = groups;
    l->features = channels;
    l->eps = eps;
    tact_scope_begin(ctx); /* ended by s_finish */
    if (affine) {
        l->weight = s_param(tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){channels}));
        l->bias = s_param(tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){channels}));
    }
    return s_finish(l, ctx);
}

int tact_layer_embedding(tact_layer *l, tact_ctx *ctx, int64_t vocab, int64_t embed) {
    if (!l) return TACT_EINVAL;
    if (!ctx || vocab <= 0 || embed <= 0) return s_bad(l, ctx, "embedding: sizes must be positive");
    memset(l, 0, sizeof *l);
    l->kind = TACT_LAYER_EMBEDDING;
    l->features = vocab;
    tact_scope_begin(ctx); /* ended by s_finish */
    l->weight = s_param(tact_glorot_uniform(ctx, TACT_FLOAT32, 2, (int64_t[]){vocab, embed}));
    return s_finish(l, ctx);
}

int tact_layer_dropout(tact_layer *l, double p) {
    if (!l) return TACT_EINVAL;
    memset(l, 0, sizeof *l);
    if (!(p >= 0 && p <= 1)) return TACT_EINVAL;
    l->kind = TACT_LAYER_DROPOUT;
    l->p = p;
    return TACT_OK;
}

/* --------------------------------------------------------------- forward */

/* v reshaped to (1, C, 1, ...) for an input of ndim dims. */
static tact_tensor *s_channel(tact_tensor *v, int ndim) {
    int64_t shape[16];
    for (int k = 0; k < ndim; k++) shape[k] = 1;
    shape[1] = -1;
    return tact_reshape(v, ndim, shape);
}

/* The reference's BatchNorm.__call__: batch statistics in training (the
 * mean detached where it centres the variance), with the running ones
 * assigned from them; the running ones otherwise. */
static tact_tensor *s_batchnorm(const tact_layer *l, tact_tensor *x, int training) {
    int nd = tact_ndim(x);
    if (tact_status_of(x) != TACT_OK) return x;
    if (nd < 2) return ta_error_tensor(tact_tensor_ctx(x), TACT_ESHAPE, "batchnorm: the input needs a batch and a channel dim");
    int axes[16], na = 0;
    for (int k = 0; k < nd; k++)
        if (k != 1) axes[na++] = k;
    tact_ctx *ctx = tact_tensor_ctx(x);
    tact_tensor *mean, *invstd;
    if (training || !l->running_mean) {
        mean = tact_mean(x, na, axes, 0);
        tact_tensor *y = tact_sub(x, s_channel(tact_detach(mean), nd));
        tact_tensor *var = tact_mean(tact_mul(y, y), na, axes, 0);
        invstd = tact_rsqrt(tact_add(var, tact_scalar(ctx, l->eps)));
        int64_t n = tact_numel(x), c = tact_dim(x, 1);
        if (training && n == c)
            return ta_error_tensor(ctx, TACT_ESHAPE, "batchnorm: training needs more than one value per channel (as PyTorch)");
        if (l->running_mean && training) {
            double unbias = (double)n / (double)(n - c);
            tact_assign(l->running_mean, tact_add(tact_mul(tact_scalar(ctx, 1 - l->momentum), l->running_mean),
                                                  tact_mul(tact_scalar(ctx, l->momentum), tact_detach(mean))));
            tact_assign(l->running_var, tact_add(tact_mul(tact_scalar(ctx, 1 - l->momentum), l->running_var),
                                                 tact_mul(tact_scalar(ctx, l->momentum * unbias), tact_detach(var))));
        }
    } else {
        mean = l->running_mean;
        invstd = tact_rsqrt(tact_add(l->running_var, tact_scalar(ctx, l->eps)));
    }
    return tact_batchnorm(x, l->weight, l->bias, mean, invstd, 1);
}

static tact_tensor *s_affine(tact_tensor *x, const tact_layer *l, int channel) {
    if (!l->weight) return x;
    int nd = tact_ndim(x);
    tact_tensor *w = channel ? s_channel(l->weight, nd) : l->weight, *b = channel ? s_channel(l->bias, nd) : l->bias;
    return tact_add(tact_mul(x, w), b);
}

/* The reference's Embedding: (arange == idx) times the weight, summed over the vocabulary. */
static tact_tensor *s_embedding(const tact_layer *l, tact_tensor *idx) {
    tact_ctx *ctx = tact_tensor_ctx(idx);
    int nd = tact_ndim(idx);
    if (tact_status_of(idx) != TACT_OK) return idx;
    if (nd > 13) return ta_error_tensor(ctx, TACT_ESHAPE, "embedding: indices of more than 13 dims");
    int64_t v = l->features, e = tact_dim(l->weight, 1), big[16], ar[16], ish[16], wsh[16];
    tact_shape(idx, ish);
    for (int k = 0; k < nd; k++) big[k] = ish[k], ar[k] = 1, wsh[k] = 1;
    big[nd] = v, big[nd + 1] = e;
    ar[nd] = v, ar[nd + 1] = 1;
    wsh[nd] = v, wsh[nd + 1] = e;
    ish[nd] = 1, ish[nd + 1] = 1;
    tact_tensor *arange = tact_expand(tact_reshape(tact_arange(ctx, 0, (double)v, 1, tact_dtype_of(idx)), nd + 2, ar), nd + 2, big);
    tact_tensor *id = tact_expand(tact_reshape(idx, nd + 2, ish), nd + 2, big);
    tact_tensor *w = tact_expand(tact_reshape(l->weight, nd + 2, wsh), nd + 2, big);
    return tact_sum(tact_mul(tact_eq(arange, id), w), 1, (int[]){nd}, 0);
}

tact_tensor *tact_layer_forward(const tact_layer *l, tact_tensor *x, int training) {
    if (!l) return tact_neg(NULL);
    switch (l->kind) {
    case TACT_LAYER_LINEAR: return tact_linear(x, tact_transpose(l->weight, 0, 1), l->bias);
    case TACT_LAYER_CONV2D: return tact_conv2d(x, l->weight, l->bias, &l->window);
    case TACT_LAYER_CONV_TRANSPOSE2D: return tact_conv_transpose2d(x, l->weight, l->bias, &l->window);
    case TACT_LAYER_BATCHNORM: return s_batchnorm(l, x, training);
    case TACT_LAYER_LAYERNORM: {
        int axes[8];
        /* The reference asserts the normalized dims are the layer's. */
        if (tact_status_of(x) == TACT_OK) {
            int nd = tact_ndim(x), ok = nd >= l->naxes;
            for (int k = 0; ok && k < l->naxes; k++) ok = tact_dim(x, nd - l->naxes + k) == l->norm_shape[k];
            if (!ok) return ta_error_tensor(tact_tensor_ctx(x), TACT_ESHAPE, "layernorm: the input's last dims are not the layer's shape");
        }
        for (int k = 0; k < l->naxes; k++) axes[k] = k - l->naxes;
        return s_affine(tact_layernorm(x, l->naxes, axes, l->eps), l, 0);
    }
    case TACT_LAYER_GROUPNORM: {
        int64_t shape[16], grouped[3] = {tact_dim(x, 0), l->groups, -1};
        int nd = tact_ndim(x);
        tact_shape(x, shape);
        tact_tensor *y = tact_reshape(tact_layernorm(tact_reshape(x, 3, grouped), 1, (int[]){-1}, l->eps), nd, shape);
        return s_affine(y, l, 1);
    }
    case TACT_LAYER_EMBEDDING: return s_embedding(l, x);
    case TACT_LAYER_DROPOUT: return tact_dropout(x, l->p, training);
    }
    return tact_neg(NULL);
}

int tact_params_save(tact_ctx *ctx, const char *path, const tact_params *p) {
    if (!ctx || !path || !p) return TACT_EINVAL;
    return tact_save_safetensors(ctx, path, p->n, (const char *const *)p->names, p->tensors);
}

int tact_params_load(tact_ctx *ctx, const char *path, const tact_params *p) {
    if (!ctx || !path || !p) return TACT_EINVAL;
    int rc = TACT_OK;
    for (int i = 0; i < p->n && rc == TACT_OK; i++) {
        if ((rc = tact_scope_begin(ctx)) != TACT_OK) break;
        tact_tensor *t = tact_load_safetensors(ctx, path, p->names[i]), *want = p->tensors[i];
        /* The stored tensor must be the parameter's dtype and shape
         * exactly: an assign would broadcast [1] into [128]. */
        ta_shape_t a = {tact_ndim(t), {0}}, b = {tact_ndim(want), {0}};
        tact_shape(t, a.d);
        tact_shape(want, b.d);
        char text[700];
        if ((rc = tact_status_of(t)) != TACT_OK || (rc = tact_status_of(want)) != TACT_OK) {
            snprintf(text, sizeof text, "load %s: %s: %s", path, p->names[i], tact_error_message(tact_status_of(t) != TACT_OK ? t : want));
        } else if (tact_dtype_of(t) != tact_dtype_of(want) || !ta_shape_equal(&a, &b)) {
            char sa[200], sb[200];
            ta_shape_format(&a, sa, sizeof sa);
            ta_shape_format(&b, sb, sizeof sb);
            snprintf(text, sizeof text, "load %s: \"%s\" is stored as %s %s; the parameter is %s %s", path, p->names[i],
                     tact_dtype_name(tact_dtype_of(t)), sa, tact_dtype_name(tact_dtype_of(want)), sb);
            rc = tact_dtype_of(t) != tact_dtype_of(want) ? TACT_EDTYPE : TACT_ESHAPE;
        } else {
            tact_tensor *r = tact_assign(want, t);
            if ((rc = tact_status_of(r)) != TACT_OK) snprintf(text, sizeof text, "load %s: %s: %s", path, p->names[i], tact_error_message(r));
        }
        if (rc != TACT_OK) ta_ctx_set_error(ctx, text);
        tact_scope_end(ctx);
    }
    return rc == TACT_OK ? tact_realize(ctx, p->n, p->tensors) : rc;
}
