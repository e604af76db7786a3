/* client_multi.c - sharded tensors: one tensor per device and an axis, every primitive op applied shard by shard (the reference's MultiLazyBuffer). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client_core.h"
#include "device.h"
#include "mem.h"

/*
 * A sharded tensor is an ordinary tensor object (its shape is the whole
 * shape) with a multi part: the devices, the axis it is split along (-1:
 * replicated, every device holding all of it) and one part per device, a
 * tensor of its own on that device.  Along the axis, part i holds
 * ceil(n / devices) elements starting at i times that, the trailing parts
 * short or empty (the reference's to_sharded).
 *
 * Every op of the API reaches the graph through tc_emit, which hands an op
 * with a sharded source to tc_multi_emit: the op is recorded once per
 * device on the parts there, and the result is sharded too.  Elementwise
 * ops keep the axis (replicated sources are cut to each part's bounds);
 * a reduce over the axis reduces each part, then adds (or maxes) the
 * partial results of every device on each device in device order, so each
 * holds the whole result, bit for bit the same on every device and in
 * every run; movement ops follow the reference's rules for the axis.
 */
struct ti_multi {
    int n;              /* devices */
    int axis;           /* -1: replicated */
    int64_t *size;      /* each part's extent along the axis */
    ti_tensor_t **part; /* the parts */
    int *dev;           /* their devices' indices in the context's list */
    int *real;          /* the part holds data (after a shrink to one part's bounds only that one does: the others are zeros) */
    char *name;         /* "CPU,CPU:1": what tact_device says */
    /* (the arrays follow, in one allocation) */
};

/* A multi part over the n devices dev (their indices), split along axis,
 * every part real, no parts yet: one allocation. */
static ti_multi_t *s_multi_alloc(ti_ctx_t *ctx, int n, const int *dev, int axis) {
    const ta_pipeline_t *w = tc_wiring(ctx);
    size_t name_len = 1;
    for (int i = 0; i < n; i++) name_len += strlen(ta_pipeline_uri(w, dev[i])) + 1;
    size_t un = (size_t)(n ? n : 1);
    ti_multi_t *m = ta_calloc(1, sizeof *m + un * (sizeof *m->size + sizeof *m->part + sizeof *m->dev + sizeof *m->real) + name_len);
    if (!m) return NULL;
    m->size = (int64_t *)(m + 1);
    m->part = (ti_tensor_t **)(m->size + un);
    m->dev = (int *)(m->part + un);
    m->real = m->dev + un;
    m->name = (char *)(m->real + un);
    m->n = n;
    m->axis = axis;
    memcpy(m->dev, dev, sizeof *dev * (size_t)n);
    for (int i = 0, used = 0; i < n; i++) {
        m->real[i] = 1;
        used += snprintf(m->name + used, name_len - (size_t)used, "%s%s", i ? "," : "", ta_pipeline_uri(w, dev[i]));
    }
    return m;
}

/* Where part i starts along the axis: in the tensor (real parts only),
 * or among all the parts (all). */
static int64_t s_start_of(const ti_multi_t *m, int i, int all) {
    int64_t at = 0;
    for (int j = 0; j < i; j++) at += all || m->real[j] ? m->size[j] : 0;
    return at;
}

static int64_t s_start(const ti_multi_t *m, int i) { return s_start_of(m, i, 0); }

static int s_nreal(const ti_multi_t *m) {
    int n = 0;
    for (int i = 0; i < m->n; i++) n += m->real[i];
    return n;
}

static int s_first_real(const ti_multi_t *m) {
    for (int i = 0; i < m->n; i++)
        if (m->real[i]) return i;
    return 0;
}

static ti_multi_t *s_multi_new(ti_ctx_t *ctx, const ti_multi_t *like, int axis) { return s_multi_alloc(ctx, like->n, like->dev, axis); }

/* The bytes of n elements of x (a multi part's array). */
#define S_BYTES(x, n) (sizeof *(x) * (size_t)(n))

void tc_multi_free(ti_tensor_t *t) {
    ta_free(t->multi);
    t->multi = NULL;
}

const char *tc_multi_name(const ti_tensor_t *t) { return t->multi->name; }

