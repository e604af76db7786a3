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

/* The schema packed value by value with msgpack-c's own functions: the
 * reference for ta_rec_pack's inline writer. */
static void s_ref_pack(ta_rec_type_t type, const void *rec, msgpack_packer *pk) {
    size_t nf;
    const ta_rec_field_t *fs = ta_rec_fields(type, &nf);
    msgpack_pack_array(pk, nf);
    for (size_t i = 0; i < nf; i++) {
        const char *p = (const char *)rec + fs[i].off;
        switch (fs[i].kind) {
        case TA_RK_U64: msgpack_pack_uint64(pk, *(const uint64_t *)p); break;
        case TA_RK_I64: msgpack_pack_int64(pk, *(const int64_t *)p); break;
        case TA_RK_MP: {
            const ta_bytes_t *b = (const ta_bytes_t *)p;
            msgpack_pack_bin(pk, b->len);
            msgpack_pack_bin_body(pk, b->ptr, b->len);
            break;
        }
        case TA_RK_STR: {
            const ta_bytes_t *b = (const ta_bytes_t *)p;
            msgpack_pack_str_with_body(pk, b->ptr, b->len);
            break;
        }
        case TA_RK_U64S: {
            const ta_u64s_t *a = (const ta_u64s_t *)p;
            msgpack_pack_array(pk, a->n);
            for (uint32_t k = 0; k < a->n; k++) msgpack_pack_uint64(pk, a->vals[k]);
            break;
        }
        case TA_RK_U64A:
        case TA_RK_I64A: {
            uint32_t n = *(const uint32_t *)((const char *)rec + fs[i].count_off);
            msgpack_pack_array(pk, n);
            for (uint32_t k = 0; k < n; k++)
                if (fs[i].kind == TA_RK_U64A) msgpack_pack_uint64(pk, ((const uint64_t *)p)[k]);
                else msgpack_pack_int64(pk, ((const int64_t *)p)[k]);
            break;
        }
        case TA_RK_RECS: {
            const ta_recs_t *a = (const ta_recs_t *)p;
            msgpack_pack_array(pk, a->n);
            for (uint32_t k = 0; k < a->n; k++) s_ref_pack((ta_rec_type_t)fs[i].sub, (const char *)a->vals + k * ta_rec_size((ta_rec_type_t)fs[i].sub), pk);
            break;
        }
        }
    }
}

