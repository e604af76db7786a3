/* test_view.c - view stacks against a brute-force element map, and the reshape/merge behaviours pinned. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "testutil.h"
#include "view.h"

enum { S_SEQS = 1500, S_OPS = 16, S_MAX_NUMEL = 360, S_MAX_NDIM = 6, S_LOG = 4096 };

/* The model a stack must agree with: the tensor's shape and, for every
 * element in row-major order, its buffer position or -1 where masked. */
typedef struct {
    int ndim;
    int64_t shape[TA_MAX_DIMS];
    int64_t numel, base; /* base: elements in the buffer */
    int64_t map[S_MAX_NUMEL];
} s_model_t;

typedef enum { S_RESHAPE, S_PERMUTE, S_EXPAND, S_PAD, S_SHRINK, S_STRIDE, S_KINDS } s_kind_t;

typedef struct {
    s_kind_t kind;
    int ndim;
    int64_t shape[TA_MAX_DIMS];
    int order[TA_MAX_DIMS];
    int64_t r[TA_MAX_DIMS][2];
    int64_t mul[TA_MAX_DIMS];
} s_op_t;

static int64_t s_prod(int n, const int64_t *s) {
    int64_t p = 1;
    for (int k = 0; k < n; k++) p *= s[k];
    return p;
}

static int64_t s_rnd(uint64_t *rng, int64_t n) { return (int64_t)(tu_rand(rng) % (uint64_t)n); }

static void s_unflatten(int n, const int64_t *shape, int64_t flat, int64_t *idx) {
    for (int k = n - 1; k >= 0; k--) idx[k] = flat % shape[k], flat /= shape[k];
}

static void s_model_init(s_model_t *m, int ndim, const int64_t *shape) {
    m->ndim = ndim;
    memcpy(m->shape, shape, (size_t)ndim * sizeof *shape);
    m->numel = m->base = s_prod(ndim, shape);
    for (int64_t i = 0; i < m->numel; i++) m->map[i] = i;
}

/* The shape op produces from m's shape. */
static void s_op_shape(const s_model_t *m, const s_op_t *op, int *ndim, int64_t *shape) {
    *ndim = op->kind == S_RESHAPE ? op->ndim : m->ndim;
    for (int k = 0; k < *ndim; k++) {
        int64_t s = m->shape[k], am = op->mul[k] < 0 ? -op->mul[k] : op->mul[k];
        switch (op->kind) {
        case S_RESHAPE:
        case S_EXPAND: shape[k] = op->shape[k]; break;
        case S_PERMUTE: shape[k] = m->shape[op->order[k]]; break;
        case S_PAD: shape[k] = s + op->r[k][0] + op->r[k][1]; break;
        case S_SHRINK: shape[k] = op->r[k][1] - op->r[k][0]; break;
        default: shape[k] = (s + am - 1) / am; break;
        }
    }
}

/* Applies op to the model by moving every element explicitly. */
static void s_model_apply(s_model_t *m, const s_op_t *op) {
    int ndim;
    int64_t shape[TA_MAX_DIMS], idx[TA_MAX_DIMS], old[TA_MAX_DIMS];
    static int64_t map[S_MAX_NUMEL];
    s_op_shape(m, op, &ndim, shape);
    int64_t numel = s_prod(ndim, shape);
    cr_assert(numel <= S_MAX_NUMEL, "test generator made numel %lld", (long long)numel);
    for (int64_t i = 0; i < numel && op->kind != S_RESHAPE; i++) {
        s_unflatten(ndim, shape, i, idx);
        bool in = true;
        for (int k = 0; k < ndim; k++) {
            int64_t s = m->shape[k], mu = op->mul[k];
            switch (op->kind) {
            case S_PERMUTE: old[op->order[k]] = idx[k]; break;
            case S_EXPAND: old[k] = s == 1 ? 0 : idx[k]; break;
            case S_PAD:
                old[k] = idx[k] - op->r[k][0];
                in = in && old[k] >= 0 && old[k] < s;
                break;
            case S_SHRINK: old[k] = idx[k] + op->r[k][0]; break;
            default: old[k] = mu > 0 ? idx[k] * mu : s - 1 + idx[k] * mu; break;
            }
        }
        int64_t flat = 0;
        for (int k = 0; k < m->ndim; k++) flat = flat * m->shape[k] + old[k];
        map[i] = in ? m->map[flat] : -1;
    }
    if (op->kind != S_RESHAPE) memcpy(m->map, map, (size_t)numel * sizeof *map);
    m->ndim = ndim, m->numel = numel;
    memcpy(m->shape, shape, sizeof shape);
}

