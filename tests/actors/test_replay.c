/* test_replay.c - stage replay: a recorded actor replays byte for byte; a changed one is caught. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "actor.h"
#include "builtin.h"
#include "replay.h"
#include "testutil.h"

/* Records n ECHO requests with seeded data, then DATA and EOS, against the echo actor. */
static char *s_record(int n, uint64_t seed) {
    char *path = tu_tmpfile("replay");
    ta_rt_t *rt = tu_rt(TA_TRANSPORT_INPROC, 3000, path);
    ta_port_t *port;
    ta_actor_t *echo;
    ta_error_t err;
    cr_assert_eq(ta_port_new(rt, "client", &port, &err), TACT_OK);
    cr_assert_eq(ta_actor_start(rt, &ta_echo_ops, NULL, NULL, &echo, &err), TACT_OK);
    uint64_t rng = seed;
    for (int i = 0; i < n + 2; i++) {
        uint8_t data[32];
        for (size_t k = 0; k < sizeof data; k++) data[k] = (uint8_t)tu_rand(&rng);
        ta_msg_t m, r;
        ta_msg_init(&m, i < n ? TA_MSG_ECHO : i == n ? TA_MSG_DATA : TA_MSG_EOS);
        ta_msg_init(&r, TA_MSG_READY);
        m.as.echo.data.ptr = data;
        m.as.echo.data.len = sizeof data;
        int rc = m.type == TA_MSG_DATA ? ta_port_send(port, ta_actor_id(echo), &m, &err)
                                       : ta_port_request(port, ta_actor_id(echo), &m, &r, -1, &err);
        cr_assert_eq(rc, TACT_OK, "%s", err.text);
        ta_msg_release(&r);
    }
    cr_assert_eq(ta_actor_stop(&echo, &err), TACT_OK);
    ta_port_destroy(&port);
    cr_assert_eq(ta_rt_destroy(&rt, &err), TACT_OK);
    return path;
}

static ta_log_t *s_load(const char *path) {
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    return log;
}

Test(actors_replay, the_recorded_actor_replays_identically) {
    char *path = s_record(25, tu_seed());
    ta_log_t *log = s_load(path);
    ta_replay_report_t rep;
    ta_error_t err;
    cr_assert_eq(ta_replay_actor(log, 2, &ta_echo_ops, NULL, &rep, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(rep.in_count, 27);
    cr_assert_eq(rep.out_count, 26, "25 ECHO_REPLY and one TOTAL");
    cr_assert_eq(rep.diverged, 0);
    cr_assert_eq(ta_replay_actor(log, 9, &ta_echo_ops, NULL, &rep, &err), TACT_ENOTFOUND);
    ta_log_free(&log);
    unlink(path);
    free(path);
}

/* The echo actor with a "bug": the 11th reply has its data's last byte changed. */
static int s_calls;
static int s_buggy_handle(ta_actor_t *self, ta_msg_t *m) {
    if (m->type == TA_MSG_ECHO && ++s_calls == 11) {
        uint8_t data[64];
        size_t n = m->as.echo.data.len;
        memcpy(data, m->as.echo.data.ptr, n);
        data[n - 1] ^= 1;
        ta_msg_t out;
        ta_msg_init(&out, TA_MSG_ECHO_REPLY);
        out.as.echo_reply.data.ptr = data;
        out.as.echo_reply.data.len = n;
        return ta_actor_reply(self, m, &out);
    }
    return ta_echo_ops.handle(self, m);
}

Test(actors_replay, a_changed_actor_is_caught_at_the_first_divergent_field) {
    char *path = s_record(25, tu_seed());
    ta_log_t *log = s_load(path);
    ta_actor_ops_t buggy = ta_echo_ops;
    buggy.handle = s_buggy_handle;
    ta_replay_report_t rep;
    ta_error_t err;
    cr_assert_eq(ta_replay_actor(log, 2, &buggy, NULL, &rep, &err), TACT_EMISMATCH);
    cr_assert_eq(rep.diverged, 1);
    cr_assert_eq(rep.out_index, 10);
    cr_assert_eq(rep.in_index, 10);
    cr_assert_str_eq(rep.field, "payload.data");
    cr_assert(strstr(err.text, "sent message 10"), "%s", err.text);
    cr_assert(strstr(err.text, "differs in payload.data"), "%s", err.text);
    ta_log_free(&log);
    unlink(path);
    free(path);
}

/* An echo actor that forgets to answer the 5th request, and one that answers twice. */
static int s_n;
static int s_forgetful_handle(ta_actor_t *self, ta_msg_t *m) {
    if (m->type == TA_MSG_ECHO && ++s_n == 5) return TACT_OK;
    return ta_echo_ops.handle(self, m);
}
static int s_chatty_handle(ta_actor_t *self, ta_msg_t *m) {
    if (m->type == TA_MSG_ECHO && ++s_n == 7) ta_echo_ops.handle(self, m);
    return ta_echo_ops.handle(self, m);
}

Test(actors_replay, missing_and_extra_messages_are_reported) {
    char *path = s_record(10, tu_seed());
    ta_log_t *log = s_load(path);
    ta_actor_ops_t ops = ta_echo_ops;
    ta_replay_report_t rep;
    ta_error_t err;
    ops.handle = s_forgetful_handle;
    s_n = 0;
    cr_assert_eq(ta_replay_actor(log, 2, &ops, NULL, &rep, &err), TACT_EMISMATCH);
    cr_assert_str_eq(rep.field, "missing");
    cr_assert_eq(rep.out_index, 4);
    ops.handle = s_chatty_handle;
    s_n = 0;
    cr_assert_eq(ta_replay_actor(log, 2, &ops, NULL, &rep, &err), TACT_EMISMATCH);
    cr_assert_str_eq(rep.field, "extra");
    cr_assert_eq(rep.out_index, 7);
    ta_log_free(&log);
    unlink(path);
    free(path);
}
