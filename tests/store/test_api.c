/*
 * The store's API: key encoding and its errors, put/get/delete, versions,
 * compare-and-swap, update, sorted listing, records that fail validation
 * (each costs only its own key), and the open options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "storeutil.h"
#include "testutil.h"

struct ctx {
	char *scratch;
	char dir[4200];
	fsafe_store *s;
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->scratch = tu_mkscratch();
	snprintf(c->dir, sizeof(c->dir), "%s/store", c->scratch);
	c->s = su_open(c->dir, 0, 0);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	fsafe_store_close(c->s);
	tu_rmtree(c->scratch);
	free(c->scratch);
	free(c);
	return 0;
}

/* The one entry of the store dir that is a record file, or NULL. */
static char *only_record(const char *dir)
{
	FILE *p;
	char cmd[4400], *line = NULL;
	size_t n = 0;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep '^k-'", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (getline(&line, &n, p) < 0) {
		free(line);
		line = NULL;
	} else {
		line[strcspn(line, "\n")] = '\0';
	}
	pclose(p);
	return line;
}

static void key_errors(void **state)
{
	struct ctx *c = *state;
	char key[FSAFE_STORE_KEY_MAX + 1];
	void *buf;
	size_t len;

	memset(key, 'x', sizeof(key));
	assert_int_equal(fsafe_store_put(c->s, "", 0, "v", 1, NULL), -EINVAL);
	assert_int_equal(fsafe_store_put(c->s, NULL, 3, "v", 1, NULL), -EINVAL);
	assert_int_equal(fsafe_store_put(c->s, key, sizeof(key), "v", 1, NULL),
	                 -ENAMETOOLONG);
	assert_int_equal(fsafe_store_get(c->s, key, sizeof(key), &buf, &len,
	                                 NULL),
	                 -ENAMETOOLONG);
	assert_int_equal(fsafe_store_delete(c->s, "", 0), -EINVAL);
	/* The longest key works, and its name fits NAME_MAX. */
	assert_int_equal(fsafe_store_put(c->s, key, FSAFE_STORE_KEY_MAX, "v", 1,
	                                 NULL),
	                 0);
	assert_int_equal(fsafe_store_get(c->s, key, FSAFE_STORE_KEY_MAX, &buf,
	                                 &len, NULL),
	                 0);
	assert_int_equal(len, 1);
	free(buf);
	char *name = only_record(c->dir);
	assert_non_null(name);
	assert_true(strlen(name) <= 255);
	free(name);
}

/* Keys of any bytes: NUL, '/', '.', high bytes, and keys that differ only
   in case get distinct names that also differ case-insensitively. */
