/* The inbox's message format, shared with its tests. */
#ifndef FSAFE_INBOX_INTERNAL_H
#define FSAFE_INBOX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsafe/inbox.h"

/*
 * Every message file starts with a 32-byte header, little-endian:
 *   0  "fsafeIB1"       magic and format version
 *   8  u64 sequence     the producer's sequence (also in the id)
 *  16  u64 length       payload bytes that follow
 *  24  u32 crc32c       of the payload
 *  28  u32 crc32c       of bytes 0..27
 */
#define FSAFE__INBOX_HDR 32

void fsafe__inbox_header(uint8_t h[FSAFE__INBOX_HDR], uint64_t seq,
                         const void *buf, size_t len);
/* The id's form: fixed width, lowercase hex fields separated by '.'. */
bool fsafe__inbox_valid_id(const char *name);

#endif
