/*
 * Sweep around crashes: a staging file that a live writer holds is never
 * removed, however old its mtime says it is; the moment that writer dies
 * (SIGKILL, so no cleanup of its own runs) the same file is fair game.
 *
 * The writer lives in a child process that parks on a pipe while it holds
 * its stage, so the parent sweeps while the holder is provably alive.
 * Further down, a sweep lands in the one moment a live writer does not
 * hold its stage yet: between creating a named stage and locking it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

#include "crashutil.h"
#include "fault.h"
#include "testutil.h"

/* 2000-01-01: older than any older_than a caller could mean. */
static const struct timespec long_ago[2] = { { 946684800, 0 },
                                             { 946684800, 0 } };

static int ready_w = -1, hold_r = -1;

/* Tell the parent the stage is held, then wait to be killed. */
static void park(void)
{
	char c = 'r';

	if (write(ready_w, &c, 1) != 1)
		_exit(3);
	/* The parent never writes: read() returns only if it dies, and
	   then there is nobody to test for. */
	while (read(hold_r, &c, 1) < 0 && errno == EINTR)
		;
	_exit(4);
}

static void park_hook(int call, const char *name)
{
	(void)call;
	if (strcmp(name, "fdatasync") != 0)
		_exit(5); /* the call sequence changed under the test */
	park();
}

/* A managed writer: it stages with O_TMPFILE (one-shot writes never do). */
#define TMPFILE_VARIANT "managed writer, 4 chunks"

enum holder {
	OPEN_NAMED,      /* fsafe_writer_open with a named stage, mid-write */
	COMMIT_TMPFILE,  /* O_TMPFILE stage, linked, parked at the data sync
	                    (TMPFILE_VARIANT's write) */
};

/* Fork a writer that holds its stage; *hold is the pipe end that keeps
   it parked, for the caller to close once the child is reaped. */
static pid_t start_holder(enum holder how, int dirfd, int sync_call,
                          int *hold_w)
{
	int ready[2], hold[2];
	char c;

	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0)
		fail_msg("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		fsafe_writer *w;

		close(ready[0]);
		close(hold[1]);
		ready_w = ready[1];
		hold_r = hold[0];
		if (how == OPEN_NAMED) {
			o.flags = FSAFE_NO_TMPFILE;
			if (fsafe_writer_open(dirfd, "target", &o, &w) < 0 ||
			    fsafe_writer_write(w, cu_new, CU_NEW_LEN / 2) < 0)
				_exit(2);
			park();
		}
		fault_install(&(struct fault_plan){ .at = sync_call,
		                                    .kind = FAULT_HOOK,
		                                    .hook = park_hook });
		cu_write(cu_variant(TMPFILE_VARIANT), dirfd, NULL);
		_exit(6); /* the hook did not park */
	}
	close(ready[1]);
	close(hold[0]);
	if (read(ready[0], &c, 1) != 1)
		fail_msg("the holder died before holding its stage");
	close(ready[0]);
	*hold_w = hold[1];
	return pid;
}

/* The one staging name in the directory (fails if not exactly one). */
static void only_staging(const char *dir, char *out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (fsafe_is_staging_name(e->d_name) && n++ == 0)
			strcpy(out, e->d_name);
	closedir(d);
	if (n != 1)
		fail_msg("%d staging files, expected the holder's one", n);
}

/* A stage nobody holds, made to look abandoned long ago. */
static void plant_abandoned(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	                0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	assert_int_equal(futimens(fd, long_ago), 0);
	close(fd);
}

static int sweep(int dirfd, unsigned flags, char *first)
{
	fsafe_sweep_result *res;
	int r = fsafe_sweep(dirfd, ".", 0, flags, NULL, &res);

	first[0] = '\0';
	if (fsafe_sweep_result_count(res))
		strcpy(first, fsafe_sweep_result_name(res, 0));
	fsafe_sweep_result_free(res);
	return r;
}

