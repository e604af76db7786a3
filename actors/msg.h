/* msg.h - the message schema (declared once), the in-memory message and its msgpack codec. */
#ifndef TACT_MSG_H
#define TACT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "tact.h"

/* Version of the envelope layout; a peer speaking another version is refused. */
#define TA_PROTOCOL_VERSION 15

/* An error with its detail text, filled by functions that can say more than a code. */
typedef struct ta_error {
    int code;
    char text[256];
} ta_error_t;

/* Sets e->code and formats e->text (e may be NULL; an argument may be
 * e->text itself, to wrap a cause in context); returns code. */
int ta_error_set(ta_error_t *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies n bytes of text read from a file or a peer into out (cap bytes,
 * always terminated) as a terminal may show it: printable ASCII and UTF-8
 * characters past U+009F as they are, anything else (control characters,
 * C1 controls, bytes that are not UTF-8) as \xNN, so a hostile name
 * cannot drive the terminal that prints an error.  Returns out. */
char *ta_printable(const void *s, size_t n, char *out, size_t cap);

/* A byte range that a message borrows from its frame (decoded) or its
 * builder (to encode).  Strings are not NUL-terminated. */
typedef struct ta_bytes {
    const uint8_t *ptr;
    size_t len;
} ta_bytes_t;

/* Borrows a C string as bytes (without the NUL). */
ta_bytes_t ta_bytes_str(const char *s);

/*
 * An array of unsigned integers (ids, buffer ids).  To send one, point vals
 * at n values; a decoded one is the validated msgpack array in raw (every
 * element checked to be an unsigned integer) with its count in n, read with
 * ta_u64s_next or copied with ta_u64s_copy.  Forwarding a decoded array
 * sends raw as is.
 */
typedef struct ta_u64s {
    const uint64_t *vals;
    uint32_t n;
    ta_bytes_t raw;
} ta_u64s_t;

/* Borrows n values as an array field. */
ta_u64s_t ta_u64s(const uint64_t *vals, size_t n);

/* Iterates over a: ta_u64s_begin, then ta_u64s_next returns 1 with the
 * next value in *v, or 0 at the end. */
typedef struct ta_u64s_it {
    const ta_u64s_t *a;
    uint32_t i;
    const uint8_t *p, *end;
} ta_u64s_it_t;
void ta_u64s_begin(ta_u64s_it_t *it, const ta_u64s_t *a);
int ta_u64s_next(ta_u64s_it_t *it, uint64_t *v);

/* Copies a's values into a fresh array (ta_malloc'd, at least one element
 * so it is never NULL on success).  Returns TACT_OK or TACT_ENOMEM. */
int ta_u64s_copy(const ta_u64s_t *a, uint64_t **out);

/* --------------------------------------------------------------- records */

/*
 * Records: the structures inside payloads (an op, a subgraph node, a
 * kernel, a plan step, a view), declared once like the messages below.
 * Their codec, validation, field-by-field comparison and dump are derived
 * from these tables (actors/rec.c), so no stage packs or reads a payload by
 * hand.  Record field kinds: U64, I64, MP (one msgpack value, a kernel AST,
 * travelling in a bin: a decode skips it without parsing it, and the stage
 * that reads it checks it with the AST record, codegen/ast.c), STR (printable ASCII of at most
 * TA_REC_MAX_STR bytes, a ta_bytes_t view: names and identities, shown
 * on terminals), U64S (an array of uints of any length, ta_u64s_t), U64A and I64A
 * (at most ARG values, held in the record as field[ARG] with their count in
 * n_field), RECS (a list of records of type ARG, ta_recs_t).  A record
 * travels as a msgpack array of its fields in order.
 */
#define TA_REC_MAX_DIMS 16
#define TA_REC_MAX_STR 256

#define TA_REC_LIST(X) \
    X(VIEW, view)      /* one view of a view stack (graph/view.h) */         \
    X(VSTACK, vstack)  /* a view stack: its views, the buffer's first */     \
    X(NODE, node)      /* an op (OP_BATCH) or a subgraph node (SCHEDULE) */   \
    X(ANODE, anode)    /* a node of a kernel AST (codegen/ast.h) */           \
    X(AST, ast)        /* a kernel AST */                                    \
    X(KERNEL, kernel)  /* a scheduled kernel (KERNELS) */                    \
    X(STEP, step)      /* a plan step (PLAN) */                              \
    X(JOB, job)        /* a kernel to build (COMPILE) */                     \
    X(TARGET, target)  /* what a device's programs are built for */          \
    X(DEVICE, device)  /* what a device is: its describe (docs/messages.md) */

#define TA_REC_FIELDS_VIEW(F, R)                                                                                 \
    F(R, I64A, shape, TA_REC_MAX_DIMS) F(R, I64A, strides, TA_REC_MAX_DIMS) F(R, I64, offset) F(R, U64, has_mask) \
    F(R, I64A, mask, 2 * TA_REC_MAX_DIMS) F(R, U64, contiguous)
#define TA_REC_FIELDS_VSTACK(F, R) F(R, RECS, views, VIEW)
/* NODE flags in an op batch (OP_BATCH, GRADS): the result requires a
 * gradient, so a backward goes through the op (docs/messages.md). */
#define TA_NODE_GRAD 1u
#define TA_REC_FIELDS_NODE(F, R)                                                                                  \
    F(R, U64, id) F(R, U64, op) F(R, U64, dtype) F(R, I64A, shape, TA_REC_MAX_DIMS) F(R, U64A, srcs, 3)             \
    F(R, I64A, args, 2 * TA_REC_MAX_DIMS) F(R, U64, base) F(R, RECS, st, VIEW) F(R, U64, flags) F(R, U64, bufref)    \
    F(R, U64, device)
#define TA_REC_FIELDS_ANODE(F, R) \
    F(R, U64, op) F(R, U64, dtype) F(R, U64A, srcs, 3) F(R, I64, buf) F(R, I64, view) F(R, U64, value) F(R, U64, arg)
#define TA_REC_FIELDS_AST(F, R)                                                                                   \
    F(R, I64A, shape, TA_REC_MAX_DIMS) F(R, U64, reduce_mask) F(R, U64A, buf_dtypes, 32) F(R, I64A, buf_sizes, 32) \
    F(R, RECS, views, VSTACK) F(R, RECS, nodes, ANODE)
#define TA_REC_FIELDS_KERNEL(F, R) \
    F(R, MP, ast) F(R, U64A, bufs, 32) F(R, U64A, writes, 32) F(R, U64S, args) F(R, U64S, fused) F(R, U64, device) F(R, U64, copy)
#define TA_REC_FIELDS_STEP(F, R)                                                                                   \
    F(R, U64, index) F(R, U64, program) F(R, U64A, bufs, 32) F(R, I64, numel) F(R, U64A, bytes, 32) F(R, U64A, writes, 32) \
    F(R, U64, reuse) F(R, U64S, frees) F(R, U64, work) F(R, U64S, args) F(R, U64, copy) F(R, U64, peer) F(R, U64, ast0) F(R, U64, ast1) F(R, MP, ast)
#define TA_REC_FIELDS_JOB(F, R) F(R, U64, index) F(R, U64, corr) F(R, MP, ast)
#define TA_REC_FIELDS_TARGET(F, R)                                                                                    \
    F(R, STR, language) F(R, U64, vector_bytes) F(R, U64, fma) F(R, U64, local_memory) F(R, U64, max_group) F(R, U64, fp16) \
    F(R, U64, bf16) F(R, U64, fp64) F(R, STR, compiler) F(R, STR, flags)
#define TA_REC_FIELDS_DEVICE(F, R)                                                                                       \
    F(R, STR, uri) F(R, STR, kind) F(R, STR, model) F(R, STR, driver) F(R, U64, compute_units) F(R, U64, memory) \
    F(R, U64, max_buffer) F(R, RECS, target, TARGET)

typedef enum ta_rec_type {
#define TA_REC_ENUM_(NAME, name) TA_REC_##NAME,
    TA_REC_LIST(TA_REC_ENUM_)
#undef TA_REC_ENUM_
    TA_REC__COUNT
} ta_rec_type_t;

/*
 * A list of records of one type.  To send one, point vals at n records
 * (ta_recs) or at their encoding (ta_recs_raw, made with ta_rec_pack); a
 * decoded one is its validated msgpack array in raw, read with
 * ta_recs_begin/ta_recs_next.  Forwarding a decoded list sends raw as is.
 */
typedef struct ta_recs {
    int type;
    const void *vals;
    uint32_t n;
    ta_bytes_t raw;
} ta_recs_t;

ta_recs_t ta_recs(ta_rec_type_t type, const void *vals, size_t n);
ta_recs_t ta_recs_raw(ta_rec_type_t type, const void *bytes, size_t len, size_t n);

#define TA_RF_DECL_U64(field) uint64_t field;
#define TA_RF_DECL_I64(field) int64_t field;
#define TA_RF_DECL_MP(field) ta_bytes_t field;
#define TA_RF_DECL_STR(field) ta_bytes_t field;
#define TA_RF_DECL_U64S(field) ta_u64s_t field;
#define TA_RF_DECL_U64A(field, ARG) \
    uint64_t field[ARG];            \
    uint32_t n_##field;
#define TA_RF_DECL_I64A(field, ARG) \
    int64_t field[ARG];             \
    uint32_t n_##field;
#define TA_RF_DECL_RECS(field, ARG) ta_recs_t field;
#define TA_RF_DECL_(R, KIND, ...) TA_RF_DECL_##KIND(__VA_ARGS__)
#define TA_REC_STRUCT_(NAME, name)                  \
    typedef struct ta_##name##_rec {                \
        TA_REC_FIELDS_##NAME(TA_RF_DECL_, name)     \
    } ta_##name##_rec_t;
