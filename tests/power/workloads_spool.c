/*
 * The spool's power-loss workloads (issue 9): append, rollover, ack and
 * recovery of a damaged spool. After any cut and the spool's own recovery
 * (an open), the records read from the start are a run of consecutive
 * numbers with exactly the bytes appended under them, hold every record
 * whose append returned 0 (and every older record the fixture had, except
 * those of the segment it corrupted), and nothing never appended.
 */
#define _GNU_SOURCE
#include "power.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsafe.h"
#include "spool.h"

#define SP "sp"
#define NAME(n) "000000000000000000" #n ".seg"

static const char *const spool_dirs[] = { ".", SP, SP "/quarantine", NULL };
/* Segment names by first record; quarantine may hold a second copy when
   a cut kept only the new half of its rename (the next open moves the
   old name in again, under a fresh suffix), and the bytes cut from a
   segment (SEGMENT@OFFSET, again with a suffix when a cut repeats it). */
static const char *const spool_known[] = {
	SP, "cursor", "head", "id", "quarantine", NAME(01), NAME(02), NAME(03),
	NAME(04), NAME(05), NAME(06), NAME(07), NAME(08), NAME(09), NAME(03) ".1",
	NAME(01) "@*", NAME(02) "@*", NAME(03) "@*", NAME(04) "@*",
	NAME(05) "@*", NAME(06) "@*", NAME(07) "@*", NAME(08) "@*",
	NAME(09) "@*", NULL,
};

/* Record n's bytes: short, distinct, never all zero. */
static size_t rec(uint64_t n, unsigned char *out)
{
	size_t len = 20 + (size_t)(n * 7 % 23);

	for (size_t i = 0; i < len; i++)
		out[i] = (unsigned char)(0x41 + (n * 5 + i) % 50);
	return len;
}

static int open_sp(int root, unsigned flags, uint64_t segsize,
                   fsafe_spool **s)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;

	o.flags = flags;
	o.segment_size = segsize;
	o.max_record = 64;
	return fsafe_spool_open(root, SP, &o, s);
}

static int append(fsafe_spool *s, uint64_t first, int n)
{
	unsigned char b[4][64];
	struct iovec v[4];
	uint64_t got;

	for (int i = 0; i < n; i++)
		v[i] = (struct iovec){ b[i], rec(first + (uint64_t)i, b[i]) };
	int r = fsafe_spool_append(s, v, (size_t)n, &got);
	return r == 0 && got != first ? -EPROTO : r;
}

/* ---- fixtures: segments built with the frame encoder, plain writes ---- */

static void put_segment(int dirfd, uint64_t first, uint64_t n, bool torn)
{
	unsigned char buf[1024], r[64];
	struct fsafe__seg_hdr h = { first, 0x1234 + first, 64 };
	char name[FSAFE__SEG_NAME_LEN + 1];
	size_t off = FSAFE__SEG_HDR;

	fsafe__seg_hdr_encode(buf, &h);
	for (uint64_t k = first; k < first + n; k++) {
		size_t len = rec(k, r);
		memcpy(buf + off + FSAFE__FRAME_HDR, r, len);
		fsafe__frame_encode(buf + off, h.salt, k, off, r,
		                    (uint32_t)len);
		off += FSAFE__FRAME_HDR + len;
	}
	if (torn) { /* half a frame after the last, as a cut leaves it */
		memcpy(buf + off, buf + FSAFE__SEG_HDR, 20);
		off += 20;
	}
	fsafe__seg_name(name, first);
	pw_put(dirfd, name, buf, off);
}

