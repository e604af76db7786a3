/* fuzz_envelope.c - libFuzzer target: the envelope decoder, and the records of its payloads, on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "msg.h"

/* A namer for every field (the tool's names are ops' and dtypes'). */
static const char *s_namer(ta_rec_type_t type, const char *field, uint64_t v) {
    (void)type, (void)field;
    return v % 3 == 0 ? "NAME" : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ta_msg_t m;
    uint64_t bulk_len;
    ta_error_t err;
    if (ta_msg_decode(&m, data, size, 1 << 20, &bulk_len, &err) == TACT_OK) {
        /* What decodes must re-encode and decode to an equal message. */
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        m.bulk.len = (size_t)bulk_len; /* announced only: encode writes the length */
        int rc = ta_msg_encode(&m, &sb);
        m.bulk.len = 0;
        if (rc == TACT_OK) {
            ta_msg_t d;
            uint64_t bl2;
            if (ta_msg_decode(&d, sb.data, sb.size, 0, &bl2, &err) != TACT_OK || bl2 != bulk_len) __builtin_trap();
            if (!ta_msg_equal(&m, &d, NULL, 0)) __builtin_trap();
        }
        msgpack_sbuffer_destroy(&sb);
        char line[512];
        ta_msg_format(&m, line, sizeof line);
        /* Every record of every list is read, compared and printed, as
         * text and as JSON, with and without names. */
        static FILE *null;
        if (!null) null = fopen("/dev/null", "w");
        if (null) {
            ta_msg_dump_records(&m, null, "", NULL);
            ta_msg_dump_records(&m, null, "", s_namer);
            ta_msg_json(&m, null, s_namer);
        }
    }
    return 0;
}
