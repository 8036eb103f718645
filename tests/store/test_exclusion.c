/*
 * The store's lock (src/store_lock.c) between threads and processes.
 *
 * Two racers hammer put_if on one key, each reading the version and
 * asking for the next: exactly one must win each version, and neither
 * may starve the other (each wins a tenth at least), with racers
 * that are two processes with handles of their own, two processes using
 * one handle opened before fork(), and two threads with a handle each.
 * Then a holder SIGKILLed inside an update: the lock is held while it
 * lives (a short wait times out) and free the instant it is dead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "storeutil.h"
#include "testutil.h"

#define VERSIONS 150

/* What one racer did: which versions it won, and how often it lost. */
struct tally {
	unsigned char won[VERSIONS + 1];
	unsigned conflicts;
	int err; /* 0, or the first unexpected result */
};

struct racer {
	fsafe_store *s;
	const char *dir; /* open a handle of its own when s is NULL */
	unsigned char me;
	struct tally t;
};

/* Read the version, ask for the next, until VERSIONS is stored. */
static void *race(void *arg)
{
	struct racer *r = arg;
	fsafe_store *s = r->s;

	if (!s) {
		struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
		o.lock_timeout_ms = 20000;
		if ((r->t.err = fsafe_store_open(AT_FDCWD, r->dir, &o, &s)) < 0)
			return NULL;
	}
	for (;;) {
		unsigned char b;
		size_t len;
		uint64_t v, nv = 0;
		int g = fsafe_store_get_into(s, "x", 1, &b, 1, &len, &v);
		if (g == -ENOENT)
			v = 0;
		else if (g < 0 || v > VERSIONS) {
			r->t.err = g < 0 ? g : -ERANGE;
			break;
		}
		if (v == VERSIONS)
			break;
		int p = fsafe_store_put_if(s, "x", 1, &r->me, 1, v, &nv);
		if (p == 0 && nv == v + 1 && !r->t.won[nv]) {
			r->t.won[nv] = 1;
		} else if (p == FSAFE_ECONFLICT) {
			r->t.conflicts++;
		} else {
			r->t.err = p < 0 ? p : -EPROTO;
			break;
		}
	}
	if (!r->s)
		fsafe_store_close(s);
	return NULL;
}

/* Each version won exactly once, and the record holds the last winner. */
static void judge(const char *how, const char *dir, struct racer *r)
{
	for (int i = 0; i < 2; i++)
		if (r[i].t.err)
			fail_msg("%s: racer %d: %s", how, i,
			         fsafe_strerror(r[i].t.err));
	unsigned wins[2] = { 0, 0 };
	for (int v = 1; v <= VERSIONS; v++) {
		int n = r[0].t.won[v] + r[1].t.won[v];
		if (n != 1)
			fail_msg("%s: version %d won %d times", how, v, n);
		wins[r[1].t.won[v]]++;
	}
	fsafe_store *s = su_open(dir, 0, 0);
	unsigned char last = r[1].t.won[VERSIONS];
	assert_int_equal(su_content(s, "x", &last, 1, NULL, 0), SU_OLD);
	fsafe_store_close(s);
	print_message("[ %-32s ] %u + %u wins, %u + %u conflicts\n", how,
	              wins[0], wins[1], r[0].t.conflicts, r[1].t.conflicts);
	/* Neither starves: a holder that lets go cannot take the lock
	   straight back while the other waits (the turnstile). */
	if (wins[0] < VERSIONS / 10 || wins[1] < VERSIONS / 10)
		fail_msg("%s: one racer starved the other", how);
}

static void race_in_processes(bool shared)
{
	char *scratch = tu_mkscratch(), dir[4200];
	struct racer r[2] = { { .me = 0 }, { .me = 1 } };
	pid_t pid[2];
	int p[2][2];

	snprintf(dir, sizeof(dir), "%s/store", scratch);
	fsafe_store *s = su_open(dir, 0, 0);
	/* The handle has locked once, so a child inherits its lock file. */
	su_put(s, "other", "o", 1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pipe(p[i]), 0);
		r[i].s = shared ? s : NULL;
		r[i].dir = dir;
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0) {
			race(&r[i]);
			_exit(write(p[i][1], &r[i].t, sizeof(r[i].t)) ==
			              (ssize_t)sizeof(r[i].t)
			              ? 0
			              : 1);
		}
		close(p[i][1]);
	}
	for (int i = 0; i < 2; i++) {
		int st;
		assert_int_equal(read(p[i][0], &r[i].t, sizeof(r[i].t)),
		                 (ssize_t)sizeof(r[i].t));
		close(p[i][0]);
		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	fsafe_store_close(s);
	judge(shared ? "processes, one handle from fork"
	             : "processes, a handle each",
	      dir, r);
	tu_rmtree(scratch);
	free(scratch);
}

