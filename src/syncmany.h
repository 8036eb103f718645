/*
 * Data syncs of many files at once, so that the filesystem can fold them
 * into few device flushes (ext4 and xfs commit concurrent fsyncs together).
 * io_uring where the kernel allows it, a thread pool otherwise.
 */
#ifndef FSAFE_SYNCMANY_H
#define FSAFE_SYNCMANY_H

#include <stdbool.h>
#include <stddef.h>

/* fdatasync every fds[i] (skip fds[i] < 0); errs[i] gets 0 or a negative
   errno. Never fails as a whole: without io_uring, the pool does it. */
void fsafe__sync_many(const int *fds, size_t n, int *errs, bool no_uring);

/* The io_uring backend for the system-call table: 0 with errs[] filled
   (0 or a negative errno per fd), or -1/errno when io_uring cannot be
   used; then entries it did not complete are FSAFE__SYNC_PENDING. */
#define FSAFE__SYNC_PENDING 1
int fsafe__uring_fdatasync_many(const int *fds, size_t n, int *errs);

#endif
