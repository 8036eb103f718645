/*
 * The one table of system calls the library makes.
 *
 * Every entry has the raw kernel/libc contract (-1 and errno), so the
 * default table is plain libc and a test can swap in wrappers that fail
 * call N with errno E, cut a write short, kill the process or cut power.
 * The fsafe__* helpers below put the library's conventions on top: a
 * negative errno as the result, EINTR retried, short writes completed.
 *
 * In a production build SYS is the address of a const table, so a call
 * costs one indirect call. Only a build with FSAFE_TESTING can swap it.
 */
#ifndef FSAFE_SYS_H
#define FSAFE_SYS_H

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/vfs.h>

struct fsafe__ring; /* syncmany.h */

struct fsafe_sys {
	int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
	/* openat2(2); `how` is a struct open_how. ENOSYS where missing. */
	int (*openat2)(int dirfd, const char *path, void *how, size_t size);
	ssize_t (*read)(int fd, void *buf, size_t len);
	ssize_t (*write)(int fd, const void *buf, size_t len);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	/* pwritev2(2) (Linux 4.6; its per-write sync flags 4.7). ENOSYS
	   where missing; `flags` takes FSAFE__RWF_DSYNC and _SYNC. */
	ssize_t (*pwritev2)(int fd, const struct iovec *iov, int iovcnt,
	                    off_t off, int flags);
	int (*fsync)(int fd);
	int (*fdatasync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	/* fallocate(2); ENOSYS where missing. */
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	int (*renameat)(int olddirfd, const char *old, int newdirfd,
	                const char *new_);
	/* renameat2(2). ENOSYS where missing. */
	int (*renameat2)(int olddirfd, const char *old, int newdirfd,
	                 const char *new_, unsigned flags);
	int (*linkat)(int olddirfd, const char *old, int newdirfd,
	              const char *new_, int flags);
	int (*unlinkat)(int dirfd, const char *path, int flags);
	int (*mkdirat)(int dirfd, const char *path, mode_t mode);
	int (*fstatat)(int dirfd, const char *path, struct stat *st, int flags);
	int (*fstat)(int fd, struct stat *st);
	int (*fstatfs)(int fd, struct statfs *st);
	off_t (*lseek)(int fd, off_t off, int whence);
	ssize_t (*readlinkat)(int dirfd, const char *path, char *buf,
	                      size_t len);
	int (*fchmod)(int fd, mode_t mode);
	int (*fchown)(int fd, uid_t uid, gid_t gid);
	/* fcntl(2) with a struct flock argument (F_OFD_SETLK and friends). */
	int (*fcntl_lock)(int fd, int cmd, struct flock *fl);
	/* getdents64(2); on other systems an emulation over readdir(). */
	ssize_t (*getdents)(int fd, void *buf, size_t len);
	int (*close)(int fd);
	ssize_t (*getrandom)(void *buf, size_t len, unsigned flags);
	int (*ioctl)(int fd, unsigned long req, void *arg);
	/* fdatasync of many fds at once through io_uring, on a ring kept in
	   *keep or (keep NULL) one of the call's own (see syncmany.h): 0 with
	   errs[i] = 0 / -errno, or -1/errno when io_uring is out. */
	int (*fdatasync_many)(struct fsafe__ring **keep, const int *fds,
	                      size_t n, int *errs);
	/* syncfs(2): the whole filesystem of fd. ENOSYS where missing. */
	int (*syncfs)(int fd);
	int (*kill)(pid_t pid, int sig);
	/* flock(2): the lock module's guard against a live holder, and the
	   serialisation of conditional replaces on the old target. */
	int (*flock)(int fd, int op);
	/* listxattrat(2) / getxattrat(2) (Linux 6.13): a file's extended
	   attributes by name in a directory fd, without opening the file.
	   ENOSYS where missing; `at_flags` takes AT_SYMLINK_NOFOLLOW. */
	ssize_t (*listxattrat)(int dirfd, const char *path, unsigned at_flags,
	                       char *list, size_t size);
	ssize_t (*getxattrat)(int dirfd, const char *path, unsigned at_flags,
	                      const char *name, void *value, size_t size);
	ssize_t (*flistxattr)(int fd, char *list, size_t size);
	ssize_t (*fgetxattr)(int fd, const char *name, void *value,
	                     size_t size);
	int (*fsetxattr)(int fd, const char *name, const void *value,
	                 size_t size, int flags);
	int (*symlinkat)(const char *target, int dirfd, const char *path);
};

extern const struct fsafe_sys fsafe__sys_default;

#ifdef FSAFE_TESTING
/* Test builds only: the table in force, and a way to swap it. */
extern const struct fsafe_sys *volatile fsafe__sys_current;
#define SYS fsafe__sys_current
const struct fsafe_sys *fsafe__sys_swap(const struct fsafe_sys *table);

/*
 * Test builds only: remove one safety step at a time, so the power-loss
 * tests can show that they catch its absence. Never in a production build.
 */
enum {
	FSAFE__BREAK_DIR_SYNC = 1 << 0,  /* no directory fsync after publish */
	FSAFE__BREAK_DATA_SYNC = 1 << 1, /* no data sync before publish */
	FSAFE__BREAK_EXCL = 1 << 2,      /* stage without O_EXCL */
};
extern volatile unsigned fsafe__test_break;
#define FSAFE__BROKEN(step) (fsafe__test_break & (step))
#else
#define SYS (&fsafe__sys_default)
#define FSAFE__BROKEN(step) 0
#endif

/* Conventions over the table: 0 / non-negative or a negative errno. */
int fsafe__openat(int dirfd, const char *path, int flags, mode_t mode);
int fsafe__open_dir(int dirfd, const char *path);
/* A directory inside a store: never through a symlink (Linux answers
   -ENOTDIR for any symlink here, -ELOOP elsewhere), so nothing in the
   store leads out. */
int fsafe__open_subdir(int dirfd, const char *name);
/* A data file inside a store: O_NOFOLLOW|O_NONBLOCK (a FIFO never blocks
   the open, nor later reads), then its type checked on the fd, as systemd's
   stat_verify_regular does: -ELOOP for a symlink, -EISDIR for a directory,
   -EBADFD for anything else that is not a regular file. `st` (may be NULL)
   receives the fstat. O_NONBLOCK stays set: it changes nothing for a
   regular file. */
int fsafe__open_regular(int dirfd, const char *name, int flags,
                        struct stat *st);
int fsafe__write_all(int fd, const void *buf, size_t len);

/* RWF_DSYNC and RWF_SYNC of <linux/fs.h>, the same on every architecture. */
#define FSAFE__RWF_DSYNC 0x2
#define FSAFE__RWF_SYNC 0x4

/* The most pieces fsafe__write_synced takes. */
#define FSAFE__SYNCED_IOV_MAX 4

/*
 * Write all of iov[0..n) at the file position and make it durable as
 * fdatasync (full: fsync) would. Where the kernel has per-write sync
 * (pwritev2 with RWF_DSYNC) that is one call; where it refuses the flag,
 * the pieces are written and then synced. 0, or -errno with *step "write"
 * or "fsync". A synced write that failed is never followed by a sync: its
 * failure is the sync's.
 */
int fsafe__write_synced(int fd, const struct iovec *iov, int n, bool full,
                        const char **step);
ssize_t fsafe__read(int fd, void *buf, size_t len);
int fsafe__fsync(int fd);
int fsafe__fdatasync(int fd);
int fsafe__syncfs(int fd);
int fsafe__fallocate(int fd, int mode, off_t off, off_t len);
int fsafe__fstatat(int dirfd, const char *path, struct stat *st, int flags);
int fsafe__fstat(int fd, struct stat *st);
/* The size of fd's file, by lseek(2) to its end: on ext4 an fstat costs a
   spool append measurably more. It moves fd's offset, so only for an fd
   that is read and written by offset (pread, pwrite). */
int fsafe__file_size(int fd, uint64_t *size);
int fsafe__unlinkat(int dirfd, const char *path, int flags);
int fsafe__renameat(int olddirfd, const char *old, int newdirfd,
                    const char *new_);
int fsafe__renameat2(int olddirfd, const char *old, int newdirfd,
                     const char *new_, unsigned flags);
int fsafe__linkat(int olddirfd, const char *old, int newdirfd,
                  const char *new_, int flags);
int fsafe__mkdirat(int dirfd, const char *path, mode_t mode);
int fsafe__fchmod(int fd, mode_t mode);
ssize_t fsafe__readlinkat(int dirfd, const char *path, char *buf, size_t len);
int fsafe__fchown(int fd, uid_t uid, gid_t gid);
int fsafe__random(void *buf, size_t len);
int fsafe__ofd_lock(int fd, short type, bool wait);
ssize_t fsafe__listxattrat(int dirfd, const char *path, char *list,
                           size_t size);
ssize_t fsafe__getxattrat(int dirfd, const char *path, const char *name,
                          void *value, size_t size);
ssize_t fsafe__flistxattr(int fd, char *list, size_t size);
ssize_t fsafe__fgetxattr(int fd, const char *name, void *value, size_t size);
int fsafe__fsetxattr(int fd, const char *name, const void *value,
                     size_t size);
int fsafe__symlinkat(const char *target, int dirfd, const char *path);
int fsafe__flock(int fd, int op);
int fsafe__ofd_unlock(int fd);

/* close() once, never retried (Linux frees the fd even on EINTR). Keeps
   errno. Returns -1 so callers can write `fd = fsafe__close(fd)`. */
int fsafe__close(int fd);

/* Iterate a directory fd's entries (no "." / ".."), linear in its size. */
struct fsafe__dir {
	int fd;
	size_t pos, end;
	char buf[64 * 1024];
};
void fsafe__dir_init(struct fsafe__dir *d, int fd);
/* 1 with *name and *type (DT_*) set, 0 at the end, or a negative errno. */
int fsafe__dir_next(struct fsafe__dir *d, const char **name,
                    unsigned char *type);

#endif
