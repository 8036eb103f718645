/*
 * The writer's steps, for the modules that publish through it (batch,
 * stores, contained writes). Each step records the failed step's name and
 * keeps the first error sticky; fsafe_writer_commit() is the steps in order.
 */
#ifndef FSAFE_WRITER_H
#define FSAFE_WRITER_H

#include "fsafe.h"
#include "target.h"

/* Options normalised from any layout of struct fsafe_write_opts. */
struct fsafe__wopts {
	unsigned flags;
	mode_t mode;
	struct fsafe_error *error;
};

int fsafe__wopts_load(struct fsafe__wopts *o,
                      const struct fsafe_write_opts *opts);

/* Open a writer on an already-resolved target; takes ownership of t->dirfd
   (also on failure). */
int fsafe__writer_open_target(struct fsafe__target *t,
                              const struct fsafe__wopts *o,
                              fsafe_writer **out);

/* The three commit steps, for callers that interleave many writers. */
int fsafe__writer_sync_data(fsafe_writer *w);
int fsafe__writer_publish(fsafe_writer *w);
int fsafe__writer_sync_dir(fsafe_writer *w);
/* Report the outcome through the error detail and free the writer. */
int fsafe__writer_finish(fsafe_writer *w);

#endif
