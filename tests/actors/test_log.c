/* test_log.c - the message log: write/read round trip, identical runs, corruption and truncation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "actor.h"
#include "builtin.h"
#include "crc32c.h"
#include "log.h"
#include "mpread.h"
#include "testutil.h"

/* Records a short session with the echo actor: ECHO x3 (with bulk), DATA x2, EOS. */
static void s_record(const char *path, ta_transport_t transport) {
    ta_rt_t *rt = tu_rt(transport, 3000, path);
    ta_port_t *port;
    ta_actor_t *echo;
    ta_error_t err;
    cr_assert_eq(ta_port_new(rt, "client", &port, &err), TACT_OK);
    cr_assert_eq(ta_actor_start(rt, &ta_echo_ops, NULL, NULL, &echo, &err), TACT_OK);
    uint8_t bulk[300];
    for (size_t i = 0; i < sizeof bulk; i++) bulk[i] = (uint8_t)(i * 7);
    for (int i = 0; i < 6; i++) {
        ta_msg_t m, r;
        ta_msg_init(&m, i < 3 ? TA_MSG_ECHO : i < 5 ? TA_MSG_DATA : TA_MSG_EOS);
        ta_msg_init(&r, TA_MSG_READY);
        m.as.echo.data = ta_bytes_str(i % 2 ? "odd" : "even"); /* ECHO and DATA share the layout */
        m.bulk.ptr = bulk;
        m.bulk.len = (size_t)i * 50;
        int rc = m.type == TA_MSG_DATA ? ta_port_send(port, ta_actor_id(echo), &m, &err)
                                       : ta_port_request(port, ta_actor_id(echo), &m, &r, -1, &err);
        cr_assert_eq(rc, TACT_OK, "%s", err.text);
        ta_msg_release(&r);
    }
    cr_assert_eq(ta_actor_stop(&echo, &err), TACT_OK);
    ta_port_destroy(&port);
    cr_assert_eq(ta_rt_destroy(&rt, &err), TACT_OK, "%s", err.text);
}

static uint8_t *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *buf = malloc(*len + 1);
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

Test(actors_log, write_read_round_trip) {
    char *path = tu_tmpfile("log");
    s_record(path, TA_TRANSPORT_INPROC);
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(log->nstreams, 2);
    const ta_log_stream_info_t *client = ta_log_find(log, 1), *echo = ta_log_find(log, 2);
    cr_assert(client && echo);
    cr_assert_str_eq(client->name, "client");
    cr_assert_str_eq(echo->name, "echo");
    /* The client sent 6 and received 4 replies; echo processed 6, sent 4. */
    static const struct {
        ta_log_dir_t dir;
        ta_msg_type_t type;
    } want_echo[] = {{TA_LOG_IN, TA_MSG_ECHO},  {TA_LOG_OUT, TA_MSG_ECHO_REPLY}, {TA_LOG_IN, TA_MSG_ECHO},
                     {TA_LOG_OUT, TA_MSG_ECHO_REPLY}, {TA_LOG_IN, TA_MSG_ECHO}, {TA_LOG_OUT, TA_MSG_ECHO_REPLY},
                     {TA_LOG_IN, TA_MSG_DATA},  {TA_LOG_IN, TA_MSG_DATA},        {TA_LOG_IN, TA_MSG_EOS},
                     {TA_LOG_OUT, TA_MSG_TOTAL}};
    cr_assert_eq(echo->nrecords, sizeof want_echo / sizeof want_echo[0]);
    cr_assert_eq(client->nrecords, 10);
    uint64_t last_ns = 0;
    for (size_t k = 0; k < echo->nrecords; k++) {
        ta_msg_t m;
        cr_assert_eq(ta_log_record_msg(&echo->records[k], &m, &err), TACT_OK);
        cr_assert_eq(echo->records[k].dir, want_echo[k].dir, "record %zu", k);
        cr_assert_eq(m.type, want_echo[k].type, "record %zu is %s", k, ta_msg_type_name(m.type));
        cr_assert_geq(echo->records[k].wall_ns, last_ns, "times are monotonic");
        last_ns = echo->records[k].wall_ns;
    }
    /* The ECHO_REPLY of the second request carries 50 bulk bytes i*7. */
    ta_msg_t r;
    cr_assert_eq(ta_log_record_msg(&echo->records[3], &r, &err), TACT_OK);
    cr_assert_eq(r.bulk.len, 50);
    for (size_t i = 0; i < 50; i++) cr_assert_eq(r.bulk.ptr[i], (uint8_t)(i * 7));
    cr_assert_eq(r.as.echo_reply.data.len, 3);
    cr_assert(memcmp(r.as.echo_reply.data.ptr, "odd", 3) == 0);
    /* The TOTAL counted the two DATA messages and their bytes. */
    ta_msg_t t;
    cr_assert_eq(ta_log_record_msg(&echo->records[9], &t, &err), TACT_OK);
    cr_assert_eq(t.as.total.count, 2);
    cr_assert_eq(t.as.total.sum, 3 + 150 + 4 + 200);
    ta_log_free(&log);
    unlink(path);
    free(path);
}

