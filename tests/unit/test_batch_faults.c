/*
 * The batch and the async engine under the same proof as single writes:
 * killed at every system call, and every error at every call. Per file, the invariant is that of
 * fsafe_write_fileat(): OLD or NEW, never anything else; a result of 0 or
 * FSAFE_ENOTDURABLE means NEW; any other error means OLD (or still absent).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "batch.h"
#include "fault.h"
#include "fsafe.h"
#include "testutil.h"

enum { FILES = 3, OLD_LEN = 5000, NEW_LEN = 7000 };

/* One file replaced and one created in "a", one replaced in "b". */
static const char *const names[FILES] = { "a/one", "a/two", "b/three" };
static const bool has_old[FILES] = { true, false, true };
static char old_buf[FILES][OLD_LEN], new_buf[FILES][NEW_LEN];

struct fx {
	char *dir;
	int dirfd;
};

static void fill_patterns(void)
{
	for (int i = 0; i < FILES; i++) {
		for (int k = 0; k < OLD_LEN; k++)
			old_buf[i][k] = (char)('a' + (k + i) % 26);
		for (int k = 0; k < NEW_LEN; k++)
			new_buf[i][k] = (char)('A' + (k * 7 + i) % 26);
	}
}

static void reset(struct fx *f)
{
	tu_rmtree(f->dir);
	mkdir(f->dir, 0755);
	close(f->dirfd);
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	mkdirat(f->dirfd, "a", 0755);
	mkdirat(f->dirfd, "b", 0755);
	for (int i = 0; i < FILES; i++)
		if (has_old[i])
			tu_put(f->dir, names[i], old_buf[i], OLD_LEN);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	f->dir = tu_mkscratch();
	f->dirfd = -1;
	fill_patterns();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->dirfd);
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* Test-only mode bits: commit with one syncfs (syncfs_min = 2); submit
   the writes to the async engine instead of committing a batch; commit
   in overlapped windows of one file (a window's sync on a thread while
   the next is staged), as a batch of OVERLAP_MIN items would. */
#define SYNCFS_MODE (1u << 30)
#define ASYNC_MODE (1u << 29)
#define OVERLAP_MODE (1u << 28)

static const char *mode_name(unsigned mode)
{
	if (mode & ASYNC_MODE)
		return "async";
	if (mode & SYNCFS_MODE)
		return "syncfs";
	if (mode & OVERLAP_MODE)
		return "overlapped";
	return mode ? "thread pool" : "io_uring";
}

/*
 * The async engine's worker takes whatever is queued when it wakes, so how
 * the writes group (and the order of calls) varies from run to run; each
 * completion still carries its own write's result.
 */
static int commit_async(struct fx *f, int res[FILES])
{
	fsafe_async *a;
	uint64_t first = 0, id;
	int failed = 0;

	if (fsafe_async_new(NULL, &a) < 0)
		return -1;
	for (int i = 0; i < FILES; i++) {
		assert_int_equal(fsafe_async_submit(a, f->dirfd, names[i],
		                                    new_buf[i], NEW_LEN, NULL,
		                                    NULL, &id), 0);
		if (i == 0)
			first = id;
	}
	for (int done = 0; done < FILES;) {
		struct fsafe_async_completion c[FILES];
		assert_int_equal(fsafe_async_wait(a, FSAFE_FOREVER), 0);
		int n = fsafe_async_reap(a, c, FILES);
		for (int k = 0; k < n; k++, done++) {
			res[c[k].id - first] = c[k].result;
			failed += c[k].result < 0;
		}
	}
	fsafe_async_free(a);
	return failed;
}

/* Commit the three writes; res[i] is write i's result. Returns how many
   failed (as fsafe_batch_commit), or -1 if the engine did not start. */
