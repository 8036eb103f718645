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

static int name_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

int fsafe__dir_names(int dfd, char ***out, size_t *n)
{
	struct fsafe__dir *d = malloc(sizeof(*d));
	int fd = d ? fsafe__open_dir(dfd, ".") : -ENOMEM;
	const char *name;
	unsigned char type;
	char **v = NULL;
	size_t cap = 0;
	int r;

	*n = 0;
	if (fd < 0) {
		free(d);
		return fd;
	}
	fsafe__dir_init(d, fd);
	while ((r = fsafe__dir_next(d, &name, &type)) > 0) {
		if (*n == cap) {
			char **nv = realloc(v, (cap = cap ? 2 * cap : 16) *
			                               sizeof(*v));
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		if (!(v[*n] = strdup(name))) {
			r = -ENOMEM;
			break;
		}
		(*n)++;
	}
	fsafe__close(fd);
	free(d);
	if (*n)
		qsort(v, *n, sizeof(*v), name_cmp);
	*out = v;
	return r;
}

void fsafe__dir_names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
