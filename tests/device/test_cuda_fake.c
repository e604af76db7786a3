/* test_cuda_fake.c - the CUDA device's host side against a stand-in driver (fake_cuda.c, found as libcuda.so.1 first on the loader's path): devices listed, copies through the executor, NVRTC's programs loaded and launched, failures named, nothing leaked. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tact.h"
#include "testutil.h"

static void s_stats(long *bufs, long *modules, long *launches) {
    void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cr_assert(dl, "the fake driver is not loaded");
    void (*stats)(long *, long *, long *);
    *(void **)&stats = dlsym(dl, "fake_cuda_stats");
    cr_assert(stats, "libcuda.so.1 is not the fake (run through ctest: it sets LD_LIBRARY_PATH)");
    stats(bufs, modules, launches);
    dlclose(dl);
}

static tact_ctx *s_open(const char *devices) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

static void s_setup(void) {
    const char *t = getenv("TACT_CUDA_TOOLS");
    cr_assert(t && *t, "TACT_CUDA_TOOLS is not set: run through ctest");
    static char path[4096];
    snprintf(path, sizeof path, "%s/lib/libnvrtc.so.13", t);
    setenv("TACT_NVRTC", path, 1);
}

TestSuite(cuda_fake, .init = s_setup);

/* tact devices lists the GPU with its target. */
Test(cuda_fake, the_gpu_is_listed) {
    tact_device_info d[16];
    int n = tact_devices(d, 16), at = -1;
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(d[i].name, "CUDA:0") == 0) at = i;
    cr_assert(at >= 0, "CUDA:0 is not listed");
    cr_assert_str_eq(d[at].model, "tact fake GPU");
    cr_assert(strstr(d[at].driver, "CUDA driver 13.0, compute capability 9.0"), "%s", d[at].driver);
    cr_assert_eq(d[at].compute_units, 4);
    cr_assert_eq(d[at].max_group, 1024);
}

/* Bytes in and out of the GPU through the executor, with and without
 * guards, on its own and beside the CPU: no kernel runs. */
Test(cuda_fake, copies_round_trip) {
    for (int guards = 0; guards < 2; guards++) {
        if (guards) setenv("TACT_CHECK_BOUNDS", "1", 1);
        tact_ctx *ctx = s_open("CPU,CUDA");
        float x[1000];
        for (int i = 0; i < 1000; i++) x[i] = (float)i * 0.5f - 7;
        tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){1000}, x), *g = tact_to(t, "CUDA");
        float back[1000];
        cr_assert_eq(tact_read(g, back, sizeof back), TACT_OK, "%s", tact_error_message(g));
        cr_assert(memcmp(x, back, sizeof x) == 0, "the bytes changed on the way (guards %d)", guards);
        cr_assert_eq(tact_read(tact_to(g, "CPU"), back, sizeof back), TACT_OK);
        cr_assert(memcmp(x, back, sizeof x) == 0, "the bytes changed on the way back (guards %d)", guards);
        tact_ctx_close(&ctx);
        unsetenv("TACT_CHECK_BOUNDS");
    }
    long bufs, modules, launches;
    s_stats(&bufs, &modules, &launches);
    cr_assert_eq(bufs, 0, "%ld buffers left on the GPU after close", bufs);
}

/* A kernel: NVRTC's cubin for sm_90 loaded, launched; unloaded at close. */
Test(cuda_fake, kernels_are_compiled_loaded_and_launched) {
    tact_ctx *ctx = s_open("CUDA");
    int64_t shape[2] = {64, 2048};
    tact_tensor *x = tact_ones(ctx, TACT_FLOAT32, 2, shape);
    tact_tensor *outs[2] = {tact_add(x, tact_scalar(ctx, 1)), tact_sum_axis(x, 1)}; /* a grid, and a block sharing a long reduce */
    cr_assert_eq(tact_realize(ctx, 2, outs), TACT_OK, "%s", tact_ctx_error(ctx));
    long bufs, modules, launches;
    s_stats(&bufs, &modules, &launches);
    cr_assert(modules >= 1 && launches >= 2, "%ld modules, %ld launches", modules, launches);
    tact_ctx_close(&ctx);
    s_stats(&bufs, &modules, &launches);
    cr_assert(bufs == 0 && modules == 0, "%ld buffers and %ld modules left after close", bufs, modules);
}

/* With the fake failing at `what`, a context on the GPU whose first
 * kernel (E_100) fails: the context's error, which must contain each of
 * the NULL-ended strings. */
static tact_ctx *s_failing(const char *what, ...) {
    setenv("FAKE_CUDA_FAIL", what, 1);
    tact_ctx *ctx = s_open("CUDA");
    tact_tensor *y = tact_exp2(tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){100}));
    float v[100];
    cr_assert_neq(tact_read(y, v, sizeof v), TACT_OK, "a failing %s went unnoticed", what);
    const char *m = tact_ctx_error(ctx); /* a realize that fails says why in the context */
    va_list ap;
    va_start(ap, what);
    for (const char *want; (want = va_arg(ap, const char *));) cr_assert(strstr(m, want), "fail %s: '%s' is not in: %s", what, want, m);
    va_end(ap);
    return ctx;
}

/* Failures name the device, the kernel and the driver's error. */
Test(cuda_fake, a_failed_launch_is_an_error_naming_the_kernel) {
    tact_ctx *ctx = s_failing("launch", "CUDA:0: kernel E_100: cannot launch", "CUDA_ERROR_LAUNCH_FAILED", NULL);
    tact_ctx_close(&ctx);
}

Test(cuda_fake, a_fault_loses_the_device_with_a_clear_error) {
    tact_ctx *ctx = s_failing("sync", "CUDA:0: the stream failed running kernel E_100", "CUDA_ERROR_ILLEGAL_ADDRESS", NULL);
    /* The context goes on; the GPU is not used again. */
    tact_tensor *z = tact_neg(tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){100}));
    float v[100];
    cr_assert_neq(tact_read(z, v, sizeof v), TACT_OK);
    cr_assert(strstr(tact_ctx_error(ctx), "CUDA:0: the device failed earlier"), "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
}

Test(cuda_fake, a_refused_program_and_a_full_gpu_are_errors) {
    tact_ctx *ctx = s_failing("load", "CUDA:0: kernel E_100: the driver does not load", "CUDA_ERROR_INVALID_IMAGE", NULL);
    tact_ctx_close(&ctx);
    unsetenv("FAKE_CUDA_FAIL");
    setenv("FAKE_CUDA_MEM", "1000000", 1); /* a 1 MB GPU */
    ctx = s_open("CUDA");
    tact_tensor *big = tact_add(tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){1 << 20}), tact_scalar(ctx, 1));
    cr_assert_neq(tact_realize(ctx, 1, &big), TACT_OK);
    cr_assert(strstr(tact_ctx_error(ctx), "CUDA_ERROR_OUT_OF_MEMORY") || strstr(tact_ctx_error(ctx), "out of memory"), "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
}

/* Without the driver's cuInit the kind has no device, and says why. */
Test(cuda_fake, a_driver_that_does_not_start_is_named) {
    setenv("FAKE_CUDA_FAIL", "init", 1);
    tact_options o;
    tact_options_default(&o);
    o.devices = "CUDA";
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EDEVICE);
    cr_assert(strstr(tact_last_open_error(), "cuInit failed with CUDA_ERROR_NOT_INITIALIZED"), "%s", tact_last_open_error());
}
