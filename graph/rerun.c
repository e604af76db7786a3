/* rerun.c - whole-run replay: the recorded client stream through a fresh pipeline, compared stage by stage. */
#include "rerun.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc.h"
#include "device.h"
#include "mem.h"
#include "pipeline.h"

/* The replay's device list as a context would list it ("CPU,CL:0"). */
static int s_devices(const char *list, char *out, size_t size, ta_error_t *err) {
    char **names;
    ta_error_t e = {TACT_EINVAL, "bad device list"};
    int n = ta_device_list_parse(list, &names, &e);
    if (n < 0) return ta_error_set(err, n, "replay: devices '%s': %s", list, e.text);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s", i ? "," : "", names[i]);
    }
    ta_free(names);
    return TACT_OK;
}

/* The kind of each device of two lists ("CPU" of tcp://h:1/CPU:1 and of
 * CPU:2) is the same, as many devices in each. */
static int s_same_kinds(const char *a, const char *b) {
    char **x = NULL, **y = NULL;
    ta_error_t e;
    int n = ta_device_split(a, strlen(a), &x, &e), m = ta_device_split(b, strlen(b), &y, &e), same = n > 0 && n == m;
    for (int i = 0; same && i < n; i++) {
        const char *p = strrchr(x[i], '/') ? strrchr(x[i], '/') + 1 : x[i], *q = strrchr(y[i], '/') ? strrchr(y[i], '/') + 1 : y[i];
        same = strcspn(p, ":") == strcspn(q, ":") && strncmp(p, q, strcspn(p, ":")) == 0;
    }
    ta_free(x);
    ta_free(y);
    return same;
}

/* Does what the recorded client did, record by record: each message it
 * sent is sent again (requests with a fresh correlation id, which comes out
 * as recorded), and where it received a message the driver waits for the
 * one with the same correlation id.  An ERROR answer is part of the run. */
static int s_drive(tact_ctx *ctx, const ta_log_stream_info_t *client, ta_error_t *err) {
    ta_port_t *port = ta_ctx_port(ctx);
    uint64_t configs = 0; /* CONFIGs the new context sent when it opened, and their answers */
    for (size_t k = 0; k < client->nrecords; k++) {
        const ta_log_record_t *rec = &client->records[k];
        ta_msg_t m, reply;
        ta_error_t e = {0, ""};
        if (ta_log_record_msg(rec, &m, &e) != TACT_OK) return ta_error_set(err, TACT_ECORRUPT, "replay: client record %zu: %s", k, e.text);
        /* Opening the context sent the recorded CONFIGs again (from the run
         * header) and took their answers: the compare checks them. */
        if (rec->dir == TA_LOG_OUT && m.type == TA_MSG_CONFIG) {
            configs++;
            continue;
        }
        if (rec->dir == TA_LOG_IN && configs && m.type == TA_MSG_DONE && (m.corr & ((1ull << 40) - 1)) <= configs) continue;
        int rc;
        if (rec->dir == TA_LOG_IN) {
            ta_msg_init(&reply, TA_MSG_EOS);
            rc = m.corr ? ta_port_wait_from(port, m.corr, m.sender, &reply, ta_ctx_timeout_ms(ctx), 1, &e) : ta_port_recv(port, &reply, ta_ctx_timeout_ms(ctx), &e);
            if (rc != TACT_OK && reply.type == TA_MSG_ERROR) rc = TACT_OK; /* a recorded failure, replayed */
            ta_msg_release(&reply);
            if (rc != TACT_OK) return ta_error_set(err, rc, "replay: client record %zu (%s): %s", k, ta_msg_type_name(m.type), e.text);
        } else {
            rc = m.corr ? ta_port_send_request(port, m.dest, &m, &e) : ta_port_send(port, m.dest, &m, &e);
            if (rc != TACT_OK) return ta_error_set(err, rc, "replay: client record %zu: %s", k, e.text);
        }
    }
    return TACT_OK;
}

