/*
 * Exclusive locks with an owner record (see include/fsafe/lock.h).
 *
 * Link mode, acquire:
 *   stage the record in .lock-<uuid>.tmp (flock held from the first
 *   moment, for the lock's whole life) -> fsync -> link() onto the name
 *   -> won iff lstat(name) is our inode (never trust link()'s result: NFS
 *   may report a retransmitted success as EEXIST, or the reverse)
 *   -> else judge the holder; break it only on proof of death; back off.
 *
 * Why the flock: a kernel lock is the only proof of life that cannot lie
 * about pids. A breaker must take it on the dead lock's inode before
 * touching the name, so two breakers never interleave, and a holder whose
 * liveness is misjudged (a pid namespace we cannot see) still blocks them.
 * Where the filesystem has no locks, the rename + re-check below still
 * makes exactly one breaker win.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fsafe/lock.h"
#include "lockdir.h"
#include "opts.h"
#include "owner.h"
#include "quarantine.h"
#include "sys.h"
#include "target.h"
#include "util.h"
#include "writer.h"

#define PRIV_PREFIX ".lock-"
#define PRIV_MAX 64
#define UUID_BYTES 16
#define UUID_LEN 36
#define NAME_ATTEMPTS 4
#define BACKOFF_MIN_NS 1000000ull   /* 1 ms */
#define BACKOFF_MAX_NS 100000000ull /* 100 ms */
/* Immediate retries (after a break or a vanished holder) before backing
   off anyway: bounds spinning if the directory keeps changing under us. */
#define MAX_SPINS 64
#define NS 1000000000ull

struct fsafe_lock {
	int dirfd;
	char name[NAME_MAX + 1];
	int fd;                 /* holds the flock (link) or OFD lock (kernel) */
	bool kernel;
	dev_t dev;
	ino_t ino;
	pid_t pid;
	char token[33];
	unsigned broken;
	char staging[PRIV_MAX]; /* "" unless its removal failed at acquire */
	struct fsafe_error *error; /* the options', filled when release fails */
};

/* One acquisition in progress. */
struct acq {
	struct fsafe__target t;
	unsigned flags;
	uint64_t timeout_ns, grace_ns;
	struct fsafe_lock_owner self;
	char rec[FSAFE__OWNER_MAX];
	size_t rec_len;
	char staging[PRIV_MAX]; /* "" when we have no staging name */
	int fd;
	struct stat st;         /* of fd */
	unsigned broken;
	unsigned spins;
	uint64_t t0, backoff_ns, rng;
	struct fsafe_error *error;
	const char *step;       /* the first failed step, for error */
};

enum priv_kind { PRIV_NONE, PRIV_TMP, PRIV_BROKEN };

/* ---- small helpers ---- */

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int lstat_at(int dirfd, const char *name, struct stat *st)
{
	return fsafe__fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW);
}

/* Name the step that failed with r (the first one counts); returns r. */
static int at(struct acq *a, int r, const char *step)
{
	if (r < 0 && !a->step)
		a->step = step;
	return r;
}

/*
 * What holds a lock's name that is no lock file: -EISDIR for a directory,
 * -ELOOP for a symbolic link, -EBADFD for a FIFO, socket or device, with
 * a step that says which; 0 for a regular file (or -errno of the lstat).
 * Asked after an open or type check failed, so that a socket's ENXIO or
 * a FIFO's type is reported as what it is.
 */
static int not_a_lock(int dirfd, const char *name, const char **step)
{
	struct stat st, target;
	int r = lstat_at(dirfd, name, &st);

	if (r < 0 || S_ISREG(st.st_mode))
		return r;
	if (S_ISDIR(st.st_mode)) {
		*step = "not a regular file (directory)";
		return -EISDIR;
	}
	if (S_ISLNK(st.st_mode)) {
		r = fsafe__fstatat(dirfd, name, &target, 0);
		*step = r == -ENOENT ? "dangling symbolic link"
		                     : "symbolic link";
		return -ELOOP;
	}
	*step = fsafe__special_type(st.st_mode);
	return -EBADFD;
}

/* An open or type check of the lock's name failed with r: say why. */
static int at_name(struct acq *a, int r, const char *step)
{
	const char *what = NULL;
	int t = not_a_lock(a->t.dirfd, a->t.name, &what);

	return t < 0 && what ? at(a, t, what) : at(a, r, step);
}

