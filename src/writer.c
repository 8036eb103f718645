/*
 * The managed writer and the one publish path every module uses:
 *
 *   stage beside the target (O_TMPFILE, or an exclusive named file)
 *   -> write -> give it a staging name -> data sync
 *   -> publish by rename (or, create-only, by a no-replace rename or link)
 *   -> sync the directory.
 *
 * A managed writer stages with O_TMPFILE where it can: the stage has no
 * name while it is being filled, so a crash in the long part of a write
 * leaves nothing behind. It is linked to a staging name before the data
 * sync, not after: some filesystems (btrfs) only make the data of a linked
 * file durable.
 *
 * A one-shot write stages under a name from the start. Its filling is one
 * write(), so the window O_TMPFILE would close is short, and the unnamed
 * inode costs a journalled trip through the orphan list plus the link
 * (ext4: 3 % of a durable 4 KiB replace, see bench/README.md). A crash
 * there leaves a name the predicate knows and the sweep removes. Knowing
 * the length, it also allocates the space first on large writes: a full
 * disk fails before any data is copied, and the file gets one extent.
 */
#define _GNU_SOURCE
#include "writer.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "opts.h"
#include "random.h"
#include "staging.h"
#include "sys.h"
#include "xattr.h"

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define FSAFE__WRITE_FLAGS                                                     \
	(FSAFE_NO_SYNC | FSAFE_CREATE_ONLY | FSAFE_NO_FOLLOW | FSAFE_MKDIR |   \
	 FSAFE_NO_TMPFILE | FSAFE_NO_RENAMEAT2 | FSAFE_NO_XATTRS |            \
	 FSAFE_XATTRS_BEST_EFFORT | FSAFE_NO_SPLIT_LINKS)

/* One-shot writes from this size on allocate their space first; at 4 KiB
   the extra call showed no gain beyond noise (bench/README.md). */
#define ALLOCATE_MIN (64 * 1024)

/* Attempts at a fresh random name before giving up (each collides with
   probability 2^-96; more than one failure means something else is wrong). */
#define NAME_ATTEMPTS 4

struct fsafe_writer {
	struct fsafe__target t;
	int fd;
	unsigned flags;
	struct fsafe_error *error;
	int err;            /* first failure, sticky */
	int sys_errno;
	const char *step;
	bool named;         /* the stage has a name in t.dirfd */
	bool link_new;      /* unnamed, to be linked at t.name (o.link_new) */
	bool published;
	bool defer_dir_sync;
	bool meta_changed;  /* mode, owner or xattrs set after creation */
	bool synced;        /* all written so far is durable (write_synced) */
	bool xattrs_pending; /* the target's xattrs are still to be copied */
	bool conditional;   /* publish only if the target matches token */
	bool restartable;   /* see fsafe__wopts.restartable */
	bool unverified;    /* a named stage's link not checked after its lock */
	bool lost;          /* ...and the publish found it gone */
	bool on_heap;       /* freed by writer_free (not a one-shot's own) */
	struct fsafe__token token;
	struct stat stage_st; /* a named stage's, taken when it was locked */
	char staging[FSAFE_STAGING_NAME_LEN + 1];
};

int fsafe__wopts_load(struct fsafe__wopts *o,
                      const struct fsafe_write_opts *opts)
{
	struct fsafe_write_opts in;
	int r = FSAFE__OPTS_COPY(&in, opts, FSAFE_WRITE_OPTS_SIZE_V0);

	if (r < 0)
		return r;
	if (in.flags & ~FSAFE__WRITE_FLAGS)
		return -EINVAL;
	o->flags = in.flags;
	o->mode = in.mode ? in.mode : 0666;
	o->error = in.error;
	o->borrow_dirfd = false;
	o->one_shot = false;
	o->length = 0;
	o->restartable = false;
	o->fresh = false;
	o->absent = false;
	o->link_new = false;
	o->conditional = in.if_unchanged != NULL;
	if (o->mode & ~(mode_t)07777)
		return -EINVAL;
	return o->conditional ? fsafe__token_parse(in.if_unchanged, &o->token)
	                      : 0;
}

