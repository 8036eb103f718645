/*
 * A message whose header is whole and whose checksums are right, but whose
 * sequence is not the one its id carries: quarantined, never taken. The
 * forged messages of the basic tests take the header's sequence from the
 * name, so they cannot see this check go.
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

#include <cmocka.h>

#include "ibutil.h"
#include "inbox.h"
#include "testutil.h"

/* A message named with sequence 5 whose header says `seq`. */
static void put_message(const char *dir, const char *name, uint64_t seq)
{
	const char payload[] = "sequence forged";
	uint8_t buf[FSAFE__INBOX_HDR + sizeof(payload)];
	char newdir[4096];

	fsafe__inbox_header(buf, seq, payload, sizeof(payload));
	memcpy(buf + FSAFE__INBOX_HDR, payload, sizeof(payload));
	snprintf(newdir, sizeof(newdir), "%s/new", dir);
	tu_put(newdir, name, buf, sizeof(buf));
}

static void take_one(uint64_t header_seq, int want, unsigned quarantined)
{
	char *dir = tu_mkscratch();
	fsafe_inbox *ib = ibu_open(dir, 0);
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m = NULL;
	const char *name = "0000000000000001.000000000005.00000000.00000000."
	                   "000000000000";

	assert_true(fsafe__inbox_valid_id(name));
	put_message(dir, name, header_seq);
	assert_int_equal(fsafe_inbox_consumer_open(ib, NULL, &c), 0);
	assert_int_equal(fsafe_inbox_take(c, &m), want);
	assert_int_equal(fsafe_inbox_quarantined(c), quarantined);
	if (m) {
		assert_int_equal(fsafe_inbox_msg_seq(m), header_seq);
		fsafe_inbox_msg_free(m);
	}
	fsafe_inbox_consumer_close(c);
	fsafe_inbox_close(ib);
	tu_rmtree(dir);
	free(dir);
}

static void matching_sequence_is_taken(void **state)
{
	(void)state;
	take_one(5, 0, 0);
}

static void other_sequence_is_quarantined(void **state)
{
	(void)state;
	take_one(6, -EAGAIN, 1);
	take_one(4, -EAGAIN, 1);
	take_one(5 + (1ull << 47), -EAGAIN, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(matching_sequence_is_taken),
		cmocka_unit_test(other_sequence_is_quarantined),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
