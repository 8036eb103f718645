/* Messages, option errors and output checks shared by the subcommands. */
#ifndef FSAFE_CLI_UTIL_H
#define FSAFE_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsafe.h"

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* "fsafe: " + the message + newline, on stderr. */
void cli_warn(const char *fmt, ...) CLI_PRINTF(1, 2);

/* A usage error that is not about one option. Returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *why, const char *usage);

/* Flushes standard output; false (after a message) if anything written to
   it was lost, since a silently truncated listing is worse than none. */
bool cli_flush_stdout(const char *cmd);

/* All of fd (up to max bytes; -EMSGSIZE beyond) into a malloc'd buffer,
   with a NUL one past its end; a signal caught (cli_signal.h) ends it with
   -EINTR. Returns 0 or -errno. */
int cli_read_all(int fd, uint64_t max, char **buf, size_t *len);

/*
 * Opens /dev/null on whichever of standard input, output and error is
 * closed: the next descriptor the library opens (a store's directory)
 * would otherwise land there and be read or written as if it were one.
 * Sets bit N of *closed for each descriptor N that was closed (a command
 * that reads its input still refuses a closed one). Returns 0 or -errno.
 */
int cli_open_std(unsigned *closed);

/* "fsafe: LABEL: STEP: ERROR" (or without the step if e has none): the
   library's detail of a failed call, in one place. */
void cli_warn_error(const char *label, int r, const struct fsafe_error *e);

#endif
