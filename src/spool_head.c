/*
 * The spool's head file: its format alone, pure. It tells the processes
 * sharing a spool where the durable end is:
 * "FSPHED1\0" | gen u64 | last u64 | tail u64 | next u64 | flags u32 |
 * crc u32 (CRC-32C of the 44 bytes before it), little-endian, exactly 48
 * bytes. It is written in place under the spool's lock and never synced:
 * every open rebuilds it from the segments, so after a power cut (when
 * every process sharing the spool died) a stale head is never trusted.
 */
#include <string.h>

#include "bytes.h"
#include "crc32c.h"
#include "spool.h"

#define HEAD_MAGIC "FSPHED1"

void fsafe__head_encode(unsigned char out[FSAFE__HEAD_LEN],
                        const struct fsafe__head *h)
{
	memcpy(out, HEAD_MAGIC, 8);
	fsafe__put_le(out + 8, h->gen, 8);
	fsafe__put_le(out + 16, h->last, 8);
	fsafe__put_le(out + 24, h->tail, 8);
	fsafe__put_le(out + 32, h->next, 8);
	fsafe__put_le(out + 40, h->flags, 4);
	fsafe__put_le(out + 44, fsafe__crc32c(0, out, 44), 4);
}

bool fsafe__head_decode(const unsigned char *in, size_t len,
                        struct fsafe__head *h)
{
	if (len != FSAFE__HEAD_LEN || memcmp(in, HEAD_MAGIC, 8) != 0 ||
	    fsafe__get_le(in + 44, 4) != fsafe__crc32c(0, in, 44))
		return false;
	h->gen = fsafe__get_le(in + 8, 8);
	h->last = fsafe__get_le(in + 16, 8);
	h->tail = fsafe__get_le(in + 24, 8);
	h->next = fsafe__get_le(in + 32, 8);
	h->flags = (uint32_t)fsafe__get_le(in + 40, 4);
	/* Records are numbered from 1; unknown flags are not ours. */
	return h->next != 0 && (h->flags & ~FSAFE__HEAD_ROLL) == 0;
}
