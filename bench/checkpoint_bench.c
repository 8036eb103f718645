/*
 * Commit latency of a three-file checkpoint against writing the same three
 * files one by one with fsafe_write_file (which is not atomic as a set).
 *
 * Build (from the repository, after a build in build/):
 *   cc -O2 -Iinclude bench/checkpoint_bench.c build/libfsafe.a -lpthread \
 *      $(pkg-config --libs liburing 2>/dev/null) -o checkpoint_bench
 * Run: ./checkpoint_bench DIR [ROUNDS]   (DIR on the filesystem to measure)
 *
 * Files: 2 KiB, 64 KiB and 1 MiB. Each round changes every file's bytes,
 * so no file is hard-linked; a second checkpoint series keeps the large
 * file unchanged (linked) to show what links save.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsafe.h"

static const size_t sizes[3] = { 2048, 65536, 1 << 20 };
static const char *const names[3] = { "manifest.json", "recognizers.jsonl",
                                      "discovery_candidates.jsonl" };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, int n)
{
	qsort(t, (size_t)n, sizeof(*t), cmp_d);
	printf("%-44s median %8.3f ms  p90 %8.3f ms  (n=%d)\n", what,
	       t[n / 2] * 1e3, t[n * 9 / 10] * 1e3, n);
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 50;
	char path[4096];
	unsigned char *buf[3];
	double *t = calloc((size_t)rounds, sizeof(double));

	if (argc < 2 || rounds < 1 || !t) {
		fprintf(stderr, "usage: checkpoint_bench DIR [ROUNDS]\n");
		return 2;
	}
	for (int i = 0; i < 3; i++)
		buf[i] = malloc(sizes[i]);
	/* Three files, one fsafe_write_file each. */
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < 3; i++)
			memset(buf[i], 'a' + r % 26, sizes[i]);
		double t0 = now();
		for (int i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/%s", argv[1], names[i]);
			if (fsafe_write_file(path, buf[i], sizes[i], NULL) != 0)
				return 1;
		}
		t[r] = now() - t0;
	}
	report("3 x fsafe_write_file", t, rounds);
	/* The same three files as one checkpoint, every file changed, then
	   with the 1 MiB file unchanged (hard-linked). */
	for (int linked = 0; linked < 2; linked++) {
		struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
		fsafe_checkpoint *cp;
		snprintf(path, sizeof(path), "%s/ckpt", argv[1]);
		o.flags = FSAFE_CHECKPOINT_CREATE;
		if (fsafe_checkpoint_open(AT_FDCWD, path, &o, &cp) != 0)
			return 1;
		for (int r = 0; r < rounds; r++) {
			for (int i = 0; i < 3; i++)
				if (!(linked && i == 2))
					memset(buf[i], 'a' + r % 26, sizes[i]);
			fsafe_checkpoint_tx *tx;
			double t0 = now();
			if (fsafe_checkpoint_begin(cp, &tx) != 0)
				return 1;
			for (int i = 0; i < 3; i++)
				if (fsafe_checkpoint_add(tx, names[i], buf[i],
				                         sizes[i]) != 0)
					return 1;
			if (fsafe_checkpoint_commit(tx, NULL) != 0)
				return 1;
			t[r] = now() - t0;
		}
		fsafe_checkpoint_close(cp);
		report(linked ? "checkpoint of 3 (1 MiB file unchanged, linked)"
		              : "checkpoint of 3 (all changed)", t, rounds);
	}
	return 0;
}
