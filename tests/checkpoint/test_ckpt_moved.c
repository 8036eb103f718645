/*
 * A generation moved by hand under another generation's name: its
 * manifest names its own sequence, so what the directory's name claims
 * is damage, never loaded (the old data under the new number).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "fsafe.h"
#include "testutil.h"

static void save(fsafe_checkpoint *cp, const char *text, uint64_t want)
{
	fsafe_checkpoint_tx *tx;
	uint64_t gen = 0;

	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", text, strlen(text)), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, &gen), 0);
	assert_int_equal(gen, want);
}

static void gen_name(char *buf, size_t len, uint64_t seq)
{
	snprintf(buf, len, "gen-%0*llu", FSAFE__CKPT_GEN_DIGITS,
	         (unsigned long long)seq);
}

static void moved_generation_is_not_loaded(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;
	fsafe_checkpoint_snapshot *snap = NULL;
	char g1[64], g2[64], from[4200], to[4200];

	o.flags = FSAFE_CHECKPOINT_CREATE;
	assert_int_equal(fsafe_checkpoint_open(f->dirfd, "cp", &o, &cp), 0);
	save(cp, "one", 1);
	save(cp, "two", 2);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);

	/* Generation 1 takes generation 2's place. */
	gen_name(g1, sizeof(g1), 1);
	gen_name(g2, sizeof(g2), 2);
	snprintf(from, sizeof(from), "%s/cp/%s", f->dir, g1);
	snprintf(to, sizeof(to), "%s/cp/%s", f->dir, g2);
	tu_rmtree(to);
	assert_int_equal(rename(from, to), 0);

	o.flags = 0;
	assert_int_equal(fsafe_checkpoint_open(f->dirfd, "cp", &o, &cp), 0);
	/* Generation 2's directory holds generation 1: damage, not a
	   snapshot (of either number). */
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &snap), -EBADMSG);
	assert_null(snap);
	fsafe_checkpoint_close(cp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(moved_generation_is_not_loaded,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
