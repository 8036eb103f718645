/*
 * Exactly once under faults, against a real nats-server: a producer
 * process appends 20,000 records (batches of 1..48, at its own pace)
 * while a forwarder process forwards them; the forwarder is SIGKILLed at
 * random points 20 times and restarted, the server killed and restarted
 * twice, the network cut (the server stopped, SIGSTOP) and the server shut
 * down mid-batch, and once the producer itself is SIGKILLed mid-stream
 * and restarted (it goes on from the spool's next_seq). The producer and
 * the forwarder are separate processes: a kill of one never touches the
 * other. Afterwards the stream holds every record exactly once, in spool
 * order, byte-identical, and the spool's cursor is at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakesink.h"
#include "fsafe/nats.h"
#include "natsutil.h"
#include "testutil.h"

#define TOTAL 20000
#define ROUNDS 20
#define MAX_BATCH 48
/* The producer's pace: records 1..TOTAL-TAIL spread over PRODUCE_MS (a
   little longer than the kill rounds take), the last TAIL only once the
   rounds are over, so it appends through every round and past them. */
#define PRODUCE_MS 6000
#define TAIL 500
#define PRODUCER_KILL_ROUND 10
#define FINAL_TIMEOUT_MS 120000

/* The producer's progress, in memory shared across fork: the last record
   whose append returned 0. */
static uint64_t *durable;
/* Acknowledgements, over every forwarder, of records the stream already
   held (sent again after a kill or a fault): the duplicates suppressed. */
static uint64_t *dups;

/* Add what the sink counted since the last call to the shared total. */
static void count_dups(fsafe_nats_sink *k, uint64_t *seen)
{
	uint64_t now = fsafe_nats_sink_duplicates(k);

	__atomic_add_fetch(dups, now - *seen, __ATOMIC_RELEASE);
	*seen = now;
}

static fsafe_spool *sp_open(int dirfd)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s = NULL;

	o.flags = FSAFE_SPOOL_CREATE;
	o.segment_size = 1 << 20; /* acks delete segments along the way */
	if (fsafe_spool_open(dirfd, "sp", &o, &s) < 0)
		_exit(3);
	return s;
}

static uint64_t next_seq(fsafe_spool *s)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;

	if (fsafe_spool_stat(s, &st) < 0)
		_exit(3);
	return st.next_seq;
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void wait_ms(long ms)
{
	if (ms > 0)
		nanosleep(&(struct timespec){ ms / 1000,
		                              (ms % 1000) * 1000000L },
		          NULL);
}

/* A child dies with the test: a failed assertion leaves none behind. */
static pid_t fork_child(void)
{
	fflush(stdout); /* the child would print it again */
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0 && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(2);
	return pid;
}

/* Records first..first+n-1 in one durable append; the producer is the
   only appender, so they get exactly these numbers. */
static void append(fsafe_spool *s, uint64_t first, uint64_t n)
{
	static unsigned char b[MAX_BATCH][300];
	struct iovec v[MAX_BATCH];
	uint64_t got;

	for (uint64_t i = 0; i < n; i++)
		v[i] = (struct iovec){ b[i], fs_record(first + i, b[i]) };
	if (fsafe_spool_append(s, v, n, &got) < 0)
		_exit(7);
	if (got != first)
		_exit(8);
	__atomic_store_n(durable, first + n - 1, __ATOMIC_RELEASE);
}

/* The producer's process: from the spool's next_seq (a restarted one goes
   on where the killed one's durable appends ended) to TOTAL, in batches
   of 1..MAX_BATCH records on a schedule from t0; the last TAIL wait for a
   byte on `gate`. */
