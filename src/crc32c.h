/*
 * CRC-32C (Castagnoli, the iSCSI/ext4 checksum): SSE4.2's crc32
 * instruction where the CPU has it, a table otherwise, chosen per call.
 * The value is the standard one (initial and final inversion); pass a
 * previous result as `crc` to continue it over more bytes.
 */
#ifndef FSAFE_CRC32C_H
#define FSAFE_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint32_t fsafe__crc32c(uint32_t crc, const void *buf, size_t len);

/* The two implementations, for tests and benchmarks. The accelerated one
   may only be called when fsafe__crc32c_hw() is true. */
uint32_t fsafe__crc32c_table(uint32_t crc, const void *buf, size_t len);
uint32_t fsafe__crc32c_sse42(uint32_t crc, const void *buf, size_t len);
bool fsafe__crc32c_hw(void);

#endif
