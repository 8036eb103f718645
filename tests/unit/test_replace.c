/*
 * A replace keeps what the old file was: its extended attributes and ACLs
 * on every write path, its type (devices, FIFOs and sockets are refused,
 * never replaced), and its links are detected; a conditional replace
 * publishes only over the file its caller read; a symbolic link is
 * replaced atomically.
 *
 * Each test runs on an ext4 and an xfs loop mount of its own (root and a
 * private mount namespace: tmpfs lacks user xattrs in some kernels);
 * without them it says SKIP with the reason.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "fsafe/batch.h"
#include "fsafe/root.h"
#include "testutil.h"

static const char *const fs_types[] = { "ext4", "xfs" };
#define N_FS 2

static char *scratch;
static const char *skip_reason[N_FS];
static char mnt[N_FS][4096];

struct fx {
	int fs;          /* index into fs_types */
	int dirfd;       /* a fresh directory on that filesystem */
	char dir[4096];
	int fds_before;
};

static const char *try_private_mounts(void)
{
	if (geteuid() != 0)
		return "not root";
	if (unshare(CLONE_NEWNS) < 0)
		return "unshare(CLONE_NEWNS) refused";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return "cannot make / private";
	return NULL;
}

/* A 300 MiB sparse image (xfs needs that much), formatted and mounted;
   ext4 with 4 KiB blocks, as it would have on a real disk (a small image
   gets 1 KiB blocks, and room for little more than one attribute). */
static const char *make_fs(int i)
{
	char cmd[16384];

	snprintf(mnt[i], sizeof(mnt[i]), "%s/%s", scratch, fs_types[i]);
	if (mkdir(mnt[i], 0755) < 0)
		return "mkdir of the mount point failed";
	if (snprintf(cmd, sizeof(cmd),
	         "truncate -s 300M %s.img && mkfs.%s -q %s %s.img "
	         ">/dev/null 2>&1 && mount -o loop %s.img %s",
	         mnt[i], fs_types[i], i == 0 ? "-F -b 4096" : "-f", mnt[i], mnt[i],
	         mnt[i]) >= (int)sizeof(cmd))
		return "scratch path too long";
	return system(cmd) == 0 ? NULL : "mkfs or loop mount failed";
}

static int group_setup(void **state)
{
	const char *why;

	(void)state;
	umask(022);
	scratch = tu_mkscratch();
	why = try_private_mounts();
	for (int i = 0; i < N_FS; i++)
		skip_reason[i] = why ? why : make_fs(i);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_FS; i++)
		if (!skip_reason[i])
			umount2(mnt[i], MNT_DETACH);
	tu_rmtree(scratch);
	free(scratch);
	return 0;
}

static int setup(void **state)
{
	static int seq;
	struct fx *f = calloc(1, sizeof(*f));
	const int *fs = *state;

	assert_non_null(f);
	f->fs = *fs;
	f->dirfd = -1;
	*state = f;
	if (skip_reason[f->fs])
		return 0;
	assert_true(snprintf(f->dir, sizeof(f->dir), "%s/t%d", mnt[f->fs],
	                     seq++) < (int)sizeof(f->dir));
	assert_int_equal(mkdir(f->dir, 0755), 0);
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dirfd >= 0);
	f->fds_before = fault_open_fds();
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (f->dirfd >= 0)
		close(f->dirfd);
	free(f);
	return 0;
}

static void skip_without_fs(const struct fx *f)
{
	if (skip_reason[f->fs]) {
		print_message("SKIP: needs root and a %s loop mount (%s)\n",
		              fs_types[f->fs], skip_reason[f->fs]);
		skip();
	}
}

static void assert_clean(const struct fx *f)
{
	assert_int_equal(tu_count_staging(f->dir), 0);
	assert_int_equal(fault_open_fds(), f->fds_before);
}

static int put(const struct fx *f, const char *name, const char *s,
               unsigned flags, struct fsafe_error *e)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.flags = flags;
	o.error = e;
	return fsafe_write_fileat(f->dirfd, name, s, strlen(s), &o);
}

