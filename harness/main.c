/* main.c - the tact command: demo, bench, log tools and whole-run replay. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device.h"
#include "harness.h"
#include "mem.h"
#include "pipeline.h"
#include "replay.h"
#include "rerun.h"
#include "tact.h"

void h_line(const char *name, double value, const char *unit, const char *peer, double peer_value, double ratio) {
    printf("{\"name\":\"%s\",\"value\":%.4g,\"unit\":\"%s\",\"peer\":\"%s\",\"peer_value\":%.4g,\"ratio\":%.3f}\n", name,
           value, unit, peer, peer_value, ratio);
    fflush(stdout);
}

FILE *h_peer_open(const char *script, const char *module, const char *args, char *why, size_t why_len) {
    char exe[1024], cmd[3000];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (why) *why = '\0';
    if (n <= 0) return NULL;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    char venv[1100];
    snprintf(venv, sizeof venv, "%s/../.tools/peers/bin/python", exe);
    /* The first that imports the module; the last is tried anyway (a
     * script may fall back, as peer_kernels.py to NumPy). */
    const char *pythons[] = {venv, "/usr/bin/python3", "python3"};
    for (size_t i = 0; i < sizeof pythons / sizeof *pythons; i++) {
        if (i == 0 && access(venv, X_OK) != 0) continue;
        snprintf(cmd, sizeof cmd, "'%s' -c 'import %s' 2>/dev/null", pythons[i], module);
        if (i < 2 && system(cmd) != 0) continue;
        snprintf(cmd, sizeof cmd, "'%s' '%s/../harness/%s' %s 2>/dev/null", pythons[i], exe, script, args);
        if (why && i == 1 && strcmp(module, "torch") == 0)
            snprintf(why, why_len, "(Debian's python3-torch, the fallback: make peers installs current PyTorch)");
        return popen(cmd, "r");
    }
    return NULL;
}

double h_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int h_runtime_option(int argc, char **argv, int *i, ta_rt_config_t *cfg) {
    const char *opt = argv[*i];
    if (strcmp(opt, "--transport") != 0 && strcmp(opt, "--log") != 0 && strcmp(opt, "--timeout-ms") != 0) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "tact: %s needs a value\n", opt);
        return -1;
    }
    const char *val = argv[++*i];
    if (strcmp(opt, "--transport") == 0 && ta_transport_parse(val, &cfg->transport) != 0) {
        fprintf(stderr, "tact: unknown transport '%s' (inproc, ipc or tcp)\n", val);
        return -1;
    }
    if (strcmp(opt, "--log") == 0) cfg->log_path = val;
    if (strcmp(opt, "--timeout-ms") == 0 && sscanf(val, "%d", &cfg->timeout_ms) != 1) {
        fprintf(stderr, "tact: --timeout-ms needs a number of milliseconds\n");
        return -1;
    }
    return 1;
}

static void s_replay_usage(FILE *f) {
    fprintf(f, "usage: tact replay [--devices LIST] [--threads N] [--timeout-ms N] [--log OUT] FILE\n"
               "       tact replay --stage NAME FILE\n"
               "Runs the program recorded in FILE again through a fresh in-process pipeline and compares\n"
               "every stage's messages with the recording.  Nothing in the log is executed: the devices\n"
               "(default: TACT_DEVICE, else CPU), CPU threads (default: one per core), timeout (default\n"
               "60000 ms) and kernel compiler (TACT_CC) are yours; the recorded ones are shown, and a log\n"
               "recorded on other devices is refused with the list to pass.  --log keeps the replay's own\n"
               "log at OUT (tact log diff FILE OUT compares them).\n"
               "--stage re-drives one stage of today's build (graph, scheduler, planner, compiler, executor or autograd)\n"
               "from its recorded inbox and compares what it sends with the recording: exit 0 when it matches,\n"
               "1 with the first divergent message.  A compiler builds with your TACT_CC, never the recorded\n"
               "command; an executor runs programs today's compilers rebuild from the recorded jobs (with\n"
               "your TACT_CC), never the compiled objects the log holds.\n");
}

/* The stages `replay --stage` re-drives: pure functions of their inbox. */
static const struct {
    const char *name;
    const ta_actor_ops_t *ops;
} s_stages[] = {{"graph", &ta_graph_ops},
                {"scheduler", &ta_scheduler_ops},
                {"planner", &ta_planner_ops},
                {"compiler", &ta_compiler_ops},
                {"autograd", &ta_autograd_ops}};

/* A compiler replays with the user's compiler command (TACT_CC, else
 * cc), never the one its recorded CONFIG names. */
