/* test_security.c - what a hostile local process, or a careless program, can do to a context: nothing. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <zmq.h>

#include "msg.h"
#include "rerun.h"
#include "runtime.h"
#include "tact.h"
#include "testutil.h"

static tact_ctx *s_open_transport(const char *transport) {
    tact_options o;
    tact_options_default(&o);
    o.transport = transport;
    o.timeout_ms = 20000;
    tact_ctx *ctx = NULL;
    cr_assert_eq(tact_ctx_open(&ctx, &o), TACT_OK, "%s", tact_last_open_error());
    return ctx;
}

/* From a context of its own (another process, as far as tact can tell),
 * sends the executor of ctx (port 7) a WRITE of nines for buffer id
 * claiming to be the graph (port 2), with a CURVE key pair of its own when
 * key is set. */
static void s_forge_write(tact_ctx *ctx, uint64_t id, int key) {
    ta_rt_t *rt = ta_port_rt(ta_ctx_port(ctx));
    char ep[256], server[41], pub[41], sec[41];
    cr_assert_eq(ta_rt_endpoint(rt, 7, ep, sizeof ep), 0);
    void *zctx = zmq_ctx_new(), *raw = zmq_socket(zctx, ZMQ_PUSH);
    int linger = 2000;
    zmq_setsockopt(raw, ZMQ_LINGER, &linger, sizeof linger);
    if (key && ta_rt_public_key(rt, server) == 0) {
        cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
        zmq_setsockopt(raw, ZMQ_CURVE_SERVERKEY, server, 40);
        zmq_setsockopt(raw, ZMQ_CURVE_PUBLICKEY, pub, 40);
        zmq_setsockopt(raw, ZMQ_CURVE_SECRETKEY, sec, 40);
    }
    cr_assert_eq(zmq_connect(raw, ep), 0);
    static const float nines[4] = {9, 9, 9, 9};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    ta_msg_t m;
    ta_msg_init(&m, TA_MSG_WRITE);
    m.sender = 2, m.dest = 7, m.seq = 100;
    m.as.write.buf = id;
    m.bulk.len = sizeof nines;
    ta_msg_encode(&m, &sb);
    zmq_send(raw, sb.data, sb.size, ZMQ_SNDMORE);
    zmq_send(raw, nines, sizeof nines, 0);
    msgpack_sbuffer_destroy(&sb);
    zmq_close(raw);
    zmq_ctx_term(zctx);
}

/* Reads x until it holds nines (the forgery landed) or 3 s passed; returns
 * whether it did. */
static int s_forgery_landed(tact_tensor *x) {
    float out[4];
    for (int i = 0; i < 300; i++) {
        cr_assert_eq(tact_read(x, out, sizeof out), TACT_OK);
        if (out[0] == 9) return 1;
        usleep(10000);
    }
    return 0;
}

Test(graph_security, a_local_process_cannot_change_what_a_tcp_context_reads) {
    int64_t shape[1] = {4};
    float data[4] = {1, 2, 3, 4}, out[4];
    /* The attack, against plain tcp: a local process replaces the bytes the
     * program reads back. */
    tact_ctx *ctx = s_open_transport("tcp-insecure");
    tact_tensor *x = tact_from_data(ctx, TACT_FLOAT32, 1, shape, data);
    cr_assert_eq(tact_read(x, out, sizeof out), TACT_OK);
    s_forge_write(ctx, 1, 0);
    cr_assert(s_forgery_landed(x), "the forged WRITE never landed on plain tcp: the test would prove nothing");
    tact_ctx_close(&ctx);
    /* The same against tcp with CURVE, without a key and with one of its
     * own: refused at the handshake, and the program reads its own bytes. */
    ctx = s_open_transport("tcp");
    x = tact_from_data(ctx, TACT_FLOAT32, 1, shape, data);
    cr_assert_eq(tact_read(x, out, sizeof out), TACT_OK);
    s_forge_write(ctx, 1, 0);
    s_forge_write(ctx, 1, 1);
    cr_assert_not(s_forgery_landed(x), "a forged WRITE changed the program's data over CURVE");
    cr_assert_eq(tact_read(x, out, sizeof out), TACT_OK);
    cr_assert_arr_eq(out, data, sizeof data);
    cr_assert_eq(tact_ctx_close(&ctx), TACT_OK);
}
