/*
 * The inbox against damaged state (issue 16): symlinks anywhere in the
 * layout are never followed, FIFOs, sockets and devices in place of a
 * message never block and are quarantined one by one, and check / repair
 * report and mend what a disk, an operator or a neighbour leaves behind.
 * Every test that could hang runs under alarm(): a hang is a failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ibutil.h"
#include "inbox.h"
#include "snap.h"
#include "testutil.h"

static char *path_of(const struct ibu_fx *f, const char *rel)
{
	static char p[3][4096];
	static int k;

	k = (k + 1) % 3;
	snprintf(p[k], sizeof(p[k]), "%s/%s", f->dir, rel);
	return p[k];
}

/* Take one message with a fresh named consumer "t" and ack it; its
   payload must be `want`. -EAGAIN when there was none. */
static int take_one(struct ibu_fx *f, const char *want)
{
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	int r;

	assert_int_equal(fsafe_inbox_consumer_open(f->ib, "t", &c), 0);
	if ((r = fsafe_inbox_take(c, &m)) == 0) {
		assert_int_equal(fsafe_inbox_msg_len(m), strlen(want));
		assert_memory_equal(fsafe_inbox_msg_data(m), want,
		                    strlen(want));
		assert_int_equal(fsafe_inbox_ack(c, fsafe_inbox_msg_id(m)), 0);
		fsafe_inbox_msg_free(m);
	}
	assert_int_equal(fsafe_inbox_consumer_close(c), 0);
	return r;
}

struct seen {
	int n;
	char text[16][512];
	uint64_t lost;
};

static int collect(const struct fsafe_damage *d, void *arg)
{
	struct seen *s = arg;

	if (s->n < 16)
		snprintf(s->text[s->n], sizeof(s->text[0]), "%s: %s%s%s",
		         d->path, d->what, d->action ? ": " : "",
		         d->action ? d->action : "");
	s->n++;
	s->lost += d->lost;
	return 0;
}

/* check, proven read-only by a picture of the inbox before and after. */
static int check(struct ibu_fx *f, struct seen *s)
{
	char *before = snap_take(f->dir, NULL);
	int r;

	memset(s, 0, sizeof(*s));
	r = fsafe_inbox_check(AT_FDCWD, f->dir, collect, s);
	char *after = snap_take(f->dir, NULL);
	assert_string_equal(before, after);
	free(before);
	free(after);
	return r;
}

static int repair(struct ibu_fx *f, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	return fsafe_inbox_repair(AT_FDCWD, f->dir, collect, s);
}

static void show(const struct seen *s)
{
	for (int i = 0; i < s->n && i < 16; i++)
		print_message("damage: %s\n", s->text[i]);
}

static bool has(const struct seen *s, const char *text)
{
	for (int i = 0; i < s->n && i < 16; i++)
		if (strstr(s->text[i], text))
			return true;
	return false;
}

/* A consumer directory, with a claim of "outside" in it, outside. */
static void outside_claims(struct ibu_fx *f, const char *owner)
{
	char p[2048];
	uint8_t h[FSAFE__INBOX_HDR];
	const char *id = "0000000000000000.000000000000.00000000.00000000."
	                 "000000000000";

	fsafe__inbox_header(h, 0, "outside", 7);
	snprintf(p, sizeof(p), "%s/%s", f->out, id);
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fwrite(h, 1, sizeof(h), fp);
	fwrite("outside", 1, 7, fp);
	fclose(fp);
	if (owner)
		tu_put(f->out, "owner", owner, strlen(owner));
}

/* Reproducer 6: claimed/n-NAME as a symlink to a directory outside. */
static void symlinked_named_consumer_is_never_followed(void **state)
{
	struct ibu_fx *f = *state;
	fsafe_inbox_consumer *c;
	struct seen s;

	outside_claims(f, NULL);
	ibu_put(f, "inside", NULL);
	assert_int_equal(symlink(f->out, path_of(f, "claimed/n-w")), 0);
	char *before = snap_take(f->out, NULL);
	int r = fsafe_inbox_consumer_open(f->ib, "w", &c);
	assert_true(r == -ENOTDIR || r == -ELOOP);
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, NULL), 0);
	assert_int_equal(check(f, &s), 1);
	assert_true(has(&s, "claimed/n-w: not a directory (symbolic link)"));
	assert_int_equal(repair(f, &s), 1);
	assert_true(has(&s, "quarantined as quarantine/n-w"));
	assert_int_equal(check(f, &s), 0);
	/* The consumer works again, in a directory of its own. */
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, "w", &c), 0);
	fsafe_inbox_msg *m;
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	assert_int_equal(fsafe_inbox_release_all(c), 1);
	assert_int_equal(fsafe_inbox_consumer_close(c), 0);
	fsafe_inbox_msg_free(m);
	char *after = snap_take(f->out, NULL);
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_int_equal(take_one(f, "inside"), 0);
}

