/*
 * The staging names' randomness: ChaCha20 (RFC 8439) keyed from one
 * getrandom per thread, with fast key erasure: a refill computes four
 * blocks, whose first 32 bytes become the next key and whose other 224
 * are output, each byte wiped as it is handed out. A getrandom per name
 * cost a system call on every write; this costs a fifth of a ChaCha20
 * block per name, and the state read from memory later says nothing about
 * the names already drawn.
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

/* Blocks per refill: the first half of the first becomes the next key,
   the rest (224 bytes, 18 names) is output. */
#define BLOCKS 4
#define OUT_BYTES (BLOCKS * 64 - 32)

/* Refills between reseeds from getrandom: a cloned virtual machine
   repeats its original's names for at most this many (about 73000). */
#define RESEED_EVERY 4096u

struct rng {
	uint32_t key[8];
	uint32_t refills; /* since the last seed; 0: not seeded */
	uint16_t left;    /* unused output bytes, at the end of out */
	unsigned char out[OUT_BYTES];
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

/* ChaCha20 block `counter` of `key`, nonce 0: the key changes after
   every refill, so a nonce never needs to. */
static void chacha20_block(const uint32_t key[8], uint32_t counter,
                           uint32_t out[16])
{
	uint32_t in[16] = { 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574 };
	uint32_t x[16];

	memcpy(in + 4, key, 32);
	in[12] = counter;
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

/* Fast key erasure: the next key comes out of the same blocks, so the
   state never holds what produced output already handed out. */
static void refill(struct rng *s)
{
	uint32_t blocks[BLOCKS * 16];

	for (uint32_t i = 0; i < BLOCKS; i++)
		chacha20_block(s->key, i, blocks + 16 * i);
	memcpy(s->key, blocks, sizeof(s->key));
	memcpy(s->out, blocks + 8, OUT_BYTES);
	memset(blocks, 0, sizeof(blocks));
	s->left = OUT_BYTES;
	s->refills++;
}

static int seed(struct rng *s)
{
	int r = fsafe__random(s->key, sizeof(s->key));

	if (r < 0)
		return r;
	s->refills = 0;
	refill(s);
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
	int r;

#ifdef FSAFE_TESTING
	if (fsafe__test_random_from_table)
		return fsafe__random(buf, len);
#endif
	while (len > 0) {
		if (s->refills == 0 || (s->left == 0 && s->refills >= RESEED_EVERY)) {
			if ((r = seed(s)) < 0)
				return r;
		} else if (s->left == 0) {
			refill(s);
		}
		size_t n = len < s->left ? len : s->left;
		unsigned char *from = s->out + OUT_BYTES - s->left;
		memcpy(p, from, n);
		memset(from, 0, n); /* handed out: not kept */
		p += n;
		len -= n;
		s->left -= (uint16_t)n;
	}
	return 0;
}
