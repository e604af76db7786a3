/* test_multi.c - several devices in one context: tensors on each, copies between them as steps of a realize, devices working at once. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "log.h"
#include "pipeline.h"
#include "replay.h"
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

static void s_read_ok(tact_ctx *ctx, tact_tensor *t, float *out, size_t n, const char *what) {
    cr_assert_eq(tact_read(t, out, sizeof(float) * n), TACT_OK, "%s: %s / %s", what, tact_ctx_error(ctx), tact_error_message(t));
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
    /* The same kernel on both devices in one realize (one compiler, one
     * AST): each gets the program of its own kind. */
    tact_ctx *ctx = s_open("CPU,CL", 1);
    int64_t n = 64;
    float v[64], out[2][64];
    for (int i = 0; i < 64; i++) v[i] = (float)i - 20;
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v), *xc = tact_to(x, "CL");
    tact_tensor *both[2] = {tact_exp2(tact_mul(x, x)), tact_exp2(tact_mul(xc, xc))};
    cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%s", tact_ctx_error(ctx));
    s_read_ok(ctx, both[0], out[0], 64, "on the CPU");
    s_read_ok(ctx, both[1], out[1], 64, "on CL");
    for (int i = 0; i < 64; i++) cr_assert_eq(out[0][i], out[1][i], "element %d: CPU %g, CL %g", i, out[0][i], out[1][i]);
    tact_ctx_close(&ctx);
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
    /* A device that is not there, a worker's without its key or with
     * nobody listening, a malformed URI. */
    static const struct {
        const char *list, *error;
        int code;
    } refused[] = {{"CPU,CPU:8", "no device CPU:8", TACT_EDEVICE},
               {"CPU,tcp://gpu-box.invalid:5555/CUDA:0", "needs its public key", TACT_EINVAL},
               {"ipc:///tmp/tact-nobody-listens/CL:0", "nothing listens there", TACT_ETRANSPORT},
               {"tcp://host/CPU", "not a device URI", TACT_EINVAL},
               {"tcp://host:99999/CPU", "not a device URI", TACT_EINVAL},
               {"CPU, CPU:1", "space", TACT_EINVAL}};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        o.devices = refused[i].list;
        cr_assert_eq(tact_ctx_open(&ctx, &o), refused[i].code, "%s: %s", refused[i].list, tact_last_open_error());
        cr_assert(strstr(tact_last_open_error(), refused[i].error), "%s: %s", refused[i].list, tact_last_open_error());
        cr_assert_null(ctx);
    }
}

/* No fixed number of devices: every virtual CPU device and the OpenCL
 * one (9 devices, one more than the wiring's old fixed 8) in one context,
 * a tensor split over all of them and summed. */
