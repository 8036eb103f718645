/*
 * Appender processes and a reader process on one spool at the same time
 * (issue 22): each appender's batches take dense numbers, the reader gets
 * every record exactly once, in order, byte for byte, and acks as it goes.
 * Then the same with appenders and the reader SIGKILLed at random points
 * and started again: nothing whose append returned 0 is lost, nothing is
 * delivered again past an ack, a number never names two records, and
 * whatever the kills left is reported by check and mended by an open.
 *
 * Records are (producer, k): producer p's k-th record, its bytes derived
 * from both, so any mix-up of records shows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "spool.h"
#include "spoolutil.h"
#include "testutil.h"

#define PRODUCERS 4
#define PER_PRODUCER 600
#define TOTAL (PRODUCERS * PER_PRODUCER)
#define SEG 4096 /* small: rollovers and drops all along */
#define KILLS 20
#define DEADLINE 120.0 /* seconds: a hang fails, it never waits forever */

/* What every process saw, in memory shared across fork. */
struct shared {
	/* Per producer: records it tried (k below), and each record whose
	   append returned 0 (a killed try is neither). */
	uint64_t attempted[PRODUCERS];
	unsigned char durable[PRODUCERS][PER_PRODUCER];
	/* Per number: (p << 32 | k) + 1 of the record delivered under it, 0
	   if none yet. */
	uint64_t seen[TOTAL * 2 + 64];
	uint64_t acked;     /* the last ack that returned 0 */
	uint64_t delivered; /* records delivered (redeliveries too) */
	int violation;      /* a reader's finding, with its line */
	char why[160];
	int producers_done;
};

static struct shared *sh;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Producer p's record k: "p:k:" then a filler from both, 0..199 more. */
static size_t record(unsigned p, uint64_t k, unsigned char *buf)
{
	int n = snprintf((char *)buf, 32, "%u:%" PRIu64 ":", p, k);
	size_t extra = (p * 131 + k * 7) % 200;

	for (size_t i = 0; i < extra; i++)
		buf[(size_t)n + i] = (unsigned char)(p * 17 + k + i);
	return (size_t)n + extra;
}

static void violate(const char *fmt, uint64_t a, uint64_t b)
{
	if (!sh->violation) {
		snprintf(sh->why, sizeof(sh->why), fmt, a, b);
		sh->violation = 1;
	}
}

static fsafe_spool *open_spool(const struct su_fx *f)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s = NULL;

	o.flags = FSAFE_SPOOL_CREATE;
	o.segment_size = SEG;
	o.max_record = 512;
	return fsafe_spool_open(f->fd, "sp", &o, &s) == 0 ? s : NULL;
}

/* Append the rest of producer p's records in batches of 1..7. */
static void producer(const struct su_fx *f, unsigned p)
{
	static unsigned char bufs[8][300];
	struct iovec v[8];
	fsafe_spool *s = open_spool(f);

	if (!s)
		_exit(3);
	for (uint64_t k = sh->attempted[p]; k < PER_PRODUCER;) {
		size_t n = 1 + (k + p) % 7;
		if (n > PER_PRODUCER - k)
			n = PER_PRODUCER - k;
		for (size_t i = 0; i < n; i++)
			v[i] = (struct iovec){ bufs[i], record(p, k + i, bufs[i]) };
		sh->attempted[p] = k + n; /* before: a kill leaves it unknown */
		if (fsafe_spool_append(s, v, n, NULL) != 0)
			_exit(4);
		for (size_t i = 0; i < n; i++)
			sh->durable[p][k + i] = 1;
		k += n;
	}
	fsafe_spool_close(s);
	_exit(0);
}

/* One delivered record: the bytes are some producer's record, and a
   number delivered again carries the same one. */