Test(actors_log, two_runs_give_identical_logs_apart_from_times) {
    char *a = tu_tmpfile("run-a"), *b = tu_tmpfile("run-b");
    s_record(a, TA_TRANSPORT_INPROC);
    usleep(2000);
    s_record(b, TA_TRANSPORT_TCP); /* a different transport records the same messages */
    ta_log_t *la, *lb;
    ta_error_t err;
    cr_assert_eq(ta_log_load(a, &la, &err), TACT_OK);
    cr_assert_eq(ta_log_load(b, &lb, &err), TACT_OK);
    char where[512] = "";
    cr_assert(ta_log_compare(la, lb, where, sizeof where), "%s", where);
    cr_assert_eq(la->truncated_at, 0, "a finished log has its end marker");
    ta_log_free(&la);
    ta_log_free(&lb);
    unlink(a);
    unlink(b);
    free(a);
    free(b);
}

/* A run that dies leaves a log cut anywhere: within the header that is an
 * error naming an offset; after it, the log reads up to its last whole
 * record, says where it stops, and holds exactly the records before it. */
Test(actors_log, a_truncated_log_reads_up_to_its_last_whole_record) {
    char *path = tu_tmpfile("trunc");
    s_record(path, TA_TRANSPORT_INPROC);
    size_t len;
    uint8_t *buf = s_slurp(path, &len);
    ta_log_t *full;
    ta_error_t err;
    cr_assert_eq(ta_log_parse(buf, len, &full, &err), TACT_OK, "%s", err.text);
    /* The header ends with its checksum. */
    ta_mpr_t r;
    ta_mpr_init(&r, full->header + full->header_len, len - (size_t)(full->header + full->header_len - full->data));
    cr_assert_eq(ta_mpr_skip(&r), 0);
    size_t header_end = (size_t)(r.p - full->data), last_count = 0;
    for (size_t n = 0; n < len; n++) {
        ta_log_t *log = (ta_log_t *)1;
        int rc = ta_log_parse(buf, n, &log, &err);
        if (n < header_end) {
            cr_assert(rc == TACT_ECORRUPT, "cut to %zu of %zu bytes: got %s", n, len, tact_status_name(rc));
            cr_assert_null(log);
            cr_assert(strstr(err.text, "byte offset "), "%s", err.text);
            continue;
        }
        cr_assert_eq(rc, TACT_OK, "cut to %zu of %zu bytes: %s", n, len, err.text);
        cr_assert(log->truncated_at > 0 && log->truncated_at <= n, "cut to %zu: stops at %zu", n, log->truncated_at);
        size_t count = 0;
        for (size_t i = 0; i < log->nstreams; i++) {
            const ta_log_stream_info_t *a = &log->streams[i], *b = ta_log_find(full, a->id);
            cr_assert(b && a->nrecords <= b->nrecords);
            for (size_t k = 0; k < a->nrecords; k++)
                cr_assert(a->records[k].env_len == b->records[k].env_len &&
                              memcmp(a->records[k].env, b->records[k].env, a->records[k].env_len) == 0,
                          "cut to %zu: record %zu of %s", n, k, a->name);
            count += a->nrecords;
        }
        cr_assert_geq(count, last_count, "a longer prefix never holds fewer records");
        last_count = count;
        ta_log_free(&log);
    }
    ta_log_free(&full);
    free(buf);
    unlink(path);
    free(path);
}

