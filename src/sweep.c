/*
 * Sweep of abandoned staging files and staging-named symbolic links.
 *
 * A candidate must pass, in this order: the public name predicate (cheap,
 * on the directory entry), a no-follow open as a regular file, an OFD lock
 * (a live writer holds one, so failing to get it means "in use"), and the
 * age test on the locked file's mtime. Only then is the name removed, and
 * only if it still names the inode we checked.
 *
 * A staging-named symbolic link is the stage of a crashed fsafe_symlinkat.
 * It is judged by its own lstat, never followed nor opened; it can carry
 * no lock, so its writer's protection is the age test and, for a sweep of
 * age 0, that fsafe_symlinkat starts again when its stage is taken.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fsafe.h"
#include "sys.h"
#include "util.h"

struct fsafe_cancel {
	atomic_int requested;
};

int fsafe_cancel_new(fsafe_cancel **out)
{
	assert(out);
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void fsafe_cancel_request(fsafe_cancel *c)
{
	assert(c);
	atomic_store(&c->requested, 1);
}

bool fsafe_cancel_requested(const fsafe_cancel *c)
{
	return c && atomic_load(&((fsafe_cancel *)c)->requested);
}

void fsafe_cancel_free(fsafe_cancel *c)
{
	free(c);
}

struct fsafe_sweep_result {
	size_t count, cap;
	char **names;
};

size_t fsafe_sweep_result_count(const fsafe_sweep_result *r)
{
	return r ? r->count : 0;
}

const char *fsafe_sweep_result_name(const fsafe_sweep_result *r, size_t i)
{
	return r && i < r->count ? r->names[i] : NULL;
}

void fsafe_sweep_result_free(fsafe_sweep_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		free(r->names[i]);
	free(r->names);
	free(r);
}

static int64_t mtime_ms(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

/* 1 if `name` still leads to the inode judged in `st`; the last check
   before an unlink, so the name of something else is never removed. */
static int still_names(int dirfd, const char *name, const struct stat *st)
{
	struct stat again;
	int r = fsafe__fstatat(dirfd, name, &again, AT_SYMLINK_NOFOLLOW);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	return again.st_dev == st->st_dev && again.st_ino == st->st_ino;
}

/*
 * 1 if `name` (open as `fd`) is an abandoned stage old enough to go. Age
 * first, lock second: a writer's fresh stage is young, so the sweep does
 * not even take its read lock in the moment before the writer locks it.
 */
static int abandoned(int dirfd, const char *name, int fd, int64_t cutoff)
{
	struct stat st;
	int r = fsafe__fstat(fd, &st);

	if (r < 0)
		return r;
	if (!S_ISREG(st.st_mode) || mtime_ms(&st) > cutoff)
		return 0;
	r = fsafe__ofd_lock(fd, F_RDLCK, false);
	if (r == -EAGAIN)
		return 0; /* a live writer holds it */
	if (r == -EINVAL || r == -ENOLCK || r == -EOPNOTSUPP)
		return 0; /* no locks here, so no way to tell: keep it */
	if (r < 0)
		return r;
	return still_names(dirfd, name, &st);
}

/*
 * 1 if the symbolic link `name` is an abandoned link stage old enough to
 * go: its own age, from its lstat, never from what it points to. The
 * re-check is the same as a file's, just before the unlink.
 */
static int link_abandoned(int dirfd, const char *name, int64_t cutoff)
{
	struct stat st;
	int r = fsafe__fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW);

	if (r < 0)
		return r;
	if (!S_ISLNK(st.st_mode) || mtime_ms(&st) > cutoff)
		return 0;
	return still_names(dirfd, name, &st);
}

/* Unlink `name` if `verdict` says it is abandoned (not in a dry run):
   1 removed or would be, 0 kept, <0 error. */
static int remove_if(int dirfd, const char *name, int verdict, bool dry)
{
	if (verdict > 0 && !dry) {
		int r = fsafe__unlinkat(dirfd, name, 0);
		verdict = r < 0 ? r : 1;
	}
	return verdict == -ENOENT ? 0 : verdict;
}

/* 1: removed (or would be, in a dry run); 0: kept; <0: error. */
static int sweep_one(int dirfd, const char *name, unsigned char type,
                     int64_t cutoff, bool dry)
{
	/* A link is never opened; an untyped entry that is one fails the
	   no-follow open with ELOOP before anything is followed. */
	int fd = type == DT_LNK
	                 ? -ELOOP
	                 : fsafe__openat(dirfd, name, O_RDONLY | O_NOFOLLOW |
	                                 O_NONBLOCK | O_NOCTTY, 0);

	if (fd == -ELOOP)
		return remove_if(dirfd, name,
		                 link_abandoned(dirfd, name, cutoff), dry);
	if (fd == -ENOENT || fd == -EACCES)
		return 0; /* vanished, or not ours */
	if (fd < 0)
		return fd;
	int r = remove_if(dirfd, name, abandoned(dirfd, name, fd, cutoff), dry);
	fsafe__close(fd);
	return r;
}

struct sweep {
	const fsafe_cancel *cancel;
	int64_t cutoff;
	bool dry;
	fsafe_sweep_result *res;
};

static int sweep_entry(int fd, const char *name, unsigned char type,
                       void *arg)
{
	struct sweep *s = arg;
	int r;

	if (fsafe_cancel_requested(s->cancel))
		return -ECANCELED;
	if (!fsafe_is_staging_name(name) || (type != DT_REG &&
	    type != DT_LNK && type != DT_UNKNOWN))
		return 0;
	r = sweep_one(fd, name, type, s->cutoff, s->dry);
	return r > 0 ? fsafe__strv_push(&s->res->names, &s->res->count,
	                                &s->res->cap, name)
	             : r;
}

int fsafe_sweep(int dirfd, const char *path, uint64_t older_than_ms,
                unsigned flags, const fsafe_cancel *cancel,
                fsafe_sweep_result **result)
{
	fsafe_sweep_result *res = calloc(1, sizeof(*res));
	/* An age beyond the epoch keeps everything (and must not wrap). */
	int64_t now = fsafe__now_ms();
	int64_t cutoff = older_than_ms > (uint64_t)now ? -1
	                                               : now - (int64_t)older_than_ms;
	int r = 0, fd = -1;

	if (result)
		*result = NULL;
	if (!res) {
		r = -ENOMEM;
		goto out;
	}
	if ((fd = fsafe__open_dir(dirfd, path ? path : ".")) < 0) {
		r = fd;
		goto out;
	}
	struct sweep s = { cancel, cutoff, flags & FSAFE_SWEEP_DRY_RUN, res };
	r = fsafe_cancel_requested(cancel) ? -ECANCELED
	                                   : fsafe__dir_each(fd, sweep_entry, &s);
out:
	if (fd >= 0)
		fsafe__close(fd);
	if (r == 0 && res)
		r = (int)res->count;
	if (result)
		*result = res;
	else
		fsafe_sweep_result_free(res);
	return r;
}
