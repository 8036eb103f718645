/*
 * The portable walk's "..": a directory moved out of the root between
 * reaching it and opening its parent must not let the walk climb out.
 * The race tests swap a directory with a symlink inside the root; here
 * root/d/e moves to a sibling of the root just before the walk opens
 * "..", so without the check "d/e/../../x" would land beside the root.
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

/* The move to make before the first ".." opened (one at a time: the
   tests of this file run in order, on one thread). */
static char move_from[4096], move_to[4096];
static int moved;

static int openat_moving(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!moved && strcmp(path, "..") == 0) {
		moved = 1;
		if (rename(move_from, move_to) != 0)
			moved = -errno;
	}
	return fsafe__sys_default.openat(dirfd, path, flags, mode);
}

static void moved_out_before_dotdot(void **state)
{
	(void)state;
	char *top = tu_mkscratch(), p[4096];
	fsafe_root *root;

	snprintf(p, sizeof(p), "%s/root", top);
	assert_int_equal(mkdir(p, 0777), 0);
	snprintf(p, sizeof(p), "%s/root/d", top);
	assert_int_equal(mkdir(p, 0777), 0);
	snprintf(move_from, sizeof(move_from), "%s/root/d/e", top);
	assert_int_equal(mkdir(move_from, 0777), 0);
	snprintf(p, sizeof(p), "%s/out", top);
	assert_int_equal(mkdir(p, 0777), 0);
	snprintf(move_to, sizeof(move_to), "%s/out/e", top);
	snprintf(p, sizeof(p), "%s/root", top);
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;
	ro.flags = FSAFE_ROOT_NO_OPENAT2;
	assert_int_equal(fsafe_root_open(AT_FDCWD, p, &ro, &root), 0);

	struct fsafe_sys t = fsafe__sys_default;
	t.openat = openat_moving;
	moved = 0;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_root_write_file(root, "d/e/../../x", "esc", 3, NULL);
	fsafe__sys_swap(old);

	assert_int_equal(moved, 1); /* the walk did open ".." */
	/* Failing is right (e is gone from the root); landing beside the
	   root never is. */
	assert_int_equal(tu_count_entries(top), 2); /* root and out */
	assert_int_equal(tu_count_entries(move_to), 0);
	snprintf(p, sizeof(p), "%s/root", top);
	if (r == 0)
		assert_true(tu_equals(p, "x", "esc", 3));
	fsafe_root_close(root);
	tu_rmtree(top);
	free(top);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(moved_out_before_dotdot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
