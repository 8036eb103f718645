/*
 * libFuzzer target for the keyed store's record header parser
 * (src/store_record.h), alone, in memory.
 *
 * Input: a byte k (key length, k % 127), k key bytes, a byte p (where to
 * change a byte of a well-formed header), then the record bytes as found
 * in a file (its size is their length).
 *
 * abort() (a finding) if: a record accepted has a length that does not
 * add up to the file size, or a key other than the one asked for; a record
 * formatted from the same key and payload does not parse back with its
 * version and length; a well-formed header with one byte changed (at p) is
 * still accepted.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_record.h"

#define KEY_MAX 126

static void roundtrip(const uint8_t *key, size_t klen, const uint8_t *pay,
                      size_t plen, uint8_t at)
{
	uint8_t *buf = malloc(FSAFE__REC_HDR + klen + plen + 1);
	struct fsafe__rec rec;
	const char *why;

	if (!buf)
		abort();
	size_t hl = fsafe__rec_format(buf, key, klen, plen * 3 + 1, pay, plen);
	memcpy(buf + hl, pay, plen);
	size_t size = hl + plen;
	if (fsafe__rec_parse(buf, hl, key, klen, size, &rec, &why) != 0 ||
	    rec.version != plen * 3 + 1 || rec.len != plen)
		abort();
	/* Any one byte of the header and key changed is caught. */
	size_t pos = at % hl;
	buf[pos] ^= (uint8_t)(at | 1);
	if (fsafe__rec_parse(buf, hl, key, klen, size, &rec, &why) == 0)
		abort();
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsafe__rec rec;
	const char *why = NULL;

	if (size < 2)
		return 0;
	size_t klen = data[0] % (KEY_MAX + 1);
	if (klen == 0 || size < 2 + klen)
		return 0;
	const uint8_t *key = data + 1;
	uint8_t at = data[1 + klen];
	const uint8_t *rest = data + 2 + klen;
	size_t n = size - 2 - klen;

	/* As the store reads it: at most the header and the key. */
	size_t hn = n < FSAFE__REC_HDR + klen ? n : FSAFE__REC_HDR + klen;
	int r = fsafe__rec_parse(rest, hn, key, klen, n, &rec, &why);
	if (r == 0 && (rec.len + FSAFE__REC_HDR + klen != n ||
	               memcmp(rest + FSAFE__REC_HDR, key, klen) != 0))
		abort();
	if (r != 0 && !why)
		abort();
	roundtrip(key, klen, rest, n, at);
	return 0;
}
