/* test_worker.c - `tact worker` on loopback: the same bits as local devices, a killed worker an error within 2 s, refused clients, many sessions. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <zmq.h>

#include "keys.h"
#include "link.h"
#include "tact.h"
#include "testutil.h"

#ifndef TACT_BIN
#error "TACT_BIN (the tact command's path) comes from CMakeLists.txt"
#endif

static double s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A key folder of this test's own (TACT_KEY_DIR, inherited by the
 * workers it starts), removed by s_done. */
static char s_keys[64];
static void s_key_dir(void) {
    snprintf(s_keys, sizeof s_keys, "/tmp/tact-keys-XXXXXX");
    cr_assert(mkdtemp(s_keys));
    setenv("TACT_KEY_DIR", s_keys, 1);
}

typedef struct {
    pid_t pid;
    char uri[1024];  /* what --print-uri printed */
    char where[64];  /* its address, tcp://127.0.0.1:PORT, as errors name it */
    const char *key; /* its public key, in uri */
    char err[128];   /* its standard error, checked when it stops */
} s_worker_t;

/* Starts `tact worker --listen tcp://127.0.0.1:0 --print-uri ARGS` and
 * reads its first line. */
static void s_start(s_worker_t *w, const char *args) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    char cmd[1024];
    static int serial;
    snprintf(w->err, sizeof w->err, "%s/worker-%d.err", s_keys, ++serial);
    snprintf(cmd, sizeof cmd, "exec %s worker --listen tcp://127.0.0.1:0 --print-uri --threads 1 %s 2>%s", TACT_BIN, args, w->err);
    w->pid = fork();
    cr_assert_geq(w->pid, 0);
    if (w->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no worker behind */
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    cr_assert(f);
    cr_assert(fgets(w->uri, sizeof w->uri, f), "tact worker printed no URI");
    w->uri[strcspn(w->uri, "\n")] = '\0';
    fclose(f);
    cr_assert(strncmp(w->uri, "tcp://127.0.0.1:", 16) == 0 && strstr(w->uri, "/CPU?key="), "%s", w->uri);
    snprintf(w->where, sizeof w->where, "%.*s", (int)(strstr(w->uri, "/CPU") - w->uri), w->uri);
    w->key = strstr(w->uri, "?key=") + 5;
}

static int s_have_dataset(void) { return access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) == 0; }

/* Stops a worker (SIGTERM: it ends cleanly) and checks what it said: no
 * sanitizer report (its leak check runs as it exits). */
static void s_stop(s_worker_t *w) {
    if (w->pid > 0) {
        kill(w->pid, SIGTERM);
        int st = 0;
        waitpid(w->pid, &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the worker did not end cleanly (status %#x)", st);
    }
    w->pid = 0;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "grep -q 'Sanitizer\\|runtime error' %s", w->err);
    cr_assert_neq(system(cmd), 0, "the worker's sanitizer report is in %s", w->err);
}

static void s_done(void) {
    if (getenv("TACT_TEST_KEEP")) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_keys);
    cr_assert_eq(system(cmd), 0);
}

/* Runs `tact ARGS`, its output into out; returns the exit status. */
static int s_tact(char *out, size_t len, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 120 %s %s 2>&1", TACT_BIN, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    char rest[4096];
    while (fread(rest, 1, sizeof rest, p) > 0) {}
    int st = pclose(p);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static tact_ctx *s_open(const char *devices, int timeout_ms) {
    tact_options o;
    tact_options_default(&o);
    o.devices = devices;
    o.cpu_threads = 1;
    o.timeout_ms = timeout_ms;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s: %s", devices, tact_last_open_error());
    return ctx;
}

/* The training job over two workers writes the same weights, byte for
 * byte, as over two devices of this process. */
Test(worker, training_over_two_workers_is_bitwise_the_local_run) {
    if (!s_have_dataset()) cr_skip_test("dataset-fashion-mnist is not installed (make deps installs it)");
    s_key_dir();
    s_worker_t a, b;
    s_start(&a, "--devices CPU");
    s_start(&b, "--devices CPU");
    char dir[] = "/tmp/tact-worker-XXXXXX", out[8192], cmd[3000];
    cr_assert(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "train --model mlp --steps 40 --threads 1 --devices '%s,%s' --out %s/A.safetensors", a.uri, b.uri, dir);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "; 2 devices (tcp://127.0.0.1:"), "%s", out);
    snprintf(cmd, sizeof cmd, "train --model mlp --steps 40 --threads 1 --devices CPU,CPU:1 --out %s/B.safetensors", dir);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "cmp %s/A.safetensors %s/B.safetensors", dir, dir);
    cr_assert_eq(system(cmd), 0, "the weights trained over two workers differ from those trained in-process");
    s_stop(&a);
    s_stop(&b);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    s_done();
}

