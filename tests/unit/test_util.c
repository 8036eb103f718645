/*
 * The modules' shared helpers (src/util.h) under a table that misbehaves,
 * and the one CREATE rule every store follows through them: the store's
 * directory and its missing parents, as mkdir -p, each new directory
 * synced into its parent, mode 0777 less the umask. And the quarantine
 * move by link that the inbox shares with the other stores.
 */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "fsafe/checkpoint.h"
#include "fsafe/inbox.h"
#include "fsafe/spool.h"
#include "fsafe/store.h"
#include "quarantine.h"
#include "sys.h"
#include "testutil.h"
#include "util.h"

/* ---- a table that interrupts and cuts short ---- */

static int interrupted;

static ssize_t pread_three(int fd, void *buf, size_t len, off_t off)
{
	if (interrupted++ % 2 == 0) {
		errno = EINTR;
		return -1;
	}
	return fsafe__sys_default.pread(fd, buf, len < 3 ? len : 3, off);
}

static ssize_t pwrite_three(int fd, const void *buf, size_t len, off_t off)
{
	if (interrupted++ % 2 == 0) {
		errno = EINTR;
		return -1;
	}
	return fsafe__sys_default.pwrite(fd, buf, len < 3 ? len : 3, off);
}

static ssize_t pwrite_nothing(int fd, const void *buf, size_t len, off_t off)
{
	(void)fd, (void)buf, (void)len, (void)off;
	return 0;
}

static ssize_t read_three(int fd, void *buf, size_t len)
{
	return fsafe__sys_default.read(fd, buf, len < 3 ? len : 3);
}

