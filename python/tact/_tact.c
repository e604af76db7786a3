/* _tact.c - the CPython extension under the tact package: one context per
 * process, tensor handles as Python objects that release their tensor when
 * they go, and the C API's ops by table.  The Tensor class (tensor.py)
 * gives them the reference's names and arguments. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "tact.h"

/* ------------------------------------------------------------- the context */

static tact_ctx *s_ctx;
static PyObject *s_error; /* tact.TactError */

/* Raises TactError with tact's message (and its status name). */
static PyObject *s_raise(int code, const char *text) {
    PyObject *e = Py_BuildValue("(iss)", code, tact_status_name(code), text ? text : tact_strerror(code));
    if (e) PyErr_SetObject(s_error, e);
    Py_XDECREF(e);
    return NULL;
}

static PyObject *py_open(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"devices", "threads", "log", NULL};
    const char *devices = NULL, *log = NULL;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ziz", names, &devices, &threads, &log)) return NULL;
    if (s_ctx) return s_raise(TACT_EINVAL, "a context is open: close() it first");
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    o.cpu_threads = threads;
    o.log_path = log;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = tact_ctx_open(&s_ctx, &o);
    Py_END_ALLOW_THREADS if (rc != TACT_OK) {
        s_ctx = NULL;
        return s_raise(rc, tact_last_open_error());
    }
    Py_RETURN_NONE;
}

static PyObject *py_close(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    if (!s_ctx) Py_RETURN_NONE;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = tact_ctx_close(&s_ctx);
    Py_END_ALLOW_THREADS s_ctx = NULL;
    if (rc != TACT_OK) return s_raise(rc, "closing the context");
    Py_RETURN_NONE;
}

static PyObject *py_is_open(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(s_ctx != NULL);
}

/* The context, opened with its defaults (TACT_DEVICE) on first use. */
static tact_ctx *s_context(void) {
    if (s_ctx) return s_ctx;
    tact_options o;
    tact_options_default(&o);
    if (tact_ctx_open(&s_ctx, &o) != TACT_OK) {
        s_ctx = NULL;
        s_raise(TACT_EINVAL, tact_last_open_error());
    }
    return s_ctx;
}

/* ------------------------------------------------------------- handles */

typedef struct {
    PyObject_HEAD tact_tensor *t;
} s_handle_t;

/* How many handles own each tensor (by its C handle): an op may answer
 * one of its operands itself (a slice of everything, a cast to its own
 * dtype, tact_keep), and the tensor goes with the last handle. */
static PyObject *s_owners;

/* Counts one more owner of t (delta 1) or one fewer (-1); returns the
 * count after, or -1 with an exception. */
/* Adds delta to t's count of owners (its key goes at 0); returns the
 * count after, or -1 with an exception. */
static long s_owners_add(tact_tensor *t, long delta) {
    PyObject *key = PyLong_FromVoidPtr(t);
    if (!key) return -1;
    PyObject *v = PyDict_GetItemWithError(s_owners, key);
    long n = (v ? PyLong_AsLong(v) : 0) + delta;
    int rc = PyErr_Occurred() ? -1 : 0;
    if (!rc && n > 0) {
        PyObject *nv = PyLong_FromLong(n);
        rc = nv ? PyDict_SetItem(s_owners, key, nv) : -1;
        Py_XDECREF(nv);
    } else if (!rc && v) {
        rc = PyDict_DelItem(s_owners, key);
    }
    Py_DECREF(key);
    return rc < 0 ? -1 : n;
}

static void s_handle_dealloc(s_handle_t *h) {
    /* A handle of a closed context is stale: nothing to release.  The
     * tensor goes with its last owner (and when the count cannot be kept). */
    if (h->t && s_ctx) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb); /* a dealloc may run with an exception set */
        if (s_owners_add(h->t, -1) <= 0) tact_release(h->t);
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyTypeObject s_handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tact._tact.Handle",
    .tp_basicsize = sizeof(s_handle_t),
    .tp_dealloc = (destructor)s_handle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a tensor of the context (tact.Tensor holds one)",
};

/* A new handle owning t (made in a scope of its own and kept: t alone
 * outlives the call), or the error t carries raised (t released). */
static PyObject *s_wrap(tact_tensor *t) {
    int code = tact_status_of(t);
    if (code != TACT_OK) {
        PyObject *r = s_raise(code, tact_error_message(t));
        tact_release(t);
        return r;
    }
    s_handle_t *h = PyObject_New(s_handle_t, &s_handle_type);
    if (!h || s_owners_add(t, 1) < 0) {
        if (h) h->t = NULL, Py_DECREF(h);
        PyObject *key = PyLong_FromVoidPtr(t);
        if (!key || !PyDict_GetItem(s_owners, key)) tact_release(t); /* owned by nobody else */
        Py_XDECREF(key);
        return NULL;
    }
    h->t = t;
    return (PyObject *)h;
}

/* Runs expr in a scope of its own: its intermediate tensors go with the
 * scope, its result is kept. */
#define S_SCOPED(ctx, expr)                            \
    do {                                               \
        tact_scope_begin(ctx);                         \
        tact_tensor *r_ = tact_keep(expr);             \
        tact_scope_end(ctx);                           \
        return s_wrap(r_);                             \
    } while (0)

static tact_tensor *s_h(PyObject *o) { return ((s_handle_t *)o)->t; }

/* A tensor operand: a handle, or a Python number as a weak scalar (the
 * reference's: it takes the other operand's dtype).  NULL with an
 * exception for anything else. */
static tact_tensor *s_operand(PyObject *o) {
    if (PyObject_TypeCheck(o, &s_handle_type)) return s_h(o);
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    if (PyBool_Check(o)) return tact_scalar_bool(ctx, o == Py_True);
    if (PyLong_Check(o)) {
        int over = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &over);
        if (over || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return tact_scalar(ctx, PyLong_AsDouble(o));
        }
        return tact_scalar_int(ctx, v);
    }
    if (PyFloat_Check(o)) return tact_scalar(ctx, PyFloat_AsDouble(o));
    PyErr_Format(PyExc_TypeError, "not a tensor or a number: %R", o);
    return NULL;
}

/* A shape or a list of axes from a sequence of ints; returns its length
 * or -1 with an exception. */
static int s_ints(PyObject *seq, int64_t *out, int cap, const char *what) {
    PyObject *f = PySequence_Fast(seq, what);
    if (!f) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > cap) {
        Py_DECREF(f);
        PyErr_Format(PyExc_ValueError, "%s: %zd entries, at most %d", what, n, cap);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
    }
    Py_DECREF(f);
    return (int)n;
}

enum { S_MAX_DIMS = 16 };

/* ------------------------------------------------------------- creation */

/* from_buffer(buffer, dtype, shape): a copy of the buffer's bytes. */
static PyObject *py_from_buffer(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *shp;
    int dtype;
    if (!PyArg_ParseTuple(args, "OiO", &obj, &dtype, &shp)) return NULL;
    int64_t shape[S_MAX_DIMS];
    int nd = s_ints(shp, shape, S_MAX_DIMS, "shape");
    if (nd < 0) return NULL;
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    if (dtype < 0 || dtype >= TACT_DTYPE_COUNT) return s_raise(TACT_EDTYPE, "not a dtype");
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= shape[i] > 0 ? shape[i] : 0;
    size_t want = (size_t)numel * tact_element_size((tact_dtype)dtype);
    if ((size_t)b.len != want) {
        PyBuffer_Release(&b);
        PyErr_Format(PyExc_ValueError, "%zd bytes for %lld elements of %s (%zu bytes)", b.len, (long long)numel,
                     tact_dtype_name((tact_dtype)dtype), want);
        return NULL;
    }
    tact_tensor *t = tact_from_data(ctx, (tact_dtype)dtype, nd, shape, b.buf);
    PyBuffer_Release(&b);
    return s_wrap(tact_keep(t));
}

