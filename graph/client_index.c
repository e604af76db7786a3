/* client_index.c - the reference's __getitem__ and __setitem__: ints, slices with any step, newaxis and ellipsis by
 * movement ops alone (no copy), int tensor indices by the reference's one-hot masks and sums, and setitem as a
 * whole-buffer assign of where(the region, the value moved back into place, the old contents). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client_core.h"
#include "client_impl.h"
#include "dtype.h"
#include "shape.h"

/* What the basic indices do to x, dim by dim of x: the range kept (begin,
 * end) and its step, and whether an int collapses the dim; where the
 * newaxis dims go; the tensor indices. */
typedef struct {
    int nd;                          /* x's dims */
    int64_t b[TA_MAX_DIMS], e[TA_MAX_DIMS], st[TA_MAX_DIMS];
    int collapse[TA_MAX_DIMS];       /* an int index */
    ti_tensor_t *tensor[TA_MAX_DIMS]; /* an int tensor index, or NULL */
    int ntensor;
    int newaxis[2 * TA_MAX_DIMS];    /* positions (in the index list without ellipsis) of newaxis */
    int nnew;
    int order[2 * TA_MAX_DIMS];      /* per position of the expanded list: the dim of x, or -1 for newaxis */
    int npos;
} s_plan_t;

/* Python's slice.indices(size) for (start, stop, step), then the
 * reference's (begin, end): a reversed slice covers (e + 1, s + 1). */
static void s_slice(int64_t size, const ti_index_t *ix, int64_t *b, int64_t *e, int64_t *st) {
    int64_t step = ix->step ? ix->step : 1, lo = step > 0 ? 0 : -1, hi = step > 0 ? size : size - 1, s, t;
    if (!ix->has_start) s = step > 0 ? lo : hi;
    else {
        s = ix->start < 0 ? ix->start + size : ix->start;
        s = s < lo ? lo : s > hi ? hi : s;
    }
    if (!ix->has_stop) t = step > 0 ? hi : lo;
    else {
        t = ix->stop < 0 ? ix->stop + size : ix->stop;
        t = t < lo ? lo : t > hi ? hi : t;
    }
    *st = step;
    if (step * (t - s) < 0) *b = *e = 0;
    else if (step > 0) *b = s, *e = t;
    else *b = t + 1, *e = s + 1;
}

static ti_tensor_t *s_plan(ti_tensor_t *x, int n, const ti_index_t *idx, s_plan_t *p, const char *op) {
    memset(p, 0, sizeof *p);
    int nd = ti_ndim(x), ell = -1, used = 0;
    p->nd = nd;
    if (n < 0 || (n && !idx)) return tc_fail(x, TACT_EINVAL, "%s: %d indices", op, n);
    for (int i = 0; i < n; i++) {
        if (idx[i].kind == TACT_IDX_ELLIPSIS) {
            if (ell >= 0) return tc_fail(x, TACT_EINVAL, "%s: indices can only have a single ellipsis", op);
            ell = i;
        } else if (idx[i].kind != TACT_IDX_NEWAXIS) {
            used++;
        }
    }
    if (used > nd) return tc_fail(x, TACT_EINVAL, "%s: %d indices for a %d-dim tensor", op, used, nd);
    int64_t sh[TA_MAX_DIMS];
    ti_shape(x, sh);
    int dim = 0;
    for (int i = 0; i <= n; i++) {
        if (i == (ell >= 0 ? ell : n)) /* the ellipsis (or the end) stands for the dims not indexed */
            for (int f = 0; f < nd - used; f++, dim++) {
                if (p->npos >= 2 * TA_MAX_DIMS) return tc_fail(x, TACT_EINVAL, "%s: too many indices", op);
                p->b[dim] = 0, p->e[dim] = sh[dim], p->st[dim] = 1;
                p->order[p->npos++] = dim;
            }
        if (i == n) break;
        const ti_index_t *ix = &idx[i];
        if (ix->kind == TACT_IDX_ELLIPSIS) continue;
        if (p->npos >= 2 * TA_MAX_DIMS) return tc_fail(x, TACT_EINVAL, "%s: too many indices", op);
        if (ix->kind == TACT_IDX_NEWAXIS) {
            p->order[p->npos++] = -1;
            continue;
        }
        p->order[p->npos++] = dim;
        int64_t size = sh[dim];
        switch (ix->kind) {
        case TACT_IDX_INT: {
            int64_t k = ix->start;
            if (k >= size || k < -size) return tc_fail(x, TACT_EINVAL, "%s: index %lld is out of bounds on dim %d of size %lld", op, (long long)k, dim, (long long)size);
            if (k < 0) k += size;
            p->b[dim] = k, p->e[dim] = k + 1, p->st[dim] = 1, p->collapse[dim] = 1;
            break;
        }
        case TACT_IDX_SLICE:
            if (ix->step == 0 && ix->has_step) return tc_fail(x, TACT_EINVAL, "%s: a slice on dim %d cannot have 0 as step", op, dim);
            s_slice(size, ix, &p->b[dim], &p->e[dim], &p->st[dim]);
            break;
        case TACT_IDX_TENSOR:
            if (!ix->tensor || ti_status_of(ix->tensor)) return ti_neg(ix->tensor);
            if (ta_dtype_is_float(ti_dtype_of(ix->tensor)) || ta_dtype_is_bool(ti_dtype_of(ix->tensor)))
                return tc_fail(x, TACT_EDTYPE, "%s: a %s tensor index on dim %d; only int tensors index", op, tact_dtype_name(ti_dtype_of(ix->tensor)), dim);
            p->b[dim] = 0, p->e[dim] = size, p->st[dim] = 1;
            p->tensor[dim] = ix->tensor;
            p->ntensor++;
            break;
        default:
            return tc_fail(x, TACT_EINVAL, "%s: index %d has kind %d", op, i, (int)ix->kind);
        }
        dim++;
    }
    return NULL;
}

