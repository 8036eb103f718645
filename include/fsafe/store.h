/*
 * fsafe/store.h: a keyed state store, one directory of records that no
 * leftover file can wedge.
 *
 * Each key is one file in the store's directory, published through the
 * atomic writer, so after any crash a key holds its old record or its new
 * one. Every change (put, conditional put, delete, update) is made under
 * the store's lock, so versions count up without gaps or repeats and
 * concurrent updaters, in threads (a handle each) or processes, never
 * lose an update. Reads take no lock.
 *
 * The lock is a kernel lock (an open-file-description lock and a flock)
 * on the file ".lock/lock", which a handle opens at its first change and
 * keeps; the file is never written. A kernel lock dies with its holder's
 * process (and with the power), so a crashed holder never wedges the
 * store, and a change costs its record's durable write and a few system
 * calls that do no I/O. Waiters take turns: a process changing the store
 * in a loop cannot keep another out. Kernel locks are only as good as the
 * filesystem's: use the store on a local filesystem. A process using a
 * library from before this lock (which locked ".lock/lock" through
 * fsafe/lock.h, in link or kernel mode) is still kept out, and keeps us
 * out.
 *
 * Keys are byte strings of 1 to FSAFE_STORE_KEY_MAX bytes (any bytes,
 * NUL included). A key's file name is "k-" followed by the key in
 * lowercase hexadecimal: reversible, free of '/', never starting with '.',
 * the same on case-insensitive filesystems, sorted as the keys are, and
 * never an atomic-write staging name or a lock file.
 *
 * A record is a header (magic, format version, the record's version,
 * payload length, CRC-32C of the payload, the key, CRC-32C of the header)
 * and the payload. A record that fails validation (truncated or rewritten
 * by a tool outside fsafe, a copy under another key's name, a FIFO,
 * socket, directory or symbolic link at the key's name) makes that key
 * alone return -EBADMSG; a listing reports it and goes on.
 *
 * Anything else in the directory is ignored: atomic-write staging files
 * (fsafe_is_staging_name), the lock and the lock's private files, the
 * quarantine, subdirectories, symbolic links, unknown names. Opening the
 * store sweeps staging files abandoned more than an hour ago
 * (configurable); the sweep never takes a stage a live writer holds.
 *
 * Damage (fsafe.h, "Damage"): damaged bytes are never deleted, repair
 * moves them into "quarantine/" with a reason; a damaged record costs its
 * key alone, never the store; nothing inside the store is opened in a way
 * that blocks or follows a link out of it: the lock's directory ".lock" is
 * opened without following links, so a symbolic link or a file at its name
 * fails every change with -ENOTDIR until repair quarantines it; anything
 * but a regular file at ".lock/lock" (never followed, never opened in a
 * way that blocks) fails every change with step "open the store's lock
 * file" (-ELOOP, -EISDIR, -EBADFD) until repair quarantines it;
 * a missing one is made again by the next change. A removed
 * record is a removed key: the store keeps no index that could report it.
 * A directory at a key's name (no rename can replace it) is moved into
 * quarantine/ by a put or a delete of that key, which then proceeds; any
 * other non-record at a key's name is replaced by a put and removed by a
 * delete (no data is lost with it).
 *
 * Error detail (fsafe.h, "Conventions"): the open fills opts->error when
 * it fails and keeps the pointer; every later failing call on the handle
 * (put, put_if, get, get_into, delete, update, list) fills it with the
 * failed step and errno. A record's own steps are the writer's ("write",
 * "fsync", "rename", ...); the store's include "key", "read record",
 * "open the store's lock directory", "open the store's lock file",
 * "take the store's lock", "wait for the store's lock" (-ETIMEDOUT),
 * "store's lock already held by this handle" (-EDEADLK), "compare
 * version" (FSAFE_ECONFLICT, sys_errno 0) and "update callback". An
 * invalid record's step says what is wrong with it ("bad magic", "not a
 * regular file (directory)", ...).
 *
 * A handle may be used by one thread at a time. A handle used in a child
 * after fork() opens a lock file of its own at its next change, so parent
 * and child still exclude each other. A child forked during a change
 * (from an update callback) shares that change's lock: should the parent
 * die first, the lock lives on until the child exits or executes a
 * program.
 */
#ifndef FSAFE_STORE_H
#define FSAFE_STORE_H

