/* The inbox's internals, shared by its files and its tests. */
#ifndef FSAFE_INBOX_INTERNAL_H
#define FSAFE_INBOX_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsafe/inbox.h"

/*
 * Every message file starts with a 32-byte header, little-endian:
 *   0  "fsafeIB1"       magic and format version
 *   8  u64 sequence     the producer's sequence (also in the id)
 *  16  u64 length       payload bytes that follow
 *  24  u32 crc32c       of the payload
 *  28  u32 crc32c       of bytes 0..27
 */
#define FSAFE__INBOX_HDR 32

/* ---- the format (inbox_format.c: pure, no system call) ---- */

struct fsafe__inbox_hdr {
	uint64_t seq, len;
	uint32_t crc;
};

void fsafe__inbox_header(uint8_t h[FSAFE__INBOX_HDR], uint64_t seq,
                         const void *buf, size_t len);
/* The id's form: fixed width, lowercase hex fields separated by '.'. */
bool fsafe__inbox_valid_id(const char *name);
/* A consumer name: 1..FSAFE_INBOX_NAME_MAX of [A-Za-z0-9._-], no leading
   dot. */
bool fsafe__inbox_valid_name(const char *name);
/*
 * Judge the header `h` (FSAFE__INBOX_HDR bytes, read only when size allows)
 * of a file of `size` bytes named by the valid id `id`: NULL when it is a
 * whole message's header (then *out is filled), else why not.
 */
const char *fsafe__inbox_check_header(const uint8_t *h, uint64_t size,
                                      uint64_t max, const char *id,
                                      struct fsafe__inbox_hdr *out);
/* NULL when `data` (h->len bytes) is the payload the header names. */
const char *fsafe__inbox_check_payload(const struct fsafe__inbox_hdr *h,
                                       const void *data);

/* ---- shared by inbox.c and inbox_damage.c ---- */

/*
 * Why the entry `name` of directory `dirfd` is not a whole message, or NULL
 * (then, if `data` is not NULL, *data and *len hold the payload, malloc'd,
 * and *seq its sequence). Opened without following a link or blocking.
 * 0, or a negative errno when the verdict could not be reached.
 */
int fsafe__inbox_verify(int dirfd, const char *name, uint64_t max,
                        const char **why, uint8_t **data, size_t *len,
                        uint64_t *seq);
/*
 * Move `name` of srcfd into quarantine/ (quarfd) with "<dest>.reason"
 * holding `why`, durably, then drop the old name. A directory is renamed
 * (no hard links). `dest` (NAME_MAX + 1 bytes, may be NULL) receives the
 * name it got there. 0 or a negative errno.
 */
int fsafe__inbox_quarantine(int quarfd, int srcfd, const char *name,
                            const char *why, char *dest);
/* Return the claims of the consumer directory claimed/<dir> (its owner
   dead, or its record unreadable) to new/ and retire it; the number
   returned or a negative errno. */
int fsafe__inbox_return_claims(fsafe_inbox *ib, const char *dir);
/* "symbolic link", "FIFO", ...: the type in a stat mode, for messages. */
const char *fsafe__inbox_type_name(unsigned mode);

#endif
