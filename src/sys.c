/* The system-call table and the conventions every module relies on. */
#define _GNU_SOURCE
#include "sys.h"
#include "syncmany.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/random.h>
#endif

static int sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return openat(dirfd, path, flags, mode);
}

static int sys_openat2(int dirfd, const char *path, void *how, size_t size)
{
#if defined(__linux__) && defined(SYS_openat2)
	return (int)syscall(SYS_openat2, dirfd, path, how, size);
#else
	(void)dirfd, (void)path, (void)how, (void)size;
	errno = ENOSYS;
	return -1;
#endif
}

static int sys_renameat2(int olddirfd, const char *old, int newdirfd,
                         const char *new_, unsigned flags)
{
#if defined(__linux__) && defined(SYS_renameat2)
	return (int)syscall(SYS_renameat2, olddirfd, old, newdirfd, new_, flags);
#else
	(void)olddirfd, (void)old, (void)newdirfd, (void)new_, (void)flags;
	errno = ENOSYS;
	return -1;
#endif
}

/* The C library's pwritev2 came with the RWF_* flags of <sys/uio.h>
   (glibc 2.26); on a kernel without the call it refuses flags with
   EOPNOTSUPP. */
static ssize_t sys_pwritev2(int fd, const struct iovec *iov, int iovcnt,
                            off_t off, int flags)
{
#if defined(__linux__) && defined(RWF_DSYNC)
	return pwritev2(fd, iov, iovcnt, off, flags);
#else
	(void)fd, (void)iov, (void)iovcnt, (void)off, (void)flags;
	errno = ENOSYS;
	return -1;
#endif
}

static int sys_fallocate(int fd, int mode, off_t off, off_t len)
{
#ifdef __linux__
	return fallocate(fd, mode, off, len);
#else
	(void)fd, (void)mode, (void)off, (void)len;
	errno = ENOSYS;
	return -1;
#endif
}

static int sys_fcntl_lock(int fd, int cmd, struct flock *fl)
{
	return fcntl(fd, cmd, fl);
}

static ssize_t sys_getdents(int fd, void *buf, size_t len)
{
#ifdef __linux__
	return (ssize_t)syscall(SYS_getdents64, fd, buf, len);
#else
	(void)fd, (void)buf, (void)len;
	errno = ENOSYS;
	return -1;
#endif
}

static ssize_t sys_getrandom(void *buf, size_t len, unsigned flags)
{
#ifdef __linux__
	return getrandom(buf, len, flags);
#else
	(void)flags;
	if (len > 256)
		len = 256;
	return getentropy(buf, len) == 0 ? (ssize_t)len : -1;
#endif
}

static int sys_syncfs(int fd)
{
#ifdef __linux__
	return syncfs(fd);
#else
	(void)fd;
	errno = ENOSYS;
	return -1;
#endif
}

static int sys_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg);
}

/*
 * The *xattrat calls came in Linux 6.13, with one number on every
 * architecture of the common table; glibc 2.36 has no wrappers. Elsewhere
 * ENOSYS, and the caller opens the file instead.
 */
#if defined(__linux__) && !defined(SYS_getxattrat) &&                         \
	(defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) ||  \
	 defined(__arm__) || defined(__riscv))
#define SYS_getxattrat 464
#define SYS_listxattrat 465
#endif

static ssize_t sys_listxattrat(int dirfd, const char *path, unsigned at_flags,
                               char *list, size_t size)
{
#ifdef SYS_listxattrat
	return (ssize_t)syscall(SYS_listxattrat, dirfd, path, at_flags, list,
	                        size);
#else
	(void)dirfd, (void)path, (void)at_flags, (void)list, (void)size;
	errno = ENOSYS;
	return -1;
#endif
}

