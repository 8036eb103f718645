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
 * It is opened for the other direction only (input write-only, outputs
 * read-only), so using it still fails with EBADF, as the closed one did:
 * nothing is stored from, or printed into, nowhere. Returns 0 or -errno.
 */
int cli_open_std(void);

/*
 * A path refused beneath --root ROOT (an escape, a link on the way), from
 * the root's error `e` and result `r`: "STEP (beneath ROOT)" into buf, the
 * step naming the problem (and the component) where the errno (EXDEV,
 * ELOOP) would only blur it. False when `r` is not such a refusal.
 */
bool cli_root_refusal(const struct fsafe_error *e, int r,
                      const char *root_name, char *buf, size_t len);

/* What is at path itself (never followed), in words: "a FIFO", "a
   symbolic link", "a directory", "a regular file"...; NULL if nothing.
   For a message that names why a lock file or a store's directory was
   refused, where the errno alone (EINVAL, ELOOP) would not. */
const char *cli_file_type(const char *path);

/* A store's directory `path` could not be opened (r): "LABEL: a FIFO is
   there, not a directory" when something else stands at its name (or a
   dangling link), else "LABEL: ERROR". */
void cli_warn_dir(const char *label, const char *path, int r);

#endif