/* A sum over a tensor split over devs (2 of them), read back: fails with
 * the realize's status. */
static int s_step(tact_ctx *ctx, const char *devs, double *got) {
    int64_t n = 1 << 16;
    static float v[1 << 16];
    for (int i = 0; i < n; i++) v[i] = (float)(i % 7);
    tact_scope_begin(ctx);
    tact_tensor *x = tact_shard(tact_from_data(ctx, TACT_FLOAT32, 1, &n, v), devs, 0);
    tact_tensor *s = tact_sum_all(tact_mul(x, x));
    int rc = tact_item(s, got);
    tact_scope_end(ctx);
    return rc;
}

/* kill -9 of a worker in the middle of work: the next realizes that need
 * it fail within 2 s naming it, nothing hangs, and the context goes on
 * with its other devices. */
Test(worker, a_killed_worker_is_an_error_naming_it_within_two_seconds) {
    s_key_dir();
    s_worker_t a, b;
    s_start(&a, "--devices CPU");
    s_start(&b, "--devices CPU");
    char devs[2200];
    snprintf(devs, sizeof devs, "%s,%s", a.uri, b.uri);
    const char *where = b.where;
    tact_ctx *ctx = s_open(devs, 60000);
    double got = 0, want = 0;
    for (int i = 0; i < 1 << 16; i++) want += (double)((i % 7) * (i % 7));
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(s_step(ctx, devs, &got), TACT_OK, "%s", tact_ctx_error(ctx));
        cr_assert_float_eq(got, want, want * 1e-6);
    }
    kill(b.pid, SIGKILL);
    waitpid(b.pid, NULL, 0);
    b.pid = 0;
    double t0 = s_now();
    int rc = s_step(ctx, devs, &got);
    double dt = s_now() - t0;
    cr_assert_neq(rc, TACT_OK, "a realize over a dead worker succeeded");
    cr_assert(strstr(tact_ctx_error(ctx), where), "the error does not name %s: %s", where, tact_ctx_error(ctx));
    cr_assert_lt(dt, 2.0, "the loss took %.2f s to be an error: %s", dt, tact_ctx_error(ctx));
    /* The worker left is still there; so is this process's CPU. */
    int64_t n = 4;
    float v[4] = {1, 2, 3, 4}, out[4];
    tact_tensor *x = tact_to(tact_from_data(ctx, TACT_FLOAT32, 1, &n, v), a.uri);
    cr_assert_eq(tact_read(tact_add(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[3], 8.0f);
    tact_ctx_close(&ctx);
    /* A context with a local device beside the worker: kill the worker, the CPU goes on. */
    s_worker_t c;
    s_start(&c, "--devices CPU");
    snprintf(devs, sizeof devs, "CPU,%s", c.uri);
    ctx = s_open(devs, 60000);
    cr_assert_eq(s_step(ctx, devs, &got), TACT_OK, "%s", tact_ctx_error(ctx));
    kill(c.pid, SIGKILL);
    waitpid(c.pid, NULL, 0);
    c.pid = 0;
    t0 = s_now();
    cr_assert_neq(s_step(ctx, devs, &got), TACT_OK);
    cr_assert_lt(s_now() - t0, 2.0);
    x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v);
    cr_assert_eq(tact_read(tact_mul(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[3], 16.0f);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    s_stop(&a);
    s_done();
}

/* A stopped (hung) worker: no heartbeat, an error within 2 s as well. */
Test(worker, a_hung_worker_is_an_error_within_two_seconds) {
    s_key_dir();
    s_worker_t a;
    s_start(&a, "--devices CPU");
    char devs[2200];
    snprintf(devs, sizeof devs, "CPU,%s", a.uri);
    tact_ctx *ctx = s_open(devs, 60000);
    double got;
    cr_assert_eq(s_step(ctx, devs, &got), TACT_OK, "%s", tact_ctx_error(ctx));
    kill(a.pid, SIGSTOP);
    double t0 = s_now();
    cr_assert_neq(s_step(ctx, devs, &got), TACT_OK);
    double dt = s_now() - t0;
    cr_assert(strstr(tact_ctx_error(ctx), "no heartbeat"), "%s", tact_ctx_error(ctx));
    cr_assert_lt(dt, 2.0, "%.2f s: %s", dt, tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    kill(a.pid, SIGCONT);
    s_stop(&a);
    s_done();
}

/* Connects to 127.0.0.1:port and writes bytes that are not ZMTP. */
static void s_garbage(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    uint64_t rng = tu_seed();
    char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)tu_rand(&rng);
    ssize_t w = write(fd, junk, sizeof junk);
    (void)w;
    usleep(50000);
    close(fd);
}

/* Refused: a client whose key the worker does not admit, a URI with
 * another key than the worker's, a tcp URI with no key, garbage on the
 * port; each fails in bounded time naming the worker, and the worker
 * serves the next proper client. */
Test(worker, clients_without_the_keys_are_refused_and_the_worker_goes_on) {
    s_key_dir();
    s_worker_t a;
    s_start(&a, "--devices CPU");
    char devs[2200];
    const char *where = a.where;
    int port = atoi(where + strlen("tcp://127.0.0.1:"));
    tact_options o;
    tact_options_default(&o);
    o.timeout_ms = 3000;
    o.devices = devs;
    tact_ctx *ctx = NULL;
    /* Another user's key folder: a key the worker does not admit. */
    char other[] = "/tmp/tact-keys-XXXXXX";
    cr_assert(mkdtemp(other));
    setenv("TACT_KEY_DIR", other, 1);
    snprintf(devs, sizeof devs, "%s", a.uri);
    double t0 = s_now();
    cr_assert_neq(tact_ctx_open(&ctx, &o), TACT_OK);
    cr_assert(strstr(tact_last_open_error(), where) && strstr(tact_last_open_error(), "refused this client's key"), "%s", tact_last_open_error());
    cr_assert_lt(s_now() - t0, 4.0);
    /* Admitted once its public key is in the worker user's authorized_keys. */
    char pub[41], sec[41], path[200];
    cr_assert_eq(ta_keys_own(pub, sec, 0, NULL), TACT_OK);
    snprintf(path, sizeof path, "%s/authorized_keys", s_keys);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "# a comment\n%s\n", pub);
    fclose(f);
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    tact_ctx_close(&ctx);
    setenv("TACT_KEY_DIR", s_keys, 1);
    /* The right client, the wrong worker key (a valid key, not the worker's). */
    char wrong[41], wsec[41];
    cr_assert_eq(zmq_curve_keypair(wrong, wsec), 0);
    snprintf(devs, sizeof devs, "%s/CPU?key=%s", where, wrong);
    t0 = s_now();
    cr_assert_neq(tact_ctx_open(&ctx, &o), TACT_OK);
    cr_assert(strstr(tact_last_open_error(), where), "%s", tact_last_open_error());
    cr_assert_lt(s_now() - t0, 4.0);
    /* No key at all, and the worker not in known_workers. */
    snprintf(devs, sizeof devs, "%s/CPU", where);
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_EINVAL);
    cr_assert(strstr(tact_last_open_error(), "needs its public key"), "%s", tact_last_open_error());
    /* ... which known_workers supplies. */
    snprintf(path, sizeof path, "%s/known_workers", s_keys);
    f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "%s %s\n", where, a.key);
    fclose(f);
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    tact_ctx_close(&ctx);
    /* Garbage on the port. */
    for (int i = 0; i < 5; i++) s_garbage(port);
    /* The worker still serves. */
    snprintf(devs, sizeof devs, "%s", a.uri);
    ctx = s_open(devs, 10000);
    int64_t n = 2;
    float v[2] = {3, 4}, out[2];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v);
    cr_assert_eq(tact_read(tact_mul(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[1], 16.0f);
    tact_ctx_close(&ctx);
    cr_assert_eq(kill(a.pid, 0), 0, "the worker died");
    s_stop(&a);
    snprintf(path, sizeof path, "rm -rf %s", other);
    cr_assert_eq(system(path), 0);
    s_done();
}

/* The worker's open files, threads and resident KiB (from /proc). */
static void s_usage(pid_t pid, int *fds, int *threads, long *rss_kib) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls %s | wc -l", path);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    cr_assert_eq(fscanf(p, "%d", fds), 1);
    pclose(p);
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "Threads: %d", threads);
        sscanf(line, "VmRSS: %ld", rss_kib);
    }
    fclose(f);
}

