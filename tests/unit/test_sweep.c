/* The age sweep of abandoned staging files. */
#define _GNU_SOURCE
#include <dirent.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "testutil.h"

#define HOUR_MS (3600u * 1000u)

#define fx tu_fx
#define setup tu_fx_setup
#define teardown tu_fx_teardown

static void age(struct fx *f, const char *name, int seconds, int flags)
{
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= seconds;
	ts[1] = ts[0];
	assert_int_equal(utimensat(f->dirfd, name, ts, flags), 0);
}

/* An abandoned stage: a staging name with an old mtime. */
static void plant(struct fx *f, const char *name, int age_s)
{
	tu_put(f->dir, name, "stale", 5);
	age(f, name, age_s, 0);
}

static bool exists(struct fx *f, const char *name)
{
	struct stat st;
	return fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static const char old1[] = ".fsafe-00000000000000000000000a.tmp";
static const char old2[] = ".fsafe-00000000000000000000000b.tmp";
static const char young[] = ".fsafe-00000000000000000000000c.tmp";

static void removes_only_old_abandoned_stages(void **state)
{
	struct fx *f = *state;
	fsafe_sweep_result *res;

	plant(f, old1, 7200);
	plant(f, old2, 7200);
	plant(f, young, 60);
	tu_put(f->dir, "target", "data", 4);
	age(f, "target", 7200, 0);

	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, NULL, &res);
	assert_int_equal(n, 2);
	assert_int_equal(fsafe_sweep_result_count(res), 2);
	bool saw1 = false, saw2 = false;
	for (size_t i = 0; i < 2; i++) {
		saw1 |= !strcmp(fsafe_sweep_result_name(res, i), old1);
		saw2 |= !strcmp(fsafe_sweep_result_name(res, i), old2);
	}
	assert_true(saw1 && saw2);
	assert_null(fsafe_sweep_result_name(res, 2));
	fsafe_sweep_result_free(res);
	assert_false(exists(f, old1));
	assert_false(exists(f, old2));
	assert_true(exists(f, young));
	assert_true(exists(f, "target"));
}

static void keeps_everything_that_is_not_an_abandoned_stage(void **state)
{
	struct fx *f = *state;
	static const char *const lookalikes[] = {
		".fsafe-0000000000000000000000AA.tmp",
		".fsafe-00000000000000000000000a.tmp.bak",
		".fsafe-00000000000000000000000.tmp",
		".lock-0f8fad5b-d9cb-469f-a165-70867728950e.tmp",
		"config.json",
	};
	for (size_t i = 0; i < 5; i++)
		plant(f, lookalikes[i], 7200);

	/* A directory named like a stage, with a stage inside it. */
	assert_int_equal(mkdirat(f->dirfd, old1, 0755), 0);
	char inner[PATH_MAX];
	snprintf(inner, sizeof(inner), "%s/%s", old1, old2);
	plant(f, inner, 7200);
	age(f, old1, 7200, 0);

	/* A symlink named like a stage, pointing at an old regular file. */
	plant(f, "victim", 7200);
	assert_int_equal(symlinkat("victim", f->dirfd, young), 0);
	age(f, young, 7200, AT_SYMLINK_NOFOLLOW);

	/* A symlink (not a stage name) pointing at an old stage: the link
	   survives; the stage it names is swept on its own merits. */
	const char *other = ".fsafe-0000000000000000000000dd.tmp";
	plant(f, other, 7200);
	assert_int_equal(symlinkat(other, f->dirfd, "points-at-stage"), 0);

	fsafe_sweep_result *res;
	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, NULL, &res);
	assert_int_equal(n, 1);
	assert_string_equal(fsafe_sweep_result_name(res, 0), other);
	fsafe_sweep_result_free(res);

	for (size_t i = 0; i < 5; i++)
		assert_true(exists(f, lookalikes[i]));
	assert_true(exists(f, old1));
	assert_true(exists(f, inner));
	assert_true(exists(f, young));
	assert_true(exists(f, "victim"));
	assert_true(tu_equals(f->dir, "victim", "stale", 5));
	assert_true(exists(f, "points-at-stage"));
}

static void never_takes_a_live_writers_stage(void **state)
{
	struct fx *f = *state;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	fsafe_writer *w;

	o.flags = FSAFE_NO_TMPFILE;
	assert_int_equal(fsafe_writer_open(f->dirfd, "t", &o, &w), 0);
	assert_int_equal(fsafe_writer_write(w, "in flight", 9), 0);
	/* Find the stage and make it look ancient. */
	int dfd = dup(f->dirfd);
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	char stage[NAME_MAX + 1] = "";
	while ((e = readdir(d)))
		if (fsafe_is_staging_name(e->d_name))
			strcpy(stage, e->d_name);
	closedir(d);
	assert_true(stage[0]);
	age(f, stage, 30 * 86400, 0);

	assert_int_equal(fsafe_sweep(f->dirfd, ".", 0, 0, NULL, NULL), 0);
	assert_true(exists(f, stage));
	assert_int_equal(fsafe_writer_commit(w), 0);
	assert_true(tu_equals(f->dir, "t", "in flight", 9));
	assert_false(exists(f, stage));
}

