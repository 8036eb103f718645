/*
 * Damage, shared by the lock directory's and the keyed store's check and
 * repair (fsafe.h, "Damage"): one report line, and moving damaged bytes
 * into a "quarantine" directory with a reason beside them instead of
 * deleting them.
 */
#ifndef FSAFE_QUARANTINE_H
#define FSAFE_QUARANTINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsafe.h"

#define FSAFE__QUARANTINE "quarantine"
#define FSAFE__QUARANTINE_REASON ".reason"

/* Call fn (if any) for prefix+name; its non-zero return is the result. */
int fsafe__damage_say(fsafe_damage_fn fn, void *arg, const char *prefix,
                      const char *name, const char *what,
                      const char *action, uint64_t lost);

/* The quarantine directory inside dfd, made if missing, never through a
   symbolic link (-ELOOP / -ENOTDIR when something else has its name). */
int fsafe__quarantine_open(int dfd, bool sync);

/*
 * Move dfd/name into qfd under its own name (a numbered one if taken), and
 * write `why` beside it as NAME.reason; both directories synced unless
 * !sync. The name it got goes into dest. 0 or -errno (nothing moved).
 */
int fsafe__quarantine_move(int dfd, const char *name, int qfd,
                           const char *why, bool sync, char *dest,
                           size_t cap);

/*
 * Move dfd/name into qfd as quarantine_move does (its own name, a numbered
 * one if taken, NAME.reason beside it), but for a file by a hard link
 * first, the old name dropped only once both names in qfd are durable: a
 * crash leaves the file under both names, never under none (the inbox,
 * whose recovery reads a link count above one as "also lives elsewhere").
 * A directory is renamed. Always synced. 0 or -errno.
 */
int fsafe__quarantine_link(int dfd, const char *name, int qfd,
                           const char *why, char *dest, size_t cap);

/*
 * Something that is not a directory holds the quarantine's name in dfd: it
 * goes into a new quarantine itself, with `why`. It is first renamed to
 * "quarantine.damaged" (never replacing), so until the last step it sits
 * at a name a later repair would quarantine in turn. 0 with the new
 * quarantine open in *qfd, or -errno.
 */
int fsafe__quarantine_reclaim(int dfd, const char *why, bool sync, int *qfd);

#endif
