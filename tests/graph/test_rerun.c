/* test_rerun.c - whole-run replay: recorded programs run again from their logs alone, and a changed stage is named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "crc32c.h"
#include "log.h"
#include "mpread.h"
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
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
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

/* log and sin in strict mode (tact's own routines in the kernels). */
static void s_strict_math(tact_ctx *ctx) {
    float x[32], out[32];
    for (int i = 0; i < 32; i++) x[i] = (float)i * 0.75f + 0.125f;
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){32}, x);
    cr_assert_eq(tact_read(tact_add(tact_log(a), tact_sin(a)), out, sizeof out), TACT_OK, "%s", tact_ctx_error(ctx));
}

/* A strict run's header says so, and its replay runs strict too: its
 * kernels are the recording's (a replay that is not strict builds other
 * programs and diverges at the compilers). */
Test(graph_rerun, a_strict_run_replays_strict) {
    char *path = tu_tmpfile("rerun"), verdict[1024];
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    o.strict = 1;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    s_strict_math(ctx);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    ta_log_t *log = NULL;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    cr_expect_eq(log->run.strict, 1);
    ta_log_free(&log);
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
    cr_expect_eq(rc, TACT_OK, "%s (%s)", verdict, tact_status_name(rc));
    cr_expect(strstr(verdict, "replay matches the recording"), "%s", verdict);
    unlink(path);
    free(path);
}

/* The bytes of a file (free() them). */
static uint8_t *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*len + 1);
    cr_assert(p && fread(p, 1, *len, f) == *len);
    fclose(f);
    return p;
}

/* A log is rewritten canonical at close: two runs of one program with the
 * same settings write the same bytes (inproc and tcp, 1 and 2 threads),
 * its times in FILE.times, a line per record; the programs end with
 * releases nobody waited for (close waits for them). */
Test(graph_rerun, identical_runs_write_identical_logs) {
    static const char *const transports[] = {"inproc", "tcp"};
    s_program_fn progs[] = {s_matmul, s_async};
    for (int t = 0; t < 2; t++)
        for (int threads = 1; threads <= 2; threads++)
            for (int p = 0; p < 2; p++) {
                char *a = s_record(progs[p], transports[t], threads), *b = s_record(progs[p], transports[t], threads);
                size_t la, lb;
                uint8_t *x = s_slurp(a, &la), *y = s_slurp(b, &lb);
                cr_assert(la == lb && memcmp(x, y, la) == 0, "%s, %d threads, program %d: two runs wrote different logs (%zu and %zu bytes)",
                          transports[t], threads, p, la, lb);
                char times[300];
                snprintf(times, sizeof times, "%s.times", a);
                size_t lt;
                uint8_t *tx = s_slurp(times, &lt);
                size_t lines = 0, notes = 0; /* "port record ns" lines; "note ..." lines (kernels' times); "#" comments */
                for (size_t i = 0, start = 1; i < lt; i++) {
                    if (start && tx[i] != '#') *(tx[i] == 'n' ? &notes : &lines) += 1;
                    start = tx[i] == '\n';
                }
                ta_log_t *log;
                ta_error_t err;
                cr_assert_eq(ta_log_load(a, &log, &err), TACT_OK, "%s", err.text);
                size_t records = 0;
                for (size_t i = 0; i < log->nstreams; i++) records += log->streams[i].nrecords;
                cr_assert_eq(lines, records, "%zu lines of times for %zu records", lines, records);
                cr_assert_gt(notes, 0, "no kernel's time noted");
                ta_log_free(&log);
                char *paths[] = {a, b};
                for (int i = 0; i < 2; i++) {
                    snprintf(times, sizeof times, "%s.times", paths[i]);
                    unlink(times), unlink(paths[i]), free(paths[i]);
                }
                free(x), free(y), free(tx);
            }
}

Test(graph_rerun, a_failed_realize_replays_as_the_same_failure) {
    setenv("TACT_CACHE_DIR", "/tmp/tact-rerun-empty-cache", 1); /* nothing cached: the compile must run */
    setenv("TACT_CC", "false", 1);
    char *path = s_record(s_failing, "inproc", 0);
    char verdict[1024];
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict); /* the replaying user's compiler: false again */
    cr_assert_eq(rc, TACT_OK, "%s", verdict);
    unlink(path);
    free(path);
    unsetenv("TACT_CC");
    unsetenv("TACT_CACHE_DIR");
}

/* Rewrites the run header of the log at path with edit applied, its
 * checksum recomputed (a forger can do that: the checksum finds damage,
 * not intent), everything after it kept. */