/* full(shape, value, dtype), rand(shape, dtype), randn(shape, dtype). */
static PyObject *py_fill(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *shp;
    double value;
    int dtype;
    if (!PyArg_ParseTuple(args, "sOdi", &kind, &shp, &value, &dtype)) return NULL;
    int64_t shape[S_MAX_DIMS];
    int nd = s_ints(shp, shape, S_MAX_DIMS, "shape");
    tact_ctx *ctx = nd < 0 ? NULL : s_context();
    if (!ctx) return NULL;
    if (dtype < 0 || dtype >= TACT_DTYPE_COUNT) return s_raise(TACT_EDTYPE, "not a dtype");
    if (!strcmp(kind, "full")) S_SCOPED(ctx, tact_full(ctx, (tact_dtype)dtype, nd, shape, value));
    if (!strcmp(kind, "rand")) S_SCOPED(ctx, tact_rand(ctx, (tact_dtype)dtype, nd, shape));
    if (!strcmp(kind, "randn")) S_SCOPED(ctx, tact_randn(ctx, (tact_dtype)dtype, nd, shape));
    PyErr_Format(PyExc_ValueError, "fill: %s", kind);
    return NULL;
}

static PyObject *py_arange(PyObject *self, PyObject *args) {
    (void)self;
    double start, stop, step;
    int dtype;
    if (!PyArg_ParseTuple(args, "dddi", &start, &stop, &step, &dtype)) return NULL;
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    S_SCOPED(ctx, tact_arange(ctx, start, stop, step, dtype));
}

static PyObject *py_eye(PyObject *self, PyObject *args) {
    (void)self;
    long long n;
    int dtype;
    if (!PyArg_ParseTuple(args, "Li", &n, &dtype)) return NULL;
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    if (dtype < 0 || dtype >= TACT_DTYPE_COUNT) return s_raise(TACT_EDTYPE, "not a dtype");
    S_SCOPED(ctx, tact_eye(ctx, n, (tact_dtype)dtype));
}

static PyObject *py_manual_seed(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "K", &seed)) return NULL;
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    tact_manual_seed(ctx, seed);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- queries */

/* Whether o is a handle of a live tensor; else an exception: TypeError,
 * or the tensor's own error (a stale one: its context closed). */
static int s_is_handle(PyObject *o) {
    if (!PyObject_TypeCheck(o, &s_handle_type)) {
        PyErr_Format(PyExc_TypeError, "not a tensor handle: %R", o);
        return 0;
    }
    tact_tensor *t = ((s_handle_t *)o)->t;
    int code = tact_status_of(t);
    if (code != TACT_OK) {
        s_raise(code, tact_error_message(t));
        return 0;
    }
    return 1;
}

static PyObject *py_info(PyObject *self, PyObject *h) {
    (void)self;
    if (!s_is_handle(h)) return NULL;
    tact_tensor *t = s_h(h);
    int nd = tact_ndim(t);
    int64_t shape[S_MAX_DIMS];
    if (nd < 0 || nd > S_MAX_DIMS) return s_raise(TACT_EINVAL, "a tensor of too many dims");
    tact_shape(t, shape);
    PyObject *tuple = PyTuple_New(nd);
    for (int i = 0; tuple && i < nd; i++) PyTuple_SET_ITEM(tuple, i, PyLong_FromLongLong(shape[i]));
    const char *dev = tact_device(t);
    return tuple ? Py_BuildValue("(Nis)", tuple, (int)tact_dtype_of(t), dev ? dev : "") : NULL;
}

/* read(h) -> bytearray: the tensor's elements in row-major order, realized
 * (a bytearray: numpy() takes it over as a writable array, no copy). */
static PyObject *py_read(PyObject *self, PyObject *h) {
    (void)self;
    if (!s_is_handle(h)) return NULL;
    tact_tensor *t = s_h(h);
    int nd = tact_ndim(t);
    int64_t shape[S_MAX_DIMS], numel = 1;
    tact_shape(t, shape);
    for (int i = 0; i < nd; i++) numel *= shape[i];
    size_t bytes = (size_t)numel * tact_element_size(tact_dtype_of(t));
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)bytes);
    if (!out) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = tact_read(t, PyByteArray_AS_STRING(out), bytes);
    Py_END_ALLOW_THREADS if (rc != TACT_OK) {
        Py_DECREF(out);
        return s_raise(rc, tact_ctx_error(s_ctx));
    }
    return out;
}

static PyObject *py_realize(PyObject *self, PyObject *h) {
    (void)self;
    if (!s_is_handle(h)) return NULL;
    tact_tensor *t = s_h(h);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = tact_realize(s_ctx, 1, &t);
    Py_END_ALLOW_THREADS if (rc != TACT_OK) return s_raise(rc, tact_ctx_error(s_ctx));
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- ops by table */

typedef tact_tensor *(*s_un_fn)(tact_tensor *);
typedef tact_tensor *(*s_bin_fn)(tact_tensor *, tact_tensor *);
typedef tact_tensor *(*s_red_fn)(tact_tensor *, int, const int *, int);

static const struct {
    const char *name;
    s_un_fn fn;
} s_unary[] = {
    {"neg", tact_neg},         {"exp", tact_exp},         {"exp2", tact_exp2},       {"log", tact_log},         {"log2", tact_log2},
    {"sqrt", tact_sqrt},       {"rsqrt", tact_rsqrt},     {"sin", tact_sin},         {"cos", tact_cos},         {"tan", tact_tan},
    {"relu", tact_relu},       {"sigmoid", tact_sigmoid}, {"tanh", tact_tanh},       {"reciprocal", tact_reciprocal},
    {"abs", tact_abs},         {"sign", tact_sign},       {"square", tact_square},   {"trunc", tact_trunc},     {"ceil", tact_ceil},
    {"floor", tact_floor},     {"round", tact_round},     {"logical_not", tact_logical_not},                    {"swish", tact_swish},
    {"silu", tact_silu},       {"relu6", tact_relu6},     {"hardswish", tact_hardswish},                        {"sinh", tact_sinh},
    {"cosh", tact_cosh},       {"atanh", tact_atanh},     {"asinh", tact_asinh},     {"acosh", tact_acosh},     {"gelu", tact_gelu},
    {"quick_gelu", tact_quick_gelu},                      {"mish", tact_mish},       {"softsign", tact_softsign},
    {"contiguous", tact_contiguous},                      {"detach", tact_detach},   {"sum_all", tact_sum_all}, {"mean_all", tact_mean_all},
    {"max_all", tact_max_all}, {"min_all", tact_min_all}, {"sinh", tact_sinh},
};

static const struct {
    const char *name;
    s_bin_fn fn;
} s_binary[] = {
    {"add", tact_add},       {"sub", tact_sub}, {"mul", tact_mul}, {"div", tact_div}, {"idiv", tact_idiv}, {"mod", tact_mod},
    {"maximum", tact_maximum}, {"minimum", tact_minimum},      {"pow", tact_pow}, {"matmul", tact_matmul}, {"dot", tact_dot},
    {"eq", tact_eq},         {"ne", tact_ne},   {"lt", tact_lt},   {"gt", tact_gt},   {"le", tact_le},     {"ge", tact_ge},
    {"xor", tact_xor},       {"bitwise_and", tact_bitwise_and},   {"bitwise_or", tact_bitwise_or},
    {"binary_crossentropy", tact_binary_crossentropy}, {"binary_crossentropy_logits", tact_binary_crossentropy_logits},
    {"cross_entropy", tact_cross_entropy},
};

static const struct {
    const char *name;
    s_red_fn fn;
} s_reduce[] = {
    {"sum", tact_sum}, {"max", tact_max}, {"min", tact_min}, {"mean", tact_mean}, {"any", tact_any}, {"all", tact_all},
    {"prod", tact_prod}, {"logsumexp", tact_logsumexp},
};

#define S_COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

/* The names each table serves, for tensor.py to check against. */
static PyObject *py_op_names(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    PyObject *u = PyList_New(0), *b = PyList_New(0), *r = PyList_New(0);
    for (int i = 0; u && i < S_COUNT(s_unary); i++) PyList_Append(u, PyUnicode_FromString(s_unary[i].name));
    for (int i = 0; b && i < S_COUNT(s_binary); i++) PyList_Append(b, PyUnicode_FromString(s_binary[i].name));
    for (int i = 0; r && i < S_COUNT(s_reduce); i++) PyList_Append(r, PyUnicode_FromString(s_reduce[i].name));
    return Py_BuildValue("(NNN)", u, b, r);
}

static PyObject *py_unary(PyObject *self, PyObject *args) {
    (void)self;
    int op;
    PyObject *x;
    if (!PyArg_ParseTuple(args, "iO!", &op, &s_handle_type, &x)) return NULL;
    if (op < 0 || op >= S_COUNT(s_unary)) return s_raise(TACT_EINVAL, "not a unary op");
    S_SCOPED(s_ctx, s_unary[op].fn(s_h(x)));
}

static PyObject *py_binary(PyObject *self, PyObject *args) {
    (void)self;
    int op;
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "iOO", &op, &a, &b)) return NULL;
    if (op < 0 || op >= S_COUNT(s_binary)) return s_raise(TACT_EINVAL, "not a binary op");
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    tact_scope_begin(ctx);
    tact_tensor *x = s_operand(a), *y = x ? s_operand(b) : NULL;
    if (!x || !y) {
        tact_scope_end(ctx);
        return NULL;
    }
    tact_tensor *r = tact_keep(s_binary[op].fn(x, y));
    tact_scope_end(ctx);
    return s_wrap(r);
}

