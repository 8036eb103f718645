/*
 * The durable floor (see floor.h):
 *
 *   openat(dir, tmp, O_WRONLY|O_CREAT|O_EXCL) -> write -> fdatasync (or
 *   fsync) -> close -> renameat(tmp, name) -> fsync(dir)
 *
 * fdatasync is the data sync fsafe itself uses; the fsync variant is
 * measured too, for comparison with code that uses fsync.
 */
#define _GNU_SOURCE
#include "floor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int floor_write(int dirfd, const char *name, const void *buf, size_t len,
                enum floor_sync sync, unsigned long seq)
{
	char tmp[64];
	int r = 0;

	snprintf(tmp, sizeof(tmp), ".floor-%lu.tmp", seq);
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	                0666);
	if (fd < 0)
		return -errno;
	r = write_all(fd, buf, len);
	if (r == 0 && sync == FLOOR_FDATASYNC && fdatasync(fd) < 0)
		r = -errno;
	if (r == 0 && sync == FLOOR_FSYNC && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	if (sync != FLOOR_NOSYNC && fsync(dirfd) < 0)
		return -errno;
	return 0;
}
