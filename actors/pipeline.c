/* pipeline.c - the CONFIG message: how each stage learns the wiring (the devices as DEVICE records), and which upstream orders its work. */
#include "pipeline.h"

#include <stdio.h>
#include <string.h>

#include "cc.h"
#include "device.h"
#include "mem.h"

void ta_pipeline_fini(ta_pipeline_t *w) {
    ta_free(w->device);
    w->device = NULL;
    w->ndevices = 0;
}

int ta_pipeline_to_msg(const ta_pipeline_t *w, ta_msg_t *m, ta_pipeline_msg_t *store) {
    memset(store, 0, sizeof *store);
    size_t nd = (size_t)w->ndevices;
    store->executors = ta_malloc(sizeof *store->executors * (nd ? nd : 1));
    store->devices = ta_malloc(sizeof *store->devices * (nd ? nd : 1));
    store->targets = ta_malloc(sizeof *store->targets * (nd ? nd : 1));
    if (!store->executors || !store->devices || !store->targets) {
        ta_pipeline_msg_fini(store);
        return TACT_ENOMEM;
    }
    ta_msg_init(m, TA_MSG_CONFIG);
    ta_config_msg_t *c = &m->as.config;
    c->client = w->client;
    c->graph = w->graph;
    c->scheduler = w->scheduler;
    c->planner = w->planner;
    for (size_t i = 0; i < nd; i++) {
        store->executors[i] = w->device[i].executor;
        ta_device_rec_of(&w->device[i].info, w->device[i].uri, &store->devices[i], &store->targets[i]);
    }
    c->executors = ta_u64s(store->executors, nd);
    c->devices = ta_recs(TA_REC_DEVICE, store->devices, nd);
    c->autograd = w->autograd;
    for (int i = 0; i < w->ncompilers; i++) store->compilers[i] = w->compiler[i];
    c->compilers = ta_u64s(store->compilers, (size_t)w->ncompilers);
    c->schedule_cache = w->schedule_cache;
    c->cc = ta_bytes_str(w->cc);
    c->strict = w->strict;
    return TACT_OK;
}

void ta_pipeline_msg_fini(ta_pipeline_msg_t *store) {
    ta_free(store->executors);
    ta_free(store->devices);
    ta_free(store->targets);
    memset(store, 0, sizeof *store);
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
        int n = snprintf(out + used, size - used, "%s%s", i ? sep : "", w->device[i].uri);
        if (n < 0) break;
        used += (size_t)n;
    }
}

int ta_pipeline_device_of(const ta_pipeline_t *w, uint32_t port) {
    for (int i = 0; i < w->ndevices; i++)
        if (w->device[i].executor == port) return i;
    return -1;
}

const char *ta_pipeline_uri(const ta_pipeline_t *w, int i) { return i >= 0 && i < w->ndevices ? w->device[i].uri : "?"; }

static int s_port(uint64_t v, uint32_t *out) {
    if (!v || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

/* CONFIG's devices into n (one per executor, each a DEVICE record with one
 * TARGET, no URI twice).  Returns TACT_OK or an error in err. */
static int s_devices(const ta_config_msg_t *c, ta_pipeline_t *n, ta_error_t *err) {
    if (c->executors.n < 1 || c->devices.n != c->executors.n)
        return ta_error_set(err, TACT_EPROTO, "CONFIG has %u executors and %u devices", c->executors.n, c->devices.n);
    if (!(n->device = ta_calloc(c->devices.n, sizeof *n->device))) return ta_error_set(err, TACT_ENOMEM, "out of memory");
    ta_u64s_it_t it;
    uint64_t id;
    ta_u64s_begin(&it, &c->executors);
    while (ta_u64s_next(&it, &id))
        if (s_port(id, &n->device[n->ndevices++].executor)) return ta_error_set(err, TACT_EPROTO, "CONFIG names executor port 0");
    ta_recs_it_t rit;
    ta_device_rec_t rec;
    ta_recs_begin(&rit, &c->devices);
    for (int i = 0; i < n->ndevices; i++) {
        if (!ta_recs_next(&rit, &rec)) return ta_error_set(err, TACT_EPROTO, "CONFIG's device %d does not decode", i);
        int rc = ta_device_info_of_rec(&rec, &n->device[i].info, n->device[i].uri, err);
        if (rc != TACT_OK) return rc;
        for (int k = 0; k < i; k++)
            if (strcmp(n->device[k].uri, n->device[i].uri) == 0) return ta_error_set(err, TACT_EPROTO, "CONFIG lists %s twice", n->device[i].uri);
    }
    return TACT_OK;
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
        c->compilers.n > TA_MAX_COMPILERS || c->cc.len >= sizeof n.cc || c->strict < 0 || c->strict > 1)
        return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG out of range", ta_actor_name(self));
    ta_error_t err;
    int rc = s_devices(c, &n, &err);
    if (rc != TACT_OK) {
        ta_pipeline_fini(&n);
        return ta_actor_fail(self, rc, "%s: %s", ta_actor_name(self), err.text);
    }
    ta_u64s_begin(&it, &c->compilers);
    while (ta_u64s_next(&it, &id))
        if (s_port(id, &n.compiler[n.ncompilers++])) {
            ta_pipeline_fini(&n);
            return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG names compiler port 0", ta_actor_name(self));
        }
    n.schedule_cache = c->schedule_cache != 0;
    n.strict = (int)c->strict;
    if (c->cc.len) memcpy(n.cc, c->cc.ptr, c->cc.len);
    n.self_device = role == TA_ROLE_EXECUTOR ? ta_pipeline_device_of(&n, ta_actor_id(self)) : -1;
    if (role == TA_ROLE_EXECUTOR && n.self_device < 0) {
        ta_pipeline_fini(&n);
        return ta_actor_fail(self, TACT_EPROTO, "%s: CONFIG does not list this executor", ta_actor_name(self));
    }
    uint32_t up = role == TA_ROLE_GRAPH       ? n.client
                  : role == TA_ROLE_SCHEDULER ? n.graph
                  : role == TA_ROLE_PLANNER   ? n.scheduler
                                              : n.graph;
    /* A compiler's work comes from every executor, merged (seq, sender). */
    uint32_t *ups = role == TA_ROLE_COMPILER ? ta_malloc(sizeof *ups * (size_t)n.ndevices) : &up;
    /* Only the executors of its own process: a worker's executors ask the
     * compilers the worker hosts under the same ids (harness/worker.c). */
    int nups = role == TA_ROLE_COMPILER ? 0 : 1;
    for (int i = 0; ups && role == TA_ROLE_COMPILER && i < n.ndevices; i++)
        if (!ta_rt_is_route(ta_actor_rt(self), n.device[i].executor)) ups[nups++] = n.device[i].executor;
    int src = ups ? ta_actor_set_inputs(self, ups, (size_t)nups) : TACT_ENOMEM;
    if (role == TA_ROLE_COMPILER) ta_free(ups);
    if (src != TACT_OK) {
        ta_pipeline_fini(&n);
        return ta_actor_fail(self, TACT_ENOMEM, "%s: out of memory", ta_actor_name(self));
    }
    *w = n;
    *configured = 1;
    return TACT_OK;
}

int ta_pipeline_ack(ta_actor_t *self, const ta_msg_t *m) {
    ta_msg_t d;
    ta_msg_init(&d, TA_MSG_DONE);
    return ta_actor_reply(self, m, &d);
}