/* 1000 clients connect (HELLO: a session with an executor and two
 * compilers) and go (bye): the worker's files, threads and memory come
 * back to where they were. */
Test(worker, a_thousand_sessions_leak_nothing) {
    s_key_dir();
    s_worker_t a;
    s_start(&a, "--devices CPU");
    const char *where = a.where;
    const char *key = a.key;
    ta_rt_t *rt = tu_rt(TA_TRANSPORT_INPROC, 10000, NULL);
    int fds0 = 0, th0 = 0, fds1 = 0, th1 = 0;
    long rss0 = 0, rss1 = 0;
    for (int i = 0; i < 1000; i++) {
        if (i == 50) s_usage(a.pid, &fds0, &th0, &rss0); /* after the first sessions warmed everything up */
        ta_link_t *l;
        ta_error_t err;
        cr_assert_eq(ta_link_new(rt, where, key, NULL, &l, &err), TACT_OK, "%s", err.text);
        const char *dev[1] = {"CPU"};
        uint32_t ex[1] = {3}, co[2] = {1, 2};
        ta_device_info_t info;
        cr_assert_eq(ta_link_hello(l, dev, ex, 1, co, 2, 4, &info, 10000, &err), TACT_OK, "session %d: %s", i, err.text);
        cr_assert_str_eq(info.name, "CPU");
        ta_link_close(&l);
    }
    usleep(500000); /* the last byes */
    s_usage(a.pid, &fds1, &th1, &rss1);
    cr_assert_eq(kill(a.pid, 0), 0, "the worker died");
    cr_assert_leq(fds1, fds0 + 2, "open files %d after 50 sessions, %d after 1000", fds0, fds1);
    cr_assert_leq(th1, th0 + 2, "threads %d after 50 sessions, %d after 1000", th0, th1);
#ifndef __SANITIZE_ADDRESS__ /* ASan keeps freed memory in quarantine: its leak check at exit speaks instead (s_stop) */
    cr_assert_leq(rss1, rss0 + 16 * 1024, "resident %ld KiB after 50 sessions, %ld after 1000", rss0, rss1);
#endif
    cr_assert_eq(ta_rt_destroy(&rt, NULL), TACT_OK);
    s_stop(&a);
    s_done();
}

