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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_duration.h"
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
	bool wait, content, recover_named, help;
	uint64_t timeout_ms, older_ms, max;
	unsigned flags;
};

static int parse_duration(const char *what, const char *s, uint64_t *ms)
{
	char why[128];

	if (cli_parse_duration(s, ms) == 0)
		return CLI_OK;
	snprintf(why, sizeof(why), "%s: not a duration: '%s'", what, s);
	return cli_usage_error("inbox", why, usage);
}

static int parse_option(int c, struct inbox_args *a, char **argv)
{
	char *end;

	switch (c) {
	case 'c': a->consumer = optarg; a->recover_named = true; break;
	case 'w': a->wait = true; break;
	case 't':
		a->wait = true;
		return parse_duration("--timeout", optarg, &a->timeout_ms);
	case 'p': a->content = true; break;
	case 'o': return parse_duration("--older-than", optarg, &a->older_ms);
	case 'k': a->flags |= FSAFE_INBOX_KEEP_DONE; break;
	case 'm':
		errno = 0;
		a->max = strtoull(optarg, &end, 10);
		if (errno || *end || !*optarg || a->max == 0)
			return cli_usage_error("inbox", "--max-size: not a "
			                       "positive number", usage);
		break;
	case 'h': a->help = true; break;
	default: return cli_bad_option("inbox", argv, c, usage);
	}
	return CLI_OK;
}

static int parse_args(int argc, char **argv, struct inbox_args *a)
{
	static const struct option longopts[] = {
		{ "consumer", required_argument, NULL, 'c' },
		{ "wait", no_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 't' },
		{ "content", no_argument, NULL, 'p' },
		{ "older-than", required_argument, NULL, 'o' },
		{ "keep-done", no_argument, NULL, 'k' },
		{ "max-size", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *pos[3] = { NULL, NULL, NULL };
	int c, r, npos = 0;

	opterr = 0;
	/* Options may come anywhere: "+" is not used, positional words are
	   collected as getopt permutes them to the end. */
	while ((c = getopt_long(argc, argv, ":c:wt:po:km:h", longopts,
	                        NULL)) != -1)
		if ((r = parse_option(c, a, argv)) != CLI_OK)
			return r;
	if (a->help)
		return CLI_OK;
	for (int i = optind; i < argc; i++) {
		if (npos == 3)
			return cli_usage_error("inbox", "too many arguments",
			                       usage);
		pos[npos++] = argv[i];
	}
	if (npos < 2)
		return cli_usage_error("inbox", "DIR and a command are needed",
		                       usage);
	a->dir = pos[0];
	a->verb = pos[1];
	a->arg = pos[2];
	return CLI_OK;
}

/* ---- put ----------------------------------------------------------------- */

/* The whole of fd, up to max bytes (-EMSGSIZE beyond). */
static int slurp(int fd, uint64_t max, char **out, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);

	for (;;) {
		if (!buf)
			return -ENOMEM;
		ssize_t k = read(fd, buf + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			free(buf);
			return -errno;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n > max) {
			free(buf);
			return -EMSGSIZE;
		}
		if (n == cap) {
			char *b = realloc(buf, cap *= 2);
			if (!b)
				free(buf);
			buf = b;
		}
	}
	*out = buf;
	*len = n;
	return 0;
}

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
	r = slurp(fd, a->max ? a->max : FSAFE_INBOX_MAX_DEFAULT, &buf, &len);
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
	uint64_t limit = a->timeout_ms ? a->timeout_ms : FSAFE_FOREVER;
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

/* Print "<kind> [<consumer> ]<name>" for each entry of the directory
   `sub` of fd; never through a symbolic link (a link in the inbox's layout
   is damage: reported, not followed). Counts the entries in *n. */
static bool list(const char *dir, int fd, const char *sub, const char *kind,
                 const char *consumer, unsigned *n)
{
	struct dirent *e;
	int sfd = openat(fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	                          O_CLOEXEC);
	DIR *d = sfd < 0 ? NULL : fdopendir(sfd);

	if (!d) {
		cli_warn("inbox %s ls: %s%s%s: %s", dir,
		         consumer ? "claimed/" : "", sub,
		         errno == ELOOP || errno == ENOTDIR
		                 ? " (not followed; see check)" : "",
		         strerror(errno));
		if (sfd >= 0)
			close(sfd);
		return false;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fsafe_is_staging_name(e->d_name))
			continue;
		if (consumer && !strcmp(e->d_name, "owner"))
			continue;
		if (!consumer && !strcmp(kind, "claimed")) {
			/* n-NAME or p-TOKEN: show the consumer's name. */
			list(dir, sfd, e->d_name, kind, e->d_name, n);
			continue;
		}
		if (consumer)
			printf("%s %s %s\n", kind, consumer, e->d_name);
		else
			printf("%s %s\n", kind, e->d_name);
		size_t k = strlen(e->d_name);
		/* A quarantined file's reason is not one more file. */
		*n += k < 7 || strcmp(e->d_name + k - 7, ".reason") != 0;
	}
	closedir(d);
	return true;
}

