/* What both layers share: fixtures, the judge, the atomic-write invariant,
   and a deterministic getrandom. */
#define _GNU_SOURCE
#include "power.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "fsafe.h"
#include "staging.h"
#include "sys.h"

unsigned char pw_old[PW_OLD_LEN], pw_new[PW_NEW_LEN];
unsigned char pw_old_long[PW_NEW_LEN], pw_new_short[PW_OLD_LEN];

int (*pw_calls_now)(void);

static ssize_t det_getrandom(void *buf, size_t len, unsigned flags);

/* Distinct, never-zero bytes, so OLD, NEW, zeros and any mix of them are
   told apart by content alone. */
static void fill(unsigned char *b, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		b[i] = (unsigned char)(1 + x % 127 + (seed & 1) * 128);
	}
}

void pw_init(void)
{
	/* Odd seeds give bytes >= 129, even seeds bytes <= 127: OLD and NEW
	   differ in every byte. */
	fill(pw_old, sizeof(pw_old), 1);
	fill(pw_new, sizeof(pw_new), 2);
	fill(pw_old_long, sizeof(pw_old_long), 3);
	fill(pw_new_short, sizeof(pw_new_short), 4);
	pw_sys_det = fsafe__sys_default;
	pw_sys_det.getrandom = det_getrandom;
	/* The workloads' batches are small: their new files are linked at
	   their names wherever a large batch's would be. */
	fsafe__test_link_new_min = 0;
}

void pw_returned(struct pw_progress *p, int i, int r)
{
	if (i != p->returned || i >= PW_MAX_OPS)
		abort(); /* a workload bug: ops must be reported in order */
	p->result[i] = r;
	p->calls[i] = pw_calls_now ? pw_calls_now() : 0;
	/* Published last: a reader that sees the count sees the result. */
	__atomic_store_n(&p->returned, i + 1, __ATOMIC_RELEASE);
}

static void die(const char *what, const char *name)
{
	fprintf(stderr, "power fixture: %s %s: %s\n", what, name,
	        strerror(errno));
	abort();
}

void pw_put(int dirfd, const char *name, const void *buf, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	                0644);

	if (fd < 0)
		die("create", name);
	if (write(fd, buf, len) != (ssize_t)len || fsync(fd) < 0)
		die("write", name);
	close(fd);
}

void pw_link(int dirfd, const char *from, const char *to)
{
	if (linkat(dirfd, from, dirfd, to, 0) < 0)
		die("link", to);
}