Test(actors_log, a_flipped_byte_in_a_record_names_its_offset) {
    char *path = tu_tmpfile("flip");
    s_record(path, TA_TRANSPORT_INPROC);
    size_t len;
    uint8_t *buf = s_slurp(path, &len);
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_parse(buf, len, &log, &err), TACT_OK);
    /* Corrupt a bulk byte deep inside record 3 of the echo stream. */
    const ta_log_record_t *rec = &ta_log_find(log, 2)->records[3];
    size_t at = (size_t)(rec->bulk - log->data) + 10, rec_off = rec->offset;
    ta_log_free(&log);
    buf[at] ^= 0x40;
    cr_assert_eq(ta_log_parse(buf, len, &log, &err), TACT_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu: record ", rec_off);
    cr_assert(strstr(err.text, want) && strstr(err.text, "checksum mismatch"), "%s (want '%s')", err.text, want);
    buf[at] ^= 0x40;
    /* Every single-byte corruption anywhere is caught or harmless (a time):
     * the log ends with its end marker, so nothing is taken for a cut. */
    uint64_t seed = tu_seed(), rng = seed;
    for (int rep = 0; rep < 300; rep++) {
        size_t i = tu_rand(&rng) % len;
        uint8_t old = buf[i];
        buf[i] ^= (uint8_t)(1 + tu_rand(&rng) % 255);
        int rc = ta_log_parse(buf, len, &log, &err);
        if (rc == TACT_OK) {
            cr_assert_eq(log->truncated_at, 0, "seed %#llx: byte %zu: damage read as a cut log", (unsigned long long)seed, i);
            ta_log_free(&log);
        } else {
            cr_assert(rc == TACT_ECORRUPT || rc == TACT_EVERSION, "seed %#llx", (unsigned long long)seed);
        }
        buf[i] = old;
    }
    free(buf);
    unlink(path);
    free(path);
}

/* A bulk that compresses is stored as [length, zstd frame] in the
 * canonical log: smaller, read back to the same bytes; a single-bit
 * change in the frame or its length is an error at the record (a
 * decoding failure or a checksum mismatch), or, in a bit that does not
 * change what the frame decodes to (its window size, spare bits), the same bytes:
 * never a crash or other bytes. */
