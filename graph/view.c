/* view.c - view stacks: canonical views, the movement ops on them, merging views, and index/valid mapping. */
#include "view.h"

#include <assert.h>
#include <string.h>

/* Recursion of the view merge is bounded: the reference's recursion always
 * converges within a few steps; the bound only guards against a cycle. */
#define S_MAX_MERGE_DEPTH 12

typedef int64_t s_range_t[2];

static int64_t s_min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t s_max(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t s_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t s_ceildiv(int64_t a, int64_t b) { return -s_floordiv(-a, b); }

static int64_t s_prod(int n, const int64_t *shape) {
    int64_t p = 1;
    for (int k = 0; k < n; k++) p *= shape[k];
    return p;
}

static bool s_same_shape(int n, const int64_t *a, int m, const int64_t *b) {
    return n == m && (n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0);
}

/* Row-major strides with the canonical 0 for size-1 dims. */
static void s_strides_for(int n, const int64_t *shape, int64_t *out) {
    int64_t acc = 1;
    for (int k = n - 1; k >= 0; k--) {
        out[k] = shape[k] == 1 ? 0 : acc;
        acc *= shape[k];
    }
}

/*
 * Builds a canonical view into *v (the reference's View.create).  strides
 * NULL means row-major, mask NULL means unmasked.  The arguments may point
 * into *v.
 */
static void s_make(ta_view_t *v, int n, const int64_t *shape, const int64_t *strides, int64_t offset,
                   const s_range_t *mask) {
    ta_view_t t;
    memset(&t, 0, sizeof t);
    t.ndim = n;
    for (int k = 0; k < n; k++) t.shape[k] = shape[k];
    if (strides)
        for (int k = 0; k < n; k++) t.strides[k] = shape[k] == 1 ? 0 : strides[k];
    else
        s_strides_for(n, shape, t.strides);
    t.offset = offset;
    if (s_prod(n, shape) == 0) {
        memset(t.strides, 0, sizeof t.strides);
        t.offset = 0;
        t.contiguous = true;
        *v = t;
        return;
    }
    if (mask)
        for (int k = 0; k < n; k++)
            if (mask[k][0] != 0 || mask[k][1] != shape[k]) t.has_mask = true;
    if (t.has_mask) {
        bool empty = false;
        for (int k = 0; k < n; k++) {
            t.mask[k][0] = mask[k][0], t.mask[k][1] = mask[k][1];
            empty = empty || mask[k][0] >= mask[k][1];
        }
        if (empty) {
            memset(t.strides, 0, sizeof t.strides);
            memset(t.mask, 0, sizeof t.mask);
            t.offset = 0;
        }
        /* A dim whose mask admits at most one index needs no stride. */
        for (int k = 0; k < n; k++)
            if (t.mask[k][0] + 1 >= t.mask[k][1]) {
                t.offset += t.strides[k] * t.mask[k][0];
                t.strides[k] = 0;
            }
    }
    int64_t rm[TA_MAX_DIMS];
    s_strides_for(n, shape, rm);
    t.contiguous = t.offset == 0 && !t.has_mask && (n == 0 || memcmp(rm, t.strides, (size_t)n * sizeof *rm) == 0);
    *v = t;
}

/* ---- reshape within one view ------------------------------------------ */

/* Runs of dims that behave as one (the reference's _merge_dims): each entry
 * is {merged size, stride, size without its stride-0 part}. */
static int s_merge_dims(const ta_view_t *v, int64_t (*out)[3]) {
    if (v->ndim == 0) return 0;
    int n = 1;
    out[0][0] = v->shape[0], out[0][1] = v->strides[0], out[0][2] = v->strides[0] ? v->shape[0] : 0;
    bool merging = v->has_mask ? v->mask[0][1] - v->mask[0][0] == 1 : v->shape[0] == 1;
    for (int i = 1; i < v->ndim; i++) {
        int64_t s = v->shape[i], st = v->strides[i];
        if (s == 1) continue;
        if (merging || out[n - 1][1] == s * st) {
            out[n - 1][2] = st ? (merging ? s : out[n - 1][2] * s) : 0;
            out[n - 1][0] *= s, out[n - 1][1] = st;
        } else {
            out[n][0] = s, out[n][1] = st, out[n][2] = st ? s : 0;
            n++;
        }
        merging = v->has_mask ? v->mask[i][1] - v->mask[i][0] == 1 : s == 1;
    }
    return n;
}

/* The mask of v reshaped to shape ns (the reference's _reshape_mask); false
 * when the mask cannot be expressed on the new shape. */
static bool s_reshape_mask(const ta_view_t *v, int n, const int64_t *ns, s_range_t *out) {
    if (!v->has_mask) {
        for (int k = 0; k < n; k++) out[k][0] = 0, out[k][1] = ns[k];
        return true;
    }
    for (int k = 0; k < v->ndim; k++)
        if (v->mask[k][1] - v->mask[k][0] < 1) {
            memset(out, 0, (size_t)n * sizeof *out);
            return true;
        }
    /* Walk both shapes from the innermost dim; past the front, old dims are
     * 1 with mask (0,1) and new dims are 1. */
    int io = v->ndim - 1, in = n - 1, cnt = 0, guard = 4 * (v->ndim + n) + 8;
#define S_OLD_DIM() (io >= 0 ? v->shape[io] : 1)
#define S_OLD_LO() (io >= 0 ? v->mask[io][0] : 0)
#define S_OLD_HI() (io >= 0 ? v->mask[io][1] : 1)
    int64_t curr = 1, old_dim = S_OLD_DIM(), l = S_OLD_LO(), r = S_OLD_HI(), new_dim = in >= 0 ? ns[in] : 1;
    io--, in--;
    while (cnt < n) {
        if (--guard < 0) return false;
        int64_t next = new_dim * curr;
        if (old_dim >= next) {
            if (old_dim == next) {
                out[n - 1 - cnt][0] = l / curr, out[n - 1 - cnt][1] = (r - 1) / curr + 1;
                cnt++;
                curr = 1, old_dim = S_OLD_DIM(), l = S_OLD_LO(), r = S_OLD_HI(), new_dim = in >= 0 ? ns[in] : 1;
                io--, in--;
            } else {
                /* A split must not cut across the mask. */
                if (((l % next != 0 || r % next != 0) && l / next != (r - 1) / next) || old_dim % next != 0)
                    return false;
                out[n - 1 - cnt][0] = l % next / curr, out[n - 1 - cnt][1] = (r - 1) % next / curr + 1;
                cnt++;
                curr = next, new_dim = in >= 0 ? ns[in] : 1;
                in--;
            }
        } else {
            /* Merging with the next old dim needs the mask to unfold continuously. */
            int64_t nl = S_OLD_LO(), nr = S_OLD_HI();
            if ((l != 0 || r != old_dim) && nr - nl != 1) return false;
            l = nl * old_dim + l, r = (nr - 1) * old_dim + r;
            old_dim *= S_OLD_DIM();
            io--;
        }
    }
    /* Old dims left over are size 1, so their masks are (0,1): the
     * reference's check for leading masked 1-dims cannot fire once empty
     * masks have been handled above. */
#undef S_OLD_DIM
#undef S_OLD_LO
#undef S_OLD_HI
    return true;
}

/* Reshapes one view (the reference's View.reshape): false when the result
 * is not expressible as one view.  out must not alias v. */
static bool s_view_reshape(const ta_view_t *v, int n, const int64_t *ns, ta_view_t *out) {
    if (s_same_shape(v->ndim, v->shape, n, ns)) {
        *out = *v;
        return true;
    }
    if (s_prod(v->ndim, v->shape) == 0 || v->contiguous) {
        s_make(out, n, ns, NULL, 0, NULL);
        return true;
    }
    if (n == 0 && v->has_mask)
        for (int k = 0; k < v->ndim; k++)
            if (v->mask[k][0] == v->mask[k][1]) return false;
    int64_t md[TA_MAX_DIMS][3], rev[TA_MAX_DIMS];
    int nmd = s_merge_dims(v, md), cnt = 0, ri = n - 1;
    /* Split each merged run, innermost first, into the new dims. */
    for (int j = nmd - 1; j >= 0; j--) {
        int64_t merged = md[j][0], st = md[j][1], real = md[j][2], acc = 1;
        while (acc < merged && ri >= 0) {
            int64_t d = ns[ri--];
            rev[cnt++] = st;
            if (d != 1) {
                acc *= d;
                st *= acc < real ? d : 0;
            }
        }
        if (acc != merged) return false;
    }
    while (cnt < n) rev[cnt++] = 0;
    s_range_t nm[TA_MAX_DIMS];
    if (!s_reshape_mask(v, n, ns, nm)) return false;
    int64_t strides[TA_MAX_DIMS], extra = 0;
    for (int k = 0; k < n; k++) {
        strides[k] = nm[k][1] - nm[k][0] == 1 ? 0 : rev[n - 1 - k];
        extra -= nm[k][0] * strides[k];
    }
    if (v->has_mask)
        for (int k = 0; k < v->ndim; k++) extra += v->mask[k][0] * v->strides[k];
    s_make(out, n, ns, strides, v->offset + extra, nm);
    return true;
}

/* ---- the other movement ops on one view -------------------------------- */

/* Restricts v to arg (ranges that may reach outside the shape, for pad),
 * intersecting the moved mask with mask when given. */
static void s_resize(const ta_view_t *v, const s_range_t *arg, const s_range_t *mask, ta_view_t *out) {
    int64_t shape[TA_MAX_DIMS], off = 0;
    s_range_t m[TA_MAX_DIMS];
    for (int k = 0; k < v->ndim; k++) {
        int64_t ax = arg[k][0], ay = arg[k][1];
        off += v->strides[k] * ax;
        shape[k] = ay - ax;
        if (v->has_mask) {
            m[k][0] = s_max(0, s_min(v->mask[k][0] - ax, ay - ax));
            m[k][1] = s_max(0, s_min(v->mask[k][1] - ax, ay - ax));
            if (mask) m[k][0] = s_max(m[k][0], mask[k][0]), m[k][1] = s_min(m[k][1], mask[k][1]);
        } else if (mask) {
            m[k][0] = mask[k][0], m[k][1] = mask[k][1];
        }
    }
    s_make(out, v->ndim, shape, v->strides, v->offset + off, v->has_mask || mask ? m : NULL);
}

static void s_pad(const ta_view_t *v, const int64_t (*pads)[2], ta_view_t *out) {
    s_range_t arg[TA_MAX_DIMS], mask[TA_MAX_DIMS];
    bool any = false;
    for (int k = 0; k < v->ndim; k++) {
        arg[k][0] = -pads[k][0], arg[k][1] = v->shape[k] + pads[k][1];
        mask[k][0] = pads[k][0], mask[k][1] = v->shape[k] + pads[k][0];
        any = any || pads[k][0] || pads[k][1];
    }
    if (any)
        s_resize(v, arg, mask, out);
    else
        *out = *v;
}

/* ---- merging two views ------------------------------------------------- */

/* The index tuple of flat position offs in shape (row-major, floor division). */
static void s_un1d(const ta_view_t *v, int64_t offs, int64_t *out) {
    int64_t st[TA_MAX_DIMS];
    s_strides_for(v->ndim, v->shape, st);
    for (int k = 0; k < v->ndim; k++) {
        out[k] = st[k] ? s_floordiv(offs, st[k]) : 0;
        offs -= out[k] * st[k];
    }
}

/* The range of cst + sum(coef[k] * ik) over 0 <= ik < shape[k]. */
static void s_lin_range(int n, const int64_t *coef, int64_t cst, const int64_t *shape, int64_t *lo, int64_t *hi) {
    *lo = *hi = cst;
    for (int k = 0; k < n; k++) {
        int64_t c = coef[k] * (shape[k] - 1);
        if (c < 0) *lo += c;
        else *hi += c;
    }
}

/*
 * One view equivalent to applying vm1 (the later) and then vm2 (the
 * earlier), the reference's View.__add__: vm1's strides are projected
 * through vm2, merging vm2's dims where vm1 walks across them, and vm2's
 * mask is turned into a mask on vm1 where it can be.  False when the pair
 * cannot be expressed as one view.  out must alias neither input.
 */
static bool s_add(const ta_view_t *vm2, const ta_view_t *vm1, ta_view_t *out, int depth) {
    int n1 = vm1->ndim, n2 = vm2->ndim;
    if (depth > S_MAX_MERGE_DEPTH) return false;
    if (vm2->contiguous) {
        *out = *vm1;
        return true;
    }
    if (vm1->contiguous && s_same_shape(n1, vm1->shape, n2, vm2->shape)) {
        *out = *vm2;
        return true;
    }
    if (vm1->contiguous && s_prod(n1, vm1->shape) == s_prod(n2, vm2->shape) && s_view_reshape(vm2, n1, vm1->shape, out))
        return true;
    if (vm1->has_mask) {
        int64_t pads[TA_MAX_DIMS][2];
        for (int k = 0; k < n1; k++) {
            if (vm1->mask[k][0] >= vm1->mask[k][1]) {
                /* Nothing is valid: any view with an empty mask will do. */
                s_range_t zm[TA_MAX_DIMS] = {{0}};
                int64_t zs[TA_MAX_DIMS] = {0};
                s_make(out, n1, vm1->shape, zs, 0, zm);
                return true;
            }
            pads[k][0] = vm1->mask[k][0], pads[k][1] = vm1->shape[k] - vm1->mask[k][1];
        }
        ta_view_t shrunk, merged;
        s_resize(vm1, vm1->mask, NULL, &shrunk);
        if (!s_add(vm2, &shrunk, &merged, depth + 1)) return false;
        s_pad(&merged, pads, out);
        return true;
    }

    /* Project vm1's offset and strides onto vm2's dims: terms[d2] lists the
     * vm1 dims (tdim) that move vm2's dim d2, and by how much (tcoef). */
    int64_t origin[TA_MAX_DIMS], cur[TA_MAX_DIMS], strides[TA_MAX_DIMS] = {0};
    int64_t tcoef[TA_MAX_DIMS][TA_MAX_DIMS];
    int tdim[TA_MAX_DIMS][TA_MAX_DIMS], nterm[TA_MAX_DIMS] = {0};
    s_un1d(vm2, vm1->offset, origin);
    for (int d1 = 0; d1 < n1; d1++) {
        if (vm1->strides[d1] == 0) continue;
        s_un1d(vm2, vm1->offset + vm1->strides[d1], cur);
        for (int d2 = 0; d2 < n2; d2++) {
            int64_t s1 = cur[d2] - origin[d2];
            if (s1 == 0) continue;
            tdim[d2][nterm[d2]] = d1, tcoef[d2][nterm[d2]++] = s1;
            strides[d1] += s1 * vm2->strides[d2];
        }
    }

    /* Group vm2's dims, innermost first, into extents that vm1's index stays
     * inside; a dim vm1 carries out of must merge with the next one. */
    int64_t coef[TA_MAX_DIMS] = {0}, cst = 0, msize = 1, esize[TA_MAX_DIMS], elo[TA_MAX_DIMS], ehi[TA_MAX_DIMS];
    int next = 0;
    for (int d2 = n2 - 1; d2 >= 0; d2--) {
        for (int t = 0; t < nterm[d2]; t++) coef[tdim[d2][t]] += tcoef[d2][t] * msize;
        cst += origin[d2] * msize;
        msize *= vm2->shape[d2];
        int64_t lo, hi;
        s_lin_range(n1, coef, cst, vm1->shape, &lo, &hi);
        if (lo >= 0 && hi < msize) {
            esize[next] = msize, elo[next] = lo, ehi[next] = hi, next++;
            msize = 1, cst = 0;
            memset(coef, 0, sizeof coef);
        }
    }
    if (cst != 0) return false;
    for (int d1 = 0; d1 < n1; d1++)
        if (coef[d1] != 0) return false;
    bool regroup = next != n2;
    for (int k = 0; k < next && !regroup; k++) regroup = esize[next - 1 - k] != vm2->shape[k];
    if (regroup) {
        int64_t shape[TA_MAX_DIMS];
        ta_view_t re;
        for (int k = 0; k < next; k++) shape[k] = esize[next - 1 - k];
        return s_view_reshape(vm2, next, shape, &re) && s_add(&re, vm1, out, depth + 1);
    }

    if (vm2->has_mask) {
        /* Project vm2's mask onto vm1: a dim moved by one vm1 dim bounds it. */
        int64_t nb[TA_MAX_DIMS] = {0}, ne[TA_MAX_DIMS];
        bool bad = false;
        memcpy(ne, vm1->shape, sizeof ne);
        for (int d2 = 0; d2 < n2; d2++) {
            int64_t b = vm2->mask[d2][0], e = vm2->mask[d2][1], o = origin[d2];
            if (!(elo[next - 1 - d2] < b || ehi[next - 1 - d2] >= e)) continue;
            if (nterm[d2] != 1) {
                if (nterm[d2] == 0 && n1 > 0) ne[0] = 0;
                else bad = true;
                continue;
            }
            int d1 = tdim[d2][0];
            int64_t s1 = tcoef[d2][0];
            nb[d1] = s_max(nb[d1], s_ceildiv(s1 > 0 ? b - o : e - o - 1, s1));
            ne[d1] = s_min(ne[d1], s_floordiv(s1 < 0 ? b - o : e - o - 1, s1) + 1);
        }
        for (int d1 = 0; d1 < n1; d1++)
            if (nb[d1] != 0 || ne[d1] != vm1->shape[d1]) {
                /* Part of vm1 is masked off by vm2: retry with that mask on vm1. */
                s_range_t m[TA_MAX_DIMS];
                ta_view_t masked;
                for (int k = 0; k < n1; k++) m[k][0] = nb[k], m[k][1] = ne[k];
                s_make(&masked, n1, vm1->shape, vm1->strides, vm1->offset, m);
                return s_add(vm2, &masked, out, depth + 1);
            }
        if (bad) return false;
    }
    int64_t off = vm2->offset;
    for (int d2 = 0; d2 < n2; d2++) off += origin[d2] * vm2->strides[d2];
    s_make(out, n1, vm1->shape, strides, off, NULL);
    return true;
}

/* Merges the last two views while they can be expressed as one. */
static void s_simplify(ta_vstack_t *st) {
    while (st->nviews >= 2) {
        ta_view_t merged;
        if (!s_add(&st->views[st->nviews - 2], &st->views[st->nviews - 1], &merged, 0)) break;
        st->views[st->nviews - 2] = merged;
        st->nviews--;
    }
}

/* Replaces the last view with v and simplifies. */
static int s_set_last(ta_vstack_t *st, const ta_view_t *v) {
    st->views[st->nviews - 1] = *v;
    s_simplify(st);
    return 0;
}

/* ---- the stack --------------------------------------------------------- */

/* Sets *st to one contiguous view of shape; nothing is allocated. */
void ta_vstack_init(ta_vstack_t *st, int ndim, const int64_t *shape) {
    assert(ndim >= 0 && ndim <= TA_MAX_DIMS);
    st->nviews = 1; /* the views past nviews are never read: a stack is 3 KiB, a view 0.5 */
    s_make(&st->views[0], ndim, shape, NULL, 0, NULL);
}

void ta_vstack_copy(ta_vstack_t *dst, const ta_vstack_t *src) {
    dst->nviews = src->nviews;
    memcpy(dst->views, src->views, sizeof *src->views * (size_t)src->nviews);
}

/* The shape accessors read the last view; the returned array belongs to st. */
int ta_vstack_ndim(const ta_vstack_t *st) { return st->views[st->nviews - 1].ndim; }

/* Returns the last view's shape array. */
const int64_t *ta_vstack_shape(const ta_vstack_t *st) { return st->views[st->nviews - 1].shape; }

/* Returns the product of the last view's shape (1 for a scalar). */
int64_t ta_vstack_numel(const ta_vstack_t *st) {
    const ta_view_t *v = &st->views[st->nviews - 1];
    return s_prod(v->ndim, v->shape);
}

/* True only for a single contiguous view. */
bool ta_vstack_contiguous(const ta_vstack_t *st) { return st->nviews == 1 && st->views[0].contiguous; }

/* The range of positions v produces over the box [lo[k], hi[k]] clipped to
 * its mask; false when that is empty. */
static bool s_box_range(const ta_view_t *v, const int64_t *lo, const int64_t *hi, int64_t *pmin, int64_t *pmax) {
    *pmin = *pmax = v->offset;
    for (int k = 0; k < v->ndim; k++) {
        int64_t a = lo[k], b = hi[k];
        if (v->has_mask) a = s_max(a, v->mask[k][0]), b = s_min(b, v->mask[k][1] - 1);
        if (a > b) return false;
        *pmin += s_min(a * v->strides[k], b * v->strides[k]);
        *pmax += s_max(a * v->strides[k], b * v->strides[k]);
    }
    return true;
}

/*
 * Exact for one view.  For a deeper stack the range of positions reaching
 * each earlier view is widened to the bounding box of the index tuples it
 * covers, so the result is an upper bound that still never exceeds the
 * first view's own valid range.
 */
/* Positions of one view over its valid indices, with overflow checks:
 * false when a product or sum leaves int64 (hostile numbers).  *empty is
 * set when no index is valid. */
static bool s_view_span(const ta_view_t *v, int64_t *pmin, int64_t *pmax, bool *empty) {
    int64_t lo = v->offset, hi = v->offset;
    *empty = false;
    for (int k = 0; k < v->ndim; k++) {
        int64_t a = 0, b = v->shape[k] - 1, x, y;
        if (v->has_mask) a = s_max(a, v->mask[k][0]), b = s_min(b, v->mask[k][1] - 1);
        if (a > b) {
            *empty = true;
            return true;
        }
        if (__builtin_mul_overflow(a, v->strides[k], &x) || __builtin_mul_overflow(b, v->strides[k], &y) ||
            __builtin_add_overflow(lo, s_min(x, y), &lo) || __builtin_add_overflow(hi, s_max(x, y), &hi))
            return false;
    }
    *pmin = lo, *pmax = hi;
    return true;
}

bool ta_vstack_valid(const ta_vstack_t *st) {
    if (st->nviews < 1 || st->nviews > TA_MAX_VIEWS) return false;
    int64_t prev_numel = 0;
    for (int j = 0; j < st->nviews; j++) {
        const ta_view_t *v = &st->views[j];
        if (v->ndim < 0 || v->ndim > TA_MAX_DIMS) return false;
        int64_t numel = 1;
        for (int k = 0; k < v->ndim; k++) {
            if (v->shape[k] < 0 || __builtin_mul_overflow(numel, v->shape[k], &numel) || numel > ((int64_t)1 << 62)) return false;
            if (v->has_mask && (v->mask[k][0] < 0 || v->mask[k][0] > v->mask[k][1] || v->mask[k][1] > v->shape[k])) return false;
        }
        int64_t rm[TA_MAX_DIMS];
        s_strides_for(v->ndim, v->shape, rm);
        /* As s_make sets it: an empty view is contiguous. */
        bool contiguous = numel == 0 || (v->offset == 0 && !v->has_mask && (v->ndim == 0 || memcmp(rm, v->strides, (size_t)v->ndim * sizeof *rm) == 0));
        if (contiguous != v->contiguous) return false;
        /* Every position a view produces lies inside the view before it. */
        int64_t pmin, pmax;
        bool empty;
        if (!s_view_span(v, &pmin, &pmax, &empty)) return false;
        if (!empty && (pmin < 0 || (j > 0 && pmax >= prev_numel))) return false;
        prev_numel = numel;
    }
    return true;
}

int64_t ta_vstack_buffer_size(const ta_vstack_t *st) {
    int64_t lo[TA_MAX_DIMS], hi[TA_MAX_DIMS], pmin = 0, pmax = -1;
    for (int j = st->nviews - 1; j >= 0; j--) {
        const ta_view_t *v = &st->views[j];
        int64_t numel = s_prod(v->ndim, v->shape);
        if (numel == 0) return 0;
        if (j == st->nviews - 1) {
            for (int k = 0; k < v->ndim; k++) lo[k] = 0, hi[k] = v->shape[k] - 1;
        } else {
            int64_t a = s_max(pmin, 0), b = s_min(pmax, numel - 1), acc = numel;
            if (a > b) return 0;
            bool fixed = true;
            for (int k = 0; k < v->ndim; k++) {
                acc /= v->shape[k];
                if (fixed) {
                    lo[k] = a / acc, hi[k] = b / acc;
                    fixed = lo[k] == hi[k];
                    a %= acc, b %= acc;
                } else {
                    lo[k] = 0, hi[k] = v->shape[k] - 1;
                }
            }
        }
        if (!s_box_range(v, lo, hi, &pmin, &pmax)) return 0;
    }
    return pmax + 1;
}

/* Reshapes within the last view when it can, else merges a new contiguous
 * view into it or pushes one; returns -1, leaving st as it was, when the
 * stack is full. */
int ta_vstack_reshape(ta_vstack_t *st, int ndim, const int64_t *shape) {
    assert(ndim >= 0 && ndim <= TA_MAX_DIMS);
    for (int k = 0; k < ndim; k++) assert(shape[k] >= 0);
    assert(s_prod(ndim, shape) == ta_vstack_numel(st));
    ta_view_t *last = &st->views[st->nviews - 1], t, merged;
    if (s_view_reshape(last, ndim, shape, &t)) return s_set_last(st, &t);
    s_make(&t, ndim, shape, NULL, 0, NULL);
    if (s_add(last, &t, &merged, 0)) return s_set_last(st, &merged);
    if (st->nviews == TA_MAX_VIEWS) return -1;
    st->views[st->nviews++] = t;
    return 0;
}

/* The other movement ops rewrite the last view, then merge it into the
 * one below where possible; they always return 0. */
int ta_vstack_permute(ta_vstack_t *st, const int *order) {
    const ta_view_t *v = &st->views[st->nviews - 1];
    int64_t shape[TA_MAX_DIMS], strides[TA_MAX_DIMS];
    s_range_t mask[TA_MAX_DIMS];
    unsigned seen = 0;
    for (int k = 0; k < v->ndim; k++) {
        int a = order[k];
        assert(a >= 0 && a < v->ndim && !(seen & (1u << a)));
        seen |= 1u << a;
        shape[k] = v->shape[a], strides[k] = v->strides[a];
        mask[k][0] = v->mask[a][0], mask[k][1] = v->mask[a][1];
    }
    ta_view_t t;
    s_make(&t, v->ndim, shape, strides, v->offset, v->has_mask ? mask : NULL);
    return s_set_last(st, &t);
}

/* Grows size-1 dims; a masked size-1 dim keeps its mask's meaning. */
int ta_vstack_expand(ta_vstack_t *st, const int64_t *shape) {
    const ta_view_t *v = &st->views[st->nviews - 1];
    ta_view_t t;
    if (s_prod(v->ndim, v->shape) == 0) {
        for (int k = 0; k < v->ndim; k++) assert(shape[k] == v->shape[k] || (v->shape[k] == 1 && shape[k] >= 0));
        s_make(&t, v->ndim, shape, NULL, 0, NULL);
        return s_set_last(st, &t);
    }
    s_range_t mask[TA_MAX_DIMS];
    for (int k = 0; k < v->ndim; k++) {
        assert(shape[k] == v->shape[k] || (v->shape[k] == 1 && shape[k] >= 0));
        mask[k][0] = v->mask[k][0], mask[k][1] = v->mask[k][1];
        if (v->has_mask && shape[k] != v->shape[k]) {
            bool all = v->mask[k][0] == 0 && v->mask[k][1] == 1;
            mask[k][0] = 0, mask[k][1] = all ? shape[k] : 0;
        }
    }
    s_make(&t, v->ndim, shape, v->strides, v->offset, v->has_mask ? mask : NULL);
    return s_set_last(st, &t);
}

/* Pads by moving the offset back and masking the new border. */
int ta_vstack_pad(ta_vstack_t *st, const int64_t (*pads)[2]) {
    const ta_view_t *v = &st->views[st->nviews - 1];
    for (int k = 0; k < v->ndim; k++) assert(pads[k][0] >= 0 && pads[k][1] >= 0);
    ta_view_t t;
    s_pad(v, pads, &t);
    return s_set_last(st, &t);
}

/* Shrinks by moving the offset and clipping the mask. */
int ta_vstack_shrink(ta_vstack_t *st, const int64_t (*ranges)[2]) {
    const ta_view_t *v = &st->views[st->nviews - 1];
    for (int k = 0; k < v->ndim; k++)
        assert(0 <= ranges[k][0] && ranges[k][0] <= ranges[k][1] && ranges[k][1] <= v->shape[k]);
    ta_view_t t;
    s_resize(v, ranges, NULL, &t);
    return s_set_last(st, &t);
}

/* Scales strides; a negative multiplier starts at the dim's last element. */
int ta_vstack_stride(ta_vstack_t *st, const int64_t *mul) {
    const ta_view_t *v = &st->views[st->nviews - 1];
    int64_t shape[TA_MAX_DIMS], strides[TA_MAX_DIMS], off = v->offset;
    s_range_t mask[TA_MAX_DIMS];
    for (int k = 0; k < v->ndim; k++) {
        int64_t m = mul[k], am = m < 0 ? -m : m, s = v->shape[k];
        assert(m != 0);
        strides[k] = v->strides[k] * m;
        shape[k] = (s + am - 1) / am;
        if (m < 0) off += (s - 1) * v->strides[k];
        /* New index j reads old index j*m (m > 0) or s-1+j*m (m < 0). */
        int64_t lo = m > 0 ? v->mask[k][0] : s - v->mask[k][1], hi = m > 0 ? v->mask[k][1] : s - v->mask[k][0];
        mask[k][0] = (lo + am - 1) / am, mask[k][1] = (hi + am - 1) / am;
    }
    ta_view_t t;
    s_make(&t, v->ndim, shape, strides, off, v->has_mask ? mask : NULL);
    return s_set_last(st, &t);
}

/* ---- mapping indices --------------------------------------------------- */

/* Maps idx through every view, last to first; false at the first mask that
 * excludes it, and *pos is then left alone. */
bool ta_vstack_index(const ta_vstack_t *st, const int64_t *idx, int64_t *pos) {
    int64_t cur[TA_MAX_DIMS], p = 0;
    const int64_t *in = idx;
    for (int j = st->nviews - 1; j >= 0; j--) {
        const ta_view_t *v = &st->views[j];
        if (j < st->nviews - 1) {
            if (s_prod(v->ndim, v->shape) == 0) return false;
            for (int k = v->ndim - 1; k >= 0; k--) {
                int64_t q = s_floordiv(p, v->shape[k]);
                cur[k] = p - q * v->shape[k], p = q;
            }
            in = cur;
        }
        p = v->offset;
        for (int k = 0; k < v->ndim; k++) {
            if (v->has_mask && (in[k] < v->mask[k][0] || in[k] >= v->mask[k][1])) return false;
            p += in[k] * v->strides[k];
        }
    }
    *pos = p;
    return true;
}

/* Adds one view's position and mask terms for index expressions idx. */
static void s_view_expr(const ta_view_t *v, ta_sym_arena_t *ar, const ta_sym_t *const *idx, const ta_sym_t **pos,
                        const ta_sym_t **valid) {
    const ta_sym_t *p = ta_sym_const(ar, v->offset), *ok = *valid;
    int64_t one;
    for (int k = 0; k < v->ndim; k++) {
        if (v->shape[k] != 1 && v->strides[k] != 0) p = ta_sym_add(ar, p, ta_sym_mulc(ar, idx[k], v->strides[k]));
        if (!v->has_mask) continue;
        /* Bounds the index already meets are left out. */
        const ta_sym_t *c[2] = {NULL, NULL};
        if (v->mask[k][0] > 0) c[0] = ta_sym_ge(ar, idx[k], ta_sym_const(ar, v->mask[k][0]));
        if (v->mask[k][1] < v->shape[k]) c[1] = ta_sym_lt(ar, idx[k], ta_sym_const(ar, v->mask[k][1]));
        for (int i = 0; i < 2; i++)
            if (c[i]) ok = ok && ta_sym_is_const(ok, &one) && one == 1 ? c[i] : ta_sym_and(ar, ok, c[i]);
    }
    *pos = p;
    *valid = ok;
}

/* Builds pos and valid in ar (which owns them).  Earlier views are used
 * with their dims merged, so fewer divisions are emitted; when valid is
 * provably 0, pos is the constant 0.  Returns -1 when ar runs out. */
int ta_vstack_expr(const ta_vstack_t *st, ta_sym_arena_t *ar, const ta_sym_t *const *idx, const ta_sym_t **pos,
                   const ta_sym_t **valid) {
    const ta_sym_t *p, *ok = ta_sym_const(ar, 1), *cur[TA_MAX_DIMS];
    s_view_expr(&st->views[st->nviews - 1], ar, idx, &p, &ok);
    for (int j = st->nviews - 2; j >= 0 && p && ok; j--) {
        if (ta_sym_max(ok) == 0) break;
        /* Fewer dims mean fewer divisions: use the view with its runs merged. */
        const ta_view_t *v = &st->views[j];
        ta_view_t mini;
        if (s_prod(v->ndim, v->shape) == 0) {
            p = ta_sym_const(ar, 0), ok = ta_sym_const(ar, 0);
            break;
        }
        int64_t md[TA_MAX_DIMS][3], ms[TA_MAX_DIMS];
        int nmd = s_merge_dims(v, md);
        for (int k = 0; k < nmd; k++) ms[k] = md[k][0];
        if (s_view_reshape(v, nmd, ms, &mini)) v = &mini;
        int64_t acc = 1;
        for (int k = v->ndim - 1; k >= 0; k--) {
            /* The outermost dim needs no modulo: valid positions are in range. */
            const ta_sym_t *q = acc == 1 ? p : ta_sym_div(ar, p, acc);
            cur[k] = k == 0 ? q : ta_sym_mod(ar, q, v->shape[k]);
            acc *= v->shape[k];
        }
        s_view_expr(v, ar, cur, &p, &ok);
    }
    if (p && ok && ta_sym_max(ok) == 0) p = ta_sym_const(ar, 0);
    *pos = p;
    *valid = ok;
    return p && ok ? 0 : -1;
}

/* Compares only the dims in use, so stale entries past ndim never matter. */
bool ta_vstack_equal(const ta_vstack_t *a, const ta_vstack_t *b) {
    if (a->nviews != b->nviews) return false;
    for (int j = 0; j < a->nviews; j++) {
        const ta_view_t *x = &a->views[j], *y = &b->views[j];
        size_t n = (size_t)x->ndim;
        if (x->ndim != y->ndim || x->offset != y->offset || x->has_mask != y->has_mask ||
            x->contiguous != y->contiguous || memcmp(x->shape, y->shape, n * sizeof *x->shape) != 0 ||
            memcmp(x->strides, y->strides, n * sizeof *x->strides) != 0 ||
            (x->has_mask && memcmp(x->mask, y->mask, n * sizeof *x->mask) != 0))
            return false;
    }
    return true;
}

static uint64_t s_mix(uint64_t h, int64_t v) { return (h ^ (uint64_t)v) * 0x100000001b3ull; }

/* FNV-1a over the same fields ta_vstack_equal compares. */
uint64_t ta_vstack_hash(const ta_vstack_t *st) {
    uint64_t h = s_mix(0xcbf29ce484222325ull, st->nviews);
    for (int j = 0; j < st->nviews; j++) {
        const ta_view_t *v = &st->views[j];
        h = s_mix(s_mix(s_mix(h, v->ndim), v->offset), v->has_mask);
        for (int k = 0; k < v->ndim; k++) {
            h = s_mix(s_mix(h, v->shape[k]), v->strides[k]);
            if (v->has_mask) h = s_mix(s_mix(h, v->mask[k][0]), v->mask[k][1]);
        }
    }
    return h;
}
