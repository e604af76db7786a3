/* log.c - the message log: records appended as they happen (a crash leaves a readable log), and a validating reader. */
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <time.h>

#include "crc32c.h"
#include "file.h"
#include "hash.h"
#include "map.h"
#include "mem.h"
#include "mpread.h"
#include "runtime.h"

/*
 * Every port records into one shared buffer, under a lock, and the buffer
 * goes to the file at most a millisecond or 64 KiB later, so a run that
 * dies leaves a log readable up to its last whole record.  The write itself
 * happens outside that lock (under a second one that keeps writes in
 * order), so ports go on recording while the file takes the bytes.  Records of
 * different ports interleave in the file as threads happen to run; each
 * port's own records are in the order it sent and processed them, and that
 * per-port order is what two runs compare (ta_log_compare), not file bytes.
 * A bulk frame seen before (an upload relayed by the graph builder, a
 * program passed on by the planner) is written once and referenced after.
 */

/* ------------------------------------------------------------- run header */

enum { S_KIND_STR, S_KIND_INT };
typedef struct {
    const char *name;
    int kind;
    int64_t a, b;
    size_t offset;
} s_run_field_t;

static const s_run_field_t s_run_fields[] = {
#define S_FIELD_(kind, name, a, b) {#name, S_KIND_##kind, a, b, offsetof(ta_run_header_t, name)},
    TA_RUN_HEADER_MAP(S_FIELD_)
#undef S_FIELD_
};
enum { S_NFIELDS = sizeof s_run_fields / sizeof *s_run_fields };

int ta_log_header_pack(const ta_run_header_t *h, msgpack_sbuffer *sb) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    int bad = msgpack_pack_map(&pk, S_NFIELDS);
    for (int i = 0; i < S_NFIELDS && !bad; i++) {
        const s_run_field_t *f = &s_run_fields[i];
        const char *at = (const char *)h + f->offset;
        char clean[512]; /* what is not printable ASCII (a tab in TACT_CC) as '?': the reader refuses it */
        size_t n = f->kind == S_KIND_STR ? strlen(at) : 0;
        for (size_t c = 0; c < n && c < sizeof clean; c++) clean[c] = (unsigned char)at[c] < 0x20 || (unsigned char)at[c] > 0x7e ? '?' : at[c];
        bad = msgpack_pack_str_with_body(&pk, f->name, strlen(f->name)) ||
              (f->kind == S_KIND_STR ? msgpack_pack_str_with_body(&pk, clean, n < sizeof clean ? n : sizeof clean) : msgpack_pack_int64(&pk, *(const int *)at));
    }
    return bad ? -1 : 0;
}

int ta_log_header_parse(const uint8_t *p, size_t len, ta_run_header_t *out, ta_error_t *err) {
    memset(out, 0, sizeof *out);
    out->schedule_cache = 1;
    ta_mpr_t r;
    uint32_t pairs;
    ta_mpr_init(&r, p, len);
    if (ta_mpr_map(&r, &pairs) != 0) return ta_error_set(err, TACT_ECORRUPT, "log: the run header is not a map");
    for (uint32_t i = 0; i < pairs; i++) {
        const uint8_t *k, *v;
        size_t kl, vl;
        int64_t n;
        if (ta_mpr_str(&r, &k, &kl) != 0) return ta_error_set(err, TACT_ECORRUPT, "log: run header: key %u is not a string", i);
        int at = -1;
        for (int j = 0; j < S_NFIELDS; j++)
            if (strlen(s_run_fields[j].name) == kl && memcmp(s_run_fields[j].name, k, kl) == 0) at = j;
        if (at < 0) {
            char shown[200];
            return ta_error_set(err, TACT_ECORRUPT, "log: run header: unknown field '%s'", ta_printable(k, kl < 40 ? kl : 40, shown, sizeof shown));
        }
        const s_run_field_t *f = &s_run_fields[at];
        if (out->present & 1u << at) return ta_error_set(err, TACT_ECORRUPT, "log: run header: field %s given twice", f->name);
        out->present |= 1u << at;
        char *dst = (char *)out + f->offset;
        if (f->kind == S_KIND_INT) {
            if (ta_mpr_i64(&r, &n) != 0) return ta_error_set(err, TACT_ECORRUPT, "log: run header: %s is not an integer", f->name);
            if (n < f->a || n > f->b)
                return ta_error_set(err, TACT_ECORRUPT, "log: run header: %s is %" PRId64 ", outside %" PRId64 "..%" PRId64, f->name, n, f->a, f->b);
            *(int *)dst = (int)n;
            continue;
        }
        if (ta_mpr_str(&r, &v, &vl) != 0) return ta_error_set(err, TACT_ECORRUPT, "log: run header: %s is not a string", f->name);
        if (vl > (size_t)f->a) return ta_error_set(err, TACT_ECORRUPT, "log: run header: %s is %zu bytes long; at most %" PRId64, f->name, vl, f->a);
        /* Printable ASCII only: these strings are shown on terminals
         * (`tact replay`, `tact log dump`), and a header is anyone's. */
        for (size_t c = 0; c < vl; c++)
            if (v[c] < 0x20 || v[c] > 0x7e)
                return ta_error_set(err, TACT_ECORRUPT, "log: run header: %s holds byte 0x%02x at %zu; only printable ASCII is allowed", f->name, v[c], c);
        memcpy(dst, v, vl);
        dst[vl] = '\0';
        ta_transport_t tr;
        if (f->b && vl && strcmp(dst, "tcp-insecure") != 0 && ta_transport_parse(dst, &tr) != 0)
            return ta_error_set(err, TACT_ECORRUPT, "log: run header: %s '%s' is not one of inproc, ipc, tcp, tcp-insecure", f->name, dst);
    }
    if (r.p != r.end) return ta_error_set(err, TACT_ECORRUPT, "log: run header: bytes after its map");
    return TACT_OK;
}

