/*
 * The escape corpus: each case plants a tree inside a fresh root, runs one
 * operation on one hostile (or benign) path, and asserts the result AND
 * that nothing outside the root changed: the sentinel byte for byte, a
 * full picture of the root's parent (the sentinel, an "outside" directory
 * with a victim file and a stale staging file), no inotify event there
 * (nothing created outside even transiently), and no probe file in / or
 * /etc.
 *
 * Every case runs four times: openat2 and the forced walk, each with the
 * strict and the in-root policy. Cases that need mounts (a bind mount for
 * FSAFE_ROOT_NO_XDEV, procfs for real magic links) run in a private mount
 * namespace, and skip with the reason where that is not permitted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "snap.h"
#include "sys.h"
#include "testutil.h"

enum op {
	W,  /* fsafe_root_write_file */
	WM, /* ... with FSAFE_MKDIR */
	WN, /* ... with FSAFE_NO_FOLLOW */
	WC, /* ... with FSAFE_CREATE_ONLY */
	WR, /* fsafe_root_writer_open + commit */
	RD, /* fsafe_root_open_read */
	MK, /* fsafe_root_mkdir_all */
	UL, /* fsafe_root_unlink */
	RN, /* fsafe_root_rename path -> path2 */
	SW, /* fsafe_root_sweep, age 0 */
	CK, /* fsafe_root_check_path with an explicit length */
};

struct esc {
	const char *name;
	const char *setup;  /* see plant() */
	enum op op;
	const char *path, *path2;
	int strict, inroot; /* expected results */
	const char *land_s, *land_r; /* where a success lands (in the root) */
	unsigned extra;     /* more fsafe_root_open flags */
	size_t len;         /* CK: bytes of path */
	const char *comp;   /* strict: the component the error names */
};

#define PAYLOAD "PAYLOAD"
#define PROBE "fsafe-escape-probe"
#define XDEV FSAFE_ROOT_NO_XDEV

static const char name_max[NAME_MAX + 1] =
	"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
	"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
	"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
	"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy";
static const char name_over[] =
	"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
	"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
	"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
	"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz";

/*
 * Every root starts with: a/ a/b/ a/f sub/ sub2/ inside. Placeholders in
 * setups and paths: @OUT the outside directory, @S the root's parent,
 * @SENT the sentinel, @OUTREL / @SREL those without the leading '/', @FD
 * an fd open on @OUT, @PID our pid, @LONG a path of PATH_MAX bytes.
 */
#define X(n, set, o, p, s, r, ...) \
	{ .name = n, .setup = set, .op = o, .path = p, .strict = s, \
	  .inroot = r, __VA_ARGS__ }

