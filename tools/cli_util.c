#include "cli_util.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("fsafe: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_usage_error(const char *cmd, const char *why, const char *usage)
{
	cli_warn("%s: %s", cmd, why);
	fprintf(stderr, "%s(fsafe %s --help for details)\n", usage, cmd);
	return CLI_USAGE;
}

int cli_bad_option(const char *cmd, char **argv, int got, const char *usage)
{
	char why[256], name[128];
	/* A long option is named by the argument getopt just stepped over; a
	   short one only by optopt, since it may sit inside a cluster (-0x). */
	const char *arg = argv[optind - 1];

	if (!strncmp(arg, "--", 2))
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="),
		         arg);
	else
		snprintf(name, sizeof(name), "-%c", optopt);
	snprintf(why, sizeof(why), got == ':' ? "option %s needs a value"
	                                      : "unknown option %s", name);
	return cli_usage_error(cmd, why, usage);
}

bool cli_flush_stdout(const char *cmd)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return true;
	cli_warn("%s: writing standard output: %s", cmd,
	         errno ? strerror(errno) : "error");
	return false;
}
