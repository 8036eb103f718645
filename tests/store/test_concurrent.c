/*
 * Concurrent updaters in different processes never lose an update.
 *
 * One record holds a total and, per process, the sequence number of that
 * process's last increment. Each update adds one to the total and
 * advances its own sequence by one, and its callback refuses to run if
 * its own sequence is not where the process left it. So total == sum of
 * the sequences means no increment was lost or applied twice, and the
 * record's version counts the committed updates.
 *
 * With SIGKILLs: a process writes its own log (its last sequence number)
 * after each update returns 0. When it is killed, at most one update was
 * in flight, so the store's sequence is the log's or one more; the
 * replacement process continues from the store's number. Kills are
 * bounded so that every process finishes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "storeutil.h"
#include "testutil.h"

#define PROCS 8
#define INCREMENTS 500
#define KILLS 24

struct counter {
	uint64_t total;
	uint64_t seq[PROCS];
};

struct worker {
	int me;
	uint64_t next;
	struct counter c;
};

static int increment(const void *old, size_t len, const void **nb,
                     size_t *nl, void *arg)
{
	struct worker *w = arg;

	memset(&w->c, 0, sizeof(w->c));
	if (old && len != sizeof(w->c))
		return -EBADMSG;
	if (old)
		memcpy(&w->c, old, len);
	if (w->c.seq[w->me] != w->next - 1)
		return -EPROTO; /* lost or doubled: the store moved under us */
	w->c.total++;
	w->c.seq[w->me] = w->next;
	*nb = &w->c;
	*nl = sizeof(w->c);
	return FSAFE_STORE_WRITE;
}

/* The counter as stored; zeros when absent. */
static int read_counter(fsafe_store *s, struct counter *c, uint64_t *version)
{
	size_t len;
	int r = fsafe_store_get_into(s, "n", 1, c, sizeof(*c), &len, version);

	if (r == -ENOENT) {
		memset(c, 0, sizeof(*c));
		*version = 0;
		return 0;
	}
	return r == 0 && len != sizeof(*c) ? -EBADMSG : r;
}

static void log_name(int me, char *buf, size_t len)
{
	snprintf(buf, len, "log-%d", me);
}

/* A worker process: continue from the store's sequence to INCREMENTS. */
static int work(const char *dir, const char *logdir, int me, unsigned flags)
{
	fsafe_store *s = su_open(dir, flags, 0);
	struct worker w = { .me = me };
	struct counter c;
	uint64_t v;
	char name[32], path[4300];

	if (read_counter(s, &c, &v) < 0)
		return 3;
	log_name(me, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", logdir, name);
	for (w.next = c.seq[me] + 1; w.next <= INCREMENTS; w.next++) {
		int r = fsafe_store_update(s, "n", 1, increment, &w, NULL);
		if (r < 0)
			return r == -EPROTO ? 4 : 2;
		char text[32];
		int n = snprintf(text, sizeof(text), "%llu",
		                 (unsigned long long)w.next);
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		o.flags = FSAFE_NO_SYNC; /* process crashes only */
		if (fsafe_write_fileat(AT_FDCWD, path, text, (size_t)n, &o) < 0)
			return 5;
	}
	fsafe_store_close(s);
	return 0;
}

static pid_t spawn(const char *dir, const char *logdir, int me,
                   unsigned flags)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(work(dir, logdir, me, flags));
	return pid;
}

static uint64_t read_log(const char *logdir, int me)
{
	char name[32];
	size_t len;

	log_name(me, name, sizeof(name));
	char *t = tu_get(logdir, name, &len);
	char text[32] = "0";
	if (t && len < sizeof(text)) /* tu_get does not add a NUL */
		memcpy(text, t, len), text[len] = '\0';
	free(t);
	return strtoull(text, NULL, 10);
}

static void check_exited(pid_t pid, int status, int me)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("worker %d (pid %d): status %#x (4: an increment was "
		         "lost or doubled)", me, (int)pid, status);
}

/* The counter's own invariant, and process `me`'s against its log. */
static void check_counter(fsafe_store *s, const char *logdir, int me)
{
	struct counter c;
	uint64_t v, sum = 0;

	assert_int_equal(read_counter(s, &c, &v), 0);
	for (int i = 0; i < PROCS; i++)
		sum += c.seq[i];
	if (c.total != sum || v != sum)
		fail_msg("total %llu, version %llu, sum of sequences %llu",
		         (unsigned long long)c.total, (unsigned long long)v,
		         (unsigned long long)sum);
	if (me < 0)
		return;
	uint64_t done = read_log(logdir, me);
	if (c.seq[me] != done && c.seq[me] != done + 1)
		fail_msg("killed worker %d: store has its increment %llu, its "
		         "log says %llu were committed",
		         me, (unsigned long long)c.seq[me],
		         (unsigned long long)done);
}

static void final_check(fsafe_store *s, const char *dir, const char *logdir)
{
	struct counter c;
	uint64_t v;
	struct su_listing l;

	assert_int_equal(read_counter(s, &c, &v), 0);
	print_message("total %llu, version %llu\n",
	              (unsigned long long)c.total, (unsigned long long)v);
	assert_int_equal(c.total, PROCS * INCREMENTS);
	assert_int_equal(v, PROCS * INCREMENTS);
	for (int i = 0; i < PROCS; i++) {
		assert_int_equal(c.seq[i], INCREMENTS);
		assert_int_equal(read_log(logdir, i), INCREMENTS);
	}
	assert_int_equal(su_list(s, 0, &l), 0);
	assert_string_equal(l.keys, "n");
	assert_string_equal(l.skipped_names, "");
	(void)dir;
}

static void run(unsigned flags, bool kills)
{
	char *scratch = tu_mkscratch();
	char dir[4200];
	pid_t pids[PROCS];
	int killed = 0, alive = PROCS;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	print_message("seed %u\n", seed);
	srand(seed);
	snprintf(dir, sizeof(dir), "%s/store", scratch);
	fsafe_store *s = su_open(dir, flags, 0);
	for (int i = 0; i < PROCS; i++)
		pids[i] = spawn(dir, scratch, i, flags);
	while (kills && killed < KILLS) {
		/* Kills land at random points of the workers' calls. */
		struct timespec gap = { 0, (rand() % 20000) * 1000L };
		nanosleep(&gap, NULL);
		int me = rand() % PROCS, status;
		while (pids[me] < 0) /* never kill(-1) */
			me = (me + 1) % PROCS;
		kill(pids[me], SIGKILL);
		assert_int_equal(waitpid(pids[me], &status, 0), pids[me]);
		if (WIFSIGNALED(status)) {
			killed++;
			check_counter(s, scratch, me);
			pids[me] = spawn(dir, scratch, me, flags);
		} else {
			check_exited(pids[me], status, me);
			pids[me] = -1;
			if (--alive == 0)
				break;
		}
	}
	for (int i = 0; i < PROCS; i++) {
		int status;
		if (pids[i] < 0)
			continue;
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		check_exited(pids[i], status, i);
	}
	print_message("%d workers killed\n", killed);
	final_check(s, dir, scratch);
	fsafe_store_close(s);
	tu_rmtree(scratch);
	free(scratch);
}

static void updaters_link(void **state)
{
	(void)state;
	run(0, false);
}

static void updaters_kernel(void **state)
{
	(void)state;
	run(FSAFE_STORE_LOCK_KERNEL, false);
}

static void updaters_killed(void **state)
{
	(void)state;
	run(0, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(updaters_link),
		cmocka_unit_test(updaters_kernel),
		cmocka_unit_test(updaters_killed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
