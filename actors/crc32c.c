/* crc32c.c - CRC-32C: SSE4.2 instructions when present, a table otherwise (same results). */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

/* zlib's crc32 cost half the time of logging a small message; the SSE4.2
 * crc32 instruction does 8 bytes a cycle. */

static uint32_t s_table[256];
static int s_have_sse42;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void s_init_shift(void);

static void s_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        s_table[i] = c;
    }
    s_init_shift();
#if defined(__x86_64__)
    __builtin_cpu_init();
    s_have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t s_soft(uint32_t c, const uint8_t *p, size_t n) {
    while (n--) c = s_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

/* x * x^(8 * S_LANE) mod P for the lane combine below, bytewise: four
 * tables of the linear map, so a shift costs four lookups. */
enum { S_LANE = 512 };
static uint32_t s_shift[4][256];

/* a * b in GF(2)[x] mod the CRC-32C polynomial, bit-reflected. */
static uint32_t s_gf_mul(uint32_t a, uint32_t b) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) r ^= b;
        a <<= 1;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return r;
}

static void s_init_shift(void) {
    /* x^(8 * S_LANE): x^1 is 0x40000000 reflected; square and multiply. */
    uint32_t x8n = 0x80000000u, base = 0x40000000u; /* 1 and x */
    for (uint64_t e = 8 * (uint64_t)S_LANE; e; e >>= 1, base = s_gf_mul(base, base))
        if (e & 1) x8n = s_gf_mul(x8n, base);
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++) s_shift[k][v] = s_gf_mul(v << 8 * k, x8n);
}

static inline uint32_t s_shift_lane(uint32_t c) {
    return s_shift[0][c & 0xff] ^ s_shift[1][c >> 8 & 0xff] ^ s_shift[2][c >> 16 & 0xff] ^ s_shift[3][c >> 24];
}

#if defined(__x86_64__)
/* One crc32 instruction has a latency of three cycles and a throughput of
 * one, so three lanes of S_LANE bytes run side by side and are joined by
 * shifting: the log checks every bulk it records (objects are ~15 KB). */
__attribute__((target("sse4.2"))) static uint32_t s_hard(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
    for (; n >= 3 * S_LANE; n -= 3 * S_LANE, p += 3 * S_LANE) {
        uint64_t c1 = 0, c2 = 0, w0, w1, w2;
        for (size_t i = 0; i < S_LANE; i += 8) {
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + S_LANE + i, 8);
            memcpy(&w2, p + 2 * S_LANE + i, 8);
            c64 = __builtin_ia32_crc32di(c64, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        c64 = s_shift_lane(s_shift_lane((uint32_t)c64) ^ (uint32_t)c1) ^ (uint32_t)c2;
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
    }
    c = (uint32_t)c64;
    for (; n; n--) c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t ta_crc32c_portable(uint32_t crc, const void *p, size_t n) {
    pthread_once(&s_once, s_init);
    return ~s_soft(~crc, p, n);
}

uint32_t ta_crc32c(uint32_t crc, const void *p, size_t n) {
    pthread_once(&s_once, s_init);
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (s_have_sse42) return ~s_hard(c, p, n);
#endif
    return ~s_soft(c, p, n);
}
