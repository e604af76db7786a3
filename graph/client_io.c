/* client_io.c - files: IDX datasets (the MNIST family's format, gzipped or not) and safetensors model files, every
 * header field, offset and byte count checked before anything is trusted. */
#define _GNU_SOURCE /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "client_core.h"
#include "file.h"
#include "mem.h"

/* The IDX element types: the third magic byte, its dtype and size. */
static int s_idx_type(int code, tact_dtype *d) {
    switch (code) {
    case 0x08: *d = TACT_UINT8; return 1;
    case 0x09: *d = TACT_INT8; return 1;
    case 0x0B: *d = TACT_INT16; return 2;
    case 0x0C: *d = TACT_INT32; return 4;
    case 0x0D: *d = TACT_FLOAT32; return 4;
    case 0x0E: *d = TACT_FLOAT64; return 8;
    default: return 0;
    }
}

enum { S_IDX_MAX_BYTES = 1 << 30 }; /* a dataset file larger than 1 GiB is refused, not read */

/* Reads exactly n bytes; 0 when the file ends (or fails) first. */
static int s_read(gzFile f, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        unsigned chunk = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got <= 0) return 0;
        p += got, n -= (size_t)got;
    }
    return 1;
}

/* Why a read came short: zlib's error (corrupt compressed data), or the end. */
static const char *s_why(gzFile f) {
    int code = Z_OK;
    const char *msg = gzerror(f, &code);
    return code != Z_OK && code != Z_STREAM_END && msg && *msg ? msg : "truncated";
}

ti_tensor_t *ti_load_idx(ti_ctx_t *ctx, const char *path) {
    if (!ctx || !path) return ti_null_arg();
    ta_error_t ferr;
    int fd = ta_file_open(path, 0, 0, "load_idx", &ferr);
    if (fd < 0) return tc_error(ctx, TACT_EINVAL, "%s", ferr.text);
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return tc_error(ctx, TACT_ENOMEM, "load_idx: %s: out of memory", path);
    }
    ti_tensor_t *r = NULL;
    uint8_t head[4], dimbytes[4 * 16];
    uint8_t *data = NULL;
    if (!s_read(f, head, 4)) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: shorter than an IDX header (4 bytes): %s", path, s_why(f));
        goto done;
    }
    tact_dtype d;
    int size = s_idx_type(head[2], &d), ndim = head[3];
    if (head[0] || head[1] || !size || ndim < 1 || ndim > 16) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: not an IDX file (magic %02x %02x %02x %02x: 0 0, a type of 08, 09, 0b, 0c, 0d or 0e, 1 to 16 dims)", path,
                     head[0], head[1], head[2], head[3]);
        goto done;
    }
    if (!s_read(f, dimbytes, 4 * (size_t)ndim)) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: %s in its %d dims", path, s_why(f), ndim);
        goto done;
    }
    int64_t shape[16], total = size;
    for (int k = 0; k < ndim; k++) {
        const uint8_t *b = dimbytes + 4 * k;
        shape[k] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
        if (shape[k] && total > S_IDX_MAX_BYTES / shape[k]) {
            r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: dims of more than %d bytes", path, S_IDX_MAX_BYTES);
            goto done;
        }
        total *= shape[k];
    }
    /* The buffer grows with the data that actually comes (a few bytes that
     * promise a gigabyte get no gigabyte), at most to what the dims say. */
    size_t have = 0, cap = 0;
    while (have < (size_t)total) {
        size_t want = cap ? cap * 2 : 1 << 20;
        if (want > (size_t)total) want = (size_t)total;
        uint8_t *grown = ta_realloc(data, want);
        if (!grown) {
            r = tc_error(ctx, TACT_ENOMEM, "load_idx: %s: out of memory for %" PRId64 " bytes", path, total);
            goto done;
        }
        data = grown, cap = want;
        if (!s_read(f, data + have, cap - have)) {
            r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: %s: the header promises %" PRId64 " bytes of data", path, s_why(f), total);
            goto done;
        }
        have = cap;
    }
    uint8_t extra;
    if (gzread(f, &extra, 1) != 0) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: data past the %" PRId64 " bytes its header promises (or a read error)", path, total);
        goto done;
    }
    /* Big-endian elements to the host's order. */
    for (int64_t i = 0; size > 1 && i < total; i += size)
        for (int a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = data[i + a];
            data[i + a] = data[i + b], data[i + b] = t;
        }
    r = ti_from_data(ctx, d, ndim, shape, data);
