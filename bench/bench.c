/*
 * Throughput of one small durable write: fsafe_write_fileat() against the
 * hand-written floor (floor.c), in one process, interleaved.
 *
 *   bench run DIR [--rounds N] [--secs S] [--nosync-secs S] [--max-ops N]
 *             [--impl IMPL]...
 *       For each round, every case in turn (the order reverses every other
 *       round, so drift in the machine's load hits all cases alike): make a
 *       fresh directory under DIR, syncfs, then write 4 KiB payloads for S
 *       seconds (durable cases) or S' seconds / N ops (no-sync cases), to
 *       distinct new targets or rewriting one existing target. Prints a
 *       Markdown table: median and min-max ops/s per case, and the ratio
 *       to the floors measured in the same rounds. --impl restricts the
 *       run to the named implementations (and the two floors).
 *
 *   bench once DIR IMPL new|replace
 *       Set up a directory (with the target already present and synced for
 *       "replace"), then do exactly one write between two marker calls,
 *       access("fsafe-bench:begin") and access("fsafe-bench:end"), so that
 *       strace output can be cut to that one write.
 *
 * IMPL is one of: floor-fdatasync floor-fsync floor-nosync fsafe
 * fsafe-nosync fsafe-no-tmpfile.
 */
#define _GNU_SOURCE
#include <fsafe.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

#define PAYLOAD 4096
#define MAX_ROUNDS 31

enum impl {
	I_FLOOR_FDATASYNC,
	I_FLOOR_FSYNC,
	I_FLOOR_NOSYNC,
	I_FSAFE,
	I_FSAFE_NOSYNC,
	I_FSAFE_NO_TMPFILE,
	N_IMPL
};

static const struct {
	const char *name;
	bool durable;
	const char *what;
} impls[N_IMPL] = {
	[I_FLOOR_FDATASYNC] = { "floor-fdatasync", true,
	                        "floor: O_EXCL temp, write, fdatasync, rename, fsync(dir)" },
	[I_FLOOR_FSYNC] = { "floor-fsync", true,
	                    "floor: O_EXCL temp, write, fsync, rename, fsync(dir)" },
	[I_FLOOR_NOSYNC] = { "floor-nosync", false,
	                     "floor: O_EXCL temp, write, rename (no sync)" },
	[I_FSAFE] = { "fsafe", true, "fsafe_write_fileat, default (durable)" },
	[I_FSAFE_NOSYNC] = { "fsafe-nosync", false,
	                     "fsafe_write_fileat, FSAFE_NO_SYNC" },
	[I_FSAFE_NO_TMPFILE] = { "fsafe-no-tmpfile", true,
	                         "fsafe_write_fileat, FSAFE_NO_TMPFILE (durable)" },
};

enum target { T_DISTINCT, T_SAME, N_TARGET };
static const char *const target_names[N_TARGET] = { "distinct", "same" };

static unsigned char payload[PAYLOAD];
static unsigned long seq; /* unique temp names for the floor, per process */

_Noreturn static void die(const char *fmt, const char *arg, int err)
{
	fprintf(stderr, "bench: ");
	fprintf(stderr, fmt, arg);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fprintf(stderr, "\n");
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int do_write(enum impl impl, int dirfd, const char *name)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	/* Every payload differs from the last one. */
	seq++;
	memcpy(payload, &seq, sizeof(seq));
	switch (impl) {
	case I_FLOOR_FDATASYNC:
		return floor_write(dirfd, name, payload, PAYLOAD,
		                   FLOOR_FDATASYNC, seq);
	case I_FLOOR_FSYNC:
		return floor_write(dirfd, name, payload, PAYLOAD, FLOOR_FSYNC,
		                   seq);
	case I_FLOOR_NOSYNC:
		return floor_write(dirfd, name, payload, PAYLOAD, FLOOR_NOSYNC,
		                   seq);
	case I_FSAFE:
		return fsafe_write_fileat(dirfd, name, payload, PAYLOAD, NULL);
	case I_FSAFE_NOSYNC:
		o.flags = FSAFE_NO_SYNC;
		return fsafe_write_fileat(dirfd, name, payload, PAYLOAD, &o);
	case I_FSAFE_NO_TMPFILE:
		o.flags = FSAFE_NO_TMPFILE;
		return fsafe_write_fileat(dirfd, name, payload, PAYLOAD, &o);
	case N_IMPL:
		break;
	}
	return -EINVAL;
}

