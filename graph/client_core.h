/* client_core.h - the client's own internals shared by its files: the tensor object and the helpers that record
 * ops.  client.c keeps the context and the pipeline; the primitive ops live in client_create.c,
 * client_elementwise.c, client_reduce.c and client_movement.c, the composed ones beside them, all behind
 * client_impl.h. */
#ifndef TACT_CLIENT_CORE_H
#define TACT_CLIENT_CORE_H

#include <stdint.h>

#include "client_impl.h"
#include "dtype.h"
#include "ops.h"
#include "pipeline.h"
#include "shape.h"

typedef struct ti_multi ti_multi_t;

struct ti_tensor {
    uintptr_t handle; /* what the user holds (handle.h) */
    ti_ctx_t *ctx;
    uint64_t id; /* 0 for error tensors and unmaterialized scalars */
    tact_dtype dtype;
    ta_shape_t shape;
    int status;
    char *message;
    int kept;
    int view; /* made by a movement op: not a buffer of its own, cannot be assigned to */
    int swapped; /* its last two dims swapped from a tensor that is not a view (W^T): a matmul copies it first */
    /* Weakly typed scalars keep their value until they meet a tensor. */
    int weak;
    ta_scalar_kind_t kind;
    double fvalue;
    int64_t ivalue;
    /* Autograd (client_grad.c): the reference's requires_grad (-1 unset,
     * 0, 1; an op's result takes 1 if a source has 1, else -1 if one is
     * unset, else 0), whether the program asked for this tensor's gradient
     * (tact_set_requires_grad(t, 1)), and that gradient (owned by t, in no
     * scope; its handle stays the same as backwards accumulate into it). */
    int requires_grad;
    int wants_grad;
    ti_tensor_t *grad;
    int target; /* a target of the backward not yet answered (client_grad.c) */
    /* A realize that named it was waited for and succeeded: a read may ask
     * for its bytes at once (the graph refuses if they are not there, and
     * the read realizes first after all). */
    int realized;
    /* The device index it lives on (the context's device list), or -1 for
     * a tensor made of constants only, which joins whatever device it
     * meets and is computed on the first device when realized alone. */
    int device;
    ti_multi_t *multi; /* sharded: its parts, one per device (client_multi.c); NULL otherwise */
    /* Where its scope holds it: the scope's level and its place there. */
    int level;
    size_t slot;
};

/* Shared by client.c and the files of the primitive ops (client_create.c,
 * client_elementwise.c, client_reduce.c, client_movement.c). */

/* An error tensor of ctx with code and the formatted message (the static
 * out-of-memory one when even that cannot be made); the message is also
 * the context's error (tact_ctx_error). */
__attribute__((format(printf, 3, 4))) ti_tensor_t *tc_error(ti_ctx_t *ctx, int code, const char *fmt, ...);
/* For a call that fails because t is an error tensor: makes t's message
 * its context's error again and returns t's status. */
int tc_report(const ti_tensor_t *t);
/* A new tensor object of ctx (status set when out of memory). */
ti_tensor_t *tc_new(ti_ctx_t *ctx, tact_dtype dtype, const ta_shape_t *shape);
/* Records op with its sources and int arguments as out's node; returns out
 * or an error tensor. */
ti_tensor_t *tc_emit(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs, const int64_t *args);
/* A CONST of shape () holding v; a weak scalar as dtype d; a weak scalar
 * on its own in its kind's default dtype (any other tensor as it is). */
ti_tensor_t *tc_const(ti_ctx_t *ctx, tact_dtype d, ta_value_t v);
ti_tensor_t *tc_materialize(ti_tensor_t *w, tact_dtype d);
/* The device t lives on: its own, or the first for one of constants only
 * (device -1, computed there when realized alone). */
static inline int tc_home(const ti_tensor_t *t) { return t->device > 0 ? t->device : 0; }
ti_tensor_t *tc_const_shaped(ti_ctx_t *ctx, tact_dtype d, ta_value_t v, const ta_shape_t *shape);
ti_tensor_t *tc_materialize_as(ti_tensor_t *w, tact_dtype d, const ta_shape_t *shape);
ti_tensor_t *tc_solid(ti_tensor_t *t);
/* Checks dtype and shape of a creation call into *s; NULL or an error tensor. */
ti_tensor_t *tc_check_new(ti_ctx_t *ctx, const char *op, int dtype, int ndim, const int64_t *shape, ta_shape_t *s);
/* The first error among xs (NULL, an error tensor, two contexts), or NULL. */
ti_tensor_t *tc_any_error(int n, ti_tensor_t *const *xs);
ti_tensor_t *tc_unary(ti_tensor_t *x, ta_op_t op, tact_dtype out_dtype);
/* x broadcast to shape (1s prepended, then expanded). */
ti_tensor_t *tc_broadcast_to(ti_tensor_t *x, const ta_shape_t *shape);
/* The reference's _broadcasted: weak scalars take the other side's dtype,
 * then both promote and broadcast; 0, or -1 with *pa the error. */
int tc_match(ti_tensor_t **pa, ti_tensor_t **pb, const char *op);
ti_tensor_t *tc_movement(ti_tensor_t *x, ta_op_t op, const ta_shape_t *out, int nargs, const int64_t *args);

/* For client_grad.c: a fresh client id; queues id's release; the request
 * with its reply (after every realize in flight), ctx's error set on
 * failure; calls fn on every live tensor of ctx (every scope); a tensor
 * in no scope (a gradient, owned by its tensor) and its freeing. */
