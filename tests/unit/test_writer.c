/* Behaviour of the atomic write and the managed writer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "testutil.h"

/* Every behaviour runs with and without O_TMPFILE allowed. One-shot writes
   stage under a name either way; managed writers use O_TMPFILE unless told
   not to (staging_follows_the_kind_of_write pins both). */
static const unsigned staging_modes[] = { 0, FSAFE_NO_TMPFILE };

#define fx tu_fx

static int setup(void **state)
{
	umask(022);
	return tu_fx_setup(state);
}

#define teardown tu_fx_teardown

/* After every call: no leftovers, no leaked descriptors. */
static void assert_clean(struct fx *f)
{
	assert_int_equal(tu_count_staging(f->dir), 0);
	assert_int_equal(fault_open_fds(), f->fds_before);
}

static int put(struct fx *f, const char *path, const char *s, unsigned flags)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	o.flags = flags;
	return fsafe_write_fileat(f->dirfd, path, s, strlen(s), &o);
}

static mode_t mode_of(struct fx *f, const char *name)
{
	struct stat st;
	assert_int_equal(fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
	return st.st_mode;
}

static void creates_and_replaces(void **state)
{
	struct fx *f = *state;
	for (size_t i = 0; i < 2; i++) {
		unsigned m = staging_modes[i];
		assert_int_equal(put(f, "t", "first", m), 0);
		assert_true(tu_equals(f->dir, "t", "first", 5));
		assert_int_equal(put(f, "t", "second, longer", m), 0);
		assert_true(tu_equals(f->dir, "t", "second, longer", 14));
		assert_int_equal(put(f, "t", "", m), 0);
		assert_true(tu_equals(f->dir, "t", "", 0));
		assert_int_equal(tu_count_entries(f->dir), 1);
		assert_clean(f);
	}
}

static void binary_content_round_trips(void **state)
{
	struct fx *f = *state;
	size_t len = 3 * 1024 * 1024 + 17;
	unsigned char *buf = malloc(len);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 131 + (i >> 9));
	buf[0] = 0;
	assert_int_equal(fsafe_write_fileat(f->dirfd, "bin", buf, len, NULL), 0);
	assert_true(tu_equals(f->dir, "bin", buf, len));
	free(buf);
	assert_clean(f);
}

static void new_file_mode_applies_umask(void **state)
{
	struct fx *f = *state;
	for (size_t i = 0; i < 2; i++) {
		char name[16];
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		o.flags = staging_modes[i];
		snprintf(name, sizeof(name), "d%zu", i);
		assert_int_equal(fsafe_write_fileat(f->dirfd, name, "x", 1, &o), 0);
		assert_int_equal(mode_of(f, name) & 07777, 0644);
		o.mode = 0600;
		snprintf(name, sizeof(name), "p%zu", i);
		assert_int_equal(fsafe_write_fileat(f->dirfd, name, "x", 1, &o), 0);
		assert_int_equal(mode_of(f, name) & 07777, 0600);
		o.mode = 0757; /* umask 022 still applies to a new file */
		snprintf(name, sizeof(name), "u%zu", i);
		assert_int_equal(fsafe_write_fileat(f->dirfd, name, "x", 1, &o), 0);
		assert_int_equal(mode_of(f, name) & 07777, 0755);
	}
	assert_clean(f);
}

static void existing_target_keeps_mode_and_owner(void **state)
{
	struct fx *f = *state;
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(put(f, "keep", "old", staging_modes[i]), 0);
		assert_int_equal(fchmodat(f->dirfd, "keep", 0640, 0), 0);
		bool root = geteuid() == 0;
		if (root)
			assert_int_equal(fchownat(f->dirfd, "keep", 1234, 4321, 0), 0);
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		o.flags = staging_modes[i];
		o.mode = 0600; /* only for a new file: ignored here */
		assert_int_equal(fsafe_write_fileat(f->dirfd, "keep", "new", 3, &o), 0);
		struct stat st;
		assert_int_equal(fstatat(f->dirfd, "keep", &st, 0), 0);
		assert_int_equal(st.st_mode & 07777, 0640);
		if (root) {
			assert_int_equal(st.st_uid, 1234);
			assert_int_equal(st.st_gid, 4321);
		}
		assert_true(tu_equals(f->dir, "keep", "new", 3));
	}
	assert_clean(f);
}