static bool all_zero(const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* Bytes equal to b's at the same offset. */
static size_t same_at(const unsigned char *a, size_t na,
                      const unsigned char *b, size_t nb)
{
	size_t k = 0;

	for (size_t i = 0; i < na && i < nb; i++)
		k += a[i] == b[i];
	return k;
}

static size_t nonzero(const unsigned char *b, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += b[i] != 0;
	return k;
}

static size_t common_prefix(const unsigned char *a, size_t na,
                            const unsigned char *b, size_t nb)
{
	size_t i = 0;

	while (i < na && i < nb && a[i] == b[i])
		i++;
	return i;
}

enum kind { K_ABSENT, K_OLD, K_NEW, K_OTHER };

const char *pw_expect(int root, const char *path, const void *old,
                      size_t oldlen, const void *new_, size_t newlen,
                      bool returned, char *buf, size_t len)
{
	int fd = openat(root, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	unsigned char *got = NULL;
	size_t n = 0, cap = 0;
	enum kind k;
	char what[160];

	if (fd < 0 && errno != ENOENT) {
		snprintf(buf, len, "%s: open: %s", path, strerror(errno));
		return buf;
	}
	if (fd >= 0) {
		for (;;) {
			if (n == cap) {
				cap = cap ? 2 * cap : 65536;
				if (!(got = realloc(got, cap)))
					abort();
			}
			ssize_t r = read(fd, got + n, cap - n);
			if (r < 0) {
				snprintf(buf, len, "%s: read: %s", path,
				         strerror(errno));
				free(got);
				close(fd);
				return buf;
			}
			if (r == 0)
				break;
			n += (size_t)r;
		}
		close(fd);
	}

	if (fd < 0)
		k = K_ABSENT, snprintf(what, sizeof(what), "missing");
	else if (n == newlen && memcmp(got, new_, n) == 0)
		k = K_NEW, snprintf(what, sizeof(what), "NEW");
	else if (old && n == oldlen && memcmp(got, old, n) == 0)
		k = K_OLD, snprintf(what, sizeof(what), "OLD");
	else if (n == 0)
		k = K_OTHER, snprintf(what, sizeof(what), "empty");
	else if (all_zero(got, n))
		k = K_OTHER, snprintf(what, sizeof(what), "NUL-filled (%zu bytes)", n);
	else {
		k = K_OTHER;
		snprintf(what, sizeof(what),
		         "mixed (%zu bytes: %zu as in NEW, %zu as in OLD, %zu "
		         "zero; the first %zu match NEW)", n,
		         same_at(got, n, new_, newlen),
		         old ? same_at(got, n, old, oldlen) : 0,
		         n - nonzero(got, n), common_prefix(got, n, new_, newlen));
	}
	free(got);

	if (k == K_NEW)
		return NULL;
	if (!returned && (k == K_OLD || (k == K_ABSENT && !old)))
		return NULL;
	snprintf(buf, len, "%s is %s; expected %s", path, what,
	         returned ? "NEW (the write returned success)"
	                  : old ? "exactly OLD or NEW" : "absent or NEW");
	return buf;
}

const char *pw_expect_mode(int root, const char *path, unsigned mode,
                           char *buf, size_t len)
{
	struct stat st;

	if (fstatat(root, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return NULL;
	if ((st.st_mode & 07777) == mode)
		return NULL;
	snprintf(buf, len, "%s has mode %04o; expected %04o", path,
	         (unsigned)(st.st_mode & 07777), mode);
	return buf;
}

/* A known name ending in '*' stands for every name with that prefix. */
static bool known(const struct pw_workload *w, const char *name)
{
	for (const char *const *k = w->known; k && *k; k++) {
		size_t n = strlen(*k);
		if (strcmp(*k, name) == 0 ||
		    (n && (*k)[n - 1] == '*' && strncmp(*k, name, n - 1) == 0))
			return true;
	}
	return false;
}

/* Entries of dir that are neither known nor leftovers (staging names, the
   module's own); when staging_too, leftovers count as stray as well. */
static const char *stray(const struct pw_workload *w, int root,
                         const char *dir, bool staging_too, char *buf,
                         size_t len)
{
	int fd = openat(root, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *bad = NULL;

	if (fd < 0)
		return NULL; /* not created before the crash */
	DIR *d = fdopendir(fd);
	if (!d)
		abort();
	for (struct dirent *e; !bad && (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		bool st = fsafe_is_staging_name(e->d_name) ||
		          (w->leftover && w->leftover(e->d_name));
		if (staging_too && st) {
			snprintf(buf, len, "recovery left %s/%s", dir,
			         e->d_name);
			bad = buf;
		} else if (!st && !known(w, e->d_name)) {
			snprintf(buf, len,
			         "%s/%s is neither the workload's nor a "
			         "staging name", dir, e->d_name);
			bad = buf;
		}
	}
	closedir(d);
	return bad;
}

const char *pw_sweep_all(const struct pw_workload *w, int root, char *buf,
                         size_t len)
{
	for (const char *const *d = w->dirs; *d; d++) {
		if (faccessat(root, *d, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int r = fsafe_sweep(root, *d, 0, 0, NULL, NULL);
		if (r < 0) {
			snprintf(buf, len, "sweep of %s: %s", *d,
			         fsafe_strerror(r));
			return buf;
		}
	}
	return NULL;
}

const char *pw_judge(const struct pw_workload *w, int root,
                     const struct pw_progress *p, char *buf, size_t len)
{
	const char *bad = NULL;

	for (const char *const *d = w->dirs; !bad && *d; d++)
		bad = stray(w, root, *d, false, buf, len);
	if (!bad)
		bad = w->recover ? w->recover(w, root, buf, len)
		                 : pw_sweep_all(w, root, buf, len);
	for (const char *const *d = w->dirs; !bad && *d; d++)
		bad = stray(w, root, *d, true, buf, len);
	if (!bad)
		bad = w->check(root, p, buf, len);
	return bad;
}

/* ---- deterministic getrandom ------------------------------------------- */

/*
 * Call k of a run yields 12 bytes of value 0x10 + k. A run's staging names
 * are then the same every time: a fixture can plant a leftover under the
 * name the writer will draw first (a collision real randomness makes
 * 2^-96 likely), and Layer B's recording is reproducible.
 */
static unsigned det_calls;

void pw_det_reset(void)
{
	det_calls = 0;
}

static ssize_t det_getrandom(void *buf, size_t len, unsigned flags)
{
	(void)flags;
	memset(buf, 0x10 + (int)(++det_calls % 0xe0), len);
	return (ssize_t)len;
}

const char *pw_det_first_name(void)
{
	static char name[FSAFE_STAGING_NAME_LEN + 1];
	uint8_t rnd[FSAFE__STAGING_RANDOM_BYTES];

	memset(rnd, 0x11, sizeof(rnd));
	fsafe__staging_format(rnd, name);
	return name;
}

struct fsafe_sys pw_sys_det;

/* ---- fixture trees --------------------------------------------------------- */

static void clear_fd(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;

	if (!d)
		abort();
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(fd, e->d_name, 0) == 0)
			continue;
		if (errno != EISDIR && errno != EPERM)
			die("unlink", e->d_name);
		int sub = openat(fd, e->d_name,
		                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			die("open", e->d_name);
		clear_fd(sub);
		if (unlinkat(fd, e->d_name, AT_REMOVEDIR) < 0)
			die("rmdir", e->d_name);
	}
	closedir(d);
}

void pw_rmtree_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name,
	                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT)
			return;
		die("open", name);
	}
	clear_fd(fd);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		die("rmdir", name);
}
