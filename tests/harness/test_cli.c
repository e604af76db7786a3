/* test_cli.c - the tact command as a user runs it: --help for every subcommand, paths that are not files, models of the wrong shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "log.h"
#include "tact.h"
#include "testutil.h"

#ifndef TACT_BIN
#error "TACT_BIN (the tact command's path) comes from CMakeLists.txt"
#endif

/* Runs `tact ARGS` (under timeout 60, which only catches a hang), the
 * start of its output (both streams) into out; returns its exit status. */
static int s_tact(char *out, size_t len, const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 60 %s %s 2>&1", TACT_BIN, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run %s", cmd);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    char rest[4096]; /* read to the end (the first len - 1 bytes kept): a closed pipe would kill a long output */
    while (fread(rest, 1, sizeof rest, p) > 0) {}
    int st = pclose(p);
    cr_assert(WIFEXITED(st), "tact %s: no exit status", args);
    cr_assert_neq(WEXITSTATUS(st), 124, "tact %s hung (killed by timeout): %s", args, out);
    return WEXITSTATUS(st);
}

Test(harness_cli, every_subcommand_has_help) {
    static const char *const cmds[] = {"train", "eval", "demo", "bench", "log", "replay", "devices", "worker", "keygen", "version"};
    char out[8192];
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        cr_assert_eq(s_tact(out, sizeof out, args), 0, "tact %s: %s", args, out);
        char want[64];
        snprintf(want, sizeof want, "tact %s ", cmds[i]);
        cr_assert(strstr(out, "usage: ") && strstr(out, want), "tact %s printed: %s", args, out);
    }
    /* Also after other arguments, and with no file named --help opened. */
    cr_assert_eq(s_tact(out, sizeof out, "replay some.tlog --help"), 0, "%s", out);
    cr_assert(strstr(out, "Nothing in the log is executed"), "%s", out);
    cr_assert_eq(s_tact(out, sizeof out, "help"), 0);
    cr_assert(strstr(out, "replay") && strstr(out, "devices"), "%s", out);
    cr_assert_eq(s_tact(out, sizeof out, "frobnicate"), 2);
}

/* Every subcommand that takes a path, given a FIFO (whose open() would
 * wait for a writer) or a folder of them, fails at once naming it. */
Test(harness_cli, a_fifo_path_is_an_error_for_every_subcommand) {
    char dir[] = "/tmp/tact-cli-XXXXXX", fifo[200], cmd[600];
    cr_assert(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/x", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    static const char *const data[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                                       "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s/%s", dir, data[i]);
        cr_assert_eq(mkfifo(p, 0600), 0);
    }
    /* A model file for eval to get past its model (the data is the FIFO). */
    char model[200];
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    tact_tensor *w = tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){2});
    const char *name = "l1.weight";
    cr_assert_eq(tact_save_safetensors(ctx, model, 1, &name, &w), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    const char *const runs[][2] = {
        {"log check %s", "x"},          {"log dump %s", "x"},      {"replay %s", "x"},
        {"eval %s", "x"},               {"eval %s --data %s", "model.safetensors"},
        {"train --steps 1 --data %s", ""}, {"train --steps 1 --log %s", "x"}, {"demo --log %s", "x"},
    };
    char out[8192];
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%s", dir, runs[i][1]);
        if (strstr(runs[i][0], "--data %s") && strstr(runs[i][0], "eval")) snprintf(cmd, sizeof cmd, runs[i][0], path, dir);
        else if (strstr(runs[i][0], "--data")) snprintf(cmd, sizeof cmd, runs[i][0], dir);
        else snprintf(cmd, sizeof cmd, runs[i][0], path);
        int rc = s_tact(out, sizeof out, cmd);
        cr_assert_neq(rc, 0, "tact %s succeeded: %s", cmd, out);
        cr_assert(strstr(out, "not a regular file"), "tact %s: %s", cmd, out);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* `tact eval` of a model whose tensors have the wrong shape: an error
 * naming the tensor and both shapes, not an accuracy. */
Test(harness_cli, eval_refuses_a_model_of_the_wrong_shape) {
    if (access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
        cr_skip_test("dataset-fashion-mnist is not installed (make deps installs it)");
    char dir[] = "/tmp/tact-cli-XXXXXX", model[200], out[8192], cmd[400];
    cr_assert(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/mlp.safetensors", dir);
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, NULL), TACT_OK);
    /* The MLP's names (784 -> 128 -> 10), the first bias stored as [1]. */
    const char *names[4] = {"l1.weight", "l1.bias", "l2.weight", "l2.bias"};
    tact_tensor *ts[4] = {tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){128, 784}), tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){1}),
                          tact_zeros(ctx, TACT_FLOAT32, 2, (int64_t[]){10, 128}), tact_zeros(ctx, TACT_FLOAT32, 1, (int64_t[]){10})};
    cr_assert_eq(tact_save_safetensors(ctx, model, 4, names, ts), TACT_OK, "%s", tact_ctx_error(ctx));
    tact_ctx_close(&ctx);
    snprintf(cmd, sizeof cmd, "eval %s", model);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "\"l1.bias\" is stored as float32 (1,); the parameter is float32 (128,)"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* A log recorded by `tact demo`, checked and replayed by the command; a
 * header edited afterwards fails the check at its offset. */
