/* cc.c - compiles kernels with the system C compiler into shared objects, cached on disk by content hash. */
#define _GNU_SOURCE /* memfd_create */
#include "cc.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"
#include "render.h"

/* -ffp-contract=off keeps a*b+c two roundings, as the reference and the
 * tests' plain C loops compute it; -fno-math-errno only lets sqrt inline. */
static const char s_flags[] = "-O3 -march=native -std=gnu11 -ffp-contract=off -fno-math-errno -fPIC -shared -w";

const char *ta_cc_flags(void) { return s_flags; }

enum { S_COMPILE_TIMEOUT_S = 300 };

const char *ta_cc_compiler(void) {
    const char *cc = getenv("TACT_CC");
    return cc && *cc ? cc : "cc";
}

const char *ta_cc_cache_dir(char *buf, size_t len) {
    const char *env = getenv("TACT_CACHE_DIR"), *home = getenv("HOME");
    if (env && *env) snprintf(buf, len, "%s", env);
    else if (home && *home) snprintf(buf, len, "%s/.cache/tact", home);
    else snprintf(buf, len, "/tmp/tact-cache");
    return buf;
}

/* Creates dir and its parents; returns 0 or -1. */
static int s_mkdirs(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
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

static double s_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int s_load(ta_program_t *p, ta_error_t *err) {
    p->dl = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) return ta_error_set(err, TACT_ECOMPILE, "kernel %s: cannot load %s: %s", p->name, p->path, dlerror());
    *(void **)&p->fn = dlsym(p->dl, p->name);
    if (!p->fn) {
        dlclose(p->dl);
        p->dl = NULL;
        return ta_error_set(err, TACT_ECOMPILE, "kernel %s: %s defines no function %s", p->name, p->path, p->name);
    }
    return TACT_OK;
}

/* The key and cache path of a kernel. */
static void s_locate(const char *cc, const char *dir, const char *name, const char *src, char key[33], char *path, size_t len) {
    /* The renderer's opening comment lists graph node ids, which differ
     * between graphs computing the same kernel: it is not part of the key. */
    const char *body = src;
    if (strncmp(body, "/*", 2) == 0 && strstr(body, "*/")) body = strstr(body, "*/") + 2;
    const char *parts[] = {cc, s_flags, ta_render_prelude(), body};
    s_key(parts, 4, key);
    snprintf(path, len, "%s/%s-%s.so", dir, name, key);
}

int ta_cc_build(const char *cc, const char *dir, const char *name, const char *src, ta_program_t *out, ta_error_t *err) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    s_locate(cc, dir, name, src, out->key, out->path, sizeof out->path);
    if (access(out->path, R_OK) == 0 && s_load(out, NULL) == TACT_OK) {
        out->cached = 1;
        return TACT_OK;
    }
    if (s_mkdirs(dir) != 0) return ta_error_set(err, TACT_EIO, "kernel %s: cannot create the cache folder %s: %s", name, dir, strerror(errno));
    /* Compile into private temporary names, then rename into place, so
     * concurrent compilers of the same kernel never see a partial file. */
    char csrc[1100], tmp_so[1100], cmd[4096];
    snprintf(csrc, sizeof csrc, "%s/tmp-%s-%ld-XXXXXX.c", dir, out->key, (long)getpid());
    int fd = mkstemps(csrc, 2);
    if (fd < 0) return ta_error_set(err, TACT_EIO, "kernel %s: cannot write into %s: %s", name, dir, strerror(errno));
    FILE *f = fdopen(fd, "w");
    int ok = f && fputs(ta_render_prelude(), f) >= 0 && fputs(src, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) {
        unlink(csrc);
        return ta_error_set(err, TACT_EIO, "kernel %s: cannot write %s", name, csrc);
    }
    snprintf(tmp_so, sizeof tmp_so, "%.*s.so", (int)(strlen(csrc) - 2), csrc);
    /* A compiler that hangs must not hang the pipeline: coreutils' timeout
     * ends it (status 124 reads as a compile failure). */
    snprintf(cmd, sizeof cmd, "timeout %d %s %s -o '%s' '%s' 2>&1", S_COMPILE_TIMEOUT_S, cc, s_flags, tmp_so, csrc);
    double t0 = s_ms();
    FILE *pipe = popen(cmd, "r");
    char msg[2048] = "";
    size_t used = 0;
    if (pipe) {
        size_t n;
        while ((n = fread(msg + used, 1, sizeof msg - 1 - used, pipe)) > 0) used += n;
        char sink[512];
        while (fread(sink, 1, sizeof sink, pipe) > 0) { /* drain what does not fit */ }
    }
    msg[used] = '\0';
    int status = pipe ? pclose(pipe) : -1;
    out->compile_ms = s_ms() - t0;
    unlink(csrc);
    if (status != 0) {
        unlink(tmp_so);
        return ta_error_set(err, TACT_ECOMPILE, "kernel %s failed to compile with `%s`: %s", name, cc,
                            used ? msg : "(no output; is the compiler installed?)");
    }
    if (rename(tmp_so, out->path) != 0) {
        int e = errno;
        unlink(tmp_so);
        return ta_error_set(err, TACT_EIO, "kernel %s: cannot move its object into %s: %s", name, dir, strerror(e));
    }
    return s_load(out, err);
}

int ta_cc_load(const char *path, const char *name, ta_program_t *out, ta_error_t *err) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->path, sizeof out->path, "%s", path);
    return s_load(out, err);
}

int ta_cc_read(const char *path, uint8_t **bytes, size_t *len, ta_error_t *err) {
    enum { S_MAX_OBJECT = 256 << 20 };
    *bytes = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
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
    /* Two independent 64-bit hashes, eight bytes at a time (objects are
     * tens of KiB and are checked on every load). */
    const unsigned char *p = bytes;
    uint64_t h1 = 0xcbf29ce484222325ull ^ len, h2 = 0x84222325cbf29ce4ull, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);
        h1 = (h1 ^ w) * 0xff51afd7ed558ccdull;
        h1 ^= h1 >> 29;
        h2 = (h2 + w) * 0xc4ceb9fe1a85ec53ull;
        h2 ^= h2 >> 31;
    }
    for (; i < len; i++) {
        h1 = (h1 ^ p[i]) * 0x100000001b3ull;
        h2 = (h2 ^ p[i]) * 0x9e3779b97f4a7c15ull;
    }
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

int ta_cc_load_bytes(const void *bytes, size_t len, const char *name, ta_program_t *out, ta_error_t *err) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return ta_error_set(err, TACT_ECOMPILE, "kernel %s: no memory file to load it from: %s", name, strerror(errno));
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)bytes + done, len - done);
        if (n <= 0) {
            close(fd);
            return ta_error_set(err, TACT_ECOMPILE, "kernel %s: cannot fill its memory file", name);
        }
        done += (size_t)n;
    }
    /* The fd stays open while the object is loaded: its /proc name must not
     * be reused by another object, which the loader would take for this one. */
    snprintf(out->path, sizeof out->path, "/proc/self/fd/%d", fd);
    out->memfd = fd + 1;
    int rc = s_load(out, err);
    if (rc != TACT_OK) {
        close(fd);
        out->memfd = 0;
    }
    return rc;
}

void ta_cc_unload(ta_program_t *p) {
    if (p->dl) dlclose(p->dl);
    if (p->memfd) close(p->memfd - 1);
    p->memfd = 0;
    p->dl = NULL;
    p->fn = NULL;
}
