/* cc.c - compiles kernels with the system C compiler into shared objects, cached on disk by content hash. */
#define _GNU_SOURCE
#include "cc.h"

#include <ftw.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device.h"
#include "file.h"
#include "hash.h"
#include "mem.h"
#include "render.h"

/* -ffp-contract=off keeps a*b+c two roundings, as the reference and the
 * tests' plain C loops compute it; -fno-math-errno only lets sqrt inline.
 * The quick tier differs in the optimization level only: neither level
 * reassociates or contracts float operations, so both compute the same
 * bits (tests/codegen/test_tiers.c checks). */
static const char *const s_flags[2] = {
    "-O3 -march=native -std=gnu11 -ffp-contract=off -fno-math-errno -fPIC -shared -nostdlib -pipe -w",
    "-Og -march=native -std=gnu11 -ffp-contract=off -fno-math-errno -fPIC -shared -nostdlib -pipe -w",
};

const char *ta_cc_flags(int tier) { return s_flags[tier == TA_CC_QUICK]; }

const char *ta_cc_compiler(void) {
    const char *cc = getenv("TACT_CC");
    return cc && *cc ? cc : "cc";
}

const char *ta_cc_cache_dir(char *buf, size_t len) {
    const char *env = getenv("TACT_CACHE_DIR"), *home = getenv("HOME");
    if (env && *env) snprintf(buf, len, "%s", env);
    else if (home && *home) snprintf(buf, len, "%s/.cache/tact", home);
    else snprintf(buf, len, "/tmp/tact-cache-%ld", (long)geteuid()); /* one per user, never shared */
    return buf;
}

/* Two independent 64-bit FNV-1a style hashes over the parts, as 32 hex digits. */
static void s_key(const char *const *parts, int n, char key[33]) {
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    for (int i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)parts[i]; *p; p++) {
            h1 = (h1 ^ *p) * 0x100000001b3ull;
            h2 = (h2 ^ *p) * 0x9e3779b97f4a7c15ull;
            h2 ^= h2 >> 29;
        }
        h1 = (h1 ^ 0xff) * 0x100000001b3ull; /* part separator */
        h2 = (h2 ^ 0xff) * 0x9e3779b97f4a7c15ull;
    }
    snprintf(key, 33, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

/* Creates dir and its parents (the last one private); returns 0 or -1. */
static int s_mkdirs(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int ta_cc_check_dir(const char *dir, ta_error_t *err) {
    if (s_mkdirs(dir) != 0) return ta_error_set(err, TACT_EIO, "cannot create the kernel cache folder %s: %s", dir, strerror(errno));
    struct stat st;
    if (lstat(dir, &st) != 0) return ta_error_set(err, TACT_EIO, "kernel cache folder %s: %s", dir, strerror(errno));
    /* Whatever sits in the folder is loaded into this process: only its
     * owner may be able to write there. */
    if (!S_ISDIR(st.st_mode)) return ta_error_set(err, TACT_EIO, "kernel cache folder %s is not a folder (a link?); refusing it", dir);
    if (st.st_uid != geteuid())
        return ta_error_set(err, TACT_EIO, "kernel cache folder %s belongs to user %ld, not to this process's user %ld; refusing it", dir,
                            (long)st.st_uid, (long)geteuid());
    if (st.st_mode & 022)
        return ta_error_set(err, TACT_EIO, "kernel cache folder %s can be written by other users (mode %o); refusing it (chmod 700)", dir,
                            (unsigned)(st.st_mode & 0777));
    return TACT_OK;
}

/* The identities probed so far, by compiler command (a process meets
 * few): a list whose nodes live as long as the process and never move, so
 * an identity found stays valid without the lock. */
typedef struct s_known {
    struct s_known *next;
    char cc[512];
    char identity[33];
} s_known_t;
static pthread_mutex_t s_known_lock = PTHREAD_MUTEX_INITIALIZER;
static s_known_t *s_known;

static const char *s_known_find(const char *cc) {
    pthread_mutex_lock(&s_known_lock);
    const s_known_t *k = s_known;
    while (k && strcmp(k->cc, cc) != 0) k = k->next;
    pthread_mutex_unlock(&s_known_lock);
    return k ? k->identity : NULL;
}

static int s_spawn(ta_cc_job_t *job, const char *cmd, const char *cwd, int background);
static bool s_step(ta_cc_job_t *job, int wait_ms);
static void s_discard(ta_cc_job_t *job);
static double s_ms(void);

int ta_cc_probe(const char *cc, int limit_s, ta_error_t *err) {
    if (s_known_find(cc)) return TACT_OK;
    /* What the objects depend on beyond the source: the compiler's version
     * (the first line of its --version) and, since the flags say
     * -march=native, the CPU's features.  The compiler runs as a compile
     * does, in a group of its own, killed when it outlasts the limit. */
    ta_cc_job_t job;
    memset(&job, 0, sizeof job);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cc);
    if (s_spawn(&job, cmd, NULL, 0) != 0) return ta_error_set(err, TACT_ECOMPILE, "the kernel compiler `%s`: %s", cc, job.msg);
    double t0 = s_ms();
    while (!s_step(&job, 50))
        if (s_ms() - t0 > limit_s * 1000.0) {
            s_discard(&job);
            return ta_error_set(err, TACT_ECOMPILE, "the kernel compiler `%s` did not answer --version within %d s (TACT_COMPILE_LIMIT_S); stopped",
                                cc, limit_s);
        }
    s_discard(&job);
    job.msg[job.used] = '\0';
    char version[512] = "", cpu[4096] = "";
    snprintf(version, sizeof version, "%.*s", (int)strcspn(job.msg, "\n"), job.msg);
    /* A compiler that does not answer (not installed, say) is not kept:
     * its compiles will say why, and once it is there it is probed again. */
    if (!version[0]) return TACT_OK;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0 || strncmp(line, "model name", 10) == 0 || strncmp(line, "Features", 8) == 0)
            strncat(cpu, line, sizeof cpu - strlen(cpu) - 1);
    if (f) fclose(f);
    /* Process-lifetime memory, outside the allocator hook (as static
     * storage would be). */
    s_known_t *k = calloc(1, sizeof *k);
    if (!k) return ta_error_set(err, TACT_ENOMEM, "out of memory");
    snprintf(k->cc, sizeof k->cc, "%s", cc);
    const char *parts[] = {version, cpu};
    s_key(parts, 2, k->identity);
    pthread_mutex_lock(&s_known_lock);
    k->next = s_known;
    s_known = k; /* a twin probed meanwhile is harmless: both say the same */
    pthread_mutex_unlock(&s_known_lock);
    return TACT_OK;
}

