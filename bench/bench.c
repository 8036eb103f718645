/*
 * The C side of the benchmark suite: the hand-written floors (floor.c) and
 * every fsafe write path, one case per process run, timed inside the
 * process (start-up excluded). bench/run (through bench/orchestrate.py)
 * interleaves these runs with the peers' drivers, round by round.
 *
 *   bench write IMPL DIR K SIZE distinct|same
 *       Write K payloads of SIZE bytes into the existing directory DIR
 *       (held open): to new targets t0, t1, ... (distinct) or replacing
 *       DIR/target (same; bench/run creates and syncs it first). K distinct
 *       payload buffers (at most 1000, then reused) are made before the
 *       clock starts. Prints the elapsed seconds of the K writes. The loop
 *       is enclosed in two marker calls, access("fsafe-bench:begin") and
 *       access("fsafe-bench:end"), so strace output can be cut to it.
 *
 *   bench mem DIR uring|pool
 *       Peak memory of one batch of 1000 4 KiB writes from buffers the
 *       caller owns: the buffers are made and touched first, the peak RSS
 *       is then reset (/proc/self/clear_refs), the batch is built,
 *       committed and freed, and the growth of VmHWM above the RSS at the
 *       reset is printed: "RSS_KIB HWM_KIB GROWTH_KIB".
 *
 * IMPL: floor-fdatasync floor-fsync floor-nosync fsafe fsafe-nosync fsafe-named
 * fsafe-writer fsafe-async fsafe-batch10 fsafe-batch100 fsafe-batch1000
 * fsafe-batch10-pool fsafe-batch100-pool fsafe-batch1000-pool, and
 * fsafe-batch1000-w128[-pool] (max_inflight 128: 16 overlapped windows of 64),
 * floor-group1000 (the hand-written group commit of floor.c, 16 threads).
 * Batch and async cases need distinct targets.
 */
#define _GNU_SOURCE
#include <fsafe.h>
#include <fsafe/batch.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

#define MAX_BUFS 1000

enum impl {
	I_FLOOR_FDATASYNC,
	I_FLOOR_FSYNC,
	I_FLOOR_NOSYNC,
	I_FSAFE,
	I_FSAFE_NOSYNC,
	I_FSAFE_NAMED,
	I_WRITER,
	I_ASYNC,
	I_BATCH,
	I_FLOOR_GROUP,
	N_IMPL
};

struct spec {
	const char *name;
	enum impl impl;
	size_t batch;  /* items per batch (I_BATCH) */
	unsigned bflags;
	unsigned inflight; /* the batch's max_inflight; 0: its default */
};

static const struct spec specs[] = {
	{ "floor-fdatasync", I_FLOOR_FDATASYNC, 0, 0, 0 },
	{ "floor-fsync", I_FLOOR_FSYNC, 0, 0, 0 },
	{ "floor-nosync", I_FLOOR_NOSYNC, 0, 0, 0 },
	{ "fsafe", I_FSAFE, 0, 0, 0 },
	{ "fsafe-nosync", I_FSAFE_NOSYNC, 0, 0, 0 },
	{ "fsafe-named", I_FSAFE_NAMED, 0, 0, 0 },
	{ "fsafe-writer", I_WRITER, 0, 0, 0 },
	{ "fsafe-async", I_ASYNC, 0, 0, 0 },
	{ "fsafe-batch10", I_BATCH, 10, 0, 0 },
	{ "fsafe-batch100", I_BATCH, 100, 0, 0 },
	{ "fsafe-batch1000", I_BATCH, 1000, 0, 0 },
	{ "fsafe-batch10-pool", I_BATCH, 10, FSAFE_BATCH_NO_URING, 0 },
	{ "fsafe-batch100-pool", I_BATCH, 100, FSAFE_BATCH_NO_URING, 0 },
	{ "fsafe-batch1000-pool", I_BATCH, 1000, FSAFE_BATCH_NO_URING, 0 },
	{ "fsafe-batch1000-w128", I_BATCH, 1000, 0, 128 },
	{ "fsafe-batch1000-w128-pool", I_BATCH, 1000, FSAFE_BATCH_NO_URING, 128 },
	{ "floor-group1000", I_FLOOR_GROUP, 1000, 0, 0 },
};