Test(device_multi, a_context_takes_as_many_devices_as_the_machine_has) {
    if (!ta_cl_device.count()) cr_skip_test("no OpenCL device");
    const char *all = "CPU,CPU:1,CPU:2,CPU:3,CPU:4,CPU:5,CPU:6,CPU:7,CL";
    tact_ctx *ctx = s_open(all, 1);
    enum { N = 100 };
    float v[N];
    double want = 0;
    for (int i = 0; i < N; i++) v[i] = (float)i * 0.5f, want += v[i];
    int64_t n = N;
    tact_tensor *x = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 1, &n, v), all, 0);
    cr_assert_str_eq(tact_device(x), "CPU,CPU:1,CPU:2,CPU:3,CPU:4,CPU:5,CPU:6,CPU:7,CL:0");
    double got = 0;
    cr_assert_eq(tact_item(tact_sum(x, -1, NULL, 0), &got), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(got, want);
    tact_device_stats st;
    cr_assert_eq(tact_ctx_device_stats(ctx, "CL", &st), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_gt(st.kernels, 0);
    tact_ctx_close(&ctx);
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
    enum { S = 768 };
    float *a = malloc(sizeof(float) * S * S);
    s_fill(a, S * S, tu_seed());
    tact_ctx *ctx = s_open("CPU,CPU:1", 1);
    int64_t shape[2] = {S, S};
    int peak = 0;
    /* Each round is two kernels of several milliseconds (a 768^3 matmul on
     * one thread), dispatched together; a box too busy to run them at once
     * in one round gets a few more. */
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

/* A context on CPU and CPU:1 recording every message to a fresh file
 * (*path, the caller's to free). */
static tact_ctx *s_open_logged(char **path) {
    *path = tu_tmpfile("multi.tlog");
    tact_options o;
    tact_options_default(&o);
    o.devices = "CPU,CPU:1";
    o.log_path = *path;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

/* A run over two devices, recorded, replays with every stage (both
 * executors among them) matching. */
Test(device_multi, a_recorded_run_over_two_devices_replays_exactly) {
    char *path;
    tact_ctx *ctx = s_open_logged(&path);
    float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
    int64_t shape[2] = {2, 3};
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, shape, v);
    tact_tensor *y = tact_exp2(tact_to(x, "CPU:1"));
    tact_tensor *z = tact_add(tact_to(y, "CPU"), x);
    cr_assert_eq(tact_read(z, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    for (int i = 0; i < 6; i++) cr_assert(fabs(out[i] - (exp2(v[i]) + v[i])) <= 1e-5 * out[i], "element %d: %g", i, out[i]);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    char verdict[512];
    ta_rerun_options_t on = {"CPU,CPU:1", 0, 0, NULL};
    int rc = ta_rerun(path, &on, NULL, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_OK, "%s", verdict);
    /* On the user's default devices (one CPU) it would not match: refused. */
    unsetenv("TACT_DEVICE");
    rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_EINVAL, "%s", verdict);
    cr_assert(strstr(verdict, "--devices CPU,CPU:1"), "%s", verdict);
    unlink(path);
    free(path);
}

/* ------------------------------------------------------------ sharding */

static const char *s_devs[5] = {NULL, "CPU", "CPU,CPU:1", "CPU,CPU:1,CPU:2", "CPU,CPU:1,CPU:2,CPU:3"};


/* Elementwise ops, reduces along and across the split axis, a reshape
 * that moves the axis and a permute, on shards of every size the reference
 * makes (7 rows over 3 devices: 3, 3, 1; 2 rows over 4: 1, 1, 0, 0),
 * against double loops. */
Test(device_multi, sharded_elementwise_reduce_and_movement_ops_match_loops) {
    uint64_t seed = tu_seed();
    static const int cases[][3] = {{7, 5, 3}, {7, 5, 4}, {2, 6, 4}, {8, 3, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int R = cases[c][0], C = cases[c][1], nd = cases[c][2];
        float x[64], y[64], rows[8], cols[8], all, t[64];
        s_fill(x, R * C, seed + c);
        tact_ctx *ctx = s_open(s_devs[4], 1);
        int64_t shape[2] = {R, C};
        for (int axis = 0; axis < 2; axis++) {
            tact_tensor *xs = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, shape, x), s_devs[nd], axis);
            cr_assert_str_eq(tact_device(xs), s_devs[nd]);
            tact_tensor *e = tact_sub(tact_mul(tact_exp(xs), tact_scalar(ctx, 0.5)), xs);
            int a0 = 0, a1 = 1, order[2] = {1, 0};
            s_read_ok(ctx, e, y, (size_t)(R * C), "elementwise");
            s_read_ok(ctx, tact_sum(e, 1, &a1, 0), rows, (size_t)R, "sum over columns");
            s_read_ok(ctx, tact_max(e, 1, &a0, 0), cols, (size_t)C, "max over rows");
            s_read_ok(ctx, tact_sum(e, -1, NULL, 0), &all, 1, "sum of all");
            /* permute moves the axis; a reshape to (R*C) keeps it first only when split on rows */
            s_read_ok(ctx, tact_contiguous(tact_permute(e, order)), t, (size_t)(R * C), "permute");
            double total = 0, mag = 0;
            for (int i = 0; i < R; i++) {
                double rs = 0, rm = 0;
                for (int j = 0; j < C; j++) {
                    double v = exp((double)x[i * C + j]) * 0.5 - x[i * C + j];
                    cr_assert(fabs(y[i * C + j] - v) <= 1e-5 * (1 + fabs(v)), "seed %llu case %zu axis %d: (%d,%d) %g, want %g", (unsigned long long)seed, c,
                              axis, i, j, y[i * C + j], v);
                    cr_assert_eq(t[j * R + i], y[i * C + j], "permute (%d,%d)", i, j);
                    rs += v, rm += fabs(v);
                }
                total += rs, mag += rm;
                cr_assert(fabs(rows[i] - rs) <= 1e-5 * (1 + rm), "seed %llu case %zu axis %d: row %d sum %g, want %g", (unsigned long long)seed, c, axis, i,
                          rows[i], rs);
            }
            for (int j = 0; j < C; j++) {
                float m = -INFINITY;
                for (int i = 0; i < R; i++) m = fmaxf(m, y[i * C + j]);
                cr_assert_eq(cols[j], m, "seed %llu case %zu axis %d: column %d max", (unsigned long long)seed, c, axis, j);
            }
            cr_assert(fabs(all - total) <= 1e-5 * (1 + mag), "seed %llu case %zu axis %d: sum %g, want %g", (unsigned long long)seed, c, axis, all, total);
        }
        tact_ctx_close(&ctx);
    }
}

/* A matmul with A split on rows (B replicated), on K (both split), and B
 * split on columns, against a double loop; a reduce over the split axis
 * makes every device's copy of the result, bit for bit the same. */
Test(device_multi, a_matmul_sharded_on_either_operand_matches_a_double_loop) {
    uint64_t seed = tu_seed();
    enum { M = 9, K = 10, N = 7 };
    float a[M * K], b[K * N], out[3][M * N];
    s_fill(a, M * K, seed);
    s_fill(b, K * N, seed + 1);
    tact_ctx *ctx = s_open(s_devs[3], 1);
    int64_t sa[2] = {M, K}, sb[2] = {K, N};
    tact_tensor *ta = tact_from_data(ctx, TACT_FLOAT32, 2, sa, a), *tb = tact_from_data(ctx, TACT_FLOAT32, 2, sb, b);
    const char *d = s_devs[3];
    tact_tensor *rows = tact_matmul(tact_shard(ta, d, 0), tact_shard(tb, d, TACT_REPLICATE));
    tact_tensor *inner = tact_matmul(tact_shard(ta, d, 1), tact_shard(tb, d, 0));
    tact_tensor *cols = tact_matmul(tact_shard(ta, d, TACT_REPLICATE), tact_shard(tb, d, -1));
    s_read_ok(ctx, rows, out[0], M * N, "rows");
    s_read_ok(ctx, inner, out[1], M * N, "inner");
    s_read_ok(ctx, cols, out[2], M * N, "columns");
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double want = 0, mag = 0;
                for (int q = 0; q < K; q++) want += (double)a[i * K + q] * b[q * N + j], mag += fabs((double)a[i * K + q] * b[q * N + j]);
                cr_assert(fabs(out[v][i * N + j] - want) <= 1e-5 * (1 + mag), "seed %llu, variant %d (%d,%d): %g, want %g", (unsigned long long)seed, v, i,
                          j, out[v][i * N + j], want);
            }
    /* The replicated result of the K split, read from each device. */
    float on[3][M * N];
    static const char *names[3] = {"CPU", "CPU:1", "CPU:2"};
    for (int k = 0; k < 3; k++) s_read_ok(ctx, tact_to(inner, names[k]), on[k], M * N, names[k]);
    cr_assert(memcmp(on[0], on[1], sizeof on[0]) == 0 && memcmp(on[0], on[2], sizeof on[0]) == 0, "the devices' copies of an all-reduce differ");
    tact_ctx_close(&ctx);
}

Test(device_multi, sharding_refuses_what_the_reference_refuses) {
    tact_ctx *ctx = s_open(s_devs[2], 1);
    int64_t shape[2] = {4, 6};
    tact_tensor *x = tact_zeros(ctx, TACT_FLOAT32, 2, shape), *x0 = tact_contiguous(x);
    tact_tensor *s = tact_shard(x0, "CPU,CPU:1", 0);
    cr_assert_eq(tact_status_of(s), TACT_OK, "%s", tact_error_message(s));
    tact_tensor *bad[] = {
        tact_add(s, x0),                                          /* a sharded tensor and one on CPU */
        tact_shard(s, "CPU", 0),                                  /* sharded twice */
        tact_expand(tact_shard(tact_contiguous(tact_shrink(x0, (const int64_t[][2]){{0, 1}, {0, 6}})), "CPU,CPU:1", 0), 2, shape), /* expanding the split axis */
        tact_pad(s, (const int64_t[][2]){{1, 0}, {0, 0}}, 0),     /* padding the split axis */
        tact_shrink(s, (const int64_t[][2]){{1, 3}, {0, 6}}),     /* shrinking it */
        tact_flip(s, 1, (int[]){0}),                              /* flipping it */
        tact_shard(x0, "CPU,CPU:5", 0),                           /* a device the context lacks */
        tact_shard(x0, "CPU,CPU", 0),                             /* one twice */
        tact_shard(x0, "CPU,CPU:1", 2),                           /* no such axis */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) cr_assert_neq(tact_status_of(bad[i]), TACT_OK, "case %zu was accepted", i);
    cr_assert(strstr(tact_error_message(bad[0]), "sharded tensor and one on CPU"), "%s", tact_error_message(bad[0]));
    /* What may be done: a source split another way is gathered and split
     * like the other; expand, pad and shrink along other axes; a gather. */
    float vals[24], sum[24];
    for (int i = 0; i < 24; i++) vals[i] = (float)i;
    tact_tensor *vx = tact_from_data(ctx, TACT_FLOAT32, 2, shape, vals);
    tact_tensor *mixed = tact_add(tact_shard(vx, "CPU,CPU:1", 0), tact_shard(vx, "CPU,CPU:1", 1));
    cr_assert_str_eq(tact_device(mixed), "CPU,CPU:1");
    s_read_ok(ctx, mixed, sum, 24, "a sum of two splits");
    for (int i = 0; i < 24; i++) cr_assert_eq(sum[i], 2 * vals[i]);
    /* Split after a reshape (parts of 6 and 4 rows of (10,3), not 5 and
     * 5): the other source is split the same way. */
    int64_t s56[2] = {5, 6}, s103[2] = {10, 3};
    float thirty[30], got30[30];
    for (int i = 0; i < 30; i++) thirty[i] = (float)i;
    tact_tensor *r = tact_reshape(tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, s56, thirty), "CPU,CPU:1", 0), 2, s103);
    tact_tensor *other = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, s103, thirty), "CPU,CPU:1", 1);
    s_read_ok(ctx, tact_sub(r, other), got30, 30, "a reshaped split minus another");
    for (int i = 0; i < 30; i++) cr_assert_eq(got30[i], 0, "element %d", i);
    tact_tensor *ok = tact_shrink(tact_pad(s, (const int64_t[][2]){{0, 0}, {1, 1}}, 1), (const int64_t[][2]){{0, 4}, {2, 8}});
    float out[24];
    s_read_ok(ctx, tact_to(ok, "CPU:1"), out, 24, "pad and shrink along the other axis");
    for (int i = 0; i < 24; i++) cr_assert_eq(out[i], (i % 6) == 5 ? 1 : 0);
    tact_ctx_close(&ctx);
}