static void held_until_killed(enum holder how)
{
	static const char stray[] = ".fsafe-00000000000000000000abcd.tmp";
	char *dir = tu_mkscratch();
	char held[FSAFE_STAGING_NAME_LEN + 1], got[FSAFE_STAGING_NAME_LEN + 1];
	struct cu_trace t;
	struct stat st;
	int status, hold, sync_call = 0;

	cu_count(cu_variant(TMPFILE_VARIANT), dir, &t);
	for (int k = 1; k <= t.calls && !sync_call; k++)
		if (!strcmp(t.name[k], "fdatasync"))
			sync_call = k;
	assert_true(sync_call > 0);

	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);
	tu_put(dir, "target", cu_old, CU_OLD_LEN);
	pid_t pid = start_holder(how, dirfd, sync_call, &hold);

	only_staging(dir, held);
	assert_int_equal(utimensat(dirfd, held, long_ago,
	                           AT_SYMLINK_NOFOLLOW), 0);
	plant_abandoned(dirfd, stray);

	/* Both look abandoned by name and age; only the lock tells them
	   apart. The unheld one going proves the sweep did look. */
	assert_int_equal(sweep(dirfd, FSAFE_SWEEP_DRY_RUN, got), 1);
	assert_string_equal(got, stray);
	assert_int_equal(sweep(dirfd, 0, got), 1);
	assert_string_equal(got, stray);
	assert_int_equal(fstatat(dirfd, held, &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mtim.tv_sec, long_ago[1].tv_sec);
	assert_int_equal(sweep(dirfd, 0, got), 0);
	assert_int_equal(fstatat(dirfd, held, &st, AT_SYMLINK_NOFOLLOW), 0);

	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		fail_msg("holder ended with status %#x, not by our SIGKILL",
		         status);
	close(hold);

	/* The dead writer's lock went with its descriptors. */
	assert_int_equal(sweep(dirfd, 0, got), 1);
	assert_string_equal(got, held);
	assert_true(tu_equals(dir, "target", cu_old, CU_OLD_LEN));
	assert_int_equal(tu_count_entries(dir), 1);

	close(dirfd);
	tu_rmtree(dir);
	free(dir);
}

static void open_writer_holds_its_stage(void **state)
{
	(void)state;
	held_until_killed(OPEN_NAMED);
}

static void committing_writer_holds_its_stage(void **state)
{
	(void)state;
	held_until_killed(COMMIT_TMPFILE);
}

/*
 * A named stage exists from its openat() on, but its writer locks it only
 * with the next call. These two tests put a sweep exactly in that gap:
 * the writer's fault hook runs before its lock call, with the stage
 * created and unlocked.
 */
static int gap_dirfd = -1;
static int gap_removed = -1;
static pid_t gap_sweeper = -1;
static int gap_ready = -1, gap_go = -1;
static int sweeper_fstat_call;

/* The call of a sweep that comes right after it took its read lock. */
static int sweep_call_after_lock(void)
{
	char *dir = tu_mkscratch();
	fsafe_sweep_result *res;
	int at = 0;

	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);
	plant_abandoned(dirfd, ".fsafe-00000000000000000000abcd.tmp");
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_sweep(dirfd, ".", 0, 0, NULL, &res), 1);
	int calls = fault_calls();
	for (int k = 2; k <= calls && !at; k++)
		if (!strcmp(fault_call_name(k - 1), "fcntl"))
			at = k;
	fault_remove();
	fsafe_sweep_result_free(res);
	close(dirfd);
	tu_rmtree(dir);
	free(dir);
	return at;
}

static void sweep_now(int call, const char *name)
{
	fsafe_sweep_result *res;

	(void)call;
	if (strcmp(name, "fcntl") != 0)
		return;
	gap_removed = fsafe_sweep(gap_dirfd, ".", 0, 0, NULL, &res);
	fsafe_sweep_result_free(res);
}

static void sweeper_parks(int call, const char *name)
{
	struct pollfd p = { .fd = gap_go, .events = POLLIN };
	char c = 'l';

	(void)call, (void)name;
	/* Call N of an abandoned stage's sweep follows its lock; here it
	   may be any call: park only where a lock was taken. */
	if (fault_calls_named("fcntl") == 0)
		return;
	if (write(gap_ready, &c, 1) != 1)
		_exit(3);
	/*
	 * Normally the parent lets go as soon as its write returned. The
	 * bound only matters for a writer that waits for this lock instead
	 * of failing (a correct fix): without it, writer and sweeper would
	 * wait for each other. The verdict does not depend on it.
	 */
	while (poll(&p, 1, 5000) < 0 && errno == EINTR)
		;
}

/* A sweep (older_than one hour, so it removes nothing) in another
   process, stopped while it holds its read lock on the fresh stage. */
static bool gap_locked; /* the sweeper parked holding its lock */

static void start_sweep_and_hold(int call, const char *name)
{
	int ready[2], go[2];
	char c;

	(void)call;
	if (strcmp(name, "fcntl") != 0)
		return;
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
		fail_msg("pipe: %s", strerror(errno));
	gap_sweeper = fork();
	if (gap_sweeper < 0)
		fail_msg("fork: %s", strerror(errno));
	if (gap_sweeper == 0) {
		fsafe_sweep_result *res;

		close(ready[0]);
		close(go[1]); /* else its own copy would keep it parked */
		gap_ready = ready[1];
		gap_go = go[0];
		fault_install(&(struct fault_plan){
			.at = sweeper_fstat_call, .kind = FAULT_HOOK,
			.hook = sweeper_parks });
		int r = fsafe_sweep(gap_dirfd, ".", 3600 * 1000, 0, NULL,
		                    &res);
		_exit(r == 0 ? 0 : 1);
	}
	close(ready[1]);
	close(go[0]);
	/* EOF: the sweep ended without locking the stage, which leaves
	   the writer nothing to trip over. */
	gap_locked = read(ready[0], &c, 1) == 1;
	close(ready[0]);
	gap_go = go[1]; /* closing it lets the sweeper finish */
}