static void s_forge_header(const char *path, void (*edit)(ta_run_header_t *h)) {
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    ta_run_header_t h = log->run;
    edit(&h);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(ta_log_header_pack(&h, &sb), 0);
    size_t at = (size_t)(log->header - log->data), after = at + log->header_len;
    ta_mpr_t r; /* the old checksum, skipped */
    ta_mpr_init(&r, log->data + after, log->len - after);
    cr_assert_eq(ta_mpr_skip(&r), 0);
    size_t rest = (size_t)(r.p - log->data);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_uint32(&pk, ta_crc32c(0, (const uint8_t *)sb.data, sb.size));
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(log->data, 1, at, f), at);
    cr_assert_eq(fwrite(sb.data, 1, sb.size, f), sb.size);
    cr_assert_eq(fwrite(log->data + rest, 1, log->len - rest, f), log->len - rest);
    fclose(f);
    msgpack_sbuffer_destroy(&sb);
    ta_log_free(&log);
}

static char s_marker[64];
static void s_hostile_cc(ta_run_header_t *h) { snprintf(h->cc, sizeof h->cc, "touch %s; cc", s_marker); }
static void s_other_devices(ta_run_header_t *h) { snprintf(h->devices, sizeof h->devices, "CPU,CPU:3"); }
static void s_many_threads(ta_run_header_t *h) { h->cpu_threads = 65536, h->timeout_ms = 1; }

/* A log from someone else names a compiler command that would create a
 * file: the replay never runs it (it compiles with the replaying user's
 * compiler, in a fresh cache so that compiles do run) and says the
 * compilers differ; recorded threads and timeout are not obeyed either. */
Test(graph_rerun, an_edited_header_cannot_make_replay_run_anything) {
    snprintf(s_marker, sizeof s_marker, "/tmp/tact-forged-%ld", (long)getpid());
    unlink(s_marker);
    char *path = s_record(s_elementwise, "inproc", 0), verdict[1024], dir[] = "/tmp/tact-rerun-cache-XXXXXX";
    s_forge_header(path, s_hostile_cc);
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "a forged header with its checksum is a valid log: %s", err.text);
    ta_log_free(&log);
    cr_assert(mkdtemp(dir));
    setenv("TACT_CACHE_DIR", dir, 1);
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
    cr_assert_eq(access(s_marker, F_OK), -1, "the replay ran the log's compiler command");
    /* The recorded messages themselves named the real compiler: they match. */
    cr_assert_eq(rc, TACT_OK, "%s", verdict);
    cr_assert(strstr(verdict, "recorded with the kernel compiler 'touch /tmp/tact-forged-"), "%s", verdict);
    unsetenv("TACT_CACHE_DIR");
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    unlink(path);
    free(path);
}

Test(graph_rerun, recorded_threads_and_timeout_are_not_obeyed) {
    char *path = s_record(s_elementwise, "inproc", 1), verdict[1024];
    s_forge_header(path, s_many_threads);
    FILE *notes = tmpfile();
    int rc = ta_rerun(path, NULL, notes, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_OK, "%s", verdict);
    char text[4096] = "";
    rewind(notes);
    size_t n = fread(text, 1, sizeof text - 1, notes);
    text[n] = '\0';
    fclose(notes);
    cr_assert(strstr(text, "recorded: ") && strstr(text, "cpu_threads 65536") && strstr(text, "timeout_ms 1,"), "%s", text);
    cr_assert(strstr(text, "replaying: devices 'CPU', cpu_threads 0, timeout_ms 0"), "%s", text);
    cr_assert(strstr(text, "note: the recording ran with cpu_threads 65536 and timeout_ms 1"), "%s", text);
    unlink(path);
    free(path);
}

/* The devices come from the replaying user; a log recorded on others is
 * refused before anything runs, naming both lists. */
Test(graph_rerun, a_log_of_other_devices_is_refused_with_both_lists) {
    char *path = s_record(s_elementwise, "inproc", 0), verdict[1024];
    s_forge_header(path, s_other_devices);
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_EINVAL, "%s", verdict);
    cr_assert(strstr(verdict, "recorded on devices 'CPU,CPU:3'") && strstr(verdict, "run on 'CPU'") && strstr(verdict, "--devices CPU,CPU:3"),
              "%s", verdict);
    unlink(path);
    free(path);
}

