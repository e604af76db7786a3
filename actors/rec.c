/* rec.c - the records inside payloads: one codec, check, comparison and dump, all driven by the tables in msg.h. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "mpread.h"
#include "msg.h"

/* ---------------------------------------------------------------- schema */

enum { S_U64 = TA_RK_U64, S_I64 = TA_RK_I64, S_MP = TA_RK_MP, S_U64S = TA_RK_U64S, S_U64A = TA_RK_U64A, S_I64A = TA_RK_I64A, S_RECS = TA_RK_RECS, S_STR = TA_RK_STR };
typedef ta_rec_field_t s_field_t;

typedef struct {
    const char *name;
    size_t size;
    const s_field_t *fields;
    size_t nfields;
} s_type_t;

#define S_RF_U64(T, field) {#field, S_U64, offsetof(T, field), 0, 0, -1},
#define S_RF_I64(T, field) {#field, S_I64, offsetof(T, field), 0, 0, -1},
#define S_RF_MP(T, field) {#field, S_MP, offsetof(T, field), 0, 0, -1},
#define S_RF_STR(T, field) {#field, S_STR, offsetof(T, field), 0, 0, -1},
#define S_RF_U64S(T, field) {#field, S_U64S, offsetof(T, field), 0, 0, -1},
#define S_RF_U64A(T, field, ARG) {#field, S_U64A, offsetof(T, field), offsetof(T, n_##field), ARG, -1},
#define S_RF_I64A(T, field, ARG) {#field, S_I64A, offsetof(T, field), offsetof(T, n_##field), ARG, -1},
#define S_RF_RECS(T, field, ARG) {#field, S_RECS, offsetof(T, field), 0, 0, TA_REC_##ARG},
#define S_RF(R, KIND, ...) S_RF_##KIND(ta_##R##_rec_t, __VA_ARGS__)
#define S_FIELDS(NAME, name) static const s_field_t s_fields_##name[] = {TA_REC_FIELDS_##NAME(S_RF, name)};
TA_REC_LIST(S_FIELDS)
#undef S_FIELDS

static const s_type_t s_types[TA_REC__COUNT] = {
#define S_TYPE(NAME, name) {#NAME, sizeof(ta_##name##_rec_t), s_fields_##name, sizeof s_fields_##name / sizeof s_fields_##name[0]},
    TA_REC_LIST(S_TYPE)
#undef S_TYPE
};

/* Lists nest only as deep as the tables do (an AST's view stacks' views);
 * this bound makes that visible to the checks, which recurse by type. */
enum { S_MAX_DEPTH = 4 };

const char *ta_rec_type_name(int type) { return type >= 0 && type < TA_REC__COUNT ? s_types[type].name : "?"; }

const ta_rec_field_t *ta_rec_fields(ta_rec_type_t type, size_t *n) {
    *n = s_types[type].nfields;
    return s_types[type].fields;
}

size_t ta_rec_size(ta_rec_type_t type) { return s_types[type].size; }

ta_recs_t ta_recs(ta_rec_type_t type, const void *vals, size_t n) {
    ta_recs_t a = {(int)type, vals, (uint32_t)n, {NULL, 0}};
    return a;
}

ta_recs_t ta_recs_raw(ta_rec_type_t type, const void *bytes, size_t len, size_t n) {
    ta_recs_t a = {(int)type, NULL, (uint32_t)n, {(const uint8_t *)bytes, len}};
    return a;
}

/* ------------------------------------------------------------- encoding */

static int s_append(msgpack_packer *pk, const uint8_t *p, size_t n) { return n ? pk->callback(pk->data, (const char *)p, n) : 0; }

int ta_recs_pack_header(msgpack_packer *pk, size_t n) { return msgpack_pack_array(pk, n) ? -1 : 0; }

/* A record (or an id list) is packed into a buffer on the stack (or, when it does not fit,
 * a larger one), with inline writes, and handed to the packer in one call
 * (one call per value cost the graph more than adding the ops).  The forms
 * are msgpack-c's own (the shortest for integers; test_rec compares the
 * bytes with msgpack-c's). */
typedef struct {
    uint8_t *p, *end;
    int full; /* a write did not fit */
} s_w_t;

enum { S_W_BYTES = 4096 };

static inline int s_w_put(s_w_t *w, const void *b, size_t n) {
    if (!n) return 0; /* b may be NULL */
    if ((size_t)(w->end - w->p) < n) return w->full = 1, -1;
    memcpy(w->p, b, n);
    w->p += n;
    return 0;
}

