/* shape.c - op validation and result shapes; the client and the graph builder call the same functions. */
#include "shape.h"

#include "ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void ta_shape_format(const ta_shape_t *s, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "(");
    for (int k = 0; k < s->ndim && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, k ? ", " : "", s->d[k]);
    if (at < len) snprintf(buf + at, len - at, s->ndim == 1 ? ",)" : ")");
}

int ta_shape_make(ta_shape_t *s, int ndim, const int64_t *dims, const char *op, ta_error_t *err) {
    if (ndim < 0 || ndim > TA_MAX_DIMS)
        return ta_error_set(err, TACT_ESHAPE, "%s: %d dims (at most %d)", op, ndim, TA_MAX_DIMS);
    s->ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        if (dims[k] < 0) return ta_error_set(err, TACT_ESHAPE, "%s: dim %d is %" PRId64 " (negative)", op, k, dims[k]);
        s->d[k] = dims[k];
    }
    return ta_shape_check_size(s, op, err);
}

int ta_shape_check_size(const ta_shape_t *s, const char *op, ta_error_t *err) {
    /* Zero dims count as 1: an empty shape's other dims must fit too, so no
     * product of a shape's dims (strides, partial counts) can overflow. */
    int64_t n = 8;
    for (int k = 0; k < s->ndim; k++)
        if (__builtin_mul_overflow(n, s->d[k] ? s->d[k] : 1, &n)) {
            char buf[200];
            ta_shape_format(s, buf, sizeof buf);
            return ta_error_set(err, TACT_ESHAPE, "%s: shape %s has too many elements", op, buf);
        }
    return TACT_OK;
}

int64_t ta_shape_numel(const ta_shape_t *s) {
    int64_t n = 1;
    for (int k = 0; k < s->ndim; k++) n *= s->d[k];
    return n;
}

int ta_shape_equal(const ta_shape_t *a, const ta_shape_t *b) {
    if (a->ndim != b->ndim) return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->d[k] != b->d[k]) return 0;
    return 1;
}

int ta_shape_broadcast(const ta_shape_t *a, const ta_shape_t *b, const char *op, ta_shape_t *out, ta_error_t *err) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    ta_shape_t r = {n, {0}};
    for (int k = 0; k < n; k++) {
        int ka = k - (n - a->ndim), kb = k - (n - b->ndim);
        int64_t da = ka >= 0 ? a->d[ka] : 1, db = kb >= 0 ? b->d[kb] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[128], sb[128];
            ta_shape_format(a, sa, sizeof sa);
            ta_shape_format(b, sb, sizeof sb);
            return ta_error_set(err, TACT_ESHAPE, "%s: shapes %s and %s do not broadcast (dim %d: %" PRId64 " vs %" PRId64 ")",
                                op, sa, sb, k, da, db);
        }
        r.d[k] = da == 1 ? db : da;
    }
    if (ta_shape_check_size(&r, op, err) != TACT_OK) return TACT_ESHAPE;
    *out = r;
    return TACT_OK;
}

/* The input's shape as text, made only for an error message (formatting
 * it for every op cost more than the op's checks). */
#define S_SI(in) (ta_shape_format((in), si, sizeof si), si)

int ta_shape_reshape(const ta_shape_t *in, int ndim, const int64_t *dims, ta_shape_t *out, ta_error_t *err) {
    char si[128];
    if (ndim < 0 || ndim > TA_MAX_DIMS) return ta_error_set(err, TACT_ESHAPE, "reshape: %d dims (at most %d)", ndim, TA_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    ta_shape_t r = {ndim, {0}};
    for (int k = 0; k < ndim; k++) {
        if (dims[k] == -1) {
            if (infer >= 0) return ta_error_set(err, TACT_ESHAPE, "reshape of %s: more than one -1", S_SI(in));
            infer = k;
            continue;
        }
        if (dims[k] < 0) return ta_error_set(err, TACT_ESHAPE, "reshape of %s: dim %d is %" PRId64, S_SI(in), k, dims[k]);
        r.d[k] = dims[k];
    }
    int64_t numel = ta_shape_numel(in);
    ta_shape_t known_only = r;
    if (infer >= 0) known_only.d[infer] = 1;
    if (ta_shape_check_size(&known_only, "reshape", err) != TACT_OK) return TACT_ESHAPE;
    for (int k = 0; k < ndim; k++) /* cannot overflow once checked */
        if (k != infer) known *= r.d[k];
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return ta_error_set(err, TACT_ESHAPE, "reshape of %s: cannot infer the -1 dim", S_SI(in));
        r.d[infer] = numel / known;
        known *= r.d[infer];
    }
    if (known != numel) {
        char so[128];
        ta_shape_format(&r, so, sizeof so);
        return ta_error_set(err, TACT_ESHAPE, "reshape of %s (%" PRId64 " elements) to %s (%" PRId64 " elements)", S_SI(in), numel, so,
                            known);
    }
    *out = r;
    return TACT_OK;
}

