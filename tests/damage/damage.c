#define _GNU_SOURCE
#include "damage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static const char *const kind_names[DMG_KINDS] = {
	[DMG_DELETE] = "delete",
	[DMG_TRUNCATE] = "truncate",
	[DMG_FLIP] = "flip",
	[DMG_ZERO8] = "zero8",
	[DMG_FIFO] = "fifo",
	[DMG_SOCKET] = "socket",
	[DMG_DIR] = "dir",
	[DMG_SYMLINK_IN] = "symlink-in",
	[DMG_SYMLINK_OUT] = "symlink-out",
	[DMG_SYMLINK_DANGLING] = "symlink-dangling",
	[DMG_STRAY] = "stray",
	[DMG_FOREIGN] = "foreign",
	[DMG_DUPLICATE] = "duplicate",
};

const char *dmg_kind_name(enum dmg_kind kind)
{
	return kind < DMG_KINDS ? kind_names[kind] : "?";
}

const char *dmg_case_name(const struct dmg_case *c, char *buf, size_t len)
{
	switch (c->kind) {
	case DMG_TRUNCATE:
	case DMG_FLIP:
	case DMG_ZERO8:
		snprintf(buf, len, "%s %s at %lld", dmg_kind_name(c->kind),
		         c->path, (long long)c->off);
		break;
	case DMG_SYMLINK_IN:
	case DMG_STRAY:
	case DMG_FOREIGN:
	case DMG_DUPLICATE:
		snprintf(buf, len, "%s %s (%s)", dmg_kind_name(c->kind),
		         c->path, c->extra);
		break;
	default:
		snprintf(buf, len, "%s %s", dmg_kind_name(c->kind), c->path);
	}
	return buf;
}

/* ---- listing ---------------------------------------------------------- */

/* "a/b" into buf (PATH_MAX); false when it does not fit. */
static bool join(char *buf, const char *a, const char *b)
{
	int n = snprintf(buf, PATH_MAX, "%s%s%s", a, *a && *b ? "/" : "", b);

	return n >= 0 && n < PATH_MAX;
}

struct list {
	char **v;
	size_t n, cap;
};

static void list_push(struct list *l, const char *s)
{
	if (l->n + 1 >= l->cap) {
		l->cap = l->cap ? 2 * l->cap : 32;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = strdup(s);
	l->v[l->n] = NULL;
}

static void walk(const char *root, const char *rel, struct list *l)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct dirent *e;
	DIR *d;

	if (!join(path, root, rel))
		return;
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!join(sub, rel, e->d_name))
			continue;
		list_push(l, sub);
		if (join(path, root, sub) && lstat(path, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			walk(root, sub, l);
	}
	closedir(d);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **dmg_artifacts(const char *root)
{
	struct list l = { 0 };

	walk(root, "", &l);
	if (!l.v) /* an empty tree: still a list */
		return calloc(1, sizeof(*l.v));
	qsort(l.v, l.n, sizeof(*l.v), by_name);
	return l.v;
}

void dmg_free_list(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

/* ---- cases ------------------------------------------------------------ */

void dmg_add(struct dmg_case **cases, size_t *n, enum dmg_kind kind,
             const char *rel, off_t off, const char *extra)
{
	struct dmg_case *c;

	*cases = realloc(*cases, (*n + 1) * sizeof(**cases));
	c = &(*cases)[(*n)++];
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->off = off;
	snprintf(c->path, sizeof(c->path), "%s", rel);
	if (extra)
		snprintf(c->extra, sizeof(c->extra), "%s", extra);
}

static int by_off(const void *a, const void *b)
{
	off_t x = *(const off_t *)a, y = *(const off_t *)b;

	return (x > y) - (x < y);
}

static void truncations(const char *rel, off_t size, const off_t *bounds,
                        size_t nbounds, struct dmg_case **cases, size_t *n)
{
	off_t *b = malloc((nbounds + 2) * sizeof(*b));
	size_t m = 0;

	b[m++] = 0;
	for (size_t i = 0; i < nbounds; i++)
		if (bounds[i] > 0 && bounds[i] < size)
			b[m++] = bounds[i];
	b[m++] = size;
	qsort(b, m, sizeof(*b), by_off);
	for (size_t i = 0; i < m; i++) {
		if (i > 0 && b[i] == b[i - 1])
			continue;
		if (b[i] < size)
			dmg_add(cases, n, DMG_TRUNCATE, rel, b[i], NULL);
		if (i + 1 < m && b[i + 1] - b[i] > 1)
			dmg_add(cases, n, DMG_TRUNCATE, rel,
			        b[i] + (b[i + 1] - b[i]) / 2, NULL);
	}
	free(b);
}

static void byte_damage(const char *rel, off_t size, struct dmg_case **cases,
                        size_t *n)
{
	enum { MAX_OFFSETS = 64 };
	off_t step = 512;

	if (size <= 0)
		return;
	if (size / step >= MAX_OFFSETS)
		step = size / MAX_OFFSETS;
	for (off_t off = 0; off < size; off += step) {
		/* Not always at the start of a 512-byte block: headers and
		   frames rarely begin there. */
		off_t at = off + (off / step % 7) * (step / 8 > 0 ? step / 8 : 1);

		if (at >= size)
			at = off;
		dmg_add(cases, n, DMG_FLIP, rel, at, NULL);
		dmg_add(cases, n, DMG_ZERO8, rel, at, NULL);
	}
}

void dmg_cases_for(const char *root, const char *rel, const off_t *bounds,
                   size_t nbounds, const char *sibling,
                   struct dmg_case **cases, size_t *n)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (lstat(path, &st) < 0)
		return;
	dmg_add(cases, n, DMG_DELETE, rel, 0, NULL);
	if (S_ISREG(st.st_mode)) {
		truncations(rel, st.st_size, bounds, nbounds, cases, n);
		byte_damage(rel, st.st_size, cases, n);
		dmg_add(cases, n, DMG_SOCKET, rel, 0, NULL);
		if (sibling)
			dmg_add(cases, n, DMG_SYMLINK_IN, rel, 0, sibling);
	}
	dmg_add(cases, n, DMG_FIFO, rel, 0, NULL);
	dmg_add(cases, n, DMG_DIR, rel, 0, NULL);
	dmg_add(cases, n, DMG_SYMLINK_OUT, rel, 0, NULL);
	dmg_add(cases, n, DMG_SYMLINK_DANGLING, rel, 0, NULL);
}

/* ---- applying --------------------------------------------------------- */

static int rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *e;
		char sub[PATH_MAX];

		while (d && (e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			rm_tree(sub);
		}
		if (d)
			closedir(d);
		return rmdir(path) < 0 ? -errno : 0;
	}
	return unlink(path) < 0 ? -errno : 0;
}

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out, r = 0;
	ssize_t got;

	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		r = -errno;
		close(in);
		return r;
	}
	while ((got = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)got) != got) {
			r = -EIO;
			break;
		}
	if (got < 0)
		r = -errno;
	close(in);
	close(out);
	return r;
}

