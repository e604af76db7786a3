/* lower.h - the loop IR: a kernel AST lowered to axes, lanes, vectors and accumulators, which every target prints. */
#ifndef TACT_LOWER_H
#define TACT_LOWER_H

#include <stdint.h>

#include "ast.h"
#include "sym.h"

/*
 * Lowering decides how a kernel walks its iteration space; a printer (the C
 * one in render.c, later OpenCL and CUDA) only spells the decision out.  The
 * decision is a list of axes (docs/codegen-ir.md), outermost first:
 *
 *   GLOBAL  the work item: the kernel computes the output elements of flat
 *           index [item * align, (item + 1) * align) for each item in its
 *           launch range (a CPU chunk, later a GPU thread).  One per kernel.
 *   LOOP    a serial loop over output elements inside a work item.
 *   REDUCE  a serial loop over a reduced dim, in dim order; an outer one
 *           (a block of a long reduce, cache blocking) goes around the
 *           output loops, its partial sums kept in the output.
 *   UPCAST  an unrolled axis: lanes computed side by side (register
 *           blocking), each with its own names and accumulators.
 *   VECTOR  the one axis whose lanes are a machine vector (width lanes).
 *
 * Output axes (LOOP, UPCAST, VECTOR over an output dim) step the flat output
 * index by mult; reduce axes (REDUCE, VECTOR over a reduced dim) step their
 * dim's index by mult.  Every node of the AST gets the loop level it is
 * computed at (the innermost loop whose variable its indices use, so a
 * broadcast operand is loaded outside the loops it does not depend on),
 * the UPCAST axes it varies along, and whether it is a vector.  Each output
 * is still computed in one work item, by a sequence of operations the
 * source fixes: a reduce over a VECTOR axis keeps one partial per lane and
 * adds the lanes in a fixed tree at the end; bits do not depend on threads.
 */

enum { TA_LIR_MAX_AXES = 2 * TA_MAX_DIMS + 4, TA_LIR_MAX_LANES = 32 };

typedef enum { TA_AXIS_GLOBAL, TA_AXIS_LOOP, TA_AXIS_REDUCE, TA_AXIS_UPCAST, TA_AXIS_VECTOR } ta_axis_kind_t;

typedef struct {
    ta_axis_kind_t kind;
    int dim;      /* the AST dim it walks (-1 for GLOBAL) */
    int reduce;   /* it walks a reduced dim */
    int64_t size; /* iterations or lanes */
    int64_t mult; /* its step in the flat output index, or in its reduced dim's index */
    int outer;    /* a REDUCE axis around the output loops (a block of the reduce): the
                   * accumulators live in the output between its iterations */
    int pin;      /* a REDUCE axis of a gather: the AST node whose value is the one index
                   * the loop takes (when in range; none otherwise); -1 for a whole loop */
    int skip;     /* an outer REDUCE axis of a scatter: the AST node (a bool) without
                   * which an iteration adds nothing: skipped after the first; -1: none */
    char name[12];
} ta_axis_t;

/* What a kernel is built for: a device's TARGET record (actors/msg.h) as
 * lowering reads it.  The language's printer (printer.h) says what can be
 * spelled; vector registers of vector_bytes (0: none); whether a fused
 * multiply-add is worth using for accumulations; the largest work group
 * and its local memory in bytes (a reduce shared by a group needs 64
 * items and their 256 bytes); the compiler's flags for it (CUDA:
 * "-arch=sm_90 ...", which its printer's build reads; NULL: none); and
 * whether the math must be tact's own (strict mode, CONFIG.strict). */
struct ta_printer;
typedef struct ta_target {
    const struct ta_printer *printer;
    int vector_bytes;
    int fma;
    int64_t max_group;
    int64_t local_memory;
    const char *flags;
    int exact_math; /* strict determinism: float32 log2 and sin by tact's own routines, float64 ones refused */
} ta_target_t;

/* How a LOAD or STORE reads along the VECTOR axis. */
/* HALF: each element for two lanes in turn (position e + lane // 2, from
 * an even first lane): W/2 contiguous floats, each loaded twice. */
typedef enum { TA_ACCESS_SCALAR, TA_ACCESS_CONTIGUOUS, TA_ACCESS_BROADCAST, TA_ACCESS_GATHER, TA_ACCESS_HALF } ta_access_t;

