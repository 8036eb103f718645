/*
 * The system calls of one durable write, counted through the library's
 * table (every call it makes goes through it): a regression guard for the
 * single-write budget of issue 19. At most 10 per write through the path
 * API (fsafe_write_file, which opens and closes the target's directory)
 * and 8 through the dirfd API (fsafe_write_fileat), the OFD lock on the
 * stage included; 4 KiB and 1 MiB, a new file and a replace. The cases
 * still above it are pinned at their present count, with the reason.
 *
 * Each case is measured after a warm-up write in the same thread, as a
 * program that writes more than once sees it (the staging names'
 * generator is seeded once per thread). The calls made are printed, so a
 * failure says which one came back.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "fsafe/spool.h"
#include "fsafe/store.h"
#include "random.h"
#include "testutil.h"
#include "util.h"

enum { PATH_API_MAX = 10, DIRFD_API_MAX = 8 };

/*
 * `max` is the budget, or where a case is still above it, the count it
 * has now (so it cannot grow unseen) and why:
 *   ALLOC  a one-shot write of 64 KiB or more reserves its space first
 *          (fallocate: a full disk fails before any data is copied, one
 *          extent);
 *   META   a replace reads its stage's owner and mode (fstat), to carry
 *          the target's over: what creation gave depends on the umask and
 *          the credentials, which only the kernel knows;
 *   XATTR  a replace lists the target's extended attributes and ACLs
 *          (listxattrat);
 * and where it is below, the count it has now:
 *   SYNCED the data sync rides on the write (pwritev2 with RWF_DSYNC),
 *          one call fewer than write + fdatasync; a kernel that refuses
 *          the flag (before 4.7) makes that call again.
 */
enum { ALLOC = 1, META = 1, XATTR = 1, SYNCED = -1 };

struct count_case {
	const char *name;
	bool path_api;
	bool replace;
	size_t len;
	int max;
};

static const struct count_case cases[] = {
	{ "path, new, 4 KiB", true, false, 4096, PATH_API_MAX + SYNCED },
	{ "path, new, 1 MiB", true, false, 1 << 20,
	  PATH_API_MAX + SYNCED + ALLOC },
	{ "path, replace, 4 KiB", true, true, 4096,
	  PATH_API_MAX + SYNCED + META + XATTR },
	{ "path, replace, 1 MiB", true, true, 1 << 20,
	  PATH_API_MAX + SYNCED + ALLOC + META + XATTR },
	{ "dirfd, new, 4 KiB", false, false, 4096, DIRFD_API_MAX + SYNCED },
	{ "dirfd, new, 1 MiB", false, false, 1 << 20,
	  DIRFD_API_MAX + SYNCED + ALLOC },
	{ "dirfd, replace, 4 KiB", false, true, 4096,
	  DIRFD_API_MAX + SYNCED + META + XATTR },
	{ "dirfd, replace, 1 MiB", false, true, 1 << 20,
	  DIRFD_API_MAX + SYNCED + ALLOC + META + XATTR },
};

static int write_one(const struct count_case *c, struct tu_fx *f,
                     const char *name, const void *buf)
{
	char path[4096];

	if (!c->path_api)
		return fsafe_write_fileat(f->dirfd, name, buf, c->len, NULL);
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	return fsafe_write_file(path, buf, c->len, NULL);
}

/* The names of the n calls made since fault_install(), space-separated. */
static void call_names(int n, char *names, size_t size)
{
	names[0] = '\0';
	for (int i = 1; i <= n; i++) {
		size_t used = strlen(names);
		snprintf(names + used, size - used, "%s%s", i > 1 ? " " : "",
		         fault_call_name(i));
	}
}

/* Run op(arg) under a counting plan: its result, the number of calls it
   made through the table and their names, space-separated. The trace
   stays readable (fault_calls_named) until the next plan. */
static int counted(int (*op)(void *), void *arg, int *calls, char *names,
                   size_t size)
{
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	int r = op(arg);
	*calls = fault_calls();
	call_names(*calls, names, size);
	fault_remove();
	return r;
}