const char *ta_cc_identity(const char *cc) {
    const char *id = s_known_find(cc);
    /* A context probed its compiler when it opened; a direct caller (a
     * test) that did not, or a compiler that did not answer then, is
     * probed here, with the default limit.  One that still does not
     * answer builds nothing anyway: its compile fails, naming it. */
    if (!id && ta_cc_probe(cc, 300, NULL) == TACT_OK) id = s_known_find(cc);
    return id ? id : "unknown-compiler";
}

static double s_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The key and cache path of a kernel. */
static void s_locate(const char *cc, const char *dir, const char *name, const char *src, int tier, char key[33], char *path, size_t len) {
    /* The renderer's opening comment lists graph node ids, which differ
     * between graphs computing the same kernel: it is not part of the key. */
    const char *body = src;
    if (strncmp(body, "/*", 2) == 0 && strstr(body, "*/")) body = strstr(body, "*/") + 2;
    const char *parts[] = {cc, ta_cc_identity(cc), ta_cc_flags(tier), ta_render_prelude(), body};
    s_key(parts, 5, key);
    snprintf(path, len, "%s/%s-%s.so", dir, name, key);
}

/* The digest file beside a cached file: its path with .sum for its extension. */
static void s_sum_path(const char *so, char *out, size_t len) {
    const char *dot = strrchr(so, '.'), *slash = strrchr(so, '/');
    size_t keep = dot && (!slash || dot > slash) ? (size_t)(dot - so) : strlen(so);
    snprintf(out, len, "%.*s.sum", (int)keep, so);
}

/* Reads a cached object and its digest file; true when both are there and
 * agree.  A damaged or planted file is never loaded: it does not match. */
static bool s_cached(const char *so, uint8_t **obj, size_t *len, char digest[33]) {
    char sum[1100], want[40] = "";
    s_sum_path(so, sum, sizeof sum);
    FILE *f = ta_file_fopen(sum, 0, 0, "kernel cache", NULL);
    if (!f) return false;
    size_t n = fread(want, 1, 32, f);
    fclose(f);
    want[n] = '\0';
    if (n != 32 || ta_cc_read(so, obj, len, NULL) != TACT_OK) return false;
    ta_cc_digest(*obj, *len, digest);
    if (strcmp(digest, want) == 0) return true;
    ta_free(*obj);
    *obj = NULL;
    return false;
}