static int do_flock(int fd, int op)
{
	int r;

	do
		r = SYS->flock(fd, op);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

/*
 * Take the flock a live holder keeps, without waiting. NFS emulates flock
 * with byte-range locks, where an exclusive one needs a writable fd and
 * records are read-only: a shared one still proves that no holder has it
 * (though it no longer keeps other breakers out; the re-check does).
 */
static int try_guard(int fd)
{
	int r = do_flock(fd, LOCK_EX | LOCK_NB);

	return r == -EBADF ? do_flock(fd, LOCK_SH | LOCK_NB) : r;
}

/* The filesystem offers no locks here (or not on a read-only fd, as
   NFS's flock emulation): carry on without that guard. */
static bool no_locks(int r)
{
	return r == -EINVAL || r == -ENOLCK || r == -EOPNOTSUPP || r == -EBADF;
}

static int open_record(int dirfd, const char *name)
{
	return fsafe__openat(dirfd, name,
	                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
}

static int check_regular(int fd, struct stat *st)
{
	int r = fsafe__fstat(fd, st);

	if (r < 0)
		return r;
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	return S_ISREG(st->st_mode) ? 0 : -EBADFD;
}

/* ---- private names: .lock-<uuid>.tmp and .lock-<uuid>.broken ---- */

static int priv_name(char out[PRIV_MAX], const char *suffix)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t u[UUID_BYTES];
	int r = fsafe__random(u, sizeof(u));
	char *p = out;

	if (r < 0)
		return r;
	u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* a version 4 UUID */
	u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
	p = stpcpy(p, PRIV_PREFIX);
	for (int i = 0; i < UUID_BYTES; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u[i] >> 4];
		*p++ = hex[u[i] & 0xf];
	}
	strcpy(p, suffix);
	return 0;
}

static enum priv_kind priv_kind(const char *name)
{
	const size_t pre = sizeof(PRIV_PREFIX) - 1;

	if (strncmp(name, PRIV_PREFIX, pre) != 0 || strlen(name) < pre + UUID_LEN)
		return PRIV_NONE;
	for (size_t i = 0; i < UUID_LEN; i++) {
		char c = name[pre + i];
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
		if (dash ? c != '-' : !hex)
			return PRIV_NONE;
	}
	const char *suffix = name + pre + UUID_LEN;
	if (strcmp(suffix, ".tmp") == 0)
		return PRIV_TMP;
	return strcmp(suffix, ".broken") == 0 ? PRIV_BROKEN : PRIV_NONE;
}

/* ---- options, clock, backoff ---- */

/* Milliseconds as nanoseconds, saturating: a limit too large to count to
   is no limit (and stays below INT64_MAX, for comparing with ages). */
static uint64_t ms_to_ns(uint64_t ms)
{
	return ms > (uint64_t)INT64_MAX / 1000000 ? (uint64_t)INT64_MAX
	                                          : ms * 1000000;
}

static int opts_load(struct acq *a, const struct fsafe_lock_opts *opts)
{
	struct fsafe_lock_opts in;
	const unsigned known =
		FSAFE_LOCK_NO_WAIT | FSAFE_LOCK_FORCE | FSAFE_LOCK_KERNEL;
	int r = FSAFE__OPTS_COPY(&in, opts, FSAFE_LOCK_OPTS_SIZE_V0);

	a->error = r == 0 ? in.error
	                  : FSAFE__OPTS_ERROR(opts, struct fsafe_lock_opts, r);
	if (r < 0)
		return at(a, r, "options");
	if (in.flags & ~known)
		return at(a, -EINVAL, "options");
	a->flags = in.flags;
	a->timeout_ns =
		in.timeout_ms == FSAFE_FOREVER ? 0 : ms_to_ns(in.timeout_ms);
	a->grace_ns = ms_to_ns(in.grace_ms ? in.grace_ms : FSAFE_LOCK_GRACE_MS);
	return 0;
}

/* Jitter needs no cryptographic randomness: xorshift seeded by the token. */
static uint64_t next_rng(struct acq *a)
{
	a->rng ^= a->rng << 13;
	a->rng ^= a->rng >> 7;
	a->rng ^= a->rng << 17;
	return a->rng;
}

static void seed_rng(struct acq *a)
{
	a->rng = 0x9e3779b97f4a7c15ull;
	for (const char *p = a->self.token; *p; p++)
		a->rng = (a->rng ^ (uint64_t)*p) * 0x100000001b3ull;
}

/* Sleep before the next attempt, or say why not: -EWOULDBLOCK, -ETIMEDOUT. */
static int wait_turn(struct acq *a)
{
	if (a->flags & FSAFE_LOCK_NO_WAIT)
		return at(a, -EWOULDBLOCK, "held by another owner");
	if (fsafe__backoff_sleep(a->t0, a->timeout_ns, &a->backoff_ns,
	                         BACKOFF_MAX_NS, next_rng(a)) < 0)
		return at(a, -ETIMEDOUT, "held by another owner");
	return 0;
}

/* ---- judging a record ---- */

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * (int64_t)NS + t->tv_nsec;
}

/*
 * Age of a malformed lock file on the filesystem's own clock: rewrite one
 * byte of our own record in place (same byte) and compare the mtime that
 * gives with the lock's latest mtime/ctime. A wall clock on another host,
 * or a skewed server, would break a fresh lock or keep a stale one.
 */
static int malformed_verdict(struct acq *a, const struct stat *lock)
{
	struct stat now;
	int r = fsafe__pwrite_all(a->fd, a->rec, 1, 0);

	if (r < 0 || (r = fsafe__fstat(a->fd, &now)) < 0)
		return r;
	int64_t born = ts_ns(&lock->st_mtim) > ts_ns(&lock->st_ctim)
	                       ? ts_ns(&lock->st_mtim)
	                       : ts_ns(&lock->st_ctim);
	int64_t age = ts_ns(&now.st_mtim) - born;
	return age >= (int64_t)a->grace_ns ? FSAFE_OWNER_DEAD
	                                   : FSAFE_OWNER_UNKNOWN;
}