static void run(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/* ------------------------------------------------------------------------ */
/* Extended attributes                                                       */
/* ------------------------------------------------------------------------ */

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every attribute of dir/name, sorted by name, as one comparable blob:
   name, NUL, 4-byte length, value; for each. */
static char *xattrs_of(const struct fx *f, const char *name, size_t *len)
{
	char path[8192], list[65536], *names[512], *out;
	size_t n = 0, used = 0;

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	ssize_t ll = llistxattr(path, list, sizeof(list));
	assert_true(ll >= 0);
	for (ssize_t i = 0; i < ll; i += (ssize_t)strlen(list + i) + 1)
		names[n++] = list + i;
	qsort(names, n, sizeof(names[0]), by_name);
	out = malloc(n * (256 + 4 + 65536) + 1);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		size_t k = strlen(names[i]) + 1;
		memcpy(out + used, names[i], k);
		ssize_t v = lgetxattr(path, names[i], out + used + k + 4, 65536);
		assert_true(v >= 0);
		uint32_t vl = (uint32_t)v;
		memcpy(out + used + k, &vl, 4);
		used += k + 4 + (size_t)v;
	}
	*len = used;
	return out;
}

/* A value with NULs and every byte, longer than the library's stack
   buffer where the filesystem takes it (xfs: 64 KiB; ext4: a block). */
static void set_big(const struct fx *f, const char *name)
{
	char path[8192];
	static unsigned char v[6000];

	for (size_t i = 0; i < sizeof(v); i++)
		v[i] = (unsigned char)(i * 7);
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	if (lsetxattr(path, "user.big", v, sizeof(v), 0) < 0)
		assert_int_equal(lsetxattr(path, "user.big", v, 2000, 0), 0);
}

/* File capabilities (cap_net_raw+ep, VFS_CAP_REVISION_2): a write to the
   file removes them, so they test that the copy follows the content. */
static const unsigned char file_caps[20] = { 0x01, 0, 0, 0x02, 0, 0x20 };

/* A target with user.*, trusted.* and security.capability (as root), a
   POSIX ACL and a big value. */
static void decorate(const struct fx *f, const char *name)
{
	char path[8192];

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	tu_put(f->dir, name, "old", 3);
	assert_int_equal(lsetxattr(path, "user.origin", "x\0y", 3, 0), 0);
	assert_int_equal(lsetxattr(path, "trusted.fsafe", "t", 1, 0), 0);
	assert_int_equal(lsetxattr(path, "security.capability", file_caps,
	                           sizeof(file_caps), 0), 0);
	set_big(f, name);
	run("setfacl -m u:nobody:r,g:nogroup:rw %s", path);
}

enum path_kind { ONE_SHOT, MANAGED, MANAGED_NAMED, BATCH, ASYNC, ROOT,
                 N_PATHS };
static const char *const path_names[] = { "one-shot", "managed",
	"managed, NO_TMPFILE", "batch", "async", "root" };

static int write_by(const struct fx *f, enum path_kind k, const char *name,
                    const char *s)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	size_t len = strlen(s);
	fsafe_writer *w;
	int r;

	switch (k) {
	case ONE_SHOT:
		return fsafe_write_fileat(f->dirfd, name, s, len, &o);
	case MANAGED_NAMED:
		o.flags = FSAFE_NO_TMPFILE;
		/* fall through */
	case MANAGED:
		if ((r = fsafe_writer_open(f->dirfd, name, &o, &w)) < 0)
			return r;
		fsafe_writer_write(w, s, len);
		return fsafe_writer_commit(w);
	case BATCH: {
		fsafe_batch *b;
		assert_int_equal(fsafe_batch_new(NULL, &b), 0);
		assert_int_equal(fsafe_batch_add(b, f->dirfd, name, s, len, &o), 0);
		fsafe_batch_commit(b);
		r = fsafe_batch_result(b, 0);
		fsafe_batch_free(b);
		return r;
	}
	case ASYNC: {
		fsafe_async *a;
		struct fsafe_async_completion c;
		assert_int_equal(fsafe_async_new(NULL, &a), 0);
		assert_int_equal(fsafe_async_submit(a, f->dirfd, name, s, len,
		                                    &o, NULL, NULL), 0);
		while (fsafe_async_reap(a, &c, 1) == 0)
			assert_true(fsafe_async_wait(a, 10000) >= 0);
		fsafe_async_free(a);
		return c.result;
	}
	case ROOT: {
		fsafe_root *root;
		assert_int_equal(fsafe_root_open(f->dirfd, ".", NULL, &root),
		                 0);
		r = fsafe_root_write_file(root, name, s, len, &o);
		fsafe_root_close(root);
		return r;
	}
	default:
		fail();
		return -1;
	}
}

