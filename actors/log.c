/* log.c - the message log: per-port record streams written at the end, and a validating reader. */
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crc32c.h"
#include "mem.h"
#include "mpread.h"

/*
 * Each port's records go to their own buffer (spilling to a temporary file
 * when large) while the run goes on, so threads never share a write and the
 * final file does not depend on how their writes interleaved: at the end
 * the streams are copied in port-id order.  Wall-clock times are kept in memory and written after every
 * stream, outside the bytes two runs compare.
 */

/* ----------------------------------------------------------------- writer */

struct ta_log_stream {
    uint32_t id;
    char name[64];
    FILE *tmp;
    uint64_t count;
    uint64_t *times;
    size_t times_cap;
    int failed;
    msgpack_sbuffer env, rec;
};

struct ta_log_writer {
    char path[4096];
    FILE *out;
    pthread_mutex_t lock;
    ta_log_stream_t **streams;
    size_t nstreams, cap;
    uint64_t tick0, ns0; /* the clocks when recording started */
};

/* Record times are taken with the cheapest monotonic tick (the TSC on x86,
 * a third of clock_gettime's cost) and converted to nanoseconds at the end,
 * scaled by how far both clocks moved during the run. */
static uint64_t s_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t s_tick(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return s_ns();
#endif
}

int ta_log_writer_new(ta_log_writer_t **out, const char *path, ta_error_t *err) {
    *out = NULL;
    ta_log_writer_t *w = ta_calloc(1, sizeof *w);
    if (!w) return ta_error_set(err, TACT_ENOMEM, "log: out of memory");
    snprintf(w->path, sizeof w->path, "%s", path);
    w->out = fopen(path, "wb");
    if (!w->out) {
        int e = errno;
        ta_free(w);
        return ta_error_set(err, TACT_EIO, "log: cannot create %s: %s", path, strerror(e));
    }
    pthread_mutex_init(&w->lock, NULL);
    w->ns0 = s_ns();
    w->tick0 = s_tick();
    *out = w;
    return TACT_OK;
}

ta_log_stream_t *ta_log_writer_stream(ta_log_writer_t *w, uint32_t id, const char *name) {
    ta_log_stream_t *s = ta_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->id = id;
    snprintf(s->name, sizeof s->name, "%s", name);
    msgpack_sbuffer_init(&s->env);
    msgpack_sbuffer_init(&s->rec);
    pthread_mutex_lock(&w->lock);
    int rc = ta_grow((void **)&w->streams, &w->cap, w->nstreams + 1, sizeof *w->streams);
    if (rc == TACT_OK) w->streams[w->nstreams++] = s;
    pthread_mutex_unlock(&w->lock);
    if (rc != TACT_OK) {
        ta_free(s);
        return NULL;
    }
    return s;
}

/* Records accumulate in memory (s->rec) and spill to the temporary file in
 * large writes: a write to the page cache per record cost more than the
 * rest of logging together.  The buffer is reserved whole up front, since
 * growing it by doubling copied every byte once more. */
enum { S_SPILL_AT = 8 << 20 };

/* Reserves the record buffer; msgpack-c frees it with free(). */
static int s_reserve(ta_log_stream_t *s) {
    s->rec.data = malloc(S_SPILL_AT + 4096);
    if (!s->rec.data) return TACT_ENOMEM;
    s->rec.alloc = S_SPILL_AT + 4096;
    return TACT_OK;
}

static int s_flush(ta_log_stream_t *s) {
    if (!s->rec.size) return TACT_OK;
    if (!s->tmp && !(s->tmp = tmpfile())) return TACT_EIO;
    if (fwrite(s->rec.data, 1, s->rec.size, s->tmp) != s->rec.size) return TACT_EIO;
    msgpack_sbuffer_clear(&s->rec);
    return TACT_OK;
}

int ta_log_stream_record(ta_log_stream_t *s, ta_log_dir_t dir, const ta_msg_t *m, const ta_bytes_t *env) {
    if (s->failed) return s->failed;
    if (!s->rec.data && s_reserve(s) != TACT_OK) return s->failed = TACT_ENOMEM;
    ta_bytes_t e;
    if (env) {
        e = *env;
    } else {
        if (ta_msg_encode(m, &s->env) != TACT_OK) return s->failed = TACT_ENOMEM;
        e.ptr = (const uint8_t *)s->env.data;
        e.len = s->env.size;
    }
    uint32_t crc = ta_crc32c(ta_crc32c(0, e.ptr, e.len), m->bulk.ptr, m->bulk.len);
    size_t cap = s->times_cap;
    if (ta_grow((void **)&s->times, &cap, s->count + 1, sizeof *s->times) != TACT_OK) return s->failed = TACT_ENOMEM;
    s->times_cap = cap;
    /* [dir, envelope, bulk, crc32] */
    msgpack_packer pk;
    msgpack_packer_init(&pk, &s->rec, msgpack_sbuffer_write);
    if (msgpack_pack_array(&pk, 4) || msgpack_pack_uint8(&pk, (uint8_t)dir) || msgpack_pack_bin(&pk, e.len) ||
        msgpack_pack_bin_body(&pk, e.ptr, e.len) || msgpack_pack_bin(&pk, m->bulk.len) ||
        (m->bulk.len && msgpack_pack_bin_body(&pk, m->bulk.ptr, m->bulk.len)) || msgpack_pack_uint32(&pk, crc))
        return s->failed = TACT_ENOMEM;
    if (s->rec.size >= S_SPILL_AT && s_flush(s) != TACT_OK) return s->failed = TACT_EIO;
    s->times[s->count++] = s_tick();
    return TACT_OK;
}

