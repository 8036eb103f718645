/* Messages, option errors and output checks shared by the subcommands. */
#ifndef FSAFE_CLI_UTIL_H
#define FSAFE_CLI_UTIL_H

#include <stdbool.h>

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* "fsafe: " + the message + newline, on stderr. */
void cli_warn(const char *fmt, ...) CLI_PRINTF(1, 2);

/*
 * Reports the option getopt_long() just rejected (it must run with opterr
 * = 0 and an optstring starting with ':'), then the usage line, on stderr.
 * Returns CLI_USAGE.
 */
int cli_bad_option(const char *cmd, char **argv, int got, const char *usage);

/* A usage error that is not about one option. Returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *why, const char *usage);

/* Flushes standard output; false (after a message) if anything written to
   it was lost, since a silently truncated listing is worse than none. */
bool cli_flush_stdout(const char *cmd);

#endif
