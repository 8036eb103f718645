/*
 * The contained resolver. Two ways to the same answer:
 *
 *  - openat2() lets the kernel enforce the policy on the whole path in one
 *    call (RESOLVE_BENEATH or RESOLVE_IN_ROOT, never magic links);
 *  - the walk, for kernels without openat2 or filters that refuse it, opens
 *    one component at a time with O_PATH|O_NOFOLLOW relative to the last
 *    fd, looks at what it got through the fd (never by name again), and
 *    expands in-root links itself.
 *
 * Both return an O_RDONLY|O_DIRECTORY fd, which later steps use instead of
 * the path, so a component swapped after resolution cannot redirect them.
 */
#define _GNU_SOURCE
#include "resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "fsafe/root.h"
#include "sys.h"

#if defined(__linux__) && __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#else
struct open_how {
	uint64_t flags, mode, resolve;
};
#define RESOLVE_NO_XDEV 0x01
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#define RESOLVE_IN_ROOT 0x10
#endif

#define PROC_SUPER_MAGIC 0x9fa0

/* openat2 answers EAGAIN when a rename raced a ".." lookup; a few more
   tries settle it unless someone renames without pause. Also the bound
   for the walk's own "a directory moved" retries. */
#define ATTEMPTS 16

void fsafe__rerr_set(struct fsafe__rerr *e, const char *step,
                     const char *comp, size_t len)
{
	e->step = step;
	if (len > NAME_MAX)
		len = NAME_MAX;
	memcpy(e->component, comp, len);
	e->component[len] = '\0';
}

static int lex_fail(struct fsafe__rerr *e, int r, const char *step,
                    const char *comp, size_t len)
{
	fsafe__rerr_set(e, step, comp, len);
	return r;
}

static bool is_dot(const char *c, size_t n)
{
	return n == 1 && c[0] == '.';
}

static bool is_dotdot(const char *c, size_t n)
{
	return n == 2 && c[0] == '.' && c[1] == '.';
}

/* Checks one component and appends it; `depth` counts real levels. */
static int add_component(struct fsafe__rpath *p, const char *c, size_t n,
                         size_t *used, long *depth, bool clamp,
                         struct fsafe__rerr *e)
{
	if (n > NAME_MAX)
		return lex_fail(e, -ENAMETOOLONG, "name too long", c, n);
	if (is_dotdot(c, n)) {
		if (*depth == 0 && !clamp)
			return lex_fail(e, -EXDEV, "'..' leaves the root", c, n);
		if (*depth > 0)
			(*depth)--;
	} else {
		(*depth)++;
	}
	memcpy(p->buf + *used, c, n);
	p->buf[*used + n] = '\0';
	p->comp[p->n++] = p->buf + *used;
	*used += n + 1;
	return 0;
}

int fsafe__rpath_parse(struct fsafe__rpath *p, const char *path, size_t len,
                       bool clamp, struct fsafe__rerr *e)
{
	size_t used = 0;
	long depth = 0;

	p->n = 0;
	p->dir = true; /* until a name ends the path */
	if (len == 0)
		return lex_fail(e, -EINVAL, "empty path", "", 0);
	if (memchr(path, '\0', len))
		return lex_fail(e, -EINVAL, "NUL byte in path", "", 0);
	if (len >= PATH_MAX)
		return lex_fail(e, -ENAMETOOLONG, "path too long", "", 0);
	if (path[0] == '/' && !clamp)
		return lex_fail(e, -EXDEV, "absolute path leaves the root", "/",
		                1);

	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && path[j] != '/')
			j++;
		const char *c = path + i;
		size_t n = j - i;
		p->dir = n == 0 || is_dot(c, n) || is_dotdot(c, n);
		if (n > 0 && !is_dot(c, n)) {
			int r = add_component(p, c, n, &used, &depth, clamp, e);
			if (r < 0)
				return r;
		}
		i = j + 1;
		if (j < len && i == len)
			p->dir = true; /* trailing '/' */
	}
	return 0;
}

int fsafe__rpath_join(const struct fsafe__rpath *p, size_t n,
                      char out[PATH_MAX])
{
	size_t used = 0;

	if (n == 0) {
		strcpy(out, ".");
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = strlen(p->comp[i]);
		if (used + k + 2 > PATH_MAX)
			return -ENAMETOOLONG;
		if (i > 0)
			out[used++] = '/';
		memcpy(out + used, p->comp[i], k);
		used += k;
	}
	out[used] = '\0';
	return 0;
}

/* The mount id of `fd`, from /proc/self/fdinfo (the one source that works
   on every kernel old enough to need the walk), or a negative errno. */
