/*
 * Layer B: every crash state an abstract persistence model allows.
 *
 * Recording. A workload runs once, in a child process (as in Layer A, the
 * process that ran it is dead when recovery runs), in a scratch directory
 * on an ordinary filesystem with a recording system-call table swapped in. The initial
 * tree (directories, entries, file contents, hard links by inode) is
 * captured first and counts as durable. The recorder then logs, per table
 * call, the operations that change persistent state, naming objects by
 * model id (a fresh id at each create, so a reused inode number is a new
 * object):
 *
 *   create(dir, name, f)    openat O_CREAT of a name that did not exist
 *                           or symlinkat: a link is created whole, what
 *                           it reads durable with its inode
 *   tmpfile(f)              openat O_TMPFILE (an inode with no name)
 *   mkdir(dir, name, d)
 *   write(f, off, bytes)    write/pwrite, at the offset it really used
 *   trunc(f, len)           ftruncate, O_TRUNC
 *   chmod(f, mode)          fchmod
 *   sync(x)                 fsync/fdatasync of a file or a directory
 *   link(dir, name, f)      linkat (also of an O_TMPFILE)
 *   unlink(dir, name)
 *   rename(dir, name -> dir2, name2, f)   renameat, renameat2
 *
 * An open without O_EXCL of an existing name creates nothing: its writes
 * land in that name's inode, as they do on disk. A rename between two
 * names of one inode does nothing (POSIX), so it is not logged.
 *
 * The model. A crash before table call k keeps a prefix of the log: the
 * operations of calls 1..k-1. For each object, the operations before its
 * last sync in the prefix are durable; those after it are pending, and
 * objects are independent of each other (nothing orders two objects but
 * their own syncs).
 *   - A file's pending data operations persist as any subset, applied in
 *     order (all subsets up to 4 pending operations, otherwise every
 *     prefix and every "all but one"); and, on top of "all persisted",
 *     each pending write may persist only in part: any proper subset of
 *     its 4 KiB blocks (for writes of up to 4 blocks; for longer ones only
 *     the first, only the last, all but the first, all but the last), the
 *     rest of its range keeping the earlier bytes, or zeros past the old
 *     end; or, for an append, as the size change alone, filled with zeros
 *     or with garbage.
 *   - A file's permission bits are metadata: a created inode has its
 *     creation mode, and an fchmod is made durable by an fsync of the file,
 *     not by fdatasync (which, per POSIX, flushes only the metadata needed
 *     to read the data back) nor by an fsync of its directory. Pending
 *     fchmods persist or not like pending writes.
 *   - A directory's pending entry changes persist as any subset, applied
 *     in order. A rename is two changes (add the new name, remove the old
 *     one), so it may persist as either half alone (unless the workload
 *     sets rename_whole: then both halves or neither, and a sync of
 *     either directory makes both durable). fsync of a file never
 *     makes its name durable; only fsync of the directory does.
 *   - An inode no surviving entry reaches is gone.
 * The product of the choices of the pending directories, then of the
 * files reachable in each resulting tree, is enumerated; identical trees
 * (same paths, same bytes, same hard links) with the same progress are
 * judged once. Each distinct state is built in a scratch directory and
 * judged as Layer A judges a remounted filesystem (power.h: pw_judge):
 * leftovers, the sweep, the workload's invariant.
 *
 * Progress: an operation of the workload that returned before call k is
 * "returned" in the crash states of k, exactly as the shared memory of a
 * killed child tells Layer A.
 *
 * Bounds: at most MAX_STATES distinct states per workload (the count
 * printed says whether the bound was hit); a directory with more than 12
 * pending changes or a tree with more than 6 files fails the test rather
 * than silently sampling.
 *
 * What the model leaves out: metadata other than names, bytes and
 * permission bits (owners, times: the sweep's age test runs with age 0), reordering across
 * a sync of the same object, and a torn directory block (entry changes are
 * whole).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/openat2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "power.h"
#include "sys.h"
#include "testutil.h"

#define MAX_OBJ 64
#define MAX_ENT 32
#define MAX_LOG 256
#define MAX_STATES 20000
#define BLOCK 4096
#define NAMELEN 64

/* ---- objects and the log --------------------------------------------- */

struct mfile {
	unsigned char *data;
	size_t size;
	unsigned mode;        /* permission bits */
};

struct ment {
	char name[NAMELEN];
	int id;
};

struct mdir {
	struct ment e[MAX_ENT];
	int n;
};

struct obj {
	bool dir;
	bool link;            /* a symbolic link: f.data is what it reads,
	                         durable with its creation, like a name */
	ino_t ino;            /* in the recording run, while it is current */
	struct mfile f;       /* initial content (files) */
	struct mdir d;        /* initial entries (directories) */
};

enum opkind { OP_CREATE, OP_TMPFILE, OP_MKDIR, OP_WRITE, OP_TRUNC, OP_SYNC,
              OP_LINK, OP_UNLINK, OP_RENAME, OP_CHMOD };

static const char *const opname[] = { "create", "tmpfile", "mkdir", "write",
                                      "trunc", "sync", "link", "unlink",
                                      "rename", "chmod" };

struct op {
	enum opkind kind;
	int call;               /* the table call that did it */
	int id;                 /* the file or directory it changes */
	int dir, dir2;          /* entry changes: directories */
	char name[NAMELEN], name2[NAMELEN];
	off_t off;
	size_t len;
	unsigned char *data;    /* OP_WRITE: the bytes */
	unsigned mode;          /* OP_CHMOD */
	bool full;              /* OP_SYNC: fsync (metadata too), not
	                           fdatasync */
};

/*
 * The recording lives in memory shared with the child that runs the
 * workload (so an owner record names a process that is dead by the time
 * recovery runs, as after a real crash); the bytes it logs come from a
 * shared arena so the pointers stay valid in the parent.
 */
struct recstate {
	struct obj obj[MAX_OBJ];
	int nobj;
	struct op log[MAX_LOG];
	int nlog;
	int calls;
	const char *callname[MAX_LOG * 4 + 2]; /* 1-based */
	char error[256];        /* first thing the recorder could not follow */
	struct pw_progress prog;
	size_t arena_used;
};
static struct recstate *R;
static unsigned char *arena;
#define ARENA_SIZE ((size_t)64 << 20)

static void rec_fail(const char *fmt, ...);

static void *arena_copy(const void *b, size_t n)
{
	size_t at = __atomic_fetch_add(&R->arena_used, (n + 15) & ~(size_t)15,
	                               __ATOMIC_SEQ_CST);

	if (at + n > ARENA_SIZE) {
		rec_fail("the recording arena is full");
		return NULL;
	}
	memcpy(arena + at, b, n);
	return arena + at;
}

