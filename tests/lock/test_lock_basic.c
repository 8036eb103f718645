/*
 * Lock behaviour one case at a time: holding, waiting, timing out, the
 * verdicts that break or keep a lock, malformed records, orphans, kernel
 * mode, release of a lock that is no longer ours.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "lockutil.h"
#include "testutil.h"

/* The scratch-directory fixture of testutil; the descriptor count it
   takes is not checked here. */
#define fx tu_fx
#define setup tu_fx_setup
#define teardown tu_fx_teardown

static int take(struct fx *f, unsigned flags, uint64_t timeout_ms,
                uint64_t grace_ms, fsafe_lock **l)
{
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;

	o.flags = flags;
	o.timeout_ms = timeout_ms;
	o.grace_ms = grace_ms;
	return fsafe_lock_acquire(f->dirfd, "app.lock", &o, l);
}

static void expect_held(struct fx *f, unsigned flags)
{
	fsafe_lock *l = NULL;

	assert_int_equal(take(f, flags | FSAFE_LOCK_NO_WAIT, 0, 0, &l),
	                 -EWOULDBLOCK);
	assert_null(l);
}

/* Acquire, and then release, with nothing left behind. */
static void take_and_release(struct fx *f, unsigned flags, unsigned broken)
{
	fsafe_lock *l;

	assert_int_equal(take(f, flags | FSAFE_LOCK_NO_WAIT, 0, 0, &l), 0);
	assert_int_equal(fsafe_lock_broken(l), broken);
	assert_int_equal(fsafe_lock_release(l), 0);
	assert_int_equal(tu_count_entries(f->dir), 0);
}

static void basic(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	fsafe_lock *l;

	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), -ENOENT);
	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	assert_int_equal(fsafe_lock_broken(l), 0);
	/* Only the lock itself: the staging name is gone. */
	assert_int_equal(tu_count_entries(f->dir), 1);
	assert_int_equal(lu_count_private(f->dir), 0);

	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), 0);
	assert_int_equal(o.pid, getpid());
	assert_int_equal(o.liveness, FSAFE_OWNER_ALIVE);
	assert_false(o.kernel);

	/* Held by a live owner (ourselves): never broken. */
	expect_held(f, 0);
	expect_held(f, FSAFE_LOCK_FORCE);

	assert_int_equal(fsafe_lock_release(l), 0);
	assert_int_equal(tu_count_entries(f->dir), 0);
	assert_int_equal(fsafe_lock_release(NULL), 0);
	take_and_release(f, 0, 0);
}

static void times_out(void **state)
{
	struct fx *f = *state;
	fsafe_lock *l, *l2 = NULL;

	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	uint64_t t0 = lu_now_ms();
	assert_int_equal(take(f, 0, 300, 0, &l2), -ETIMEDOUT);
	uint64_t spent = lu_now_ms() - t0;
	assert_null(l2);
	assert_true(spent >= 300 && spent < 1500);
	/* Nothing of the failed attempt stays. */
	assert_int_equal(tu_count_entries(f->dir), 1);
	assert_int_equal(fsafe_lock_release(l), 0);
}

/* A waiter gets the lock once the holder (another process) lets go. */
static void waits_for_release(void **state)
{
	struct fx *f = *state;
	int p[2];
	char c;
	fsafe_lock *l;

	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		fsafe_lock *h;
		if (take(f, 0, 0, 0, &h) != 0)
			_exit(1);
		(void)!write(p[1], "x", 1);
		usleep(1200 * 1000); /* hold it a while: the waiter must wait */
		_exit(fsafe_lock_release(h) == 0 ? 0 : 2);
	}
	assert_int_equal(read(p[0], &c, 1), 1);
	uint64_t t0 = lu_now_ms();
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	int64_t began = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
	assert_int_equal(take(f, 0, 5000, 0, &l), 0);
	assert_true(lu_now_ms() - t0 >= 1000);
	assert_int_equal(fsafe_lock_broken(l), 0);
	/* The record says when it was taken, not when the wait began. */
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), 0);
	assert_true(o.time_ms >= began + 1000);
	int st;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(fsafe_lock_release(l), 0);
}

static void forge(struct fx *f, const struct fsafe_lock_owner *o)
{
	lu_forge(f->dir, "app.lock", o);
}

