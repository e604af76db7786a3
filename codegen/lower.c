/* lower.c - lowering a kernel AST to the loop IR: which dim is a vector, what is unrolled, how work items are cut. */
#include "lower.h"
#include "mem.h"

#include <stdio.h>
#include <string.h>

#include "printer.h"
#include "tact.h"

ta_target_t ta_target_of(const char *language, int vector_bytes, int fma, int64_t max_group, int64_t local_memory, const char *flags) {
    ta_target_t t = {ta_printer_find(language), vector_bytes, fma != 0, max_group > 0 ? max_group : 1, local_memory, flags, 0};
    return t;
}

ta_target_t ta_target_host(void) {
    ta_target_t t = {&ta_printer_c, 0, 0, 1, 0, NULL, 0};
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) t.vector_bytes = 64;
    else if (__builtin_cpu_supports("avx")) t.vector_bytes = 32;
    else t.vector_bytes = 16;
    t.fma = __builtin_cpu_supports("fma");
#endif
    return t;
}

/* ------------------------------------------------------- index expressions */

ta_target_t ta_target_cl(void) {
    ta_target_t t = {&ta_printer_cl, 32, 1, 4096, 512 * 1024, NULL, 0};
    return t;
}

ta_target_t ta_target_cuda(void) {
    ta_target_t t = {&ta_printer_cuda, 4, 1, 1024, 48 * 1024, "-arch=sm_90 --fmad=false", 0};
    return t;
}

int ta_lir_nlanes(const ta_lir_t *l) {
    int n = 1;
    for (int a = 0; a < l->naxes; a++)
        if (l->axes[a].kind == TA_AXIS_UPCAST) n *= (int)l->axes[a].size;
    return n;
}

/* The digit of lane along the u-th UPCAST axis (the first axis slowest). */
static int64_t s_digit(const ta_lir_t *l, int lane, int u) {
    int64_t below = 1;
    for (int a = l->naxes - 1, k = l->nupcast - 1; a >= 0; a--) {
        if (l->axes[a].kind != TA_AXIS_UPCAST) continue;
        if (k-- == u) return lane / below % l->axes[a].size;
        below *= l->axes[a].size;
    }
    return 0;
}

int ta_lir_in_tail(const ta_lir_t *l, int lane) { return !l->tail_rows || s_digit(l, lane, 0) < l->tail_rows; }

int64_t ta_lir_digit(const ta_lir_t *l, int lane, int u) { return s_digit(l, lane, u); }

int ta_lir_has_whole(const ta_lir_t *l) { return l->pad >= 0 && l->pad_full >= 1; }

int ta_lir_lane_of(const ta_lir_t *l, int node, int lane) {
    int out = 0;
    int64_t below = 1;
    for (int a = l->naxes - 1, k = l->nupcast - 1; a >= 0; a--) {
        if (l->axes[a].kind != TA_AXIS_UPCAST) continue;
        if (l->nodes[node].lanes >> k & 1) out += (int)(s_digit(l, lane, k) * below);
        below *= l->axes[a].size;
        k--;
    }
    return out;
}

/* The variable of axis a (its slot is a): UPCAST axes are a lane's digits
 * (or variables when lane < 0, for the analysis), the VECTOR axis 0 for a
 * base position. */
static const ta_sym_t *s_var(const ta_lir_t *l, ta_sym_arena_t *ar, int a, int lane, int vector_base, int whole) {
    const ta_axis_t *ax = &l->axes[a];
    if (ax->kind == TA_AXIS_UPCAST && lane >= 0) {
        int u = 0;
        for (int b = 0; b < a; b++) u += l->axes[b].kind == TA_AXIS_UPCAST;
        return ta_sym_const(ar, s_digit(l, lane, u));
    }
    if (ax->kind == TA_AXIS_VECTOR && vector_base) return ta_sym_const(ar, 0);
    int64_t hi = ax->kind == TA_AXIS_GLOBAL ? l->items - 1 : whole && a == l->pad ? l->pad_full - 1 : ax->size - 1;
    return ta_sym_var(ar, a, ax->name, 0, hi > 0 ? hi : 0);
}

int ta_lir_index(const ta_lir_t *l, ta_sym_arena_t *ar, int lane, int vector_base, int whole, const ta_sym_t **full_idx,
                 const ta_sym_t **out_idx) {
    const ta_ast_t *a = l->ast;
    /* Each output dim's index: the work item's start (item * align, flat)
     * divided down to the dim, plus the output axes along it; each reduced
     * dim's the sum of its axes.  Axes step within their dim, so no sum
     * wraps into the next dim, not even a padded dim's last tile. */
    const ta_sym_t *item = ta_sym_mulc(ar, s_var(l, ar, 0, lane, vector_base, whole), l->align);
    int64_t ostride[TA_MAX_DIMS], stride = 1;
    for (int k = a->ndim - 1; k >= 0; k--) {
        ostride[k] = stride;
        if (!(a->reduce_mask >> k & 1) && a->shape[k] > 0) stride *= a->shape[k];
    }
    for (int k = 0; k < a->ndim; k++) {
        int reduced = a->reduce_mask >> k & 1;
        full_idx[k] = ta_sym_const(ar, 0);
        if (!reduced && a->shape[k] > 1) full_idx[k] = ta_sym_mod(ar, ta_sym_div(ar, item, ostride[k]), a->shape[k]);
    }
    for (int x = 1; x < l->naxes; x++) {
        const ta_axis_t *ax = &l->axes[x];
        if (ax->dim < 0 || (!ax->reduce && a->shape[ax->dim] <= 1)) continue;
        int64_t step = ax->reduce ? ax->mult : ax->mult / ostride[ax->dim];
        full_idx[ax->dim] = ta_sym_add(ar, full_idx[ax->dim], ta_sym_mulc(ar, s_var(l, ar, x, lane, vector_base, whole), step));
    }
    for (int k = 0; k < a->ndim; k++) {
        out_idx[k] = a->reduce_mask >> k & 1 ? ta_sym_const(ar, 0) : full_idx[k];
        if (!full_idx[k] || !out_idx[k]) return -1;
    }
    return 0;
}

/* How a load or store at pos (valid where valid) is read along the
 * vector: contiguous, the same for every lane, pairs of lanes from an
 * even first one (where the printer has them), or lane by lane. */
static ta_access_t s_access(const ta_target_t *t, const ta_lir_t *l, const ta_ast_node_t *n, const ta_sym_t *pos, const ta_sym_t *valid) {
    int64_t k;
    int unmasked = !(ta_sym_slots(valid) >> l->vector & 1), linear = unmasked && ta_sym_linear(pos, l->vector, &k);
    if (linear) return k == 1 ? TA_ACCESS_CONTIGUOUS : k == 0 ? TA_ACCESS_BROADCAST : TA_ACCESS_GATHER;
    /* Pairs of lanes from an even first one (in a padded dim's last tile,
     * only the lanes inside it), where the printer has them. */
    if (unmasked && n->op == TA_OP_LOAD && n->dtype == TACT_FLOAT32 && t->printer->half_loads && l->width % 2 == 0 && ta_sym_half(pos, l->vector))
        return TA_ACCESS_HALF;
    return TA_ACCESS_GATHER;
}

/* --------------------------------------------------------------- choices */

