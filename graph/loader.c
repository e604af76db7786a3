/* loader.c - tact_loader: seeded, shuffled minibatches of a dataset's tensors, built on the public API. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client_impl.h"
#include "mem.h"
#include "tact.h"

/*
 * The dataset's tensors stay where they are: a batch is their rows in the
 * epoch's order, gathered on their device by getitem with a tensor of the
 * row numbers (a gather kernel: docs/codegen-ir.md), so only those numbers
 * travel.  The epoch's order is a Fisher-Yates shuffle driven by
 * xorshift64* keyed by the seed and the epoch, so it depends on nothing
 * but those.
 */
struct tact_loader {
    tact_ctx *ctx;
    tact_loader_options o;
    int n;
    int64_t rows;
    tact_tensor **tensors; /* the dataset's (handles: one whose scope ended is an error, not a crash) */
    int64_t *order;        /* this epoch's rows */
    int64_t next;          /* the first row of the next batch in order */
    uint64_t epoch;        /* epochs begun */
    int32_t *picks;        /* a batch's row numbers */
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
    if (n > 64) return s_fail(ctx, TACT_EINVAL, "loader: more than 64 tensors");
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
                          : tact_dim(t, 0) > INT32_MAX                  ? "it has more than 2^31-1 rows"
                                                                        : NULL;
        if (why) {
            snprintf(text, sizeof text, "loader: tensor %d: %s", i, why);
            return s_fail(ctx, tact_status_of(t) != TACT_OK ? tact_status_of(t) : TACT_EINVAL, text);
        }
        rows = tact_dim(t, 0);
    }
    /* Computed now, so a tensor that fails does here. */
    int rc = tact_realize(ctx, n, (tact_tensor **)tensors);
    if (rc != TACT_OK) {
        snprintf(text, sizeof text, "loader: %s", tact_ctx_error(ctx));
        return s_fail(ctx, rc, text);
    }
    tact_loader *l = ta_calloc(1, sizeof *l);
    int64_t batch = o.batch < rows ? o.batch : rows;
    if (!l || !(l->tensors = ta_malloc(sizeof *l->tensors * (size_t)n)) || !(l->order = ta_malloc(sizeof *l->order * (size_t)(rows ? rows : 1))) ||
        !(l->picks = ta_malloc(sizeof *l->picks * (size_t)(batch ? batch : 1)))) {
        tact_loader_free(&l);
        return s_fail(ctx, TACT_ENOMEM, "loader: out of memory");
    }
    l->ctx = ctx;
    l->o = o;
    l->n = n;
    l->rows = rows;
    memcpy(l->tensors, tensors, sizeof *l->tensors * (size_t)n);
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
    for (int i = 0; i < l->n; i++)
        if (tact_status_of(l->tensors[i]) != TACT_OK) {
            char text[400];
            snprintf(text, sizeof text, "loader: tensor %d: %s", i, tact_error_message(l->tensors[i]));
            return s_fail(l->ctx, tact_status_of(l->tensors[i]), text);
        }
    for (int64_t r = 0; r < b; r++) l->picks[r] = (int32_t)l->order[l->next + r];
    /* The row numbers once per device the tensors are on. */
    tact_tensor *picks[64] = {NULL};
    for (int i = 0; i < l->n; i++) {
        tact_tensor *t = l->tensors[i], *p = NULL;
        for (int j = 0; j < i && !p; j++)
            if (picks[j] && strcmp(tact_device(l->tensors[j]), tact_device(t)) == 0) p = picks[j];
        if (!p) p = tact_from_data(l->ctx, TACT_INT32, 1, &b, l->picks);
        if (strcmp(tact_device(p), tact_device(t)) != 0) p = tact_to(p, tact_device(t));
        picks[i] = p;
        tact_index ix[1] = {TACT_TENSOR(p)};
        out[i] = tact_getitem(t, 1, ix);
        if (tact_status_of(out[i]) != TACT_OK) {
            ta_ctx_set_error(l->ctx, tact_error_message(out[i]));
            return tact_status_of(out[i]);
        }
    }
    l->next += b;
    return 1;
}

void tact_loader_free(tact_loader **pl) {
    if (!pl || !*pl) return;
    tact_loader *l = *pl;
    *pl = NULL;
    ta_free(l->tensors);
    ta_free(l->order);
    ta_free(l->picks);
    ta_free(l);
}
