/*
 * The forwarder (include/fsafe/forward.h): spool -> sink, the cursor moved
 * only past what the sink confirmed.
 */
#define _GNU_SOURCE
#include "fsafe/forward.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "opts.h"
#include "sys.h"
#include "util.h"

#define DEFAULT_BATCH 256
/* A step returns its count as an int. */
#define MAX_BATCH (1u << 20)
#define DEFAULT_BATCH_BYTES (1u << 20)
#define DEFAULT_BACKOFF_MS 50
#define DEFAULT_BACKOFF_MAX_MS 5000
#define DEFAULT_MAX_RETRY_MS 60000
#define DEFAULT_IDLE_MS 50
#define DEFAULT_PROGRESS_MS 1000
/* A wait is cut into slices this long, so a cancel is seen soon. */
#define CANCEL_SLICE_MS 20

struct fsafe_forward {
	fsafe_spool *s;
	struct fsafe_forward_sink sink;
	struct fsafe_forward_opts o;
	fsafe_spool_reader *rd;
	/* The batch: records point into buf, which grows to the largest
	   batch seen (batch_bytes, or one longer record). */
	struct fsafe_forward_record *recs;
	unsigned char *buf;
	size_t bufcap;
	uint64_t rng; /* backoff jitter (xorshift64) */
	uint64_t last_progress_ms;
	struct fsafe_forward_stat st;
};

static int opts_load(struct fsafe_forward_opts *o,
                     const struct fsafe_forward_opts *in, const char **step)
{
	int r = FSAFE__OPTS_COPY(o, in, FSAFE_FORWARD_OPTS_SIZE_V0);

	*step = "options (size)";
	if (r < 0)
		return r;
	*step = "options (flags)";
	if (o->flags & ~(unsigned)FSAFE_FORWARD_ONCE)
		return -EINVAL;
	o->batch = o->batch ? o->batch : DEFAULT_BATCH;
	o->batch_bytes = o->batch_bytes ? o->batch_bytes : DEFAULT_BATCH_BYTES;
	o->backoff_ms = o->backoff_ms ? o->backoff_ms : DEFAULT_BACKOFF_MS;
	o->backoff_max_ms =
		o->backoff_max_ms ? o->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS;
	o->max_retry_ms = o->max_retry_ms ? o->max_retry_ms
	                                  : DEFAULT_MAX_RETRY_MS;
	o->idle_ms = o->idle_ms ? o->idle_ms : DEFAULT_IDLE_MS;
	o->progress_ms = o->progress_ms ? o->progress_ms : DEFAULT_PROGRESS_MS;
	*step = "options (batch above 1048576)";
	if (o->batch > MAX_BATCH)
		return -EINVAL;
	*step = "options (backoff_ms above backoff_max_ms)";
	if (o->backoff_ms > o->backoff_max_ms)
		return -EINVAL;
	*step = "options";
	return 0;
}

static int fail(const fsafe_forward *f, int r, const char *step)
{
	fsafe__error_set(f->o.error, r, -r, step, false);
	return r;
}

static int forward_new(fsafe_spool *s, const struct fsafe_forward_sink *sink,
                       const struct fsafe_forward_opts *o, fsafe_forward **out)
{
	fsafe_forward *f = calloc(1, sizeof(*f));

	if (!f || !(f->recs = calloc(o->batch, sizeof(*f->recs)))) {
		free(f);
		return -ENOMEM;
	}
	f->s = s;
	f->sink = *sink;
	f->o = *o;
	f->st.size = sizeof(f->st);
	/* Jitter needs no secret; the clock and the address differ enough
	   between forwarders started together. */
	f->rng = fsafe__mono_ns() ^ (uint64_t)(uintptr_t)f ^ 0x9e3779b97f4a7c15u;
	*out = f;
	return 0;
}