static void producer(int dirfd, int gate, unsigned seed, long t0)
{
	fsafe_spool *s = sp_open(dirfd);

	for (uint64_t next; (next = next_seq(s)) <= TOTAL;) {
		uint64_t n = 1 + (uint64_t)rand_r(&seed) % MAX_BATCH;
		if (next <= TOTAL - TAIL) {
			wait_ms(t0 + (long)(next * PRODUCE_MS / (TOTAL - TAIL)) +
			        rand_r(&seed) % 3 - now_ms());
			if (n > TOTAL - TAIL + 1 - next)
				n = TOTAL - TAIL + 1 - next;
		} else {
			struct pollfd p = { .fd = gate, .events = POLLIN };
			if (poll(&p, 1, FINAL_TIMEOUT_MS) != 1)
				_exit(9);
			if (n > TOTAL + 1 - next)
				n = TOTAL + 1 - next;
		}
		append(s, next, n);
	}
	fsafe_spool_close(s);
	_exit(0);
}

static pid_t start_producer(int dirfd, int gate, unsigned seed, long t0)
{
	pid_t pid = fork_child();

	if (pid == 0)
		producer(dirfd, gate, seed, t0);
	return pid;
}

/* The forwarder's process: forward batches until the cursor is past
   TOTAL, waiting a little whenever the spool is drained. */
static void forwarder(int dirfd, const char *url)
{
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	fsafe_nats_sink *k;
	fsafe_forward *fw;
	fsafe_spool *s = sp_open(dirfd);

	if (fsafe_nats_sink_new(url, "eo", NULL, 500, &k) < 0)
		_exit(4);
	struct fsafe_forward_sink sink = fsafe_nats_sink_callbacks(k);
	o.batch = 64;
	o.backoff_ms = 5;
	o.backoff_max_ms = 100;
	o.max_retry_ms = 60000;
	/* Started while the server is killed or restarting, its start
	   fails (no connection, or one closed under the stream lookup): it
	   tries again, as a supervisor would restart it. */
	int r;
	for (long end = now_ms() + 10000;
	     (r = fsafe_forward_open(s, &sink, &o, &fw)) < 0 && now_ms() < end;)
		wait_ms(50);
	if (r < 0) {
		fprintf(stderr, "forwarder: %s\n", fsafe_nats_sink_message(k));
		_exit(5);
	}
	uint64_t seen = 0;
	for (;;) {
		int r = fsafe_forward_step(fw, NULL);
		count_dups(k, &seen);
		if (r < 0) {
			fprintf(stderr, "forwarder: %d %s\n", r,
			        fsafe_nats_sink_message(k));
			_exit(6);
		}
		if (r > 0)
			continue;
		if (fsafe_forward_stat(fw, &st) < 0)
			_exit(6);
		if (st.cursor > TOTAL)
			break;
		wait_ms(2);
	}
	printf("last forwarder: %llu records in %llu batches, %llu "
	       "retries\n", (unsigned long long)st.records,
	       (unsigned long long)st.batches,
	       (unsigned long long)st.retries), fflush(stdout);
	fsafe_forward_close(fw);
	fsafe_nats_sink_free(k);
	fsafe_spool_close(s);
	_exit(0);
}

static pid_t start_forwarder(int dirfd, const char *url)
{
	pid_t pid = fork_child();

	if (pid == 0)
		forwarder(dirfd, url);
	return pid;
}

/* SIGKILL a child that must still be running, and reap it. */
static void kill_child(pid_t pid, const char *who, int round)
{
	int st;

	assert_true(pid > 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFSIGNALED(st))
		fail_msg("round %d: the %s ended by itself (%d)", round, who,
		         st);
}

/* Reap a child that must end by itself with 0 within `ms`. */
static void reap_child(pid_t pid, const char *who, long ms)
{
	long end = now_ms() + ms;
	int st;

	assert_true(pid > 0);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			fail_msg("the %s not done after %ld ms", who, ms);
		}
		wait_ms(10);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("the %s failed (%d)", who, st);
}

/* The server's faults, each in its own round while the forwarder runs. */
static void server_fault(struct ns_server *srv, int round)
{
	switch (round) {
	case 4:
	case 11: /* killed, restarted on its store */
		ns_signal(srv, SIGKILL);
		wait_ms(200);
		ns_start(srv, NULL);
		break;
	case 8: /* the network cut: the server stops answering mid-batch */
		ns_signal(srv, SIGSTOP);
		wait_ms(1500);
		ns_signal(srv, SIGCONT);
		break;
	case 15: /* shut down mid-batch, started again */
		ns_signal(srv, SIGTERM);
		wait_ms(300);
		ns_start(srv, NULL);
		break;
	}
}

