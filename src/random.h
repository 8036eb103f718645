/*
 * Unpredictable bytes without a system call per request: a ChaCha20
 * generator per thread, seeded by one getrandom (see random.c).
 */
#ifndef FSAFE_RANDOM_H
#define FSAFE_RANDOM_H

#include <stddef.h>

/* Fill buf with len unpredictable bytes: 0 or a negative errno (only the
   seeding getrandom can fail). Thread-safe: every thread has its own
   generator; a fork child starts a fresh one. */
int fsafe__csprng(void *buf, size_t len);

#ifdef FSAFE_TESTING
/*
 * Test builds only: non-zero (the default there) makes every request one
 * getrandom through the table. The fault harnesses count a write's calls
 * once and replay them, killing or failing call N, often in a fork child:
 * a generator seeded on first use would make the first write of every
 * thread and child one call longer. A deterministic getrandom then also
 * gives reproducible staging names (the power harness, planted
 * collisions). The generator's own tests and the call count clear it.
 */
extern volatile int fsafe__test_random_from_table;
#endif

#endif
