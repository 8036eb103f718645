/* Group commit: results, isolation, both sync backends, memory bound. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/io_uring.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "batch.h"
#include "fault.h"
#include "fsafe.h"
#include "sys.h"
#include "testutil.h"
#include "util.h"

#define fx tu_fx

static int setup(void **state)
{
	if (tu_fx_setup(state) < 0)
		return -1;
	struct fx *f = *state;
	assert_int_equal(mkdirat(f->dirfd, "a", 0755), 0);
	assert_int_equal(mkdirat(f->dirfd, "b", 0755), 0);
	f->fds_before = fault_open_fds();
	return 0;
}

/* The test hooks back to their defaults, also after a failed assert. */
static int teardown(void **state)
{
	fsafe__test_renames_whole = -1;
	fsafe__test_link_new_min = -1;
	return tu_fx_teardown(state);
}

#define N 60

/*
 * Whether this build's batch can sync through io_uring here: the build has
 * liburing (FSAFE_HAVE_LIBURING, set by CMake when it found it) and the
 * kernel lets this process set up a ring (a sysctl or a seccomp filter may
 * not). Asked of the kernel directly, not of the library under test.
 */
static bool ring_available(void)
{
#ifdef FSAFE_HAVE_LIBURING
	struct io_uring_params p = { 0 };
	long fd = syscall(__NR_io_uring_setup, 1, &p);

	if (fd < 0)
		return false;
	close((int)fd);
	return true;
#else
	return false;
#endif
}

static char contents[N][64];

static void name_of(int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s/f%03d", i % 2 ? "a" : "b", i);
}

static fsafe_batch *fill(struct fx *f, unsigned bflags, unsigned wflags)
{
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	fsafe_batch *b;

	bo.flags = bflags;
	bo.max_inflight = 16; /* several windows */
	wo.flags = wflags;
	assert_int_equal(fsafe_batch_new(&bo, &b), 0);
	for (int i = 0; i < N; i++) {
		char name[32];
		name_of(i, name, sizeof(name));
		snprintf(contents[i], sizeof(contents[i]), "content of %d", i);
		assert_int_equal(fsafe_batch_add(b, f->dirfd, name, contents[i],
		                                 strlen(contents[i]), &wo),
		                 i);
	}
	return b;
}

static void assert_all_new(struct fx *f)
{
	for (int i = 0; i < N; i++) {
		char name[32];
		name_of(i, name, sizeof(name));
		assert_true(tu_equals(f->dir, name, contents[i],
		                      strlen(contents[i])));
	}
	char sub[PATH_MAX];
	snprintf(sub, sizeof(sub), "%s/a", f->dir);
	assert_int_equal(tu_count_staging(sub), 0);
	snprintf(sub, sizeof(sub), "%s/b", f->dir);
	assert_int_equal(tu_count_staging(sub), 0);
	assert_int_equal(fault_open_fds(), f->fds_before);
}

