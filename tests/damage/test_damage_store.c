/*
 * The keyed store against damage (issue 16): every record and the lock's
 * directory under every damage class, plus stray, foreign and duplicate
 * records. After each case, through the CLI and under a time bound:
 * nothing hangs; the read-only commands (ls, get, check) change nothing;
 * every acknowledged key not held in the damaged artifact comes back
 * byte-identical before and after repair; check reports the damage; repair
 * quarantines it (never deletes it) and leaves a store that check finds
 * clean and that takes new records; nothing outside the store changed.
 */
#define _GNU_SOURCE
#include <errno.h>
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
#include "snap.h"
#include "testutil.h"

/* Above the lock's 10 s grace period for a malformed lock file. */
#define TIMEOUT_MS 20000
#define NKEYS 5

/* The workload: keys of every record shape, from an empty payload to one
   spanning several 512-byte offsets. */
static const struct {
	const char *key;
	size_t len;
} keys[NKEYS] = {
	{ "alpha", 0 }, { "b", 1 }, { "key-of-100", 100 }, { "k600", 600 },
	{ "big", 3000 },
};

struct ctx {
	const char *dir;
	/* Short enough that a path below them fits PATH_MAX. */
	char store[1024], pristine[1024], other[1024], outside[1024];
	char *value[NKEYS];
	char name[NKEYS][64];
};

static void fill(char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)('a' + (i * 7 + seed * 13) % 26);
}

static void hexname(const char *key, char *out)
{
	out += sprintf(out, "k-");
	for (; *key; key++)
		out += sprintf(out, "%02x", (unsigned char)*key);
}

/* Run the CLI on the store; its exit status, -ETIMEDOUT on a hang. */
static int cli(struct ctx *c, char **out, const char *a1, const char *a2,
               const char *a3)
{
	char *argv[] = { FSAFE_CLI_PATH, "store", c->store, (char *)a1,
		         (char *)a2, (char *)a3, NULL };
	char *err = NULL;
	int r = dmg_run(TIMEOUT_MS, argv, out, &err);

	free(err);
	return r;
}

static void put_via_cli(const char *store, const char *key, const char *file)
{
	char *argv[] = { FSAFE_CLI_PATH, "store", "--create", (char *)store,
		         "put", (char *)key, (char *)file, NULL };
	assert_int_equal(dmg_run(TIMEOUT_MS, argv, NULL, NULL), 0);
}

static void copy_tree(const char *from, const char *to)
{
	char *argv[] = { "/bin/cp", "-a", (char *)from, (char *)to, NULL };

	assert_int_equal(dmg_run(TIMEOUT_MS, argv, NULL, NULL), 0);
}

static void build(struct ctx *c)
{
	char file[PATH_MAX];

	snprintf(c->pristine, sizeof(c->pristine), "%s/pristine", c->dir);
	snprintf(c->other, sizeof(c->other), "%s/other", c->dir);
	snprintf(c->store, sizeof(c->store), "%s/store", c->dir);
	snprintf(c->outside, sizeof(c->outside), "%s/outside", c->dir);
	snprintf(file, sizeof(file), "%s/value", c->dir);
	assert_int_equal(mkdir(c->outside, 0755), 0);
	for (int i = 0; i < NKEYS; i++) {
		c->value[i] = malloc(keys[i].len + 1);
		fill(c->value[i], keys[i].len, (unsigned)i);
		tu_put(c->dir, "value", c->value[i], keys[i].len);
		put_via_cli(c->pristine, keys[i].key, file);
		hexname(keys[i].key, c->name[i]);
		/* Another store: the same keys, other values (seed + 1). */
		fill(c->value[i], keys[i].len, (unsigned)i + 1);
		tu_put(c->dir, "value", c->value[i], keys[i].len);
		put_via_cli(c->other, keys[i].key, file);
		fill(c->value[i], keys[i].len, (unsigned)i);
	}
	unlink(file);
	/* The value of the put after each repair, made before any picture
	   of the outside is taken. */
	tu_put(c->dir, "newvalue", "new", 3);
}

/* The key whose record an artifact is; -1 for anything else. */
static int key_of(const struct ctx *c, const char *rel)
{
	for (int i = 0; i < NKEYS; i++)
		if (!strcmp(rel, c->name[i]))
			return i;
	return -1;
}

/* ---- the cases ------------------------------------------------------------ */