TA_REC_LIST(TA_REC_STRUCT_)
#undef TA_REC_STRUCT_

const char *ta_rec_type_name(int type);

/* The schema itself, for tools and tests that walk any record generically. */
typedef enum ta_rec_kind { TA_RK_U64, TA_RK_I64, TA_RK_MP, TA_RK_U64S, TA_RK_U64A, TA_RK_I64A, TA_RK_RECS, TA_RK_STR } ta_rec_kind_t;
typedef struct ta_rec_field {
    const char *name;
    int kind;         /* ta_rec_kind_t */
    size_t off;       /* of the field in the record struct */
    size_t count_off; /* U64A/I64A: of n_field */
    uint32_t cap;     /* U64A/I64A: the most values */
    int sub;          /* RECS: the record type */
} ta_rec_field_t;
const ta_rec_field_t *ta_rec_fields(ta_rec_type_t type, size_t *n);
size_t ta_rec_size(ta_rec_type_t type);

/* Appends record rec of type to pk (a msgpack array of its fields).
 * Returns 0, or -1 on allocation failure or an array count over its bound. */
int ta_rec_pack(ta_rec_type_t type, const void *rec, msgpack_packer *pk);

/* The header of a list of n records, packed before them, and a uint
 * array field's encoding (for payloads built in pieces). */