Test(harness_cli, log_check_refuses_an_edited_header) {
    char *path = tu_tmpfile("cli.tlog"), out[8192], cmd[600];
    snprintf(cmd, sizeof cmd, "demo --log %s", path);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "log check %s", path);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "replay %s", path);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "recorded: ") && strstr(out, "replay matches the recording"), "%s", out);
    /* "cc" in the header, its value changed by one byte. */
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    char head[4096];
    size_t n = fread(head, 1, sizeof head, f);
    char *at = NULL;
    for (size_t i = 0; !at && i + 4 < n; i++)
        if (memcmp(head + i, "\xa2" "cc", 3) == 0) at = head + i + 4;
    cr_assert(at, "the run header names its compiler");
    fseek(f, at - head, SEEK_SET);
    fputc('X', f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "log check %s", path);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "byte offset 10: the run header's checksum does not match"), "%s", out);
    unlink(path);
    free(path);
}

/* A log of two devices, recorded by a program: `tact replay` refuses it on
 * the user's default device, naming the --devices to pass, and matches
 * with it; `tact log dump` starts with the run header. */
Test(harness_cli, replay_takes_the_devices_from_the_user) {
    char *path = tu_tmpfile("cli2.tlog"), out[8192], cmd[600];
    tact_options o;
    tact_options_default(&o);
    o.devices = "CPU,CPU:1";
    o.log_path = path;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    float v[4] = {1, 2, 3, 4}, got[4];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, (int64_t[]){4}, v);
    cr_assert_eq(tact_read(tact_add(tact_to(tact_exp2(tact_to(x, "CPU:1")), "CPU"), x), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    snprintf(cmd, sizeof cmd, "log dump %s", path);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(!strncmp(out, "run header: library '", 21) && strstr(out, "devices 'CPU,CPU:1'"), "%.300s", out);
    unsetenv("TACT_DEVICE");
    snprintf(cmd, sizeof cmd, "replay %s", path);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "use --devices CPU,CPU:1"), "%s", out);
    snprintf(cmd, sizeof cmd, "replay --devices CPU,CPU:1 --threads 1 %s", path);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "replaying: devices 'CPU,CPU:1', cpu_threads 1") && strstr(out, "replay matches the recording"), "%s", out);
    unlink(path);
    free(path);
}

/* Runs `tact ARGS` with its whole standard output into a malloc'd string. */
static char *s_tact_all(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 60 %s %s", TACT_BIN, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run %s", cmd);
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    for (size_t n; (n = fread(out + len, 1, cap - len - 1, p)) > 0;)
        if ((len += n) + 1 == cap) out = realloc(out, cap *= 2);
    out[len] = '\0';
    cr_assert_eq(pclose(p), 0, "tact %s failed: %.300s", args, out);
    return out;
}

/* `tact log dump -v` names ops and dtypes and shows each kernel's nodes;
 * --source adds the code for the device that asked for the kernel;
 * --json gives one JSON object a line (checked by Python's json). */
