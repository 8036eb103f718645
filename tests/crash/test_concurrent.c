/*
 * Concurrency: several processes rewrite one target with whole versions of
 * varying sizes while reader processes read it in a loop. Every read must
 * be exactly one version some writer wrote (never a mix, a truncation or
 * an empty file), and no reader may see a writer's versions go backwards.
 *
 * Each version describes itself (writer, sequence number, length) and its
 * payload is a function of those, so a reader checks every byte without
 * knowing what was written. Bounded by the writers' count, not by time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "testutil.h"

#define WRITERS 4
#define READERS 2
#define ROUNDS 200
#define MAX_PAYLOAD (96 * 1024)
#define MAGIC 0x46534146u /* "FSAF" */
#define SEED_WRITER WRITERS /* the version present before anyone writes */

struct header {
	uint32_t magic;
	uint32_t writer;
	uint32_t seq;
	uint32_t len; /* payload bytes after the header */
};

#define CREATE_ROUNDS 150

struct shared {
	atomic_int create_result[CREATE_ROUNDS][WRITERS];
	atomic_bool writers_done;
	atomic_long reads[READERS];
	atomic_long distinct[READERS];
	char msg[READERS + WRITERS][256];
};

static struct shared *sh;

/* Sizes from 0 to MAX_PAYLOAD, scattered so that consecutive versions
   differ in length and page count. */
static uint32_t payload_len(uint32_t writer, uint32_t seq)
{
	uint32_t x = writer * 2654435761u ^ seq * 40503u;
	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	return seq % 17 == 0 ? 0 : x % (MAX_PAYLOAD + 1);
}

static unsigned char payload_byte(uint32_t writer, uint32_t seq, uint32_t i)
{
	return (unsigned char)(writer * 131 + seq * 7 + i * 31 + (i >> 8));
}

static size_t make_version(unsigned char *buf, uint32_t writer, uint32_t seq)
{
	struct header h = { MAGIC, writer, seq, payload_len(writer, seq) };

	memcpy(buf, &h, sizeof(h));
	for (uint32_t i = 0; i < h.len; i++)
		buf[sizeof(h) + i] = payload_byte(writer, seq, i);
	return sizeof(h) + h.len;
}

/* NULL if buf[0..n) is one whole version, else why not. */
static const char *check_version(const unsigned char *buf, size_t n,
                                 struct header *h)
{
	if (n < sizeof(*h))
		return "shorter than a header";
	memcpy(h, buf, sizeof(*h));
	if (h->magic != MAGIC || h->writer > SEED_WRITER || h->seq > ROUNDS)
		return "bad header";
	if (h->len != payload_len(h->writer, h->seq))
		return "header length is not the version's";
	if (n != sizeof(*h) + h->len)
		return "file length does not match its header";
	for (uint32_t i = 0; i < h->len; i++)
		if (buf[sizeof(*h) + i] != payload_byte(h->writer, h->seq, i))
			return "payload bytes from another version";
	return NULL;
}

static void child_fail(int slot, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sh->msg[slot], sizeof(sh->msg[slot]), fmt, ap);
	va_end(ap);
	_exit(1);
}

