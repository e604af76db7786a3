/* sym.c - symbolic index expressions: simplifying, hash-consing constructors, evaluation and a C renderer. */
#include "sym.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "tact.h"

/*
 * Canonical forms.  A linear combination is one S_SUM node: a constant plus
 * coef*term pairs, sorted by s_cmp, like terms combined, no zero
 * coefficients; a term is never a constant or a sum.  A lone term with
 * coefficient 1 and no constant is the term itself.  Products of
 * non-constant factors are one flat, sorted S_MUL (coefficients pulled out
 * into a sum around it); conjunctions are one flat, sorted, deduplicated
 * S_AND.  Their order is s_cmp's: by first variable, then by the kind
 * order below.
 *
 * Floor division and C's truncating division agree on non-negative
 * numerators.  A rewrite that leaves a division in place must therefore not
 * make its numerator negative where the original one was not: every rule
 * below that moves part of a numerator out checks that (s_sum_divmod).
 */
enum { S_CONST, S_VAR, S_MUL, S_DIV, S_MOD, S_LT, S_GE, S_AND, S_SUM };

/* An operand; k is the coefficient in a sum and 0 elsewhere. */
typedef struct {
    const ta_sym_t *t;
    int64_t k;
} s_term_t;

struct ta_sym {
    int kind;
    size_t n;         /* operands in args */
    int64_t c;        /* value, variable slot, sum constant, or divisor */
    int64_t min, max; /* inclusive value range */
    int64_t lead;     /* the lowest variable slot inside, INT64_MAX for none */
    const char *name; /* variables only */
    uint64_t hash;
    ta_sym_t *next; /* hash chain */
    s_term_t args[];
};

struct ta_sym_arena {
    ta_sym_t **buckets;
    size_t nbuckets, count;
};

/* ---- arithmetic: wrapping for values, saturating for ranges ---- */

static int64_t s_wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t s_wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