static void judge_record(const void *d, size_t len, uint64_t seq)
{
	unsigned char want[300];
	unsigned p;
	uint64_t k;
	char head[32];

	memcpy(head, d, len < 31 ? len : 31);
	head[len < 31 ? len : 31] = 0;
	if (sscanf(head, "%u:%" SCNu64 ":", &p, &k) != 2 || p >= PRODUCERS ||
	    k >= PER_PRODUCER || record(p, k, want) != len ||
	    memcmp(want, d, len) != 0) {
		violate("record %" PRIu64 " is nobody's (%" PRIu64 " bytes)",
		        seq, len);
		return;
	}
	if (seq >= sizeof(sh->seen) / sizeof(sh->seen[0])) {
		violate("number %" PRIu64 " past every record (%" PRIu64 ")",
		        seq, (uint64_t)TOTAL);
		return;
	}
	uint64_t id = ((uint64_t)p << 32 | k) + 1;
	if (sh->seen[seq] && sh->seen[seq] != id)
		violate("number %" PRIu64 " named two records (%" PRIu64 ")",
		        seq, id);
	sh->seen[seq] = id;
}

/* Read from the cursor, acking every few records, until every producer
   is done and nothing more comes. A record at or below the last ack is
   a delivery past an ack. */
static void reader(const struct su_fx *f)
{
	fsafe_spool *s = open_spool(f);
	fsafe_spool_reader *r;
	const void *d;
	size_t len;
	uint64_t seq, expect = 0;

	if (!s || fsafe_spool_reader_open(s, FSAFE_SPOOL_FROM_CURSOR, &r) != 0)
		_exit(3);
	for (double end = now() + DEADLINE; now() < end;) {
		int done = sh->producers_done;
		int e = fsafe_spool_next(r, &d, &len, &seq);
		if (e < 0)
			_exit(5);
		if (e == 0) {
			if (done)
				break;
			/* Polling for more, not waiting out a race. */
			nanosleep(&(struct timespec){ 0, 200000 }, NULL);
			continue;
		}
		if (seq <= sh->acked)
			violate("record %" PRIu64 " delivered after ack %" PRIu64,
			        seq, sh->acked);
		if (expect && seq != expect)
			violate("record %" PRIu64 " where %" PRIu64 " was next",
			        seq, expect);
		expect = seq + 1;
		judge_record(d, len, seq);
		sh->delivered++;
		if (seq % 16 == 0 && fsafe_spool_ack(s, seq) == 0)
			sh->acked = seq;
	}
	if (expect && fsafe_spool_ack(s, expect - 1) == 0)
		sh->acked = expect - 1;
	fsafe_spool_reader_close(r);
	fsafe_spool_close(s);
	_exit(0);
}

static pid_t start(const struct su_fx *f, int who)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if (who < PRODUCERS)
			producer(f, (unsigned)who);
		reader(f);
	}
	return pid;
}

