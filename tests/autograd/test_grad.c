/* test_grad.c - the gradient engine: every primitive's rule against central finite differences in float64, the
 * reference's semantics by hand (ties, relu at 0, requires_grad, detach, no-grad, accumulation, errors). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

#define MAXIN 3
#define MAXN 64

static tact_ctx *s_cur; /* the context of the case being checked, for scalars */

/* A case: inputs of the given shapes with values in [lo, hi), and the function of them. */
typedef struct {
    const char *name;
    int nin;
    int ndim[MAXIN];
    int64_t shape[MAXIN][4];
    double lo, hi;
    tact_tensor *(*fn)(tact_tensor **in);
    int constant; /* bit i: input i asks for no gradient (a comparison's operand has none) */
} s_case_t;

static int64_t s_numel(int nd, const int64_t *sh) {
    int64_t n = 1;
    for (int k = 0; k < nd; k++) n *= sh[k];
    return n;
}

/* sum(f(in) * w) as a float64 scalar, w fixed per output element. */
static tact_tensor *s_loss(tact_ctx *ctx, const s_case_t *c, tact_tensor **in) {
    tact_tensor *out = tact_cast(c->fn(in), TACT_FLOAT64);
    int nd = tact_ndim(out);
    int64_t sh[8];
    tact_shape(out, sh);
    int64_t n = s_numel(nd, sh);
    double w[MAXN * 4];
    cr_assert(n <= MAXN * 4, "%s: output too large", c->name);
    for (int64_t i = 0; i < n; i++) w[i] = 0.5 + 0.25 * (double)(i % 7) - 0.1 * (double)(i % 3);
    return tact_sum(tact_mul(out, tact_from_data(ctx, TACT_FLOAT64, nd, sh, w)), -1, NULL, 0);
}

static double s_eval(tact_ctx *ctx, const s_case_t *c, double (*vals)[MAXN]) {
    tact_scope_begin(ctx);
    tact_tensor *in[MAXIN];
    for (int i = 0; i < c->nin; i++) in[i] = tact_from_data(ctx, TACT_FLOAT64, c->ndim[i], c->shape[i], vals[i]);
    double v = NAN;
    int rc = tact_item(s_loss(ctx, c, in), &v);
    cr_assert_eq(rc, TACT_OK, "%s: %s", c->name, tact_ctx_error(ctx));
    tact_scope_end(ctx);
    return v;
}

/* The gradient of every input from one backward, against central
 * differences (h = 1e-6 relative): within 1e-6 + 1e-5 * |fd|. */
static void s_check(const s_case_t *c) {
    uint64_t seed = tu_seed(), rng = seed;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    s_cur = ctx;
    double vals[MAXIN][MAXN];
    for (int i = 0; i < c->nin; i++) {
        int64_t n = s_numel(c->ndim[i], c->shape[i]);
        cr_assert(n <= MAXN);
        for (int64_t j = 0; j < n; j++) vals[i][j] = c->lo + (c->hi - c->lo) * (double)(tu_rand(&rng) >> 11) / 9007199254740992.0;
    }
    tact_tensor *in[MAXIN];
    for (int i = 0; i < c->nin; i++)
        in[i] = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT64, c->ndim[i], c->shape[i], vals[i]), !(c->constant >> i & 1));
    tact_tensor *loss = s_loss(ctx, c, in);
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s: %s", c->name, tact_ctx_error(ctx));
    for (int i = 0; i < c->nin; i++) {
        int64_t n = s_numel(c->ndim[i], c->shape[i]);
        double g[MAXN];
        if (c->constant >> i & 1) continue;
        cr_assert_eq(tact_read(tact_grad(in[i]), g, sizeof g), TACT_OK, "%s input %d: %s %s", c->name, i, tact_ctx_error(ctx),
                     tact_error_message(tact_grad(in[i])));
        for (int64_t j = 0; j < n; j++) {
            double x = vals[i][j], h = 1e-6 * fmax(1, fabs(x));
            vals[i][j] = x + h;
            double up = s_eval(ctx, c, vals);
            vals[i][j] = x - h;
            double down = s_eval(ctx, c, vals);
            vals[i][j] = x;
            double fd = (up - down) / (2 * h);
            cr_expect(fabs(g[j] - fd) <= 1e-6 + 1e-5 * fabs(fd), "%s: d/d in%d[%ld]: engine %.12g, finite differences %.12g (seed %llu)",
                      c->name, i, (long)j, g[j], fd, (unsigned long long)seed);
        }
    }
    tact_ctx_close(&ctx);
}