void ta_log_header_format(const ta_run_header_t *h, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < S_NFIELDS && used + 1 < size; i++) {
        const s_run_field_t *f = &s_run_fields[i];
        if (!(h->present & 1u << i)) continue;
        const char *at = (const char *)h + f->offset;
        int n = f->kind == S_KIND_STR ? snprintf(out + used, size - used, "%s%s '%s'", used ? ", " : "", f->name, at)
                                      : snprintf(out + used, size - used, "%s%s %d", used ? ", " : "", f->name, *(const int *)at);
        if (n < 0) break;
        used += (size_t)n < size - used ? (size_t)n : size - used - 1;
    }
}

/* ----------------------------------------------------------------- writer */

enum { S_FLUSH_BYTES = 64 << 10, S_FLUSH_NS = 1000000, S_RECENT = 64, S_DEDUP_MIN = 256, S_ZSTD_LEVEL = 3 };

struct ta_log_stream {
    ta_log_writer_t *w;
    uint32_t id;
    char name[64];
    msgpack_sbuffer env;
    uint64_t nrecords; /* this port's records so far */
};

/* A bulk already in the file: its hash, length and the record holding it. */
typedef struct {
    uint64_t h1, h2, len, record;
} s_recent_t;

struct ta_log_writer {
    char path[4096];
    FILE *out;
    pthread_mutex_t lock;
    ta_log_stream_t **streams;
    size_t nstreams, cap;
    msgpack_sbuffer buf; /* records not yet written */
    pthread_mutex_t write_lock; /* taken before lock is left: writes keep their order */
    msgpack_sbuffer spare;      /* the buffer being written, swapped with buf */
    uint64_t ns0, last_flush, records;
    s_recent_t recent[S_RECENT];
    size_t next_recent;
    int failed; /* the first error: the log stops there and finish reports it */
    char *notes;  /* "note PORT RECORD TEXT\n" lines, for FILE.times */
    size_t notes_len, notes_cap;
};

static uint64_t s_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writes what is buffered.  The caller holds the lock; it is released
 * while the bytes go to the file, under write_lock, which is taken before
 * the lock is left, so writes keep the order of their buffers. */
static void s_flush(ta_log_writer_t *w) {
    w->last_flush = s_ns();
    if (!w->buf.size) return;
    msgpack_sbuffer out = w->buf;
    w->buf = w->spare; /* empty, or never allocated while another write runs */
    memset(&w->spare, 0, sizeof w->spare);
    pthread_mutex_lock(&w->write_lock);
    pthread_mutex_unlock(&w->lock);
    int bad = fwrite(out.data, 1, out.size, w->out) != out.size || fflush(w->out) != 0;
    pthread_mutex_unlock(&w->write_lock);
    msgpack_sbuffer_clear(&out);
    pthread_mutex_lock(&w->lock);
    if (!w->spare.data) w->spare = out;
    else msgpack_sbuffer_destroy(&out);
    if (bad && !w->failed) w->failed = TACT_EIO;
}

/* The checksum of a record: the CRC-32C of its envelope followed by its
 * bulk, or by the bulk's 128-bit hash (little-endian) for a bulk of
 * S_DEDUP_MIN bytes or more, which the writer has computed already to
 * find repeats.  h is that hash, or NULL to compute it. */
static uint32_t s_checksum(ta_bytes_t env, ta_bytes_t bulk, const uint64_t *h) {
    uint32_t crc = ta_crc32c(0, env.ptr, env.len);
    if (bulk.len < S_DEDUP_MIN) return ta_crc32c(crc, bulk.ptr, bulk.len);
    uint64_t mine[2];
    if (!h) ta_hash128(bulk.ptr, bulk.len, mine), h = mine;
    uint8_t le[16];
    for (int i = 0; i < 16; i++) le[i] = (uint8_t)(h[i / 8] >> 8 * (i % 8));
    return ta_crc32c(crc, le, sizeof le);
}

int ta_log_writer_new(ta_log_writer_t **out, const char *path, ta_bytes_t header, ta_error_t *err) {
    *out = NULL;
    ta_log_writer_t *w = ta_calloc(1, sizeof *w);
    if (!w) return ta_error_set(err, TACT_ENOMEM, "log: out of memory");
    snprintf(w->path, sizeof w->path, "%s", path);
    /* A log holds every tensor's bytes: only its owner may read it, also
     * when it replaces an older file. */
    if (!(w->out = ta_file_fopen(path, 1, 0600, "log", err))) {
        ta_free(w);
        return err ? err->code : TACT_EIO;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->write_lock, NULL);
    msgpack_sbuffer_init(&w->buf);
    msgpack_sbuffer_init(&w->spare);
    w->ns0 = s_ns();
    /* ["TACTLOG", version, {run header}, crc32c of the header's bytes]: an
     * empty map when none is given. */
    static const uint8_t empty_map = 0x80;
    if (!header.len) header = (ta_bytes_t){&empty_map, 1};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w->buf, msgpack_sbuffer_write);
    int bad = msgpack_pack_array(&pk, 4) || msgpack_pack_str_with_body(&pk, TA_LOG_MAGIC, strlen(TA_LOG_MAGIC)) ||
              msgpack_pack_uint32(&pk, TA_LOG_VERSION) || msgpack_sbuffer_write(&w->buf, (const char *)header.ptr, header.len) ||
              msgpack_pack_uint32(&pk, ta_crc32c(0, header.ptr, header.len));
    if (!bad) {
        pthread_mutex_lock(&w->lock);
        s_flush(w);
        pthread_mutex_unlock(&w->lock);
    }
    if (bad || w->failed) {
        fclose(w->out);
        msgpack_sbuffer_destroy(&w->buf);
        msgpack_sbuffer_destroy(&w->spare);
        pthread_mutex_destroy(&w->lock);
        pthread_mutex_destroy(&w->write_lock);
        ta_free(w);
        return ta_error_set(err, TACT_EIO, "log: cannot write %s", path);
    }
    *out = w;
    return TACT_OK;
}

