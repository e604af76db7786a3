/* hash.c - the 128-bit byte hash of hash.h: four multiply-xorshift lanes over
 * 64-bit words, folded into two. */
#include "hash.h"

#include <string.h>

/* One lane step; each lane is a dependent chain of about five cycles, so four
 * of them side by side take 32 bytes in the time one took 8 (the log hashes
 * every bulk it records, and kernels' objects are bulks of ~15 KB). */
static inline uint64_t s_mix(uint64_t h, uint64_t w, uint64_t k, int r) {
    h = (h ^ w) * k;
    return h ^ h >> r;
}

static inline uint64_t s_word(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* The finalizer of MurmurHash3's 64-bit hash. */
static inline uint64_t s_fmix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ h >> 33;
}

void ta_hash128(const void *bytes, size_t len, uint64_t out[2]) {
    const unsigned char *p = bytes;
    uint64_t a = 0xcbf29ce484222325ull ^ len, b = 0x84222325cbf29ce4ull, c = 0x9e3779b97f4a7c15ull, d = 0x243f6a8885a308d3ull ^ len;
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        a = s_mix(a, s_word(p + i), 0xff51afd7ed558ccdull, 29);
        b = s_mix(b, s_word(p + i + 8), 0xc4ceb9fe1a85ec53ull, 31);
        c = s_mix(c, s_word(p + i + 16), 0x9fb21c651e98df25ull, 28);
        d = s_mix(d, s_word(p + i + 24), 0xd6e8feb86659fd93ull, 32);
    }
    for (; i + 8 <= len; i += 8) a = s_mix(a, s_word(p + i), 0xff51afd7ed558ccdull, 29);
    uint64_t tail = 0;
    for (size_t k = 0; i + k < len; k++) tail |= (uint64_t)p[i + k] << 8 * k;
    b = s_mix(b, tail, 0xc4ceb9fe1a85ec53ull, 31);
    /* Each output depends on every lane, through a full-avalanche finalizer. */
    out[0] = s_fmix(a + s_fmix(c ^ len) + (b ^ d >> 1));
    out[1] = s_fmix(b + s_fmix(d) + (a ^ c >> 1));
}
