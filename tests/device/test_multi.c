/* test_multi.c - several devices in one context: tensors on each, copies between them as steps of a realize, devices working at once. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "rerun.h"
#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open(const char *devices, int threads) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    o.cpu_threads = threads;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s: %s", devices, tact_last_open_error());
    return ctx;
}

static void s_fill(float *x, int n, uint64_t seed) {
    uint64_t rng = seed;
    for (int i = 0; i < n; i++) x[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 4 - 2);
}

/* y = to(x, dev); z = y * y + 1 (on dev); w = to(z, first) - x, on a
 * context over devices; the values are checked against a double loop. */
static void s_round_trip(const char *devices, const char *dev, const char *first) {
    uint64_t seed = tu_seed();
    enum { N = 3 * 257 };
    float x[N], w[N];
    s_fill(x, N, seed);
    tact_ctx *ctx = s_open(devices, 1);
    int64_t shape[2] = {3, 257};
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    tact_tensor *y = tact_to(t, dev);
    tact_tensor *z = tact_add(tact_mul(y, y), tact_scalar(ctx, 1.0));
    tact_tensor *back = tact_to(z, first);
    tact_tensor *d = tact_sub(back, t);
    cr_assert_str_eq(tact_device(t), first);
    cr_assert_str_eq(tact_device(y), dev);
    cr_assert_str_eq(tact_device(z), dev);
    cr_assert_str_eq(tact_device(d), first);
    cr_assert_eq(tact_read(d, w, sizeof w), TACT_OK, "seed %llu: %s", (unsigned long long)seed, tact_ctx_error(ctx));
    for (int i = 0; i < N; i++) {
        double want = (double)x[i] * x[i] + 1 - x[i];
        cr_assert(fabs(w[i] - want) <= 1e-6 + 1e-6 * fabs(want), "seed %llu, element %d: %g, want %g", (unsigned long long)seed, i, w[i], want);
    }
    tact_ctx_close(&ctx);
}

Test(device_multi, tensors_move_between_virtual_cpu_devices_and_compute_where_they_are) {
    s_round_trip("CPU,CPU:1", "CPU:1", "CPU");
    s_round_trip("CPU:2,CPU:5", "CPU:5", "CPU:2");
}

Test(device_multi, tensors_move_between_the_cpu_and_opencl_both_ways) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    s_round_trip("CPU,CL", "CL:0", "CPU");
    s_round_trip("CL,CPU", "CPU", "CL:0");
}

Test(device_multi, mixing_devices_and_unknown_devices_are_clear_errors) {
    tact_ctx *ctx = s_open("CPU,CPU:1", 1);
    int64_t shape[1] = {4};
    float v[4] = {1, 2, 3, 4};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, shape, v);
    tact_tensor *b = tact_to(a, "CPU:1");
    tact_tensor *bad = tact_add(a, b);
    cr_assert_eq(tact_status_of(bad), TACT_EDEVICE);
    cr_assert(strstr(tact_error_message(bad), "CPU and CPU:1"), "%s", tact_error_message(bad));
    tact_tensor *w = tact_assign(tact_contiguous(tact_to(tact_zeros(ctx, TACT_FLOAT32, 1, shape), "CPU:1")), a);
    cr_assert_eq(tact_status_of(w), TACT_EDEVICE, "%s", tact_error_message(w));
    tact_tensor *nowhere = tact_to(a, "CPU:3");
    cr_assert_eq(tact_status_of(nowhere), TACT_EDEVICE);
    cr_assert(strstr(tact_error_message(nowhere), "CPU, CPU:1"), "%s", tact_error_message(nowhere));
    cr_assert_eq(tact_status_of(tact_to(a, "GPU")), TACT_EINVAL);
    cr_assert_eq(tact_status_of(tact_to(a, NULL)), TACT_EINVAL);
    /* "CPU:0" is "CPU", "CL" is "CL:0": the same device, no copy. */
    cr_assert_eq(tact_to(a, "CPU:0"), a);
    /* Constants join the device they meet; a constant moved is computed there. */
    tact_tensor *k = tact_to(tact_full(ctx, TACT_FLOAT32, 1, shape, 2.5), "CPU:1");
    cr_assert_str_eq(tact_device(k), "CPU:1");
    float out[4];
    cr_assert_eq(tact_read(tact_mul(b, k), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 4; i++) cr_assert_eq(out[i], v[i] * 2.5f);
    tact_ctx_close(&ctx);
    tact_options o;
    tact_options_default(&o);
    o.devices = "CPU,CPU:1,CPU";
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EINVAL);
    cr_assert(strstr(tact_last_open_error(), "CPU is listed twice"), "%s", tact_last_open_error());
    o.devices = "CPU,,CPU:1";
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EINVAL, "%s", tact_last_open_error());
    o.devices = "CPU,CPU:1,CPU:2,CPU:3,CPU:4,CPU:5,CPU:6,CPU:7,CL";
    cr_assert_neq(tact_ctx_open(&ctx, &o), TACT_OK);
    cr_assert_null(ctx);
}

/* The rows of a (m x k) split over the devices, each part times b there,
 * the parts brought back to the first device and joined: out (m x n). */
