/* test_sym.c - symbolic index expressions: random trees against naive floor arithmetic, pinned rewrites, rendered C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../codegen/sym.h" /* codegen/ is not on the test targets' include path */
#include "tact.h"
#include "testutil.h"

/* ---- helpers ---- */

/* The rendering of s in one of a few rotating static buffers, so several
 * can appear in one message. */
static const char *s_str(const ta_sym_t *s) {
    static char bufs[4][1024];
    static int next;
    char *b = bufs[next++ % 4];
    size_t need = ta_sym_render(s, b, sizeof bufs[0]);
    cr_assert_eq(need, strlen(b), "render returns the length it wrote when it fits");
    return b;
}

static int64_t s_fdiv(int64_t a, int64_t c) {
    int64_t q = a / c;
    return (a % c != 0 && a < 0) ? q - 1 : q;
}

static int64_t s_fmod(int64_t a, int64_t c) { return a - c * s_fdiv(a, c); }

/*
 * A random expression tree kept apart from the library, so it can be
 * evaluated naively.  Node 0.. in creation order; children come first.
 */
enum { T_CONST, T_VAR, T_ADD, T_MUL, T_ADDC, T_MULC, T_DIV, T_MOD, T_LT, T_GE, T_AND };

typedef struct {
    int op, a, b;
    int64_t c;
} s_tnode_t;

typedef struct {
    int nvars;
    const char *names[4];
    int64_t lo[4], hi[4];
    int n;
    s_tnode_t nodes[256];
} s_tree_t;

static int s_gen(s_tree_t *t, uint64_t *rng, int depth) {
    s_tnode_t nd = {T_CONST, -1, -1, 0};
    uint64_t r = tu_rand(rng);
    if (depth <= 0 || r % 5 == 0) {
        if (tu_rand(rng) % 4) {
            nd.op = T_VAR;
            nd.c = (int64_t)(tu_rand(rng) % (uint64_t)t->nvars);
        } else {
            nd.c = (int64_t)(tu_rand(rng) % 13) - 4;
        }
    } else {
        /* Weighted towards the index arithmetic the simplifier works on. */
        static const int ops[] = {T_ADD, T_ADD, T_ADD, T_MUL, T_MUL, T_ADDC, T_ADDC, T_MULC, T_MULC, T_DIV,
                                  T_DIV, T_DIV, T_MOD, T_MOD, T_MOD, T_LT, T_GE, T_AND};
        nd.op = ops[tu_rand(rng) % (sizeof ops / sizeof ops[0])];
        nd.a = s_gen(t, rng, depth - 1);
        if (nd.op == T_ADD || nd.op == T_MUL || nd.op == T_LT || nd.op == T_GE || nd.op == T_AND)
            nd.b = s_gen(t, rng, nd.op == T_MUL ? depth - 2 : depth - 1);
        if (nd.op == T_ADDC) nd.c = (int64_t)(tu_rand(rng) % 17) - 8;
        if (nd.op == T_MULC) nd.c = (int64_t)(tu_rand(rng) % 9) - 3;
        if (nd.op == T_DIV || nd.op == T_MOD) nd.c = 1 + (int64_t)(tu_rand(rng) % 6);
    }
    cr_assert(t->n < 256);
    t->nodes[t->n] = nd;
    return t->n++;
}

/* Random variables with small ranges (some of a single value), then a tree. */
static void s_random_tree(s_tree_t *t, uint64_t *rng) {
    static const char *names[4] = {"gidx0", "gidx1", "lidx0", "ridx0"};
    memset(t, 0, sizeof *t);
    t->nvars = 2 + (int)(tu_rand(rng) % 3);
    for (int v = 0; v < t->nvars; v++) {
        t->names[v] = names[v];
        t->lo[v] = (int64_t)(tu_rand(rng) % 6) - 2;
        t->hi[v] = t->lo[v] + (int64_t)(tu_rand(rng) % 6);
    }
    s_gen(t, rng, 1 + (int)(tu_rand(rng) % 4));
}

/* Builds node i of t through the API (variables v0..v3 already built). */
static const ta_sym_t *s_build(ta_sym_arena_t *ar, const s_tree_t *t, int i, const ta_sym_t *const *vars) {
    const s_tnode_t *nd = &t->nodes[i];
    const ta_sym_t *a = nd->a >= 0 ? s_build(ar, t, nd->a, vars) : NULL;
    const ta_sym_t *b = nd->b >= 0 ? s_build(ar, t, nd->b, vars) : NULL;
    switch (nd->op) {
    case T_CONST: return ta_sym_const(ar, nd->c);
    case T_VAR: return vars[nd->c];
    case T_ADD: return ta_sym_add(ar, a, b);
    case T_MUL: return ta_sym_mul(ar, a, b);
    case T_ADDC: return ta_sym_addc(ar, a, nd->c);
    case T_MULC: return ta_sym_mulc(ar, a, nd->c);
    case T_DIV: return ta_sym_div(ar, a, nd->c);
    case T_MOD: return ta_sym_mod(ar, a, nd->c);
    case T_LT: return ta_sym_lt(ar, a, b);
    case T_GE: return ta_sym_ge(ar, a, b);
    default: return ta_sym_and(ar, a, b);
    }
}

