/*
 * The JetStream sink (fsafe/nats.h): a batch is published asynchronously,
 * each record named by its Nats-Msg-Id, and confirmed once every record's
 * sequence number has a positive acknowledgement (a duplicate's included).
 *
 * A lost connection is never resumed by libnats: its reconnection sends
 * what was published while it was away, after records lost with the old
 * connection, and so would store a batch out of order. A batch goes out
 * whole on one connection instead; the next send after a loss connects
 * anew and starts again from the first record not yet acknowledged.
 */
#define _GNU_SOURCE
#include "fsafe/nats.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#define DEFAULT_ACK_WAIT_MS 5000
#define MSG_ID_HEADER "Nats-Msg-Id"

struct fsafe_nats_sink {
	char *url, *subject, *stream;
	uint32_t ack_wait_ms;
	char id[33];
	natsConnection *nc;
	jsCtx *js;
	/* js took a publish since it was made or its pending list was
	   last taken (drop_pending). */
	bool js_pending;
	char message[256];

	/* The batch in flight, shared with libnats's ack thread. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t first, n;  /* its sequence numbers: first .. first+n-1 */
	unsigned char *acked; /* one flag per record */
	uint64_t nacked;
	uint64_t duplicates; /* acknowledgements of records the stream had */
	char ack_error[160]; /* the first negative acknowledgement */
};

static void say(fsafe_nats_sink *k, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void say(fsafe_nats_sink *k, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(k->message, sizeof(k->message), fmt, ap);
	va_end(ap);
}

/* The sequence number in a message's name, if it is this spool's. */
static bool msg_seq(const fsafe_nats_sink *k, natsMsg *m, uint64_t *seq)
{
	const char *v = NULL;
	char *end;

	if (natsMsgHeader_Get(m, MSG_ID_HEADER, &v) != NATS_OK || !v ||
	    strncmp(v, k->id, 32) != 0 || v[32] != '-')
		return false;
	errno = 0;
	*seq = strtoull(v + 33, &end, 10);
	return !errno && !*end;
}

/* On libnats's thread. An acknowledgement of an earlier attempt at the
   same record counts too: either way the stream holds it. */
static void on_ack(jsCtx *js, natsMsg *m, jsPubAck *pa, jsPubAckErr *pae,
                   void *arg)
{
	fsafe_nats_sink *k = arg;
	uint64_t seq;

	(void)js;
	pthread_mutex_lock(&k->mu);
	if (msg_seq(k, m, &seq) && seq >= k->first && seq - k->first < k->n) {
		if (pa && pa->Duplicate)
			k->duplicates++;
		if (pa && !k->acked[seq - k->first]) {
			k->acked[seq - k->first] = 1;
			k->nacked++;
		} else if (pae && !k->ack_error[0]) {
			snprintf(k->ack_error, sizeof(k->ack_error),
			         "record %" PRIu64 ": %s", seq,
			         pae->ErrText ? pae->ErrText
			                      : natsStatus_GetText(pae->Err));
		}
		pthread_cond_broadcast(&k->cv);
	}
	pthread_mutex_unlock(&k->mu);
	natsMsg_Destroy(m);
}

int fsafe_nats_sink_new(const char *url, const char *subject,
                        const char *stream, uint32_t ack_wait_ms,
                        fsafe_nats_sink **out)
{
	fsafe_nats_sink *k;

	*out = NULL;
	/* A subject has no spaces; nor quotes, which the stream lookup's JSON
	   request would have to escape. */
	if (!url || !*url || !subject || !*subject ||
	    subject[strcspn(subject, " \t\r\n\"\\")])
		return -EINVAL;
	if (!(k = calloc(1, sizeof(*k))))
		return -ENOMEM;
	k->url = strdup(url);
	k->subject = strdup(subject);
	k->stream = stream ? strdup(stream) : NULL;
	if (!k->url || !k->subject || (stream && !k->stream)) {
		fsafe_nats_sink_free(k);
		return -ENOMEM;
	}
	k->ack_wait_ms = ack_wait_ms ? ack_wait_ms : DEFAULT_ACK_WAIT_MS;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	*out = k;
	return 0;
}

static void disconnect(fsafe_nats_sink *k)
{
	if (k->js)
		jsCtx_Destroy(k->js);
	if (k->nc) {
		natsConnection_Close(k->nc);
		natsConnection_Destroy(k->nc);
	}
	k->js = NULL;
	k->js_pending = false;
	k->nc = NULL;
}

void fsafe_nats_sink_free(fsafe_nats_sink *k)
{
	if (!k)
		return;
	disconnect(k);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k->acked);
	free(k->url);
	free(k->subject);
	free(k->stream);
	free(k);
}