int ta_shape_permute(const ta_shape_t *in, const int *order, int *norm, ta_shape_t *out, ta_error_t *err) {
    int seen[TA_MAX_DIMS] = {0};
    ta_shape_t r = {in->ndim, {0}};
    for (int k = 0; k < in->ndim; k++) {
        int o = order[k] < 0 ? order[k] + in->ndim : order[k];
        if (o < 0 || o >= in->ndim || seen[o]) {
            char si[128];
            ta_shape_format(in, si, sizeof si);
            return ta_error_set(err, TACT_ESHAPE, "permute of %s: order is not a permutation of 0..%d (entry %d is %d)", si,
                                in->ndim - 1, k, order[k]);
        }
        seen[o] = 1;
        norm[k] = o;
        r.d[k] = in->d[o];
    }
    *out = r;
    return TACT_OK;
}

int ta_shape_expand(const ta_shape_t *in, int ndim, const int64_t *dims, ta_shape_t *aligned, ta_shape_t *out,
                    ta_error_t *err) {
    char si[128];
    if (ndim < in->ndim || ndim > TA_MAX_DIMS)
        return ta_error_set(err, TACT_ESHAPE, "expand of %s to %d dims", S_SI(in), ndim);
    ta_shape_t al = {ndim, {0}}, r = {ndim, {0}};
    for (int k = 0; k < ndim; k++) {
        int ki = k - (ndim - in->ndim);
        al.d[k] = ki >= 0 ? in->d[ki] : 1;
        int64_t want = dims[k] == -1 ? al.d[k] : dims[k];
        if (want < 0 || (al.d[k] != want && al.d[k] != 1))
            return ta_error_set(err, TACT_ESHAPE, "expand of %s: dim %d cannot become %" PRId64 " (only size-1 dims expand)", S_SI(in),
                                k, dims[k]);
        r.d[k] = want;
    }
    if (ta_shape_check_size(&r, "expand", err) != TACT_OK) return TACT_ESHAPE;
    *aligned = al;
    *out = r;
    return TACT_OK;
}

int ta_shape_pad(const ta_shape_t *in, const int64_t (*pads)[2], ta_shape_t *out, ta_error_t *err) {
    ta_shape_t r = *in;
    for (int k = 0; k < in->ndim; k++) {
        if (pads[k][0] < 0 || pads[k][1] < 0) {
            char si[128];
            ta_shape_format(in, si, sizeof si);
            return ta_error_set(err, TACT_ESHAPE, "pad of %s: dim %d pads (%" PRId64 ", %" PRId64 ") must be >= 0", si, k,
                                pads[k][0], pads[k][1]);
        }
        if (__builtin_add_overflow(in->d[k], pads[k][0], &r.d[k]) || __builtin_add_overflow(r.d[k], pads[k][1], &r.d[k]))
            return ta_error_set(err, TACT_ESHAPE, "pad: dim %d grows too large", k);
    }
    if (ta_shape_check_size(&r, "pad", err) != TACT_OK) return TACT_ESHAPE;
    *out = r;
    return TACT_OK;
}

int ta_shape_shrink(const ta_shape_t *in, const int64_t (*ranges)[2], ta_shape_t *out, ta_error_t *err) {
    ta_shape_t r = *in;
    for (int k = 0; k < in->ndim; k++) {
        if (ranges[k][0] < 0 || ranges[k][0] > ranges[k][1] || ranges[k][1] > in->d[k]) {
            char si[128];
            ta_shape_format(in, si, sizeof si);
            return ta_error_set(err, TACT_ESHAPE, "shrink of %s: dim %d range [%" PRId64 ", %" PRId64 ") is outside [0, %" PRId64 "]",
                                si, k, ranges[k][0], ranges[k][1], in->d[k]);
        }
        r.d[k] = ranges[k][1] - ranges[k][0];
    }
    *out = r;
    return TACT_OK;
}