static void xattrs_kept_by_every_write_path(void **state)
{
	struct fx *f = *state;
	size_t blen, alen;

	skip_without_fs(f);
	decorate(f, "t");
	char *before = xattrs_of(f, "t", &blen);
	mode_t mode_before;
	{
		struct stat st;
		assert_int_equal(fstatat(f->dirfd, "t", &st, 0), 0);
		mode_before = st.st_mode;
	}
	for (int k = 0; k < N_PATHS; k++) {
		print_message("%s on %s\n", path_names[k], fs_types[f->fs]);
		assert_int_equal(write_by(f, (enum path_kind)k, "t", path_names[k]),
		                 0);
		assert_true(tu_equals(f->dir, "t", path_names[k],
		                      strlen(path_names[k])));
		char *after = xattrs_of(f, "t", &alen);
		assert_int_equal(alen, blen);
		assert_memory_equal(after, before, blen);
		free(after);
		char caps[64];
		char path[8192];
		snprintf(path, sizeof(path), "%s/t", f->dir);
		assert_int_equal(lgetxattr(path, "security.capability", caps,
		                           sizeof(caps)), sizeof(file_caps));
		struct stat st;
		assert_int_equal(fstatat(f->dirfd, "t", &st, 0), 0);
		assert_int_equal(st.st_mode, mode_before);
	}
	free(before);
	assert_clean(f);
}

/* More names than the library's stack buffer holds (1 KiB of list). */
static void many_xattrs_kept(void **state)
{
	struct fx *f = *state;
	char path[8192], key[64];
	size_t blen, alen;

	skip_without_fs(f);
	tu_put(f->dir, "t", "old", 3);
	snprintf(path, sizeof(path), "%s/t", f->dir);
	for (int i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "user.attribute-number-%02d", i);
		assert_int_equal(lsetxattr(path, key, key + 5, 2, 0), 0);
	}
	char *before = xattrs_of(f, "t", &blen);
	assert_true(llistxattr(path, NULL, 0) > 1024);
	assert_int_equal(put(f, "t", "new", 0, NULL), 0);
	char *after = xattrs_of(f, "t", &alen);
	assert_int_equal(alen, blen);
	assert_memory_equal(after, before, blen);
	free(before);
	free(after);
	assert_clean(f);
}

/* The common case pays one call: listxattrat, and nothing after it. */
static void no_xattrs_cost_one_call(void **state)
{
	struct fx *f = *state;
	struct fault_plan count = { .kind = FAULT_NONE };

	skip_without_fs(f);
	tu_put(f->dir, "t", "old", 3);
	fault_install(&count);
	assert_int_equal(put(f, "t", "new", 0, NULL), 0);
	int lists = fault_calls_named("listxattrat");
	int others = fault_calls_named("getxattrat") +
	             fault_calls_named("fsetxattr") +
	             fault_calls_named("flistxattr");
	fault_install(&count);
	assert_int_equal(put(f, "t", "newer", FSAFE_NO_XATTRS, NULL), 0);
	int opted_out = fault_calls_named("listxattrat");
	fault_remove();
	assert_int_equal(lists, 1);
	assert_int_equal(others, 0);
	assert_int_equal(opted_out, 0);
	/* A new file has nothing to inherit: no call at all. */
	fault_install(&count);
	assert_int_equal(put(f, "fresh", "new", 0, NULL), 0);
	int fresh = fault_calls_named("listxattrat");
	fault_remove();
	assert_int_equal(fresh, 0);
	assert_clean(f);
}

