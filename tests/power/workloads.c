/*
 * The workloads both layers run, each with its invariant. To cover a new
 * module, add a workloads_<module>.c and a line in suites.c (see power.h).
 */
#define _GNU_SOURCE
#include "power.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "fsafe.h"
#include "fsafe/lock.h"
#include "sys.h"

static const char *const here[] = { ".", NULL };
static const char *const target_only[] = { "target", NULL };

/* ---- atomic write: one fsafe_write_fileat of NEW to "target" ----------- */

static void old_target(int root)
{
	pw_put(root, "target", pw_old, PW_OLD_LEN);
}

/* Op `op` of the run: write NEW to "target" with `flags`. */
static void write_op(int root, struct pw_progress *p, int op,
                     const void *buf, size_t len, unsigned flags)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.flags = flags;
	pw_returned(p, op, fsafe_write_fileat(root, "target", buf, len, &o));
}

static void write_with(int root, struct pw_progress *p, unsigned flags)
{
	write_op(root, p, 0, pw_new, PW_NEW_LEN, flags);
}

static void run_plain(int root, struct pw_progress *p)
{
	write_with(root, p, 0);
}

/*
 * A large one-shot write allocates its space before it writes (see
 * ALLOCATE_MIN in src/writer.c): OLD 96 KiB, NEW 160 KiB, every byte
 * different and none zero.
 */
enum { BIG_OLD_LEN = 96 * 1024, BIG_NEW_LEN = 160 * 1024 };
static unsigned char big_old[BIG_OLD_LEN], big_new[BIG_NEW_LEN];

static void big_fill(void)
{
	for (size_t i = 0; i < BIG_OLD_LEN; i++)
		big_old[i] = (unsigned char)(1 + (i * 7) % 127);
	for (size_t i = 0; i < BIG_NEW_LEN; i++)
		big_new[i] = (unsigned char)(128 + (i * 13) % 127);
}

static void old_big(int root)
{
	big_fill();
	pw_put(root, "target", big_old, BIG_OLD_LEN);
}

static void run_big(int root, struct pw_progress *p)
{
	big_fill();
	write_op(root, p, 0, big_new, BIG_NEW_LEN, 0);
}

static const char *check_big(int root, const struct pw_progress *p,
                             char *buf, size_t len)
{
	big_fill();
	return pw_expect(root, "target", big_old, BIG_OLD_LEN, big_new,
	                 BIG_NEW_LEN, pw_done(p, 0, 0), buf, len);
}

static void run_create_only(int root, struct pw_progress *p)
{
	write_with(root, p, FSAFE_CREATE_ONLY);
}

static void run_create_only_link(int root, struct pw_progress *p)
{
	write_with(root, p,
	           FSAFE_CREATE_ONLY | FSAFE_NO_RENAMEAT2 | FSAFE_NO_TMPFILE);
}

static const char *check_new(int root, const struct pw_progress *p,
                             char *buf, size_t len)
{
	return pw_expect(root, "target", NULL, 0, pw_new, PW_NEW_LEN,
	                 pw_done(p, 0, 0), buf, len);
}

static const char *check_replace(int root, const struct pw_progress *p,
                                 char *buf, size_t len)
{
	return pw_expect(root, "target", pw_old, PW_OLD_LEN, pw_new,
	                 PW_NEW_LEN, pw_done(p, 0, 0), buf, len);
}

/*
 * An existing target keeps its mode: a private OLD (0600) must not come
 * back as NEW with another mode after a cut. The stage is created with
 * the target's mode (0600 is inside any umask), so no fchmod is needed:
 * the next workload is the one that takes the fchmod path.
 */
static void old_private(int root)
{
	old_target(root);
	if (fchmodat(root, "target", 0600, 0) < 0)
		abort();
}

static const char *check_private(int root, const struct pw_progress *p,
                                 char *buf, size_t len)
{
	const char *bad = check_replace(root, p, buf, len);

	return bad ? bad : pw_expect_mode(root, "target", 0600, buf, len);
}

/*
 * The same with a mode the umask would change: OLD is 0666 and the stage,
 * created under umask 022, comes out 0644, so the writer must fchmod it
 * and then fsync (an fdatasync need not make the chmod durable). The
 * private-mode case above never takes that path: its stage is created
 * with the target's mode already.
 */
