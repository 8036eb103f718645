/*
 * CRC-32C: both implementations against published vectors (RFC 3720
 * appendix B.4, and the customary "123456789" check value), against each
 * other over every length and alignment up to 300 bytes, and chained.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "crc32c.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

/* RFC 3720 B.4: an iSCSI SCSI Read (10) command PDU. */
static const unsigned char iscsi_pdu[48] = {
	0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
	0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static void vectors(crc_fn f)
{
	unsigned char b[32];

	memset(b, 0, 32);
	assert_int_equal(f(0, b, 32), 0x8a9136aa);
	memset(b, 0xff, 32);
	assert_int_equal(f(0, b, 32), 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)i;
	assert_int_equal(f(0, b, 32), 0x46dd794e);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)(31 - i);
	assert_int_equal(f(0, b, 32), 0x113fdb5c);
	assert_int_equal(f(0, iscsi_pdu, 48), 0xd9963a56);
	assert_int_equal(f(0, "123456789", 9), 0xe3069283);
	assert_int_equal(f(0, "", 0), 0);
	/* Continuing a CRC over the rest gives the CRC of the whole. */
	assert_int_equal(f(f(0, "1234", 4), "56789", 5), 0xe3069283);
}

static void test_table_vectors(void **state)
{
	(void)state;
	vectors(fsafe__crc32c_table);
}

static void test_sse42_vectors(void **state)
{
	(void)state;
	if (!fsafe__crc32c_hw())
		skip();
	vectors(fsafe__crc32c_sse42);
}

static void test_dispatch_vectors(void **state)
{
	(void)state;
	vectors(fsafe__crc32c);
}

/* Every length and misalignment: the 8-byte loop and its byte tail. */
static void test_implementations_agree(void **state)
{
	unsigned char b[320];

	(void)state;
	if (!fsafe__crc32c_hw())
		skip();
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (unsigned char)(i * 131 + 7);
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n + off <= 300; n++)
			assert_int_equal(fsafe__crc32c_table(0x1234, b + off, n),
			                 fsafe__crc32c_sse42(0x1234, b + off, n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_vectors),
		cmocka_unit_test(test_sse42_vectors),
		cmocka_unit_test(test_dispatch_vectors),
		cmocka_unit_test(test_implementations_agree),
	};
	printf("CRC-32C: SSE4.2 %s on this CPU\n",
	       fsafe__crc32c_hw() ? "present" : "absent");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
