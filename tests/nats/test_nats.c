/*
 * The JetStream sink against a real nats-server: a round trip in spool
 * order, byte-identical and named <spool id>-<seq>; a batch sent again
 * after its acknowledgements were lost is stored once (duplicate
 * acknowledgements count as delivered); a stream whose duplicate window is
 * shorter than the forwarder's retry time is refused, with the reason.
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
#include <unistd.h>

#include <cmocka.h>

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
	store = strdup(tu_mkscratch());
	ns_start(&srv, store);
	ns_add_stream(&srv, "S", "rec", 120000);
	ns_add_stream(&srv, "SHORT", "short", 1000);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_short_window,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
