/*
 * Error detail through the inbox's one door (fsafe.h, "Error detail"):
 * the open fills fsafe_inbox_opts.error when it fails and keeps it, and
 * every failing call on the inbox or a consumer of it fills it with the
 * step and errno; a successful call leaves it alone. And the time rule of
 * fsafe_inbox_wait: 0 looks once and does not wait, FSAFE_FOREVER waits.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe/inbox.h"
#include "sys.h"
#include "testutil.h"
#include "util.h"

static fsafe_inbox *open_ib(int dirfd, struct fsafe_error *e, unsigned flags)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;

	o.flags = FSAFE_INBOX_CREATE | flags;
	o.error = e;
	o.max_message = 100;
	assert_int_equal(fsafe_inbox_open(dirfd, "ib", &o, &ib), 0);
	return ib;
}

static void open_fills_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	struct fsafe_error e = { 0 };
	fsafe_inbox *ib;

	o.error = &e;
	assert_int_equal(fsafe_inbox_open(f->dirfd, "missing", &o, &ib),
	                 -ENOENT);
	assert_null(ib);
	tu_assert_error(&e, -ENOENT, ENOENT, "open");

	o.flags = 1u << 20;
	assert_int_equal(fsafe_inbox_open(f->dirfd, "ib", &o, &ib), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "options (flags)");
}

static ssize_t pwritev2_eio(int fd, const struct iovec *iov, int n,
                            off_t off, int flags)
{
	(void)fd, (void)iov, (void)n, (void)off, (void)flags;
	errno = EIO;
	return -1;
}

static ssize_t pwritev2_refused(int fd, const struct iovec *iov, int n,
                                off_t off, int flags)
{
	(void)fd, (void)iov, (void)n, (void)off, (void)flags;
	errno = EOPNOTSUPP;
	return -1;
}

static void deliver_fills_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_inbox *ib = open_ib(f->dirfd, &e, 0);
	char big[101] = { 0 };

	assert_int_equal(fsafe_inbox_deliver(ib, big, sizeof(big), NULL),
	                 -EMSGSIZE);
	tu_assert_error(&e, -EMSGSIZE, EMSGSIZE, "deliver (above max_message)");

	/* A failed data sync: the writer's step, through the inbox's door;
	   the write that syncs itself fails as the write, and where the
	   kernel refuses that, the sync on its own as the sync. */
	struct fsafe_sys t = fsafe__sys_default;
	t.pwritev2 = pwritev2_eio;
	memset(&e, 0, sizeof(e));
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_inbox_deliver(ib, "m", 1, NULL);
	fsafe__sys_swap(old);
	assert_int_equal(r, -EIO);
	tu_assert_error(&e, -EIO, EIO, "write");

	t.pwritev2 = pwritev2_refused;
	t.fsync = t.fdatasync = tu_fail_eio;
	memset(&e, 0, sizeof(e));
	old = fsafe__sys_swap(&t);
	r = fsafe_inbox_deliver(ib, "m", 1, NULL);
	fsafe__sys_swap(old);
	assert_int_equal(r, -EIO);
	tu_assert_error(&e, -EIO, EIO, "fsync");

	/* Success leaves the detail alone. */
	assert_int_equal(fsafe_inbox_deliver(ib, "m", 1, NULL), 0);
	tu_assert_error(&e, -EIO, EIO, "fsync");
	fsafe_inbox_close(ib);
}

static void consumer_calls_fill_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	/* A filesystem that makes a rename durable whole (ext4, xfs). */
	fsafe__test_renames_whole = 1;
	fsafe_inbox *ib = open_ib(f->dirfd, &e, 0);
	fsafe__test_renames_whole = -1;
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;

	assert_int_equal(fsafe_inbox_consumer_open(ib, ".bad", &c), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "consumer name");
	assert_int_equal(fsafe_inbox_consumer_open(ib, NULL, &c), 0);

	assert_int_equal(fsafe_inbox_take(c, &m), -EAGAIN);
	tu_assert_error(&e, -EAGAIN, EAGAIN, "take (nothing to take)");

	assert_int_equal(fsafe_inbox_ack(c, "../x"), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "message id");

	/* A release whose sync fails has still put the message back. */
	assert_int_equal(fsafe_inbox_deliver(ib, "m", 1, NULL), 0);
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	struct fsafe_sys t = fsafe__sys_default;
	t.fsync = tu_fail_eio;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_inbox_release(c, fsafe_inbox_msg_id(m));
	fsafe__sys_swap(old);
	assert_int_equal(r, -EIO);
	tu_assert_error(&e, -EIO, EIO, "return to new/");
	fsafe_inbox_msg_free(m);
	assert_int_equal(fsafe_inbox_wait(c, 0), 0); /* the message is back */

	/* The ack's one sync is of the claim directory, after the unlink:
	   the claim's sync already made new/ forget the message. */
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	old = fsafe__sys_swap(&t);
	r = fsafe_inbox_ack(c, fsafe_inbox_msg_id(m));
	fsafe__sys_swap(old);
	assert_int_equal(r, -EIO);
	tu_assert_error(&e, -EIO, EIO, "fsync claim directory");
	fsafe_inbox_msg_free(m);

	assert_int_equal(fsafe_inbox_consumer_close(c), 0);
	fsafe_inbox_close(ib);
}

