/*
 * fsafe: crash-safe file persistence.
 *
 * Conventions. Every module (this header and those in fsafe/) follows them;
 * a new module starts from them.
 *
 *  Names. fsafe_<module>_<verb>, one prefix; constants FSAFE_<MODULE>_*.
 *  A function that names a file takes `int dirfd, const char *path` first
 *  and resolves `path` relative to `dirfd` (AT_FDCWD works); only the
 *  one-shot writes keep a path-only form beside the `at` one
 *  (fsafe_write_file and fsafe_write_fileat), as POSIX does. Handles open
 *  with fsafe_<module>_open(dirfd, path, opts, &handle) and end with
 *  fsafe_<module>_close(handle).
 *
 *  Results. 0 (or a count) on success; a negative errno value, or one of
 *  the FSAFE_E* codes below, on failure. fsafe_strerror() names either
 *  sign. Bad data (a bad path, unknown flags, a malformed record) is
 *  -EINVAL or the code the header names; a caller bug (a NULL handle or
 *  out pointer) is an assertion, not an error code. The close and free
 *  functions accept NULL.
 *
 *  Error detail. struct fsafe_error (below) says which step failed and
 *  with which errno, through one door: the `error` member of the options
 *  struct. A call that takes options fills *opts->error when it fails
 *  (when the member is set); an open also keeps the pointer, and every
 *  later call on that handle, or on a handle made from it (a consumer, a
 *  reader, a transaction), fills it when that call fails. A successful
 *  call leaves it alone.
 *
 *  Options. `opts` may be NULL for the defaults, and a zeroed struct is
 *  the defaults: every field's 0 is documented. Option structs (and the
 *  out structs the library fills) start with `size_t size` so they can
 *  grow without breaking the ABI: set it to sizeof the struct (the *_INIT
 *  macros do) or 0 for the first published layout, *_SIZE_V0. A size
 *  below *_SIZE_V0 is -EINVAL; a larger struct from a newer header is
 *  accepted when every byte this library does not know is zero, -E2BIG
 *  otherwise (the kernel's rule for open_how).
 *
 *  Ownership. Whatever the library returns through an out pointer
 *  belongs to the caller until passed to the matching _free or _close;
 *  strings handed to a callback live until it returns. Buffers passed in
 *  are only read during the call.
 *
 *  Time. Timeouts are uint64_t milliseconds. FSAFE_FOREVER waits without
 *  limit; a timeout argument of 0 does not wait. In an options struct a
 *  timeout of 0 means its documented default, and not waiting at all is
 *  the module's NO_WAIT flag.
 *
 *  Callbacks. The caller's `void *arg` is the last parameter of every
 *  callback and follows the callback in the call that takes it. A
 *  callback's negative result stops the walk and becomes the call's.
 *
 *  Threads and processes. A handle may be used from one thread at a time;
 *  distinct handles from distinct threads freely. Nothing here prints,
 *  exits, or installs signal handlers. Every descriptor the library opens
 *  is O_CLOEXEC. Threads the library starts (a batch's sync pool without
 *  io_uring, a large batch's window syncs, an fsafe_async's worker, a
 *  checkpoint's load reader, hashing and removal) belong to one call or
 *  one handle and end with it; none touches the caller's state, and each
 *  blocks every signal, so that a process-directed signal goes to one of
 *  the application's threads.
 *
 * Filesystems (power cut at every system call of every workload: the table
 * in docs/DESIGN.md):
 *  - ext4, xfs and btrfs: every guarantee stated here holds.
 *  - overlayfs (containers), over ext4 or xfs: the same, whether the
 *    target starts in the lower layer (the first change copies it up) or
 *    the upper one. O_TMPFILE, renameat2(RENAME_NOREPLACE), fsync of a
 *    merged directory (overlayfs syncs its upper directory) and syncfs
 *    (the upper filesystem) work as on ext4; where a kernel's overlayfs
 *    lacks O_TMPFILE the writer stages under a name, as on any filesystem
 *    without it. One difference: a directory of a lower layer cannot be
 *    renamed (EXDEV, unless mounted with redirect_dir), so the inbox's
 *    recovery leaves such a dead consumer's directory in place, empty.
 *    An overlay mounted with "volatile" skips every sync: no durability
 *    holds there.
 *  - ext2 and other filesystems without a journal: a write that returned
 *    0 survives, and a cut leaves OLD or NEW, as long as the write syncs;
 *    FSAFE_NO_SYNC's "OLD, NEW or NEW's size with data lost" does not
 *    hold (a cut may leave the target missing), and the inbox's claim is
 *    not safe there (see fsafe/inbox.h).
 */
