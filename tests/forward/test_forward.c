/*
 * The forwarder over a fake sink: every record delivered once and in
 * order, the cursor moved only past what the sink confirmed, bounded
 * batches, retries with backoff, giving up, cancel; a sink that fails at
 * each of its calls; errors and kills at each of the forwarder's own
 * system calls (its cursor moves). And the spool's id.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakesink.h"
#include "fault.h"
#include "fsafe/forward.h"
#include "testutil.h"

static fsafe_spool *sp_open(struct tu_fx *f, unsigned flags)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.flags = FSAFE_SPOOL_CREATE | flags;
	o.segment_size = 4096; /* acks delete segments too */
	o.max_record = 300;
	assert_int_equal(fsafe_spool_open(f->dirfd, "sp", &o, &s), 0);
	return s;
}

static uint64_t cursor_of(fsafe_spool *s)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;

	assert_int_equal(fsafe_spool_stat(s, &st), 0);
	return st.cursor;
}

static fsafe_forward *fw_open(fsafe_spool *s, struct fakesink *k,
                              struct fsafe_forward_opts *o)
{
	struct fsafe_forward_sink sink = fs_sink(k);
	fsafe_forward *fw;

	assert_int_equal(fsafe_forward_open(s, &sink, o, &fw), 0);
	return fw;
}

static void test_spool_id(void **state)
{
	struct tu_fx *f = *state;
	char a[33], b[33];
	fsafe_spool *s = sp_open(f, 0);

	assert_int_equal(fsafe_spool_id(s, a), 0);
	assert_int_equal(strlen(a), 32);
	assert_int_equal(strspn(a, "0123456789abcdef"), 32);
	fsafe_spool_close(s);
	s = sp_open(f, 0);
	assert_int_equal(fsafe_spool_id(s, b), 0);
	assert_string_equal(a, b);
	fsafe_spool_close(s);

	/* A spool made before ids: read-only it has none, the first open
	   for writing makes one that lasts. */
	char path[4200];
	snprintf(path, sizeof(path), "%s/sp", f->dir);
	assert_int_equal(unlinkat(f->dirfd, "sp/id", 0), 0);
	s = sp_open(f, FSAFE_SPOOL_RDONLY);
	assert_int_equal(fsafe_spool_id(s, b), -ENOENT);
	fsafe_spool_close(s);
	s = sp_open(f, 0);
	assert_int_equal(fsafe_spool_id(s, b), 0);
	assert_string_not_equal(a, b);
	fsafe_spool_close(s);
	size_t len;
	char *got = tu_get(path, "id", &len);
	assert_int_equal(len, 33);
	assert_memory_equal(got, b, 32);
	free(got);

	/* A damaged id is kept as it is; the spool opens all the same. */
	tu_put(path, "id", "not an id\n", 10);
	s = sp_open(f, 0);
	assert_int_equal(fsafe_spool_id(s, b), -EBADMSG);
	fsafe_spool_close(s);
	assert_true(tu_equals(path, "id", "not an id\n", 10));
}

static void test_forward_all(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	fsafe_spool *s = sp_open(f, 0);
	char id[33];
	unsigned char b[300];
	uint64_t bytes = 0;

	fs_append(s, 1, 1000);
	for (uint64_t q = 1; q <= 1000; q++)
		bytes += fs_record(q, b);
	o.flags = FSAFE_FORWARD_ONCE;
	o.batch = 64;
	o.max_retry_ms = 1234;
	fsafe_forward *fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_stat(fw, &st), 0);
	assert_int_equal(st.lag, 1000);
	assert_int_equal(fsafe_forward_run(fw, NULL), 0);
	fs_assert_all(k, 1000);
	assert_int_equal(fsafe_forward_stat(fw, &st), 0);
	assert_int_equal(st.records, 1000);
	assert_int_equal(st.bytes, bytes);
	assert_int_equal(st.batches, (1000 + 63) / 64);
	assert_int_equal(st.retries, 0);
	assert_int_equal(st.lag, 0);
	assert_int_equal(st.cursor, 1001);
	assert_int_equal(k->max_batch, 64);
	assert_int_equal(k->max_retry_ms, 1234);
	assert_int_equal(fsafe_spool_id(s, id), 0);
	assert_string_equal(k->id, id);
	fsafe_forward_close(fw);
	fsafe_spool_close(s);
	s = sp_open(f, 0);
	assert_int_equal(cursor_of(s), 1001);
	fsafe_spool_close(s);
	fs_free(k);
}

/* A batch never holds more than batch_bytes, except one longer record
   alone; a record that does not fit starts the next batch. */