static tact_tensor *f_exp2(tact_tensor **x) { return tact_exp2(x[0]); }
static tact_tensor *f_log2(tact_tensor **x) { return tact_log2(x[0]); }
static tact_tensor *f_sin(tact_tensor **x) { return tact_sin(x[0]); }
static tact_tensor *f_sqrt(tact_tensor **x) { return tact_sqrt(x[0]); }
static tact_tensor *f_recip(tact_tensor **x) { return tact_recip(x[0]); }
static tact_tensor *f_neg(tact_tensor **x) { return tact_neg(x[0]); }
static tact_tensor *f_cast(tact_tensor **x) { return tact_cast(tact_cast(x[0], TACT_FLOAT32), TACT_FLOAT64); }
static tact_tensor *f_add(tact_tensor **x) { return tact_add(x[0], x[1]); }
static tact_tensor *f_mul(tact_tensor **x) { return tact_mul(x[0], x[1]); }
static tact_tensor *f_maximum(tact_tensor **x) { return tact_maximum(x[0], x[1]); }
static tact_tensor *f_where(tact_tensor **x) { return tact_where(tact_cmplt(x[2], tact_scalar(s_cur, 0.0)), x[0], x[1]); }
static tact_tensor *f_mulacc(tact_tensor **x) { return tact_mulacc(x[0], x[1], x[2]); }
static tact_tensor *f_sum(tact_tensor **x) { return tact_sum(x[0], 1, (int[]){1}, 0); }
static tact_tensor *f_max(tact_tensor **x) { return tact_max(x[0], 1, (int[]){0}, 1); }
static tact_tensor *f_reshape(tact_tensor **x) { return tact_mul(tact_reshape(x[0], 2, (int64_t[]){3, 4}), tact_reshape(x[0], 2, (int64_t[]){3, 4})); }
static tact_tensor *f_permute(tact_tensor **x) { return tact_mul(tact_permute(x[0], (int[]){2, 0, 1}), tact_scalar(s_cur, 3.0)); }
static tact_tensor *f_expand(tact_tensor **x) { return tact_mul(tact_expand(x[0], 3, (int64_t[]){2, 3, 4}), x[1]); }
static tact_tensor *f_pad(tact_tensor **x) { return tact_exp2(tact_pad(x[0], (const int64_t[][2]){{1, 2}, {0, 1}}, 0)); }
static tact_tensor *f_shrink(tact_tensor **x) { return tact_sin(tact_shrink(x[0], (const int64_t[][2]){{1, 3}, {1, 4}})); }
static tact_tensor *f_flip(tact_tensor **x) { return tact_mul(tact_flip(x[0], 1, (int[]){1}), x[1]); }
static tact_tensor *f_contiguous(tact_tensor **x) { return tact_mul(tact_contiguous(tact_permute(x[0], (int[]){1, 0})), x[1]); }
static tact_tensor *f_chain(tact_tensor **x) { /* one input used three ways, so contributions add */
    return tact_add(tact_mul(x[0], tact_sin(x[0])), tact_sum(tact_exp2(x[0]), 1, (int[]){0}, 1));
}

