/*
 * The checkpoint's manifest: the text that names a generation's files
 * with their sizes, SHA-256 and CRC-32C, and ends with the hash of
 * itself. Its own file so that a fuzzer drives the parser alone.
 *
 *     fsafe-checkpoint 2
 *     revision <text>
 *     sequence <n>
 *     time <unix ms>
 *     files <count>
 *     <size> <sha256 hex> <crc32c, 8 hex> <name>   one line per file,
 *                                                  sorted by name
 *     end <sha256 hex of everything above>
 *
 * A load checks the CRC-32C, which runs at the speed memory is read; the
 * SHA-256 is what verify checks and what a snapshot reports. Version 1,
 * still read, has no CRC-32C: its files are loaded against the SHA-256.
 */
#ifndef FSAFE_MANIFEST_H
#define FSAFE_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FSAFE__MANIFEST_VERSION 2     /* written; 1 is read too */

struct fsafe__ckpt_entry {
	char *name;
	uint64_t size;
	char hash[65];   /* SHA-256, hex */
	uint32_t crc;    /* CRC-32C, when has_crc (always, from version 2) */
	bool has_crc;
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
/* The text of m (entries sorted by the caller, each with its CRC-32C),
   malloc'd; 0 or -ENOMEM. */
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
