/* bench_devices.c - `tact bench devices`: the OpenCL device (PoCL here) against the CPU device, and a matmul sharded over two CPU devices against one, in one run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "harness.h"
#include "keys.h"
#include "link.h"
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

/* ---------------------------------------------------------------- workers */

/* The best time of uploading n floats to devices' first device (from_data
 * and a realize: the bytes travel and are written there). */
static double s_upload(const char *devices, float *v, int64_t n, int reps) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &o) != TACT_OK) {
        fprintf(stderr, "bench: %s\n", tact_last_open_error());
        return -1;
    }
    double best = 1e30;
    int rc = TACT_OK;
    for (int r = 0; r <= reps && rc == TACT_OK; r++) {
        tact_scope_begin(ctx);
        double t0 = h_now();
        tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v);
        rc = tact_realize(ctx, 1, &x);
        double t = h_now() - t0;
        if (r > 0 && t < best) best = t;
        tact_scope_end(ctx);
    }
    if (rc != TACT_OK) fprintf(stderr, "bench: %s\n", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    return rc == TACT_OK ? best : -1;
}

/* The peer: raw libzmq over CURVE tcp on loopback, a DEALER sending the
 * same bytes to a ROUTER in another thread that answers each with a byte
 * (as a realize is answered), the best round trip. */
typedef struct {
    void *router;
    int n;
} s_echo_t;
static void *s_echo(void *arg) {
    s_echo_t *e = arg;
    for (int i = 0; i < e->n; i++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, e->router, 0) < 0 || zmq_msg_recv(&body, e->router, 0) < 0) break;
        zmq_msg_send(&id, e->router, ZMQ_SNDMORE);
        zmq_send(e->router, "k", 1, 0);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return NULL;
}
static double s_zmq_upload(const void *v, size_t bytes, int reps) {
    char spub[41], ssec[41], cpub[41], csec[41];
    if (zmq_curve_keypair(spub, ssec) || zmq_curve_keypair(cpub, csec)) return -1;
    void *zs = zmq_ctx_new(), *zc = zmq_ctx_new();
    void *router = zmq_socket(zs, ZMQ_ROUTER), *dealer = zmq_socket(zc, ZMQ_DEALER);
    int one = 1;
    zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, ssec, 40);
    char ep[128];
    size_t len = sizeof ep;
    double best = -1;
    if (zmq_bind(router, "tcp://127.0.0.1:*") == 0 && zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &len) == 0) {
        zmq_setsockopt(dealer, ZMQ_CURVE_SERVERKEY, spub, 40);
        zmq_setsockopt(dealer, ZMQ_CURVE_PUBLICKEY, cpub, 40);
        zmq_setsockopt(dealer, ZMQ_CURVE_SECRETKEY, csec, 40);
        zmq_connect(dealer, ep);
        s_echo_t e = {router, reps + 1};
        pthread_t t;
        pthread_create(&t, NULL, s_echo, &e);
        best = 1e30;
        for (int r = 0; r <= reps; r++) {
            char k;
            double t0 = h_now();
            if (zmq_send(dealer, v, bytes, 0) < 0 || zmq_recv(dealer, &k, 1, 0) != 1) {
                best = -1;
                break;
            }
            double dt = h_now() - t0;
            if (r > 0 && dt < best) best = dt;
        }
        pthread_join(t, NULL);
    }
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(router);
    zmq_close(dealer);
    zmq_ctx_term(zs);
    zmq_ctx_term(zc);
    return best;
}

/* A worker on loopback (this program, started as `tact worker`): a matmul
 * there against the same on the CPU device in-process, and uploads to it
 * over CURVE tcp against raw libzmq's CURVE. */
static int s_bench_worker(int quick) {
    int pid, ok = 1, reps = quick ? 2 : 5;
    char uri[1024];
    ta_error_t err;
    if (ta_worker_spawn("/proc/self/exe", "tcp://127.0.0.1:0", "CPU", 0, 30000, &pid, uri, sizeof uri, &err) != TACT_OK) {
        fprintf(stderr, "bench devices: %s\n", err.text);
        return 1;
    }
    enum { M = 512 };
    float *mm[2] = {h_fill(M * M, 4), h_fill(M * M, 5)};
    int64_t ms[2][2] = {{M, M}, {M, M}};
    int md[2] = {2, 2};
    double tw = 1e30, tl = 1e30, flops = 2.0 * M * M * M;
    for (int r = 0; r < 3 && tw > 0 && tl > 0; r++) { /* in turns, the best of each */
        double a = h_tact_best(uri, 2, mm, ms, md, h_matmul, reps), b = h_tact_best("CPU", 2, mm, ms, md, h_matmul, reps);
        tw = a < 0 ? a : a < tw ? a : tw;
        tl = b < 0 ? b : b < tl ? b : tl;
    }
    if (tw > 0 && tl > 0) h_line("devices.worker_matmul_gflops", flops / tw * 1e-9, "GFLOPS", "tact CPU device in-process", flops / tl * 1e-9, tl / tw);
    else ok = 0;
    free(mm[0]), free(mm[1]);
    enum { E = 16 << 20 };
    float *v = h_fill(E, 8);
    double bytes = 4.0 * E, tu = s_upload(uri, v, E, reps), tz = s_zmq_upload(v, (size_t)bytes, reps);
    int zv[3];
    zmq_version(&zv[0], &zv[1], &zv[2]);
    char peer[96];
    snprintf(peer, sizeof peer, "libzmq %d.%d.%d DEALER/ROUTER over CURVE tcp", zv[0], zv[1], zv[2]);
    if (tu > 0 && tz > 0) h_line("devices.worker_upload_gbs", bytes / tu * 1e-9, "GB/s", peer, bytes / tz * 1e-9, tz / tu);
    else ok = 0;
    free(v);
    ta_worker_stop(pid, 2000);
    return ok ? 0 : 1;
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
    if (s_bench_worker(quick) != 0) ok = 0;
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
