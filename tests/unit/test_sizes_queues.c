/*
 * The size rule (fsafe.h, "Options") for every options and out struct of
 * the inbox, the spool and the checkpoint store, each through the public
 * function that takes it: size 0 and *_SIZE_V0 are the first layout,
 * sizeof today's is taken, a larger struct is taken when its unknown
 * tail is zero and refused (-E2BIG) when not, a size below V0 is -EINVAL.
 * An out struct's larger tail is zeroed rather than refused.
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
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "fsafe/checkpoint.h"
#include "fsafe/inbox.h"
#include "fsafe/spool.h"
#include "testutil.h"

/* Room for today's struct and a tail a newer header might add. */
#define TAIL 16
union buf {
	max_align_t align;
	unsigned char b[512];
};

/* One struct under test: how to fill its fields (besides size) and the
   call that takes it (0 on success; it frees what it made). */
struct subject {
	size_t today, v0;
	bool out; /* filled by the library: a larger tail is zeroed */
	void (*fill)(void *opts);
	int (*call)(int dirfd, void *opts);
};

static void set_size(union buf *u, size_t size)
{
	memcpy(u->b, &size, sizeof(size));
}

static int run(const struct subject *s, int dirfd, size_t size,
               unsigned char tail_byte, union buf *u)
{
	assert_true(s->today + TAIL <= sizeof(u->b));
	memset(u->b, 0, sizeof(u->b));
	if (s->fill)
		s->fill(u->b);
	set_size(u, size);
	if (size > s->today)
		u->b[size - 1] = tail_byte;
	return s->call(dirfd, u->b);
}

static void sizes(const struct subject *s, int dirfd)
{
	union buf u;

	/* Today's layout is the first published one (0.1.0). */
	assert_int_equal(s->v0, s->today);
	assert_int_equal(run(s, dirfd, 0, 0, &u), 0);
	assert_int_equal(run(s, dirfd, s->v0, 0, &u), 0);
	assert_int_equal(run(s, dirfd, s->today, 0, &u), 0);
	assert_int_equal(run(s, dirfd, s->today + TAIL, 0, &u), 0);
	if (s->out) {
		/* A newer caller's fields we do not know read as zero. */
		assert_int_equal(run(s, dirfd, s->today + TAIL, 0x5a, &u), 0);
		for (size_t i = s->today; i < s->today + TAIL; i++)
			assert_int_equal(u.b[i], 0);
	} else {
		assert_int_equal(run(s, dirfd, s->today + TAIL, 0x5a, &u),
		                 -E2BIG);
	}
	assert_int_equal(run(s, dirfd, s->v0 - 1, 0, &u), -EINVAL);
	assert_int_equal(run(s, dirfd, sizeof(size_t), 0, &u), -EINVAL);
}

/* ---- the inbox ------------------------------------------------------------ */

static void inbox_fill(void *p)
{
	((struct fsafe_inbox_opts *)p)->flags = FSAFE_INBOX_CREATE;
}

static int inbox_open(int dirfd, void *opts)
{
	fsafe_inbox *ib;
	int r = fsafe_inbox_open(dirfd, "ib", opts, &ib);

	fsafe_inbox_close(ib);
	return r;
}

static void inbox_opts(void **state)
{
	struct tu_fx *f = *state;
	const struct subject s = { sizeof(struct fsafe_inbox_opts),
	                           FSAFE_INBOX_OPTS_SIZE_V0, false,
	                           inbox_fill, inbox_open };

	sizes(&s, f->dirfd);
}

static int inbox_recover(int dirfd, void *out)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;

	o.flags = FSAFE_INBOX_CREATE;
	assert_int_equal(fsafe_inbox_open(dirfd, "ib", &o, &ib), 0);
	int r = fsafe_inbox_recover(ib, 0, out);
	fsafe_inbox_close(ib);
	return r;
}

static void inbox_recovery(void **state)
{
	struct tu_fx *f = *state;
	const struct subject s = { sizeof(struct fsafe_inbox_recovery),
	                           FSAFE_INBOX_RECOVERY_SIZE_V0, true, NULL,
	                           inbox_recover };

	sizes(&s, f->dirfd);
}

/* ---- the spool --------------------------------------------------------------- */

static void spool_fill(void *p)
{
	((struct fsafe_spool_opts *)p)->flags = FSAFE_SPOOL_CREATE;
}

static int spool_open(int dirfd, void *opts)
{
	fsafe_spool *sp;
	int r = fsafe_spool_open(dirfd, "sp", opts, &sp);

	fsafe_spool_close(sp);
	return r;
}

static void spool_opts(void **state)
{
	struct tu_fx *f = *state;
	const struct subject s = { sizeof(struct fsafe_spool_opts),
	                           FSAFE_SPOOL_OPTS_SIZE_V0, false,
	                           spool_fill, spool_open };

	sizes(&s, f->dirfd);
}

