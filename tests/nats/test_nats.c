/*
 * The JetStream sink against a real nats-server: a round trip in spool
 * order, byte-identical and named <spool id>-<seq>; a batch sent again
 * after its acknowledgements were lost is stored once (duplicate
 * acknowledgements count as delivered); a stream whose duplicate window is
 * shorter than the forwarder's retry time is refused, with the reason; a
 * connection cut in the middle of a batch (a server that died with the
 * rest of it unread) never lets a later record into the stream ahead of
 * an earlier one; a batch whose new connection closed before its first
 * publish fails cleanly, and the next one goes out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <nats/nats.h>

#include "fakesink.h"
#include "fsafe/nats.h"
#include "natsutil.h"
#include "testutil.h"

struct fx {
	struct tu_fx tu;
	struct ns_server srv;
};

static struct ns_server srv;
static char *store;

/*
 * The sink's JetStream contexts are made through this wrapper (linked
 * with -Wl,--wrap=natsConnection_JetStream; the test's copy of the sink
 * is static). It keeps the last context's connection, and while
 * close_after_js is set closes it as soon as the context exists: a
 * server gone between the connect and a batch's first publish, a moment
 * no test could otherwise hit on purpose.
 */
static natsConnection *last_nc;
static bool close_after_js;

natsStatus __real_natsConnection_JetStream(jsCtx **js, natsConnection *nc,
                                           jsOptions *opts);
natsStatus __wrap_natsConnection_JetStream(jsCtx **js, natsConnection *nc,
                                           jsOptions *opts);

natsStatus __wrap_natsConnection_JetStream(jsCtx **js, natsConnection *nc,
                                           jsOptions *opts)
{
	natsStatus st = __real_natsConnection_JetStream(js, nc, opts);

	last_nc = nc;
	if (st == NATS_OK && close_after_js)
		natsConnection_Close(nc);
	return st;
}

/* The cutting proxy: its port, its pid, and how many connections it
   served (in memory shared with it). */
static int cut_port;
static pid_t cut_pid;
static int *cut_conns;
/* Bytes from the client that every other connection of the proxy (the
   first, the third, ...) passes on before it closes both ends: the first
   two records of a batch and part of the third. */
#define CUT_AFTER 500000
#define BIG 200000
#define BIG_N 16
#define CUT_ROUNDS 12

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w, n -= (size_t)w;
	}
	return true;
}

/* Relay both ways until either side ends; from the client, only `limit`
   bytes (-1: all), then return. */
static void relay(int c, int s, long limit)
{
	struct pollfd p[2] = { { .fd = c, .events = POLLIN },
	                       { .fd = s, .events = POLLIN } };
	static char buf[1 << 16];
	long passed = 0;

	while (poll(p, 2, -1) > 0) {
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0)
				return;
			if (i == 0 && limit >= 0 && passed + n > limit)
				n = limit - passed;
			if (!write_all(p[1 - i].fd, buf, (size_t)n))
				return;
			if (i == 0 && limit >= 0 && (passed += n) >= limit)
				return;
		}
	}
}

/* A TCP proxy to the server, one connection at a time; every other one,
   the first included, is cut after CUT_AFTER bytes from the client. */
static void cut_proxy_start(void)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 8), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
	cut_port = ntohs(a.sin_port);
	cut_conns = mmap(NULL, sizeof(*cut_conns), PROT_READ | PROT_WRITE,
	                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(cut_conns != MAP_FAILED);
	*cut_conns = 0;
	fflush(stdout);
	cut_pid = fork();
	assert_true(cut_pid >= 0);
	if (cut_pid > 0) {
		close(l);
		return;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in to = { .sin_family = AF_INET,
		                          .sin_port = htons(srv.port),
		                          .sin_addr.s_addr =
		                                  htonl(INADDR_LOOPBACK) };
		if (c < 0 || s < 0)
			_exit(1);
		if (connect(s, (struct sockaddr *)&to, sizeof(to)) == 0)
			relay(c, s, (*cut_conns)++ % 2 ? -1 : CUT_AFTER);
		close(c);
		close(s);
	}
}

/* One server for the group; its streams are made before this process
   starts libnats (the helper forks). */
static int group_setup(void **state)
{
	(void)state;
	if (!ns_binary()) {
		printf("SKIP: nats-server is not installed (apt-get install "
		       "nats-server)\n");
		return 0;
	}
	store = tu_mkscratch();
	ns_start(&srv, store);
	ns_add_stream(&srv, "S", "rec", 120000);
	ns_add_stream(&srv, "SHORT", "short", 1000);
	ns_add_stream(&srv, "CUT", "cut", 120000);
	ns_add_stream(&srv, "CLOSED", "closed", 120000);
	cut_proxy_start();
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (cut_pid > 0) {
		kill(cut_pid, SIGKILL);
		waitpid(cut_pid, NULL, 0);
	}
	ns_stop(&srv);
	if (store)
		tu_rmtree(store);
	free(store);
	return 0;
}

