/*
 * The owner record: who holds something (a lock, a claim on an inbox), in a
 * small versioned text form, and whether that owner is provably dead.
 *
 *     fsafe-lock 1
 *     mode link|kernel
 *     pid 4242
 *     start 123456            /proc/<pid>/stat field 22
 *     boot <boot_id uuid>
 *     host build-3
 *     pidns 4026531836        0 when unknown
 *     token <32 hex>
 *     time 1764662473000      Unix ms
 *
 * Exactly these lines, in this order, each ending in '\n', nothing else.
 */
#ifndef FSAFE_OWNER_H
#define FSAFE_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fsafe/lock.h"

/* A record longer than this is malformed (the real ones are ~200 bytes). */
#define FSAFE__OWNER_MAX 4096

/* This process as an owner, with a fresh random token and the time now. */
int fsafe__owner_self(struct fsafe_lock_owner *o, bool kernel);

/* Text form into buf; returns its length, or -EOVERFLOW. */
int fsafe__owner_format(const struct fsafe_lock_owner *o, char *buf,
                        size_t cap);

/* 0; -EBADMSG when malformed; -EPROTONOSUPPORT for a well-formed header
   of another version (o->version is then set). */
int fsafe__owner_parse(const char *buf, size_t len,
                       struct fsafe_lock_owner *o);

/* Read a record from offset 0 of fd into buf (FSAFE__OWNER_MAX + 1 bytes):
   its length, or a negative errno. A length over FSAFE__OWNER_MAX means
   "too long". */
ssize_t fsafe__owner_read_raw(int fd, char *buf);

/*
 * The verdict on `o` as seen by `self`. Anything short of proof of death
 * is ALIVE (same host) or UNKNOWN (elsewhere); errors never kill a lock.
 */
enum fsafe_lock_liveness fsafe__owner_judge(const struct fsafe_lock_owner *o,
                                            const struct fsafe_lock_owner *self);

/* Start time (field 22) and state (field 3) of a process, from /proc. */
int fsafe__proc_stat(pid_t pid, uint64_t *start, char *state);

#endif
