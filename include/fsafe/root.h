/*
 * Contained writes: a root directory that no path can escape.
 *
 * For callers that take relative paths from someone they do not trust (an
 * agent, an archive, a plugin) and must keep every effect beneath one
 * directory. The root is held as a directory descriptor; every operation
 * resolves its path from that descriptor, component by component in the
 * kernel (openat2 with RESOLVE_BENEATH / RESOLVE_IN_ROOT) or, where openat2
 * is missing or refused, in a portable walk with O_PATH|O_NOFOLLOW. A path
 * string is never resolved twice: what was checked is what is used.
 *
 * Paths. A path is relative to the root. Lexical checks come first:
 *   - empty: -EINVAL;  absolute: -EXDEV;  a NUL byte (fsafe_root_check_path,
 *     which takes a length): -EINVAL;  a component over NAME_MAX or a path
 *     of PATH_MAX bytes or more: -ENAMETOOLONG;
 *   - ".." that climbs above the root, counted lexically: -EXDEV (so
 *     "a/../../x" is refused even if "a" is a symbolic link);
 *   - "a//b" and "./a" are accepted and mean "a/b" and "a"; ".." that stays
 *     inside is resolved by the kernel's rules ("a/../x" needs "a");
 *   - a path that ends in "/", "." or ".." names a directory: accepted by
 *     fsafe_root_open_read, fsafe_root_mkdir_all and fsafe_root_sweep,
 *     refused with -EINVAL by the calls that act on a name (write, writer,
 *     unlink, rename). "." is the root itself.
 *
 * Symbolic links, by policy:
 *   - strict (the default): any symbolic link met on the way, the last
 *     component included, is refused with -ELOOP. FSAFE_NO_FOLLOW in the
 *     write options replaces a link at the target itself (the link, inside
 *     the root, is what changes); fsafe_root_unlink and fsafe_root_rename
 *     always act on a link itself.
 *   - FSAFE_ROOT_IN_ROOT_SYMLINKS: links are followed as if the root were
 *     "/" (absolute targets start at the root, ".." stops at it), so they
 *     can point anywhere inside and nowhere outside. A write follows a link
 *     at the target the same way (up to 40 links in all).
 *   /proc "magic" links (/proc/PID/root, /proc/PID/fd/N, ...) are refused
 *   in both policies (-ELOOP); the portable walk refuses every symbolic link
 *   on procfs.
 *
 * Errors. An attempt to leave the root returns -EXDEV, whose step says so:
 * "'..' leaves the root", "absolute path leaves the root", or (with
 * FSAFE_ROOT_NO_XDEV) "mount point refused"; a link refused by policy
 * returns -ELOOP ("symbolic link refused", "magic link refused", "too many
 * symbolic links"). Other errors are those of the system calls. The
 * detail goes through the one door of fsafe.h: the `error` of the
 * fsafe_root_opts the root was opened with is filled by every failing
 * call on the root, and by the later calls of a writer made from it whose
 * own write options name no `error`. A step about a component names it,
 * as in "symbolic link refused (component 'l')"; that text belongs to the
 * root and lives until the next call on it or fsafe_root_close(). The
 * `error` of a call's own write options gets the same code and the bare
 * step (a static string).
 *
 * Known limits:
 *   - A hard link that already exists inside the root to a file outside it
 *     is indistinguishable from any other file: fsafe_root_open_read reads
 *     it. Writes replace the name with a new file, so the outside file is
 *     never modified through it; fsafe_root_unlink removes the name only.
 *   - A mount inside the root is crossed unless FSAFE_ROOT_NO_XDEV is set.
 *   - Whoever can rename directories from inside the root to outside it
 *     (write access to both) can move a directory away while a call holds
 *     it; that is beyond what a path can do and beyond this module.
 *
 * A root handle may be used from one thread at a time (its error detail is
 * per handle); distinct handles on the same directory are independent.
 */
#ifndef FSAFE_ROOT_H
#define FSAFE_ROOT_H

#include "fsafe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_root fsafe_root;

/* Flags of fsafe_root_open(). */
enum {
	/* Follow symbolic links that stay inside, resolved as if the root
	   were "/" (like RESOLVE_IN_ROOT). Default: refuse every link. */
	FSAFE_ROOT_IN_ROOT_SYMLINKS = 1u << 0,
	/* Refuse to cross a mount point below the root (-EXDEV). */
	FSAFE_ROOT_NO_XDEV = 1u << 1,
	/* Never use openat2(); always the portable walk. For systems whose
	   filters mishandle it, and for testing the walk on Linux. */
	FSAFE_ROOT_NO_OPENAT2 = 1u << 2,
};

