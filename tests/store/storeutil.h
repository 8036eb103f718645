/* Shared by the store tests: fixtures and what a key holds. */
#ifndef FSAFE_STOREUTIL_H
#define FSAFE_STOREUTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "fsafe.h"

/* Open (creating) the store `path`, with `flags` (FSAFE_STORE_*) and no
   sweep unless asked; fails the test on error. */
fsafe_store *su_open(const char *path, unsigned flags, unsigned write_flags);

/* Put a C-string key; fails the test on error. */
void su_put(fsafe_store *s, const char *key, const void *buf, size_t len);

/* What a key holds, against the expected payloads. */
enum su_content { SU_ABSENT, SU_OLD, SU_NEW, SU_BAD, SU_OTHER };
enum su_content su_content(fsafe_store *s, const char *key, const void *old,
                           size_t oldlen, const void *new_, size_t newlen);
const char *su_content_name(enum su_content c);

/* The listing's keys as C strings joined by ',' (keys here are text), and
   how many entries the skip reporter saw. */
struct su_listing {
	char keys[4096];
	int skipped[8]; /* by enum fsafe_store_skip */
	char skipped_names[4096];
};
/* A key as text: bytes outside printable ASCII as \xNN; returns the
   length (out holds 4 * len + 1). */
size_t su_key_text(const void *key, size_t len, char *out);
int su_list(fsafe_store *s, unsigned flags, struct su_listing *out);

/* Entries of `dir` that are neither records (k-...) nor in `allowed`
   (NULL-terminated), as a ' '-joined text in buf; "" when none. */
const char *su_strays(const char *dir, const char *const *allowed, char *buf,
                      size_t len);

#endif
