/*
 * The keyed store's layout, shared by store.c (its records) and
 * store_check.c (check and repair of the whole directory).
 *
 * The lock lives in a directory of its own: a link-mode acquisition scans
 * the lock's directory for its crashed predecessors' files, which must not
 * cost a scan of every record. Damaged entries go to "quarantine".
 */
#ifndef FSAFE_STORE_CHECK_H
#define FSAFE_STORE_CHECK_H

#include "quarantine.h"

#define FSAFE__STORE_LOCK_DIR ".lock"
#define FSAFE__STORE_LOCK_FILE "lock"
#define FSAFE__STORE_QUARANTINE FSAFE__QUARANTINE

/* What one entry of the store's directory is. */
enum fsafe__store_entry {
	FSAFE__STORE_FINE = 0,  /* a valid record, or expected (staging
	                           files, the lock's private files) */
	FSAFE__STORE_BAD = 1,   /* a key's name whose record is invalid */
	FSAFE__STORE_STRAY = 2, /* a name that is no key's */
};

/* Classify `name` in the store directory dfd (not the lock directory or
   the quarantine, which store_check.c judges): an enum value with *why
   set for the last two, or -errno. */
int fsafe__store_classify(int dfd, const char *name, const char **why);

#endif
