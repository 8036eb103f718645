/*
 * Error detail through the spool's one door (fsafe.h, "Error detail"):
 * the open fills fsafe_spool_opts.error when it fails (options that
 * cannot work are named by the rule they break) and keeps it; every
 * failing append, ack, read and stat fills it with the step and errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe/spool.h"
#include "sys.h"
#include "testutil.h"

/* Only directories' syncs fail: the cursor's data sync goes through. */
static int fsync_dirs_eio(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
		return tu_fail_eio(fd);
	return fsafe__sys_default.fsync(fd);
}

static int try_open(int dirfd, uint64_t segment_size, uint32_t max_record,
                    struct fsafe_error *e)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.flags = FSAFE_SPOOL_CREATE;
	o.segment_size = segment_size;
	o.max_record = max_record;
	o.error = e;
	int r = fsafe_spool_open(dirfd, "sp", &o, &s);
	fsafe_spool_close(s);
	return r;
}

static void bad_sizes_are_named(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };

	/* A segment must hold its header and one frame of the longest
	   record: 32 + 32 + max_record bytes. */
	assert_int_equal(try_open(f->dirfd, 4096, 8192, &e), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL,
	              "options (segment_size below one record)");
	assert_int_equal(try_open(f->dirfd, 64 + 100, 101, &e), -EINVAL);
	assert_int_equal(try_open(f->dirfd, 64, 0, &e), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL,
	              "options (segment_size below one record)");
	assert_int_equal(try_open(f->dirfd, UINT64_MAX, 0, &e), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL,
	              "options (segment_size above 1 TiB)");
	assert_int_equal(try_open(f->dirfd, 0, (256u << 20) + 1, &e), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL,
	              "options (max_record above 256 MiB)");

	/* The limits themselves work; a default max_record fits the
	   segment. */
	memset(&e, 0, sizeof(e));
	assert_int_equal(try_open(f->dirfd, 64 + 100, 100, &e), 0);
	assert_int_equal(try_open(f->dirfd, 65, 0, &e), 0);
	assert_int_equal(try_open(f->dirfd, 1024, 0, &e), 0);
	assert_int_equal(try_open(f->dirfd, (256u << 20) + 64, 256u << 20, &e),
	                 0);
	assert_null(e.step);
}

static fsafe_spool *open_sp(int dirfd, unsigned flags, struct fsafe_error *e)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.flags = FSAFE_SPOOL_CREATE | flags;
	o.max_record = 16;
	o.error = e;
	assert_int_equal(fsafe_spool_open(dirfd, "sp", &o, &s), 0);
	return s;
}

static void append_fills_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_spool *s = open_sp(f->dirfd, 0, &e);
	char big[17] = { 0 };
	struct iovec rec = { .iov_base = big, .iov_len = sizeof(big) };

	assert_int_equal(fsafe_spool_append(s, &rec, 1, NULL), -EMSGSIZE);
	tu_assert_error(&e, -EMSGSIZE, EMSGSIZE,
	              "append (record above max_record)");

	rec.iov_len = 1;
	assert_int_equal(fsafe_spool_append(s, &rec, 1, NULL), 0);
	struct fsafe_sys t = fsafe__sys_default;
	t.fdatasync = tu_fail_eio;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_spool_append(s, &rec, 1, NULL);
	fsafe__sys_swap(old);
	assert_int_equal(r, -EIO);
	tu_assert_error(&e, -EIO, EIO, "fdatasync");

	/* Refused from then on, with the step that broke it. */
	memset(&e, 0, sizeof(e));
	assert_int_equal(fsafe_spool_append(s, &rec, 1, NULL), -EIO);
	tu_assert_error(&e, -EIO, EIO, "fdatasync");
	fsafe_spool_close(s);

	s = open_sp(f->dirfd, FSAFE_SPOOL_RDONLY, &e);
	assert_int_equal(fsafe_spool_append(s, &rec, 1, NULL), -EBADF);
	tu_assert_error(&e, -EBADF, EBADF, "append (read-only)");
	assert_int_equal(fsafe_spool_ack(s, 1), -EBADF);
	tu_assert_error(&e, -EBADF, EBADF, "ack (read-only)");
	fsafe_spool_close(s);
}

static void ack_fills_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_spool *s = open_sp(f->dirfd, 0, &e);
	struct iovec rec = { .iov_base = "x", .iov_len = 1 };

	assert_int_equal(fsafe_spool_append(s, &rec, 1, NULL), 0);
	struct fsafe_sys t = fsafe__sys_default;
	t.fsync = fsync_dirs_eio;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_spool_ack(s, 1);
	fsafe__sys_swap(old);
	/* The cursor was published, its directory not synced: the writer's
	   own detail. */
	assert_int_equal(r, FSAFE_ENOTDURABLE);
	assert_int_equal(e.code, FSAFE_ENOTDURABLE);
	assert_int_equal(e.sys_errno, EIO);
	assert_string_equal(e.step, "fsync directory");
	assert_true(e.published);

	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	st.size = 1;
	assert_int_equal(fsafe_spool_stat(s, &st), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "stat (size)");
	fsafe_spool_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(bad_sizes_are_named,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(append_fills_error,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(ack_fills_error, tu_fx_setup,
		                                tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
