/*
 * fsafe spool DIR forward: the spool's records to a JetStream stream,
 * the cursor moved only past what JetStream acknowledged. Built only with
 * libfsafe-nats.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opt.h"
#include "cli_signal.h"
#include "cli_util.h"
#include "fsafe.h"
#include "fsafe/forward.h"
#include "fsafe/nats.h"

int cmd_spool_forward(int argc, char **argv);

static const char usage[] =
	"usage: fsafe spool DIR forward --nats URL --subject SUBJECT "
	"[--stream NAME] [--batch N] [--once]\n";

static const char help[] =
	"Publish the spool's records from its cursor to a JetStream stream,\n"
	"each with the header Nats-Msg-Id: <spool id>-<sequence number>, and\n"
	"move the cursor past a batch once JetStream acknowledged every record\n"
	"of it (a duplicate's acknowledgement counts). Retries with backoff\n"
	"while the server is away; refuses to start when the stream keeps\n"
	"message ids for less than the retry time (60 s). On a terminal a\n"
	"status line shows records/s and lag; a summary ends the run.\n"
	"\n"
	"  -u, --nats URL      the server (nats://HOST:PORT)\n"
	"  -S, --subject SUBJECT  the subject to publish to\n"
	"      --stream NAME   the stream whose duplicate window is checked\n"
	"                      (default: the one that holds SUBJECT)\n"
	"  -b, --batch N       records per batch, 1 to 65536 (default 256)\n"
	"      --once          stop when the spool is drained (exit 0)\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 drained with --once, 1 failed, 2 usage; a signal\n"
	"stops it after the batch in flight.\n";

struct fwd_args {
	const char *url, *subject, *stream;
	uint64_t batch;
	bool once;
};

struct status {
	bool tty;
	uint64_t last_records;
	double last_time;
};

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One line, rewritten in place while it runs on a terminal. */
static void on_progress(const struct fsafe_forward_stat *st, void *arg)
{
	struct status *s = arg;
	double now = seconds(), dt = now - s->last_time;

	if (!s->tty)
		return;
	double rate = dt > 0 ? (double)(st->records - s->last_records) / dt
	                     : 0;
	fprintf(stderr, "\r%" PRIu64 " records, %.0f records/s, lag %" PRIu64
	        "\033[K", st->records, rate, st->lag);
	s->last_records = st->records;
	s->last_time = now;
}

static int parse(int argc, char **argv, struct fwd_args *a, const char **dir)
{
	const struct cli_opt opts[] = {
		CLI_STRING('u', "nats", &a->url),
		CLI_STRING('S', "subject", &a->subject),
		CLI_STRING(0, "stream", &a->stream),
		CLI_UINT('b', "batch", &a->batch, 1, 65536, NULL),
		CLI_FLAG(0, "once", &a->once),
		CLI_HELP,
		CLI_END,
	};
	struct cli_spec spec = { "spool forward", usage, help, opts, 0 };
	struct cli_args ops;
	int r = cli_parse(&spec, argc, argv, &ops);

	if (r != CLI_CONTINUE)
		return r;
	if (ops.argc != 2 || strcmp(ops.argv[1], "forward") != 0)
		return cli_spec_error(&spec, "DIR forward is needed");
	if (!a->url || !a->subject)
		return cli_spec_error(&spec, "--nats and --subject are needed");
	*dir = ops.argv[0];
	return CLI_CONTINUE;
}

static void summary(fsafe_forward *fw, fsafe_nats_sink *k,
                    const struct status *s)
{
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;

	if (fsafe_forward_stat(fw, &st) < 0)
		return;
	if (s->tty)
		fputc('\n', stderr);
	fprintf(stderr, "forwarded %" PRIu64 " records (%" PRIu64 " bytes) in "
	        "%" PRIu64 " batches, %" PRIu64 " retries; lag %" PRIu64
	        "; %" PRIu64 " duplicates suppressed by the stream\n",
	        st.records, st.bytes, st.batches, st.retries, st.lag,
	        fsafe_nats_sink_duplicates(k));
}

static int forward(fsafe_spool *sp, fsafe_nats_sink *k, const char *dir,
                   const struct fwd_args *a, fsafe_cancel *c)
{
	struct status s = { .tty = isatty(2), .last_time = seconds() };
	struct fsafe_forward_opts o = FSAFE_FORWARD_OPTS_INIT;
	struct fsafe_error e = { 0 };
	struct fsafe_forward_sink sink = fsafe_nats_sink_callbacks(k);
	fsafe_forward *fw;

	o.flags = a->once ? FSAFE_FORWARD_ONCE : 0;
	o.batch = (uint32_t)a->batch;
	o.progress = on_progress;
	o.progress_arg = &s;
	o.error = &e;
	int r = fsafe_forward_open(sp, &sink, &o, &fw);
	if (r == 0) {
		r = fsafe_forward_run(fw, c);
		summary(fw, k, &s);
		fsafe_forward_close(fw);
	}
	if (r == -ECANCELED && cli_signal_caught())
		return cli_signal_reraise();
	if (r < 0) {
		const char *why = fsafe_nats_sink_message(k);
		cli_warn("spool %s: forward: %s: %s", dir,
		         e.step ? e.step : "open", why[0] ? why
		                                          : fsafe_strerror(r));
		return CLI_FAIL;
	}
	return CLI_OK;
}

int cmd_spool_forward(int argc, char **argv)
{
	struct fwd_args a = { .batch = 256 };
	struct fsafe_error e = { 0 };
	struct fsafe_spool_opts so = FSAFE_SPOOL_OPTS_INIT;
	const char *dir = NULL;
	fsafe_spool *sp;
	fsafe_nats_sink *k;
	fsafe_cancel *c;
	int r = parse(argc, argv, &a, &dir);

	if (r != CLI_CONTINUE)
		return r;
	so.error = &e;
	if ((r = fsafe_spool_open(AT_FDCWD, dir, &so, &sp)) < 0) {
		cli_warn("spool %s: %s: %s", dir, e.step ? e.step : "open",
		         fsafe_strerror(r));
		return CLI_FAIL;
	}
	if ((r = fsafe_nats_sink_new(a.url, a.subject, a.stream, 0, &k)) < 0 ||
	    (r = fsafe_cancel_new(&c)) < 0) {
		cli_warn("spool %s: forward: %s", dir, fsafe_strerror(r));
		fsafe_spool_close(sp);
		return CLI_FAIL;
	}
	cli_signal_catch(c);
	int rc = forward(sp, k, dir, &a, c);
	fsafe_nats_sink_free(k);
	fsafe_cancel_free(c);
	fsafe_spool_close(sp);
	return rc;
}