uint64_t tc_new_id(ti_ctx_t *ctx);
void tc_release_id(ti_ctx_t *ctx, uint64_t id);
int tc_request(ti_ctx_t *ctx, ta_msg_t *req, ta_msg_t *reply);
/* A request to the graph whose reply is read later (the batch goes
 * first; req's corr is set), and the wait for that reply; ctx's error set
 * on failure. */
int tc_send_request(ti_ctx_t *ctx, ta_msg_t *req);
int tc_wait_reply(ti_ctx_t *ctx, uint64_t corr, ta_msg_t *reply, int extend);
/* The backward sent and not yet answered (client_grad.c keeps it here;
 * ti_settle_backward reads its answer), and a target of it going before
 * that. */
void **tc_backward_slot(ti_ctx_t *ctx);
void tc_backward_forget(ti_tensor_t *t);
void tc_each_tensor(ti_ctx_t *ctx, void (*fn)(ti_tensor_t *t, void *ud), void *ud);
ti_tensor_t *tc_new_unscoped(ti_ctx_t *ctx, uint64_t id, tact_dtype dtype, const ta_shape_t *shape);
void tc_free_grad(ti_tensor_t *t);
/* Records out as op on srcs with the gradient flag given, not computed
 * from the sources (a detach records 0). */
ti_tensor_t *tc_emit_flagged(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs, const int64_t *args,
                             int grad);

/* Devices (client.c): the context's wiring, the index of a device name
 * (-1 with err saying why when the context has none such), x on device
 * at (a COPY, or x). */
const ta_pipeline_t *tc_wiring(const ti_ctx_t *ctx);
int tc_device_index(const ti_ctx_t *ctx, const char *name, ta_error_t *err);
ti_tensor_t *tc_to_index(ti_tensor_t *x, int at);
/* from_data's tensor on device at (an index of the context's devices). */
ti_tensor_t *tc_from_data_at(ti_ctx_t *ctx, int at, tact_dtype dtype, int ndim, const int64_t *shape, const void *data);
/* data (dtype, shape) on like's device, or copied whole to each of its
 * devices when like is sharded: written to each, never copied from the
 * first. */
ti_tensor_t *tc_from_data_like(ti_tensor_t *like, tact_dtype dtype, int ndim, const int64_t *shape, const void *data);
/* arange's values where like is (the constants an op makes for itself). */
ti_tensor_t *tc_arange_like(ti_tensor_t *like, double start, double stop, double step, int dtype);
/* Sharded tensors (client_multi.c): an op with a sharded source, applied
 * part by part; x gathered onto device at; the multi part's name, parts,
 * keeping and freeing. */
ti_tensor_t *tc_multi_emit(ti_tensor_t *out, ta_op_t op, int nsrc, const ti_tensor_t *const *srcs, int nargs, const int64_t *args, int grad);
ti_tensor_t *tc_gather(ti_tensor_t *x, int at);
/* v (made on the first device: random numbers, data, an optimizer's
 * state) where like is: on its device, or sharded as it is; v itself when
 * it is there already (constants alone stay deviceless next to a tensor
 * of constants). */
ti_tensor_t *tc_place_like(ti_tensor_t *v, ti_tensor_t *like);
const char *tc_multi_name(const ti_tensor_t *t);
ti_tensor_t *tc_multi_part(const ti_tensor_t *t, int i);
int tc_multi_real(const ti_tensor_t *t, int i);   /* part i holds data (not the zeros a shrink to another part's bounds left) */
ti_tensor_t *tc_multi_first(const ti_tensor_t *t); /* the first real part */
void tc_multi_keep(ti_tensor_t *t);
/* Gradients of a sharded tensor: requires_grad set on its parts (they are
 * the targets); its gradient as a sharded tensor (a replicated one's:
 * the parts' gradients summed on every device); the parts' cleared. */
void tc_multi_set_requires_grad(ti_tensor_t *t, int requires);
ti_tensor_t *tc_multi_grad(ti_tensor_t *t);
void tc_multi_grad_clear(ti_tensor_t *t);
int tc_multi_split(const ti_tensor_t *t); /* split along an axis (not replicated) */
int tc_multi_alike(const ti_tensor_t *a, const ti_tensor_t *b); /* both sharded, over the same devices, split the same way */
/* What part i of like holds of x: x's part i, or the slice of x (a
 * replicated part, or a constant) at the bounds of like's part i. */
ti_tensor_t *tc_multi_slice(ti_tensor_t *x, const ti_tensor_t *like, int i);
void tc_multi_free(ti_tensor_t *t);

/* For the composed functions. */
/* An error tensor of x's context with code and the formatted message. */
__attribute__((format(printf, 3, 4))) ti_tensor_t *tc_fail(ti_tensor_t *x, int code, const char *fmt, ...);
/* A weak scalar of x's context, an int where v is whole (as the reference's
 * Python constants: 0 or 6 keep an int tensor's dtype, 0.5 makes it
 * float); x itself when it is an error. */
ti_tensor_t *tc_k(ti_tensor_t *x, double v);
/* Returns a NULL or error argument (through ti_neg, which returns it). */
#define TC_CHECK(x)                                                                                                                                  \
    do {                                                                                                                                             \
        if (!(x) || ti_status_of(x)) return ti_neg(x);                                                                                               \
    } while (0)

#endif