int ti_shard_axis(const ti_tensor_t *t) { return !t || !t->multi ? -1 : t->multi->axis < 0 ? TACT_REPLICATE : t->multi->axis; }

ti_tensor_t *tc_multi_part(const ti_tensor_t *t, int i) { return i < t->multi->n ? t->multi->part[i] : NULL; }

int tc_multi_real(const ti_tensor_t *t, int i) { return i < t->multi->n && t->multi->real[i]; }

ti_tensor_t *tc_multi_first(const ti_tensor_t *t) { return t->multi->part[s_first_real(t->multi)]; }

int tc_multi_split(const ti_tensor_t *t) { return t->multi->axis >= 0; }

int tc_multi_alike(const ti_tensor_t *a, const ti_tensor_t *b) {
    const ti_multi_t *x = a->multi, *y = b->multi;
    return x && y && x->n == y->n && x->axis == y->axis && memcmp(x->dev, y->dev, S_BYTES(x->dev, x->n)) == 0 &&
           (x->axis < 0 || memcmp(x->size, y->size, S_BYTES(x->size, x->n)) == 0) && memcmp(x->real, y->real, S_BYTES(x->real, x->n)) == 0;
}

void tc_multi_keep(ti_tensor_t *t) {
    for (int i = 0; i < t->multi->n; i++) t->multi->part[i]->kept = 1;
}

/* The slice of x (the whole tensor's shape) that part i of a tensor split
 * like m holds. */
static ti_tensor_t *s_slice(ti_tensor_t *x, const ti_multi_t *m, int axis, int i) {
    int64_t r[TA_MAX_DIMS][2];
    for (int k = 0; k < x->shape.ndim; k++) r[k][0] = 0, r[k][1] = x->shape.d[k];
    r[axis][0] = s_start(m, i);
    r[axis][1] = r[axis][0] + m->size[i];
    return ti_shrink(x, r);
}

/* What part i of a tensor split as m holds of x (see tc_multi_slice). */
static ti_tensor_t *s_part_of(ti_tensor_t *x, const ti_multi_t *m, int i) {
    if (x->multi) return x->multi->axis == m->axis || m->axis < 0 ? x->multi->part[i] : s_slice(x->multi->part[i], m, m->axis, i);
    return m->axis >= 0 ? s_slice(x, m, m->axis, i) : x;
}

ti_tensor_t *tc_multi_slice(ti_tensor_t *x, const ti_tensor_t *like, int i) { return s_part_of(x, like->multi, i); }

/* Splits m's extent n along its axis over its devices as the reference does. */
static void s_split(ti_multi_t *m, int64_t n) {
    int64_t per = (n + m->n - 1) / m->n;
    for (int i = 0; i < m->n; i++) {
        int64_t lo = per * i < n ? per * i : n, hi = per * (i + 1) < n ? per * (i + 1) : n;
        m->size[i] = hi - lo;
    }
}

/* x (one tensor) split as m is (along its axis, with its parts' sizes; or
 * copied whole to each of its devices).  Every part is a tensor with a
 * buffer of its own (never x itself, nor a view of it), so it can be
 * assigned to. */
static ti_tensor_t *s_split_like(ti_tensor_t *x, const ti_multi_t *m) {
    if (x->status) return x;
    ti_multi_t *out = s_multi_new(x->ctx, m, m->axis);
    if (!out) return tc_error(x->ctx, TACT_ENOMEM, "out of memory");
    memcpy(out->size, m->size, S_BYTES(out->size, m->n));
    for (int i = 0; i < m->n; i++) {
        ti_tensor_t *part = tc_to_index(m->axis >= 0 ? s_slice(x, m, m->axis, i) : x, m->dev[i]);
        if (!part->status && (part == x || part->view)) part = ti_contiguous(part);
        if (part->status) {
            ta_free(out);
            return part;
        }
        out->part[i] = part;
    }
    ti_tensor_t *t = tc_new(x->ctx, x->dtype, &x->shape);
    if (t->status) {
        ta_free(out);
        return t;
    }
    t->requires_grad = x->requires_grad;
    t->multi = out;
    return t;
}

