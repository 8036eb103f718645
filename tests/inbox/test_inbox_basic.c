/*
 * The inbox's API: delivery order, claims, acks, releases, bad input,
 * recovery of dead consumers only, named consumers, and waiting.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "ibutil.h"
#include "inbox.h"
#include "sys.h"
#include "testutil.h"

static fsafe_inbox_msg *take(fsafe_inbox_consumer *c, const char *want)
{
	fsafe_inbox_msg *m = NULL;

	assert_int_equal(fsafe_inbox_take(c, &m), 0);
	assert_int_equal(fsafe_inbox_msg_len(m), strlen(want));
	assert_memory_equal(fsafe_inbox_msg_data(m), want, strlen(want));
	return m;
}

static void fifo_and_ack(void **state)
{
	struct ibu_fx *f = *state;
	char id[3][FSAFE_INBOX_ID_LEN + 1];
	char path[8192];
	fsafe_inbox_msg *m;

	ibu_put(f, "first", id[0]);
	ibu_put(f, "second", id[1]);
	ibu_put(f, "third", id[2]);
	assert_true(strcmp(id[0], id[1]) < 0 && strcmp(id[1], id[2]) < 0);
	for (int i = 0; i < 3; i++)
		assert_true(fsafe__inbox_valid_id(id[i]));
	assert_int_equal(ibu_count(f->dir, "new"), 3);

	const char *want[] = { "first", "second", "third" };
	for (int i = 0; i < 3; i++) {
		m = take(f->c, want[i]);
		assert_string_equal(fsafe_inbox_msg_id(m), id[i]);
		assert_int_equal(fsafe_inbox_msg_seq(m), (uint64_t)i);
		snprintf(path, sizeof(path), "%s/%s", f->dir,
		         fsafe_inbox_msg_path(m));
		assert_int_equal(access(path, F_OK), 0);
		assert_int_equal(fsafe_inbox_ack(f->c, id[i]), 0);
		assert_int_equal(access(path, F_OK), -1);
		assert_int_equal(fsafe_inbox_ack(f->c, id[i]), -ENOENT);
		fsafe_inbox_msg_free(m);
	}
	assert_int_equal(fsafe_inbox_take(f->c, &m), -EAGAIN);
	assert_null(m);
	assert_int_equal(ibu_count(f->dir, "new"), 0);
}

static void one_winner(void **state)
{
	struct ibu_fx *f = *state;
	fsafe_inbox_consumer *other;
	fsafe_inbox_msg *m, *m2;
	char id[FSAFE_INBOX_ID_LEN + 1];

	assert_int_equal(fsafe_inbox_consumer_open(f->ib, NULL, &other), 0);
	ibu_put(f, "only", id);
	/* The other consumer lists first, then loses the rename. */
	assert_int_equal(fsafe_inbox_wait(other, 0), 0);
	m = take(f->c, "only");
	assert_int_equal(fsafe_inbox_take(other, &m2), -EAGAIN);
	/* Only the claimant can ack or release it. */
	assert_int_equal(fsafe_inbox_ack(other, id), -ENOENT);
	assert_int_equal(fsafe_inbox_release(f->c, id), 0);
	fsafe_inbox_msg_free(m);
	m2 = take(other, "only");
	assert_int_equal(fsafe_inbox_ack(other, id), 0);
	fsafe_inbox_msg_free(m2);
	assert_int_equal(fsafe_inbox_consumer_close(other), 0);
	assert_int_equal(ibu_count(f->dir, "claimed"), 1); /* f->c's only */
}

