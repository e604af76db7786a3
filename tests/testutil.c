/* testutil.c - helpers shared by the Criterion suites. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "device.h"
#include "log.h"
#include "mem.h"
#include "pipeline.h"
#include "replay.h"

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


/* ------------------------------------------------------- random records */

static _Alignas(16) uint8_t s_arena[1 << 22];
static size_t s_used;

void tu_rec_reset(void) { s_used = 0; }

static void *s_take(size_t n) {
    n = (n + 15) & ~(size_t)15;
    cr_assert(s_used + n <= sizeof s_arena, "test arena full");
    void *p = s_arena + s_used;
    s_used += n;
    return p;
}

static void s_rec_random(ta_rec_type_t type, void *rec, uint64_t *rng, int depth);

static ta_recs_t s_recs_random(ta_rec_type_t type, uint64_t *rng, int depth) {
    size_t n = depth > 2 ? 0 : (size_t)(tu_rand(rng) % 4), size = ta_rec_size(type);
    uint8_t *vals = s_take(size * (n ? n : 1));
    for (size_t i = 0; i < n; i++) s_rec_random(type, vals + size * i, rng, depth + 1);
    return ta_recs(type, vals, n);
}

static void s_rec_random(ta_rec_type_t type, void *rec, uint64_t *rng, int depth) {
    size_t nf;
    const ta_rec_field_t *fs = ta_rec_fields(type, &nf);
    memset(rec, 0, ta_rec_size(type));
    for (size_t i = 0; i < nf; i++) {
        char *p = (char *)rec + fs[i].off;
        uint64_t r = tu_rand(rng);
        switch (fs[i].kind) {
        case TA_RK_U64: *(uint64_t *)p = r & 1 ? r : r % 200; break;
        case TA_RK_I64: *(int64_t *)p = (int64_t)(r & 1 ? r : r % 200) * (r & 2 ? -1 : 1); break;
        case TA_RK_MP: { /* a str header over the bytes that follow */
            size_t n = (size_t)(r >> 8) % 31;
            uint8_t *b = s_take(n + 1);
            b[0] = (uint8_t)(0xa0 | n);
            for (size_t k = 0; k < n; k++) b[k + 1] = (uint8_t)tu_rand(rng);
            *(ta_bytes_t *)p = (ta_bytes_t){b, n + 1};
            break;
        }
        case TA_RK_STR: { /* printable ASCII */
            size_t n = (size_t)(r >> 8) % 40;
            uint8_t *b = s_take(n + 1);
            for (size_t k = 0; k < n; k++) b[k] = (uint8_t)(0x20 + tu_rand(rng) % 95);
            *(ta_bytes_t *)p = (ta_bytes_t){n ? b : NULL, n};
            break;
        }
        case TA_RK_U64S: {
            size_t n = (size_t)(r >> 8) % 9;
            uint64_t *v = s_take(sizeof *v * (n ? n : 1));
            for (size_t k = 0; k < n; k++) v[k] = tu_rand(rng) >> (tu_rand(rng) % 64);
            *(ta_u64s_t *)p = ta_u64s(v, n);
            break;
        }
        case TA_RK_U64A:
        case TA_RK_I64A: {
            uint32_t n = (uint32_t)((r >> 8) % (fs[i].cap + 1));
            for (uint32_t k = 0; k < n; k++) ((uint64_t *)p)[k] = tu_rand(rng) >> (tu_rand(rng) % 64);
            *(uint32_t *)((char *)rec + fs[i].count_off) = n;
            break;
        }
        case TA_RK_RECS: *(ta_recs_t *)p = s_recs_random((ta_rec_type_t)fs[i].sub, rng, depth); break;
        }
    }
}

void tu_rec_random(ta_rec_type_t type, void *rec, uint64_t *rng) { s_rec_random(type, rec, rng, 0); }
ta_recs_t tu_recs_random(ta_rec_type_t type, uint64_t *rng) { return s_recs_random(type, rng, 0); }

void tu_window(const int64_t *p, tact_window *w) {
    tact_window_default(w);
    w->groups = (int)p[0];
    w->stride[0] = p[1], w->stride[1] = p[2];
    w->dilation[0] = p[3], w->dilation[1] = p[4];
    w->npad = (int)p[5];
    for (int i = 0; i < 4; i++) w->padding[i] = p[6 + i];
    w->count_include_pad = (int)p[10];
    w->kernel[0] = p[11], w->kernel[1] = p[12];
}

void tu_spoil_bulk(ta_msg_t *m, uint8_t **copy) {
    *copy = malloc(m->bulk.len);
    memcpy(*copy, m->bulk.ptr, m->bulk.len);
    (*copy)[m->bulk.len / 2] ^= 0x10;
    m->bulk.ptr = *copy;
}

