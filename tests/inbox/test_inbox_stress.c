/*
 * Producers and consumers under random SIGKILLs, recovery running all the
 * while (issue 8's proof). P producers deliver N messages each; C
 * consumers take, check and acknowledge (into done/, to keep the
 * evidence); a recoverer runs fsafe_inbox_recover() in a loop; the parent
 * SIGKILLs a random one of them every few milliseconds and starts it
 * again. Then, from the logs each process appends to (one write per
 * record, after the call returned):
 *
 *  - every message whose delivery returned 0 is in done/ (no loss), whole;
 *  - no message was acknowledged twice (ack returned 0 at most once);
 *  - no consumer ever saw a partial or foreign message;
 *  - new/ and claimed/ are empty at the end;
 *  - a message was taken again only after the consumer that took it was
 *    killed before acknowledging it (redeliveries are counted).
 *
 * Size: the 4 x 5000 by default (about 90 s on 2 cores, ext4);
 * FSAFE_INBOX_STRESS_N sets the messages per producer (e.g. smaller under
 * a sanitizer).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ibutil.h"
#include "inbox.h"
#include "testutil.h"

#define P 4
#define C 4
#define MAXPID 4194304

/* Log records of 128 bytes: a divisor of the page size, so none straddles
   a page, where a SIGKILL may end a write between the two pages and tear
   the record (and shift every record after it). */
struct prec { unsigned k; char id[64]; char pad[60]; };         /* producer */
struct crec { char kind; int pid; char id[64]; char pad[56]; }; /* consumer */
_Static_assert(sizeof(struct prec) == 128 && sizeof(struct crec) == 128,
               "log records must divide the page size");

static char base[1024], dir[1100];
static int nper;

static void append(const char *name, const void *rec, size_t len)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s", base, name);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	/* One write of a record within one page: never torn by a kill. */
	if (fd < 0 || write(fd, rec, len) != (ssize_t)len)
		_exit(90);
	close(fd);
}

static void *slurp(const char *name, size_t *len)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s", base, name);
	char *p = tu_get(base, name, len);
	(void)path;
	if (!p)
		*len = 0;
	return p;
}

static fsafe_inbox *child_open(void)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;

	o.flags = FSAFE_INBOX_KEEP_DONE;
	o.max_message = 1024;
	if (fsafe_inbox_open(AT_FDCWD, dir, &o, &ib) < 0)
		_exit(80);
	return ib;
}

static size_t msg_len(unsigned k) { return 32 + (k * 37u) % 993u; }

static void producer(unsigned i)
{
	char logname[32], buf[1024];
	size_t len;

	snprintf(logname, sizeof(logname), "p%u", i);
	struct prec *log = slurp(logname, &len);
	/* Resume after the last delivery logged (one killed after its
	   delivery and before logging delivers that one again: a new id). */
	unsigned k = len ? log[len / sizeof(*log) - 1].k + 1 : 0;
	free(log);
	fsafe_inbox *ib = child_open();
	for (; k < (unsigned)nper; k++) {
		struct prec r = { .k = k };
		ibu_payload(i, k, msg_len(k), buf);
		if (fsafe_inbox_deliver(ib, buf, msg_len(k), r.id) != 0)
			_exit(81);
		append(logname, &r, sizeof(r));
	}
	_exit(0);
}

static void note(char kind, const char *id)
{
	struct crec r = { .kind = kind, .pid = getpid() };
	snprintf(r.id, sizeof(r.id), "%s", id);
	append("c", &r, sizeof(r));
}

static bool stopping(void)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/stop", base);
	return access(path, F_OK) == 0;
}

static void consumer(void)
{
	fsafe_inbox *ib = child_open();
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	unsigned p, k;
	int r;

	if ((r = fsafe_inbox_consumer_open(ib, NULL, &c)) < 0)
		_exit(100 - r); /* the errno, for the message */
	for (;;) {
		r = fsafe_inbox_take(c, &m);
		if (r == -EAGAIN) {
			if (stopping())
				_exit(fsafe_inbox_consumer_close(c) ? 83 : 0);
			fsafe_inbox_wait(c, 50);
			continue;
		}
		if (r < 0)
			_exit(100 - r); /* the errno, for the message */
		if (!ibu_payload_ok(fsafe_inbox_msg_data(m),
		                    fsafe_inbox_msg_len(m), &p, &k) ||
		    fsafe_inbox_msg_len(m) != msg_len(k)) {
			note('X', fsafe_inbox_msg_id(m));
			_exit(85);
		}
		note('T', fsafe_inbox_msg_id(m));
		if (fsafe_inbox_ack(c, fsafe_inbox_msg_id(m)) != 0)
			_exit(86);
		note('A', fsafe_inbox_msg_id(m));
		fsafe_inbox_msg_free(m);
	}
}