static fsafe_spool *sp_open(struct tu_fx *f)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.flags = FSAFE_SPOOL_CREATE;
	assert_int_equal(fsafe_spool_open(f->dirfd, "sp", &o, &s), 0);
	return s;
}

/* The JetStream sink, whose first `lose` sends are delivered but then
   reported as failed: acknowledgements lost on the way back. */
struct lossy {
	struct fsafe_forward_sink inner;
	int lose;
};

static int lossy_start(const char *id, uint64_t ms, void *arg)
{
	struct lossy *l = arg;

	return l->inner.start(id, ms, l->inner.arg);
}

static int lossy_send(const struct fsafe_forward_record *recs, size_t n,
                      void *arg)
{
	struct lossy *l = arg;
	int r = l->inner.send(recs, n, l->inner.arg);

	return r == 0 && l->lose-- > 0 ? -EIO : r;
}

static void test_round_trip(void **state)
{
	struct tu_fx *f = *state;
	fsafe_nats_sink *k;
	fsafe_forward *fw;
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	char id[33];

	if (!ns_binary())
		skip();
	fsafe_spool *s = sp_open(f);
	assert_int_equal(fsafe_spool_id(s, id), 0);
	fs_append(s, 1, 2000);
	assert_int_equal(fsafe_nats_sink_new(srv.url, "rec", NULL, 0, &k), 0);
	struct lossy l = { .inner = fsafe_nats_sink_callbacks(k), .lose = 2 };
	struct fsafe_forward_sink sink = { .start = lossy_start,
	                                   .send = lossy_send, .arg = &l };
	o.flags = FSAFE_FORWARD_ONCE;
	o.batch = 100;
	o.backoff_ms = 1;
	o.backoff_max_ms = 2;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), 0);
	assert_int_equal(fsafe_forward_run(fw, NULL), 0);
	assert_int_equal(fsafe_forward_stat(fw, &st), 0);
	assert_int_equal(st.records, 2000);
	assert_int_equal(st.retries, 2);
	assert_int_equal(st.cursor, 2001);
	/* The two batches sent again: every record of them acknowledged as
	   one the stream already held. */
	assert_int_equal(fsafe_nats_sink_duplicates(k), 200);
	fsafe_forward_close(fw);
	fsafe_nats_sink_free(k);
	fsafe_spool_close(s);
	ns_assert_stream(&srv, "S", id, 2000, fs_record);
}

static void test_refuses_short_window(void **state)
{
	struct tu_fx *f = *state;
	fsafe_nats_sink *k;
	fsafe_forward *fw;
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;

	if (!ns_binary())
		skip();
	fsafe_spool *s = sp_open(f);
	assert_int_equal(fsafe_nats_sink_new(srv.url, "short", NULL, 0, &k), 0);
	struct fsafe_forward_sink sink = fsafe_nats_sink_callbacks(k);
	o.max_retry_ms = 5000;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), -ERANGE);
	printf("refused: %s\n", fsafe_nats_sink_message(k));
	assert_non_null(strstr(fsafe_nats_sink_message(k), "stored twice"));
	/* Within the window: accepted. */
	o.max_retry_ms = 1000;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), 0);
	fsafe_forward_close(fw);
	fsafe_nats_sink_free(k);

	/* Not a subject. */
	assert_int_equal(fsafe_nats_sink_new(srv.url, "a b", NULL, 0, &k),
	                 -EINVAL);
	assert_int_equal(fsafe_nats_sink_new(srv.url, "a\"", NULL, 0, &k),
	                 -EINVAL);
	assert_int_equal(fsafe_nats_sink_new(NULL, "rec", NULL, 0, &k), -EINVAL);

	/* No stream holds the subject. */
	assert_int_equal(fsafe_nats_sink_new(srv.url, "none", NULL, 0, &k), 0);
	sink = fsafe_nats_sink_callbacks(k);
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), -ENOENT);
	assert_non_null(strstr(fsafe_nats_sink_message(k), "no stream"));
	fsafe_nats_sink_free(k);
	/* A named stream is checked by its name. */
	assert_int_equal(fsafe_nats_sink_new(srv.url, "rec", "SHORT", 0, &k), 0);
	sink = fsafe_nats_sink_callbacks(k);
	o.max_retry_ms = 5000;
	assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), -ERANGE);
	fsafe_nats_sink_free(k);
	fsafe_spool_close(s);
}