static void rec_fail(const char *fmt, ...)
{
	va_list ap;

	if (R->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(R->error, sizeof(R->error), fmt, ap);
	va_end(ap);
}

static int new_obj(ino_t ino, bool dir)
{
	if (R->nobj == MAX_OBJ) {
		rec_fail("more than %d objects", MAX_OBJ);
		return 0;
	}
	/* A reused inode number is a new object: forget the old binding. */
	for (int i = 0; i < R->nobj; i++)
		if (R->obj[i].ino == ino)
			R->obj[i].ino = 0;
	struct obj *o = &R->obj[R->nobj];
	memset(o, 0, sizeof(*o));
	o->dir = dir;
	o->ino = ino;
	return R->nobj++;
}

static void set_link(int id, const char *to, size_t n)
{
	R->obj[id].link = true;
	R->obj[id].f.mode = 0777;
	R->obj[id].f.data = arena_copy(to, n);
	R->obj[id].f.size = n;
}

static int id_of_ino(ino_t ino)
{
	for (int i = 0; i < R->nobj; i++)
		if (R->obj[i].ino == ino)
			return i;
	rec_fail("inode %lu is not in the model", (unsigned long)ino);
	return 0;
}

static int id_of_fd(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		rec_fail("fstat %d: %s", fd, strerror(errno));
		return 0;
	}
	return id_of_ino(st.st_ino);
}

/* The batch syncs from a thread pool: log slots are taken under a lock
   (the slot's fields are then its caller's alone). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static struct op *log_op(enum opkind k, int id)
{
	pthread_mutex_lock(&log_mu);
	struct op *o = &R->log[R->nlog < MAX_LOG ? R->nlog++ : MAX_LOG - 1];
	if (R->nlog == MAX_LOG)
		rec_fail("more than %d operations", MAX_LOG - 1);
	memset(o, 0, sizeof(*o));
	o->kind = k;
	o->call = __atomic_load_n(&R->calls, __ATOMIC_SEQ_CST);
	o->id = id;
	pthread_mutex_unlock(&log_mu);
	return o;
}

/* Whether the file's last logged operation was a sync: all of it written
   so far is durable. */
static bool last_op_synced(int fd)
{
	int id = id_of_fd(fd);
	bool synced = false;

	pthread_mutex_lock(&log_mu);
	for (int i = R->nlog - 1; i >= 0; i--)
		if (R->log[i].id == id) {
			synced = R->log[i].kind == OP_SYNC;
			break;
		}
	pthread_mutex_unlock(&log_mu);
	return synced;
}

/* The directory `path` (relative to dirfd) lives in, and its last name. */
static int parent_of(int dirfd, const char *path, char base[NAMELEN])
{
	const char *slash = strrchr(path, '/');
	struct stat st;
	int r;

	if (strlen(slash ? slash + 1 : path) >= NAMELEN) {
		rec_fail("name too long: %s", path);
		return 0;
	}
	strcpy(base, slash ? slash + 1 : path);
	if (!slash) {
		r = dirfd == AT_FDCWD ? stat(".", &st) : fstat(dirfd, &st);
	} else {
		char dir[PATH_MAX];
		size_t n = (size_t)(slash - path);
		memcpy(dir, path, n ? n : 1);
		dir[n ? n : 1] = '\0';
		r = fstatat(dirfd, dir, &st, 0);
	}
	if (r < 0) {
		rec_fail("parent of %s: %s", path, strerror(errno));
		return 0;
	}
	return id_of_ino(st.st_ino);
}

