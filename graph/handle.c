/* handle.c - the process-wide table of checked handles (handle.h). */
#include "handle.h"

#include <pthread.h>
#include <stddef.h>

#include "mem.h"
#include "tact.h"

/* [63:32] generation (never 0), [31:4] slot, [3:1] kind, [0] 1: an odd
 * value, never an aligned pointer, so a real pointer passed by mistake is
 * refused too. */
typedef struct {
    void *obj;  /* NULL: free */
    uint32_t gen;
    uint8_t kind;
    uint32_t next_free; /* slot + 1 of the next free slot, 0: none */
} s_slot_t;

enum { S_MAX_SLOTS = 1 << 28 };

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static s_slot_t *s_slots;
static size_t s_nslots, s_cap;
static uint32_t s_free_head; /* slot + 1, 0: none */

static uintptr_t s_encode(size_t slot, uint32_t gen, int kind) {
    return (uintptr_t)gen << 32 | (uintptr_t)slot << 4 | (uintptr_t)kind << 1 | 1u;
}

uintptr_t ta_handle_new(void *obj, ta_handle_kind_t kind) {
    if (!obj) return 0;
    uintptr_t h = 0;
    pthread_mutex_lock(&s_lock);
    size_t slot;
    if (s_free_head) {
        slot = s_free_head - 1;
        s_free_head = s_slots[slot].next_free;
    } else if (s_nslots < S_MAX_SLOTS && ta_grow((void **)&s_slots, &s_cap, s_nslots + 1, sizeof *s_slots) == TACT_OK) {
        slot = s_nslots++;
        s_slots[slot].gen = 1;
    } else {
        pthread_mutex_unlock(&s_lock);
        return 0;
    }
    s_slots[slot].obj = obj;
    s_slots[slot].kind = (uint8_t)kind;
    s_slots[slot].next_free = 0;
    h = s_encode(slot, s_slots[slot].gen, kind);
    pthread_mutex_unlock(&s_lock);
    return h;
}

void ta_handle_lock(void) { pthread_mutex_lock(&s_lock); }
void ta_handle_unlock(void) { pthread_mutex_unlock(&s_lock); }

void *ta_handle_peek(uintptr_t h, ta_handle_kind_t kind) {
    if (!(h & 1) || (h >> 1 & 7) != (uintptr_t)kind) return NULL;
    size_t slot = (size_t)(h >> 4 & (S_MAX_SLOTS - 1));
    uint32_t gen = (uint32_t)(h >> 32);
    if (slot < s_nslots && s_slots[slot].obj && s_slots[slot].gen == gen && s_slots[slot].kind == kind) return s_slots[slot].obj;
    return NULL;
}

void *ta_handle_get(uintptr_t h, ta_handle_kind_t kind) {
    pthread_mutex_lock(&s_lock);
    void *obj = ta_handle_peek(h, kind);
    pthread_mutex_unlock(&s_lock);
    return obj;
}

void ta_handle_free_locked(uintptr_t h) {
    if (!(h & 1)) return;
    size_t slot = (size_t)(h >> 4 & (S_MAX_SLOTS - 1));
    uint32_t gen = (uint32_t)(h >> 32);
    if (slot < s_nslots && s_slots[slot].obj && s_slots[slot].gen == gen) {
        s_slots[slot].obj = NULL;
        /* The next handle of this slot has another generation (never 0). */
        s_slots[slot].gen = s_slots[slot].gen + 1 ? s_slots[slot].gen + 1 : 1;
        s_slots[slot].next_free = s_free_head;
        s_free_head = (uint32_t)slot + 1;
    }
}

void ta_handle_free(uintptr_t h) {
    pthread_mutex_lock(&s_lock);
    ta_handle_free_locked(h);
    pthread_mutex_unlock(&s_lock);
}
