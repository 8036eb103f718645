/*
 * fsafe(1): the command-line tool. Only calls the public API.
 * Each subcommand lives in tools/cmd_<name>.c; this file dispatches.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fsafe.h"

static const struct cli_command commands[] = {
#define CLI_COMMAND(name, fn, summary) { name, fn, summary },
#include "commands.def"
#undef CLI_COMMAND
};

static void usage(FILE *f)
{
	fprintf(f, "usage: fsafe COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nfsafe COMMAND --help for a command's options; man fsafe.\n"
	           "exit status: 0 ok, 1 operation failed, 2 usage\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return CLI_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("fsafe %s\n", fsafe_version());
		return CLI_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "fsafe: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return CLI_USAGE;
}
