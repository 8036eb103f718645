/*
 * Recovery from every kind of damage a crash, a disk or a person can leave:
 * torn tails, zero-filled tails, stale frames of an earlier file at the
 * right place with the right number, bit flips in a middle segment, a bad
 * header, a missing old segment, a garbage or runaway cursor. Each case:
 * open succeeds, only valid records come back, and opening again changes
 * nothing more (idempotent).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "spool.h"
#include "spoolutil.h"
#include "testutil.h"

/* The fixture every spool test shares (spoolutil.c). */
#define fx su_fx
#define setup su_fx_setup
#define teardown su_fx_teardown

static char *seg_path(struct fx *f, uint64_t first)
{
	static char p[4200];
	char name[FSAFE__SEG_NAME_LEN + 1];

	fsafe__seg_name(name, first);
	snprintf(p, sizeof(p), "%s/%s", f->sp, name);
	return p;
}

/* Segment first numbers, ascending, from the spool directory. */
static int segments(struct fx *f, uint64_t *out, int max)
{
	fsafe_spool *s = su_open(f->fd, "sp", 0, 0);
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq;
	int n = 0;

	/* The records' numbers where a file starts: read, stat each name. */
	assert_int_equal(fsafe_spool_reader_open(s, 1, &rd), 0);
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1 && n < max)
		if (access(seg_path(f, seq), F_OK) == 0)
			out[n++] = seq;
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
	return n;
}

static off_t file_size(const char *p)
{
	struct stat st;

	assert_int_equal(stat(p, &st), 0);
	return st.st_size;
}

static void append_raw(const char *p, const void *buf, size_t len)
{
	int fd = open(p, O_WRONLY | O_APPEND);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void poke(const char *p, off_t off, unsigned char xor_mask)
{
	unsigned char c;
	int fd = open(p, O_RDWR);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, off), 1);
	c ^= xor_mask;
	assert_int_equal(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

/* Open, expect `n` records from 1..n (first may be later), check the
   stats, and check a second open finds nothing left to repair. */
static void expect_records(struct fx *f, uint64_t first, uint64_t last,
                           uint64_t quarantined, bool truncated)
{
	uint64_t a, b;
	fsafe_spool *s = su_open(f->fd, "sp", 0, 0);
	struct fsafe_spool_stat st = su_stat(s);

	uint64_t n = su_read_all(s, 1, &a, &b);
	if (first) {
		assert_int_equal(a, first);
		assert_int_equal(b, last);
	} else {
		assert_int_equal(n, 0);
	}
	assert_int_equal(st.quarantined, quarantined);
	assert_int_equal(st.truncated != 0, truncated);
	fsafe_spool_close(s);
	s = su_open(f->fd, "sp", 0, 0);
	st = su_stat(s);
	assert_int_equal(st.quarantined + st.truncated, 0);
	su_read_all(s, 1, &a, &b);
	if (first)
		assert_true(a == first && b == last);
	fsafe_spool_close(s);
}

static void fill(struct fx *f, uint64_t seg, uint64_t n)
{
	fsafe_spool *s = su_open(f->fd, "sp", seg, 300);

	assert_int_equal(su_append(s, 1, n, 5), 0);
	fsafe_spool_close(s);
}

static void test_torn_tail(void **state)
{
	struct fx *f = *state;
	char *p;

	fill(f, 0, 50);
	p = seg_path(f, 1);
	/* Cut the last record short by 3 bytes (it must hold some bytes). */
	assert_int_equal(truncate(p, file_size(p) - 3 -
	                              (off_t)su_record(50, (unsigned char[300]){ 0 }) / 2),
	                 0);
	expect_records(f, 1, 49, 0, true);
	/* Appending continues at 50, in place of the torn one. */
	fsafe_spool *s = su_open(f->fd, "sp", 0, 300);
	assert_int_equal(su_append(s, 50, 10, 3), 0);
	fsafe_spool_close(s);
	expect_records(f, 1, 59, 0, false);
}

/*
 * Zeros after the last frame are the space an appender makes ahead of its
 * tail (or blocks a crash left unwritten): no torn tail, nothing to
 * quarantine, the segment cut back to its frames. Anything else there is
 * a torn tail, the zeros before it included.
 */
static void test_zero_and_garbage_tail(void **state)
{
	struct fx *f = *state;
	static unsigned char zeros[8192], junk[5000];

	fill(f, 0, 40);
	off_t frames = file_size(seg_path(f, 1));
	append_raw(seg_path(f, 1), zeros, sizeof(zeros));
	expect_records(f, 1, 40, 0, false);
	assert_int_equal(file_size(seg_path(f, 1)), frames);
	append_raw(seg_path(f, 1), zeros, sizeof(zeros));
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 7 + 3);
	append_raw(seg_path(f, 1), junk, sizeof(junk));
	expect_records(f, 1, 40, 0, true);
}

