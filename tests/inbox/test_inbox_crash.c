/*
 * Kill at every system call, and an error at every system call, for each
 * inbox operation: deliver, claim (take), ack (remove, and move to done/)
 * and recover. A child runs the operation with the fault planned at call
 * N, for every N of a full run; the parent then checks what is left:
 *
 *  - new/ holds nothing but staging names and whole messages;
 *  - after a recovery (stage age 0: the child is dead) and a drain, the
 *    set of messages is exactly what the operation's outcome allows: a
 *    delivery that returned 0 is there, an ack that returned 0 is not,
 *    a claim never loses a message, recovery returns every dead claim;
 *  - nothing of the dead consumer's directory is left.
 */
#define _GNU_SOURCE
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "ibutil.h"
#include "testutil.h"

#define MSG_LEN 300

struct op {
	const char *name;
	unsigned flags;   /* inbox flags */
	int nmsg;         /* messages set up before the op */
	bool dead_claims; /* set-up messages held by a dead consumer */
	/* Runs in the child; the fault plan is installed just before the
	   operation and removed after it. Returns its result. */
	int (*run)(fsafe_inbox *ib, const struct fault_plan *plan);
	/* Messages a drain may find, given the op's result (INT_MIN: killed):
	   a bit mask of {0: none of the op's message, 1: one}. */
	unsigned (*allowed)(int r);
};

/* ---- the operations ------------------------------------------------------ */

static int run_deliver(fsafe_inbox *ib, const struct fault_plan *plan)
{
	char buf[MSG_LEN];

	ibu_payload(9, 0, sizeof(buf), buf);
	fault_install(plan);
	int r = fsafe_inbox_deliver(ib, buf, sizeof(buf), NULL);
	fault_remove();
	return r;
}

static unsigned allow_deliver(int r)
{
	if (r == INT32_MIN)
		return 1u << 0 | 1u << 1; /* killed: either */
	/* 0 or FSAFE_ENOTDURABLE: delivered; any other error: nothing. */
	return r == 0 || r == FSAFE_ENOTDURABLE ? 1u << 1 : 1u << 0;
}

static int run_take(fsafe_inbox *ib, const struct fault_plan *plan)
{
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m = NULL;

	if (fsafe_inbox_consumer_open(ib, NULL, &c) < 0)
		return -1000;
	fault_install(plan);
	int r = fsafe_inbox_take(c, &m);
	fault_remove();
	fsafe_inbox_msg_free(m);
	return r; /* the child exits holding the claim: a dead consumer */
}

static unsigned allow_all(int r)
{
	(void)r;
	return 1u << 0; /* exactly the set-up messages: none lost */
}

static int run_ack(fsafe_inbox *ib, const struct fault_plan *plan)
{
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	char id[FSAFE_INBOX_ID_LEN + 1];

	if (fsafe_inbox_consumer_open(ib, NULL, &c) < 0 ||
	    fsafe_inbox_take(c, &m) < 0)
		return -1000;
	snprintf(id, sizeof(id), "%s", fsafe_inbox_msg_id(m));
	fsafe_inbox_msg_free(m);
	fault_install(plan);
	int r = fsafe_inbox_ack(c, id);
	fault_remove();
	return r;
}

static unsigned allow_ack(int r)
{
	/* Acked: gone. Killed or failed: there, or gone if the removal ran
	   before the failing step (a later sync). */
	return r == 0 ? 1u << 0 : 1u << 0 | 1u << 1;
}

static int run_recover(fsafe_inbox *ib, const struct fault_plan *plan)
{
	fault_install(plan);
	int r = fsafe_inbox_recover(ib, 0, NULL);
	fault_remove();
	return r;
}

static const struct op ops[] = {
	{ "deliver", 0, 0, false, run_deliver, allow_deliver },
	{ "deliver (named stage, link)", 1u << 31, 0, false, run_deliver,
	  allow_deliver },
	{ "take", 0, 1, false, run_take, allow_all },
	{ "ack (remove)", 0, 1, false, run_ack, allow_ack },
	{ "ack (done/)", FSAFE_INBOX_KEEP_DONE, 1, false, run_ack, allow_ack },
	{ "recover", 0, 2, true, run_recover, allow_all },
};

/* ---- the harness ---------------------------------------------------------- */

static fsafe_inbox *open_for(const struct op *o, const char *dir)
{
	struct fsafe_inbox_opts opts = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;

	opts.flags = (o->flags & ~(1u << 31)) | FSAFE_INBOX_CREATE;
	if (o->flags & (1u << 31))
		opts.write_flags = FSAFE_NO_TMPFILE | FSAFE_NO_RENAMEAT2;
	int r = fsafe_inbox_open(AT_FDCWD, dir, &opts, &ib);
	if (r < 0)
		fail_msg("open %s: %s", dir, fsafe_strerror(r));
	return ib;
}

