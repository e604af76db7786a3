/* bench_devices.c - `tact bench devices`: the OpenCL device (PoCL here) against the CPU device, the same expressions in one run. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "tact.h"

static tact_tensor *s_fma(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    return tact_add(tact_mul(in[0], in[1]), in[2]);
}

int h_bench_devices(int quick) {
    tact_device_info d[8];
    int n = tact_devices(d, 8), cl = -1;
    for (int i = 0; i < n && i < 8 && cl < 0; i++)
        if (d[i].name[0] == 'C' && d[i].name[1] == 'L') cl = i;
    if (cl < 0) {
        fprintf(stderr, "bench devices: no OpenCL device (install pocl-opencl-icd)\n");
        return 1;
    }
    const char *peer = "tact CPU device";
    int reps = quick ? 2 : 5, ok = 1;
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
