/*
 * fsafe is-staging: the staging-name contract for scripts, so that they
 * never copy the pattern (which only the library may define).
 */
#include <stdio.h>

#include "cli.h"
#include "cli_opt.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] = "usage: fsafe is-staging [-v] NAME...\n";

static const char help[] =
	"Exit 0 if every NAME is a bare file name of the form fsafe gives its\n"
	"staging files (.fsafe-<24 lowercase hex digits>.tmp), else 1.\n"
	"\n"
	"  -v, --verbose  print \"staging NAME\" or \"other NAME\" for each\n"
	"  -h, --help     this text\n"
	"\n"
	"Exit status: 0 all staging names, 1 some not, 2 usage error.\n";

int cmd_is_staging(void *ctx, int argc, char **argv)
{
	bool verbose = false, all = true;
	const struct cli_opt opts[] = {
		CLI_FLAG('v', "verbose", &verbose),
		CLI_HELP,
		CLI_END,
	};
	const struct cli_spec spec = { "is-staging", usage, help, opts, 0 };
	struct cli_args names;
	int r = cli_parse(&spec, argc, argv, &names);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	if (!names.argc)
		return cli_spec_error(&spec, "NAME is missing");
	for (int i = 0; i < names.argc; i++) {
		bool yes = fsafe_is_staging_name(names.argv[i]);
		all &= yes;
		if (verbose)
			printf("%s %s\n", yes ? "staging" : "other",
			       names.argv[i]);
	}
	if (verbose && !cli_flush_stdout("is-staging"))
		return CLI_FAIL;
	return all ? CLI_OK : CLI_FAIL;
}
