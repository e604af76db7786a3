/* render.c - renders a kernel AST as a readable C function (STYLE.md: names, fused-node comment, loop depth). */
#include "render.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"

/* ------------------------------------------------------------ the prelude */

static const char s_prelude[] =
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "#include <math.h>\n"
    "/* 16-bit floats: stored as bits, computed in float, rounded after every op.\n"
    "   NaNs keep their bits both ways (arithmetic makes them quiet anyway), so\n"
    "   a bitcast through a float register is exact. */\n"
    "static inline float tact_h2f(uint16_t h) {\n"
    "  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;\n"
    "  if (e == 31) u = s | 0x7f800000u | (m << 13);\n"
    "  else if (e) u = s | ((e + 112) << 23) | (m << 13);\n"
    "  else if (!m) u = s;\n"
    "  else { e = 113; while (!(m & 1024)) { m <<= 1; e--; } u = s | (e << 23) | ((m & 1023) << 13); }\n"
    "  float f; memcpy(&f, &u, 4); return f;\n"
    "}\n"
    "static inline uint16_t tact_f2h(float f) {\n"
    "  uint32_t u; memcpy(&u, &f, 4);\n"
    "  uint32_t s = (u >> 16) & 0x8000, a = u & 0x7fffffffu;\n"
    "  if (a > 0x7f800000u) { uint32_t m = (a >> 13) & 0x3ff; return (uint16_t)(s | 0x7c00 | (m ? m : 0x200)); }\n"
    "  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00);\n"
    "  if (a < 0x38800000u) {\n"
    "    if (a < 0x33000000u) return (uint16_t)s;\n"
    "    uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000, sh = 126 - e;\n"
    "    uint32_t r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);\n"
    "    if (rem > half || (rem == half && (r & 1))) r++;\n"
    "    return (uint16_t)(s | r);\n"
    "  }\n"
    "  uint32_t r = a - 0x38000000u, h = r >> 13, rem = r & 0x1fff;\n"
    "  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;\n"
    "  return (uint16_t)(s | h);\n"
    "}\n"
    "static inline float tact_bf2f(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }\n"
    "static inline uint16_t tact_f2bf(float f) {\n"
    "  uint32_t u; memcpy(&u, &f, 4);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | ((u >> 16) & 0x7f ? 0 : 0x40));\n"
    "  u += 0x7fffu + ((u >> 16) & 1); return (uint16_t)(u >> 16);\n"
    "}\n"
    "static inline float tact_rh(float x) { return tact_h2f(tact_f2h(x)); }\n"
    "/* A kernel argument: a float's value travels as a float64's bits. */\n"
    "static inline double tact_argf(uint64_t w) { double d; memcpy(&d, &w, 8); return d; }\n"
    "static inline float tact_rbf(float x) { return tact_bf2f(tact_f2bf(x)); }\n"
    "/* Integer division and modulo truncate toward zero; by zero they give 0. */\n"
    "static inline int64_t tact_idiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; }\n"
    "static inline int64_t tact_imod(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }\n"
    "static inline uint64_t tact_udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }\n"
    "static inline uint64_t tact_umod(uint64_t a, uint64_t b) { return b ? a % b : 0; }\n"
    "/* max propagates NaN from either side. */\n"
    "static inline float tact_maxf(float a, float b) { return a != a || a > b ? a : b; }\n"
    "static inline double tact_maxd(double a, double b) { return a != a || a > b ? a : b; }\n"
    "/* float -> int: NaN gives 0, out of the int64 range saturates, then C truncation. */\n"
    "static inline int64_t tact_f2i(double x) {\n"
    "  return x != x ? 0 : x >= 9223372036854775807.0 ? INT64_MAX : x <= -9223372036854775808.0 ? INT64_MIN : (int64_t)x;\n"
    "}\n"
    "static inline uint64_t tact_f2u(double x) {\n"
    "  return x >= 0 && x < 18446744073709551616.0 ? (uint64_t)x : (uint64_t)tact_f2i(x);\n"
    "}\n";

