/* Little-endian integers in on-disk headers, byte by byte (any alignment,
   any host order). */
#ifndef FSAFE_BYTES_H
#define FSAFE_BYTES_H

#include <stdint.h>

static inline void fsafe__put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t fsafe__get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#endif
