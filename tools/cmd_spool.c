/*
 * fsafe spool: the chunk spool from the shell: append lines (or
 * NUL-separated records), read them from the cursor, ack, check, stat.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] =
	"usage: fsafe spool DIR append [-0] [--segment-size N] "
	"[--max-record N] [FILE|-]\n"
	"       fsafe spool DIR read [-0] [--seq] [--from SEQ] [--max N]\n"
	"       fsafe spool DIR ack SEQ\n"
	"       fsafe spool DIR check|repair\n"
	"       fsafe spool DIR stat\n";

static const char help[] =
	"A directory of checksummed segments holding numbered records, and a\n"
	"consumer cursor. Opening it repairs what a crash left (see\n"
	"fsafe-spool(1)); one process uses a spool at a time.\n"
	"\n"
	"  append    one record per line of FILE (default: standard input),\n"
	"            durable when the command exits 0; creates DIR if missing\n"
	"  read      records from the cursor (or --from SEQ), one per line;\n"
	"            changes nothing (damage is read past, not repaired)\n"
	"  ack SEQ   records up to SEQ are consumed: the cursor moves past it\n"
	"  check     find damage, change nothing: one \"PATH: WHAT\" line a\n"
	"            problem; exit 1 if any\n"
	"  repair    mend it (damaged bytes to quarantine/, valid records\n"
	"            after them salvaged): \"PATH: WHAT: ACTION\" lines\n"
	"  stat      cursor, numbers, segments, bytes, damage found; changes\n"
	"            nothing\n"
	"\n"
	"  -0, --null          records end with NUL, not newline\n"
	"  -s, --seq           read: print \"SEQ<TAB>\" before each record\n"
	"  -f, --from SEQ      read: start at record SEQ\n"
	"  -n, --max N         read: at most N records\n"
	"      --segment-size N  append: new segments roll over past N bytes\n"
	"      --max-record N  append: longest record (default 1 MiB)\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 done, 1 failed (or check found problems), 2 usage\n"
	"(or check could not run).\n";

enum { HELP_DONE = -1 }; /* parse() printed --help */

struct spool_args {
	char sep;
	bool seq;
	uint64_t from, max, segment_size, max_record;
	const char *file;
};

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return false;
	*v = strtoull(s, &end, 10);
	return !errno && !*end;
}

static int parse(int argc, char **argv, struct spool_args *a)
{
	static const struct option longopts[] = {
		{ "null", no_argument, NULL, '0' },
		{ "seq", no_argument, NULL, 's' },
		{ "from", required_argument, NULL, 'f' },
		{ "max", required_argument, NULL, 'n' },
		{ "segment-size", required_argument, NULL, 'S' },
		{ "max-record", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":0sf:n:h", longopts, NULL)) != -1) {
		uint64_t *num = c == 'f' ? &a->from : c == 'n' ? &a->max
		              : c == 'S' ? &a->segment_size
		              : c == 'R' ? &a->max_record : NULL;
		if (c == '0') {
			a->sep = '\0';
		} else if (c == 's') {
			a->seq = true;
		} else if (c == 'h') {
			fputs(usage, stdout);
			fputs(help, stdout);
			return cli_flush_stdout("spool") ? HELP_DONE
			                                 : CLI_FAIL;
		} else if (num && optarg) {
			if (!parse_u64(optarg, num))
				return cli_usage_error("spool",
				        "a number was expected", usage);
		} else {
			return cli_bad_option("spool", argv, c, usage);
		}
	}
	return CLI_OK;
}

/* Damage that opening found (and repaired, unless read-only): one line
   each on standard error. */
static int warn_damage(const struct fsafe_damage *d, void *arg)
{
	if (d->action)
		cli_warn("spool %s: %s: %s: %s", (const char *)arg, d->path,
		         d->what, d->action);
	else /* read-only: found, left in place */
		cli_warn("spool %s: %s: %s: %" PRIu64 " records lost",
		         (const char *)arg,
		         d->path, d->what, d->lost);
	return 0;
}

