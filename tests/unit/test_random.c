/*
 * The staging names' generator (src/random.c): ChaCha20 itself, and a
 * fork child, which must not continue its parent's sequence.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "random.h"
#include "sys.h"

static ssize_t zeros(void *buf, size_t len, unsigned flags)
{
	(void)flags;
	memset(buf, 0, len);
	return (ssize_t)len;
}

/* A fresh thread's first 96 bytes: block 0's second half, block 1. */
static void *first_draws(void *out)
{
	int r = fsafe__csprng(out, 32);

	if (r == 0)
		r = fsafe__csprng((char *)out + 32, 64);
	return (void *)(intptr_t)r;
}

static void run_thread(void *(*fn)(void *), void *out)
{
	pthread_t t;
	void *r;

	assert_int_equal(pthread_create(&t, NULL, fn, out), 0);
	assert_int_equal(pthread_join(t, &r), 0);
	assert_int_equal((intptr_t)r, 0);
}

/*
 * Seeded with a zero key, the output starts with the second half of the
 * ChaCha20 block of key 0, nonce 0, counter 0, then block 1: RFC 8439's
 * appendix A.1, test vectors 1 (bytes 32..63) and 2. A fresh thread has
 * an unseeded generator.
 */
static void chacha20_matches_the_rfc(void **state)
{
	static const uint8_t want[96] = {
		0xda, 0x41, 0x59, 0x7c, 0x51, 0x57, 0x48, 0x8d,
		0x77, 0x24, 0xe0, 0x3f, 0xb8, 0xd8, 0x4a, 0x37,
		0x6a, 0x43, 0xb8, 0xf4, 0x15, 0x18, 0xa1, 0x1c,
		0xc3, 0x87, 0xb6, 0x69, 0xb2, 0xee, 0x65, 0x86,
		0x9f, 0x07, 0xe7, 0xbe, 0x55, 0x51, 0x38, 0x7a,
		0x98, 0xba, 0x97, 0x7c, 0x73, 0x2d, 0x08, 0x0d,
		0xcb, 0x0f, 0x29, 0xa0, 0x48, 0xe3, 0x65, 0x69,
		0x12, 0xc6, 0x53, 0x3e, 0x32, 0xee, 0x7a, 0xed,
		0x29, 0xb7, 0x21, 0x76, 0x9c, 0xe6, 0x4e, 0x43,
		0xd5, 0x71, 0x33, 0xb0, 0x74, 0xd8, 0x39, 0xd5,
		0x31, 0xed, 0x1f, 0x28, 0x51, 0x0a, 0xfb, 0x45,
		0xac, 0xe1, 0x0a, 0x1f, 0x4b, 0x79, 0x4d, 0x6f,
	};
	struct fsafe_sys t = fsafe__sys_default;
	uint8_t got[96];

	(void)state;
	t.getrandom = zeros;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	run_thread(first_draws, got);
	fsafe__sys_swap(old);
	assert_memory_equal(got, want, sizeof(want));
}

/* The parent draws (seeding its generator), forks, and both draw again:
   without the fork handler the child would repeat the parent's draw. */
static void a_fork_child_draws_its_own(void **state)
{
	uint8_t seeded[12], parent[12], child[12];
	int p[2], status;

	(void)state;
	assert_int_equal(fsafe__csprng(seeded, sizeof(seeded)), 0);
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint8_t mine[12];
		int ok = fsafe__csprng(mine, sizeof(mine)) == 0 &&
		         write(p[1], mine, sizeof(mine)) == sizeof(mine);
		_exit(ok ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(fsafe__csprng(parent, sizeof(parent)), 0);
	assert_int_equal(read(p[0], child, sizeof(child)), sizeof(child));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_memory_not_equal(parent, child, sizeof(parent));
}

int main(void)
{
	fsafe__test_random_from_table = 0; /* the generator itself */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chacha20_matches_the_rfc),
		cmocka_unit_test(a_fork_child_draws_its_own),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
