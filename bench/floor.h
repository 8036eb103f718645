/*
 * The hand-written floor: the fewest system calls a crash-safe replace of
 * a file can make on Linux, with nothing that fsafe adds (no target stat,
 * no metadata inheritance, no lock, no random name, no O_TMPFILE, no error
 * detail). Anything fsafe costs above this is its overhead.
 */
#ifndef FSAFE_BENCH_FLOOR_H
#define FSAFE_BENCH_FLOOR_H

#include <stddef.h>

enum floor_sync {
	FLOOR_NOSYNC,    /* open / write / close / rename */
	FLOOR_FDATASYNC, /* ... fdatasync(file) before rename, fsync(dir) after */
	FLOOR_FSYNC,     /* ... fsync(file) before rename, fsync(dir) after */
};

/*
 * Replace `name` in the directory `dirfd` (held open by the caller) with
 * `len` bytes of `buf`, staging under a temporary name built from `seq`
 * (unique per call within the directory). Returns 0 or a negative errno.
 */
int floor_write(int dirfd, const char *name, const void *buf, size_t len,
                enum floor_sync sync, unsigned long seq);

/*
 * The hand-written group commit, the ceiling for a batch: stage all `n`
 * files (O_EXCL temp names from `seq0` on, write), fdatasync them all from
 * `threads` threads at once, close and rename each, then fsync the
 * directory once. Returns 0 or a negative errno. No window: all n files
 * are open at once.
 */
int floor_group_write(int dirfd, char *const *names,
                      const unsigned char *const *bufs, size_t len, size_t n,
                      unsigned threads, unsigned long seq0);

#endif