static int fail(fsafe_writer *w, int r, const char *step)
{
	if (!w->err) {
		w->err = r;
		/* A conflict is no system call's failure: no errno. */
		w->sys_errno = r == FSAFE_ECONFLICT ? 0 : -r;
		w->step = step;
	}
	return w->err;
}

static bool nosync(const fsafe_writer *w)
{
	return w->flags & FSAFE_NO_SYNC;
}

static int new_staging_name(fsafe_writer *w)
{
	uint8_t rnd[FSAFE__STAGING_RANDOM_BYTES];
	int r = fsafe__csprng(rnd, sizeof(rnd));

	if (r < 0)
		return r;
	fsafe__staging_format(rnd, w->staging);
	return 0;
}

static bool tmpfile_unsupported(int r)
{
	return r == -EOPNOTSUPP || r == -EISDIR || r == -EINVAL;
}

/* The sweep skips any stage it cannot lock, so a live writer holds one. */
static int lock_stage(fsafe_writer *w, bool wait)
{
	int r = fsafe__ofd_lock(w->fd, F_WRLCK, wait);

	if (r == -EINVAL || r == -ENOLCK || r == -EOPNOTSUPP)
		return 0; /* no locks on this filesystem: nothing to hold */
	return r < 0 ? fail(w, r, "lock") : 0;
}

/*
 * A named stage exists a moment before it is locked. A sweep in that
 * moment may hold its read lock (so the lock waits for it, briefly), or,
 * with an age of 0, remove the name. The sweep removes only the name it
 * has checked leads to this inode, and nothing else ever names it, so the
 * stage is still ours exactly when it still has a link.
 * 1: held; 0: lost, try another; <0: error.
 */
static int hold_named_stage(fsafe_writer *w)
{
	int r;

	if ((r = lock_stage(w, true)) < 0)
		return r;
	if ((r = fsafe__fstat(w->fd, &w->stage_st)) < 0)
		return fail(w, r, "stat");
	return w->stage_st.st_nlink > 0;
}

/*
 * A restartable writer's stage for a new target: nothing needs its stat,
 * and a sweep that took it before the lock makes the publish fail with
 * ENOENT (nothing else removes or makes that random name), which is when
 * the write starts again.
 */
static bool skip_stage_check(const fsafe_writer *w)
{
	return w->restartable && !(w->t.exists && S_ISREG(w->t.st.st_mode));
}

static int create_named_stage(fsafe_writer *w, mode_t mode)
{
	int excl = FSAFE__BROKEN(FSAFE__BREAK_EXCL) ? 0 : O_EXCL;
	int r = -EEXIST;

	for (int i = 0; i < NAME_ATTEMPTS; i++) {
		if ((r = new_staging_name(w)) < 0)
			return fail(w, r, "getrandom");
		r = fsafe__openat(w->t.dirfd, w->staging,
		                  O_WRONLY | O_CREAT | excl | O_NOFOLLOW, mode);
		if (r == -EEXIST)
			continue;
		if (r < 0)
			break;
		w->fd = r;
		w->named = true;
		if (skip_stage_check(w)) {
			w->unverified = true;
			return lock_stage(w, true);
		}
		if ((r = hold_named_stage(w)) != 0)
			return r < 0 ? r : 0;
		/* A sweep took the name: this inode is nobody's now. */
		w->fd = fsafe__close(w->fd);
		w->named = false;
		r = -EAGAIN;
	}
	return fail(w, r, "open");
}

/* A stage that w->link_new keeps unnamed until the publish links it at
   the target's name needs no lock: no sweep ever sees it. A named one
   (FSAFE_NO_TMPFILE, no O_TMPFILE here) is published as any other. */
