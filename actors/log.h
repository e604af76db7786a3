/* log.h - the message log: a recorder that streams per-port records, and a validating reader. */
#ifndef TACT_LOG_H
#define TACT_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/* File format version written by this build (docs/log-format.md). */
#define TA_LOG_VERSION 3
#define TA_LOG_MAGIC "TACTLOG"

typedef enum ta_log_dir { TA_LOG_IN = 0, TA_LOG_OUT = 1 } ta_log_dir_t;

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
    size_t truncated_at;   /* 0, or the offset where a log without its end marker stops */
    size_t nstreams;       /* in port id order */
    ta_log_stream_info_t *streams;
    size_t streams_cap_;
} ta_log_t;

/*
 * Reads and validates a whole log: magic, version, structure, counts, each
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

#endif
