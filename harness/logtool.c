/* logtool.c - `tact log check|dump`: validate a message log, or print it for a person (ops and dtypes by name, kernels' nodes and sources) or for tools (JSON lines). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "device.h"
#include "dtype.h"
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
} s_devices_t;

static void s_learn_devices(const ta_msg_t *m, s_devices_t *d) {
    if (m->type != TA_MSG_CONFIG || d->n) return;
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

/* A kernel AST (an MP field) decoded: its nodes a line each, and with
 * source its code for the device whose executor asked for it. */
static void s_print_ast(ta_bytes_t bytes, const ta_device_info_t *dev, int source, const char *indent) {
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
    ta_target_t t = ta_target_of(dev->language, dev->vector_bytes, dev->fma, dev->max_group, (int64_t)dev->local_memory, dev->flags);
    if (!t.printer) {
        printf("%s(no printer for %s's language '%s')\n", indent, dev->name, dev->language);
        return;
    }
    char *src;
    int64_t align;
    if (ta_render_c_for(&a, &t, &src, name, sizeof name, &align, NULL, &err) != TACT_OK) {
        printf("%s(does not render: %s)\n", indent, err.text);
        return;
    }
    /* The kernel from its opening comment (the vector helpers before it
     * are the same for every kernel of a width). */
    char open[80];
    snprintf(open, sizeof open, "/* %s:", name);
    const char *at = strstr(src, open);
    printf("%s--- source for %s (%s):\n%s", indent, dev->name, dev->language, at ? at : src);
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
        while (ta_recs_next(&it, &rec)) s_print_ast(rec.ast, dev, source, "           ");
    } else if (m->type == TA_MSG_KERNELS) {
        ta_kernel_rec_t rec;
        ta_recs_begin(&it, &m->as.kernels.kernels);
        while (ta_recs_next(&it, &rec)) s_print_ast(rec.ast, NULL, 0, "           ");
    }
}

static int s_usage(void) {
    fprintf(stderr, "usage: tact log check FILE | tact log dump [-v] [--source] [--json] FILE\n"
                    "  -v        every record of every payload, ops and dtypes by name, kernels' nodes\n"
                    "  --source  with -v: each kernel's generated source, for the device that asked for it\n"
                    "  --json    one JSON object a line: {\"port\",\"stream\",\"k\",\"ms\",\"dir\",\"msg\":{...}}\n");
    return 2;
}

int h_log(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[0], "check") != 0 && strcmp(argv[0], "dump") != 0)) return s_usage();
    int dump = strcmp(argv[0], "dump") == 0, verbose = 0, source = 0, json = 0;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (dump && strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (dump && strcmp(argv[i], "--source") == 0) source = verbose = 1;
        else if (dump && strcmp(argv[i], "--json") == 0) json = 1;
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
        ta_log_free(&log);
        return 0;
    }
    s_devices_t *devices = ta_calloc(1, sizeof *devices);
    if (!devices) {
        ta_log_free(&log);
        fprintf(stderr, "tact log: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < log->nstreams && !devices->n; i++)
        for (size_t k = 0; k < log->streams[i].nrecords && !devices->n; k++) {
            ta_msg_t m;
            ta_log_record_msg(&log->streams[i].records[k], &m, NULL);
            s_learn_devices(&m, devices);
        }
    char header[2048];
    ta_log_header_format(&log->run, header, sizeof header);
    if (!json) printf("run header: %s\n", header[0] ? header : "(empty)");
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
            if (verbose) {
                ta_msg_dump_records(&m, stdout, "           ", s_namer);
                /* Kernels once, where their builder received them. */
                if (rec->dir == TA_LOG_IN && (m.type == TA_MSG_COMPILE || m.type == TA_MSG_KERNELS)) s_print_asts(&m, devices, source);
            }
        }
    }
    ta_free(devices);
    ta_log_free(&log);
    return 0;
}
