/* fuzz_stages.c - libFuzzer target: the pipeline's stages (graph, scheduler, planner, executor) fed arbitrary messages. */
#include <stddef.h>
#include <stdint.h>

#include "pipeline.h"
#include "replay.h"

/* The input: one byte choosing the stage, then a message envelope.  The
 * stages live across inputs (so state built by one input meets the next)
 * and start afresh every 1000 inputs. */
static ta_pipeline_t s_wiring;
static ta_actor_t *s_stages[4];
static const ta_actor_ops_t *const s_ops[4] = {&ta_graph_ops, &ta_scheduler_ops, &ta_planner_ops, &ta_executor_ops};
static const uint32_t s_ids[4] = {2, 3, 4, 7};
static long s_runs;

static void s_restart(void) {
    for (int i = 0; i < 4; i++) ta_stage_destroy(&s_stages[i]);
    s_wiring = (ta_pipeline_t){.client = 1, .graph = 2, .scheduler = 3, .planner = 4, .executor = 7, .ncompilers = 2,
                               .schedule_cache = 1};
    s_wiring.compiler[0] = 5, s_wiring.compiler[1] = 6;
    for (int i = 0; i < 4; i++) {
        ta_error_t err;
        s_stages[i] = ta_stage_new(s_ops[i], NULL, s_ids[i], NULL, NULL, &err);
        if (!s_stages[i]) __builtin_trap();
        /* Configured as a context configures them, so inputs reach their work. */
        ta_msg_t cfg;
        uint64_t compilers[TA_MAX_COMPILERS];
        ta_pipeline_to_msg(&s_wiring, &cfg, compilers);
        cfg.sender = 1;
        ta_stage_dispatch(s_stages[i], &cfg);
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
    ta_stage_dispatch(s_stages[data[0] % 4], &m);
    return 0;
}