/*
 * An appender's reserve, and bytes one that died left in it unpublished:
 * a live handle's append finds them at the tail (not zeros), copies them
 * to quarantine and cuts them before it writes; a closed spool's segment
 * ends at its last frame.
 */
static void test_abandoned_in_reserve_quarantined(void **state)
{
	struct fx *f = *state;
	static unsigned char junk[300];
	char *p = seg_path(f, 1);
	uint64_t a, b;

	fill(f, 0, 5);
	off_t tail = file_size(p);
	fsafe_spool *s = su_open(f->fd, "sp", 0, 300);
	assert_int_equal(su_append(s, 6, 1, 1), 0);
	assert_int_equal(su_append(s, 7, 1, 1), 0); /* not its first */
	assert_true(file_size(p) > tail + 4096); /* reserved ahead */
	fsafe_spool_close(s);
	assert_int_equal(fsafe_spool_check(f->fd, "sp", NULL, NULL), 0);
	tail = file_size(p); /* trimmed to its frames at close */

	/* Opened (its view taken), then another appender's bytes appear
	   at the tail, zeros after them, and it dies. */
	s = su_open(f->fd, "sp", 0, 300);
	memset(junk, 0xab, sizeof(junk));
	int fd = open(p, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, tail + (1 << 20)), 0);
	assert_int_equal(pwrite(fd, junk, sizeof(junk), tail),
	                 (ssize_t)sizeof(junk));
	close(fd);
	assert_int_equal(su_append(s, 8, 1, 1), 0);
	assert_true(su_stat(s).truncated >= sizeof(junk));
	assert_int_equal(su_read_all(s, 1, &a, &b), 8);
	fsafe_spool_close(s);
	assert_int_equal(fsafe_spool_check(f->fd, "sp", NULL, NULL), 0);
}

/* The frames of records first .. first + n - 1 (su_record's lengths). */
static uint64_t frames_of(uint64_t first, uint64_t n)
{
	unsigned char buf[300];
	uint64_t bytes = 0;

	for (uint64_t q = first; q < first + n; q++)
		bytes += FSAFE__FRAME_HDR + su_record(q, buf);
	return bytes;
}

/*
 * The reserve grows with what the handle has appended: none for its first
 * append (a one-shot appender, such as `fsafe spool append`, would pay for
 * zeros that its own close cuts again), then about as much as it has
 * appended, up to 1 MiB.
 */
static void test_reserve_grows_with_appender(void **state)
{
	struct fx *f = *state;
	char *p = seg_path(f, 1);
	uint64_t next = 6, appended = 0, most = 0;

	fill(f, 0, 5);
	uint64_t tail = (uint64_t)file_size(p);
	fsafe_spool *s = su_open(f->fd, "sp", 0, 300);
	/* One record, then 64 an append, until the handle wrote 2 MiB. */
	while (appended < 2u << 20) {
		uint64_t n = next == 6 ? 1 : 64, len = frames_of(next, n);
		assert_int_equal(su_append(s, next, n, 64), 0);
		tail += len;
		appended += len;
		next += n;
		uint64_t ahead = (uint64_t)file_size(p) - tail;
		if (next == 7)
			assert_int_equal(ahead, 0); /* none for a first append */
		/* Never more than the handle has appended (a page at least),
		   rounded up to a page; never more than 1 MiB. */
		assert_true(ahead <= (appended > 4096 ? appended : 4096) + 4096);
		assert_true(ahead <= (1u << 20) + 4096);
		if (ahead > most)
			most = ahead;
	}
	assert_true(most >= 1u << 20);
	fsafe_spool_close(s);
	assert_int_equal(file_size(p), (off_t)tail); /* cut at close */
	expect_records(f, 1, next - 1, 0, false);
}

