/*
 * Error detail through the checkpoint's one door (fsafe.h, "Error
 * detail"): the open fills fsafe_checkpoint_opts.error when it fails (a
 * revision it refuses is named by the rule) and keeps it; every failing
 * call on the handle, a transaction or a stream fills it with the step
 * and errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe/checkpoint.h"
#include "sys.h"
#include "testutil.h"

static int try_open(int dirfd, unsigned flags, const char *revision,
                    struct fsafe_error *e, fsafe_checkpoint **out)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;

	o.flags = flags;
	o.revision = revision;
	o.error = e;
	return fsafe_checkpoint_open(dirfd, "cp", &o, out);
}

static void revision_rules_are_named(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_checkpoint *cp;

	assert_int_equal(try_open(f->dirfd, FSAFE_CHECKPOINT_CREATE, "v1\nv2",
	                          &e, &cp), -EINVAL);
	assert_null(cp);
	tu_assert_error(&e, -EINVAL, EINVAL, "revision (control character)");

	size_t n = 100 * 1024;
	char *big = malloc(n + 1);
	memset(big, 'v', n);
	big[n] = '\0';
	assert_int_equal(try_open(f->dirfd, FSAFE_CHECKPOINT_CREATE, big, &e,
	                          &cp), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "revision (too long)");
	/* The limit itself is taken. */
	big[FSAFE_CHECKPOINT_REVISION_MAX] = '\0';
	memset(&e, 0, sizeof(e));
	assert_int_equal(try_open(f->dirfd, FSAFE_CHECKPOINT_CREATE, big, &e,
	                          &cp), 0);
	assert_null(e.step);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(big);

	assert_int_equal(try_open(f->dirfd, 0, NULL, &e, &cp), 0);
	fsafe_checkpoint *other;
	assert_int_equal(try_open(f->dirfd, FSAFE_CHECKPOINT_NO_WAIT, NULL, &e,
	                          &other), -EWOULDBLOCK);
	tu_assert_error(&e, -EWOULDBLOCK, EWOULDBLOCK, "lock");
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

static void handle_calls_fill_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_checkpoint *cp, *ro;
	fsafe_checkpoint_tx *tx, *tx2;
	fsafe_checkpoint_snapshot *snap;
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;

	assert_int_equal(try_open(f->dirfd, FSAFE_CHECKPOINT_CREATE, NULL, &e,
	                          &cp), 0);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &snap), -ENOENT);
	tu_assert_error(&e, -ENOENT, ENOENT, "load (no checkpoint)");

	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx2), -EBUSY);
	tu_assert_error(&e, -EBUSY, EBUSY, "begin (a transaction is open)");
	assert_int_equal(fsafe_checkpoint_add(tx, "a/b", "x", 1), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "add (bad name)");
	assert_int_equal(fsafe_checkpoint_add(tx, "a", "x", 1), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", "x", 1), -EEXIST);
	tu_assert_error(&e, -EEXIST, EEXIST, "add (name added already)");

	/* The generation's directory sync fails (fsync; the files' data
	   syncs, fdatasync, pass): the batch's step. */
	struct fsafe_sys t = fsafe__sys_default;
	t.fsync = tu_fail_eio;
	memset(&e, 0, sizeof(e));
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_checkpoint_commit(tx, NULL);
	fsafe__sys_swap(old);
	assert_int_equal(r, -EIO);
	assert_int_equal(e.code, -EIO);
	assert_int_equal(e.sys_errno, EIO);
	assert_string_equal(e.step, "fsync directory");

	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", "x", 1), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
	lo.generation = 99;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &snap), -ENOENT);
	tu_assert_error(&e, -ENOENT, ENOENT, "load (no such generation)");
	lo.generation = 0;
	lo.flags = 1u << 20;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &snap), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "options (flags)");
	assert_int_equal(fsafe_checkpoint_close(cp), 0);

	/* A read-only handle's own door. */
	struct fsafe_error e2 = { 0 };
	assert_int_equal(try_open(f->dirfd, FSAFE_CHECKPOINT_READ_ONLY, NULL,
	                          &e2, &ro), 0);
	assert_int_equal(fsafe_checkpoint_begin(ro, &tx), -EROFS);
	tu_assert_error(&e2, -EROFS, EROFS, "begin (read-only)");
	assert_int_equal(fsafe_checkpoint_verify(ro, 7, NULL), -ENOENT);
	tu_assert_error(&e2, -ENOENT, ENOENT, "open generation");
	assert_int_equal(fsafe_checkpoint_close(ro), 0);
}

static void stream_fills_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_checkpoint *cp;
	fsafe_checkpoint_tx *tx;
	fsafe_checkpoint_stream *s;

	assert_int_equal(try_open(f->dirfd, FSAFE_CHECKPOINT_CREATE, NULL, &e,
	                          &cp), 0);
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add_stream(tx, "s", &s), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), -EBUSY);
	tu_assert_error(&e, -EBUSY, EBUSY, "commit (a stream is open)");
	fsafe_checkpoint_close(cp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(revision_rules_are_named,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(handle_calls_fill_error,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(stream_fills_error,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
