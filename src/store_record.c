/* The keyed store's record header: format and parse (store_record.h). */
#include "store_record.h"

#include <errno.h>
#include <string.h>

#include "bytes.h"
#include "crc32c.h"

size_t fsafe__rec_format(uint8_t *h, const void *key, size_t klen,
                         uint64_t version, const void *buf, size_t len)
{
	fsafe__put_le(h, FSAFE__REC_MAGIC, 4);
	fsafe__put_le(h + 4, FSAFE__REC_FORMAT, 2);
	fsafe__put_le(h + 6, FSAFE__REC_HDR, 2);
	fsafe__put_le(h + 8, version, 8);
	fsafe__put_le(h + 16, len, 8);
	fsafe__put_le(h + 24, fsafe__crc32c(0, buf, len), 4);
	fsafe__put_le(h + 28, klen, 4);
	memcpy(h + FSAFE__REC_HDR, key, klen);
	fsafe__put_le(h + 32,
	              fsafe__crc32c(fsafe__crc32c(0, h, 32), key, klen), 4);
	return FSAFE__REC_HDR + klen;
}

static int bad(const char **why, const char *what)
{
	if (why)
		*why = what;
	return -EBADMSG;
}

int fsafe__rec_parse(const uint8_t *h, size_t n, const void *key,
                     size_t klen, uint64_t size, struct fsafe__rec *rec,
                     const char **why)
{
	if (n < FSAFE__REC_HDR || size < FSAFE__REC_HDR)
		return bad(why, "shorter than a record header");
	if (fsafe__get_le(h, 4) != FSAFE__REC_MAGIC)
		return bad(why, "bad magic");
	if (fsafe__get_le(h + 4, 2) != FSAFE__REC_FORMAT ||
	    fsafe__get_le(h + 6, 2) != FSAFE__REC_HDR)
		return bad(why, "unknown record format");
	/* The key is checked before the header CRC that covers it: a
	   record copied from another key's file is whole, only misplaced. */
	uint64_t hk = fsafe__get_le(h + 28, 4);
	if (hk != klen || n - FSAFE__REC_HDR < klen ||
	    memcmp(h + FSAFE__REC_HDR, key, klen) != 0)
		return bad(why, n - FSAFE__REC_HDR < hk || hk > size
		                        ? "header cut short"
		                        : "key does not match its name");
	if (fsafe__get_le(h + 32, 4) !=
	    fsafe__crc32c(fsafe__crc32c(0, h, 32), key, klen))
		return bad(why, "header checksum mismatch");
	rec->version = fsafe__get_le(h + 8, 8);
	rec->len = fsafe__get_le(h + 16, 8);
	rec->crc = (uint32_t)fsafe__get_le(h + 24, 4);
	if (rec->len > size || size - rec->len != FSAFE__REC_HDR + klen)
		return bad(why, "length does not match the file size");
	return 0;
}
