/*
 * The spool's API: append, read, ack, stat, rollover, limits, the
 * one-process lock, group commit across threads, a reader that follows
 * appends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "spoolutil.h"
#include "testutil.h"

/* The fixture every spool test shares (spoolutil.c). */
#define fx su_fx
#define setup su_fx_setup
#define teardown su_fx_teardown

static void test_append_read_ack(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	fsafe_spool *s = su_open(f->fd, "sp", 0, 0);

	assert_int_equal(su_stat(s).next_seq, 1);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 0);
	assert_int_equal(su_append(s, 1, 100, 10), 0);
	assert_int_equal(su_read_all(s, 1, &a, &b), 100);
	assert_true(a == 1 && b == 100);
	assert_int_equal(su_read_all(s, 57, &a, &b), 44);
	assert_int_equal(a, 57);
	assert_int_equal(fsafe_spool_ack(s, 40), 0);
	assert_int_equal(su_stat(s).cursor, 41);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 60);
	assert_int_equal(a, 41);
	/* An ack behind the cursor changes nothing. */
	assert_int_equal(fsafe_spool_ack(s, 3), 0);
	assert_int_equal(su_stat(s).cursor, 41);
	fsafe_spool_close(s);

	s = su_open(f->fd, "sp", 0, 0);
	struct fsafe_spool_stat st = su_stat(s);
	assert_int_equal(st.cursor, 41);
	assert_int_equal(st.next_seq, 101);
	assert_int_equal(st.quarantined + st.truncated, 0);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 60);
	/* An ack past the end is clamped to the last record. */
	assert_int_equal(fsafe_spool_ack(s, 1000), 0);
	assert_int_equal(su_stat(s).cursor, 101);
	assert_int_equal(su_append(s, 101, 5, 5), 0);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 5);
	assert_int_equal(a, 101);
	fsafe_spool_close(s);
}

static void test_rollover_and_drop(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	fsafe_spool *s = su_open(f->fd, "sp", 4096, 300);

	assert_int_equal(su_append(s, 1, 500, 7), 0);
	int segs = su_count_segments(f->sp);
	assert_true(segs > 20);
	assert_int_equal(su_stat(s).segments, (uint64_t)segs);
	assert_int_equal(su_read_all(s, 1, &a, &b), 500);
	assert_int_equal(fsafe_spool_ack(s, 400), 0);
	int left = su_count_segments(f->sp);
	assert_true(left < segs / 2 && left >= 1);
	assert_int_equal(su_stat(s).dropped, (uint64_t)(segs - left));
	/* From 1: the oldest record kept, never past the cursor. */
	uint64_t n = su_read_all(s, 1, &a, &b);
	assert_true(a > 1 && a <= 401 && b == 500 && n == 500 - a + 1);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b),
	                 100);
	fsafe_spool_close(s);
	s = su_open(f->fd, "sp", 4096, 300);
	assert_int_equal(su_count_segments(f->sp), left);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b),
	                 100);
	/* A batch larger than a segment spans several. */
	assert_int_equal(su_append(s, 501, 200, 200), 0);
	assert_int_equal(su_read_all(s, 401, &a, &b), 300);
	fsafe_spool_close(s);
}

static void test_limits(void **state)
{
	struct fx *f = *state;
	static char big[1001];
	struct iovec v[2] = { { big, 1000 }, { big, 1001 } };
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s = su_open(f->fd, "sp", 0, 1000), *t = NULL;
	uint64_t first;

	assert_int_equal(fsafe_spool_append(s, v, 2, &first), -EMSGSIZE);
	assert_int_equal(su_stat(s).next_seq, 1); /* nothing appended */
	assert_int_equal(fsafe_spool_append(s, v, 1, &first), 0);
	v[0].iov_len = 0; /* an empty record is a record */
	assert_int_equal(fsafe_spool_append(s, v, 1, &first), 0);
	assert_int_equal(first, 2);
	assert_int_equal(fsafe_spool_append(s, v, 0, &first), 0);
	assert_int_equal(first, 3);
	/* A second handle shares the spool: its numbers follow on. */
	assert_int_equal(fsafe_spool_open(f->fd, "sp", NULL, &t), 0);
	assert_int_equal(fsafe_spool_append(t, v, 1, &first), 0);
	assert_int_equal(first, 3);
	assert_int_equal(fsafe_spool_append(s, v, 1, &first), 0);
	assert_int_equal(first, 4);
	fsafe_spool_close(t);
	t = NULL;
	o.flags = 1u << 20;
	assert_int_equal(fsafe_spool_open(f->fd, "x", &o, &t), -EINVAL);
	assert_int_equal(fsafe_spool_open(f->fd, "missing", NULL, &t),
	                 -ENOENT);
	assert_int_equal(fsafe_spool_open(f->fd, "", NULL, &t), -EINVAL);
	fsafe_spool_close(s);
	/* size 0 means the first layout. */
	o = (struct fsafe_spool_opts){ .size = 0 };
	assert_int_equal(fsafe_spool_open(f->fd, "sp", &o, &t), 0);
	struct fsafe_spool_stat st = { .size = 0 };
	assert_int_equal(fsafe_spool_stat(t, &st), 0);
	assert_int_equal(st.next_seq, 5);
	fsafe_spool_close(t);
}

