/*
 * The keyed store's lock: kernel locks on one lock file, ".lock/lock",
 * that a handle opens once and locks for each change.
 *
 * A kernel lock dies with its holder's process (and with the power), so
 * it needs no owner record, no staged file and no sync: a change costs
 * the record's durable write and a few system calls that do no I/O. The
 * lock file is never written and never removed; an empty one is what
 * fsafe_lock_check calls a kernel-mode lock file at rest.
 */
#ifndef FSAFE_STORE_LOCK_H
#define FSAFE_STORE_LOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct fsafe__store_lock {
	int fd;       /* the lock file, or -1 until the first change */
	pid_t pid;    /* the process that opened it */
	bool turn;    /* the turnstile held, while waiting (store_lock.c) */
	dev_t dev;
	ino_t ino;
};

void fsafe__store_lock_init(struct fsafe__store_lock *l);

/*
 * Lock the store open as dirfd, waiting up to timeout_ms (FSAFE_FOREVER:
 * no limit). 0, or -errno with *step naming the failed step: "open the
 * store's lock directory", "open the store's lock file", "take the
 * store's lock", "wait for the store's lock" (-ETIMEDOUT).
 */
int fsafe__store_lock_take(struct fsafe__store_lock *l, int dirfd,
                           uint64_t timeout_ms, const char **step);

/* Release what fsafe__store_lock_take took; the file stays open. */
void fsafe__store_lock_drop(struct fsafe__store_lock *l);

/* Close the lock file (releasing a lock still held). */
void fsafe__store_lock_close(struct fsafe__store_lock *l);

#endif