struct fsafe_root_opts {
	size_t size;               /* sizeof(struct fsafe_root_opts), or 0 */
	unsigned flags;            /* FSAFE_ROOT_* above; 0: strict links */
	/* Optional: filled when the open fails, and kept by the root for
	   every later call on it (see "Errors" above). */
	struct fsafe_error *error;
};

/* The first published layout (0.1.0): what a `size` of 0 means. */
#define FSAFE_ROOT_OPTS_SIZE_V0 \
	(offsetof(struct fsafe_root_opts, error) + sizeof(struct fsafe_error *))

#define FSAFE_ROOT_OPTS_INIT FSAFE__INIT(struct fsafe_root_opts)

/*
 * Open `path` (relative to `dirfd`, resolved normally: the root itself is
 * trusted) as a root. `opts` may be NULL for the defaults. Returns 0 and
 * *out, or a negative errno (-ENOTDIR, -EINVAL for an empty path or
 * unknown flags, -E2BIG, ...; steps "options", "open root").
 */
FSAFE_API int fsafe_root_open(int dirfd, const char *path,
                              const struct fsafe_root_opts *opts,
                              fsafe_root **out);

/* Release the root. NULL is a no-op. */
FSAFE_API void fsafe_root_close(fsafe_root *root);

/*
 * The lexical checks alone, on `len` bytes (a NUL byte among them is
 * -EINVAL): 0 if `path` could name something inside a root, else the
 * error the calls below would return. For paths that arrive with a length
 * (JSON, archives), before they become C strings.
 */
FSAFE_API int fsafe_root_check_path(const char *path, size_t len);

/*
 * fsafe_write_fileat() beneath the root: the same atomic, durable write
 * with every option of fsafe_write_opts (FSAFE_MKDIR creates the missing
 * directories inside the root). The staging file is created in the
 * resolved parent directory, so nothing is created outside, even briefly.
 */
FSAFE_API int fsafe_root_write_file(fsafe_root *root, const char *path,
                                    const void *buf, size_t len,
                                    const struct fsafe_write_opts *opts);

/* fsafe_writer_open() beneath the root; use the fsafe_writer_* calls on
   the result. The writer holds the resolved directory, not the path. */
FSAFE_API int fsafe_root_writer_open(fsafe_root *root, const char *path,
                                     const struct fsafe_write_opts *opts,
                                     fsafe_writer **out);

/*
 * Open a regular file or a directory beneath the root for reading: returns
 * a descriptor opened O_RDONLY|O_CLOEXEC|O_NOCTTY, or a negative errno.
 * Anything else a hostile tree may hold (a FIFO that would block, a device
 * whose open has effects, a socket) is refused with -EINVAL, unopened.
 */
FSAFE_API int fsafe_root_open_read(fsafe_root *root, const char *path);

/* Flags of the calls below. */
enum {
	/* Skip the directory syncs (the change may not survive a crash). */
	FSAFE_ROOT_OP_NO_SYNC = 1u << 0,
	/* fsafe_root_unlink: remove an empty directory instead of a file. */
	FSAFE_ROOT_OP_RMDIR = 1u << 1,
	/* fsafe_root_rename: -EEXIST if `to` exists (needs renameat2). */
	FSAFE_ROOT_OP_NOREPLACE = 1u << 2,
};

/*
 * Create directory `path` and its missing parents beneath the root, each
 * with `mode` (0 means 0777) less the umask, each made durable. 0 if it
 * exists already as a directory. Like mkdir -p, a dangling symbolic link
 * on the way is not a missing directory: -ENOENT (FSAFE_MKDIR writes too).
 */
FSAFE_API int fsafe_root_mkdir_all(fsafe_root *root, const char *path,
                                   mode_t mode, unsigned flags);

/* Remove the name `path` beneath the root (a link, never its target). */
FSAFE_API int fsafe_root_unlink(fsafe_root *root, const char *path,
                                unsigned flags);

/* Rename `from` to `to`, both beneath the root (links are moved, never
   followed), then sync both directories. */
FSAFE_API int fsafe_root_rename(fsafe_root *root, const char *from,
                                const char *to, unsigned flags);

/* fsafe_sweep() of directory `path` beneath the root. */
FSAFE_API int fsafe_root_sweep(fsafe_root *root, const char *path,
                               uint64_t older_than_ms, unsigned flags,
                               const fsafe_cancel *cancel,
                               fsafe_sweep_result **result);

#ifdef __cplusplus
}
#endif

#endif /* FSAFE_ROOT_H */