static void commits_with_io_uring(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b = fill(f, 0, 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	int rings = fault_calls_named("fdatasync_many");
	int single = fault_calls_named("fdatasync");
	int dirsyncs = fault_calls_named("fsync");
	fault_remove();
	for (size_t i = 0; i < N; i++)
		assert_int_equal(fsafe_batch_result(b, i), 0);
	assert_int_equal(fsafe_batch_count(b), N);
	fsafe_batch_free(b);
	assert_all_new(f);
	/* One ring per window of 16; where this build or kernel has no
	   io_uring, each attempt fails and the pool syncs every file. */
	assert_int_equal(rings, (N + 15) / 16);
	assert_int_equal(single, ring_available() ? 0 : N);
	print_message("io_uring %s; directory syncs: %d\n",
	              single ? "unavailable, pool used" : "used", dirsyncs);
	assert_int_equal(dirsyncs, 2); /* one per distinct directory */
}

static void commits_with_the_pool(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b = fill(f, FSAFE_BATCH_NO_URING, 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	assert_int_equal(fault_calls_named("fdatasync_many"), 0);
	assert_int_equal(fault_calls_named("fdatasync"), N);
	assert_int_equal(fault_calls_named("fsync"), 2);
	fault_remove();
	fsafe_batch_free(b);
	assert_all_new(f);
}

/* Commit b under a counting plan: counts[i], the calls named names[i]. */
static void commit_counting(fsafe_batch *b, const char *const *names,
                            int *counts, int n)
{
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	for (int i = 0; i < n; i++)
		counts[i] = fault_calls_named(names[i]);
	fault_remove();
}

/* Commit b under a counting plan and free it: the number of its first
   call named `name`, for a plan that acts there in a second commit. */
static int first_call_of_commit(fsafe_batch *b, const char *name)
{
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	int at = fault_first_call_named(name);
	fault_remove();
	fsafe_batch_free(b);
	assert_true(at > 0);
	return at;
}

/* io_uring refused (ENOSYS, EPERM under seccomp): the pool takes over. */
static void falls_back_when_io_uring_is_refused(void **state)
{
	struct fx *f = *state;
	static const int errs[] = { ENOSYS, EPERM, ENOMEM };

	/* Find where the first ring call falls in a batch that replaces
	   existing files, then refuse it there. */
	fsafe_batch *b = fill(f, 0, 0);
	assert_int_equal(fsafe_batch_commit(b), 0);
	fsafe_batch_free(b);
	int at = first_call_of_commit(fill(f, 0, 0), "fdatasync_many");
	for (size_t e = 0; e < 3; e++) {
		b = fill(f, 0, 0);
		fault_install(&(struct fault_plan){
			.kind = FAULT_ERRNO, .at = at, .err = errs[e] });
		assert_int_equal(fsafe_batch_commit(b), 0);
		int pool = fault_calls_named("fdatasync");
		fault_remove();
		/* The refused window by the pool; without a ring, all. */
		assert_int_equal(pool, ring_available() ? 16 : N);
		fsafe_batch_free(b);
		assert_all_new(f);
	}
}

static void a_failure_stays_with_its_item(void **state)
{
	struct fx *f = *state;
	struct fsafe_write_opts co = FSAFE_WRITE_OPTS_INIT;
	fsafe_batch *b = fill(f, 0, 0);

	tu_put(f->dir, "exists", "keep", 4);
	co.flags = FSAFE_CREATE_ONLY;
	int i_excl = fsafe_batch_add(b, f->dirfd, "exists", "x", 1, &co);
	int i_dir = fsafe_batch_add(b, f->dirfd, "a", "x", 1, NULL);
	int i_missing = fsafe_batch_add(b, f->dirfd, "no/such/x", "x", 1, NULL);
	fsafe_writer *w;
	assert_int_equal(fsafe_writer_open(f->dirfd, "streamed", NULL, &w), 0);
	assert_int_equal(fsafe_writer_write(w, "via writer", 10), 0);
	int i_writer = fsafe_batch_add_writer(b, w);

	assert_int_equal(fsafe_batch_commit(b), 3);
	assert_int_equal(fsafe_batch_result(b, (size_t)i_excl), -EEXIST);
	assert_int_equal(fsafe_batch_result(b, (size_t)i_dir), -EISDIR);
	assert_int_equal(fsafe_batch_result(b, (size_t)i_missing), -ENOENT);
	assert_int_equal(fsafe_batch_result(b, (size_t)i_writer), 0);
	assert_int_equal(fsafe_batch_result(b, 9999), -ENOENT);
	assert_int_equal(fsafe_batch_commit(b), -EALREADY);
	fsafe_batch_free(b);
	assert_true(tu_equals(f->dir, "exists", "keep", 4));
	assert_true(tu_equals(f->dir, "streamed", "via writer", 10));
	assert_all_new(f);
}

/* A failed directory sync marks exactly the items in that directory. */
static void dir_sync_failure_marks_its_directory(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b = fill(f, 0, 0);
	assert_int_equal(fsafe_batch_commit(b), 0); /* the files exist now */
	fsafe_batch_free(b);
	b = fill(f, 0, 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	fsafe_batch_commit(b);
	int first_dir_sync = fault_first_call_named("fsync");
	fault_remove();
	fsafe_batch_free(b);

	struct fsafe_error errs[N];
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	bo.max_inflight = 16;
	assert_int_equal(fsafe_batch_new(&bo, &b), 0);
	for (int i = 0; i < N; i++) {
		struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
		char name[32];
		memset(&errs[i], 0, sizeof(errs[i]));
		wo.error = &errs[i];
		name_of(i, name, sizeof(name));
		fsafe_batch_add(b, f->dirfd, name, contents[i],
		                strlen(contents[i]), &wo);
	}
	fault_install(&(struct fault_plan){
		.kind = FAULT_ERRNO, .at = first_dir_sync, .err = EIO });
	assert_int_equal(fsafe_batch_commit(b), N / 2);
	fault_remove();
	/* Item 0 is in "b", registered first: "b" items are not durable. */
	for (int i = 0; i < N; i++) {
		int want = i % 2 ? 0 : FSAFE_ENOTDURABLE;
		assert_int_equal(fsafe_batch_result(b, (size_t)i), want);
		if (want) {
			assert_true(errs[i].published);
			assert_int_equal(errs[i].sys_errno, EIO);
			assert_string_equal(errs[i].step, "fsync directory");
		}
	}
	fsafe_batch_free(b);
	assert_all_new(f); /* published all the same */
}

/* A window with syncfs_min files on one filesystem: one syncfs for all. */
static fsafe_batch *fill_syncfs(struct fx *f, unsigned flags)
{
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	fsafe_batch *b;

	/* These tests are about the syncfs itself, whatever else is dirty
	   on the machine running them (the look at that: see below). */
	bo.flags = flags | FSAFE_BATCH_SYNCFS_ANY_DIRTY;
	bo.syncfs_min = 8;
	assert_int_equal(fsafe_batch_new(&bo, &b), 0);
	for (int i = 0; i < N; i++) {
		char name[32];
		name_of(i, name, sizeof(name));
		snprintf(contents[i], sizeof(contents[i]), "syncfs %d", i);
		fsafe_batch_add(b, f->dirfd, name, contents[i],
		                strlen(contents[i]), NULL);
	}
	return b;
}

static void large_windows_sync_the_filesystem_once(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b = fill_syncfs(f, 0);

	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	assert_int_equal(fault_calls_named("syncfs"), 1);
	assert_int_equal(fault_calls_named("fdatasync_many"), 0);
	assert_int_equal(fault_calls_named("fdatasync"), 0);
	assert_int_equal(fault_calls_named("fsync"), 2); /* the two directories */
	fault_remove();
	fsafe_batch_free(b);
	assert_all_new(f);

	b = fill_syncfs(f, FSAFE_BATCH_NO_SYNCFS);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	assert_int_equal(fault_calls_named("syncfs"), 0);
	fault_remove();
	fsafe_batch_free(b);
	assert_all_new(f);
}

/*
 * The look at others' dirty data, on a /proc/meminfo of the test's making:
 * how many syncfs calls a batch of N files of 1 KiB (syncfs_min 8) makes
 * with `text` as /proc/meminfo (NULL: none); every file ends NEW. A window
 * of N files may wait for N x 128 KiB of it beyond its own bytes.
 */
static int syncfs_with_meminfo(struct fx *f, const char *text, unsigned flags)
{
	static char kib[1024];
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	fsafe_batch *b;
	char name[32];

	memset(kib, 'k', sizeof(kib));
	bo.flags = flags;
	bo.syncfs_min = 8;
	assert_int_equal(fsafe_batch_new(&bo, &b), 0);
	for (int i = 0; i < N; i++) {
		name_of(i, name, sizeof(name));
		fsafe_batch_add(b, f->dirfd, name, kib, sizeof(kib), NULL);
	}
	fault_fake_meminfo(text);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	int n = fault_calls_named("syncfs");
	fault_remove();
	fault_set_real(NULL);
	for (int i = 0; i < N; i++) {
		assert_int_equal(fsafe_batch_result(b, (size_t)i), 0);
		name_of(i, name, sizeof(name));
		assert_true(tu_equals(f->dir, name, kib, sizeof(kib)));
	}
	fsafe_batch_free(b);
	return n;
}

/* A window of N files of 1 KiB may wait for N x 128 KiB of others' dirty
   data: the system's Dirty and Writeback less its own N KiB. */
static void others_dirty_data_keeps_syncfs_away(void **state)
{
	struct fx *f = *state;
	char text[256];
	const unsigned long allowance_kb = N * 128, own_kb = N;

	snprintf(text, sizeof(text), "MemTotal: 1 kB\nDirty:  0 kB\n"
	         "Writeback:    0 kB\n");
	assert_int_equal(syncfs_with_meminfo(f, text, 0), 1);
	/* Exactly the allowance beyond its own: still a syncfs. One kB
	   more (in Dirty or in Writeback): none. */
	snprintf(text, sizeof(text), "Dirty: %lu kB\nWriteback: 1 kB\n",
	         allowance_kb + own_kb - 1);
	assert_int_equal(syncfs_with_meminfo(f, text, 0), 1);
	snprintf(text, sizeof(text), "Dirty: %lu kB\nWriteback: 2 kB\n",
	         allowance_kb + own_kb - 1);
	assert_int_equal(syncfs_with_meminfo(f, text, 0), 0);
	/* Gigabytes waiting: the files sync one by one, unless told. */
	snprintf(text, sizeof(text), "Dirty: 16777216 kB\nWriteback: 0 kB\n");
	assert_int_equal(syncfs_with_meminfo(f, text, 0), 0);
	assert_int_equal(
	        syncfs_with_meminfo(f, text, FSAFE_BATCH_SYNCFS_ANY_DIRTY), 1);
	assert_int_equal(
	        syncfs_with_meminfo(f, text, FSAFE_BATCH_SYNCFS_ANY_DIRTY |
	                                             FSAFE_BATCH_NO_SYNCFS),
	        0);
}

/* What cannot be known is not risked: no /proc, or no Dirty line. */
static void unknown_dirty_data_keeps_syncfs_away(void **state)
{
	struct fx *f = *state;

	assert_int_equal(syncfs_with_meminfo(f, NULL, 0), 0);
	assert_int_equal(syncfs_with_meminfo(f, "Writeback: 0 kB\n", 0), 0);
	assert_int_equal(syncfs_with_meminfo(f, "Dirty: many kB\n"
	                                        "Writeback: 0 kB\n", 0), 0);
	assert_int_equal(syncfs_with_meminfo(f, NULL,
	                                     FSAFE_BATCH_SYNCFS_ANY_DIRTY), 1);
}

/* Descriptors the library holds open through the table, and the most
   at once. */
static atomic_int live_fds, peak_fds;

static int counting_openat(int dirfd, const char *path, int flags,
                           mode_t mode)
{
	int fd = fsafe__sys_default.openat(dirfd, path, flags, mode);

	if (fd >= 0) {
		int now = atomic_fetch_add(&live_fds, 1) + 1;
		int peak = atomic_load(&peak_fds);
		while (now > peak &&
		       !atomic_compare_exchange_weak(&peak_fds, &peak, now))
			;
	}
	return fd;
}

static int counting_close(int fd)
{
	atomic_fetch_sub(&live_fds, 1);
	return fsafe__sys_default.close(fd);
}

/* Windows of a batch of `n` files under a soft descriptor limit `soft`,
   counted as syncfs calls (every window syncs its filesystem once);
   *peak: the most descriptors the commit held at once. The files go to a
   directory of their own, which must then hold all n. */
static int windows_under(struct fx *f, rlim_t soft, int n, int *peak)
{
	static const char data[] = "window";
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	struct fsafe_sys counting = fsafe__sys_default;
	struct rlimit old, rl;
	fsafe_batch *b;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = soft;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	bo.syncfs_min = 8;
	bo.flags = FSAFE_BATCH_SYNCFS_ANY_DIRTY;
	assert_int_equal(fsafe_batch_new(&bo, &b), 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	char sub[64];
	snprintf(sub, sizeof(sub), "windows-%d-%d", (int)soft, n);
	assert_int_equal(mkdirat(f->dirfd, sub, 0755), 0);
	int dfd = openat(f->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "w%d", i);
		assert_int_equal(fsafe_batch_add(b, dfd, name, data,
		                                 sizeof(data), NULL), i);
	}
	counting.openat = counting_openat;
	counting.close = counting_close;
	atomic_store(&live_fds, 0);
	atomic_store(&peak_fds, 0);
	fault_set_real(&counting);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	int w = fault_calls_named("syncfs");
	fault_remove();
	fault_set_real(NULL);
	fsafe_batch_free(b);
	close(dfd);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", f->dir, sub);
	assert_int_equal(tu_count_entries(path), n);
	*peak = atomic_load(&peak_fds);
	return w;
}

/*
 * The default window is a quarter of the descriptor limit, 128..1024: a
 * batch holds that many descriptors at most (and its directory's). Below
 * 256 items its windows are that size, one after another; from 256 they
 * are half that size, each staged while the one before syncs.
 */
static void the_default_window_follows_the_descriptor_limit(void **state)
{
	struct fx *f = *state;
	struct rlimit rl;
	int peak;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4096)
		skip(); /* cannot raise the soft limit to 4096 here */
	assert_int_equal(windows_under(f, 256, 200, &peak), 2); /* 128, 72 */
	assert_in_range(peak, 128, 128 + 1);
	assert_int_equal(windows_under(f, 256, 300, &peak), 5); /* 64 each */
	assert_in_range(peak, 128 - 1, 128 + 1);
	assert_int_equal(windows_under(f, 600, 300, &peak), 4); /* 75 each */
	assert_in_range(peak, 150 - 1, 150 + 1);
	assert_int_equal(windows_under(f, 4096, 1100, &peak), 3); /* 512 */
	assert_in_range(peak, 1024 - 1, 1024 + 1);
}

/* A failed syncfs cannot say whose data was lost: every file it covered
   fails, and none is published. Without syncfs, per-file syncs serve. */
static void syncfs_failure_fails_what_it_covered(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b = fill_syncfs(f, 0);
	assert_int_equal(fsafe_batch_commit(b), 0); /* the files exist now */
	fsafe_batch_free(b);
	static char old[N][64];
	memcpy(old, contents, sizeof(old));

	b = fill_syncfs(f, 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	fsafe_batch_commit(b);
	int at = fault_first_call_named("syncfs");
	fault_remove();
	fsafe_batch_free(b);
	assert_true(at > 0);

	b = fill_syncfs(f, 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_ERRNO, .at = at,
	                                    .err = EIO });
	assert_int_equal(fsafe_batch_commit(b), N);
	fault_remove();
	for (int i = 0; i < N; i++) {
		char name[32];
		name_of(i, name, sizeof(name));
		assert_int_equal(fsafe_batch_result(b, (size_t)i), -EIO);
		assert_true(tu_equals(f->dir, name, old[i], strlen(old[i])));
	}
	fsafe_batch_free(b);

	b = fill_syncfs(f, 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_ERRNO, .at = at,
	                                    .err = ENOSYS });
	assert_int_equal(fsafe_batch_commit(b), 0);
	assert_true(fault_calls_named("fdatasync_many") + fault_calls_named("fdatasync") > 0);
	fault_remove();
	fsafe_batch_free(b);
	assert_all_new(f);
}

static void freeing_uncommitted_changes_nothing(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b = fill(f, 0, 0);
	fsafe_writer *w;
	assert_int_equal(fsafe_writer_open(f->dirfd, "w", NULL, &w), 0);
	fsafe_batch_add_writer(b, w);
	fsafe_batch_free(b);
	assert_int_equal(tu_count_entries(f->dir), 2); /* a and b */
	assert_int_equal(fault_open_fds(), f->fds_before);
	fsafe_batch_free(NULL);
}

static long vm_hwm_kib(void)
{
	FILE *s = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (s && fgets(line, sizeof(line), s))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	if (s)
		fclose(s);
	return kib;
}

/* Peak memory of a 1000-file batch of 4 KiB caller buffers stays under
   2 MiB above the buffers (measured in a fresh child process; 4 MiB
   under ASan, whose redzones and quarantine hold 1.8 MiB of it here). */
#define BATCH_GROWTH_KIB (TU_ASAN ? 4096 : 2048)
static void memory_stays_bounded(void **state)
{
	struct fx *f = *state;
	enum { FILES = 1000, SIZE = 4096 };
	pid_t pid = fork();
	if (pid == 0) {
		char *bufs = malloc((size_t)FILES * SIZE);
		memset(bufs, 'm', (size_t)FILES * SIZE);
		char names[FILES][16];
		for (int i = 0; i < FILES; i++)
			snprintf(names[i], sizeof(names[i]), "a/m%04d", i);
		/* Warm up the allocator, the ring and the thread stacks, the
		   thread of an overlapped window's sync too (its first malloc
		   makes the C library's arena for it, once). */
		fsafe_batch *b;
		fsafe_batch_new(NULL, &b);
		for (int i = 0; i < 300; i++) {
			char warm[16];
			snprintf(warm, sizeof(warm), "b/w%03d", i);
			fsafe_batch_add(b, f->dirfd, warm, bufs, 16, NULL);
		}
		fsafe_batch_commit(b);
		fsafe_batch_free(b);
		long before = vm_hwm_kib();
		fsafe_batch_new(NULL, &b);
		for (int i = 0; i < FILES; i++)
			fsafe_batch_add(b, f->dirfd, names[i],
			                bufs + (size_t)i * SIZE, SIZE, NULL);
		int failed = fsafe_batch_commit(b);
		fsafe_batch_free(b);
		long growth = vm_hwm_kib() - before;
		fprintf(stderr, "peak growth for %d x %d B: %ld KiB\n", FILES,
		        SIZE, growth);
		_exit(failed == 0 && growth < BATCH_GROWTH_KIB ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The batch's options' error: its creation, an add and a commit that
   fail fill it; an item's own failure does not. */
static void batch_error_detail(void **state)
{
	struct fx *f = *state;
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	struct fsafe_error e = { 0 };
	fsafe_batch *b;

	bo.error = &e;
	bo.flags = 1u << 20;
	assert_int_equal(fsafe_batch_new(&bo, &b), -EINVAL);
	assert_int_equal(e.code, -EINVAL);
	assert_string_equal(e.step, "options");
	bo.flags = 0;
	memset(&e, 0, sizeof(e));
	assert_int_equal(fsafe_batch_new(&bo, &b), 0);
	assert_int_equal(fsafe_batch_add(b, f->dirfd, NULL, "x", 1, NULL),
	                 -EINVAL);
	assert_string_equal(e.step, "options");
	memset(&e, 0, sizeof(e));
	assert_int_equal(fsafe_batch_add(b, f->dirfd, "nodir/x", "x", 1, NULL),
	                 0);
	assert_int_equal(fsafe_batch_commit(b), 1);
	assert_null(e.step); /* the item's failure is the item's */
	assert_int_equal(fsafe_batch_commit(b), -EALREADY);
	assert_string_equal(e.step, "commit (already committed)");
	assert_int_equal(fsafe_batch_add(b, f->dirfd, "y", "y", 1, NULL),
	                 -EALREADY);
	assert_int_equal(e.code, -EALREADY);
	assert_string_equal(e.step, "add (already committed)");
	fsafe_batch_free(b);
}

/*
 * Plain names beside a caller's directory fd: the items borrow that fd
 * (no directory of their own: one openat each, for the stage), and each
 * directory is synced once, found by fd number or, for a second fd of
 * the same directory, by device and inode.
 */
static void plain_names_borrow_the_callers_directory(void **state)
{
	struct fx *f = *state;
	int da = openat(f->dirfd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int db = openat(f->dirfd, "b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int da2 = openat(f->dirfd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const int dirs[] = { da, da, db, da2 }; /* N / 4 items each */
	fsafe_batch *b;

	assert_true(da >= 0 && db >= 0 && da2 >= 0);
	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "p%03d", i);
		snprintf(contents[i], sizeof(contents[i]), "plain %d", i);
		assert_int_equal(fsafe_batch_add(b, dirs[i / (N / 4)], name,
		                                 contents[i],
		                                 strlen(contents[i]), NULL),
		                 i);
	}
	/* Whether the directories link whole is given, not asked: asking
	   makes calls of its own, as many as the filesystem needs. */
	fsafe__test_renames_whole = 1;
	int n[3];
	commit_counting(b, (const char *[]){ "openat", "fsync", "fstat" }, n, 3);
	int opens = n[0], dirsyncs = n[1], stats = n[2];
	fsafe_batch_free(b);
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%s/p%03d",
		         dirs[i / (N / 4)] == db ? "b" : "a", i);
		assert_true(tu_equals(f->dir, name, contents[i],
		                      strlen(contents[i])));
	}
	print_message("openat %d, fstat %d, directory syncs %d for %d items\n",
	              opens, stats, dirsyncs, N);
	assert_int_equal(opens, N + 2); /* the stages; a and b for their syncs */
	assert_int_equal(dirsyncs, 2);
	/* New files: no stat of a stage after its lock, and the directories'
	   per directory fd, not per item. */
	assert_in_range(stats, 0, 2 * 4);
	close(da);
	close(db);
	close(da2);
}

/*
 * A new file's named stage (FSAFE_NO_TMPFILE, or no O_TMPFILE here) is
 * not stat'ed after its lock: a sweep of age 0 that takes one in the
 * moment before the lock shows at its rename (ENOENT), and that item
 * alone is written again, as a one-shot write.
 */
static int race_dirfd, race_swept;

static void sweep_at_lock(int call, const char *name)
{
	(void)call;
	if (!strcmp(name, "fcntl") && race_swept < 0)
		race_swept = fsafe_sweep(race_dirfd, ".", 0, 0, NULL, NULL);
}

/* prefix0..2 hold contents[0..2]; no stage is left, no fd open. */
static void three_written(struct fx *f, const char *prefix)
{
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		assert_true(tu_equals(f->dir, name, contents[i],
		                      strlen(contents[i])));
	}
	assert_int_equal(tu_count_staging(f->dir), 0);
	assert_int_equal(fault_open_fds(), f->fds_before);
}

static fsafe_batch *three_new(struct fx *f, const char *prefix)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	fsafe_batch *b;

	o.flags = FSAFE_NO_TMPFILE;

	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		snprintf(contents[i], sizeof(contents[i]), "swept %d", i);
		assert_int_equal(fsafe_batch_add(b, f->dirfd, name, contents[i],
		                                 strlen(contents[i]), &o),
		                 i);
	}
	return b;
}