#include "fsafe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_store fsafe_store;

/* Longest key, in bytes: "k-" + 2 hex digits a byte fits NAME_MAX (255). */
#define FSAFE_STORE_KEY_MAX 126

/* Default age beyond which opening sweeps a staging file: one hour. */
#define FSAFE_STORE_SWEEP_MS (60ull * 60 * 1000)

/* Default wait for the store's lock (changes, and repair): 30 seconds. */
#define FSAFE_STORE_LOCK_TIMEOUT_MS 30000ull

enum {
	/* Create the store's directory and its missing parents (mkdir -p)
	   if it is missing; each new directory is synced into its parent
	   (not with FSAFE_NO_SYNC in write_flags). */
	FSAFE_STORE_CREATE = 1u << 0,
	/* Do not sweep abandoned staging files when opening. */
	FSAFE_STORE_NO_SWEEP = 1u << 1,
	/* Accepted and without effect: every store's lock is a kernel lock
	   now (above). It chose the kernel mode of fsafe/lock.h. */
	FSAFE_STORE_LOCK_KERNEL = 1u << 2,
};

struct fsafe_store_opts {
	size_t size;          /* sizeof(struct fsafe_store_opts), or 0 for
	                         FSAFE_STORE_OPTS_SIZE_V0 */
	unsigned flags;       /* FSAFE_STORE_* above */
	/* Flags for every record write: FSAFE_NO_SYNC (records survive
	   process crashes but not power cuts; deletions are not synced
	   either) is meaningful; FSAFE_NO_TMPFILE is accepted and changes
	   nothing (a record is staged under a name, written and synced in
	   one call); others are refused with -EINVAL. */
	unsigned write_flags;
	mode_t mode;          /* of new records and of a created store
	                         directory (plus the owner's rwx); 0 means
	                         0666 / 0777; new parents get 0777 */
	/* Sweep staging files older than this when opening; 0 means
	   FSAFE_STORE_SWEEP_MS. (1 sweeps every abandoned one.) */
	uint64_t sweep_older_than_ms;
	/* Give up waiting for the store's lock after this long with
	   -ETIMEDOUT (step "wait for the store's lock"); 0 means
	   FSAFE_STORE_LOCK_TIMEOUT_MS (30 s), FSAFE_FOREVER waits without
	   limit. */
	uint64_t lock_timeout_ms;
	/* Optional: filled when the open fails, and kept by the handle for
	   every later call that fails (see above). */
	struct fsafe_error *error;
};

#define FSAFE_STORE_OPTS_SIZE_V0                    \
	(offsetof(struct fsafe_store_opts, error) + \
	 sizeof(struct fsafe_error *))
#define FSAFE_STORE_OPTS_INIT FSAFE__INIT(struct fsafe_store_opts)

/*
 * Open the store in directory `path` relative to `dirfd` (the handle holds
 * the directory open; everything later is relative to it). `opts` may be
 * NULL. Returns 0 and a handle; -ENOENT (no directory, and no
 * FSAFE_STORE_CREATE); -ENOTDIR; -EINVAL for bad options (or a size
 * below FSAFE_STORE_OPTS_SIZE_V0); -E2BIG for a larger struct whose
 * unknown tail is not zero; or another negative errno. A failing sweep
 * does not fail the open.
 */
FSAFE_API int fsafe_store_open(int dirfd, const char *path,
                               const struct fsafe_store_opts *opts,
                               fsafe_store **out);

/* Staging files the open swept. */
FSAFE_API unsigned fsafe_store_swept(const fsafe_store *s);

/*
 * Check and repair the store at `path` (relative to `dirfd`), in the shape
 * of every store's (fsafe.h, "Damage"); no handle needed, none opened.
 * Problems: a key's record that fails validation (including a FIFO,
 * socket, directory or symbolic link at its name, a record copied from
 * another store or another key: the key inside must match the name),
 * each costing that key alone (lost 1); a stray entry (a name that is no
 * key's); a ".lock" or "quarantine" that is not a directory; and the lock
 * directory's own problems (fsafe_lock_check, to which the store's empty
 * lock file is a kernel-mode lock file, never a problem), reported as
 * ".lock/NAME".
 * check changes nothing on disk. repair moves each damaged entry into
 * quarantine/ (never deleting it) with NAME.reason beside it, under the
 * store's lock (waiting up to FSAFE_STORE_LOCK_TIMEOUT_MS for a live
 * holder: then -ETIMEDOUT),
 * removes only dead lock leftovers, and reports a problem it could not
 * deal with with a NULL action. Both return the number of problems, or a
 * negative errno.
 */