done:
    gzclose(f);
    ta_free(data);
    return r;
}

/* ------------------------------------------------------------ safetensors */

/* The format (huggingface's safetensors): an 8-byte little-endian header
 * length N, N bytes of JSON ({"name": {"dtype": "F32", "shape": [2, 3],
 * "data_offsets": [begin, end]}, ..., optionally "__metadata__": {string:
 * string}}), then the data, offsets relative to its start. */

static const char *const s_st_names[TACT_DTYPE_COUNT] = {"BOOL", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "BF16", "F32", "F64"};

enum { S_ST_MAX_HEADER = 100 << 20 }; /* the reference implementation's limit (tact.h states it) */

/* A bounded reader of the JSON header (no recursion: the format's nesting
 * is fixed). */
typedef struct {
    const char *p, *end;
    const char *err;
} s_json_t;

static void s_ws(s_json_t *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int s_lit(s_json_t *j, char c) {
    s_ws(j);
    if (j->p < j->end && *j->p == c) return j->p++, 1;
    return 0;
}

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF. */
static int s_utf8(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || (size_t)len > n) return 0;
    unsigned v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (p[i] & 0x3f);
    }
    static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    return len;
}

/* Four hex digits of a \u escape into *v; 0 when they are not. */
static int s_hex4(s_json_t *j, unsigned *v) {
    if (j->end - j->p < 4) return 0;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char h = *j->p++;
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (unsigned)d;
    }
    return 1;
}

/* A string into out (at most cap - 1 bytes, escapes decoded, \u to UTF-8),
 * or only checked when out is NULL.  The bytes must be UTF-8, as the
 * format requires, and a name may hold no NUL ("a\u0000b" would match
 * "a" in C). */
static int s_str(s_json_t *j, char *out, size_t cap) {
    if (!s_lit(j, '"')) return j->err = "a string expected", 0;
    size_t n = 0;
    while (j->p < j->end && *j->p != '"') {
        unsigned char u[4];
        int k = 1;
        unsigned c = (unsigned char)*j->p;
        if (c < 0x20) return j->err = "a control character in a string", 0;
        if (c == '\\') {
            if (++j->p >= j->end) break;
            char e = *j->p++;
            if (e == 'u') {
                unsigned v, lo;
                if (!s_hex4(j, &v)) return j->err = "a bad \\u escape", 0;
                if (v >= 0xdc00 && v <= 0xdfff) return j->err = "a \\u escape of a lone surrogate", 0;
                if (v >= 0xd800 && v <= 0xdbff) { /* a pair: \uD83D\uDE00 */
                    if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u' || (j->p += 2, !s_hex4(j, &lo)) || lo < 0xdc00 || lo > 0xdfff)
                        return j->err = "a \\u escape of a lone surrogate", 0;
                    v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                }
                if (!v) return j->err = "a NUL (\\u0000) in a string", 0;
                k = v < 0x80 ? (u[0] = (unsigned char)v, 1)
                    : v < 0x800 ? (u[0] = (unsigned char)(0xc0 | v >> 6), u[1] = (unsigned char)(0x80 | (v & 63)), 2)
                    : v < 0x10000 ? (u[0] = (unsigned char)(0xe0 | v >> 12), u[1] = (unsigned char)(0x80 | (v >> 6 & 63)), u[2] = (unsigned char)(0x80 | (v & 63)), 3)
                                  : (u[0] = (unsigned char)(0xf0 | v >> 18), u[1] = (unsigned char)(0x80 | (v >> 12 & 63)),
                                     u[2] = (unsigned char)(0x80 | (v >> 6 & 63)), u[3] = (unsigned char)(0x80 | (v & 63)), 4);
            } else {
                const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *at = strchr(from, e);
                if (!e || !at) return j->err = "a bad escape", 0;
                u[0] = (unsigned char)to[at - from];
            }
        } else {
            if (!(k = s_utf8((const unsigned char *)j->p, (size_t)(j->end - j->p)))) return j->err = "a string that is not UTF-8", 0;
            memcpy(u, j->p, (size_t)k);
            j->p += k;
        }
        if (out && n + (size_t)k >= cap) return j->err = "a string too long", 0;
        if (out) memcpy(out + n, u, (size_t)k);
        n += (size_t)k;
    }
    if (!s_lit(j, '"')) return j->err = "an unterminated string", 0;
    if (out) out[n] = 0;
    return 1;
}

