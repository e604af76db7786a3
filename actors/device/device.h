/* device.h - the small interface every device implements (DESIGN.md §5); one executor actor drives one device. */
#ifndef TACT_DEVICE_H
#define TACT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "ast.h"
#include "cc.h"
#include "msg.h"

typedef struct ta_device ta_device_t;
typedef int (*ta_device_tick_fn)(void *ud);

typedef struct ta_device_ops {
    const char *name; /* "CPU", "CL", "CUDA" */
    /* Opens the device with threads workers (CPU: 0 = one per core).
     * Returns TACT_OK or TACT_EDEVICE/TACT_ENOMEM with err filled. */
    int (*open)(ta_device_t **out, int threads, ta_error_t *err);
    void (*close)(ta_device_t **dev);
    /* Buffers: bytes may be 0 (a valid, empty buffer). */
    int (*alloc)(ta_device_t *dev, size_t bytes, void **buf, ta_error_t *err);
    void (*free)(ta_device_t *dev, void *buf);
    int (*copy_in)(ta_device_t *dev, void *buf, const void *host, size_t bytes, ta_error_t *err);
    int (*copy_out)(ta_device_t *dev, void *host, const void *buf, size_t bytes, ta_error_t *err);
    /* Loads a program the compiler pool built, given as the bytes PROGRAM
     * carries (CPU: a shared object). */
    int (*load)(ta_device_t *dev, const void *obj, size_t len, const char *name, ta_program_t *prog, ta_error_t *err);
    void (*unload)(ta_device_t *dev, ta_program_t *prog);
    /* Runs prog over n output elements with bufs[b] as kernel buffer b and
     * args its argument values (KERNEL.args), in ranges whose bounds are
     * multiples of align (work: the kernel's iterations over all n, which
     * sizes the ranges), and returns when it has
     * finished.  With tick (long work), the launching thread only
     * supervises and calls tick(ud) every 20 ms or so; when tick returns
     * nonzero no further range is started, and once the running ones end
     * the launch returns TACT_ESTOPPED. */
    int (*launch)(ta_device_t *dev, const ta_program_t *prog, void **bufs, const uint64_t *args, int64_t n, int64_t align,
                  uint64_t work, ta_device_tick_fn tick, void *ud, ta_error_t *err);
    int (*threads)(const ta_device_t *dev);
} ta_device_ops_t;

extern const ta_device_ops_t ta_cpu_device;

#endif