/* Writes the digest file of an object through a temporary name in the
 * compile's private folder (two compilers of one process may finish the
 * same kernel at once: a name of the process alone would collide). */
static int s_write_sum(const char *so, const char *digest, const char *tmpdir) {
    char sum[1100], tmp[1200];
    s_sum_path(so, sum, sizeof sum);
    snprintf(tmp, sizeof tmp, "%s/k.sum", tmpdir);
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(digest, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, sum) == 0) return 0;
    unlink(tmp);
    return -1;
}

enum { S_CANCELLED = -1000, S_TOO_LONG = -1001 };

/*
 * Starts cmd through the shell, in cwd when not NULL (a compile's private
 * folder, which is also its TMPDIR: the temporary files the compiler
 * makes there go with the folder, even when it is killed), in a process
 * group of its own (niced to the lowest priority in the background, so it
 * takes only time nothing else wants), its output going to the job's pipe.
 * Returns 0, or -1 with the reason in the job's msg.
 */
static int s_spawn(ta_cc_job_t *job, const char *cmd, const char *cwd, int background) {
    extern char **environ;
    size_t n = 0;
    while (environ[n]) n++;
    char **env = ta_malloc(sizeof *env * (n + 2)), tmpdir[1200];
    if (!env) {
        snprintf(job->msg, sizeof job->msg, "out of memory");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!cwd || strncmp(environ[i], "TMPDIR=", 7) != 0) env[k++] = environ[i];
    /* TMPDIR absolute: the child runs inside cwd, where a relative one
     * (a relative TACT_CACHE_DIR) would name nothing and the compiler would
     * fall back to /tmp. */
    char abs[PATH_MAX];
    if (cwd) snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", realpath(cwd, abs) ? abs : cwd), env[k++] = tmpdir;
    env[k] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(job->msg, sizeof job->msg, "no pipe for the compiler's output: %s", strerror(errno));
        ta_free(env);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (cwd) posix_spawn_file_actions_addchdir_np(&fa, cwd);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid;
    char *argv[] = {(char *)"sh", (char *)"-c", (char *)cmd, NULL};
    int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ta_free(env);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        snprintf(job->msg, sizeof job->msg, "cannot run /bin/sh: %s", strerror(rc));
        return -1;
    }
    /* The group (the shell and whatever it started; what they start later
     * inherits it) at the lowest priority. */
    if (background) setpriority(PRIO_PGRP, (id_t)pid, 19);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    job->pid = pid;
    job->fd = fds[0];
    job->t0 = s_ms();
    job->used = 0;
    job->exited = job->eof = 0;
    job->status = -1;
    return 0;
}

/* Takes what the running compiler wrote (waiting at most wait_ms for
 * some) and reaps it once it exited; true when both are done. */
static bool s_step(ta_cc_job_t *job, int wait_ms) {
    if (!job->eof) {
        struct pollfd pfd = {job->fd, POLLIN, 0};
        if (poll(&pfd, 1, wait_ms) > 0) {
            char buf[512];
            ssize_t n;
            while ((n = read(job->fd, buf, sizeof buf)) > 0)
                for (ssize_t i = 0; i < n && job->used + 1 < sizeof job->msg; i++) job->msg[job->used++] = buf[i];
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) job->eof = 1;
        }
    } else if (!job->exited && wait_ms > 0) {
        struct timespec ts = {0, 1000 * 1000}; /* the output ended: the compiler is exiting */
        nanosleep(&ts, NULL);
    }
    if (!job->exited) {
        int status;
        pid_t w = waitpid(job->pid, &status, WNOHANG);
        /* ECHILD: the host ignores SIGCHLD, so the status is gone; the
         * object (or its absence) tells what happened. */
        if (w == job->pid || (w < 0 && errno == ECHILD)) {
            job->status = w < 0 ? 0 : status;
            job->exited = 1;
            /* Whatever the shell left behind still holding the output
             * goes with it, so the pipe ends. */
            kill(-job->pid, SIGKILL);
        }
    }
    return job->exited && job->eof;
}

static int s_remove(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    if (type == FTW_DP) rmdir(path);
    else unlink(path);
    return 0;
}

