/*
 * Crashes and errors at every system call of acquire and release, through
 * the library's system-call table: afterwards the lock is free or held by
 * a dead owner that the next acquire breaks at once, and leftovers are
 * cleaned by liveness. No state needs a person.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "lockutil.h"
#include "testutil.h"

/* Far beyond the calls one acquire + release makes. */
#define MAX_CALLS 400

/* The scratch-directory fixture of testutil; the descriptor count it
   takes is not checked here. */
#define fx tu_fx
#define setup tu_fx_setup
#define teardown tu_fx_teardown

enum scenario { FRESH, DEAD_LOCK, KERNEL };

static const char orphan[] = ".lock-0b3c5e7a-1d2f-4a6b-8c9d-0e1f2a3b4c5d.tmp";

/* What a crash may meet: nothing, or a dead holder and its orphan. */
static void prepare(struct fx *f, enum scenario s)
{
	if (s == DEAD_LOCK) {
		struct fsafe_lock_owner dead = lu_dead_owner();
		lu_forge(f->dir, "app.lock", &dead);
		lu_forge(f->dir, orphan, &dead);
	}
}

static unsigned flags_of(enum scenario s)
{
	return s == KERNEL ? FSAFE_LOCK_KERNEL : 0;
}

/* The child: acquire and release with a kill planned at call n. */
static void crash_at(struct fx *f, enum scenario s, int n)
{
	struct fault_plan plan = { .at = n, .kind = FAULT_KILL };
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;
	fsafe_lock *l;

	o.flags = flags_of(s) | FSAFE_LOCK_NO_WAIT;
	fault_install(&plan);
	int r = fsafe_lock_acquire(f->dirfd, "app.lock", &o, &l);
	if (r == 0)
		r = fsafe_lock_release(l);
	fault_remove();
	_exit(r == 0 ? 0 : 3);
}

/* After the crash: the next acquire gets it at once, and leaves only what
   belongs (the lock file in kernel mode). */
static void check_after(struct fx *f, enum scenario s, int n)
{
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;
	fsafe_lock *l;

	o.flags = flags_of(s) | FSAFE_LOCK_NO_WAIT;
	int r = fsafe_lock_acquire(f->dirfd, "app.lock", &o, &l);
	if (r != 0)
		fail_msg("killed at call %d: next acquire gives %d", n, r);
	assert_int_equal(fsafe_lock_release(l), 0);
	int left = tu_count_entries(f->dir);
	if (left != (s == KERNEL ? 1 : 0))
		fail_msg("killed at call %d: %d entries left", n, left);
}

static void clear(struct fx *f)
{
	char *p;

	assert_true(asprintf(&p, "%s/app.lock", f->dir) > 0);
	unlink(p);
	free(p);
}

static void kill_everywhere(struct fx *f, enum scenario s)
{
	int n;

	for (n = 1; n < MAX_CALLS; n++) {
		clear(f);
		prepare(f, s);
		pid_t pid = fork();
		if (pid == 0)
			crash_at(f, s, n);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		check_after(f, s, n);
		if (WIFEXITED(st)) {
			assert_int_equal(WEXITSTATUS(st), 0);
			break; /* ran to the end: every call has been a crash */
		}
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	}
	print_message("killed at each of %d calls\n", n - 1);
	assert_true(n > 10 && n < MAX_CALLS);
}

static void kill_fresh(void **state)
{
	kill_everywhere(*state, FRESH);
}

static void kill_breaking(void **state)
{
	kill_everywhere(*state, DEAD_LOCK);
}

static void kill_kernel(void **state)
{
	kill_everywhere(*state, KERNEL);
}

/*
 * An error at every call of acquire, in-process: a failed acquire leaves
 * the lock free for this same (live) process, so it never wedges it.
 */
static void errors_everywhere(struct fx *f, enum scenario s, int err)
{
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;
	int n, failed = 0;

	o.flags = flags_of(s) | FSAFE_LOCK_NO_WAIT;
	for (n = 1; n < MAX_CALLS; n++) {
		struct fault_plan plan = { .at = n, .kind = FAULT_ERRNO,
		                           .err = err };
		fsafe_lock *l = NULL;

		clear(f);
		prepare(f, s);
		fault_install(&plan);
		int r = fsafe_lock_acquire(f->dirfd, "app.lock", &o, &l);
		bool fired = fault_fired();
		const char *what = fault_call_name(n);
		fault_remove();
		if (r == 0) {
			assert_int_equal(fsafe_lock_release(l), 0);
		} else {
			failed++;
			assert_null(l);
		}
		check_after(f, s, n);
		(void)what;
		if (!fired)
			break;
	}
	print_message("%s at each of %d calls: %d acquisitions failed\n",
	              strerror(err), n - 1, failed);
	assert_true(failed > 5);
}

static void errors_fresh(void **state)
{
	errors_everywhere(*state, FRESH, EIO);
}

static void errors_breaking(void **state)
{
	errors_everywhere(*state, DEAD_LOCK, EIO);
}

static void errors_kernel(void **state)
{
	errors_everywhere(*state, KERNEL, EIO);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(kill_fresh), T(kill_breaking), T(kill_kernel),
		T(errors_fresh), T(errors_breaking), T(errors_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