ti_tensor_t *ti_shard(ti_tensor_t *x, const char *devices, int axis) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    ti_ctx_t *ctx = x->ctx;
    if (x->multi) return tc_error(ctx, TACT_EINVAL, "shard: the tensor is sharded already (gather it with tact_to first)");
    if (!devices) return tc_error(ctx, TACT_EINVAL, "shard: devices is NULL");
    if (axis != TACT_REPLICATE && (axis < -x->shape.ndim || axis >= x->shape.ndim))
        return tc_error(ctx, TACT_EINVAL, "shard: axis %d of a tensor of %d dims", axis, x->shape.ndim);
    if (axis != TACT_REPLICATE && axis < 0) axis += x->shape.ndim;
    char **names;
    ta_error_t err;
    int count = ta_device_split(devices, strlen(devices), &names, &err);
    if (count < 0) return tc_error(ctx, err.code, "shard: %s", err.text);
    int *dev = ta_malloc(sizeof *dev * (size_t)count);
    ti_tensor_t *bad = dev ? NULL : tc_error(ctx, TACT_ENOMEM, "shard: out of memory");
    for (int k = 0; !bad && k < count; k++) { /* the names, each one of the context's, each once */
        dev[k] = tc_device_index(ctx, names[k], &err);
        if (dev[k] < 0) bad = tc_error(ctx, err.code, "shard: %s", err.text);
        for (int i = 0; !bad && i < k; i++)
            if (dev[i] == dev[k]) bad = tc_error(ctx, TACT_EINVAL, "shard: %s is listed twice", names[k]);
    }
    ti_multi_t *proto = bad ? NULL : s_multi_alloc(ctx, count, dev, axis == TACT_REPLICATE ? -1 : axis);
    if (!bad && !proto) bad = tc_error(ctx, TACT_ENOMEM, "shard: out of memory");
    ta_free(names);
    ta_free(dev);
    if (bad) return bad;
    if (proto->axis >= 0) s_split(proto, x->shape.d[proto->axis]);
    ti_tensor_t *t = s_split_like(x, proto);
    ta_free(proto);
    return t;
}

ti_tensor_t *tc_place_like(ti_tensor_t *v, ti_tensor_t *like) {
    if (v->status || like->status) return v->status ? v : like;
    if (v->multi && like->multi && tc_multi_alike(v, like)) return v;
    if (like->multi) {
        if (v->multi) v = tc_gather(v, tc_multi_first(v)->device);
        return ti_shard(v, like->multi->name, like->multi->axis < 0 ? TACT_REPLICATE : like->multi->axis);
    }
    if (like->device < 0) return v->multi ? tc_gather(v, 0) : v;
    return tc_to_index(v, like->device);
}

ti_tensor_t *tc_from_data_like(ti_tensor_t *like, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    ti_ctx_t *ctx = like->ctx;
    if (!like->multi) return tc_from_data_at(ctx, tc_home(like), dtype, ndim, shape, data);
    ti_multi_t *m = s_multi_new(ctx, like->multi, -1);
    if (!m) return tc_error(ctx, TACT_ENOMEM, "out of memory");
    ti_tensor_t *t = NULL;
    for (int i = 0; i < m->n; i++) {
        m->part[i] = tc_from_data_at(ctx, m->dev[i], dtype, ndim, shape, data);
        if (m->part[i]->status) t = m->part[i];
    }
    if (!t) t = tc_new(ctx, dtype, &m->part[0]->shape);
    if (t->status) {
        ta_free(m);
        return t;
    }
    t->multi = m;
    return t;
}

ti_tensor_t *ti_place_like(ti_tensor_t *v, ti_tensor_t *like) {
    ti_tensor_t *e = tc_any_error(2, (ti_tensor_t *[]){v, like});
    return e ? e : tc_place_like(v, like);
}

ti_tensor_t *ti_from_data_like(ti_tensor_t *like, tact_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (!like || like->status) return like ? like : ti_null_arg();
    ta_shape_t s;
    ti_tensor_t *bad = tc_check_new(like->ctx, "from_data", dtype, ndim, shape, &s);
    return bad ? bad : tc_from_data_like(like, dtype, ndim, shape, data);
}