static void dead_owner_broken(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	struct fsafe_lock_owner dead = lu_dead_owner();

	forge(f, &dead);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), 0);
	assert_int_equal(o.liveness, FSAFE_OWNER_DEAD);
	assert_int_equal(o.pid, dead.pid);
	take_and_release(f, 0, 1);
}

static void other_boot_broken(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = lu_self();

	o.boot_id[0] = o.boot_id[0] == 'a' ? 'b' : 'a';
	forge(f, &o);
	take_and_release(f, 0, 1);
}

/* PID reuse: a live pid with another start time is broken; with its own
   start time it is kept. */
static void pid_reuse(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner live;
	pid_t pid = lu_sleeper(&live);

	forge(f, &live);
	expect_held(f, 0);
	expect_held(f, FSAFE_LOCK_FORCE);
	live.start += 1;
	forge(f, &live);
	take_and_release(f, 0, 1);
	lu_stop(pid);
}

/* Another host: never broken without force, whatever the pid says. */
static void other_host(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	struct fsafe_lock_owner far = lu_dead_owner();

	strcpy(far.host, "build-3");
	forge(f, &far);
	expect_held(f, 0);
	fsafe_lock *l = NULL;
	assert_int_equal(take(f, 0, 200, 0, &l), -ETIMEDOUT);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), 0);
	assert_int_equal(o.liveness, FSAFE_OWNER_UNKNOWN);
	assert_string_equal(o.host, "build-3");
	take_and_release(f, FSAFE_LOCK_FORCE, 1);
}

static void newer_version(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	const char *v2 = "fsafe-lock 2\nfrom the future\n";

	tu_put(f->dir, "app.lock", v2, strlen(v2));
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o),
	                 -EPROTONOSUPPORT);
	assert_int_equal(o.version, 2);
	assert_int_equal(o.liveness, FSAFE_OWNER_UNKNOWN);
	expect_held(f, 0);
	take_and_release(f, FSAFE_LOCK_FORCE, 1);
}

/* The n-th call named `name` in a traced run of a try-once acquire. */
static int nth_call(struct fx *f, const char *name, int nth)
{
	struct fault_plan count = { .kind = FAULT_NONE };
	fsafe_lock *l = NULL;

	fault_install(&count);
	take(f, FSAFE_LOCK_NO_WAIT, 0, 0, &l);
	int n = fault_calls();
	fault_remove();
	fsafe_lock_release(l);
	for (int i = 1; i <= n; i++)
		if (strcmp(fault_call_name(i), name) == 0 && --nth == 0)
			return i;
	fail_msg("no such %s call", name);
	return 0;
}

/* A try-once acquire under `plan`, which must fire; its result. */
static int take_faulted(struct fx *f, const struct fault_plan *plan,
                        fsafe_lock **l)
{
	fault_install(plan);
	int r = take(f, FSAFE_LOCK_NO_WAIT, 0, 0, l);
	bool fired = fault_fired();
	fault_remove();
	assert_true(fired);
	return r;
}

/* A try-once acquire of a lock held by `dead`, with `plan` at the first
   call named `name` (found in a clean run, which breaks the lock: it is
   forged again for the faulted one). */
static int take_dead_faulted(struct fx *f, const struct fsafe_lock_owner *dead,
                             struct fault_plan *plan, const char *name,
                             fsafe_lock **l)
{
	forge(f, dead);
	plan->at = nth_call(f, name, 1);
	forge(f, dead);
	return take_faulted(f, plan, l);
}

/* EPERM from kill(), injected through the system-call table: kept. */
static void eperm_keeps(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner dead = lu_dead_owner();
	struct fault_plan plan = { .kind = FAULT_ERRNO, .err = EPERM };
	fsafe_lock *l = NULL;

	int r = take_dead_faulted(f, &dead, &plan, "kill", &l);
	assert_int_equal(r, -EWOULDBLOCK);
	assert_int_equal(tu_count_entries(f->dir), 1);
	take_and_release(f, 0, 1); /* without EPERM: dead, broken */
}

static int take_with_ebadf_at(struct fx *f, int at, fsafe_lock **l)
{
	struct fault_plan plan = { .at = at, .kind = FAULT_ERRNO, .err = EBADF };

	return take_faulted(f, &plan, l);
}

/*
 * Where an exclusive flock needs a writable fd (NFS), the guard falls back
 * to a shared one: a holder that keeps its flock is still never broken,
 * even when its record looks dead.
 */