static int s_uint(s_json_t *j, uint64_t *v) {
    s_ws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return j->err = "a non-negative integer expected", 0;
    uint64_t x = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (x > (UINT64_MAX - 9) / 10) return j->err = "an integer too large", 0;
        x = x * 10 + (uint64_t)(*j->p++ - '0');
    }
    *v = x;
    return 1;
}

/* Skips a string-to-string object (__metadata__). */
static int s_skip_meta(s_json_t *j) {
    if (!s_lit(j, '{')) return j->err = "__metadata__ must be an object", 0;
    if (s_lit(j, '}')) return 1;
    do {
        if (!s_str(j, NULL, 0) || !s_lit(j, ':') || !s_str(j, NULL, 0)) return j->err ? 0 : (j->err = "a bad __metadata__ entry", 0);
    } while (s_lit(j, ','));
    return s_lit(j, '}') ? 1 : (j->err = "an unterminated __metadata__", 0);
}

typedef struct {
    int dtype;
    int ndim;
    int64_t shape[TA_MAX_DIMS];
    uint64_t begin, end;
} s_entry_t;

/* One tensor's entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}. */
static int s_entry(s_json_t *j, s_entry_t *e) {
    char key[64], val[16];
    int have = 0;
    if (!s_lit(j, '{')) return j->err = "an entry must be an object", 0;
    do {
        if (!s_str(j, key, sizeof key) || !s_lit(j, ':')) return j->err ? 0 : (j->err = "a bad entry", 0);
        int bit = !strcmp(key, "dtype") ? 1 : !strcmp(key, "shape") ? 2 : !strcmp(key, "data_offsets") ? 4 : 0;
        if (have & bit) return j->err = "a key given twice in an entry", 0;
        if (!strcmp(key, "dtype")) {
            if (!s_str(j, val, sizeof val)) return 0;
            e->dtype = -1;
            for (int d = 0; d < TACT_DTYPE_COUNT; d++)
                if (!strcmp(val, s_st_names[d])) e->dtype = d;
            if (e->dtype < 0) return j->err = "an unknown dtype", 0;
            have |= 1;
        } else if (!strcmp(key, "shape")) {
            if (!s_lit(j, '[')) return j->err = "shape must be an array", 0;
            e->ndim = 0;
            if (!s_lit(j, ']')) {
                do {
                    uint64_t v;
                    if (e->ndim >= TA_MAX_DIMS) return j->err = "a shape of too many dims", 0;
                    if (!s_uint(j, &v)) return 0;
                    if (v > ((uint64_t)1 << 40)) return j->err = "a dim too large", 0;
                    e->shape[e->ndim++] = (int64_t)v;
                } while (s_lit(j, ','));
                if (!s_lit(j, ']')) return j->err = "an unterminated shape", 0;
            }
            have |= 2;
        } else if (!strcmp(key, "data_offsets")) {
            if (!s_lit(j, '[') || !s_uint(j, &e->begin) || !s_lit(j, ',') || !s_uint(j, &e->end) || !s_lit(j, ']'))
                return j->err ? 0 : (j->err = "data_offsets must be [begin, end]", 0);
            have |= 4;
        } else {
            return j->err = "an unknown key in an entry", 0;
        }
    } while (s_lit(j, ','));
    if (!s_lit(j, '}')) return j->err = "an unterminated entry", 0;
    if (have != 7) return j->err = "an entry without dtype, shape or data_offsets", 0;
    return 1;
}