/* x (sharded) as one tensor on device at: its parts copied there and
 * joined along the axis (a replicated one: the part there, or the first). */
ti_tensor_t *tc_gather(ti_tensor_t *x, int at) {
    const ti_multi_t *m = x->multi;
    if (m->axis < 0) { /* replicated: the (real) part there, or the first */
        for (int i = 0; i < m->n; i++)
            if (m->dev[i] == at && m->real[i]) return m->part[i];
        return tc_to_index(m->part[s_first_real(m)], at);
    }
    ti_tensor_t **parts = ta_malloc(sizeof *parts * (size_t)m->n);
    if (!parts) return tc_error(x->ctx, TACT_ENOMEM, "out of memory gathering a sharded tensor");
    int n = 0;
    for (int i = 0; i < m->n; i++)
        if (m->real[i] && (m->size[i] || (i == m->n - 1 && !n))) parts[n++] = tc_to_index(m->part[i], at);
    if (!n) parts[n++] = tc_to_index(m->part[s_first_real(m)], at);
    ti_tensor_t *t = n == 1 ? parts[0] : ti_cat(n, parts, m->axis);
    ta_free(parts);
    return t;
}

static ti_tensor_t *s_binary(ti_tensor_t *like, ta_op_t op, ti_tensor_t *a, ti_tensor_t *b) {
    const ti_tensor_t *src[2] = {a, b};
    return tc_emit(tc_new(like->ctx, like->dtype, &a->shape), op, 2, src, 0, NULL);
}

/* The partial results of a reduce over the axis, combined on every device
 * by op (ADD or MAX) into a replicated result, as the reference does it:
 * naively (every device adds all the partials in device order) for two
 * devices or up to 256k elements, else in a ring (each partial cut into
 * one chunk per device; n - 1 steps pass each chunk on to the next device,
 * which adds its own; n - 1 more hand the finished chunks round).  Either
 * way the order of the additions is fixed, whatever the timing. */
static ti_tensor_t *s_all_reduce(ti_tensor_t *out, ta_op_t op, ti_tensor_t *const *partial, ti_multi_t *m) {
    int n = m->n;
    int64_t dim = ta_shape_numel(&out->shape);
    if (n <= 2 || dim <= 256000) {
        for (int i = 0; i < n; i++) {
            ti_tensor_t *acc = NULL;
            for (int j = 0; j < n; j++) {
                ti_tensor_t *x = tc_to_index(partial[j], m->dev[i]);
                acc = acc ? s_binary(out, op, acc, x) : x;
                if (acc->status) return acc;
            }
            m->part[i] = acc;
        }
        return NULL;
    }
    /* Chunks of a multiple of the largest factor (32 .. 1) of the size. */
    int64_t factor = 1;
    for (int64_t f = 32; f > 1 && factor == 1; f /= 2)
        if (dim % f == 0) factor = f;
    int64_t base = dim / factor / n, left = dim / factor % n;
    /* The chunks' bounds, then [device][chunk], in one allocation. */
    int64_t *lo = ta_malloc(sizeof *lo * 2 * (size_t)n + sizeof(ti_tensor_t *) * (size_t)n * (size_t)n), *hi = lo ? lo + n : NULL;
    if (!lo) return tc_error(out->ctx, TACT_ENOMEM, "out of memory for an all-reduce");
    ti_tensor_t **chunk = (ti_tensor_t **)(lo + 2 * n), *bad = NULL;
#define S_CHUNK(d, c) chunk[(size_t)(d) * (size_t)n + (size_t)(c)]
    int nc = 0;
    int64_t at = 0;
    for (int c = 0; c < n; c++) {
        int64_t size = (c < left ? base + 1 : base) * factor;
        if (size > 0) lo[nc] = at, hi[nc] = at + size, nc++;
        at += size;
    }
    for (int d = 0; !bad && d < n; d++) {
        ti_tensor_t *flat = ti_reshape(partial[d], 1, &dim);
        for (int c = 0; !bad && c < nc; c++) {
            S_CHUNK(d, c) = ti_shrink(flat, (const int64_t[][2]){{lo[c], hi[c]}});
            if (S_CHUNK(d, c)->status) bad = S_CHUNK(d, c);
        }
    }
    for (int step = 0; !bad && step < n - 1; step++) /* reduce-scatter */
        for (int c = 0; !bad && c < nc; c++) {
            int src = (c + step) % n, dst = (c + step + 1) % n;
            S_CHUNK(dst, c) = s_binary(out, op, S_CHUNK(dst, c), tc_to_index(S_CHUNK(src, c), m->dev[dst]));
            if (S_CHUNK(dst, c)->status) bad = S_CHUNK(dst, c);
        }
    for (int step = 0; !bad && step < n - 1; step++) /* all-gather */
        for (int c = 0; !bad && c < nc; c++) {
            int src = (c + step + n - 1) % n, dst = (c + step) % n;
            S_CHUNK(dst, c) = tc_to_index(S_CHUNK(src, c), m->dev[dst]);
            if (S_CHUNK(dst, c)->status) bad = S_CHUNK(dst, c);
        }
    for (int d = 0; !bad && d < n; d++) {
        ti_tensor_t *whole = nc == 1 ? S_CHUNK(d, 0) : ti_cat(nc, &S_CHUNK(d, 0), 0);
        m->part[d] = ti_reshape(whole, out->shape.ndim, out->shape.d);
        if (m->part[d]->status) bad = m->part[d];
    }
#undef S_CHUNK
    ta_free(lo);
    return bad;
}