#define S_CASE(fn_, nin_, lo_, hi_, ...) \
    Test(autograd_rule, fn_) { \
        s_case_t c = {#fn_, nin_, __VA_ARGS__, lo_, hi_, f_##fn_}; \
        s_check(&c); \
    }

S_CASE(exp2, 1, -2, 2, {2}, {{2, 3}})
S_CASE(log2, 1, 0.5, 3, {2}, {{2, 3}})
S_CASE(sin, 1, -3, 3, {2}, {{2, 3}})
S_CASE(sqrt, 1, 0.5, 4, {2}, {{2, 3}})
S_CASE(recip, 1, 0.5, 2, {2}, {{2, 3}})
S_CASE(neg, 1, -2, 2, {2}, {{2, 3}})
S_CASE(add, 2, -2, 2, {2, 2}, {{2, 3}, {2, 3}})
S_CASE(mul, 2, -2, 2, {2, 2}, {{2, 3}, {2, 3}})
S_CASE(maximum, 2, -2, 2, {2, 2}, {{2, 3}, {2, 3}})
Test(autograd_rule, where) {
    s_case_t c = {"where", 3, {2, 2, 2}, {{2, 3}, {2, 3}, {2, 3}}, -2, 2, f_where, 4};
    s_check(&c);
}
S_CASE(mulacc, 3, -2, 2, {2, 2, 2}, {{2, 3}, {2, 3}, {2, 3}})
S_CASE(sum, 1, -2, 2, {2}, {{3, 4}})
S_CASE(max, 1, -2, 2, {2}, {{3, 4}})
S_CASE(reshape, 1, -2, 2, {3}, {{2, 3, 2}})
S_CASE(permute, 1, -2, 2, {3}, {{2, 3, 4}})
S_CASE(expand, 2, -2, 2, {3, 3}, {{2, 1, 4}, {2, 3, 4}})
S_CASE(pad, 1, -2, 2, {2}, {{2, 3}})
S_CASE(shrink, 1, -2, 2, {2}, {{4, 5}})
S_CASE(flip, 2, -2, 2, {2, 2}, {{2, 3}, {2, 3}})
S_CASE(contiguous, 2, -2, 2, {2, 2}, {{3, 2}, {2, 3}})
S_CASE(chain, 1, -1, 1, {2}, {{3, 2}})

/* The cast's rule is exact: d/dx of cast(cast(x, f32), f64) is the upstream gradient. */
Test(autograd_rule, cast) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    double v[4] = {1.5, -2.25, 3, 0.125}, g[4];
    tact_tensor *x = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT64, 1, (int64_t[]){4}, v), 1);
    tact_tensor *loss = tact_sum(tact_mul(f_cast(&x), tact_from_data(ctx, TACT_FLOAT64, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4})), -1, NULL, 0);
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_grad(x), g, sizeof g), TACT_OK);
    for (int i = 0; i < 4; i++) cr_expect_eq(g[i], i + 1.0, "[%d] %g", i, g[i]);
    tact_ctx_close(&ctx);
}

/* ------------------------------------------------------------- semantics */

static tact_ctx *s_open(void) {
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    return ctx;
}

static tact_tensor *s_vec(tact_ctx *ctx, int n, const float *v) { return tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){n}, v); }

static void s_read(tact_tensor *t, float *out, size_t n) {
    cr_assert_eq(tact_read(t, out, n * sizeof *out), TACT_OK, "%s", tact_error_message(t));
}

/* DESIGN.md §4 trap 8, hand-computed. */
Test(autograd_semantics, relu_at_zero_maximum_ties_and_max_ties) {
    tact_ctx *ctx = s_open();
    float g[4];
    tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 4, (float[]){-1, 0, 0.5f, 2}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_relu(x), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(tact_grad(x), g, 4);
    cr_expect(g[0] == 0 && g[1] == 0 && g[2] == 1 && g[3] == 1, "relu: %g %g %g %g", g[0], g[1], g[2], g[3]);

    tact_tensor *a = tact_set_requires_grad(s_vec(ctx, 3, (float[]){1, 2, 3}), 1);
    tact_tensor *b = tact_set_requires_grad(s_vec(ctx, 3, (float[]){1, 5, 0}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_maximum(a, b), -1, NULL, 0), NULL), TACT_OK);
    float ga[3], gb[3];
    s_read(tact_grad(a), ga, 3);
    s_read(tact_grad(b), gb, 3);
    cr_expect(ga[0] == 0.5f && ga[1] == 0 && ga[2] == 1, "maximum a: %g %g %g", ga[0], ga[1], ga[2]);
    cr_expect(gb[0] == 0.5f && gb[1] == 1 && gb[2] == 0, "maximum b: %g %g %g", gb[0], gb[1], gb[2]);

    tact_tensor *m = tact_set_requires_grad(s_vec(ctx, 4, (float[]){3, 1, 3, 3}), 1);
    cr_assert_eq(tact_backward(tact_max(m, -1, NULL, 0), NULL), TACT_OK);
    s_read(tact_grad(m), g, 4);
    cr_expect(fabsf(g[0] - 1.0f / 3) < 1e-7f && g[1] == 0 && fabsf(g[2] - 1.0f / 3) < 1e-7f, "max: %g %g %g %g", g[0], g[1], g[2], g[3]);
    tact_ctx_close(&ctx);
}

