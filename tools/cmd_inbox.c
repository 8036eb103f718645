/*
 * fsafe inbox: a durable directory inbox from the shell.
 *
 * A CLI process exits between `take` and `ack`, so its claims cannot be
 * owned by it: they belong to a named consumer (--consumer NAME, default
 * "cli") whose claim directory has no owner record. `recover` never
 * returns such claims; `release ID`, or `recover --consumer NAME` (the
 * operator declaring that consumer gone), does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_damage.h"
#include "cli_opt.h"
#include "cli_util.h"
#include "fsafe.h"

/* Exit status when there was nothing to take (or --timeout passed). */
enum { CLI_EMPTY = 3 };

static const char usage[] =
	"usage: fsafe inbox DIR put [FILE|-]\n"
	"       fsafe inbox DIR take [--wait] [--timeout D] [--content]\n"
	"       fsafe inbox DIR ack ID | release ID\n"
	"       fsafe inbox DIR recover [--older-than D] [--consumer NAME]\n"
	"       fsafe inbox DIR ls | check | repair\n";

static const char help[] =
	"A durable inbox: put delivers FILE (or standard input) and prints\n"
	"its id; take claims the oldest message and prints \"ID PATH\" (or,\n"
	"with --content, writes the message to standard output and \"ID\" to\n"
	"standard error); ack removes a claimed message, release returns it;\n"
	"recover returns the claims of dead consumer processes and sweeps\n"
	"abandoned staging files; ls lists new, claimed and quarantined\n"
	"entries and ends with the number of quarantined files; check\n"
	"reports damage, one \"PATH: WHAT\" a line (exit 1 when found);\n"
	"repair quarantines damaged entries one by one, returns claims of\n"
	"dead consumers and prints \"PATH: WHAT: ACTION\" for each.\n"
	"\n"
	"  -c, --consumer NAME    the named consumer that owns take's claims\n"
	"                         (default \"cli\"); recover returns them only\n"
	"                         when given this option\n"
	"  -w, --wait             take: wait for a message\n"
	"  -t, --timeout D        take: wait at most D (implies --wait)\n"
	"  -p, --content          take: the content, not the path\n"
	"  -o, --older-than D     recover: sweep staging files older than D\n"
	"                         (default 1h; a live writer's never go)\n"
	"  -k, --keep-done        ack moves into DIR/done instead of removing\n"
	"  -m, --max-size BYTES   refuse (put) or quarantine (take) larger\n"
	"                         messages (default 64 MiB)\n"
	"  -h, --help             this text\n"
	"\n"
	"Durations: a whole number with a unit: ms, s, m, h or d.\n"
	"Exit status: 0 done, 1 failed (check: damage found; repair: the\n"
	"inbox is still not whole), 2 usage error, 3 nothing to take.\n";

struct inbox_args {
	const char *dir, *verb, *arg, *consumer;
	bool wait, content, recover_named, has_timeout;
	uint64_t timeout_ms, older_ms, max;
	unsigned flags;
};

static const struct cli_spec spec_base = { "inbox", usage, help, NULL, 0 };

static int parse_args(int argc, char **argv, struct inbox_args *a,
                      struct cli_args *ops)
{
	const struct cli_opt opts[] = {
		CLI_STRING('c', "consumer", &a->consumer),
		CLI_FLAG('w', "wait", &a->wait),
		CLI_TIMEOUT('t', "timeout", &a->timeout_ms, &a->has_timeout),
		CLI_FLAG('p', "content", &a->content),
		CLI_DURATION('o', "older-than", &a->older_ms, INT64_MAX, NULL),
		CLI_BIT('k', "keep-done", &a->flags, FSAFE_INBOX_KEEP_DONE),
		CLI_SIZE('m', "max-size", &a->max, 1, UINT64_MAX),
		CLI_HELP,
		CLI_END,
	};
	struct cli_spec spec = spec_base;
	int r;