/* Read the whole file, as a reader that knows nothing of fsafe would. */
static size_t read_all(int dirfd, unsigned char *buf, size_t cap, int slot)
{
	int fd = openat(dirfd, "target", O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t k;

	if (fd < 0)
		child_fail(slot, "open: %s", strerror(errno));
	while (n < cap && (k = read(fd, buf + n, cap - n)) != 0) {
		if (k < 0 && errno != EINTR)
			child_fail(slot, "read: %s", strerror(errno));
		if (k > 0)
			n += (size_t)k;
	}
	close(fd);
	return n;
}

static void reader(int id, int dirfd)
{
	static unsigned char buf[sizeof(struct header) + MAX_PAYLOAD + 1];
	int64_t last[SEED_WRITER + 1];
	struct header h, prev = { 0 };

	for (int i = 0; i <= SEED_WRITER; i++)
		last[i] = -1;
	/* One more read after the writers finish, so even a reader that was
	   never scheduled meanwhile checks the final state. */
	for (bool done = false, final = false; !final; final = done) {
		done = atomic_load(&sh->writers_done);
		size_t n = read_all(dirfd, buf, sizeof(buf), id);
		const char *why = check_version(buf, n, &h);
		if (why)
			child_fail(id, "read %ld: %zu bytes: %s",
			           atomic_load(&sh->reads[id]), n, why);
		if (h.seq < last[h.writer])
			child_fail(id, "writer %u went back from version %lld "
			           "to %u", h.writer, (long long)last[h.writer],
			           h.seq);
		last[h.writer] = h.seq;
		if (h.writer != prev.writer || h.seq != prev.seq)
			atomic_fetch_add(&sh->distinct[id], 1);
		prev = h;
		atomic_fetch_add(&sh->reads[id], 1);
	}
	_exit(0);
}

static void writer(int id, int dirfd)
{
	static unsigned char buf[sizeof(struct header) + MAX_PAYLOAD];
	struct fsafe_error err = { 0 };
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	int slot = READERS + id;

	/* Half the writers skip syncs: atomicity must not depend on them. */
	o.flags = id % 2 ? FSAFE_NO_SYNC : 0;
	o.error = &err;
	for (uint32_t seq = 1; seq <= ROUNDS; seq++) {
		size_t n = make_version(buf, (uint32_t)id, seq);
		int r;

		if (seq % 2) {
			r = fsafe_write_fileat(dirfd, "target", buf, n, &o);
		} else {
			/* The streaming path, in pieces that straddle pages. */
			fsafe_writer *w;
			r = fsafe_writer_open(dirfd, "target", &o, &w);
			for (size_t off = 0; r == 0 && off < n; off += 5000)
				r = fsafe_writer_write(w, buf + off,
				                       n - off < 5000 ? n - off
				                                      : 5000);
			if (w)
				r = fsafe_writer_commit(w);
		}
		if (r != 0)
			child_fail(slot, "writer %d version %u: %s at %s", id,
			           seq, fsafe_strerror(r),
			           err.step ? err.step : "?");
	}
	_exit(0);
}

static pid_t spawn(void (*fn)(int, int), int id, int dirfd)
{
	pid_t pid = fork();

	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0)
		fn(id, dirfd);
	return pid;
}

/* Reap a child; its failure is reported only once every child is reaped,
   so a failing writer cannot leave the readers looping for ever. */
static int reap(pid_t pid, int slot, const char *what)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		status = -1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	print_error("%s %d failed (status %#x): %s\n", what, slot, status,
	            sh->msg[slot][0] ? sh->msg[slot] : "no message");
	return 1;
}

static void writers_and_readers(void **state)
{
	(void)state;
	static unsigned char buf[sizeof(struct header) + MAX_PAYLOAD + 1];
	char *dir = tu_mkscratch();
	pid_t readers[READERS], writers[WRITERS];
	struct header h;
	size_t n;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);
	n = make_version(buf, SEED_WRITER, 0);
	tu_put(dir, "target", buf, n);

	for (int i = 0; i < READERS; i++)
		readers[i] = spawn(reader, i, dirfd);
	for (int i = 0; i < WRITERS; i++)
		writers[i] = spawn(writer, i, dirfd);
	int failed = 0;
	for (int i = 0; i < WRITERS; i++)
		failed += reap(writers[i], READERS + i, "writer");
	atomic_store(&sh->writers_done, true);
	for (int i = 0; i < READERS; i++)
		failed += reap(readers[i], i, "reader");
	assert_int_equal(failed, 0);

	for (int i = 0; i < READERS; i++)
		print_message("reader %d: %ld reads, %ld version changes "
		              "seen, all whole\n",
		              i, atomic_load(&sh->reads[i]),
		              atomic_load(&sh->distinct[i]));

	/* Whatever was published last is some writer's last version: any
	   earlier one would have been replaced by that writer's next. */
	char *got = tu_get(dir, "target", &n);
	assert_non_null(got);
	const char *why = check_version((unsigned char *)got, n, &h);
	if (why)
		fail_msg("final file: %s", why);
	assert_true(h.writer < WRITERS);
	assert_int_equal(h.seq, ROUNDS);
	free(got);
	assert_int_equal(tu_count_entries(dir), 1);

	close(dirfd);
	munmap(sh, sizeof(*sh));
	tu_rmtree(dir);
	free(dir);
}

