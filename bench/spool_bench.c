/*
 * Spool throughput: MB/s of payload appended with 100-byte and 4 KiB
 * records at batch sizes 1, 64 and 1024 (each batch one durable append),
 * against raw write+fdatasync of the same payload bytes per batch in one
 * file; then read throughput of a spool of 4 KiB records.
 *
 *   cc -O2 -Iinclude bench/spool_bench.c build/libfsafe.a -lpthread [-luring]
 *   ./a.out [DIR] [SECONDS-PER-CASE]
 *
 * DIR must be on the filesystem to measure (default "."); each case runs
 * for about SECONDS (default 2) or 256 MiB, whichever comes first.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"

#define CAP (256ull << 20)

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void rmspool(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/bench-spool' '%s/bench-raw'",
	         dir, dir);
	if (system(cmd) != 0)
		exit(1);
}

static double bench_spool(int dfd, size_t rec, size_t batch, double secs,
                          unsigned char *buf, struct iovec *v)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;
	uint64_t bytes = 0;

	o.flags = FSAFE_SPOOL_CREATE;
	if (fsafe_spool_open(dfd, "bench-spool", &o, &s) < 0)
		exit(1);
	for (size_t i = 0; i < batch; i++)
		v[i] = (struct iovec){ buf + i * rec, rec };
	double t0 = now(), t;
	do {
		if (fsafe_spool_append(s, v, batch, NULL) < 0)
			exit(1);
		bytes += rec * batch;
	} while ((t = now() - t0) < secs && bytes < CAP);
	fsafe_spool_close(s);
	return (double)bytes / t / 1e6;
}

static double bench_raw(int dfd, size_t rec, size_t batch, double secs,
                        const unsigned char *buf)
{
	int fd = openat(dfd, "bench-raw", O_WRONLY | O_CREAT | O_TRUNC |
	                O_CLOEXEC, 0644);
	uint64_t bytes = 0;

	if (fd < 0)
		exit(1);
	double t0 = now(), t;
	do {
		if (write(fd, buf, rec * batch) != (ssize_t)(rec * batch) ||
		    fdatasync(fd) < 0)
			exit(1);
		bytes += rec * batch;
	} while ((t = now() - t0) < secs && bytes < CAP);
	close(fd);
	return (double)bytes / t / 1e6;
}

static double bench_read(int dfd, uint64_t *bytes)
{
	fsafe_spool *s;
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq;

	*bytes = 0;
	double t0 = now();
	if (fsafe_spool_open(dfd, "bench-spool", NULL, &s) < 0 ||
	    fsafe_spool_reader_open(s, 1, &rd) < 0)
		exit(1);
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1)
		*bytes += len;
	double t = now() - t0;
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
	return (double)*bytes / t / 1e6;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	double secs = argc > 2 ? atof(argv[2]) : 2;
	static const size_t recs[] = { 100, 4096 }, batches[] = { 1, 64, 1024 };
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	unsigned char *buf = malloc(4096 * 1024);
	struct iovec *v = malloc(1024 * sizeof(*v));
	uint64_t bytes;

	if (dfd < 0 || !buf || !v)
		return 1;
	memset(buf, 'x', 4096 * 1024);
	printf("%-8s %-6s %12s %12s %7s\n", "record", "batch", "spool MB/s",
	       "raw MB/s", "ratio");
	for (size_t r = 0; r < 2; r++)
		for (size_t b = 0; b < 3; b++) {
			rmspool(dir);
			double sp = bench_spool(dfd, recs[r], batches[b], secs,
			                        buf, v);
			double raw = bench_raw(dfd, recs[r], batches[b], secs,
			                       buf);
			printf("%-8zu %-6zu %12.1f %12.1f %7.2f\n", recs[r],
			       batches[b], sp, raw, sp / raw);
			fflush(stdout);
		}
	double rd = bench_read(dfd, &bytes); /* the 4 KiB x 1024 spool */
	printf("read (open + scan + read, page cache warm): %.0f MB/s over "
	       "%llu MiB\n", rd, (unsigned long long)(bytes >> 20));
	rmspool(dir);
	return 0;
}
