/*
 * The frame checks one at a time: a frame with this segment's salt, a
 * valid checksum and everything else right but one field (its sequence
 * number, or the offset it names) is never returned as a record. The
 * forged frames of the recovery tests break several fields at once, so
 * dropping one check alone would pass them.
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
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "spool.h"
#include "spoolutil.h"
#include "testutil.h"

#define SALT 0x5eed5a17ull
#define FIRST 7

enum forge { NONE, WRONG_SEQ, WRONG_OFFSET };

/* A segment of three frames (records FIRST..FIRST+2); the second one
   forged as `how` says, with a checksum that matches what it carries. */
static size_t build(unsigned char *buf, enum forge how)
{
	struct fsafe__seg_hdr h = { FIRST, SALT, 1024 };
	size_t off = FSAFE__SEG_HDR;
	unsigned char rec[300];

	fsafe__seg_hdr_encode(buf, &h);
	for (uint64_t k = 0; k < 3; k++) {
		uint64_t seq = FIRST + k, at = off;
		size_t len = su_record(seq, rec);
		if (k == 1 && how == WRONG_SEQ)
			seq += 1; /* the next frame's number, one early */
		if (k == 1 && how == WRONG_OFFSET)
			at += 8; /* where it would be after 8 stray bytes */
		memcpy(buf + off + FSAFE__FRAME_HDR, rec, len);
		fsafe__frame_encode(buf + off, SALT, seq, at, rec,
		                    (uint32_t)len);
		off += FSAFE__FRAME_HDR + len;
	}
	return off;
}

/* Scan the segment built as `how`: the number of records returned. */
static int scan(enum forge how)
{
	unsigned char buf[4096];
	struct fsafe__scan sc = { 0 };
	const void *d;
	size_t len, n = build(buf, how);
	uint64_t seq;
	int fd = memfd_create("seg", MFD_CLOEXEC), r, got = 0;
	unsigned char want[300];

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	assert_int_equal(fsafe__scan_open(&sc, fd, FIRST), 0);
	while ((r = fsafe__scan_next(&sc, &d, &len, &seq)) == 1) {
		/* Whatever is returned is the record of that number. */
		assert_int_equal(seq, FIRST + (uint64_t)got);
		assert_int_equal(len, su_record(seq, want));
		assert_memory_equal(d, want, len);
		got++;
	}
	assert_int_equal(r, 0);
	if (how != NONE)
		assert_non_null(sc.problem);
	fsafe__scan_free(&sc);
	close(fd);
	return got;
}

static void whole_segment_reads(void **state)
{
	(void)state;
	assert_int_equal(scan(NONE), 3);
}

static void wrong_sequence_is_not_a_record(void **state)
{
	(void)state;
	assert_int_equal(scan(WRONG_SEQ), 1);
}

static void wrong_offset_is_not_a_record(void **state)
{
	(void)state;
	assert_int_equal(scan(WRONG_OFFSET), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(whole_segment_reads),
		cmocka_unit_test(wrong_sequence_is_not_a_record),
		cmocka_unit_test(wrong_offset_is_not_a_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
