/*
 * fsafe store: a keyed state store (include/fsafe/store.h) from the shell.
 * Values pass through whole: `put` reads all of its input before anything
 * is written, `update` gives COMMAND the old value on standard input and
 * stores its standard output only if it exits 0, all under the store's
 * lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cli_damage.h"
#include "cli_opt.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] =
	"usage: fsafe store [OPTIONS] DIR put KEY [FILE|-]\n"
	"       fsafe store [OPTIONS] DIR get KEY\n"
	"       fsafe store [OPTIONS] DIR del KEY\n"
	"       fsafe store [OPTIONS] DIR ls\n"
	"       fsafe store [OPTIONS] DIR update KEY -- COMMAND [ARG...]\n"
	"       fsafe store DIR check|repair\n";

static const char help[] =
	"A directory of records, one a key, each replaced atomically and\n"
	"durably; leftovers of crashed writers never block it.\n"
	"\n"
	"  put     store FILE (or standard input) as KEY's value\n"
	"  get     write KEY's value to standard output\n"
	"  del     remove KEY\n"
	"  ls      list the keys, sorted, one a line\n"
	"  update  run COMMAND under the store's lock with KEY's value on its\n"
	"          standard input (empty, and FSAFE_STORE_EXISTS=0, if none);\n"
	"          its standard output becomes the value if it exits 0\n"
	"  check   report damage, one \"PATH: WHAT\" a line; changes nothing\n"
	"  repair  move damaged entries into DIR/quarantine/, one\n"
	"          \"PATH: WHAT: ACTION\" a line\n"
	"\n"
	"  -c, --create          create DIR if it is missing\n"
	"  -n, --no-sync         skip syncs (crash-safe, not power-cut-safe)\n"
	"  -k, --kernel-lock     no effect (the store's lock is always a kernel\n"
	"                        lock; keep DIR on a local filesystem)\n"
	"  -i, --if-version N    put only if KEY's version is N (0: absent)\n"
	"  -t, --timeout D       wait at most D for the store's lock (ms, s,\n"
	"                        m, h or d; 0: one attempt; default: no\n"
	"                        limit); a COMMAND of update that uses the\n"
	"                        same store would otherwise wait for ever\n"
	"  -l, --long            ls: VERSION LENGTH KEY\n"
	"  -0, --null            ls: end each line with NUL, not newline\n"
	"  -v, --verbose         ls: report every entry that is not a record\n"
	"  -h, --help            this text\n"
	"\n"
	"Options may come anywhere; after \"--\" everything is an operand\n"
	"(store DIR put -- -x takes -x as the key).\n"
	"Exit status: 0 ok; 1 failed (no such key, stale version, COMMAND\n"
	"failed: nothing changed; check: damage found; repair: something\n"
	"left as it is); 2 usage error (check, repair: could not run).\n";

struct args {
	struct fsafe_store_opts opts;
	bool has_version, long_ls, null, verbose, has_timeout;
	unsigned damaged;
	uint64_t version;
	const char *dir, *op;
	struct cli_args ops;
	fsafe_store *s;
};

static const struct cli_spec spec_base = { "store", usage, help, NULL, 0 };

static int parse_args(int argc, char **argv, struct args *a)
{
	const struct cli_opt opts[] = {
		CLI_BIT('c', "create", &a->opts.flags, FSAFE_STORE_CREATE),
		CLI_BIT('n', "no-sync", &a->opts.write_flags, FSAFE_NO_SYNC),
		CLI_BIT('k', "kernel-lock", &a->opts.flags,
		        FSAFE_STORE_LOCK_KERNEL),
		CLI_UINT('i', "if-version", &a->version, 0, UINT64_MAX,
		         &a->has_version),
		CLI_TIMEOUT('t', "timeout", &a->opts.lock_timeout_ms,
		            &a->has_timeout),
		CLI_FLAG('l', "long", &a->long_ls),
		CLI_FLAG('0', "null", &a->null),
		CLI_FLAG('v', "verbose", &a->verbose),
		CLI_HELP,
		CLI_END,
	};
	struct cli_spec spec = spec_base;
	int r;

	spec.opts = opts;
	if ((r = cli_parse(&spec, argc, argv, &a->ops)) != CLI_CONTINUE)
		return r;
	if (a->ops.argc < 2)
		return cli_spec_error(&spec, "DIR and an operation are needed");
	a->dir = a->ops.argv[0];
	a->op = a->ops.argv[1];
	/* The library waits without limit at 0: "one attempt" is the
	   shortest wait it has. */
	if (a->has_timeout && !a->opts.lock_timeout_ms)
		a->opts.lock_timeout_ms = 1;
	else if (a->opts.lock_timeout_ms == FSAFE_FOREVER)
		a->opts.lock_timeout_ms = 0;
	return CLI_CONTINUE;
}

