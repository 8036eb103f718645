/*
 * Asynchronous writes for event loops.
 *
 * Submissions queue up; one background thread takes whatever is queued (up
 * to max_group) and commits it as one batch, so writes submitted close
 * together share their device flushes. Completions are announced on an
 * eventfd (a pipe elsewhere) that callers poll, and collected by reap.
 *
 * The completion descriptor is not a filesystem object, so its reads and
 * writes bypass the system-call table: fault plans then count only the
 * file operations, the same ones as for a synchronous write.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

#include "fsafe.h"
#include "error.h"
#include "fsafe/batch.h"
#include "batch.h"
#include "opts.h"
#include "syncmany.h"
#include "thread.h"
#include "writer.h"

#define DEFAULT_GROUP 128

enum state { QUEUED, RUNNING, DONE };

struct req {
	struct req *next;
	uint64_t id;
	enum state state;
	int dirfd;
	char *path;
	const void *buf;
	size_t len;
	struct fsafe_write_opts opts;
	char *if_unchanged;   /* opts.if_unchanged's copy: the caller's
	                         string need not outlive the submit */
	void *user;
	int result;
};

/* A FIFO of requests. */
struct queue {
	struct req *head, **tail;
};

struct fsafe_async {
	pthread_mutex_t mu;
	pthread_cond_t work;  /* the worker waits for submissions */
	pthread_cond_t done;  /* fsafe_async_wait waits for completions */
	struct queue pending, finished;
	struct req *running;  /* the group being committed */
	int notify[2];        /* eventfd twice, or a pipe's two ends */
	bool signalled;
	pthread_t thread;
	bool started, stopping;
	uint64_t next_id;
	unsigned flags, max_group;
	struct fsafe_error *error; /* the options', for submit */
};

/* A failure of a call on the engine (or of its creation), reported. */
static int fail(struct fsafe_error *error, int r, const char *step)
{
	fsafe__error_set(error, r, -r, step, false);
	return r;
}

static void q_init(struct queue *q)
{
	q->head = NULL;
	q->tail = &q->head;
}

static void q_push(struct queue *q, struct req *r)
{
	r->next = NULL;
	*q->tail = r;
	q->tail = &r->next;
}

static struct req *q_pop(struct queue *q)
{
	struct req *r = q->head;
	if (r && !(q->head = r->next))
		q->tail = &q->head;
	return r;
}

/* Unlink the request with `id`, if queued. */
static struct req *q_take(struct queue *q, uint64_t id)
{
	for (struct req **p = &q->head; *p; p = &(*p)->next) {
		struct req *r = *p;
		if (r->id != id)
			continue;
		if (!(*p = r->next))
			q->tail = p;
		return r;
	}
	return NULL;
}

static void req_free(struct req *r)
{
	free(r->path);
	free(r->if_unchanged);
	free(r);
}