static void create_only(void **state)
{
	struct fx *f = *state;
	static const unsigned variants[] = {
		0, FSAFE_NO_TMPFILE, FSAFE_NO_RENAMEAT2,
		FSAFE_NO_TMPFILE | FSAFE_NO_RENAMEAT2,
	};
	for (size_t i = 0; i < 4; i++) {
		unsigned m = variants[i] | FSAFE_CREATE_ONLY;
		char name[16];
		snprintf(name, sizeof(name), "c%zu", i);
		assert_int_equal(put(f, name, "one", m), 0);
		assert_int_equal(put(f, name, "two", m), -EEXIST);
		assert_true(tu_equals(f->dir, name, "one", 3));
		/* A symlink or dangling link also counts as existing. */
		assert_int_equal(symlinkat("nowhere", f->dirfd, "dangling"), 0);
		assert_int_equal(put(f, "dangling", "x", m | FSAFE_NO_FOLLOW),
		                 -EEXIST);
		unlinkat(f->dirfd, "dangling", 0);
	}
	assert_clean(f);
}

static void create_only_race_is_decided_at_publish(void **state)
{
	struct fx *f = *state;
	static const unsigned variants[] = {
		0, FSAFE_NO_TMPFILE, FSAFE_NO_RENAMEAT2,
		FSAFE_NO_TMPFILE | FSAFE_NO_RENAMEAT2,
	};
	for (size_t i = 0; i < 4; i++) {
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		fsafe_writer *w;
		o.flags = variants[i] | FSAFE_CREATE_ONLY;
		assert_int_equal(fsafe_writer_open(f->dirfd, "race", &o, &w), 0);
		assert_int_equal(fsafe_writer_write(w, "loser", 5), 0);
		/* Another process creates the target meanwhile. */
		tu_put(f->dir, "race", "winner", 6);
		assert_int_equal(fsafe_writer_commit(w), -EEXIST);
		assert_true(tu_equals(f->dir, "race", "winner", 6));
		unlinkat(f->dirfd, "race", 0);
	}
	assert_clean(f);
}

/* A create-only write that finds its target says so in its step, whether
   it finds it at the start or at publication. */
static void create_only_says_exists(void **state)
{
	struct fx *f = *state;
	struct fsafe_error e = { 0 };
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	fsafe_writer *w;

	o.flags = FSAFE_CREATE_ONLY;
	o.error = &e;
	tu_put(f->dir, "there", "old", 3);
	assert_int_equal(fsafe_write_fileat(f->dirfd, "there", "n", 1, &o),
	                 -EEXIST);
	assert_int_equal(e.code, -EEXIST);
	assert_int_equal(e.sys_errno, EEXIST);
	assert_string_equal(e.step, "exists (create-only)");

	memset(&e, 0, sizeof(e));
	assert_int_equal(fsafe_writer_open(f->dirfd, "late", &o, &w), 0);
	tu_put(f->dir, "late", "winner", 6);
	assert_int_equal(fsafe_writer_commit(w), -EEXIST);
	assert_string_equal(e.step, "exists (create-only)");
	unlinkat(f->dirfd, "there", 0);
	unlinkat(f->dirfd, "late", 0);
	assert_clean(f);
}

/* A NULL buffer with a length is bad data (-EINVAL), at every door;
   with a length of 0 it is an empty file. */