/* TACT_ISOLATE: the OpenCL device in a worker process the context starts;
 * killed (as a driver's abort would end it), its work is an error naming
 * the isolated device, and the CPU goes on. */
Test(worker, an_isolated_device_whose_process_dies_is_an_error) {
    tact_device_info d[8];
    int n = tact_devices(d, 8), cl = 0;
    for (int i = 0; i < n && i < 8; i++) cl |= strncmp(d[i].name, "CL", 2) == 0;
    if (!cl) cr_skip_test("no OpenCL device");
    setenv("TACT_WORKER", TACT_BIN, 1);
    tact_options o;
    tact_options_default(&o);
    o.devices = "CPU,CL";
    o.isolate = "CL";
    o.cpu_threads = 1;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    int64_t len = 4;
    float v[4] = {1, 2, 3, 4}, out[4];
    tact_tensor *x = tact_to(tact_from_data(ctx, TACT_FLOAT32, 1, &len, v), "CL");
    cr_assert_eq(tact_read(tact_add(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[3], 8.0f);
    /* The worker process this context started for CL:0. */
    char cmd[200], pid[32] = "";
    /* "[w]orker": the pattern does not match the shell running pgrep, whose
     * pid (after the pids wrap) may come first and be gone by the kill. */
    snprintf(cmd, sizeof cmd, "pgrep -f '[w]orker --listen ipc:///tmp/tact-iso-%ld-'", (long)getpid());
    FILE *p = popen(cmd, "r");
    cr_assert(p && fgets(pid, sizeof pid, p), "no worker process for the isolated device");
    pclose(p);
    cr_assert_eq(kill(atoi(pid), SIGKILL), 0);
    double t0 = s_now();
    tact_tensor *y = tact_mul(x, x);
    cr_assert_neq(tact_read(y, out, sizeof out), TACT_OK);
    cr_assert(strstr(tact_ctx_error(ctx), "isolated device CL:0"), "%s", tact_ctx_error(ctx));
    cr_assert_lt(s_now() - t0, 2.0);
    tact_tensor *z = tact_from_data(ctx, TACT_FLOAT32, 1, &len, v);
    cr_assert_eq(tact_read(tact_mul(z, z), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[2], 9.0f);
    tact_ctx_close(&ctx);
    /* The same through the environment, as a user of a program sets it. */
    o.isolate = NULL;
    setenv("TACT_ISOLATE", "CL", 1);
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    unsetenv("TACT_ISOLATE");
    p = popen(cmd, "r");
    cr_assert(p && fgets(pid, sizeof pid, p), "TACT_ISOLATE=CL started no worker process");
    pclose(p);
    x = tact_to(tact_from_data(ctx, TACT_FLOAT32, 1, &len, v), "CL");
    cr_assert_eq(tact_read(tact_add(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[0], 2.0f);
    tact_ctx_close(&ctx);
    /* Its folder went with the context. */
    snprintf(cmd, sizeof cmd, "ls -d /tmp/tact-iso-%ld-* 2>/dev/null", (long)getpid());
    cr_assert_neq(system(cmd), 0, "the isolated devices' folder is left behind");
}

/* A run recorded over two workers replays in-process on two devices of
 * the same kind, and a run recorded in-process replays over the workers:
 * the stages that run with the client match (docs/workers.md). */
Test(worker, logs_replay_between_workers_and_this_process) {
    if (!s_have_dataset()) cr_skip_test("dataset-fashion-mnist is not installed (make deps installs it)");
    s_key_dir();
    s_worker_t a, b;
    s_start(&a, "--devices CPU");
    s_start(&b, "--devices CPU");
    char out[8192], cmd[3000];
    snprintf(cmd, sizeof cmd, "train --model mlp --steps 5 --threads 1 --devices '%s,%s' --log %s/R.tlog", a.uri, b.uri, s_keys);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "train --model mlp --steps 5 --threads 1 --devices CPU,CPU:1 --log %s/L.tlog", s_keys);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "replay --devices CPU,CPU:1 %s/R.tlog", s_keys);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "replay matches the recording") && strstr(out, "other places"), "%s", out);
    snprintf(cmd, sizeof cmd, "replay --devices '%s,%s' %s/L.tlog", a.uri, b.uri, s_keys);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "replay matches the recording"), "%s", out);
    /* Not as many devices, or of another kind: refused, saying what the log needs. */
    snprintf(cmd, sizeof cmd, "replay --devices CPU %s/R.tlog", s_keys);
    cr_assert_neq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "recorded on devices 'tcp://127.0.0.1:"), "%s", out);
    s_stop(&a);
    s_stop(&b);
    s_done();
}

