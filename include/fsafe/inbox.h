/*
 * fsafe/inbox.h: a directory inbox. Producers deliver messages (files) into
 * a directory; consumers claim, process and acknowledge them; any process
 * may be killed at any moment and the machine may lose power.
 *
 * Layout under the inbox directory (one filesystem, used through held
 * directory fds):
 *
 *   new/         delivered messages, one file each, named by their id.
 *                A delivery is staged beside its target by the atomic
 *                writer (unnamed, where the filesystem allows, else
 *                under a staging name), so new/ may also hold staging
 *                files (fsafe_is_staging_name()): consumers skip them
 *                and fsafe_inbox_recover() sweeps the abandoned ones by
 *                age.
 *   claimed/p-<token>/   claims of a process consumer, with its owner
 *                record ("owner", the lock's record format)
 *   claimed/n-<name>/    claims of a named consumer (no owner record)
 *   claimed/b-<token>/, x-<token>/   a process consumer being born (no
 *                claim yet) or being retired (claims returned); recovery
 *                clears what a crash leaves of either
 *   done/        acknowledged messages, with FSAFE_INBOX_KEEP_DONE
 *   quarantine/  files found in new/ that are not whole messages, and
 *                whatever fsafe_inbox_repair() set aside, each with
 *                "<name>.reason" saying why
 *
 * An id is fixed-width (FSAFE_INBOX_ID_LEN) and ids sort in delivery
 * order: time (microseconds), the producer's sequence, then boot id, pid
 * and random bits. The sequence is also stored in the message's header
 * (magic, sequence, length, payload and header checksums).
 *
 * Guarantees: a delivery that returned 0 survives a power cut; nothing
 * half-written is ever taken; exactly one consumer wins a claim; an
 * acknowledged message never comes back. A claim returns to new/ only when
 * its owner is proven dead (the lock's rules: same host and boot, pid gone,
 * a zombie or reused), by a release, or by fsafe_inbox_consumer_close() /
 * fsafe_inbox_release_all(); never because of its age. After a power cut a
 * claim not yet acknowledged may be back in new/ (redelivered).
 *
 * Filesystem: a claim is one rename from new/ into the consumer's
 * directory, so the inbox needs a filesystem that never persists a
 * rename's removal half alone. Measured by power cuts at every call of a
 * claim and of an ack (docs/DESIGN.md): no cut did on ext4, xfs, btrfs, or
 * overlayfs over ext4 or xfs. An ack syncs the consumer's directory; on
 * ext3, ext4 and xfs, where that sync and the claim's make a rename
 * durable whole, nothing more (take + ack cost two flushes); elsewhere it
 * syncs new/ first (three): btrfs logs only the directory it syncs, and a
 * power cut after an ack that did not sync new/ brought the message back
 * there. On a
 * filesystem without a journal (ext2, vfat) nothing orders the two
 * directories' writes, and a power cut during a claim can lose that
 * message: the cuts did not catch it on ext2 only because they come
 * before its writeback timers run.
 *
 * Named consumers (for processes that exit between take and ack, like the
 * CLI) have no owner record: their claims outlive every process and are
 * never returned by recovery, only by a release or fsafe_inbox_release_all()
 * on that name.
 */
#ifndef FSAFE_INBOX_H
#define FSAFE_INBOX_H

#include "fsafe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_inbox fsafe_inbox;
typedef struct fsafe_inbox_consumer fsafe_inbox_consumer;
typedef struct fsafe_inbox_msg fsafe_inbox_msg;

/* Length of a message id (without its NUL). */
#define FSAFE_INBOX_ID_LEN 60
/* Longest consumer name. */
#define FSAFE_INBOX_NAME_MAX 64
/* The default limit on a message's payload: 64 MiB. */
#define FSAFE_INBOX_MAX_DEFAULT (64ull << 20)
enum {
	/* Create the inbox directory, its missing parents (mkdir -p, 0777
	   less the umask) and its subdirectories if missing, durably. */
	FSAFE_INBOX_CREATE = 1u << 0,
	/* Acknowledge by moving into done/ instead of removing. */
	FSAFE_INBOX_KEEP_DONE = 1u << 1,
	/* fsafe_inbox_wait polls with backoff and never uses inotify. */
	FSAFE_INBOX_NO_INOTIFY = 1u << 2,
};

struct fsafe_inbox_opts {
	size_t size;          /* sizeof(struct fsafe_inbox_opts), or 0 */
	unsigned flags;       /* FSAFE_INBOX_* */
	/* Largest payload delivered or taken; 0 means FSAFE_INBOX_MAX_DEFAULT.
	   Larger deliveries fail with -EMSGSIZE; larger files in new/ are
	   quarantined. */
	uint64_t max_message;
	/* Passed to the writer that delivers (only FSAFE_NO_TMPFILE and
	   FSAFE_NO_RENAMEAT2 are allowed, for filesystems and tests).
	   FSAFE_NO_TMPFILE stages every delivery under a staging name; one
	   is unnamed otherwise where a link is durable with its inode (ext3,
	   ext4, xfs, tmpfs). */
	unsigned write_flags;
	/* Optional: filled in when the open fails, and kept by the handle:
	   every later call on it, or on a consumer made from it, that fails
	   fills it too (step and errno). */
	struct fsafe_error *error;
};

