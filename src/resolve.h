/*
 * The contained path resolver: lexical checks, then resolution of a
 * directory path beneath a root fd by openat2 or by the portable walk.
 * Kept apart from the operations so the fuzzer can drive it alone.
 */
#ifndef FSAFE_RESOLVE_H
#define FSAFE_RESOLVE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Links followed in one resolution, as the kernel allows. */
#define FSAFE__MAX_HOPS 40

struct fsafe__resolver {
	int rootfd;      /* O_RDONLY|O_DIRECTORY */
	unsigned flags;  /* FSAFE_ROOT_* */
	dev_t dev;       /* of the root, for FSAFE_ROOT_NO_XDEV */
	int mnt_id;      /* of the root, or -1 if /proc could not tell */
};

/* Where a resolution stopped. */
struct fsafe__rerr {
	const char *step;
	char component[NAME_MAX + 1];
};

void fsafe__rerr_set(struct fsafe__rerr *e, const char *step,
                     const char *comp, size_t len);

/*
 * A path cut into components. Empty and "." components are dropped; ".."
 * is kept. `dir` says the path ended in "/", "." or "..": it names a
 * directory, not an entry.
 */
struct fsafe__rpath {
	size_t n;
	bool dir;
	char buf[PATH_MAX];       /* the components, NUL-separated */
	const char *comp[PATH_MAX / 2 + 1];
};

/*
 * Lexical checks of a caller's path of `len` bytes, and the split. With
 * `clamp` (a link target in the in-root policy) ".." above the root stays
 * at the root instead of failing, and an absolute path starts at the root.
 */
int fsafe__rpath_parse(struct fsafe__rpath *p, const char *path, size_t len,
                       bool clamp, struct fsafe__rerr *e);

/* Join components [0, n) as "a/b/c" ("." for none) into out[PATH_MAX]. */
int fsafe__rpath_join(const struct fsafe__rpath *p, size_t n,
                      char out[PATH_MAX]);

int fsafe__resolver_init(struct fsafe__resolver *r, int rootfd,
                         unsigned flags);

/* With FSAFE_ROOT_NO_XDEV: -EXDEV unless `fd` (stat `st`) is on the
   root's mount. */
int fsafe__resolver_check_mount(const struct fsafe__resolver *r, int fd,
                                const struct stat *st);

/*
 * Open directory components [0, n) of `p` beneath the root, by the
 * resolver's policy: an owned O_RDONLY|O_DIRECTORY fd, or a negative errno
 * with *e naming the step and component.
 */
int fsafe__resolve_dir(const struct fsafe__resolver *r,
                       const struct fsafe__rpath *p, size_t n,
                       struct fsafe__rerr *e);

/* The same, creating missing directories (mode `mode`), each synced
   unless `nosync`. */
int fsafe__resolve_dir_mkdir(const struct fsafe__resolver *r,
                             const struct fsafe__rpath *p, size_t n,
                             mode_t mode, bool nosync,
                             struct fsafe__rerr *e);

/* The two resolvers, for tests that compare them. */
int fsafe__resolve_openat2(const struct fsafe__resolver *r, const char *path,
                           struct fsafe__rerr *e);
int fsafe__resolve_walk(const struct fsafe__resolver *r, const char *path,
                        struct fsafe__rerr *e);

#endif