static void a_swept_stage_is_written_again(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b = three_new(f, "probe");

	/* The hook runs before one call: find the first lock's number. */
	int lock_at = first_call_of_commit(b, "fcntl");

	b = three_new(f, "s");
	race_dirfd = f->dirfd;
	race_swept = -1;
	fault_install(&(struct fault_plan){ .kind = FAULT_HOOK, .at = lock_at,
	                                    .hook = sweep_at_lock });
	assert_int_equal(fsafe_batch_commit(b), 0);
	int renames = fault_calls_named("renameat");
	fault_remove();
	assert_int_equal(race_swept, 1); /* the sweep took item 0's stage */
	assert_int_equal(renames, 4);    /* its ENOENT, then its new stage's */
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(fsafe_batch_result(b, i), 0);
	fsafe_batch_free(b);
	three_written(f, "s");
}

/*
 * A new file's stage is unnamed until its data is synced, then linked at
 * the file's name: no staging name, no lock, no rename.
 */
static void new_files_are_linked_at_their_names(void **state)
{
	struct fx *f = *state;
	fsafe_batch *b;

	fsafe__test_renames_whole = 1;
	fsafe__test_link_new_min = 0;
	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "n%d", i);
		snprintf(contents[i], sizeof(contents[i]), "linked %d", i);
		assert_int_equal(fsafe_batch_add(b, f->dirfd, name, contents[i],
		                                 strlen(contents[i]), NULL),
		                 i);
	}
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_batch_commit(b), 0);
	int links = fault_calls_named("linkat");
	int renames = fault_calls_named("renameat");
	int locks = fault_calls_named("fcntl");
	int first_link = fault_first_call_named("linkat");
	int first_sync = INT_MAX;
	const char *sync_calls[] = { "fdatasync", "syncfs", "fdatasync_many" };
	for (int i = 0; i < 3; i++) {
		int at = fault_first_call_named(sync_calls[i]);
		if (at > 0 && at < first_sync)
			first_sync = at;
	}
	fault_remove();
	fsafe_batch_free(b);
	print_message("linkat %d, renameat %d, fcntl %d\n", links, renames,
	              locks);
	assert_int_equal(links, 3);
	assert_int_equal(renames, 0);
	assert_int_equal(locks, 0);
	/* The links come after the data sync. */
	assert_true(first_sync < first_link);
	three_written(f, "n");
}

