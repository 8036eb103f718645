/*
 * The inbox's check and repair (include/fsafe/inbox.h, "Damage").
 *
 * Both walk the layout in one fixed order (the top directory, new/,
 * claimed/ and each consumer directory, done/), judging every entry by
 * what its name is (lstat, or a no-follow, non-blocking open), never by
 * what a link points to. check only reads. repair moves each damaged entry
 * into quarantine/ on its own, so one bad file never costs a queue, and
 * finishes what a crash left half done: claims of dead consumers go back to
 * new/, an interrupted ack or release loses its leftover claim name.
 */
#define _GNU_SOURCE
#include "inbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "owner.h"
#include "sys.h"
#include "util.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* A staging file older than this is abandoned (the CLI's recover default):
   a live writer's stage is younger, so it is not damage. */
#define STAGE_AGE_S 3600
/* A consumer directory still being born is left alone this long. */
#define BIRTH_GRACE_S 60

enum { NEW, CLAIMED, DONE, QUAR, NSUB };
/* quarantine/ first: every other repair moves things into it. */
static const char *const sub_name[NSUB] = { "new", "claimed", "done",
	                                    "quarantine" };
static const int layout_order[NSUB] = { QUAR, NEW, CLAIMED, DONE };

struct walk {
	fsafe_damage_fn fn;
	void *arg;
	bool repair;
	int found, stop;
	int top, fd[NSUB];   /* -1 when missing or not a directory */
	fsafe_inbox *ib;     /* repair, once the layout is whole */
	time_t now;
	bool sweep;          /* repair: abandoned stages seen in this dir */
};

static int report(struct walk *w, const char *path, const char *what,
                  const char *action, uint64_t lost)
{
	struct fsafe_damage d = { .path = path, .what = what,
	                          .action = action, .lost = lost };

	w->found++;
	if (w->fn && !w->stop)
		w->stop = w->fn(&d, w->arg);
	return w->stop;
}

static void failed(char *buf, size_t len, int r)
{
	snprintf(buf, len, "not repaired: %s", fsafe_strerror(r));
}

/* ---- sorted listing ------------------------------------------------------ */

struct names {
	char **v;
	size_t n;
};

static void names_free(struct names *l)
{
	fsafe__dir_names_free(l->v, l->n);
}

/* The entries of fd, sorted (a stable report order, and a snapshot that
   repair's own moves cannot disturb). */
static int list(int fd, struct names *l)
{
	return fsafe__dir_names(fd, &l->v, &l->n);
}

/* ---- one damaged entry ----------------------------------------------------- */

/* Report `path` (the entry `name` of fd) as `what`; repair moves it into
   quarantine/. */
static int set_aside(struct walk *w, int fd, const char *name,
                     const char *path, const char *what, uint64_t lost)
{
	char action[NAME_MAX + 64], dest[NAME_MAX + 1], why[256];

	if (!w->repair)
		return report(w, path, what, NULL, lost);
	snprintf(why, sizeof(why), "%s: %s\n", path, what);
	int r = fsafe__inbox_quarantine(w->fd[QUAR], fd, name, why, dest);
	if (r < 0)
		failed(action, sizeof(action), r);
	else
		snprintf(action, sizeof(action), "quarantined as quarantine/%s",
		         dest);
	return report(w, path, what, action, lost);
}

/* A file where a message may be: report and set aside what is not one.
   `lost`: what a damaged message costs here (0 in done/). */
static int judge_message(struct walk *w, int fd, const char *name,
                         const char *path, uint64_t lost)
{
	const char *why;
	int r = fsafe__inbox_verify(fd, name, FSAFE_INBOX_MAX_DEFAULT, &why,
	                            NULL, NULL, NULL);

	if (r < 0) {
		char what[128];
		snprintf(what, sizeof(what), "unreadable: %s",
		         fsafe_strerror(r));
		return report(w, path, what, w->repair ? "left in place" : NULL,
		              0);
	}
	if (!why)
		return 0;
	return set_aside(w, fd, name, path,
	                 why, fsafe__inbox_valid_id(name) ? lost : 0);
}

/* A regular staging file (not a FIFO named like one): abandoned when old.
   1 when it was a stage (judged), 0 when it is to be judged as a file. */