static int create_stage(fsafe_writer *w, mode_t mode, bool named)
{
	if (!named && !(w->flags & FSAFE_NO_TMPFILE)) {
		int r = fsafe__openat(w->t.dirfd, ".", O_TMPFILE | O_WRONLY, mode);
		if (r >= 0) {
			w->fd = r;
			/* Unnamed: no sweep can reach it before the lock. */
			return w->link_new ? 0 : lock_stage(w, false);
		}
		if (!tmpfile_unsupported(r))
			return fail(w, r, "open");
	}
	w->link_new = false;
	return create_named_stage(w, mode);
}

/*
 * KEEP_SIZE: the stage's size still grows only with what is written, so
 * a leftover stage shows how far its write got. Where the filesystem
 * cannot allocate ahead, the write allocates as it goes.
 */
static int allocate(fsafe_writer *w, size_t len)
{
	off_t n = (off_t)len;

	if (len < ALLOCATE_MIN || n < 0 || (size_t)n != len)
		return 0; /* small, or beyond off_t: the write will tell */
	int r = fsafe__fallocate(w->fd, FALLOC_FL_KEEP_SIZE, 0, n);
	if (r == -EOPNOTSUPP || r == -ENOSYS || r == -EINVAL)
		return 0;
	return r < 0 ? fail(w, r, "allocate") : 0;
}

/*
 * An existing target keeps its mode, and its owner where we may set it.
 * The stage was created with the target's mode, so usually nothing is
 * left to do; metadata set after creation makes the data sync an fsync,
 * since fdatasync need not make a chmod or chown durable.
 */
static int inherit_metadata(fsafe_writer *w, const struct stat *target)
{
	struct stat st = w->stage_st;
	/* Right after staging, a stage with a name is one whose lock
	   already took its stat (hold_named_stage). */
	int r = w->named ? 0 : fsafe__fstat(w->fd, &st);

	if (r < 0)
		return fail(w, r, "stat");
	/* The stage's owner is what creating it gave us (our ids, or the
	   directory's group where it is set-group-ID): compare with that. */
	bool chowned = false;
	if (st.st_uid != target->st_uid || st.st_gid != target->st_gid) {
		r = fsafe__fchown(w->fd, target->st_uid, target->st_gid);
		if (r < 0 && r != -EPERM)
			return fail(w, r, "chown");
		chowned = r == 0;
	}
	/* A chown may clear set-ID bits, so then the mode is set again. */
	mode_t want = target->st_mode & 07777;
	bool setid = chowned && (want & (S_ISUID | S_ISGID));
	if ((st.st_mode & 07777) != want || setid) {
		if ((r = fsafe__fchmod(w->fd, want)) < 0)
			return fail(w, r, "chmod");
		w->meta_changed = true;
	}
	w->meta_changed |= chowned;
	return 0;
}

const char *fsafe__special_type(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFCHR: return "not a regular file (character device)";
	case S_IFBLK: return "not a regular file (block device)";
	case S_IFIFO: return "not a regular file (fifo)";
	case S_IFSOCK: return "not a regular file (socket)";
	default: return NULL;
	}
}

/* Everything that refuses a target is decided here, before staging: the
   type and the link count come free with the resolution's lstat. */
static int check_target(fsafe_writer *w)
{
	const struct stat *st = &w->t.st;
	const char *special;

	if (!w->t.exists) /* st is not filled in */
		return w->conditional ? fail(w, FSAFE_ECONFLICT, "compare") : 0;
	special = fsafe__special_type(st->st_mode);
	if (S_ISDIR(st->st_mode))
		return fail(w, -EISDIR, "stat");
	if (special)
		return fail(w, -EBADFD, special);
	if (w->flags & FSAFE_CREATE_ONLY)
		return fail(w, -EEXIST, FSAFE__STEP_EXISTS);
	if ((w->flags & FSAFE_NO_SPLIT_LINKS) && S_ISREG(st->st_mode) &&
	    st->st_nlink > 1)
		return fail(w, -EMLINK, "hard links");
	if (w->conditional && !S_ISREG(st->st_mode))
		return fail(w, -EOPNOTSUPP, "compare");
	if (w->conditional && !fsafe__token_matches(&w->token, st))
		return fail(w, FSAFE_ECONFLICT, "compare");
	return 0;
}

