/*
 * The chunk spool: an append-only, checksummed queue of records on disk
 * that recovers from crashes by itself.
 *
 * A spool is a directory holding segment files named by the sequence
 * number of their first record (20 decimal digits + ".seg"), a consumer
 * cursor ("cursor", replaced with the atomic writer) and, once corruption
 * was found, quarantine/. Records are numbered from 1, consecutively.
 *
 * Guarantees:
 *  - An append of a batch is durable when it returns 0 (fdatasync; threads
 *    appending at once through one handle share one sync).
 *  - After any crash or power cut, the records a spool returns are a
 *    prefix of those appended (per sequence number, byte-exact), holding
 *    every record whose append returned 0. Nothing else is ever returned:
 *    each record's frame carries its sequence number, its position and a
 *    CRC-32C bound to its segment, so torn writes and stale bytes fail.
 *  - Opening never fails because of what the files hold, and damage
 *    never costs a record that is not in the damaged bytes:
 *     - damaged bytes are never deleted: a damaged stretch inside any
 *       segment, and a torn tail (no valid frame after it), are copied to
 *       quarantine/SEGMENT@OFFSET before the segment is cut; zeros alone
 *       after the last frame are no torn tail but the space an appender
 *       writes ahead of its tail (so that a small append changes neither
 *       the file's size nor its blocks, and its fdatasync commits no
 *       metadata), cut without a report;
 *     - the valid frames after damage (this segment's salt, their own
 *       offset and a later number) are salvaged into a segment of their
 *       own, named by their first number, and read in order;
 *     - a damaged header whose salt still validates the frames costs
 *       no record: the file is copied to quarantine/, its frames
 *       salvaged;
 *     - an entry named like a segment that is not one of this spool's
 *       (not a regular file, a bad header, another number) is moved to
 *       quarantine/ whole, before the last segment is chosen;
 *     - a cursor ahead of the data is kept: the next record appended gets
 *       its number, so no acknowledged number is handed out twice, and
 *       nothing is dropped on its word; a cursor that is not a valid file
 *       goes to quarantine/ and reading starts at the oldest record;
 *     - nothing is followed out of the spool: segments and the cursor are
 *       opened O_NOFOLLOW|O_NONBLOCK and type-checked (a FIFO never
 *       hangs), a quarantine/ that is not a directory is moved into a new
 *       one;
 *     - every loss is reported: the damage callback, the stat counters,
 *       and records missing from the cursor on are found again at every
 *       open (fsafe_spool_check keeps reporting them until consumed).
 *    Opening again after a crash during that recovery finishes it.
 *    FSAFE_SPOOL_RDONLY opens without changing anything (and without
 *    the lock but for a shared moment): damage is reported, and readers
 *    go past it in place.
 *    Limit: a valid segment copied in from another spool under a fitting
 *    name cannot be told from this spool's own (segments carry no spool
 *    identity); its records are read as this spool's.
 *  - Reading holds one record (and a small buffer) in memory, never a
 *    segment.
 *
 * Any number of processes append at once, beside one process that reads
 * and acks: each batch takes the next numbers in one piece, no number is
 * handed out twice, and a reader sees every record whose append returned
 * 0 once, in order, when it is durable and never before. The spool's lock
 * (a flock on the directory, dropped by the kernel with a killed holder)
 * is held for one append round, one ack, one open's recovery; a head file
 * in the directory publishes the durable end to the other processes (it
 * is rebuilt at every open, never trusted after a crash). Within a
 * process, fsafe_spool_append may be called from many threads at once
 * (they share a sync); the other calls on one handle must not run
 * concurrently with each other (appends may run beside them). Two
 * processes acking at once is not supported.
 */
#ifndef FSAFE_SPOOL_H
#define FSAFE_SPOOL_H

#include "fsafe.h"

#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_spool fsafe_spool;
typedef struct fsafe_spool_reader fsafe_spool_reader;

enum {
	/* Create the directory and its missing parents (mkdir -p, 0777 less
	   the umask) if missing, each synced into its parent. */
	FSAFE_SPOOL_CREATE = 1u << 0,
	/* Change nothing on disk: damage is found (and reported through
	   `damage`) but not repaired; reading goes past damage in place.
	   Append and ack fail with -EBADF. */
	FSAFE_SPOOL_RDONLY = 1u << 1,
};

struct fsafe_spool_opts {
	size_t size;           /* sizeof(struct fsafe_spool_opts), or 0 */
	unsigned flags;        /* FSAFE_SPOOL_* */
	uint64_t segment_size; /* roll over to a new segment past this many
	                          bytes; 0: 64 MiB. It must hold a header and
	                          one frame of the longest record: more than
	                          64 bytes and at least max_record + 64; at
	                          most 1 TiB. Else open fails with -EINVAL */
	uint32_t max_record;   /* longest record appended (bytes); 0: 1 MiB,
	                          or segment_size - 64 when that is less; at
	                          most 256 MiB (-EINVAL above) */
	/* Optional: filled in when the open fails, and kept by the handle:
	   every later call on it, or on a reader made from it, that fails
	   fills it too (step and errno). */
	struct fsafe_error *error;
	fsafe_damage_fn damage;    /* optional: called for each problem that
	                              opening finds and repairs */
	void *damage_arg;
};

#define FSAFE_SPOOL_OPTS_INIT FSAFE__INIT(struct fsafe_spool_opts)
#define FSAFE_SPOOL_OPTS_SIZE_V0                                    \
	(offsetof(struct fsafe_spool_opts, damage_arg) +            \
	 sizeof(((struct fsafe_spool_opts *)0)->damage_arg))

