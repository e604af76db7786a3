/* test_render.c - kernel ASTs and the C renderer: checks, the codec, kernel arguments. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ast.h"
#include "lower.h"
#include "mem.h"
#include "mpread.h"
#include "render.h"

/* out[i] = x[i] * c + 1 over 8 float32 elements, c a CONST (an argument when
 * arg is set). */
static void s_axpy(ta_ast_t *a, int arg, double c) {
    int64_t shape[1] = {8};
    ta_ast_init(a, 1, shape, 0);
    a->nbufs = 2;
    a->buf_dtype[0] = a->buf_dtype[1] = TACT_FLOAT32;
    a->buf_size[0] = a->buf_size[1] = 8;
    ta_vstack_t v;
    ta_vstack_init(&v, 1, shape);
    int view = ta_ast_view(a, &v);
    ta_ast_node_t ld = {TA_OP_LOAD, TACT_FLOAT32, 0, {0, 0, 0}, 1, (int16_t)view, {0}, 0};
    ta_ast_node_t k = {TA_OP_CONST, TACT_FLOAT32, 0, {0, 0, 0}, 0, -1, {.f = arg ? 0 : c}, (int8_t)arg};
    ta_ast_node_t mul = {TA_OP_MUL, TACT_FLOAT32, 2, {0, 1, 0}, 0, -1, {0}, 0};
    ta_ast_node_t one = {TA_OP_CONST, TACT_FLOAT32, 0, {0, 0, 0}, 0, -1, {.f = 1.0}, 0};
    ta_ast_node_t add = {TA_OP_ADD, TACT_FLOAT32, 2, {2, 3, 0}, 0, -1, {0}, 0};
    ta_ast_node_t st = {TA_OP_STORE, TACT_FLOAT32, 1, {4, 0, 0}, 0, (int16_t)view, {0}, 0};
    ta_ast_add(a, ld), ta_ast_add(a, k), ta_ast_add(a, mul), ta_ast_add(a, one), ta_ast_add(a, add), ta_ast_add(a, st);
}

static char *s_render(const ta_ast_t *a) {
    char *src, name[64];
    int64_t align;
    ta_error_t err;
    cr_assert_eq(ta_render_c(a, &src, name, sizeof name, &align, &err), TACT_OK, "%s", err.text);
    return src;
}

/* Which constants are structural (kept in the source) and which become
 * kernel arguments. */
Test(codegen_render, structural_constants_stay_and_other_scalars_are_arguments) {
    cr_assert(ta_ast_const_is_structural(TACT_FLOAT32, (ta_value_t){.f = 0}));
    cr_assert(ta_ast_const_is_structural(TACT_FLOAT32, (ta_value_t){.f = -1}));
    cr_assert(ta_ast_const_is_structural(TACT_FLOAT64, (ta_value_t){.f = -INFINITY}));
    cr_assert(ta_ast_const_is_structural(TACT_BOOL, (ta_value_t){.b = 1}));
    cr_assert(ta_ast_const_is_structural(TACT_INT32, (ta_value_t){.i = 1}));
    cr_assert(!ta_ast_const_is_structural(TACT_FLOAT32, (ta_value_t){.f = 0.5}));
    cr_assert(!ta_ast_const_is_structural(TACT_INT64, (ta_value_t){.i = -2}));
    cr_assert(!ta_ast_const_is_structural(TACT_UINT8, (ta_value_t){.u = 200}));
    /* An argument's word: a float's value as float64 bits, exactly. */
    double half;
    uint64_t w = ta_ast_arg_word(TACT_FLOAT16, (ta_value_t){.h = 0x3800}); /* 0.5 */
    memcpy(&half, &w, sizeof half);
    cr_assert_eq(half, 0.5);
    cr_assert_eq(ta_ast_arg_word(TACT_INT8, (ta_value_t){.i = -3}), (uint64_t)-3);
}

/* An argument CONST is rendered as a read of args, never as its value,
 * so two values give the same source (and program); a structural one is a
 * literal. */
Test(codegen_render, an_argument_is_read_from_args_and_its_value_is_not_in_the_source) {
    ta_ast_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    s_axpy(a, 1, 0);
    cr_assert_eq(a->nargs, 1);
    char *src = s_render(a);
    cr_assert(strstr(src, "const float arg0 = (float)tact_argf(args[0]);"), "%s", src);
    cr_assert(strstr(src, "arg0"), "%s", src);
    cr_assert(strstr(src, "0x1p+0f"), "the structural 1 is a literal: %s", src);
    /* The same kernel with the scalar as a literal shows it. */
    s_axpy(b, 0, 0.375);
    char *lit = s_render(b);
    cr_assert(strstr(lit, "0x1.8p-2f") && !strstr(lit, "args[0]"), "%s", lit);
    cr_assert(strcmp(src, lit) != 0);
    ta_free(src), ta_free(lit);
    free(a), free(b);
}

/* Only a CONST of value 0 may be an argument; the flag and the count
 * survive the codec. */
