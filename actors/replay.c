/* replay.c - stage replay: one actor re-driven from its recorded inbox, outbox checked field by field. */
#include "replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "actor_impl.h"
#include "mem.h"

typedef struct {
    const ta_log_stream_info_t *stream;
    size_t next; /* next record to look at */
    ta_replay_report_t *rep;
} s_cursor_t;

static void s_diverge(s_cursor_t *c, const char *field, const ta_msg_t *expected, const ta_msg_t *actual) {
    ta_replay_report_t *rep = c->rep;
    if (rep->diverged) return;
    rep->diverged = 1;
    rep->out_index = rep->out_count;
    snprintf(rep->field, sizeof rep->field, "%s", field);
    if (expected) ta_msg_format(expected, rep->expected, sizeof rep->expected);
    else snprintf(rep->expected, sizeof rep->expected, "(no message)");
    if (actual) ta_msg_format(actual, rep->actual, sizeof rep->actual);
    else snprintf(rep->actual, sizeof rep->actual, "(no message)");
}

/* Every message the replayed actor sends lands here, in order. */
static int s_capture(void *ud, const ta_msg_t *m) {
    s_cursor_t *c = ud;
    if (c->rep->diverged || m->type == TA_MSG_PROGRESS) return TACT_OK; /* heartbeats depend on timing: never recorded */
    const ta_log_record_t *rec = c->next < c->stream->nrecords ? &c->stream->records[c->next] : NULL;
    if (!rec || rec->dir != TA_LOG_OUT) {
        s_diverge(c, "extra", NULL, m);
        return TACT_OK;
    }
    ta_msg_t want;
    char field[64];
    ta_log_record_msg(rec, &want, NULL); /* validated when the log was read */
    c->next++;
    if (!ta_msg_equal(&want, m, field, sizeof field)) s_diverge(c, field, &want, m);
    else c->rep->out_count++;
    return TACT_OK;
}

/* Recorded messages still expected after the actor finished a step. */
static void s_expect_none_pending(s_cursor_t *c) {
    const ta_log_record_t *rec = c->next < c->stream->nrecords ? &c->stream->records[c->next] : NULL;
    if (rec && rec->dir == TA_LOG_OUT && !c->rep->diverged) {
        ta_msg_t want;
        ta_log_record_msg(rec, &want, NULL);
        s_diverge(c, "missing", &want, NULL);
    }
}

static int s_drop(void *ud, const ta_msg_t *m) {
    (void)ud, (void)m;
    return TACT_OK;
}

ta_actor_t *ta_stage_new(const ta_actor_ops_t *ops, void *arg, uint32_t id, ta_capture_fn capture, void *ud, ta_error_t *err) {
    ta_actor_t *a = ta_calloc(1, sizeof *a);
    if (!a) {
        ta_error_set(err, TACT_ENOMEM, "stage: out of memory");
        return NULL;
    }
    a->ops = ops;
    a->arg = arg;
    a->id = id;
    snprintf(a->name, sizeof a->name, "%s", ops->name ? ops->name : "actor");
    int rc = ta_port_new_capture(id, capture ? capture : s_drop, ud, &a->port);
    if (rc == TACT_OK && ops->init) rc = ops->init(a, arg, err);
    else if (rc != TACT_OK) ta_error_set(err, rc, "stage: out of memory");
    if (rc != TACT_OK) {
        ta_port_destroy(&a->port);
        ta_free(a);
        return NULL;
    }
    return a;
}

void ta_stage_dispatch(ta_actor_t *a, ta_msg_t *m) { ta_actor_dispatch(a, m); }

void ta_stage_destroy(ta_actor_t **pa) {
    ta_actor_t *a = *pa;
    if (!a) return;
    *pa = NULL;
    if (a->ops->fini) a->ops->fini(a);
    ta_port_destroy(&a->port);
    ta_actor_free_queues(a);
    ta_free(a);
}

int ta_replay_actor(const ta_log_t *log, uint32_t id, const ta_actor_ops_t *ops, void *arg, ta_replay_report_t *rep,
                    ta_error_t *err) {
    return ta_replay_actor_filtered(log, id, ops, arg, NULL, NULL, rep, err);
}

int ta_replay_actor_filtered(const ta_log_t *log, uint32_t id, const ta_actor_ops_t *ops, void *arg, ta_replay_filter_fn filter, void *ud,
                             ta_replay_report_t *rep, ta_error_t *err) {
    memset(rep, 0, sizeof *rep);
    s_cursor_t c = {ta_log_find(log, id), 0, rep};
    if (!c.stream) return ta_error_set(err, TACT_ENOTFOUND, "replay: the log has no stream for port %" PRIu32, id);
    ta_actor_t *a = ta_stage_new(ops, arg, id, s_capture, &c, err);
    if (!a) return err ? err->code : TACT_ENOMEM;
    for (; c.next < c.stream->nrecords && !rep->diverged;) {
        const ta_log_record_t *rec = &c.stream->records[c.next];
        if (rec->dir == TA_LOG_OUT) { /* sent by init, or left over: checked below */
            s_expect_none_pending(&c);
            break;
        }
        c.next++;
        ta_msg_t m;
        ta_log_record_msg(rec, &m, NULL);
        if (filter) filter(&m, ud);
        rep->in_index = rep->in_count++;
        ta_actor_dispatch(a, &m);
        s_expect_none_pending(&c);
    }
    ta_stage_destroy(&a);
    if (rep->diverged)
        return ta_error_set(err, TACT_EMISMATCH,
                            "replay of port %" PRIu32 ": sent message %" PRIu64 " (while processing inbox message %" PRIu64
                            ") differs in %s: recorded %s, replayed %s",
                            id, rep->out_index, rep->in_index, rep->field, rep->expected, rep->actual);
    return TACT_OK;
}

int ta_replay_actor_run(const ta_log_t *log, uint32_t id, const ta_actor_ops_t *ops, void *arg, ta_replay_filter_fn filter, void *fud,
                        ta_capture_fn sent, void *sud, uint64_t *in_count, ta_error_t *err) {
    const ta_log_stream_info_t *st = ta_log_find(log, id);
    if (in_count) *in_count = 0;
    if (!st) return ta_error_set(err, TACT_ENOTFOUND, "replay: the log has no stream for port %" PRIu32, id);
    ta_actor_t *a = ta_stage_new(ops, arg, id, sent, sud, err);
    if (!a) return err ? err->code : TACT_ENOMEM;
    for (size_t k = 0; k < st->nrecords; k++) {
        const ta_log_record_t *rec = &st->records[k];
        if (rec->dir != TA_LOG_IN) continue;
        ta_msg_t m;
        ta_log_record_msg(rec, &m, NULL);
        if (filter) filter(&m, fud);
        if (in_count) (*in_count)++;
        ta_actor_dispatch(a, &m);
    }
    ta_stage_destroy(&a);
    return TACT_OK;
}