/* The one-shot write syncs its data with the write itself, before the
   attributes are copied (a write would strip security.capability): what
   it copied after is made durable by an fsync of its own, before the
   rename publishes it. */
static void copied_xattrs_synced_before_publish(void **state)
{
	struct fx *f = *state;
	struct fault_plan count = { .kind = FAULT_NONE };
	char path[8192];

	skip_without_fs(f);
	tu_put(f->dir, "t", "old", 3);
	snprintf(path, sizeof(path), "%s/t", f->dir);
	assert_int_equal(lsetxattr(path, "user.a", "1", 1, 0), 0);
	fault_install(&count);
	assert_int_equal(put(f, "t", "new", 0, NULL), 0);
	int n = fault_calls(), set = 0, synced = 0, renamed = 0;
	for (int i = 1; i <= n; i++) {
		const char *name = fault_call_name(i);
		if (!strcmp(name, "fsetxattr"))
			set = i;
		else if (set && !renamed && !strcmp(name, "fsync"))
			synced = i;
		else if (!strcmp(name, "renameat"))
			renamed = i;
	}
	fault_remove();
	assert_true(set > 0 && renamed > set);
	assert_true(synced > set && synced < renamed);
	assert_clean(f);
}

/* Before Linux 6.13 there is no listxattrat: the file is opened and
   listed by descriptor, with the same result. */
static void xattrs_kept_without_the_at_calls(void **state)
{
	struct fx *f = *state;
	struct fault_plan count = { .kind = FAULT_NONE };
	size_t blen, alen;

	skip_without_fs(f);
	decorate(f, "t");
	char *before = xattrs_of(f, "t", &blen);
	fault_install(&count);
	assert_int_equal(put(f, "t", "probe", 0, NULL), 0);
	struct fault_plan nosys = {
		.at = fault_first_call_named("listxattrat"),
		.kind = FAULT_ERRNO, .err = ENOSYS,
	};
	fault_install(&nosys);
	assert_int_equal(put(f, "t", "new", 0, NULL), 0);
	assert_true(fault_fired());
	assert_true(fault_calls_named("flistxattr") == 1);
	fault_remove();
	char *after = xattrs_of(f, "t", &alen);
	assert_int_equal(alen, blen);
	assert_memory_equal(after, before, blen);
	free(before);
	free(after);
	assert_clean(f);
}

/* An attribute the caller may not set fails the write, target untouched;
   unless told to leave such attributes out. */
static void denied_xattr_fails_or_is_skipped(void **state)
{
	struct fx *f = *state;
	struct fault_plan count = { .kind = FAULT_NONE };
	struct fsafe_error e = { 0 };
	char path[8192], v[8];

	skip_without_fs(f);
	tu_put(f->dir, "t", "old", 3);
	snprintf(path, sizeof(path), "%s/t", f->dir);
	assert_int_equal(lsetxattr(path, "user.a", "1", 1, 0), 0);
	fault_install(&count);
	assert_int_equal(put(f, "t", "probe", 0, NULL), 0);
	struct fault_plan eperm = {
		.at = fault_first_call_named("fsetxattr"),
		.kind = FAULT_ERRNO, .err = EPERM,
	};
	fault_install(&eperm);
	int r = put(f, "t", "new", 0, &e);
	fault_remove();
	assert_int_equal(r, -EPERM);
	assert_string_equal(e.step, "copy xattr");
	assert_false(e.published);
	assert_true(tu_equals(f->dir, "t", "probe", 5));
	assert_int_equal(lgetxattr(path, "user.a", v, sizeof(v)), 1);

	fault_install(&eperm);
	r = put(f, "t", "new", FSAFE_XATTRS_BEST_EFFORT, NULL);
	fault_remove();
	assert_int_equal(r, 0);
	assert_true(tu_equals(f->dir, "t", "new", 3));
	assert_int_equal(lgetxattr(path, "user.a", v, sizeof(v)), -1);
	assert_int_equal(errno, ENODATA);
	assert_clean(f);
}

/* ------------------------------------------------------------------------ */
/* File type and links                                                       */
/* ------------------------------------------------------------------------ */