Test(harness_cli, log_dump_is_readable_and_json) {
    char *path = tu_tmpfile("dump.tlog"), cmd[600];
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    float v[6] = {1, 2, 3, 4, 5, 6}, got[2];
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 3}, v);
    cr_assert_eq(tact_read(tact_sum_axis(tact_mul(x, x), 1), got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
    snprintf(cmd, sizeof cmd, "log dump -v %s", path);
    char *out = s_tact_all(cmd);
    cr_assert(strstr(out, "op=MUL dtype=float32 shape=[2 3]"), "no named op in: %.2000s", out);
    cr_assert(strstr(out, "kernel r_2_3: 4 nodes") && strstr(out, " MUL      float32  src 0 0"), "no kernel nodes in: %.3000s", out);
    cr_assert(!strstr(out, "source for"), "-v printed sources");
    cr_assert(strstr(out, "kernel r_2_3 on CPU: "), "no kernel time from the sidecar in: %.3000s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "log dump --source %s", path);
    out = s_tact_all(cmd);
    cr_assert(strstr(out, "--- source for CPU (C):\n/* r_2_3:") && strstr(out, "void r_2_3(int64_t start, int64_t end"), "no source in: %.4000s", out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "timeout 60 %s log dump --json %s | python3 -c 'import json, sys\n"
             "lines = [json.loads(l) for l in sys.stdin]\n"
             "ops = [n[\"op\"] for l in lines if l[\"msg\"][\"type\"] == \"OP_BATCH\" for n in l[\"msg\"][\"ops\"]]\n"
             "assert \"MUL\" in ops, ops\n"
             "assert all(set(l) == {\"port\", \"stream\", \"k\", \"ms\", \"dir\", \"msg\"} for l in lines)\n"
             "print(len(lines), \"lines\")'",
             TACT_BIN, path);
    FILE *p = popen(cmd, "r");
    char res[256] = "";
    cr_assert(p && fgets(res, sizeof res, p));
    cr_assert_eq(pclose(p), 0, "the JSON lines do not parse, or lack the MUL: %s", res);
    cr_assert(atoi(res) > 10, "%s", res);
    unlink(path);
    free(path);
}

/* Records `steps` steps of x = relu(x W) + 1, a realize and a read each,
 * then (backward) the gradient of x's sum for W, into path. */
static void s_record_steps_grad(const char *path, int steps, int backward) {
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    tact_ctx *ctx;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    float w[16], x0[8], got[8];
    for (int i = 0; i < 16; i++) w[i] = (float)((i * 7) % 5) * 0.25f - 0.5f;
    for (int i = 0; i < 8; i++) x0[i] = (float)i;
    tact_tensor *W = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){4, 4}, w), *x = tact_from_data(ctx, TACT_FLOAT32, 2, (int64_t[]){2, 4}, x0);
    if (backward) W = tact_set_requires_grad(W, 1);
    for (int s = 0; s < steps; s++) {
        x = tact_add(tact_relu(tact_matmul(x, W)), tact_scalar(ctx, 1));
        cr_assert_eq(tact_read(x, got, sizeof got), TACT_OK, "%s", tact_ctx_error(ctx));
    }
    if (backward) {
        cr_assert_eq(tact_backward(tact_sum_all(x), NULL), TACT_OK, "%s", tact_ctx_error(ctx));
        float g[16];
        cr_assert_eq(tact_read(tact_grad(W), g, sizeof g), TACT_OK, "%s", tact_ctx_error(ctx));
    }
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}

static void s_record_steps(const char *path, int steps) { s_record_steps_grad(path, steps, 0); }

/* `tact replay --stage NAME` re-drives one stage from its recorded inbox:
 * each pure stage matches a run with a backward pass; a scheduler changed
 * by a test switch is caught at its first KERNELS, naming the field; the
 * compilers rebuild with the user's compiler and match; executors are
 * refused with the reason. `replay --log`
 * keeps the replay's own log, which log diff finds equal. */
Test(harness_cli, replay_stage_redrives_one_stage) {
    char *a = tu_tmpfile("stagea.tlog"), *again = tu_tmpfile("stageb.tlog"), out[16384], cmd[1200];
    s_record_steps_grad(a, 3, 1);
    static const char *const stages[] = {"graph", "scheduler", "planner", "compiler", "autograd"};
    for (int i = 0; i < 5; i++) {
        snprintf(cmd, sizeof cmd, "replay --stage %s %s", stages[i], a);
        cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s: %s", stages[i], out);
        cr_assert(strstr(out, "as recorded") && strstr(out, "the stage matches the recording"), "%s: %s", stages[i], out);
    }
    setenv("TACT_TEST_PERTURB", "scheduler", 1);
    snprintf(cmd, sizeof cmd, "replay --stage scheduler %s", a);
    int rc = s_tact(out, sizeof out, cmd);
    unsetenv("TACT_TEST_PERTURB");
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert(strstr(out, "first difference: scheduler (port 3), sent message ") && strstr(out, "payload.kernels[0].fused") &&
                  strstr(out, "recorded: KERNELS") && strstr(out, "replayed: KERNELS"),
              "%s", out);
    /* The executors, with programs today's compilers rebuild from the
     * recorded jobs (an executor given another plan diverges: below). */
    snprintf(cmd, sizeof cmd, "replay --stage executor %s", a);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "programs rebuilt by today's compilers from the recorded jobs: ") && strstr(out, "the stage matches the recording") &&
                  !strstr(out, "without a rebuilt program"),
              "%s", out);
    snprintf(cmd, sizeof cmd, "replay --log %s %s", again, a);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "log diff %s %s", a, again);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "the replay's own log differs: %s", out);
    unlink(a), unlink(again);
    free(a), free(again);
}