/* Make DIR/sub fresh and return it open; "replace" gets a synced target. */
static int setup(const char *dir, const char *sub, bool with_target)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	if (mkdir(path, 0777) < 0)
		die("mkdir %s", path, errno);
	int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		die("open %s", path, errno);
	if (with_target && floor_write(dirfd, "target", payload, PAYLOAD,
	                               FLOOR_FSYNC, ++seq) < 0)
		die("create %s/target", path, errno);
	/* Start every case from a clean journal. */
	if (syncfs(dirfd) < 0)
		die("syncfs %s", path, errno);
	return dirfd;
}

/* Empty and remove DIR/sub (not timed). */
static void teardown(const char *dir, const char *sub, int dirfd)
{
	char path[PATH_MAX];
	int fd = dup(dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;

	if (!d)
		die("opendir %s", sub, errno);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
		    unlinkat(dirfd, e->d_name, 0) < 0)
			die("unlink %s", e->d_name, errno);
	closedir(d);
	close(dirfd);
	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	if (rmdir(path) < 0)
		die("rmdir %s", path, errno);
}

/* The target holds the last payload written. */
static void verify(int dirfd, const char *name)
{
	unsigned char got[PAYLOAD + 1];
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, got, sizeof(got));

	if (fd >= 0)
		close(fd);
	if (n != PAYLOAD || memcmp(got, payload, PAYLOAD) != 0)
		die("%s does not hold the last payload", name, 0);
}

struct options {
	int rounds;
	double secs, nosync_secs;
	long max_ops;
	bool only[N_IMPL]; /* --impl given: run only these */
	bool filtered;
};

static double measure(const char *dir, int round, enum impl impl,
                      enum target tg, const struct options *opt)
{
	char sub[128], name[32];
	bool same = tg == T_SAME;
	double secs = impls[impl].durable ? opt->secs : opt->nosync_secs;

