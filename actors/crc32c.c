/* crc32c.c - CRC-32C: SSE4.2 instructions when present, a table otherwise (same results). */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

/* zlib's crc32 cost half the time of logging a small message; the SSE4.2
 * crc32 instruction does 8 bytes a cycle. */

static uint32_t s_table[256];
static int s_have_sse42;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void s_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        s_table[i] = c;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    s_have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t s_soft(uint32_t c, const uint8_t *p, size_t n) {
    while (n--) c = s_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t s_hard(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
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