static int64_t s_sadd(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t s_smul(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

/* Floor division and modulo by c > 0. */
static int64_t s_fdiv(int64_t a, int64_t c) {
    int64_t q = a / c;
    return (a % c != 0 && a < 0) ? q - 1 : q;
}

static int64_t s_fmod(int64_t a, int64_t c) {
    int64_t r = a % c;
    return r < 0 ? r + c : r;
}

static uint64_t s_abs(int64_t a) { return a < 0 ? -(uint64_t)a : (uint64_t)a; }

static uint64_t s_gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The range of k*[lo, hi]. */
static void s_scale(int64_t lo, int64_t hi, int64_t k, int64_t *olo, int64_t *ohi) {
    int64_t a = s_smul(lo, k), b = s_smul(hi, k);
    *olo = a < b ? a : b;
    *ohi = a < b ? b : a;
}

/* ---- the hash-consing table ---- */

static uint64_t s_mix(uint64_t h, uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t s_hash(int kind, int64_t c, size_t n, const s_term_t *args, const char *name) {
    uint64_t h = s_mix(0xcbf29ce484222325ull, (uint64_t)kind);
    h = s_mix(h, (uint64_t)c);
    for (size_t i = 0; i < n; i++) h = s_mix(s_mix(h, (uint64_t)(uintptr_t)args[i].t), (uint64_t)args[i].k);
    for (const char *p = name; p && *p; p++) h = s_mix(h, (unsigned char)*p);
    return h;
}

static bool s_same(const ta_sym_t *s, int kind, int64_t c, size_t n, const s_term_t *args, const char *name,
                   int64_t min, int64_t max) {
    if (s->kind != kind || s->c != c || s->n != n || s->min != min || s->max != max) return false;
    for (size_t i = 0; i < n; i++)
        if (s->args[i].t != args[i].t || s->args[i].k != args[i].k) return false;
    return kind != S_VAR || (name && s->name && strcmp(s->name, name) == 0);
}

/* Doubles the bucket array; on allocation failure the table keeps working
 * with longer chains. */
static void s_rehash(ta_sym_arena_t *ar) {
    size_t nb = ar->nbuckets * 2;
    ta_sym_t **b = ta_calloc(nb, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < ar->nbuckets; i++) {
        for (ta_sym_t *s = ar->buckets[i], *next; s; s = next) {
            next = s->next;
            s->next = b[s->hash & (nb - 1)];
            b[s->hash & (nb - 1)] = s;
        }
    }
    ta_free(ar->buckets);
    ar->buckets = b;
    ar->nbuckets = nb;
}

/* Returns the node with these fields, creating it if needed (NULL on
 * allocation failure).  The range is a function of the rest, so it is part
 * of the key only to keep variables misused with two ranges apart. */
static const ta_sym_t *s_intern(ta_sym_arena_t *ar, int kind, int64_t c, size_t n, const s_term_t *args,
                                const char *name, int64_t min, int64_t max) {
    uint64_t h = s_hash(kind, c, n, args, name);
    for (ta_sym_t *s = ar->buckets[h & (ar->nbuckets - 1)]; s; s = s->next)
        if (s->hash == h && s_same(s, kind, c, n, args, name, min, max)) return s;
    size_t namelen = name ? strlen(name) + 1 : 0;
    ta_sym_t *s = ta_malloc(sizeof *s + n * sizeof(s_term_t) + namelen);
    if (!s) return NULL;
    s->kind = kind;
    s->n = n;
    s->c = c;
    s->min = min;
    s->max = max;
    s->hash = h;
    s->lead = kind == S_VAR ? c : INT64_MAX;
    for (size_t i = 0; i < n; i++) s->lead = args[i].t->lead < s->lead ? args[i].t->lead : s->lead;
    if (n) memcpy(s->args, args, n * sizeof *args);
    s->name = NULL;
    if (name) s->name = memcpy((char *)(s->args + n), name, namelen);
    if (ar->count >= ar->nbuckets) s_rehash(ar);
    s->next = ar->buckets[h & (ar->nbuckets - 1)];
    ar->buckets[h & (ar->nbuckets - 1)] = s;
    ar->count++;
    return s;
}

/* Returns an empty arena with a small table, or NULL on allocation failure. */
ta_sym_arena_t *ta_sym_arena_new(void) {
    ta_sym_arena_t *ar = ta_calloc(1, sizeof *ar);
    if (!ar) return NULL;
    ar->nbuckets = 64;
    ar->buckets = ta_calloc(ar->nbuckets, sizeof *ar->buckets);
    if (!ar->buckets) {
        ta_free(ar);
        return NULL;
    }
    return ar;
}

/* Frees every node and the arena, and sets *ar to NULL; NULL or *ar == NULL is a no-op. */
void ta_sym_arena_destroy(ta_sym_arena_t **ar) {
    if (!ar || !*ar) return;
    for (size_t i = 0; i < (*ar)->nbuckets; i++) {
        for (ta_sym_t *s = (*ar)->buckets[i], *next; s; s = next) {
            next = s->next;
            ta_free(s);
        }
    }
    ta_free((*ar)->buckets);
    ta_free(*ar);
    *ar = NULL;
}

/* ---- canonical order ---- */

/* A total order on distinct nodes: by the first variable they use (so
 * gidx0 terms come before ridx0 terms), by kind, then structurally.  It
 * decides the order of terms, factors and conjuncts, so it must not depend
 * on addresses (rendering would then vary from run to run). */
static int s_cmp(const ta_sym_t *a, const ta_sym_t *b) {
    if (a == b) return 0;
    if (a->lead != b->lead) return a->lead < b->lead ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->kind == S_VAR || a->kind == S_CONST) {
        if (a->c != b->c) return a->c < b->c ? -1 : 1;
        if (a->kind == S_CONST) return 0;
        int r = strcmp(a->name, b->name);
        if (r) return r;
        if (a->min != b->min) return a->min < b->min ? -1 : 1;
        return a->max < b->max ? -1 : a->max > b->max;
    }
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (size_t i = 0; i < a->n; i++) {
        int r = s_cmp(a->args[i].t, b->args[i].t);
        if (r) return r;
        if (a->args[i].k != b->args[i].k) return a->args[i].k < b->args[i].k ? -1 : 1;
    }
    return a->c < b->c ? -1 : a->c > b->c;
}

static int s_term_cmp(const void *x, const void *y) {
    return s_cmp(((const s_term_t *)x)->t, ((const s_term_t *)y)->t);
}

/* ---- linear combinations ---- */

typedef struct {
    int64_t c;
    size_t n, cap;
    s_term_t *v;
    bool oom;
} s_lin_t;

static void s_lin_push(s_lin_t *l, const ta_sym_t *t, int64_t k) {
    if (l->oom || k == 0) return;
    if (ta_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v) != TACT_OK) {
        l->oom = true;
        return;
    }
    l->v[l->n++] = (s_term_t){t, k};
}

/* Adds k*a to l, opening a's own constant and terms. */
static void s_lin_add(s_lin_t *l, const ta_sym_t *a, int64_t k) {
    if (a->kind == S_CONST) {
        l->c = s_wadd(l->c, s_wmul(a->c, k));
    } else if (a->kind == S_SUM) {
        l->c = s_wadd(l->c, s_wmul(a->c, k));
        for (size_t i = 0; i < a->n; i++) s_lin_push(l, a->args[i].t, s_wmul(a->args[i].k, k));
    } else {
        s_lin_push(l, a, k);
    }
}

/* Sorts l and combines like terms, dropping zero coefficients. */
static void s_lin_merge(s_lin_t *l) {
    if (l->n > 1) qsort(l->v, l->n, sizeof *l->v, s_term_cmp);
    size_t j = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (j > 0 && l->v[j - 1].t == l->v[i].t)
            l->v[j - 1].k = s_wadd(l->v[j - 1].k, l->v[i].k);
        else
            l->v[j++] = l->v[i];
        if (l->v[j - 1].k == 0) j--;
    }
    l->n = j;
}

