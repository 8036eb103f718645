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

#endif