/* One message to the worker: frames as given (the kind first). */
static void s_frames(void *dealer, int n, const void *const *data, const size_t *len) {
    for (int i = 0; i < n; i++) zmq_send(dealer, data[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0);
}

/* The kind of the worker's next message other than a heartbeat (0: none
 * within 2 s). */
static char s_answer(void *dealer) {
    for (double end = s_now() + 2; s_now() < end;) {
        zmq_pollitem_t it = {dealer, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0) continue;
        char k = 0;
        zmq_recv(dealer, &k, 1, 0);
        int more = 0;
        size_t ml = sizeof more;
        while (zmq_getsockopt(dealer, ZMQ_RCVMORE, &more, &ml) == 0 && more) {
            char junk[256];
            zmq_recv(dealer, junk, sizeof junk, 0);
        }
        if (k != 'P') return k;
    }
    return 0;
}

/* An authenticated client that breaks the protocol: a HELLO that does not
 * decode, messages before HELLO, a message as the worker's own executor,
 * frames of no known kind, seeded random frames; each costs that client
 * its session (an answer says why), and the worker serves the next one. */
Test(worker, a_hostile_client_costs_its_session_not_the_worker) {
    s_key_dir();
    s_worker_t a;
    s_start(&a, "--devices CPU");
    char pub[41], sec[41];
    const char *where = a.where;
    cr_assert_eq(ta_keys_own(pub, sec, 1, NULL), TACT_OK);
    void *zmq = zmq_ctx_new();
    uint64_t rng = tu_seed();
    for (int round = 0; round < 60; round++) {
        void *d = zmq_socket(zmq, ZMQ_DEALER);
        int linger = 0;
        zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, a.key, 40);
        zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, pub, 40);
        zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, sec, 40);
        cr_assert_eq(zmq_connect(d, where), 0);
        uint8_t junk[512];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)tu_rand(&rng);
        size_t jl = 1 + tu_rand(&rng) % sizeof junk;
        if (round == 0) { /* a HELLO that does not decode: refused in a WELCOME */
            s_frames(d, 2, (const void *[]){"H", junk}, (size_t[]){1, jl});
            cr_assert_eq(s_answer(d), 'W', "seed %llu", (unsigned long long)tu_seed());
        } else if (round == 1) { /* work before HELLO */
            s_frames(d, 2, (const void *[]){"M", junk}, (size_t[]){1, jl});
            cr_assert_eq(s_answer(d), 'B');
        } else if (round == 2 || round == 3) {
            /* A proper HELLO, then a message as port 3 (its executor here),
             * or a frame of no known kind. */
            ta_msg_t h;
            ta_msg_init(&h, TA_MSG_HELLO);
            uint64_t ex = 3, co[2] = {1, 2};
            h.as.hello.devices = ta_bytes_str("CPU");
            h.as.hello.executors = ta_u64s(&ex, 1);
            h.as.hello.compilers = ta_u64s(co, 2);
            h.as.hello.ports = 4;
            msgpack_sbuffer sb;
            msgpack_sbuffer_init(&sb);
            cr_assert_eq(ta_msg_encode(&h, &sb), TACT_OK);
            s_frames(d, 2, (const void *[]){"H", sb.data}, (size_t[]){1, sb.size});
            cr_assert_eq(s_answer(d), 'W');
            if (round == 2) {
                ta_msg_t m;
                ta_msg_init(&m, TA_MSG_FREE);
                m.sender = 3;
                m.dest = 3;
                m.seq = 1;
                cr_assert_eq(ta_msg_encode(&m, &sb), TACT_OK);
                s_frames(d, 2, (const void *[]){"M", sb.data}, (size_t[]){1, sb.size});
            } else {
                s_frames(d, 2, (const void *[]){"Z", junk}, (size_t[]){1, jl});
            }
            cr_assert_eq(s_answer(d), 'B');
            msgpack_sbuffer_destroy(&sb);
        } else { /* random frames of random kinds */
            char kind = "HMPBLZ"[tu_rand(&rng) % 6];
            int nf = 1 + (int)(tu_rand(&rng) % 3);
            const void *fr[3] = {&kind, junk, junk + 1};
            size_t fl[3] = {1, jl, jl - 1};
            s_frames(d, nf, fr, fl);
            usleep(2000);
        }
        zmq_close(d);
    }
    zmq_ctx_term(zmq);
    memset(sec, 0, sizeof sec);
    cr_assert_eq(kill(a.pid, 0), 0, "the worker died (seed %llu)", (unsigned long long)tu_seed());
    tact_ctx *ctx = s_open(a.uri, 10000);
    int64_t n = 2;
    float v[2] = {5, 6}, out[2];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v);
    cr_assert_eq(tact_read(tact_add(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[1], 12.0f);
    tact_ctx_close(&ctx);
    s_stop(&a);
    s_done();
}

/* A client killed in the middle of work: the worker notices its silence
 * and ends its session (its executors stop, its buffers go). */
Test(worker, a_dead_client_s_session_ends) {
    if (!s_have_dataset()) cr_skip_test("dataset-fashion-mnist is not installed (make deps installs it)");
    s_key_dir();
    s_worker_t a;
    s_start(&a, "--devices CPU");
    pid_t c = fork();
    cr_assert_geq(c, 0);
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(TACT_BIN, "tact", "train", "--model", "mlp", "--steps", "100000", "--threads", "1", "--devices", a.uri, (char *)NULL);
        _exit(127);
    }
    sleep(2);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "grep -q 'went silent' %s", a.err);
    int ended = 0;
    for (int i = 0; i < 40 && !ended; i++) {
        usleep(100000);
        ended = system(cmd) == 0;
    }
    cr_assert(ended, "the worker did not end the dead client's session within 4 s");
    s_stop(&a);
    s_done();
}

