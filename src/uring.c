/* The io_uring backend of fsafe__sync_many, when built with liburing. */
#define _GNU_SOURCE
#include "syncmany.h"

#include <errno.h>

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

int fsafe__uring_fdatasync_many(const int *fds, size_t n, int *errs)
{
	struct io_uring ring;
	unsigned entries = n < RING_ENTRIES ? (unsigned)n : RING_ENTRIES;
	int r = io_uring_queue_init(entries ? entries : 1, &ring, 0);

	if (r < 0) {
		errno = -r;
		return -1;
	}
	for (size_t off = 0; off < n && r == 0; off += entries) {
		size_t k = n - off < entries ? n - off : entries;
		r = sync_chunk(&ring, fds + off, k, errs + off);
	}
	io_uring_queue_exit(&ring);
	/* A ring that broke half-way leaves the unreported syncs pending for
	   the pool; the reported ones, failures included, are never redone. */
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

#else

int fsafe__uring_fdatasync_many(const int *fds, size_t n, int *errs)
{
	(void)fds, (void)n, (void)errs;
	errno = ENOSYS;
	return -1;
}

#endif
