/*
 * What keeping the old file's extended attributes costs a durable replace,
 * by the method of paired.c: three arms take turns write by write in one
 * process (each turn the next of the six orders), each replacing its own
 * target of SIZE bytes:
 *
 *   plain   a target without attributes, FSAFE_NO_XATTRS: the write as it
 *           was before attributes were copied (the same system calls)
 *   listed  the same target, default flags: one listxattrat more
 *   xattrs  a target with a user.* attribute and a POSIX ACL (3 attributes
 *           with the ACL's mask), default flags: copied on every write
 *
 *   replace_paired DIR K SIZE       -> "plain S listed S xattrs S"
 *   replace_paired DIR once ARM     -> one write of ARM between two
 *                                      getppid() markers, for strace
 *
 * Build: cc -O2 -Iinclude bench/replace_paired.c -Lout/gcc -lfsafe
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"

enum { PLAIN, LISTED, XATTRS, N };
static const char *const arm[N] = { "plain", "listed", "xattrs" };

/* A POSIX ACL in its xattr form: user::rw- user:65534:r-- group::r--
   mask::r-- other::r--. */
static const unsigned char acl[] = {
	2, 0, 0, 0,
	1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
	2, 0, 4, 0, 0xfe, 0xff, 0, 0,
	4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
	0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
	0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "replace_paired: %s: %s\n", what, strerror(err));
	exit(1);
}

static int one(int a, int dirfd, const void *buf, size_t len)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.flags = a == PLAIN ? FSAFE_NO_XATTRS : 0;
	return fsafe_write_fileat(dirfd, "target", buf, len, &o);
}

static int prepare(const char *root, int a)
{
	char dir[4200], path[4300];
	static const char first[] = "first";

	snprintf(dir, sizeof(dir), "%s/%s", root, arm[a]);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		die(dir, errno);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die(dir, errno);
	if (one(PLAIN, fd, first, sizeof(first)) < 0)
		die("the first target", EIO);
	snprintf(path, sizeof(path), "%s/target", dir);
	if (a == XATTRS && (setxattr(path, "user.origin", "x", 1, 0) < 0 ||
	                    setxattr(path, "system.posix_acl_access", acl,
	                             sizeof(acl), 0) < 0))
		die("setxattr", errno);
	return fd;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: replace_paired DIR K SIZE\n"
		                "       replace_paired DIR once ARM\n");
		return 2;
	}
	static unsigned char buf[4096];
	if (!strcmp(argv[2], "once")) {
		int a = !strcmp(argv[3], "xattrs") ? XATTRS
		      : !strcmp(argv[3], "listed") ? LISTED : PLAIN;
		int fd = prepare(argv[1], a);
		getppid();
		int r = one(a, fd, buf, sizeof(buf));
		getppid();
		return r < 0;
	}
	long k = atol(argv[2]);
	size_t len = (size_t)atol(argv[3]);
	unsigned char *data = malloc(len ? len : 1);
	int fd[N];
	double spent[N] = { 0 };

	if (k <= 0 || !data)
		die("arguments", EINVAL);
	memset(data, 7, len);
	for (int a = 0; a < N; a++)
		fd[a] = prepare(argv[1], a);
	sync();
	for (long w = 0; w < k; w++) {
		static const int order[6][N] = { { 0, 1, 2 }, { 0, 2, 1 },
			                         { 1, 0, 2 }, { 1, 2, 0 },
			                         { 2, 0, 1 }, { 2, 1, 0 } };
		for (int j = 0; j < N; j++) {
			int a = order[w % 6][j];
			data[0] = (unsigned char)w;
			double t0 = now();
			int r = one(a, fd[a], data, len);
			spent[a] += now() - t0;
			if (r < 0)
				die(arm[a], -r);
		}
	}
	printf("plain %.6f listed %.6f xattrs %.6f\n", spent[PLAIN],
	       spent[LISTED], spent[XATTRS]);
	return 0;
}