/* Finds two digits of one number, (x%m)*k and, with weight k*m, the rest
 * of x above them, and joins them: (x//m)*(k*m) + (x%m)*k is k*x, and
 * ((x//m)%b)*(k*m) + (x%m)*k is (x%(m*b))*k (a row and its pair in a
 * pooled view: y%2*28 + y//2%14*56 is y%28*28).  Floor division holds
 * both; the first holds under truncating division too.  Returns whether
 * it joined a pair (l->oom set when out of memory). */
static bool s_lin_digit_pair(ta_sym_arena_t *ar, s_lin_t *l) {
    for (size_t i = 0; i < l->n; i++) {
        const ta_sym_t *lo = l->v[i].t;
        int64_t k = l->v[i].k, km, mb;
        if (lo->kind != S_MOD || __builtin_mul_overflow(k, lo->c, &km)) continue;
        for (size_t j = 0; j < l->n; j++) {
            const ta_sym_t *hi = l->v[j].t, *q = hi->kind == S_MOD ? hi->args[0].t : hi;
            if (q->kind != S_DIV || q->c != lo->c || q->args[0].t != lo->args[0].t || l->v[j].k != km) continue;
            const ta_sym_t *both = lo->args[0].t; /* the whole of x */
            if (hi != q) {
                if (__builtin_mul_overflow(lo->c, hi->c, &mb)) continue;
                if (!(both = ta_sym_mod(ar, both, mb))) {
                    l->oom = true;
                    return false;
                }
            }
            l->v[i].k = l->v[j].k = 0;
            s_lin_add(l, both, k);
            return true;
        }
    }
    return false;
}

/* Builds the canonical node for l and frees l's storage.  Returns NULL on
 * allocation failure. */
static const ta_sym_t *s_lin_build(ta_sym_arena_t *ar, s_lin_t *l) {
    const ta_sym_t *r = NULL;
    do s_lin_merge(l);
    while (!l->oom && s_lin_digit_pair(ar, l));
    if (l->oom) {
        r = NULL;
    } else if (l->n == 0) {
        r = ta_sym_const(ar, l->c);
    } else if (l->n == 1 && l->c == 0 && l->v[0].k == 1) {
        r = l->v[0].t;
    } else {
        int64_t lo = l->c, hi = l->c;
        for (size_t i = 0; i < l->n; i++) {
            int64_t tlo, thi;
            s_scale(l->v[i].t->min, l->v[i].t->max, l->v[i].k, &tlo, &thi);
            lo = s_sadd(lo, tlo);
            hi = s_sadd(hi, thi);
        }
        r = s_intern(ar, S_SUM, l->c, l->n, l->v, NULL, lo, hi);
    }
    ta_free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
    return r;
}

/* ---- constructors ---- */

/* Returns the constant v, or NULL on allocation failure (or with no arena). */
const ta_sym_t *ta_sym_const(ta_sym_arena_t *ar, int64_t v) {
    if (!ar) return NULL;
    return s_intern(ar, S_CONST, v, 0, NULL, NULL, v, v);
}

/* Returns the variable, or NULL on allocation failure or a bad argument (no
 * name, slot < 0, min > max).  min == max gives the constant min. */
const ta_sym_t *ta_sym_var(ta_sym_arena_t *ar, int slot, const char *name, int64_t min, int64_t max) {
    if (!ar || !name || !*name || slot < 0 || min > max) return NULL;
    /* A variable with a single value is that value, as in the reference. */
    if (min == max) return ta_sym_const(ar, min);
    return s_intern(ar, S_VAR, slot, 0, NULL, name, min, max);
}

/* Returns the canonical sum of a and b (NULL if either is NULL or on
 * allocation failure): both opened into constant and terms, combined. */
const ta_sym_t *ta_sym_add(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b) {
    if (!ar || !a || !b) return NULL;
    if (a->kind == S_CONST && b->kind == S_CONST) return ta_sym_const(ar, s_wadd(a->c, b->c));
    s_lin_t l = {0};
    s_lin_add(&l, a, 1);
    s_lin_add(&l, b, 1);
    return s_lin_build(ar, &l);
}

/* Returns a + c as ta_sym_add does; a itself when c is 0. */
const ta_sym_t *ta_sym_addc(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c) {
    if (!a) return NULL;
    return c == 0 ? a : ta_sym_add(ar, a, ta_sym_const(ar, c));
}