/*
 * Another handle's close cuts the file back to its frames, reserve and
 * all: a handle that made a reserve before sees at its next append that
 * the file ends at the tail, and makes one again.
 */
static void test_reserve_made_again_after_cut(void **state)
{
	struct fx *f = *state;
	char *p = seg_path(f, 1);

	fill(f, 0, 5);
	/* Both open first: an open can change the head's gen, after which
	   a handle takes the tail up afresh anyway. */
	fsafe_spool *a = su_open(f->fd, "sp", 0, 300);
	fsafe_spool *b = su_open(f->fd, "sp", 0, 300);
	assert_int_equal(su_append(a, 6, 1, 1), 0);
	assert_int_equal(su_append(a, 7, 64, 64), 0); /* a reserves */
	assert_int_equal(su_append(b, 71, 1, 1), 0);
	assert_int_equal(su_append(b, 72, 1, 1), 0); /* b too */
	fsafe_spool_close(b); /* and cuts the file at its frames */
	off_t cut = file_size(p);
	assert_int_equal(su_append(a, 73, 1, 1), 0);
	assert_true((uint64_t)file_size(p) > (uint64_t)cut + frames_of(73, 1));
	fsafe_spool_close(a);
	expect_records(f, 1, 73, 0, false);
}

/*
 * The reserve is per segment: a rollover's new segment gets its own from
 * its header on, not only once its tail passes the old segment's mark.
 */
static void test_reserve_follows_rollover(void **state)
{
	struct fx *f = *state;
	const uint64_t seg = 2u << 20;
	fsafe_spool *s = su_open(f->fd, "sp", seg, 300);
	uint64_t next = 1;

	/* Small appends (64 records, about 12 KiB) until one rolls over. */
	while (su_stat(s).segments < 2) {
		assert_true(next < seg / 64); /* it must roll over */
		assert_int_equal(su_append(s, next, 64, 64), 0);
		next += 64;
	}
	off_t old = file_size(seg_path(f, 1));
	assert_true(old < (off_t)seg); /* cut back to its frames */
	uint64_t fresh = su_stat(s).bytes - (uint64_t)old;
	assert_true(fresh >= 1u << 20); /* reserved ahead */
	assert_true(fresh <= seg);
	fsafe_spool_close(s);
	assert_int_equal(fsafe_spool_check(f->fd, "sp", NULL, NULL), 0);
	expect_records(f, 1, next - 1, 0, false);
}

/*
 * Stale bytes of an earlier life of the file: frames with the very numbers
 * and offsets the current file would have next, and correct checksums of
 * their own. Only the segment's salt tells them apart.
 */
static void test_stale_frames_rejected(void **state)
{
	struct fx *f = *state;
	size_t len;

	fill(f, 0, 60);
	char *old = tu_get(f->sp, "00000000000000000001.seg", &len);
	tu_rmtree(f->sp);
	fill(f, 0, 20);
	char *p = seg_path(f, 1);
	off_t cut = file_size(p);
	/* Same record lengths (su_record), so offsets line up exactly. */
	append_raw(p, old + cut, len - (size_t)cut);
	assert_int_equal(file_size(p), (off_t)len);
	expect_records(f, 1, 20, 0, true);
	free(old);
}

/* A frame of the same segment replayed after itself: right checksum and
   salt; only its number and position give it away. */
static void test_replayed_frame_rejected(void **state)
{
	struct fx *f = *state;
	size_t len, off = FSAFE__SEG_HDR, lastoff = 0;

	fill(f, 0, 30);
	char *b = tu_get(f->sp, "00000000000000000001.seg", &len);
	while (off < len) {
		lastoff = off;
		off += FSAFE__FRAME_HDR + (size_t)(unsigned char)b[off + 4] +
		       ((size_t)(unsigned char)b[off + 5] << 8);
	}
	assert_int_equal(off, len);
	append_raw(seg_path(f, 1), b + lastoff, len - lastoff);
	expect_records(f, 1, 30, 0, true);
	free(b);
}

/* A frame copied from another segment carries the wrong salt, number or
   position, whichever it is. */