static int commit(struct fx *f, unsigned mode, int res[FILES])
{
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	fsafe_batch *b;

	if (mode & ASYNC_MODE)
		return commit_async(f, res);
	bo.flags = mode & ~(SYNCFS_MODE | OVERLAP_MODE);
	bo.syncfs_min = mode & SYNCFS_MODE ? 2 : 0;
	/* Windows of 2 / 2 = 1 file: three, each synced while the next is
	   staged. */
	bo.max_inflight = mode & OVERLAP_MODE ? 2 : 0;
	if (fsafe_batch_new(&bo, &b) < 0)
		return -1;
	for (int i = 0; i < FILES; i++)
		fsafe_batch_add(b, f->dirfd, names[i], new_buf[i], NEW_LEN, NULL);
	fsafe__test_overlap_min = mode & OVERLAP_MODE ? 1 : -1;
	int r = fsafe_batch_commit(b);
	fsafe__test_overlap_min = -1;
	for (int i = 0; i < FILES; i++)
		res[i] = fsafe_batch_result(b, (size_t)i);
	fsafe_batch_free(b);
	return r;
}

enum state { ABSENT, OLD, NEW, OTHER };

static enum state state_of(struct fx *f, int i)
{
	size_t len;
	char *got = tu_get(f->dir, names[i], &len);
	enum state s = OTHER;
	if (!got)
		return ABSENT;
	if (len == OLD_LEN && !memcmp(got, old_buf[i], OLD_LEN))
		s = OLD;
	else if (len == NEW_LEN && !memcmp(got, new_buf[i], NEW_LEN))
		s = NEW;
	free(got);
	return s;
}

/* Leftovers must be staging files, and the sweep must take them all. */
static void sweep_leftovers(struct fx *f)
{
	for (int d = 0; d < 2; d++) {
		const char *sub = d ? "b" : "a";
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", f->dir, sub);
		int staging = tu_count_staging(path);
		int all = tu_count_entries(path);
		int targets = 0;
		for (int i = 0; i < FILES; i++)
			targets += !strncmp(names[i], sub, 1) &&
			           state_of(f, i) != ABSENT;
		assert_int_equal(all, staging + targets);
		assert_int_equal(fsafe_sweep(f->dirfd, sub, 0, 0, NULL, NULL),
		                 staging);
	}
}

/* Calls of a clean commit; for async, the most of a few runs. */
static int count_calls(struct fx *f, unsigned mode)
{
	int res[FILES], calls = 0;

	for (int run = 0; run < (mode & ASYNC_MODE ? 5 : 1); run++) {
		reset(f);
		fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
		assert_int_equal(commit(f, mode, res), 0);
		assert_int_equal(fault_calls_named("syncfs"),
		                 mode & SYNCFS_MODE ? 1 : 0);
		if (fault_calls() > calls)
			calls = fault_calls();
		fault_remove();
	}
	return calls;
}

static void killed_at_every_call(unsigned bflags)
{
	struct fx *f = calloc(1, sizeof(*f));
	f->dir = tu_mkscratch();
	f->dirfd = -1;
	fill_patterns();
	int calls = count_calls(f, bflags), n;
	bool whole = false;

	/* Past the calls counted, a run must end whole; an async run may
	   still make more calls than the most counted (the worker's waits
	   vary with the load), so it goes on until one does. */
	for (n = 1; n <= calls || !whole; n++) {
		reset(f);
		pid_t pid = fork();
		if (pid == 0) {
			int res[FILES];
			fault_install(&(struct fault_plan){ .kind = FAULT_KILL,
			                                    .at = n });
			_exit(commit(f, bflags, res) == 0 ? 0 : 1);
		}
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		/* An async run may make fewer calls than the most counted. */
		bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		whole = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (n <= calls && !killed && !(whole && (bflags & ASYNC_MODE)))
			fail_msg("kill at call %d: status %#x", n, status);
		if (n > calls && !whole &&
		    !(killed && (bflags & ASYNC_MODE) && n <= 2 * calls))
			fail_msg("kill at call %d, past the %d counted: status "
			         "%#x", n, calls, status);
		for (int i = 0; i < FILES; i++) {
			enum state s = state_of(f, i);
			if (s == OTHER || (s == ABSENT && has_old[i]))
				fail_msg("kill at call %d (%s): %s is %s", n,
				         fault_call_name(n), names[i],
				         s == OTHER ? "mixed" : "missing");
			if (whole)
				assert_int_equal(s, NEW);
		}
		sweep_leftovers(f);
	}
	print_message("batch (%s): %d kill points\n", mode_name(bflags), n - 1);
	close(f->dirfd);
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
}

