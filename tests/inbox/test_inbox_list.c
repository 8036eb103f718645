/*
 * fsafe_inbox_list(): messages waiting and claimed (with their consumer),
 * quarantined files, and strays reported rather than followed, opened or
 * failed on. Every test runs under alarm(): opening a FIFO would hang.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ibutil.h"
#include "testutil.h"

#define MAX_SEEN 16

struct seen {
	int n;
	struct {
		char name[128], dir[128], consumer[80], problem[80];
		enum fsafe_inbox_state state;
		uint64_t size;
	} e[MAX_SEEN];
	int stop_at; /* return 7 at this entry (1-based), 0: never */
};

static int record(const struct fsafe_inbox_entry *e, void *arg)
{
	struct seen *s = arg;

	assert_true(s->n < MAX_SEEN);
	snprintf(s->e[s->n].name, 128, "%s", e->name);
	snprintf(s->e[s->n].dir, 128, "%s", e->dir);
	snprintf(s->e[s->n].consumer, 80, "%s",
	         e->consumer ? e->consumer : "(null)");
	snprintf(s->e[s->n].problem, 80, "%s",
	         e->problem ? e->problem : "(null)");
	s->e[s->n].state = e->state;
	s->e[s->n].size = e->size;
	s->n++;
	return s->stop_at == s->n ? 7 : 0;
}

/* The index of the entry named `name`, failing the test if it is not
   there exactly once. */
static int find(const struct seen *s, const char *name)
{
	int at = -1;

	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->e[i].name, name)) {
			assert_int_equal(at, -1);
			at = i;
		}
	if (at < 0)
		fail_msg("%s not listed", name);
	return at;
}

/* new/ and a named consumer's claim, with the sizes on disk. */
static void waiting_and_claimed(void **state)
{
	struct ibu_fx *f = *state;
	char a[FSAFE_INBOX_ID_LEN + 1], b[FSAFE_INBOX_ID_LEN + 1];
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	struct seen s = { 0 };
	struct stat st;
	char path[2048];

	ibu_put(f, "first", a);
	ibu_put(f, "second!", b);
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, "worker", &c), 0);
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	assert_string_equal(fsafe_inbox_msg_id(m), a);

	assert_int_equal(fsafe_inbox_list(AT_FDCWD, f->dir, record, &s), 0);
	assert_int_equal(s.n, 2);
	int i = find(&s, a), j = find(&s, b);
	assert_int_equal(s.e[i].state, FSAFE_INBOX_CLAIMED);
	assert_string_equal(s.e[i].dir, "claimed/n-worker");
	assert_string_equal(s.e[i].consumer, "worker");
	assert_string_equal(s.e[i].problem, "(null)");
	assert_int_equal(s.e[j].state, FSAFE_INBOX_NEW);
	assert_string_equal(s.e[j].dir, "new");
	assert_string_equal(s.e[j].consumer, "(null)");
	snprintf(path, sizeof(path), "%s/new/%s", f->dir, b);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(s.e[j].size, (uint64_t)st.st_size);
	assert_true(s.e[j].size > strlen("second!"));

	fsafe_inbox_msg_free(m);
	fsafe_inbox_consumer_close(c);
}

/* A process consumer has no name; its owner record is not a claim. */
static void process_consumer(void **state)
{
	struct ibu_fx *f = *state;
	char a[FSAFE_INBOX_ID_LEN + 1];
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	struct seen s = { 0 };

	ibu_put(f, "x", a);
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, NULL, &c), 0);
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	assert_int_equal(fsafe_inbox_list(AT_FDCWD, f->dir, record, &s), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.e[0].state, FSAFE_INBOX_CLAIMED);
	assert_string_equal(s.e[0].consumer, "(null)");
	assert_memory_equal(s.e[0].dir, "claimed/p-", 10);
	fsafe_inbox_msg_free(m);
	fsafe_inbox_consumer_close(c);
}

/* A FIFO, a link and a foreign name in new/, a link in claimed/: each
   reported once as a stray, the walk goes on, nothing is followed (the
   FIFO, opened, would hang until alarm()). Staging files are skipped. */