/* Returns c*a, distributed over a sum (NULL if a is NULL or on allocation
 * failure); 0 when c is 0 and a itself when c is 1. */
const ta_sym_t *ta_sym_mulc(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c) {
    if (!ar || !a) return NULL;
    if (c == 0) return ta_sym_const(ar, 0);
    if (c == 1) return a;
    if (a->kind == S_CONST) return ta_sym_const(ar, s_wmul(a->c, c));
    s_lin_t l = {0};
    s_lin_add(&l, a, c);
    return s_lin_build(ar, &l);
}

/* Splits a lone scaled term k*t into *k (multiplied in) and t. */
static const ta_sym_t *s_unscale(const ta_sym_t *a, int64_t *k) {
    if (a->kind != S_SUM || a->c != 0 || a->n != 1) return a;
    *k = s_wmul(*k, a->args[0].k);
    return a->args[0].t;
}

/* Returns a*b (NULL if either is NULL or on allocation failure): ta_sym_mulc
 * when one side is constant, else a flat sorted product times the product
 * of the two sides' coefficients.  Sums are not multiplied out. */
const ta_sym_t *ta_sym_mul(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b) {
    if (!ar || !a || !b) return NULL;
    if (a->kind == S_CONST) return ta_sym_mulc(ar, b, a->c);
    if (b->kind == S_CONST) return ta_sym_mulc(ar, a, b->c);
    int64_t k = 1;
    const ta_sym_t *ab[2] = {s_unscale(a, &k), s_unscale(b, &k)};
    size_t n = 0, cap = (ab[0]->kind == S_MUL ? ab[0]->n : 1) + (ab[1]->kind == S_MUL ? ab[1]->n : 1);
    s_term_t *f = ta_malloc(cap * sizeof *f);
    if (!f) return NULL;
    for (int i = 0; i < 2; i++) {
        if (ab[i]->kind == S_MUL)
            for (size_t j = 0; j < ab[i]->n; j++) f[n++] = ab[i]->args[j];
        else
            f[n++] = (s_term_t){ab[i], 0};
    }
    qsort(f, n, sizeof *f, s_term_cmp);
    int64_t lo = f[0].t->min, hi = f[0].t->max;
    for (size_t i = 1; i < n; i++) {
        int64_t c[4] = {s_smul(lo, f[i].t->min), s_smul(lo, f[i].t->max), s_smul(hi, f[i].t->min),
                        s_smul(hi, f[i].t->max)};
        lo = hi = c[0];
        for (int j = 1; j < 4; j++) {
            lo = c[j] < lo ? c[j] : lo;
            hi = c[j] > hi ? c[j] : hi;
        }
    }
    const ta_sym_t *m = s_intern(ar, S_MUL, 0, n, f, NULL, lo, hi);
    ta_free(f);
    return ta_sym_mulc(ar, m, k);
}

/* The greatest common factor of c and a's coefficients (a sum's; 1 for
 * any other node). */
static uint64_t s_coef_gcd(const ta_sym_t *a, int64_t c) {
    if (a->kind != S_SUM) return 1;
    uint64_t g = (uint64_t)c;
    for (size_t i = 0; i < a->n && g > 1; i++) g = s_gcd(g, s_abs(a->args[i].k));
    return g;
}

/* True when floor(a/c) is the same for every value of a. */
static bool s_one_quotient(const ta_sym_t *a, int64_t c) { return s_fdiv(a->min, c) == s_fdiv(a->max, c); }

/*
 * Rules for a sum a = c*Q + R divided by c (or taken modulo c), where Q
 * collects the multiples of c in the coefficients (a coefficient k gives
 * its part k - k%c) and the floor quotient of the constant.  a//c = Q + R//c and a%c = R%c hold under floor
 * semantics; R keeps a non-negative numerator non-negative when R's range
 * is non-negative or Q is never positive (R >= a then), and no division is
 * left when R lies within one quotient.  Failing that, a common factor g of
 * c and every coefficient is divided out: a = g*A + r with 0 <= r < g gives
 * a//c = A//(c/g) and a%c = g*(A%(c/g)) + r, and A >= 0 wherever a >= 0.
 * Sets *out (NULL on allocation failure) and returns true when a rule
 * applied.
 */