void tu_replay_stage_changed(char *path, const char *name, const ta_actor_ops_t *ops, uint32_t port, int type, int bulk,
                             void (*change)(ta_msg_t *m, uint8_t **copy), ta_capture_fn capture, void *ud) {
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    const ta_log_stream_info_t *st = NULL;
    for (size_t i = 0; i < log->nstreams && !st; i++)
        if (strcmp(log->streams[i].name, name) == 0 && (!port || log->streams[i].id == port)) st = &log->streams[i];
    cr_assert(st, "no %s on port %u", name, port);
    ta_actor_t *a = ta_stage_new(ops, NULL, st->id, capture, ud, &err);
    cr_assert(a, "%s", err.text);
    int changed = 0;
    for (size_t k = 0; k < st->nrecords; k++) {
        const ta_log_record_t *rec = &st->records[k];
        if (rec->dir != TA_LOG_IN) continue;
        ta_msg_t m;
        cr_assert_eq(ta_log_record_msg(rec, &m, &err), TACT_OK);
        uint8_t *copy = NULL;
        if ((int)m.type == type && !changed && (!bulk || m.bulk.len)) {
            change(&m, &copy);
            changed = 1;
        }
        ta_stage_dispatch(a, &m);
        free(copy);
    }
    cr_assert(changed, "the %s got no %s", name, ta_msg_type_name(type));
    ta_stage_destroy(&a);
    ta_log_free(&log);
    unlink(path);
}

void tu_replay_executor_changed(char *path, uint32_t port, int type, int bulk, void (*change)(ta_msg_t *m, uint8_t **copy),
                                ta_capture_fn capture, void *ud) {
    tu_replay_stage_changed(path, "executor", &ta_executor_ops, port, type, bulk, change, capture, ud);
}

void tu_fake_cc(const char *dir, const char *fmt, ...) {
    char path[1200], cc[1300];
    snprintf(path, sizeof path, "%s/cc.sh", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
    snprintf(cc, sizeof cc, "sh %s", path);
    setenv("TACT_CC", cc, 1);
    snprintf(path, sizeof path, "%s/cache", dir);
    setenv("TACT_CACHE_DIR", path, 1);
}

int tu_log_sent(const char *path, const char *stream, int type, void (*fn)(const ta_msg_t *m, void *ud), void *ud) {
    ta_log_t *log;
    ta_error_t err;
    cr_assert_eq(ta_log_load(path, &log, &err), TACT_OK, "%s", err.text);
    int n = 0;
    for (size_t i = 0; i < log->nstreams; i++) {
        if (strcmp(log->streams[i].name, stream) != 0) continue;
        for (size_t k = 0; k < log->streams[i].nrecords; k++) {
            const ta_log_record_t *rec = &log->streams[i].records[k];
            ta_msg_t m;
            if (rec->dir != TA_LOG_OUT || ta_log_record_msg(rec, &m, &err) != TACT_OK || (int)m.type != type) continue;
            if (fn) fn(&m, ud);
            n++;
        }
    }
    ta_log_free(&log);
    return n;
}

void tu_wiring(ta_pipeline_t *w, int ncompilers, int n, const uint32_t *executors) {
    memset(w, 0, sizeof *w);
    w->client = 1, w->graph = 2, w->scheduler = 3, w->planner = 4, w->autograd = 8;
    w->ncompilers = ncompilers;
    for (int i = 0; i < ncompilers; i++) w->compiler[i] = 5 + (uint32_t)i;
    w->device = ta_calloc((size_t)n, sizeof *w->device);
    cr_assert(w->device);
    w->ndevices = n;
    w->self_device = -1;
    for (int i = 0; i < n; i++) {
        ta_error_t err;
        if (i) snprintf(w->device[i].uri, sizeof w->device[i].uri, "CPU:%d", i);
        else snprintf(w->device[i].uri, sizeof w->device[i].uri, "CPU");
        cr_assert_eq(ta_device_describe(w->device[i].uri, &w->device[i].info, &err), TACT_OK, "%s", err.text);
        w->device[i].executor = executors[i];
    }
}

int tu_have_device(const char *prefix) {
    if (strcmp(prefix, "CPU") == 0) return 1;
    tact_device_info d[16];
    int n = tact_devices(d, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (strncmp(d[i].name, prefix, strlen(prefix)) == 0) return 1;
    return 0;
}

long tu_live_bytes;

void *tu_counting(void *ud, void *ptr, size_t old_size, size_t size) {
    (void)ud;
    if (!size) {
        if (ptr) __atomic_sub_fetch(&tu_live_bytes, (long)old_size, __ATOMIC_RELAXED);
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, size);
    if (p) __atomic_add_fetch(&tu_live_bytes, (long)size - (long)(ptr ? old_size : 0), __ATOMIC_RELAXED);
    return p;
}