static int do_ls(const struct inbox_args *a)
{
	unsigned n = 0, quarantined = 0;
	int fd = open(a->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		cli_warn("inbox %s ls: %s", a->dir, strerror(errno));
		return CLI_FAIL;
	}
	bool ok = list(a->dir, fd, "new", "new", NULL, &n);
	ok = list(a->dir, fd, "claimed", "claimed", NULL, &n) && ok;
	ok = list(a->dir, fd, "quarantine", "quarantine", NULL, &quarantined) &&
	     ok;
	close(fd);
	printf("quarantined %u\n", quarantined);
	return ok && cli_flush_stdout("inbox") ? CLI_OK : CLI_FAIL;
}

/* ---- check, repair ---------------------------------------------------------- */

static int print_damage(const struct fsafe_damage *d, void *arg)
{
	(void)arg;
	if (d->action)
		printf("%s: %s: %s\n", d->path, d->what, d->action);
	else
		printf("%s: %s\n", d->path, d->what);
	return 0;
}

static int do_check(const struct inbox_args *a)
{
	bool repair = !strcmp(a->verb, "repair");
	int r = repair ? fsafe_inbox_repair(AT_FDCWD, a->dir, print_damage,
	                                    NULL)
	               : fsafe_inbox_check(AT_FDCWD, a->dir, print_damage,
	                                   NULL);

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

static int check_verb(const struct inbox_args *a)
{
	static const char *const with_arg[] = { "ack", "release" };
	static const char *const verbs[] = { "put", "take", "recover", "ls",
		                             "check", "repair" };

	for (size_t i = 0; i < 2; i++)
		if (!strcmp(a->verb, with_arg[i]))
			return a->arg ? CLI_OK
			              : cli_usage_error("inbox", "ID is missing",
			                                usage);
	for (size_t i = 0; i < 6; i++)
		if (!strcmp(a->verb, verbs[i]))
			return a->arg && i != 0
			               ? cli_usage_error("inbox",
			                                 "too many arguments",
			                                 usage)
			               : CLI_OK;
	return cli_usage_error("inbox", "unknown inbox command", usage);
}

int cmd_inbox(int argc, char **argv)
{
	struct inbox_args a = { .consumer = "cli", .older_ms = 3600000 };
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;
	int r = parse_args(argc, argv, &a);

	if (r != CLI_OK)
		return r;
	if (a.help) {
		fputs(usage, stdout);
		fputs(help, stdout);
		return cli_flush_stdout("inbox") ? CLI_OK : CLI_FAIL;
	}
	if ((r = check_verb(&a)) != CLI_OK)
		return r;
	if (!strcmp(a.verb, "ls"))
		return do_ls(&a);
	if (!strcmp(a.verb, "check") || !strcmp(a.verb, "repair"))
		return do_check(&a);
	/* A closed pipe must fail a write (and so return the claim), not
	   kill the process holding it. */
	signal(SIGPIPE, SIG_IGN);
	o.flags = a.flags | (!strcmp(a.verb, "put") ? FSAFE_INBOX_CREATE : 0);
	o.max_message = a.max;
	if ((r = fsafe_inbox_open(AT_FDCWD, a.dir, &o, &ib)) < 0) {
		cli_warn("inbox %s: %s%s", a.dir, fsafe_strerror(r),
		         layout_hint(r));
		return CLI_FAIL;
	}
	if (!strcmp(a.verb, "put"))
		r = do_put(ib, &a);
	else if (!strcmp(a.verb, "recover") && !a.recover_named)
		r = do_recover(ib, &a);
	else
		r = do_consumer(ib, &a);
	fsafe_inbox_close(ib);
	return r;
}
