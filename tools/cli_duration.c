#include "cli_duration.h"

#include <errno.h>
#include <string.h>

#define DURATION_MAX ((uint64_t)INT64_MAX)

static const struct {
	const char *suffix;
	uint64_t ms;
} units[] = {
	{ "ms", 1 },
	{ "s", 1000 },
	{ "", 1000 },
	{ "m", 60 * 1000 },
	{ "h", 60 * 60 * 1000 },
	{ "d", 24 * 60 * 60 * 1000 },
};

static int unit_ms(const char *suffix, uint64_t *ms)
{
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(suffix, units[i].suffix)) {
			*ms = units[i].ms;
			return 0;
		}
	return -EINVAL;
}

/*
 * By hand rather than strtoull(), which would take spaces and a sign. The
 * ceiling is INT64_MAX, not UINT64_MAX: fsafe_sweep() subtracts the age from
 * a signed clock, and a larger value would wrap into "younger than now".
 */
int cli_parse_duration(const char *s, uint64_t *ms)
{
	uint64_t n = 0, scale;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (n > (DURATION_MAX - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	if (p == s || unit_ms(p, &scale) < 0)
		return -EINVAL;
	if (n > DURATION_MAX / scale)
		return -ERANGE;
	*ms = n * scale;
	return 0;
}
