/* rerun.h - whole-run replay: a recorded run's client stream driven through a fresh pipeline, every stage checked against the recording. */
#ifndef TACT_RERUN_H
#define TACT_RERUN_H

#include <stddef.h>

#include "log.h"
#include "runtime.h"
#include "tact.h"

/* tact_ctx_open with the kernel compiler and the schedule cache given
 * instead of read from TACT_CC and TACT_SCHEDULE_CACHE (a replay takes
 * them from the log). */
int ta_ctx_open_as(tact_ctx **out, const tact_options *opts, const char *cc, int schedule_cache);

/* The client's port and timeout, for the replay driver (graph/client.c). */
ta_port_t *ta_ctx_port(tact_ctx *ctx);
int ta_ctx_timeout_ms(const tact_ctx *ctx);

/*
 * Runs the program recorded in log_path again, with no user program: opens
 * a fresh in-process pipeline with the options of the log's run header
 * (threads, compile workers, timeout, compiler, schedule cache), sends it
 * every message the recorded client sent, in order (waiting for the answer
 * where the client waited), records the new run to a temporary log and
 * compares every port's records with the recording (ta_log_compare).
 * The transport of the recording does not matter: a run recorded over ipc
 * or tcp replays in-process.  Returns TACT_OK with a one-line verdict in
 * verdict, TACT_EMISMATCH with the first divergent stage, record, message
 * and field, or the error that stopped the replay (an unreadable log, a
 * context that does not open).
 */
int ta_rerun(const char *log_path, char *verdict, size_t len);

#endif
