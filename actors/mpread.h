/* mpread.h - a bounds-checked msgpack reader that never allocates, for decoding untrusted bytes. */
#ifndef TACT_MPREAD_H
#define TACT_MPREAD_H

#include <stddef.h>
#include <stdint.h>

/*
 * msgpack-c packs everything tact sends.  Its unpacker, though, allocates an
 * array's elements as soon as it reads the header, so five hostile bytes can
 * ask for gigabytes.  tact's decoders know the schema they expect, so they
 * pull values with this reader instead: every read checks the bytes left and
 * reports the offset where a value was expected.
 */
typedef struct ta_mpr {
    const uint8_t *start;
    const uint8_t *p;
    const uint8_t *end;
} ta_mpr_t;

void ta_mpr_init(ta_mpr_t *r, const void *buf, size_t len);

/* Current offset from the start of the buffer. */
size_t ta_mpr_offset(const ta_mpr_t *r);

/* Each read returns 0 and advances, or -1 leaving the reader where it was
 * (wrong type, or the value runs past the end). */
int ta_mpr_array(ta_mpr_t *r, uint32_t *count);
int ta_mpr_map(ta_mpr_t *r, uint32_t *pairs); /* a map header: pairs key/value pairs follow */
int ta_mpr_u64(ta_mpr_t *r, uint64_t *v);
int ta_mpr_i64(ta_mpr_t *r, int64_t *v);
int ta_mpr_f64(ta_mpr_t *r, double *v);
int ta_mpr_str(ta_mpr_t *r, const uint8_t **ptr, size_t *len);
int ta_mpr_bin(ta_mpr_t *r, const uint8_t **ptr, size_t *len);
/* ta_mpr_u64 with the usual encodings of an unsigned integer read inline,
 * for loops over long id arrays. */
static inline int ta_mpr_u64_fast(ta_mpr_t *r, uint64_t *v) {
    const uint8_t *p = r->p;
    size_t left = (size_t)(r->end - p);
    if (left >= 1 && p[0] < 0x80) {
        *v = p[0];
        r->p += 1;
        return 0;
    }
    if (left >= 3 && p[0] == 0xcd) {
        *v = (uint64_t)p[1] << 8 | p[2];
        r->p += 3;
        return 0;
    }
    if (left >= 5 && p[0] == 0xce) {
        *v = (uint64_t)p[1] << 24 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 8 | p[4];
        r->p += 5;
        return 0;
    }
    return ta_mpr_u64(r, v);
}

/* ta_mpr_i64 with fixints (the usual shape, stride and argument) read inline. */
static inline int ta_mpr_i64_fast(ta_mpr_t *r, int64_t *v) {
    if (r->p < r->end && (r->p[0] < 0x80 || r->p[0] >= 0xe0)) {
        *v = (int8_t)r->p[0];
        r->p += 1;
        return 0;
    }
    return ta_mpr_i64(r, v);
}

/* ta_mpr_array with a fixarray header read inline. */
static inline int ta_mpr_array_fast(ta_mpr_t *r, uint32_t *count) {
    if (r->p < r->end && (r->p[0] & 0xf0) == 0x90) {
        *count = r->p[0] & 0x0f;
        r->p += 1;
        return 0;
    }
    return ta_mpr_array(r, count);
}

/* Skips one whole value of any type (nesting at most 64 deep), checking it
 * is well formed and within the buffer; returns 0, or -1 leaving r in place. */
int ta_mpr_skip(ta_mpr_t *r);
/* Reads nil and returns 1, or returns 0 without moving when the next value is not nil. */
int ta_mpr_nil(ta_mpr_t *r);

#endif