static void limits(void **state)
{
	struct ibu_fx *f = *state;
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *small;
	char buf[100] = { 0 };

	o.max_message = 10;
	assert_int_equal(fsafe_inbox_open(AT_FDCWD, f->dir, &o, &small), 0);
	assert_int_equal(fsafe_inbox_deliver(small, buf, 11, NULL), -EMSGSIZE);
	assert_int_equal(fsafe_inbox_deliver(small, buf, 10, NULL), 0);
	assert_int_equal(tu_count_entries(f->dir), 4);
	assert_int_equal(ibu_count(f->dir, "new"), 1);
	/* A consumer with a smaller limit quarantines what is over it. */
	o.max_message = 5;
	fsafe_inbox *tiny;
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	assert_int_equal(fsafe_inbox_open(AT_FDCWD, f->dir, &o, &tiny), 0);
	assert_int_equal(fsafe_inbox_consumer_open(tiny, NULL, &c), 0);
	assert_int_equal(fsafe_inbox_take(c, &m), -EAGAIN);
	assert_int_equal(fsafe_inbox_quarantined(c), 1);
	assert_int_equal(ibu_count(f->dir, "quarantine"), 2);
	fsafe_inbox_consumer_close(c);
	fsafe_inbox_close(tiny);
	fsafe_inbox_close(small);
	o.flags = 1u << 30;
	assert_int_equal(fsafe_inbox_open(AT_FDCWD, f->dir, &o, &small),
	                 -EINVAL);
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, ".x", &c), -EINVAL);
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, "a/b", &c), -EINVAL);
}

/* A valid-looking message file, written plainly, then damaged. */
static void forge(const char *dir, const char *name, const char *payload,
                  size_t cut, int flip)
{
	uint8_t buf[256];
	size_t len = strlen(payload);
	uint64_t seq = strtoull(name + 17, NULL, 16);

	fsafe__inbox_header(buf, seq, payload, len);
	memcpy(buf + FSAFE__INBOX_HDR, payload, len);
	len += FSAFE__INBOX_HDR;
	if (flip >= 0)
		buf[flip] ^= 1;
	tu_put(dir, name, buf, len - cut);
}

static void bad_input_quarantined(void **state)
{
	struct ibu_fx *f = *state;
	char newdir[4096], path[8192], why[64];
	fsafe_inbox_msg *m;

	snprintf(newdir, sizeof(newdir), "%s/new", f->dir);
	/* Names of the right form sort before the good message. */
	const char *base = "0000000000000001.00000000000%d.00000000.00000000."
	                   "000000000000";
	char name[5][80];
	for (int i = 0; i < 5; i++)
		snprintf(name[i], sizeof(name[i]), base, i);
	forge(newdir, name[0], "truncated payload", 3, -1);
	forge(newdir, name[1], "payload bit flip", 0, FSAFE__INBOX_HDR + 2);
	forge(newdir, name[2], "header bit flip", 0, 17);
	forge(newdir, name[3], "magic", 0, 0);
	forge(newdir, name[4], "", 0, -1); /* empty payload: a message */
	tu_put(newdir, "foreign.txt", "hello", 5);
	tu_put(newdir, name[4] + 1, "x", 1); /* wrong width */
	snprintf(path, sizeof(path), "%s/sub", newdir);
	assert_int_equal(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/link", newdir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	/* A stage of a writer is not foreign: skipped, not quarantined. */
	tu_put(newdir, ".fsafe-0123456789abcdef01234567.tmp", "s", 1);
	ibu_put(f, "good", NULL);

	m = take(f->c, "");
	assert_string_equal(fsafe_inbox_msg_id(m), name[4]);
	assert_int_equal(fsafe_inbox_ack(f->c, name[4]), 0);
	fsafe_inbox_msg_free(m);
	m = take(f->c, "good");
	fsafe_inbox_msg_free(m);
	/* Foreign names sorting after the good one go on the next pass. */
	assert_int_equal(fsafe_inbox_take(f->c, &m), -EAGAIN);
	assert_int_equal(fsafe_inbox_quarantined(f->c), 8);
	/* Every one with a reason; the stage is still in new/. */
	assert_int_equal(ibu_count(f->dir, "quarantine"), 16);
	assert_int_equal(tu_count_staging(newdir), 1);
	snprintf(path, sizeof(path), "%s/quarantine", f->dir);
	char rname[100];
	snprintf(rname, sizeof(rname), "%s.reason", name[1]);
	char *text = tu_get(path, rname, &(size_t){ 0 });
	assert_non_null(text);
	snprintf(why, sizeof(why), "%.26s", text);
	assert_string_equal(why, "corrupt payload (checksum)");
	free(text);
	/* Recovery sweeps the abandoned stage by age (it is unlocked). */
	struct fsafe_inbox_recovery rep = { .size = sizeof(rep) };
	assert_int_equal(fsafe_inbox_recover(f->ib, 3600000, &rep), 0);
	assert_int_equal(rep.swept, 0);
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, &rep), 0);
	assert_int_equal(rep.swept, 1);
	assert_int_equal(tu_count_staging(newdir), 0);
}