static ssize_t sys_getxattrat(int dirfd, const char *path, unsigned at_flags,
                              const char *name, void *value, size_t size)
{
#ifdef SYS_getxattrat
	/* struct xattr_args of <linux/xattr.h>, not in older headers. */
	struct {
		uint64_t value;
		uint32_t size;
		uint32_t flags;
	} args = { (uint64_t)(uintptr_t)value, (uint32_t)size, 0 };

	if (size > UINT32_MAX)
		args.size = UINT32_MAX;
	return (ssize_t)syscall(SYS_getxattrat, dirfd, path, at_flags, name,
	                        &args, sizeof(args));
#else
	(void)dirfd, (void)path, (void)at_flags, (void)name, (void)value;
	(void)size;
	errno = ENOSYS;
	return -1;
#endif
}

const struct fsafe_sys fsafe__sys_default = {
	.openat = sys_openat,
	.openat2 = sys_openat2,
	.read = read,
	.write = write,
	.pread = pread,
	.pwrite = pwrite,
	.pwritev2 = sys_pwritev2,
	.fsync = fsync,
	.fdatasync = fdatasync,
	.ftruncate = ftruncate,
	.fallocate = sys_fallocate,
	.renameat = renameat,
	.renameat2 = sys_renameat2,
	.linkat = linkat,
	.unlinkat = unlinkat,
	.mkdirat = mkdirat,
	.fstatat = fstatat,
	.fstat = fstat,
	.fstatfs = fstatfs,
	.lseek = lseek,
	.readlinkat = readlinkat,
	.fchmod = fchmod,
	.fchown = fchown,
	.fcntl_lock = sys_fcntl_lock,
	.getdents = sys_getdents,
	.close = close,
	.getrandom = sys_getrandom,
	.ioctl = sys_ioctl,
	.fdatasync_many = fsafe__uring_fdatasync_many,
	.syncfs = sys_syncfs,
	.kill = kill,
	.flock = flock,
	.listxattrat = sys_listxattrat,
	.getxattrat = sys_getxattrat,
	.flistxattr = flistxattr,
	.fgetxattr = fgetxattr,
	.fsetxattr = fsetxattr,
	.symlinkat = symlinkat,
};

#ifdef FSAFE_TESTING
const struct fsafe_sys *volatile fsafe__sys_current = &fsafe__sys_default;
volatile unsigned fsafe__test_break;

const struct fsafe_sys *fsafe__sys_swap(const struct fsafe_sys *table)
{
	const struct fsafe_sys *old = fsafe__sys_current;
	fsafe__sys_current = table ? table : &fsafe__sys_default;
	return old;
}
#endif

/* Retry a call that returns -1/errno while it fails with EINTR. */
#define RETRY_EINTR(expr)                                                     \
	({                                                                    \
		long r_;                                                      \
		do                                                            \
			r_ = (long)(expr);                                    \
		while (r_ < 0 && errno == EINTR);                             \
		r_ < 0 ? -errno : r_;                                         \
	})

int fsafe__openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return (int)RETRY_EINTR(SYS->openat(dirfd, path, flags | O_CLOEXEC, mode));
}

int fsafe__open_dir(int dirfd, const char *path)
{
	return fsafe__openat(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
}

int fsafe__open_subdir(int dirfd, const char *name)
{
	return fsafe__openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
}

int fsafe__open_regular(int dirfd, const char *name, int flags,
                        struct stat *st)
{
	struct stat own;
	int fd, r;

	if (!st)
		st = &own;
	fd = fsafe__openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd < 0)
		return fd;
	r = fsafe__fstat(fd, st);
	if (r == 0 && !S_ISREG(st->st_mode))
		r = S_ISDIR(st->st_mode) ? -EISDIR : -EBADFD;
	if (r < 0) {
		fsafe__close(fd);
		return r;
	}
	return fd;
}

int fsafe__write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = SYS->write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* a regular file never accepts 0 bytes */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Drop the first `n` bytes of v[0..*cnt), which are written. */
static void iov_advance(struct iovec *v, int *cnt, size_t n)
{
	int i = 0;

	while (i < *cnt && n >= v[i].iov_len)
		n -= v[i++].iov_len;
	memmove(v, v + i, (size_t)(*cnt - i) * sizeof(*v));
	*cnt -= i;
	if (*cnt > 0) {
		v[0].iov_base = (char *)v[0].iov_base + n;
		v[0].iov_len -= n;
	}
}

