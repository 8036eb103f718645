/*
 * Contained writes: every operation resolves its path beneath the root
 * (resolve.c) to a parent directory fd and a base name, and then works
 * only relative to that fd. Writes go through the one writer path
 * (fsafe__writer_open_target), whose stage and publish both happen in
 * that fd.
 */
#define _GNU_SOURCE
#include "fsafe/root.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "error.h"
#include "opts.h"
#include "resolve.h"
#include "sys.h"
#include "target.h"
#include "writer.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define PROC_SUPER_MAGIC 0x9fa0

#define ROOT_FLAGS \
	(FSAFE_ROOT_IN_ROOT_SYMLINKS | FSAFE_ROOT_NO_XDEV | FSAFE_ROOT_NO_OPENAT2)

struct fsafe_root {
	struct fsafe__resolver res;
	struct fsafe_error *error; /* the open's opts->error */
	/* The last failure's step with the component it stopped at: what
	   root->error->step points to, until the next call on the root. */
	char step[NAME_MAX + 128];
};

/* A failed call on the root: its step, and the component if any, through
   the error the root was opened with. */
static int note(fsafe_root *root, int r, const struct fsafe__rerr *e)
{
	if (r >= 0 || !root->error)
		return r;
	if (e->component[0])
		snprintf(root->step, sizeof(root->step), "%s (component '%s')",
		         e->step, e->component);
	else
		snprintf(root->step, sizeof(root->step), "%s", e->step);
	fsafe__error_set(root->error, r, -r, root->step, false);
	return r;
}

static int note_step(fsafe_root *root, int r, const char *step,
                     const char *comp)
{
	struct fsafe__rerr e;

	fsafe__rerr_set(&e, step, comp, strlen(comp));
	return note(root, r, &e);
}

static int rerr(struct fsafe__rerr *e, int r, const char *step,
                const char *name)
{
	fsafe__rerr_set(e, step, name, strlen(name));
	return r;
}

static bool in_root_links(const fsafe_root *root)
{
	return root->res.flags & FSAFE_ROOT_IN_ROOT_SYMLINKS;
}

/* A failed open: there is no root yet to keep the error. */
static int open_fail(struct fsafe_error *error, int r, const char *step)
{
	fsafe__error_set(error, r, -r, step, false);
	return r;
}

int fsafe_root_open(int dirfd, const char *path,
                    const struct fsafe_root_opts *opts, fsafe_root **out)
{
	struct fsafe_root_opts in;
	fsafe_root *root;
	int fd, r;

	assert(out);
	*out = NULL;
	r = FSAFE__OPTS_COPY(&in, opts, FSAFE_ROOT_OPTS_SIZE_V0);
	if (r < 0)
		in.error = FSAFE__OPTS_ERROR(opts, struct fsafe_root_opts, r);
	if (r < 0 || (in.flags & ~(unsigned)ROOT_FLAGS))
		return open_fail(in.error, r < 0 ? r : -EINVAL, "options");
	if (!path || !*path)
		return open_fail(in.error, -EINVAL, "resolve");
	if (!(root = calloc(1, sizeof(*root))))
		return open_fail(in.error, -ENOMEM, "allocate");
	if ((fd = fsafe__open_dir(dirfd, path)) < 0) {
		free(root);
		return open_fail(in.error, fd, "open root");
	}
	if ((r = fsafe__resolver_init(&root->res, fd, in.flags)) < 0) {
		fsafe__close(fd);
		free(root);
		return open_fail(in.error, r, "open root");
	}
	root->error = in.error;
	*out = root;
	return 0;
}

void fsafe_root_close(fsafe_root *root)
{
	if (!root)
		return;
	fsafe__close(root->res.rootfd);
	free(root);
}

int fsafe_root_check_path(const char *path, size_t len)
{
	struct fsafe__rpath *p = malloc(sizeof(*p));
	struct fsafe__rerr e;

	if (!p)
		return -ENOMEM;
	int r = fsafe__rpath_parse(p, path, len, false, &e);
	free(p);
	return r;
}