/* `tact log diff`: two runs of one program match (exit 0); a 3-step and a
 * 4-step run differ (exit 1) at the fourth step, each port that differs
 * named on a "first difference:" line; a scheduler changed by a test
 * switch is named with its message and field, also past a difference of
 * settings. */
Test(harness_cli, log_diff_names_the_first_difference) {
    char *a = tu_tmpfile("diffa.tlog"), *b = tu_tmpfile("diffb.tlog"), *c = tu_tmpfile("diffc.tlog"), *d = tu_tmpfile("diffd.tlog");
    char out[16384], cmd[1200];
    s_record_steps(a, 3);
    s_record_steps(b, 3);
    s_record_steps(c, 4);
    snprintf(cmd, sizeof cmd, "log diff %s %s", a, b);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "two runs of one program differ: %s", out);
    cr_assert(strstr(out, "the runs match") && !strstr(out, "first difference"), "%s", out);
    snprintf(cmd, sizeof cmd, "log diff %s %s", a, c);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    /* The client's first difference is its fourth step's ops: records
     * 0..13 configure the stages, then each step is 2 writes and 4 more. */
    cr_assert(strstr(out, "first difference: client (port 1), record ") && strstr(out, "record (missing in A)") && strstr(out, "the runs differ"), "%s", out);
    setenv("TACT_TEST_PERTURB", "scheduler", 1);
    s_record_steps(d, 3);
    unsetenv("TACT_TEST_PERTURB");
    snprintf(cmd, sizeof cmd, "log diff %s %s", a, d);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "first difference: scheduler (port 3), record ") && strstr(out, "(out KERNELS, seq 1): payload.kernels[0].fused"), "%s", out);
    cr_assert(!strstr(out, "first difference: client") && !strstr(out, "first difference: graph"), "stages before the scheduler differ: %s", out);
    /* A setting that differs (CONFIG, record 0 of every stage) does not
     * hide what differs after it. */
    setenv("TACT_TEST_PERTURB", "scheduler", 1);
    setenv("TACT_SCHEDULE_CACHE", "0", 1);
    s_record_steps(d, 3);
    unsetenv("TACT_TEST_PERTURB");
    unsetenv("TACT_SCHEDULE_CACHE");
    snprintf(cmd, sizeof cmd, "log diff %s %s", a, d);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "first difference: scheduler (port 3), record 0 (in CONFIG, seq ") && strstr(out, "payload.schedule_cache") &&
                  strstr(out, "(settings: the comparison goes on past them)") &&
                  strstr(out, "first difference after the settings: scheduler (port 3), record ") &&
                  strstr(out, "(out KERNELS, seq 1): payload.kernels[0].fused"),
              "%s", out);
    snprintf(cmd, sizeof cmd, "log diff %s", a);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 2, "%s", out);
    char *paths[] = {a, b, c, d};
    for (int i = 0; i < 4; i++) unlink(paths[i]), free(paths[i]);
}

/* Copies the log at from to `to`, every record as it was except the
 * executor's PLANs, whose steps edit() may change (a hand-edited log). */
