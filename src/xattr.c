/*
 * The old target's extended attributes onto the stage: user.*, trusted.*,
 * security.*, and the POSIX ACLs (system.posix_acl_*), which the kernel
 * stores as attributes too. Listing them by name in the directory fd
 * (listxattrat, Linux 6.13) costs one system call and no descriptor, so a
 * target without attributes, the common case, pays exactly that call.
 * Older kernels: the target is opened (no-follow, non-blocking: its type
 * was checked, but it may have been swapped since) and listed by fd.
 */
#define _GNU_SOURCE
#include "xattr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

/* The kernel's limits: XATTR_LIST_MAX and XATTR_SIZE_MAX. */
#define LIST_MAX (64 * 1024)
#define VALUE_MAX (64 * 1024)

/* Where the attributes are read from: by name, or through an fd. */
struct source {
	int dirfd;
	const char *name;
	int fd; /* >= 0 once the *at calls proved missing */
};

static ssize_t list(const struct source *s, char *buf, size_t size)
{
	if (s->fd >= 0)
		return fsafe__flistxattr(s->fd, buf, size);
	return fsafe__listxattrat(s->dirfd, s->name, buf, size);
}

static ssize_t get(const struct source *s, const char *key, void *buf,
                   size_t size)
{
	if (s->fd >= 0)
		return fsafe__fgetxattr(s->fd, key, buf, size);
	return fsafe__getxattrat(s->dirfd, s->name, key, buf, size);
}

/* An attribute the caller may not read or set, or one this filesystem
   does not take (a security.* label of another LSM, say). */
static bool denied(ssize_t r)
{
	return r == -EPERM || r == -EACCES || r == -EOPNOTSUPP;
}

/* The names, into `small` or a heap buffer (*heap, freed by the caller). */
static ssize_t list_names(struct source *s, char *small, size_t n,
                          char **heap, const char **step)
{
	ssize_t r = list(s, small, n);

	if (r == -ENOSYS && s->fd < 0) {
		s->fd = fsafe__openat(s->dirfd, s->name,
		                      O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
		if (s->fd < 0) {
			*step = "open";
			return s->fd;
		}
		r = list(s, small, n);
	}
	if (r == -ERANGE) {
		/* More than fits on the stack: the kernel's maximum does. */
		if (!(*heap = malloc(LIST_MAX)))
			return -ENOMEM;
		r = list(s, *heap, LIST_MAX);
	}
	if (r == -EOPNOTSUPP || r == -ENOTSUP)
		return 0; /* a filesystem without attributes */
	if (r < 0)
		*step = "list xattrs";
	return r;
}

/* Copy one attribute; -ENODATA (removed meanwhile) is not an error. */
static int copy_one(const struct source *s, const char *key, int fd,
                    char *small, size_t n, bool skip_denied,
                    const char **step)
{
	char *heap = NULL, *buf = small;
	ssize_t len = get(s, key, buf, n);

	if (len == -ERANGE) {
		if (!(heap = malloc(VALUE_MAX)))
			return -ENOMEM;
		len = get(s, key, buf = heap, VALUE_MAX);
	}
	int r = len == -ENODATA ? 0 : (int)len;
	if (len >= 0)
		r = fsafe__fsetxattr(fd, key, buf, (size_t)len);
	free(heap);
	if (r < 0 && skip_denied && denied(r))
		return 0;
	if (r < 0)
		*step = len < 0 ? "read xattr" : "copy xattr";
	return r < 0 ? r : 1;
}

int fsafe__xattr_copy(int dirfd, const char *name, int fd, bool skip_denied,
                      const char **step)
{
	struct source s = { dirfd, name, -1 };
	char names[1024], value[4096], *heap = NULL;
	ssize_t n = list_names(&s, names, sizeof(names), &heap, step);
	const char *all = heap ? heap : names;
	int copied = 0, r = 0;

	if (n < 0 && skip_denied && denied(n))
		n = 0;
	for (ssize_t i = 0; i < n && r >= 0; i += (ssize_t)strlen(all + i) + 1) {
		r = copy_one(&s, all + i, fd, value, sizeof(value), skip_denied,
		             step);
		copied |= r > 0;
	}
	free(heap);
	if (s.fd >= 0)
		fsafe__close(s.fd);
	if (n < 0)
		return (int)n;
	return r < 0 ? r : copied;
}