static void guard_on_read_only_locks(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner dead = lu_dead_owner();
	char *p;
	fsafe_lock *l = NULL;

	forge(f, &dead);
	assert_true(asprintf(&p, "%s/app.lock", f->dir) > 0);
	int held = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(held >= 0 && flock(held, LOCK_EX) == 0);
	int at = nth_call(f, "flock", 2); /* after the stage's own flock */
	assert_int_equal(take_with_ebadf_at(f, at, &l), -EWOULDBLOCK);
	assert_int_equal(access(p, F_OK), 0);
	close(held);
	assert_int_equal(take_with_ebadf_at(f, at, &l), 0);
	assert_int_equal(fsafe_lock_broken(l), 1);
	assert_int_equal(fsafe_lock_release(l), 0);
	free(p);
}

static struct fx *hook_fx;
static int hook_child_broke = -1;

/* Runs just before the breaker renames the dead lock: another process
   tries to break and take it right then. */
static void rival(int call, const char *name)
{
	(void)call, (void)name;
	pid_t pid = fork();
	if (pid == 0) {
		fault_remove();
		fsafe_lock *l;
		int r = take(hook_fx, FSAFE_LOCK_NO_WAIT, 0, 0, &l);
		/* Exit while holding: a dead holder is what the breaker finds. */
		_exit(r == -EWOULDBLOCK ? 0 : r == 0 ? 10 + (int)fsafe_lock_broken(l)
		                                     : 2);
	}
	int st;
	waitpid(pid, &st, 0);
	hook_child_broke = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

/*
 * Deterministic breaker race: while one breaker is between its judgement
 * and its rename, a rival cannot break the same lock (the guard), so the
 * lock is broken exactly once.
 */
static void breaker_guard(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner dead = lu_dead_owner();
	struct fault_plan plan = { .kind = FAULT_HOOK, .hook = rival };
	fsafe_lock *l = NULL;

	hook_fx = f;
	int r = take_dead_faulted(f, &dead, &plan, "renameat", &l);
	assert_int_equal(hook_child_broke, 0); /* the rival was kept out */
	assert_int_equal(r, 0);
	assert_int_equal(fsafe_lock_broken(l), 1);
	assert_int_equal(fsafe_lock_release(l), 0);
	assert_int_equal(tu_count_entries(f->dir), 0);
}

static void remove_lock(struct fx *f)
{
	char *p;
	assert_true(asprintf(&p, "%s/app.lock", f->dir) > 0);
	unlink(p);
	free(p);
}

static void put_lock(struct fx *f, const void *buf, size_t len)
{
	remove_lock(f);
	tu_put(f->dir, "app.lock", buf, len);
}

/* Malformed records: a clear error from inspect; kept while young; broken
   once older than the grace period (on the filesystem's clock). */
static void malformed(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	char good[FSAFE__OWNER_MAX];
	struct fsafe_lock_owner self = lu_self();
	int n = fsafe__owner_format(&self, good, sizeof(good));
	size_t huge_len = 1 << 20;
	char *huge = malloc(huge_len);
	char garbage[512];

	memset(huge, 'A', huge_len);
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)(i * 7 + 3);
	struct { const char *what; const void *buf; size_t len; } cases[] = {
		{ "empty", "", 0 },
		{ "truncated", good, (size_t)n / 2 },
		{ "garbage", garbage, sizeof(garbage) },
		{ "huge", huge, huge_len },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* The record's age counts from its write: so does `spent`
		   (reading 1 MiB twice takes a while under load). */
		uint64_t t0 = lu_now_ms();
		put_lock(f, cases[i].buf, cases[i].len);
		assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o),
		                 -EBADMSG);
		fsafe_lock *l = NULL;
		/* Young: kept (default grace is 10 s). */
		assert_int_equal(take(f, FSAFE_LOCK_NO_WAIT, 0, 0, &l),
		                 -EWOULDBLOCK);
		/* With a 300 ms grace, a waiter breaks it once it is that old. */
		assert_int_equal(take(f, 0, 5000, 300, &l), 0);
		uint64_t spent = lu_now_ms() - t0;
		if (spent < 250 || spent > 3000)
			fail_msg("%s: broken after %llu ms", cases[i].what,
			         (unsigned long long)spent);
		assert_int_equal(fsafe_lock_broken(l), 1);
		assert_int_equal(fsafe_lock_release(l), 0);
		assert_int_equal(tu_count_entries(f->dir), 0);
	}
	/* Force breaks a young malformed record at once. */
	put_lock(f, "", 0);
	take_and_release(f, FSAFE_LOCK_FORCE, 1);
	free(huge);
}

