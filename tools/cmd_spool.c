/*
 * fsafe spool: the chunk spool from the shell: append lines (or
 * NUL-separated records), read them from the cursor, ack, check, stat.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_damage.h"
#include "cli_opt.h"
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
	"fsafe-spool(1)). Any number of processes append at once, beside one\n"
	"that reads and acks.\n"
	"\n"
	"  append    one record per line of FILE (default: standard input),\n"
	"            durable when the command exits 0, and each batch as soon\n"
	"            as the input pauses; creates DIR if missing\n"
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
	"  -n, --max N         read: at most N records (1 or more)\n"
	"      --segment-size N  append: new segments roll over past N bytes\n"
	"                      (K, M or G suffix; default 64M)\n"
	"      --max-record N  append: longest record, 1 to 256M bytes\n"
	"                      (default 1M)\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 done, 1 failed (or check found problems), 2 usage\n"
	"(or check could not run).\n";

struct spool_args {
	char sep;
	bool seq;
	uint64_t from, max, segment_size, max_record;
	const char *dir;
};

static const struct cli_spec spec_base = { "spool", usage, help, NULL, 0 };

/* The library's ceiling on a record (include/fsafe/spool.h). */
#define RECORD_LIMIT (256ull << 20)

static int parse(int argc, char **argv, struct spool_args *a,
                 struct cli_args *ops)
{
	const struct cli_opt opts[] = {
		CLI_SETCHAR('0', "null", &a->sep, '\0'),
		CLI_FLAG('s', "seq", &a->seq),
		CLI_UINT('f', "from", &a->from, 0, UINT64_MAX - 1, NULL),
		/* 0 is refused: "at most none" is no reading at all. */
		CLI_UINT('n', "max", &a->max, 1, UINT64_MAX, NULL),
		CLI_SIZE(0, "segment-size", &a->segment_size, 1, UINT64_MAX),
		CLI_SIZE(0, "max-record", &a->max_record, 1, RECORD_LIMIT),
		CLI_HELP,
		CLI_END,
	};
	struct cli_spec spec = spec_base;
	int r;

	spec.opts = opts;
	if ((r = cli_parse(&spec, argc, argv, ops)) != CLI_CONTINUE)
		return r;
	if (ops->argc < 2)
		return cli_spec_error(&spec, "DIR and a subcommand are needed");
	a->dir = ops->argv[0];
	return CLI_CONTINUE;
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
	char label[PATH_MAX + 8];

	snprintf(label, sizeof(label), "spool %s", dir);
	o.damage = cli_damage_warn;
	o.damage_arg = label;
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

/*
 * Records from a descriptor, read by hand rather than through stdio: the
 * batch is flushed when no more input is ready, and only a reader that
 * knows what it has buffered can tell. poll() on a FILE's descriptor
 * misses the lines stdio already holds, so a batch would be cut between
 * records that arrived in one write.
 */
struct reader {
	int fd;
	char sep;
	bool eof;
	size_t max; /* the longest record: a longer one is not read whole */
	char *buf;
	size_t cap, start, end;
};

static bool input_ready(const struct reader *r)
{
	struct pollfd p = { .fd = r->fd, .events = POLLIN };

	return r->start < r->end || r->eof || poll(&p, 1, 0) != 0;
}

/* Room for more input after what is unread; false when out of memory. */
static bool reader_room(struct reader *r)
{
	if (r->start) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->end < r->cap)
		return true;
	size_t cap = r->cap ? r->cap * 2 : 64 * 1024;
	char *b = realloc(r->buf, cap);
	if (!b)
		return false;
	r->buf = b;
	r->cap = cap;
	return true;
}

/* The next record (its separator dropped) copied into *line: 1, or 0 at
   the end of input, or -errno (-EMSGSIZE: longer than r->max, found
   without reading the rest of it). */
static int reader_next(struct reader *r, char **line, size_t *len)
{
	size_t scanned = 0;

	for (;;) {
		size_t unread = r->end - r->start;
		char *sep = unread > scanned ?
			memchr(r->buf + r->start + scanned, r->sep,
			       unread - scanned) : NULL;
		size_t n = sep ? (size_t)(sep - r->buf) - r->start : unread;

		if (n > r->max)
			return -EMSGSIZE;
		if (sep || (r->eof && n > 0)) {
			if (!(*line = malloc(n ? n : 1)))
				return -ENOMEM;
			memcpy(*line, r->buf + r->start, n);
			*len = n;
			r->start += n + (sep != NULL);
			return 1;
		}
		if (r->eof)
			return 0;
		scanned = n;
		if (!reader_room(r))
			return -ENOMEM;
		ssize_t got = read(r->fd, r->buf + r->end, r->cap - r->end);
		if (got < 0 && errno != EINTR)
			return -errno;
		if (got == 0)
			r->eof = true;
		else if (got > 0)
			r->end += (size_t)got;
	}
}

