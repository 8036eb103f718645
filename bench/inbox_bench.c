/*
 * Inbox throughput (issue 8): durable 1 KiB messages per second delivered
 * by one producer and by four, against the durable floor doing the least a
 * durable hand-off can do; then take+ack by one consumer and by four.
 *
 *   cc -O2 -Iinclude bench/inbox_bench.c build/libfsafe.a -lpthread [-luring]
 *   ./a.out [DIR] [MESSAGES-PER-PRODUCER] [ROUNDS]
 *
 * DIR must be on the filesystem to measure (default "."). Every producer
 * and consumer is its own process; every case gets a fresh inbox, and all
 * are removed only at the end (removing one while the next case runs
 * would make that case pay for the deletions: see bench/README.md). Rounds interleave the cases; the report
 * gives the median and min-max of each, and the median of the per-round
 * ratio to the floor with the same number of producers.
 *
 * The floor, per message: openat(tmp/, O_CREAT|O_EXCL), write, fdatasync,
 * close, renameat into new/ under a unique name, fsync(new/). It does not
 * refuse to overwrite, stamp an order or a checksum, nor lock the stage;
 * fsafe's deliver does (create-only publish, header, staging contract).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"
#include "fsafe/inbox.h"

#define MSG 1024
#define MAXR 32

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

_Noreturn static void die(const char *what, int err)
{
	fprintf(stderr, "inbox_bench: %s: %s\n", what, strerror(err));
	exit(1);
}

static void rm_inboxes(const char *dir)
{
	char cmd[4400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'/bench-inbox-*", dir);
	if (system(cmd) != 0)
		die("rm -rf", EIO);
}

/* A fresh inbox path for the next case. */
static void next_path(char *path, size_t len, const char *dir)
{
	static unsigned n;

	snprintf(path, len, "%s/bench-inbox-%u", dir, n++);
}

static void floor_produce(int tmp, int new_, int who, int n,
                          const unsigned char *buf)
{
	char name[64];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "m-%d-%d", who, i);
		int fd = openat(tmp, name, O_WRONLY | O_CREAT | O_EXCL |
		                                   O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, buf, MSG) != MSG || fdatasync(fd) < 0 ||
		    close(fd) < 0 || renameat(tmp, name, new_, name) < 0 ||
		    fsync(new_) < 0)
			die("floor", errno);
	}
}

static void fsafe_produce(const char *path, int n, const unsigned char *buf)
{
	fsafe_inbox *ib;
	int r = fsafe_inbox_open(AT_FDCWD, path, NULL, &ib);

	if (r < 0)
		die("fsafe_inbox_open", -r);
	for (int i = 0; i < n; i++)
		if ((r = fsafe_inbox_deliver(ib, buf, MSG, NULL)) < 0)
			die("fsafe_inbox_deliver", -r);
	fsafe_inbox_close(ib);
}

static void consume(const char *path)
{
	fsafe_inbox *ib;
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	int r = fsafe_inbox_open(AT_FDCWD, path, NULL, &ib);

	if (r < 0 || (r = fsafe_inbox_consumer_open(ib, NULL, &c)) < 0)
		die("open consumer", -r);
	while ((r = fsafe_inbox_take(c, &m)) == 0) {
		if ((r = fsafe_inbox_ack(c, fsafe_inbox_msg_id(m))) < 0)
			die("fsafe_inbox_ack", -r);
		fsafe_inbox_msg_free(m);
	}
	if (r != -EAGAIN)
		die("fsafe_inbox_take", -r);
	fsafe_inbox_consumer_close(c);
	fsafe_inbox_close(ib);
}

static void wait_all(int procs)
{
	int st;

	for (int p = 0; p < procs; p++)
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("a worker failed", ECHILD);
}

/* What each worker process does. */
struct job {
	enum { J_FLOOR, J_FSAFE, J_CONSUME } kind;
	const char *path;
	int tmp, new_;           /* J_FLOOR's directories */
	int n;
	const unsigned char *buf;
};

/* Seconds for `procs` workers of job j, started together after a sync. */
static double timed(const struct job *j, int procs)
{
	sync();
	double t0 = now();
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork", errno);
		if (pid > 0)
			continue;
		if (j->kind == J_FLOOR)
			floor_produce(j->tmp, j->new_, p, j->n, j->buf);
		else if (j->kind == J_FSAFE)
			fsafe_produce(j->path, j->n, j->buf);
		else
			consume(j->path);
		_exit(0);
	}
	wait_all(procs);
	return now() - t0;
}

