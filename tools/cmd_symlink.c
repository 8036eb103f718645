/*
 * fsafe symlink: create or replace a symbolic link atomically, the deploy
 * switch `fsafe symlink release-42 current`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
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

int cmd_symlink(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "create-only", no_argument, NULL, 'c' },
		{ "mkdir", no_argument, NULL, 'p' },
		{ "no-sync", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct fsafe_error e = { 0 };
	struct fsafe_write_opts opts = FSAFE_WRITE_OPTS_INIT;
	int c, r;

	opts.error = &e;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":cpsh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': opts.flags |= FSAFE_CREATE_ONLY; break;
		case 'p': opts.flags |= FSAFE_MKDIR; break;
		case 's': opts.flags |= FSAFE_NO_SYNC; break;
		case 'h':
			fputs(usage, stdout);
			fputs(help, stdout);
			return cli_flush_stdout("symlink") ? CLI_OK : CLI_FAIL;
		default: return cli_bad_option("symlink", argv, c, usage);
		}
	}
	if (argc - optind != 2)
		return cli_usage_error("symlink", argc - optind < 2
		        ? "TARGET and LINKNAME are needed"
		        : "only TARGET and LINKNAME", usage);
	r = fsafe_symlinkat(argv[optind], AT_FDCWD, argv[optind + 1], &opts);
	return r < 0 ? report(argv[optind + 1], r, &e) : CLI_OK;
}