/* Named stages and renames: where a link is not known to be durable with
   its inode (ext2, btrfs, any other), and in a commit too small to ask. */
static int renames_of_three_new(struct fx *f, const char *prefix)
{
	fsafe_batch *b;

	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		assert_int_equal(fsafe_batch_add(b, f->dirfd, name, "x", 1, NULL),
		                 i);
	}
	int n[2];
	commit_counting(b, (const char *[]){ "renameat", "linkat" }, n, 2);
	fsafe_batch_free(b);
	assert_int_equal(n[1], 0);
	return n[0];
}

static void new_files_are_renamed_elsewhere(void **state)
{
	struct fx *f = *state;

	fsafe__test_renames_whole = 0;
	fsafe__test_link_new_min = 0;
	assert_int_equal(renames_of_three_new(f, "w"), 3);
	fsafe__test_renames_whole = 1;
	fsafe__test_link_new_min = -1; /* 8: three do not ask */
	assert_int_equal(renames_of_three_new(f, "s"), 3);
	/* A name with a directory part is in a directory of the writer's
	   own, not the one asked about. */
	fsafe__test_link_new_min = 0;
	assert_int_equal(renames_of_three_new(f, "a/d"), 3);
	assert_int_equal(tu_count_staging(f->dir), 0);
}