int fsafe_forward_open(fsafe_spool *s, const struct fsafe_forward_sink *sink,
                       const struct fsafe_forward_opts *opts,
                       fsafe_forward **out)
{
	struct fsafe_forward_opts o;
	char id[33];
	const char *step;
	fsafe_forward *f = NULL;
	int r = opts_load(&o, opts, &step);

	*out = NULL;
	if (r == -E2BIG)
		o.error = FSAFE__OPTS_ERROR(opts, struct fsafe_forward_opts, r);
	if (r == 0 && (!s || !sink || !sink->send))
		r = -EINVAL, step = "sink";
	if (r == 0 && (r = fsafe_spool_id(s, id)) < 0)
		step = "spool id";
	if (r == 0 && (r = forward_new(s, sink, &o, &f)) < 0)
		step = "allocate";
	if (r == 0 && (r = fsafe_spool_reader_open(s, FSAFE_SPOOL_FROM_CURSOR,
	                                           &f->rd)) < 0)
		step = "reader";
	if (r == 0 && sink->start &&
	    (r = sink->start(id, o.max_retry_ms, sink->arg)) != 0)
		r = r < 0 ? r : -EINVAL, step = "sink start";
	if (r < 0) {
		fsafe__error_set(o.error, r, -r, step, false);
		if (f)
			f->sink.stop = NULL; /* never started */
		fsafe_forward_close(f);
		return r;
	}
	*out = f;
	return 0;
}

void fsafe_forward_close(fsafe_forward *f)
{
	if (!f)
		return;
	if (f->sink.stop)
		f->sink.stop(f->sink.arg);
	fsafe_spool_reader_close(f->rd);
	free(f->recs);
	free(f->buf);
	free(f);
}

/* Room for `len` more bytes at `used`; the records already in the batch
   are moved along when the buffer moves. There is always a buffer, so an
   empty record too points somewhere valid. */
static int buf_room(fsafe_forward *f, size_t used, size_t len, size_t n)
{
	if (f->buf && used + len <= f->bufcap)
		return 0;
	size_t cap = used + len > f->o.batch_bytes ? used + len
	                                           : f->o.batch_bytes;
	unsigned char *p = realloc(f->buf, cap ? cap : 1);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		f->recs[i].data = p + ((const unsigned char *)f->recs[i].data -
		                       f->buf);
	f->buf = p;
	f->bufcap = cap;
	return 0;
}

/* The next read starts at `seq` (NULL reader: at the cursor). */
static int rewind_to(fsafe_forward *f, uint64_t seq)
{
	fsafe_spool_reader_close(f->rd);
	f->rd = NULL;
	return fsafe_spool_reader_open(f->s, seq, &f->rd);
}

/* Up to `batch` records and `batch_bytes` bytes (at least one record). The
   record that does not fit is read again from a new reader next time:
   a reader cannot push one back. */
static int fill(fsafe_forward *f, size_t *n)
{
	size_t used = 0;
	const void *data;
	size_t len;
	uint64_t seq;
	int r;

	*n = 0;
	while (*n < f->o.batch) {
		if ((r = fsafe_spool_next(f->rd, &data, &len, &seq)) <= 0)
			return r;
		if (*n && used + len > f->o.batch_bytes)
			return rewind_to(f, seq);
		if ((r = buf_room(f, used, len, *n)) < 0)
			return r;
		if (len)
			memcpy(f->buf + used, data, len);
		f->recs[*n] = (struct fsafe_forward_record){
			.seq = seq, .data = f->buf + used, .len = len };
		used += len;
		++*n;
	}
	return 0;
}

