/* devices.c - device names ("CPU", "CPU:2", "CL", "CL:1") and what this machine has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "pipeline.h"

static const ta_device_ops_t *const s_kinds[] = {&ta_cpu_device, &ta_cl_device};
enum { S_NKINDS = sizeof s_kinds / sizeof *s_kinds };

/* The names of the devices present, for error messages ("CPU, CL:0"). */
static void s_present(char *out, size_t len) {
    out[0] = '\0';
    for (int k = 0; k < S_NKINDS; k++) {
        int n = s_kinds[k]->count();
        for (int i = 0; i < n; i++) {
            size_t used = strlen(out);
            if (k == 0) snprintf(out + used, len - used, "%sCPU (CPU:0..%d)", used ? ", " : "", TA_MAX_CPU_DEVICES - 1);
            else snprintf(out + used, len - used, "%s%s:%d", used ? ", " : "", s_kinds[k]->kind, i);
        }
    }
}

int ta_device_find(const char *name, const ta_device_ops_t **ops, int *index, ta_error_t *err) {
    if (!name || !*name) return ta_error_set(err, TACT_EINVAL, "an empty device name (devices are CPU, CPU:k, CL, CL:k)");
    if (strchr(name, ','))
        return ta_error_set(err, TACT_EINVAL, "'%s' is a list of devices where one device is expected (tact_shard splits a tensor over several)", name);
    const char *colon = strchr(name, ':');
    size_t klen = colon ? (size_t)(colon - name) : strlen(name);
    const ta_device_ops_t *kind = NULL;
    for (int k = 0; k < S_NKINDS; k++)
        if (strlen(s_kinds[k]->kind) == klen && strncmp(s_kinds[k]->kind, name, klen) == 0) kind = s_kinds[k];
    if (!kind) {
        if (klen == 4 && strncmp(name, "CUDA", 4) == 0)
            return ta_error_set(err, TACT_EDEVICE, "device %s: CUDA devices are not supported by this build yet (devices are CPU, CPU:k, CL, CL:k)", name);
        return ta_error_set(err, TACT_EINVAL, "device '%s': unknown kind (devices are CPU, CPU:k, CL, CL:k)", name);
    }
    long i = 0;
    if (colon) { /* digits only: no sign, no space, no more than 7 */
        const char *p = colon + 1;
        size_t nd = strspn(p, "0123456789");
        if (nd == 0 || nd > 7 || p[nd])
            return ta_error_set(err, TACT_EINVAL, "device '%s': after '%.*s:' a device number is expected (as in %.*s:1)", name, (int)klen, name, (int)klen, name);
        i = strtol(p, NULL, 10);
    }
    int present = kind == &ta_cpu_device ? (i < TA_MAX_CPU_DEVICES) : (i < kind->count());
    if (!present) {
        char have[400];
        s_present(have, sizeof have);
        return ta_error_set(err, TACT_EDEVICE, "no device %s on this machine (present: %s)", name, have);
    }
    *ops = kind;
    *index = (int)i;
    return TACT_OK;
}

int ta_device_canonical(const char *name, char out[16], ta_error_t *err) {
    const ta_device_ops_t *ops;
    int index, rc = ta_device_find(name, &ops, &index, err);
    if (rc != TACT_OK) return rc;
    if (ops == &ta_cpu_device && index == 0) snprintf(out, 16, "CPU");
    else snprintf(out, 16, "%s:%d", ops->kind, index);
    return TACT_OK;
}

int ta_device_names(const char *list, size_t len, char (*out)[16], int max, ta_error_t *err) {
    int n = 0;
    for (size_t at = 0;; n++) {
        size_t end = at;
        while (end < len && list[end] != ',') end++;
        if (end == at) return ta_error_set(err, TACT_EINVAL, "an empty device name"), -1;
        if (end - at >= sizeof out[0]) return ta_error_set(err, TACT_EINVAL, "device name '%.*s...' is too long", 15, list + at), -1;
        if (n == max) return ta_error_set(err, TACT_EINVAL, "more than %d devices", max), -1;
        memcpy(out[n], list + at, end - at);
        out[n][end - at] = '\0';
        if (end == len) return n + 1;
        at = end + 1;
    }
}