	spec.opts = opts;
	if ((r = cli_parse(&spec, argc, argv, ops)) != CLI_CONTINUE)
		return r;
	if (ops->argc < 2)
		return cli_spec_error(&spec, "DIR and a command are needed");
	a->recover_named = a->consumer != NULL;
	if (!a->consumer)
		a->consumer = "cli";
	/* --timeout implies --wait, but 0 is "do not wait": one attempt. */
	if (a->has_timeout)
		a->wait = a->timeout_ms != 0;
	a->dir = ops->argv[0];
	a->verb = ops->argv[1];
	a->arg = ops->argc > 2 ? ops->argv[2] : NULL;
	return CLI_CONTINUE;
}

/* ---- put ----------------------------------------------------------------- */

static int do_put(fsafe_inbox *ib, const struct inbox_args *a)
{
	const char *src = a->arg && strcmp(a->arg, "-") ? a->arg : NULL;
	int fd = src ? open(src, O_RDONLY | O_CLOEXEC) : 0;
	char id[FSAFE_INBOX_ID_LEN + 1], *buf = NULL;
	size_t len = 0;
	int r;

	if (fd < 0) {
		cli_warn("inbox put: %s: %s", src, strerror(errno));
		return CLI_FAIL;
	}
	r = cli_read_all(fd, a->max ? a->max : FSAFE_INBOX_MAX_DEFAULT, &buf,
	                 &len);
	if (src)
		close(fd);
	if (r == 0)
		r = fsafe_inbox_deliver(ib, buf, len, id);
	free(buf);
	if (r < 0 && r != FSAFE_ENOTDURABLE) {
		cli_warn("inbox put %s: %s%s", a->dir, fsafe_strerror(r),
		         r == -EMSGSIZE ? " (over --max-size)" : "");
		return CLI_FAIL;
	}
	printf("%s\n", id);
	if (r == FSAFE_ENOTDURABLE)
		cli_warn("inbox put %s: delivered as %s, but %s", a->dir, id,
		         fsafe_strerror(r));
	return cli_flush_stdout("inbox") && r == 0 ? CLI_OK : CLI_FAIL;
}

/* ---- take, ack, release --------------------------------------------------- */

static int take_waiting(fsafe_inbox_consumer *c, const struct inbox_args *a,
                        fsafe_inbox_msg **m)
{
	uint64_t limit = a->has_timeout ? a->timeout_ms : FSAFE_FOREVER;
	int r;

	while ((r = fsafe_inbox_take(c, m)) == -EAGAIN && a->wait)
		if ((r = fsafe_inbox_wait(c, limit)) < 0)
			break;
	return r;
}

static int print_taken(const fsafe_inbox_msg *m, const struct inbox_args *a)
{
	if (a->content) {
		if (fwrite(fsafe_inbox_msg_data(m), 1, fsafe_inbox_msg_len(m),
		           stdout) != fsafe_inbox_msg_len(m) ||
		    !cli_flush_stdout("inbox"))
			return CLI_FAIL;
		fprintf(stderr, "%s\n", fsafe_inbox_msg_id(m));
	} else {
		size_t n = strlen(a->dir);
		printf("%s %s%s%s\n", fsafe_inbox_msg_id(m), a->dir,
		       n && a->dir[n - 1] == '/' ? "" : "/",
		       fsafe_inbox_msg_path(m));
	}
	return cli_flush_stdout("inbox") ? CLI_OK : CLI_FAIL;
}

/* The inbox's own directories are never followed through a link: say
   where to look when that is why something failed. */
static const char *layout_hint(int r)
{
	return r == -ENOTDIR || r == -ELOOP
	               ? " (a link or file in place of a directory of the "
	                 "inbox; see check and repair)" : "";
}

/* Nobody received a message whose output failed: it goes back to new/,
   or a consumer that never saw it would hold it forever. */
static void unclaim(fsafe_inbox_consumer *c, const fsafe_inbox_msg *m,
                    const struct inbox_args *a)
{
	int r = fsafe_inbox_release(c, fsafe_inbox_msg_id(m));

	if (r < 0)
		cli_warn("inbox %s take: output failed and the claim of %s "
		         "could not be returned: %s", a->dir,
		         fsafe_inbox_msg_id(m), fsafe_strerror(r));
	else
		cli_warn("inbox %s take: output failed: %s returned to new/",
		         a->dir, fsafe_inbox_msg_id(m));
}