/* A warm-up op(arg), then op(arg) counted: its calls printed after
   `what`, at most `max` of them. The count. */
static int warm_and_count(int (*op)(void *), void *arg, const char *what,
                          int max)
{
	char names[512];
	int n;

	assert_int_equal(op(arg), 0);
	assert_int_equal(counted(op, arg, &n, names, sizeof(names)), 0);
	print_message("%-21s %2d calls (at most %d): %s\n", what, n, max,
	              names);
	assert_true(n <= max);
	return n;
}

struct write_op {
	const struct count_case *c;
	struct tu_fx *f;
	const char *name;
	const void *buf;
};

static int run_write(void *arg)
{
	struct write_op *w = arg;

	return write_one(w->c, w->f, w->name, w->buf);
}

/* The calls of one write of case c, after a warm-up write; *names gets
   them, space-separated, and *old_kernel the calls an older kernel adds:
   3 where the target's attributes were listed through an fd of its own
   (no listxattrat: Linux before 6.13, or valgrind: the listxattrat that
   fails, then openat, flistxattr and close instead), 2 where the synced
   write was refused (pwritev2 fails, then write and fdatasync). */
static int count(const struct count_case *c, struct tu_fx *f, const char *buf,
                 char *names, size_t size, int *old_kernel)
{
	char target[64];

	snprintf(target, sizeof(target), "target-%d", (int)(c - cases));
	assert_int_equal(write_one(c, f, "warm-up", buf), 0);
	if (c->replace)
		assert_int_equal(write_one(c, f, target, buf), 0);
	struct write_op w = { c, f, target, buf };
	int n;
	int r = counted(run_write, &w, &n, names, size);

	*old_kernel = (fault_calls_named("flistxattr") > 0 ? 3 : 0) +
	              (fault_calls_named("fdatasync") > 0 ? 2 : 0);
	assert_int_equal(r, 0);
	return n;
}

static void calls_per_write(void **state)
{
	struct tu_fx *f = *state;
	char *buf = calloc(1, 1 << 20);
	char names[512];
	int over = 0;

	assert_non_null(buf);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct count_case *c = &cases[i];
		int old_kernel;
		int n = count(c, f, buf, names, sizeof(names), &old_kernel);
		int max = c->max + old_kernel;
		print_message("%-22s %2d calls (at most %d%s): %s\n", c->name,
		              n, max, old_kernel ? ", an older kernel" : "",
		              names);
		over += n > max;
	}
	free(buf);
	if (over)
		fail_msg("%d case(s) above the budget of system calls", over);
}

/*
 * One inbox delivery of 1 KiB through the table, where new/ links whole
 * (said so here, whatever TMPDIR is on): an unnamed stage, the header and
 * the message written and synced in one call, the link at the id, the
 * sync of new/ and the stage's close (elsewhere a named stage, locked,
 * and a create-only rename: 6). It borrows the inbox's fd of new/, draws
 * its id from the per-thread generator, looks nothing up (the id is new;
 * the publish refuses one that is not) and stats no stage. 13 calls
 * before 8ac2d5f, 10 before the lookup, the stage's stat and the second
 * write and the sync went, 6 before the unnamed stage.
 */
enum { INBOX_DELIVER_MAX = 5 };

static int deliver_1k(void *ib)
{
	static const char msg[1024];

	return fsafe_inbox_deliver(ib, msg, sizeof(msg), NULL);
}

static void calls_per_delivery(void **state)
{
	struct tu_fx *f = *state;
	fsafe_inbox *ib;
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;

	o.flags = FSAFE_INBOX_CREATE;
	fsafe__test_renames_whole = 1;
	assert_int_equal(fsafe_inbox_open(f->dirfd, "ib", &o, &ib), 0);
	fsafe__test_renames_whole = -1;
	warm_and_count(deliver_1k, ib, "inbox deliver, 1 KiB",
	               INBOX_DELIVER_MAX);
	fsafe_inbox_close(ib);
}