/* Items spread over many directory fds: each fd is asked about once,
   and no more than four are; the rest stage named, as before. */
static void few_directories_are_asked_about(void **state)
{
	struct fx *f = *state;
	int fds[5];
	fsafe_batch *b;

	fsafe__test_link_new_min = 0;
	for (int d = 0; d < 5; d++) {
		char name[16];
		snprintf(name, sizeof(name), "dir%d", d);
		assert_int_equal(mkdirat(f->dirfd, name, 0755), 0);
		fds[d] = openat(f->dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(fds[d] >= 0);
	}
	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	for (int i = 0; i < 10; i++) { /* the fds taking turns */
		char name[16];
		snprintf(name, sizeof(name), "m%d", i);
		assert_int_equal(fsafe_batch_add(b, fds[i % 5], name, "x", 1, NULL),
		                 i);
	}
	int n[3];
	commit_counting(b, (const char *[]){ "fstatfs", "linkat", "renameat" },
	                n, 3);
	int asked = n[0], links = n[1], renames = n[2];
	fsafe_batch_free(b);
	assert_int_equal(asked, 4);
	bool whole = fsafe__renames_whole(fds[0]);
	assert_int_equal(links, whole ? 8 : 0);
	assert_int_equal(renames, whole ? 2 : 10);
	for (int d = 0; d < 5; d++)
		close(fds[d]);
}

/* A file someone makes at the name between the check and the link. */
static int appear_dirfd;

static void appear_before_link(int call, const char *name)
{
	(void)call;
	(void)name;
	int fd = openat(appear_dirfd, "late", O_WRONLY | O_CREAT | O_CLOEXEC,
	                0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "theirs", 6), 6);
	close(fd);
}

