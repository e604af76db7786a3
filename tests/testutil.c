/* testutil.c - helpers shared by the Criterion suites. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

uint64_t tu_seed(void) {
    const char *s = getenv("TACT_SEED");
    return s ? strtoull(s, NULL, 0) : 0x7ac7u;
}

uint64_t tu_rand(uint64_t *state) {
    uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

ta_rt_t *tu_rt(ta_transport_t transport, int timeout_ms, const char *log_path) {
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    cfg.transport = transport;
    cfg.timeout_ms = timeout_ms;
    cfg.log_path = log_path;
    ta_rt_t *rt = NULL;
    ta_error_t err = {0, ""};
    int rc = ta_rt_new(&rt, &cfg, &err);
    cr_assert_eq(rc, TACT_OK, "ta_rt_new(%s): %s", ta_transport_name(transport), err.text);
    return rt;
}

char *tu_tmpfile(const char *tag) {
    char *path = malloc(256);
    snprintf(path, 256, "/tmp/tact-test-%s-XXXXXX", tag);
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp");
    close(fd);
    return path;
}

