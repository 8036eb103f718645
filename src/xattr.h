/*
 * Extended attributes (and with them POSIX ACLs) of a replaced file.
 */
#ifndef FSAFE_XATTR_H
#define FSAFE_XATTR_H

#include <stdbool.h>

/*
 * Copy every extended attribute of `name` in `dirfd` (a regular file,
 * never followed if it is a link) onto `fd`. With `skip_denied`, an
 * attribute the caller may not read or set is left out instead of failing.
 * 1 if anything was copied, 0 if there was nothing to copy, or a negative
 * errno with *step naming what failed ("list xattrs", "read xattr",
 * "copy xattr", "open").
 */
int fsafe__xattr_copy(int dirfd, const char *name, int fd, bool skip_denied,
                      const char **step);

#endif