/*
 * A kernel-mode lock file under a link-mode name. Held (someone has its
 * OFD lock): the name is in use by the other mode, -EINVAL. At rest: it
 * is no lock at all, so it goes like a dead one; the read lock taken here
 * stays until fd closes, keeping kernel-mode acquirers off the inode
 * while it is moved away.
 */
static int kernel_file_verdict(struct acq *a, int fd)
{
	int r = fsafe__ofd_lock(fd, F_RDLCK, false);

	if (r == 0)
		return FSAFE_OWNER_DEAD;
	return at(a, -EINVAL, r == -EAGAIN ? "held in kernel mode"
	                                   : "kernel-mode lock file");
}

/* A liveness verdict on a lock-file record, or a negative errno. */
static int verdict(struct acq *a, int fd, const char *raw, size_t n,
                   const struct stat *st, bool *at_rest)
{
	struct fsafe_lock_owner o;
	int r = fsafe__owner_parse(raw, n, &o);

	if (r == -EPROTONOSUPPORT)
		return FSAFE_OWNER_UNKNOWN;
	if (r < 0)
		return at(a, malformed_verdict(a, st),
		          "judge malformed record");
	*at_rest = o.kernel;
	if (o.kernel)
		return kernel_file_verdict(a, fd);
	return (int)fsafe__owner_judge(&o, &a->self);
}

static bool breakable(const struct acq *a, int v)
{
	if (v == FSAFE_OWNER_DEAD)
		return true;
	return (a->flags & FSAFE_LOCK_FORCE) && v != FSAFE_OWNER_ALIVE;
}

/* ---- breaking ---- */

/* Is what we moved to `priv` the inode and record we judged? */
static bool moved_same(struct acq *a, const char *priv, int fd,
                       const struct stat *st, const char *raw, size_t n)
{
	struct stat moved;

	if (lstat_at(a->t.dirfd, priv, &moved) < 0 || !same_file(&moved, st))
		return false;
	char *buf = malloc(FSAFE__OWNER_MAX + 1);
	if (!buf)
		return false;
	ssize_t m = fsafe__owner_read_raw(fd, buf);
	bool same = m == (ssize_t)n && memcmp(buf, raw, n) == 0;
	free(buf);
	return same;
}

/*
 * Move the dead lock aside to a private name, prove it is the one judged,
 * then unlink it. 1: try to link again now; 0: someone holds it; <0: error.
 */
static int break_lock(struct acq *a, int fd, const struct stat *st,
                      const char *raw, size_t n, bool at_rest)
{
	char priv[PRIV_MAX];
	struct stat now;
	int r = try_guard(fd);

	if (r == -EWOULDBLOCK)
		return 0; /* its owner, alive after all, or another breaker */
	if (r < 0 && !no_locks(r))
		return at(a, r, "flock");
	r = lstat_at(a->t.dirfd, a->t.name, &now);
	if (r == -ENOENT || (r == 0 && !same_file(&now, st)))
		return 1; /* already broken (and maybe taken) by someone else */
	if (r < 0 || (r = priv_name(priv, ".broken")) < 0)
		return at(a, r, "stat lock file");
	r = fsafe__renameat(a->t.dirfd, a->t.name, a->t.dirfd, priv);
	if (r < 0)
		return r == -ENOENT ? 1 : at(a, r, "break lock (rename)");
	if (moved_same(a, priv, fd, st, raw, n)) {
		fsafe__unlinkat(a->t.dirfd, priv, 0);
		a->broken += !at_rest; /* a kernel file at rest held no lock */
		return 1;
	}
	/* Only possible without locks: a lock taken meanwhile was moved.
	   Put it back; link() never replaces a newer one. */
	fsafe__linkat(a->t.dirfd, priv, a->t.dirfd, a->t.name, 0);
	fsafe__unlinkat(a->t.dirfd, priv, 0);
	return 1;
}

/* Judge whoever holds the name. 1: try again now; 0: held; <0: error. */
static int examine(struct acq *a, char *raw)
{
	struct stat st;
	bool at_rest = false;
	int fd = open_record(a->t.dirfd, a->t.name);

	if (fd == -ENOENT)
		return 1;
	if (fd == -EACCES)
		return 0; /* an unreadable record proves nothing */
	if (fd < 0)
		return at_name(a, fd, "open lock file");
	int r = check_regular(fd, &st);
	if (r < 0) {
		fsafe__close(fd);
		return at_name(a, r, "stat lock file");
	}
	ssize_t n = fsafe__owner_read_raw(fd, raw);
	if (n >= 0)
		r = verdict(a, fd, raw, (size_t)n, &st, &at_rest);
	else
		r = at(a, (int)n, "read owner record");
	if (r >= 0)
		r = breakable(a, r)
		            ? break_lock(a, fd, &st, raw, (size_t)n, at_rest)
		            : 0;
	fsafe__close(fd);
	return r;
}

