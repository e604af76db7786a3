/* seed.c - writes valid envelopes, a real message log and model and dataset files as starting corpora for the fuzzers. */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "actor.h"
#include "ast.h"
#include "builtin.h"
#include "log.h"
#include "tact.h"

static int s_write(const char *dir, const char *name, const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) return -1;
    return fclose(f);
}

/* The inboxes of the pipeline's stages in a small recorded tensor program,
 * one file per message: a byte naming the stage (fuzz_stages.c), then the
 * envelope. */
static int s_stage_seeds(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/run.tactlog", dir);
    tact_options o;
    tact_options_default(&o);
    o.log_path = path;
    o.cpu_threads = 1;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &o) != TACT_OK) return 1;
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    int axis = 1;
    tact_tensor *a = tact_set_requires_grad(tact_from_data(ctx, TACT_FLOAT32, 2, shape, x), 1);
    tact_tensor *s = tact_sum(tact_mul(tact_exp2(a), tact_flip(a, 1, &axis)), 1, &axis, 1);
    float out[2];
    int rc = tact_read(s, out, sizeof out);
    /* A backward: the graph's BACKWARD and GRADS, the engine's BACKWARD. */
    if (rc == TACT_OK) rc = tact_backward(tact_sum(s, -1, NULL, 0), NULL);
    if (rc == TACT_OK) rc = tact_read(tact_grad(a), x, sizeof x);
    tact_assign(a, tact_add(a, tact_scalar(ctx, 1.0)));
    if (rc == TACT_OK) rc = tact_realize(ctx, 1, &a);
    tact_ctx_close(&ctx);
    ta_log_t *log;
    ta_error_t err;
    if (rc != TACT_OK || ta_log_load(path, &log, &err) != TACT_OK) return 1;
    remove(path);
    static const char *const names[5] = {"graph", "scheduler", "planner", "executor", "autograd"};
    int n = 0;
    for (size_t i = 0; i < log->nstreams; i++)
        for (int k = 0; k < 5; k++) {
            if (strcmp(log->streams[i].name, names[k]) != 0) continue;
            for (size_t r = 0; r < log->streams[i].nrecords; r++) {
                const ta_log_record_t *rec = &log->streams[i].records[r];
                if (rec->dir != TA_LOG_IN || rec->env_len > 8000) continue;
                uint8_t buf[8192];
                buf[0] = (uint8_t)k;
                memcpy(buf + 1, rec->env, rec->env_len);
                char name[64];
                snprintf(name, sizeof name, "%s-%zu", names[k], r);
                if (s_write(dir, name, buf, rec->env_len + 1) != 0) return 1;
                n++;
            }
        }
    ta_log_free(&log);
    return n ? 0 : 1;
}

/* Files for fuzz_loaders.c, each behind the byte that picks its loader
 * (even: safetensors, the tensor "x" or another name; odd: IDX): a
 * safetensors file of three tensors with metadata, IDX files of bytes and
 * of float32, and a gzipped one. */
static int s_loader_seeds(const char *dir) {
    static const char st_head[] = "{\"__metadata__\":{\"format\":\"pt\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                                  "\"weight\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[16,19]},"
                                  "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[19,27]}}";
    uint8_t st[512] = {0};
    size_t hn = sizeof st_head - 1, n = 1;
    for (int i = 0; i < 8; i++) st[n++] = (uint8_t)(hn >> (8 * i));
    memcpy(st + n, st_head, hn);
    n += hn;
    for (int i = 0; i < 27; i++) st[n++] = (uint8_t)(i * 7);
    static const uint8_t idx_u8[] = {1, 0, 0, 0x08, 0x01, 0, 0, 0, 3, 7, 8, 9};
    static const uint8_t idx_f32[] = {3, 0, 0, 0x0d, 0x02, 0, 0, 0, 1, 0, 0, 0, 2, 0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0};
    if (s_write(dir, "safetensors", st, n) != 0 || s_write(dir, "idx-u8", idx_u8, sizeof idx_u8) != 0 ||
        s_write(dir, "idx-f32", idx_f32, sizeof idx_f32) != 0)
        return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/idx-gz", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fputc(5, f) == EOF || fclose(f) != 0) return 1;
    gzFile gz = gzopen(path, "ab");
    if (!gz || gzwrite(gz, idx_f32 + 1, sizeof idx_f32 - 1) != (int)(sizeof idx_f32 - 1)) return 1;
    return gzclose(gz) == Z_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: fuzz_seed ENVELOPE_DIR LOG_DIR AST_DIR STAGES_DIR LOADERS_DIR\n");
        return 2;
    }
    if (s_loader_seeds(argv[5]) != 0) {
        fprintf(stderr, "fuzz_seed: cannot write the loaders' seeds into %s\n", argv[5]);
        return 1;
    }
    /* A reduce kernel over a permuted, padded load: sum(x^T padded) + 1. */
    static ta_ast_t ast;
    int64_t full[2] = {4, 6};
    ta_ast_init(&ast, 2, full, 2);
    ast.nbufs = 2;
    ast.buf_dtype[0] = ast.buf_dtype[1] = TACT_FLOAT32;
    ast.buf_size[0] = 4;
    ast.buf_size[1] = 20;
    ta_vstack_t in, out;
    int64_t src[2] = {5, 4}, pads[2][2] = {{0, 1}, {0, 0}}, outs[2] = {4, 1};
    int order[2] = {1, 0};
    ta_vstack_init(&in, 2, src);
    ta_vstack_pad(&in, (const int64_t(*)[2])pads);
    ta_vstack_permute(&in, order);
    ta_vstack_init(&out, 2, outs);
    int vin = ta_ast_view(&ast, &in), vout = ta_ast_view(&ast, &out);
    ta_ast_node_t ld = {TA_OP_LOAD, TACT_FLOAT32, 0, {0, 0, 0}, 1, (int16_t)vin, {0}, 0};
    ta_ast_node_t sm = {TA_OP_SUM, TACT_FLOAT32, 1, {0, 0, 0}, 0, -1, {0}, 0};
    ta_ast_node_t one = {TA_OP_CONST, TACT_FLOAT32, 0, {0, 0, 0}, 0, -1, {.f = 1.0}, 0};
    ta_ast_node_t ad = {TA_OP_ADD, TACT_FLOAT32, 2, {1, 2, 0}, 0, -1, {0}, 0};
    ta_ast_node_t st = {TA_OP_STORE, TACT_FLOAT32, 1, {3, 0, 0}, 0, (int16_t)vout, {0}, 0};
    ta_ast_add(&ast, ld), ta_ast_add(&ast, sm), ta_ast_add(&ast, one), ta_ast_add(&ast, ad), ta_ast_add(&ast, st);
    msgpack_sbuffer ab;
    msgpack_sbuffer_init(&ab);
    msgpack_packer apk;
    msgpack_packer_init(&apk, &ab, msgpack_sbuffer_write);
    if (ta_ast_pack(&ast, &apk) != 0 || s_write(argv[3], "reduce", ab.data, ab.size) != 0) return 1;
    msgpack_sbuffer_destroy(&ab);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int t = 0; t < TA_MSG__COUNT; t++) {
        ta_msg_t m;
        ta_msg_init(&m, (ta_msg_type_t)t);
        m.sender = 3, m.dest = 4, m.seq = 5, m.corr = 6;
        if (t == TA_MSG_ECHO || t == TA_MSG_ECHO_REPLY || t == TA_MSG_DATA) m.as.echo.data = ta_bytes_str("seed");
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
    if (ta_rt_destroy(&rt, NULL) != TACT_OK) return 1;
    return s_stage_seeds(argv[4]);
}
