/*
 * The keyed store's record header (include/fsafe/store.h): its one parser,
 * on its own so that a fuzzer can reach it without a store around it.
 *
 * Little-endian header, then the key, then the payload:
 *   0 magic "fSR1"   4 format (u16) 1   6 header length (u16) 36
 *   8 version (u64)  16 payload length (u64)  24 payload CRC-32C (u32)
 *  28 key length (u32)  32 CRC-32C of bytes 0..31 and the key (u32)
 * The key inside the record catches a record copied under another name.
 */
#ifndef FSAFE_STORE_RECORD_H
#define FSAFE_STORE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define FSAFE__REC_MAGIC 0x31525366u
#define FSAFE__REC_FORMAT 1
#define FSAFE__REC_HDR 36

struct fsafe__rec {
	uint64_t version, len;
	uint32_t crc;
};

/* Write the header and key into h (FSAFE__REC_HDR + klen bytes), for a
   payload buf/len; returns the bytes written. */
size_t fsafe__rec_format(uint8_t *h, const void *key, size_t klen,
                         uint64_t version, const void *buf, size_t len);

/*
 * Check the n bytes at h (a record's first bytes, n >= FSAFE__REC_HDR +
 * klen for a valid one) as the record of `key` in a file of `size` bytes.
 * 0 with *rec filled, or -EBADMSG with *why (may be NULL) saying what is
 * wrong in a few words ("bad magic", "key does not match its name"...).
 */
int fsafe__rec_parse(const uint8_t *h, size_t n, const void *key,
                     size_t klen, uint64_t size, struct fsafe__rec *rec,
                     const char **why);

#endif
