/* test_rerun.c - whole-run replay: recorded programs run again from their logs alone, and a changed stage is named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "rerun.h"
#include "tact.h"
#include "testutil.h"

typedef void (*s_program_fn)(tact_ctx *ctx);

/* An elementwise chain, a reduce, a read. */
static void s_elementwise(tact_ctx *ctx) {
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i * 0.5f - 3;
    int64_t shape[2] = {8, 8};
    int axis = 1;
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    tact_tensor *s = tact_sum(tact_mul(tact_add(a, tact_scalar(ctx, 1.0)), a), 1, &axis, 0);
    float out[8];
    cr_assert_eq(tact_read(s, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
}

/* A matmul, a max-shifted exponential, two realizes, a release between. */
static void s_matmul(tact_ctx *ctx) {
    float x[12 * 5], w[5 * 7];
    for (int i = 0; i < 60; i++) x[i] = (float)(i % 7) - 3;
    for (int i = 0; i < 35; i++) w[i] = (float)(i % 5) * 0.25f;
    int64_t sx[2] = {12, 5}, sw[2] = {5, 7};
    int axis = 1;
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, sx, x), *b = tact_from_data(ctx, TACT_FLOAT32, 2, sw, w);
    tact_scope_begin(ctx);
    tact_tensor *y = tact_matmul(a, b);
    tact_tensor *e = tact_exp2(tact_sub(y, tact_max(y, 1, &axis, 1)));
    cr_assert_eq(tact_realize(ctx, 1, &e), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_keep(e);
    tact_scope_end(ctx);
    float out[12];
    cr_assert_eq(tact_read(tact_sum(e, 1, &axis, 0), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
}

/* Assigns, read back. */
static void s_assign(tact_ctx *ctx) {
    float x[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    tact_tensor *t = tact_from_data(ctx, TACT_FLOAT32, 1, shape, x);
    cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK);
    for (int k = 0; k < 3; k++) {
        tact_assign(t, tact_add(tact_mul(t, tact_scalar(ctx, 2.0)), tact_scalar(ctx, 1.0)));
        cr_assert_eq(tact_realize(ctx, 1, &t), TACT_OK, "%s", tact_ctx_error(ctx));
    }
    float out[4];
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK);
    cr_assert_eq(out[0], 15.0f);
}

/* A sum of 40 tensors: a kernel split by its buffer limit. */
static void s_split(tact_ctx *ctx) {
    int64_t shape[1] = {16};
    tact_tensor *sum = NULL;
    for (int t = 0; t < 40; t++) {
        tact_tensor *a = tact_full(ctx, TACT_FLOAT32, 1, shape, (double)t);
        sum = sum ? tact_add(sum, a) : a;
    }
    double v;
    cr_assert_eq(tact_item(tact_sum(sum, -1, NULL, 0), &v), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(v, 16.0 * 780);
}

/* A realize that fails (an integer division by a tensor of the wrong
 * shape never reaches the pipeline; an unknown tensor id does not either),
 * so: a compile that fails, with TACT_CC=false recorded in the header. */
static void s_failing(tact_ctx *ctx) {
    int64_t shape[1] = {5};
    tact_tensor *t = tact_sqrt(tact_full(ctx, TACT_FLOAT32, 1, shape, 3.0));
    cr_assert_neq(tact_realize(ctx, 1, &t), TACT_OK);
}

/* Realizes started without waiting, then a read. */
static void s_async(tact_ctx *ctx) {
    int64_t shape[1] = {9};
    tact_tensor *t = tact_full(ctx, TACT_FLOAT32, 1, shape, 1.5);
    for (int k = 0; k < 4; k++) {
        t = tact_add(tact_mul(t, t), tact_scalar(ctx, -1.0));
        cr_assert_eq(tact_realize_async(ctx, 1, &t), TACT_OK);
    }
    float out[9];
    cr_assert_eq(tact_read(t, out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
}

/* Records prog into a fresh log and returns its path (free() it). */
static char *s_record(s_program_fn prog, const char *transport, int threads) {
    char *path = tu_tmpfile("rerun");
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    o.transport = transport;
    o.cpu_threads = threads;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    prog(ctx);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    return path;
}

static void s_replays(s_program_fn prog, const char *transport, int threads) {
    char *path = s_record(prog, transport, threads), verdict[1024];
    int rc = ta_rerun(path, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_OK, "%s (%s)", verdict, tact_status_name(rc));
    cr_assert(strstr(verdict, "replay matches the recording"), "%s", verdict);
    unlink(path);
    free(path);
}

Test(graph_rerun, recorded_programs_replay_exactly) {
    s_replays(s_elementwise, "inproc", 1);
    s_replays(s_matmul, "inproc", 2);
    s_replays(s_assign, "inproc", 0);
    s_replays(s_split, "inproc", 0);
    s_replays(s_async, "inproc", 8);
}

Test(graph_rerun, a_failed_realize_replays_as_the_same_failure) {
    setenv("TACT_CACHE_DIR", "/tmp/tact-rerun-empty-cache", 1); /* nothing cached: the compile must run */
    setenv("TACT_CC", "false", 1);
    char *path = s_record(s_failing, "inproc", 0);
    unsetenv("TACT_CC"); /* the replay takes the compiler from the log */
    char verdict[1024];
    int rc = ta_rerun(path, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_OK, "%s", verdict);
    unlink(path);
    free(path);
    unsetenv("TACT_CACHE_DIR");
}

Test(graph_rerun, logs_recorded_over_ipc_and_tcp_replay_in_process) {
    s_replays(s_matmul, "ipc", 0);
    s_replays(s_elementwise, "tcp", 0);
}

/* A scheduler that emits its kernels' fused ids backwards (a test-only
 * switch) changes nothing the kernels compute, and the replay names it. */
Test(graph_rerun, a_changed_scheduler_is_named_with_message_and_field) {
    char *path = s_record(s_matmul, "inproc", 0), verdict[1024];
    setenv("TACT_TEST_PERTURB", "scheduler", 1);
    int rc = ta_rerun(path, verdict, sizeof verdict);
    unsetenv("TACT_TEST_PERTURB");
    cr_assert_eq(rc, TACT_EMISMATCH, "%s", verdict);
    cr_assert(strstr(verdict, "port scheduler") && strstr(verdict, "out KERNELS") && strstr(verdict, "payload.kernels[0].fused"), "%s", verdict);
    unlink(path);
    free(path);
}

Test(graph_rerun, damaged_and_missing_logs_are_clear_errors) {
    char verdict[1024];
    cr_assert_eq(ta_rerun("/nonexistent/run.tlog", verdict, sizeof verdict), TACT_EIO);
    cr_assert(strstr(verdict, "cannot open"), "%s", verdict);
    char *path = s_record(s_elementwise, "inproc", 0);
    /* A byte inside the first record's envelope (checksummed). */
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    long at = (long)(log->streams[0].records[0].env - log->data) + 3;
    ta_log_free(&log);
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x55, f);
    fclose(f);
    int rc = ta_rerun(path, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_ECORRUPT, "%s", verdict);
    cr_assert(strstr(verdict, "byte offset"), "%s", verdict);
    unlink(path);
    free(path);
}
