/* sym.h - symbolic integer expressions for index arithmetic: built simplified, rendered as C. */
#ifndef TACT_SYM_H
#define TACT_SYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Expressions over integer variables with known inclusive ranges (loop
 * indices), built bottom-up in an arena.  Every constructor returns a node
 * already simplified and hash-consed, so two structurally equal expressions
 * are the same pointer.  Every node knows its value range [min, max].
 *
 * Division and modulo are by positive constants with floor semantics.  The
 * renderer writes C's / and %, which agree wherever the numerator is
 * non-negative; tact only divides index values that are non-negative where
 * they are used (masked positions are never loaded), and the simplifier may
 * use floor semantics elsewhere.
 *
 * Errors: a constructor returns NULL on allocation failure and whenever an
 * operand is NULL, so a chain of calls needs one check at the end.
 * Division or modulo by c <= 0 also returns NULL.
 */
typedef struct ta_sym ta_sym_t;
typedef struct ta_sym_arena ta_sym_arena_t;

/* Creates an empty arena; returns NULL on allocation failure. */
ta_sym_arena_t *ta_sym_arena_new(void);
/* Frees the arena and every node in it; *ar is set to NULL. */
void ta_sym_arena_destroy(ta_sym_arena_t **ar);

const ta_sym_t *ta_sym_const(ta_sym_arena_t *ar, int64_t v);
/* A variable: slot is its index in the values array of ta_sym_eval, name is
 * how it renders (copied), and min <= value <= max.  The same slot must
 * always be created with the same name and range. */
const ta_sym_t *ta_sym_var(ta_sym_arena_t *ar, int slot, const char *name, int64_t min, int64_t max);
const ta_sym_t *ta_sym_add(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b);
const ta_sym_t *ta_sym_mul(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b);
const ta_sym_t *ta_sym_addc(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c);
const ta_sym_t *ta_sym_mulc(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c);
const ta_sym_t *ta_sym_div(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c); /* floor(a / c), c > 0 */
const ta_sym_t *ta_sym_mod(ta_sym_arena_t *ar, const ta_sym_t *a, int64_t c); /* a - c*floor(a/c), c > 0 */
/* Comparisons and conjunction give 0 or 1. */
const ta_sym_t *ta_sym_lt(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b); /* a < b */
const ta_sym_t *ta_sym_ge(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b); /* a >= b */
const ta_sym_t *ta_sym_and(ta_sym_arena_t *ar, const ta_sym_t *a, const ta_sym_t *b);

int64_t ta_sym_min(const ta_sym_t *s);
int64_t ta_sym_max(const ta_sym_t *s);
/* Returns true and sets *v (if not NULL) when s is a constant. */
bool ta_sym_is_const(const ta_sym_t *s, int64_t *v);

/* The variable slots s uses, as a bit mask (slot k < 63 is bit k; every
 * slot from 63 on is bit 63). */
uint64_t ta_sym_slots(const ta_sym_t *s);
/* True when s is e + k*v, v the variable of slot and e an expression
 * without it; sets *k (0 when s does not use the slot at all). */
bool ta_sym_linear(const ta_sym_t *s, int slot, int64_t *k);
/* True when s is e + v // 2, v the variable of slot (0 <= v) and e an
 * expression without it: each value taken twice, as a 2x2 pool's
 * gradient or a 2x nearest upsampling reads. */
bool ta_sym_half(const ta_sym_t *s, int slot);

/* Evaluates s with variable slot k set to vals[k] (vals must cover every
 * slot used; values outside a variable's range give unspecified results). */
int64_t ta_sym_eval(const ta_sym_t *s, const int64_t *vals);

/* Writes s as a C expression (int64 arithmetic, variables by name,
 * parenthesized only where C needs it), NUL-terminated and cut to len.
 * Returns the length the whole expression needs, as snprintf does. */
size_t ta_sym_render(const ta_sym_t *s, char *buf, size_t len);

#endif
