/* test_rec.c - the records inside payloads: every type round-trips from the schema, and hostile bytes are refused. */
#include <string.h>

#include <criterion/criterion.h>

#include "msg.h"
#include "testutil.h"

/* Room for any record. */
typedef union {
#define S_U(NAME, name) ta_##name##_rec_t name;
    TA_REC_LIST(S_U)
#undef S_U
} s_any_t;

static size_t s_pack(ta_rec_type_t type, const void *rec, msgpack_sbuffer *sb) {
    msgpack_packer pk;
    msgpack_sbuffer_clear(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    cr_assert_eq(ta_rec_pack(type, rec, &pk), 0);
    return sb->size;
}

Test(actors_rec, every_record_type_round_trips) {
    uint64_t seed = tu_seed(), rng = seed;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    static s_any_t a, b;
    for (int t = 0; t < TA_REC__COUNT; t++)
        for (int rep = 0; rep < 50; rep++) {
            tu_rec_reset();
            tu_rec_random((ta_rec_type_t)t, &a, &rng);
            size_t len = s_pack((ta_rec_type_t)t, &a, &sb), off = 0;
            ta_error_t err;
            cr_assert_eq(ta_rec_unpack((ta_rec_type_t)t, &b, (const uint8_t *)sb.data, len, &off, &err), TACT_OK,
                         "seed %#llx, %s: %s", (unsigned long long)seed, ta_rec_type_name(t), err.text);
            cr_assert_eq(off, len, "the record is read to its end");
            char where[128] = "";
            cr_assert(ta_rec_equal((ta_rec_type_t)t, &a, &b, where, sizeof where), "seed %#llx, %s: %s differs",
                      (unsigned long long)seed, ta_rec_type_name(t), where);
            /* Every cut of it is refused, never read past its end. */
            for (size_t cut = 0; cut < len; cut++) {
                off = 0;
                cr_assert_eq(ta_rec_unpack((ta_rec_type_t)t, &b, (const uint8_t *)sb.data, cut, &off, &err), TACT_EPROTO,
                             "seed %#llx, %s cut at %zu of %zu", (unsigned long long)seed, ta_rec_type_name(t), cut, len);
            }
        }
    msgpack_sbuffer_destroy(&sb);
}

Test(actors_rec, equal_names_the_first_differing_field_even_nested) {
    ta_view_rec_t v1[2], v2[2];
    memset(v1, 0, sizeof v1);
    v1[0].n_shape = v1[0].n_strides = 2;
    v1[0].shape[0] = 2, v1[0].shape[1] = 3, v1[0].strides[0] = 3, v1[0].strides[1] = 1;
    v1[1] = v1[0];
    memcpy(v2, v1, sizeof v1);
    ta_node_rec_t a, b;
    memset(&a, 0, sizeof a);
    a.id = 4, a.op = 9, a.n_shape = 2, a.shape[0] = 2, a.shape[1] = 3;
    a.st = ta_recs(TA_REC_VIEW, v1, 2);
    b = a;
    b.st = ta_recs(TA_REC_VIEW, v2, 2);
    char where[128];
    cr_assert(ta_rec_equal(TA_REC_NODE, &a, &b, where, sizeof where));
    v2[1].strides[1] = 7;
    cr_assert_not(ta_rec_equal(TA_REC_NODE, &a, &b, where, sizeof where));
    cr_assert_str_eq(where, "st[1].strides");
    v2[1].strides[1] = 1;
    b.shape[1] = 4;
    cr_assert_not(ta_rec_equal(TA_REC_NODE, &a, &b, where, sizeof where));
    cr_assert_str_eq(where, "shape");
    char text[512];
    ta_rec_format(TA_REC_NODE, &a, text, sizeof text);
    cr_assert(strstr(text, "id=4 op=9") && strstr(text, "shape=[2 3]") && strstr(text, "st=[{shape=[2 3] strides=[3 1]"), "%s", text);
}

Test(actors_rec, hostile_bytes_are_refused_with_the_field) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ta_view_rec_t v;
    ta_error_t err;
    size_t off;
    /* A view whose shape has 17 dims: over its bound. */
    msgpack_pack_array(&pk, 6);
    msgpack_pack_array(&pk, 17);
    for (int k = 0; k < 17; k++) msgpack_pack_int64(&pk, 1);
    off = 0;
    cr_assert_eq(ta_rec_unpack(TA_REC_VIEW, &v, (const uint8_t *)sb.data, sb.size, &off, &err), TACT_EPROTO);
    cr_assert(strstr(err.text, "VIEW.shape"), "%s", err.text);
    /* A list claiming 2^32 - 1 records in 5 bytes. */
    static const uint8_t huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    uint32_t n;
    off = 0;
    cr_assert_eq(ta_recs_check(TA_REC_NODE, huge, sizeof huge, &off, &n, &err), TACT_EPROTO);
    /* A record with one field too few. */
    msgpack_sbuffer_clear(&sb);
    msgpack_pack_array(&pk, 5);
    for (int k = 0; k < 5; k++) msgpack_pack_uint8(&pk, 0);
    off = 0;
    cr_assert_eq(ta_rec_unpack(TA_REC_VIEW, &v, (const uint8_t *)sb.data, sb.size, &off, &err), TACT_EPROTO);
    cr_assert(strstr(err.text, "VIEW record"), "%s", err.text);
    /* A string where a uint belongs. */
    msgpack_sbuffer_clear(&sb);
    ta_step_rec_t st;
    memset(&st, 0, sizeof st);
    msgpack_pack_array(&pk, 12);
    msgpack_pack_str_with_body(&pk, "x", 1);
    off = 0;
    cr_assert_eq(ta_rec_unpack(TA_REC_STEP, &st, (const uint8_t *)sb.data, sb.size, &off, &err), TACT_EPROTO);
    cr_assert(strstr(err.text, "STEP.index"), "%s", err.text);
    msgpack_sbuffer_destroy(&sb);
}

Test(actors_rec, seeded_byte_flips_never_read_out_of_bounds) {
    uint64_t seed = tu_seed(), rng = seed;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    static s_any_t a, b;
    int accepted = 0, refused = 0;
    for (int rep = 0; rep < 2000; rep++) {
        ta_rec_type_t t = (ta_rec_type_t)(tu_rand(&rng) % TA_REC__COUNT);
        tu_rec_reset();
        tu_rec_random(t, &a, &rng);
        size_t len = s_pack(t, &a, &sb), off = 0;
        uint8_t *p = (uint8_t *)sb.data;
        for (int f = 0; f < 3; f++) p[tu_rand(&rng) % len] ^= (uint8_t)(1u << (tu_rand(&rng) % 8));
        ta_error_t err;
        if (ta_rec_unpack(t, &b, p, len, &off, &err) == TACT_OK) {
            accepted++;
            cr_assert_leq(off, len);
            /* What was accepted can be read, compared and printed. */
            char text[4096];
            ta_rec_format(t, &b, text, sizeof text);
            ta_rec_equal(t, &b, &b, NULL, 0);
        } else {
            refused++;
        }
    }
    cr_assert_gt(refused, 0, "seed %#llx: no flip was refused", (unsigned long long)seed);
    cr_assert_gt(accepted, 0, "seed %#llx: every flip was refused", (unsigned long long)seed);
    msgpack_sbuffer_destroy(&sb);
}
