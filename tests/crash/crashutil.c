#define _GNU_SOURCE
#include "crashutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "sys.h"
#include "testutil.h"

const struct cu_variant cu_variants[] = {
	{ "replace", 0, true, false, CU_PLAIN, 0 },
	{ "managed writer, NO_TMPFILE", FSAFE_NO_TMPFILE, true, true, CU_PLAIN,
	  0 },
	{ "new target", 0, false, false, CU_PLAIN, 0 },
	{ "CREATE_ONLY", FSAFE_CREATE_ONLY, false, false, CU_PLAIN, 0 },
	{ "CREATE_ONLY NO_RENAMEAT2", FSAFE_CREATE_ONLY | FSAFE_NO_RENAMEAT2,
	  false, false, CU_PLAIN, 0 },
	{ "CREATE_ONLY NO_TMPFILE", FSAFE_CREATE_ONLY | FSAFE_NO_TMPFILE,
	  false, false, CU_PLAIN, 0 },
	{ "CREATE_ONLY NO_RENAMEAT2 NO_TMPFILE",
	  FSAFE_CREATE_ONLY | FSAFE_NO_RENAMEAT2 | FSAFE_NO_TMPFILE, false,
	  false, CU_PLAIN, 0 },
	{ "MKDIR a/b", FSAFE_MKDIR, false, false, CU_MKDIR, 0 },
	{ "managed writer, 4 chunks", 0, true, true, CU_PLAIN, 0 },
	{ "managed writer, CREATE_ONLY", FSAFE_CREATE_ONLY, false, true,
	  CU_PLAIN, 0 },
	{ "managed writer, CREATE_ONLY NO_RENAMEAT2",
	  FSAFE_CREATE_ONLY | FSAFE_NO_RENAMEAT2, false, true, CU_PLAIN, 0 },
	{ "NO_FOLLOW over a symlink", FSAFE_NO_FOLLOW, true, false, CU_SYMLINK,
	  0 },
	{ "following a symlink", 0, true, false, CU_SYMLINK, 0 },
	{ "NO_SYNC", FSAFE_NO_SYNC, true, false, CU_PLAIN, 0 },
	{ "replace, owned by another user", 0, true, false, CU_PLAIN,
	  CU_FOREIGN_OWNER },
	{ "managed writer, stage linked via /proc", 0, true, true, CU_PLAIN,
	  CU_NO_FLINK_CAP },
	{ "managed writer, aborted", 0, true, true, CU_PLAIN, CU_ABORT },
	{ "managed writer, aborted, NO_TMPFILE", FSAFE_NO_TMPFILE, true, true,
	  CU_PLAIN, CU_ABORT },
	{ "replace, with xattrs", 0, true, false, CU_PLAIN, CU_XATTRS },
	{ "managed writer, with xattrs", 0, true, true, CU_PLAIN, CU_XATTRS },
	{ "replace, with xattrs, no listxattrat", 0, true, false, CU_PLAIN,
	  CU_XATTRS | CU_NO_XATTRAT },
	{ "replace, no synced write", 0, true, false, CU_PLAIN,
	  CU_NO_RWF_DSYNC },
	{ "new target, no synced write", 0, false, false, CU_PLAIN,
	  CU_NO_RWF_DSYNC },
	{ "replace, with xattrs, no synced write", 0, true, false, CU_PLAIN,
	  CU_XATTRS | CU_NO_RWF_DSYNC },
};
const size_t cu_nvariants = sizeof(cu_variants) / sizeof(cu_variants[0]);

const struct cu_variant *cu_variant(const char *name)
{
	for (size_t i = 0; i < cu_nvariants; i++)
		if (!strcmp(cu_variants[i].name, name))
			return &cu_variants[i];
	fail_msg("no crash variant named \"%s\"", name);
	return NULL;
}

unsigned char cu_old[CU_OLD_LEN];
unsigned char cu_new[CU_NEW_LEN];

/* The mode a new file gets: 0666 less this umask. */
#define CU_UMASK 022

