/*
 * SHA-256 (FIPS 180-4): the checksum of the checkpoint's manifest, its
 * files and its event records.
 */
#ifndef FSAFE_SHA256_H
#define FSAFE_SHA256_H

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
/* The hex digest of one buffer. */
void fsafe__sha256_hex_of(const void *p, size_t n, char out[65]);

#endif