static void null_buffer_is_einval(void **state)
{
	struct fx *f = *state;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_error e = { 0 };
	fsafe_batch *b;
	fsafe_async *a;

	o.error = &e;
	assert_int_equal(fsafe_write_fileat(f->dirfd, "n", NULL, 3, &o),
	                 -EINVAL);
	assert_string_equal(e.step, "write (NULL buffer)");
	assert_int_equal(fsafe_write_fileat(f->dirfd, "n", NULL, 0, NULL), 0);
	assert_true(tu_equals(f->dir, "n", "", 0));
	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	assert_int_equal(fsafe_batch_add(b, f->dirfd, "m", NULL, 3, NULL),
	                 -EINVAL);
	fsafe_batch_free(b);
	assert_int_equal(fsafe_async_new(NULL, &a), 0);
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "m", NULL, 3, NULL,
	                                    NULL, NULL),
	                 -EINVAL);
	fsafe_async_free(a);
	unlinkat(f->dirfd, "n", 0);
	assert_clean(f);
}

static void mkdir_creates_parents(void **state)
{
	struct fx *f = *state;
	assert_int_equal(put(f, "a/b/c/file", "x", 0), -ENOENT);
	assert_int_equal(tu_count_entries(f->dir), 0);
	assert_int_equal(put(f, "a/b/c/file", "deep", FSAFE_MKDIR), 0);
	assert_true(tu_equals(f->dir, "a/b/c/file", "deep", 4));
	/* Existing parents are fine, and so are "." components. */
	assert_int_equal(put(f, "a/./b/file2", "y", FSAFE_MKDIR), 0);
	assert_true(tu_equals(f->dir, "a/b/file2", "y", 1));
	/* A file where a directory should be. */
	assert_int_equal(put(f, "a/b/c/file/x", "z", FSAFE_MKDIR), -ENOTDIR);
	assert_clean(f);
}

static void follows_symlinks_by_default(void **state)
{
	struct fx *f = *state;
	assert_int_equal(mkdirat(f->dirfd, "real", 0755), 0);
	assert_int_equal(put(f, "real/conf", "old", 0), 0);
	assert_int_equal(symlinkat("real/conf", f->dirfd, "link"), 0);
	assert_int_equal(symlinkat("link", f->dirfd, "link2"), 0);

	assert_int_equal(put(f, "link2", "new", 0), 0);
	assert_true(S_ISLNK(mode_of(f, "link2")));
	assert_true(S_ISLNK(mode_of(f, "link")));
	assert_true(tu_equals(f->dir, "real/conf", "new", 3));
	assert_int_equal(tu_count_staging(f->dir), 0);
	assert_int_equal(tu_count_entries(f->dir), 3);

	/* A dangling link gets the file it names. */
	assert_int_equal(symlinkat("real/fresh", f->dirfd, "dangling"), 0);
	assert_int_equal(put(f, "dangling", "made", 0), 0);
	assert_true(tu_equals(f->dir, "real/fresh", "made", 4));

	/* An absolute link. */
	char abs[PATH_MAX];
	snprintf(abs, sizeof(abs), "%s/real/conf", f->dir);
	assert_int_equal(symlinkat(abs, f->dirfd, "abslink"), 0);
	assert_int_equal(put(f, "abslink", "via abs", 0), 0);
	assert_true(tu_equals(f->dir, "real/conf", "via abs", 7));
	assert_clean(f);
}

static void no_follow_replaces_the_link(void **state)
{
	struct fx *f = *state;
	assert_int_equal(put(f, "target", "untouched", 0), 0);
	assert_int_equal(symlinkat("target", f->dirfd, "link"), 0);
	assert_int_equal(put(f, "link", "replaced", FSAFE_NO_FOLLOW), 0);
	assert_true(S_ISREG(mode_of(f, "link")));
	assert_true(tu_equals(f->dir, "link", "replaced", 8));
	assert_true(tu_equals(f->dir, "target", "untouched", 9));
	assert_clean(f);
}