static int judge_stage(struct walk *w, int fd, const char *name,
                       const char *path)
{
	struct stat st;
	int r;

	if (!fsafe_is_staging_name(name))
		return 0;
	if ((r = fsafe__fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		return r == -ENOENT; /* a writer published or dropped it */
	if (!S_ISREG(st.st_mode))
		return 0;
	if (w->now - st.st_mtime < STAGE_AGE_S)
		return 1;
	w->sweep |= w->repair;
	report(w, path, "abandoned staging file",
	       w->repair ? "swept (never delivered)" : NULL, 0);
	return 1;
}

/* Repair: sweep the stages judge_stage reported in directory fd, once,
   under the sweep's lock (a live writer's stage is never removed). */
static int sweep_stages(struct walk *w, int fd)
{
	if (!w->sweep)
		return 0;
	w->sweep = false;
	int r = fsafe_sweep(fd, ".", (uint64_t)STAGE_AGE_S * 1000, 0, NULL,
	                    NULL);
	return r < 0 ? r : 0;
}

/* ---- the layout ------------------------------------------------------------- */

/* quarantine/ itself is damaged: it goes under a fresh name into a new
   quarantine/, so not even a damaged quarantine is deleted. */
static int replace_quarantine(struct walk *w, char *action, size_t len)
{
	char aside[32], dest[NAME_MAX + 1];
	uint32_t rnd = 0;
	int r;

	if ((r = fsafe__random(&rnd, sizeof(rnd))) < 0)
		return r;
	snprintf(aside, sizeof(aside), "quarantine.%08x", rnd);
	if ((r = fsafe__renameat2(w->top, "quarantine", w->top, aside,
	                          RENAME_NOREPLACE)) < 0 ||
	    (r = fsafe__mkdirat(w->top, "quarantine", 0777)) < 0 ||
	    (r = fsafe__fsync(w->top)) < 0 ||
	    (w->fd[QUAR] = fsafe__open_subdir(w->top, "quarantine")) < 0)
		return r < 0 ? r : w->fd[QUAR];
	r = fsafe__inbox_quarantine(w->fd[QUAR], w->top, aside,
	                            "quarantine: not a directory\n", dest);
	snprintf(action, len, "recreated; the old one quarantined as "
	         "quarantine/%s", dest);
	return r;
}

static int fix_subdir(struct walk *w, int i, bool missing, const char *what)
{
	char action[NAME_MAX + 96];
	int r = 0;

	if (!w->repair)
		return report(w, sub_name[i], what, NULL, 0);
	if (i == QUAR && !missing) {
		r = replace_quarantine(w, action, sizeof(action));
	} else {
		char dest[NAME_MAX + 1] = "";
		if (!missing && w->fd[QUAR] >= 0)
			r = fsafe__inbox_quarantine(w->fd[QUAR], w->top,
			                            sub_name[i], what, dest);
		else if (!missing)
			r = -ENOTDIR;
		if (r == 0 && (r = fsafe__mkdirat(w->top, sub_name[i],
		                                  0777)) == 0 &&
		    (r = fsafe__fsync(w->top)) == 0)
			r = w->fd[i] = fsafe__open_subdir(w->top, sub_name[i]);
		snprintf(action, sizeof(action), "%s%s%s", "recreated (empty)",
		         *dest ? "; the entry quarantined as quarantine/" : "",
		         dest);
	}
	if (r < 0)
		failed(action, sizeof(action), r);
	return report(w, sub_name[i], what, action, 0);
}

static int check_layout(struct walk *w)
{
	struct names top;
	struct stat st;
	char what[96];
	int r;

	for (int k = 0; k < NSUB && !w->stop; k++) {
		int i = layout_order[k];
		r = fsafe__fstatat(w->top, sub_name[i], &st,
		                   AT_SYMLINK_NOFOLLOW);
		if (r == 0 && S_ISDIR(st.st_mode)) {
			if ((w->fd[i] = fsafe__open_subdir(w->top,
			                                   sub_name[i])) < 0)
				return w->fd[i];
			continue;
		}
		if (r < 0 && r != -ENOENT)
			return r;
		snprintf(what, sizeof(what), r < 0 ? "missing" :
		         "not a directory (%s)", fsafe__inbox_type_name(st.st_mode));
		fix_subdir(w, i, r < 0, what);
	}
	if (w->stop || (r = list(w->top, &top)) < 0)
		return w->stop ? 0 : r;
	for (size_t j = 0; j < top.n && !w->stop; j++) {
		bool known = false;
		for (int i = 0; i < NSUB; i++)
			known |= !strcmp(top.v[j], sub_name[i]);
		if (!known && w->fd[QUAR] >= 0)
			set_aside(w, w->top, top.v[j], top.v[j],
			          "foreign entry", 0);
		else if (!known)
			report(w, top.v[j], "foreign entry",
			       w->repair ? "left in place" : NULL, 0);
	}
	names_free(&top);
	return 0;
}

/* ---- new/ and done/ ---------------------------------------------------------- */

static int check_messages(struct walk *w, int i, uint64_t lost)
{
	struct names l;
	char path[NAME_MAX + 16];
	int r;

	if (w->fd[i] < 0 || w->stop)
		return 0;
	if ((r = list(w->fd[i], &l)) < 0)
		return r;
	for (size_t j = 0; j < l.n && !w->stop; j++) {
		snprintf(path, sizeof(path), "%s/%s", sub_name[i], l.v[j]);
		if (!judge_stage(w, w->fd[i], l.v[j], path))
			judge_message(w, w->fd[i], l.v[j], path, lost);
	}
	names_free(&l);
	return sweep_stages(w, w->fd[i]);
}

/* ---- claimed/ ------------------------------------------------------------------- */

/* A consumer's directory: its kind, a dash, a valid consumer name. */
static bool valid_consumer_dir(const char *name)
{
	return name[0] && strchr("nbpx", name[0]) && name[1] == '-' &&
	       fsafe__inbox_valid_name(name + 2);
}

/*
 * A claim whose id is also in new/ or done/. One inode: a release,
 * recovery or ack that stopped between its link and its unlink; the other
 * name is the one that counts, and repair drops the claim's. Another inode:
 * a copy put there from outside (the claim is the message; a second copy
 * would deliver it twice), which repair quarantines.
 */
static int check_half_move(struct walk *w, int cfd, const char *name,
                           const char *path)
{
	static const int other[] = { NEW, DONE };
	static const char *const what[] = {
		"also in new/ (a release or recovery not finished)",
		"also in done/ (an acknowledgement not finished)",
	};
	char copy[NAME_MAX + 16], why[2 * NAME_MAX + 64];
	struct stat st, o;

	if (fsafe__fstatat(cfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	for (int k = 0; k < 2; k++) {
		int fd = w->fd[other[k]];
		if (fd < 0 || fsafe__fstatat(fd, name, &o,
		                             AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (o.st_ino != st.st_ino || o.st_dev != st.st_dev) {
			snprintf(copy, sizeof(copy), "%s/%s",
			         sub_name[other[k]], name);
			snprintf(why, sizeof(why), "a second copy of %s", path);
			return set_aside(w, fd, name, copy, why, 0);
		}
		if (!w->repair)
			return report(w, path, what[k], NULL, 0);
		int r = fsafe__fsync(fd);
		if (r == 0 && (r = fsafe__unlinkat(cfd, name, 0)) == 0)
			r = fsafe__fsync(cfd);
		return report(w, path, what[k], r < 0 ? "not repaired"
		              : "the claim's name removed", 0);
	}
	return 0;
}

/* The claims in one consumer directory; their number (the whole ones). */
static int check_claims(struct walk *w, int cfd, const char *dir)
{
	struct names l;
	char path[2 * NAME_MAX + 16];
	int r, claims = 0;

	if ((r = list(cfd, &l)) < 0)
		return r;
	for (size_t j = 0; j < l.n && !w->stop; j++) {
		const char *name = l.v[j];
		snprintf(path, sizeof(path), "claimed/%s/%s", dir, name);
		if ((dir[0] != 'n' && !strcmp(name, "owner")) ||
		    judge_stage(w, cfd, name, path))
			continue;
		int before = w->found;
		judge_message(w, cfd, name, path, 1);
		if (w->found == before)
			check_half_move(w, cfd, name, path);
		claims += w->found == before;
	}
	names_free(&l);
	if ((r = sweep_stages(w, cfd)) < 0)
		return r;
	return claims;
}

/* Why a process consumer's claims should go back (NULL: they stay). */
static const char *judge_owner(struct walk *w, int cfd, const char *dir,
                               char *buf, size_t len)
{
	char rec[FSAFE__OWNER_MAX + 1];
	struct fsafe_lock_owner o, self;
	struct stat st;
	int fd = fsafe__open_regular(cfd, "owner", O_RDONLY, NULL);

	if (dir[0] == 'x')
		return "consumer's retirement not finished";
	if (fd == -ENOENT && dir[0] == 'b')
		return fsafe__fstat(cfd, &st) == 0 &&
		       w->now - st.st_mtime > BIRTH_GRACE_S
		               ? "consumer never finished starting" : NULL;
	ssize_t n = fd < 0 ? fd : fsafe__owner_read_raw(fd, rec);
	if (fd >= 0)
		fsafe__close(fd);
	if (n < 0 || n > FSAFE__OWNER_MAX ||
	    fsafe__owner_parse(rec, (size_t)n, &o) < 0) {
		snprintf(buf, len, "owner record %s",
		         n == -ENOENT ? "missing" :
		         n < 0 ? "not a regular file" : "damaged");
		return buf;
	}
	if (fsafe__owner_self(&self, false) < 0 ||
	    fsafe__owner_judge(&o, &self) != FSAFE_OWNER_DEAD)
		return NULL;
	return "consumer is dead";
}

/* A damaged owner record is not deleted with its directory: it goes to
   quarantine/ first (as "owner", or "owner.<random>" beside another). */
static int keep_record(struct walk *w, const char *dir)
{
	char why[NAME_MAX + 64];
	int cfd = fsafe__open_subdir(w->fd[CLAIMED], dir), r;

	if (cfd < 0)
		return cfd;
	snprintf(why, sizeof(why), "claimed/%s/owner: damaged owner record\n",
	         dir);
	r = fsafe__inbox_quarantine(w->fd[QUAR], cfd, "owner", why, NULL);
	fsafe__close(cfd);
	return r == -ENOENT ? 0 : r;
}

static int check_consumer(struct walk *w, const char *dir)
{
	char path[NAME_MAX + 16], why[64], what[128], action[96];
	int cfd, claims;

	snprintf(path, sizeof(path), "claimed/%s", dir);
	if ((cfd = fsafe__open_subdir(w->fd[CLAIMED], dir)) < 0) {
		struct stat st;
		if (fsafe__fstatat(w->fd[CLAIMED], dir, &st,
		                   AT_SYMLINK_NOFOLLOW) < 0)
			return 0; /* gone meanwhile */
		snprintf(what, sizeof(what), "not a directory (%s)",
		         fsafe__inbox_type_name(st.st_mode));
		return set_aside(w, w->fd[CLAIMED], dir, path, what, 0);
	}
	claims = check_claims(w, cfd, dir);
	const char *verdict = dir[0] == 'n' || claims < 0 ? NULL
	                      : judge_owner(w, cfd, dir, why, sizeof(why));
	fsafe__close(cfd);
	if (!verdict || w->stop)
		return claims < 0 ? claims : 0;
	snprintf(what, sizeof(what), "%s (%d claims)", verdict, claims);
	if (!w->repair)
		return report(w, path, what, NULL, 0);
	int r = verdict == why ? keep_record(w, dir) : 0;
	if (r == 0)
		r = w->ib ? fsafe__inbox_return_claims(w->ib, dir) : -ENOENT;
	if (r < 0)
		failed(action, sizeof(action), r);
	else
		snprintf(action, sizeof(action), "%d claims returned to new/%s",
		         r, verdict == why ? "; the record quarantined" : "");
	return report(w, path, what, action, 0);
}

static int check_claimed(struct walk *w)
{
	struct names l;
	char path[NAME_MAX + 16];
	int r;

	if (w->fd[CLAIMED] < 0 || w->stop)
		return 0;
	if ((r = list(w->fd[CLAIMED], &l)) < 0)
		return r;
	for (size_t j = 0; j < l.n && !w->stop && r >= 0; j++) {
		snprintf(path, sizeof(path), "claimed/%s", l.v[j]);
		if (!valid_consumer_dir(l.v[j]))
			set_aside(w, w->fd[CLAIMED], l.v[j], path,
			          "foreign entry (not a consumer)", 0);
		else
			r = check_consumer(w, l.v[j]);
	}
	names_free(&l);
	return r < 0 ? r : 0;
}

/* ---- entry points ---------------------------------------------------------------- */

static int run(int dirfd, const char *path, fsafe_damage_fn fn, void *arg,
               bool repair)
{
	struct walk w = { .fn = fn, .arg = arg, .repair = repair,
	                  .now = time(NULL) };
	int r;

	for (int i = 0; i < NSUB; i++)
		w.fd[i] = -1;
	if (!path || !*path)
		return -EINVAL;
	if ((w.top = fsafe__open_dir(dirfd, path)) < 0)
		return w.top;
	r = check_layout(&w);
	/* Returning claims needs a whole inbox; open fails if it is not. */
	if (r == 0 && repair && !w.stop &&
	    fsafe_inbox_open(w.top, ".", NULL, &w.ib) < 0)
		w.ib = NULL;
	if (r == 0)
		r = check_messages(&w, NEW, 1);
	if (r == 0)
		r = check_claimed(&w);
	if (r == 0)
		r = check_messages(&w, DONE, 0);
	fsafe_inbox_close(w.ib);
	for (int i = 0; i < NSUB; i++)
		if (w.fd[i] >= 0)
			fsafe__close(w.fd[i]);
	fsafe__close(w.top);
	if (r < 0)
		return r;
	return w.stop ? w.stop : w.found;
}

int fsafe_inbox_check(int dirfd, const char *path, fsafe_damage_fn fn,
                      void *arg)
{
	return run(dirfd, path, fn, arg, false);
}

int fsafe_inbox_repair(int dirfd, const char *path, fsafe_damage_fn fn,
                       void *arg)
{
	return run(dirfd, path, fn, arg, true);
}