/*
 * Extended attributes and ACLs, once the content is complete: a write
 * removes security.capability (the kernel's killpriv), so copied before
 * the data it would be lost. After mode and owner, too: an ACL sets the
 * group bits itself, to what the old file had.
 */
static int inherit_xattrs(fsafe_writer *w)
{
	const char *step = "copy xattr";
	int r;

	w->xattrs_pending = false;
	r = fsafe__xattr_copy(w->t.dirfd, w->t.name, w->fd,
	                      w->flags & FSAFE_XATTRS_BEST_EFFORT, &step);
	if (r < 0)
		return fail(w, r, step);
	if (r > 0) {
		w->meta_changed = true;
		w->synced = false; /* the data is; the attributes are not */
	}
	return 0;
}

/* Everything the writer holds let go of, but its own memory: its error. */
static int writer_release(fsafe_writer *w)
{
	if (w->named && !w->published)
		fsafe__unlinkat(w->t.dirfd, w->staging, 0);
	if (w->fd >= 0)
		fsafe__close(w->fd);
	fsafe__target_close(&w->t);
	return w->err;
}

/* writer_release(), then the writer itself when it is on the heap. The
   one-shot write never comes here: its writer is on its stack (and a
   compiler that inlines this into it warns of a free it cannot rule
   out). */
static int writer_free(fsafe_writer *w)
{
	int err = writer_release(w);

	if (w->on_heap)
		free(w);
	return err;
}

/* A writer in `w` for target `t` (taken over). */
static void writer_init(fsafe_writer *w, struct fsafe__target *t,
                        const struct fsafe__wopts *o)
{
	memset(w, 0, sizeof(*w));
	w->t = *t;
	t->dirfd = -1;
	w->fd = -1;
	w->flags = o->flags;
	w->error = o->error;
	w->conditional = o->conditional;
	w->token = o->token;
	w->restartable = o->restartable;
}

/* A writer for target `t` (taken over, also on failure); NULL: -ENOMEM,
   reported. */
static fsafe_writer *writer_new(struct fsafe__target *t,
                                const struct fsafe__wopts *o)
{
	fsafe_writer *w = malloc(sizeof(*w));

	if (!w) {
		fsafe__target_close(t);
		fsafe__error_set(o->error, -ENOMEM, ENOMEM, "alloc", false);
		return NULL;
	}
	writer_init(w, t, o);
	w->on_heap = true;
	return w;
}

/* Check the target and stage beside it; on failure the writer is
   finished (its error reported, itself freed). */
static int writer_stage(fsafe_writer *w, const struct fsafe__wopts *o)
{
	bool regular = w->t.exists && S_ISREG(w->t.st.st_mode);
	w->xattrs_pending = regular && !(w->flags & FSAFE_NO_XATTRS);
	mode_t mode = regular ? w->t.st.st_mode & 07777 : o->mode;
	/* In the caller's directory fd, the one its caller asked about. */
	w->link_new = o->link_new && !w->t.exists && w->t.borrowed;
	if (check_target(w) < 0 ||
	    create_stage(w, mode, o->one_shot && !w->link_new) < 0 ||
	    (regular && inherit_metadata(w, &w->t.st) < 0) ||
	    (o->one_shot && allocate(w, o->length) < 0))
		return fsafe__writer_finish(w);
	return 0;
}

int fsafe__writer_open_target(struct fsafe__target *t,
                              const struct fsafe__wopts *o,
                              fsafe_writer **out)
{
	fsafe_writer *w = writer_new(t, o);
	int r;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	if ((r = writer_stage(w, o)) < 0)
		return r;
	*out = w;
	return 0;
}