static void make_socket(const struct fx *f, const char *name)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	int s;

	assert_true(n > 0 && (size_t)n < sizeof(path));
	s = tu_bind_socket(path);
	assert_true(s >= 0);
	close(s);
}

static void special_files_refused_and_untouched(void **state)
{
	static const struct {
		const char *name, *step;
	} cases[] = {
		{ "chr", "not a regular file (character device)" },
		{ "blk", "not a regular file (block device)" },
		{ "fifo", "not a regular file (fifo)" },
		{ "sock", "not a regular file (socket)" },
	};
	struct fx *f = *state;

	skip_without_fs(f);
	assert_int_equal(mknodat(f->dirfd, "chr", S_IFCHR | 0666,
	                         makedev(1, 3)), 0);
	assert_int_equal(mknodat(f->dirfd, "blk", S_IFBLK | 0600,
	                         makedev(7, 200)), 0);
	assert_int_equal(mkfifoat(f->dirfd, "fifo", 0644), 0);
	make_socket(f, "sock");
	/* A link to one is followed to it, and refused the same way. */
	assert_int_equal(symlinkat("chr", f->dirfd, "link"), 0);
	for (size_t i = 0; i < 5; i++) {
		const char *name = i < 4 ? cases[i].name : "link";
		const char *step = cases[i < 4 ? i : 0].step;
		struct stat before, after;
		assert_int_equal(fstatat(f->dirfd, cases[i < 4 ? i : 0].name,
		                         &before, AT_SYMLINK_NOFOLLOW), 0);
		/* Beneath a root a link is the root's to judge (it may
		   refuse it): only the files themselves go that way. */
		for (int k = 0; k < (i < 4 ? N_PATHS : ROOT); k++) {
			struct fsafe_error e = { 0 };
			int r = k == ONE_SHOT ? put(f, name, "x", 0, &e)
			                      : write_by(f, (enum path_kind)k,
			                                 name, "x");
			assert_int_equal(r, -EBADFD);
			if (k == ONE_SHOT)
				assert_string_equal(e.step, step);
		}
		assert_int_equal(fstatat(f->dirfd, cases[i < 4 ? i : 0].name,
		                         &after, AT_SYMLINK_NOFOLLOW), 0);
		assert_int_equal(after.st_ino, before.st_ino);
		assert_int_equal(after.st_mode, before.st_mode);
		assert_int_equal(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
	}
	/* FSAFE_NO_FOLLOW replaces the link itself, as always. */
	assert_int_equal(put(f, "link", "file now", FSAFE_NO_FOLLOW, NULL), 0);
	assert_true(tu_equals(f->dir, "link", "file now", 8));
	assert_clean(f);
}

static void hard_links_split_or_refused(void **state)
{
	struct fx *f = *state;
	struct fsafe_error e = { 0 };

	skip_without_fs(f);
	tu_put(f->dir, "a", "old", 3);
	assert_int_equal(linkat(f->dirfd, "a", f->dirfd, "b", 0), 0);
	assert_int_equal(put(f, "a", "new", FSAFE_NO_SPLIT_LINKS, &e), -EMLINK);
	assert_string_equal(e.step, "hard links");
	assert_true(tu_equals(f->dir, "a", "old", 3));
	/* The default: this name gets the new file, the other keeps the old. */
	assert_int_equal(put(f, "a", "new", 0, NULL), 0);
	assert_true(tu_equals(f->dir, "a", "new", 3));
	assert_true(tu_equals(f->dir, "b", "old", 3));
	/* Now single-linked: the flag lets it through. */
	assert_int_equal(put(f, "a", "newer", FSAFE_NO_SPLIT_LINKS, NULL), 0);
	assert_clean(f);
}

/* A bind-mounted file cannot be renamed over: said so, nothing left. */
static void bind_mounted_target_reported(void **state)
{
	struct fx *f = *state;
	struct fsafe_error e = { 0 };
	char src[8192], dst[8192];

	skip_without_fs(f);
	tu_put(f->dir, "t", "old", 3);
	tu_put(f->dir, "other", "bound", 5);
	snprintf(src, sizeof(src), "%s/other", f->dir);
	snprintf(dst, sizeof(dst), "%s/t", f->dir);
	assert_int_equal(mount(src, dst, NULL, MS_BIND, NULL), 0);
	int r = put(f, "t", "new", 0, &e);
	umount2(dst, MNT_DETACH);
	assert_int_equal(r, -EBUSY);
	assert_string_equal(e.step, "rename (target is a mount point)");
	assert_false(e.published);
	assert_true(tu_equals(f->dir, "t", "old", 3));
	assert_clean(f);
}

/* A directory sync the filesystem refuses (EINVAL: some network and FUSE
   filesystems) is "published, not durable", and says why. */
static void unsupported_dir_sync_reported(void **state)
{
	struct fx *f = *state;
	struct fault_plan count = { .kind = FAULT_NONE };
	struct fsafe_error e = { 0 };

	skip_without_fs(f);
	tu_put(f->dir, "t", "old", 3);
	fault_install(&count);
	assert_int_equal(put(f, "t", "probe", 0, NULL), 0);
	struct fault_plan einval = {
		.at = fault_first_call_named("fsync"),
		.kind = FAULT_ERRNO, .err = EINVAL,
	};
	fault_install(&einval);
	int r = put(f, "t", "new", 0, &e);
	fault_remove();
	assert_int_equal(r, FSAFE_ENOTDURABLE);
	assert_int_equal(e.sys_errno, EINVAL);
	assert_string_equal(e.step,
	                    "fsync directory (not supported by the filesystem)");
	assert_true(e.published);
	assert_true(tu_equals(f->dir, "t", "new", 3));
	assert_clean(f);
}

/* ------------------------------------------------------------------------ */
/* Conditional replace                                                       */
/* ------------------------------------------------------------------------ */

static int put_if(const struct fx *f, const char *name, const char *s,
                  const char *token)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.if_unchanged = token;
	return fsafe_write_fileat(f->dirfd, name, s, strlen(s), &o);
}

