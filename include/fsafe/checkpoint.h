/*
 * fsafe/checkpoint.h: a set of files saved and restored as one atomic unit.
 * Included by <fsafe.h>.
 *
 * A checkpoint directory holds
 *
 *     gen-<12 digits>/     one generation: the files plus ".manifest"
 *     CURRENT              "gen-<12 digits>\n": the complete generation
 *     events.log           the audit trail (one line per event)
 *     LOCK                 the writer's lock (fsafe/lock.h, link mode)
 *     OPEN                 present while a writer has it open
 *
 * A commit writes a new generation directory and syncs it (files, the
 * directory, its parent); only then is CURRENT replaced atomically
 * (fsafe_write_fileat). A crash at any point leaves the old CURRENT (old
 * set) or the new one (new set), never a mix. A generation newer than
 * CURRENT is partial: load never picks it and the next open or commit
 * removes it. The last `keep` generations stay (older ones go only after
 * CURRENT is durable; the removal runs on a thread of the handle's own
 * after commit returns, and load, generations, verify, the next commit
 * and close wait for it). A commit also sums the added buffers (SHA-256
 * and CRC-32C, on a short-lived thread each) while the files are written
 * and synced.
 *
 * The manifest records a format version, the caller's writer revision, the
 * sequence number, the time, and each file's size, SHA-256 and CRC-32C.
 * Load checks every byte against the CRC-32C (at the speed memory is
 * read; a generation saved before the CRC-32C is checked against its
 * SHA-256); verify and check against both.
 *
 * Damage (fsafe.h, "Damage"): damaged bytes are never deleted, repair
 * moves them to quarantine/ with a reason; nothing acknowledged and
 * undamaged is dropped: load can fall back to the newest intact generation
 * and repair rebuilds CURRENT from it, and while CURRENT is missing or
 * unreadable nothing removes a generation; a commit never reuses a number
 * that exists or existed (gen-* entries, quarantine/, events.log); every
 * loss is reported (check, an event, the CLI's warning); every file is
 * opened without following links or blocking (a FIFO, a socket) and its
 * type checked first; read-only calls change nothing.
 */
#ifndef FSAFE_CHECKPOINT_H
#define FSAFE_CHECKPOINT_H

#include "fsafe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_checkpoint fsafe_checkpoint;
typedef struct fsafe_checkpoint_tx fsafe_checkpoint_tx;
typedef struct fsafe_checkpoint_stream fsafe_checkpoint_stream;
typedef struct fsafe_checkpoint_snapshot fsafe_checkpoint_snapshot;

/* Longest file name and revision string, in bytes (a longer revision is
   refused by open with -EINVAL, step "revision (too long)"). */
#define FSAFE_CHECKPOINT_NAME_MAX 255
#define FSAFE_CHECKPOINT_REVISION_MAX 1024
/* Default number of generations kept. */
#define FSAFE_CHECKPOINT_KEEP 2

enum {
	/* Open flags. */
	/* Fail with -EWOULDBLOCK instead of waiting for another writer. */
	FSAFE_CHECKPOINT_NO_WAIT = 1u << 0,
	/* Create the directory and its missing parents (mkdir -p, 0777 less
	   the umask) if it does not exist, each synced into its parent. */
	FSAFE_CHECKPOINT_CREATE = 1u << 1,
	/* Inspect only: no lock, no marker, no recovery, no events; begin()
	   fails with -EROFS. A writer may work meanwhile: a load that races
	   the removal of its generation fails (-ENOENT) and may be retried. */
	FSAFE_CHECKPOINT_READ_ONLY = 1u << 2,
	/* Never hard-link a file whose content equals the previous
	   generation's; write every file. */
	FSAFE_CHECKPOINT_NO_LINK = 1u << 3,
};

struct fsafe_checkpoint_opts {
	size_t size;          /* sizeof(struct fsafe_checkpoint_opts), or 0 */
	unsigned flags;       /* FSAFE_CHECKPOINT_* open flags */
	unsigned keep;        /* generations kept; 0: FSAFE_CHECKPOINT_KEEP */
	/* The caller's writer revision (a version string), stored with each
	   commit and compared on load; NULL: "". At most
	   FSAFE_CHECKPOINT_REVISION_MAX bytes, no control characters (a
	   newline included): else open fails with -EINVAL, step "revision
	   (too long)" or "revision (control character)". */
	const char *revision;
	mode_t mode;          /* files' mode before umask; 0: 0666 */
	/* Optional: filled in when the open fails, and kept by the handle:
	   every later call on it, or on a transaction or stream made from
	   it, that fails fills it too (step and errno). */
	struct fsafe_error *error;
};

#define FSAFE_CHECKPOINT_OPTS_INIT \
	FSAFE__INIT(struct fsafe_checkpoint_opts)
