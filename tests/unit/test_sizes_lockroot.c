/*
 * The size rule (fsafe.h, "Options") on every options struct of the
 * writer, batch, async, lock and root modules, each through its public
 * function: a size of 0 and *_SIZE_V0 are the first layout, sizeof today
 * is taken, a larger struct is taken when its unknown tail is zero and
 * refused with -E2BIG when not (reported through the struct's `error`),
 * and a size below V0 is -EINVAL. The lock
 * owner record, an out struct, is filled as far as the caller's size
 * says, with zeros past today's layout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsafe.h"
#include "testutil.h"

/* Room for a newer caller's layout past ours. */
#define TAIL 16

/* A caller's struct of any layout: `size` first, then whatever bytes. */
struct raw {
	alignas(max_align_t) unsigned char b[1024];
};

/* One call of a public function with the caller's struct `opts`. */
typedef int (*call_fn)(void *opts, void *ctx);

static void set_size(struct raw *o, size_t size)
{
	memcpy(o->b, &size, sizeof(size));
}

/*
 * The six cases on a struct of today's `size` and first layout `v0`.
 * `fill` (may be NULL) sets fields in a zeroed struct before each call.
 * `error_off` is the offset of its `error` member: a refused tail
 * (-E2BIG) is reported there, at step "options".
 */
static void run_sizes(size_t today, size_t v0, size_t error_off, call_fn call,
                      void *ctx, void (*fill)(void *opts))
{
	struct fsafe_error e, *ep = &e;

	const struct {
		size_t size;
		bool dirty; /* a non-zero byte at the end of the tail */
		int want;
	} cases[] = {
		{ 0, false, 0 },          { v0, false, 0 },
		{ today, false, 0 },      { today + TAIL, false, 0 },
		{ today + TAIL, true, -E2BIG }, { v0 - 1, false, -EINVAL },
	};
	struct raw o;

	assert_true(today + TAIL <= sizeof(o.b));
	assert_true(v0 <= today && v0 > sizeof(size_t));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&o, 0, sizeof(o));
		if (fill)
			fill(o.b);
		set_size(&o, cases[i].size);
		if (cases[i].dirty)
			o.b[today + TAIL - 1] = 1;
		memcpy(o.b + error_off, &ep, sizeof(ep));
		memset(&e, 0, sizeof(e));
		int r = call(o.b, ctx);
		if (r != cases[i].want)
			print_error("size %zu (today %zu, v0 %zu): %d, "
			            "want %d\n",
			            cases[i].size, today, v0, r, cases[i].want);
		assert_int_equal(r, cases[i].want);
		if (r == -E2BIG) {
			assert_int_equal(e.code, -E2BIG);
			assert_string_equal(e.step, "options");
		}
	}
}

/* ---- the calls ---- */

static int call_write(void *opts, void *ctx)
{
	struct tu_fx *f = ctx;
	return fsafe_write_fileat(f->dirfd, "w", "x", 1, opts);
}

static int call_writer(void *opts, void *ctx)
{
	struct tu_fx *f = ctx;
	fsafe_writer *w;
	int r = fsafe_writer_open(f->dirfd, "w", opts, &w);
	if (r == 0)
		fsafe_writer_abort(w);
	return r;
}

static int call_batch(void *opts, void *ctx)
{
	fsafe_batch *b;
	(void)ctx;
	int r = fsafe_batch_new(opts, &b);
	fsafe_batch_free(b);
	return r;
}

static int call_async(void *opts, void *ctx)
{
	fsafe_async *a;
	(void)ctx;
	int r = fsafe_async_new(opts, &a);
	fsafe_async_free(a);
	return r;
}

static int call_lock(void *opts, void *ctx)
{
	struct tu_fx *f = ctx;
	fsafe_lock *l;
	int r = fsafe_lock_acquire(f->dirfd, "l.lock", opts, &l);
	if (r == 0)
		assert_int_equal(fsafe_lock_release(l), 0);
	return r;
}

static int call_root(void *opts, void *ctx)
{
	struct tu_fx *f = ctx;
	fsafe_root *r;
	int rc = fsafe_root_open(f->dirfd, ".", opts, &r);
	fsafe_root_close(r);
	return rc;
}