static int edit_bytes(const char *path, off_t off, bool flip)
{
	unsigned char b[8];
	int fd = open(path, O_RDWR | O_CLOEXEC), r = 0;
	ssize_t got;

	if (fd < 0)
		return -errno;
	got = pread(fd, b, flip ? 1 : sizeof(b), off);
	if (got <= 0) {
		r = got < 0 ? -errno : -ERANGE;
	} else {
		for (ssize_t i = 0; i < got; i++)
			b[i] = flip ? (unsigned char)~b[i] : 0;
		if (pwrite(fd, b, (size_t)got, off) != got)
			r = -EIO;
	}
	close(fd);
	return r;
}

static int make_socket(const char *path)
{
	int fd = tu_bind_socket(path);

	if (fd < 0)
		return fd;
	close(fd); /* the socket file stays; nobody listens */
	return 0;
}

static int replace_with(const char *path, const struct dmg_case *c,
                        const char *outside)
{
	char target[PATH_MAX];
	struct stat st;
	bool was_dir = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
	int r = rm_tree(path);

	if (r < 0 && r != -ENOENT)
		return r;
	switch (c->kind) {
	case DMG_FIFO:
		return mkfifo(path, 0644) < 0 ? -errno : 0;
	case DMG_SOCKET:
		return make_socket(path);
	case DMG_DIR:
		if (was_dir) { /* a directory's counterpart: a file */
			int fd = open(path, O_WRONLY | O_CREAT | O_EXCL |
			              O_CLOEXEC, 0644);
			if (fd < 0)
				return -errno;
			close(fd);
			return 0;
		}
		return mkdir(path, 0755) < 0 ? -errno : 0;
	case DMG_SYMLINK_IN:
		return symlink(c->extra, path) < 0 ? -errno : 0;
	case DMG_SYMLINK_OUT:
		snprintf(target, sizeof(target), "%s/outside.dat", outside);
		if (access(target, F_OK) < 0) {
			int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC,
			              0644);
			if (fd < 0)
				return -errno;
			if (write(fd, "outside\n", 8) != 8)
				r = -EIO;
			close(fd);
			if (r < 0)
				return r;
		}
		return symlink(target, path) < 0 ? -errno : 0;
	case DMG_SYMLINK_DANGLING:
		return symlink("no-such-entry.dmg", path) < 0 ? -errno : 0;
	default:
		return -EINVAL;
	}
}

int dmg_apply(const char *root, const struct dmg_case *c, const char *outside)
{
	char path[PATH_MAX], other[PATH_MAX];

	if (!join(path, root, c->path))
		return -ENAMETOOLONG;
	switch (c->kind) {
	case DMG_DELETE:
		return rm_tree(path);
	case DMG_TRUNCATE:
		return truncate(path, c->off) < 0 ? -errno : 0;
	case DMG_FLIP:
		return edit_bytes(path, c->off, true);
	case DMG_ZERO8:
		return edit_bytes(path, c->off, false);
	case DMG_STRAY:
	case DMG_DUPLICATE:
		if (!join(other, root, c->extra))
			return -ENAMETOOLONG;
		return copy_file(path, other);
	case DMG_FOREIGN:
		return copy_file(c->extra, path);
	default:
		return replace_with(path, c, outside);
	}
}