static void old_shared(int root)
{
	old_target(root);
	if (fchmodat(root, "target", 0666, 0) < 0)
		abort();
}

static void run_under_umask(int root, struct pw_progress *p)
{
	mode_t old = umask(022);

	write_with(root, p, 0);
	umask(old);
}

static const char *check_shared(int root, const struct pw_progress *p,
                                char *buf, size_t len)
{
	const char *bad = check_replace(root, p, buf, len);

	return bad ? bad : pw_expect_mode(root, "target", 0666, buf, len);
}

/* A create-only write onto an existing target must leave it alone. */
static const char *check_untouched(int root, const struct pw_progress *p,
                                   char *buf, size_t len)
{
	if (p->returned && p->result[0] != -EEXIST) {
		snprintf(buf, len, "create-only over OLD returned %s",
		         fsafe_strerror(p->result[0]));
		return buf;
	}
	return pw_expect(root, "target", NULL, 0, pw_old, PW_OLD_LEN, true,
	                 buf, len);
}

/*
 * FSAFE_NO_SYNC drops every sync. Its contract (fsafe.h): atomic for
 * readers and against process crashes; after a power cut the target is
 * OLD, NEW, or NEW's unwritten form: a file of at most NEW's size whose
 * data was lost (zeros on ext4 and xfs; the model also allows the stale
 * bytes some filesystems expose). It is never missing.
 */
static void run_nosync(int root, struct pw_progress *p)
{
	write_with(root, p, FSAFE_NO_SYNC);
}

static bool unwritten_new(int root)
{
	struct stat st;

	return fstatat(root, "target", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode) && st.st_size <= PW_NEW_LEN;
}

static const char *check_nosync(int root, const struct pw_progress *p,
                                char *buf, size_t len)
{
	(void)p;
	const char *bad = pw_expect(root, "target", pw_old, PW_OLD_LEN, pw_new,
	                            PW_NEW_LEN, false, buf, len);
	return bad && !unwritten_new(root) ? bad : NULL;
}

/* ---- the managed writer: open, three chunks, commit --------------------- */

#define CHUNK 4096
_Static_assert(PW_NEW_LEN == 3 * CHUNK, "three chunks make NEW");

static void run_managed(int root, struct pw_progress *p)
{
	fsafe_writer *w;
	int r = fsafe_writer_open(root, "target", NULL, &w);

	pw_returned(p, 0, r);
	if (r < 0)
		return;
	for (int i = 0; i < 3; i++)
		pw_returned(p, 1 + i,
		            fsafe_writer_write(w, pw_new + i * CHUNK, CHUNK));
	pw_returned(p, 4, fsafe_writer_commit(w));
}

static const char *check_managed(int root, const struct pw_progress *p,
                                 char *buf, size_t len)
{
	return pw_expect(root, "target", pw_old, PW_OLD_LEN, pw_new,
	                 PW_NEW_LEN, pw_done(p, 4, 0), buf, len);
}

/* ---- a batch: two files, one group commit ----------------------------- */

/*
 * Not a transaction: after a cut each file is, on its own, OLD (or absent)
 * or NEW; once the commit returned 0, both are NEW.
 */
static const char *const batch_known[] = { "target", "second", NULL };

static void run_batch_with(int root, struct pw_progress *p, unsigned flags,
                           unsigned syncfs_min, unsigned max_inflight)
{
	struct fsafe_batch_opts o = FSAFE_BATCH_OPTS_INIT;
	fsafe_batch *b = NULL;

	o.flags = flags;
	o.syncfs_min = syncfs_min;
	o.max_inflight = max_inflight;
	int r = fsafe_batch_new(&o, &b);
	if (r == 0 &&
	    (r = fsafe_batch_add(b, root, "target", pw_new, PW_NEW_LEN,
	                         NULL)) >= 0)
		r = fsafe_batch_add(b, root, "second", pw_new_short,
		                    sizeof(pw_new_short), NULL);
	if (r >= 0)
		r = fsafe_batch_commit(b);
	fsafe_batch_free(b);
	pw_returned(p, 0, r);
}