static void kill_every_call_uring(void **state)
{
	(void)state;
	killed_at_every_call(0);
}

static void kill_every_call_pool(void **state)
{
	(void)state;
	killed_at_every_call(FSAFE_BATCH_NO_URING);
}

/* The OFD-lock helper folds POSIX's two "conflict" codes (EACCES and
   EAGAIN) into -EAGAIN; every other errno comes back as injected. */
static int expected(int call, int err)
{
	if (err == EACCES && !strcmp(fault_call_name(call), "fcntl"))
		return -EAGAIN;
	return -err;
}

static void kill_every_call_syncfs(void **state)
{
	(void)state;
	killed_at_every_call(SYNCFS_MODE);
}

static void kill_every_call_async(void **state)
{
	(void)state;
	killed_at_every_call(ASYNC_MODE);
}

static void kill_every_call_overlapped(void **state)
{
	(void)state;
	killed_at_every_call(OVERLAP_MODE);
}

static void every_error_at_every_call(void **state)
{
	struct fx *f = *state;
	static const int errs[] = { EIO, ENOSPC, EDQUOT, EINTR, EACCES, EROFS,
		                    EMFILE };
	static const unsigned modes[] = { 0, FSAFE_BATCH_NO_URING, SYNCFS_MODE,
		                          ASYNC_MODE, OVERLAP_MODE };
	int cases = 0;

	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		int calls = count_calls(f, modes[m]);
		for (int n = 1; n <= calls; n++) {
			for (int e = 0; e < 8; e++) {
				bool shorten = e == 7;
				reset(f);
				int fds = fault_open_fds();
				fault_install(&(struct fault_plan){
					.kind = shorten ? FAULT_SHORT : FAULT_ERRNO,
					.at = n,
					.err = shorten ? 0 : errs[e] });
				int res[FILES];
				int failed = commit(f, modes[m], res);
				/* Async calls come in a varying order: which
				   call failed is known only by its name. */
				bool exact = !(modes[m] & ASYNC_MODE);
				fault_remove();
				for (int i = 0; i < FILES; i++) {
					int r = res[i];
					enum state s = state_of(f, i);
					if (r == 0 || r == FSAFE_ENOTDURABLE)
						assert_int_equal(s, NEW);
					else
						assert_int_equal(
							s, has_old[i] ? OLD : ABSENT);
					if (r < 0 && r != FSAFE_ENOTDURABLE &&
					    !shorten && errs[e] != EINTR && exact)
						assert_int_equal(r, expected(n, errs[e]));
				}
				if ((shorten || errs[e] == EINTR) && failed)
					fail_msg("%s at call %d (%s) failed the batch",
					         shorten ? "short write" : "EINTR", n,
					         fault_call_name(n));
				assert_int_equal(fault_open_fds(), fds);
				assert_int_equal(fsafe_sweep(f->dirfd, "a", 0, 0,
				                             NULL, NULL),
				                 0);
				assert_int_equal(fsafe_sweep(f->dirfd, "b", 0, 0,
				                             NULL, NULL),
				                 0);
				cases++;
			}
		}
	}
	print_message("batch: %d error cases\n", cases);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kill_every_call_uring),
		cmocka_unit_test(kill_every_call_pool),
		cmocka_unit_test(kill_every_call_syncfs),
		cmocka_unit_test(kill_every_call_async),
		cmocka_unit_test(kill_every_call_overlapped),
		cmocka_unit_test_setup_teardown(every_error_at_every_call, setup,
		                                teardown),
	};
	/* Nothing else dirty: the syncfs mode's choice, and so its calls,
	   must not change with what the machine is writing meanwhile. */
	fault_fake_meminfo("Dirty: 0 kB\nWriteback: 0 kB\n");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
