/* msg.c - the envelope codec and message helpers, all driven by the schema in msg.h. */
#include "msg.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "mpread.h"

int ta_error_set(ta_error_t *e, int code, const char *fmt, ...) {
    if (e) {
        e->code = code;
        /* Formatted aside first: an argument may be e->text itself (a
         * cause wrapped in context, "worker W: %s", err->text). */
        char text[sizeof e->text];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        memcpy(e->text, text, sizeof text);
    }
    return code;
}

char *ta_printable(const void *s, size_t n, char *out, size_t cap) {
    const unsigned char *p = s;
    size_t o = 0;
    if (!cap) return out;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len = c >= 0x20 && c < 0x7f ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        unsigned v = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        for (size_t k = 1; len > 1 && k < len; k++)
            if (i + k >= n || (p[i + k] & 0xc0) != 0x80) len = 0;
            else v = v << 6 | (p[i + k] & 0x3f);
        static const unsigned least[5] = {0, 0, 0xa0, 0x800, 0x10000}; /* past U+009F: no C1 control */
        if (len > 1 && (v < least[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))) len = 0;
        if (len) {
            if (o + len >= cap) break;
            memcpy(out + o, p + i, len);
            o += len, i += len;
        } else {
            if (o + 4 >= cap) break;
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

ta_bytes_t ta_bytes_str(const char *s) {
    ta_bytes_t b = {(const uint8_t *)s, s ? strlen(s) : 0};
    return b;
}

ta_u64s_t ta_u64s(const uint64_t *vals, size_t n) {
    ta_u64s_t a = {vals, (uint32_t)n, {NULL, 0}};
    return a;
}

void ta_u64s_begin(ta_u64s_it_t *it, const ta_u64s_t *a) {
    it->a = a;
    it->i = 0;
    it->p = it->end = NULL;
    if (a->raw.len) {
        ta_mpr_t r;
        uint32_t n;
        ta_mpr_init(&r, a->raw.ptr, a->raw.len);
        ta_mpr_array(&r, &n);
        it->p = r.p;
        it->end = r.end;
    }
}

int ta_u64s_next(ta_u64s_it_t *it, uint64_t *v) {
    if (it->i >= it->a->n) return 0;
    if (!it->a->raw.len) {
        *v = it->a->vals[it->i++];
        return 1;
    }
    /* A decoded array was checked whole when it was decoded. */
    ta_mpr_t r = {it->p, it->p, it->end};
    if (ta_mpr_u64_fast(&r, v)) return 0;
    it->p = r.p;
    it->i++;
    return 1;
}

int ta_u64s_copy(const ta_u64s_t *a, uint64_t **out) {
    *out = ta_calloc(a->n ? a->n : 1, sizeof **out);
    if (!*out) return TACT_ENOMEM;
    if (!a->raw.len) {
        if (a->n) memcpy(*out, a->vals, sizeof **out * a->n);
        return TACT_OK;
    }
    /* A decoded array was checked whole when it was decoded. */
    ta_mpr_t r;
    uint32_t n;
    ta_mpr_init(&r, a->raw.ptr, a->raw.len);
    ta_mpr_array(&r, &n);
    for (uint32_t i = 0; i < a->n && ta_mpr_u64_fast(&r, &(*out)[i]) == 0; i++) continue;
    return TACT_OK;
}

/* ---------------------------------------------------------------- schema */

typedef struct {
    const char *name;
    ta_field_kind_t kind;
    size_t offset; /* within ta_msg_t */
    int rec;       /* RECS: the record type */
} s_field_t;

typedef struct {
    const char *name;
    const s_field_t *fields;
    size_t nfields;
} s_type_t;

#define S_FIELD(M, KIND, field) {#field, TA_FK_##KIND, offsetof(ta_msg_t, as.M.field), TA_RECOF_##KIND},
/* A trailing sentinel keeps field-less tables non-empty. */
#define S_FIELDS(NAME, name) static const s_field_t s_fields_##name[] = {TA_FIELDS_##NAME(S_FIELD, name){NULL, 0, 0, -1}};
TA_MSG_LIST(S_FIELDS)
#undef S_FIELDS

static const s_type_t s_types[TA_MSG__COUNT] = {
#define S_TYPE(NAME, name) {#NAME, s_fields_##name, sizeof s_fields_##name / sizeof s_fields_##name[0] - 1},
    TA_MSG_LIST(S_TYPE)
#undef S_TYPE
};

const char *ta_msg_type_name(int type) {
    return type >= 0 && type < TA_MSG__COUNT ? s_types[type].name : "?";
}

void ta_msg_init(ta_msg_t *m, ta_msg_type_t type) {
    memset(m, 0, sizeof *m);
    m->type = type;
}

void ta_msg_release(ta_msg_t *m) {
    if (m->storage_free_) m->storage_free_(m->storage_);
    ta_msg_type_t type = m->type;
    ta_msg_init(m, type);
}

/* ----------------------------------------------------------------- codec */


/* Envelope: [version, type, sender, dest, seq, corr, [payload...], bulk_len]. */
enum { S_ENVELOPE_ITEMS = 8 };

static int s_pack_bytes(msgpack_packer *pk, ta_field_kind_t kind, ta_bytes_t b) {
    if (kind == TA_FK_STR)
        return msgpack_pack_str(pk, b.len) || msgpack_pack_str_body(pk, b.ptr, b.len);
    return msgpack_pack_bin(pk, b.len) || msgpack_pack_bin_body(pk, b.ptr, b.len);
}

int ta_msg_encode(const ta_msg_t *m, msgpack_sbuffer *sb) {
    if (m->type >= TA_MSG__COUNT) return TACT_EINVAL;
    const s_type_t *t = &s_types[m->type];
    msgpack_packer pk;
    msgpack_sbuffer_clear(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    int rc = msgpack_pack_array(&pk, S_ENVELOPE_ITEMS) || msgpack_pack_uint32(&pk, TA_PROTOCOL_VERSION) ||
             msgpack_pack_uint32(&pk, m->type) || msgpack_pack_uint32(&pk, m->sender) ||
             msgpack_pack_uint32(&pk, m->dest) || msgpack_pack_uint64(&pk, m->seq) ||
             msgpack_pack_uint64(&pk, m->corr) || msgpack_pack_array(&pk, t->nfields);
    for (size_t i = 0; !rc && i < t->nfields; i++) {
        const void *f = (const char *)m + t->fields[i].offset;
        switch (t->fields[i].kind) {
        case TA_FK_U64: rc = msgpack_pack_uint64(&pk, *(const uint64_t *)f); break;
        case TA_FK_I64: rc = msgpack_pack_int64(&pk, *(const int64_t *)f); break;
        case TA_FK_F64: rc = msgpack_pack_double(&pk, *(const double *)f); break;
        case TA_FK_STR:
        case TA_FK_BIN: rc = s_pack_bytes(&pk, t->fields[i].kind, *(const ta_bytes_t *)f); break;
        case TA_FK_U64S: rc = ta_u64s_pack((const ta_u64s_t *)f, &pk); break;
        case TA_FK_RECS: {
            const ta_recs_t *a = f;
            if (a->raw.len) {
                rc = msgpack_sbuffer_write(sb, (const char *)a->raw.ptr, a->raw.len);
                break;
            }
            size_t size = ta_rec_size((ta_rec_type_t)t->fields[i].rec);
            rc = msgpack_pack_array(&pk, a->n);
            for (uint32_t k = 0; !rc && k < a->n; k++)
                rc = ta_rec_pack((ta_rec_type_t)t->fields[i].rec, (const char *)a->vals + size * k, &pk);
            break;
        }
        }
    }
    if (!rc) rc = msgpack_pack_uint64(&pk, m->bulk.len);
    return rc ? TACT_ENOMEM : TACT_OK;
}

static const char *s_kind_name(ta_field_kind_t k) {
    static const char *names[] = {"uint", "int", "float", "str", "bin", "msgpack value", "array of uints", "list of records"};
    return names[k];
}

int ta_msg_decode(ta_msg_t *m, const void *buf, size_t len, size_t max_bytes, uint64_t *bulk_len,
                  ta_error_t *err) {
    ta_mpr_t r;
    uint32_t n;
    uint64_t version, type, sender, dest;
    ta_msg_init(m, TA_MSG_READY);
    if (max_bytes && len > max_bytes)
        return ta_error_set(err, TACT_ETOOBIG, "envelope of %zu bytes exceeds the limit of %zu", len, max_bytes);
    ta_mpr_init(&r, buf, len);
#define S_EXPECT(cond, what)                                                                    \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            ta_msg_init(m, TA_MSG_READY);                                                       \
            return ta_error_set(err, TACT_EPROTO, "byte %zu: expected %s", ta_mpr_offset(&r), what); \
        }                                                                                       \
    } while (0)
    S_EXPECT(ta_mpr_array(&r, &n) == 0 && n == S_ENVELOPE_ITEMS, "an envelope (array of 8)");
    S_EXPECT(ta_mpr_u64(&r, &version) == 0, "the protocol version (uint)");
    if (version != TA_PROTOCOL_VERSION)
        return ta_error_set(err, TACT_EVERSION, "protocol version %" PRIu64 ", this build speaks %d", version,
                            TA_PROTOCOL_VERSION);
    S_EXPECT(ta_mpr_u64(&r, &type) == 0 && type < TA_MSG__COUNT, "a known message type");
    S_EXPECT(ta_mpr_u64(&r, &sender) == 0 && sender <= UINT32_MAX, "the sender id (uint32)");
    S_EXPECT(ta_mpr_u64(&r, &dest) == 0 && dest <= UINT32_MAX, "the destination id (uint32)");
    S_EXPECT(ta_mpr_u64(&r, &m->seq) == 0, "the sequence number (uint)");
    S_EXPECT(ta_mpr_u64(&r, &m->corr) == 0, "the correlation id (uint)");
    const s_type_t *t = &s_types[type];
    S_EXPECT(ta_mpr_array(&r, &n) == 0 && n == t->nfields, "the payload array of the message type");
    for (size_t i = 0; i < t->nfields; i++) {
        void *f = (char *)m + t->fields[i].offset;
        ta_bytes_t *b = f;
        int bad;
        switch (t->fields[i].kind) {
        case TA_FK_U64: bad = ta_mpr_u64(&r, f); break;
        case TA_FK_I64: bad = ta_mpr_i64(&r, f); break;
        case TA_FK_F64: bad = ta_mpr_f64(&r, f); break;
        case TA_FK_STR: bad = ta_mpr_str(&r, &b->ptr, &b->len); break;
        case TA_FK_U64S: {
            ta_u64s_t *a = f;
            const uint8_t *start = r.p;
            uint32_t count;
            uint64_t v;
            bad = ta_mpr_array(&r, &count) || count > len;
            for (uint32_t k = 0; !bad && k < count; k++) bad = ta_mpr_u64_fast(&r, &v);
            a->vals = NULL;
            a->n = bad ? 0 : count;
            a->raw.ptr = start;
            a->raw.len = (size_t)(r.p - start);
            break;
        }
        case TA_FK_RECS: {
            ta_recs_t *a = f;
            const uint8_t *start = r.p;
            size_t off = ta_mpr_offset(&r);
            uint32_t count = 0;
            ta_error_t e;
            if (ta_recs_check((ta_rec_type_t)t->fields[i].rec, buf, len, &off, &count, &e) != TACT_OK) {
                ta_msg_init(m, TA_MSG_READY);
                return ta_error_set(err, TACT_EPROTO, "field %s.%s: %s", t->name, t->fields[i].name, e.text);
            }
            r.p = (const uint8_t *)buf + off;
            *a = ta_recs_raw((ta_rec_type_t)t->fields[i].rec, start, (size_t)(r.p - start), count);
            bad = 0;
            break;
        }
        default: bad = ta_mpr_bin(&r, &b->ptr, &b->len); break;
        }
        if (bad) {
            size_t off = ta_mpr_offset(&r);
            ta_msg_init(m, TA_MSG_READY);
            return ta_error_set(err, TACT_EPROTO, "byte %zu: field %s.%s: expected %s", off, t->name,
                                t->fields[i].name, s_kind_name(t->fields[i].kind));
        }
    }
    S_EXPECT(ta_mpr_u64(&r, bulk_len) == 0, "the bulk length (uint)");
    S_EXPECT(ta_mpr_offset(&r) == len, "the end of the envelope");
#undef S_EXPECT
    m->type = (ta_msg_type_t)type;
    m->sender = (uint32_t)sender;
    m->dest = (uint32_t)dest;
    return TACT_OK;
}

/* ------------------------------------------------------------ comparison */

static bool s_bytes_eq(ta_bytes_t a, ta_bytes_t b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* Equal values, whichever way each array is held (decoded or to send). */
static bool s_u64s_eq(const ta_u64s_t *a, const ta_u64s_t *b) {
    if (a->n != b->n) return false;
    ta_u64s_it_t ia, ib;
    uint64_t va, vb;
    ta_u64s_begin(&ia, a);
    ta_u64s_begin(&ib, b);
    while (ta_u64s_next(&ia, &va) && ta_u64s_next(&ib, &vb))
        if (va != vb) return false;
    return true;
}

bool ta_msg_equal(const ta_msg_t *a, const ta_msg_t *b, char *where, size_t where_len) {
    const char *field = NULL;
    char buf[160];
    if (a->type != b->type) field = "type";
    else if (a->sender != b->sender) field = "sender";
    else if (a->dest != b->dest) field = "dest";
    else if (a->seq != b->seq) field = "seq";
    else if (a->corr != b->corr) field = "corr";
    else {
        const s_type_t *t = &s_types[a->type];
        for (size_t i = 0; !field && i < t->nfields; i++) {
            const char *fa = (const char *)a + t->fields[i].offset, *fb = (const char *)b + t->fields[i].offset;
            bool eq;
            switch (t->fields[i].kind) {
            case TA_FK_U64:
            case TA_FK_I64:
            case TA_FK_F64: eq = memcmp(fa, fb, 8) == 0; break; /* bitwise, so NaN == NaN */
            case TA_FK_U64S: eq = s_u64s_eq((const ta_u64s_t *)fa, (const ta_u64s_t *)fb); break;
            case TA_FK_RECS: {
                char sub[128] = "";
                eq = ta_recs_equal((const ta_recs_t *)fa, (const ta_recs_t *)fb, sub, sizeof sub);
                if (!eq) {
                    snprintf(buf, sizeof buf, "payload.%s%s", t->fields[i].name, sub);
                    field = buf;
                }
                continue;
            }
            default: eq = s_bytes_eq(*(const ta_bytes_t *)fa, *(const ta_bytes_t *)fb); break;
            }
            if (!eq) {
                snprintf(buf, sizeof buf, "payload.%s", t->fields[i].name);
                field = buf;
            }
        }
        if (!field && !s_bytes_eq(a->bulk, b->bulk)) field = "bulk";
    }
    if (field && where) snprintf(where, where_len, "%s", field);
    return field == NULL;
}

char *ta_msg_format(const ta_msg_t *m, char *buf, size_t len) {
    size_t at = 0;
    const s_type_t *t = m->type < TA_MSG__COUNT ? &s_types[m->type] : NULL;
#define S_PUT(...) \
    do { if (at < len) at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__); } while (0)
    S_PUT("%s %" PRIu32 "->%" PRIu32 " seq=%" PRIu64 " corr=%" PRIu64, t ? t->name : "?", m->sender, m->dest, m->seq,
          m->corr);
    for (size_t i = 0; t && i < t->nfields; i++) {
        const char *f = (const char *)m + t->fields[i].offset;
        const ta_bytes_t *b = (const ta_bytes_t *)f;
        switch (t->fields[i].kind) {
        case TA_FK_U64: S_PUT(" %s=%" PRIu64, t->fields[i].name, *(const uint64_t *)f); break;
        case TA_FK_I64: S_PUT(" %s=%" PRId64, t->fields[i].name, *(const int64_t *)f); break;
        case TA_FK_F64: S_PUT(" %s=%.17g", t->fields[i].name, *(const double *)f); break;
        case TA_FK_STR: S_PUT(" %s=\"%.*s\"", t->fields[i].name, (int)(b->len > 64 ? 64 : b->len), b->ptr ? (const char *)b->ptr : ""); break;
        case TA_FK_BIN: S_PUT(" %s=<%zu bytes>", t->fields[i].name, b->len); break;
        case TA_FK_RECS: S_PUT(" %s=<%u %s>", t->fields[i].name, ((const ta_recs_t *)f)->n, ta_rec_type_name(t->fields[i].rec)); break;
        case TA_FK_U64S: {
            const ta_u64s_t *a = (const ta_u64s_t *)f;
            ta_u64s_it_t it;
            uint64_t v;
            S_PUT(" %s=[", t->fields[i].name);
            ta_u64s_begin(&it, a);
            for (uint32_t k = 0; k < 8 && ta_u64s_next(&it, &v); k++) S_PUT("%s%" PRIu64, k ? " " : "", v);
            S_PUT("%s]", a->n > 8 ? " ..." : "");
            break;
        }
        }
    }
    if (m->bulk.len) S_PUT(" bulk=<%zu bytes>", m->bulk.len);
#undef S_PUT
    if (len) buf[at < len ? at : len - 1] = '\0';
    return buf;
}

/* Any record, for the dumps' iterations. */
typedef union {
#define S_U(NAME, name) ta_##name##_rec_t name;
    TA_REC_LIST(S_U)
#undef S_U
} s_any_rec_t;

void ta_msg_dump_records(const ta_msg_t *m, FILE *f, const char *indent, ta_rec_namer_fn namer) {
    if (m->type >= TA_MSG__COUNT) return;
    const s_type_t *t = &s_types[m->type];
    for (size_t i = 0; i < t->nfields; i++) {
        if (t->fields[i].kind != TA_FK_RECS) continue;
        const ta_recs_t *a = (const ta_recs_t *)((const char *)m + t->fields[i].offset);
        static _Thread_local s_any_rec_t rec;
        static _Thread_local char line[8192];
        ta_recs_it_t it;
        ta_recs_begin(&it, a);
        for (uint32_t k = 0; ta_recs_next(&it, &rec); k++)
            fprintf(f, "%s%s[%u] %s\n", indent, t->fields[i].name, k, ta_rec_format_named((ta_rec_type_t)a->type, &rec, line, sizeof line, namer, 0));
    }
}

char *ta_msg_format_record(const ta_msg_t *m, const char *field, uint32_t k, char *buf, size_t len, ta_rec_namer_fn namer) {
    if (m->type >= TA_MSG__COUNT) return NULL;
    const s_type_t *t = &s_types[m->type];
    for (size_t i = 0; i < t->nfields; i++) {
        if (t->fields[i].kind != TA_FK_RECS || strcmp(t->fields[i].name, field) != 0) continue;
        const ta_recs_t *a = (const ta_recs_t *)((const char *)m + t->fields[i].offset);
        static _Thread_local s_any_rec_t rec;
        ta_recs_it_t it;
        ta_recs_begin(&it, a);
        for (uint32_t j = 0; ta_recs_next(&it, &rec); j++)
            if (j == k) return ta_rec_format_named((ta_rec_type_t)a->type, &rec, buf, len, namer, 0);
    }
    return NULL;
}

/* A printable ASCII string (STR fields are checked so) as a JSON string. */
static void s_json_str(FILE *f, const ta_bytes_t *b) {
    fputc('"', f);
    for (size_t k = 0; k < b->len; k++) {
        if (b->ptr[k] == '"' || b->ptr[k] == '\\') fputc('\\', f);
        if (b->ptr[k] >= 0x20 && b->ptr[k] < 0x7f) fputc(b->ptr[k], f);
        else fprintf(f, "\\u%04x", b->ptr[k]);
    }
    fputc('"', f);
}

void ta_msg_json(const ta_msg_t *m, FILE *f, ta_rec_namer_fn namer) {
    const s_type_t *t = m->type < TA_MSG__COUNT ? &s_types[m->type] : NULL;
    fprintf(f, "{\"type\":\"%s\",\"from\":%" PRIu32 ",\"to\":%" PRIu32 ",\"seq\":%" PRIu64 ",\"corr\":%" PRIu64, t ? t->name : "?", m->sender,
            m->dest, m->seq, m->corr);
    static _Thread_local s_any_rec_t rec;
    static _Thread_local char line[65536];
    for (size_t i = 0; t && i < t->nfields; i++) {
        const char *p = (const char *)m + t->fields[i].offset;
        fprintf(f, ",\"%s\":", t->fields[i].name);
        switch (t->fields[i].kind) {
        case TA_FK_U64: fprintf(f, "%" PRIu64, *(const uint64_t *)p); break;
        case TA_FK_I64: fprintf(f, "%" PRId64, *(const int64_t *)p); break;
        case TA_FK_F64: {
            double v = *(const double *)p;
            if (v == v && v - v == 0) fprintf(f, "%.17g", v);
            else fputs("null", f);
            break;
        }
        case TA_FK_STR: s_json_str(f, (const ta_bytes_t *)p); break;
        case TA_FK_BIN: fprintf(f, "%zu", ((const ta_bytes_t *)p)->len); break;
        case TA_FK_U64S: {
            ta_u64s_it_t it;
            uint64_t v;
            ta_u64s_begin(&it, (const ta_u64s_t *)p);
            fputc('[', f);
            for (uint32_t k = 0; ta_u64s_next(&it, &v); k++) fprintf(f, "%s%" PRIu64, k ? "," : "", v);
            fputc(']', f);
            break;
        }
        case TA_FK_RECS: {
            const ta_recs_t *a = (const ta_recs_t *)p;
            ta_recs_it_t it;
            ta_recs_begin(&it, a);
            fputc('[', f);
            for (uint32_t k = 0; ta_recs_next(&it, &rec); k++)
                fprintf(f, "%s%s", k ? "," : "", ta_rec_format_named((ta_rec_type_t)a->type, &rec, line, sizeof line, namer, 1));
            fputc(']', f);
            break;
        }
        }
    }
    if (m->bulk.len) fprintf(f, ",\"bulk\":%zu", m->bulk.len);
    fputc('}', f);
}
