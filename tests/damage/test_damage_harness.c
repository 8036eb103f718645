/*
 * The damage harness itself: a case does what its name says, and a
 * command that hangs is reported as a hang, not waited for.
 */
#define _GNU_SOURCE
#include <errno.h>
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

#include "damage.h"
#include "testutil.h"

static void a_command_that_blocks_is_killed_and_reported(void **state)
{
	struct tu_fx *fx = *state;
	char fifo[PATH_MAX];
	char *out = NULL, *err = NULL;

	snprintf(fifo, sizeof(fifo), "%s/fifo", fx->dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	/* cat blocks in open(2) on a FIFO nobody writes to. */
	char *argv[] = { "/bin/cat", fifo, NULL };
	assert_int_equal(dmg_run(300, argv, &out, &err), -ETIMEDOUT);
	free(out);
	free(err);

	char *echo[] = { "/bin/sh", "-c", "echo out; echo err >&2; exit 3",
		         NULL };
	assert_int_equal(dmg_run(5000, echo, &out, &err), 3);
	assert_string_equal(out, "out\n");
	assert_string_equal(err, "err\n");
	free(out);
	free(err);
}

static int spin(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static int seven(void *arg)
{
	return *(int *)arg;
}

static void a_function_that_hangs_is_killed_and_reported(void **state)
{
	int v = 7;

	(void)state;
	assert_int_equal(dmg_call(200, spin, NULL), -ETIMEDOUT);
	assert_int_equal(dmg_call(5000, seven, &v), 7);
}

static void cases_cover_every_class_and_apply(void **state)
{
	struct tu_fx *fx = *state;
	char buf[2048], store[PATH_MAX - 16], outside[PATH_MAX], name[512];
	struct dmg_case *cases = NULL;
	size_t n = 0;
	bool seen[DMG_KINDS] = { false };
	const off_t bounds[] = { 100, 300 };

	snprintf(store, sizeof(store), "%s/store", fx->dir);
	snprintf(outside, sizeof(outside), "%s/outside", fx->dir);
	assert_int_equal(mkdir(store, 0755), 0);
	assert_int_equal(mkdir(outside, 0755), 0);
	memset(buf, 'a', sizeof(buf));
	tu_put(store, "data", buf, sizeof(buf));
	tu_put(store, "other", "x", 1);

	char **list = dmg_artifacts(store);
	assert_string_equal(list[0], "data");
	assert_string_equal(list[1], "other");
	assert_null(list[2]);
	dmg_free_list(list);

	dmg_cases_for(store, "data", bounds, 2, "other", &cases, &n);
	dmg_add(&cases, &n, DMG_DUPLICATE, "data", 0, "copy");
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		char path[PATH_MAX + 8];

		seen[cases[i].kind] = true;
		tu_put(store, "data", buf, sizeof(buf));
		snprintf(path, sizeof(path), "%s/copy", store);
		unlink(path);
		assert_int_equal(dmg_apply(store, &cases[i], outside), 0);
		snprintf(path, sizeof(path), "%s/data", store);
		int r = lstat(path, &st);
		switch (cases[i].kind) {
		case DMG_DELETE:
			assert_int_equal(r, -1);
			break;
		case DMG_TRUNCATE:
			assert_int_equal(st.st_size, cases[i].off);
			break;
		case DMG_FLIP:
		case DMG_ZERO8:
			assert_false(tu_equals(store, "data", buf,
			                       sizeof(buf)));
			break;
		case DMG_FIFO:
			assert_true(S_ISFIFO(st.st_mode));
			break;
		case DMG_SOCKET:
			assert_true(S_ISSOCK(st.st_mode));
			break;
		case DMG_DIR:
			assert_true(S_ISDIR(st.st_mode));
			rmdir(path);
			break;
		case DMG_SYMLINK_IN:
		case DMG_SYMLINK_OUT:
		case DMG_SYMLINK_DANGLING:
			assert_true(S_ISLNK(st.st_mode));
			break;
		case DMG_DUPLICATE:
			assert_true(tu_equals(store, "copy", buf, sizeof(buf)));
			break;
		default:
			fail_msg("%s", dmg_case_name(&cases[i], name,
			                             sizeof(name)));
		}
		if (r == 0 && !S_ISDIR(st.st_mode))
			unlink(path);
	}
	for (int k = DMG_DELETE; k <= DMG_SYMLINK_DANGLING; k++)
		assert_true(seen[k]);
	/* Truncation at both bounds and between them, flips every 512 B. */
	size_t trunc = 0, flips = 0;
	for (size_t i = 0; i < n; i++) {
		trunc += cases[i].kind == DMG_TRUNCATE;
		flips += cases[i].kind == DMG_FLIP;
	}
	assert_int_equal(trunc, 6); /* 0, 50, 100, 200, 300, 1174 */
	assert_int_equal(flips, 4); /* 2048 / 512 */
	free(cases);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			a_command_that_blocks_is_killed_and_reported,
			tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test(a_function_that_hangs_is_killed_and_reported),
		cmocka_unit_test_setup_teardown(
			cases_cover_every_class_and_apply, tu_fx_setup,
			tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