uint64_t fsafe_nats_sink_duplicates(fsafe_nats_sink *k)
{
	pthread_mutex_lock(&k->mu);
	uint64_t n = k->duplicates;
	pthread_mutex_unlock(&k->mu);
	return n;
}

const char *fsafe_nats_sink_message(const fsafe_nats_sink *k)
{
	return k->message;
}

static int connect_js(fsafe_nats_sink *k)
{
	natsOptions *o = NULL;
	jsOptions jo;
	natsStatus st = natsOptions_Create(&o);

	if (st == NATS_OK)
		st = natsOptions_SetURL(o, k->url);
	/* Not resumed by libnats (see the top); the forwarder's retries
	   decide how long the server may be away. */
	if (st == NATS_OK)
		st = natsOptions_SetAllowReconnect(o, false);
	if (st == NATS_OK)
		st = natsConnection_Connect(&k->nc, o);
	natsOptions_Destroy(o);
	if (st == NATS_OK) {
		jsOptions_Init(&jo);
		jo.Wait = k->ack_wait_ms;
		jo.PublishAsync.AckHandler = on_ack;
		jo.PublishAsync.AckHandlerClosure = k;
		st = natsConnection_JetStream(&k->js, k->nc, &jo);
	}
	if (st != NATS_OK) {
		say(k, "cannot connect to %s: %s", k->url,
		    natsStatus_GetText(st));
		disconnect(k);
		return -ECONNREFUSED;
	}
	return 0;
}

/* Connected, over a new connection if the last one was lost. */
static int ensure_connected(fsafe_nats_sink *k)
{
	if (k->js && !natsConnection_IsClosed(k->nc))
		return 0;
	disconnect(k);
	return connect_js(k);
}

/* The name of the stream that holds the subject, asked of the server. */
static int find_stream(fsafe_nats_sink *k)
{
	char req[512];
	natsMsg *reply = NULL;

	snprintf(req, sizeof(req), "{\"subject\":\"%s\"}", k->subject);
	natsStatus st = natsConnection_RequestString(
		&reply, k->nc, "$JS.API.STREAM.NAMES", req, k->ack_wait_ms);
	if (st != NATS_OK) {
		say(k, "cannot list the streams: %s", natsStatus_GetText(st));
		return -EIO;
	}
	/* {"...","streams":["NAME"]}: names carry no quotes. */
	const char *d = natsMsg_GetData(reply);
	const char *p = d ? strstr(d, "\"streams\":[\"") : NULL;
	const char *e = p ? strchr(p + 12, '"') : NULL;
	if (e)
		k->stream = strndup(p + 12, (size_t)(e - p - 12));
	natsMsg_Destroy(reply);
	if (!e) {
		say(k, "no stream holds subject %s", k->subject);
		return -ENOENT;
	}
	return k->stream ? 0 : -ENOMEM;
}

/* A record sent again after the window is stored twice: the window must
   cover the forwarder's retries. */
static int check_window(fsafe_nats_sink *k, uint64_t max_retry_ms)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus st = js_GetStreamInfo(&si, k->js, k->stream, NULL, &jerr);

	if (st != NATS_OK) {
		say(k, "stream %s: %s", k->stream, natsStatus_GetText(st));
		return st == NATS_NOT_FOUND ? -ENOENT : -EIO;
	}
	int64_t window_ms = si->Config->Duplicates / 1000000;
	jsStreamInfo_Destroy(si);
	if (window_ms < 0 || (uint64_t)window_ms < max_retry_ms) {
		say(k, "stream %s keeps message ids for %" PRId64 " ms, less "
		    "than the forwarder's retry time of %" PRIu64 " ms: a "
		    "record sent again after the window would be stored twice",
		    k->stream, window_ms, max_retry_ms);
		return -ERANGE;
	}
	return 0;
}

static int k_start(const char *spool_id, uint64_t max_retry_ms, void *arg)
{
	fsafe_nats_sink *k = arg;
	int r;

	memcpy(k->id, spool_id, 33);
	k->message[0] = '\0';
	if ((r = ensure_connected(k)) < 0)
		return r;
	if (!k->stream && (r = find_stream(k)) < 0)
		return r;
	return check_window(k, max_retry_ms);
}