static void s_user_cc(ta_msg_t *m, void *ud) {
    if (m->type == TA_MSG_CONFIG) m->as.config.cc = ta_bytes_str(ud);
}

/* The programs an executor's replay runs: rebuilt by today's compilers
 * from the recorded jobs (never the recorded objects), each kept as its
 * encoded PROGRAM by the compiler's port, corr and kernel index. */
typedef struct {
    uint32_t compiler;
    uint64_t corr, index;
    uint8_t *env, *bulk;
    size_t env_len, bulk_len;
} s_fresh_t;

typedef struct {
    s_fresh_t *v;
    size_t n, cap;
    uint32_t compiler; /* the compiler being replayed */
    uint64_t rebuilt, missing;
} s_fresh_set_t;

static int s_keep_program(void *ud, const ta_msg_t *m) {
    s_fresh_set_t *f = ud;
    if (m->type != TA_MSG_PROGRAM) return TACT_OK;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    s_fresh_t e = {f->compiler, m->corr, m->as.program.index, NULL, NULL, 0, 0};
    int rc = ta_msg_encode(m, &sb);
    if (rc == TACT_OK && ta_grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v) == TACT_OK && (e.env = ta_malloc(sb.size)) &&
        (!m->bulk.len || (e.bulk = ta_malloc(m->bulk.len)))) {
        memcpy(e.env, sb.data, sb.size);
        e.env_len = sb.size;
        if (m->bulk.len) memcpy(e.bulk, m->bulk.ptr, m->bulk.len);
        e.bulk_len = m->bulk.len;
        f->v[f->n++] = e;
    } else {
        ta_free(e.env);
        rc = TACT_ENOMEM;
    }
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* An executor's inbox message as the replay feeds it: a PROGRAM gets
 * today's build of the same job in place of the recorded one (the
 * recorded object is never loaded); without one, it is a failed build. */
static void s_fresh_program(ta_msg_t *m, void *ud) {
    s_fresh_set_t *f = ud;
    if (m->type != TA_MSG_PROGRAM) return;
    for (size_t i = f->n; i-- > 0;) {
        s_fresh_t *e = &f->v[i];
        if (e->compiler != m->sender || e->corr != m->corr || e->index != m->as.program.index) continue;
        ta_msg_t fresh;
        uint64_t bulk_len;
        if (ta_msg_decode(&fresh, e->env, e->env_len, 0, &bulk_len, NULL) != TACT_OK) break;
        m->as.program = fresh.as.program;
        m->bulk = (ta_bytes_t){e->bulk, e->bulk_len};
        f->rebuilt++;
        return;
    }
    f->missing++;
    m->as.program.status = TACT_ECOMPILE;
    m->as.program.text = ta_bytes_str("replay: no program rebuilt for this job");
    m->as.program.digest = (ta_bytes_t){0};
    m->bulk = (ta_bytes_t){0};
}

static void s_fresh_free(s_fresh_set_t *f) {
    for (size_t i = 0; i < f->n; i++) ta_free(f->v[i].env), ta_free(f->v[i].bulk);
    ta_free(f->v);
}

