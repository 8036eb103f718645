/*
 * The owner record's fields one at a time: without any one line, or with
 * one line twice, a record is refused; and a random record the parser
 * accepts is exactly the record it formats back, so the garbage loop can
 * fail on more than a crash.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lockutil.h"

static const char *const lines[] = {
	"fsafe-lock 1\n", "mode link\n", "pid 42\n", "start 7\n",
	"boot 9855fd0c-fc2b-4598-b046-de710a3c6c0a\n", "host h\n",
	"pidns 4026531836\n", "token 0123456789abcdef0123456789abcdef\n",
	"time 1\n",
};
#define NLINES (sizeof(lines) / sizeof(lines[0]))

/* The record with line `skip` left out and line `twice` doubled (either
   may be NLINES: none). */
static size_t record(char *buf, size_t skip, size_t twice)
{
	size_t n = 0;

	for (size_t i = 0; i < NLINES; i++) {
		for (int k = i == twice ? 2 : 1; k > 0 && i != skip; k--) {
			memcpy(buf + n, lines[i], strlen(lines[i]));
			n += strlen(lines[i]);
		}
	}
	buf[n] = '\0';
	return n;
}

static void each_field_required(void **state)
{
	(void)state;
	struct fsafe_lock_owner o;
	char buf[1024];
	size_t n = record(buf, NLINES, NLINES);

	assert_int_equal(fsafe__owner_parse(buf, n, &o), 0);
	assert_int_equal(o.pidns, 4026531836ull);
	for (size_t i = 0; i < NLINES; i++) {
		n = record(buf, i, NLINES);
		if (fsafe__owner_parse(buf, n, &o) != -EBADMSG)
			fail_msg("accepted without %s", lines[i]);
	}
}

static void each_field_once(void **state)
{
	(void)state;
	struct fsafe_lock_owner o;
	char buf[1024];

	for (size_t i = 1; i < NLINES; i++) {
		size_t n = record(buf, NLINES, i);
		if (fsafe__owner_parse(buf, n, &o) != -EBADMSG)
			fail_msg("accepted with %s twice", lines[i]);
	}
}

/* Damaged records: whatever is accepted formats back to the same bytes
   (the form is canonical), so accepting a malformed one shows. */
static void accepted_is_canonical(void **state)
{
	(void)state;
	struct fsafe_lock_owner o;
	char good[1024], buf[1024], back[FSAFE__OWNER_MAX];
	size_t glen = record(good, NLINES, NLINES);
	unsigned accepted = 0;

	srand(23);
	for (int round = 0; round < 20000; round++) {
		size_t len = glen;
		memcpy(buf, good, glen);
		/* Cut out a span, or change a byte or two. */
		if (rand() % 2) {
			size_t at = (size_t)rand() % glen;
			size_t cut = 1 + (size_t)rand() % 24;
			if (at + cut > glen)
				cut = glen - at;
			memmove(buf + at, buf + at + cut, glen - at - cut);
			len -= cut;
		} else {
			for (int k = rand() % 2; k >= 0; k--)
				buf[(size_t)rand() % glen] = "0a \n9x"[rand() % 6];
		}
		int r = fsafe__owner_parse(buf, len, &o);
		assert_true(r == 0 || r == -EBADMSG || r == -EPROTONOSUPPORT);
		if (r != 0)
			continue;
		accepted++;
		int n = fsafe__owner_format(&o, back, sizeof(back));
		if (n != (int)len || memcmp(back, buf, len) != 0)
			fail_msg("accepted a record that is not canonical:\n%.*s",
			         (int)len, buf);
	}
	assert_true(accepted > 0); /* some changes keep a valid record */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_field_required),
		cmocka_unit_test(each_field_once),
		cmocka_unit_test(accepted_is_canonical),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