/* The pieces one after the other, then the sync on its own. */
static int write_then_sync(int fd, const struct iovec *v, int n, bool full,
                           const char **step)
{
	int r = 0;

	*step = "write";
	for (int i = 0; i < n && r == 0; i++)
		r = fsafe__write_all(fd, v[i].iov_base, v[i].iov_len);
	if (r < 0)
		return r;
	*step = "fsync";
	return full ? fsafe__fsync(fd) : fsafe__fdatasync(fd);
}

/* Whether a refusal of the call says only that it, or its flag, is not
   there: nothing was written, so writing another way is safe. */
static bool rwf_unsupported(int err)
{
	return err == ENOSYS || err == EOPNOTSUPP || err == EINVAL;
}

int fsafe__write_synced(int fd, const struct iovec *iov, int n, bool full,
                        const char **step)
{
	struct iovec v[FSAFE__SYNCED_IOV_MAX];
	int flags = full ? FSAFE__RWF_SYNC : FSAFE__RWF_DSYNC;
	bool wrote = false;
	int cnt = 0;

	if (n > FSAFE__SYNCED_IOV_MAX)
		return write_then_sync(fd, iov, n, full, step);
	/* Empty pieces dropped: a write of nothing syncs nothing. */
	for (int i = 0; i < n; i++)
		if (iov[i].iov_len > 0)
			v[cnt++] = iov[i];
	if (cnt == 0)
		return write_then_sync(fd, v, 0, full, step);
	*step = "write";
	while (cnt > 0) {
		/* Offset -1: at the file position, which it advances. A
		   short count is durable as far as it goes. */
		ssize_t got = SYS->pwritev2(fd, v, cnt, -1, flags);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && !wrote && rwf_unsupported(errno))
			return write_then_sync(fd, v, cnt, full, step);
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO; /* as in fsafe__write_all */
		wrote = true;
		iov_advance(v, &cnt, (size_t)got);
	}
	return 0;
}

ssize_t fsafe__read(int fd, void *buf, size_t len)
{
	return RETRY_EINTR(SYS->read(fd, buf, len));
}

/*
 * A failed fsync is never retried: after EIO the kernel may have dropped
 * the dirty pages, and a second fsync would report success for data that
 * is gone. Only EINTR (nothing was attempted) is retried.
 */
int fsafe__fsync(int fd)
{
	return (int)RETRY_EINTR(SYS->fsync(fd));
}

int fsafe__fdatasync(int fd)
{
	return (int)RETRY_EINTR(SYS->fdatasync(fd));
}

int fsafe__fallocate(int fd, int mode, off_t off, off_t len)
{
	return (int)RETRY_EINTR(SYS->fallocate(fd, mode, off, len));
}

/* Since Linux 5.8, syncfs reports writeback errors of any file on the
   filesystem since fd was opened, so a failed flush is never lost. */
int fsafe__syncfs(int fd)
{
	return (int)RETRY_EINTR(SYS->syncfs(fd));
}

int fsafe__fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return (int)RETRY_EINTR(SYS->fstatat(dirfd, path, st, flags));
}

int fsafe__fstat(int fd, struct stat *st)
{
	return (int)RETRY_EINTR(SYS->fstat(fd, st));
}

int fsafe__file_size(int fd, uint64_t *size)
{
	off_t end = SYS->lseek(fd, 0, SEEK_END);

	if (end < 0)
		return -errno;
	*size = (uint64_t)end;
	return 0;
}

int fsafe__unlinkat(int dirfd, const char *path, int flags)
{
	return (int)RETRY_EINTR(SYS->unlinkat(dirfd, path, flags));
}

int fsafe__renameat(int olddirfd, const char *old, int newdirfd,
                    const char *new_)
{
	return (int)RETRY_EINTR(SYS->renameat(olddirfd, old, newdirfd, new_));
}

int fsafe__renameat2(int olddirfd, const char *old, int newdirfd,
                     const char *new_, unsigned flags)
{
	return (int)RETRY_EINTR(
		SYS->renameat2(olddirfd, old, newdirfd, new_, flags));
}

