/*
 * fsafe_lock_check / fsafe_lock_repair (issue 16): a directory of locks
 * with one of everything. Check reports exactly the problems and writes
 * nothing; repair removes what is proven dead, quarantines what is
 * damaged and leaves live and unjudgeable owners' locks alone.
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
#include <unistd.h>

#include <cmocka.h>

#include "lockutil.h"
#include "testutil.h"

#define LEFTOVER ".lock-0b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.tmp"

struct seen {
	int n;
	char lines[16][256];
};

static int collect(const struct fsafe_damage *d, void *arg)
{
	struct seen *s = arg;

	if (s->n < 16)
		snprintf(s->lines[s->n], sizeof(s->lines[0]), "%s: %s: %s",
		         d->path, d->what, d->action ? d->action : "-");
	s->n++;
	return 0;
}

/* alive (a live sleeper's record), dead (a reaped pid's), far (another
   host's), kern (a dead kernel-mode holder's), bad (garbage), fifo, a
   dead acquirer's leftover, and an empty file. */
static pid_t populate(const char *dir)
{
	struct fsafe_lock_owner live, o = lu_dead_owner();
	pid_t sleeper = lu_sleeper(&live);
	char p[PATH_MAX + 16];

	lu_forge(dir, "alive", &live);
	lu_forge(dir, "dead", &o);
	lu_forge(dir, LEFTOVER, &o);
	o.kernel = true;
	lu_forge(dir, "kern", &o);
	o.kernel = false;
	snprintf(o.host, sizeof(o.host), "elsewhere");
	lu_forge(dir, "far", &o);
	tu_put(dir, "bad", "fsafe-lock 1\ngarbage\n", 21);
	tu_put(dir, "empty", "", 0);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	return sleeper;
}

static void check_then_repair(void **state)
{
	struct tu_fx *fx = *state;
	struct seen s = { 0 };
	struct stat before, after;
	pid_t sleeper = populate(fx->dir);

	assert_int_equal(stat(fx->dir, &before), 0);
	assert_int_equal(fsafe_lock_check(fx->dirfd, ".", collect, &s), 4);
	assert_string_equal(s.lines[0], LEFTOVER ": leftover of a crashed "
	                                "acquirer: -");
	assert_string_equal(s.lines[1], "bad: owner record does not parse: -");
	assert_string_equal(s.lines[2], "dead: abandoned: its owner is dead: "
	                                "-");
	assert_string_equal(s.lines[3], "fifo: not a regular file (FIFO): -");
	assert_int_equal(stat(fx->dir, &after), 0);
	assert_true(before.st_mtim.tv_nsec == after.st_mtim.tv_nsec &&
	            before.st_mtim.tv_sec == after.st_mtim.tv_sec);
	assert_int_equal(tu_count_entries(fx->dir), 8);

	memset(&s, 0, sizeof(s));
	assert_int_equal(fsafe_lock_repair(fx->dirfd, ".", collect, &s), 4);
	assert_string_equal(s.lines[0], LEFTOVER ": leftover of a crashed "
	                                "acquirer: removed");
	assert_string_equal(s.lines[1], "bad: owner record does not parse: "
	                                "quarantined as quarantine/bad");
	assert_string_equal(s.lines[2], "dead: abandoned: its owner is dead: "
	                                "removed");
	assert_string_equal(s.lines[3], "fifo: not a regular file (FIFO): "
	                                "quarantined as quarantine/fifo");
	/* alive, far, kern, empty and the quarantine remain. */
	assert_int_equal(tu_count_entries(fx->dir), 5);
	assert_int_equal(fsafe_lock_check(fx->dirfd, ".", NULL, NULL), 0);
	lu_stop(sleeper);
}

static void a_held_lock_with_a_damaged_record_is_left_alone(void **state)
{
	struct tu_fx *fx = *state;
	fsafe_lock *l;

	assert_int_equal(fsafe_lock_acquire(fx->dirfd, "l", NULL, &l), 0);
	/* Damaged in place: the holder's flock is still on the inode. */
	int fd = openat(fx->dirfd, "l", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		assert_int_equal(chmod(fx->dir, 0755), 0);
		assert_int_equal(fchmodat(fx->dirfd, "l", 0644, 0), 0);
		fd = openat(fx->dirfd, "l", O_WRONLY | O_CLOEXEC);
	}
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\xff\xff", 2, 0), 2);
	close(fd);
	assert_int_equal(fsafe_lock_repair(fx->dirfd, ".", NULL, NULL), 0);
	assert_int_equal(faccessat(fx->dirfd, "l", F_OK, 0), 0);
	assert_int_equal(fsafe_lock_release(l), -ESTALE);
}

/* A file at the quarantine's name is judged first and moved into a new
   quarantine of its own, so it blocks no other repair. */
static void a_file_named_quarantine_is_requarantined(void **state)
{
	struct tu_fx *fx = *state;
	struct seen s = { 0 };
	struct stat st;

	tu_put(fx->dir, "quarantine", "not a directory", 15);
	tu_put(fx->dir, "bad", "fsafe-lock 1\ngarbage\n", 21);
	assert_int_equal(fsafe_lock_check(fx->dirfd, ".", collect, &s), 2);
	assert_string_equal(s.lines[0], "quarantine: a file where the "
	                                "quarantine belongs: -");
	assert_string_equal(s.lines[1], "bad: owner record does not parse: -");

	memset(&s, 0, sizeof(s));
	assert_int_equal(fsafe_lock_repair(fx->dirfd, ".", collect, &s), 2);
	assert_string_equal(s.lines[0], "quarantine: a file where the "
	                                "quarantine belongs: moved into a new "
	                                "quarantine/");
	assert_string_equal(s.lines[1], "bad: owner record does not parse: "
	                                "quarantined as quarantine/bad");
	assert_int_equal(fstatat(fx->dirfd, "quarantine", &st, 0), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_true(tu_equals(fx->dir, "quarantine/quarantine.damaged",
	                      "not a directory", 15));
	assert_int_equal(fsafe_lock_check(fx->dirfd, ".", NULL, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			a_file_named_quarantine_is_requarantined, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(check_then_repair, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			a_held_lock_with_a_damaged_record_is_left_alone,
			tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
