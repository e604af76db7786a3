/* pipeline.c - the CONFIG message: how each stage learns the wiring, and which upstream orders its work. */
#include "pipeline.h"

#include <stdio.h>
#include <string.h>

#include "cc.h"
#include "device.h"

void ta_pipeline_to_msg(const ta_pipeline_t *w, ta_msg_t *m, uint64_t *compilers, uint64_t *executors, char *devices, size_t devices_size) {
    ta_msg_init(m, TA_MSG_CONFIG);
    ta_config_msg_t *c = &m->as.config;
    c->client = w->client;
    c->graph = w->graph;
    c->scheduler = w->scheduler;
    c->planner = w->planner;
    for (int i = 0; i < w->ndevices; i++) executors[i] = w->executor[i];
    ta_pipeline_device_list(w, ",", devices, devices_size);
    c->executors = ta_u64s(executors, (size_t)w->ndevices);
    c->autograd = w->autograd;
    for (int i = 0; i < w->ncompilers; i++) compilers[i] = w->compiler[i];
    c->compilers = ta_u64s(compilers, (size_t)w->ncompilers);
    c->schedule_cache = w->schedule_cache;
    c->cc = ta_bytes_str(w->cc);
    c->devices = ta_bytes_str(devices);
}

void ta_stage_local(const void *arg, ta_stage_local_t *out) {
    if (arg) {
        *out = *(const ta_stage_local_t *)arg;
        return;
    }
    memset(out, 0, sizeof *out);
    out->cpu_threads = 1;
    out->compile_limit_s = 300;
    ta_cc_cache_dir(out->cache_dir, sizeof out->cache_dir);
}

void ta_pipeline_device_list(const ta_pipeline_t *w, const char *sep, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < w->ndevices && used < size; i++) {
        int n = snprintf(out + used, size - used, "%s%s", i ? sep : "", w->device[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

int ta_pipeline_device_of(const ta_pipeline_t *w, uint32_t port) {
    for (int i = 0; i < w->ndevices; i++)
        if (w->executor[i] == port) return i;
    return -1;
}

/* CONFIG's device list (names joined by commas) into n->device, one per
 * executor; -1 when the counts differ or a name is empty or long. */
static int s_devices(const ta_bytes_t list, ta_pipeline_t *n) {
    ta_error_t err;
    return ta_device_names((const char *)list.ptr, list.len, n->device, TA_MAX_DEVICES, &err) == n->ndevices ? 0 : -1;
}

static int s_port(uint64_t v, uint32_t *out) {
    if (!v || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

int ta_pipeline_configure(ta_actor_t *self, const ta_msg_t *m, ta_pipeline_t *w, int *configured, ta_role_t role) {
    if (*configured) return ta_actor_fail(self, TACT_EINVAL, "%s: configured already", ta_actor_name(self));
    const ta_config_msg_t *c = &m->as.config;
    ta_pipeline_t n;
    memset(&n, 0, sizeof n);
    uint64_t id;
    ta_u64s_it_t it;
    if (s_port(c->client, &n.client) || s_port(c->graph, &n.graph) || s_port(c->scheduler, &n.scheduler) ||
        s_port(c->planner, &n.planner) || s_port(c->autograd, &n.autograd) || c->compilers.n < 1 ||
        c->compilers.n > TA_MAX_COMPILERS || c->cc.len >= sizeof n.cc || c->executors.n < 1 || c->executors.n > TA_MAX_DEVICES)
        return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG out of range", ta_actor_name(self));
    ta_u64s_begin(&it, &c->executors);
    while (ta_u64s_next(&it, &id))
        if (s_port(id, &n.executor[n.ndevices++])) return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG names executor port 0", ta_actor_name(self));
    if (s_devices(c->devices, &n) != 0)
        return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG's devices do not name one device per executor", ta_actor_name(self));
    ta_u64s_begin(&it, &c->compilers);
    while (ta_u64s_next(&it, &id))
        if (s_port(id, &n.compiler[n.ncompilers++])) return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG names compiler port 0", ta_actor_name(self));
    n.schedule_cache = c->schedule_cache != 0;
    if (c->cc.len) memcpy(n.cc, c->cc.ptr, c->cc.len);
    n.self_device = role == TA_ROLE_EXECUTOR ? ta_pipeline_device_of(&n, ta_actor_id(self)) : -1;
    if (role == TA_ROLE_EXECUTOR && n.self_device < 0)
        return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG does not list this executor", ta_actor_name(self));
    uint32_t up = role == TA_ROLE_GRAPH       ? n.client
                  : role == TA_ROLE_SCHEDULER ? n.graph
                  : role == TA_ROLE_PLANNER   ? n.scheduler
                  : role == TA_ROLE_COMPILER  ? n.planner
                                              : n.graph;
    if (ta_actor_set_inputs(self, &up, 1) != TACT_OK) return ta_actor_fail(self, TACT_ENOMEM, "%s: out of memory", ta_actor_name(self));
    *w = n;
    *configured = 1;
    return TACT_OK;
}

int ta_pipeline_ack(ta_actor_t *self, const ta_msg_t *m) {
    ta_msg_t d;
    ta_msg_init(&d, TA_MSG_DONE);
    return ta_actor_reply(self, m, &d);
}