int ta_rerun(const char *log_path, const ta_rerun_options_t *user, FILE *notes, char *verdict, size_t len) {
    ta_error_t err = {0, ""};
    ta_log_t *want = NULL, *got = NULL;
    ta_rerun_options_t none = {NULL, 0, 0, NULL};
    if (!user) user = &none;
    int rc = ta_log_load(log_path, &want, &err);
    /* Nothing in the log is obeyed that acts on this machine: the
     * compiler, threads, timeout and devices are the replaying user's.
     * Only the pipeline's shape (compile workers, at most TA_MAX_COMPILERS,
     * and the schedule cache) follows the recording, checked in range. */
    const ta_run_header_t *rec = want ? &want->run : NULL;
    tact_options o;
    tact_options_default(&o);
    o.cpu_threads = user->cpu_threads;
    o.timeout_ms = user->timeout_ms;
    o.devices = user->devices && *user->devices ? user->devices : getenv("TACT_DEVICE");
    if (!o.devices || !*o.devices) o.devices = "CPU";
    const char *cc = ta_cc_compiler();
    char mine[300] = "", shown[2048];
    if (rc == TACT_OK) {
        o.compile_workers = rec->compile_workers;
        ta_log_header_format(rec, shown, sizeof shown);
        if (notes) fprintf(notes, "recorded: %s\n", shown[0] ? shown : "(no run header)");
        rc = s_devices(o.devices, mine, sizeof mine, &err);
    }
    if (rc == TACT_OK && notes) {
        fprintf(notes, "replaying: devices '%s', cpu_threads %d, timeout_ms %d, cc '%s' (TACT_CC)\n", mine, o.cpu_threads, o.timeout_ms, cc);
        /* Differences that change nothing a replay compares (DESIGN.md §2),
         * said all the same. */
        if (rec->cpu_threads != o.cpu_threads || rec->timeout_ms != o.timeout_ms)
            fprintf(notes, "note: the recording ran with cpu_threads %d and timeout_ms %d; results and logs do not depend on either\n",
                    rec->cpu_threads, rec->timeout_ms);
    }
    /* The same devices, or the same kinds in other places (a worker's
     * devices for this process's, or the reverse): then the stages that
     * run with the client are compared (docs/workers.md). */
    int places = 0;
    if (rc == TACT_OK && rec->devices[0] && strcmp(rec->devices, mine) != 0) {
        places = s_same_kinds(rec->devices, mine);
        if (!places)
            rc = ta_error_set(&err, TACT_EINVAL,
                              "replay: recorded on devices '%s'; it would run on '%s' (--devices, else TACT_DEVICE, else CPU): use --devices %s, or "
                              "as many devices of the same kinds elsewhere",
                              rec->devices, mine, rec->devices);
        else if (notes)
            fprintf(notes, "note: the devices are the recording's in other places: the stages that run with the client are compared, "
                           "executors and compilers are not\n");
    }
    char cc_note[700] = "";
    if (rc == TACT_OK && rec->cc[0] && strcmp(rec->cc, cc) != 0)
        snprintf(cc_note, sizeof cc_note, " (recorded with the kernel compiler '%s', replayed with '%s' from TACT_CC)", rec->cc, cc);
    if (notes && cc_note[0]) fprintf(notes, "note:%s\n", cc_note);
    const ta_log_stream_info_t *client = NULL;
    for (size_t i = 0; rc == TACT_OK && i < want->nstreams; i++)
        if (strcmp(want->streams[i].name, "client") == 0) client = &want->streams[i];
    if (rc == TACT_OK && !client) rc = ta_error_set(&err, TACT_ENOTFOUND, "replay: %s has no client stream", log_path);
    char tmp[] = "/tmp/tact-replay-XXXXXX";
    const char *keep = user->keep_log && *user->keep_log ? user->keep_log : NULL;
    int fd = rc == TACT_OK && !keep ? mkstemp(tmp) : -1;
    if (rc == TACT_OK && !keep && fd < 0) rc = ta_error_set(&err, TACT_EIO, "replay: no temporary file for the new log");
    if (fd >= 0) close(fd);
    if (rc == TACT_OK) {
        o.transport = "inproc";
        o.log_path = keep ? keep : tmp;
        o.strict = rec->strict ? 1 : -1; /* the recording's: it changes the kernels */
        tact_ctx *ctx = NULL;
        rc = ta_ctx_open_as(&ctx, &o, cc, rec->schedule_cache);
        if (rc != TACT_OK) {
            ta_error_set(&err, rc, "replay: cannot open a context: %s", tact_last_open_error());
        } else {
            rc = s_drive(ctx, client, &err);
            int crc = tact_ctx_close(&ctx);
            if (rc == TACT_OK && crc != TACT_OK) rc = ta_error_set(&err, crc, "replay: closing the context: %s", tact_strerror(crc));
        }
        if (rc == TACT_OK) rc = ta_log_load(o.log_path, &got, &err);
        if (!keep) unlink(tmp);
    }
    if (rc == TACT_OK) {
        char where[512];
        size_t records = 0;
        for (size_t i = 0; i < want->nstreams; i++) records += want->streams[i].nrecords;
        if (places ? ta_log_compare_stages(want, got, where, sizeof where) : ta_log_compare(want, got, where, sizeof where)) {
            snprintf(verdict, len, "replay matches the recording: %zu ports, %zu records%s", want->nstreams, records, cc_note);
        } else {
            rc = TACT_EMISMATCH;
            snprintf(verdict, len, "replay diverged: %s%s", where, cc_note);
        }
    } else {
        snprintf(verdict, len, "%s", err.text);
    }
    ta_log_free(&want);
    ta_log_free(&got);
    return rc;
}
