/* cc.h - compiling rendered C kernels with the system compiler into shared objects, cached on disk. */
#ifndef TACT_CC_H
#define TACT_CC_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

/* What a build made: the kernel's name, its shared object in the cache
 * folder, and the key it is cached by.  Building is codegen's; loading a
 * program is the device's (actors/device/cpu.c, ta_cpu_kernel_load). */
typedef struct ta_program {
    char name[64];
    char path[1024]; /* the shared object */
    char key[33];    /* hex hash of compiler, flags and source */
    double compile_ms; /* 0 when the object came from the disk cache */
    int cached;
} ta_program_t;

/* The compiler command (TACT_CC, default "cc"), and the cache folder
 * (TACT_CACHE_DIR, default $HOME/.cache/tact, else /tmp/tact-cache) written
 * into buf, which is returned.  A context reads both once, when it opens
 * (ta_pipeline_t), and hands them to every compile. */
const char *ta_cc_compiler(void);
const char *ta_cc_cache_dir(char *buf, size_t len);
/* The two builds of a CPU kernel: a quick one (-Og) for its first use, in
 * a fraction of the time, and the full one (-O3) for every use after.
 * Both compute the same bits. */
enum { TA_CC_FULL = 0, TA_CC_QUICK = 1 };
/* A kernel of this many iterations or more is built full at once: at -Og
 * the slowest kernels run about ten times slower than at -O3, and below
 * this the time lost stays under what the full build would delay. */
#define TA_CC_QUICK_MAX_WORK (UINT64_C(1) << 28)
/* The flags of a tier's builds. */
const char *ta_cc_flags(int tier);

/* Creates the cache folder dir if needed (mode 0700) and checks that only
 * this process's user can write there: a folder owned by another user,
 * writable by others, or not a folder is refused with TACT_EIO naming it. */
int ta_cc_check_dir(const char *dir, ta_error_t *err);

/* Finds what compiled objects depend on besides their source: the
 * compiler's version (the first line of `cc --version`) and the CPU's
 * features (-march=native), kept for the process by compiler command.  The
 * command runs like a compile (a process group of its own, killed after
 * limit_s seconds), so a compiler that hangs is an error, never a stage
 * that blocks: a context probes its compiler when it opens.  Returns
 * TACT_OK (also for a compiler that fails to run: its compiles will say
 * why), TACT_ECOMPILE when it did not answer in time, or TACT_ENOMEM. */
int ta_cc_probe(const char *cc, int limit_s, ta_error_t *err);
/* The probed identity of cc as 32 hex digits (probing it now, with a
 * limit of 300 s, if nobody did). */
const char *ta_cc_identity(const char *cc);

/*
 * Compiles the prelude plus src (which defines the function name) with the
 * compiler command cc into a shared object in the folder dir, or finds it
 * there under a key hashed from the compiler, its identity, the flags and
 * the source.  A cached object is used only when its bytes match the digest
 * stored beside it (a damaged or planted file is rebuilt and replaced, never
 * loaded); a new one is proved by loading it from its bytes.  Returns
 * TACT_OK with out's name, key, path and cached filled and the object's
 * bytes in *obj (the caller frees them with ta_free) with their digest, or
 * TACT_ECOMPILE with the kernel's name and the compiler's message in err
 * (TACT_EIO when the cache folder is unusable).  The compiler runs in a
 * process group of its own; tick (may be NULL) is called every 50 ms while
 * it runs, and when it returns nonzero the group is killed and TACT_ESTOPPED
 * returned; a compile running longer than limit_s seconds is killed too
 * (TACT_ECOMPILE).  The compile runs in a private folder which is also its
 * TMPDIR; no temporary file outlives the call, even a killed compiler's.
 */
typedef int (*ta_cc_tick_fn)(void *ud);
int ta_cc_build(const char *cc, const char *dir, const char *name, const char *src, int tier, ta_program_t *out, uint8_t **obj,
                size_t *obj_len, char digest[33], int limit_s, ta_cc_tick_fn tick, void *ud, ta_error_t *err);

/*
 * ta_cc_build in two halves, so a build can run while its caller does
 * other work.  ta_cc_start finds the object in the cache or starts the
 * compiler (in the background: its process group at the lowest CPU
 * priority), filling job;
 * TACT_OK, or the error with nothing left running.  ta_cc_ready is true
 * once ta_cc_finish would not wait (it never waits itself).  ta_cc_finish
 * waits for the compiler as ta_cc_build does (limit_s counts from the
 * start) and gives what ta_cc_build gives; the job is spent then.
 * ta_cc_cancel kills a started job's compiler and removes its files.
 */
typedef struct ta_cc_job {
    ta_program_t prog; /* name, key, path; cached when found on disk */
    int tier;
    char cc[512];
    uint8_t *obj; /* a cached object's bytes, until finish hands them over */
    size_t len;
    char digest[33];
    char tmpdir[1100]; /* the private folder of a running compile ("" when none) */
    int pid, fd;       /* the compiler's process group and output (pid 0: none) */
    double t0;
    int exited, eof, status;
    size_t used;
    char msg[2048]; /* its output so far */
} ta_cc_job_t;
int ta_cc_start(const char *cc, const char *dir, const char *name, const char *src, int tier, int background, ta_cc_job_t *job,
                ta_error_t *err);
bool ta_cc_ready(ta_cc_job_t *job);
/* Seconds since the job's compiler started (0 when none runs), and a
 * fresh start for its time limit. */
double ta_cc_elapsed_s(const ta_cc_job_t *job);
void ta_cc_restart_clock(ta_cc_job_t *job);
int ta_cc_finish(ta_cc_job_t *job, ta_program_t *out, uint8_t **obj, size_t *obj_len, char digest[33], int limit_s, ta_cc_tick_fn tick,
                 void *ud, ta_error_t *err);
void ta_cc_cancel(ta_cc_job_t *job);

/* Reads the whole object at path (at most 256 MiB) into a fresh buffer
 * that the caller frees with ta_free.  Returns TACT_OK or TACT_EIO. */
int ta_cc_read(const char *path, uint8_t **bytes, size_t *len, ta_error_t *err);

/* The cache's checked files for any bytes (the CL device keeps program
 * binaries there): ta_cc_cache_get reads path when it and its digest file
 * (path with .sum for its extension) exist and agree, giving TACT_OK and
 * the bytes (ta_malloc'd); otherwise TACT_ENOTFOUND (a damaged or planted
 * file is never used).  ta_cc_cache_put writes bytes to path (in dir)
 * through a private temporary file, then its digest: TACT_OK or TACT_EIO. */
int ta_cc_cache_get(const char *path, uint8_t **bytes, size_t *len);
int ta_cc_cache_put(const char *dir, const char *path, const void *bytes, size_t len);

/* The digest of an object's bytes (32 hex digits), which PROGRAM carries
 * beside them so a receiver can check what it is about to load. */
void ta_cc_digest(const void *bytes, size_t len, char hex[33]);

#endif