/* Any timeout is accepted: FSAFE_FOREVER, and values too large to count
   to in nanoseconds (fsafe lock -t 1000000d), which mean no limit. */
static void any_timeout(void **state)
{
	struct fx *f = *state;
	const uint64_t huge[] = { FSAFE_FOREVER, 86400000000000ull,
	                          UINT64_MAX / 1000000 + 1 };
	fsafe_lock *l;

	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		assert_int_equal(take(f, 0, huge[i], huge[i], &l), 0);
		assert_int_equal(fsafe_lock_release(l), 0);
		assert_int_equal(take(f, FSAFE_LOCK_KERNEL, huge[i], 0, &l), 0);
		assert_int_equal(fsafe_lock_release(l), 0);
		remove_lock(f);
	}
}

static void not_a_file(void **state)
{
	struct fx *f = *state;
	fsafe_lock *l = NULL;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	char *p;

	assert_true(asprintf(&p, "%s/app.lock", f->dir) > 0);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(take(f, FSAFE_LOCK_NO_WAIT, 0, 0, &l), -EISDIR);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), -EISDIR);
	rmdir(p);
	assert_int_equal(symlink("elsewhere", p), 0);
	assert_int_equal(take(f, FSAFE_LOCK_NO_WAIT, 0, 0, &l), -ELOOP);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), -ELOOP);
	unlink(p);
	assert_int_equal(lu_count_private(f->dir), 0);
	free(p);
	assert_int_equal(fsafe_lock_acquire(f->dirfd, "", NULL, &l), -EINVAL);
	assert_int_equal(fsafe_lock_acquire(f->dirfd, "nodir/x.lock", NULL, &l),
	                 -ENOENT);
	struct fsafe_lock_opts bad = FSAFE_LOCK_OPTS_INIT;
	bad.flags = 1u << 20;
	assert_int_equal(fsafe_lock_acquire(f->dirfd, "x.lock", &bad, &l), -EINVAL);
}

/* Release of a lock someone force-broke reports it and removes nothing. */
static void release_after_force(void **state)
{
	struct fx *f = *state;
	fsafe_lock *l, *thief;

	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	/* Make our own record look like another host's, so force applies. */
	struct fsafe_lock_owner far = lu_self();
	strcpy(far.host, "elsewhere");
	char *p;
	assert_true(asprintf(&p, "%s/app.lock", f->dir) > 0);
	char *tmp;
	assert_true(asprintf(&tmp, "%s/forged", f->dir) > 0);
	lu_forge(f->dir, "forged", &far);
	assert_int_equal(rename(tmp, p), 0);
	assert_int_equal(take(f, FSAFE_LOCK_FORCE | FSAFE_LOCK_NO_WAIT, 0, 0,
	                      &thief), 0);
	assert_int_equal(fsafe_lock_release(l), -ESTALE);
	/* The thief's lock is untouched by that release. */
	assert_int_equal(tu_count_entries(f->dir), 1);
	assert_int_equal(fsafe_lock_release(thief), 0);

	/* Removed by hand: also reported. */
	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(fsafe_lock_release(l), -ESTALE);
	free(p);
	free(tmp);
}

/* A child after fork() does not release its parent's lock. */
static void release_in_child(void **state)
{
	struct fx *f = *state;
	fsafe_lock *l;

	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	pid_t pid = fork();
	if (pid == 0)
		_exit(fsafe_lock_release(l) == -EPERM ? 0 : 1);
	int st;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_held(f, 0);
	assert_int_equal(fsafe_lock_release(l), 0);
}

static void put_private(struct fx *f, const char *name,
                        const struct fsafe_lock_owner *o)
{
	if (o)
		lu_forge(f->dir, name, o);
	else
		tu_put(f->dir, name, "fsafe-lock 1\nmo", 15);
}

