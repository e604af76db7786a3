/* ops.h - the primitive ops (DESIGN.md §4), declared once with their arity and class. */
#ifndef TACT_OPS_H
#define TACT_OPS_H

/* X(NAME, arity, class): class is one of UNARY, BINARY, TERNARY, REDUCE,
 * MOVEMENT, META, BUFFER (LOAD/STORE exist only inside kernel ASTs).
 * IOTA is arange's positions, computed where they are read: a 1-D int32
 * tensor whose element i is i (a constant, like CONST, but for its value;
 * the lowering turns a reduce that picks one position of it into a load,
 * a gather). */
#define TA_OP_LIST(X)              \
    X(EXP2, 1, UNARY)              \
    X(LOG2, 1, UNARY)              \
    X(SIN, 1, UNARY)               \
    X(SQRT, 1, UNARY)              \
    X(RECIP, 1, UNARY)             \
    X(NEG, 1, UNARY)               \
    X(CAST, 1, UNARY)              \
    X(BITCAST, 1, UNARY)           \
    X(ADD, 2, BINARY)              \
    X(MUL, 2, BINARY)              \
    X(IDIV, 2, BINARY)             \
    X(MOD, 2, BINARY)              \
    X(MAX, 2, BINARY)              \
    X(CMPLT, 2, BINARY)            \
    X(CMPNE, 2, BINARY)            \
    X(XOR, 2, BINARY)              \
    X(AND, 2, BINARY)              \
    X(OR, 2, BINARY)               \
    X(SHL, 2, BINARY)              \
    X(SHR, 2, BINARY)              \
    X(WHERE, 3, TERNARY)           \
    X(MULACC, 3, TERNARY)          \
    X(SUM, 1, REDUCE)              \
    X(RMAX, 1, REDUCE)             \
    X(RESHAPE, 1, MOVEMENT)        \
    X(PERMUTE, 1, MOVEMENT)        \
    X(EXPAND, 1, MOVEMENT)         \
    X(PAD, 1, MOVEMENT)            \
    X(SHRINK, 1, MOVEMENT)         \
    X(STRIDE, 1, MOVEMENT)         \
    X(EMPTY, 0, META)              \
    X(CONST, 0, META)              \
    X(COPY, 1, META)               \
    X(CONTIGUOUS, 1, META)         \
    X(ASSIGN, 2, META)             \
    X(CUSTOM, 0, META)             \
    X(LOAD, 0, BUFFER)             \
    X(STORE, 1, BUFFER)            \
    X(IOTA, 0, META)

typedef enum ta_op {
#define TA_OP_ENUM_(NAME, arity, cls) TA_OP_##NAME,
    TA_OP_LIST(TA_OP_ENUM_)
#undef TA_OP_ENUM_
    TA_OP__COUNT
} ta_op_t;

typedef enum ta_op_class {
    TA_OPC_UNARY,
    TA_OPC_BINARY,
    TA_OPC_TERNARY,
    TA_OPC_REDUCE,
    TA_OPC_MOVEMENT,
    TA_OPC_META,
    TA_OPC_BUFFER
} ta_op_class_t;

/* Name ("ADD"), number of sources and class of an op; "?"/-1 when out of range. */
const char *ta_op_name(int op);
int ta_op_arity(int op);
ta_op_class_t ta_op_class(int op);

/* True for ops whose result at 0 inputs is 0 (padding can fuse through
 * them); RECIP, LOG2, EXP2 and IDIV are unsafe (DESIGN.md trap 3). */
int ta_op_pad_safe(int op);

#endif
