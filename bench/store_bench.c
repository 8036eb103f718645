/*
 * The keyed state store's costs: durable puts of 1 KiB records per second
 * against the durable floor (bench/floor.c: the fewest calls a crash-safe
 * replace can make), with each lock mode and without syncs; and a listing
 * of 100,000 keys, verified and names only.
 *
 *   cc -O2 -Iinclude bench/store_bench.c bench/floor.c libfsafe.a \
 *      -pthread -luring
 *   store_bench [DIR] [PUTS] [nolist]   (DIR: a scratch directory on
 *                                        the disk under test, default .)
 *   store_bench paired DIR [ROUNDS] [RUNS]
 *
 * Paired mode: a put (replace) and a delete each take turns with the
 * floor's durable replace of as many bytes as the record file holds,
 * operation by operation in one process (the order flips every round), so
 * the disk's drift falls on both alike. Prints each run's ratios (floor
 * time / store time: 1.0 is the floor's speed) and their medians.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"
#include "floor.h"

#define REC 1024
#define KEYS 64
#define LIST_KEYS 100000

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static fsafe_store *open_store(const char *dir, const char *name,
                               unsigned flags, unsigned wflags)
{
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	char path[4096];
	fsafe_store *s;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	o.flags = flags | FSAFE_STORE_CREATE;
	o.write_flags = wflags;
	int r = fsafe_store_open(AT_FDCWD, path, &o, &s);
	if (r < 0) {
		fprintf(stderr, "open %s: %s\n", path, fsafe_strerror(r));
		exit(1);
	}
	return s;
}

static double bench_puts(const char *dir, const char *name, unsigned flags,
                         unsigned wflags, int n)
{
	static unsigned char buf[REC];
	fsafe_store *s = open_store(dir, name, flags, wflags);
	char key[16];
	double t0 = now();

	for (int i = 0; i < n; i++) {
		buf[0] = (unsigned char)i;
		int kl = snprintf(key, sizeof(key), "key%d", i % KEYS);
		int r = fsafe_store_put(s, key, (size_t)kl, buf, REC, NULL);
		if (r < 0) {
			fprintf(stderr, "put: %s\n", fsafe_strerror(r));
			exit(1);
		}
	}
	double dt = now() - t0;
	fsafe_store_close(s);
	return n / dt;
}

static double bench_floor(const char *dir, int n)
{
	static unsigned char buf[REC];
	char path[4096], name[32];

	snprintf(path, sizeof(path), "%s/floor", dir);
	mkdir(path, 0777);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	double t0 = now();
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "key%d", i % KEYS);
		if (floor_write(dfd, name, buf, REC, FLOOR_FDATASYNC,
		                (unsigned long)i) < 0)
			exit(1);
	}
	double dt = now() - t0;
	close(dfd);
	return n / dt;
}

static void bench_list(const char *dir)
{
	static unsigned char buf[REC];
	fsafe_store *s = open_store(dir, "list", FSAFE_STORE_LOCK_KERNEL,
	                            FSAFE_NO_SYNC);
	char key[16];
	double t0 = now();

	for (int i = 0; i < LIST_KEYS; i++) {
		int kl = snprintf(key, sizeof(key), "k%07d", i);
		if (fsafe_store_put(s, key, (size_t)kl, buf, 64, NULL) < 0)
			exit(1);
	}
	printf("fill %d keys (kernel lock, no sync): %.1f s\n", LIST_KEYS,
	       now() - t0);
	for (int names_only = 0; names_only < 2; names_only++) {
		struct fsafe_store_list_opts o = FSAFE_STORE_LIST_OPTS_INIT;
		fsafe_store_iter *it;
		o.flags = names_only ? FSAFE_STORE_LIST_NAMES_ONLY : 0;
		t0 = now();
		if (fsafe_store_list(s, &o, &it) < 0)
			exit(1);
		size_t n = fsafe_store_iter_count(it);
		fsafe_store_iter_free(it);
		printf("ls %zu keys (%s): %.3f s\n", n,
		       names_only ? "names only" : "verified", now() - t0);
	}
	fsafe_store_close(s);
}

/* The floor's durable replace of `len` bytes, timed. */
static double floor_timed(int dfd, int i, const void *buf, size_t len)
{
	static unsigned long seq;
	char name[32];

	snprintf(name, sizeof(name), "key%d", i % KEYS);
	double t0 = now();
	if (floor_write(dfd, name, buf, len, FLOOR_FDATASYNC, seq++) < 0)
		exit(1);
	return now() - t0;
}