/* ------------------------------------------------------------------------ */
/* Targets: (parent fd, name)                                                */
/* ------------------------------------------------------------------------ */

struct how {
	bool follow;   /* a link at the target: follow it (policy allowing) */
	bool mkdir;
	bool nosync;
};

/* A link on procfs may be a magic link; its text is not where it leads. */
static int refuse_magic(int dirfd, const char *name, struct fsafe__rerr *e)
{
	struct statfs sf;

	if (SYS->fstatfs(dirfd, &sf) < 0) {
		fsafe__rerr_set(e, "statfs", name, strlen(name));
		return -errno;
	}
	if (sf.f_type != PROC_SUPER_MAGIC)
		return 0;
	fsafe__rerr_set(e, "magic link refused", name, strlen(name));
	return -ELOOP;
}

/*
 * A link at the target, in the in-root policy: the path it leads to,
 * parsed (as if the root were "/") into *p in place of the old one. If
 * the link was replaced since the lstat, *p stays and is resolved again
 * (each time counts as a hop, so a swapping loop ends in -ELOOP).
 */
static int follow_link(struct fsafe__target *t, struct fsafe__rpath *p,
                       struct fsafe__rerr *e)
{
	char link[PATH_MAX], path[PATH_MAX];
	int r = refuse_magic(t->dirfd, t->name, e);

	if (r < 0)
		return r;
	ssize_t n = SYS->readlinkat(t->dirfd, t->name, link, sizeof(link));
	if (n < 0 && errno == EINVAL)
		return 0; /* no longer a link: resolve the same path again */
	if (n < 0 || (size_t)n >= sizeof(link)) {
		fsafe__rerr_set(e, "readlink", t->name, strlen(t->name));
		return n < 0 ? -errno : -ENAMETOOLONG;
	}
	link[n] = '\0';
	if (link[0] == '/') {
		strcpy(path, link);
	} else {
		r = fsafe__rpath_join(p, p->n - 1, path);
		if (r < 0 || strlen(path) + 1 + strlen(link) >= sizeof(path))
			return rerr(e, -ENAMETOOLONG, "path too long", t->name);
		strcat(strcat(path, "/"), link);
	}
	return fsafe__rpath_parse(p, path, strlen(path), true, e);
}

static int open_parent(const fsafe_root *root, const struct fsafe__rpath *p,
                       const struct how *h, mode_t dmode,
                       struct fsafe__rerr *e)
{
	if (h->mkdir)
		return fsafe__resolve_dir_mkdir(&root->res, p, p->n - 1, dmode,
		                                h->nosync, e);
	return fsafe__resolve_dir(&root->res, p, p->n - 1, e);
}

/* One resolution of *p: 0 done, 1 a link to follow, or a negative errno. */
static int target_once(const fsafe_root *root, const struct fsafe__rpath *p,
                       const struct how *h, bool derived,
                       struct fsafe__target *t, struct fsafe__rerr *e)
{
	const char *step;
	int r;

	if (p->dir || p->n == 0) {
		fsafe__rerr_set(e, "not a name", "", 0);
		/* A link that leads to a directory names one. */
		return derived ? -EISDIR : -EINVAL;
	}
	const char *name = p->comp[p->n - 1];
	if ((t->dirfd = open_parent(root, p, h, 0777, e)) < 0)
		return t->dirfd;
	strcpy(t->name, name);
	if ((r = fsafe__target_stat(t, &step)) < 0) {
		fsafe__rerr_set(e, step, name, strlen(name));
		return r;
	}
	if (!t->exists || !S_ISLNK(t->st.st_mode) || !h->follow)
		return 0;
	if (!in_root_links(root)) {
		fsafe__rerr_set(e, "symbolic link refused", name, strlen(name));
		return -ELOOP;
	}
	return 1;
}

/*
 * Resolve `path` to its parent directory fd and base name. A link at the
 * target is followed only by the in-root policy and only with h->follow;
 * the strict policy refuses it (-ELOOP) when h->follow is set.
 */
