/*
 * The spool under damage (issue 16): a populated spool (several
 * segments, a cursor, a quarantine/ holding an earlier stray), then every
 * artifact under every damage class, plus stray segment names before and
 * after the real ones, a segment copied in from another spool and a
 * segment duplicated under another number. For each case every command
 * finishes in bounded time, check, stat and read change nothing in the
 * spool, repair and append nothing outside it, every
 * unconsumed record not held in the damaged artifact comes back
 * byte-identical, a record appended afterwards gets a number above every
 * one acknowledged, and check reports the damage (where it can be seen:
 * a cut at a frame boundary of the last segment cannot be told from a
 * spool that never got those records).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "damage.h"
#include "fsafe.h"
#include "fsafe/spool.h"
#include "snap.h"
#include "testutil.h"

#define RECORDS 60   /* appended */
#define ACKED 10     /* consumed: the cursor is ACKED + 1 */
#define SEGSIZE 1024 /* bytes: about ten segments */
#define TIMEOUT 10000

/* Record n of a spool: its bytes into buf; the length. */
static size_t record(const char *tag, uint64_t n, char *buf)
{
	int len = snprintf(buf, 200, "%s-%03" PRIu64 "-", tag, n);

	for (uint64_t i = 0; i < n % 37; i++)
		buf[len++] = (char)('a' + (n + i) % 26);
	return (size_t)len;
}

static void build(const char *dir, const char *tag, uint64_t ack)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;
	char buf[RECORDS][200];
	struct iovec v[RECORDS];

	o.flags = FSAFE_SPOOL_CREATE;
	o.segment_size = SEGSIZE;
	o.max_record = 300;
	assert_int_equal(fsafe_spool_open(AT_FDCWD, dir, &o, &s), 0);
	for (uint64_t i = 0; i < RECORDS; i++)
		v[i] = (struct iovec){ buf[i], record(tag, i + 1, buf[i]) };
	for (int i = 0; i < RECORDS; i += 6) /* a few records per sync */
		assert_int_equal(fsafe_spool_append(s, v + i, 6, NULL), 0);
	if (ack)
		assert_int_equal(fsafe_spool_ack(s, ack), 0);
	fsafe_spool_close(s);
}

struct fx {
	char *dir;
	char root[1024], other[1024], sp[1100], tmpl[1100], outside[1100];
	uint64_t firsts[64]; /* segment first numbers, ascending */
	int nsegs;
};

static int run(char *const argv[], char **out, char **err)
{
	return dmg_run(TIMEOUT, argv, out, err);
}

static void copy_tree(const char *from, const char *to)
{
	char *argv[] = { "/bin/cp", "-a", (char *)from, (char *)to, NULL };

	tu_rmtree(to);
	assert_int_equal(run(argv, NULL, NULL), 0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char **list;

	f->dir = tu_mkscratch();
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->sp, sizeof(f->sp), "%s/S", f->root);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->root);
	snprintf(f->tmpl, sizeof(f->tmpl), "%s/template", f->dir);
	snprintf(f->other, sizeof(f->other), "%s/other", f->dir);
	assert_int_equal(mkdir(f->root, 0777), 0);
	assert_int_equal(mkdir(f->outside, 0777), 0);
	tu_put(f->outside, "outside.dat", "outside\n", 8);
	build(f->tmpl, "rec", ACKED);
	/* An earlier stray in quarantine/: quarantine/ is an artifact too. */
	tu_put(f->tmpl, "00000000000000000999.seg", "stray", 5);
	fsafe_spool *s;
	assert_int_equal(fsafe_spool_open(AT_FDCWD, f->tmpl, NULL, &s), 0);
	fsafe_spool_close(s);
	build(f->other, "oth", 5);
	list = dmg_artifacts(f->tmpl);
	for (char **p = list; *p; p++) {
		uint64_t v;
		if (strlen(*p) == 24 && strcmp(*p + 20, ".seg") == 0 &&
		    sscanf(*p, "%20" SCNu64, &v) == 1 && f->nsegs < 64)
			f->firsts[f->nsegs++] = v;
	}
	dmg_free_list(list);
	qsort(f->firsts, (size_t)f->nsegs, sizeof(uint64_t), cmp_u64);
	assert_true(f->nsegs >= 4);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* Records [*lo, *hi) held in the artifact (none when not a segment). */