static int batch_begin(fsafe_nats_sink *k, uint64_t first, size_t n)
{
	unsigned char *a = calloc(n, 1);

	if (!a)
		return -ENOMEM;
	pthread_mutex_lock(&k->mu);
	free(k->acked);
	k->acked = a;
	k->first = first;
	k->n = n;
	k->nacked = 0;
	k->ack_error[0] = '\0';
	pthread_mutex_unlock(&k->mu);
	return 0;
}

static int publish(fsafe_nats_sink *k, const struct fsafe_forward_record *r)
{
	char name[33 + 21];
	natsMsg *m = NULL;
	natsStatus st = natsMsg_Create(&m, k->subject, NULL, r->data,
	                               (int)r->len);

	snprintf(name, sizeof(name), "%s-%" PRIu64, k->id, r->seq);
	if (st == NATS_OK)
		st = natsMsgHeader_Set(m, MSG_ID_HEADER, name);
	if (st == NATS_OK)
		st = js_PublishMsgAsync(k->js, &m, NULL);
	natsMsg_Destroy(m); /* NULL once libnats owns it */
	if (st != NATS_OK) {
		say(k, "publish record %" PRIu64 ": %s", r->seq,
		    natsStatus_GetText(st));
		return -EIO;
	}
	k->js_pending = true;
	return 0;
}

/* CLOCK_REALTIME (pthread_cond_timedwait's) `ms` from now. */
static struct timespec in_ms(uint32_t ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L)
		t.tv_sec++, t.tv_nsec -= 1000000000L;
	return t;
}

static bool earlier(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* A closed connection brings no more acknowledgements; the wait looks
   every CLOSED_POLL_MS (a closed callback could outlive the sink). */
#define CLOSED_POLL_MS 20

/* Every record acknowledged, or the first refusal, or the connection
   closed, or the time is up. */
static int await_acks(fsafe_nats_sink *k)
{
	struct timespec end = in_ms(k->ack_wait_ms), now = in_ms(0);
	bool closed = false;
	int r;

	pthread_mutex_lock(&k->mu);
	while (k->nacked < k->n && !k->ack_error[0] && !closed &&
	       earlier(&now, &end)) {
		struct timespec t = in_ms(CLOSED_POLL_MS);
		pthread_cond_timedwait(&k->cv, &k->mu,
		                       earlier(&t, &end) ? &t : &end);
		closed = natsConnection_IsClosed(k->nc);
		now = in_ms(0);
	}
	if (k->nacked == k->n)
		r = 0;
	else if (k->ack_error[0])
		say(k, "%s", k->ack_error), r = -EIO;
	else if (closed)
		say(k, "connection lost with %" PRIu64 " of %" PRIu64 " records "
		    "unacknowledged", k->n - k->nacked, k->n), r = -ECONNRESET;
	else
		say(k, "%" PRIu64 " of %" PRIu64 " records unacknowledged "
		    "after %" PRIu32 " ms", k->n - k->nacked, k->n,
		    k->ack_wait_ms), r = -ETIMEDOUT;
	pthread_mutex_unlock(&k->mu);
	return r;
}

/*
 * Forget what is still in flight: a retry sends it again by name. Only
 * when a publish was taken since the context was made or its list last
 * emptied: libnats 3.4 makes a context's table of pending messages at its
 * first publish, and asked for the list of a context without one, reads
 * through NULL (a forwarder crashed so on a retry after a reconnect).
 */
static void drop_pending(fsafe_nats_sink *k)
{
	natsMsgList pending = { 0 };

	if (!k->js_pending)
		return;
	k->js_pending = false;
	if (js_PublishAsyncGetPendingList(&pending, k->js) == NATS_OK)
		natsMsgList_Destroy(&pending);
}

static int k_send(const struct fsafe_forward_record *recs, size_t n,
                  void *arg)
{
	fsafe_nats_sink *k = arg;
	/* After a lost connection, a new one (the stream was found and
	   checked by start). */
	int r = ensure_connected(k);

	if (r == 0)
		r = batch_begin(k, recs[0].seq, n);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = publish(k, &recs[i]);
	if (r == 0)
		r = await_acks(k);
	if (r < 0)
		drop_pending(k);
	return r;
}

struct fsafe_forward_sink fsafe_nats_sink_callbacks(fsafe_nats_sink *k)
{
	return (struct fsafe_forward_sink){ .start = k_start, .send = k_send,
	                                    .arg = k };
}
