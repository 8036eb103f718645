/*
 * libFuzzer target for the contained-path resolver.
 *
 * Input: one selector byte (bits 0-1: strict/in-root x openat2/walk, bits
 * 2-4: the operation) and the path bytes (a '\n' splits a rename's two
 * paths; a NUL byte is a hostile input of its own). The scratch root holds
 * links that climb out, point to /, to the outside, to /proc, loops and a
 * hard link to the sentinel.
 *
 * After every input, abort() (a finding) if:
 *  - anything outside the root changed (the picture of the root's parent:
 *    the sentinel's bytes, the outside directory and its files);
 *  - an fd the resolver returned is not beneath the root (/proc/self/fd);
 *  - a path the lexical check refuses is accepted by an operation, or a
 *    NUL byte gets through the check;
 *  - openat2 and the walk disagree on a directory resolution.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsafe.h"
#include "resolve.h"
#include "snap.h"

static char scratch[PATH_MAX], rootpath[PATH_MAX], outpath[PATH_MAX];
static char *baseline, *root_baseline;
static fsafe_root *roots[4];
static struct fsafe__resolver resolvers[4];
static int rootfd = -1;
static int outfd = -1;

static const unsigned modes[4] = {
	0,
	FSAFE_ROOT_IN_ROOT_SYMLINKS,
	FSAFE_ROOT_NO_OPENAT2,
	FSAFE_ROOT_NO_OPENAT2 | FSAFE_ROOT_IN_ROOT_SYMLINKS,
};

static void die(const char *what, const char *path, size_t len)
{
	fprintf(stderr, "fuzz_root: %s (path \"%.*s\")\n", what, (int)len, path);
	abort();
}

static void at(char *out, const char *rel)
{
	if (snprintf(out, PATH_MAX, "%s/%s", rootpath, rel) >= PATH_MAX)
		abort();
}

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX];
	at(p, rel);
	FILE *f = fopen(p, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		abort();
}

static void ln(const char *target, const char *rel)
{
	char p[PATH_MAX];
	at(p, rel);
	if (symlink(target, p) < 0)
		abort();
}

static void dir(const char *rel)
{
	char p[PATH_MAX];
	at(p, rel);
	if (mkdir(p, 0755) < 0)
		abort();
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *f)
{
	(void)st, (void)flag;
	if (f->level > 0)
		remove(p);
	return 0;
}

/* The root's contents, planted again after every input that could have
   changed them. */