/* Where each tensor's bytes lie, to check the layout as a whole. */
typedef struct {
    uint64_t begin, end;
    size_t name, name_len; /* in the names arena */
} s_span_t;

static int s_by_name(const void *a, const void *b, void *names) {
    const s_span_t *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp((const char *)names + x->name, (const char *)names + y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}
static int s_by_offset(const void *a, const void *b, void *unused) {
    (void)unused;
    const s_span_t *x = a, *y = b;
    return x->begin != y->begin ? (x->begin > y->begin) - (x->begin < y->begin) : (x->end > y->end) - (x->end < y->end);
}

/* Checks what the format requires of the tensors together: unique names,
 * and data that the tensors cover exactly (in offset order, each starting
 * where the one before ends, the last ending where the file does); the
 * error, naming the tensors, goes into why. */
static int s_layout(s_span_t *sp, size_t n, const char *names, uint64_t datalen, char *why, size_t len) {
    if (n > 1) qsort_r(sp, n, sizeof *sp, s_by_name, (void *)names);
    char shown[256]; /* names from the file, as a terminal may print them */
    for (size_t i = 1; i < n; i++)
        if (!s_by_name(&sp[i - 1], &sp[i], (void *)names))
            return snprintf(why, len, "the name \"%s\" is given twice", ta_printable(names + sp[i].name, sp[i].name_len, shown, 200)), 0;
    if (n > 1) qsort_r(sp, n, sizeof *sp, s_by_offset, NULL);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *nm = ta_printable(names + sp[i].name, sp[i].name_len, shown, 200);
        if (sp[i].begin < at)
            return snprintf(why, len, "the data of \"%s\" (bytes %" PRIu64 " to %" PRIu64 ") overlaps the tensor before it", nm, sp[i].begin, sp[i].end), 0;
        if (sp[i].begin > at)
            return snprintf(why, len, "bytes %" PRIu64 " to %" PRIu64 " of the data belong to no tensor (before \"%s\")", at, sp[i].begin, nm), 0;
        at = sp[i].end;
    }
    if (at != datalen) return snprintf(why, len, "the data holds %" PRIu64 " bytes, the tensors cover %" PRIu64 " (trailing bytes)", datalen, at), 0;
    return 1;
}

