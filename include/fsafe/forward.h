/*
 * The forwarder: hands a spool's records on to a sink (a message broker,
 * a socket, another store) and moves the spool's cursor past them only
 * after the sink confirms them.
 *
 * Each round reads a batch from the cursor (at most `batch` records and
 * `batch_bytes` bytes, one longer record alone; memory stays within that,
 * never a segment), hands it to the sink's `send`, and acknowledges it in
 * the spool when `send` returns 0. While `send` fails the same batch is
 * sent again after a backoff with full jitter (a random wait up to
 * min(backoff_max_ms, backoff_ms * 2^attempt)), until it succeeds, the
 * cancel token is requested, or the batch has been retried for longer than
 * `max_retry_ms`, when the forwarder stops with the sink's error.
 *
 * Delivery is at least once: a crash between the sink's confirmation and
 * the cursor's move sends the batch again at the next start. A sink that
 * drops what it has seen by name makes it exactly once: every record
 * carries the spool's id (fsafe_spool_id) and its sequence number, a name
 * no other record of any spool has. The one limit left is the receiver's:
 * a record sent again after the receiver forgot its name (a broker's
 * duplicate window) arrives twice. `start` sees `max_retry_ms` so a sink
 * can refuse a window shorter than that.
 *
 * The forwarder uses its spool handle as its one reader: no other call on
 * that handle may run beside fsafe_forward_run/step (appends may).
 */
#ifndef FSAFE_FORWARD_H
#define FSAFE_FORWARD_H

#include "fsafe.h"
#include "fsafe/spool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_forward fsafe_forward;

/* One record of a batch: its bytes are valid during the call only. */
struct fsafe_forward_record {
	uint64_t seq;
	const void *data;
	size_t len;
};

struct fsafe_forward_sink {
	/* Optional: called once, before the first batch, with the spool's id
	   (32 hex digits) and the forwarder's max_retry_ms. Non-zero (a
	   negative errno) refuses: fsafe_forward_open fails with it. */
	int (*start)(const char *spool_id, uint64_t max_retry_ms, void *arg);
	/* Deliver `n` records (n >= 1, in sequence order, consecutive). 0 only
	   when the receiver confirmed every one of them (a record it already
	   had counts as delivered); a negative errno otherwise, and the whole
	   batch is sent again. */
	int (*send)(const struct fsafe_forward_record *recs, size_t n,
	            void *arg);
	/* Optional: called by fsafe_forward_close. */
	void (*stop)(void *arg);
	void *arg;
};

/* Progress counters since the forwarder was opened. */
struct fsafe_forward_stat {
	size_t size;       /* sizeof(struct fsafe_forward_stat) */
	uint64_t records;  /* delivered and acknowledged in the spool */
	uint64_t bytes;    /* their payload bytes */
	uint64_t batches;  /* sends that succeeded */
	uint64_t retries;  /* sends that failed (each one retried or last) */
	uint64_t lag;      /* records in the spool past the cursor, now */
	uint64_t cursor;   /* the spool's cursor, now */
};

#define FSAFE_FORWARD_STAT_INIT FSAFE__INIT(struct fsafe_forward_stat)
#define FSAFE_FORWARD_STAT_SIZE_V0                                  \
	(offsetof(struct fsafe_forward_stat, cursor) +              \
	 sizeof(((struct fsafe_forward_stat *)0)->cursor))

enum {
	/* fsafe_forward_run returns 0 once the spool is drained (no record
	   past the cursor) instead of waiting for more. */
	FSAFE_FORWARD_ONCE = 1u << 0,
};

typedef void (*fsafe_forward_progress_fn)(const struct fsafe_forward_stat *st,
                                          void *arg);

struct fsafe_forward_opts {
	size_t size;          /* sizeof(struct fsafe_forward_opts), or 0 */
	unsigned flags;       /* FSAFE_FORWARD_* */
	uint32_t batch;       /* records per batch; 0: 256; at most 2^20 */
	uint32_t batch_bytes; /* payload bytes per batch; 0: 1 MiB */
	uint32_t backoff_ms;  /* first retry's wait bound; 0: 50 */
	uint32_t backoff_max_ms; /* largest wait bound; 0: 5000 */
	uint64_t max_retry_ms;   /* give a failing batch up after this long;
	                            0: 60000 */
	uint32_t idle_ms;     /* wait between looks at a drained spool;
	                         0: 50 */
	uint32_t progress_ms; /* call `progress` at most this often (and at
	                         the end); 0: 1000 */
	fsafe_forward_progress_fn progress; /* optional */
	void *progress_arg;
	struct fsafe_error *error; /* optional: filled in on failure */
};

#define FSAFE_FORWARD_OPTS_INIT FSAFE__INIT(struct fsafe_forward_opts)
#define FSAFE_FORWARD_OPTS_SIZE_V0                                  \
	(offsetof(struct fsafe_forward_opts, error) +               \
	 sizeof(((struct fsafe_forward_opts *)0)->error))

/*
 * A forwarder from spool `s` (opened for writing; it must outlive the
 * forwarder) to `sink` (copied; its arg must outlive the forwarder). Calls
 * the sink's start. -EINVAL for a sink without send or bad options; the
 * spool's id error (fsafe_spool_id); start's refusal.
 */
FSAFE_API int fsafe_forward_open(fsafe_spool *s,
                                 const struct fsafe_forward_sink *sink,
                                 const struct fsafe_forward_opts *opts,
                                 fsafe_forward **out);

/*
 * One round: read a batch from the cursor and deliver it (retrying as
 * above). The number of records delivered (0: the spool is drained), or a
 * negative errno: the sink's last error after max_retry_ms, -ECANCELED,
 * or the spool's. `cancel` may be NULL.
 */
FSAFE_API int fsafe_forward_step(fsafe_forward *f, const fsafe_cancel *cancel);

/*
 * Rounds until cancelled (-ECANCELED), an error, or with
 * FSAFE_FORWARD_ONCE the spool drained (0). Waits idle_ms between looks
 * at a drained spool.
 */
FSAFE_API int fsafe_forward_run(fsafe_forward *f, const fsafe_cancel *cancel);

/* The counters (st->size set by the caller; -EINVAL below V0). Fills lag
   and cursor from the spool: not beside a step or run. */
FSAFE_API int fsafe_forward_stat(fsafe_forward *f,
                                 struct fsafe_forward_stat *st);

/* Call the sink's stop and free. NULL: no-op. The spool stays open. */
FSAFE_API void fsafe_forward_close(fsafe_forward *f);

#ifdef __cplusplus
}
#endif

#endif