static int mount_id(int fd)
{
	char path[64], buf[1024];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	int info = fsafe__openat(AT_FDCWD, path, O_RDONLY, 0);
	if (info < 0)
		return info;
	ssize_t n = fsafe__read(info, buf, sizeof(buf) - 1);
	fsafe__close(info);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	const char *m = strstr(buf, "mnt_id:");
	return m ? atoi(m + 7) : -ENOENT;
}

int fsafe__resolver_init(struct fsafe__resolver *r, int rootfd,
                         unsigned flags)
{
	struct stat st;
	int rc = fsafe__fstat(rootfd, &st);

	if (rc < 0)
		return rc;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	r->rootfd = rootfd;
	r->flags = flags;
	r->dev = st.st_dev;
	/* Without /proc, the walk can still see a change of device; a bind
	   mount of the same filesystem then goes unnoticed (openat2 sees it). */
	r->mnt_id = (flags & FSAFE_ROOT_NO_XDEV) ? mount_id(rootfd) : -1;
	if (r->mnt_id < 0)
		r->mnt_id = -1;
	return 0;
}

int fsafe__resolver_check_mount(const struct fsafe__resolver *r, int fd,
                                const struct stat *st)
{
	if (!(r->flags & FSAFE_ROOT_NO_XDEV))
		return 0;
	if (st->st_dev != r->dev)
		return -EXDEV;
	if (r->mnt_id < 0)
		return 0;
	int id = mount_id(fd);
	if (id < 0)
		return id;
	return id == r->mnt_id ? 0 : -EXDEV;
}

/* ------------------------------------------------------------------------ */
/* openat2                                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t resolve_flags(unsigned flags)
{
	uint64_t f = RESOLVE_NO_MAGICLINKS;

	if (flags & FSAFE_ROOT_IN_ROOT_SYMLINKS)
		f |= RESOLVE_IN_ROOT;
	else
		f |= RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
	if (flags & FSAFE_ROOT_NO_XDEV)
		f |= RESOLVE_NO_XDEV;
	return f;
}

int fsafe__resolve_openat2(const struct fsafe__resolver *r, const char *path,
                           struct fsafe__rerr *e)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = resolve_flags(r->flags),
	};
	int fd = -EAGAIN;

	for (int i = 0; i < ATTEMPTS && (fd == -EAGAIN || fd == -EINTR); i++) {
		fd = SYS->openat2(r->rootfd, path, &how, sizeof(how));
		if (fd < 0)
			fd = -errno;
	}
	if (fd < 0)
		fsafe__rerr_set(e, "resolve", "", 0);
	return fd;
}

/* ------------------------------------------------------------------------ */
/* The walk                                                                  */
/* ------------------------------------------------------------------------ */

struct dir_id {
	dev_t dev;
	ino_t ino;
};

struct walk {
	const struct fsafe__resolver *r;
	struct fsafe__rerr *e;
	int cur;               /* O_PATH fd of the directory reached */
	size_t depth, cap;
	struct dir_id *ids;    /* ids[0] the root ... ids[depth] cur */
	int hops;
	char rest[PATH_MAX];   /* what is left to resolve */
	size_t pos;
	char link[PATH_MAX];
	char tmp[PATH_MAX];
};

static int walk_fail(struct walk *w, int r, const char *step,
                     const char *comp)
{
	fsafe__rerr_set(w->e, step, comp, strlen(comp));
	return r;
}