int ta_device_list_parse(const char *list, char (*out)[16], int max, ta_error_t *err) {
    char raw[TA_MAX_DEVICES][16];
    if (max > TA_MAX_DEVICES) max = TA_MAX_DEVICES;
    int count = ta_device_names(list, strlen(list), raw, max, err);
    if (count < 0) return err ? err->code : TACT_EINVAL;
    for (int i = 0; i < count; i++) {
        int rc = ta_device_canonical(raw[i], out[i], err);
        if (rc != TACT_OK) return rc;
        for (int k = 0; k < i; k++)
            if (strcmp(out[k], out[i]) == 0) return ta_error_set(err, TACT_EINVAL, "%s is listed twice", out[i]);
    }
    return count;
}

void ta_cond_init_monotonic(pthread_cond_t *c) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

void ta_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000 * 1000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(c, m, &ts);
}

int ta_guards_verify(const uint8_t *before, const uint8_t *after, const char *what, ta_error_t *err) {
    for (size_t i = 0; i < TA_GUARD_BYTES; i++)
        if (before[i] != ta_guard_byte(i))
            return ta_error_set(err, TACT_EDEVICE, "%s: a kernel wrote %zu bytes before the start of a buffer", what, TA_GUARD_BYTES - i);
    for (size_t i = TA_GUARD_BYTES; i-- > 0;)
        if (after[i] != ta_guard_byte(i))
            return ta_error_set(err, TACT_EDEVICE, "%s: a kernel wrote %zu bytes past the end of a buffer", what, i + 1);
    return TACT_OK;
}

/* Bytes a driver reported that are not printable ASCII become '?': the
 * strings are shown on terminals and travel in DEVICE records. */
static void s_printable(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) *s = '?';
}

int ta_device_list(ta_device_info_t *out, int max) {
    int n = 0;
    for (int k = 0; k < S_NKINDS; k++) {
        int c = s_kinds[k]->count();
        for (int i = 0; i < c; i++, n++) {
            ta_error_t err;
            if (n < max && s_kinds[k]->describe(i, &out[n], &err) != TACT_OK) {
                memset(&out[n], 0, sizeof out[n]);
                snprintf(out[n].name, sizeof out[n].name, "%s:%d", s_kinds[k]->kind, i);
                snprintf(out[n].model, sizeof out[n].model, "(%s)", err.text);
            }
            if (n < max) {
                char *fields[] = {out[n].name, out[n].model, out[n].driver, out[n].language, out[n].compiler, out[n].flags};
                for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) s_printable(fields[f]);
            }
        }
    }
    return n;
}

void ta_device_rec_of(const ta_device_info_t *info, const char *uri, ta_device_rec_t *rec, ta_target_rec_t *t) {
    memset(t, 0, sizeof *t);
    t->language = ta_bytes_str(info->language);
    t->vector_bytes = (uint64_t)info->vector_bytes;
    t->fma = (uint64_t)info->fma;
    t->local_memory = info->local_memory;
    t->max_group = info->max_group > 0 ? (uint64_t)info->max_group : 1;
    t->fp16 = (uint64_t)info->fp16;
    t->bf16 = (uint64_t)info->bf16;
    t->fp64 = (uint64_t)info->fp64;
    t->compiler = ta_bytes_str(info->compiler);
    t->flags = ta_bytes_str(info->flags);
    memset(rec, 0, sizeof *rec);
    rec->uri = ta_bytes_str(uri);
    rec->kind = (ta_bytes_t){(const uint8_t *)info->name, strcspn(info->name, ":")};
    rec->model = ta_bytes_str(info->model);
    rec->driver = ta_bytes_str(info->driver);
    rec->compute_units = info->compute_units > 0 ? (uint64_t)info->compute_units : 0;
    rec->memory = info->memory;
    rec->max_buffer = info->max_buffer;
    rec->target = ta_recs(TA_REC_TARGET, t, 1);
}
