/* test_engine.c - the gradient engine stage driven by hand: a valid BACKWARD answers GRADS, hostile ones (shapes that
 * do not follow from their sources, bad args, parts out of turn, a `next` with nothing pending) answer ERROR, never a
 * crash (the suite also runs under ASan). */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "msg.h"
#include "ops.h"
#include "pipeline.h"
#include "replay.h"
#include "testutil.h"

static int s_errors, s_grads;
static char s_text[256];

static int s_capture(void *ud, const ta_msg_t *m) {
    (void)ud;
    if (m->type == TA_MSG_ERROR) {
        s_errors++;
        snprintf(s_text, sizeof s_text, "%.*s", (int)m->as.error.text.len, m->as.error.text.ptr ? (const char *)m->as.error.text.ptr : "");
    }
    if (m->type == TA_MSG_GRADS) s_grads++;
    return 0;
}

static ta_actor_t *s_engine(void) {
    ta_pipeline_t w;
    tu_wiring(&w, 1, 1, (const uint32_t[]){7});
    ta_error_t err;
    ta_actor_t *a = ta_stage_new(&ta_autograd_ops, NULL, 8, s_capture, NULL, &err);
    cr_assert_not_null(a, "%s", err.text);
    ta_msg_t cfg;
    ta_pipeline_msg_t store;
    cr_assert_eq(ta_pipeline_to_msg(&w, &cfg, &store), TACT_OK);
    cfg.sender = 1;
    ta_stage_dispatch(a, &cfg);
    ta_pipeline_msg_fini(&store);
    ta_pipeline_fini(&w);
    s_errors = s_grads = 0;
    return a;
}

static ta_node_rec_t s_rec(uint64_t id, ta_op_t op, int nd, const int64_t *shape, int nsrc, const uint64_t *src, int nargs, const int64_t *args,
                           int grad) {
    ta_node_rec_t r;
    memset(&r, 0, sizeof r);
    r.id = id, r.op = (uint64_t)op, r.dtype = TACT_FLOAT32, r.n_shape = (uint32_t)nd;
    memcpy(r.shape, shape, sizeof *shape * (size_t)nd);
    r.n_srcs = (uint32_t)nsrc;
    if (nsrc) memcpy(r.srcs, src, sizeof *src * (size_t)nsrc);
    r.n_args = (uint32_t)nargs;
    if (nargs) memcpy(r.args, args, sizeof *args * (size_t)nargs);
    r.flags = (uint64_t)grad;
    return r;
}

/* A BACKWARD (loss, target 1 -> gradient id 100), through the codec as a
 * peer's message arrives. */
static void s_send(ta_actor_t *a, const ta_node_rec_t *recs, int n, uint64_t loss, uint64_t part, uint64_t more, uint64_t next) {
    msgpack_sbuffer sb, env;
    msgpack_sbuffer_init(&sb);
    msgpack_sbuffer_init(&env);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ta_recs_pack_header(&pk, (size_t)n);
    for (int i = 0; i < n; i++) ta_rec_pack(TA_REC_NODE, &recs[i], &pk);
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_BACKWARD);
    m.sender = 2, m.corr = 77;
    uint64_t t[1] = {1}, ids[1] = {100}, olds[1] = {0};
    m.as.backward.loss = loss;
    m.as.backward.targets = ta_u64s(t, 1), m.as.backward.ids = ta_u64s(ids, 1), m.as.backward.olds = ta_u64s(olds, 1);
    m.as.backward.nodes = ta_recs_raw(TA_REC_NODE, sb.data, sb.size, (size_t)n);
    m.as.backward.part = part, m.as.backward.more = more, m.as.backward.next = next;
    cr_assert_eq(ta_msg_encode(&m, &env), 0);
    ta_msg_t d;
    uint64_t bulk;
    ta_error_t err;
    ta_msg_init(&d, TA_MSG_EOS);
    cr_assert_eq(ta_msg_decode(&d, env.data, env.size, 0, &bulk, &err), TACT_OK, "%s", err.text);
    ta_stage_dispatch(a, &d);
    msgpack_sbuffer_destroy(&sb);
    msgpack_sbuffer_destroy(&env);
}

