/*
 * Paired single writes: the hand-written durable floor, fsafe and GLib
 * (the fastest peer with the same durability) taking turns write by write
 * in one process, so the disk's drift, which moves a whole run by ±50 %
 * here, falls on all three alike. Each implementation writes into its own
 * subdirectory; each turn takes the next of the six orders of three, so
 * each follows each other one equally often (whatever a write leaves
 * behind, a journal commit in flight, the next one pays).
 *
 *   paired DIR K SIZE distinct|same
 *
 * Prints one line: "floor SECONDS fsafe SECONDS glib SECONDS", the time
 * each spent inside its K calls, then "floor-cpu SECONDS fsafe-cpu SECONDS
 * glib-cpu SECONDS", the CPU time (user + system, this thread) of the same
 * calls: on tmpfs, where syncs cost nothing, that is each one's overhead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"
#include "floor.h"
#include "glib_write.h"

enum { FLOOR, FSAFE, GLIB, N };
static const char *const sub[N] = { "floor", "fsafe", "glib" };

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "paired: %s: %s\n", what, strerror(err));
	exit(1);
}

static int one(int impl, int dirfd, const char *dir, const char *name,
               const void *buf, size_t len, unsigned long seq)
{
	char path[4352];

	switch (impl) {
	case FLOOR:
		return floor_write(dirfd, name, buf, len, FLOOR_FDATASYNC, seq);
	case FSAFE:
		return fsafe_write_fileat(dirfd, name, buf, len, NULL);
	default:
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		return glib_durable_write(path, buf, len);
	}
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: paired DIR K SIZE distinct|same\n");
		return 2;
	}
	long k = atol(argv[2]);
	size_t len = (size_t)atol(argv[3]);
	int same = strcmp(argv[4], "same") == 0;
	char dir[N][4200];
	int fd[N];
	double spent[N] = { 0 }, cpu_spent[N] = { 0 };
	unsigned char *buf = malloc(len ? len : 1);

	if (k <= 0 || !buf)
		die("arguments", EINVAL);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	for (int i = 0; i < N; i++) {
		snprintf(dir[i], sizeof(dir[i]), "%s/%s", argv[1], sub[i]);
		if (mkdir(dir[i], 0755) < 0 && errno != EEXIST)
			die(dir[i], errno);
		fd[i] = open(dir[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd[i] < 0)
			die(dir[i], errno);
		if (same && one(FLOOR, fd[i], dir[i], "target", buf, len,
		                1000000) < 0)
			die("the first target", EIO);
	}
	sync();
	for (long w = 0; w < k; w++) {
		char name[32];
		snprintf(name, sizeof(name), same ? "target" : "t%ld", w);
		static const int order[6][N] = { { 0, 1, 2 }, { 0, 2, 1 },
			                         { 1, 0, 2 }, { 1, 2, 0 },
			                         { 2, 0, 1 }, { 2, 1, 0 } };
		for (int j = 0; j < N; j++) {
			int impl = order[w % 6][j];
			buf[0] = (unsigned char)w; /* every version differs */
			double c0 = cpu(), t0 = now();
			int r = one(impl, fd[impl], dir[impl], name, buf, len,
			            (unsigned long)w);
			spent[impl] += now() - t0;
			cpu_spent[impl] += cpu() - c0;
			if (r < 0)
				die(sub[impl], -r);
		}
	}
	printf("floor %.6f fsafe %.6f glib %.6f floor-cpu %.6f fsafe-cpu %.6f "
	       "glib-cpu %.6f\n",
	       spent[FLOOR], spent[FSAFE], spent[GLIB], cpu_spent[FLOOR],
	       cpu_spent[FSAFE], cpu_spent[GLIB]);
	return 0;
}
