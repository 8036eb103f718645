/* The checkpoint's audit trail: its records, written and parsed
   (events.h). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "events.h"
#include "sha256.h"

static const char *const event_names[] = { NULL, "saved", "loaded",
                                           "recovered", "removed",
                                           "quarantined", "repaired" };

const char *fsafe_checkpoint_event_name(enum fsafe_checkpoint_event_kind k)
{
	return k >= 1 && k <= 6 ? event_names[k] : NULL;
}

int fsafe__event_format(char *buf, size_t len, int64_t t, pid_t pid,
                        enum fsafe_checkpoint_event_kind k, uint64_t gen)
{
	char hex[65];
	int n = snprintf(buf, len, "%" PRId64 " %ld %s %" PRIu64, t, (long)pid,
	                 event_names[k], gen);

	fsafe__sha256_hex_of(buf, (size_t)n, hex);
	return n + snprintf(buf + n, len - (size_t)n, " %.8s\n", hex);
}

bool fsafe__event_parse(const char *line, struct fsafe_checkpoint_event *e)
{
	char name[16], check[9], hex[65];
	long long t;
	long pid;
	unsigned long long gen;
	int end = 0;

	if (sscanf(line, "%lld %ld %15s %llu %n", &t, &pid, name, &gen, &end) != 4 ||
	    end < 2 || sscanf(line + end, "%8[0-9a-f]", check) != 1 ||
	    strlen(check) != 8 || line[end + 8] != '\0')
		return false;
	fsafe__sha256_hex_of(line, (size_t)end - 1, hex);
	if (strncmp(hex, check, 8) != 0)
		return false;
	for (int k = 1; k <= 6; k++) {
		if (strcmp(name, event_names[k]) == 0) {
			*e = (struct fsafe_checkpoint_event){
				.time_ms = t, .pid = (pid_t)pid,
				.kind = (enum fsafe_checkpoint_event_kind)k,
				.generation = gen };
			return true;
		}
	}
	return false;
}

int fsafe__events_parse(char *text, size_t len, fsafe_checkpoint_event_fn fn,
                        void *arg, size_t *bad)
{
	char *p = text, *end = text + len;
	int r = 0;

	*bad = 0;
	/* By length, not by string: a NUL in one record (zeroed bytes) must
	   not hide the records after it. */
	while (p < end && r == 0) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *stop = nl ? nl : end;
		struct fsafe_checkpoint_event e;

		if (stop > p) {
			/* A last line without its newline is an append cut
			   short: damaged, whatever it holds. */
			if (nl)
				*nl = '\0';
			if (nl && !memchr(p, '\0', (size_t)(stop - p)) &&
			    fsafe__event_parse(p, &e))
				r = fn(&e, arg);
			else
				(*bad)++;
		}
		p = stop + 1;
	}
	return r;
}

size_t fsafe__events_tail(char *text, size_t len)
{
	size_t end = 0, p = 0;
	char *nl;

	while (p < len && (nl = memchr(text + p, '\n', len - p))) {
		size_t n = (size_t)(nl - (text + p));
		struct fsafe_checkpoint_event e;
		/* The line alone, as the parser reads it; then back. */
		*nl = '\0';
		if (!memchr(text + p, '\0', n) && fsafe__event_parse(text + p, &e))
			end = p + n + 1;
		*nl = '\n';
		p += n + 1;
	}
	return end;
}
