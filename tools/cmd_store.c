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
#include <getopt.h>
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
	"  -k, --kernel-lock     kernel-mode lock (local filesystems only)\n"
	"  -i, --if-version N    put only if KEY's version is N (0: absent)\n"
	"  -l, --long            ls: VERSION LENGTH KEY\n"
	"  -0, --null            ls: end each line with NUL, not newline\n"
	"  -v, --verbose         ls: report every entry that is not a record\n"
	"  -h, --help            this text\n"
	"\n"
	"Exit status: 0 ok; 1 failed (no such key, stale version, COMMAND\n"
	"failed: nothing changed; check: damage found; repair: something\n"
	"left as it is); 2 usage error (check, repair: could not run).\n";

struct args {
	struct fsafe_store_opts opts;
	bool has_version, long_ls, null, verbose;
	unsigned damaged;
	uint64_t version;
	const char *dir, *op;
	char **rest;
	int nrest;
	fsafe_store *s;
};

static int parse_version(const char *text, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || end == text || *end || *text == '-')
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option longopts[] = {
		{ "create", no_argument, NULL, 'c' },
		{ "no-sync", no_argument, NULL, 'n' },
		{ "kernel-lock", no_argument, NULL, 'k' },
		{ "if-version", required_argument, NULL, 'i' },
		{ "long", no_argument, NULL, 'l' },
		{ "null", no_argument, NULL, '0' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:cnki:l0vh", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c': a->opts.flags |= FSAFE_STORE_CREATE; break;
		case 'n': a->opts.write_flags |= FSAFE_NO_SYNC; break;
		case 'k': a->opts.flags |= FSAFE_STORE_LOCK_KERNEL; break;
		case 'l': a->long_ls = true; break;
		case '0': a->null = true; break;
		case 'v': a->verbose = true; break;
		case 'i':
			if (parse_version(optarg, &a->version) < 0)
				return cli_usage_error("store",
				                       "--if-version needs a "
				                       "number", usage);
			a->has_version = true;
			break;
		case 'h':
			fputs(usage, stdout);
			fputs(help, stdout);
			return cli_flush_stdout("store") ? -1 : CLI_FAIL;
		default:
			return cli_bad_option("store", argv, c, usage);
		}
	}
	if (argc - optind < 2)
		return cli_usage_error("store", "DIR and an operation are "
		                       "needed", usage);
	a->dir = argv[optind];
	a->op = argv[optind + 1];
	a->rest = argv + optind + 2;
	a->nrest = argc - optind - 2;
	return CLI_OK;
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
		         : r == -ENOENT ? "no such key"
		                        : fsafe_strerror(r));
	else
		cli_warn("store %s: %s: %s", a->dir, a->op, fsafe_strerror(r));
	if (r != -EBADMSG)
		explain(a, r);
	return CLI_FAIL;
}

/* All of fd into a malloc'd buffer. */
static int slurp(int fd, char **buf, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);

	for (;;) {
		if (!b)
			return -ENOMEM;
		if (n == cap) {
			char *nb = realloc(b, cap *= 2);
			if (!nb) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(b);
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*buf = b;
	*len = n;
	return 0;
}

static int do_put(struct args *a)
{
	const char *key = a->rest[0];
	const char *file = a->nrest == 2 ? a->rest[1] : "-";
	int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0;
	char *buf;
	size_t len;
	int r;

	if (fd < 0) {
		cli_warn("store: %s: %s", file, strerror(errno));
		return CLI_FAIL;
	}
	r = slurp(fd, &buf, &len);
	if (fd > 0)
		close(fd);
	if (r < 0) {
		cli_warn("store: %s: %s", file, strerror(-r));
		return CLI_FAIL;
	}
	r = a->has_version
	            ? fsafe_store_put_if(a->s, key, strlen(key), buf, len,
	                                 a->version, NULL)
	            : fsafe_store_put(a->s, key, strlen(key), buf, len, NULL);
	free(buf);
	return r < 0 ? fail(a, key, r) : CLI_OK;
}

static int do_get(struct args *a)
{
	const char *key = a->rest[0];
	void *buf;
	size_t len;
	int r = fsafe_store_get(a->s, key, strlen(key), &buf, &len, NULL);

	if (r < 0)
		return fail(a, key, r);
	size_t w = fwrite(buf, 1, len, stdout);
	free(buf);
	return w == len && cli_flush_stdout("store") ? CLI_OK : CLI_FAIL;
}

static int do_del(struct args *a)
{
	const char *key = a->rest[0];
	int r = fsafe_store_delete(a->s, key, strlen(key));

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

static int do_ls(struct args *a)
{
	struct fsafe_store_list_opts o = FSAFE_STORE_LIST_OPTS_INIT;
	struct fsafe_store_entry e;
	fsafe_store_iter *it;
	int r;

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
	r = pid < 0 ? -errno : slurp(p[0], &f->out, &f->out_len);
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

static int do_update(struct args *a)
{
	const char *key = a->rest[0];
	struct filter f = { .command = a->rest + 2 };

	if (a->nrest < 3 || strcmp(a->rest[1], "--"))
		return cli_usage_error("store", "update needs KEY -- COMMAND",
		                       usage);
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

static int dispatch(struct args *a)
{
	static const struct {
		const char *name;
		int (*fn)(struct args *);
		int min, max;
	} ops[] = {
		{ "put", do_put, 1, 2 },    { "get", do_get, 1, 1 },
		{ "del", do_del, 1, 1 },    { "ls", do_ls, 0, 0 },
		{ "update", do_update, 3, 1 << 20 },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (strcmp(a->op, ops[i].name))
			continue;
		if (a->nrest < ops[i].min || a->nrest > ops[i].max)
			return cli_usage_error("store", "wrong number of "
			                       "arguments", usage);
		return ops[i].fn(a);
	}
	return cli_usage_error("store", "unknown operation", usage);
}

/* check and repair need no open store: opening may sweep. */
static int do_check(const struct args *a, bool repair)
{
	struct cli_damage cd = { 0 };
	char label[PATH_MAX + 8];
	int r;

	if (a->nrest)
		return cli_usage_error("store", "wrong number of arguments",
		                       usage);
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

int cmd_store(int argc, char **argv)
{
	struct args a = { .opts = FSAFE_STORE_OPTS_INIT };
	int r = parse_args(argc, argv, &a);

	if (r != CLI_OK)
		return r < 0 ? CLI_OK : r;
	if (!strcmp(a.op, "check") || !strcmp(a.op, "repair"))
		return do_check(&a, !strcmp(a.op, "repair"));
	if (read_only(a.op))
		a.opts.flags |= FSAFE_STORE_NO_SWEEP;
	if ((r = fsafe_store_open(AT_FDCWD, a.dir, &a.opts, &a.s)) < 0) {
		cli_warn("store %s: %s", a.dir, fsafe_strerror(r));
		return CLI_FAIL;
	}
	r = dispatch(&a);
	fsafe_store_close(a.s);
	return r;
}
