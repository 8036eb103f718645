/*
 * fsafe stat-token: print the token of FILE for a later
 * `fsafe write --if-unchanged TOKEN FILE` (read, modify, write back only
 * if nobody wrote in between).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>

#include "cli.h"
#include "cli_opt.h"
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

int cmd_stat_token(void *ctx, int argc, char **argv)
{
	char token[FSAFE_TOKEN_LEN];
	unsigned flags = 0;
	const struct cli_opt opts[] = {
		CLI_BIT('n', "no-follow", &flags, FSAFE_NO_FOLLOW),
		CLI_HELP,
		CLI_END,
	};
	const struct cli_spec spec = { "stat-token", usage, help, opts, 0 };
	struct cli_args ops;
	int r = cli_parse(&spec, argc, argv, &ops);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	if (ops.argc != 1)
		return cli_spec_error(&spec, "%s", ops.argc ? "only one FILE"
		                                            : "FILE is missing");
	if ((r = fsafe_token_get(AT_FDCWD, ops.argv[0], flags, token)) < 0) {
		cli_warn("stat-token %s: %s", ops.argv[0], fsafe_strerror(r));
		return CLI_FAIL;
	}
	printf("%s\n", token);
	return cli_flush_stdout("stat-token") ? CLI_OK : CLI_FAIL;
}
