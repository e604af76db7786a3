/* fuzz_stages.c - libFuzzer target: the pipeline's stages (graph, scheduler, planner, executor, gradient engine) fed arbitrary messages. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device.h"
#include "mem.h"
#include "pipeline.h"
#include "replay.h"

/* The input: one byte choosing the stage, then a message envelope.  The
 * stages live across inputs (so state built by one input meets the next)
 * and start afresh every 1000 inputs. */
static ta_pipeline_t s_wiring;
enum { S_NSTAGES = 5 };
static ta_actor_t *s_stages[S_NSTAGES];
static const ta_actor_ops_t *const s_ops[S_NSTAGES] = {&ta_graph_ops, &ta_scheduler_ops, &ta_planner_ops, &ta_executor_ops, &ta_autograd_ops};
static const uint32_t s_ids[S_NSTAGES] = {2, 3, 4, 7, 8};
static long s_runs;
static int s_refused; /* an ERROR a stage sent while being configured */

static int s_capture(void *ud, const ta_msg_t *m) {
    (void)ud;
    if (m->type == TA_MSG_ERROR) s_refused = 1;
    return TACT_OK;
}

static void s_restart(void) {
    for (int i = 0; i < S_NSTAGES; i++) ta_stage_destroy(&s_stages[i]);
    /* Two devices, so records naming device 1 and copies between them are
     * taken too (the second executor, port 9, is not started). */
    ta_pipeline_fini(&s_wiring);
    s_wiring = (ta_pipeline_t){.client = 1, .graph = 2, .scheduler = 3, .planner = 4, .autograd = 8, .ncompilers = 2, .schedule_cache = 1,
                               .self_device = -1};
    s_wiring.compiler[0] = 5, s_wiring.compiler[1] = 6;
    static const uint32_t executors[2] = {7, 9};
    if (!(s_wiring.device = ta_calloc(2, sizeof *s_wiring.device))) __builtin_trap();
    s_wiring.ndevices = 2;
    for (int i = 0; i < 2; i++) {
        ta_error_t err;
        snprintf(s_wiring.device[i].uri, sizeof s_wiring.device[i].uri, i ? "CPU:1" : "CPU");
        if (ta_device_describe(s_wiring.device[i].uri, &s_wiring.device[i].info, &err) != TACT_OK) __builtin_trap();
        s_wiring.device[i].executor = executors[i];
    }
    for (int i = 0; i < S_NSTAGES; i++) {
        ta_error_t err;
        s_stages[i] = ta_stage_new(s_ops[i], NULL, s_ids[i], s_capture, NULL, &err);
        if (!s_stages[i]) __builtin_trap();
        /* Configured as a context configures them, so inputs reach their work. */
        ta_msg_t cfg;
        ta_pipeline_msg_t store;
        if (ta_pipeline_to_msg(&s_wiring, &cfg, &store) != TACT_OK) __builtin_trap();
        cfg.sender = 1;
        /* A stage that refuses its CONFIG would refuse every input: the
         * fuzzer would test nothing. */
        s_refused = 0;
        ta_stage_dispatch(s_stages[i], &cfg);
        ta_pipeline_msg_fini(&store);
        if (s_refused) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (s_runs++ % 1000 == 0) s_restart();
    if (size < 2) return 0;
    ta_msg_t m;
    uint64_t bulk_len;
    ta_error_t err;
    ta_msg_init(&m, TA_MSG_EOS);
    if (ta_msg_decode(&m, data + 1, size - 1, 0, &bulk_len, &err) != TACT_OK) return 0;
    static const uint8_t zeros[1 << 16];
    if (bulk_len > sizeof zeros) return 0;
    m.bulk.ptr = zeros;
    m.bulk.len = bulk_len;
    ta_stage_dispatch(s_stages[data[0] % S_NSTAGES], &m);
    return 0;
}
