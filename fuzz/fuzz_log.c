/* fuzz_log.c - libFuzzer target: the log reader on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>

#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ta_log_t *log;
    ta_error_t err;
    if (ta_log_parse(data, size, &log, &err) == TACT_OK) {
        for (size_t i = 0; i < log->nstreams; i++)
            for (size_t k = 0; k < log->streams[i].nrecords; k++) {
                ta_msg_t m;
                if (ta_log_record_msg(&log->streams[i].records[k], &m, &err) != TACT_OK) __builtin_trap();
            }
        ta_log_free(&log);
    }
    return 0;
}
