/* hash.c - the 128-bit byte hash of hash.h: two multiply-xorshift lanes over 64-bit words. */
#include "hash.h"

#include <string.h>

void ta_hash128(const void *bytes, size_t len, uint64_t out[2]) {
    const unsigned char *p = bytes;
    uint64_t h1 = 0xcbf29ce484222325ull ^ len, h2 = 0x84222325cbf29ce4ull, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);
        h1 = (h1 ^ w) * 0xff51afd7ed558ccdull;
        h1 ^= h1 >> 29;
        h2 = (h2 + w) * 0xc4ceb9fe1a85ec53ull;
        h2 ^= h2 >> 31;
    }
    for (; i < len; i++) {
        h1 = (h1 ^ p[i]) * 0x100000001b3ull;
        h2 = (h2 ^ p[i]) * 0x9e3779b97f4a7c15ull;
    }
    out[0] = h1 ^ h1 >> 32;
    out[1] = h2 ^ h2 >> 32;
}