static int append_from(fsafe_spool *s, const char *dir, int fd, char sep,
                       size_t max)
{
	struct batch *b = calloc(1, sizeof(*b));
	struct reader in = { .fd = fd, .sep = sep, .max = max };
	int rc = b ? CLI_OK : CLI_FAIL;
	int got = 0;

	while (rc == CLI_OK) {
		if (b->n && !input_ready(&in))
			rc = flush_batch(s, dir, b);
		char *line = NULL;
		size_t n = 0;
		if (rc != CLI_OK || (got = reader_next(&in, &line, &n)) <= 0)
			break;
		b->lines[b->n] = line;
		b->v[b->n++] = (struct iovec){ line, n };
		b->bytes += n;
		if (b->n == BATCH_RECORDS || b->bytes >= BATCH_BYTES)
			rc = flush_batch(s, dir, b);
	}
	free(in.buf);
	if (got == -EMSGSIZE) {
		/* As the library would refuse it: nothing of its batch. */
		cli_warn("spool %s: append: a record is longer than %zu bytes "
		         "(--max-record)", dir, max);
		rc = CLI_FAIL;
		for (size_t i = 0; i < b->n; i++)
			free(b->lines[i]);
		b->n = 0;
	} else if (got < 0) {
		cli_warn("spool %s: reading input: %s", dir, strerror(-got));
		rc = CLI_FAIL;
	}
	if (b && flush_batch(s, dir, b) != CLI_OK)
		rc = CLI_FAIL;
	free(b);
	return rc;
}

static int do_append(void *ctx, int argc, char **argv)
{
	struct spool_args *a = ctx;
	const char *dir = a->dir;
	fsafe_spool *s;
	int fd = STDIN_FILENO;

	if (argc == 2 && strcmp(argv[1], "-") != 0 &&
	    (fd = open(argv[1], O_RDONLY | O_CLOEXEC)) < 0) {
		cli_warn("spool %s: %s: %s", dir, argv[1], strerror(errno));
		return CLI_FAIL;
	}

	int rc = open_spool(dir, a, FSAFE_SPOOL_CREATE, &s);
	if (rc == CLI_OK) {
		rc = append_from(s, dir, fd, a->sep,
		                 a->max_record ? (size_t)a->max_record
		                               : (size_t)RECORD_LIMIT);
		fsafe_spool_close(s);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	return rc;
}

/* ---- read, ack, stat, check ------------------------------------------------- */

static int do_read(void *ctx, int argc, char **argv)
{
	struct spool_args *a = ctx;
	const char *dir = a->dir;
	fsafe_spool *s;
	fsafe_spool_reader *rd;
	const void *d;
	size_t len;
	uint64_t seq, n = 0;
	int r, rc = open_spool(dir, a, FSAFE_SPOOL_RDONLY, &s);

	if (rc != CLI_OK)
		return rc;
	(void)argc, (void)argv;
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

static int do_ack(void *ctx, int argc, char **argv)
{
	struct spool_args *a = ctx;
	const char *dir = a->dir;
	fsafe_spool *s;
	uint64_t seq;

	(void)argc;
	if (cli_parse_uint(argv[1], 0, UINT64_MAX, &seq) < 0)
		return cli_spec_error(&spec_base, "ack takes one SEQ, a whole "
		                      "number");
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

static int do_stat(void *ctx, int argc, char **argv)
{
	struct spool_args *a = ctx;
	const char *dir = a->dir;
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	fsafe_spool *s;
	int rc = open_spool(dir, a, FSAFE_SPOOL_RDONLY, &s);

	(void)argc, (void)argv;
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

/* check and repair: one line a problem on standard output. */
static int do_damage(void *ctx, int argc, char **argv)
{
	const struct spool_args *a = ctx;
	bool fix = !strcmp(argv[0], "repair");
	struct cli_damage cd = { 0 };
	int n = (fix ? fsafe_spool_repair : fsafe_spool_check)(
	        AT_FDCWD, a->dir, cli_damage_printer(fix), &cd);

	(void)argc;
	if (n < 0) {
		cli_warn("spool %s: %s: %s", a->dir, argv[0], fsafe_strerror(n));
		return fix ? CLI_FAIL : CLI_USAGE;
	}
	if (!cli_flush_stdout("spool"))
		return fix ? CLI_FAIL : CLI_USAGE;
	return fix || n == 0 ? CLI_OK : CLI_FAIL;
}

static const struct cli_verb verbs[] = {
	{ "append", do_append, 0, 1, "append records" },
	{ "read", do_read, 0, 0, "print records from the cursor" },
	{ "ack", do_ack, 1, 1, "move the cursor past SEQ" },
	{ "check", do_damage, 0, 0, "report damage" },
	{ "repair", do_damage, 0, 0, "mend damage" },
	{ "stat", do_stat, 0, 0, "print the numbers" },
};

#ifdef FSAFE_CLI_NATS
int cmd_spool_forward(int argc, char **argv); /* its own options */
#endif

int cmd_spool(void *ctx, int argc, char **argv)
{
	struct spool_args a = { .sep = '\n' };
	struct cli_args ops;
#ifdef FSAFE_CLI_NATS
	if (argc > 2 && strcmp(argv[2], "forward") == 0)
		return cmd_spool_forward(argc, argv);
#endif
	int r = parse(argc, argv, &a, &ops);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	return cli_dispatch(&spec_base, verbs, sizeof(verbs) / sizeof(verbs[0]),
	                    &a, ops.argc - 1, ops.argv + 1);
}
