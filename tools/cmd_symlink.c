/*
 * fsafe symlink: create or replace a symbolic link atomically, the deploy
 * switch `fsafe symlink release-42 current`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>

#include "cli.h"
#include "cli_opt.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] =
	"usage: fsafe symlink [--create-only] [--mkdir] [--no-sync] "
	"TARGET LINKNAME\n";

static const char help[] =
	"Make LINKNAME a symbolic link reading TARGET, atomically: whoever\n"
	"resolves LINKNAME meets the old link or the new one, never nothing,\n"
	"also after a crash. LINKNAME itself is replaced, never followed.\n"
	"\n"
	"  -c, --create-only  fail if LINKNAME exists (it stays untouched)\n"
	"  -p, --mkdir        create missing parent directories\n"
	"  -s, --no-sync      atomic but not durable (skip every fsync)\n"
	"  -h, --help         this text\n"
	"\n"
	"Exit status: 0 done, 1 failed, 2 usage error.\n";

static int report(const char *link, int r, const struct fsafe_error *e)
{
	const char *why = fsafe_strerror(e->sys_errno ? -e->sys_errno : r);

	if (r == FSAFE_ENOTDURABLE || e->published)
		cli_warn("symlink %s: %s: %s; %s published, but durability "
		         "unknown", link, e->step, why, link);
	else
		cli_warn("symlink %s: %s: %s; %s unchanged", link,
		         e->step ? e->step : "resolve", why, link);
	return CLI_FAIL;
}

int cmd_symlink(void *ctx, int argc, char **argv)
{
	struct fsafe_error e = { 0 };
	struct fsafe_write_opts opts = FSAFE_WRITE_OPTS_INIT;
	const struct cli_opt table[] = {
		CLI_BIT('c', "create-only", &opts.flags, FSAFE_CREATE_ONLY),
		CLI_BIT('p', "mkdir", &opts.flags, FSAFE_MKDIR),
		CLI_BIT('s', "no-sync", &opts.flags, FSAFE_NO_SYNC),
		CLI_HELP,
		CLI_END,
	};
	const struct cli_spec spec = { "symlink", usage, help, table, 0 };
	struct cli_args ops;
	int r = cli_parse(&spec, argc, argv, &ops);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	if (ops.argc != 2)
		return cli_spec_error(&spec, "%s", ops.argc < 2
		        ? "TARGET and LINKNAME are needed"
		        : "only TARGET and LINKNAME");
	opts.error = &e;
	r = fsafe_symlinkat(ops.argv[0], AT_FDCWD, ops.argv[1], &opts);
	return r < 0 ? report(ops.argv[1], r, &e) : CLI_OK;
}
