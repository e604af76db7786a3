/* rerun.h - whole-run replay: a recorded run's client stream driven through a fresh pipeline, every stage checked against the recording. */
#ifndef TACT_RERUN_H
#define TACT_RERUN_H

#include <stddef.h>
#include <stdio.h>

#include "log.h"
#include "runtime.h"
#include "tact.h"

/* tact_ctx_open with the kernel compiler and the schedule cache given
 * instead of read from TACT_CC and TACT_SCHEDULE_CACHE (a replay takes
 * the schedule cache from the log). */
int ta_ctx_open_as(tact_ctx **out, const tact_options *opts, const char *cc, int schedule_cache);

/* The client's port and timeout, for the replay driver (graph/client.c). */
ta_port_t *ta_ctx_port(tact_ctx *ctx);
int ta_ctx_timeout_ms(const tact_ctx *ctx);

/*
 * What the replaying user chose: the devices (NULL or "": TACT_DEVICE,
 * else "CPU"), CPU threads (0: one per core) and the timeout (0: 60000
 * ms); the kernel compiler is TACT_CC's, as for any context.  None of it
 * comes from the log.
 */
typedef struct ta_rerun_options {
    const char *devices;
    int cpu_threads;
    int timeout_ms;
    const char *keep_log; /* the replay's own log is kept at this path (NULL: a temporary file, removed) */
} ta_rerun_options_t;

/*
 * Runs the program recorded in log_path again, with no user program: opens
 * a fresh in-process pipeline with the user's settings (opt, may be NULL)
 * and the recording's pipeline shape (compile workers, schedule cache,
 * range-checked), sends it every message the recorded client sent, in
 * order (waiting for the answer where the client waited), records the new
 * run to a temporary log and compares every port's records with the
 * recording (ta_log_compare).  Nothing in the log is executed: its
 * compiler, threads, timeout and devices are shown on notes (when not
 * NULL) beside the replay's own; a log recorded on other devices is
 * refused (TACT_EINVAL, naming both lists), and a different compiler is
 * noted in the verdict.  The transport of the recording does not matter:
 * a run recorded over ipc or tcp replays in-process.  Returns TACT_OK with
 * a one-line verdict in verdict, TACT_EMISMATCH with the first divergent
 * stage, record, message and field, or the error that stopped the replay
 * (an unreadable log, a context that does not open).
 */
int ta_rerun(const char *log_path, const ta_rerun_options_t *opt, FILE *notes, char *verdict, size_t len);

#endif