int fsafe__linkat(int olddirfd, const char *old, int newdirfd,
                  const char *new_, int flags)
{
	return (int)RETRY_EINTR(
		SYS->linkat(olddirfd, old, newdirfd, new_, flags));
}

int fsafe__mkdirat(int dirfd, const char *path, mode_t mode)
{
	return (int)RETRY_EINTR(SYS->mkdirat(dirfd, path, mode));
}

int fsafe__fchmod(int fd, mode_t mode)
{
	return (int)RETRY_EINTR(SYS->fchmod(fd, mode));
}

ssize_t fsafe__readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	return RETRY_EINTR(SYS->readlinkat(dirfd, path, buf, len));
}

int fsafe__fchown(int fd, uid_t uid, gid_t gid)
{
	return (int)RETRY_EINTR(SYS->fchown(fd, uid, gid));
}

int fsafe__random(void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = SYS->getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t fsafe__listxattrat(int dirfd, const char *path, char *list,
                           size_t size)
{
	return RETRY_EINTR(SYS->listxattrat(dirfd, path, AT_SYMLINK_NOFOLLOW,
	                                    list, size));
}

ssize_t fsafe__getxattrat(int dirfd, const char *path, const char *name,
                          void *value, size_t size)
{
	return RETRY_EINTR(SYS->getxattrat(dirfd, path, AT_SYMLINK_NOFOLLOW,
	                                   name, value, size));
}

ssize_t fsafe__flistxattr(int fd, char *list, size_t size)
{
	return RETRY_EINTR(SYS->flistxattr(fd, list, size));
}

ssize_t fsafe__fgetxattr(int fd, const char *name, void *value, size_t size)
{
	return RETRY_EINTR(SYS->fgetxattr(fd, name, value, size));
}

int fsafe__fsetxattr(int fd, const char *name, const void *value,
                     size_t size)
{
	return (int)RETRY_EINTR(SYS->fsetxattr(fd, name, value, size, 0));
}

int fsafe__symlinkat(const char *target, int dirfd, const char *path)
{
	return (int)RETRY_EINTR(SYS->symlinkat(target, dirfd, path));
}

int fsafe__flock(int fd, int op)
{
	return (int)RETRY_EINTR(SYS->flock(fd, op));
}

static int ofd_setlk(int fd, short type, int cmd)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET };

	return (int)RETRY_EINTR(SYS->fcntl_lock(fd, cmd, &fl));
}

#ifndef F_OFD_SETLK
/* Without open-file-description locks, fall back to process locks: they
   still keep other processes' sweeps away from a live writer. */
#define F_OFD_SETLK F_SETLK
#define F_OFD_SETLKW F_SETLKW
#endif

int fsafe__ofd_lock(int fd, short type, bool wait)
{
	int r = ofd_setlk(fd, type, wait ? F_OFD_SETLKW : F_OFD_SETLK);

	return r == -EACCES ? -EAGAIN : r;
}

int fsafe__ofd_unlock(int fd)
{
	return ofd_setlk(fd, F_UNLCK, F_OFD_SETLK);
}

int fsafe__close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		SYS->close(fd);
		errno = saved;
	}
	return -1;
}

void fsafe__dir_init(struct fsafe__dir *d, int fd)
{
	d->fd = fd;
	d->pos = d->end = 0;
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

int fsafe__dir_next(struct fsafe__dir *d, const char **name,
                    unsigned char *type)
{
	for (;;) {
		if (d->pos >= d->end) {
			ssize_t n = RETRY_EINTR(
				SYS->getdents(d->fd, d->buf, sizeof(d->buf)));
			if (n < 0)
				return (int)n;
			if (n == 0)
				return 0;
			d->pos = 0;
			d->end = (size_t)n;
		}
		struct linux_dirent64 *e = (void *)(d->buf + d->pos);
		d->pos += e->d_reclen;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		*name = e->d_name;
		*type = e->d_type;
		return 1;
	}
}
