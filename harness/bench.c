/* bench.c - `tact bench runtime`: the runtime against raw libzmq, side by side in one run. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "actor.h"
#include "builtin.h"
#include "harness.h"
#include "tact.h"


/* ------------------------------------------------------------ raw libzmq */

/* The peer: the same pattern written directly on libzmq (PUSH/PULL pairs,
 * one thread echoing or counting), with no envelope, codec or dispatch. */
typedef struct {
    void *zmq;
    int mode; /* 0: echo every message back; 1: count n messages, then answer once */
    long n;
} s_raw_t;

static void *s_raw_server(void *arg) {
    s_raw_t *r = arg;
    void *in = zmq_socket(r->zmq, ZMQ_PULL), *out = zmq_socket(r->zmq, ZMQ_PUSH);
    zmq_connect(in, "inproc://raw-a");
    zmq_connect(out, "inproc://raw-b");
    zmq_msg_t m;
    zmq_msg_init(&m);
    for (long i = 0; i < r->n; i++) {
        zmq_msg_recv(&m, in, 0);
        if (r->mode == 0) zmq_msg_send(&m, out, 0);
    }
    if (r->mode == 1) zmq_send(out, "done", 4, 0);
    zmq_msg_close(&m);
    zmq_close(in);
    zmq_close(out);
    return NULL;
}

/* Runs n messages of size bytes; returns seconds. */
static double s_raw_run(int mode, long n, size_t size) {
    s_raw_t r = {zmq_ctx_new(), mode, n};
    void *out = zmq_socket(r.zmq, ZMQ_PUSH), *in = zmq_socket(r.zmq, ZMQ_PULL);
    zmq_bind(out, "inproc://raw-a");
    zmq_bind(in, "inproc://raw-b");
    pthread_t th;
    pthread_create(&th, NULL, s_raw_server, &r);
    char *buf = calloc(1, size + 8);
    double t0 = h_now();
    for (long i = 0; i < n; i++) {
        zmq_send(out, buf, size, 0);
        if (mode == 0) zmq_recv(in, buf, size, 0);
    }
    if (mode == 1) zmq_recv(in, buf, size, 0);
    double t = h_now() - t0;
    pthread_join(th, NULL);
    free(buf);
    zmq_close(out);
    zmq_close(in);
    zmq_ctx_term(r.zmq);
    return t;
}

/* ---------------------------------------------------------------- tact */

/* Runs n messages of size bytes through a port and the echo actor; returns
 * seconds, or a negative number on error. */
static double s_tact_run_on(int mode, long n, size_t size, const char *log_path, ta_transport_t transport, int insecure) {
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    cfg.log_path = log_path;
    cfg.transport = transport;
    cfg.insecure_tcp = insecure;
    ta_rt_t *rt;
    ta_port_t *port = NULL;
    ta_actor_t *echo = NULL;
    ta_error_t err;
    double t = -1;
    if (ta_rt_new(&rt, &cfg, &err) != TACT_OK) goto out;
    if (ta_port_new(rt, "bench", &port, &err) != TACT_OK) goto out;
    if (ta_actor_start(rt, &ta_echo_ops, NULL, NULL, &echo, &err) != TACT_OK) goto out;
    uint8_t *buf = calloc(1, size);
    ta_msg_t m, reply;
    ta_msg_init(&reply, TA_MSG_READY);
    double t0 = h_now();
    for (long i = 0; i < n; i++) {
        ta_msg_init(&m, mode == 0 ? TA_MSG_ECHO : TA_MSG_DATA);
        m.as.echo.data.ptr = buf; /* echo and data share the layout of one BIN field */
        m.as.echo.data.len = size;
        int rc = mode == 0 ? ta_port_request(port, ta_actor_id(echo), &m, &reply, -1, &err)
                           : ta_port_send(port, ta_actor_id(echo), &m, &err);
        if (rc != TACT_OK) goto fail;
    }
    if (mode == 1) {
        ta_msg_init(&m, TA_MSG_EOS);
        if (ta_port_request(port, ta_actor_id(echo), &m, &reply, -1, &err) != TACT_OK) goto fail;
        if (reply.as.total.count != (uint64_t)n) {
            fprintf(stderr, "bench: echo counted %" PRIu64 " of %ld messages\n", reply.as.total.count, n);
            goto fail;
        }
    }
    t = h_now() - t0;
fail:
    ta_msg_release(&reply);
    free(buf);
out:
    if (t < 0) fprintf(stderr, "bench: %s\n", err.text);
    ta_actor_stop(&echo, NULL);
    ta_port_destroy(&port);
    ta_rt_destroy(&rt, NULL);
    return t;
}