Test(autograd_semantics, requires_grad_propagates_as_the_reference) {
    tact_ctx *ctx = s_open();
    tact_tensor *u = s_vec(ctx, 2, (float[]){1, 2});
    tact_tensor *t = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    tact_tensor *f = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 0);
    cr_expect_eq(tact_requires_grad(u), -1);
    cr_expect_eq(tact_requires_grad(tact_add(u, t)), 1);
    cr_expect_eq(tact_requires_grad(tact_add(u, f)), -1);
    cr_expect_eq(tact_requires_grad(tact_add(f, f)), 0);
    cr_expect_eq(tact_requires_grad(tact_detach(t)), 0);
    tact_tensor *i = tact_from_data(ctx, TACT_INT32, 1, (int64_t[]){2}, (int32_t[]){1, 2});
    cr_expect_eq(tact_status_of(tact_set_requires_grad(i, 1)), TACT_EDTYPE);
    tact_ctx_close(&ctx);
}

/* Two backwards add up; detach and no-grad cut the path; clear drops. */
Test(autograd_semantics, accumulate_detach_no_grad) {
    tact_ctx *ctx = s_open();
    float g[2];
    tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(x, x), -1, NULL, 0), NULL), TACT_OK);
    tact_tensor *gh = tact_grad(x);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(x, tact_scalar(ctx, 3.0)), -1, NULL, 0), NULL), TACT_OK);
    cr_expect_eq(tact_grad(x), gh, "the gradient keeps its handle");
    s_read(gh, g, 2);
    cr_expect(g[0] == 5 && g[1] == 7, "2x + 3: %g %g", g[0], g[1]);

    tact_grad_clear(x);
    cr_expect_neq(tact_status_of(tact_grad(x)), TACT_OK);
    /* x * detach(x): only the first factor passes a gradient. */
    cr_assert_eq(tact_backward(tact_sum(tact_mul(x, tact_detach(x)), -1, NULL, 0), NULL), TACT_OK);
    s_read(tact_grad(x), g, 2);
    cr_expect(g[0] == 1 && g[1] == 2, "detach: %g %g", g[0], g[1]);

    tact_grad_clear(x);
    cr_expect_eq(tact_set_no_grad(ctx, 1), 0);
    tact_tensor *y = tact_mul(x, x);
    cr_expect_eq(tact_set_no_grad(ctx, 0), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_add(y, x), -1, NULL, 0), NULL), TACT_OK);
    s_read(tact_grad(x), g, 2);
    cr_expect(g[0] == 1 && g[1] == 1, "no-grad: %g %g", g[0], g[1]);
    tact_ctx_close(&ctx);
}

Test(autograd_semantics, explicit_upstream_gradient_for_a_vector) {
    tact_ctx *ctx = s_open();
    float g[3];
    tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 3, (float[]){1, 2, 3}), 1);
    tact_tensor *y = tact_mul(x, x);
    cr_expect_eq(tact_backward(y, NULL), TACT_ESHAPE);
    cr_expect(strstr(tact_ctx_error(ctx), "scalar"), "%s", tact_ctx_error(ctx));
    cr_expect_eq(tact_backward(y, s_vec(ctx, 2, (float[]){1, 1})), TACT_ESHAPE);
    cr_assert_eq(tact_backward(y, s_vec(ctx, 3, (float[]){1, 10, 100})), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(tact_grad(x), g, 3);
    cr_expect(g[0] == 2 && g[1] == 40 && g[2] == 600, "%g %g %g", g[0], g[1], g[2]);
    tact_ctx_close(&ctx);
}