/* A tag and the low `width` bytes of v, big-endian. */
static inline int s_w_tagged(s_w_t *w, uint8_t tag, uint64_t v, int width) {
    if (w->end - w->p < 1 + width) return w->full = 1, -1;
    *w->p++ = tag;
    for (int k = width - 1; k >= 0; k--) *w->p++ = (uint8_t)(v >> (8 * k));
    return 0;
}

static inline int s_w_u64(s_w_t *w, uint64_t d) {
    if (d < 128) return s_w_tagged(w, (uint8_t)d, 0, 0);
    if (d < 256) return s_w_tagged(w, 0xcc, d, 1);
    if (d < 65536) return s_w_tagged(w, 0xcd, d, 2);
    if (d < (UINT64_C(1) << 32)) return s_w_tagged(w, 0xce, d, 4);
    return s_w_tagged(w, 0xcf, d, 8);
}

static inline int s_w_i64(s_w_t *w, int64_t d) {
    if (d >= 0) return s_w_u64(w, (uint64_t)d);
    if (d >= -32) return s_w_tagged(w, (uint8_t)d, 0, 0);
    if (d >= -128) return s_w_tagged(w, 0xd0, (uint64_t)d, 1);
    if (d >= -32768) return s_w_tagged(w, 0xd1, (uint64_t)d, 2);
    if (d >= INT64_C(-2147483648)) return s_w_tagged(w, 0xd2, (uint64_t)d, 4);
    return s_w_tagged(w, 0xd3, (uint64_t)d, 8);
}

static inline int s_w_array(s_w_t *w, uint64_t n) {
    if (n < 16) return s_w_tagged(w, (uint8_t)(0x90 | n), 0, 0);
    if (n < 65536) return s_w_tagged(w, 0xdc, n, 2);
    return n <= UINT32_MAX ? s_w_tagged(w, 0xdd, n, 4) : -1;
}

static inline int s_w_bin(s_w_t *w, uint64_t n) {
    if (n < 256) return s_w_tagged(w, 0xc4, n, 1);
    if (n < 65536) return s_w_tagged(w, 0xc5, n, 2);
    return n <= UINT32_MAX ? s_w_tagged(w, 0xc6, n, 4) : -1;
}

static inline int s_w_str(s_w_t *w, uint64_t n) {
    if (n < 32) return s_w_tagged(w, (uint8_t)(0xa0 | n), 0, 0);
    if (n < 256) return s_w_tagged(w, 0xd9, n, 1);
    return n < 65536 ? s_w_tagged(w, 0xda, n, 2) : -1;
}

/* A record string: printable ASCII, at most TA_REC_MAX_STR bytes. */
static int s_str_ok(const ta_bytes_t *b) {
    if (b->len > TA_REC_MAX_STR) return 0;
    for (size_t k = 0; k < b->len; k++)
        if (b->ptr[k] < 0x20 || b->ptr[k] > 0x7e) return 0;
    return 1;
}

static int s_w_u64s(s_w_t *w, const ta_u64s_t *a) {
    if (a->raw.len) return s_w_put(w, a->raw.ptr, a->raw.len);
    int bad = s_w_array(w, a->n);
    for (uint32_t k = 0; !bad && k < a->n; k++) bad = s_w_u64(w, a->vals[k]);
    return bad;
}

/* -1: it does not fit (w->full), or a list's type or a count is wrong. */
static int s_w_rec(s_w_t *w, ta_rec_type_t type, const void *rec) {
    const s_type_t *t = &s_types[type];
    int bad = s_w_array(w, t->nfields);
    for (size_t i = 0; !bad && i < t->nfields; i++) {
        const s_field_t *f = &t->fields[i];
        const char *p = (const char *)rec + f->off;
        switch (f->kind) {
        case S_U64: bad = s_w_u64(w, *(const uint64_t *)p); break;
        case S_I64: bad = s_w_i64(w, *(const int64_t *)p); break;
        case S_MP: {
            const ta_bytes_t *b = (const ta_bytes_t *)p;
            bad = s_w_bin(w, b->len) || s_w_put(w, b->ptr, b->len);
            break;
        }
        case S_STR: {
            const ta_bytes_t *b = (const ta_bytes_t *)p;
            bad = !s_str_ok(b) || s_w_str(w, b->len) || s_w_put(w, b->ptr, b->len);
            break;
        }
        case S_U64S: bad = s_w_u64s(w, (const ta_u64s_t *)p); break;
        case S_U64A:
        case S_I64A: {
            uint32_t n = *(const uint32_t *)((const char *)rec + f->count_off);
            bad = n > f->cap || s_w_array(w, n);
            for (uint32_t k = 0; !bad && k < n; k++)
                bad = f->kind == S_U64A ? s_w_u64(w, ((const uint64_t *)p)[k]) : s_w_i64(w, ((const int64_t *)p)[k]);
            break;
        }
        case S_RECS: {
            const ta_recs_t *a = (const ta_recs_t *)p;
            if ((a->n || a->raw.len) && a->type != f->sub) return -1;
            if (a->raw.len) {
                bad = s_w_put(w, a->raw.ptr, a->raw.len);
                break;
            }
            bad = s_w_array(w, a->n);
            for (uint32_t k = 0; !bad && k < a->n; k++) bad = s_w_rec(w, (ta_rec_type_t)a->type, (const char *)a->vals + (size_t)k * s_types[a->type].size);
            break;
        }
        }
    }
    return bad ? -1 : 0;
}

