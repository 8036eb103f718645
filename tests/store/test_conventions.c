/*
 * The keyed store under the API's conventions (issue 17): error detail
 * through the options' error member, kept by the handle; update verdicts
 * where 0 means nothing; FSAFE_ECONFLICT; the lock's wait bounded by
 * lock_timeout_ms (0: 30 s, FSAFE_FOREVER: no limit) and a re-entry from
 * an update callback refused with -EDEADLK; a directory at a key's name
 * quarantined by a put or a delete.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "storeutil.h"
#include "testutil.h"
#include "util.h"

struct ctx {
	char *scratch;
	char dir[4200];
	struct fsafe_error e;
	fsafe_store *s;
};

static fsafe_store *open_with(struct ctx *c, uint64_t lock_timeout_ms)
{
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s = NULL;

	o.flags = FSAFE_STORE_CREATE | FSAFE_STORE_NO_SWEEP;
	o.lock_timeout_ms = lock_timeout_ms;
	o.error = &c->e;
	assert_int_equal(fsafe_store_open(AT_FDCWD, c->dir, &o, &s), 0);
	return s;
}

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->scratch = tu_mkscratch();
	snprintf(c->dir, sizeof(c->dir), "%s/store", c->scratch);
	c->s = open_with(c, 20000);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	fault_remove();
	fsafe_store_close(c->s);
	tu_rmtree(c->scratch);
	free(c->scratch);
	free(c);
	return 0;
}

/* The detail the last failure left, and a fresh slate for the next. */
static void expect_detail(struct ctx *c, int code, int sys_errno,
                          const char *step)
{
	assert_int_equal(c->e.code, code);
	assert_int_equal(c->e.sys_errno, sys_errno);
	assert_non_null(c->e.step);
	assert_string_equal(c->e.step, step);
	memset(&c->e, 0, sizeof(c->e));
}

/* ---- error detail -------------------------------------------------------- */

static void open_fills_error(void **state)
{
	struct ctx *c = *state;
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s;
	char p[4400];

	o.error = &c->e;
	snprintf(p, sizeof(p), "%s/missing", c->scratch);
	assert_int_equal(fsafe_store_open(AT_FDCWD, p, &o, &s), -ENOENT);
	expect_detail(c, -ENOENT, ENOENT, "open the store's directory");
	o.flags = 1u << 20;
	assert_int_equal(fsafe_store_open(AT_FDCWD, c->dir, &o, &s), -EINVAL);
	expect_detail(c, -EINVAL, EINVAL, "options");
	o.flags = 0;
	assert_int_equal(fsafe_store_open(AT_FDCWD, "", &o, &s), -EINVAL);
	expect_detail(c, -EINVAL, EINVAL, "path");
}

static void calls_fill_error(void **state)
{
	struct ctx *c = *state;
	char key[FSAFE_STORE_KEY_MAX + 1], small[2];
	void *buf;
	size_t len;

	memset(key, 'k', sizeof(key));
	assert_int_equal(fsafe_store_put(c->s, key, sizeof(key), "v", 1, NULL),
	                 -ENAMETOOLONG);
	expect_detail(c, -ENAMETOOLONG, ENAMETOOLONG, "key");
	assert_int_equal(fsafe_store_put(c->s, "k", 1, NULL, 3, NULL),
	                 -EINVAL);
	expect_detail(c, -EINVAL, EINVAL, "buffer");
	assert_int_equal(fsafe_store_get(c->s, "k", 1, &buf, &len, NULL),
	                 -ENOENT);
	expect_detail(c, -ENOENT, ENOENT, "read record");
	assert_int_equal(fsafe_store_delete(c->s, "k", 1), -ENOENT);
	expect_detail(c, -ENOENT, ENOENT, "unlink record");
	su_put(c->s, "k", "value", 5);
	assert_int_equal(fsafe_store_get_into(c->s, "k", 1, small,
	                                      sizeof(small), &len, NULL),
	                 -EMSGSIZE);
	expect_detail(c, -EMSGSIZE, EMSGSIZE, "buffer too small");
	/* A conflict is no system call's failure. */
	assert_int_equal(fsafe_store_put_if(c->s, "k", 1, "x", 1, 7, NULL),
	                 FSAFE_ECONFLICT);
	expect_detail(c, FSAFE_ECONFLICT, 0, "compare version");
	assert_string_equal(fsafe_strerror(FSAFE_ECONFLICT),
	                    "version conflict: changed since it was read");
	/* An invalid record says what is wrong with it. */
	char p[4400];
	snprintf(p, sizeof(p), "%s/k-6b", c->dir);
	FILE *f = fopen(p, "r+");
	assert_non_null(f);
	fputc('X', f);
	fclose(f);
	assert_int_equal(fsafe_store_get(c->s, "k", 1, &buf, &len, NULL),
	                 -EBADMSG);
	expect_detail(c, -EBADMSG, EBADMSG, "bad magic");
	/* A success leaves the detail alone. */
	c->e.step = "untouched";
	su_put(c->s, "k", "v", 1);
	assert_string_equal(c->e.step, "untouched");
	/* A bad listing option. */
	struct fsafe_store_list_opts lo = FSAFE_STORE_LIST_OPTS_INIT;
	fsafe_store_iter *it;
	lo.flags = 1u << 9;
	assert_int_equal(fsafe_store_list(c->s, &lo, &it), -EINVAL);
	expect_detail(c, -EINVAL, EINVAL, "options");
}