ti_tensor_t *ti_load_safetensors(ti_ctx_t *ctx, const char *path, const char *name) {
    if (!ctx || !path || !name) return ti_null_arg();
    ta_error_t ferr;
    FILE *f = ta_file_fopen(path, 0, 0, "load_safetensors", &ferr);
    if (!f) return tc_error(ctx, ferr.code == TACT_ENOMEM ? TACT_ENOMEM : TACT_EINVAL, "%s", ferr.text);
    ti_tensor_t *r = NULL;
    char *head = NULL, *names = NULL;
    s_span_t *spans = NULL;
    size_t nspans = 0, spans_cap = 0, names_len = 0, names_cap = 0;
    uint8_t *data = NULL;
    uint8_t len8[8];
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 8 || fseek(f, 0, SEEK_SET) != 0 || fread(len8, 1, 8, f) != 8) {
        r = tc_error(ctx, TACT_EINVAL, "load_safetensors: %s: shorter than a safetensors header", path);
        goto done;
    }
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | len8[i];
    if (hn == 0 || hn > S_ST_MAX_HEADER || hn > (uint64_t)size - 8) {
        r = tc_error(ctx, TACT_EINVAL, "load_safetensors: %s: a header of %llu bytes in a file of %ld (at most %d)", path, (unsigned long long)hn,
                     size, S_ST_MAX_HEADER);
        goto done;
    }
    if (!(head = ta_malloc((size_t)hn)) || fread(head, 1, (size_t)hn, f) != hn) {
        r = tc_error(ctx, head ? TACT_EINVAL : TACT_ENOMEM, "load_safetensors: %s: %s", path, head ? "truncated header" : "out of memory");
        goto done;
    }
    uint64_t datalen = (uint64_t)size - 8 - hn;
    s_json_t j = {head, head + hn, NULL};
    s_entry_t found = {0}, e;
    int got = 0, oom = 0, meta = 0;
    char key[1024], why[400] = "";
    if (!s_lit(&j, '{')) j.err = "the header is not a JSON object";
    else if (!s_lit(&j, '}')) {
        do {
            if (!s_str(&j, key, sizeof key) || !s_lit(&j, ':')) {
                if (!j.err) j.err = "a bad key";
                break;
            }
            if (!strcmp(key, "__metadata__")) {
                if (meta++) j.err = "__metadata__ given twice";
                if (j.err || !s_skip_meta(&j)) break;
                continue;
            }
            memset(&e, 0, sizeof e);
            if (!s_entry(&j, &e)) break;
            uint64_t n = ta_dtype_size((tact_dtype)e.dtype);
            for (int k = 0; k < e.ndim; k++) n = e.shape[k] && n > UINT64_MAX / (uint64_t)e.shape[k] ? UINT64_MAX : n * (uint64_t)e.shape[k];
            if (e.begin > e.end || e.end > datalen || e.end - e.begin != n) {
                char shown[256];
                snprintf(why, sizeof why, "the data_offsets of \"%s\" ([%" PRIu64 ", %" PRIu64 "]) do not match its dtype and shape (%" PRIu64
                         " bytes) within the %" PRIu64 " bytes of data", ta_printable(key, strlen(key), shown, 200), e.begin, e.end, n, datalen);
                break;
            }
            size_t kl = strlen(key);
            if (ta_grow((void **)&spans, &spans_cap, nspans + 1, sizeof *spans) != TACT_OK ||
                ta_grow((void **)&names, &names_cap, names_len + kl + 1, 1) != TACT_OK) {
                oom = 1;
                break;
            }
            memcpy(names + names_len, key, kl);
            spans[nspans++] = (s_span_t){e.begin, e.end, names_len, kl};
            names_len += kl;
            if (!strcmp(key, name)) found = e, got = 1;
        } while (s_lit(&j, ','));
        if (!j.err && !why[0] && !oom && !s_lit(&j, '}')) j.err = "an unterminated header";
    }
    if (!j.err && !why[0] && !oom) {
        s_ws(&j);
        if (j.p != j.end) j.err = "bytes after the header's object";
    }
    if (oom) {
        r = tc_error(ctx, TACT_ENOMEM, "load_safetensors: %s: out of memory for its header's %zu tensors", path, nspans);
        goto done;
    }
    if (j.err) {
        r = tc_error(ctx, TACT_EINVAL, "load_safetensors: %s: %s (at header byte %td)", path, j.err, j.p - head);
        goto done;
    }
    if (why[0] || !s_layout(spans, nspans, names, datalen, why, sizeof why)) {
        r = tc_error(ctx, TACT_EINVAL, "load_safetensors: %s: %s", path, why);
        goto done;
    }
    if (!got) {
        r = tc_error(ctx, TACT_EINVAL, "load_safetensors: %s holds no tensor named \"%s\"", path, name);
        goto done;
    }
    uint64_t nb = found.end - found.begin;
    if (!(data = ta_malloc(nb ? (size_t)nb : 1))) {
        r = tc_error(ctx, TACT_ENOMEM, "load_safetensors: %s: out of memory for %llu bytes", path, (unsigned long long)nb);
        goto done;
    }
    if (fseek(f, (long)(8 + hn + found.begin), SEEK_SET) != 0 || fread(data, 1, (size_t)nb, f) != nb) {
        r = tc_error(ctx, TACT_EINVAL, "load_safetensors: %s: cannot read the data of \"%s\"", path, name);
        goto done;
    }
    r = ti_from_data(ctx, (tact_dtype)found.dtype, found.ndim, found.shape, data); /* little-endian data, as the host */
done:
    fclose(f);
    ta_free(head);
    ta_free(names);
    ta_free(spans);
    ta_free(data);
    return r;
}

/* Appends to a growing buffer; 0 when out of memory. */
typedef struct {
    char *p;
    size_t n, cap;
} s_buf_t;

static int s_add(s_buf_t *b, const void *bytes, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n) cap *= 2;
        char *q = ta_realloc(b->p, cap);
        if (!q) return 0;
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, bytes, n);
    b->n += n;
    return 1;
}