/* `tact replay --stage NAME FILE`: each stream of that name re-driven. */
static int s_replay_stage(const char *name, const char *file) {
    const ta_actor_ops_t *ops = NULL;
    for (size_t i = 0; i < sizeof s_stages / sizeof *s_stages; i++)
        if (!strcmp(s_stages[i].name, name)) ops = s_stages[i].ops;
    if (!strcmp(name, "executor")) ops = &ta_executor_ops;
    if (!ops) {
        fprintf(stderr, "tact replay: --stage takes graph, scheduler, planner, compiler, executor or autograd, not '%s'\n", name);
        return 2;
    }
    ta_log_t *log;
    ta_error_t err;
    if (ta_log_load(file, &log, &err) != TACT_OK) {
        fprintf(stderr, "tact replay: %s: %s\n", file, err.text);
        return 1;
    }
    int found = 0, differ = 0;
    const char *user_cc = getenv("TACT_CC");
    if (!user_cc || !*user_cc) user_cc = "cc";
    if ((ops == &ta_compiler_ops || ops == &ta_executor_ops) && log->run.cc[0] && strcmp(log->run.cc, user_cc) != 0)
        printf("note: recorded with the kernel compiler '%s', replayed with '%s' (TACT_CC): programs will differ\n", log->run.cc, user_cc);
    /* An executor runs programs: today's compilers rebuild them first,
     * from the jobs they were recorded taking. */
    s_fresh_set_t fresh = {0};
    for (size_t i = 0; ops == &ta_executor_ops && i < log->nstreams; i++) {
        if (strcmp(log->streams[i].name, "compiler") != 0) continue;
        fresh.compiler = log->streams[i].id;
        if (ta_replay_actor_run(log, fresh.compiler, &ta_compiler_ops, NULL, s_user_cc, (void *)user_cc, s_keep_program, &fresh, NULL, &err) != TACT_OK)
            printf("compiler (port %" PRIu32 "): %s\n", fresh.compiler, err.text);
    }
    if (ops == &ta_executor_ops) printf("programs rebuilt by today's compilers from the recorded jobs: %zu\n", fresh.n);
    for (size_t i = 0; i < log->nstreams; i++) {
        const ta_log_stream_info_t *st = &log->streams[i];
        if (strcmp(st->name, name) != 0) continue;
        found = 1;
        ta_replay_report_t rep;
        memset(&rep, 0, sizeof rep);
        int rc = ops == &ta_executor_ops ? ta_replay_actor_filtered(log, st->id, ops, NULL, s_fresh_program, &fresh, &rep, &err)
                                         : ta_replay_actor_filtered(log, st->id, ops, NULL, ops == &ta_compiler_ops ? s_user_cc : NULL, (void *)user_cc, &rep, &err);
        if (rc == TACT_OK) {
            printf("stage %s (port %" PRIu32 "): %" PRIu64 " messages in, %" PRIu64 " out, as recorded\n", name, st->id, rep.in_count, rep.out_count);
        } else if (rc == TACT_EMISMATCH) {
            differ = 1;
            printf("first difference: %s (port %" PRIu32 "), sent message %" PRIu64 " (while processing inbox message %" PRIu64 "): %s\n"
                   "  recorded: %s\n  replayed: %s\n",
                   name, st->id, rep.out_index, rep.in_index, rep.field, rep.expected, rep.actual);
        } else {
            differ = 1;
            printf("stage %s (port %" PRIu32 "): %s\n", name, st->id, err.text);
        }
    }
    if (ops == &ta_executor_ops && fresh.missing) printf("PROGRAMs without a rebuilt program (fed as failed builds): %" PRIu64 "\n", fresh.missing);
    s_fresh_free(&fresh);
    ta_log_free(&log);
    if (!found) {
        fprintf(stderr, "tact replay: %s has no %s stream\n", file, name);
        return 1;
    }
    printf("%s\n", differ ? "the stage diverged from the recording" : "the stage matches the recording");
    return differ;
}

/* `tact replay [options] FILE`. */
static int s_replay(int argc, char **argv) {
    ta_rerun_options_t o = {NULL, 0, 0, NULL};
    const char *file = NULL, *stage = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            s_replay_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--stage") || !strcmp(a, "--log")) {
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            if (!v || v[0] == '-') {
                fprintf(stderr, "tact replay: %s needs %s\n", a, !strcmp(a, "--stage") ? "a stage's name" : "a path");
                return 2;
            }
            if (!strcmp(a, "--stage")) stage = v;
            else o.keep_log = v;
        } else if (!strcmp(a, "--devices") || !strcmp(a, "--threads") || !strcmp(a, "--timeout-ms")) {
            char *end = NULL;
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            long n = v ? strtol(v, &end, 10) : -1;
            int num = v && end != v && *end == '\0';
            if (v && !strcmp(a, "--devices")) o.devices = v;
            else if (num && !strcmp(a, "--threads") && n >= 0 && n <= 65536) o.cpu_threads = (int)n;
            else if (num && !strcmp(a, "--timeout-ms") && n >= 0 && n <= 2147483647) o.timeout_ms = (int)n;
            else {
                fprintf(stderr, "tact replay: %s needs %s\n", a, !strcmp(a, "--devices") ? "a device list" : "a number (0: the default)");
                return 2;
            }
        } else if (a[0] == '-' || file) {
            fprintf(stderr, "tact replay: unexpected argument '%s'\n", a);
            s_replay_usage(stderr);
            return 2;
        } else {
            file = a;
        }
    }
    if (!file) {
        s_replay_usage(stderr);
        return 2;
    }
    if (stage) {
        if (o.keep_log) {
            fprintf(stderr, "tact replay: --log keeps a whole run's log; --stage replays one stage\n");
            return 2;
        }
        return s_replay_stage(stage, file);
    }
    char verdict[1024];
    int rc = ta_rerun(file, &o, stdout, verdict, sizeof verdict);
    printf("%s: %s\n", file, verdict);
    return rc == TACT_OK ? 0 : 1;
}