/* A file where the lock's directory belongs fails every change, and says
   where. */
static void lock_dir_fills_error(void **state)
{
	struct ctx *c = *state;

	tu_put(c->dir, ".lock", "not a directory", 15);
	assert_int_equal(fsafe_store_put(c->s, "k", 1, "v", 1, NULL),
	                 -ENOTDIR);
	expect_detail(c, -ENOTDIR, ENOTDIR, "open the store's lock directory");
	/* A symbolic link there, even to a directory, is never followed:
	   the same -ENOTDIR (store.h), not -ELOOP. */
	char p[4400];
	snprintf(p, sizeof(p), "%s/.lock", c->dir);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink(c->scratch, p), 0);
	assert_int_equal(fsafe_store_delete(c->s, "k", 1), -ENOTDIR);
	expect_detail(c, -ENOTDIR, ENOTDIR, "open the store's lock directory");
}

/* The last call named `name` since the plan was installed; 0 if none. */
static int last_call_named(const char *name)
{
	int last = 0;

	for (int i = 1; i <= fault_calls(); i++)
		if (strcmp(fault_call_name(i), name) == 0)
			last = i;
	return last;
}

/* The step of the write itself is the writer's; a delete's lost
   directory sync is FSAFE_ENOTDURABLE with the sync's errno. */
static void write_steps_fill_error(void **state)
{
	struct ctx *c = *state;
	struct fault_plan plan = { .kind = FAULT_NONE };

	su_put(c->s, "k", "v", 1);
	fault_install(&plan);
	assert_int_equal(fsafe_store_delete(c->s, "k", 1), 0);
	int at = last_call_named("fsync");
	assert_true(at > 0);
	su_put(c->s, "k", "v", 1);
	plan = (struct fault_plan){ .at = at, .kind = FAULT_ERRNO, .err = EIO };
	fault_install(&plan);
	assert_int_equal(fsafe_store_delete(c->s, "k", 1), FSAFE_ENOTDURABLE);
	assert_true(c->e.published);
	expect_detail(c, FSAFE_ENOTDURABLE, EIO, "fsync directory");

	/* A replace: a new key's record is linked where the directory
	   links whole, and renamed elsewhere. */
	su_put(c->s, "k", "v", 1);
	plan = (struct fault_plan){ .kind = FAULT_NONE };
	fault_install(&plan);
	su_put(c->s, "k", "v", 1);
	at = last_call_named("renameat");
	assert_true(at > 0);
	plan = (struct fault_plan){ .at = at, .kind = FAULT_ERRNO,
		                    .err = ENOSPC };
	fault_install(&plan);
	int r = fsafe_store_put(c->s, "k", 1, "w", 1, NULL);
	fault_remove();
	assert_int_equal(r, -ENOSPC);
	assert_int_equal(c->e.code, -ENOSPC);
	assert_int_equal(c->e.sys_errno, ENOSPC);
	assert_false(c->e.published);
	assert_non_null(c->e.step);
	assert_int_equal(su_content(c->s, "k", "v", 1, NULL, 0), SU_OLD);
}