	snprintf(sub, sizeof(sub), "r%d-%s-%s", round, impls[impl].name,
	         target_names[tg]);
	int dirfd = setup(dir, sub, same);
	long ops = 0;
	double t0 = now(), t;
	do {
		if (same)
			strcpy(name, "target");
		else
			snprintf(name, sizeof(name), "t%ld", ops);
		int r = do_write(impl, dirfd, name);
		if (r < 0)
			die("%s: write failed", impls[impl].name, -r);
		ops++;
		t = now() - t0;
	} while (t < secs && ops < opt->max_ops);
	verify(dirfd, name);
	teardown(dir, sub, dirfd);
	return (double)ops / t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_ROUNDS];
	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double vmin(const double *v, int n)
{
	double m = v[0];
	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

static double vmax(const double *v, int n)
{
	double m = v[0];
	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* Median over rounds of ops[a][r] / ops[b][r] (paired within a round). */
static double paired_ratio(const double *a, const double *b, int n)
{
	double q[MAX_ROUNDS];
	for (int r = 0; r < n; r++)
		q[r] = a[r] / b[r];
	return median(q, n);
}

static int cmd_run(const char *dir, const struct options *opt)
{
	static double ops[N_TARGET][N_IMPL][MAX_ROUNDS];
	int n = opt->rounds;
	enum { N_CASES = N_TARGET * N_IMPL };

	fprintf(stderr, "bench: %d rounds x %d cases, %.2fs per durable case, "
	                "%.2fs (max %ld ops) per no-sync case\n",
	        n, N_CASES, opt->secs, opt->nosync_secs, opt->max_ops);
	for (int r = 0; r < n; r++) {
		for (int k = 0; k < N_CASES; k++) {
			int c = r % 2 ? N_CASES - 1 - k : k;
			enum target tg = (enum target)(c / N_IMPL);
			enum impl im = (enum impl)(c % N_IMPL);
			if (opt->filtered && !opt->only[im] &&
			    im != I_FLOOR_FDATASYNC && im != I_FLOOR_NOSYNC)
				ops[tg][im][r] = 0;
			else
				ops[tg][im][r] = measure(dir, r, im, tg, opt);
		}
		fprintf(stderr, "bench: round %d/%d done (fsafe same %.0f/s, "
		                "floor same %.0f/s)\n",
		        r + 1, n, ops[T_SAME][I_FSAFE][r],
		        ops[T_SAME][I_FLOOR_FDATASYNC][r]);
	}

	printf("| target | implementation | median ops/s | min–max ops/s "
	       "| ÷ durable floor (fdatasync) | ÷ no-sync floor |\n");
	printf("|---|---|---:|---:|---:|---:|\n");
	for (int tg = 0; tg < N_TARGET; tg++)
		for (int im = 0; im < N_IMPL; im++) {
			const double *v = ops[tg][im];
			if (v[0] == 0)
				continue; /* filtered out */
			printf("| %s | %s | %.0f | %.0f–%.0f | %.3f | %.3f |\n",
			       target_names[tg], impls[im].name, median(v, n),
			       vmin(v, n), vmax(v, n),
			       paired_ratio(v, ops[tg][I_FLOOR_FDATASYNC], n),
			       paired_ratio(v, ops[tg][I_FLOOR_NOSYNC], n));
		}
	printf("\nRatios are medians of the per-round ratios (each case "
	       "divided by the floor measured in the same round).\n");
	printf("\nImplementations:\n\n");
	for (int im = 0; im < N_IMPL; im++)
		printf("- `%s`: %s\n", impls[im].name, impls[im].what);
	printf("\nRaw ops/s per round:\n\n```\n");
	for (int tg = 0; tg < N_TARGET; tg++)
		for (int im = 0; im < N_IMPL; im++) {
			if (ops[tg][im][0] == 0)
				continue; /* filtered out */
			printf("%-8s %-17s", target_names[tg], impls[im].name);
			for (int r = 0; r < n; r++)
				printf(" %7.0f", ops[tg][im][r]);
			printf("\n");
		}
	printf("```\n");
	return 0;
}

static int cmd_once(const char *dir, enum impl im, enum target tg)
{
	char sub[128];
	const char *name = "target";

	snprintf(sub, sizeof(sub), "once-%s-%s-%ld", impls[im].name,
	         tg == T_SAME ? "replace" : "new", (long)getpid());
	int dirfd = setup(dir, sub, tg == T_SAME);
	(void)!access("fsafe-bench:begin", F_OK);
	int r = do_write(im, dirfd, name);
	(void)!access("fsafe-bench:end", F_OK);
	if (r < 0)
		die("%s: write failed", impls[im].name, -r);
	verify(dirfd, name);
	teardown(dir, sub, dirfd);
	return 0;
}

static enum impl parse_impl(const char *s)
{
	for (int i = 0; i < N_IMPL; i++)
		if (strcmp(s, impls[i].name) == 0)
			return (enum impl)i;
	die("unknown implementation %s", s, 0);
	return N_IMPL;
}

static double parse_num(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || v <= 0)
		die("bad number %s", s, 0);
	return v;
}

_Noreturn static void usage(void)
{
	fprintf(stderr,
	        "usage: bench run DIR [--rounds N] [--secs S] [--nosync-secs S] "
	        "[--max-ops N]\n"
	        "                 [--impl IMPL]... (the two floors always run)\n"
	        "       bench once DIR IMPL new|replace\n");
	exit(2);
}

int main(int argc, char **argv)
{
	/* libc's one-time set-up of malloc (a getrandom and brk) happens
	   here, not inside the first measured write. */
	void *volatile warm = malloc(1024);
	free(warm);
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (unsigned char)(i * 131u + 7u);
	if (argc < 3)
		usage();
	const char *dir = argv[2];

	if (strcmp(argv[1], "once") == 0) {
		if (argc != 5)
			usage();
		enum impl im = parse_impl(argv[3]);
		if (strcmp(argv[4], "new") == 0)
			return cmd_once(dir, im, T_DISTINCT);
		if (strcmp(argv[4], "replace") == 0)
			return cmd_once(dir, im, T_SAME);
		usage();
	}
	if (strcmp(argv[1], "run") != 0)
		usage();

	struct options opt = { .rounds = 7, .secs = 1.0, .nosync_secs = 0.3,
	                       .max_ops = 20000 };
	for (int i = 3; i < argc; i += 2) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--impl") == 0) {
			opt.only[parse_impl(argv[i + 1])] = true;
			opt.filtered = true;
			continue;
		}
		double v = parse_num(argv[i + 1]);
		if (strcmp(argv[i], "--rounds") == 0)
			opt.rounds = (int)v;
		else if (strcmp(argv[i], "--secs") == 0)
			opt.secs = v;
		else if (strcmp(argv[i], "--nosync-secs") == 0)
			opt.nosync_secs = v;
		else if (strcmp(argv[i], "--max-ops") == 0)
			opt.max_ops = (long)v;
		else
			usage();
	}
	if (opt.rounds < 1 || opt.rounds > MAX_ROUNDS)
		die("--rounds must be 1..31, not %s", "?", 0);
	return cmd_run(dir, &opt);
}
