/*
 * A save of three files (one of them larger) over a previous set, killed
 * before every system call it makes, and failed at every call with an
 * errno: afterwards (and again after the next open's recovery) load gives
 * exactly the previous set or exactly the new one, the new one whenever
 * the commit had returned success, and nothing else is left: no
 * generation newer than CURRENT, no staging file, no marker.
 *
 * The save is the whole life of a writer: open (lock, marker, recovery),
 * begin, add, commit, close. Variants: every file changed, or one file
 * unchanged (hard-linked from the previous generation), or the large file
 * streamed, or a save that makes the oldest generation due for removal
 * (keep 2 over two). After every stop, check counts no generation lost;
 * after the next writer's open, it finds nothing at all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "testutil.h"

#define BIG_OLD (192 * 1024 + 17)
#define BIG_NEW (256 * 1024 + 5)

static unsigned char big_old[BIG_OLD], big_new[BIG_NEW];

struct file {
	const char *name;
	const void *buf;
	size_t len;
};

static const struct file old_set[] = {
	{ "discovery_candidates.jsonl", "{\"c\":1}\n", 8 },
	{ "manifest.json", "{\"version\":1}", 13 },
	{ "recognizers.jsonl", big_old, BIG_OLD },
};

static const struct file new_set[] = {
	{ "discovery_candidates.jsonl", "{\"c\":2}\n{\"c\":3}\n", 16 },
	{ "manifest.json", "{\"version\":2,\"n\":3}", 19 },
	{ "recognizers.jsonl", big_new, BIG_NEW },
};

/* The new set with manifest.json unchanged: it is linked, not written. */
static const struct file new_linked[] = {
	{ "discovery_candidates.jsonl", "{\"c\":2}\n{\"c\":3}\n", 16 },
	{ "manifest.json", "{\"version\":1}", 13 },
	{ "recognizers.jsonl", big_new, BIG_NEW },
};

struct variant {
	const char *name;
	const struct file *set;
	bool stream;        /* the large file through a stream */
	bool removes;       /* an older generation before the old set */
};

static const struct variant variants[] = {
	{ "all changed", new_set, false, false },
	{ "one unchanged (linked)", new_linked, false, false },
	{ "large file streamed", new_set, true, false },
	{ "a removal due", new_set, false, true },
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

/* What the child reports, in memory shared with the parent. */
struct shared {
	int commit_returned; /* 1 once commit returned */
	int commit_result;
};
static struct shared *sh;

static fsafe_checkpoint *open_at(const char *dir)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp = NULL;

	o.flags = FSAFE_CHECKPOINT_CREATE;
	o.revision = "rev";
	return fsafe_checkpoint_open(AT_FDCWD, dir, &o, &cp) == 0 ? cp : NULL;
}