/* Shrink, flip negative steps, take every st-th: the "strided" view. */
static ti_tensor_t *s_basic(ti_tensor_t *x, const s_plan_t *p) {
    int nd = p->nd, flips[TA_MAX_DIMS], nf = 0, strided = 0;
    int64_t r[TA_MAX_DIMS][2];
    for (int k = 0; k < nd; k++) {
        r[k][0] = p->b[k], r[k][1] = p->e[k];
        if (p->st[k] < 0) flips[nf++] = k;
        strided |= p->st[k] != 1 && p->st[k] != -1;
    }
    ti_tensor_t *ret = ti_shrink(x, r);
    if (nf) ret = ti_flip(ret, nf, flips);
    if (!strided) return ret;
    if (2 * nd > TA_MAX_DIMS) return tc_fail(x, TACT_ESHAPE, "getitem: strided slices of a %d-dim tensor", nd);
    int64_t sh[TA_MAX_DIMS], pads[TA_MAX_DIMS][2], two[TA_MAX_DIMS], take[TA_MAX_DIMS][2], out[TA_MAX_DIMS];
    ti_shape(ret, sh);
    for (int k = 0; k < nd; k++) {
        int64_t st = p->st[k] < 0 ? -p->st[k] : p->st[k], up = (sh[k] + st - 1) / st * st;
        pads[k][0] = 0, pads[k][1] = up - sh[k];
        two[2 * k] = up / st, two[2 * k + 1] = st;
        take[2 * k][0] = 0, take[2 * k][1] = up / st, take[2 * k + 1][0] = 0, take[2 * k + 1][1] = 1;
        out[k] = up / st;
    }
    ret = ti_reshape(ti_pad(ret, pads, 0), 2 * nd, two);
    return ti_reshape(ti_shrink(ret, take), nd, out);
}

/* The strided view's shape with newaxis dims added and int dims dropped. */
static int s_result_shape(const s_plan_t *p, ti_tensor_t *strided, int64_t *out) {
    int m = 0;
    for (int i = 0; i < p->npos; i++) {
        int d = p->order[i];
        if (d < 0) out[m++] = 1;
        else if (!p->collapse[d]) out[m++] = ti_dim(strided, d);
    }
    return m;
}

