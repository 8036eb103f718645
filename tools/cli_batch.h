/* fsafe write --batch: many files in group commits. */
#ifndef FSAFE_CLI_BATCH_H
#define FSAFE_CLI_BATCH_H

#include "fsafe.h"

/*
 * Reads NUL-separated TARGET and SOURCE pairs from standard input and
 * replaces each TARGET with SOURCE's content, every file atomically and
 * durably, with group commits. `opts` applies to every target. Returns the
 * exit status.
 */
int cli_write_batch(const struct fsafe_write_opts *opts);

#endif
