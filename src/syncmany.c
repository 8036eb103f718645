/* Many data syncs at once: io_uring, else a short-lived thread pool. */
#define _GNU_SOURCE
#include "syncmany.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sys.h"

/* Enough concurrent fsyncs for the filesystem to fold them into a few
   journal commits, few enough to cost nothing to start. */
#define POOL_THREADS 16

struct pool_job {
	const int *fds;
	int *errs;
	size_t n;
	atomic_size_t next;
};

static void sync_pending(struct pool_job *job)
{
	size_t i;

	while ((i = atomic_fetch_add(&job->next, 1)) < job->n)
		if (job->errs[i] == FSAFE__SYNC_PENDING)
			job->errs[i] = fsafe__fdatasync(job->fds[i]);
}

static void *pool_worker(void *arg)
{
	sync_pending(arg);
	return NULL;
}

static void sync_by_pool(const int *fds, size_t n, int *errs)
{
	struct pool_job job = { .fds = fds, .errs = errs, .n = n };
	pthread_t threads[POOL_THREADS - 1];
	size_t started = 0;

	for (; started < POOL_THREADS - 1 && started + 1 < n; started++)
		if (pthread_create(&threads[started], NULL, pool_worker, &job))
			break; /* fewer threads is only slower */
	sync_pending(&job);
	for (size_t t = 0; t < started; t++)
		pthread_join(threads[t], NULL);
}

void fsafe__sync_many(const int *fds, size_t n, int *errs, bool no_uring)
{
	size_t pending = 0;

	for (size_t i = 0; i < n; i++) {
		errs[i] = fds[i] < 0 ? 0 : FSAFE__SYNC_PENDING;
		pending += fds[i] >= 0;
	}
	if (!pending)
		return;
	if (!no_uring && SYS->fdatasync_many(fds, n, errs) == 0)
		return;
	sync_by_pool(fds, n, errs);
}
