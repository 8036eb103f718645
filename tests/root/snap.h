/*
 * Proof that nothing outside a root changed: a byte-exact picture of a
 * directory tree (names, types, modes, sizes, mtimes, file bytes, link
 * targets) with one subtree left out, and an inotify watch that catches
 * what a picture cannot: something created and removed again in between.
 */
#ifndef FSAFE_TEST_SNAP_H
#define FSAFE_TEST_SNAP_H

#include <stdbool.h>

/* The picture of `dir` without its entry `skip` (may be NULL); malloc'd. */
char *snap_take(const char *dir, const char *skip);

/* Watch `dir` and every directory below it except `skip`; -1 on error. */
int snap_watch(const char *dir, const char *skip);
/* Events since the last call (0 if none); the first one's name goes to
   `what` (size `len`) for the message. Events on `skip` itself that only
   change its metadata (a new entry inside it) are not counted. */
int snap_events(int fd, const char *skip, char *what, int len);
void snap_unwatch(int fd);

#endif