/* How node n's view is read along dim d when each dim's index is a free
 * variable (slot = dim): contiguous (+1 per step), broadcast, or neither. */
static ta_access_t s_access_along(const ta_ast_t *a, const ta_ast_node_t *n, int pre, int d, ta_sym_arena_t *ar) {
    const ta_sym_t *idx[TA_MAX_DIMS], *pos, *valid;
    for (int k = 0; k < a->ndim; k++) {
        int reduced = a->reduce_mask >> k & 1;
        idx[k] = reduced && !pre ? ta_sym_const(ar, 0) : ta_sym_var(ar, k, "d", 0, a->shape[k] > 0 ? a->shape[k] - 1 : 0);
    }
    if (ta_vstack_expr(&a->views[n->view], ar, idx, &pos, &valid) != 0) return TA_ACCESS_GATHER;
    int64_t k;
    if (ta_sym_slots(valid) >> d & 1) return TA_ACCESS_GATHER;
    if (!ta_sym_linear(pos, d, &k)) return ta_sym_half(pos, d) ? TA_ACCESS_HALF : TA_ACCESS_GATHER;
    return k == 1 ? TA_ACCESS_CONTIGUOUS : k == 0 ? TA_ACCESS_BROADCAST : TA_ACCESS_GATHER;
}

/* Whether node n's view is masked out everywhere dim d's index is v. */
static int s_never_at(const ta_ast_t *a, const ta_ast_node_t *n, int d, int64_t v, ta_sym_arena_t *ar) {
    const ta_sym_t *idx[TA_MAX_DIMS], *pos, *valid;
    for (int k = 0; k < a->ndim; k++) idx[k] = k == d ? ta_sym_const(ar, v) : ta_sym_var(ar, k, "d", 0, a->shape[k] > 0 ? a->shape[k] - 1 : 0);
    int64_t c;
    return ta_vstack_expr(&a->views[n->view], ar, idx, &pos, &valid) == 0 && ta_sym_is_const(valid, &c) && c == 0;
}

/* Marks the reduce's source subtree (computed inside the reduce loops). */
static void s_mark_pre(const ta_ast_t *a, int *pre, int root) {
    int stack[TA_AST_MAX_NODES], n = 0;
    stack[n++] = root;
    while (n) {
        int i = stack[--n];
        if (pre[i]) continue;
        pre[i] = 1;
        for (int s = 0; s < a->nodes[i].nsrc; s++) stack[n++] = a->nodes[i].src[s];
    }
}

/* ---------------------------------------------------------------- gathers */

/* The dim whose index node n's value is (an IOTA read along one dim from
 * 0, unmasked, maybe widened by a CAST to another int), or -1. */
static int s_iota_dim(const ta_ast_t *a, int n, ta_sym_arena_t *ar, const ta_sym_t *const *idx) {
    const ta_ast_node_t *x = &a->nodes[n];
    if (x->op == TA_OP_CAST && (x->dtype == TACT_INT32 || x->dtype == TACT_INT64) && a->nodes[x->src[0]].op == TA_OP_IOTA) x = &a->nodes[x->src[0]];
    if (x->op != TA_OP_IOTA || x->view < 0 || x->view >= a->nviews) return -1;
    const ta_sym_t *pos, *valid, *zero[TA_MAX_DIMS];
    int64_t v, k;
    if (ta_vstack_expr(&a->views[x->view], ar, idx, &pos, &valid) != 0 || !ta_sym_is_const(valid, &v) || v == 0) return -1;
    uint64_t slots = ta_sym_slots(pos);
    if (!slots || (slots & (slots - 1)) || slots >> 62) return -1;
    int r = __builtin_ctzll(slots);
    if (r >= a->ndim || !ta_sym_linear(pos, r, &k) || k != 1) return -1;
    for (int d = 0; d < a->ndim; d++) zero[d] = d == r ? ta_sym_const(ar, 0) : idx[d];
    if (ta_vstack_expr(&a->views[x->view], ar, zero, &pos, &valid) != 0 || !ta_sym_is_const(pos, &v) || v != 0) return -1;
    return r;
}

/* Whether node n's value depends on a dim of mask (through the views of
 * the LOADs, IOTAs and masked CONSTs under it). */
static int s_depends(const ta_ast_t *a, int n, uint32_t mask, ta_sym_arena_t *ar, const ta_sym_t *const *idx) {
    int stack[TA_AST_MAX_NODES], top = 0;
    uint8_t seen[TA_AST_MAX_NODES] = {0};
    stack[top++] = n;
    while (top) {
        const ta_ast_node_t *x = &a->nodes[stack[--top]];
        if (x->view >= 0 && x->view < a->nviews && (x->op == TA_OP_LOAD || x->op == TA_OP_IOTA || x->op == TA_OP_CONST)) {
            const ta_sym_t *pos, *valid;
            if (ta_vstack_expr(&a->views[x->view], ar, idx, &pos, &valid) != 0 || ((ta_sym_slots(pos) | ta_sym_slots(valid)) & mask)) return 1;
        }
        if (ta_op_class(x->op) == TA_OPC_REDUCE) return 1;
        for (int s = 0; s < x->nsrc; s++)
            if (!seen[x->src[s]]) seen[x->src[s]] = 1, stack[top++] = x->src[s];
    }
    return 0;
}

/* The one-hot factors of a SUM's source: each equality node e (bool, true
 * where IOTA along dim r equals the int value `other`) that zeroes the
 * source where it is false, through MULs and ANDs (either side), CASTs,
 * and the condition of a WHERE whose other value is 0 (an equality of two
 * IOTAs is listed once per side).  Fills out (room for 2 *
 * TA_AST_MAX_NODES); returns how many, or -1 when the kernel is no such
 * SUM. */
typedef struct {
    int eq, dim, other;
} s_onehot_t;

static int s_onehots(const ta_ast_t *a, ta_sym_arena_t *ar, const ta_sym_t *const *idx, s_onehot_t *out) {
    int red = -1, iota = 0, n = 0;
    for (int i = 0; i < a->nnodes; i++) {
        if (ta_op_class(a->nodes[i].op) == TA_OPC_REDUCE) red = i;
        iota |= a->nodes[i].op == TA_OP_IOTA;
    }
    if (red < 0 || a->nodes[red].op != TA_OP_SUM || !iota) return -1;
    int stack[TA_AST_MAX_NODES], top = 0;
    uint8_t seen[TA_AST_MAX_NODES] = {0};
    stack[top++] = a->nodes[red].src[0];
    while (top) {
        int i = stack[--top];
        const ta_ast_node_t *x = &a->nodes[i];
        int push[2] = {-1, -1};
        if (x->op == TA_OP_MUL || x->op == TA_OP_AND) push[0] = x->src[0], push[1] = x->src[1];
        else if (x->op == TA_OP_CAST) push[0] = x->src[0];
        else if (x->op == TA_OP_WHERE) {
            const ta_ast_node_t *y = &a->nodes[x->src[2]];
            if (y->op == TA_OP_CONST && !y->arg && ta_value_bits(y->dtype, y->value) == 0) push[0] = x->src[0];
        }
        for (int p = 0; p < 2; p++)
            if (push[p] >= 0 && !seen[push[p]]) seen[push[p]] = 1, stack[top++] = push[p];
        /* An equality: CMPNE(CMPNE(A, B), true) or a bool NEG of CMPNE(A, B). */
        int ne = -1;
        if (x->dtype == TACT_BOOL && x->op == TA_OP_NEG) ne = x->src[0];
        if (x->dtype == TACT_BOOL && x->op == TA_OP_CMPNE) {
            const ta_ast_node_t *t = &a->nodes[x->src[1]];
            if (t->op == TA_OP_CONST && t->dtype == TACT_BOOL && !t->arg && t->value.b) ne = x->src[0];
        }
        if (ne < 0 || a->nodes[ne].op != TA_OP_CMPNE) continue;
        for (int side = 0; side < 2; side++) {
            int r = s_iota_dim(a, a->nodes[ne].src[side], ar, idx), other = a->nodes[ne].src[!side];
            if (r >= 0 && ta_dtype_is_int(a->nodes[other].dtype)) out[n++] = (s_onehot_t){i, r, other};
        }
    }
    return n;
}