static int sp_dir(int root)
{
	if (mkdirat(root, SP, 0777) < 0)
		abort();
	int fd = openat(root, SP, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		abort();
	return fd;
}

/* Records 1-2 and 3-4 in two segments. */
static void old_two_segments(int root)
{
	int fd = sp_dir(root);

	put_segment(fd, 1, 2, false);
	put_segment(fd, 3, 2, false);
	close(fd);
}

/* Records 1-2, 3-4 (corrupt), 5-6 with a torn tail. */
static void old_damaged(int root)
{
	int fd = sp_dir(root);
	unsigned char x = 0xee;

	put_segment(fd, 1, 2, false);
	put_segment(fd, 3, 2, false);
	put_segment(fd, 5, 2, true);
	int seg = openat(fd, NAME(03), O_WRONLY | O_CLOEXEC);
	if (seg < 0 || pwrite(seg, &x, 1, FSAFE__SEG_HDR +
	                                  FSAFE__FRAME_HDR + 3) != 1)
		abort();
	close(seg);
	close(fd);
}

/* ---- runs --------------------------------------------------------------- */

/* Op 0 open; then one op per batch; the last op closes nothing (a cut
   has no close). */
static void run_append(int root, struct pw_progress *p)
{
	fsafe_spool *s;
	int r = open_sp(root, FSAFE_SPOOL_CREATE, 0, &s);

	pw_returned(p, 0, r);
	if (r < 0)
		return;
	pw_returned(p, 1, append(s, 1, 3));
	pw_returned(p, 2, append(s, 4, 2));
	fsafe_spool_close(s);
}

/* Segments of at most 160 bytes: every batch of two rolls over. */
static void run_rollover(int root, struct pw_progress *p)
{
	fsafe_spool *s;
	int r = open_sp(root, FSAFE_SPOOL_CREATE, 160, &s);

	pw_returned(p, 0, r);
	if (r < 0)
		return;
	pw_returned(p, 1, append(s, 1, 2));
	pw_returned(p, 2, append(s, 3, 2));
	pw_returned(p, 3, append(s, 5, 2));
	fsafe_spool_close(s);
}

/*
 * Two handles on one spool append in turn: each has its own open file
 * description, so they share it as two processes do (the lock, the head,
 * taking up the other's tail and its rollovers), in a deterministic order
 * that both layers can cut at every call. Segments of 160 bytes: most
 * batches roll over, the first one of the other handle's segment.
 */
static void run_two(int root, struct pw_progress *p)
{
	fsafe_spool *a = NULL, *b = NULL;
	int r = open_sp(root, FSAFE_SPOOL_CREATE, 160, &a);

	pw_returned(p, 0, r);
	if (r == 0)
		pw_returned(p, 1, r = open_sp(root, 0, 160, &b));
	if (r == 0) {
		pw_returned(p, 2, append(a, 1, 2));
		pw_returned(p, 3, append(b, 3, 1));
		pw_returned(p, 4, append(a, 4, 2));
		pw_returned(p, 5, append(b, 6, 2));
	}
	fsafe_spool_close(b);
	fsafe_spool_close(a);
}

static void run_ack(int root, struct pw_progress *p)
{
	fsafe_spool *s;
	int r = open_sp(root, 0, 0, &s);

	pw_returned(p, 0, r);
	if (r < 0)
		return;
	pw_returned(p, 1, fsafe_spool_ack(s, 2));
	pw_returned(p, 2, append(s, 5, 1));
	fsafe_spool_close(s);
}

static void run_recover(int root, struct pw_progress *p)
{
	fsafe_spool *s;
	int r = open_sp(root, 0, 0, &s);

	pw_returned(p, 0, r);
	if (r < 0)
		return;
	pw_returned(p, 1, append(s, 7, 1));
	fsafe_spool_close(s);
}

/* ---- recovery and checks ------------------------------------------------ */

static const char *recover_spool(const struct pw_workload *w, int root,
                                 char *buf, size_t len)
{
	struct stat st;
	fsafe_spool *s;
	const char *bad = pw_sweep_all(w, root, buf, len);

	if (bad)
		return bad;
	if (fstatat(root, SP, &st, 0) < 0)
		return NULL; /* the spool's directory never became durable */
	int r = open_sp(root, 0, 0, &s);
	if (r < 0) {
		snprintf(buf, len, "the spool does not open after the cut: %s",
		         fsafe_strerror(r));
		return buf;
	}
	fsafe_spool_close(s);
	return NULL;
}

/*
 * Read from 1: consecutive numbers (skipping [gap_lo, gap_hi)), each with
 * its bytes, the last at least `floor` and at most `ceil`.
 */
static const char *expect_run(int root, uint64_t gap_lo, uint64_t gap_hi,
                              uint64_t must_from, uint64_t floor,
                              uint64_t ceil, char *buf, size_t len)
{
	unsigned char want[64];
	fsafe_spool *s;
	fsafe_spool_reader *rd;
	const void *d;
	size_t n;
	uint64_t seq, expect = 0, last = 0;
	struct stat st;

	if (fstatat(root, SP, &st, 0) < 0) {
		if (!floor)
			return NULL;
		snprintf(buf, len, "spool gone, record %llu was durable",
		         (unsigned long long)floor);
		return buf;
	}
	int r = open_sp(root, 0, 0, &s);
	if (r < 0) {
		snprintf(buf, len, "open: %s", fsafe_strerror(r));
		return buf;
	}
	fsafe_spool_reader_open(s, 1, &rd);
	while ((r = fsafe_spool_next(rd, &d, &n, &seq)) == 1) {
		while (expect >= gap_lo && expect < gap_hi)
			expect++;
		if ((expect && seq != expect) || (!expect && seq > must_from) ||
		    n != rec(seq, want) || memcmp(d, want, n) != 0 ||
		    (seq >= gap_lo && seq < gap_hi) || seq > ceil) {
			snprintf(buf, len, "record %llu is wrong or out of "
			         "place (expected %llu)",
			         (unsigned long long)seq,
			         (unsigned long long)expect);
			break;
		}
		expect = seq + 1;
		last = seq;
	}
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
	if (r == 1)
		return buf;
	if (last < floor) {
		snprintf(buf, len, "last record %llu, but %llu was durable",
		         (unsigned long long)last, (unsigned long long)floor);
		return buf;
	}
	return NULL;
}

static const char *check_append(int root, const struct pw_progress *p,
                                char *buf, size_t len)
{
	uint64_t floor = pw_done(p, 2, 0) ? 5 : pw_done(p, 1, 0) ? 3 : 0;

	return expect_run(root, 0, 0, 1, floor, 5, buf, len);
}

static const char *check_rollover(int root, const struct pw_progress *p,
                                  char *buf, size_t len)
{
	uint64_t floor = pw_done(p, 3, 0) ? 6 : pw_done(p, 2, 0) ? 4
	                 : pw_done(p, 1, 0) ? 2 : 0;

	return expect_run(root, 0, 0, 1, floor, 6, buf, len);
}

static const char *check_two(int root, const struct pw_progress *p,
                             char *buf, size_t len)
{
	uint64_t floor = pw_done(p, 5, 0) ? 7 : pw_done(p, 4, 0) ? 5
	                 : pw_done(p, 3, 0) ? 3 : pw_done(p, 2, 0) ? 2 : 0;

	return expect_run(root, 0, 0, 1, floor, 7, buf, len);
}

static const char *check_ack(int root, const struct pw_progress *p,
                             char *buf, size_t len)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	fsafe_spool *s;
	const char *bad = expect_run(root, 0, 0, 3,
	                             pw_done(p, 2, 0) ? 5 : 4, 5, buf, len);

	if (bad || !pw_done(p, 1, 0))
		return bad;
	if (open_sp(root, 0, 0, &s) < 0)
		return "open";
	fsafe_spool_stat(s, &st);
	fsafe_spool_close(s);
	if (st.cursor != 3) {
		snprintf(buf, len, "ack of 2 returned, the cursor is %llu",
		         (unsigned long long)st.cursor);
		return buf;
	}
	return NULL;
}

