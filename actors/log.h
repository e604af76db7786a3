/* log.h - the message log: a recorder that streams per-port records, and a validating reader. */
#ifndef TACT_LOG_H
#define TACT_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/* File format version written by this build (docs/log-format.md). */
#define TA_LOG_VERSION 1
#define TA_LOG_MAGIC "TACTLOG"

typedef enum ta_log_dir { TA_LOG_IN = 0, TA_LOG_OUT = 1 } ta_log_dir_t;

/* ----------------------------------------------------------------- writer */

typedef struct ta_log_writer ta_log_writer_t;
typedef struct ta_log_stream ta_log_stream_t;

/* Creates a recorder that will write path at ta_log_writer_finish.  Returns
 * TACT_OK, or TACT_EIO if path cannot be created (checked now, not at the end). */
int ta_log_writer_new(ta_log_writer_t **out, const char *path, ta_error_t *err);

/* Returns the stream of port id, creating it (thread-safe); NULL on ENOMEM. */
ta_log_stream_t *ta_log_writer_stream(ta_log_writer_t *w, uint32_t id, const char *name);

/* Appends one record (what port processed or sent): env is m's encoded
 * envelope when the caller has it, or NULL to encode it here.  A stream is
 * written by one thread only.  Returns TACT_OK, TACT_ENOMEM or TACT_EIO; a
 * failed stream makes ta_log_writer_finish fail. */
int ta_log_stream_record(ta_log_stream_t *s, ta_log_dir_t dir, const ta_msg_t *m, const ta_bytes_t *env);

/* Writes the file (streams in id order, then the wall-clock section) and
 * frees the recorder; *w is set to NULL.  Returns TACT_OK or TACT_EIO. */
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
} ta_log_stream_info_t;

typedef struct ta_log {
    uint8_t *data;      /* the whole file */
    size_t len;
    size_t payload_len; /* bytes before the wall-clock section: what runs compare */
    size_t nstreams;
    ta_log_stream_info_t *streams;
} ta_log_t;

/*
 * Reads and validates a whole log: magic, version, structure, counts, each
 * record's checksum and envelope.  Returns TACT_OK and *out, or
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

#endif
