/* client_create.c - the primitive creation calls (empty, full, zeros, ones, arange, eye); from_data and the scalars stay
 * in client.c, which sends the data. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "client_core.h"
#include "mem.h"

/* Checks dtype and shape of a creation call. */
ti_tensor_t *tc_check_new(ti_ctx_t *ctx, const char *op, int dtype, int ndim, const int64_t *shape, ta_shape_t *s) {
    ta_error_t err;
    if (!ta_dtype_valid(dtype)) return tc_error(ctx, TACT_EDTYPE, "%s: dtype %d is not a tact_dtype", op, dtype);
    if (ndim > 0 && !shape) return tc_error(ctx, TACT_EINVAL, "%s: shape is NULL", op);
    if (ta_shape_make(s, ndim, shape, op, &err) != TACT_OK) return tc_error(ctx, err.code, "%s", err.text);
    return NULL;
}

ti_tensor_t *ti_empty(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx) return ti_null_arg();
    ta_shape_t s;
    ti_tensor_t *bad = tc_check_new(ctx, "empty", dtype, ndim, shape, &s);
    if (bad) return bad;
    /* "Unspecified" contents are zeros: runs stay deterministic. */
    size_t bytes = (size_t)ta_shape_numel(&s) * ta_dtype_size(dtype);
    void *zeros = ta_calloc(bytes ? bytes : 1, 1);
    if (!zeros) return tc_error(ctx, TACT_ENOMEM, "empty: out of memory for %zu bytes", bytes);
    ti_tensor_t *t = ti_from_data(ctx, dtype, ndim, shape, zeros);
    ta_free(zeros);
    return t;
}

ti_tensor_t *ti_full(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, double value) {
    if (!ctx) return ti_null_arg();
    ta_shape_t s;
    ti_tensor_t *bad = tc_check_new(ctx, "full", dtype, ndim, shape, &s);
    if (bad) return bad;
    ti_tensor_t *c = tc_const(ctx, dtype, ta_value_from_double(dtype, value));
    int64_t ones[TA_MAX_DIMS];
    for (int k = 0; k < ndim; k++) ones[k] = 1;
    return ti_expand(ti_reshape(c, ndim, ones), ndim, shape);
}

ti_tensor_t *ti_zeros(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx) return ti_null_arg();
    return ti_full(ctx, dtype, ndim, shape, 0);
}
ti_tensor_t *ti_ones(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx) return ti_null_arg();
    return ti_full(ctx, dtype, ndim, shape, 1);
}

ti_tensor_t *ti_from_host(ti_ctx_t *ctx, tact_dtype dtype, int ndim, const int64_t *shape, const void *data, tact_dtype host_dtype) {
    if (!ctx) return ti_null_arg();
    if (!ta_dtype_valid((int)host_dtype)) return tc_error(ctx, TACT_EDTYPE, "from_host: host dtype %d is not a tact_dtype", (int)host_dtype);
    if (host_dtype == dtype) return ti_from_data(ctx, dtype, ndim, shape, data);
    ta_shape_t s;
    ti_tensor_t *bad = tc_check_new(ctx, "from_host", dtype, ndim, shape, &s);
    if (bad) return bad;
    int64_t n = ta_shape_numel(&s);
    if (n && !data) return tc_error(ctx, TACT_EINVAL, "from_host: data is NULL");
    size_t out_size = ta_dtype_size(dtype), in_size = ta_dtype_size(host_dtype);
    uint8_t *buf = ta_malloc(n ? (size_t)n * out_size : 1);
    if (!buf) return tc_error(ctx, TACT_ENOMEM, "from_host: out of memory converting %" PRId64 " elements", n);
    const uint8_t *in = data;
    for (int64_t i = 0; i < n; i++)
        ta_value_store(dtype, buf + (size_t)i * out_size, ta_value_convert(dtype, host_dtype, ta_value_load(host_dtype, in + (size_t)i * in_size)));
    ti_tensor_t *t = ti_from_data(ctx, dtype, ndim, shape, buf);
    ta_free(buf);
    return t;
}

