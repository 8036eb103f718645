/*
 * The CLI's one option layer: every subcommand describes its options in a
 * table and hands it to cli_parse(), which knows each value type, permutes
 * options and operands (GNU style), ends options at "--", prints --help,
 * and reports a bad option or value the same way everywhere (exit 2).
 */
#ifndef FSAFE_CLI_OPT_H
#define FSAFE_CLI_OPT_H

#include <stdbool.h>
#include <stdint.h>

enum cli_opt_type {
	CLI_OPT_END,      /* ends a table */
	CLI_OPT_HELP,     /* -h, --help: print usage and help, exit 0 */
	CLI_OPT_BOOL,     /* bool *: set to true */
	CLI_OPT_BITS,     /* unsigned *: `bits` OR'd in */
	CLI_OPT_UINT,     /* uint64_t *: a whole number in [min, max] */
	CLI_OPT_SIZE,     /* uint64_t *: bytes, K/M/G suffixes, in [min, max] */
	CLI_OPT_DURATION, /* uint64_t *: milliseconds up to max; beyond it
	                     an error, or max with bits CLI_SATURATE */
	CLI_OPT_STRING,   /* const char **: any text, also empty */
	CLI_OPT_PATH,     /* const char **: a non-empty path */
	CLI_OPT_CHAR,     /* char *: set to (char)bits */
};

struct cli_opt {
	char short_name; /* 0: long name only */
	const char *long_name;
	enum cli_opt_type type;
	void *value;
	unsigned bits;      /* BITS: what to set; CHAR: the char */
	uint64_t min, max;  /* UINT, SIZE: the range; DURATION: the ceiling */
	bool *seen;         /* if not NULL: set when the option is given */
};

enum { CLI_SATURATE = 1 };

/* Table entries; s is the short name (0: none), l the long one. */
#define CLI_HELP { .short_name = 'h', .long_name = "help", \
	           .type = CLI_OPT_HELP }
#define CLI_END { .type = CLI_OPT_END }
#define CLI_FLAG(s, l, p) { .short_name = s, .long_name = l, \
	                    .type = CLI_OPT_BOOL, .value = p }
#define CLI_BIT(s, l, p, b) { .short_name = s, .long_name = l, \
	                      .type = CLI_OPT_BITS, .value = p, .bits = b }
#define CLI_SETCHAR(s, l, p, c) { .short_name = s, .long_name = l, \
	                          .type = CLI_OPT_CHAR, .value = p, .bits = c }
#define CLI_UINT(s, l, p, lo, hi, seen_) { .short_name = s, .long_name = l, \
	.type = CLI_OPT_UINT, .value = p, .min = lo, .max = hi, .seen = seen_ }
#define CLI_SIZE(s, l, p, lo, hi) { .short_name = s, .long_name = l, \
	.type = CLI_OPT_SIZE, .value = p, .min = lo, .max = hi }
#define CLI_DURATION(s, l, p, ceiling, seen_) { .short_name = s, \
	.long_name = l, .type = CLI_OPT_DURATION, .value = p, \
	.max = ceiling, .seen = seen_ }
/* A wait: UINT64_MAX (FSAFE_FOREVER) for anything longer. */
#define CLI_TIMEOUT(s, l, p, seen_) { .short_name = s, \
	.long_name = l, .type = CLI_OPT_DURATION, .value = p, \
	.bits = CLI_SATURATE, .max = UINT64_MAX, .seen = seen_ }
#define CLI_STRING(s, l, p) { .short_name = s, .long_name = l, \
	                      .type = CLI_OPT_STRING, .value = p }
#define CLI_PATH(s, l, p) { .short_name = s, .long_name = l, \
	                    .type = CLI_OPT_PATH, .value = p }

/* What a subcommand parses. */
struct cli_spec {
	const char *name;  /* "store", for messages */
	const char *usage; /* printed on stderr with a usage error */
	const char *help;  /* printed after usage by --help */
	const struct cli_opt *opts;
	/* Options are read up to "--", or, if stop_after > 0, up to the
	   operand after the first stop_after ones (a command to run keeps its
	   own options). */
	int stop_after;
};

/* The operands left after the options, in order. */
struct cli_args {
	int argc;
	char **argv;
	int dashdash; /* operands seen before "--", -1 if there was none */
};

/* cli_parse()'s "go on": anything else is the exit status to return. */
enum { CLI_CONTINUE = -1 };

/*
 * Parses argv[1..argc) (argv[0] is the subcommand's name) against
 * spec->opts, moving the operands to the front of argv (into *out).
 * Returns CLI_CONTINUE, or the exit status after --help (0, or 1 if it
 * could not be written) or a usage error (2, after a message).
 */
int cli_parse(const struct cli_spec *spec, int argc, char **argv,
              struct cli_args *out);

/* A usage error of spec's command that is not about one option (after
   the message and the usage on stderr). Returns 2. */
int cli_spec_error(const struct cli_spec *spec, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

/* The value parsers, also for operands (0 or -EINVAL / -ERANGE). */
int cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *v);
int cli_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *v);
/* "<digits>[ms|s|m|h|d]" (no unit: seconds); -ERANGE beyond ceiling. */
int cli_parse_duration(const char *s, uint64_t ceiling, uint64_t *ms);

/*
 * One dispatch for every level: a command's or an operation's name, the
 * function that runs it (ctx is the caller's state; argv[0] is the name),
 * the number of operands it takes after its name, and a summary.
 */
struct cli_verb {
	const char *name;
	int (*run)(void *ctx, int argc, char **argv);
	int min, max;
	const char *summary;
};

/* The verb named argv[0] of table[0..n), or NULL after a usage error of
   spec (unknown, or a wrong number of operands): exit 2. */
const struct cli_verb *cli_verb_find(const struct cli_spec *spec,
                                     const struct cli_verb *table, int n,
                                     int argc, char **argv);

/*
 * Runs the verb named argv[0] of table[0..n) with ctx; an unknown name or
 * a wrong number of operands is a usage error of spec (exit 2).
 */
int cli_dispatch(const struct cli_spec *spec, const struct cli_verb *table,
                 int n, void *ctx, int argc, char **argv);

#endif