Test(actors_log, compressed_bulks_read_back_and_damage_is_caught) {
    char *path = tu_tmpfile("zbulk");
    ta_log_writer_t *w;
    ta_error_t err;
    cr_assert_eq(ta_log_writer_new(&w, path, (ta_bytes_t){NULL, 0}, &err), TACT_OK, "%s", err.text);
    ta_log_stream_t *st = ta_log_writer_stream(w, 1, "client");
    static uint8_t bulk[20000];
    for (size_t i = 0; i < sizeof bulk; i++) bulk[i] = (uint8_t)(i % 97 < 50 ? 0 : i % 7);
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_DATA);
    m.sender = 1, m.dest = 2, m.seq = 1;
    m.as.echo.data = ta_bytes_str("x");
    m.bulk.ptr = bulk;
    m.bulk.len = sizeof bulk;
    cr_assert_eq(ta_log_stream_record(st, TA_LOG_OUT, &m, NULL), TACT_OK);
    cr_assert_eq(ta_log_writer_finish(&w, &err), TACT_OK, "%s", err.text);
    size_t len;
    uint8_t *buf = s_slurp(path, &len);
    cr_assert_lt(len, sizeof bulk / 4, "%zu bytes: the bulk was not compressed", len);
    ta_log_t *log;
    cr_assert_eq(ta_log_parse(buf, len, &log, &err), TACT_OK, "%s", err.text);
    const ta_log_stream_info_t *s = ta_log_find(log, 1);
    cr_assert(s && s->nrecords == 1 && s->records[0].bulk_len == sizeof bulk && memcmp(s->records[0].bulk, bulk, sizeof bulk) == 0);
    size_t rec_off = s->records[0].offset;
    ta_log_free(&log);
    /* Every bit of the record after its envelope (the length, the frame). */
    int unnoticed = 0;
    for (size_t i = rec_off + 20; i + 12 < len; i++)
        for (int b = 0; b < 8; b++) {
            buf[i] ^= (uint8_t)(1u << b);
            int rc = ta_log_parse(buf, len, &log, &err);
            if (rc == TACT_OK) {
                const ta_log_stream_info_t *t = ta_log_find(log, 1);
                cr_assert(t && t->records[0].bulk_len == sizeof bulk && memcmp(t->records[0].bulk, bulk, sizeof bulk) == 0,
                          "a flipped bit %d of byte %zu gave other bytes", b, i);
                ta_log_free(&log);
                unnoticed++;
            } else {
                cr_assert(rc == TACT_ECORRUPT && strstr(err.text, "record 0"), "bit %d of byte %zu: %s", b, i, err.text);
            }
            buf[i] ^= (uint8_t)(1u << b);
        }
    cr_assert_lt(unnoticed, 16, "%d flipped bits decoded to the same bytes", unnoticed); /* 11 here: the frame header's window and spare bits */
    free(buf);
    unlink(path);
    free(path);
}

/* A bulk of 256 bytes or more is checked through its 128-bit hash and, once
 * written, referenced by later records with the same bytes: a changed byte
 * in it is still a checksum mismatch. */
Test(actors_log, a_changed_byte_in_a_large_or_shared_bulk_is_caught) {
    char *path = tu_tmpfile("bigbulk");
    ta_log_writer_t *w;
    ta_error_t err;
    cr_assert_eq(ta_log_writer_new(&w, path, (ta_bytes_t){NULL, 0}, &err), TACT_OK, "%s", err.text);
    ta_log_stream_t *st = ta_log_writer_stream(w, 1, "client");
    cr_assert(st);
    static uint8_t bulk[5000];
    uint64_t rng = 0x9e3779b97f4a7c15ULL; /* random bytes: stored as they are, not compressed */
    for (size_t i = 0; i < sizeof bulk; i++) bulk[i] = (uint8_t)(tu_rand(&rng) >> 56);
    for (int i = 0; i < 3; i++) {
        ta_msg_t m;
        ta_msg_init(&m, TA_MSG_DATA);
        m.sender = 1;
        m.dest = 2;
        m.seq = (uint64_t)i + 1;
        m.as.echo.data = ta_bytes_str("x");
        m.bulk.ptr = bulk;
        m.bulk.len = i == 2 ? 300 : sizeof bulk; /* records 0 and 1 share a bulk */
        cr_assert_eq(ta_log_stream_record(st, TA_LOG_OUT, &m, NULL), TACT_OK);
    }
    cr_assert_eq(ta_log_writer_finish(&w, &err), TACT_OK, "%s", err.text);
    size_t len;
    uint8_t *buf = s_slurp(path, &len);
    ta_log_t *log;
    cr_assert_eq(ta_log_parse(buf, len, &log, &err), TACT_OK, "%s", err.text);
    const ta_log_stream_info_t *s = ta_log_find(log, 1);
    cr_assert_eq(s->nrecords, 3);
    cr_assert_eq(s->records[0].bulk, s->records[1].bulk, "the second record refers to the first one's bulk");
    cr_assert_lt(len, 2 * sizeof bulk, "the shared bulk is written once");
    size_t at[2] = {(size_t)(s->records[0].bulk - log->data) + 4000, (size_t)(s->records[2].bulk - log->data) + 299};
    size_t rec_off[2] = {s->records[0].offset, s->records[2].offset};
    ta_log_free(&log);
    for (int k = 0; k < 2; k++) {
        buf[at[k]] ^= 0x01;
        cr_assert_eq(ta_log_parse(buf, len, &log, &err), TACT_ECORRUPT, "bulk byte %zu changed", at[k]);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu: record ", rec_off[k]);
        cr_assert(strstr(err.text, want) && strstr(err.text, "checksum mismatch"), "%s (want '%s')", err.text, want);
        buf[at[k]] ^= 0x01;
    }
    free(buf);
    unlink(path);
    free(path);
}

