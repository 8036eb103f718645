/*
 * Kill at every system call and fail at every system call, through the
 * library's table, over a workload that opens a spool (recovering damage
 * left before it), appends batches across segment rollovers and acks.
 *
 * After each, a fresh open must find: the records form the expected run
 * (consecutive numbers, each record's exact bytes, only the segment known
 * corrupt beforehand missing), every record whose append returned 0 is
 * there, nothing past what was attempted, an acked cursor kept, no middle
 * segment quarantined because of the crash, no staging file left, and a
 * second open with nothing left to repair.
 *
 * A SIGKILL keeps what the kernel already has: this is the process-crash
 * model. Power cuts are tests/power's (workloads_spool.c).
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
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "spool.h"
#include "spoolutil.h"
#include "testutil.h"

#define SEG 1024
#define BATCHES 6
#define PER_BATCH 3
#define OLD 20 /* records of the damaged variant before the workload */

/* What the workload saw return, in memory the killed child shares. */
struct progress {
	uint64_t durable;   /* last record whose append returned 0 */
	uint64_t attempted; /* last record any append was asked for */
	uint64_t acked;     /* last ack that returned 0 */
};

struct variant {
	const char *name;
	bool damaged; /* OLD records, a corrupt middle segment, torn tail */
};

struct fx {
	struct su_fx su;
	uint64_t gap_lo, gap_hi; /* the corrupt segment's records */
};

static fsafe_spool *try_open(int fd)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s = NULL;

	o.flags = FSAFE_SPOOL_CREATE;
	o.segment_size = SEG;
	o.max_record = 300;
	return fsafe_spool_open(fd, "sp", &o, &s) == 0 ? s : NULL;
}

static uint64_t next_of(fsafe_spool *s)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;

	fsafe_spool_stat(s, &st);
	return st.next_seq;
}

/*
 * The workload. On a failed call it does what a program would: closes,
 * opens again and carries on from the spool's next number (the content of
 * a number never changes, so redone records are the same bytes).
 */
static void workload(int fd, struct progress *p)
{
	fsafe_spool *s = NULL;
	int opens = 0;

	for (int b = 0; b < BATCHES; b++) {
		while (!s && opens++ < 4)
			s = try_open(fd);
		if (!s)
			return;
		uint64_t first = next_of(s);
		p->attempted = first + PER_BATCH - 1 > p->attempted
		                       ? first + PER_BATCH - 1
		                       : p->attempted;
		if (su_append(s, first, PER_BATCH, PER_BATCH) == 0) {
			p->durable = first + PER_BATCH - 1;
		} else {
			fsafe_spool_close(s);
			s = NULL;
			continue;
		}
		if (b == BATCHES / 2) {
			uint64_t a = p->durable - 4;
			if (fsafe_spool_ack(s, a) == 0)
				p->acked = a;
		}
	}
	fsafe_spool_close(s);
}

/* The damaged starting state: OLD records over several segments, one
   middle segment corrupt in its first record, a torn record at the end. */
static void make_damaged(struct fx *f)
{
	char name[FSAFE__SEG_NAME_LEN + 1], p[4200];
	fsafe_spool *s = try_open(f->su.fd);
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq, starts[16];
	int n = 0;

	assert_non_null(s);
	assert_int_equal(su_append(s, 1, OLD, 2), 0);
	assert_int_equal(fsafe_spool_reader_open(s, 1, &rd), 0);
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		fsafe__seg_name(name, seq);
		snprintf(p, sizeof(p), "%s/%s", f->su.sp, name);
		if (access(p, F_OK) == 0 && n < 16)
			starts[n++] = seq;
	}
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
	assert_true(n >= 4);
	f->gap_lo = starts[1];
	f->gap_hi = starts[1] + 1; /* only the damaged record */
	fsafe__seg_name(name, starts[1]);
	snprintf(p, sizeof(p), "%s/%s", f->su.sp, name);
	int sfd = open(p, O_RDWR);
	assert_int_equal(pwrite(sfd, "X", 1, FSAFE__SEG_HDR + 9), 1);
	close(sfd);
	fsafe__seg_name(name, starts[n - 1]);
	snprintf(p, sizeof(p), "%s/%s", f->su.sp, name);
	sfd = open(p, O_WRONLY | O_APPEND);
	assert_int_equal(write(sfd, "FSPR-torn", 9), 9);
	close(sfd);
}

static void fresh(struct fx *f, const struct variant *v)
{
	tu_rmtree(f->su.sp);
	f->gap_lo = f->gap_hi = 0;
	if (v->damaged)
		make_damaged(f);
}

static bool in_gap(const struct fx *f, uint64_t seq)
{
	return seq >= f->gap_lo && seq < f->gap_hi;
}

