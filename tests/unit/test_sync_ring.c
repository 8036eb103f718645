/*
 * The kept ring (issue 19): an fsafe_async's groups and a batch's windows
 * sync on one io_uring ring, set up once, not once per group or window
 * (a ring costs about 90 us to set up and take down, more than a small
 * group's device flush); what a ring leaves undone goes to threads; a
 * lone sync takes no ring at all.
 *
 * The table's fdatasync_many is watched: whether a call brings a ring to
 * keep (and finds one there), and which ring it leaves there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "fsafe/batch.h"
#include "syncmany.h"
#include "sys.h"
#include "testutil.h"

#define MAXCALLS 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int calls;     /* fdatasync_many calls */
static int own;       /* ... with a ring of their own (keep NULL) */
static int made;      /* ... that found no kept ring (and made one) */
static struct fsafe__ring *left[MAXCALLS]; /* the kept ring after each */
static int datasyncs; /* fdatasync calls */
static bool refuse;   /* the next ring call fails with all undone */
static bool stall;    /* the next fdatasync waits for `released` */
static bool stalled, released;

static void reset(void)
{
	pthread_mutex_lock(&mu);
	calls = own = made = datasyncs = 0;
	memset(left, 0, sizeof(left));
	refuse = stall = stalled = released = false;
	pthread_mutex_unlock(&mu);
}

static int watched_many(struct fsafe__ring **keep, const int *fds, size_t n,
                        int *errs)
{
	pthread_mutex_lock(&mu);
	int call = calls++;
	own += !keep;
	made += keep && !*keep;
	bool fail = refuse;
	refuse = false;
	pthread_mutex_unlock(&mu);
	if (fail) {
		for (size_t i = 0; i < n; i++)
			errs[i] = fds[i] < 0 ? 0 : FSAFE__SYNC_PENDING;
		errno = ENOMEM;
		return -1;
	}
	int r = fsafe__sys_default.fdatasync_many(keep, fds, n, errs);
	int e = errno;
	pthread_mutex_lock(&mu);
	if (keep && call < MAXCALLS)
		left[call] = *keep;
	pthread_mutex_unlock(&mu);
	errno = e;
	return r;
}

/* A stalled sync tells the test it is inside, and waits (5 s at most)
   for the test to let it go. */
