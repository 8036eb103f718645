/*
 * The inbox's message format (see inbox.h): the header, the id's form and
 * the verdict on a file's header and payload. Pure, no system call, so a
 * fuzzer reaches the parser alone.
 */
#include "inbox.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "crc32c.h"

static const char magic[8] = { 'f', 's', 'a', 'f', 'e', 'I', 'B', '1' };
static const char hexd[] = "0123456789abcdef";

/* Field widths of an id: time, sequence, boot, pid, random. */
static const int id_fields[] = { 16, 12, 8, 8, 12 };
_Static_assert(16 + 12 + 8 + 8 + 12 + 4 == FSAFE_INBOX_ID_LEN, "id width");

void fsafe__inbox_header(uint8_t h[FSAFE__INBOX_HDR], uint64_t seq,
                         const void *buf, size_t len)
{
	memcpy(h, magic, 8);
	fsafe__put_le(h + 8, seq, 8);
	fsafe__put_le(h + 16, len, 8);
	fsafe__put_le(h + 24, fsafe__crc32c(0, buf, len), 4);
	fsafe__put_le(h + 28, fsafe__crc32c(0, h, 28), 4);
}

bool fsafe__inbox_valid_id(const char *name)
{
	const char *p = name;

	for (size_t f = 0; f < sizeof(id_fields) / sizeof(id_fields[0]); f++) {
		if (f > 0 && *p++ != '.')
			return false;
		for (int i = 0; i < id_fields[f]; i++, p++)
			if (!*p || !strchr(hexd, *p))
				return false;
	}
	return *p == '\0';
}

/* The id's sequence field (12 hex digits after the time and a dot). */
static uint64_t id_seq(const char *id)
{
	uint64_t v = 0;

	for (int i = 17; i < 17 + 12; i++)
		v = (v << 4) | (uint64_t)(strchr(hexd, id[i]) - hexd);
	return v;
}

const char *fsafe__inbox_check_header(const uint8_t *h, uint64_t size,
                                      uint64_t max, const char *id,
                                      struct fsafe__inbox_hdr *out)
{
	if (size < FSAFE__INBOX_HDR)
		return "shorter than a message header";
	uint64_t len = fsafe__get_le(h + 16, 8);
	out->seq = fsafe__get_le(h + 8, 8);
	out->len = len;
	out->crc = (uint32_t)fsafe__get_le(h + 24, 4);
	if (memcmp(h, magic, 8) != 0)
		return "not an inbox message (bad magic)";
	if (fsafe__get_le(h + 28, 4) != fsafe__crc32c(0, h, 28))
		return "corrupt header (checksum)";
	if (len > max)
		return "payload over the configured size limit";
	if (size - FSAFE__INBOX_HDR != len)
		return "length does not match the header (truncated or "
		       "extended)";
	if (out->seq % (1ull << 48) != id_seq(id))
		return "sequence does not match the id";
	return NULL;
}

const char *fsafe__inbox_check_payload(const struct fsafe__inbox_hdr *h,
                                       const void *data)
{
	return fsafe__crc32c(0, data, (size_t)h->len) == h->crc
	               ? NULL : "corrupt payload (checksum)";
}
