/*
 * The library's own threads take no signals (src/thread.c). The test's
 * thread blocks none; a table of system calls notes, for every call made
 * on another thread, whether that thread blocks every signal it can. Each
 * kind of thread the library starts must be seen, and blocking all:
 * a batch's sync workers (kept for its commit, or the call's own in a
 * child of fork) and the sync of its overlapped windows, an fsafe_async's
 * worker, a checkpoint's load reader and
 * its removals. A save's sum threads make no system call;
 * the helper itself is checked directly, as a thread started by it
 * reports its own mask.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "batch.h"
#include "fsafe.h"
#include "fsafe/batch.h"
#include "fsafe/checkpoint.h"
#include "syncmany.h"
#include "sys.h"
#include "testutil.h"
#include "thread.h"

static pthread_t test_thread;
static atomic_int others;   /* calls made on threads not the test's */
static atomic_int takers;   /* of those, on a thread taking a signal */

/*
 * Where the caller's thread and a pool's share the syncs, the caller may
 * take them all before a pool thread wakes. With `meet` set, each sync
 * waits (5 s at most) until `meet` syncs have begun: the caller's first
 * one waits for a pool thread's, so a pool thread surely makes one.
 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int meet, begun;

static void rendezvous(void)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&mu);
	begun++;
	pthread_cond_broadcast(&cv);
	while (begun < meet &&
	       pthread_cond_timedwait(&cv, &mu, &until) == 0)
		;
	pthread_mutex_unlock(&mu);
}

/* Whether the calling thread blocks every signal a thread can block
   (not SIGKILL, SIGSTOP, nor the C library's own below SIGRTMIN). */
static bool blocks_all(void)
{
	sigset_t cur;

	if (pthread_sigmask(SIG_BLOCK, NULL, &cur) != 0)
		return false;
	for (int s = 1; s < SIGRTMAX; s++) {
		if (s == SIGKILL || s == SIGSTOP || (s > 31 && s < SIGRTMIN))
			continue;
		if (!sigismember(&cur, s))
			return false;
	}
	return true;
}

static void note(void)
{
	if (pthread_equal(pthread_self(), test_thread))
		return;
	atomic_fetch_add(&others, 1);
	if (!blocks_all())
		atomic_fetch_add(&takers, 1);
}

static int n_openat(int d, const char *p, int fl, mode_t m)
{
	note();
	return fsafe__sys_default.openat(d, p, fl, m);
}

static ssize_t n_read(int fd, void *b, size_t n)
{
	note();
	return fsafe__sys_default.read(fd, b, n);
}

static ssize_t n_pread(int fd, void *b, size_t n, off_t o)
{
	note();
	return fsafe__sys_default.pread(fd, b, n, o);
}

static int n_fsync(int fd)
{
	note();
	rendezvous();
	return fsafe__sys_default.fsync(fd);
}

static int n_fdatasync(int fd)
{
	note();
	rendezvous();
	return fsafe__sys_default.fdatasync(fd);
}

static int n_unlinkat(int d, const char *p, int fl)
{
	note();
	return fsafe__sys_default.unlinkat(d, p, fl);
}

/* Syncs by the pool's threads, not by io_uring's kernel threads. */
static int no_ring(struct fsafe__ring **keep, const int *fds, size_t n,
                   int *errs)
{
	(void)keep, (void)fds, (void)n, (void)errs;
	errno = ENOSYS;
	return -1;
}

static struct fsafe_sys table;
static const struct fsafe_sys *saved;

static int setup(void **state)
{
	sigset_t none;

	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	test_thread = pthread_self();
	atomic_store(&others, 0);
	atomic_store(&takers, 0);
	meet = begun = 0;
	table = fsafe__sys_default;
	table.openat = n_openat;
	table.read = n_read;
	table.pread = n_pread;
	table.fsync = n_fsync;
	table.fdatasync = n_fdatasync;
	table.unlinkat = n_unlinkat;
	table.fdatasync_many = no_ring;
	saved = fsafe__sys_swap(&table);
	return tu_fx_setup(state);
}

static int teardown(void **state)
{
	fsafe__sys_swap(saved);
	return tu_fx_teardown(state);
}

/* Calls were seen on other threads, and none on one taking signals. */
static void assert_threads_blocked(void)
{
	assert_true(atomic_load(&others) > 0);
	assert_int_equal(atomic_load(&takers), 0);
}

static void *report_mask(void *arg)
{
	*(bool *)arg = blocks_all();
	return NULL;
}