int ta_recs_pack_header(msgpack_packer *pk, size_t n);
int ta_u64s_pack(const ta_u64s_t *a, msgpack_packer *pk);

/*
 * Reads one record of type from buf at *off into rec, checking every field
 * against the schema (kinds, bounds; nested lists checked whole, kept as
 * raw views of buf).  Returns TACT_OK and advances *off, or TACT_EPROTO
 * with the byte offset and the field in err.
 */
int ta_rec_unpack(ta_rec_type_t type, void *rec, const uint8_t *buf, size_t len, size_t *off, ta_error_t *err);

/* Iterates over a list: ta_recs_next returns 1 with the next record in rec,
 * or 0 at the end (or at a record that does not decode, which a list that
 * came through the codec never has). */
typedef struct ta_recs_it {
    const ta_recs_t *a;
    uint32_t i;
    size_t off;
} ta_recs_it_t;
void ta_recs_begin(ta_recs_it_t *it, const ta_recs_t *a);
int ta_recs_next(ta_recs_it_t *it, void *rec);

/* Checks that the n records at the front of an array header in buf (at
 * *off) are well formed; sets *n and advances *off.  Returns TACT_OK or
 * TACT_EPROTO with the offset and field in err. */
int ta_recs_check(ta_rec_type_t type, const uint8_t *buf, size_t len, size_t *off, uint32_t *n, ta_error_t *err);