Test(codegen_render, arguments_are_checked_and_survive_the_codec) {
    ta_ast_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    ta_error_t err;
    s_axpy(a, 1, 0);
    cr_assert_eq(ta_ast_check(a, &err), TACT_OK, "%s", err.text);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    cr_assert_eq(ta_ast_pack(a, &pk), 0);
    ta_mpr_t r;
    ta_mpr_init(&r, (const uint8_t *)sb.data, sb.size);
    cr_assert_eq(ta_ast_unpack(b, &r, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(b->nargs, 1);
    cr_assert_eq(b->nodes[1].arg, 1);
    cr_assert_eq(b->nodes[3].arg, 0);
    /* The bytes are the record alone: one more is refused (ASTs are cached by their bytes). */
    msgpack_pack_nil(&pk);
    ta_mpr_init(&r, (const uint8_t *)sb.data, sb.size);
    cr_assert_eq(ta_ast_unpack(b, &r, &err), TACT_EPROTO);
    cr_assert(strstr(err.text, "bytes after the record"), "%s", err.text);
    msgpack_sbuffer_destroy(&sb);
    /* An argument with a value, on a LOAD, or miscounted. */
    a->nodes[1].value.f = 2.0;
    cr_assert_eq(ta_ast_check(a, &err), TACT_EINVAL);
    cr_assert(strstr(err.text, "only a CONST of value 0 may be an argument"), "%s", err.text);
    a->nodes[1].value.f = 0;
    a->nodes[0].arg = 1;
    cr_assert_eq(ta_ast_check(a, &err), TACT_EINVAL);
    a->nodes[0].arg = 0;
    a->nargs = 2;
    cr_assert_eq(ta_ast_check(a, &err), TACT_EINVAL);
    cr_assert(strstr(err.text, "1 argument CONSTs, 2 counted"), "%s", err.text);
    free(a), free(b);
}

/* On OpenCL a float32 kernel is printed with OpenCL's own vectors: its
 * loads and stores are vloadn/vstoren (any float-aligned address), and
 * the CPU's GCC vector extensions appear nowhere. */
Test(codegen_render, opencl_kernels_load_and_store_whole_vectors) {
    ta_ast_t a;
    int64_t shape[1] = {4096};
    ta_ast_init(&a, 1, shape, 0);
    a.nbufs = 2;
    a.buf_dtype[0] = a.buf_dtype[1] = TACT_FLOAT32;
    a.buf_size[0] = a.buf_size[1] = 4096;
    ta_vstack_t v;
    ta_vstack_init(&v, 1, shape);
    int view = ta_ast_view(&a, &v);
    ta_ast_node_t ld = {TA_OP_LOAD, TACT_FLOAT32, 0, {0, 0, 0}, 1, (int16_t)view, {0}, 0};
    ta_ast_node_t e = {TA_OP_EXP2, TACT_FLOAT32, 1, {0, 0, 0}, 0, -1, {0}, 0};
    ta_ast_node_t st = {TA_OP_STORE, TACT_FLOAT32, 1, {1, 0, 0}, 0, (int16_t)view, {0}, 0};
    ta_ast_add(&a, ld), ta_ast_add(&a, e), ta_ast_add(&a, st);
    ta_target_t cl = ta_target_cl();
    char *src, name[64];
    int64_t align;
    int width;
    ta_error_t err;
    cr_assert_eq(ta_render_c_for(&a, &cl, &src, name, sizeof name, &align, &width, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(width, 8, "%s", src);
    cr_assert(strstr(src, "vload8(") && strstr(src, "vstore8(") && strstr(src, "tact_vexp2(val"), "%s", src);
    cr_assert(!strstr(src, "vector_size") && !strstr(src, "__builtin"), "%s", src);
    ta_free(src);
}

/* On OpenCL a long float32 reduce to few outputs is shared by a work
 * group: each item takes every 64th element, and the partial results meet
 * in local memory in a fixed tree before one item stores the output. */
Test(codegen_render, opencl_shares_a_long_reduce_of_few_outputs_in_a_work_group) {
    ta_ast_t a;
    int64_t shape[2] = {16, 5003};
    ta_ast_init(&a, 2, shape, 2);
    a.nbufs = 2;
    a.buf_dtype[0] = a.buf_dtype[1] = TACT_FLOAT32;
    a.buf_size[0] = 16, a.buf_size[1] = 16 * 5003;
    ta_vstack_t in, out;
    ta_vstack_init(&in, 2, shape);
    int64_t kept[2] = {16, 1};
    ta_vstack_init(&out, 2, kept);
    int vi = ta_ast_view(&a, &in), vo = ta_ast_view(&a, &out);
    ta_ast_node_t ld = {TA_OP_LOAD, TACT_FLOAT32, 0, {0, 0, 0}, 1, (int16_t)vi, {0}, 0};
    ta_ast_node_t mx = {TA_OP_RMAX, TACT_FLOAT32, 1, {0, 0, 0}, 0, -1, {0}, 0};
    ta_ast_node_t st = {TA_OP_STORE, TACT_FLOAT32, 1, {1, 0, 0}, 0, (int16_t)vo, {0}, 0};
    ta_ast_add(&a, ld), ta_ast_add(&a, mx), ta_ast_add(&a, st);
    ta_target_t cl = ta_target_cl();
    char *src, name[64];
    int64_t align;
    ta_error_t err;
    cr_assert_eq(ta_render_c_for(&a, &cl, &src, name, sizeof name, &align, NULL, &err), TACT_OK, "%s", err.text);
    cr_assert(strstr(src, "reqd_work_group_size(64, 1, 1)") && strstr(src, "__local float tact_part[64]") && strstr(src, "barrier(") &&
                  strstr(src, "tact_maxf(tact_part[tact_lid], tact_part[tact_lid + w])") && strstr(src, "+= 64"),
              "%s", src);
    ta_free(src);
    /* The CPU's kernel is the plain loop. */
    cr_assert_eq(ta_render_c(&a, &src, name, sizeof name, &align, &err), TACT_OK, "%s", err.text);
    cr_assert(!strstr(src, "tact_part"), "%s", src);
    ta_free(src);
}