/* Another hand's file at a new key's name, made between the put's read
   (none there) and the link of its unnamed stage: replaced as any
   record is, through a staging name, and nothing left behind. */
static char appear_path[4300];

static void appear_before_link(int call, const char *name)
{
	(void)call;
	(void)name;
	tu_put(appear_path, "k-6e", "theirs", 6);
}

static void a_file_made_before_a_new_keys_link_is_replaced(void **state)
{
	struct ctx *c = *state;

	fsafe__test_renames_whole = 1;
	fsafe_store *s = open_with(c, 20000);
	fsafe__test_renames_whole = -1;
	su_put(s, "warm-up", "w", 1);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_store_put(s, "n", 1, "ours", 4, NULL), 0);
	int at = last_call_named("linkat");
	fault_remove();
	assert_true(at > 0);
	assert_int_equal(fsafe_store_delete(s, "n", 1), 0);
	snprintf(appear_path, sizeof(appear_path), "%s", c->dir);
	fault_install(&(struct fault_plan){ .kind = FAULT_HOOK, .at = at,
	                                    .hook = appear_before_link });
	int r = fsafe_store_put(s, "n", 1, "ours", 4, NULL);
	fault_remove();
	assert_int_equal(r, 0);
	assert_int_equal(su_content(s, "n", "theirs", 6, "ours", 4), SU_NEW);
	assert_int_equal(tu_count_staging(c->dir), 0);
	fsafe_store_close(s);
}

/* ---- update verdicts ----------------------------------------------------- */

struct verdict {
	int result;
	bool set_buf, set_len;
	const void *buf;
	size_t len;
	fsafe_store *reenter; /* put on this handle from the callback */
	int reenter_result, get_result;
};

static int decide(const void *old, size_t old_len, const void **nb,
                  size_t *nl, void *arg)
{
	struct verdict *v = arg;

	(void)old, (void)old_len;
	if (v->reenter) {
		void *buf;
		size_t len;
		v->reenter_result = fsafe_store_put(v->reenter, "k", 1, "r", 1,
		                                    NULL);
		v->get_result = fsafe_store_get(v->reenter, "k", 1, &buf, &len,
		                                NULL);
		if (v->get_result == 0)
			free(buf);
	}
	if (v->set_buf)
		*nb = v->buf;
	if (v->set_len)
		*nl = v->len;
	return v->result;
}

static uint64_t version_of(fsafe_store *s, const char *key)
{
	void *buf;
	size_t len;
	uint64_t v = 0;

	if (fsafe_store_get(s, key, strlen(key), &buf, &len, &v) == 0)
		free(buf);
	return v;
}

/* The trap: a callback that returns 0 out of habit, setting nothing,
   once wrote an empty record. Now nothing changes and the call fails. */
static void update_zero_changes_nothing(void **state)
{
	struct ctx *c = *state;
	struct verdict v = { .result = 0 };

	su_put(c->s, "k", "old", 3);
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, NULL),
	                 -EINVAL);
	expect_detail(c, -EINVAL, EINVAL, "update callback's verdict");
	assert_int_equal(su_content(c->s, "k", "old", 3, NULL, 0), SU_OLD);
	assert_int_equal(version_of(c->s, "k"), 1);
	/* Nor does an unknown verdict. */
	v.result = 99;
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, NULL),
	                 -EINVAL);
	assert_int_equal(su_content(c->s, "k", "old", 3, NULL, 0), SU_OLD);
}

