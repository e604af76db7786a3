/* client_movement.c - movement: the primitives (reshape, permute, expand, pad, shrink, flip) and the reference's
 * functions composed from them (squeeze, unsqueeze, flatten, unflatten, transpose, repeat, repeat_interleave, cat,
 * stack, split, chunk, gather, pad2d) as tensor.py composes them.  No data moves until a kernel reads them. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client_core.h"
#include "client_impl.h"
#include "dtype.h"
#include "mem.h"
#include "shape.h"

/* ---------------------------------------------------------------- movement */

ti_tensor_t *tc_movement(ti_tensor_t *x, ta_op_t op, const ta_shape_t *out, int nargs, const int64_t *args) {
    const ti_tensor_t *src[1] = {x};
    ti_tensor_t *t = tc_emit(tc_new(x->ctx, x->dtype, out), op, 1, src, nargs, args);
    if (!t->status) t->view = 1;
    return t;
}

ti_tensor_t *ti_reshape(ti_tensor_t *x, int ndim, const int64_t *shape) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    ta_shape_t out;
    ta_error_t err;
    if (ndim > 0 && !shape) return tc_error(x->ctx, TACT_EINVAL, "reshape: shape is NULL");
    if (ta_shape_reshape(&x->shape, ndim, shape, &out, &err) != TACT_OK) return tc_error(x->ctx, err.code, "%s", err.text);
    if (ta_shape_equal(&out, &x->shape)) return x;
    return tc_movement(x, TA_OP_RESHAPE, &out, 0, NULL);
}

ti_tensor_t *ti_permute(ti_tensor_t *x, const int *order) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    int norm[TA_MAX_DIMS];
    ta_shape_t out;
    ta_error_t err;
    if (x->shape.ndim && !order) return tc_error(x->ctx, TACT_EINVAL, "permute: order is NULL");
    if (ta_shape_permute(&x->shape, order, norm, &out, &err) != TACT_OK) return tc_error(x->ctx, err.code, "%s", err.text);
    int64_t args[TA_MAX_DIMS];
    int identity = 1, nd = x->shape.ndim, swap = nd >= 2 && !x->view;
    for (int k = 0; k < nd; k++) {
        args[k] = norm[k];
        identity &= norm[k] == k;
        swap &= norm[k] == (k == nd - 1 ? nd - 2 : k == nd - 2 ? nd - 1 : k);
    }
    if (identity) return x;
    ti_tensor_t *r = tc_movement(x, TA_OP_PERMUTE, &out, nd, args);
    if (!r->status) r->swapped = swap;
    return r;
}

ti_tensor_t *ti_expand(ti_tensor_t *x, int ndim, const int64_t *shape) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    ta_shape_t aligned, out;
    ta_error_t err;
    if (ndim > 0 && !shape) return tc_error(x->ctx, TACT_EINVAL, "expand: shape is NULL");
    if (ta_shape_expand(&x->shape, ndim, shape, &aligned, &out, &err) != TACT_OK)
        return tc_error(x->ctx, err.code, "%s", err.text);
    if (aligned.ndim != x->shape.ndim) x = ti_reshape(x, aligned.ndim, aligned.d);
    if (x->status || ta_shape_equal(&out, &x->shape)) return x;
    return tc_movement(x, TA_OP_EXPAND, &out, 0, NULL);
}

