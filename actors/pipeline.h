/* pipeline.h - the wiring of one context's actors: who talks to whom, by port id, and how each stage learns it. */
#ifndef TACT_PIPELINE_H
#define TACT_PIPELINE_H

#include <stdint.h>

#include "actor.h"

#include "device.h"

#define TA_MAX_COMPILERS 8

/* A realize's small targets (the loss a training loop reads every step)
 * come back with the executors' DONE: at most TA_RETURNS_MAX of at most
 * TA_RETURN_BYTES each (RUN.returns, DONE.returned). */
enum { TA_RETURN_BYTES = 64, TA_RETURNS_MAX = 16 };

/* One device of a context: its executor's port, its URI ("CPU:1", later
 * "tcp://host:5555/CUDA:0") and what it is (its DEVICE record: kind,
 * limits, the target its programs are built for). */
typedef struct ta_pipeline_device {
    uint32_t executor;
    char uri[TA_URI_MAX + 1];
    ta_device_info_t info;
} ta_pipeline_device_t;

/*
 * The wiring and settings of a context's pipeline.  The client fills it
 * once every actor has started and sends it to each stage as CONFIG; each
 * stage keeps its own copy (nothing here is shared between threads, and a
 * stage in another process gets the same message).  The devices are as
 * many as the context has (no fixed count): ta_pipeline_fini frees them.
 */
typedef struct ta_pipeline {
    uint32_t client;
    uint32_t graph;
    uint32_t scheduler;
    uint32_t planner;
    /* The devices, by index (a node's NODE.device): the first is the
     * context's default; device[i].executor runs device i and the
     * compilers build for its target. */
    ta_pipeline_device_t *device;
    int ndevices;
    uint32_t autograd;
    uint32_t compiler[TA_MAX_COMPILERS];
    int ncompilers;
    int schedule_cache; /* reuse schedules of identical subgraphs (TACT_SCHEDULE_CACHE=0: off) */
    char cc[512];       /* the kernel compiler command (TACT_CC when the context opened): objects depend on it */
    int strict;         /* strict determinism (tact_options.strict): tact's own log2 and sin, float64 ones refused */
    int self_device;    /* an executor's own index; -1 in other stages */
} ta_pipeline_t;

/* Frees w's devices (w itself is the caller's); safe on a zeroed one. */
void ta_pipeline_fini(ta_pipeline_t *w);

/* The device URIs joined by sep into out (cut to size). */
void ta_pipeline_device_list(const ta_pipeline_t *w, const char *sep, char *out, size_t size);

/* The index of the executor whose port is port, or -1. */
int ta_pipeline_device_of(const ta_pipeline_t *w, uint32_t port);

/* The URI of device i ("?" for an index out of range). */
const char *ta_pipeline_uri(const ta_pipeline_t *w, int i);

/*
 * What a stage takes from the process it runs in rather than from CONFIG:
 * settings that never change what it computes or sends (the CPU thread
 * count, debug printing, where this machine caches compiled kernels), so a
 * log is the same whatever they are (DESIGN.md §2).  Given to
 * ta_actor_start as the stage's arg and copied; NULL gives the defaults
 * (one thread, no printing, the default cache folder).
 */
typedef struct ta_stage_local {
    int cpu_threads;     /* 0: one per core */
    int debug;           /* TACT_DEBUG */
    int compile_limit_s; /* a compile running longer is killed (TACT_COMPILE_LIMIT_S, default 300) */
    char cache_dir[900]; /* the kernel cache folder (TACT_CACHE_DIR when the context opened) */
    int check_bounds;    /* guards around every buffer, checked after each kernel (TACT_CHECK_BOUNDS=1) */
} ta_stage_local_t;

/* Copies arg (a ta_stage_local_t, or NULL for the defaults) into *out. */
void ta_stage_local(const void *arg, ta_stage_local_t *out);

/* The stages, each with the one upstream actor whose stream gives it work
 * (its ordered input, actor.h): everything else it processes is a reply
 * it awaited. */
typedef enum ta_role {
    TA_ROLE_GRAPH,     /* upstream: the client */
    TA_ROLE_SCHEDULER, /* upstream: the graph */
    TA_ROLE_PLANNER,   /* upstream: the scheduler */
    TA_ROLE_COMPILER,  /* upstream: every executor (each asks for the programs it lacks) */
    TA_ROLE_EXECUTOR,  /* upstream: the graph */
    TA_ROLE_AUTOGRAD,  /* upstream: the graph */
} ta_role_t;

/* What a CONFIG message borrows: its arrays, freed by
 * ta_pipeline_msg_fini once the message is sent. */
typedef struct ta_pipeline_msg {
    uint64_t compilers[TA_MAX_COMPILERS];
    uint64_t *executors;
    ta_device_rec_t *devices;
    ta_target_rec_t *targets;
} ta_pipeline_msg_t;

/* Fills the CONFIG message m from w, one DEVICE record per device.
 * Returns TACT_OK or TACT_ENOMEM. */
int ta_pipeline_to_msg(const ta_pipeline_t *w, ta_msg_t *m, ta_pipeline_msg_t *store);
void ta_pipeline_msg_fini(ta_pipeline_msg_t *store);

/*
 * From a stage's handler, on CONFIG: checks m, copies it into *w and makes
 * the role's upstream the actor's ordered input.  A second CONFIG is
 * refused (configured says whether one was taken).  Returns TACT_OK, or
 * the error (text set with ta_actor_fail) for the runtime to reply; the
 * stage answers the CONFIG with ta_pipeline_ack once its own set-up is done.
 */
int ta_pipeline_configure(ta_actor_t *self, const ta_msg_t *m, ta_pipeline_t *w, int *configured, ta_role_t role);
int ta_pipeline_ack(ta_actor_t *self, const ta_msg_t *m);

/* The stages (each file documents its messages). */
extern const ta_actor_ops_t ta_graph_ops;     /* graph/builder.c */
extern const ta_actor_ops_t ta_scheduler_ops; /* actors/scheduler/scheduler.c */
extern const ta_actor_ops_t ta_planner_ops;   /* actors/scheduler/planner.c */
extern const ta_actor_ops_t ta_compiler_ops;  /* codegen/compiler.c */
extern const ta_actor_ops_t ta_executor_ops;  /* actors/device/executor.c */
extern const ta_actor_ops_t ta_autograd_ops;  /* actors/autograd/autograd.c */

#endif