static int open_file(struct tu_fx *f, const char *name, int flags)
{
	int fd = openat(f->dirfd, name, flags | O_CREAT | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	return fd;
}

static void pread_full_reads_to_the_end(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;
	const char text[] = "read three bytes at a time";
	char buf[64] = { 0 };

	tu_put(f->dir, "f", text, strlen(text));
	int fd = open_file(f, "f", O_RDONLY);
	t.pread = pread_three;
	interrupted = 0;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	ssize_t n = fsafe__pread_full(fd, buf, 10, 5);
	ssize_t all = fsafe__pread_full(fd, buf + 10, sizeof(buf), 0);
	fsafe__sys_swap(old);
	close(fd);
	assert_int_equal(n, 10);
	assert_memory_equal(buf, text + 5, 10);
	/* Fewer bytes than asked only at the end of the file. */
	assert_int_equal(all, (ssize_t)strlen(text));
	assert_memory_equal(buf + 10, text, strlen(text));
}

static void pwrite_all_completes_or_fails(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;
	const char text[] = "written three bytes at a time";

	int fd = open_file(f, "f", O_WRONLY);
	t.pwrite = pwrite_three;
	interrupted = 0;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int r = fsafe__pwrite_all(fd, "xx", 2, 0);
	int r2 = fsafe__pwrite_all(fd, text, strlen(text), 2);
	t.pwrite = pwrite_nothing;
	int r3 = fsafe__pwrite_all(fd, "y", 1, 0);
	fsafe__sys_swap(old);
	close(fd);
	assert_int_equal(r, 0);
	assert_int_equal(r2, 0);
	assert_true(tu_equals(f->dir, "f", "xxwritten three bytes at a time",
	                      2 + strlen(text)));
	/* A regular file never takes 0 bytes: an error, not a loop. */
	assert_int_equal(r3, -EIO);
}

static void read_file_at_caps_the_size(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_sys t = fsafe__sys_default;
	char *big = malloc(10000), *out = NULL;
	size_t len = 0;

	assert_non_null(big);
	memset(big, 'b', 10000);
	tu_put(f->dir, "big", big, 10000);
	tu_put(f->dir, "empty", "", 0);
	t.read = read_three;
	const struct fsafe_sys *old = fsafe__sys_swap(&t);
	int exact = fsafe__read_file_at(f->dirfd, "big", 10000, &out, &len);
	fsafe__sys_swap(old);
	assert_int_equal(exact, 0);
	assert_int_equal(len, 10000);
	assert_memory_equal(out, big, 10000);
	assert_int_equal(out[len], '\0');
	free(out);
	assert_int_equal(fsafe__read_file_at(f->dirfd, "big", 9999, &out, &len),
	                 -EFBIG);
	assert_int_equal(fsafe__read_file_at(f->dirfd, "empty", 0, &out, &len),
	                 0);
	assert_int_equal(len, 0);
	free(out);
	free(big);
	/* Through fsafe__open_regular: a link or a FIFO is never read. */
	assert_int_equal(symlinkat("big", f->dirfd, "link"), 0);
	assert_int_equal(mkfifoat(f->dirfd, "fifo", 0600), 0);
	assert_int_equal(fsafe__read_file_at(f->dirfd, "link", 1 << 20, &out,
	                                     &len), -ELOOP);
	assert_int_equal(fsafe__read_file_at(f->dirfd, "fifo", 1 << 20, &out,
	                                     &len), -EBADFD);
}

static void clocks_tell_wall_and_monotonic_time(void **state)
{
	(void)state;
	int64_t wall = fsafe__now_ms();
	int64_t t = (int64_t)time(NULL) * 1000;
	uint64_t m0 = fsafe__mono_ms(), n0 = fsafe__mono_ns();
	struct timespec nap = { 0, 20 * 1000 * 1000 };

	assert_true(wall >= t - 2000 && wall <= t + 2000);
	nanosleep(&nap, NULL); /* a measured interval, not a race */
	assert_true(fsafe__mono_ms() >= m0 + 20);
	assert_true(fsafe__mono_ns() >= n0 + 20 * 1000 * 1000);
}

/* ---- the directory scan ---- */

struct seen {
	int n, dots, stop_at;
	char names[8][16];
};

static int see(int fd, const char *name, unsigned char type, void *arg)
{
	struct seen *s = arg;
	struct stat st;

	if (!strcmp(name, ".") || !strcmp(name, ".."))
		s->dots++;
	/* fd is the directory scanned: its entries resolve against it. */
	assert_int_equal(fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(type == DT_UNKNOWN ||
	            (type == DT_DIR) == (S_ISDIR(st.st_mode) != 0));
	snprintf(s->names[s->n % 8], sizeof(s->names[0]), "%s", name);
	return ++s->n == s->stop_at ? 42 : 0;
}

static void dir_each_visits_every_entry_once(void **state)
{
	struct tu_fx *f = *state;
	struct seen s = { 0 };

	tu_put(f->dir, "a", "", 0);
	tu_put(f->dir, "b", "", 0);
	assert_int_equal(mkdirat(f->dirfd, "d", 0777), 0);
	assert_int_equal(fsafe__dir_each(f->dirfd, see, &s), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.dots, 0);
	/* A non-zero result stops the scan and is its result. */
	struct seen stop = { .stop_at = 2 };
	assert_int_equal(fsafe__dir_each(f->dirfd, see, &stop), 42);
	assert_int_equal(stop.n, 2);
}

static int count_only(int fd, const char *name, unsigned char type,
                      void *arg)
{
	(void)fd, (void)name, (void)type;
	++*(int *)arg;
	return 0;
}

static void dir_names_are_sorted(void **state)
{
	struct tu_fx *f = *state;
	char **v;
	size_t n;
	int k = 0;

	tu_put(f->dir, "c", "", 0);
	tu_put(f->dir, "a", "", 0);
	tu_put(f->dir, "b", "", 0);
	assert_int_equal(fsafe__dir_names(f->dirfd, &v, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0], "a");
	assert_string_equal(v[1], "b");
	assert_string_equal(v[2], "c");
	fsafe__dir_names_free(v, n);
	assert_int_equal(fsafe__dir_each(f->dirfd, count_only, &k), 0);
	assert_int_equal(k, 3);
	/* A file is no directory to scan. */
	assert_int_equal(openat(f->dirfd, "c", O_RDONLY | O_DIRECTORY), -1);
	int fd = openat(f->dirfd, "c", O_RDONLY | O_CLOEXEC);
	assert_int_equal(fsafe__dir_names(fd, &v, &n), -ENOTDIR);
	assert_null(v);
	assert_int_equal(n, 0);
	close(fd);
}

/* ---- mkdir -p ---- */

static mode_t umask_now(void)
{
	mode_t m = umask(0);

	umask(m);
	return m;
}

static mode_t mode_of(struct tu_fx *f, const char *path)
{
	struct stat st;

	assert_int_equal(fstatat(f->dirfd, path, &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISDIR(st.st_mode));
	return st.st_mode & 07777;
}

static void mkdir_p_makes_missing_parents_durably(void **state)
{
	struct tu_fx *f = *state;
	struct fault_plan plan = { .kind = FAULT_NONE };
	const char *step = NULL;
	int fd = -1;

	fault_install(&plan);
	int r = fsafe__mkdir_p(f->dirfd, "a/b/c", 0700, true, &fd, &step);
	int syncs = fault_calls_named("fsync");
	fault_remove();
	assert_int_equal(r, 0);
	assert_true(fd >= 0);
	/* fd is the new directory itself. */
	assert_int_equal(mkdirat(fd, "inside", 0777), 0);
	close(fd);
	assert_int_equal(mode_of(f, "a/b/c/inside"), 0777 & ~umask_now());
	/* Each directory on the way synced for the next: ".", a, a/b. */
	assert_int_equal(syncs, 3);
	/* The mode is the last one's; parents get 0777, as mkdir -p -m. */
	assert_int_equal(mode_of(f, "a/b/c"), 0700 & ~umask_now());
	assert_int_equal(mode_of(f, "a"), 0777 & ~umask_now());
	assert_int_equal(mode_of(f, "a/b"), 0777 & ~umask_now());

	/* Existing parents: only what is missing is made; found ones are
	   synced too (another process may have made them a moment ago). */
	fault_install(&plan);
	r = fsafe__mkdir_p(f->dirfd, "a/b/d", 0777, true, NULL, &step);
	syncs = fault_calls_named("fsync");
	int mkdirs = fault_calls_named("mkdirat");
	fault_remove();
	assert_int_equal(r, 0);
	assert_int_equal(syncs, 3);
	assert_int_equal(mkdirs, 1);
	/* Without sync, nothing is synced; a path that exists is fine. */
	fault_install(&plan);
	r = fsafe__mkdir_p(f->dirfd, "x/y", 0777, false, NULL, &step);
	int r2 = fsafe__mkdir_p(f->dirfd, "x/y/", 0777, false, NULL, &step);
	syncs = fault_calls_named("fsync");
	fault_remove();
	assert_int_equal(r, 0);
	assert_int_equal(r2, 0);
	assert_int_equal(syncs, 0);
}

static void mkdir_p_says_which_step_failed(void **state)
{
	struct tu_fx *f = *state;
	const char *step = NULL;
	int fd = -1;

	tu_put(f->dir, "file", "x", 1);
	assert_int_equal(fsafe__mkdir_p(f->dirfd, "file/sub", 0777, true, &fd,
	                                &step), -ENOTDIR);
	assert_string_equal(step, "open directory");
	assert_int_equal(fd, -1);
	assert_int_equal(fsafe__mkdir_p(f->dirfd, "", 0777, true, NULL, &step),
	                 -EINVAL);

	/* A sync on the way fails: reported as such. */
	char path[4096];
	snprintf(path, sizeof(path), "%s/n/m", f->dir);
	assert_int_equal(mkdirat(f->dirfd, "n", 0777), 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe__mkdir_p(f->dirfd, "n/m", 0777, true, NULL,
	                                &step), 0);
	int at = fault_first_call_named("fsync");
	fault_remove();
	assert_int_equal(rmdir(path), 0);
	fault_install(&(struct fault_plan){ .at = at, .kind = FAULT_ERRNO,
	                                    .err = EIO });
	int r = fsafe__mkdir_p(f->dirfd, "n/m", 0777, true, NULL, &step);
	fault_remove();
	assert_int_equal(r, -EIO);
	assert_string_equal(step, "fsync directory");

	/* A symlink to a directory on the way is followed, as mkdir -p. */
	assert_int_equal(mkdirat(f->dirfd, "p", 0777), 0);
	assert_int_equal(symlinkat("p", f->dirfd, "lp"), 0);
	assert_int_equal(fsafe__mkdir_p(f->dirfd, "lp/q/r", 0777, true, NULL,
	                                &step), 0);
	assert_int_equal(mode_of(f, "p/q/r"), 0777 & ~umask_now());
}

static void subdir_make_never_follows_a_link(void **state)
{
	struct tu_fx *f = *state;
	struct fault_plan plan = { .kind = FAULT_NONE };

	fault_install(&plan);
	int fd = fsafe__subdir_make(f->dirfd, "q", 0700, true);
	int syncs = fault_calls_named("fsync");
	fault_remove();
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(syncs, 1);
	assert_int_equal(mode_of(f, "q"), 0700 & ~umask_now());
	/* There already: opened, nothing made or synced. */
	fault_install(&plan);
	fd = fsafe__subdir_make(f->dirfd, "q", 0700, true);
	int made = fault_calls_named("mkdirat") + fault_calls_named("fsync");
	fault_remove();
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(made, 0);
	/* Without sync, a new one is not synced. */
	fault_install(&plan);
	fd = fsafe__subdir_make(f->dirfd, "n", 0777, false);
	syncs = fault_calls_named("fsync");
	fault_remove();
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(syncs, 0);
	/* A symlink in its place, even to a directory, is refused. */
	assert_int_equal(symlinkat("q", f->dirfd, "l"), 0);
	int r = fsafe__subdir_make(f->dirfd, "l", 0777, true);
	assert_true(r == -ENOTDIR || r == -ELOOP);
	tu_put(f->dir, "file", "x", 1);
	assert_int_equal(fsafe__subdir_make(f->dirfd, "file", 0777, true),
	                 -ENOTDIR);
}

/* ---- every store's CREATE: missing parents made, mode 0777 & ~umask ---- */

/* Under umask 0 a mode the library chose shows whole (022 would make 0755
   and 0777 look alike). */
static mode_t saved_umask;

static int umask_zero(void **state)
{
	saved_umask = umask(0);
	return tu_fx_setup(state);
}

static int umask_back(void **state)
{
	umask(saved_umask);
	return tu_fx_teardown(state);
}

static void created(struct tu_fx *f, const char *path)
{
	assert_int_equal(umask_now(), 0);
	assert_int_equal(mode_of(f, "s"), 0777);
	assert_int_equal(mode_of(f, "s/t"), 0777);
	assert_int_equal(mode_of(f, path), 0777);
}

static void store_create_makes_parents(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s = NULL;

	assert_int_equal(fsafe_store_open(f->dirfd, "s/t/store", &o, &s),
	                 -ENOENT);
	o.flags = FSAFE_STORE_CREATE;
	assert_int_equal(fsafe_store_open(f->dirfd, "s/t/store", &o, &s), 0);
	fsafe_store_close(s);
	created(f, "s/t/store");
	/* The store's own mode option still sets its directory's. */
	o.mode = 0640;
	assert_int_equal(fsafe_store_open(f->dirfd, "s/t/own", &o, &s), 0);
	fsafe_store_close(s);
	assert_int_equal(mode_of(f, "s/t/own"), 0740);
}

static void spool_create_makes_parents(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s = NULL;

	assert_int_equal(fsafe_spool_open(f->dirfd, "s/t/spool", &o, &s),
	                 -ENOENT);
	o.flags = FSAFE_SPOOL_CREATE;
	assert_int_equal(fsafe_spool_open(f->dirfd, "s/t/spool", &o, &s), 0);
	fsafe_spool_close(s);
	created(f, "s/t/spool");
}

static void checkpoint_create_makes_parents(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp = NULL;

	assert_true(fsafe_checkpoint_open(f->dirfd, "s/t/ckpt", &o, &cp) < 0);
	o.flags = FSAFE_CHECKPOINT_CREATE;
	assert_int_equal(fsafe_checkpoint_open(f->dirfd, "s/t/ckpt", &o, &cp),
	                 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	created(f, "s/t/ckpt");
}

static void inbox_create_makes_parents(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib = NULL;

	assert_int_equal(fsafe_inbox_open(f->dirfd, "s/t/inbox", &o, &ib),
	                 -ENOENT);
	o.flags = FSAFE_INBOX_CREATE;
	assert_int_equal(fsafe_inbox_open(f->dirfd, "s/t/inbox", &o, &ib), 0);
	fsafe_inbox_close(ib);
	created(f, "s/t/inbox");
}

/* ---- quarantine by link ---- */

static int sub_fd(struct tu_fx *f, const char *name)
{
	int fd;

	assert_int_equal(mkdirat(f->dirfd, name, 0777), 0);
	fd = openat(f->dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void quarantine_link_keeps_every_name(void **state)
{
	struct tu_fx *f = *state;
	char dest[NAME_MAX + 1], path[4096];
	int d = sub_fd(f, "d"), q = sub_fd(f, "q");

	snprintf(path, sizeof(path), "%s/d", f->dir);
	tu_put(path, "m", "one", 3);
	assert_int_equal(fsafe__quarantine_link(d, "m", q, "why 1\n", dest,
	                                        sizeof(dest)), 0);
	assert_string_equal(dest, "m");
	tu_put(path, "m", "two", 3);
	assert_int_equal(fsafe__quarantine_link(d, "m", q, "why 2\n", dest,
	                                        sizeof(dest)), 0);
	/* A name taken before keeps its bytes; the new one is numbered. */
	assert_string_equal(dest, "m.1");
	assert_int_equal(mkdirat(d, "sub", 0777), 0);
	assert_int_equal(fsafe__quarantine_link(d, "sub", q, "a dir\n", dest,
	                                        sizeof(dest)), 0);
	assert_int_equal(tu_count_entries(path), 0);
	snprintf(path, sizeof(path), "%s/q", f->dir);
	assert_true(tu_equals(path, "m", "one", 3));
	assert_true(tu_equals(path, "m.reason", "why 1\n", 6));
	assert_true(tu_equals(path, "m.1", "two", 3));
	assert_true(tu_equals(path, "m.1.reason", "why 2\n", 6));
	assert_true(tu_equals(path, "sub.reason", "a dir\n", 6));
	assert_int_equal(mode_of(f, "q/sub"), 0777 & ~umask_now());

	/* Dropping the old name fails: the file is under both names, never
	   under none (a link, not a rename). */
	snprintf(path, sizeof(path), "%s/d", f->dir);
	tu_put(path, "x", "x", 1);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe__quarantine_link(d, "x", q, "x\n", dest,
	                                        sizeof(dest)), 0);
	int at = fault_first_call_named("unlinkat");
	fault_remove();
	assert_true(at > 0);
	tu_put(path, "y", "y", 1);
	fault_install(&(struct fault_plan){ .at = at, .kind = FAULT_ERRNO,
	                                    .err = EIO });
	int r = fsafe__quarantine_link(d, "y", q, "y\n", dest, sizeof(dest));
	fault_remove();
	assert_int_equal(r, -EIO);
	assert_true(tu_equals(path, "y", "y", 1));
	snprintf(path, sizeof(path), "%s/q", f->dir);
	assert_true(tu_equals(path, "y", "y", 1));
	close(d);
	close(q);
}

/* The filesystem type findmnt(8) reports for path, or "" where it cannot. */
static void fs_type(const char *path, char *type, size_t cap)
{
	char cmd[4200];
	FILE *p;

	type[0] = '\0';
	snprintf(cmd, sizeof(cmd), "findmnt -n -o FSTYPE -T '%s' 2>/dev/null",
	         path);
	if (!(p = popen(cmd, "r")))
		return;
	if (fgets(type, (int)cap, p))
		type[strcspn(type, "\n")] = '\0';
	pclose(p);
}

/* Whether one directory's sync makes a rename durable whole: ext3, ext4,
   xfs and tmpfs say yes; ext2 (ext4's magic number), btrfs, proc and
   anything else no. Asked of this test's scratch directory and /proc. */
static void renames_whole_by_filesystem(void **state)
{
	struct tu_fx *f = *state;
	/* devtmpfs is tmpfs underneath: a chroot that binds /dev alone
	   sees /dev/shm there. */
	static const char *const whole[] = { "ext3", "ext4", "xfs", "tmpfs",
	                                     "devtmpfs" };
	const char *dirs[] = { f->dir, "/dev/shm", "/dev", "/proc" };
	char type[64];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int fd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fs_type(dirs[i], type, sizeof(type));
		if (fd < 0 || !type[0]) {
			print_message("SKIP %s: %s\n", dirs[i],
			              fd < 0 ? "cannot open" : "no findmnt");
			if (fd >= 0)
				close(fd);
			continue;
		}
		bool want = false;
		for (size_t k = 0; k < sizeof(whole) / sizeof(whole[0]); k++)
			want |= !strcmp(type, whole[k]);
		print_message("%s: %s, renames whole: %s\n", dirs[i], type,
		              want ? "yes" : "no");
		assert_int_equal(fsafe__renames_whole(fd), want);
		close(fd);
	}
}

/* Read buffers: a large one starts on a 4 KiB boundary (reads into one
   16 bytes past it run at a sixth of the speed on AMD Zen), a small one
   as malloc aligns; all n bytes are usable (ASan checks), and an
   impossible size is NULL. */
static void io_alloc_aligns_large_buffers(void **state)
{
	const size_t sizes[] = { 0, 1, 4095, (64 << 10) - 1, 64 << 10,
	                         (1 << 20) + 1, (size_t)40 << 20 };
	(void)state;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *p = fsafe__io_alloc(n);
		assert_non_null(p);
		uintptr_t a = (uintptr_t)p;
		if (n >= (64 << 10) && a % 4096 != 0)
			fail_msg("%zu bytes at page offset %zu", n,
			         (size_t)(a % 4096));
		assert_int_equal(a % (2 * sizeof(void *)), 0);
		assert_int_equal(fsafe__io_size(p), n);
		memset(p, 0xa5, n);
		fsafe__io_free(p);
	}
	assert_null(fsafe__io_alloc(SIZE_MAX));
	assert_null(fsafe__io_alloc(SIZE_MAX - 4096));
	fsafe__io_free(NULL);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, tu_fx_setup, tu_fx_teardown)
#define T0(fn) cmocka_unit_test_setup_teardown(fn, umask_zero, umask_back)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(pread_full_reads_to_the_end),
		T(pwrite_all_completes_or_fails),
		T(read_file_at_caps_the_size),
		T(clocks_tell_wall_and_monotonic_time),
		T(dir_each_visits_every_entry_once),
		T(dir_names_are_sorted),
		T0(mkdir_p_makes_missing_parents_durably),
		T(mkdir_p_says_which_step_failed),
		T(subdir_make_never_follows_a_link),
		T0(store_create_makes_parents),
		T0(spool_create_makes_parents),
		T0(checkpoint_create_makes_parents),
		T0(inbox_create_makes_parents),
		T(quarantine_link_keeps_every_name),
		T(renames_whole_by_filesystem),
		T(io_alloc_aligns_large_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