/* The judgement after a crash or failure; `what` names the case. */
static void judge(struct fx *f, const struct progress *p, const char *what)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	fsafe_spool *s = try_open(f->su.fd);
	fsafe_spool_reader *rd;
	unsigned char want[300];
	const void *d;
	size_t len;
	uint64_t seq, expect = 0, last = 0;

	if (!s)
		fail_msg("%s: the spool does not open", what);
	fsafe_spool_stat(s, &st);
	if (st.quarantined > (f->gap_hi ? 1u : 0u))
		fail_msg("%s: %llu segments quarantined", what,
		         (unsigned long long)st.quarantined);
	assert_int_equal(fsafe_spool_reader_open(s, 1, &rd), 0);
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		while (expect && in_gap(f, expect))
			expect++;
		if (expect && seq != expect)
			fail_msg("%s: record %llu where %llu was due", what,
			         (unsigned long long)seq,
			         (unsigned long long)expect);
		if (len != su_record(seq, want) || memcmp(d, want, len))
			fail_msg("%s: record %llu is not what was appended",
			         what, (unsigned long long)seq);
		if (!expect && seq > (st.cursor > 1 ? st.cursor : 1) &&
		    !in_gap(f, seq - 1))
			fail_msg("%s: reading starts at %llu, cursor %llu",
			         what, (unsigned long long)seq,
			         (unsigned long long)st.cursor);
		expect = seq + 1;
		last = seq;
	}
	fsafe_spool_reader_close(rd);
	uint64_t floor = p->durable > OLD || !f->gap_hi ? p->durable : OLD;
	if (last < floor)
		fail_msg("%s: last record %llu, but %llu was durable", what,
		         (unsigned long long)last, (unsigned long long)floor);
	if (p->attempted && last > p->attempted && last > OLD)
		fail_msg("%s: record %llu was never appended", what,
		         (unsigned long long)last);
	if (p->acked && st.cursor < p->acked + 1)
		fail_msg("%s: cursor %llu after ack of %llu", what,
		         (unsigned long long)st.cursor,
		         (unsigned long long)p->acked);
	fsafe_spool_close(s);
	if (tu_count_staging(f->su.sp))
		fail_msg("%s: staging files left", what);
	s = try_open(f->su.fd);
	assert_non_null(s);
	fsafe_spool_stat(s, &st);
	if (st.quarantined || st.truncated)
		fail_msg("%s: a second open still repaired something", what);
	fsafe_spool_close(s);
}

static int calls_of(struct fx *f, const struct variant *v)
{
	struct progress p = { 0 };

	fresh(f, v);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	workload(f->su.fd, &p);
	int n = fault_calls();
	fault_remove();
	judge(f, &p, "no fault");
	assert_true(p.durable >= (v->damaged ? OLD : 0) + BATCHES * PER_BATCH);
	return n;
}

static void kill_at_every_call(struct fx *f, const struct variant *v)
{
	struct progress *p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE,
	                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int total = calls_of(f, v), killed = 0;
	char what[160];

	for (int at = 1; at <= total; at++) {
		fresh(f, v);
		memset(p, 0, sizeof(*p));
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			fault_install(&(struct fault_plan){ .at = at,
			                                    .kind = FAULT_KILL });
			workload(f->su.fd, p);
			_exit(0);
		}
		int status;
		waitpid(pid, &status, 0);
		killed += WIFSIGNALED(status);
		snprintf(what, sizeof(what), "%s, killed before call %d",
		         v->name, at);
		judge(f, p, what);
	}
	printf("%s: killed at each of %d calls\n", v->name, total);
	assert_int_equal(killed, total);
	munmap(p, sizeof(*p));
}

static void fail_at_every_call(struct fx *f, const struct variant *v,
                               enum fault_kind kind)
{
	int total = calls_of(f, v), before = fault_open_fds();
	char what[160];

	for (int at = 1; at <= total; at++) {
		struct progress p = { 0 };
		fresh(f, v);
		fault_install(&(struct fault_plan){ .at = at, .kind = kind,
		                                    .err = EIO });
		workload(f->su.fd, &p);
		fault_remove();
		snprintf(what, sizeof(what), "%s, EIO %s call %d (%s)",
		         v->name, kind == FAULT_PERSIST ? "from" : "at", at,
		         fault_call_name(at));
		judge(f, &p, what);
		if (fault_open_fds() != before)
			fail_msg("%s: descriptors leaked", what);
	}
	printf("%s: failed %s each of %d calls\n", v->name,
	       kind == FAULT_PERSIST ? "from" : "at", total);
}

static const struct variant fresh_spool = { "new spool", false };
static const struct variant damaged_spool = { "damaged spool", true };

static void test_kill_fresh(void **state)
{
	kill_at_every_call(*state, &fresh_spool);
}

static void test_kill_damaged(void **state)
{
	kill_at_every_call(*state, &damaged_spool);
}

static void test_errors_fresh(void **state)
{
	fail_at_every_call(*state, &fresh_spool, FAULT_ERRNO);
	fail_at_every_call(*state, &fresh_spool, FAULT_PERSIST);
}

static void test_errors_damaged(void **state)
{
	fail_at_every_call(*state, &damaged_spool, FAULT_ERRNO);
	fail_at_every_call(*state, &damaged_spool, FAULT_PERSIST);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	su_fx_init(&f->su);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	su_fx_fini(&f->su);
	free(f);
	return 0;
}

int main(void)
{
#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_kill_fresh),
		T(test_kill_damaged),
		T(test_errors_fresh),
		T(test_errors_damaged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