/* Reproducer 6: a dead-looking process consumer directory that is a
   symlink: recover must never move its "claims" into new/. */
static void symlinked_process_consumer_is_never_recovered(void **state)
{
	struct ibu_fx *f = *state;
	struct fsafe_inbox_recovery rep = { .size = sizeof(rep) };
	fsafe_inbox_consumer *c;
	char rec[8192];

	/* A real owner record of a process that is dead by now. */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (fsafe_inbox_consumer_open(f->ib, NULL, &c) < 0)
			_exit(2);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	DIR *d = opendir(path_of(f, "claimed"));
	struct dirent *e;
	char pdir[512] = "";
	while ((e = readdir(d)))
		if (e->d_name[0] == 'p')
			snprintf(pdir, sizeof(pdir), "claimed/%s", e->d_name);
	closedir(d);
	assert_true(pdir[0]);
	size_t n;
	char *own = tu_get(path_of(f, pdir), "owner", &n);
	snprintf(rec, sizeof(rec), "%.*s", (int)n, own);
	free(own);
	tu_rmtree(path_of(f, pdir));
	outside_claims(f, rec);
	assert_int_equal(symlink(f->out, path_of(f, pdir)), 0);
	char *before = snap_take(f->out, NULL);
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, &rep), 0);
	assert_int_equal(rep.returned, 0);
	assert_int_equal(ibu_count(f->dir, "new"), 0);
	struct seen s;
	assert_int_equal(check(f, &s), 1);
	assert_int_equal(repair(f, &s), 1);
	assert_int_equal(ibu_count(f->dir, "new"), 0);
	char *after = snap_take(f->out, NULL);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* Each layout directory as a symlink (to a real inbox directory outside):
   open fails, nothing outside changes; repair makes the inbox whole. */
static void symlinked_layout_directories(void **state)
{
	struct ibu_fx *f = *state;
	static const char *const sub[] = { "new", "claimed", "done",
	                                   "quarantine" };
	struct seen s;

	for (int i = 0; i < 4; i++) {
		char other[2048];
		fsafe_inbox *ib;
		snprintf(other, sizeof(other), "%s/%s", f->out, sub[i]);
		mkdir(other, 0755);
		assert_int_equal(rename(path_of(f, sub[i]), path_of(f, "x")), 0);
		assert_int_equal(symlink(other, path_of(f, sub[i])), 0);
		ibu_put(f, "kept", NULL); /* through the handle opened before */
		char *before = snap_take(f->out, NULL);
		int r = fsafe_inbox_open(AT_FDCWD, f->dir, NULL, &ib);
		assert_true(r == -ENOTDIR || r == -ELOOP);
		assert_int_equal(check(f, &s), 2); /* the link, and "x" */
		assert_true(has(&s, "not a directory (symbolic link)"));
		if (repair(f, &s) != 2)
			show(&s);
		assert_int_equal(s.n, 2);
		char *after = snap_take(f->out, NULL);
		assert_string_equal(before, after);
		free(before);
		free(after);
		if (check(f, &s) != 0)
			show(&s);
		assert_int_equal(s.n, 0);
		assert_int_equal(fsafe_inbox_open(AT_FDCWD, f->dir, NULL, &ib),
		                 0);
		fsafe_inbox_close(f->ib);
		f->ib = ib;
		/* The old directory "x" went to quarantine: its message is
		   lost only when it was new/ itself. */
		int r2 = take_one(f, "kept");
		assert_int_equal(r2, i == 0 ? -EAGAIN : 0);
	}
}

static void make_socket(const char *path)
{
	int fd = tu_bind_socket(path);

	assert_true(fd >= 0);
	close(fd);
}

/* FIFOs, sockets, devices and links where a message should be: take and
   check never block, each is quarantined with its reason, the real
   messages around them still come out. */