/* Compares two records (or lists) field by field; returns true if equal,
 * otherwise false with the first difference named in where ("shape",
 * "st[1].strides"). */
bool ta_rec_equal(ta_rec_type_t type, const void *a, const void *b, char *where, size_t len);
bool ta_recs_equal(const ta_recs_t *a, const ta_recs_t *b, char *where, size_t len);

/* Formats a record on one line ("{id=3 op=9 shape=[2 3] ...}") into buf
 * (cut to len); returns buf. */
char *ta_rec_format(ta_rec_type_t type, const void *rec, char *buf, size_t len);
/* A dump's names for numbers (tools: an op's "MUL", a dtype's "float32"):
 * the name of value in field of a record of type (a U64 field or an
 * element of a U64A one), or NULL to print the number.  The runtime knows
 * no ops; the tool that dumps does. */
typedef const char *(*ta_rec_namer_fn)(ta_rec_type_t type, const char *field, uint64_t value);
/* ta_rec_format (json 0) or ta_rec_json (json 1) with names where namer
 * (may be NULL) gives them, as strings in JSON. */
char *ta_rec_format_named(ta_rec_type_t type, const void *rec, char *buf, size_t len, ta_rec_namer_fn namer, int json);
/* The same as one JSON object ({"id":3,"shape":[2,3],...}): every value,
 * strings escaped, an MP field as its length in bytes, nested records as
 * arrays of objects.  Cut to len (check the result ends in '}'). */
char *ta_rec_json(ta_rec_type_t type, const void *rec, char *buf, size_t len);

/*
 * The message types and their payload fields.  Everything else (the enum, the
 * payload structs, the codec, the names used by dumps and replay diffs) is
 * derived from these two tables, so a new message is one line in each.
 * Field kinds: U64, I64, F64, STR (UTF-8 bytes), BIN (bytes), U64S (an
 * array of unsigned integers, ta_u64s_t), NODES, KERNELS, STEPS, JOBS and DEVICES (lists
 * of records, ta_recs_t, checked record by record).
 */
#define TA_MSG_LIST(X)                                                                  \
    X(READY, ready)           /* actor -> owner: started (status: 0) or failed */         \
    X(STOP, stop)             /* owner -> actor: finish and exit */                       \
    X(STOP_ACK, stop_ack)     /* actor -> owner: stopped; the thread exits next */        \
    X(ERROR, error)           /* reply: the request with this corr failed */              \
    X(EOS, eos)               /* end of an ordered input stream */                        \
    X(ECHO, echo)             /* request: reply ECHO_REPLY with the same data and bulk */ \
    X(ECHO_REPLY, echo_reply) /* reply to ECHO */                                         \
    X(NUMS, nums)             /* work item: a key and float64 values in the bulk frame */ \
    X(TOTAL, total)           /* result: a sum over processed work items */               \
    X(DATA, data)             /* one-way payload, no reply (benchmarks, floods, reads) */ \
    X(CONFIG, config)         /* client -> stage: the wiring and settings; reply DONE */ \
    X(OP_BATCH, op_batch)     /* client -> graph: ops to add to the lazy graph */        \
    X(REALIZE, realize)       /* client -> graph: compute these tensors; reply DONE */   \
    X(DONE, done)             /* reply: the request with this corr has finished */       \
    X(READ, read)             /* client -> graph: a tensor's bytes; reply DATA */        \
    X(WRITE, write)           /* host bytes (bulk) for a buffer */                       \
    X(SCHEDULE, schedule)     /* graph -> scheduler: a subgraph to realize */            \
    X(KERNELS, kernels)       /* scheduler -> planner: kernels in dependency order */    \
    X(COMPILE, compile)       /* planner -> compiler: build kernels, in one go */        \
    X(PROGRAM, program)       /* compiler -> executor: a built kernel (reply to COMPILE) */ \
    X(SCHEDULED, scheduled)   /* scheduler -> graph: the nodes that will get buffers */  \
    X(PLAN, plan)             /* planner -> executor: kernels with buffers assigned */   \
    X(RUN, run)               /* graph -> executor: run this plan here in my stream */   \
    X(COPY_OUT, copy_out)     /* graph -> executor: send a buffer's bytes to a port */   \
    X(FREE, free)             /* graph -> executor: buffers nobody needs any more */    \
    X(PROGRESS, progress)     /* heartbeat of long work for the request with this corr (never logged) */ \
    X(BACKWARD, backward)     /* client -> graph -> autograd: gradients of a loss; reply GRADS */ \
    X(GRADS, grads)           /* reply to BACKWARD: gradient ops (autograd -> graph), the ids that got one (graph -> client) */ \
    X(HELLO, hello)           /* client -> worker: host these devices as these executor ids (actors/link.h) */ \
    X(WELCOME, welcome)       /* worker -> client: reply to HELLO, the DEVICE records (status 0) or why not */