static int do_consumer(fsafe_inbox *ib, const struct inbox_args *a)
{
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m = NULL;
	int r = fsafe_inbox_consumer_open(ib, a->consumer, &c), rc = CLI_FAIL;

	if (r < 0) {
		cli_warn("inbox %s: consumer %s: %s%s", a->dir, a->consumer,
		         fsafe_strerror(r), layout_hint(r));
		return CLI_FAIL;
	}
	if (!strcmp(a->verb, "take")) {
		r = take_waiting(c, a, &m);
		if (r == 0 && (rc = print_taken(m, a)) != CLI_OK)
			unclaim(c, m, a);
		else if (r == -EAGAIN || r == -ETIMEDOUT)
			rc = CLI_EMPTY;
		if (fsafe_inbox_quarantined(c))
			cli_warn("inbox %s: %u bad files moved to quarantine/",
			         a->dir, fsafe_inbox_quarantined(c));
		fsafe_inbox_msg_free(m);
	} else if (!strcmp(a->verb, "ack")) {
		rc = (r = fsafe_inbox_ack(c, a->arg)) == 0 ? CLI_OK : CLI_FAIL;
	} else if (!strcmp(a->verb, "release")) {
		rc = (r = fsafe_inbox_release(c, a->arg)) == 0 ? CLI_OK
		                                                : CLI_FAIL;
	} else { /* recover --consumer NAME */
		r = fsafe_inbox_release_all(c);
		if (r >= 0)
			printf("returned %d claims of consumer %s\n", r,
			       a->consumer);
		rc = r >= 0 && cli_flush_stdout("inbox") ? CLI_OK : CLI_FAIL;
	}
	if (rc == CLI_FAIL && r < 0)
		cli_warn("inbox %s %s%s%s: %s", a->dir, a->verb,
		         a->arg ? " " : "", a->arg ? a->arg : "",
		         r == -ENOENT && a->arg ? "no such claim of this consumer"
		                                : fsafe_strerror(r));
	fsafe_inbox_consumer_close(c);
	return rc;
}

/* ---- recover, ls ----------------------------------------------------------- */

static int do_recover(fsafe_inbox *ib, const struct inbox_args *a)
{
	struct fsafe_inbox_recovery rep = { .size = sizeof(rep) };
	int r = fsafe_inbox_recover(ib, a->older_ms, &rep);

	if (r < 0) {
		cli_warn("inbox %s recover: %s", a->dir, fsafe_strerror(r));
		return CLI_FAIL;
	}
	printf("returned %u claims of %u dead consumers; swept %u staging "
	       "files; %u consumers alive or not judged\n", rep.returned,
	       rep.consumers, rep.swept, rep.unjudged);
	return cli_flush_stdout("inbox") ? CLI_OK : CLI_FAIL;
}

struct ls {
	const char *dir;
	unsigned quarantined;
	bool stray;
};

/* "new ID", "claimed CONSUMER ID", "quarantine NAME"; a stray goes to
   standard error (it is damage, see check), never followed. */
static int print_entry(const struct fsafe_inbox_entry *e, void *arg)
{
	struct ls *ls = arg;
	const char *slash = *e->dir ? "/" : "";

	switch (e->state) {
	case FSAFE_INBOX_NEW: printf("new %s\n", e->name); break;
	case FSAFE_INBOX_CLAIMED:
		printf("claimed %s %s\n", e->dir + strlen("claimed/"), e->name);
		break;
	case FSAFE_INBOX_QUARANTINED:
		printf("quarantine %s\n", e->name);
		ls->quarantined++;
		break;
	case FSAFE_INBOX_STRAY:
		cli_warn("inbox %s ls: %s%s%s (not followed; see check): %s",
		         ls->dir, e->dir, slash, e->name, e->problem);
		ls->stray = true;
		break;
	}
	return 0;
}

