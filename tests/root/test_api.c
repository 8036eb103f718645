/*
 * The contained-writes API: each operation inside the root, the error
 * detail, the choice between openat2 and the walk (ENOSYS, EPERM, EAGAIN
 * from a swapped system-call table), and a failure at every system call
 * of a contained write leaving no fd, no staging file and nothing outside.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "snap.h"
#include "sys.h"
#include "testutil.h"

struct fx {
	char *s;
	char root[PATH_MAX];
	fsafe_root *r;
	struct fsafe_error err; /* the root's error detail */
};

static int open_root(const char *path, unsigned flags,
                     struct fsafe_error *err, fsafe_root **r)
{
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;

	ro.flags = flags;
	ro.error = err;
	return fsafe_root_open(AT_FDCWD, path, &ro, r);
}

static char *at(const struct fx *f, const char *rel)
{
	static char buf[2][2 * PATH_MAX];
	static int k;
	char *p = buf[k++ % 2];
	if (snprintf(p, sizeof(buf[0]), "%s/%s", f->root, rel) >= PATH_MAX)
		fail_msg("path too long");
	return p;
}

static void fx_make(struct fx *f, unsigned flags)
{
	f->s = tu_mkscratch();
	snprintf(f->root, sizeof(f->root), "%s/root", f->s);
	assert_int_equal(mkdir(f->root, 0755), 0);
	tu_put(f->s, "sentinel", "sentinel", 8);
	memset(&f->err, 0, sizeof(f->err));
	assert_int_equal(open_root(f->root, flags, &f->err, &f->r), 0);
}

static void fx_free(struct fx *f)
{
	fsafe_root_close(f->r);
	tu_rmtree(f->s);
	free(f->s);
}

static const unsigned modes[] = {
	0,
	FSAFE_ROOT_IN_ROOT_SYMLINKS,
	FSAFE_ROOT_NO_OPENAT2,
	FSAFE_ROOT_NO_OPENAT2 | FSAFE_ROOT_IN_ROOT_SYMLINKS,
};

#define FOR_EACH_MODE(m) for (size_t m = 0; m < 4; m++)