/* ---- the fields each case sets, so a layout mix-up shows ---- */

static void fill_write(void *opts)
{
	((struct fsafe_write_opts *)opts)->mode = 0640;
}

static void fill_lock(void *opts)
{
	((struct fsafe_lock_opts *)opts)->flags = FSAFE_LOCK_NO_WAIT;
}

static void fill_root(void *opts)
{
	((struct fsafe_root_opts *)opts)->flags = FSAFE_ROOT_NO_OPENAT2;
}

/* ---- the tests ---- */

static void write_opts_sizes(void **state)
{
	const size_t eo = offsetof(struct fsafe_write_opts, error);

	run_sizes(sizeof(struct fsafe_write_opts), FSAFE_WRITE_OPTS_SIZE_V0, eo,
	          call_write, *state, fill_write);
	run_sizes(sizeof(struct fsafe_write_opts), FSAFE_WRITE_OPTS_SIZE_V0, eo,
	          call_writer, *state, fill_write);
	assert_int_equal(FSAFE_WRITE_OPTS_SIZE_V0,
	                 sizeof(struct fsafe_write_opts));
}

static void batch_opts_sizes(void **state)
{
	run_sizes(sizeof(struct fsafe_batch_opts), FSAFE_BATCH_OPTS_SIZE_V0,
	          offsetof(struct fsafe_batch_opts, error), call_batch, *state,
	          NULL);
}

static void async_opts_sizes(void **state)
{
	run_sizes(sizeof(struct fsafe_async_opts), FSAFE_ASYNC_OPTS_SIZE_V0,
	          offsetof(struct fsafe_async_opts, error), call_async, *state,
	          NULL);
}

static void lock_opts_sizes(void **state)
{
	run_sizes(sizeof(struct fsafe_lock_opts), FSAFE_LOCK_OPTS_SIZE_V0,
	          offsetof(struct fsafe_lock_opts, error), call_lock, *state,
	          fill_lock);
}

static void root_opts_sizes(void **state)
{
	run_sizes(sizeof(struct fsafe_root_opts), FSAFE_ROOT_OPTS_SIZE_V0,
	          offsetof(struct fsafe_root_opts, error), call_root, *state,
	          fill_root);
}

/* An out struct: filled as far as the caller's size goes, zeros past
   ours, and below V0 refused before anything is written. */
static void lock_owner_sizes(void **state)
{
	struct tu_fx *f = *state;
	const size_t today = sizeof(struct fsafe_lock_owner);
	struct raw o;
	fsafe_lock *l;
	size_t sizes[] = { 0, FSAFE_LOCK_OWNER_SIZE_V0, today, today + TAIL };

	assert_int_equal(fsafe_lock_acquire(f->dirfd, "l.lock", NULL, &l), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(&o, 0xa5, sizeof(o));
		set_size(&o, sizes[i]);
		assert_int_equal(fsafe_lock_inspect(f->dirfd, "l.lock",
		                                    (void *)o.b),
		                 0);
		struct fsafe_lock_owner got;
		memcpy(&got, o.b, sizeof(got));
		assert_int_equal(got.pid, getpid());
		assert_int_equal(got.liveness, FSAFE_OWNER_ALIVE);
		for (size_t j = today; j < sizes[i]; j++)
			assert_int_equal(o.b[j], 0);
	}
	memset(&o, 0xa5, sizeof(o));
	set_size(&o, FSAFE_LOCK_OWNER_SIZE_V0 - 1);
	assert_int_equal(fsafe_lock_inspect(f->dirfd, "l.lock", (void *)o.b),
	                 -EINVAL);
	assert_int_equal(o.b[sizeof(size_t)], 0xa5);
	assert_int_equal(fsafe_lock_release(l), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(write_opts_sizes, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(batch_opts_sizes, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(async_opts_sizes, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(lock_opts_sizes, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(lock_owner_sizes, tu_fx_setup,
		                                tu_fx_teardown),
		cmocka_unit_test_setup_teardown(root_opts_sizes, tu_fx_setup,
		                                tu_fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