int ta_shape_reduce(const ta_shape_t *in, int naxes, const int *axes, const char *op, uint32_t *mask, ta_shape_t *out,
                    ta_error_t *err) {
    uint32_t m = 0;
    if (naxes < 0) {
        m = in->ndim ? (uint32_t)((1ull << in->ndim) - 1) : 0;
    } else {
        for (int i = 0; i < naxes; i++) {
            /* A 0-dim tensor's axis 0 (or -1) is its one element, as the
             * reference's: nothing to reduce. */
            if (!in->ndim && (axes[i] == 0 || axes[i] == -1)) continue;
            int a = axes[i] < 0 ? axes[i] + in->ndim : axes[i];
            if (a < 0 || a >= in->ndim || (m >> a & 1)) {
                char si[128];
                ta_shape_format(in, si, sizeof si);
                return ta_error_set(err, TACT_ESHAPE, "%s of %s: axis %d is %s", op, si, axes[i],
                                    a >= 0 && a < in->ndim ? "repeated" : "out of range");
            }
            m |= 1u << a;
        }
    }
    ta_shape_t r = *in;
    for (int k = 0; k < in->ndim; k++)
        if (m >> k & 1) r.d[k] = 1;
    *mask = m;
    *out = r;
    return TACT_OK;
}

int ta_shape_of_op(int op, const ta_shape_t *in, int nargs, int64_t *args, const ta_shape_t *to, ta_shape_t *out, ta_error_t *err) {
    int64_t pairs[TA_MAX_DIMS][2];
    int order[TA_MAX_DIMS], norm[TA_MAX_DIMS];
    ta_shape_t al;
    const char *name = ta_op_name((ta_op_t)op);
    *out = *in;
    switch (op) {
    case TA_OP_SUM:
    case TA_OP_RMAX:
        if (nargs != 1 || (uint64_t)args[0] >> in->ndim) return ta_error_set(err, TACT_EINVAL, "%s: a reduce mask within %d dims", name, in->ndim);
        for (int k = 0; k < in->ndim; k++)
            if (args[0] >> k & 1) out->d[k] = 1;
        return TACT_OK;
    case TA_OP_RESHAPE: return ta_shape_reshape(in, to->ndim, to->d, out, err);
    case TA_OP_EXPAND:
        if (to->ndim != in->ndim) return ta_error_set(err, TACT_ESHAPE, "EXPAND: %d dims to %d", in->ndim, to->ndim);
        return ta_shape_expand(in, to->ndim, to->d, &al, out, err);
    case TA_OP_PERMUTE:
        if (nargs != in->ndim) return ta_error_set(err, TACT_EINVAL, "PERMUTE: %d entries for %d dims", nargs, in->ndim);
        for (int k = 0; k < nargs; k++) order[k] = (int)args[k];
        if (ta_shape_permute(in, order, norm, out, err) != TACT_OK) return TACT_ESHAPE;
        for (int k = 0; k < nargs; k++) args[k] = norm[k];
        return TACT_OK;
    case TA_OP_PAD:
    case TA_OP_SHRINK:
        if (nargs != 2 * in->ndim) return ta_error_set(err, TACT_EINVAL, "%s: %d args for %d dims", name, nargs, in->ndim);
        for (int k = 0; k < in->ndim; k++) pairs[k][0] = args[2 * k], pairs[k][1] = args[2 * k + 1];
        return op == TA_OP_PAD ? ta_shape_pad(in, (const int64_t(*)[2])pairs, out, err) : ta_shape_shrink(in, (const int64_t(*)[2])pairs, out, err);
    case TA_OP_STRIDE:
        if (nargs != in->ndim) return ta_error_set(err, TACT_EINVAL, "STRIDE: %d args for %d dims", nargs, in->ndim);
        for (int k = 0; k < in->ndim; k++) {
            if (!args[k] || args[k] < -(INT64_C(1) << 40) || args[k] > (INT64_C(1) << 40))
                return ta_error_set(err, TACT_EINVAL, "STRIDE: step %" PRId64, args[k]);
            int64_t m = args[k] < 0 ? -args[k] : args[k];
            out->d[k] = (in->d[k] + m - 1) / m;
        }
        return TACT_OK;
    default: return TACT_OK; /* elementwise, CAST, CONTIGUOUS: the source's shape */
    }
}