static bool s_sum_divmod(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c, bool mod, const ta_sym_t **out) {
    /* A digit: a = k*X + R with 0 <= R < k and k dividing c gives
     * a//c = X//(c/k) and a%c = k*(X%(c/k)) + R (a reshape's row y*28 + x
     * halved by a pool: (y*28 + x)//56 is y//2).  The largest such k. */
    int64_t best_k = 0;
    size_t best = 0;
    for (size_t i = 0; i < a->n; i++) {
        int64_t k = a->args[i].k;
        if (k <= 1 || c % k || k <= best_k) continue;
        int64_t lo = a->c, hi = a->c;
        for (size_t j = 0; j < a->n; j++) {
            if (j == i) continue;
            int64_t tlo, thi;
            s_scale(a->args[j].t->min, a->args[j].t->max, a->args[j].k, &tlo, &thi);
            lo = s_sadd(lo, tlo);
            hi = s_sadd(hi, thi);
        }
        if (lo >= 0 && hi < k) best_k = k, best = i;
    }
    if (best_k) {
        s_lin_t rest = {0};
        rest.c = a->c;
        for (size_t j = 0; j < a->n; j++)
            if (j != best) s_lin_push(&rest, a->args[j].t, a->args[j].k);
        const ta_sym_t *x = a->args[best].t, *rs = s_lin_build(ar, &rest);
        if (!rs) *out = NULL;
        else if (mod) *out = ta_sym_add(ar, ta_sym_mulc(ar, ta_sym_mod(ar, x, c / best_k), best_k), rs);
        else *out = ta_sym_div(ar, x, c / best_k);
        return true;
    }
    s_lin_t q = {0}, r = {0};
    q.c = s_fdiv(a->c, c);
    r.c = s_fmod(a->c, c);
    bool moved = q.c != 0, split = false;
    for (size_t i = 0; i < a->n; i++) {
        int64_t k = a->args[i].k, kr = k % c; /* C remainder: the sign of k, smaller */
        if (kr == 0) {
            s_lin_push(&q, a->args[i].t, k / c);
            moved = true;
        } else if (kr != k) {
            /* k*x = c*((k - kr)/c)*x + kr*x: the multiple of c moves to Q
             * (the reference's pooling writes x*(c+1) % c). */
            s_lin_push(&q, a->args[i].t, (k - kr) / c);
            s_lin_push(&r, a->args[i].t, kr);
            moved = split = true;
        } else {
            s_lin_push(&r, a->args[i].t, k);
        }
    }
    const ta_sym_t *qs = NULL, *rs = NULL;
    if (moved) {
        qs = s_lin_build(ar, &q);
        rs = s_lin_build(ar, &r);
        if (!qs || !rs) {
            *out = NULL;
            return true;
        }
        /* A split coefficient pays for a division only when none is left. */
        if ((rs->min >= 0 || qs->max <= 0 || s_one_quotient(rs, c)) && (mod || !split || s_one_quotient(rs, c))) {
            *out = mod ? ta_sym_mod(ar, rs, c) : ta_sym_add(ar, qs, ta_sym_div(ar, rs, c));
            return true;
        }
    } else {
        ta_free(q.v);
        ta_free(r.v);
    }
    uint64_t g = s_coef_gcd(a, c);
    if (g <= 1) return false;
    int64_t gi = (int64_t)g;
    s_lin_t al = {0};
    al.c = s_fdiv(a->c, gi);
    for (size_t i = 0; i < a->n; i++) s_lin_push(&al, a->args[i].t, a->args[i].k / gi);
    const ta_sym_t *as = s_lin_build(ar, &al);
    if (!mod) {
        *out = ta_sym_div(ar, as, c / gi);
        return true;
    }
    /* For modulo the factored form is only worth it when the smaller modulo
     * simplifies further. */
    const ta_sym_t *inner = ta_sym_mod(ar, as, c / gi);
    if (inner && inner->kind == S_MOD) return false;
    *out = ta_sym_addc(ar, ta_sym_mulc(ar, inner, gi), s_fmod(a->c, gi));
    return true;
}

/* Returns floor(a/c), simplified; NULL if a is NULL, c <= 0 or on allocation
 * failure. */
const ta_sym_t *ta_sym_div(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c) {
    if (!ar || !a || c <= 0) return NULL;
    if (c == 1) return a;
    int64_t lo = s_fdiv(a->min, c), hi = s_fdiv(a->max, c), cc;
    if (lo == hi) return ta_sym_const(ar, lo);
    /* (x//a)//b is x//(a*b) under floor semantics, and for x >= 0 in C. */
    if (a->kind == S_DIV && !__builtin_mul_overflow(a->c, c, &cc)) return ta_sym_div(ar, a->args[0].t, cc);
    /* (x%(m*c))//c is (x//c)%m: both are digit x//c of x in base c, mod m. */
    if (a->kind == S_MOD && a->c % c == 0) return ta_sym_mod(ar, ta_sym_div(ar, a->args[0].t, c), a->c / c);
    const ta_sym_t *r;
    if (a->kind == S_SUM && s_sum_divmod(ar, a, c, false, &r)) return r;
    s_term_t arg = {a, 0};
    return s_intern(ar, S_DIV, c, 1, &arg, NULL, lo, hi);
}

