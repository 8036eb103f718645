/*
 * A stage replaced under its name between the sweep's open and its lock:
 * the sweep judged the old inode (old, unlocked) and must not remove the
 * new file that now has the name, a live writer's fresh stage.
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

#include "fsafe.h"
#include "sys.h"
#include "testutil.h"

#define STAGE ".fsafe-0123456789abcdef01234567.tmp"

static int swap_dirfd = -1, swapped;

/* Before the sweep's first lock: a new file takes the stage's name. */
static int lock_after_swap(int fd, int cmd, struct flock *fl)
{
	if (!swapped++) {
		int nfd = openat(swap_dirfd, "fresh",
		                 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(nfd >= 0);
		assert_int_equal(write(nfd, "fresh", 5), 5);
		close(nfd);
		assert_int_equal(renameat(swap_dirfd, "fresh", swap_dirfd,
		                          STAGE), 0);
	}
	return fsafe__sys_default.fcntl_lock(fd, cmd, fl);
}

static void replaced_stage_is_kept(void **state)
{
	struct tu_fx *f = *state;
	const struct timespec long_ago[2] = { { 1000000000, 0 },
	                                      { 1000000000, 0 } };
	fsafe_sweep_result *res = NULL;

	tu_put(f->dir, STAGE, "old", 3);
	assert_int_equal(utimensat(f->dirfd, STAGE, long_ago, 0), 0);

	struct fsafe_sys t = fsafe__sys_default;
	t.fcntl_lock = lock_after_swap;
	swap_dirfd = f->dirfd;
	swapped = 0;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_sweep(f->dirfd, ".", 60000, 0, NULL, &res);
	fsafe__sys_swap(old);
	fsafe_sweep_result_free(res);

	assert_true(swapped > 0); /* the sweep did lock the old stage */
	assert_int_equal(r, 0);
	assert_true(tu_equals(f->dir, STAGE, "fresh", 5));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(replaced_stage_is_kept,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