static int open_spool(const char *dir, const struct spool_args *a,
                      unsigned flags, fsafe_spool **s)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	struct fsafe_error e = { 0 };

	o.flags = flags;
	o.segment_size = a->segment_size;
	o.max_record = (uint32_t)a->max_record;
	o.error = &e;
	o.damage = warn_damage;
	o.damage_arg = (void *)dir;
	if (a->max_record > UINT32_MAX)
		return cli_usage_error("spool", "--max-record too large", usage);
	int r = fsafe_spool_open(AT_FDCWD, dir, &o, s);
	if (r < 0) {
		cli_warn("spool %s: %s: %s", dir, e.step ? e.step : "open",
		         fsafe_strerror(r));
		return CLI_FAIL;
	}
	return CLI_OK;
}

/* ---- append ---------------------------------------------------------------- */

#define BATCH_RECORDS 1024
#define BATCH_BYTES (4u << 20)

struct batch {
	struct iovec v[BATCH_RECORDS];
	char *lines[BATCH_RECORDS];
	size_t n, bytes;
	uint64_t total;
};

static int flush_batch(fsafe_spool *s, const char *dir, struct batch *b)
{
	int r = b->n ? fsafe_spool_append(s, b->v, b->n, NULL) : 0;

	for (size_t i = 0; i < b->n; i++)
		free(b->lines[i]);
	b->total += b->n;
	b->n = b->bytes = 0;
	if (r < 0) {
		cli_warn("spool %s: append: %s", dir, fsafe_strerror(r));
		return CLI_FAIL;
	}
	return CLI_OK;
}

static int append_from(fsafe_spool *s, const char *dir, FILE *in, char sep)
{
	struct batch *b = calloc(1, sizeof(*b));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = b ? CLI_OK : CLI_FAIL;

	while (rc == CLI_OK && (n = getdelim(&line, &cap, sep, in)) >= 0) {
		if (n > 0 && line[n - 1] == sep)
			n--;
		b->lines[b->n] = line;
		b->v[b->n++] = (struct iovec){ line, (size_t)n };
		b->bytes += (size_t)n;
		line = NULL;
		cap = 0;
		if (b->n == BATCH_RECORDS || b->bytes >= BATCH_BYTES)
			rc = flush_batch(s, dir, b);
	}
	free(line);
	if (rc == CLI_OK && ferror(in)) {
		cli_warn("spool %s: reading input: %s", dir, strerror(errno));
		rc = CLI_FAIL;
	}
	if (b && flush_batch(s, dir, b) != CLI_OK)
		rc = CLI_FAIL;
	free(b);
	return rc;
}

static int do_append(const char *dir, struct spool_args *a, int argc,
                     char **argv)
{
	fsafe_spool *s;
	FILE *in = stdin;

	if (argc - optind > 1)
		return cli_usage_error("spool", "append takes one FILE", usage);
	if (argc - optind == 1 && strcmp(argv[optind], "-") != 0 &&
	    !(in = fopen(argv[optind], "re"))) {
		cli_warn("spool %s: %s: %s", dir, argv[optind], strerror(errno));
		return CLI_FAIL;
	}
	int rc = open_spool(dir, a, FSAFE_SPOOL_CREATE, &s);
	if (rc == CLI_OK) {
		rc = append_from(s, dir, in, a->sep);
		fsafe_spool_close(s);
	}
	if (in != stdin)
		fclose(in);
	return rc;
}

/* ---- read, ack, stat, check ------------------------------------------------- */

static int do_read(const char *dir, struct spool_args *a)
{
	fsafe_spool *s;
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq, n = 0;
	int r, rc = open_spool(dir, a, FSAFE_SPOOL_RDONLY, &s);

	if (rc != CLI_OK)
		return rc;
	r = fsafe_spool_reader_open(s, a->from ? a->from
	                                       : FSAFE_SPOOL_FROM_CURSOR, &rd);
	while (r >= 0 && (!a->max || n < a->max) &&
	       (r = fsafe_spool_next(rd, &d, &len, &seq)) == 1) {
		if (a->seq)
			printf("%" PRIu64 "\t", seq);
		fwrite(d, 1, len, stdout);
		putchar(a->sep);
		n++;
	}
	if (r < 0)
		cli_warn("spool %s: read: %s", dir, fsafe_strerror(r));
	fsafe_spool_reader_close(rd);
	fsafe_spool_close(s);
	return cli_flush_stdout("spool") && r >= 0 ? CLI_OK : CLI_FAIL;
}

