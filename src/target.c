/* Resolving a path to (parent directory fd, base name). */
#define _GNU_SOURCE
#include "target.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sys.h"
#include "util.h"

#define MAX_SYMLINK_HOPS 40

int fsafe__check_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', n))
		return -EINVAL;
	return 0;
}

/*
 * Split `path` into its directory part (written to `dir`, "." when there is
 * none) and its last component (returned, pointing into `path`).
 */
static const char *split(const char *path, char dir[PATH_MAX])
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		strcpy(dir, ".");
		return path;
	}
	size_t n = (size_t)(slash - path);
	if (n == 0)
		n = 1; /* "/name": the root directory */
	memcpy(dir, path, n);
	dir[n] = '\0';
	return slash + 1;
}

int fsafe__target_stat(struct fsafe__target *t, const char **step)
{
	int r = fsafe__fstatat(t->dirfd, t->name, &t->st, AT_SYMLINK_NOFOLLOW);

	t->exists = r == 0;
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		*step = "stat";
	return r;
}

int fsafe__target_follow(struct fsafe__target *t, const char **step)
{
	for (int hops = 0;; hops++) {
		int r = fsafe__target_stat(t, step);
		if (r < 0 || !t->exists || !S_ISLNK(t->st.st_mode))
			return r;
		if (hops == MAX_SYMLINK_HOPS) {
			*step = "resolve";
			return -ELOOP;
		}

		char link[PATH_MAX], dir[PATH_MAX];
		ssize_t n = fsafe__readlinkat(t->dirfd, t->name, link, sizeof(link));
		if (n < 0 || (size_t)n >= sizeof(link)) {
			*step = "readlink";
			return n < 0 ? (int)n : -ENAMETOOLONG;
		}
		link[n] = '\0';

		const char *base = split(link, dir);
		if ((r = fsafe__check_name(base)) < 0) {
			*step = "resolve";
			return r;
		}
		int fd = fsafe__open_dir(link[0] == '/' ? AT_FDCWD : t->dirfd, dir);
		if (fd < 0) {
			*step = "open directory";
			return fd;
		}
		fsafe__target_close(t);
		t->dirfd = fd;
		t->borrowed = false;
		strcpy(t->name, base);
	}
}

bool fsafe__target_borrows(int dirfd, const char *path)
{
	return dirfd >= 0 && !strchr(path, '/');
}

int fsafe__target_resolve(int dirfd, const char *path, unsigned how,
                          struct fsafe__target *t, const char **step)
{
	char dir[PATH_MAX];
	int r;

	t->dirfd = -1;
	t->borrowed = false;
	*step = "resolve";
	if (!path || !*path)
		return -EINVAL;
	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;

	const char *base = split(path, dir);
	if ((r = fsafe__check_name(base)) < 0)
		return r;
	strcpy(t->name, base);

	if ((how & FSAFE__TARGET_BORROW) && fsafe__target_borrows(dirfd, path)) {
		t->dirfd = dirfd;
		t->borrowed = true;
	} else if (how & FSAFE__TARGET_MKDIR) {
		bool sync = !(how & FSAFE__TARGET_NOSYNC);
		r = fsafe__mkdir_p(dirfd, dir, 0777, sync, &t->dirfd, step);
		if (r < 0)
			t->dirfd = r;
	} else if ((t->dirfd = fsafe__open_dir(dirfd, dir)) < 0) {
		*step = "open directory";
	}
	if (t->dirfd < 0)
		return t->dirfd;
	if (how & FSAFE__TARGET_FRESH) {
		t->exists = false;
		return 0;
	}

	r = how & FSAFE__TARGET_FOLLOW ? fsafe__target_follow(t, step)
	                               : fsafe__target_stat(t, step);
	if (r < 0)
		fsafe__target_close(t);
	return r < 0 ? r : 0;
}

int fsafe__target_sync_dir(const struct fsafe__target *t)
{
	int r = fsafe__fsync(t->dirfd);

	if (r != -EBADF || !t->borrowed)
		return r;
	/* An O_PATH descriptor: sync the directory through one of ours. */
	int fd = fsafe__open_dir(t->dirfd, ".");
	if (fd < 0)
		return fd;
	r = fsafe__fsync(fd);
	fsafe__close(fd);
	return r;
}

void fsafe__target_close(struct fsafe__target *t)
{
	if (t->dirfd >= 0 && !t->borrowed)
		fsafe__close(t->dirfd);
	t->dirfd = -1;
	t->borrowed = false;
}
