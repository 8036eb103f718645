/*
 * fsafe stat-token: print the token of FILE for a later
 * `fsafe write --if-unchanged TOKEN FILE` (read, modify, write back only
 * if nobody wrote in between).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] = "usage: fsafe stat-token [--no-follow] FILE\n";

static const char help[] =
	"Print FILE's token: its identity (device, inode, size, change time)\n"
	"as one word. Take it before reading FILE; `fsafe write --if-unchanged\n"
	"TOKEN FILE` then replaces FILE only if it is still that file.\n"
	"\n"
	"  -n, --no-follow  if FILE is a symlink, the link itself\n"
	"  -h, --help       this text\n"
	"\n"
	"Exit status: 0 printed, 1 failed, 2 usage error.\n";

int cmd_stat_token(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "no-follow", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char token[FSAFE_TOKEN_LEN];
	unsigned flags = 0;
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":nh", longopts, NULL)) != -1) {
		if (c == 'n') {
			flags |= FSAFE_NO_FOLLOW;
		} else if (c == 'h') {
			fputs(usage, stdout);
			fputs(help, stdout);
			return cli_flush_stdout("stat-token") ? CLI_OK
			                                      : CLI_FAIL;
		} else {
			return cli_bad_option("stat-token", argv, c, usage);
		}
	}
	if (argc - optind != 1)
		return cli_usage_error("stat-token", argc == optind
		        ? "FILE is missing" : "only one FILE", usage);
	if ((r = fsafe_token_get(AT_FDCWD, argv[optind], flags, token)) < 0) {
		cli_warn("stat-token %s: %s", argv[optind], fsafe_strerror(r));
		return CLI_FAIL;
	}
	printf("%s\n", token);
	return cli_flush_stdout("stat-token") ? CLI_OK : CLI_FAIL;
}
