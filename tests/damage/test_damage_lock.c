/*
 * A directory of locks against damage (issue 16): every artifact of a held
 * lock, of an abandoned one (its holder killed) and of a kernel-mode lock
 * file at rest, under every damage class, plus stray and duplicate
 * entries. After each case, under a time bound: no command hangs (check,
 * repair, --status, taking a lock); check changes nothing; the live
 * holder's lock survives repair untouched unless it was the damaged
 * artifact, and nobody else can take it; repair leaves a directory check
 * finds clean; damage that replaces a lock file is reported and
 * quarantined, never deleted; nothing outside the directory changed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "damage.h"
#include "snap.h"
#include "testutil.h"

#define TIMEOUT_MS 20000

struct ctx {
	const char *dir;
	/* Short enough that a path below them fits PATH_MAX. */
	char locks[1024], pristine[1024], outside[1024], ready[1024];
	pid_t holder;
	char *side;
};

static int lock_cli(const char *a1, const char *a2, const char *a3,
                    const char *a4, char **out)
{
	char *argv[] = { FSAFE_CLI_PATH, "lock", (char *)a1, (char *)a2,
		         (char *)a3, (char *)a4, NULL };
	char *err = NULL;
	int r = dmg_run(TIMEOUT_MS, argv, out, &err);

	free(err);
	return r;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* `fsafe lock DIR/name` holding the lock until killed; its pid, once it
   holds (bounded wait). In a process group of its own, to kill it all. */
static pid_t start_holder(struct ctx *c, const char *dir, const char *name,
                          const char *flag)
{
	char path[2048], script[2048];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(script, sizeof(script), "touch '%s'; exec sleep 600",
	         c->ready);
	unlink(c->ready);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		execl(FSAFE_CLI_PATH, "fsafe", "lock", flag, path, "--",
		      "/bin/sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; access(c->ready, F_OK) < 0; i++) {
		if (i == 2000)
			fail_msg("the holder of %s never held it", path);
		sleep_ms(5);
	}
	unlink(c->ready);
	return pid;
}

static void stop(pid_t pid)
{
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void copy_tree(const char *from, const char *to)
{
	char *argv[] = { "/bin/cp", "-a", (char *)from, (char *)to, NULL };

	assert_int_equal(dmg_run(TIMEOUT_MS, argv, NULL, NULL), 0);
}

/* The pristine directory: an abandoned link-mode lock (its holder
   killed) and a kernel-mode lock file at rest. */
static void build(struct ctx *c)
{
	snprintf(c->pristine, sizeof(c->pristine), "%s/pristine", c->dir);
	snprintf(c->locks, sizeof(c->locks), "%s/locks", c->dir);
	snprintf(c->outside, sizeof(c->outside), "%s/outside", c->dir);
	/* The holders' signal lives in a scratch directory of its own, away
	   from the outside pictures. */
	char *side = tu_mkscratch();
	snprintf(c->ready, sizeof(c->ready), "%s/ready", side);
	c->side = side;
	assert_int_equal(mkdir(c->pristine, 0755), 0);
	assert_int_equal(mkdir(c->outside, 0755), 0);
	stop(start_holder(c, c->pristine, "dead", "--no-wait"));
	char kern[2048];
	snprintf(kern, sizeof(kern), "%s/kern", c->pristine);
	assert_int_equal(lock_cli("--kernel", kern, "--", "/bin/true", NULL),
	                 0);
}

/* Byte offsets of the owner record's lines: its frames. */
static size_t line_bounds(const char *dir, const char *name, off_t *b,
                          size_t cap)
{
	size_t len, n = 0;
	char *buf = tu_get(dir, name, &len);

	for (size_t i = 0; i + 1 < len && n < cap; i++)
		if (buf[i] == '\n')
			b[n++] = (off_t)i + 1;
	free(buf);
	return n;
}

static void artifact_cases(struct ctx *c, const char *art,
                           struct dmg_case **cases, size_t *n)
{
	off_t b[32];
	size_t nb = line_bounds(c->locks, art, b, 32);

	dmg_cases_for(c->locks, art, b, nb, "kern", cases, n);
	/* A flip at the start of every line, where the field names are. */
	for (size_t i = 0; i < nb; i++)
		dmg_add(cases, n, DMG_FLIP, art, b[i], "");
	/* Valid-looking names: a leftover of each kind, another lock. */
	dmg_add(cases, n, DMG_STRAY, art, 0,
	        ".lock-0b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.tmp");
	dmg_add(cases, n, DMG_STRAY, art, 0,
	        ".lock-0b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.broken");
	dmg_add(cases, n, DMG_DUPLICATE, art, 0, "copy");
}

/* The lock a case damages in place (the holder's flock stays on the
   inode): a holder's lock in use is never judged, as documented. */
static bool replaces(const struct dmg_case *dc)
{
	return dc->kind == DMG_FIFO || dc->kind == DMG_SOCKET ||
	       dc->kind == DMG_DIR || dc->kind == DMG_SYMLINK_IN ||
	       dc->kind == DMG_SYMLINK_OUT ||
	       dc->kind == DMG_SYMLINK_DANGLING;
}

/* Must check name the artifact? */
static bool expect_reported(const struct ctx *c, const struct dmg_case *dc)
{
	char path[2 * PATH_MAX];
	struct stat st;

	if (dc->kind == DMG_DELETE)
		return false;
	if (replaces(dc))
		return true;
	if (dc->kind == DMG_DUPLICATE)
		/* A copy of the abandoned lock is abandoned; a copy of a live
		   or a kernel-mode record is fine. */
		return !strcmp(dc->path, "dead");
	if (dc->kind == DMG_STRAY)
		/* A .tmp / .broken naming a dead process (the abandoned lock's
		   or the kernel-mode file's last holder) is a leftover. */
		return strcmp(dc->path, "held") != 0;
	/* An empty file is a kernel-mode lock file between its creation
	   and its record: never damage (a documented limit). */
	if (dc->kind == DMG_TRUNCATE && dc->off == 0)
		return false;
	if (!strcmp(dc->path, "held"))
		return false; /* in place, under the live holder's flock */
	if (!strcmp(dc->path, "dead"))
		return true;
	/* The kernel-mode file: damage unless emptied or cut at its size. */
	snprintf(path, sizeof(path), "%s/%s", c->pristine, dc->path);
	if (dc->kind == DMG_TRUNCATE)
		return stat(path, &st) == 0 && st.st_size != dc->off;
	return true;
}

static const char *reported_name(const struct dmg_case *dc)
{
	return dc->kind == DMG_STRAY || dc->kind == DMG_DUPLICATE ? dc->extra
	                                                          : dc->path;
}

static bool names(const char *out, const char *name)
{
	char line[PATH_MAX + 4];

	snprintf(line, sizeof(line), "%s: ", name);
	for (const char *p = out; p && *p; p = strchr(p, '\n') + 1) {
		if (!strncmp(p, line, strlen(line)))
			return true;
		if (!strchr(p, '\n'))
			break;
	}
	return false;
}

static void run_case(struct ctx *c, const struct dmg_case *dc)
{
	char name[2 * PATH_MAX], held[2048], what[256];
	char *out = NULL, *before, *after, *held_bytes;
	size_t held_len;
	bool hung = false;
	int r;

	dmg_case_name(dc, name, sizeof(name));
	tu_rmtree(c->locks);
	copy_tree(c->pristine, c->locks);
	c->holder = start_holder(c, c->locks, "held", "--no-wait");
	snprintf(held, sizeof(held), "%s/held", c->locks);
	held_bytes = tu_get(c->locks, "held", &held_len);
	if ((r = dmg_apply(c->locks, dc, c->outside)) < 0)
		fail_msg("%s: cannot apply: %s", name, strerror(-r));
	char *outside = snap_take(c->dir, "locks");
	int watch = snap_watch(c->dir, "locks");
	assert_true(watch >= 0);

	before = snap_take(c->locks, NULL);
	r = lock_cli("--check", c->locks, NULL, NULL, &out);
	hung |= r == -ETIMEDOUT;
	hung |= lock_cli("--status", held, NULL, NULL, NULL) == -ETIMEDOUT;
	after = snap_take(c->locks, NULL);
	if (strcmp(before, after))
		fail_msg("%s: check or --status changed the directory", name);
	bool reported = names(out, reported_name(dc));
	if (reported != expect_reported(c, dc))
		fail_msg("%s: check exited %d:\n%s", name, r, out ? out : "");
	free(out);
	free(before);
	free(after);

	r = lock_cli("--repair", c->locks, NULL, NULL, &out);
	hung |= r == -ETIMEDOUT;
	if (r != 0 || (reported && !strstr(out, "quarantined as") &&
	               !strstr(out, "removed")))
		fail_msg("%s: repair exited %d:\n%s", name, r, out ? out : "");
	if (reported && replaces(dc)) {
		char q[1100];
		snprintf(q, sizeof(q), "%s/quarantine", c->locks);
		if (tu_count_entries(q) < 2) /* the entry and its reason */
			fail_msg("%s: repair did not quarantine it", name);
	}
	free(out);
	r = lock_cli("--check", c->locks, NULL, NULL, &out);
	if (r != 0)
		fail_msg("%s: check after repair exited %d:\n%s", name, r, out);
	free(out);

	/* The live holder's lock: untouched, and still exclusive. */
	unsigned lost = 0;
	if (strcmp(dc->path, "held") || dc->kind == DMG_STRAY ||
	    dc->kind == DMG_DUPLICATE) {
		lost = !tu_equals(c->locks, "held", held_bytes, held_len);
		r = lock_cli("--no-wait", held, "/bin/true", NULL, NULL);
		hung |= r == -ETIMEDOUT;
		if (lost || r != 1)
			fail_msg("%s: the live holder's lock was lost (%d)",
			         name, r);
	}
	stop(c->holder);
	free(held_bytes);
	if (hung)
		fail_msg("%s: a command hung", name);
	if (snap_events(watch, "locks", what, (int)sizeof(what)) != 0)
		fail_msg("%s: something outside was touched: %s", name, what);
	snap_unwatch(watch);
	char *now = snap_take(c->dir, "locks");
	if (strcmp(outside, now))
		fail_msg("%s: something outside the directory changed", name);
	free(now);
	free(outside);
	dmg_tally("lock", dc->path[0] == 'h'   ? "held lock"
	                  : dc->path[0] == 'd' ? "abandoned lock"
	                                       : "kernel lock file",
	          dc->kind, lost, reported, hung);
}

static void every_artifact_under_every_class(void **state)
{
	struct tu_fx *fx = *state;
	struct ctx c = { .dir = fx->dir };
	struct dmg_case *cases = NULL;
	size_t n = 0;

	build(&c);
	/* The artifacts and their cases, with a live holder in place. */
	copy_tree(c.pristine, c.locks);
	pid_t h = start_holder(&c, c.locks, "held", "--no-wait");
	char **arts = dmg_artifacts(c.locks);
	for (char **a = arts; *a; a++)
		artifact_cases(&c, *a, &cases, &n);
	dmg_free_list(arts);
	stop(h);
	for (size_t i = 0; i < n; i++)
		run_case(&c, &cases[i]);
	printf("lock: %zu damage cases\n", n);
	dmg_tally_print();
	free(cases);
	tu_rmtree(c.side);
	free(c.side);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(every_artifact_under_every_class,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
