/* test_map.c - the 64-bit hash map against a plain array, through inserts, replacements and deletions. */
#include <stdlib.h>

#include <criterion/criterion.h>

#include "map.h"
#include "tact.h"
#include "testutil.h"

/* Random operations on keys from a small range (so they collide and are
 * deleted and re-inserted often), checked after each against an array. */
static void s_check(uint64_t KEYS, int OPS) {
    uint64_t seed = tu_seed(), rng = seed;
    uint64_t *want = calloc(KEYS, sizeof *want);
    char *present = calloc(KEYS, 1);
    ta_map_t m = {0};
    size_t count = 0;
    for (int op = 0; op < OPS; op++) {
        uint64_t r = tu_rand(&rng), k = r % KEYS;
        uint64_t key = k * 0x10000000000ull; /* keys that differ only in high bits, and key 0 */
        if (r >> 60 < 10) {
            cr_assert_eq(ta_map_put(&m, key, r), TACT_OK);
            count += !present[k];
            present[k] = 1;
            want[k] = r;
        } else {
            ta_map_del(&m, key);
            count -= present[k];
            present[k] = 0;
        }
        uint64_t probe = tu_rand(&rng) % KEYS, v = 0;
        int got = ta_map_get(&m, probe * 0x10000000000ull, &v);
        cr_assert_eq(got, present[probe], "seed %#llx: op %d: key %llu present %d", (unsigned long long)seed, op,
                     (unsigned long long)probe, got);
        if (got) cr_assert_eq(v, want[probe], "seed %#llx: op %d: value of key %llu", (unsigned long long)seed, op, (unsigned long long)probe);
        cr_assert_eq(m.count, count, "seed %#llx: op %d: count", (unsigned long long)seed, op);
    }
    for (uint64_t k = 0; k < KEYS; k++) {
        uint64_t v;
        cr_assert_eq(ta_map_get(&m, k * 0x10000000000ull, &v), present[k]);
    }
    ta_map_clear(&m);
    cr_assert_eq(ta_map_get(&m, 0, NULL), 0);
    ta_map_fini(&m);
    free(want);
    free(present);
}

/* A small table wraps its probe sequences around its end all the time. */
Test(actors_map, agrees_with_an_array_small) { s_check(40, 200000); }
Test(actors_map, agrees_with_an_array_large) { s_check(3000, 200000); }
