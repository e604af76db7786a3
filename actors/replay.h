/* replay.h - stage replay: re-drive one actor from its recorded inbox and check its outbox. */
#ifndef TACT_REPLAY_H
#define TACT_REPLAY_H

#include "actor.h"
#include "log.h"

typedef struct ta_replay_report {
    uint64_t in_count;  /* recorded messages fed to the actor */
    uint64_t out_count; /* messages it sent that matched the recording */
    int diverged;
    uint64_t out_index;  /* index (from 0) of the first divergent sent message */
    uint64_t in_index;   /* index of the inbox message being processed then */
    char field[64];      /* first differing field, "missing" or "extra" */
    char expected[320];  /* the recorded message, formatted */
    char actual[320];    /* what the actor sent, formatted */
} ta_replay_report_t;

/*
 * Builds a fresh actor from ops/arg (as ta_actor_start would, without a
 * thread or sockets), feeds it the messages recorded as processed by port id
 * in their recorded order, and compares every message it sends with the
 * recorded ones, field by field.  Returns TACT_OK if the outbox matches,
 * TACT_EMISMATCH with rep describing the first divergence, TACT_ENOTFOUND if
 * the log has no stream for id, or the actor's init error.
 */
int ta_replay_actor(const ta_log_t *log, uint32_t id, const ta_actor_ops_t *ops, void *arg, ta_replay_report_t *rep,
                    ta_error_t *err);
/* The same, each inbox message first passed to filter(m, ud), which may
 * change it (a replay puts the user's settings where the recording's
 * would be obeyed: the compiler command of a CONFIG). */
typedef void (*ta_replay_filter_fn)(ta_msg_t *m, void *ud);
int ta_replay_actor_filtered(const ta_log_t *log, uint32_t id, const ta_actor_ops_t *ops, void *arg, ta_replay_filter_fn filter, void *ud,
                             ta_replay_report_t *rep, ta_error_t *err);

/* Re-drives port id's recorded inbox (each message through filter, if
 * not NULL) and gives every message the actor sends to sent instead of
 * comparing it: a stage replayed for what it makes (the compilers'
 * programs for an executor's replay).  *in_count: messages fed. */
int ta_replay_actor_run(const ta_log_t *log, uint32_t id, const ta_actor_ops_t *ops, void *arg, ta_replay_filter_fn filter, void *fud,
                        ta_capture_fn sent, void *sud, uint64_t *in_count, ta_error_t *err);

/*
 * An actor without a thread or sockets, for driving a stage directly (stage
 * tests, fuzzing): built from ops/arg under port id, its sends go to
 * capture (which may be NULL to drop them).  ta_stage_new returns NULL if
 * init fails (its text in err) or on ENOMEM; ta_stage_dispatch processes one
 * message as the actor loop would (handler, then an ERROR reply on
 * failure); ta_stage_destroy runs fini and frees it, setting *a to NULL.
 */
ta_actor_t *ta_stage_new(const ta_actor_ops_t *ops, void *arg, uint32_t id, ta_capture_fn capture, void *ud, ta_error_t *err);
void ta_stage_dispatch(ta_actor_t *a, ta_msg_t *m);
void ta_stage_destroy(ta_actor_t **a);

#endif