static int write_with_gap_hook(const char *dir, void (*hook)(int, const char *),
                               struct fsafe_error *err)
{
	const struct cu_variant *v = cu_variant("replace"); /* a named stage */
	int lock_call = 0;
	struct cu_trace t;

	cu_count(v, dir, &t);
	for (int k = 2; k <= t.calls && !lock_call; k++)
		if (!strcmp(t.name[k], "fcntl") && !strcmp(t.name[k - 1], "openat"))
			lock_call = k;
	assert_true(lock_call > 0);
	gap_dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(gap_dirfd >= 0);
	tu_put(dir, "target", cu_old, CU_OLD_LEN);

	fault_install(&(struct fault_plan){ .at = lock_call,
	                                    .kind = FAULT_HOOK,
	                                    .hook = hook });
	int r = cu_write(v, gap_dirfd, err);
	fault_remove();
	return r;
}

/*
 * A sweep with older_than 0 that runs between a named stage's creation and
 * its lock finds an unlocked staging file as old as "now" and may remove
 * it. The writer must not be hurt: once locked, it checks that its stage
 * still has a link and otherwise starts again under a fresh name.
 * So the write succeeds with NEW and leaves nothing behind.
 */
static void sweep_in_the_gap_does_not_hurt_the_write(void **state)
{
	(void)state;
	char *dir = tu_mkscratch();
	struct fsafe_error err = { 0 };

	gap_removed = -1;
	int r = write_with_gap_hook(dir, sweep_now, &err);
	bool written = tu_equals(dir, "target", cu_new, CU_NEW_LEN);
	int staging = tu_count_staging(dir);

	close(gap_dirfd);
	tu_rmtree(dir);
	free(dir);
	if (gap_removed < 0 || r != 0 || !written || staging != 0)
		fail_msg("a sweep between a named stage's openat and its lock "
		         "removed %d file(s); the write then returned %d (%s, "
		         "step %s), target %s, %d staging left",
		         gap_removed, r, fsafe_strerror(r),
		         err.step ? err.step : "none",
		         written ? "NEW" : "not NEW", staging);
}

/*
 * A writer whose lock call lands while a sweep holds a read lock on its
 * fresh stage must not fail because of it. The sweep locks only stages
 * old enough to go (age first, lock second), so on a fresh stage it never
 * holds one: then the race cannot happen and the test says SKIP. A sweep
 * that locks nothing at all, though, could not tell a live writer's stage
 * from an abandoned one: that fails here.
 */
static void sweep_in_the_gap_does_not_fail_the_writer(void **state)
{
	(void)state;
	char *dir = tu_mkscratch();
	struct fsafe_error err = { 0 };
	int status;

	sweeper_fstat_call = sweep_call_after_lock();
	if (!sweeper_fstat_call) {
		tu_rmtree(dir);
		free(dir);
		fail_msg("the sweep removed an abandoned stage without "
		         "locking it first");
	}
	gap_sweeper = -1;
	gap_locked = false;
	int r = write_with_gap_hook(dir, start_sweep_and_hold, &err);
	assert_true(gap_sweeper > 0);
	close(gap_go);
	assert_int_equal(waitpid(gap_sweeper, &status, 0), gap_sweeper);
	bool written = tu_equals(dir, "target", cu_new, CU_NEW_LEN);
	int staging = tu_count_staging(dir);

	close(gap_dirfd);
	tu_rmtree(dir);
	free(dir);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the sweeper failed, status %#x", status);
	if (r != 0 || !written || staging != 0)
		fail_msg("a sweep %s while a writer locked "
		         "its new named stage made the write return %d (%s, "
		         "step %s); target %s, %d staging left",
		         gap_locked ? "holding its read lock" : "running",
		         r, fsafe_strerror(r), err.step ? err.step : "none",
		         written ? "NEW" : "not NEW", staging);
	if (!gap_locked) {
		print_message("SKIP: the sweep never locks a fresh stage (age "
		              "first), so it cannot hold one as the writer "
		              "locks it; nothing to race\n");
		skip();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(open_writer_holds_its_stage),
		cmocka_unit_test(committing_writer_holds_its_stage),
		cmocka_unit_test(sweep_in_the_gap_does_not_hurt_the_write),
		cmocka_unit_test(sweep_in_the_gap_does_not_fail_the_writer),
	};

	cu_init();
	return cmocka_run_group_tests_name("crash_sweep", tests, NULL, NULL);
}
