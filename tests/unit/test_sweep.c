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
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "sys.h"
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

	/* A FIFO, a socket and a device named like stages. */
	assert_int_equal(mkfifoat(f->dirfd, young, 0600), 0);
	age(f, young, 7200, 0);
	assert_int_equal(mknodat(f->dirfd, old2, S_IFSOCK | 0600, 0), 0);
	age(f, old2, 7200, 0);
	const char *dev = ".fsafe-0000000000000000000000ee.tmp";
	bool have_dev = mknodat(f->dirfd, dev, S_IFCHR | 0600,
	                        makedev(1, 3)) == 0;
	if (have_dev)
		age(f, dev, 7200, 0);
	else
		printf("SKIP device part: mknod needs CAP_MKNOD\n");

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
	assert_true(exists(f, old2));
	assert_true(!have_dev || exists(f, dev));
	assert_true(exists(f, "points-at-stage"));
}

/* A staging-named symbolic link, as a crashed fsafe_symlinkat leaves one,
   with its own mtime `age_s` seconds in the past. */
static void plant_link(struct fx *f, const char *name, const char *to,
                       int age_s)
{
	assert_int_equal(symlinkat(to, f->dirfd, name), 0);
	age(f, name, age_s, AT_SYMLINK_NOFOLLOW);
}

static const char link_old_file[] = ".fsafe-0000000000000000000000f1.tmp";
static const char link_old_dir[] = ".fsafe-0000000000000000000000f2.tmp";
static const char link_outside[] = ".fsafe-0000000000000000000000f3.tmp";
static const char link_dangling[] = ".fsafe-0000000000000000000000f4.tmp";
static const char link_to_fresh[] = ".fsafe-0000000000000000000000f5.tmp";
static const char link_fresh[] = ".fsafe-0000000000000000000000f6.tmp";

/*
 * Old link stages of every kind, a fresh one, and targets whose ages are
 * the opposite of their links' (so judging a target's age, not the
 * link's, keeps or removes the wrong ones). Returns the outside dir.
 */
static char *plant_links(struct fx *f)
{
	char *outside = tu_mkscratch();
	char path[PATH_MAX];

	tu_put(f->dir, "old-file", "stale", 5);
	age(f, "old-file", 7200, 0);
	tu_put(f->dir, "fresh-file", "fresh", 5);
	assert_int_equal(mkdirat(f->dirfd, "dir", 0755), 0);
	tu_put(f->dir, "dir/inside", "in", 2);
	tu_put(outside, "secret", "out", 3);
	snprintf(path, sizeof(path), "%s/secret", outside);

	plant_link(f, link_old_file, "old-file", 7200);
	plant_link(f, link_old_dir, "dir", 7200);
	plant_link(f, link_outside, path, 7200);
	plant_link(f, link_dangling, "nowhere", 7200);
	plant_link(f, link_to_fresh, "fresh-file", 7200);
	plant_link(f, link_fresh, "old-file", 60);
	return outside;
}

static void check_links_swept(struct fx *f, char *outside, int n,
                              fsafe_sweep_result *res)
{
	const char *gone[] = { link_old_file, link_old_dir, link_outside,
		               link_dangling, link_to_fresh };

	assert_int_equal(n, 5);
	for (size_t i = 0; i < 5; i++) {
		bool listed = false;
		for (size_t j = 0; j < fsafe_sweep_result_count(res); j++)
			listed |= !strcmp(fsafe_sweep_result_name(res, j),
			                  gone[i]);
		assert_true(listed);
		assert_false(exists(f, gone[i]));
	}
	assert_true(exists(f, link_fresh));
	/* The targets are untouched, the directory's content too. */
	assert_true(tu_equals(f->dir, "old-file", "stale", 5));
	assert_true(tu_equals(f->dir, "fresh-file", "fresh", 5));
	assert_true(tu_equals(f->dir, "dir/inside", "in", 2));
	assert_true(tu_equals(outside, "secret", "out", 3));
	tu_rmtree(outside);
	free(outside);
}

static void removes_old_link_stages_never_their_targets(void **state)
{
	struct fx *f = *state;
	char *outside = plant_links(f);
	fsafe_sweep_result *res;

	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, NULL, &res);
	check_links_swept(f, outside, n, res);
	fsafe_sweep_result_free(res);
}