static void test_exactly_once_under_faults(void **state)
{
	struct tu_fx *f = *state;
	struct ns_server srv = { 0 };
	int gate[2], grew = 0;
	char id[33];

	if (!ns_binary()) {
		printf("SKIP: nats-server is not installed (apt-get install "
		       "nats-server)\n");
		skip();
	}
	durable = mmap(NULL, sizeof(*durable), PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(durable != MAP_FAILED);
	*durable = 0;
	dups = mmap(NULL, sizeof(*dups), PROT_READ | PROT_WRITE,
	            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(dups != MAP_FAILED);
	*dups = 0;
	assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
	char *store = tu_mkscratch();
	ns_start(&srv, store);
	ns_add_stream(&srv, "E", "eo", 300000);
	/* FSAFE_SEED repeats a run's kill points and the producer's batches
	   (as far as timing allows). */
	const char *env = getenv("FSAFE_SEED");
	unsigned seed = env ? (unsigned)strtoul(env, NULL, 10)
	                    : (unsigned)time(NULL);
	printf("seed %u\n", seed);
	srand(seed);
	long t0 = now_ms();
	pid_t prod = start_producer(f->dirfd, gate[0], seed, t0);
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t before = __atomic_load_n(durable, __ATOMIC_ACQUIRE);
		pid_t fwd = start_forwarder(f->dirfd, srv.url);
		wait_ms(20 + rand() % 60);
		server_fault(&srv, round);
		if (round == PRODUCER_KILL_ROUND) {
			wait_ms(rand() % 40);
			kill_child(prod, "producer", round);
			printf("producer killed at %llu records appended\n",
			       (unsigned long long)*durable);
			prod = start_producer(f->dirfd, gate[0], seed + 1, t0);
		}
		wait_ms(rand() % 40);
		kill_child(fwd, "forwarder", round);
		grew += __atomic_load_n(durable, __ATOMIC_ACQUIRE) > before;
	}
	uint64_t appended = __atomic_load_n(durable, __ATOMIC_ACQUIRE);
	printf("forwarder killed %d times, %llu of %d records appended, the "
	       "spool grew in %d rounds\n", ROUNDS,
	       (unsigned long long)appended, TOTAL, grew);
	/* The producer ran beside the forwarder, and is not done. */
	assert_true(grew >= ROUNDS / 2);
	assert_true(appended <= TOTAL - TAIL);

	pid_t fwd = start_forwarder(f->dirfd, srv.url);
	assert_int_equal(write(gate[1], "", 1), 1);
	reap_child(prod, "producer", FINAL_TIMEOUT_MS);
	reap_child(fwd, "last forwarder", FINAL_TIMEOUT_MS);
	close(gate[0]);
	close(gate[1]);

	fsafe_spool *s = sp_open(f->dirfd);
	struct fsafe_spool_stat ss = FSAFE_SPOOL_STAT_INIT;
	assert_int_equal(fsafe_spool_stat(s, &ss), 0);
	assert_int_equal(ss.cursor, TOTAL + 1);
	assert_int_equal(ss.next_seq, TOTAL + 1);
	assert_int_equal(fsafe_spool_id(s, id), 0);
	fsafe_spool_close(s);
	ns_assert_stream(&srv, "E", id, TOTAL, fs_record);
	printf("%d records in the stream once each; %llu records sent again "
	       "and acknowledged as duplicates (suppressed by the stream)\n",
	       TOTAL, (unsigned long long)__atomic_load_n(dups, __ATOMIC_ACQUIRE));
	ns_stop(&srv);
	munmap(dups, sizeof(*dups));
	munmap(durable, sizeof(*durable));
	tu_rmtree(store);
	free(store);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exactly_once_under_faults,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
