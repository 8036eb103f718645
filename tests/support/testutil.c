#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"

char *tu_mkscratch(void)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (asprintf(&path, "%s/fsafe-test-XXXXXX", base ? base : "/tmp") < 0)
		abort();
	if (!mkdtemp(path))
		abort();
	return path;
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(p);
	return 0;
}

void tu_rmtree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char *join(const char *dir, const char *name)
{
	char *p;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		abort();
	return p;
}

void tu_put(const char *dir, const char *name, const void *buf, size_t len)
{
	char *p = join(dir, name);
	FILE *f = fopen(p, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
		abort();
	free(p);
}

unsigned char *tu_pattern(size_t n, unsigned seed)
{
	unsigned char *b = malloc(n ? n : 1);
	uint32_t x = seed * 2654435761u + 7;

	if (!b)
		abort();
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		b[i] = (unsigned char)x;
	}
	return b;
}

char *tu_get(const char *dir, const char *name, size_t *len)
{
	char *p = join(dir, name);
	FILE *f = fopen(p, "rb");
	free(p);
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	size_t k;
	while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	*len = n;
	return buf;
}

bool tu_equals(const char *dir, const char *name, const void *buf, size_t len)
{
	size_t n;
	char *got = tu_get(dir, name, &n);
	bool eq = got && n == len && memcmp(got, buf, len) == 0;
	free(got);
	return eq;
}

int tu_count_matching(const char *dir, bool (*match)(const char *name))
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    match(e->d_name))
			n++;
	closedir(d);
	return n;
}

static bool any_name(const char *name)
{
	(void)name;
	return true;
}

int tu_count_entries(const char *dir)
{
	return tu_count_matching(dir, any_name);
}

int tu_count_staging(const char *dir)
{
	return tu_count_matching(dir, fsafe_is_staging_name);
}

int tu_fx_setup(void **state)
{
	struct tu_fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = tu_mkscratch();
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	f->fds_before = fault_open_fds();
	*state = f;
	return f->dirfd < 0 ? -1 : 0;
}

int tu_fx_teardown(void **state)
{
	struct tu_fx *f = *state;

	close(f->dirfd);
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

void tu_case_test(struct CMUnitTest *t, const char *what, const char *name,
                  void (*fn)(void **state), const void *state)
{
	/* Static, not malloc'd: cmocka reads the names until the run ends and
	   nothing frees them, which the ASan build would call a leak. */
	static char names[64][96];
	static size_t used;

	if (used == sizeof(names) / sizeof(names[0]))
		abort();
	snprintf(names[used], sizeof(names[used]), "%s: %s", what, name);
	*t = (struct CMUnitTest){ .name = names[used++], .test_func = fn,
	                          .initial_state = (void *)state };
}

void tu_assert_error(const struct fsafe_error *e, int code, int sys_errno,
                     const char *step)
{
	assert_int_equal(e->code, code);
	assert_int_equal(e->sys_errno, sys_errno);
	assert_non_null(e->step);
	assert_string_equal(e->step, step);
}

/* fchdir to the directory that holds path's last component (slash points
   at the last '/', or is NULL for a bare name: nothing to do). */
static int enter_parent(const char *path, const char *slash)
{
	char *dir;
	int fd, r = 0;

	if (!slash)
		return 0;
	if (!(dir = strndup(path, (size_t)(slash - path) + 1)))
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0 || fchdir(fd) < 0)
		r = -errno;
	if (fd >= 0)
		close(fd);
	return r;
}

int tu_bind_socket(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	int fd, here, r;

	if (strlen(base) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, base);
	if ((here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		r = -errno;
	else if ((r = enter_parent(path, slash)) == 0) {
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			r = -errno;
		if (fchdir(here) < 0 && r == 0)
			r = -errno;
	}
	if (r < 0 && fd >= 0)
		close(fd);
	close(here);
	return r < 0 ? r : fd;
}

int tu_fail_eio(int fd)
{
	(void)fd;
	errno = EIO;
	return -1;
}

int tu_add_lost(const struct fsafe_damage *d, void *arg)
{
	*(uint64_t *)arg += d->lost;
	return 0;
}
