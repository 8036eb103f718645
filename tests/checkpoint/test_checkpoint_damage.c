/*
 * The checkpoint against damaged state (issue 16): a lost or garbage
 * CURRENT, one naming nothing, a FIFO in place of any file, a damaged
 * generation; check reports, repair quarantines and rebuilds, and no
 * acknowledged generation is ever removed on the way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "testutil.h"

static const char one[] = "first set", two[] = "second set";

static fsafe_checkpoint *open_cp(const char *dir, unsigned flags)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;

	o.flags = FSAFE_CHECKPOINT_CREATE | flags;
	int r = fsafe_checkpoint_open(AT_FDCWD, dir, &o, &cp);
	if (r < 0)
		fail_msg("open: %s", fsafe_strerror(r));
	return cp;
}

static uint64_t save(const char *dir, const char *text)
{
	fsafe_checkpoint *cp = open_cp(dir, 0);
	fsafe_checkpoint_tx *tx;
	uint64_t gen = 0;

	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", text, strlen(text)), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, &gen), 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	return gen;
}

/* Two saves: gen 1 ("first set") and gen 2 ("second set"). */
static void two_saves(const char *dir)
{
	assert_int_equal(save(dir, one), 1);
	assert_int_equal(save(dir, two), 2);
}

static bool exists(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

/* Load (flags) and expect generation gen holding `text`. */
static int load_expect(const char *dir, unsigned flags, uint64_t gen,
                       const char *text)
{
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	fsafe_checkpoint_snapshot *s;
	fsafe_checkpoint *cp = open_cp(dir, FSAFE_CHECKPOINT_READ_ONLY);

	lo.flags = flags;
	int r = fsafe_checkpoint_load(cp, &lo, &s);
	if (r >= 0) {
		assert_int_equal(fsafe_checkpoint_snapshot_generation(s), gen);
		assert_int_equal(fsafe_checkpoint_snapshot_size(s, 0),
		                 strlen(text));
		assert_memory_equal(fsafe_checkpoint_snapshot_data(s, 0), text,
		                    strlen(text));
		fsafe_checkpoint_snapshot_free(s);
	}
	fsafe_checkpoint_close(cp);
	return r;
}

struct seen {
	int n;
	char path[8][256];
	char action[8][256];
	uint64_t lost;
};

static int collect(const struct fsafe_damage *d, void *arg)
{
	struct seen *s = arg;

	if (s->n < 8) {
		snprintf(s->path[s->n], sizeof(s->path[0]), "%s", d->path);
		snprintf(s->action[s->n], sizeof(s->action[0]), "%s",
		         d->action ? d->action : "");
	}
	s->n++;
	s->lost += d->lost;
	return 0;
}

static int count_kind(const struct fsafe_checkpoint_event *e, void *arg)
{
	int *n = arg;

	n[e->kind]++;
	return 0;
}

/* Reproducer 4: two saves, then CURRENT removed. */
static void current_lost_costs_nothing(void **state)
{
	struct tu_fx *fx = *state;
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	struct fsafe_checkpoint_damage dm;
	fsafe_checkpoint_snapshot *s;
	struct seen seen = { 0 };
	int ev[8] = { 0 };

	two_saves(fx->dir);
	char p[4096];
	snprintf(p, sizeof(p), "%s/CURRENT", fx->dir);
	assert_int_equal(unlink(p), 0);

	/* check names CURRENT and changes nothing. */
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, collect,
	                                        &seen), 1);
	assert_string_equal(seen.path[0], "CURRENT");
	assert_false(exists(fx->dir, "CURRENT"));
	assert_false(exists(fx->dir, "quarantine"));

	/* Load says CURRENT; with fallback it gets the newest intact set. */
	fsafe_checkpoint *cp = open_cp(fx->dir, 0);
	assert_int_equal(fsafe_checkpoint_current_error(cp), -ENOENT);
	lo.damage = &dm;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s), -ENOENT);
	assert_string_equal(dm.file, "CURRENT");
	assert_int_equal(fsafe_checkpoint_verify(cp, 0, &dm), -ENOENT);
	assert_string_equal(dm.file, "CURRENT");
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	assert_int_equal(load_expect(fx->dir, FSAFE_CHECKPOINT_FALLBACK, 2, two),
	                 FSAFE_CHECKPOINT_FELL_BACK);

	/* Opening removed nothing; the next save neither removes nor
	   reuses a number. */
	assert_true(exists(fx->dir, "gen-000000000001"));
	assert_true(exists(fx->dir, "gen-000000000002"));
	assert_int_equal(save(fx->dir, "third"), 3);
	assert_true(exists(fx->dir, "gen-000000000001"));
	assert_true(exists(fx->dir, "gen-000000000002"));
	assert_int_equal(fsafe_checkpoint_events(AT_FDCWD, fx->dir, count_kind,
	                                         ev, NULL), 0);
	assert_int_equal(ev[FSAFE_CHECKPOINT_EV_REMOVED], 0);
	assert_int_equal(ev[FSAFE_CHECKPOINT_EV_SAVED], 3);
	assert_int_equal(load_expect(fx->dir, 0, 3, "third"), 0);
}

