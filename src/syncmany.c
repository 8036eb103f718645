/* Many data syncs at once: io_uring, else a thread pool (a ring and
   threads of the call's own, or kept by its caller). */
#define _GNU_SOURCE
#include "syncmany.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "sys.h"
#include "thread.h"

/* Enough concurrent fsyncs for the filesystem to fold them into a few
   journal commits, few enough to cost nothing to start. */
#define POOL_THREADS 16

struct pool_job {
	const int *fds;
	const bool *full; /* NULL: data syncs only */
	int *errs;
	size_t n;
	atomic_size_t next;
};

static void sync_pending(struct pool_job *job)
{
	size_t i;

	while ((i = atomic_fetch_add(&job->next, 1)) < job->n)
		if (job->errs[i] == FSAFE__SYNC_PENDING)
			job->errs[i] = job->full && job->full[i]
			                       ? fsafe__fsync(job->fds[i])
			                       : fsafe__fdatasync(job->fds[i]);
}

static void *pool_worker(void *arg)
{
	sync_pending(arg);
	return NULL;
}

static void sync_by_pool(const int *fds, const bool *full, size_t n,
                         int *errs)
{
	struct pool_job job = { .fds = fds, .full = full, .errs = errs, .n = n };
	pthread_t threads[POOL_THREADS - 1];
	size_t started = 0;

	for (; started < POOL_THREADS - 1 && started + 1 < n; started++)
		if (fsafe__thread_start(&threads[started], NULL, pool_worker,
		                        &job))
			break; /* fewer threads is only slower */
	sync_pending(&job);
	for (size_t t = 0; t < started; t++)
		pthread_join(threads[t], NULL);
}

/* errs[] marked for the fds there are; how many there are. */
static size_t mark_pending(const int *fds, size_t n, int *errs)
{
	size_t pending = 0;

	for (size_t i = 0; i < n; i++) {
		errs[i] = fds[i] < 0 ? 0 : FSAFE__SYNC_PENDING;
		pending += fds[i] >= 0;
	}
	return pending;
}

void fsafe__sync_many(const int *fds, size_t n, int *errs, bool no_uring)
{
	struct pool_job job = { .fds = fds, .errs = errs, .n = n };
	size_t pending = mark_pending(fds, n, errs);

	/* One sync is done fastest here: a ring for it costs more. */
	if (pending <= 1)
		sync_pending(&job);
	else if (no_uring || SYS->fdatasync_many(NULL, fds, n, errs) < 0)
		sync_by_pool(fds, NULL, n, errs);
}

void fsafe__sync_many_full(const int *fds, const bool *full, size_t n,
                           int *errs)
{
	if (mark_pending(fds, n, errs))
		sync_by_pool(fds, full, n, errs);
}

/* A kept pool's threads only sync: a small stack is plenty. */
#define KEPT_STACK ((size_t)64 << 10)

struct fsafe__sync_pool {
	pthread_mutex_t run;   /* one call at a time */
	pthread_mutex_t mu;    /* guards what follows */
	pthread_cond_t work, done;
	struct pool_job *job;  /* the running call's, while it takes help */
	uint64_t round;        /* one per call: a thread helps each once */
	size_t busy;           /* threads inside the call's job */
	bool stop;
	bool uring;            /* data syncs go to a ring first */
	struct fsafe__ring *ring; /* kept between calls (NULL: none yet) */
	pid_t pid;             /* the process whose threads these are */
	size_t nthreads;
	pthread_t threads[POOL_THREADS - 1];
};

static void *kept_worker(void *arg)
{
	struct fsafe__sync_pool *p = arg;
	uint64_t seen = 0;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && (!p->job || p->round == seen))
			pthread_cond_wait(&p->work, &p->mu);
		if (p->stop)
			break;
		struct pool_job *job = p->job;
		seen = p->round;
		p->busy++;
		pthread_mutex_unlock(&p->mu);
		sync_pending(job);
		pthread_mutex_lock(&p->mu);
		if (--p->busy == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct fsafe__sync_pool *fsafe__sync_pool_new(bool uring)
{
	struct fsafe__sync_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->run, NULL);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->uring = uring;
	p->pid = getpid();
	return p;
}

/*
 * Threads enough for n syncs (the caller does one), started as they are
 * first needed (with no signals, as every thread of ours). Fewer threads
 * than wanted are only slower.
 */
static void pool_grow(struct fsafe__sync_pool *p, size_t n)
{
	size_t want = n - 1 < POOL_THREADS - 1 ? n - 1 : POOL_THREADS - 1;
	pthread_attr_t attr;

	if (p->nthreads >= want || pthread_attr_init(&attr) != 0)
		return;
	pthread_attr_setstacksize(&attr, KEPT_STACK);
	while (p->nthreads < want &&
	       fsafe__thread_start(&p->threads[p->nthreads], &attr,
	                           kept_worker, p) == 0)
		p->nthreads++;
	pthread_attr_destroy(&attr);
}

/* The job on the kept threads and the caller's. Called with p->run held. */
static void run_on_threads(struct fsafe__sync_pool *p, struct pool_job *job,
                           size_t pending)
{
	pool_grow(p, pending);
	pthread_mutex_lock(&p->mu);
	p->job = job;
	p->round++;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	sync_pending(job);
	/* Every sync is taken; no thread may join now, and those that did
	   are waited for (their syncs write into errs). */
	pthread_mutex_lock(&p->mu);
	p->job = NULL;
	while (p->busy)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void fsafe__sync_pool_run(struct fsafe__sync_pool *p, const int *fds,
                          const bool *full, size_t n, int *errs)
{
	struct pool_job job = { .fds = fds, .full = full, .errs = errs, .n = n };
	size_t pending = mark_pending(fds, n, errs);

	if (!pending)
		return;
	if (pending == 1) {
		sync_pending(&job);
		return;
	}
	if (!p || p->pid != getpid()) {
		if (!full)
			fsafe__sync_many(fds, n, errs, !p || !p->uring);
		else
			sync_by_pool(fds, full, n, errs);
		return;
	}
	pthread_mutex_lock(&p->run);
	/* What the ring leaves pending (it broke, or there is none), the
	   threads take. */
	if (!p->uring || full ||
	    SYS->fdatasync_many(&p->ring, fds, n, errs) < 0)
		run_on_threads(p, &job, pending);
	pthread_mutex_unlock(&p->run);
}

void fsafe__sync_pool_free(struct fsafe__sync_pool *p)
{
	if (!p)
		return;
	/* A child of fork has none of these threads to stop, and its copy
	   of the condition they wait on would wait for them forever in
	   pthread_cond_destroy: the memory alone is its to free, with its
	   copies of the ring's mappings and fd (the parent's ring lives). */
	if (p->pid != getpid()) {
		fsafe__ring_free(p->ring);
		free(p);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (size_t i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	fsafe__ring_free(p->ring);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->run);
	free(p);
}