ti_tensor_t *ti_getitem(ti_tensor_t *x, int n, const ti_index_t *idx) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    s_plan_t p;
    ti_tensor_t *err = s_plan(x, n, idx, &p, "getitem");
    if (err) return err;
    ti_tensor_t *ret = s_basic(x, &p);
    if (ti_status_of(ret)) return ret;
    int64_t shape[2 * TA_MAX_DIMS];
    int m = s_result_shape(&p, ret, shape);
    if (m > TA_MAX_DIMS) return tc_fail(x, TACT_ESHAPE, "getitem: %d dims", m);
    ret = ti_reshape(ret, m, shape);
    if (!p.ntensor) return ret;
    /* Tensor indices, the reference's way: the dims of ret they index (after
     * ints collapsed and newaxis inserted), their broadcast shape inserted at
     * the first of them, a one-hot mask per index, and a sum over the dims. */
    int tdim[TA_MAX_DIMS], nt = 0, pos = 0;
    ti_tensor_t *tix[TA_MAX_DIMS] = {NULL};
    for (int i = 0; i < p.npos; i++) {
        int d = p.order[i];
        if (d >= 0 && p.collapse[d]) continue;
        if (d >= 0 && p.tensor[d]) tdim[nt] = pos, tix[nt++] = p.tensor[d];
        pos++;
    }
    ta_shape_t big;
    ta_error_t e;
    int64_t tsh[TA_MAX_DIMS];
    ti_shape(tix[0], tsh);
    if (ta_shape_make(&big, ti_ndim(tix[0]), tsh, "getitem", &e) != TACT_OK) return tc_fail(x, e.code, "%s", e.text);
    for (int i = 1; i < nt; i++) {
        ti_shape(tix[i], tsh);
        ta_shape_t ts, nb;
        if (ta_shape_make(&ts, ti_ndim(tix[i]), tsh, "getitem", &e) != TACT_OK || ta_shape_broadcast(&big, &ts, "getitem", &nb, &e) != TACT_OK)
            return tc_fail(x, TACT_ESHAPE, "getitem: cannot broadcast the tensor indices: %s", e.text);
        big = nb;
    }
    int rn = ti_ndim(ret), first = tdim[0], bn = big.ndim;
    if (rn + bn > TA_MAX_DIMS) return tc_fail(x, TACT_ESHAPE, "getitem: %d dims and %d of tensor indices", rn, bn);
    int64_t rs[TA_MAX_DIMS], pre[TA_MAX_DIMS], resh[TA_MAX_DIMS];
    ti_shape(ret, rs);
    int q = 0;
    for (int k = 0; k < first; k++) pre[q] = rs[k], resh[q++] = rs[k];
    for (int k = 0; k < bn; k++) pre[q] = big.d[k], resh[q++] = 1;
    for (int k = first; k < rn; k++) pre[q] = rs[k], resh[q++] = rs[k];
    ti_tensor_t *mask = NULL;
    ti_ctx_t *ctx = ti_tensor_ctx(x);
    for (int i = 0; i < nt; i++) {
        int d = tdim[i];
        /* negative indices count from the end */
        ti_tensor_t *t = ti_add(ti_where(ti_lt(tix[i], ti_scalar_int(ctx, 0)), ti_scalar_int(ctx, rs[d]), ti_scalar_int(ctx, 0)), tix[i]);
        int64_t ts[TA_MAX_DIMS], ar[TA_MAX_DIMS];
        ti_shape(t, ts);
        int tn = ti_ndim(t);
        for (int k = 0; k < rn - first; k++) ts[tn + k] = 1;
        t = ti_expand(ti_reshape(t, tn + rn - first, ts), q, pre);
        ar[0] = rs[d];
        for (int k = 1; k < rn - d; k++) ar[k] = 1;
        ti_tensor_t *a = ti_reshape(tc_arange_like(t, 0, (double)rs[d], 1, TACT_INT32), rn - d, ar);
        ti_tensor_t *m1 = ti_eq(t, a);
        mask = mask ? ti_mul(mask, m1) : m1;
    }
    int axes[TA_MAX_DIMS];
    for (int i = 0; i < nt; i++) axes[i] = tdim[i] + bn;
    ti_tensor_t *r = ti_cast(ti_sum(ti_mul(ti_reshape(ret, q, resh), mask), nt, axes, 0), ti_dtype_of(x));
    int consecutive = 1;
    for (int i = 1; i < nt; i++) consecutive &= tdim[i] == tdim[i - 1] + 1;
    if (first != 0 && nt != 1 && !consecutive) { /* the reference moves the index dims first */
        int order[TA_MAX_DIMS], o = 0, rdim = ti_ndim(r);
        for (int k = first; k < first + bn; k++) order[o++] = k;
        for (int k = 0; k < first; k++) order[o++] = k;
        for (int k = first + bn; k < rdim; k++) order[o++] = k;
        r = ti_permute(r, order);
    }
    return r;
}