static PyObject *py_where(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *c, *a, *b;
    if (!PyArg_ParseTuple(args, "O!OO", &s_handle_type, &c, &a, &b)) return NULL;
    tact_scope_begin(s_ctx);
    tact_tensor *x = s_operand(a), *y = x ? s_operand(b) : NULL;
    if (!x || !y) {
        tact_scope_end(s_ctx);
        return NULL;
    }
    tact_tensor *r = tact_keep(tact_where(s_h(c), x, y));
    tact_scope_end(s_ctx);
    return s_wrap(r);
}

/* reduce(op, x, axes or None, keepdim) */
static PyObject *py_reduce(PyObject *self, PyObject *args) {
    (void)self;
    int op, keepdim;
    PyObject *x, *ax;
    if (!PyArg_ParseTuple(args, "iO!Op", &op, &s_handle_type, &x, &ax, &keepdim)) return NULL;
    if (op < 0 || op >= S_COUNT(s_reduce)) return s_raise(TACT_EINVAL, "not a reduce");
    int64_t axes64[S_MAX_DIMS];
    int axes[S_MAX_DIMS], n = -1;
    if (ax != Py_None) {
        if ((n = s_ints(ax, axes64, S_MAX_DIMS, "axes")) < 0) return NULL;
        for (int i = 0; i < n; i++) axes[i] = (int)axes64[i];
    }
    S_SCOPED(s_ctx, s_reduce[op].fn(s_h(x), n, n < 0 ? NULL : axes, keepdim));
}

/* movement(kind, x, ints): reshape, permute, expand, squeeze (axes),
 * unsqueeze (dim), transpose (a, b), flatten (start, end), softmax and
 * log_softmax (axis), argmax and argmin (axis, keepdim; axis None: flat),
 * cast (dtype), cumsum (axis). */
static PyObject *py_shaped(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *x, *seq;
    if (!PyArg_ParseTuple(args, "sO!O", &kind, &s_handle_type, &x, &seq)) return NULL;
    int64_t v[S_MAX_DIMS];
    int n = s_ints(seq, v, S_MAX_DIMS, kind), iv[S_MAX_DIMS];
    if (n < 0) return NULL;
    for (int i = 0; i < n; i++) iv[i] = (int)v[i];
    tact_tensor *t = s_h(x);
    int a0 = n > 0 ? iv[0] : 0, a1 = n > 1 ? iv[1] : 0;
    if (!strcmp(kind, "reshape")) S_SCOPED(s_ctx, tact_reshape(t, n, v));
    if (!strcmp(kind, "expand")) S_SCOPED(s_ctx, tact_expand(t, n, v));
    if (!strcmp(kind, "permute")) {
        if (n != tact_ndim(t)) return s_raise(TACT_ESHAPE, "permute: the order names every dim once");
        S_SCOPED(s_ctx, tact_permute(t, iv));
    }
    if (!strcmp(kind, "squeeze")) S_SCOPED(s_ctx, tact_squeeze(t, n ? n : -1, n ? iv : NULL)); /* none given: every dim of 1 */
    if (n < 1) return s_raise(TACT_EINVAL, "missing an argument");
    if (!strcmp(kind, "unsqueeze")) S_SCOPED(s_ctx, tact_unsqueeze(t, a0));
    if (!strcmp(kind, "softmax")) S_SCOPED(s_ctx, tact_softmax(t, a0));
    if (!strcmp(kind, "log_softmax")) S_SCOPED(s_ctx, tact_log_softmax(t, a0));
    if (!strcmp(kind, "cast")) {
        if (a0 < 0 || a0 >= TACT_DTYPE_COUNT) return s_raise(TACT_EDTYPE, "not a dtype");
        S_SCOPED(s_ctx, tact_cast(t, (tact_dtype)a0));
    }
    if (!strcmp(kind, "cumsum")) S_SCOPED(s_ctx, tact_cumsum(t, a0));
    if (n < 2) return s_raise(TACT_EINVAL, "missing an argument");
    if (!strcmp(kind, "transpose")) S_SCOPED(s_ctx, tact_transpose(t, a0, a1));
    if (!strcmp(kind, "flatten")) S_SCOPED(s_ctx, tact_flatten(t, a0, a1));
    if (!strcmp(kind, "argmax")) S_SCOPED(s_ctx, tact_argmax(t, a0, a1));
    if (!strcmp(kind, "argmin")) S_SCOPED(s_ctx, tact_argmin(t, a0, a1));
    PyErr_Format(PyExc_ValueError, "shaped: %s", kind);
    return NULL;
}

/* The tact_index of each of a sequence of Python indices (ints, slices,
 * None, Ellipsis, handles of int tensors); returns their count or -1
 * with an exception. */