_Noreturn static void die(const char *what, const char *arg, int err)
{
	fprintf(stderr, "bench: %s%s%s%s%s\n", what, arg ? " " : "",
	        arg ? arg : "", err ? ": " : "", err ? strerror(err) : "");
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n distinct payloads of len bytes, every page touched. */
static unsigned char **make_bufs(size_t n, size_t len)
{
	unsigned char **b = calloc(n, sizeof(*b));
	if (!b)
		die("out of memory", NULL, 0);
	for (size_t i = 0; i < n; i++) {
		if (!(b[i] = malloc(len)))
			die("out of memory", NULL, 0);
		for (size_t j = 0; j < len; j++)
			b[i][j] = (unsigned char)(j * 131u + i * 7u + 1u);
		unsigned long tag = i + 1;
		memcpy(b[i], &tag, len < sizeof(tag) ? len : sizeof(tag));
	}
	return b;
}

static void free_bufs(unsigned char **b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(b[i]);
	free(b);
}

static void check(int r, const char *impl)
{
	if (r < 0)
		die("write failed:", impl, -r);
	if (r > 0)
		die("write reported failures (or not durable):", impl, 0);
}

static void name_of(char *name, size_t cap, bool same, long i)
{
	if (same)
		snprintf(name, cap, "target");
	else
		snprintf(name, cap, "t%ld", i);
}

static void run_single(const struct spec *s, int dirfd, long k, size_t len,
                       bool same, unsigned char **bufs, size_t nbuf)
{
	struct fsafe_write_opts nosync = FSAFE_WRITE_OPTS_INIT;
	char name[32];

	nosync.flags = FSAFE_NO_SYNC;
	struct fsafe_write_opts named = FSAFE_WRITE_OPTS_INIT;
	named.flags = FSAFE_NO_TMPFILE;
	for (long i = 0; i < k; i++) {
		const unsigned char *buf = bufs[(size_t)i % nbuf];
		fsafe_writer *w;
		int r = 0;

		name_of(name, sizeof(name), same, i);
		switch (s->impl) {
		case I_FLOOR_FDATASYNC:
			r = floor_write(dirfd, name, buf, len, FLOOR_FDATASYNC,
			                (unsigned long)i);
			break;
		case I_FLOOR_FSYNC:
			r = floor_write(dirfd, name, buf, len, FLOOR_FSYNC,
			                (unsigned long)i);
			break;
		case I_FLOOR_NOSYNC:
			r = floor_write(dirfd, name, buf, len, FLOOR_NOSYNC,
			                (unsigned long)i);
			break;
		case I_FSAFE:
			r = fsafe_write_fileat(dirfd, name, buf, len, NULL);
			break;
		case I_FSAFE_NOSYNC:
			r = fsafe_write_fileat(dirfd, name, buf, len, &nosync);
			break;
		case I_FSAFE_NAMED:
			r = fsafe_write_fileat(dirfd, name, buf, len, &named);
			break;
		case I_WRITER:
			r = fsafe_writer_open(dirfd, name, NULL, &w);
			if (r == 0 && (r = fsafe_writer_write(w, buf, len)) < 0)
				fsafe_writer_abort(w);
			else if (r == 0)
				r = fsafe_writer_commit(w);
			break;
		default:
			die("not a single-write case:", s->name, 0);
		}
		check(r, s->name);
	}
}

static void run_batch(const struct spec *s, int dirfd, long k, size_t len,
                      unsigned char **bufs, size_t nbuf)
{
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	char name[32];

	bo.flags = s->bflags;
	bo.max_inflight = s->inflight;
	for (long i = 0; i < k;) {
		fsafe_batch *b;
		int r = fsafe_batch_new(&bo, &b);
		check(r, s->name);
		for (size_t j = 0; j < s->batch && i < k; j++, i++) {
			name_of(name, sizeof(name), false, i);
			r = fsafe_batch_add(b, dirfd, name, bufs[(size_t)i % nbuf],
			                    len, NULL);
			check(r < 0 ? r : 0, s->name);
		}
		check(fsafe_batch_commit(b), s->name);
		fsafe_batch_free(b);
	}
}

/*
 * At most this many writes outstanding: the engine's default max_group,
 * so every group the worker takes is full while the loop keeps it fed.
 */
#define ASYNC_OUTSTANDING 128

static long reap_some(const struct spec *s, fsafe_async *a)
{
	struct fsafe_async_completion c[ASYNC_OUTSTANDING];
	int r = fsafe_async_wait(a, FSAFE_FOREVER);

	if (r < 0)
		die("fsafe_async_wait:", s->name, -r);
	int n = fsafe_async_reap(a, c, sizeof(c) / sizeof(c[0]));
	for (int j = 0; j < n; j++)
		check(c[j].result, s->name);
	return n;
}

/* Hand-written group commits of s->batch files (floor.c). */
static void run_floor_group(const struct spec *s, int dirfd, long k,
                            size_t len, unsigned char **bufs, size_t nbuf)
{
	size_t n = s->batch;
	char **names = calloc(n, sizeof(*names));
	const unsigned char **b = calloc(n, sizeof(*b));

	if (!names || !b)
		die("out of memory", NULL, 0);
	for (size_t j = 0; j < n; j++)
		if (!(names[j] = malloc(32)))
			die("out of memory", NULL, 0);
	for (long i = 0; i < k; i += (long)n) {
		size_t m = (size_t)(k - i) < n ? (size_t)(k - i) : n;
		for (size_t j = 0; j < m; j++) {
			name_of(names[j], 32, false, i + (long)j);
			b[j] = bufs[(size_t)(i + (long)j) % nbuf];
		}
		check(floor_group_write(dirfd, names, b, len, m, 16,
		                        (unsigned long)i),
		      s->name);
	}
	for (size_t j = 0; j < n; j++)
		free(names[j]);
	free(names);
	free(b);
}

static void run_async(const struct spec *s, int dirfd, long k, size_t len,
                      unsigned char **bufs, size_t nbuf)
{
	fsafe_async *a;
	char name[32];
	long done = 0;

	check(fsafe_async_new(NULL, &a), s->name);
	for (long i = 0; i < k; i++) {
		while (i - done >= ASYNC_OUTSTANDING)
			done += reap_some(s, a);
		name_of(name, sizeof(name), false, i);
		check(fsafe_async_submit(a, dirfd, name, bufs[(size_t)i % nbuf],
		                         len, NULL, NULL, NULL),
		      s->name);
	}
	while (done < k)
		done += reap_some(s, a);
	fsafe_async_free(a);
}

/* The last target written holds its payload. */
static void verify(int dirfd, const char *name, const unsigned char *want,
                   size_t len)
{
	unsigned char *got = malloc(len + 1);
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t m = 1;

	if (!got || fd < 0)
		die("cannot read back", name, errno);
	while (n <= len && (m = read(fd, got + n, len + 1 - n)) > 0)
		n += (size_t)m;
	close(fd);
	if (m < 0 || n != len || memcmp(got, want, len) != 0)
		die("wrong content in", name, 0);
	free(got);
}

static const struct spec *find_spec(const char *name)
{
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		if (strcmp(specs[i].name, name) == 0)
			return &specs[i];
	die("unknown implementation", name, 0);
}

static long parse_long(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v <= 0)
		die("bad number", s, 0);
	return v;
}