/* Wait `ms` unless cancelled first: 0 or -ECANCELED. */
static int pause_ms(uint64_t ms, const fsafe_cancel *cancel)
{
	uint64_t end = fsafe__mono_ms() + ms;

	for (;;) {
		if (fsafe_cancel_requested(cancel))
			return -ECANCELED;
		uint64_t now = fsafe__mono_ms();
		if (now >= end)
			return 0;
		uint64_t left = end - now < CANCEL_SLICE_MS ? end - now
		                                            : CANCEL_SLICE_MS;
		struct timespec ts = { .tv_sec = 0,
		                       .tv_nsec = (long)left * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static uint64_t jitter(fsafe_forward *f, uint64_t bound)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return bound ? f->rng % (bound + 1) : 0;
}

/* Full jitter: a random wait up to the attempt's exponential bound. */
static uint64_t backoff(fsafe_forward *f, unsigned attempt)
{
	uint64_t bound = f->o.backoff_ms;

	while (attempt-- && bound < f->o.backoff_max_ms)
		bound *= 2;
	return jitter(f, bound < f->o.backoff_max_ms ? bound
	                                             : f->o.backoff_max_ms);
}

/* Send until confirmed, cancelled or out of retry time. */
static int deliver(fsafe_forward *f, size_t n, const fsafe_cancel *cancel)
{
	uint64_t first_fail = 0;

	for (unsigned attempt = 0;; attempt++) {
		if (fsafe_cancel_requested(cancel))
			return fail(f, -ECANCELED, "cancel");
		int r = f->sink.send(f->recs, n, f->sink.arg);
		if (r == 0)
			return 0;
		r = r < 0 ? r : -EIO;
		f->st.retries++;
		uint64_t now = fsafe__mono_ms();
		if (!first_fail)
			first_fail = now;
		else if (now - first_fail >= f->o.max_retry_ms)
			return fail(f, r, "sink send");
		if ((r = pause_ms(backoff(f, attempt), cancel)) < 0)
			return fail(f, r, "cancel");
	}
}

static void progress(fsafe_forward *f, bool force)
{
	uint64_t now = fsafe__mono_ms();

	if (!f->o.progress ||
	    (!force && now - f->last_progress_ms < f->o.progress_ms))
		return;
	f->last_progress_ms = now;
	struct fsafe_forward_stat st = FSAFE_FORWARD_STAT_INIT;
	if (fsafe_forward_stat(f, &st) == 0)
		f->o.progress(&st, f->o.progress_arg);
}

/* After a failure the next step reads again from the cursor. */
static void drop_reader(fsafe_forward *f)
{
	fsafe_spool_reader_close(f->rd);
	f->rd = NULL;
}

int fsafe_forward_step(fsafe_forward *f, const fsafe_cancel *cancel)
{
	size_t n, bytes = 0;
	int r;

	if (fsafe_cancel_requested(cancel))
		return fail(f, -ECANCELED, "cancel");
	if (!f->rd && (r = fsafe_spool_reader_open(f->s, FSAFE_SPOOL_FROM_CURSOR,
	                                           &f->rd)) < 0)
		return fail(f, r, "reader");
	if ((r = fill(f, &n)) < 0)
		return drop_reader(f), fail(f, r, "read");
	if (n == 0)
		return 0;
	if ((r = deliver(f, n, cancel)) < 0)
		return drop_reader(f), r;
	/* Delivered: after a failed ack the batch is sent again, which the
	   sink's names make harmless. */
	if ((r = fsafe_spool_ack(f->s, f->recs[n - 1].seq)) < 0)
		return drop_reader(f), fail(f, r, "ack");
	for (size_t i = 0; i < n; i++)
		bytes += f->recs[i].len;
	f->st.records += n;
	f->st.bytes += bytes;
	f->st.batches++;
	return (int)n;
}

int fsafe_forward_run(fsafe_forward *f, const fsafe_cancel *cancel)
{
	int r;

	for (;;) {
		r = fsafe_forward_step(f, cancel);
		progress(f, r < 0);
		if (r < 0)
			return r;
		if (r > 0)
			continue;
		if (f->o.flags & FSAFE_FORWARD_ONCE)
			return progress(f, true), 0;
		if ((r = pause_ms(f->o.idle_ms, cancel)) < 0)
			return fail(f, r, "cancel");
	}
}

int fsafe_forward_stat(fsafe_forward *f, struct fsafe_forward_stat *st)
{
	struct fsafe_spool_stat ss = FSAFE_SPOOL_STAT_INIT;
	int r = fsafe_spool_stat(f->s, &ss);

	if (r < 0)
		return r;
	f->st.cursor = ss.cursor;
	f->st.lag = ss.next_seq - ss.cursor;
	return FSAFE__OPTS_COPY_OUT(st, &f->st, FSAFE_FORWARD_STAT_SIZE_V0);
}
