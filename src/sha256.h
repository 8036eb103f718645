/*
 * SHA-256 behind one small interface. Where the build found OpenSSL's
 * libcrypto (FSAFE_HAVE_LIBCRYPTO) it does the hashing: it uses the CPU's
 * SHA instructions (SHA-NI, ARMv8 SHA2), about ten times the speed of
 * portable C. The in-tree FIPS 180-4 code serves otherwise, and also
 * whenever libcrypto cannot give a context (out of memory), so
 * fsafe__sha256_init never fails.
 *
 * A context from fsafe__sha256_init ends in fsafe__sha256_final or, on a
 * path that gives up, fsafe__sha256_free (both release what libcrypto
 * holds; calling free after final is harmless).
 */
#ifndef FSAFE_SHA256_H
#define FSAFE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fsafe__sha256 {
	void *evp;          /* libcrypto's EVP_MD_CTX, or NULL: in-tree */
	uint32_t h[8];
	uint64_t len;       /* bytes hashed so far (in-tree) */
	uint8_t buf[64];
	size_t nbuf;
};

void fsafe__sha256_init(struct fsafe__sha256 *c);
void fsafe__sha256_update(struct fsafe__sha256 *c, const void *p, size_t n);
void fsafe__sha256_final(struct fsafe__sha256 *c, uint8_t out[32]);
void fsafe__sha256_free(struct fsafe__sha256 *c);
/* 64 lowercase hex digits and a NUL. */
void fsafe__sha256_hex(const uint8_t d[32], char out[65]);
/* The digest of one buffer, as hex. */
void fsafe__sha256_hex_of(const void *p, size_t n, char out[65]);

/* The in-tree implementation alone, for tests and benchmarks. */
void fsafe__sha256_init_portable(struct fsafe__sha256 *c);
/* Whether this build hashes with libcrypto. */
bool fsafe__sha256_accelerated(void);

#endif
