/*
 * fsafe write: standard input replaces FILE atomically and durably, through
 * the managed writer. The whole input is staged before anything is
 * published, so `sort f | fsafe write f` is safe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_batch.h"
#include "cli_opt.h"
#include "cli_signal.h"
#include "cli_util.h"
#include "fsafe.h"

#define CHUNK (64 * 1024)

static const char usage[] =
	"usage: fsafe write [--mode MODE] [--create-only] [--no-follow] "
	"[--mkdir]\n"
	"                   [--no-sync] [--no-tmpfile] [--root DIR]\n"
	"                   [--no-xattrs] [--xattrs-best-effort] "
	"[--no-split-links]\n"
	"                   [--if-unchanged TOKEN] FILE\n"
	"       fsafe write --batch [OPTIONS] < TARGET\\0SOURCE\\0...\n";

static const char help[] =
	"Replace FILE atomically with standard input: readers see the old\n"
	"content or the new, never a mix, also after a crash.\n"
	"\n"
	"  -m, --mode MODE   permissions of a new file, octal (default 666),\n"
	"                    less the umask; an existing file keeps its own\n"
	"  -c, --create-only fail if FILE exists (it stays untouched)\n"
	"  -n, --no-follow   if FILE is a symlink, replace the link itself\n"
	"                    (default: write the file it points to)\n"
	"  -p, --mkdir       create missing parent directories\n"
	"  -s, --no-sync     atomic but not durable (skip every fsync)\n"
	"      --no-tmpfile  always stage under a visible staging name\n"
	"                    (for filesystems that misreport O_TMPFILE)\n"
	"  -r, --root DIR    FILE is relative to DIR and cannot leave it: an\n"
	"                    absolute path, '..' above DIR or a symbolic link\n"
	"                    on the way is refused (--no-follow replaces a\n"
	"                    link at FILE), and nothing is made outside DIR\n"
	"      --no-xattrs   do not copy FILE's extended attributes and ACLs\n"
	"                    (copied by default, like its mode and owner)\n"
	"      --xattrs-best-effort\n"
	"                    leave out an attribute we may not copy instead\n"
	"                    of failing\n"
	"      --no-split-links\n"
	"                    refuse FILE if it has more than one hard link\n"
	"                    (by default only this name gets the new content)\n"
	"      --if-unchanged TOKEN\n"
	"                    replace only if FILE is still the file whose\n"
	"                    token `fsafe stat-token FILE` printed\n"
	"  -b, --batch       replace many files: standard input holds\n"
	"                    NUL-separated TARGET and SOURCE pairs; each\n"
	"                    TARGET gets SOURCE's content, each atomically,\n"
	"                    in group commits that share device flushes\n"
	"                    (not a transaction: after a crash some targets\n"
	"                    may be new and others old)\n"
	"  -h, --help        this text\n"
	"\n"
	"On failure or on SIGINT, SIGTERM, SIGHUP or SIGPIPE while reading,\n"
	"FILE is unchanged and no staging file remains.\n"
	"Exit status: 0 written, 1 failed, 2 usage error.\n";

struct write_args {
	const char *file;
	const char *root;
	struct fsafe_write_opts opts;
	bool batch;
};

/*
 * Octal, at most 07777. 0 is refused: the library reads a mode of 0 as
 * "the default" (0666), so --mode 0 could not mean what it says.
 */
static int parse_mode(const char *s, mode_t *mode)
{
	mode_t m = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '7')
			return -1;
		m = m * 8 + (mode_t)(*s - '0');
		if (m > 07777)
			return -1;
	}
	if (m == 0)
		return -1;
	*mode = m;
	return 0;
}

static const struct cli_spec spec_base = { "write", usage, help, NULL, 0 };