static int reap(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

/* Every record whose append returned 0 was delivered, under one number
   each; the numbers delivered are dense from 1. */
static void judge_all(void)
{
	static uint64_t where[PRODUCERS][PER_PRODUCER];
	uint64_t top = 0;

	memset(where, 0, sizeof(where));
	for (uint64_t seq = 1; seq < sizeof(sh->seen) / sizeof(sh->seen[0]);
	     seq++) {
		uint64_t id = sh->seen[seq];
		if (!id)
			continue;
		top = seq;
		unsigned p = (unsigned)((id - 1) >> 32);
		uint64_t k = (id - 1) & 0xffffffffu;
		if (where[p][k])
			fail_msg("record %u:%" PRIu64 " under %" PRIu64 " and %"
			         PRIu64, p, k, where[p][k], seq);
		where[p][k] = seq;
	}
	for (uint64_t seq = 1; seq <= top; seq++)
		if (!sh->seen[seq])
			fail_msg("number %" PRIu64 " never delivered (last %"
			         PRIu64 ")", seq, top);
	for (unsigned p = 0; p < PRODUCERS; p++)
		for (uint64_t k = 0; k < PER_PRODUCER; k++)
			if (sh->durable[p][k] && !where[p][k])
				fail_msg("record %u:%" PRIu64 " acknowledged, "
				         "never delivered", p, k);
}

static void run(struct su_fx *f, int kills)
{
	pid_t pid[PRODUCERS + 1];
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	printf("seed %u, %d kills\n", seed, kills);
	srand(seed);
	for (int i = 0; i <= PRODUCERS; i++)
		pid[i] = start(f, i);
	/* Kill one at a random point, start it again: the killed reader
	   goes on from the cursor, a killed producer after its last try. */
	for (int n = 0, tries = 0; n < kills && tries < 10 * kills; tries++) {
		struct timespec t = { 0, (rand() % 20000 + 100) * 1000L };
		nanosleep(&t, NULL);
		int who = rand() % (PRODUCERS + 1);
		if (pid[who] <= 0) /* a producer that finished: never kill(-1) */
			continue;
		kill(pid[who], SIGKILL);
		n++;
		int st = reap(pid[who]);
		if (!WIFSIGNALED(st))
			assert_int_equal(WEXITSTATUS(st), 0);
		pid[who] = who < PRODUCERS && !WIFSIGNALED(st)
		                   ? -1 /* it had finished */
		                   : start(f, who);
	}
	for (int i = 0; i < PRODUCERS; i++)
		if (pid[i] > 0)
			assert_int_equal(reap(pid[i]), 0);
	sh->producers_done = 1;
	int st = reap(pid[PRODUCERS]);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	if (sh->violation)
		fail_msg("%s", sh->why);
}

static void test_shared(void **state)
{
	struct su_fx *f = *state;

	memset(sh, 0, sizeof(*sh));
	run(f, 0);
	judge_all();
	/* Nothing killed: every try returned 0, each read exactly once. */
	for (unsigned p = 0; p < PRODUCERS; p++)
		for (uint64_t k = 0; k < PER_PRODUCER; k++)
			assert_true(sh->durable[p][k]);
	assert_int_equal(sh->delivered, TOTAL);
	assert_int_equal(sh->acked, TOTAL);
	assert_int_equal(fsafe_spool_check(f->fd, f->sp, NULL, NULL), 0);
}

static void test_shared_kills(void **state)
{
	struct su_fx *f = *state;

	memset(sh, 0, sizeof(*sh));
	run(f, KILLS);
	/* What the kills left (torn or abandoned tails) check reports, and
	   the reader that finished last already mended by opening. */
	int problems = fsafe_spool_check(f->fd, f->sp, NULL, NULL);
	assert_true(problems >= 0);
	fsafe_spool *s = open_spool(f);
	assert_non_null(s);
	fsafe_spool_close(s);
	assert_int_equal(fsafe_spool_check(f->fd, f->sp, NULL, NULL), 0);
	/* A last reader from the cursor: whatever is left after the last
	   ack (records of producers killed after their sync). */
	pid_t r = start(f, PRODUCERS);
	assert_int_equal(reap(r), 0);
	if (sh->violation)
		fail_msg("%s", sh->why);
	judge_all();
	printf("%" PRIu64 " delivered, last ack %" PRIu64 "\n", sh->delivered,
	       sh->acked);
}

/* ---- an appender killed at every call, a live one beside it ---------- */

/* Record k's bytes, at most 99 of them. */
static size_t small(uint64_t k, unsigned char *buf)
{
	return su_record(k, buf) % 100;
}

/* The segment size of the spool both handles share: 200 bytes (a batch
   of three rolls over), or 0, the default (64 MiB: every append lands
   in the zeros an appender reserves ahead of its tail). */
static uint64_t beside_segment;

/* Records 3-5 in one batch through a handle of its own. */
static void dying_appender(const struct su_fx *f)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	unsigned char b[3][300];
	struct iovec v[3];
	fsafe_spool *s;

	o.segment_size = beside_segment;
	o.max_record = 100;
	if (fsafe_spool_open(f->fd, "sp", &o, &s) != 0)
		return;
	for (int i = 0; i < 3; i++)
		v[i] = (struct iovec){ b[i], small(3 + (uint64_t)i, b[i]) };
	fsafe_spool_append(s, v, 3, NULL);
	fsafe_spool_close(s);
}