/* Some filesystems give no entry type: the link is then found by the
   no-follow open failing, and judged the same way. */
static ssize_t untyped_getdents(int fd, void *buf, size_t len)
{
	ssize_t n = fsafe__sys_default.getdents(fd, buf, len);

	for (ssize_t pos = 0; pos < n;) {
		char *e = (char *)buf + pos;
		unsigned short reclen;

		memcpy(&reclen, e + 16, sizeof(reclen));
		e[18] = DT_UNKNOWN; /* d_ino 8, d_off 8, d_reclen 2, d_type */
		pos += reclen;
	}
	return n;
}

static void removes_link_stages_of_untyped_entries(void **state)
{
	struct fx *f = *state;
	char *outside = plant_links(f);
	static struct fsafe_sys untyped;
	fsafe_sweep_result *res;

	untyped = fsafe__sys_default;
	untyped.getdents = untyped_getdents;
	fault_set_real(&untyped);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, NULL, &res);
	fault_remove();
	fault_set_real(NULL);
	check_links_swept(f, outside, n, res);
	fsafe_sweep_result_free(res);
}

static void dry_run_lists_link_stages(void **state)
{
	struct fx *f = *state;
	fsafe_sweep_result *res;

	plant_link(f, old1, "nowhere", 7200);
	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, FSAFE_SWEEP_DRY_RUN, NULL,
	                    &res);
	assert_int_equal(n, 1);
	assert_string_equal(fsafe_sweep_result_name(res, 0), old1);
	fsafe_sweep_result_free(res);
	assert_true(exists(f, old1));
}

/* The name is re-checked just before the unlink: a link put in place of
   the judged one (a fresh one, another inode) stays. The judged link is
   moved aside, not removed, so its inode number cannot come back. */
static int swap_dirfd;

static void swap_hook(int call, const char *name)
{
	(void)call, (void)name;
	assert_int_equal(renameat(swap_dirfd, old1, swap_dirfd, "judged"), 0);
	assert_int_equal(symlinkat("other", swap_dirfd, old1), 0);
}

static void keeps_a_link_swapped_after_it_was_judged(void **state)
{
	struct fx *f = *state;
	char to[16];

	plant_link(f, old1, "nowhere", 7200);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_sweep(f->dirfd, ".", HOUR_MS, FSAFE_SWEEP_DRY_RUN,
	                             NULL, NULL), 1);
	int judged = fault_first_call_named("fstatat");
	fault_remove();
	assert_true(judged > 0);

	swap_dirfd = f->dirfd;
	fault_install(&(struct fault_plan){
		.kind = FAULT_HOOK, .at = judged + 1, .hook = swap_hook });
	int n = fsafe_sweep(f->dirfd, ".", HOUR_MS, 0, NULL, NULL);
	fault_remove();
	assert_int_equal(n, 0);
	ssize_t len = readlinkat(f->dirfd, old1, to, sizeof(to) - 1);
	assert_int_equal(len, 5);
	to[len] = '\0';
	assert_string_equal(to, "other");
}

/*
 * A sweep of age 0 may take a live fsafe_symlinkat's stage between its
 * symlinkat and its rename: the rename then fails with ENOENT, and the
 * replace starts again under a fresh name and publishes the right link.
 */
static int race_dirfd;
static int race_swept;

static void sweep_hook(int call, const char *name)
{
	(void)call, (void)name;
	race_swept = fsafe_sweep(race_dirfd, ".", 0, 0, NULL, NULL);
}

static void a_swept_link_stage_makes_the_replace_start_again(void **state)
{
	struct fx *f = *state;
	char to[16];

	assert_int_equal(symlinkat("release-41", f->dirfd, "current"), 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_symlinkat("release-41", f->dirfd, "current",
	                                 NULL), 0);
	int rename_at = fault_first_call_named("renameat");
	fault_remove();
	assert_true(rename_at > 0);

	race_dirfd = f->dirfd;
	race_swept = -1;
	fault_install(&(struct fault_plan){
		.kind = FAULT_HOOK, .at = rename_at, .hook = sweep_hook });
	int r = fsafe_symlinkat("release-42", f->dirfd, "current", NULL);
	int stages = fault_calls_named("symlinkat");
	fault_remove();
	assert_int_equal(race_swept, 1); /* the sweep took the stage */
	assert_int_equal(r, 0);
	assert_int_equal(stages, 2);     /* and the replace staged again */
	ssize_t len = readlinkat(f->dirfd, "current", to, sizeof(to) - 1);
	assert_int_equal(len, 10);
	to[len] = '\0';
	assert_string_equal(to, "release-42");
	assert_int_equal(tu_count_staging(f->dir), 0);
}