static ta_sym_arena_t *s_dim_vars(const ta_ast_t *a, const ta_sym_t **idx) {
    ta_sym_arena_t *ar = ta_sym_arena_new();
    for (int k = 0; ar && k < a->ndim; k++) idx[k] = ta_sym_var(ar, k, "d", 0, a->shape[k] > 0 ? a->shape[k] - 1 : 0);
    return ar;
}

int ta_ast_gathers(const ta_ast_t *a, int pin[TA_MAX_DIMS]) {
    for (int k = 0; k < TA_MAX_DIMS; k++) pin[k] = -1;
    const ta_sym_t *idx[TA_MAX_DIMS];
    ta_sym_arena_t *ar = s_dim_vars(a, idx);
    s_onehot_t *oh = ta_malloc(sizeof *oh * 2 * TA_AST_MAX_NODES);
    int n = ar && oh ? s_onehots(a, ar, idx, oh) : -1, found = 0;
    for (int q = 0; q < n; q++) {
        int r = oh[q].dim;
        if (!(a->reduce_mask >> r & 1) || pin[r] >= 0 || s_depends(a, oh[q].other, a->reduce_mask, ar, idx)) continue;
        pin[r] = oh[q].other;
        found++;
    }
    ta_free(oh);
    ta_sym_arena_destroy(&ar);
    return found;
}

int ta_ast_scatter(const ta_ast_t *a, int *dim) {
    const ta_sym_t *idx[TA_MAX_DIMS];
    int nred = 0, guard = -1;
    for (int k = 0; k < a->ndim; k++) nred += a->reduce_mask >> k & 1;
    if (nred != 1 || a->nnodes < 2 || a->nodes[a->nnodes - 1].op != TA_OP_STORE || ta_op_class(a->nodes[a->nodes[a->nnodes - 1].src[0]].op) != TA_OPC_REDUCE)
        return -1;
    ta_sym_arena_t *ar = s_dim_vars(a, idx);
    s_onehot_t *oh = ta_malloc(sizeof *oh * 2 * TA_AST_MAX_NODES);
    int n = ar && oh ? s_onehots(a, ar, idx, oh) : -1;
    for (int q = 0; q < n && guard < 0; q++) {
        int r = oh[q].dim;
        /* Along an output dim, the index read along the reduce, and the
         * equality the same for every output inside dim r. */
        uint32_t inside = 0;
        for (int k = r + 1; k < a->ndim; k++)
            if (!(a->reduce_mask >> k & 1) && a->shape[k] > 1) inside |= 1u << k;
        if ((a->reduce_mask >> r & 1) || !inside || !s_depends(a, oh[q].other, a->reduce_mask, ar, idx) || s_depends(a, oh[q].eq, inside, ar, idx))
            continue;
        guard = oh[q].eq;
        *dim = r;
    }
    ta_free(oh);
    ta_sym_arena_destroy(&ar);
    return guard;
}

static void s_axis(ta_lir_t *l, ta_axis_kind_t kind, int dim, int reduce, int64_t size, int64_t mult) {
    ta_axis_t *ax = &l->axes[l->naxes++];
    ax->kind = kind;
    ax->dim = dim;
    ax->reduce = reduce;
    ax->size = size;
    ax->mult = mult;
    ax->pin = -1;
    ax->skip = -1;
    int nth = 0;
    for (int b = 0; b < l->naxes - 1; b++) nth += l->axes[b].kind == kind;
    static const char *names[] = {"gidx", "lidx", "ridx", "u", "vl"};
    if (kind == TA_AXIS_GLOBAL || kind == TA_AXIS_VECTOR) snprintf(ax->name, sizeof ax->name, "%s", names[kind]);
    else snprintf(ax->name, sizeof ax->name, "%s%d", names[kind], nth);
}