/* Record seq of the cut test: BIG bytes, each record's own. */
static size_t big_record(uint64_t seq, unsigned char *buf)
{
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (unsigned char)(seq * 131 + i * 7 + i / 251);
	return BIG;
}

/*
 * Each round appends BIG_N records and forwards them with a sink of its
 * own, whose first connection the proxy cuts in the middle of the first
 * batch, as a server killed with the rest of the batch unread in its
 * socket. Whatever the client still had to send must not reach the stream
 * by a new connection ahead of the records lost with the old one: the
 * stream holds the records in spool order. (With libnats's own
 * reconnection, which sends what was published while it was away, 5 runs
 * of this test in 8 found the order broken.)
 */
static void test_cut_connection_keeps_order(void **state)
{
	struct tu_fx *f = *state;
	static unsigned char rec[BIG];
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	fsafe_nats_sink *k;
	fsafe_forward *fw;
	char id[33], url[64];

	if (!ns_binary())
		skip();
	fsafe_spool *s = sp_open(f);
	assert_int_equal(fsafe_spool_id(s, id), 0);
	snprintf(url, sizeof(url), "nats://127.0.0.1:%d", cut_port);
	o.flags = FSAFE_FORWARD_ONCE;
	o.batch = BIG_N;
	o.backoff_ms = 10;
	o.backoff_max_ms = 50;
	o.max_retry_ms = 30000;
	for (uint64_t round = 0, seq = 1; round < CUT_ROUNDS; round++) {
		int conns = *cut_conns;
		for (uint64_t end = seq + BIG_N; seq < end; seq++) {
			struct iovec v = { rec, big_record(seq, rec) };
			assert_int_equal(fsafe_spool_append(s, &v, 1, NULL), 0);
		}
		assert_int_equal(fsafe_nats_sink_new(url, "cut", NULL, 2000, &k),
		                 0);
		struct fsafe_forward_sink sink = fsafe_nats_sink_callbacks(k);
		assert_int_equal(fsafe_forward_open(s, &sink, &o, &fw), 0);
		assert_int_equal(fsafe_forward_run(fw, NULL), 0);
		assert_int_equal(fsafe_forward_stat(fw, &st), 0);
		printf("round %llu: %d connections, %llu retries: %s\n",
		       (unsigned long long)round, *cut_conns - conns,
		       (unsigned long long)st.retries,
		       fsafe_nats_sink_message(k));
		assert_true(*cut_conns - conns >= 2); /* the cut happened */
		assert_true(st.retries >= 1);
		assert_int_equal(st.cursor, seq);
		fsafe_forward_close(fw);
		fsafe_nats_sink_free(k);
	}
	fsafe_spool_close(s);
	ns_assert_stream(&srv, "CUT", id, CUT_ROUNDS * BIG_N, big_record);
}

/*
 * The forwarder's sink lost its connection; its next batch connects anew
 * and the connection closes before the first publish. The batch fails
 * with the reason, and the in-flight list of a context that never took a
 * publish is not asked for (libnats 3.4 reads it through NULL: a
 * forwarder crashed so in test_nats_faults). The next batch goes out on a
 * connection of its own, and the stream holds the record once.
 */
static void test_closed_before_first_publish(void **state)
{
	(void)state;
	unsigned char buf[300];
	struct fsafe_forward_record rec = { 1, buf, fs_record(1, buf) };
	const char *id = "0123456789abcdef0123456789abcdef";
	fsafe_nats_sink *k;

	if (!ns_binary())
		skip();
	assert_int_equal(fsafe_nats_sink_new(srv.url, "closed", NULL, 0, &k),
	                 0);
	struct fsafe_forward_sink sink = fsafe_nats_sink_callbacks(k);
	assert_int_equal(sink.start(id, 1000, sink.arg), 0);
	assert_non_null(last_nc);
	natsConnection_Close(last_nc); /* the server went away */

	close_after_js = true;
	assert_int_equal(sink.send(&rec, 1, sink.arg), -EIO);
	close_after_js = false;
	printf("failed: %s\n", fsafe_nats_sink_message(k));
	assert_non_null(strstr(fsafe_nats_sink_message(k), "publish record 1"));

	assert_int_equal(sink.send(&rec, 1, sink.arg), 0);
	fsafe_nats_sink_free(k);
	ns_assert_stream(&srv, "CLOSED", id, 1, fs_record);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_short_window,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_cut_connection_keeps_order,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test(test_closed_before_first_publish),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
