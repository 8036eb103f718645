/*
 * fsafe/lock.h: exclusive locks between processes, with an owner record,
 * broken only on proof that the owner is dead.
 *
 * Two modes; pick one per lock name and never mix them on one name.
 *
 * Link mode (the default) works wherever hard links do, NFS included. The
 * lock is a file whose content is the owner record; it exists only while
 * the lock is held. It is published by link(2) from a staging file
 *
 *     .lock-<uuid>.tmp          (never an atomic-write staging name)
 *
 * and confirmed by inode identity. A holder that dies leaves the file
 * behind; the next acquirer breaks it once the record proves the owner
 * dead: same host and boot, and the pid is gone, a zombie, or reused by a
 * process with another start time. A record from another boot of this host
 * is dead. A record from another host (or another pid namespace) is never
 * judged: only FSAFE_LOCK_FORCE breaks it. Breakers race safely: the dead
 * file is renamed to a private name (.lock-<uuid>.broken), re-checked and
 * unlinked, and exactly one of them wins.
 *
 * Kernel mode (FSAFE_LOCK_KERNEL) takes an open-file-description lock
 * (F_OFD_SETLK) on a lock file that is never unlinked; the owner record is
 * written into it for diagnostics only. The kernel frees the lock the
 * instant its holder dies, so no judgement is ever needed, but it is only
 * as good as the filesystem's byte-range locks: pick it for local
 * filesystems, and link mode for NFS or when the lock must be understood
 * from other hosts. Releasing such a lock checks that the name still is
 * the file locked: a lock file deleted or replaced while held (which lets
 * a second holder in) is -ESTALE, as for link mode.
 *
 * The two modes share the lock's name. While one mode holds it, an
 * acquirer of the other gets -EINVAL. A kernel-mode lock file at rest
 * (its last holder released it; nobody holds its OFD lock) is no lock: a
 * link-mode acquirer removes it, under a read lock that keeps kernel-mode
 * acquirers off it meanwhile, and takes the name (this is not counted by
 * fsafe_lock_broken). A link-mode lock is never at rest: its file exists
 * only while held, or after its holder died.
 *
 * A lock is held by the process that acquired it (the record names it).
 * Release it in that process; a child after fork() must not.
 */
#ifndef FSAFE_LOCK_H
#define FSAFE_LOCK_H

#include "fsafe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_lock fsafe_lock;

enum {
	/* Try once: -EWOULDBLOCK when the lock is held by a live owner. */
	FSAFE_LOCK_NO_WAIT = 1u << 0,
	/*
	 * Also break locks whose owner cannot be judged (another host,
	 * another pid namespace, a newer record version) and malformed
	 * records before their grace period ends. This ENDS MUTUAL EXCLUSION
	 * if that owner is in fact alive; use it only after checking by hand.
	 * A local owner proven alive is never broken, not even with force.
	 */
	FSAFE_LOCK_FORCE = 1u << 1,
	/* Kernel mode (see above). */
	FSAFE_LOCK_KERNEL = 1u << 2,
};

/* Default grace period for a malformed record, in milliseconds. */
#define FSAFE_LOCK_GRACE_MS 10000

struct fsafe_lock_opts {
	size_t size;          /* sizeof(struct fsafe_lock_opts), or 0 */
	unsigned flags;       /* FSAFE_LOCK_* */
	/* Give up after this long with -ETIMEDOUT. 0 (the default) and
	   FSAFE_FOREVER wait without limit, and so does any value too large
	   to count to; not waiting at all is FSAFE_LOCK_NO_WAIT. Waiting
	   sleeps with exponential backoff and jitter. */
	uint64_t timeout_ms;
	/* A lock file whose record is malformed (empty, truncated, garbage)
	   is broken once it is this old, measured on the filesystem's own
	   clock (its mtime/ctime against a fresh write of ours), never the
	   local wall clock. 0 means FSAFE_LOCK_GRACE_MS. */
	uint64_t grace_ms;
	/* Optional: filled when fsafe_lock_acquire() fails, and kept by the
	   handle for fsafe_lock_release(). The steps: "options", "resolve",
	   "open lock file", "stat lock file", "read owner record", "link",
	   "create staging file", "write owner record", "fsync", "flock",
	   "lock (OFD)", "break lock (rename)", "held by another owner"
	   (-EWOULDBLOCK, -ETIMEDOUT), "held in kernel mode" / "held in link
	   mode" (-EINVAL), what is at the name instead of a lock file ("not
	   a regular file (directory)", "... (fifo)", "... (socket)", "...
	   (character device)", "symbolic link", "dangling symbolic link");
	   at release "lock file removed or replaced while held" (-ESTALE),
	   "release in another process than the holder" (-EPERM), "remove
	   lock file". */
	struct fsafe_error *error;
};

/* The first published layout (0.1.0): what a `size` of 0 means. */
#define FSAFE_LOCK_OPTS_SIZE_V0 \
	(offsetof(struct fsafe_lock_opts, error) + sizeof(struct fsafe_error *))

#define FSAFE_LOCK_OPTS_INIT FSAFE__INIT(struct fsafe_lock_opts)

