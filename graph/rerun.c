/* rerun.c - whole-run replay: the recorded client stream through a fresh pipeline, compared stage by stage. */
#include "rerun.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc.h"
#include "mpread.h"

/* Reads the run header into options; strings are copied into strs. */
static int s_options(const ta_log_t *log, tact_options *o, char strs[2][256], int *schedule_cache, ta_error_t *err) {
    tact_options_default(o);
    *schedule_cache = 1;
    strs[0][0] = strs[1][0] = '\0';
    ta_mpr_t r;
    uint32_t pairs;
    ta_mpr_init(&r, log->header, log->header_len);
    if (ta_mpr_map(&r, &pairs)) return ta_error_set(err, TACT_ECORRUPT, "replay: the run header is not a map");
    for (uint32_t i = 0; i < pairs; i++) {
        const uint8_t *k, *v;
        size_t kl, vl;
        int64_t n = 0;
        if (ta_mpr_str(&r, &k, &kl)) return ta_error_set(err, TACT_ECORRUPT, "replay: run header key %u is not a string", i);
        int is_str = ta_mpr_str(&r, &v, &vl) == 0;
        if (!is_str && ta_mpr_i64(&r, &n) && ta_mpr_skip(&r))
            return ta_error_set(err, TACT_ECORRUPT, "replay: run header value %u is malformed", i);
#define S_KEY(name) (kl == strlen(name) && memcmp(k, name, kl) == 0)
        if (S_KEY("cpu_threads") && !is_str) o->cpu_threads = (int)n;
        else if (S_KEY("compile_workers") && !is_str) o->compile_workers = (int)n;
        else if (S_KEY("timeout_ms") && !is_str) o->timeout_ms = (int)n;
        else if (S_KEY("schedule_cache") && !is_str) *schedule_cache = (int)n;
        else if (S_KEY("cc") && is_str && vl < 256) snprintf(strs[0], 256, "%.*s", (int)vl, (const char *)v);
        else if (S_KEY("devices") && is_str && vl < 256) snprintf(strs[1], 256, "%.*s", (int)vl, (const char *)v);
#undef S_KEY
    }
    if (o->cpu_threads < 0 || o->compile_workers < 0 || o->timeout_ms < 0)
        return ta_error_set(err, TACT_ECORRUPT, "replay: run header options out of range");
    if (strs[1][0]) o->devices = strs[1];
    return TACT_OK;
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

int ta_rerun(const char *log_path, char *verdict, size_t len) {
    ta_error_t err = {0, ""};
    ta_log_t *want = NULL, *got = NULL;
    int rc = ta_log_load(log_path, &want, &err);
    tact_options o;
    char strs[2][256];
    int schedule_cache = 1;
    if (rc == TACT_OK) rc = s_options(want, &o, strs, &schedule_cache, &err);
    const ta_log_stream_info_t *client = NULL;
    for (size_t i = 0; rc == TACT_OK && i < want->nstreams; i++)
        if (strcmp(want->streams[i].name, "client") == 0) client = &want->streams[i];
    if (rc == TACT_OK && !client) rc = ta_error_set(&err, TACT_ENOTFOUND, "replay: %s has no client stream", log_path);
    char tmp[] = "/tmp/tact-replay-XXXXXX";
    int fd = rc == TACT_OK ? mkstemp(tmp) : -1;
    if (rc == TACT_OK && fd < 0) rc = ta_error_set(&err, TACT_EIO, "replay: no temporary file for the new log");
    if (fd >= 0) close(fd);
    if (rc == TACT_OK) {
        /* The recording's compiler and schedule cache. */
        o.transport = "inproc";
        o.log_path = tmp;
        tact_ctx *ctx = NULL;
        rc = ta_ctx_open_as(&ctx, &o, strs[0][0] ? strs[0] : ta_cc_compiler(), schedule_cache);
        if (rc != TACT_OK) {
            ta_error_set(&err, rc, "replay: cannot open a context: %s", tact_last_open_error());
        } else {
            rc = s_drive(ctx, client, &err);
            int crc = tact_ctx_close(&ctx);
            if (rc == TACT_OK && crc != TACT_OK) rc = ta_error_set(&err, crc, "replay: closing the context: %s", tact_strerror(crc));
        }
        if (rc == TACT_OK) rc = ta_log_load(tmp, &got, &err);
        unlink(tmp);
    }
    if (rc == TACT_OK) {
        char where[512];
        size_t records = 0;
        for (size_t i = 0; i < want->nstreams; i++) records += want->streams[i].nrecords;
        if (ta_log_compare(want, got, where, sizeof where)) {
            snprintf(verdict, len, "replay matches the recording: %zu ports, %zu records", want->nstreams, records);
        } else {
            rc = TACT_EMISMATCH;
            snprintf(verdict, len, "replay diverged: %s", where);
        }
    } else {
        snprintf(verdict, len, "%s", err.text);
    }
    ta_log_free(&want);
    ta_log_free(&got);
    return rc;
}