ta_log_stream_t *ta_log_writer_stream(ta_log_writer_t *w, uint32_t id, const char *name) {
    ta_log_stream_t *s = ta_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->w = w;
    s->id = id;
    snprintf(s->name, sizeof s->name, "%s", name);
    msgpack_sbuffer_init(&s->env);
    pthread_mutex_lock(&w->lock);
    int rc = ta_grow((void **)&w->streams, &w->cap, w->nstreams + 1, sizeof *w->streams);
    if (rc == TACT_OK) {
        w->streams[w->nstreams++] = s;
        /* ["stream", id, name] */
        msgpack_packer pk;
        msgpack_packer_init(&pk, &w->buf, msgpack_sbuffer_write);
        if (msgpack_pack_array(&pk, 3) || msgpack_pack_str_with_body(&pk, "stream", 6) || msgpack_pack_uint32(&pk, id) ||
            msgpack_pack_str_with_body(&pk, s->name, strlen(s->name)))
            w->failed = TACT_ENOMEM;
    }
    pthread_mutex_unlock(&w->lock);
    if (rc != TACT_OK) {
        msgpack_sbuffer_destroy(&s->env);
        ta_free(s);
        return NULL;
    }
    return s;
}


int ta_log_stream_record(ta_log_stream_t *s, ta_log_dir_t dir, const ta_msg_t *m, const ta_bytes_t *env) {
    ta_log_writer_t *w = s->w;
    ta_bytes_t e;
    if (env) {
        e = *env;
    } else {
        if (ta_msg_encode(m, &s->env) != TACT_OK) {
            pthread_mutex_lock(&w->lock);
            if (!w->failed) w->failed = TACT_ENOMEM;
            pthread_mutex_unlock(&w->lock);
            return TACT_ENOMEM;
        }
        e.ptr = (const uint8_t *)s->env.data;
        e.len = s->env.size;
    }
    uint64_t h[2] = {0, 0};
    if (m->bulk.len >= S_DEDUP_MIN) ta_hash128(m->bulk.ptr, m->bulk.len, h);
    uint32_t crc = s_checksum(e, m->bulk, h);
    uint64_t h1 = h[0], h2 = h[1];
    uint64_t now = s_ns();
    pthread_mutex_lock(&w->lock);
    int rc = w->failed;
    if (!rc) {
        /* [stream, dir, envelope, bulk, crc32, wall_ns]: bulk is a bin, or
         * the index of an earlier record with the same bulk. */
        int ref = -1;
        for (int i = 0; m->bulk.len >= S_DEDUP_MIN && i < S_RECENT; i++)
            if (w->recent[i].len == m->bulk.len && w->recent[i].h1 == h1 && w->recent[i].h2 == h2) ref = i;
        msgpack_packer pk;
        msgpack_packer_init(&pk, &w->buf, msgpack_sbuffer_write);
        int bad = msgpack_pack_array(&pk, 6) || msgpack_pack_uint32(&pk, s->id) || msgpack_pack_uint8(&pk, (uint8_t)dir) ||
                  msgpack_pack_bin(&pk, e.len) || msgpack_pack_bin_body(&pk, e.ptr, e.len);
        if (ref >= 0) {
            bad = bad || msgpack_pack_uint64(&pk, w->recent[ref].record);
        } else {
            bad = bad || msgpack_pack_bin(&pk, m->bulk.len) || (m->bulk.len && msgpack_pack_bin_body(&pk, m->bulk.ptr, m->bulk.len));
            if (m->bulk.len >= S_DEDUP_MIN) {
                w->recent[w->next_recent] = (s_recent_t){h1, h2, m->bulk.len, w->records};
                w->next_recent = (w->next_recent + 1) % S_RECENT;
            }
        }
        bad = bad || msgpack_pack_uint32(&pk, crc) || msgpack_pack_uint64(&pk, now - w->ns0);
        if (bad) w->failed = TACT_ENOMEM;
        w->records++;
        s->nrecords++;
        if (w->buf.size >= S_FLUSH_BYTES || now - w->last_flush >= S_FLUSH_NS) s_flush(w);
        rc = w->failed;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void ta_log_stream_note(ta_log_stream_t *s, const char *fmt, ...) {
    char text[201], line[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    for (char *c = text; *c; c++)
        if (*c < 0x20 || *c > 0x7e) *c = '?';
    ta_log_writer_t *w = s->w;
    pthread_mutex_lock(&w->lock);
    int n = snprintf(line, sizeof line, "note %" PRIu32 " %" PRIu64 " %s\n", s->id, s->nrecords ? s->nrecords - 1 : 0, text);
    if (n > 0 && ta_grow((void **)&w->notes, &w->notes_cap, w->notes_len + (size_t)n + 1, 1) == TACT_OK) {
        memcpy(w->notes + w->notes_len, line, (size_t)n + 1);
        w->notes_len += (size_t)n;
    }
    pthread_mutex_unlock(&w->lock);
}

void ta_log_writer_flush(ta_log_writer_t *w) {
    pthread_mutex_lock(&w->lock);
    s_flush(w);
    pthread_mutex_unlock(&w->lock);
}

/* Rewrites a finished log at path in its canonical form: the same run
 * header, every stream announced in port id order, then each port's
 * records in their order, port after port, with wall_ns 0 and bulk
 * repeats found again in this order; the times go, a line per record in
 * the same order, to path.times.  Records of different ports interleave
 * by timing, and times vary: without them, identical runs write identical
 * bytes.  Written to a private temporary file, then renamed over path: a
 * failure leaves the log as it happened (still a valid log). */
static int s_canonical(const char *path, const char *notes, size_t notes_len, ta_error_t *err) {
    ta_log_t *log;
    int rc = ta_log_load(path, &log, err);
    if (rc != TACT_OK) return rc;
    char tmp[4200], times[4200];
    snprintf(tmp, sizeof tmp, "%s.canonical", path);
    snprintf(times, sizeof times, "%s.times", path);
    FILE *out = ta_file_fopen(tmp, 1, 0600, "log", err), *tf = out ? ta_file_fopen(times, 1, 0600, "log times", err) : NULL;
    if (!out || !tf) {
        if (out) fclose(out), unlink(tmp);
        ta_log_free(&log);
        return err ? err->code : TACT_EIO;
    }
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    int bad = msgpack_pack_array(&pk, 4) || msgpack_pack_str_with_body(&pk, TA_LOG_MAGIC, strlen(TA_LOG_MAGIC)) ||
              msgpack_pack_uint32(&pk, TA_LOG_VERSION) || msgpack_sbuffer_write(&buf, (const char *)log->header, log->header_len) ||
              msgpack_pack_uint32(&pk, ta_crc32c(0, log->header, log->header_len));
    for (size_t i = 0; !bad && i < log->nstreams; i++)
        bad = msgpack_pack_array(&pk, 3) || msgpack_pack_str_with_body(&pk, "stream", 6) || msgpack_pack_uint32(&pk, log->streams[i].id) ||
              msgpack_pack_str_with_body(&pk, log->streams[i].name, strlen(log->streams[i].name));
    fprintf(tf, "# tact log times: port record wall_ns (ns since the recorder started), in the canonical log's order;\n"
                "# note port record text: what happened while the port processed that record (a kernel's time)\n");
    /* Every bulk of S_DEDUP_MIN bytes or more is kept once: the first
     * record that has it, by its hash (the writer, streaming, looks only
     * at the last S_RECENT). */
    ta_map_t seen = {0};
    uint8_t *zbuf = NULL;
    size_t zcap = 0;
    s_recent_t *firsts = NULL;
    size_t nfirsts = 0, firsts_cap = 0;
    uint64_t records = 0;
    for (size_t i = 0; !bad && i < log->nstreams; i++) {
        const ta_log_stream_info_t *st = &log->streams[i];
        for (size_t k = 0; !bad && k < st->nrecords; k++, records++) {
            const ta_log_record_t *r = &st->records[k];
            ta_bytes_t env = {r->env, r->env_len}, bulk = {r->bulk, r->bulk_len};
            uint64_t h[2] = {0, 0};
            if (bulk.len >= S_DEDUP_MIN) ta_hash128(bulk.ptr, bulk.len, h);
            uint64_t at = 0;
            int ref = bulk.len >= S_DEDUP_MIN && ta_map_get(&seen, h[0], &at) && firsts[at].h2 == h[1] && firsts[at].len == bulk.len;
            bad = msgpack_pack_array(&pk, 6) || msgpack_pack_uint32(&pk, st->id) || msgpack_pack_uint8(&pk, (uint8_t)r->dir) ||
                  msgpack_pack_bin(&pk, env.len) || msgpack_pack_bin_body(&pk, env.ptr, env.len);
            if (ref) {
                bad = bad || msgpack_pack_uint64(&pk, firsts[at].record);
            } else {
                /* Compressed where that saves a tenth or more. */
                size_t zlen = 0;
                if (bulk.len >= S_DEDUP_MIN) {
                    size_t bound = ZSTD_compressBound(bulk.len);
                    if (bound > zcap) {
                        ta_free(zbuf);
                        zcap = bound;
                        zbuf = ta_malloc(zcap);
                        if (!zbuf) zcap = 0;
                    }
                    if (zbuf) zlen = ZSTD_compress(zbuf, zcap, bulk.ptr, bulk.len, S_ZSTD_LEVEL);
                    if (!zbuf || ZSTD_isError(zlen) || zlen > bulk.len - bulk.len / 10) zlen = 0;
                }
                if (zlen)
                    bad = bad || msgpack_pack_array(&pk, 2) || msgpack_pack_uint64(&pk, bulk.len) || msgpack_pack_bin(&pk, zlen) ||
                          msgpack_pack_bin_body(&pk, zbuf, zlen);
                else bad = bad || msgpack_pack_bin(&pk, bulk.len) || (bulk.len && msgpack_pack_bin_body(&pk, bulk.ptr, bulk.len));
                if (bulk.len >= S_DEDUP_MIN && !ta_map_get(&seen, h[0], NULL)) {
                    bad = bad || ta_grow((void **)&firsts, &firsts_cap, nfirsts + 1, sizeof *firsts) != TACT_OK ||
                          ta_map_put(&seen, h[0], nfirsts) != TACT_OK;
                    if (!bad) firsts[nfirsts++] = (s_recent_t){h[0], h[1], bulk.len, records};
                }
            }
            bad = bad || msgpack_pack_uint32(&pk, s_checksum(env, bulk, bulk.len >= S_DEDUP_MIN ? h : NULL)) || msgpack_pack_uint64(&pk, 0);
            fprintf(tf, "%" PRIu32 " %zu %" PRIu64 "\n", st->id, k, r->wall_ns);
            if (!bad && buf.size >= S_FLUSH_BYTES) {
                bad = fwrite(buf.data, 1, buf.size, out) != buf.size;
                msgpack_sbuffer_clear(&buf);
            }
        }
    }
    if (notes_len) fwrite(notes, 1, notes_len, tf);
    bad = bad || msgpack_pack_array(&pk, 2) || msgpack_pack_str_with_body(&pk, "end", 3) || msgpack_pack_uint64(&pk, records);
    bad = bad || fwrite(buf.data, 1, buf.size, out) != buf.size;
    bad |= fclose(out) != 0;
    bad |= fclose(tf) != 0;
    msgpack_sbuffer_destroy(&buf);
    ta_map_fini(&seen);
    ta_free(firsts);
    ta_free(zbuf);
    ta_log_free(&log);
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return ta_error_set(err, TACT_EIO, "log: cannot write the canonical form of %s", path);
    }
    return TACT_OK;
}

int ta_log_writer_finish(ta_log_writer_t **pw, ta_error_t *err) {
    ta_log_writer_t *w = *pw;
    if (!w) return TACT_OK;
    *pw = NULL;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w->buf, msgpack_sbuffer_write);
    pthread_mutex_lock(&w->lock);
    if (!w->failed && (msgpack_pack_array(&pk, 2) || msgpack_pack_str_with_body(&pk, "end", 3) || msgpack_pack_uint64(&pk, w->records)))
        w->failed = TACT_ENOMEM;
    s_flush(w);
    pthread_mutex_unlock(&w->lock);
    if (fclose(w->out) != 0 && !w->failed) w->failed = TACT_EIO;
    int rc = w->failed ? ta_error_set(err, w->failed, "log: writing %s failed: %s", w->path, tact_strerror(w->failed)) : TACT_OK;
    /* A log that cannot be made canonical (no memory for it, a full disk)
     * stays as it happened: complete and valid, its records of different
     * ports interleaved by timing. */
    if (rc == TACT_OK) s_canonical(w->path, w->notes, w->notes_len, NULL);
    ta_free(w->notes);
    for (size_t i = 0; i < w->nstreams; i++) {
        msgpack_sbuffer_destroy(&w->streams[i]->env);
        ta_free(w->streams[i]);
    }
    ta_free(w->streams);
    msgpack_sbuffer_destroy(&w->buf);
    msgpack_sbuffer_destroy(&w->spare);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->write_lock);
    ta_free(w);
    return rc;
}