/* One SGD step of a linear model on mean squared error, the batch split
 * over the devices and the parameters (on the first device) replicated
 * into the step: the gradients come back through every device's copy and
 * add up on the first.  Five steps on 2 and 4 devices give one device's
 * weights within float tolerance, and the same bits again on a rerun with
 * another thread count. */
/* The trained model: a linear layer of S_I inputs and S_O outputs. */
enum { S_I = 6, S_O = 3, S_W = S_I * S_O };

static void s_train_as(int nd, int threads, int steps, int sharded_params, float *w_out, float *b_out) {
    enum { B = 10, I = S_I, O = S_O };
    uint64_t rng = 99;
    float x[B * I], y[B * O], w[I * O], b[O];
    for (int i = 0; i < B * I; i++) x[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
    for (int i = 0; i < B * O; i++) y[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
    for (int i = 0; i < I * O; i++) w[i] = (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 - 0.5);
    for (int i = 0; i < O; i++) b[i] = 0.1f * (float)i;
    tact_ctx *ctx = s_open(s_devs[nd], threads);
    int64_t sx[2] = {B, I}, sy[2] = {B, O}, sw[2] = {I, O}, sb[1] = {O};
    tact_tensor *tw = tact_from_data(ctx, TACT_FLOAT32, 2, sw, w), *tb = tact_from_data(ctx, TACT_FLOAT32, 1, sb, b);
    /* The parameters on the first device, replicated into each step, or
     * replicated once and updated on every device (sharded_params). */
    if (sharded_params) tw = tact_shard(tw, s_devs[nd], TACT_REPLICATE), tb = tact_shard(tb, s_devs[nd], TACT_REPLICATE);
    tw = tact_keep(tact_set_requires_grad(tw, 1)), tb = tact_keep(tact_set_requires_grad(tb, 1));
    tact_tensor *tx = tact_keep(tact_from_data(ctx, TACT_FLOAT32, 2, sx, x)), *ty = tact_keep(tact_from_data(ctx, TACT_FLOAT32, 2, sy, y));
    for (int s = 0; s < steps; s++) {
        tact_scope_begin(ctx);
        tact_tensor *xs = nd > 1 ? tact_shard(tx, s_devs[nd], 0) : tx, *ys = nd > 1 ? tact_shard(ty, s_devs[nd], 0) : ty;
        tact_tensor *ws = nd > 1 && !sharded_params ? tact_shard(tw, s_devs[nd], TACT_REPLICATE) : tw;
        tact_tensor *bs = nd > 1 && !sharded_params ? tact_shard(tb, s_devs[nd], TACT_REPLICATE) : tb;
        tact_tensor *err = tact_sub(tact_add(tact_matmul(xs, ws), bs), ys);
        tact_tensor *loss = tact_mean(tact_square(err), -1, NULL, 0);
        cr_assert_eq(tact_backward(loss, NULL), TACT_OK, "%d devices, step %d: %s", nd, s, tact_ctx_error(ctx));
        tact_set_no_grad(ctx, 1);
        tact_assign(tw, tact_sub(tw, tact_mul(tact_grad(tw), tact_scalar(ctx, 0.1))));
        tact_assign(tb, tact_sub(tb, tact_mul(tact_grad(tb), tact_scalar(ctx, 0.1))));
        tact_set_no_grad(ctx, 0);
        tact_tensor *both[2] = {tw, tb};
        cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%d devices, step %d: %s", nd, s, tact_ctx_error(ctx));
        tact_grad_clear(tw), tact_grad_clear(tb);
        tact_scope_end(ctx);
    }
    s_read_ok(ctx, tw, w_out, I * O, "weights");
    s_read_ok(ctx, tb, b_out, O, "bias");
    tact_ctx_close(&ctx);
}

static void s_train(int nd, int threads, int steps, float *w_out, float *b_out) { s_train_as(nd, threads, steps, 0, w_out, b_out); }

/* The model trained on several devices (w, b) is one device's (w1, b1)
 * within 1e-5. */
static void s_same_model(const float *w1, const float *b1, const float *w, const float *b, const char *what) {
    for (int i = 0; i < S_W; i++) cr_assert(fabs(w[i] - w1[i]) <= 1e-5 + 1e-5 * fabs(w1[i]), "weight %d: %s %g, one device %g", i, what, w[i], w1[i]);
    for (int i = 0; i < S_O; i++) cr_assert(fabs(b[i] - b1[i]) <= 1e-5 + 1e-5 * fabs(b1[i]), "bias %d: %s %g, one device %g", i, what, b[i], b1[i]);
}

Test(device_multi, a_data_parallel_training_step_matches_one_device) {
    float w1[S_W], b1[S_O], w2[S_W], b2[S_O], w4[S_W], b4[S_O], again[S_W], bagain[S_O];
    s_train(1, 1, 5, w1, b1);
    s_train(2, 1, 5, w2, b2);
    s_train(4, 1, 5, w4, b4);
    s_train(4, 2, 5, again, bagain);
    s_same_model(w1, b1, w2, b2, "2 devices");
    s_same_model(w1, b1, w4, b4, "4 devices");
    cr_assert(memcmp(w4, again, sizeof w4) == 0 && memcmp(b4, bagain, sizeof b4) == 0, "4 devices: two runs (1 and 2 threads) differ");
    /* The training moved the weights at all. */
    float w0[S_W], b0[S_O];
    s_train(1, 1, 0, w0, b0);
    double moved = 0;
    for (int i = 0; i < S_W; i++) moved += fabs(w1[i] - w0[i]);
    cr_assert_gt(moved, 1e-3);
}

/* Over more than two devices and 256k elements, a reduce over the split
 * axis combines the partial results in a ring (the reference's choice):
 * the same values, on every device, for an even and an uneven chunking. */
Test(device_multi, a_large_all_reduce_goes_round_a_ring_and_matches_a_loop) {
    uint64_t seed = tu_seed();
    static const int64_t widths[2] = {270000, 270001};
    for (int w = 0; w < 2; w++) {
        int64_t W = widths[w], shape[2] = {3, W};
        float *x = malloc(sizeof(float) * 3 * (size_t)W), *got[3];
        s_fill(x, (int)(3 * W), seed + (uint64_t)w);
        tact_ctx *ctx = s_open(s_devs[3], 1);
        int a0 = 0;
        tact_tensor *s = tact_sum(tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, shape, x), s_devs[3], 0), 1, &a0, 0);
        static const char *names[3] = {"CPU", "CPU:1", "CPU:2"};
        for (int d = 0; d < 3; d++) {
            got[d] = malloc(sizeof(float) * (size_t)W);
            s_read_ok(ctx, tact_to(s, names[d]), got[d], (size_t)W, names[d]);
        }
        for (int64_t j = 0; j < W; j++) {
            double want = (double)x[j] + x[W + j] + x[2 * W + j], mag = fabs(x[j]) + fabs(x[W + j]) + fabs(x[2 * W + j]);
            cr_assert(fabs(got[0][j] - want) <= 1e-6 * (1 + mag), "seed %llu width %lld: element %lld: %g, want %g", (unsigned long long)seed,
                      (long long)W, (long long)j, got[0][j], want);
        }
        cr_assert(memcmp(got[0], got[1], sizeof(float) * (size_t)W) == 0 && memcmp(got[0], got[2], sizeof(float) * (size_t)W) == 0,
                  "width %lld: the devices' copies differ", (long long)W);
        tact_ctx_close(&ctx);
        for (int d = 0; d < 3; d++) free(got[d]);
        free(x);
    }
}

