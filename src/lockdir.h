/*
 * Check and repair of a directory of locks (fsafe_lock_check), also the
 * keyed store's ".lock" directory, reported under a prefix.
 */
#ifndef FSAFE_LOCKDIR_H
#define FSAFE_LOCKDIR_H

#include <stdbool.h>

#include "fsafe.h"

/* Walk the lock directory open as dfd; report each problem as
   prefix + name and add it to *found. 0, fn's non-zero return, or
   -errno. */
int fsafe__lock_dir_scan(int dfd, const char *prefix, bool repair,
                         fsafe_damage_fn fn, void *arg, int *found);

#endif
