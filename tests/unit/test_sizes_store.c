/*
 * The size rule (fsafe.h, "Options") for the keyed store's options
 * structs, through their public functions: fsafe_store_opts by
 * fsafe_store_open, fsafe_store_list_opts by fsafe_store_list. Size 0,
 * *_SIZE_V0, sizeof today, a larger struct with a zero tail (taken) and
 * with a non-zero one (-E2BIG), and a size below V0 (-EINVAL).
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

#include "fsafe.h"
#include "testutil.h"

/* A caller compiled against a newer header: our struct and more. */
struct store_newer {
	struct fsafe_store_opts o;
	uint64_t tail[2];
};

struct list_newer {
	struct fsafe_store_list_opts o;
	uint64_t tail[2];
};

struct ctx {
	char *scratch;
	char dir[4200];
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->scratch = tu_mkscratch();
	snprintf(c->dir, sizeof(c->dir), "%s/store", c->scratch);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	tu_rmtree(c->scratch);
	free(c->scratch);
	free(c);
	return 0;
}

/* Open with a struct whose size says `size`; FSAFE_STORE_CREATE is set,
   so a taken struct shows by the store existing afterwards. */
static int open_sized(const struct ctx *c, struct store_newer *n, size_t size)
{
	fsafe_store *s = NULL;

	n->o.size = size;
	n->o.flags = FSAFE_STORE_CREATE | FSAFE_STORE_NO_SWEEP;
	int r = fsafe_store_open(AT_FDCWD, c->dir, &n->o, &s);
	if (r == 0)
		assert_non_null(s);
	fsafe_store_close(s);
	return r;
}

static void store_opts_sizes(void **state)
{
	struct ctx *c = *state;
	struct store_newer n;
	struct fsafe_error e;

	memset(&n, 0, sizeof(n));
	/* The fields are read at size 0 and V0: CREATE makes the store. */
	assert_int_equal(open_sized(c, &n, 0), 0);
	tu_rmtree(c->dir);
	assert_int_equal(open_sized(c, &n, FSAFE_STORE_OPTS_SIZE_V0), 0);
	tu_rmtree(c->dir);
	assert_int_equal(open_sized(c, &n, sizeof(struct fsafe_store_opts)),
	                 0);
	assert_int_equal(open_sized(c, &n, sizeof(n)), 0);
	/* A field we do not know, set: refused, and said through the error
	   member the struct holds. */
	memset(&e, 0, sizeof(e));
	n.o.error = &e;
	n.tail[1] = 1;
	assert_int_equal(open_sized(c, &n, sizeof(n)), -E2BIG);
	assert_int_equal(e.code, -E2BIG);
	assert_string_equal(e.step, "options");
	n.tail[1] = 0;
	/* A struct that ends before V0's last field. */
	assert_int_equal(open_sized(c, &n, FSAFE_STORE_OPTS_SIZE_V0 - 1),
	                 -EINVAL);
	assert_int_equal(open_sized(c, &n, sizeof(size_t)), -EINVAL);
}

static void on_skip(enum fsafe_store_skip why, const char *name,
                    const void *key, size_t keylen, int err, void *arg)
{
	(void)why, (void)name, (void)key, (void)keylen, (void)err;
	++*(int *)arg;
}

/* List with a struct whose size says `size`; the reporter counts the one
   unknown entry, so a taken struct shows by the count. */
static int list_sized(fsafe_store *s, struct list_newer *n, size_t size,
                      int *seen)
{
	fsafe_store_iter *it = NULL;

	*seen = 0;
	n->o.size = size;
	n->o.skipped = on_skip;
	n->o.arg = seen;
	int r = fsafe_store_list(s, &n->o, &it);
	if (r == 0)
		assert_int_equal(fsafe_store_iter_count(it), 1);
	fsafe_store_iter_free(it);
	return r;
}

static void list_opts_sizes(void **state)
{
	struct ctx *c = *state;
	struct fsafe_store_opts so = FSAFE_STORE_OPTS_INIT;
	struct fsafe_error e = { 0 };
	struct list_newer n;
	fsafe_store *s;
	int seen;

	so.flags = FSAFE_STORE_CREATE;
	so.error = &e;
	assert_int_equal(fsafe_store_open(AT_FDCWD, c->dir, &so, &s), 0);
	assert_int_equal(fsafe_store_put(s, "k", 1, "v", 1, NULL), 0);
	tu_put(c->dir, "stray", "x", 1);
	memset(&n, 0, sizeof(n));
	assert_int_equal(list_sized(s, &n, 0, &seen), 0);
	assert_int_equal(seen, 1);
	assert_int_equal(list_sized(s, &n, FSAFE_STORE_LIST_OPTS_SIZE_V0,
	                            &seen),
	                 0);
	assert_int_equal(seen, 1);
	assert_int_equal(list_sized(s, &n, sizeof(n.o), &seen), 0);
	assert_int_equal(seen, 1);
	assert_int_equal(list_sized(s, &n, sizeof(n), &seen), 0);
	assert_int_equal(seen, 1);
	n.tail[0] = 1;
	assert_int_equal(list_sized(s, &n, sizeof(n), &seen), -E2BIG);
	assert_int_equal(e.code, -E2BIG);
	assert_string_equal(e.step, "options");
	n.tail[0] = 0;
	assert_int_equal(list_sized(s, &n,
	                            FSAFE_STORE_LIST_OPTS_SIZE_V0 - 1, &seen),
	                 -EINVAL);
	assert_int_equal(seen, 0);
	fsafe_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(store_opts_sizes, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(list_opts_sizes, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
