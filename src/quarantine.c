/* Damage reports and the quarantine (quarantine.h). */
#define _GNU_SOURCE
#include "quarantine.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

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

int fsafe__quarantine_open(int dfd, bool sync)
{
	int q = fsafe__open_subdir(dfd, FSAFE__QUARANTINE);

	if (q != -ENOENT)
		return q;
	int r = fsafe__mkdirat(dfd, FSAFE__QUARANTINE, 0700);
	if (r < 0 && r != -EEXIST)
		return r;
	if (r == 0 && sync && (r = fsafe__fsync(dfd)) < 0)
		return r;
	return fsafe__open_subdir(dfd, FSAFE__QUARANTINE);
}

/* Rename without replacing: a name quarantined before keeps its bytes. */
static int move_unique(int dfd, const char *name, int qfd, char *dest,
                       size_t cap)
{
	int r;

	snprintf(dest, cap, "%s", name);
	r = fsafe__renameat2(dfd, name, qfd, dest, RENAME_NOREPLACE);
	for (unsigned i = 1; r == -EEXIST && i < 1000; i++) {
		snprintf(dest, cap, "%.200s.%u", name, i);
		r = fsafe__renameat2(dfd, name, qfd, dest, RENAME_NOREPLACE);
	}
	return r;
}

int fsafe__quarantine_move(int dfd, const char *name, int qfd,
                           const char *why, bool sync, char *dest,
                           size_t cap)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	char reason[NAME_MAX + 32];
	int r = move_unique(dfd, name, qfd, dest, cap);

	if (r < 0)
		return r;
	snprintf(reason, sizeof(reason), "%s" FSAFE__QUARANTINE_REASON, dest);
	wo.flags = FSAFE_NO_FOLLOW | (sync ? 0 : FSAFE_NO_SYNC);
	/* The reason is a courtesy: the bytes are safe without it. */
	fsafe_write_fileat(qfd, reason, why, strlen(why), &wo);
	if (!sync)
		return 0;
	if ((r = fsafe__fsync(qfd)) < 0)
		return r;
	return fsafe__fsync(dfd);
}
