/* test_device.c - the device interface, the same checks on every device present (CPU, and CL on PoCL): copies, a launch with arguments, sentinels past the output, errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cc.h"
#include "device.h"
#include "mem.h"
#include "tact.h"
#include "testutil.h"

/* out[i] = a[i] * s + b[i] for the n outputs, align 4 outputs per work
 * item; s travels as a float's bits in args[0]. */
static const char s_cpu_src[] =
    "void k(int64_t start, int64_t end, void **restrict bufs, const uint64_t *restrict args) {\n"
    "  float *o = bufs[0]; const float *a = bufs[1], *b = bufs[2];\n"
    "  uint32_t w = (uint32_t)args[0]; float s; memcpy(&s, &w, 4);\n"
    "  for (int64_t i = start; i < end; i++) o[i] = a[i] * s + b[i];\n"
    "}\n";
static const char s_cl_src[] =
    "__kernel void k(__global float *o, __global const float *a, __global const float *b, __global const ulong *args, long n) {\n"
    "  long i0 = (long)get_global_id(0) * 4;\n"
    "  float s = as_float((uint)args[0]);\n"
    "  for (long i = i0; i < i0 + 4 && i < n; i++) o[i] = a[i] * s + b[i];\n"
    "}\n";

/* The program bytes of the kernel above for a device kind (the CPU's built
 * by the system compiler into a private cache folder). */
static uint8_t *s_program(const ta_device_ops_t *ops, const char *name, const char *cpu_src, const char *cl_src, size_t *len) {
    if (ops == &ta_cl_device) {
        *len = strlen(cl_src);
        uint8_t *p = malloc(*len);
        memcpy(p, cl_src, *len);
        return p;
    }
    char *dir = tu_tmpfile("devcache");
    unlink(dir);
    ta_program_t prog;
    uint8_t *obj = NULL;
    char digest[33];
    ta_error_t err;
    cr_assert_eq(ta_cc_build(ta_cc_compiler(), dir, name, cpu_src, TA_CC_FULL, &prog, &obj, len, digest, 60, NULL, NULL, &err), TACT_OK, "%s", err.text);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
    uint8_t *p = malloc(*len);
    memcpy(p, obj, *len);
    ta_free(obj);
    return p;
}

