/* map.c - the 64-bit hash map of map.h: linear probing, backward-shift deletion. */
#include "map.h"

#include <string.h>

#include "mem.h"
#include "tact.h"

static size_t s_hash(uint64_t key, size_t cap) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static size_t s_slot(const ta_map_t *m, uint64_t key) {
    size_t i = s_hash(key, m->cap);
    while (m->used[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

void ta_map_fini(ta_map_t *m) {
    ta_free(m->keys);
    ta_free(m->vals);
    ta_free(m->used);
    memset(m, 0, sizeof *m);
}

static int s_resize(ta_map_t *m, size_t cap) {
    ta_map_t n = {ta_malloc(cap * sizeof(uint64_t)), ta_malloc(cap * sizeof(uint64_t)), ta_calloc(cap, 1), cap, 0};
    if (!n.keys || !n.vals || !n.used) {
        ta_map_fini(&n);
        return TACT_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i]) {
            size_t j = s_slot(&n, m->keys[i]);
            n.used[j] = 1;
            n.keys[j] = m->keys[i];
            n.vals[j] = m->vals[i];
            n.count++;
        }
    ta_map_fini(m);
    *m = n;
    return TACT_OK;
}

int ta_map_put(ta_map_t *m, uint64_t key, uint64_t val) {
    if ((m->count + 1) * 2 > m->cap && s_resize(m, m->cap ? m->cap * 2 : 64) != TACT_OK) return TACT_ENOMEM;
    size_t i = s_slot(m, key);
    if (!m->used[i]) {
        m->used[i] = 1;
        m->keys[i] = key;
        m->count++;
    }
    m->vals[i] = val;
    return TACT_OK;
}

int ta_map_get(const ta_map_t *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return 0;
    size_t i = s_slot(m, key);
    if (!m->used[i]) return 0;
    if (val) *val = m->vals[i];
    return 1;
}

void ta_map_del(ta_map_t *m, uint64_t key) {
    if (!m->cap) return;
    size_t i = s_slot(m, key);
    if (!m->used[i]) return;
    m->used[i] = 0;
    m->count--;
    /* Entries after the hole that probed past it move back into it. */
    for (size_t j = (i + 1) & (m->cap - 1); m->used[j]; j = (j + 1) & (m->cap - 1)) {
        size_t h = s_hash(m->keys[j], m->cap);
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->used[i] = 1;
            m->used[j] = 0;
            i = j;
        }
    }
}

void ta_map_clear(ta_map_t *m) {
    if (m->cap) memset(m->used, 0, m->cap);
    m->count = 0;
}