static void record_cases(struct ctx *c, int k, struct dmg_case **cases,
                         size_t *n)
{
	/* Every header field's first byte, the key, the payload. */
	static const off_t fields[] = { 4, 6, 8, 16, 24, 28, 32, 36 };
	size_t klen = strlen(keys[k].key);
	off_t size = 36 + (off_t)(klen + keys[k].len);
	off_t bounds[] = { 36, 36 + (off_t)klen };
	const char *rel = c->name[k];
	char extra[PATH_MAX];
	const char *sibling = c->name[(k + 1) % NKEYS];

	dmg_cases_for(c->pristine, rel, bounds, 2, sibling, cases, n);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		dmg_add(cases, n, DMG_FLIP, rel, fields[i], "");
	if (keys[k].len)
		dmg_add(cases, n, DMG_FLIP, rel, size - 1, "");
	/* Stray entries with names that look valid: a key not stored, an
	   earlier and a later name than every key, a name that is no key's. */
	dmg_add(cases, n, DMG_STRAY, rel, 0, "k-7a7a");
	dmg_add(cases, n, DMG_STRAY, rel, 0, "k-00");
	dmg_add(cases, n, DMG_STRAY, rel, 0, "k-ffffff");
	dmg_add(cases, n, DMG_STRAY, rel, 0, "k-zz");
	/* The lock's own name, holding garbage: once (a change waits out
	   the lock's grace period for a malformed record, FSAFE_LOCK_GRACE_MS). */
	if (k == 0)
		dmg_add(cases, n, DMG_STRAY, rel, 0, ".lock/lock");
	/* A record of another key from another store, copied over this one. */
	snprintf(extra, sizeof(extra), "%s/%s", c->other, sibling);
	dmg_add(cases, n, DMG_FOREIGN, rel, 0, extra);
	/* A copy under the name of a key not stored. */
	dmg_add(cases, n, DMG_DUPLICATE, rel, 0, "k-717171");
}

static void lock_cases(const struct ctx *c, struct dmg_case **cases,
                       size_t *n)
{
	dmg_cases_for(c->pristine, ".lock", NULL, 0, NULL, cases, n);
	/* A link to a directory outside, where a lock could be made. */
	dmg_add(cases, n, DMG_SYMLINK_IN, ".lock", 0, "../outside");
	/* What can sit at the lock file's name while nobody holds it. */
	dmg_add(cases, n, DMG_FIFO, ".lock/lock", 0, "");
	dmg_add(cases, n, DMG_SOCKET, ".lock/lock", 0, "");
	dmg_add(cases, n, DMG_DIR, ".lock/lock", 0, "");
	dmg_add(cases, n, DMG_SYMLINK_OUT, ".lock/lock", 0, "");
	dmg_add(cases, n, DMG_SYMLINK_DANGLING, ".lock/lock", 0, "");
	/* Removed: made again by the next change. */
	dmg_add(cases, n, DMG_DELETE, ".lock/lock", 0, "");
}

/* Is the case damage that check can see? A removed record is a removed
   key (the store keeps no index: a documented limit); a removed lock
   directory is made again on first use; a cut at the full size changes
   nothing. */
static bool visible(const struct ctx *c, const struct dmg_case *dc)
{
	struct stat st;
	char path[2 * PATH_MAX];

	if (dc->kind == DMG_DELETE)
		return false;
	if (dc->kind == DMG_TRUNCATE) {
		snprintf(path, sizeof(path), "%s/%s", c->pristine, dc->path);
		return stat(path, &st) == 0 && st.st_size != dc->off;
	}
	return true;
}

/* The key the case costs: the artifact's own record, unless the damage
   is an entry beside it. */
static int damaged_key(const struct ctx *c, const struct dmg_case *dc)
{
	if (dc->kind == DMG_STRAY || dc->kind == DMG_DUPLICATE)
		return -1;
	return key_of(c, dc->path);
}

/* ---- one case ------------------------------------------------------------- */

struct outcome {
	bool hung, reported;
	unsigned lost;
};

/* Every key but `skip` byte-identical; the keys that failed counted. */
static unsigned verify_keys(struct ctx *c, int skip, const char *when,
                            const char *name, struct outcome *o)
{
	unsigned failed = 0;

	for (int i = 0; i < NKEYS; i++) {
		char *out = NULL;
		int r = cli(c, &out, "get", keys[i].key, NULL);
		o->hung |= r == -ETIMEDOUT;
		bool same = r == 0 && out &&
		            !memcmp(out, c->value[i], keys[i].len) &&
		            strlen(out) == keys[i].len;
		free(out);
		if (!same && i != skip)
			fail_msg("%s: %s: key %s lost (exit %d)", name, when,
			         keys[i].key, r);
		failed += !same;
	}
	return failed;
}

/* ls, get and check change nothing in the store. */
static int read_only_pass(struct ctx *c, const char *name, struct outcome *o)
{
	char *before = snap_take(c->store, NULL), *out = NULL;
	int chk;

	o->hung |= cli(c, NULL, "ls", NULL, NULL) == -ETIMEDOUT;
	chk = cli(c, &out, "check", NULL, NULL);
	o->hung |= chk == -ETIMEDOUT;
	char *after = snap_take(c->store, NULL);
	if (strcmp(before, after))
		fail_msg("%s: a read-only command changed the store", name);
	free(before);
	free(after);
	free(out);
	return chk;
}

static bool quarantine_holds_something(const struct ctx *c,
                                       const struct dmg_case *dc)
{
	char q[PATH_MAX];

	snprintf(q, sizeof(q), "%s/%s", c->store,
	         !strncmp(dc->path, ".lock/", 6) ||
	                         !strcmp(dc->extra, ".lock/lock")
	                 ? ".lock/quarantine"
	                 : "quarantine");
	if (!strcmp(dc->path, ".lock") && dc->kind != DMG_DELETE)
		snprintf(q, sizeof(q), "%s/quarantine", c->store);
	return tu_count_entries(q) > 0;
}

