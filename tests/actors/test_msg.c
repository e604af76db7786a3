/* test_msg.c - the envelope codec: round trips for every message type, and hostile input. */
#include <string.h>

#include <criterion/criterion.h>

#include "msg.h"
#include "testutil.h"

/* Fills every payload field of m from the seeded generator. */
static void s_fill(ta_msg_t *m, uint64_t *rng, uint8_t *bytes, size_t nbytes);

/* The schema is reachable only through the codec, so fields are filled by
 * walking the payload struct as the schema lays it out: a table of field
 * kinds derived from the same X-macro the codec uses. */
typedef struct {
    ta_field_kind_t kind;
    size_t offset;
    int rec;
} s_f_t;
#define S_F(M, KIND, field) {TA_FK_##KIND, offsetof(ta_msg_t, as.M.field), TA_RECOF_##KIND},
#define S_T(NAME, name) static const s_f_t s_f_##name[] = {TA_FIELDS_##NAME(S_F, name){TA_FK_U64, 0, -1}};
TA_MSG_LIST(S_T)
static const s_f_t *s_fields[] = {
#define S_P(NAME, name) s_f_##name,
    TA_MSG_LIST(S_P)};
static const size_t s_nfields[] = {
#define S_N(NAME, name) sizeof s_f_##name / sizeof s_f_##name[0] - 1,
    TA_MSG_LIST(S_N)};

static void s_fill(ta_msg_t *m, uint64_t *rng, uint8_t *bytes, size_t nbytes) {
    tu_rec_reset();
    for (size_t i = 0; i < nbytes; i++) bytes[i] = (uint8_t)tu_rand(rng);
    for (size_t i = 0; i < s_nfields[m->type]; i++) {
        void *f = (char *)m + s_fields[m->type][i].offset;
        uint64_t r = tu_rand(rng);
        switch (s_fields[m->type][i].kind) {
        case TA_FK_U64: *(uint64_t *)f = r; break;
        case TA_FK_I64: *(int64_t *)f = (int64_t)r; break;
        case TA_FK_F64: *(double *)f = (double)(int64_t)r / 3.0; break;
        case TA_FK_RECS: { /* 0 to 3 random records of the field's type */
            *(ta_recs_t *)f = tu_recs_random((ta_rec_type_t)s_fields[m->type][i].rec, rng);
            break;
        }
        case TA_FK_U64S: { /* up to 6 values, some large */
            static uint64_t vals[64][6];
            uint64_t *v = vals[(m->type * 8 + i) % 64];
            for (int k = 0; k < 6; k++) v[k] = k & 1 ? tu_rand(rng) : tu_rand(rng) % 300;
            *(ta_u64s_t *)f = ta_u64s(v, (size_t)(r % 7));
            break;
        }
        default: {
            ta_bytes_t *b = f;
            b->ptr = bytes + r % (nbytes / 2);
            b->len = (size_t)(r >> 32) % (nbytes / 2);
        }
        }
    }
    m->sender = (uint32_t)tu_rand(rng);
    m->dest = (uint32_t)tu_rand(rng);
    m->seq = tu_rand(rng);
    m->corr = tu_rand(rng);
}

Test(actors_msg, every_type_round_trips) {
    uint64_t seed = tu_seed(), rng = seed;
    uint8_t bytes[600];
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int t = 0; t < TA_MSG__COUNT; t++) {
        for (int rep = 0; rep < 20; rep++) {
            ta_msg_t m, d;
            ta_msg_init(&m, (ta_msg_type_t)t);
            s_fill(&m, &rng, bytes, sizeof bytes);
            m.bulk.ptr = bytes; /* announced only: the bulk frame travels apart */
            m.bulk.len = (size_t)rep;
            cr_assert_eq(ta_msg_encode(&m, &sb), TACT_OK);
            uint64_t bulk_len = 99;
            ta_error_t err;
            int rc = ta_msg_decode(&d, sb.data, sb.size, 0, &bulk_len, &err);
            cr_assert_eq(rc, TACT_OK, "seed %#llx, type %s: %s", (unsigned long long)seed, ta_msg_type_name(t), err.text);
            cr_assert_eq(bulk_len, (uint64_t)rep);
            d.bulk = m.bulk;
            char where[64] = "";
            cr_assert(ta_msg_equal(&m, &d, where, sizeof where), "seed %#llx, type %s: field %s differs",
                      (unsigned long long)seed, ta_msg_type_name(t), where);
        }
    }
    msgpack_sbuffer_destroy(&sb);
}

Test(actors_msg, equal_names_the_first_differing_field) {
    ta_msg_t a, b;
    ta_msg_init(&a, TA_MSG_ERROR);
    a.as.error.code = -4;
    a.as.error.what = ta_bytes_str("ECHO");
    a.as.error.text = ta_bytes_str("boom");
    b = a;
    char where[64];
    cr_assert(ta_msg_equal(&a, &b, where, sizeof where));
    b.as.error.text = ta_bytes_str("bang");
    cr_assert_not(ta_msg_equal(&a, &b, where, sizeof where));
    cr_assert_str_eq(where, "payload.text");
    b = a;
    b.seq = 7;
    cr_assert_not(ta_msg_equal(&a, &b, where, sizeof where));
    cr_assert_str_eq(where, "seq");
}

