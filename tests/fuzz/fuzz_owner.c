/*
 * libFuzzer target for the owner record parser (src/owner.h): the text a
 * lock file, a lock's staging file or an inbox claim holds.
 *
 * abort() (a finding) if: a record accepted does not survive being
 * formatted and parsed again unchanged; a record rejected leaves fields
 * set; a record over FSAFE__OWNER_MAX is accepted.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "owner.h"

static bool same(const struct fsafe_lock_owner *a,
                 const struct fsafe_lock_owner *b)
{
	return a->version == b->version && a->kernel == b->kernel &&
	       a->pid == b->pid && a->start == b->start &&
	       !strcmp(a->boot_id, b->boot_id) && !strcmp(a->host, b->host) &&
	       a->pidns == b->pidns && !strcmp(a->token, b->token) &&
	       a->time_ms == b->time_ms;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsafe_lock_owner o, again;
	char buf[FSAFE__OWNER_MAX + 1];
	int r = fsafe__owner_parse((const char *)data, size, &o);

	if (r == -EPROTONOSUPPORT)
		return 0;
	if (r != 0) {
		if (o.pid || o.host[0] || o.token[0] || o.time_ms)
			abort();
		return 0;
	}
	if (size > FSAFE__OWNER_MAX)
		abort();
	int n = fsafe__owner_format(&o, buf, sizeof(buf));
	if (n < 0 || fsafe__owner_parse(buf, (size_t)n, &again) != 0 ||
	    !same(&o, &again))
		abort();
	return 0;
}