const char *ta_render_prelude(void) { return s_prelude; }

/* ------------------------------------------------------- a string builder */

typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} s_str_t;

__attribute__((format(printf, 2, 3))) static void s_put(s_str_t *s, const char *fmt, ...) {
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
    return d == TACT_FLOAT16 || d == TACT_BFLOAT16 ? "uint16_t" : s_reg(d);
}

static int s_is16(tact_dtype d) { return d == TACT_FLOAT16 || d == TACT_BFLOAT16; }
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
        double x = s_is16(d) ? (double)(d == TACT_FLOAT16 ? ta_half_to_float(v.h) : ta_bf16_to_float(v.h)) : v.f;
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

/* Reduce kernels compute a tile of outputs per loop iteration (lanes): up
 * to 8 neighbours along the innermost output dim, so their loads are
 * contiguous and vectorize, times up to 4 along the next dim, so each load
 * of the innermost operand serves 4 rows (a matmul's B row is reused). */
#define S_MAX_COLS 8
#define S_MAX_ROWS 4
#define S_MAX_LANES (S_MAX_COLS * S_MAX_ROWS)

typedef struct {
    const ta_ast_t *a;
    s_str_t *out;
    ta_sym_arena_t *ar;
    const ta_sym_t **full_idx, **out_idx; /* the current lane's */
    const ta_sym_t *lane_full[S_MAX_LANES][TA_MAX_DIMS], *lane_out[S_MAX_LANES][TA_MAX_DIMS];
    int nlanes, lane;
    char names[S_MAX_LANES][TA_AST_MAX_NODES][16];
    char *load_pos[S_MAX_LANES][TA_AST_MAX_NODES], *load_valid[S_MAX_LANES][TA_AST_MAX_NODES]; /* rendered loads, per lane */
    int pre[TA_AST_MAX_NODES]; /* computed inside the reduce loop */
    int argno[TA_AST_MAX_NODES]; /* an argument CONST's argument index */
    int nalu, nval;
    int depth;
} s_ctx_t;

static void s_indent(s_ctx_t *c) {
    for (int i = 0; i < c->depth; i++) s_put(c->out, "  ");
}

/* Renders the position and validity of node n's view; returns 0 or -1. */
static int s_index(s_ctx_t *c, const ta_ast_node_t *n, int pre, char *pos, size_t pos_len, char *valid,
                   size_t valid_len, int *always, int *never) {
    const ta_sym_t *p, *v;
    if (ta_vstack_expr(&c->a->views[n->view], c->ar, pre ? c->full_idx : c->out_idx, &p, &v) != 0) return -1;
    int64_t k;
    *always = ta_sym_is_const(v, &k) && k != 0;
    *never = ta_sym_is_const(v, &k) && k == 0;
    /* An expression too long for the buffer is an error, never a cut one. */
    if (ta_sym_render(p, pos, pos_len) >= pos_len || ta_sym_render(v, valid, valid_len) >= valid_len) return -1;
    return 0;
}

/* Renders the expression of an ALU node from its sources' names. */
static void s_alu(s_ctx_t *c, s_str_t *e, const ta_ast_node_t *n) {
    const ta_ast_t *a = c->a;
    tact_dtype d = n->dtype, sd = a->nodes[n->src[0]].dtype;
    const char *x = c->names[c->lane][n->src[0]], *y = n->nsrc > 1 ? c->names[c->lane][n->src[1]] : "",
               *z = n->nsrc > 2 ? c->names[c->lane][n->src[2]] : "";
    char tmp[256];
    int f64 = sd == TACT_FLOAT64, bits = (int)ta_dtype_size(d) * 8;
    switch (n->op) {
    case TA_OP_EXP2: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "exp2" : "exp2f", x); s_round(e, d, tmp); break;
    case TA_OP_LOG2: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "log2" : "log2f", x); s_round(e, d, tmp); break;
    case TA_OP_SIN: snprintf(tmp, sizeof tmp, "%s(%s)", f64 ? "sin" : "sinf", x); s_round(e, d, tmp); break;
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
        else if (s_is16(d)) { snprintf(tmp, sizeof tmp, "(float)%s", x); s_round(e, d, tmp); }
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
    case TA_OP_WHERE: s_put(e, "(%s?%s:%s)", x, y, z); break;
    case TA_OP_MULACC:
        if (s_signed(d) || (ta_dtype_is_unsigned(d) && ta_dtype_size(d) < 4))
            s_put(e, "(%s)((uint64_t)%s*(uint64_t)%s+(uint64_t)%s)", s_reg(d), x, y, z);
        else if (s_is16(d)) s_put(e, "%s(%s(%s*%s)+%s)", d == TACT_FLOAT16 ? "tact_rh" : "tact_rbf",
                                  d == TACT_FLOAT16 ? "tact_rh" : "tact_rbf", x, y, z);
        else { snprintf(tmp, sizeof tmp, "%s*%s+%s", x, y, z); s_round(e, d, tmp); }
        break;
    default: s_put(e, "0"); break;
    }
}

