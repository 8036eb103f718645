/*
 * fsafe is-staging: the staging-name contract for scripts, so that they
 * never copy the pattern (which only the library may define).
 */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
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

int cmd_is_staging(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool verbose = false, all = true;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		if (c == 'v') {
			verbose = true;
		} else if (c == 'h') {
			fputs(usage, stdout);
			fputs(help, stdout);
			return cli_flush_stdout("is-staging") ? CLI_OK
			                                      : CLI_FAIL;
		} else {
			return cli_bad_option("is-staging", argv, c, usage);
		}
	}
	if (optind == argc)
		return cli_usage_error("is-staging", "NAME is missing", usage);
	for (int i = optind; i < argc; i++) {
		bool yes = fsafe_is_staging_name(argv[i]);
		all &= yes;
		if (verbose)
			printf("%s %s\n", yes ? "staging" : "other", argv[i]);
	}
	if (verbose && !cli_flush_stdout("is-staging"))
		return CLI_FAIL;
	return all ? CLI_OK : CLI_FAIL;
}
