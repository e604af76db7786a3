/* map.h - a hash map from 64-bit keys to 64-bit values (open addressing), for ids, buffers and programs. */
#ifndef TACT_MAP_H
#define TACT_MAP_H

#include <stddef.h>
#include <stdint.h>

/*
 * Keys are any uint64_t (0 included).  A zeroed ta_map_t is an empty map;
 * ta_map_fini frees its table and leaves it empty.  Lookups and inserts
 * cost O(1) on average; the table doubles at half full.
 */
typedef struct ta_map {
    uint64_t *keys, *vals;
    uint8_t *used;
    size_t cap, count;
} ta_map_t;

void ta_map_fini(ta_map_t *m);

/* Sets key to val (replacing an existing value).  Returns TACT_OK, or
 * TACT_ENOMEM leaving the map as it was. */
int ta_map_put(ta_map_t *m, uint64_t key, uint64_t val);

/* Returns 1 and sets *val (if not NULL) when key is present, else 0. */
int ta_map_get(const ta_map_t *m, uint64_t key, uint64_t *val);

/* Removes key if present. */
void ta_map_del(ta_map_t *m, uint64_t key);

/* Removes every key, keeping the table. */
void ta_map_clear(ta_map_t *m);

#endif
