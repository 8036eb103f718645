/*
 * The checkpoint's manifest: the text that names a generation's files
 * with their sizes and SHA-256, and ends with the hash of itself. Its own
 * file so that a fuzzer drives the parser alone.
 *
 *     fsafe-checkpoint 1
 *     revision <text>
 *     sequence <n>
 *     time <unix ms>
 *     files <count>
 *     <size> <sha256 hex> <name>        one line per file, sorted by name
 *     end <sha256 hex of everything above>
 */
#ifndef FSAFE_MANIFEST_H
#define FSAFE_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FSAFE__MANIFEST_VERSION 1

struct fsafe__ckpt_entry {
	char *name;
	uint64_t size;
	char hash[65];
};

struct fsafe__manifest {
	uint64_t seq;
	int64_t time_ms;
	char *revision;
	struct fsafe__ckpt_entry *e;
	size_t n;
};

void fsafe__manifest_free(struct fsafe__manifest *m);
/* Order of entries by name (for qsort and bsearch). */
int fsafe__manifest_cmp_entry(const void *a, const void *b);
/* The text of m (entries sorted by the caller), malloc'd; 0 or -ENOMEM. */
int fsafe__manifest_format(const struct fsafe__manifest *m, char **out,
                           size_t *len);
/* Parse text[0..len) (modified in place; text[len] need not exist).
   0, -EBADMSG, -EPROTONOSUPPORT (another format version) or -ENOMEM. */
int fsafe__manifest_parse(char *text, size_t len, struct fsafe__manifest *m);

/* Whether s has a control character. */
bool fsafe__ckpt_has_control(const char *s);
/* 0 if `name` may be a file of a generation, else -EINVAL. */
int fsafe__ckpt_check_name(const char *name);

#endif