static int s_addf(s_buf_t *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < sizeof tmp && s_add(b, tmp, (size_t)n);
}

int ti_save_safetensors(ti_ctx_t *ctx, const char *path, int n, const char *const *names, ti_tensor_t *const *ts) {
    if (!ctx) return TACT_EINVAL;
    if (!path || n < 0 || (n && (!names || !ts))) {
        ti_ctx_set_error(ctx, "save_safetensors: a NULL path, names or tensors, or a negative count");
        return TACT_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (!ts[i] || ti_status_of(ts[i])) {
            ti_ctx_set_error(ctx, ts[i] ? ti_error_message(ts[i]) : "save_safetensors: a NULL tensor");
            return ts[i] ? ti_status_of(ts[i]) : TACT_EINVAL;
        }
        if (!names[i] || !*names[i] || strlen(names[i]) > 1000 || !strcmp(names[i], "__metadata__")) {
            ti_ctx_set_error(ctx, "save_safetensors: names must be 1 to 1000 bytes, not __metadata__");
            return TACT_EINVAL;
        }
        for (int k = 0; k < i; k++)
            if (!strcmp(names[k], names[i])) {
                ti_ctx_set_error(ctx, "save_safetensors: two tensors with one name");
                return TACT_EINVAL;
            }
    }
    s_buf_t h = {0}, d = {0};
    int rc = TACT_OK, ok = s_add(&h, "{", 1);
    for (int i = 0; i < n && ok && rc == TACT_OK; i++) {
        size_t bytes = (size_t)ti_numel(ts[i]) * ta_dtype_size(ti_dtype_of(ts[i]));
        size_t at = d.n;
        if (bytes) { /* room for the bytes, then the tensor read into it */
            char *zero = ta_calloc(1, bytes);
            ok = zero && s_add(&d, zero, bytes);
            ta_free(zero);
            if (ok) rc = ti_read(ts[i], d.p + at, bytes);
        }
        ok = ok && s_addf(&h, "%s\"", i ? "," : "");
        for (const char *c = names[i]; ok && *c; c++) { /* the name, escaped */
            unsigned u = (unsigned char)*c;
            ok = u == '"' || u == '\\' ? s_addf(&h, "\\%c", u) : u < 0x20 ? s_addf(&h, "\\u%04x", u) : s_add(&h, c, 1);
        }
        ok = ok && s_addf(&h, "\":{\"dtype\":\"%s\",\"shape\":[", s_st_names[ti_dtype_of(ts[i])]);
        for (int k = 0; ok && k < ti_ndim(ts[i]); k++) ok = s_addf(&h, "%s%" PRId64, k ? "," : "", ti_dim(ts[i], k));
        ok = ok && s_addf(&h, "],\"data_offsets\":[%zu,%zu]}", at, at + bytes);
    }
    ok = ok && s_add(&h, "}", 1);
    while (ok && h.n % 8) ok = s_add(&h, " ", 1); /* the data starts 8-aligned, as the reference writer's */
    if (rc == TACT_OK && !ok) {
        ti_ctx_set_error(ctx, "save_safetensors: out of memory");
        rc = TACT_ENOMEM;
    }
    if (rc == TACT_OK) { /* written to a temporary file, then renamed over path */
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
        ta_error_t ferr = {TACT_EIO, ""};
        FILE *f = ta_file_fopen(tmp, 1, 0666, "save_safetensors", &ferr);
        uint8_t len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
        int wrote = f && fwrite(len8, 1, 8, f) == 8 && fwrite(h.p, 1, h.n, f) == h.n && (!d.n || fwrite(d.p, 1, d.n, f) == d.n);
        if (f && fclose(f) != 0) wrote = 0;
        if (!wrote || rename(tmp, path) != 0) {
            char msg[600];
            snprintf(msg, sizeof msg, "save_safetensors: cannot write %s: %s", path, !f ? ferr.text : strerror(errno));
            ti_ctx_set_error(ctx, msg);
            if (f) remove(tmp);
            rc = TACT_EINVAL;
        }
    }
    ta_free(h.p), ta_free(d.p);
    return rc;
}