static int s_op_stack(ta_vstack_t *st, const s_op_t *op) {
    switch (op->kind) {
    case S_RESHAPE: return ta_vstack_reshape(st, op->ndim, op->shape);
    case S_PERMUTE: return ta_vstack_permute(st, op->order);
    case S_EXPAND: return ta_vstack_expand(st, op->shape);
    case S_PAD: return ta_vstack_pad(st, (const int64_t(*)[2])op->r);
    case S_SHRINK: return ta_vstack_shrink(st, (const int64_t(*)[2])op->r);
    default: return ta_vstack_stride(st, op->mul);
    }
}

/* Appends a readable form of op to the log printed on failure. */
static void s_op_log(char *log, const s_model_t *m, const s_op_t *op) {
    static const char *names[] = {"reshape", "permute", "expand", "pad", "shrink", "stride"};
    size_t n = strlen(log);
    int nd = op->kind == S_RESHAPE ? op->ndim : m->ndim;
    n += (size_t)snprintf(log + n, S_LOG - n, " %s(", names[op->kind]);
    for (int k = 0; k < nd && n < S_LOG - 40; k++) {
        const char *sep = k ? "," : "";
        switch (op->kind) {
        case S_RESHAPE:
        case S_EXPAND: n += (size_t)snprintf(log + n, S_LOG - n, "%s%lld", sep, (long long)op->shape[k]); break;
        case S_PERMUTE: n += (size_t)snprintf(log + n, S_LOG - n, "%s%d", sep, op->order[k]); break;
        case S_STRIDE: n += (size_t)snprintf(log + n, S_LOG - n, "%s%lld", sep, (long long)op->mul[k]); break;
        default:
            n += (size_t)snprintf(log + n, S_LOG - n, "%s%lld:%lld", sep, (long long)op->r[k][0],
                                  (long long)op->r[k][1]);
        }
    }
    if (n < S_LOG - 2) strcat(log, ")");
}

/*
 * A random factorization of m's numel: split, merge, add or drop 1-dims, or
 * start over.  Returns true when the reshape must not push a view: the last
 * view is contiguous, or it is unmasked and the reshape only splits dims,
 * adds or drops 1-dims, or merges two dims that are one run in memory.
 */