/* Orphans are judged by their owner's liveness, never by age. */
static void orphans(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner dead = lu_dead_owner(), far = lu_dead_owner();
	struct fsafe_lock_owner live;
	pid_t pid = lu_sleeper(&live);
	const char *u = "0b3c5e7a-1d2f-4a6b-8c9d-0e1f2a3b4c5";
	/* Also a full path below: TMPDIR may be long. */
	char name[PATH_MAX];

	strcpy(far.host, "elsewhere");
	snprintf(name, sizeof(name), ".lock-%s0.tmp", u);
	put_private(f, name, &dead);                  /* dead: goes */
	snprintf(name, sizeof(name), ".lock-%s1.tmp", u);
	put_private(f, name, NULL);                   /* torn, unlocked: goes */
	snprintf(name, sizeof(name), ".lock-%s2.broken", u);
	put_private(f, name, &dead);                  /* dead: goes */
	snprintf(name, sizeof(name), ".lock-%s3.tmp", u);
	put_private(f, name, &live);                  /* live: stays */
	snprintf(name, sizeof(name), ".lock-%s4.tmp", u);
	put_private(f, name, &far);                   /* other host: stays */
	snprintf(name, sizeof(name), ".lock-%s5.broken", u);
	put_private(f, name, &live);                  /* live: stays */
	snprintf(name, sizeof(name), ".lock-%s6.tmpx", u);
	put_private(f, name, &dead);                  /* not our form */
	snprintf(name, sizeof(name), ".lock-%s7.tmp", u);
	put_private(f, name, NULL);
	/* A stage being written right now: its creator holds a flock. */
	char *p;
	assert_true(asprintf(&p, "%s/%s", f->dir, name) > 0);
	int busy = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(busy >= 0 && flock(busy, LOCK_EX) == 0);
	free(p);

	/* The atomic-write sweep never touches them, even at age 0. */
	assert_int_equal(fsafe_sweep(f->dirfd, ".", 0, 0, NULL, NULL), 0);
	assert_int_equal(lu_count_private(f->dir), 8);

	fsafe_lock *l;
	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	assert_int_equal(lu_count_private(f->dir), 5);
	assert_int_equal(fsafe_lock_release(l), 0);
	snprintf(name, sizeof(name), "%s/.lock-%s3.tmp", f->dir, u);
	assert_int_equal(access(name, F_OK), 0);
	snprintf(name, sizeof(name), "%s/.lock-%s7.tmp", f->dir, u);
	assert_int_equal(access(name, F_OK), 0);

	/* Once its creator is gone, the busy one goes too. */
	close(busy);
	lu_stop(pid);
	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	assert_int_equal(fsafe_lock_release(l), 0);
	assert_int_equal(lu_count_private(f->dir), 2); /* far, and .tmpx */
}

static int take_kernel(void *f, fsafe_lock **l)
{
	return take(f, FSAFE_LOCK_KERNEL, 0, 0, l);
}

static void kernel_mode(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	fsafe_lock *l, *l2 = NULL;

	assert_int_equal(take(f, FSAFE_LOCK_KERNEL, 0, 0, &l), 0);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), 0);
	assert_true(o.kernel);
	assert_int_equal(o.pid, getpid());
	assert_int_equal(o.liveness, FSAFE_OWNER_ALIVE);
	/* OFD locks conflict between descriptions, even in one process. */
	assert_int_equal(take(f, FSAFE_LOCK_KERNEL | FSAFE_LOCK_NO_WAIT, 0, 0,
	                      &l2), -EWOULDBLOCK);
	/* The other mode refuses a kernel-mode lock file. */
	assert_int_equal(take(f, FSAFE_LOCK_NO_WAIT, 0, 0, &l2), -EINVAL);
	assert_int_equal(fsafe_lock_release(l), 0);
	/* The file stays (never unlinked), but it is not held. */
	assert_int_equal(tu_count_entries(f->dir), 1);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), -ENOENT);

	/* A holder killed: the kernel frees the lock at once. */
	pid_t pid = lu_holder(take_kernel, f);
	assert_true(pid > 0);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), 0);
	assert_int_equal(o.pid, pid);
	expect_held(f, FSAFE_LOCK_KERNEL);
	lu_stop(pid);
	assert_int_equal(take(f, FSAFE_LOCK_KERNEL | FSAFE_LOCK_NO_WAIT, 0, 0,
	                      &l), 0);
	assert_int_equal(fsafe_lock_release(l), 0);

	/* A kernel-mode acquire refuses a link-mode lock. */
	remove_lock(f);
	assert_int_equal(take(f, 0, 0, 0, &l), 0);
	assert_int_equal(take(f, FSAFE_LOCK_KERNEL | FSAFE_LOCK_NO_WAIT, 0, 0,
	                      &l2), -EINVAL);
	assert_int_equal(fsafe_lock_release(l), 0);
}

