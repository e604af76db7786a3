/* logtool.c - `tact log check|dump`: validate a message log, or print it for a person (ops and dtypes by name, kernels' nodes and sources) or for tools (JSON lines). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ast.h"
#include "cc.h"
#include "device.h"
#include "dtype.h"
#include "file.h"
#include "harness.h"
#include "log.h"
#include "lower.h"
#include "mem.h"
#include "mpread.h"
#include "ops.h"
#include "render.h"

/* Names for the numbers a person reads: ops and dtypes. */
static const char *s_namer(ta_rec_type_t type, const char *field, uint64_t v) {
    if ((type == TA_REC_NODE || type == TA_REC_ANODE) && strcmp(field, "op") == 0) return v < TA_OP__COUNT ? ta_op_name((int)v) : NULL;
    if (strcmp(field, "dtype") == 0 || strcmp(field, "buf_dtypes") == 0) return v < 64 && ta_dtype_valid((tact_dtype)v) ? ta_dtype_name((tact_dtype)v) : NULL;
    return NULL;
}

/* The devices of the run, from the client's first CONFIG: executor port
 * -> its DEVICE record's description (for rendering sources). */
typedef struct {
    int n;
    uint32_t port[64];
    ta_device_info_t info[64];
    int strict; /* CONFIG.strict: kernels with tact's own log2 and sin */
} s_devices_t;

static void s_learn_devices(const ta_msg_t *m, s_devices_t *d) {
    if (m->type != TA_MSG_CONFIG || d->n) return;
    d->strict = m->as.config.strict == 1;
    ta_u64s_it_t it;
    uint64_t port;
    ta_u64s_begin(&it, &m->as.config.executors);
    ta_recs_it_t rit;
    ta_device_rec_t rec;
    ta_recs_begin(&rit, &m->as.config.devices);
    while (d->n < 64 && ta_u64s_next(&it, &port) && ta_recs_next(&rit, &rec)) {
        char uri[TA_URI_MAX + 1];
        if (ta_device_info_of_rec(&rec, &d->info[d->n], uri, NULL) != TACT_OK) break;
        d->port[d->n++] = (uint32_t)port;
    }
}

/* The notes of FILE.times ("note PORT RECORD TEXT": a kernel's time), in
 * (port, record) order. */
typedef struct {
    uint32_t port;
    uint64_t record;
    size_t order;
    char text[208];
} s_note_t;

static s_note_t *s_notes;
static size_t s_nnotes, s_notes_cap;