/* ----------------------------------------------------- copies that fail */

/* Records y = to(x * 3, "CPU:1") read back, on CPU and CPU:1; returns the
 * log's path. */
static char *s_record_copy(void) {
    char *path;
    tact_ctx *ctx = s_open_logged(&path);
    float v[4] = {1, 2, 3, 4}, out[4];
    int64_t shape[1] = {4};
    tact_tensor *y = tact_to(tact_mul(tact_from_data(ctx, TACT_FLOAT32, 1, shape, v), tact_scalar(ctx, 3)), "CPU:1");
    cr_assert_eq(tact_read(y, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[3], 12);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    return path;
}

typedef struct {
    const char *want;
    uint32_t dest;
    int found, data;
} s_seen_t;

static int s_seen(void *ud, const ta_msg_t *m) {
    s_seen_t *s = ud;
    if (m->type == TA_MSG_DATA && m->dest == s->dest) s->data++;
    if (m->type == TA_MSG_ERROR && m->dest == s->dest && m->as.error.text.len &&
        memmem(m->as.error.text.ptr, m->as.error.text.len, s->want, strlen(s->want)))
        s->found++;
    return TACT_OK;
}

/* Replays the inbox of the executor on port `port` of the recorded run
 * (CPU's is 7, CPU:1's 8), with the first message of type `type` changed
 * by change(); sends to dest naming want are counted. */
static s_seen_t s_replay_changed(uint32_t port, int type, void (*change)(ta_msg_t *m, uint8_t **copy), uint32_t dest, const char *want) {
    char *path = s_record_copy();
    s_seen_t seen = {want, dest, 0, 0};
    tu_replay_executor_changed(path, port, type, 0, change, s_seen, &seen);
    free(path);
    return seen;
}

static void s_data_to_error(ta_msg_t *m, uint8_t **copy) {
    (void)copy;
    uint64_t corr = m->corr;
    uint32_t sender = m->sender;
    ta_msg_init(m, TA_MSG_ERROR);
    m->corr = corr, m->sender = sender;
    m->as.error.code = TACT_EDEVICE;
    m->as.error.what = ta_bytes_str("COPY");
    m->as.error.text = ta_bytes_str("the sender's kernel failed");
}

/* The sending executor's kernel fails before its send: the receiving
 * executor (port 8) is told so in place of the bytes, never left waiting. */
Test(device_multi, a_failure_before_a_send_reaches_the_receiver_as_an_error) {
    s_seen_t seen = s_replay_changed(7, TA_MSG_PROGRAM, tu_spoil_bulk, 8, "do not match digest");
    cr_assert_eq(seen.found, 1, "the receiver heard of the failure %d times", seen.found);
    cr_assert_eq(seen.data, 0, "bytes went out all the same");
}

/* The receiving executor told that a copy failed fails its realize with
 * the sender's reason, to the client (port 1). */
Test(device_multi, a_copy_that_failed_fails_the_realize_on_the_receiver) {
    s_seen_t seen = s_replay_changed(8, TA_MSG_DATA, s_data_to_error, 1, "copy from CPU failed: the sender's kernel failed");
    cr_assert_eq(seen.found, 1, "the client heard of it %d times", seen.found);
}

/* A copy of 288 MiB (more than an actor keeps of replies nobody asked
 * for) arriving while its receiver is still busy (compiling and running
 * two matmuls of 2 GFLOP: the copy usually comes first) is kept, because
 * the receiver's plan names it; the PROGRAMs that come after it are kept
 * too (it does not count against their limit). */
Test(device_multi, a_copy_larger_than_the_held_reply_limit_arrives_early_and_is_kept) {
    const int64_t n = (int64_t)72 << 20;
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7);
    tact_ctx *ctx = s_open(s_devs[2], 1);
    enum { S = 1024 };
    int64_t sq[2] = {S, S};
    tact_tensor *big = tact_from_data(ctx, TACT_FLOAT32, 1, &n, x);
    tact_tensor *m = tact_to(tact_reshape(tact_arange(ctx, 0, S * S, 1, TACT_FLOAT32), 2, sq), "CPU:1");
    cr_assert_eq(tact_realize(ctx, 1, &m), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_tensor *busy = tact_sum(tact_matmul(tact_matmul(m, m), m), -1, NULL, 0);
    tact_tensor *moved = tact_sum(tact_to(big, "CPU:1"), -1, NULL, 0);
    tact_tensor *both[2] = {busy, moved};
    cr_assert_eq(tact_realize(ctx, 2, both), TACT_OK, "%s", tact_ctx_error(ctx));
    float got;
    s_read_ok(ctx, moved, &got, 1, "the sum of the copy");
    double want = 0;
    for (int64_t i = 0; i < n; i++) want += (double)(i % 7);
    cr_assert(fabs(got - want) <= 1e-5 * want, "sum %g, want %g", got, want);
    tact_ctx_close(&ctx);
    free(x);
}

/* A value made of constants alone has no device until it has a buffer:
 * computed inside a kernel on CPU:1 (even where the scheduler gives it a
 * kernel of its own, read through an expand), and on the first device
 * once realized by itself, from where it must be moved like any tensor. */
Test(device_multi, constants_join_the_device_that_reads_them_until_they_have_a_buffer) {
    tact_ctx *ctx = s_open(s_devs[2], 1);
    int64_t n = 6, one = 1;
    float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
    tact_tensor *x1 = tact_to(tact_from_data(ctx, TACT_FLOAT32, 1, &n, v), "CPU:1");
    tact_tensor *c = tact_exp(tact_full(ctx, TACT_FLOAT32, 1, &one, 2.0)); /* its own kernel, read through an expand */
    tact_tensor *y = tact_add(x1, tact_expand(c, 1, &n));
    cr_assert_str_eq(tact_device(y), "CPU:1");
    s_read_ok(ctx, y, out, 6, "x + e^2 on CPU:1");
    for (int i = 0; i < 6; i++) cr_assert(fabs(out[i] - (v[i] + exp(2.0))) <= 1e-5 * out[i], "element %d: %g", i, out[i]);
    tact_tensor *m = tact_full(ctx, TACT_FLOAT32, 1, &n, 3.0);
    cr_assert_eq(tact_realize(ctx, 1, &m), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_str_eq(tact_device(m), "CPU");
    cr_assert_eq(tact_status_of(tact_add(x1, m)), TACT_EDEVICE);
    s_read_ok(ctx, tact_mul(x1, tact_to(m, "CPU:1")), out, 6, "x * moved 3");
    for (int i = 0; i < 6; i++) cr_assert_eq(out[i], 3 * v[i]);
    tact_ctx_close(&ctx);
}

/* Random numbers are drawn as on one device and put where the tensor
 * is: dropout of a tensor on CPU:1, or sharded over two devices, keeps
 * the same elements as on the first device. */
Test(device_multi, dropout_off_the_first_device_draws_the_same_mask) {
    enum { N = 64 };
    float v[N], one[N], moved[N], sharded[N];
    for (int i = 0; i < N; i++) v[i] = 1 + (float)i;
    int64_t n = N;
    for (int k = 0; k < 3; k++) {
        tact_ctx *ctx = s_open(s_devs[2], 1);
        tact_manual_seed(ctx, 42);
        tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v);
        if (k == 1) x = tact_to(x, "CPU:1");
        if (k == 2) x = tact_shard(x, s_devs[2], 0);
        tact_tensor *d = tact_dropout(x, 0.5, 1);
        cr_assert_str_eq(tact_device(d), k == 0 ? "CPU" : k == 1 ? "CPU:1" : "CPU,CPU:1");
        s_read_ok(ctx, d, k == 0 ? one : k == 1 ? moved : sharded, N, "dropout");
        tact_ctx_close(&ctx);
    }
    int dropped = 0;
    for (int i = 0; i < N; i++) dropped += one[i] == 0;
    cr_assert(dropped > 8 && dropped < 56, "%d of %d dropped", dropped, N);
    cr_assert(memcmp(one, moved, sizeof one) == 0 && memcmp(one, sharded, sizeof one) == 0, "the masks differ");
}

/* A sharded tensor is assigned to part by part (each part has a buffer
 * of its own, also where it was made); a value split another way is
 * refused. */
Test(device_multi, a_sharded_tensor_is_assigned_part_by_part) {
    tact_ctx *ctx = s_open(s_devs[2], 1);
    int64_t shape[2] = {4, 2};
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    for (int axis = -1; axis < 1; axis++) {
        tact_tensor *w = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, shape, v), s_devs[2], axis < 0 ? TACT_REPLICATE : axis);
        tact_tensor *r = tact_assign(w, tact_sub(w, tact_scalar(ctx, 1)));
        cr_assert_eq(tact_status_of(r), TACT_OK, "%s", tact_error_message(r));
        cr_assert_eq(tact_realize(ctx, 1, &w), TACT_OK, "%s", tact_ctx_error(ctx));
        s_read_ok(ctx, w, out, 8, "assigned");
        for (int i = 0; i < 8; i++) cr_assert_eq(out[i], v[i] - 1, "axis %d, element %d", axis, i);
        s_read_ok(ctx, tact_to(w, "CPU:1"), out, 8, "assigned, gathered on CPU:1");
        for (int i = 0; i < 8; i++) cr_assert_eq(out[i], v[i] - 1, "axis %d, element %d on CPU:1", axis, i);
    }
    tact_tensor *a = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, shape, v), s_devs[2], 0);
    tact_tensor *b = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, shape, v), s_devs[2], 1);
    cr_assert_eq(tact_status_of(tact_assign(a, b)), TACT_EDEVICE);
    tact_ctx_close(&ctx);
}

