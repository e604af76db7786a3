/* builtin.c - the echo actor. */
#include "builtin.h"

#include <stdint.h>

#include "mem.h"

typedef struct {
    uint64_t count, bytes;
} s_echo_t;

static int s_echo_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    (void)arg;
    s_echo_t *st = ta_calloc(1, sizeof *st);
    if (!st) return ta_error_set(err, TACT_ENOMEM, "echo: out of memory");
    ta_actor_set_state(self, st);
    return TACT_OK;
}

static void s_echo_fini(ta_actor_t *self) { ta_free(ta_actor_state(self)); }

static int s_echo_handle(ta_actor_t *self, ta_msg_t *m) {
    s_echo_t *st = ta_actor_state(self);
    ta_msg_t out;
    switch (m->type) {
    case TA_MSG_ECHO:
        ta_msg_init(&out, TA_MSG_ECHO_REPLY);
        out.as.echo_reply.data = m->as.echo.data;
        out.bulk = m->bulk;
        return ta_actor_reply(self, m, &out);
    case TA_MSG_DATA:
        st->count++;
        st->bytes += m->as.data.data.len + m->bulk.len;
        return TACT_OK;
    case TA_MSG_EOS:
        ta_msg_init(&out, TA_MSG_TOTAL);
        out.as.total.count = st->count;
        out.as.total.sum = (double)st->bytes;
        st->count = st->bytes = 0;
        return ta_actor_reply(self, m, &out);
    default:
        return ta_actor_fail(self, TACT_EINVAL, "echo: cannot handle %s", ta_msg_type_name(m->type));
    }
}

const ta_actor_ops_t ta_echo_ops = {"echo", s_echo_init, s_echo_handle, s_echo_fini, NULL};