static void special_files_in_new_never_hang(void **state)
{
	struct ibu_fx *f = *state;
	char id[FSAFE_INBOX_ID_LEN + 1];
	struct seen s;

	for (int k = 0; k < 4; k++) {
		ibu_put(f, "before", NULL);
		ibu_put(f, "victim", id);
		ibu_put(f, "after", NULL);
		char *p = path_of(f, "new/x");
		snprintf(p, 4096, "%s/new/%s", f->dir, id);
		assert_int_equal(unlink(p), 0);
		if (k == 0)
			assert_int_equal(mkfifo(p, 0600), 0);
		else if (k == 1)
			make_socket(p);
		else if (k == 2 && mknod(p, S_IFCHR | 0600, makedev(1, 3)) < 0) {
			print_message("SKIP device case: mknod: %s (needs "
			              "root)\n", strerror(errno));
			assert_int_equal(mkfifo(p, 0600), 0);
		} else if (k == 3)
			assert_int_equal(symlink("/dev/zero", p), 0);
		assert_int_equal(check(f, &s), 1);
		assert_true(has(&s, k == 3 ? "a symbolic link"
		                           : "not a regular file"));
		assert_int_equal(s.lost, 1);
		assert_int_equal(take_one(f, "before"), 0);
		fsafe_inbox_consumer *c;
		fsafe_inbox_msg *m;
		assert_int_equal(fsafe_inbox_consumer_open(f->ib, "t", &c), 0);
		assert_int_equal(fsafe_inbox_take(c, &m), 0);
		assert_memory_equal(fsafe_inbox_msg_data(m), "after", 5);
		assert_int_equal(fsafe_inbox_quarantined(c), 1);
		assert_int_equal(fsafe_inbox_ack(c, fsafe_inbox_msg_id(m)), 0);
		fsafe_inbox_msg_free(m);
		assert_int_equal(fsafe_inbox_consumer_close(c), 0);
		char q[256];
		snprintf(q, sizeof(q), "quarantine/%s.reason", id);
		size_t n;
		char *why = tu_get(f->dir, q, &n);
		assert_non_null(why);
		free(why);
	}
	assert_int_equal(check(f, &s), 0);
}

/* One corrupt message among many: check counts it, changes nothing;
   repair quarantines that one, and every other message is taken. */
static void one_corrupt_message_costs_one(void **state)
{
	struct ibu_fx *f = *state;
	char id[FSAFE_INBOX_ID_LEN + 1], text[32];
	struct seen s;

	for (int i = 0; i < 10; i++) {
		snprintf(text, sizeof(text), "m%d", i);
		ibu_put(f, text, i == 4 ? id : NULL);
	}
	char *p = path_of(f, "x");
	snprintf(p, 4096, "%s/new/%s", f->dir, id);
	int fd = open(p, O_WRONLY);
	assert_int_equal(pwrite(fd, "\xff", 1, 20), 1);
	close(fd);
	assert_int_equal(check(f, &s), 1);
	assert_true(has(&s, "corrupt header"));
	assert_int_equal(s.lost, 1);
	assert_int_equal(repair(f, &s), 1);
	assert_true(has(&s, "quarantined as quarantine/"));
	assert_int_equal(check(f, &s), 0);
	for (int i = 0; i < 10; i++) {
		if (i == 4)
			continue;
		snprintf(text, sizeof(text), "m%d", i);
		assert_int_equal(take_one(f, text), 0);
	}
	assert_int_equal(take_one(f, ""), -EAGAIN);
}

/* Claims of a dead consumer, and of one whose owner record is damaged,
   come back with repair; a FIFO among its claims is quarantined alone. */
static void repair_returns_dead_and_unjudgeable_claims(void **state)
{
	struct ibu_fx *f = *state;
	struct seen s;

	for (int round = 0; round < 2; round++) {
		ibu_put(f, "claimed", NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			fsafe_inbox_consumer *c;
			fsafe_inbox_msg *m;
			if (fsafe_inbox_consumer_open(f->ib, NULL, &c) < 0 ||
			    fsafe_inbox_take(c, &m) < 0)
				_exit(2);
			_exit(0);
		}
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_int_equal(WEXITSTATUS(status), 0);
		DIR *d = opendir(path_of(f, "claimed"));
		struct dirent *e;
		char pdir[512] = "";
		while ((e = readdir(d)))
			if (e->d_name[0] == 'p')
				snprintf(pdir, sizeof(pdir), "claimed/%s",
				         e->d_name);
		closedir(d);
		char fifo[1024];
		snprintf(fifo, sizeof(fifo), "%s/0000000000000000."
		         "000000000000.00000000.00000000.000000000000", pdir);
		assert_int_equal(mkfifo(path_of(f, fifo), 0600), 0);
		if (round == 1)
			tu_put(path_of(f, pdir), "owner", "garbage", 7);
		assert_int_equal(check(f, &s), 2);
		assert_true(has(&s, round ? "owner record damaged (1 claims)"
		                          : "consumer is dead (1 claims)"));
		assert_int_equal(repair(f, &s), 2);
		assert_true(has(&s, "1 claims returned to new/"));
		assert_int_equal(check(f, &s), 0);
		assert_int_equal(take_one(f, "claimed"), 0);
		assert_int_equal(take_one(f, ""), -EAGAIN);
	}
}