/* The reference's partly real tensors: a shrink along the split axis to
 * exactly one part's bounds keeps that part (the others become zeros),
 * ops follow it, a reduce over the axis keeps the part's result, and the
 * pad back to the whole axis makes every part real again. */
Test(device_multi, a_shrink_to_one_part_and_the_pad_back_follow_the_reference) {
    tact_ctx *ctx = s_open(s_devs[2], 1);
    int64_t shape[2] = {6, 4};
    float v[24], out[24];
    for (int i = 0; i < 24; i++) v[i] = (float)i;
    tact_tensor *x = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 2, shape, v), s_devs[2], 0);
    tact_tensor *s = tact_shrink(x, (const int64_t[][2]){{3, 6}, {0, 4}});
    cr_assert_eq(tact_status_of(s), TACT_OK, "%s", tact_error_message(s));
    cr_assert_str_eq(tact_device(s), "CPU,CPU:1");
    cr_assert_eq(tact_dim(s, 0), 3);
    s_read_ok(ctx, tact_add(tact_mul(s, tact_scalar(ctx, 2)), tact_scalar(ctx, 1)), out, 12, "2 * rows 3..5 + 1");
    for (int i = 0; i < 12; i++) cr_assert_eq(out[i], 2 * v[12 + i] + 1, "element %d", i);
    int a0 = 0;
    s_read_ok(ctx, tact_sum(s, 1, &a0, 0), out, 4, "column sums of rows 3..5");
    for (int c = 0; c < 4; c++) cr_assert_eq(out[c], v[12 + c] + v[16 + c] + v[20 + c], "column %d", c);
    tact_tensor *back = tact_pad(s, (const int64_t[][2]){{3, 0}, {0, 0}}, 0);
    cr_assert_eq(tact_status_of(back), TACT_OK, "%s", tact_error_message(back));
    s_read_ok(ctx, back, out, 24, "padded back");
    for (int i = 0; i < 24; i++) cr_assert_eq(out[i], i < 12 ? 0 : v[i], "element %d", i);
    s_read_ok(ctx, tact_add(back, x), out, 24, "padded back + the whole");
    for (int i = 0; i < 24; i++) cr_assert_eq(out[i], i < 12 ? v[i] : 2 * v[i], "element %d", i);
    /* Not a part's bounds, two axes at once, a pad not back to the whole. */
    cr_assert_eq(tact_status_of(tact_shrink(x, (const int64_t[][2]){{1, 3}, {0, 4}})), TACT_EINVAL);
    cr_assert_eq(tact_status_of(tact_shrink(x, (const int64_t[][2]){{3, 6}, {0, 2}})), TACT_EINVAL);
    cr_assert_eq(tact_status_of(tact_pad(s, (const int64_t[][2]){{1, 0}, {0, 0}}, 0)), TACT_EINVAL);
    cr_assert_eq(tact_status_of(tact_assign(s, s)), TACT_EINVAL);
    tact_ctx_close(&ctx);
}