static const ta_sym_t *s_build_tree(ta_sym_arena_t *ar, const s_tree_t *t) {
    const ta_sym_t *vars[4];
    for (int v = 0; v < t->nvars; v++) vars[v] = ta_sym_var(ar, v, t->names[v], t->lo[v], t->hi[v]);
    return s_build(ar, t, t->n - 1, vars);
}

/* Evaluates node i directly with floor semantics; clears *nonneg when some
 * division or modulo sees a negative numerator. */
static int64_t s_naive(const s_tree_t *t, int i, const int64_t *vals, bool *nonneg) {
    const s_tnode_t *nd = &t->nodes[i];
    int64_t a = nd->a >= 0 ? s_naive(t, nd->a, vals, nonneg) : 0;
    int64_t b = nd->b >= 0 ? s_naive(t, nd->b, vals, nonneg) : 0;
    if ((nd->op == T_DIV || nd->op == T_MOD) && a < 0) *nonneg = false;
    switch (nd->op) {
    case T_CONST: return nd->c;
    case T_VAR: return vals[nd->c];
    case T_ADD: return a + b;
    case T_MUL: return a * b;
    case T_ADDC: return a + nd->c;
    case T_MULC: return a * nd->c;
    case T_DIV: return s_fdiv(a, nd->c);
    case T_MOD: return s_fmod(a, nd->c);
    case T_LT: return a < b;
    case T_GE: return a >= b;
    default: return a != 0 && b != 0;
    }
}

/* The tree as text with floor operators, for failure messages. */
static void s_tree_text(const s_tree_t *t, int i, char *buf, size_t len) {
    static const char *ops[] = {"", "", "+", "*", "+", "*", "//", "%", "<", ">=", "&&"};
    const s_tnode_t *nd = &t->nodes[i];
    char a[2048] = "", b[2048] = "";
    if (nd->a >= 0) s_tree_text(t, nd->a, a, sizeof a);
    if (nd->b >= 0) s_tree_text(t, nd->b, b, sizeof b);
    if (nd->op == T_CONST) snprintf(buf, len, "%lld", (long long)nd->c);
    else if (nd->op == T_VAR) snprintf(buf, len, "%s", t->names[nd->c]);
    else if (nd->b >= 0) snprintf(buf, len, "(%s%s%s)", a, ops[nd->op], b);
    else snprintf(buf, len, "(%s%s%lld)", a, ops[nd->op], (long long)nd->c);
}

/* Steps vals through every assignment of t's variables; false after the last. */
static bool s_next(const s_tree_t *t, int64_t *vals) {
    for (int v = 0; v < t->nvars; v++) {
        if (vals[v] < t->hi[v]) {
            vals[v]++;
            return true;
        }
        vals[v] = t->lo[v];
    }
    return false;
}

typedef struct {
    ta_sym_arena_t *ar;
    const ta_sym_t *x, *y, *z, *g, *r;
} s_fix_t;

/* g (gidx0) in [0,15], r (ridx0) in [0,3], x in [0,7], y in [0,3], z in [-2,5], in slot order. */
static s_fix_t s_fix(void) {
    s_fix_t f;
    f.ar = ta_sym_arena_new();
    cr_assert_not_null(f.ar);
    f.g = ta_sym_var(f.ar, 0, "gidx0", 0, 15);
    f.r = ta_sym_var(f.ar, 1, "ridx0", 0, 3);
    f.x = ta_sym_var(f.ar, 2, "x", 0, 7);
    f.y = ta_sym_var(f.ar, 3, "y", 0, 3);
    f.z = ta_sym_var(f.ar, 4, "z", -2, 5);
    return f;
}

