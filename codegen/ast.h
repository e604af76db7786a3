/* ast.h - a kernel's AST: the fused ops one kernel computes, as the scheduler sends it to the compiler. */
#ifndef TACT_AST_H
#define TACT_AST_H

#include <msgpack.h>
#include <stdint.h>

#include "dtype.h"
#include "msg.h"
#include "ops.h"
#include "view.h"

#define TA_AST_MAX_NODES 256
#define TA_AST_MAX_BUFS 32
#define TA_AST_MAX_VIEWS 32

/*
 * Nodes are in topological order (a node's sources come before it) and the
 * last node is the kernel's one STORE.  Shapes:
 *  - full shape: the kernel's iteration space.  For a reduce kernel it is
 *    the reduce's input shape; reduce_mask has bit k set for every reduced
 *    dim k.  For an elementwise kernel reduce_mask is 0.
 *  - output shape: the full shape with reduced dims set to 1.
 * Nodes feeding the reduce (and the reduce's source) work on the full
 * shape; the reduce and the nodes after it work on the output shape.  LOAD
 * and CONST nodes carry a view (an index into views) over the shape of
 * where they are used; STORE's view is over the output shape.
 */
typedef struct ta_ast_node {
    ta_op_t op;
    tact_dtype dtype; /* of the result */
    int nsrc;
    int16_t src[3];
    int16_t buf;      /* LOAD/STORE: kernel buffer index (0 is the output) */
    int16_t view;     /* LOAD/STORE/CONST: index into views; CONST: -1 when unmasked */
    ta_value_t value; /* CONST */
    int8_t arg;       /* CONST: 1 when the value is a kernel argument (value 0):
                       * the j-th such node reads argument j */
} ta_ast_node_t;

typedef struct ta_ast {
    int nnodes;
    ta_ast_node_t nodes[TA_AST_MAX_NODES];
    int nviews;
    ta_vstack_t views[TA_AST_MAX_VIEWS];
    int nbufs;
    int nargs; /* argument CONSTs (counted by ta_ast_add and ta_ast_unpack) */
    tact_dtype buf_dtype[TA_AST_MAX_BUFS];
    int64_t buf_size[TA_AST_MAX_BUFS]; /* elements */
    int ndim;
    int64_t shape[TA_MAX_DIMS]; /* the full shape */
    uint32_t reduce_mask;
    int nfused;
    uint64_t fused[TA_AST_MAX_NODES]; /* graph node ids this kernel computes, for dumps */
} ta_ast_t;

/* Resets a to an empty kernel over the full shape. */
void ta_ast_init(ta_ast_t *a, int ndim, const int64_t *shape, uint32_t reduce_mask);

/* Appends a node and returns its index, or -1 when the kernel is full
 * (an argument CONST counts in nargs).
 * ta_ast_view adds a view and returns its index, or -1 when full. */
int ta_ast_add(ta_ast_t *a, ta_ast_node_t node);
int ta_ast_view(ta_ast_t *a, const ta_vstack_t *view);

/* Checks that a is well formed (indices in range, arities, dtypes of
 * sources consistent with their ops, one STORE at the end, views of the
 * right shape, arguments only on CONSTs, with value 0).  Returns TACT_OK or TACT_EINVAL with the reason in err. */
int ta_ast_check(const ta_ast_t *a, ta_error_t *err);

/* Whether a CONST of dtype d with value v is structural, kept in the AST
 * (0, 1, -1, non-finite values, bools), or becomes a kernel argument, so a
 * scalar that changes between steps does not change the kernel. */
int ta_ast_const_is_structural(tact_dtype d, ta_value_t v);
/* A kernel argument's value as the 64-bit word KERNEL.args carries: a
 * float's value as float64 bits, an integer's int64 or uint64 bits. */
uint64_t ta_ast_arg_word(tact_dtype d, ta_value_t v);

/* The kernel's name, as STYLE.md asks: "E_<output dims>" for elementwise,
 * "r_<output dims>_<reduced dims>" for reduce kernels (sizes joined by _). */
void ta_ast_name(const ta_ast_t *a, char *buf, size_t len);
/* Merges adjacent dims of the iteration space that every view reads as
 * one run (as the reference merges a kernel's dims before it lowers):
 * two output dims, or two reduced ones, where each view's last view takes
 * the merged shape without a view of its own (stride[d] equal to
 * stride[d+1] x shape[d+1], no mask cutting them).  Fewer, longer dims: a
 * vector where a dim of 14 had none (14 x 14 is 196 = 4 x 49), fewer loops
 * and divisions, the same positions.  Kernels with IOTA or gathers keep
 * their dims (their patterns read dims one by one), and a size-1 dim is
 * not merged into its neighbour (its stride is 0).  Returns how many
 * merges it made (none when out of memory).  The renderer merges a copy (the kernel keeps its name). */
int ta_ast_merge_dims(ta_ast_t *a);
/* The kernel's iterations: the product of its full shape (saturating). */
uint64_t ta_ast_work(const ta_ast_t *a);

/* A view stack travels as a list of VIEW records (msg.h).  ta_vstack_recs
 * fills recs (TA_MAX_VIEWS entries) from st and returns the list, which
 * borrows recs; ta_vstack_from_recs reads a list back into st and returns
 * 0, or -1 when it is not a well-formed stack (then st is unspecified). */
struct ta_mpr;
ta_recs_t ta_vstack_recs(const ta_vstack_t *st, ta_view_rec_t *recs);
int ta_vstack_from_recs(ta_vstack_t *st, const ta_recs_t *views);

/* Appends a's encoding (an AST record) to pk.  Returns 0, or -1 on
 * allocation failure.  The fused ids are not part of it: they name graph
 * nodes, and travel beside it (KERNEL.fused), so the same kernel of two
 * graphs has the same bytes. */
int ta_ast_pack(const ta_ast_t *a, msgpack_packer *pk);
/* Decodes one AST from r and checks it (ta_ast_check).  Returns TACT_OK or
 * TACT_EPROTO/TACT_EINVAL with the reason (and byte offset) in err. */
int ta_ast_unpack(ta_ast_t *a, struct ta_mpr *r, ta_error_t *err);

#endif
