/* mem.h - tact's internal allocation functions, all routed through the allocator hook. */
#ifndef TACT_MEM_H
#define TACT_MEM_H

#include <stddef.h>

/* Each returns NULL on failure (ta_malloc(0) returns NULL too); ta_free(NULL)
 * is a no-op.  Sizes are tracked so the hook sees old sizes, as lua_Alloc. */
void *ta_malloc(size_t size);
void *ta_calloc(size_t n, size_t size);
void *ta_realloc(void *ptr, size_t size);
void  ta_free(void *ptr);
char *ta_strdup(const char *s);

/* Grows *items (of *cap elements of elem_size bytes) so it holds at least
 * need elements, doubling.  Returns 0, or TACT_ENOMEM leaving *items intact. */
int ta_grow(void **items, size_t *cap, size_t need, size_t elem_size);

/* pthread_create with a stack of TA_THREAD_STACK bytes, whatever the
 * process's default (RLIMIT_STACK, or a C library's small one): kernels
 * run on tact's threads with packs of up to 300 KiB on the stack
 * (codegen/lower.c).  Returns pthread_create's result. */
#define TA_THREAD_STACK ((size_t)8 << 20)
#include <pthread.h>
int ta_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