static void held(const struct fx *f, const char *rel, uint64_t *lo,
                 uint64_t *hi)
{
	*lo = *hi = 0;
	for (int i = 0; i < f->nsegs; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%020" PRIu64 ".seg", f->firsts[i]);
		if (strcmp(rel, name) == 0) {
			*lo = f->firsts[i];
			*hi = i + 1 < f->nsegs ? f->firsts[i + 1] : RECORDS + 1;
		}
	}
}

/* Frame boundaries of a segment of the template, from the records. */
static size_t bounds_of(uint64_t lo, uint64_t hi, off_t *b, size_t max)
{
	char buf[200];
	off_t at = 32;
	size_t n = 0;

	for (uint64_t k = lo; k < hi && n < max; k++) {
		at += 32 + (off_t)record("rec", k, buf);
		b[n++] = at;
	}
	return n;
}

struct outcome {
	unsigned lost;
	bool reported, hung;
};

/* Parse "SEQ\tBYTES" lines: every record ACKED+1..RECORDS outside
   [lo, hi) must be there, byte-identical, numbers ascending. */
static unsigned judge_read(const char *what, const char *out, uint64_t lo,
                           uint64_t hi, uint64_t *max_seq)
{
	bool seen[RECORDS + 2] = { false };
	uint64_t prev = 0;
	unsigned lost = 0;
	char want[200];

	for (const char *p = out; p && *p;) {
		const char *nl = strchr(p, '\n');
		char *tab;
		uint64_t seq = strtoull(p, &tab, 10);
		if (!nl || *tab != '\t')
			fail_msg("%s: bad read line", what);
		if (seq <= prev)
			fail_msg("%s: record %" PRIu64 " after %" PRIu64, what,
			         seq, prev);
		prev = seq;
		size_t len = (size_t)(nl - tab - 1);
		if (seq <= RECORDS && !(seq >= lo && seq < hi)) {
			size_t wl = record("rec", seq, want);
			if (wl != len || memcmp(want, tab + 1, len) != 0)
				fail_msg("%s: record %" PRIu64 " changed", what,
				         seq);
		}
		if (seq <= RECORDS)
			seen[seq] = true;
		p = nl + 1;
	}
	for (uint64_t k = ACKED + 1; k <= RECORDS; k++) {
		if (seen[k])
			continue;
		lost++;
		if (!(k >= lo && k < hi))
			fail_msg("%s: record %" PRIu64 " lost", what, k);
	}
	*max_seq = prev;
	return lost;
}

static int cli(const struct fx *f, const char *sub, const char *arg,
               char **out, struct outcome *o)
{
	char *argv[] = { FSAFE_CLI_PATH, "spool", (char *)f->sp, (char *)sub,
		         (char *)arg, arg ? "--seq" : NULL, NULL };
	int r;

	if (arg && strcmp(arg, "--seq") == 0)
		argv[5] = NULL;
	r = run(argv, out, NULL);
	if (r == -ETIMEDOUT)
		o->hung = true;
	return r;
}