static void run_batch(int root, struct pw_progress *p)
{
	run_batch_with(root, p, 0, 0, 0);
}

static void run_batch_pool(int root, struct pw_progress *p)
{
	run_batch_with(root, p, FSAFE_BATCH_NO_URING, 0, 0);
}

/* Overlapped windows (a batch of 256 or more) forced on two files:
   windows of one, the first synced on a thread while the second is
   staged, then published while the second syncs. */
static void run_batch_overlapped(int root, struct pw_progress *p)
{
	fsafe__test_overlap_min = 1;
	run_batch_with(root, p, 0, 0, 2);
}

/* A window large enough (here: two) is synced by one syncfs, whatever
   else the machine has dirty. */
static void run_batch_syncfs(int root, struct pw_progress *p)
{
	run_batch_with(root, p, FSAFE_BATCH_SYNCFS_ANY_DIRTY, 2, 0);
}

/* "target" (OLD before) and "second" (new), written by ops `a` and `b`. */
static const char *check_two(int root, const struct pw_progress *p, int a,
                             int b, char *buf, size_t len)
{
	const char *bad = pw_expect(root, "target", pw_old, PW_OLD_LEN,
	                            pw_new, PW_NEW_LEN, pw_done(p, a, 0), buf,
	                            len);

	return bad ? bad
	           : pw_expect(root, "second", NULL, 0, pw_new_short,
	                       sizeof(pw_new_short), pw_done(p, b, 0), buf,
	                       len);
}

static const char *check_batch(int root, const struct pw_progress *p,
                               char *buf, size_t len)
{
	return check_two(root, p, 0, 0, buf, len); /* one commit, op 0 */
}

/* ---- async: two writes queued, completions reaped ---------------------- */

/*
 * Each write is committed alone (max_group 1), so the worker's calls come
 * in the same order in every run, which cutting at call N needs; grouping
 * itself is the batch's, cut above. Op i is write i, reported when its
 * completion is reaped.
 */
static void run_async(int root, struct pw_progress *p)
{
	struct fsafe_async_opts o = FSAFE_ASYNC_OPTS_INIT;
	fsafe_async *a = NULL;
	uint64_t first = 0;
	int r;

	o.max_group = 1;
	if ((r = fsafe_async_new(&o, &a)) == 0 &&
	    (r = fsafe_async_submit(a, root, "target", pw_new, PW_NEW_LEN,
	                            NULL, NULL, &first)) == 0)
		r = fsafe_async_submit(a, root, "second", pw_new_short,
		                       sizeof(pw_new_short), NULL, NULL, NULL);
	if (r < 0)
		abort(); /* nothing of the table is called before the worker */
	for (int done = 0; done < 2;) {
		struct fsafe_async_completion c[2];
		if (fsafe_async_wait(a, FSAFE_FOREVER) < 0)
			abort();
		int n = fsafe_async_reap(a, c, 2);
		for (int k = 0; k < n; k++, done++)
			pw_returned(p, (int)(c[k].id - first), c[k].result);
	}
	fsafe_async_free(a);
}

static const char *check_async(int root, const struct pw_progress *p,
                               char *buf, size_t len)
{
	return check_two(root, p, 0, 1, buf, len);
}

/* ---- FSAFE_MKDIR: a/b/target, with neither a nor b there yet ------------ */

static const char *const mkdir_dirs[] = { ".", "a", "a/b", NULL };
static const char *const mkdir_known[] = { "a", "b", "target", NULL };

static void run_mkdir(int root, struct pw_progress *p)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.flags = FSAFE_MKDIR;
	pw_returned(p, 0, fsafe_write_fileat(root, "a/b/target", pw_new,
	                                     PW_NEW_LEN, &o));
}

static const char *check_mkdir(int root, const struct pw_progress *p,
                               char *buf, size_t len)
{
	return pw_expect(root, "a/b/target", NULL, 0, pw_new, PW_NEW_LEN,
	                 pw_done(p, 0, 0), buf, len);
}

/*
 * Two writers race to create a/: the other one's mkdir of a has happened,
 * its fsync of the root (the step that makes a durable) has not. Our write
 * into a/b then finds a already there. It returns success only once
 * a/b/target is durable; that needs a's entry in the root to be durable
 * too, which nobody has made so yet. (The same holds when the other writer
 * was killed between its mkdir and its fsync.)
 */
