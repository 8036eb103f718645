/* A sink in shared memory for the forwarder's tests: it keeps each record
   by its name (spool id, sequence number) as a broker with a duplicate
   window does, and can fail at chosen calls. */
#ifndef FSAFE_TEST_FAKESINK_H
#define FSAFE_TEST_FAKESINK_H

#include <stdbool.h>
#include <stdint.h>

#include "fsafe/forward.h"

#define FS_MAX 4096

struct fakesink {
	char id[33];
	uint64_t calls;       /* send calls */
	uint64_t fail_at;     /* send call that fails (0: none) */
	bool fail_on;         /* and every later one */
	bool store_then_fail; /* a failing call stores first (ack lost) */
	int err;              /* its error (0: -EIO) */
	uint64_t max_retry_ms; /* what start saw */
	int refuse;           /* start's answer */
	uint64_t stored;      /* records kept, in arrival order */
	uint64_t order[FS_MAX];
	uint32_t copies[FS_MAX + 1]; /* sends of each sequence number */
	uint64_t max_batch_bytes;
	uint64_t max_batch;
	const fsafe_cancel *cancel_in_send; /* requested during a send */
	fsafe_cancel *cancel;
};

/* A zeroed fake sink in memory shared with children. */
struct fakesink *fs_new(void);
void fs_free(struct fakesink *k);
struct fsafe_forward_sink fs_sink(struct fakesink *k);
/* Record `seq`'s bytes into buf (>= 300 bytes); its length. */
size_t fs_record(uint64_t seq, unsigned char *buf);
/* Append records first..first+n-1; asserts. */
void fs_append(fsafe_spool *s, uint64_t first, uint64_t n);
/* Every record 1..n kept once, in order (duplicates dropped by name). */
void fs_assert_all(const struct fakesink *k, uint64_t n);

#endif
