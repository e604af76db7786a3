/* log.h - the message log: a recorder that streams per-port records, and a validating reader. */
#ifndef TACT_LOG_H
#define TACT_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/* File format version written by this build (docs/log-format.md). */
#define TA_LOG_VERSION 4
#define TA_LOG_MAGIC "TACTLOG"

typedef enum ta_log_dir { TA_LOG_IN = 0, TA_LOG_OUT = 1 } ta_log_dir_t;

/* ------------------------------------------------------------- run header */

/*
 * The run header: what the recorded context was (docs/log-format.md).
 * Each field is declared once here, with its kind and range, and the
 * packer, the reader's checks and `tact replay`'s display come from the
 * table.  XX(kind, name, a, b): STR fields hold at most a bytes (b: 0, or
 * 1 when the value must be a transport name); INT fields lie in [a, b].
 * Nothing here is ever executed or obeyed by a replay: it only describes
 * the recording (graph/rerun.c).
 */
#define TA_RUN_HEADER_MAP(XX)                 \
    XX(STR, library, 31, 0)                   \
    XX(STR, build, 127, 0)                    \
    XX(STR, transport, 15, 1)                 \
    XX(STR, devices, 255, 0)                  \
    XX(INT, cpu_threads, 0, 65536)            \
    XX(INT, compile_workers, 0, 8)            \
    XX(INT, timeout_ms, 0, 2147483647)        \
    XX(STR, cc, 511, 0)                       \
    XX(STR, flags, 255, 0)                    \
    XX(STR, quick_flags, 255, 0)              \
    XX(INT, schedule_cache, 0, 1)             \
    XX(INT, strict, 0, 1)

#define TA_RUN_FIELD_STR(name, a) char name[(a) + 1];
#define TA_RUN_FIELD_INT(name, a) int name;
#define TA_RUN_FIELD_(kind, name, a, b) TA_RUN_FIELD_##kind(name, a)
typedef struct ta_run_header {
    TA_RUN_HEADER_MAP(TA_RUN_FIELD_)
    unsigned present; /* bit k: the k-th field of the table was in the file */
} ta_run_header_t;

/* Packs h (every field) as the map a log's run header is. */
int ta_log_header_pack(const ta_run_header_t *h, msgpack_sbuffer *sb);

/* Reads and checks a run header (a msgpack map of len bytes): each key a
 * field of the table, at most once, of its kind and in its range; absent
 * fields are "" or 0 (schedule_cache 1).  Returns TACT_OK, or
 * TACT_ECORRUPT naming the field and why. */
int ta_log_header_parse(const uint8_t *p, size_t len, ta_run_header_t *out, ta_error_t *err);

/* Prints the fields present as "name value, name value" into out. */
void ta_log_header_format(const ta_run_header_t *h, char *out, size_t size);

/* ----------------------------------------------------------------- writer */

typedef struct ta_log_writer ta_log_writer_t;
typedef struct ta_log_stream ta_log_stream_t;

/* Creates a recorder writing path, which starts with the run header (a
 * packed msgpack map, or empty for none).  Returns TACT_OK, or TACT_EIO if
 * path cannot be created or written. */
int ta_log_writer_new(ta_log_writer_t **out, const char *path, ta_bytes_t header, ta_error_t *err);

/* Returns the stream of port id, creating it (thread-safe); NULL on ENOMEM. */
ta_log_stream_t *ta_log_writer_stream(ta_log_writer_t *w, uint32_t id, const char *name);

/* Appends one record (what port processed or sent): env is m's encoded
 * envelope when the caller has it, or NULL to encode it here.  A stream is
 * used by one thread at a time; records of all streams reach the file at
 * most 1 ms or 64 KiB after they were taken.  Returns TACT_OK, TACT_ENOMEM
 * or TACT_EIO; after a failure nothing more is written and
 * ta_log_writer_finish reports it. */