int ta_lower(const ta_ast_t *a, const ta_target_t *t, ta_lir_t *l, ta_error_t *err) {
    memset(l, 0, sizeof *l);
    l->ast = a;
    l->target = *t;
    l->vector = -1;
    l->width = 1;
    l->reduce = -1;
    for (int i = 0; i < a->nnodes; i++)
        if (ta_op_class(a->nodes[i].op) == TA_OPC_REDUCE) l->reduce = i;
    int pre[TA_AST_MAX_NODES] = {0};
    if (l->reduce >= 0) s_mark_pre(a, pre, a->nodes[l->reduce].src[0]);
    /* A gather takes one index per output: no tiles of outputs (each would
     * take its own), no work groups. */
    int pins[TA_MAX_DIMS], gather = ta_ast_gathers(a, pins) > 0;
    /* A scatter: its equality and what only it feeds (its CASTs) are
     * computed once per step of the reduce, outside the rows: scalars of
     * any type beside float32 vectors. */
    int sdim = -1, guard = gather ? -1 : ta_ast_scatter(a, &sdim);
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] == 0) guard = -1; /* an empty reduce still writes its zeros: the whole loop */
    uint8_t gnode[TA_AST_MAX_NODES] = {0};
    if (guard >= 0) {
        int stack[TA_AST_MAX_NODES], top = 0;
        stack[top++] = guard;
        gnode[guard] = 1;
        while (top) {
            const ta_ast_node_t *x = &a->nodes[stack[--top]];
            for (int k = 0; k < x->nsrc; k++)
                if (!gnode[x->src[k]]) gnode[x->src[k]] = 1, stack[top++] = x->src[k];
        }
        for (int i = guard + 1; i < a->nnodes; i++)
            gnode[i] |= a->nodes[i].op == TA_OP_CAST && gnode[a->nodes[i].src[0]];
    }

    int64_t out[TA_MAX_DIMS], ostride[TA_MAX_DIMS], numel = 1;
    int empty = 0, masked = 0, all_f32 = 1;
    for (int k = a->ndim - 1; k >= 0; k--) {
        out[k] = a->reduce_mask >> k & 1 ? 1 : a->shape[k];
        ostride[k] = numel;
        numel *= out[k];
        empty |= a->shape[k] == 0;
    }
    for (int v = 0; v < a->nviews; v++)
        for (int w = 0; w < a->views[v].nviews; w++) masked |= a->views[v].views[w].has_mask;
    /* Vectors take float32 values, and on the C target the bools of
     * float32 comparisons that only choose a WHERE's value (the masks of a
     * relu's or a max pool's gradient): lanes of -1 or 0; and float16 or
     * bfloat16 loads cast to float32 at once, and in kernels without a
     * reduce their stores of float32 values cast to 16 bits (the casts
     * around a matmul of halves), where the printer converts a vector as
     * it loads or stores it. */
    int cvt = t->printer->vector_halves, store16 = cvt && l->reduce < 0; /* (a reduce's K blocks read float32 partials back) */
    for (int i = 0; i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        if (gnode[i]) continue;
        int cmp = (n->op == TA_OP_CMPLT || n->op == TA_OP_CMPNE) && n->dtype == TACT_BOOL && t->printer->bool_masks;
        int h16 = ta_dtype_is_half(n->dtype) && (n->op == TA_OP_LOAD ? cvt : (n->op == TA_OP_CAST || n->op == TA_OP_STORE) && store16);
        all_f32 &= n->dtype == TACT_FLOAT32 || cmp || h16;
        for (int k = 0; k < n->nsrc; k++) {
            tact_dtype sd = a->nodes[n->src[k]].dtype;
            /* (a 16-bit value cast to float32 must be a load: a float32
             * rounded to 16 bits and back keeps its rounding lane by lane) */
            all_f32 &= sd == TACT_FLOAT32 || (sd == TACT_BOOL && n->op == TA_OP_WHERE && k == 0) ||
                       (ta_dtype_is_half(sd) && ((cvt && n->op == TA_OP_CAST && n->dtype == TACT_FLOAT32 && a->nodes[n->src[k]].op == TA_OP_LOAD) ||
                                       (store16 && n->op == TA_OP_STORE)));
        }
    }
    ta_sym_arena_t *ar = ta_sym_arena_new();
    if (!ar) return ta_error_set(err, TACT_ENOMEM, "lower: out of memory");

    /* The choices, first allowing a padded vector dim (below); when the
     * work item cannot hold the padded dim whole, again without. */
    int vdim, width, up_dim[2], j, kblock, pad, tdim = -1;
    int64_t kb;
    int64_t factor[TA_MAX_DIMS], vfactor[TA_MAX_DIMS], up_size[2], extra[TA_MAX_DIMS], whole_j, tiles = 0;
    int inner = -1;
    int64_t tail = 0, mc = 0; /* rows in a short last row tile (0: none), and in a work item of tr-row tiles (0: none) */
    for (int k = 0; k < a->ndim; k++)
        if (out[k] > 1) inner = k;
    enum { S_MC = 128, S_KB = 256, S_CS = 1024, S_CB = 8, S_APACK_BYTES = 256 << 10 };
    for (int allow_pad = 1;; allow_pad = 0) {
        /* The vector dim: the one most loads read contiguously (a store
         * must), at the widest width that divides it, or (allow_pad) an
         * output dim it does not divide when padding it to whole vectors
         * adds at most 1/8: the last tile's lanes past the end are masked.
         * Kernels with masks get neither vectors nor tiles (gcc 12 at -O3
         * miscompiled a masked multi-axis reduce's vectorized tile). */
        vdim = -1, width = 1, pad = 0;
        int best = 0;
        for (int w = t->vector_bytes / 4; w >= 4 && vdim < 0 && all_f32 && !masked && !empty; w /= 2)
            for (int d = a->ndim - 1; d >= 0; d--) {
                int reduced = a->reduce_mask >> d & 1;
                int64_t padded = (a->shape[d] + w - 1) / w * w;
                if (guard >= 0 && (reduced || d <= sdim)) continue; /* a scatter's equality is a scalar */
                /* Padding may add 1/8 of the dim, or 1/4 in an elementwise kernel
                 * whose dim no width divides (a row of 14 in tiles of 8: the
                 * last tile's loads and store are masked, which still beats
                 * scalar code; a row of 28 takes exact tiles of 4: padded
                 * ones of 16 read the broadcast operands lane by lane). */
                int slack = l->reduce < 0 && a->shape[d] % 4 && t->printer->ranges ? 4 : 8;
                if (a->shape[d] < w || (a->shape[d] % w && (!allow_pad || reduced || (padded - a->shape[d]) * slack > a->shape[d]))) continue;
                int score = 0, ok = 1;
                for (int i = 0; i < a->nnodes && ok; i++) {
                    const ta_ast_node_t *n = &a->nodes[i];
                    if (n->op != TA_OP_LOAD && n->op != TA_OP_STORE) continue;
                    ta_access_t acc = s_access_along(a, n, pre[i], d, ar);
                    /* A HALF load is cheap where the printer has it (a pair
                     * of lanes each), else a gather; neither may store. */
                    if (acc == TA_ACCESS_HALF && (!t->printer->half_loads || ta_dtype_is_half(n->dtype))) acc = TA_ACCESS_GATHER;
                    if (n->op == TA_OP_STORE) ok = acc != TA_ACCESS_GATHER && acc != TA_ACCESS_HALF;
                    else score += acc == TA_ACCESS_CONTIGUOUS ? 2 : acc == TA_ACCESS_GATHER ? -4 : 0;
                }
                /* Prefer output dims (no sum across lanes at the end), then inner ones. */
                score = score * 4 + !reduced;
                if (ok && score > 4 && score > best) best = score, vdim = d, width = w;
            }
        /* A transposing copy (x.T.contiguous(): W^T for x @ W^T): no dim
         * that the store and every load run along.  With 8 lanes, the
         * store's inner dim as the vector and an upcast of 8 along a dim
         * the other loads run along: each such load is 8 vectors along
         * that dim, transposed in registers (8 x 8 floats a block), not 64
         * scalar loads. */
        tdim = -1;
        if (vdim < 0 && l->reduce < 0 && all_f32 && !masked && !empty && guard < 0 && t->vector_bytes == 32 && t->printer->ranges && inner >= 0 &&
            out[inner] % 8 == 0) {
            int d = inner, ok = 1, gathers = 0;
            for (int m = 0; m < a->ndim && tdim < 0; m++) {
                if (m == d || out[m] % 8) continue;
                ok = 1, gathers = 0;
                for (int i = 0; i < a->nnodes && ok; i++) {
                    const ta_ast_node_t *n = &a->nodes[i];
                    if (n->op != TA_OP_LOAD && n->op != TA_OP_STORE) continue;
                    ta_access_t along = s_access_along(a, n, 0, d, ar);
                    if (n->op == TA_OP_STORE) ok = along == TA_ACCESS_CONTIGUOUS;
                    else if (along == TA_ACCESS_GATHER) /* float32 (a 16-bit load converts lanes, not blocks) */
                        ok = n->dtype == TACT_FLOAT32 && s_access_along(a, n, 0, m, ar) == TA_ACCESS_CONTIGUOUS, gathers++;
                    else ok = along == TA_ACCESS_CONTIGUOUS || along == TA_ACCESS_BROADCAST;
                }
                if (ok && gathers) tdim = m;
            }
            if (tdim >= 0) vdim = d, width = 8;
        }

        /* Register blocking: factors of output dims unrolled as UPCAST axes. */
        for (int k = 0; k < a->ndim; k++) factor[k] = 1, vfactor[k] = 1, extra[k] = 1;
        up_dim[0] = up_dim[1] = -1, up_size[0] = up_size[1] = 1;
        if (vdim >= 0) vfactor[vdim] = width;
        if (tdim >= 0) up_dim[0] = tdim, up_size[0] = 8;
        if (l->reduce >= 0 && !empty && vdim < 0 && !gather) {
            /* A reduce without a vector (a padded convolution and its
             * gradients: masked, or gathers): scalar tiles of up to two
             * output dims, chosen so the loads inside the reduce serve the
             * most outputs (a load the same along a tile dim is loaded once
             * for all its lanes there); none when no tile saves a load.
             * The bits are those of one loop: each output keeps its reduce
             * order. */
            /* Loads the same along every reduced dim are read once per
             * output, outside the reduce's loops: a tile saves none. */
            int inner_load[TA_AST_MAX_NODES] = {0};
            double best = 0;
            for (int i = 0; i < a->nnodes; i++) {
                if (a->nodes[i].op != TA_OP_LOAD || !pre[i]) continue;
                for (int d = 0; d < a->ndim && !inner_load[i]; d++)
                    inner_load[i] = (a->reduce_mask >> d & 1) && s_access_along(a, &a->nodes[i], 1, d, ar) != TA_ACCESS_BROADCAST;
                best += inner_load[i];
            }
            double none = best; /* loads per output without a tile */
            for (int m1 = 0; m1 < a->ndim; m1++)
                for (int s1 = 8; s1 >= 2; s1 /= 2) {
                    if (out[m1] % s1 || out[m1] == 1) continue;
                    for (int m2 = -1; m2 < a->ndim; m2++)
                        for (int s2 = m2 < 0 ? 1 : 4; s2 >= (m2 < 0 ? 1 : 2); s2 /= 2) {
                            if (m2 >= 0 && (m2 == m1 || out[m2] % s2 || out[m2] == 1)) continue;
                            if (s1 * s2 > 16) continue; /* 32 unrolled lanes of gathers took gcc most of a second */
                            double loads = 0;
                            for (int i = 0; i < a->nnodes; i++) {
                                if (!inner_load[i]) continue;
                                int b1 = s_access_along(a, &a->nodes[i], 1, m1, ar) == TA_ACCESS_BROADCAST;
                                int b2 = m2 < 0 || s_access_along(a, &a->nodes[i], 1, m2, ar) == TA_ACCESS_BROADCAST;
                                loads += (b1 ? 1 : s1) * (b2 ? 1 : s2);
                            }
                            /* Loads per output, then inner dims (stores in order);
                             * only a tile that saves loads. */
                            double cost = loads / (s1 * s2) - 1e-3 * (m1 + (m2 > 0 ? m2 : 0));
                            if (loads / (s1 * s2) < none - 1e-9 && cost < best - 1e-9) best = cost, up_dim[1] = m1, up_size[1] = s1, up_dim[0] = m2, up_size[0] = m2 < 0 ? 1 : s2;
                        }
                }
            if (up_dim[0] < 0) up_size[0] = 1;
        } else if (l->reduce >= 0 && !masked && !empty) {
            if (vdim >= 0 && !(a->reduce_mask >> vdim & 1)) {
                /* A matmul's shape: some load is the same for every lane (A's
                 * row), some the same for every row (B): rows x 2 vectors. */
                int bcast_v = 0;
                for (int i = 0; i < a->nnodes; i++)
                    if (a->nodes[i].op == TA_OP_LOAD && s_access_along(a, &a->nodes[i], pre[i], vdim, ar) == TA_ACCESS_BROADCAST) bcast_v = 1;
                int64_t n2 = a->shape[vdim], padded2 = (n2 + 2 * width - 1) / (2 * width) * (2 * width);
                if (n2 % (2 * width) == 0 || (n2 % width && (padded2 - n2) * 8 <= n2)) up_dim[1] = vdim, up_size[1] = 2;
                for (int m = inner; m >= 0 && bcast_v && up_dim[0] < 0; m--) {
                    if (m == vdim || out[m] == 1) continue;
                    int bcast_m = 0;
                    for (int i = 0; i < a->nnodes; i++)
                        if (a->nodes[i].op == TA_OP_LOAD && s_access_along(a, &a->nodes[i], pre[i], m, ar) == TA_ACCESS_BROADCAST) bcast_m = 1;
                    /* 8 rows; 16 where a tile is one vector wide and
                     * the target has 32 registers (16 accumulators, B's
                     * vector and A's broadcast), leaving 2 row tiles or
                     * more: half as many passes over B (a convolution's
                     * weight gradient, (32 x 144) summed over 25088,
                     * 7.5 -> 5.2 ms on Ice Lake). */
                    int top = up_dim[1] < 0 && t->vector_bytes == 64 && out[m] >= 32 ? 16 : 8;
                    for (int r = top; r >= 2 && bcast_m && up_dim[0] < 0; r /= 2)
                        if (out[m] % r == 0) up_dim[0] = m, up_size[0] = r;
                }
            } else if (vdim >= 0) {
                /* A reduce along the vector: a few rows side by side, and
                 * when one load is the same along those rows and another
                 * along a second output dim (x @ W^T: both operands run
                 * along the reduce), a few of those too: a 4 x 4 tile loads
                 * 8 vectors for 16 products instead of 5 for 4.  Rows of 4,
                 * 3 or 2 (a 3 x 3 window's 3 offsets: each accumulator's
                 * chain of fused multiply-adds waits on the one before, so
                 * one alone runs at a fraction of the machine's rate). */
                for (int r = 4; r >= 2 && inner >= 0 && up_dim[0] < 0; r--)
                    if (out[inner] % r == 0) up_dim[0] = inner, up_size[0] = r;
                int bcast_inner = 0;
                for (int i = 0; i < a->nnodes && up_dim[0] >= 0; i++)
                    if (a->nodes[i].op == TA_OP_LOAD && pre[i] && s_access_along(a, &a->nodes[i], 1, inner, ar) == TA_ACCESS_BROADCAST)
                        bcast_inner = 1;
                for (int m = inner - 1; m >= 0 && bcast_inner && up_dim[1] < 0; m--) {
                    if (out[m] == 1 || (a->reduce_mask >> m & 1)) continue;
                    int bcast_m = 0;
                    for (int i = 0; i < a->nnodes; i++)
                        if (a->nodes[i].op == TA_OP_LOAD && pre[i] && s_access_along(a, &a->nodes[i], 1, m, ar) == TA_ACCESS_BROADCAST) bcast_m = 1;
                    /* With 16 vector registers, at most 20 vectors live
                     * (accumulators and the loaded ones): a few spilled
                     * cost less than a halved tile (a convolution's weight
                     * gradient, 3 x 4: 0.55 ms, 3 x 2: 0.62), but 4 x 4
                     * spills 8 (the CNN's second convolution, 4 x 2: 3.0
                     * -> 2.75 ms on Zen 3). */
                    for (int r = 4; r >= 2 && bcast_m && up_dim[1] < 0; r /= 2)
                        if (out[m] % r == 0 && (t->vector_bytes != 32 || up_size[0] * r + up_size[0] + r <= 20)) up_dim[1] = m, up_size[1] = r;
                }
            }
        }
        if (l->reduce < 0 && vdim < 0 && masked && !empty) {
            /* Pieces side by side along a short dim (a stack, a cat, the
             * windows of an unfold): each load's mask picks its piece by
             * that dim's index.  Unrolled whole, every lane knows its
             * index and the masks of the other pieces fold to false: taken
             * when at least half of the loads' lanes fold so, and the dim
             * whole (with the dims inside it) still leaves 16 work items. */
            int most = 0;
            for (int d = 0; d < a->ndim; d++) {
                if (out[d] < 2 || out[d] > 16 || numel / (out[d] * ostride[d]) < 16) continue;
                int never = 0, lanes = 0;
                for (int i = 0; i < a->nnodes; i++)
                    for (int64_t v = 0; a->nodes[i].op == TA_OP_LOAD && v < out[d]; v++) never += s_never_at(a, &a->nodes[i], d, v, ar), lanes++;
                if (2 * never >= lanes && never > most) most = never, up_dim[1] = d, up_size[1] = out[d];
            }
        }
        /* A scatter's rows one at a time (the equality differs between
         * them), in tiles along the row at most. */
        for (int u = 0; u < 2 && guard >= 0; u++)
            if (up_dim[u] >= 0 && (u == 0 || up_dim[u] <= sdim)) up_dim[u] = -1, up_size[u] = 1;
        for (int u = 0; u < 2; u++)
            if (up_dim[u] >= 0) factor[up_dim[u]] *= up_size[u];
        pad = vdim >= 0 && !(a->reduce_mask >> vdim & 1) && out[vdim] % (factor[vdim] * vfactor[vdim]) != 0;

        /* Cache blocking: the reduce in blocks (an outer REDUCE) around
         * loops over tiles inside the work item, the partial results
         * waiting in the output between blocks.  Each output still takes
         * its inputs in reduce order, so the bits are those of one loop.
         * - A large matmul: work items of MC rows, blocks of KB of K around
         *   the column tiles (outer) and row tiles (inner): a KB x 32
         *   block of B serves MC rows from L1 while the MC x KB block of A
         *   stays in L2.
         * - A reduce over a dim outside the vector (a column sum): work
         *   items of up to CS columns, blocks of CB rows around the column
         *   tiles, so each row is read as a run of CS contiguous floats (a
         *   stream the prefetcher follows) instead of 32 of them a page
         *   apart. */
        kblock = -1, kb = 0, tail = 0;
        int nred = 0, rdim = -1, r0 = -1;
        for (int k = 0; k < a->ndim; k++)
            if (a->reduce_mask >> k & 1) nred++, rdim = k, r0 = r0 < 0 ? k : r0;
        int stored = l->reduce >= 0 && nred == 1 && vdim >= 0 && !pad && !(a->reduce_mask >> vdim & 1) &&
                     a->nodes[a->nnodes - 1].src[0] == l->reduce && (a->nodes[l->reduce].op == TA_OP_SUM || a->nodes[l->reduce].op == TA_OP_RMAX);
        int64_t tile = stored ? factor[vdim] * vfactor[vdim] : 1;
        /* Row tiles of tr rows x 2 vectors: with 16 vector registers
         * (AVX2) 8 x 2 accumulators spill, 6 x 2 leaves room for B's 2
         * vectors and A's broadcast; with 32 (AVX-512) 12 x 2 does (24 +
         * 2 + 1).  Work items of mc rows in row tiles of tr, the last one
         * short (64 rows: ten tiles of 6 and one of 4, or five of 12 and
         * one of 4): the largest multiple of 8 up to 128 that divides the
         * rows, leaves 4 items or more and wastes at most 1/20 of its
         * tiles' rows (B's panel is packed once per item: larger items
         * pack it less often, 1024^2 on Zen 3 0.83 -> 0.89-0.91 of
         * OpenBLAS; a short tile of 2 rows runs at a third of the rate),
         * else the largest multiple of 8 from 24 to 64 that divides the
         * rows, leaving 8 items or more where one does, and,
         * where B is large, blocks of K of 128 to 256 (the fewest that
         * divide K): a padded last column tile is allowed.
         * A sum over two dims (a convolution's weight gradient: over the
         * batch, then the positions) takes the same tiles in items of 8
         * to 64 rows leaving 2 items or more, the outer sum's steps as
         * the blocks: each step's block of B (the positions x a column
         * tile) serves all the item's row tiles from L1. */
        mc = 0;
        int tr = t->vector_bytes == 32 ? 6 : t->vector_bytes == 64 ? 12 : 0; /* rows of a tile */
        int two = nred == 2 && a->shape[r0] > 1;
        if (l->reduce >= 0 && (nred == 1 || two) && vdim >= 0 && !(a->reduce_mask >> vdim & 1) && a->nodes[a->nnodes - 1].src[0] == l->reduce &&
            a->nodes[l->reduce].op == TA_OP_SUM && tr && t->printer->ranges && up_dim[0] >= 0 && up_dim[0] < vdim &&
            up_dim[1] == vdim && up_size[0] == 8 && up_size[1] == 2)
        {
            int64_t rows = out[up_dim[0]];
            for (int64_t c2 = S_MC; c2 >= 24 && !two && !mc; c2--)
                if (rows % c2 == 0 && rows / c2 >= 4 &&
                    (c2 % tr == 0 || c2 % (tr * 5 / 6) == 0 || (c2 % 8 == 0 && ((c2 + tr - 1) / tr * tr - c2) * 20 <= c2)))
                    mc = c2;
            for (int items = two ? 2 : 8; items >= 1 && !mc; items -= two ? 1 : 7) /* 8 items or more where that can be */
                for (int64_t c2 = 64; c2 >= (two ? 8 : 24) && !mc; c2 -= 8)
                    if (rows % c2 == 0 && rows / c2 >= items) mc = c2;
        }
        if (mc) {
            /* Tiles of 5/6 the rows where those leave no short one (items
             * of 40 rows: 8 tiles of 5 instead of 6 of 6 and one of 4). */
            if (mc % tr && mc % (tr * 5 / 6) == 0) tr = tr * 5 / 6;
            up_size[0] = tr, factor[up_dim[0]] = tr;
            extra[up_dim[0]] = (mc + tr - 1) / tr, tail = mc % tr;
        }
        if (mc && two) {
            kblock = r0, kb = 1;
        } else if (mc) {
            int64_t K = a->shape[rdim];
            if (K >= 2 * S_KB && K * out[vdim] * 4 >= (1 << 20))
                for (int64_t nb = (K + S_KB - 1) / S_KB; nb <= K / 128 && kblock < 0; nb++)
                    if (K % nb == 0) kblock = rdim, kb = K / nb;
        } else if (stored && up_dim[0] >= 0 && up_dim[1] == vdim && out[up_dim[0]] % S_MC == 0 && a->shape[rdim] % S_KB == 0 &&
                   a->shape[rdim] >= 2 * S_KB && a->shape[rdim] * out[vdim] * 4 >= (1 << 20)) {
            kblock = rdim, kb = S_KB;
            extra[up_dim[0]] = S_MC / factor[up_dim[0]];
        } else if (stored && up_dim[0] < 0 && a->shape[rdim] % S_CB == 0 && a->shape[rdim] >= 2 * S_CB && out[vdim] > tile &&
                   a->shape[rdim] * out[vdim] * 4 > (1 << 20)) {
            int64_t cs = S_CS;
            while (cs > tile && out[vdim] % cs) cs /= 2;
            if (cs > tile && cs % tile == 0) {
                kblock = rdim, kb = S_CB;
                extra[vdim] = cs / tile;
            }
        }

        /* A scatter: the reduce outside the row, one step a block. */
        if (guard >= 0) {
            kblock = r0, kb = 1, mc = 0, tail = 0;
            for (int k = 0; k < a->ndim; k++) extra[k] = 1;
        }

        /* The work item: a suffix of the flat output, from the outermost
         * output dim j with a factor (its factor's worth) to the end.  A
         * padded dim must lie whole inside it. */
        j = -1;
        for (int k = 0; k < a->ndim && j < 0; k++)
            if (!(a->reduce_mask >> k & 1) && factor[k] * vfactor[k] > 1) j = k;
        whole_j = 0; /* a LOOP over all of dim j inside the item */
        if (j < 0) j = inner;
        /* Or, where a kernel runs ranges of items, a reduce's inner output
         * dim when nothing is tiled: its outputs' index arithmetic then
         * steps instead of being divided out of the item's number each time. */
        if (j >= 0 && (l->reduce < 0 || (t->printer->ranges && factor[j] * vfactor[j] == 1 && kblock < 0)) && j == inner && out[j] <= 8192 &&
            numel / out[j] >= 16 && out[j] > factor[j] * vfactor[j])
            whole_j = (out[j] + factor[j] * vfactor[j] - 1) / (factor[j] * vfactor[j]);
        if (guard >= 0) j = sdim, whole_j = 0; /* an item a row */
        if (pad) tiles = (out[vdim] + factor[vdim] * vfactor[vdim] - 1) / (factor[vdim] * vfactor[vdim]);
        if (!pad || vdim > j || (vdim == j && whole_j) || !allow_pad) break; /* without padding, pad is 0 */
    }
    l->align = 1;
    if (j >= 0) l->align = (whole_j ? out[j] : mc ? mc : factor[j] * vfactor[j] * extra[j]) * ostride[j];
    if (numel == 0) l->align = 1;
    l->items = numel / l->align;

    /* The axes. */
    s_axis(l, TA_AXIS_GLOBAL, -1, 0, l->items, l->align);
    if (kblock >= 0) {
        s_axis(l, TA_AXIS_REDUCE, kblock, 1, a->shape[kblock] / kb, kb);
        l->axes[l->naxes - 1].outer = 1;
        l->axes[l->naxes - 1].skip = guard;
    }
    l->pad = -1;
    for (int k = j >= 0 ? j : a->ndim; k < a->ndim; k++) {
        if (a->reduce_mask >> k & 1) continue;
        int64_t f = factor[k] * vfactor[k], n = k == j ? (whole_j ? whole_j : 1) : out[k] / f;
        if (pad && k == vdim) { /* the padded dim's tiles: a loop even when there is one */
            l->pad = l->naxes, l->pad_dim = k, l->pad_full = out[k] / f;
            s_axis(l, TA_AXIS_LOOP, k, 0, tiles, f * ostride[k]);
        } else if (n > 1) {
            s_axis(l, TA_AXIS_LOOP, k, 0, n, f * ostride[k]);
        }
    }
    if (j >= 0 && extra[j] > 1) { /* the tiles of dim j: a matmul's rows inside its column tiles, a column sum's columns */
        s_axis(l, TA_AXIS_LOOP, j, 0, extra[j], factor[j] * vfactor[j] * ostride[j]);
        if (tail) l->tail_axis = l->naxes - 1, l->tail_rows = tail;
    }
    l->post_level = l->naxes - 1;
    for (int k = 0; k < a->ndim; k++)
        if (a->reduce_mask >> k & 1) {
            s_axis(l, TA_AXIS_REDUCE, k, 1, (k == kblock ? kb : a->shape[k]) / vfactor[k], vfactor[k]);
            if (k != kblock && vfactor[k] == 1 && vdim < 0) l->axes[l->naxes - 1].pin = pins[k];
        }
    l->nloops = l->naxes - 1;
    for (int u = 0; u < 2; u++) {
        if (up_dim[u] < 0) continue;
        int d = up_dim[u];
        /* Inside the dim: the vector lanes innermost, then this axis. */
        int64_t unit = vfactor[d] * (u == 0 && up_dim[1] == d ? up_size[1] : 1);
        s_axis(l, TA_AXIS_UPCAST, d, 0, up_size[u], unit * ostride[d]);
        l->nupcast++;
    }
    if (vdim >= 0) {
        int reduced = a->reduce_mask >> vdim & 1;
        l->vector = l->naxes;
        l->width = width;
        s_axis(l, TA_AXIS_VECTOR, vdim, reduced, width, reduced ? 1 : ostride[vdim]);
    }

    /* Every node: its level, the lanes and vector it varies along. */
    /* With a padded vector dim, loads are read in its whole tiles as the
     * index over those says (a row of 14 in tiles of 8: the first tile's
     * lanes stay in the row, so a per-channel parameter read through
     * (row * 14 + lane) / 196 is the same for all of them), and in its
     * last tile as the index over all tiles says (lane by lane where a
     * lane past the end could leave the row).  Everything else (levels,
     * lanes, the padded dim's masks) follows the index over all tiles. */
    const ta_sym_t *full[TA_MAX_DIMS], *outi[TA_MAX_DIMS], *fullw[TA_MAX_DIMS], *outiw[TA_MAX_DIMS];
    int whole = ta_lir_has_whole(l);
    int rc = ta_lir_index(l, ar, -1, 0, 0, full, outi) == 0 && (!whole || ta_lir_index(l, ar, -1, 0, 1, fullw, outiw) == 0)
                 ? TACT_OK
                 : ta_error_set(err, TACT_ENOMEM, "lower: out of memory");
    int users[TA_AST_MAX_NODES] = {0};
    uint64_t dep[TA_AST_MAX_NODES] = {0}; /* the axes a LOAD's position or validity uses */
    for (int i = 0; i < a->nnodes; i++)
        for (int s = 0; s < a->nodes[i].nsrc; s++) users[a->nodes[i].src[s]]++;
    for (int i = 0; i < a->nnodes && rc == TACT_OK; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        ta_lir_node_t *ln = &l->nodes[i];
        uint64_t slots = 0;
        if (n->op == TA_OP_LOAD || n->op == TA_OP_STORE || n->op == TA_OP_IOTA || (n->op == TA_OP_CONST && n->view >= 0)) {
            const ta_sym_t *pos, *valid;
            if (ta_vstack_expr(&a->views[n->view], ar, pre[i] ? full : outi, &pos, &valid) != 0) {
                rc = ta_error_set(err, TACT_ENOMEM, "lower: out of memory");
                break;
            }
            slots = ta_sym_slots(pos) | ta_sym_slots(valid);
            dep[i] = slots;
            /* Through any axis over the padded dim: its loop, an upcast or
             * the vector.  (A loop of one tile has no index of its own.) */
            ln->padded = 0;
            for (int x = 0; x < l->naxes && l->pad >= 0; x++)
                if (l->axes[x].dim == l->pad_dim && !l->axes[x].reduce && (slots >> x & 1)) ln->padded = 1;
            if (l->vector >= 0 && n->op != TA_OP_CONST && n->op != TA_OP_IOTA) {
                ln->access = ln->access_last = s_access(t, l, n, pos, valid);
                /* A transposing copy's load: contiguous along the upcast of tdim. */
                int64_t step;
                for (int x = 1, u = 0; x < l->naxes && tdim >= 0 && n->op == TA_OP_LOAD && n->dtype == TACT_FLOAT32 && ln->access == TA_ACCESS_GATHER;
                     x++) {
                    if (l->axes[x].kind != TA_AXIS_UPCAST) continue;
                    if (l->axes[x].dim == tdim && l->axes[x].size == l->width && !(ta_sym_slots(valid) >> x & 1) && ta_sym_linear(pos, x, &step) &&
                        step == 1)
                        ln->transposed = 1, l->transpose_u = u;
                    u++;
                }
                if (whole && n->op == TA_OP_LOAD) {
                    if (ta_vstack_expr(&a->views[n->view], ar, pre[i] ? fullw : outiw, &pos, &valid) != 0) {
                        rc = ta_error_set(err, TACT_ENOMEM, "lower: out of memory");
                        break;
                    }
                    ln->access = s_access(t, l, n, pos, valid);
                }
            }
        }
        for (int x = 1; x < l->naxes; x++) {
            if (!(slots >> x & 1)) continue;
            if (x <= l->nloops && x > ln->level) ln->level = x;
        }
        int u = 0;
        for (int x = 1; x < l->naxes; x++) {
            if (l->axes[x].kind != TA_AXIS_UPCAST) continue;
            if (slots >> x & 1) ln->lanes |= 1u << u;
            u++;
        }
        ln->vector = l->vector >= 0 && (slots >> l->vector & 1);
        for (int s = 0; s < n->nsrc; s++) {
            const ta_lir_node_t *src = &l->nodes[n->src[s]];
            if (src->level > ln->level) ln->level = src->level;
            ln->lanes |= src->lanes;
            ln->vector |= src->vector;
            ln->post |= src->post;
        }
        if (i == l->reduce) {
            /* After the reduce loops: a value per output (the lanes of a
             * VECTOR over the reduced dim are summed). */
            ln->post = 1;
            ln->level = l->post_level;
            if (l->vector >= 0 && l->axes[l->vector].reduce) ln->vector = 0;
        }
        if (ln->post && ln->level < l->post_level) ln->level = l->post_level;
    }
    /* A scatter's equality is one scalar per step of its outer reduce
     * (else its steps are not skipped: the whole loop, as right). */
    for (int x = 1; x < l->naxes && guard >= 0; x++)
        if (l->axes[x].skip >= 0 && (l->nodes[guard].level != x || l->nodes[guard].vector || l->nodes[guard].lanes)) l->axes[x].skip = -1;
    /* Packing: a blocked matmul's row tiles of tr (the path above: the
     * LOOP at post_level, inside the column tiles) over the inner reduce
     * block (the last loop; with a padded last column tile, the whole
     * tiles: the last one reads B as it is) (measured on Zen 3,
     * docs/codegen-ir.md): the contiguous vector loads of that reduce that
     * do not depend on the row tile (B's panel) are packed once per
     * column tile, before the row tiles. */
    if (rc == TACT_OK && kblock >= 0 && mc && (l->pad < 0 || l->pad == l->post_level - 1) && l->post_level >= 2 &&
        l->nloops == l->post_level + 1 && l->axes[l->post_level].kind == TA_AXIS_LOOP) {
        for (int i = 0; i < a->nnodes; i++) {
            ta_lir_node_t *ln = &l->nodes[i];
            if (a->nodes[i].op != TA_OP_LOAD || ln->access != TA_ACCESS_CONTIGUOUS || !ln->vector || ln->level != l->nloops ||
                (dep[i] >> l->post_level & 1)) /* the pack is built outside the row tiles' loop */
                continue;
            ln->packed = 1;
            l->pack_level = l->post_level - 1;
        }
        /* A's values: scalar loads of the inner reduce that depend on the
         * row tile but not on the column tile, packed once per block of K
         * (the outer REDUCE just around the column tiles' loop), while the
         * pack fits the stack's budget. */
        int x = l->post_level - 2;
        int64_t apack_bytes = 0; /* all the A packs of the kernel: one stack frame */
        for (int i = 0; l->pack_level && x >= 1 && l->axes[x].kind == TA_AXIS_REDUCE && i < a->nnodes; i++) {
            ta_lir_node_t *ln = &l->nodes[i];
            if (a->nodes[i].op != TA_OP_LOAD || ln->vector || ln->packed || ln->level != l->nloops || !(dep[i] >> l->post_level & 1) ||
                (dep[i] >> (l->post_level - 1) & 1) || a->nodes[i].dtype != TACT_FLOAT32)
                continue;
            int64_t rows = 0; /* its distinct lanes: a row tile's rows */
            for (int u = 0; u < ta_lir_nlanes(l); u++) rows += ta_lir_lane_of(l, i, u) == u;
            int64_t bytes = l->axes[l->post_level].size * l->axes[l->nloops].size * rows * 4;
            if (apack_bytes + bytes > S_APACK_BYTES) continue;
            apack_bytes += bytes;
            ln->apacked = 1;
            l->apack_level = x;
        }
    }
    if (l->reduce >= 0 && rc == TACT_OK) {
        int s0 = a->nodes[l->reduce].src[0];
        const ta_ast_node_t *m = &a->nodes[s0];
        l->nodes[s0].fused = t->fma && a->nodes[l->reduce].op == TA_OP_SUM && m->op == TA_OP_MUL && users[s0] == 1 &&
                             (m->dtype == TACT_FLOAT32 || m->dtype == TACT_FLOAT64);
    }
    ta_sym_arena_destroy(&ar);
    /* On a grid an outer loop over outputs becomes work items: many items
     * keep a device busy.  Whole outputs per item: never a padded dim's tiles. */
    l->flat = !t->printer->ranges && l->naxes > 1 && l->axes[1].kind == TA_AXIS_LOOP && l->post_level >= 1 && l->pad != 1 &&
              l->align % l->axes[1].size == 0;
    /* A long float32 reduce, one output per work item (no tiles, no
     * vectors), is shared by a work group of 64 items instead, each taking
     * every 64th element, their partial sums meeting in local memory in a
     * fixed tree: a long reduce of few outputs no longer leaves most of a
     * device idle.  The choice depends on the reduce's length, never on
     * how many outputs there are (batch invariance, DESIGN.md section 2);
     * the device reads the group's size from the kernel. */
    l->group = !gather && t->printer->groups && t->max_group >= 64 && t->local_memory >= 64 * 4 && l->reduce >= 0 && l->vector < 0 && l->nupcast == 0 &&
                       l->post_level == 0 && l->align == 1 && l->nloops == 1 && l->axes[1].kind == TA_AXIS_REDUCE && !l->axes[1].outer &&
                       l->axes[1].size >= 1024 && a->nodes[l->reduce].dtype == TACT_FLOAT32 &&
                       (a->nodes[l->reduce].op == TA_OP_SUM || a->nodes[l->reduce].op == TA_OP_RMAX)
                   ? 64
                   : 0;
    return rc;
}