/*
 * The keyed store, where its directory links whole (said so here): a put
 * of a new key and a delete, 4 KiB, after a warm-up put. The lock: a look
 * at the turnstile (nobody waits), the lock byte, the flock, a stat that
 * the name still leads to the file locked, and the two releases. A new
 * key: its read (none), then as an inbox delivery, less the lookup the
 * read made already. 15 calls for the put and 9 for the delete before
 * the turnstile was only looked at and the new key linked; the process's
 * id, asked once per change, is no call through the table.
 */
enum { STORE_PUT_MAX = 12, STORE_DELETE_MAX = 8 };

static int put_4k(void *s)
{
	static const char v[4096];

	return fsafe_store_put(s, "new", 3, v, sizeof(v), NULL);
}

static int delete_it(void *s)
{
	return fsafe_store_delete(s, "new", 3);
}

static void calls_per_store_change(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s;
	char names[512];
	int put, del;

	o.flags = FSAFE_STORE_CREATE;
	fsafe__test_renames_whole = 1;
	int r = fsafe_store_open(f->dirfd, "st", &o, &s);
	fsafe__test_renames_whole = -1;
	assert_int_equal(r, 0);
	assert_int_equal(fsafe_store_put(s, "warm-up", 7, "w", 1, NULL), 0);
	assert_int_equal(counted(put_4k, s, &put, names, sizeof(names)), 0);
	print_message("store put, new key    %2d calls (at most %d): %s\n",
	              put, STORE_PUT_MAX, names);
	assert_int_equal(counted(delete_it, s, &del, names, sizeof(names)), 0);
	print_message("store delete          %2d calls (at most %d): %s\n",
	              del, STORE_DELETE_MAX, names);
	fsafe_store_close(s);
	assert_true(put <= STORE_PUT_MAX);
	assert_true(del <= STORE_DELETE_MAX);
}

/*
 * A spool append of one 100-byte record, after two warm-up appends (the
 * first made the segment, the second the zeros reserved ahead of its
 * tail: a handle reserves from its second append on): the lock,
 * the head's read, a read at the tail (zeros: nobody left an append
 * unpublished there), the frame's write, its fdatasync, the head's write
 * and the unlock. The read at the tail took the place of an lseek to the
 * end of the file, which the reserve made meaningless. The same 7 for
 * appends of 1024 records to a spool of their own (too large for a
 * reserve: the read at the tail finds the end of the file, in one read).
 */
enum { SPOOL_APPEND_MAX = 7 };

static int append_100(void *s)
{
	static char rec[100];
	struct iovec v = { rec, sizeof(rec) };

	return fsafe_spool_append(s, &v, 1, NULL);
}

static int append_1024(void *s)
{
	static char rec[100];
	static struct iovec v[1024];

	for (size_t i = 0; i < 1024; i++)
		v[i] = (struct iovec){ rec, sizeof(rec) };
	return fsafe_spool_append(s, v, 1024, NULL);
}

static void calls_per_spool_append(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.flags = FSAFE_SPOOL_CREATE;
	assert_int_equal(fsafe_spool_open(f->dirfd, "sp", &o, &s), 0);
	assert_int_equal(append_100(s), 0);
	warm_and_count(append_100, s, "spool append, 100 B", SPOOL_APPEND_MAX);
	assert_int_equal(fault_calls_named("lseek"), 0);
	fsafe_spool_close(s);
	assert_int_equal(fsafe_spool_open(f->dirfd, "sp2", &o, &s), 0);
	warm_and_count(append_1024, s, "spool append, 1024 x",
	               SPOOL_APPEND_MAX);
	fsafe_spool_close(s);
}

int main(void)
{
	/* Staging names as a production build draws them. */
	fsafe__test_random_from_table = 0;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(calls_per_write, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(calls_per_delivery, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(calls_per_store_change,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(calls_per_spool_append,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
