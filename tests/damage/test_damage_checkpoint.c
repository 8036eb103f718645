/*
 * The checkpoint store against damaged state: every artifact of a
 * populated checkpoint (CURRENT, events.log, OPEN, each generation's
 * directory, manifest and files) under every damage class, plus stray
 * generation names (earlier and later), a generation and a CURRENT copied
 * in from another checkpoint, and a generation duplicated under another
 * number.
 *
 * After each case every CLI command (check, ls, verify, log, load
 * --fallback, repair, check, save) finishes within a time bound; nothing
 * outside the store changed, nor inside it before repair; after repair every acknowledged generation
 * that does not hold the damaged artifact loads byte-identical, and a plain
 * load gives the newest of them; check reports the damage whenever the
 * damage changed something a checkpoint can tell (see `must_report`).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "damage.h"
#include "fsafe.h"
#include "snap.h"
#include "testutil.h"

#define TIMEOUT_MS 20000
#define BIG 3000

struct world {
	char base[PATH_MAX / 8];     /* the test's directory */
	char tmpl[PATH_MAX / 2];     /* the pristine store */
	char world[PATH_MAX / 4];    /* what the snapshot covers */
	char ck[PATH_MAX / 2];       /* the store under damage: world/ck */
	char outside[PATH_MAX / 2];  /* world/outside */
	char other[PATH_MAX / 2];    /* world/other: another checkpoint */
	char out[PATH_MAX / 2];      /* load's OUTDIR, outside the world */
};

/* Generation g's files: "a" and "big", distinct in every generation. */
static size_t content(uint64_t g, int which, char *buf)
{
	if (which == 0)
		return (size_t)sprintf(buf, "alpha-%llu\n", (unsigned long long)g);
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (char)(i * g + 7 + i / 97);
	return BIG;
}

static void save_gen(const char *dir, uint64_t want)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;
	fsafe_checkpoint_tx *tx;
	char a[64], big[BIG];
	uint64_t g = 0;

	o.flags = FSAFE_CHECKPOINT_CREATE;
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, dir, &o, &cp), 0);
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	size_t na = content(want, 0, a), nb = content(want, 1, big);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", a, na), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "big", big, nb), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, &g), 0);
	assert_int_equal(g, want);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

static void sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("%s failed", cmd);
}

/* The workload: three saves (gen-1 rotated out, gens 2 and 3 kept), and
   an OPEN marker as a writer that died leaves it. */
static void build(struct world *w)
{
	char *scratch = tu_mkscratch();

	snprintf(w->base, sizeof(w->base), "%s", scratch);
	free(scratch);
	snprintf(w->tmpl, sizeof(w->tmpl), "%s/tmpl", w->base);
	snprintf(w->world, sizeof(w->world), "%s/world", w->base);
	snprintf(w->ck, sizeof(w->ck), "%s/ck", w->world);
	snprintf(w->outside, sizeof(w->outside), "%s/outside", w->world);
	snprintf(w->other, sizeof(w->other), "%s/other", w->world);
	snprintf(w->out, sizeof(w->out), "%s/out", w->base);
	sh("mkdir -p %s %s && echo payload > %s/payload", w->world, w->outside,
	   w->base);
	for (uint64_t g = 1; g <= 3; g++)
		save_gen(w->tmpl, g);
	tu_put(w->tmpl, "OPEN", "", 0);
	for (uint64_t g = 1; g <= 5; g++)
		save_gen(w->other, g);
}

/* Offsets after each newline: the record and line boundaries. */
static size_t line_bounds(const char *dir, const char *rel, off_t *b,
                          size_t max)
{
	size_t len, n = 0;
	char *t = tu_get(dir, rel, &len);
	for (size_t i = 0; t && i + 1 < len && n < max; i++)
		if (t[i] == '\n')
			b[n++] = (off_t)i + 1;
	free(t);
	return n;
}

static const char *class_of(const char *rel)
{
	if (!strcmp(rel, "CURRENT"))
		return "CURRENT";
	if (!strcmp(rel, "events.log"))
		return "events.log";
	if (!strcmp(rel, "OPEN"))
		return "OPEN";
	if (!strncmp(rel, "gen-", 4) && !strchr(rel, '/'))
		return "generation";
	if (strstr(rel, "/.manifest"))
		return "manifest";
	return "data file";
}

/* The generation an artifact belongs to (0: none). */
static uint64_t held_in(const char *rel)
{
	if (strncmp(rel, "gen-", 4) != 0)
		return 0;
	return strtoull(rel + 4, NULL, 10);
}

struct load_arg {
	const char *dir;
	uint64_t gen;   /* 0: the current one */
	uint64_t want;  /* the generation expected */
};