static void symlink_loop_is_refused(void **state)
{
	struct fx *f = *state;
	assert_int_equal(symlinkat("b", f->dirfd, "a"), 0);
	assert_int_equal(symlinkat("a", f->dirfd, "b"), 0);
	assert_int_equal(put(f, "a", "x", 0), -ELOOP);
	assert_true(S_ISLNK(mode_of(f, "a")));
	assert_clean(f);
}

static void bad_paths_get_clear_errors(void **state)
{
	struct fx *f = *state;
	char longname[NAME_MAX + 2], longpath[PATH_MAX + 10];

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	for (size_t i = 100; i < sizeof(longpath) - 1; i += 100)
		longpath[i] = '/';

	assert_int_equal(put(f, "", "x", 0), -EINVAL);
	assert_int_equal(put(f, "dir/", "x", 0), -EINVAL);
	assert_int_equal(put(f, ".", "x", 0), -EINVAL);
	assert_int_equal(put(f, "..", "x", 0), -EINVAL);
	assert_int_equal(put(f, "a/..", "x", 0), -EINVAL);
	assert_int_equal(put(f, longname, "x", 0), -ENAMETOOLONG);
	assert_int_equal(put(f, longpath, "x", 0), -ENAMETOOLONG);
	assert_int_equal(fsafe_write_fileat(f->dirfd, NULL, "x", 1, NULL), -EINVAL);
	assert_int_equal(mkdirat(f->dirfd, "isdir", 0755), 0);
	assert_int_equal(put(f, "isdir", "x", 0), -EISDIR);
	assert_int_equal(tu_count_entries(f->dir), 1);

	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	o.mode = 010000; /* not a permission bit */
	assert_int_equal(fsafe_write_fileat(f->dirfd, "m", "x", 1, &o), -EINVAL);
	assert_clean(f);
}

static void error_detail_names_the_step(void **state)
{
	struct fx *f = *state;
	struct fsafe_error e = { 0 };
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	o.error = &e;
	assert_int_equal(fsafe_write_fileat(f->dirfd, "no/such/dir/x", "x", 1, &o),
	                 -ENOENT);
	assert_int_equal(e.code, -ENOENT);
	assert_int_equal(e.sys_errno, ENOENT);
	assert_string_equal(e.step, "open directory");
	assert_false(e.published);

	assert_string_equal(fsafe_strerror(-ENOSPC), "No space left on device");
	assert_non_null(strstr(fsafe_strerror(FSAFE_ENOTDURABLE), "durab"));
	assert_clean(f);
}

static void options_layouts(void **state)
{
	struct fx *f = *state;
	/* size 0 means the first published layout. */
	struct fsafe_write_opts o = { .size = 0, .flags = FSAFE_CREATE_ONLY };
	assert_int_equal(fsafe_write_fileat(f->dirfd, "l", "1", 1, &o), 0);
	assert_int_equal(fsafe_write_fileat(f->dirfd, "l", "2", 1, &o), -EEXIST);
	/* A layout too small to hold the known fields is refused. */
	o.size = 4;
	assert_int_equal(fsafe_write_fileat(f->dirfd, "l2", "1", 1, &o), -EINVAL);
	assert_int_equal(fsafe_write_fileat(f->dirfd, "l3", "1", 1, NULL), 0);
	assert_clean(f);
}

/* The managed writer: chunks, the raw fd, commit and abort. */
static void managed_writer_streams(void **state)
{
	struct fx *f = *state;
	for (size_t i = 0; i < 2; i++) {
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		fsafe_writer *w;
		o.flags = staging_modes[i];
		assert_int_equal(put(f, "stream", "old", 0), 0);
		assert_int_equal(fsafe_writer_open(f->dirfd, "stream", &o, &w), 0);
		assert_int_equal(fsafe_writer_write(w, "abc", 3), 0);
		int fd = fsafe_writer_fd(w);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, "def", 3), 3); /* sendfile-style users */
		assert_int_equal(fsafe_writer_write(w, "ghi", 3), 0);
		/* Nothing visible until commit. */
		assert_true(tu_equals(f->dir, "stream", "old", 3));
		assert_int_equal(fsafe_writer_commit(w), 0);
		assert_true(tu_equals(f->dir, "stream", "abcdefghi", 9));
	}
	assert_clean(f);
}