static int s_indices(PyObject *idx, tact_index *ix) {
    PyObject *f = PySequence_Fast(idx, "indices");
    if (!f) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > S_MAX_DIMS) {
        Py_DECREF(f);
        s_raise(TACT_EINVAL, "too many indices");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        if (o == Py_None) ix[i] = TACT_NEWAXIS;
        else if (o == Py_Ellipsis) ix[i] = TACT_ELLIPSIS;
        else if (PyObject_TypeCheck(o, &s_handle_type)) ix[i] = TACT_TENSOR(s_h(o));
        else if (PySlice_Check(o)) {
            PySliceObject *sl = (PySliceObject *)o;
            PyObject *parts[3] = {sl->start, sl->stop, sl->step};
            int64_t v[3] = {0, 0, 0};
            int has[3];
            for (int k = 0; k < 3; k++) {
                has[k] = parts[k] != Py_None;
                if (has[k] && (v[k] = PyLong_AsLongLong(parts[k])) == -1 && PyErr_Occurred()) {
                    Py_DECREF(f);
                    return -1;
                }
            }
            ix[i] = (tact_index){TACT_IDX_SLICE, v[0], v[1], v[2], has[0], has[1], has[2], NULL};
        } else if (PyLong_Check(o)) {
            long long v = PyLong_AsLongLong(o);
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(f);
                return -1;
            }
            ix[i] = TACT_AT(v);
        } else {
            Py_DECREF(f);
            PyErr_Format(PyExc_TypeError, "an index must be an int, a slice, None, Ellipsis or a tensor, not %R", o);
            return -1;
        }
    }
    Py_DECREF(f);
    return (int)n;
}

/* getitem(x, indices) */
static PyObject *py_getitem(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *idx;
    tact_index ix[S_MAX_DIMS];
    int n;
    if (!PyArg_ParseTuple(args, "O!O", &s_handle_type, &x, &idx) || (n = s_indices(idx, ix)) < 0) return NULL;
    S_SCOPED(s_ctx, tact_getitem(s_h(x), n, ix));
}

/* setitem(x, indices, value): x's handle names the new contents (tact_setitem); value a handle or a number. */
static PyObject *py_setitem(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *idx, *v;
    tact_index ix[S_MAX_DIMS];
    int n;
    if (!PyArg_ParseTuple(args, "OOO", &x, &idx, &v) || !s_is_handle(x) || (n = s_indices(idx, ix)) < 0) return NULL;
    tact_scope_begin(s_ctx);
    tact_tensor *val = s_operand(v), *r = val ? tact_setitem(s_h(x), n, ix, val) : NULL;
    int code = r ? tact_status_of(r) : TACT_OK;
    if (r && code != TACT_OK) s_raise(code, tact_error_message(r));
    tact_scope_end(s_ctx);
    if (!r || code != TACT_OK) return NULL;
    Py_RETURN_NONE;
}

/* The tensors of a sequence of handles, in a PyMem block (PyMem_Free it),
 * with their count in *n; NULL with an exception. */
static tact_tensor **s_handles(PyObject *seq, Py_ssize_t *n) {
    PyObject *f = PySequence_Fast(seq, "a sequence of tensors");
    if (!f) return NULL;
    *n = PySequence_Fast_GET_SIZE(f);
    tact_tensor **xs = PyMem_Malloc(sizeof *xs * (size_t)(*n ? *n : 1));
    if (!xs) PyErr_NoMemory();
    for (Py_ssize_t i = 0; xs && i < *n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        if (!s_is_handle(o)) {
            PyMem_Free(xs);
            xs = NULL;
        } else {
            xs[i] = s_h(o);
        }
    }
    Py_DECREF(f);
    return xs;
}

/* cat(handles, dim) or stack(handles, dim). */
static PyObject *py_join(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *seq;
    int dim;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "sOi", &kind, &seq, &dim)) return NULL;
    tact_tensor **xs = s_handles(seq, &n);
    if (!xs) return NULL;
    tact_scope_begin(s_ctx);
    tact_tensor *r = tact_keep(!strcmp(kind, "stack") ? tact_stack((int)n, xs, dim) : tact_cat((int)n, xs, dim));
    tact_scope_end(s_ctx);
    PyMem_Free(xs);
    return s_wrap(r);
}

static PyObject *py_to(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    const char *device;
    if (!PyArg_ParseTuple(args, "O!s", &s_handle_type, &x, &device)) return NULL;
    S_SCOPED(s_ctx, tact_to(s_h(x), device));
}

/* assign(target, value): the target's handle names the assign (tact_assign). */
static PyObject *py_assign(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *v;
    if (!PyArg_ParseTuple(args, "OO", &x, &v) || !s_is_handle(x) || !s_is_handle(v)) return NULL;
    tact_scope_begin(s_ctx);
    tact_tensor *r = tact_assign(s_h(x), s_h(v));
    int code = tact_status_of(r);
    if (code != TACT_OK) s_raise(code, tact_error_message(r));
    tact_scope_end(s_ctx);
    if (code != TACT_OK) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- autograd */

static PyObject *py_set_requires_grad(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    int flag;
    if (!PyArg_ParseTuple(args, "O!i", &s_handle_type, &x, &flag)) return NULL;
    tact_tensor *r = tact_set_requires_grad(s_h(x), flag);
    if (tact_status_of(r) != TACT_OK) return s_wrap(r); /* raises */
    Py_RETURN_NONE;
}

static PyObject *py_requires_grad(PyObject *self, PyObject *x) {
    (void)self;
    if (!s_is_handle(x)) return NULL;
    int r = tact_requires_grad(s_h(x));
    if (r < 0) Py_RETURN_NONE;
    return PyBool_FromLong(r);
}

static PyObject *py_backward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *g = Py_None;
    if (!PyArg_ParseTuple(args, "O!|O", &s_handle_type, &x, &g)) return NULL;
    if (g != Py_None && !s_is_handle(g)) return NULL;
    int rc;
    tact_tensor *lt = s_h(x), *gt = g == Py_None ? NULL : s_h(g);
    /* tact_backward does not wait for the graph's answer; Python's raises
     * where the reference's does, so the answer is read here (tact_wait). */
    Py_BEGIN_ALLOW_THREADS rc = tact_backward(lt, gt);
    if (rc == TACT_OK) rc = tact_wait(s_ctx);
    Py_END_ALLOW_THREADS if (rc != TACT_OK) return s_raise(rc, tact_ctx_error(s_ctx));
    Py_RETURN_NONE;
}

/* grad(x): its gradient as a new handle, or None. */
static PyObject *py_grad(PyObject *self, PyObject *x) {
    (void)self;
    if (!s_is_handle(x)) return NULL;
    tact_scope_begin(s_ctx);
    tact_tensor *g = tact_grad(s_h(x));
    if (tact_status_of(g) != TACT_OK) {
        tact_scope_end(s_ctx);
        Py_RETURN_NONE;
    }
    /* The gradient's handle belongs to its tensor: the Python object holds
     * a view of it of its own (released alone). */
    tact_tensor *r = tact_keep(tact_detach(g));
    tact_scope_end(s_ctx);
    return s_wrap(r);
}

static PyObject *py_grad_clear(PyObject *self, PyObject *x) {
    (void)self;
    if (!s_is_handle(x)) return NULL;
    tact_grad_clear(s_h(x));
    Py_RETURN_NONE;
}

static PyObject *py_no_grad(PyObject *self, PyObject *args) {
    (void)self;
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) return NULL;
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    return PyBool_FromLong(tact_set_no_grad(ctx, on));
}

/* ------------------------------------------------------------- layers */

/* The window of a convolution: stride, dilation, padding (per dim), groups. */
static int s_window(PyObject *stride, PyObject *dilation, PyObject *padding, int groups, tact_window *w) {
    tact_window_default(w);
    int64_t v[6];
    int n;
    if ((n = s_ints(stride, v, 3, "stride")) < 0) return -1;
    for (int i = 0; i < n; i++) w->stride[i] = v[i];
    if ((n = s_ints(dilation, v, 3, "dilation")) < 0) return -1;
    for (int i = 0; i < n; i++) w->dilation[i] = v[i];
    if ((n = s_ints(padding, v, 6, "padding")) < 0) return -1;
    w->npad = n;
    for (int i = 0; i < n; i++) w->padding[i] = v[i];
    w->groups = groups;
    return 0;
}