/* A tensor whose upload takes longer than the heartbeat timeout (384 MB
 * over CURVE, about 0.25 GB/s here): it travels in pieces, so neither end
 * takes the other for lost, and it arrives whole. */
Test(worker, a_large_upload_is_not_a_lost_worker) {
    s_key_dir();
    s_worker_t a;
    s_start(&a, "--devices CPU");
    tact_ctx *ctx = s_open(a.uri, 60000);
    int64_t n = 96 << 20;
    float *v = malloc((size_t)n * sizeof *v);
    cr_assert(v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 3);
    double t0 = s_now(), sum = 0;
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v);
    cr_assert_eq(tact_item(tact_sum_all(tact_cast(x, TACT_FLOAT64)), &sum), TACT_OK, "%s", tact_ctx_error(ctx));
    double want = (double)(n / 3) * 3; /* 0 + 1 + 2 per three */
    cr_assert_eq(sum, want, "sum %.0f, want %.0f", sum, want);
    cr_log_info("384 MB to the worker and its sum back in %.2f s", s_now() - t0);
    free(v);
    tact_ctx_close(&ctx);
    s_stop(&a);
    s_done();
}

/* kill -9 of a worker in the middle of `tact train` over two workers: the
 * training stops with an error naming that worker within 2 s. */
