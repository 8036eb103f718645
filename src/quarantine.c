/* Damage reports and the quarantine (quarantine.h). */
#define _GNU_SOURCE
#include "quarantine.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"
#include "util.h"

int fsafe__damage_say(fsafe_damage_fn fn, void *arg, const char *prefix,
                      const char *name, const char *what,
                      const char *action, uint64_t lost)
{
	char path[PATH_MAX];

	if (!fn)
		return 0;
	snprintf(path, sizeof(path), "%s%s", prefix ? prefix : "", name);
	struct fsafe_damage d = { .path = path, .what = what,
		                  .action = action, .lost = lost };
	return fn(&d, arg);
}

/* Private, as fsafe-store(3) and fsafe-lock(3) say: what is quarantined
   (record names are keys, reasons quote content) is for the owner's
   repair, not for every reader of the directory. */
int fsafe__quarantine_open(int dfd, bool sync)
{
	return fsafe__subdir_make(dfd, FSAFE__QUARANTINE, 0700, sync);
}

static int place(int dfd, const char *name, int qfd, const char *dest,
                 bool link)
{
	return link ? fsafe__linkat(dfd, name, qfd, dest, 0)
	            : fsafe__renameat2(dfd, name, qfd, dest, RENAME_NOREPLACE);
}

/* Rename (or link) without replacing: a name quarantined before keeps its
   bytes. */
static int move_unique(int dfd, const char *name, int qfd, bool link,
                       char *dest, size_t cap)
{
	int r;

	snprintf(dest, cap, "%s", name);
	r = place(dfd, name, qfd, dest, link);
	for (unsigned i = 1; r == -EEXIST && i < 1000; i++) {
		snprintf(dest, cap, "%.200s.%u", name, i);
		r = place(dfd, name, qfd, dest, link);
	}
	return r;
}

/* dest's reason beside it, through the writer (unless !sync, its commit
   syncs qfd). */
static int write_reason(int qfd, const char *dest, const char *why,
                        unsigned flags)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	char reason[NAME_MAX + 32];

	snprintf(reason, sizeof(reason), "%s" FSAFE__QUARANTINE_REASON, dest);
	wo.flags = FSAFE_NO_FOLLOW | flags;
	return fsafe_write_fileat(qfd, reason, why, strlen(why), &wo);
}

int fsafe__quarantine_move(int dfd, const char *name, int qfd,
                           const char *why, bool sync, char *dest,
                           size_t cap)
{
	int r = move_unique(dfd, name, qfd, false, dest, cap);

	if (r < 0)
		return r;
	/* The reason is a courtesy: the bytes are safe without it. */
	write_reason(qfd, dest, why, sync ? 0 : FSAFE_NO_SYNC);
	if (!sync)
		return 0;
	if ((r = fsafe__fsync(qfd)) < 0)
		return r;
	return fsafe__fsync(dfd);
}

int fsafe__quarantine_reclaim(int dfd, const char *why, bool sync, int *qfd)
{
	static const char aside[] = FSAFE__QUARANTINE ".damaged";
	char dest[NAME_MAX + 1];
	int r = fsafe__renameat2(dfd, FSAFE__QUARANTINE, dfd, aside,
	                         RENAME_NOREPLACE);

	if (r < 0 || (r = fsafe__quarantine_open(dfd, sync)) < 0)
		return r;
	*qfd = r;
	return fsafe__quarantine_move(dfd, aside, *qfd, why, sync, dest,
	                              sizeof(dest));
}

int fsafe__quarantine_link(int dfd, const char *name, int qfd,
                           const char *why, char *dest, size_t cap)
{
	struct stat st;
	int r = fsafe__fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);

	if (r < 0)
		return r;
	/* A directory has no hard links: it is renamed. */
	bool link = !S_ISDIR(st.st_mode);
	if ((r = move_unique(dfd, name, qfd, link, dest, cap)) < 0)
		return r;
	/* The reason's commit syncs qfd, which then holds both names
	   durably, before the old name goes. A reason already there (or a
	   name too long for one) is kept: qfd is synced instead. */
	r = write_reason(qfd, dest, why, FSAFE_CREATE_ONLY);
	if (r == -EEXIST || r == -ENAMETOOLONG)
		r = fsafe__fsync(qfd);
	if (r < 0 && r != FSAFE_ENOTDURABLE)
		return r;
	r = link ? fsafe__unlinkat(dfd, name, 0) : 0;
	if (r == -ENOENT)
		r = 0;
	return r < 0 ? r : fsafe__fsync(dfd);
}