#define TA_FIELDS_READY(F, M) F(M, I64, status) F(M, STR, text)
#define TA_FIELDS_STOP(F, M)
#define TA_FIELDS_STOP_ACK(F, M) F(M, U64, processed)
#define TA_FIELDS_ERROR(F, M) F(M, I64, code) F(M, STR, what) F(M, STR, text)
#define TA_FIELDS_EOS(F, M)
#define TA_FIELDS_ECHO(F, M) F(M, BIN, data)
#define TA_FIELDS_ECHO_REPLY(F, M) F(M, BIN, data)
#define TA_FIELDS_NUMS(F, M) F(M, U64, key) F(M, U64, producer) F(M, STR, label)
#define TA_FIELDS_TOTAL(F, M) F(M, U64, count) F(M, F64, sum) F(M, BIN, digest)
#define TA_FIELDS_DATA(F, M) F(M, BIN, data)
#define TA_FIELDS_CONFIG(F, M)                                                                     \
    F(M, U64, client) F(M, U64, graph) F(M, U64, scheduler) F(M, U64, planner) F(M, U64S, executors) \
    F(M, U64S, compilers) F(M, I64, schedule_cache) F(M, STR, cc) F(M, U64, autograd) F(M, DEVICES, devices) F(M, I64, strict)
#define TA_FIELDS_OP_BATCH(F, M) F(M, U64S, released) F(M, NODES, ops)
#define TA_FIELDS_REALIZE(F, M) F(M, U64, realize) F(M, U64S, ids) F(M, U64, settled) F(M, U64S, failed)
#define TA_FIELDS_DONE(F, M) F(M, U64, kernels) F(M, U64, planned_peak) F(M, U64, unplanned) F(M, U64, device_bytes) F(M, U64S, returned)
#define TA_FIELDS_READ(F, M) F(M, U64, id)
#define TA_FIELDS_WRITE(F, M) F(M, U64, buf)
#define TA_FIELDS_SCHEDULE(F, M) F(M, U64, realize) F(M, NODES, nodes) F(M, U64S, targets) F(M, U64S, ids) F(M, U64S, bufs)
#define TA_FIELDS_KERNELS(F, M) F(M, U64, realize) F(M, KERNELS, kernels) F(M, U64S, temps)
#define TA_FIELDS_COMPILE(F, M) F(M, U64, realize) F(M, U64, reply_to) F(M, JOBS, jobs)
#define TA_FIELDS_PROGRAM(F, M) \
    F(M, U64, realize) F(M, U64, index) F(M, I64, status) F(M, STR, name) F(M, STR, digest) F(M, STR, text) F(M, U64, align) F(M, U64, nargs) F(M, U64, final)
