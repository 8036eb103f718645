/*
 * fsafe sweep: remove the staging files that crashed writers left behind,
 * once they are older than a given age, and list them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_duration.h"
#include "cli_signal.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] =
	"usage: fsafe sweep --older-than DURATION [--dry-run] [-0]\n"
	"                   [--root ROOT] DIR...\n";

static const char help[] =
	"Remove abandoned staging files (see fsafe is-staging) directly in\n"
	"each DIR whose last change is more than DURATION ago and that no\n"
	"live writer holds. Prints each one removed as DIR/NAME.\n"
	"\n"
	"  -o, --older-than DURATION  a whole number with a unit: ms, s, m,\n"
	"                             h or d (no unit: seconds); required\n"
	"  -n, --dry-run              print what would go, remove nothing\n"
	"  -0, --null                 end each name with NUL, not newline\n"
	"  -r, --root ROOT            each DIR is relative to ROOT and cannot\n"
	"                             leave it: no absolute path, no '..'\n"
	"                             above ROOT, no symbolic link on the way\n"
	"  -h, --help                 this text\n"
	"\n"
	"Exit status: 0 every DIR swept, 1 some DIR failed, 2 usage error.\n";

struct sweep_args {
	const char *root;
	uint64_t older_than_ms;
	bool have_age;
	unsigned flags;
	char sep;
	bool help;
};

static int parse_age(const char *s, struct sweep_args *a)
{
	int r = cli_parse_duration(s, &a->older_than_ms);

	if (r == 0) {
		a->have_age = true;
		return CLI_OK;
	}
	return cli_usage_error("sweep", r == -ERANGE
	        ? "--older-than: duration too large"
	        : "--older-than takes a whole number and a unit: ms, s, m, h "
	          "or d", usage);
}

static int parse_args(int argc, char **argv, struct sweep_args *a)
{
	static const struct option longopts[] = {
		{ "older-than", required_argument, NULL, 'o' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "null", no_argument, NULL, '0' },
		{ "root", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const char shortopts[] = ":o:n0r:h";
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if ((r = parse_age(optarg, a)) != CLI_OK)
				return r;
			break;
		case 'n': a->flags |= FSAFE_SWEEP_DRY_RUN; break;
		case '0': a->sep = '\0'; break;
		case 'r': a->root = optarg; break;
		case 'h': a->help = true; return CLI_OK;
		default: return cli_bad_option("sweep", argv, c, usage);
		}
	}
	if (!a->have_age)
		return cli_usage_error("sweep", "--older-than is required",
		                       usage);
	if (optind == argc)
		return cli_usage_error("sweep", "DIR is missing", usage);
	return CLI_OK;
}

static void print_names(const char *dir, const fsafe_sweep_result *res,
                        char sep)
{
	size_t n = strlen(dir);
	const char *slash = n && dir[n - 1] == '/' ? "" : "/";

	for (size_t i = 0; i < fsafe_sweep_result_count(res); i++)
		printf("%s%s%s%c", dir, slash, fsafe_sweep_result_name(res, i),
		       sep);
}

/* Sweeps one DIR (beneath `root` if not NULL); false if it failed (after
   a message, which names the refused component of a contained DIR). */
static bool sweep_dir(const char *dir, const struct sweep_args *a,
                      fsafe_root *root, const struct fsafe_error *e,
                      const fsafe_cancel *cancel)
{
	fsafe_sweep_result *res = NULL;
	int r = root ? fsafe_root_sweep(root, dir, a->older_than_ms, a->flags,
	                                cancel, &res)
	             : fsafe_sweep(AT_FDCWD, dir, a->older_than_ms, a->flags,
	                           cancel, &res);

	/* Whatever went is listed, even when the sweep stopped half-way. */
	print_names(dir, res, a->sep);
	fsafe_sweep_result_free(res);
	if (r >= 0 || r == -ECANCELED)
		return true;
	if (root && e->step)
		cli_warn("sweep %s: %s (beneath %s): %s", dir, e->step,
		         a->root, fsafe_strerror(r));
	else
		cli_warn("sweep %s: %s", dir, fsafe_strerror(r));
	return false;
}

static int run(int argc, char **argv, const struct sweep_args *a)
{
	fsafe_cancel *cancel;
	fsafe_root *root = NULL;
	bool ok = true;
	int r;

	struct fsafe_error e = { 0 };
	struct fsafe_root_opts ro = { .size = sizeof(ro), .error = &e };

	if (a->root &&
	    (r = fsafe_root_open(AT_FDCWD, a->root, &ro, &root)) < 0) {
		cli_warn("sweep: --root %s: %s", a->root, fsafe_strerror(r));
		return CLI_FAIL;
	}
	if ((r = fsafe_cancel_new(&cancel)) < 0 ||
	    (r = cli_signal_catch(cancel)) < 0) {
		cli_warn("sweep: %s", fsafe_strerror(r));
		fsafe_cancel_free(cancel);
		fsafe_root_close(root);
		return CLI_FAIL;
	}
	for (int i = optind; i < argc && !cli_signal_caught(); i++)
		ok &= sweep_dir(argv[i], a, root, &e, cancel);
	/* A reader that went away (SIGPIPE) ends us quietly, like any
	   filter; the listing is flushed first so nothing removed goes
	   unreported. */
	fflush(stdout);
	if (cli_signal_caught())
		return cli_signal_reraise();
	ok &= cli_flush_stdout("sweep");
	fsafe_cancel_free(cancel);
	fsafe_root_close(root);
	return ok ? CLI_OK : CLI_FAIL;
}

int cmd_sweep(int argc, char **argv)
{
	struct sweep_args a = { .sep = '\n' };
	int r = parse_args(argc, argv, &a);

	if (r != CLI_OK)
		return r;
	if (a.help) {
		fputs(usage, stdout);
		fputs(help, stdout);
		return cli_flush_stdout("sweep") ? CLI_OK : CLI_FAIL;
	}
	return run(argc, argv, &a);
}
