/*
 * The kept sync pool (issue 19): a checkpoint's every save syncs on
 * threads started once, not per save. Its syncs run at once, each of the
 * kind asked for (fsync where marked, else fdatasync) with its own result;
 * a second call finds the same threads; those threads take no signals;
 * a child of fork, which has none of them, still gets its syncs done; and
 * a checkpoint's saves after its first start no threads to sync.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "fsafe/checkpoint.h"
#include "syncmany.h"
#include "sys.h"
#include "testutil.h"

#define N 3 /* syncs per call: the caller and two of the pool's threads */

/* What the table saw: per fd, which call; and which threads made them. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int inside;            /* syncs under way right now */
static bool together;         /* all N were under way at once */
static int full_calls[64], data_calls[64];
static pid_t tids[64];
static size_t ntids;

static void note_tid(void)
{
	pid_t t = gettid();

	for (size_t i = 0; i < ntids; i++)
		if (tids[i] == t)
			return;
	if (ntids < 64)
		tids[ntids++] = t;
}

/*
 * Each sync waits (5 s at most) until N are under way: the syncs of one
 * call must run at once, each on a thread of its own.
 */
static void meet(void)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&mu);
	note_tid();
	if (++inside == N) {
		together = true;
		pthread_cond_broadcast(&cv);
	}
	while (!together &&
	       pthread_cond_timedwait(&cv, &mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&mu);
}

static int counted(int fd, int *calls, int (*sync)(int))
{
	meet();
	int r = sync(fd);
	pthread_mutex_lock(&mu);
	calls[fd]++;
	inside--; /* one after another never has N under way */
	pthread_mutex_unlock(&mu);
	return r;
}

static int counted_fsync(int fd)
{
	return counted(fd, full_calls, fsafe__sys_default.fsync);
}

static int counted_fdatasync(int fd)
{
	return counted(fd, data_calls, fsafe__sys_default.fdatasync);
}

static void reset(void)
{
	pthread_mutex_lock(&mu);
	inside = 0;
	together = false;
	memset(full_calls, 0, sizeof(full_calls));
	memset(data_calls, 0, sizeof(data_calls));
	pthread_mutex_unlock(&mu);
}

static const struct fsafe_sys *counting(struct fsafe_sys *t)
{
	*t = fsafe__sys_default;
	t->fsync = counted_fsync;
	t->fdatasync = counted_fdatasync;
	return fsafe__sys_swap(t);
}

/* Two files and a pipe (which cannot be synced: EINVAL). */
struct fds {
	int a, b, p[2];
};

static void fds_open(struct fds *f)
{
	f->a = memfd_create("a", MFD_CLOEXEC);
	f->b = memfd_create("b", MFD_CLOEXEC);
	assert_true(f->a >= 0 && f->a < 64 && f->b >= 0 && f->b < 64);
	assert_int_equal(pipe2(f->p, O_CLOEXEC), 0);
	assert_true(f->p[0] < 64);
}

static void fds_close(struct fds *f)
{
	close(f->a), close(f->b), close(f->p[0]), close(f->p[1]);
}

/* One call on the pool: a data sync, a full one, the pipe's, a gap. */
static void run_once(struct fsafe__sync_pool *p, const struct fds *f)
{
	int fds[4] = { f->a, -1, f->b, f->p[0] };
	static const bool full[4] = { false, false, true, false };
	int errs[4] = { 7, 7, 7, 7 };

	reset();
	fsafe__sync_pool_run(p, fds, full, 4, errs);
	assert_true(together);
	assert_int_equal(errs[0], 0);
	assert_int_equal(errs[1], 0);
	assert_int_equal(errs[2], 0);
	assert_int_equal(errs[3], -EINVAL);
	assert_int_equal(data_calls[f->a], 1);
	assert_int_equal(full_calls[f->a], 0);
	assert_int_equal(full_calls[f->b], 1);
	assert_int_equal(data_calls[f->b], 0);
	assert_int_equal(data_calls[f->p[0]], 1);
}

/* Each pool test: a new pool, the fds, the counting table in force. */
struct pool_fx {
	struct fsafe__sync_pool *p;
	struct fds f;
	struct fsafe_sys t;
	const struct fsafe_sys *old;
};

static int pool_setup(void **state)
{
	struct pool_fx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	assert_non_null(x->p = fsafe__sync_pool_new(false));
	fds_open(&x->f);
	x->old = counting(&x->t);
	ntids = 0;
	*state = x;
	return 0;
}

static int pool_teardown(void **state)
{
	struct pool_fx *x = *state;

	fsafe__sys_swap(x->old);
	fsafe__sync_pool_free(x->p);
	fds_close(&x->f);
	free(x);
	return 0;
}

static void pool_syncs_each_fd_its_way_at_once(void **state)
{
	struct pool_fx *x = *state;

	run_once(x->p, &x->f);
}