/* Open (and recover) the spool in directory `path` relative to `dirfd`. */
FSAFE_API int fsafe_spool_open(int dirfd, const char *path,
                               const struct fsafe_spool_opts *opts,
                               fsafe_spool **out);

/* Close the handle (no sync needed: appends were durable). NULL: no-op. */
FSAFE_API void fsafe_spool_close(fsafe_spool *s);

/*
 * Append `n` records (recs[i].iov_base, recs[i].iov_len bytes, each at most
 * max_record; an empty record is allowed). Durable when it returns 0;
 * `*first_seq` (may be NULL) receives the first record's number.
 * -EMSGSIZE for an over-long record (nothing appended). After a failed
 * write or sync the handle refuses further appends with that error
 * (fsync failures cannot be retried safely): close and open again, which
 * keeps whichever of those records reached the disk whole.
 */
FSAFE_API int fsafe_spool_append(fsafe_spool *s, const struct iovec *recs,
                                 size_t n, uint64_t *first_seq);

/* fsafe_spool_reader_open's `from` for "at the consumer cursor". */
#define FSAFE_SPOOL_FROM_CURSOR UINT64_MAX

/*
 * Read records in order from sequence number `from` (or the cursor), up to
 * the last durable record, including those that become durable while it
 * reads. Numbers below the oldest record kept start at the oldest.
 */
FSAFE_API int fsafe_spool_reader_open(fsafe_spool *s, uint64_t from,
                                      fsafe_spool_reader **out);

/*
 * The next record: 1 with *data / *len / *seq set (the bytes stay valid
 * until the next call on this reader), 0 at the end, or a negative errno.
 * A segment that turned corrupt since open is skipped from where it
 * stops being valid (the next open quarantines it).
 */
FSAFE_API int fsafe_spool_next(fsafe_spool_reader *r, const void **data,
                               size_t *len, uint64_t *seq);

FSAFE_API void fsafe_spool_reader_close(fsafe_spool_reader *r);

/*
 * Records up to and including `seq` are consumed: the cursor moves past
 * it (durably, with the atomic writer), then segments wholly before the
 * cursor are deleted. A `seq` beyond the last record is clamped to it; one
 * before the cursor changes nothing.
 */
FSAFE_API int fsafe_spool_ack(fsafe_spool *s, uint64_t seq);

struct fsafe_spool_stat {
	size_t size;            /* sizeof(struct fsafe_spool_stat) */
	uint64_t cursor;        /* next record to consume */
	uint64_t first_seq;     /* oldest record kept (== next_seq if none) */
	uint64_t next_seq;      /* number the next appended record gets */
	uint64_t segments;      /* segment files */
	uint64_t bytes;         /* their total size (the zeros an appender
	                           reserves ahead of the tail included) */
	uint64_t quarantined;   /* segments moved to quarantine/ when this
	                           handle was opened */
	uint64_t truncated;     /* bytes of torn tail cut at open */
	uint64_t dropped;       /* segments before the cursor deleted */
	/* Damage found at open (see "Damage" above): */
	uint64_t quarantined_bytes; /* bytes copied to quarantine/ from
	                               inside segments (torn tails too) */
	uint64_t salvaged;      /* valid records after damage kept */
	uint64_t lost;          /* unconsumed records known to be missing */
	uint64_t cursor_ahead;  /* numbers the cursor was past the data */
	uint64_t quarantine_entries; /* entries in quarantine/ now (every
	                                open's, so it survives a reopen) */
};

#define FSAFE_SPOOL_STAT_INIT FSAFE__INIT(struct fsafe_spool_stat)
#define FSAFE_SPOOL_STAT_SIZE_V0                                    \
	(offsetof(struct fsafe_spool_stat, quarantine_entries) +    \
	 sizeof(((struct fsafe_spool_stat *)0)->quarantine_entries))

/* Fill `st` (st->size set by the caller, as with the option structs:
   -EINVAL below FSAFE_SPOOL_STAT_SIZE_V0). */
FSAFE_API int fsafe_spool_stat(fsafe_spool *s, struct fsafe_spool_stat *st);

/*
 * The spool's id: 128 random bits as 32 lowercase hex digits and a NUL,
 * made at creation (a spool made before ids gets one at its first open
 * for writing), kept in the file "id" and never changed; a consumer
 * names records "<id>-<seq>" to let a receiver drop duplicates. 0;
 * -ENOENT for a spool without one opened FSAFE_SPOOL_RDONLY; -EBADMSG
 * (or -ELOOP, -EISDIR, -EBADFD) when "id" is damaged: it is left as it
 * is, and the spool opens all the same.
 */
FSAFE_API int fsafe_spool_id(fsafe_spool *s, char out[33]);

/*
 * Damage (the shape of every store's check and repair, fsafe.h): check
 * reports every problem without changing anything (no recovery; the lock
 * shared for its walk, 2 s at most, so an append in progress is no torn
 * tail): segment entries that are not this spool's (not a regular
 * file, a bad header, a header naming another number), damaged stretches
 * inside a segment, a torn tail, records missing from the cursor on, a
 * cursor that does not validate or is ahead of the data, a quarantine/
 * that is not a directory. Returns the number of problems (0: clean) or a
 * negative errno. repair opens the spool (taking its lock) and applies
 * the rules below, reporting each problem with what it did; opening
 * applies the same rules (fsafe_spool_opts.damage sees them).
 */
FSAFE_API int fsafe_spool_check(int dirfd, const char *path,
                                fsafe_damage_fn fn, void *arg);
FSAFE_API int fsafe_spool_repair(int dirfd, const char *path,
                                 fsafe_damage_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif
