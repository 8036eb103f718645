/*
 * fsafe checkpoint: save a set of files as one atomic checkpoint, load
 * one back, list the generations, show the audit trail, verify hashes.
 * Inspection (load, ls, log, verify) opens the checkpoint read-only, so it
 * works while an application holds the writer's lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#include "cli.h"
#include "cli_damage.h"
#include "cli_opt.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] =
	"usage: fsafe checkpoint DIR save [--revision R] FILE...\n"
	"       fsafe checkpoint DIR load [--generation N] [--fallback]\n"
	"                                 [--revision R] OUTDIR\n"
	"       fsafe checkpoint DIR ls|log|verify|check|repair\n";

static const char help[] =
	"A checkpoint is a set of files saved and restored as one unit: after\n"
	"any crash DIR holds the whole previous set or the whole new one.\n"
	"\n"
	"  save FILE...     save the FILEs (each under its base name) as a new\n"
	"                   generation; prints its number\n"
	"  load OUTDIR      write the current set into OUTDIR (each file\n"
	"                   atomically), after checking every hash\n"
	"  ls               the generations: time, revision, files and sizes\n"
	"  log              the audit trail: time, pid, event, generation\n"
	"  verify           check every generation's files against its hashes,\n"
	"                   then everything check checks\n"
	"  check            report damage, one problem a line (changes nothing)\n"
	"  repair           quarantine what is damaged, rebuild CURRENT from the\n"
	"                   newest intact generation; print what was done\n"
	"\n"
	"  -r, --revision R    save: the writer revision to record; load: the\n"
	"                      one expected (a warning if it differs)\n"
	"  -g, --generation N  load generation N instead of the current one\n"
	"  -f, --fallback      load: if damaged, load the newest older intact\n"
	"                      generation instead (with a warning)\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 done, 1 failed (or damage found; repair: damage left),\n"
	"2 usage error (check: or the check could not run).\n";

struct ck_args {
	const char *dir, *revision;
	uint64_t generation;
	bool fallback;
};

static const struct cli_spec spec_base = { "checkpoint", usage, help, NULL,
	                                   0 };

/* The library's rule for a revision (fsafe/checkpoint.h), checked here
   so that a bad one is a usage error naming the problem, not a failed
   open. */
static const char *bad_revision(const char *r)
{
	if (strlen(r) > FSAFE_CHECKPOINT_REVISION_MAX)
		return "longer than 1024 bytes";
	for (; *r; r++)
		if ((unsigned char)*r < 0x20 || *r == 0x7f)
			return "holds a control character (a newline, a tab...)";
	return NULL;
}

static int parse(int argc, char **argv, struct ck_args *a,
                 struct cli_args *ops)
{
	const struct cli_opt opts[] = {
		CLI_STRING('r', "revision", &a->revision),
		CLI_UINT('g', "generation", &a->generation, 1, UINT64_MAX,
		         NULL),
		CLI_FLAG('f', "fallback", &a->fallback),
		CLI_HELP,
		CLI_END,
	};
	struct cli_spec spec = spec_base;
	const char *why;
	int r;

	spec.opts = opts;
	if ((r = cli_parse(&spec, argc, argv, ops)) != CLI_CONTINUE)
		return r;
	if (a->revision && (why = bad_revision(a->revision)))
		return cli_spec_error(&spec, "--revision %s", why);
	if (ops->argc < 2)
		return cli_spec_error(&spec, "DIR and a command are required");
	a->dir = ops->argv[0];
	return CLI_CONTINUE;
}

static int open_ck(const char *dir, unsigned flags, const char *revision,
                   fsafe_checkpoint **cp)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;

	o.flags = flags;
	o.revision = revision;
	int r = fsafe_checkpoint_open(AT_FDCWD, dir, &o, cp);
	if (r == -EWOULDBLOCK)
		cli_warn("checkpoint %s: another writer holds it", dir);
	else if (r < 0)
		cli_warn("checkpoint %s: open: %s", dir, fsafe_strerror(r));
	if (r < 0)
		return r;
	if ((r = fsafe_checkpoint_current_error(*cp)) != 0)
		cli_warn("checkpoint %s: CURRENT: %s: no generation is removed "
		         "until \"fsafe checkpoint %s repair\"", dir,
		         r == -ENOENT ? "missing" : r == -EBADMSG ? "malformed"
		                                  : "not a regular file", dir);
	return 0;
}

/* ---- check and repair ---------------------------------------------------- */

/* Every problem check finds, printed; their number or -errno. */
static int run_check(const char *dir)
{
	return fsafe_checkpoint_check(AT_FDCWD, dir, cli_damage_printer(false),
	                              NULL);
}

static int do_check(void *ctx, int argc, char **argv)
{
	const char *dir = ((const struct ck_args *)ctx)->dir;
	int n = run_check(dir);

	(void)argc, (void)argv;

	if (n < 0) {
		cli_warn("checkpoint %s: check: %s", dir, fsafe_strerror(n));
		return CLI_USAGE;
	}
	if (!cli_flush_stdout("checkpoint"))
		return CLI_USAGE;
	return n ? CLI_FAIL : CLI_OK;
}

static int do_repair(void *ctx, int argc, char **argv)
{
	const char *dir = ((const struct ck_args *)ctx)->dir;
	struct cli_damage cd = { 0 };
	int n = fsafe_checkpoint_repair(AT_FDCWD, dir, cli_damage_printer(true),
	                                &cd);

	(void)argc, (void)argv;
	if (n == -EWOULDBLOCK) {
		cli_warn("checkpoint %s: another writer holds it", dir);
		return CLI_FAIL;
	}
	if (n < 0) {
		cli_warn("checkpoint %s: repair: %s", dir, fsafe_strerror(n));
		return CLI_FAIL;
	}
	/* Usable afterwards is what a check says now. */
	int left = fsafe_checkpoint_check(AT_FDCWD, dir, NULL, NULL);
	if (left)
		cli_warn("checkpoint %s: repair: %d problem%s left", dir,
		         left < 0 ? 0 : left, left == 1 ? "" : "s");
	return left || !cli_flush_stdout("checkpoint") ? CLI_FAIL : CLI_OK;
}

/* ---- save -------------------------------------------------------------- */

static int stream_file(fsafe_checkpoint_tx *tx, const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	fsafe_checkpoint_stream *s;
	static char buf[1 << 16];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0) {
		cli_warn("checkpoint: %s: %s", path, strerror(errno));
		return -errno;
	}
	if ((r = fsafe_checkpoint_add_stream(tx, name, &s)) < 0) {
		cli_warn("checkpoint: %s: %s%s", path, fsafe_strerror(r),
		         r == -EEXIST ? " (two FILEs with one name)" : "");
		close(fd);
		return r;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0 &&
	       (r = fsafe_checkpoint_stream_write(s, buf, (size_t)n)) == 0)
		;
	if (n < 0)
		r = -errno;
	int c = fsafe_checkpoint_stream_close(s);
	r = r < 0 ? r : c;
	if (r < 0)
		cli_warn("checkpoint: %s: %s", path, fsafe_strerror(r));
	close(fd);
	return r;
}

static int do_save(void *ctx, int argc, char **argv)
{
	const struct ck_args *a = ctx;
	const char *dir = a->dir;
	char **files = argv + 1;
	int n = argc - 1;
	fsafe_checkpoint *cp;
	fsafe_checkpoint_tx *tx;
	uint64_t gen;
	int r;

	if (open_ck(dir, FSAFE_CHECKPOINT_CREATE | FSAFE_CHECKPOINT_NO_WAIT,
	            a->revision, &cp) < 0)
		return CLI_FAIL;
	if ((r = fsafe_checkpoint_begin(cp, &tx)) < 0) {
		cli_warn("checkpoint %s: begin: %s", dir, fsafe_strerror(r));
		fsafe_checkpoint_close(cp);
		return CLI_FAIL;
	}
	for (int i = 0; i < n && r == 0; i++)
		r = stream_file(tx, files[i]);
	if (r < 0) {
		fsafe_checkpoint_abort(tx);
	} else if ((r = fsafe_checkpoint_commit(tx, &gen)) < 0) {
		cli_warn("checkpoint %s: commit: %s", dir, fsafe_strerror(r));
	} else {
		printf("%" PRIu64 "\n", gen);
	}
	int c = fsafe_checkpoint_close(cp);
	if (c < 0)
		cli_warn("checkpoint %s: close: %s", dir, fsafe_strerror(c));
	return r < 0 || !cli_flush_stdout("checkpoint") ? CLI_FAIL : CLI_OK;
}

/* ---- load -------------------------------------------------------------- */

static void warn_damage(const char *dir,
                        const struct fsafe_checkpoint_damage *d)
{
	if (!d->generation && !strcmp(d->file, "CURRENT")) {
		cli_warn("checkpoint %s: CURRENT: %s", dir,
		         d->code == -ENOENT ? "missing" : fsafe_strerror(d->code));
		return;
	}
	if (!d->generation)
		return;
	cli_warn("checkpoint %s: generation %" PRIu64 " is damaged: %s: %s",
	         dir, d->generation, d->file[0] ? d->file : "manifest",
	         fsafe_strerror(d->code));
}

/* Whether name is one of the snapshot's files. */
static bool in_set(const fsafe_checkpoint_snapshot *s, const char *name)
{
	return fsafe_checkpoint_snapshot_find(s, name) >= 0;
}

/*
 * OUTDIR must end up holding exactly the loaded set: an entry of another
 * set there would pass for part of this one. Refuse (before writing
 * anything) rather than delete what may be someone's file.
 */
static int outdir_clean(const char *outdir, int dfd,
                        const fsafe_checkpoint_snapshot *s)
{
	int fd = dup(dfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;
	int r = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		cli_warn("checkpoint: %s: %s", outdir, strerror(errno));
		return -errno;
	}
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fsafe_is_staging_name(e->d_name) || in_set(s, e->d_name))
			continue;
		cli_warn("checkpoint: %s: holds \"%s\", which is not in the "
		         "set loaded; load into an empty directory", outdir,
		         e->d_name);
		r = -EEXIST;
	}
	closedir(d);
	return r;
}

static int write_out(const char *outdir, const fsafe_checkpoint_snapshot *s)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	/* A link at a file's name is replaced, never written through. */
	o.flags = FSAFE_NO_FOLLOW;
	if (mkdir(outdir, 0777) < 0 && errno != EEXIST) {
		cli_warn("checkpoint: %s: %s", outdir, strerror(errno));
		return -errno;
	}
	int dfd = open(outdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		cli_warn("checkpoint: %s: %s", outdir, strerror(errno));
		return -errno;
	}
	int r = outdir_clean(outdir, dfd, s);
	for (size_t i = 0; i < fsafe_checkpoint_snapshot_count(s) && r >= 0;
	     i++) {
		const char *name = fsafe_checkpoint_snapshot_name(s, i);
		r = fsafe_write_fileat(dfd, name,
		                       fsafe_checkpoint_snapshot_data(s, i),
		                       fsafe_checkpoint_snapshot_size(s, i), &o);
		if (r < 0)
			cli_warn("checkpoint: %s/%s: %s", outdir, name,
			         fsafe_strerror(r));
	}
	close(dfd);
	return r;
}

static int do_load(void *ctx, int argc, char **argv)
{
	const struct ck_args *a = ctx;
	const char *dir = a->dir;
	char **rest = argv + 1;
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	struct fsafe_checkpoint_damage dm;
	fsafe_checkpoint_snapshot *s;
	fsafe_checkpoint *cp;

	(void)argc;
	if (open_ck(dir, FSAFE_CHECKPOINT_READ_ONLY, a->revision, &cp) < 0)
		return CLI_FAIL;
	lo.generation = a->generation;
	lo.flags = a->fallback ? FSAFE_CHECKPOINT_FALLBACK : 0;
	lo.damage = &dm;
	int r = fsafe_checkpoint_load(cp, &lo, &s);
	warn_damage(dir, &dm);
	if (r < 0) {
		bool cur = !dm.generation && dm.file[0];
		cli_warn("checkpoint %s: load: %s", dir,
		         cur ? "CURRENT is damaged (--fallback loads the newest "
		               "intact generation)"
		         : r == -ENOENT ? "no such checkpoint or generation"
		                        : fsafe_strerror(r));
	} else {
		if (r & FSAFE_CHECKPOINT_FELL_BACK)
			cli_warn("checkpoint %s: loaded generation %" PRIu64
			         " instead", dir,
			         fsafe_checkpoint_snapshot_generation(s));
		if (r & FSAFE_CHECKPOINT_OTHER_REVISION)
			cli_warn("checkpoint %s: saved by revision \"%s\", not "
			         "\"%s\"", dir,
			         fsafe_checkpoint_snapshot_revision(s),
			         a->revision);
		r = write_out(rest[0], s);
		fsafe_checkpoint_snapshot_free(s);
	}
	fsafe_checkpoint_close(cp);
	return r < 0 ? CLI_FAIL : CLI_OK;
}

/* ---- ls, log, verify ----------------------------------------------------- */

static void put_time(int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char b[32];

	gmtime_r(&t, &tm);
	strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
	printf("%s.%03dZ", b, (int)(ms % 1000));
}

static int ls_one(const char *dir, fsafe_checkpoint *cp, uint64_t g,
                  uint64_t current)
{
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	fsafe_checkpoint_snapshot *s;
	uint64_t total = 0;

	lo.generation = g;
	lo.flags = FSAFE_CHECKPOINT_MANIFEST_ONLY;
	int r = fsafe_checkpoint_load(cp, &lo, &s);
	if (r < 0) {
		cli_warn("checkpoint %s: generation %" PRIu64 ": %s", dir, g,
		         fsafe_strerror(r));
		return r;
	}
	size_t n = fsafe_checkpoint_snapshot_count(s);
	for (size_t i = 0; i < n; i++)
		total += fsafe_checkpoint_snapshot_size(s, i);
	printf("generation %" PRIu64 "%s  ", g, g == current ? " (current)" : "");
	put_time(fsafe_checkpoint_snapshot_time_ms(s));
	printf("  revision \"%s\"  %zu file%s  %" PRIu64 " bytes\n",
	       fsafe_checkpoint_snapshot_revision(s), n, n == 1 ? "" : "s",
	       total);
	for (size_t i = 0; i < n; i++)
		printf("  %12" PRIu64 "  %s\n", fsafe_checkpoint_snapshot_size(s, i),
		       fsafe_checkpoint_snapshot_name(s, i));
	fsafe_checkpoint_snapshot_free(s);
	return 0;
}

/* Every generation load could use, oldest first (malloc'd). */
static int gens(fsafe_checkpoint *cp, uint64_t **v)
{
	int n = fsafe_checkpoint_generations(cp, NULL, 0);

	if (n <= 0)
		return n;
	*v = calloc((size_t)n, sizeof(**v));
	if (!*v)
		return -ENOMEM;
	int m = fsafe_checkpoint_generations(cp, *v, (size_t)n);
	return m < n ? m : n;
}

static int do_ls(const char *dir, fsafe_checkpoint *cp)
{
	uint64_t *v = NULL;
	int n = gens(cp, &v), bad = 0;

	if (n < 0) {
		cli_warn("checkpoint %s: %s", dir, fsafe_strerror(n));
		return CLI_FAIL;
	}
	for (int i = n - 1; i >= 0; i--)
		bad += ls_one(dir, cp, v[i], fsafe_checkpoint_current(cp)) < 0;
	free(v);
	return bad || !cli_flush_stdout("checkpoint") ? CLI_FAIL : CLI_OK;
}