/* ---- staging and link mode ---- */

static int stage(struct acq *a)
{
	int r = -EEXIST;

	for (int i = 0; i < NAME_ATTEMPTS && r == -EEXIST; i++) {
		if ((r = priv_name(a->staging, ".tmp")) < 0)
			break;
		r = fsafe__openat(a->t.dirfd, a->staging,
		                  O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY,
		                  0444);
	}
	if (r < 0) {
		a->staging[0] = '\0';
		return at(a, r, "create staging file");
	}
	a->fd = r;
	/* Before the first byte: a scanner that gets this lock on a stage
	   whose record is incomplete knows its creator is dead. */
	r = do_flock(a->fd, LOCK_EX);
	if (r < 0 && !no_locks(r))
		return at(a, r, "flock");
	if ((r = fsafe__write_all(a->fd, a->rec, a->rec_len)) < 0)
		return at(a, r, "write owner record");
	if ((r = fsafe__fsync(a->fd)) < 0)
		return at(a, r, "fsync");
	return at(a, fsafe__fstat(a->fd, &a->st), "stat");
}

/* The record says when the lock was taken, not when we began to wait:
   after a wait, restate it before the next attempt. */
static int refresh(struct acq *a)
{
	int64_t now = fsafe__now_ms();
	int n, r;

	if (now - a->self.time_ms < 1000)
		return 0;
	a->self.time_ms = now;
	if ((n = fsafe__owner_format(&a->self, a->rec, sizeof(a->rec))) < 0)
		return n;
	if ((size_t)n != a->rec_len && SYS->ftruncate(a->fd, n) < 0)
		return -errno;
	a->rec_len = (size_t)n;
	if ((r = fsafe__pwrite_all(a->fd, a->rec, a->rec_len, 0)) < 0)
		return r;
	return fsafe__fsync(a->fd);
}

static void unstage(struct acq *a)
{
	if (a->staging[0])
		fsafe__unlinkat(a->t.dirfd, a->staging, 0);
	a->staging[0] = '\0';
	if (a->fd >= 0)
		a->fd = fsafe__close(a->fd);
}

static int acquire_link(struct acq *a)
{
	char *raw = malloc(FSAFE__OWNER_MAX + 1);
	struct stat st;
	int r;

	if (!raw)
		return -ENOMEM;
	for (;;) {
		if (a->fd < 0 && (r = stage(a)) < 0)
			break;
		if ((r = at(a, refresh(a), "write owner record")) < 0)
			break;
		r = fsafe__linkat(a->t.dirfd, a->staging, a->t.dirfd, a->t.name, 0);
		if (r == -ENOENT) { /* a scanner took a stage it could lock */
			unstage(a);
			continue;
		}
		if (r < 0 && r != -EEXIST) {
			at(a, r, "link");
			break;
		}
		r = lstat_at(a->t.dirfd, a->t.name, &st);
		if (r == 0 && same_file(&st, &a->st))
			break; /* ours */
		if (r < 0 && r != -ENOENT) {
			at(a, r, "stat lock file");
			break;
		}
		r = r == -ENOENT ? 1 : examine(a, raw);
		if (r < 0)
			break;
		if (r > 0 && ++a->spins < MAX_SPINS)
			continue;
		a->spins = 0;
		if ((r = wait_turn(a)) < 0)
			break;
	}
	free(raw);
	return r;
}

/* ---- kernel mode ---- */

/* With the OFD lock held: 0 claimed; 1 the file was replaced, reopen. */
static int kernel_claim(struct acq *a)
{
	struct fsafe_lock_owner o;
	struct stat st;
	char *raw;
	int r = lstat_at(a->t.dirfd, a->t.name, &st);

	if (r == -ENOENT || (r == 0 && !same_file(&st, &a->st)))
		return 1;
	if (r < 0 || !(raw = malloc(FSAFE__OWNER_MAX + 1)))
		return at(a, r < 0 ? r : -ENOMEM, "stat lock file");
	ssize_t n = fsafe__owner_read_raw(a->fd, raw);
	r = at(a, n < 0 ? (int)n : 0, "read owner record");
	if (n >= 0 && fsafe__owner_parse(raw, (size_t)n, &o) == 0 && !o.kernel)
		r = at(a, -EINVAL, "held in link mode");
	free(raw);
	if (r < 0)
		return r;
	if (SYS->ftruncate(a->fd, 0) < 0)
		return at(a, -errno, "truncate");
	return at(a, fsafe__pwrite_all(a->fd, a->rec, a->rec_len, 0),
	          "write owner record");
}

static int acquire_kernel(struct acq *a)
{
	int r;

	for (;;) {
		if (a->fd < 0) {
			a->fd = fsafe__openat(a->t.dirfd, a->t.name,
			                      O_RDWR | O_CREAT | O_NOFOLLOW |
			                              O_NONBLOCK | O_NOCTTY,
			                      0666);
			if (a->fd < 0)
				return at_name(a, a->fd, "open lock file");
			if ((r = check_regular(a->fd, &a->st)) < 0)
				return at_name(a, r, "stat lock file");
		}
		r = fsafe__ofd_lock(a->fd, F_WRLCK, false);
		if (r == 0) {
			if ((r = kernel_claim(a)) <= 0)
				return r;
			a->fd = fsafe__close(a->fd); /* replaced: lock the new one */
			continue;
		}
		if (r != -EAGAIN)
			return at(a, r, "lock (OFD)");
		if ((r = wait_turn(a)) < 0)
			return r;
	}
}