static bool s_gen_reshape(uint64_t *rng, const s_model_t *m, const ta_view_t *last, s_op_t *op) {
    int n = m->ndim;
    int64_t *s = op->shape;
    bool stays = !last->has_mask;
    memcpy(s, m->shape, (size_t)n * sizeof *s);
    switch (s_rnd(rng, 5)) {
    case 0: /* split a dim by one of its divisors */
        if (n > 0 && n < S_MAX_NDIM) {
            int k = (int)s_rnd(rng, n);
            int64_t f = 1 + s_rnd(rng, s[k]);
            while (s[k] % f) f--;
            memmove(s + k + 1, s + k, (size_t)(n - k) * sizeof *s);
            s[k] = f, s[k + 1] /= f, n++;
            break;
        }
        /* fall through */
    case 1: /* merge two adjacent dims */
        if (n >= 2) {
            int k = (int)s_rnd(rng, n - 1);
            stays = stays && (s[k] == 1 || s[k + 1] == 1 || last->strides[k] == last->strides[k + 1] * s[k + 1]);
            s[k] *= s[k + 1];
            memmove(s + k + 1, s + k + 2, (size_t)(n - k - 2) * sizeof *s);
            n--;
        }
        break;
    case 2: /* add a 1-dim */
        if (n < S_MAX_NDIM) {
            int k = (int)s_rnd(rng, n + 1);
            memmove(s + k + 1, s + k, (size_t)(n - k) * sizeof *s);
            s[k] = 1, n++;
        }
        break;
    case 3: /* drop the 1-dims */ {
        int j = 0;
        for (int k = 0; k < n; k++)
            if (s[k] != 1) s[j++] = s[k];
        n = j;
        break;
    }
    default: { /* prime factors in a random order, grouped at random */
        int64_t p[32], x = m->numel;
        int np = 0;
        for (int64_t d = 2; x > 1; d++)
            while (x % d == 0) p[np++] = d, x /= d;
        for (int i = np - 1; i > 0; i--) {
            int j = (int)s_rnd(rng, i + 1);
            int64_t t = p[i];
            p[i] = p[j], p[j] = t;
        }
        n = 0;
        for (int i = 0; i < np; i++) {
            if (n == 0 || (n < S_MAX_NDIM && s_rnd(rng, 2))) s[n++] = 1;
            s[n - 1] *= p[i];
        }
        if (n < S_MAX_NDIM && s_rnd(rng, 3) == 0) s[n++] = 1;
        stays = false;
    }
    }
    op->ndim = n;
    return stays || last->contiguous;
}

/* A random valid movement op on m that keeps numel within the model's room;
 * returns true for a reshape that must not push a view. */
static bool s_gen(uint64_t *rng, const s_model_t *m, const ta_view_t *last, s_op_t *op) {
    memset(op, 0, sizeof *op);
    op->kind = (s_kind_t)s_rnd(rng, S_KINDS);
    int n = m->ndim;
    switch (op->kind) {
    case S_RESHAPE: return s_gen_reshape(rng, m, last, op);
    case S_PERMUTE:
        for (int k = 0; k < n; k++) op->order[k] = k;
        for (int k = n - 1; k > 0; k--) {
            int j = (int)s_rnd(rng, k + 1), t = op->order[k];
            op->order[k] = op->order[j], op->order[j] = t;
        }
        break;
    case S_EXPAND: {
        int64_t numel = m->numel;
        memcpy(op->shape, m->shape, (size_t)n * sizeof *op->shape);
        for (int k = 0; k < n; k++) {
            int64_t to = s_rnd(rng, 20) == 0 ? 0 : 2 + s_rnd(rng, 3);
            if (m->shape[k] == 1 && numel * to <= S_MAX_NUMEL) op->shape[k] = to, numel *= to;
        }
        break;
    }
    case S_PAD: {
        int64_t numel = m->numel;
        for (int k = 0; k < n; k++) {
            int64_t b = s_rnd(rng, 3), e = s_rnd(rng, 3), s = m->shape[k];
            if (s && numel / s * (s + b + e) <= S_MAX_NUMEL) {
                numel = numel / s * (s + b + e);
                op->r[k][0] = b, op->r[k][1] = e;
            }
        }
        break;
    }
    case S_SHRINK:
        for (int k = 0; k < n; k++) {
            int64_t s = m->shape[k], b = s_rnd(rng, s + 1), e = s_rnd(rng, s + 1);
            if (b > e) {
                int64_t t = b;
                b = e, e = t;
            }
            if (b == e && s_rnd(rng, 30)) b = 0, e = s; /* empty tensors, rarely */
            op->r[k][0] = b, op->r[k][1] = e;
        }
        break;
    default:
        for (int k = 0; k < n; k++) {
            static const int64_t muls[] = {1, 1, 1, -1, -1, 2, -2, 3};
            op->mul[k] = muls[s_rnd(rng, 8)];
        }
    }
    return false;
}