static const int64_t s_v4[1] = {4}, s_444[3] = {4, 4, 4};
static const uint64_t s_one[1] = {1};

Test(autograd_engine, a_valid_backward_answers_grads) {
    ta_actor_t *a = s_engine();
    ta_node_rec_t r[2] = {s_rec(1, TA_OP_EMPTY, 1, s_v4, 0, NULL, 0, NULL, 0), s_rec(2, TA_OP_NEG, 1, s_v4, 1, s_one, 0, NULL, 1)};
    s_send(a, r, 2, 2, 0, 0, 0);
    cr_expect_eq(s_grads, 1, "errors %d: %s", s_errors, s_text);
    cr_expect_eq(s_errors, 0);
    ta_stage_destroy(&a);
}

/* A STRIDE claiming fewer dims than its source (it crashed the engine's
 * rule), a PAD claiming a shape its args do not give, hostile pads, a
 * reduce mask past the dims: each refused. */
Test(autograd_engine, shapes_that_do_not_follow_are_refused) {
    int64_t steps[3] = {1, 1, 2}, pads[6] = {INT64_MAX, 1, 0, 0, 0, 0}, bad_pads[6] = {1, 1, 0, 0, 0, 0}, mask[1] = {1 << 5};
    ta_node_rec_t cases[4][2] = {
        {s_rec(1, TA_OP_EMPTY, 3, s_444, 0, NULL, 0, NULL, 0), s_rec(2, TA_OP_STRIDE, 1, s_v4, 1, s_one, 3, steps, 1)},
        {s_rec(1, TA_OP_EMPTY, 3, s_444, 0, NULL, 0, NULL, 0), s_rec(2, TA_OP_PAD, 3, s_444, 1, s_one, 6, bad_pads, 1)},
        {s_rec(1, TA_OP_EMPTY, 3, s_444, 0, NULL, 0, NULL, 0), s_rec(2, TA_OP_PAD, 3, s_444, 1, s_one, 6, pads, 1)},
        {s_rec(1, TA_OP_EMPTY, 3, s_444, 0, NULL, 0, NULL, 0), s_rec(2, TA_OP_SUM, 3, s_444, 1, s_one, 1, mask, 1)},
    };
    for (int c = 0; c < 4; c++) {
        ta_actor_t *a = s_engine();
        s_send(a, cases[c], 2, 2, 0, 0, 0);
        cr_expect_eq(s_errors, 1, "case %d: %d errors, %d answers", c, s_errors, s_grads);
        cr_expect(strstr(s_text, "does not follow") || strstr(s_text, "args"), "case %d: %s", c, s_text);
        ta_stage_destroy(&a);
    }
}

/* Parts come numbered from 0; a part out of turn and a `next` with no
 * answer pending are refused; a first part after a broken sequence starts
 * afresh. */
Test(autograd_engine, parts_out_of_turn_are_refused) {
    ta_actor_t *a = s_engine();
    ta_node_rec_t r[2] = {s_rec(1, TA_OP_EMPTY, 1, s_v4, 0, NULL, 0, NULL, 0), s_rec(2, TA_OP_NEG, 1, s_v4, 1, s_one, 0, NULL, 1)};
    s_send(a, r, 1, 2, 3, 1, 0);
    cr_expect_eq(s_errors, 1, "part 3 first");
    s_send(a, NULL, 0, 2, 0, 0, 1);
    cr_expect_eq(s_errors, 2, "next with nothing pending");
    s_send(a, r, 1, 2, 0, 1, 0); /* part 0 of 2, then the sender gives up */
    s_send(a, r, 2, 2, 0, 0, 0); /* a new backward in one part */
    cr_expect_eq(s_grads, 1, "errors %d: %s", s_errors, s_text);
    ta_stage_destroy(&a);
}