static void check_path_table(void **state)
{
	static const struct {
		const char *p;
		size_t len;
		int want;
	} t[] = {
		{ "a", 1, 0 },          { "a/b/c", 5, 0 },
		{ "a//b", 4, 0 },       { "./a", 3, 0 },
		{ "a/", 2, 0 },         { ".", 1, 0 },
		{ "a/..", 4, 0 },       { "a/../b", 6, 0 },
		{ "", 0, -EINVAL },     { "/a", 2, -EXDEV },
		{ "..", 2, -EXDEV },    { "a/../..", 7, -EXDEV },
		{ "a\0b", 3, -EINVAL }, { "../a", 4, -EXDEV },
		{ "...", 3, 0 },        { "a/.../b", 7, 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (fsafe_root_check_path(t[i].p, t[i].len) != t[i].want)
			fail_msg("check_path(\"%s\"): %d, want %d", t[i].p,
			         fsafe_root_check_path(t[i].p, t[i].len),
			         t[i].want);
	char *long_name = malloc(NAME_MAX + 2);
	memset(long_name, 'n', NAME_MAX + 1);
	assert_int_equal(fsafe_root_check_path(long_name, NAME_MAX), 0);
	assert_int_equal(fsafe_root_check_path(long_name, NAME_MAX + 1),
	                 -ENAMETOOLONG);
	free(long_name);
	char *long_path = malloc(PATH_MAX);
	for (size_t i = 0; i < PATH_MAX; i++)
		long_path[i] = i % 2 ? '/' : 'p';
	assert_int_equal(fsafe_root_check_path(long_path, PATH_MAX - 1), 0);
	assert_int_equal(fsafe_root_check_path(long_path, PATH_MAX),
	                 -ENAMETOOLONG);
	free(long_path);
}

static void open_errors(void **state)
{
	fsafe_root *r = (void *)1;
	char *s = tu_mkscratch();
	(void)state;

	tu_put(s, "file", "x", 1);
	assert_int_equal(open_root(s, 1u << 9, NULL, &r), -EINVAL);
	assert_null(r);
	assert_int_equal(open_root("", 0, NULL, &r), -EINVAL);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/file", s);
	assert_int_equal(open_root(p, 0, NULL, &r), -ENOTDIR);
	snprintf(p, sizeof(p), "%s/missing", s);
	assert_int_equal(open_root(p, 0, NULL, &r), -ENOENT);
	fsafe_root_close(NULL);
	tu_rmtree(s);
	free(s);
}

static void read_back(fsafe_root *r, const char *path, const char *want)
{
	char buf[256];
	int fd = fsafe_root_open_read(r, path);

	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	assert_int_equal(n, (ssize_t)strlen(want));
	assert_memory_equal(buf, want, (size_t)n);
}

static void write_read_all_modes(void **state)
{
	(void)state;
	FOR_EACH_MODE(m) {
		struct fx f;
		struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
		fx_make(&f, modes[m]);
		o.flags = FSAFE_MKDIR;
		assert_int_equal(fsafe_root_write_file(f.r, "a/b/c.txt", "one", 3,
		                                       &o), 0);
		read_back(f.r, "a/b/c.txt", "one");
		assert_int_equal(fsafe_root_write_file(f.r, "a/b/c.txt", "two!",
		                                       4, NULL), 0);
		read_back(f.r, "./a//b/c.txt", "two!");
		assert_true(tu_equals(at(&f, "a/b"), "c.txt", "two!", 4));
		assert_int_equal(tu_count_staging(at(&f, "a/b")), 0);
		fx_free(&f);
	}
}

static void writer_streams(void **state)
{
	struct fx f;
	fsafe_writer *w;
	(void)state;

	fx_make(&f, 0);
	assert_int_equal(fsafe_root_writer_open(f.r, "big", NULL, &w), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(fsafe_writer_write(w, "0123456789", 10), 0);
	assert_false(tu_equals(f.root, "big", "", 0)); /* not published yet */
	assert_int_equal(fsafe_writer_commit(w), 0);
	size_t n;
	char *got = tu_get(f.root, "big", &n);
	assert_int_equal(n, 1000);
	free(got);
	/* Abort leaves nothing. */
	assert_int_equal(fsafe_root_writer_open(f.r, "gone", NULL, &w), 0);
	fsafe_writer_abort(w);
	assert_int_equal(tu_count_entries(f.root), 1);
	fx_free(&f);
}

static void options_pass_through(void **state)
{
	struct fx f;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_error e = { 0 };
	struct stat st;
	(void)state;

	fx_make(&f, 0);
	o.mode = 0640;
	o.error = &e;
	umask(022);
	assert_int_equal(fsafe_root_write_file(f.r, "m", "x", 1, &o), 0);
	assert_int_equal(stat(at(&f, "m"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* An existing file keeps its own mode (set through the fd). */
	assert_int_equal(chmod(at(&f, "m"), 0600), 0);
	assert_int_equal(fsafe_root_write_file(f.r, "m", "y", 1, NULL), 0);
	assert_int_equal(stat(at(&f, "m"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	o.flags = FSAFE_CREATE_ONLY;
	assert_int_equal(fsafe_root_write_file(f.r, "m", "z", 1, &o), -EEXIST);
	assert_int_equal(e.code, -EEXIST);
	assert_true(tu_equals(f.root, "m", "y", 1));
	o.flags = FSAFE_NO_TMPFILE | FSAFE_NO_RENAMEAT2 | FSAFE_CREATE_ONLY;
	assert_int_equal(fsafe_root_write_file(f.r, "n", "n", 1, &o), 0);
	assert_int_equal(fsafe_root_mkdir_all(f.r, "dir", 0, 0), 0);
	assert_int_equal(fsafe_root_write_file(f.r, "dir", "x", 1, &o), -EISDIR);
	o.mode = 010000;
	assert_int_equal(fsafe_root_write_file(f.r, "q", "x", 1, &o), -EINVAL);
	fx_free(&f);
}

/* The one door: the open's error is filled by the open, by every
   failing call on the root, and by a writer made from it; an escape's
   step says it leaves the root. */
static void root_error_one_door(void **state)
{
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_error e = { 0 };
	fsafe_root *r;
	fsafe_writer *w;
	char *s = tu_mkscratch();
	char p[PATH_MAX];
	(void)state;

	ro.error = &e;
	ro.flags = 1u << 9;
	assert_int_equal(fsafe_root_open(AT_FDCWD, s, &ro, &r), -EINVAL);
	assert_string_equal(e.step, "options");
	ro.flags = 0;
	snprintf(p, sizeof(p), "%s/missing", s);
	assert_int_equal(fsafe_root_open(AT_FDCWD, p, &ro, &r), -ENOENT);
	assert_int_equal(e.code, -ENOENT);
	assert_string_equal(e.step, "open root");

	assert_int_equal(fsafe_root_open(AT_FDCWD, s, &ro, &r), 0);
	assert_int_equal(fsafe_root_write_file(r, "/etc/x", "x", 1, NULL),
	                 -EXDEV);
	assert_int_equal(e.code, -EXDEV);
	assert_int_equal(e.sys_errno, EXDEV);
	assert_non_null(strstr(e.step, "leaves the root"));
	assert_int_equal(fsafe_root_unlink(r, "../x", 0), -EXDEV);
	assert_non_null(strstr(e.step, "leaves the root"));
	assert_int_equal(fsafe_root_mkdir_all(r, "d", 01000000, 0), -EINVAL);
	assert_string_equal(e.step, "options");
	assert_int_equal(fsafe_root_open_read(r, "nothing"), -ENOENT);
	assert_int_equal(e.code, -ENOENT);

	/* A writer made from the root, with no error of its own. */
	memset(&e, 0, sizeof(e));
	wo.flags = FSAFE_CREATE_ONLY;
	assert_int_equal(fsafe_root_writer_open(r, "late", &wo, &w), 0);
	tu_put(s, "late", "winner", 6);
	assert_int_equal(fsafe_writer_commit(w), -EEXIST);
	assert_int_equal(e.code, -EEXIST);
	assert_string_equal(e.step, "exists (create-only)");
	fsafe_root_close(r);
	tu_rmtree(s);
	free(s);
}

static void error_names_component(void **state)
{
	struct fx f;
	struct fsafe_error d;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_error e = { 0 };
	(void)state;

	FOR_EACH_MODE(m) {
		if (modes[m] & FSAFE_ROOT_IN_ROOT_SYMLINKS)
			continue;
		fx_make(&f, modes[m]);
		o.error = &e;
		assert_int_equal(mkdir(at(&f, "a"), 0755), 0);
		assert_int_equal(symlink("/", at(&f, "a/evil")), 0);
		assert_int_equal(fsafe_root_write_file(f.r, "a/evil/etc/x", "x", 1,
		                                       &o), -ELOOP);
		d = f.err;
		assert_int_equal(d.code, -ELOOP);
		assert_string_equal(d.step, "symbolic link refused (component "
		                            "'evil')");
		assert_string_equal(e.step, "symbolic link refused");
		assert_int_equal(fsafe_root_write_file(f.r, "a/../../x", "x", 1,
		                                       NULL), -EXDEV);
		d = f.err;
		assert_string_equal(d.step, "'..' leaves the root (component "
		                            "'..')");
		assert_int_equal(fsafe_root_write_file(f.r, "a/missing/x", "x", 1,
		                                       NULL), -ENOENT);
		assert_non_null(strstr(f.err.step, "(component 'missing')"));
		/* A success leaves it alone (fsafe.h, "Error detail"). */
		assert_int_equal(fsafe_root_write_file(f.r, "a/ok", "x", 1, NULL),
		                 0);
		assert_int_equal(f.err.code, -ENOENT);
		fx_free(&f);
	}
}

static void names_and_dirs(void **state)
{
	(void)state;
	FOR_EACH_MODE(m) {
		struct fx f;
		fx_make(&f, modes[m]);
		assert_int_equal(fsafe_root_mkdir_all(f.r, "x/y/z", 0700, 0), 0);
		assert_int_equal(fsafe_root_mkdir_all(f.r, "x/y/z/", 0, 0), 0);
		assert_int_equal(fsafe_root_mkdir_all(f.r, ".", 0, 0), 0);
		assert_int_equal(fsafe_root_write_file(f.r, "x/y/z/f", "f", 1,
		                                       NULL), 0);
		assert_int_equal(fsafe_root_mkdir_all(f.r, "x/y/z/f", 0, 0),
		                 -ENOTDIR);
		assert_int_equal(fsafe_root_rename(f.r, "x/y/z/f", "x/g", 0), 0);
		assert_true(tu_equals(at(&f, "x"), "g", "f", 1));
		assert_int_equal(fsafe_root_write_file(f.r, "x/h", "h", 1, NULL), 0);
		assert_int_equal(fsafe_root_rename(f.r, "x/g", "x/h",
		                                   FSAFE_ROOT_OP_NOREPLACE), -EEXIST);
		assert_int_equal(fsafe_root_rename(f.r, "x/g", "x/y/", 0), -EINVAL);
		assert_int_equal(fsafe_root_unlink(f.r, "x/g", 0), 0);
		assert_int_equal(fsafe_root_unlink(f.r, "x/g", 0), -ENOENT);
		assert_int_equal(fsafe_root_unlink(f.r, "x/y/z", 0), -EISDIR);
		assert_int_equal(fsafe_root_unlink(f.r, "x/y/z",
		                                   FSAFE_ROOT_OP_RMDIR), 0);
		int fd = fsafe_root_open_read(f.r, "x/y/");
		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(fsafe_root_open_read(f.r, "x/nothing"), -ENOENT);
		fx_free(&f);
	}
}

static void sweep_inside(void **state)
{
	struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	const char *stale = ".fsafe-00112233445566778899aabb.tmp";
	fsafe_sweep_result *res;
	struct fx f;
	(void)state;

	fx_make(&f, 0);
	assert_int_equal(fsafe_root_mkdir_all(f.r, "d", 0, 0), 0);
	tu_put(at(&f, "d"), stale, "x", 1);
	assert_int_equal(utimensat(AT_FDCWD, at(&f, "d/.fsafe-00112233445566778899aabb.tmp"),
	                           old, 0), 0);
	assert_int_equal(fsafe_root_sweep(f.r, "d", 1000, FSAFE_SWEEP_DRY_RUN,
	                                  NULL, &res), 1);
	fsafe_sweep_result_free(res);
	assert_int_equal(fsafe_root_sweep(f.r, "d", 1000, 0, NULL, &res), 1);
	assert_string_equal(fsafe_sweep_result_name(res, 0), stale);
	fsafe_sweep_result_free(res);
	assert_int_equal(tu_count_entries(at(&f, "d")), 0);
	assert_int_equal(fsafe_root_sweep(f.r, "../", 0, 0, NULL, &res), -EXDEV);
	assert_null(res);
	fx_free(&f);
}

/* In-root links: a chain of 40 resolves, 41 is a loop, as in the kernel. */
static void in_root_hops(void **state)
{
	(void)state;
	for (size_t m = 1; m < 4; m += 2) {
		struct fx f;
		char name[32], target[32];
		fx_make(&f, modes[m]);
		for (int i = 0; i < 41; i++) {
			snprintf(name, sizeof(name), "l%d", i);
			snprintf(target, sizeof(target), "/l%d", i + 1);
			assert_int_equal(symlink(target, at(&f, name)), 0);
		}
		/* l40 -> /l41 (missing): writing creates l41 after 40 links. */
		assert_int_equal(fsafe_root_write_file(f.r, "l1", "x", 1, NULL), 0);
		assert_true(tu_equals(f.root, "l41", "x", 1));
		assert_int_equal(fsafe_root_write_file(f.r, "l0", "x", 1, NULL),
		                 -ELOOP);
		fx_free(&f);
	}
}

/* ------------------------------------------------------------------------ */
/* openat2 refused, missing, or busy                                         */
/* ------------------------------------------------------------------------ */

static int openat2_errno, openat2_fail_times, openat2_calls, opath_calls;
static struct fsafe_sys fake;

static int fake_openat2(int d, const char *p, void *how, size_t size)
{
	openat2_calls++;
	if (openat2_fail_times != 0) {
		if (openat2_fail_times > 0)
			openat2_fail_times--;
		errno = openat2_errno;
		return -1;
	}
	return fsafe__sys_default.openat2(d, p, how, size);
}

static int fake_openat(int d, const char *p, int flags, mode_t mode)
{
	opath_calls += (flags & O_PATH) != 0;
	return fsafe__sys_default.openat(d, p, flags, mode);
}

static void use_fake(int err, int times)
{
	fake = fsafe__sys_default;
	fake.openat2 = fake_openat2;
	fake.openat = fake_openat;
	openat2_errno = err;
	openat2_fail_times = times;
	openat2_calls = opath_calls = 0;
	fsafe__sys_swap(&fake);
}

static void fallback_on_enosys_eperm(void **state)
{
	const int errs[2] = { ENOSYS, EPERM };
	(void)state;

	for (int i = 0; i < 2; i++) {
		struct fx f;
		fx_make(&f, 0);
		assert_int_equal(symlink("..", at(&f, "up")), 0);
		use_fake(errs[i], -1);
		assert_int_equal(fsafe_root_mkdir_all(f.r, "a/b", 0, 0), 0);
		assert_int_equal(fsafe_root_write_file(f.r, "a/b/c", "c", 1, NULL),
		                 0);
		assert_int_equal(fsafe_root_write_file(f.r, "up/x", "x", 1, NULL),
		                 -ELOOP);
		fsafe__sys_swap(NULL);
		assert_true(openat2_calls > 0);
		assert_true(opath_calls > 0); /* the walk did the work */
		assert_true(tu_equals(at(&f, "a/b"), "c", "c", 1));
		assert_true(tu_equals(f.s, "sentinel", "sentinel", 8));
		fx_free(&f);
	}
}

static void eagain_is_retried_and_bounded(void **state)
{
	struct fx f;
	(void)state;

	fx_make(&f, 0);
	assert_int_equal(mkdir(at(&f, "d"), 0755), 0);
	use_fake(EAGAIN, 3);
	assert_int_equal(fsafe_root_write_file(f.r, "d/x", "x", 1, NULL), 0);
	assert_int_equal(openat2_calls, 4);
	assert_int_equal(opath_calls, 0);
	use_fake(EAGAIN, -1);
	assert_int_equal(fsafe_root_write_file(f.r, "d/y", "y", 1, NULL),
	                 -EAGAIN);
	fsafe__sys_swap(NULL);
	assert_true(openat2_calls >= 16 && openat2_calls <= 20);
	assert_int_equal(access(at(&f, "d/y"), F_OK), -1);
	fx_free(&f);
}

/* Without /proc, a read reopens by name and checks it got the same file. */
static int no_proc_openat(int d, const char *p, int flags, mode_t mode)
{
	if (!strncmp(p, "/proc/", 6)) {
		errno = ENOENT;
		return -1;
	}
	return fsafe__sys_default.openat(d, p, flags, mode);
}

static void read_without_proc(void **state)
{
	(void)state;
	FOR_EACH_MODE(m) {
		struct fx f;
		fx_make(&f, modes[m]);
		assert_int_equal(fsafe_root_write_file(f.r, "f", "data", 4, NULL),
		                 0);
		assert_int_equal(mkfifo(at(&f, "fifo"), 0644), 0);
		fake = fsafe__sys_default;
		fake.openat = no_proc_openat;
		fsafe__sys_swap(&fake);
		read_back(f.r, "f", "data");
		int fd = fsafe_root_open_read(f.r, "fifo");
		fsafe__sys_swap(NULL);
		assert_int_equal(fd, -EINVAL);
		assert_non_null(strstr(f.err.step, "(component 'fifo')"));
		fx_free(&f);
	}
}

/* ------------------------------------------------------------------------ */
/* A failure at every system call                                            */
/* ------------------------------------------------------------------------ */

static int contained_write(fsafe_root *r)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.flags = FSAFE_MKDIR;
	return fsafe_root_write_file(r, "n1/n2/../n2/f", "new", 3, &o);
}

static void every_call_fails(void **state)
{
	(void)state;
	FOR_EACH_MODE(m) {
		struct fx f;
		struct fault_plan plan = { .kind = FAULT_NONE };

		/* Count the calls of one clean run. */
		fx_make(&f, modes[m]);
		fault_install(&plan);
		assert_int_equal(contained_write(f.r), 0);
		int total = fault_calls();
		fault_remove();
		fx_free(&f);

		for (int n = 1; n <= total; n++) {
			fx_make(&f, modes[m]);
			char *before = snap_take(f.s, "root");
			int fds = fault_open_fds();
			plan = (struct fault_plan){ .at = n, .kind = FAULT_ERRNO,
			                            .err = EIO };
			fault_install(&plan);
			int r = contained_write(f.r);
			const char *name = fault_call_name(n);
			fault_remove();
			if (r != 0 && r != FSAFE_ENOTDURABLE && r >= 0)
				fail_msg("call %d (%s): %d", n, name, r);
			assert_int_equal(fault_open_fds(), fds);
			char *after = snap_take(f.s, "root");
			assert_string_equal(before, after);
			if (access(at(&f, "n1/n2"), F_OK) == 0)
				assert_int_equal(tu_count_staging(at(&f, "n1/n2")),
				                 0);
			/* Failed means unchanged; published means whole. */
			if (r == 0 || r == FSAFE_ENOTDURABLE)
				assert_true(tu_equals(at(&f, "n1/n2"), "f", "new", 3));
			else
				assert_int_equal(access(at(&f, "n1/n2/f"), F_OK), -1);
			free(before);
			free(after);
			fx_free(&f);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(check_path_table),
		cmocka_unit_test(open_errors),
		cmocka_unit_test(write_read_all_modes),
		cmocka_unit_test(writer_streams),
		cmocka_unit_test(options_pass_through),
		cmocka_unit_test(error_names_component),
		cmocka_unit_test(root_error_one_door),
		cmocka_unit_test(names_and_dirs),
		cmocka_unit_test(sweep_inside),
		cmocka_unit_test(in_root_hops),
		cmocka_unit_test(fallback_on_enosys_eperm),
		cmocka_unit_test(eagain_is_retried_and_bounded),
		cmocka_unit_test(read_without_proc),
		cmocka_unit_test(every_call_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
