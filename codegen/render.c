/* render.c - renders a kernel AST as a readable C function (STYLE.md: names, fused-node comment, loop depth). */
#include "render.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"
#include "mem.h"
#include "printer.h"

/* ------------------------------------------------------------ the prelude */

const char *ta_render_prelude(void) { return ta_printer_c.prelude; }

/* A work item each, its number the grid's: a group's (its items sharing
 * the reduce), or with a flat launch the first LOOP axis's index too. */
void ta_printer_grid_items(ta_out_t *o, const ta_lir_t *l, const char *group, const char *lid, const char *gid) {
    if (l->group) {
        ta_out_put(o, "  { int64_t gidx = %s; int tact_lid = %s; if (gidx >= n) return;\n", group, lid);
    } else if (l->flat) {
        int64_t per = l->axes[1].size, align = l->align / per;
        ta_out_put(o, "  { int64_t w = %s; if (w >= n/%" PRId64 ") return; int64_t gidx = w/%" PRId64 ", %s = w%%%" PRId64 ";\n", gid, align, per,
                   l->axes[1].name, per);
    } else {
        ta_out_put(o, "  { int64_t gidx = %s; if (gidx >= n/%" PRId64 ") return;\n", gid, l->align);
    }
}

const ta_printer_t *ta_printer_find(const char *language) {
    static const ta_printer_t *const printers[] = {&ta_printer_c, &ta_printer_cl, &ta_printer_cuda};
    for (size_t i = 0; language && i < sizeof printers / sizeof *printers; i++)
        if (strcmp(printers[i]->language, language) == 0) return printers[i];
    return NULL;
}

/* ------------------------------------------------------- a string builder */

typedef ta_out_t s_str_t;
#define s_put ta_out_put

void ta_out_put(ta_out_t *s, const char *fmt, ...) {
    if (s->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->p ? s->p + s->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap;
        if (ta_grow((void **)&s->p, &cap, s->len + (size_t)n + 1, 1) != TACT_OK) {
            s->failed = 1;
            return;
        }
        s->cap = cap;
    }
}

/* ---------------------------------------------------------------- types */

/* The C type a value of d lives in while computing. */
static const char *s_reg(tact_dtype d) {
    static const char *t[TACT_DTYPE_COUNT] = {"_Bool",   "int8_t",   "uint8_t", "int16_t", "uint16_t",
                                              "int32_t", "uint32_t", "int64_t", "uint64_t", "float",
                                              "float",   "float",    "double"};
    return t[d];
}

/* The C type of an element in memory. */
static const char *s_mem(tact_dtype d) {
    return ta_dtype_is_half(d) ? "uint16_t" : s_reg(d);
}

const char *ta_render_mem_type(tact_dtype d) { return s_mem(d); }
const char *ta_render_reg_type(tact_dtype d) { return s_reg(d); }

static int s_signed(tact_dtype d) { return ta_dtype_is_int(d) && !ta_dtype_is_unsigned(d); }

/* Wraps expr so the result has d's precision: 16-bit rounding, int width. */
static void s_round(s_str_t *s, tact_dtype d, const char *expr) {
    if (d == TACT_FLOAT16) s_put(s, "tact_rh(%s)", expr);
    else if (d == TACT_BFLOAT16) s_put(s, "tact_rbf(%s)", expr);
    else if (ta_dtype_is_float(d)) s_put(s, "(%s)", expr);
    else s_put(s, "(%s)(%s)", s_reg(d), expr);
}

/* Renders a constant of dtype d as a C literal. */
static void s_literal(s_str_t *s, tact_dtype d, ta_value_t v) {
    if (ta_dtype_is_float(d)) {
        double x = ta_dtype_is_half(d) ? (double)(d == TACT_FLOAT16 ? ta_half_to_float(v.h) : ta_bf16_to_float(v.h)) : v.f;
        const char *suf = d == TACT_FLOAT64 ? "" : "f";
        if (isnan(x)) s_put(s, "NAN");
        else if (isinf(x)) s_put(s, x > 0 ? "INFINITY" : "(-INFINITY)");
        else s_put(s, x < 0 ? "(%a%s)" : "%a%s", x, suf);
    } else if (ta_dtype_is_bool(d)) {
        s_put(s, "%d", v.b ? 1 : 0);
    } else if (ta_dtype_is_unsigned(d)) {
        s_put(s, "%" PRIu64 "ull", v.u);
    } else if (v.i == INT64_MIN) {
        s_put(s, "(-9223372036854775807ll-1)");
    } else {
        s_put(s, v.i < 0 ? "(%" PRId64 "ll)" : "%" PRId64 "ll", v.i);
    }
}

/* ---------------------------------------------------------------- nodes */

/* ------------------------------------------------------------------ nodes */

typedef struct {
    const ta_ast_t *a;
    const ta_lir_t *l;
    s_str_t *out;
    ta_sym_arena_t *ar;
    /* Per upcast lane: every dim's index with the vector variable, and
     * with the vector at its first lane (a vector load's base). */
    const ta_sym_t *full[TA_LIR_MAX_LANES][TA_MAX_DIMS], *outi[TA_LIR_MAX_LANES][TA_MAX_DIMS];
    const ta_sym_t *full0[TA_LIR_MAX_LANES][TA_MAX_DIMS], *outi0[TA_LIR_MAX_LANES][TA_MAX_DIMS];
    /* The same over a padded vector dim's whole tiles only (ta_lir_index's whole) */
    const ta_sym_t *fullw[TA_LIR_MAX_LANES][TA_MAX_DIMS], *outiw[TA_LIR_MAX_LANES][TA_MAX_DIMS];
    const ta_sym_t *full0w[TA_LIR_MAX_LANES][TA_MAX_DIMS], *outi0w[TA_LIR_MAX_LANES][TA_MAX_DIMS];
    char names[TA_AST_MAX_NODES][TA_LIR_MAX_LANES][16];
    int argno[TA_AST_MAX_NODES]; /* an argument CONST's argument index */
    int pre[TA_AST_MAX_NODES];   /* computed inside the reduce loops */
    int lane;                    /* the lane being emitted */
    int masked;                  /* emitting the padded dim's last tile */
    int tail;                    /* emitting the short last tile (only the lanes ta_lir_in_tail) */
    int nalu, nval, depth;
    int block[TA_AST_MAX_NODES]; /* a transposed load's block of vectors (tr<n>) */
} s_ctx_t;

static void s_indent(s_ctx_t *c) {
    for (int i = 0; i < c->depth; i++) s_put(c->out, "  ");
}

/* Whether the current lane exists where the printer is (all but the
 * rows past the end of a short last tile). */
static int s_live(const s_ctx_t *c) { return !c->tail || ta_lir_in_tail(c->l, c->lane); }

/* The vector load and store of a buffer of dtype d, in float32 lanes
 * (lowering vectorizes 16-bit ones only where the printer has
 * vector_halves). */
static const char *s_vload(tact_dtype d) { return d == TACT_FLOAT16 ? "tact_vloadh" : d == TACT_BFLOAT16 ? "tact_vloadbf" : "tact_vload"; }
static const char *s_vstore(tact_dtype d) { return d == TACT_FLOAT16 ? "tact_vstoreh" : d == TACT_BFLOAT16 ? "tact_vstorebf" : "tact_vstore"; }

