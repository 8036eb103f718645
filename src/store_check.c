/*
 * Check and repair of a keyed store (include/fsafe/store.h, "Damage"):
 * every entry of its directory judged, a damaged one moved into
 * quarantine/ with its reason, never deleted; the lock's directory judged
 * as a lock directory (lockdir.h). Repair changes records only under the
 * store's lock, so it never quarantines a record a put just replaced.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "fsafe/store.h"
#include "lockdir.h"
#include "store_check.h"
#include "store_lock.h"
#include "sys.h"
#include "util.h"

struct walk {
	int dfd, qfd;
	bool repair;
	fsafe_damage_fn fn;
	void *arg;
	int found;
};

static const char *type_what(mode_t m)
{
	return S_ISLNK(m)    ? "not a directory (symbolic link)"
	       : S_ISREG(m)  ? "not a directory (regular file)"
	       : S_ISFIFO(m) ? "not a directory (FIFO)"
	       : S_ISSOCK(m) ? "not a directory (socket)"
	                     : "not a directory (device)";
}

/* Report one problem; in repair mode quarantine it first. A failed
   quarantine is reported with no action. */
static int problem(struct walk *w, const char *name, const char *what,
                   uint64_t lost)
{
	char dest[NAME_MAX + 1], action[NAME_MAX + 64];
	const char *done = NULL;

	w->found++;
	if (w->repair && w->qfd >= 0 &&
	    fsafe__quarantine_move(w->dfd, name, w->qfd, what, true, dest,
	                           sizeof(dest)) == 0) {
		snprintf(action, sizeof(action), "quarantined as %s/%s",
		         FSAFE__STORE_QUARANTINE, dest);
		done = action;
	}
	return fsafe__damage_say(w->fn, w->arg, "", name, what, done, lost);
}

/* lstat's verdict on a name that must be a directory if present:
   0 fine or absent, 1 something else is there (*st tells what). */
static int want_dir(int dfd, const char *name, struct stat *st)
{
	int r = fsafe__fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW);

	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : !S_ISDIR(st->st_mode);
}

/*
 * Something that is not a directory holds the quarantine's name: it goes
 * into a new quarantine itself. Until the last step it sits at an
 * unknown name, which a later repair would quarantine in turn.
 */
static int requarantine(struct walk *w, const struct stat *st)
{
	const char *what = type_what(st->st_mode);
	int r = fsafe__quarantine_reclaim(w->dfd, what, true, &w->qfd);

	w->found++;
	return fsafe__damage_say(w->fn, w->arg, "", FSAFE__STORE_QUARANTINE,
	                         what, r == 0 ? "moved into a new quarantine/"
	                                      : NULL, 0);
}

static int check_quarantine(struct walk *w)
{
	struct stat st;
	int r = want_dir(w->dfd, FSAFE__STORE_QUARANTINE, &st);

	if (r <= 0 && w->repair)
		w->qfd = fsafe__quarantine_open(w->dfd, true);
	if (r <= 0)
		return r;
	if (w->repair)
		return requarantine(w, &st);
	w->found++;
	return fsafe__damage_say(w->fn, w->arg, "", FSAFE__STORE_QUARANTINE,
	                         type_what(st.st_mode), NULL, 0);
}

/* The lock's directory: a non-directory at its name is quarantined (the
   next change makes a new one); a directory is judged as a lock
   directory. */
static int check_lock_dir(struct walk *w)
{
	struct stat st;
	int r = want_dir(w->dfd, FSAFE__STORE_LOCK_DIR, &st);

	if (r == 1)
		return problem(w, FSAFE__STORE_LOCK_DIR, type_what(st.st_mode),
		               0);
	if (r < 0)
		return r;
	int lfd = fsafe__open_subdir(w->dfd, FSAFE__STORE_LOCK_DIR);
	if (lfd < 0)
		return lfd == -ENOENT ? 0 : lfd;
	r = fsafe__lock_dir_scan(lfd, FSAFE__STORE_LOCK_DIR "/", w->repair,
	                         w->fn, w->arg, &w->found);
	fsafe__close(lfd);
	return r;
}

static int check_entries(struct walk *w)
{
	char **names;
	size_t n;
	int r = fsafe__dir_names(w->dfd, &names, &n);

	for (size_t i = 0; r == 0 && i < n; i++) {
		const char *why = NULL;
		if (strcmp(names[i], FSAFE__STORE_LOCK_DIR) == 0 ||
		    strcmp(names[i], FSAFE__STORE_QUARANTINE) == 0)
			continue;
		r = fsafe__store_classify(w->dfd, names[i], &why);
		if (r > 0)
			r = problem(w, names[i], why,
			            r == FSAFE__STORE_BAD ? 1 : 0);
	}
	fsafe__dir_names_free(names, n);
	return r;
}

static int walk(int dirfd, const char *path, bool repair, fsafe_damage_fn fn,
                void *arg)
{
	struct walk w = { .qfd = -1, .repair = repair, .fn = fn, .arg = arg };
	struct fsafe__store_lock l;
	const char *step;
	int r;

	if (!path || !*path)
		return -EINVAL;
	if ((w.dfd = fsafe__open_dir(dirfd, path)) < 0)
		return w.dfd;
	r = check_quarantine(&w);
	if (r == 0)
		r = check_lock_dir(&w);
	fsafe__store_lock_init(&l);
	if (r == 0 && repair)
		r = fsafe__store_lock_take(&l, w.dfd,
		                           FSAFE_STORE_LOCK_TIMEOUT_MS, &step);
	if (r == 0)
		r = check_entries(&w);
	fsafe__store_lock_close(&l);
	if (w.qfd >= 0)
		fsafe__close(w.qfd);
	fsafe__close(w.dfd);
	return r != 0 ? r : w.found;
}

int fsafe_store_check(int dirfd, const char *path, fsafe_damage_fn fn,
                      void *arg)
{
	return walk(dirfd, path, false, fn, arg);
}

int fsafe_store_repair(int dirfd, const char *path, fsafe_damage_fn fn,
                       void *arg)
{
	return walk(dirfd, path, true, fn, arg);
}