Test(actors_rec, records_pack_to_the_bytes_msgpack_c_gives) {
    uint64_t seed = tu_seed(), rng = seed;
    msgpack_sbuffer sb, ref;
    msgpack_sbuffer_init(&sb);
    msgpack_sbuffer_init(&ref);
    static s_any_t a;
    for (int t = 0; t < TA_REC__COUNT; t++)
        for (int rep = 0; rep < 200; rep++) {
            tu_rec_reset();
            tu_rec_random((ta_rec_type_t)t, &a, &rng);
            size_t len = s_pack((ta_rec_type_t)t, &a, &sb);
            msgpack_packer pk;
            msgpack_sbuffer_clear(&ref);
            msgpack_packer_init(&pk, &ref, msgpack_sbuffer_write);
            s_ref_pack((ta_rec_type_t)t, &a, &pk);
            cr_assert(len == ref.size && memcmp(sb.data, ref.data, len) == 0, "seed %#llx, %s: %zu bytes, msgpack-c %zu",
                      (unsigned long long)seed, ta_rec_type_name(t), len, ref.size);
        }
    /* Every integer form at its bounds, signed and unsigned. */
    static const int64_t edges[] = {0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, INT64_C(4294967295), INT64_C(4294967296), INT64_MAX,
                                    -1, -32, -33, -128, -129, -32768, -32769, INT64_C(-2147483648), INT64_C(-2147483649), INT64_MIN};
    ta_view_rec_t v;
    memset(&v, 0, sizeof v);
    enum { NE = sizeof edges / sizeof edges[0] };
    v.n_shape = 16, v.n_mask = 32;
    for (int k = 0; k < 16; k++) v.shape[k] = edges[k % NE];
    for (int k = 0; k < 32; k++) v.mask[k] = edges[(k + 16) % NE];
    for (int k = 0; k < NE; k++) {
        v.offset = edges[k];
        v.has_mask = (uint64_t)edges[k];
        size_t len = s_pack(TA_REC_VIEW, &v, &sb);
        msgpack_packer pk;
        msgpack_sbuffer_clear(&ref);
        msgpack_packer_init(&pk, &ref, msgpack_sbuffer_write);
        s_ref_pack(TA_REC_VIEW, &v, &pk);
        cr_assert(len == ref.size && memcmp(sb.data, ref.data, len) == 0, "edge %lld: %zu bytes, msgpack-c %zu", (long long)edges[k], len, ref.size);
    }
    /* A record larger than the packer's first buffer (an AST of 40000 bytes). */
    static uint8_t big[40000];
    for (size_t k = 0; k < sizeof big; k++) big[k] = (uint8_t)(k * 7);
    ta_kernel_rec_t kr;
    memset(&kr, 0, sizeof kr);
    kr.ast = (ta_bytes_t){big, sizeof big};
    kr.n_bufs = 2, kr.bufs[0] = 1, kr.bufs[1] = UINT64_MAX;
    size_t len = s_pack(TA_REC_KERNEL, &kr, &sb);
    msgpack_packer pk;
    msgpack_sbuffer_clear(&ref);
    msgpack_packer_init(&pk, &ref, msgpack_sbuffer_write);
    s_ref_pack(TA_REC_KERNEL, &kr, &pk);
    cr_assert(len == ref.size && memcmp(sb.data, ref.data, len) == 0, "a large record: %zu bytes, msgpack-c %zu", len, ref.size);
    msgpack_sbuffer_destroy(&sb);
    msgpack_sbuffer_destroy(&ref);
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
    size_t nf;
    ta_rec_fields(TA_REC_STEP, &nf);
    msgpack_pack_array(&pk, nf);
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

/* A record string is printable ASCII of at most TA_REC_MAX_STR bytes
 * (names shown on terminals): a control byte, a byte above 0x7e or a long
 * string is refused on reading naming the field, and never written. */
Test(actors_rec, strings_are_printable_ascii_both_ways) {
    ta_target_rec_t t;
    memset(&t, 0, sizeof t);
    t.language = ta_bytes_str("C");
    t.compiler = ta_bytes_str("cc");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    cr_assert_eq(ta_rec_pack(TA_REC_TARGET, &t, &pk), 0);
    ta_target_rec_t back;
    ta_error_t err;
    size_t off = 0;
    cr_assert_eq(ta_rec_unpack(TA_REC_TARGET, &back, (const uint8_t *)sb.data, sb.size, &off, &err), TACT_OK, "%s", err.text);
    cr_assert(back.language.len == 1 && back.language.ptr[0] == 'C');
    static const char *const bad[] = {"a\x1b[2Jb", "caf\xc3\xa9", "tab\there"};
    for (int i = 0; i < 3; i++) {
        /* The same record with the bad language, packed by hand. */
        msgpack_sbuffer_clear(&sb);
        size_t nf;
        ta_rec_fields(TA_REC_TARGET, &nf);
        msgpack_pack_array(&pk, nf);
        msgpack_pack_str_with_body(&pk, bad[i], strlen(bad[i]));
        for (size_t k = 1; k < nf; k++) {
            if (k == 8 || k == 9) msgpack_pack_str_with_body(&pk, "", 0);
            else msgpack_pack_uint8(&pk, 0);
        }
        off = 0;
        cr_assert_eq(ta_rec_unpack(TA_REC_TARGET, &back, (const uint8_t *)sb.data, sb.size, &off, &err), TACT_EPROTO, "%d", i);
        cr_assert(strstr(err.text, "TARGET.language") && strstr(err.text, "printable ASCII"), "%s", err.text);
        t.language = ta_bytes_str(bad[i]);
        msgpack_sbuffer_clear(&sb);
        cr_assert_neq(ta_rec_pack(TA_REC_TARGET, &t, &pk), 0, "%d", i);
    }
    char longer[TA_REC_MAX_STR + 2];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    t.language = ta_bytes_str(longer);
    msgpack_sbuffer_clear(&sb);
    cr_assert_neq(ta_rec_pack(TA_REC_TARGET, &t, &pk), 0);
    msgpack_sbuffer_destroy(&sb);
}
