/*
 * An ack whose cursor is published but whose directory sync fails: the
 * call says so (FSAFE_ENOTDURABLE) and deletes no segment, since after a
 * crash the old cursor may come back and those records are then still
 * owed. The crash tests judge only the final state of acks that returned
 * 0, so they do not see this.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

#include "spoolutil.h"
#include "sys.h"
#include "testutil.h"

/* fsync fails with EIO on directories only: the cursor file's data is
   synced, its directory entry is not. */
static int fsync_dirs_fail(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		errno = EIO;
		return -1;
	}
	return fsafe__sys_default.fsync(fd);
}

static void ack_not_durable_keeps_segments(void **state)
{
	struct su_fx *f = *state;
	uint64_t a, b;
	fsafe_spool *s = su_open(f->fd, "sp", 4096, 0);

	assert_int_equal(su_append(s, 1, 200, 10), 0);
	assert_int_equal(su_read_all(s, 1, &a, &b), 200);
	struct fsafe_spool_stat before = su_stat(s);
	assert_true(before.segments > 2);

	struct fsafe_sys t = fsafe__sys_default;
	t.fsync = fsync_dirs_fail;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_spool_ack(s, 150);
	fsafe__sys_swap(old);

	assert_int_equal(r, FSAFE_ENOTDURABLE);
	struct fsafe_spool_stat after = su_stat(s);
	assert_int_equal(after.segments, before.segments);
	assert_int_equal(after.dropped, 0);
	assert_int_equal(after.first_seq, 1);
	assert_int_equal(su_count_segments(f->sp), (int)before.segments);

	/* With the sync back, the same ack goes through and drops them. */
	assert_int_equal(fsafe_spool_ack(s, 150), 0);
	after = su_stat(s);
	assert_true(after.dropped > 0);
	assert_true(after.segments < before.segments);
	fsafe_spool_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(ack_not_durable_keeps_segments,
		                                su_fx_setup, su_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
