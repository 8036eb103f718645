/*
 * fsafe_store_check / fsafe_store_repair (issue 16) through the C API:
 * what each reports (path, what, lost, action), that check writes
 * nothing, that repair quarantines instead of deleting and leaves every
 * other key intact, that the callback's non-zero return stops the walk,
 * and that repair waits for the store's lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
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

#include "fsafe.h"
#include "storeutil.h"
#include "testutil.h"

struct seen {
	int n;
	char lines[16][512];
	uint64_t lost;
	int stop_at; /* return 7 on this call (1-based); 0 never */
};

static int collect(const struct fsafe_damage *d, void *arg)
{
	struct seen *s = arg;

	if (s->n < 16)
		snprintf(s->lines[s->n], sizeof(s->lines[0]), "%s: %s: %s",
		         d->path, d->what, d->action ? d->action : "-");
	s->lost += d->lost;
	s->n++;
	return s->n == s->stop_at ? 7 : 0;
}

/* A store with keys a, b, c; b's record damaged, a FIFO at d's name and
   a stray file. */
static void damaged_store(struct tu_fx *fx, char *path)
{
	snprintf(path, PATH_MAX, "%s/s", fx->dir);
	fsafe_store *s = su_open(path, FSAFE_STORE_CREATE, 0);
	su_put(s, "a", "AAA", 3);
	su_put(s, "b", "BBB", 3);
	su_put(s, "c", "CCC", 3);
	fsafe_store_close(s);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/k-62", path);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, 38), 1);
	close(fd);
	snprintf(p, sizeof(p), "%s/k-64", path);
	assert_int_equal(mkfifo(p, 0600), 0);
	tu_put(path, "stray", "s", 1);
}

static void check_reports_and_changes_nothing(void **state)
{
	struct tu_fx *fx = *state;
	char path[PATH_MAX];
	struct seen s = { 0 };
	struct stat before, after;

	damaged_store(fx, path);
	assert_int_equal(stat(path, &before), 0);
	assert_int_equal(fsafe_store_check(AT_FDCWD, path, collect, &s), 3);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.lines[0], "k-62: payload cut short or checksum "
	                                "mismatch: -");
	assert_string_equal(s.lines[1], "k-64: not a regular file (FIFO): -");
	assert_string_equal(s.lines[2], "stray: stray entry: not a key's "
	                                "name: -");
	assert_int_equal(s.lost, 2);
	assert_int_equal(stat(path, &after), 0);
	assert_true(before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
	            before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
	assert_int_equal(tu_count_entries(path), 6); /* 4 + stray + .lock */
	/* Without a callback: the count alone. */
	assert_int_equal(fsafe_store_check(AT_FDCWD, path, NULL, NULL), 3);
}

static void the_callback_stops_the_walk(void **state)
{
	struct tu_fx *fx = *state;
	char path[PATH_MAX];
	struct seen s = { .stop_at = 2 };

	damaged_store(fx, path);
	assert_int_equal(fsafe_store_check(AT_FDCWD, path, collect, &s), 7);
	assert_int_equal(s.n, 2);
}