static void abort_leaves_nothing(void **state)
{
	struct fx *f = *state;
	for (size_t i = 0; i < 2; i++) {
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		fsafe_writer *w;
		o.flags = staging_modes[i];
		assert_int_equal(put(f, "keep", "precious", 0), 0);
		assert_int_equal(fsafe_writer_open(f->dirfd, "keep", &o, &w), 0);
		assert_int_equal(fsafe_writer_write(w, "garbage", 7), 0);
		/* The named stage exists (and is a staging name) while open. */
		assert_int_equal(tu_count_staging(f->dir),
		                 staging_modes[i] ? 1 : 0);
		fsafe_writer_abort(w);
		assert_true(tu_equals(f->dir, "keep", "precious", 8));
		assert_int_equal(tu_count_entries(f->dir), 1);
	}
	fsafe_writer_abort(NULL);
	assert_clean(f);
}

/* A live writer's stage is locked so no sweep can take it. */
static void live_stage_is_locked(void **state)
{
	struct fx *f = *state;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	fsafe_writer *w;
	o.flags = FSAFE_NO_TMPFILE;
	assert_int_equal(fsafe_writer_open(f->dirfd, "t", &o, &w), 0);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fsafe_writer_fd(w));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET };
	assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), -1);
	assert_true(errno == EAGAIN || errno == EACCES);
	close(fd);
	fsafe_writer_abort(w);
	assert_clean(f);
}

/*
 * A one-shot write of a plain name works in the caller's directory fd
 * itself: no descriptor of its own for the directory (one openat, the
 * stage's), the caller's fd left open whatever happens, and an O_PATH fd,
 * which cannot be synced, still gets its directory synced.
 */
static void one_shot_write_uses_the_callers_directory(void **state)
{
	struct fx *f = *state;

	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(put(f, "plain", "data", 0), 0);
	assert_int_equal(fault_calls_named("openat"), 1);
	assert_int_equal(fault_calls_named("close"), 1);
	fault_remove();
	assert_true(tu_equals(f->dir, "plain", "data", 4));

	assert_int_equal(put(f, "plain", "again", FSAFE_CREATE_ONLY), -EEXIST);
	char longname[NAME_MAX + 2];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[NAME_MAX + 1] = '\0';
	assert_int_equal(put(f, longname, "x", 0), -ENAMETOOLONG);
	assert_int_equal(put(f, "..", "x", 0), -EINVAL);
	assert_true(fcntl(f->dirfd, F_GETFD) >= 0);

	int p = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(p >= 0);
	for (size_t m = 0; m < 2; m++) {
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		o.flags = staging_modes[m];
		fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
		assert_int_equal(fsafe_write_fileat(p, "viapath", "v", 1, &o), 0);
		/* fsync of the O_PATH fd fails; the directory is synced
		   through a descriptor of our own. */
		assert_int_equal(fault_calls_named("fsync"), 2);
		fault_remove();
		assert_true(tu_equals(f->dir, "viapath", "v", 1));
	}
	assert_true(fcntl(p, F_GETFD) >= 0);
	close(p);
	assert_clean(f);
}

static int write_big(struct fx *f, const char *path, const unsigned char *buf,
                     size_t len, struct fsafe_error *err)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	o.error = err;
	return fsafe_write_fileat(f->dirfd, path, buf, len, &o);
}

/*
 * A one-shot write stages under a name (no link step) and allocates the
 * space of a large write first; a managed writer stages with O_TMPFILE
 * (linked before its sync) and allocates nothing, not knowing its length.
 */
