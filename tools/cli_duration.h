/* Durations on the command line: a whole number and an optional unit. */
#ifndef FSAFE_CLI_DURATION_H
#define FSAFE_CLI_DURATION_H

#include <stdint.h>

/*
 * Parses "<digits>[ms|s|m|h|d]" (no unit: seconds) into milliseconds.
 * Returns 0; -EINVAL for anything else (signs, spaces, fractions, unknown
 * units, empty); -ERANGE above INT64_MAX milliseconds (some 292 million years).
 */
int cli_parse_duration(const char *s, uint64_t *ms);

#endif
