/* bench_cuda.c - `tact bench cuda`: the CUDA device against PyTorch (cuBLAS, its copy kernel, eager training) on the same GPU, in one run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tact.h"

static tact_tensor *s_fma(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    return tact_add(tact_mul(in[0], in[1]), in[2]);
}

static void s_to_half(tact_ctx *ctx, tact_tensor **in) {
    (void)ctx;
    in[0] = tact_cast(in[0], TACT_FLOAT16);
    in[1] = tact_cast(in[1], TACT_FLOAT16);
}

/* PyTorch's figures on this GPU through harness/peer_cuda.py, with
 * whichever python has torch with CUDA: matmul 4096^2 float32 and float16
 * (ms), the device-to-device copy of 64M floats (GB/s, read and write),
 * the CNN step (ms).  Returns 1 when found. */
static int s_peer(int n, int steps, double v[4], char *peer, size_t len) {
    char exe[1024], cmd[1600];
    ssize_t got = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (got <= 0) return 0;
    exe[got] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    const char *env = getenv("TACT_PEER_PYTHON");
    const char *pythons[] = {env && *env ? env : "python3", "/usr/bin/python3"};
    /* The script beside the binary (a packed build, harness/gpu-pack.sh) or in the source tree. */
    const char *where[] = {"%s/peer_cuda.py", "%s/../harness/peer_cuda.py"};
    for (size_t w = 0; w < 2; w++) {
        char script[1100];
        snprintf(script, sizeof script, where[w], exe);
        if (access(script, R_OK) != 0) continue;
        for (size_t i = 0; i < 2; i++) {
            snprintf(cmd, sizeof cmd, "%s '%s' %d %d 2>/dev/null", pythons[i], script, n, steps);
            FILE *f = popen(cmd, "r");
            if (!f) continue;
            char name[200];
            int ok = fscanf(f, "%lf %lf %lf %lf %199s", &v[0], &v[1], &v[2], &v[3], name) == 5;
            pclose(f);
            if (ok) {
                snprintf(peer, len, "%s", name);
                return 1;
            }
        }
    }
    return 0;
}

int h_bench_cuda(int quick) {
    tact_ctx *probe;
    tact_options o;
    tact_options_default(&o);
    o.devices = "CUDA";
    if (tact_ctx_open(&probe, &o) != TACT_OK) {
        fprintf(stderr, "bench cuda: %s\n", tact_last_open_error());
        return 1;
    }
    tact_ctx_close(&probe);
    int reps = quick ? 2 : 5, steps = quick ? 5 : 20, ok = 1;
    enum { N = 4096 };
    double peer_v[4] = {0, 0, 0, 0};
    char peer[200] = "none (PyTorch with CUDA not found)";
    int found = s_peer(N, steps, peer_v, peer, sizeof peer);
    /* Matmuls of 4096^2: float32, then float16 inputs (cast on the GPU, untimed). */
    float *mm[2] = {h_fill((size_t)N * N, 4), h_fill((size_t)N * N, 5)};
    int64_t ms[2][2] = {{N, N}, {N, N}};
    int md[2] = {2, 2};
    double flops = 2.0 * N * N * N;
    double t32 = h_tact_best_with(&o, 2, mm, ms, md, NULL, h_matmul, reps), t16 = h_tact_best_with(&o, 2, mm, ms, md, s_to_half, h_matmul, reps);
    if (t32 > 0) h_line("cuda.matmul_4096_f32_gflops", flops / t32 * 1e-9, "GFLOPS", peer, found ? flops / peer_v[0] * 1e-6 : 0, found ? peer_v[0] * 1e-3 / t32 : 0);
    else ok = 0;
    if (t16 > 0) h_line("cuda.matmul_4096_f16_gflops", flops / t16 * 1e-9, "GFLOPS", peer, found ? flops / peer_v[1] * 1e-6 : 0, found ? peer_v[1] * 1e-3 / t16 : 0);
    else ok = 0;
    free(mm[0]), free(mm[1]);
    /* x*y+z over 64M floats (1 GiB of traffic) against the copy's bandwidth. */
    enum { E = 64 << 20 };
    float *data[3] = {h_fill(E, 1), h_fill(E, 2), h_fill(E, 3)};
    int64_t shapes[3][2] = {{E, 1}, {E, 1}, {E, 1}};
    int ndims[3] = {1, 1, 1};
    double te = h_tact_best_with(&o, 3, data, shapes, ndims, NULL, s_fma, reps), bytes = 16.0 * E;
    if (te > 0) h_line("cuda.elementwise_gbs", bytes / te * 1e-9, "GB/s", found ? peer : "none", peer_v[2], found ? bytes / te * 1e-9 / peer_v[2] : 0);
    else ok = 0;
    for (int i = 0; i < 3; i++) free(data[i]);
    /* The CNN's training step (batch 128, Adam) against PyTorch eager. */
    double first = 0, cnn = h_bench_step(1, "CUDA", steps, 1, &first);
    if (cnn > 0) h_line("cuda.cnn_step_ms", cnn, "ms", peer, peer_v[3], found ? peer_v[3] / cnn : 0);
    else ok = 0;
    return ok ? 0 : 1;
}