static double s_tact_run(int mode, long n, size_t size, const char *log_path) {
    return s_tact_run_on(mode, n, size, log_path, TA_TRANSPORT_INPROC, 0);
}

/* Seconds for steps realizes of softmax-like rows of x @ w on fresh x (a
 * warm-up step first), recorded to log_path when it is not NULL; -1 on error. */
static double s_pipeline_run(int steps, const char *log_path) {
    tact_options o;
    tact_options_default(&o);
    o.log_path = log_path;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &o) != TACT_OK) return -1;
    enum { N = 64, K = 32, M = 16 };
    static float xv[N * K], wv[K * M];
    for (int i = 0; i < N * K; i++) xv[i] = (float)(i % 13) * 0.1f;
    for (int i = 0; i < K * M; i++) wv[i] = (float)(i % 7) * 0.05f;
    int64_t sx[2] = {N, K}, sw[2] = {K, M};
    int axis = 1, rc = TACT_OK;
    tact_tensor *w = tact_from_data(ctx, TACT_FLOAT32, 2, sw, wv);
    double t0 = 0;
    for (int s = 0; s <= steps && rc == TACT_OK; s++) {
        if (s == 1) t0 = h_now();
        tact_scope_begin(ctx);
        tact_tensor *y = tact_matmul(tact_from_data(ctx, TACT_FLOAT32, 2, sx, xv), w);
        tact_tensor *e = tact_exp2(tact_sub(y, tact_max(y, 1, &axis, 1)));
        float out[N * M];
        rc = tact_read(tact_div(e, tact_sum(e, 1, &axis, 1)), out, sizeof out);
        tact_scope_end(ctx);
    }
    double t = h_now() - t0;
    tact_ctx_close(&ctx);
    return rc == TACT_OK ? t : -1;
}

/* Best of `reps` alternating runs of both sides, which evens out the noise of
 * a shared machine. */
static void s_compare(int mode, long n, size_t size, int reps, double *tact_s, double *raw_s) {
    *tact_s = *raw_s = 1e30;
    for (int r = 0; r < reps; r++) {
        double a = s_tact_run(mode, n, size, NULL), b = s_raw_run(mode, n, size);
        if (a >= 0 && a < *tact_s) *tact_s = a;
        if (b < *raw_s) *raw_s = b;
    }
}

/* A Python op's cost on top of tact's C call (issue 29's bound: 3 us):
 * y = x + 1.0 on a realized 16-element tensor, nothing realized, from
 * Python through the tact package (harness/peer_python.py, with this
 * build's python/ on PYTHONPATH) against the same op in C as the package
 * makes it (a scope, the op, tact_keep, the scope's end, tact_release);
 * and tact's whole Python op against tinygrad 0.14's (make peers). */
static int s_bench_python(int quick) {
    long n = quick ? 20000 : 200000;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) {
        fprintf(stderr, "bench: %s\n", tact_last_open_error());
        return 1;
    }
    tact_tensor *x = tact_ones(ctx, TACT_FLOAT32, 1, (int64_t[]){16});
    double c = 1e30;
    for (int r = 0; r < 3 && tact_realize(ctx, 1, &x) == TACT_OK; r++) {
        double t0 = h_now();
        for (long i = 0; i < n; i++) {
            tact_scope_begin(ctx);
            tact_tensor *y = tact_keep(tact_add(x, tact_scalar(ctx, 1.0)));
            tact_scope_end(ctx);
            tact_release(y);
        }
        double t = (h_now() - t0) / (double)n * 1e6;
        if (t < c) c = t;
    }
    tact_ctx_close(&ctx);
    char exe[1024], path[1200], args[32], name[200] = "none", why[200] = "";
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/python", exe); /* this build's package (CMake's tact_python) */
    setenv("PYTHONPATH", path, 1);
    snprintf(args, sizeof args, "%ld", quick ? 20000L : 100000L);
    double py = 0, peer = 0;
    FILE *f = h_peer_open("peer_python.py", "tinygrad", args, why, sizeof why);
    int ok = f && fscanf(f, "%lf %lf %199s", &py, &peer, name) == 3;
    if (f) pclose(f);
    if (!ok || py <= 0) {
        fprintf(stderr, "bench python: the tact package did not import (is build/python there? CMake builds it where Python's headers are)\n");
        return 1;
    }
    int have = peer > 0;
    const char *pname = have ? name : "none (make peers installs tinygrad 0.14)";
    double over = py - c > 0.001 ? py - c : 0.001;
    h_line("python.op_overhead_us", over, "us", pname, have ? peer : 0, have ? peer / over : 0);
    h_line("python.op_us", py, "us", pname, have ? peer : 0, have ? peer / py : 0);
    return 0;
}