#ifndef FSAFE_H
#define FSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * FSAFE__INIT(struct T): a struct T with every field 0 and `size` set, the
 * value of every *_INIT macro. C++ before C++20 has no designated
 * initialisers (and warns of missing fields), so there it is a function.
 */
#ifdef __cplusplus
extern "C++" {
template <class T> static inline T fsafe__init_cxx()
{
	T t{};
	t.size = sizeof(T);
	return t;
}
}
#define FSAFE__INIT(T) (fsafe__init_cxx<T>())
#else
#define FSAFE__INIT(T) { .size = sizeof(T) }
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(FSAFE_STATIC_BUILD)
#define FSAFE_API __attribute__((visibility("default")))
#else
#define FSAFE_API
#endif

#define FSAFE_VERSION_MAJOR 0
#define FSAFE_VERSION_MINOR 1
#define FSAFE_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH" (of the loaded library). */
FSAFE_API const char *fsafe_version(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * The new content was published (readers see it now), but a sync after
 * publication failed, so whether it survives a power cut is unknown. Every
 * other negative result of a write means: nothing changed at the target.
 */
#define FSAFE_ENOTDURABLE (-16001)

/*
 * A conditional change lost its race: the value (or file) is no longer the
 * version the caller named. Nothing was changed.
 */
#define FSAFE_ECONFLICT (-16002)

/* Wait without limit (a timeout in milliseconds). */
#define FSAFE_FOREVER UINT64_MAX

/*
 * Describes a result: text for FSAFE_E* codes and for errno values of
 * either sign (-ENOSPC and ENOSPC, as fsafe_error.sys_errno holds it, give
 * the same text); "Success" for 0.
 */
FSAFE_API const char *fsafe_strerror(int code);

/*
 * Optional detail of a failed call, for messages such as
 * "write /etc/x: fsync: No space left on device; /etc/x unchanged".
 */
struct fsafe_error {
	int code;          /* the value the call returned */
	int sys_errno;     /* errno of the failed step (differs from code for
	                      FSAFE_ENOTDURABLE) */
	const char *step;  /* static string naming the failed step: "open",
	                      "allocate", "write", "fsync", "link", "rename",
	                      "fsync directory", "mkdir", "resolve", "stat",
	                      "chmod", "list xattrs", "read xattr",
	                      "copy xattr", "hard links", "compare",
	                      "exists (create-only)" (FSAFE_CREATE_ONLY
	                      found the target), ...;
	                      a target that is not a regular file is named
	                      by its type: "not a regular file (character
	                      device)", "... (block device)", "... (fifo)",
	                      "... (socket)"; a rename refused because the
	                      target is a mount point is "rename (target is
	                      a mount point)"; a directory sync the
	                      filesystem does not support is "fsync
	                      directory (not supported by the filesystem)";
	                      a one-shot write syncs its data with the
	                      write (pwritev2 RWF_DSYNC), so its failed
	                      data sync is "write" */
	bool published;    /* the new content is visible at the target */
};

/* ------------------------------------------------------------------------ */
/* Damage: what the stores' check and repair report                          */
/* ------------------------------------------------------------------------ */

/*
 * Every store (keyed store, inbox, spool, checkpoint, lock directory) has
 * a read-only check and a repair of the same shape:
 *
 *     int fsafe_<store>_check(int dirfd, const char *path,
 *                             fsafe_damage_fn fn, void *arg);
 *     int fsafe_<store>_repair(int dirfd, const char *path,
 *                              fsafe_damage_fn fn, void *arg);
 *
 * check changes nothing on disk and returns the number of problems found
 * (0: clean); repair applies the damage rules and returns the number of
 * problems it found and dealt with; both return a negative errno when they
 * could not run. The rules: damaged bytes are never deleted, they go to the
 * store's quarantine with a reason; nothing acknowledged and undamaged is
 * dropped; every loss is reported; no data file is opened in a way that can
 * block or follow a link out of the store. `fn` (may be NULL) is called once
 * per problem, in a stable order; a non-zero return stops the walk and
 * becomes the result. The strings live until `fn` returns.
 */
struct fsafe_damage {
	const char *path;   /* the artifact, relative to the store's root */
	const char *what;   /* what is wrong: "bad frame at offset 200",
	                       "not a regular file (FIFO)", "missing" */
	const char *action; /* repair: what was done ("quarantined as
	                       quarantine/NAME", "salvaged 496 records after
	                       it", "CURRENT rebuilt from gen-2"); check: NULL */
	uint64_t lost;      /* records, keys, messages or generations known to
	                       be lost with it (0 when none or not known) */
};
typedef int (*fsafe_damage_fn)(const struct fsafe_damage *d, void *arg);

/* ------------------------------------------------------------------------ */
/* The staging-name contract                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Every staging file an atomic write leaves behind (after a crash, or when
 * removing the stage itself failed, e.g. on a filesystem turned read-only)
 * is named
 *
 *     .fsafe-<24 lowercase hex digits>.tmp        (96 random bits)
 *
 * in the target's directory. This form is a stable, public contract:
 * changing it is a breaking change of the library (a new major version and a
 * changelog entry). Consumers recognise leftovers only through this predicate,
 * never by copying the pattern.
 *
 * True exactly for a bare file name (no '/') of that form. The lock module's
 * staging files (.lock-<uuid>.tmp) do not match.
 */
FSAFE_API bool fsafe_is_staging_name(const char *name);

/* Length of a staging name, without the terminating NUL. */
#define FSAFE_STAGING_NAME_LEN 35

/* ------------------------------------------------------------------------ */
/* Atomic write                                                              */
/* ------------------------------------------------------------------------ */

enum {
	/* Skip every sync, for caches and scratch data. Still atomic for
	   readers and against a crash of the process (old or new, never a
	   mix); but after a power cut the target may hold OLD, NEW, or NEW's
	   size with its data lost (zeros; stale bytes on some filesystems),
	   so a cache must validate what it reads back. */
	FSAFE_NO_SYNC = 1u << 0,
	/* Publish only if the target does not exist; else -EEXIST, untouched. */
	FSAFE_CREATE_ONLY = 1u << 1,
	/* If the target is a symbolic link, replace the link itself instead of
	   writing the file it points to (the default follows it). */
	FSAFE_NO_FOLLOW = 1u << 2,
	/* Create missing parent directories (each made durable too). */
	FSAFE_MKDIR = 1u << 3,
	/* Never stage with O_TMPFILE; always use a named staging file. Only a
	   managed writer stages with O_TMPFILE at all (a one-shot write of a
	   buffer is named from the start: faster, and its window is one
	   write). Exists for filesystems that misreport support, and for
	   testing the portable path on Linux. */
	FSAFE_NO_TMPFILE = 1u << 4,
	/* Never use renameat2(); create-only publishes with link+unlink. */
	FSAFE_NO_RENAMEAT2 = 1u << 5,
	/* Do not copy the old target's extended attributes and ACLs. */
	FSAFE_NO_XATTRS = 1u << 6,
	/* Leave out an extended attribute the caller may not copy (trusted.*
	   without CAP_SYS_ADMIN, a security.* label it may not set) instead
	   of failing the write at step "copy xattr". */
	FSAFE_XATTRS_BEST_EFFORT = 1u << 7,
	/* Refuse (-EMLINK, step "hard links") a target with more than one
	   hard link. By default such a target is replaced under the name
	   given, and its other names keep the old content: a replace
	   creates a new file, it never writes into the old one. */
	FSAFE_NO_SPLIT_LINKS = 1u << 8,
};

/*
 * The identity of a file as a caller read it: device, inode, size and
 * change time in nanoseconds, as FSAFE_TOKEN_LEN - 1 hex digits and a NUL.
 * Opaque: only compare tokens or pass them back.
 */
#define FSAFE_TOKEN_LEN 73

/*
 * The token of the file a write of `path` (relative to `dirfd`) would
 * replace: a symbolic link is followed unless `flags` has FSAFE_NO_FOLLOW.
 * Take it before reading the file, so that a change made after it is
 * caught. 0; -ENOENT when there is no such file; or a negative errno.
 */
FSAFE_API int fsafe_token_get(int dirfd, const char *path, unsigned flags,
                              char out[FSAFE_TOKEN_LEN]);

struct fsafe_write_opts {
	size_t size;               /* sizeof(struct fsafe_write_opts), or 0 */
	unsigned flags;            /* FSAFE_* flags above */
	mode_t mode;               /* permissions of a new file, before umask;
	                              0 means 0666. An existing target keeps its
	                              own mode, and its owner where the caller
	                              may set it. */
	struct fsafe_error *error; /* optional: filled in on failure */
	/* Optional: a token from fsafe_token_get(). Publish only if the
	   target is still that file; else FSAFE_ECONFLICT with the target
	   untouched (also when it is gone). Writers given a token serialise
	   on the old target (a flock held from the comparison to the
	   rename), so of writers racing with the same token exactly one
	   publishes (the publish waits, too, for a flock anyone else holds
	   on the target).
	   For a regular file (-EOPNOTSUPP otherwise). -EINVAL for a
	   malformed token. */
	const char *if_unchanged;
};

/* The first published layout (0.1.0): what a `size` of 0 means. */
#define FSAFE_WRITE_OPTS_SIZE_V0 \
	(offsetof(struct fsafe_write_opts, if_unchanged) + sizeof(const char *))

#define FSAFE_WRITE_OPTS_INIT FSAFE__INIT(struct fsafe_write_opts)

/*
 * Replace (or create) `path` relative to `dirfd` with `len` bytes of `buf`,
 * atomically: after any crash a reader finds the whole old content or the
 * whole new content. Durable when it returns 0 (unless FSAFE_NO_SYNC).
 * `opts` may be NULL for the defaults.
 *
 * Returns 0; or FSAFE_ENOTDURABLE (published, durability unknown); or a
 * negative errno with the target unchanged (-EEXIST with FSAFE_CREATE_ONLY,
 * -EISDIR when the target is a directory, -EBADFD when it is a device, a
 * FIFO or a socket: refused before anything is staged, never written
 * through nor replaced; -EMLINK with FSAFE_NO_SPLIT_LINKS, FSAFE_ECONFLICT
 * with if_unchanged, -EBUSY when the target is a mount point, -EINVAL for an
 * empty path or a path ending in '/', '.' or '..', and for a NULL `buf`
 * with a non-zero `len`).
 *
 * What the new file keeps of the old one, on every write path (one-shot,
 * managed writer, batch, async, root-contained): mode, owner where the
 * caller may set it, and every extended attribute, ACLs included
 * (user.*, trusted.* and security.* where the caller may set them,
 * system.posix_acl_access). They are set on the stage before it is
 * published. The inode is new: other hard links keep the old content (see
 * FSAFE_NO_SPLIT_LINKS), and open descriptors keep reading the old file.
 */
FSAFE_API int fsafe_write_fileat(int dirfd, const char *path, const void *buf,
                                 size_t len,
                                 const struct fsafe_write_opts *opts);

/* fsafe_write_fileat(AT_FDCWD, ...). */
FSAFE_API int fsafe_write_file(const char *path, const void *buf, size_t len,
                               const struct fsafe_write_opts *opts);

/*
 * Create or replace the symbolic link `linkpath` (relative to `dirfd`) so
 * that it reads `target`, atomically: a reader resolving `linkpath` finds
 * the old link or the new one, also after a crash (the deploy switch
 * `current -> release-42`). The new link is made under a staging name,
 * renamed over `linkpath` and the directory synced. `linkpath` itself is
 * never followed; a directory there is refused (-EISDIR). opts->flags
 * takes FSAFE_NO_SYNC, FSAFE_CREATE_ONLY, FSAFE_MKDIR; opts->mode and
 * opts->if_unchanged are ignored. Results as for fsafe_write_fileat().
 * A crash between staging and publishing leaves a symbolic link with a
 * staging name, which fsafe_sweep() removes once it is old enough. A
 * sweep with an age of 0 can take the stage of a replace in progress (a
 * link holds no lock): the replace then stages again under a fresh name,
 * a few times at most before it fails with -ENOENT at step "rename".
 */
FSAFE_API int fsafe_symlinkat(const char *target, int dirfd,
                              const char *linkpath,
                              const struct fsafe_write_opts *opts);

/* ------------------------------------------------------------------------ */
/* Managed (streaming) writer                                                */
/* ------------------------------------------------------------------------ */

typedef struct fsafe_writer fsafe_writer;

/*
 * Start replacing `path`. The staging file is created now, beside the
 * target, and is locked (an OFD lock) so no sweep removes it while this
 * handle lives. (A sweep with an age of 0 can catch a named stage in the
 * instant before its lock; the writer notices and starts a fresh stage.)
 * Nothing is visible at the target until commit.
 */
FSAFE_API int fsafe_writer_open(int dirfd, const char *path,
                                const struct fsafe_write_opts *opts,
                                fsafe_writer **out);

/* Append bytes (partial writes and EINTR are handled); -EINVAL for a
   NULL `buf` with a non-zero `len`. */
FSAFE_API int fsafe_writer_write(fsafe_writer *w, const void *buf, size_t len);

/*
 * The staging file's descriptor, for sendfile(), splice() or
 * copy_file_range() users. Write at the current offset; do not close it.
 */
FSAFE_API int fsafe_writer_fd(const fsafe_writer *w);

/*
 * Sync, publish and sync the directory; then free the writer whatever the
 * outcome. Results as for fsafe_write_fileat(). A write error seen earlier
 * is reported here again and nothing is published.
 */
FSAFE_API int fsafe_writer_commit(fsafe_writer *w);

/* Discard: the target is untouched, no staging file remains. NULL is a
   no-op. */
FSAFE_API void fsafe_writer_abort(fsafe_writer *w);

/* ------------------------------------------------------------------------ */
/* Sweep of abandoned staging files                                          */
/* ------------------------------------------------------------------------ */

/* A cancellation token: request from any thread or a signal handler. */
typedef struct fsafe_cancel fsafe_cancel;
FSAFE_API int fsafe_cancel_new(fsafe_cancel **out);
FSAFE_API void fsafe_cancel_request(fsafe_cancel *c); /* async-signal-safe */
FSAFE_API bool fsafe_cancel_requested(const fsafe_cancel *c);
FSAFE_API void fsafe_cancel_free(fsafe_cancel *c);

typedef struct fsafe_sweep_result fsafe_sweep_result;

enum {
	/* Report what would be removed, remove nothing. */
	FSAFE_SWEEP_DRY_RUN = 1u << 0,
};

/*
 * Remove abandoned staging files directly in directory `path` (relative to
 * `dirfd`): regular files whose name satisfies fsafe_is_staging_name(),
 * whose mtime is more than `older_than_ms` in the past, and which no live
 * writer holds; and symbolic links with such a name whose own mtime (the
 * link's, never its target's) is that old, as a crashed fsafe_symlinkat()
 * leaves them: the link is removed, what it points to is never touched.
 * Directories, FIFOs, sockets and devices stay, whatever their name.
 * Never follows nor opens a symlink, never enters a subdirectory,
 * tolerates entries vanishing meanwhile. Time is linear in the directory's
 * size.
 *
 * `cancel` may be NULL. `*result` (if `result` is not NULL) receives the
 * names removed, also when the sweep fails or is cancelled (-ECANCELED).
 * Returns the number removed, or a negative errno.
 */
FSAFE_API int fsafe_sweep(int dirfd, const char *path, uint64_t older_than_ms,
                          unsigned flags, const fsafe_cancel *cancel,
                          fsafe_sweep_result **result);

FSAFE_API size_t fsafe_sweep_result_count(const fsafe_sweep_result *r);
FSAFE_API const char *fsafe_sweep_result_name(const fsafe_sweep_result *r,
                                              size_t i);
FSAFE_API void fsafe_sweep_result_free(fsafe_sweep_result *r);

#ifdef __cplusplus
}
#endif

/* The modules built on the core, one header each. */
#include "fsafe/lock.h"
#include "fsafe/batch.h"
#include "fsafe/root.h"
#include "fsafe/spool.h"
#include "fsafe/inbox.h"
#include "fsafe/store.h"
#include "fsafe/checkpoint.h"

#endif /* FSAFE_H */