static int do_ack(const char *dir, struct spool_args *a, int argc,
                  char **argv)
{
	fsafe_spool *s;
	uint64_t seq;

	if (argc - optind != 1 || !parse_u64(argv[optind], &seq))
		return cli_usage_error("spool", "ack takes one SEQ", usage);
	int rc = open_spool(dir, a, 0, &s);
	if (rc != CLI_OK)
		return rc;
	int r = fsafe_spool_ack(s, seq);
	if (r < 0) {
		cli_warn("spool %s: ack: %s", dir, fsafe_strerror(r));
		rc = CLI_FAIL;
	}
	fsafe_spool_close(s);
	return rc;
}

static int do_stat(const char *dir, struct spool_args *a)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	fsafe_spool *s;
	int rc = open_spool(dir, a, FSAFE_SPOOL_RDONLY, &s);

	if (rc != CLI_OK)
		return rc;
	fsafe_spool_stat(s, &st);
	fsafe_spool_close(s);
	printf("cursor: %" PRIu64 "\nfirst: %" PRIu64 "\nnext: %" PRIu64
	       "\nunread: %" PRIu64 "\nsegments: %" PRIu64
	       "\nbytes: %" PRIu64 "\nquarantined: %" PRIu64
	       "\ntruncated: %" PRIu64 "\nquarantined-bytes: %" PRIu64
	       "\nsalvaged: %" PRIu64 "\nlost: %" PRIu64
	       "\ncursor-ahead: %" PRIu64 "\nquarantine-entries: %" PRIu64
	       "\n",
	       st.cursor, st.first_seq, st.next_seq,
	       st.next_seq - (st.cursor > st.first_seq ? st.cursor
	                                               : st.first_seq),
	       st.segments, st.bytes, st.quarantined, st.truncated,
	       st.quarantined_bytes, st.salvaged, st.lost, st.cursor_ahead,
	       st.quarantine_entries);
	return cli_flush_stdout("spool") ? CLI_OK : CLI_FAIL;
}

static int print_problem(const struct fsafe_damage *d, void *arg)
{
	(void)arg;
	printf("%s: %s%s%s\n", d->path, d->what, d->action ? ": " : "",
	       d->action ? d->action : "");
	return 0;
}

/* check and repair: one line a problem on standard output. */
static int do_damage(const char *dir, bool fix)
{
	int n = (fix ? fsafe_spool_repair : fsafe_spool_check)(
	        AT_FDCWD, dir, print_problem, NULL);

	if (n < 0) {
		cli_warn("spool %s: %s: %s", dir, fix ? "repair" : "check",
		         fsafe_strerror(n));
		return fix ? CLI_FAIL : CLI_USAGE;
	}
	if (!cli_flush_stdout("spool"))
		return fix ? CLI_FAIL : CLI_USAGE;
	return fix || n == 0 ? CLI_OK : CLI_FAIL;
}

int cmd_spool(int argc, char **argv)
{
	struct spool_args a = { .sep = '\n' };

	bool ask = false;
	for (int i = 1; i < argc && i < 3; i++)
		ask |= !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
	if (ask) {
		fputs(usage, stdout);
		fputs(help, stdout);
		return cli_flush_stdout("spool") ? CLI_OK : CLI_FAIL;
	}
	if (argc < 3)
		return cli_usage_error("spool", "DIR and a subcommand are "
		                       "needed", usage);
	const char *dir = argv[1], *sub = argv[2];
	int rc = parse(argc - 2, argv + 2, &a);
	if (rc == HELP_DONE)
		return CLI_OK;
	if (rc != CLI_OK)
		return rc;
	argc -= 2;
	argv += 2;
	bool bare = argc == optind;
	if (!strcmp(sub, "append"))
		return do_append(dir, &a, argc, argv);
	if (!strcmp(sub, "ack"))
		return do_ack(dir, &a, argc, argv);
	if (!bare)
		return cli_usage_error("spool", "unexpected argument", usage);
	if (!strcmp(sub, "read"))
		return do_read(dir, &a);
	if (!strcmp(sub, "check") || !strcmp(sub, "repair"))
		return do_damage(dir, sub[0] == 'r');
	if (!strcmp(sub, "stat"))
		return do_stat(dir, &a);
	return cli_usage_error("spool", "unknown subcommand", usage);
}