/* Checks every element of the stack against the model. */
static void s_check(const ta_vstack_t *st, const s_model_t *m, uint64_t seed, int seq, const char *log) {
#define S_CTX "seed 0x%llx, sequence %d,%s: "
#define S_ARGS (unsigned long long)seed, seq, log
    cr_assert(st->nviews >= 1 && st->nviews <= TA_MAX_VIEWS, S_CTX "%d views", S_ARGS, st->nviews);
    cr_assert_eq(ta_vstack_ndim(st), m->ndim, S_CTX "ndim", S_ARGS);
    cr_assert(memcmp(ta_vstack_shape(st), m->shape, (size_t)m->ndim * sizeof *m->shape) == 0, S_CTX "shape", S_ARGS);
    cr_assert_eq(ta_vstack_numel(st), m->numel, S_CTX "numel", S_ARGS);

    ta_sym_arena_t *ar = ta_sym_arena_new();
    cr_assert(ar, S_CTX "arena", S_ARGS);
    const ta_sym_t *vars[TA_MAX_DIMS], *pos, *valid;
    char name[8];
    for (int k = 0; k < m->ndim; k++) {
        snprintf(name, sizeof name, "idx%d", k);
        vars[k] = ta_sym_var(ar, k, name, 0, m->shape[k] - 1);
    }
    cr_assert_eq(ta_vstack_expr(st, ar, vars, &pos, &valid), 0, S_CTX "expr", S_ARGS);

    int64_t idx[TA_MAX_DIMS], maxpos = -1, size = ta_vstack_buffer_size(st);
    for (int64_t i = 0; i < m->numel; i++) {
        s_unflatten(m->ndim, m->shape, i, idx);
        int64_t p = -7;
        bool ok = ta_vstack_index(st, idx, &p);
        cr_assert_eq(ok, m->map[i] >= 0, S_CTX "element %lld valid=%d, model %lld", S_ARGS, (long long)i, ok,
                     (long long)m->map[i]);
        int64_t v = ta_sym_eval(valid, idx);
        cr_assert_eq(v != 0, ok, S_CTX "element %lld expr valid=%lld", S_ARGS, (long long)i, (long long)v);
        if (!ok) continue;
        cr_assert_eq(p, m->map[i], S_CTX "element %lld at %lld, model %lld", S_ARGS, (long long)i, (long long)p,
                     (long long)m->map[i]);
        int64_t e = ta_sym_eval(pos, idx);
        cr_assert_eq(e, p, S_CTX "element %lld expr at %lld, index at %lld", S_ARGS, (long long)i, (long long)e,
                     (long long)p);
        maxpos = p > maxpos ? p : maxpos;
    }
    ta_sym_arena_destroy(&ar);
    cr_assert(size > maxpos && size <= m->base, S_CTX "buffer size %lld, max position %lld, buffer %lld", S_ARGS,
              (long long)size, (long long)maxpos, (long long)m->base);
    if (st->nviews == 1) cr_assert_eq(size, maxpos + 1, S_CTX "one view's buffer size is exact", S_ARGS);

    ta_vstack_t copy = *st;
    cr_assert(ta_vstack_equal(st, &copy) && ta_vstack_hash(st) == ta_vstack_hash(&copy), S_CTX "equal", S_ARGS);
#undef S_ARGS
#undef S_CTX
}