static int cmd_write(char **argv)
{
	const struct spec *s = find_spec(argv[0]);
	const char *dir = argv[1];
	long k = parse_long(argv[2]);
	size_t len = (size_t)parse_long(argv[3]);
	bool same = strcmp(argv[4], "same") == 0;
	char name[32];

	if (!same && strcmp(argv[4], "distinct") != 0)
		die("mode must be distinct or same, not", argv[4], 0);
	if (same && (s->impl == I_BATCH || s->impl == I_ASYNC ||
	             s->impl == I_FLOOR_GROUP))
		die("needs distinct targets:", s->name, 0);
	size_t nbuf = k < MAX_BUFS ? (size_t)k : MAX_BUFS;
	unsigned char **bufs = make_bufs(nbuf, len);
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		die("open", dir, errno);

	(void)!access("fsafe-bench:begin", F_OK);
	double t0 = now();
	if (s->impl == I_BATCH)
		run_batch(s, dirfd, k, len, bufs, nbuf);
	else if (s->impl == I_FLOOR_GROUP)
		run_floor_group(s, dirfd, k, len, bufs, nbuf);
	else if (s->impl == I_ASYNC)
		run_async(s, dirfd, k, len, bufs, nbuf);
	else
		run_single(s, dirfd, k, len, same, bufs, nbuf);
	double t = now() - t0;
	(void)!access("fsafe-bench:end", F_OK);

	name_of(name, sizeof(name), same, k - 1);
	verify(dirfd, name, bufs[(size_t)(k - 1) % nbuf], len);
	free_bufs(bufs, nbuf);
	close(dirfd);
	printf("%.9f\n", t);
	return 0;
}

static long status_kib(const char *field)
{
	char line[256];
	size_t n = strlen(field);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		die("open /proc/self/status", NULL, errno);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

static int cmd_mem(char **argv)
{
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	enum { N = 1000, LEN = 4096 };
	char name[32];
	fsafe_batch *b;

	if (strcmp(argv[1], "pool") == 0)
		bo.flags = FSAFE_BATCH_NO_URING;
	else if (strcmp(argv[1], "uring") != 0)
		die("mem: uring or pool, not", argv[1], 0);
	unsigned char **bufs = make_bufs(N, LEN);
	int dirfd = open(argv[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		die("open", argv[0], errno);
	/* Reset the peak to the current RSS, buffers included. */
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "5", 1) != 1)
		die("reset the peak RSS (/proc/self/clear_refs)", NULL, errno);
	close(fd);
	long rss = status_kib("VmRSS");
	check(fsafe_batch_new(&bo, &b), "mem");
	for (int i = 0; i < N; i++) {
		name_of(name, sizeof(name), false, i);
		int r = fsafe_batch_add(b, dirfd, name, bufs[i], LEN, NULL);
		check(r < 0 ? r : 0, "mem");
	}
	check(fsafe_batch_commit(b), "mem");
	fsafe_batch_free(b);
	long hwm = status_kib("VmHWM");
	name_of(name, sizeof(name), false, N - 1);
	verify(dirfd, name, bufs[N - 1], LEN);
	free_bufs(bufs, N);
	close(dirfd);
	printf("%ld %ld %ld\n", rss, hwm, hwm - rss);
	return 0;
}

int main(int argc, char **argv)
{
	/* libc's one-time malloc set-up happens here, outside any marker. */
	void *volatile warm = malloc(1024);
	free(warm);
	if (argc == 7 && strcmp(argv[1], "write") == 0)
		return cmd_write(argv + 2);
	if (argc == 4 && strcmp(argv[1], "mem") == 0)
		return cmd_mem(argv + 2);
	fprintf(stderr, "usage: bench write IMPL DIR K SIZE distinct|same\n"
	                "       bench mem DIR uring|pool\n");
	return 2;
}
