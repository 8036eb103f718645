/*
 * Bounded memory: a spool of FSAFE_SPOOL_LARGE_MIB MiB (default 256; the
 * issue's 1 GiB with FSAFE_SPOOL_LARGE_MIB=1024) of 4 KiB records is
 * written, then opened (which scans it) and read through in a fresh child
 * process whose peak resident set must grow by far less than the data's
 * size. Growth, not the peak itself: the child starts with the parent's
 * resident pages, and under ASan those hold the quarantine of the
 * writer's freed memory (up to 256 MiB).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "spoolutil.h"
#include "testutil.h"

#define REC 4096
#define BATCH 256
/* Far below the 256 MiB read; under ASan the bound is looser but still
   well short of the whole. */
#define RSS_LIMIT_KIB (TU_ASAN ? 128 * 1024 : 32 * 1024)

/* The resident set now, from /proc/self/statm; -1 where unreadable. */
static long rss_kib(void)
{
	long pages = -1;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f && fscanf(f, "%*s %ld", &pages) != 1)
		pages = -1;
	if (f)
		fclose(f);
	return pages < 0 ? -1 : pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void fill_rec(unsigned char *b, uint64_t seq)
{
	memset(b, (int)(seq & 0xff), REC);
	memcpy(b, &seq, sizeof(seq));
}

static void write_spool(int dirfd, uint64_t n)
{
	fsafe_spool *s = su_open(dirfd, "sp", 0, REC);
	unsigned char *buf = malloc((size_t)BATCH * REC);
	struct iovec v[BATCH];

	for (uint64_t seq = 1; seq <= n; seq += BATCH) {
		size_t k = n - seq + 1 < BATCH ? (size_t)(n - seq + 1) : BATCH;
		for (size_t i = 0; i < k; i++) {
			fill_rec(buf + i * REC, seq + i);
			v[i] = (struct iovec){ buf + i * REC, REC };
		}
		assert_int_equal(fsafe_spool_append(s, v, k, NULL), 0);
	}
	free(buf);
	fsafe_spool_close(s);
}

/* In the child: open, read all, verify; exit status 0 when all is well,
   printing the peak RSS. */
static int read_spool(int dirfd, uint64_t n)
{
	unsigned char want[REC];
	long rss0 = rss_kib();
	double t0 = now();
	fsafe_spool *s = su_open(dirfd, "sp", 0, REC);
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq, got = 0;
	struct rusage ru;

	if (fsafe_spool_reader_open(s, 1, &rd) != 0)
		return 2;
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		fill_rec(want, seq);
		if (seq != got + 1 || len != REC || memcmp(d, want, REC))
			return 3;
		got++;
	}
	double t = now() - t0;
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
	getrusage(RUSAGE_SELF, &ru);
	printf("read %llu MiB (open with its scan + read) in %.2f s: "
	       "%.0f MiB/s, peak RSS %ld KiB, %ld KiB above its start\n",
	       (unsigned long long)(n * REC >> 20), t,
	       (double)(n * REC) / (1 << 20) / t, ru.ru_maxrss,
	       ru.ru_maxrss - rss0);
	fflush(stdout);
	if (got != n)
		return 4;
	if (rss0 < 0)
		return 6;
	return ru.ru_maxrss - rss0 < RSS_LIMIT_KIB ? 0 : 5;
}

static void test_large_bounded(void **state)
{
	const char *e = getenv("FSAFE_SPOOL_LARGE_MIB");
	uint64_t mib = e ? strtoull(e, NULL, 10) : 256;
	uint64_t n = (mib << 20) / REC;
	char *dir = tu_mkscratch();
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	double t0 = now();
	int status;

	(void)state;
	write_spool(fd, n);
	printf("wrote %llu MiB in %.2f s\n", (unsigned long long)mib,
	       now() - t0);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(read_spool(fd, n));
	waitpid(pid, &status, 0);
	close(fd);
	tu_rmtree(dir);
	free(dir);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_large_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