/* ----------------------------------------------------------------- reader */

/* Reports a problem at an offset. */
#define S_CORRUPT(off, ...) s_corrupt(err, (off), __VA_ARGS__)

__attribute__((format(printf, 3, 4))) static int s_corrupt(ta_error_t *err, size_t offset, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ta_error_set(err, TACT_ECORRUPT, "log: byte offset %zu: %s", offset, what);
}

/* True when the value at r needs more bytes than the buffer has left: the
 * file was cut there (by a crash), as opposed to bytes that are wrong. */
static int s_short(const ta_mpr_t *r) {
    size_t left = (size_t)(r->end - r->p);
    if (!left) return 1;
    uint8_t b = r->p[0];
    size_t need = 1;
    if (b == 0xc4 || b == 0xcc || b == 0xd0) need = 2;
    else if (b == 0xc5 || b == 0xcd || b == 0xd1 || b == 0xdc || b == 0xde) need = 3;
    else if (b == 0xc6 || b == 0xce || b == 0xd2 || b == 0xdd || b == 0xdf) need = 5;
    else if (b == 0xcf || b == 0xd3) need = 9;
    if (b == 0xd9) need = 2;
    if (need > left) return 1;
    if ((b & 0xe0) == 0xa0) return (size_t)(b & 0x1f) > left - 1; /* a str: its body too */
    if (b == 0xd9) return r->p[1] > left - 2;
    if (b >= 0xc4 && b <= 0xc6) { /* a bin: its body too */
        size_t n = b == 0xc4 ? r->p[1] : b == 0xc5 ? (size_t)(r->p[1] << 8 | r->p[2])
                                                   : (size_t)r->p[1] << 24 | (size_t)r->p[2] << 16 | (size_t)r->p[3] << 8 | r->p[4];
        return n > left - need;
    }
    return 0;
}