/* Writes with write(w, type, what) into the stack's buffer, or a larger
 * one when it does not fit, and hands the bytes to pk. */
static int s_pack_with(int (*write)(s_w_t *w, ta_rec_type_t type, const void *what), ta_rec_type_t type, const void *what,
                       msgpack_packer *pk) {
    uint8_t stack[S_W_BYTES], *buf = stack;
    size_t cap = sizeof stack;
    for (;;) {
        s_w_t w = {buf, buf + cap, 0};
        int bad = write(&w, type, what);
        if (!bad) bad = s_append(pk, buf, (size_t)(w.p - buf));
        if (buf != stack) ta_free(buf);
        if (!bad || !w.full) return bad ? -1 : 0; /* packed, or a count over its bound */
        /* A record larger than the stack's buffer: in one 4 times larger. */
        if (cap > SIZE_MAX / 4 || !(buf = ta_malloc(cap *= 4))) return -1;
    }
}

static int s_write_u64s(s_w_t *w, ta_rec_type_t type, const void *a) { return (void)type, s_w_u64s(w, a); }

int ta_rec_pack(ta_rec_type_t type, const void *rec, msgpack_packer *pk) { return s_pack_with(s_w_rec, type, rec, pk); }
int ta_u64s_pack(const ta_u64s_t *a, msgpack_packer *pk) { return s_pack_with(s_write_u64s, TA_REC__COUNT, a, pk); }

/* ------------------------------------------------------------- decoding */

static int s_unpack(ta_rec_type_t type, void *rec, ta_mpr_t *r, int depth, ta_error_t *err);

static int s_fail(ta_error_t *err, const ta_mpr_t *r, ta_rec_type_t type, const char *field, const char *what) {
    return ta_error_set(err, TACT_EPROTO, "byte %zu: record %s.%s: expected %s", ta_mpr_offset(r), s_types[type].name, field, what);
}

/* Checks a list of records at r (each decoded into scratch and dropped). */
static int s_check_list(ta_rec_type_t type, ta_mpr_t *r, uint32_t *count, int depth, ta_error_t *err) {
    uint32_t n;
    if (depth > S_MAX_DEPTH) return ta_error_set(err, TACT_EPROTO, "byte %zu: records nested too deep", ta_mpr_offset(r));
    if (ta_mpr_array_fast(r, &n) || n > (size_t)(r->end - r->p))
        return ta_error_set(err, TACT_EPROTO, "byte %zu: expected a list of %s records", ta_mpr_offset(r), s_types[type].name);
    /* The largest record is a few KiB: scratch on the stack, per depth. */
    union {
#define S_U(NAME, name) ta_##name##_rec_t name;
        TA_REC_LIST(S_U)
#undef S_U
    } scratch;
    for (uint32_t i = 0; i < n; i++) {
        int rc = s_unpack(type, &scratch, r, depth + 1, err);
        if (rc != TACT_OK) return rc;
    }
    *count = n;
    return TACT_OK;
}

