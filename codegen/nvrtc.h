/* nvrtc.h - NVIDIA's runtime compiler, reached through dlopen: CUDA C++ source to PTX or a cubin, for the CUDA device and its tests. */
#ifndef TACT_NVRTC_H
#define TACT_NVRTC_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/*
 * NVRTC is loaded on first use from TACT_NVRTC (a path to libnvrtc.so.N)
 * if set, else libnvrtc.so.13, libnvrtc.so.12 and libnvrtc.so on the
 * loader's path; the library never needs it to build or to run on other
 * devices.  Once found it stays loaded.
 *
 * ta_nvrtc_version: TACT_OK with NVRTC's version, or TACT_EDEVICE with err
 * saying it was not found ("no NVRTC (...)").
 *
 * ta_nvrtc_compile: compiles src (a program of kernels, prelude included)
 * for compute capability arch (80 for 8.0, 90 for 9.0): a cubin for sm_ARCH
 * with cubin set, else PTX for compute_ARCH.  The options are tact's: device
 * functions by default, no contraction of a*b+c (--fmad=false), IEEE
 * division and square root.  *out (ta_free it) holds *len bytes (PTX: a
 * NUL-terminated text, len without the NUL).  TACT_ECOMPILE with NVRTC's
 * log in err when the source does not compile, TACT_EDEVICE when NVRTC is
 * missing or does not know arch.
 */
int ta_nvrtc_version(int *major, int *minor, ta_error_t *err);
int ta_nvrtc_compile(const char *src, const char *name, int arch, int cubin, uint8_t **out, size_t *len, ta_error_t *err);

#endif