/* An ack that stopped between its link into done/ and its unlink: repair
   finishes it, and the message is never delivered again. */
static void half_done_ack_is_finished(void **state)
{
	struct ibu_fx *f = *state;
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	struct seen s;
	char a[2048], b[2048];

	ibu_put(f, "once", NULL);
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, "w", &c), 0);
	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	snprintf(a, sizeof(a), "claimed/n-w/%s", fsafe_inbox_msg_id(m));
	snprintf(b, sizeof(b), "done/%s", fsafe_inbox_msg_id(m));
	assert_int_equal(link(path_of(f, a), path_of(f, b)), 0);
	assert_int_equal(check(f, &s), 1);
	assert_true(has(&s, "also in done/"));
	assert_int_equal(repair(f, &s), 1);
	assert_int_equal(check(f, &s), 0);
	assert_int_equal(fsafe_inbox_release_all(c), 0);
	assert_int_equal(fsafe_inbox_consumer_close(c), 0);
	fsafe_inbox_msg_free(m);
	assert_int_equal(take_one(f, ""), -EAGAIN);
}

/* A missing directory and a foreign entry at the top. */
static void missing_and_foreign(void **state)
{
	struct ibu_fx *f = *state;
	struct seen s;

	assert_int_equal(rmdir(path_of(f, "done")), 0);
	tu_put(f->dir, "junk", "j", 1);
	assert_int_equal(check(f, &s), 2);
	assert_true(has(&s, "done: missing"));
	assert_true(has(&s, "junk: foreign entry"));
	assert_int_equal(repair(f, &s), 2);
	assert_int_equal(check(f, &s), 0);
	assert_true(tu_equals(path_of(f, "quarantine"), "junk", "j", 1));
}

/* Abandoned stages (older than an hour) are reported and swept, every
   one of them; a young one is a live delivery and no damage. */
static void abandoned_stages_swept(void **state)
{
	struct ibu_fx *f = *state;
	static const char *const stage[] = {
		".fsafe-0123456789abcdef01234567.tmp",
		".fsafe-0123456789abcdef01234568.tmp",
		".fsafe-0123456789abcdef01234569.tmp",
	};
	struct timespec old[2] = { { .tv_sec = 1000000000 },
		                   { .tv_sec = 1000000000 } };
	struct seen s;

	for (int i = 0; i < 3; i++) {
		tu_put(path_of(f, "new"), stage[i], "x", 1);
		if (i < 2)
			assert_int_equal(utimensat(AT_FDCWD, path_of(f,
			        i ? "new/.fsafe-0123456789abcdef01234568.tmp"
			          : "new/.fsafe-0123456789abcdef01234567.tmp"),
			        old, AT_SYMLINK_NOFOLLOW), 0);
	}
	assert_int_equal(check(f, &s), 2);
	assert_true(has(&s, "abandoned staging file"));
	assert_int_equal(repair(f, &s), 2);
	assert_false(has(&s, "foreign"));
	assert_false(has(&s, "not repaired"));
	assert_int_equal(check(f, &s), 0);
	assert_int_equal(tu_count_staging(path_of(f, "new")), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			symlinked_named_consumer_is_never_followed, ibu_setup,
			ibu_teardown),
		cmocka_unit_test_setup_teardown(
			symlinked_process_consumer_is_never_recovered, ibu_setup,
			ibu_teardown),
		cmocka_unit_test_setup_teardown(symlinked_layout_directories,
		                                ibu_setup, ibu_teardown),
		cmocka_unit_test_setup_teardown(special_files_in_new_never_hang,
		                                ibu_setup, ibu_teardown),
		cmocka_unit_test_setup_teardown(one_corrupt_message_costs_one,
		                                ibu_setup, ibu_teardown),
		cmocka_unit_test_setup_teardown(
			repair_returns_dead_and_unjudgeable_claims, ibu_setup,
			ibu_teardown),
		cmocka_unit_test_setup_teardown(half_done_ack_is_finished,
		                                ibu_setup, ibu_teardown),
		cmocka_unit_test_setup_teardown(missing_and_foreign, ibu_setup,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(abandoned_stages_swept, ibu_setup,
		                                ibu_teardown),
	};
	return cmocka_run_group_tests_name("inbox_damage", tests, NULL, NULL);
}
