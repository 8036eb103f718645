/*
 * A generation's files checked against its manifest: one file a piece at
 * a time, its size, SHA-256 and CRC-32C (verify, the store's check, a
 * save's comparison with the old copy), or a whole generation read into
 * memory for a load, each file's size and CRC-32C (its SHA-256 where the
 * manifest, version 1, has no CRC-32C). A load's reading and hashing
 * overlap: the files are read on a thread of their own, in name order, a
 * piece at a time, while the caller hashes each piece as it arrives; once
 * all are read, that thread hashes the files the caller has not reached,
 * from the last one back. A
 * small generation is read and hashed on the caller's thread alone, one
 * file after the other.
 */
#ifndef FSAFE_CHECKPOINT_LOAD_H
#define FSAFE_CHECKPOINT_LOAD_H

#include <stddef.h>

#include "manifest.h"

/*
 * File e in generation gfd, its size and both sums checked; with `same`,
 * its bytes must also be those e->size bytes (-ESTALE at the first read that
 * differs). 0, -EBADMSG, -ESTALE, -ENOMEM, or what opening or reading it
 * gave.
 */
int fsafe__ckpt_check_file(int gfd, const struct fsafe__ckpt_entry *e,
                           const unsigned char *same);

/* Who reads and who hashes in a load. */
enum fsafe__load_how {
	/* A reader thread from THREAD_MIN bytes in all (checkpoint_load.c),
	   the caller's thread alone below. */
	FSAFE__LOAD_AUTO,
	FSAFE__LOAD_INLINE,  /* the caller's thread alone, whatever the size */
	FSAFE__LOAD_THREAD,  /* a reader thread, whatever the size */
	/* For tests: the caller starts hashing only once the reader has
	   read everything and hashed all it took, so the reader hashes every
	   file. */
	FSAFE__LOAD_READER_FIRST,
};

/*
 * Every file of m, in generation directory gfd, into data[i], a buffer
 * from fsafe__io_alloc of at least e[i].size + 1 bytes (data has m->n
 * slots). On entry data[i] is NULL, or such a buffer to fill (an earlier
 * load's: no fresh pages to fault in), replaced when it is too small. 0 when every file is whole. Otherwise the failure
 * of the first file, in name order, found damaged (-EBADMSG for a size or
 * sum that does not match, or what opening or reading it gave; -ENOMEM)
 * with *bad its index; the check stops at the first failure, so later
 * files may be unchecked. On failure every data[i] is freed and set to
 * NULL, those given on entry too.
 */
int fsafe__ckpt_load_files(int gfd, const struct fsafe__manifest *m,
                           char **data, size_t *bad,
                           enum fsafe__load_how how);

#endif