/* A scalar element of a buffer of dtype d as a float: buf[pos] converted. */
static void s_elem(char *out, size_t len, tact_dtype d, int buf, const char *pos) {
    if (d == TACT_FLOAT16) snprintf(out, len, "tact_h2f(data%d[%s])", buf, pos);
    else if (d == TACT_BFLOAT16) snprintf(out, len, "tact_bf2f(data%d[%s])", buf, pos);
    else snprintf(out, len, "data%d[%s]", buf, pos);
}

/* The name of node i's value in the current lane. */
static const char *s_name(const s_ctx_t *c, int i) { return c->names[i][ta_lir_lane_of(c->l, i, c->lane)]; }

/* Node i's source s as a vector operand (a scalar is splat). */
static void s_vec_operand(s_ctx_t *c, s_str_t *e, int i) {
    if (c->l->nodes[i].vector) s_put(e, "%s", s_name(c, i));
    else s_put(e, "tact_vsplat(%s)", s_name(c, i));
}

/* A packed load's place among its distinct lanes (lowering's pack_level):
 * the slot of lane's vector, and in *count how many a step of the inner
 * reduce packs. */
static int s_pack_slot(const ta_lir_t *l, int i, int lane, int *count) {
    int own = ta_lir_lane_of(l, i, lane), slot = 0, n = ta_lir_nlanes(l);
    *count = 0;
    for (int u = 0; u < n; u++)
        if (ta_lir_lane_of(l, i, u) == u) {
            if (u < own) slot++;
            (*count)++;
        }
    return slot;
}

/* Where an A-packed load's value sits in its pack: row tile, step of the
 * inner reduce, its lane's place among the node's distinct lanes. */
static void s_apack_at(s_ctx_t *c, int i, char *at, size_t len) {
    const ta_lir_t *l = c->l;
    const ta_axis_t *t = &l->axes[l->post_level], *k = &l->axes[l->nloops];
    int count, slot = s_pack_slot(l, i, c->lane, &count);
    snprintf(at, len, "apack%d[(%s * %" PRId64 " + %s) * %d + %d]", i, t->name, k->size, k->name, count, slot);
}

/* Renders the position and validity of node n's view in the current lane
 * (base: the vector at its first lane); returns 0 or -1. */
static int s_index(s_ctx_t *c, const ta_ast_node_t *n, int pre, int base, char *pos, size_t pos_len, char *valid,
                   size_t valid_len, int *always, int *never) {
    /* Outside a padded dim's last tile, the index over its whole tiles. */
    int w = ta_lir_has_whole(c->l) && !c->masked;
    const ta_sym_t *const *idx = base ? (pre ? (w ? c->full0w : c->full0)[c->lane] : (w ? c->outi0w : c->outi0)[c->lane])
                                      : (pre ? (w ? c->fullw : c->full)[c->lane] : (w ? c->outiw : c->outi)[c->lane]);
    const ta_sym_t *p, *v;
    if (ta_vstack_expr(&c->a->views[n->view], c->ar, idx, &p, &v) != 0) return -1;
    int64_t k;
    *always = ta_sym_is_const(v, &k) && k != 0;
    *never = ta_sym_is_const(v, &k) && k == 0;
    /* An expression too long for the buffer is an error, never a cut one. */
    if (ta_sym_render(p, pos, pos_len) >= pos_len || ta_sym_render(v, valid, valid_len) >= valid_len) return -1;
    return 0;
}
/* The lanes of the current lane's vector inside the padded dim (may be
 * <= 0 or > the width), as an expression; returns 0 or -1. */
static int s_count(s_ctx_t *c, char *buf, size_t len) {
    const ta_lir_t *l = c->l;
    char idx[4000];
    if (ta_sym_render(c->outi0[c->lane][l->pad_dim], idx, sizeof idx) >= sizeof idx) return -1;
    return snprintf(buf, len, "(%" PRId64 "-(%s))", c->a->shape[l->pad_dim], idx) >= (int)len ? -1 : 0;
}

/* Renders the expression of an ALU node from its sources' names. */
static void s_alu(s_ctx_t *c, s_str_t *e, const ta_ast_node_t *n) {
    const ta_ast_t *a = c->a;
    tact_dtype d = n->dtype, sd = a->nodes[n->src[0]].dtype;
    const char *x = s_name(c, n->src[0]), *y = n->nsrc > 1 ? s_name(c, n->src[1]) : "", *z = n->nsrc > 2 ? s_name(c, n->src[2]) : "";
    char tmp[256];
    int f64 = sd == TACT_FLOAT64, bits = (int)ta_dtype_size(d) * 8;
    switch (n->op) {
    case TA_OP_EXP2: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "exp2" : "tact_exp2f", x); s_round(e, d, tmp); break;
    case TA_OP_LOG2: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "log2" : c->l->target.exact_math ? "tact_xlog2f" : "log2f", x); s_round(e, d, tmp); break;
    case TA_OP_SIN: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "sin" : c->l->target.exact_math ? "tact_xsinf" : "sinf", x); s_round(e, d, tmp); break;
    case TA_OP_SQRT: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "sqrt" : "sqrtf", x); s_round(e, d, tmp); break;
    case TA_OP_RECIP: snprintf(tmp, sizeof tmp, "%s/%s", f64 ? "1.0" : "1.0f", x); s_round(e, d, tmp); break;
    case TA_OP_NEG:
        if (ta_dtype_is_bool(d)) s_put(e, "(!%s)", x);
        else if (ta_dtype_is_float(d)) s_put(e, "(-%s)", x);
        else s_put(e, "(%s)(0-(uint64_t)%s)", s_reg(d), x);
        break;
    case TA_OP_CAST:
        if (ta_dtype_is_bool(d)) s_put(e, "(%s!=0)", x);
        else if (ta_dtype_is_float(sd) && ta_dtype_is_int(d))
            s_put(e, "(%s)%s(%s)", s_reg(d), ta_dtype_is_unsigned(d) && bits == 64 ? "tact_f2u" : "tact_f2i", x);
        else if (ta_dtype_is_half(d)) { snprintf(tmp, sizeof tmp, "(float)%s", x); s_round(e, d, tmp); }
        else s_put(e, "(%s)%s", s_reg(d), x);
        break;
    case TA_OP_ADD:
    case TA_OP_MUL: {
        char op = n->op == TA_OP_ADD ? '+' : '*';
        if (s_signed(d) || (ta_dtype_is_unsigned(d) && ta_dtype_size(d) < 4)) /* wrap; narrow unsigned would become int */
            s_put(e, "(%s)((uint64_t)%s%c(uint64_t)%s)", s_reg(d), x, op, y);
        else if (ta_dtype_is_bool(d)) s_put(e, n->op == TA_OP_ADD ? "(%s|%s)" : "(%s&%s)", x, y);
        else { snprintf(tmp, sizeof tmp, "%s%c%s", x, op, y); s_round(e, d, tmp); }
        break;
    }
    case TA_OP_IDIV:
    case TA_OP_MOD: {
        int div = n->op == TA_OP_IDIV;
        if (ta_dtype_is_float(d)) {
            snprintf(tmp, sizeof tmp, div ? "%s(%s/%s)" : "%s(%s,%s)", div ? (f64 ? "trunc" : "truncf") : (f64 ? "fmod" : "fmodf"), x, y);
            s_round(e, d, tmp);
        } else if (ta_dtype_is_unsigned(d) || ta_dtype_is_bool(d)) {
            s_put(e, "(%s)tact_u%s(%s,%s)", s_reg(d), div ? "div" : "mod", x, y);
        } else {
            s_put(e, "(%s)tact_i%s(%s,%s)", s_reg(d), div ? "div" : "mod", x, y);
        }
        break;
    }
    case TA_OP_MAX:
        if (ta_dtype_is_float(d)) s_put(e, "%s(%s,%s)", d == TACT_FLOAT64 ? "tact_maxd" : "tact_maxf", x, y);
        else s_put(e, "(%s>%s?%s:%s)", x, y, x, y);
        break;
    case TA_OP_CMPLT: s_put(e, "(%s<%s)", x, y); break;
    case TA_OP_CMPNE: s_put(e, "(%s!=%s)", x, y); break;
    case TA_OP_XOR: s_put(e, "(%s)(%s^%s)", s_reg(d), x, y); break;
    case TA_OP_AND: s_put(e, "(%s)(%s&%s)", s_reg(d), x, y); break;
    case TA_OP_OR: s_put(e, "(%s)(%s|%s)", s_reg(d), x, y); break;
    case TA_OP_SHL: s_put(e, "(%s)((uint64_t)%s<<(%s&%d))", s_reg(d), x, y, bits - 1); break;
    case TA_OP_SHR: s_put(e, "(%s)(%s>>(%s&%d))", s_reg(d), x, y, bits - 1); break;
    case TA_OP_WHERE:
        if (ta_dtype_is_float(d) && c->l->target.printer->bit_selects) s_put(e, "%s(%s,%s,%s)", d == TACT_FLOAT64 ? "tact_seld" : "tact_self", x, y, z);
        else s_put(e, "(%s?%s:%s)", x, y, z);
        break;
    case TA_OP_MULACC:
        if (s_signed(d) || (ta_dtype_is_unsigned(d) && ta_dtype_size(d) < 4))
            s_put(e, "(%s)((uint64_t)%s*(uint64_t)%s+(uint64_t)%s)", s_reg(d), x, y, z);
        else if (ta_dtype_is_half(d)) s_put(e, "%s(%s(%s*%s)+%s)", d == TACT_FLOAT16 ? "tact_rh" : "tact_rbf",
                                  d == TACT_FLOAT16 ? "tact_rh" : "tact_rbf", x, y, z);
        else { snprintf(tmp, sizeof tmp, "%s*%s+%s", x, y, z); s_round(e, d, tmp); }
        break;
    default: s_put(e, "0"); break;
    }
}

