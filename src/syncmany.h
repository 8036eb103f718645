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

/* The same on the pool, with an fsync for every fds[i] that full[i] marks
   (a directory, whose new entries a data sync need not cover). */
void fsafe__sync_many_full(const int *fds, const bool *full, size_t n,
                           int *errs);

/*
 * Threads kept between calls, for a caller that syncs a few files time and
 * again (a checkpoint, every save): starting threads per call cost about
 * 50 us each here, on the path of every save. One call at a time per
 * pool; a child of fork (which has none of its threads) and a NULL pool
 * sync on threads of the call's own.
 */
struct fsafe__sync_pool;
/* NULL when out of memory: callers then pass NULL to run. */
struct fsafe__sync_pool *fsafe__sync_pool_new(void);
void fsafe__sync_pool_free(struct fsafe__sync_pool *p);
/* fsafe__sync_many_full on the pool's threads and the caller's. */
void fsafe__sync_pool_run(struct fsafe__sync_pool *p, const int *fds,
                          const bool *full, size_t n, int *errs);

/* The io_uring backend for the system-call table: 0 with errs[] filled
   (0 or a negative errno per fd), or -1/errno when io_uring cannot be
   used; then entries it did not complete are FSAFE__SYNC_PENDING. */
#define FSAFE__SYNC_PENDING 1
int fsafe__uring_fdatasync_many(const int *fds, size_t n, int *errs);

#endif