static void put_if_race_between_processes(void **state)
{
	(void)state;
	race_in_processes(false);
}

static void put_if_race_on_a_handle_shared_by_fork(void **state)
{
	(void)state;
	race_in_processes(true);
}

static void put_if_race_between_threads(void **state)
{
	char *scratch = tu_mkscratch(), dir[4200];
	struct racer r[2] = { { .me = 0 }, { .me = 1 } };
	pthread_t t[2];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/store", scratch);
	fsafe_store_close(su_open(dir, 0, 0));
	for (int i = 0; i < 2; i++) {
		r[i].dir = dir;
		assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	judge("threads, a handle each", dir, r);
	tu_rmtree(scratch);
	free(scratch);
}

/* Inside the lock: tell the parent, then wait to be killed. */
static int hold(const void *old, size_t len, const void **nb, size_t *nl,
                void *arg)
{
	(void)old, (void)len, (void)nb, (void)nl;
	if (write(*(int *)arg, "h", 1) != 1)
		return -EIO;
	for (;;)
		pause();
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int put_waiting(const char *dir, uint64_t timeout_ms, double *ms)
{
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s;

	o.lock_timeout_ms = timeout_ms;
	assert_int_equal(fsafe_store_open(AT_FDCWD, dir, &o, &s), 0);
	double t0 = now_ms();
	int r = fsafe_store_put(s, "k", 1, "after", 5, NULL);
	*ms = now_ms() - t0;
	fsafe_store_close(s);
	return r;
}

/* scratch/store with k = "before"; its path in dir. */
static void store_with_before(const char *scratch, char *dir, size_t size)
{
	snprintf(dir, size, "%s/store", scratch);
	fsafe_store *s = su_open(dir, 0, 0);
	su_put(s, "k", "before", 6);
	fsafe_store_close(s);
}

/* k holds what put_waiting() wrote. */
static void assert_after(const char *dir)
{
	fsafe_store *s = su_open(dir, 0, 0);
	assert_int_equal(su_content(s, "k", "after", 5, NULL, 0), SU_OLD);
	fsafe_store_close(s);
}

static void a_killed_holder_frees_the_lock_at_once(void **state)
{
	char *scratch = tu_mkscratch(), dir[4200], c;
	int p[2], st;
	double ms;

	(void)state;
	store_with_before(scratch, dir, sizeof(dir));
	fsafe_store *s;
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(60); /* never outlives a failed test for long */
		s = su_open(dir, 0, 0);
		_exit(fsafe_store_update(s, "k", 1, hold, &p[1], NULL));
	}
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	assert_int_equal(poll(&pf, 1, 20000), 1);
	assert_int_equal(read(p[0], &c, 1), 1);
	/* Held while the holder lives. */
	assert_int_equal(put_waiting(dir, 50, &ms), -ETIMEDOUT);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* Free the instant it died: the wait is the put's own time, far
	   below the 10 s allowed. */
	assert_int_equal(put_waiting(dir, 10000, &ms), 0);
	print_message("[ killed holder ] the next put took %.1f ms\n", ms);
	assert_true(ms < 2000);
	assert_after(dir);
	close(p[0]);
	close(p[1]);
	tu_rmtree(scratch);
	free(scratch);
}

/* A process still running a library whose store locked through
   fsafe_lock in kernel mode (an OFD lock on .lock/lock) keeps puts out
   while it holds that lock, and lets them in once it lets go. */
static void an_older_kernel_mode_holder_keeps_puts_out(void **state)
{
	char *scratch = tu_mkscratch(), dir[4200], lock[4300];
	struct fsafe_lock_opts lo = FSAFE_LOCK_OPTS_INIT;
	fsafe_lock *l;
	double ms;

	(void)state;
	store_with_before(scratch, dir, sizeof(dir));
	snprintf(lock, sizeof(lock), "%s/.lock/lock", dir);
	lo.flags = FSAFE_LOCK_KERNEL | FSAFE_LOCK_NO_WAIT;
	assert_int_equal(fsafe_lock_acquire(AT_FDCWD, lock, &lo, &l), 0);
	assert_int_equal(put_waiting(dir, 50, &ms), -ETIMEDOUT);
	assert_int_equal(fsafe_lock_release(l), 0);
	assert_int_equal(put_waiting(dir, 10000, &ms), 0);
	assert_after(dir);
	tu_rmtree(scratch);
	free(scratch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(put_if_race_between_processes),
		cmocka_unit_test(put_if_race_on_a_handle_shared_by_fork),
		cmocka_unit_test(put_if_race_between_threads),
		cmocka_unit_test(a_killed_holder_frees_the_lock_at_once),
		cmocka_unit_test(an_older_kernel_mode_holder_keeps_puts_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
