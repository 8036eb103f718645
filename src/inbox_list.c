/*
 * fsafe_inbox_list(): what an inbox holds, read without changing it and
 * without opening anything but its directories: a FIFO or a symbolic link
 * where a message belongs is reported as a stray, never opened or
 * followed, so listing a damaged inbox neither blocks nor leaves it.
 */
#define _GNU_SOURCE
#include "inbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sys.h"

struct walk {
	fsafe_inbox_list_fn fn;
	void *arg;
};

/* What a non-regular entry is, in the words a stray is reported with. */
static const char *type_name(mode_t mode)
{
	return S_ISLNK(mode)    ? "symbolic link, not followed"
	       : S_ISDIR(mode)  ? "directory"
	       : S_ISFIFO(mode) ? "FIFO"
	       : S_ISSOCK(mode) ? "socket"
	                        : "device";
}

/* One file of a listed directory: typed by an fstatat that does not
   follow it, the only look the file itself gets. */
static int report(const struct walk *w, int dfd, const char *name,
                  struct fsafe_inbox_entry *e)
{
	struct stat st;
	int r = fsafe__fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);

	if (r == -ENOENT)
		return 0; /* taken or acknowledged while we read */
	if (r < 0)
		return r;
	e->name = name;
	e->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	if (e->state != FSAFE_INBOX_QUARANTINED) {
		if (!S_ISREG(st.st_mode))
			e->problem = type_name(st.st_mode);
		else if (!fsafe__inbox_valid_id(name))
			e->problem = "not a message id";
		if (e->problem)
			e->state = FSAFE_INBOX_STRAY;
	}
	return w->fn(e, w->arg);
}

/* A directory of the layout (or a consumer's) that is missing or is no
   directory, as a stray named by what stands there instead
   (O_DIRECTORY|O_NOFOLLOW answers ENOTDIR for a link as for a file). */
static int report_dir(const struct walk *w, int dfd, const char *parent,
                      const char *name, int err)
{
	struct fsafe_inbox_entry e = {
		.name = name,
		.state = FSAFE_INBOX_STRAY,
		.dir = parent,
		.problem = "missing",
	};
	struct stat st;

	/* Anything else (EACCES, EMFILE, EIO) is no verdict on the layout. */
	if (err != -ENOENT && err != -ENOTDIR && err != -ELOOP)
		return err;
	if ((err == -ENOTDIR || err == -ELOOP) &&
	    fsafe__fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		e.problem = S_ISREG(st.st_mode) ? "regular file, not a "
		                                  "directory"
		                                : type_name(st.st_mode);
	return w->fn(&e, w->arg);
}

static bool is_reason(const char *name)
{
	size_t n = strlen(name);

	return n > 7 && !strcmp(name + n - 7, ".reason");
}

/* Every file of directory dfd as `proto` says (state, dir, consumer). */
static int list_files(const struct walk *w, int dfd,
                      const struct fsafe_inbox_entry *proto)
{
	struct fsafe__dir d;
	const char *name;
	unsigned char type;
	int r;

	fsafe__dir_init(&d, dfd);
	while ((r = fsafe__dir_next(&d, &name, &type)) > 0) {
		struct fsafe_inbox_entry e = *proto;
		bool quarantined = proto->state == FSAFE_INBOX_QUARANTINED;

		if (fsafe_is_staging_name(name) ||
		    (quarantined && is_reason(name)) ||
		    (proto->state == FSAFE_INBOX_CLAIMED &&
		     !strcmp(name, "owner")))
			continue;
		if ((r = report(w, dfd, name, &e)) != 0)
			return r;
	}
	return r;
}

/* A subdirectory of dfd listed as proto says; a missing one is fine only
   when `optional`. */
static int list_dir(const struct walk *w, int dfd, const char *parent,
                    const char *name, bool optional,
                    const struct fsafe_inbox_entry *proto)
{
	int fd = fsafe__open_subdir(dfd, name);

	if (fd == -ENOENT && optional)
		return 0;
	if (fd < 0)
		return report_dir(w, dfd, parent, name, fd);
	int r = list_files(w, fd, proto);
	fsafe__close(fd);
	return r;
}

/* claimed/: one directory a consumer, "n-NAME" or a process's p-, b- or
   x-<token>; anything else there is a stray. */
static int list_claimed(const struct walk *w, int ibfd)
{
	struct fsafe__dir d;
	const char *name;
	unsigned char type;
	int cfd = fsafe__open_subdir(ibfd, "claimed"), r;

	if (cfd < 0)
		return report_dir(w, ibfd, "", "claimed", cfd);
	fsafe__dir_init(&d, cfd);
	while ((r = fsafe__dir_next(&d, &name, &type)) > 0) {
		char dir[8 + 2 + FSAFE_INBOX_NAME_MAX + 1];
		struct fsafe_inbox_entry proto = {
			.state = FSAFE_INBOX_CLAIMED,
			.dir = dir,
		};

		if (strlen(name) < 3 || name[1] != '-' ||
		    !strchr("nbpx", name[0]) ||
		    (name[0] == 'n' && !fsafe__inbox_valid_name(name + 2))) {
			struct fsafe_inbox_entry e = {
				.state = FSAFE_INBOX_STRAY,
				.dir = "claimed",
				.problem = "not a consumer's directory",
			};
			if ((r = report(w, cfd, name, &e)) != 0)
				break;
			continue;
		}
		snprintf(dir, sizeof(dir), "claimed/%.*s",
		         2 + FSAFE_INBOX_NAME_MAX, name);
		proto.consumer = name[0] == 'n' ? name + 2 : NULL;
		if ((r = list_dir(w, cfd, "claimed", name, false, &proto)) != 0)
			break;
	}
	fsafe__close(cfd);
	return r;
}

int fsafe_inbox_list(int dirfd, const char *path, fsafe_inbox_list_fn fn,
                     void *arg)
{
	static const struct fsafe_inbox_entry news = {
		.state = FSAFE_INBOX_NEW, .dir = "new",
	};
	static const struct fsafe_inbox_entry quarantine = {
		.state = FSAFE_INBOX_QUARANTINED, .dir = "quarantine",
	};
	const struct walk w = { fn, arg };
	int ibfd, r;

	if (!path || !fn)
		return -EINVAL;
	if ((ibfd = fsafe__open_dir(dirfd, path)) < 0)
		return ibfd;
	if ((r = list_dir(&w, ibfd, "", "new", false, &news)) == 0 &&
	    (r = list_claimed(&w, ibfd)) == 0)
		r = list_dir(&w, ibfd, "", "quarantine", true, &quarantine);
	fsafe__close(ibfd);
	return r;
}