Test(graph_view, random_movement_ops_agree_with_a_brute_force_map) {
    uint64_t seed = tu_seed(), rng = seed;
    static s_model_t m;
    static char log[S_LOG];
    for (int seq = 0; seq < S_SEQS; seq++) {
        int64_t shape[TA_MAX_DIMS];
        int ndim = (int)s_rnd(&rng, 5);
        for (int k = 0; k < ndim; k++) shape[k] = 1 + s_rnd(&rng, 5);
        while (s_prod(ndim, shape) > 64) shape[s_rnd(&rng, ndim)] = 1;
        s_model_init(&m, ndim, shape);
        ta_vstack_t st;
        ta_vstack_init(&st, ndim, shape);
        snprintf(log, sizeof log, " init(");
        for (int k = 0; k < ndim; k++) snprintf(log + strlen(log), 16, "%s%lld", k ? "," : "", (long long)shape[k]);
        strcat(log, ")");
        s_check(&st, &m, seed, seq, log);
        for (int i = 0; i < S_OPS && m.numel > 0; i++) {
            s_op_t op;
            bool stays = s_gen(&rng, &m, &st.views[st.nviews - 1], &op);
            s_op_log(log, &m, &op);
            ta_vstack_t before = st;
            if (s_op_stack(&st, &op) != 0) {
                /* Out of views: the stack is unchanged and the caller realizes. */
                cr_assert(st.nviews == TA_MAX_VIEWS && memcmp(&st, &before, sizeof st) == 0,
                          "a refused op changed the stack, seed 0x%llx, sequence %d:%s", (unsigned long long)seed, seq,
                          log);
                strcat(log, " [realized]");
                memcpy(shape, m.shape, sizeof shape);
                s_model_init(&m, m.ndim, shape);
                ta_vstack_init(&st, m.ndim, shape);
                s_model_apply(&m, &op);
                cr_assert_eq(s_op_stack(&st, &op), 0, "after realizing, seed 0x%llx, sequence %d:%s",
                             (unsigned long long)seed, seq, log);
            } else {
                s_model_apply(&m, &op);
                cr_assert(!stays || st.nviews <= before.nviews,
                          "an expressible reshape pushed a view, seed 0x%llx, sequence %d:%s", (unsigned long long)seed,
                          seq, log);
            }
            s_check(&st, &m, seed, seq, log);
        }
    }
}

static ta_vstack_t s_make(int ndim, const int64_t *shape) {
    ta_vstack_t st;
    ta_vstack_init(&st, ndim, shape);
    return st;
}

Test(graph_view, a_contiguous_reshape_stays_one_contiguous_view) {
    ta_vstack_t st = s_make(3, (int64_t[]){2, 3, 4});
    cr_assert_eq(ta_vstack_reshape(&st, 2, (int64_t[]){6, 4}), 0);
    cr_assert_eq(ta_vstack_reshape(&st, 1, (int64_t[]){24}), 0);
    cr_assert_eq(ta_vstack_reshape(&st, 4, (int64_t[]){4, 1, 3, 2}), 0);
    cr_assert(st.nviews == 1 && ta_vstack_contiguous(&st));
    cr_assert(memcmp(st.views[0].strides, (int64_t[]){6, 0, 2, 1}, 4 * sizeof(int64_t)) == 0);
}

Test(graph_view, size_one_dims_have_stride_zero) {
    ta_vstack_t st = s_make(4, (int64_t[]){1, 3, 1, 2});
    cr_assert(memcmp(st.views[0].strides, (int64_t[]){0, 2, 0, 1}, 4 * sizeof(int64_t)) == 0);
    cr_assert(st.views[0].contiguous);
    ta_vstack_t sc = s_make(0, NULL);
    cr_assert(ta_vstack_contiguous(&sc) && ta_vstack_numel(&sc) == 1 && ta_vstack_buffer_size(&sc) == 1);
}

Test(graph_view, a_dim_masked_to_one_index_has_stride_zero) {
    ta_vstack_t st = s_make(2, (int64_t[]){3, 4});
    cr_assert_eq(ta_vstack_pad(&st, (const int64_t[][2]){{2, 0}, {0, 0}}), 0);
    cr_assert_eq(ta_vstack_shrink(&st, (const int64_t[][2]){{1, 3}, {0, 4}}), 0);
    const ta_view_t *v = &st.views[0];
    cr_assert(v->has_mask && v->mask[0][0] == 1 && v->mask[0][1] == 2 && v->mask[1][0] == 0 && v->mask[1][1] == 4);
    cr_assert(v->strides[0] == 0 && v->strides[1] == 1 && v->offset == 0 && !v->contiguous);
}