int ta_log_stream_record(ta_log_stream_t *s, ta_log_dir_t dir, const ta_msg_t *m, const ta_bytes_t *env);

/* A note on the stream's latest record (a kernel's time while the
 * executor processed it): kept beside the log, in FILE.times, never in
 * the log itself, whose bytes must not depend on timing.  At most 200
 * printable bytes; notes that do not fit in memory are dropped. */
void ta_log_stream_note(ta_log_stream_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes what is buffered now. */
void ta_log_writer_flush(ta_log_writer_t *w);

/* Writes the end marker, closes the file and frees the recorder; *w is set
 * to NULL.  Returns TACT_OK, or the first error recording met. */
int ta_log_writer_finish(ta_log_writer_t **w, ta_error_t *err);

/* ----------------------------------------------------------------- reader */

typedef struct ta_log_record {
    ta_log_dir_t dir;
    const uint8_t *env; /* the envelope, as sent or processed */
    size_t env_len;
    const uint8_t *bulk;
    size_t bulk_len;
    size_t offset;    /* byte offset of the record in the file */
    uint64_t wall_ns; /* since the recorder started; not part of the compared payload */
} ta_log_record_t;

typedef struct ta_log_stream_info {
    uint32_t id;
    char name[64];
    size_t nrecords;
    ta_log_record_t *records;
    size_t cap_;
} ta_log_stream_info_t;

typedef struct ta_log {
    uint8_t *data; /* the whole file */
    size_t len;
    const uint8_t *header; /* the run header: a msgpack map */
    size_t header_len;
    ta_run_header_t run; /* the run header, checked */
    size_t truncated_at;   /* 0, or the offset where a log without its end marker stops */
    size_t nstreams;       /* in port id order */
    ta_log_stream_info_t *streams;
    size_t streams_cap_;
    /* Bulks stored compressed, decompressed on reading (records point
     * into them), and their bytes in all. */
    uint8_t **unpacked_;
    size_t nunpacked_, unpacked_cap_, unpacked_bytes;
} ta_log_t;

/*
 * Reads and validates a whole log: magic, version, the run header (its
 * checksum, each field's kind and range), structure, counts, each
 * record's checksum and envelope.  A log that stops without its end marker
 * (a crashed run) is read up to its last whole record, and truncated_at
 * says where it stops.  Returns TACT_OK and *out, or
 * TACT_ECORRUPT/TACT_EVERSION/TACT_EIO/TACT_ENOMEM with the byte offset of
 * the problem in err->text and *out NULL.  ta_log_parse copies buf.
 */
int ta_log_load(const char *path, ta_log_t **out, ta_error_t *err);
int ta_log_parse(const void *buf, size_t len, ta_log_t **out, ta_error_t *err);
void ta_log_free(ta_log_t **log);

/* Returns the stream recorded for port id, or NULL. */
const ta_log_stream_info_t *ta_log_find(const ta_log_t *log, uint32_t id);

/* Decodes a record's envelope into m, borrowing from the log (which must
 * outlive m).  Returns what ta_msg_decode returns. */
int ta_log_record_msg(const ta_log_record_t *r, ta_msg_t *m, ta_error_t *err);

/* Compares two logs port by port, record by record (direction, envelope,
 * bulk; not times, nor how records of different ports interleave in the
 * file).  Returns 1 when they are the same; otherwise 0, with the first
 * difference in where: preferably a port whose output differs while what it
 * processed before matched (the stage that changed), named with the record,
 * its message type and the first differing field. */
int ta_log_compare(const ta_log_t *a, const ta_log_t *b, char *where, size_t len);
/* The same for two runs whose devices were in other places (workers in one,
 * this process in the other: docs/workers.md): only the stages that run
 * with the client (client, graph, scheduler, planner, gradient engine) are
 * compared, and a CONFIG's devices without their URIs. */
int ta_log_compare_stages(const ta_log_t *a, const ta_log_t *b, char *where, size_t len);

#endif
