/*
 * The swap race: one thread keeps exchanging a directory inside the root
 * with a symbolic link that points outside (renameat2 RENAME_EXCHANGE, so
 * the name is always one or the other), while this thread writes through
 * that name ITERATIONS times. Nothing may ever appear outside (picture and
 * inotify watch of the root's parent), every call must either succeed
 * inside or fail with one of the errors a swapped path explains, and the
 * files found inside must match the successes one for one.
 *
 * The link is "../outside": a resolver that followed it would write to
 * the real outside directory. Inside the root there is also an "outside"
 * directory, where the in-root policy legitimately lands such writes.
 * Half the paths go through ".." ("d/../d/fN") to make openat2 retry on
 * EAGAIN and the walk check the parent it comes back to.
 *
 * The second race swaps the last component instead: a file "f" with a
 * link "../sentinel", under fsafe_root_open_read. A read must return the
 * file's bytes (or, in-root, the decoy "sentinel" inside the root), or
 * fail; never the real sentinel, and never an fd outside the root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "snap.h"
#include "testutil.h"

#define ITERATIONS 10000

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

struct swapper {
	int rootfd;
	const char *a, *b;
	atomic_bool stop;
	long swaps, failed;
};

static void *swap_loop(void *arg)
{
	struct swapper *s = arg;

	while (!atomic_load(&s->stop)) {
		if (syscall(SYS_renameat2, s->rootfd, s->a, s->rootfd, s->b,
		            RENAME_EXCHANGE) == 0)
			s->swaps++;
		else
			s->failed++;
	}
	return NULL;
}

/* Errors a path that changes under the call explains. */
static bool explained(int r)
{
	return r == -ELOOP || r == -ENOENT || r == -ENOTDIR || r == -EAGAIN ||
	       r == -EXDEV;
}

static int nfiles, nstaging;

static int count_one(const char *p, const struct stat *st, int flag,
                     struct FTW *f)
{
	(void)st;
	if (flag == FTW_F) {
		nfiles++;
		nstaging += fsafe_is_staging_name(p + f->base);
	}
	return 0;
}

/* Regular files under `dir`, and staging files among them. */
static void count_files(const char *dir, int *files, int *staging)
{
	nfiles = nstaging = 0;
	nftw(dir, count_one, 16, FTW_PHYS);
	*files = nfiles;
	*staging = nstaging;
}

static void race(unsigned flags, const char *label)
{
	char *s = tu_mkscratch(), root[PATH_MAX], path[PATH_MAX + 32];
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	struct swapper sw = { .a = "d", .b = "s" };
	long ok = 0, errs[5] = { 0 };
	const int codes[5] = { ELOOP, ENOENT, ENOTDIR, EAGAIN, EXDEV };
	fsafe_root *r;
	pthread_t t;

	snprintf(root, sizeof(root), "%s/root", s);
	snprintf(path, sizeof(path), "%s/outside", s);
	assert_int_equal(mkdir(root, 0755), 0);
	assert_int_equal(mkdir(path, 0755), 0);
	tu_put(path, "victim", "outside", 7);
	tu_put(s, "sentinel", "sentinel", 8);
	snprintf(path, sizeof(path), "%s/d", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/outside", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/s", root);
	assert_int_equal(symlink("../outside", path), 0);

	char *before = snap_take(s, "root");
	int watch = snap_watch(s, "root");
	assert_true(watch >= 0);
	struct fsafe_error d = { 0 };
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;
	ro.flags = flags;
	ro.error = &d;
	assert_int_equal(fsafe_root_open(AT_FDCWD, root, &ro, &r), 0);
	sw.rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	o.flags = FSAFE_NO_SYNC;
	assert_int_equal(pthread_create(&t, NULL, swap_loop, &sw), 0);

	for (int i = 0; i < ITERATIONS; i++) {
		snprintf(path, sizeof(path), i % 2 ? "d/../d/f%d" : "d/f%d", i);
		int rc = fsafe_root_write_file(r, path, "inside", 6, &o);
		if (rc == 0) {
			ok++;
			continue;
		}
		if (!explained(rc))
			fail_msg("%s: write %s: %d %s (step %s)", label, path, rc,
			         fsafe_strerror(rc), d.step ? d.step : "");
		for (int k = 0; k < 5; k++)
			errs[k] += rc == -codes[k];
	}
	atomic_store(&sw.stop, true);
	pthread_join(t, NULL);
	close(sw.rootfd);
	fsafe_root_close(r);

	char *after = snap_take(s, "root"), what[256];
	if (strcmp(before, after) != 0)
		fail_msg("%s: outside changed:\n%s---\n%s", label, before, after);
	if (snap_events(watch, "root", what, sizeof(what)) > 0)
		fail_msg("%s: activity outside the root: %s", label, what);
	assert_true(tu_equals(s, "sentinel", "sentinel", 8));

	int files = 0, staging = 0, via_link = 0, unused;
	count_files(root, &files, &staging);
	snprintf(path, sizeof(path), "%s/outside", root);
	count_files(path, &via_link, &unused);
	print_message("%s: %d writes: %ld inside, %ld ELOOP, %ld ENOENT, "
	              "%ld ENOTDIR, %ld EAGAIN, %ld EXDEV; %ld swaps; "
	              "%d files inside (%d through the link), %d staging "
	              "left, nothing outside\n",
	              label, ITERATIONS, ok, errs[0], errs[1], errs[2], errs[3],
	              errs[4], sw.swaps, files, via_link, staging);
	/* The swapped-in link was met: refused, or followed inside. */
	if (flags & FSAFE_ROOT_IN_ROOT_SYMLINKS)
		assert_true(via_link > 0);
	else
		assert_true(errs[0] > 0);
	assert_int_equal(files, ok);
	assert_int_equal(staging, 0);
	assert_true(sw.swaps > 0);
	snap_unwatch(watch);
	free(before);
	free(after);
	tu_rmtree(s);
	free(s);
}