/* ---- removing a lock that is (still) ours ---- */

static int still_ours(const fsafe_lock *l, int fd)
{
	struct fsafe_lock_owner o;
	struct stat st;
	char *raw = malloc(FSAFE__OWNER_MAX + 1);
	int r = raw ? fsafe__fstat(fd, &st) : -ENOMEM;

	if (r == 0 && (st.st_dev != l->dev || st.st_ino != l->ino))
		r = -ESTALE;
	if (r == 0) {
		ssize_t n = fsafe__owner_read_raw(fd, raw);
		if (n < 0)
			r = (int)n;
		else if (fsafe__owner_parse(raw, (size_t)n, &o) < 0 ||
		         strcmp(o.token, l->token) != 0)
			r = -ESTALE;
	}
	free(raw);
	return r;
}

/*
 * Remove the name only if it is our inode with our token. The name goes
 * to a private name first and is re-checked there: between our check and
 * the rename only a forced break can replace it, and then that lock is
 * put back, not removed.
 */
static int remove_ours(const fsafe_lock *l)
{
	char priv[PRIV_MAX];
	struct stat st;
	int fd = open_record(l->dirfd, l->name);
	int r;

	if (fd == -ENOENT || fd == -ELOOP)
		return -ESTALE;
	if (fd < 0)
		return fd;
	r = still_ours(l, fd);
	fsafe__close(fd);
	if (r < 0 || (r = priv_name(priv, ".broken")) < 0)
		return r;
	if ((r = fsafe__renameat(l->dirfd, l->name, l->dirfd, priv)) < 0)
		return r == -ENOENT ? -ESTALE : r;
	r = lstat_at(l->dirfd, priv, &st);
	if (r == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
		return fsafe__unlinkat(l->dirfd, priv, 0);
	fsafe__linkat(l->dirfd, priv, l->dirfd, l->name, 0);
	fsafe__unlinkat(l->dirfd, priv, 0);
	return r < 0 ? r : -ESTALE;
}

/* ---- orphans: stages and broken locks whose owners are dead ---- */

static bool orphaned(struct acq *a, const char *raw, size_t n,
                     enum priv_kind kind, bool locked)
{
	struct fsafe_lock_owner o;
	int r = fsafe__owner_parse(raw, n, &o);

	if (r == 0) {
		enum fsafe_lock_liveness v = fsafe__owner_judge(&o, &a->self);
		return kind == PRIV_TMP ? v == FSAFE_OWNER_DEAD
		                        : v != FSAFE_OWNER_ALIVE;
	}
	/* An incomplete stage we could lock: its creator died before it
	   finished writing (it locks before writing). A .broken file was
	   already judged stale by the breaker that moved it. */
	return r == -EBADMSG && (kind == PRIV_BROKEN || locked);
}

static void sweep_private(struct acq *a, int dirfd, const char *name,
                          enum priv_kind kind, char *raw)
{
	struct stat st, again;
	int fd = open_record(dirfd, name);

	if (fd < 0)
		return;
	int g = try_guard(fd);
	if (g == 0 || no_locks(g)) {
		ssize_t n = check_regular(fd, &st) < 0
		                    ? -1
		                    : fsafe__owner_read_raw(fd, raw);
		if (n >= 0 && orphaned(a, raw, (size_t)n, kind, g == 0) &&
		    lstat_at(dirfd, name, &again) == 0 && same_file(&st, &again))
			fsafe__unlinkat(dirfd, name, 0);
	}
	fsafe__close(fd);
}

struct orphans {
	struct acq *a;
	char *raw;
};

static int sweep_entry(int fd, const char *name, unsigned char type,
                       void *arg)
{
	struct orphans *o = arg;
	enum priv_kind k = priv_kind(name);

	if (k != PRIV_NONE && (type == DT_REG || type == DT_UNKNOWN))
		sweep_private(o->a, fd, name, k, o->raw);
	return 0;
}

/* Clean up after crashed acquirers, breakers and releasers. Best effort:
   the lock is already ours, nothing here can take it away. */
static void sweep_orphans(struct acq *a)
{
	struct orphans o = { a, malloc(FSAFE__OWNER_MAX + 1) };

	if (o.raw)
		fsafe__dir_each(a->t.dirfd, sweep_entry, &o);
	free(o.raw);
}

/* ---- the API ---- */

static int prepare(struct acq *a, int dirfd, const char *path,
                   const struct fsafe_lock_opts *opts)
{
	const char *step;
	int r, n;

	if ((r = opts_load(a, opts)) < 0)
		return r;
	if ((r = fsafe__target_resolve(dirfd, path, 0, &a->t, &step)) < 0)
		return at(a, r, step);
	r = fsafe__owner_self(&a->self, a->flags & FSAFE_LOCK_KERNEL);
	if (r < 0)
		return at(a, r, "describe this process");
	if ((n = fsafe__owner_format(&a->self, a->rec, sizeof(a->rec))) < 0)
		return at(a, n, "format owner record");
	a->rec_len = (size_t)n;
	seed_rng(a);
	a->backoff_ns = BACKOFF_MIN_NS;
	a->t0 = fsafe__mono_ns();
	return 0;
}

static void hand_over(struct acq *a, fsafe_lock *l)
{
	l->dirfd = a->t.dirfd;
	a->t.dirfd = -1;
	strcpy(l->name, a->t.name);
	l->fd = a->fd;
	a->fd = -1;
	l->kernel = a->flags & FSAFE_LOCK_KERNEL;
	l->dev = a->st.st_dev;
	l->ino = a->st.st_ino;
	l->pid = a->self.pid;
	memcpy(l->token, a->self.token, sizeof(l->token));
	l->broken = a->broken;
	l->error = a->error;
	strcpy(l->staging, a->staging);
	a->staging[0] = '\0';
}

/* After a failure, a link that did land must not outlive the attempt. */
static void withdraw(struct acq *a)
{
	fsafe_lock l = { .dirfd = a->t.dirfd, .dev = a->st.st_dev,
	                 .ino = a->st.st_ino };

	if (a->fd < 0 || (a->flags & FSAFE_LOCK_KERNEL))
		return;
	strcpy(l.name, a->t.name);
	memcpy(l.token, a->self.token, sizeof(l.token));
	remove_ours(&l);
}

int fsafe_lock_acquire(int dirfd, const char *path,
                       const struct fsafe_lock_opts *opts, fsafe_lock **out)
{
	struct acq *a = calloc(1, sizeof(*a));
	fsafe_lock *l = calloc(1, sizeof(*l));
	int r = a && l ? 0 : -ENOMEM;

	assert(out);
	*out = NULL;
	if (r == 0) {
		a->fd = -1;
		a->t.dirfd = -1;
		r = prepare(a, dirfd, path, opts);
	}
	if (r == 0)
		r = a->flags & FSAFE_LOCK_KERNEL ? acquire_kernel(a)
		                                 : acquire_link(a);
	if (r == 0 && !(a->flags & FSAFE_LOCK_KERNEL)) {
		/* If this fails, release tries again: the name is a second
		   link to the lock, not something to fail the lock for. */
		if (fsafe__unlinkat(a->t.dirfd, a->staging, 0) == 0)
			a->staging[0] = '\0';
		sweep_orphans(a);
	}
	if (r == 0) {
		hand_over(a, l);
		*out = l;
		l = NULL;
	} else if (a) {
		fsafe__error_set(a->error, r, -r, a->step ? a->step : "lock",
		                 false);
		withdraw(a);
		unstage(a);
	}
	if (a)
		fsafe__target_close(&a->t);
	free(a);
	free(l);
	return r;
}

unsigned fsafe_lock_broken(const fsafe_lock *l)
{
	return l ? l->broken : 0;
}

/*
 * A kernel-mode lock file is never removed, so one that is gone or
 * replaced was taken away by hand: a second holder may have locked the
 * new file meanwhile, as a link-mode lock removed by hand lets one in.
 */
static int kernel_still_ours(const fsafe_lock *l)
{
	struct stat st;
	int r = lstat_at(l->dirfd, l->name, &st);

	if (r == -ENOENT || (r == 0 && (st.st_dev != l->dev ||
	                                st.st_ino != l->ino)))
		return -ESTALE;
	return r;
}

int fsafe_lock_release(fsafe_lock *l)
{
	int r = 0;
	const char *step = "remove lock file";

	if (!l)
		return 0;
	if (getpid() != l->pid) {
		r = -EPERM;
		step = "release in another process than the holder";
	} else {
		r = l->kernel ? kernel_still_ours(l) : remove_ours(l);
	}
	if (r == -ESTALE)
		step = "lock file removed or replaced while held";
	if (r < 0)
		fsafe__error_set(l->error, r, -r, step, false);
	if (l->staging[0] && getpid() == l->pid)
		fsafe__unlinkat(l->dirfd, l->staging, 0);
	/* Closing drops the flock or OFD lock: only after the name is gone. */
	fsafe__close(l->fd);
	fsafe__close(l->dirfd);
	free(l);
	return r;
}

/* Whether an OFD lock is held on the kernel-mode lock file open as fd. */
static int kernel_held(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int r;

	do
		r = SYS->fcntl_lock(fd, F_OFD_GETLK, &fl);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

/* The verdict on a parsed record found at the name open as fd. */
static int inspect_verdict(int fd, struct fsafe_lock_owner *o)
{
	struct fsafe_lock_owner self;
	int r;

	if (o->kernel) {
		if ((r = kernel_held(fd)) <= 0)
			return r < 0 ? r : -ENOENT; /* left by its last holder */
		o->liveness = FSAFE_OWNER_ALIVE;
		return 0;
	}
	if ((r = fsafe__owner_self(&self, false)) < 0)
		return r;
	o->liveness = fsafe__owner_judge(o, &self);
	/* The holder keeps a flock: if someone holds one, trust it. */
	if (o->liveness != FSAFE_OWNER_ALIVE &&
	    try_guard(fd) == -EWOULDBLOCK)
		o->liveness = FSAFE_OWNER_ALIVE;
	return 0;
}

static int inspect_fd(int fd, struct fsafe_lock_owner *o)
{
	struct stat st;
	char *raw = malloc(FSAFE__OWNER_MAX + 1);
	int r = raw ? check_regular(fd, &st) : -ENOMEM;

	if (r == 0) {
		ssize_t n = fsafe__owner_read_raw(fd, raw);
		r = n < 0 ? (int)n : fsafe__owner_parse(raw, (size_t)n, o);
	}
	free(raw);
	if (r == -EPROTONOSUPPORT)
		o->liveness = FSAFE_OWNER_UNKNOWN;
	return r < 0 ? r : inspect_verdict(fd, o);
}

int fsafe_lock_inspect(int dirfd, const char *path,
                       struct fsafe_lock_owner *owner)
{
	struct fsafe__target t;
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	const char *step;
	int r;

	assert(owner);
	/* The caller's layout is checked before anything is read. */
	if ((r = FSAFE__OPTS_COPY_OUT(owner, &o, FSAFE_LOCK_OWNER_SIZE_V0)) < 0)
		return r;
	if ((r = fsafe__target_resolve(dirfd, path, 0, &t, &step)) < 0)
		return r;
	int fd = open_record(t.dirfd, t.name);
	r = fd < 0 ? fd : inspect_fd(fd, &o);
	if (fd >= 0)
		fsafe__close(fd);
	if (r == -ENXIO || r == -EBADFD) { /* a socket's open, a FIFO's type */
		const char *what = NULL;
		int t2 = not_a_lock(t.dirfd, t.name, &what);
		r = t2 < 0 && what ? t2 : r;
	}
	fsafe__target_close(&t);
	FSAFE__OPTS_COPY_OUT(owner, &o, FSAFE_LOCK_OWNER_SIZE_V0);
	return r;
}

/* ---- check and repair of a directory of locks ---- */

/* One walk of a lock directory: check (read-only) or repair. */
struct scan {
	int dfd, qfd;           /* qfd: the quarantine, made on first need */
	const char *prefix;     /* before every reported name */
	bool repair;
	fsafe_damage_fn fn;
	void *arg;
	struct acq *a;          /* a->self: the judge's own record */
	char *raw;
	int found;
};

/* One problem: reported and, in repair mode, removed (a recognised
   leftover, proven dead) or quarantined. A repair that failed is reported
   with no action. The callback's non-zero return stops the walk. */
static int problem(struct scan *s, const char *name, const char *what,
                   bool remove)
{
	char dest[NAME_MAX + 1], action[2 * NAME_MAX + 64];
	const char *done = NULL;

	s->found++;
	if (s->repair && remove) {
		if (fsafe__unlinkat(s->dfd, name, 0) == 0)
			done = "removed";
	} else if (s->repair) {
		if (s->qfd < 0)
			s->qfd = fsafe__quarantine_open(s->dfd, true);
		if (s->qfd >= 0 &&
		    fsafe__quarantine_move(s->dfd, name, s->qfd, what, true,
		                           dest, sizeof(dest)) == 0) {
			snprintf(action, sizeof(action),
			         "quarantined as %s%s/%s", s->prefix,
			         FSAFE__QUARANTINE, dest);
			done = action;
		}
	}
	return fsafe__damage_say(s->fn, s->arg, s->prefix, name, what, done,
	                         0);
}

static const char *type_what(mode_t m)
{
	return S_ISLNK(m)   ? "not a regular file (symbolic link)"
	       : S_ISDIR(m) ? "not a regular file (directory)"
	       : S_ISFIFO(m) ? "not a regular file (FIFO)"
	       : S_ISSOCK(m) ? "not a regular file (socket)"
	                     : "not a regular file (device)";
}

/* Someone holds a lock on the file: a live holder, never touched. */
static bool in_use(int fd, bool kernel_too)
{
	int g = try_guard(fd);

	if (g == -EWOULDBLOCK)
		return true;
	return kernel_too && kernel_held(fd) > 0;
}

/* A .lock-<uuid>.tmp / .broken name: a leftover once proven orphaned. */
static int scan_private(struct scan *s, const char *name,
                        enum priv_kind kind, int fd)
{
	struct stat st, again;
	int g = try_guard(fd);

	if (g != 0 && !no_locks(g))
		return 0; /* an acquirer or breaker at work */
	ssize_t n = fsafe__owner_read_raw(fd, s->raw);
	if (n < 0 || !orphaned(s->a, s->raw, (size_t)n, kind, g == 0) ||
	    fsafe__fstat(fd, &st) < 0)
		return 0;
	/* Removed only if the name is still the inode judged. */
	bool same = lstat_at(s->dfd, name, &again) == 0 && same_file(&st, &again);
	return same ? problem(s, name, kind == PRIV_TMP
	                                       ? "leftover of a crashed acquirer"
	                                       : "leftover of a crashed breaker",
	                      true)
	            : 0;
}

/* A lock file: fine held, fine as a kernel-mode file at rest; a link-mode
   one whose owner is proven dead is an abandoned lock; one that does not
   parse is damage, unless someone holds it. */
static int scan_lock(struct scan *s, const char *name, int fd,
                     const struct stat *st)
{
	struct fsafe_lock_owner o;
	ssize_t n = fsafe__owner_read_raw(fd, s->raw);

	if (n < 0)
		return (int)n == -EACCES ? 0 : (int)n;
	int r = fsafe__owner_parse(s->raw, (size_t)n, &o);
	if (r == -EPROTONOSUPPORT)
		return 0;
	if (r < 0) {
		if (n == 0 || in_use(fd, true))
			return 0; /* a kernel-mode file being (re)written */
		return problem(s, name, n > FSAFE__OWNER_MAX
		                                ? "owner record too long"
		                                : "owner record does not parse",
		               false);
	}
	if (o.kernel || in_use(fd, false) ||
	    fsafe__owner_judge(&o, &s->a->self) != FSAFE_OWNER_DEAD)
		return 0;
	struct stat again;
	if (lstat_at(s->dfd, name, &again) < 0 || !same_file(st, &again))
		return 0;
	return problem(s, name, "abandoned: its owner is dead", true);
}

/*
 * Something that is not a directory at the quarantine's name would make
 * every later quarantine fail: it is judged first, and repair moves it
 * into a new quarantine of its own, as the keyed store does.
 */
static int scan_quarantine(struct scan *s)
{
	struct stat st;
	int r = lstat_at(s->dfd, FSAFE__QUARANTINE, &st);

	if (r == -ENOENT || (r == 0 && S_ISDIR(st.st_mode)))
		return 0;
	if (r < 0)
		return r;
	const char *what = S_ISREG(st.st_mode)
	                           ? "a file where the quarantine belongs"
	                           : type_what(st.st_mode);
	const char *done = NULL;
	if (s->repair &&
	    fsafe__quarantine_reclaim(s->dfd, what, true, &s->qfd) == 0)
		done = "moved into a new quarantine/";
	s->found++;
	return fsafe__damage_say(s->fn, s->arg, s->prefix, FSAFE__QUARANTINE,
	                         what, done, 0);
}

static int scan_entry(struct scan *s, const char *name)
{
	struct stat st;
	int r;

	if (strcmp(name, FSAFE__QUARANTINE) == 0)
		return 0; /* scan_quarantine's */
	r = lstat_at(s->dfd, name, &st);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (!S_ISREG(st.st_mode))
		return problem(s, name, type_what(st.st_mode), false);
	int fd = open_record(s->dfd, name);
	if (fd < 0)
		return fd == -ENOENT || fd == -EACCES ? 0 : fd;
	if ((r = check_regular(fd, &st)) == 0) {
		enum priv_kind k = priv_kind(name);
		r = k != PRIV_NONE ? scan_private(s, name, k, fd)
		                   : scan_lock(s, name, fd, &st);
	}
	fsafe__close(fd);
	return r;
}

int fsafe__lock_dir_scan(int dfd, const char *prefix, bool repair,
                         fsafe_damage_fn fn, void *arg, int *found)
{
	struct scan s = { .dfd = dfd, .qfd = -1, .prefix = prefix,
		          .repair = repair, .fn = fn, .arg = arg };
	char **names = NULL;
	size_t n = 0;
	int r;

	s.a = calloc(1, sizeof(*s.a));
	s.raw = malloc(FSAFE__OWNER_MAX + 1);
	r = s.a && s.raw ? fsafe__owner_self(&s.a->self, false) : -ENOMEM;
	if (r == 0)
		r = scan_quarantine(&s);
	if (r == 0)
		r = fsafe__dir_names(dfd, &names, &n);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = scan_entry(&s, names[i]);
	fsafe__dir_names_free(names, n);
	if (s.qfd >= 0)
		fsafe__close(s.qfd);
	free(s.raw);
	free(s.a);
	*found += s.found;
	return r;
}

static int lock_dir_walk(int dirfd, const char *path, bool repair,
                         fsafe_damage_fn fn, void *arg)
{
	if (!path || !*path)
		return -EINVAL;
	int dfd = fsafe__open_dir(dirfd, path);
	if (dfd < 0)
		return dfd;
	int found = 0;
	int r = fsafe__lock_dir_scan(dfd, "", repair, fn, arg, &found);
	fsafe__close(dfd);
	return r != 0 ? r : found;
}

int fsafe_lock_check(int dirfd, const char *path, fsafe_damage_fn fn,
                     void *arg)
{
	return lock_dir_walk(dirfd, path, false, fn, arg);
}

int fsafe_lock_repair(int dirfd, const char *path, fsafe_damage_fn fn,
                      void *arg)
{
	return lock_dir_walk(dirfd, path, true, fn, arg);
}
