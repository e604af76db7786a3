/* handle.h - what tact_ctx * and tact_tensor * are to a user: checked handles, never pointers into freed memory. */
#ifndef TACT_HANDLE_H
#define TACT_HANDLE_H

#include <stdint.h>

/*
 * A handle names a live object by its slot in one process-wide table and
 * the slot's generation, packed into a pointer-sized value the user holds as
 * an opaque tact_ctx * or tact_tensor *.  Freeing an object bumps its
 * slot's generation, so a handle kept after its tensor's scope ended, or
 * after its context closed, is recognised as stale instead of followed,
 * and a value that was never a handle (or a handle of the other kind) is
 * refused too.  The table is shared by every context of the process and
 * guarded by one lock.
 */
typedef enum { TA_HANDLE_CTX = 1, TA_HANDLE_TENSOR = 2 } ta_handle_kind_t;

/* A fresh handle for obj.  Returns 0 when the table cannot grow. */
uintptr_t ta_handle_new(void *obj, ta_handle_kind_t kind);

/* The object a handle names, or NULL when it is stale, of the other kind,
 * or not a handle at all. */
void *ta_handle_get(uintptr_t h, ta_handle_kind_t kind);

/* Ends a handle: every copy of it is stale from now on.  Safe with 0. */
void ta_handle_free(uintptr_t h);

/* The table's lock, for a caller that must turn handles into objects and
 * act on them (enter their context) before anyone can free them:
 * ta_handle_peek and ta_handle_free_locked are ta_handle_get and
 * ta_handle_free with the lock already held. */
void ta_handle_lock(void);
void ta_handle_unlock(void);
void *ta_handle_peek(uintptr_t h, ta_handle_kind_t kind);
void ta_handle_free_locked(uintptr_t h);

#endif