static int print_event(const struct fsafe_checkpoint_event *e, void *arg)
{
	(void)arg;
	put_time(e->time_ms);
	printf("  %ld  %-9s  %" PRIu64 "\n", (long)e->pid,
	       fsafe_checkpoint_event_name(e->kind), e->generation);
	return 0;
}

static int do_log(void *ctx, int argc, char **argv)
{
	const char *dir = ((const struct ck_args *)ctx)->dir;
	size_t damaged;
	int r = fsafe_checkpoint_events(AT_FDCWD, dir, print_event, NULL,
	                                &damaged);

	(void)argc, (void)argv;
	if (r == -ENOENT) {
		cli_warn("checkpoint %s: no event log", dir);
		return CLI_FAIL;
	}
	if (r < 0) {
		cli_warn("checkpoint %s: log: %s", dir, fsafe_strerror(r));
		return CLI_FAIL;
	}
	if (damaged)
		cli_warn("checkpoint %s: %zu damaged record%s skipped", dir,
		         damaged, damaged == 1 ? "" : "s");
	return cli_flush_stdout("checkpoint") ? CLI_OK : CLI_FAIL;
}

static int do_verify(const char *dir, fsafe_checkpoint *cp)
{
	struct fsafe_checkpoint_damage dm;
	uint64_t *v = NULL;
	int n = gens(cp, &v), bad = 0;

	if (n <= 0) {
		cli_warn("checkpoint %s: %s", dir,
		         n ? fsafe_strerror(n) : "no generation");
		return CLI_FAIL;
	}
	for (int i = n - 1; i >= 0; i--) {
		int r = fsafe_checkpoint_verify(cp, v[i], &dm);
		if (r == 0) {
			printf("generation %" PRIu64 ": ok\n", v[i]);
			continue;
		}
		bad++;
		printf("generation %" PRIu64 ": damaged: %s: %s\n", v[i],
		       dm.file[0] ? dm.file : "manifest", fsafe_strerror(r));
	}
	free(v);
	/* verify fails whenever check would: CURRENT, the log, strays. */
	int n2 = run_check(dir);
	bad += n2 != 0;
	return bad || !cli_flush_stdout("checkpoint") ? CLI_FAIL : CLI_OK;
}

/* ls and verify: on the checkpoint opened read-only. */
static int inspect(void *ctx, int argc, char **argv)
{
	const char *dir = ((const struct ck_args *)ctx)->dir;
	fsafe_checkpoint *cp;

	(void)argc;
	if (open_ck(dir, FSAFE_CHECKPOINT_READ_ONLY, NULL, &cp) < 0)
		return CLI_FAIL;
	int r = !strcmp(argv[0], "ls") ? do_ls(dir, cp) : do_verify(dir, cp);
	fsafe_checkpoint_close(cp);
	return r;
}

static const struct cli_verb verbs[] = {
	{ "save", do_save, 1, INT_MAX, "save FILEs as a new generation" },
	{ "load", do_load, 1, 1, "write the current set into OUTDIR" },
	{ "ls", inspect, 0, 0, "list the generations" },
	{ "log", do_log, 0, 0, "print the audit trail" },
	{ "verify", inspect, 0, 0, "check every generation's hashes" },
	{ "check", do_check, 0, 0, "report damage" },
	{ "repair", do_repair, 0, 0, "quarantine damage" },
};

int cmd_checkpoint(void *ctx, int argc, char **argv)
{
	struct ck_args a = { 0 };
	struct cli_args ops;
	int r = parse(argc, argv, &a, &ops);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	return cli_dispatch(&spec_base, verbs, sizeof(verbs) / sizeof(verbs[0]),
	                    &a, ops.argc - 1, ops.argv + 1);
}