#define FSAFE_CHECKPOINT_OPTS_SIZE_V0                               \
	(offsetof(struct fsafe_checkpoint_opts, error) +            \
	 sizeof(((struct fsafe_checkpoint_opts *)0)->error))

/*
 * Open the checkpoint directory `path` (relative to `dirfd`). Takes its
 * lock (one writer process at a time; waits unless NO_WAIT), detects an
 * unclean shutdown (OPEN left behind: a "recovered" event), removes
 * partial generations, generations beyond `keep` and abandoned staging
 * files (none while CURRENT is missing or damaged: then the problem is
 * kept for fsafe_checkpoint_current_error() and the open succeeds), and
 * sets a torn tail of events.log (bytes after its last intact record)
 * aside: the log to quarantine/, its intact records back in place.
 * Returns 0, -EWOULDBLOCK, or another negative errno.
 */
FSAFE_API int fsafe_checkpoint_open(int dirfd, const char *path,
                                    const struct fsafe_checkpoint_opts *opts,
                                    fsafe_checkpoint **out);

/* Whether this open found the previous writer's shutdown unclean. */
FSAFE_API bool fsafe_checkpoint_was_unclean(const fsafe_checkpoint *cp);

/* The current generation's sequence number; 0 when there is none. */
FSAFE_API uint64_t fsafe_checkpoint_current(const fsafe_checkpoint *cp);

/* Clean close: removes OPEN (durably) and releases the lock. Returns 0 or
   a negative errno (the handle is freed in any case). NULL is a no-op. */
FSAFE_API int fsafe_checkpoint_close(fsafe_checkpoint *cp);

/* ---- saving ------------------------------------------------------------ */

/* Start a new generation (one at a time per handle). */
FSAFE_API int fsafe_checkpoint_begin(fsafe_checkpoint *cp,
                                     fsafe_checkpoint_tx **out);

/*
 * Add file `name` (a bare name: no '/', not "." or "..", not ".manifest",
 * no control characters, not a staging name) with `len` bytes at `buf`.
 * The buffer is not copied: it must stay valid until commit or abort
 * returns. -EEXIST if the name was added already.
 */
FSAFE_API int fsafe_checkpoint_add(fsafe_checkpoint_tx *tx, const char *name,
                                   const void *buf, size_t len);

/*
 * Add file `name` by streaming, through a managed writer (fsafe.h) in the
 * generation directory: write with fsafe_checkpoint_stream_write(), then
 * fsafe_checkpoint_stream_close() before commit. Each open stream holds a
 * descriptor.
 */
FSAFE_API int fsafe_checkpoint_add_stream(fsafe_checkpoint_tx *tx,
                                          const char *name,
                                          fsafe_checkpoint_stream **out);
FSAFE_API int fsafe_checkpoint_stream_write(fsafe_checkpoint_stream *s,
                                            const void *buf, size_t len);
/* Finish the file (the handle is gone afterwards). A failure here, or an
   earlier write failure, makes the whole transaction fail at commit. */
FSAFE_API int fsafe_checkpoint_stream_close(fsafe_checkpoint_stream *s);

/*
 * Write and sync the generation, then replace CURRENT; frees the
 * transaction whatever the outcome. On 0 the new set is durable and
 * `*generation` (if not NULL) is its sequence number. On a negative errno
 * nothing changed: CURRENT names the previous set and the partial
 * generation is gone (or, if removing it failed too, is ignored by load
 * and removed by the next open or commit). FSAFE_ENOTDURABLE: CURRENT was
 * replaced, but its directory sync failed. -EBUSY if a stream is open.
 */
FSAFE_API int fsafe_checkpoint_commit(fsafe_checkpoint_tx *tx,
                                      uint64_t *generation);

/* Discard the transaction (nothing changes). NULL is a no-op. */
FSAFE_API void fsafe_checkpoint_abort(fsafe_checkpoint_tx *tx);

/* ---- loading ----------------------------------------------------------- */

enum {
	/* Load flags. */
	/* When the requested generation is damaged, load the newest older
	   complete generation instead (result FSAFE_CHECKPOINT_FELL_BACK). */
	FSAFE_CHECKPOINT_FALLBACK = 1u << 0,
	/* Read the manifest only: names, sizes, revision, time; no bytes,
	   no hash check (for listings). */
	FSAFE_CHECKPOINT_MANIFEST_ONLY = 1u << 1,
};

/* Positive load results (warnings, ORed; the snapshot is valid). */
#define FSAFE_CHECKPOINT_OTHER_REVISION 1 /* saved by another revision */
#define FSAFE_CHECKPOINT_FELL_BACK 2      /* an older generation loaded */