#define FSAFE_INBOX_OPTS_INIT FSAFE__INIT(struct fsafe_inbox_opts)
#define FSAFE_INBOX_OPTS_SIZE_V0                                    \
	(offsetof(struct fsafe_inbox_opts, error) +                 \
	 sizeof(((struct fsafe_inbox_opts *)0)->error))

/*
 * Open the inbox `path` relative to `dirfd`. Returns 0; -ENOENT when it is
 * missing (without FSAFE_INBOX_CREATE) or lacks a subdirectory; -EINVAL for
 * bad options; or another negative errno.
 */
FSAFE_API int fsafe_inbox_open(int dirfd, const char *path,
                               const struct fsafe_inbox_opts *opts,
                               fsafe_inbox **out);

/* Free the handle; NULL is a no-op. Close consumers first. */
FSAFE_API void fsafe_inbox_close(fsafe_inbox *ib);

/*
 * Deliver `len` bytes durably. `id` (FSAFE_INBOX_ID_LEN + 1 bytes, may be
 * NULL) receives the message's id. Returns 0 (durable); FSAFE_ENOTDURABLE
 * (delivered, durability unknown); -EMSGSIZE over the limit; or another
 * negative errno with nothing delivered.
 */
FSAFE_API int fsafe_inbox_deliver(fsafe_inbox *ib, const void *buf,
                                  size_t len, char *id);

/*
 * Start consuming. `name` NULL: a process consumer, owned by this process
 * (its claims return to new/ once it is proven dead). Otherwise a named
 * consumer (1 to FSAFE_INBOX_NAME_MAX of [A-Za-z0-9._-], not starting with
 * '.'), which may be reopened by any process and is never judged dead.
 */
FSAFE_API int fsafe_inbox_consumer_open(fsafe_inbox *ib, const char *name,
                                        fsafe_inbox_consumer **out);

/*
 * End consuming and free the handle. A process consumer returns its
 * unacknowledged claims to new/ and removes its claim directory; a named
 * consumer keeps them. Returns 0 or the first error (the handle is freed
 * whatever happens). NULL is a no-op.
 */
FSAFE_API int fsafe_inbox_consumer_close(fsafe_inbox_consumer *c);

/*
 * Claim the oldest message this consumer can win. Returns 0 and the
 * message in *out; -EAGAIN when a full pass over new/ found nothing to
 * claim; or another negative errno. Files in new/ that are not whole
 * messages are moved to quarantine/ on the way (counted by
 * fsafe_inbox_quarantined()).
 */
FSAFE_API int fsafe_inbox_take(fsafe_inbox_consumer *c, fsafe_inbox_msg **out);

/*
 * Block until new/ may hold something to take, or `timeout_ms` passed
 * (-ETIMEDOUT). 0 does not wait: new/ is looked at once. FSAFE_FOREVER
 * waits without limit. inotify is only a hint: without it (or with
 * FSAFE_INBOX_NO_INOTIFY) this polls with a bounded backoff.
 */
FSAFE_API int fsafe_inbox_wait(fsafe_inbox_consumer *c, uint64_t timeout_ms);

/* Acknowledge (remove, or move to done/) a message this consumer claimed,
   durably. -ENOENT when this consumer holds no claim of that id. */
FSAFE_API int fsafe_inbox_ack(fsafe_inbox_consumer *c, const char *id);

/* Return a claimed message to new/ (a nack), durably. */
FSAFE_API int fsafe_inbox_release(fsafe_inbox_consumer *c, const char *id);

/* Return every claim of this consumer to new/; the number returned or a
   negative errno. For a named consumer declared gone by its operator. */
FSAFE_API int fsafe_inbox_release_all(fsafe_inbox_consumer *c);

/* Files moved to quarantine by this consumer's takes. */
FSAFE_API unsigned fsafe_inbox_quarantined(const fsafe_inbox_consumer *c);

/* The message: id, path relative to the inbox directory (claimed/...),
   payload, its length, and the producer's sequence number. */
FSAFE_API const char *fsafe_inbox_msg_id(const fsafe_inbox_msg *m);
FSAFE_API const char *fsafe_inbox_msg_path(const fsafe_inbox_msg *m);
FSAFE_API const void *fsafe_inbox_msg_data(const fsafe_inbox_msg *m);
FSAFE_API size_t fsafe_inbox_msg_len(const fsafe_inbox_msg *m);
FSAFE_API uint64_t fsafe_inbox_msg_seq(const fsafe_inbox_msg *m);
FSAFE_API void fsafe_inbox_msg_free(fsafe_inbox_msg *m);

/* Where fsafe_inbox_list() found an entry. */
enum fsafe_inbox_state {
	FSAFE_INBOX_NEW,         /* waiting in new/ */
	FSAFE_INBOX_CLAIMED,     /* in a consumer's claimed/ directory */
	FSAFE_INBOX_QUARANTINED, /* set aside in quarantine/ */
	FSAFE_INBOX_STRAY,       /* no message where one belongs: `problem` */
};