typedef int (*s_edit_fn)(ta_step_rec_t *steps, size_t n);
static int s_edit_plans(const char *from, const char *to, s_edit_fn edit) {
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(from, &log, &err), TACT_OK, "%s", err.text);
    ta_log_writer_t *w;
    cr_assert_eq(ta_log_writer_new(&w, to, (ta_bytes_t){log->header, log->header_len}, &err), TACT_OK, "%s", err.text);
    int edited = 0;
    for (size_t i = 0; i < log->nstreams; i++) {
        const ta_log_stream_info_t *st = &log->streams[i];
        ta_log_stream_t *out = ta_log_writer_stream(w, st->id, st->name);
        cr_assert(out);
        for (size_t k = 0; k < st->nrecords; k++) {
            ta_msg_t m;
            cr_assert_eq(ta_log_record_msg(&st->records[k], &m, NULL), TACT_OK);
            static ta_step_rec_t steps[4096];
            if (!edited && !strcmp(st->name, "executor") && m.type == TA_MSG_PLAN && st->records[k].dir == TA_LOG_IN && m.as.plan.steps.n <= 4096) {
                ta_recs_it_t it;
                size_t n = 0;
                ta_recs_begin(&it, &m.as.plan.steps);
                while (ta_recs_next(&it, &steps[n])) n++;
                if (edit(steps, n)) {
                    m.as.plan.steps = ta_recs(TA_REC_STEP, steps, n);
                    edited = 1;
                }
            }
            cr_assert_eq(ta_log_stream_record(out, st->records[k].dir, &m, NULL), TACT_OK);
        }
    }
    cr_assert_eq(ta_log_writer_finish(&w, &err), TACT_OK, "%s", err.text);
    ta_log_free(&log);
    return edited;
}

/* A planted early read: the first plan whose kernel reads another's
 * output gets the two swapped. */
static int s_swap_dependent(ta_step_rec_t *s, size_t n) {
    for (size_t j = 1; j < n; j++)
        for (size_t i = 0; i < j; i++)
            for (uint32_t b = 1; !s[i].copy && !s[j].copy && b < s[j].n_bufs; b++)
                if (s[j].bufs[b] == s[i].bufs[0] && !(s[j].n_writes > b && s[j].writes[b])) {
                    ta_step_rec_t t = s[i];
                    s[i] = s[j], s[j] = t;
                    return 1;
                }
    return 0;
}

/* A planted reuse: a step's output takes the memory of an input that a
 * later step still reads. */
static int s_reuse_live(ta_step_rec_t *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        for (size_t j = i + 1; j < n; j++)
            for (uint32_t b = 1; !s[i].copy && !s[j].copy && b < s[j].n_bufs; b++)
                if (s[j].bufs[b] != s[i].bufs[0]) {
                    s[i].reuse = s[j].bufs[b];
                    return 1;
                }
    return 0;
}

/* `tact log check --deep` follows each executor's buffers: a recorded run
 * has no problem; a plan edited to read a buffer before the step that
 * writes it, or to reuse a buffer a later step reads, is flagged with the
 * step and buffer. */
Test(harness_cli, log_check_deep_finds_planted_bugs) {
    char *a = tu_tmpfile("deep.tlog"), *b = tu_tmpfile("deepb.tlog"), out[16384], cmd[1200];
    s_record_steps_grad(a, 3, 1);
    snprintf(cmd, sizeof cmd, "log check --deep %s", a);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "deep check: 1 executor stream, 0 problems"), "%s", out);
    cr_assert(s_edit_plans(a, b, s_swap_dependent), "no plan with a kernel reading another's output");
    snprintf(cmd, sizeof cmd, "log check --deep %s", b);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "problem: executor (port 7): record ") && strstr(out, "before anything wrote it"), "%s", out);
    cr_assert(s_edit_plans(a, b, s_reuse_live), "no plan with two kernels");
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "for its output while step ") && strstr(out, "still reads it"), "%s", out);
    char *paths[] = {a, b};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s.times", paths[i]);
        unlink(cmd), unlink(paths[i]), free(paths[i]);
    }
}

/* The test accuracy `tact train` or `tact eval` printed, in percent. */
static double s_accuracy(const char *out) {
    const char *at = strstr(out, "test accuracy ");
    cr_assert(at, "no test accuracy in: %s", out);
    return strtod(at + strlen("test accuracy "), NULL);
}

/* `tact train --devices CPU,CPU:1` trains data-parallel (the model on
 * both, each batch split): the same accuracy as on one device, within
 * 0.5%, its closing line naming the devices; the model it saves
 * evaluates to that accuracy on one device and on both. */
