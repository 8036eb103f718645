/*
 * The staging-name contract: ".fsafe-" + 24 lowercase hex digits + ".tmp".
 *
 * The generator and the predicate are built from the same three constants,
 * so they cannot drift apart. Changing any of them is a breaking change of
 * the public API (see fsafe.h and CHANGELOG.md).
 */
#include "staging.h"

#include <string.h>

static const char prefix[] = ".fsafe-";
static const char suffix[] = ".tmp";
static const char hexdigits[] = "0123456789abcdef";

enum {
	PREFIX_LEN = sizeof(prefix) - 1,
	SUFFIX_LEN = sizeof(suffix) - 1,
	HEX_LEN = 2 * FSAFE__STAGING_RANDOM_BYTES,
	NAME_LEN = PREFIX_LEN + HEX_LEN + SUFFIX_LEN,
};

_Static_assert(NAME_LEN == FSAFE_STAGING_NAME_LEN,
               "FSAFE_STAGING_NAME_LEN disagrees with the staging form");

void fsafe__staging_format(const uint8_t rnd[FSAFE__STAGING_RANDOM_BYTES],
                           char out[FSAFE_STAGING_NAME_LEN + 1])
{
	char *p = out;

	memcpy(p, prefix, PREFIX_LEN);
	p += PREFIX_LEN;
	for (int i = 0; i < FSAFE__STAGING_RANDOM_BYTES; i++) {
		*p++ = hexdigits[rnd[i] >> 4];
		*p++ = hexdigits[rnd[i] & 0xf];
	}
	memcpy(p, suffix, SUFFIX_LEN + 1);
}

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool fsafe_is_staging_name(const char *name)
{
	if (!name || strlen(name) != NAME_LEN)
		return false;
	if (memcmp(name, prefix, PREFIX_LEN) != 0)
		return false;
	for (int i = 0; i < HEX_LEN; i++)
		if (!is_lower_hex(name[PREFIX_LEN + i]))
			return false;
	return memcmp(name + PREFIX_LEN + HEX_LEN, suffix, SUFFIX_LEN) == 0;
}