static void test_foreign_frame_rejected(void **state)
{
	struct fx *f = *state;
	uint64_t segs[64];
	size_t alen, blen;

	fill(f, 1024, 60);
	int n = segments(f, segs, 64);
	assert_true(n >= 3);
	char name[FSAFE__SEG_NAME_LEN + 1];
	fsafe__seg_name(name, segs[0]);
	char *a = tu_get(f->sp, name, &alen);
	fsafe__seg_name(name, segs[n - 1]);
	char *b = tu_get(f->sp, name, &blen);
	/* Whole frames of the first segment after the last one's header. */
	append_raw(seg_path(f, segs[n - 1]), a + FSAFE__SEG_HDR,
	           alen - FSAFE__SEG_HDR);
	expect_records(f, 1, 60, 0, true);
	free(a);
	free(b);
}

/* Damage inside a middle segment costs the damaged record only: the
   frames after it are salvaged, the bad bytes kept in quarantine/. */
static void test_middle_bit_flip_salvaged(void **state)
{
	struct fx *f = *state;
	uint64_t segs[64], a, b;

	fill(f, 1024, 80);
	int n = segments(f, segs, 64);
	assert_true(n >= 4);
	/* Flip one bit in the payload of the second segment's first record. */
	poke(seg_path(f, segs[1]), FSAFE__SEG_HDR + FSAFE__FRAME_HDR + 40 % 5,
	     0x10);
	fsafe_spool *s = su_open(f->fd, "sp", 0, 0);
	struct fsafe_spool_stat st = su_stat(s);
	assert_int_equal(st.quarantined, 0);
	assert_int_equal(st.lost, 1);
	assert_int_equal(st.salvaged, segs[2] - segs[1] - 1);
	assert_true(st.quarantined_bytes > FSAFE__FRAME_HDR);
	assert_int_equal(st.quarantine_entries, 1);
	/* Every record but segs[1] comes back, in order. */
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq, got = 0, prev = 0;
	unsigned char want[300];
	assert_int_equal(fsafe_spool_reader_open(s, 1, &rd), 0);
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		assert_true(seq != segs[1] && seq > prev);
		assert_int_equal(len, su_record(seq, want));
		assert_memory_equal(d, want, len);
		prev = seq;
		got++;
	}
	assert_int_equal(got, 79);
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
	char q[4300], name[FSAFE__SEG_NAME_LEN + 1];
	fsafe__seg_name(name, segs[1]);
	snprintf(q, sizeof(q), "%s/quarantine/%s@%d", f->sp, name,
	         FSAFE__SEG_HDR);
	assert_int_equal(access(q, F_OK), 0);
	/* Idempotent (the loss is still reported); appends go on after the
	   last record. */
	s = su_open(f->fd, "sp", 1024, 300);
	st = su_stat(s);
	assert_int_equal(st.quarantined_bytes + st.salvaged, 0);
	assert_int_equal(st.lost, 1);
	assert_int_equal(su_append(s, 81, 5, 5), 0);
	su_read_all(s, segs[2], &a, &b);
	assert_true(a == segs[2] && b == 85);
	fsafe_spool_close(s);
}

/* A middle segment cut short (a disk lost its tail): the rest of its
   bytes go to quarantine, the later segments are untouched. */
static void test_middle_truncated_quarantined(void **state)
{
	struct fx *f = *state;
	uint64_t segs[64];

	fill(f, 1024, 80);
	int n = segments(f, segs, 64);
	assert_true(n >= 3);
	assert_int_equal(truncate(seg_path(f, segs[0]), 100), 0);
	expect_records(f, segs[1], 80, 0, false);
	fsafe_spool *s = su_open(f->fd, "sp", 0, 0);
	assert_int_equal(su_stat(s).lost, segs[1] - 1);
	fsafe_spool_close(s);
}

/* A damaged header costs no record when the salt it holds still
   validates the frames: they are salvaged, the old file kept in
   quarantine/. */
static void test_bad_last_header(void **state)
{
	struct fx *f = *state;
	uint64_t segs[64];

	fill(f, 1024, 80);
	int n = segments(f, segs, 64);
	poke(seg_path(f, segs[n - 1]), 3, 0xff);
	fsafe_spool *s = su_open(f->fd, "sp", 1024, 300);
	struct fsafe_spool_stat st = su_stat(s);
	assert_int_equal(st.salvaged, 81 - segs[n - 1]);
	assert_int_equal(st.lost, 0);
	assert_int_equal(st.quarantine_entries, 1);
	assert_int_equal(st.next_seq, 81);
	assert_int_equal(su_append(s, 81, 30, 4), 0);
	fsafe_spool_close(s);
	expect_records(f, 1, 110, 0, false);
}

