/*
 * A data sync that fails for one item of a batch is that item's failure,
 * whichever backend reports it: the table's many-fd sync (io_uring where
 * there is one) or io_uring itself, whose per-fd results must reach the
 * caller.
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
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "syncmany.h"
#include "sys.h"
#include "testutil.h"

/* Every fd synced, but the second one's result is EIO. */
static int many_second_fails(struct fsafe__ring **keep, const int *fds,
                             size_t n, int *errs)
{
	(void)keep;
	for (size_t i = 0; i < n; i++)
		errs[i] = fsafe__sys_default.fdatasync(fds[i]) < 0 ? -errno : 0;
	if (n > 1)
		errs[1] = -EIO;
	return 0;
}

static void batch_item_sync_failure_is_reported(void **state)
{
	struct tu_fx *f = *state;
	fsafe_batch *b;

	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	assert_int_equal(fsafe_batch_add(b, f->dirfd, "a", "aa", 2, NULL), 0);
	assert_int_equal(fsafe_batch_add(b, f->dirfd, "b", "bb", 2, NULL), 1);

	struct fsafe_sys t = fsafe__sys_default;
	t.fdatasync_many = many_second_fails;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_batch_commit(b);
	fsafe__sys_swap(old);

	assert_int_equal(r, 1);
	assert_int_equal(fsafe_batch_result(b, 0), 0);
	assert_int_equal(fsafe_batch_result(b, 1), -EIO);
	assert_true(tu_equals(f->dir, "a", "aa", 2));
	/* Never published: a file whose data may be lost is not shown. */
	assert_null(tu_get(f->dir, "b", &(size_t){ 0 }));
	fsafe_batch_free(b);
}

/* io_uring's own per-fd results: a pipe cannot be synced (EINVAL). */
static void uring_reports_each_fd(void **state)
{
	(void)state;
	int p[2], errs[3] = { 1, 1, 1 };
	int fd = memfd_create("f", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int fds[3] = { fd, p[0], fd };
	if (fsafe__uring_fdatasync_many(NULL, fds, 3, errs) < 0) {
		int e = errno;
		close(fd), close(p[0]), close(p[1]);
		print_message("SKIP: no io_uring here (%s)\n", strerror(e));
		skip();
	}
	assert_int_equal(errs[0], 0);
	assert_int_equal(errs[1], -EINVAL);
	assert_int_equal(errs[2], 0);
	close(fd), close(p[0]), close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			batch_item_sync_failure_is_reported, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test(uring_reports_each_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