static const struct esc cases[] = {
	/* Lexical. */
	X("empty", "", W, "", -EINVAL, -EINVAL),
	X("abs_etc", "", W, "/etc/" PROBE, -EXDEV, -EXDEV, .comp = "/"),
	X("abs_slash", "", W, "/", -EXDEV, -EXDEV),
	X("abs_outside", "", W, "@OUT/victim", -EXDEV, -EXDEV),
	X("abs_double", "", W, "//" PROBE, -EXDEV, -EXDEV),
	X("up", "", W, "../x", -EXDEV, -EXDEV, .comp = ".."),
	X("up_only", "", W, "..", -EXDEV, -EXDEV),
	X("a_up_up", "", W, "a/../../x", -EXDEV, -EXDEV),
	X("a_up_up_out", "", W, "a/../../outside/victim", -EXDEV, -EXDEV),
	X("dot_up", "", W, "./../x", -EXDEV, -EXDEV),
	X("mixed_up", "", W, "a/./../.././x", -EXDEV, -EXDEV),
	X("deep_up", "", W, "a/b/../../../sentinel", -EXDEV, -EXDEV),
	X("reenter", "", W, "../root/x", -EXDEV, -EXDEV),
	X("up_many", "", W, "a/b/../../../../../../etc/" PROBE, -EXDEV,
	  -EXDEV),
	X("double_slash", "", W, "a//x", 0, 0, .land_s = "a/x",
	  .land_r = "a/x"),
	X("dot_prefix", "", W, "./x", 0, 0, .land_s = "x", .land_r = "x"),
	X("dot_middle", "", W, "a/./b/./x", 0, 0, .land_s = "a/b/x",
	  .land_r = "a/b/x"),
	X("trailing_slash", "", W, "x/", -EINVAL, -EINVAL),
	X("trailing_dot", "", W, "a/.", -EINVAL, -EINVAL),
	X("trailing_dotdot", "", W, "a/..", -EINVAL, -EINVAL),
	X("dot", "", W, ".", -EINVAL, -EINVAL),
	X("name_over_max", "", W, name_over, -ENAMETOOLONG, -ENAMETOOLONG),
	X("name_max", "", W, name_max, 0, 0, .land_s = name_max,
	  .land_r = name_max),
	X("path_max", "", W, "@LONG", -ENAMETOOLONG, -ENAMETOOLONG),
	X("nul_up", "", CK, "a\0/../../x", -EINVAL, -EINVAL, .len = 10),
	X("nul_end", "", CK, "x\0", -EINVAL, -EINVAL, .len = 2),
	X("check_ok", "", CK, "a/b", 0, 0, .len = 3),
	X("check_up", "", CK, "a/../..", -EXDEV, -EXDEV, .len = 7),
	X("inside_up", "", W, "a/../x", 0, 0, .land_s = "x", .land_r = "x"),
	X("missing_up", "", W, "missing/../x", -ENOENT, -ENOENT),
	X("file_up", "", W, "inside/../x", -ENOTDIR, -ENOTDIR),

	/* Symbolic links on the way. */
	X("link_slash", "l:l=/", W, "l/x", -ELOOP, 0, .land_r = "x",
	  .comp = "l"),
	X("link_up", "l:l=..", W, "l/x", -ELOOP, 0, .land_r = "x"),
	X("link_up2", "l:l=../..", W, "l/x", -ELOOP, 0, .land_r = "x"),
	X("link_up_many", "l:l=../../../../../../../..", W, "l/x", -ELOOP, 0,
	  .land_r = "x"),
	X("link_abs_out", "l:l=@OUT", W, "l/victim", -ELOOP, -ENOENT),
	X("link_abs_out_mkdir", "l:l=@OUT", WM, "l/victim", -ELOOP, -ENOENT),
	X("link_rel_out", "l:l=../outside", W, "l/victim", -ELOOP, -ENOENT),
	X("link_rel_out_mkdir", "l:l=../outside", WM, "l/victim", -ELOOP,
	  -ENOENT),
	X("chain_climb", "l:l1=a/l2 l:a/l2=../../outside", W, "l1/victim",
	  -ELOOP, -ENOENT, .comp = "l1"),
	X("chain_climb_deep", "l:l1=l2 l:l2=l3 l:l3=../../..", W, "l1/x",
	  -ELOOP, 0, .land_r = "x"),
	X("chain_abs", "l:l1=sub/l2 l:sub/l2=@S", W, "l1/sentinel", -ELOOP,
	  -ENOENT),
	X("loop2", "l:l1=l2 l:l2=l1", W, "l1/x", -ELOOP, -ELOOP),
	X("loop_self", "l:l=l", W, "l/x", -ELOOP, -ELOOP),
	X("loop_dot", "l:l=./l", W, "l/x", -ELOOP, -ELOOP),
	X("dir_replaced", "x:a l:a=@OUT", W, "a/victim", -ELOOP, -ENOENT),
	X("dir_replaced_rel", "x:a l:a=../outside", W, "a/victim", -ELOOP,
	  -ENOENT, .comp = "a"),
	X("mid_link_file", "l:l=@SENT", W, "l/x", -ELOOP, -ENOENT),
	X("link_inside", "l:l=sub", W, "l/x", -ELOOP, 0, .land_r = "sub/x"),
	X("link_abs_inside", "l:l=/sub", W, "l/x", -ELOOP, 0,
	  .land_r = "sub/x"),
	X("link_up_inside", "l:l=sub/../sub2", W, "l/x", -ELOOP, 0,
	  .land_r = "sub2/x"),
	X("nested_link_out", "l:sub/l=../../../outside", W, "sub/l/victim",
	  -ELOOP, -ENOENT, .comp = "l"),
	X("link_then_up", "l:sub/l=/", W, "sub/l/../x", -ELOOP, 0,
	  .land_r = "x"),
	X("proc_root_link", "l:l=/proc/self/root", W, "l/@SREL", -ELOOP,
	  -ENOENT),
	X("proc_fd_link", "l:l=/proc/self/fd/@FD", W, "l/victim", -ELOOP,
	  -ENOENT),
	X("proc_cwd_link", "l:l=/proc/self/cwd", W, "l/x", -ELOOP, -ENOENT),
	X("proc_pid_link", "l:l=/proc/@PID/root", W, "l/@SREL", -ELOOP,
	  -ENOENT),

	X("link_inside_mkdir", "l:l=/sub", WM, "l/new/x", -ELOOP, 0,
	  .land_r = "sub/new/x"),
	X("mkdir_link_inside", "l:l=sub/../a", MK, "l/b/c/d", -ELOOP, 0,
	  .land_r = "a/b/c/d"),

	/* A link as the last component. */
	X("final_abs_sent", "l:fl=@SENT", W, "fl", -ELOOP, -ENOENT,
	  .comp = "fl"),
	X("final_rel_sent", "l:fl=../sentinel", W, "fl", -ELOOP, 0,
	  .land_r = "sentinel"),
	X("final_root_sent", "l:fl=/sentinel", W, "fl", -ELOOP, 0,
	  .land_r = "sentinel"),
	X("final_nofollow", "l:fl=@SENT", WN, "fl", 0, 0, .land_s = "fl",
	  .land_r = "fl"),
	X("final_create_only", "l:fl=@OUT/new", WC, "fl", -ELOOP, -ENOENT),
	X("final_create_rel", "l:fl=../sentinel", WC, "fl", -ELOOP, 0,
	  .land_r = "sentinel"),
	X("final_inside", "l:fl=inside", W, "fl", -ELOOP, 0,
	  .land_r = "inside"),
	X("final_to_dir", "l:fl=sub", W, "fl", -ELOOP, -EISDIR),
	X("final_to_up", "l:fl=..", W, "fl", -ELOOP, -EISDIR),
	X("final_chain_out", "l:fl=l2 l:l2=../../outside/victim", W, "fl",
	  -ELOOP, -ENOENT),
	X("final_loop", "l:fl=fl", W, "fl", -ELOOP, -ELOOP),
	X("final_writer", "l:fl=@SENT", WR, "fl", -ELOOP, -ENOENT),

	/* Real magic links: procfs mounted inside the root. */
	X("procfs_root", "p:proc", W, "proc/@PID/root/@SREL", -ELOOP, -ELOOP),
	X("procfs_fd", "p:proc", W, "proc/@PID/fd/@FD/victim", -ELOOP, -ELOOP),
	X("procfs_self", "p:proc", W, "proc/self/root/@SREL", -ELOOP, -ELOOP),
	X("procfs_cwd", "p:proc", W, "proc/@PID/cwd/" PROBE, -ELOOP, -ELOOP),
	X("procfs_final", "p:proc", RD, "proc/@PID/fd/@FD", -ELOOP, -ELOOP),
	X("procfs_final_write", "p:proc", W, "proc/@PID/fd/@FD", -ELOOP,
	  -ELOOP),

	/* Hard links made before: a documented limit, yet writes replace
	   the name and never touch the outside file. */
	X("hardlink_write", "h:hl=@SENT", W, "hl", 0, 0, .land_s = "hl",
	  .land_r = "hl"),
	X("hardlink_read", "h:hl=@SENT", RD, "hl", 0, 0),
	X("hardlink_unlink", "h:hl=@SENT", UL, "hl", 0, 0),

	/* A bind mount of the outside inside the root, with NO_XDEV. */
	X("bind_write", "m:mnt", W, "mnt/victim", -EXDEV, -EXDEV,
	  .extra = XDEV),
	X("bind_read", "m:mnt", RD, "mnt/victim", -EXDEV, -EXDEV,
	  .extra = XDEV),
	X("bind_read_dir", "m:mnt", RD, "mnt", -EXDEV, -EXDEV, .extra = XDEV),
	X("bind_mkdir", "m:mnt", MK, "mnt/newdir", -EXDEV, -EXDEV,
	  .extra = XDEV),
	X("bind_sweep", "m:mnt", SW, "mnt", -EXDEV, -EXDEV, .extra = XDEV),
	X("xdev_plain", "", W, "a/x", 0, 0, .land_s = "a/x", .land_r = "a/x",
	  .extra = XDEV),

	/* The other operations. */
	X("read_up", "", RD, "../sentinel", -EXDEV, -EXDEV),
	X("read_link_dir", "l:l=@S", RD, "l/sentinel", -ELOOP, -ENOENT),
	X("read_final_link", "l:fl=@SENT", RD, "fl", -ELOOP, -ENOENT),
	X("read_dir", "", RD, "a/", 0, 0),
	/* A FIFO would block a reader forever: refused, never opened. */
	X("read_fifo", "q:fifo", RD, "fifo", -EINVAL, -EINVAL),
	X("read_fifo_via_link", "q:fifo l:l=/fifo", RD, "l", -ELOOP, -EINVAL),
	/* Nor is it replaced: a write refuses it, as any non-regular file. */
	X("write_over_fifo", "q:fifo", W, "fifo", -EBADFD, -EBADFD),
	X("mkdir_up", "", MK, "../newdir", -EXDEV, -EXDEV),
	X("mkdir_link_abs", "l:l=@OUT", MK, "l/newdir", -ELOOP, -ENOENT),
	X("mkdir_link_up", "l:l=../..", MK, "l/newdir", -ELOOP, 0,
	  .land_r = "newdir"),
	X("unlink_up", "", UL, "../sentinel", -EXDEV, -EXDEV),
	X("unlink_link_dir", "l:l=@OUT", UL, "l/victim", -ELOOP, -ENOENT),
	X("unlink_final_link", "l:fl=@SENT", UL, "fl", 0, 0),
	X("rename_to_up", "", RN, "a/f", -EXDEV, -EXDEV, .path2 = "../stolen"),
	X("rename_from_out", "l:l=@OUT", RN, "l/victim", -ELOOP, -ENOENT,
	  .path2 = "got"),
	X("rename_into_out", "l:l=@OUT", RN, "inside", -ELOOP, -ENOENT,
	  .path2 = "l/inside"),
	X("rename_link_itself", "l:fl=@SENT", RN, "fl", 0, 0, .path2 = "fl2"),
	X("sweep_up", "", SW, "../outside", -EXDEV, -EXDEV),
	X("sweep_link", "l:l=@OUT", SW, "l", -ELOOP, -ENOENT),
	X("sweep_abs", "", SW, "@OUT", -EXDEV, -EXDEV),
	X("writer_up", "", WR, "../x", -EXDEV, -EXDEV),
	X("writer_link", "l:l=/", WR, "l/x", -ELOOP, 0, .land_r = "x"),
	X("mkdir_write_up", "", WM, "../new/x", -EXDEV, -EXDEV),
	X("mkdir_write_link", "l:l=@OUT", WM, "l/new/x", -ELOOP, -ENOENT),
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* ------------------------------------------------------------------------ */

struct world {
	char *s, root[PATH_MAX], out[PATH_MAX], sent[PATH_MAX];
	int outfd;
	char mounted[2][PATH_MAX];
	int nmounted;
};

static bool can_mount;
static const char *no_mount_reason = "not tried";
static const char sentinel_bytes[] = "SENTINEL\0bytes\nthat must not change";

static void expand(const struct world *w, const char *in, char *out,
                   size_t cap)
{
	size_t n = 0;

	while (*in && n + 1 < cap) {
		char buf[PATH_MAX];
		const char *rep = NULL;
		size_t skip = 0;
		if (!strncmp(in, "@OUTREL", 7))
			rep = w->out + 1, skip = 7;
		else if (!strncmp(in, "@OUT", 4))
			rep = w->out, skip = 4;
		else if (!strncmp(in, "@SENT", 5))
			rep = w->sent, skip = 5;
		else if (!strncmp(in, "@SREL", 5))
			rep = w->sent + 1, skip = 5;
		else if (!strncmp(in, "@S", 2))
			rep = w->s, skip = 2;
		else if (!strncmp(in, "@FD", 3))
			snprintf(buf, sizeof(buf), "%d", w->outfd), rep = buf, skip = 3;
		else if (!strncmp(in, "@PID", 4))
			snprintf(buf, sizeof(buf), "%d", (int)getpid()), rep = buf,
				skip = 4;
		if (rep) {
			size_t k = strlen(rep);
			if (n + k >= cap)
				k = cap - n - 1;
			memcpy(out + n, rep, k);
			n += k;
			in += skip;
		} else {
			out[n++] = *in++;
		}
	}
	out[n < cap ? n : cap - 1] = '\0';
}

static void long_path(char *out)
{
	size_t n = 0;

	while (n + 2 < PATH_MAX + 8)
		out[n++] = 'a', out[n++] = '/';
	out[n++] = 'x';
	out[n] = '\0';
}

static void at_root(const struct world *w, const char *rel, char *out)
{
	if (snprintf(out, PATH_MAX, "%s/%s", w->root, rel) >= PATH_MAX)
		fail_msg("path too long: %s", rel);
}

/* Skip (with the reason) when mounts are not permitted here. */
static void mount_or_skip(struct world *w, const char *rel, bool proc)
{
	char path[PATH_MAX];

	if (!can_mount) {
		print_message("skipped: needs root and mount namespaces (%s)\n",
		              no_mount_reason);
		skip();
	}
	at_root(w, rel, path);
	assert_int_equal(mkdir(path, 0755), 0);
	int r = proc ? mount("proc", path, "proc", 0, NULL)
	             : mount(w->out, path, NULL, MS_BIND, NULL);
	if (r < 0) {
		print_message("skipped: mount %s: %s\n", path, strerror(errno));
		skip();
	}
	strcpy(w->mounted[w->nmounted++], path);
}

/*
 * Setup items, space-separated: d:P a directory, f:P a file, x:P remove a
 * tree, q:P a FIFO, l:P=T a symbolic link to T, h:P=F a hard link to F,
 * m:P the outside directory bind-mounted, p:P procfs mounted.
 */
static void plant(struct world *w, const char *setup)
{
	char buf[2 * PATH_MAX], *save = NULL;

	expand(w, setup, buf, sizeof(buf));
	for (char *it = strtok_r(buf, " ", &save); it;
	     it = strtok_r(NULL, " ", &save)) {
		char path[PATH_MAX], *eq = strchr(it + 2, '=');
		if (eq)
			*eq++ = '\0';
		at_root(w, it + 2, path);
		switch (it[0]) {
		case 'd': assert_int_equal(mkdir(path, 0755), 0); break;
		case 'f': tu_put(w->root, it + 2, "inside", 6); break;
		case 'x': tu_rmtree(path); break;
		case 'q': assert_int_equal(mkfifo(path, 0644), 0); break;
		case 'l': assert_int_equal(symlink(eq, path), 0); break;
		case 'h': assert_int_equal(link(eq, path), 0); break;
		case 'm': mount_or_skip(w, it + 2, false); break;
		case 'p': mount_or_skip(w, it + 2, true); break;
		default: fail_msg("bad setup item %s", it);
		}
	}
}

/* The world of the running case, for the teardown (which runs also
   when the case failed half-way). */
static struct world *current;

static void make_world(struct world *w)
{
	struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	char path[PATH_MAX + 64];

	memset(w, 0, sizeof(*w));
	w->outfd = -1;
	w->s = tu_mkscratch();
	current = w;
	snprintf(w->root, sizeof(w->root), "%s/root", w->s);
	snprintf(w->out, sizeof(w->out), "%s/outside", w->s);
	snprintf(w->sent, sizeof(w->sent), "%s/sentinel", w->s);
	assert_int_equal(mkdir(w->root, 0755), 0);
	assert_int_equal(mkdir(w->out, 0755), 0);
	tu_put(w->s, "sentinel", sentinel_bytes, sizeof(sentinel_bytes));
	tu_put(w->out, "victim", "outside", 7);
	/* A stale staging file: what a sweep through a link would take. */
	tu_put(w->out, ".fsafe-0123456789abcdef01234567.tmp", "x", 1);
	snprintf(path, sizeof(path), "%s/.fsafe-0123456789abcdef01234567.tmp",
	         w->out);
	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
	w->outfd = open(w->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(w->outfd >= 0);
	plant(w, "d:a d:a/b f:a/f d:sub d:sub2 f:inside");
}

static void free_world(struct world *w)
{
	while (w->nmounted > 0)
		umount2(w->mounted[--w->nmounted], MNT_DETACH);
	if (w->outfd >= 0)
		close(w->outfd);
	tu_rmtree(w->s);
	free(w->s);
	current = NULL;
}

static int teardown_case(void **state)
{
	(void)state;
	if (current)
		free_world(current);
	return 0;
}

/* ------------------------------------------------------------------------ */

/* openat2 calls seen, to prove which resolver ran. */
static int openat2_calls;
static struct fsafe_sys counting;

static int count_openat2(int d, const char *p, void *how, size_t size)
{
	openat2_calls++;
	return fsafe__sys_default.openat2(d, p, how, size);
}

static int run_op(fsafe_root *root, const struct esc *c, const char *path,
                  const char *path2)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	fsafe_sweep_result *res = NULL;
	fsafe_writer *w;
	int r;

	o.flags = FSAFE_NO_SYNC;
	switch (c->op) {
	case WM: o.flags |= FSAFE_MKDIR; break;
	case WN: o.flags |= FSAFE_NO_FOLLOW; break;
	case WC: o.flags |= FSAFE_CREATE_ONLY; break;
	default: break;
	}
	switch (c->op) {
	case W: case WM: case WN: case WC:
		return fsafe_root_write_file(root, path, PAYLOAD, 7, &o);
	case WR:
		if ((r = fsafe_root_writer_open(root, path, &o, &w)) < 0)
			return r;
		fsafe_writer_write(w, PAYLOAD, 7);
		return fsafe_writer_commit(w);
	case RD:
		r = fsafe_root_open_read(root, path);
		if (r >= 0)
			close(r);
		return r < 0 ? r : 0;
	case MK: return fsafe_root_mkdir_all(root, path, 0, FSAFE_ROOT_OP_NO_SYNC);
	case UL: return fsafe_root_unlink(root, path, FSAFE_ROOT_OP_NO_SYNC);
	case RN:
		return fsafe_root_rename(root, path, path2, FSAFE_ROOT_OP_NO_SYNC);
	case SW:
		r = fsafe_root_sweep(root, path, 0, 0, NULL, &res);
		fsafe_sweep_result_free(res);
		return r < 0 ? r : 0;
	case CK: return fsafe_root_check_path(c->path, c->len);
	}
	return -ENOSYS;
}

static void check_landed(const struct world *w, const struct esc *c,
                         const char *land)
{
	char rel[PATH_MAX];

	if (!land)
		return;
	expand(w, land, rel, sizeof(rel));
	if (c->op == MK) {
		char path[PATH_MAX];
		struct stat st;
		at_root(w, rel, path);
		assert_int_equal(lstat(path, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
		return;
	}
	if (!tu_equals(w->root, rel, PAYLOAD, 7))
		fail_msg("%s: expected the write at %s inside the root", c->name,
		         rel);
}

static void check_outside(const struct world *w, const char *before,
                          int watch, const struct esc *c)
{
	char *after = snap_take(w->s, "root"), what[512];

	if (strcmp(before, after) != 0)
		fail_msg("%s: outside changed:\n--- before\n%s--- after\n%s",
		         c->name, before, after);
	free(after);
	if (snap_events(watch, "root", what, sizeof(what)) > 0)
		fail_msg("%s: activity outside the root: %s", c->name, what);
	if (!tu_equals(w->s, "sentinel", sentinel_bytes, sizeof(sentinel_bytes)))
		fail_msg("%s: sentinel changed", c->name);
	assert_int_equal(access("/" PROBE, F_OK), -1);
	assert_int_equal(access("/etc/" PROBE, F_OK), -1);
}

struct run {
	const struct esc *c;
	unsigned flags; /* policy and resolver */
};

static void run_case(void **state)
{
	const struct run *run = *state;
	const struct esc *c = run->c;
	bool inroot = run->flags & FSAFE_ROOT_IN_ROOT_SYMLINKS;
	bool walk = run->flags & FSAFE_ROOT_NO_OPENAT2;
	char path[PATH_MAX + 16], path2[PATH_MAX];
	static struct world w; /* freed by teardown_case */
	fsafe_root *root;

	make_world(&w);
	plant(&w, c->setup);
	if (!strcmp(c->path, "@LONG"))
		long_path(path);
	else
		expand(&w, c->path, path, sizeof(path));
	expand(&w, c->path2 ? c->path2 : "", path2, sizeof(path2));

	char *before = snap_take(w.s, "root");
	int watch = snap_watch(w.s, "root");
	assert_true(watch >= 0);
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;
	struct fsafe_error d = { 0 };
	ro.flags = run->flags | c->extra;
	ro.error = &d;
	assert_int_equal(fsafe_root_open(AT_FDCWD, w.root, &ro, &root), 0);

	openat2_calls = 0;
	fsafe__sys_swap(&counting);
	int r = run_op(root, c, path, path2);
	fsafe__sys_swap(NULL);

	int want = inroot ? c->inroot : c->strict;
	if (r != want)
		fail_msg("%s (%s, %s): got %d (%s), want %d (%s); at '%s'",
		         c->name, walk ? "walk" : "openat2",
		         inroot ? "in-root" : "strict", r, fsafe_strerror(r),
		         want, fsafe_strerror(want), d.step ? d.step : "");
	if (walk)
		assert_int_equal(openat2_calls, 0);
	if (r < 0 && c->comp && !inroot && c->op != CK) {
		/* The step ends by naming the component, if any. */
		char comp[NAME_MAX + 32] = "";
		if (*c->comp)
			snprintf(comp, sizeof(comp), " (component '%s')",
			         c->comp);
		size_t n = strlen(d.step), k = strlen(comp);
		if (n < k || strcmp(d.step + n - k, comp) != 0 ||
		    (!*c->comp && strstr(d.step, "(component '")))
			fail_msg("%s: error says '%s', want it to name '%s'",
			         c->name, d.step, c->comp);
		assert_int_equal(d.code, r);
	}
	if (r == 0)
		check_landed(&w, c, inroot ? c->land_r : c->land_s);
	fsafe_root_close(root);
	check_outside(&w, before, watch, c);
	snap_unwatch(watch);
	free(before);
}

/* Mounts made by cases stay in our own namespace. */
static void try_private_mounts(void)
{
	if (geteuid() != 0) {
		no_mount_reason = "not root";
		return;
	}
	if (unshare(CLONE_NEWNS) < 0) {
		no_mount_reason = "unshare(CLONE_NEWNS) refused";
		return;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		no_mount_reason = "cannot make / private";
		return;
	}
	can_mount = true;
}

static const unsigned modes[4] = {
	0,
	FSAFE_ROOT_IN_ROOT_SYMLINKS,
	FSAFE_ROOT_NO_OPENAT2,
	FSAFE_ROOT_NO_OPENAT2 | FSAFE_ROOT_IN_ROOT_SYMLINKS,
};

static const char *mode_names[4] = {
	"openat2/strict", "openat2/in-root", "walk/strict", "walk/in-root",
};

int main(void)
{
	static struct run runs[4][NCASES];
	static struct CMUnitTest tests[4][NCASES];
	static char names[4][NCASES][96];
	int failed = 0;

	counting = fsafe__sys_default;
	counting.openat2 = count_openat2;
	try_private_mounts();
	print_message("escape corpus: %zu cases x 4 modes; mounts: %s\n", NCASES,
	              can_mount ? "yes" : no_mount_reason);
	for (int m = 0; m < 4; m++) {
		for (size_t i = 0; i < NCASES; i++) {
			runs[m][i] = (struct run){ &cases[i], modes[m] };
			snprintf(names[m][i], sizeof(names[m][i]), "%s",
			         cases[i].name);
			tests[m][i] = (struct CMUnitTest){
				.name = names[m][i],
				.test_func = run_case,
				.teardown_func = teardown_case,
				.initial_state = &runs[m][i],
			};
		}
		failed += _cmocka_run_group_tests(mode_names[m], tests[m],
		                                  NCASES, NULL, NULL);
	}
	return failed != 0;
}