/* A save numbers above the audit trail too: gen-1 and gen-2 gone,
   CURRENT gone, the log still says 2 was saved. */
static void numbers_are_never_reused(void **state)
{
	struct tu_fx *fx = *state;
	char cmd[4200];

	two_saves(fx->dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s/CURRENT %s/gen-*", fx->dir,
	         fx->dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(save(fx->dir, "again"), 3);
}

/* Garbage in CURRENT: nothing is wedged, repair rebuilds it and keeps the
   garbage in quarantine. */
static void garbage_current_is_repaired(void **state)
{
	struct tu_fx *fx = *state;
	struct seen seen = { 0 };
	int ev[8] = { 0 };
	size_t len;

	two_saves(fx->dir);
	tu_put(fx->dir, "CURRENT", "garbage!", 8);
	assert_int_equal(load_expect(fx->dir, 0, 0, ""), -EBADMSG);
	assert_int_equal(load_expect(fx->dir, FSAFE_CHECKPOINT_FALLBACK, 2, two),
	                 FSAFE_CHECKPOINT_FELL_BACK);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, NULL, NULL),
	                 1);
	assert_true(tu_equals(fx->dir, "CURRENT", "garbage!", 8));

	assert_int_equal(fsafe_checkpoint_repair(AT_FDCWD, fx->dir, collect,
	                                         &seen), 1);
	assert_string_equal(seen.path[0], "CURRENT");
	assert_non_null(strstr(seen.action[0], "quarantine/CURRENT"));
	assert_non_null(strstr(seen.action[0], "rebuilt from gen-000000000002"));
	char *q = tu_get(fx->dir, "quarantine/CURRENT", &len);
	assert_int_equal(len, 8);
	assert_memory_equal(q, "garbage!", 8);
	free(q);
	assert_true(exists(fx->dir, "quarantine/CURRENT.why"));
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, NULL, NULL),
	                 0);
	assert_int_equal(load_expect(fx->dir, 0, 2, two), 0);
	fsafe_checkpoint_events(AT_FDCWD, fx->dir, count_kind, ev, NULL);
	assert_int_equal(ev[FSAFE_CHECKPOINT_EV_QUARANTINED], 1);
	assert_int_equal(ev[FSAFE_CHECKPOINT_EV_REPAIRED], 1);
}

/* CURRENT naming a generation that does not exist is damage. */
static void current_naming_nothing_is_reported(void **state)
{
	struct tu_fx *fx = *state;
	struct seen seen = { 0 };

	two_saves(fx->dir);
	tu_put(fx->dir, "CURRENT", "gen-000000000009\n", 17);
	fsafe_checkpoint *cp = open_cp(fx->dir, FSAFE_CHECKPOINT_READ_ONLY);
	assert_int_equal(fsafe_checkpoint_verify(cp, 0, NULL), -ENOENT);
	fsafe_checkpoint_close(cp);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, collect,
	                                        &seen), 1);
	assert_string_equal(seen.path[0], "CURRENT");
	assert_int_equal(fsafe_checkpoint_repair(AT_FDCWD, fx->dir, NULL, NULL),
	                 1);
	assert_int_equal(load_expect(fx->dir, 0, 2, two), 0);
}

/* A damaged current generation: quarantined whole, with the reason; the
   older one becomes current; check is clean afterwards. */
static void damaged_generation_goes_to_quarantine(void **state)
{
	struct tu_fx *fx = *state;
	struct seen seen = { 0 };

	two_saves(fx->dir);
	tu_put(fx->dir, "gen-000000000002/a", "second sex", 10);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, collect,
	                                        &seen), 2);
	assert_string_equal(seen.path[0], "gen-000000000002/a");
	assert_string_equal(seen.path[1], "CURRENT");
	assert_int_equal(seen.lost, 1);
	memset(&seen, 0, sizeof(seen));
	assert_int_equal(fsafe_checkpoint_repair(AT_FDCWD, fx->dir, collect,
	                                         &seen), 2);
	assert_string_equal(seen.action[0],
	                    "quarantined as quarantine/gen-000000000002");
	assert_true(tu_equals(fx->dir, "quarantine/gen-000000000002/a",
	                      "second sex", 10));
	assert_true(exists(fx->dir, "quarantine/gen-000000000002.why"));
	assert_int_equal(load_expect(fx->dir, 0, 1, one), 0);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, NULL, NULL),
	                 0);
	/* The next save does not take the quarantined number. */
	assert_int_equal(save(fx->dir, "next"), 3);
}

/* CURRENT set back (an old copy put in place): the newer generation the
   trail says was saved is no unfinished save, and nothing removes it;
   check says so and repair points CURRENT at it again. */