FSAFE_API int fsafe_store_check(int dirfd, const char *path,
                                fsafe_damage_fn fn, void *arg);
FSAFE_API int fsafe_store_repair(int dirfd, const char *path,
                                 fsafe_damage_fn fn, void *arg);

/* Close the handle. NULL is a no-op. */
FSAFE_API void fsafe_store_close(fsafe_store *s);

/*
 * Arguments, for every function below: a NULL handle or out pointer
 * (buf, len of the gets; out of the list) is a caller bug, an assertion.
 * Key errors: -EINVAL for a NULL or empty key, -ENAMETOOLONG for one
 * longer than FSAFE_STORE_KEY_MAX. -EINVAL for a NULL buffer with a
 * non-zero length.
 *
 * Write results are those of fsafe_write_fileat(): 0 (durable, unless
 * FSAFE_NO_SYNC); FSAFE_ENOTDURABLE (visible, durability unknown); any
 * other negative errno: nothing changed.
 *
 * Every change waits for the store's lock up to lock_timeout_ms
 * (-ETIMEDOUT). A change made on a handle that already holds the lock
 * (from inside its own update callback) fails with -EDEADLK at once; on
 * another handle of the same store it would wait for itself, until
 * -ETIMEDOUT.
 */

/*
 * Store `len` bytes of `buf` under `key`. The new record's version is the
 * old one's plus one (1 for a new key, or when the old record was
 * invalid); `*version` (may be NULL) receives it.
 */
FSAFE_API int fsafe_store_put(fsafe_store *s, const void *key, size_t keylen,
                              const void *buf, size_t len,
                              uint64_t *version);

/*
 * Compare and swap: as fsafe_store_put(), but only if the key's current
 * version is `expected` (0: the key must not exist). Otherwise
 * FSAFE_ECONFLICT and nothing changes (also when the current record is
 * invalid).
 */
FSAFE_API int fsafe_store_put_if(fsafe_store *s, const void *key,
                                 size_t keylen, const void *buf, size_t len,
                                 uint64_t expected, uint64_t *version);

/*
 * Read a record: a malloc'd copy of the payload in *buf (release with
 * free(); non-NULL even for an empty payload) and its length; its version
 * in *version (may be NULL). -ENOENT when the key has no record;
 * -EBADMSG when its record fails validation (or its name is not a
 * regular file).
 */
FSAFE_API int fsafe_store_get(fsafe_store *s, const void *key, size_t keylen,
                              void **buf, size_t *len, uint64_t *version);

/*
 * Read a record into the caller's buffer of `cap` bytes. *len receives
 * the payload's length; -EMSGSIZE (buffer untouched) when it exceeds cap.
 * Otherwise as fsafe_store_get().
 */
FSAFE_API int fsafe_store_get_into(fsafe_store *s, const void *key,
                                   size_t keylen, void *buf, size_t cap,
                                   size_t *len, uint64_t *version);

/*
 * Remove a key's record (valid or not) durably. -ENOENT when there is
 * none; FSAFE_ENOTDURABLE when it is gone but the directory sync failed.
 * A directory at the key's name goes into quarantine/ (the key is gone).
 */
FSAFE_API int fsafe_store_delete(fsafe_store *s, const void *key,
                                 size_t keylen);

/*
 * What an update callback wants done. No verdict is 0: a callback that
 * returns 0 out of habit changes nothing and fails the update (-EINVAL).
 */
enum fsafe_store_verdict {
	FSAFE_STORE_KEEP = 1,   /* change nothing */
	FSAFE_STORE_WRITE = 2,  /* store *new_buf / *new_len, both set */
	FSAFE_STORE_DELETE = 3, /* delete the key */
};

/*
 * Called under the store's lock with the current payload (`old` NULL and
 * `old_len` 0 when the key has no record). Returns a verdict above, or a
 * negative errno to abort with that result and no change. For
 * FSAFE_STORE_WRITE it sets both *new_buf and *new_len (the buffer stays
 * the callback's; it must live until fsafe_store_update returns); an
 * empty value is asked for explicitly, as a length of 0 (the buffer may
 * then be NULL). Reads of the store work inside the callback; a change
 * on the same handle is -EDEADLK.
 */
