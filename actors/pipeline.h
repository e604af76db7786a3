/* pipeline.h - the wiring of one context's actors: who talks to whom, by port id. */
#ifndef TACT_PIPELINE_H
#define TACT_PIPELINE_H

#include <stdint.h>

#include "actor.h"

#define TA_MAX_COMPILERS 8

/*
 * Every stage gets a pointer to this at start.  The owner fills all ids
 * before the first message is sent, and nothing changes afterwards, so the
 * stages read it without locks (a message send/receive orders the writes
 * before the reads).
 */
typedef struct ta_pipeline {
    uint32_t client;
    uint32_t graph;
    uint32_t scheduler;
    uint32_t planner;
    uint32_t executor;
    uint32_t compiler[TA_MAX_COMPILERS];
    int ncompilers;
    int cpu_threads;
    int debug;          /* TACT_DEBUG */
    int schedule_cache; /* reuse schedules of identical subgraphs (TACT_SCHEDULE_CACHE=0: off) */
    char cc[512];        /* the kernel compiler command (TACT_CC when the context opened) */
    char cache_dir[900]; /* the kernel cache folder (TACT_CACHE_DIR when it opened) */
} ta_pipeline_t;

/* The stages (each file documents its messages). */
extern const ta_actor_ops_t ta_graph_ops;     /* graph/builder.c */
extern const ta_actor_ops_t ta_scheduler_ops; /* actors/scheduler/scheduler.c */
extern const ta_actor_ops_t ta_planner_ops;   /* actors/scheduler/planner.c */
extern const ta_actor_ops_t ta_compiler_ops;  /* codegen/compiler.c */
extern const ta_actor_ops_t ta_executor_ops;  /* actors/device/executor.c */

#endif