static void current_set_back_removes_nothing(void **state)
{
	struct tu_fx *fx = *state;
	struct seen seen = { 0 };

	two_saves(fx->dir);
	tu_put(fx->dir, "CURRENT", "gen-000000000001\n", 17);
	fsafe_checkpoint *cp = open_cp(fx->dir, 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	assert_true(exists(fx->dir, "gen-000000000002"));
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, collect,
	                                        &seen), 1);
	assert_string_equal(seen.path[0], "CURRENT");
	assert_int_equal(fsafe_checkpoint_repair(AT_FDCWD, fx->dir, NULL, NULL),
	                 1);
	assert_int_equal(load_expect(fx->dir, 0, 2, two), 0);
}

/* A saved generation removed by hand: only the trail knows, and check
   reports it as a loss; repair records it. */
static void missing_generation_is_a_reported_loss(void **state)
{
	struct tu_fx *fx = *state;
	struct seen seen = { 0 };
	char cmd[4200];

	two_saves(fx->dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s/gen-000000000001", fx->dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, collect,
	                                        &seen), 1);
	assert_string_equal(seen.path[0], "gen-000000000001");
	assert_int_equal(seen.lost, 1);
	assert_int_equal(fsafe_checkpoint_repair(AT_FDCWD, fx->dir, NULL, NULL),
	                 1);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, NULL, NULL),
	                 0);
	assert_int_equal(load_expect(fx->dir, 0, 2, two), 0);
}

/* A save in progress is no damage to a check beside it; the same
   unfinished generation with no writer left is. */
static void check_beside_a_live_save(void **state)
{
	struct tu_fx *fx = *state;
	fsafe_checkpoint_tx *tx;
	struct seen seen = { 0 };

	two_saves(fx->dir);
	fsafe_checkpoint *cp = open_cp(fx->dir, 0);
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", "x", 1), 0);
	assert_true(exists(fx->dir, "gen-000000000003"));
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, NULL, NULL),
	                 0);
	fsafe_checkpoint_abort(tx);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	char p[4096];
	snprintf(p, sizeof(p), "%s/gen-000000000003", fx->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir, collect,
	                                        &seen), 1);
	assert_string_equal(seen.path[0], "gen-000000000003");
	assert_int_equal(seen.lost, 0);
}

/* Every command against a FIFO in place of `name`, in a child that an
   alarm kills if anything blocks. */
static int every_command(const char *dir)
{
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	fsafe_checkpoint_snapshot *s;
	fsafe_checkpoint *cp;
	uint64_t g[8];

	fsafe_checkpoint_check(AT_FDCWD, dir, NULL, NULL);
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	o.flags = FSAFE_CHECKPOINT_READ_ONLY;
	if (fsafe_checkpoint_open(AT_FDCWD, dir, &o, &cp) == 0) {
		lo.flags = FSAFE_CHECKPOINT_FALLBACK;
		if (fsafe_checkpoint_load(cp, &lo, &s) >= 0)
			fsafe_checkpoint_snapshot_free(s);
		fsafe_checkpoint_generations(cp, g, 8);
		fsafe_checkpoint_verify(cp, 0, NULL);
		fsafe_checkpoint_close(cp);
	}
	o.flags = 0;
	if (fsafe_checkpoint_open(AT_FDCWD, dir, &o, &cp) == 0) {
		fsafe_checkpoint_tx *tx;
		if (fsafe_checkpoint_begin(cp, &tx) == 0) {
			fsafe_checkpoint_add(tx, "a", "x", 1);
			fsafe_checkpoint_commit(tx, NULL);
		}
		fsafe_checkpoint_close(cp);
	}
	fsafe_checkpoint_repair(AT_FDCWD, dir, NULL, NULL);
	return 0;
}

static void fifos_never_block(void **state)
{
	static const char *const names[] = {
		"CURRENT", "gen-000000000002/.manifest", "gen-000000000002/a",
		"gen-000000000001/a", "events.log", "OPEN",
	};
	struct tu_fx *fx = *state;
	char p[4096], cmd[4200];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s/* %s/.[!.]*", fx->dir,
		         fx->dir);
		assert_int_equal(system(cmd), 0);
		two_saves(fx->dir);
		snprintf(p, sizeof(p), "%s/%s", fx->dir, names[i]);
		unlink(p);
		assert_int_equal(mkfifo(p, 0644), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			alarm(10);
			_exit(every_command(fx->dir));
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("a FIFO as %s: %s", names[i],
			         WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM
			                 ? "a command blocked"
			                 : "the child failed");
		/* After the repair in the child: check clean, the FIFO kept
		   in quarantine, the newest set loads. */
		assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, fx->dir,
		                                        NULL, NULL), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(current_lost_costs_nothing,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(numbers_are_never_reused,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(garbage_current_is_repaired,
		                                tu_fx_setup, tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			current_naming_nothing_is_reported, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			damaged_generation_goes_to_quarantine, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(fifos_never_block, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			current_set_back_removes_nothing, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(
			missing_generation_is_a_reported_loss, tu_fx_setup,
			tu_fx_teardown),
		cmocka_unit_test_setup_teardown(check_beside_a_live_save,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