static void test_batch_bytes(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	fsafe_spool *s = sp_open(f, 0);

	fs_append(s, 1, 500);
	o.flags = FSAFE_FORWARD_ONCE;
	o.batch_bytes = 700;
	fsafe_forward *fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_run(fw, NULL), 0);
	fs_assert_all(k, 500);
	assert_true(k->max_batch_bytes <= 700);
	assert_true(k->max_batch > 1);
	fsafe_forward_close(fw);

	/* Shorter than one record: one record per batch. */
	memset(k, 0, sizeof(*k));
	fs_append(s, 501, 50);
	o.batch_bytes = 1;
	fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_run(fw, NULL), 0);
	assert_int_equal(k->max_batch, 1);
	assert_int_equal(k->calls, 50);
	fsafe_forward_close(fw);
	fsafe_spool_close(s);
	fs_free(k);
}

/* A forwarder whose first record is empty (fs_record(300) is) hands the
   sink a valid pointer for it, before its buffer has ever held a byte. */
static void test_first_record_empty(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	fsafe_spool *s = sp_open(f, 0);
	unsigned char b[300];

	assert_int_equal(fs_record(300, b), 0);
	fs_append(s, 1, 302);
	o.batch = 299;
	fsafe_forward *fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_step(fw, NULL), 299);
	fsafe_forward_close(fw);
	o.batch = 1;
	fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_step(fw, NULL), 1);
	assert_int_equal(cursor_of(s), 301);
	o.batch = 64;
	fsafe_forward_close(fw);
	fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_step(fw, NULL), 2);
	fs_assert_all(k, 302);
	fsafe_forward_close(fw);
	fsafe_spool_close(s);
	fs_free(k);
}

/* Appends between steps (the same thread) are forwarded too. */
static void test_appends_between_steps(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	fsafe_spool *s = sp_open(f, 0);

	o.batch = 7;
	fsafe_forward *fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_step(fw, NULL), 0);
	uint64_t next = 1;
	for (int round = 0; round < 50; round++) {
		uint64_t n = (uint64_t)(round * 13 % 20);
		fs_append(s, next, n);
		next += n;
		int r = fsafe_forward_step(fw, NULL);
		assert_true(r >= 0 && r <= 7);
	}
	while (fsafe_forward_step(fw, NULL) > 0)
		;
	fs_assert_all(k, next - 1);
	assert_int_equal(cursor_of(s), next);
	fsafe_forward_close(fw);
	fsafe_spool_close(s);
	fs_free(k);
}

static void test_retry_then_deliver(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	fsafe_spool *s = sp_open(f, 0);

	fs_append(s, 1, 100);
	k->fail_at = 2;
	k->fail_on = true;
	o.flags = FSAFE_FORWARD_ONCE;
	o.batch = 10;
	o.backoff_ms = 1;
	o.backoff_max_ms = 4;
	o.max_retry_ms = 10000;
	fsafe_forward *fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_step(fw, NULL), 10);
	/* Fails from call 2 on: let it succeed after some retries. */
	k->fail_on = false;
	k->fail_at = 2;
	assert_int_equal(fsafe_forward_run(fw, NULL), 0);
	fs_assert_all(k, 100);
	assert_int_equal(fsafe_forward_stat(fw, &st), 0);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.batches, 10);
	fsafe_forward_close(fw);
	fsafe_spool_close(s);
	fs_free(k);
}

/* A sink that stays down: the batch is given up after max_retry_ms, the
   cursor has not moved, and the next step sends that batch again. */
static void test_give_up_and_resume(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	struct fsafe_error e = { 0 };
	fsafe_spool *s = sp_open(f, 0);

	fs_append(s, 1, 30);
	k->fail_at = 1;
	k->fail_on = true;
	k->err = -ECONNREFUSED;
	o.batch = 10;
	o.backoff_ms = 2;
	o.backoff_max_ms = 8;
	o.max_retry_ms = 60;
	o.error = &e;
	fsafe_forward *fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_step(fw, NULL), -ECONNREFUSED);
	tu_assert_error(&e, -ECONNREFUSED, ECONNREFUSED, "sink send");
	assert_true(k->calls >= 3);
	assert_int_equal(k->stored, 0);
	assert_int_equal(cursor_of(s), 1);
	assert_int_equal(fsafe_forward_stat(fw, &st), 0);
	assert_int_equal(st.retries, k->calls);
	assert_int_equal(st.lag, 30);
	k->fail_at = 0;
	assert_int_equal(fsafe_forward_step(fw, NULL), 10);
	assert_int_equal(fsafe_forward_step(fw, NULL), 10);
	assert_int_equal(fsafe_forward_step(fw, NULL), 10);
	fs_assert_all(k, 30);
	fsafe_forward_close(fw);
	fsafe_spool_close(s);
	fs_free(k);
}