static ti_tensor_t *s_refuse(ti_tensor_t *out, ta_op_t op, const char *why) {
    return tc_error(out->ctx, TACT_EINVAL, "%s of a sharded tensor: %s", ta_op_name(op), why);
}

/* ------------------------------------------------------------ gradients */

void tc_multi_set_requires_grad(ti_tensor_t *t, int requires) {
    for (int i = 0; i < t->multi->n; i++) {
        ti_tensor_t *p = t->multi->part[i];
        p->requires_grad = requires;
        p->wants_grad = requires == 1 && t->multi->real[i];
    }
    t->requires_grad = requires; /* the sharded object itself is no node: the parts get the gradients */
}

ti_tensor_t *tc_multi_grad(ti_tensor_t *t) {
    const ti_multi_t *m = t->multi;
    ti_multi_t *gm = s_multi_new(t->ctx, m, m->axis);
    ti_tensor_t **g = ta_malloc(sizeof *g * (size_t)m->n); /* the parts' gradients */
    if (!gm || !g) {
        ta_free(gm), ta_free(g);
        return tc_error(t->ctx, TACT_ENOMEM, "grad: out of memory");
    }
    for (int i = 0; i < m->n; i++) {
        if (!m->real[i]) {
            g[i] = ti_zeros(t->ctx, t->dtype, m->part[i]->shape.ndim, m->part[i]->shape.d);
            continue;
        }
        if (!m->part[i]->grad) {
            ta_free(gm), ta_free(g);
            return tc_fail(t, TACT_EINVAL, "grad: the sharded tensor has no gradient (tact_set_requires_grad(t, 1) before the forward, then tact_backward)");
        }
        /* A view of its own: the part's gradient may be cleared later. */
        g[i] = tc_movement(m->part[i]->grad, TA_OP_RESHAPE, &m->part[i]->grad->shape, 0, NULL);
        if (g[i]->status) {
            ti_tensor_t *bad = g[i];
            ta_free(gm), ta_free(g);
            return bad;
        }
    }
    memcpy(gm->size, m->size, S_BYTES(gm->size, m->n));
    memcpy(gm->real, m->real, S_BYTES(gm->real, m->n));
    ti_tensor_t *out = tc_new(t->ctx, t->dtype, &t->shape);
    if (out->status) {
        ta_free(gm), ta_free(g);
        return out;
    }
    /* A replicated tensor's copies each saw one device's share of the
     * work: its gradient is their sum, on every device (as the reference's
     * all-reduce of a replicated parameter's gradient). */
    if (m->axis < 0 && s_nreal(m) == m->n) {
        ti_tensor_t *bad = s_all_reduce(out, TA_OP_ADD, g, gm);
        if (bad) {
            ta_free(gm), ta_free(g);
            return bad;
        }
    } else {
        memcpy(gm->part, g, S_BYTES(g, m->n));
    }
    ta_free(g);
    out->multi = gm;
    return out;
}

