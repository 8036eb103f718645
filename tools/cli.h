/* Shared by the CLI's subcommands. */
#ifndef FSAFE_CLI_H
#define FSAFE_CLI_H

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* What main() hands every subcommand, as its ctx. */
struct cli_env {
	unsigned closed_std; /* bit N: descriptor N was closed at start */
};

/* Reading standard input that was closed at start is an error (EBADF),
   not an empty input: a caller that forgot it must not store nothing. */
#define CLI_STDIN_CLOSED(env) (((const struct cli_env *)(env))->closed_std & 1u)

#define CLI_COMMAND(name, fn, summary) \
	int fn(void *env, int argc, char **argv);
#include "commands.def"
#undef CLI_COMMAND

#endif
