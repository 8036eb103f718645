/* The staging-name contract: the literal form is pinned here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fsafe.h"
#include "staging.h"

/* A hard-coded example of the public form: if this stops matching, the
   contract changed, which is a breaking change (see CHANGELOG.md). */
static const char pinned[] = ".fsafe-0123456789abcdef01234567.tmp";

static void accepts_the_pinned_form(void **state)
{
	(void)state;
	assert_true(fsafe_is_staging_name(pinned));
	assert_int_equal(strlen(pinned), FSAFE_STAGING_NAME_LEN);
	assert_true(fsafe_is_staging_name(".fsafe-ffffffffffffffffffffffff.tmp"));
	assert_true(fsafe_is_staging_name(".fsafe-000000000000000000000000.tmp"));
}

static void rejects_lookalikes(void **state)
{
	(void)state;
	static const char *const bad[] = {
		".fsafe-0123456789ABCDEF01234567.tmp", /* uppercase hex */
		".fsafe-0123456789abcdef0123456.tmp",  /* 23 digits */
		".fsafe-0123456789abcdef012345678.tmp", /* 25 digits */
		"fsafe-0123456789abcdef01234567.tmp",  /* missing leading dot */
		".fsafe-0123456789abcdef01234567tmp",  /* missing dot before tmp */
		".fsafe0123456789abcdef01234567.tmp",  /* missing dash */
		".fsafe-0123456789abcdef01234567.tmp.bak", /* extra suffix */
		".fsafe-0123456789abcdef01234567.TMP",
		".fsafe-0123456789abcdef0123456g.tmp", /* not hex */
		".fsafe-0123456789abcdef 1234567.tmp",
		"dir/.fsafe-0123456789abcdef01234567.tmp", /* a path */
		".fsafe-0123456789abcdef/1234567.tmp",
		"/.fsafe-0123456789abcdef01234567.tmp",
		"config.json",                             /* a target */
		".lock-0f8fad5b-d9cb-469f-a165-70867728950e.tmp", /* lock form */
		".fsafe-.tmp",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (fsafe_is_staging_name(bad[i]))
			fail_msg("accepted lookalike \"%s\"", bad[i]);
	}
	assert_false(fsafe_is_staging_name(NULL));
}

static void generator_and_predicate_agree(void **state)
{
	(void)state;
	uint8_t rnd[FSAFE__STAGING_RANDOM_BYTES];
	char name[FSAFE_STAGING_NAME_LEN + 1];

	for (int v = 0; v < 256; v++) {
		memset(rnd, v, sizeof(rnd));
		rnd[0] = (uint8_t)(255 - v);
		fsafe__staging_format(rnd, name);
		assert_true(fsafe_is_staging_name(name));
	}
	memcpy(rnd, "\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67", 12);
	fsafe__staging_format(rnd, name);
	assert_string_equal(name, pinned);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(accepts_the_pinned_form),
		cmocka_unit_test(rejects_lookalikes),
		cmocka_unit_test(generator_and_predicate_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
