/*
 * The holder's flock guard outweighs its record: a record that names a
 * dead process, on a file someone holds a flock on, is reported alive
 * (a record rewritten by hand, or a pid that looks dead from a view of
 * /proc that is not the holder's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmocka.h>

#include "lockutil.h"
#include "testutil.h"

static void guard_held_means_alive(void **state)
{
	(void)state;
	char *dir = tu_mkscratch(), path[4096];
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	struct fsafe_lock_owner dead = lu_dead_owner();
	int dirfd = lu_open_dir(dir);

	lu_forge(dir, "app.lock", &dead);
	assert_int_equal(fsafe_lock_inspect(dirfd, "app.lock", &o), 0);
	assert_int_equal(o.liveness, FSAFE_OWNER_DEAD);

	/* Another open file description holds the guard. */
	snprintf(path, sizeof(path), "%s/app.lock", dir);
	int held = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(held >= 0);
	assert_int_equal(flock(held, LOCK_SH | LOCK_NB), 0);
	assert_int_equal(fsafe_lock_inspect(dirfd, "app.lock", &o), 0);
	assert_int_equal(o.liveness, FSAFE_OWNER_ALIVE);
	close(held);

	close(dirfd);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(guard_held_means_alive),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
