/* nvrtc.c - NVRTC through dlopen: the few entry points tact calls, found once per process. */
#include "nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "tact.h"

/* NVRTC's C API (nvrtc.h), as far as tact uses it: results are ints, 0 success. */
typedef struct s_prog *s_prog_t;
typedef struct {
    int (*version)(int *major, int *minor);
    const char *(*error_string)(int result);
    int (*create)(s_prog_t *prog, const char *src, const char *name, int nheaders, const char *const *headers, const char *const *names);
    int (*destroy)(s_prog_t *prog);
    int (*compile)(s_prog_t prog, int nopts, const char *const *opts);
    int (*log_size)(s_prog_t prog, size_t *size);
    int (*log)(s_prog_t prog, char *log);
    int (*ptx_size)(s_prog_t prog, size_t *size);
    int (*ptx)(s_prog_t prog, char *ptx);
    int (*cubin_size)(s_prog_t prog, size_t *size);
    int (*cubin)(s_prog_t prog, char *cubin);
    int major, minor;
    char why[200]; /* why it is missing, when it is */
} s_nvrtc_t;

static s_nvrtc_t s_api;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void s_load(void) {
    const char *env = getenv("TACT_NVRTC");
    const char *names[] = {env && *env ? env : NULL, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    void *dl = NULL;
    const char *tried = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !dl; i++)
        if (names[i]) {
            dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
            if (!tried) tried = names[i];
            if (i == 0 && !dl) break; /* a path the user named is the one to use */
        }
    if (!dl) {
        if (env && *env) snprintf(s_api.why, sizeof s_api.why, "no NVRTC (TACT_NVRTC=%.120s cannot be loaded)", env);
        else snprintf(s_api.why, sizeof s_api.why, "no NVRTC (libnvrtc.so.13 or .12 not found; set TACT_NVRTC to its path)");
        return;
    }
    s_nvrtc_t a = {0};
#define S_SYM(field, sym) *(void **)&a.field = dlsym(dl, sym)
    S_SYM(version, "nvrtcVersion");
    S_SYM(error_string, "nvrtcGetErrorString");
    S_SYM(create, "nvrtcCreateProgram");
    S_SYM(destroy, "nvrtcDestroyProgram");
    S_SYM(compile, "nvrtcCompileProgram");
    S_SYM(log_size, "nvrtcGetProgramLogSize");
    S_SYM(log, "nvrtcGetProgramLog");
    S_SYM(ptx_size, "nvrtcGetPTXSize");
    S_SYM(ptx, "nvrtcGetPTX");
    S_SYM(cubin_size, "nvrtcGetCUBINSize");
    S_SYM(cubin, "nvrtcGetCUBIN");
#undef S_SYM
    if (!a.version || !a.error_string || !a.create || !a.destroy || !a.compile || !a.log_size || !a.log || !a.ptx_size || !a.ptx ||
        !a.cubin_size || !a.cubin || a.version(&a.major, &a.minor) != 0) {
        snprintf(s_api.why, sizeof s_api.why, "no NVRTC (%.120s lacks the NVRTC entry points tact needs)", tried ? tried : "the library");
        dlclose(dl);
        return;
    }
    s_api = a;
}

static const s_nvrtc_t *s_get(ta_error_t *err) {
    pthread_once(&s_once, s_load);
    if (!s_api.compile) {
        ta_error_set(err, TACT_EDEVICE, "%s", s_api.why);
        return NULL;
    }
    return &s_api;
}

int ta_nvrtc_version(int *major, int *minor, ta_error_t *err) {
    const s_nvrtc_t *a = s_get(err);
    if (!a) return TACT_EDEVICE;
    *major = a->major, *minor = a->minor;
    return TACT_OK;
}

int ta_nvrtc_compile(const char *src, const char *name, int arch, int cubin, uint8_t **out, size_t *len, ta_error_t *err) {
    *out = NULL, *len = 0;
    const s_nvrtc_t *a = s_get(err);
    if (!a) return TACT_EDEVICE;
    if (arch < 10 || arch > 999) return ta_error_set(err, TACT_EDEVICE, "NVRTC: compute capability %d.%d is not one", arch / 10, arch % 10);
    char gpu[64];
    snprintf(gpu, sizeof gpu, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", arch);
    const char *opts[] = {gpu, "--device-as-default-execution-space", "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false",
                          "-w"};
    s_prog_t p = NULL;
    int r = a->create(&p, src, name, 0, NULL, NULL);
    if (r != 0) return ta_error_set(err, TACT_ENOMEM, "NVRTC: cannot create a program for %s: %s", name, a->error_string(r));
    int rc = TACT_OK;
    r = a->compile(p, (int)(sizeof opts / sizeof *opts), opts);
    if (r != 0) {
        size_t n = 0;
        char *log = a->log_size(p, &n) == 0 && n ? ta_malloc(n + 1) : NULL;
        if (log && a->log(p, log) == 0) log[n] = '\0';
        else if (log) log[0] = '\0';
        /* An architecture NVRTC lacks is the device's problem, not the kernel's. */
        int arch_bad = log && strstr(log, "invalid value for --gpu-architecture");
        rc = ta_error_set(err, arch_bad ? TACT_EDEVICE : TACT_ECOMPILE, "NVRTC %d.%d (%s_%d): %s: %s", a->major, a->minor, cubin ? "sm" : "compute",
                          arch, name, log && *log ? log : a->error_string(r));
        ta_free(log);
    } else {
        size_t n = 0;
        r = cubin ? a->cubin_size(p, &n) : a->ptx_size(p, &n);
        uint8_t *bytes = r == 0 && n ? ta_malloc(n + 1) : NULL;
        if (!bytes) rc = ta_error_set(err, TACT_ENOMEM, "NVRTC: out of memory for %s's %s", name, cubin ? "cubin" : "PTX");
        else if ((cubin ? a->cubin(p, (char *)bytes) : a->ptx(p, (char *)bytes)) != 0) {
            ta_free(bytes);
            rc = ta_error_set(err, TACT_ECOMPILE, "NVRTC: %s: cannot read the %s", name, cubin ? "cubin" : "PTX");
        } else {
            bytes[n] = '\0';
            *out = bytes;
            *len = cubin ? n : strlen((char *)bytes);
        }
    }
    a->destroy(&p);
    return rc;
}