/* What a load or verify found wrong. */
struct fsafe_checkpoint_damage {
	/* The damaged generation; 0: nothing found, or (file "CURRENT")
	   CURRENT itself is missing, malformed or not a regular file. */
	uint64_t generation;
	int code;            /* -EBADMSG (hash, size or manifest), -ENOENT... */
	/* The file that failed, as the manifest names it; "" when the
	   manifest (or the generation's directory) did; "CURRENT". */
	char file[FSAFE_CHECKPOINT_NAME_MAX + 1];
};

struct fsafe_checkpoint_load_opts {
	size_t size;         /* sizeof(struct fsafe_checkpoint_load_opts), or 0 */
	unsigned flags;      /* FSAFE_CHECKPOINT_FALLBACK, _MANIFEST_ONLY */
	uint64_t generation; /* 0: the current one */
	/* Optional: the first damage found (also when falling back). */
	struct fsafe_checkpoint_damage *damage;
};

#define FSAFE_CHECKPOINT_LOAD_OPTS_INIT \
	FSAFE__INIT(struct fsafe_checkpoint_load_opts)
#define FSAFE_CHECKPOINT_LOAD_OPTS_SIZE_V0                          \
	(offsetof(struct fsafe_checkpoint_load_opts, damage) +      \
	 sizeof(((struct fsafe_checkpoint_load_opts *)0)->damage))

/*
 * Load a generation, checking every file's size and CRC-32C (its SHA-256
 * where the manifest has no CRC-32C: saved before it). Returns 0 or
 * a positive FSAFE_CHECKPOINT_* warning with `*out` set; -ENOENT when
 * there is no checkpoint (or no such generation); -EBADMSG when a file or
 * the manifest does not match (damage names it); -EPROTONOSUPPORT for a
 * manifest format this library does not know; or another negative errno.
 * Records a "loaded" event (not in READ_ONLY mode), written but not
 * synced: a load never waits for the device, and a crash may lose that
 * record (nothing else). `opts` may be NULL.
 */
FSAFE_API int fsafe_checkpoint_load(fsafe_checkpoint *cp,
                                    const struct fsafe_checkpoint_load_opts *opts,
                                    fsafe_checkpoint_snapshot **out);

/*
 * fsafe_checkpoint_load into the memory of *snap, an earlier snapshot
 * (or NULL: a plain load), which it consumes whatever it returns: each
 * file is read into the old buffer of the same name (grown when the file
 * is larger), so a reload fills pages already mapped instead of faulting
 * in fresh ones, and what no file took is freed. *snap is then the new
 * snapshot, or NULL when the load fails; the old one's bytes are gone
 * either way (keep another snapshot to fall back on).
 */
FSAFE_API int fsafe_checkpoint_reload(fsafe_checkpoint *cp,
                                      const struct fsafe_checkpoint_load_opts *opts,
                                      fsafe_checkpoint_snapshot **snap);

FSAFE_API uint64_t fsafe_checkpoint_snapshot_generation(
	const fsafe_checkpoint_snapshot *s);
FSAFE_API const char *fsafe_checkpoint_snapshot_revision(
	const fsafe_checkpoint_snapshot *s);
/* Commit time, Unix time in milliseconds. */
FSAFE_API int64_t fsafe_checkpoint_snapshot_time_ms(
	const fsafe_checkpoint_snapshot *s);
FSAFE_API size_t fsafe_checkpoint_snapshot_count(
	const fsafe_checkpoint_snapshot *s);
/* File i's name, size and bytes (NULL with MANIFEST_ONLY; never NULL
   otherwise, also for an empty file; from 64 KiB, on a 4 KiB boundary).
   Files are in name order. */
FSAFE_API const char *fsafe_checkpoint_snapshot_name(
	const fsafe_checkpoint_snapshot *s, size_t i);
FSAFE_API uint64_t fsafe_checkpoint_snapshot_size(
	const fsafe_checkpoint_snapshot *s, size_t i);
FSAFE_API const void *fsafe_checkpoint_snapshot_data(
	const fsafe_checkpoint_snapshot *s, size_t i);
/* File i's SHA-256 as 64 lowercase hex digits. */
FSAFE_API const char *fsafe_checkpoint_snapshot_hash(
	const fsafe_checkpoint_snapshot *s, size_t i);
/* The index of file `name`, or -ENOENT. */
FSAFE_API long fsafe_checkpoint_snapshot_find(
	const fsafe_checkpoint_snapshot *s, const char *name);
FSAFE_API void fsafe_checkpoint_snapshot_free(fsafe_checkpoint_snapshot *s);

/*
 * The generations present that load could use (those not newer than
 * CURRENT; every one while CURRENT is damaged), oldest first: fills up to `max` sequence numbers and returns
 * how many there are (which may exceed max), or a negative errno.
 */
FSAFE_API int fsafe_checkpoint_generations(fsafe_checkpoint *cp,
                                           uint64_t *seqs, size_t max);