ti_tensor_t *ti_pad(ti_tensor_t *x, const int64_t (*pads)[2], double value) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    ta_shape_t out;
    ta_error_t err;
    if (x->shape.ndim && !pads) return tc_error(x->ctx, TACT_EINVAL, "pad: pads is NULL");
    if (ta_shape_pad(&x->shape, pads, &out, &err) != TACT_OK) return tc_error(x->ctx, err.code, "%s", err.text);
    if (ta_shape_equal(&out, &x->shape)) return x;
    int64_t args[2 * TA_MAX_DIMS];
    for (int k = 0; k < x->shape.ndim; k++) args[2 * k] = pads[k][0], args[2 * k + 1] = pads[k][1];
    ti_tensor_t *p = tc_movement(x, TA_OP_PAD, &out, 2 * x->shape.ndim, args);
    if (value == 0 || p->status) return p;
    /* A non-zero fill: where(pad(ones), pad(x), value), in the reference's
     * dtype for pad(x) + where(pad(ones), 0, value): a whole value is an int
     * and keeps an int tensor's dtype (a bool's becomes int32), a
     * fractional one makes ints and bools float32. */
    ta_scalar_kind_t kind = value == trunc(value) && fabs(value) < 9.2e18 ? TA_SCALAR_INT : TA_SCALAR_FLOAT;
    tact_dtype wd = ta_dtype_promote(ta_dtype_of_scalar(x->dtype, TA_SCALAR_INT), ta_dtype_of_scalar(x->dtype, kind));
    tact_dtype od = ta_dtype_promote(x->dtype, wd);
    ti_tensor_t *inside = tc_movement(ti_ones(x->ctx, TACT_BOOL, x->shape.ndim, x->shape.d), TA_OP_PAD, &out,
                                     2 * x->shape.ndim, args);
    ta_value_t v = ta_value_from_double(od, value);
    return ti_where(inside, ti_cast(p, od), tc_broadcast_to(tc_const(x->ctx, od, v), &out));
}

ti_tensor_t *ti_shrink(ti_tensor_t *x, const int64_t (*ranges)[2]) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    ta_shape_t out;
    ta_error_t err;
    if (x->shape.ndim && !ranges) return tc_error(x->ctx, TACT_EINVAL, "shrink: ranges is NULL");
    if (ta_shape_shrink(&x->shape, ranges, &out, &err) != TACT_OK) return tc_error(x->ctx, err.code, "%s", err.text);
    int64_t args[2 * TA_MAX_DIMS];
    int identity = 1;
    for (int k = 0; k < x->shape.ndim; k++) {
        args[2 * k] = ranges[k][0], args[2 * k + 1] = ranges[k][1];
        identity &= ranges[k][0] == 0 && ranges[k][1] == x->shape.d[k];
    }
    return identity ? x : tc_movement(x, TA_OP_SHRINK, &out, 2 * x->shape.ndim, args);
}

ti_tensor_t *ti_flip(ti_tensor_t *x, int naxes, const int *axes) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    uint32_t mask;
    ta_shape_t ignored;
    ta_error_t err;
    if (naxes > 0 && !axes) return tc_error(x->ctx, TACT_EINVAL, "flip: axes is NULL");
    if (ta_shape_reduce(&x->shape, naxes, axes, "flip", &mask, &ignored, &err) != TACT_OK)
        return tc_error(x->ctx, err.code, "%s", err.text);
    if (!mask) return x;
    int64_t args[TA_MAX_DIMS];
    for (int k = 0; k < x->shape.ndim; k++) args[k] = mask >> k & 1 ? -1 : 1;
    return tc_movement(x, TA_OP_STRIDE, &x->shape, x->shape.ndim, args);
}



/* The reference's _resolve_dim: dim in [-n, n) of n = max(1, ndim + outer);
 * S_NODIM when out of range (a 0-dim tensor's -1 stays -1). */
enum { S_NODIM = -1000 };
static int s_dim(int ndim, int dim, int outer) {
    int n = ndim + outer > 1 ? ndim + outer : 1;
    if (dim < -n || dim >= n) return S_NODIM;
    return dim < 0 ? dim + ndim + outer : dim;
}

#define S_BAD_DIM(x, op, dim, outer)                                                                                                                \
    tc_fail((x), TACT_EINVAL, "%s: dim %d out of range [%d, %d] of a %d-dim tensor", (op), (dim), -(ti_ndim(x) + (outer) > 1 ? ti_ndim(x) + (outer) : 1), \
           (ti_ndim(x) + (outer) > 1 ? ti_ndim(x) + (outer) : 1) - 1, ti_ndim(x))