typedef struct {
    int level;        /* 0: once per work item; k: inside the k-th loop (LOOP and REDUCE axes, in order) */
    uint32_t lanes;   /* bit u: varies along the u-th UPCAST axis */
    int vector;       /* a vector value (varies along the VECTOR axis) */
    int post;         /* computed after the reduce (the reduce itself and what uses it) */
    int fused;        /* a MUL whose only use is the reduce's SUM: one fused multiply-add */
    ta_access_t access;      /* along the vector; with a padded vector dim, in its whole tiles */
    ta_access_t access_last; /* in a padded dim's last tile (the lanes past its end included) */
    int padded;       /* a LOAD or STORE whose position depends on the padded dim */
    int packed;       /* a vector LOAD of the inner reduce read from the pack built at pack_level */
    int apacked;      /* a scalar LOAD of the inner reduce (A's rows) read from the pack built at apack_level */
    int transposed;   /* a LOAD contiguous along the first UPCAST (of the vector's width), not along the vector: a block of vectors, transposed */
} ta_lir_node_t;

typedef struct ta_lir {
    const ta_ast_t *ast;
    ta_target_t target;
    int naxes;
    ta_axis_t axes[TA_LIR_MAX_AXES]; /* GLOBAL, LOOPs, REDUCEs, UPCASTs, then the VECTOR if any */
    int nloops;                       /* LOOP and REDUCE axes: loop levels 1..nloops */
    int post_level;                   /* the loops around the accumulators (1..post_level); the
                                       * reduce's inner loops follow, and what comes after the
                                       * reduce is computed at this level */
    int nupcast;
    int vector;                       /* the VECTOR axis' index, -1 if none */
    int width;                        /* its lanes (1 if none) */
    int64_t align, items;             /* outputs per work item; work items */
    int reduce;                       /* the AST's reduce node, -1 if none */
    /* A padded dim: the VECTOR's output dim, which its tile (vector lanes
     * times UPCAST) does not divide.  Axis pad (a LOOP) walks its tiles;
     * the first pad_full are whole, and in the last one the lanes whose
     * index in pad_dim is past its end are masked: LOADs and STOREs that
     * depend on it read and write only the lanes inside. */
    int pad;                          /* the LOOP axis, -1 if none */
    int pad_dim;
    int64_t pad_full;
    /* On a grid (a printer without ranges): flat, the first LOOP axis is
     * part of the grid (a work item per iteration, align / its size
     * outputs each); group, a work group of this many items shares each
     * output's reduce (0: none). */
    int flat;
    int group;
    /* Packing (a blocked matmul on a target of 32-byte vectors): at loop
     * level pack_level (0: none), before the row tiles' loop, each packed
     * LOAD's vectors for the whole inner reduce block are copied into a
     * contiguous array on the stack, and the row tiles read them from
     * there.  B's rows a power of two apart fall in one set of the L1
     * cache and evict each other; packed, the block stays in L1.  The
     * same values in the same order: the bits do not change.  At level
     * apack_level (the block of K around the column tiles), A's values for
     * the block are packed the same way, every row tile's rows side by side
     * for each step of the reduce: six rows a matrix row apart (8 KiB at
     * 2048 columns) fall in one L1 set; packed, a row tile reads one
     * stream (Zen 3, 2048^2 on one core: 81-83 GFLOPS unpacked, 84-86
     * packed). */
    int pack_level;
    int apack_level;
    /* A transposing copy: its transposed LOADs run along UPCAST transpose_u. */
    int transpose_u;
    /* A short last tile (a blocked matmul's tiles of 6 or 12 rows: in 64
     * rows, ten or five whole tiles and one of 4): in the last iteration of
     * LOOP axis tail_axis, only the lanes whose digit along the first
     * UPCAST axis (the rows) is below tail_rows exist (0: none). */
    int tail_axis;
    int64_t tail_rows;
    ta_lir_node_t nodes[TA_AST_MAX_NODES];
} ta_lir_t;

/* The C target of the machine this process runs on (kernels are built
 * with -march=native for it): AVX-512 gives 64-byte vectors, AVX 32, SSE
 * 16.  (The CPU device's describe fills its TARGET record the same way;
 * this one is for tools and tests.) */