/* The parameters themselves sharded (replicated on every device, updated
 * there): each copy's gradient is its device's share, and the gradient of
 * the sharded parameter is their sum on every device, as the reference's;
 * five steps on 2 and 4 devices give one device's weights. */
Test(device_multi, replicated_parameters_train_on_every_device_like_one) {
    float w1[S_W], b1[S_O], w2[S_W], b2[S_O], w4[S_W], b4[S_O];
    s_train(1, 1, 5, w1, b1);
    s_train_as(2, 1, 5, 1, w2, b2);
    s_train_as(4, 1, 5, 1, w4, b4);
    s_same_model(w1, b1, w2, b2, "2 devices");
    s_same_model(w1, b1, w4, b4, "4 devices");
}

/* Jobs each executor asked for, per realize: [realize][executor 0 or 1]
 * (the executors' ports come in device order: the first is the lower). */
typedef struct {
    int jobs[16][2];
    int sent[16]; /* COMPILEs of each realize */
    uint32_t first_port;
} s_asked_t;

/* The lower of the two executors' ports (every executor sends COMPILEs). */
static void s_count_asked(const ta_msg_t *m, void *ud) {
    s_asked_t *a = ud;
    if (!a->first_port || m->sender < a->first_port) a->first_port = m->sender;
}