#define K(v) ta_sym_const(f.ar, (v))
#define EXPECT(expr, text) \
    cr_expect_str_eq(s_str(expr), (text), "%s renders as %s, expected %s", #expr, s_str(expr), (text))

/* ---- (a) random trees ---- */

Test(codegen_sym, random_trees_evaluate_like_naive_floor_arithmetic) {
    uint64_t seed = tu_seed(), rng = seed;
    char text[4096];
    for (int iter = 0; iter < 20000; iter++) {
        s_tree_t t;
        s_random_tree(&t, &rng);
        ta_sym_arena_t *ar = ta_sym_arena_new();
        const ta_sym_t *s = s_build_tree(ar, &t);
        s_tree_text(&t, t.n - 1, text, sizeof text);
        cr_assert_not_null(s, "seed 0x%llx tree %d: %s built NULL", (unsigned long long)seed, iter, text);
        cr_assert_leq(ta_sym_min(s), ta_sym_max(s), "seed 0x%llx tree %d: %s", (unsigned long long)seed, iter, text);
        int64_t vals[4];
        memcpy(vals, t.lo, sizeof vals);
        do {
            bool nonneg = true;
            int64_t want = s_naive(&t, t.n - 1, vals, &nonneg), got = ta_sym_eval(s, vals);
            if (got != want || got < ta_sym_min(s) || got > ta_sym_max(s))
                cr_assert_fail("seed 0x%llx tree %d: %s simplified to %s in [%lld,%lld]; at (%lld,%lld,%lld,%lld) "
                               "it gives %lld, naive %lld",
                               (unsigned long long)seed, iter, text, s_str(s), (long long)ta_sym_min(s),
                               (long long)ta_sym_max(s), (long long)vals[0], (long long)vals[1],
                               (long long)(t.nvars > 2 ? vals[2] : 0), (long long)(t.nvars > 3 ? vals[3] : 0),
                               (long long)got, (long long)want);
        } while (s_next(&t, vals));
        ta_sym_arena_destroy(&ar);
    }
}

/* ---- (b) pinned simplifications ---- */

Test(codegen_sym, div_pulls_out_multiples_and_drops_small_remainders) {
    s_fix_t f = s_fix();
    EXPECT(ta_sym_div(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.x, 4), f.y), 4), "x");
    EXPECT(ta_sym_div(f.ar, ta_sym_addc(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.g, 8), f.x), 16), 4),
           "gidx0*2+x/4+4");
    EXPECT(ta_sym_div(f.ar, f.y, 4), "0");
    EXPECT(ta_sym_div(f.ar, ta_sym_addc(f.ar, f.y, 4), 4), "1");
    EXPECT(ta_sym_div(f.ar, ta_sym_addc(f.ar, f.g, 1), 3), "(gidx0+1)/3");
    /* A common factor of every coefficient and the divisor: (2x+2y+1)//4 is (x+y)//2. */
    const ta_sym_t *e = ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.x, 2), ta_sym_mulc(f.ar, f.y, 2));
    EXPECT(ta_sym_div(f.ar, ta_sym_addc(f.ar, e, 1), 4), "(x+y)/2");
    /* A digit: y*8 + x with x < 8 halved by 16 (a pool over a reshape's
     * rows) is y//2, and its remainder y%2*8 + x. */
    const ta_sym_t *row = ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.y, 8), f.x);
    EXPECT(ta_sym_div(f.ar, row, 16), "y/2");
    EXPECT(ta_sym_mod(f.ar, row, 16), "x+y%2*8");
    /* Not when the rest can reach the digit's weight: x + y*4 (x up to 7). */
    EXPECT(ta_sym_div(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.y, 4), f.x), 8), "(x+y*4)/8");
    /* Two digits of one number join: g%2*28 + g//2%4*56 is g%8*28 (a row
     * and the pair a pool view reads it through). */
    const ta_sym_t *lo = ta_sym_mulc(f.ar, ta_sym_mod(f.ar, f.g, 2), 28);
    const ta_sym_t *hi = ta_sym_mulc(f.ar, ta_sym_mod(f.ar, ta_sym_div(f.ar, f.g, 2), 4), 56);
    EXPECT(ta_sym_add(f.ar, lo, hi), "gidx0%8*28");
    EXPECT(ta_sym_add(f.ar, ta_sym_add(f.ar, lo, hi), f.x), "gidx0%8*28+x");
    /* Not with another weight: g%2*28 + g//2%4*28 stays. */
    EXPECT(ta_sym_add(f.ar, lo, ta_sym_mulc(f.ar, ta_sym_mod(f.ar, ta_sym_div(f.ar, f.g, 2), 4), 28)), "gidx0%2*28+gidx0/2%4*28");
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, a_modulo_keeps_the_residue_of_a_common_factor) {
    s_fix_t f = s_fix();
    /* (8*gidx0 + 4*y) % 16 is a multiple of 4: at most 12, so adding 3
     * stays below 16 and a %16 of that goes. */
    const ta_sym_t *m = ta_sym_mod(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.g, 8), ta_sym_mulc(f.ar, f.y, 4)), 16);
    cr_expect_eq(ta_sym_min(m), 0);
    cr_expect_eq(ta_sym_max(m), 12);
    const ta_sym_t *sum = ta_sym_addc(f.ar, m, 3);
    cr_expect_str_eq(s_str(ta_sym_mod(f.ar, sum, 16)), s_str(sum));
    /* With an odd constant the residue moves: (8*gidx0 + 4*y + 2) % 16 is 2 to 14. */
    const ta_sym_t *odd = ta_sym_mod(f.ar, ta_sym_addc(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.g, 8), ta_sym_mulc(f.ar, f.y, 4)), 2), 16);
    cr_expect_eq(ta_sym_min(odd), 2);
    cr_expect_eq(ta_sym_max(odd), 14);
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, div_never_leaves_a_numerator_negative_where_it_was_not) {
    s_fix_t f = s_fix();
    /* 8-4x-y >= 0 for x <= 1; pulling out 2-x would leave (-y)//4, which C's / gets wrong. */
    const ta_sym_t *w = ta_sym_var(f.ar, 5, "w", 0, 1);
    const ta_sym_t *e = ta_sym_addc(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, w, -4), ta_sym_mulc(f.ar, f.y, -1)), 8);
    EXPECT(ta_sym_div(f.ar, e, 4),
           "(8-y-w*4)/4");
    /* x + z//4 would be wrong in C at x=1, z=-2, where x*4+z is 2. */
    EXPECT(ta_sym_div(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.x, 4), f.z), 4), "(x*4+z)/4");
    EXPECT(ta_sym_mod(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.x, 4), f.z), 4), "(x*4+z)%4");
    /* Pulling out a quotient that is never positive only raises the numerator. */
    EXPECT(ta_sym_div(f.ar, ta_sym_addc(f.ar, f.g, -1), 4), "(gidx0+3)/4-1");
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, mod_drops_multiples_and_values_already_in_range) {
    s_fix_t f = s_fix();
    EXPECT(ta_sym_mod(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.x, 4), f.y), 4), "y");
    EXPECT(ta_sym_mod(f.ar, f.y, 4), "y");
    EXPECT(ta_sym_mod(f.ar, ta_sym_addc(f.ar, f.y, 8), 4), "y");
    EXPECT(ta_sym_mod(f.ar, f.x, 4), "x%4");
    EXPECT(ta_sym_mod(f.ar, ta_sym_addc(f.ar, f.x, 5), 4), "(x+1)%4");
    EXPECT(ta_sym_mod(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.g, 12), ta_sym_mulc(f.ar, f.x, 3)), 6), "x%2*3");
    EXPECT(ta_sym_mod(f.ar, f.x, 1), "0");
    /* A coefficient past the modulus gives its multiple up: the
     * reference's pooling indexes (x + 9*y) % 8 (x + y < 8 here). */
    EXPECT(ta_sym_mod(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.y, 9), f.y), 8), "y*2");
    EXPECT(ta_sym_mod(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.y, 7), f.x), 5), "(x+y*2)%5");
    EXPECT(ta_sym_mod(f.ar, ta_sym_add(f.ar, f.x, ta_sym_mulc(f.ar, f.y, 9)), 8), "(x+y)%8");
    EXPECT(ta_sym_mod(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.y, 17), f.y), 16), "y*2");
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, nested_div_and_mod_merge) {
    s_fix_t f = s_fix();
    EXPECT(ta_sym_div(f.ar, ta_sym_div(f.ar, f.g, 2), 3), "gidx0/6");
    EXPECT(ta_sym_mod(f.ar, ta_sym_mod(f.ar, f.g, 12), 4), "gidx0%4");
    EXPECT(ta_sym_mod(f.ar, ta_sym_mod(f.ar, f.g, 4), 8), "gidx0%4");
    EXPECT(ta_sym_div(f.ar, ta_sym_mod(f.ar, f.g, 12), 4), "gidx0/4%3");
    /* A view's unflattening: ((g*4+r)//4)%3 is g%3, and (g*4+r)%4 is r. */
    const ta_sym_t *idx = ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.g, 4), f.r);
    EXPECT(ta_sym_mod(f.ar, ta_sym_div(f.ar, idx, 4), 3), "gidx0%3");
    EXPECT(ta_sym_mod(f.ar, ta_sym_div(f.ar, idx, 4), 16), "gidx0");
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, constants_fold_and_identities_vanish) {
    s_fix_t f = s_fix();
    EXPECT(ta_sym_mul(f.ar, ta_sym_add(f.ar, K(3), K(4)), K(2)), "14");
    EXPECT(ta_sym_div(f.ar, K(-7), 2), "(-4)");
    EXPECT(ta_sym_mod(f.ar, K(-7), 2), "1");
    EXPECT(ta_sym_mulc(f.ar, f.x, 0), "0");
    EXPECT(ta_sym_mul(f.ar, f.x, K(0)), "0");
    cr_expect_eq(ta_sym_mulc(f.ar, f.x, 1), f.x);
    cr_expect_eq(ta_sym_mul(f.ar, K(1), f.x), f.x);
    cr_expect_eq(ta_sym_addc(f.ar, f.x, 0), f.x);
    cr_expect_eq(ta_sym_add(f.ar, K(0), f.x), f.x);
    cr_expect_eq(ta_sym_div(f.ar, f.x, 1), f.x);
    /* A variable with one possible value is that value. */
    EXPECT(ta_sym_var(f.ar, 6, "one", 3, 3), "3");
    int64_t v = 0;
    cr_expect(ta_sym_is_const(K(-9), &v) && v == -9);
    cr_expect(ta_sym_is_const(K(5), NULL));
    cr_expect(!ta_sym_is_const(f.x, &v));
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, sums_are_flat_combined_and_ordered) {
    s_fix_t f = s_fix();
    EXPECT(ta_sym_add(f.ar, f.r, ta_sym_mulc(f.ar, f.g, 4)), "gidx0*4+ridx0");
    EXPECT(ta_sym_mulc(f.ar, ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.x, 2), f.y), 2), "x*4+y*2");
    EXPECT(ta_sym_add(f.ar, ta_sym_addc(f.ar, f.x, 1), ta_sym_addc(f.ar, f.x, 2)), "x*2+3");
    EXPECT(ta_sym_add(f.ar, f.x, ta_sym_mulc(f.ar, f.x, -1)), "0");
    EXPECT(ta_sym_addc(f.ar, ta_sym_mulc(f.ar, f.x, -1), 3), "3-x");
    EXPECT(ta_sym_addc(f.ar, ta_sym_add(f.ar, f.x, ta_sym_mulc(f.ar, f.y, -1)), -1), "x-y-1");
    EXPECT(ta_sym_mulc(f.ar, f.x, -4), "-x*4");
    /* (x//4)*4 + x%4 is x again. */
    EXPECT(ta_sym_add(f.ar, ta_sym_mulc(f.ar, ta_sym_div(f.ar, f.g, 4), 4), ta_sym_mod(f.ar, f.g, 4)), "gidx0");
    /* Products of non-constants stay products, with the coefficient outside. */
    EXPECT(ta_sym_mul(f.ar, ta_sym_addc(f.ar, f.x, 1), ta_sym_addc(f.ar, f.y, 2)), "(x+1)*(y+2)");
    EXPECT(ta_sym_mul(f.ar, ta_sym_mulc(f.ar, f.y, 3), ta_sym_mulc(f.ar, f.x, 2)), "x*y*6");
    cr_expect_eq(ta_sym_min(ta_sym_mul(f.ar, f.x, f.z)), -14);
    cr_expect_eq(ta_sym_max(ta_sym_mul(f.ar, f.x, f.z)), 35);
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, comparisons_fold_by_ranges) {
    s_fix_t f = s_fix();
    EXPECT(ta_sym_lt(f.ar, f.x, K(8)), "1");
    EXPECT(ta_sym_lt(f.ar, f.x, K(0)), "0");
    EXPECT(ta_sym_ge(f.ar, f.x, K(8)), "0");
    EXPECT(ta_sym_ge(f.ar, f.x, K(0)), "1");
    EXPECT(ta_sym_lt(f.ar, f.x, ta_sym_addc(f.ar, f.x, 1)), "1");
    EXPECT(ta_sym_lt(f.ar, f.y, ta_sym_addc(f.ar, f.x, 4)), "1");
    EXPECT(ta_sym_lt(f.ar, f.x, f.y), "x<y");
    EXPECT(ta_sym_lt(f.ar, ta_sym_addc(f.ar, f.x, 2), K(5)), "x<3");
    EXPECT(ta_sym_ge(f.ar, ta_sym_mulc(f.ar, f.x, 4), K(9)), "x>=3");
    EXPECT(ta_sym_lt(f.ar, ta_sym_addc(f.ar, ta_sym_mulc(f.ar, f.g, 4), -2), K(9)), "gidx0<3");
    EXPECT(ta_sym_lt(f.ar, f.z, K(0)), "z<0");
    EXPECT(ta_sym_lt(f.ar, K(2), f.x), "x>=3");
    EXPECT(ta_sym_ge(f.ar, K(2), f.x), "x<3");
    EXPECT(ta_sym_lt(f.ar, f.x, K(-3)), "0");
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, and_drops_true_operands_flattens_and_dedupes) {
    s_fix_t f = s_fix();
    const ta_sym_t *a = ta_sym_lt(f.ar, f.x, K(3)), *b = ta_sym_ge(f.ar, f.y, K(1)), *c = ta_sym_lt(f.ar, f.z, K(2));
    EXPECT(ta_sym_and(f.ar, ta_sym_lt(f.ar, f.x, K(8)), b), "y>=1");
    EXPECT(ta_sym_and(f.ar, K(1), a), "x<3");
    EXPECT(ta_sym_and(f.ar, a, K(0)), "0");
    EXPECT(ta_sym_and(f.ar, K(1), K(7)), "1");
    EXPECT(ta_sym_and(f.ar, b, a), "(x<3)&&(y>=1)");
    cr_expect_eq(ta_sym_and(f.ar, a, a), a);
    const ta_sym_t *ab = ta_sym_and(f.ar, a, b);
    cr_expect_eq(ta_sym_and(f.ar, b, a), ab);
    cr_expect_eq(ta_sym_and(f.ar, ab, a), ab);
    cr_expect_eq(ta_sym_and(f.ar, ta_sym_and(f.ar, a, c), b), ta_sym_and(f.ar, a, ta_sym_and(f.ar, b, c)));
    /* A non-boolean operand is tested against zero. */
    EXPECT(ta_sym_and(f.ar, a, f.z), "(x<3)&&(z!=0)");
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, renders_minimal_valid_c) {
    s_fix_t f = s_fix();
    EXPECT(K(-5), "(-5)");
    EXPECT(K(5000000000LL), "5000000000LL");
    EXPECT(ta_sym_lt(f.ar, f.z, K(-1)), "z<(-1)");
    EXPECT(ta_sym_mul(f.ar, f.g, ta_sym_div(f.ar, f.x, 2)), "gidx0*(x/2)");
    EXPECT(ta_sym_mul(f.ar, f.x, ta_sym_div(f.ar, f.g, 2)), "gidx0/2*x");
    EXPECT(ta_sym_div(f.ar, ta_sym_mulc(f.ar, f.g, 3), 2), "gidx0*3/2");
    EXPECT(ta_sym_mod(f.ar, ta_sym_div(f.ar, f.g, 3), 2), "gidx0/3%2");
    EXPECT(ta_sym_mulc(f.ar, ta_sym_lt(f.ar, f.x, f.y), 3), "(x<y)*3");
    EXPECT(ta_sym_lt(f.ar, ta_sym_lt(f.ar, f.x, f.y), f.z), "(x<y)<z");
    EXPECT(ta_sym_add(f.ar, f.g, ta_sym_lt(f.ar, f.x, f.y)), "gidx0+(x<y)");
    /* Cut to the buffer, NUL-terminated, returning the full length. */
    char small[5];
    const ta_sym_t *e = ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.g, 4), f.r);
    cr_expect_eq(ta_sym_render(e, small, sizeof small), strlen("gidx0*4+ridx0"));
    cr_expect_str_eq(small, "gidx");
    cr_expect_eq(ta_sym_render(e, NULL, 0), strlen("gidx0*4+ridx0"));
    ta_sym_arena_destroy(&f.ar);
}

