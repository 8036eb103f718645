/*
 * The size rule of options and out structs (src/opts.c), on a struct of
 * its own: a size of 0 is the first layout, below it is refused, a later
 * and larger layout is taken when its unknown bytes are zero; and
 * fsafe_strerror of both signs. Each module's own structs are run through
 * the same cases by its public functions (tests/unit/test_conventions.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fsafe.h"
#include "opts.h"

/* Our layout: V0 ended after `a`; today adds `b`. */
struct today {
	size_t size;
	uint32_t a;
	uint32_t b;
};
#define V0 (offsetof(struct today, a) + sizeof(uint32_t))

/* A newer caller's layout: one more field we do not know. */
struct newer {
	size_t size;
	uint32_t a;
	uint32_t b;
	uint64_t c;
};

static void null_is_all_defaults(void **state)
{
	(void)state;
	struct today o;

	memset(&o, 0xa5, sizeof(o));
	assert_int_equal(FSAFE__OPTS_COPY(&o, NULL, V0), 0);
	assert_int_equal(o.a, 0);
	assert_int_equal(o.b, 0);
}

static void size_zero_is_v0_and_reads_no_further(void **state)
{
	(void)state;
	/* A V0 caller's struct ends at `a`: what lies beyond is not ours to
	   read, so put a marker there and see it ignored. */
	struct newer in = { .size = 0, .a = 7, .b = 99 };
	struct today o;

	assert_int_equal(FSAFE__OPTS_COPY(&o, &in, V0), 0);
	assert_int_equal(o.a, 7);
	assert_int_equal(o.b, 0);

	in.size = V0;
	assert_int_equal(FSAFE__OPTS_COPY(&o, &in, V0), 0);
	assert_int_equal(o.a, 7);
	assert_int_equal(o.b, 0);
}

static void below_v0_is_refused(void **state)
{
	(void)state;
	struct today in = { .size = V0 - 1, .a = 7 }, o;

	assert_int_equal(FSAFE__OPTS_COPY(&o, &in, V0), -EINVAL);
	in.size = sizeof(size_t);
	assert_int_equal(FSAFE__OPTS_COPY(&o, &in, V0), -EINVAL);
}

static void today_is_copied_whole(void **state)
{
	(void)state;
	struct today in = { .size = sizeof(in), .a = 7, .b = 8 }, o;

	assert_int_equal(FSAFE__OPTS_COPY(&o, &in, V0), 0);
	assert_int_equal(o.a, 7);
	assert_int_equal(o.b, 8);
}

static void larger_with_zero_tail_is_taken(void **state)
{
	(void)state;
	struct newer in = { .size = sizeof(in), .a = 7, .b = 8, .c = 0 };
	struct today o;

	assert_int_equal(FSAFE__OPTS_COPY(&o, &in, V0), 0);
	assert_int_equal(o.a, 7);
	assert_int_equal(o.b, 8);
}

static void larger_with_nonzero_tail_is_refused(void **state)
{
	(void)state;
	struct newer in = { .size = sizeof(in), .a = 7, .b = 8 };
	struct today o;

	/* Every byte of the unknown field, one at a time. */
	for (size_t i = 0; i < sizeof(in.c); i++) {
		in.c = 0;
		((uint8_t *)&in.c)[i] = 1;
		assert_int_equal(FSAFE__OPTS_COPY(&o, &in, V0), -E2BIG);
	}
}

static void copy_out_fills_what_the_caller_has(void **state)
{
	(void)state;
	struct today ours = { .size = sizeof(ours), .a = 7, .b = 8 };
	struct newer big;
	struct today v0;

	memset(&big, 0xa5, sizeof(big));
	big.size = sizeof(big);
	assert_int_equal(FSAFE__OPTS_COPY_OUT(&big, &ours, V0), 0);
	assert_int_equal(big.size, sizeof(big)); /* left as the caller set it */
	assert_int_equal(big.a, 7);
	assert_int_equal(big.b, 8);
	assert_int_equal(big.c, 0); /* past our layout: zeros */

	memset(&v0, 0xa5, sizeof(v0));
	v0.size = 0; /* V0: only `a` is the caller's */
	assert_int_equal(FSAFE__OPTS_COPY_OUT(&v0, &ours, V0), 0);
	assert_int_equal(v0.a, 7);
	assert_int_equal(v0.b, 0xa5a5a5a5u); /* not written */

	v0.size = V0 - 1;
	assert_int_equal(FSAFE__OPTS_COPY_OUT(&v0, &ours, V0), -EINVAL);
}

static void strerror_of_both_signs(void **state)
{
	(void)state;
	assert_string_equal(fsafe_strerror(-ENOSPC), "No space left on device");
	assert_string_equal(fsafe_strerror(ENOSPC), "No space left on device");
	assert_string_equal(fsafe_strerror(EROFS), fsafe_strerror(-EROFS));
	assert_string_equal(fsafe_strerror(0), "Success");
	assert_non_null(strstr(fsafe_strerror(FSAFE_ECONFLICT), "conflict"));
	assert_non_null(strstr(fsafe_strerror(FSAFE_ENOTDURABLE), "durab"));
	assert_string_not_equal(fsafe_strerror(FSAFE_ECONFLICT),
	                        fsafe_strerror(-ESTALE));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(null_is_all_defaults),
		cmocka_unit_test(size_zero_is_v0_and_reads_no_further),
		cmocka_unit_test(below_v0_is_refused),
		cmocka_unit_test(today_is_copied_whole),
		cmocka_unit_test(larger_with_zero_tail_is_taken),
		cmocka_unit_test(larger_with_nonzero_tail_is_refused),
		cmocka_unit_test(copy_out_fills_what_the_caller_has),
		cmocka_unit_test(strerror_of_both_signs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
