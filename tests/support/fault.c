#define _GNU_SOURCE
#include "fault.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sys.h"

/* Names of the first calls kept for fault_call_name(): enough for a
   batch of 1100 files (about ten calls each). */
#define TRACE_MAX 16384

static struct fault_plan plan;
static atomic_int calls;
static atomic_bool fired;
static atomic_bool short_pending;
static const char *trace[TRACE_MAX];

static const struct fsafe_sys *real = &fsafe__sys_default;

/* 0: run the call; else the errno to fail it with. */
static int before(const char *name)
{
	int n = atomic_fetch_add(&calls, 1) + 1;

	if (n <= TRACE_MAX)
		trace[n - 1] = name;
	if (plan.kind == FAULT_PERSIST && n >= plan.at) {
		atomic_store(&fired, true);
		return plan.err;
	}
	if (n != plan.at)
		return 0;
	atomic_store(&fired, true);
	switch (plan.kind) {
	case FAULT_KILL:
		raise(SIGKILL);
		pause();
		return 0;
	case FAULT_HOOK:
		plan.hook(n, name);
		return 0;
	case FAULT_ERRNO:
		return plan.err;
	case FAULT_SHORT:
		atomic_store(&short_pending, true);
		return 0;
	default:
		return 0;
	}
}

#define FAIL_OR(name, call)                                                   \
	do {                                                                  \
		int e_ = before(#name);                                       \
		if (e_) {                                                     \
			errno = e_;                                           \
			return -1;                                            \
		}                                                             \
		return call;                                                  \
	} while (0)

static size_t cut(size_t len)
{
	if (len > 1 && atomic_exchange(&short_pending, false))
		return len / 2;
	return len;
}

static int w_openat(int d, const char *p, int f, mode_t m) { FAIL_OR(openat, real->openat(d, p, f, m)); }
static int w_openat2(int d, const char *p, void *h, size_t s) { FAIL_OR(openat2, real->openat2(d, p, h, s)); }
static ssize_t w_read(int fd, void *b, size_t n) { FAIL_OR(read, real->read(fd, b, n)); }
static ssize_t w_write(int fd, const void *b, size_t n) { FAIL_OR(write, real->write(fd, b, cut(n))); }
static ssize_t w_pread(int fd, void *b, size_t n, off_t o) { FAIL_OR(pread, real->pread(fd, b, n, o)); }
static ssize_t w_pwrite(int fd, const void *b, size_t n, off_t o) { FAIL_OR(pwrite, real->pwrite(fd, b, cut(n), o)); }
/* A short synced write: the pieces cut to half their total, as the
   kernel would leave them (durable as far as they go). */
static ssize_t cut_pwritev2(int fd, const struct iovec *v, int n, off_t o, int f)
{
	struct iovec c[FSAFE__SYNCED_IOV_MAX];
	size_t total = 0, want;
	int k = 0;

	for (int i = 0; i < n; i++)
		total += v[i].iov_len;
	want = cut(total);
	if (want == total || n > FSAFE__SYNCED_IOV_MAX)
		return real->pwritev2(fd, v, n, o, f);
	for (int i = 0; i < n && want > 0; i++) {
		c[k] = v[i];
		if (c[k].iov_len > want)
			c[k].iov_len = want;
		want -= c[k++].iov_len;
	}
	return real->pwritev2(fd, c, k, o, f);
}
static ssize_t w_pwritev2(int fd, const struct iovec *v, int n, off_t o, int f) { FAIL_OR(pwritev2, cut_pwritev2(fd, v, n, o, f)); }
static int w_fsync(int fd) { FAIL_OR(fsync, real->fsync(fd)); }
static int w_fdatasync(int fd) { FAIL_OR(fdatasync, real->fdatasync(fd)); }
static int w_ftruncate(int fd, off_t l) { FAIL_OR(ftruncate, real->ftruncate(fd, l)); }
static int w_fallocate(int fd, int m, off_t o, off_t l) { FAIL_OR(fallocate, real->fallocate(fd, m, o, l)); }
static int w_renameat(int a, const char *b, int c, const char *d) { FAIL_OR(renameat, real->renameat(a, b, c, d)); }
static int w_renameat2(int a, const char *b, int c, const char *d, unsigned f) { FAIL_OR(renameat2, real->renameat2(a, b, c, d, f)); }
static int w_linkat(int a, const char *b, int c, const char *d, int f) { FAIL_OR(linkat, real->linkat(a, b, c, d, f)); }
static int w_unlinkat(int d, const char *p, int f) { FAIL_OR(unlinkat, real->unlinkat(d, p, f)); }
static int w_mkdirat(int d, const char *p, mode_t m) { FAIL_OR(mkdirat, real->mkdirat(d, p, m)); }
static int w_fstatat(int d, const char *p, struct stat *s, int f) { FAIL_OR(fstatat, real->fstatat(d, p, s, f)); }
static int w_fstat(int fd, struct stat *s) { FAIL_OR(fstat, real->fstat(fd, s)); }
static int w_fstatfs(int fd, struct statfs *s) { FAIL_OR(fstatfs, real->fstatfs(fd, s)); }
static off_t w_lseek(int fd, off_t o, int w) { FAIL_OR(lseek, real->lseek(fd, o, w)); }
static ssize_t w_readlinkat(int d, const char *p, char *b, size_t n) { FAIL_OR(readlinkat, real->readlinkat(d, p, b, n)); }
static int w_fchmod(int fd, mode_t m) { FAIL_OR(fchmod, real->fchmod(fd, m)); }
static int w_fchown(int fd, uid_t u, gid_t g) { FAIL_OR(fchown, real->fchown(fd, u, g)); }
static int w_fcntl_lock(int fd, int c, struct flock *l) { FAIL_OR(fcntl, real->fcntl_lock(fd, c, l)); }
static ssize_t w_getdents(int fd, void *b, size_t n) { FAIL_OR(getdents, real->getdents(fd, b, n)); }
static ssize_t w_getrandom(void *b, size_t n, unsigned f) { FAIL_OR(getrandom, real->getrandom(b, n, f)); }
static int w_ioctl(int fd, unsigned long r, void *a) { FAIL_OR(ioctl, real->ioctl(fd, r, a)); }
static int w_fdatasync_many(struct fsafe__ring **k, const int *f, size_t n, int *e) { FAIL_OR(fdatasync_many, real->fdatasync_many(k, f, n, e)); }
static int w_syncfs(int fd) { FAIL_OR(syncfs, real->syncfs(fd)); }
static int w_kill(pid_t p, int s) { FAIL_OR(kill, real->kill(p, s)); }
static int w_flock(int fd, int op) { FAIL_OR(flock, real->flock(fd, op)); }
static ssize_t w_listxattrat(int d, const char *p, unsigned f, char *l, size_t n) { FAIL_OR(listxattrat, real->listxattrat(d, p, f, l, n)); }
static ssize_t w_getxattrat(int d, const char *p, unsigned f, const char *k, void *v, size_t n) { FAIL_OR(getxattrat, real->getxattrat(d, p, f, k, v, n)); }
static ssize_t w_flistxattr(int fd, char *l, size_t n) { FAIL_OR(flistxattr, real->flistxattr(fd, l, n)); }
static ssize_t w_fgetxattr(int fd, const char *k, void *v, size_t n) { FAIL_OR(fgetxattr, real->fgetxattr(fd, k, v, n)); }
static int w_fsetxattr(int fd, const char *k, const void *v, size_t n, int f) { FAIL_OR(fsetxattr, real->fsetxattr(fd, k, v, n, f)); }
static int w_symlinkat(const char *t, int d, const char *p) { FAIL_OR(symlinkat, real->symlinkat(t, d, p)); }

/* Linux frees the descriptor whatever close() returns, so a failed close
   still closes: the library must never retry it. */
static int w_close(int fd)
{
	int e = before("close");
	int r = real->close(fd);
	if (e) {
		errno = e;
		return -1;
	}
	return r;
}

static const struct fsafe_sys wrapped = {
	.openat = w_openat, .openat2 = w_openat2, .read = w_read,
	.write = w_write, .pread = w_pread, .pwrite = w_pwrite, .pwritev2 = w_pwritev2,
	.fsync = w_fsync, .fdatasync = w_fdatasync, .ftruncate = w_ftruncate,
	.fallocate = w_fallocate,
	.renameat = w_renameat, .renameat2 = w_renameat2, .linkat = w_linkat,
	.unlinkat = w_unlinkat, .mkdirat = w_mkdirat, .fstatat = w_fstatat,
	.fstat = w_fstat, .fstatfs = w_fstatfs, .lseek = w_lseek,
	.readlinkat = w_readlinkat,
	.fchmod = w_fchmod, .fchown = w_fchown, .fcntl_lock = w_fcntl_lock,
	.getdents = w_getdents, .close = w_close, .getrandom = w_getrandom,
	.ioctl = w_ioctl, .fdatasync_many = w_fdatasync_many,
	.syncfs = w_syncfs, .kill = w_kill, .flock = w_flock,
	.listxattrat = w_listxattrat, .getxattrat = w_getxattrat,
	.flistxattr = w_flistxattr, .fgetxattr = w_fgetxattr,
	.fsetxattr = w_fsetxattr, .symlinkat = w_symlinkat,
};

void fault_set_real(const struct fsafe_sys *table)
{
	real = table ? table : &fsafe__sys_default;
}

static char meminfo[4096];
static bool meminfo_absent;

/* A memfd holding the fake text, read from its start like the real file. */
static int meminfo_openat(int d, const char *p, int fl, mode_t m)
{
	if (d != AT_FDCWD || strcmp(p, "/proc/meminfo") != 0)
		return fsafe__sys_default.openat(d, p, fl, m);
	if (meminfo_absent) {
		errno = ENOENT;
		return -1;
	}
	int fd = memfd_create("meminfo", MFD_CLOEXEC);
	size_t len = strlen(meminfo);
	if (fd < 0 || write(fd, meminfo, len) != (ssize_t)len ||
	    lseek(fd, 0, SEEK_SET) != 0) {
		if (fd >= 0)
			close(fd);
		errno = EIO;
		return -1;
	}
	return fd;
}

void fault_fake_meminfo(const char *text)
{
	static struct fsafe_sys table;

	meminfo_absent = !text;
	snprintf(meminfo, sizeof(meminfo), "%s", text ? text : "");
	table = fsafe__sys_default;
	table.openat = meminfo_openat;
	fault_set_real(&table);
}

void fault_install(const struct fault_plan *p)
{
	plan = *p;
	atomic_store(&calls, 0);
	atomic_store(&fired, false);
	atomic_store(&short_pending, false);
	fsafe__sys_swap(&wrapped);
}

void fault_remove(void)
{
	fsafe__sys_swap(NULL);
	plan = (struct fault_plan){ 0 };
}

int fault_calls(void)
{
	return atomic_load(&calls);
}

const char *fault_call_name(int n)
{
	return n >= 1 && n <= TRACE_MAX && n <= fault_calls() ? trace[n - 1] : "?";
}

int fault_calls_named(const char *name)
{
	int n = 0;

	for (int i = 1; i <= fault_calls(); i++)
		n += !strcmp(fault_call_name(i), name);
	return n;
}

int fault_first_call_named(const char *name)
{
	for (int i = 1; i <= fault_calls(); i++)
		if (!strcmp(fault_call_name(i), name))
			return i;
	return 0;
}

bool fault_fired(void)
{
	return atomic_load(&fired);
}

int fault_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", "..", and the DIR's own fd */
}