static void dry_run_removes_nothing(void **state)
{
	struct fx *f = *state;
	fsafe_sweep_result *res;

	plant(f, old1, 7200);
	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, FSAFE_SWEEP_DRY_RUN, NULL,
	                    &res);
	assert_int_equal(n, 1);
	assert_string_equal(fsafe_sweep_result_name(res, 0), old1);
	fsafe_sweep_result_free(res);
	assert_true(exists(f, old1));
}

static void works_relative_to_the_dir_fd(void **state)
{
	struct fx *f = *state;
	assert_int_equal(mkdirat(f->dirfd, "sub", 0755), 0);
	char name[PATH_MAX];
	snprintf(name, sizeof(name), "sub/%s", old1);
	plant(f, name, 7200);
	assert_int_equal(fsafe_sweep(f->dirfd, "sub", HOUR_MS, 0, NULL, NULL), 1);
	assert_false(exists(f, name));
	assert_int_equal(fsafe_sweep(f->dirfd, "missing", 0, 0, NULL, NULL),
	                 -ENOENT);
	tu_put(f->dir, "file", "x", 1);
	assert_int_equal(fsafe_sweep(f->dirfd, "file", 0, 0, NULL, NULL),
	                 -ENOTDIR);
}

/* Cancellation, driven deterministically from inside the sweep through
   the system-call table: a signal handler requests it at call N. */
static fsafe_cancel *the_cancel;

static void on_signal(int sig)
{
	(void)sig;
	fsafe_cancel_request(the_cancel);
}

static void cancel_hook(int call, const char *name)
{
	(void)call, (void)name;
	raise(SIGUSR1);
}

static void cancels_from_a_signal_handler(void **state)
{
	struct fx *f = *state;
	char name[FSAFE_STAGING_NAME_LEN + 1];
	fsafe_sweep_result *res;

	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), ".fsafe-%024x.tmp", i);
		plant(f, name, 7200);
	}
	assert_int_equal(fsafe_cancel_new(&the_cancel), 0);
	signal(SIGUSR1, on_signal);

	/* Count the calls of a sweep that removes nothing, then cancel at
	   half that count: part-way through the real sweep. */
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_sweep(f->dirfd, ".", HOUR_MS,
	                             FSAFE_SWEEP_DRY_RUN, NULL, NULL), 10);
	int calls = fault_calls();
	fault_remove();
	assert_true(calls > 10);

	fault_install(&(struct fault_plan){
		.kind = FAULT_HOOK, .at = calls / 2, .hook = cancel_hook });
	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, the_cancel, &res);
	fault_remove();
	assert_int_equal(n, -ECANCELED);
	size_t removed = fsafe_sweep_result_count(res);
	assert_true(removed >= 1 && removed < 10);
	for (size_t i = 0; i < removed; i++)
		assert_false(exists(f, fsafe_sweep_result_name(res, i)));
	assert_int_equal(tu_count_staging(f->dir), (int)(10 - removed));
	fsafe_sweep_result_free(res);

	/* Already cancelled: nothing happens. */
	assert_int_equal(fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, the_cancel, NULL),
	                 -ECANCELED);
	assert_int_equal(tu_count_staging(f->dir), (int)(10 - removed));
	signal(SIGUSR1, SIG_DFL);
	fsafe_cancel_free(the_cancel);
}

/* An entry that vanishes between listing and removal is not an error. */
static int vanish_dirfd;

static void vanish_hook(int call, const char *name)
{
	(void)call, (void)name;
	unlinkat(vanish_dirfd, old1, 0);
}

static void tolerates_vanishing_entries(void **state)
{
	struct fx *f = *state;
	plant(f, old1, 7200);
	vanish_dirfd = f->dirfd;
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_sweep(f->dirfd, ".", HOUR_MS, FSAFE_SWEEP_DRY_RUN,
	                             NULL, NULL), 1);
	int calls = fault_calls();
	fault_remove();
	/* Make the entry vanish just before each call in turn. */
	for (int at = 1; at <= calls; at++) {
		plant(f, old1, 7200);
		fault_install(&(struct fault_plan){
			.kind = FAULT_HOOK, .at = at, .hook = vanish_hook });
		int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, NULL, NULL);
		fault_remove();
		assert_true(n == 0 || n == 1);
		assert_false(exists(f, old1));
	}
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(removes_only_old_abandoned_stages),
		T(keeps_everything_that_is_not_an_abandoned_stage),
		T(never_takes_a_live_writers_stage),
		T(dry_run_removes_nothing),
		T(works_relative_to_the_dir_fd),
		T(cancels_from_a_signal_handler),
		T(tolerates_vanishing_entries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