Test(harness_cli, train_over_two_devices_matches_one_device) {
    if (access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
        cr_skip_test("dataset-fashion-mnist is not installed (make deps installs it)");
    char dir[] = "/tmp/tact-cli-XXXXXX", out[8192], cmd[600];
    cr_assert(mkdtemp(dir));
    cr_assert_eq(s_tact(out, sizeof out, "train --model mlp --steps 200 --threads 1"), 0, "%s", out);
    double one = s_accuracy(out);
    cr_assert(strstr(out, "; 1 device ("), "%s", out);
    snprintf(cmd, sizeof cmd, "train --model mlp --steps 200 --threads 1 --devices CPU,CPU:1 --out %s/m.safetensors", dir);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    double two = s_accuracy(out);
    cr_assert(strstr(out, "; 2 devices (CPU,CPU:1)"), "%s", out);
    cr_assert(one > 70 && fabs(one - two) <= 0.5, "one device %.2f%%, two %.2f%%", one, two);
    snprintf(cmd, sizeof cmd, "eval %s/m.safetensors --threads 1", dir);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert_eq(s_accuracy(out), two, "%s", out);
    snprintf(cmd, sizeof cmd, "eval %s/m.safetensors --threads 1 --devices CPU,CPU:1", dir);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert_eq(s_accuracy(out), two, "%s", out);
    cr_assert_neq(s_tact(out, sizeof out, "train --steps 1 --devices CPU,NOPE:3"), 0, "%s", out);
    cr_assert(strstr(out, "NOPE"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* `tact devices --json`: one DEVICE record a line, the CPU's first, its
 * target C at the vector width and fma this processor has (asked here
 * independently); every line one JSON object. */
Test(harness_cli, devices_json_prints_one_device_record_a_line) {
    char out[16384];
    cr_assert_eq(s_tact(out, sizeof out, "devices --json"), 0, "%s", out);
    int vector = 16, fma = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    vector = __builtin_cpu_supports("avx512f") ? 64 : __builtin_cpu_supports("avx") ? 32 : 16;
    fma = __builtin_cpu_supports("fma") != 0;
#endif
    char want[128];
    cr_assert(strncmp(out, "{\"uri\":\"CPU\",\"kind\":\"CPU\",", 26) == 0, "%s", out);
    snprintf(want, sizeof want, "\"target\":[{\"language\":\"C\",\"vector_bytes\":%d,\"fma\":%d,", vector, fma);
    cr_assert(strstr(out, want), "want %s in %s", want, out);
    int lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        size_t n = strlen(line);
        cr_assert(n > 2 && line[0] == '{' && line[n - 1] == '}', "not one object: %s", line);
        int depth = 0, in_str = 0;
        for (size_t k = 0; k < n; k++) { /* balanced outside strings, closed at the end */
            char c = line[k];
            if (in_str) in_str = !(c == '"' && line[k - 1] != '\\');
            else if (c == '"') in_str = 1;
            else depth += (c == '{' || c == '[') - (c == '}' || c == ']');
            cr_assert(depth > 0 || k == n - 1, "closes early at %zu: %s", k, line);
        }
        cr_assert(depth == 0 && !in_str, "%s", line);
    }
    tact_device_info d[16];
    cr_assert_eq(lines, tact_devices(d, 16), "%d lines", lines);
    cr_assert_eq(s_tact(out, sizeof out, "devices --jsn"), 2, "%s", out);
}

/* `tact replay --stage executor`: a recorded run's executor, re-driven
 * with programs rebuilt from its recorded jobs, matches; given a plan
 * edited to run two dependent steps the other way round, it diverges,
 * named with its port and message. */
Test(harness_cli, replay_stage_executor_runs_rebuilt_programs) {
    char *a = tu_tmpfile("exa.tlog"), *b = tu_tmpfile("exb.tlog"), out[16384], cmd[1200];
    s_record_steps_grad(a, 3, 1);
    snprintf(cmd, sizeof cmd, "replay --stage executor %s", a);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "programs rebuilt by today's compilers from the recorded jobs: ") && strstr(out, "the stage matches the recording"), "%s", out);
    cr_assert(s_edit_plans(a, b, s_swap_dependent), "no plan with a kernel reading another's output");
    snprintf(cmd, sizeof cmd, "replay --stage executor %s", b);
    cr_assert_eq(s_tact(out, sizeof out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "first difference: executor (port 7)") && strstr(out, "the stage diverged from the recording"), "%s", out);
    char *paths[] = {a, b};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s.times", paths[i]);
        unlink(cmd), unlink(paths[i]), free(paths[i]);
    }
}