/* A fresh inbox with the op's messages, maybe held by a dead consumer. */
static void prepare(const struct op *o, const char *dir)
{
	char cmd[4200], buf[MSG_LEN];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fail_msg("rm failed");
	fsafe_inbox *ib = open_for(o, dir);
	for (int i = 0; i < o->nmsg; i++) {
		ibu_payload(1, (unsigned)i, sizeof(buf), buf);
		assert_int_equal(fsafe_inbox_deliver(ib, buf, sizeof(buf), NULL),
		                 0);
	}
	if (o->dead_claims) {
		pid_t pid = fork();
		if (pid == 0) {
			fsafe_inbox_consumer *c;
			fsafe_inbox_msg *m;
			fsafe_inbox_consumer_open(ib, NULL, &c);
			while (fsafe_inbox_take(c, &m) == 0)
				fsafe_inbox_msg_free(m);
			_exit(0);
		}
		waitpid(pid, NULL, 0);
		/* And an abandoned stage for recovery to sweep. */
		char newdir[4200];
		snprintf(newdir, sizeof(newdir), "%s/new", dir);
		tu_put(newdir, ".fsafe-00000000000000000000abcd.tmp", "x", 1);
	}
	fsafe_inbox_close(ib);
}

struct outcome {
	int r;     /* the op's result, INT32_MIN when killed */
	int calls; /* table calls the op made */
};

static struct outcome run_child(const struct op *o, const char *dir,
                                const struct fault_plan *plan)
{
	struct outcome out = { INT32_MIN, 0 };
	int fds[2], status;

	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		fsafe_inbox *ib = open_for(o, dir);
		struct outcome mine;
		mine.r = o->run(ib, plan);
		mine.calls = fault_calls();
		if (write(fds[1], &mine, sizeof(mine)) != sizeof(mine))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], &out, sizeof(out));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (n != sizeof(out)) {
		if (!WIFSIGNALED(status))
			fail_msg("%s: child died oddly (%#x)", o->name, status);
		out.r = INT32_MIN;
	}
	return out;
}

/* What is left, judged: returns the number of the op's messages found. */
static int judge(const struct op *o, const char *dir, const char *what)
{
	char ids[8][64], *pl[8];
	size_t lens[8];
	unsigned p, k;

	size_t n = ibu_drain(dir, o->flags & ~(1u << 31), ids, pl, lens, 8);
	for (size_t i = 0; i < n && i < 8; i++) {
		if (!ibu_payload_ok(pl[i], lens[i], &p, &k))
			fail_msg("%s: %s: a drained message is not whole",
			         o->name, what);
		free(pl[i]);
	}
	if (ibu_count(dir, "claimed") != 0)
		fail_msg("%s: %s: claim directories left after recovery",
		         o->name, what);
	char newdir[4200];
	snprintf(newdir, sizeof(newdir), "%s/new", dir);
	if (tu_count_staging(newdir) != 0)
		fail_msg("%s: %s: staging files left after recovery", o->name,
		         what);
	return (int)n;
}

static void check(const struct op *o, const char *dir, struct outcome out,
                  const char *what)
{
	int n = judge(o, dir, what);
	/* The op's own message is the last of them (set-up ones are all
	   still there after any op but ack). */
	int base = o->run == run_ack ? 0 : o->nmsg;
	int extra = n - base;

	if (extra < 0 || extra > 1 || !(o->allowed(out.r) & (1u << extra)))
		fail_msg("%s: %s: result %d, %d messages left (expected %d "
		         "set-up ones, op allows mask %#x)", o->name, what,
		         out.r, n, base, o->allowed(out.r));
}

static void every_call(void **state, enum fault_kind kind)
{
	const struct op *o = *state;
	char *scratch = tu_mkscratch();
	char dir[4096], what[128];

	snprintf(dir, sizeof(dir), "%s/ib", scratch);
	prepare(o, dir);
	struct outcome full = run_child(o, dir, &(struct fault_plan){ 0 });
	if (full.r < 0 && full.r != FSAFE_ENOTDURABLE)
		fail_msg("%s: the unfaulted run failed: %s", o->name,
		         fsafe_strerror(full.r));
	int failed = 0;
	for (int at = 1; at <= full.calls + 1; at++) {
		struct fault_plan plan = { .at = at, .kind = kind, .err = EIO };
		prepare(o, dir);
		struct outcome out = run_child(o, dir, &plan);
		if (kind == FAULT_KILL && at <= full.calls &&
		    out.r != INT32_MIN)
			fail_msg("%s: not killed before call %d", o->name, at);
		failed += out.r < 0 && out.r != INT32_MIN;
		snprintf(what, sizeof(what), "%s at call %d of %d",
		         kind == FAULT_KILL ? "kill" : "EIO", at, full.calls);
		check(o, dir, out, what);
	}
	print_message("[ %-28s ] %d calls, all %s points hold (%d failed)\n",
	              o->name, full.calls,
	              kind == FAULT_KILL ? "kill" : "error", failed);
	tu_rmtree(scratch);
	free(scratch);
}

static void kill_every_call(void **state)
{
	every_call(state, FAULT_KILL);
}

static void error_every_call(void **state)
{
	every_call(state, FAULT_ERRNO);
}

int main(void)
{
	enum { N = sizeof(ops) / sizeof(ops[0]) };
	struct CMUnitTest tests[2 * N];

	for (size_t i = 0; i < N; i++) {
		tu_case_test(&tests[2 * i], "kill", ops[i].name,
		             kill_every_call, &ops[i]);
		tu_case_test(&tests[2 * i + 1], "error", ops[i].name,
		             error_every_call, &ops[i]);
	}
	return _cmocka_run_group_tests("inbox_crash", tests, 2 * N, NULL, NULL);
}