static int s_unpack(ta_rec_type_t type, void *rec, ta_mpr_t *r, int depth, ta_error_t *err) {
    const s_type_t *t = &s_types[type];
    uint32_t n;
    if (ta_mpr_array_fast(r, &n) || n != t->nfields) {
        return ta_error_set(err, TACT_EPROTO, "byte %zu: expected a %s record (array of %zu)", ta_mpr_offset(r), t->name, t->nfields);
    }
    for (size_t i = 0; i < t->nfields; i++) {
        const s_field_t *f = &t->fields[i];
        char *p = (char *)rec + f->off;
        const uint8_t *start = r->p;
        switch (f->kind) {
        case S_U64:
            if (ta_mpr_u64_fast(r, (uint64_t *)p)) return s_fail(err, r, type, f->name, "uint");
            break;
        case S_I64:
            if (ta_mpr_i64_fast(r, (int64_t *)p)) return s_fail(err, r, type, f->name, "int");
            break;
        case S_MP: {
            ta_bytes_t *b = (ta_bytes_t *)p;
            if (ta_mpr_bin(r, &b->ptr, &b->len)) return s_fail(err, r, type, f->name, "a bin");
            if (!b->len) b->ptr = NULL;
            break;
        }
        case S_STR: {
            ta_bytes_t *b = (ta_bytes_t *)p;
            if (ta_mpr_str(r, &b->ptr, &b->len) || !s_str_ok(b)) return s_fail(err, r, type, f->name, "a string of printable ASCII (at most 256 bytes)");
            if (!b->len) b->ptr = NULL;
            break;
        }
        case S_U64S: {
            ta_u64s_t *a = (ta_u64s_t *)p;
            uint64_t v;
            if (ta_mpr_array(r, &n) || n > (size_t)(r->end - r->p)) return s_fail(err, r, type, f->name, "an array of uints");
            for (uint32_t k = 0; k < n; k++)
                if (ta_mpr_u64_fast(r, &v)) return s_fail(err, r, type, f->name, "an array of uints");
            *a = (ta_u64s_t){NULL, n, {start, (size_t)(r->p - start)}};
            break;
        }
        case S_U64A:
        case S_I64A: {
            uint32_t *count = (uint32_t *)((char *)rec + f->count_off);
            if (ta_mpr_array_fast(r, &n) || n > f->cap) return s_fail(err, r, type, f->name, f->kind == S_U64A ? "a short array of uints" : "a short array of ints");
            for (uint32_t k = 0; k < n; k++)
                if (f->kind == S_U64A ? ta_mpr_u64_fast(r, &((uint64_t *)p)[k]) : ta_mpr_i64_fast(r, &((int64_t *)p)[k]))
                    return s_fail(err, r, type, f->name, f->kind == S_U64A ? "uints" : "ints");
            *count = n;
            break;
        }
        case S_RECS: {
            ta_recs_t *a = (ta_recs_t *)p;
            int rc = s_check_list((ta_rec_type_t)f->sub, r, &n, depth, err);
            if (rc != TACT_OK) return rc;
            *a = ta_recs_raw((ta_rec_type_t)f->sub, start, (size_t)(r->p - start), n);
            break;
        }
        }
    }
    return TACT_OK;
}

int ta_rec_unpack(ta_rec_type_t type, void *rec, const uint8_t *buf, size_t len, size_t *off, ta_error_t *err) {
    ta_mpr_t r;
    ta_mpr_init(&r, buf, len);
    r.p += *off;
    if (r.p > r.end) return ta_error_set(err, TACT_EPROTO, "record %s: past the end", s_types[type].name);
    int rc = s_unpack(type, rec, &r, 0, err);
    if (rc == TACT_OK) *off = ta_mpr_offset(&r);
    return rc;
}

int ta_recs_check(ta_rec_type_t type, const uint8_t *buf, size_t len, size_t *off, uint32_t *n, ta_error_t *err) {
    ta_mpr_t r;
    ta_mpr_init(&r, buf, len);
    r.p += *off;
    if (r.p > r.end) return ta_error_set(err, TACT_EPROTO, "records %s: past the end", s_types[type].name);
    int rc = s_check_list(type, &r, n, 0, err);
    if (rc == TACT_OK) *off = ta_mpr_offset(&r);
    return rc;
}

void ta_recs_begin(ta_recs_it_t *it, const ta_recs_t *a) {
    it->a = a;
    it->i = 0;
    it->off = 0;
    if (a->raw.len) {
        ta_mpr_t r;
        uint32_t n;
        ta_mpr_init(&r, a->raw.ptr, a->raw.len);
        if (ta_mpr_array(&r, &n) == 0) it->off = ta_mpr_offset(&r);
        else it->i = a->n; /* not a list: nothing to read */
    }
}