static void key_encoding(void **state)
{
	struct ctx *c = *state;
	const char *keys[] = { "Abc", "abc", "ABC", "a/b", ".hidden", "..",
		               "\xff\xfe", ".fsafe-000000000000000000000000.tmp",
		               ".lock" };
	const size_t n = sizeof(keys) / sizeof(keys[0]);
	struct su_listing l;

	for (size_t i = 0; i < n; i++)
		su_put(c->s, keys[i], keys[i], strlen(keys[i]));
	assert_int_equal(fsafe_store_put(c->s, "a\0b", 3, "nul", 3, NULL), 0);
	/* The records and the lock's directory, nothing else. */
	assert_int_equal(tu_count_entries(c->dir), (int)n + 1 + 1);
	assert_int_equal(tu_count_staging(c->dir), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(su_content(c->s, keys[i], keys[i],
		                            strlen(keys[i]), NULL, 0),
		                 SU_OLD);
	/* The listing decodes every name back to its key. */
	assert_int_equal(su_list(c->s, 0, &l), 0);
	assert_string_equal(l.keys, "..,.fsafe-000000000000000000000000.tmp,"
	                            ".hidden,.lock,ABC,Abc,a\\x00b,a/b,abc,"
	                            "\\xff\\xfe");
	char cmd[4400];
	snprintf(cmd, sizeof(cmd),
	         "test $(ls -A '%s' | grep '^k-' | tr A-Z a-z | sort -u | "
	         "wc -l) -eq %zu",
	         c->dir, n + 1);
	assert_int_equal(system(cmd), 0);
}

static void put_get_delete(void **state)
{
	struct ctx *c = *state;
	uint64_t v = 99;
	void *buf;
	size_t len;
	char small[3];

	assert_int_equal(fsafe_store_get(c->s, "k", 1, &buf, &len, &v),
	                 -ENOENT);
	assert_int_equal(fsafe_store_put(c->s, "k", 1, "hello", 5, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(fsafe_store_put(c->s, "k", 1, "world!", 6, &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(fsafe_store_get(c->s, "k", 1, &buf, &len, &v), 0);
	assert_int_equal(len, 6);
	assert_int_equal(v, 2);
	assert_memory_equal(buf, "world!", 6);
	free(buf);
	/* Into a buffer: too small leaves it untouched and says the size. */
	memcpy(small, "xyz", 3);
	assert_int_equal(fsafe_store_get_into(c->s, "k", 1, small, 3, &len,
	                                      NULL),
	                 -EMSGSIZE);
	assert_int_equal(len, 6);
	assert_memory_equal(small, "xyz", 3);
	char big[16];
	assert_int_equal(fsafe_store_get_into(c->s, "k", 1, big, sizeof(big),
	                                      &len, &v),
	                 0);
	assert_int_equal(len, 6);
	assert_memory_equal(big, "world!", 6);
	/* An empty payload is a record too. */
	assert_int_equal(fsafe_store_put(c->s, "e", 1, NULL, 0, NULL), 0);
	assert_int_equal(fsafe_store_get(c->s, "e", 1, &buf, &len, NULL), 0);
	assert_non_null(buf);
	assert_int_equal(len, 0);
	free(buf);
	assert_int_equal(fsafe_store_delete(c->s, "k", 1), 0);
	assert_int_equal(fsafe_store_delete(c->s, "k", 1), -ENOENT);
	assert_int_equal(fsafe_store_get(c->s, "k", 1, &buf, &len, NULL),
	                 -ENOENT);
	/* After a delete the key starts again at version 1. */
	assert_int_equal(fsafe_store_put(c->s, "k", 1, "x", 1, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(tu_count_entries(c->dir), 2 + 1); /* + .lock */
}

static void compare_and_swap(void **state)
{
	struct ctx *c = *state;
	uint64_t v, got;

	assert_int_equal(fsafe_store_put_if(c->s, "c", 1, "one", 3, 0, &v), 0);
	assert_int_equal(v, 1);
	/* "Must not exist" fails once it does. */
	assert_int_equal(fsafe_store_put_if(c->s, "c", 1, "two", 3, 0, NULL),
	                 FSAFE_ECONFLICT);
	assert_int_equal(fsafe_store_put(c->s, "c", 1, "two", 3, &v), 0);
	assert_int_equal(v, 2);
	/* A writer holding version 1 is stale: nothing changes. */
	assert_int_equal(fsafe_store_put_if(c->s, "c", 1, "old", 3, 1, NULL),
	                 FSAFE_ECONFLICT);
	assert_int_equal(su_content(c->s, "c", "two", 3, NULL, 0), SU_OLD);
	void *buf;
	size_t len;
	assert_int_equal(fsafe_store_get(c->s, "c", 1, &buf, &len, &got), 0);
	free(buf);
	assert_int_equal(got, 2);
	assert_int_equal(fsafe_store_put_if(c->s, "c", 1, "three", 5, got, &v),
	                 0);
	assert_int_equal(v, 3);
	assert_int_equal(su_content(c->s, "c", "three", 5, NULL, 0), SU_OLD);
	assert_int_equal(fsafe_store_put_if(c->s, "c", 1, "x", 1, 7, NULL),
	                 FSAFE_ECONFLICT);
}

struct upd {
	int calls;
	int verdict;
	const char *value;
	char seen[64];
	bool had;
};

static int upd_fn(const void *old, size_t old_len, const void **nb,
                  size_t *nl, void *arg)
{
	struct upd *u = arg;

	u->calls++;
	u->had = old != NULL;
	snprintf(u->seen, sizeof(u->seen), "%.*s", (int)old_len,
	         old ? (const char *)old : "");
	*nb = u->value;
	*nl = u->value ? strlen(u->value) : 0;
	return u->verdict;
}

static void update(void **state)
{
	struct ctx *c = *state;
	struct upd u = { .verdict = FSAFE_STORE_WRITE, .value = "first" };
	uint64_t v;

	assert_int_equal(fsafe_store_update(c->s, "u", 1, upd_fn, &u, &v), 0);
	assert_false(u.had);
	assert_int_equal(v, 1);
	u.value = "second";
	assert_int_equal(fsafe_store_update(c->s, "u", 1, upd_fn, &u, &v), 0);
	assert_true(u.had);
	assert_string_equal(u.seen, "first");
	assert_int_equal(v, 2);
	/* KEEP and an error change nothing. */
	u.verdict = FSAFE_STORE_KEEP;
	u.value = "nope";
	assert_int_equal(fsafe_store_update(c->s, "u", 1, upd_fn, &u, &v), 0);
	assert_int_equal(v, 2);
	u.verdict = -ECANCELED;
	assert_int_equal(fsafe_store_update(c->s, "u", 1, upd_fn, &u, NULL),
	                 -ECANCELED);
	assert_int_equal(su_content(c->s, "u", "second", 6, NULL, 0), SU_OLD);
	u.verdict = FSAFE_STORE_DELETE;
	assert_int_equal(fsafe_store_update(c->s, "u", 1, upd_fn, &u, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(su_content(c->s, "u", NULL, 0, NULL, 0), SU_ABSENT);
	assert_int_equal(u.calls, 5);
	assert_int_equal(fsafe_store_update(c->s, "u", 1, NULL, NULL, NULL),
	                 -EINVAL);
}

static void sorted_listing(void **state)
{
	struct ctx *c = *state;
	const char *keys[] = { "b", "ab", "a", "abc", "B", "0", "aa" };
	struct su_listing l;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		su_put(c->s, keys[i], "v", 1);
	assert_int_equal(su_list(c->s, 0, &l), 0);
	assert_string_equal(l.keys, "0,B,a,aa,ab,abc,b");
	assert_int_equal(su_list(c->s, FSAFE_STORE_LIST_NAMES_ONLY, &l), 0);
	assert_string_equal(l.keys, "0,B,a,aa,ab,abc,b");
	assert_string_equal(l.skipped_names, "");
}

/* The path of key's record file (keys here are short text). */
static void rec_path(const struct ctx *c, const char *key, char *out,
                     size_t len)
{
	int n = snprintf(out, len, "%s/k-", c->dir);
	for (const char *k = key; *k; k++)
		n += snprintf(out + n, len - (size_t)n, "%02x",
		              (unsigned char)*k);
}

static void bad_records(void **state)
{
	struct ctx *c = *state;
	char p[4400], q[4400], cmd[9000];
	struct su_listing l;

	su_put(c->s, "good", "fine", 4);
	su_put(c->s, "trunc", "to be truncated", 15);
	su_put(c->s, "magic", "header garbled", 14);
	su_put(c->s, "flip", "payload bit flipped", 19);
	su_put(c->s, "moved", "copied elsewhere", 16);
	rec_path(c, "trunc", p, sizeof(p));
	assert_int_equal(truncate(p, 40), 0);
	rec_path(c, "magic", p, sizeof(p));
	snprintf(cmd, sizeof(cmd), "printf X | dd of='%s' conv=notrunc "
	         "status=none", p);
	assert_int_equal(system(cmd), 0);
	rec_path(c, "flip", p, sizeof(p));
	snprintf(cmd, sizeof(cmd), "printf X | dd of='%s' bs=1 seek=50 "
	         "conv=notrunc status=none", p);
	assert_int_equal(system(cmd), 0);
	/* A copy of "good" under the name of "moved": the key inside says. */
	rec_path(c, "good", p, sizeof(p));
	rec_path(c, "moved", q, sizeof(q));
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", p, q);
	assert_int_equal(system(cmd), 0);

	const char *bad[] = { "trunc", "magic", "flip", "moved" };
	for (int i = 0; i < 4; i++)
		assert_int_equal(su_content(c->s, bad[i], NULL, 0, NULL, 0),
		                 SU_BAD);
	assert_int_equal(su_content(c->s, "good", "fine", 4, NULL, 0), SU_OLD);
	/* The listing reports each and lists the rest. */
	assert_int_equal(su_list(c->s, 0, &l), 0);
	assert_string_equal(l.keys, "good");
	assert_int_equal(l.skipped[FSAFE_STORE_SKIP_BAD_RECORD], 4);
	/* Other keys keep working; a CAS or update over a bad record does
	   not guess; a put or a delete repairs it. */
	su_put(c->s, "new", "n", 1);
	assert_int_equal(fsafe_store_put_if(c->s, "flip", 4, "x", 1, 1, NULL),
	                 FSAFE_ECONFLICT);
	struct upd u = { .value = "x" };
	assert_int_equal(fsafe_store_update(c->s, "magic", 5, upd_fn, &u,
	                                    NULL),
	                 -EBADMSG);
	assert_int_equal(u.calls, 0);
	su_put(c->s, "trunc", "repaired", 8);
	assert_int_equal(su_content(c->s, "trunc", "repaired", 8, NULL, 0),
	                 SU_OLD);
	assert_int_equal(fsafe_store_delete(c->s, "magic", 5), 0);
	assert_int_equal(su_list(c->s, 0, &l), 0);
	assert_string_equal(l.keys, "good,new,trunc");
	assert_int_equal(l.skipped[FSAFE_STORE_SKIP_BAD_RECORD], 2);
}

static void open_options(void **state)
{
	struct ctx *c = *state;
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s;
	char p[4400];

	snprintf(p, sizeof(p), "%s/missing", c->scratch);
	assert_int_equal(fsafe_store_open(AT_FDCWD, p, NULL, &s), -ENOENT);
	o.write_flags = FSAFE_MKDIR;
	assert_int_equal(fsafe_store_open(AT_FDCWD, c->dir, &o, &s), -EINVAL);
	o.write_flags = 0;
	o.flags = 1u << 20;
	assert_int_equal(fsafe_store_open(AT_FDCWD, c->dir, &o, &s), -EINVAL);
	snprintf(p, sizeof(p), "%s/file", c->scratch);
	tu_put(c->scratch, "file", "x", 1);
	assert_int_equal(fsafe_store_open(AT_FDCWD, p, NULL, &s), -ENOTDIR);
	/* size 0 is the first layout; a second handle sees the first's
	   records; kernel-mode locking works the same. */
	o = (struct fsafe_store_opts){ .size = 0,
		                       .flags = FSAFE_STORE_LOCK_KERNEL };
	assert_int_equal(fsafe_store_open(AT_FDCWD, c->dir, &o, &s), 0);
	su_put(c->s, "x", "1", 1);
	assert_int_equal(su_content(s, "x", "1", 1, NULL, 0), SU_OLD);
	su_put(s, "y", "2", 1);
	fsafe_store_close(s);
	fsafe_store_close(NULL);
	struct su_listing l;
	assert_int_equal(su_list(c->s, 0, &l), 0);
	assert_string_equal(l.keys, "x,y");
	/* The kernel lock's file stays; it is the store's own, unreported. */
	assert_string_equal(l.skipped_names, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(key_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(key_encoding, setup, teardown),
		cmocka_unit_test_setup_teardown(put_get_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(compare_and_swap, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(update, setup, teardown),
		cmocka_unit_test_setup_teardown(sorted_listing, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_records, setup, teardown),
		cmocka_unit_test_setup_teardown(open_options, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