static void staging_follows_the_kind_of_write(void **state)
{
	struct fx *f = *state;
	enum { BIG = 1 << 20 };
	unsigned char *big = malloc(BIG);
	fsafe_writer *w;

	assert_non_null(big);
	memset(big, 0xa5, BIG);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(put(f, "small", "data", 0), 0);
	assert_int_equal(fault_calls_named("linkat"), 0);
	assert_int_equal(fault_calls_named("fallocate"), 0);
	fault_remove();

	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(write_big(f, "big", big, BIG, NULL), 0);
	assert_int_equal(fault_calls_named("linkat"), 0);
	assert_int_equal(fault_calls_named("fallocate"), 1);
	fault_remove();
	assert_true(tu_equals(f->dir, "big", big, BIG));

	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_writer_open(f->dirfd, "streamed", NULL, &w), 0);
	assert_int_equal(fsafe_writer_write(w, big, BIG), 0);
	assert_int_equal(fsafe_writer_commit(w), 0);
	assert_int_equal(fault_calls_named("linkat"), 1);
	assert_int_equal(fault_calls_named("fallocate"), 0);
	fault_remove();
	assert_true(tu_equals(f->dir, "streamed", big, BIG));
	free(big);
	assert_clean(f);
}

/*
 * Allocating first is how a full disk shows before any data is copied:
 * that failure is the write's, with the target untouched. A filesystem
 * that cannot allocate ahead is no failure at all.
 */
static void allocation_failures(void **state)
{
	struct fx *f = *state;
	enum { BIG = 256 * 1024 };
	static const struct {
		int err;
		int result;
	} cases[] = {
		{ ENOSPC, -ENOSPC }, { EDQUOT, -EDQUOT }, { EIO, -EIO },
		{ EOPNOTSUPP, 0 },   { ENOSYS, 0 },       { EINVAL, 0 },
	};
	unsigned char *big = malloc(BIG);

	assert_non_null(big);
	memset(big, 0x3c, BIG);
	assert_int_equal(put(f, "t", "old", 0), 0); /* counted as a replace */
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(write_big(f, "t", big, BIG, NULL), 0);
	int at = fault_first_call_named("fallocate");
	fault_remove();
	assert_true(at > 0);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fsafe_error err = { 0 };
		assert_int_equal(put(f, "t", "old", 0), 0);
		fault_install(&(struct fault_plan){ .at = at,
		                                    .kind = FAULT_ERRNO,
		                                    .err = cases[i].err });
		int r = write_big(f, "t", big, BIG, &err);
		assert_true(fault_fired());
		fault_remove();
		assert_int_equal(r, cases[i].result);
		if (r < 0) {
			assert_string_equal(err.step, "allocate");
			assert_false(err.published);
			assert_true(tu_equals(f->dir, "t", "old", 3));
		} else {
			assert_true(tu_equals(f->dir, "t", big, BIG));
		}
		assert_int_equal(tu_count_entries(f->dir), 1);
	}
	free(big);
	assert_clean(f);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(creates_and_replaces),
		T(binary_content_round_trips),
		T(new_file_mode_applies_umask),
		T(existing_target_keeps_mode_and_owner),
		T(create_only),
		T(create_only_race_is_decided_at_publish),
		T(create_only_says_exists),
		T(null_buffer_is_einval),
		T(mkdir_creates_parents),
		T(follows_symlinks_by_default),
		T(no_follow_replaces_the_link),
		T(symlink_loop_is_refused),
		T(bad_paths_get_clear_errors),
		T(error_detail_names_the_step),
		T(options_layouts),
		T(managed_writer_streams),
		T(abort_leaves_nothing),
		T(live_stage_is_locked),
		T(one_shot_write_uses_the_callers_directory),
		T(staging_follows_the_kind_of_write),
		T(allocation_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