void tc_multi_grad_clear(ti_tensor_t *t) {
    for (int i = 0; i < t->multi->n; i++) tc_free_grad(t->multi->part[i]);
}

/* A shrink along the split axis to exactly one part's bounds (the others'
 * parts become zeros, that one alone real), or the pad that puts such a
 * tensor back to the whole axis (every part real again): the reference's
 * rules, nothing else along the axis.  Nothing is computed: the parts
 * are views. */
static ti_tensor_t *s_part_bounds(ti_tensor_t *out, ta_op_t op, const ti_tensor_t *src, const int64_t *args) {
    const ti_multi_t *in = src->multi;
    int a = in->axis, idx = -1;
    for (int k = 0; k < src->shape.ndim; k++)
        if (k != a && (op == TA_OP_SHRINK ? args[2 * k] || args[2 * k + 1] != src->shape.d[k] : args[2 * k] || args[2 * k + 1]))
            return s_refuse(out, op, "along the split axis and another at once");
    int64_t total = 0;
    for (int i = 0; i < in->n; i++) total += in->size[i];
    for (int i = 0; i < in->n && idx < 0; i++) {
        int64_t lo = s_start_of(in, i, 1), hi = lo + in->size[i];
        if (op == TA_OP_SHRINK && s_nreal(in) == in->n && in->size[i] && args[2 * a] == lo && args[2 * a + 1] == hi) idx = i;
        if (op == TA_OP_PAD && s_nreal(in) == 1 && in->real[i] && args[2 * a] == lo && args[2 * a + 1] == total - hi) idx = i;
    }
    if (idx < 0)
        return s_refuse(out, op,
                        op == TA_OP_SHRINK ? "along the split axis only to exactly one part's bounds" : "along the split axis only back to the whole axis");
    ti_multi_t *m = s_multi_new(out->ctx, in, a);
    if (!m) return tc_error(out->ctx, TACT_ENOMEM, "out of memory");
    memcpy(m->size, in->size, S_BYTES(m->size, in->n));
    for (int i = 0; i < in->n; i++) {
        m->real[i] = op == TA_OP_PAD || i == idx;
        ti_tensor_t *p = in->part[i];
        /* Each a tensor of its own: the part there, as a view, or zeros. */
        p = i == idx ? tc_movement(p, TA_OP_RESHAPE, &p->shape, 0, NULL) : ti_zeros(out->ctx, p->dtype, p->shape.ndim, p->shape.d);
        if (p->status) {
            ta_free(m);
            return p;
        }
        m->part[i] = p;
    }
    out->multi = m;
    out->view = 1;
    return out;
}

/* Per part scratch of an op on sharded tensors (one allocation). */
typedef struct {
    int *real;
    ta_shape_t *shapes;
    int64_t (*pargs)[2 * TA_MAX_DIMS];
    ti_tensor_t **partial;
} s_scratch_t;

static ti_tensor_t *s_multi_emit(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs, const int64_t *args, int grad,
                                 const s_scratch_t *sc);

ti_tensor_t *tc_multi_emit(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs, const int64_t *args, int grad) {
    const ti_multi_t *ref = NULL;
    for (int j = 0; j < nsrc && !ref; j++) ref = srcs[j]->multi;
    size_t n = (size_t)ref->n;
    s_scratch_t sc;
    void *block = ta_calloc(n, sizeof *sc.pargs + sizeof *sc.shapes + sizeof *sc.partial + sizeof *sc.real);
    if (!block) return tc_error(out->ctx, TACT_ENOMEM, "%s: out of memory", ta_op_name(op));
    sc.pargs = block;
    sc.shapes = (ta_shape_t *)(sc.pargs + n);
    sc.partial = (ti_tensor_t **)(sc.shapes + n);
    sc.real = (int *)(sc.partial + n);
    ti_tensor_t *t = s_multi_emit(out, op, nsrc, srcs, nargs, args, grad, &sc);
    ta_free(block);
    return t;
}

