/*
 * A real full disk: a 1 MiB tmpfs of our own (root and a private mount
 * namespace; otherwise every test says SKIP with the reason). Whatever runs
 * out of space, the write fails with -ENOSPC, committed files keep their
 * content and nothing is left behind; once space is freed, writes work.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "fsafe/batch.h"
#include "testutil.h"

enum { FS_SIZE = 1 << 20, OLD_LEN = 4096, ITEM_LEN = 64 * 1024, ITEMS = 24 };

static const char *no_mount_reason;

struct disk {
	char *scratch;
	char dir[4096]; /* the tmpfs */
	int dirfd;
};

/* Mounts stay in our own namespace and go with the process. */
static void try_private_mounts(void)
{
	if (geteuid() != 0)
		no_mount_reason = "not root";
	else if (unshare(CLONE_NEWNS) < 0)
		no_mount_reason = "unshare(CLONE_NEWNS) refused";
	else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		no_mount_reason = "cannot make / private";
}

static int setup(void **state)
{
	struct disk *d = calloc(1, sizeof(*d));

	if (!d)
		return -1;
	d->scratch = tu_mkscratch();
	d->dirfd = -1;
	*state = d;
	if (no_mount_reason)
		return 0;
	snprintf(d->dir, sizeof(d->dir), "%s/fs", d->scratch);
	if (mkdir(d->dir, 0755) < 0 ||
	    mount("fsafe-full", d->dir, "tmpfs", 0, "size=1m,mode=0755") < 0) {
		no_mount_reason = "mount tmpfs refused";
		return 0;
	}
	d->dirfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return d->dirfd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct disk *d = *state;

	if (d->dirfd >= 0) {
		close(d->dirfd);
		umount2(d->dir, MNT_DETACH);
	}
	tu_rmtree(d->scratch);
	free(d->scratch);
	free(d);
	return 0;
}

static void skip_without_mounts(void)
{
	if (no_mount_reason) {
		print_message("SKIP: needs root and a tmpfs of its own (%s)\n",
		              no_mount_reason);
		skip();
	}
}

static unsigned char *pattern(size_t len, unsigned seed)
{
	unsigned char *b = malloc(len);

	assert_non_null(b);
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(i * 31 + seed);
	return b;
}