static void recoverer(void)
{
	fsafe_inbox *ib = child_open();

	while (!stopping()) {
		if (fsafe_inbox_recover(ib, 0, NULL) < 0)
			_exit(87);
		nanosleep(&(struct timespec){ 0, 5000000 }, NULL); /* pacing */
	}
	_exit(0);
}

/* ---- the parent ---------------------------------------------------------- */

enum { ROLE_P, ROLE_C, ROLE_R };
struct proc { int role; unsigned i; pid_t pid; bool done; };

static pid_t spawn(struct proc *pr)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* A failing parent must not leave its workers running. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (pr->role == ROLE_P)
			producer(pr->i);
		else if (pr->role == ROLE_C)
			consumer();
		recoverer();
	}
	return pr->pid = pid;
}

static void expect_exit(struct proc *pr, int status)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("role %d #%u exited with status %#x", pr->role, pr->i,
		         status);
	pr->done = true;
}

static bool *killed; /* consumer pids killed (indexed by pid) */

/* Kill random processes until every producer has finished. */
static unsigned chaos(struct proc *procs, size_t n, unsigned *seed)
{
	unsigned kills = 0;
	int status;

	for (;;) {
		bool producing = false;
		for (size_t j = 0; j < n; j++) {
			if (procs[j].done)
				continue;
			if (waitpid(procs[j].pid, &status, WNOHANG) ==
			    procs[j].pid)
				expect_exit(&procs[j], status);
			producing |= procs[j].role == ROLE_P && !procs[j].done;
		}
		if (!producing)
			return kills;
		nanosleep(&(struct timespec){ 0, (rand_r(seed) % 20 + 2) *
		                                     1000000L }, NULL);
		struct proc *v = &procs[rand_r(seed) % n];
		if (v->done)
			continue;
		kill(v->pid, SIGKILL);
		waitpid(v->pid, &status, 0);
		if (WIFEXITED(status)) {
			expect_exit(v, status); /* finished first */
			continue;
		}
		if (v->role == ROLE_C && v->pid < MAXPID)
			killed[v->pid] = true;
		kills++;
		spawn(v);
	}
}

static void final_drain(void)
{
	fsafe_inbox *ib = child_open();
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;

	assert_int_equal(fsafe_inbox_recover(ib, 0, NULL), 0);
	assert_int_equal(fsafe_inbox_consumer_open(ib, NULL, &c), 0);
	while (fsafe_inbox_take(c, &m) == 0) {
		note('T', fsafe_inbox_msg_id(m));
		assert_int_equal(fsafe_inbox_ack(c, fsafe_inbox_msg_id(m)), 0);
		note('A', fsafe_inbox_msg_id(m));
		fsafe_inbox_msg_free(m);
	}
	assert_int_equal(fsafe_inbox_quarantined(c), 0);
	assert_int_equal(fsafe_inbox_consumer_close(c), 0);
	fsafe_inbox_close(ib);
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Sorted ids of done/, each checked whole. */
static char (*done_ids(size_t *n))[64]
{
	char path[1200];
	struct dirent *e;
	size_t cap = 1024;
	char (*ids)[64] = malloc(cap * 64);

	snprintf(path, sizeof(path), "%s/done", dir);
	DIR *d = opendir(path);
	assert_non_null(d);
	*n = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (*n == cap)
			ids = realloc(ids, (cap *= 2) * 64);
		snprintf(ids[(*n)++], 64, "%.63s", e->d_name);
		size_t len;
		uint8_t *b = (uint8_t *)tu_get(path, e->d_name, &len), h[32];
		unsigned p, k;
		uint64_t seq = 0;
		for (int i = 7; i >= 0; i--)
			seq = seq << 8 | b[8 + i];
		fsafe__inbox_header(h, seq, b + 32, len - 32);
		if (len < 32 || memcmp(h, b, 32) != 0 ||
		    !ibu_payload_ok(b + 32, len - 32, &p, &k))
			fail_msg("done/%s is not a whole message", e->d_name);
		free(b);
	}
	closedir(d);
	qsort(ids, *n, 64, cmp_id);
	return ids;
}

static bool in(char (*ids)[64], size_t n, const char *id)
{
	return bsearch(id, ids, n, 64, cmp_id) != NULL;
}

