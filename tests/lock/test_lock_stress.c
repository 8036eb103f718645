/*
 * Mutual exclusion under load and under SIGKILL, break latency, and
 * breakers racing for the same dead lock.
 *
 * Every critical section creates a marker file with O_EXCL on entry and
 * removes it on exit: finding it already there with a live creator is an
 * overlap. A marker left by a killed holder names a dead pid.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lockutil.h"
#include "testutil.h"

#define SLOTS 8
#define WIDTH 11 /* "%010u " */

struct shared {
	atomic_uint done[SLOTS];  /* cycles each slot saw committed */
	atomic_uint overlaps;
	atomic_uint stale_markers;
	atomic_uint failures;     /* acquire or release errors */
	atomic_uint broken;       /* fsafe_lock_broken() summed */
	atomic_uint acquired;
	atomic_bool more;         /* holders go on past their cycles */
	bool durable;             /* fsync the counter inside the section */
};

struct fx {
	char *dir;
	int dfd;
	struct shared *sh;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->dir = tu_mkscratch();
	f->dfd = lu_open_dir(f->dir);
	f->sh = mmap(NULL, sizeof(*f->sh), PROT_READ | PROT_WRITE,
	             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(f->sh != MAP_FAILED);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	munmap(f->sh, sizeof(*f->sh));
	close(f->dfd);
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static bool pid_alive(pid_t pid)
{
	uint64_t start;
	char state;

	return pid > 0 && kill(pid, 0) == 0 &&
	       fsafe__proc_stat(pid, &start, &state) == 0 && state != 'Z';
}

static pid_t marker_pid(struct fx *f)
{
	char buf[32] = { 0 };
	int fd = openat(f->dfd, "in-cs", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? (pid_t)atoi(buf) : 0;
}

static void enter(struct fx *f)
{
	char buf[32];

	for (;;) {
		int fd = openat(f->dfd, "in-cs",
		                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0) {
			int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
			(void)!write(fd, buf, (size_t)n);
			close(fd);
			return;
		}
		pid_t other = marker_pid(f);
		if (other && pid_alive(other)) {
			atomic_fetch_add(&f->sh->overlaps, 1);
			return;
		}
		/* Left by a holder killed inside: the lock was broken. */
		atomic_fetch_add(&f->sh->stale_markers, 1);
		unlinkat(f->dfd, "in-cs", 0);
	}
}

static void leave(struct fx *f)
{
	unlinkat(f->dfd, "in-cs", 0);
}

/* The counter file: a total, then one count per slot. */
static void read_counts(struct fx *f, unsigned c[SLOTS + 1])
{
	char buf[WIDTH * (SLOTS + 1) + 1] = { 0 };
	int fd = openat(f->dfd, "counter", O_RDONLY | O_CLOEXEC);

	memset(c, 0, sizeof(unsigned) * (SLOTS + 1));
	if (fd < 0)
		return;
	(void)!read(fd, buf, sizeof(buf) - 1);
	close(fd);
	for (int i = 0; i <= SLOTS; i++)
		c[i] = (unsigned)strtoul(buf + i * WIDTH, NULL, 10);
}

static void write_counts(struct fx *f, const unsigned c[SLOTS + 1])
{
	char buf[WIDTH * (SLOTS + 1) + 1];
	int fd = openat(f->dfd, "counter", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	for (int i = 0; i <= SLOTS; i++)
		snprintf(buf + i * WIDTH, WIDTH + 1, "%010u ", c[i]);
	/* One small pwrite: a SIGKILL lands before or after it, not inside.
	   The fsync makes the section as long as a durable update is, so
	   kills land inside it. */
	(void)!pwrite(fd, buf, WIDTH * (SLOTS + 1), 0);
	if (f->sh->durable)
		fsync(fd);
	close(fd);
}

static int lock_wait(struct fx *f, fsafe_lock **l)
{
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;

	o.timeout_ms = 60000;
	return fsafe_lock_acquire(f->dfd, "counter.lock", &o, l);
}

static void cycle(struct fx *f, int slot)
{
	fsafe_lock *l;
	unsigned c[SLOTS + 1];

	if (lock_wait(f, &l) != 0) {
		atomic_fetch_add(&f->sh->failures, 1);
		return;
	}
	atomic_fetch_add(&f->sh->acquired, 1);
	atomic_fetch_add(&f->sh->broken, fsafe_lock_broken(l));
	enter(f);
	read_counts(f, c);
	c[0]++;
	c[1 + slot]++;
	write_counts(f, c);
	atomic_fetch_add(&f->sh->done[slot], 1);
	leave(f);
	if (fsafe_lock_release(l) != 0)
		atomic_fetch_add(&f->sh->failures, 1);
}

static pid_t spawn(struct fx *f, int slot, unsigned cycles)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		for (unsigned i = 0; i < cycles || atomic_load(&f->sh->more);
		     i++)
			cycle(f, slot);
		_exit(0);
	}
	return pid;
}

static void reap_ok(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* 8 processes x 500 read-increment-write cycles: exactly 4000. */
static void counter_exact(void **state)
{
	struct fx *f = *state;
	pid_t pids[SLOTS];
	unsigned c[SLOTS + 1];

	uint64_t t0 = lu_now_ms();
	for (int i = 0; i < SLOTS; i++)
		pids[i] = spawn(f, i, 500);
	for (int i = 0; i < SLOTS; i++)
		reap_ok(pids[i]);
	read_counts(f, c);
	print_message("8 x 500 cycles: counter %u in %llu ms\n", c[0],
	              (unsigned long long)(lu_now_ms() - t0));
	assert_int_equal(c[0], 4000);
	for (int i = 0; i < SLOTS; i++)
		assert_int_equal(c[1 + i], 500);
	assert_int_equal(f->sh->overlaps, 0);
	assert_int_equal(f->sh->stale_markers, 0);
	assert_int_equal(f->sh->failures, 0);
	assert_int_equal(f->sh->broken, 0);
	assert_int_equal(tu_count_entries(f->dir), 1); /* the counter alone */
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000 };

	nanosleep(&ts, NULL);
}

static int slot_of(const pid_t pids[SLOTS], pid_t pid)
{
	for (int i = 0; i < SLOTS; i++)
		if (pids[i] == pid)
			return i;
	return -1;
}

/*
 * The same with holders SIGKILLed inside their critical section: a cycle
 * a killed holder had not committed is lost, never doubled (each slot's
 * count in the file is what it saw committed, plus at most one per kill:
 * the cycle written just before the kill), and no two ever overlap.
 * The holders go on cycling until the last kill, however fast a cycle is
 * (on a tmpfs, 150 are over before a dozen kills have landed).
 */
static void counter_with_kills(void **state)
{
	struct fx *f = *state;
	const unsigned cycles = 150, max_kills = 12;
	pid_t pids[SLOTS];
	unsigned kills[SLOTS] = { 0 }, c[SLOTS + 1], total_kills = 0;
	int running = SLOTS;

	srand((unsigned)getpid());
	f->sh->durable = true;
	atomic_store(&f->sh->more, true);
	uint64_t give_up = lu_now_ms() + 60000;
	for (int i = 0; i < SLOTS; i++)
		pids[i] = spawn(f, i, cycles);
	while (running > 0) {
		/* Twelve kills never landing is a failure (asserted below),
		   not a reason to run forever. */
		if (total_kills == max_kills || lu_now_ms() > give_up)
			atomic_store(&f->sh->more, false);
		pid_t holder = marker_pid(f);
		int slot = holder ? slot_of(pids, holder) : -1;
		if (total_kills < max_kills && slot >= 0) {
			kill(holder, SIGKILL);
			waitpid(holder, NULL, 0);
			kills[slot]++;
			total_kills++;
			unsigned seen = atomic_load(&f->sh->done[slot]);
			unsigned left = seen < cycles ? cycles - seen : 0;
			pids[slot] = spawn(f, slot, left);
		}
		int st;
		pid_t done = waitpid(-1, &st, WNOHANG);
		if (done > 0 && (slot = slot_of(pids, done)) >= 0) {
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			pids[slot] = 0;
			running--;
		}
		/* The test's own pacing between kills, not a synchronisation. */
		pause_ms(1 + (unsigned)rand() % 10);
	}
	/* One more acquisition sweeps what the last kill may have left. */
	fsafe_lock *l;
	assert_int_equal(lock_wait(f, &l), 0);
	assert_int_equal(fsafe_lock_release(l), 0);
	read_counts(f, c);
	unsigned sum = 0;
	for (int i = 0; i < SLOTS; i++) {
		unsigned seen = atomic_load(&f->sh->done[i]);
		assert_true(c[1 + i] >= seen);
		assert_true(c[1 + i] <= seen + kills[i]);
		sum += c[1 + i];
	}
	print_message("%u kills, counter %u, %u markers left by the killed, "
	              "%u locks broken\n", total_kills, c[0],
	              f->sh->stale_markers, f->sh->broken);
	assert_int_equal(c[0], sum);
	assert_int_equal(total_kills, max_kills);
	assert_true(f->sh->stale_markers >= 1); /* some died inside */
	assert_int_equal(f->sh->overlaps, 0);
	assert_int_equal(f->sh->failures, 0);
	/* Every kill inside the section left a dead lock: each broken once. */
	assert_true(f->sh->broken <= total_kills);
	assert_int_equal(lu_count_private(f->dir), 0);
}

static int holder_take(void *f, fsafe_lock **l)
{
	return lock_wait(f, l);
}

/* A holder SIGKILLed while holding: the next acquirer breaks it at once,
   even before the holder is reaped (a zombie holds nothing). */
static void killed_holder_broken_at_once(void **state)
{
	struct fx *f = *state;
	siginfo_t si;

	for (int reap = 0; reap < 2; reap++) {
		pid_t pid = lu_holder(holder_take, f);
		assert_true(pid > 0);
		kill(pid, SIGKILL);
		assert_int_equal(waitid(P_PID, (id_t)pid, &si,
		                        WEXITED | (reap ? 0 : WNOWAIT)), 0);

		fsafe_lock *l;
		struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;
		o.flags = FSAFE_LOCK_NO_WAIT; /* no waiting at all */
		uint64_t t0 = lu_now_ms();
		assert_int_equal(fsafe_lock_acquire(f->dfd, "counter.lock", &o, &l),
		                 0);
		uint64_t spent = lu_now_ms() - t0;
		print_message("%s holder: broken in %llu ms\n",
		              reap ? "reaped" : "zombie",
		              (unsigned long long)spent);
		assert_true(spent < 1000); /* the grace period is 10 s */
		assert_int_equal(fsafe_lock_broken(l), 1);
		assert_int_equal(fsafe_lock_release(l), 0);
		if (!reap)
			waitpid(pid, NULL, 0);
	}
}

/* n processes released together at a dead lock: one breaks it, all get
   it in turn, none overlap. */
static void race_to_break(struct fx *f, int n, int rounds)
{
	pid_t pids[SLOTS];

	for (int round = 0; round < rounds; round++) {
		struct fsafe_lock_owner dead = lu_dead_owner();
		int gate[2];
		char c;

		memset(f->sh, 0, sizeof(*f->sh));
		lu_forge(f->dir, "counter.lock", &dead);
		assert_int_equal(pipe(gate), 0);
		for (int i = 0; i < n; i++) {
			pids[i] = fork();
			if (pids[i] == 0) {
				close(gate[1]);
				(void)!read(gate[0], &c, 1); /* EOF opens the gate */
				cycle(f, i);
				_exit(0);
			}
		}
		close(gate[0]);
		close(gate[1]);
		for (int i = 0; i < n; i++)
			reap_ok(pids[i]);
		assert_int_equal(f->sh->broken, 1);
		assert_int_equal(f->sh->acquired, (unsigned)n);
		assert_int_equal(f->sh->overlaps, 0);
		assert_int_equal(f->sh->failures, 0);
		assert_int_equal(lu_count_private(f->dir), 0);
	}
	unsigned counts[SLOTS + 1];
	read_counts(f, counts);
	assert_int_equal(counts[0], (unsigned)(n * rounds));
}

static void two_breakers(void **state)
{
	race_to_break(*state, 2, 100);
}

static void eight_breakers(void **state)
{
	race_to_break(*state, 8, 150);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(counter_exact), T(counter_with_kills),
		T(killed_holder_broken_at_once), T(two_breakers),
		T(eight_breakers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