/* arange's values on the first device (like NULL) or where like is. */
static ti_tensor_t *s_arange(ti_ctx_t *ctx, ti_tensor_t *like, double start, double stop, double step, int dtype) {
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
        return tc_error(ctx, TACT_EINVAL, "arange(%g, %g, %g): step must be non-zero and all finite", start, stop, step);
    if (dtype < 0) {
        int fractional = start != floor(start) || stop != floor(stop) || step != floor(step);
        dtype = fractional ? TACT_FLOAT32 : TACT_INT32;
    }
    if (!ta_dtype_valid(dtype)) return tc_error(ctx, TACT_EDTYPE, "arange: dtype %d is not a tact_dtype", dtype);
    double count = ceil((stop - start) / step);
    if (count > (double)(1ll << 40)) return tc_error(ctx, TACT_ESHAPE, "arange(%g, %g, %g): %g elements is too many", start, stop, step, count);
    int64_t n = count > 0 ? (int64_t)count : 0;
    /* Integers computed where they are read, from IOTA (element i is i):
     * no upload, and a compare with them that picks one row of a reduce
     * becomes a load (lowering's gathers). */
    double last = start + (double)(n ? n - 1 : 0) * step;
    if ((dtype == TACT_INT32 || dtype == TACT_INT64) && start == floor(start) && step == floor(step) && fabs(start) < 2147483648.0 &&
        fabs(last) < 2147483648.0) {
        ta_shape_t s = {1, {n}};
        ti_tensor_t *t = tc_emit(tc_new(ctx, TACT_INT32, &s), TA_OP_IOTA, 0, NULL, 0, NULL);
        if (step != 1) t = ti_mul(t, ti_scalar_int(ctx, (int64_t)step));
        if (start != 0) t = ti_add(t, ti_scalar_int(ctx, (int64_t)start));
        return ti_cast(t, (tact_dtype)dtype);
    }
    size_t es = ta_dtype_size((tact_dtype)dtype);
    uint8_t *buf = ta_malloc(n ? (size_t)n * es : 1);
    if (!buf) return tc_error(ctx, TACT_ENOMEM, "arange: out of memory for %" PRId64 " elements", n);
    for (int64_t i = 0; i < n; i++) ta_value_store((tact_dtype)dtype, buf + i * es, ta_value_from_double((tact_dtype)dtype, start + (double)i * step));
    ti_tensor_t *t = like ? tc_from_data_like(like, (tact_dtype)dtype, 1, &n, buf) : ti_from_data(ctx, (tact_dtype)dtype, 1, &n, buf);
    ta_free(buf);
    return t;
}

ti_tensor_t *ti_arange(ti_ctx_t *ctx, double start, double stop, double step, int dtype) {
    return ctx ? s_arange(ctx, NULL, start, stop, step, dtype) : ti_null_arg();
}

ti_tensor_t *tc_arange_like(ti_tensor_t *like, double start, double stop, double step, int dtype) {
    return like->status ? like : s_arange(like->ctx, like, start, stop, step, dtype);
}

ti_tensor_t *ti_eye(ti_ctx_t *ctx, int64_t n, tact_dtype dtype) {
    if (!ctx) return ti_null_arg();
    if (n < 0 || n > (1 << 28)) return tc_error(ctx, TACT_ESHAPE, "eye: n is %" PRId64 " (0 to 2^28)", n);
    if (!ta_dtype_valid(dtype)) return tc_error(ctx, TACT_EDTYPE, "eye: dtype %d is not a tact_dtype", dtype);
    size_t es = ta_dtype_size(dtype);
    uint8_t *buf = ta_calloc(n ? (size_t)(n * n) : 1, es);
    if (!buf) return tc_error(ctx, TACT_ENOMEM, "eye: out of memory");
    for (int64_t i = 0; i < n; i++) ta_value_store(dtype, buf + (i * n + i) * es, ta_value_from_double(dtype, 1));
    int64_t shape[2] = {n, n};
    ti_tensor_t *t = ti_from_data(ctx, dtype, 2, shape, buf);
    ta_free(buf);
    return t;
}