static void conditional_replace_only_over_what_was_read(void **state)
{
	struct fx *f = *state;
	char tok[FSAFE_TOKEN_LEN], tok2[FSAFE_TOKEN_LEN];

	skip_without_fs(f);
	assert_int_equal(fsafe_token_get(f->dirfd, "t", 0, tok), -ENOENT);
	tu_put(f->dir, "t", "v1", 2);
	assert_int_equal(fsafe_token_get(f->dirfd, "t", 0, tok), 0);
	assert_int_equal(strlen(tok), FSAFE_TOKEN_LEN - 1);
	assert_int_equal(put_if(f, "t", "v2", tok), 0);
	assert_true(tu_equals(f->dir, "t", "v2", 2));
	/* The same token again: the file is another one now. */
	assert_int_equal(put_if(f, "t", "v3", tok), FSAFE_ECONFLICT);
	assert_true(tu_equals(f->dir, "t", "v2", 2));
	/* A change in place (same inode) is caught by size / ctime. */
	assert_int_equal(fsafe_token_get(f->dirfd, "t", 0, tok2), 0);
	int fd = openat(f->dirfd, "t", O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "!", 1), 1);
	close(fd);
	assert_int_equal(put_if(f, "t", "v4", tok2), FSAFE_ECONFLICT);
	/* Gone is stale too; garbage is refused. */
	assert_int_equal(fsafe_token_get(f->dirfd, "t", 0, tok2), 0);
	assert_int_equal(unlinkat(f->dirfd, "t", 0), 0);
	assert_int_equal(put_if(f, "t", "v5", tok2), FSAFE_ECONFLICT);
	assert_int_equal(put_if(f, "t", "v5", "zz"), -EINVAL);
	assert_int_equal(tu_count_entries(f->dir), 0);
	assert_clean(f);
}

enum { RACERS = 8, ROUNDS = 200 };

struct racer {
	const struct fx *f;
	pthread_barrier_t *go;
	const char *token;
	char content[16];
	int result;
	bool managed;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	fsafe_writer *w;