/*
 * Check generation `generation` (0: current) file by file without keeping
 * the bytes, each against its size, SHA-256 and CRC-32C. Returns 0, or
 * -EBADMSG / -ENOENT / ... with damage filled.
 */
FSAFE_API int fsafe_checkpoint_verify(fsafe_checkpoint *cp,
                                      uint64_t generation,
                                      struct fsafe_checkpoint_damage *damage);

/* ---- damage -------------------------------------------------------------- */

/*
 * Why this handle could not trust CURRENT when it opened: 0 (it could),
 * -ENOENT (missing while generations exist), -EBADMSG (malformed), or
 * -EISDIR / -EBADFD / -ELOOP / -ENXIO (not a regular file). While it is not 0,
 * nothing removes a generation; the next commit quarantines a damaged
 * CURRENT and writes a new one; load without a generation number fails
 * (damage->file "CURRENT") unless FSAFE_CHECKPOINT_FALLBACK finds the
 * newest intact generation.
 */
FSAFE_API int fsafe_checkpoint_current_error(const fsafe_checkpoint *cp);

/*
 * Check the checkpoint in `path` without changing anything (fsafe.h,
 * "Damage"): every generation's directory, manifest and files (each
 * read and hashed), CURRENT, events.log, OPEN, LOCK and quarantine/, and
 * the generations events.log says were saved and never removed. A
 * generation newer than CURRENT (a save that did not finish) is reported
 * too, unless a live writer holds the lock (its save in progress). Returns the number of problems, 0 clean, or a negative errno.
 */
FSAFE_API int fsafe_checkpoint_check(int dirfd, const char *path,
                                     fsafe_damage_fn fn, void *arg);

/*
 * Repair the checkpoint in `path` under its lock (-EWOULDBLOCK while a
 * writer holds it): each damaged or unfinished generation, a damaged
 * CURRENT, an entry of an intact generation that its manifest does not
 * name (alone), and an events.log, OPEN or LOCK that is not a regular file go
 * to quarantine/ (with "<name>.why", the reason); CURRENT is rebuilt to
 * name the newest intact generation (not one newer than a CURRENT that
 * was readable, unless events.log says it was saved: CURRENT was set
 * back); a generation events.log says was saved and never removed, but
 * missing, is reported as lost and the loss recorded; a log with damaged records goes to quarantine and its
 * intact records are written back. Each step is an event. Returns the
 * number of problems dealt with, or a negative errno.
 */
FSAFE_API int fsafe_checkpoint_repair(int dirfd, const char *path,
                                      fsafe_damage_fn fn, void *arg);

/* ---- the audit trail --------------------------------------------------- */

enum fsafe_checkpoint_event_kind {
	FSAFE_CHECKPOINT_EV_SAVED = 1,
	FSAFE_CHECKPOINT_EV_LOADED = 2,
	/* Open found the previous writer's shutdown unclean. */
	FSAFE_CHECKPOINT_EV_RECOVERED = 3,
	/* A generation was removed (old, or partial): recorded as its removal
	   starts, with the save that made it old. */
	FSAFE_CHECKPOINT_EV_REMOVED = 4,
	/* A damaged generation (or CURRENT, events.log, OPEN) was moved to
	   quarantine/; the generation is 0 for anything but a generation. */
	FSAFE_CHECKPOINT_EV_QUARANTINED = 5,
	/* CURRENT was rebuilt to name this generation. */
	FSAFE_CHECKPOINT_EV_REPAIRED = 6,
};

struct fsafe_checkpoint_event {
	int64_t time_ms;     /* Unix time in milliseconds */
	pid_t pid;
	enum fsafe_checkpoint_event_kind kind;
	uint64_t generation; /* for RECOVERED: the current one at recovery */
};

/* "saved", "loaded", "recovered", "removed", "quarantined", "repaired";
   NULL for another value. */
FSAFE_API const char *fsafe_checkpoint_event_name(
	enum fsafe_checkpoint_event_kind kind);

/* Called once per event; 0 goes on, anything else stops the walk. */
typedef int (*fsafe_checkpoint_event_fn)(const struct fsafe_checkpoint_event *e,
                                         void *arg);

/*
 * Call `fn` for each intact event of the checkpoint in `path`, in order,
 * without taking the lock. A damaged record (a torn tail after a power
 * cut) is skipped and counted in `*damaged` (if not NULL). `fn` returns 0
 * to go on, anything else to stop (and that is returned). Returns 0,
 * -ENOENT when there is no log, or another negative errno.
 */
FSAFE_API int fsafe_checkpoint_events(int dirfd, const char *path,
                                      fsafe_checkpoint_event_fn fn,
                                      void *arg, size_t *damaged);

#ifdef __cplusplus
}
#endif

#endif