static int add_all(fsafe_checkpoint_tx *tx, const struct variant *v)
{
	for (int i = 0; i < 3; i++) {
		const struct file *f = &v->set[i];
		int r;
		if (v->stream && f->len > 4096) {
			fsafe_checkpoint_stream *s;
			if ((r = fsafe_checkpoint_add_stream(tx, f->name, &s)) < 0)
				return r;
			for (size_t off = 0; off < f->len && r == 0; off += 65536)
				r = fsafe_checkpoint_stream_write(
					s, (const char *)f->buf + off,
					f->len - off < 65536 ? f->len - off
					                     : 65536);
			int c = fsafe_checkpoint_stream_close(s);
			r = r < 0 ? r : c;
		} else {
			r = fsafe_checkpoint_add(tx, f->name, f->buf, f->len);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* The whole save; the commit's result goes to shared memory. */
static int save(const char *dir, const struct variant *v)
{
	fsafe_checkpoint *cp = open_at(dir);
	fsafe_checkpoint_tx *tx;

	if (!cp)
		return -1;
	int r = fsafe_checkpoint_begin(cp, &tx);
	if (r == 0 && (r = add_all(tx, v)) < 0)
		fsafe_checkpoint_abort(tx);
	else if (r == 0) {
		r = fsafe_checkpoint_commit(tx, NULL);
		sh->commit_result = r;
		__atomic_store_n(&sh->commit_returned, 1, __ATOMIC_RELEASE);
	}
	int c = fsafe_checkpoint_close(cp);
	return r < 0 ? r : c;
}

static void prepare_old(const char *dir, const struct variant *v)
{
	const struct variant old = { "old", old_set, false, false };

	tu_rmtree(dir);
	memset(sh, 0, sizeof(*sh));
	if (v->removes && save(dir, &variants[0]) != 0)
		fail_msg("could not save the oldest set");
	if (save(dir, &old) != 0)
		fail_msg("could not save the old set");
	memset(sh, 0, sizeof(*sh));
}

enum seen { SEEN_OLD, SEEN_NEW, SEEN_OTHER };

static enum seen classify(fsafe_checkpoint *cp, const struct variant *v,
                          char *why, size_t len)
{
	fsafe_checkpoint_snapshot *s;
	int r = fsafe_checkpoint_load(cp, NULL, &s);

	if (r != 0) {
		snprintf(why, len, "load: %s", r > 0 ? "a warning"
		                                      : fsafe_strerror(r));
		return SEEN_OTHER;
	}
	enum seen got = SEEN_OTHER;
	for (int k = 0; k < 2 && got == SEEN_OTHER; k++) {
		const struct file *set = k ? v->set : old_set;
		bool same = fsafe_checkpoint_snapshot_count(s) == 3;
		for (int i = 0; same && i < 3; i++) {
			long j = fsafe_checkpoint_snapshot_find(s, set[i].name);
			same = j >= 0 &&
			       fsafe_checkpoint_snapshot_size(s, (size_t)j) ==
			               set[i].len &&
			       memcmp(fsafe_checkpoint_snapshot_data(s, (size_t)j),
			              set[i].buf, set[i].len) == 0;
		}
		if (same)
			got = k ? SEEN_NEW : SEEN_OLD;
	}
	if (got == SEEN_OTHER)
		snprintf(why, len, "a set that is neither old nor new");
	fsafe_checkpoint_snapshot_free(s);
	return got;
}

/* Names in dir that no recovered checkpoint may hold. */
static const char *leftovers(const char *dir, uint64_t current, char *buf,
                             size_t len)
{
	char path[4200];

	if (tu_count_staging(dir)) {
		snprintf(buf, len, "a staging file in the checkpoint directory");
		return buf;
	}
	snprintf(path, sizeof(path), "%s/gen-%012llu", dir,
	         (unsigned long long)current + 1);
	if (access(path, F_OK) == 0) {
		snprintf(buf, len, "a partial generation survived recovery");
		return buf;
	}
	snprintf(path, sizeof(path), "%s/gen-%012llu", dir,
	         (unsigned long long)current);
	if (tu_count_staging(path)) {
		snprintf(buf, len, "a staging file in the current generation");
		return buf;
	}
	return NULL;
}

/* What check finds: problems, and generations they say are lost. */
static int check_lost(const char *dir, uint64_t *lost)
{
	*lost = 0;
	return fsafe_checkpoint_check(AT_FDCWD, dir, tu_add_lost, lost);
}

/*
 * Judge the directory after the child stopped: before any recovery (a
 * read-only handle), then after a writer's open, which must also find the
 * shutdown unclean when the child died holding it.
 */
static void judge(const char *dir, const struct variant *v, bool killed,
                  const char *what)
{
	struct fsafe_checkpoint_opts ro = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;
	char why[256];
	bool returned = __atomic_load_n(&sh->commit_returned, __ATOMIC_ACQUIRE);
	int result = sh->commit_result;
	uint64_t lost;
	int problems = check_lost(dir, &lost);

	/* A stop costs nothing saved: no generation may look lost (a
	   removal recorded but not done is no loss). */
	if (problems < 0 || lost)
		fail_msg("%s: %s: check: %d problems, %llu generations lost",
		         v->name, what, problems, (unsigned long long)lost);
	ro.flags = FSAFE_CHECKPOINT_READ_ONLY;
	ro.revision = "rev";
	for (int pass = 0; pass < 2; pass++) {
		int r = pass ? (cp = open_at(dir)) ? 0 : -1
		             : fsafe_checkpoint_open(AT_FDCWD, dir, &ro, &cp);
		if (r < 0)
			fail_msg("%s: %s: reopen failed", v->name, what);
		enum seen s = classify(cp, v, why, sizeof(why));
		if (s == SEEN_OTHER)
			fail_msg("%s: %s: %s", v->name, what, why);
		if (returned && result == 0 && s != SEEN_NEW)
			fail_msg("%s: %s: the commit returned 0, yet load gives "
			         "the old set", v->name, what);
		if (returned && result < 0 && result != FSAFE_ENOTDURABLE &&
		    s != SEEN_OLD)
			fail_msg("%s: %s: the commit failed (%s), yet load gives "
			         "the new set", v->name, what,
			         fsafe_strerror(result));
		if (pass == 1) {
			const char *bad = leftovers(
				dir, fsafe_checkpoint_current(cp), why,
				sizeof(why));
			if (bad)
				fail_msg("%s: %s: %s", v->name, what, bad);
		}
		if (fsafe_checkpoint_close(cp) != 0)
			fail_msg("%s: %s: close failed", v->name, what);
	}
	if ((problems = check_lost(dir, &lost)) != 0)
		fail_msg("%s: %s: after recovery, check finds %d problems",
		         v->name, what, problems);
	(void)killed;
}

static int run_child(const char *dir, const struct variant *v,
                     const struct fault_plan *plan)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		fault_install(plan);
		int r = save(dir, v);
		_exit(r == 0 ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) != pid)
		fail_msg("waitpid: %s", strerror(errno));
	return status;
}

/* The calls of one whole save, counted in a child. */
static int count_calls(const char *dir, const struct variant *v)
{
	int *calls = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE,
	                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;
	int status, n;

	prepare_old(dir, v);
	if ((pid = fork()) == 0) {
		fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
		int r = save(dir, v);
		*calls = fault_calls();
		_exit(r == 0 && sh->commit_result == 0 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s: the unfaulted save failed", v->name);
	n = *calls;
	munmap(calls, sizeof(int));
	return n;
}

static void kill_every_call(void **state)
{
	const struct variant *v = *state;
	char *scratch = tu_mkscratch(), dir[4200], what[64];
	int calls, outcomes[2] = { 0, 0 };

	snprintf(dir, sizeof(dir), "%s/ckpt", scratch);
	calls = count_calls(dir, v);
	for (int n = 1; n <= calls + 1; n++) {
		prepare_old(dir, v);
		int st = run_child(dir, v, &(struct fault_plan){
			.at = n, .kind = FAULT_KILL });
		if (n <= calls && !(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
			fail_msg("%s: kill before call %d: not killed", v->name,
			         n);
		snprintf(what, sizeof(what), "kill before call %d of %d", n,
		         calls);
		judge(dir, v, n <= calls, what);
		outcomes[sh->commit_returned && sh->commit_result == 0]++;
	}
	print_message("[ %-24s ] %d kill points: %d before the commit "
	              "returned, %d after\n", v->name, calls + 1, outcomes[0],
	              outcomes[1]);
	tu_rmtree(scratch);
	free(scratch);
}

static void error_every_call_with(const struct variant *v, int err)
{
	char *scratch = tu_mkscratch(), dir[4200], what[64];
	int calls, failed = 0;

	snprintf(dir, sizeof(dir), "%s/ckpt", scratch);
	calls = count_calls(dir, v);
	for (int n = 1; n <= calls; n++) {
		prepare_old(dir, v);
		int st = run_child(dir, v, &(struct fault_plan){
			.at = n, .kind = FAULT_ERRNO, .err = err });
		if (!WIFEXITED(st))
			fail_msg("%s: %s at call %d: child crashed (%#x)",
			         v->name, strerror(err), n, st);
		failed += WEXITSTATUS(st) != 0;
		snprintf(what, sizeof(what), "%s at call %d of %d",
		         strerror(err), n, calls);
		judge(dir, v, false, what);
	}
	print_message("[ %-24s ] %s at each of %d calls: %d saves failed "
	              "cleanly, the rest recovered\n", v->name, strerror(err),
	              calls, failed);
	tu_rmtree(scratch);
	free(scratch);
}

/* EIO everywhere; ENOSPC (the full disk) on the first variant only, to
   keep the suite short: the paths differ by errno only in messages. */
static void error_every_call(void **state)
{
	const struct variant *v = *state;

	error_every_call_with(v, EIO);
	if (v == &variants[0])
		error_every_call_with(v, ENOSPC);
}

int main(void)
{
	struct CMUnitTest tests[2 * NVARIANTS];
	size_t n = 0;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < sizeof(big_old); i++)
		big_old[i] = (unsigned char)(i * 31 + 1);
	for (size_t i = 0; i < sizeof(big_new); i++)
		big_new[i] = (unsigned char)(i * 17 + 2);
	for (size_t i = 0; i < NVARIANTS; i++)
		tu_case_test(&tests[n++], "kill", variants[i].name,
		             kill_every_call, &variants[i]);
	for (size_t i = 0; i < NVARIANTS; i++)
		tu_case_test(&tests[n++], "errors", variants[i].name,
		             error_every_call, &variants[i]);
	return _cmocka_run_group_tests("checkpoint_crash", tests, n, NULL,
	                               NULL);
}