Test(actors_log, foreign_files_and_versions_are_refused) {
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_parse("hello world", 11, &log, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "not a tact log"), "%s", err.text);
    /* ["TACTLOG", 1, 0] (an old format) and ["TACTLOG", 5, {}, crc] */
    static const uint8_t v1[] = {0x93, 0xa7, 'T', 'A', 'C', 'T', 'L', 'O', 'G', 0x01, 0x00};
    cr_assert_eq(ta_log_parse(v1, sizeof v1, &log, &err), TACT_EVERSION);
    cr_assert(strstr(err.text, "format version 1, this build reads 4"), "%s", err.text);
    static const uint8_t v5[] = {0x94, 0xa7, 'T', 'A', 'C', 'T', 'L', 'O', 'G', 0x05, 0x80, 0x00};
    cr_assert_eq(ta_log_parse(v5, sizeof v5, &log, &err), TACT_EVERSION);
    /* A run header that is not a map. */
    static const uint8_t nomap[] = {0x94, 0xa7, 'T', 'A', 'C', 'T', 'L', 'O', 'G', 0x04, 0x05, 0x00};
    cr_assert_eq(ta_log_parse(nomap, sizeof nomap, &log, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "run header"), "%s", err.text);
    /* The file's header of version 3's three fields: no checksum. */
    static const uint8_t three[] = {0x93, 0xa7, 'T', 'A', 'C', 'T', 'L', 'O', 'G', 0x04, 0x80};
    cr_assert_eq(ta_log_parse(three, sizeof three, &log, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "3 fields, not 4"), "%s", err.text);
    /* A record of a port that was never announced (after an empty header
     * with its right checksum, as a 32-bit uint). */
    uint8_t stray[] = {0x94, 0xa7, 'T', 'A', 'C', 'T', 'L', 'O', 'G', 0x04, 0x80, 0xce, 0, 0, 0, 0, 0x96, 0x05, 0x00,
                       0xc4, 0x00, 0xc4, 0x00, 0x00, 0x00};
    uint32_t crc = ta_crc32c(0, (const uint8_t[]){0x80}, 1);
    for (int i = 0; i < 4; i++) stray[12 + i] = (uint8_t)(crc >> (24 - 8 * i));
    cr_assert_eq(ta_log_parse(stray, sizeof stray, &log, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "byte offset 16: record 0"), "%s", err.text);
    stray[12] ^= 1; /* the header's checksum wrong: refused at the header's offset, 10 */
    cr_assert_eq(ta_log_parse(stray, sizeof stray, &log, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "byte offset 10: the run header's checksum does not match"), "%s", err.text);
    cr_assert_eq(ta_log_load("/nonexistent/tact.log", &log, &err), TACT_EIO);
    cr_assert_eq(ta_log_load("/dev/zero", &log, &err), TACT_EIO, "an endless file is refused, not read");
    cr_assert(strstr(err.text, "not a regular file"), "%s", err.text);
    /* A FIFO nobody writes to: refused at once, not waited on in open(). */
    char *fifo = tu_tmpfile("fifo.tlog");
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(ta_log_load(fifo, &log, &err), TACT_EIO);
    cr_assert(strstr(err.text, "not a regular file (a FIFO)"), "%s", err.text);
    /* Nor is one written to (nobody reads it). */
    ta_log_writer_t *w;
    cr_assert_eq(ta_log_writer_new(&w, fifo, (ta_bytes_t){NULL, 0}, &err), TACT_EIO);
    cr_assert(strstr(err.text, "not a regular file"), "%s", err.text);
    unlink(fifo);
    free(fifo);
}