static int walk_push(struct walk *w, const struct stat *st)
{
	if (w->depth + 1 == w->cap) {
		size_t cap = w->cap * 2;
		struct dir_id *ids = realloc(w->ids, cap * sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		w->ids = ids;
		w->cap = cap;
	}
	w->depth++;
	w->ids[w->depth] = (struct dir_id){ st->st_dev, st->st_ino };
	return 0;
}

static int walk_reset(struct walk *w)
{
	struct stat st;
	int fd = fsafe__openat(w->r->rootfd, ".", O_PATH | O_DIRECTORY, 0);

	if (fd < 0)
		return walk_fail(w, fd, "open root", ".");
	int rc = fsafe__fstat(fd, &st);
	if (rc < 0) {
		fsafe__close(fd);
		return walk_fail(w, rc, "stat", ".");
	}
	fsafe__close(w->cur);
	w->cur = fd;
	w->depth = 0;
	w->ids[0] = (struct dir_id){ st.st_dev, st.st_ino };
	return 0;
}

/*
 * "..": open the parent through the fd and check that it is the directory
 * we came from. If not, the directory was moved while we held it, and
 * going on could leave the root: the caller starts over.
 */
static int walk_up(struct walk *w)
{
	struct stat st;

	if (w->depth == 0) {
		if (w->r->flags & FSAFE_ROOT_IN_ROOT_SYMLINKS)
			return 0; /* ".." at the root is the root */
		return walk_fail(w, -EXDEV, "'..' leaves the root", "..");
	}
	int fd = fsafe__openat(w->cur, "..", O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd < 0)
		return walk_fail(w, fd, "open", "..");
	int rc = fsafe__fstat(fd, &st);
	const struct dir_id *want = &w->ids[w->depth - 1];
	if (rc == 0 && (st.st_dev != want->dev || st.st_ino != want->ino))
		rc = -EAGAIN;
	if (rc < 0) {
		fsafe__close(fd);
		return walk_fail(w, rc, "directory moved", "..");
	}
	fsafe__close(w->cur);
	w->cur = fd;
	w->depth--;
	return 0;
}

/* Replace what is left with the link's target followed by the rest. */
static int walk_splice(struct walk *w, size_t n)
{
	const char *rest = w->rest + w->pos;
	size_t k = strlen(rest);

	if (n + 1 + k + 1 > sizeof(w->tmp))
		return -ENAMETOOLONG;
	memcpy(w->tmp, w->link, n);
	w->tmp[n] = '/';
	memcpy(w->tmp + n + 1, rest, k + 1);
	memcpy(w->rest, w->tmp, n + 1 + k + 1);
	w->pos = 0;
	return w->link[0] == '/' ? walk_reset(w) : 0;
}

/* An in-root link, open as `fd` (O_PATH|O_NOFOLLOW): expand it. */
static int walk_link(struct walk *w, int fd, const char *name)
{
	struct statfs sf;

	if (!(w->r->flags & FSAFE_ROOT_IN_ROOT_SYMLINKS))
		return walk_fail(w, -ELOOP, "symbolic link refused", name);
	if (++w->hops > FSAFE__MAX_HOPS)
		return walk_fail(w, -ELOOP, "too many symbolic links", name);
	/* A link on procfs may be a magic link, which names an object, not
	   a path: its text says nothing about where it leads. */
	if (SYS->fstatfs(fd, &sf) < 0)
		return walk_fail(w, -errno, "statfs", name);
	if (sf.f_type == PROC_SUPER_MAGIC)
		return walk_fail(w, -ELOOP, "magic link refused", name);
	ssize_t n = SYS->readlinkat(fd, "", w->link, sizeof(w->link));
	if (n < 0)
		return walk_fail(w, -errno, "readlink", name);
	if ((size_t)n >= sizeof(w->link) || n == 0)
		return walk_fail(w, n ? -ENAMETOOLONG : -ENOENT, "readlink",
		                 name);
	int rc = walk_splice(w, (size_t)n);
	return rc < 0 ? walk_fail(w, rc, "symbolic link", name) : 0;
}

/* One plain name: a directory to enter, a link to expand, or an error. */
static int walk_name(struct walk *w, const char *name)
{
	struct stat st;
	int fd = fsafe__openat(w->cur, name, O_PATH | O_NOFOLLOW, 0);

	if (fd < 0)
		return walk_fail(w, fd, "open", name);
	int rc = fsafe__fstat(fd, &st);
	if (rc < 0)
		rc = walk_fail(w, rc, "stat", name);
	else if (S_ISLNK(st.st_mode))
		rc = walk_link(w, fd, name);
	else if (!S_ISDIR(st.st_mode))
		rc = walk_fail(w, -ENOTDIR, "not a directory", name);
	else if ((rc = fsafe__resolver_check_mount(w->r, fd, &st)) < 0)
		rc = walk_fail(w, rc, "mount point refused", name);
	else if ((rc = walk_push(w, &st)) == 0) {
		fsafe__close(w->cur);
		w->cur = fd;
		return 0;
	}
	fsafe__close(fd);
	return rc;
}

/* The next component of what is left into `name`; 0 at the end. */
static int walk_next(struct walk *w, char name[NAME_MAX + 1])
{
	const char *s = w->rest;

	while (s[w->pos] == '/')
		w->pos++;
	if (!s[w->pos])
		return 0;
	size_t i = w->pos, n = strcspn(s + i, "/");
	w->pos += n;
	if (n > NAME_MAX) {
		snprintf(name, NAME_MAX + 1, "%.*s", NAME_MAX, s + i);
		return walk_fail(w, -ENAMETOOLONG, "name too long", name);
	}
	memcpy(name, s + i, n);
	name[n] = '\0';
	return 1;
}

static int walk_once(struct walk *w)
{
	char name[NAME_MAX + 1];
	int rc;

	w->hops = 0;
	w->pos = 0;
	if ((rc = walk_reset(w)) < 0)
		return rc;
	while ((rc = walk_next(w, name)) > 0) {
		if (strcmp(name, ".") == 0)
			continue;
		rc = strcmp(name, "..") == 0 ? walk_up(w) : walk_name(w, name);
		if (rc < 0)
			return rc;
	}
	if (rc < 0)
		return rc;
	rc = fsafe__openat(w->cur, ".", O_RDONLY | O_DIRECTORY, 0);
	return rc < 0 ? walk_fail(w, rc, "open", ".") : rc;
}

int fsafe__resolve_walk(const struct fsafe__resolver *r, const char *path,
                        struct fsafe__rerr *e)
{
	struct walk *w;
	int rc = -ENOMEM;

	fsafe__rerr_set(e, "resolve", "", 0);
	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	if (!(w = malloc(sizeof(*w))))
		return -ENOMEM;
	*w = (struct walk){ .r = r, .e = e, .cur = -1, .cap = 16 };
	if ((w->ids = malloc(w->cap * sizeof(*w->ids)))) {
		for (int i = 0; i < ATTEMPTS; i++) {
			strcpy(w->rest, path);
			if ((rc = walk_once(w)) != -EAGAIN)
				break;
		}
	}
	fsafe__close(w->cur);
	free(w->ids);
	free(w);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Choosing                                                                  */
/* ------------------------------------------------------------------------ */

/* openat2 says what failed, not where: ask the walk, which applies the
   same policy, for the component. Its own result is not used. */
static void diagnose(const struct fsafe__resolver *r, const char *path,
                     int err, struct fsafe__rerr *e)
{
	struct fsafe__rerr w;
	int fd = fsafe__resolve_walk(r, path, &w);

	if (fd >= 0)
		fsafe__close(fd);
	if (fd == err)
		*e = w;
}

static int resolve_path(const struct fsafe__resolver *r, const char *path,
                        struct fsafe__rerr *e)
{
	if (!(r->flags & FSAFE_ROOT_NO_OPENAT2)) {
		int fd = fsafe__resolve_openat2(r, path, e);
		if (fd >= 0)
			return fd;
		/* Missing, or refused by a seccomp filter: walk instead. */
		if (fd != -ENOSYS && fd != -EPERM) {
			diagnose(r, path, fd, e);
			return fd;
		}
	}
	return fsafe__resolve_walk(r, path, e);
}

int fsafe__resolve_dir(const struct fsafe__resolver *r,
                       const struct fsafe__rpath *p, size_t n,
                       struct fsafe__rerr *e)
{
	char path[PATH_MAX];
	int rc = fsafe__rpath_join(p, n, path);

	if (rc < 0)
		return lex_fail(e, rc, "path too long", "", 0);
	return resolve_path(r, path, e);
}

/* Make directory `c` in `fd`; a new entry must be durable before
   anything beneath it is published. */
static int make_one(int fd, const char *c, mode_t mode, bool nosync,
                    struct fsafe__rerr *e)
{
	int rc = fsafe__mkdirat(fd, c, mode);

	if (rc == -EEXIST)
		return 0; /* made meanwhile, or not a directory: resolve says */
	if (rc < 0)
		return lex_fail(e, rc, "mkdir", c, strlen(c));
	if (!nosync && (rc = fsafe__fsync(fd)) < 0)
		return lex_fail(e, rc, "fsync directory", c, strlen(c));
	return 0;
}

/*
 * The longest prefix that resolves is the start; each missing directory is
 * then made in the fd of its resolved parent and the next prefix resolved
 * again from the root, so every step gets the full policy.
 */
int fsafe__resolve_dir_mkdir(const struct fsafe__resolver *r,
                             const struct fsafe__rpath *p, size_t n,
                             mode_t mode, bool nosync,
                             struct fsafe__rerr *e)
{
	size_t k = n;
	int fd, rc;

	while ((fd = fsafe__resolve_dir(r, p, k, e)) == -ENOENT && k > 0)
		k--;
	for (; fd >= 0 && k < n; k++) {
		const char *c = p->comp[k];
		if (strcmp(c, "..") != 0 &&
		    (rc = make_one(fd, c, mode, nosync, e)) < 0) {
			fsafe__close(fd);
			return rc;
		}
		fsafe__close(fd);
		fd = fsafe__resolve_dir(r, p, k + 1, e);
	}
	return fd;
}