static void test_cancel_and_refuse(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	fsafe_spool *s = sp_open(f, 0);
	fsafe_cancel *c;

	fs_append(s, 1, 30);
	assert_int_equal(fsafe_cancel_new(&c), 0);
	/* Cancelled while waiting out a failure: nothing acknowledged. */
	k->fail_at = 1;
	k->fail_on = true;
	k->cancel = c;
	o.backoff_ms = 1000;
	o.backoff_max_ms = 1000;
	fsafe_forward *fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_run(fw, c), -ECANCELED);
	assert_int_equal(cursor_of(s), 1);
	fsafe_forward_close(fw);
	/* Cancelled while idle on a drained spool. */
	memset(k, 0, sizeof(*k));
	fsafe_cancel_free(c);
	assert_int_equal(fsafe_cancel_new(&c), 0);
	k->cancel = c;
	fw = fw_open(s, k, &o);
	assert_int_equal(fsafe_forward_run(fw, c), -ECANCELED);
	fsafe_forward_close(fw);
	fsafe_cancel_free(c);

	/* The sink's start refuses: no forwarder. */
	struct fsafe_forward_sink sink = fs_sink(k);
	fsafe_forward *none = (fsafe_forward *)1;
	k->refuse = -ERANGE;
	assert_int_equal(fsafe_forward_open(s, &sink, NULL, &none), -ERANGE);
	assert_null(none);
	sink.send = NULL;
	assert_int_equal(fsafe_forward_open(s, &sink, NULL, &none), -EINVAL);
	fsafe_spool_close(s);
	fs_free(k);
}

/* Options that cannot work are refused, through `error` too. */
static void test_options(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_sink sink = fs_sink(k);
	struct fsafe_error e = { 0 };
	fsafe_spool *s = sp_open(f, 0);
	fsafe_forward *fw;
	struct {
		struct fsafe_forward_opts o;
		uint64_t later;
	} big = { .o = FSAFE_FORWARD_OPTS_INIT };

	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	o.error = &e;
	o.flags = 1u << 5;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "options (flags)");
	o.flags = 0;
	o.batch = (1u << 20) + 1;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL, "options (batch above 1048576)");
	o.batch = 0;
	o.backoff_ms = 10;
	o.backoff_max_ms = 5;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), -EINVAL);
	tu_assert_error(&e, -EINVAL, EINVAL,
	                "options (backoff_ms above backoff_max_ms)");
	o.backoff_max_ms = 10;
	o.size = FSAFE_FORWARD_OPTS_SIZE_V0 - 1;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), -EINVAL);
	big.o.size = sizeof(big);
	big.o.error = &e;
	big.later = 1;
	assert_int_equal(fsafe_forward_open(s, &sink, &big.o, &fw), -E2BIG);
	tu_assert_error(&e, -E2BIG, E2BIG, "options (size)");
	big.later = 0;
	assert_int_equal(fsafe_forward_open(s, &sink, &big.o, &fw), 0);
	struct fsafe_forward_stat st = { .size = FSAFE_FORWARD_STAT_SIZE_V0 - 1 };
	assert_int_equal(fsafe_forward_stat(fw, &st), -EINVAL);
	fsafe_forward_close(fw);
	fsafe_spool_close(s);
	fs_free(k);
}

/* The sink fails at its call N (each N in turn), once or (ack lost) after
   storing the batch: every record still arrives once, in order. */
static void test_sink_fails_at_every_call(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	fsafe_spool *s = sp_open(f, 0);
	uint64_t base = 1;

	o.flags = FSAFE_FORWARD_ONCE;
	o.batch = 8;
	o.backoff_ms = 1;
	o.backoff_max_ms = 1;
	int total = 100 / 8 + 1;
	for (int lost = 0; lost <= 1; lost++) {
		for (int at = 1; at <= total; at++) {
			fs_append(s, base, 100);
			memset(k, 0, sizeof(*k));
			k->fail_at = (uint64_t)at;
			k->store_then_fail = lost;
			fsafe_forward *fw = fw_open(s, k, &o);
			assert_int_equal(fsafe_forward_run(fw, NULL), 0);
			fsafe_forward_close(fw);
			assert_int_equal(k->calls, (uint64_t)total + 1);
			assert_int_equal(k->stored, 100);
			for (uint64_t i = 0; i < 100; i++)
				assert_int_equal(k->order[i], base + i);
			base += 100;
			assert_int_equal(cursor_of(s), base);
			assert_true(base + 100 < FS_MAX);
			if (base + 200 >= FS_MAX)
				break;
		}
	}
	fsafe_spool_close(s);
	fs_free(k);
}