static void repair_quarantines_and_keeps_the_rest(void **state)
{
	struct tu_fx *fx = *state;
	char path[PATH_MAX], q[PATH_MAX + 16];
	struct seen s = { 0 };

	damaged_store(fx, path);
	assert_int_equal(fsafe_store_repair(AT_FDCWD, path, collect, &s), 3);
	assert_string_equal(s.lines[0], "k-62: payload cut short or checksum "
	                                "mismatch: quarantined as "
	                                "quarantine/k-62");
	snprintf(q, sizeof(q), "%s/quarantine", path);
	assert_int_equal(tu_count_entries(q), 6); /* 3 entries, 3 reasons */
	assert_true(tu_equals(q, "k-62.reason",
	                      "payload cut short or checksum mismatch", 38));
	assert_int_equal(fsafe_store_check(AT_FDCWD, path, NULL, NULL), 0);

	fsafe_store *st = su_open(path, 0, 0);
	assert_int_equal(su_content(st, "a", "AAA", 3, NULL, 0), SU_OLD);
	assert_int_equal(su_content(st, "c", "CCC", 3, NULL, 0), SU_OLD);
	assert_int_equal(su_content(st, "b", "BBB", 3, NULL, 0), SU_ABSENT);
	/* The same name damaged again keeps both quarantined copies. */
	su_put(st, "b", "B2", 2);
	fsafe_store_close(st);
	snprintf(q, sizeof(q), "%s/k-62", path);
	assert_int_equal(truncate(q, 5), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(fsafe_store_repair(AT_FDCWD, path, collect, &s), 1);
	assert_string_equal(s.lines[0], "k-62: shorter than a record header: "
	                                "quarantined as quarantine/k-62.1");
}

static void a_lock_dir_that_is_a_link_fails_changes_until_repair(void **state)
{
	struct tu_fx *fx = *state;
	char path[PATH_MAX], lk[PATH_MAX + 16], out[PATH_MAX + 16];
	struct seen s = { 0 };

	snprintf(path, sizeof(path), "%s/s", fx->dir);
	snprintf(out, sizeof(out), "%s/out", fx->dir);
	assert_int_equal(mkdir(out, 0755), 0);
	fsafe_store *st = su_open(path, FSAFE_STORE_CREATE, 0);
	su_put(st, "a", "A", 1);
	snprintf(lk, sizeof(lk), "%s/.lock/lock", path);
	assert_int_equal(unlink(lk), 0);
	snprintf(lk, sizeof(lk), "%s/.lock", path);
	assert_int_equal(rmdir(lk), 0);
	assert_int_equal(symlink("../out", lk), 0);
	assert_int_equal(fsafe_store_put(st, "b", 1, "B", 1, NULL), -ENOTDIR);
	assert_int_equal(tu_count_entries(out), 0);
	assert_int_equal(fsafe_store_repair(AT_FDCWD, path, collect, &s), 1);
	assert_string_equal(s.lines[0], ".lock: not a directory (symbolic "
	                                "link): quarantined as "
	                                "quarantine/.lock");
	assert_int_equal(fsafe_store_put(st, "b", 1, "B", 1, NULL), 0);
	assert_int_equal(tu_count_entries(out), 0);
	fsafe_store_close(st);
}

static void repair_waits_for_the_lock(void **state)
{
	struct tu_fx *fx = *state;
	char path[PATH_MAX];
	fsafe_lock *l;

	damaged_store(fx, path);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* The lock as a library before store_lock.c took it: a link-mode
	   fsafe_lock (which first waits out its grace period, 10 s, on the
	   store's empty lock file, then breaks it as a file at rest). Its
	   flock keeps repair out; its release removes the file. */
	assert_int_equal(fsafe_lock_acquire(dfd, ".lock/lock", NULL, &l), 0);
	/* Another process must wait: run repair in a child, which sees our
	   live lock, while we release after it has started waiting. */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fsafe_store_repair(AT_FDCWD, path, NULL, NULL) == 3 ? 0
		                                                          : 1);
	/* The child cannot have moved anything while we hold the lock:
	   record k-62 stays until we let go. */
	char rec[PATH_MAX + 16];
	snprintf(rec, sizeof(rec), "%s/k-62", path);
	for (int i = 0; i < 50; i++) {
		assert_int_equal(access(rec, F_OK), 0);
		usleep(2000);
	}
	assert_int_equal(fsafe_lock_release(l), 0);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(access(rec, F_OK), -1);
	close(dfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			check_reports_and_changes_nothing, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(the_callback_stops_the_walk,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			repair_quarantines_and_keeps_the_rest, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			a_lock_dir_that_is_a_link_fails_changes_until_repair,
			tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(repair_waits_for_the_lock,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
