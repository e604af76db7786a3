/* ops.c - names, arities and classes of the primitive ops, from TA_OP_LIST. */
#include "ops.h"

static const struct {
    const char *name;
    int arity;
    ta_op_class_t cls;
} s_ops[TA_OP__COUNT] = {
#define S_OP(NAME, arity, cls) {#NAME, arity, TA_OPC_##cls},
    TA_OP_LIST(S_OP)
#undef S_OP
};

const char *ta_op_name(int op) { return op >= 0 && op < TA_OP__COUNT ? s_ops[op].name : "?"; }
int ta_op_arity(int op) { return op >= 0 && op < TA_OP__COUNT ? s_ops[op].arity : -1; }
ta_op_class_t ta_op_class(int op) { return op >= 0 && op < TA_OP__COUNT ? s_ops[op].cls : TA_OPC_META; }

int ta_op_pad_safe(int op) {
    return op != TA_OP_RECIP && op != TA_OP_LOG2 && op != TA_OP_EXP2 && op != TA_OP_IDIV;
}
