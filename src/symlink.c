/*
 * Atomic replace of a symbolic link: the new link is made under a staging
 * name beside the old one and renamed over it, so the name always reads
 * the old target or the new one (the `current -> release-42` switch).
 * The publish path is the writer's, with a link for a stage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "error.h"
#include "fsafe.h"
#include "target.h"
#include "writer.h"

int fsafe_symlinkat(const char *target, int dirfd, const char *linkpath,
                    const struct fsafe_write_opts *opts)
{
	struct fsafe__wopts o;
	struct fsafe__target t;
	const char *step = "resolve";
	fsafe_writer *w;
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
	r = fsafe__target_resolve_borrowing(dirfd, linkpath,
	                                    o.flags & FSAFE_MKDIR,
	                                    o.flags & FSAFE_NO_SYNC, false,
	                                    &t, &step);
	if (r < 0) {
		fsafe__error_set(o.error, r, -r, step, false);
		return r;
	}
	if ((r = fsafe__writer_open_link(&t, &o, target, &w)) < 0)
		return r;
	return fsafe_writer_commit(w);
}