/* Returns a - c*floor(a/c), simplified; NULL if a is NULL, c <= 0 or on
 * allocation failure. */
const ta_sym_t *ta_sym_mod(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c) {
    if (!ar || !a || c <= 0) return NULL;
    if (c == 1) return ta_sym_const(ar, 0);
    /* Within one quotient q the modulo is a - q*c (a itself when q is 0). */
    int64_t q = s_fdiv(a->min, c);
    if (q == s_fdiv(a->max, c)) return ta_sym_addc(ar, a, s_wmul(q, -c));
    if (a->kind == S_MOD && a->c % c == 0) return ta_sym_mod(ar, a->args[0].t, c);
    const ta_sym_t *r;
    if (a->kind == S_SUM && s_sum_divmod(ar, a, c, true, &r)) return r;
    /* When c and every coefficient share a factor g, a%c keeps a's
     * residue modulo g: (8*x)%16 is 0 or 8, never 15. */
    uint64_t g = s_coef_gcd(a, c);
    int64_t lo = g > 1 ? s_fmod(a->c, (int64_t)g) : 0, hi = g > 1 ? c - (int64_t)g + lo : c - 1;
    s_term_t arg = {a, 0};
    return s_intern(ar, S_MOD, c, 1, &arg, NULL, lo, hi);
}

/* Ceiling division by g > 0. */
static int64_t s_cdiv(int64_t a, int64_t g) { return s_fdiv(a, g) + (s_fmod(a, g) != 0); }

/*
 * a < b and a >= b.  They fold when the range of a - b decides them.  Against
 * a constant, a's constant moves to the right (x+1 < 5 is x < 4) and a
 * common factor of a's coefficients is divided out (4x < 9 is x < 3;
 * 4x >= 9 is x >= 3), both exact for integers; a constant on the left
 * moves to the right (3 < x is x >= 4).
 */
static const ta_sym_t *s_compare(ta_sym_arena_t *ar, int kind, const ta_sym_t *a, const ta_sym_t *b) {
    if (!ar || !a || !b) return NULL;
    const ta_sym_t *d = ta_sym_add(ar, a, ta_sym_mulc(ar, b, -1));
    if (!d) return NULL;
    if (d->max < 0) return ta_sym_const(ar, kind == S_LT);
    if (d->min >= 0) return ta_sym_const(ar, kind == S_GE);
    if (a->kind == S_CONST && b->kind != S_CONST && a->c < INT64_MAX)
        return s_compare(ar, kind == S_LT ? S_GE : S_LT, b, ta_sym_const(ar, a->c + 1));
    if (b->kind == S_CONST && a->kind == S_SUM) {
        uint64_t g = 0;
        for (size_t i = 0; i < a->n; i++) g = s_gcd(g, s_abs(a->args[i].k));
        if (g > (uint64_t)INT64_MAX) g = 1;
        int64_t bound = s_cdiv(s_wadd(b->c, s_wmul(a->c, -1)), (int64_t)g);
        s_lin_t l = {0};
        for (size_t i = 0; i < a->n; i++) s_lin_push(&l, a->args[i].t, a->args[i].k / (int64_t)g);
        a = s_lin_build(ar, &l);
        b = ta_sym_const(ar, bound);
        if (!a || !b) return NULL;
    }
    s_term_t args[2] = {{a, 0}, {b, 0}};
    return s_intern(ar, kind, 0, 2, args, NULL, 0, 1);
}

/* Return a < b and a >= b as 0/1 (see s_compare); NULL as the others. */
const ta_sym_t *ta_sym_lt(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b) {
    return s_compare(ar, S_LT, a, b);
}

const ta_sym_t *ta_sym_ge(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b) {
    return s_compare(ar, S_GE, a, b);
}

/* Returns 1 when both a and b are non-zero, else 0 (NULL if either is NULL
 * or on allocation failure).  Operands that are never zero are dropped, one
 * that is always zero gives 0; nested conjunctions are flattened, sorted and
 * deduplicated, and a lone 0/1 operand is returned as it is. */
const ta_sym_t *ta_sym_and(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b) {
    if (!ar || !a || !b) return NULL;
    const ta_sym_t *ab[2] = {a, b};
    size_t n = 0, cap = (a->kind == S_AND ? a->n : 1) + (b->kind == S_AND ? b->n : 1);
    s_term_t *f = ta_malloc(cap * sizeof *f);
    if (!f) return NULL;
    for (int i = 0; i < 2; i++) {
        size_t m = ab[i]->kind == S_AND ? ab[i]->n : 1;
        for (size_t j = 0; j < m; j++) {
            const ta_sym_t *t = ab[i]->kind == S_AND ? ab[i]->args[j].t : ab[i];
            if (t->min > 0 || t->max < 0) continue; /* never zero: true */
            if (t->min == 0 && t->max == 0) {
                ta_free(f);
                return ta_sym_const(ar, 0);
            }
            f[n++] = (s_term_t){t, 0};
        }
    }
    if (n > 1) qsort(f, n, sizeof *f, s_term_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || f[m - 1].t != f[i].t) f[m++] = f[i];
    const ta_sym_t *r;
    if (m == 0)
        r = ta_sym_const(ar, 1);
    else if (m == 1 && f[0].t->min >= 0 && f[0].t->max <= 1)
        r = f[0].t;
    else
        r = s_intern(ar, S_AND, 0, m, f, NULL, 0, 1);
    ta_free(f);
    return r;
}