static void late_target(struct fx *f, unsigned flags, int want)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	fsafe_batch *b;

	o.flags = flags;
	fsafe__test_renames_whole = 1;
	fsafe__test_link_new_min = 0;
	unlinkat(f->dirfd, "late", 0);
	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	assert_int_equal(fsafe_batch_add(b, f->dirfd, "late", "ours", 4, &o), 0);
	/* The hook runs before one call: find the link's number first. */
	int link_at = first_call_of_commit(b, "linkat");

	unlinkat(f->dirfd, "late", 0);
	appear_dirfd = f->dirfd;
	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	assert_int_equal(fsafe_batch_add(b, f->dirfd, "late", "ours", 4, &o), 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_HOOK, .at = link_at,
	                                    .hook = appear_before_link });
	fsafe_batch_commit(b);
	fault_remove();
	assert_int_equal(fsafe_batch_result(b, 0), want);
	fsafe_batch_free(b);
	if (want == 0)
		assert_true(tu_equals(f->dir, "late", "ours", 4));
	else
		assert_true(tu_equals(f->dir, "late", "theirs", 6));
	assert_int_equal(tu_count_staging(f->dir), 0);
	assert_int_equal(fault_open_fds(), f->fds_before);
}

/* Replaced, as the target of a plain write always is; create-only
   refuses it, and theirs stays. */
static void a_target_made_before_the_link_is_replaced(void **state)
{
	late_target(*state, 0, 0);
	late_target(*state, FSAFE_CREATE_ONLY, -EEXIST);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(commits_with_io_uring),
		T(batch_error_detail),
		T(commits_with_the_pool),
		T(falls_back_when_io_uring_is_refused),
		T(a_failure_stays_with_its_item),
		T(dir_sync_failure_marks_its_directory),
		T(large_windows_sync_the_filesystem_once),
		T(others_dirty_data_keeps_syncfs_away),
		T(unknown_dirty_data_keeps_syncfs_away),
		T(syncfs_failure_fails_what_it_covered),
		T(the_default_window_follows_the_descriptor_limit),
		T(freeing_uncommitted_changes_nothing),
		T(memory_stays_bounded),
		T(plain_names_borrow_the_callers_directory),
		T(a_swept_stage_is_written_again),
		T(new_files_are_linked_at_their_names),
		T(new_files_are_renamed_elsewhere),
		T(few_directories_are_asked_about),
		T(a_target_made_before_the_link_is_replaced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