static bool lstat_at(int dirfd, const char *path, struct stat *st)
{
	return fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* ---- the recording table ---------------------------------------------- */

static const struct fsafe_sys *next_sys;
static struct fsafe_sys rec_sys;

static int rec_calls(void)
{
	return R->calls;
}

/* Count a table call and remember its name (for messages). */
static void tick(const char *name)
{
	int n = __atomic_add_fetch(&R->calls, 1, __ATOMIC_SEQ_CST);

	if (n < (int)(sizeof(R->callname) / sizeof(R->callname[0])))
		R->callname[n] = name;
}

static int r_openat(int d, const char *p, int f, mode_t m)
{
	bool tmp = (f & O_TMPFILE) == O_TMPFILE;
	struct stat st;
	bool existed = !tmp && (f & O_CREAT) && lstat_at(d, p, &st);
	char base[NAMELEN];
	int dir = 0;

	tick("openat");
	if (!tmp && (f & O_CREAT))
		dir = parent_of(d, p, base);
	int fd = next_sys->openat(d, p, f, m);
	if (fd < 0)
		return fd;
	int e = errno;
	fstat(fd, &st);
	if (tmp) {
		int id = new_obj(st.st_ino, false);
		R->obj[id].f.mode = st.st_mode & 07777;
		log_op(OP_TMPFILE, id);
	} else if ((f & O_CREAT) && !existed) {
		int id = new_obj(st.st_ino, false);
		/* The mode it was created with comes with the inode. */
		R->obj[id].f.mode = st.st_mode & 07777;
		struct op *o = log_op(OP_CREATE, id);
		o->dir = dir;
		strcpy(o->name, base);
	} else if ((f & O_TRUNC) && S_ISREG(st.st_mode)) {
		log_op(OP_TRUNC, id_of_ino(st.st_ino))->len = 0;
	}
	errno = e;
	return fd;
}

/* A symbolic link is created whole: what it reads comes with its inode,
   which persists with the name (there is no way to sync a link itself). */
static int r_symlinkat(const char *to, int d, const char *p)
{
	char base[NAMELEN];
	struct stat st;

	tick("symlinkat");
	int dir = parent_of(d, p, base);
	int r = next_sys->symlinkat(to, d, p);
	int e = errno;
	if (r == 0 && lstat_at(d, p, &st)) {
		int id = new_obj(st.st_ino, false);
		set_link(id, to, strlen(to));
		struct op *o = log_op(OP_CREATE, id);
		o->dir = dir;
		strcpy(o->name, base);
	}
	errno = e;
	return r;
}

static int r_openat2(int d, const char *p, void *how, size_t size)
{
	tick("openat2");
	/* The library opens only directories with openat2 (to resolve
	   beneath a root); one that creates or truncates would need logging
	   like openat, so say so rather than miss it. */
	if (size >= sizeof(uint64_t) &&
	    (((const struct open_how *)how)->flags &
	     (O_CREAT | O_TRUNC | __O_TMPFILE)))
		rec_fail("a creating openat2 is not modelled");
	return next_sys->openat2(d, p, how, size);
}

static void log_write(int fd, off_t off, const void *b, ssize_t n)
{
	struct stat st;

	if (n <= 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	struct op *o = log_op(OP_WRITE, id_of_ino(st.st_ino));
	o->off = off;
	o->len = (size_t)n;
	o->data = arena_copy(b, (size_t)n);
}

static ssize_t r_write(int fd, const void *b, size_t n)
{
	tick("write");
	ssize_t r = next_sys->write(fd, b, n);
	int e = errno;
	/* Where it landed, read after the fact: with O_APPEND the offset
	   before the write is not where the bytes go. */
	off_t off = r > 0 ? lseek(fd, 0, SEEK_CUR) - r : 0;
	log_write(fd, off, b, r);
	errno = e;
	return r;
}

static ssize_t r_pwrite(int fd, const void *b, size_t n, off_t off)
{
	tick("pwrite");
	ssize_t r = next_sys->pwrite(fd, b, n, off);
	int e = errno;
	log_write(fd, off, b, r);
	errno = e;
	return r;
}

static int log_sync(int fd, int r, bool full)
{
	int e = errno;

	if (r == 0)
		log_op(OP_SYNC, id_of_fd(fd))->full = full;
	errno = e;
	return r;
}

/*
 * A write with its own sync (RWF_DSYNC / RWF_SYNC): the pieces, then a
 * sync of the file if any of it was written. The kernel makes only the
 * written range durable; the model syncs the file, which is the same
 * while the library writes a stage's whole content this way, from its
 * start (a short count continues it, its first part already synced), so
 * any other use is refused here.
 */
static ssize_t r_pwritev2(int fd, const struct iovec *v, int n, off_t off,
                          int flags)
{
	tick("pwritev2");
	off_t at = off == -1 ? lseek(fd, 0, SEEK_CUR) : off;
	bool synced = flags & (FSAFE__RWF_DSYNC | FSAFE__RWF_SYNC);
	if (synced && at != 0 && !last_op_synced(fd))
		rec_fail("a synced write after unsynced data is not modelled");
	ssize_t r = next_sys->pwritev2(fd, v, n, off, flags);
	int e = errno;
	size_t left = r > 0 ? (size_t)r : 0;
	for (int i = 0; i < n && left > 0; i++) {
		size_t k = v[i].iov_len < left ? v[i].iov_len : left;
		log_write(fd, at, v[i].iov_base, (ssize_t)k);
		at += (off_t)k;
		left -= k;
	}
	if (synced && r > 0)
		log_sync(fd, 0, flags & FSAFE__RWF_SYNC);
	errno = e;
	return r;
}

static int r_fsync(int fd)
{
	tick("fsync");
	return log_sync(fd, next_sys->fsync(fd), true);
}

static int r_fdatasync(int fd)
{
	tick("fdatasync");
	return log_sync(fd, next_sys->fdatasync(fd), false);
}

/* The batch's data syncs, all at once (io_uring): each that succeeded is
   an fdatasync of its fd. */
static int r_fdatasync_many(struct fsafe__ring **keep, const int *fds,
                            size_t n, int *errs)
{
	tick("fdatasync_many");
	int r = next_sys->fdatasync_many(keep, fds, n, errs);
	int e = errno;
	for (size_t i = 0; r == 0 && i < n; i++)
		if (fds[i] >= 0 && errs[i] == 0)
			log_op(OP_SYNC, id_of_fd(fds[i]))->full = false;
	errno = e;
	return r;
}

/* The batch's one sync of a whole filesystem: everything is durable. */
static int r_syncfs(int fd)
{
	tick("syncfs");
	int r = next_sys->syncfs(fd);
	int e = errno;
	for (int id = 0; r == 0 && id < R->nobj; id++)
		log_op(OP_SYNC, id)->full = true;
	errno = e;
	return r;
}

static int r_fchmod(int fd, mode_t m)
{
	tick("fchmod");
	int r = next_sys->fchmod(fd, m);
	int e = errno;
	if (r == 0)
		log_op(OP_CHMOD, id_of_fd(fd))->mode = m & 07777;
	errno = e;
	return r;
}

static int r_ftruncate(int fd, off_t len)
{
	tick("ftruncate");
	int r = next_sys->ftruncate(fd, len);
	int e = errno;
	if (r == 0)
		log_op(OP_TRUNC, id_of_fd(fd))->len = (size_t)len;
	errno = e;
	return r;
}

static void log_rename(int a, const char *old, int b, const char *new_,
                       int r, const struct stat *so, bool had_new,
                       const struct stat *sn, int d1, int d2,
                       const char *b1, const char *b2)
{
	(void)a, (void)old, (void)b, (void)new_;
	if (r != 0)
		return;
	if (had_new && sn->st_ino == so->st_ino)
		return; /* two names of one inode: rename does nothing */
	struct op *o = log_op(OP_RENAME, id_of_ino(so->st_ino));
	o->dir = d1;
	o->dir2 = d2;
	strcpy(o->name, b1);
	strcpy(o->name2, b2);
}

static int r_renameat2(int a, const char *old, int b, const char *new_,
                       unsigned flags)
{
	struct stat so, sn;
	char b1[NAMELEN], b2[NAMELEN];

	tick("renameat2");
	if (flags & ~1u) /* only RENAME_NOREPLACE is modelled */
		rec_fail("renameat2 flags %#x", flags);
	bool had_old = lstat_at(a, old, &so);
	bool had_new = lstat_at(b, new_, &sn);
	int d1 = had_old ? parent_of(a, old, b1) : 0;
	int d2 = had_old ? parent_of(b, new_, b2) : 0;
	int r = next_sys->renameat2(a, old, b, new_, flags);
	int e = errno;
	if (had_old)
		log_rename(a, old, b, new_, r, &so, had_new, &sn, d1, d2, b1,
		           b2);
	errno = e;
	return r;
}

static int r_renameat(int a, const char *old, int b, const char *new_)
{
	struct stat so, sn;
	char b1[NAMELEN], b2[NAMELEN];

	tick("renameat");
	bool had_old = lstat_at(a, old, &so);
	bool had_new = lstat_at(b, new_, &sn);
	int d1 = had_old ? parent_of(a, old, b1) : 0;
	int d2 = had_old ? parent_of(b, new_, b2) : 0;
	int r = next_sys->renameat(a, old, b, new_);
	int e = errno;
	if (had_old)
		log_rename(a, old, b, new_, r, &so, had_new, &sn, d1, d2, b1,
		           b2);
	errno = e;
	return r;
}

static int r_linkat(int a, const char *old, int b, const char *new_, int f)
{
	struct stat st;
	char base[NAMELEN];

	tick("linkat");
	int dir = parent_of(b, new_, base);
	int r = next_sys->linkat(a, old, b, new_, f);
	int e = errno;
	if (r == 0 && lstat_at(b, new_, &st)) {
		struct op *o = log_op(OP_LINK, id_of_ino(st.st_ino));
		o->dir = dir;
		strcpy(o->name, base);
	}
	errno = e;
	return r;
}

static int r_unlinkat(int d, const char *p, int f)
{
	char base[NAMELEN];

	tick("unlinkat");
	int dir = parent_of(d, p, base);
	int r = next_sys->unlinkat(d, p, f);
	int e = errno;
	if (r == 0) {
		struct op *o = log_op(OP_UNLINK, 0);
		o->dir = dir;
		strcpy(o->name, base);
	}
	errno = e;
	return r;
}

static int r_mkdirat(int d, const char *p, mode_t m)
{
	struct stat st;
	char base[NAMELEN];

	tick("mkdirat");
	int dir = parent_of(d, p, base);
	int r = next_sys->mkdirat(d, p, m);
	int e = errno;
	if (r == 0 && lstat_at(d, p, &st)) {
		struct op *o = log_op(OP_MKDIR, new_obj(st.st_ino, true));
		o->dir = dir;
		strcpy(o->name, base);
	}
	errno = e;
	return r;
}

/* Calls that change nothing persistent are only counted, so the call
   numbers match the fault layer's (and Layer A's cut points). */
#define COUNTED(ret, name, params, args)                                      \
	static ret c_##name params                                            \
	{                                                                     \
		tick(#name);                                                  \
		return next_sys->name args;                                   \
	}
COUNTED(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))
COUNTED(ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
COUNTED(int, fstatat, (int d, const char *p, struct stat *s, int f),
        (d, p, s, f))
COUNTED(int, fstat, (int fd, struct stat *s), (fd, s))
COUNTED(int, fstatfs, (int fd, struct statfs *s), (fd, s))
COUNTED(off_t, lseek, (int fd, off_t o, int w), (fd, o, w))
COUNTED(ssize_t, readlinkat, (int d, const char *p, char *b, size_t n),
        (d, p, b, n))
COUNTED(int, fchown, (int fd, uid_t u, gid_t g), (fd, u, g))
COUNTED(int, fcntl_lock, (int fd, int c, struct flock *l), (fd, c, l))
COUNTED(ssize_t, getdents, (int fd, void *b, size_t n), (fd, b, n))
COUNTED(int, close, (int fd), (fd))
COUNTED(ssize_t, getrandom, (void *b, size_t n, unsigned f), (b, n, f))
COUNTED(int, ioctl, (int fd, unsigned long r, void *a), (fd, r, a))
COUNTED(int, kill, (pid_t p, int s), (p, s))
COUNTED(int, flock, (int fd, int op), (fd, op))

/*
 * Entries not named here pass through uncounted and unlogged. A new entry
 * that changes persistent state (a batched sync, say) must be added, or
 * the model will miss what it does.
 */
static void rec_table_init(const struct fsafe_sys *next)
{
	next_sys = next;
	rec_sys = *next;
	rec_sys.openat = r_openat;
	rec_sys.openat2 = r_openat2;
	rec_sys.write = r_write;
	rec_sys.pwrite = r_pwrite;
	rec_sys.pwritev2 = r_pwritev2;
	rec_sys.fsync = r_fsync;
	rec_sys.syncfs = r_syncfs;
	rec_sys.fdatasync = r_fdatasync;
	rec_sys.ftruncate = r_ftruncate;
	rec_sys.renameat = r_renameat;
	rec_sys.renameat2 = r_renameat2;
	rec_sys.linkat = r_linkat;
	rec_sys.unlinkat = r_unlinkat;
	rec_sys.mkdirat = r_mkdirat;
	rec_sys.read = c_read;
	rec_sys.pread = c_pread;
	rec_sys.fstatat = c_fstatat;
	rec_sys.fstat = c_fstat;
	rec_sys.fstatfs = c_fstatfs;
	rec_sys.lseek = c_lseek;
	rec_sys.readlinkat = c_readlinkat;
	rec_sys.fchmod = r_fchmod;
	rec_sys.fdatasync_many = r_fdatasync_many;
	rec_sys.fchown = c_fchown;
	rec_sys.fcntl_lock = c_fcntl_lock;
	rec_sys.getdents = c_getdents;
	rec_sys.close = c_close;
	rec_sys.getrandom = c_getrandom;
	rec_sys.ioctl = c_ioctl;
	rec_sys.kill = c_kill;
	rec_sys.flock = c_flock;
	rec_sys.symlinkat = r_symlinkat;
}

/* ---- capturing the initial tree ---------------------------------------- */

static void read_all(int dirfd, const char *name, struct mfile *f)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	size_t cap = 0;

	if (fd < 0)
		fail_msg("open %s: %s", name, strerror(errno));
	f->size = 0;
	f->data = NULL;
	for (;;) {
		if (f->size == cap) {
			cap = cap ? 2 * cap : 65536;
			if (!(f->data = realloc(f->data, cap)))
				abort();
		}
		ssize_t r = read(fd, f->data + f->size, cap - f->size);
		if (r < 0)
			fail_msg("read %s: %s", name, strerror(errno));
		if (r == 0)
			break;
		f->size += (size_t)r;
	}
	close(fd);
}

static void capture(int fd, int id)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;

	if (!d)
		fail_msg("fdopendir: %s", strerror(errno));
	while ((e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			fail_msg("stat %s: %s", e->d_name, strerror(errno));
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
		    !S_ISLNK(st.st_mode))
			fail_msg("%s: only files, directories and symbolic "
			         "links are modelled", e->d_name);
		int child = -1;
		for (int i = 0; i < R->nobj; i++)
			if (R->obj[i].ino == st.st_ino)
				child = i; /* a second name of a captured file */
		if (child < 0) {
			child = new_obj(st.st_ino, S_ISDIR(st.st_mode));
			if (S_ISDIR(st.st_mode)) {
				int sub = openat(fd, e->d_name,
				                 O_RDONLY | O_DIRECTORY);
				capture(sub, child);
			} else if (S_ISLNK(st.st_mode)) {
				char to[PATH_MAX];
				ssize_t n = readlinkat(fd, e->d_name, to,
				                       sizeof(to));
				if (n < 0)
					fail_msg("readlink %s: %s", e->d_name,
					         strerror(errno));
				set_link(child, to, (size_t)n);
			} else {
				struct mfile *f = &R->obj[child].f;
				read_all(fd, e->d_name, f);
				f->mode = st.st_mode & 07777;
				void *b = f->data;
				f->data = arena_copy(b, f->size);
				free(b);
			}
		}
		struct mdir *md = &R->obj[id].d;
		if (md->n == MAX_ENT || strlen(e->d_name) >= NAMELEN)
			fail_msg("initial tree too large");
		strcpy(md->e[md->n].name, e->d_name);
		md->e[md->n++].id = child;
	}
	closedir(d);
}

/* ---- crash states -------------------------------------------------------- */

/* One entry change of a directory: add name -> id, or remove name. */
struct half {
	int op;         /* index in the log */
	bool add;
	const char *name;
	int id;
};

enum variant { V_NONE, V_BLOCKS, V_ZERO, V_JUNK };
static const char *const vname[] = { "", "only blocks", "as zeros (size only)",
                                     "as garbage (size only)" };

/* How a file's pending operations persist. */
struct fchoice {
	unsigned mask;     /* bit j: pending op j persists */
	int vop;           /* -1, or the pending op that persists in part */
	enum variant v;
	unsigned blocks;   /* V_BLOCKS: bit k: the write's k-th block */
};

#define MAX_PEND 12
#define MAX_FCH 64

struct pending_dir {
	int id;
	struct half h[MAX_PEND];
	int n;
};

struct pending_file {
	int ops[MAX_PEND];          /* log indices */
	int n;
	struct fchoice ch[MAX_FCH];
	int nch;
};

/* The crash point being enumerated. */
static struct {
	int prefix;                  /* log ops that happened */
	struct mdir durable[MAX_OBJ];
	struct mfile base[MAX_OBJ];  /* durable content of each file */
	struct pending_dir pd[MAX_OBJ];
	int npd;
	int pd_of[MAX_OBJ];          /* index in pd, or -1 */
	struct pending_file pf[MAX_OBJ];
} cp;

/* The state being built from the choices. */
static struct {
	struct mdir d[MAX_OBJ];
	bool reach[MAX_OBJ];
	int files[MAX_OBJ], nfiles;  /* reachable files, in walk order */
	int fch[MAX_OBJ];            /* the choice of each reachable file */
	struct mfile f[MAX_OBJ];
} st;

static void mf_set(struct mfile *f, const unsigned char *b, size_t n,
                   unsigned mode)
{
	f->mode = mode;
	free(f->data);
	f->data = malloc(n ? n : 1);
	if (!f->data)
		abort();
	if (n)
		memcpy(f->data, b, n);
	f->size = n;
}

static void mf_resize(struct mfile *f, size_t n)
{
	if (!(f->data = realloc(f->data, n ? n : 1)))
		abort();
	if (n > f->size)
		memset(f->data + f->size, 0, n - f->size);
	f->size = n;
}

static void apply_data(struct mfile *f, const struct op *o, enum variant v,
                       unsigned blocks)
{
	size_t end = (size_t)o->off + o->len, old = f->size;

	if (o->kind == OP_TRUNC) {
		mf_resize(f, o->len);
		return;
	}
	if (o->kind == OP_CHMOD) {
		f->mode = o->mode;
		return;
	}
	if (end > f->size)
		mf_resize(f, end);
	/* The persisted pieces of the write, block by block; the rest of its
	   range keeps the earlier bytes, or zeros (garbage for V_JUNK) past
	   the old end. */
	size_t off = (size_t)o->off;
	for (size_t b = off / BLOCK, k = 0; b * BLOCK < end; b++, k++) {
		size_t lo = b * BLOCK > off ? b * BLOCK : off;
		size_t hi = (b + 1) * BLOCK < end ? (b + 1) * BLOCK : end;
		if (v == V_NONE || (v == V_BLOCKS && (blocks & (1u << k))))
			memcpy(f->data + lo, o->data + (lo - off), hi - lo);
	}
	if (v == V_JUNK)
		for (size_t i = off > old ? off : old; i < end; i++)
			f->data[i] = 0xee;
}

static void add_choice(struct pending_file *pf, unsigned mask, int vop,
                       enum variant v, unsigned blocks)
{
	if (pf->nch == MAX_FCH)
		fail_msg("more than %d choices for one file", MAX_FCH);
	pf->ch[pf->nch++] = (struct fchoice){ mask, vop, v, blocks };
}

static void file_choices(int id, struct pending_file *pf)
{
	unsigned all = (1u << pf->n) - 1;
	size_t size = cp.base[id].size;

	pf->nch = 0;
	if (pf->n <= 4) {
		for (unsigned m = 0; m <= all; m++)
			add_choice(pf, m, -1, V_NONE, 0);
	} else {
		for (int j = 0; j <= pf->n; j++)
			add_choice(pf, (1u << j) - 1, -1, V_NONE, 0);
		for (int j = 0; j < pf->n - 1; j++)
			add_choice(pf, all & ~(1u << j), -1, V_NONE, 0);
	}
	for (int j = 0; j < pf->n; j++) {
		const struct op *o = &R->log[pf->ops[j]];
		if (o->kind == OP_TRUNC)
			size = o->len;
		if (o->kind != OP_WRITE)
			continue;
		size_t end = (size_t)o->off + o->len;
		unsigned nb = (unsigned)((end - 1) / BLOCK - (size_t)o->off / BLOCK + 1);
		unsigned full = nb < 32 ? (1u << nb) - 1 : ~0u;
		if (nb > 1 && nb <= 4) {
			/* Every proper, non-empty subset of its blocks. */
			for (unsigned b = 1; b < full; b++)
				add_choice(pf, all, j, V_BLOCKS, b);
		} else if (nb > 4) {
			unsigned last = 1u << (nb - 1 < 31 ? nb - 1 : 31);
			add_choice(pf, all, j, V_BLOCKS, 1);
			add_choice(pf, all, j, V_BLOCKS, last);
			add_choice(pf, all, j, V_BLOCKS, full & ~1u);
			add_choice(pf, all, j, V_BLOCKS, full & ~last);
		}
		if (end > size) {
			add_choice(pf, all, j, V_ZERO, 0);
			add_choice(pf, all, j, V_JUNK, 0);
			size = end;
		}
	}
}

static void dir_apply(struct mdir *d, const struct half *h)
{
	for (int i = 0; i < d->n; i++) {
		if (strcmp(d->e[i].name, h->name) != 0)
			continue;
		if (h->add)
			d->e[i].id = h->id;
		else
			d->e[i] = d->e[--d->n];
		return;
	}
	if (h->add) {
		if (d->n == MAX_ENT)
			fail_msg("directory too large");
		strcpy(d->e[d->n].name, h->name);
		d->e[d->n++].id = h->id;
	}
}

/* The last sync of `id` in the prefix (only an fsync, when full). */
static int last_sync(int id, int prefix, bool full)
{
	for (int i = prefix - 1; i >= 0; i--)
		if (R->log[i].kind == OP_SYNC && R->log[i].id == id &&
		    (R->log[i].full || !full))
			return i;
	return -1;
}

/* Entry changes of the log's first `prefix` ops, in order. */
static int halves(int prefix, struct half *h, int *dir)
{
	int n = 0;

	for (int i = 0; i < prefix; i++) {
		const struct op *o = &R->log[i];
		switch (o->kind) {
		case OP_CREATE: case OP_MKDIR: case OP_LINK:
			dir[n] = o->dir;
			h[n++] = (struct half){ i, true, o->name, o->id };
			break;
		case OP_UNLINK:
			dir[n] = o->dir;
			h[n++] = (struct half){ i, false, o->name, 0 };
			break;
		case OP_RENAME:
			dir[n] = o->dir2;
			h[n++] = (struct half){ i, true, o->name2, o->id };
			dir[n] = o->dir;
			h[n++] = (struct half){ i, false, o->name, 0 };
			break;
		default:
			break;
		}
	}
	return n;
}

static void crash_point(int prefix)
{
	static struct half h[2 * MAX_LOG];
	static int hdir[2 * MAX_LOG];
	int nh = halves(prefix, h, hdir);

	cp.prefix = prefix;
	cp.npd = 0;
	for (int id = 0; id < R->nobj; id++) {
		int s = last_sync(id, prefix, false);
		/* fdatasync makes data and size durable, not the mode. */
		int sfull = last_sync(id, prefix, true);
		cp.pd_of[id] = -1;
		cp.durable[id] = R->obj[id].d;
		mf_set(&cp.base[id], R->obj[id].f.data, R->obj[id].f.size,
		       R->obj[id].f.mode);
		cp.pf[id].n = 0;
		for (int i = 0; i < prefix; i++) {
			const struct op *o = &R->log[i];
			if (o->id != id ||
			    (o->kind != OP_WRITE && o->kind != OP_TRUNC &&
			     o->kind != OP_CHMOD))
				continue;
			if (i < (o->kind == OP_CHMOD ? sfull : s))
				apply_data(&cp.base[id], o, V_NONE, 0);
			else if (cp.pf[id].n == MAX_PEND)
				fail_msg("more than %d pending writes", MAX_PEND);
			else
				cp.pf[id].ops[cp.pf[id].n++] = i;
		}
		file_choices(id, &cp.pf[id]);
		struct pending_dir *pd = &cp.pd[cp.npd];
		pd->id = id;
		pd->n = 0;
		for (int j = 0; j < nh; j++) {
			if (hdir[j] != id)
				continue;
			if (h[j].op < s)
				dir_apply(&cp.durable[id], &h[j]);
			else if (pd->n == MAX_PEND)
				fail_msg("more than %d pending entry changes",
				         MAX_PEND);
			else
				pd->h[pd->n++] = h[j];
		}
		if (pd->n)
			cp.pd_of[id] = cp.npd++;
	}
}

/* The tree the directory choices give, and which objects it reaches. */
static void build_dirs(const unsigned *dmask)
{
	int stack[MAX_OBJ], sp = 0;

	for (int id = 0; id < R->nobj; id++) {
		st.d[id] = cp.durable[id];
		st.reach[id] = false;
		int k = cp.pd_of[id];
		if (k < 0)
			continue;
		for (int j = 0; j < cp.pd[k].n; j++)
			if (dmask[k] & (1u << j))
				dir_apply(&st.d[id], &cp.pd[k].h[j]);
	}
	st.nfiles = 0;
	st.reach[0] = true;
	stack[sp++] = 0;
	while (sp) {
		int id = stack[--sp];
		for (int i = 0; i < st.d[id].n; i++) {
			int c = st.d[id].e[i].id;
			if (st.reach[c])
				continue;
			st.reach[c] = true;
			if (R->obj[c].dir)
				stack[sp++] = c;
			else
				st.files[st.nfiles++] = c;
		}
	}
}

static void build_file(int id, const struct fchoice *c)
{
	const struct pending_file *pf = &cp.pf[id];

	mf_set(&st.f[id], cp.base[id].data, cp.base[id].size,
	       cp.base[id].mode);
	for (int j = 0; j < pf->n; j++)
		if (c->mask & (1u << j))
			apply_data(&st.f[id], &R->log[pf->ops[j]],
			           j == c->vop ? c->v : V_NONE, c->blocks);
}

/* ---- identity of a state -------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211u;
	return h;
}

static int cmp_ent(const void *a, const void *b)
{
	return strcmp(((const struct ment *)a)->name,
	              ((const struct ment *)b)->name);
}

static uint64_t hash_dir(uint64_t h, int id)
{
	struct ment e[MAX_ENT];
	int n = st.d[id].n;

	memcpy(e, st.d[id].e, sizeof(e[0]) * (size_t)n);
	qsort(e, (size_t)n, sizeof(e[0]), cmp_ent);
	for (int i = 0; i < n; i++) {
		h = fnv(h, e[i].name, strlen(e[i].name) + 1);
		h = fnv(h, &e[i].id, sizeof(e[i].id));
		if (R->obj[e[i].id].dir)
			h = hash_dir(fnv(h, "{", 1), e[i].id), h = fnv(h, "}", 1);
		else
			h = fnv(fnv(fnv(h, &st.f[e[i].id].mode, sizeof(unsigned)),
			            &st.f[e[i].id].size, sizeof(size_t)),
			        st.f[e[i].id].data, st.f[e[i].id].size);
	}
	return h;
}

#define SEEN_SLOTS (1u << 17)
static uint64_t *seen;

/* True if the state was new (and now is seen). */
static bool first_time(uint64_t h)
{
	h |= 1; /* 0 marks an empty slot */
	for (uint32_t i = (uint32_t)h & (SEEN_SLOTS - 1);; i = (i + 1) & (SEEN_SLOTS - 1)) {
		if (seen[i] == h)
			return false;
		if (!seen[i]) {
			seen[i] = h;
			return true;
		}
	}
}

/* ---- building and judging a state ---------------------------------------- */

static int scratchfd = -1;
static char firstpath[MAX_OBJ][PATH_MAX];

static void materialize(int fd, int id, const char *path)
{
	for (int i = 0; i < st.d[id].n; i++) {
		const struct ment *e = &st.d[id].e[i];
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", path, e->name);
		if (R->obj[e->id].dir) {
			if (mkdirat(fd, e->name, 0755) < 0)
				fail_msg("mkdir %s: %s", p, strerror(errno));
			int sub = openat(fd, e->name, O_RDONLY | O_DIRECTORY);
			materialize(sub, e->id, p);
			close(sub);
		} else if (R->obj[e->id].link) {
			char to[PATH_MAX];
			const struct mfile *m = &st.f[e->id];
			memcpy(to, m->data, m->size);
			to[m->size] = '\0';
			if (symlinkat(to, fd, e->name) < 0)
				fail_msg("symlink %s: %s", p, strerror(errno));
		} else if (firstpath[e->id][0]) {
			if (linkat(scratchfd, firstpath[e->id], fd, e->name, 0) < 0)
				fail_msg("link %s: %s", p, strerror(errno));
		} else {
			int f = openat(fd, e->name, O_WRONLY | O_CREAT | O_EXCL,
			               0644);
			const struct mfile *m = &st.f[e->id];
			if (f < 0 || write(f, m->data, m->size) != (ssize_t)m->size ||
			    fchmod(f, m->mode) < 0)
				fail_msg("create %s: %s", p, strerror(errno));
			close(f);
			strcpy(firstpath[e->id], p);
		}
	}
}

/* What persisted, for a violation's message. */
static void describe(const unsigned *dmask, char *buf, size_t len)
{
	size_t n = 0;

#define PUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
	for (int k = 0; k < cp.npd; k++) {
		PUT(" dir#%d[", cp.pd[k].id);
		for (int j = 0; j < cp.pd[k].n; j++) {
			const struct half *h = &cp.pd[k].h[j];
			PUT("%s%s%s%s", j ? " " : "",
			    dmask[k] & (1u << j) ? "" : "lost:",
			    h->add ? "+" : "-", h->name);
		}
		PUT("]");
	}
	for (int i = 0; i < st.nfiles; i++) {
		int id = st.files[i];
		const struct pending_file *pf = &cp.pf[id];
		if (!pf->n)
			continue;
		const struct fchoice *c = &pf->ch[st.fch[id]];
		PUT(" file#%d[", id);
		for (int j = 0; j < pf->n; j++) {
			const struct op *o = &R->log[pf->ops[j]];
			if (o->kind == OP_CHMOD) {
				PUT("%s%schmod %04o", j ? " " : "",
				    c->mask & (1u << j) ? "" : "lost:", o->mode);
				continue;
			}
			PUT("%s%s%s %zu@%lld%s%s", j ? " " : "",
			    c->mask & (1u << j) ? "" : "lost:", opname[o->kind],
			    o->len, (long long)o->off, j == c->vop ? " " : "",
			    j == c->vop ? vname[c->v] : "");
			if (j == c->vop && c->v == V_BLOCKS)
				PUT(" %#x", c->blocks);
		}
		PUT("]");
	}
#undef PUT
	if (n >= len && len > 4)
		strcpy(buf + len - 4, "...");
}

struct tally {
	int points, states, violations;
	long enumerated;        /* before identical states were merged */
	int ops;                /* library calls of the whole workload */
	bool bounded;
	char first[3][1024];
};

static void judge_state(const struct pw_workload *w,
                        const struct pw_progress *p, int k,
                        const unsigned *dmask, struct tally *t)
{
	char why[512], what[600];

	memset(firstpath, 0, sizeof(firstpath));
	pw_rmtree_at(scratchfd, "state");
	if (mkdirat(scratchfd, "state", 0755) < 0)
		fail_msg("mkdir state: %s", strerror(errno));
	int fd = openat(scratchfd, "state", O_RDONLY | O_DIRECTORY);
	materialize(fd, 0, "state");
	const char *bad = pw_judge(w, fd, p, why, sizeof(why));
	close(fd);
	t->states++;
	if (!bad)
		return;
	if (t->violations < 3) {
		describe(dmask, what, sizeof(what));
		snprintf(t->first[t->violations], sizeof(t->first[0]),
		         "crash before call %d (%s), %d of %d ops returned: %s;"
		         " persisted:%s", k,
		         k <= R->calls ? R->callname[k] : "after return",
		         p->returned, t->ops, bad, what);
	}
	t->violations++;
}

/* State of rename op `op`'s add (or remove) half: 1 when it persists. */
static int half_state(const unsigned *dmask, int op, bool add)
{
	for (int k = 0; k < cp.npd; k++)
		for (int j = 0; j < cp.pd[k].n; j++)
			if (cp.pd[k].h[j].op == op && cp.pd[k].h[j].add == add)
				return !!(dmask[k] & (1u << j));
	return 1; /* durable */
}

/* For w->rename_whole: every rename's halves persisted together. */
static bool renames_whole(const unsigned *dmask)
{
	for (int k = 0; k < cp.npd; k++)
		for (int j = 0; j < cp.pd[k].n; j++) {
			const struct half *h = &cp.pd[k].h[j];
			if (R->log[h->op].kind == OP_RENAME &&
			    half_state(dmask, h->op, true) !=
			            half_state(dmask, h->op, false))
				return false;
		}
	return true;
}

/* Every state of crash point k (prefix of the log, progress p). */
static void enumerate(const struct pw_workload *w,
                      const struct pw_progress *p, int k, struct tally *t)
{
	unsigned dmask[MAX_OBJ] = { 0 };

	for (;;) {
		build_dirs(dmask);
		for (int i = 0; i < st.nfiles; i++)
			st.fch[st.files[i]] = 0;
		bool skip = w->rename_whole && !renames_whole(dmask);
		while (!skip) {
			for (int i = 0; i < st.nfiles; i++) {
				int id = st.files[i];
				build_file(id, &cp.pf[id].ch[st.fch[id]]);
			}
			t->enumerated++;
			uint64_t h = hash_dir(fnv(14695981039346656037u,
			                          &p->returned,
			                          sizeof(p->returned)), 0);
			if (first_time(h)) {
				if (t->states == MAX_STATES) {
					t->bounded = true;
					return;
				}
				judge_state(w, p, k, dmask, t);
			}
			/* Next file choice (mixed radix). */
			int i = 0;
			for (; i < st.nfiles; i++) {
				int id = st.files[i];
				if (++st.fch[id] < cp.pf[id].nch)
					break;
				st.fch[id] = 0;
			}
			if (i == st.nfiles)
				break;
		}
		/* Next directory choice. */
		int j = 0;
		for (; j < cp.npd; j++) {
			if (++dmask[j] < (1u << cp.pd[j].n))
				break;
			dmask[j] = 0;
		}
		if (j == cp.npd)
			return;
	}
}

/* ---- recording a workload -------------------------------------------------- */

static char *scratch;

static void rec_reset(void)
{
	memset(R, 0, sizeof(*R));
}

static void record(const struct pw_workload *w, struct pw_progress *p)
{
	struct stat sb;

	rec_reset();
	pw_rmtree_at(scratchfd, "rec");
	if (mkdirat(scratchfd, "rec", 0755) < 0)
		fail_msg("mkdir rec: %s", strerror(errno));
	int root = openat(scratchfd, "rec", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0 || fstat(root, &sb) < 0)
		fail_msg("open rec: %s", strerror(errno));
	if (w->setup_old)
		w->setup_old(root);
	new_obj(sb.st_ino, true); /* the root is object 0 */
	capture(dup(root), 0);

	pid_t pid = fork();
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		rec_table_init(&pw_sys_det);
		pw_det_reset();
		pw_calls_now = rec_calls;
		fsafe__sys_swap(&rec_sys);
		w->run(root, &R->prog);
		fsafe__sys_swap(NULL);
		_exit(0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		fail_msg("waitpid: %s", strerror(errno));
	close(root);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s: the recording child failed, status %#x", w->name,
		         status);
	*p = R->prog;
	if (R->error[0])
		fail_msg("%s: the recorder lost track: %s", w->name, R->error);
}

static const char *log_text(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < R->nlog && n < len; i++) {
		const struct op *o = &R->log[i];
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? " " : "",
		                      opname[o->kind]);
		if (o->kind == OP_SYNC)
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0,
			                      "(%s#%d%s)",
			                      R->obj[o->id].dir ? "dir" : "file",
			                      o->id, o->full ? "" : ", data");
	}
	return buf;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void model(const struct pw_workload *w, struct tally *t)
{
	struct pw_progress prog;
	int lastp = -1, lastr = -1;
	char text[2048];
	double t0 = now_s();

	memset(t, 0, sizeof(*t));
	memset(seen, 0, SEEN_SLOTS * sizeof(*seen));
	record(w, &prog);
	t->ops = prog.returned;
	for (int k = 1; k <= R->calls + 1 && !t->bounded; k++) {
		int p = 0;
		while (p < R->nlog && R->log[p].call <= k - 1)
			p++;
		struct pw_progress pk = prog;
		pk.returned = 0;
		while (pk.returned < prog.returned &&
		       prog.calls[pk.returned] <= k - 1)
			pk.returned++;
		if (p == lastp && pk.returned == lastr)
			continue;
		lastp = p, lastr = pk.returned;
		t->points++;
		crash_point(p);
		enumerate(w, &pk, k, t);
	}
	print_message("[ model %-38s ] %2d calls, %2d fs ops, %2d crash points,"
	              " %4ld choices, %4d distinct states%s%s: %3d violations "
	              "(%.2f s)\n", w->name, R->calls, R->nlog, t->points,
	              t->enumerated, t->states,
	              t->bounded ? " (bound hit)" : "",
	              w->rename_whole ? " (renames whole)" : "", t->violations,
	              now_s() - t0);
	print_message("    log: %s\n", log_text(text, sizeof(text)));
	for (int i = 0; i < t->violations && i < 3; i++)
		print_message("    %s\n", t->first[i]);
}