typedef int (*fsafe_store_update_fn)(const void *old, size_t old_len,
                                     const void **new_buf, size_t *new_len,
                                     void *arg);

/*
 * Read-modify-write of one key under the store's lock: no other change of
 * the store interleaves. Returns the write's (or delete's) result, 0 for
 * FSAFE_STORE_KEEP, the callback's negative result, -EINVAL (nothing
 * changed; step "update callback's verdict") for a result that is no
 * verdict (0 included) or a FSAFE_STORE_WRITE that did not set both
 * *new_buf and *new_len, -EINVAL for a NULL `fn`, or -EBADMSG (callback
 * not called) when the current record is invalid; delete or put it
 * first. `*version` (may be NULL) receives the resulting version (0 when
 * the key has no record afterwards).
 */
FSAFE_API int fsafe_store_update(fsafe_store *s, const void *key,
                                 size_t keylen, fsafe_store_update_fn fn,
                                 void *arg, uint64_t *version);

/* ---- listing ----------------------------------------------------------- */

/* Why a listing passed over a directory entry (the reporter's `why`). */
enum fsafe_store_skip {
	FSAFE_STORE_SKIP_BAD_RECORD = 1, /* a key's record failed validation
	                                    (key given; err is the reason) */
	FSAFE_STORE_SKIP_UNKNOWN = 2,    /* a name that is no key's */
	FSAFE_STORE_SKIP_DIR = 3,        /* a subdirectory */
	FSAFE_STORE_SKIP_SYMLINK = 4,    /* a symbolic link */
	FSAFE_STORE_SKIP_OTHER = 5,      /* a device, FIFO or socket */
};

enum {
	/* List the keys the names say, without reading the records: fast,
	   but an invalid record is listed, with version and length 0. */
	FSAFE_STORE_LIST_NAMES_ONLY = 1u << 0,
};

struct fsafe_store_list_opts {
	size_t size;     /* sizeof(struct fsafe_store_list_opts), or 0 for
	                    FSAFE_STORE_LIST_OPTS_SIZE_V0 */
	unsigned flags;  /* FSAFE_STORE_LIST_* */
	/* Optional: told about each entry that is not listed, except
	   staging files and the lock's own files, which are expected. `key`
	   is NULL unless a record's. Called during fsafe_store_list(). */
	void (*skipped)(enum fsafe_store_skip why, const char *name,
	                const void *key, size_t keylen, int err, void *arg);
	void *arg;
};

#define FSAFE_STORE_LIST_OPTS_SIZE_V0                   \
	(offsetof(struct fsafe_store_list_opts, arg) + sizeof(void *))

#define FSAFE_STORE_LIST_OPTS_INIT FSAFE__INIT(struct fsafe_store_list_opts)

typedef struct fsafe_store_iter fsafe_store_iter;

/* One listed record; valid until the next call on the iterator. */
struct fsafe_store_entry {
	const void *key;
	size_t keylen;
	uint64_t version;
	uint64_t len;   /* payload length */
};

/*
 * Snapshot the store's keys, sorted by key bytes (memcmp order, a prefix
 * first). Only valid records are listed (see FSAFE_STORE_LIST_NAMES_ONLY);
 * nothing found in the directory fails the listing. `opts` may be NULL;
 * -EINVAL for unknown flags or a size below FSAFE_STORE_LIST_OPTS_SIZE_V0,
 * -E2BIG for a larger struct whose unknown tail is not zero (the store's
 * error detail, step "options").
 */
FSAFE_API int fsafe_store_list(fsafe_store *s,
                               const struct fsafe_store_list_opts *opts,
                               fsafe_store_iter **out);

/* 1 and the next entry, 0 at the end. */
FSAFE_API int fsafe_store_iter_next(fsafe_store_iter *it,
                                    struct fsafe_store_entry *e);

/* Entries in the snapshot. */
FSAFE_API size_t fsafe_store_iter_count(const fsafe_store_iter *it);

/* NULL is a no-op. */
FSAFE_API void fsafe_store_iter_free(fsafe_store_iter *it);

#ifdef __cplusplus
}
#endif

#endif /* FSAFE_STORE_H */