ti_tensor_t *ti_squeeze(ti_tensor_t *x, int naxes, const int *axes) {
    TC_CHECK(x);
    int nd = ti_ndim(x), drop[TA_MAX_DIMS] = {0}, n = 0;
    int64_t sh[TA_MAX_DIMS], out[TA_MAX_DIMS];
    ti_shape(x, sh);
    if (naxes < 0) {
        for (int k = 0; k < nd; k++) drop[k] = sh[k] == 1;
    } else {
        if (naxes > 0 && !axes) return tc_fail(x, TACT_EINVAL, "squeeze: axes is NULL");
        for (int i = 0; i < naxes; i++) {
            int d = s_dim(nd, axes[i], 0);
            if (d == S_NODIM) return S_BAD_DIM(x, "squeeze", axes[i], 0);
            if (nd) drop[d] = sh[d] == 1; /* a dim that is not 1 stays, as the reference */
        }
    }
    for (int k = 0; k < nd; k++)
        if (!drop[k]) out[n++] = sh[k];
    return n == nd ? x : ti_reshape(x, n, out);
}

ti_tensor_t *ti_unsqueeze(ti_tensor_t *x, int dim) {
    TC_CHECK(x);
    int nd = ti_ndim(x), d = s_dim(nd, dim, 1);
    if (d == S_NODIM) return S_BAD_DIM(x, "unsqueeze", dim, 1);
    if (nd + 1 > TA_MAX_DIMS) return tc_fail(x, TACT_ESHAPE, "unsqueeze: %d dims is the most a tensor has", TA_MAX_DIMS);
    int64_t sh[TA_MAX_DIMS], out[TA_MAX_DIMS];
    ti_shape(x, sh);
    for (int k = 0, j = 0; k <= nd; k++) out[k] = k == d ? 1 : sh[j++];
    return ti_reshape(x, nd + 1, out);
}

ti_tensor_t *ti_flatten(ti_tensor_t *x, int start_dim, int end_dim) {
    TC_CHECK(x);
    int nd = ti_ndim(x), s = s_dim(nd, start_dim, 0), e = s_dim(nd, end_dim, 0);
    if (s == S_NODIM) return S_BAD_DIM(x, "flatten", start_dim, 0);
    if (e == S_NODIM) return S_BAD_DIM(x, "flatten", end_dim, 0);
    if (!nd) return ti_reshape(x, 1, (int64_t[]){1});
    if (s > e) return tc_fail(x, TACT_EINVAL, "flatten: start dim %d comes after end dim %d", start_dim, end_dim);
    int64_t sh[TA_MAX_DIMS], out[TA_MAX_DIMS], p = 1;
    ti_shape(x, sh);
    int n = 0;
    for (int k = 0; k < s; k++) out[n++] = sh[k];
    for (int k = s; k <= e; k++) p *= sh[k];
    out[n++] = p;
    for (int k = e + 1; k < nd; k++) out[n++] = sh[k];
    return ti_reshape(x, n, out);
}

ti_tensor_t *ti_unflatten(ti_tensor_t *x, int dim, int n, const int64_t *sizes) {
    TC_CHECK(x);
    int nd = ti_ndim(x), d = s_dim(nd, dim, 0);
    if (d == S_NODIM || !nd) return S_BAD_DIM(x, "unflatten", dim, 0);
    if (n < 0 || (n > 0 && !sizes) || nd - 1 + n > TA_MAX_DIMS) return tc_fail(x, TACT_EINVAL, "unflatten: %d sizes", n);
    int64_t sh[TA_MAX_DIMS], out[TA_MAX_DIMS];
    ti_shape(x, sh);
    int m = 0;
    for (int k = 0; k < d; k++) out[m++] = sh[k];
    for (int i = 0; i < n; i++) out[m++] = sizes[i];
    for (int k = d + 1; k < nd; k++) out[m++] = sh[k];
    return ti_reshape(x, m, out);
}