#define TA_FIELDS_SCHEDULED(F, M) F(M, U64, realize) F(M, U64, kernels) F(M, U64S, ids)
#define TA_FIELDS_PLAN(F, M) F(M, U64, realize) F(M, I64, status) F(M, STR, text) F(M, STEPS, steps) F(M, U64, planned_peak) F(M, U64, unplanned)
#define TA_FIELDS_RUN(F, M) \
    F(M, U64, realize) F(M, U64, plan) F(M, U64, reply_to) F(M, U64, final) F(M, I64, status) F(M, STR, what) F(M, STR, text) F(M, U64S, returns)
#define TA_FIELDS_COPY_OUT(F, M) F(M, U64, buf) F(M, U64, bytes) F(M, U64, reply_to)
#define TA_FIELDS_FREE(F, M) F(M, U64S, bufs)
#define TA_FIELDS_PROGRESS(F, M)
#define TA_FIELDS_BACKWARD(F, M) \
    F(M, U64, loss) F(M, U64, grad) F(M, U64S, targets) F(M, U64S, ids) F(M, U64S, olds) F(M, NODES, nodes) F(M, U64, more) F(M, U64, next) F(M, U64, part)
#define TA_FIELDS_GRADS(F, M) F(M, NODES, ops) F(M, U64S, ids) F(M, U64, more)
#define TA_FIELDS_HELLO(F, M) F(M, STR, devices) F(M, U64S, executors) F(M, U64S, compilers) F(M, U64, ports)
#define TA_FIELDS_WELCOME(F, M) F(M, I64, status) F(M, STR, text) F(M, DEVICES, devices)

typedef enum ta_msg_type {
#define TA_MSG_ENUM_(NAME, name) TA_MSG_##NAME,
    TA_MSG_LIST(TA_MSG_ENUM_)
#undef TA_MSG_ENUM_
    TA_MSG__COUNT
} ta_msg_type_t;

typedef enum ta_field_kind { TA_FK_U64, TA_FK_I64, TA_FK_F64, TA_FK_STR, TA_FK_BIN, TA_FK_U64S, TA_FK_RECS } ta_field_kind_t;

/* The list kinds of message fields: a list of records of one type each
 * (ta_recs_t, checked record by record by the codec). */
#define TA_FK_NODES TA_FK_RECS
#define TA_FK_KERNELS TA_FK_RECS
#define TA_FK_STEPS TA_FK_RECS
#define TA_FK_JOBS TA_FK_RECS
#define TA_FK_DEVICES TA_FK_RECS
#define TA_RECOF_NODES TA_REC_NODE
#define TA_RECOF_KERNELS TA_REC_KERNEL
#define TA_RECOF_STEPS TA_REC_STEP
#define TA_RECOF_JOBS TA_REC_JOB
#define TA_RECOF_DEVICES TA_REC_DEVICE
#define TA_RECOF_U64 (-1)
#define TA_RECOF_I64 (-1)
#define TA_RECOF_F64 (-1)
#define TA_RECOF_STR (-1)
#define TA_RECOF_BIN (-1)
#define TA_RECOF_U64S (-1)

#define TA_CTYPE_U64 uint64_t
#define TA_CTYPE_I64 int64_t
#define TA_CTYPE_F64 double
#define TA_CTYPE_STR ta_bytes_t
#define TA_CTYPE_BIN ta_bytes_t
#define TA_CTYPE_U64S ta_u64s_t
#define TA_CTYPE_NODES ta_recs_t
#define TA_CTYPE_KERNELS ta_recs_t
#define TA_CTYPE_STEPS ta_recs_t
#define TA_CTYPE_JOBS ta_recs_t
#define TA_CTYPE_DEVICES ta_recs_t
#define TA_FIELD_DECL_(M, KIND, field) TA_CTYPE_##KIND field;
/* Each payload struct starts with a placeholder so field-less messages are valid C. */
#define TA_MSG_STRUCT_(NAME, name)             \
    typedef struct ta_##name##_msg {           \
        char unused_;                          \
        TA_FIELDS_##NAME(TA_FIELD_DECL_, name) \
    } ta_##name##_msg_t;
TA_MSG_LIST(TA_MSG_STRUCT_)
#undef TA_MSG_STRUCT_