static void one_case(struct fx *f, const struct dmg_case *c, const char *cls)
{
	char name[PATH_MAX * 2 + 64], *out = NULL, *before, *after;
	struct outcome o = { 0 };
	uint64_t lo, hi, max_seq;

	dmg_case_name(c, name, sizeof(name));
	copy_tree(f->tmpl, f->sp);
	assert_int_equal(dmg_apply(f->sp, c, f->outside), 0);
	held(f, c->path, &lo, &hi);
	before = snap_take(f->root, "S");

	/* check, stat and read change nothing in the spool either. */
	char *store = snap_take(f->sp, NULL);
	o.reported = cli(f, "check", NULL, NULL, &o) == 1;
	cli(f, "stat", NULL, NULL, &o);
	cli(f, "read", "--seq", NULL, &o);
	char *store_after = snap_take(f->sp, NULL);
	if (!o.hung && strcmp(store, store_after) != 0)
		fail_msg("%s: a read-only command changed the spool", name);
	free(store);
	free(store_after);
	int r = cli(f, "repair", NULL, NULL, &o);
	if (!o.hung && r != 0 && r != 1)
		fail_msg("%s: repair exited %d", name, r);
	char *argv[] = { FSAFE_CLI_PATH, "spool", f->sp, "read", "--seq",
		         "--from", "1", NULL };
	char *err = NULL;
	if ((r = run(argv, &out, &err)) == -ETIMEDOUT)
		o.hung = true;
	if (o.hung)
		fail_msg("%s: a command hung", name);
	if (r != 0)
		fail_msg("%s: read after repair exited %d: %s", name, r, err);
	free(err);
	o.lost = judge_read(name, out, lo, hi, &max_seq);
	free(out);
	/* An append goes above every number acknowledged or kept. */
	tu_put(f->dir, "in", "after\n", 6);
	char in[PATH_MAX + 8];
	snprintf(in, sizeof(in), "%s/in", f->dir);
	char *app[] = { FSAFE_CLI_PATH, "spool", f->sp, "append", in, NULL };
	if ((r = run(app, NULL, &err)) != 0)
		fail_msg("%s: append after repair exited %d: %s", name, r, err);
	free(err);
	char *last[] = { FSAFE_CLI_PATH, "spool", f->sp, "read", "--seq",
		         "--from", "1", NULL };
	assert_int_equal(run(last, &out, NULL), 0);
	char *tail = strstr(out, "\tafter\n");
	assert_non_null(tail);
	while (tail > out && tail[-1] != '\n')
		tail--;
	uint64_t got = strtoull(tail, NULL, 10);
	if (got <= ACKED || got <= max_seq)
		fail_msg("%s: append got %" PRIu64 " (acked %d, kept up to "
		         "%" PRIu64 ")", name, got, ACKED, max_seq);
	free(out);
	after = snap_take(f->root, "S");
	if (strcmp(before, after) != 0)
		fail_msg("%s: something outside the spool changed", name);
	free(before);
	free(after);
	dmg_tally("spool", cls, c->kind, o.lost, o.reported, o.hung);
}

static const char *class_of(const char *rel)
{
	if (strcmp(rel, "cursor") == 0)
		return "cursor";
	if (strcmp(rel, "quarantine") == 0)
		return "quarantine";
	if (strncmp(rel, "quarantine/", 11) == 0)
		return "quarantined";
	return strstr(rel, ".seg") ? "segment" : "other";
}

static void every_artifact_every_class(void **state)
{
	struct fx *f = *state;
	struct dmg_case *cases = NULL;
	size_t n = 0;
	char **list = dmg_artifacts(f->tmpl);
	off_t b[64];
	char path[1100], sib[32];

	for (char **p = list; *p; p++) {
		uint64_t lo, hi;
		size_t nb = 0;
		held(f, *p, &lo, &hi);
		if (lo)
			nb = bounds_of(lo, hi, b, 64);
		if (strcmp(*p, "cursor") == 0) {
			b[0] = 8;
			b[1] = 16;
			nb = 2;
		}
		snprintf(sib, sizeof(sib), "%020" PRIu64 ".seg", f->firsts[0]);
		dmg_cases_for(f->tmpl, *p, b, nb,
		              strcmp(*p, sib) ? sib : "cursor", &cases, &n);
	}
	dmg_free_list(list);
	/* Names that look valid: before and after the real segments, a
	   segment of another spool, one of ours under another number. */
	char first[32], last[32];
	snprintf(first, sizeof(first), "%020" PRIu64 ".seg", f->firsts[0]);
	snprintf(last, sizeof(last), "%020" PRIu64 ".seg",
	         f->firsts[f->nsegs - 1]);
	dmg_add(&cases, &n, DMG_STRAY, "quarantine/00000000000000000999.seg",
	        0, "00000000000000000000.seg");
	dmg_add(&cases, &n, DMG_STRAY, "quarantine/00000000000000000999.seg",
	        0, "00000000000000000099.seg");
	dmg_add(&cases, &n, DMG_DUPLICATE, first, 0, "00000000000000000099.seg");
	dmg_add(&cases, &n, DMG_DUPLICATE, last, 0, "00000000000000000000.seg");
	snprintf(path, sizeof(path), "%s/%s", f->other, first);
	dmg_add(&cases, &n, DMG_FOREIGN, first, 0, path);
	snprintf(path, sizeof(path), "%s/cursor", f->other);
	dmg_add(&cases, &n, DMG_FOREIGN, "cursor", 0, path);

	for (size_t i = 0; i < n; i++)
		one_case(f, &cases[i], class_of(cases[i].path));
	printf("spool: %zu damage cases\n", n);
	dmg_tally_print();
	free(cases);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(every_artifact_every_class,
		                                setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