/* ---- running under a time bound --------------------------------------- */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

struct sink {
	int fd;
	char *buf;
	size_t len;
};

static void sink_read(struct sink *s)
{
	char tmp[4096];
	ssize_t got = read(s->fd, tmp, sizeof(tmp));

	if (got <= 0) {
		close(s->fd);
		s->fd = -1;
		return;
	}
	s->buf = realloc(s->buf, s->len + (size_t)got + 1);
	memcpy(s->buf + s->len, tmp, (size_t)got);
	s->len += (size_t)got;
	s->buf[s->len] = '\0';
}

/* Collect both pipes until the child is gone and they are closed, or the
   time is up. Returns the status as dmg_run documents it. */
static int supervise(pid_t pid, struct sink *s, size_t ns, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	bool timed_out = false;
	int status;

	for (;;) {
		struct pollfd p[2];
		nfds_t np = 0;
		long long left = deadline - now_ms();

		for (size_t i = 0; i < ns; i++)
			if (s[i].fd >= 0)
				p[np++] = (struct pollfd){ s[i].fd, POLLIN, 0 };
		if (np == 0)
			break;
		if (left <= 0) {
			timed_out = true;
			break;
		}
		if (poll(p, np, (int)(left > 100 ? 100 : left)) < 0 &&
		    errno != EINTR)
			break;
		for (size_t i = 0; i < ns; i++)
			for (nfds_t j = 0; j < np; j++)
				if (s[i].fd == p[j].fd && p[j].revents)
					sink_read(&s[i]);
	}
	/* The pipes can close before the child exits, and a child that
	   never writes keeps them open: wait for it against the same clock. */
	while (!timed_out && waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ms() >= deadline) {
			timed_out = true;
			break;
		}
		poll(NULL, 0, 5);
	}
	if (timed_out) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	for (size_t i = 0; i < ns; i++)
		if (s[i].fd >= 0)
			close(s[i].fd);
	if (timed_out)
		return -ETIMEDOUT;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int dmg_run(int timeout_ms, char *const argv[], char **out, char **err)
{
	int po[2], pe[2], r;
	struct sink s[2] = { { -1, NULL, 0 }, { -1, NULL, 0 } };
	pid_t pid;

	if (pipe2(po, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(pe, O_CLOEXEC) < 0) {
		r = -errno;
		close(po[0]);
		close(po[1]);
		return r;
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		dup2(null, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		return -EAGAIN;
	}
	s[0].fd = po[0];
	s[1].fd = pe[0];
	r = supervise(pid, s, 2, timeout_ms);
	if (out)
		*out = s[0].buf ? s[0].buf : strdup("");
	else
		free(s[0].buf);
	if (err)
		*err = s[1].buf ? s[1].buf : strdup("");
	else
		free(s[1].buf);
	return r;
}

int dmg_call(int timeout_ms, int (*fn)(void *arg), void *arg)
{
	pid_t pid = fork();

	if (pid < 0)
		return -EAGAIN;
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	return supervise(pid, NULL, 0, timeout_ms);
}

/* ---- the matrix ------------------------------------------------------- */

struct row {
	char store[32], artifact[48];
	enum dmg_kind kind;
	unsigned cases, lost, reported, hung;
};

/* Test code: one matrix per test process. */
static struct row *rows;
static size_t nrows;

void dmg_tally(const char *store, const char *artifact_class,
               enum dmg_kind kind, unsigned records_lost, bool reported,
               bool hung)
{
	struct row *r = NULL;

	for (size_t i = 0; i < nrows && !r; i++)
		if (rows[i].kind == kind && !strcmp(rows[i].store, store) &&
		    !strcmp(rows[i].artifact, artifact_class))
			r = &rows[i];
	if (!r) {
		rows = realloc(rows, (nrows + 1) * sizeof(*rows));
		r = &rows[nrows++];
		memset(r, 0, sizeof(*r));
		snprintf(r->store, sizeof(r->store), "%s", store);
		snprintf(r->artifact, sizeof(r->artifact), "%s",
		         artifact_class);
		r->kind = kind;
	}
	r->cases++;
	r->lost += records_lost;
	r->reported += reported;
	r->hung += hung;
}

void dmg_tally_print(void)
{
	printf("damage-matrix: %-12s %-16s %-16s %6s %6s %8s %5s\n", "store",
	       "artifact", "class", "cases", "lost", "reported", "hung");
	for (size_t i = 0; i < nrows; i++)
		printf("damage-matrix: %-12s %-16s %-16s %6u %6u %8u %5u\n",
		       rows[i].store, rows[i].artifact,
		       dmg_kind_name(rows[i].kind), rows[i].cases,
		       rows[i].lost, rows[i].reported, rows[i].hung);
	fflush(stdout);
}