/* value, broadcast to the region's shape, moved back into x's shape by the
 * inverse movement ops (ints and newaxis undone, steps spread out, flips
 * undone, the range padded out). */
static ti_tensor_t *s_scatter(ti_tensor_t *v, const s_plan_t *p, ti_tensor_t *strided, const int64_t *xs, double fill) {
    int nd = p->nd;
    int64_t ss[TA_MAX_DIMS];
    ti_shape(strided, ss);
    v = ti_reshape(v, nd, ss); /* the strided shape: int dims back as 1, newaxis dims gone */
    int flips[TA_MAX_DIMS], nf = 0;
    for (int k = 0; k < nd; k++) {
        int64_t st = p->st[k] < 0 ? -p->st[k] : p->st[k], len = p->e[k] - p->b[k];
        if (st > 1) { /* (n) -> (n, 1) -> (n, st) with pads -> (n st) -> its first len */
            int64_t sh[TA_MAX_DIMS], a[TA_MAX_DIMS], pads[TA_MAX_DIMS][2] = {{0}}, r[TA_MAX_DIMS][2];
            ti_shape(v, sh);
            int m = 0;
            for (int j = 0; j < nd; j++) {
                a[m++] = sh[j];
                if (j == k) a[m++] = 1;
            }
            v = ti_reshape(v, nd + 1, a);
            pads[k + 1][1] = st - 1;
            v = ti_pad(v, pads, fill);
            sh[k] *= st;
            v = ti_reshape(v, nd, sh);
            for (int j = 0; j < nd; j++) r[j][0] = 0, r[j][1] = sh[j];
            r[k][1] = len;
            v = ti_shrink(v, r);
        }
        if (p->st[k] < 0) flips[nf++] = k;
    }
    if (nf) v = ti_flip(v, nf, flips);
    int64_t pads[TA_MAX_DIMS][2];
    for (int k = 0; k < nd; k++) pads[k][0] = p->b[k], pads[k][1] = xs[k] - p->e[k];
    return ti_pad(v, pads, fill);
}

ti_tensor_t *ti_setitem(ti_tensor_t *x, int n, const ti_index_t *idx, ti_tensor_t *value) {
    if (!x || ti_status_of(x)) return ti_neg(x);
    if (!value || ti_status_of(value)) return ti_neg(value);
    s_plan_t p;
    ti_tensor_t *err = s_plan(x, n, idx, &p, "setitem");
    if (err) return err;
    if (p.ntensor) return tc_fail(x, TACT_EINVAL, "setitem: tensor indices are not supported (as the reference)");
    ti_tensor_t *strided = s_basic(x, &p);
    if (ti_status_of(strided)) return strided;
    int64_t rshape[2 * TA_MAX_DIMS], xs[TA_MAX_DIMS];
    int m = s_result_shape(&p, strided, rshape);
    if (m > TA_MAX_DIMS) return tc_fail(x, TACT_ESHAPE, "setitem: %d dims", m);
    ti_shape(x, xs);
    tact_dtype d = ti_dtype_of(x);
    /* The value in x's dtype, broadcast to the region, moved into place. */
    ti_tensor_t *vb = ti_expand(ti_cast(value, d), m, rshape);
    if (ti_status_of(vb)) return vb;
    ti_tensor_t *vf = s_scatter(vb, &p, strided, xs, 0);
    ti_tensor_t *mask = s_scatter(ti_ones(ti_tensor_ctx(x), TACT_BOOL, m, rshape), &p, strided, xs, 0);
    return ti_assign(x, ti_where(mask, vf, x));
}