/* tact_backward returns before the graph answers which targets got a
 * gradient; the next wait reads the answer (here a realize of something
 * else): a target on the loss's path adds to its gradient under the same
 * handle, one off the path keeps an earlier gradient (same handle, same
 * values) or has none. */
Test(autograd_semantics, a_backward_is_answered_at_the_next_wait) {
    tact_ctx *ctx = s_open();
    float gx[2], gy[2];
    tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    tact_tensor *y = tact_set_requires_grad(s_vec(ctx, 2, (float[]){3, 5}), 1);
    tact_tensor *lone = tact_set_requires_grad(s_vec(ctx, 2, (float[]){7, 9}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(x, y), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *hx = tact_grad(x), *hy = tact_grad(y);
    cr_assert_eq(tact_status_of(hy), TACT_OK, "%s", tact_error_message(hy));
    cr_assert_eq(tact_backward(tact_sum(tact_mul(x, x), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *other = tact_add(lone, lone);
    cr_assert_eq(tact_realize(ctx, 1, &other), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_expect_eq(tact_grad(x), hx, "x's gradient keeps its handle");
    cr_expect_eq(tact_grad(y), hy, "y's earlier gradient stays, handle and all");
    s_read(tact_grad(x), gx, 2);
    s_read(tact_grad(y), gy, 2);
    cr_expect(gx[0] == 3 + 2 && gx[1] == 5 + 4, "x: y + 2x, got %g %g", gx[0], gx[1]);
    cr_expect(gy[0] == 1 && gy[1] == 2, "y: x from the first backward, got %g %g", gy[0], gy[1]);
    cr_expect_neq(tact_status_of(tact_grad(lone)), TACT_OK, "lone is on neither loss's path");
    cr_expect(strstr(tact_error_message(tact_grad(lone)), "no gradient"), "%s", tact_error_message(tact_grad(lone)));
    tact_ctx_close(&ctx);
}

/* A gradient handle the program holds keeps its id and values until the
 * answer says its tensor got a new gradient: here it got none, and reads
 * of it before the answer see the earlier gradient. */
Test(autograd_semantics, a_held_gradient_stays_until_the_answer) {
    tact_ctx *ctx = s_open();
    float g[2];
    tact_tensor *w = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    tact_tensor *u = tact_set_requires_grad(s_vec(ctx, 2, (float[]){3, 5}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(w, u), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *h = tact_grad(u);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(w, w), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *twice = tact_mul(h, tact_scalar(ctx, 2.0)); /* built on h before the answer */
    s_read(h, g, 2);
    cr_expect(g[0] == 1 && g[1] == 2, "u's earlier gradient: %g %g", g[0], g[1]);
    s_read(twice, g, 2);
    cr_expect(g[0] == 2 && g[1] == 4, "twice it: %g %g", g[0], g[1]);
    cr_expect_eq(tact_grad(u), h);
    tact_ctx_close(&ctx);
}

/* A target freed with its scope, or a gradient cleared, before the answer
 * is read: the answer finds them gone (ASan checks nothing is touched). */
Test(autograd_semantics, a_target_freed_or_cleared_before_the_answer) {
    tact_ctx *ctx = s_open();
    float g[2];
    tact_tensor *w = tact_keep(tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1));
    tact_scope_begin(ctx);
    tact_tensor *t = tact_set_requires_grad(s_vec(ctx, 2, (float[]){3, 4}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(t, w), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_scope_end(ctx);
    s_read(tact_grad(w), g, 2);
    cr_expect(g[0] == 3 && g[1] == 4, "w: t, got %g %g", g[0], g[1]);
    tact_grad_clear(w);
    tact_scope_begin(ctx); /* cleared, then freed */
    tact_tensor *t2 = tact_set_requires_grad(s_vec(ctx, 2, (float[]){3, 4}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(t2, w), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_grad_clear(t2);
    tact_scope_end(ctx);
    tact_grad_clear(w);
    cr_assert_eq(tact_backward(tact_sum(tact_mul(w, w), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_grad_clear(w);
    cr_expect_neq(tact_status_of(tact_grad(w)), TACT_OK, "cleared before its answer");
    cr_assert_eq(tact_backward(tact_sum(tact_mul(w, w), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(tact_grad(w), g, 2);
    cr_expect(g[0] == 2 && g[1] == 4, "w: 2w, got %g %g", g[0], g[1]);
    tact_ctx_close(&ctx);
}

Test(autograd_semantics, second_backward_through_a_consumed_graph_is_an_error) {
    tact_ctx *ctx = s_open();
    tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    tact_tensor *loss = tact_sum(tact_exp2(x), -1, NULL, 0);
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK);
    /* tact_backward does not wait for the graph: its refusal comes with
     * the next wait (here tact_grad), and x keeps the first gradient. */
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK);
    tact_tensor *refused = tact_grad(x);
    cr_expect_eq(tact_status_of(refused), TACT_EINVAL);
    cr_expect(strstr(tact_error_message(refused), "earlier backward"), "%s", tact_error_message(refused));
    cr_expect(strstr(tact_ctx_error(ctx), "earlier backward"), "%s", tact_ctx_error(ctx));
    /* The same forward made again is new: a backward through it works,
     * and the context goes on working. */
    cr_assert_eq(tact_backward(tact_sum(tact_exp2(x), -1, NULL, 0), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    float g[2];
    s_read(tact_grad(x), g, 2);
    cr_expect(fabsf(g[0] - 2 * 2 * logf(2)) < 1e-5f && fabsf(g[1] - 2 * 4 * logf(2)) < 1e-5f, "%g %g", g[0], g[1]);
    tact_ctx_close(&ctx);
}

Test(autograd_semantics, errors_name_the_cause) {
    tact_ctx *ctx = s_open();
    tact_tensor *x = s_vec(ctx, 2, (float[]){1, 2});
    cr_expect_neq(tact_status_of(tact_grad(x)), TACT_OK);
    cr_expect(strstr(tact_error_message(tact_grad(x)), "no gradient"), "%s", tact_error_message(tact_grad(x)));
    tact_tensor *i = tact_from_data(ctx, TACT_INT32, 0, NULL, (int32_t[]){1});
    cr_expect_eq(tact_backward(i, NULL), TACT_EDTYPE);
    cr_expect_eq(tact_backward(NULL, NULL), TACT_EINVAL);
    /* A tensor that asked but is not on the loss's path gets none. */
    tact_tensor *lone = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    tact_tensor *w = tact_set_requires_grad(s_vec(ctx, 2, (float[]){3, 4}), 1);
    cr_assert_eq(tact_backward(tact_sum(w, -1, NULL, 0), NULL), TACT_OK);
    cr_expect_neq(tact_status_of(tact_grad(lone)), TACT_OK);
    cr_expect_eq(tact_status_of(tact_grad(w)), TACT_OK);
    tact_ctx_close(&ctx);
}

/* Gradients are ordinary tensors: scopes end, the gradient lives with its tensor. */
Test(autograd_semantics, gradient_outlives_the_scope_of_the_backward) {
    tact_ctx *ctx = s_open();
    tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    for (int step = 0; step < 3; step++) {
        tact_scope_begin(ctx);
        cr_assert_eq(tact_backward(tact_sum(tact_mul(x, x), -1, NULL, 0), NULL), TACT_OK);
        tact_scope_end(ctx);
    }
    float g[2];
    s_read(tact_grad(x), g, 2);
    cr_expect(g[0] == 6 && g[1] == 12, "%g %g", g[0], g[1]);
    tact_ctx_close(&ctx);
}

/* A backward's records travel in parts of a bounded size both ways (here
 * 200 bytes: dozens of parts), so no graph is too large for a message:
 * the gradients are those of a backward in one part. */
static void s_mlp_grads(float *gw1, float *gw2) {
    tact_ctx *ctx = s_open();
    tact_manual_seed(ctx, 5);
    tact_tensor *x = tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){8, 6});
    tact_tensor *w1 = tact_set_requires_grad(tact_contiguous(tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){6, 5})), 1);
    tact_tensor *w2 = tact_set_requires_grad(tact_contiguous(tact_randn(ctx, TACT_FLOAT32, 2, (int64_t[]){5, 3})), 1);
    tact_tensor *h = tact_gelu(tact_matmul(x, w1));
    tact_tensor *loss = tact_mean(tact_log_softmax(tact_matmul(tact_layernorm(h, 1, (int[]){-1}, 1e-5), w2), 1), -1, NULL, 0);
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_grad(w1), gw1, sizeof(float) * 30), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_read(tact_grad(w2), gw2, sizeof(float) * 15), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
}

Test(autograd_semantics, a_backward_in_parts_gives_the_same_gradients) {
    float a1[30], a2[15], b1[30], b2[15];
    s_mlp_grads(a1, a2);
    setenv("TACT_TEST_PART_BYTES", "200", 1);
    s_mlp_grads(b1, b2);
    unsetenv("TACT_TEST_PART_BYTES");
    /* The parts cut the forward's realizes too (other kernels, other
     * summation orders): equal within float rounding. */
    for (int i = 0; i < 30; i++) {
        cr_expect(a1[i] != 0 && a1[i] == a1[i], "w1 gradient [%d] is %g", i, a1[i]);
        cr_expect(fabsf(a1[i] - b1[i]) <= 1e-5f * (1 + fabsf(a1[i])), "w1 [%d]: %.9g in one part, %.9g in parts", i, a1[i], b1[i]);
    }
    for (int i = 0; i < 15; i++) cr_expect(fabsf(a2[i] - b2[i]) <= 1e-5f * (1 + fabsf(a2[i])), "w2 [%d]: %.9g, %.9g", i, a2[i], b2[i]);
}

/* Review regressions.  The same forward built twice is two graphs (each
 * backward goes through its own); an upstream gradient that itself needs
 * a gradient is read as a value; x * 0 still gives x its zero gradient. */
Test(autograd_semantics, graphs_built_twice_upstream_gradients_and_times_zero) {
    tact_ctx *ctx = s_open();
    float g[2];
    tact_tensor *a = tact_set_requires_grad(s_vec(ctx, 2, (float[]){1, 2}), 1);
    tact_tensor *l1 = tact_sum(tact_mul(a, a), -1, NULL, 0), *l2 = tact_sum(tact_mul(a, a), -1, NULL, 0);
    cr_assert_eq(tact_backward(l1, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_backward(l2, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(tact_grad(a), g, 2);
    cr_expect(g[0] == 4 && g[1] == 8, "two graphs: %g %g", g[0], g[1]);

    tact_grad_clear(a);
    tact_tensor *b = tact_set_requires_grad(s_vec(ctx, 2, (float[]){3, 5}), 1);
    cr_assert_eq(tact_backward(tact_mul(a, a), tact_mul(b, tact_scalar(ctx, 2.0))), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read(tact_grad(a), g, 2);
    cr_expect(g[0] == 12 && g[1] == 40, "upstream 2b: %g %g", g[0], g[1]);
    cr_expect_neq(tact_status_of(tact_grad(b)), TACT_OK, "the upstream gradient is a value, not on the loss's path");

    tact_tensor *w = tact_set_requires_grad(s_vec(ctx, 2, (float[]){7, 9}), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_add(tact_mul(a, a), tact_mul(w, tact_scalar(ctx, 0.0))), -1, NULL, 0), NULL), TACT_OK);
    s_read(tact_grad(w), g, 2);
    cr_expect(g[0] == 0 && g[1] == 0, "w * 0: %g %g", g[0], g[1]);
    tact_ctx_close(&ctx);
}

/* Leaves made of the same constant (two zeros() of one shape, the graph's
 * duplicates of one node) are two parameters: each gets its own gradient
 * through its own views, ones() and full() too.  (Their ops read the
 * other leaf's node: the first got both gradients and the second none.) */
Test(autograd_semantics, leaves_of_the_same_constant_keep_their_own_gradients) {
    tact_ctx *ctx = s_open();
    int64_t sh[2] = {4, 3};
    tact_tensor *x[4] = {tact_zeros(ctx, TACT_FLOAT32, 2, sh), tact_zeros(ctx, TACT_FLOAT32, 2, sh), tact_ones(ctx, TACT_FLOAT32, 2, sh),
                         tact_full(ctx, TACT_FLOAT32, 2, sh, 1.0)};
    for (int i = 0; i < 4; i++) x[i] = tact_set_requires_grad(x[i], 1);
    /* loss = sum over i of (i + 2) * sum(unsqueeze(x_i) * ...): d x_i = i + 2 */
    tact_tensor *loss = NULL;
    for (int i = 0; i < 4; i++) {
        tact_tensor *t = tact_sum_all(tact_mul(tact_unsqueeze(x[i], -1), tact_scalar(ctx, i + 2.0)));
        loss = loss ? tact_add(loss, t) : t;
    }
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) {
        float g[12];
        cr_assert_eq(tact_read(tact_grad(x[i]), g, sizeof g), TACT_OK, "leaf %d: %s", i, tact_ctx_error(ctx));
        for (int k = 0; k < 12; k++) cr_expect_eq(g[k], (float)(i + 2), "leaf %d [%d]: %g, want %d", i, k, g[k], i + 2);
    }
    tact_ctx_close(&ctx);
}

/* sigmoid, and tanh, gelu and quick_gelu through it, at inputs of
 * magnitude 100 to 400: their values saturate (0, 1, -1, x) and their
 * gradients are 0 there, as the reference's dedicated backward gives
 * (exp(-x) was infinite and the gradient inf * 0 = NaN); at 0.5 the
 * gradient is still sigmoid's s * (1 - s). */
Test(autograd_semantics, saturated_sigmoid_and_tanh_have_zero_gradients) {
    tact_ctx *ctx = s_open();
    float xs[5] = {-400, -100, 0.5f, 100, 400};
    tact_tensor *(*fs[4])(tact_tensor *) = {tact_sigmoid, tact_tanh, tact_gelu, tact_quick_gelu};
    const char *names[4] = {"sigmoid", "tanh", "gelu", "quick_gelu"};
    for (int f = 0; f < 4; f++) {
        tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 5, xs), 1);
        cr_assert_eq(tact_backward(tact_sum(fs[f](x), -1, NULL, 0), NULL), TACT_OK, "%s: %s", names[f], tact_ctx_error(ctx));
        float g[5];
        s_read(tact_grad(x), g, 5);
        for (int i = 0; i < 5; i++) {
            int far = i != 2;
            /* d/dx at the saturated ends: 0 (sigmoid, tanh, the gelus' lower end) or 1 (the gelus' upper end: x). */
            float want = !far ? 0 : (f >= 2 && xs[i] > 0) ? 1.0f : 0.0f;
            if (far) cr_expect(fabsf(g[i] - want) <= 1e-30f, "%s'(%g) = %g, want %g", names[f], xs[i], g[i], want); /* (a subnormal from sigmoid(-88) may stay) */
            else cr_expect(isfinite(g[i]) && g[i] > 0, "%s'(0.5) = %g", names[f], g[i]);
        }
    }
    float s = 1 / (1 + expf(-0.5f)), g[5];
    tact_tensor *x = tact_set_requires_grad(s_vec(ctx, 5, xs), 1);
    cr_assert_eq(tact_backward(tact_sum(tact_sigmoid(x), -1, NULL, 0), NULL), TACT_OK);
    s_read(tact_grad(x), g, 5);
    cr_expect(fabsf(g[2] - s * (1 - s)) < 1e-6f, "sigmoid'(0.5) = %g, want %g", g[2], s * (1 - s));
    tact_ctx_close(&ctx);
}