/* Fill the filesystem with "filler" until a write says ENOSPC. */
static void fill(struct disk *d)
{
	static const char block[4096];
	int fd = openat(d->dirfd, "filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	while (write(fd, block, sizeof(block)) > 0)
		;
	assert_int_equal(errno, ENOSPC);
	close(fd);
}

static void assert_no_staging(struct disk *d)
{
	assert_int_equal(tu_count_staging(d->dir), 0);
}

/*
 * A one-shot write larger than the free space fails where it reserves
 * its space, before copying anything; a small one fails in its write. A
 * managed writer fails in its write and says so again at commit. OLD
 * stays, nothing is left, and freeing space makes the same write work.
 */
static void single_writes(void **state)
{
	struct disk *d = *state;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_error err = { 0 };
	unsigned char *old, *big;
	fsafe_writer *w;

	skip_without_mounts(); /* before anything is allocated: skip() jumps */
	old = pattern(OLD_LEN, 1);
	big = pattern(2 * FS_SIZE, 2);
	o.error = &err;
	tu_put(d->dir, "keep", old, OLD_LEN);
	assert_int_equal(fsafe_write_fileat(d->dirfd, "keep", big, 2 * FS_SIZE,
	                                    &o), -ENOSPC);
	assert_string_equal(err.step, "allocate");
	assert_true(tu_equals(d->dir, "keep", old, OLD_LEN));
	assert_int_equal(tu_count_entries(d->dir), 1);

	fill(d);
	assert_int_equal(fsafe_write_fileat(d->dirfd, "keep", big, 8192, &o),
	                 -ENOSPC);
	assert_string_equal(err.step, "write");
	assert_true(tu_equals(d->dir, "keep", old, OLD_LEN));
	assert_int_equal(fsafe_writer_open(d->dirfd, "keep", &o, &w), 0);
	assert_int_equal(fsafe_writer_write(w, big, 8192), -ENOSPC);
	assert_int_equal(fsafe_writer_commit(w), -ENOSPC);
	assert_true(tu_equals(d->dir, "keep", old, OLD_LEN));
	assert_int_equal(tu_count_entries(d->dir), 2); /* keep, filler */

	assert_int_equal(unlinkat(d->dirfd, "filler", 0), 0);
	assert_int_equal(fsafe_write_fileat(d->dirfd, "keep", big, 8192, &o), 0);
	assert_true(tu_equals(d->dir, "keep", big, 8192));
	assert_no_staging(d);
	free(old);
	free(big);
}

static void item_name(int i, char *buf, size_t len)
{
	snprintf(buf, len, "item-%02d", i);
}

/* Commit items 0..n-1 (ITEM_LEN each) in one batch; per item, its result
   agrees with what the disk holds. Returns how many failed. */
static int commit_all(struct disk *d, int n, unsigned char *const *content,
                      const bool *had_old, const unsigned char *old)
{
	fsafe_batch *b;
	char name[32];
	int failed = 0;

	assert_int_equal(fsafe_batch_new(NULL, &b), 0);
	for (int i = 0; i < n; i++) {
		item_name(i, name, sizeof(name));
		assert_int_equal(fsafe_batch_add(b, d->dirfd, name, content[i],
		                                 ITEM_LEN, NULL), i);
	}
	int r = fsafe_batch_commit(b);
	for (int i = 0; i < n; i++) {
		int ri = fsafe_batch_result(b, (size_t)i);
		item_name(i, name, sizeof(name));
		if (ri == 0) {
			assert_true(tu_equals(d->dir, name, content[i], ITEM_LEN));
			continue;
		}
		assert_int_equal(ri, -ENOSPC);
		if (had_old[i])
			assert_true(tu_equals(d->dir, name, old, OLD_LEN));
		else
			assert_int_equal(faccessat(d->dirfd, name, F_OK, 0), -1);
		failed++;
	}
	assert_int_equal(r, failed); /* the number of items that failed */
	fsafe_batch_free(b);
	assert_no_staging(d);
	print_message("batch of %d on a 1 MiB disk: %d committed, %d out of "
	              "space\n", n, n - failed, failed);
	return failed;
}

/*
 * The disk fills in the middle of a batch: the items that fit are
 * committed, the rest fail with -ENOSPC and keep OLD (or stay absent);
 * no other item is disturbed and nothing is left. Once those files are
 * removed, a batch that fits commits whole.
 */
static void batch_fills_the_disk_midway(void **state)
{
	struct disk *d = *state;
	unsigned char *content[ITEMS];
	unsigned char *old;
	bool had_old[ITEMS];
	char name[32];

	skip_without_mounts(); /* before anything is allocated: skip() jumps */
	old = pattern(OLD_LEN, 3);
	for (int i = 0; i < ITEMS; i++) {
		content[i] = pattern(ITEM_LEN, (unsigned)(10 + i));
		had_old[i] = i % 3 == 0;
		item_name(i, name, sizeof(name));
		if (had_old[i])
			tu_put(d->dir, name, old, OLD_LEN);
	}
	int failed = commit_all(d, ITEMS, content, had_old, old);
	assert_true(failed > 0);
	assert_true(failed < ITEMS);

	for (int i = 0; i < ITEMS; i++) {
		item_name(i, name, sizeof(name));
		unlinkat(d->dirfd, name, 0);
		had_old[i] = false;
	}
	assert_int_equal(commit_all(d, ITEMS / 2, content, had_old, old), 0);
	for (int i = 0; i < ITEMS; i++)
		free(content[i]);
	free(old);
}

int main(void)
{
	try_private_mounts();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(single_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(batch_fills_the_disk_midway,
		                                setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