static int s_note_cmp(const void *a, const void *b) {
    const s_note_t *x = a, *y = b;
    if (x->port != y->port) return x->port < y->port ? -1 : 1;
    if (x->record != y->record) return x->record < y->record ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* A canonical log's times, from its sidecar FILE.times ("port record
 * wall_ns" a line, docs/log-format.md), into the records, and its notes:
 * for display only, so a line that does not parse or names no record is
 * skipped. */
static void s_read_times(const char *file, ta_log_t *log) {
    char path[4200];
    snprintf(path, sizeof path, "%s.times", file);
    ta_error_t err;
    FILE *f = ta_file_fopen(path, 0, 0, "log times", &err);
    if (!f) return;
    char line[320];
    while (fgets(line, sizeof line, f)) {
        unsigned long port;
        unsigned long long k, ns;
        int at = 0;
        if (sscanf(line, "note %lu %llu %n", &port, &k, &at) == 2 && at > 0 && port <= UINT32_MAX) {
            if (ta_grow((void **)&s_notes, &s_notes_cap, s_nnotes + 1, sizeof *s_notes) != TACT_OK) continue;
            s_note_t *n = &s_notes[s_nnotes];
            n->port = (uint32_t)port, n->record = k, n->order = s_nnotes++;
            snprintf(n->text, sizeof n->text, "%s", line + at);
            n->text[strcspn(n->text, "\n")] = '\0';
            continue;
        }
        if (line[0] == '#' || sscanf(line, "%lu %llu %llu", &port, &k, &ns) != 3 || port > UINT32_MAX) continue;
        const ta_log_stream_info_t *st = ta_log_find(log, (uint32_t)port);
        if (st && k < st->nrecords) ((ta_log_record_t *)&st->records[k])->wall_ns = ns;
    }
    fclose(f);
    if (s_nnotes) qsort(s_notes, s_nnotes, sizeof *s_notes, s_note_cmp);
}

/* The devices of a log's first CONFIG. */
static void s_learn_log_devices(const ta_log_t *log, s_devices_t *d) {
    for (size_t i = 0; i < log->nstreams && !d->n; i++)
        for (size_t k = 0; k < log->streams[i].nrecords && !d->n; k++) {
            ta_msg_t m;
            if (ta_log_record_msg(&log->streams[i].records[k], &m, NULL) == TACT_OK) s_learn_devices(&m, d);
        }
}

/* A kernel's code for a device, from its opening comment (the vector
 * helpers before it are the same for every kernel of a width), or NULL
 * with why in err.  *name gets the kernel's name; ta_free the result. */
static char *s_source(const ta_ast_t *a, const ta_device_info_t *dev, int strict, char *name, size_t name_len, ta_error_t *err) {
    ta_target_t t = ta_target_of(dev->language, dev->vector_bytes, dev->fma, dev->max_group, (int64_t)dev->local_memory, dev->flags);
    t.exact_math = strict;
    if (!t.printer) {
        ta_error_set(err, TACT_EINVAL, "no printer for %s's language '%s'", dev->name, dev->language);
        return NULL;
    }
    char *src;
    int64_t align;
    if (ta_render_c_for(a, &t, &src, name, name_len, &align, NULL, err) != TACT_OK) return NULL;
    char open[80];
    snprintf(open, sizeof open, "/* %s:", name);
    char *at = strstr(src, open);
    if (at && at != src) memmove(src, at, strlen(at) + 1);
    return src;
}

/* A kernel AST (an MP field) decoded: its nodes a line each, and with
 * source its code for the device whose executor asked for it. */
static void s_print_ast(ta_bytes_t bytes, const ta_device_info_t *dev, int strict, int source, const char *indent) {
    static ta_ast_t a;
    ta_mpr_t r;
    ta_mpr_init(&r, bytes.ptr, bytes.len);
    ta_error_t err = {0, ""};
    if (ta_ast_unpack(&a, &r, &err) != TACT_OK) {
        printf("%s(the AST does not decode: %s)\n", indent, err.text);
        return;
    }
    char name[64];
    ta_ast_name(&a, name, sizeof name);
    printf("%skernel %s: %d nodes, %d buffers, reduce mask %#x", indent, name, a.nnodes, a.nbufs, a.reduce_mask);
    for (int i = 0; i < a.nfused; i++) printf("%s %" PRIu64, i ? "" : ", fuses graph nodes", a.fused[i]);
    printf("\n");
    for (int i = 0; i < a.nnodes; i++) {
        const ta_ast_node_t *n = &a.nodes[i];
        printf("%s  %3d %-8s %-8s src", indent, i, ta_op_name(n->op), ta_dtype_name(n->dtype));
        for (int s = 0; s < n->nsrc; s++) printf(" %d", n->src[s]);
        if (n->op == TA_OP_LOAD || n->op == TA_OP_STORE) printf(" buf %d view %d", n->buf, n->view);
        printf("%s\n", n->arg ? " (argument)" : "");
    }
    if (!source) return;
    if (!dev) {
        printf("%s(no device known for this kernel: the log has no CONFIG naming its executor)\n", indent);
        return;
    }
    char *src = s_source(&a, dev, strict, name, sizeof name, &err);
    if (!src) {
        printf("%s(no source: %s)\n", indent, err.text);
        return;
    }
    printf("%s--- source for %s (%s):\n%s", indent, dev->name, dev->language, src);
    ta_free(src);
}

/* The MP fields of m's records (a COMPILE's jobs, a PLAN's steps, a
 * KERNELS's kernels), each decoded. */
static void s_print_asts(const ta_msg_t *m, const s_devices_t *d, int source) {
    const ta_device_info_t *dev = NULL;
    uint64_t asker = m->type == TA_MSG_COMPILE ? m->as.compile.reply_to : m->type == TA_MSG_PLAN ? m->dest : 0;
    for (int i = 0; i < d->n; i++)
        if (d->port[i] == asker) dev = &d->info[i];
    ta_recs_it_t it;
    if (m->type == TA_MSG_COMPILE) {
        ta_job_rec_t rec;
        ta_recs_begin(&it, &m->as.compile.jobs);
        while (ta_recs_next(&it, &rec)) s_print_ast(rec.ast, dev, d->strict, source, "           ");
    } else if (m->type == TA_MSG_KERNELS) {
        ta_kernel_rec_t rec;
        ta_recs_begin(&it, &m->as.kernels.kernels);
        while (ta_recs_next(&it, &rec)) s_print_ast(rec.ast, NULL, 0, 0, "           ");
    }
}

/* ------------------------------------------------------------------ diff */

/* The kernels a log's compilers were asked for: name and AST digest. */
typedef struct {
    char name[64];
    char digest[33];
} s_kernel_t;

typedef struct {
    s_kernel_t *k;
    size_t n, cap;
} s_kernels_t;

static void s_collect_kernels(const ta_log_t *log, s_kernels_t *out) {
    for (size_t i = 0; i < log->nstreams; i++)
        for (size_t k = 0; k < log->streams[i].nrecords; k++) {
            const ta_log_record_t *r = &log->streams[i].records[k];
            ta_msg_t m;
            if (r->dir != TA_LOG_IN || ta_log_record_msg(r, &m, NULL) != TACT_OK || m.type != TA_MSG_COMPILE) continue;
            ta_recs_it_t it;
            ta_job_rec_t job;
            ta_recs_begin(&it, &m.as.compile.jobs);
            while (ta_recs_next(&it, &job)) {
                s_kernel_t kern;
                ta_cc_digest(job.ast.ptr, job.ast.len, kern.digest);
                static ta_ast_t a;
                ta_mpr_t mr;
                ta_mpr_init(&mr, job.ast.ptr, job.ast.len);
                if (ta_ast_unpack(&a, &mr, NULL) == TACT_OK) ta_ast_name(&a, kern.name, sizeof kern.name);
                else snprintf(kern.name, sizeof kern.name, "(undecodable)");
                int seen = 0;
                for (size_t j = 0; j < out->n && !seen; j++) seen = strcmp(out->k[j].digest, kern.digest) == 0;
                if (seen) continue;
                if (ta_grow((void **)&out->k, &out->cap, out->n + 1, sizeof *out->k) != TACT_OK) return;
                out->k[out->n++] = kern;
            }
        }
}

static int s_has_kernel(const s_kernels_t *ks, const char *digest) {
    for (size_t j = 0; j < ks->n; j++)
        if (strcmp(ks->k[j].digest, digest) == 0) return 1;
    return 0;
}

/* The first record where two streams of one port part: a line beginning
 * "first difference:", then both messages, and the differing record of a
 * list when the field is inside one. */
/* Job idx of two COMPILEs: the kernels' names and, for the devices that
 * asked, their sources' difference (diff -u). */
static void s_diff_kernel(const ta_msg_t *a, const ta_msg_t *b, unsigned idx, const s_devices_t *da, const s_devices_t *db) {
    const ta_msg_t *m[2] = {a, b};
    const s_devices_t *d[2] = {da, db};
    char path[2][64] = {"", ""};
    for (int side = 0; side < 2; side++) {
        ta_recs_it_t it;
        ta_job_rec_t job;
        ta_recs_begin(&it, &m[side]->as.compile.jobs);
        unsigned j = 0;
        int found = 0;
        while (!found && ta_recs_next(&it, &job)) found = j++ == idx;
        const ta_device_info_t *dev = NULL;
        for (int i = 0; i < d[side]->n; i++)
            if (d[side]->port[i] == m[side]->as.compile.reply_to) dev = &d[side]->info[i];
        static ta_ast_t ast;
        ta_mpr_t r;
        ta_error_t err = {0, ""};
        char name[64] = "?";
        if (found) ta_mpr_init(&r, job.ast.ptr, job.ast.len);
        char *src = found && dev && ta_ast_unpack(&ast, &r, &err) == TACT_OK ? s_source(&ast, dev, d[side]->strict, name, sizeof name, &err) : NULL;
        printf("  kernel %c: %s\n", "AB"[side], found ? name : "(none)");
        snprintf(path[side], sizeof path[side], "/tmp/tact-diff-%c-XXXXXX", "AB"[side]);
        int fd = src ? mkstemp(path[side]) : -1;
        if (fd >= 0) {
            FILE *f = fdopen(fd, "w");
            if (f) fputs(src, f), fclose(f);
            else close(fd);
        } else {
            path[side][0] = '\0';
        }
        ta_free(src);
    }
    if (path[0][0] && path[1][0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "diff -u --label A --label B '%s' '%s' | sed 's/^/    /'", path[0], path[1]);
        fflush(stdout);
        if (system(cmd) == -1) printf("    (diff did not run)\n");
    }
    for (int side = 0; side < 2; side++)
        if (path[side][0]) unlink(path[side]);
}

/* Returns 1 when the two records are CONFIGs (settings, which differ
 * between two runs on purpose: the comparison goes on past them). */
static int s_diff_stream(const ta_log_stream_info_t *sa, const ta_log_stream_info_t *sb, size_t k, const s_devices_t *da, const s_devices_t *db,
                         const char *what) {
    const ta_log_record_t *x = k < sa->nrecords ? &sa->records[k] : NULL, *y = k < sb->nrecords ? &sb->records[k] : NULL;
    ta_msg_t a, b;
    char la[512], lb[512], field[128] = "envelope";
    ta_msg_init(&a, TA_MSG_EOS);
    ta_msg_init(&b, TA_MSG_EOS);
    int ok_a = x && ta_log_record_msg(x, &a, NULL) == TACT_OK, ok_b = y && ta_log_record_msg(y, &b, NULL) == TACT_OK;
    if (!x || !y) snprintf(field, sizeof field, "%s", x ? "record (missing in B)" : "record (missing in A)");
    else if (x->dir != y->dir) snprintf(field, sizeof field, "direction");
    else if (ok_a && ok_b && ta_msg_equal(&a, &b, field, sizeof field)) snprintf(field, sizeof field, "bulk");
    const ta_log_record_t *r = x ? x : y;
    printf("%s: %s (port %" PRIu32 "), record %zu (%s %s, seq %" PRIu64 "): %s\n", what, sa->name, sa->id, k, r->dir == TA_LOG_IN ? "in" : "out",
           ta_msg_type_name(ok_a ? a.type : b.type), ok_a ? a.seq : b.seq, field);
    printf("  A: %s\n  B: %s\n", ok_a ? ta_msg_format(&a, la, sizeof la) : "(none)", ok_b ? ta_msg_format(&b, lb, sizeof lb) : "(none)");
    /* "payload.ops[3].op": record 3 of ops, both sides. */
    char list[64];
    unsigned idx;
    if (ok_a && ok_b && sscanf(field, "payload.%63[a-z_][%u]", list, &idx) == 2) {
        static char ra[8192], rb[8192];
        const char *fa = ta_msg_format_record(&a, list, idx, ra, sizeof ra, s_namer), *fb = ta_msg_format_record(&b, list, idx, rb, sizeof rb, s_namer);
        printf("  A %s[%u]: %s\n  B %s[%u]: %s\n", list, idx, fa ? fa : "(none)", list, idx, fb ? fb : "(none)");
        if (a.type == TA_MSG_COMPILE && b.type == TA_MSG_COMPILE && strcmp(list, "jobs") == 0) s_diff_kernel(&a, &b, idx, da, db);
    }
    int settings = ok_a && ok_b && a.type == TA_MSG_CONFIG && b.type == TA_MSG_CONFIG && x->dir == y->dir;
    if (settings) printf("  (settings: the comparison goes on past them)\n");
    return settings;
}

/* `tact log diff A B`: exit 0 when the runs match port by port (times and
 * the interleaving of ports aside), else 1 with the first difference of
 * each port that differs and the kernels only one run built. */
static int s_diff(const char *fa, const char *fb) {
    ta_log_t *a = NULL, *b = NULL;
    ta_error_t err;
    if (ta_log_load(fa, &a, &err) != TACT_OK || ta_log_load(fb, &b, &err) != TACT_OK) {
        fprintf(stderr, "tact log: %s: %s\n", a ? fb : fa, err.text);
        ta_log_free(&a);
        return 2;
    }
    printf("A: %s\nB: %s\n", fa, fb);
    s_devices_t *da = ta_calloc(1, sizeof *da), *db = ta_calloc(1, sizeof *db);
    if (!da || !db) {
        ta_free(da), ta_free(db);
        ta_log_free(&a), ta_log_free(&b);
        fprintf(stderr, "tact log: out of memory\n");
        return 2;
    }
    s_learn_log_devices(a, da);
    s_learn_log_devices(b, db);
    int differ = 0;
    size_t i = 0, j = 0;
    while (i < a->nstreams || j < b->nstreams) { /* streams in port id order */
        const ta_log_stream_info_t *sa = i < a->nstreams ? &a->streams[i] : NULL, *sb = j < b->nstreams ? &b->streams[j] : NULL;
        if (!sb || (sa && sa->id < sb->id)) {
            printf("first difference: %s (port %" PRIu32 "): only in A\n", sa->name, sa->id);
            differ = 1, i++;
            continue;
        }
        if (!sa || sb->id < sa->id) {
            printf("first difference: %s (port %" PRIu32 "): only in B\n", sb->name, sb->id);
            differ = 1, j++;
            continue;
        }
        i++, j++;
        if (strcmp(sa->name, sb->name) != 0) {
            printf("first difference: port %" PRIu32 " is %s in A and %s in B\n", sa->id, sa->name, sb->name);
            differ = 1;
            continue;
        }
        size_t n = sa->nrecords > sb->nrecords ? sa->nrecords : sb->nrecords;
        int past_settings = 0;
        for (size_t k = 0; k < n; k++) {
            const ta_log_record_t *x = k < sa->nrecords ? &sa->records[k] : NULL, *y = k < sb->nrecords ? &sb->records[k] : NULL;
            if (x && y && x->dir == y->dir && x->env_len == y->env_len && x->bulk_len == y->bulk_len && memcmp(x->env, y->env, x->env_len) == 0 &&
                (!x->bulk_len || memcmp(x->bulk, y->bulk, x->bulk_len) == 0))
                continue;
            differ = 1;
            /* A setting (CONFIG) differs on purpose: say so, and find what
             * differs after it. */
            if (s_diff_stream(sa, sb, k, da, db, past_settings ? "first difference after the settings" : "first difference")) {
                past_settings = 1;
                continue;
            }
            break;
        }
    }
    s_kernels_t ka = {0}, kb = {0};
    s_collect_kernels(a, &ka);
    s_collect_kernels(b, &kb);
    size_t only_a = 0, only_b = 0;
    for (size_t k = 0; k < ka.n; k++) only_a += !s_has_kernel(&kb, ka.k[k].digest);
    for (size_t k = 0; k < kb.n; k++) only_b += !s_has_kernel(&ka, kb.k[k].digest);
    printf("kernels: %zu in A, %zu in B, %zu only in A, %zu only in B\n", ka.n, kb.n, only_a, only_b);
    for (size_t k = 0; k < ka.n; k++)
        if (!s_has_kernel(&kb, ka.k[k].digest)) printf("  only in A: %s (AST %s)\n", ka.k[k].name, ka.k[k].digest);
    for (size_t k = 0; k < kb.n; k++)
        if (!s_has_kernel(&ka, kb.k[k].digest)) printf("  only in B: %s (AST %s)\n", kb.k[k].name, kb.k[k].digest);
    differ |= only_a || only_b;
    printf("%s\n", differ ? "the runs differ" : "the runs match");
    ta_free(ka.k);
    ta_free(kb.k);
    ta_free(da);
    ta_free(db);
    ta_log_free(&a);
    ta_log_free(&b);
    return differ;
}

static int s_usage(void) {
    fprintf(stderr, "usage: tact log check [--deep] FILE | tact log dump [-v] [--source] [--json] FILE | tact log diff A B\n"
                    "  --deep    follow each executor's buffers: a read before a write, a reuse of a live buffer,\n"
                    "            a copy read before it arrives (exit 1 with a line per problem)\n"
                    "  -v        every record of every payload, ops and dtypes by name, kernels' nodes\n"
                    "  --source  with -v: each kernel's generated source, for the device that asked for it\n"
                    "  --json    one JSON object a line: {\"port\",\"stream\",\"k\",\"ms\",\"dir\",\"msg\":{...}}\n"
                    "  diff      exit 0 when two runs match port by port, else 1 with each port's first difference\n"
                    "            (and, past a difference of settings, the first difference after them)\n");
    return 2;
}

int h_log(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[0], "diff") == 0 && argv[1][0] != '-' && argv[2][0] != '-') return s_diff(argv[1], argv[2]);
    if (argc < 2 || (strcmp(argv[0], "check") != 0 && strcmp(argv[0], "dump") != 0)) return s_usage();
    int dump = strcmp(argv[0], "dump") == 0, verbose = 0, source = 0, json = 0, deep = 0;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (dump && strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (dump && strcmp(argv[i], "--source") == 0) source = verbose = 1;
        else if (dump && strcmp(argv[i], "--json") == 0) json = 1;
        else if (!dump && strcmp(argv[i], "--deep") == 0) deep = 1;
        else if (!file && argv[i][0] != '-') file = argv[i];
        else return s_usage();
    }
    if (!file) return s_usage();
    ta_log_t *log;
    ta_error_t err;
    if (ta_log_load(file, &log, &err) != TACT_OK) {
        fprintf(stderr, "tact log: %s: %s\n", file, err.text);
        return 1;
    }
    size_t total = 0;
    for (size_t i = 0; i < log->nstreams; i++) total += log->streams[i].nrecords;
    if (!dump) {
        printf("%s: valid tact log v%d, %zu streams, %zu records", file, TA_LOG_VERSION, log->nstreams, total);
        if (log->truncated_at) printf(", cut at byte %zu without its end marker (a crashed run?)", log->truncated_at);
        printf("\n");
        int problems = deep ? h_log_verify(log, stdout) : 0;
        ta_log_free(&log);
        return problems ? 1 : 0;
    }
    s_devices_t *devices = ta_calloc(1, sizeof *devices);
    if (!devices) {
        ta_log_free(&log);
        fprintf(stderr, "tact log: out of memory\n");
        return 1;
    }
    s_learn_log_devices(log, devices);
    s_read_times(file, log);
    char header[2048];
    ta_log_header_format(&log->run, header, sizeof header);
    if (!json) printf("run header: %s\n", header[0] ? header : "(empty)");
    size_t note = 0;
    for (size_t i = 0; i < log->nstreams; i++) {
        const ta_log_stream_info_t *st = &log->streams[i];
        if (!json) printf("port %" PRIu32 " (%s): %zu records\n", st->id, st->name, st->nrecords);
        for (size_t k = 0; k < st->nrecords; k++) {
            const ta_log_record_t *rec = &st->records[k];
            ta_msg_t m;
            ta_log_record_msg(rec, &m, NULL);
            if (json) { /* the stream's name is printable ASCII without quotes (the log's check) */
                printf("{\"port\":%" PRIu32 ",\"stream\":\"%s\",\"k\":%zu,\"ms\":%.3f,\"dir\":\"%s\",\"msg\":", st->id, st->name, k, (double)rec->wall_ns * 1e-6,
                       rec->dir == TA_LOG_IN ? "in" : "out");
                ta_msg_json(&m, stdout, s_namer);
                printf("}\n");
                continue;
            }
            char line[512];
            printf("  %6zu %12.3f ms %s %s\n", k, (double)rec->wall_ns * 1e-6, rec->dir == TA_LOG_IN ? "in " : "out", ta_msg_format(&m, line, sizeof line));
            /* The notes on this record (kernels' times), from FILE.times. */
            while (note < s_nnotes && (s_notes[note].port < st->id || (s_notes[note].port == st->id && s_notes[note].record < k))) note++;
            for (; note < s_nnotes && s_notes[note].port == st->id && s_notes[note].record == k; note++) printf("           %s\n", s_notes[note].text);
            if (verbose) {
                ta_msg_dump_records(&m, stdout, "           ", s_namer);
                /* Kernels once, where their builder received them. */
                if (rec->dir == TA_LOG_IN && (m.type == TA_MSG_COMPILE || m.type == TA_MSG_KERNELS)) s_print_asts(&m, devices, source);
            }
        }
    }
    ta_free(devices);
    ta_free(s_notes);
    s_notes = NULL, s_nnotes = s_notes_cap = 0;
    ta_log_free(&log);
    return 0;
}
