/* testutil.h - helpers shared by the Criterion suites: seeds, runtimes on each transport. */
#ifndef TACT_TESTUTIL_H
#define TACT_TESTUTIL_H

#include <stdint.h>

#include "actor.h"
#include "runtime.h"

/* The seed for this test's random inputs: TACT_SEED from the environment, or
 * a fixed default.  Print it in every failure message. */
uint64_t tu_seed(void);

/* xorshift64* over *state. */
uint64_t tu_rand(uint64_t *state);

/* A compiler for the contexts opened next: dir/cc.sh holds the shell
 * script (printf-style fmt) and TACT_CC runs it, with a fresh kernel cache
 * in dir/cache (TACT_CACHE_DIR).  The test unsets both when done. */
__attribute__((format(printf, 2, 3))) void tu_fake_cc(const char *dir, const char *fmt, ...);

/* Calls fn(m, ud) for each message of type that stream (a port's name,
 * "client", "scheduler", ...) sent in the log at path; returns how many. */
int tu_log_sent(const char *path, const char *stream, int type, void (*fn)(const ta_msg_t *m, void *ud), void *ud);

/* A runtime with the defaults, the given transport and timeout; aborts the
 * test (cr_assert) on failure. */
ta_rt_t *tu_rt(ta_transport_t transport, int timeout_ms, const char *log_path);

/* Fills rec, a record of type, with seeded random values within the
 * schema's bounds (every array at most its cap, nested lists of up to 3
 * records, MP fields valid msgpack).  Storage for nested lists and arrays
 * comes from a static arena that tu_rec_reset empties. */
void tu_rec_random(ta_rec_type_t type, void *rec, uint64_t *rng);
/* A list of 0 to 3 random records of type, from the arena. */
ta_recs_t tu_recs_random(ta_rec_type_t type, uint64_t *rng);
void tu_rec_reset(void);

/* Points m's bulk at a copy of it (*copy, the caller's to free) with one
 * bit flipped in its middle: an object that no longer matches its digest. */
void tu_spoil_bulk(ta_msg_t *m, uint8_t **copy);

/* Replays the recorded inbox of stage `name` (ops) from the log at path
 * (the stream on port `port`, or the first of that name when port is 0),
 * the first message of type `type` (with a bulk frame if `bulk`) changed
 * by change; its sends go to capture(ud).  Removes the log; fails the test
 * if the log has no such stream or message. */
void tu_replay_stage_changed(char *path, const char *name, const ta_actor_ops_t *ops, uint32_t port, int type, int bulk,
                             void (*change)(ta_msg_t *m, uint8_t **copy), ta_capture_fn capture, void *ud);
/* The same for the executor. */
void tu_replay_executor_changed(char *path, uint32_t port, int type, int bulk, void (*change)(ta_msg_t *m, uint8_t **copy),
                                ta_capture_fn capture, void *ud);

/* A wiring of the given ports (client 1, graph 2, scheduler 3, planner 4,
 * compilers 5.., autograd 8) over n local devices "CPU", "CPU:1", ... with
 * executors at the given ports, each described as a context describes it;
 * ta_pipeline_fini frees it. */
struct ta_pipeline;
void tu_wiring(struct ta_pipeline *w, int ncompilers, int n, const uint32_t *executors);

/* Whether a device whose name starts with prefix ("CPU", "CL") is present
 * (tact_devices); "CPU" always is. */
int tu_have_device(const char *prefix);

/* A fresh temporary file path (the file exists, empty); caller frees with free(). */
char *tu_tmpfile(const char *tag);

/* The window of the golden files' int parameters p (gen_api_golden.py's
 * layout): groups, stride (2), dilation (2), npad, padding (4),
 * count_include_pad, kernel (2). */
#include "tact.h"
void tu_window(const int64_t *p, tact_window *w);

/* A counting allocator (tact_set_allocator(tu_counting, NULL)): the live
 * bytes of tact's allocations are in tu_live_bytes (read atomically). */
extern long tu_live_bytes;
void *tu_counting(void *ud, void *ptr, size_t old_size, size_t size);

#endif
