/* logtool.c - `tact log check|dump [-v] FILE`: validate a message log or print it (-v: every record of every payload). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "log.h"

int h_log(int argc, char **argv) {
    int verbose = argc == 3 && strcmp(argv[0], "dump") == 0 && strcmp(argv[1], "-v") == 0;
    if (verbose) argv[1] = argv[2], argc = 2;
    if (argc != 2 || (strcmp(argv[0], "check") != 0 && strcmp(argv[0], "dump") != 0)) {
        fprintf(stderr, "usage: tact log check FILE | tact log dump [-v] FILE\n");
        return 2;
    }
    ta_log_t *log;
    ta_error_t err;
    if (ta_log_load(argv[1], &log, &err) != TACT_OK) {
        fprintf(stderr, "tact log: %s: %s\n", argv[1], err.text);
        return 1;
    }
    size_t total = 0;
    for (size_t i = 0; i < log->nstreams; i++) total += log->streams[i].nrecords;
    if (strcmp(argv[0], "check") == 0) {
        printf("%s: valid tact log v%d, %zu streams, %zu records", argv[1], TA_LOG_VERSION, log->nstreams, total);
        if (log->truncated_at) printf(", cut at byte %zu without its end marker (a crashed run?)", log->truncated_at);
        printf("\n");
    } else {
        char header[2048];
        ta_log_header_format(&log->run, header, sizeof header);
        printf("run header: %s\n", header[0] ? header : "(empty)");
        for (size_t i = 0; i < log->nstreams; i++) {
            const ta_log_stream_info_t *st = &log->streams[i];
            printf("port %" PRIu32 " (%s): %zu records\n", st->id, st->name, st->nrecords);
            for (size_t k = 0; k < st->nrecords; k++) {
                const ta_log_record_t *rec = &st->records[k];
                ta_msg_t m;
                char line[512];
                ta_log_record_msg(rec, &m, NULL);
                printf("  %6zu %12.3f ms %s %s\n", k, (double)rec->wall_ns * 1e-6, rec->dir == TA_LOG_IN ? "in " : "out",
                       ta_msg_format(&m, line, sizeof line));
                if (verbose) ta_msg_dump_records(&m, stdout, "           ");
            }
        }
    }
    ta_log_free(&log);
    return 0;
}
