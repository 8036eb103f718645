/*
 * Benchmark: the sweep's time against directory size. Fills a directory
 * with N entries (1% of them abandoned staging files, the rest ordinary
 * files), sweeps it, and prints entries, seconds and ns per entry. Linear
 * scaling shows as a flat ns/entry column.
 *
 *   sweep_scale DIR N...
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(int dirfd, long n)
{
	struct timespec old[2];
	clock_gettime(CLOCK_REALTIME, &old[0]);
	old[0].tv_sec -= 7200;
	old[1] = old[0];
	for (long i = 0; i < n; i++) {
		char name[64];
		if (i % 100 == 0)
			snprintf(name, sizeof(name), ".fsafe-%024lx.tmp", i);
		else
			snprintf(name, sizeof(name), "record-%09ld", i);
		int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			perror(name);
			exit(1);
		}
		if (i % 100 == 0)
			futimens(fd, old);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: sweep_scale DIR N...\n");
		return 2;
	}
	printf("%10s %10s %10s %12s\n", "entries", "removed", "seconds",
	       "ns/entry");
	for (int a = 2; a < argc; a++) {
		long n = atol(argv[a]);
		char sub[4096];
		snprintf(sub, sizeof(sub), "%s/n%ld", argv[1], n);
		if (mkdir(sub, 0755) < 0) {
			perror(sub);
			return 1;
		}
		int dirfd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fill(dirfd, n);
		double t0 = now();
		int r = fsafe_sweep(dirfd, ".", 3600 * 1000, 0, NULL, NULL);
		double dt = now() - t0;
		printf("%10ld %10d %10.3f %12.1f\n", n, r, dt, dt * 1e9 / (double)n);
		close(dirfd);
	}
	return 0;
}
