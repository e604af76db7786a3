/* mpread.c - the bounds-checked msgpack reader. */
#include "mpread.h"

#include <string.h>

void ta_mpr_init(ta_mpr_t *r, const void *buf, size_t len) {
    r->start = r->p = buf;
    r->end = r->start + len;
}

size_t ta_mpr_offset(const ta_mpr_t *r) { return (size_t)(r->p - r->start); }

static size_t s_left(const ta_mpr_t *r) { return (size_t)(r->end - r->p); }

/* Reads an n-byte big-endian unsigned integer at p. */
static uint64_t s_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* An array or map header: a fix form (tag in the high nibble, count in the
 * low one), or a 16- or 32-bit count after the byte t16 or t32. */
static int s_header(ta_mpr_t *r, uint8_t fix, uint8_t t16, uint8_t t32, uint32_t *count) {
    if (s_left(r) < 1) return -1;
    uint8_t b = r->p[0];
    int width = b == t16 ? 2 : b == t32 ? 4 : 0;
    if ((b & 0xf0) == fix) {
        *count = b & 0x0f;
        r->p += 1;
        return 0;
    }
    if (!width || s_left(r) < (size_t)1 + width) return -1;
    *count = (uint32_t)s_be(r->p + 1, width);
    r->p += 1 + width;
    return 0;
}

int ta_mpr_array(ta_mpr_t *r, uint32_t *count) { return s_header(r, 0x90, 0xdc, 0xdd, count); }

int ta_mpr_map(ta_mpr_t *r, uint32_t *pairs) { return s_header(r, 0x80, 0xde, 0xdf, pairs); }

/* Reads any msgpack integer as a sign flag and magnitude bits. */
static int s_int(ta_mpr_t *r, uint64_t *bits, int *is_signed) {
    if (s_left(r) < 1) return -1;
    uint8_t b = r->p[0];
    int width;
    *is_signed = 0;
    if (b <= 0x7f) {
        *bits = b;
        r->p += 1;
        return 0;
    }
    if (b >= 0xe0) {
        *bits = (uint64_t)(int64_t)(int8_t)b;
        *is_signed = 1;
        r->p += 1;
        return 0;
    }
    switch (b) {
    case 0xcc: width = 1; break;
    case 0xcd: width = 2; break;
    case 0xce: width = 4; break;
    case 0xcf: width = 8; break;
    case 0xd0: width = 1; *is_signed = 1; break;
    case 0xd1: width = 2; *is_signed = 1; break;
    case 0xd2: width = 4; *is_signed = 1; break;
    case 0xd3: width = 8; *is_signed = 1; break;
    default: return -1;
    }
    if (s_left(r) < (size_t)1 + width) return -1;
    uint64_t v = s_be(r->p + 1, width);
    if (*is_signed && width < 8 && (v >> (8 * width - 1))) v |= ~(uint64_t)0 << (8 * width);
    *bits = v;
    r->p += 1 + width;
    return 0;
}

int ta_mpr_u64(ta_mpr_t *r, uint64_t *v) {
    const uint8_t *save = r->p;
    uint64_t bits;
    int sig;
    if (s_int(r, &bits, &sig) != 0) return -1;
    if (sig && (int64_t)bits < 0) {
        r->p = save;
        return -1;
    }
    *v = bits;
    return 0;
}

int ta_mpr_i64(ta_mpr_t *r, int64_t *v) {
    const uint8_t *save = r->p;
    uint64_t bits;
    int sig;
    if (s_int(r, &bits, &sig) != 0) return -1;
    if (!sig && bits > (uint64_t)INT64_MAX) {
        r->p = save;
        return -1;
    }
    *v = (int64_t)bits;
    return 0;
}