/* ---- (c) hash-consing ---- */

Test(codegen_sym, equal_expressions_are_the_same_pointer) {
    s_fix_t f = s_fix();
    cr_expect_eq(ta_sym_var(f.ar, 2, "x", 0, 7), f.x);
    cr_expect_eq(K(42), K(42));
    cr_expect_eq(ta_sym_add(f.ar, f.x, f.y), ta_sym_add(f.ar, f.y, f.x));
    cr_expect_eq(ta_sym_mul(f.ar, f.x, f.y), ta_sym_mul(f.ar, f.y, f.x));
    cr_expect_eq(ta_sym_mulc(f.ar, ta_sym_add(f.ar, f.x, f.y), 2),
                 ta_sym_add(f.ar, ta_sym_mulc(f.ar, f.y, 2), ta_sym_mulc(f.ar, f.x, 2)));
    cr_expect_eq(ta_sym_div(f.ar, ta_sym_addc(f.ar, f.g, 1), 3), ta_sym_div(f.ar, ta_sym_add(f.ar, K(1), f.g), 3));
    cr_expect_neq(ta_sym_div(f.ar, f.g, 3), ta_sym_mod(f.ar, f.g, 3));
    cr_expect_neq(ta_sym_lt(f.ar, f.x, f.y), ta_sym_lt(f.ar, f.y, f.x));
    ta_sym_arena_destroy(&f.ar);
    cr_expect_null(f.ar);
    ta_sym_arena_destroy(&f.ar); /* a second destroy is harmless */

    /* Every random tree, built twice in one arena, gives one node. */
    uint64_t seed = tu_seed(), rng = seed ^ 0xc0ffee;
    ta_sym_arena_t *ar = ta_sym_arena_new();
    for (int iter = 0; iter < 500; iter++) {
        s_tree_t t;
        s_random_tree(&t, &rng);
        const ta_sym_t *s1 = s_build_tree(ar, &t), *s2 = s_build_tree(ar, &t);
        cr_assert(s1 && s1 == s2, "seed 0x%llx tree %d: built twice, %s and %s are different nodes",
                  (unsigned long long)seed, iter, s_str(s1), s_str(s2));
    }
    ta_sym_arena_destroy(&ar);
}