/* ---- tests ------------------------------------------------------------------- */

static void model_workload(void **state)
{
	const struct pw_workload *w = *state;
	struct tally t;

	fsafe__test_break = 0;
	model(w, &t);
	if (t.violations)
		fail_msg("%s: %d of %d crash states break an invariant; first: "
		         "%s", w->name, t.violations, t.states, t.first[0]);
}

static const struct {
	unsigned bit;
	const char *name;
} breaks[] = {
	{ FSAFE__BREAK_DIR_SYNC, "no directory sync" },
	{ FSAFE__BREAK_DATA_SYNC, "no data sync" },
	{ FSAFE__BREAK_EXCL, "no O_EXCL" },
};

/* The model is deterministic: every workload that claims to catch a
   missing step must show at least one violation without it. */
static void model_broken(void **state)
{
	const unsigned *bit = *state;
	int total = 0, states = 0;
	struct tally t;
	const char *blind = NULL;

	fsafe__test_break = *bit;
	for (size_t i = 0; i < pw_workload_count(); i++) {
		const struct pw_workload *w = pw_workload_at(i);
		if (!(w->catches & *bit))
			continue;
		model(w, &t);
		total += t.violations;
		states += t.states;
		if (!t.violations && !blind)
			blind = w->name;
	}
	fsafe__test_break = 0;
	print_message("[ model broken: %-30s ] %d violations in %d states\n",
	              *bit == FSAFE__BREAK_DIR_SYNC ? breaks[0].name
	              : *bit == FSAFE__BREAK_DATA_SYNC ? breaks[1].name
	                                               : breaks[2].name,
	              total, states);
	if (blind)
		fail_msg("the model found no violation in %s with a safety step "
		         "removed: the harness cannot fail", blind);
}

