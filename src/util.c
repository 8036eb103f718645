/* The modules' shared helpers (util.h). */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sys.h"

#ifdef __linux__
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#endif

ssize_t fsafe__pread_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = SYS->pread(fd, p + got, len - got,
		                       off + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

#define IO_ALIGN ((size_t)4096)
#define IO_ALIGN_MIN ((size_t)64 << 10)

/* Kept just below the start of what fsafe__io_alloc gives. */
struct io_head {
	void *raw;   /* the block malloc gave */
	size_t size; /* what was asked for */
};

static struct io_head io_head(const void *p)
{
	struct io_head h;

	memcpy(&h, (const char *)p - sizeof(h), sizeof(h));
	return h;
}

void *fsafe__io_alloc(size_t n)
{
	size_t head = sizeof(struct io_head);
	size_t align = n < IO_ALIGN_MIN ? head : IO_ALIGN;
	char *raw;

	if (n > SIZE_MAX - align - head || !(raw = malloc(n + align + head)))
		return NULL;
	uintptr_t at = ((uintptr_t)raw + head + align - 1) &
	               ~(uintptr_t)(align - 1);
	memcpy((char *)at - head, &(struct io_head){ raw, n }, head);
	return (void *)at;
}

size_t fsafe__io_size(const void *p)
{
	return io_head(p).size;
}

void fsafe__io_free(void *p)
{
	if (p)
		free(io_head(p).raw);
}

int fsafe__pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = SYS->pwrite(fd, p, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* Read fd to its end, growing the buffer up to one byte past max: the
   file may have grown since anyone looked at its size. */
static int read_all(int fd, size_t max, char **out, size_t *len)
{
	size_t n = 0, cap = 0;
	char *b = NULL;
	ssize_t r;

	do {
		if (n == cap) {
			char *nb;
			if (n > max) {
				r = -EFBIG;
				break;
			}
			cap = cap ? 2 * cap : 4096;
			cap = cap > max + 1 ? max + 1 : cap;
			if (!(nb = realloc(b, cap + 1))) {
				r = -ENOMEM;
				break;
			}
			b = nb;
		}
		if ((r = fsafe__read(fd, b + n, cap - n)) > 0)
			n += (size_t)r;
	} while (r > 0);
	if (r < 0) {
		free(b);
		return (int)r;
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

int fsafe__read_file_at(int dirfd, const char *name, size_t max, char **out,
                        size_t *len)
{
	int fd = fsafe__open_regular(dirfd, name, O_RDONLY, NULL);

	if (fd < 0)
		return fd;
	int r = read_all(fd, max, out, len);
	fsafe__close(fd);
	return r;
}

int64_t fsafe__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t fsafe__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t fsafe__mono_ms(void)
{
	return fsafe__mono_ns() / 1000000u;
}

int fsafe__backoff_sleep(uint64_t t0, uint64_t limit_ns, uint64_t *step_ns,
                         uint64_t max_ns, uint64_t random)
{
	uint64_t spent = fsafe__mono_ns() - t0;

	if (limit_ns && spent >= limit_ns)
		return -ETIMEDOUT;
	uint64_t d = *step_ns / 2 + random % (*step_ns / 2 + 1);
	if (limit_ns && d > limit_ns - spent)
		d = limit_ns - spent;
	struct timespec ts = { .tv_sec = (time_t)(d / 1000000000u),
		               .tv_nsec = (long)(d % 1000000000u) };
	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	*step_ns = *step_ns * 2 > max_ns ? max_ns : *step_ns * 2;
	return 0;
}

/* Component c of cur: opened, or made first when missing. */
static int open_or_make(int cur, const char *c, mode_t mode,
                        const char **step)
{
	int next = fsafe__open_dir(cur, c);

	if (next == -ENOENT) {
		int r = fsafe__mkdirat(cur, c, mode);
		if (r < 0 && r != -EEXIST) {
			*step = "mkdir";
			return r;
		}
		next = fsafe__open_dir(cur, c);
	}
	if (next < 0)
		*step = "open directory";
	return next;
}

int fsafe__mkdir_p(int dirfd, const char *path, mode_t mode, bool sync,
                   int *fd, const char **step)
{
	char buf[PATH_MAX];
	char *save = NULL;
	size_t n = strlen(path);

	*step = "open directory";
	if (n == 0)
		return -EINVAL;
	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	int r, cur = fsafe__open_dir(dirfd, buf[0] == '/' ? "/" : ".");
	char *c = strtok_r(buf, "/", &save);
	while (c && cur >= 0) {
		char *rest = strtok_r(NULL, "/", &save);
		/* As mkdir -p -m: the mode is the last one's only. */
		int next = open_or_make(cur, c, rest ? 0777 : mode, step);
		/* Made or found, the entry is synced: another process may have
		   made it a moment ago and not synced it yet. A clean
		   directory's sync costs a call and no flush. */
		if (next >= 0 && sync && (r = fsafe__fsync(cur)) < 0) {
			*step = "fsync directory";
			fsafe__close(next);
			next = r;
		}
		fsafe__close(cur);
		cur = next;
		c = rest;
	}
	if (cur < 0)
		return cur;
	if (fd)
		*fd = cur;
	else
		fsafe__close(cur);
	return 0;
}

int fsafe__subdir_make(int dfd, const char *name, mode_t mode, bool sync)
{
	int fd = fsafe__open_subdir(dfd, name);

	if (fd != -ENOENT)
		return fd;
	int r = fsafe__mkdirat(dfd, name, mode);
	if (r < 0 && r != -EEXIST)
		return r;
	if (r == 0 && sync && (r = fsafe__fsync(dfd)) < 0)
		return r;
	return fsafe__open_subdir(dfd, name);
}

int fsafe__dir_each(int dirfd, fsafe__dir_fn *fn, void *arg)
{
	struct fsafe__dir *d = malloc(sizeof(*d));
	const char *name;
	unsigned char type;
	int r = d ? fsafe__open_dir(dirfd, ".") : -ENOMEM;

	if (r < 0) {
		free(d);
		return r;
	}
	int fd = r;
	fsafe__dir_init(d, fd);
	while ((r = fsafe__dir_next(d, &name, &type)) == 1)
		if ((r = fn(fd, name, type, arg)) != 0)
			break;
	fsafe__close(fd);
	free(d);
	return r;
}

struct names {
	char **v;
	size_t n, cap;
};

int fsafe__strv_push(char ***v, size_t *n, size_t *cap, const char *s)
{
	char *copy = strdup(s);

	if (!copy)
		return -ENOMEM;
	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		char **nv = realloc(*v, ncap * sizeof(*nv));
		if (!nv) {
			free(copy);
			return -ENOMEM;
		}
		*v = nv;
		*cap = ncap;
	}
	(*v)[(*n)++] = copy;
	return 0;
}

static int add_name(int fd, const char *name, unsigned char type, void *arg)
{
	struct names *l = arg;

	(void)fd, (void)type;
	return fsafe__strv_push(&l->v, &l->n, &l->cap, name);
}

static int name_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

int fsafe__dir_names(int dfd, char ***out, size_t *n)
{
	struct names l = { 0 };
	int r = fsafe__dir_each(dfd, add_name, &l);

	if (r < 0) {
		fsafe__dir_names_free(l.v, l.n);
		l.v = NULL;
		l.n = 0;
	} else if (l.n > 1) {
		qsort(l.v, l.n, sizeof(*l.v), name_cmp);
	}
	*out = l.v;
	*n = l.n;
	return r;
}

void fsafe__dir_names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

#ifdef FSAFE_TESTING
volatile int fsafe__test_renames_whole = -1;
#endif

#ifdef __linux__
#define EXT_SUPER_MAGIC 0xEF53 /* ext2, ext3 and ext4 alike */
#define XFS_SUPER_MAGIC 0x58465342
#define TMPFS_MAGIC 0x01021994

/* The filesystem type of mountinfo line `line` if it is for device
   maj:min, else NULL. Fields: id parent maj:min root point options
   [optional...] - type source super-options. */
static const char *mount_type(char *line, unsigned maj, unsigned min)
{
	unsigned a, b;
	char *sep, *type;

	if (sscanf(line, "%*s %*s %u:%u", &a, &b) != 2 || a != maj || b != min)
		return NULL;
	if (!(sep = strstr(line, " - ")))
		return NULL;
	type = sep + 3;
	type[strcspn(type, " ")] = '\0';
	return type;
}

/* Whether mountinfo names device `dev` as ext3 or ext4 (not ext2). */
static bool ext_journaled(dev_t dev)
{
	char buf[4096];
	size_t have = 0;
	bool found = false, journaled = false, skip = false;
	int fd = fsafe__openat(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY, 0);

	if (fd < 0)
		return false;
	while (!found) {
		ssize_t n = fsafe__read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		char *line = buf, *nl;
		while (!found && (nl = strchr(line, '\n'))) {
			*nl = '\0';
			const char *t = skip ? NULL
			                     : mount_type(line, major(dev),
			                                  minor(dev));
			found = t != NULL;
			journaled = t && (!strcmp(t, "ext4") || !strcmp(t, "ext3"));
			skip = false;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		/* A line longer than the buffer: the rest of it is skipped. */
		if (have == sizeof(buf) - 1)
			have = 0, skip = true;
	}
	fsafe__close(fd);
	return journaled;
}
#endif

bool fsafe__renames_whole(int fd)
{
#ifdef FSAFE_TESTING
	if (fsafe__test_renames_whole >= 0)
		return fsafe__test_renames_whole;
#endif
#ifdef __linux__
	struct statfs sf;
	struct stat st;

	if (SYS->fstatfs(fd, &sf) < 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case XFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		return true;
	case EXT_SUPER_MAGIC:
		return fsafe__fstat(fd, &st) == 0 && ext_journaled(st.st_dev);
	default:
		return false;
	}
#else
	(void)fd;
	return false;
#endif
}

/* The kB count of meminfo field `key` (with its colon) in text t, or -1. */
static int64_t meminfo_kb(const char *t, const char *key)
{
	size_t klen = strlen(key);
	unsigned long long kb;

	for (const char *p = t; p;) {
		if (!strncmp(p, key, klen) &&
		    sscanf(p + klen, " %llu kB", &kb) == 1 &&
		    kb <= (unsigned long long)INT64_MAX / 2048)
			return (int64_t)kb;
		if ((p = strchr(p, '\n')))
			p++;
	}
	return -1;
}

int fsafe__dirty_bytes(uint64_t *out)
{
	char *t;
	size_t len;
	int r = fsafe__read_file_at(AT_FDCWD, "/proc/meminfo", 64 << 10, &t,
	                            &len);

	if (r < 0)
		return r;
	int64_t dirty = meminfo_kb(t, "Dirty:");
	int64_t wb = meminfo_kb(t, "Writeback:");
	free(t);
	if (dirty < 0 || wb < 0)
		return -EBADMSG;
	*out = ((uint64_t)dirty + (uint64_t)wb) * 1024;
	return 0;
}