/* A child takes `n` messages and dies without acking. */
static void child_takes(struct ibu_fx *f, int n, const char *name)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		fsafe_inbox_consumer *c;
		fsafe_inbox_msg *m;
		if (fsafe_inbox_consumer_open(f->ib, name, &c) < 0)
			_exit(2);
		for (int i = 0; i < n; i++)
			if (fsafe_inbox_take(c, &m) < 0)
				_exit(3);
		_exit(0); /* dies holding its claims */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void recover_dead_only(void **state)
{
	struct ibu_fx *f = *state;
	struct fsafe_inbox_recovery rep = { .size = sizeof(rep) };
	fsafe_inbox_consumer *named;
	fsafe_inbox_msg *m;

	for (int i = 0; i < 5; i++)
		ibu_put(f, "msg", NULL);
	child_takes(f, 2, NULL);        /* a dead process consumer */
	child_takes(f, 1, "keeper");    /* a named consumer: never judged */
	m = take(f->c, "msg");          /* ours: alive */
	assert_int_equal(ibu_count(f->dir, "new"), 1);
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, &rep), 0);
	assert_int_equal(rep.returned, 2);
	assert_int_equal(rep.consumers, 1);
	assert_int_equal(rep.unjudged, 1); /* ourselves */
	assert_int_equal(ibu_count(f->dir, "new"), 3);
	assert_int_equal(ibu_count(f->dir, "claimed"), 2);
	/* Again: nothing more to do. */
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, &rep), 0);
	assert_int_equal(rep.returned, 0);
	/* The named consumer's claim comes back only when asked. */
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, "keeper", &named),
	                 0);
	assert_int_equal(fsafe_inbox_release_all(named), 1);
	assert_int_equal(fsafe_inbox_consumer_close(named), 0);
	assert_int_equal(ibu_count(f->dir, "new"), 4);
	/* Closing a process consumer returns its claims. */
	fsafe_inbox_msg_free(m);
	assert_int_equal(fsafe_inbox_consumer_close(f->c), 0);
	assert_int_equal(ibu_count(f->dir, "new"), 5);
	assert_int_equal(ibu_count(f->dir, "claimed"), 1); /* n-keeper */
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, NULL, &f->c), 0);
}

/* overlayfs's answer to a rename of a directory from a lower layer. */
static int rename_exdev(int olddirfd, const char *old, int newdirfd,
                        const char *new_)
{
	(void)olddirfd, (void)old, (void)newdirfd, (void)new_;
	errno = EXDEV;
	return -1;
}

/* A dead consumer's directory that cannot be renamed (it came from a
   container image's lower layer): its claims still come back, and the
   directory stays, empty, judged dead by every later recovery. */