static void run_mkdir_race(int root, struct pw_progress *p)
{
	/* The other writer's call, through the table like all of its calls
	   (so both layers see it). */
	SYS->mkdirat(root, "a", 0777);
	run_mkdir(root, p);
}

/* ---- sweep after a cut, then write --------------------------------------- */

/*
 * What earlier cuts leave: an unpublished stage (garbage), and a second name
 * of the target (a create-only link+unlink cut between its two calls). The
 * restarted program sweeps, then writes; cuts land in both.
 */
#define LEFT_STAGE ".fsafe-aaaaaaaaaaaaaaaaaaaaaaaa.tmp"
#define LEFT_LINK ".fsafe-bbbbbbbbbbbbbbbbbbbbbbbb.tmp"

static void old_leftovers(int root)
{
	old_target(root);
	pw_put(root, LEFT_STAGE, pw_new, PW_NEW_LEN / 2);
	pw_link(root, "target", LEFT_LINK);
}

static void run_sweep(int root, struct pw_progress *p)
{
	pw_returned(p, 0, fsafe_sweep(root, ".", 0, 0, NULL, NULL));
	write_op(root, p, 1, pw_new, PW_NEW_LEN, 0);
}

static const char *check_sweep(int root, const struct pw_progress *p,
                               char *buf, size_t len)
{
	if (p->returned && p->result[0] != 2) {
		snprintf(buf, len, "the sweep returned %d, expected 2",
		         p->result[0]);
		return buf;
	}
	return pw_expect(root, "target", pw_old, PW_OLD_LEN, pw_new,
	                 PW_NEW_LEN, pw_done(p, 1, 0), buf, len);
}

/* ---- a stage name that collides with a leftover second name ----------- */

/*
 * The target (long OLD) also has the name the writer draws first, as a
 * create-only link+unlink cut leaves it. O_EXCL makes the writer draw
 * again; without it, the writer opens the target's own inode and writes
 * the short NEW over the long OLD in place: a mix, before anything is
 * published.
 */
static void old_collision(int root)
{
	pw_put(root, "target", pw_old_long, sizeof(pw_old_long));
	pw_link(root, "target", pw_det_first_name());
}

static void run_collision(int root, struct pw_progress *p)
{
	write_op(root, p, 0, pw_new_short, sizeof(pw_new_short),
	         FSAFE_NO_TMPFILE);
}

static const char *check_collision(int root, const struct pw_progress *p,
                                   char *buf, size_t len)
{
	return pw_expect(root, "target", pw_old_long, sizeof(pw_old_long),
	                 pw_new_short, sizeof(pw_new_short), pw_done(p, 0, 0),
	                 buf, len);
}

/* ---- locks: acquire, work under the lock, release ----------------------- */

/*
 * The process holding the lock dies at the cut. Whatever survived, the
 * next acquirer (recovery, in a live process) must get the lock at once,
 * breaking it if the dead holder's file is still there, and the lock
 * module's private names must be gone once it has.
 */
static const char *const lock_known[] = { "lock", "target", NULL };

static bool lock_private(const char *name)
{
	size_t n = strlen(name);

	return strncmp(name, ".lock-", 6) == 0 &&
	       ((n > 4 && strcmp(name + n - 4, ".tmp") == 0) ||
	        (n > 7 && strcmp(name + n - 7, ".broken") == 0));
}

static void run_lock_with(int root, struct pw_progress *p, unsigned flags)
{
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;
	fsafe_lock *l;

	o.flags = FSAFE_LOCK_NO_WAIT | flags;
	int r = fsafe_lock_acquire(root, "lock", &o, &l);
	pw_returned(p, 0, r);
	if (r < 0)
		return;
	write_op(root, p, 1, pw_new, PW_NEW_LEN, 0);
	pw_returned(p, 2, fsafe_lock_release(l));
}

static void run_lock(int root, struct pw_progress *p)
{
	run_lock_with(root, p, 0);
}

static void run_lock_kernel(int root, struct pw_progress *p)
{
	run_lock_with(root, p, FSAFE_LOCK_KERNEL);
}