/* A change refused because of what is at the lock's name, or a read of
   a damaged record: say where the damage is, not only the errno. */
static void explain(const struct args *a, int r)
{
	char label[PATH_MAX + 8];

	if (r != -ELOOP && r != -ENOTDIR && r != -EISDIR && r != -EINVAL &&
	    r != -EBADFD && r != -EBADMSG)
		return;
	snprintf(label, sizeof(label), "store %s", a->dir);
	fsafe_store_check(AT_FDCWD, a->dir, cli_damage_warn, label);
}

static int fail(const struct args *a, const char *key, int r)
{
	if (r == -EBADMSG && key)
		cli_warn("store %s: %s %s: damaged record (fsafe store %s "
		         "repair quarantines it)", a->dir, a->op, key, a->dir);
	else if (key)
		cli_warn("store %s: %s %s: %s", a->dir, a->op, key,
		         r == FSAFE_ECONFLICT
		                 ? "the version changed; nothing written"
		         : r == -ENOENT    ? "no such key"
		         : r == -ETIMEDOUT ? "the store's lock is held (past "
		                             "--timeout); nothing written"
		                           : fsafe_strerror(r));
	else
		cli_warn("store %s: %s: %s", a->dir, a->op, fsafe_strerror(r));
	if (r != -EBADMSG)
		explain(a, r);
	return CLI_FAIL;
}

static int do_put(void *ctx, int argc, char **argv)
{
	struct args *a = ctx;
	const char *key = argv[1];
	const char *file = argc == 3 ? argv[2] : "-";
	bool in = !strcmp(file, "-");
	int fd = in ? 0 : open(file, O_RDONLY | O_CLOEXEC);
	char *buf;
	size_t len;
	int r;

	if (fd < 0) {
		cli_warn("store: %s: %s", file, strerror(errno));
		return CLI_FAIL;
	}
	r = cli_read_all(fd, SIZE_MAX, &buf, &len);
	if (fd > 0)
		close(fd);
	if (r < 0) {
		cli_warn("store: %s: %s", in ? "standard input" : file,
		         strerror(-r));
		return CLI_FAIL;
	}
	r = a->has_version
	            ? fsafe_store_put_if(a->s, key, strlen(key), buf, len,
	                                 a->version, NULL)
	            : fsafe_store_put(a->s, key, strlen(key), buf, len, NULL);
	free(buf);
	return r < 0 ? fail(a, key, r) : CLI_OK;
}

static int do_get(void *ctx, int argc, char **argv)
{
	struct args *a = ctx;
	const char *key = argv[1];
	void *buf;
	size_t len;
	int r = fsafe_store_get(a->s, key, strlen(key), &buf, &len, NULL);

	(void)argc;
	if (r < 0)
		return fail(a, key, r);
	size_t w = fwrite(buf, 1, len, stdout);
	free(buf);
	return w == len && cli_flush_stdout("store") ? CLI_OK : CLI_FAIL;
}

static int do_del(void *ctx, int argc, char **argv)
{
	struct args *a = ctx;
	const char *key = argv[1];
	int r = fsafe_store_delete(a->s, key, strlen(key));

	(void)argc;
	return r < 0 ? fail(a, key, r) : CLI_OK;
}

