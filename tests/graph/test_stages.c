/* test_stages.c - every pipeline stage refuses damaged payloads (truncated, garbage, hostile counts) without harm. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "log.h"
#include "pipeline.h"
#include "replay.h"
#include "tact.h"
#include "testutil.h"

/* A context on one thread recording its run to a new file (*path). */
static tact_ctx *s_open_recording(const char *name, char **path) {
    *path = tu_tmpfile(name);
    tact_options o;
    tact_options_default(&o);
    o.log_path = *path;
    o.cpu_threads = 1;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

/* A recorded run with ops, a realize, a read, an assign and a release. */
static char *s_record(void) {
    char *path;
    tact_ctx *ctx = s_open_recording("stages", &path);
    float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int64_t shape[2] = {3, 4};
    int axis = 1;
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    tact_scope_begin(ctx);
    tact_tensor *s = tact_sum(tact_mul(tact_exp2(a), tact_permute(tact_permute(a, (int[]){1, 0}), (int[]){1, 0})), 1, &axis, 1);
    float out[3];
    cr_assert_eq(tact_read(s, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_scope_end(ctx);
    tact_assign(a, tact_add(a, tact_scalar(ctx, 1.0)));
    cr_assert_eq(tact_realize(ctx, 1, &a), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    return path;
}

typedef struct {
    int errors, sent;
} s_count_t;

static int s_capture(void *ud, const ta_msg_t *m) {
    s_count_t *c = ud;
    c->sent++;
    /* A refusal is an ERROR, or for the planner a PLAN carrying the failure
     * (the executor awaits a PLAN whatever happens). */
    c->errors += m->type == TA_MSG_ERROR || (m->type == TA_MSG_PLAN && m->as.plan.status != TACT_OK);
    return TACT_OK;
}

/* The id arrays of a message: the codec checked their form, so they are
 * damaged in content (hostile ids, wrong counts). */
static int s_id_fields(ta_msg_t *m, ta_u64s_t **out) {
    switch (m->type) {
    case TA_MSG_REALIZE: out[0] = &m->as.realize.ids, out[1] = &m->as.realize.failed; return 2;
    case TA_MSG_OP_BATCH: out[0] = &m->as.op_batch.released; return 1;
    case TA_MSG_SCHEDULE: out[0] = &m->as.schedule.targets, out[1] = &m->as.schedule.ids, out[2] = &m->as.schedule.bufs; return 3;
    case TA_MSG_KERNELS: out[0] = &m->as.kernels.temps; return 1;
    case TA_MSG_SCHEDULED: out[0] = &m->as.scheduled.ids; return 1;
    case TA_MSG_FREE: out[0] = &m->as.free.bufs; return 1;
    default: return 0;
    }
}

/* Replays a stage's recorded inbox; before each message with a payload, it
 * gets damaged copies: the envelope as it travelled with 1 to 4 bytes
 * changed (those the codec still accepts reach the stage: records with
 * hostile values), and every id list replaced by hostile ids and counts. */
static void s_damage_stage(const ta_log_t *log, const char *name, const ta_actor_ops_t *ops, uint64_t seed) {
    const ta_log_stream_info_t *st = NULL;
    for (size_t i = 0; i < log->nstreams; i++)
        if (strcmp(log->streams[i].name, name) == 0) st = &log->streams[i];
    cr_assert(st, "no stream %s", name);
    s_count_t count = {0, 0};
    ta_error_t err;
    ta_actor_t *a = ta_stage_new(ops, NULL, st->id, s_capture, &count, &err);
    cr_assert(a, "%s: %s", name, err.text);
    uint64_t rng = seed;
    static uint8_t env[1 << 20];
    int damaged = 0;
    for (size_t k = 0; k < st->nrecords; k++) {
        const ta_log_record_t *rec = &st->records[k];
        if (rec->dir != TA_LOG_IN) continue;
        ta_msg_t m;
        cr_assert_eq(ta_log_record_msg(rec, &m, &err), TACT_OK);
        for (int trial = 0; m.type != TA_MSG_CONFIG && rec->env_len <= sizeof env && trial < 64; trial++) {
            memcpy(env, rec->env, rec->env_len);
            int flips = 1 + (int)(tu_rand(&rng) % 4);
            for (int f = 0; f < flips; f++) {
                /* The payload is past the header's dozen bytes. */
                size_t at = rec->env_len > 16 ? 12 + tu_rand(&rng) % (rec->env_len - 12) : tu_rand(&rng) % rec->env_len;
                env[at] = trial & 1 ? (uint8_t)tu_rand(&rng) : (uint8_t)(env[at] ^ (1u << (tu_rand(&rng) % 8)));
            }
            ta_msg_t bad;
            uint64_t bulk_len;
            ta_msg_init(&bad, TA_MSG_EOS);
            if (ta_msg_decode(&bad, env, rec->env_len, 0, &bulk_len, &err) != TACT_OK) continue;
            bad.bulk = bulk_len == m.bulk.len ? m.bulk : (ta_bytes_t){NULL, 0};
            ta_stage_dispatch(a, &bad);
            damaged++;
        }
        ta_u64s_t *idf[4];
        int ni = s_id_fields(&m, idf);
        uint64_t ids[40];
        for (int f = 0; f < ni; f++) {
            for (int rep = 0; rep < 8; rep++) {
                size_t n = (size_t)(tu_rand(&rng) % 40);
                for (size_t i = 0; i < n; i++) ids[i] = rep & 1 ? tu_rand(&rng) : tu_rand(&rng) % 64;
                ta_msg_t bad = m;
                ta_u64s_t *bf[4] = {0};
                s_id_fields(&bad, bf);
                *bf[f] = ta_u64s(ids, n);
                ta_stage_dispatch(a, &bad);
                damaged++;
            }
        }
        ta_stage_dispatch(a, &m); /* then the real one, so later messages find their state */
    }
    cr_assert_gt(damaged, 0, "%s got no damaged payloads", name);
    cr_assert_gt(count.errors, 0, "seed %#llx: %s answered no damaged payload with an error", (unsigned long long)seed, name);
    ta_stage_destroy(&a);
}

Test(graph_stages, every_stage_refuses_damaged_payloads_and_goes_on) {
    uint64_t seed = tu_seed();
    char *path = s_record();
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    /* Each stage learns the wiring from the CONFIG at the head of its inbox. */
    s_damage_stage(log, "graph", &ta_graph_ops, seed);
    s_damage_stage(log, "scheduler", &ta_scheduler_ops, seed);
    s_damage_stage(log, "planner", &ta_planner_ops, seed);
    s_damage_stage(log, "executor", &ta_executor_ops, seed);
    ta_log_free(&log);
    unlink(path);
    free(path);
}

typedef struct {
    const char *want;
    int found;
} s_want_t;

static int s_find_error(void *ud, const ta_msg_t *m) {
    s_want_t *w = ud;
    if (m->type == TA_MSG_ERROR && m->as.error.text.len && memmem(m->as.error.text.ptr, m->as.error.text.len, w->want, strlen(w->want)))
        w->found++;
    return TACT_OK;
}

/* Replays the executor's recorded inbox with the first PROGRAM changed by
 * change(); returns how many errors named want. */
static int s_executor_with(void (*change)(ta_msg_t *m, uint8_t **copy), const char *want) {
    char *path = s_record();
    s_want_t w = {want, 0};
    tu_replay_executor_changed(path, 0, TA_MSG_PROGRAM, 1, change, s_find_error, &w);
    free(path);
    return w.found;
}

static void s_one_more_argument(ta_msg_t *m, uint8_t **copy) {
    (void)copy;
    m->as.program.nargs++;
}

/* The executor loads an object only if its bytes are the ones its digest
 * names: a PROGRAM whose bytes were changed on the way fails the realize. */
Test(graph_stages, the_executor_refuses_an_object_that_does_not_match_its_digest) {
    cr_assert_eq(s_executor_with(tu_spoil_bulk, "do not match digest"), 1, "the changed object was reported once");
}

/* A kernel reads as many arguments as its PROGRAM says: a step that gives
 * another count is refused before the kernel could read past them. */
Test(graph_stages, the_executor_refuses_a_step_with_another_number_of_arguments) {
    cr_assert_eq(s_executor_with(s_one_more_argument, "reads 1 arguments, its step gives 0"), 1, "the mismatch was reported once");
}

/* The graph answers a backward with the list of gradients before it adds
 * their ops (the client builds what reads them meanwhile), so a failure in
 * adding them comes after the answer: it is the client's next request's
 * error, naming the cause.  Replayed here with the engine's last GRADS
 * emptied of its ops: the answer still goes, and the realize after it
 * fails saying the gradients were refused. */
static char *s_record_backward(void) {
    char *path;
    tact_ctx *ctx = s_open_recording("stages-bw", &path);
    float x[4] = {1, 2, 3, 4};
    tact_tensor *w = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){4}, x), 1);
    tact_tensor *loss = tact_sum(tact_mul(w, w), -1, NULL, 0);
    cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *g = tact_grad(w);
    float out[4];
    cr_assert_eq(tact_read(g, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(out[i], 2 * x[i], "d(sum w^2)/dw[%d] = %g", i, (double)out[i]);
    tact_ctx_close(&ctx);
    return path;
}

static void s_drop_grad_ops(ta_msg_t *m, uint8_t **copy) {
    (void)copy;
    m->as.grads.ops = ta_recs_raw(TA_REC_NODE, NULL, 0, 0);
}

typedef struct {
    int answers, answer_first, refused;
} s_bw_seen_t;

static int s_bw_capture(void *ud, const ta_msg_t *m) {
    s_bw_seen_t *s = ud;
    if (m->type == TA_MSG_GRADS) s->answers++;
    const ta_bytes_t *t = m->type == TA_MSG_ERROR ? &m->as.error.text : m->type == TA_MSG_RUN && m->as.run.status ? &m->as.run.text : NULL;
    if (t && t->len && memmem(t->ptr, t->len, "gradients of the last backward were refused", 43)) {
        s->refused++;
        s->answer_first = s->answers > 0;
    }
    return TACT_OK;
}

Test(graph_stages, a_backward_answered_before_its_ops_fail_reports_at_the_next_request) {
    char *path = s_record_backward();
    s_bw_seen_t seen = {0, 0, 0};
    tu_replay_stage_changed(path, "graph", &ta_graph_ops, 0, TA_MSG_GRADS, 0, s_drop_grad_ops, s_bw_capture, &seen);
    free(path);
    cr_assert_eq(seen.answers, 1, "the client got %d answers to its backward", seen.answers);
    cr_assert_eq(seen.refused, 1, "the request after the backward was answered %d times with the refusal", seen.refused);
    cr_assert(seen.answer_first, "the refusal came before the backward's answer");
}