/* Renders a vector ALU node (every vector kernel is float32, but for the
 * bools of comparisons, which only a WHERE reads). */
static int s_valu(s_ctx_t *c, s_str_t *e, const ta_ast_node_t *n) {
    s_str_t x = {0}, y = {0}, z = {0};
    if (n->op == TA_OP_WHERE) s_put(&x, "0"); /* its condition is read by name */
    else s_vec_operand(c, &x, n->src[0]);
    if (n->nsrc > 1) s_vec_operand(c, &y, n->src[1]);
    if (n->nsrc > 2) s_vec_operand(c, &z, n->src[2]);
    int rc = x.failed || y.failed || z.failed ? -1 : 0;
    switch (n->op) {
    case TA_OP_ADD: s_put(e, "(%s+%s)", x.p, y.p); break;
    case TA_OP_MUL: s_put(e, "(%s*%s)", x.p, y.p); break;
    case TA_OP_NEG: s_put(e, "(-%s)", x.p); break;
    case TA_OP_RECIP: s_put(e, "(1.0f/%s)", x.p); break;
    case TA_OP_MULACC: s_put(e, "(%s*%s+%s)", x.p, y.p, z.p); break;
    case TA_OP_MAX: s_put(e, "tact_vmax(%s,%s)", x.p, y.p); break;
    case TA_OP_EXP2: s_put(e, "tact_vexp2(%s)", x.p); break;
    case TA_OP_LOG2: s_put(e, c->l->target.exact_math ? "tact_vxlog2(%s)" : "tact_vlog2(%s)", x.p); break;
    case TA_OP_SIN: s_put(e, c->l->target.exact_math ? "tact_vxsin(%s)" : "tact_vsin(%s)", x.p); break;
    case TA_OP_SQRT: s_put(e, "tact_vsqrt(%s)", x.p); break;
    case TA_OP_CAST: s_put(e, "%s", x.p); break; /* float32 to float32 */
    case TA_OP_IDIV: s_put(e, "tact_vtrunc(%s/%s)", x.p, y.p); break;
    case TA_OP_MOD: s_put(e, "tact_vfmod(%s,%s)", x.p, y.p); break;
    /* Comparisons give lanes of -1 or 0 (tact_vi), the same answers as
     * the scalar ones, NaN included; WHERE picks the bits of one value. */
    case TA_OP_CMPLT: s_put(e, "(tact_vi)(%s<%s)", x.p, y.p); break;
    case TA_OP_CMPNE: s_put(e, "(tact_vi)(%s!=%s)", x.p, y.p); break;
    case TA_OP_WHERE:
        if (c->l->nodes[n->src[0]].vector) s_put(e, "tact_vsel(%s,%s,%s)", s_name(c, n->src[0]), y.p, z.p);
        else s_put(e, "(%s?%s:%s)", s_name(c, n->src[0]), y.p, z.p);
        break;
    default: rc = -1; break; /* lowering vectorizes float32 kernels (and their comparisons) only */
    }
    ta_free(x.p), ta_free(y.p), ta_free(z.p);
    return rc;
}

/* The sums of a reduce's vector accumulators, all lanes at once (C
 * target): pairs of vectors are folded into one by two shuffles and an
 * add, halving the partials of every accumulator at each level, so m
 * accumulators (m >= W) take m - 1 vector adds instead of m sums of one
 * vector's lanes (fewer than W fold into one vector, then within it).
 * Every add pairs the same partials as tact_vsum's tree (lane l with lane
 * l + w, w = W/2 down to 1), so the bits are the same, and a compiler
 * without __builtin_shufflevector (gcc before 12) takes tact_vsum.  At
 * the first lane, emits the tree and its results red<lane> for every
 * lane; at the others, nothing.  Returns 1 when done, 0 when the
 * accumulators are not a power of two (tact_vsum then). */
