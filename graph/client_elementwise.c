/* client_elementwise.c - the primitive elementwise ops (unary, binary, where, mulacc) with the reference's broadcasting
 * and promotion. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "client_core.h"
#include "mem.h"

/* ------------------------------------------------------------- op helpers */

/* Returns the first error among xs (a NULL tensor, an error tensor, or
 * tensors of two contexts, as an error tensor), or NULL. */
ti_tensor_t *tc_any_error(int n, ti_tensor_t *const *xs) {
    for (int i = 0; i < n; i++) {
        if (!xs[i]) return ti_null_arg();
        if (xs[i]->status) return xs[i];
    }
    for (int i = 1; i < n; i++)
        if (xs[i]->ctx != xs[0]->ctx) return tc_error(xs[0]->ctx, TACT_EINVAL, "tensors of two contexts in one op");
    return NULL;
}

ti_tensor_t *tc_unary(ti_tensor_t *x, ta_op_t op, tact_dtype out_dtype) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    if (x->status) return x;
    const ti_tensor_t *src[1] = {x};
    return tc_emit(tc_new(x->ctx, out_dtype, &x->shape), op, 1, src, 0, NULL);
}

ti_tensor_t *ti_cast(ti_tensor_t *x, tact_dtype dtype) {
    if (!x) return ti_null_arg();
    if (x->status) return x;
    if (!ta_dtype_valid(dtype)) return tc_error(x->ctx, TACT_EDTYPE, "cast: dtype %d is not a tact_dtype", dtype);
    x = tc_solid(x);
    if (x->dtype == dtype) return x;
    return tc_unary(x, TA_OP_CAST, dtype);
}

ti_tensor_t *ti_bitcast(ti_tensor_t *x, tact_dtype dtype) {
    if (!x) return ti_null_arg();
    if (x->status) return x;
    x = tc_solid(x);
    if (!ta_dtype_valid(dtype) || ta_dtype_size(dtype) != ta_dtype_size(x->dtype))
        return tc_error(x->ctx, TACT_EDTYPE, "bitcast: %s to %s needs dtypes of the same size", ta_dtype_name(x->dtype),
                       ta_dtype_valid(dtype) ? ta_dtype_name(dtype) : "an invalid dtype");
    if (x->dtype == dtype) return x;
    return tc_unary(x, TA_OP_BITCAST, dtype);
}

/* Float-only unary ops cast ints (and bools) to float32 first. */
static ti_tensor_t *s_float_unary(ti_tensor_t *x, ta_op_t op) {
    if (!x) return ti_null_arg();
    if (x->status) return x;
    x = ti_cast(tc_solid(x), ta_dtype_upper_float(tc_solid(x)->dtype));
    /* Strict mode computes float32's with tact's own routines; float64's
     * would be the platform's (libm, the OpenCL driver, CUDA's libdevice). */
    if (!x->status && x->dtype == TACT_FLOAT64 && tc_wiring(x->ctx)->strict && (op == TA_OP_LOG2 || op == TA_OP_SIN || op == TA_OP_EXP2))
        return tc_error(x->ctx, TACT_EDTYPE,
                        "strict mode: %s of float64 (in log, exp, sin, cos, tan and what builds on them) comes from the platform's math "
                        "library, whose bits change with its version: compute it in float32, or leave strict mode",
                        ta_op_name(op));
    return tc_unary(x, op, x->dtype);
}

ti_tensor_t *ti_exp2(ti_tensor_t *x) { return s_float_unary(x, TA_OP_EXP2); }
ti_tensor_t *ti_log2(ti_tensor_t *x) { return s_float_unary(x, TA_OP_LOG2); }
ti_tensor_t *ti_sin(ti_tensor_t *x) { return s_float_unary(x, TA_OP_SIN); }
ti_tensor_t *ti_sqrt(ti_tensor_t *x) { return s_float_unary(x, TA_OP_SQRT); }
ti_tensor_t *ti_recip(ti_tensor_t *x) { return s_float_unary(x, TA_OP_RECIP); }
ti_tensor_t *ti_neg(ti_tensor_t *x) {
    if (!x) return ti_null_arg();
    x = tc_solid(x);
    return x->status ? x : tc_unary(x, TA_OP_NEG, x->dtype);
}

/* Broadcasts x to shape (prepending 1s, then expanding). */
ti_tensor_t *tc_broadcast_to(ti_tensor_t *x, const ta_shape_t *shape) {
    if (ta_shape_equal(&x->shape, shape)) return x;
    int64_t dims[TA_MAX_DIMS];
    int pad = shape->ndim - x->shape.ndim;
    for (int k = 0; k < shape->ndim; k++) dims[k] = k < pad ? 1 : x->shape.d[k - pad];
    if (pad) x = ti_reshape(x, shape->ndim, dims);
    return ti_expand(x, shape->ndim, shape->d);
}

/* The reference's _broadcasted: weak scalars take the other side's dtype
 * when they can, then both sides promote and broadcast. */
int tc_match(ti_tensor_t **pa, ti_tensor_t **pb, const char *op) {
    ti_tensor_t *a = *pa, *b = *pb;
    if (a->weak && b->weak) a = tc_solid(a);
    /* A weak scalar meeting a tensor becomes a constant of its shape at
     * once: one node instead of three. */
    if (b->weak) b = tc_materialize_as(b, ta_dtype_of_scalar(a->dtype, b->kind), &a->shape);
    if (a->weak) a = tc_materialize_as(a, ta_dtype_of_scalar(b->dtype, a->kind), &b->shape);
    if (a->status || b->status) {
        *pa = a->status ? a : b;
        return -1;
    }
    if (a->dtype != b->dtype) {
        tact_dtype d = ta_dtype_promote(a->dtype, b->dtype);
        a = ti_cast(a, d);
        b = ti_cast(b, d);
    }
    ta_shape_t out;
    ta_error_t err;
    if (ta_shape_broadcast(&a->shape, &b->shape, op, &out, &err) != TACT_OK) {
        *pa = tc_error(a->ctx, err.code, "%s", err.text);
        return -1;
    }
    *pa = tc_broadcast_to(a, &out);
    *pb = tc_broadcast_to(b, &out);
    return (*pa)->status || (*pb)->status ? ((*pa = (*pa)->status ? *pa : *pb), -1) : 0;
}