static void after_repair(struct ctx *c, const struct dmg_case *dc,
                         const char *name, struct outcome *o)
{
	char *out = NULL, file[PATH_MAX];
	int r = cli(c, &out, "repair", NULL, NULL);

	snprintf(file, sizeof(file), "%s/newvalue", c->dir);

	o->hung |= r == -ETIMEDOUT;
	if (r != 0)
		fail_msg("%s: repair exited %d:\n%s", name, r, out ? out : "");
	/* A lock file with a malformed record is broken by the change
	   before repair once its grace period is over: the lock's own rule
	   (an owner record holds no acknowledged data). Anything else
	   reported is quarantined, never deleted. */
	bool broken_by_lock = out && !*out && !strcmp(dc->extra, ".lock/lock");
	if (o->reported && !broken_by_lock &&
	    (!out || !strstr(out, "quarantined as") ||
	     !quarantine_holds_something(c, dc)))
		fail_msg("%s: repair did not quarantine the damage:\n%s", name,
		         out ? out : "");
	free(out);
	if ((r = cli(c, &out, "check", NULL, NULL)) != 0)
		fail_msg("%s: check after repair exited %d:\n%s", name, r,
		         out ? out : "");
	free(out);
	o->lost = verify_keys(c, damaged_key(c, dc), "after repair", name, o);
	/* The store takes changes again. */
	if ((r = cli(c, NULL, "put", "new-key", file)) != 0)
		fail_msg("%s: put after repair exited %d", name, r);
}

static void run_case(struct ctx *c, const struct dmg_case *dc,
                     const char *cls)
{
	char name[2 * PATH_MAX], *outside, file[PATH_MAX], what[256];
	struct outcome o = { 0 };
	int r;

	dmg_case_name(dc, name, sizeof(name));
	tu_rmtree(c->store);
	copy_tree(c->pristine, c->store);
	outside = snap_take(c->dir, "store");
	if ((r = dmg_apply(c->store, dc, c->outside)) < 0)
		fail_msg("%s: cannot apply: %s", name, strerror(-r));
	/* dmg_apply may make the outside target; the picture starts now. */
	free(outside);
	outside = snap_take(c->dir, "store");

	int watch = snap_watch(c->dir, "store");
	assert_true(watch >= 0);
	int chk = read_only_pass(c, name, &o);
	verify_keys(c, damaged_key(c, dc), "before repair", name, &o);
	/* A change before repair: it may fail, never hang or leave. */
	snprintf(file, sizeof(file), "%s/newvalue", c->dir);
	o.hung |= cli(c, NULL, "put", "before-repair", file) == -ETIMEDOUT;
	o.reported = chk == 1;
	if (visible(c, dc) != o.reported)
		fail_msg("%s: check exited %d", name, chk);
	after_repair(c, dc, name, &o);
	if (o.hung)
		fail_msg("%s: a command hung", name);

	if (snap_events(watch, "store", what, (int)sizeof(what)) != 0)
		fail_msg("%s: something outside the store was touched: %s",
		         name, what);
	snap_unwatch(watch);
	char *now = snap_take(c->dir, "store");
	if (strcmp(outside, now))
		fail_msg("%s: something outside the store changed", name);
	free(now);
	free(outside);
	if (o.lost > 1)
		fail_msg("%s: %u keys lost", name, o.lost);
	dmg_tally("store", cls, dc->kind, o.lost, o.reported, o.hung);
}

static const char *class_of(const struct dmg_case *dc)
{
	if (dc->kind == DMG_STRAY)
		return !strcmp(dc->extra, ".lock/lock") ? "lock file"
		                                         : "stray entry";
	if (dc->kind == DMG_FOREIGN || dc->kind == DMG_DUPLICATE)
		return "record copy";
	if (!strcmp(dc->path, ".lock"))
		return "lock dir";
	return !strcmp(dc->path, ".lock/lock") ? "lock file" : "record";
}

static void every_artifact_under_every_class(void **state)
{
	struct tu_fx *fx = *state;
	struct ctx c = { .dir = fx->dir };
	struct dmg_case *cases = NULL;
	size_t n = 0;

	build(&c);
	char **arts = dmg_artifacts(c.pristine);
	for (char **a = arts; *a; a++) {
		int k = key_of(&c, *a);
		if (k >= 0)
			record_cases(&c, k, &cases, &n);
		else if (strcmp(*a, ".lock") && strcmp(*a, ".lock/lock"))
			fail_msg("unexpected artifact %s", *a);
	}
	dmg_free_list(arts);
	lock_cases(&c, &cases, &n);
	for (size_t i = 0; i < n; i++)
		run_case(&c, &cases[i], class_of(&cases[i]));
	printf("store: %zu damage cases\n", n);
	dmg_tally_print();
	free(cases);
	for (int i = 0; i < NKEYS; i++)
		free(c.value[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(every_artifact_under_every_class,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
