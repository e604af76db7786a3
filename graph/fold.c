/* fold.c - host evaluation of a few elementwise ops on constants, matching the CPU kernels bit for bit. */
#include "fold.h"

#include <math.h>
#include <string.h>

/* The value as a double for float dtypes (16-bit ones widened exactly). */
static double s_f(tact_dtype d, ta_value_t v) { return ta_value_as_double(d, v); }

/* Rounds a float result to d: float32 and the 16-bit types via float. */
static ta_value_t s_from_f(tact_dtype d, double x) {
    ta_value_t r;
    memset(&r, 0, sizeof r);
    if (d == TACT_FLOAT64) {
        r.f = x;
    } else {
        float f = (float)x;
        if (d == TACT_FLOAT16) r.h = ta_float_to_half(f);
        else if (d == TACT_BFLOAT16) r.h = ta_float_to_bf16(f);
        else r.f = f;
    }
    return r;
}

/* An integer result wrapped to d's width (two's complement). */
static ta_value_t s_from_u(tact_dtype d, uint64_t u) {
    ta_value_t in;
    memset(&in, 0, sizeof in);
    in.u = u;
    return ta_value_convert(d, TACT_UINT64, in);
}

static uint64_t s_u(tact_dtype d, ta_value_t v) {
    if (ta_dtype_is_bool(d)) return v.b;
    return ta_dtype_is_unsigned(d) ? v.u : (uint64_t)v.i;
}

int ta_fold_is(tact_dtype d, ta_value_t v, int k) {
    if (ta_dtype_is_float(d)) return s_f(d, v) == (double)k;
    if (ta_dtype_is_bool(d)) return k >= 0 && v.b == (uint8_t)k;
    if (ta_dtype_is_unsigned(d)) return k >= 0 && v.u == (uint64_t)k;
    return v.i == k;
}

int ta_fold_eval(ta_op_t op, tact_dtype out, tact_dtype sd, int n, const ta_value_t *s, ta_value_t *r) {
    int fl = ta_dtype_is_float(sd), bo = ta_dtype_is_bool(sd);
    memset(r, 0, sizeof *r);
    switch (op) {
    case TA_OP_CAST:
        /* As the kernels cast: float -> 16-bit goes through float32. */
        if (n != 1) return -1;
        if ((out == TACT_FLOAT16 || out == TACT_BFLOAT16) && sd == TACT_FLOAT64) {
            *r = s_from_f(out, (double)(float)s[0].f);
            return 0;
        }
        *r = ta_value_convert(out, sd, s[0]);
        return 0;
    case TA_OP_NEG:
        if (n != 1) return -1;
        if (bo) r->b = !s[0].b;
        else if (fl) *r = s_from_f(out, -s_f(sd, s[0]));
        else *r = s_from_u(out, 0 - s_u(sd, s[0]));
        return 0;
    case TA_OP_ADD:
    case TA_OP_MUL:
        if (n != 2) return -1;
        if (bo) r->b = op == TA_OP_ADD ? (s[0].b | s[1].b) : (s[0].b & s[1].b);
        else if (fl) *r = s_from_f(out, op == TA_OP_ADD ? s_f(sd, s[0]) + s_f(sd, s[1]) : s_f(sd, s[0]) * s_f(sd, s[1]));
        else *r = s_from_u(out, op == TA_OP_ADD ? s_u(sd, s[0]) + s_u(sd, s[1]) : s_u(sd, s[0]) * s_u(sd, s[1]));
        /* float32 + and * of float32 values in double, rounded once, equal
         * the float operation (double has more than 2p+2 bits). */
        return 0;
    case TA_OP_MAX:
        if (n != 2) return -1;
        if (fl) {
            double a = s_f(sd, s[0]), b = s_f(sd, s[1]);
            *r = s_from_f(out, a != a || a > b ? a : b);
        } else if (ta_dtype_is_unsigned(sd) || bo) {
            *r = s_from_u(out, s_u(sd, s[0]) > s_u(sd, s[1]) ? s_u(sd, s[0]) : s_u(sd, s[1]));
        } else {
            *r = s_from_u(out, (uint64_t)(s[0].i > s[1].i ? s[0].i : s[1].i));
        }
        return 0;
    case TA_OP_CMPLT:
    case TA_OP_CMPNE: {
        if (n != 2) return -1;
        int v;
        if (fl) {
            double a = s_f(sd, s[0]), b = s_f(sd, s[1]);
            v = op == TA_OP_CMPLT ? a < b : a != b;
        } else if (ta_dtype_is_unsigned(sd) || bo) {
            v = op == TA_OP_CMPLT ? s_u(sd, s[0]) < s_u(sd, s[1]) : s_u(sd, s[0]) != s_u(sd, s[1]);
        } else {
            v = op == TA_OP_CMPLT ? s[0].i < s[1].i : s[0].i != s[1].i;
        }
        r->b = (uint8_t)v;
        return 0;
    }
    case TA_OP_WHERE:
        if (n != 3) return -1;
        *r = s[0].b ? s[1] : s[2];
        return 0;
    default: return -1;
    }
}