static double put_timed(fsafe_store *s, const char *key, const void *buf)
{
	double t0 = now();
	int r = fsafe_store_put(s, key, strlen(key), buf, REC, NULL);

	if (r < 0) {
		fprintf(stderr, "put: %s\n", fsafe_strerror(r));
		exit(1);
	}
	return now() - t0;
}

static double del_timed(fsafe_store *s, const char *key)
{
	double t0 = now();
	int r = fsafe_store_delete(s, key, strlen(key));

	if (r < 0) {
		fprintf(stderr, "delete: %s\n", fsafe_strerror(r));
		exit(1);
	}
	return now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One run: `rounds` replaces and `rounds` deletes, each paired with a
   floor write; the ratios floor / store in put[run], del[run]. */
static void paired_run(const char *dir, int run, int rounds, double *put,
                       double *del)
{
	static unsigned char buf[REC + 64];
	char name[32], key[16];
	double fp = 0, tp = 0, fd = 0, td = 0;

	snprintf(name, sizeof(name), "paired%d", run);
	fsafe_store *s = open_store(dir, name, 0, 0);
	snprintf(name, sizeof(name), "%s/floor%d", dir, run);
	mkdir(name, 0777);
	int dfd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		exit(1);
	for (int i = 0; i < rounds; i++) {
		/* The record file: header, key ("key" + up to 2 digits),
		   payload. */
		int kl = snprintf(key, sizeof(key), "key%d", i % KEYS);
		size_t len = REC + 36 + (size_t)kl;
		buf[0] = (unsigned char)i;
		if (i % 2) {
			fp += floor_timed(dfd, i, buf, len);
			tp += put_timed(s, key, buf);
		} else {
			tp += put_timed(s, key, buf);
			fp += floor_timed(dfd, i, buf, len);
		}
	}
	for (int i = 0; i < rounds; i++) {
		int kl = snprintf(key, sizeof(key), "gone%d", i);
		size_t len = REC + 36 + (size_t)kl;
		put_timed(s, key, buf);
		if (i % 2) {
			fd += floor_timed(dfd, i, buf, len);
			td += del_timed(s, key);
		} else {
			td += del_timed(s, key);
			fd += floor_timed(dfd, i, buf, len);
		}
	}
	close(dfd);
	fsafe_store_close(s);
	put[run] = fp / tp;
	del[run] = fd / td;
	printf("run %d: put %.3f (%.0f vs %.0f us), delete %.3f (%.0f vs "
	       "%.0f us)\n",
	       run, put[run], 1e6 * tp / rounds, 1e6 * fp / rounds, del[run],
	       1e6 * td / rounds, 1e6 * fd / rounds);
}

static int paired(int argc, char **argv)
{
	const char *dir = argc > 2 ? argv[2] : ".";
	int rounds = argc > 3 ? atoi(argv[3]) : 200;
	int runs = argc > 4 ? atoi(argv[4]) : 7;
	double put[64], del[64];

	if (rounds < 1 || runs < 1 || runs > 64)
		return 2;
	for (int r = 0; r < runs; r++)
		paired_run(dir, r, rounds, put, del);
	qsort(put, (size_t)runs, sizeof(double), cmp_double);
	qsort(del, (size_t)runs, sizeof(double), cmp_double);
	printf("median of %d runs of %d: put %.3f, delete %.3f of the "
	       "durable floor\n",
	       runs, rounds, put[runs / 2], del[runs / 2]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "paired") == 0)
		return paired(argc, argv);
	const char *dir = argc > 1 ? argv[1] : ".";
	int n = argc > 2 ? atoi(argv[2]) : 500;

	printf("durable floor (fdatasync + dir fsync): %8.0f writes/s\n",
	       bench_floor(dir, n));
	printf("store put, link lock:                  %8.0f puts/s\n",
	       bench_puts(dir, "link", 0, 0, n));
	printf("store put, kernel lock:                %8.0f puts/s\n",
	       bench_puts(dir, "kernel", FSAFE_STORE_LOCK_KERNEL, 0, n));
	printf("store put, kernel lock, no sync:       %8.0f puts/s\n",
	       bench_puts(dir, "nosync", FSAFE_STORE_LOCK_KERNEL,
	                  FSAFE_NO_SYNC, n * 10));
	if (argc <= 3 || strcmp(argv[3], "nolist"))
		bench_list(dir);
	return 0;
}