void cu_init(void)
{
	/* Both patterns hold NUL bytes, so a text comparison would stop
	   early; and no prefix of NEW equals OLD. */
	for (size_t i = 0; i < CU_OLD_LEN; i++)
		cu_old[i] = (unsigned char)(i * 7 + 3);
	for (size_t i = 0; i < CU_NEW_LEN; i++)
		cu_new[i] = (unsigned char)((i * 13 + 101) ^ 0x5a);
	umask(CU_UMASK);
}

static const char *target_path(const struct cu_variant *v)
{
	switch (v->layout) {
	case CU_MKDIR:
		return "a/b/target";
	case CU_SYMLINK:
		return "link";
	default:
		return "target";
	}
}

static void put(int dirfd, const char *name, const void *buf, size_t len,
                mode_t mode)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	                mode);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len ||
	    fchmod(fd, mode) < 0 || close(fd) < 0)
		fail_msg("fixture %s: %s", name, strerror(errno));
}

static int set_attr(int dirfd, const char *key, const char *value)
{
	int fd = openat(dirfd, "target", O_RDONLY | O_CLOEXEC);
	int r = fd < 0 ? -1 : fsetxattr(fd, key, value, strlen(value), 0);

	if (fd >= 0)
		close(fd);
	return r;
}

/* Whether the target carries the attributes the fixture gave OLD. */
static bool has_attrs(int dirfd)
{
	char a[16] = "", b[16] = "";
	int fd = openat(dirfd, "target", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	bool ok = fgetxattr(fd, "user.crash", a, sizeof(a)) == 4 &&
	          fgetxattr(fd, "user.second", b, sizeof(b)) == 3 &&
	          !memcmp(a, "attr", 4) && !memcmp(b, "2nd", 3);
	close(fd);
	return ok;
}

int cu_prepare(const struct cu_variant *v, const char *path)
{
	tu_rmtree(path);
	if (mkdir(path, 0755) < 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	if (v->layout == CU_SYMLINK) {
		put(dirfd, "real", cu_old, CU_OLD_LEN, CU_OLD_MODE);
		if (symlinkat("real", dirfd, "link") < 0)
			fail_msg("symlink: %s", strerror(errno));
	} else if (v->old) {
		put(dirfd, "target", cu_old, CU_OLD_LEN, CU_OLD_MODE);
	}
	if ((v->extra & CU_XATTRS) && v->old &&
	    (set_attr(dirfd, "user.crash", "attr") < 0 ||
	     set_attr(dirfd, "user.second", "2nd") < 0))
		fail_msg("setxattr fixture: %s", strerror(errno));
	if ((v->extra & CU_FOREIGN_OWNER) && geteuid() == 0 &&
	    fchownat(dirfd, "target", CU_FOREIGN_UID, CU_FOREIGN_GID,
	             AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("chown fixture: %s", strerror(errno));
	return dirfd;
}

/* Raise or lower one capability in the effective set (it stays in the
   permitted set, so it can come back). No-op for a caller without it. */
static void effective_cap(int cap, bool on)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	uint32_t bit = 1u << (cap % 32);

	if (syscall(SYS_capget, &h, d) < 0)
		fail_msg("capget: %s", strerror(errno));
	if (!(d[cap / 32].permitted & bit))
		return;
	if (on)
		d[cap / 32].effective |= bit;
	else
		d[cap / 32].effective &= ~bit;
	if (syscall(SYS_capset, &h, d) < 0)
		fail_msg("capset: %s", strerror(errno));
}

static int write_new(const struct cu_variant *v, int dirfd,
                     struct fsafe_error *err);

/*
 * A layer over whatever table is in force (the fault layer's, usually)
 * that gives up CAP_DAC_READ_SEARCH just before linkat(AT_EMPTY_PATH).
 * Since Linux 6.10 that call also works for the stage's opener when its
 * credentials are unchanged, so dropping the capability before the write
 * would not be enough: changing the credentials between open and link is
 * what makes the kernel refuse (ENOENT), as it refuses any unprivileged
 * caller on older kernels, and sends the writer down its /proc path.
 */
static const struct fsafe_sys *below;
static struct fsafe_sys layer;

static int linkat_without_cap(int olddirfd, const char *old, int newdirfd,
                              const char *new_, int flags)
{
	if (flags & AT_EMPTY_PATH)
		effective_cap(CAP_DAC_READ_SEARCH, false);
	return below->linkat(olddirfd, old, newdirfd, new_, flags);
}

static ssize_t listxattrat_missing(int dirfd, const char *path,
                                   unsigned at_flags, char *list, size_t n)
{
	(void)dirfd, (void)path, (void)at_flags, (void)list, (void)n;
	errno = ENOSYS;
	return -1;
}

static ssize_t getxattrat_missing(int dirfd, const char *path,
                                  unsigned at_flags, const char *name,
                                  void *value, size_t n)
{
	(void)dirfd, (void)path, (void)at_flags, (void)name, (void)value;
	(void)n;
	errno = ENOSYS;
	return -1;
}

static ssize_t pwritev2_without_flags(int fd, const struct iovec *iov,
                                      int iovcnt, off_t off, int flags)
{
	(void)fd, (void)iov, (void)iovcnt, (void)off, (void)flags;
	errno = EOPNOTSUPP;
	return -1;
}

int cu_write(const struct cu_variant *v, int dirfd, struct fsafe_error *err)
{
	if (!(v->extra & (CU_NO_FLINK_CAP | CU_NO_XATTRAT | CU_NO_RWF_DSYNC)))
		return write_new(v, dirfd, err);
	below = fsafe__sys_current;
	layer = *below;
	if (v->extra & CU_NO_FLINK_CAP)
		layer.linkat = linkat_without_cap;
	if (v->extra & CU_NO_XATTRAT) {
		layer.listxattrat = listxattrat_missing;
		layer.getxattrat = getxattrat_missing;
	}
	if (v->extra & CU_NO_RWF_DSYNC)
		layer.pwritev2 = pwritev2_without_flags;
	fsafe__sys_swap(&layer);
	int r = write_new(v, dirfd, err);
	fsafe__sys_swap(below);
	if (v->extra & CU_NO_FLINK_CAP)
		effective_cap(CAP_DAC_READ_SEARCH, true);
	return r;
}

static int write_new(const struct cu_variant *v, int dirfd,
                     struct fsafe_error *err)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.flags = v->flags;
	o.error = err;
	if (!v->managed)
		return fsafe_write_fileat(dirfd, target_path(v), cu_new,
		                          CU_NEW_LEN, &o);

	/* Uneven chunks, a one-byte one among them, so a short write or a
	   retried write lands in the middle of the file. */
	static const size_t chunk[] = { 1, 2999, 1000, CU_NEW_LEN - 4000 };
	fsafe_writer *w;
	size_t off = 0;
	int first = 0;
	int r = fsafe_writer_open(dirfd, target_path(v), &o, &w);

	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(chunk) / sizeof(chunk[0]); i++) {
		r = fsafe_writer_write(w, cu_new + off, chunk[i]);
		if (r < 0 && !first)
			first = r;
		off += chunk[i];
	}
	if (v->extra & CU_ABORT) {
		fsafe_writer_abort(w);
		return first;
	}
	r = fsafe_writer_commit(w);
	return first && r != first ? CU_EMISMATCH : r;
}

const char *cu_content_name(enum cu_content c)
{
	static const char *const n[] = { "absent", "OLD", "NEW", "other" };
	return n[c];
}

/* Classify the regular file `name` in `dirfd`; its stat to *out. */
static enum cu_content content_of(int dirfd, const char *name,
                                  struct stat *out)
{
	unsigned char buf[CU_NEW_LEN + 1];
	struct stat st;
	size_t len = 0;
	ssize_t n;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? CU_ABSENT : CU_OTHER;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return CU_OTHER;
	}
	*out = st;
	while (len < sizeof(buf) &&
	       (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (len == CU_OLD_LEN && memcmp(buf, cu_old, len) == 0)
		return CU_OLD;
	if (len == CU_NEW_LEN && memcmp(buf, cu_new, len) == 0)
		return CU_NEW;
	return CU_OTHER;
}

static void problem(struct cu_state *s, const char *fmt, ...)
{
	va_list ap;

	if (s->problem)
		return; /* the first one is the interesting one */
	va_start(ap, fmt);
	vsnprintf(s->buf, sizeof(s->buf), fmt, ap);
	va_end(ap);
	s->problem = s->buf;
}

/*
 * List `dirfd`, sorting names into: staging names (recorded), the names in
 * `allowed` (returned as a bit set), and strays (a problem).
 */
static unsigned list_dir(int dirfd, const char *const *allowed,
                         struct cu_state *s)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	unsigned seen = 0;

	if (!d) {
		problem(s, "cannot list: %s", strerror(errno));
		return 0;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		bool known = false;

		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		for (unsigned i = 0; allowed[i]; i++)
			if (!strcmp(n, allowed[i])) {
				seen |= 1u << i;
				known = true;
			}
		if (known)
			continue;
		if (!fsafe_is_staging_name(n))
			problem(s, "stray name \"%s\"", n);
		else if (s->nstaging == CU_MAX_STAGING)
			problem(s, "more than %d staging files", CU_MAX_STAGING);
		else
			strcpy(s->staging[s->nstaging++], n);
	}
	closedir(d);
	return seen;
}

static mode_t new_file_mode(const struct cu_variant *v)
{
	/* An existing regular target passes its mode on; a new file (or one
	   replacing a symlink) gets the default less the umask. */
	if (v->old && !(v->layout == CU_SYMLINK && (v->flags & FSAFE_NO_FOLLOW)))
		return CU_OLD_MODE;
	return 0666 & ~CU_UMASK;
}

static bool is_link_to_real(int dirfd)
{
	char buf[16];
	ssize_t n = readlinkat(dirfd, "link", buf, sizeof(buf));
	return n == 4 && memcmp(buf, "real", 4) == 0;
}

static void observe_symlink(const struct cu_variant *v, int dirfd,
                            struct cu_state *s, struct stat *st)
{
	static const char *const names[] = { "link", "real", NULL };
	unsigned seen = list_dir(dirfd, names, s);
	struct stat real_st = { 0 };
	enum cu_content real = content_of(dirfd, "real", &real_st);

	if (seen != 3u)
		problem(s, "link or real is gone");
	if (!(v->flags & FSAFE_NO_FOLLOW)) {
		/* The write goes through the link to the file it names. */
		if (!is_link_to_real(dirfd))
			problem(s, "the symlink was changed");
		s->content = real;
		*st = real_st;
		return;
	}
	/* The link itself is replaced; the file it named is left alone. */
	if (real != CU_OLD || (real_st.st_mode & 07777) != CU_OLD_MODE)
		problem(s, "NO_FOLLOW changed the file behind the link (%s)",
		        cu_content_name(real));
	if (is_link_to_real(dirfd))
		s->content = CU_OLD;
	else
		s->content = content_of(dirfd, "link", st);
}

static void observe_mkdir(int dirfd, struct cu_state *s, struct stat *st)
{
	static const char *const a[] = { "a", NULL };
	static const char *const b[] = { "b", NULL };
	static const char *const target[] = { "target", NULL };
	struct cu_state none = { 0 };

	s->content = CU_ABSENT;
	/* Staging files belong beside the target only: a stage in a parent
	   counts as a stray. */
	if (!list_dir(dirfd, a, &none))
		goto strays;
	int da = openat(dirfd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (da < 0) {
		problem(s, "a is not a directory");
		return;
	}
	if (list_dir(da, b, &none)) {
		int db = openat(da, "b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (db < 0) {
			problem(s, "a/b is not a directory");
		} else {
			s->stagedir = "a/b";
			if (list_dir(db, target, s))
				s->content = content_of(db, "target", st);
			close(db);
		}
	}
	close(da);
strays:
	if (none.nstaging || none.problem)
		problem(s, "stray name in a parent directory (%s)",
		        none.problem ? none.problem : none.staging[0]);
}

void cu_observe(const struct cu_variant *v, int dirfd, struct cu_state *s)
{
	static const char *const plain[] = { "target", NULL };
	struct stat st = { 0 };
	mode_t mode;

	memset(s, 0, sizeof(*s));
	s->stagedir = ".";
	s->content = CU_ABSENT;
	switch (v->layout) {
	case CU_SYMLINK:
		observe_symlink(v, dirfd, s, &st);
		break;
	case CU_MKDIR:
		observe_mkdir(dirfd, s, &st);
		break;
	default:
		if (list_dir(dirfd, plain, s))
			s->content = content_of(dirfd, "target", &st);
	}
	mode = st.st_mode & 07777;
	if (s->content == CU_NEW && (v->extra & CU_FOREIGN_OWNER) &&
	    geteuid() == 0 &&
	    (st.st_uid != CU_FOREIGN_UID || st.st_gid != CU_FOREIGN_GID))
		problem(s, "NEW is owned by %u:%u, not by OLD's owner",
		        (unsigned)st.st_uid, (unsigned)st.st_gid);
	if (s->content == CU_NEW && mode != new_file_mode(v))
		problem(s, "NEW has mode %04o, expected %04o", (unsigned)mode,
		        (unsigned)new_file_mode(v));
	if (s->content == CU_OLD && v->layout == CU_PLAIN &&
	    mode != CU_OLD_MODE)
		problem(s, "OLD lost its mode (%04o)", (unsigned)mode);
	if ((v->extra & CU_XATTRS) && s->content != CU_ABSENT &&
	    !has_attrs(dirfd))
		problem(s, "%s lacks OLD's extended attributes",
		        cu_content_name(s->content));
}

const char *cu_sweep_check(const struct cu_variant *v, int dirfd,
                           const struct cu_state *s, char *buf, size_t len)
{
	fsafe_sweep_result *res = NULL;
	struct cu_state after;
	int r = fsafe_sweep(dirfd, s->stagedir, 0, 0, NULL, &res);
	size_t n = fsafe_sweep_result_count(res);
	const char *why = NULL;

	if (r != s->nstaging || n != (size_t)s->nstaging) {
		snprintf(buf, len, "sweep returned %d (%zu names), expected %d",
		         r, n, s->nstaging);
		why = buf;
	}
	for (size_t i = 0; i < n && !why; i++) {
		const char *name = fsafe_sweep_result_name(res, i);
		bool found = false;
		for (int j = 0; j < s->nstaging; j++)
			found |= !strcmp(name, s->staging[j]);
		if (!found) {
			snprintf(buf, len, "sweep removed unexpected %s", name);
			why = buf;
		}
	}
	fsafe_sweep_result_free(res);
	if (why)
		return why;
	cu_observe(v, dirfd, &after);
	if (after.nstaging || after.problem || after.content != s->content) {
		snprintf(buf, len, "after the sweep: %d staging, %s, %s",
		         after.nstaging, cu_content_name(after.content),
		         after.problem ? after.problem : "no other problem");
		return buf;
	}
	return NULL;
}

void cu_count(const struct cu_variant *v, const char *scratch,
              struct cu_trace *t)
{
	char path[4096];
	struct cu_state s;
	struct fsafe_error err = { 0 };

	snprintf(path, sizeof(path), "%s/count", scratch);
	int dirfd = cu_prepare(v, path);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	int r = cu_write(v, dirfd, &err);
	t->calls = fault_calls();
	fault_remove();
	if (r != 0)
		fail_msg("%s: clean write failed: %d (%s at %s)", v->name, r,
		         fsafe_strerror(r), err.step ? err.step : "?");
	if (t->calls > CU_MAX_CALLS)
		fail_msg("%s: %d calls, more than the trace holds", v->name,
		         t->calls);
	t->publish = 0;
	for (int i = 1; i <= t->calls; i++) {
		t->name[i] = fault_call_name(i);
		if (!strcmp(t->name[i], "renameat") ||
		    !strcmp(t->name[i], "renameat2") ||
		    !strcmp(t->name[i], "linkat"))
			t->publish = i; /* publication is the last of these */
	}
	if (v->extra & CU_ABORT) {
		if (t->publish)
			fail_msg("%s: an aborted write renamed or linked",
			         v->name);
		t->publish = t->calls + 1;
	}
	if (!t->publish)
		fail_msg("%s: no rename or link in the trace", v->name);
	cu_observe(v, dirfd, &s);
	if (s.content != cu_after(v) || s.nstaging || s.problem)
		fail_msg("%s: clean write left %s, %d staging, %s", v->name,
		         cu_content_name(s.content), s.nstaging,
		         s.problem ? s.problem : "");
	close(dirfd);
	tu_rmtree(path);
}

const char *cu_trace_text(const struct cu_trace *t, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 1; i <= t->calls && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
		                         i > 1 ? " " : "", t->name[i]);
	return buf;
}