/*
 * Where one directory's sync does not make a rename durable whole (btrfs,
 * ext2), the ack syncs new/ first, so that the claim's removal from new/
 * is durable before the message goes: then the claim directory.
 */
static void ack_syncs_new_where_renames_split(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;

	fsafe__test_renames_whole = 0;
	fsafe_inbox *ib = open_ib(f->dirfd, &e, 0);
	fsafe__test_renames_whole = -1;
	assert_int_equal(fsafe_inbox_consumer_open(ib, NULL, &c), 0);
	assert_int_equal(fsafe_inbox_deliver(ib, "m", 1, NULL), 0);
	assert_int_equal(fsafe_inbox_deliver(ib, "n", 1, NULL), 0);

	/* The first sync fails: it is new/'s, and the message stays. */
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	struct fsafe_sys t = fsafe__sys_default;
	t.fsync = tu_fail_eio;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe_inbox_ack(c, fsafe_inbox_msg_id(m));
	fsafe__sys_swap(old);
	assert_int_equal(r, -EIO);
	tu_assert_error(&e, -EIO, EIO, "fsync new/");
	assert_int_equal(fsafe_inbox_ack(c, fsafe_inbox_msg_id(m)), 0);
	fsafe_inbox_msg_free(m);

	/* Two syncs: new/, then the claim directory after the unlink. */
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	r = fsafe_inbox_ack(c, fsafe_inbox_msg_id(m));
	int syncs = fault_calls_named("fsync");
	int unlink = fault_first_call_named("unlinkat");
	int first = fault_first_call_named("fsync");
	fault_remove();
	assert_int_equal(r, 0);
	assert_int_equal(syncs, 2);
	assert_true(first < unlink);
	fsafe_inbox_msg_free(m);

	assert_int_equal(fsafe_inbox_consumer_close(c), 0);
	fsafe_inbox_close(ib);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wait_zero_does_not_wait(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_inbox *ib = open_ib(f->dirfd, &e, 0);
	fsafe_inbox_consumer *c;

	assert_int_equal(fsafe_inbox_consumer_open(ib, NULL, &c), 0);
	/* Were 0 "forever", this would hang: the alarm ends it. */
	alarm(10);
	int64_t t0 = mono_ms();
	assert_int_equal(fsafe_inbox_wait(c, 0), -ETIMEDOUT);
	assert_true(mono_ms() - t0 < 1000);
	tu_assert_error(&e, -ETIMEDOUT, ETIMEDOUT, "wait (timed out)");

	t0 = mono_ms();
	assert_int_equal(fsafe_inbox_wait(c, 50), -ETIMEDOUT);
	assert_true(mono_ms() - t0 >= 50);

	assert_int_equal(fsafe_inbox_deliver(ib, "m", 1, NULL), 0);
	assert_int_equal(fsafe_inbox_wait(c, FSAFE_FOREVER), 0);
	assert_int_equal(fsafe_inbox_wait(c, 0), 0);
	alarm(0);
	assert_int_equal(fsafe_inbox_consumer_close(c), 0);
	fsafe_inbox_close(ib);
}

static void recover_fills_error(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e = { 0 };
	fsafe_inbox *ib = open_ib(f->dirfd, &e, 0);
	struct fsafe_inbox_recovery rep = FSAFE_INBOX_RECOVERY_INIT;

	rep.size = sizeof(size_t);
	assert_int_equal(fsafe_inbox_recover(ib, 0, &rep), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "recovery (size)");
	fsafe_inbox_close(ib);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(open_fills_error, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(deliver_fills_error,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(consumer_calls_fill_error,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			ack_syncs_new_where_renames_split, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(wait_zero_does_not_wait,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(recover_fills_error,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