Test(actors_log, an_unwritable_path_fails_when_the_runtime_starts) {
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    cfg.log_path = "/nonexistent/dir/run.tactlog";
    ta_rt_t *rt;
    ta_error_t err;
    cr_assert_eq(ta_rt_new(&rt, &cfg, &err), TACT_EIO);
    cr_assert_null(rt);
    cr_assert(strstr(err.text, "cannot create /nonexistent/dir/run.tactlog"), "%s", err.text);
}

Test(actors_log, crc32c_matches_the_standard_check_value_on_both_paths) {
    /* The CRC-32C check value from RFC 3720 / the Rocksoft catalogue. */
    cr_assert_eq(ta_crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(ta_crc32c_portable(0, "123456789", 9), 0xE3069283u);
    uint64_t seed = tu_seed(), rng = seed;
    static uint8_t buf[20000]; /* past three lanes of 512 bytes, several times */
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)tu_rand(&rng);
    for (size_t n = 0; n < sizeof buf; n += n < 2000 ? 37 : 1531) {
        uint32_t whole = ta_crc32c_portable(0, buf, n);
        cr_assert_eq(ta_crc32c(0, buf, n), whole, "seed %#llx, %zu bytes", (unsigned long long)seed, n);
        /* Chaining over a split equals one pass. */
        cr_assert_eq(ta_crc32c(ta_crc32c(0, buf, n / 3), buf + n / 3, n - n / 3), whole);
    }
}

/* The worked example of docs/log-format.md, byte for byte: a valid log,
 * and the errors the page says its changes give. */
Test(actors_log, the_documented_example_reads_as_documented) {
    uint8_t ex[] = {0x94, 0xa7, 'T', 'A', 'C', 'T', 'L', 'O', 'G', 0x04, 0x80, 0xce, 0xd0, 0x8b, 0x68, 0x29,
                    0x93, 0xa6, 's', 't', 'r', 'e', 'a', 'm', 0x01, 0xa6, 'c', 'l', 'i', 'e', 'n', 't',
                    0x96, 0x01, 0x01, 0xc4, 0x0d, 0x98, TA_PROTOCOL_VERSION, 0x09, 0x01, 0x02, 0x01, 0x00, 0x91, 0xc4, 0x02, 'h', 'i', 0x03,
                    0xc4, 0x03, 0x01, 0x02, 0x03, 0xce, 0x66, 0x68, 0xab, 0x00, 0xcd, 0x8a, 0xcd,
                    0x92, 0xa3, 'e', 'n', 'd', 0x01};
    cr_assert_eq(sizeof ex, 69);
    cr_assert_eq(TA_PROTOCOL_VERSION, 15, "the example (and docs/log-format.md) shows protocol version 15");
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_parse(ex, sizeof ex, &log, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(log->nstreams, 1);
    cr_assert_eq(log->streams[0].nrecords, 1);
    cr_assert_eq(log->streams[0].records[0].wall_ns, 35533);
    ta_log_free(&log);
    cr_assert_eq(ta_log_parse(ex, sizeof ex - 6, &log, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(log->truncated_at, 63);
    ta_log_free(&log);
    cr_assert_eq(ta_log_parse(ex, sizeof ex - 7, &log, &err), TACT_OK, "%s", err.text);
    cr_assert_eq(log->truncated_at, 32);
    ta_log_free(&log);
    ex[45] ^= 1;
    cr_assert_eq(ta_log_parse(ex, sizeof ex, &log, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "log: byte offset 32: record 0 (port 1): checksum mismatch"), "%s", err.text);
    ex[45] ^= 1;
    ex[14] ^= 1;
    cr_assert_eq(ta_log_parse(ex, sizeof ex, &log, &err), TACT_ECORRUPT);
    cr_assert(strstr(err.text, "log: byte offset 10: the run header's checksum does not match"), "%s", err.text);
}