/* A stage that is a symbolic link: made under a fresh staging name. */
static int create_link_stage(fsafe_writer *w, const char *link_target)
{
	int r = -EEXIST;

	for (int i = 0; i < NAME_ATTEMPTS && r == -EEXIST; i++) {
		if ((r = new_staging_name(w)) < 0)
			return fail(w, r, "getrandom");
		r = fsafe__symlinkat(link_target, w->t.dirfd, w->staging);
	}
	if (r < 0)
		return fail(w, r, "symlink");
	w->named = true;
	return 0;
}

int fsafe__writer_open_link(struct fsafe__target *t,
                            const struct fsafe__wopts *o,
                            const char *link_target, fsafe_writer **out)
{
	fsafe_writer *w = writer_new(t, o);

	*out = NULL;
	if (!w)
		return -ENOMEM;
	if (check_target(w) < 0 || create_link_stage(w, link_target) < 0)
		return fsafe__writer_finish(w);
	*out = w;
	return 0;
}

/* Resolve `path` as the options say; a failure is reported. */
static int resolve(int dirfd, const char *path, const struct fsafe__wopts *o,
                   struct fsafe__target *t)
{
	const char *step = "resolve";
	unsigned f = o->flags;
	unsigned how = (f & FSAFE_MKDIR ? FSAFE__TARGET_MKDIR : 0) |
	               (f & FSAFE_NO_SYNC ? FSAFE__TARGET_NOSYNC : 0) |
	               (f & FSAFE_NO_FOLLOW ? 0 : FSAFE__TARGET_FOLLOW) |
	               (o->borrow_dirfd ? FSAFE__TARGET_BORROW : 0) |
	               ((o->fresh && (f & FSAFE_CREATE_ONLY)) || o->absent
	                        ? FSAFE__TARGET_FRESH
	                        : 0);
	int r = fsafe__target_resolve(dirfd, path, how, t, &step);

	if (r < 0)
		fsafe__error_set(o->error, r, -r, step, false);
	return r;
}

int fsafe__writer_open(int dirfd, const char *path,
                       const struct fsafe__wopts *o, fsafe_writer **out)
{
	struct fsafe__target t;
	int r = resolve(dirfd, path, o, &t);

	*out = NULL;
	if (r < 0)
		return r;
	return fsafe__writer_open_target(&t, o, out);
}

/* Load the caller's options; on failure report it where we still can. */
int fsafe__wopts_load_reporting(struct fsafe__wopts *o,
                                const struct fsafe_write_opts *opts)
{
	int r = fsafe__wopts_load(o, opts);

	/* The options are unreadable, so is their error pointer, unless the
	   layout at least holds it. */
	if (r < 0 && opts &&
	    (!opts->size || opts->size >= offsetof(struct fsafe_write_opts,
	                                           error) + sizeof(void *)))
		fsafe__error_set(opts->error, r, -r, "options", false);
	return r;
}

int fsafe_writer_open(int dirfd, const char *path,
                      const struct fsafe_write_opts *opts, fsafe_writer **out)
{
	struct fsafe__wopts o;
	int r = fsafe__wopts_load_reporting(&o, opts);

	assert(out);
	*out = NULL;
	if (r < 0)
		return r;
	return fsafe__writer_open(dirfd, path, &o, out);
}

int fsafe_writer_write(fsafe_writer *w, const void *buf, size_t len)
{
	assert(w);
	if (w->err)
		return w->err;
	if (!buf && len > 0)
		return fail(w, -EINVAL, "write (NULL buffer)");
	int r = fsafe__write_all(w->fd, buf, len);
	w->synced = false;
	return r < 0 ? fail(w, r, "write") : 0;
}