/* In a child: generation `gen` loads byte-identical (0), or not (1). */
static int load_check(void *p)
{
	const struct load_arg *a = p;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	fsafe_checkpoint *cp;
	fsafe_checkpoint_snapshot *s;
	char buf[BIG];
	int bad = 0;

	o.flags = FSAFE_CHECKPOINT_READ_ONLY;
	lo.generation = a->gen;
	if (fsafe_checkpoint_open(AT_FDCWD, a->dir, &o, &cp) < 0)
		return 1;
	if (fsafe_checkpoint_load(cp, &lo, &s) != 0)
		return 1;
	if (fsafe_checkpoint_snapshot_generation(s) != a->want ||
	    fsafe_checkpoint_snapshot_count(s) != 2)
		bad = 1;
	for (int i = 0; !bad && i < 2; i++) {
		size_t n = content(a->want, i, buf);
		long k = fsafe_checkpoint_snapshot_find(s, i ? "big" : "a");
		bad = k < 0 ||
		      fsafe_checkpoint_snapshot_size(s, (size_t)k) != n ||
		      memcmp(fsafe_checkpoint_snapshot_data(s, (size_t)k), buf,
		             n) != 0;
	}
	fsafe_checkpoint_snapshot_free(s);
	fsafe_checkpoint_close(cp);
	return bad;
}

/* Run `fsafe checkpoint CK verb [arg]`; -ETIMEDOUT on a hang. */
static int cli(const struct world *w, const char *verb, const char *opt,
               const char *arg)
{
	char *argv[8];
	int n = 0;

	argv[n++] = FSAFE_CLI_PATH;
	argv[n++] = "checkpoint";
	argv[n++] = (char *)w->ck;
	argv[n++] = (char *)verb;
	if (opt)
		argv[n++] = (char *)opt;
	if (arg)
		argv[n++] = (char *)arg;
	argv[n] = NULL;
	return dmg_run(TIMEOUT_MS, argv, NULL, NULL);
}

/*
 * Damage a checkpoint cannot tell from an intact state: a no-op
 * truncation, events.log cut at a record boundary or removed (the audit
 * trail is not data), an OPEN marker's bytes or its removal.
 */
static bool must_report(const struct dmg_case *c, off_t size,
                        const off_t *bounds, size_t nb)
{
	const char *cls = class_of(c->path);

	if (c->kind == DMG_TRUNCATE && c->off == size)
		return false;
	if (!strcmp(cls, "events.log")) {
		if (c->kind == DMG_DELETE)
			return false;
		if (c->kind == DMG_TRUNCATE) {
			if (c->off == 0)
				return false;
			for (size_t i = 0; i < nb; i++)
				if (bounds[i] == c->off)
					return false;
		}
		return true;
	}
	if (!strcmp(cls, "OPEN"))
		return c->kind != DMG_DELETE && c->kind != DMG_TRUNCATE &&
		       c->kind != DMG_FLIP && c->kind != DMG_ZERO8;
	return true;
}

/* A generation directory's stray, foreign and duplicate cases: applied by
   hand (the harness copies files only). */
struct dircase {
	const char *what;
	const char *from; /* relative to the world, or to the store */
	const char *to;
};

static void one_case(struct world *w, const struct dmg_case *c,
                     const struct dircase *dc, off_t size, const off_t *b,
                     size_t nb)
{
	char name[1024], payload[PATH_MAX];
	unsigned lost = 0;
	bool hung = false;

	sh("rm -rf %s %s && cp -a %s %s", w->ck, w->out, w->tmpl, w->ck);
	if (c) {
		int r = dmg_apply(w->ck, c, w->outside);
		if (r < 0)
			fail_msg("apply %s: %s",
			         dmg_case_name(c, name, sizeof(name)),
			         strerror(-r));
		dmg_case_name(c, name, sizeof(name));
	} else {
		sh("cp -a %s/%s %s/%s", dc->from[0] == '/' ? "" : w->ck,
		   dc->from, w->ck, dc->to);
		snprintf(name, sizeof(name), "%s %s", dc->what, dc->to);
	}
	char *before = snap_take(w->world, "ck");
	char *store = snap_take(w->ck, NULL);
	int checked = cli(w, "check", NULL, NULL);
	static const char *const ro[] = { "ls", "verify", "log" };
	for (size_t i = 0; i < 3; i++)
		hung |= cli(w, ro[i], NULL, NULL) == -ETIMEDOUT;
	hung |= cli(w, "load", "--fallback", w->out) == -ETIMEDOUT;
	/* The read-only commands changed nothing in the store either. */
	char *store_now = snap_take(w->ck, NULL);
	if (strcmp(store, store_now) != 0)
		fail_msg("%s: a read-only command changed the store", name);
	free(store);
	free(store_now);
	int repaired = cli(w, "repair", NULL, NULL);
	hung |= checked == -ETIMEDOUT || repaired == -ETIMEDOUT;
	int after = cli(w, "check", NULL, NULL);
	/* The acknowledged generations 2 and 3, and the plain load. */
	uint64_t newest = 0;
	for (uint64_t g = 2; g <= 3; g++) {
		struct load_arg la = { w->ck, g, g };
		bool held = c ? held_in(c->path) == g : false;
		int r = dmg_call(TIMEOUT_MS, load_check, &la);
		hung |= r == -ETIMEDOUT;
		if (r == 0)
			newest = g;
		else if (!held)
			fail_msg("%s: generation %llu lost", name,
			         (unsigned long long)g);
		else
			lost++;
	}
	if (newest) {
		struct load_arg la = { w->ck, 0, newest };
		if (dmg_call(TIMEOUT_MS, load_check, &la) != 0)
			fail_msg("%s: load does not give generation %llu", name,
			         (unsigned long long)newest);
	}
	/* A save still works, and leaves a clean store. */
	snprintf(payload, sizeof(payload), "%s/payload", w->base);
	char *argv[] = { FSAFE_CLI_PATH, "checkpoint", w->ck, "save",
		         payload, NULL };
	int saved = dmg_run(TIMEOUT_MS, argv, NULL, NULL);
	hung |= saved == -ETIMEDOUT;
	char *now = snap_take(w->world, "ck");
	if (strcmp(before, now) != 0)
		fail_msg("%s: something outside the store changed", name);
	free(before);
	free(now);
	if (hung)
		fail_msg("%s: a command hung", name);
	if (after != 0)
		fail_msg("%s: check after repair exits %d", name, after);
	if (saved != 0)
		fail_msg("%s: save after repair exits %d", name, saved);
	bool reported = checked == 1;
	if (checked != 0 && checked != 1)
		fail_msg("%s: check exits %d", name, checked);
	if (c && must_report(c, size, b, nb) && !reported)
		fail_msg("%s: check did not report it", name);
	if (!c && !reported)
		fail_msg("%s: check did not report it", name);
	dmg_tally("checkpoint", c ? class_of(c->path) : "generation",
	          c ? c->kind : (strstr(dc->what, "foreign") ? DMG_FOREIGN
	                         : strstr(dc->what, "dup") ? DMG_DUPLICATE
	                                                   : DMG_STRAY),
	          lost, reported, hung);
}

