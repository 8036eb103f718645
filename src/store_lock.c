/*
 * The keyed store's lock (store_lock.h).
 *
 * Kernel locks on the one file, each belonging to the open file
 * description, so two handles exclude each other within a process as
 * between processes:
 *
 *   byte 0   OFD write lock: the lock itself. A kernel-mode fsafe_lock
 *            of the same name locks the whole file, so it excludes us
 *            and we it.
 *   flock    taken with byte 0: a link-mode fsafe_lock holds one on its
 *            lock file for its whole life. A process still running a
 *            library that locked the store through fsafe_lock, in either
 *            mode, is therefore kept out, and keeps us out.
 *   byte 1   the turnstile: a waiter holds it while it waits for byte 0,
 *            and the holder must pass it before it locks again. Without
 *            it a process changing the store in a loop leaves the lock
 *            free for microseconds at a time, which a polling waiter all
 *            but never sees, and it would wait out its whole timeout.
 *
 * Once locked, the name must still lead to the file locked: repair may
 * have quarantined it, a link-mode fsafe_lock may have taken a file at
 * rest for a dead lock and removed it, a hand may have deleted it. A lock
 * on a file nobody else can open excludes nobody, so it is opened again.
 */
#define _GNU_SOURCE
#include "store_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"
#include "store_check.h"
#include "sys.h"
#include "util.h"

#define LOCK_PATH FSAFE__STORE_LOCK_DIR "/" FSAFE__STORE_LOCK_FILE
#define LOCK_BYTE 0
#define TURN_BYTE 1
/* Waiting polls (a kernel lock's own wait cannot be bounded without a
   signal): short, since a change holds the lock for one write. */
#define BACKOFF_MIN_NS 50000ull  /* 0.05 ms */
#define BACKOFF_MAX_NS 5000000ull /* 5 ms */
/* Files replaced under us in a row before waiting like for a holder. */
#define REOPENS 8

void fsafe__store_lock_init(struct fsafe__store_lock *l)
{
	l->fd = -1;
	l->pid = 0;
	l->turn = false;
}

void fsafe__store_lock_close(struct fsafe__store_lock *l)
{
	l->fd = fsafe__close(l->fd);
	l->turn = false;
}

/* The lock file and its directory, made on first use so that opening a
   store writes nothing; neither need be durable: no lock outlives a
   power cut. Anything but a regular file at its name fails the change
   until repair quarantines it. */
static int open_file(struct fsafe__store_lock *l, int dirfd,
                     const char **step)
{
	struct stat st;
	int dfd = fsafe__subdir_make(dirfd, FSAFE__STORE_LOCK_DIR, 0777, false);

	if (dfd < 0) {
		*step = "open the store's lock directory";
		return dfd;
	}
	int fd = fsafe__openat(dfd, FSAFE__STORE_LOCK_FILE,
	                       O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
	                               O_NOCTTY,
	                       0666);
	int r = fd < 0 ? fd : fsafe__fstat(fd, &st);

	fsafe__close(dfd);
	/* A FIFO: O_NONBLOCK opened it. A socket fails the open (ENXIO):
	   told as what it is, no regular file, like fsafe_lock does. */
	if ((r == 0 && !S_ISREG(st.st_mode)) || r == -ENXIO)
		r = -EBADFD;
	if (r < 0) {
		fsafe__close(fd);
		*step = "open the store's lock file";
		return r;
	}
	l->fd = fd;
	l->pid = getpid();
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	return 0;
}

/* Lock or unlock one byte without waiting: 0, -EAGAIN if held, -errno. */
static int byte_lock(int fd, short type, off_t at)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
		            .l_start = at, .l_len = 1 };
	int r;

	do
		r = SYS->fcntl_lock(fd, F_OFD_SETLK, &fl);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0;
	return errno == EACCES ? -EAGAIN : -errno;
}

/* 1 when another description holds the turnstile: someone waits. */
static int turn_taken(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
		            .l_start = TURN_BYTE, .l_len = 1 };
	int r;

	do
		r = SYS->fcntl_lock(fd, F_OFD_GETLK, &fl);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : fl.l_type != F_UNLCK;
}

/* The lock and the flock, or neither: 0, -EAGAIN, -errno. */
static int try_both(int fd)
{
	int r = byte_lock(fd, F_WRLCK, LOCK_BYTE);

	if (r < 0)
		return r;
	r = fsafe__flock(fd, LOCK_EX | LOCK_NB);
	if (r == 0)
		return 0;
	byte_lock(fd, F_UNLCK, LOCK_BYTE);
	return r == -EWOULDBLOCK ? -EAGAIN : r;
}