/* ---- queries and evaluation ---- */

/* Return the bounds of s's range; 0 for NULL. */
int64_t ta_sym_min(const ta_sym_t *s) { return s ? s->min : 0; }

int64_t ta_sym_max(const ta_sym_t *s) { return s ? s->max : 0; }

/* Returns whether s is a constant (false for NULL), setting *v if v is not NULL. */
bool ta_sym_is_const(const ta_sym_t *s, int64_t *v) {
    if (!s || s->kind != S_CONST) return false;
    if (v) *v = s->c;
    return true;
}

uint64_t ta_sym_slots(const ta_sym_t *s) {
    if (!s) return 0;
    if (s->kind == S_VAR) return (uint64_t)1 << (s->c < 63 ? s->c : 63);
    uint64_t m = 0;
    for (size_t i = 0; i < s->n; i++) m |= ta_sym_slots(s->args[i].t); /* as deep as the expression, a few levels */
    return m;
}

bool ta_sym_linear(const ta_sym_t *s, int slot, int64_t *k) {
    uint64_t bit = (uint64_t)1 << (slot < 63 ? slot : 63);
    *k = 0;
    if (!s || !(ta_sym_slots(s) & bit)) return s != NULL;
    if (s->kind == S_VAR) return *k = 1, slot < 63;
    if (s->kind != S_SUM || slot >= 63) return false;
    bool found = false;
    for (size_t i = 0; i < s->n; i++) {
        const ta_sym_t *t = s->args[i].t;
        if (t->kind == S_VAR && t->c == slot) found = true, *k = s->args[i].k;
        else if (ta_sym_slots(t) & bit) return false;
    }
    return found;
}

bool ta_sym_half(const ta_sym_t *s, int slot) {
    uint64_t bit = (uint64_t)1 << (slot < 63 ? slot : 63);
    if (!s || slot >= 63 || !(ta_sym_slots(s) & bit)) return false;
    const ta_sym_t *half = s;
    if (s->kind == S_SUM) {
        half = NULL;
        for (size_t i = 0; i < s->n; i++) {
            if (!(ta_sym_slots(s->args[i].t) & bit)) continue;
            if (half || s->args[i].k != 1) return false;
            half = s->args[i].t;
        }
    }
    return half && half->kind == S_DIV && half->c == 2 && half->args[0].t->kind == S_VAR && half->args[0].t->c == slot && half->args[0].t->min >= 0;
}

/* Returns s's value with floor division and wrapping int64 arithmetic; 0 for
 * NULL. */
int64_t ta_sym_eval(const ta_sym_t *s, const int64_t *vals) {
    if (!s) return 0;
    int64_t r;
    switch (s->kind) {
    case S_CONST: return s->c;
    case S_VAR: return vals[s->c];
    case S_SUM:
        r = s->c;
        for (size_t i = 0; i < s->n; i++) r = s_wadd(r, s_wmul(s->args[i].k, ta_sym_eval(s->args[i].t, vals)));
        return r;
    case S_MUL:
        r = 1;
        for (size_t i = 0; i < s->n; i++) r = s_wmul(r, ta_sym_eval(s->args[i].t, vals));
        return r;
    case S_DIV: return s_fdiv(ta_sym_eval(s->args[0].t, vals), s->c);
    case S_MOD: return s_fmod(ta_sym_eval(s->args[0].t, vals), s->c);
    case S_LT: return ta_sym_eval(s->args[0].t, vals) < ta_sym_eval(s->args[1].t, vals);
    case S_GE: return ta_sym_eval(s->args[0].t, vals) >= ta_sym_eval(s->args[1].t, vals);
    case S_AND:
        for (size_t i = 0; i < s->n; i++)
            if (ta_sym_eval(s->args[i].t, vals) == 0) return 0;
        return 1;
    }
    return 0;
}

/* ---- rendering ---- */

/* C precedence levels, loosest first; an operand whose own level is below
 * the one its position needs is parenthesized. */
enum { P_AND = 1, P_NE, P_REL, P_ADD, P_MUL, P_ATOM };

typedef struct {
    char *buf;
    size_t len, pos; /* pos counts what the whole expression needs */
} s_out_t;

