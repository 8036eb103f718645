/*
 * The writer's steps, for the modules that publish through it (batch,
 * stores, contained writes). Each step records the failed step's name and
 * keeps the first error sticky; fsafe_writer_commit() is the steps in order.
 */
#ifndef FSAFE_WRITER_H
#define FSAFE_WRITER_H

#include <sys/uio.h>

#include "fsafe.h"
#include "target.h"
#include "token.h"

/* The step of a create-only write that found its target. */
#define FSAFE__STEP_EXISTS "exists (create-only)"

/* The step naming a file we never replace, open nor write through: "not
   a regular file (fifo)", "... (socket)", "... (character device)", "...
   (block device)"; NULL for a regular file, a directory or a link. */
const char *fsafe__special_type(mode_t mode);

/* Options normalised from any layout of struct fsafe_write_opts. */
struct fsafe__wopts {
	unsigned flags;
	mode_t mode;
	struct fsafe_error *error;
	/* The writer lives only inside the caller's call (a one-shot
	   write): it may use the caller's directory fd as its own. */
	bool borrow_dirfd;
	/* The whole content arrives in one call, `length` bytes: the stage
	   is named from the start and its space allocated up front. */
	bool one_shot;
	size_t length;
	/* The caller can write the whole content again: a named stage is
	   not checked for a link after its lock (a new target's stage needs
	   no stat at all); a stage a sweep took before the lock shows at the
	   publish instead (fsafe__writer_stage_lost), and the caller starts
	   again. */
	bool restartable;
	/* The caller made the name new (a random id) and writes create-only:
	   no lookup of the target before staging (FSAFE__TARGET_FRESH). */
	bool fresh;
	/* The caller found no file at the name just now, under a lock of
	   its own that keeps its peers off it (the keyed store's put of a
	   new key): no lookup of the target before staging. Not
	   create-only: a file put there by other hands meanwhile is
	   replaced, without its metadata carried over. */
	bool absent;
	/* A new target's stage is unnamed (O_TMPFILE) until the publish,
	   which links it at the target's name once its data is synced: one
	   name made instead of a staging name, a rename and no lock (a
	   batch's buffer items, where the caller's directory fd is on a
	   filesystem that makes the link durable with its inode: the
	   writer applies it only to a target in that fd). A target found
	   there by then is replaced through a staging name, as without
	   this. */
	bool link_new;
	/* Publish only if the target still matches `token`. */
	bool conditional;
	struct fsafe__token token;
};

int fsafe__wopts_load(struct fsafe__wopts *o,
                      const struct fsafe_write_opts *opts);

/* As fsafe__wopts_load, and a failure reported through opts->error where
   the layout holds it. */
int fsafe__wopts_load_reporting(struct fsafe__wopts *o,
                                const struct fsafe_write_opts *opts);

/* fsafe_writer_open() with options already loaded. */
/* fsafe_write_fileat() with options loaded already (a batch item whose
   stage a sweep took before its lock starts again through this). */
int fsafe__write_oneshot(int dirfd, const char *path, const struct iovec *iov,
                         int n, struct fsafe__wopts o);
int fsafe__writer_open(int dirfd, const char *path,
                       const struct fsafe__wopts *o, fsafe_writer **out);

/* Open a writer on an already-resolved target; takes ownership of t->dirfd
   (also on failure). */
int fsafe__writer_open_target(struct fsafe__target *t,
                              const struct fsafe__wopts *o,
                              fsafe_writer **out);

/* A writer whose stage is a symbolic link reading `link_target` (no fd,
   no data sync; publish and directory sync as for a file). Takes
   ownership of t->dirfd (also on failure). */
int fsafe__writer_open_link(struct fsafe__target *t,
                            const struct fsafe__wopts *o,
                            const char *link_target, fsafe_writer **out);

/* The commit steps, for callers that interleave many writers (batch):
   link (the content is complete: copy the old target's extended
   attributes, name an O_TMPFILE stage), data sync, publish, directory
   sync.
   sync_data is link + fdatasync of data_fd. */
int fsafe__writer_link(fsafe_writer *w);
int fsafe__writer_sync_data(fsafe_writer *w);
/* The whole content in one go, written and, unless the writer does not
   sync or its stage is still unnamed (O_TMPFILE), made durable with it
   (fsafe__write_synced): sync_data then syncs only what came after, the
   copied extended attributes. */
int fsafe__writer_write_synced(fsafe_writer *w, const struct iovec *iov,
                               int n);
int fsafe__writer_publish(fsafe_writer *w);
/* The publish failed because a sweep removed the stage before it was
   locked (a restartable writer only): start the write again. */
bool fsafe__writer_stage_lost(const fsafe_writer *w);
int fsafe__writer_sync_dir(fsafe_writer *w);
/* Report the outcome through the error detail and free the writer. */
int fsafe__writer_finish(fsafe_writer *w);

/* For a caller that syncs many stages at once: the fd whose data must be
   synced before publishing (-1 if none: failed, or FSAFE_NO_SYNC), and
   the way to record that sync's failure. */
int fsafe__writer_data_fd(const fsafe_writer *w);
/* The data sync must be a full fsync (metadata was set after creation):
   such a writer syncs itself, with fsafe__writer_sync_data. */
bool fsafe__writer_needs_fsync(const fsafe_writer *w);
int fsafe__writer_fail(fsafe_writer *w, int r, const char *step);

/* The directory sync is left to the caller (the batch syncs each directory
   once): sync_dir becomes a no-op and dir_fd / needs_dir_sync tell what
   the caller must sync, before finish. */
void fsafe__writer_defer_dir_sync(fsafe_writer *w, bool defer);
int fsafe__writer_dir_fd(const fsafe_writer *w);
/* Whether that is the caller's own descriptor (borrow_dirfd, a plain
   name): the same number then names the same directory for as long as
   the caller keeps it open. */
bool fsafe__writer_dir_borrowed(const fsafe_writer *w);
bool fsafe__writer_needs_dir_sync(const fsafe_writer *w);
/* The caller's error detail, to fill in after a deferred sync fails. */
struct fsafe_error *fsafe__writer_error_out(const fsafe_writer *w);
/* Where the writer's later failures are reported from now on. */
void fsafe__writer_set_error(fsafe_writer *w, struct fsafe_error *error);

#endif
