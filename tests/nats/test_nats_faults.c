/*
 * Exactly once under faults, against a real nats-server: 20,000 records
 * appended while the forwarder runs (from the forwarder's own process,
 * between its steps: the spool admits one process at a time), the
 * forwarder SIGKILLed at random points 20 times and restarted, the server
 * killed and restarted twice, the network cut (the server stopped,
 * SIGSTOP) and the server shut down mid-batch. Afterwards the stream
 * holds every record exactly once, in spool order, byte-identical, and
 * the spool's cursor is at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#define APPEND_CHUNK 16
#define FINAL_TIMEOUT_MS 120000

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

/* Records first..first+n-1 in one durable append. */
static void append(fsafe_spool *s, uint64_t first, uint64_t n)
{
	static unsigned char b[APPEND_CHUNK][300];
	struct iovec v[APPEND_CHUNK];

	for (uint64_t i = 0; i < n; i++)
		v[i] = (struct iovec){ b[i], fs_record(first + i, b[i]) };
	if (fsafe_spool_append(s, v, n, NULL) < 0)
		_exit(7);
}

static uint64_t next_seq(fsafe_spool *s)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;

	if (fsafe_spool_stat(s, &st) < 0)
		_exit(3);
	return st.next_seq;
}

/* The forwarder's process: append a few records, forward a batch, again,
   until all TOTAL are appended and forwarded. */
static void forwarder(int dirfd, const char *url)
{
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
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
	if (fsafe_forward_open(s, &sink, &o, &fw) < 0) {
		fprintf(stderr, "forwarder: %s\n", fsafe_nats_sink_message(k));
		_exit(5);
	}
	for (;;) {
		uint64_t next = next_seq(s);
		if (next <= TOTAL) {
			uint64_t n = TOTAL + 1 - next;
			append(s, next, n < APPEND_CHUNK ? n : APPEND_CHUNK);
		}
		int r = fsafe_forward_step(fw, NULL);
		if (r < 0) {
			fprintf(stderr, "forwarder: %d %s\n", r,
			        fsafe_nats_sink_message(k));
			_exit(6);
		}
		if (r == 0 && next > TOTAL)
			break;
	}
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	if (fsafe_forward_stat(fw, &st) == 0)
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
	fflush(stdout); /* the child would print it again */
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		forwarder(dirfd, url);
	return pid;
}

static void wait_ms(long ms)
{
	nanosleep(&(struct timespec){ ms / 1000, (ms % 1000) * 1000000L },
	          NULL);
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
	int killed = 0, st;
	char id[33];

	if (!ns_binary()) {
		printf("SKIP: nats-server is not installed (apt-get install "
		       "nats-server)\n");
		skip();
	}
	char *store = strdup(tu_mkscratch());
	ns_start(&srv, store);
	ns_add_stream(&srv, "E", "eo", 300000);
	/* FSAFE_SEED repeats a run's kill points (as far as timing allows). */
	const char *env = getenv("FSAFE_SEED");
	unsigned seed = env ? (unsigned)strtoul(env, NULL, 10)
	                    : (unsigned)time(NULL);
	printf("seed %u\n", seed);
	srand(seed);
	for (int round = 0; round < ROUNDS; round++) {
		pid_t pid = start_forwarder(f->dirfd, srv.url);
		wait_ms(20 + rand() % 60);
		server_fault(&srv, round);
		wait_ms(rand() % 40);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!WIFSIGNALED(st))
			fail_msg("round %d: the forwarder ended by itself (%d)",
			         round, st);
		killed++;
	}
	fsafe_spool *s = sp_open(f->dirfd);
	uint64_t appended = next_seq(s) - 1;
	fsafe_spool_close(s);
	printf("killed %d times with %llu of %d records appended\n", killed,
	       (unsigned long long)appended, TOTAL);
	assert_true(appended < TOTAL);

	pid_t pid = start_forwarder(f->dirfd, srv.url);
	int waited = 0;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (waited > FINAL_TIMEOUT_MS) {
			kill(pid, SIGKILL);
			fail_msg("the last forwarder not done after %d ms",
			         waited);
		}
		wait_ms(10);
		waited += 10;
	}
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	s = sp_open(f->dirfd);
	struct fsafe_spool_stat ss = FSAFE_SPOOL_STAT_INIT;
	assert_int_equal(fsafe_spool_stat(s, &ss), 0);
	assert_int_equal(ss.cursor, TOTAL + 1);
	assert_int_equal(ss.next_seq, TOTAL + 1);
	assert_int_equal(fsafe_spool_id(s, id), 0);
	fsafe_spool_close(s);
	ns_assert_stream(&srv, "E", id, TOTAL, fs_record);
	ns_stop(&srv);
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