static void strays_reported_not_followed(void **state)
{
	struct ibu_fx *f = *state;
	char a[FSAFE_INBOX_ID_LEN + 1], path[2048];
	const char *fifo = "0000000000000000.000000000000.00000000.00000000."
	                   "000000000000";
	struct seen s = { 0 };

	ibu_put(f, "kept", a);
	snprintf(path, sizeof(path), "%s/new/%s", f->dir, fifo);
	assert_int_equal(mkfifo(path, 0600), 0);
	tu_put(f->out, "secret", "s", 1);
	snprintf(path, sizeof(path), "%s/new/link", f->dir);
	assert_int_equal(symlink("../../outside/secret", path), 0);
	snprintf(path, sizeof(path), "%s/claimed/n-ghost", f->dir);
	assert_int_equal(symlink("../../outside", path), 0);
	snprintf(path, sizeof(path), "%s/new", f->dir);
	tu_put(path, ".fsafe-0123456789abcdef01234567.tmp", "t", 1);

	assert_int_equal(fsafe_inbox_list(AT_FDCWD, f->dir, record, &s), 0);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.e[find(&s, a)].state, FSAFE_INBOX_NEW);
	int i = find(&s, fifo);
	assert_int_equal(s.e[i].state, FSAFE_INBOX_STRAY);
	assert_string_equal(s.e[i].problem, "FIFO");
	i = find(&s, "link");
	assert_int_equal(s.e[i].state, FSAFE_INBOX_STRAY);
	assert_string_equal(s.e[i].problem, "symbolic link, not followed");
	i = find(&s, "n-ghost");
	assert_int_equal(s.e[i].state, FSAFE_INBOX_STRAY);
	assert_string_equal(s.e[i].dir, "claimed");
	assert_string_equal(s.e[i].problem, "symbolic link, not followed");
}

/* A foreign regular file in new/, and quarantine/ (without .reason). */
static void foreign_and_quarantined(void **state)
{
	struct ibu_fx *f = *state;
	char path[2048];
	struct seen s = { 0 };

	snprintf(path, sizeof(path), "%s/new", f->dir);
	tu_put(path, "README", "hello", 5);
	snprintf(path, sizeof(path), "%s/quarantine", f->dir);
	tu_put(path, "bad", "12345678", 8);
	tu_put(path, "bad.reason", "why", 3);
	assert_int_equal(fsafe_inbox_list(AT_FDCWD, f->dir, record, &s), 0);
	assert_int_equal(s.n, 2);
	int i = find(&s, "README");
	assert_int_equal(s.e[i].state, FSAFE_INBOX_STRAY);
	assert_string_equal(s.e[i].problem, "not a message id");
	i = find(&s, "bad");
	assert_int_equal(s.e[i].state, FSAFE_INBOX_QUARANTINED);
	assert_string_equal(s.e[i].dir, "quarantine");
	assert_int_equal(s.e[i].size, 8);
}

/* A layout directory replaced by a link is a stray; the rest is listed. */
static void linked_layout_directory(void **state)
{
	struct ibu_fx *f = *state;
	char path[2048];
	struct seen s = { 0 };

	tu_put(f->out, "0000000000000000.000000000000.00000000.00000000."
	            "000000000000", "x", 1);
	snprintf(path, sizeof(path), "%s/new", f->dir);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(symlink("outside", path), 0);
	assert_int_equal(fsafe_inbox_list(AT_FDCWD, f->dir, record, &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.e[0].name, "new");
	assert_string_equal(s.e[0].dir, "");
	assert_int_equal(s.e[0].state, FSAFE_INBOX_STRAY);
	assert_string_equal(s.e[0].problem, "symbolic link, not followed");
}

/* The callback's non-zero return stops the walk and is returned; a
   missing inbox is an error; bad arguments are -EINVAL. */
static void stop_and_errors(void **state)
{
	struct ibu_fx *f = *state;
	char id[FSAFE_INBOX_ID_LEN + 1], path[2048];
	struct seen s = { .stop_at = 1 };

	ibu_put(f, "a", id);
	ibu_put(f, "b", id);
	assert_int_equal(fsafe_inbox_list(AT_FDCWD, f->dir, record, &s), 7);
	assert_int_equal(s.n, 1);
	snprintf(path, sizeof(path), "%s/none", f->scratch);
	assert_int_equal(fsafe_inbox_list(AT_FDCWD, path, record, &s),
	                 -ENOENT);
	assert_int_equal(fsafe_inbox_list(AT_FDCWD, NULL, record, &s),
	                 -EINVAL);
	assert_int_equal(fsafe_inbox_list(AT_FDCWD, f->dir, NULL, &s),
	                 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(waiting_and_claimed, ibu_setup,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(process_consumer, ibu_setup,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(strays_reported_not_followed,
		                                ibu_setup, ibu_teardown),
		cmocka_unit_test_setup_teardown(foreign_and_quarantined, ibu_setup,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(linked_layout_directory, ibu_setup,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(stop_and_errors, ibu_setup,
		                                ibu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