/* ---- (d) the rendered C ---- */

/*
 * Renders a set of expressions over four fixed variables into one C program
 * that prints each at every assignment, compiles it with cc and compares
 * with ta_sym_eval.  Random trees are compared only where every division
 * and modulo in them had a non-negative numerator: that is where C's
 * truncating / and % promise floor semantics.
 */
Test(codegen_sym, rendered_c_compiles_and_matches_eval) {
    if (system("command -v cc >/dev/null 2>&1") != 0) cr_skip_test("cc not found on PATH: cannot compile rendered C");
    enum { NHAND = 8, NRAND = 200, NE = NHAND + NRAND };
    static const char *names[4] = {"gidx0", "gidx1", "lidx0", "ridx0"};
    static const int64_t lo[4] = {0, -1, -3, 0}, hi[4] = {5, 3, 3, 4};
    uint64_t seed = tu_seed(), rng = seed ^ 0xdeadbeef;
    ta_sym_arena_t *ar = ta_sym_arena_new();
    const ta_sym_t *v[4];
    for (int i = 0; i < 4; i++) v[i] = ta_sym_var(ar, i, names[i], lo[i], hi[i]);
    const ta_sym_t *e[NE];
    static s_tree_t trees[NRAND];
    e[0] = ta_sym_add(ar, ta_sym_mulc(ar, v[0], 4), v[3]);
    e[1] = ta_sym_div(ar, ta_sym_addc(ar, v[0], 1), 3);
    e[2] = ta_sym_mod(ar, ta_sym_div(ar, ta_sym_add(ar, ta_sym_mulc(ar, v[0], 5), v[3]), 5), 3);
    e[3] = ta_sym_and(ar, ta_sym_lt(ar, v[0], ta_sym_const(ar, 4)), ta_sym_ge(ar, v[3], ta_sym_const(ar, 1)));
    e[4] = ta_sym_addc(ar, ta_sym_mulc(ar, v[1], -3), 7);
    e[5] = ta_sym_mul(ar, ta_sym_addc(ar, v[0], 1), ta_sym_div(ar, v[3], 2));
    e[6] = ta_sym_const(ar, -6);
    e[7] = ta_sym_div(ar, ta_sym_addc(ar, v[0], -1), 4);
    for (int i = 0; i < NRAND; i++) {
        s_random_tree(&trees[i], &rng);
        trees[i].nvars = 4;
        for (int k = 0; k < 4; k++) trees[i].names[k] = names[k], trees[i].lo[k] = lo[k], trees[i].hi[k] = hi[k];
        e[NHAND + i] = s_build_tree(ar, &trees[i]);
    }
    for (int i = 0; i < NE; i++) cr_assert_not_null(e[i]);

    char dir[] = "/tmp/tact-sym-XXXXXX", src[64], bin[64], cmd[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(src, sizeof src, "%s/e.c", dir);
    snprintf(bin, sizeof bin, "%s/e", dir);
    FILE *fp = fopen(src, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "#include <stdint.h>\n#include <stdio.h>\nint main(void) {\n");
    for (int i = 0; i < 4; i++)
        fprintf(fp, "  for (int64_t %s = %lld; %s <= %lld; %s++)\n", names[i], (long long)lo[i], names[i],
                (long long)hi[i], names[i]);
    fprintf(fp, "  {\n");
    for (int i = 0; i < NE; i++) fprintf(fp, "    printf(\"%%lld\\n\", (long long)(%s));\n", s_str(e[i]));
    fprintf(fp, "  }\n  return 0;\n}\n");
    fclose(fp);
    snprintf(cmd, sizeof cmd, "cc -std=c99 -Wall -Wextra -Werror -o %s %s 2>%s/cc.log", bin, src, dir);
    char why[4096] = "";
    if (system(cmd) != 0) {
        char log[2048] = "";
        snprintf(cmd, sizeof cmd, "%s/cc.log", dir);
        FILE *lf = fopen(cmd, "r");
        if (lf) log[fread(log, 1, sizeof log - 1, lf)] = '\0', fclose(lf);
        snprintf(why, sizeof why, "seed 0x%llx: the rendered C does not compile:\n%s", (unsigned long long)seed, log);
    }
    FILE *out = why[0] ? NULL : popen(bin, "r");
    int64_t vals[4], compared = 0;
    for (vals[0] = lo[0]; out && vals[0] <= hi[0]; vals[0]++)
        for (vals[1] = lo[1]; vals[1] <= hi[1]; vals[1]++)
            for (vals[2] = lo[2]; vals[2] <= hi[2]; vals[2]++)
                for (vals[3] = lo[3]; vals[3] <= hi[3]; vals[3]++)
                    for (int i = 0; i < NE && !why[0]; i++) {
                        long long c_val;
                        if (fscanf(out, "%lld", &c_val) != 1) {
                            snprintf(why, sizeof why, "seed 0x%llx: the program's output ended early",
                                     (unsigned long long)seed);
                            break;
                        }
                        bool nonneg = true;
                        if (i >= NHAND) s_naive(&trees[i - NHAND], trees[i - NHAND].n - 1, vals, &nonneg);
                        if (!nonneg) continue;
                        compared++;
                        if (c_val != ta_sym_eval(e[i], vals))
                            snprintf(why, sizeof why,
                                     "seed 0x%llx expr %d: C `%s` at (%lld,%lld,%lld,%lld) gives %lld, eval %lld",
                                     (unsigned long long)seed, i, s_str(e[i]), (long long)vals[0], (long long)vals[1],
                                     (long long)vals[2], (long long)vals[3], c_val, (long long)ta_sym_eval(e[i], vals));
                    }
    if (out) pclose(out);
    /* Clean up before asserting: a failed assertion ends the test here. */
    unlink(src);
    unlink(bin);
    snprintf(cmd, sizeof cmd, "%s/cc.log", dir);
    unlink(cmd);
    rmdir(dir);
    cr_assert(!why[0], "%s", why);
    cr_expect_gt(compared, 1050 * NHAND, "the random trees were compared somewhere too");
    ta_sym_arena_destroy(&ar);
}

/* ---- (e) errors ---- */

Test(codegen_sym, null_operands_propagate) {
    s_fix_t f = s_fix();
    const ta_sym_t *n = NULL;
    cr_expect_null(ta_sym_add(f.ar, n, f.x));
    cr_expect_null(ta_sym_add(f.ar, f.x, n));
    cr_expect_null(ta_sym_mul(f.ar, n, f.x));
    cr_expect_null(ta_sym_mul(f.ar, K(0), n));
    cr_expect_null(ta_sym_addc(f.ar, n, 0));
    cr_expect_null(ta_sym_mulc(f.ar, n, 0));
    cr_expect_null(ta_sym_div(f.ar, n, 1));
    cr_expect_null(ta_sym_mod(f.ar, n, 1));
    cr_expect_null(ta_sym_lt(f.ar, n, f.x));
    cr_expect_null(ta_sym_ge(f.ar, f.x, n));
    cr_expect_null(ta_sym_and(f.ar, K(0), n));
    cr_expect_null(ta_sym_add(f.ar, ta_sym_mul(f.ar, ta_sym_div(f.ar, n, 2), f.x), f.y), "a chain needs one check");
    cr_expect_null(ta_sym_var(f.ar, 0, NULL, 0, 1));
    cr_expect_null(ta_sym_var(f.ar, -1, "bad", 0, 1));
    cr_expect_null(ta_sym_var(f.ar, 0, "bad", 2, 1));
    cr_expect_null(ta_sym_const(NULL, 1));
    cr_expect_null(ta_sym_add(NULL, f.x, f.y));
    cr_expect_eq(ta_sym_min(n), 0);
    cr_expect_eq(ta_sym_max(n), 0);
    cr_expect(!ta_sym_is_const(n, NULL));
    ta_sym_arena_destroy(&f.ar);
}

Test(codegen_sym, div_and_mod_by_nonpositive_constants_are_null) {
    s_fix_t f = s_fix();
    cr_expect_null(ta_sym_div(f.ar, f.x, 0));
    cr_expect_null(ta_sym_div(f.ar, f.x, -2));
    cr_expect_null(ta_sym_mod(f.ar, f.x, 0));
    cr_expect_null(ta_sym_mod(f.ar, f.x, -2));
    cr_expect_null(ta_sym_div(f.ar, K(6), 0), "even a constant numerator");
    cr_expect_null(ta_sym_mod(f.ar, K(6), INT64_MIN));
    ta_sym_arena_destroy(&f.ar);
}

static long s_budget = -1; /* allocations left before failing; < 0: unlimited */
static long s_live;

static void *s_alloc(void *ud, void *ptr, size_t old, size_t size) {
    (void)ud;
    (void)old;
    if (size == 0) {
        if (ptr) s_live--;
        free(ptr);
        return NULL;
    }
    if (s_budget >= 0 && s_budget-- <= 0) return NULL;
    void *p = realloc(ptr, size);
    if (p && !ptr) s_live++;
    return p;
}

/* A view-like index: ((g*4+r)//4)%3 + (g*4+r)%4 and its mask, or NULL. */
static const ta_sym_t *s_oom_life(ta_sym_arena_t *ar) {
    const ta_sym_t *g = ta_sym_var(ar, 0, "gidx0", 0, 15), *r = ta_sym_var(ar, 1, "ridx0", 0, 3);
    const ta_sym_t *idx = ta_sym_add(ar, ta_sym_mulc(ar, g, 4), r);
    const ta_sym_t *row = ta_sym_mod(ar, ta_sym_div(ar, idx, 4), 3);
    const ta_sym_t *pos = ta_sym_add(ar, ta_sym_mulc(ar, row, 4), ta_sym_mod(ar, idx, 4));
    const ta_sym_t *lo = ta_sym_ge(ar, g, ta_sym_const(ar, 1));
    const ta_sym_t *valid = ta_sym_and(ar, lo, ta_sym_lt(ar, ta_sym_addc(ar, r, 1), ta_sym_const(ar, 3)));
    return ta_sym_mul(ar, ta_sym_addc(ar, pos, 2), valid);
}

Test(codegen_sym, allocation_failures_give_null_and_leak_nothing) {
    tact_set_allocator(s_alloc, NULL);
    bool done = false;
    for (long budget = 0; budget < 1000 && !done; budget++) {
        s_budget = budget;
        ta_sym_arena_t *ar = ta_sym_arena_new();
        if (ar) {
            const ta_sym_t *s = s_oom_life(ar);
            if (s) {
                cr_expect_str_eq(s_str(s), "((gidx0>=1)&&(ridx0<2))*(gidx0%3*4+ridx0+2)", "budget %ld", budget);
                done = true;
            }
        }
        s_budget = -1;
        ta_sym_arena_destroy(&ar);
        cr_assert_eq(s_live, 0, "budget %ld: %ld blocks leaked", budget, s_live);
    }
    cr_expect(done, "succeeded with enough memory");
    tact_set_allocator(NULL, NULL);
}

/* Each value read twice: e + v // 2 with v the slot's variable, and
 * nothing else of it (an offset inside the division pairs other lanes). */
Test(codegen_sym, halved_reads_are_recognized_and_nothing_else) {
    ta_sym_arena_t *ar = ta_sym_arena_new();
    const ta_sym_t *x = ta_sym_var(ar, 0, "x", 0, 27), *y = ta_sym_var(ar, 1, "y", 0, 13);
    const ta_sym_t *yes[] = {ta_sym_div(ar, x, 2), ta_sym_add(ar, ta_sym_mulc(ar, y, 14), ta_sym_div(ar, x, 2)),
                             ta_sym_addc(ar, ta_sym_div(ar, ta_sym_add(ar, ta_sym_mulc(ar, y, 4), x), 2), 17)};
    const ta_sym_t *no[] = {x, y, ta_sym_div(ar, ta_sym_addc(ar, x, 1), 2), ta_sym_mulc(ar, ta_sym_div(ar, x, 2), 2), ta_sym_div(ar, x, 4),
                            ta_sym_add(ar, ta_sym_div(ar, x, 2), x), ta_sym_mod(ar, x, 2)};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) cr_assert(ta_sym_half(yes[i], 0), "%s", s_str(yes[i]));
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) cr_assert(!ta_sym_half(no[i], 0), "%s", s_str(no[i]));
    ta_sym_arena_destroy(&ar);
}
