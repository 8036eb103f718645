/*
 * Atomic replace of a symbolic link: the new link is made under a staging
 * name beside the old one and renamed over it, so the name always reads
 * the old target or the new one (the `current -> release-42` switch).
 * The publish path is the writer's, with a link for a stage.
 *
 * A link stage cannot hold the lock that keeps sweeps off a file stage. An
 * ordinary sweep's age threshold never reaches it in its short life
 * (symlinkat -> rename), but a sweep of age 0 may remove it: the rename
 * then fails with ENOENT, and the replace starts again under a fresh name.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "error.h"
#include "fsafe.h"
#include "target.h"
#include "writer.h"

/* Attempts before a lost stage is reported: each loss needs a sweep of
   age 0 in the moment between symlinkat and rename, so more than one in
   a row means something else removes the stage. */
#define LINK_ATTEMPTS 4

/* One attempt. 1: the stage was gone at the rename (the writer is
   dropped without a report); otherwise 0 or a negative errno, reported. */
static int replace_once(const char *target, int dirfd, const char *linkpath,
                        const struct fsafe__wopts *o, bool last)
{
	struct fsafe__target t;
	const char *step = "resolve";
	fsafe_writer *w;
	unsigned how = FSAFE__TARGET_BORROW |
	               (o->flags & FSAFE_MKDIR ? FSAFE__TARGET_MKDIR : 0) |
	               (o->flags & FSAFE_NO_SYNC ? FSAFE__TARGET_NOSYNC : 0);
	int r = fsafe__target_resolve(dirfd, linkpath, how, &t, &step);

	if (r < 0) {
		fsafe__error_set(o->error, r, -r, step, false);
		return r;
	}
	if ((r = fsafe__writer_open_link(&t, o, target, &w)) < 0)
		return r;
	fsafe__writer_sync_data(w);
	if (fsafe__writer_publish(w) == -ENOENT && !last) {
		fsafe_writer_abort(w);
		return 1;
	}
	fsafe__writer_sync_dir(w);
	return fsafe__writer_finish(w);
}

int fsafe_symlinkat(const char *target, int dirfd, const char *linkpath,
                    const struct fsafe_write_opts *opts)
{
	struct fsafe__wopts o;
	int r = fsafe__wopts_load_reporting(&o, opts);

	if (r < 0)
		return r;
	if (!target || !*target) {
		fsafe__error_set(o.error, -EINVAL, EINVAL, "options", false);
		return -EINVAL;
	}
	/* The link itself is replaced, never what it points to; a token
	   describes a regular file, so it has no meaning here. */
	o.flags |= FSAFE_NO_FOLLOW;
	o.conditional = false;
	r = 1;
	for (int i = 0; i < LINK_ATTEMPTS && r == 1; i++)
		r = replace_once(target, dirfd, linkpath, &o,
		                 i == LINK_ATTEMPTS - 1);
	return r;
}