/* A handle or None for a layer's tensor that may be absent. */
static PyObject *s_wrap_opt(tact_tensor *t) {
    if (!t) Py_RETURN_NONE;
    return s_wrap(t);
}

/* layer_new(kind, sizes, eps, momentum, flags, stride, dilation, padding,
 * groups) -> (weight, bias, running_mean, running_var), each a handle or
 * None: the C API's constructor (its initialization, from the context's
 * random numbers). */
static PyObject *py_layer_new(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *sizes, *stride, *dilation, *padding;
    double eps, momentum;
    int a, b, groups;
    if (!PyArg_ParseTuple(args, "sOddiiOOOi", &kind, &sizes, &eps, &momentum, &a, &b, &stride, &dilation, &padding, &groups)) return NULL;
    int64_t z[8];
    int n = s_ints(sizes, z, 8, "sizes");
    tact_ctx *ctx = n < 0 ? NULL : s_context();
    if (!ctx) return NULL;
    tact_layer l;
    tact_window w;
    int rc = TACT_EINVAL;
    if (s_window(stride, dilation, padding, groups, &w) != 0) return NULL;
    tact_scope_begin(ctx);
    if (!strcmp(kind, "linear") && n == 2) rc = tact_layer_linear(&l, ctx, z[0], z[1], a);
    else if (!strcmp(kind, "conv2d") && n == 4) rc = tact_layer_conv2d(&l, ctx, z[0], z[1], z[2], z[3], &w, a);
    else if (!strcmp(kind, "batchnorm") && n == 1) rc = tact_layer_batchnorm(&l, ctx, z[0], eps, momentum, a, b);
    else if (!strcmp(kind, "layernorm") && n >= 1) rc = tact_layer_layernorm(&l, ctx, n, z, eps, a);
    else if (!strcmp(kind, "embedding") && n == 2) rc = tact_layer_embedding(&l, ctx, z[0], z[1]);
    else {
        tact_scope_end(ctx);
        PyErr_Format(PyExc_ValueError, "layer_new: %s of %d sizes", kind, n);
        return NULL;
    }
    tact_scope_end(ctx); /* the layer's tensors were kept: now the enclosing scope's */
    if (rc != TACT_OK) return s_raise(rc, tact_ctx_error(ctx));
    PyObject *t[4] = {s_wrap_opt(l.weight), s_wrap_opt(l.bias), s_wrap_opt(l.running_mean), s_wrap_opt(l.running_var)};
    if (!t[0] || !t[1] || !t[2] || !t[3]) {
        for (int i = 0; i < 4; i++) Py_XDECREF(t[i]);
        return NULL;
    }
    return Py_BuildValue("(NNNN)", t[0], t[1], t[2], t[3]);
}

static tact_tensor *s_opt_h(PyObject *o) { return o == Py_None ? NULL : s_h(o); }

/* layer_forward(kind, x, weight, bias, running_mean, running_var, eps,
 * momentum, p, training, naxes, stride, dilation, padding, groups): the
 * C API's tact_layer_forward of a layer made of these. */
static PyObject *py_layer_forward(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *x, *ts[4], *stride, *dilation, *padding;
    double eps, momentum, p;
    int training, naxes, groups;
    if (!PyArg_ParseTuple(args, "sO!OOOOdddiiOOOi", &kind, &s_handle_type, &x, &ts[0], &ts[1], &ts[2], &ts[3], &eps, &momentum, &p, &training, &naxes,
                          &stride, &dilation, &padding, &groups))
        return NULL;
    for (int i = 0; i < 4; i++)
        if (ts[i] != Py_None && !s_is_handle(ts[i])) return NULL;
    tact_layer l;
    memset(&l, 0, sizeof l);
    if (s_window(stride, dilation, padding, groups, &l.window) != 0) return NULL;
    static const struct {
        const char *name;
        tact_layer_kind kind;
    } kinds[] = {{"linear", TACT_LAYER_LINEAR},       {"conv2d", TACT_LAYER_CONV2D},       {"batchnorm", TACT_LAYER_BATCHNORM},
                 {"layernorm", TACT_LAYER_LAYERNORM}, {"embedding", TACT_LAYER_EMBEDDING}, {"dropout", TACT_LAYER_DROPOUT}};
    int k = -1;
    for (int i = 0; i < (int)(sizeof kinds / sizeof *kinds) && k < 0; i++)
        if (!strcmp(kind, kinds[i].name)) k = i;
    if (k < 0) {
        PyErr_Format(PyExc_ValueError, "layer_forward: %s", kind);
        return NULL;
    }
    l.kind = kinds[k].kind;
    l.weight = s_opt_h(ts[0]), l.bias = s_opt_h(ts[1]), l.running_mean = s_opt_h(ts[2]), l.running_var = s_opt_h(ts[3]);
    l.eps = eps, l.momentum = momentum, l.p = p;
    l.naxes = naxes;
    if (l.weight && naxes > 0 && naxes <= 8) {
        int64_t sh[8];
        int nd = tact_ndim(l.weight);
        tact_shape(l.weight, sh);
        for (int i = 0; i < naxes && i < nd; i++) l.norm_shape[i] = sh[nd - naxes + i];
    }
    tact_tensor *per = l.weight ? l.weight : l.running_mean; /* a norm's channels */
    if (per && tact_ndim(per) >= 1) {
        int64_t sh[8];
        tact_shape(per, sh);
        l.features = sh[0];
    }
    S_SCOPED(s_ctx, tact_layer_forward(&l, s_h(x), training));
}

/* window(kind, x, weight, bias, kernel, stride, dilation, padding, groups,
 * count_include_pad[, output_padding]): conv2d and conv_transpose2d
 * (weight, bias or None), max_pool2d, avg_pool2d. */
static PyObject *py_window(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *x, *w, *b, *kernel, *stride, *dilation, *padding, *outpad = NULL;
    int groups, include;
    if (!PyArg_ParseTuple(args, "sO!OOOOOOip|O", &kind, &s_handle_type, &x, &w, &b, &kernel, &stride, &dilation, &padding, &groups, &include, &outpad))
        return NULL;
    if ((w != Py_None && !s_is_handle(w)) || (b != Py_None && !s_is_handle(b))) return NULL;
    tact_window win;
    int64_t k[3];
    int nk = s_ints(kernel, k, 3, "kernel");
    if (nk < 0 || s_window(stride, dilation, padding, groups, &win) != 0) return NULL;
    for (int i = 0; i < nk; i++) win.kernel[i] = k[i];
    win.count_include_pad = include;
    int64_t op[3];
    int nop = outpad ? s_ints(outpad, op, 3, "output_padding") : 0;
    if (nop < 0) return NULL;
    for (int i = 0; i < nop; i++) win.output_padding[i] = op[i];
    if (!strcmp(kind, "conv2d")) S_SCOPED(s_ctx, tact_conv2d(s_h(x), s_opt_h(w), s_opt_h(b), &win));
    if (!strcmp(kind, "max_pool2d")) S_SCOPED(s_ctx, tact_max_pool2d(s_h(x), &win));
    if (!strcmp(kind, "avg_pool2d")) S_SCOPED(s_ctx, tact_avg_pool2d(s_h(x), &win));
    if (!strcmp(kind, "conv_transpose2d")) S_SCOPED(s_ctx, tact_conv_transpose2d(s_h(x), s_opt_h(w), s_opt_h(b), &win));
    PyErr_Format(PyExc_ValueError, "window: %s", kind);
    return NULL;
}