int h_bench(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (argc >= 1 && strcmp(argv[0], "python") == 0) return s_bench_python(quick);
    if (argc >= 1 && strcmp(argv[0], "pipeline") == 0) return h_bench_pipeline(quick);
    if (argc >= 1 && strcmp(argv[0], "kernels") == 0) return h_bench_kernels(quick);
    if (argc >= 1 && strcmp(argv[0], "train") == 0) return h_bench_train(quick);
    if (argc >= 1 && strcmp(argv[0], "devices") == 0) return h_bench_devices(quick);
    if (argc >= 1 && strcmp(argv[0], "cuda") == 0) return h_bench_cuda(quick);
    if (argc < 1 || strcmp(argv[0], "runtime") != 0) {
        fprintf(stderr, "usage: tact bench runtime|pipeline|kernels|train|devices|cuda|python [--quick]\n");
        return 2;
    }
    long n_rt = quick ? 2000 : 20000, n_tp = quick ? 20000 : 200000;
    int reps = quick ? 1 : 5;
    double a, b;

    s_compare(0, n_rt, 64, reps, &a, &b);
    h_line("runtime.roundtrip_64B", a / n_rt * 1e6, "us", "raw libzmq", b / n_rt * 1e6, b / a);
    s_compare(1, n_tp, 64, reps, &a, &b);
    h_line("runtime.throughput_64B", n_tp / a, "msg/s", "raw libzmq", n_tp / b, b / a);
    s_compare(1, n_tp / 4, 4096, reps, &a, &b);
    h_line("runtime.throughput_4KiB", n_tp / 4 / a, "msg/s", "raw libzmq", n_tp / 4 / b, b / a);

    /* tcp with CURVE (the default for tcp) against plain tcp. */
    for (int mode = 0; mode < 2; mode++) {
        long n = mode ? n_tp / 4 : n_rt / 4;
        double curve = 1e30, plain = 1e30;
        for (int r = 0; r < reps; r++) {
            double x = s_tact_run_on(mode, n, 64, NULL, TA_TRANSPORT_TCP, 0), y = s_tact_run_on(mode, n, 64, NULL, TA_TRANSPORT_TCP, 1);
            if (x >= 0 && x < curve) curve = x;
            if (y >= 0 && y < plain) plain = y;
        }
        if (mode == 0) h_line("runtime.roundtrip_64B_tcp_curve", curve / n * 1e6, "us", "tact, plain tcp", plain / n * 1e6, plain / curve);
        else h_line("runtime.throughput_64B_tcp_curve", n / curve, "msg/s", "tact, plain tcp", n / plain, plain / curve);
    }

    char path[] = "/tmp/tact-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("bench: mkstemp");
        return 1;
    }
    close(fd);
    double on = 1e30, off = 1e30;
    for (int r = 0; r < reps; r++) {
        double x = s_tact_run(1, n_tp, 64, path), y = s_tact_run(1, n_tp, 64, NULL);
        if (x >= 0 && x < on) on = x;
        if (y >= 0 && y < off) off = y;
    }
    h_line("runtime.log_flood_on_vs_off", n_tp / on, "msg/s", "tact, logging off", n_tp / off, off / on);
    /* A recorded pipeline run: steps of a small program on fresh inputs. */
    int steps = quick ? 20 : 400;
    reps = quick ? 1 : 9;
    on = off = 1e30;
    for (int r = 0; r < reps; r++) {
        double x = s_pipeline_run(steps, path), y = s_pipeline_run(steps, NULL);
        if (x >= 0 && x < on) on = x;
        if (y >= 0 && y < off) off = y;
    }
    unlink(path);
    if (on < 1e30 && off < 1e30) h_line("runtime.log_on_vs_off", steps / on, "steps/s", "tact, logging off", steps / off, off / on);
    return 0;
}