Test(worker, a_worker_killed_mid_training_stops_it_naming_the_worker_within_two_seconds) {
    if (!s_have_dataset()) cr_skip_test("dataset-fashion-mnist is not installed (make deps installs it)");
    s_key_dir();
    s_worker_t a, b;
    s_start(&a, "--devices CPU");
    s_start(&b, "--devices CPU");
    char out[64], devs[2200];
    snprintf(devs, sizeof devs, "%s,%s", a.uri, b.uri);
    const char *where = b.where;
    snprintf(out, sizeof out, "%s/train.out", s_keys);
    pid_t c = fork();
    cr_assert_geq(c, 0);
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(TACT_BIN, "tact", "train", "--model", "mlp", "--steps", "100000", "--threads", "1", "--devices", devs, (char *)NULL);
        _exit(127);
    }
    /* Training, not loading: wait for the first steps. */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "grep -q 'step' %s", out);
    for (int i = 0; i < 300 && system(cmd) != 0; i++) usleep(100000);
    usleep(500000);
    kill(b.pid, SIGKILL);
    waitpid(b.pid, NULL, 0);
    b.pid = 0;
    double t0 = s_now();
    int st = 0, done = 0;
    while (!done && s_now() - t0 < 10) {
        done = waitpid(c, &st, WNOHANG) == c;
        if (!done) usleep(20000);
    }
    double dt = s_now() - t0;
    if (!done) kill(c, SIGKILL), waitpid(c, NULL, 0);
    cr_assert(done, "tact train still ran 10 s after its worker was killed");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %#x", st);
    cr_assert_lt(dt, 2.0, "tact train ended %.2f s after its worker was killed", dt);
    snprintf(cmd, sizeof cmd, "grep -q '%s lost' %s", where, out);
    cr_assert_eq(system(cmd), 0, "the error does not name %s (see %s)", where, out);
    s_stop(&a);
    s_done();
}