/* Adds rec to the stream with id, which must have been announced. */
static int s_add_record(ta_log_t *log, uint32_t id, const ta_log_record_t *rec) {
    for (size_t i = 0; i < log->nstreams; i++) {
        ta_log_stream_info_t *st = &log->streams[i];
        if (st->id != id) continue;
        size_t cap = st->cap_;
        if (ta_grow((void **)&st->records, &cap, st->nrecords + 1, sizeof *st->records) != TACT_OK) return TACT_ENOMEM;
        st->cap_ = cap;
        st->records[st->nrecords++] = *rec;
        return TACT_OK;
    }
    return TACT_EINVAL;
}

static int s_by_id(const void *a, const void *b) {
    const ta_log_stream_info_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* True when the file ends with an end marker ["end", n]: then it was
 * finished, and a value running past the end is damage, not a crash. */
static int s_has_end(const uint8_t *p, size_t len) {
    static const uint8_t tag[] = {0x92, 0xa3, 'e', 'n', 'd'};
    for (size_t w = 1; w <= 9 && w + sizeof tag <= len; w++) {
        const uint8_t *at = p + len - w - sizeof tag;
        if (memcmp(at, tag, sizeof tag) != 0) continue;
        ta_mpr_t r;
        uint64_t v;
        ta_mpr_init(&r, at + sizeof tag, w);
        if (ta_mpr_u64(&r, &v) == 0 && r.p == r.end) return 1;
    }
    return 0;
}

/* A compressed bulk: one zstd frame of exactly raw bytes, at most
 * S_UNPACK_MAX, and no more than a frame of zlen bytes can hold (a block
 * of 128 KiB takes at least 4 bytes, so 32768 times its size and a
 * block), so a frame that claims gigabytes it cannot hold costs nothing.
 * The bytes are the log's; the record's checksum is checked on them as on
 * any bulk. */
enum { S_UNPACK_MAX = 1 << 30 };

static int s_unpack(ta_log_t *log, const uint8_t *z, size_t zlen, uint64_t raw, const uint8_t **out, size_t *out_len) {
    unsigned long long claimed = ZSTD_getFrameContentSize(z, zlen);
    if (raw == 0 || raw > S_UNPACK_MAX || claimed != raw || raw > (uint64_t)zlen * 32768 + 131072) return TACT_ECORRUPT;
    if (ta_grow((void **)&log->unpacked_, &log->unpacked_cap_, log->nunpacked_ + 1, sizeof *log->unpacked_) != TACT_OK) return TACT_ENOMEM;
    uint8_t *p = ta_malloc((size_t)raw);
    if (!p) return TACT_ENOMEM;
    size_t n = ZSTD_decompress(p, (size_t)raw, z, zlen);
    if (ZSTD_isError(n) || n != raw) {
        ta_free(p);
        return TACT_ECORRUPT;
    }
    log->unpacked_[log->nunpacked_++] = p;
    log->unpacked_bytes += raw;
    *out = p;
    *out_len = (size_t)raw;
    return TACT_OK;
}

static int s_parse(ta_log_t *log, ta_error_t *err) {
    int rc = TACT_OK;
    ta_mpr_t r;
    uint32_t count;
    uint64_t version;
    const uint8_t *s;
    size_t len;
    ta_mpr_init(&r, log->data, log->len);
    if (ta_mpr_array(&r, &count) != 0 || ta_mpr_str(&r, &s, &len) != 0 || len != strlen(TA_LOG_MAGIC) ||
        memcmp(s, TA_LOG_MAGIC, len) != 0)
        return ta_error_set(err, TACT_ECORRUPT, "log: byte offset 0: not a tact log (no TACTLOG header)");
    if (ta_mpr_u64(&r, &version) != 0) return S_CORRUPT(ta_mpr_offset(&r), "expected the format version");
    if (version != TA_LOG_VERSION)
        return ta_error_set(err, TACT_EVERSION, "log: format version %" PRIu64 ", this build reads %d", version, TA_LOG_VERSION);
    if (count != 4) return S_CORRUPT(0, "the file's header has %u fields, not 4", count);
    /* The run header is checked like a record: a header edited by hand
     * (the compiler it names, the devices) does not pass. */
    log->header = r.p;
    uint32_t pairs;
    uint64_t header_crc;
    ta_mpr_t save = r;
    if (ta_mpr_skip(&r) != 0 || ta_mpr_map(&save, &pairs) != 0) return S_CORRUPT(ta_mpr_offset(&save), "expected the run header (a map)");
    log->header_len = (size_t)(r.p - log->header);
    size_t crc_at = ta_mpr_offset(&r);
    if (ta_mpr_u64(&r, &header_crc) != 0) return S_CORRUPT(crc_at, "expected the run header's checksum");
    if (header_crc != ta_crc32c(0, log->header, log->header_len))
        return S_CORRUPT((size_t)(log->header - log->data), "the run header's checksum does not match (the header was changed)");
    if ((rc = ta_log_header_parse(log->header, log->header_len, &log->run, err)) != TACT_OK) return rc;
    /* Every record in file order, as (stream index, position), to resolve
     * bulk references (record arrays move as they grow). */
    struct s_at {
        size_t stream, pos;
    } *all = NULL;
    size_t nall = 0, all_cap = 0;
    int ended = 0, finished = s_has_end(log->data, log->len);
#define s_short(r) (!finished && s_short(r))
    while (rc == TACT_OK && r.p < r.end) {
        size_t off = ta_mpr_offset(&r);
        ta_mpr_t item = r;
        if (ended) {
            rc = S_CORRUPT(off, "unexpected bytes after the end marker");
            break;
        }
        if (ta_mpr_array(&item, &count) != 0) {
            if (s_short(&r)) log->truncated_at = off;
            else rc = S_CORRUPT(off, "expected a record, a stream or the end marker");
            break;
        }
        if (s_short(&item)) {
            log->truncated_at = off;
            break;
        }
        ta_mpr_t tag = item;
        if (ta_mpr_str(&tag, &s, &len) == 0) {
            uint64_t v;
            if (count == 3 && len == 6 && memcmp(s, "stream", 6) == 0) {
                const uint8_t *name;
                size_t nlen;
                if (ta_mpr_u64(&tag, &v) != 0 || v > UINT32_MAX || ta_mpr_str(&tag, &name, &nlen) != 0) {
                    if (s_short(&tag)) log->truncated_at = off;
                    else rc = S_CORRUPT(off, "malformed stream announcement");
                    break;
                }
                for (size_t i = 0; i < log->nstreams && rc == TACT_OK; i++)
                    if (log->streams[i].id == v) rc = S_CORRUPT(off, "port %" PRIu64 " announced twice", v);
                if (rc != TACT_OK) break;
                size_t cap = log->streams_cap_;
                if (ta_grow((void **)&log->streams, &cap, log->nstreams + 1, sizeof *log->streams) != TACT_OK) {
                    rc = ta_error_set(err, TACT_ENOMEM, "log: out of memory");
                    break;
                }
                log->streams_cap_ = cap;
                ta_log_stream_info_t *st = &log->streams[log->nstreams++];
                memset(st, 0, sizeof *st);
                st->id = (uint32_t)v;
                snprintf(st->name, sizeof st->name, "%.*s", (int)(nlen < 63 ? nlen : 63), (const char *)name);
                r = tag;
                continue;
            }
            if (count == 2 && len == 3 && memcmp(s, "end", 3) == 0) {
                if (ta_mpr_u64(&tag, &v) != 0) {
                    if (s_short(&tag)) log->truncated_at = off;
                    else rc = S_CORRUPT(off, "malformed end marker");
                    break;
                }
                if (v != nall) {
                    rc = S_CORRUPT(off, "end marker counts %" PRIu64 " records, found %zu", v, nall);
                    break;
                }
                ended = 1;
                r = tag;
                continue;
            }
            rc = S_CORRUPT(off, "unknown section");
            break;
        }
        /* A record: [stream, dir, envelope, bulk, crc32, wall_ns]. */
        ta_log_record_t rec;
        memset(&rec, 0, sizeof rec);
        rec.offset = off;
        uint64_t id, dir, crc, ref = 0;
        int is_ref = 0;
        if (count != 6) {
            rc = S_CORRUPT(off, "record %zu: expected [stream, dir, envelope, bulk, crc, time]", nall);
            break;
        }
#define S_FIELD(ok, what)                                           \
    if (!(ok)) {                                                    \
        if (s_short(&item)) log->truncated_at = off;                \
        else rc = S_CORRUPT(ta_mpr_offset(&item), "record %zu: %s", nall, what); \
        break;                                                      \
    }
        S_FIELD(ta_mpr_u64(&item, &id) == 0 && id <= UINT32_MAX, "expected a port id");
        S_FIELD(ta_mpr_u64(&item, &dir) == 0 && dir <= TA_LOG_OUT, "bad direction");
        S_FIELD(ta_mpr_bin(&item, &rec.env, &rec.env_len) == 0, "expected the envelope");
        uint32_t packed_n = 0;
        ta_mpr_t at_bulk = item;
        if (ta_mpr_u64(&item, &ref) == 0) {
            is_ref = 1;
        } else if (ta_mpr_array(&at_bulk, &packed_n) == 0) { /* [raw length, zstd frame] */
            item = at_bulk;
            uint64_t raw;
            const uint8_t *z;
            size_t zlen;
            S_FIELD(packed_n == 2 && ta_mpr_u64(&item, &raw) == 0 && ta_mpr_bin(&item, &z, &zlen) == 0, "expected [length, compressed bulk]");
            int prc = s_unpack(log, z, zlen, raw, &rec.bulk, &rec.bulk_len);
            if (prc != TACT_OK) {
                rc = prc == TACT_ENOMEM ? ta_error_set(err, TACT_ENOMEM, "log: out of memory for a compressed bulk of %" PRIu64 " bytes", raw)
                                        : S_CORRUPT(off, "record %zu: the compressed bulk is damaged or not %" PRIu64 " bytes", nall, raw);
                break;
            }
        } else {
            S_FIELD(ta_mpr_bin(&item, &rec.bulk, &rec.bulk_len) == 0, "expected the bulk");
        }
        S_FIELD(ta_mpr_u64(&item, &crc) == 0, "expected the checksum");
        S_FIELD(ta_mpr_u64(&item, &rec.wall_ns) == 0, "expected the time");
#undef S_FIELD
        if (is_ref) {
            const ta_log_record_t *to = ref < nall ? &log->streams[all[ref].stream].records[all[ref].pos] : NULL;
            if (!to || !to->bulk_len) {
                rc = S_CORRUPT(off, "record %zu: bulk refers to record %" PRIu64 ", which has none", nall, ref);
                break;
            }
            rec.bulk = to->bulk;
            rec.bulk_len = to->bulk_len;
        }
        uint32_t want = s_checksum((ta_bytes_t){rec.env, rec.env_len}, (ta_bytes_t){rec.bulk, rec.bulk_len}, NULL);
        if (crc != want) {
            rc = S_CORRUPT(off, "record %zu (port %" PRIu64 "): checksum mismatch", nall, id);
            break;
        }
        ta_msg_t m;
        uint64_t bulk_len;
        ta_error_t derr;
        if (ta_msg_decode(&m, rec.env, rec.env_len, 0, &bulk_len, &derr) != TACT_OK) {
            rc = S_CORRUPT(off, "record %zu: bad envelope: %s", nall, derr.text);
            break;
        }
        if (bulk_len != rec.bulk_len) {
            rc = S_CORRUPT(off, "record %zu: bulk length mismatch", nall);
            break;
        }
        rec.dir = (ta_log_dir_t)dir;
        int arc = s_add_record(log, (uint32_t)id, &rec);
        if (arc == TACT_EINVAL) rc = S_CORRUPT(off, "record %zu: port %" PRIu64 " was never announced", nall, id);
        else if (arc != TACT_OK) rc = ta_error_set(err, TACT_ENOMEM, "log: out of memory");
        if (rc != TACT_OK) break;
        if (ta_grow((void **)&all, &all_cap, nall + 1, sizeof *all) != TACT_OK) {
            rc = ta_error_set(err, TACT_ENOMEM, "log: out of memory");
            break;
        }
        for (size_t i = 0; i < log->nstreams; i++)
            if (log->streams[i].id == id) all[nall] = (struct s_at){i, log->streams[i].nrecords - 1};
        nall++;
        r = item;
    }
#undef s_short
    if (rc == TACT_OK && !ended && !log->truncated_at) log->truncated_at = log->len;
    ta_free(all);
    if (rc == TACT_OK && log->nstreams) qsort(log->streams, log->nstreams, sizeof *log->streams, s_by_id);
    return rc;
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
    /* Only a regular file has an end: /dev/zero or a pipe would be read
     * without bound (and a FIFO's open would block). */
    ta_error_t ferr;
    FILE *f = ta_file_fopen(path, 0, 0, "log", &ferr);
    if (!f) return ta_error_set(err, ferr.code, "%s", ferr.text);
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return ta_error_set(err, TACT_EIO, "log: cannot stat %s", path);
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = ta_malloc(len ? len : 1);
    int rc = TACT_OK;
    if (!buf) rc = ta_error_set(err, TACT_ENOMEM, "log: out of memory reading %s (%zu bytes)", path, len);
    else if (len && fread(buf, 1, len, f) != len) rc = ta_error_set(err, TACT_EIO, "log: reading %s failed", path);
    fclose(f);
    if (rc == TACT_OK) rc = ta_log_parse(buf, len, out, err);
    ta_free(buf);
    return rc;
}

void ta_log_free(ta_log_t **plog) {
    ta_log_t *log = *plog;
    if (!log) return;
    *plog = NULL;
    for (size_t i = 0; i < log->nunpacked_; i++) ta_free(log->unpacked_[i]);
    ta_free(log->unpacked_);
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

/* Describes where two streams first differ, field by field. */
static void s_describe(const ta_log_stream_info_t *st, size_t k, const ta_log_record_t *a, const ta_log_record_t *b, char *where,
                       size_t len) {
    if (!a || !b) {
        snprintf(where, len, "port %s (%u), record %zu: %s", st->name, st->id, k, a ? "missing in the second log" : "extra in the second log");
        return;
    }
    ta_msg_t x, y;
    ta_error_t e;
    char field[64] = "envelope";
    ta_msg_init(&x, TA_MSG_EOS);
    ta_msg_init(&y, TA_MSG_EOS);
    if (a->dir != b->dir) snprintf(field, sizeof field, "direction");
    else if (ta_log_record_msg(a, &x, &e) == TACT_OK && ta_log_record_msg(b, &y, &e) == TACT_OK)
        ta_msg_equal(&x, &y, field, sizeof field);
    snprintf(where, len, "port %s (%u), record %zu (%s %s): %s differs", st->name, st->id, k, a->dir == TA_LOG_IN ? "in" : "out",
             ta_msg_type_name(x.type), field);
}

static int s_same(const ta_log_record_t *a, const ta_log_record_t *b) {
    return a->dir == b->dir && a->env_len == b->env_len && a->bulk_len == b->bulk_len && memcmp(a->env, b->env, a->env_len) == 0 &&
           (!a->bulk_len || memcmp(a->bulk, b->bulk, a->bulk_len) == 0);
}

/* A CONFIG's envelope with its devices' URIs left out (where a device
 * runs, not what it is), into sb; -1 if it does not decode. */
static int s_config_placeless(const ta_log_record_t *r, msgpack_sbuffer *sb) {
    ta_msg_t m;
    ta_error_t e;
    if (ta_log_record_msg(r, &m, &e) != TACT_OK || m.type != TA_MSG_CONFIG) return -1;
    size_t n = m.as.config.devices.n;
    ta_device_rec_t *d = ta_calloc(n ? n : 1, sizeof *d);
    int rc = d ? 0 : -1;
    ta_recs_it_t it;
    ta_recs_begin(&it, &m.as.config.devices);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!ta_recs_next(&it, &d[i])) rc = -1;
        d[i].uri = (ta_bytes_t){0};
    }
    if (rc == 0) {
        m.as.config.devices = ta_recs(TA_REC_DEVICE, d, n);
        rc = ta_msg_encode(&m, sb) == TACT_OK ? 0 : -1;
    }
    ta_free(d);
    ta_msg_release(&m);
    return rc;
}