static void make_inbox(const char *path)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;
	int r;

	o.flags = FSAFE_INBOX_CREATE;
	if ((r = fsafe_inbox_open(AT_FDCWD, path, &o, &ib)) < 0)
		die("create inbox", -r);
	fsafe_inbox_close(ib);
}

/* Messages per second of `procs` producers (floor or fsafe) of n each,
   into a fresh inbox left in `path`. */
static double produce(const char *dir, bool floor, int procs, int n,
                      const unsigned char *buf, char *path)
{
	next_path(path, 4200, dir);
	int tmp = -1, new_ = -1;
	if (floor) {
		char t[4300], nw[4300];
		snprintf(t, sizeof(t), "%s/tmp", path);
		snprintf(nw, sizeof(nw), "%s/new", path);
		if (mkdir(path, 0755) < 0 || mkdir(t, 0755) < 0 ||
		    mkdir(nw, 0755) < 0)
			die("mkdir", errno);
		tmp = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		new_ = open(nw, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		make_inbox(path);
	}
	struct job j = { floor ? J_FLOOR : J_FSAFE, path, tmp, new_, n, buf };
	double rate = procs * n / timed(&j, procs);
	if (floor)
		close(tmp), close(new_);
	return rate;
}

/* take+ack per second of `procs` consumers draining procs*n messages. */
static double drain(const char *dir, int procs, int n,
                    const unsigned char *buf)
{
	char path[4200];

	produce(dir, false, 1, procs * n, buf, path);
	struct job j = { J_CONSUME, path, -1, -1, n, buf };
	return procs * n / timed(&j, procs);
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAXR];

	memcpy(s, v, sizeof(double) * (size_t)n);
	qsort(s, (size_t)n, sizeof(double), cmpd);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double lo(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

static double hi(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

enum { FLOOR1, FSAFE1, FLOOR4, FSAFE4, TAKE1, TAKE4, NCASE };
static const char *const cname[NCASE] = {
	"floor, 1 producer", "fsafe deliver, 1 producer",
	"floor, 4 producers", "fsafe deliver, 4 producers",
	"fsafe take+ack, 1 consumer", "fsafe take+ack, 4 consumers",
};

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	int n = argc > 2 ? atoi(argv[2]) : 500;
	int rounds = argc > 3 ? atoi(argv[3]) : 3;
	static unsigned char buf[MSG];
	double v[NCASE][MAXR], ratio[2][MAXR];

	if (n <= 0 || rounds <= 0 || rounds > MAXR) {
		fprintf(stderr, "usage: inbox_bench [DIR] [MESSAGES] [ROUNDS]\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	for (int r = 0; r < rounds; r++) {
		char p[4200];
		v[FLOOR1][r] = produce(dir, true, 1, n, buf, p);
		v[FSAFE1][r] = produce(dir, false, 1, n, buf, p);
		v[FLOOR4][r] = produce(dir, true, 4, n, buf, p);
		v[FSAFE4][r] = produce(dir, false, 4, n, buf, p);
		v[TAKE1][r] = drain(dir, 1, n, buf);
		v[TAKE4][r] = drain(dir, 4, n, buf);
		ratio[0][r] = v[FSAFE1][r] / v[FLOOR1][r];
		ratio[1][r] = v[FSAFE4][r] / v[FLOOR4][r];
		fprintf(stderr, "inbox_bench: round %d/%d done\n", r + 1, rounds);
	}
	rm_inboxes(dir);
	printf("| case (1 KiB messages, %d per process, %d rounds) | median msgs/s "
	       "| min-max | ÷ floor (median of per-round ratios) |\n"
	       "|---|---:|---:|---:|\n", n, rounds);
	for (int c = 0; c < NCASE; c++) {
		char rat[32] = "";
		if (c == FSAFE1 || c == FSAFE4)
			snprintf(rat, sizeof(rat), "%.2f",
			         median(ratio[c == FSAFE4], rounds));
		else if (c == FLOOR1 || c == FLOOR4)
			snprintf(rat, sizeof(rat), "1.00");
		printf("| %s | %.0f | %.0f-%.0f | %s |\n", cname[c],
		       median(v[c], rounds), lo(v[c], rounds), hi(v[c], rounds),
		       rat);
	}
	/* Each round's ratio, for bench/run's min-max. */
	printf("\n");
	for (int p = 0; p < 2; p++) {
		printf("per-round ratios, %d producer%s:", p ? 4 : 1,
		       p ? "s" : "");
		for (int r = 0; r < rounds; r++)
			printf(" %.3f", ratio[p][r]);
		printf("\n");
	}
	return 0;
}