static int s_sum_tree(s_ctx_t *c, int node) {
    const ta_lir_t *l = c->l;
    int nl = ta_lir_nlanes(l), acc[TA_LIR_MAX_LANES], m = 0, W = l->width;
    for (int L = 0; L < nl; L++)
        if (ta_lir_lane_of(l, node, L) == L) acc[m++] = L;
    if (m < 2 || (m & (m - 1)) || W < 2) return 0;
    if (c->lane != acc[0]) return 1;
    s_str_t *o = c->out;
    s_put(o, "#if defined(__clang__) || __GNUC__ >= 12\n");
    /* v: the vectors of this level (names), each holding groups of g
     * partials, accumulators in order. */
    char v[TA_LIR_MAX_LANES][16];
    int nv = m, g = W, level = 0;
    for (int k = 0; k < m; k++) snprintf(v[k], sizeof v[k], "acc%d", acc[k]);
    for (; g > 1; g /= 2, level++) {
        int w = g / 2, pairs = nv >= 2 ? nv / 2 : 1;
        for (int q = 0; q < pairs; q++) {
            const char *a = v[2 * q], *b = nv >= 2 ? v[2 * q + 1] : v[2 * q];
            char half[2][512];
            for (int h = 0; h < 2; h++) {
                int len = 0;
                /* a's groups, then b's: lane grp*g + l (+ w for the high half). */
                for (int side = 0; side < 2; side++)
                    for (int grp = 0; grp < W / g; grp++)
                        for (int x = 0; x < w; x++)
                            len += snprintf(half[h] + len, sizeof half[h] - (size_t)len, ", %d", side * W + grp * g + x + h * w);
            }
            s_indent(c);
            s_put(o, "tact_vf hs%d_%d = __builtin_shufflevector(%s, %s%s) + __builtin_shufflevector(%s, %s%s);\n", level, q, a, b, half[0], a, b,
                  half[1]);
        }
        for (int q = 0; q < pairs; q++) snprintf(v[q], sizeof v[q], "hs%d_%d", level, q);
        nv = pairs;
    }
    /* Vector k lane j holds accumulator k * W + j (one vector: lane j, j < m). */
    for (int k = 0; k < m; k++) {
        s_indent(c);
        s_put(o, "float red%d = %s[%d];\n", acc[k], v[k / W], k % W);
    }
    s_put(o, "#else\n");
    for (int k = 0; k < m; k++) {
        s_indent(c);
        s_put(o, "float red%d = tact_vsum(acc%d);\n", acc[k], acc[k]);
    }
    s_put(o, "#endif\n");
    return 1;
}

/* Emits node i for the current lane as a statement (for constants, just a
 * name to use). */
