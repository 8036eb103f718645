/*
 * The batch's internal entry points, for the stores built on it.
 */
#ifndef FSAFE_BATCH_INTERNAL_H
#define FSAFE_BATCH_INTERNAL_H

#include "fsafe/batch.h"

/* fsafe_batch_commit without its directory syncs: the caller syncs the
   directories the items were published into, with syncs of its own (the
   checkpoint's generation directory, beside its manifest). Until then
   an item's result of 0 says its data is durable, not its name. */
int fsafe__batch_commit_names_unsynced(fsafe_batch *b);

/* Sync the items' data on `pool` (its ring or threads, kept by the
   caller, who outlives the batch's commit) rather than on a pool of the
   commit's own. */
struct fsafe__sync_pool;
void fsafe__batch_use_pool(fsafe_batch *b, struct fsafe__sync_pool *pool);

#ifdef FSAFE_TESTING
/* Test builds only: the fewest items of a commit that links new files
   at their names (batch.c, LINK_NEW_MIN); -1 keeps that default. */
extern volatile int fsafe__test_link_new_min;
/* The fewest items of a commit that overlaps its windows (batch.c,
   OVERLAP_MIN), so that a few items can be killed and failed at every
   call there too; -1 keeps that default. */
extern volatile int fsafe__test_overlap_min;
#endif

#endif