int fsafe__writer_write_synced(fsafe_writer *w, const struct iovec *iov,
                               int n)
{
	const char *step = "write";
	int r = 0;

	if (w->err)
		return w->err;
	for (int i = 0; i < n; i++)
		if (!iov[i].iov_base && iov[i].iov_len > 0)
			return fail(w, -EINVAL, "write (NULL buffer)");
	/* An O_TMPFILE stage is synced only once it has a name (btrfs):
	   that one is written here and synced by sync_data. Not one that is
	   linked at the target's name: that is done only where the link is
	   durable with the inode (fsafe__wopts.link_new). */
	if (fsafe__writer_data_fd(w) < 0 || (!w->named && !w->link_new)) {
		for (int i = 0; i < n && r == 0; i++)
			r = fsafe__write_all(w->fd, iov[i].iov_base,
			                     iov[i].iov_len);
		w->synced = false;
	} else if ((r = fsafe__write_synced(w->fd, iov, n, w->meta_changed,
	                                    &step)) == 0) {
		w->synced = true;
	}
	return r < 0 ? fail(w, r, step) : 0;
}

int fsafe_writer_fd(const fsafe_writer *w)
{
	assert(w);
	return w->fd;
}

/* The unnamed stage linked at `name` in the target's directory. */
static int link_unnamed(const fsafe_writer *w, const char *name)
{
	char proc[64];
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc does not. */
	int r = fsafe__linkat(w->fd, "", w->t.dirfd, name, AT_EMPTY_PATH);

	if (r != -ENOENT && r != -EPERM)
		return r;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", w->fd);
	return fsafe__linkat(AT_FDCWD, proc, w->t.dirfd, name,
	                     AT_SYMLINK_FOLLOW);
}

/* An O_TMPFILE stage given a staging name. */
static int name_stage(fsafe_writer *w)
{
	int r = -EEXIST;

	for (int i = 0; i < NAME_ATTEMPTS && r == -EEXIST; i++) {
		if ((r = new_staging_name(w)) < 0)
			return fail(w, r, "getrandom");
		r = link_unnamed(w, w->staging);
	}
	if (r < 0)
		return fail(w, r, "link");
	w->named = true;
	return 0;
}

/* The stage's content is complete: copy the old target's attributes, and
   give an O_TMPFILE stage a staging name (not one that the publish links
   at the target's name). */
int fsafe__writer_link(fsafe_writer *w)
{
	if (!w->err && w->xattrs_pending)
		inherit_xattrs(w);
	if (w->err || w->named || w->link_new)
		return w->err;
	return name_stage(w);
}

int fsafe__writer_sync_data(fsafe_writer *w)
{
	int r;

	if ((r = fsafe__writer_link(w)) < 0)
		return r;
	int fd = fsafe__writer_data_fd(w);
	if (fd < 0 || w->synced)
		return 0;
	r = w->meta_changed ? fsafe__fsync(fd) : fsafe__fdatasync(fd);
	return r < 0 ? fail(w, r, "fsync") : 0;
}

bool fsafe__writer_needs_fsync(const fsafe_writer *w)
{
	return w->meta_changed;
}

int fsafe__writer_data_fd(const fsafe_writer *w)
{
	if (w->err || nosync(w) || FSAFE__BROKEN(FSAFE__BREAK_DATA_SYNC))
		return -1;
	return w->fd;
}

static int publish_noreplace(fsafe_writer *w)
{
	int r = -ENOSYS;

	if (!(w->flags & FSAFE_NO_RENAMEAT2))
		r = fsafe__renameat2(w->t.dirfd, w->staging, w->t.dirfd,
		                     w->t.name, RENAME_NOREPLACE);
	if (r == 0 || (r != -ENOSYS && r != -EINVAL && r != -EOPNOTSUPP))
		return r;
	/* Portable: link() never replaces; the staging name then goes. A
	   crash in between leaves a second name that the sweep removes. */
	if ((r = fsafe__linkat(w->t.dirfd, w->staging, w->t.dirfd, w->t.name,
	                       0)) < 0)
		return r;
	w->published = true;
	fsafe__unlinkat(w->t.dirfd, w->staging, 0);
	return 0;
}