static void helper_blocks_and_restores(void **state)
{
	sigset_t usr2, after;
	pthread_t t;
	bool all = false;

	(void)state;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	pthread_sigmask(SIG_SETMASK, &usr2, NULL);
	assert_int_equal(fsafe__thread_start(&t, NULL, report_mask, &all), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(all);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	assert_true(sigismember(&after, SIGUSR2));
	assert_false(sigismember(&after, SIGUSR1));
	assert_false(sigismember(&after, SIGTERM));
}

/* A batch of n files (0: the default window), synced one by one. */
static void commit_batch(struct tu_fx *x, int n, unsigned window)
{
	struct fsafe_batch_opts o = FSAFE_BATCH_OPTS_INIT;
	fsafe_batch *b;
	char name[32];

	o.flags = FSAFE_BATCH_NO_URING | FSAFE_BATCH_NO_SYNCFS;
	o.max_inflight = window;
	assert_int_equal(fsafe_batch_new(&o, &b), 0);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_true(fsafe_batch_add(b, x->dirfd, name, "x", 1, NULL) >=
		            0);
	}
	assert_int_equal(fsafe_batch_commit(b), 0);
	fsafe_batch_free(b);
}

/* Enough files that the batch syncs them on threads. */
static void batch_sync_workers(void **state)
{
	meet = 2;
	commit_batch(*state, 16, 0);
	assert_threads_blocked();
}

/* Two windows of one file (max_inflight 2, overlapped from 1 item): the
   first syncs on a thread of the batch's (its one sync made there, not on
   the pool's) while the second is staged. */
static void batch_overlapped_windows(void **state)
{
	fsafe__test_overlap_min = 1;
	commit_batch(*state, 2, 2);
	fsafe__test_overlap_min = -1;
	assert_threads_blocked();
}

/* A child of fork has none of its parent's kept threads: its syncs
   start threads of the call's own. */
static void fork_child_sync_workers(void **state)
{
	struct tu_fx *x = *state;
	struct fsafe__sync_pool *p = fsafe__sync_pool_new(false);
	int fds[3], errs[3], status;

	assert_non_null(p);
	for (int i = 0; i < 3; i++) {
		char name[8] = { 'g', (char)('0' + i), 0 };
		fds[i] = openat(x->dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC,
		                0600);
		assert_true(fds[i] >= 0);
	}
	meet = 2;
	fsafe__sync_pool_run(p, fds, NULL, 3, errs);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		atomic_store(&others, 0);
		begun = 0;
		fsafe__sync_pool_run(p, fds, NULL, 3, errs);
		_exit(errs[0] == 0 && errs[1] == 0 && errs[2] == 0 &&
		      atomic_load(&others) > 0 && atomic_load(&takers) == 0
		              ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	fsafe__sync_pool_free(p);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	assert_threads_blocked();
}

static void async_worker(void **state)
{
	struct tu_fx *x = *state;
	struct fsafe_async_opts o = FSAFE_ASYNC_OPTS_INIT;
	struct fsafe_async_completion c;
	fsafe_async *a;
	uint64_t id;
	int got = 0;

	o.flags = FSAFE_BATCH_NO_URING;
	assert_int_equal(fsafe_async_new(&o, &a), 0);
	assert_int_equal(fsafe_async_submit(a, x->dirfd, "a", "y", 1, NULL,
	                                    NULL, &id), 0);
	while (got == 0) {
		assert_int_equal(fsafe_async_wait(a, 10000), 0);
		got = fsafe_async_reap(a, &c, 1);
		assert_true(got >= 0);
	}
	assert_int_equal(c.result, 0);
	fsafe_async_free(a);
	assert_threads_blocked();
}

/* Saves beyond `keep` (removals on a thread), a load big enough to be
   read on a thread; each alone must be seen on a thread blocking all. */
static void checkpoint_threads(void **state)
{
	struct tu_fx *x = *state;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	size_t len = 1 << 20;
	unsigned char *bytes = tu_pattern(len, 7);
	fsafe_checkpoint *cp;
	fsafe_checkpoint_snapshot *s;
	fsafe_checkpoint_tx *tx;

	o.flags = FSAFE_CHECKPOINT_CREATE;
	o.keep = 1;
	assert_int_equal(fsafe_checkpoint_open(x->dirfd, "cp", &o, &cp), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
		assert_int_equal(fsafe_checkpoint_add(tx, "f", bytes, len), 0);
		assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
	}
	assert_threads_blocked();

	atomic_store(&others, 0);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	assert_int_equal(fsafe_checkpoint_snapshot_size(s, 0), len);
	fsafe_checkpoint_snapshot_free(s);
	assert_threads_blocked();
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(helper_blocks_and_restores),
		cmocka_unit_test_setup_teardown(batch_sync_workers, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(batch_overlapped_windows, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(fork_child_sync_workers, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(async_worker, setup, teardown),
		cmocka_unit_test_setup_teardown(checkpoint_threads, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