static int spool_stat(int dirfd, void *out)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	struct iovec rec = { .iov_base = "x", .iov_len = 1 };
	fsafe_spool *sp;

	o.flags = FSAFE_SPOOL_CREATE;
	assert_int_equal(fsafe_spool_open(dirfd, "sp", &o, &sp), 0);
	assert_int_equal(fsafe_spool_append(sp, &rec, 1, NULL), 0);
	int r = fsafe_spool_stat(sp, out);
	fsafe_spool_close(sp);
	if (r == 0) /* the counters are there, whatever the size */
		assert_true(((struct fsafe_spool_stat *)out)->next_seq > 1);
	return r;
}

static void spool_stat_sizes(void **state)
{
	struct tu_fx *f = *state;
	const struct subject s = { sizeof(struct fsafe_spool_stat),
	                           FSAFE_SPOOL_STAT_SIZE_V0, true, NULL,
	                           spool_stat };

	sizes(&s, f->dirfd);
}

/* ---- the checkpoint store ----------------------------------------------------- */

static void ckpt_fill(void *p)
{
	((struct fsafe_checkpoint_opts *)p)->flags = FSAFE_CHECKPOINT_CREATE;
}

static int ckpt_open(int dirfd, void *opts)
{
	fsafe_checkpoint *cp;
	int r = fsafe_checkpoint_open(dirfd, "cp", opts, &cp);

	fsafe_checkpoint_close(cp);
	return r;
}

static void ckpt_opts(void **state)
{
	struct tu_fx *f = *state;
	const struct subject s = { sizeof(struct fsafe_checkpoint_opts),
	                           FSAFE_CHECKPOINT_OPTS_SIZE_V0, false,
	                           ckpt_fill, ckpt_open };

	sizes(&s, f->dirfd);
}

static int ckpt_load(int dirfd, void *opts)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint_snapshot *snap;
	fsafe_checkpoint_tx *tx;
	fsafe_checkpoint *cp;

	o.flags = FSAFE_CHECKPOINT_CREATE;
	assert_int_equal(fsafe_checkpoint_open(dirfd, "cp", &o, &cp), 0);
	if (!fsafe_checkpoint_current(cp)) {
		assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
		assert_int_equal(fsafe_checkpoint_add(tx, "a", "1", 1), 0);
		assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
	}
	int r = fsafe_checkpoint_load(cp, opts, &snap);
	if (r >= 0)
		assert_int_equal(fsafe_checkpoint_snapshot_count(snap), 1);
	fsafe_checkpoint_snapshot_free(snap);
	fsafe_checkpoint_close(cp);
	return r;
}

static void ckpt_load_opts(void **state)
{
	struct tu_fx *f = *state;
	const struct subject s = { sizeof(struct fsafe_checkpoint_load_opts),
	                           FSAFE_CHECKPOINT_LOAD_OPTS_SIZE_V0, false,
	                           NULL, ckpt_load };

	sizes(&s, f->dirfd);
}

/* ---- a refused size is named in the error member ------------------------------ */

struct big_inbox { struct fsafe_inbox_opts o; uint64_t more; };
struct big_spool { struct fsafe_spool_opts o; uint64_t more; };
struct big_ckpt { struct fsafe_checkpoint_opts o; uint64_t more; };

static void refused_size_is_reported(void **state)
{
	struct tu_fx *f = *state;
	struct fsafe_error e1 = { 0 }, e2 = { 0 }, e3 = { 0 };
	struct big_inbox bi = { .o = FSAFE_INBOX_OPTS_INIT, .more = 1 };
	struct big_spool bs = { .o = FSAFE_SPOOL_OPTS_INIT, .more = 1 };
	struct big_ckpt bc = { .o = FSAFE_CHECKPOINT_OPTS_INIT, .more = 1 };
	fsafe_checkpoint *cp;
	fsafe_inbox *ib;
	fsafe_spool *sp;

	bi.o.size = sizeof(bi), bi.o.error = &e1;
	bs.o.size = sizeof(bs), bs.o.error = &e2;
	bc.o.size = sizeof(bc), bc.o.error = &e3;
	assert_int_equal(fsafe_inbox_open(f->dirfd, "ib", &bi.o, &ib), -E2BIG);
	assert_int_equal(fsafe_spool_open(f->dirfd, "sp", &bs.o, &sp), -E2BIG);
	assert_int_equal(fsafe_checkpoint_open(f->dirfd, "cp", &bc.o, &cp),
	                 -E2BIG);
	struct fsafe_error *all[] = { &e1, &e2, &e3 };
	for (int i = 0; i < 3; i++) {
		assert_int_equal(all[i]->code, -E2BIG);
		assert_int_equal(all[i]->sys_errno, E2BIG);
		assert_string_equal(all[i]->step, "options (size)");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(inbox_opts, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(inbox_recovery, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(spool_opts, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(spool_stat_sizes, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(ckpt_opts, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(ckpt_load_opts, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(refused_size_is_reported,
		                                tu_fx_setup, tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