static void s_split_matmul(const char *devices, int ndev, int threads, const float *a, const float *b, int m, int k, int n, float *out) {
    static const char *names[] = {"CPU", "CPU:1", "CPU:2", "CPU:3"};
    tact_ctx *ctx = s_open(devices, threads);
    int64_t sa[2] = {m, k}, sb[2] = {k, n};
    tact_tensor *ta = tact_from_data(ctx, TACT_FLOAT32, 2, sa, a), *tb = tact_from_data(ctx, TACT_FLOAT32, 2, sb, b);
    tact_tensor *parts[4];
    int rows = (m + ndev - 1) / ndev;
    for (int d = 0; d < ndev; d++) {
        int64_t r[2][2] = {{d * rows, (d + 1) * rows < m ? (d + 1) * rows : m}, {0, k}};
        tact_tensor *slice = tact_to(tact_shrink(ta, r), names[d]);
        parts[d] = tact_to(tact_matmul(slice, tact_to(tb, names[d])), "CPU");
    }
    tact_tensor *c = tact_cat(ndev, parts, 0);
    cr_assert_eq(tact_read(c, out, sizeof(float) * (size_t)m * (size_t)n), TACT_OK, "%s: %s", devices, tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
}

Test(device_multi, a_matmul_split_over_devices_matches_one_device_and_repeats_bit_for_bit) {
    uint64_t seed = tu_seed();
    enum { M = 37, K = 64, N = 29 };
    float a[M * K], b[K * N], one[M * N], two[M * N], four[M * N], again[M * N];
    s_fill(a, M * K, seed);
    s_fill(b, K * N, seed + 1);
    s_split_matmul("CPU", 1, 1, a, b, M, K, N, one);
    s_split_matmul("CPU,CPU:1", 2, 1, a, b, M, K, N, two);
    s_split_matmul("CPU,CPU:1,CPU:2,CPU:3", 4, 1, a, b, M, K, N, four);
    s_split_matmul("CPU,CPU:1,CPU:2,CPU:3", 4, 2, a, b, M, K, N, again);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0;
            for (int q = 0; q < K; q++) want += (double)a[i * K + q] * b[q * N + j];
            float got[3] = {one[i * N + j], two[i * N + j], four[i * N + j]};
            for (int g = 0; g < 3; g++)
                cr_assert(fabs(got[g] - want) <= 1e-4 + 1e-5 * fabs(want), "seed %llu, (%d, %d) with %d devices: %g, want %g",
                          (unsigned long long)seed, i, j, 1 << g, got[g], want);
        }
    cr_assert(memcmp(four, again, sizeof four) == 0, "seed %llu: 4 devices with 1 and 2 threads each differ", (unsigned long long)seed);
}

/* Two devices, each given a long matmul of its own in one realize: the
 * executors' own record says both ran a kernel at the same moment. */
Test(device_multi, two_devices_run_kernels_at_the_same_time) {
    enum { S = 384 };
    float *a = malloc(sizeof(float) * S * S);
    s_fill(a, S * S, tu_seed());
    tact_ctx *ctx = s_open("CPU,CPU:1", 1);
    int64_t shape[2] = {S, S};
    int peak = 0;
    /* Each round is two kernels of about 10 ms, dispatched together; a box
     * too busy to run them at once in one round gets a few more. */
    for (int round = 0; round < 20 && peak < 2; round++) {
        ta_executor_busy_peak(1);
        tact_scope_begin(ctx);
        tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, shape, a);
        tact_tensor *y = tact_to(x, "CPU:1");
        /* Different every round (the scale), so nothing is reused. */
        tact_tensor *p = tact_matmul(tact_mul(x, tact_scalar(ctx, round + 1)), x);
        tact_tensor *q = tact_matmul(tact_mul(y, tact_scalar(ctx, round + 2)), y);
        tact_tensor *both[2] = {p, q};
        cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%s", tact_ctx_error(ctx));
        peak = ta_executor_busy_peak(0);
        tact_scope_end(ctx);
    }
    cr_assert_eq(peak, 2, "the two executors never ran a kernel at the same moment in 20 rounds");
    tact_ctx_close(&ctx);
    free(a);
}

/* A run over two devices, recorded, replays with every stage (both
 * executors among them) matching. */
Test(device_multi, a_recorded_run_over_two_devices_replays_exactly) {
    char *path = tu_tmpfile("multi.tlog");
    tact_options o;
    tact_options_default(&o);
    o.devices = "CPU,CPU:1";
    o.log_path = path;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
    int64_t shape[2] = {2, 3};
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, shape, v);
    tact_tensor *y = tact_exp2(tact_to(x, "CPU:1"));
    tact_tensor *z = tact_add(tact_to(y, "CPU"), x);
    cr_assert_eq(tact_read(z, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_assert(fabs(out[i] - (exp2(v[i]) + v[i])) <= 1e-5 * out[i], "element %d: %g", i, out[i]);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    char verdict[512];
    int rc = ta_rerun(path, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_OK, "%s", verdict);
    unlink(path);
    free(path);
}