static int parse_args(int argc, char **argv, struct write_args *a)
{
	const char *mode = NULL;
	const struct cli_opt opts[] = {
		CLI_STRING('m', "mode", &mode),
		CLI_BIT('c', "create-only", &a->opts.flags, FSAFE_CREATE_ONLY),
		CLI_BIT('n', "no-follow", &a->opts.flags, FSAFE_NO_FOLLOW),
		CLI_BIT('p', "mkdir", &a->opts.flags, FSAFE_MKDIR),
		CLI_BIT('s', "no-sync", &a->opts.flags, FSAFE_NO_SYNC),
		CLI_BIT(0, "no-tmpfile", &a->opts.flags, FSAFE_NO_TMPFILE),
		CLI_BIT(0, "no-xattrs", &a->opts.flags, FSAFE_NO_XATTRS),
		CLI_BIT(0, "xattrs-best-effort", &a->opts.flags,
		        FSAFE_XATTRS_BEST_EFFORT),
		CLI_BIT(0, "no-split-links", &a->opts.flags,
		        FSAFE_NO_SPLIT_LINKS),
		CLI_STRING(0, "if-unchanged", &a->opts.if_unchanged),
		CLI_PATH('r', "root", &a->root),
		CLI_FLAG('b', "batch", &a->batch),
		CLI_HELP,
		CLI_END,
	};
	struct cli_spec spec = spec_base;
	struct cli_args ops;
	int r;

	spec.opts = opts;
	if ((r = cli_parse(&spec, argc, argv, &ops)) != CLI_CONTINUE)
		return r;
	if (mode && parse_mode(mode, &a->opts.mode) < 0)
		return cli_spec_error(&spec, "--mode takes an octal mode from 1 "
		                      "to 7777");
	if (a->batch && (a->root || a->opts.if_unchanged || ops.argc))
		return cli_spec_error(&spec, "%s", a->root
		        ? "--batch does not take --root"
		        : a->opts.if_unchanged
		        ? "--batch does not take --if-unchanged (a token names "
		          "one file)"
		        : "--batch takes its files on standard input");
	if (a->batch)
		return CLI_CONTINUE;
	if (ops.argc != 1)
		return cli_spec_error(&spec, "%s", ops.argc ? "only one FILE"
		                                            : "FILE is missing");
	if (!*ops.argv[0])
		return cli_spec_error(&spec, "FILE is an empty path");
	a->file = ops.argv[0];
	return CLI_CONTINUE;
}

/* One line naming the file, the failed step, and what became of FILE. */
static int report(const char *file, int r, const struct fsafe_error *e,
                  unsigned flags)
{
	const char *why = fsafe_strerror(e->sys_errno ? -e->sys_errno : r);

	if (r == -EEXIST && (flags & FSAFE_CREATE_ONLY))
		cli_warn("write %s: %s exists; %s unchanged", file, file, file);
	else if (r == -EBADFD && e->step)
		/* The step names the file's type; errno would only blur it. */
		cli_warn("write %s: %s; unchanged", file, e->step);
	else if (r == FSAFE_ECONFLICT)
		cli_warn("write %s: changed since its token was taken; %s "
		         "unchanged", file, file);
	else if (r == FSAFE_ENOTDURABLE || e->published)
		cli_warn("write %s: %s: %s; %s published, but durability "
		         "unknown", file, e->step ? e->step : "sync", why,
		         file);
	else if (e->step)
		cli_warn("write %s: %s: %s; %s unchanged", file, e->step, why,
		         file);
	else
		cli_warn("write %s: %s; %s unchanged", file, why, file);
	return CLI_FAIL;
}

/*
 * The writer for FILE beneath --root DIR. The root is needed only until
 * the writer holds FILE's directory. A refused path is named down to the
 * component that was refused.
 */
