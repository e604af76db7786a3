/* devices.c - device names ("CPU", "CPU:2", "CL", "CL:1") and what this machine has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "keys.h"
#include "mem.h"
#include "pipeline.h"

static const ta_device_ops_t *const s_kinds[] = {&ta_cpu_device, &ta_cl_device, &ta_cuda_device};
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
    if (!name || !*name) return ta_error_set(err, TACT_EINVAL, "an empty device name (devices are CPU, CPU:k, CL, CL:k, CUDA, CUDA:k)");
    if (strchr(name, ','))
        return ta_error_set(err, TACT_EINVAL, "'%s' is a list of devices where one device is expected (tact_shard splits a tensor over several)", name);
    const char *colon = strchr(name, ':');
    size_t klen = colon ? (size_t)(colon - name) : strlen(name);
    const ta_device_ops_t *kind = NULL;
    for (int k = 0; k < S_NKINDS; k++)
        if (strlen(s_kinds[k]->kind) == klen && strncmp(s_kinds[k]->kind, name, klen) == 0) kind = s_kinds[k];
    if (!kind) return ta_error_set(err, TACT_EINVAL, "device '%s': unknown kind (devices are CPU, CPU:k, CL, CL:k, CUDA, CUDA:k)", name);
    long i = 0;
    if (colon) { /* digits only: no sign, no space, no more than 7 */
        const char *p = colon + 1;
        size_t nd = strspn(p, "0123456789");
        if (nd == 0 || nd > 7 || p[nd])
            return ta_error_set(err, TACT_EINVAL, "device '%s': after '%.*s:' a device number is expected (as in %.*s:1)", name, (int)klen, name, (int)klen, name);
        i = strtol(p, NULL, 10);
    }
    int present = kind == &ta_cpu_device ? (i < TA_MAX_CPU_DEVICES) : (i < kind->count());
    const char *why = !present && kind->why_none && kind->count() == 0 ? kind->why_none() : NULL;
    if (why) return ta_error_set(err, TACT_EDEVICE, "device %s: %s", name, why);
    if (!present) {
        char have[400];
        s_present(have, sizeof have);
        return ta_error_set(err, TACT_EDEVICE, "no device %s on this machine (present: %s)", name, have);
    }
    *ops = kind;
    *index = (int)i;
    return TACT_OK;
}

/* Checks a local device's part of a URI (KIND or KIND:k) for its
 * grammar only: the kind's letters and digits, then an optional number. */
static int s_local_ok(const char *p, size_t len) {
    size_t k = 0;
    while (k < len && ((p[k] >= 'A' && p[k] <= 'Z') || (p[k] >= 'a' && p[k] <= 'z'))) k++;
    if (k == 0 || k > 15) return 0;
    if (k == len) return 1;
    size_t nd = len - k - 1;
    if (p[k] != ':' || nd == 0 || nd > 7) return 0;
    return strspn(p + k + 1, "0123456789") >= nd;
}