int ta_mpr_f64(ta_mpr_t *r, double *v) {
    if (s_left(r) < 1) return -1;
    uint8_t b = r->p[0];
    if (b == 0xcb && s_left(r) >= 9) {
        uint64_t u = s_be(r->p + 1, 8);
        memcpy(v, &u, sizeof *v);
        r->p += 9;
        return 0;
    }
    if (b == 0xca && s_left(r) >= 5) {
        uint32_t u = (uint32_t)s_be(r->p + 1, 4);
        float f;
        memcpy(&f, &u, sizeof f);
        *v = f;
        r->p += 5;
        return 0;
    }
    return -1;
}

/* Reads a str (is_bin 0) or bin (is_bin 1) header and its bytes. */
static int s_raw(ta_mpr_t *r, int is_bin, const uint8_t **ptr, size_t *len) {
    if (s_left(r) < 1) return -1;
    uint8_t b = r->p[0];
    int width = -1;
    size_t n = 0;
    if (!is_bin && (b & 0xe0) == 0xa0) {
        width = 0;
        n = b & 0x1f;
    } else if (b == (is_bin ? 0xc4 : 0xd9)) {
        width = 1;
    } else if (b == (is_bin ? 0xc5 : 0xda)) {
        width = 2;
    } else if (b == (is_bin ? 0xc6 : 0xdb)) {
        width = 4;
    }
    if (width < 0 || s_left(r) < (size_t)1 + width) return -1;
    if (width) n = (size_t)s_be(r->p + 1, width);
    if (s_left(r) - 1 - width < n) return -1;
    *ptr = r->p + 1 + width;
    *len = n;
    r->p += 1 + width + n;
    return 0;
}

int ta_mpr_str(ta_mpr_t *r, const uint8_t **ptr, size_t *len) { return s_raw(r, 0, ptr, len); }
int ta_mpr_bin(ta_mpr_t *r, const uint8_t **ptr, size_t *len) { return s_raw(r, 1, ptr, len); }

int ta_mpr_nil(ta_mpr_t *r) {
    if (s_left(r) >= 1 && r->p[0] == 0xc0) {
        r->p += 1;
        return 1;
    }
    return 0;
}

/* Skips one value; depth bounds the recursion a hostile input can cause. */
static int s_skip(ta_mpr_t *r, int depth) {
    if (depth > 64 || s_left(r) < 1) return -1;
    uint8_t b = r->p[0];
    if (b <= 0x7f || b >= 0xe0) { /* fixints, most of an AST: one byte */
        r->p++;
        return 0;
    }
    uint64_t u;
    int sig;
    double f;
    const uint8_t *ptr;
    size_t len;
    uint32_t n;
    if (b >= 0xcc && b <= 0xd3) return s_int(r, &u, &sig);
    if (b == 0xc0 || b == 0xc2 || b == 0xc3) { /* nil, false, true */
        r->p++;
        return 0;
    }
    if (b == 0xca || b == 0xcb) return ta_mpr_f64(r, &f);
    if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) return ta_mpr_str(r, &ptr, &len);
    if (b >= 0xc4 && b <= 0xc6) return ta_mpr_bin(r, &ptr, &len);
    const uint8_t *save = r->p;
    if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) {
        if (ta_mpr_array(r, &n) != 0) return -1;
        for (uint32_t k = 0; k < n; k++)
            if (s_skip(r, depth + 1) != 0) {
                r->p = save;
                return -1;
            }
        return 0;
    }
    if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) { /* maps: 2n values */
        int width = b == 0xde ? 2 : b == 0xdf ? 4 : 0;
        if (s_left(r) < (size_t)1 + width) return -1;
        n = width ? (uint32_t)s_be(r->p + 1, width) : (uint32_t)(b & 0x0f);
        r->p += 1 + width;
        for (uint64_t k = 0; k < 2ull * n; k++)
            if (s_skip(r, depth + 1) != 0) {
                r->p = save;
                return -1;
            }
        return 0;
    }
    return -1; /* ext types and the reserved byte are not used by tact */
}

int ta_mpr_skip(ta_mpr_t *r) { return s_skip(r, 0); }