/* An encoded ECHO with a 40-byte payload, for the hostile-input tests. */
static size_t s_sample(msgpack_sbuffer *sb) {
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_ECHO);
    static const uint8_t data[40] = {1, 2, 3};
    m.as.echo.data.ptr = data;
    m.as.echo.data.len = sizeof data;
    m.seq = 1;
    cr_assert_eq(ta_msg_encode(&m, sb), TACT_OK);
    return sb->size;
}

Test(actors_msg, every_truncation_is_rejected) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t n = s_sample(&sb);
    for (size_t len = 0; len < n; len++) {
        ta_msg_t d;
        uint64_t bl;
        ta_error_t err;
        int rc = ta_msg_decode(&d, sb.data, len, 0, &bl, &err);
        cr_assert_eq(rc, TACT_EPROTO, "truncated to %zu of %zu bytes: got %d", len, n, rc);
        cr_assert(strstr(err.text, "byte "), "error names the offset: %s", err.text);
    }
    msgpack_sbuffer_destroy(&sb);
}

Test(actors_msg, trailing_bytes_and_garbage_are_rejected) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t n = s_sample(&sb);
    uint8_t buf[256];
    memcpy(buf, sb.data, n);
    buf[n] = 0;
    ta_msg_t d;
    uint64_t bl;
    ta_error_t err;
    cr_assert_eq(ta_msg_decode(&d, buf, n + 1, 0, &bl, &err), TACT_EPROTO);
    cr_assert(strstr(err.text, "end of the envelope"), "%s", err.text);
    /* Random bytes are (all but never) a valid envelope: it takes an array
     * of 8 starting with version 1, a known type and a matching payload. */
    uint64_t seed = tu_seed(), rng = seed;
    int accepted = 0;
    for (int rep = 0; rep < 2000; rep++) {
        size_t len = tu_rand(&rng) % sizeof buf;
        for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)tu_rand(&rng);
        accepted += ta_msg_decode(&d, buf, len, 0, &bl, &err) == TACT_OK;
    }
    cr_assert_eq(accepted, 0, "seed %#llx: %d random buffers decoded", (unsigned long long)seed, accepted);
    /* Flipping any one byte of a valid message is either rejected or decodes
     * to a message that differs from the original. */
    ta_msg_t orig;
    cr_assert_eq(ta_msg_decode(&orig, sb.data, n, 0, &bl, &err), TACT_OK);
    for (size_t i = 0; i < n; i++) {
        memcpy(buf, sb.data, n);
        buf[i] ^= 0xff;
        if (ta_msg_decode(&d, buf, n, 0, &bl, &err) == TACT_OK)
            cr_assert_not(ta_msg_equal(&orig, &d, NULL, 0), "flipping byte %zu went unnoticed", i);
    }
    msgpack_sbuffer_destroy(&sb);
}

Test(actors_msg, hostile_lengths_do_not_allocate_or_overrun) {
    /* An envelope whose payload claims a 4 GiB bin: must fail on bounds. */
    uint8_t buf[] = {0x98, TA_PROTOCOL_VERSION, TA_MSG_ECHO, 0, 0, 1, 0, 0x91, 0xc6, 0xff, 0xff, 0xff, 0xff, 0x00};
    ta_msg_t d;
    uint64_t bl;
    ta_error_t err;
    cr_assert_eq(ta_msg_decode(&d, buf, sizeof buf, 0, &bl, &err), TACT_EPROTO);
    cr_assert(strstr(err.text, "ECHO.data"), "names the field: %s", err.text);
    /* An array header claiming 2^32-1 elements. */
    uint8_t arr[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    cr_assert_eq(ta_msg_decode(&d, arr, sizeof arr, 0, &bl, &err), TACT_EPROTO);
}

Test(actors_msg, oversized_and_wrong_version_are_refused) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t n = s_sample(&sb);
    ta_msg_t d;
    uint64_t bl;
    ta_error_t err;
    cr_assert_eq(ta_msg_decode(&d, sb.data, n, n - 1, &bl, &err), TACT_ETOOBIG);
    cr_assert_eq(ta_msg_decode(&d, sb.data, n, n, &bl, &err), TACT_OK);
    sb.data[1] = TA_PROTOCOL_VERSION + 1; /* version */
    cr_assert_eq(ta_msg_decode(&d, sb.data, n, 0, &bl, &err), TACT_EVERSION);
    sb.data[1] = TA_PROTOCOL_VERSION;
    sb.data[2] = TA_MSG__COUNT; /* type */
    cr_assert_eq(ta_msg_decode(&d, sb.data, n, 0, &bl, &err), TACT_EPROTO);
    msgpack_sbuffer_destroy(&sb);
}

Test(actors_msg, status_names_and_messages) {
    cr_assert_str_eq(tact_status_name(TACT_ETIMEDOUT), "ETIMEDOUT");
    cr_assert_str_eq(tact_strerror(TACT_OK), "success");
    cr_assert_str_eq(tact_strerror(12345), "unknown status");
    cr_assert_str_eq(ta_msg_type_name(TA_MSG_ECHO), "ECHO");
    cr_assert_str_eq(ta_msg_type_name(-1), "?");
}