/* ---- group commit ---------------------------------------------------------- */

#define THREADS 8
#define PER_THREAD 100

struct worker {
	fsafe_spool *s;
	int id;
	int err;
};

static void *appender(void *arg)
{
	struct worker *w = arg;
	char buf[32];

	for (int k = 0; k < PER_THREAD && !w->err; k++) {
		struct iovec v = { buf, (size_t)snprintf(buf, sizeof(buf),
		                                        "%d:%d", w->id, k) };
		w->err = fsafe_spool_append(w->s, &v, 1, NULL);
	}
	return NULL;
}

static int count_syncs(void)
{
	int n = 0;

	for (int i = 1; i <= fault_calls(); i++)
		n += strcmp(fault_call_name(i), "fdatasync") == 0;
	return n;
}

static void test_group_commit(void **state)
{
	struct fx *f = *state;
	pthread_t th[THREADS];
	struct worker w[THREADS];
	int next[THREADS] = { 0 };
	fsafe_spool *s = su_open(f->fd, "sp", 0, 0);
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq;

	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ s, i, 0 };
		pthread_create(&th[i], NULL, appender, &w[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].err, 0);
	}
	int syncs = count_syncs();
	fault_remove();
	printf("%d appends, %d fdatasyncs\n", THREADS * PER_THREAD, syncs);
	/* Not a timing claim: only that some appends shared a sync. */
	assert_true(syncs < THREADS * PER_THREAD);
	assert_int_equal(fsafe_spool_reader_open(s, 1, &rd), 0);
	int n = 0;
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		int id, k;
		char buf[32];
		memcpy(buf, d, len);
		buf[len] = 0;
		assert_int_equal(sscanf(buf, "%d:%d", &id, &k), 2);
		assert_int_equal(k, next[id]++); /* each thread's in order */
		n++;
	}
	assert_int_equal(n, THREADS * PER_THREAD);
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
}

/* A reader at the end sees what is appended later, across rollovers. */
static void test_reader_follows(void **state)
{
	struct fx *f = *state;
	fsafe_spool *s = su_open(f->fd, "sp", 2048, 300);
	fsafe_spool_reader *rd;
	unsigned char want[300];
	const void *d;
	size_t len;
	uint64_t seq, expect = 1;

	assert_int_equal(fsafe_spool_reader_open(s, 1, &rd), 0);
	assert_int_equal(fsafe_spool_next(rd, &d, &len, &seq), 0);
	for (int round = 0; round < 20; round++) {
		assert_int_equal(su_append(s, expect, 9, 3), 0);
		for (int i = 0; i < 9; i++) {
			assert_int_equal(fsafe_spool_next(rd, &d, &len, &seq), 1);
			assert_int_equal(seq, expect);
			assert_int_equal(len, su_record(seq, want));
			assert_memory_equal(d, want, len);
			expect++;
		}
		assert_int_equal(fsafe_spool_next(rd, &d, &len, &seq), 0);
	}
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
}

static void test_no_fd_leak(void **state)
{
	struct fx *f = *state;
	int before = fault_open_fds();
	uint64_t a, b;

	for (int i = 0; i < 3; i++) {
		fsafe_spool *s = su_open(f->fd, "sp", 1024, 300);
		assert_int_equal(su_append(s, 1 + 50 * (uint64_t)i, 50, 4), 0);
		su_read_all(s, 1, &a, &b);
		assert_int_equal(fsafe_spool_ack(s, 20 + 50 * (uint64_t)i), 0);
		fsafe_spool_close(s);
	}
	assert_int_equal(fault_open_fds(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_append_read_ack, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_rollover_and_drop, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_commit, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_reader_follows, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_no_fd_leak, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
