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
 * A ring and threads kept between calls, for a caller that syncs files
 * time and again (an fsafe_async, every group; a batch, every window; a
 * checkpoint, every save): setting up a ring costs about 90 us here, and
 * starting a thread about 50 us, on the path of every call. With `uring`,
 * data syncs go to the kept ring first, and what it cannot do to the
 * threads (started as a call first needs them; full syncs always go
 * there). One call at a time per pool. A child of fork (which has none of
 * its threads, and must not share its ring) and a NULL pool sync as
 * fsafe__sync_many and fsafe__sync_many_full do.
 */
struct fsafe__sync_pool;
/* NULL when out of memory: callers then pass NULL to run. */
struct fsafe__sync_pool *fsafe__sync_pool_new(bool uring);
void fsafe__sync_pool_free(struct fsafe__sync_pool *p);
/* fsafe__sync_many_full on the pool's ring or threads and the caller's. */
void fsafe__sync_pool_run(struct fsafe__sync_pool *p, const int *fds,
                          const bool *full, size_t n, int *errs);

/*
 * The io_uring backend for the system-call table: 0 with errs[] filled (0
 * or a negative errno per fd), or -1/errno when io_uring cannot be used;
 * then entries it did not complete are FSAFE__SYNC_PENDING. `keep` NULL:
 * a ring for this call alone. Else *keep is a ring kept by the caller
 * between calls (made when NULL; freed and set NULL when it fails): a
 * ring costs about 90 us to set up and take down here, more than a data
 * sync on a fast device. Free it with fsafe__ring_free.
 */
#define FSAFE__SYNC_PENDING 1
struct fsafe__ring;
int fsafe__uring_fdatasync_many(struct fsafe__ring **keep, const int *fds,
                                size_t n, int *errs);
void fsafe__ring_free(struct fsafe__ring *r);

#endif