static void plant(void)
{
	char buf[PATH_MAX + 32];

	nftw(rootpath, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	dir("a");
	dir("a/b");
	dir("sub");
	dir("outside");
	put("f", "inside");
	put("a/f", "inside");
	ln("..", "up");
	ln("../..", "up2");
	ln("/", "abs");
	ln(outpath, "out");
	ln("../outside", "relout");
	ln("../../outside", "a/deep");
	ln("loop", "loop");
	ln("l2", "l1");
	ln("l1", "l2");
	snprintf(buf, sizeof(buf), "%s/sentinel", scratch);
	ln(buf, "sent");
	ln("../sentinel", "fsent");
	ln("/proc/self/root", "proc");
	snprintf(buf, sizeof(buf), "/proc/self/fd/%d", outfd);
	ln(buf, "fdl");
	ln("sub", "inside");
	ln("/a/b", "ab");
	/* A hard link out: the documented limit; writes replace the name. */
	char target[PATH_MAX + 16];
	snprintf(target, sizeof(target), "%s/sentinel", scratch);
	at(buf, "hl");
	if (link(target, buf) < 0)
		abort();
}

static void cleanup(void)
{
	for (int i = 0; i < 4; i++)
		fsafe_root_close(roots[i]);
	nftw(scratch, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	rmdir(scratch);
}

/* tmpfs when there is one: the root is planted again after most inputs
   that change it, and ext4 makes that the bottleneck. */
static const char *scratch_base(void)
{
	const char *tmp = getenv("TMPDIR");

	if (access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	return tmp ? tmp : "/tmp";
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char raw[PATH_MAX];

	(void)argc, (void)argv;
	snprintf(raw, sizeof(raw), "%s/fsafe-fuzz-XXXXXX", scratch_base());
	if (!mkdtemp(raw) || !realpath(raw, scratch))
		abort();
	snprintf(rootpath, sizeof(rootpath), "%s/root", scratch);
	snprintf(outpath, sizeof(outpath), "%s/outside", scratch);
	if (mkdir(rootpath, 0755) < 0 || mkdir(outpath, 0755) < 0)
		abort();
	snprintf(raw, sizeof(raw), "%s/sentinel", scratch);
	FILE *f = fopen(raw, "w");
	if (!f || fputs("SENTINEL", f) < 0 || fclose(f) != 0)
		abort();
	snprintf(raw, sizeof(raw), "%s/victim", outpath);
	if (!(f = fopen(raw, "w")) || fputs("outside", f) < 0 || fclose(f))
		abort();
	outfd = open(outpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	plant();
	rootfd = open(rootpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;
	for (int i = 0; i < 4; i++) {
		ro.flags = modes[i];
		if (fsafe_root_open(AT_FDCWD, rootpath, &ro, &roots[i]) < 0 ||
		    fsafe__resolver_init(&resolvers[i], rootfd, modes[i]) < 0)
			abort();
	}
	baseline = snap_take(scratch, "root");
	root_baseline = snap_take(rootpath, NULL);
	atexit(cleanup);
	return 0;
}

/* An fd the resolver handed out must lie beneath the root. */
static void check_beneath(int fd, const char *path, size_t len)
{
	char link[64], got[PATH_MAX];
	size_t n = strlen(rootpath);

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, got, sizeof(got) - 1);
	if (k < 0)
		die("readlink of a returned fd failed", path, len);
	got[k] = '\0';
	if (strncmp(got, rootpath, n) != 0 || (got[n] && got[n] != '/'))
		die("a returned fd is outside the root", path, len);
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The resolver itself, both ways, must agree and stay beneath. */
static void resolve_both(unsigned policy, const char *path, size_t len)
{
	struct fsafe__rpath *p = malloc(sizeof(*p));
	struct fsafe__rerr e;
	int fd[2];

	if (!p || fsafe__rpath_parse(p, path, len, false, &e) < 0) {
		free(p);
		return;
	}
	for (int i = 0; i < 2; i++) {
		const struct fsafe__resolver *res =
			&resolvers[policy | (i ? 2 : 0)];
		fd[i] = fsafe__resolve_dir(res, p, p->n, &e);
		if (fd[i] >= 0)
			check_beneath(fd[i], path, len);
	}
	bool agree = (fd[0] < 0 && fd[0] == fd[1]) ||
	             (fd[0] >= 0 && fd[1] >= 0 && same_file(fd[0], fd[1])) ||
	             fd[1] == -ENAMETOOLONG; /* the walk splices link texts */
	if (!agree) {
		fprintf(stderr, "openat2: %d, walk: %d\n", fd[0], fd[1]);
		die("openat2 and the walk disagree", path, len);
	}
	for (int i = 0; i < 2; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	free(p);
}

static int run_op(fsafe_root *r, int op, const char *a, const char *b)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	int fd;

	o.flags = FSAFE_NO_SYNC;
	switch (op) {
	case 0:
		fd = fsafe_root_open_read(r, a);
		if (fd >= 0) {
			check_beneath(fd, a, strlen(a));
			close(fd);
		}
		return fd < 0 ? fd : 0;
	case 1: return fsafe_root_write_file(r, a, "x", 1, &o);
	case 2:
		o.flags |= FSAFE_MKDIR;
		return fsafe_root_write_file(r, a, "x", 1, &o);
	case 3:
		o.flags |= FSAFE_NO_FOLLOW | FSAFE_CREATE_ONLY;
		return fsafe_root_write_file(r, a, "x", 1, &o);
	case 4: return fsafe_root_mkdir_all(r, a, 0, FSAFE_ROOT_OP_NO_SYNC);
	case 5: return fsafe_root_unlink(r, a, FSAFE_ROOT_OP_NO_SYNC);
	case 6: return fsafe_root_rename(r, a, b, FSAFE_ROOT_OP_NO_SYNC);
	default: return fsafe_root_sweep(r, a, 0, 0, NULL, NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 2 * PATH_MAX)
		return 0;
	unsigned mode = data[0] & 3, op = (data[0] >> 2) & 7;
	const char *raw = (const char *)data + 1;
	size_t len = size - 1;

	int lex = fsafe_root_check_path(raw, len);
	if (memchr(raw, '\0', len) && lex != -EINVAL)
		die("a NUL byte passed the lexical check", raw, len);

	/* What a C caller would pass: up to the first NUL; a '\n' splits a
	   rename's two paths. */
	char *a = strndup(raw, len), *b = strchr(a, '\n');
	if (b)
		*b++ = '\0';
	size_t alen = strlen(a);
	lex = fsafe_root_check_path(a, alen);

	resolve_both(mode & 1, a, alen);
	int r = run_op(roots[mode], (int)op, a, b ? b : "renamed");
	if (lex < 0 && r != lex)
		die("an operation accepted a path the lexical check refuses", a,
		    alen);

	char *now = snap_take(scratch, "root");
	if (strcmp(now, baseline) != 0) {
		fprintf(stderr, "before:\n%s\nafter:\n%s\n", baseline, now);
		die("something outside the root changed", a, alen);
	}
	free(now);
	if (op >= 1 && op <= 6) {
		now = snap_take(rootpath, NULL);
		if (strcmp(now, root_baseline) != 0) {
			plant();
			free(root_baseline);
			root_baseline = snap_take(rootpath, NULL);
		}
		free(now);
	}
	free(a);
	return 0;
}