static int s_by_id(const void *a, const void *b) {
    const ta_log_stream_t *x = *(ta_log_stream_t *const *)a, *y = *(ta_log_stream_t *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int s_file_write(void *data, const char *buf, size_t len) {
    return fwrite(buf, 1, len, data) == len ? 0 : -1;
}

static void s_stream_free(ta_log_stream_t *s) {
    if (s->tmp) fclose(s->tmp);
    msgpack_sbuffer_destroy(&s->env);
    msgpack_sbuffer_destroy(&s->rec);
    ta_free(s->times);
    ta_free(s);
}

int ta_log_writer_finish(ta_log_writer_t **pw, ta_error_t *err) {
    ta_log_writer_t *w = *pw;
    if (!w) return TACT_OK;
    *pw = NULL;
    int rc = TACT_OK;
    uint64_t total = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, w->out, s_file_write);
    if (w->nstreams) qsort(w->streams, w->nstreams, sizeof *w->streams, s_by_id);
    int bad = msgpack_pack_array(&pk, 3) || msgpack_pack_str_with_body(&pk, TA_LOG_MAGIC, strlen(TA_LOG_MAGIC)) ||
              msgpack_pack_uint32(&pk, TA_LOG_VERSION) || msgpack_pack_uint64(&pk, w->nstreams);
    for (size_t i = 0; !bad && i < w->nstreams; i++) {
        ta_log_stream_t *s = w->streams[i];
        if (s->failed) {
            rc = ta_error_set(err, s->failed, "log: stream of port %s could not be recorded: %s", s->name,
                              tact_strerror(s->failed));
            s->count = 0;
        }
        bad = msgpack_pack_array(&pk, 4) || msgpack_pack_str_with_body(&pk, "stream", 6) ||
              msgpack_pack_uint32(&pk, s->id) || msgpack_pack_str_with_body(&pk, s->name, strlen(s->name)) ||
              msgpack_pack_uint64(&pk, s->count);
        if (!bad && s->tmp && s->count) { /* what spilled, then what is still in memory */
            char buf[65536];
            size_t n;
            rewind(s->tmp);
            while (!bad && (n = fread(buf, 1, sizeof buf, s->tmp)) > 0) bad = fwrite(buf, 1, n, w->out) != n;
        }
        if (!bad && s->count && s->rec.size) bad = fwrite(s->rec.data, 1, s->rec.size, w->out) != s->rec.size;
        total += s->count;
    }
    uint64_t dns = s_ns() - w->ns0, dtick = s_tick() - w->tick0;
    double ns_per_tick = dtick ? (double)dns / (double)dtick : 1.0;
    bad = bad || msgpack_pack_array(&pk, 2) || msgpack_pack_str_with_body(&pk, "times", 5) ||
          msgpack_pack_uint64(&pk, w->nstreams);
    for (size_t i = 0; !bad && i < w->nstreams; i++) {
        ta_log_stream_t *s = w->streams[i];
        bad = msgpack_pack_array(&pk, 2) || msgpack_pack_uint32(&pk, s->id) || msgpack_pack_array(&pk, s->count);
        for (uint64_t k = 0; !bad && k < s->count; k++)
            bad = msgpack_pack_uint64(&pk, (uint64_t)((double)(s->times[k] - w->tick0) * ns_per_tick));
    }
    bad = bad || msgpack_pack_array(&pk, 2) || msgpack_pack_str_with_body(&pk, "end", 3) ||
          msgpack_pack_uint64(&pk, total);
    if (fclose(w->out) != 0) bad = 1;
    if (bad) rc = ta_error_set(err, TACT_EIO, "log: writing %s failed: %s", w->path, strerror(errno));
    for (size_t i = 0; i < w->nstreams; i++) s_stream_free(w->streams[i]);
    ta_free(w->streams);
    pthread_mutex_destroy(&w->lock);
    ta_free(w);
    return rc;
}

/* ----------------------------------------------------------------- reader */

/* Reports a problem at the reader's offset. */
#define S_CORRUPT(r, ...) s_corrupt(err, ta_mpr_offset(r), __VA_ARGS__)

__attribute__((format(printf, 3, 4))) static int s_corrupt(ta_error_t *err, size_t offset, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ta_error_set(err, TACT_ECORRUPT, "log: byte offset %zu: %s", offset, what);
}

/* Reads [tag, ...] with n items in all and checks the tag string. */
static int s_tagged(ta_mpr_t *r, const char *tag, uint32_t n) {
    uint32_t count;
    const uint8_t *s;
    size_t len;
    ta_mpr_t save = *r;
    if (ta_mpr_array(r, &count) != 0 || count != n || ta_mpr_str(r, &s, &len) != 0 || len != strlen(tag) ||
        memcmp(s, tag, len) != 0) {
        *r = save;
        return -1;
    }
    return 0;
}

static int s_parse(ta_log_t *log, ta_error_t *err) {
    ta_mpr_t r;
    uint32_t count;
    uint64_t version, nstreams, total = 0;
    const uint8_t *s;
    size_t len;
    ta_mpr_init(&r, log->data, log->len);
    if (ta_mpr_array(&r, &count) != 0 || count != 3 || ta_mpr_str(&r, &s, &len) != 0 ||
        len != strlen(TA_LOG_MAGIC) || memcmp(s, TA_LOG_MAGIC, len) != 0)
        return ta_error_set(err, TACT_ECORRUPT, "log: byte offset 0: not a tact log (no TACTLOG header)");
    if (ta_mpr_u64(&r, &version) != 0) return S_CORRUPT(&r, "expected the format version");
    if (version != TA_LOG_VERSION)
        return ta_error_set(err, TACT_EVERSION, "log: format version %" PRIu64 ", this build reads %d", version,
                            TA_LOG_VERSION);
    if (ta_mpr_u64(&r, &nstreams) != 0) return S_CORRUPT(&r, "expected the stream count");
    /* Every count is checked against the bytes left before anything is
     * allocated for it: a stream or a record takes at least 4 bytes. */
    if (nstreams > log->len / 4) return S_CORRUPT(&r, "stream count %" PRIu64 " exceeds the file", nstreams);
    log->streams = ta_calloc(nstreams ? nstreams : 1, sizeof *log->streams);
    if (!log->streams) return ta_error_set(err, TACT_ENOMEM, "log: out of memory");
    log->nstreams = nstreams;
    for (size_t i = 0; i < nstreams; i++) {
        ta_log_stream_info_t *st = &log->streams[i];
        uint64_t id, nrec;
        if (s_tagged(&r, "stream", 4) != 0) return S_CORRUPT(&r, "expected stream header %zu of %" PRIu64, i + 1, nstreams);
        if (ta_mpr_u64(&r, &id) != 0 || id > UINT32_MAX) return S_CORRUPT(&r, "expected a port id");
        if (i && id <= log->streams[i - 1].id) return S_CORRUPT(&r, "streams out of id order");
        if (ta_mpr_str(&r, &s, &len) != 0) return S_CORRUPT(&r, "expected the port name");
        if (ta_mpr_u64(&r, &nrec) != 0) return S_CORRUPT(&r, "expected the record count");
        if (nrec > (log->len - ta_mpr_offset(&r)) / 4)
            return S_CORRUPT(&r, "record count %" PRIu64 " exceeds the file", nrec);
        st->id = (uint32_t)id;
        snprintf(st->name, sizeof st->name, "%.*s", (int)(len < 63 ? len : 63), (const char *)s);
        st->records = ta_calloc(nrec ? nrec : 1, sizeof *st->records);
        if (!st->records) return ta_error_set(err, TACT_ENOMEM, "log: out of memory");
        st->nrecords = nrec;
        for (size_t k = 0; k < nrec; k++) {
            ta_log_record_t *rec = &st->records[k];
            uint64_t dir, crc;
            rec->offset = ta_mpr_offset(&r);
            if (ta_mpr_array(&r, &count) != 0 || count != 4)
                return S_CORRUPT(&r, "record %zu of port %s: expected [dir, envelope, bulk, crc]", k, st->name);
            if (ta_mpr_u64(&r, &dir) != 0 || dir > TA_LOG_OUT) return S_CORRUPT(&r, "record %zu: bad direction", k);
            if (ta_mpr_bin(&r, &rec->env, &rec->env_len) != 0) return S_CORRUPT(&r, "record %zu: expected envelope", k);
            if (ta_mpr_bin(&r, &rec->bulk, &rec->bulk_len) != 0) return S_CORRUPT(&r, "record %zu: expected bulk", k);
            if (ta_mpr_u64(&r, &crc) != 0) return S_CORRUPT(&r, "record %zu: expected checksum", k);
            uint32_t want = ta_crc32c(ta_crc32c(0, rec->env, rec->env_len), rec->bulk, rec->bulk_len);
            if (crc != want)
                return s_corrupt(err, rec->offset, "record %zu of port %s: checksum mismatch", k, st->name);
            ta_msg_t m;
            uint64_t bulk_len;
            ta_error_t derr;
            if (ta_msg_decode(&m, rec->env, rec->env_len, 0, &bulk_len, &derr) != TACT_OK)
                return s_corrupt(err, rec->offset, "record %zu of port %s: bad envelope: %s", k, st->name, derr.text);
            if (bulk_len != rec->bulk_len)
                return s_corrupt(err, rec->offset, "record %zu of port %s: bulk length mismatch", k, st->name);
            rec->dir = (ta_log_dir_t)dir;
        }
        total += nrec;
    }
    log->payload_len = ta_mpr_offset(&r);
    uint64_t n;
    if (s_tagged(&r, "times", 2) != 0 || ta_mpr_u64(&r, &n) != 0 || n != nstreams)
        return S_CORRUPT(&r, "expected the times section for %" PRIu64 " streams", nstreams);
    for (size_t i = 0; i < nstreams; i++) {
        uint64_t id;
        ta_log_stream_info_t *st = &log->streams[i];
        if (ta_mpr_array(&r, &count) != 0 || count != 2 || ta_mpr_u64(&r, &id) != 0 || id != st->id ||
            ta_mpr_array(&r, &count) != 0 || count != st->nrecords)
            return S_CORRUPT(&r, "expected the times of port %s", st->name);
        for (size_t k = 0; k < st->nrecords; k++)
            if (ta_mpr_u64(&r, &st->records[k].wall_ns) != 0) return S_CORRUPT(&r, "expected a time");
    }
    if (s_tagged(&r, "end", 2) != 0 || ta_mpr_u64(&r, &n) != 0)
        return S_CORRUPT(&r, "expected the end marker (truncated log?)");
    if (n != total) return S_CORRUPT(&r, "end marker counts %" PRIu64 " records, found %" PRIu64, n, total);
    if (ta_mpr_offset(&r) != log->len) return S_CORRUPT(&r, "unexpected bytes after the end marker");
    return TACT_OK;
}

int ta_log_parse(const void *buf, size_t len, ta_log_t **out, ta_error_t *err) {
    *out = NULL;
    ta_log_t *log = ta_calloc(1, sizeof *log);
    if (!log || !(log->data = ta_malloc(len ? len : 1))) {
        ta_free(log);
        return ta_error_set(err, TACT_ENOMEM, "log: out of memory");
    }
    if (len) memcpy(log->data, buf, len);
    log->len = len;
    int rc = s_parse(log, err);
    if (rc != TACT_OK) {
        ta_log_free(&log);
        return rc;
    }
    *out = log;
    return TACT_OK;
}

int ta_log_load(const char *path, ta_log_t **out, ta_error_t *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ta_error_set(err, TACT_EIO, "log: cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;
    int rc = TACT_OK;
    for (;;) {
        if (ta_grow((void **)&buf, &cap, len + 65536, 1) != TACT_OK) {
            rc = ta_error_set(err, TACT_ENOMEM, "log: out of memory reading %s", path);
            break;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
    }
    if (rc == TACT_OK && ferror(f)) rc = ta_error_set(err, TACT_EIO, "log: reading %s failed", path);
    fclose(f);
    if (rc == TACT_OK) rc = ta_log_parse(buf, len, out, err);
    ta_free(buf);
    return rc;
}

void ta_log_free(ta_log_t **plog) {
    ta_log_t *log = *plog;
    if (!log) return;
    *plog = NULL;
    for (size_t i = 0; i < log->nstreams; i++) ta_free(log->streams[i].records);
    ta_free(log->streams);
    ta_free(log->data);
    ta_free(log);
}

const ta_log_stream_info_t *ta_log_find(const ta_log_t *log, uint32_t id) {
    for (size_t i = 0; i < log->nstreams; i++)
        if (log->streams[i].id == id) return &log->streams[i];
    return NULL;
}

int ta_log_record_msg(const ta_log_record_t *r, ta_msg_t *m, ta_error_t *err) {
    uint64_t bulk_len;
    int rc = ta_msg_decode(m, r->env, r->env_len, 0, &bulk_len, err);
    if (rc == TACT_OK) {
        m->bulk.ptr = r->bulk;
        m->bulk.len = r->bulk_len;
    }
    return rc;
}