/* A verdict on an owner. */
enum fsafe_lock_liveness {
	FSAFE_OWNER_ALIVE = 1,
	FSAFE_OWNER_DEAD = 2,
	FSAFE_OWNER_UNKNOWN = 3, /* another host or pid namespace, or a
	                            record version this library cannot judge */
};

#define FSAFE_LOCK_HOST_MAX 255

/* An owner record, parsed. */
struct fsafe_lock_owner {
	size_t size;             /* sizeof(struct fsafe_lock_owner), or 0 */
	unsigned version;        /* record format version (1) */
	bool kernel;             /* written by a kernel-mode holder */
	pid_t pid;
	uint64_t start;          /* process start, clock ticks after boot
	                            (/proc/<pid>/stat field 22) */
	char boot_id[37];        /* /proc/sys/kernel/random/boot_id */
	char host[FSAFE_LOCK_HOST_MAX + 1];
	uint64_t pidns;          /* pid namespace inode; 0 if unknown */
	char token[33];          /* 128 random bits, hex */
	int64_t time_ms;         /* acquisition, Unix time in milliseconds */
	enum fsafe_lock_liveness liveness;
};

/* The first published layout (0.1.0): what a `size` of 0 means. */
#define FSAFE_LOCK_OWNER_SIZE_V0 \
	(offsetof(struct fsafe_lock_owner, liveness) + \
	 sizeof(enum fsafe_lock_liveness))

/*
 * Acquire the lock `path` (relative to `dirfd`; its directory must exist).
 * `opts` may be NULL: wait without limit, link mode.
 *
 * Returns 0 and a handle in *out; -EWOULDBLOCK (FSAFE_LOCK_NO_WAIT) or
 * -ETIMEDOUT when a live or unjudgeable owner holds it; -EINVAL when the
 * name is held in the other mode, or for bad options; -ELOOP when the
 * lock name is a symbolic link (dangling or not: never followed),
 * -EISDIR a directory, -EBADFD a FIFO, a socket or a device (never
 * opened in a way that blocks; a socket is not reported as the -ENXIO
 * its open gives), each with a step naming it in opts->error;
 * -EPERM or -EOPNOTSUPP from link() on a filesystem without hard links
 * (use kernel mode there); or another negative errno.
 */
FSAFE_API int fsafe_lock_acquire(int dirfd, const char *path,
                                 const struct fsafe_lock_opts *opts,
                                 fsafe_lock **out);

/* Dead or stale locks this acquisition broke (0 normally). */
FSAFE_API unsigned fsafe_lock_broken(const fsafe_lock *l);

/*
 * Release and free the handle (whatever the result). Removes the lock only
 * if it is still ours (same inode and token). Returns 0; -ESTALE if it was
 * no longer ours (force-broken by someone, or removed by hand; in kernel
 * mode: its file deleted or replaced) - mutual exclusion may have been
 * lost while it was held; -EPERM when called in another process than the
 * one that acquired it (nothing removed); or another negative errno (an
 * I/O error removing the name); a failure fills the acquire options'
 * `error`. After such an error a link-mode lock may still be in place
 * with this process as its owner: others then wait until this process
 * exits (its record then names a dead owner) or break it with
 * FSAFE_LOCK_FORCE. NULL is a no-op.
 */
FSAFE_API int fsafe_lock_release(fsafe_lock *l);

/*
 * Read the lock's owner record without taking the lock, with a verdict in
 * owner->liveness. Returns 0 (held, or left behind by a dead owner);
 * -ENOENT when the lock is not held; -EBADMSG when the record is malformed
 * (empty, truncated, garbage, over 4 KiB); -EPROTONOSUPPORT for a record
 * version this library does not know (owner->version is set); -ELOOP,
 * -EISDIR, -EBADFD as for fsafe_lock_acquire() for what is no lock file;
 * -EINVAL when owner->size is below FSAFE_LOCK_OWNER_SIZE_V0; or another
 * negative errno.
 */
FSAFE_API int fsafe_lock_inspect(int dirfd, const char *path,
                                 struct fsafe_lock_owner *owner);

/*
 * Check and repair a directory that holds lock files (and nothing else),
 * in the shape of every store's (fsafe.h, "Damage"). Problems: an entry
 * that is not a regular file (a FIFO, socket, directory or symbolic link
 * at a lock's name: never opened in a way that blocks or follows it); an
 * owner record that does not parse and that nobody holds; a link-mode lock
 * whose owner is proven dead (abandoned); a private leftover
 * (.lock-<uuid>.tmp, .lock-<uuid>.broken) whose creator is proven dead.
 * A lock held by a live or unjudgeable owner, a kernel-mode lock file at
 * rest and a record of a newer version are never problems.
 *
 * check changes nothing on disk (it may take and drop a lock file's flock
 * for an instant, to learn whether someone holds it). repair removes what
 * is proven dead or a recognised leftover, moves anything else damaged
 * into DIR/quarantine/ with a NAME.reason file beside it, and never
 * touches a lock a live process holds. A problem repair could not deal
 * with is reported with a NULL action. Both return the number of problems
 * found, or a negative errno.
 */
FSAFE_API int fsafe_lock_check(int dirfd, const char *path,
                               fsafe_damage_fn fn, void *arg);
FSAFE_API int fsafe_lock_repair(int dirfd, const char *path,
                                fsafe_damage_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* FSAFE_LOCK_H */