/* A listening-less unix socket bound at path; its fd. */
static int bind_socket(const char *path)
{
	int fd = tu_bind_socket(path);

	assert_true(fd >= 0);
	return fd;
}

/* take() with the error detail wanted. */
static int take_e(struct fx *f, unsigned flags, struct fsafe_error *e,
                  fsafe_lock **l)
{
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;

	memset(e, 0, sizeof(*e));
	o.flags = flags;
	o.error = e;
	return fsafe_lock_acquire(f->dirfd, "app.lock", &o, l);
}

static void expect_step(const struct fsafe_error *e, int code,
                        const char *step)
{
	tu_assert_error(e, code, -code, step);
}

/* What holds the name instead of a lock file is named, in both modes,
   and nothing blocks (a FIFO is never opened for a blocking read). */
static void not_a_file_is_named(void **state)
{
	struct fx *f = *state;
	static const unsigned modes[] = { 0, FSAFE_LOCK_KERNEL };
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	struct fsafe_error e;
	fsafe_lock *l = NULL;
	char *p;

	assert_true(asprintf(&p, "%s/app.lock", f->dir) > 0);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(mkfifo(p, 0600), 0);
		assert_int_equal(take_e(f, modes[i], &e, &l), -EBADFD);
		expect_step(&e, -EBADFD, "not a regular file (fifo)");
		assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o),
		                 -EBADFD);
		unlink(p);
		assert_int_equal(symlink("nowhere", p), 0);
		assert_int_equal(take_e(f, modes[i], &e, &l), -ELOOP);
		expect_step(&e, -ELOOP, "dangling symbolic link");
		assert_int_equal(access(p, F_OK), -1); /* nothing made there */
		unlink(p);
		assert_int_equal(symlink(".", p), 0);
		assert_int_equal(take_e(f, modes[i], &e, &l), -ELOOP);
		expect_step(&e, -ELOOP, "symbolic link");
		unlink(p);
		int sk = bind_socket(p);
		assert_int_equal(take_e(f, modes[i], &e, &l), -EBADFD);
		expect_step(&e, -EBADFD, "not a regular file (socket)");
		assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o),
		                 -EBADFD);
		close(sk);
		unlink(p);
		assert_int_equal(mkdir(p, 0755), 0);
		assert_int_equal(take_e(f, modes[i], &e, &l), -EISDIR);
		expect_step(&e, -EISDIR, "not a regular file (directory)");
		rmdir(p);
	}
	assert_null(l);
	assert_int_equal(lu_count_private(f->dir), 0);
	free(p);
}

/* The error detail of a refused, a held and a released lock. */
static void error_detail(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;
	struct fsafe_error e;
	fsafe_lock *l, *l2 = NULL;

	o.flags = 1u << 20;
	o.error = &e;
	memset(&e, 0, sizeof(e));
	assert_int_equal(fsafe_lock_acquire(f->dirfd, "app.lock", &o, &l),
	                 -EINVAL);
	expect_step(&e, -EINVAL, "options");

	assert_int_equal(take_e(f, 0, &e, &l), 0);
	assert_null(e.step); /* a success leaves it alone */
	assert_int_equal(take_e(f, FSAFE_LOCK_NO_WAIT, &e, &l2), -EWOULDBLOCK);
	expect_step(&e, -EWOULDBLOCK, "held by another owner");
	assert_int_equal(take_e(f, FSAFE_LOCK_KERNEL | FSAFE_LOCK_NO_WAIT, &e,
	                        &l2),
	                 -EINVAL);
	expect_step(&e, -EINVAL, "held in link mode");
	/* The handle keeps the pointer: release fills it. */
	memset(&e, 0, sizeof(e));
	remove_lock(f);
	assert_int_equal(fsafe_lock_release(l), -ESTALE);
	expect_step(&e, -ESTALE, "lock file removed or replaced while held");

	/* Released in a child: -EPERM, said in the child's copy. */
	assert_int_equal(take_e(f, 0, &e, &l), 0);
	pid_t pid = fork();
	if (pid == 0)
		_exit(fsafe_lock_release(l) == -EPERM && e.step &&
		              strcmp(e.step, "release in another process than "
		                             "the holder") == 0
		      ? 0
		      : 1);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(fsafe_lock_release(l), 0);

	assert_int_equal(take_e(f, FSAFE_LOCK_KERNEL, &e, &l), 0);
	assert_int_equal(take_e(f, FSAFE_LOCK_NO_WAIT, &e, &l2), -EINVAL);
	expect_step(&e, -EINVAL, "held in kernel mode");
	assert_int_equal(fsafe_lock_release(l), 0);
	assert_null(l2);
}

