/*
 * The spool's cursor file, on its own so that its parser can be fuzzed
 * alone: "FSPCUR1\0" | cursor u64 | crc u32 (CRC-32C of the 16 bytes
 * before it), little-endian, exactly 20 bytes.
 */
#include <string.h>

#include "bytes.h"
#include "crc32c.h"
#include "spool.h"

#define CURSOR_MAGIC "FSPCUR1"

void fsafe__cursor_encode(unsigned char out[FSAFE__CURSOR_LEN],
                          uint64_t cursor)
{
	memcpy(out, CURSOR_MAGIC, 8);
	fsafe__put_le(out + 8, cursor, 8);
	fsafe__put_le(out + 16, fsafe__crc32c(0, out, 16), 4);
}

const char *fsafe__cursor_decode(const unsigned char *in, size_t len,
                                 uint64_t *cursor)
{
	if (len != FSAFE__CURSOR_LEN)
		return len < FSAFE__CURSOR_LEN ? "too short" : "too long";
	if (memcmp(in, CURSOR_MAGIC, 8) != 0)
		return "bad magic";
	if (fsafe__get_le(in + 16, 4) != fsafe__crc32c(0, in, 16))
		return "bad checksum";
	/* 0 is never stored: records are numbered from 1. */
	if ((*cursor = fsafe__get_le(in + 8, 8)) == 0)
		return "cursor 0";
	return NULL;
}