#define READS 5000

/* The fd must name a file beneath `root`, and hold `a` or `b`; 1 for
   `b` (when it differs). */
static int check_read(int fd, const char *root, const char *a, const char *b)
{
	char link[64], where[PATH_MAX], buf[64];
	size_t n = strlen(root);

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, where, sizeof(where) - 1);
	assert_true(k > 0);
	where[k] = '\0';
	if (strncmp(where, root, n) != 0 || where[n] != '/')
		fail_msg("read an fd outside the root: %s", where);
	k = read(fd, buf, sizeof(buf) - 1);
	assert_true(k >= 0);
	buf[k] = '\0';
	if (strcmp(buf, a) != 0 && strcmp(buf, b) != 0)
		fail_msg("read '%s' through %s", buf, where);
	return strcmp(buf, a) != 0;
}

static void read_race(unsigned flags, const char *label)
{
	char *s = tu_mkscratch(), root[PATH_MAX], real[PATH_MAX], p[PATH_MAX + 16];
	struct swapper sw = { .a = "f", .b = "s" };
	long ok = 0, loop = 0, decoy = 0;
	fsafe_root *r;
	pthread_t t;

	snprintf(root, sizeof(root), "%s/root", s);
	assert_int_equal(mkdir(root, 0755), 0);
	tu_put(s, "sentinel", "SENTINEL", 8);
	tu_put(root, "f", "inside", 6);
	tu_put(root, "sentinel", "decoy", 5);
	snprintf(p, sizeof(p), "%s/s", root);
	assert_int_equal(symlink("../sentinel", p), 0);
	assert_non_null(realpath(root, real));

	char *before = snap_take(s, "root");
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;
	ro.flags = flags;
	assert_int_equal(fsafe_root_open(AT_FDCWD, root, &ro, &r), 0);
	sw.rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(pthread_create(&t, NULL, swap_loop, &sw), 0);
	for (int i = 0; i < READS; i++) {
		int fd = fsafe_root_open_read(r, "f");
		if (fd >= 0) {
			decoy += check_read(fd, real, "inside",
			           (flags & FSAFE_ROOT_IN_ROOT_SYMLINKS) ? "decoy"
			                                                : "inside");
			close(fd);
			ok++;
		} else if (fd == -ELOOP) {
			loop++;
		} else {
			fail_msg("%s: read: %d %s", label, fd, fsafe_strerror(fd));
		}
	}
	atomic_store(&sw.stop, true);
	pthread_join(t, NULL);
	close(sw.rootfd);
	fsafe_root_close(r);
	char *after = snap_take(s, "root");
	assert_string_equal(before, after);
	print_message("%s: %d reads of a swapped last component: %ld read "
	              "inside (%ld through the link), %ld ELOOP; %ld swaps\n",
	              label, READS, ok, decoy, loop, sw.swaps);
	assert_true(sw.swaps > 0);
	/* The swapped-in link was met: refused, or followed inside. */
	assert_true((flags & FSAFE_ROOT_IN_ROOT_SYMLINKS) ? decoy > 0 : loop > 0);
	free(before);
	free(after);
	tu_rmtree(s);
	free(s);
}

static void reads_last_component(void **state)
{
	(void)state;
	read_race(0, "openat2/strict");
	read_race(FSAFE_ROOT_IN_ROOT_SYMLINKS, "openat2/in-root");
	read_race(FSAFE_ROOT_NO_OPENAT2, "walk/strict");
	read_race(FSAFE_ROOT_NO_OPENAT2 | FSAFE_ROOT_IN_ROOT_SYMLINKS,
	          "walk/in-root");
}

static void openat2_strict(void **state)
{
	(void)state;
	race(0, "openat2/strict");
}

static void openat2_in_root(void **state)
{
	(void)state;
	race(FSAFE_ROOT_IN_ROOT_SYMLINKS, "openat2/in-root");
}

static void walk_strict(void **state)
{
	(void)state;
	race(FSAFE_ROOT_NO_OPENAT2, "walk/strict");
}

static void walk_in_root(void **state)
{
	(void)state;
	race(FSAFE_ROOT_NO_OPENAT2 | FSAFE_ROOT_IN_ROOT_SYMLINKS,
	     "walk/in-root");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(openat2_strict),
		cmocka_unit_test(openat2_in_root),
		cmocka_unit_test(walk_strict),
		cmocka_unit_test(walk_in_root),
		cmocka_unit_test(reads_last_component),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