static int notify_open(int fds[2])
{
#ifdef __linux__
	fds[0] = fds[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return fds[0] < 0 ? -errno : 0;
#else
	if (pipe(fds) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		fcntl(fds[i], F_SETFD, FD_CLOEXEC);
		fcntl(fds[i], F_SETFL, O_NONBLOCK);
	}
	return 0;
#endif
}

/* Called with the mutex held: make the fd readable (once). */
static void notify_set(fsafe_async *a)
{
	uint64_t one = 1;
	if (a->signalled)
		return;
	a->signalled = write(a->notify[1], &one, sizeof(one)) > 0;
}

/* Called with the mutex held, when nothing is left to reap. */
static void notify_clear(fsafe_async *a)
{
	uint64_t v;
	if (!a->signalled)
		return;
	while (read(a->notify[0], &v, sizeof(v)) > 0)
		;
	a->signalled = false;
}

static void complete(fsafe_async *a, struct req *r, int result)
{
	r->state = DONE;
	r->result = result;
	q_push(&a->finished, r);
	notify_set(a);
	pthread_cond_broadcast(&a->done);
}

/* Take a group off the queue (mutex held); NULL when stopping. */
static struct req *take_group(fsafe_async *a)
{
	while (!a->pending.head && !a->stopping)
		pthread_cond_wait(&a->work, &a->mu);
	struct req *group = NULL, **tail = &group;
	for (unsigned n = 0; n < a->max_group && a->pending.head; n++) {
		struct req *r = q_pop(&a->pending);
		r->state = RUNNING;
		*tail = r;
		tail = &r->next;
	}
	*tail = NULL; /* the last one taken still points into the queue */
	return group;
}

static void commit_group(fsafe_async *a, struct req *group,
                         struct fsafe__sync_pool *pool)
{
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	fsafe_batch *b;
	int r;

	bo.flags = a->flags;
	bo.max_inflight = a->max_group;
	if ((r = fsafe_batch_new(&bo, &b)) == 0) {
		fsafe__batch_use_pool(b, pool);
		for (struct req *q = group; q; q = q->next)
			fsafe_batch_add(b, q->dirfd, q->path, q->buf, q->len,
			                &q->opts);
		fsafe_batch_commit(b);
	}
	pthread_mutex_lock(&a->mu);
	size_t i = 0;
	for (struct req *q = group, *next; q; q = next, i++) {
		next = q->next;
		complete(a, q, r < 0 ? r : fsafe_batch_result(b, i));
	}
	a->running = NULL;
	pthread_mutex_unlock(&a->mu);
	if (r == 0)
		fsafe_batch_free(b);
}

/* The worker keeps one ring (or threads) for all its groups' syncs: a
   small group would otherwise spend more setting a ring up than on its
   device flush. */
static void *worker(void *arg)
{
	fsafe_async *a = arg;
	struct fsafe__sync_pool *pool =
	        fsafe__sync_pool_new(!(a->flags & FSAFE_BATCH_NO_URING));

	pthread_mutex_lock(&a->mu);
	for (;;) {
		struct req *group = take_group(a);
		if (!group)
			break;
		a->running = group;
		pthread_mutex_unlock(&a->mu);
		commit_group(a, group, pool);
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	fsafe__sync_pool_free(pool);
	return NULL;
}

int fsafe_async_new(const struct fsafe_async_opts *opts, fsafe_async **out)
{
	struct fsafe_async_opts in;
	int r = FSAFE__OPTS_COPY(&in, opts, FSAFE_ASYNC_OPTS_SIZE_V0);

	assert(out);
	*out = NULL;
	if (r < 0)
		return fail(FSAFE__OPTS_ERROR(opts, struct fsafe_async_opts, r),
		            r, "options");
	if (in.flags & ~(unsigned)(FSAFE_BATCH_NO_URING | FSAFE_BATCH_NO_SYNCFS |
	                           FSAFE_BATCH_SYNCFS_ANY_DIRTY))
		return fail(in.error, -EINVAL, "options");
	fsafe_async *a = calloc(1, sizeof(*a));
	if (!a)
		return fail(in.error, -ENOMEM, "allocate");
	r = notify_open(a->notify);
	if (r < 0) {
		free(a);
		return fail(in.error, r, "eventfd");
	}
	a->error = in.error;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->work, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->done, &ca);
	pthread_condattr_destroy(&ca);
	q_init(&a->pending);
	q_init(&a->finished);
	a->flags = in.flags;
	a->max_group = in.max_group ? in.max_group : DEFAULT_GROUP;
	a->next_id = 1;
	*out = a;
	return 0;
}

int fsafe_async_fd(const fsafe_async *a)
{
	assert(a);
	return a->notify[0];
}

static int start_worker(fsafe_async *a)
{
	if (a->started)
		return 0;
	int r = fsafe__thread_start(&a->thread, NULL, worker, a);

	a->started = r == 0;
	return r;
}

int fsafe_async_submit(fsafe_async *a, int dirfd, const char *path,
                       const void *buf, size_t len,
                       const struct fsafe_write_opts *opts, void *user,
                       uint64_t *id)
{
	struct fsafe__wopts check;
	int r = fsafe__wopts_load(&check, opts);

	assert(a);
	if (r < 0 || !path || (!buf && len > 0))
		return fail(a->error, r < 0 ? r : -EINVAL, "options");
	struct req *q = calloc(1, sizeof(*q));
	if (!q || !(q->path = strdup(path)) ||
	    (check.conditional && opts->if_unchanged &&
	     !(q->if_unchanged = strdup(opts->if_unchanged)))) {
		if (q)
			req_free(q);
		return fail(a->error, -ENOMEM, "allocate");
	}
	q->dirfd = dirfd;
	q->buf = buf;
	q->len = len;
	q->user = user;
	q->opts = (struct fsafe_write_opts){ .size = sizeof(q->opts),
	                                     .flags = check.flags,
	                                     .mode = check.mode,
	                                     .error = check.error,
	                                     .if_unchanged = q->if_unchanged };
	pthread_mutex_lock(&a->mu);
	if ((r = start_worker(a)) == 0) {
		q->id = a->next_id++;
		q_push(&a->pending, q);
		pthread_cond_signal(&a->work);
		if (id)
			*id = q->id;
	}
	pthread_mutex_unlock(&a->mu);
	if (r < 0) {
		req_free(q);
		fail(a->error, r, "start worker thread");
	}
	return r;
}

static bool in_group(const struct req *group, uint64_t id)
{
	for (; group; group = group->next)
		if (group->id == id)
			return true;
	return false;
}

int fsafe_async_cancel(fsafe_async *a, uint64_t id)
{
	int r = -ENOENT;

	assert(a);
	pthread_mutex_lock(&a->mu);
	struct req *q = q_take(&a->pending, id);
	if (q) {
		complete(a, q, -ECANCELED);
		r = 0;
	} else if (in_group(a->running, id) || in_group(a->finished.head, id)) {
		r = -EBUSY;
	}
	pthread_mutex_unlock(&a->mu);
	return r;
}

int fsafe_async_reap(fsafe_async *a, struct fsafe_async_completion *out,
                     size_t max)
{
	size_t n = 0;

	assert(a && (out || max == 0));
	pthread_mutex_lock(&a->mu);
	struct req *q;
	while (n < max && (q = q_pop(&a->finished))) {
		out[n++] = (struct fsafe_async_completion){ q->id, q->result,
		                                            q->user };
		req_free(q);
	}
	if (!a->finished.head)
		notify_clear(a);
	pthread_mutex_unlock(&a->mu);
	return (int)n;
}

/* A year and more is as good as forever, and keeps tv_sec from
   overflowing. */
#define WAIT_MAX_MS (400ull * 24 * 3600 * 1000)

static void deadline_after(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

int fsafe_async_wait(fsafe_async *a, uint64_t timeout_ms)
{
	struct timespec deadline;
	bool forever = timeout_ms == FSAFE_FOREVER || timeout_ms > WAIT_MAX_MS;
	int r = 0;

	assert(a);
	if (!forever)
		deadline_after(&deadline, timeout_ms);
	pthread_mutex_lock(&a->mu);
	while (!a->finished.head && r == 0) {
		if (!a->pending.head && !a->running)
			r = -ENOENT;
		else if (forever)
			pthread_cond_wait(&a->done, &a->mu);
		else if (timeout_ms == 0 ||
		         pthread_cond_timedwait(&a->done, &a->mu, &deadline))
			r = a->finished.head ? 0 : -ETIMEDOUT;
	}
	pthread_mutex_unlock(&a->mu);
	return r;
}

void fsafe_async_free(fsafe_async *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	struct req *q;
	while ((q = q_pop(&a->pending)))
		complete(a, q, -ECANCELED); /* never started: untouched */
	pthread_cond_signal(&a->work);
	pthread_mutex_unlock(&a->mu);
	if (a->started)
		pthread_join(a->thread, NULL);
	while ((q = q_pop(&a->finished)))
		req_free(q);
	close(a->notify[0]);
	if (a->notify[1] != a->notify[0])
		close(a->notify[1]);
	pthread_cond_destroy(&a->work);
	pthread_cond_destroy(&a->done);
	pthread_mutex_destroy(&a->mu);
	free(a);
}
