/* test_oom.c - allocation failures injected through the allocator hook, step by step (as libuv's loop_init_oom). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "actor.h"
#include "builtin.h"
#include "testutil.h"

static long s_budget; /* allocations left before failing; < 0: unlimited */
static long s_live;   /* blocks allocated through the hook and not freed */

static void *s_alloc(void *ud, void *ptr, size_t old, size_t size) {
    (void)ud;
    (void)old;
    if (size == 0) {
        if (ptr) __atomic_sub_fetch(&s_live, 1, __ATOMIC_SEQ_CST);
        free(ptr);
        return NULL;
    }
    if (__atomic_load_n(&s_budget, __ATOMIC_SEQ_CST) >= 0 && __atomic_fetch_sub(&s_budget, 1, __ATOMIC_SEQ_CST) <= 0)
        return NULL;
    void *p = realloc(ptr, size);
    if (p && !ptr) __atomic_add_fetch(&s_live, 1, __ATOMIC_SEQ_CST);
    return p;
}

/* One whole life: runtime (recording), port, echo actor, one echo, stop.
 * Returns TACT_OK when every step succeeded, else the first error. */
static int s_life(const char *log_path) {
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    cfg.timeout_ms = 300;
    cfg.log_path = log_path;
    ta_rt_t *rt;
    ta_port_t *port = NULL;
    ta_actor_t *echo = NULL;
    ta_error_t err = {0, ""};
    int rc = ta_rt_new(&rt, &cfg, &err);
    if (rc != TACT_OK) {
        cr_assert_null(rt);
        cr_assert(strlen(err.text) > 0, "an error always has a text");
        return rc;
    }
    rc = ta_port_new(rt, "client", &port, &err);
    if (rc == TACT_OK) rc = ta_actor_start(rt, &ta_echo_ops, NULL, NULL, &echo, &err);
    if (rc == TACT_OK) {
        ta_msg_t m, r;
        ta_msg_init(&m, TA_MSG_ECHO);
        ta_msg_init(&r, TA_MSG_READY);
        m.as.echo.data = ta_bytes_str("ping");
        rc = ta_port_request(port, ta_actor_id(echo), &m, &r, -1, &err);
        if (rc == TACT_OK) cr_assert(r.as.echo_reply.data.len == 4 && memcmp(r.as.echo_reply.data.ptr, "ping", 4) == 0);
        ta_msg_release(&r);
    }
    if (rc != TACT_OK) cr_assert(strlen(err.text) > 0, "an error always has a text (%s)", tact_status_name(rc));
    int stop = ta_actor_stop(&echo, &err);
    cr_assert_eq(stop, TACT_OK, "stop works whatever failed before: %s", err.text);
    ta_port_destroy(&port);
    int done = ta_rt_destroy(&rt, &err);
    return rc != TACT_OK ? rc : done;
}

Test(actors_oom, every_allocation_failure_is_an_error_not_a_crash) {
    char *path = tu_tmpfile("oom");
    tact_set_allocator(s_alloc, NULL);
    long limit;
    int rc = TACT_ENOMEM, failures = 0;
    for (limit = 0; limit < 400; limit++) {
        __atomic_store_n(&s_budget, limit, __ATOMIC_SEQ_CST);
        rc = s_life(path);
        cr_assert_eq(__atomic_load_n(&s_live, __ATOMIC_SEQ_CST), 0, "limit %ld: %ld blocks leaked", limit, s_live);
        if (rc == TACT_OK) break;
        cr_assert(rc == TACT_ENOMEM || rc == TACT_ETIMEDOUT || rc == TACT_EIO, "limit %ld: unexpected %s", limit,
                  tact_status_name(rc));
        failures++;
    }
    cr_assert_eq(rc, TACT_OK, "a life succeeds once enough memory is allowed");
    cr_log_info("succeeded at limit %ld after %d failures", limit, failures);
    cr_assert_gt(failures, 5, "the failures were really injected (%d)", failures);
    __atomic_store_n(&s_budget, -1, __ATOMIC_SEQ_CST);
    tact_set_allocator(NULL, NULL);
    cr_assert_eq(s_life(path), TACT_OK);
    unlink(path);
    free(path);
}