static void s_conformance(const ta_device_ops_t *ops, int index) {
    enum { N = 1000, PAD = 64 };
    const uint32_t sentinel = 0x7fc00badu; /* a NaN no kernel computes */
    ta_error_t err = {0, ""};
    ta_device_t *dev;
    cr_assert_eq(ops->open(&dev, index, &(ta_device_options_t){2, 0, NULL}, &err), TACT_OK, "%s:%d: %s", ops->kind, index, err.text);
    void *o, *a, *b, *empty;
    cr_assert_eq(ops->alloc(dev, (N + PAD) * 4, &o, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->alloc(dev, N * 4, &a, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->alloc(dev, N * 4, &b, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->alloc(dev, 0, &empty, &err), TACT_OK, "a buffer of 0 bytes: %s", err.text);
    static float ha[N], hb[N];
    static uint32_t ho[N + PAD];
    for (int i = 0; i < N; i++) ha[i] = (float)i * 0.5f, hb[i] = 1.0f - (float)i;
    for (int i = 0; i < N + PAD; i++) ho[i] = sentinel;
    cr_assert_eq(ops->copy_in(dev, a, ha, sizeof ha, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->copy_in(dev, b, hb, sizeof hb, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->copy_in(dev, o, ho, sizeof ho, &err), TACT_OK, "%s", err.text);
    size_t len;
    uint8_t *bytes = s_program(ops, "k", s_cpu_src, s_cl_src, &len);
    void *prog;
    cr_assert_eq(ops->load(dev, bytes, len, "k", &prog, &err), TACT_OK, "%s:%d: %s", ops->kind, index, err.text);
    float s = 3.0f;
    uint32_t sw;
    memcpy(&sw, &s, 4);
    uint64_t args[1] = {sw};
    void *bufs[3] = {o, a, b};
    ta_launch_t l = {bufs, 3, args, 1, N, 4, N};
    cr_assert_eq(ops->launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
    ta_launch_t none = {bufs, 3, args, 1, 0, 4, 0};
    cr_assert_eq(ops->launch(dev, prog, &none, &err), TACT_OK, "a launch over no outputs: %s", err.text);
    cr_assert_eq(ops->sync(dev, NULL, NULL, &err), TACT_OK, "%s", err.text);
    memset(ho, 0, sizeof ho);
    cr_assert_eq(ops->copy_out(dev, ho, o, sizeof ho, &err), TACT_OK, "%s", err.text);
    for (int i = 0; i < N; i++) {
        float got;
        memcpy(&got, &ho[i], 4);
        double want = (double)ha[i] * 3.0 + (double)hb[i]; /* exact in float here */
        cr_assert_eq((double)got, want, "%s:%d: output %d is %g, want %g", ops->kind, index, i, (double)got, want);
    }
    for (int i = N; i < N + PAD; i++) cr_assert_eq(ho[i], sentinel, "%s:%d: the kernel wrote past its output, at %d", ops->kind, index, i);
    /* The queue's order: a copy in after a launch does not change what the
     * launch reads, and a copy out after it sees what it wrote (no sync). */
    s = -2.0f;
    memcpy(&sw, &s, 4);
    args[0] = sw;
    cr_assert_eq(ops->launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
    static float later[N];
    for (int i = 0; i < N; i++) later[i] = 1e6f;
    cr_assert_eq(ops->copy_in(dev, a, later, sizeof later, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->copy_out(dev, ho, o, sizeof ho, &err), TACT_OK, "%s", err.text);
    for (int i = 0; i < N; i++) {
        float got;
        memcpy(&got, &ho[i], 4);
        cr_assert_eq((double)got, (double)ha[i] * -2.0 + (double)hb[i], "%s:%d: out of order at %d: %g", ops->kind, index, i, (double)got);
    }
    cr_assert_eq(ops->sync(dev, NULL, NULL, &err), TACT_OK, "%s", err.text);
    ops->unload(dev, prog);
    free(bytes);
    ops->free(dev, o), ops->free(dev, a), ops->free(dev, b), ops->free(dev, empty);
    ops->close(&dev);
    cr_assert_null(dev);
}

Test(device, the_cpu_device_copies_launches_and_stays_in_bounds) { s_conformance(&ta_cpu_device, 0); }

/* A supervised CPU launch (a tick given) is cut in chunks of at most 4M
 * iterations; the launching thread computes chunks too and ticks between
 * its chunks, and a stop hands out no chunk after it. */
static int s_count_ticks(void *ud) {
    ++*(int *)ud;
    return 0;
}

static int s_stop_at_once(void *ud) {
    ++*(int *)ud;
    return 1;
}

static void s_supervised(int threads, ta_device_tick_fn tick) {
    /* 64 iterations an output: chunks of at most 65536 outputs, 16 of them. */
    enum { N = 1 << 20, PER = 64, CHUNKS = N / ((4 << 20) / PER) };
    const uint32_t sentinel = 0x7fc00badu;
    ta_error_t err = {0, ""};
    ta_device_t *dev;
    cr_assert_eq(ta_cpu_device.open(&dev, 0, &(ta_device_options_t){threads, 0, NULL}, &err), TACT_OK, "%s", err.text);
    void *o, *a, *b;
    cr_assert_eq(ta_cpu_device.alloc(dev, N * 4, &o, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cpu_device.alloc(dev, N * 4, &a, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cpu_device.alloc(dev, N * 4, &b, &err), TACT_OK, "%s", err.text);
    float *ha = malloc(N * 4), *hb = malloc(N * 4);
    uint32_t *ho = malloc(N * 4);
    cr_assert(ha && hb && ho);
    for (int i = 0; i < N; i++) ha[i] = (float)(i % 1000), hb[i] = 1.0f, ho[i] = sentinel;
    cr_assert_eq(ta_cpu_device.copy_in(dev, a, ha, N * 4, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cpu_device.copy_in(dev, b, hb, N * 4, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cpu_device.copy_in(dev, o, ho, N * 4, &err), TACT_OK, "%s", err.text);
    size_t len;
    uint8_t *bytes = s_program(&ta_cpu_device, "k", s_cpu_src, s_cl_src, &len);
    void *prog;
    cr_assert_eq(ta_cpu_device.load(dev, bytes, len, "k", &prog, &err), TACT_OK, "%s", err.text);
    uint32_t sw = 0x40000000u; /* 2.0f */
    uint64_t args[1] = {sw};
    void *bufs[3] = {o, a, b};
    ta_launch_t l = {bufs, 3, args, 1, N, 4, (uint64_t)N * PER};
    cr_assert_eq(ta_cpu_device.launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
    int ticks = 0;
    int rc = ta_cpu_device.sync(dev, tick, &ticks, &err);
    cr_assert_eq(ta_cpu_device.copy_out(dev, ho, o, N * 4, &err), TACT_OK, "%s", err.text);
    int done = 0;
    for (int i = 0; i < N; i++) {
        if (ho[i] == sentinel) continue;
        float got;
        memcpy(&got, &ho[i], 4);
        cr_assert_eq((double)got, (double)ha[i] * 2.0 + 1.0, "output %d is %g", i, (double)got);
        done++;
    }
    if (tick == s_count_ticks) {
        cr_assert_eq(rc, TACT_OK, "%s", err.text);
        cr_assert_eq(done, N, "%d of %d outputs computed", done, N);
        /* One thread computes the 16 chunks or more itself (with two, the
         * worker may take them all while the launching thread is
         * preempted: it then ticks only when it waits 20 ms). */
        if (threads == 1) cr_assert(ticks >= CHUNKS, "%d ticks for %d chunks or more on one thread", ticks, CHUNKS);
    } else if (threads == 1) {
        /* Its first chunk and nothing after the stop. */
        cr_assert_eq(rc, TACT_ESTOPPED, "got %s: %s", tact_status_name(rc), err.text);
        cr_assert(strstr(err.text, "stopped"), "%s", err.text);
        cr_assert_eq(ticks, 1, "%d ticks after a stop", ticks);
        cr_assert(done > 0 && done <= N / CHUNKS, "%d outputs computed before the stop", done);
    } else {
        cr_assert(rc == TACT_ESTOPPED || (rc == TACT_OK && ticks == 0 && done == N), "got %s: %s (%d ticks, %d outputs)",
                  tact_status_name(rc), err.text, ticks, done);
        if (rc == TACT_ESTOPPED) cr_assert(strstr(err.text, "stopped") && ticks == 1, "%s (%d ticks)", err.text, ticks);
    }
    /* The device runs the next launch to its end. */
    cr_assert_eq(ta_cpu_device.launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cpu_device.sync(dev, NULL, NULL, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cpu_device.copy_out(dev, ho, o, N * 4, &err), TACT_OK, "%s", err.text);
    for (int i = 0; i < N; i += 4099) cr_assert_neq(ho[i], sentinel, "output %d not computed after a stopped launch", i);
    ta_cpu_device.unload(dev, prog);
    free(bytes), free(ha), free(hb), free(ho);
    ta_cpu_device.free(dev, o), ta_cpu_device.free(dev, a), ta_cpu_device.free(dev, b);
    ta_cpu_device.close(&dev);
}

Test(device, a_supervised_cpu_launch_ticks_between_chunks_and_stops_when_told) {
    s_supervised(1, s_count_ticks);
    s_supervised(2, s_count_ticks);
    s_supervised(1, s_stop_at_once);
    s_supervised(2, s_stop_at_once);
}

/* The executor's hint (device.h): the CPU pool's workers woken as a plan
 * arrives and watching for its launches.  Launches compute the same with
 * it, a hint with no launch after it leaves the workers asleep again
 * (they do not keep a core: the process's CPU time over 100 ms idle stays
 * far below 100 ms), and a device closes while hinted. */
static double s_cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

Test(device, the_cpu_pool_hint_wakes_workers_without_keeping_a_core) {
    enum { N = 1 << 16 };
    ta_error_t err = {0, ""};
    cr_assert_not_null(ta_cpu_device.hint);
    size_t len;
    uint8_t *bytes = s_program(&ta_cpu_device, "k", s_cpu_src, s_cl_src, &len);
    static float ha[N], hb[N], ho[N];
    for (int i = 0; i < N; i++) ha[i] = (float)(i % 1000), hb[i] = 0.5f;
    for (int threads = 1; threads <= 4; threads *= 2) {
        ta_device_t *dev;
        cr_assert_eq(ta_cpu_device.open(&dev, 0, &(ta_device_options_t){threads, 0, NULL}, &err), TACT_OK, "%s", err.text);
        void *o, *a, *b, *prog;
        cr_assert_eq(ta_cpu_device.alloc(dev, N * 4, &o, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ta_cpu_device.alloc(dev, N * 4, &a, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ta_cpu_device.alloc(dev, N * 4, &b, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ta_cpu_device.copy_in(dev, a, ha, sizeof ha, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ta_cpu_device.copy_in(dev, b, hb, sizeof hb, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ta_cpu_device.load(dev, bytes, len, "k", &prog, &err), TACT_OK, "%s", err.text);
        uint64_t args[1] = {0x40400000u}; /* 3.0f */
        void *bufs[3] = {o, a, b};
        ta_launch_t l = {bufs, 3, args, 1, N, 4, (uint64_t)N * 1024}; /* work enough for every thread */
        for (int round = 0; round < 3; round++) {
            ta_cpu_device.hint(dev, 1);
            if (round == 1) { /* a hint and no launch: the workers go back to sleep */
                double t0 = s_cpu_seconds();
                usleep(100 * 1000);
                double used = s_cpu_seconds() - t0;
                cr_assert(used < 0.05, "%d threads: %.1f ms of CPU time over 100 ms with a hint and no launch", threads, used * 1e3);
            }
            memset(ho, 0, sizeof ho);
            cr_assert_eq(ta_cpu_device.launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
            cr_assert_eq(ta_cpu_device.sync(dev, NULL, NULL, &err), TACT_OK, "%s", err.text);
            cr_assert_eq(ta_cpu_device.copy_out(dev, ho, o, sizeof ho, &err), TACT_OK, "%s", err.text);
            for (int i = 0; i < N; i++)
                cr_assert_eq((double)ho[i], (double)ha[i] * 3.0 + 0.5, "%d threads, round %d: output %d is %g", threads, round, i, (double)ho[i]);
            if (round < 2) ta_cpu_device.hint(dev, 0); /* the last round closes hinted */
        }
        ta_cpu_device.unload(dev, prog);
        ta_cpu_device.free(dev, o), ta_cpu_device.free(dev, a), ta_cpu_device.free(dev, b);
        ta_cpu_device.close(&dev);
        cr_assert_null(dev);
    }
    free(bytes);
}

Test(device, every_opencl_device_copies_launches_and_stays_in_bounds) {
    int n = ta_cl_device.count();
    if (!n) cr_skip_test("no OpenCL device (install pocl-opencl-icd)");
    for (int i = 0; i < n; i++) s_conformance(&ta_cl_device, i);
}

/* The same kernel shifted by one output either way: it writes one float
 * past the end, or before the start, of its output. */
static void s_guards(const ta_device_ops_t *ops, int index) {
    enum { N = 256 };
    ta_error_t err = {0, ""};
    ta_device_t *dev;
    cr_assert_eq(ops->open(&dev, index, &(ta_device_options_t){1, 1, NULL}, &err), TACT_OK, "%s:%d: %s", ops->kind, index, err.text);
    static const char *const shifts[] = {"i", "i + 1", "i - 1"};
    for (int k = 0; k < 3; k++) {
        char cpu[600], cl[600];
        snprintf(cpu, sizeof cpu,
                 "void k(int64_t start, int64_t end, void **restrict bufs, const uint64_t *restrict args) {\n"
                 "  (void)args; float *o = bufs[0]; const float *a = bufs[1];\n"
                 "  for (int64_t i = start; i < end; i++) o[%s] = a[i] + 1.0f;\n}\n", shifts[k]);
        snprintf(cl, sizeof cl,
                 "__kernel void k(__global float *o, __global const float *a, __global const ulong *args, long n) {\n"
                 "  long i = (long)get_global_id(0); if (i < n) o[%s] = a[i] + 1.0f;\n}\n", shifts[k]);
        void *o, *a, *prog;
        cr_assert_eq(ops->alloc(dev, N * 4, &o, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ops->alloc(dev, N * 4, &a, &err), TACT_OK, "%s", err.text);
        static float ha[N];
        for (int i = 0; i < N; i++) ha[i] = (float)i;
        cr_assert_eq(ops->copy_in(dev, a, ha, sizeof ha, &err), TACT_OK, "%s", err.text);
        size_t len;
        uint8_t *bytes = s_program(ops, "k", cpu, cl, &len);
        cr_assert_eq(ops->load(dev, bytes, len, "k", &prog, &err), TACT_OK, "%s", err.text);
        void *bufs[2] = {o, a};
        ta_launch_t l = {bufs, 2, NULL, 0, N, 1, N};
        cr_assert_eq(ops->launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ops->sync(dev, NULL, NULL, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ops->check_guards(dev, a, N * 4, &err), TACT_OK, "%s:%d: an input's guards: %s", ops->kind, index, err.text);
        int rc = ops->check_guards(dev, o, N * 4, &err);
        if (k == 0) cr_assert_eq(rc, TACT_OK, "%s:%d: a kernel in bounds: %s", ops->kind, index, err.text);
        else
            cr_assert(rc == TACT_EDEVICE && strstr(err.text, k == 1 ? "wrote 4 bytes past the end" : "wrote 4 bytes before the start"),
                      "%s:%d: o[%s]: %s", ops->kind, index, shifts[k], rc == TACT_OK ? "not seen" : err.text);
        ops->unload(dev, prog);
        free(bytes);
        ops->free(dev, o), ops->free(dev, a);
    }
    ops->close(&dev);
}

Test(device, guards_catch_writes_past_either_end_on_every_device) {
    s_guards(&ta_cpu_device, 0);
    for (int i = 0; i < ta_cl_device.count(); i++) s_guards(&ta_cl_device, i);
}

Test(device, opencl_build_errors_carry_the_log_and_name_the_kernel) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    ta_error_t err = {0, ""};
    ta_device_t *dev;
    cr_assert_eq(ta_cl_device.open(&dev, 0, &(ta_device_options_t){0, 0, NULL}, &err), TACT_OK, "%s", err.text);
    void *prog = NULL;
    const char *bad = "__kernel void k(__global float *o) { o[0] = undefined_thing; }";
    cr_assert_eq(ta_cl_device.load(dev, bad, strlen(bad), "k", &prog, &err), TACT_ECOMPILE);
    cr_assert(strstr(err.text, "kernel k does not build") && strstr(err.text, "undefined_thing"), "%s", err.text);
    cr_assert_null(prog);
    const char *good = "__kernel void k(__global float *o) { o[0] = 1.0f; }";
    cr_assert_eq(ta_cl_device.load(dev, good, strlen(good), "other", &prog, &err), TACT_ECOMPILE);
    cr_assert(strstr(err.text, "defines no kernel other"), "%s", err.text);
    /* A kernel that builds but that the driver refuses to run (its last
     * argument is not the long n every launch passes) fails when it loads,
     * where its trial run meets the refusal, not in a later realize. */
    const char *odd = "__kernel void k(__global float *o, __global const ulong *a, float n) { if (get_global_id(0) < n) o[0] = 1.0f; }";
    cr_assert_eq(ta_cl_device.load(dev, odd, strlen(odd), "k", &prog, &err), TACT_ECOMPILE, "%s", err.text);
    cr_assert(strstr(err.text, "kernel k builds but the driver cannot run it: argument of the wrong size"), "%s", err.text);
    cr_assert_null(prog);
    /* A buffer larger than the device's largest is refused before asking. */
    void *big;
    cr_assert_eq(ta_cl_device.alloc(dev, (size_t)1 << 62, &big, &err), TACT_ENOMEM);
    cr_assert(strstr(err.text, "larger than the device's largest"), "%s", err.text);
    ta_cl_device.close(&dev);
}

Test(device, names_are_parsed_and_absent_devices_are_clear_errors) {
    const ta_device_ops_t *ops;
    int index;
    ta_error_t err;
    cr_assert_eq(ta_device_find("CPU", &ops, &index, &err), TACT_OK, "%s", err.text);
    cr_assert(ops == &ta_cpu_device && index == 0);
    cr_assert_eq(ta_device_find("CPU:3", &ops, &index, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(index, 3);
    cr_assert_eq(ta_device_find("CPU:8", &ops, &index, &err), TACT_EDEVICE);
    cr_assert(strstr(err.text, "no device CPU:8") && strstr(err.text, "present: CPU"), "%s", err.text);
    int ncl = ta_cl_device.count();
    char name[32];
    snprintf(name, sizeof name, "CL:%d", ncl);
    cr_assert_eq(ta_device_find(name, &ops, &index, &err), TACT_EDEVICE);
    cr_assert(strstr(err.text, "no device CL:") && strstr(err.text, "present:"), "%s", err.text);
    if (ncl) {
        cr_assert_eq(ta_device_find("CL", &ops, &index, &err), TACT_OK, "%s", err.text);
        cr_assert(ops == &ta_cl_device && index == 0);
    }
    static const char *const bad[] = {"", "GPU", "CL:", "CL:x", "CL:-1", "CPU:1x", "cpu", "CPU: 3", "CPU:+3", "CL: 0", "CL:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(ta_device_find(bad[i], &ops, &index, &err), TACT_EINVAL, "'%s' accepted", bad[i]);
        cr_assert(strstr(err.text, "CPU, CPU:k, CL, CL:k") || strstr(err.text, "a device number is expected"), "'%s': %s", bad[i], err.text);
    }
    cr_assert_eq(ta_device_find(NULL, &ops, &index, &err), TACT_EINVAL);
    if (ta_cuda_device.count() == 0) { /* no GPU: the reason, not a list */
        cr_assert_eq(ta_device_find("CUDA:0", &ops, &index, &err), TACT_EDEVICE);
        cr_assert(strstr(err.text, "device CUDA:0: ") && (strstr(err.text, "no CUDA driver") || strstr(err.text, "sees no GPU")), "%s", err.text);
    }
}

/* A device list splits at commas into names as written; an empty name or
 * one longer than a URI may be is an error.  Each name is then a device
 * URI: local ones made canonical, a worker's checked for its grammar and
 * refused for now, anything else refused saying why. */
Test(device, device_lists_split_at_commas_with_clear_errors) {
    char **names;
    ta_error_t err;
    const char *two = "CPU,CL:1 and more";
    cr_assert_eq(ta_device_split(two, 8, &names, &err), 2, "%s", err.text); /* the length bounds the list, not a NUL */
    cr_assert(strcmp(names[0], "CPU") == 0 && strcmp(names[1], "CL:1") == 0, "%s %s", names[0], names[1]);
    ta_free(names);
    cr_assert_eq(ta_device_split("CPU:0,CPU:1,CPU:2", 17, &names, &err), 3);
    ta_free(names);
    char longer[TA_URI_MAX + 2];
    memset(longer, 'A', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    static const struct {
        const char *list, *error;
    } bad[] = {{"", "empty"}, {"CPU,", "empty"}, {",CPU", "empty"}, {"CPU,,CL", "empty"}, {NULL, "longer than 255"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *list = bad[i].list ? bad[i].list : longer;
        cr_assert_eq(ta_device_split(list, strlen(list), &names, &err), -1, "'%s' accepted", list);
        cr_assert(strstr(err.text, bad[i].error), "'%s': %s", list, err.text);
    }
    static const struct {
        const char *uri, *want;
        int code;
    } uris[] = {{"CPU", "CPU", TACT_OK},
                {"CPU:0", "CPU", TACT_OK},
                {"CPU:3", "CPU:3", TACT_OK},
                {"tcp://10.0.0.7:5555/CUDA:0", "tcp://10.0.0.7:5555/CUDA:0", TACT_OK},
                {"ipc:///run/tact/w0/CL:1", "ipc:///run/tact/w0/CL:1", TACT_OK},
                {"tcp://h:1/CPU?key=rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", "tcp://h:1/CPU", TACT_OK},
                {"tcp://h:1/CPU?key=short", "not a CURVE public key", TACT_EINVAL},
                {"ipc:///x/CPU?key=rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", "takes no key", TACT_EINVAL},
                {"tcp://host:0/CPU", "not a device URI", TACT_EINVAL},
                {"tcp://:5555/CPU", "not a device URI", TACT_EINVAL},
                {"tcp://host:5555/", "not a device URI", TACT_EINVAL},
                {"udp://host:5555/CPU", "not a device URI", TACT_EINVAL},
                {"ipc://CPU", "not a device URI", TACT_EINVAL},
                {"CPU\x1b", "unprintable", TACT_EINVAL},
                {"NOPE:1", "unknown kind", TACT_EINVAL}};
    for (size_t i = 0; i < sizeof uris / sizeof *uris; i++) {
        char out[TA_URI_MAX + 1];
        int rc = ta_device_uri(uris[i].uri, strlen(uris[i].uri), out, &err);
        cr_assert_eq(rc, uris[i].code, "'%s': %s", uris[i].uri, rc ? err.text : out);
        if (rc == TACT_OK) cr_assert_str_eq(out, uris[i].want, "'%s'", uris[i].uri);
        else cr_assert(strstr(err.text, uris[i].want), "'%s': %s", uris[i].uri, err.text);
    }
}

Test(device, tact_devices_lists_the_cpu_first_and_each_opencl_device) {
    int n = tact_devices(NULL, 0);
    cr_assert_eq(n, 1 + ta_cl_device.count());
    tact_device_info d[16];
    memset(d, 0xff, sizeof d);
    cr_assert_eq(tact_devices(d, 16), n);
    cr_assert_str_eq(d[0].name, "CPU");
    cr_assert_gt(d[0].compute_units, 0);
    cr_assert_gt(d[0].memory, 0);
    cr_assert_eq(d[0].max_group, 1);
    for (int i = 1; i < n && i < 16; i++) {
        char want[16];
        snprintf(want, sizeof want, "CL:%d", i - 1);
        cr_assert_str_eq(d[i].name, want);
        cr_assert_gt(d[i].compute_units, 0, "%s", d[i].name);
        cr_assert_gt(d[i].max_buffer, 0, "%s", d[i].name);
        cr_assert(d[i].model[0] && d[i].driver[0], "%s", d[i].name);
    }
    /* A short array gets the first entries and the full count. */
    tact_device_info one;
    cr_assert_eq(tact_devices(&one, 1), n);
    cr_assert_str_eq(one.name, "CPU");
}

/* A context on the OpenCL device: tact_device names it, results match the
 * CPU's within float tolerance and are bitwise the same run after run;
 * absent devices and lists fail the open with what is present. */
static void s_softmax_on(const char *device, float *out, int n) {
    tact_options o;
    tact_options_default(&o);
    o.devices = device;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s: %s", device, tact_last_open_error());
    float x[64];
    uint64_t rng = 7;
    for (int i = 0; i < 64; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(rng >> 11) / 9007199254740992.0 * 8 - 4);
    }
    int64_t shape[2] = {4, 16};
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    tact_tensor *y = tact_mul(tact_softmax(t, 1), tact_sum(t, -1, NULL, 0));
    cr_assert_str_eq(tact_device(y), strcmp(device, "CL") == 0 ? "CL:0" : device);
    cr_assert_eq(tact_read(y, out, sizeof(float) * (size_t)n), TACT_OK, "%s: %s", device, tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
}

Test(device, a_context_on_opencl_computes_what_the_cpu_does) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    float cpu[64], cl[64], again[64];
    s_softmax_on("CPU", cpu, 64);
    s_softmax_on("CL", cl, 64);
    s_softmax_on("CL", again, 64);
    for (int i = 0; i < 64; i++)
        cr_assert(fabs((double)cl[i] - (double)cpu[i]) <= 1e-6 + 1e-5 * fabs((double)cpu[i]), "element %d: CL %g, CPU %g", i, (double)cl[i],
                  (double)cpu[i]);
    cr_assert(memcmp(cl, again, sizeof cl) == 0, "two runs on CL differ");
    tact_options o;
    tact_options_default(&o);
    tact_ctx *ctx = NULL;
    o.devices = "CL:99";
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EDEVICE);
    cr_assert(strstr(tact_last_open_error(), "no device CL:99") && strstr(tact_last_open_error(), "CL:0"), "%s", tact_last_open_error());
    o.devices = "CPU,CL:0,CL";
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EINVAL);
    cr_assert(strstr(tact_last_open_error(), "CL:0 is listed twice"), "%s", tact_last_open_error());
    cr_assert_null(ctx);
}

/* The CL device keeps program binaries in the cache folder, checked by
 * digest: a second load comes from the binary and runs; a damaged binary
 * is built again from the source and replaced. */
static void s_files(const char *dir, const char *suffix, int want) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "test $(ls '%s' | grep -c '%s$') -eq %d", dir, suffix, want);
    cr_assert_eq(system(cmd), 0, "%s: want %d %s files", dir, want, suffix);
}

static void s_load_and_run(const char *dir, int want_hit) {
    ta_error_t err = {0, ""};
    ta_device_t *dev;
    cr_assert_eq(ta_cl_device.open(&dev, 0, &(ta_device_options_t){0, 0, dir}, &err), TACT_OK, "%s", err.text);
    int hits = ta_cl_binary_hits();
    void *prog, *o, *a, *b;
    cr_assert_eq(ta_cl_device.load(dev, s_cl_src, strlen(s_cl_src), "k", &prog, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cl_binary_hits() - hits, want_hit, "loaded %s", want_hit ? "from source" : "from the binary");
    float ha[8], hb[8], ho[8];
    for (int i = 0; i < 8; i++) ha[i] = (float)i, hb[i] = 0.5f;
    cr_assert_eq(ta_cl_device.alloc(dev, sizeof ho, &o, &err), TACT_OK);
    cr_assert_eq(ta_cl_device.alloc(dev, sizeof ha, &a, &err), TACT_OK);
    cr_assert_eq(ta_cl_device.alloc(dev, sizeof hb, &b, &err), TACT_OK);
    ta_cl_device.copy_in(dev, a, ha, sizeof ha, &err);
    ta_cl_device.copy_in(dev, b, hb, sizeof hb, &err);
    float s = 2.0f;
    uint32_t sw;
    memcpy(&sw, &s, 4);
    uint64_t args[1] = {sw};
    void *bufs[3] = {o, a, b};
    ta_launch_t l = {bufs, 3, args, 1, 8, 4, 8};
    cr_assert_eq(ta_cl_device.launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cl_device.copy_out(dev, ho, o, sizeof ho, &err), TACT_OK, "%s", err.text);
    for (int i = 0; i < 8; i++) cr_assert_eq(ho[i], (float)i * 2.0f + 0.5f, "output %d", i);
    ta_cl_device.unload(dev, prog);
    ta_cl_device.free(dev, o), ta_cl_device.free(dev, a), ta_cl_device.free(dev, b);
    ta_cl_device.close(&dev);
}

Test(device, opencl_program_binaries_are_cached_and_checked) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    char *dir = tu_tmpfile("clcache");
    unlink(dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    s_load_and_run(dir, 0);
    s_files(dir, ".bin", 1);
    s_files(dir, ".sum", 1);
    s_load_and_run(dir, 1);
    /* A byte more: the digest no longer matches. */
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "printf x >> \"$(ls '%s'/*.bin)\"", dir);
    cr_assert_eq(system(cmd), 0);
    s_load_and_run(dir, 0);
    s_load_and_run(dir, 1);
    s_files(dir, ".bin", 1);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

/* A stop asked for during a long kernel: the kernel cannot be interrupted,
 * so sync waits for it (within a grace period) and reports the stop. */
Test(device, a_stop_during_an_opencl_kernel_is_reported_once_it_ends) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    ta_error_t err = {0, ""};
    ta_device_t *dev;
    cr_assert_eq(ta_cl_device.open(&dev, 0, &(ta_device_options_t){0, 0, NULL}, &err), TACT_OK, "%s", err.text);
    const char *src =
        "__kernel void busy(__global float *o, __global const ulong *args, long n) {\n"
        "  if (get_global_id(0) >= n) return;\n"
        "  float x = 1.0f; for (long i = 0; i < 30000000; i++) x = fma(x, 0.999999f, 1e-7f);\n"
        "  o[get_global_id(0)] = x;\n}\n";
    void *prog, *o;
    cr_assert_eq(ta_cl_device.load(dev, src, strlen(src), "busy", &prog, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ta_cl_device.alloc(dev, 4 * 4, &o, &err), TACT_OK, "%s", err.text);
    void *bufs[1] = {o};
    ta_launch_t l = {bufs, 1, NULL, 0, 4, 1, 4};
    cr_assert_eq(ta_cl_device.launch(dev, prog, &l, &err), TACT_OK, "%s", err.text);
    int ticks = 0;
    int rc = ta_cl_device.sync(dev, s_stop_at_once, &ticks, &err);
    cr_assert(rc == TACT_ESTOPPED || (rc == TACT_OK && ticks == 0), "got %s: %s", tact_status_name(rc), err.text);
    if (rc == TACT_ESTOPPED) cr_assert(strstr(err.text, "stopped") && ticks == 1, "%s (%d ticks)", err.text, ticks);
    /* The device is usable after: the kernel ended within the grace period. */
    float out[4];
    cr_assert_eq(ta_cl_device.copy_out(dev, out, o, sizeof out, &err), TACT_OK, "%s", err.text);
    cr_assert(out[0] > 0.0f);
    ta_cl_device.unload(dev, prog);
    ta_cl_device.free(dev, o);
    ta_cl_device.close(&dev);
}

/* Long reduces to few outputs, which OpenCL shares among a work group
 * (render.c): sums and maxes of 16 rows of 5003 against a double loop,
 * a NaN in one row spreading to its max and sum only, the same bits in
 * two runs. */
Test(device, work_group_reduces_on_opencl_match_a_loop) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    enum { R = 16, C = 5003 };
    float *x = malloc(sizeof(float) * R * C), sum[2][R], max[2][R];
    uint64_t seed = tu_seed(), rng = seed;
    for (int i = 0; i < R * C; i++) x[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 4 - 2);
    x[5 * C + 77] = NAN;
    for (int run = 0; run < 2; run++) {
        tact_options o;
        tact_options_default(&o);
        o.devices = "CL";
        tact_ctx *ctx = NULL;
        cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
        int64_t shape[2] = {R, C};
        int one = 1;
        tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
        cr_assert_eq(tact_read(tact_sum(t, 1, &one, 0), sum[run], sizeof sum[run]), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_eq(tact_read(tact_max(t, 1, &one, 0), max[run], sizeof max[run]), TACT_OK, "%s", tact_ctx_error(ctx));
        tact_ctx_close(&ctx);
    }
    for (int r = 0; r < R; r++) {
        double s = 0, mag = 0;
        float m = -INFINITY;
        for (int c = 0; c < C; c++) s += x[r * C + c], mag += fabs(x[r * C + c]), m = x[r * C + c] != x[r * C + c] || x[r * C + c] > m ? x[r * C + c] : m;
        if (r == 5) {
            cr_assert(isnan(sum[0][r]) && isnan(max[0][r]), "row 5: sum %g, max %g", sum[0][r], max[0][r]);
            continue;
        }
        cr_assert(fabs(sum[0][r] - s) <= 1e-6 * mag, "row %d: sum %.9g, want %.9g (seed %llu)", r, sum[0][r], s, (unsigned long long)seed);
        cr_assert_eq(max[0][r], m, "row %d: max (seed %llu)", r, (unsigned long long)seed);
    }
    cr_assert(memcmp(sum[0], sum[1], sizeof sum[0]) == 0 && memcmp(max[0], max[1], sizeof max[0]) == 0, "two runs differ");
    free(x);
}

/* Each device describes the target its programs are built for: the CPU
 * C with -march=native's vector width, OpenCL C with the driver's local
 * memory and work-group limit; the DEVICE record made of it round-trips
 * through the schema. */
Test(device_describe, every_device_describes_its_target) {
    ta_device_info_t info[16];
    int n = ta_device_list(info, 16);
    cr_assert_geq(n, 1);
    cr_assert_str_eq(info[0].name, "CPU");
    cr_assert_str_eq(info[0].language, "C");
    cr_assert(info[0].vector_bytes == 16 || info[0].vector_bytes == 32 || info[0].vector_bytes == 64, "%d", info[0].vector_bytes);
    cr_assert(strstr(info[0].flags, "-march=native"), "%s", info[0].flags);
    for (int i = 1; i < n && i < 16; i++) {
        cr_assert_str_eq(info[i].language, "OpenCL C", "%s", info[i].name);
        cr_assert(info[i].vector_bytes >= 4 && info[i].local_memory > 0 && info[i].max_group >= 1, "%s", info[i].name);
        cr_assert(strstr(info[i].flags, "-cl-std=CL1.2"), "%s", info[i].flags);
    }
    for (int i = 0; i < n && i < 16; i++) {
        ta_device_rec_t rec, back;
        ta_target_rec_t target, tback;
        ta_device_rec_of(&info[i], info[i].name, &rec, &target);
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        cr_assert_eq(ta_rec_pack(TA_REC_DEVICE, &rec, &pk), 0, "%s", info[i].name);
        size_t off = 0;
        ta_error_t err;
        cr_assert_eq(ta_rec_unpack(TA_REC_DEVICE, &back, (const uint8_t *)sb.data, sb.size, &off, &err), TACT_OK, "%s", err.text);
        char where[64];
        cr_assert(ta_rec_equal(TA_REC_DEVICE, &rec, &back, where, sizeof where), "%s: %s", info[i].name, where);
        ta_recs_it_t it;
        ta_recs_begin(&it, &back.target);
        cr_assert(ta_recs_next(&it, &tback) && tback.vector_bytes == (uint64_t)info[i].vector_bytes);
        msgpack_sbuffer_destroy(&sb);
    }
}

/* Events and copies between two devices of one kind, on device index of
 * ops (opened twice): a marker recorded after a launch is reached once the
 * launch ran (event_sync, then the output is there); the second device
 * waits for the first's marker before its own work (event_wait); a copy
 * between the two goes without the host where caps say so (the CPU), else
 * is refused naming the pair (OpenCL: a context each) and goes through the
 * host.  Caps agree with the table. */
static void s_events_and_peers(const ta_device_ops_t *ops, int index) {
    enum { N = 256 };
    ta_error_t err = {0, ""};
    ta_device_t *d1, *d2;
    cr_assert_eq(ops->open(&d1, index, &(ta_device_options_t){2, 0, NULL}, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->open(&d2, index, &(ta_device_options_t){1, 0, NULL}, &err), TACT_OK, "%s", err.text);
    ta_device_caps_t caps;
    ops->caps(d1, &caps);
    cr_assert_eq(caps.host_memory, ops->host_memory, "%s: caps and the table disagree", ops->kind);
    cr_assert(caps.events, "%s: events", ops->kind);
    void *o, *a, *b, *o2;
    cr_assert_eq(ops->alloc(d1, N * 4, &o, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->alloc(d1, N * 4, &a, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->alloc(d1, N * 4, &b, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->alloc(d2, N * 4, &o2, &err), TACT_OK, "%s", err.text);
    static float ha[N], hb[N], got[N];
    for (int i = 0; i < N; i++) ha[i] = (float)i, hb[i] = 0.25f * (float)i;
    cr_assert_eq(ops->copy_in(d1, a, ha, sizeof ha, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->copy_in(d1, b, hb, sizeof hb, &err), TACT_OK, "%s", err.text);
    size_t len;
    uint8_t *bytes = s_program(ops, "k", s_cpu_src, s_cl_src, &len);
    void *prog;
    cr_assert_eq(ops->load(d1, bytes, len, "k", &prog, &err), TACT_OK, "%s", err.text);
    float s = 2.0f;
    uint32_t sw;
    memcpy(&sw, &s, 4);
    uint64_t args[1] = {sw};
    void *bufs[3] = {o, a, b};
    ta_launch_t l = {bufs, 3, args, 1, N, 4, N};
    cr_assert_eq(ops->launch(d1, prog, &l, &err), TACT_OK, "%s", err.text);
    ta_event_t *ev;
    cr_assert_eq(ops->event_record(d1, &ev, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->event_wait(d1, ev, &err), TACT_OK, "its own marker: %s", err.text);
    cr_assert_eq(ops->event_wait(d2, ev, &err), TACT_OK, "another device's marker: %s", err.text);
    cr_assert_eq(ops->event_sync(ev, &err), TACT_OK, "%s", err.text);
    ops->event_free(ev);
    /* Reached: in host memory the output is there, with nothing else run. */
    for (int i = 0; caps.host_memory && i < N; i++)
        cr_assert_eq(((const float *)o)[i], ha[i] * 2.0f + hb[i], "%s: the marker was reached before the launch ran (element %d)", ops->kind, i);
    /* d1's output, on d2: without the host where the pair allows. */
    int rc = ops->copy_peer(d2, o2, d1, o, sizeof got, &err);
    if (caps.peer_copy) {
        cr_assert_eq(rc, TACT_OK, "%s: %s", ops->kind, err.text);
    } else {
        cr_assert_eq(rc, TACT_EDEVICE, "%s: a peer copy the caps deny", ops->kind);
        cr_assert(strstr(err.text, ops->kind) && strstr(err.text, "without the host"), "%s", err.text);
        static float via[N];
        cr_assert_eq(ops->copy_out(d1, via, o, sizeof via, &err), TACT_OK, "%s", err.text);
        cr_assert_eq(ops->copy_in(d2, o2, via, sizeof via, &err), TACT_OK, "%s", err.text);
    }
    cr_assert_eq(ops->copy_out(d2, got, o2, sizeof got, &err), TACT_OK, "%s", err.text);
    for (int i = 0; i < N; i++) cr_assert_eq(got[i], ha[i] * 2.0f + hb[i], "%s:%d: element %d is %g", ops->kind, index, i, (double)got[i]);
    cr_assert_eq(ops->sync(d1, NULL, NULL, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(ops->sync(d2, NULL, NULL, &err), TACT_OK, "%s", err.text);
    ops->unload(d1, prog);
    free(bytes);
    ops->free(d1, o), ops->free(d1, a), ops->free(d1, b), ops->free(d2, o2);
    ops->close(&d1), ops->close(&d2);
}

Test(device, events_order_work_and_peer_copies_go_without_the_host_where_they_can) {
    s_events_and_peers(&ta_cpu_device, 0);
    for (int i = 0; i < ta_cl_device.count(); i++) s_events_and_peers(&ta_cl_device, i);
}

/* Strict mode's check of a device (ta_device_strict_why): an OpenCL
 * driver without correctly rounded float32 division and square root, and
 * a compiler or flags that relax floating point, are refused with why;
 * this machine's devices as they describe themselves pass. */
Test(device, strict_mode_refuses_inexact_devices_and_relaxing_compilers) {
    ta_device_info_t cl;
    memset(&cl, 0, sizeof cl);
    snprintf(cl.name, sizeof cl.name, "CL:1");
    snprintf(cl.language, sizeof cl.language, "OpenCL C");
    snprintf(cl.driver, sizeof cl.driver, "Some GPU driver 1.0");
    snprintf(cl.compiler, sizeof cl.compiler, "OpenCL C (Some GPU driver 1.0)");
    snprintf(cl.flags, sizeof cl.flags, "-cl-std=CL1.2");
    char why[300];
    cr_expect_eq(ta_device_strict_why(&cl, why, sizeof why), 1);
    cr_expect(strstr(why, "Some GPU driver 1.0") && strstr(why, "division and square root"), "%s", why);
    snprintf(cl.flags, sizeof cl.flags, "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt");
    cr_expect_eq(ta_device_strict_why(&cl, why, sizeof why), 0, "%s", why);
    snprintf(cl.flags, sizeof cl.flags, "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt -cl-mad-enable");
    cr_expect_eq(ta_device_strict_why(&cl, why, sizeof why), 1);
    cr_expect(strstr(why, "(-cl-mad-enable)"), "%s", why);
    ta_device_info_t cpu;
    memset(&cpu, 0, sizeof cpu);
    snprintf(cpu.language, sizeof cpu.language, "C");
    snprintf(cpu.compiler, sizeof cpu.compiler, "gcc-12 -Ofast");
    cr_expect_eq(ta_device_strict_why(&cpu, why, sizeof why), 1);
    cr_expect(strstr(why, "'gcc-12 -Ofast'") && strstr(why, "(-Ofast)"), "%s", why);
    /* A word that only starts like a relaxing one is not one. */
    cr_expect_eq(ta_strict_relaxing_flag("cc -ffast-mathematics -Ofastest -mrecipe"), NULL);
    cr_expect_str_eq(ta_strict_relaxing_flag("clang\t-mrecip=all"), "-mrecip");
    cr_expect_str_eq(ta_strict_relaxing_flag("nvrtc --use_fast_math"), "--use_fast_math");
    ta_device_info_t present[8];
    int n = ta_device_list(present, 8);
    for (int i = 0; i < n && i < 8; i++)
        cr_expect_eq(ta_device_strict_why(&present[i], why, sizeof why), 0, "%s: %s", present[i].name, why);
}