static ti_tensor_t *s_binary(ti_tensor_t *a, ti_tensor_t *b, ta_op_t op, const char *name) {
    ti_tensor_t *e = tc_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    if (tc_match(&a, &b, name) != 0) return a;
    int bitwise = op == TA_OP_XOR || op == TA_OP_AND || op == TA_OP_OR || op == TA_OP_SHL || op == TA_OP_SHR;
    if (bitwise && ta_dtype_is_float(a->dtype))
        return tc_error(a->ctx, TACT_EDTYPE, "%s: needs ints or bools, got %s", name, ta_dtype_name(a->dtype));
    if ((op == TA_OP_SHL || op == TA_OP_SHR) && ta_dtype_is_bool(a->dtype))
        return tc_error(a->ctx, TACT_EDTYPE, "%s: needs ints, got bool", name);
    tact_dtype out = op == TA_OP_CMPLT || op == TA_OP_CMPNE ? TACT_BOOL : a->dtype;
    const ti_tensor_t *src[2] = {a, b};
    return tc_emit(tc_new(a->ctx, out, &a->shape), op, 2, src, 0, NULL);
}

ti_tensor_t *ti_add(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_ADD, "add"); }
ti_tensor_t *ti_mul(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_MUL, "mul"); }
ti_tensor_t *ti_idiv(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_IDIV, "idiv"); }
ti_tensor_t *ti_mod(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_MOD, "mod"); }
ti_tensor_t *ti_maximum(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_MAX, "maximum"); }
ti_tensor_t *ti_cmplt(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_CMPLT, "cmplt"); }
ti_tensor_t *ti_cmpne(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_CMPNE, "cmpne"); }
ti_tensor_t *ti_xor(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_XOR, "xor"); }
ti_tensor_t *ti_and(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_AND, "and"); }
ti_tensor_t *ti_or(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_OR, "or"); }
ti_tensor_t *ti_shl(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_SHL, "shl"); }
ti_tensor_t *ti_shr(ti_tensor_t *a, ti_tensor_t *b) { return s_binary(a, b, TA_OP_SHR, "shr"); }
ti_tensor_t *ti_sub(ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = tc_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    if (tc_match(&a, &b, "sub") != 0) return a;
    return ti_add(a, ti_neg(b));
}

ti_tensor_t *ti_div(ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = tc_any_error(2, (ti_tensor_t *[]){a, b});
    if (e) return e;
    if (tc_match(&a, &b, "div") != 0) return a;
    /* True division upcasts ints, then multiplies by the reciprocal, as the reference does. */
    tact_dtype f = ta_dtype_upper_float(a->dtype);
    a = ti_cast(a, f);
    b = ti_cast(b, f);
    return ti_mul(a, ti_recip(b));
}

ti_tensor_t *ti_where(ti_tensor_t *cond, ti_tensor_t *a, ti_tensor_t *b) {
    ti_tensor_t *e = tc_any_error(3, (ti_tensor_t *[]){cond, a, b});
    if (e) return e;
    cond = tc_solid(cond);
    /* Two scalar branches take their dtype from the condition's, as the
     * reference's (an int8 condition with 3 and 4 gives int8). */
    if (a->weak && b->weak) {
        a = tc_materialize(a, ta_dtype_of_scalar(cond->dtype, a->kind));
        b = tc_materialize(b, ta_dtype_of_scalar(cond->dtype, b->kind));
    }
    cond = ti_cast(cond, TACT_BOOL);
    if (tc_match(&a, &b, "where") != 0) return a;
    ta_shape_t out;
    ta_error_t err;
    if (ta_shape_broadcast(&cond->shape, &a->shape, "where", &out, &err) != TACT_OK)
        return tc_error(a->ctx, err.code, "%s", err.text);
    cond = tc_broadcast_to(cond, &out);
    a = tc_broadcast_to(a, &out);
    b = tc_broadcast_to(b, &out);
    if ((e = tc_any_error(3, (ti_tensor_t *[]){cond, a, b}))) return e;
    const ti_tensor_t *src[3] = {cond, a, b};
    return tc_emit(tc_new(a->ctx, a->dtype, &out), TA_OP_WHERE, 3, src, 0, NULL);
}

ti_tensor_t *ti_mulacc(ti_tensor_t *a, ti_tensor_t *b, ti_tensor_t *c) {
    ti_tensor_t *e = tc_any_error(3, (ti_tensor_t *[]){a, b, c});
    if (e) return e;
    if (tc_match(&a, &b, "mulacc") != 0) return a;
    if (tc_match(&a, &c, "mulacc") != 0) return a;
    b = tc_broadcast_to(b, &a->shape);
    if ((e = tc_any_error(3, (ti_tensor_t *[]){a, b, c}))) return e;
    b = ti_cast(b, a->dtype);
    const ti_tensor_t *src[3] = {a, b, c};
    return tc_emit(tc_new(a->ctx, a->dtype, &a->shape), TA_OP_MULACC, 3, src, 0, NULL);
}