/* A header whose salt is damaged too: the segment is not recognisably
   this spool's, and goes to quarantine whole. */
static void test_bad_last_header_and_salt(void **state)
{
	struct fx *f = *state;
	uint64_t segs[64];

	fill(f, 1024, 80);
	int n = segments(f, segs, 64);
	poke(seg_path(f, segs[n - 1]), 3, 0xff);
	poke(seg_path(f, segs[n - 1]), 17, 0xff);
	expect_records(f, 1, segs[n - 1] - 1, 1, false);
	/* Numbers continue after the last record kept. */
	fsafe_spool *s = su_open(f->fd, "sp", 1024, 300);
	assert_int_equal(su_stat(s).next_seq, segs[n - 1]);
	assert_int_equal(su_append(s, segs[n - 1], 30, 4), 0);
	fsafe_spool_close(s);
	expect_records(f, 1, segs[n - 1] + 29, 0, false);
}

static void test_empty_and_junk_segment_files(void **state)
{
	struct fx *f = *state;

	fill(f, 0, 10);
	tu_put(f->sp, "00000000000000000005.seg", "", 0); /* overlaps */
	tu_put(f->sp, "00000000000000000011.seg", "junk", 4);
	tu_put(f->sp, "0000000000000000011.seg", "not ours", 8);
	expect_records(f, 1, 10, 2, false);
	/* The file named like no segment is left alone. */
	assert_int_equal(access(f->sp, F_OK), 0);
	char p[4200];
	snprintf(p, sizeof(p), "%s/0000000000000000011.seg", f->sp);
	assert_int_equal(access(p, F_OK), 0);
}

static void test_missing_old_segment(void **state)
{
	struct fx *f = *state;
	uint64_t segs[64];

	fill(f, 1024, 80);
	int n = segments(f, segs, 64);
	assert_true(n >= 3);
	assert_int_equal(unlink(seg_path(f, segs[0])), 0);
	expect_records(f, segs[1], 80, 0, false);
}

static void put_cursor(struct fx *f, uint64_t v, bool good)
{
	unsigned char b[20];

	memcpy(b, "FSPCUR1", 8);
	for (int i = 0; i < 8; i++)
		b[8 + i] = (unsigned char)(v >> (8 * i));
	uint32_t c = fsafe__crc32c(0, b, 16) ^ (good ? 0 : 1);
	for (int i = 0; i < 4; i++)
		b[16 + i] = (unsigned char)(c >> (8 * i));
	tu_put(f->sp, "cursor", b, sizeof(b));
}

/* A cursor ahead of the data (records acknowledged, then the data cut
   from outside): no acknowledged number is handed out again, and what is
   appended next is read, now and after reopening. */
static void test_cursor_ahead_kept(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;

	fill(f, 0, 30);
	put_cursor(f, 1000000, true);
	fsafe_spool *s = su_open(f->fd, "sp", 0, 300);
	struct fsafe_spool_stat st = su_stat(s);
	assert_int_equal(st.cursor, 1000000);
	assert_int_equal(st.next_seq, 1000000);
	assert_int_equal(st.cursor_ahead, 1000000 - 31);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 0);
	assert_int_equal(su_append(s, 1000000, 3, 3), 0);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 3);
	fsafe_spool_close(s);
	s = su_open(f->fd, "sp", 0, 300);
	st = su_stat(s);
	assert_int_equal(st.cursor_ahead, 0);
	assert_int_equal(st.next_seq, 1000003);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 3);
	assert_true(a == 1000000 && b == 1000002);
	fsafe_spool_close(s);
}

static void test_cursor_garbage_redelivers(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;

	fill(f, 0, 30);
	put_cursor(f, 20, false);
	fsafe_spool *s = su_open(f->fd, "sp", 0, 300);
	assert_int_equal(su_stat(s).cursor, 1);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 30);
	fsafe_spool_close(s);
	tu_put(f->sp, "cursor", "x", 1);
	s = su_open(f->fd, "sp", 0, 300);
	assert_int_equal(su_stat(s).cursor, 1);
	fsafe_spool_close(s);
	put_cursor(f, 20, true);
	s = su_open(f->fd, "sp", 0, 300);
	assert_int_equal(su_read_all(s, FSAFE_SPOOL_FROM_CURSOR, &a, &b), 11);
	fsafe_spool_close(s);
}