/* linear(x, weight, bias or None); sparse_ce(logits, labels, ignore_index, smoothing); dropout(x, p, training). */
static PyObject *py_linear(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *w, *b;
    if (!PyArg_ParseTuple(args, "O!O!O", &s_handle_type, &x, &s_handle_type, &w, &b) || (b != Py_None && !s_is_handle(b))) return NULL;
    S_SCOPED(s_ctx, tact_linear(s_h(x), s_h(w), s_opt_h(b)));
}

static PyObject *py_sparse_ce(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *y;
    long long ignore;
    double smoothing;
    if (!PyArg_ParseTuple(args, "O!O!Ld", &s_handle_type, &x, &s_handle_type, &y, &ignore, &smoothing)) return NULL;
    S_SCOPED(s_ctx, tact_sparse_categorical_crossentropy(s_h(x), s_h(y), ignore, smoothing));
}

static PyObject *py_dropout(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    double p;
    int training;
    if (!PyArg_ParseTuple(args, "O!dp", &s_handle_type, &x, &p, &training)) return NULL;
    S_SCOPED(s_ctx, tact_dropout(s_h(x), p, training));
}

/* with_floats(name, x, a, b): the ops of a tensor and one or two numbers. */
static PyObject *py_with_floats(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *x;
    double a, b = 0;
    if (!PyArg_ParseTuple(args, "sO!d|d", &name, &s_handle_type, &x, &a, &b)) return NULL;
    tact_tensor *t = s_h(x);
    if (!strcmp(name, "elu")) S_SCOPED(s_ctx, tact_elu(t, a));
    if (!strcmp(name, "celu")) S_SCOPED(s_ctx, tact_celu(t, a));
    if (!strcmp(name, "leakyrelu")) S_SCOPED(s_ctx, tact_leakyrelu(t, a));
    if (!strcmp(name, "softplus")) S_SCOPED(s_ctx, tact_softplus(t, a));
    if (!strcmp(name, "clip")) S_SCOPED(s_ctx, tact_clip(t, a, b));
    if (!strcmp(name, "hardtanh")) S_SCOPED(s_ctx, tact_hardtanh(t, a, b));
    PyErr_Format(PyExc_ValueError, "with_floats: %s", name);
    return NULL;
}

/* with_ints(name, x, ints...): one_hot(n), triu(k), tril(k), lshift(n), rshift(n), repeat_interleave(n, dim),
 * multinomial(n, replacement), flip(axes...), repeat(sizes...), unflatten(dim, sizes...), gather(dim) with a tensor. */
static PyObject *py_with_ints(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *x, *seq, *other = Py_None;
    if (!PyArg_ParseTuple(args, "sO!O|O", &name, &s_handle_type, &x, &seq, &other)) return NULL;
    int64_t v[S_MAX_DIMS];
    int n = s_ints(seq, v, S_MAX_DIMS, name), iv[S_MAX_DIMS];
    if (n < 0) return NULL;
    for (int i = 0; i < n; i++) iv[i] = (int)v[i];
    tact_tensor *t = s_h(x);
    if (!strcmp(name, "flip")) S_SCOPED(s_ctx, tact_flip(t, n, iv));
    if (!strcmp(name, "repeat")) S_SCOPED(s_ctx, tact_repeat(t, n, v));
    if (n < 1) return s_raise(TACT_EINVAL, "missing an argument");
    if (!strcmp(name, "one_hot")) S_SCOPED(s_ctx, tact_one_hot(t, v[0]));
    if (!strcmp(name, "triu")) S_SCOPED(s_ctx, tact_triu(t, v[0]));
    if (!strcmp(name, "tril")) S_SCOPED(s_ctx, tact_tril(t, v[0]));
    if (!strcmp(name, "lshift")) S_SCOPED(s_ctx, tact_lshift(t, v[0]));
    if (!strcmp(name, "rshift")) S_SCOPED(s_ctx, tact_rshift(t, v[0]));
    if (!strcmp(name, "unflatten")) S_SCOPED(s_ctx, tact_unflatten(t, iv[0], n - 1, v + 1));
    if (!strcmp(name, "gather")) {
        if (!s_is_handle(other)) return NULL;
        S_SCOPED(s_ctx, tact_gather(t, iv[0], s_h(other)));
    }
    if (n < 2) return s_raise(TACT_EINVAL, "missing an argument");
    if (!strcmp(name, "repeat_interleave")) S_SCOPED(s_ctx, tact_repeat_interleave(t, v[0], iv[1]));
    if (!strcmp(name, "multinomial")) S_SCOPED(s_ctx, tact_multinomial(t, v[0], iv[1]));
    PyErr_Format(PyExc_ValueError, "with_ints: %s", name);
    return NULL;
}

/* var/std(x, axes or None, keepdim, correction) */
static PyObject *py_moment(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *x, *ax;
    int keepdim;
    double correction;
    if (!PyArg_ParseTuple(args, "sO!Opd", &name, &s_handle_type, &x, &ax, &keepdim, &correction)) return NULL;
    int64_t a64[S_MAX_DIMS];
    int axes[S_MAX_DIMS], n = -1;
    if (ax != Py_None) {
        if ((n = s_ints(ax, a64, S_MAX_DIMS, "axes")) < 0) return NULL;
        for (int i = 0; i < n; i++) axes[i] = (int)a64[i];
    }
    if (!strcmp(name, "std")) S_SCOPED(s_ctx, tact_std(s_h(x), n, n < 0 ? NULL : axes, keepdim, correction));
    S_SCOPED(s_ctx, tact_var(s_h(x), n, n < 0 ? NULL : axes, keepdim, correction));
}

/* pad(x, pairs (before, after) per dim, value); pad2d(x, amounts, value); interpolate(x, size, align_corners). */
static PyObject *py_pad(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *x, *seq;
    double value;
    if (!PyArg_ParseTuple(args, "sO!Od", &name, &s_handle_type, &x, &seq, &value)) return NULL;
    int64_t v[2 * S_MAX_DIMS];
    int n = s_ints(seq, v, 2 * S_MAX_DIMS, name);
    if (n < 0) return NULL;
    tact_tensor *t = s_h(x);
    if (!strcmp(name, "pad")) {
        if (n != 2 * tact_ndim(t)) return s_raise(TACT_EINVAL, "pad: a (before, after) pair for every dim");
        S_SCOPED(s_ctx, tact_pad(t, (const int64_t(*)[2])v, value));
    }
    if (!strcmp(name, "pad2d")) S_SCOPED(s_ctx, tact_pad2d(t, n, v, value));
    if (!strcmp(name, "interpolate")) S_SCOPED(s_ctx, tact_interpolate(t, n, v, value != 0));
    PyErr_Format(PyExc_ValueError, "pad: %s", name);
    return NULL;
}

/* ternary(name, a, b, c): lerp(x, end, weight), masked_fill(x, mask, value); numbers as weak scalars. */
static PyObject *py_ternary(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *a, *b, *c;
    if (!PyArg_ParseTuple(args, "sO!OO", &name, &s_handle_type, &a, &b, &c)) return NULL;
    tact_scope_begin(s_ctx);
    tact_tensor *y = s_operand(b), *z = y ? s_operand(c) : NULL, *r = NULL;
    if (y && z) {
        if (!strcmp(name, "lerp")) r = tact_lerp(s_h(a), y, z);
        else if (!strcmp(name, "masked_fill")) r = tact_masked_fill(s_h(a), y, z);
        else PyErr_Format(PyExc_ValueError, "ternary: %s", name);
    }
    r = r ? tact_keep(r) : NULL;
    tact_scope_end(s_ctx);
    return r ? s_wrap(r) : NULL;
}