static void on_skip(enum fsafe_store_skip why, const char *name,
                    const void *key, size_t keylen, int err, void *arg)
{
	struct args *a = arg;

	(void)key, (void)keylen;
	/* Anything at a key's name that is not a valid record costs that
	   key: damage, whatever it is. */
	a->damaged += key != NULL;
	if (key && why != FSAFE_STORE_SKIP_BAD_RECORD)
		cli_warn("store %s: %s: damaged record skipped: not a regular "
		         "file", a->dir, name);
	else if (why == FSAFE_STORE_SKIP_BAD_RECORD)
		cli_warn("store %s: %s: invalid record skipped: %s", a->dir,
		         name, fsafe_strerror(err));
	else if (a->verbose)
		cli_warn("store %s: %s: not a record (%s)", a->dir, name,
		         why == FSAFE_STORE_SKIP_DIR       ? "directory"
		         : why == FSAFE_STORE_SKIP_SYMLINK ? "symbolic link"
		         : why == FSAFE_STORE_SKIP_OTHER   ? "special file"
		                                           : "unknown name");
}

static int do_ls(void *ctx, int argc, char **argv)
{
	struct args *a = ctx;
	struct fsafe_store_list_opts o = FSAFE_STORE_LIST_OPTS_INIT;
	struct fsafe_store_entry e;
	fsafe_store_iter *it;
	int r;

	(void)argc, (void)argv;
	o.skipped = on_skip;
	o.arg = a;
	if ((r = fsafe_store_list(a->s, &o, &it)) < 0)
		return fail(a, NULL, r);
	while (fsafe_store_iter_next(it, &e) > 0) {
		if (a->long_ls)
			printf("%" PRIu64 " %" PRIu64 " ", e.version, e.len);
		fwrite(e.key, 1, e.keylen, stdout);
		putchar(a->null ? '\0' : '\n');
	}
	fsafe_store_iter_free(it);
	if (a->damaged)
		cli_warn("store %s: %u damaged record%s skipped (fsafe store "
		         "%s check)", a->dir, a->damaged,
		         a->damaged == 1 ? "" : "s", a->dir);
	return cli_flush_stdout("store") ? CLI_OK : CLI_FAIL;
}

/* ---- update: COMMAND filters the old value into the new ---------------- */

struct filter {
	char **command;
	char *out;
	size_t out_len;
	int status;
};

