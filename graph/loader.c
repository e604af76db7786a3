/* loader.c - tact_loader: seeded, shuffled minibatches of a dataset's tensors, built on the public API. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client_impl.h"
#include "mem.h"
#include "tact.h"

/*
 * The dataset's tensors are read to the host once, when the loader is
 * made; a batch is assembled there, row by row in the epoch's order, and
 * sent as a new tensor on the device its tensor was on.  (Gathering the
 * rows on the device instead waits for cheap gathers, kernels v3.)  The
 * epoch's order is a Fisher-Yates shuffle driven by xorshift64* keyed by
 * the seed and the epoch, so it depends on nothing but those.
 */
struct tact_loader {
    tact_ctx *ctx;
    tact_loader_options o;
    int n;
    int64_t rows;
    struct s_column {
        tact_dtype dtype;
        int ndim;
        int64_t shape[16];
        size_t row_bytes;
        uint8_t *host;
        char device[300];
    } *cols;
    int64_t *order; /* this epoch's rows */
    int64_t next;   /* the first row of the next batch in order */
    uint64_t epoch; /* epochs begun */
    uint8_t *scratch;
};

void tact_loader_options_default(tact_loader_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->batch = 32;
    o->shuffle = 1;
}

static uint64_t s_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A new epoch's order: every row once, shuffled by the seed and the epoch. */
static void s_epoch(tact_loader *l) {
    for (int64_t i = 0; i < l->rows; i++) l->order[i] = i;
    if (l->o.shuffle) {
        uint64_t rng = (l->o.seed + 1) * 0x9E3779B97F4A7C15ULL ^ (l->epoch + 1) * 0xD1B54A32D192ED03ULL;
        if (!rng) rng = 1;
        for (int64_t i = l->rows - 1; i > 0; i--) {
            int64_t j = (int64_t)(s_next(&rng) % (uint64_t)(i + 1)), t = l->order[i];
            l->order[i] = l->order[j], l->order[j] = t;
        }
    }
    l->epoch++;
    l->next = 0;
}

static int s_fail(tact_ctx *ctx, int code, const char *text) {
    ta_ctx_set_error(ctx, text);
    return code;
}

int tact_loader_new(tact_loader **out, tact_ctx *ctx, int n, tact_tensor *const *tensors, const tact_loader_options *opts) {
    if (!out) return TACT_EINVAL;
    *out = NULL;
    if (!ctx) return TACT_EINVAL;
    tact_loader_options o;
    if (opts) o = *opts;
    else tact_loader_options_default(&o);
    if (o.batch == 0) o.batch = 32;
    char text[400];
    if (n < 1 || !tensors) return s_fail(ctx, TACT_EINVAL, "loader: no tensors");
    if (o.batch < 1) {
        snprintf(text, sizeof text, "loader: a batch of %" PRId64 " rows", o.batch);
        return s_fail(ctx, TACT_EINVAL, text);
    }
    int64_t rows = -1;
    for (int i = 0; i < n; i++) {
        tact_tensor *t = tensors[i];
        const char *why = tact_status_of(t) != TACT_OK                 ? tact_error_message(t)
                          : tact_tensor_ctx(t) != ctx                   ? "it belongs to another context"
                          : tact_ndim(t) < 1                            ? "it has no rows (0 dims)"
                          : tact_shard_axis(t) != -1                    ? "it is sharded (gather it with tact_to first)"
                          : rows >= 0 && tact_dim(t, 0) != rows         ? "its rows differ from the first tensor's"
                                                                        : NULL;
        if (why) {
            snprintf(text, sizeof text, "loader: tensor %d: %s", i, why);
            return s_fail(ctx, tact_status_of(t) != TACT_OK ? tact_status_of(t) : TACT_EINVAL, text);
        }
        rows = tact_dim(t, 0);
    }
    tact_loader *l = ta_calloc(1, sizeof *l);
    if (!l || !(l->cols = ta_calloc((size_t)n, sizeof *l->cols)) || !(l->order = ta_malloc(sizeof *l->order * (size_t)(rows ? rows : 1)))) {
        tact_loader_free(&l);
        return s_fail(ctx, TACT_ENOMEM, "loader: out of memory");
    }
    l->ctx = ctx;
    l->o = o;
    l->n = n;
    l->rows = rows;
    size_t widest = 1;
    for (int i = 0; i < n; i++) {
        struct s_column *c = &l->cols[i];
        c->dtype = tact_dtype_of(tensors[i]);
        c->ndim = tact_ndim(tensors[i]);
        tact_shape(tensors[i], c->shape);
        snprintf(c->device, sizeof c->device, "%s", tact_device(tensors[i]));
        c->row_bytes = tact_element_size(c->dtype);
        for (int k = 1; k < c->ndim; k++) c->row_bytes *= (size_t)c->shape[k];
        size_t bytes = c->row_bytes * (size_t)rows;
        int rc = (c->host = ta_malloc(bytes ? bytes : 1)) ? tact_read(tensors[i], c->host, bytes) : TACT_ENOMEM;
        if (rc != TACT_OK) {
            snprintf(text, sizeof text, "loader: tensor %d: %s", i, rc == TACT_ENOMEM ? "out of memory for its rows" : tact_ctx_error(ctx));
            tact_loader_free(&l);
            return s_fail(ctx, rc, text);
        }
        if (c->row_bytes * (size_t)o.batch > widest) widest = c->row_bytes * (size_t)o.batch;
    }
    if (!(l->scratch = ta_malloc(widest))) {
        tact_loader_free(&l);
        return s_fail(ctx, TACT_ENOMEM, "loader: out of memory");
    }
    s_epoch(l);
    *out = l;
    return TACT_OK;
}

int64_t tact_loader_batches(const tact_loader *l) {
    if (!l) return 0;
    return l->o.drop_last ? l->rows / l->o.batch : (l->rows + l->o.batch - 1) / l->o.batch;
}

int tact_loader_next(tact_loader *l, tact_tensor **out) {
    if (!l || !out) return TACT_EINVAL;
    int64_t left = l->rows - l->next, b = left < l->o.batch ? left : l->o.batch;
    if (b == 0 || (l->o.drop_last && b < l->o.batch)) { /* the epoch is over: the next call begins the next */
        s_epoch(l);
        return 0;
    }
    for (int i = 0; i < l->n; i++) {
        struct s_column *c = &l->cols[i];
        for (int64_t r = 0; r < b; r++) memcpy(l->scratch + (size_t)r * c->row_bytes, c->host + (size_t)l->order[l->next + r] * c->row_bytes, c->row_bytes);
        int64_t shape[16];
        memcpy(shape, c->shape, sizeof shape);
        shape[0] = b;
        tact_tensor *t = tact_from_data(l->ctx, c->dtype, c->ndim, shape, l->scratch);
        if (strcmp(c->device, tact_device(t)) != 0) t = tact_to(t, c->device);
        out[i] = t;
        if (tact_status_of(t) != TACT_OK) return tact_status_of(t);
    }
    l->next += b;
    return 1;
}

void tact_loader_free(tact_loader **pl) {
    if (!pl || !*pl) return;
    tact_loader *l = *pl;
    *pl = NULL;
    for (int i = 0; l->cols && i < l->n; i++) ta_free(l->cols[i].host);
    ta_free(l->cols);
    ta_free(l->order);
    ta_free(l->scratch);
    ta_free(l);
}