/* Kills the job's compiler (its whole group) and removes its files. */
static void s_discard(ta_cc_job_t *job) {
    if (job->pid) {
        if (!job->exited) {
            kill(-job->pid, SIGKILL);
            waitpid(job->pid, NULL, 0);
        }
        close(job->fd);
        job->pid = 0;
    }
    if (job->tmpdir[0]) {
        /* Everything in the folder, depth first: the source, the object,
         * and whatever a killed compiler left (its TMPDIR is the folder).
         * nftw walks without recursion of ours and never follows a link. */
        nftw(job->tmpdir, s_remove, 8, FTW_DEPTH | FTW_PHYS);
        job->tmpdir[0] = '\0';
    }
}

int ta_cc_start(const char *cc, const char *dir, const char *name, const char *src, int tier, int background, ta_cc_job_t *job,
                ta_error_t *err) {
    memset(job, 0, sizeof *job);
    job->tier = tier;
    snprintf(job->cc, sizeof job->cc, "%s", cc);
    snprintf(job->prog.name, sizeof job->prog.name, "%s", name);
    s_locate(cc, dir, name, src, tier, job->prog.key, job->prog.path, sizeof job->prog.path);
    if (s_cached(job->prog.path, &job->obj, &job->len, job->digest)) {
        job->prog.cached = 1;
        return TACT_OK;
    }
    if (s_mkdirs(dir) != 0) return ta_error_set(err, TACT_EIO, "kernel %s: cannot create the cache folder %s: %s", name, dir, strerror(errno));
    /* Compile in a private temporary folder, then rename into place, so
     * concurrent compilers of the same kernel never see a partial file.
     * The source is always k.c there, compiled from inside the folder: the
     * object records that name, so its bytes depend only on the compiler
     * and the source (two runs send the same PROGRAM bytes). */
    char csrc[1200];
    snprintf(job->tmpdir, sizeof job->tmpdir, "%s/tmp-%s-XXXXXX", dir, job->prog.key);
    if (!mkdtemp(job->tmpdir)) {
        job->tmpdir[0] = '\0';
        return ta_error_set(err, TACT_EIO, "kernel %s: cannot write into %s: %s", name, dir, strerror(errno));
    }
    snprintf(csrc, sizeof csrc, "%s/k.c", job->tmpdir);
    FILE *f = fopen(csrc, "w");
    int ok = f && fputs(ta_render_prelude(), f) >= 0 && fputs(src, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) {
        s_discard(job);
        return ta_error_set(err, TACT_EIO, "kernel %s: cannot write %s", name, csrc);
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s %s -o k.so k.c 2>&1", cc, ta_cc_flags(job->tier));
    if (s_spawn(job, cmd, job->tmpdir, background) != 0) {
        int rc = ta_error_set(err, TACT_ECOMPILE, "kernel %s: %s", name, job->msg);
        s_discard(job);
        return rc;
    }
    return TACT_OK;
}

bool ta_cc_ready(ta_cc_job_t *job) { return !job->pid || s_step(job, 0); }

double ta_cc_elapsed_s(const ta_cc_job_t *job) { return job->pid ? (s_ms() - job->t0) * 1e-3 : 0; }

void ta_cc_restart_clock(ta_cc_job_t *job) { job->t0 = s_ms(); }

void ta_cc_cancel(ta_cc_job_t *job) {
    s_discard(job);
    ta_free(job->obj);
    job->obj = NULL;
}

int ta_cc_finish(ta_cc_job_t *job, ta_program_t *out, uint8_t **obj, size_t *obj_len, char digest[33], int limit_s, ta_cc_tick_fn tick,
                 void *ud, ta_error_t *err) {
    const char *name = job->prog.name;
    *out = job->prog;
    *obj = job->obj;
    *obj_len = job->len;
    memcpy(digest, job->digest, 33);
    job->obj = NULL;
    if (out->cached) return TACT_OK;
    int verdict = 0;
    while (!s_step(job, 50)) {
        if (tick && tick(ud)) verdict = S_CANCELLED;
        else if (s_ms() - job->t0 > limit_s * 1000.0) verdict = S_TOO_LONG;
        if (verdict) break;
    }
    out->compile_ms = s_ms() - job->t0;
    job->msg[job->used] = '\0';
    int status = verdict ? verdict : WIFEXITED(job->status) ? WEXITSTATUS(job->status) : 128 + (WIFSIGNALED(job->status) ? WTERMSIG(job->status) : 0);
    char tmp_so[1200];
    snprintf(tmp_so, sizeof tmp_so, "%s/k.so", job->tmpdir);
    int rc = TACT_OK;
    if (status == S_CANCELLED) rc = ta_error_set(err, TACT_ESTOPPED, "kernel %s: compile cancelled (the context is closing)", name);
    else if (status == S_TOO_LONG) rc = ta_error_set(err, TACT_ECOMPILE, "kernel %s: `%s` took longer than %d s; stopped", name, job->cc, limit_s);
    else if (status != 0)
        rc = ta_error_set(err, TACT_ECOMPILE, "kernel %s failed to compile with `%s`: %s", name, job->cc,
                          job->msg[0] ? job->msg : "(no output; is the compiler installed?)");
    /* Proved by loading it (from its bytes), then kept with its digest. */
    else if (access(tmp_so, F_OK) != 0)
        rc = ta_error_set(err, TACT_ECOMPILE, "kernel %s: the compiler `%s` exited 0 but wrote no object%s%s", name, job->cc, job->msg[0] ? ": " : "", job->msg);
    else rc = ta_cc_read(tmp_so, obj, obj_len, err);
    if (rc == TACT_OK) {
        ta_cc_digest(*obj, *obj_len, digest);
        ta_cpu_kernel_t probe; /* as the CPU device will load it */
        rc = ta_cpu_kernel_load(*obj, *obj_len, name, &probe, err);
        ta_cpu_kernel_unload(&probe);
    }
    if (rc == TACT_OK && rename(tmp_so, out->path) != 0)
        rc = ta_error_set(err, TACT_EIO, "kernel %s: cannot move its object into its cache folder: %s", name, strerror(errno));
    if (rc == TACT_OK && s_write_sum(out->path, digest, job->tmpdir) != 0)
        rc = ta_error_set(err, TACT_EIO, "kernel %s: cannot write its digest into its cache folder", name);
    s_discard(job);
    if (rc != TACT_OK) {
        ta_free(*obj);
        *obj = NULL;
        *obj_len = 0;
    }
    return rc;
}

int ta_cc_build(const char *cc, const char *dir, const char *name, const char *src, int tier, ta_program_t *out, uint8_t **obj,
                size_t *obj_len, char digest[33], int limit_s, ta_cc_tick_fn tick, void *ud, ta_error_t *err) {
    ta_cc_job_t job;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    *obj = NULL;
    *obj_len = 0;
    int rc = ta_cc_start(cc, dir, name, src, tier, 0, &job, err);
    return rc != TACT_OK ? rc : ta_cc_finish(&job, out, obj, obj_len, digest, limit_s, tick, ud, err);
}

int ta_cc_cache_get(const char *path, uint8_t **bytes, size_t *len) {
    char digest[33];
    *bytes = NULL;
    *len = 0;
    return s_cached(path, bytes, len, digest) ? TACT_OK : TACT_ENOTFOUND;
}

int ta_cc_cache_put(const char *dir, const char *path, const void *bytes, size_t len) {
    if (s_mkdirs(dir) != 0) return TACT_EIO;
    char tmpdir[1100], tmp[1200], digest[33];
    snprintf(tmpdir, sizeof tmpdir, "%s/tmp-put-XXXXXX", dir);
    if (!mkdtemp(tmpdir)) return TACT_EIO;
    snprintf(tmp, sizeof tmp, "%s/k.bin", tmpdir);
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(bytes, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    ta_cc_digest(bytes, len, digest);
    /* The file first, then its digest: a reader never sees a digest whose
     * file is not complete. */
    ok = ok && rename(tmp, path) == 0 && s_write_sum(path, digest, tmpdir) == 0;
    unlink(tmp);
    rmdir(tmpdir);
    return ok ? TACT_OK : TACT_EIO;
}

int ta_cc_read(const char *path, uint8_t **bytes, size_t *len, ta_error_t *err) {
    enum { S_MAX_OBJECT = 256 << 20 };
    *bytes = NULL;
    *len = 0;
    FILE *f = ta_file_fopen(path, 0, 0, "kernel cache", NULL); /* a regular file: a FIFO planted there is not waited on */
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || st.st_size <= 0 || st.st_size > S_MAX_OBJECT) {
        if (f) fclose(f);
        return ta_error_set(err, TACT_EIO, "cannot read the kernel object %s", path);
    }
    uint8_t *p = ta_malloc((size_t)st.st_size);
    size_t got = p ? fread(p, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!p || got != (size_t)st.st_size) {
        ta_free(p);
        return ta_error_set(err, p ? TACT_EIO : TACT_ENOMEM, "cannot read the kernel object %s", path);
    }
    *bytes = p;
    *len = got;
    return TACT_OK;
}

void ta_cc_digest(const void *bytes, size_t len, char hex[33]) {
    uint64_t h[2];
    ta_hash128(bytes, len, h);
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
}
