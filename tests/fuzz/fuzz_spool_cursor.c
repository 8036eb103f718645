/*
 * libFuzzer target for the spool's cursor file: its parser alone, then
 * the whole path a spool takes with that file as its cursor.
 *
 * Input: the cursor file's bytes (selector-free: the file is the input).
 * abort() (a finding) if: a cursor the parser accepts does not encode
 * back to the same bytes, or it accepts 0; a rejected cursor is not
 * reported by fsafe_spool_check exactly once (the spool here has no
 * segments, so an accepted cursor past 1 is "ahead of the data" and
 * nothing else); check changes the directory; repair leaves a cursor check
 * still calls bad, or loses the bytes it rejected (they must be in
 * quarantine/); an append after repair reuses a number below the cursor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fsafe.h"
#include "fsafe/spool.h"
#include "spool.h"

static char dir[256];
static int dirfd_ = -1;

static void cleanup(void);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof(dir), "%s/fsafe-fuzz-cursor-XXXXXX", base);
	if (!mkdtemp(dir) ||
	    (dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		abort();
	atexit(cleanup);
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* The scratch directory, gone when the fuzzer exits. */
static void cleanup(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The spool of the last input, gone (no fork per input: speed). */
static void rm_spool(void)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/sp", dir);
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0 &&
	    errno != ENOENT)
		abort();
}

static void put(const char *name, const uint8_t *data, size_t size)
{
	int fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	                0600);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
}

static int count(const struct fsafe_damage *d, void *arg)
{
	int *n = arg;

	if (d->action == NULL && strcmp(d->path, "cursor") != 0)
		abort(); /* only the cursor can be wrong here */
	++*n;
	return 0;
}

static void parse_alone(const uint8_t *data, size_t size, uint64_t *cursor,
                        const char **why)
{
	unsigned char back[FSAFE__CURSOR_LEN];

	*why = fsafe__cursor_decode(data, size, cursor);
	if (*why)
		return;
	if (*cursor == 0)
		abort();
	fsafe__cursor_encode(back, *cursor);
	if (size != sizeof(back) || memcmp(back, data, size) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	const char *why;
	uint64_t cursor = 0, first = 0;
	fsafe_spool *s;
	struct stat b1, b2;
	int n = 0;

	parse_alone(data, size, &cursor, &why);
	rm_spool();
	if (mkdirat(dirfd_, "sp", 0700) < 0)
		abort();
	put("sp/cursor", data, size);
	if (fstatat(dirfd_, "sp/cursor", &b1, 0) < 0)
		abort();
	/* Check: read-only, the cursor reported once when it is bad. */
	if (fsafe_spool_check(dirfd_, "sp", count, &n) != n ||
	    n != (why || cursor > 1 ? 1 : 0))
		abort();
	if (fstatat(dirfd_, "sp/cursor", &b2, 0) < 0 ||
	    b1.st_ino != b2.st_ino || b1.st_size != b2.st_size ||
	    faccessat(dirfd_, "sp/quarantine", F_OK, 0) == 0)
		abort();
	/* Repair: the rejected bytes go to quarantine, never away. */
	if (fsafe_spool_repair(dirfd_, "sp", NULL, NULL) < 0)
		abort();
	if (why && (faccessat(dirfd_, "sp/quarantine/cursor", F_OK, 0) != 0 ||
	            faccessat(dirfd_, "sp/cursor", F_OK, 0) == 0))
		abort();
	/* An append gets no number below an accepted cursor. */
	if (fsafe_spool_open(dirfd_, "sp", &o, &s) < 0)
		abort();
	struct iovec v = { (void *)"r", 1 };
	if (fsafe_spool_append(s, &v, 1, &first) == 0 && !why &&
	    cursor != UINT64_MAX && first < cursor)
		abort();
	fsafe_spool_stat(s, &st);
	fsafe_spool_close(s);
	return 0;
}