/* An I/O error at each step of a link-mode acquire names that step. */
static void io_steps_named(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *call, *step;
	} cases[] = { { "linkat", "link" },
		      { "fsync", "fsync" },
		      { "write", "write owner record" },
		      { "flock", "flock" } };
	struct fsafe_error e;
	fsafe_lock *l;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
		assert_int_equal(take_e(f, 0, &e, &l), 0);
		int at = fault_first_call_named(cases[i].call);
		fault_remove();
		assert_int_equal(fsafe_lock_release(l), 0);
		assert_true(at > 0);
		fault_install(&(struct fault_plan){
			.kind = FAULT_ERRNO, .at = at, .err = EIO });
		assert_int_equal(take_e(f, 0, &e, &l), -EIO);
		fault_remove();
		expect_step(&e, -EIO, cases[i].step);
		assert_int_equal(tu_count_entries(f->dir), 0);
	}
}

/* A kernel-mode user leaves its lock file behind; link mode then takes
   the name (it is no lock), and kernel mode works again afterwards. */
static void kernel_file_at_rest_does_not_wedge_link_mode(void **state)
{
	struct fx *f = *state;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	fsafe_lock *l;

	for (int round = 0; round < 2; round++) {
		assert_int_equal(take(f, FSAFE_LOCK_KERNEL, 0, 0, &l), 0);
		assert_int_equal(fsafe_lock_release(l), 0);
		assert_int_equal(tu_count_entries(f->dir), 1);
		assert_int_equal(take(f, FSAFE_LOCK_NO_WAIT, 0, 0, &l), 0);
		assert_int_equal(fsafe_lock_broken(l), 0);
		assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o),
		                 0);
		assert_false(o.kernel);
		assert_int_equal(fsafe_lock_release(l), 0);
		assert_int_equal(tu_count_entries(f->dir), 0);
	}
	/* A kernel-mode holder in another process still keeps link mode
	   out, and no waiting link-mode acquirer removes its file. */
	pid_t pid = lu_holder(take_kernel, f);
	assert_true(pid > 0);
	assert_int_equal(take(f, 0, 300, 0, &l), -EINVAL);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "app.lock", &o), 0);
	assert_int_equal(o.pid, pid);
	lu_stop(pid);
	assert_int_equal(take(f, FSAFE_LOCK_NO_WAIT, 0, 0, &l), 0);
	assert_int_equal(fsafe_lock_release(l), 0);
}

/* Kernel mode: the held lock file deleted (or replaced) by hand lets a
   second holder in; the first one's release says so, as link mode's. */
static void kernel_file_removed_while_held(void **state)
{
	struct fx *f = *state;
	fsafe_lock *l, *l2;

	assert_int_equal(take(f, FSAFE_LOCK_KERNEL, 0, 0, &l), 0);
	remove_lock(f);
	assert_int_equal(take(f, FSAFE_LOCK_KERNEL | FSAFE_LOCK_NO_WAIT, 0, 0,
	                      &l2),
	                 0);
	assert_int_equal(fsafe_lock_release(l), -ESTALE);
	assert_int_equal(fsafe_lock_release(l2), 0);

	/* Replaced by another file: the same. */
	assert_int_equal(take(f, FSAFE_LOCK_KERNEL, 0, 0, &l), 0);
	remove_lock(f);
	tu_put(f->dir, "app.lock", "", 0);
	assert_int_equal(fsafe_lock_release(l), -ESTALE);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(basic), T(times_out), T(any_timeout), T(waits_for_release),
		T(dead_owner_broken), T(other_boot_broken), T(pid_reuse),
		T(other_host), T(newer_version), T(eperm_keeps), T(breaker_guard),
		T(guard_on_read_only_locks),
		T(malformed),
		T(not_a_file), T(release_after_force), T(release_in_child),
		T(orphans), T(kernel_mode), T(not_a_file_is_named),
		T(error_detail),
		T(kernel_file_at_rest_does_not_wedge_link_mode),
		T(kernel_file_removed_while_held), T(io_steps_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
