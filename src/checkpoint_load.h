/*
 * A generation's files read into memory and checked against its manifest
 * (size and SHA-256), for the checkpoint's load. Reading and hashing
 * overlap: the files are read on a thread of their own, in name order, a
 * piece at a time, while the caller hashes each piece as it arrives; once
 * all are read, that thread hashes the files the caller has not reached,
 * from the last one back. A small generation is read and hashed on the
 * caller's thread alone, one file after the other.
 */
#ifndef FSAFE_CHECKPOINT_LOAD_H
#define FSAFE_CHECKPOINT_LOAD_H

#include <stddef.h>

#include "manifest.h"

/* Who reads and who hashes. */
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
 * Every file of m, in generation directory gfd, into data[i] (malloc'd,
 * e[i].size + 1 bytes; data has m->n slots, all NULL on entry). 0 when
 * every file is whole. Otherwise the failure of the first file, in name
 * order, found damaged (-EBADMSG for a size or hash that does not match,
 * or what opening or reading it gave; -ENOMEM) with *bad its index; the
 * check stops at the first failure, so later files may be unchecked.
 * On failure no data[i] is left set.
 */
int fsafe__ckpt_load_files(int gfd, const struct fsafe__manifest *m,
                           char **data, size_t *bad,
                           enum fsafe__load_how how);

#endif