static void run_child(char **command, int in, int out, bool exists)
{
	setenv("FSAFE_STORE_EXISTS", exists ? "1" : "0", 1);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0)
		_exit(126);
	signal(SIGPIPE, SIG_DFL);
	execvp(command[0], command);
	cli_warn("store: %s: %s", command[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* The old value goes in through an unlinked file, so the command can read
   it at its own pace while we collect its output: no pipe deadlock. */
static int old_value_fd(const void *old, size_t len)
{
	int fd = memfd_create("fsafe-store-old", MFD_CLOEXEC);
	const char *p = old;

	if (fd < 0)
		return -errno;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			close(fd);
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return lseek(fd, 0, SEEK_SET) < 0 ? -errno : fd;
}

static int filter(const void *old, size_t old_len, const void **nb,
                  size_t *nl, void *arg)
{
	struct filter *f = arg;
	int in = old_value_fd(old, old_len), p[2], r;

	if (in < 0)
		return in;
	if (pipe2(p, O_CLOEXEC) < 0) {
		close(in);
		return -errno;
	}
	pid_t pid = fork();
	if (pid == 0)
		run_child(f->command, in, p[1], old != NULL);
	close(in);
	close(p[1]);
	r = pid < 0 ? -errno : cli_read_all(p[0], SIZE_MAX, &f->out,
	                                    &f->out_len);
	close(p[0]);
	if (pid < 0)
		return r;
	while (waitpid(pid, &f->status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (r < 0)
		return r;
	if (!WIFEXITED(f->status) || WEXITSTATUS(f->status))
		return -ECANCELED;
	*nb = f->out;
	*nl = f->out_len;
	return FSAFE_STORE_WRITE;
}

static int do_update(void *ctx, int argc, char **argv)
{
	struct args *a = ctx;
	const char *key = argv[1];
	struct filter f = { .command = argv + 2 };

	(void)argc;
	/* "--" right after KEY: COMMAND's options are its own. */
	if (a->ops.dashdash != 3)
		return cli_spec_error(&spec_base, "update needs KEY -- COMMAND");
	/* A command that dies on a closed pipe must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	int r = fsafe_store_update(a->s, key, strlen(key), filter, &f, NULL);
	free(f.out);
	if (r == -ECANCELED) {
		int st = f.status;
		cli_warn("store %s: update %s: %s %s %d; unchanged", a->dir, key,
		         f.command[0],
		         WIFEXITED(st) ? "exited with status" : "killed by signal",
		         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		return CLI_FAIL;
	}
	return r < 0 ? fail(a, key, r) : CLI_OK;
}

/* check and repair need no open store: opening may sweep. */
static int do_check(void *ctx, int argc, char **argv)
{
	const struct args *a = ctx;
	bool repair = !strcmp(argv[0], "repair");
	struct cli_damage cd = { 0 };
	char label[PATH_MAX + 8];
	int r;

	(void)argc;
	snprintf(label, sizeof(label), "store %s", a->dir);
	r = repair ? fsafe_store_repair(AT_FDCWD, a->dir,
	                                cli_damage_printer(true), &cd)
	           : fsafe_store_check(AT_FDCWD, a->dir,
	                               cli_damage_printer(false), &cd);
	return cli_damage_status(label, repair, r, &cd);
}

/* Reading commands change nothing on disk: no sweep. */
static bool read_only(const char *op)
{
	return !strcmp(op, "get") || !strcmp(op, "ls");
}

static const struct cli_verb ops[] = {
	{ "put", do_put, 1, 2, "store FILE (or standard input) as KEY" },
	{ "get", do_get, 1, 1, "write KEY's value to standard output" },
	{ "del", do_del, 1, 1, "remove KEY" },
	{ "ls", do_ls, 0, 0, "list the keys" },
	{ "update", do_update, 2, INT_MAX, "filter KEY through COMMAND" },
	{ "check", do_check, 0, 0, "report damage" },
	{ "repair", do_check, 0, 0, "quarantine damage" },
};

enum { NOPS = sizeof(ops) / sizeof(ops[0]) };

static int open_and_run(struct args *a, const struct cli_verb *v, int argc,
                        char **argv)
{
	int r;

	if (read_only(a->op))
		a->opts.flags |= FSAFE_STORE_NO_SWEEP;
	if ((r = fsafe_store_open(AT_FDCWD, a->dir, &a->opts, &a->s)) < 0) {
		char label[PATH_MAX + 8];
		snprintf(label, sizeof(label), "store %s", a->dir);
		cli_warn_dir(label, a->dir, r);
		explain(a, r);
		return CLI_FAIL;
	}
	r = v->run(a, argc, argv);
	fsafe_store_close(a->s);
	return r;
}

int cmd_store(void *ctx, int argc, char **argv)
{
	struct args a = { .opts = FSAFE_STORE_OPTS_INIT };
	int r = parse_args(argc, argv, &a);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	/* check and repair need no open store (opening may sweep); a bad
	   operation or count is refused before anything is opened. */
	const struct cli_verb *v = cli_verb_find(&spec_base, ops, NOPS,
	                                         a.ops.argc - 1, a.ops.argv + 1);
	if (!v)
		return CLI_USAGE;
	if (v->run == do_check)
		return do_check(&a, a.ops.argc - 1, a.ops.argv + 1);
	return open_and_run(&a, v, a.ops.argc - 1, a.ops.argv + 1);
}