ti_tensor_t *ti_transpose(ti_tensor_t *x, int dim0, int dim1) {
    TC_CHECK(x);
    int nd = ti_ndim(x), a = s_dim(nd, dim0, 0), b = s_dim(nd, dim1, 0);
    if (a == S_NODIM) return S_BAD_DIM(x, "transpose", dim0, 0);
    if (b == S_NODIM) return S_BAD_DIM(x, "transpose", dim1, 0);
    if (!nd) return x;
    int order[TA_MAX_DIMS];
    for (int k = 0; k < nd; k++) order[k] = k;
    order[a] = b, order[b] = a;
    return ti_permute(x, order);
}

/* reshape to (1, s0, 1, s1, ...), expand to (r0, s0, r1, s1, ...), reshape
 * to (r0 s0, r1 s1, ...). */
ti_tensor_t *ti_repeat(ti_tensor_t *x, int n, const int64_t *repeats) {
    TC_CHECK(x);
    int nd = ti_ndim(x);
    if (n < nd || (n > 0 && !repeats) || 2 * n > TA_MAX_DIMS)
        return tc_fail(x, TACT_EINVAL, "repeat: %d repeats for a %d-dim tensor (at least its dims, at most %d)", n, nd, TA_MAX_DIMS / 2);
    int64_t sh[TA_MAX_DIMS], base[TA_MAX_DIMS], mid[TA_MAX_DIMS], exp[TA_MAX_DIMS], fin[TA_MAX_DIMS];
    ti_shape(x, sh);
    for (int k = 0; k < n; k++) {
        if (repeats[k] < 0) return tc_fail(x, TACT_EINVAL, "repeat: repeat %lld is negative", (long long)repeats[k]);
        base[k] = k < n - nd ? 1 : sh[k - (n - nd)];
        mid[2 * k] = 1, mid[2 * k + 1] = base[k];
        exp[2 * k] = repeats[k], exp[2 * k + 1] = base[k];
        fin[k] = repeats[k] * base[k];
    }
    return ti_reshape(ti_expand(ti_reshape(x, 2 * n, mid), 2 * n, exp), n, fin);
}

ti_tensor_t *ti_repeat_interleave(ti_tensor_t *x, int64_t repeats, int dim, int flat) {
    TC_CHECK(x);
    if (flat) x = ti_flatten(x, 0, -1), dim = 0;
    int nd = ti_ndim(x), d = s_dim(nd, dim, 0);
    if (d == S_NODIM || !nd) return S_BAD_DIM(x, "repeat_interleave", dim, 0);
    if (repeats < 0 || nd + 1 > TA_MAX_DIMS) return tc_fail(x, TACT_EINVAL, "repeat_interleave: %lld repeats", (long long)repeats);
    int64_t sh[TA_MAX_DIMS], a[TA_MAX_DIMS], b[TA_MAX_DIMS], c[TA_MAX_DIMS];
    ti_shape(x, sh);
    for (int k = 0, j = 0; k <= nd; k++) {
        a[k] = k == d + 1 ? 1 : sh[j];
        b[k] = k == d + 1 ? repeats : sh[j];
        if (k != d + 1) j++;
    }
    for (int k = 0; k < nd; k++) c[k] = k == d ? sh[k] * repeats : sh[k];
    return ti_reshape(ti_expand(ti_reshape(x, nd + 1, a), nd + 1, b), nd, c);
}