	o.if_unchanged = r->token;
	pthread_barrier_wait(r->go);
	if (!r->managed) {
		r->result = fsafe_write_fileat(r->f->dirfd, "t", r->content,
		                               strlen(r->content), &o);
		return NULL;
	}
	r->result = fsafe_writer_open(r->f->dirfd, "t", &o, &w);
	if (r->result == 0) {
		fsafe_writer_write(w, r->content, strlen(r->content));
		r->result = fsafe_writer_commit(w);
	}
	return NULL;
}

/* Eight writers with one token: every round exactly one publishes. */
static void racing_conditional_writers_one_wins(void **state)
{
	struct fx *f = *state;
	struct racer rs[RACERS];
	pthread_t th[RACERS];
	pthread_barrier_t go;
	char tok[FSAFE_TOKEN_LEN];

	skip_without_fs(f);
	tu_put(f->dir, "t", "start", 5);
	for (int round = 0; round < ROUNDS; round++) {
		assert_int_equal(fsafe_token_get(f->dirfd, "t", 0, tok), 0);
		pthread_barrier_init(&go, NULL, RACERS);
		for (int i = 0; i < RACERS; i++) {
			rs[i] = (struct racer){ .f = f, .go = &go, .token = tok,
			                        .managed = (i + round) % 2 };
			snprintf(rs[i].content, sizeof(rs[i].content),
			         "r%d-w%d", round, i);
			assert_int_equal(pthread_create(&th[i], NULL, race,
			                                &rs[i]), 0);
		}
		int winners = 0, winner = -1;
		for (int i = 0; i < RACERS; i++) {
			pthread_join(th[i], NULL);
			if (rs[i].result == 0) {
				winners++;
				winner = i;
			} else {
				assert_int_equal(rs[i].result, FSAFE_ECONFLICT);
			}
		}
		pthread_barrier_destroy(&go);
		assert_int_equal(winners, 1);
		assert_true(tu_equals(f->dir, "t", rs[winner].content,
		                      strlen(rs[winner].content)));
	}
	assert_clean(f);
}

/* ------------------------------------------------------------------------ */
/* Symbolic links                                                            */
/* ------------------------------------------------------------------------ */

static void assert_link(const struct fx *f, const char *name, const char *to)
{
	char buf[256];
	ssize_t n = readlinkat(f->dirfd, name, buf, sizeof(buf));

	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, to);
}

static void symlink_created_and_replaced(void **state)
{
	struct fx *f = *state;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	skip_without_fs(f);
	assert_int_equal(fsafe_symlinkat("release-41", f->dirfd, "current",
	                                 NULL), 0);
	assert_link(f, "current", "release-41");
	assert_int_equal(fsafe_symlinkat("release-42", f->dirfd, "current",
	                                 NULL), 0);
	assert_link(f, "current", "release-42");
	o.flags = FSAFE_CREATE_ONLY;
	assert_int_equal(fsafe_symlinkat("x", f->dirfd, "current", &o),
	                 -EEXIST);
	assert_link(f, "current", "release-42");
	o.flags = FSAFE_MKDIR;
	assert_int_equal(fsafe_symlinkat("../y", f->dirfd, "a/b/l", &o), 0);
	assert_link(f, "a/b/l", "../y");
	assert_int_equal(mkdirat(f->dirfd, "d", 0755), 0);
	assert_int_equal(fsafe_symlinkat("x", f->dirfd, "d", NULL), -EISDIR);
	assert_int_equal(fsafe_symlinkat("", f->dirfd, "e", NULL), -EINVAL);
	/* A regular file at the name is replaced by the link. */
	tu_put(f->dir, "file", "x", 1);
	assert_int_equal(fsafe_symlinkat("release-42", f->dirfd, "file", NULL),
	                 0);
	assert_link(f, "file", "release-42");
	assert_clean(f);
}

