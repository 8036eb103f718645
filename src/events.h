/*
 * The checkpoint's audit trail, one record a line:
 *
 *     <time_ms> <pid> <event> <generation> <check>
 *
 * where check is the first 8 hex digits of the SHA-256 of the text before
 * it, so a torn or garbage record (an append cut by a power loss, a
 * flipped byte) is told from a record. Its own file so that a fuzzer
 * drives the parser alone.
 */
#ifndef FSAFE_EVENTS_H
#define FSAFE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsafe.h"

/* The longest record, newline included. */
#define FSAFE__EVENT_MAX 128

/* Format one record (newline included) into buf; returns its length. */
int fsafe__event_format(char *buf, size_t len, int64_t t, pid_t pid,
                        enum fsafe_checkpoint_event_kind k, uint64_t gen);
/* Parse one line (no newline, NUL-terminated); false if it is damaged. */
bool fsafe__event_parse(const char *line, struct fsafe_checkpoint_event *e);

/* Every record of a whole log, text[0..len) (modified in place), in
   order: fn for each intact one (a non-zero return stops and is
   returned), *bad counts the damaged lines (a last line without its
   newline is one). */
int fsafe__events_parse(char *text, size_t len, fsafe_checkpoint_event_fn fn,
                        void *arg, size_t *bad);

/* Where the log's torn tail starts: just past its last intact record (0 if
   it has none). What follows, with no intact record after it, is an
   append a power cut or a crash left short, not damage. text is written
   to while it is read, and left as it was. */
size_t fsafe__events_tail(char *text, size_t len);

#endif