/* A sum of the inputs, each padded to the whole along dim (one kernel). */
ti_tensor_t *ti_cat(int n, ti_tensor_t *const *xs, int dim) {
    if (n < 1 || !xs) return ti_neg(NULL);
    for (int i = 0; i < n; i++) TC_CHECK(xs[i]);
    int nd = ti_ndim(xs[0]), d = s_dim(nd, dim, 0);
    if (d == S_NODIM || !nd) return S_BAD_DIM(xs[0], "cat", dim, 0);
    int64_t s0[TA_MAX_DIMS], si[TA_MAX_DIMS], total = 0;
    ti_shape(xs[0], s0);
    for (int i = 0; i < n; i++) {
        ti_shape(xs[i], si);
        int same = ti_ndim(xs[i]) == nd;
        for (int k = 0; k < nd && same; k++) same = k == d || si[k] == s0[k];
        if (!same) return tc_fail(xs[0], TACT_ESHAPE, "cat: tensor %d's shape differs from tensor 0's outside dim %d", i, d);
        total += si[d];
    }
    ti_tensor_t *sum = NULL;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t pads[TA_MAX_DIMS][2] = {{0}};
        int64_t len = ti_dim(xs[i], d);
        pads[d][0] = at, pads[d][1] = total - at - len;
        at += len;
        ti_tensor_t *p = ti_pad(xs[i], pads, 0);
        sum = sum ? ti_add(sum, p) : p;
    }
    return sum;
}

ti_tensor_t *ti_stack(int n, ti_tensor_t *const *xs, int dim) {
    if (n < 1 || !xs) return ti_neg(NULL);
    for (int i = 0; i < n; i++) TC_CHECK(xs[i]);
    if (n > 4096) return tc_fail(xs[0], TACT_EINVAL, "stack: %d tensors; stack at most 4096 at a time", n);
    ti_tensor_t *u[4096];
    for (int i = 0; i < n; i++) {
        u[i] = ti_unsqueeze(xs[i], dim);
        if (ti_status_of(u[i])) return u[i];
    }
    return ti_cat(n, u, dim);
}

/* Pieces of the given sizes along dim (they sum to its length), as shrinks. */
int ti_split(ti_tensor_t *x, int n, const int64_t *sizes, int dim, ti_tensor_t **out) {
    if (!x || ti_status_of(x)) return out[0] = ti_neg(x), -1;
    int nd = ti_ndim(x), d = s_dim(nd, dim, 0);
    if (d == S_NODIM || !nd) return out[0] = S_BAD_DIM(x, "split", dim, 0), -1;
    int64_t sh[TA_MAX_DIMS], sum = 0;
    ti_shape(x, sh);
    int negative = 0;
    for (int i = 0; i < n; i++) sum += sizes[i], negative |= sizes[i] < 0;
    if (n < 1 || negative || sum != sh[d])
        return out[0] = tc_fail(x, TACT_EINVAL, "split: sizes sum to %lld, not dim %d's %lld", (long long)sum, d, (long long)sh[d]), -1;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t r[TA_MAX_DIMS][2];
        for (int k = 0; k < nd; k++) r[k][0] = 0, r[k][1] = sh[k];
        r[d][0] = at, r[d][1] = at + sizes[i];
        at += sizes[i];
        out[i] = ti_shrink(x, r);
    }
    return n;
}

/* ceil(len / chunks) per piece, the last ones shorter (the reference's
 * split by an int: fewer pieces than chunks when they run out). */
int ti_chunk(ti_tensor_t *x, int chunks, int dim, ti_tensor_t **out) {
    if (!x || ti_status_of(x)) return out[0] = ti_neg(x), -1;
    int nd = ti_ndim(x), d = s_dim(nd, dim, 0);
    if (d == S_NODIM || !nd) return out[0] = S_BAD_DIM(x, "chunk", dim, 0), -1;
    if (chunks < 1) return out[0] = tc_fail(x, TACT_EINVAL, "chunk: %d chunks; at least 1", chunks), -1;
    int64_t len = ti_dim(x, d), step = (len + chunks - 1) / chunks, sizes[4096];
    if (chunks > 4096) return out[0] = tc_fail(x, TACT_EINVAL, "chunk: %d chunks; at most 4096", chunks), -1;
    int n = 0;
    if (!len) {
        for (int i = 0; i < chunks; i++) sizes[n++] = 0;
    } else {
        for (int64_t at = 0; at < len; at += step) sizes[n++] = at + step <= len ? step : len - at;
    }
    return ti_split(x, n, sizes, d, out);
}

