/*
 * Internals of the checkpoint store shared with its tests: the SHA-256
 * that the manifest and the event log use.
 */
#ifndef FSAFE_CHECKPOINT_INTERNAL_H
#define FSAFE_CHECKPOINT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct fsafe__sha256 {
	uint32_t h[8];
	uint64_t len;       /* bytes hashed so far */
	uint8_t buf[64];
	size_t nbuf;
};

void fsafe__sha256_init(struct fsafe__sha256 *c);
void fsafe__sha256_update(struct fsafe__sha256 *c, const void *p, size_t n);
void fsafe__sha256_final(struct fsafe__sha256 *c, uint8_t out[32]);
/* 64 lowercase hex digits and a NUL. */
void fsafe__sha256_hex(const uint8_t d[32], char out[65]);

/* Names in a checkpoint directory. */
#define FSAFE__CKPT_CURRENT "CURRENT"
#define FSAFE__CKPT_LOG "events.log"
#define FSAFE__CKPT_LOCK "LOCK"
#define FSAFE__CKPT_MARKER "OPEN"
#define FSAFE__CKPT_MANIFEST ".manifest"
#define FSAFE__CKPT_GEN_DIGITS 12

#endif