static void s_puts(s_out_t *o, const char *str) {
    for (; *str; str++, o->pos++)
        if (o->pos + 1 < o->len) o->buf[o->pos] = *str;
}

/* A magnitude: literals past int32 get LL so the arithmetic is int64 even
 * where plain constants would be int. */
static void s_put_mag(s_out_t *o, uint64_t v) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%llu%s", (unsigned long long)v, v > INT32_MAX ? "LL" : "");
    s_puts(o, tmp);
}

static int s_prec(const ta_sym_t *s) {
    switch (s->kind) {
    case S_SUM: return s->c == 0 && s->n == 1 && s->args[0].k > 0 ? P_MUL : P_ADD;
    case S_MUL:
    case S_DIV:
    case S_MOD: return P_MUL;
    case S_LT:
    case S_GE: return P_REL;
    case S_AND: return s->n == 1 ? P_NE : P_AND;
    default: return P_ATOM;
    }
}

static void s_emit(s_out_t *o, const ta_sym_t *s, int need);

/* k*t for k > 0 (the sign is already written). */
static void s_emit_scaled(s_out_t *o, const ta_sym_t *t, uint64_t k) {
    s_emit(o, t, P_MUL);
    if (k != 1) {
        s_puts(o, "*");
        s_put_mag(o, k);
    }
}

static void s_emit_body(s_out_t *o, const ta_sym_t *s) {
    switch (s->kind) {
    case S_CONST:
        if (s->c == INT64_MIN) {
            s_puts(o, "(-9223372036854775807LL-1)");
        } else if (s->c < 0) {
            s_puts(o, "(-");
            s_put_mag(o, s_abs(s->c));
            s_puts(o, ")");
        } else {
            s_put_mag(o, (uint64_t)s->c);
        }
        return;
    case S_VAR: s_puts(o, s->name); return;
    case S_SUM: {
        /* A leading negative term reads better after a positive constant: 3-x. */
        bool first = true, const_first = s->args[0].k < 0 && s->c > 0;
        if (const_first) {
            s_put_mag(o, (uint64_t)s->c);
            first = false;
        }
        for (size_t i = 0; i < s->n; i++) {
            if (s->args[i].k < 0) s_puts(o, "-");
            else if (!first) s_puts(o, "+");
            s_emit_scaled(o, s->args[i].t, s_abs(s->args[i].k));
            first = false;
        }
        if (!const_first && s->c != 0) {
            s_puts(o, s->c < 0 ? "-" : "+");
            s_put_mag(o, s_abs(s->c));
        }
        return;
    }
    case S_MUL:
        for (size_t i = 0; i < s->n; i++) {
            if (i) s_puts(o, "*");
            s_emit(o, s->args[i].t, i ? P_ATOM : P_MUL);
        }
        return;
    case S_DIV:
    case S_MOD:
        s_emit(o, s->args[0].t, P_MUL);
        s_puts(o, s->kind == S_DIV ? "/" : "%");
        s_put_mag(o, (uint64_t)s->c);
        return;
    case S_LT:
    case S_GE:
        /* Both sides at additive level: a comparison of comparisons gets
         * parentheses, which gcc's -Wparentheses asks for. */
        s_emit(o, s->args[0].t, P_ADD);
        s_puts(o, s->kind == S_LT ? "<" : ">=");
        s_emit(o, s->args[1].t, P_ADD);
        return;
    case S_AND:
        if (s->n == 1) {
            s_emit(o, s->args[0].t, P_REL);
            s_puts(o, "!=0");
            return;
        }
        /* Operands that are not 0/1 say !=0, which reads (and lints) better. */
        for (size_t i = 0; i < s->n; i++) {
            const ta_sym_t *t = s->args[i].t;
            if (i) s_puts(o, "&&");
            if (t->min >= 0 && t->max <= 1) {
                s_emit(o, t, P_ATOM);
                continue;
            }
            s_puts(o, "(");
            s_emit(o, t, P_REL);
            s_puts(o, "!=0)");
        }
        return;
    }
}

static void s_emit(s_out_t *o, const ta_sym_t *s, int need) {
    bool paren = s_prec(s) < need;
    if (paren) s_puts(o, "(");
    s_emit_body(o, s);
    if (paren) s_puts(o, ")");
}

/* Writes s as C into buf (see sym.h) and returns the full length; NULL
 * renders as "<null>", which no C compiler accepts. */
size_t ta_sym_render(const ta_sym_t *s, char *buf, size_t len) {
    s_out_t o = {buf, buf ? len : 0, 0};
    if (s)
        s_emit(&o, s, P_AND);
    else
        s_puts(&o, "<null>");
    if (o.len) o.buf[o.pos < o.len ? o.pos : o.len - 1] = '\0';
    return o.pos;
}