static const char *recover_lock_with(const struct pw_workload *w, int root,
                                     char *buf, size_t len, unsigned flags)
{
	struct fsafe_lock_opts o = FSAFE_LOCK_OPTS_INIT;
	struct stat st;
	fsafe_lock *l;
	const char *bad = pw_sweep_all(w, root, buf, len);

	if (bad)
		return bad;
	bool left = fstatat(root, "lock", &st, AT_SYMLINK_NOFOLLOW) == 0;
	o.flags = FSAFE_LOCK_NO_WAIT | flags;
	int r = fsafe_lock_acquire(root, "lock", &o, &l);
	if (r < 0) {
		snprintf(buf, len, "the next acquirer could not take the lock "
		         "the dead process %s: %s", left ? "left" : "had",
		         fsafe_strerror(r));
		return buf;
	}
	unsigned broken = fsafe_lock_broken(l);
	if ((r = fsafe_lock_release(l)) < 0) {
		snprintf(buf, len, "release after the cut: %s",
		         fsafe_strerror(r));
		return buf;
	}
	if (left && !(flags & FSAFE_LOCK_KERNEL) && !broken) {
		snprintf(buf, len, "the dead holder's lock file was there, yet "
		         "the next acquirer broke nothing");
		return buf;
	}
	return NULL;
}

static const char *recover_lock(const struct pw_workload *w, int root,
                                char *buf, size_t len)
{
	return recover_lock_with(w, root, buf, len, 0);
}

static const char *recover_lock_kernel(const struct pw_workload *w, int root,
                                       char *buf, size_t len)
{
	return recover_lock_with(w, root, buf, len, FSAFE_LOCK_KERNEL);
}

static const char *check_lock(int root, const struct pw_progress *p,
                              char *buf, size_t len)
{
	if (p->returned && p->result[0] != 0) {
		snprintf(buf, len, "acquiring a free lock returned %s",
		         fsafe_strerror(p->result[0]));
		return buf;
	}
	return pw_expect(root, "target", pw_old, PW_OLD_LEN, pw_new,
	                 PW_NEW_LEN, pw_done(p, 1, 0), buf, len);
}

/* ---- symbolic link replace: "current" from one release to another ------ */

static const char *const link_known[] = { "current", "release-old",
	                                  "release-new", NULL };

static void old_link(int root)
{
	pw_put(root, "release-old", pw_old, PW_OLD_LEN);
	pw_put(root, "release-new", pw_new, PW_NEW_LEN);
	if (symlinkat("release-old", root, "current") < 0)
		abort();
}

static void run_symlink(int root, struct pw_progress *p)
{
	pw_returned(p, 0, fsafe_symlinkat("release-new", root, "current",
	                                  NULL));
}

/* "current" reads the old release or the new one, the new one once the
   call returned; it is never missing, nor anything but a link. */
static const char *check_symlink(int root, const struct pw_progress *p,
                                 char *buf, size_t len)
{
	char to[64];
	ssize_t n = readlinkat(root, "current", to, sizeof(to) - 1);

	if (n < 0) {
		snprintf(buf, len, "current: readlink: %s", strerror(errno));
		return buf;
	}
	to[n] = '\0';
	if (strcmp(to, "release-new") &&
	    (strcmp(to, "release-old") || pw_done(p, 0, 0))) {
		snprintf(buf, len, "current -> %s%s", to,
		         pw_done(p, 0, 0) ? " after the call returned" : "");
		return buf;
	}
	return NULL;
}

#define PUBLISHES (FSAFE__BREAK_DIR_SYNC | FSAFE__BREAK_DATA_SYNC)

