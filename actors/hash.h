/* hash.h - one fast 128-bit hash of bytes (not cryptographic), for digests, cache keys and deduplication. */
#ifndef TACT_HASH_H
#define TACT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A 128-bit hash of len bytes, 32 bytes at a time. */
void ta_hash128(const void *bytes, size_t len, uint64_t out[2]);

#endif
