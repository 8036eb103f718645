/* Shared by the CLI's subcommands. */
#ifndef FSAFE_CLI_H
#define FSAFE_CLI_H

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* A subcommand: ctx is NULL; argv[0] is its name (see cli_opt.h). */
#define CLI_COMMAND(name, fn, summary) \
	int fn(void *ctx, int argc, char **argv);
#include "commands.def"
#undef CLI_COMMAND

#endif
