/* crc32c.h - CRC-32C (Castagnoli), the checksum of log records; hardware-accelerated where the CPU has it. */
#ifndef TACT_CRC32C_H
#define TACT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over n bytes at p and returns the new value.
 * ta_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t ta_crc32c(uint32_t crc, const void *p, size_t n);

/* The same function without the hardware path (for tests and other CPUs). */
uint32_t ta_crc32c_portable(uint32_t crc, const void *p, size_t n);

#endif