/* Who sent a message when it is the owner of an actor (start/stop control). */
#define TA_ID_OWNER 0u

/*
 * A message.  Decoded messages borrow their STR/BIN fields and bulk bytes
 * from storage the message owns (released by ta_msg_release); messages built
 * for sending borrow from the caller until the send returns.
 */
typedef struct ta_msg {
    ta_msg_type_t type;
    uint32_t sender; /* port id of the sender */
    uint32_t dest;   /* port id of the receiver */
    uint64_t seq;    /* per (sender, dest) sequence number, from 1 */
    uint64_t corr;   /* correlation id: a reply carries its request's */
    union {
#define TA_MSG_UNION_(NAME, name) ta_##name##_msg_t name;
        TA_MSG_LIST(TA_MSG_UNION_)
#undef TA_MSG_UNION_
    } as;
    ta_bytes_t bulk;  /* optional second frame (tensor bytes) */
    void *bulk_owner; /* set when a send may take the bulk bytes without copying */
    void (*bulk_free)(void *data, void *owner);
    ta_bytes_t wire_; /* a received message's envelope bytes as they travelled */
    void *storage_;   /* owned frames of a decoded message, freed by storage_free_ */
    void (*storage_free_)(void *storage);
} ta_msg_t;

/* Initialises m as an empty message of the given type (every field zero). */
void ta_msg_init(ta_msg_t *m, ta_msg_type_t type);

/* Releases what a decoded message owns and leaves it empty; safe on any
 * initialised message and twice. */
void ta_msg_release(ta_msg_t *m);

/* Returns the message type's name ("ECHO"), or "?" if out of range. */
const char *ta_msg_type_name(int type);

/* Encodes m's envelope (without bulk bytes; their length is encoded) into
 * sb, which is cleared first.  Returns TACT_OK or TACT_ENOMEM. */
int ta_msg_encode(const ta_msg_t *m, msgpack_sbuffer *sb);

/*
 * Decodes an envelope of len bytes into m (which must be initialised), and
 * checks every field: version, type, field count and kinds, no bytes left
 * over, size <= max_bytes (0: no limit).  STR/BIN fields borrow from buf.
 * On success *bulk_len is the announced bulk length.  On error returns
 * TACT_EPROTO, TACT_ETOOBIG or TACT_EVERSION with the byte offset and field
 * in err->text, and m is left empty.
 */
int ta_msg_decode(ta_msg_t *m, const void *buf, size_t len, size_t max_bytes, uint64_t *bulk_len,
                  ta_error_t *err);

/*
 * Compares two messages field by field (header, payload, bulk).  Returns
 * true if equal; otherwise false with the first differing field's name
 * ("seq", "payload.data", "bulk") in where (if not NULL).
 */
bool ta_msg_equal(const ta_msg_t *a, const ta_msg_t *b, char *where, size_t where_len);

/* Formats a one-line human-readable summary of m into buf; returns buf. */
char *ta_msg_format(const ta_msg_t *m, char *buf, size_t len);

/* Prints every record of m's record lists to f, one a line ("nodes[3]
 * {id=3 op=MUL ...}" with namer's names, which may be NULL), each line
 * starting with indent (`tact log dump -v`). */
#include <stdio.h>
void ta_msg_dump_records(const ta_msg_t *m, FILE *f, const char *indent, ta_rec_namer_fn namer);
/* Record k of m's record list named field, formatted as ta_rec_format_named
 * does (json 0) into buf; NULL when m has no such list or record. */
char *ta_msg_format_record(const ta_msg_t *m, const char *field, uint32_t k, char *buf, size_t len, ta_rec_namer_fn namer);

/* Writes m to f as one JSON object, no newline: {"type":"CONFIG","from":1,
 * "to":2,"seq":1,"corr":.., then every payload field by name: record lists
 * in full (namer's names as strings), BIN fields and the bulk frame
 * ("bulk") as their lengths, a float that is not finite as null}. */
void ta_msg_json(const ta_msg_t *m, FILE *f, ta_rec_namer_fn namer);

#endif
