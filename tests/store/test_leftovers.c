/*
 * The regression behind the staging contract: a directory of records must
 * not be wedged by what crashed writers and other people leave in it.
 * Planted: staging files of writers SIGKILLed mid-write (named stages, so
 * they exist), the lock file of a holder killed with it, a stale lock
 * staging file, a foreign file, subdirectories and symlinks, some under
 * record-like names. Every operation must keep working and a listing must
 * return exactly the records. Then: opening sweeps stages older than its
 * age and never a live writer's.
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
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sys.h"
#include "storeutil.h"
#include "testutil.h"

/* Dies at the data sync: the stage is written, named and unpublished. */
static int die(int fd)
{
	(void)fd;
	raise(SIGKILL);
	return -1;
}

/* The same where the sync comes with the write (RWF_DSYNC): written
   first, then dead. */
static ssize_t die_after_write(int fd, const struct iovec *iov, int n,
                               off_t off, int flags)
{
	fsafe__sys_default.pwritev2(fd, iov, n, off, flags);
	raise(SIGKILL);
	return -1;
}

/* A child puts `key` through a named stage and is SIGKILLed at its data
   sync, holding the store's lock: the stage and the lock stay behind. */
static void killed_put(const char *dir, const char *key)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		static struct fsafe_sys table;
		fsafe_store *s = su_open(dir, 0, FSAFE_NO_TMPFILE);
		table = fsafe__sys_default;
		table.fdatasync = die;
		table.pwritev2 = die_after_write;
		fsafe__sys_swap(&table);
		fsafe_store_put(s, key, strlen(key), "lost", 4, NULL);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static void plant(const char *dir, const char *outside)
{
	char p[8192];

	tu_put(dir, "README", "not a record", 12);
	tu_put(dir, ".lock-0b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.tmp", "pid 1",
	       5);
	snprintf(p, sizeof(p), "%s/sub", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/k-7a", dir); /* key "z" */
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/link", dir);
	assert_int_equal(symlink("k-61", p), 0);
	snprintf(p, sizeof(p), "%s/k-79", dir); /* key "y" */
	assert_int_equal(symlink(outside, p), 0);
}

static void leftovers_wedge_nothing(void **state)
{
	(void)state;
	char *scratch = tu_mkscratch();
	char dir[4200], outside[4200], strays[4096];
	struct su_listing l;

	snprintf(dir, sizeof(dir), "%s/store", scratch);
	snprintf(outside, sizeof(outside), "%s/outside", scratch);
	tu_put(scratch, "outside", "keep me", 7);
	fsafe_store *s = su_open(dir, 0, 0);
	su_put(s, "a", "A", 1);
	su_put(s, "b", "B", 1);
	su_put(s, "c", "C", 1);
	killed_put(dir, "a");
	killed_put(dir, "new");
	killed_put(dir, "b");
	assert_int_equal(tu_count_staging(dir), 3);
	struct stat st;
	char lockp[4300];
	snprintf(lockp, sizeof(lockp), "%s/.lock/lock", dir);
	assert_int_equal(lstat(lockp, &st), 0); /* the dead holder's lock */
	/* A stale lock staging file, where the lock makes them. */
	char lockdir[4300];
	snprintf(lockdir, sizeof(lockdir), "%s/.lock", dir);
	tu_put(lockdir, ".lock-1b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.tmp", "",
	       0);
	plant(dir, outside);

	/* A fresh handle (its sweep spares fresh stages) and the old one. */
	fsafe_store *t = su_open(dir, 0, 0);
	assert_int_equal(fsafe_store_swept(t), 0);
	assert_int_equal(tu_count_staging(dir), 3);
	for (int i = 0; i < 2; i++) {
		fsafe_store *h = i ? t : s;
		assert_int_equal(su_content(h, "a", "A", 1, NULL, 0), SU_OLD);
		assert_int_equal(su_content(h, "new", NULL, 0, NULL, 0),
		                 SU_ABSENT);
		assert_int_equal(su_content(h, "z", NULL, 0, NULL, 0), SU_BAD);
		assert_int_equal(su_content(h, "y", NULL, 0, NULL, 0), SU_BAD);
		assert_int_equal(su_list(h, 0, &l), 0);
		assert_string_equal(l.keys, "a,b,c");
		assert_int_equal(l.skipped[FSAFE_STORE_SKIP_UNKNOWN], 1);
		assert_int_equal(l.skipped[FSAFE_STORE_SKIP_DIR], 2);
		assert_int_equal(l.skipped[FSAFE_STORE_SKIP_SYMLINK], 2);
		assert_int_equal(l.skipped[FSAFE_STORE_SKIP_BAD_RECORD], 0);
		assert_int_equal(su_list(h, FSAFE_STORE_LIST_NAMES_ONLY, &l), 0);
		assert_string_equal(l.keys, "a,b,c");
	}
	/* Every change works: the dead holder's lock is broken. */
	su_put(t, "a", "A2", 2);
	assert_int_equal(fsafe_store_delete(s, "b", 1), 0);
	uint64_t v;
	assert_int_equal(fsafe_store_put_if(s, "d", 1, "D", 1, 0, &v), 0);
	assert_int_equal(v, 1);
	/* A symlink under a key's name is replaced, never followed out. */
	su_put(s, "y", "Y", 1);
	assert_true(tu_equals(scratch, "outside", "keep me", 7));
	assert_int_equal(su_content(t, "y", "Y", 1, NULL, 0), SU_OLD);
	/* A directory under a key's name (no rename replaces it) goes into
	   quarantine/, whole, and the put publishes the key. */
	assert_int_equal(fsafe_store_put(s, "z", 1, "Z", 1, NULL), 0);
	assert_int_equal(su_content(t, "z", "Z", 1, NULL, 0), SU_OLD);
	char q[4400];
	snprintf(q, sizeof(q), "%s/quarantine/k-7a", dir);
	assert_int_equal(lstat(q, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(su_list(s, 0, &l), 0);
	assert_string_equal(l.keys, "a,c,d,y,z");
	assert_int_equal(su_content(s, "a", "A2", 2, NULL, 0), SU_OLD);
	/* Nothing the store did left a stray: only the plants and the three
	   stages remain besides records. */
	const char *plants[] = { "README", "sub", "link", ".lock", "quarantine",
		                 ".lock-0b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.tmp",
		                 NULL };
	/* The lock's directory holds the lock file, which the dead holder's
	   lock was (a kernel lock died with it; the file is never written),
	   and the planted stage of a lock taken through fsafe_lock, which
	   the store's lock never makes (repair removes it). */
	const char *lockfiles[] = {
		"lock", ".lock-1b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.tmp", NULL
	};
	su_strays(lockdir, lockfiles, strays, sizeof(strays));
	assert_string_equal(strays, "");
	assert_int_equal(lstat(lockp, &st), 0);
	assert_int_equal(st.st_size, 0);
	su_strays(dir, plants, strays, sizeof(strays));
	int stages = tu_count_staging(dir);
	assert_int_equal(stages, 3);
	assert_int_equal(fsafe_sweep(AT_FDCWD, dir, 0, 0, NULL, NULL), 3);
	su_strays(dir, plants, strays, sizeof(strays));
	assert_string_equal(strays, "");
	fsafe_store_close(s);
	fsafe_store_close(t);
	tu_rmtree(scratch);
	free(scratch);
}

/* Times `secs` into the past, for futimens / utimensat. */
static void past(struct timespec ts[2], int secs)
{
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= secs;
	ts[1] = ts[0];
}

/* Set a file's times `secs` into the past, by name in dir. */
static void age_back(const char *dir, const char *name, int secs)
{
	struct timespec ts[2];
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	past(ts, secs);
	assert_true(d >= 0);
	assert_int_equal(utimensat(d, name, ts, AT_SYMLINK_NOFOLLOW), 0);
	close(d);
}

/* The same for an open file. */
static void age_back_fd(int fd, int secs)
{
	struct timespec ts[2];

	past(ts, secs);
	assert_int_equal(futimens(fd, ts), 0);
}

/* The open's sweep: stages over an hour old go, fresh ones and a live
   writer's (however old its mtime) stay; FSAFE_STORE_NO_SWEEP keeps all. */
static void open_sweeps_old_stages(void **state)
{
	(void)state;
	char *scratch = tu_mkscratch();
	char dir[4200];
	const char *old = ".fsafe-0123456789abcdef01234567.tmp";
	const char *fresh = ".fsafe-89abcdef0123456789abcdef.tmp";

	snprintf(dir, sizeof(dir), "%s/store", scratch);
	fsafe_store *s = su_open(dir, 0, 0);
	tu_put(dir, old, "x", 1);
	tu_put(dir, fresh, "x", 1);
	age_back(dir, old, 2 * 3600);
	/* A live writer with a named stage, aged too. */
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	fsafe_writer *w;
	wo.flags = FSAFE_NO_TMPFILE;
	char target[4300];
	snprintf(target, sizeof(target), "%s/k-77", dir); /* key "w" */
	assert_int_equal(fsafe_writer_open(AT_FDCWD, target, &wo, &w), 0);
	age_back_fd(fsafe_writer_fd(w), 2 * 3600);
	assert_int_equal(tu_count_staging(dir), 3);

	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *t;
	o.flags = FSAFE_STORE_NO_SWEEP;
	assert_int_equal(fsafe_store_open(AT_FDCWD, dir, &o, &t), 0);
	assert_int_equal(fsafe_store_swept(t), 0);
	fsafe_store_close(t);
	assert_int_equal(tu_count_staging(dir), 3);
	assert_int_equal(fsafe_store_open(AT_FDCWD, dir, NULL, &t), 0);
	assert_int_equal(fsafe_store_swept(t), 1);
	assert_int_equal(tu_count_staging(dir), 2);
	struct stat st;
	char p[4300];
	snprintf(p, sizeof(p), "%s/%s", dir, old);
	assert_int_equal(lstat(p, &st), -1);
	fsafe_store_close(t);
	/* Age 1 ms takes the fresh one, still not the live writer's. */
	o.flags = 0;
	o.sweep_older_than_ms = 1;
	age_back(dir, fresh, 10);
	assert_int_equal(fsafe_store_open(AT_FDCWD, dir, &o, &t), 0);
	assert_int_equal(fsafe_store_swept(t), 1);
	assert_int_equal(tu_count_staging(dir), 1);
	/* The live writer still commits; its record is a foreign file to the
	   store (no header), reported as a bad record for key "w". */
	assert_int_equal(fsafe_writer_write(w, "raw", 3), 0);
	assert_int_equal(fsafe_writer_commit(w), 0);
	assert_int_equal(su_content(t, "w", NULL, 0, NULL, 0), SU_BAD);
	assert_int_equal(tu_count_staging(dir), 0);
	fsafe_store_close(t);
	fsafe_store_close(s);
	tu_rmtree(scratch);
	free(scratch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(leftovers_wedge_nothing),
		cmocka_unit_test(open_sweeps_old_stages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