/* Emits node i as a statement (or, for constants, just a name to use). */
static int s_node(s_ctx_t *c, int i) {
    const ta_ast_node_t *n = &c->a->nodes[i];
    s_str_t *o = c->out;
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
            if (s_index(c, n, c->pre[i], pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) {
                ta_free(lit.p);
                return -1;
            }
            if (!always) {
                snprintf(c->names[c->lane][i], sizeof c->names[c->lane][i], "alu%d", c->nalu++);
                s_indent(c);
                s_put(o, "%s %s = %s ? %s : 0;\n", s_reg(d), c->names[c->lane][i], never ? "0" : valid, lit.p);
                ta_free(lit.p);
                return 0;
            }
        }
        snprintf(c->names[c->lane][i], sizeof c->names[c->lane][i], "(%s)", lit.p);
        if (strlen(lit.p) + 2 >= sizeof c->names[c->lane][i]) { /* long literals get a variable */
            snprintf(c->names[c->lane][i], sizeof c->names[c->lane][i], "alu%d", c->nalu++);
            s_indent(c);
            s_put(o, "const %s %s = %s;\n", s_reg(d), c->names[c->lane][i], lit.p);
        }
        ta_free(lit.p);
        return 0;
    }
    case TA_OP_LOAD: {
        if (s_index(c, n, c->pre[i], pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
        /* Lanes of a tile often load the same element (a matmul's row of A
         * for every column): the earlier lane's value is used again. */
        for (int l = 0; l < c->lane; l++)
            if (c->load_pos[l][i] && strcmp(c->load_pos[l][i], pos) == 0 && strcmp(c->load_valid[l][i], valid) == 0) {
                memcpy(c->names[c->lane][i], c->names[l][i], sizeof c->names[l][i]);
                return 0;
            }
        if (c->nlanes > 1) {
            c->load_pos[c->lane][i] = ta_strdup(pos);
            c->load_valid[c->lane][i] = ta_strdup(valid);
            if (!c->load_pos[c->lane][i] || !c->load_valid[c->lane][i]) return -1;
        }
        snprintf(c->names[c->lane][i], sizeof c->names[c->lane][i], "val%d", c->nval++);
        char load[4200];
        if (d == TACT_FLOAT16) snprintf(load, sizeof load, "tact_h2f(data%d[%s])", n->buf, pos);
        else if (d == TACT_BFLOAT16) snprintf(load, sizeof load, "tact_bf2f(data%d[%s])", n->buf, pos);
        else snprintf(load, sizeof load, "data%d[%s]", n->buf, pos);
        s_indent(c);
        if (never) s_put(o, "%s %s = 0;\n", s_reg(d), c->names[c->lane][i]);
        else if (always) s_put(o, "%s %s = %s;\n", s_reg(d), c->names[c->lane][i], load);
        else s_put(o, "%s %s = (%s) ? %s : 0;\n", s_reg(d), c->names[c->lane][i], valid, load);
        return 0;
    }
    case TA_OP_SUM:
    case TA_OP_RMAX: {
        /* The accumulator was declared before the reduce loop; update it. */
        s_str_t e = {0};
        const char *x = c->names[c->lane][n->src[0]];
        char upd[300], acc[16];
        snprintf(acc, sizeof acc, "acc%d", c->lane);
        if (n->op == TA_OP_RMAX) {
            if (ta_dtype_is_float(d)) snprintf(upd, sizeof upd, "%s(%s,%s)", d == TACT_FLOAT64 ? "tact_maxd" : "tact_maxf", acc, x);
            else snprintf(upd, sizeof upd, "(%s>%s?%s:%s)", acc, x, acc, x);
            s_put(&e, "%s", upd);
        } else if (s_signed(d)) {
            s_put(&e, "(%s)((uint64_t)%s+(uint64_t)%s)", s_reg(d), acc, x);
        } else if (ta_dtype_is_bool(d)) {
            s_put(&e, "(%s|%s)", acc, x);
        } else {
            snprintf(upd, sizeof upd, "%s+%s", acc, x);
            s_round(&e, d, upd);
        }
        if (e.failed) return -1;
        s_indent(c);
        s_put(o, "%s = %s;\n", acc, e.p);
        ta_free(e.p);
        snprintf(c->names[c->lane][i], sizeof c->names[c->lane][i], "%s", acc);
        return 0;
    }
    case TA_OP_STORE: {
        if (s_index(c, n, 0, pos, sizeof pos, valid, sizeof valid, &always, &never) != 0) return -1;
        const char *x = c->names[c->lane][n->src[0]];
        s_indent(c);
        if (d == TACT_FLOAT16) s_put(o, "data0[%s] = tact_f2h(%s);\n", pos, x);
        else if (d == TACT_BFLOAT16) s_put(o, "data0[%s] = tact_f2bf(%s);\n", pos, x);
        else s_put(o, "data0[%s] = %s;\n", pos, x);
        return 0;
    }
    case TA_OP_BITCAST: {
        tact_dtype sd = c->a->nodes[n->src[0]].dtype;
        snprintf(c->names[c->lane][i], sizeof c->names[c->lane][i], "alu%d", c->nalu++);
        const char *x = c->names[c->lane][n->src[0]];
        s_indent(c);
        s_put(o, "%s %s; { %s tmp = ", s_reg(d), c->names[c->lane][i], s_mem(sd));
        if (sd == TACT_FLOAT16) s_put(o, "tact_f2h(%s)", x);
        else if (sd == TACT_BFLOAT16) s_put(o, "tact_f2bf(%s)", x);
        else s_put(o, "%s", x);
        if (s_is16(d))
            s_put(o, "; uint16_t bits; memcpy(&bits, &tmp, 2); %s = %s(bits); }\n", c->names[c->lane][i],
                  d == TACT_FLOAT16 ? "tact_h2f" : "tact_bf2f");
        else s_put(o, "; memcpy(&%s, &tmp, sizeof tmp); }\n", c->names[c->lane][i]);
        return 0;
    }
    default: {
        s_str_t e = {0};
        s_alu(c, &e, n);
        if (e.failed) return -1;
        snprintf(c->names[c->lane][i], sizeof c->names[c->lane][i], "alu%d", c->nalu++);
        s_indent(c);
        s_put(o, "%s %s = %s;\n", s_reg(d), c->names[c->lane][i], e.p);
        ta_free(e.p);
        return 0;
    }
    }
}