/*
 * A workload that runs with rename_whole must need it: in the strict
 * model (either half of a rename alone) it loses something. That pins the
 * documented limit (docs/DESIGN.md: the inbox needs a journaled rename);
 * when this fails, the protocol no longer depends on it: drop the flag.
 */
static void model_strict_renames(void **state)
{
	(void)state;
	int needy = 0;
	struct tally t;

	fsafe__test_break = 0;
	for (size_t i = 0; i < pw_workload_count(); i++) {
		struct pw_workload w = *pw_workload_at(i);
		if (!w.rename_whole)
			continue;
		w.rename_whole = false;
		model(&w, &t);
		print_message("[ strict renames: %-28s ] %d violations in %d "
		              "states\n", w.name, t.violations, t.states);
		if (!t.violations)
			fail_msg("%s survives the strict model: rename_whole is "
			         "no longer needed", w.name);
		needy++;
	}
	if (!needy)
		skip();
}

static int group_setup(void **state)
{
	(void)state;
	pw_init();
	R = mmap(NULL, sizeof(*R), PROT_READ | PROT_WRITE,
	         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	arena = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
	             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (R == MAP_FAILED || arena == MAP_FAILED)
		return -1;
	seen = calloc(SEEN_SLOTS, sizeof(*seen));
	scratch = tu_mkscratch();
	scratchfd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return seen && scratchfd >= 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	rec_reset();
	close(scratchfd);
	tu_rmtree(scratch);
	free(scratch);
	free(seen);
	return 0;
}

int main(void)
{
	enum { MAX = 64 };
	struct CMUnitTest tests[MAX];
	static char names[MAX][128];
	static unsigned bits[3];
	size_t n = 0;

	for (size_t i = 0; i < pw_workload_count() && n < MAX; i++, n++) {
		snprintf(names[n], sizeof(names[n]), "model: %s",
		         pw_workload_at(i)->name);
		tests[n] = (struct CMUnitTest){
			.name = names[n], .test_func = model_workload,
			.initial_state = (void *)pw_workload_at(i) };
	}
	for (size_t i = 0; i < 3 && n < MAX; i++, n++) {
		bits[i] = breaks[i].bit;
		snprintf(names[n], sizeof(names[n]), "model, broken: %s",
		         breaks[i].name);
		tests[n] = (struct CMUnitTest){
			.name = names[n], .test_func = model_broken,
			.initial_state = &bits[i] };
	}
	if (n < MAX)
		tests[n++] = (struct CMUnitTest){
			.name = "model, strict renames: the journaled-rename limit",
			.test_func = model_strict_renames };
	return _cmocka_run_group_tests("power_model", tests, n, group_setup,
	                               group_teardown);
}