const struct pw_workload pw_core_workloads[] = {
	{ .name = "write new target (one-shot: named stage)", .dirs = here,
	  .known = target_only, .catches = PUBLISHES,
	  .run = run_plain, .check = check_new },
	{ .name = "replace (one-shot: named stage)", .dirs = here,
	  .known = target_only,
	  .catches = PUBLISHES, .setup_old = old_target, .run = run_plain,
	  .check = check_replace },
	{ .name = "replace keeps a private mode (0600)", .dirs = here,
	  .known = target_only, .setup_old = old_private, .run = run_plain,
	  .check = check_private },
	{ .name = "replace keeps a mode the umask would change (0666)",
	  .dirs = here, .known = target_only, .setup_old = old_shared,
	  .run = run_under_umask, .check = check_shared },
	{ .name = "replace 160 KiB (space allocated first)", .dirs = here,
	  .known = target_only, .catches = PUBLISHES, .setup_old = old_big,
	  .run = run_big, .check = check_big },
	{ .name = "create-only (renameat2)", .dirs = here,
	  .known = target_only, .catches = PUBLISHES,
	  .run = run_create_only, .check = check_new },
	{ .name = "create-only (link+unlink, named)", .dirs = here,
	  .known = target_only, .catches = PUBLISHES,
	  .run = run_create_only_link, .check = check_new },
	{ .name = "replace, FSAFE_NO_SYNC (atomic only)", .dirs = here,
	  .known = target_only, .commit_before_cut = true,
	  .setup_old = old_target, .run = run_nosync,
	  .check = check_nosync },
	{ .name = "create-only onto OLD", .dirs = here, .known = target_only,
	  .setup_old = old_target, .run = run_create_only,
	  .check = check_untouched },
	{ .name = "managed writer (3 chunks, O_TMPFILE)", .dirs = here,
	  .known = target_only, .catches = PUBLISHES,
	  .setup_old = old_target, .run = run_managed,
	  .check = check_managed },
	{ .name = "batch of two (io_uring syncs)", .dirs = here,
	  .known = batch_known, .catches = PUBLISHES,
	  .setup_old = old_target, .run = run_batch, .check = check_batch },
	{ .name = "batch of two (thread-pool syncs)", .dirs = here,
	  .known = batch_known, .catches = PUBLISHES,
	  .setup_old = old_target, .run = run_batch_pool,
	  .check = check_batch },
	{ .name = "batch of two (one syncfs)", .dirs = here,
	  .known = batch_known, .catches = PUBLISHES,
	  .setup_old = old_target, .run = run_batch_syncfs,
	  .check = check_batch },
	{ .name = "batch of two (overlapped windows)", .dirs = here,
	  .known = batch_known, .catches = PUBLISHES,
	  .setup_old = old_target, .run = run_batch_overlapped,
	  .check = check_batch },
	{ .name = "async: two writes, reaped", .dirs = here,
	  .known = batch_known, .catches = PUBLISHES,
	  .setup_old = old_target, .run = run_async, .check = check_async },
	{ .name = "mkdir parents a/b/target", .dirs = mkdir_dirs,
	  .known = mkdir_known, .catches = PUBLISHES, .run = run_mkdir,
	  .check = check_mkdir },
	{ .name = "mkdir a/b/target racing a mkdir of a", .dirs = mkdir_dirs,
	  .known = mkdir_known, .run = run_mkdir_race,
	  .check = check_mkdir },
	{ .name = "sweep after a cut, then replace", .dirs = here,
	  .known = target_only, .commit_before_cut = true, .setup_old = old_leftovers,
	  .run = run_sweep, .check = check_sweep },
	{ .name = "lock acquire, write, release (link)", .dirs = here,
	  .known = lock_known, .leftover = lock_private,
	  .setup_old = old_target, .run = run_lock, .recover = recover_lock,
	  .check = check_lock },
	{ .name = "lock acquire, write, release (kernel)", .dirs = here,
	  .known = lock_known, .leftover = lock_private,
	  .setup_old = old_target, .run = run_lock_kernel,
	  .recover = recover_lock_kernel, .check = check_lock },
	{ .name = "symbolic link replace (fsafe_symlinkat)", .dirs = here,
	  .known = link_known, .catches = FSAFE__BREAK_DIR_SYNC,
	  .setup_old = old_link, .run = run_symlink, .check = check_symlink },
	{ .name = "stage name collides with a leftover", .dirs = here,
	  .known = target_only, .catches = FSAFE__BREAK_EXCL,
	  .setup_old = old_collision, .run = run_collision,
	  .check = check_collision },
};
const size_t pw_core_nworkloads =
	sizeof(pw_core_workloads) / sizeof(pw_core_workloads[0]);