static void update_verdicts(void **state)
{
	struct ctx *c = *state;
	struct verdict v = { .result = FSAFE_STORE_WRITE, .set_buf = true,
		             .set_len = true, .buf = "new", .len = 3 };
	uint64_t ver = 99;

	su_put(c->s, "k", "old", 3);
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, &ver),
	                 0);
	assert_int_equal(ver, 2);
	assert_int_equal(su_content(c->s, "k", "new", 3, NULL, 0), SU_OLD);
	/* A write that forgot its buffer, or its length, is refused. */
	v.set_buf = false;
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, NULL),
	                 -EINVAL);
	expect_detail(c, -EINVAL, EINVAL,
	              "update callback's new value (not set)");
	v.set_buf = true;
	v.set_len = false;
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, NULL),
	                 -EINVAL);
	assert_int_equal(su_content(c->s, "k", "new", 3, NULL, 0), SU_OLD);
	assert_int_equal(version_of(c->s, "k"), 2);
	/* An empty value, asked for explicitly. */
	v = (struct verdict){ .result = FSAFE_STORE_WRITE, .set_buf = true,
		              .set_len = true, .buf = NULL, .len = 0 };
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, &ver),
	                 0);
	assert_int_equal(ver, 3);
	assert_int_equal(su_content(c->s, "k", "", 0, NULL, 0), SU_OLD);
	/* KEEP, with a buffer set, changes nothing. */
	v = (struct verdict){ .result = FSAFE_STORE_KEEP, .set_buf = true,
		              .set_len = true, .buf = "x", .len = 1 };
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, &ver),
	                 0);
	assert_int_equal(ver, 3);
	assert_int_equal(version_of(c->s, "k"), 3);
	/* The callback's error is the call's. */
	v.result = -ECANCELED;
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, NULL),
	                 -ECANCELED);
	expect_detail(c, -ECANCELED, ECANCELED, "update callback");
	/* DELETE removes the key. */
	v.result = FSAFE_STORE_DELETE;
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, &ver),
	                 0);
	assert_int_equal(ver, 0);
	assert_int_equal(su_content(c->s, "k", NULL, 0, NULL, 0), SU_ABSENT);
}

/* A change on the handle from inside its own update callback would wait
   for itself: -EDEADLK at once. Reads work. The handle works after. */
static void update_reentry_is_edeadlk(void **state)
{
	struct ctx *c = *state;
	struct verdict v = { .result = FSAFE_STORE_KEEP, .reenter = c->s };

	su_put(c->s, "k", "old", 3);
	time_t t0 = time(NULL);
	assert_int_equal(fsafe_store_update(c->s, "k", 1, decide, &v, NULL),
	                 0);
	assert_true(time(NULL) - t0 < 5);
	assert_int_equal(v.reenter_result, -EDEADLK);
	assert_int_equal(v.get_result, 0);
	expect_detail(c, -EDEADLK, EDEADLK,
	              "store's lock already held by this handle");
	su_put(c->s, "k", "after", 5);
	assert_int_equal(su_content(c->s, "k", "after", 5, NULL, 0), SU_OLD);
}

/* ---- the lock's wait ----------------------------------------------------- */

/* A child process holds the store's lock (inside an update) until the
   parent writes to `release` or `hold_ms` passes. */
struct holder {
	pid_t pid;
	int release;
};

struct hold_arg {
	int held, release, hold_ms;
};

static int hold(const void *old, size_t old_len, const void **nb,
                size_t *nl, void *arg)
{
	struct hold_arg *h = arg;
	struct pollfd p = { .fd = h->release, .events = POLLIN };

	(void)old, (void)old_len, (void)nb, (void)nl;
	if (write(h->held, "h", 1) != 1)
		return -EIO;
	poll(&p, 1, h->hold_ms);
	return FSAFE_STORE_KEEP;
}

static struct holder hold_lock(const char *dir, int hold_ms)
{
	int held[2], release[2];
	char b;

	assert_int_equal(pipe(held), 0);
	assert_int_equal(pipe(release), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct hold_arg h = { held[1], release[0], hold_ms };
		fsafe_store *s = NULL;
		close(held[0]);
		close(release[1]);
		if (fsafe_store_open(AT_FDCWD, dir, NULL, &s) < 0)
			_exit(2);
		_exit(fsafe_store_update(s, "k", 1, hold, &h, NULL) ? 3 : 0);
	}
	close(held[1]);
	close(release[0]);
	assert_int_equal(read(held[0], &b, 1), 1);
	close(held[0]);
	return (struct holder){ pid, release[1] };
}