Test(graph_view, permute_then_split_stays_one_view) {
    ta_vstack_t st = s_make(3, (int64_t[]){2, 3, 4});
    cr_assert_eq(ta_vstack_permute(&st, (int[]){2, 0, 1}), 0);
    cr_assert_eq(ta_vstack_reshape(&st, 4, (int64_t[]){2, 2, 2, 3}), 0);
    cr_assert_eq(st.nviews, 1);
    cr_assert(memcmp(st.views[0].strides, (int64_t[]){2, 1, 12, 4}, 4 * sizeof(int64_t)) == 0);
    /* Merging back the dims that were split is also one view. */
    cr_assert_eq(ta_vstack_reshape(&st, 2, (int64_t[]){4, 6}), 0);
    cr_assert_eq(st.nviews, 1);
    cr_assert(memcmp(st.views[0].strides, (int64_t[]){1, 4}, 2 * sizeof(int64_t)) == 0);
}

Test(graph_view, permute_then_merging_non_adjacent_dims_pushes_a_view) {
    ta_vstack_t st = s_make(2, (int64_t[]){2, 3});
    cr_assert_eq(ta_vstack_permute(&st, (int[]){1, 0}), 0);
    cr_assert_eq(ta_vstack_reshape(&st, 1, (int64_t[]){6}), 0);
    cr_assert_eq(st.nviews, 2);
    cr_assert(st.views[1].contiguous && !ta_vstack_contiguous(&st));
    /* Reshaping back makes the pushed view redundant: it is merged away. */
    cr_assert_eq(ta_vstack_reshape(&st, 2, (int64_t[]){3, 2}), 0);
    cr_assert_eq(st.nviews, 1);
    cr_assert(memcmp(st.views[0].strides, (int64_t[]){1, 3}, 2 * sizeof(int64_t)) == 0);
}

Test(graph_view, merging_expanded_dims_stays_one_view) {
    ta_vstack_t st = s_make(2, (int64_t[]){3, 1});
    cr_assert_eq(ta_vstack_expand(&st, (int64_t[]){3, 4}), 0);
    cr_assert_eq(ta_vstack_reshape(&st, 3, (int64_t[]){3, 2, 2}), 0);
    cr_assert_eq(st.nviews, 1);
    cr_assert(memcmp(st.views[0].strides, (int64_t[]){1, 0, 0}, 3 * sizeof(int64_t)) == 0);
    cr_assert_eq(ta_vstack_reshape(&st, 2, (int64_t[]){3, 4}), 0);
    cr_assert_eq(st.nviews, 1);
}

Test(graph_view, reshaping_a_padded_view_keeps_its_mask_in_one_view) {
    ta_vstack_t st = s_make(2, (int64_t[]){2, 3});
    cr_assert_eq(ta_vstack_pad(&st, (const int64_t[][2]){{1, 1}, {0, 0}}), 0);
    cr_assert_eq(ta_vstack_reshape(&st, 1, (int64_t[]){12}), 0);
    cr_assert_eq(st.nviews, 1);
    const ta_view_t *v = &st.views[0];
    cr_assert(v->has_mask && v->mask[0][0] == 3 && v->mask[0][1] == 9 && v->offset == -3 && v->strides[0] == 1);
}