/* einsum(formula, handles) */
static PyObject *py_einsum(PyObject *self, PyObject *args) {
    (void)self;
    const char *formula;
    PyObject *seq;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "sO", &formula, &seq)) return NULL;
    tact_tensor **xs = s_handles(seq, &n);
    if (!xs) return NULL;
    tact_scope_begin(s_ctx);
    tact_tensor *r = tact_keep(tact_einsum(formula, (int)n, xs));
    tact_scope_end(s_ctx);
    PyMem_Free(xs);
    return s_wrap(r);
}

/* sdpa(q, k, v, mask or None, dropout_p, is_causal, training) */
static PyObject *py_sdpa(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *q, *k, *v, *m;
    double p;
    int causal, training;
    if (!PyArg_ParseTuple(args, "O!O!O!Odpp", &s_handle_type, &q, &s_handle_type, &k, &s_handle_type, &v, &m, &p, &causal, &training)) return NULL;
    if (m != Py_None && !s_is_handle(m)) return NULL;
    S_SCOPED(s_ctx, tact_scaled_dot_product_attention(s_h(q), s_h(k), s_h(v), s_opt_h(m), p, causal, training));
}

/* split(x, sizes, dim) -> a tuple of handles */
static PyObject *py_split(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *seq;
    int dim;
    if (!PyArg_ParseTuple(args, "O!Oi", &s_handle_type, &x, &seq, &dim)) return NULL;
    int64_t v[1024];
    int n = s_ints(seq, v, 1024, "sizes");
    if (n < 0) return NULL;
    tact_tensor *out[1024];
    tact_scope_begin(s_ctx);
    int got = tact_split(s_h(x), n, v, dim, out);
    for (int i = 0; i < got; i++) tact_keep(out[i]);
    if (got < 0) tact_keep(out[0]);
    tact_scope_end(s_ctx);
    if (got < 0) return s_wrap(out[0]); /* raises */
    PyObject *tuple = PyTuple_New(got);
    for (int i = 0; i < got; i++) {
        PyObject *h = tuple ? s_wrap(out[i]) : NULL;
        if (!h) {
            for (int j = i + 1; j < got; j++) tact_release(out[j]);
            Py_XDECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, h);
    }
    return tuple;
}

/* make(name, shape, dtype, a, b): empty, uniform(low, high), normal(mean, std), randint(low, high), kaiming_uniform(a),
 * kaiming_normal(a), glorot_uniform, scaled_uniform. */
static PyObject *py_make(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *shp;
    int dtype;
    double a = 0, b = 0;
    if (!PyArg_ParseTuple(args, "sOi|dd", &name, &shp, &dtype, &a, &b)) return NULL;
    int64_t shape[S_MAX_DIMS];
    int nd = s_ints(shp, shape, S_MAX_DIMS, "shape");
    tact_ctx *ctx = nd < 0 ? NULL : s_context();
    if (!ctx) return NULL;
    if (dtype < 0 || dtype >= TACT_DTYPE_COUNT) return s_raise(TACT_EDTYPE, "not a dtype");
    tact_dtype d = (tact_dtype)dtype;
    if (!strcmp(name, "empty")) S_SCOPED(ctx, tact_empty(ctx, d, nd, shape));
    if (!strcmp(name, "uniform")) S_SCOPED(ctx, tact_uniform(ctx, d, nd, shape, a, b));
    if (!strcmp(name, "normal")) S_SCOPED(ctx, tact_normal(ctx, d, nd, shape, a, b));
    if (!strcmp(name, "randint")) S_SCOPED(ctx, tact_randint(ctx, d, nd, shape, (int64_t)a, (int64_t)b));
    if (!strcmp(name, "kaiming_uniform")) S_SCOPED(ctx, tact_kaiming_uniform(ctx, d, nd, shape, a));
    if (!strcmp(name, "kaiming_normal")) S_SCOPED(ctx, tact_kaiming_normal(ctx, d, nd, shape, a));
    if (!strcmp(name, "glorot_uniform")) S_SCOPED(ctx, tact_glorot_uniform(ctx, d, nd, shape));
    if (!strcmp(name, "scaled_uniform")) S_SCOPED(ctx, tact_scaled_uniform(ctx, d, nd, shape));
    PyErr_Format(PyExc_ValueError, "make: %s", name);
    return NULL;
}

/* ------------------------------------------------------------- optimizers */

typedef struct {
    PyObject_HEAD tact_optim *o;
} s_optim_t;

