/* Shared by the CLI's subcommands. */
#ifndef FSAFE_CLI_H
#define FSAFE_CLI_H

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

struct cli_command {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is the command name */
	const char *summary;
};

#define CLI_COMMAND(name, fn, summary) int fn(int argc, char **argv);
#include "commands.def"
#undef CLI_COMMAND

#endif