ta_target_t ta_target_host(void);
/* An OpenCL C target as PoCL describes itself here: float8 vectors, fma,
 * work groups of up to 4096 items with 512 KiB of local memory (tests). */
ta_target_t ta_target_cl(void);
/* A CUDA target as an H100 describes itself: no vectors (its threads are
 * the lanes), fma, blocks of up to 1024 threads with 48 KiB of shared
 * memory, sm_90 (tests). */
ta_target_t ta_target_cuda(void);
/* The target of a TARGET record's fields: its language's printer (NULL
 * when no printer speaks it), width, fma, group limits and flags (which
 * must outlive the target). */
ta_target_t ta_target_of(const char *language, int vector_bytes, int fma, int64_t max_group, int64_t local_memory, const char *flags);

/* Lowers a checked AST for target t into *out.  Returns TACT_OK, or
 * TACT_ENOMEM with err filled. */
int ta_lower(const ta_ast_t *a, const ta_target_t *t, ta_lir_t *out, ta_error_t *err);

/*
 * Index expressions.  ta_lir_vars makes the variables of l's axes in ar
 * (slot = axis index) and fills idx with each AST dim's index over them:
 * UPCAST axes are the constants of lane (the lane's digit per UPCAST axis,
 * first axis slowest), and the VECTOR axis is its variable, or 0 when
 * vector_base is set (the first lane's position, for a vector load).
 * out_idx gets the output index (reduced dims 0).  With whole set, the
 * padded dim's loop ranges over its whole tiles only (the lanes' index
 * stays inside the dim, which lets divisions by it simplify).  Returns 0,
 * or -1 when ar ran out of memory.
 */
int ta_lir_index(const ta_lir_t *l, ta_sym_arena_t *ar, int lane, int vector_base, int whole, const ta_sym_t **full_idx,
                 const ta_sym_t **out_idx);

/* The lane of the UPCAST axes that node i's value for lane is shared with
 * (its digits along axes it does not vary along set to 0). */
int ta_lir_lane_of(const ta_lir_t *l, int node, int lane);
/* The number of upcast lanes (product of the UPCAST sizes). */
int ta_lir_nlanes(const ta_lir_t *l);
/* Whether lane exists in the short last tile of axis tail_axis. */
int ta_lir_in_tail(const ta_lir_t *l, int lane);
/* The digit of lane along the u-th UPCAST axis. */
int64_t ta_lir_digit(const ta_lir_t *l, int lane, int u);
/* Whether l has a padded vector dim with whole tiles (ta_lir_index's whole
 * then differs from the index over all tiles). */
int ta_lir_has_whole(const ta_lir_t *l);

/*
 * Gathers: a SUM over dim r whose source is 0 wherever r's index differs
 * from a value X that does not depend on any reduced dim (a one-hot pick:
 * X == IOTA along r, multiplied in, or a WHERE choosing 0 otherwise) takes
 * only r = X, when 0 <= X < size, and nothing else: a load instead of a
 * loop (getitem with tensor indices, gather, embedding, one_hot picks).
 * The same bits as the whole loop, but where a row it skips holds a NaN
 * or an infinity (which 0 times would have spread; docs/api.md).  Fills
 * pin[k] with X's node for each gathered dim k, -1 for the others, and
 * returns how many dims are gathered.
 */
int ta_ast_gathers(const ta_ast_t *a, int pin[TA_MAX_DIMS]);

/*
 * Scatters: the gradient of a gather (an embedding's weight, a getitem's
 * table), out[.., j, ..] = SUM over i of (X(i) == j) * value, with the
 * one-hot's IOTA along an output dim j, X read along the one reduced dim,
 * and the equality the same for every output inside dim j (a row of the
 * table).  Lowering walks the reduce outside the row (the partial sums in
 * the output, an outer REDUCE) and skips each i whose equality is false
 * after the first (which writes the row's first partial): N checks per
 * row instead of N passes over it.  Each output keeps its reduce order,
 * and a skipped term is 0 times its value: the same bits as the whole
 * loop, but where a skipped row of the value holds a NaN or an infinity.
 * Returns the equality's node (the SUM stored as is, one reduced dim),
 * with *dim = j, or -1.
 */
int ta_ast_scatter(const ta_ast_t *a, int *dim);

#endif
