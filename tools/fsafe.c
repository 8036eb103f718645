/*
 * fsafe(1): the command-line tool. Only calls the public API.
 * Each subcommand lives in tools/cmd_<name>.c; this file dispatches.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opt.h"
#include "cli_util.h"
#include "fsafe.h"

static const struct cli_verb commands[] = {
#define CLI_COMMAND(name, fn, summary) { name, fn, 0, INT_MAX, summary },
#include "commands.def"
#undef CLI_COMMAND
};

enum { NCOMMANDS = sizeof(commands) / sizeof(commands[0]) };

static const struct cli_spec spec = {
	.usage = "usage: fsafe COMMAND [ARGS...]\n",
};

static void usage(FILE *f)
{
	fputs(spec.usage, f);
	fputs("\ncommands:\n", f);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nfsafe COMMAND --help for a command's options; man fsafe.\n"
	           "exit status: 0 ok, 1 operation failed, 2 usage\n");
}

int main(int argc, char **argv)
{
	if (cli_open_std() < 0)
		return CLI_FAIL;
	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return cli_flush_stdout("--help") ? CLI_OK : CLI_FAIL;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("fsafe %s\n", fsafe_version());
		return cli_flush_stdout("--version") ? CLI_OK : CLI_FAIL;
	}
	return cli_dispatch(&spec, commands, NCOMMANDS, NULL, argc - 1,
	                    argv + 1);
}