static void recover_unrenamable_dir(void **state)
{
	struct ibu_fx *f = *state;
	struct fsafe_inbox_recovery rep = { .size = sizeof(rep) };
	struct fsafe_inbox_recovery rep2 = { .size = sizeof(rep2) };
	struct fsafe_sys sys = fsafe__sys_default;

	for (int i = 0; i < 2; i++)
		ibu_put(f, "msg", NULL);
	child_takes(f, 2, NULL);
	sys.renameat = rename_exdev;
	fault_set_real(&sys);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	int r = fsafe_inbox_recover(f->ib, 0, &rep);
	int renames = fault_calls_named("renameat");
	int again = fsafe_inbox_recover(f->ib, 0, &rep2);
	fault_remove();
	fault_set_real(NULL);
	assert_true(renames > 0); /* the rename was tried, and failed */
	assert_int_equal(r, 0);
	assert_int_equal(rep.returned, 2);
	assert_int_equal(again, 0);
	assert_int_equal(rep2.returned, 0);
	assert_int_equal(ibu_count(f->dir, "new"), 2);
	assert_int_equal(ibu_count(f->dir, "claimed"), 2); /* ours, its */
}

/* The claim directory (claimed/p-...) that holds a claim. */
static void claim_dir(const struct ibu_fx *f, char *out, size_t len)
{
	char base[4096];
	struct dirent *e;

	snprintf(base, sizeof(base), "%s/claimed", f->dir);
	DIR *d = opendir(base);
	assert_non_null(d);
	out[0] = '\0';
	while ((e = readdir(d))) {
		snprintf(out, len, "%s/%s", base, e->d_name);
		if (!strncmp(e->d_name, "p-", 2) && tu_count_entries(out) == 2)
			break;
		out[0] = '\0';
	}
	closedir(d);
	assert_true(out[0] != '\0');
}

/* Start time (field 22 of /proc/self/stat) of this process. */
static unsigned long long my_start(void)
{
	char buf[1024];
	FILE *st = fopen("/proc/self/stat", "r");

	assert_non_null(st);
	assert_non_null(fgets(buf, sizeof(buf), st));
	fclose(st);
	char *q = strrchr(buf, ')') + 2;
	for (int fld = 3; fld < 22; fld++)
		q = strchr(q, ' ') + 1;
	return strtoull(q, NULL, 10);
}

static void put_record(const char *dir, const char *rec)
{
	char path[8192];

	snprintf(path, sizeof(path), "%s/owner", dir);
	unlink(path);
	tu_put(dir, "owner", rec, strlen(rec));
}

/* The verdict is the lock's: a record naming a live process (ours) is
   left alone, the same from another boot is dead, garbage is never
   judged. */
static void recover_judges_records(void **state)
{
	struct ibu_fx *f = *state;
	struct fsafe_inbox_recovery rep = { .size = sizeof(rep) };
	char dir[8192], rec[1024], host[256] = "", boot[40];

	ibu_put(f, "a", NULL);
	child_takes(f, 1, NULL);
	claim_dir(f, dir, sizeof(dir));
	size_t n = 0;
	char *raw = tu_get(dir, "owner", &n);
	assert_non_null(raw);
	char *old = strndup(raw, n);
	free(raw);
	assert_int_equal(sscanf(strstr(old, "boot ") + 5, "%36s", boot), 1);
	gethostname(host, sizeof(host) - 1);
	snprintf(rec, sizeof(rec),
	         "fsafe-lock 1\nmode link\npid %d\nstart %llu\nboot %s\n"
	         "host %s\npidns 0\n%s", (int)getpid(), my_start(), boot, host,
	         strstr(old, "token "));
	free(old);

	put_record(dir, rec);
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, &rep), 0);
	assert_int_equal(rep.returned, 0);
	put_record(dir, "garbage\n");
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, &rep), 0);
	assert_int_equal(rep.returned, 0);
	char *b = strstr(rec, "boot ") + 5;
	b[0] = b[0] == '0' ? '1' : '0';
	put_record(dir, rec);
	assert_int_equal(fsafe_inbox_recover(f->ib, 0, &rep), 0);
	assert_int_equal(rep.returned, 1);
	assert_int_equal(ibu_count(f->dir, "new"), 1);
}

