/*
 * Kill at every call and error at every call, for each change the store
 * makes: put (also with FSAFE_NO_TMPFILE, which a put accepts and no
 * longer needs), put_if, update, delete. The
 * store holds A = OLD and B = OLD; the operation changes A. A put of a
 * new key starts with A absent, once where the directory is said to link
 * whole (its record staged unnamed and linked at the name) and once where
 * it is said not to (a named stage, renamed).
 *
 * Kill: a child is SIGKILLed before library call N, for every N of a
 * clean run (and once more, not killed). A must then be OLD, or the
 * operation's result, and once a kill point leaves the result every later
 * one does (one call publishes); B stays OLD. A fresh handle must then
 * work at once (the dead holder's lock is broken), list exactly A and B,
 * and, after one sweep, leave no file that is not a record.
 *
 * Error: call N fails once with EIO, ENOSPC or EACCES (in a child, as a
 * program would exit after such an error). A result of 0 or
 * FSAFE_ENOTDURABLE means A holds the operation's result; any other
 * negative result means A is unchanged. No descriptor leaks either way.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "storeutil.h"
#include "testutil.h"
#include "util.h"

#define OLD_LEN 3000
#define NEW_LEN 5000
static unsigned char old_v[OLD_LEN], new_v[NEW_LEN];

enum op_kind { OP_PUT, OP_PUT_IF, OP_UPDATE, OP_DELETE };

/* What the handle is told of its directory (fsafe__renames_whole). */
enum fs_says { FS_ITSELF, FS_LINKS, FS_RENAMES };

struct op {
	const char *name;
	enum op_kind kind;
	unsigned write_flags;
	unsigned store_flags;
	bool absent; /* A is not there before */
	enum fs_says fs;
};

