/* logverify.c - `tact log check --deep`: each executor's buffers followed through its recorded inbox, flagging a read before a write, a reuse of a live buffer, a copy read before it arrives. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "log.h"
#include "map.h"
#include "mem.h"

/*
 * What an executor holds, from the messages it processed, in order: a
 * WRITE defines its buffer; a PLAN's step defines its output (a kernel's
 * bufs[0], a receive's buffer) and reads its inputs (a kernel's bufs[1..],
 * a send's buffer), after which its `frees` are gone; a FREE drops
 * buffers.  An input is fine when it is defined, or when its `writes`
 * flags say the executor makes it (bit 1: an EMPTY, zero-filled).  The
 * states: absent (never seen), defined, freed.
 */
enum { S_DEFINED = 1, S_FREED = 2 };

typedef struct {
    FILE *out;
    int problems;
    const char *port;
} s_ctx_t;

__attribute__((format(printf, 2, 3))) static void s_flag(s_ctx_t *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(c->out, "problem: %s: ", c->port);
    vfprintf(c->out, fmt, ap);
    fprintf(c->out, "\n");
    va_end(ap);
    c->problems++;
}

/* Steps of a PLAN, in an array (the plan's records decoded once). */
static int s_steps(const ta_msg_t *m, ta_step_rec_t **out, size_t *n) {
    *n = m->as.plan.steps.n;
    *out = ta_calloc(*n ? *n : 1, sizeof **out);
    if (!*out) return TACT_ENOMEM;
    ta_recs_it_t it;
    ta_recs_begin(&it, &m->as.plan.steps);
    for (size_t k = 0; k < *n; k++)
        if (!ta_recs_next(&it, &(*out)[k])) return TACT_ECORRUPT;
    return TACT_OK;
}

static void s_plan(s_ctx_t *c, ta_map_t *state, const ta_msg_t *m, size_t rec) {
    ta_step_rec_t *steps;
    size_t n;
    if (s_steps(m, &steps, &n) != TACT_OK) {
        s_flag(c, "record %zu: PLAN of realize %" PRIu64 ": its steps do not decode", rec, m->as.plan.realize);
        ta_free(steps);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const ta_step_rec_t *s = &steps[k];
        uint64_t st = 0;
        if (s->copy == 2) { /* a receive defines its buffer */
            ta_map_put(state, s->bufs[0], S_DEFINED);
            continue;
        }
        /* What the step reads: a kernel's inputs, a send's buffer. */
        for (uint32_t i = s->copy == 1 ? 0 : 1; i < s->n_bufs; i++) {
            uint64_t b = s->bufs[i];
            int made = i < s->n_writes && (s->writes[i] & 2); /* an EMPTY the executor zero-fills */
            int have = ta_map_get(state, b, &st) && st == S_DEFINED;
            if (have || made) continue;
            /* A receive of it later in this plan: read before it arrives. */
            size_t later = 0;
            for (size_t j = k + 1; j < n && !later; j++)
                if (steps[j].copy == 2 && steps[j].bufs[0] == b) later = j;
            if (later)
                s_flag(c, "record %zu: realize %" PRIu64 ", step %zu reads buffer %" PRIu64 ", which arrives by the receive of step %zu after it", rec,
                       m->as.plan.realize, k, b, later);
            else if (st == S_FREED)
                s_flag(c, "record %zu: realize %" PRIu64 ", step %zu reads buffer %" PRIu64 ", which was freed", rec, m->as.plan.realize, k, b);
            else
                s_flag(c, "record %zu: realize %" PRIu64 ", step %zu reads buffer %" PRIu64 " before anything wrote it", rec, m->as.plan.realize, k, b);
        }
        if (s->copy == 1) continue;
        /* A reused buffer's memory becomes the output: nothing after may
         * read it under its own id. */
        if (s->reuse) {
            for (size_t j = k + 1; j < n; j++)
                for (uint32_t i = steps[j].copy == 1 ? 0 : 1; i < steps[j].n_bufs; i++)
                    if (steps[j].copy != 2 && steps[j].bufs[i] == s->reuse)
                        s_flag(c, "record %zu: realize %" PRIu64 ", step %zu reuses buffer %" PRIu64 " for its output while step %zu still reads it",
                               rec, m->as.plan.realize, k, s->reuse, j);
            ta_map_put(state, s->reuse, S_FREED);
        }
        if (s->n_bufs) ta_map_put(state, s->bufs[0], S_DEFINED);
        ta_u64s_it_t it;
        uint64_t b;
        ta_u64s_begin(&it, &s->frees);
        while (ta_u64s_next(&it, &b)) ta_map_put(state, b, S_FREED);
    }
    ta_free(steps);
}

int h_log_verify(const ta_log_t *log, FILE *out) {
    s_ctx_t c = {out, 0, NULL};
    int streams = 0;
    for (size_t i = 0; i < log->nstreams; i++) {
        const ta_log_stream_info_t *st = &log->streams[i];
        if (strcmp(st->name, "executor") != 0) continue;
        char port[64];
        snprintf(port, sizeof port, "executor (port %" PRIu32 ")", st->id);
        c.port = port;
        streams++;
        ta_map_t state = {0};
        for (size_t k = 0; k < st->nrecords; k++) {
            const ta_log_record_t *r = &st->records[k];
            ta_msg_t m;
            if (r->dir != TA_LOG_IN || ta_log_record_msg(r, &m, NULL) != TACT_OK) continue;
            if (m.type == TA_MSG_WRITE) ta_map_put(&state, m.as.write.buf, S_DEFINED);
            else if (m.type == TA_MSG_PLAN) s_plan(&c, &state, &m, k);
            else if (m.type == TA_MSG_FREE) {
                ta_u64s_it_t it;
                uint64_t b;
                ta_u64s_begin(&it, &m.as.free.bufs);
                while (ta_u64s_next(&it, &b)) ta_map_put(&state, b, S_FREED);
            }
        }
        ta_map_fini(&state);
    }
    fprintf(out, "deep check: %d executor stream%s, %d problem%s\n", streams, streams == 1 ? "" : "s", c.problems, c.problems == 1 ? "" : "s");
    return c.problems;
}