/* One entry of fsafe_inbox_list(); valid during the callback only. */
struct fsafe_inbox_entry {
	/* A message's id; a stray's or a quarantined file's name; for a
	   directory of the layout that is not one, its name ("new"). */
	const char *name;
	enum fsafe_inbox_state state;
	/* Its directory in the inbox: "new", "claimed/n-NAME", "quarantine",
	   or "" for a directory of the layout itself. */
	const char *dir;
	/* CLAIMED by a named consumer: its name; NULL for a process
	   consumer (claimed/p-<token>) and for every other state. */
	const char *consumer;
	/* Bytes of a regular file (a message's header included), else 0. */
	uint64_t size;
	/* STRAY: why it is not a message ("symbolic link, not followed",
	   "FIFO", "not a message id", "missing", ...); otherwise NULL. */
	const char *problem;
};

/*
 * Calls fn for every message waiting in new/, every claim (with its
 * consumer) and every file in quarantine/ (not their ".reason" files) of
 * the inbox `path` relative to `dirfd`, in directory order. Reads only:
 * nothing is opened but directories, never through a symbolic link, so a
 * FIFO or a link in the inbox is reported (as FSAFE_INBOX_STRAY), never
 * followed or opened; staging files and owner records are skipped.
 * Returns 0; fn's first non-zero return, which stops the walk; or a
 * negative errno if the inbox directory cannot be read.
 */
typedef int (*fsafe_inbox_list_fn)(const struct fsafe_inbox_entry *e,
                                   void *arg);
FSAFE_API int fsafe_inbox_list(int dirfd, const char *path,
                               fsafe_inbox_list_fn fn, void *arg);

/* What a recovery did. */
struct fsafe_inbox_recovery {
	size_t size;         /* sizeof(struct fsafe_inbox_recovery), or 0 */
	unsigned returned;   /* claims returned to new/ */
	unsigned consumers;  /* dead consumers' claim directories removed */
	unsigned swept;      /* abandoned staging files removed */
	unsigned unjudged;   /* process consumers left alone: alive, or owner
	                        record unknown or unreadable */
};

#define FSAFE_INBOX_RECOVERY_INIT FSAFE__INIT(struct fsafe_inbox_recovery)
#define FSAFE_INBOX_RECOVERY_SIZE_V0                                \
	(offsetof(struct fsafe_inbox_recovery, unjudged) +          \
	 sizeof(((struct fsafe_inbox_recovery *)0)->unjudged))

/*
 * Return the claims of process consumers proven dead to new/, remove their
 * directories, and sweep staging files older than `stage_age_ms` (a live
 * writer's are never swept). Safe to run at any time, concurrently with
 * everything else. `out` may be NULL (else out->size set by the caller, as
 * with the option structs: -EINVAL below FSAFE_INBOX_RECOVERY_SIZE_V0).
 * Returns 0 or a negative errno.
 */
FSAFE_API int fsafe_inbox_recover(fsafe_inbox *ib, uint64_t stage_age_ms,
                                  struct fsafe_inbox_recovery *out);

/*
 * Damage (the shape of every store's check and repair: fsafe.h, "Damage").
 * The rules: damaged bytes are never deleted (they go to quarantine/ with a
 * reason); one damaged message costs that message, never a queue; every
 * loss is reported (check, fsafe_inbox_quarantined(), the CLI's warnings);
 * no hang (files opened O_NONBLOCK|O_NOFOLLOW, type checked first); every
 * directory under the inbox is opened without following links, so open,
 * take, ack, recover and check never work through one; check changes
 * nothing. Limits: a deleted message file leaves no trace (no index); a
 * copy under another id with a matching sequence field is delivered twice.
 *
 * check reads the inbox `path` under dirfd and reports, one call of `fn`
 * each: a missing or non-directory new/, claimed/, done/ or quarantine/
 * (a symlink included: nothing is ever followed out of the inbox); foreign
 * entries; a file in new/, a claim directory or done/ that is not a whole
 * message (foreign name, corrupt or truncated header or payload, a FIFO,
 * socket, device, directory or symbolic link in its place); a process
 * consumer whose owner is dead or whose owner record is missing or
 * damaged; an unfinished retirement; a claim also present in new/ or done/
 * (a move that stopped half way); staging files older than an hour.
 * repair moves each damaged entry on its own into quarantine/ with a
 * "<name>.reason" (never deleted, never a whole queue), recreates missing
 * directories, returns the claims of dead consumers and of those whose
 * record is damaged to new/ (they are delivered again), drops the claim
 * name of a half-done move, and sweeps abandoned stages. `lost` counts a
 * delivered, unacknowledged message whose file was damaged. Messages are
 * judged against FSAFE_INBOX_MAX_DEFAULT.
 */
FSAFE_API int fsafe_inbox_check(int dirfd, const char *path,
                                fsafe_damage_fn fn, void *arg);
FSAFE_API int fsafe_inbox_repair(int dirfd, const char *path,
                                 fsafe_damage_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* FSAFE_INBOX_H */
