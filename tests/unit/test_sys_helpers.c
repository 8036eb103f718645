/*
 * The system-call conventions one at a time, under a table that misbehaves
 * in one way: a write that accepts a few bytes at a time, or none; a
 * mkdir that loses a race to another creator; and the no-follow opens a
 * store uses on what it finds inside itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "sys.h"
#include "testutil.h"

static ssize_t write_three(int fd, const void *buf, size_t len)
{
	return fsafe__sys_default.write(fd, buf, len < 3 ? len : 3);
}

static ssize_t write_nothing(int fd, const void *buf, size_t len)
{
	(void)fd, (void)buf, (void)len;
	return 0;
}

/* The same for a write that syncs itself (pwritev2): three bytes of the
   first piece at a time, or nothing; and a kernel that refuses its sync
   flag, which sends the write to write() and fdatasync(). */
static ssize_t pwritev2_three(int fd, const struct iovec *iov, int n,
                              off_t off, int flags)
{
	struct iovec one = iov[0];

	(void)n;
	if (one.iov_len > 3)
		one.iov_len = 3;
	return fsafe__sys_default.pwritev2(fd, &one, 1, off, flags);
}

static ssize_t pwritev2_nothing(int fd, const struct iovec *iov, int n,
                                off_t off, int flags)
{
	(void)fd, (void)iov, (void)n, (void)off, (void)flags;
	return 0;
}

static ssize_t pwritev2_refused(int fd, const struct iovec *iov, int n,
                                off_t off, int flags)
{
	(void)fd, (void)iov, (void)n, (void)off, (void)flags;
	errno = EOPNOTSUPP;
	return -1;
}

/* Another process makes the directory first: ours sees EEXIST. */
static int mkdir_loses_race(int dirfd, const char *path, mode_t mode)
{
	if (fsafe__sys_default.mkdirat(dirfd, path, mode) < 0)
		return -1;
	errno = EEXIST;
	return -1;
}

/* getrandom that yields zeros first, then 0x11 bytes: the first staging
   name is known in advance. */
static int random_calls;
static ssize_t random_known(void *buf, size_t len, unsigned flags)
{
	(void)flags;
	memset(buf, random_calls++ ? 0x11 : 0, len);
	return (ssize_t)len;
}

/* fsync fails with EIO on one directory (by inode) only. */
static ino_t failing_dir;
static int fsync_one_dir_fails(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_ino == failing_dir) {
		errno = EIO;
		return -1;
	}
	return fsafe__sys_default.fsync(fd);
}

static int write_under(const struct fsafe_sys *t, const char *dir,
                       const char *name, const char *text, unsigned flags)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(dfd >= 0);
	o.flags = flags;
	const struct fsafe_sys *old = fsafe__sys_swap(t);
	int r = fsafe_write_fileat(dfd, name, text, strlen(text), &o);
	fsafe__sys_swap(old);
	close(dfd);
	return r;
}

static void short_writes_are_completed(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;
	const char text[] = "written three bytes at a time";

	t.pwritev2 = pwritev2_three;
	assert_int_equal(write_under(&t, f->dir, "f", text, 0), 0);
	assert_true(tu_equals(f->dir, "f", text, strlen(text)));

	t.pwritev2 = pwritev2_refused;
	t.write = write_three;
	assert_int_equal(write_under(&t, f->dir, "g", text, 0), 0);
	assert_true(tu_equals(f->dir, "g", text, strlen(text)));
}

static void a_write_of_nothing_is_an_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;

	t.pwritev2 = pwritev2_nothing;
	assert_int_equal(write_under(&t, f->dir, "f", "x", 0), -EIO);
	assert_int_equal(tu_count_entries(f->dir), 0);

	t.pwritev2 = pwritev2_refused;
	t.write = write_nothing;
	assert_int_equal(write_under(&t, f->dir, "f", "x", 0), -EIO);
	assert_int_equal(tu_count_entries(f->dir), 0);
}

static void mkdir_race_is_not_a_failure(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;

	t.mkdirat = mkdir_loses_race;
	assert_int_equal(write_under(&t, f->dir, "a/b/f", "x", FSAFE_MKDIR), 0);
	char path[4096];
	snprintf(path, sizeof(path), "%s/a/b", f->dir);
	assert_true(tu_equals(path, "f", "x", 1));
}

/* The first name drawn is taken (another writer's stage): the writer
   must not open it, since it would then publish the other's file. */
static void a_taken_staging_name_is_not_reused(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;
	const char *taken = ".fsafe-000000000000000000000000.tmp";

	tu_put(f->dir, taken, "another writer's", 16);
	t.getrandom = random_known;
	random_calls = 0;
	assert_int_equal(write_under(&t, f->dir, "f", "mine", 0), 0);
	assert_true(random_calls >= 2);
	assert_true(tu_equals(f->dir, "f", "mine", 4));
	assert_true(tu_equals(f->dir, taken, "another writer's", 16));
}

/* A directory made for the target is synced into its parent: when that
   sync fails, the write says so (the target's own directory syncs fine). */
static void mkdir_parent_sync_failure_is_reported(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;
	struct stat st;

	assert_int_equal(fstat(f->dirfd, &st), 0);
	failing_dir = st.st_ino;
	t.fsync = fsync_one_dir_fails;
	int r = write_under(&t, f->dir, "a/b/f", "x", FSAFE_MKDIR);
	assert_true(r < 0 || r == FSAFE_ENOTDURABLE);
}

static void open_regular_checks_the_type(void **state)
{
	struct tu_fx *f = *state;
	struct stat st;
	tu_put(f->dir, "file", "x", 1);
	assert_int_equal(mkdirat(f->dirfd, "dir", 0777), 0);
	assert_int_equal(symlinkat("file", f->dirfd, "link"), 0);
	assert_int_equal(mkfifoat(f->dirfd, "fifo", 0600), 0);

	int fd = fsafe__open_regular(f->dirfd, "file", O_RDONLY, &st);
	assert_true(fd >= 0);
	assert_true(S_ISREG(st.st_mode) && st.st_size == 1);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	int before = fault_open_fds();
	assert_int_equal(fsafe__open_regular(f->dirfd, "link", O_RDONLY, NULL),
	                 -ELOOP);
	assert_int_equal(fsafe__open_regular(f->dirfd, "dir", O_RDONLY, NULL),
	                 -EISDIR);
	/* A FIFO with no writer: refused, and the open did not block. */
	assert_int_equal(fsafe__open_regular(f->dirfd, "fifo", O_RDONLY, NULL),
	                 -EBADFD);
	assert_int_equal(fault_open_fds(), before);
}

static void open_subdir_never_follows(void **state)
{
	struct tu_fx *f = *state;

	assert_int_equal(mkdirat(f->dirfd, "dir", 0777), 0);
	assert_int_equal(symlinkat("dir", f->dirfd, "link"), 0);
	int fd = fsafe__open_subdir(f->dirfd, "dir");
	assert_true(fd >= 0);
	close(fd);
	/* Linux says ENOTDIR for O_DIRECTORY|O_NOFOLLOW on a link to a
	   directory; either way, no descriptor. */
	int r = fsafe__open_subdir(f->dirfd, "link");
	assert_true(r == -ENOTDIR || r == -ELOOP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(short_writes_are_completed,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(a_write_of_nothing_is_an_error,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(mkdir_race_is_not_a_failure,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(a_taken_staging_name_is_not_reused,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			mkdir_parent_sync_failure_is_reported, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(open_regular_checks_the_type,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(open_subdir_never_follows,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