int ta_device_uri(const char *uri, size_t len, char *out, ta_error_t *err) {
    out[0] = '\0';
    if (!uri || !len) return ta_error_set(err, TACT_EINVAL, "an empty device name (devices are CPU, CPU:k, CL, CL:k, CUDA, CUDA:k)");
    if (len > TA_URI_MAX) return ta_error_set(err, TACT_EINVAL, "device '%.40s...' is longer than %d bytes", uri, TA_URI_MAX);
    if (memchr(uri, ',', len))
        return ta_error_set(err, TACT_EINVAL, "'%.*s' is a list of devices where one device is expected (tact_shard splits a tensor over several)",
                            (int)len, uri);
    for (size_t k = 0; k < len; k++)
        if (uri[k] <= 0x20 || uri[k] > 0x7e || uri[k] == ',')
            return ta_error_set(err, TACT_EINVAL, "device '%.*s': a space, comma or unprintable byte at %zu", (int)len, uri, k);
    int tcp = len > 6 && memcmp(uri, "tcp://", 6) == 0, ipc = len > 6 && memcmp(uri, "ipc://", 6) == 0;
    if (tcp || ipc || memchr(uri, '/', len)) {
        /* SCHEME://WHERE/DEVICE[?key=KEY]: a device of a tact worker there. */
        size_t body = len;
        for (size_t k = 6; k + 5 <= len && body == len; k++)
            if (memcmp(uri + k, "?key=", 5) == 0) body = k;
        if (body < len && (!tcp || !ta_keys_valid(uri + body + 5, len - body - 5)))
            return ta_error_set(err, TACT_EINVAL, "device '%.*s': %s", (int)len, uri,
                                tcp ? "the key after ?key= is not a CURVE public key (40 characters of Z85)" : "an ipc:// worker takes no key");
        const char *slash = NULL;
        for (size_t k = body; k-- > 6 && !slash;)
            if (uri[k] == '/') slash = uri + k;
        const char *where = uri + 6, *dev = slash ? slash + 1 : NULL;
        size_t wlen = slash ? (size_t)(slash - where) : 0, dlen = dev ? (size_t)(uri + body - dev) : 0;
        int ok = (tcp || ipc) && slash && wlen > 0 && s_local_ok(dev, dlen) && !memchr(uri, '?', body);
        if (ok && tcp) { /* HOST:PORT, the port 1..65535 */
            const char *colon = NULL;
            for (size_t k = 0; k < wlen; k++)
                if (where[k] == ':') colon = where + k;
            size_t plen = colon ? (size_t)(where + wlen - colon - 1) : 0;
            ok = colon && colon > where && plen >= 1 && plen <= 5 && strspn(colon + 1, "0123456789") >= plen;
            if (ok) ok = atol(colon + 1) >= 1 && atol(colon + 1) <= 65535;
        }
        if (!ok)
            return ta_error_set(err, TACT_EINVAL, "device '%.*s': not a device URI (tcp://HOST:PORT/DEVICE?key=KEY or ipc://PATH/DEVICE, DEVICE as CPU, CL:0)",
                                (int)len, uri);
        memcpy(out, uri, body);
        out[body] = '\0';
        return TACT_OK;
    }
    char name[32];
    if (len >= sizeof name) return ta_error_set(err, TACT_EINVAL, "device '%.*s': unknown kind (devices are CPU, CPU:k, CL, CL:k, CUDA, CUDA:k)", (int)len, uri);
    memcpy(name, uri, len);
    name[len] = '\0';
    const ta_device_ops_t *ops;
    int index, rc = ta_device_find(name, &ops, &index, err);
    if (rc != TACT_OK) return rc;
    if (ops == &ta_cpu_device && index == 0) snprintf(out, TA_URI_MAX + 1, "CPU");
    else snprintf(out, TA_URI_MAX + 1, "%s:%d", ops->kind, index);
    return TACT_OK;
}

int ta_device_remote(const char *uri, char *where, char *local, char *key) {
    size_t len = strlen(uri);
    if (len <= 6 || (memcmp(uri, "tcp://", 6) != 0 && memcmp(uri, "ipc://", 6) != 0)) return 0;
    const char *q = strstr(uri + 6, "?key=");
    size_t body = q ? (size_t)(q - uri) : len;
    key[0] = '\0';
    if (q) snprintf(key, TA_KEY_Z85 + 1, "%s", q + 5);
    size_t slash = body;
    while (slash > 6 && uri[slash - 1] != '/') slash--;
    snprintf(where, TA_URI_MAX + 1, "%.*s", (int)(slash - 1), uri);
    snprintf(local, TA_URI_MAX + 1, "%.*s", (int)(body - slash), uri + slash);
    return 1;
}

