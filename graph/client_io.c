/* client_io.c - reading datasets: IDX files (the MNIST family's format), gzipped or not, into tensors, every header
 * field and the byte count checked before anything is trusted. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "client_core.h"
#include "mem.h"

/* The IDX element types: the third magic byte, its dtype and size. */
static int s_idx_type(int code, tact_dtype *d) {
    switch (code) {
    case 0x08: *d = TACT_UINT8; return 1;
    case 0x09: *d = TACT_INT8; return 1;
    case 0x0B: *d = TACT_INT16; return 2;
    case 0x0C: *d = TACT_INT32; return 4;
    case 0x0D: *d = TACT_FLOAT32; return 4;
    case 0x0E: *d = TACT_FLOAT64; return 8;
    default: return 0;
    }
}

enum { S_IDX_MAX_BYTES = 1 << 30 }; /* a dataset file larger than 1 GiB is refused, not read */

/* Reads exactly n bytes; 0 when the file ends (or fails) first. */
static int s_read(gzFile f, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        unsigned chunk = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got <= 0) return 0;
        p += got, n -= (size_t)got;
    }
    return 1;
}

/* Why a read came short: zlib's error (corrupt compressed data), or the end. */
static const char *s_why(gzFile f) {
    int code = Z_OK;
    const char *msg = gzerror(f, &code);
    return code != Z_OK && code != Z_STREAM_END && msg && *msg ? msg : "truncated";
}

ti_tensor_t *ti_load_idx(ti_ctx_t *ctx, const char *path) {
    if (!ctx || !path) return ti_null_arg();
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) return tc_error(ctx, TACT_EINVAL, "load_idx: cannot open %s: %s", path, errno ? strerror(errno) : "out of memory");
    ti_tensor_t *r = NULL;
    uint8_t head[4], dimbytes[4 * 16];
    uint8_t *data = NULL;
    if (!s_read(f, head, 4)) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: shorter than an IDX header (4 bytes): %s", path, s_why(f));
        goto done;
    }
    tact_dtype d;
    int size = s_idx_type(head[2], &d), ndim = head[3];
    if (head[0] || head[1] || !size || ndim < 1 || ndim > 16) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: not an IDX file (magic %02x %02x %02x %02x: 0 0, a type of 08, 09, 0b, 0c, 0d or 0e, 1 to 16 dims)", path,
                     head[0], head[1], head[2], head[3]);
        goto done;
    }
    if (!s_read(f, dimbytes, 4 * (size_t)ndim)) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: %s in its %d dims", path, s_why(f), ndim);
        goto done;
    }
    int64_t shape[16], total = size;
    for (int k = 0; k < ndim; k++) {
        const uint8_t *b = dimbytes + 4 * k;
        shape[k] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
        if (shape[k] && total > S_IDX_MAX_BYTES / shape[k]) {
            r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: dims of more than %d bytes", path, S_IDX_MAX_BYTES);
            goto done;
        }
        total *= shape[k];
    }
    if (!(data = ta_malloc(total ? (size_t)total : 1))) {
        r = tc_error(ctx, TACT_ENOMEM, "load_idx: %s: out of memory for %" PRId64 " bytes", path, total);
        goto done;
    }
    if (!s_read(f, data, (size_t)total)) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: %s: the header promises %" PRId64 " bytes of data", path, s_why(f), total);
        goto done;
    }
    uint8_t extra;
    if (gzread(f, &extra, 1) != 0) {
        r = tc_error(ctx, TACT_EINVAL, "load_idx: %s: data past the %" PRId64 " bytes its header promises (or a read error)", path, total);
        goto done;
    }
    /* Big-endian elements to the host's order. */
    for (int64_t i = 0; size > 1 && i < total; i += size)
        for (int a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = data[i + a];
            data[i + a] = data[i + b], data[i + b] = t;
        }
    r = ti_from_data(ctx, d, ndim, shape, data);
done:
    gzclose(f);
    ta_free(data);
    return r;
}