static void s_devices_usage(FILE *f) {
    fprintf(f, "usage: tact devices [--json]\n"
               "the devices present, with their limits; --json: one DEVICE record a line (docs/messages.md),\n"
               "its target what its programs are built for\n");
}

/* One DEVICE record a line, as JSON. */
static int s_devices_json(void) {
    ta_device_info_t info[64];
    int n = ta_device_list(info, 64);
    for (int i = 0; i < n && i < 64; i++) {
        ta_device_rec_t rec;
        ta_target_rec_t target;
        char line[4096];
        ta_device_rec_of(&info[i], info[i].name, &rec, &target);
        printf("%s\n", ta_rec_json(TA_REC_DEVICE, &rec, line, sizeof line));
    }
    return 0;
}

static int s_devices(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) return s_devices_json();
        fprintf(stderr, "tact devices: unknown argument %s\n", argv[i]);
        s_devices_usage(stderr);
        return 2;
    }
    tact_device_info d[16];
    int n = tact_devices(d, 16);
    for (int i = 0; i < n && i < 16; i++)
        printf("%-6s %s%s%s\n       %d compute units, %.1f GiB, largest buffer %.1f GiB, work groups up to %lld, fp16 %s\n", d[i].name,
               d[i].model, d[i].driver[0] ? " | " : "", d[i].driver, d[i].compute_units, (double)d[i].memory / (1u << 30),
               (double)d[i].max_buffer / (1u << 30), (long long)d[i].max_group, d[i].fp16 ? "yes" : "no");
    printf("%d device%s (virtual CPU devices CPU:0..CPU:7 share the CPU)\n", n, n == 1 ? "" : "s");
    return 0;
}

static int s_version(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("tact %s\n", tact_version());
    return 0;
}

/* The subcommands: each with its arguments and what it does, which both
 * `tact help` and `tact CMD --help` print (train, eval and replay print
 * more: their options and defaults). */
static const struct {
    const char *name, *args, *what;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *f);
} s_cmds[] = {
    {"train", "[--model mlp|cnn] [--epochs N] ...", "train a classifier on Fashion-MNIST", h_train, h_train_usage},
    {"eval", "MODEL.safetensors [--data DIR]", "a saved model's test accuracy", h_eval, h_train_usage},
    {"demo", "[--transport inproc|ipc|tcp|tcp-insecure] [--log FILE] | --actors [...]", "run work through the pipeline (or bare actors)",
     h_demo, NULL},
    {"bench", "runtime|pipeline|kernels|train|devices|cuda|python [--quick]", "measurements beside their peers (JSON lines)", h_bench, NULL},
    {"log", "check FILE | dump [-v] FILE", "validate or print a message log (-v: every payload record)", h_log, NULL},
    {"replay", "[--devices L] [--threads N] [--timeout-ms N] FILE", "run a recorded run again and check every stage", s_replay, s_replay_usage},
    {"devices", "[--json]", "the devices present, with their limits (--json: DEVICE records)", s_devices, s_devices_usage},
    {"worker", "--listen tcp://HOST:PORT|ipc://PATH [--devices L] [--print-uri]", "host this machine's devices for clients elsewhere",
     h_worker, h_worker_usage},
    {"keygen", "[--force | --show]", "make (or show) this user's CURVE key for workers and their clients", h_keygen, NULL},
    {"version", "", "the library's version", s_version, NULL},
};
enum { S_NCMDS = sizeof s_cmds / sizeof *s_cmds };

static void s_usage(FILE *f) {
    fprintf(f, "usage: tact <command> [options]   (tact <command> --help for one)\n");
    for (int i = 0; i < S_NCMDS; i++) fprintf(f, "  %-8s %s\n           %s\n", s_cmds[i].name, s_cmds[i].args, s_cmds[i].what);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        s_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        s_usage(stdout);
        return 0;
    }
    for (int i = 0; i < S_NCMDS; i++) {
        if (strcmp(cmd, s_cmds[i].name) != 0) continue;
        for (int k = 2; k < argc; k++)
            if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) {
                if (s_cmds[i].help) s_cmds[i].help(stdout);
                else printf("usage: tact %s %s\n  %s\n", s_cmds[i].name, s_cmds[i].args, s_cmds[i].what);
                return 0;
            }
        return s_cmds[i].run(argc - 2, argv + 2);
    }
    fprintf(stderr, "tact: unknown command '%s'\n", cmd);
    s_usage(stderr);
    return 2;
}
