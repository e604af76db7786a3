/* fuzz_envelope.c - libFuzzer target: the envelope decoder, and the records of its payloads, on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "msg.h"

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
        /* Every record of every list is read, compared and printed. */
        static FILE *null;
        if (!null) null = fopen("/dev/null", "w");
        if (null) ta_msg_dump_records(&m, null, "");
    }
    return 0;
}