/* Later calls run on the threads the first one started (a thread per
   call would bring new thread ids: Linux does not reuse them soon). */
static void pool_keeps_its_threads(void **state)
{
	struct pool_fx *x = *state;

	run_once(x->p, &x->f);
	size_t first = ntids;
	assert_int_equal(first, N);
	for (int i = 0; i < 5; i++)
		run_once(x->p, &x->f);
	assert_int_equal(ntids, first);
}

/* "SigBlk" of thread tid: the signals it blocks. */
static unsigned long long blocked_of(pid_t tid)
{
	char path[64], line[256];
	unsigned long long mask = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	FILE *fp = fopen(path, "re");
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "SigBlk: %llx", &mask) == 1)
			break;
	fclose(fp);
	return mask;
}

static void pool_threads_take_no_signals(void **state)
{
	struct pool_fx *x = *state;
	unsigned long long want = 1ull << (SIGINT - 1) | 1ull << (SIGTERM - 1) |
	                          1ull << (SIGUSR1 - 1) | 1ull << (SIGCHLD - 1);

	run_once(x->p, &x->f);
	size_t pool_threads = 0;
	for (size_t i = 0; i < ntids; i++) {
		if (tids[i] == gettid())
			continue;
		pool_threads++;
		assert_true((blocked_of(tids[i]) & want) == want);
	}
	assert_int_equal(pool_threads, N - 1);
	/* The caller's own mask is as it was. */
	assert_true((blocked_of(gettid()) & want) == 0);
}

/* A child of fork has no pool threads: its syncs still run, at once. */
static void pool_works_in_a_child_of_fork(void **state)
{
	struct pool_fx *x = *state;
	int status;

	run_once(x->p, &x->f); /* the parent's threads exist now */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fds[3] = { x->f.a, x->f.b, x->f.p[0] };
		int errs[3] = { 7, 7, 7 };
		reset();
		fsafe__sync_pool_run(x->p, fds, NULL, 3, errs);
		fsafe__sync_pool_free(x->p);
		_exit(together && errs[0] == 0 && errs[1] == 0 &&
		              errs[2] == -EINVAL ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	run_once(x->p, &x->f); /* and the parent's pool still works */
}

/* Every thread the process has while a sync is made: a thread started
   for a save's syncs lives at least until they are done. */
static void note_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	assert_non_null(d);
	pthread_mutex_lock(&mu);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			pid_t t = (pid_t)atoi(e->d_name);
			size_t i = 0;
			while (i < ntids && tids[i] != t)
				i++;
			if (i == ntids && ntids < 64)
				tids[ntids++] = t;
		}
	pthread_mutex_unlock(&mu);
	closedir(d);
}

static int noted_fsync(int fd)
{
	note_tasks();
	return fsafe__sys_default.fsync(fd);
}

static int noted_fdatasync(int fd)
{
	note_tasks();
	return fsafe__sys_default.fdatasync(fd);
}

static void save(fsafe_checkpoint *cp, int round)
{
	static char big[64 << 10];
	fsafe_checkpoint_tx *tx;

	memset(big, 'a' + round, sizeof(big));
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", big, 100), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "b", big, sizeof(big)), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "c", big, 5000), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
}

static int count_threads(void)
{
	return tu_count_entries("/proc/self/task");
}

/* Every save's syncs (its files', and its manifest's with the
   directories') run on the handle's threads from the first save on: no
   save after it has a thread the first did not; closing the handle ends
   them. (Which of the threads makes which sync is up to the scheduler.) */
static void checkpoint_saves_sync_on_kept_threads(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;
	struct fsafe_sys t = fsafe__sys_default;

	o.flags = FSAFE_CHECKPOINT_CREATE;
	o.keep = 100; /* no removals: their thread is not the point here */
	int before = count_threads();
	assert_int_equal(fsafe_checkpoint_open(f->dirfd, "ck", &o, &cp), 0);
	t.fsync = noted_fsync;
	t.fdatasync = noted_fdatasync;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	ntids = 0;
	save(cp, 0);
	size_t first = ntids;
	assert_true(first >= 3); /* the caller and at least two threads */
	for (int i = 1; i <= 4; i++)
		save(cp, i);
	fsafe__sys_swap(old);
	assert_int_equal(ntids, first);
	assert_true(count_threads() > before);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	assert_int_equal(count_threads(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			pool_syncs_each_fd_its_way_at_once, pool_setup,
			pool_teardown),
		cmocka_unit_test_setup_teardown(pool_keeps_its_threads,
		                                pool_setup, pool_teardown),
		cmocka_unit_test_setup_teardown(pool_threads_take_no_signals,
		                                pool_setup, pool_teardown),
		cmocka_unit_test_setup_teardown(pool_works_in_a_child_of_fork,
		                                pool_setup, pool_teardown),
		cmocka_unit_test_setup_teardown(
			checkpoint_saves_sync_on_kept_threads, tu_fx_setup,
			tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
