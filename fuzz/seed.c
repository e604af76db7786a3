/* seed.c - writes valid envelopes and a real message log as starting corpora for the fuzzers. */
#include <stdio.h>
#include <string.h>

#include "actor.h"
#include "builtin.h"

static int s_write(const char *dir, const char *name, const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) return -1;
    return fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fuzz_seed ENVELOPE_DIR LOG_DIR\n");
        return 2;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int t = 0; t < TA_MSG__COUNT; t++) {
        ta_msg_t m;
        ta_msg_init(&m, (ta_msg_type_t)t);
        m.sender = 3, m.dest = 4, m.seq = 5, m.corr = 6;
        m.as.echo.data = ta_bytes_str("seed"); /* the first field of several types */
        if (ta_msg_encode(&m, &sb) != TACT_OK || s_write(argv[1], ta_msg_type_name(t), sb.data, sb.size) != 0) return 1;
    }
    msgpack_sbuffer_destroy(&sb);
    char path[4096];
    snprintf(path, sizeof path, "%s/echo.tactlog", argv[2]);
    ta_rt_config_t cfg;
    ta_rt_config_default(&cfg);
    cfg.log_path = path;
    ta_rt_t *rt;
    ta_port_t *port;
    ta_actor_t *echo;
    ta_error_t err;
    if (ta_rt_new(&rt, &cfg, &err) || ta_port_new(rt, "client", &port, &err) ||
        ta_actor_start(rt, &ta_echo_ops, NULL, NULL, &echo, &err)) {
        fprintf(stderr, "fuzz_seed: %s\n", err.text);
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        ta_msg_t m, r;
        ta_msg_init(&m, i == 2 ? TA_MSG_EOS : TA_MSG_ECHO);
        ta_msg_init(&r, TA_MSG_READY);
        m.as.echo.data = ta_bytes_str("hi");
        static const uint8_t bulk[5] = {1, 2, 3, 4, 5};
        m.bulk.ptr = bulk;
        m.bulk.len = i ? sizeof bulk : 0;
        if (ta_port_request(port, ta_actor_id(echo), &m, &r, -1, &err) != TACT_OK) {
            fprintf(stderr, "fuzz_seed: %s\n", err.text);
            return 1;
        }
        ta_msg_release(&r);
    }
    ta_actor_stop(&echo, NULL);
    ta_port_destroy(&port);
    return ta_rt_destroy(&rt, NULL) == TACT_OK ? 0 : 1;
}