/* Claim directories (p-) left: a consumer killed while being born may
   leave an empty b- directory, which recovery removes after a grace. */
static bool is_claim_dir(const char *name)
{
	return strncmp(name, "p-", 2) == 0;
}

static int claim_dirs(void)
{
	char path[1200];

	snprintf(path, sizeof(path), "%s/claimed", dir);
	int n = tu_count_matching(path, is_claim_dir);
	assert_true(n >= 0);
	return n;
}

static void check_logs(unsigned kills)
{
	size_t ndone, clen;
	char (*done)[64] = done_ids(&ndone);
	struct crec *cl = slurp("c", &clen);
	size_t nc = clen / sizeof(*cl), delivered = 0;

	/* No loss: every logged delivery is in done/. */
	for (unsigned i = 0; i < P; i++) {
		char name[8];
		size_t len;
		snprintf(name, sizeof(name), "p%u", i);
		struct prec *pl = slurp(name, &len);
		for (size_t j = 0; j < len / sizeof(*pl); j++, delivered++)
			if (!in(done, ndone, pl[j].id))
				fail_msg("delivered %s lost", pl[j].id);
		free(pl);
	}
	/* Per id, in log order: acks at most once; a take not followed by
	   that consumer's ack only by a killed consumer. */
	unsigned *acks = calloc(ndone, sizeof(unsigned));
	unsigned redelivered = 0;
	for (size_t j = 0; j < nc; j++) {
		char (*hit)[64] = bsearch(cl[j].id, done, ndone, 64, cmp_id);
		if (cl[j].kind == 'X')
			fail_msg("a consumer saw a partial message %s", cl[j].id);
		if (!hit)
			fail_msg("%s was taken but is not in done/", cl[j].id);
		size_t at = (size_t)(hit - done);
		if (cl[j].kind == 'A' && ++acks[at] > 1)
			fail_msg("%s acknowledged twice", cl[j].id);
		if (cl[j].kind != 'T')
			continue;
		bool acked = false;
		for (size_t q = j + 1; q < nc && !acked; q++)
			acked = cl[q].kind == 'A' && cl[q].pid == cl[j].pid &&
			        !strcmp(cl[q].id, cl[j].id);
		if (!acked) {
			if (cl[j].pid >= MAXPID || !killed[cl[j].pid])
				fail_msg("%s taken by live %d, never acked",
				         cl[j].id, cl[j].pid);
			redelivered++;
		}
	}
	assert_int_equal(ibu_count(dir, "new"), 0);
	assert_int_equal(claim_dirs(), 0);
	assert_int_equal(ibu_count(dir, "quarantine"), 0);
	print_message("%u producers x %d messages, %u consumers: %zu logged "
	              "deliveries, %zu in done/, %u kills, %u redelivered "
	              "after a consumer died before acking\n",
	              P, nper, C, delivered, ndone, kills, redelivered);
	free(acks);
	free(cl);
	free(done);
}

static void stress(void **state)
{
	(void)state;
	char *scratch = tu_mkscratch();
	struct proc procs[P + C + 1];
	unsigned seed = (unsigned)time(NULL);
	const char *env = getenv("FSAFE_INBOX_STRESS_N");
	int status;

	nper = env ? atoi(env) : 5000;
	print_message("seed %u\n", seed);
	snprintf(base, sizeof(base), "%s", scratch);
	snprintf(dir, sizeof(dir), "%s/ib", base);
	fsafe_inbox_close(ibu_open(dir, 0));
	killed = calloc(MAXPID, sizeof(bool));
	size_t n = 0;
	for (unsigned i = 0; i < P; i++)
		procs[n++] = (struct proc){ ROLE_P, i, 0, false };
	for (unsigned i = 0; i < C; i++)
		procs[n++] = (struct proc){ ROLE_C, i, 0, false };
	procs[n++] = (struct proc){ ROLE_R, 0, 0, false };
	for (size_t j = 0; j < n; j++)
		spawn(&procs[j]);
	unsigned kills = chaos(procs, n, &seed);
	append("stop", "", 0);
	for (size_t j = 0; j < n; j++) {
		if (procs[j].done)
			continue;
		assert_int_equal(waitpid(procs[j].pid, &status, 0),
		                 procs[j].pid);
		expect_exit(&procs[j], status);
	}
	final_drain();
	check_logs(kills);
	free(killed);
	tu_rmtree(scratch);
	free(scratch);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(stress) };
	return cmocka_run_group_tests_name("inbox_stress", tests, NULL, NULL);
}