int ta_recs_next(ta_recs_it_t *it, void *rec) {
    const ta_recs_t *a = it->a;
    if (it->i >= a->n) return 0;
    size_t size = s_types[a->type].size;
    if (!a->raw.len) {
        memcpy(rec, (const char *)a->vals + (size_t)it->i++ * size, size);
        return 1;
    }
    if (ta_rec_unpack((ta_rec_type_t)a->type, rec, a->raw.ptr, a->raw.len, &it->off, NULL) != TACT_OK) {
        it->i = a->n;
        return 0;
    }
    it->i++;
    return 1;
}

/* ----------------------------------------------------------- comparison */

static bool s_recs_equal(const ta_recs_t *a, const ta_recs_t *b, char *where, size_t len, int depth);

static bool s_rec_equal(ta_rec_type_t type, const void *a, const void *b, char *where, size_t len, int depth) {
    const s_type_t *t = &s_types[type];
    for (size_t i = 0; i < t->nfields; i++) {
        const s_field_t *f = &t->fields[i];
        const char *pa = (const char *)a + f->off, *pb = (const char *)b + f->off;
        bool eq = true;
        char sub[128] = "";
        switch (f->kind) {
        case S_U64:
        case S_I64: eq = memcmp(pa, pb, 8) == 0; break;
        case S_STR:
        case S_MP: {
            const ta_bytes_t *x = (const ta_bytes_t *)pa, *y = (const ta_bytes_t *)pb;
            eq = x->len == y->len && (!x->len || memcmp(x->ptr, y->ptr, x->len) == 0);
            break;
        }
        case S_U64S: {
            const ta_u64s_t *x = (const ta_u64s_t *)pa, *y = (const ta_u64s_t *)pb;
            ta_u64s_it_t ix, iy;
            uint64_t vx, vy;
            eq = x->n == y->n;
            ta_u64s_begin(&ix, x);
            ta_u64s_begin(&iy, y);
            while (eq && ta_u64s_next(&ix, &vx) && ta_u64s_next(&iy, &vy)) eq = vx == vy;
            break;
        }
        case S_U64A:
        case S_I64A: {
            uint32_t na = *(const uint32_t *)((const char *)a + f->count_off), nb = *(const uint32_t *)((const char *)b + f->count_off);
            eq = na == nb && na <= f->cap && (!na || memcmp(pa, pb, 8 * (size_t)na) == 0);
            break;
        }
        case S_RECS:
            eq = depth < S_MAX_DEPTH && s_recs_equal((const ta_recs_t *)pa, (const ta_recs_t *)pb, sub, sizeof sub, depth + 1);
            break;
        }
        if (!eq) {
            if (where) snprintf(where, len, "%s%s", f->name, sub);
            return false;
        }
    }
    return true;
}

static bool s_recs_equal(const ta_recs_t *a, const ta_recs_t *b, char *where, size_t len, int depth) {
    /* An empty list has no type on the wire: one built in memory and one
     * decoded are the same list. */
    if (a->n == 0 && b->n == 0) return true;
    if (a->type != b->type || a->n != b->n) {
        if (where) snprintf(where, len, "%s", a->type != b->type ? "<type>" : "<count>");
        return false;
    }
    union {
#define S_U(NAME, name) ta_##name##_rec_t name;
        TA_REC_LIST(S_U)
#undef S_U
    } x, y;
    ta_recs_it_t ia, ib;
    ta_recs_begin(&ia, a);
    ta_recs_begin(&ib, b);
    for (uint32_t i = 0; i < a->n; i++) {
        char sub[128] = "";
        if (!ta_recs_next(&ia, &x) || !ta_recs_next(&ib, &y) || !s_rec_equal((ta_rec_type_t)a->type, &x, &y, sub, sizeof sub, depth)) {
            if (where) snprintf(where, len, "[%u]%s%s", i, sub[0] ? "." : "", sub);
            return false;
        }
    }
    return true;
}

bool ta_rec_equal(ta_rec_type_t type, const void *a, const void *b, char *where, size_t len) {
    return s_rec_equal(type, a, b, where, len, 0);
}

bool ta_recs_equal(const ta_recs_t *a, const ta_recs_t *b, char *where, size_t len) { return s_recs_equal(a, b, where, len, 0); }

/* ------------------------------------------------------------------ dump */

typedef struct {
    char *buf;
    size_t len, at;
} s_out_t;