/*
 * A one-shot write of a new file locks its named stage without a stat
 * after the lock: a sweep of age 0 that takes the stage just before the
 * lock shows at the rename (ENOENT), and the write starts again under a
 * fresh name. It succeeds, with the content, and leaves nothing behind.
 */
static void sweep_at(int call, const char *name)
{
	(void)call;
	if (!strcmp(name, "fcntl") && race_swept < 0)
		race_swept = fsafe_sweep(race_dirfd, ".", 0, 0, NULL, NULL);
}

static void a_swept_new_stage_makes_the_write_start_again(void **state)
{
	struct fx *f = *state;

	race_dirfd = f->dirfd;
	race_swept = -1;
	/* The hook runs before one call: find the lock's number first. */
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_write_fileat(f->dirfd, "probe", "p", 1, NULL), 0);
	int lock_at = fault_first_call_named("fcntl");
	fault_remove();
	assert_true(lock_at > 0);

	fault_install(&(struct fault_plan){ .kind = FAULT_HOOK, .at = lock_at,
	                                    .hook = sweep_at });
	int r = fsafe_write_fileat(f->dirfd, "new", "content", 7, NULL);
	int renames = fault_calls_named("renameat");
	fault_remove();
	assert_int_equal(race_swept, 1); /* the sweep took the stage */
	assert_int_equal(r, 0);
	assert_int_equal(renames, 2);    /* ENOENT, then the new stage's */
	assert_true(tu_equals(f->dir, "new", "content", 7));
	assert_int_equal(tu_count_staging(f->dir), 0);
}

/* A stage taken at every rename: the replace gives up after a bounded
   number of attempts, reports the lost rename, and leaves nothing. */
static int taken_dirfd;

static int take_stage_renameat(int olddirfd, const char *old, int newdirfd,
                               const char *new_)
{
	unlinkat(taken_dirfd, old, 0);
	return fsafe__sys_default.renameat(olddirfd, old, newdirfd, new_);
}

static void a_link_stage_taken_every_time_is_reported(void **state)
{
	struct fx *f = *state;
	static struct fsafe_sys taking;
	struct fsafe_error err = { 0 };
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.error = &err;
	taking = fsafe__sys_default;
	taking.renameat = take_stage_renameat;
	taken_dirfd = f->dirfd;
	assert_int_equal(symlinkat("release-41", f->dirfd, "current"), 0);
	fault_set_real(&taking);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	int r = fsafe_symlinkat("release-42", f->dirfd, "current", &o);
	int stages = fault_calls_named("symlinkat");
	fault_remove();
	fault_set_real(NULL);
	assert_int_equal(r, -ENOENT);
	assert_int_equal(err.code, -ENOENT);
	assert_string_equal(err.step, "rename");
	assert_false(err.published);
	assert_true(stages > 1 && stages <= 8);
	assert_int_equal(tu_count_staging(f->dir), 0);
	char to[16];
	ssize_t len = readlinkat(f->dirfd, "current", to, sizeof(to) - 1);
	assert_int_equal(len, 10);
	to[len] = '\0';
	assert_string_equal(to, "release-41");
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
		T(removes_old_link_stages_never_their_targets),
		T(removes_link_stages_of_untyped_entries),
		T(dry_run_lists_link_stages),
		T(keeps_a_link_swapped_after_it_was_judged),
		T(a_swept_link_stage_makes_the_replace_start_again),
		T(a_link_stage_taken_every_time_is_reported),
		T(a_swept_new_stage_makes_the_write_start_again),
		T(never_takes_a_live_writers_stage),
		T(dry_run_removes_nothing),
		T(works_relative_to_the_dir_fd),
		T(cancels_from_a_signal_handler),
		T(tolerates_vanishing_entries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
