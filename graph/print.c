/* print.c - tact_format and tact_print: a tensor as text (values summarized like NumPy's for large ones), built on the public API. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "mem.h"
#include "tact.h"

/* NumPy's summarization: past this many elements, each axis longer than
 * twice the edge shows its first and last S_EDGE entries around "...". */
enum { S_THRESHOLD = 1000, S_EDGE = 3 };

typedef struct {
    char *buf;
    size_t n, len; /* len: what the whole text needs (snprintf's rule) */
    int grow;      /* buf is ours and grows to fit (tact_print) */
} s_out_t;

__attribute__((format(printf, 2, 3))) static void s_put(s_out_t *o, const char *fmt, ...) {
    for (int pass = 0; pass < 2; pass++) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = o->len < o->n ? o->n - o->len : 0;
        int k = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if ((size_t)k < room || !o->grow || pass) {
            o->len += (size_t)k;
            return;
        }
        /* Room for it, and then some, before the second pass writes it. */
        size_t cap = o->n;
        if (ta_grow((void **)&o->buf, &cap, o->len + (size_t)k + 1, 1) != TACT_OK) {
            o->grow = 0;
            o->len += (size_t)k;
            return;
        }
        o->n = cap;
    }
}

/* Element i (flat) of the values as text, into out. */
static void s_elem(tact_dtype d, const uint8_t *vals, int64_t i, char *out, size_t len) {
    ta_value_t v = ta_value_load(d, vals + (size_t)i * ta_dtype_size(d));
    if (ta_dtype_is_bool(d)) snprintf(out, len, "%s", v.b ? "True" : "False");
    else if (ta_dtype_is_unsigned(d)) snprintf(out, len, "%" PRIu64, v.u);
    else if (ta_dtype_is_int(d)) snprintf(out, len, "%" PRId64, v.i);
    else {
        double x = ta_value_as_double(d, v);
        if (isnan(x)) snprintf(out, len, "nan");
        else if (isinf(x)) snprintf(out, len, x > 0 ? "inf" : "-inf");
        else snprintf(out, len, "%.6g", x);
    }
}

/* Whether index k of an axis of n entries is shown (summarized: the edges). */
static int s_shown(int64_t k, int64_t n, int summarize) { return !summarize || n <= 2 * S_EDGE || k < S_EDGE || k >= n - S_EDGE; }

typedef struct {
    int ndim;
    int64_t shape[16], stride[16];
    int summarize, width;
    tact_dtype d;
    const uint8_t *vals;
} s_tensor_t;

/* Axis `axis` of the values from flat offset at, as nested brackets; depth
 * is the column the rows line up at.  (At most 16 levels: a tensor's dims.) */
static void s_nest(s_out_t *o, const s_tensor_t *t, int axis, int64_t at, int depth) {
    int64_t n = t->shape[axis];
    s_put(o, "[");
    for (int64_t k = 0; k < n; k++) {
        if (!s_shown(k, n, t->summarize)) {
            if (k == S_EDGE) {
                s_put(o, axis == t->ndim - 1 ? "..., " : "...,\n%*s", axis == t->ndim - 1 ? 0 : depth + 1, "");
            }
            continue;
        }
        if (axis == t->ndim - 1) {
            char e[64];
            s_elem(t->d, t->vals, at + k * t->stride[axis], e, sizeof e);
            s_put(o, "%*s", t->width, e);
        } else {
            s_nest(o, t, axis + 1, at + k * t->stride[axis], depth + 1);
        }
        if (k + 1 < n) {
            if (axis == t->ndim - 1) s_put(o, ", ");
            else s_put(o, ",%s%*s", axis < t->ndim - 2 ? "\n\n" : "\n", depth + 1, "");
        }
    }
    s_put(o, "]");
}

/* The values of t (read, in its dtype) into a fresh buffer, or NULL with
 * the failure's status in *rc. */
static uint8_t *s_values(tact_tensor *t, int64_t numel, int *rc) {
    size_t bytes = (size_t)numel * ta_dtype_size(tact_dtype_of(t));
    uint8_t *v = ta_malloc(bytes ? bytes : 1);
    if (!v) {
        *rc = TACT_ENOMEM;
        return NULL;
    }
    *rc = tact_read(t, v, bytes);
    if (*rc != TACT_OK) {
        ta_free(v);
        return NULL;
    }
    return v;
}

static int s_format(tact_tensor *t, s_out_t *o) {
    int rc = tact_status_of(t);
    if (rc != TACT_OK) {
        s_put(o, "tensor(error: %s)", tact_error_message(t));
        return rc;
    }
    s_tensor_t v;
    memset(&v, 0, sizeof v);
    v.ndim = tact_ndim(t);
    v.d = tact_dtype_of(t);
    tact_shape(t, v.shape);
    int64_t numel = tact_numel(t);
    uint8_t *vals = s_values(t, numel, &rc);
    if (!vals) {
        s_put(o, "tensor(error: %s)", rc == TACT_ENOMEM ? "out of memory reading its values" : tact_ctx_error(tact_tensor_ctx(t)));
        return rc;
    }
    v.vals = vals;
    for (int k = v.ndim - 1; k >= 0; k--) v.stride[k] = k == v.ndim - 1 ? 1 : v.stride[k + 1] * v.shape[k + 1];
    v.summarize = numel > S_THRESHOLD;
    /* One width for every element shown, so columns line up. */
    for (int64_t i = 0; i < numel; i++) {
        int64_t rest = i, shown = 1;
        for (int k = v.ndim - 1; k >= 0 && shown; k--) {
            shown = s_shown(rest % v.shape[k], v.shape[k], v.summarize);
            rest /= v.shape[k];
        }
        if (!shown) continue;
        char e[64];
        s_elem(v.d, vals, i, e, sizeof e);
        if ((int)strlen(e) > v.width) v.width = (int)strlen(e);
    }
    s_put(o, "tensor(");
    if (v.ndim == 0) {
        char e[64];
        s_elem(v.d, vals, 0, e, sizeof e);
        s_put(o, "%s", e);
    } else {
        s_nest(o, &v, 0, 0, 7);
    }
    s_put(o, ", shape=(");
    for (int k = 0; k < v.ndim; k++) s_put(o, "%s%" PRId64, k ? ", " : "", v.shape[k]);
    s_put(o, "%s), dtype=%s, device=%s", v.ndim == 1 ? "," : "", tact_dtype_name(v.d), tact_device(t));
    int axis = tact_shard_axis(t);
    if (axis == TACT_REPLICATE) s_put(o, ", replicated");
    else if (axis >= 0) s_put(o, ", split along axis %d", axis);
    s_put(o, ")");
    ta_free(vals);
    return TACT_OK;
}

int tact_format(tact_tensor *t, char *buf, size_t n) {
    s_out_t o = {buf, buf ? n : 0, 0, 0};
    if (buf && n) buf[0] = '\0';
    s_format(t, &o);
    return o.len > INT32_MAX ? INT32_MAX : (int)o.len;
}

int tact_print(FILE *f, tact_tensor *t) {
    if (!f) return TACT_EINVAL;
    s_out_t o = {NULL, 0, 0, 1};
    int rc = s_format(t, &o);
    if (o.buf && o.len < o.n) fprintf(f, "%s\n", o.buf);
    else fprintf(f, "tensor(error: out of memory printing it)\n");
    ta_free(o.buf);
    return o.buf ? rc : TACT_ENOMEM;
}