static ti_tensor_t *s_multi_emit(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs, const int64_t *args, int grad,
                                 const s_scratch_t *sc) {
    ti_ctx_t *ctx = out->ctx;
    const ti_multi_t *ref = NULL;
    for (int j = 0; j < nsrc && !ref; j++) ref = srcs[j]->multi;
    /* Sources: sharded over the same devices, or constants (no device),
     * which every device computes itself.  The split is the last split
     * source's (the reference's rule); a source split another way is
     * gathered and split that way (as the reference does). */
    int axis = -1;
    for (int j = 0; j < nsrc; j++) {
        const ti_multi_t *s = srcs[j]->multi;
        if (!s && srcs[j]->device >= 0)
            return tc_error(ctx, TACT_EDEVICE, "%s: a sharded tensor and one on %s (shard it too, or gather the other with tact_to)", ta_op_name(op),
                            ti_device(srcs[j]));
        if (s && (s->n != ref->n || memcmp(s->dev, ref->dev, S_BYTES(s->dev, s->n)) != 0))
            return tc_error(ctx, TACT_EDEVICE, "%s: sources sharded over different devices (%s and %s)", ta_op_name(op), ref->name, s->name);
        if (s && s->axis >= 0) axis = s->axis, ref = s;
    }
    /* After a shrink to one part's bounds only that part is real: a part
     * is real where every sharded source's is (the others are zeros). */
    int *real = sc->real, partly = 0;
    for (int i = 0; i < ref->n; i++) real[i] = 1;
    for (int j = 0; j < nsrc; j++)
        for (int i = 0; srcs[j]->multi && i < ref->n; i++) real[i] &= srcs[j]->multi->real[i], partly |= !srcs[j]->multi->real[i];
    const ti_tensor_t *resplit[3];
    for (int j = 0; j < nsrc; j++) {
        resplit[j] = srcs[j];
        const ti_multi_t *s = srcs[j]->multi;
        if (!s || s->axis < 0 || s == ref || (s->axis == axis && memcmp(s->size, ref->size, S_BYTES(s->size, s->n)) == 0)) continue;
        if (partly) return s_refuse(out, op, "its sources are split differently and partly real (gather them first)");
        ti_tensor_t *again = s_split_like(tc_gather((ti_tensor_t *)srcs[j], s->dev[0]), ref);
        if (again->status) return again;
        resplit[j] = again;
    }
    srcs = resplit;
    ta_op_class_t cls = ta_op_class(op);
    int out_axis = axis;
    ta_shape_t *shapes = sc->shapes;
    int64_t(*pargs)[2 * TA_MAX_DIMS] = sc->pargs;
    for (int i = 0; i < ref->n; i++) {
        shapes[i] = out->shape;
        if (nargs) memcpy(pargs[i], args, sizeof *args * (size_t)nargs);
    }
    int reduce_axis = 0;
    if (cls == TA_OPC_REDUCE) {
        reduce_axis = axis >= 0 && (args[0] >> axis & 1);
        for (int i = 0; i < ref->n && axis >= 0; i++) shapes[i].d[axis] = reduce_axis ? 1 : ref->size[i];
        out_axis = reduce_axis ? -1 : axis;
    } else if (cls == TA_OPC_MOVEMENT && axis >= 0 && (op == TA_OP_SHRINK || op == TA_OP_PAD) &&
               (op == TA_OP_SHRINK ? args[2 * axis] || args[2 * axis + 1] != srcs[0]->shape.d[axis] : args[2 * axis] || args[2 * axis + 1])) {
        return s_part_bounds(out, op, srcs[0], args);
    } else if (cls == TA_OPC_MOVEMENT && axis >= 0) {
        const ta_shape_t *is = &srcs[0]->shape;
        switch (op) {
        case TA_OP_RESHAPE: {
            /* The new axis: the last whose dims before it hold as many
             * elements as the old axis's did; each part then holds whole
             * rows of the dims after it (the reference's rule). */
            int64_t before = 1, acc = 1, after = 1;
            for (int k = 0; k < axis; k++) before *= is->d[k];
            out_axis = -1;
            for (int k = 0; k < out->shape.ndim; k++) {
                if (acc == before) out_axis = k;
                acc *= out->shape.d[k];
            }
            if (out_axis < 0) return s_refuse(out, op, "the split axis has no place in the new shape");
            for (int k = out_axis + 1; k < out->shape.ndim; k++) after *= out->shape.d[k];
            for (int i = 0; i < ref->n; i++) {
                int64_t rest = ref->size[i];
                for (int k = axis + 1; k < is->ndim; k++) rest *= is->d[k];
                if (after == 0 || rest % after) return s_refuse(out, op, "it would move elements between devices");
                shapes[i].d[out_axis] = rest / after;
            }
            break;
        }
        case TA_OP_PERMUTE:
            for (int k = 0; k < out->shape.ndim; k++)
                if (args[k] == axis) out_axis = k;
            for (int i = 0; i < ref->n; i++) shapes[i].d[out_axis] = ref->size[i];
            break;
        case TA_OP_EXPAND:
        case TA_OP_PAD:
        case TA_OP_SHRINK:
        case TA_OP_STRIDE:
            if ((op == TA_OP_EXPAND && out->shape.d[axis] != is->d[axis]) || (op == TA_OP_PAD && (args[2 * axis] || args[2 * axis + 1])) ||
                (op == TA_OP_SHRINK && (args[2 * axis] || args[2 * axis + 1] != is->d[axis])) || (op == TA_OP_STRIDE && args[axis] != 1))
                return s_refuse(out, op, "not along the axis it is split on");
            for (int i = 0; i < ref->n; i++) {
                shapes[i].d[axis] = ref->size[i];
                if (op == TA_OP_SHRINK) pargs[i][2 * axis + 1] = ref->size[i];
            }
            break;
        default: break;
        }
    } else if (cls == TA_OPC_UNARY || cls == TA_OPC_BINARY || cls == TA_OPC_TERNARY || op == TA_OP_CONTIGUOUS) {
        for (int i = 0; i < ref->n && axis >= 0; i++) shapes[i].d[axis] = ref->size[i];
    } else if (cls != TA_OPC_MOVEMENT) {
        return s_refuse(out, op, "not supported (gather it with tact_to first)");
    }
    ti_multi_t *m = s_multi_new(ctx, ref, out_axis);
    if (!m) return tc_error(ctx, TACT_ENOMEM, "%s: out of memory", ta_op_name(op));
    if (out_axis >= 0)
        for (int i = 0; i < m->n; i++) m->size[i] = shapes[i].d[out_axis];
    memcpy(m->real, real, S_BYTES(real, m->n));
    ti_tensor_t **partial = sc->partial;
    for (int i = 0; i < m->n; i++) {
        if (!real[i]) { /* zeros, wherever they are wanted */
            ti_tensor_t *z = ti_zeros(ctx, out->dtype, shapes[i].ndim, shapes[i].d);
            if (z->status) {
                ta_free(m);
                return z;
            }
            partial[i] = m->part[i] = z;
            continue;
        }
        const ti_tensor_t *ps[3];
        for (int j = 0; j < nsrc; j++) {
            ti_tensor_t *s = (ti_tensor_t *)srcs[j];
            /* A replicated source or a constant that meets a split one
             * gives each part its slice (a view). */
            ps[j] = s_part_of(s, ref, i);
            if (ps[j]->status) {
                ta_free(m);
                return (ti_tensor_t *)ps[j];
            }
        }
        ti_tensor_t *p = tc_new(ctx, out->dtype, &shapes[i]);
        if (!p->status) {
            p->requires_grad = out->requires_grad;
            p->device = m->dev[i];
            p = tc_emit_flagged(p, op, nsrc, ps, nargs, nargs ? pargs[i] : NULL, grad);
        }
        if (p->status) {
            ta_free(m);
            return p;
        }
        if (cls == TA_OPC_MOVEMENT) p->view = 1;
        partial[i] = m->part[i] = p;
    }
    if (reduce_axis && !partly) { /* (partly real: the real part's is the result, kept where it is) */
        ti_tensor_t *bad = s_all_reduce(out, op == TA_OP_SUM ? TA_OP_ADD : TA_OP_MAX, partial, m);
        if (bad) {
            ta_free(m);
            return bad;
        }
    }
    out->multi = m;
    if (cls == TA_OPC_MOVEMENT) out->view = 1;
    return out;
}
