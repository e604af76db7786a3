/* fuzz_loaders.c - libFuzzer target: the safetensors and IDX loaders on arbitrary files. */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tact.h"

/*
 * The first byte chooses the loader (even: safetensors, odd: IDX), the
 * rest is the file, given to the loader by path through an anonymous
 * memory file (a regular file to fstat, so the loaders take it).  Either
 * answer is fine, a tensor or an error tensor; a loaded tensor's shape
 * must agree with its element count, and nothing may crash, hang, leak or
 * trip a sanitizer.  Loading a tensor realizes nothing (no compile).
 */

static tact_ctx *s_ctx;
static int s_fd = -1;
static char s_path[64];

static const char *const s_names[] = {"x", "weight", "bias", "step", "mask", "half", "bytes", "empty", "q\"uote", "l1.bias"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!s_ctx) {
        if (tact_ctx_open(&s_ctx, NULL) != TACT_OK) abort();
        s_fd = memfd_create("fuzz-file", 0);
        if (s_fd < 0) abort();
        snprintf(s_path, sizeof s_path, "/proc/self/fd/%d", s_fd);
    }
    if (!size) return 0;
    if (ftruncate(s_fd, 0) != 0 || pwrite(s_fd, data + 1, size - 1, 0) != (ssize_t)(size - 1)) abort();
    if (tact_scope_begin(s_ctx) != TACT_OK) abort();
    tact_tensor *t = data[0] % 2 ? tact_load_idx(s_ctx, s_path)
                                 : tact_load_safetensors(s_ctx, s_path, s_names[data[0] / 2 % (sizeof s_names / sizeof *s_names)]);
    if (tact_status_of(t) == TACT_OK) {
        int64_t n = 1, shape[16];
        tact_shape(t, shape);
        for (int k = 0; k < tact_ndim(t); k++) n *= shape[k];
        if (n != tact_numel(t)) __builtin_trap();
    } else if (!tact_error_message(t)[0]) {
        __builtin_trap(); /* an error says why */
    }
    tact_scope_end(s_ctx);
    return 0;
}
