/* The io_uring backend of fsafe__sync_many, when built with liburing. */
#define _GNU_SOURCE
#include "syncmany.h"

#include <errno.h>
#include <stdlib.h>

#ifdef FSAFE_HAVE_LIBURING
#include <liburing.h>

/* Ring sizes are powers of two; larger batches go round in chunks. */
#define RING_ENTRIES 256

static int sync_chunk(struct io_uring *ring, const int *fds, size_t n,
                      int *errs)
{
	size_t queued = 0;

	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0) {
			errs[i] = 0;
			continue;
		}
		errs[i] = FSAFE__SYNC_PENDING;
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		io_uring_prep_fsync(sqe, fds[i], IORING_FSYNC_DATASYNC);
		io_uring_sqe_set_data64(sqe, i);
		queued++;
	}
	int r = io_uring_submit_and_wait(ring, (unsigned)queued);
	if (r < 0)
		return r;
	for (size_t done = 0; done < queued; done++) {
		struct io_uring_cqe *cqe;
		do
			r = io_uring_wait_cqe(ring, &cqe);
		while (r == -EINTR);
		if (r < 0)
			return r;
		size_t i = (size_t)io_uring_cqe_get_data64(cqe);
		if (i < n)
			errs[i] = cqe->res < 0 ? cqe->res : 0;
		io_uring_cqe_seen(ring, cqe);
	}
	return 0;
}

struct fsafe__ring {
	struct io_uring ring;
	unsigned entries;
};

static struct fsafe__ring *ring_new(unsigned entries)
{
	struct fsafe__ring *r = malloc(sizeof(*r));
	int e;

	if (!r)
		return NULL;
	if ((e = io_uring_queue_init(entries, &r->ring, 0)) < 0) {
		free(r);
		errno = -e;
		return NULL;
	}
	r->entries = entries;
	return r;
}

void fsafe__ring_free(struct fsafe__ring *r)
{
	if (!r)
		return;
	io_uring_queue_exit(&r->ring);
	free(r);
}

static int sync_on(struct fsafe__ring *ring, const int *fds, size_t n,
                   int *errs)
{
	int r = 0;

	for (size_t off = 0; off < n && r == 0; off += ring->entries) {
		size_t k = n - off < ring->entries ? n - off : ring->entries;
		r = sync_chunk(&ring->ring, fds + off, k, errs + off);
	}
	return r;
}

int fsafe__uring_fdatasync_many(struct fsafe__ring **keep, const int *fds,
                                size_t n, int *errs)
{
	struct fsafe__ring *ring = keep ? *keep : NULL;
	unsigned entries = 1; /* the kernel's sizes: powers of two */

	while (entries < n && entries < RING_ENTRIES)
		entries <<= 1;

	/* Sized to the call (a larger ring costs more to set up); a kept
	   one that is too small for this call is made anew, so a call's
	   syncs all run at once, as far as RING_ENTRIES allows. */
	if (ring && ring->entries < entries) {
		fsafe__ring_free(ring);
		*keep = ring = NULL;
	}
	if (!ring && !(ring = ring_new(entries)))
		return -1;
	int r = sync_on(ring, fds, n, errs);
	/* A ring that broke half-way is not used again. */
	if (!keep || r < 0) {
		fsafe__ring_free(ring);
		ring = NULL;
	}
	if (keep)
		*keep = ring;
	/* The syncs it did not report stay pending for the pool; the
	   reported ones, failures included, are never redone. */
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

#else

int fsafe__uring_fdatasync_many(struct fsafe__ring **keep, const int *fds,
                                size_t n, int *errs)
{
	(void)keep, (void)fds, (void)n, (void)errs;
	errno = ENOSYS;
	return -1;
}

void fsafe__ring_free(struct fsafe__ring *r)
{
	(void)r; /* never made */
}

#endif
