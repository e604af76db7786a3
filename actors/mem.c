/* mem.c - the allocator hook (tact_set_allocator) and the helpers that use it. */
#include "mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tact.h"

static void *s_default_alloc(void *ud, void *ptr, size_t old, size_t size) {
    (void)ud;
    (void)old;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

static tact_alloc_fn s_alloc = s_default_alloc;
static void *s_alloc_ud;

void tact_set_allocator(tact_alloc_fn fn, void *ud) {
    s_alloc = fn ? fn : s_default_alloc;
    s_alloc_ud = fn ? ud : NULL;
}

/* Each block carries its size in a header, aligned for any type, so the hook
 * is told old sizes without the callers tracking them. */
typedef union {
    size_t size;
    max_align_t align;
} s_header_t;

void *ta_realloc(void *ptr, size_t size) {
    s_header_t *h = ptr ? (s_header_t *)ptr - 1 : NULL;
    size_t old = h ? h->size + sizeof *h : 0;
    if (size == 0) {
        if (h) s_alloc(s_alloc_ud, h, old, 0);
        return NULL;
    }
    if (size > (size_t)-1 - sizeof *h) return NULL;
    s_header_t *n = s_alloc(s_alloc_ud, h, old, size + sizeof *h);
    if (!n) return NULL;
    n->size = size;
    return n + 1;
}

void *ta_malloc(size_t size) { return ta_realloc(NULL, size); }

void *ta_calloc(size_t n, size_t size) {
    if (size && n > (size_t)-1 / size) return NULL;
    void *p = ta_malloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

void ta_free(void *ptr) { ta_realloc(ptr, 0); }

char *ta_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ta_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int ta_grow(void **items, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) return TACT_OK;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) ncap *= 2;
    if (ncap > (size_t)-1 / elem_size) return TACT_ENOMEM;
    void *n = ta_realloc(*items, ncap * elem_size);
    if (!n) return TACT_ENOMEM;
    *items = n;
    *cap = ncap;
    return TACT_OK;
}

int ta_thread_create(pthread_t *t, void *(*fn)(void *), void *arg) {
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0) return rc;
    rc = pthread_attr_setstacksize(&attr, TA_THREAD_STACK);
    if (rc == 0) rc = pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc;
}