/* Killed at every call, the name is always the old link or the new one. */
static void symlink_replace_survives_kill_at_every_call(void **state)
{
	struct fx *f = *state;
	struct fault_plan count = { .kind = FAULT_NONE };

	skip_without_fs(f);
	assert_int_equal(symlinkat("old", f->dirfd, "current"), 0);
	fault_install(&count);
	assert_int_equal(fsafe_symlinkat("new", f->dirfd, "current", NULL), 0);
	int calls = fault_calls();
	fault_remove();
	assert_true(calls >= 4);
	for (int at = 1; at <= calls + 1; at++) {
		assert_int_equal(unlinkat(f->dirfd, "current", 0), 0);
		assert_int_equal(symlinkat("old", f->dirfd, "current"), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct fault_plan kill = { .at = at, .kind = FAULT_KILL };
			fault_install(&kill);
			_exit(fsafe_symlinkat("new", f->dirfd, "current",
			                      NULL) == 0 ? 0 : 1);
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		char buf[16];
		ssize_t n = readlinkat(f->dirfd, "current", buf, sizeof(buf));
		assert_int_equal(n, 3);
		buf[n] = '\0';
		if (at <= calls)
			assert_true(WIFSIGNALED(st));
		else
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		/* Published means the new one; before that, the old. */
		assert_true(!strcmp(buf, "old") || !strcmp(buf, "new"));
		if (WIFEXITED(st))
			assert_string_equal(buf, "new");
		/* A kill after the staging link leaves it for the sweep. */
		run("find %s -maxdepth 1 -name '.fsafe-*.tmp' -type l -delete",
		    f->dir);
	}
	assert_clean(f);
}

/* An error at any call: the old link, or (after the publish) the new one
   with FSAFE_ENOTDURABLE; never a staging link left behind. */
static void symlink_replace_fails_cleanly_at_every_call(void **state)
{
	struct fx *f = *state;
	struct fault_plan count = { .kind = FAULT_NONE };

	skip_without_fs(f);
	assert_int_equal(symlinkat("old", f->dirfd, "current"), 0);
	fault_install(&count);
	assert_int_equal(fsafe_symlinkat("new", f->dirfd, "current", NULL), 0);
	int calls = fault_calls();
	fault_remove();
	for (int at = 1; at <= calls; at++) {
		struct fault_plan eio = { .at = at, .kind = FAULT_ERRNO,
			                  .err = EIO };
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		struct fsafe_error e = { 0 };
		assert_int_equal(unlinkat(f->dirfd, "current", 0), 0);
		assert_int_equal(symlinkat("old", f->dirfd, "current"), 0);
		o.error = &e;
		fault_install(&eio);
		int r = fsafe_symlinkat("new", f->dirfd, "current", &o);
		fault_remove();
		if (r == 0 || r == FSAFE_ENOTDURABLE) {
			assert_link(f, "current", "new");
		} else {
			assert_false(e.published);
			assert_link(f, "current", "old");
		}
		assert_clean(f);
	}
}

#define CASES(fn)                                                             \
	{ #fn, fn }

int main(void)
{
	static const int fs_index[N_FS] = { 0, 1 };
	static const struct {
		const char *name;
		void (*fn)(void **);
	} tests[] = {
		CASES(xattrs_kept_by_every_write_path),
		CASES(many_xattrs_kept),
		CASES(no_xattrs_cost_one_call),
		CASES(copied_xattrs_synced_before_publish),
		CASES(xattrs_kept_without_the_at_calls),
		CASES(denied_xattr_fails_or_is_skipped),
		CASES(special_files_refused_and_untouched),
		CASES(hard_links_split_or_refused),
		CASES(bind_mounted_target_reported),
		CASES(unsupported_dir_sync_reported),
		CASES(conditional_replace_only_over_what_was_read),
		CASES(racing_conditional_writers_one_wins),
		CASES(symlink_created_and_replaced),
		CASES(symlink_replace_survives_kill_at_every_call),
		CASES(symlink_replace_fails_cleanly_at_every_call),
	};
	enum { N = sizeof(tests) / sizeof(tests[0]) };
	struct CMUnitTest t[N * N_FS];

	for (size_t i = 0; i < N; i++)
		for (int k = 0; k < N_FS; k++) {
			struct CMUnitTest *c = &t[i * N_FS + (size_t)k];
			tu_case_test(c, tests[i].name, fs_types[k], tests[i].fn,
			             &fs_index[k]);
			c->setup_func = setup;
			c->teardown_func = teardown;
		}
	return cmocka_run_group_tests(t, group_setup, group_teardown);
}