Test(graph_view, flip_gives_negative_strides_and_the_last_element_as_offset) {
    ta_vstack_t st = s_make(2, (int64_t[]){2, 3});
    cr_assert_eq(ta_vstack_stride(&st, (int64_t[]){1, -1}), 0);
    cr_assert(st.views[0].offset == 2 && st.views[0].strides[0] == 3 && st.views[0].strides[1] == -1);
    cr_assert_eq(ta_vstack_stride(&st, (int64_t[]){-1, 1}), 0);
    cr_assert(st.views[0].offset == 5 && st.views[0].strides[0] == -3 && st.views[0].strides[1] == -1);
    cr_assert_eq(ta_vstack_stride(&st, (int64_t[]){-1, -2}), 0);
    /* Flipping both back and taking every other column. */
    cr_assert(st.views[0].shape[1] == 2 && st.views[0].offset == 0 && st.views[0].strides[1] == 2);
    cr_assert_eq(ta_vstack_buffer_size(&st), 6);
}

Test(graph_view, pad_then_shrink_back_gives_the_original_view) {
    ta_vstack_t st = s_make(2, (int64_t[]){2, 3}), orig = st;
    cr_assert_eq(ta_vstack_pad(&st, (const int64_t[][2]){{1, 1}, {0, 2}}), 0);
    cr_assert(st.views[0].has_mask && st.views[0].shape[0] == 4 && st.views[0].shape[1] == 5);
    cr_assert_eq(ta_vstack_shrink(&st, (const int64_t[][2]){{1, 3}, {0, 3}}), 0);
    cr_assert(!st.views[0].has_mask && ta_vstack_contiguous(&st));
    cr_assert(ta_vstack_equal(&st, &orig) && ta_vstack_hash(&st) == ta_vstack_hash(&orig));
}

Test(graph_view, expanding_a_masked_size_one_dim_widens_its_mask) {
    ta_vstack_t st = s_make(2, (int64_t[]){1, 2});
    cr_assert_eq(ta_vstack_pad(&st, (const int64_t[][2]){{0, 0}, {1, 0}}), 0);
    cr_assert_eq(ta_vstack_expand(&st, (int64_t[]){4, 3}), 0);
    const ta_view_t *v = &st.views[0];
    cr_assert(v->has_mask && v->mask[0][0] == 0 && v->mask[0][1] == 4 && v->mask[1][0] == 1 && v->mask[1][1] == 3);
    /* A size-1 dim masked off stays masked off, and an empty mask is canonical. */
    ta_vstack_t z = s_make(2, (int64_t[]){2, 2});
    cr_assert_eq(ta_vstack_pad(&z, (const int64_t[][2]){{1, 0}, {0, 0}}), 0);
    cr_assert_eq(ta_vstack_shrink(&z, (const int64_t[][2]){{0, 1}, {0, 2}}), 0);
    cr_assert_eq(ta_vstack_expand(&z, (int64_t[]){3, 2}), 0);
    v = &z.views[0];
    cr_assert(v->has_mask && v->mask[0][1] == 0 && v->mask[1][1] == 0 && v->strides[1] == 0 && v->offset == 0);
    cr_assert_eq(ta_vstack_buffer_size(&z), 0);
    int64_t pos;
    cr_assert(!ta_vstack_index(&z, (int64_t[]){2, 1}, &pos));
}

Test(graph_view, a_shape_with_zero_has_zero_strides_and_no_mask) {
    ta_vstack_t st = s_make(2, (int64_t[]){3, 4});
    cr_assert_eq(ta_vstack_pad(&st, (const int64_t[][2]){{1, 0}, {0, 0}}), 0);
    cr_assert_eq(ta_vstack_shrink(&st, (const int64_t[][2]){{0, 4}, {2, 2}}), 0);
    const ta_view_t *v = &st.views[0];
    cr_assert(!v->has_mask && v->strides[0] == 0 && v->strides[1] == 0 && v->offset == 0 && v->contiguous);
    cr_assert(ta_vstack_numel(&st) == 0 && ta_vstack_buffer_size(&st) == 0);
}