static int open_root_writer(const struct write_args *a,
                            const struct fsafe_error *e, fsafe_writer **w)
{
	fsafe_root *root;
	struct fsafe_error re = { 0 };
	struct fsafe_root_opts ro = { .size = sizeof(ro), .error = &re };
	int r = fsafe_root_open(AT_FDCWD, a->root, &ro, &root);

	if (r < 0) {
		cli_warn("write %s: --root %s: %s; nothing written", a->file,
		         a->root, fsafe_strerror(r));
		return CLI_FAIL;
	}
	char why[PATH_MAX + 128];

	r = fsafe_root_writer_open(root, a->file, &a->opts, w);
	if (r < 0 && cli_root_refusal(&re, r, a->root, why, sizeof(why)))
		cli_warn("write %s: %s; %s unchanged", a->file, why, a->file);
	else if (r < 0)
		report(a->file, r, e, a->opts.flags);
	fsafe_root_close(root);
	return r < 0 ? CLI_FAIL : CLI_OK;
}

/* The writer for FILE; CLI_OK, or the exit status after a message. */
static int open_writer(const struct write_args *a,
                       const struct fsafe_error *e, fsafe_writer **w)
{
	if (a->root)
		return open_root_writer(a, e, w);
	int r = fsafe_writer_open(AT_FDCWD, a->file, &a->opts, w);
	return r < 0 ? report(a->file, r, e, a->opts.flags) : CLI_OK;
}

/* Waits for input while letting our signals through; -EINTR if one came. */
static int wait_input(const sigset_t *waitmask)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

	while (ppoll(&p, 1, NULL, waitmask) < 0) {
		if (errno != EINTR)
			return -errno;
		if (cli_signal_caught())
			return -EINTR;
	}
	return 0;
}

/*
 * A chunk of standard input: its length, 0 at the end, or -errno. An input
 * left non-blocking by someone else (EAGAIN) is simply waited for again.
 */
static ssize_t read_input(void *buf, size_t len, const sigset_t *waitmask)
{
	for (;;) {
		int r = wait_input(waitmask);
		if (r < 0)
			return r;
		ssize_t n = read(STDIN_FILENO, buf, len);
		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

/*
 * Copies standard input into the writer. 0 at the end of input; otherwise
 * the writer is gone and the return value is the exit status.
 */
static int copy_input(fsafe_writer *w, const struct write_args *a,
                      const sigset_t *waitmask)
{
	static char buf[CHUNK];
	struct fsafe_error *e = a->opts.error;
	ssize_t n;

	while ((n = read_input(buf, sizeof(buf), waitmask)) > 0) {
		if (fsafe_writer_write(w, buf, (size_t)n) < 0)
			/* The writer keeps the error; commit reports it with
			   its step and publishes nothing. */
			return report(a->file, fsafe_writer_commit(w), e,
			              a->opts.flags);
	}
	if (n == 0)
		return 0;
	fsafe_writer_abort(w);
	if (cli_signal_caught())
		return cli_signal_reraise();
	cli_warn("write %s: reading standard input: %s; %s unchanged", a->file,
	         strerror((int)-n), a->file);
	return CLI_FAIL;
}

static int run(struct write_args *a)
{
	struct fsafe_error e = { 0 };
	sigset_t waitmask;
	fsafe_writer *w;
	int r;

	a->opts.error = &e;
	if ((r = cli_signal_catch(NULL)) < 0 ||
	    (r = cli_signal_block(&waitmask)) < 0) {
		cli_warn("write %s: signal handlers: %s; %s unchanged", a->file,
		         strerror(-r), a->file);
		return CLI_FAIL;
	}
	if ((r = open_writer(a, &e, &w)) != CLI_OK)
		return r;
	if ((r = copy_input(w, a, &waitmask)) != 0)
		return r;
	/* The last chance to back out; from here on the commit runs to its
	   end and any signal stays pending until we exit. */
	cli_signal_deliver_pending();
	if (cli_signal_caught()) {
		fsafe_writer_abort(w);
		return cli_signal_reraise();
	}
	if ((r = fsafe_writer_commit(w)) < 0)
		return report(a->file, r, &e, a->opts.flags);
	return CLI_OK;
}

int cmd_write(void *ctx, int argc, char **argv)
{
	struct write_args a = { .opts = FSAFE_WRITE_OPTS_INIT };
	int r = parse_args(argc, argv, &a);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	return a.batch ? cli_write_batch(&a.opts) : run(&a);
}