struct report {
	int n;
	uint64_t lost;
};

static int on_damage(const struct fsafe_damage *d, void *arg)
{
	struct report *r = arg;

	r->n++;
	r->lost += d->lost;
	assert_non_null(d->path);
	assert_non_null(d->what);
	assert_null(d->action); /* check repairs nothing */
	return 0;
}

/* check reports damage and repairs nothing. */
static void test_check_reports_without_repair(void **state)
{
	struct fx *f = *state;
	uint64_t segs[64];
	struct report r = { 0 };

	fill(f, 1024, 80);
	int n = segments(f, segs, 64);
	assert_int_equal(fsafe_spool_check(f->fd, "sp", on_damage, &r), 0);
	assert_int_equal(r.n, 0);
	poke(seg_path(f, segs[1]), FSAFE__SEG_HDR + 2, 0x01);
	off_t before = file_size(seg_path(f, segs[n - 1]));
	append_raw(seg_path(f, segs[n - 1]), "torn", 4);
	r = (struct report){ 0 };
	assert_int_equal(fsafe_spool_check(f->fd, "sp", on_damage, &r), 2);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.lost, 1); /* the first record of segs[1] */
	assert_int_equal(file_size(seg_path(f, segs[n - 1])), before + 4);
	assert_int_equal(fsafe_spool_check(f->fd, "nope", NULL, NULL),
	                 -ENOENT);
}

/* FSAFE_SPOOL_RDONLY: the damage is found and read past, nothing on disk
   changes, and the handle refuses to write. */
static void test_rdonly_changes_nothing(void **state)
{
	struct fx *f = *state;
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	uint64_t segs[64], seq, got = 0;
	fsafe_spool *s;
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;

	fill(f, 1024, 80);
	int n = segments(f, segs, 64);
	poke(seg_path(f, segs[1]), FSAFE__SEG_HDR + FSAFE__FRAME_HDR + 1, 0x10);
	append_raw(seg_path(f, segs[n - 1]), "torn", 4);
	off_t mid = file_size(seg_path(f, segs[1]));
	off_t last = file_size(seg_path(f, segs[n - 1]));
	o.flags = FSAFE_SPOOL_RDONLY;
	assert_int_equal(fsafe_spool_open(f->fd, "sp", &o, &s), 0);
	struct fsafe_spool_stat st = su_stat(s);
	assert_int_equal(st.lost, 1);
	assert_int_equal(st.next_seq, 81);
	assert_int_equal(fsafe_spool_reader_open(s, 1, &rd), 0);
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1)
		got++;
	fsafe_spool_reader_close(rd);
	assert_int_equal(got, 79);
	struct iovec v = { "x", 1 };
	assert_int_equal(fsafe_spool_append(s, &v, 1, NULL), -EBADF);
	assert_int_equal(fsafe_spool_ack(s, 5), -EBADF);
	fsafe_spool_close(s);
	assert_int_equal(file_size(seg_path(f, segs[1])), mid);
	assert_int_equal(file_size(seg_path(f, segs[n - 1])), last);
	char q[4200];
	snprintf(q, sizeof(q), "%s/quarantine", f->sp);
	assert_int_equal(access(q, F_OK), -1);
}

int main(void)
{
#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_torn_tail),
		T(test_zero_and_garbage_tail),
		T(test_abandoned_in_reserve_quarantined),
		T(test_reserve_follows_rollover),
		T(test_reserve_grows_with_appender),
		T(test_reserve_made_again_after_cut),
		T(test_stale_frames_rejected),
		T(test_foreign_frame_rejected),
		T(test_replayed_frame_rejected),
		T(test_middle_bit_flip_salvaged),
		T(test_middle_truncated_quarantined),
		T(test_bad_last_header),
		T(test_bad_last_header_and_salt),
		T(test_empty_and_junk_segment_files),
		T(test_missing_old_segment),
		T(test_cursor_ahead_kept),
		T(test_cursor_garbage_redelivers),
		T(test_check_reports_without_repair),
		T(test_rdonly_changes_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