static void keep_done(void **state)
{
	struct ibu_fx *f = *state;
	fsafe_inbox *ib = ibu_open(f->dir, FSAFE_INBOX_KEEP_DONE);
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	char id[FSAFE_INBOX_ID_LEN + 1], done[4096];

	assert_int_equal(fsafe_inbox_consumer_open(ib, NULL, &c), 0);
	assert_int_equal(fsafe_inbox_deliver(ib, "kept", 4, id), 0);
	m = take(c, "kept");
	assert_int_equal(fsafe_inbox_ack(c, id), 0);
	snprintf(done, sizeof(done), "%s/done", f->dir);
	assert_int_equal(tu_count_entries(done), 1);
	fsafe_inbox_msg_free(m);
	fsafe_inbox_consumer_close(c);
	fsafe_inbox_close(ib);
}

static void wait_times_out_and_wakes(void **state)
{
	struct ibu_fx *f = *state;
	unsigned modes[] = { 0, FSAFE_INBOX_NO_INOTIFY };

	for (int i = 0; i < 2; i++) {
		fsafe_inbox *ib = ibu_open(f->dir, modes[i]);
		fsafe_inbox_consumer *c;
		fsafe_inbox_msg *m;
		int status;

		assert_int_equal(fsafe_inbox_consumer_open(ib, NULL, &c), 0);
		assert_int_equal(fsafe_inbox_wait(c, 30), -ETIMEDOUT);
		pid_t pid = fork();
		if (pid == 0) {
			/* Deliver while the parent waits. */
			nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
			_exit(fsafe_inbox_deliver(ib, "w", 1, NULL) ? 1 : 0);
		}
		assert_int_equal(fsafe_inbox_wait(c, 10000), 0);
		m = take(c, "w");
		assert_int_equal(fsafe_inbox_ack(c, fsafe_inbox_msg_id(m)), 0);
		fsafe_inbox_msg_free(m);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_int_equal(status, 0);
		fsafe_inbox_consumer_close(c);
		fsafe_inbox_close(ib);
	}
}

static void link_path_delivery(void **state)
{
	struct ibu_fx *f = *state;
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;
	fsafe_inbox_msg *m;

	o.write_flags = FSAFE_NO_TMPFILE | FSAFE_NO_RENAMEAT2;
	assert_int_equal(fsafe_inbox_open(AT_FDCWD, f->dir, &o, &ib), 0);
	assert_int_equal(fsafe_inbox_deliver(ib, "linked", 6, NULL), 0);
	m = take(f->c, "linked");
	fsafe_inbox_msg_free(m);
	char newdir[4096];
	snprintf(newdir, sizeof(newdir), "%s/new", f->dir);
	assert_int_equal(tu_count_entries(newdir), 0);
	fsafe_inbox_close(ib);
	assert_int_equal(fsafe_inbox_open(AT_FDCWD, "/nonexistent/x", NULL,
	                                  &ib), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(fifo_and_ack, ibu_setup_consumer, ibu_teardown),
		cmocka_unit_test_setup_teardown(one_winner, ibu_setup_consumer, ibu_teardown),
		cmocka_unit_test_setup_teardown(limits, ibu_setup_consumer, ibu_teardown),
		cmocka_unit_test_setup_teardown(bad_input_quarantined, ibu_setup_consumer,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(recover_dead_only, ibu_setup_consumer,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(recover_judges_records, ibu_setup_consumer,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(recover_unrenamable_dir, ibu_setup_consumer,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(keep_done, ibu_setup_consumer, ibu_teardown),
		cmocka_unit_test_setup_teardown(wait_times_out_and_wakes, ibu_setup_consumer,
		                                ibu_teardown),
		cmocka_unit_test_setup_teardown(link_path_delivery, ibu_setup_consumer,
		                                ibu_teardown),
	};
	return cmocka_run_group_tests_name("inbox_basic", tests, NULL, NULL);
}