/* A header edited without its checksum fails the load, at the header's offset. */
Test(graph_rerun, an_edited_header_fails_the_check_with_its_offset) {
    char *path = s_record(s_elementwise, "inproc", 0);
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    size_t at = (size_t)(log->header - log->data);
    const uint8_t *cc = NULL;
    for (size_t i = 0; !cc && i + 3 <= log->header_len; i++)
        if (memcmp(log->header + i, "\xa2" "cc", 3) == 0) cc = log->header + i;
    cr_assert(cc, "the header names its compiler");
    long where = (long)(cc - log->data) + 4; /* the first byte of the compiler's name */
    ta_log_free(&log);
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    fseek(f, where, SEEK_SET);
    fputc('X', f);
    fclose(f);
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu: the run header's checksum", at);
    cr_assert(strstr(err.text, want), "%s (want %s)", err.text, want);
    char verdict[1024];
    cr_assert_eq(ta_rerun(path, NULL, NULL, verdict, sizeof verdict), TACT_ECORRUPT, "%s", verdict);
    unlink(path);
    free(path);
}

/* Every field of the header is range-checked when a log is read. */
Test(graph_rerun, header_fields_out_of_range_are_refused) {
    static const char *const bad[] = {"cpu_threads", "compile_workers", "timeout_ms", "schedule_cache"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str_with_body(&pk, bad[i], strlen(bad[i]));
        msgpack_pack_int64(&pk, -5);
        ta_run_header_t h;
        ta_error_t err;
        cr_assert_eq(ta_log_header_parse((const uint8_t *)sb.data, sb.size, &h, &err), TACT_ECORRUPT, "%s", bad[i]);
        cr_assert(strstr(err.text, bad[i]) && strstr(err.text, "outside"), "%s", err.text);
        msgpack_sbuffer_destroy(&sb);
    }
    /* A string too long, a transport that is none, an unknown key, a key twice. */
    static const char *const packs[][4] = {{"transport", "carrier-pigeon", NULL, "not one of"},
                                           {"devices", "CPU", "devices", "twice"},
                                           {"shell", "rm -rf /", NULL, "unknown field 'shell'"},
                                           {"cc", "cc\x1b[2J", NULL, "cc holds byte 0x1b at 2; only printable ASCII"},
                                           {"\x1b[2Jx", "", NULL, "unknown field '\\x1b[2Jx'"}};
    for (size_t i = 0; i < sizeof packs / sizeof *packs; i++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, packs[i][2] ? 2 : 1);
        for (int k = 0; k < (packs[i][2] ? 2 : 1); k++) {
            msgpack_pack_str_with_body(&pk, packs[i][0], strlen(packs[i][0]));
            msgpack_pack_str_with_body(&pk, packs[i][1], strlen(packs[i][1]));
        }
        ta_run_header_t h;
        ta_error_t err;
        cr_assert_eq(ta_log_header_parse((const uint8_t *)sb.data, sb.size, &h, &err), TACT_ECORRUPT, "%s", packs[i][0]);
        cr_assert(strstr(err.text, packs[i][3]), "%s", err.text);
        msgpack_sbuffer_destroy(&sb);
    }
    char cc[600];
    memset(cc, 'c', sizeof cc - 1);
    cc[sizeof cc - 1] = '\0';
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_str_with_body(&pk, "cc", 2);
    msgpack_pack_str_with_body(&pk, cc, strlen(cc));
    ta_run_header_t h;
    ta_error_t err;
    cr_assert_eq(ta_log_header_parse((const uint8_t *)sb.data, sb.size, &h, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "cc is 599 bytes long; at most 511"), "%s", err.text);
    msgpack_sbuffer_destroy(&sb);
}

/* Logs hold every tensor's bytes: they are private to their owner. */
Test(graph_rerun, logs_are_created_private) {
    char *path = tu_tmpfile("private.tlog");
    FILE *f = fopen(path, "w"); /* an older file of mode 0644 is made private too */
    cr_assert(f);
    fclose(f);
    chmod(path, 0644);
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", (unsigned)(st.st_mode & 0777));
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    unlink(path);
    free(path);
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
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
    unsetenv("TACT_TEST_PERTURB");
    cr_assert_eq(rc, TACT_EMISMATCH, "%s", verdict);
    cr_assert(strstr(verdict, "port scheduler") && strstr(verdict, "out KERNELS") && strstr(verdict, "payload.kernels[0].fused"), "%s", verdict);
    unlink(path);
    free(path);
}

Test(graph_rerun, damaged_and_missing_logs_are_clear_errors) {
    char verdict[1024];
    cr_assert_eq(ta_rerun("/nonexistent/run.tlog", NULL, NULL, verdict, sizeof verdict), TACT_EIO);
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
    int rc = ta_rerun(path, NULL, NULL, verdict, sizeof verdict);
    cr_assert_eq(rc, TACT_ECORRUPT, "%s", verdict);
    cr_assert(strstr(verdict, "byte offset"), "%s", verdict);
    unlink(path);
    free(path);
}