/*
 * Create-only races: every racer tries to create the same fresh names, in
 * the same order, each with another publish path (no-replace rename or
 * link+unlink, O_TMPFILE or named stage). Exactly one may win each name,
 * the rest must get -EEXIST, and the file must be the winner's, whole.
 */
static int start_gate = -1, start_gate_w = -1;

static void create_racer(int id, int dirfd)
{
	static unsigned char buf[sizeof(struct header) + MAX_PAYLOAD];
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	char name[32], c;

	/* No syncs: a racer that syncs falls behind and never contends;
	   the race is decided before any sync anyway. */
	o.flags = FSAFE_CREATE_ONLY | FSAFE_NO_SYNC |
	          (id & 1 ? FSAFE_NO_RENAMEAT2 : 0) |
	          (id & 2 ? FSAFE_NO_TMPFILE : 0);
	/* Everyone starts when the parent closes the gate, so the racers
	   meet on the same names instead of one finishing first. */
	close(start_gate_w);
	while (read(start_gate, &c, 1) < 0 && errno == EINTR)
		;
	for (uint32_t i = 0; i < CREATE_ROUNDS; i++) {
		size_t n = make_version(buf, (uint32_t)id, i + 1);
		snprintf(name, sizeof(name), "c%03u", (unsigned)i);
		int r = fsafe_write_fileat(dirfd, name, buf, n, &o);
		atomic_store(&sh->create_result[i][id], r);
		if (r != 0 && r != -EEXIST)
			child_fail(READERS + id, "racer %d, %s: %s", id, name,
			           fsafe_strerror(r));
	}
	_exit(0);
}

static void create_only_races(void **state)
{
	(void)state;
	char *dir = tu_mkscratch();
	pid_t racers[WRITERS];
	int gate[2], failed = 0, won[WRITERS] = { 0 };

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);
	assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
	start_gate = gate[0];
	start_gate_w = gate[1];

	for (int i = 0; i < WRITERS; i++)
		racers[i] = spawn(create_racer, i, dirfd);
	close(gate[1]);
	for (int i = 0; i < WRITERS; i++)
		failed += reap(racers[i], READERS + i, "racer");
	close(gate[0]);
	assert_int_equal(failed, 0);

	for (int i = 0; i < CREATE_ROUNDS; i++) {
		char name[32];
		int winner = -1, wins = 0;
		struct header h;
		size_t n;

		for (int w = 0; w < WRITERS; w++)
			if (atomic_load(&sh->create_result[i][w]) == 0) {
				winner = w;
				wins++;
			}
		if (wins != 1)
			fail_msg("c%03d: %d racers were told they created it",
			         i, wins);
		won[winner]++;
		snprintf(name, sizeof(name), "c%03d", i);
		char *got = tu_get(dir, name, &n);
		assert_non_null(got);
		const char *why = check_version((unsigned char *)got, n, &h);
		if (why)
			fail_msg("%s: %s", name, why);
		if (h.writer != (uint32_t)winner || h.seq != (uint32_t)i + 1)
			fail_msg("%s holds racer %u's version, but racer %d "
			         "won it", name, h.writer, winner);
		free(got);
	}
	print_message("%d names; won by racer 0..3 (each another publish "
	              "path): %d %d %d %d\n",
	              CREATE_ROUNDS, won[0], won[1], won[2], won[3]);
	/* Losers leave nothing, and no link+unlink leaves its second name. */
	assert_int_equal(tu_count_staging(dir), 0);
	assert_int_equal(tu_count_entries(dir), CREATE_ROUNDS);

	close(dirfd);
	munmap(sh, sizeof(*sh));
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(writers_and_readers),
		cmocka_unit_test(create_only_races),
	};
	return cmocka_run_group_tests_name("crash_concurrent", tests, NULL,
	                                   NULL);
}