static void s_optim_dealloc(s_optim_t *o) {
    if (o->o && s_ctx) tact_optim_free(&o->o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyTypeObject s_optim_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tact._tact.Optim",
    .tp_basicsize = sizeof(s_optim_t),
    .tp_dealloc = (destructor)s_optim_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "an optimizer of the context (tact.nn.optim holds one)",
};

/* optim_new(kind, params, lr, momentum, weight_decay, nesterov, b1, b2, eps), kind 0 SGD, 1 Adam, 2 AdamW. */
static PyObject *py_optim_new(PyObject *self, PyObject *args) {
    (void)self;
    int kind, nesterov;
    PyObject *params;
    double lr, momentum, wd, b1, b2, eps;
    if (!PyArg_ParseTuple(args, "iOdddpddd", &kind, &params, &lr, &momentum, &wd, &nesterov, &b1, &b2, &eps)) return NULL;
    tact_ctx *ctx = s_context();
    Py_ssize_t n;
    tact_tensor **ps = ctx ? s_handles(params, &n) : NULL;
    if (!ps) return NULL;
    tact_optim_options o;
    static const tact_optim_kind kinds[] = {TACT_OPTIM_SGD, TACT_OPTIM_ADAM, TACT_OPTIM_ADAMW};
    if (kind < 0 || kind > 2) {
        PyMem_Free(ps);
        return s_raise(TACT_EINVAL, "not an optimizer");
    }
    tact_optim_options_default(&o, kinds[kind]);
    o.lr = lr, o.momentum = momentum, o.weight_decay = wd, o.nesterov = nesterov, o.b1 = b1, o.b2 = b2, o.eps = eps;
    s_optim_t *ob = PyObject_New(s_optim_t, &s_optim_type);
    if (!ob) {
        PyMem_Free(ps);
        return NULL;
    }
    ob->o = NULL;
    int rc = tact_optim_new(&ob->o, ctx, &o, (int)n, ps);
    PyMem_Free(ps);
    if (rc != TACT_OK) {
        Py_DECREF(ob);
        return s_raise(rc, tact_ctx_error(ctx));
    }
    return (PyObject *)ob;
}

/* optim(op, o[, value]): "step", "zero_grad", "set_lr", "lr". */
static PyObject *py_optim(PyObject *self, PyObject *args) {
    (void)self;
    const char *op;
    PyObject *o;
    double v = 0;
    if (!PyArg_ParseTuple(args, "sO!|d", &op, &s_optim_type, &o, &v)) return NULL;
    tact_optim *opt = ((s_optim_t *)o)->o;
    if (!opt || !s_ctx) return s_raise(TACT_EINVAL, "an optimizer of a closed context");
    int rc = TACT_OK;
    if (!strcmp(op, "step")) {
        Py_BEGIN_ALLOW_THREADS rc = tact_optim_step(opt);
        Py_END_ALLOW_THREADS
    } else if (!strcmp(op, "zero_grad")) {
        tact_optim_zero_grad(opt);
    } else if (!strcmp(op, "set_lr")) {
        rc = tact_optim_set_lr(opt, v);
    } else if (!strcmp(op, "lr")) {
        return PyFloat_FromDouble(tact_optim_lr(opt));
    } else {
        PyErr_Format(PyExc_ValueError, "optim: %s", op);
        return NULL;
    }
    if (rc != TACT_OK) return s_raise(rc, tact_ctx_error(s_ctx));
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- safetensors */

/* safe_save(path, names, handles) */
static PyObject *py_safe_save(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    PyObject *names, *hs;
    if (!PyArg_ParseTuple(args, "sOO", &path, &names, &hs)) return NULL;
    Py_ssize_t n;
    tact_tensor **ts = s_handles(hs, &n);
    PyObject *fn = ts ? PySequence_Fast(names, "names") : NULL;
    if (!fn) {
        PyMem_Free(ts);
        return NULL;
    }
    int bad = PySequence_Fast_GET_SIZE(fn) != n;
    if (bad) PyErr_SetString(PyExc_ValueError, "safe_save: as many names as tensors");
    const char **ns = bad ? NULL : PyMem_Malloc(sizeof *ns * (size_t)(n ? n : 1));
    if (!bad && !ns) bad = 1, PyErr_NoMemory();
    for (Py_ssize_t i = 0; !bad && i < n; i++) bad = !(ns[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fn, i)));
    int rc = TACT_OK;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS rc = tact_save_safetensors(s_ctx, path, (int)n, ns, ts);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(ns), PyMem_Free(ts);
    Py_DECREF(fn);
    if (bad) return NULL;
    if (rc != TACT_OK) return s_raise(rc, tact_ctx_error(s_ctx));
    Py_RETURN_NONE;
}

/* safe_load(path, name) -> handle */
static PyObject *py_safe_load(PyObject *self, PyObject *args) {
    (void)self;
    const char *path, *name;
    if (!PyArg_ParseTuple(args, "ss", &path, &name)) return NULL;
    tact_ctx *ctx = s_context();
    if (!ctx) return NULL;
    S_SCOPED(ctx, tact_load_safetensors(ctx, path, name));
}

/* ------------------------------------------------------------- module */

static PyMethodDef s_methods[] = {
    {"open", (PyCFunction)(void (*)(void))py_open, METH_VARARGS | METH_KEYWORDS, "open(devices=None, threads=0, log=None): the context"},
    {"close", py_close, METH_NOARGS, "close(): closes the context (its tensors become stale)"},
    {"is_open", py_is_open, METH_NOARGS, "whether the context is open"},
    {"from_buffer", py_from_buffer, METH_VARARGS, "from_buffer(buffer, dtype, shape)"},
    {"fill", py_fill, METH_VARARGS, "fill(kind, shape, value, dtype): full, rand or randn"},
    {"arange", py_arange, METH_VARARGS, "arange(start, stop, step, dtype)"},
    {"eye", py_eye, METH_VARARGS, "eye(n, dtype)"},
    {"manual_seed", py_manual_seed, METH_VARARGS, "manual_seed(seed)"},
    {"info", py_info, METH_O, "info(h) -> (shape, dtype, device)"},
    {"read", py_read, METH_O, "read(h) -> bytes"},
    {"realize", py_realize, METH_O, "realize(h)"},
    {"op_names", py_op_names, METH_NOARGS, "the unary, binary and reduce ops, in table order"},
    {"unary", py_unary, METH_VARARGS, "unary(op, h)"},
    {"binary", py_binary, METH_VARARGS, "binary(op, a, b): a and b handles or numbers"},
    {"where", py_where, METH_VARARGS, "where(cond, a, b)"},
    {"reduce", py_reduce, METH_VARARGS, "reduce(op, h, axes or None, keepdim)"},
    {"shaped", py_shaped, METH_VARARGS, "shaped(kind, h, ints)"},
    {"getitem", py_getitem, METH_VARARGS, "getitem(h, indices)"},
    {"setitem", py_setitem, METH_VARARGS, "setitem(h, indices, value): h names the new contents"},
    {"join", py_join, METH_VARARGS, "join(kind, handles, dim): cat or stack"},
    {"to", py_to, METH_VARARGS, "to(h, device)"},
    {"assign", py_assign, METH_VARARGS, "assign(target, value): the target's handle names the new contents"},
    {"set_requires_grad", py_set_requires_grad, METH_VARARGS, "set_requires_grad(h, flag)"},
    {"requires_grad", py_requires_grad, METH_O, "requires_grad(h) -> True, False or None"},
    {"backward", py_backward, METH_VARARGS, "backward(h, grad=None)"},
    {"grad", py_grad, METH_O, "grad(h) -> handle or None"},
    {"grad_clear", py_grad_clear, METH_O, "grad_clear(h)"},
    {"no_grad", py_no_grad, METH_VARARGS, "no_grad(on) -> the previous setting"},
    {"layer_new", py_layer_new, METH_VARARGS, "layer_new(kind, sizes, eps, momentum, a, b, stride, dilation, padding, groups)"},
    {"layer_forward", py_layer_forward, METH_VARARGS, "layer_forward(kind, x, weight, bias, running_mean, running_var, eps, momentum, p, training, naxes, stride, dilation, padding, groups)"},
    {"window", py_window, METH_VARARGS, "window(kind, x, weight, bias, kernel, stride, dilation, padding, groups, count_include_pad)"},
    {"linear", py_linear, METH_VARARGS, "linear(x, weight, bias)"},
    {"with_floats", py_with_floats, METH_VARARGS, "with_floats(name, x, a[, b])"},
    {"with_ints", py_with_ints, METH_VARARGS, "with_ints(name, x, ints[, tensor])"},
    {"moment", py_moment, METH_VARARGS, "moment(var or std, x, axes, keepdim, correction)"},
    {"pad", py_pad, METH_VARARGS, "pad(pad, pad2d or interpolate, x, ints, value)"},
    {"ternary", py_ternary, METH_VARARGS, "ternary(lerp or masked_fill, a, b, c)"},
    {"einsum", py_einsum, METH_VARARGS, "einsum(formula, handles)"},
    {"sdpa", py_sdpa, METH_VARARGS, "sdpa(q, k, v, mask, dropout_p, is_causal, training)"},
    {"split", py_split, METH_VARARGS, "split(x, sizes, dim) -> handles"},
    {"make", py_make, METH_VARARGS, "make(name, shape, dtype[, a, b])"},
    {"sparse_ce", py_sparse_ce, METH_VARARGS, "sparse_ce(logits, labels, ignore_index, label_smoothing)"},
    {"dropout", py_dropout, METH_VARARGS, "dropout(x, p, training)"},
    {"optim_new", py_optim_new, METH_VARARGS, "optim_new(kind, params, lr, momentum, weight_decay, nesterov, b1, b2, eps)"},
    {"optim", py_optim, METH_VARARGS, "optim(op, o[, value])"},
    {"safe_save", py_safe_save, METH_VARARGS, "safe_save(path, names, handles)"},
    {"safe_load", py_safe_load, METH_VARARGS, "safe_load(path, name) -> handle"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef s_module = {PyModuleDef_HEAD_INIT, "_tact", "tact's C API for the tact package", -1, s_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tact(void) {
    if (PyType_Ready(&s_handle_type) < 0 || PyType_Ready(&s_optim_type) < 0 || !(s_owners = PyDict_New())) return NULL;
    PyObject *m = PyModule_Create(&s_module);
    if (!m) return NULL;
    s_error = PyErr_NewExceptionWithDoc("tact.TactError", "an error of tact: args are (code, status name, message)", PyExc_RuntimeError, NULL);
    if (!s_error || PyModule_AddObject(m, "TactError", s_error) < 0) return NULL;
    Py_INCREF(s_error);
    Py_INCREF(&s_handle_type);
    PyModule_AddObject(m, "Handle", (PyObject *)&s_handle_type);
#define S_DT(NAME, name, size) PyModule_AddIntConstant(m, "DT_" #NAME, TACT_##NAME);
    TACT_DTYPE_MAP(S_DT)
#undef S_DT
    return m;
}
