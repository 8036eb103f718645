/*
 * SHA-256 (src/sha256.c): the FIPS 180-2 vectors through both
 * implementations (libcrypto where the build has it, and the portable
 * code), pieces that cross every buffer edge, the two agreeing on random
 * input, and a context given up without a digest released.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sha256.h"

typedef void init_fn(struct fsafe__sha256 *c);

static void digest(init_fn *init, const void *p, size_t n, char out[65])
{
	struct fsafe__sha256 c;
	uint8_t d[32];

	init(&c);
	fsafe__sha256_update(&c, p, n);
	fsafe__sha256_final(&c, d);
	fsafe__sha256_hex(d, out);
}

static void vectors(init_fn *init)
{
	static const char two[] =
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	struct fsafe__sha256 c;
	uint8_t d[32];
	char h[65], a[1000];

	digest(init, "", 0, h);
	assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b"
	                       "934ca495991b7852b855");
	digest(init, "abc", 3, h);
	assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a39617"
	                       "7a9cb410ff61f20015ad");
	digest(init, two, strlen(two), h);
	assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff"
	                       "2167f6ecedd419db06c1");
	/* A million 'a's fed in odd pieces crosses every buffer edge. */
	memset(a, 'a', sizeof(a));
	init(&c);
	for (size_t done = 0, k = 1; done < 1000000; done += k, k = k % 997 + 1)
		fsafe__sha256_update(&c, a, done + k > 1000000 ? 1000000 - done
		                                               : k);
	fsafe__sha256_final(&c, d);
	fsafe__sha256_hex(d, h);
	assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497"
	                       "200e046d39ccc7112cd0");
}

static void vectors_of_the_build(void **state)
{
	(void)state;
	vectors(fsafe__sha256_init);
}

static void vectors_of_the_portable_code(void **state)
{
	(void)state;
	vectors(fsafe__sha256_init_portable);
}

static void both_agree_on_random_input(void **state)
{
	uint32_t x = 2463534242u;
	unsigned char *buf = malloc(70000);
	char h1[65], h2[65];

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < 70000; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		buf[i] = (unsigned char)x;
	}
	for (size_t len = 0; len < 70000; len = len * 3 / 2 + 1) {
		digest(fsafe__sha256_init, buf, len, h1);
		digest(fsafe__sha256_init_portable, buf, len, h2);
		assert_string_equal(h1, h2);
		fsafe__sha256_hex_of(buf, len, h2);
		assert_string_equal(h1, h2);
	}
	free(buf);
}

/* A context given up halfway holds nothing afterwards (ASan's leak check
   sees a libcrypto context that was not released), and free is safe to
   repeat, also after final. */
static void a_context_given_up_is_released(void **state)
{
	struct fsafe__sha256 c;
	uint8_t d[32];

	(void)state;
	fsafe__sha256_init(&c);
	fsafe__sha256_update(&c, "abc", 3);
	fsafe__sha256_free(&c);
	assert_null(c.evp);
	fsafe__sha256_free(&c);
	fsafe__sha256_init(&c);
	fsafe__sha256_final(&c, d);
	assert_null(c.evp);
	fsafe__sha256_free(&c);
}

/* The build hashes with libcrypto exactly when CMake found it. */
static void the_build_uses_what_it_found(void **state)
{
	struct fsafe__sha256 c;

	(void)state;
	fsafe__sha256_init(&c);
#ifdef FSAFE_HAVE_LIBCRYPTO
	assert_true(fsafe__sha256_accelerated());
	assert_non_null(c.evp);
#else
	assert_false(fsafe__sha256_accelerated());
	assert_null(c.evp);
#endif
	fsafe__sha256_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(vectors_of_the_build),
		cmocka_unit_test(vectors_of_the_portable_code),
		cmocka_unit_test(both_agree_on_random_input),
		cmocka_unit_test(a_context_given_up_is_released),
		cmocka_unit_test(the_build_uses_what_it_found),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