static void s_put(s_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(s_out_t *o, const char *fmt, ...) {
    if (o->at >= o->len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->at, o->len - o->at, fmt, ap);
    va_end(ap);
    if (n > 0) o->at += (size_t)n;
}

/* One line: "{id=3 shape=[2 3] ...}", or JSON (json: every value, keys
 * quoted, strings escaped, an MP field as its length in bytes). */
static void s_format(ta_rec_type_t type, const void *rec, s_out_t *o, int depth, int json, ta_rec_namer_fn namer) {
    const s_type_t *t = &s_types[type];
    const char *sep = json ? "," : " ";
    s_put(o, "{");
    for (size_t i = 0; i < t->nfields; i++) {
        const s_field_t *f = &t->fields[i];
        const char *p = (const char *)rec + f->off;
        if (json) s_put(o, "%s\"%s\":", i ? sep : "", f->name);
        else s_put(o, "%s%s=", i ? sep : "", f->name);
        switch (f->kind) {
        case S_U64: {
            const char *name = namer ? namer(type, f->name, *(const uint64_t *)p) : NULL;
            if (name) s_put(o, json ? "\"%s\"" : "%s", name);
            else s_put(o, "%" PRIu64, *(const uint64_t *)p);
            break;
        }
        case S_I64: s_put(o, "%" PRId64, *(const int64_t *)p); break;
        case S_MP: s_put(o, json ? "%zu" : "<%zu bytes>", ((const ta_bytes_t *)p)->len); break;
        case S_STR: { /* printable ASCII, checked when it was read */
            const ta_bytes_t *b = (const ta_bytes_t *)p;
            s_put(o, "\"");
            for (size_t k = 0; k < b->len; k++) s_put(o, "%s%c", json && (b->ptr[k] == '"' || b->ptr[k] == '\\') ? "\\" : "", b->ptr[k]);
            s_put(o, "\"");
            break;
        }
        case S_U64S: {
            ta_u64s_it_t it;
            uint64_t v;
            const ta_u64s_t *a = (const ta_u64s_t *)p;
            ta_u64s_begin(&it, a);
            s_put(o, "[");
            for (uint32_t k = 0; (json || k < 8) && ta_u64s_next(&it, &v); k++) s_put(o, "%s%" PRIu64, k ? sep : "", v);
            s_put(o, "%s]", a->n > 8 && !json ? " ..." : "");
            break;
        }
        case S_U64A:
        case S_I64A: {
            uint32_t n = *(const uint32_t *)((const char *)rec + f->count_off);
            s_put(o, "[");
            for (uint32_t k = 0; k < n && k < f->cap; k++) {
                const char *name = f->kind == S_U64A && namer ? namer(type, f->name, ((const uint64_t *)p)[k]) : NULL;
                if (name) s_put(o, json ? "%s\"%s\"" : "%s%s", k ? sep : "", name);
                else if (f->kind == S_U64A) s_put(o, "%s%" PRIu64, k ? sep : "", ((const uint64_t *)p)[k]);
                else s_put(o, "%s%" PRId64, k ? sep : "", ((const int64_t *)p)[k]);
            }
            s_put(o, "]");
            break;
        }
        case S_RECS: {
            const ta_recs_t *a = (const ta_recs_t *)p;
            if (depth >= S_MAX_DEPTH) {
                s_put(o, json ? "%u" : "[%u records]", a->n);
                break;
            }
            union {
#define S_U(NAME, name) ta_##name##_rec_t name;
                TA_REC_LIST(S_U)
#undef S_U
            } x;
            ta_recs_it_t it;
            ta_recs_begin(&it, a);
            s_put(o, "[");
            for (uint32_t k = 0; ta_recs_next(&it, &x); k++) {
                if (k) s_put(o, "%s", sep);
                s_format((ta_rec_type_t)a->type, &x, o, depth + 1, json, namer);
            }
            s_put(o, "]");
            break;
        }
        }
    }
    s_put(o, "}");
}

char *ta_rec_format(ta_rec_type_t type, const void *rec, char *buf, size_t len) {
    s_out_t o = {buf, len, 0};
    if (len) buf[0] = '\0';
    s_format(type, rec, &o, 0, 0, NULL);
    return buf;
}

char *ta_rec_format_named(ta_rec_type_t type, const void *rec, char *buf, size_t len, ta_rec_namer_fn namer, int json) {
    s_out_t o = {buf, len, 0};
    if (len) buf[0] = '\0';
    s_format(type, rec, &o, 0, json != 0, namer);
    return buf;
}

char *ta_rec_json(ta_rec_type_t type, const void *rec, char *buf, size_t len) {
    s_out_t o = {buf, len, 0};
    if (len) buf[0] = '\0';
    s_format(type, rec, &o, 0, 1, NULL);
    return buf;
}