/* The entry points a user takes: TACT_DEVICE naming a worker's device
 * for a context opened with the defaults, which is where new tensors are;
 * tact_device gives its URI without the key. */
Test(worker, tact_device_names_a_worker_for_a_default_context) {
    s_key_dir();
    s_worker_t a;
    s_start(&a, "--devices CPU");
    setenv("TACT_DEVICE", a.uri, 1);
    tact_ctx *ctx = NULL;
    int rc = tact_ctx_open(&ctx, NULL);
    unsetenv("TACT_DEVICE");
    cr_assert_eq(rc, TACT_OK, "%s", tact_last_open_error());
    int64_t n = 3;
    float v[3] = {1, 2, 3}, out[3];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, &n, v);
    char want[80];
    snprintf(want, sizeof want, "%s/CPU", a.where);
    cr_assert_str_eq(tact_device(x), want);
    cr_assert_eq(tact_read(tact_mul(x, x), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(out[2], 9.0f);
    tact_device_stats st;
    cr_assert_eq(tact_ctx_device_stats(ctx, a.uri, &st), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_geq(st.kernels, 1, "the worker's device ran no kernel");
    tact_ctx_close(&ctx);
    s_stop(&a);
    s_done();
}

/* `tact keygen`: a new key pair (its public half printed), never
 * replaced by accident; --show prints the same; --force replaces it; a
 * key file others can read is refused, by the command and by a client. */
Test(worker, keygen_makes_shows_and_guards_the_key) {
    s_key_dir();
    char out[4096], cmd[300], pub[64], path[200];
    cr_assert_eq(s_tact(out, sizeof out, "keygen"), 0, "%s", out);
    char *line = strrchr(out, '\n');
    cr_assert(line && line - out >= 40);
    snprintf(pub, sizeof pub, "%.40s", line - 40);
    cr_assert(ta_keys_valid(pub, 40), "keygen printed no key: %s", out);
    snprintf(path, sizeof path, "%s/key", s_keys);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "the key file has mode %03o", (unsigned)(st.st_mode & 0777));
    cr_assert_eq(s_tact(out, sizeof out, "keygen"), 1, "%s", out);
    cr_assert(strstr(out, "exists already"), "%s", out);
    cr_assert_eq(s_tact(out, sizeof out, "keygen --show"), 0, "%s", out);
    cr_assert(strstr(out, pub), "--show printed %s, not %s", out, pub);
    cr_assert_eq(s_tact(out, sizeof out, "keygen --force"), 0, "%s", out);
    cr_assert(!strstr(out, pub), "--force kept the old key: %s", out);
    cr_assert_eq(chmod(path, 0644), 0);
    cr_assert_eq(s_tact(out, sizeof out, "keygen --show"), 1, "%s", out);
    cr_assert(strstr(out, "readable by others") && strstr(out, "chmod 600"), "%s", out);
    snprintf(cmd, sizeof cmd, "train --steps 1 --devices 'tcp://127.0.0.1:1/CPU?key=%s'", pub);
    cr_assert_neq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "readable by others"), "a client used a key file others can read: %s", out);
    s_done();
}