static int resolve_target(const fsafe_root *root, const char *path,
                          const struct how *h, struct fsafe__target *t,
                          struct fsafe__rerr *e)
{
	struct fsafe__rpath *p = malloc(sizeof(*p));
	int r;

	t->dirfd = -1;
	t->borrowed = false;
	fsafe__rerr_set(e, "resolve", "", 0);
	if (!p)
		return -ENOMEM;
	if (!path)
		path = "";
	r = fsafe__rpath_parse(p, path, strlen(path), false, e);
	for (int hops = 0; r == 0; hops++) {
		if ((r = target_once(root, p, h, hops > 0, t, e)) != 1)
			break;
		if (hops == FSAFE__MAX_HOPS) {
			fsafe__rerr_set(e, "too many symbolic links", t->name,
			                strlen(t->name));
			r = -ELOOP;
			break;
		}
		r = follow_link(t, p, e);
		fsafe__target_close(t);
	}
	free(p);
	if (r < 0)
		fsafe__target_close(t);
	return r;
}

/* ------------------------------------------------------------------------ */
/* Writes                                                                    */
/* ------------------------------------------------------------------------ */

static int root_writer_open(fsafe_root *root, const char *path,
                            const struct fsafe__wopts *o, fsafe_writer **out)
{
	struct fsafe__target t;
	struct fsafe__rerr e;
	int r;

	*out = NULL;
	struct how h = {
		.follow = !(o->flags & FSAFE_NO_FOLLOW),
		.mkdir = o->flags & FSAFE_MKDIR,
		.nosync = o->flags & FSAFE_NO_SYNC,
	};
	if ((r = resolve_target(root, path, &h, &t, &e)) < 0) {
		fsafe__error_set(o->error, r, -r, e.step, false);
		return note(root, r, &e);
	}
	/* The writer's failures are not about a component of the path. */
	if ((r = fsafe__writer_open_target(&t, o, out)) < 0) {
		const char *step = o->error ? o->error->step : "open";
		return note_step(root, r, step ? step : "open", "");
	}
	return 0;
}

int fsafe_root_writer_open(fsafe_root *root, const char *path,
                           const struct fsafe_write_opts *opts,
                           fsafe_writer **out)
{
	struct fsafe_error detail = { 0 };
	struct fsafe__wopts o;
	int r;

	assert(root && out);
	*out = NULL;
	if ((r = fsafe__wopts_load_reporting(&o, opts)) < 0)
		return note_step(root, r, "options", "");
	/* The writer is made from the root: without an error of its own,
	   its later failures go to the root's. */
	struct fsafe_error *caller = o.error;
	o.error = &detail;
	if ((r = root_writer_open(root, path, &o, out)) < 0) {
		if (caller && caller != root->error)
			*caller = detail;
		return r;
	}
	fsafe__writer_set_error(*out, caller ? caller : root->error);
	return 0;
}