static int do_ls(const struct inbox_args *a)
{
	struct ls ls = { .dir = a->dir };
	int r = fsafe_inbox_list(AT_FDCWD, a->dir, print_entry, &ls);

	if (r < 0) {
		cli_warn("inbox %s ls: %s", a->dir, fsafe_strerror(r));
		return CLI_FAIL;
	}
	printf("quarantined %u\n", ls.quarantined);
	return !ls.stray && cli_flush_stdout("inbox") ? CLI_OK : CLI_FAIL;
}

/* ---- check, repair ---------------------------------------------------------- */

static int do_check(const struct inbox_args *a)
{
	bool repair = !strcmp(a->verb, "repair");
	struct cli_damage cd = { 0 };
	int r = repair ? fsafe_inbox_repair(AT_FDCWD, a->dir,
	                                    cli_damage_printer(true), &cd)
	               : fsafe_inbox_check(AT_FDCWD, a->dir,
	                                   cli_damage_printer(false), &cd);

	if (r < 0) {
		cli_warn("inbox %s %s: %s", a->dir, a->verb, fsafe_strerror(r));
		return 2;
	}
	if (!cli_flush_stdout("inbox"))
		return 2;
	/* repair: usable now when a fresh check finds nothing. */
	if (repair && r > 0)
		r = fsafe_inbox_check(AT_FDCWD, a->dir, NULL, NULL);
	if (repair && r != 0)
		cli_warn("inbox %s repair: %d problems remain (see check)",
		         a->dir, r);
	return r == 0 ? CLI_OK : CLI_FAIL;
}

/* ---- dispatch --------------------------------------------------------------- */

/* The verbs that work on an open inbox. */
static int run_open(void *ctx, int argc, char **argv)
{
	const struct inbox_args *a = ctx;
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;
	int r;

	(void)argc, (void)argv;
	/* A closed pipe must fail a write (and so return the claim), not
	   kill the process holding it. */
	signal(SIGPIPE, SIG_IGN);
	o.flags = a->flags | (!strcmp(a->verb, "put") ? FSAFE_INBOX_CREATE : 0);
	o.max_message = a->max;
	if ((r = fsafe_inbox_open(AT_FDCWD, a->dir, &o, &ib)) < 0) {
		const char *what = cli_file_type(a->dir);
		char label[PATH_MAX + 8];

		snprintf(label, sizeof(label), "inbox %s", a->dir);
		if (what && strcmp(what, "a directory"))
			cli_warn_dir(label, a->dir, r);
		else
			cli_warn("%s: %s%s", label, fsafe_strerror(r),
			         layout_hint(r));
		return CLI_FAIL;
	}
	if (!strcmp(a->verb, "put"))
		r = do_put(ib, a);
	else if (!strcmp(a->verb, "recover") && !a->recover_named)
		r = do_recover(ib, a);
	else
		r = do_consumer(ib, a);
	fsafe_inbox_close(ib);
	return r;
}

static int run_ls(void *ctx, int argc, char **argv)
{
	(void)argc, (void)argv;
	return do_ls(ctx);
}

static int run_check(void *ctx, int argc, char **argv)
{
	(void)argc, (void)argv;
	return do_check(ctx);
}

static const struct cli_verb verbs[] = {
	{ "put", run_open, 0, 1, "deliver FILE or standard input" },
	{ "take", run_open, 0, 0, "claim the oldest message" },
	{ "ack", run_open, 1, 1, "remove a claimed message" },
	{ "release", run_open, 1, 1, "return a claimed message" },
	{ "recover", run_open, 0, 0, "return dead consumers' claims" },
	{ "ls", run_ls, 0, 0, "list new, claimed, quarantined" },
	{ "check", run_check, 0, 0, "report damage" },
	{ "repair", run_check, 0, 0, "quarantine damage" },
};

int cmd_inbox(void *ctx, int argc, char **argv)
{
	struct inbox_args a = { .older_ms = 3600000 };
	struct cli_args ops;
	int r = parse_args(argc, argv, &a, &ops);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	return cli_dispatch(&spec_base, verbs, sizeof(verbs) / sizeof(verbs[0]),
	                    &a, ops.argc - 1, ops.argv + 1);
}
