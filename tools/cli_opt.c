#include "cli_opt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_util.h"

int cli_spec_error(const struct cli_spec *spec, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!spec->name) {
		cli_warn("%s", why);
		fputs(spec->usage, stderr);
		return CLI_USAGE;
	}
	return cli_usage_error(spec->name, why, spec->usage);
}

/* Digits only, by hand: strtoull() would take spaces, a sign, and hex. */
static int parse_digits(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t n = 0;
	int r = 0;

	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (n > (UINT64_MAX - d) / 10)
			r = -ERANGE;
		else
			n = n * 10 + d;
	}
	if (p == *s)
		return -EINVAL;
	*s = p;
	*v = n;
	return r;
}

/* The multiplier `suffix` names in `units`, or -EINVAL. */
struct unit {
	const char *suffix;
	uint64_t scale;
};

static int unit_scale(const struct unit *units, const char *suffix,
                      uint64_t *scale)
{
	for (; units->suffix; units++)
		if (!strcmp(suffix, units->suffix)) {
			*scale = units->scale;
			return 0;
		}
	return -EINVAL;
}

/* A number with an optional unit; -ERANGE past UINT64_MAX. */
static int parse_scaled(const char *s, const struct unit *units,
                        uint64_t *v)
{
	uint64_t n, scale;
	int r = parse_digits(&s, &n);

	if (r == -EINVAL || unit_scale(units, s, &scale) < 0)
		return -EINVAL;
	if (r < 0 || (n && scale > UINT64_MAX / n))
		return -ERANGE;
	*v = n * scale;
	return 0;
}

/* A scaled number within [min, max]. */
static int parse_in_range(const char *s, const struct unit *units,
                          uint64_t min, uint64_t max, uint64_t *v)
{
	uint64_t n;
	int r = parse_scaled(s, units, &n);

	if (r < 0)
		return r;
	if (n < min || n > max)
		return -ERANGE;
	*v = n;
	return 0;
}

int cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
	static const struct unit none[] = { { "", 1 }, { NULL, 0 } };

	return parse_in_range(s, none, min, max, v);
}

int cli_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
	static const struct unit units[] = {
		{ "", 1 },
		{ "K", 1ull << 10 }, { "KiB", 1ull << 10 },
		{ "M", 1ull << 20 }, { "MiB", 1ull << 20 },
		{ "G", 1ull << 30 }, { "GiB", 1ull << 30 },
		{ NULL, 0 },
	};

	return parse_in_range(s, units, min, max, v);
}

int cli_parse_duration(const char *s, uint64_t ceiling, uint64_t *ms)
{
	static const struct unit units[] = {
		{ "ms", 1 },
		{ "", 1000 },
		{ "s", 1000 },
		{ "m", 60 * 1000 },
		{ "h", 60 * 60 * 1000 },
		{ "d", 24 * 60 * 60 * 1000 },
		{ NULL, 0 },
	};
	uint64_t n;
	int r = parse_scaled(s, units, &n);

	if (r == 0 && n > ceiling)
		r = -ERANGE;
	if (r == 0)
		*ms = n;
	return r;
}

static const struct cli_opt *find_long(const struct cli_opt *o,
                                       const char *name, size_t len)
{
	for (; o->type != CLI_OPT_END; o++)
		if (o->long_name && strlen(o->long_name) == len &&
		    !strncmp(o->long_name, name, len))
			return o;
	return NULL;
}

static const struct cli_opt *find_short(const struct cli_opt *o, char c)
{
	for (; o->type != CLI_OPT_END; o++)
		if (o->short_name && o->short_name == c)
			return o;
	return NULL;
}

static bool takes_value(const struct cli_opt *o)
{
	return o->type == CLI_OPT_UINT || o->type == CLI_OPT_SIZE ||
	       o->type == CLI_OPT_DURATION || o->type == CLI_OPT_STRING ||
	       o->type == CLI_OPT_PATH;
}

static int print_help(const struct cli_spec *spec)
{
	fputs(spec->usage, stdout);
	if (spec->help)
		fputs(spec->help, stdout);
	return cli_flush_stdout(spec->name ? spec->name : "help") ? CLI_OK
	                                                         : CLI_FAIL;
}

/* Stores `val` (NULL for an option without one) as o says; CLI_CONTINUE or
   the exit status. `as` is the option as it was spelled. */