int fsafe_root_write_file(fsafe_root *root, const char *path,
                          const void *buf, size_t len,
                          const struct fsafe_write_opts *opts)
{
	struct fsafe_error detail = { 0 };
	struct fsafe_error *caller;
	struct fsafe__wopts o;
	fsafe_writer *w;
	int r;

	assert(root);
	if ((r = fsafe__wopts_load_reporting(&o, opts)) < 0)
		return note_step(root, r, "options", "");
	/* Keep the writer's step for the root's error even when the
	   caller's write options have none. */
	caller = o.error;
	o.error = &detail;
	o.one_shot = true;
	o.length = len;
	if ((r = root_writer_open(root, path, &o, &w)) < 0)
		goto out;
	fsafe__writer_write_synced(w, &(struct iovec){ (void *)buf, len }, 1);
	if ((r = fsafe_writer_commit(w)) < 0 && root->error)
		*root->error = detail;
out:
	/* The root's own error, if it is the same, keeps the component. */
	if (r < 0 && caller && caller != root->error)
		*caller = detail;
	return r;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

/* Without /proc: open by name again, and make sure it is what we saw. A
   FIFO swapped in meanwhile cannot block us (O_NONBLOCK). */
static int reopen_by_name(int dirfd, const char *name, const struct stat *saw)
{
	struct stat st;
	int fd = fsafe__openat(dirfd, name,
	                       O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0);

	if (fd < 0)
		return fd;
	if (fsafe__fstat(fd, &st) < 0 || st.st_dev != saw->st_dev ||
	    st.st_ino != saw->st_ino) {
		fsafe__close(fd);
		return -EAGAIN;
	}
	return fd;
}

/*
 * Open entry `name` of `dirfd` for reading, never anything else: look
 * first through an O_PATH fd (no side effect, no blocking on a FIFO or a
 * device a hostile tree may hold), then reopen that same inode through
 * /proc/self/fd.
 */
static int open_entry(const struct fsafe__resolver *res, int dirfd,
                      const char *name, struct fsafe__rerr *e)
{
	char proc[64];
	struct stat st;
	int pfd = fsafe__openat(dirfd, name, O_PATH | O_NOFOLLOW, 0);
	int r;

	if (pfd < 0)
		return rerr(e, pfd, "open", name);
	if ((r = fsafe__fstat(pfd, &st)) < 0)
		rerr(e, r, "stat", name);
	else if (S_ISLNK(st.st_mode)) /* swapped in since the lstat */
		r = rerr(e, -ELOOP, "symbolic link refused", name);
	else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		r = rerr(e, -EINVAL, "not a regular file or directory", name);
	else if ((r = fsafe__resolver_check_mount(res, pfd, &st)) < 0)
		rerr(e, r, "mount point refused", name);
	else {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
		r = fsafe__openat(AT_FDCWD, proc, O_RDONLY | O_NOCTTY, 0);
		if (r == -ENOENT)
			r = reopen_by_name(dirfd, name, &st);
		if (r < 0)
			rerr(e, r, "open", name);
	}
	fsafe__close(pfd);
	return r;
}

int fsafe_root_open_read(fsafe_root *root, const char *path)
{
	assert(root);
	struct fsafe__rpath *p = malloc(sizeof(*p));
	struct fsafe__target t;
	struct fsafe__rerr e;
	bool dir = false;
	int r;

	if (!p)
		return note_step(root, -ENOMEM, "alloc", "");
	r = fsafe__rpath_parse(p, path ? path : "", path ? strlen(path) : 0,
	                       false, &e);
	if (r == 0 && (dir = p->dir))
		r = fsafe__resolve_dir(&root->res, p, p->n, &e);
	free(p);
	if (r < 0 || dir)
		return note(root, r, &e);

	struct how h = { .follow = true };
	if ((r = resolve_target(root, path, &h, &t, &e)) == 0) {
		r = open_entry(&root->res, t.dirfd, t.name, &e);
		fsafe__target_close(&t);
	}
	return note(root, r, &e);
}

/* ------------------------------------------------------------------------ */
/* Directories, names                                                        */
/* ------------------------------------------------------------------------ */

/* Parse `path` and resolve the directory it names; `how` may ask for
   FSAFE__TARGET_MKDIR (with `mode`) and FSAFE__TARGET_NOSYNC. */
static int resolve_whole_dir(fsafe_root *root, const char *path,
                             unsigned how, mode_t mode)
{
	struct fsafe__rpath *p = malloc(sizeof(*p));
	struct fsafe__rerr e;
	int r;

	if (!p)
		return note_step(root, -ENOMEM, "alloc", "");
	r = fsafe__rpath_parse(p, path ? path : "", path ? strlen(path) : 0,
	                       false, &e);
	if (r == 0 && (how & FSAFE__TARGET_MKDIR))
		r = fsafe__resolve_dir_mkdir(&root->res, p, p->n, mode,
		                             how & FSAFE__TARGET_NOSYNC, &e);
	else if (r == 0)
		r = fsafe__resolve_dir(&root->res, p, p->n, &e);
	free(p);
	return note(root, r, &e);
}

int fsafe_root_mkdir_all(fsafe_root *root, const char *path, mode_t mode,
                         unsigned flags)
{
	assert(root);
	if (mode & ~(mode_t)07777)
		return note_step(root, -EINVAL, "options", "");
	unsigned how = FSAFE__TARGET_MKDIR | (flags & FSAFE_ROOT_OP_NO_SYNC
	                                              ? FSAFE__TARGET_NOSYNC
	                                              : 0);
	int fd = resolve_whole_dir(root, path, how, mode ? mode : 0777);
	if (fd < 0)
		return fd;
	fsafe__close(fd);
	return 0;
}

static int sync_dir(fsafe_root *root, int fd, unsigned flags)
{
	int r = (flags & FSAFE_ROOT_OP_NO_SYNC) ? 0 : fsafe__fsync(fd);

	return r < 0 ? note_step(root, r, "fsync directory", "") : 0;
}

int fsafe_root_unlink(fsafe_root *root, const char *path, unsigned flags)
{
	assert(root);
	struct fsafe__target t;
	struct fsafe__rerr e;
	struct how h = { .follow = false };
	int r;

	if ((r = resolve_target(root, path, &h, &t, &e)) < 0)
		return note(root, r, &e);
	r = fsafe__unlinkat(t.dirfd, t.name,
	                    (flags & FSAFE_ROOT_OP_RMDIR) ? AT_REMOVEDIR : 0);
	if (r < 0)
		note_step(root, r, "unlink", t.name);
	else
		r = sync_dir(root, t.dirfd, flags);
	fsafe__target_close(&t);
	return r < 0 ? r : note(root, 0, &e);
}

static bool same_dir(int a, int b)
{
	struct stat sa, sb;

	return fsafe__fstat(a, &sa) == 0 && fsafe__fstat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int do_rename(fsafe_root *root, struct fsafe__target *from,
                     struct fsafe__target *to, unsigned flags)
{
	int r;

	if (flags & FSAFE_ROOT_OP_NOREPLACE)
		r = fsafe__renameat2(from->dirfd, from->name, to->dirfd,
		                     to->name, RENAME_NOREPLACE);
	else
		r = fsafe__renameat(from->dirfd, from->name, to->dirfd,
		                    to->name);
	if (r < 0)
		return note_step(root, r, "rename", from->name);
	if ((r = sync_dir(root, to->dirfd, flags)) < 0)
		return r;
	if (!same_dir(from->dirfd, to->dirfd))
		return sync_dir(root, from->dirfd, flags);
	return 0;
}

int fsafe_root_rename(fsafe_root *root, const char *from, const char *to,
                      unsigned flags)
{
	assert(root);
	struct fsafe__target a, b;
	struct fsafe__rerr e;
	struct how h = { .follow = false };
	int r;

	if ((r = resolve_target(root, from, &h, &a, &e)) < 0)
		return note(root, r, &e);
	if ((r = resolve_target(root, to, &h, &b, &e)) < 0) {
		fsafe__target_close(&a);
		return note(root, r, &e);
	}
	r = do_rename(root, &a, &b, flags);
	fsafe__target_close(&a);
	fsafe__target_close(&b);
	return r < 0 ? r : note(root, 0, &e);
}

int fsafe_root_sweep(fsafe_root *root, const char *path,
                     uint64_t older_than_ms, unsigned flags,
                     const fsafe_cancel *cancel, fsafe_sweep_result **result)
{
	assert(root);
	if (result)
		*result = NULL;
	int fd = resolve_whole_dir(root, path, 0, 0);
	if (fd < 0)
		return fd;
	int r = fsafe_sweep(fd, ".", older_than_ms, flags, cancel, result);
	fsafe__close(fd);
	return r < 0 ? note_step(root, r, "sweep", "") : r;
}