static int watched_fdatasync(int fd)
{
	pthread_mutex_lock(&mu);
	datasyncs++;
	if (stall) {
		stall = false;
		stalled = true;
		pthread_cond_broadcast(&cv);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		while (!released &&
		       pthread_cond_timedwait(&cv, &mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&mu);
	return fsafe__sys_default.fdatasync(fd);
}

/* Every ring call from `from` on left the same ring, not NULL. */
static void assert_one_ring(int from)
{
	assert_true(calls > from);
	for (int i = from; i < calls && i < MAXCALLS; i++) {
		assert_non_null(left[i]);
		assert_ptr_equal(left[i], left[from]);
	}
}

struct ring_fx {
	struct tu_fx *dir;
	struct fsafe_sys t;
	const struct fsafe_sys *old;
};

static bool have_io_uring(void)
{
	int fd = memfd_create("probe", MFD_CLOEXEC), err;

	assert_true(fd >= 0);
	int r = fsafe__uring_fdatasync_many(NULL, &fd, 1, &err);
	close(fd);
	return r == 0;
}

static int ring_setup(void **state)
{
	struct ring_fx *x = calloc(1, sizeof(*x));
	void *dir = NULL;

	assert_non_null(x);
	assert_int_equal(tu_fx_setup(&dir), 0);
	x->dir = dir;
	x->t = fsafe__sys_default;
	x->t.fdatasync_many = watched_many;
	x->t.fdatasync = watched_fdatasync;
	reset();
	x->old = fsafe__sys_swap(&x->t);
	*state = x;
	return 0;
}

static int ring_teardown(void **state)
{
	struct ring_fx *x = *state;
	void *dir = x->dir;

	fsafe__sys_swap(x->old);
	free(x);
	return tu_fx_teardown(&dir);
}

static void skip_without_io_uring(void)
{
	if (!have_io_uring()) {
		print_message("SKIP: no io_uring here (%s)\n", strerror(errno));
		skip();
	}
}

static void submit(fsafe_async *a, int dirfd, int round, int i)
{
	char name[32];

	snprintf(name, sizeof(name), "r%d-%d", round, i);
	assert_int_equal(fsafe_async_submit(a, dirfd, name, name, strlen(name),
	                                    NULL, NULL, NULL), 0);
}

/* Wait until `n` writes are complete, each with success. */
static void reap(fsafe_async *a, int n)
{
	struct fsafe_async_completion c[8];

	while (n > 0) {
		assert_int_equal(fsafe_async_wait(a, 5000), 0);
		int got = fsafe_async_reap(a, c, 8);
		for (int i = 0; i < got; i++)
			assert_int_equal(c[i].result, 0);
		n -= got;
	}
}

/*
 * Rounds of a lone write whose sync is held until three more are queued
 * behind it: those three are the next group, synced through the ring.
 * Every round's group must find the ring the first one left.
 */
static void async_groups_share_one_ring(void **state)
{
	struct ring_fx *x = *state;
	fsafe_async *a;

	skip_without_io_uring();
	assert_int_equal(fsafe_async_new(NULL, &a), 0);
	for (int round = 0; round < 3; round++) {
		pthread_mutex_lock(&mu);
		stall = true;
		stalled = released = false;
		pthread_mutex_unlock(&mu);
		submit(a, x->dir->dirfd, round, 0);
		pthread_mutex_lock(&mu);
		while (!stalled)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		for (int i = 1; i <= 3; i++)
			submit(a, x->dir->dirfd, round, i);
		pthread_mutex_lock(&mu);
		released = true;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		reap(a, 4);
	}
	fsafe_async_free(a);
	print_message("%d ring calls, %d rings made\n", calls, made);
	assert_int_equal(calls, 3);
	assert_int_equal(own, 0);
	assert_int_equal(made, 1);
	assert_one_ring(0);
}

/* Three windows of two: one ring made, and kept for all three. */
static void batch_windows_share_one_ring(void **state)
{
	struct ring_fx *x = *state;
	struct fsafe_batch_opts o = FSAFE_BATCH_OPTS_INIT;
	fsafe_batch *b;
	char name[16];

	skip_without_io_uring();
	o.max_inflight = 2;
	assert_int_equal(fsafe_batch_new(&o, &b), 0);
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		assert_int_equal(fsafe_batch_add(b, x->dir->dirfd, name, name,
		                                 strlen(name), NULL), i);
	}
	assert_int_equal(fsafe_batch_commit(b), 0);
	fsafe_batch_free(b);
	assert_int_equal(calls, 3);
	assert_int_equal(own, 0);
	assert_int_equal(made, 1);
	assert_one_ring(0);
	assert_int_equal(datasyncs, 0);
}

/* One file's sync is one fdatasync: a ring for it costs more. */
static void a_lone_sync_takes_no_ring(void **state)
{
	struct ring_fx *x = *state;
	fsafe_batch *b;
	int fds[3] = { -1, memfd_create("one", MFD_CLOEXEC), -1 };
	int errs[3] = { 7, 7, 7 };

	assert_true(fds[1] >= 0);
	fsafe__sync_many(fds, 3, errs, false);
	close(fds[1]);
	assert_int_equal(errs[0], 0);
	assert_int_equal(errs[1], 0);
	assert_int_equal(errs[2], 0);
	assert_int_equal(datasyncs, 1);

	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	assert_int_equal(fsafe_batch_add(b, x->dir->dirfd, "one", "1", 1, NULL),
	                 0);
	assert_int_equal(fsafe_batch_commit(b), 0);
	fsafe_batch_free(b);
	assert_int_equal(datasyncs, 2);
	assert_int_equal(calls, 0);
}

/* A ring that fails leaves its syncs to the pool's threads; the next call
   goes to the ring again. */
static void what_the_ring_leaves_the_threads_do(void **state)
{
	(void)state;
	struct fsafe__sync_pool *p = fsafe__sync_pool_new(true);
	int fds[3], errs[3] = { 7, 7, 7 };

	skip_without_io_uring();
	assert_non_null(p);
	for (int i = 0; i < 3; i++)
		assert_true((fds[i] = memfd_create("f", MFD_CLOEXEC)) >= 0);
	refuse = true;
	fsafe__sync_pool_run(p, fds, NULL, 3, errs);
	assert_int_equal(calls, 1);
	assert_int_equal(datasyncs, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(errs[i], 0);

	memset(errs, 7, sizeof(errs));
	fsafe__sync_pool_run(p, fds, NULL, 3, errs);
	assert_int_equal(calls, 2);
	assert_int_equal(datasyncs, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(errs[i], 0);
	assert_non_null(left[1]);
	fsafe__sync_pool_free(p);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(async_groups_share_one_ring,
		                                ring_setup, ring_teardown),
		cmocka_unit_test_setup_teardown(batch_windows_share_one_ring,
		                                ring_setup, ring_teardown),
		cmocka_unit_test_setup_teardown(a_lone_sync_takes_no_ring,
		                                ring_setup, ring_teardown),
		cmocka_unit_test_setup_teardown(
		        what_the_ring_leaves_the_threads_do, ring_setup,
		        ring_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