static int apply(const struct cli_spec *spec, const struct cli_opt *o,
                 const char *as, const char *val)
{
	uint64_t *num = o->value;
	int r = 0;

	if (o->seen)
		*o->seen = true;
	switch (o->type) {
	case CLI_OPT_HELP: return print_help(spec);
	case CLI_OPT_BOOL: *(bool *)o->value = true; break;
	case CLI_OPT_BITS: *(unsigned *)o->value |= o->bits; break;
	case CLI_OPT_CHAR: *(char *)o->value = (char)o->bits; break;
	case CLI_OPT_STRING: *(const char **)o->value = val; break;
	case CLI_OPT_PATH:
		if (!*val)
			return cli_spec_error(spec, "%s: an empty path", as);
		*(const char **)o->value = val;
		break;
	case CLI_OPT_UINT:
		if (cli_parse_uint(val, o->min, o->max, num) < 0)
			return cli_spec_error(spec, "%s takes a whole number "
			                      "from %llu to %llu, not '%s'", as,
			                      (unsigned long long)o->min,
			                      (unsigned long long)o->max, val);
		break;
	case CLI_OPT_SIZE:
		if ((r = cli_parse_size(val, o->min, o->max, num)) < 0)
			return cli_spec_error(spec, "%s takes a size from %llu "
			                      "to %llu bytes (or with K, M or G), "
			                      "not '%s'", as,
			                      (unsigned long long)o->min,
			                      (unsigned long long)o->max, val);
		break;
	case CLI_OPT_DURATION:
		r = cli_parse_duration(val, o->max, num);
		/* A wait longer than anyone waits is "for ever", not an
		   error: every duration the page promises is taken. */
		if (r == -ERANGE && o->bits == CLI_SATURATE)
			*num = o->max;
		else if (r == -ERANGE)
			return cli_spec_error(spec, "%s: duration too large: "
			                      "'%s'", as, val);
		else if (r < 0)
			return cli_spec_error(spec, "%s takes a whole number and "
			                      "a unit: ms, s, m, h or d, not '%s'",
			                      as, val);
		break;
	case CLI_OPT_END: break;
	}
	return CLI_CONTINUE;
}

/* "--name" or "--name=value"; *i moves past a value taken from argv. */
static int parse_long(const struct cli_spec *spec, int argc, char **argv,
                      int *i)
{
	const char *name = argv[*i] + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct cli_opt *o = find_long(spec->opts, name, len);
	char as[128];

	snprintf(as, sizeof(as), "--%.*s", (int)len, name);
	if (!o)
		return cli_spec_error(spec, "unknown option %s", as);
	if (!takes_value(o))
		return eq ? cli_spec_error(spec, "option %s takes no value", as)
		          : apply(spec, o, as, NULL);
	if (eq)
		return apply(spec, o, as, eq + 1);
	if (*i + 1 >= argc)
		return cli_spec_error(spec, "option %s needs a value", as);
	return apply(spec, o, as, argv[++*i]);
}

/* A cluster "-abc" or "-nVALUE" / "-n VALUE". */
static int parse_short(const struct cli_spec *spec, int argc, char **argv,
                       int *i)
{
	for (const char *p = argv[*i] + 1; *p; p++) {
		const struct cli_opt *o = find_short(spec->opts, *p);
		char as[3] = { '-', *p, 0 };
		int r;

		if (!o)
			return cli_spec_error(spec, "unknown option %s", as);
		if (!takes_value(o)) {
			if ((r = apply(spec, o, as, NULL)) != CLI_CONTINUE)
				return r;
			continue;
		}
		if (p[1])
			return apply(spec, o, as, p + 1);
		if (*i + 1 >= argc)
			return cli_spec_error(spec, "option %s needs a value",
			                      as);
		return apply(spec, o, as, argv[++*i]);
	}
	return CLI_CONTINUE;
}

int cli_parse(const struct cli_spec *spec, int argc, char **argv,
              struct cli_args *out)
{
	bool stopped = false;
	int n = 0, r;

	out->dashdash = -1;
	/* Operands are moved down in place: the write index never passes
	   the read index, so no value is overwritten before it is read. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (stopped || a[0] != '-' || !a[1]) {
			if (!stopped && spec->stop_after > 0 &&
			    n >= spec->stop_after)
				stopped = true;
			argv[1 + n++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			out->dashdash = n;
			stopped = true;
			continue;
		}
		r = a[1] == '-' ? parse_long(spec, argc, argv, &i)
		                : parse_short(spec, argc, argv, &i);
		if (r != CLI_CONTINUE)
			return r;
	}
	/* NULL-terminated like argv, for a COMMAND handed to exec. */
	argv[1 + n] = NULL;
	out->argc = n;
	out->argv = argv + 1;
	return CLI_CONTINUE;
}

const struct cli_verb *cli_verb_find(const struct cli_spec *spec,
                                     const struct cli_verb *table, int n,
                                     int argc, char **argv)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(argv[0], table[i].name))
			continue;
		if (argc - 1 >= table[i].min && argc - 1 <= table[i].max)
			return &table[i];
		cli_spec_error(spec, "%s: wrong number of arguments", argv[0]);
		return NULL;
	}
	cli_spec_error(spec, "unknown command '%s'", argv[0]);
	return NULL;
}

int cli_dispatch(const struct cli_spec *spec, const struct cli_verb *table,
                 int n, void *ctx, int argc, char **argv)
{
	const struct cli_verb *v = cli_verb_find(spec, table, n, argc, argv);

	return v ? v->run(ctx, argc, argv) : CLI_USAGE;
}
