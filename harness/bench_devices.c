/* bench_devices.c - `tact bench devices`: the OpenCL device (PoCL here) against the CPU device, and a matmul sharded over two CPU devices against one, in one run. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "tact.h"

static tact_tensor *s_fma(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    return tact_add(tact_mul(in[0], in[1]), in[2]);
}

/* A split by rows over the context's devices, B copied whole to each. */
static const char *s_shard_over;

static void s_shard_ab(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    in[0] = tact_shard(in[0], s_shard_over, 0);
    in[1] = tact_shard(in[1], s_shard_over, TACT_REPLICATE);
}

/* The best time of A @ B on a context over devices of one thread each,
 * sharded when there are several (the parts stay where they are). */
static double s_matmul_on(const char *devices, int ndev, float *a, float *b, int m, int reps) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    o.cpu_threads = 1;
    s_shard_over = devices;
    float *data[2] = {a, b};
    int64_t shapes[2][2] = {{m, m}, {m, m}};
    int ndims[2] = {2, 2};
    return h_tact_best_with(&o, 2, data, shapes, ndims, ndev > 1 ? s_shard_ab : NULL, h_matmul, reps);
}

int h_bench_devices(int quick) {
    int reps = quick ? 2 : 5, ok = 1;
    /* A 1024^3 matmul, its rows split over two virtual CPU devices of one
     * thread each, against one device of one thread. */
    enum { S = 1024 };
    float *sa = h_fill((size_t)S * S, 6), *sb = h_fill((size_t)S * S, 7);
    /* The two sides in turns, the best of each: load from elsewhere on a
     * shared box then hits both alike instead of one side's whole run. */
    double one = 1e30, two = 1e30;
    for (int r = 0; r < reps && one > 0 && two > 0; r++) {
        double t1 = s_matmul_on("CPU", 1, sa, sb, S, 1), t2 = s_matmul_on("CPU,CPU:1", 2, sa, sb, S, 1);
        one = t1 < 0 ? t1 : t1 < one ? t1 : one;
        two = t2 < 0 ? t2 : t2 < two ? t2 : two;
    }
    if (one > 0 && two > 0) h_line("devices.shard2_matmul_speedup", one / two, "x", "tact, one CPU device of one thread", 1.0, one / two);
    else ok = 0;
    free(sa), free(sb);
    tact_device_info d[8];
    int n = tact_devices(d, 8), cl = -1;
    for (int i = 0; i < n && i < 8 && cl < 0; i++)
        if (d[i].name[0] == 'C' && d[i].name[1] == 'L') cl = i;
    if (cl < 0) {
        fprintf(stderr, "bench devices: no OpenCL device (install pocl-opencl-icd)\n");
        return 1;
    }
    const char *peer = "tact CPU device";
    /* x*y+z over 4M floats: 64 MiB of traffic a run. */
    enum { E = 4 << 20 };
    float *data[3] = {h_fill(E, 1), h_fill(E, 2), h_fill(E, 3)};
    int64_t shapes[3][2] = {{E, 1}, {E, 1}, {E, 1}};
    int ndims[3] = {1, 1, 1};
    double tcl = h_tact_best(d[cl].name, 3, data, shapes, ndims, s_fma, reps), tcpu = h_tact_best("CPU", 3, data, shapes, ndims, s_fma, reps);
    double bytes = 16.0 * E;
    if (tcl > 0 && tcpu > 0) h_line("devices.cl_elementwise_gbs", bytes / tcl * 1e-9, "GB/s", peer, bytes / tcpu * 1e-9, tcpu / tcl);
    else ok = 0;
    for (int i = 0; i < 3; i++) free(data[i]);
    /* A 512x512x512 matmul. */
    enum { M = 512 };
    float *mm[2] = {h_fill(M * M, 4), h_fill(M * M, 5)};
    int64_t ms[2][2] = {{M, M}, {M, M}};
    int md[2] = {2, 2};
    tcl = h_tact_best(d[cl].name, 2, mm, ms, md, h_matmul, reps), tcpu = h_tact_best("CPU", 2, mm, ms, md, h_matmul, reps);
    double flops = 2.0 * M * M * M;
    if (tcl > 0 && tcpu > 0) h_line("devices.cl_matmul_gflops", flops / tcl * 1e-9, "GFLOPS", peer, flops / tcpu * 1e-9, tcpu / tcl);
    else ok = 0;
    free(mm[0]), free(mm[1]);
    return ok ? 0 : 1;
}