static int s_node(s_ctx_t *c, int i) {
    const ta_ast_node_t *n = &c->a->nodes[i];
    const ta_lir_node_t *ln = &c->l->nodes[i];
    s_str_t *o = c->out;
    char *name = c->names[i][c->lane];
    char pos[4096], valid[4096];
    int always, never;
    tact_dtype d = n->dtype;
    switch (n->op) {
    case TA_OP_CONST: {
        s_str_t lit = {0};
        if (n->arg) s_put(&lit, "arg%d", c->argno[i]);
        else s_literal(&lit, d, n->value);
        if (lit.failed) return -1;
        if (n->view >= 0) {
            if (s_index(c, n, c->pre[i], 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) {
                ta_free(lit.p);
                return -1;
            }
            if (!always) {
                snprintf(name, 16, "alu%d", c->nalu++);
                s_indent(c);
                s_put(o, "%s %s = %s ? %s : 0;\n", s_reg(d), name, never ? "0" : valid, lit.p);
                ta_free(lit.p);
                return 0;
            }
        }
        snprintf(name, 16, n->arg ? "%s" : "(%s)", lit.p);
        if (strlen(lit.p) + 2 >= 16) { /* long literals get a variable */
            snprintf(name, 16, "alu%d", c->nalu++);
            s_indent(c);
            s_put(o, "const %s %s = %s;\n", s_reg(d), name, lit.p);
        }
        ta_free(lit.p);
        return 0;
    }
    case TA_OP_IOTA: { /* the position its view reads (0 where masked) */
        if (s_index(c, n, c->pre[i], 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
        snprintf(name, 16, "alu%d", c->nalu++);
        s_indent(c);
        if (never) s_put(o, "int32_t %s = 0;\n", name);
        else if (always) s_put(o, "int32_t %s = (int32_t)(%s);\n", name, pos);
        else s_put(o, "int32_t %s = (%s) ? (int32_t)(%s) : 0;\n", name, valid, pos);
        return 0;
    }
    case TA_OP_LOAD: {
        snprintf(name, 16, "val%d", c->nval++);
        s_indent(c);
        /* In the padded dim's last tile, only the lanes inside it are read. */
        char cnt[4100] = "";
        if (c->masked && ln->padded && s_count(c, cnt, sizeof cnt) != 0) return -1;
        ta_access_t acc = c->masked ? ln->access_last : ln->access;
        if (acc == TA_ACCESS_HALF) { /* unmasked (lowering) */
            if (s_index(c, n, c->pre[i], 1, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
            if (*cnt) s_put(o, "tact_vf %s = tact_vload_half_n(data%d+%s, %s);\n", name, n->buf, pos, cnt);
            else s_put(o, "tact_vf %s = tact_vload_half(data%d+%s);\n", name, n->buf, pos);
            return 0;
        }
        if (ln->transposed) {
            /* A block of TACT_W vectors along the upcast, one per vector
             * lane, transposed: lane u's vector is row u of the result. */
            int64_t u = ta_lir_digit(c->l, c->lane, c->l->transpose_u);
            if (u == 0) {
                if (s_index(c, n, c->pre[i], 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0 || !always) return -1;
                c->block[i] = c->nval;
                s_put(o, "tact_vf tr%d[TACT_W];\n", c->block[i]);
                s_indent(c);
                s_put(o, "for (int64_t vl = 0; vl < TACT_W; vl++) tr%d[vl] = tact_vload(data%d+%s);\n", c->block[i], n->buf, pos);
                s_indent(c);
                s_put(o, "tact_vtranspose(tr%d);\n", c->block[i]);
                s_indent(c);
            }
            s_put(o, "tact_vf %s = tr%d[%" PRId64 "];\n", name, c->block[i], u);
            return 0;
        }
        if (ln->apacked) { /* from the A pack (s_apacks) */
            char at[200];
            s_apack_at(c, i, at, sizeof at);
            s_put(o, "float %s = %s;\n", name, at);
            return 0;
        }
        if (ln->packed && !c->masked) { /* from the pack (s_packs; a padded dim's last tile has none) */
            int count, slot = s_pack_slot(c->l, i, c->lane, &count);
            const ta_axis_t *k = &c->l->axes[c->l->nloops];
            s_put(o, "tact_vf %s = pack%d[%s * %d + %d];\n", name, i, k->name, count, slot);
            return 0;
        }
        if (acc == TA_ACCESS_CONTIGUOUS) {
            if (s_index(c, n, c->pre[i], 1, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
            if (*cnt) s_put(o, "tact_vf %s = %s_n(data%d+%s, %s);\n", name, s_vload(d), n->buf, pos, cnt);
            else s_put(o, "tact_vf %s = %s(data%d+%s);\n", name, s_vload(d), n->buf, pos);
            return 0;
        }
        if (s_index(c, n, c->pre[i], 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
        if (*cnt && !never) { /* the validity includes the lanes inside */
            char both[8400];
            int len = snprintf(both, sizeof both, "%s%s%s%s%s", acc == TA_ACCESS_GATHER ? "vl < " : "0 < ", cnt, always ? "" : " && (",
                               always ? "" : valid, always ? "" : ")");
            if (len < 0 || len >= (int)sizeof valid) return -1;
            memcpy(valid, both, (size_t)len + 1);
            always = 0;
        }
        char load[4200];
        s_elem(load, sizeof load, d, n->buf, pos);
        if (acc == TA_ACCESS_GATHER) { /* lane by lane */
            s_put(o, "tact_vf %s;\n", name);
            s_indent(c);
            if (never) s_put(o, "for (int64_t vl = 0; vl < TACT_W; vl++) TACT_LANE(%s, vl) = 0;\n", name);
            else if (always) s_put(o, "for (int64_t vl = 0; vl < TACT_W; vl++) TACT_LANE(%s, vl) = %s;\n", name, load);
            else s_put(o, "for (int64_t vl = 0; vl < TACT_W; vl++) TACT_LANE(%s, vl) = (%s) ? %s : 0;\n", name, valid, load);
            return 0;
        }
        /* The same for every lane of a whole tile, but not of the last one:
         * a vector all the same (its users take it as a vector). */
        const char *ty = ln->vector ? "tact_vf" : s_reg(d), *splat = ln->vector ? "tact_vsplat" : "";
        if (never) s_put(o, "%s %s = %s(0);\n", ty, name, splat);
        else if (always) s_put(o, "%s %s = %s(%s);\n", ty, name, splat, load);
        else s_put(o, "%s %s = %s((%s) ? %s : 0);\n", ty, name, splat, valid, load);
        return 0;
    }
    case TA_OP_SUM:
    case TA_OP_RMAX: /* its accumulators were updated in the loops; a VECTOR over the reduced dim is summed here */
        if (c->l->vector >= 0 && c->l->axes[c->l->vector].reduce) {
            snprintf(name, 16, "red%d", c->lane);
            if (n->op != TA_OP_SUM || !c->l->target.printer->sum_tree || !s_sum_tree(c, i)) {
                s_indent(c);
                s_put(o, "float %s = %s(acc%d);\n", name, n->op == TA_OP_SUM ? "tact_vsum" : "tact_vhmax", c->lane);
            }
        } else {
            snprintf(name, 16, "acc%d", c->lane);
        }
        return 0;
    case TA_OP_STORE: {
        const char *x = s_name(c, n->src[0]);
        s_indent(c);
        if (ln->vector) {
            if (s_index(c, n, 0, 1, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
            char cnt[4100];
            int masked = c->masked && ln->padded;
            if (masked && s_count(c, cnt, sizeof cnt) != 0) return -1;
            s_put(o, masked ? "%s_n(data0+%s, " : "%s(data0+%s, ", s_vstore(d), pos);
            if (c->l->nodes[n->src[0]].vector) s_put(o, "%s", x);
            else s_put(o, "tact_vsplat(%s)", x);
            if (masked) s_put(o, ", %s);\n", cnt);
            else s_put(o, ");\n");
            return 0;
        }
        if (s_index(c, n, 0, 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
        if (d == TACT_FLOAT16) s_put(o, "data0[%s] = tact_f2h(%s);\n", pos, x);
        else if (d == TACT_BFLOAT16) s_put(o, "data0[%s] = tact_f2bf(%s);\n", pos, x);
        else s_put(o, "data0[%s] = %s;\n", pos, x);
        return 0;
    }
    case TA_OP_BITCAST: {
        tact_dtype sd = c->a->nodes[n->src[0]].dtype;
        snprintf(name, 16, "alu%d", c->nalu++);
        const char *x = s_name(c, n->src[0]);
        s_indent(c);
        s_put(o, "%s %s; { %s tmp = ", s_reg(d), name, s_mem(sd));
        if (sd == TACT_FLOAT16) s_put(o, "tact_f2h(%s)", x);
        else if (sd == TACT_BFLOAT16) s_put(o, "tact_f2bf(%s)", x);
        else s_put(o, "%s", x);
        if (ta_dtype_is_half(d))
            s_put(o, "; uint16_t bits; memcpy(&bits, &tmp, 2); %s = %s(bits); }\n", name, d == TACT_FLOAT16 ? "tact_h2f" : "tact_bf2f");
        else s_put(o, "; memcpy(&%s, &tmp, sizeof tmp); }\n", name);
        return 0;
    }
    default: {
        s_str_t e = {0};
        int rc = 0;
        if (ln->vector) rc = s_valu(c, &e, n);
        else s_alu(c, &e, n);
        if (rc || e.failed) {
            ta_free(e.p);
            return -1;
        }
        snprintf(name, 16, "alu%d", c->nalu++);
        s_indent(c);
        s_put(o, "%s %s = %s;\n", ln->vector ? (d == TACT_BOOL ? "tact_vi" : "tact_vf") : s_reg(d), name, e.p);
        ta_free(e.p);
        return 0;
    }
    }
}

/* Emits node i once per lane it varies along. */
static int s_emit_node(s_ctx_t *c, int i) {
    int nl = ta_lir_nlanes(c->l), rc = 0;
    for (c->lane = 0; c->lane < nl && !rc; c->lane++)
        if (ta_lir_lane_of(c->l, i, c->lane) == c->lane && s_live(c)) rc = s_node(c, i);
    return rc;
}
/* The reduce identity of dtype d. */
static void s_identity(s_str_t *s, ta_op_t op, tact_dtype d) {
    if (op == TA_OP_SUM) {
        s_put(s, ta_dtype_is_float(d) ? (d == TACT_FLOAT64 ? "0.0" : "0.0f") : "0");
        return;
    }
    if (ta_dtype_is_float(d)) s_put(s, "(-INFINITY)");
    else if (ta_dtype_is_bool(d) || ta_dtype_is_unsigned(d)) s_put(s, "0");
    else s_put(s, "(%s)(-((int64_t)1 << %zu))", s_reg(d), ta_dtype_size(d) * 8 - 1);
}

/* The accumulator update of the reduce for the current lane. */
static int s_update(s_ctx_t *c, const ta_ast_node_t *r) {
    const ta_lir_t *l = c->l;
    int src = r->src[0], vec = l->nodes[src].vector;
    tact_dtype d = r->dtype;
    char acc[16];
    snprintf(acc, sizeof acc, "acc%d", c->lane);
    s_str_t e = {0};
    const ta_ast_node_t *m = &c->a->nodes[src];
    if (l->nodes[src].fused) { /* acc += x*y as one fused multiply-add */
        if (vec) {
            s_str_t x = {0}, y = {0};
            s_vec_operand(c, &x, m->src[0]);
            s_vec_operand(c, &y, m->src[1]);
            s_put(&e, "tact_vfma(%s,%s,%s)", x.p, y.p, acc);
            if (x.failed || y.failed) e.failed = 1;
            ta_free(x.p), ta_free(y.p);
        } else {
            s_put(&e, "%s(%s,%s,%s)", d == TACT_FLOAT64 ? "fma" : "fmaf", s_name(c, m->src[0]), s_name(c, m->src[1]), acc);
        }
    } else if (vec) {
        if (r->op == TA_OP_SUM) s_put(&e, "%s+%s", acc, s_name(c, src));
        else s_put(&e, "tact_vmax(%s,%s)", acc, s_name(c, src));
    } else {
        const char *x = s_name(c, src);
        char upd[300];
        if (r->op == TA_OP_RMAX) {
            if (ta_dtype_is_float(d)) s_put(&e, "%s(%s,%s)", d == TACT_FLOAT64 ? "tact_maxd" : "tact_maxf", acc, x);
            else s_put(&e, "(%s>%s?%s:%s)", acc, x, acc, x);
        } else if (s_signed(d)) {
            s_put(&e, "(%s)((uint64_t)%s+(uint64_t)%s)", s_reg(d), acc, x);
        } else if (ta_dtype_is_bool(d)) {
            s_put(&e, "(%s|%s)", acc, x);
        } else {
            snprintf(upd, sizeof upd, "%s+%s", acc, x);
            s_round(&e, d, upd);
        }
    }
    if (e.failed) return -1;
    s_indent(c);
    s_put(c->out, "%s = %s;\n", acc, e.p);
    ta_free(e.p);
    return 0;
}

/* Emits the pre-reduce (phase 0) or other (phase 1) nodes computed at
 * loop level lv, in AST order, of nodes [from, to). */
static int s_emit_nodes(s_ctx_t *c, int lv, int phase, int from, int to) {
    const ta_lir_t *l = c->l;
    for (int i = from; i < to; i++) {
        const ta_lir_node_t *ln = &l->nodes[i];
        int in_phase = l->reduce < 0 || (phase == 0 ? c->pre[i] : !c->pre[i]);
        if (!in_phase || ln->fused || (phase == 0 && ln->level != lv)) continue;
        if (s_emit_node(c, i)) return -1;
    }
    return 0;
}

static int s_emit_level(s_ctx_t *c, int lv, int phase) { return s_emit_nodes(c, lv, phase, 0, c->a->nnodes); }

static void s_open(s_ctx_t *c, const ta_axis_t *ax) {
    s_indent(c);
    if (c->l->flat && ax == &c->l->axes[1]) s_put(c->out, "{ /* %s: the work item's */\n", ax->name);
    else if (c->l->group && ax == &c->l->axes[1]) /* each item of the group takes every group-th element */
        s_put(c->out, "for (int64_t %s = tact_lid; %s < %" PRId64 "; %s += %d) {\n", ax->name, ax->name, ax->size, ax->name, c->l->group);
    else if (ax->pin >= 0) { /* a gather: the one index its pin says, if in range (lowering) */
        c->lane = 0;
        const char *x = s_name(c, ax->pin);
        s_put(c->out, "for (int64_t %s = (int64_t)%s; %s >= 0 && %s < %" PRId64 "; %s = %" PRId64 ") { /* gather */\n", ax->name, x, ax->name,
              ax->name, ax->size, ax->name, ax->size);
    }
    else s_put(c->out, "for (int64_t %s = 0; %s < %" PRId64 "; %s++) {\n", ax->name, ax->name, ax->size, ax->name);
    c->depth++;
}

static void s_close(s_ctx_t *c);

/* The nodes of level x; on a scatter's outer reduce, its equality, then
 * the step left out when that adds nothing (lowering's skip), but for the
 * first, which writes the outputs' first partial sums (s_reduce); then
 * the rest. */
static int s_level_of(s_ctx_t *c, int x) {
    const ta_axis_t *ax = &c->l->axes[x];
    if (ax->skip < 0) return s_emit_level(c, x, 0);
    if (s_emit_nodes(c, x, 0, 0, ax->skip + 1)) return -1;
    c->lane = 0;
    s_indent(c);
    s_put(c->out, "if (!%s && %s != 0) continue; /* a scatter: nothing to add */\n", s_name(c, ax->skip), ax->name);
    return s_emit_nodes(c, x, 0, ax->skip + 1, c->a->nnodes);
}

/* Node i's vector position in the current lane (its first lane's
 * element), indented for the line that uses it; -1 on error. */
static int s_vpos(s_ctx_t *c, int i, char *pos, size_t len) {
    char valid[4096];
    int always, never;
    if (s_index(c, &c->a->nodes[i], c->pre[i], 1, pos, len, valid, sizeof valid, &always, &never) != 0) return -1;
    s_indent(c);
    return 0;
}

/* The packs (lowering's pack_level): each packed load's vectors for the
 * whole inner reduce, its distinct lanes side by side, copied to an array
 * on the stack before the row tiles read them. */
static int s_packs(s_ctx_t *c) {
    const ta_lir_t *l = c->l;
    const ta_axis_t *k = &l->axes[l->nloops];
    for (int i = 0; i < c->a->nnodes; i++) {
        if (!l->nodes[i].packed) continue;
        int count;
        s_pack_slot(l, i, 0, &count);
        s_indent(c);
        s_put(c->out, "tact_vf pack%d[%" PRId64 "]; /* node %d's vectors, packed */\n", i, k->size * count, i);
        s_indent(c);
        s_put(c->out, "for (int64_t %s = 0; %s < %" PRId64 "; %s++) {\n", k->name, k->name, k->size, k->name);
        c->depth++;
        int nl = ta_lir_nlanes(l), slot = 0;
        for (c->lane = 0; c->lane < nl; c->lane++) {
            char pos[4096];
            if (ta_lir_lane_of(l, i, c->lane) != c->lane) continue;
            if (s_vpos(c, i, pos, sizeof pos) != 0) return -1;
            s_put(c->out, "pack%d[%s * %d + %d] = %s(data%d+%s);\n", i, k->name, count, slot++, s_vload(c->a->nodes[i].dtype), c->a->nodes[i].buf, pos);
        }
        c->lane = 0;
        s_close(c);
    }
    return 0;
}

static void s_close(s_ctx_t *c) {
    c->depth--;
    s_indent(c);
    s_put(c->out, "}\n");
}

/* In each row tile, a share of the next column tile's block of B (its
 * packed loads' rows, rows / row tiles of them): the pack that follows
 * the row tiles finds it in cache.  B's rows lie a matrix row apart, a
 * page or more at 1024 columns, where the hardware's prefetchers do not
 * follow, and a pack waited on each row in turn (one Zen 3 core, 2048^2:
 * 85 -> 89 GFLOPS).  A prefetch changes no value and never faults. */
static int s_prefetch_next(s_ctx_t *c) {
    const ta_lir_t *l = c->l;
    const ta_axis_t *t = &l->axes[l->post_level], *col = &l->axes[l->pack_level], *k = &l->axes[l->nloops];
    int64_t share = (k->size + t->size - 1) / t->size;
    for (int i = 0; i < c->a->nnodes; i++) {
        if (!l->nodes[i].packed) continue;
        s_indent(c);
        s_put(c->out, "for (int64_t pf = %s * %" PRId64 "; pf < %s * %" PRId64 " + %" PRId64 " && pf < %" PRId64 "; pf++) { /* the next column tile's rows */\n",
              t->name, share, t->name, share, share, k->size);
        c->depth++;
        s_indent(c);
        s_put(c->out, "const int64_t next = %s + 1;\n", col->name);
        s_indent(c);
        s_put(c->out, "{\n");
        c->depth++;
        s_indent(c);
        s_put(c->out, "const int64_t %s = next, %s = pf;\n", col->name, k->name);
        int nl = ta_lir_nlanes(l);
        for (c->lane = 0; c->lane < nl; c->lane++) {
            char pos[4096];
            if (ta_lir_lane_of(l, i, c->lane) != c->lane) continue;
            if (s_vpos(c, i, pos, sizeof pos) != 0) return -1;
            s_put(c->out, "__builtin_prefetch(data%d+%s);\n", c->a->nodes[i].buf, pos);
        }
        c->lane = 0;
        s_close(c);
        s_close(c);
    }
    return 0;
}

/* The A packs (lowering's apack_level): each A-packed load's values for
 * every row tile of the item and the whole inner reduce block, its rows
 * side by side; the short last tile's rows alone. */
static int s_apacks(s_ctx_t *c) {
    const ta_lir_t *l = c->l;
    const ta_axis_t *t = &l->axes[l->post_level], *k = &l->axes[l->nloops];
    int tail = l->tail_rows && l->tail_axis == l->post_level;
    for (int i = 0; i < c->a->nnodes; i++) {
        if (!l->nodes[i].apacked) continue;
        int count;
        s_pack_slot(l, i, 0, &count);
        s_indent(c);
        s_put(c->out, "float apack%d[%" PRId64 "]; /* node %d's values, packed */\n", i, t->size * k->size * count, i);
        for (int last = 0; last <= tail; last++) {
            int64_t from = last ? t->size - 1 : 0, to = tail && !last ? t->size - 1 : t->size; /* the last tile apart */
            s_indent(c);
            s_put(c->out, "for (int64_t %s = %" PRId64 "; %s < %" PRId64 "; %s++) {\n", t->name, from, t->name, to, t->name);
            c->depth++;
            s_indent(c);
            s_put(c->out, "for (int64_t %s = 0; %s < %" PRId64 "; %s++) {\n", k->name, k->name, k->size, k->name);
            c->depth++;
            c->tail = last;
            int nl = ta_lir_nlanes(l);
            for (c->lane = 0; c->lane < nl; c->lane++) {
                if (ta_lir_lane_of(l, i, c->lane) != c->lane || !s_live(c)) continue;
                char pos[4096], valid[4096], at[200];
                int always, never;
                if (s_index(c, &c->a->nodes[i], c->pre[i], 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0 || !always) return -1;
                s_apack_at(c, i, at, sizeof at);
                s_indent(c);
                s_put(c->out, "%s = data%d[%s];\n", at, c->a->nodes[i].buf, pos);
            }
            c->lane = 0;
            c->tail = 0;
            s_close(c);
            s_close(c);
        }
    }
    return 0;
}

/* The accumulators, the reduce's loops and the update, then what follows
 * the reduce. */
static int s_reduce(s_ctx_t *c) {
    const ta_lir_t *l = c->l;
    const ta_ast_t *a = c->a;
    const ta_ast_node_t *r = &a->nodes[l->reduce];
    int vec = l->nodes[r->src[0]].vector, nl = ta_lir_nlanes(l), status = 0;
    /* Under an outer block of the reduce, the partial sums wait in the
     * output (a SUM stored as is: lowering checks). */
    const ta_axis_t *outer = NULL;
    for (int x = 1; x <= l->post_level; x++)
        if (l->axes[x].outer) outer = &l->axes[x];
    for (c->lane = 0; c->lane < nl && !status; c->lane++) {
        if (ta_lir_lane_of(l, l->reduce, c->lane) != c->lane || !s_live(c)) continue;
        s_str_t id = {0};
        if (vec) s_put(&id, "tact_vsplat(");
        s_identity(&id, r->op, r->dtype);
        if (vec) s_put(&id, ")");
        s_indent(c);
        s_put(c->out, "%s acc%d = ", vec ? "tact_vf" : s_reg(r->dtype), c->lane);
        if (outer) {
            const ta_ast_node_t *st = &a->nodes[a->nnodes - 1];
            char pos[4096], valid[4096];
            int always, never;
            status = s_index(c, st, 0, l->nodes[a->nnodes - 1].vector, pos, sizeof pos, valid, sizeof valid, &always, &never);
            char cnt[4100]; /* in a padded dim's last tile, only the lanes inside it */
            int masked = c->masked && l->nodes[a->nnodes - 1].padded;
            if (!status && masked) status = s_count(c, cnt, sizeof cnt);
            if (vec && masked) s_put(c->out, "%s == 0 ? %s : tact_vload_n(data0+%s, %s);\n", outer->name, id.p, pos, cnt);
            else if (vec) s_put(c->out, "%s == 0 ? %s : tact_vload(data0+%s);\n", outer->name, id.p, pos);
            else s_put(c->out, "%s == 0 ? %s : data0[%s];\n", outer->name, id.p, pos);
        } else {
            s_put(c->out, "%s;\n", id.p);
        }
        if (id.failed) status = -1;
        ta_free(id.p);
    }
    for (int x = l->post_level + 1; x <= l->nloops && !status; x++) {
        s_open(c, &l->axes[x]);
        status = s_emit_level(c, x, 0);
    }
    /* A scatter's first step writes the partial sums whatever its
     * equality; a term it does not pick is never added (a NaN or an
     * infinity in a row it does not pick stays out of the sum). */
    if (outer && outer->skip >= 0) {
        c->lane = 0;
        s_indent(c);
        s_put(c->out, "if (%s) {\n", s_name(c, outer->skip));
        c->depth++;
    }
    for (c->lane = 0; c->lane < nl && !status; c->lane++)
        if (ta_lir_lane_of(l, l->reduce, c->lane) == c->lane && s_live(c)) status = s_update(c, r);
    if (outer && outer->skip >= 0) s_close(c);
    for (int x = l->post_level + 1; x <= l->nloops; x++) s_close(c);
    if (l->group && !status) {
        /* The group's partial results meet in local memory and are
         * combined in a fixed tree; the first item finishes the output. */
        const char *barrier = l->target.printer->barrier;
        s_indent(c);
        s_put(c->out, "tact_part[tact_lid] = acc0;\n");
        s_indent(c);
        s_put(c->out, "%s\n", barrier);
        s_indent(c);
        s_put(c->out, "for (int w = %d; w > 0; w >>= 1) {\n", l->group / 2);
        s_indent(c);
        s_put(c->out, "  if (tact_lid < w) tact_part[tact_lid] = %s;\n",
              r->op == TA_OP_SUM ? "tact_part[tact_lid] + tact_part[tact_lid + w]" : "tact_maxf(tact_part[tact_lid], tact_part[tact_lid + w])");
        s_indent(c);
        s_put(c->out, "  %s\n", barrier);
        s_indent(c);
        s_put(c->out, "}\n");
        s_indent(c);
        s_put(c->out, "if (tact_lid == 0) {\n");
        c->depth++;
        s_indent(c);
        s_put(c->out, "acc0 = tact_part[0];\n");
        status = s_emit_level(c, 0, 1);
        s_close(c);
        return status;
    }
    return status ? status : s_emit_level(c, 0, 1);
}

/* The loops from level x to post_level with what each computes, then the
 * reduce.  Inside the padded dim's loop (or a short last tile's) the
 * body comes twice: for the whole tiles, and for the last one.  (Recursion over the IR's
 * axes: at most TA_LIR_MAX_AXES deep.) */
static int s_loops(s_ctx_t *c, int x) {
    const ta_lir_t *l = c->l;
    if (x > l->post_level) return l->reduce >= 0 ? s_reduce(c) : 0;
    s_open(c, &l->axes[x]);
    if (x == l->post_level && l->pack_level && s_prefetch_next(c)) return -1;
    int status;
    /* The padded dim's loop, or the loop of a short last tile: its last
     * iteration printed apart (masked lanes, or only the tail's rows). */
    int *last = x == l->pad && !c->masked ? &c->masked : l->tail_rows && x == l->tail_axis ? &c->tail : NULL;
    if (last) {
        s_indent(c);
        s_put(c->out, "if (%s < %" PRId64 ") {\n", l->axes[x].name, last == &c->masked ? l->pad_full : l->axes[x].size - 1);
        c->depth++;
        status = s_emit_level(c, x, 0) || (x == l->pack_level && s_packs(c)) || (x == l->apack_level && s_apacks(c)) || s_loops(c, x + 1);
        c->depth--;
        s_indent(c);
        if (last == &c->masked) s_put(c->out, "} else { /* the last tile, past the end of dim %d */\n", l->pad_dim);
        else s_put(c->out, "} else { /* the last tile, %" PRId64 " rows */\n", l->tail_rows);
        c->depth++;
        *last = 1;
        if (!status) status = s_emit_level(c, x, 0) || s_loops(c, x + 1);
        *last = 0;
        c->depth--;
        s_indent(c);
        s_put(c->out, "}\n");
    } else {
        status = s_level_of(c, x) || (x == l->pack_level && s_packs(c)) || (x == l->apack_level && s_apacks(c)) || s_loops(c, x + 1);
    }
    s_close(c);
    return status;
}

static const char *s_kind_name(ta_axis_kind_t k) {
    static const char *n[] = {"global", "loop", "reduce", "upcast", "vector"};
    return n[k];
}

int ta_render_c_for(const ta_ast_t *a, const ta_target_t *t, char **src, char *name, size_t name_len, int64_t *align, int *width,
                    ta_error_t *err) {
    *src = NULL;
    int rc = ta_ast_check(a, err);
    if (rc != TACT_OK) return rc;
    ta_ast_name(a, name, name_len);
    /* Strict mode: float64's would be the platform's math library's
     * (the client refuses them at the op; autograd's ops end here). */
    for (int i = 0; t->exact_math && i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        if ((n->op == TA_OP_LOG2 || n->op == TA_OP_SIN || n->op == TA_OP_EXP2) && a->nodes[n->src[0]].dtype == TACT_FLOAT64)
            return ta_error_set(err, TACT_EDTYPE, "kernel %s: strict mode: %s of float64 comes from the platform's math library, whose bits change with its version",
                                name, ta_op_name(n->op));
    }
    s_ctx_t *cp = ta_calloc(1, sizeof *cp); /* the name tables are large for a stack */
    ta_lir_t *l = ta_malloc(sizeof *l);
    ta_ast_t *m = ta_malloc(sizeof *m); /* its dims merged */
    if (!cp || !l || !m) {
        ta_free(cp), ta_free(l), ta_free(m);
        return ta_error_set(err, TACT_ENOMEM, "render: out of memory");
    }
    *m = *a;
    ta_ast_merge_dims(m);
    a = m;
    if ((rc = ta_lower(a, t, l, err)) != TACT_OK) {
        ta_free(cp), ta_free(l), ta_free(m);
        return rc;
    }
    s_str_t o = {0};
#define c (*cp)
    c.a = a;
    c.l = l;
    c.out = &o;
    c.ar = ta_sym_arena_new();
    int status = c.ar ? 0 : -1;
    int nl = ta_lir_nlanes(l);
    int whole = ta_lir_has_whole(l); /* (else s_index never reads the whole tiles' sets) */
    for (int lane = 0; lane < nl && !status; lane++)
        status = ta_lir_index(l, c.ar, lane, 0, 0, c.full[lane], c.outi[lane]) || ta_lir_index(l, c.ar, lane, 1, 0, c.full0[lane], c.outi0[lane]) ||
                 (whole && (ta_lir_index(l, c.ar, lane, 0, 1, c.fullw[lane], c.outiw[lane]) ||
                            ta_lir_index(l, c.ar, lane, 1, 1, c.full0w[lane], c.outi0w[lane])));
    if (l->reduce >= 0) {
        int stack[TA_AST_MAX_NODES], n = 0;
        stack[n++] = a->nodes[l->reduce].src[0];
        while (n) {
            int i = stack[--n];
            if (c.pre[i]) continue;
            c.pre[i] = 1;
            for (int s = 0; s < a->nodes[i].nsrc; s++) stack[n++] = a->nodes[i].src[s];
        }
    }
    /* A flat launch's work item computes align / size outputs (not
     * contiguous ones: the launch only counts items). */
    *align = l->flat ? l->align / l->axes[1].size : l->align;
    if (width) *width = l->width > 1 ? l->width : 1;
    const ta_printer_t *pr = t->printer;

    /* Vector helpers, then the kernel: what it fuses and how it is cut. */
    if (l->width > 1) pr->vectors(&o, l->width);
    s_put(&o, "/* %s: fuses graph nodes", name);
    for (int i = 0; i < a->nfused; i++) s_put(&o, " %" PRIu64, a->fused[i]);
    s_put(&o, "\n   %" PRId64 " output%s per work item", l->align, l->align == 1 ? "" : "s");
    for (int x = 1; x < l->naxes; x++) s_put(&o, "%s %s %s %" PRId64, x == 1 ? ";" : ",", s_kind_name(l->axes[x].kind), l->axes[x].name, l->axes[x].size);
    pr->signature(&o, a, l, name);
    /* Scalars that are not structural come as arguments (the same program
     * serves every value). */
    if (!a->nargs) s_put(&o, "  (void)args;\n");
    for (int i = 0, j = 0; i < a->nnodes; i++) {
        const ta_ast_node_t *n = &a->nodes[i];
        if (!n->arg) continue;
        c.argno[i] = j;
        if (ta_dtype_is_float(n->dtype)) s_put(&o, "  const %s arg%d = (%s)tact_argf(args[%d]);\n", s_reg(n->dtype), j, s_reg(n->dtype), j);
        else s_put(&o, "  const %s arg%d = (%s)args[%d];\n", s_reg(n->dtype), j, s_reg(n->dtype), j);
        j++;
    }
    pr->items(&o, l);
    c.depth = 2;
    if (!status) status = s_emit_level(&c, 0, 0) || s_loops(&c, 1);
    s_put(&o, "  }\n}\n");
    ta_sym_arena_destroy(&c.ar);
#undef c
    ta_free(cp);
    ta_free(l);
    ta_free(m);
    if (status || o.failed) {
        ta_free(o.p);
        return ta_error_set(err, TACT_ENOMEM, "render %s: an index expression too long, or out of memory", name);
    }
    *src = o.p;
    return TACT_OK;
}

int ta_render_c(const ta_ast_t *a, char **src, char *name, size_t name_len, int64_t *align, ta_error_t *err) {
    ta_target_t t = ta_target_host();
    return ta_render_c_for(a, &t, src, name, name_len, align, NULL, err);
}
