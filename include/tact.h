/* tact.h - the whole public API of tact, a lazy tensor library built from actors. */
#ifndef TACT_H
#define TACT_H

/*
 * tact ("tensor actors") runs every stage of a lazy tensor pipeline (graph
 * builder, scheduler, memory planner, compiler, device executors, gradient
 * engine) as an actor that talks to the others only through ZeroMQ messages
 * encoded with msgpack.  This release holds the foundation: status codes, the
 * allocator hook and the version.  The tensor API arrives on top of it.
 *
 * Worked example: install an allocator that fails after a budget, which is
 * how tact's own tests inject allocation failures.
 *
 *     static size_t budget = 1 << 20;
 *     static void *my_alloc(void *ud, void *ptr, size_t old, size_t size) {
 *         (void)ud; (void)old;
 *         if (size == 0) { free(ptr); return NULL; }
 *         if (size > budget) return NULL;        // tact reports TACT_ENOMEM
 *         budget -= size;
 *         return realloc(ptr, size);
 *     }
 *
 *     tact_set_allocator(my_alloc, NULL);
 *     printf("tact %s\n", tact_version());
 *     printf("%s\n", tact_strerror(TACT_ETIMEDOUT));  // "timed out waiting for a peer"
 *
 * Conventions:
 * - Functions that can fail return a tact_status (TACT_OK is 0, errors are
 *   negative) and never abort the host program on user error.
 * - Names are tact_<noun>_<verb>; enum values are TACT_<ENUM>_<VALUE>.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TACT_VERSION_MAJOR 0
#define TACT_VERSION_MINOR 1
#define TACT_VERSION_PATCH 0

/* Every status code with its message, defined once. */
#define TACT_STATUS_MAP(XX)                                                    \
    XX(OK,        0,   "success")                                               \
    XX(EINVAL,    -1,  "invalid argument")                                      \
    XX(ENOMEM,    -2,  "out of memory")                                         \
    XX(ETIMEDOUT, -3,  "timed out waiting for a peer")                          \
    XX(EPROTO,    -4,  "malformed message")                                     \
    XX(ETOOBIG,   -5,  "message exceeds the configured size limit")             \
    XX(ETRANSPORT,-6,  "transport error")                                       \
    XX(EIO,       -7,  "file input/output error")                               \
    XX(ECORRUPT,  -8,  "corrupted or truncated log")                            \
    XX(EVERSION,  -9,  "unsupported protocol or file version")                  \
    XX(EACTOR,    -10, "actor failed")                                          \
    XX(ESTOPPED,  -11, "actor is stopped")                                      \
    XX(EMISMATCH, -12, "replay diverged from the recording")                    \
    XX(ENOTFOUND, -13, "no such actor or record")

typedef enum tact_status {
#define TACT_STATUS_ENUM_(name, code, text) TACT_##name = code,
    TACT_STATUS_MAP(TACT_STATUS_ENUM_)
#undef TACT_STATUS_ENUM_
} tact_status;

/* Returns a static, human-readable message for a status code; unknown codes
 * give "unknown status". Never returns NULL. */
const char *tact_strerror(int status);

/* Returns the status code's name, e.g. "ETIMEDOUT"; "UNKNOWN" if unknown. */
const char *tact_status_name(int status);

/* Returns the library version as "MAJOR.MINOR.PATCH" (static storage). */
const char *tact_version(void);

/*
 * The allocator hook (as lua_Alloc): tact calls fn(ud, ptr, old_size, size)
 * for every allocation it makes itself.  size == 0 frees ptr and returns NULL;
 * otherwise it behaves as realloc (ptr may be NULL) and returns NULL on
 * failure, which tact reports as TACT_ENOMEM without losing state.  Passing
 * fn == NULL restores the default (malloc/realloc/free).  Install it before
 * creating any tact object; memory must be freed by the allocator that
 * allocated it.  ZeroMQ and msgpack-c keep their own allocators.
 */
typedef void *(*tact_alloc_fn)(void *ud, void *ptr, size_t old_size, size_t size);
void tact_set_allocator(tact_alloc_fn fn, void *ud);

#ifdef __cplusplus
}
#endif
#endif /* TACT_H */
