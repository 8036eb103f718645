/*
 * The staging names' randomness: ChaCha20 (RFC 8439) keyed from one
 * getrandom per thread, with fast key erasure: every request computes one
 * block, whose first half becomes the next key and whose second half is
 * the output. A getrandom per name cost a system call on every write; this
 * costs one ChaCha20 block (a fraction of a microsecond) instead, and a
 * key read from memory later says nothing about the names already drawn.
 *
 * State is per thread (_Thread_local): no lock, nothing shared. A fork
 * child would otherwise continue its parent's sequence and draw the same
 * names; a pthread_atfork child handler, registered when the library is
 * loaded, discards the state of the thread that forked (the only one the
 * child has), so the child seeds afresh. Children made without the
 * handlers (vfork, _Fork, a raw clone) may only call async-signal-safe
 * functions until they exec, which fsafe's are not.
 */
#define _GNU_SOURCE
#include "random.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sys.h"

/* Draws between reseeds from getrandom: a cloned virtual machine repeats
   its original's names for at most this many. */
#define RESEED_EVERY 65536u

struct rng {
	uint32_t key[8];
	uint32_t draws; /* since the last seed; 0: not seeded */
};

static _Thread_local struct rng tls;

#ifdef FSAFE_TESTING
volatile int fsafe__test_random_from_table = 1;
#endif

static uint32_t rotl(uint32_t v, int n)
{
	return (v << n) | (v >> (32 - n));
}

static void quarter(uint32_t *x, int a, int b, int c, int d)
{
	x[a] += x[b], x[d] = rotl(x[d] ^ x[a], 16);
	x[c] += x[d], x[b] = rotl(x[b] ^ x[c], 12);
	x[a] += x[b], x[d] = rotl(x[d] ^ x[a], 8);
	x[c] += x[d], x[b] = rotl(x[b] ^ x[c], 7);
}

/* One ChaCha20 block of `key` with counter and nonce 0: the key changes
   after every block, so they never need to. */
static void chacha20_block(const uint32_t key[8], uint32_t out[16])
{
	uint32_t in[16] = { 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574 };
	uint32_t x[16];

	memcpy(in + 4, key, 32);
	memcpy(x, in, sizeof(x));
	for (int i = 0; i < 10; i++) {
		quarter(x, 0, 4, 8, 12);
		quarter(x, 1, 5, 9, 13);
		quarter(x, 2, 6, 10, 14);
		quarter(x, 3, 7, 11, 15);
		quarter(x, 0, 5, 10, 15);
		quarter(x, 1, 6, 11, 12);
		quarter(x, 2, 7, 8, 13);
		quarter(x, 3, 4, 9, 14);
	}
	for (int i = 0; i < 16; i++)
		out[i] = x[i] + in[i];
}

static int seed(struct rng *s)
{
	int r = fsafe__random(s->key, sizeof(s->key));

	if (r < 0)
		return r;
	s->draws = 1;
	return 0;
}

/* The child draws from a generator of its own, seeded on first use. */
static void forget_after_fork(void)
{
	memset(&tls, 0, sizeof(tls));
}

/* At load time, before any thread of the library's user can fork with a
   seeded generator. */
__attribute__((constructor)) static void register_fork_handler(void)
{
	pthread_atfork(NULL, NULL, forget_after_fork);
}

int fsafe__csprng(void *buf, size_t len)
{
	struct rng *s = &tls;
	unsigned char *p = buf;
	uint32_t block[16];
	int r;

#ifdef FSAFE_TESTING
	if (fsafe__test_random_from_table)
		return fsafe__random(buf, len);
#endif
	while (len > 0) {
		if ((s->draws == 0 || s->draws >= RESEED_EVERY) &&
		    (r = seed(s)) < 0)
			return r;
		chacha20_block(s->key, block);
		memcpy(s->key, block, sizeof(s->key));
		size_t n = len < 32 ? len : 32;
		memcpy(p, block + 8, n);
		p += n;
		len -= n;
		s->draws++;
	}
	memset(block, 0, sizeof(block));
	return 0;
}