static const char *check_recover(int root, const struct pw_progress *p,
                                 char *buf, size_t len)
{
	/* Record 3 is damaged; 4, after it in the same segment, is salvaged. */
	return expect_run(root, 3, 4, 1, pw_done(p, 1, 0) ? 7 : 6, 7, buf,
	                  len);
}

const struct pw_workload pw_spool_workloads[] = {
	{ .name = "spool: create, append two batches", .dirs = spool_dirs,
	  .known = spool_known, .run = run_append, .recover = recover_spool,
	  .check = check_append },
	{ .name = "spool: append with a rollover per batch",
	  .dirs = spool_dirs, .known = spool_known, .run = run_rollover,
	  .recover = recover_spool, .check = check_rollover },
	{ .name = "spool: two handles append in turn, as two processes",
	  .dirs = spool_dirs, .known = spool_known, .run = run_two,
	  .recover = recover_spool, .check = check_two },
	{ .name = "spool: ack (cursor, drop a segment), append",
	  .dirs = spool_dirs, .known = spool_known,
	  .setup_old = old_two_segments, .run = run_ack,
	  .recover = recover_spool, .check = check_ack },
	{ .name = "spool: recovery (quarantine, torn tail), append",
	  .dirs = spool_dirs, .known = spool_known,
	  .setup_old = old_damaged, .run = run_recover,
	  .recover = recover_spool, .check = check_recover },
};
const size_t pw_spool_nworkloads =
	sizeof(pw_spool_workloads) / sizeof(pw_spool_workloads[0]);