/* ((index[..., None] == arange(x.shape[dim])) * x') summed over the last dim,
 * x' = x shrunk to index's shape off dim, moved to the last dim. */
ti_tensor_t *ti_gather(ti_tensor_t *x, int dim, ti_tensor_t *index) {
    TC_CHECK(x);
    TC_CHECK(index);
    int nd = ti_ndim(x), d = s_dim(nd, dim, 0);
    if (d == S_NODIM || !nd) return S_BAD_DIM(x, "gather", dim, 0);
    if (ti_ndim(index) != nd) return tc_fail(x, TACT_ESHAPE, "gather: index has %d dims, the tensor %d", ti_ndim(index), nd);
    if (ta_dtype_is_float(ti_dtype_of(index))) return tc_fail(x, TACT_EDTYPE, "gather: index must be ints, not %s", tact_dtype_name(ti_dtype_of(index)));
    int64_t xs[TA_MAX_DIMS], is[TA_MAX_DIMS], r[TA_MAX_DIMS][2];
    ti_shape(x, xs);
    ti_shape(index, is);
    for (int k = 0; k < nd; k++) {
        if (k != d && is[k] > xs[k]) return tc_fail(x, TACT_ESHAPE, "gather: index dim %d is %lld, the tensor's %lld", k, (long long)is[k], (long long)xs[k]);
        r[k][0] = 0, r[k][1] = k == d ? xs[k] : is[k];
    }
    ti_tensor_t *xp = ti_transpose(ti_unsqueeze(ti_shrink(x, r), -1), -1, d);
    ti_tensor_t *ar = tc_arange_like(index, 0, (double)xs[d], 1, TACT_INT32);
    ti_tensor_t *hit = ti_logical_not(ti_cmpne(ti_unsqueeze(index, -1), ar));
    int last = -1;
    ti_tensor_t *prod = ti_mul(hit, xp);
    return ti_cast(ti_sum(prod, 1, &last, 0), ti_dtype_of(x));
}

/* padding: (left, right, top, bottom, ...) from the last dim backwards;
 * negative amounts crop. */
ti_tensor_t *ti_pad2d(ti_tensor_t *x, int n, const int64_t *padding, double value) {
    TC_CHECK(x);
    int nd = ti_ndim(x);
    if (n < 0 || n % 2 || n / 2 > nd || (n && !padding)) return tc_fail(x, TACT_EINVAL, "pad2d: %d amounts for a %d-dim tensor (2 per dim, from the last)", n, nd);
    int64_t sh[TA_MAX_DIMS], pads[TA_MAX_DIMS][2] = {{0}}, crop[TA_MAX_DIMS][2];
    ti_shape(x, sh);
    for (int i = 0; i < n / 2; i++) {
        int k = nd - 1 - i;
        int64_t b = padding[2 * i], e = padding[2 * i + 1];
        pads[k][0] = b > 0 ? b : 0, pads[k][1] = e > 0 ? e : 0;
        if (-(b < 0 ? b : 0) - (e < 0 ? e : 0) > sh[k])
            return tc_fail(x, TACT_ESHAPE, "pad2d: cropping %lld and %lld from dim %d of %lld", (long long)-b, (long long)-e, k, (long long)sh[k]);
    }
    ti_tensor_t *p = ti_pad(x, pads, value);
    for (int k = 0; k < nd; k++) {
        int i = nd - 1 - k;
        int64_t b = i < n / 2 ? padding[2 * i] : 0, e = i < n / 2 ? padding[2 * i + 1] : 0;
        int64_t len = sh[k] + pads[k][0] + pads[k][1];
        crop[k][0] = b < 0 ? -b : 0, crop[k][1] = len - (e < 0 ? -e : 0);
    }
    return ti_shrink(p, crop);
}