static const struct op ops[] = {
	{ "put", OP_PUT, 0, 0, false, FS_ITSELF },
	{ "put, named stage", OP_PUT, FSAFE_NO_TMPFILE, 0, false, FS_ITSELF },
	{ "put, kernel lock", OP_PUT, 0, FSAFE_STORE_LOCK_KERNEL, false,
	  FS_ITSELF },
	{ "put, new, linked", OP_PUT, 0, 0, true, FS_LINKS },
	{ "put, new, renamed", OP_PUT, 0, 0, true, FS_RENAMES },
	{ "put_if", OP_PUT_IF, 0, 0, false, FS_ITSELF },
	{ "update", OP_UPDATE, 0, 0, false, FS_ITSELF },
	{ "delete", OP_DELETE, 0, 0, false, FS_ITSELF },
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static enum su_content before(const struct op *o)
{
	return o->absent ? SU_ABSENT : SU_OLD;
}

static enum su_content after(const struct op *o)
{
	return o->kind == OP_DELETE ? SU_ABSENT : SU_NEW;
}

static int to_new(const void *old, size_t len, const void **nb,
                  size_t *nl, void *arg)
{
	(void)arg;
	if (!old || len != OLD_LEN || memcmp(old, old_v, len))
		return -EPROTO;
	*nb = new_v;
	*nl = NEW_LEN;
	return FSAFE_STORE_WRITE;
}

static int run_op(const struct op *o, fsafe_store *s)
{
	switch (o->kind) {
	case OP_PUT:
		return fsafe_store_put(s, "A", 1, new_v, NEW_LEN, NULL);
	case OP_PUT_IF:
		return fsafe_store_put_if(s, "A", 1, new_v, NEW_LEN, 1, NULL);
	case OP_UPDATE:
		return fsafe_store_update(s, "A", 1, to_new, NULL, NULL);
	case OP_DELETE:
		return fsafe_store_delete(s, "A", 1);
	}
	return -EINVAL;
}

/* A fresh case: the store with A (unless absent) and B at OLD (version
   1), and a handle for the operation. */
static fsafe_store *prepare(const struct op *o, const char *dir)
{
	tu_rmtree(dir);
	fsafe_store *f = su_open(dir, o->store_flags, FSAFE_NO_SYNC);
	if (!o->absent)
		su_put(f, "A", old_v, OLD_LEN);
	su_put(f, "B", old_v, OLD_LEN);
	fsafe_store_close(f);
	fsafe__test_renames_whole = o->fs == FS_ITSELF ? -1
	                            : o->fs == FS_LINKS ? 1
	                                                : 0;
	f = su_open(dir, o->store_flags | FSAFE_STORE_NO_SWEEP,
	            o->write_flags);
	fsafe__test_renames_whole = -1;
	return f;
}

/* Calls of a clean run, with their names kept for messages. */
static int count_calls(const struct op *o, const char *dir)
{
	fsafe_store *s = prepare(o, dir);

	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	int r = run_op(o, s);
	int n = fault_calls();
	fault_remove();
	fsafe_store_close(s);
	if (r != 0)
		fail_msg("%s: clean run: %s", o->name, fsafe_strerror(r));
	return n;
}

/* After the crash: B untouched, the store works at once, lists exactly
   the records, and one sweep leaves nothing but records (and the kernel
   lock's file). Returns what A held. */
static enum su_content recover(const struct op *o, const char *dir,
                               const char *at)
{
	fsafe_store *s = su_open(dir, o->store_flags, 0);
	enum su_content a = su_content(s, "A", old_v, OLD_LEN, new_v, NEW_LEN);
	struct su_listing l;
	char strays[4096];
	const char *lock[] = { ".lock", NULL };

	if (su_content(s, "B", old_v, OLD_LEN, NULL, 0) != SU_OLD)
		fail_msg("%s, %s: B changed", o->name, at);
	assert_int_equal(su_list(s, 0, &l), 0);
	const char *want = a == SU_ABSENT ? "B" : "A,B";
	if (strcmp(l.keys, want) || l.skipped_names[0])
		fail_msg("%s, %s: listing '%s' (skipped '%s'), expected '%s'",
		         o->name, at, l.keys, l.skipped_names, want);
	int r = fsafe_store_put(s, "A", 1, "again", 5, NULL);
	if (r != 0)
		fail_msg("%s, %s: the next put: %s", o->name, at,
		         fsafe_strerror(r));
	if (fsafe_sweep(AT_FDCWD, dir, 0, 0, NULL, NULL) < 0)
		fail_msg("sweep failed");
	su_strays(dir, lock, strays, sizeof(strays));
	if (strays[0])
		fail_msg("%s, %s: left behind: %s", o->name, at, strays);
	/* The lock's directory: the lock file, empty (it is locked, never
	   written), and nothing else. */
	char lockdir[4300];
	const char *kfile[] = { "lock", NULL };
	struct stat st;
	snprintf(lockdir, sizeof(lockdir), "%s/.lock", dir);
	su_strays(lockdir, kfile, strays, sizeof(strays));
	if (strays[0])
		fail_msg("%s, %s: left behind in .lock: %s", o->name, at,
		         strays);
	snprintf(lockdir, sizeof(lockdir), "%s/.lock/lock", dir);
	if (lstat(lockdir, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size)
		fail_msg("%s, %s: the lock file is not an empty file", o->name,
		         at);
	fsafe_store_close(s);
	return a;
}

static void kill_every_call(void **state)
{
	const struct op *o = *state;
	char *scratch = tu_mkscratch(), dir[4200], at[128];
	int published = 0;

	snprintf(dir, sizeof(dir), "%s/store", scratch);
	int calls = count_calls(o, dir);
	for (int n = 1; n <= calls + 1; n++) {
		fsafe_store *s = prepare(o, dir);
		int status;
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			fault_install(&(struct fault_plan){ .at = n,
			                                    .kind = FAULT_KILL });
			_exit(run_op(o, s) == 0 ? 0 : 1);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		fsafe_store_close(s);
		snprintf(at, sizeof(at), "kill before call %d (%s)", n,
		         n <= calls ? fault_call_name(n) : "none");
		bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		if (n <= calls ? !killed
		               : !WIFEXITED(status) || WEXITSTATUS(status))
			fail_msg("%s, %s: status %#x", o->name, at, status);
		enum su_content a = recover(o, dir, at);
		if (a != before(o) && a != after(o))
			fail_msg("%s, %s: A is %s", o->name, at,
			         su_content_name(a));
		if (published && a == before(o))
			fail_msg("%s, %s: A is %s again after call %d had "
			         "published", o->name, at, su_content_name(a),
			         published);
		if (!published && a == after(o))
			published = n;
		if (n > calls && a != after(o))
			fail_msg("%s: the completed operation left A %s",
			         o->name, su_content_name(a));
	}
	print_message("[ %-18s ] %d kill points; the change shows from the "
	              "kill before call %d (%s) on\n", o->name, calls + 1,
	              published, fault_call_name(published));
	tu_rmtree(scratch);
	free(scratch);
}

struct outcome {
	int r, fds_before, fds_after;
};

static struct outcome fail_in_child(const struct op *o, fsafe_store *s,
                                    int n, int err)
{
	struct outcome out;
	int p[2], status;

	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		out.fds_before = fault_open_fds();
		fault_install(&(struct fault_plan){ .at = n,
		                                    .kind = FAULT_ERRNO,
		                                    .err = err });
		out.r = run_op(o, s);
		fault_remove();
		/* The handle's own descriptors go with it: its directory,
		   open before, and the lock file it keeps from its first
		   change on. */
		fsafe_store_close(s);
		out.fds_after = fault_open_fds() + 1;
		_exit(write(p[1], &out, sizeof(out)) == sizeof(out) ? 0 : 1);
	}
	close(p[1]);
	ssize_t got = read(p[0], &out, sizeof(out));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (got != (ssize_t)sizeof(out) || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		fail_msg("%s: error child failed, status %#x", o->name, status);
	return out;
}

static void error_every_call(void **state)
{
	const struct op *o = *state;
	static const int errs[] = { EIO, ENOSPC, EACCES };
	char *scratch = tu_mkscratch(), dir[4200], at[160];
	int cases = 0, failed = 0, notdurable = 0;

	snprintf(dir, sizeof(dir), "%s/store", scratch);
	int calls = count_calls(o, dir);
	for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
		for (int n = 1; n <= calls; n++, cases++) {
			fsafe_store *s = prepare(o, dir);
			struct outcome out = fail_in_child(o, s, n, errs[e]);
			fsafe_store_close(s);
			snprintf(at, sizeof(at), "%s at call %d (%s) -> %s",
			         strerror(errs[e]), n, fault_call_name(n),
			         fsafe_strerror(out.r));
			if (out.fds_after != out.fds_before)
				fail_msg("%s, %s: %d descriptors leaked",
				         o->name, at,
				         out.fds_after - out.fds_before);
			enum su_content a = recover(o, dir, at);
			bool changed = out.r == 0 || out.r == FSAFE_ENOTDURABLE;
			enum su_content want = changed ? after(o) : before(o);
			if (a != want)
				fail_msg("%s, %s: A is %s, expected %s", o->name,
				         at, su_content_name(a),
				         su_content_name(want));
			failed += out.r < 0 && out.r != FSAFE_ENOTDURABLE;
			notdurable += out.r == FSAFE_ENOTDURABLE;
		}
	}
	print_message("[ %-18s ] %d cases: %d failed with A unchanged, %d "
	              "not durable, %d succeeded\n", o->name, cases, failed,
	              notdurable, cases - failed - notdurable);
	tu_rmtree(scratch);
	free(scratch);
}

int main(void)
{
	struct CMUnitTest tests[2 * NOPS];

	for (size_t i = 0; i < OLD_LEN; i++)
		old_v[i] = (unsigned char)(1 + i % 101);
	for (size_t i = 0; i < NEW_LEN; i++)
		new_v[i] = (unsigned char)(128 + i % 97);
	for (size_t i = 0; i < NOPS; i++) {
		tu_case_test(&tests[2 * i], "kill", ops[i].name,
		             kill_every_call, &ops[i]);
		tu_case_test(&tests[2 * i + 1], "error", ops[i].name,
		             error_every_call, &ops[i]);
	}
	return _cmocka_run_group_tests("store_crash", tests, 2 * NOPS, NULL,
	                               NULL);
}
