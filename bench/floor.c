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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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

struct group {
	const int *fds;
	size_t n;
	atomic_size_t next;
	atomic_int err;
};

static void *group_sync(void *arg)
{
	struct group *g = arg;
	size_t i;

	while ((i = atomic_fetch_add(&g->next, 1)) < g->n)
		if (fdatasync(g->fds[i]) < 0)
			atomic_store(&g->err, -errno);
	return NULL;
}

int floor_group_write(int dirfd, char *const *names,
                      const unsigned char *const *bufs, size_t len, size_t n,
                      unsigned threads, unsigned long seq0)
{
	int *fds = malloc(n * sizeof(*fds));
	pthread_t *tids = malloc(threads * sizeof(*tids));
	char tmp[64];
	int r = 0;
	size_t opened = 0;

	if (!fds || !tids) {
		free(fds);
		free(tids);
		return -ENOMEM;
	}
	for (; opened < n && r == 0; opened++) {
		snprintf(tmp, sizeof(tmp), ".floor-%lu.tmp", seq0 + opened);
		fds[opened] = openat(dirfd, tmp,
		                     O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fds[opened] < 0) {
			r = -errno;
			break;
		}
		r = write_all(fds[opened], (const char *)bufs[opened], len);
	}
	if (r == 0) {
		struct group g = { .fds = fds, .n = n };
		unsigned started = 0;
		for (; started < threads; started++)
			if (pthread_create(&tids[started], NULL, group_sync, &g))
				break;
		group_sync(&g);
		for (unsigned t = 0; t < started; t++)
			pthread_join(tids[t], NULL);
		r = atomic_load(&g.err);
	}
	for (size_t i = 0; i < opened; i++) {
		snprintf(tmp, sizeof(tmp), ".floor-%lu.tmp", seq0 + i);
		if (close(fds[i]) < 0 && r == 0)
			r = -errno;
		if (r == 0 && renameat(dirfd, tmp, dirfd, names[i]) < 0)
			r = -errno;
		if (r < 0)
			unlinkat(dirfd, tmp, 0);
	}
	if (r == 0 && fsync(dirfd) < 0)
		r = -errno;
	free(fds);
	free(tids);
	return r;
}