/*
 * A conditional replace: lock the file now at the name, then compare the
 * file *now at the name* with the token. A writer that waited for the lock
 * while another renamed over the name finds the other's file there and
 * backs off. Returns the locked fd (close it after the rename) or -errno.
 */
static int lock_unchanged(fsafe_writer *w)
{
	struct stat st;
	int fd = fsafe__openat(w->t.dirfd, w->t.name,
	                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	int r = fd;

	if (fd == -ENOENT || fd == -ELOOP)
		return fail(w, FSAFE_ECONFLICT, "compare");
	if (fd < 0)
		return fail(w, fd, "open");
	if ((r = fsafe__flock(fd, LOCK_EX)) < 0) {
		fsafe__close(fd);
		return fail(w, r, "lock");
	}
	r = fsafe__fstatat(w->t.dirfd, w->t.name, &st, AT_SYMLINK_NOFOLLOW);
	if (r == 0 && !fsafe__token_matches(&w->token, &st))
		r = FSAFE_ECONFLICT;
	if (r == -ENOENT)
		r = FSAFE_ECONFLICT;
	if (r < 0) {
		fsafe__close(fd);
		return fail(w, r, r == FSAFE_ECONFLICT ? "compare" : "stat");
	}
	return fd;
}

/* A publish that found no stage: an unverified one was swept before its
   lock (see skip_stage_check). The failure stands as it is, -ENOENT at
   the rename or link, should the caller run out of attempts. */
static void stage_swept(fsafe_writer *w, int r)
{
	w->lost = r == -ENOENT && w->unverified;
}

static int publish_replace(fsafe_writer *w)
{
	int held = w->conditional ? lock_unchanged(w) : -1;

	if (w->err)
		return w->err;
	int r = fsafe__renameat(w->t.dirfd, w->staging, w->t.dirfd, w->t.name);
	if (held >= 0)
		fsafe__close(held); /* drops the lock, after the rename */
	if (r == -EBUSY)
		return fail(w, r, "rename (target is a mount point)");
	stage_swept(w, r);
	return r < 0 ? fail(w, r, "rename") : 0;
}

/*
 * A new target's unnamed stage, its data synced: linked at the name, it is
 * the target in one step (a crash before leaves no name at all). A file
 * that someone put there since the check is replaced as any target is,
 * through a locked staging name; create-only refuses it.
 */
static int publish_link_new(fsafe_writer *w)
{
	int r = link_unnamed(w, w->t.name);

	if (r != -EEXIST || (w->flags & FSAFE_CREATE_ONLY))
		return r < 0 ? fail(w, r, r == -EEXIST ? FSAFE__STEP_EXISTS
		                                       : "link")
		             : 0;
	w->link_new = false;
	if ((r = lock_stage(w, false)) < 0 || (r = name_stage(w)) < 0)
		return r;
	return publish_replace(w);
}

int fsafe__writer_publish(fsafe_writer *w)
{
	int r;
	bool create_only = w->flags & FSAFE_CREATE_ONLY;

	if (w->err)
		return w->err;
	if (w->link_new) {
		if ((r = publish_link_new(w)) < 0)
			return r;
	} else if (create_only) {
		/* A target that appeared since the check: the same refusal. */
		if ((r = publish_noreplace(w)) < 0) {
			stage_swept(w, r);
			return fail(w, r,
			            r == -EEXIST ? FSAFE__STEP_EXISTS : "link");
		}
	} else if ((r = publish_replace(w)) < 0) {
		return r;
	}
	w->named = false;
	w->published = true;
	return 0;
}

bool fsafe__writer_stage_lost(const fsafe_writer *w)
{
	return w->lost;
}

int fsafe__writer_sync_dir(fsafe_writer *w)
{
	if (w->err)
		return w->err;
	if (!fsafe__writer_needs_dir_sync(w) || w->defer_dir_sync)
		return 0;
	int r = fsafe__target_sync_dir(&w->t);
	if (r < 0) {
		/* Some network and FUSE filesystems cannot sync a directory:
		   say so, rather than leave a bare "Invalid argument". */
		fail(w, FSAFE_ENOTDURABLE, r == -EINVAL
		        ? "fsync directory (not supported by the filesystem)"
		        : "fsync directory");
		w->sys_errno = -r;
	}
	return w->err;
}

int fsafe__writer_fail(fsafe_writer *w, int r, const char *step)
{
	return fail(w, r, step);
}

void fsafe__writer_defer_dir_sync(fsafe_writer *w, bool defer)
{
	w->defer_dir_sync = defer;
}

int fsafe__writer_dir_fd(const fsafe_writer *w)
{
	return w->t.dirfd;
}

bool fsafe__writer_dir_borrowed(const fsafe_writer *w)
{
	return w->t.borrowed;
}

bool fsafe__writer_needs_dir_sync(const fsafe_writer *w)
{
	return !w->err && w->published && !nosync(w) &&
	       !FSAFE__BROKEN(FSAFE__BREAK_DIR_SYNC);
}

struct fsafe_error *fsafe__writer_error_out(const fsafe_writer *w)
{
	return w->error;
}

void fsafe__writer_set_error(fsafe_writer *w, struct fsafe_error *error)
{
	w->error = error;
}

/* A failure's detail, reported once, at the end. */
static void writer_report(const fsafe_writer *w)
{
	if (w->err)
		fsafe__error_set(w->error, w->err, w->sys_errno, w->step,
		                 w->published);
}

int fsafe__writer_finish(fsafe_writer *w)
{
	writer_report(w);
	return writer_free(w);
}

int fsafe_writer_commit(fsafe_writer *w)
{
	assert(w);
	fsafe__writer_sync_data(w);
	fsafe__writer_publish(w);
	fsafe__writer_sync_dir(w);
	return fsafe__writer_finish(w);
}

void fsafe_writer_abort(fsafe_writer *w)
{
	if (w)
		writer_free(w);
}

int fsafe__write_oneshot(int dirfd, const char *path, const struct iovec *iov,
                         int n, struct fsafe__wopts o)
{
	struct fsafe__target t;
	fsafe_writer w; /* it ends inside this call: on the stack */
	int r;

	o.borrow_dirfd = true; /* the writer ends before we return */
	o.one_shot = true;
	o.length = 0;
	for (int i = 0; i < n; i++)
		o.length += iov[i].iov_len;
	o.restartable = true;
	for (int i = 0;; i++) {
		if ((r = resolve(dirfd, path, &o, &t)) < 0)
			return r;
		writer_init(&w, &t, &o);
		if ((r = writer_stage(&w, &o)) < 0)
			return r;
		fsafe__writer_write_synced(&w, iov, n);
		fsafe__writer_sync_data(&w);
		fsafe__writer_publish(&w);
		if (!fsafe__writer_stage_lost(&w) || i + 1 == NAME_ATTEMPTS)
			break;
		writer_release(&w); /* a sweep took the stage: again */
	}
	fsafe__writer_sync_dir(&w);
	writer_report(&w);
	return writer_release(&w);
}

int fsafe_write_fileat(int dirfd, const char *path, const void *buf,
                       size_t len, const struct fsafe_write_opts *opts)
{
	struct fsafe__wopts o;
	struct iovec iov = { (void *)buf, len };
	int r = fsafe__wopts_load_reporting(&o, opts);

	if (r < 0)
		return r;
	if (!buf && len > 0) {
		fsafe__error_set(o.error, -EINVAL, EINVAL, "write (NULL buffer)",
		                 false);
		return -EINVAL;
	}
	return fsafe__write_oneshot(dirfd, path, &iov, 1, o);
}

int fsafe_write_file(const char *path, const void *buf, size_t len,
                     const struct fsafe_write_opts *opts)
{
	return fsafe_write_fileat(AT_FDCWD, path, buf, len, opts);
}