static void s_count_asked2(const ta_msg_t *m, void *ud) {
    s_asked_t *a = ud;
    if (m->as.compile.realize < 16) a->jobs[m->as.compile.realize][m->sender != a->first_port] += (int)m->as.compile.jobs.n;
}

static void s_count_compiles(const ta_msg_t *m, void *ud) {
    s_asked_t *a = ud;
    if (m->as.compile.realize < 16) a->sent[m->as.compile.realize]++;
}

static void s_note_program(const ta_msg_t *m, void *ud) {
    char *seen = ud;
    snprintf(seen + strlen(seen), 800 - strlen(seen), " [P r%llu final %llu st %lld]", (unsigned long long)m->as.program.realize,
             (unsigned long long)m->as.program.final, (long long)m->as.program.status);
}

/* Programs are held by the executor that asked for them: a kernel run on
 * CPU for three realizes is asked for by CPU's executor alone (its quick,
 * then its final build); when it first runs on CPU:1, that executor lacks
 * it and asks, and gets it (the result is right); nobody asks after. */
Test(device_multi, an_executor_asks_for_a_program_it_lacks_and_gets_it) {
    char *path = tu_tmpfile("asks");
    tact_options o;
    tact_options_default(&o);
    o.devices = s_devs[2];
    o.cpu_threads = 1;
    o.log_path = path;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    int64_t n = 32;
    float v[32], out[32];
    for (int i = 0; i < 32; i++) v[i] = (float)i - 7.5f;
    tact_tensor *x = tact_keep(tact_from_data(ctx, TACT_FLOAT32, 1, &n, v));
    tact_tensor *x1 = tact_keep(tact_to(x, "CPU:1"));
    for (int r = 1; r <= 5; r++) {
        tact_scope_begin(ctx);
        tact_tensor *src = r >= 4 ? x1 : x;
        tact_tensor *y = tact_add(tact_mul(src, src), tact_scalar(ctx, 0.25 * r)); /* one kernel, its constant an argument */
        s_read_ok(ctx, y, out, 32, "x * x + c");
        for (int i = 0; i < 32; i++) cr_assert_eq(out[i], v[i] * v[i] + (float)(0.25 * r), "realize %d, [%d]", r, i);
        tact_scope_end(ctx);
    }
    tact_ctx_close(&ctx);
    s_asked_t a;
    memset(&a, 0, sizeof a);
    tu_log_sent(path, "executor", TA_MSG_COMPILE, s_count_asked, &a);
    tu_log_sent(path, "executor", TA_MSG_COMPILE, s_count_asked2, &a);
    char seen[800] = "";
    tu_log_sent(path, "compiler", TA_MSG_PROGRAM, s_note_program, seen);
    for (int r = 1; r < 8; r++) snprintf(seen + strlen(seen), sizeof seen - strlen(seen), " r%d:%d,%d", r, a.jobs[r][0], a.jobs[r][1]);
    int total[2] = {0, 0};
    for (int r = 0; r < 16; r++) total[0] += a.jobs[r][0], total[1] += a.jobs[r][1];
    /* CPU asked twice for the kernel (quick, then final), and for nothing
     * else of it; CPU:1 asked for it when it first ran there. */
    cr_assert(total[0] >= 2, "CPU's executor asked for %d programs:%s", total[0], seen);
    cr_assert(total[1] >= 1, "CPU:1's executor never asked for the kernel it lacked:%s", seen);
    int last = 0;
    for (int r = 0; r < 16; r++)
        if (a.jobs[r][1]) last = r;
    cr_assert(last >= 1, "CPU:1 asked in realize %d", last);
    for (int r = last + 2; r < 16; r++) cr_assert_eq(a.jobs[r][0] + a.jobs[r][1], 0, "realize %d asked:%s", r, seen);
    /* Two executors: each sends every compiler one COMPILE a realize, jobs
     * or not, so the compilers' merge of their streams goes on. */
    tu_log_sent(path, "executor", TA_MSG_COMPILE, s_count_compiles, &a);
    for (int r = 2; r <= 5; r++) cr_assert(a.sent[r] == a.sent[1] && a.sent[1] >= 2 && a.sent[1] % 2 == 0, "COMPILEs of realize %d: %d, of realize 1: %d", r, a.sent[r], a.sent[1]);
    unlink(path);
    free(path);
}