static void release_lock(struct holder h)
{
	int st;

	if (write(h.release, "r", 1) < 0)
		kill(h.pid, SIGKILL);
	close(h.release);
	assert_int_equal(waitpid(h.pid, &st, 0), h.pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void lock_wait_bounded(void **state)
{
	struct ctx *c = *state;
	fsafe_store *s = open_with(c, 300);

	struct holder h = hold_lock(c->dir, 90000);
	double t0 = now_s();
	assert_int_equal(fsafe_store_put(s, "k", 1, "v", 1, NULL), -ETIMEDOUT);
	double waited = now_s() - t0;
	release_lock(h);
	assert_true(waited >= 0.29 && waited < 10);
	expect_detail(c, -ETIMEDOUT, ETIMEDOUT, "wait for the store's lock");
	fsafe_store_close(s);
}

/* FSAFE_FOREVER waits for the holder, however long it takes (here the
   holder lets go by itself after a second). */
static void lock_wait_forever(void **state)
{
	struct ctx *c = *state;
	fsafe_store *s = open_with(c, FSAFE_FOREVER);

	struct holder h = hold_lock(c->dir, 1000);
	assert_int_equal(fsafe_store_put(s, "k", 1, "v", 1, NULL), 0);
	release_lock(h);
	fsafe_store_close(s);
}

/* 0 is the documented default, FSAFE_STORE_LOCK_TIMEOUT_MS (30 s): not a
   wait without limit. */
static void lock_wait_default(void **state)
{
	struct ctx *c = *state;
	fsafe_store *s = open_with(c, 0);

	struct holder h = hold_lock(c->dir, 90000);
	double t0 = now_s();
	int r = fsafe_store_put(s, "k", 1, "v", 1, NULL);
	double waited = now_s() - t0;
	release_lock(h);
	assert_int_equal(r, -ETIMEDOUT);
	assert_true(waited >= FSAFE_STORE_LOCK_TIMEOUT_MS / 1000.0 - 0.1 &&
	            waited < 60);
	fsafe_store_close(s);
}

/* ---- a directory at a key's name ----------------------------------------- */

static bool is_dir(const char *dir, const char *name)
{
	char p[4400];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A put publishes the key and a delete removes it; the directory, and
   what it holds, goes into quarantine/ with its reason. */
static void dir_at_key_name(void **state)
{
	struct ctx *c = *state;
	char p[4400];

	snprintf(p, sizeof(p), "%s/k-6b", c->dir); /* key "k" */
	assert_int_equal(mkdir(p, 0755), 0);
	tu_put(p, "inside", "keep", 4);
	assert_int_equal(fsafe_store_delete(c->s, "k", 1), 0);
	assert_false(is_dir(c->dir, "k-6b"));
	assert_true(is_dir(c->dir, "quarantine/k-6b"));
	snprintf(p, sizeof(p), "%s/quarantine/k-6b", c->dir);
	assert_true(tu_equals(p, "inside", "keep", 4));
	snprintf(p, sizeof(p), "%s/quarantine", c->dir);
	size_t n;
	char *why = tu_get(p, "k-6b.reason", &n);
	assert_non_null(why);
	assert_non_null(memmem(why, n, "directory", 9));
	free(why);

	snprintf(p, sizeof(p), "%s/k-6a", c->dir); /* key "j" */
	assert_int_equal(mkdir(p, 0755), 0);
	uint64_t v;
	assert_int_equal(fsafe_store_put(c->s, "j", 1, "J", 1, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(su_content(c->s, "j", "J", 1, NULL, 0), SU_OLD);
	assert_true(is_dir(c->dir, "quarantine/k-6a"));
	/* The store is clean afterwards. */
	assert_int_equal(fsafe_store_check(AT_FDCWD, c->dir, NULL, NULL), 0);
}

int main(void)
{
	/* A holder that let go by itself has closed its end of the pipe. */
	signal(SIGPIPE, SIG_IGN);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(open_fills_error),
		T(calls_fill_error),
		T(lock_dir_fills_error),
		T(write_steps_fill_error),
	T(a_file_made_before_a_new_keys_link_is_replaced),
		T(update_zero_changes_nothing),
		T(update_verdicts),
		T(update_reentry_is_edeadlk),
		T(lock_wait_bounded),
		T(lock_wait_forever),
		T(lock_wait_default),
		T(dir_at_key_name),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