/*
 * What the live handle reads after the other died: 1-2, a prefix of the
 * dead one's 3-5 (those that reached the disk whole: a batch spanning a
 * rollover is durable up to it, as after a crash), then its own two
 * ("live0", "live1") right after.
 */
static void judge_beside(fsafe_spool *live, uint64_t own, const char *what)
{
	unsigned char want[300];
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq, expect = 1;

	if (own < 3 || own > 6)
		fail_msg("%s: the live append got number %" PRIu64, what, own);
	assert_int_equal(fsafe_spool_reader_open(live, 1, &rd), 0);
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		size_t n = seq < own ? small(seq, want)
		                     : (size_t)sprintf((char *)want, "live%d",
		                                       (int)(seq - own));
		if (seq != expect || len != n || memcmp(d, want, n) != 0)
			fail_msg("%s: record %" PRIu64 " is wrong (expected %"
			         PRIu64 ")", what, seq, expect);
		expect++;
	}
	fsafe_spool_reader_close(rd);
	if (expect != own + 2)
		fail_msg("%s: read up to %" PRIu64 ", the live handle "
		         "appended up to %" PRIu64, what, expect - 1, own + 1);
}

static void killed_beside_live(struct su_fx *f, uint64_t segment)
{
	int total = 0;
	char what[96];

	beside_segment = segment;
	for (int at = 1; at == 1 || at <= total; at++) {
		char cmd[4200];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->sp);
		assert_int_equal(system(cmd), 0);
		fsafe_spool *live = su_open(f->fd, "sp", segment, 100);
		unsigned char b[2][300];
		struct iovec old[2] = { { b[0], small(1, b[0]) },
		                        { b[1], small(2, b[1]) } };
		assert_int_equal(fsafe_spool_append(live, old, 2, NULL), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			fault_install(&(struct fault_plan){
				.at = total ? at : 0,
				.kind = total ? FAULT_KILL : FAULT_NONE });
			dying_appender(f);
			sh->delivered = (uint64_t)fault_calls();
			_exit(0);
		}
		int st = reap(pid);
		if (!total) { /* the first run counts the calls */
			assert_true(WIFEXITED(st) && sh->delivered > 0);
			total = (int)sh->delivered;
			at = 0;
			fsafe_spool_close(live);
			continue;
		}
		struct iovec v[2] = { { "live0", 5 }, { "live1", 5 } };
		uint64_t own = 0;
		snprintf(what, sizeof(what), "killed before call %d of %d", at,
		         total);
		if (fsafe_spool_append(live, v, 2, &own) != 0)
			fail_msg("%s: the live append failed", what);
		judge_beside(live, own, what);
		fsafe_spool_close(live);
		/* What the dead one left was taken care of: a fresh open
		   finds nothing to repair. */
		if (fsafe_spool_check(f->fd, f->sp, NULL, NULL) != 0)
			fail_msg("%s: check finds problems", what);
	}
	printf("segments of %" PRIu64 " bytes: killed at each of %d calls\n",
	       segment, total);
}

static void test_killed_beside_live(void **state)
{
	killed_beside_live(*state, 200);
	killed_beside_live(*state, 0);
}

int main(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_shared, su_fx_setup,
		                                su_fx_teardown),
		cmocka_unit_test_setup_teardown(test_shared_kills, su_fx_setup,
		                                su_fx_teardown),
		cmocka_unit_test_setup_teardown(test_killed_beside_live,
		                                su_fx_setup, su_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