static int s_same_placeless(const ta_log_record_t *a, const ta_log_record_t *b) {
    if (a->dir != b->dir) return 0;
    msgpack_sbuffer x, y;
    msgpack_sbuffer_init(&x);
    msgpack_sbuffer_init(&y);
    int same = s_config_placeless(a, &x) == 0 && s_config_placeless(b, &y) == 0 && x.size == y.size && memcmp(x.data, y.data, x.size) == 0;
    msgpack_sbuffer_destroy(&x);
    msgpack_sbuffer_destroy(&y);
    return same;
}

/* The stages that run where the client is, whichever devices are workers'. */
static int s_placeless_stage(const char *name) {
    return strcmp(name, "executor") != 0 && strcmp(name, "compiler") != 0;
}

static int s_compare(const ta_log_t *a, const ta_log_t *b, int places, char *where, size_t len) {
    /* The stage to blame is one whose output differs while everything it
     * processed before matched; failing that, the first difference. */
    const char *kind = NULL;
    char first[512] = "", culprit[512] = "";
    for (size_t i = 0, j = 0; i < a->nstreams || j < b->nstreams; i++, j++) {
        /* Comparing stages only: the executors and compilers (in a worker
         * in one run, here in the other) are passed over. */
        while (places && i < a->nstreams && !s_placeless_stage(a->streams[i].name)) i++;
        while (places && j < b->nstreams && !s_placeless_stage(b->streams[j].name)) j++;
        if (i >= a->nstreams && j >= b->nstreams) break;
        const ta_log_stream_info_t *sa = i < a->nstreams ? &a->streams[i] : NULL, *sb = j < b->nstreams ? &b->streams[j] : NULL;
        if (!sa || !sb || sa->id != sb->id || strcmp(sa->name, sb->name) != 0) {
            if (!first[0]) snprintf(first, sizeof first, "the logs have different ports (%s vs %s)", sa ? sa->name : "none", sb ? sb->name : "none");
            break;
        }
        size_t n = sa->nrecords > sb->nrecords ? sa->nrecords : sb->nrecords;
        for (size_t k = 0; k < n; k++) {
            const ta_log_record_t *x = k < sa->nrecords ? &sa->records[k] : NULL, *y = k < sb->nrecords ? &sb->records[k] : NULL;
            if (x && y && (s_same(x, y) || (places && s_same_placeless(x, y)))) continue;
            char d[512];
            s_describe(sa, k, x, y, d, sizeof d);
            if (!first[0]) snprintf(first, sizeof first, "%s", d);
            if (!culprit[0] && x && x->dir == TA_LOG_OUT) snprintf(culprit, sizeof culprit, "%s", d);
            break;
        }
    }
    kind = culprit[0] ? culprit : first;
    if (!kind[0]) return 1;
    if (where) snprintf(where, len, "%s", kind);
    return 0;
}

int ta_log_compare(const ta_log_t *a, const ta_log_t *b, char *where, size_t len) { return s_compare(a, b, 0, where, len); }

int ta_log_compare_stages(const ta_log_t *a, const ta_log_t *b, char *where, size_t len) { return s_compare(a, b, 1, where, len); }