/* ---- the forwarder's own system calls ------------------------------------ */

#define N_REC 120

static void fresh(struct tu_fx *f)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/sp", f->dir);
	tu_rmtree(path);
	fsafe_spool *s = sp_open(f, 0);
	fs_append(s, 1, N_REC);
	fsafe_spool_close(s);
}

/* Forward everything (ONCE); the result. The fault, if any, is installed
   after the spool is open, so it falls on the forwarder's calls. */
static int forward_once(struct tu_fx *f, struct fakesink *k,
                        const struct fault_plan *plan)
{
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_sink sink = fs_sink(k);
	fsafe_forward *fw;
	fsafe_spool *s = sp_open(f, 0);

	o.flags = FSAFE_FORWARD_ONCE;
	o.batch = 16;
	if (plan)
		fault_install(plan);
	int r = fsafe_forward_open(s, &sink, &o, &fw);
	if (r == 0) {
		r = fsafe_forward_run(fw, NULL);
		fsafe_forward_close(fw);
	}
	if (plan)
		fault_remove();
	fsafe_spool_close(s);
	return r;
}

/* Nothing the cursor has passed was left undelivered; then a clean run
   delivers the rest, every record once by name. */
static void judge(struct tu_fx *f, struct fakesink *k, const char *what)
{
	fsafe_spool *s = sp_open(f, 0);
	uint64_t cur = cursor_of(s);

	fsafe_spool_close(s);
	for (uint64_t q = 1; q < cur; q++)
		if (!k->copies[q])
			fail_msg("%s: cursor %llu passed undelivered %llu",
			         what, (unsigned long long)cur,
			         (unsigned long long)q);
	assert_int_equal(forward_once(f, k, NULL), 0);
	fs_assert_all(k, N_REC);
	s = sp_open(f, 0);
	assert_int_equal(cursor_of(s), N_REC + 1);
	fsafe_spool_close(s);
}

static int calls_of(struct tu_fx *f, struct fakesink *k)
{
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_sink sink = fs_sink(k);
	fsafe_forward *fw;

	fresh(f);
	memset(k, 0, sizeof(*k));
	fsafe_spool *s = sp_open(f, 0);
	o.flags = FSAFE_FORWARD_ONCE;
	o.batch = 16;
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), 0);
	assert_int_equal(fsafe_forward_run(fw, NULL), 0);
	fsafe_forward_close(fw);
	int n = fault_calls();
	fault_remove();
	fsafe_spool_close(s);
	assert_true(n > 20);
	return n;
}

static void test_kill_at_every_call(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	int total = calls_of(f, k), killed = 0;
	char what[160];

	for (int at = 1; at <= total; at++) {
		fresh(f);
		memset(k, 0, sizeof(*k));
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			forward_once(f, k, &(struct fault_plan){
			                           .at = at, .kind = FAULT_KILL });
			_exit(0);
		}
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		snprintf(what, sizeof(what), "killed before call %d (%s)", at,
		         fault_call_name(at));
		judge(f, k, what);
	}
	printf("killed at each of %d calls\n", total);
	assert_int_equal(killed, total);
	fs_free(k);
}

static void test_fail_at_every_call(void **state)
{
	struct tu_fx *f = *state;
	struct fakesink *k = fs_new();
	int total = calls_of(f, k), failed = 0;
	char what[160];

	for (int kind = 0; kind < 2; kind++) {
		for (int at = 1; at <= total; at++) {
			fresh(f);
			memset(k, 0, sizeof(*k));
			int r = forward_once(f, k, &(struct fault_plan){
				.at = at, .err = EIO,
				.kind = kind ? FAULT_PERSIST : FAULT_ERRNO });
			failed += r < 0;
			snprintf(what, sizeof(what), "EIO %s call %d: %d",
			         kind ? "from" : "at", at, r);
			judge(f, k, what);
		}
	}
	printf("EIO at or from each of %d calls: %d runs failed\n", total,
	       failed);
	assert_true(failed > 0);
	assert_int_equal(fault_open_fds(), ((struct tu_fx *)*state)->fds_before);
	fs_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_spool_id, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_forward_all, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_batch_bytes, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_first_record_empty,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_appends_between_steps,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_retry_then_deliver,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_give_up_and_resume,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_cancel_and_refuse,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_options, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_sink_fails_at_every_call,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_kill_at_every_call,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_fail_at_every_call,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