static void every_artifact_every_class(void **state)
{
	struct world w;
	off_t b[64];
	char other_cur[PATH_MAX], other_man[PATH_MAX];

	(void)state;
	build(&w);
	snprintf(other_cur, sizeof(other_cur), "%s/CURRENT", w.other);
	snprintf(other_man, sizeof(other_man),
	         "%s/gen-000000000005/.manifest", w.other);
	char **list = dmg_artifacts(w.tmpl);
	size_t ncases = 0;
	for (char **a = list; *a; a++) {
		struct dmg_case *cases = NULL;
		size_t n = 0, nb = 0;
		struct stat st;
		char path[PATH_MAX], sib[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", w.tmpl, *a);
		assert_int_equal(lstat(path, &st), 0);
		if (S_ISREG(st.st_mode) && strcmp(class_of(*a), "data file"))
			nb = line_bounds(w.tmpl, *a, b, 64);
		/* A symlink inside: to the other file of its directory. */
		snprintf(sib, sizeof(sib), "%s", *a);
		char *slash = strrchr(sib, '/');
		if (slash)
			snprintf(slash + 1, sizeof(sib) - (size_t)(slash + 1 - sib),
			         "%s", strcmp(slash + 1, "a") ? "a" : "big");
		else
			snprintf(sib, sizeof(sib), "%s",
			         strcmp(*a, "CURRENT") ? "CURRENT" : "events.log");
		dmg_cases_for(w.tmpl, *a, b, nb, S_ISREG(st.st_mode) ? sib : NULL,
		              &cases, &n);
		if (!strcmp(*a, "CURRENT"))
			dmg_add(&cases, &n, DMG_FOREIGN, *a, 0, other_cur);
		if (strstr(*a, "/.manifest")) {
			dmg_add(&cases, &n, DMG_FOREIGN, *a, 0, other_man);
			/* A file named like a generation, earlier and later. */
			dmg_add(&cases, &n, DMG_STRAY, *a, 0, "gen-000000000001");
			dmg_add(&cases, &n, DMG_STRAY, *a, 0, "gen-000000000007");
		}
		if (!strcmp(class_of(*a), "data file"))
			dmg_add(&cases, &n, DMG_DUPLICATE, *a, 0,
			        held_in(*a) == 2 ? "gen-000000000002/copy"
			                         : "gen-000000000003/copy");
		for (size_t i = 0; i < n; i++)
			one_case(&w, &cases[i], NULL, st.st_size, b, nb);
		ncases += n;
		free(cases);
	}
	dmg_free_list(list);

	char f4[PATH_MAX], f5[PATH_MAX];
	snprintf(f4, sizeof(f4), "%s/gen-000000000004", w.other);
	snprintf(f5, sizeof(f5), "%s/gen-000000000005", w.other);
	const struct dircase dcs[] = {
		{ "duplicate of gen-3 as", "gen-000000000003", "gen-000000000009" },
		{ "duplicate of gen-3 as", "gen-000000000003", "gen-000000000001" },
		{ "foreign generation", f5, "gen-000000000005" },
		{ "foreign generation", f4, "gen-000000000001" },
	};
	for (size_t i = 0; i < sizeof(dcs) / sizeof(dcs[0]); i++)
		one_case(&w, NULL, &dcs[i], 0, NULL, 0);
	ncases += sizeof(dcs) / sizeof(dcs[0]);
	printf("damage: checkpoint: %zu cases\n", ncases);
	dmg_tally_print();
	tu_rmtree(w.base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_artifact_every_class),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