/* Marks the reduce's source subtree: it runs inside the reduce loop. */
static void s_mark_pre(s_ctx_t *c, int i) {
    if (c->pre[i]) return;
    c->pre[i] = 1;
    for (int s = 0; s < c->a->nodes[i].nsrc; s++) s_mark_pre(c, c->a->nodes[i].src[s]);
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

int ta_render_c(const ta_ast_t *a, char **src, char *name, size_t name_len, int64_t *align, ta_error_t *err) {
    *src = NULL;
    int rc = ta_ast_check(a, err);
    if (rc != TACT_OK) return rc;
    ta_ast_name(a, name, name_len);
    s_str_t o = {0};
    s_ctx_t *cp = ta_calloc(1, sizeof *cp); /* the name tables are large for a stack */
    if (!cp) return ta_error_set(err, TACT_ENOMEM, "render: out of memory");
#define c (*cp)
    c.a = a;
    c.out = &o;
    c.ar = ta_sym_arena_new();
    if (!c.ar) {
        ta_free(cp);
        return ta_error_set(err, TACT_ENOMEM, "render: out of memory");
    }

    /* Index variables: the output group index gidx0 (lanes outputs each),
     * and one per reduced dim. */
    int64_t out_shape[TA_MAX_DIMS], numel = 1, inner = 1, second = 1;
    for (int k = 0; k < a->ndim; k++) {
        out_shape[k] = a->reduce_mask >> k & 1 ? 1 : a->shape[k];
        numel *= out_shape[k];
        if (out_shape[k] > 1) second = inner, inner = out_shape[k];
    }
    /* Tiles only for kernels without masked (padded) loads: gcc 12 at -O3
     * miscompiled the vectorized tile of a masked multi-axis reduce (the
     * rendered C was right; -O2 gave the right answer). */
    int masked = 0;
    for (int v = 0; v < a->nviews; v++)
        for (int w = 0; w < a->views[v].nviews; w++) masked |= a->views[v].views[w].has_mask;
    int cols = 1, rows = 1;
    if (a->reduce_mask && !masked) {
        for (int l = S_MAX_COLS; l > 1 && cols == 1; l /= 2)
            if (inner % l == 0) cols = l;
        for (int r = S_MAX_ROWS; r > 1 && rows == 1 && cols > 1; r /= 2)
            if (second % r == 0) rows = r;
    }
    c.nlanes = rows * cols;
    /* One work item: rows whole rows of the innermost dim when tiling rows,
     * else cols neighbouring outputs; the launcher aligns ranges to it. */
    int64_t item = rows > 1 ? rows * inner : cols;
    *align = item;
    int64_t groups = numel / item;
    const ta_sym_t *gidx = ta_sym_var(c.ar, 0, "gidx0", 0, groups > 0 ? groups - 1 : 0);
    int nred = 0, red_dims[TA_MAX_DIMS];
    const ta_sym_t *ridx[TA_MAX_DIMS];
    for (int k = 0; k < a->ndim; k++)
        if (a->reduce_mask >> k & 1) {
            char vname[16];
            snprintf(vname, sizeof vname, "ridx%d", nred);
            red_dims[nred] = k;
            ridx[nred] = ta_sym_var(c.ar, 1 + nred, vname, 0, a->shape[k] > 0 ? a->shape[k] - 1 : 0);
            nred++;
        }
    const ta_sym_t *gcol = rows > 1 ? ta_sym_var(c.ar, 1 + nred, "gidx1", 0, inner / cols - 1) : NULL;
    for (int l = 0; l < c.nlanes; l++) {
        /* Lane l is output (row u, column v) of the tile. */
        int u = l / cols, v = l % cols;
        const ta_sym_t *flat =
            rows > 1 ? ta_sym_add(c.ar, ta_sym_mulc(c.ar, ta_sym_addc(c.ar, ta_sym_mulc(c.ar, gidx, rows), u), inner),
                                  ta_sym_addc(c.ar, ta_sym_mulc(c.ar, gcol, cols), v))
                     : ta_sym_addc(c.ar, ta_sym_mulc(c.ar, gidx, cols), v);
        int64_t stride = 1;
        for (int k = a->ndim - 1; k >= 0; k--) {
            c.lane_out[l][k] = out_shape[k] == 1 ? ta_sym_const(c.ar, 0) : ta_sym_mod(c.ar, ta_sym_div(c.ar, flat, stride), out_shape[k]);
            stride *= out_shape[k];
        }
        for (int k = 0, j = 0; k < a->ndim; k++) c.lane_full[l][k] = a->reduce_mask >> k & 1 ? ridx[j++] : c.lane_out[l][k];
    }
    int reduce = -1;
    for (int i = 0; i < a->nnodes; i++)
        if (ta_op_class(a->nodes[i].op) == TA_OPC_REDUCE) reduce = i;
    if (reduce >= 0) s_mark_pre(&c, a->nodes[reduce].src[0]);

    /* Header: what this kernel fuses, then the signature and buffers. */
    s_put(&o, "/* %s: fuses graph nodes", name);
    for (int i = 0; i < a->nfused; i++) s_put(&o, " %" PRIu64, a->fused[i]);
    s_put(&o, " */\nvoid %s(int64_t start, int64_t end, void **restrict bufs, const uint64_t *restrict args) {\n", name);
    for (int b = 0; b < a->nbufs; b++)
        s_put(&o, "  %s%s *restrict data%d = bufs[%d];\n", b ? "const " : "", s_mem(a->buf_dtype[b]), b, b);
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
    c.depth = 2;
    if (rows > 1) {
        s_put(&o, "  /* %dx%d outputs per iteration; start and end are multiples of %" PRId64 " */\n"
                  "  for (int64_t gidx0 = start/%" PRId64 "; gidx0 < end/%" PRId64 "; gidx0++) {\n"
                  "    for (int64_t gidx1 = 0; gidx1 < %" PRId64 "; gidx1++) {\n",
              rows, cols, item, item, item, inner / cols);
        c.depth = 3;
    } else if (c.nlanes > 1) {
        s_put(&o, "  /* %d neighbouring outputs per iteration; start and end are multiples of %d */\n"
                  "  for (int64_t gidx0 = start/%d; gidx0 < end/%d; gidx0++) {\n",
              c.nlanes, c.nlanes, c.nlanes, c.nlanes);
    } else {
        s_put(&o, "  for (int64_t gidx0 = start; gidx0 < end; gidx0++) {\n");
    }
    int status = 0;
    if (reduce >= 0) {
        tact_dtype rd = a->nodes[reduce].dtype;
        for (int l = 0; l < c.nlanes; l++) {
            s_indent(&c);
            s_put(&o, "%s acc%d = ", s_reg(rd), l);
            s_identity(&o, a->nodes[reduce].op, rd);
            s_put(&o, ";\n");
        }
        for (int j = 0; j < nred; j++) {
            s_indent(&c);
            s_put(&o, "for (int64_t ridx%d = 0; ridx%d < %" PRId64 "; ridx%d++) {\n", j, j, a->shape[red_dims[j]], j);
            c.depth++;
        }
        for (int i = 0; i < a->nnodes && !status; i++)
            for (c.lane = 0; c.lane < c.nlanes && !status; c.lane++)
                if (c.pre[i] || i == reduce) {
                    c.full_idx = c.lane_full[c.lane];
                    c.out_idx = c.lane_out[c.lane];
                    status = s_node(&c, i);
                }
        for (int j = 0; j < nred; j++) {
            c.depth--;
            s_indent(&c);
            s_put(&o, "}\n");
        }
    }
    for (int i = 0; i < a->nnodes && !status; i++)
        for (c.lane = 0; c.lane < c.nlanes && !status; c.lane++)
            if (!c.pre[i] && i != reduce) {
                c.full_idx = c.lane_full[c.lane];
                c.out_idx = c.lane_out[c.lane];
                status = s_node(&c, i);
            }
    s_put(&o, rows > 1 ? "    }\n  }\n}\n" : "  }\n}\n");
    ta_sym_arena_destroy(&c.ar);
    for (int l = 0; l < S_MAX_LANES; l++)
        for (int i = 0; i < TA_AST_MAX_NODES; i++) ta_free(c.load_pos[l][i]), ta_free(c.load_valid[l][i]);
#undef c
    ta_free(cp);
    if (status || o.failed) {
        ta_free(o.p);
        return ta_error_set(err, TACT_ENOMEM, "render %s: an index expression too long, or out of memory", name);
    }
    *src = o.p;
    return TACT_OK;
}