int ta_device_split(const char *list, size_t len, char ***out, ta_error_t *err) {
    *out = NULL;
    int n = 1;
    for (size_t k = 0; k < len; k++) n += list[k] == ',';
    /* One allocation: the pointers, then the names, each NUL-terminated. */
    char **v = ta_malloc(sizeof *v * (size_t)n + len + 1);
    if (!v) return ta_error_set(err, TACT_ENOMEM, "out of memory"), -1;
    char *bytes = (char *)(v + n);
    if (len) memcpy(bytes, list, len);
    bytes[len] = '\0';
    for (int i = 0, at = 0; i < n; i++) {
        size_t end = (size_t)at;
        while (end < len && bytes[end] != ',') end++;
        bytes[end] = '\0';
        v[i] = bytes + at;
        if (end == (size_t)at) {
            ta_free(v);
            return ta_error_set(err, TACT_EINVAL, "an empty device name"), -1;
        }
        if (end - (size_t)at > TA_URI_MAX) {
            ta_free(v);
            return ta_error_set(err, TACT_EINVAL, "device name '%.40s...' is longer than %d bytes", list + at, TA_URI_MAX), -1;
        }
        at = (int)end + 1;
    }
    *out = v;
    return n;
}

int ta_device_list_parse(const char *list, char ***out, ta_error_t *err) {
    *out = NULL;
    char **raw;
    int count = ta_device_split(list, strlen(list), &raw, err);
    if (count < 0) return err ? err->code : TACT_EINVAL;
    /* The canonical names, in one allocation as ta_device_split's. */
    char **v = ta_malloc(sizeof *v * (size_t)count + (size_t)count * (TA_URI_MAX + 1));
    if (!v) {
        ta_free(raw);
        return ta_error_set(err, TACT_ENOMEM, "out of memory");
    }
    char *bytes = (char *)(v + count);
    int rc = TACT_OK;
    for (int i = 0; i < count && rc == TACT_OK; i++) {
        v[i] = bytes + (size_t)i * (TA_URI_MAX + 1);
        rc = ta_device_uri(raw[i], strlen(raw[i]), v[i], err);
        for (int k = 0; k < i && rc == TACT_OK; k++)
            if (strcmp(v[k], v[i]) == 0) rc = ta_error_set(err, TACT_EINVAL, "%s is listed twice", v[i]);
    }
    ta_free(raw);
    if (rc != TACT_OK) {
        ta_free(v);
        return rc;
    }
    *out = v;
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

int ta_device_describe(const char *uri, ta_device_info_t *info, ta_error_t *err) {
    const ta_device_ops_t *ops;
    int index, rc = ta_device_find(uri, &ops, &index, err);
    /* Virtual CPU devices are the one CPU, by another name. */
    if (rc == TACT_OK) rc = ops->describe(ops == &ta_cpu_device ? 0 : index, info, err);
    if (rc != TACT_OK) return rc;
    snprintf(info->name, sizeof info->name, "%s", uri);
    char *fields[] = {info->name, info->model, info->driver, info->language, info->compiler, info->flags};
    for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) s_printable(fields[f]);
    return TACT_OK;
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

/* A record's string into a char array of size bytes; -1 if it does not fit. */
static int s_str_to(const ta_bytes_t *b, char *out, size_t size) {
    if (b->len >= size) return -1;
    if (b->len) memcpy(out, b->ptr, b->len);
    out[b->len] = '\0';
    return 0;
}

int ta_device_info_of_rec(const ta_device_rec_t *rec, ta_device_info_t *info, char *uri, ta_error_t *err) {
    memset(info, 0, sizeof *info);
    ta_target_rec_t t;
    ta_recs_it_t it;
    ta_recs_begin(&it, &rec->target);
    if (rec->target.n != 1 || !ta_recs_next(&it, &t)) return ta_error_set(err, TACT_EPROTO, "a DEVICE record needs exactly one TARGET");
    /* The local device's name: the URI after its last '/' (a worker's). */
    size_t at = rec->uri.len;
    while (at > 0 && rec->uri.ptr[at - 1] != '/') at--;
    ta_bytes_t local = {rec->uri.ptr + at, rec->uri.len - at};
    if (!rec->uri.len || s_str_to(&rec->uri, uri, TA_URI_MAX + 1) || s_str_to(&local, info->name, sizeof info->name) ||
        s_str_to(&rec->model, info->model, sizeof info->model) || s_str_to(&rec->driver, info->driver, sizeof info->driver) ||
        s_str_to(&t.language, info->language, sizeof info->language) || s_str_to(&t.compiler, info->compiler, sizeof info->compiler) ||
        s_str_to(&t.flags, info->flags, sizeof info->flags) || rec->compute_units > INT32_MAX || t.vector_bytes > 4096 || t.max_group > INT64_MAX)
        return ta_error_set(err, TACT_EPROTO, "DEVICE record of '%.*s': a field out of range", (int)(rec->uri.len < 64 ? rec->uri.len : 64),
                            rec->uri.len ? (const char *)rec->uri.ptr : "");
    info->compute_units = (int)rec->compute_units;
    info->memory = rec->memory;
    info->max_buffer = rec->max_buffer;
    info->max_group = (int64_t)t.max_group;
    info->fp16 = t.fp16 != 0;
    info->fp64 = t.fp64 != 0;
    info->bf16 = t.bf16 != 0;
    info->fma = t.fma != 0;
    info->vector_bytes = (int)t.vector_bytes;
    info->local_memory = t.local_memory;
    return TACT_OK;
}

const char *ta_strict_relaxing_flag(const char *words) {
    /* The options of gcc and clang, OpenCL C and NVRTC that let results
     * depend on the compiler's choices rather than IEEE-754's rounding. */
    static const char *const relaxing[] = {
        "-ffast-math", "-Ofast", "-funsafe-math-optimizations", "-fassociative-math", "-freciprocal-math", "-ffinite-math-only",
        "-fno-signed-zeros", "-fapprox-func", "-ffp-model=fast", "-ffp-model=aggressive", "-mrecip", "-cl-fast-relaxed-math",
        "-cl-mad-enable", "-cl-unsafe-math-optimizations", "-cl-finite-math-only", "-cl-no-signed-zeros", "-use_fast_math",
        "--use_fast_math", "-fmad=true", "--fmad=true", "-ftz=true", "--ftz=true", "-prec-div=false", "--prec-div=false",
        "-prec-sqrt=false", "--prec-sqrt=false"};
    for (const char *p = words ? words : ""; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, " \t");
        for (size_t i = 0; n && i < sizeof relaxing / sizeof *relaxing; i++) {
            size_t k = strlen(relaxing[i]);
            /* "-mrecip" also as "-mrecip=all" */
            if ((n == k || (relaxing[i][1] == 'm' && n > k && p[k] == '=')) && strncmp(p, relaxing[i], k) == 0) return relaxing[i];
        }
        p += n;
    }
    return NULL;
}

int ta_device_strict_why(const ta_device_info_t *info, char *why, size_t len) {
    const char *flag = ta_strict_relaxing_flag(info->compiler);
    if (!flag) flag = ta_strict_relaxing_flag(info->flags);
    if (flag) {
        snprintf(why, len, "its kernel compiler '%s%s%s' relaxes floating point (%s), so its results are the compiler's choice", info->compiler,
                 info->flags[0] ? " " : "", info->flags, flag);
        return 1;
    }
    if (strcmp(info->language, "OpenCL C") == 0 && !strstr(info->flags, "-cl-fp32-correctly-rounded-divide-sqrt")) {
        snprintf(why, len,
                 "its OpenCL driver (%s) does not round float32 division and square root correctly (no CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT), "
                 "so their bits are the driver's",
                 info->driver[0] ? info->driver : "unnamed");
        return 1;
    }
    if (len) why[0] = '\0';
    return 0;
}