/* Let the turnstile go, if held; a failure drops it with the file. */
static void leave_turn(struct fsafe__store_lock *l)
{
	if (l->turn && byte_lock(l->fd, F_UNLCK, TURN_BYTE) < 0)
		fsafe__store_lock_close(l);
	l->turn = false;
}

/* 0 the name still leads to the file locked; 1 it does not; -errno. */
static int moved(const struct fsafe__store_lock *l, int dirfd)
{
	struct stat st;
	int r = fsafe__fstatat(dirfd, LOCK_PATH, &st, AT_SYMLINK_NOFOLLOW);

	if (r == -ENOENT || r == -ENOTDIR)
		return 1;
	if (r < 0)
		return r;
	return st.st_dev != l->dev || st.st_ino != l->ino;
}

void fsafe__store_lock_drop(struct fsafe__store_lock *l)
{
	/* A lock that would not let go is dropped with its description. */
	if (fsafe__flock(l->fd, LOCK_UN) < 0 ||
	    byte_lock(l->fd, F_UNLCK, LOCK_BYTE) < 0)
		fsafe__store_lock_close(l);
}

struct wait {
	uint64_t t0, limit_ns, backoff_ns, rng;
	unsigned reopens;
};

/* Sleep a jittered, growing while, or -ETIMEDOUT past the limit. */
static int wait_turn(struct wait *w)
{
	w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
	return fsafe__backoff_sleep(w->t0, w->limit_ns, &w->backoff_ns,
	                            BACKOFF_MAX_NS, w->rng >> 33);
}

/* The lock, through the turnstile: 0 locked, 1 only the turnstile held
   (waiting in line), -EAGAIN neither, -errno. Nobody in line and the
   lock free: taken straight away, the turnstile only looked at. */
static int try_take(struct fsafe__store_lock *l, struct wait *w)
{
	int r;

	if (!l->turn) {
		if ((r = turn_taken(l->fd)) != 0)
			return r > 0 ? -EAGAIN : r;
		if ((r = try_both(l->fd)) != -EAGAIN)
			return r;
		if ((r = byte_lock(l->fd, F_WRLCK, TURN_BYTE)) < 0)
			return r;
		l->turn = true;
		/* Next in line: the holder has at most its change to go. */
		w->backoff_ns = BACKOFF_MIN_NS;
	}
	if ((r = try_both(l->fd)) < 0)
		return r == -EAGAIN ? 1 : r;
	leave_turn(l);
	return l->fd < 0 ? -EBADF : 0;
}

/* One attempt: 0 locked; -EAGAIN wait (held, or files replaced too often
   in a row); another -errno, with *step. */
static int attempt(struct fsafe__store_lock *l, int dirfd, struct wait *w,
                   const char **step)
{
	int r, m;

	if (l->fd < 0 && (r = open_file(l, dirfd, step)) < 0)
		return r;
	r = try_take(l, w);
	*step = "take the store's lock";
	if (r < 0 && r != -EAGAIN)
		return r;
	/* Held or not, a file the name no longer leads to is no lock (a
	   link-mode fsafe_lock removes its file when it lets go, and its
	   flock may live on in a child that inherited it). */
	if ((m = moved(l, dirfd)) == 0)
		return r == 0 ? 0 : -EAGAIN;
	if (r == 0)
		fsafe__store_lock_drop(l);
	fsafe__store_lock_close(l);
	if (m < 0)
		return m;
	return ++w->reopens > REOPENS ? -EAGAIN : attempt(l, dirfd, w, step);
}

int fsafe__store_lock_take(struct fsafe__store_lock *l, int dirfd,
                           uint64_t timeout_ms, const char **step)
{
	struct wait w = { .t0 = fsafe__mono_ns(),
		          .backoff_ns = BACKOFF_MIN_NS };
	pid_t pid = getpid();
	int r;

	w.limit_ns = timeout_ms >= FSAFE_FOREVER / 1000000 ? 0
	                                                   : timeout_ms * 1000000;
	w.rng = w.t0 ^ (uint64_t)pid << 32;
	/* A child after fork() shares the parent's description, and with
	   it the parent's locks: it needs one of its own. */
	if (l->fd >= 0 && l->pid != pid)
		fsafe__store_lock_close(l);
	while ((r = attempt(l, dirfd, &w, step)) == -EAGAIN) {
		w.reopens = 0;
		if ((r = wait_turn(&w)) < 0) {
			*step = "wait for the store's lock";
			break;
		}
	}
	if (r < 0 && l->fd >= 0)
		leave_turn(l);
	return r;
}