Test(graph_view, the_view_limit_refuses_and_leaves_the_stack_unchanged) {
    ta_vstack_t st = s_make(2, (int64_t[]){2, 3});
    int pushed = 0;
    for (;;) {
        cr_assert_eq(ta_vstack_permute(&st, (int[]){1, 0}), 0);
        ta_vstack_t before = st;
        if (ta_vstack_reshape(&st, 1, (int64_t[]){6}) != 0) {
            cr_assert(memcmp(&st, &before, sizeof st) == 0);
            break;
        }
        pushed++;
        cr_assert_eq(st.nviews, pushed + 1);
        cr_assert_eq(ta_vstack_reshape(&st, 2, (int64_t[]){2, 3}), 0);
    }
    cr_assert_eq(pushed, TA_MAX_VIEWS - 1);
}

Test(graph_view, equal_and_hash_follow_structure) {
    ta_vstack_t a = s_make(2, (int64_t[]){4, 6}), b = s_make(1, (int64_t[]){24});
    cr_assert_eq(ta_vstack_reshape(&b, 2, (int64_t[]){4, 6}), 0);
    cr_assert(ta_vstack_equal(&a, &b) && ta_vstack_hash(&a) == ta_vstack_hash(&b));
    cr_assert_eq(ta_vstack_permute(&b, (int[]){1, 0}), 0);
    cr_assert(!ta_vstack_equal(&a, &b) && ta_vstack_hash(&a) != ta_vstack_hash(&b));
    cr_assert_eq(ta_vstack_permute(&b, (int[]){1, 0}), 0);
    cr_assert(ta_vstack_equal(&a, &b));
    cr_assert_eq(ta_vstack_pad(&b, (const int64_t[][2]){{0, 1}, {0, 0}}), 0);
    cr_assert_eq(ta_vstack_shrink(&b, (const int64_t[][2]){{0, 4}, {0, 6}}), 0);
    cr_assert(ta_vstack_equal(&a, &b) && ta_vstack_hash(&a) == ta_vstack_hash(&b));
}

Test(graph_view, masked_elements_give_a_guarded_expression) {
    ta_vstack_t st = s_make(1, (int64_t[]){3});
    cr_assert_eq(ta_vstack_pad(&st, (const int64_t[][2]){{2, 1}}), 0);
    ta_sym_arena_t *ar = ta_sym_arena_new();
    const ta_sym_t *i = ta_sym_var(ar, 0, "idx0", 0, 5), *pos, *valid;
    cr_assert_eq(ta_vstack_expr(&st, ar, &i, &pos, &valid), 0);
    for (int64_t x = 0; x < 6; x++) {
        cr_assert_eq(ta_sym_eval(valid, &x), x >= 2 && x < 5);
        if (x >= 2 && x < 5) cr_assert_eq(ta_sym_eval(pos, &x), x - 2);
    }
    ta_sym_arena_destroy(&ar);
}

/* A shrink from the start of a two-view stack leaves its last view
 * contiguous but covering less than the view it reads: composing that
 * stack with the view a fused source reads through must not take it for
 * a reshape (the scheduler asserted, found by fuzz_api).  b = flip(a) * 2
 * is fused; y reads it transposed, flattened (two views) and shrunk to its
 * first 3, plus 1. */
Test(graph_view, a_shrunk_two_view_stack_composes) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *a = tact_arange(ctx, 0, 6, 1, TACT_FLOAT32);
    cr_assert_eq(tact_realize(ctx, 1, &a), TACT_OK);
    int zero = 0;
    tact_tensor *b = tact_mul(tact_flip(a, 1, &zero), tact_scalar(ctx, 2));
    tact_tensor *t = tact_reshape(tact_permute(tact_reshape(b, 2, (int64_t[]){2, 3}), (int[]){1, 0}), 1, (int64_t[]){6});
    tact_tensor *y = tact_add(tact_shrink(t, (int64_t[][2]){{0, 3}}), tact_scalar(ctx, 1));
    float got[3];
    cr_assert_eq(tact_read(y, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert(got[0] == 11 && got[1] == 5 && got[2] == 9, "%g %g %g", got[0], got[1], got[2]);
    tact_ctx_close(&ctx);
}
