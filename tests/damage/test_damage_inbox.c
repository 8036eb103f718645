/*
 * The inbox under every damage class (issue 16), over every artifact of a
 * populated inbox: each message in new/, in a named consumer's claims, in a
 * dead process consumer's claims and in done/; that consumer's owner
 * record; every directory of the layout; plus stray entries with
 * valid-looking ids (earlier and later), a message copied in from another
 * inbox, and messages duplicated under another id or into new/.
 *
 * Per case: the template inbox is copied, damaged, and every command of
 * the CLI runs under a time bound (check, ls, take + release, recover,
 * repair, check again); check changes nothing; nothing outside the inbox
 * changes; then every delivered, unacknowledged message not held in the
 * damaged artifact is taken exactly once, byte-identical.
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

#include "damage.h"
#include "fsafe.h"
#include "snap.h"
#include "testutil.h"

#define NMSG 6
#define DONE_MSG 3 /* acknowledged into done/: never expected back */
#define CMD_MS 10000
/* Ids of strays: earlier and later than every real one, with a sequence
   field no real message of the template has. */
#define EARLY_ID "0000000000000000.000000000abc.00000000.00000000.000000000000"
#define LATE_ID "ffffffffffffffff.000000000abc.ffffffff.ffffffff.ffffffffffff"

static const size_t msg_len[NMSG] = { 10, 700, 1500, 40, 3000, 100 };

struct world {
	char *scratch;
	char tmpl[1024], ib[1024], other[1024], outside[1024];
	char id[NMSG][FSAFE_INBOX_ID_LEN + 1];
	char loc[NMSG][512];     /* each message's path in the template */
	char *baseline;          /* check's output on the undamaged inbox */
	int failures;
};

static void payload(int i, size_t len, char *buf)
{
	int n = snprintf(buf, len, "msg%d:", i);

	for (size_t k = (size_t)n; k < len; k++)
		buf[k] = (char)('a' + (k * 7 + (size_t)i) % 26);
}

static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/* A dead process consumer holding message `i`. */
static void dead_consumer_takes(fsafe_inbox *ib)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		fsafe_inbox_consumer *c;
		fsafe_inbox_msg *m;
		if (fsafe_inbox_consumer_open(ib, NULL, &c) < 0 ||
		    fsafe_inbox_take(c, &m) < 0)
			_exit(2);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void build_template(struct world *w)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox_consumer *named, *done;
	fsafe_inbox_msg *m;
	fsafe_inbox *ib;
	char buf[4096];

	o.flags = FSAFE_INBOX_CREATE | FSAFE_INBOX_KEEP_DONE;
	assert_int_equal(fsafe_inbox_open(AT_FDCWD, w->tmpl, &o, &ib), 0);
	for (int i = 0; i < NMSG; i++) {
		payload(i, msg_len[i], buf);
		assert_int_equal(fsafe_inbox_deliver(ib, buf, msg_len[i],
		                                     w->id[i]), 0);
		snprintf(w->loc[i], sizeof(w->loc[i]), "new/%s", w->id[i]);
	}
	assert_int_equal(fsafe_inbox_consumer_open(ib, "w", &named), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fsafe_inbox_take(named, &m), 0);
		snprintf(w->loc[i], sizeof(w->loc[i]), "claimed/n-w/%s",
		         w->id[i]);
		fsafe_inbox_msg_free(m);
	}
	fsafe_inbox_consumer_close(named);
	dead_consumer_takes(ib);
	assert_int_equal(fsafe_inbox_consumer_open(ib, "d", &done), 0);
	assert_int_equal(fsafe_inbox_take(done, &m), 0);
	assert_string_equal(fsafe_inbox_msg_id(m), w->id[DONE_MSG]);
	assert_int_equal(fsafe_inbox_ack(done, w->id[DONE_MSG]), 0);
	fsafe_inbox_msg_free(m);
	fsafe_inbox_consumer_close(done);
	snprintf(w->loc[DONE_MSG], sizeof(w->loc[0]), "done/%s",
	         w->id[DONE_MSG]);
	fsafe_inbox_close(ib);
	/* The dead consumer's claim: wherever message 2 is now. */
	char **all = dmg_artifacts(w->tmpl);
	for (char **p = all; *p; p++)
		if (!strncmp(*p, "claimed/p-", 10) && strstr(*p, w->id[2]))
			snprintf(w->loc[2], sizeof(w->loc[2]), "%s", *p);
	dmg_free_list(all);
	assert_true(!strncmp(w->loc[2], "claimed/p-", 10));

	/* Another inbox, to copy a message in from. */
	o.flags = FSAFE_INBOX_CREATE;
	assert_int_equal(fsafe_inbox_open(AT_FDCWD, w->other, &o, &ib), 0);
	assert_int_equal(fsafe_inbox_deliver(ib, "foreign", 7, NULL), 0);
	fsafe_inbox_close(ib);
}

static char *run_cli(struct world *w, const char *verb, const char *arg,
                     int *status)
{
	char *argv[] = { FSAFE_CLI_PATH, "inbox", w->ib, (char *)verb,
		         (char *)arg, NULL };
	char *out = NULL, *err = NULL;

	*status = dmg_run(CMD_MS, argv, &out, &err);
	free(err);
	return out ? out : strdup("");
}

/* The artifact's class in the matrix: its place, without ids or tokens. */
static void artifact_class(const struct world *w, const char *rel, char *buf,
                           size_t len)
{
	struct stat st;
	char path[2 * PATH_MAX];
	const char *slash = strrchr(rel, '/');

	snprintf(path, sizeof(path), "%s/%s", w->tmpl, rel);
	bool dir = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
	if (!strncmp(rel, "claimed/p-", 10))
		snprintf(buf, len, "%s%s", dir ? "dir claimed/p-" :
		         !strcmp(slash + 1, "owner") ? "owner record" :
		         "claim (dead)", "");
	else if (!strncmp(rel, "claimed/n-", 10) && !dir)
		snprintf(buf, len, "claim (named)");
	else if (dir)
		snprintf(buf, len, "dir %.11s", rel);
	else if (!strncmp(rel, "new/", 4))
		snprintf(buf, len, "new message");
	else if (!strncmp(rel, "done/", 5))
		snprintf(buf, len, "done message");
	else
		snprintf(buf, len, "other");
}

/* Is message i held in the artifact that case c damaged? */
static bool held_in(const struct world *w, int i, const struct dmg_case *c,
                    bool changed)
{
	size_t n = strlen(c->path);

	if (c->kind == DMG_STRAY || c->kind == DMG_DUPLICATE || !changed)
		return false;
	return !strcmp(w->loc[i], c->path) ||
	       (!strncmp(w->loc[i], c->path, n) && w->loc[i][n] == '/');
}

static char *read_all(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	char *buf = NULL;

	*len = 0;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (buf = malloc((size_t)st.st_size + 1)))
		*len = (size_t)pread(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	return buf;
}

struct drained {
	int count[NMSG];
	int foreign, bad;
};

/* Take and acknowledge everything, after returning the named consumer's
   claims; runs in a child under a time bound (dmg_call), result by pipe. */
static int drain_fd = -1;
static const char *drain_dir;

static int drain_child(void *arg)
{
	struct drained d = { 0 };
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	fsafe_inbox *ib;
	char buf[4096];

	(void)arg;
	if (fsafe_inbox_open(AT_FDCWD, drain_dir, NULL, &ib) < 0)
		return 2;
	if (fsafe_inbox_consumer_open(ib, "w", &c) < 0 ||
	    fsafe_inbox_release_all(c) < 0)
		return 3;
	fsafe_inbox_consumer_close(c);
	if (fsafe_inbox_consumer_open(ib, NULL, &c) < 0)
		return 4;
	for (int k = 0; k < 64 && fsafe_inbox_take(c, &m) == 0; k++) {
		const char *data = fsafe_inbox_msg_data(m);
		size_t len = fsafe_inbox_msg_len(m);
		int i = -1;
		if (len > 4 && !memcmp(data, "msg", 3))
			i = data[3] - '0';
		if (i >= 0 && i < NMSG && len == msg_len[i]) {
			payload(i, len, buf);
			if (!memcmp(buf, data, len))
				d.count[i]++;
			else
				d.bad++;
		} else if (len == 7 && !memcmp(data, "foreign", 7)) {
			d.foreign++;
		} else {
			d.bad++;
		}
		fsafe_inbox_ack(c, fsafe_inbox_msg_id(m));
		fsafe_inbox_msg_free(m);
	}
	fsafe_inbox_consumer_close(c);
	fsafe_inbox_close(ib);
	return write(drain_fd, &d, sizeof(d)) == sizeof(d) ? 0 : 5;
}

static void fail_case(struct world *w, const char *name, const char *fmt,
                      ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "FAIL %s: ", name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	w->failures++;
}

/* Does `out` have a line `base` has not? */
static bool new_line(const char *out, const char *base)
{
	const char *p = out;

	while (*p) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		bool found = false;
		for (const char *b = base; *b;) {
			const char *be = strchr(b, '\n');
			size_t bn = be ? (size_t)(be - b) : strlen(b);
			found |= bn == n && !memcmp(b, p, n);
			b += bn + (be != NULL);
		}
		if (!found)
			return true;
		p += n + (e != NULL);
	}
	return false;
}

static void run_case(struct world *w, const struct dmg_case *c)
{
	char name[PATH_MAX + 64], cls[64], path[2 * PATH_MAX];
	bool hung = false;
	int st;

	dmg_case_name(c, name, sizeof(name));
	tu_rmtree(w->ib);
	sh("cp -a '%s' '%s'", w->tmpl, w->ib);
	snprintf(path, sizeof(path), "%s/%s", w->ib, c->path);
	size_t blen, alen;
	char *before_bytes = read_all(path, &blen);
	int r = dmg_apply(w->ib, c, w->outside);
	if (r == -ENAMETOOLONG || r == -EINVAL) {
		/* A socket's path is limited to 108 bytes. */
		print_message("SKIP %s: cannot apply here: %s\n", name,
		              strerror(-r));
		free(before_bytes);
		return;
	}
	if (r < 0) {
		fail_case(w, name, "cannot apply: %s", strerror(-r));
		free(before_bytes);
		return;
	}
	char *after_bytes = read_all(path, &alen);
	bool changed = !before_bytes || !after_bytes || blen != alen ||
	               memcmp(before_bytes, after_bytes, blen) != 0;
	free(before_bytes);
	free(after_bytes);

	char *outside = snap_take(w->scratch, "ib");
	char *pic = snap_take(w->ib, NULL);
	char *out = run_cli(w, "check", NULL, &st);
	hung |= st == -ETIMEDOUT;
	char *pic2 = snap_take(w->ib, NULL);
	if (strcmp(pic, pic2) != 0)
		fail_case(w, name, "check changed the inbox");
	bool reported = st == 1 && new_line(out, w->baseline);
	/* The inbox keeps no index of its files: a message or a consumer
	   directory that is simply gone leaves no trace to report (the
	   documented limit). A whole layout directory, or an owner record,
	   is missed. */
	const char *base = strrchr(c->path, '/');
	bool traceless = c->kind == DMG_DELETE && base &&
	                 strcmp(base, "/owner") != 0;
	bool added = c->kind == DMG_STRAY || c->kind == DMG_DUPLICATE;
	if ((changed || added) && c->kind != DMG_FOREIGN && !traceless &&
	    !reported)
		fail_case(w, name, "check did not report it (exit %d)", st);
	free(pic);
	free(pic2);
	free(out);

	free(run_cli(w, "ls", NULL, &st));
	hung |= st == -ETIMEDOUT;
	out = run_cli(w, "take", NULL, &st);
	hung |= st == -ETIMEDOUT;
	if (st == 0 && strlen(out) > FSAFE_INBOX_ID_LEN) {
		out[FSAFE_INBOX_ID_LEN] = '\0';
		free(run_cli(w, "release", out, &st));
		hung |= st == -ETIMEDOUT;
	}
	free(out);
	free(run_cli(w, "recover", NULL, &st));
	hung |= st == -ETIMEDOUT;
	out = run_cli(w, "repair", NULL, &st);
	hung |= st == -ETIMEDOUT;
	if (st != 0)
		fail_case(w, name, "repair exit %d:\n%s", st, out);
	free(out);
	out = run_cli(w, "check", NULL, &st);
	if (st != 0)
		fail_case(w, name, "check after repair exit %d:\n%s", st, out);
	free(out);

	int pfd[2];
	struct drained d = { 0 };
	assert_int_equal(pipe(pfd), 0);
	drain_fd = pfd[1];
	drain_dir = w->ib;
	st = dmg_call(CMD_MS, drain_child, NULL);
	close(pfd[1]);
	hung |= st == -ETIMEDOUT;
	if (st != 0 || read(pfd[0], &d, sizeof(d)) != sizeof(d))
		fail_case(w, name, "drain failed (%d)", st);
	close(pfd[0]);

	unsigned lost = 0;
	for (int i = 0; i < NMSG; i++) {
		if (i == DONE_MSG) {
			if (d.count[i])
				fail_case(w, name, "acked msg%d came back", i);
			continue;
		}
		bool held = held_in(w, i, c, changed);
		if (d.count[i] > 1)
			fail_case(w, name, "msg%d taken %d times", i,
			          d.count[i]);
		if (d.count[i] == 0 && !held)
			fail_case(w, name, "msg%d lost", i);
		lost += d.count[i] == 0;
	}
	if (d.bad)
		fail_case(w, name, "%d messages not byte-identical", d.bad);
	if (hung)
		fail_case(w, name, "a command hung");

	char *outside2 = snap_take(w->scratch, "ib");
	if (strcmp(outside, outside2) != 0)
		fail_case(w, name, "something outside the inbox changed");
	free(outside);
	free(outside2);
	artifact_class(w, c->path, cls, sizeof(cls));
	dmg_tally("inbox", cls, c->kind, lost, reported, hung);
}

/* Store-specific cases: strays, a foreign message, duplicates. */
static void add_special(struct world *w, struct dmg_case **cases, size_t *n)
{
	char extra[PATH_MAX], foreign[PATH_MAX];
	const char *dirs[] = { "new", "claimed/n-w", "done" };
	const int src[] = { 4, 0, DONE_MSG };

	for (int k = 0; k < 3; k++) {
		snprintf(extra, sizeof(extra), "%s/" EARLY_ID, dirs[k]);
		dmg_add(cases, n, DMG_STRAY, w->loc[src[k]], 0, extra);
		snprintf(extra, sizeof(extra), "%s/" LATE_ID, dirs[k]);
		dmg_add(cases, n, DMG_STRAY, w->loc[src[k]], 0, extra);
	}
	/* A regular file where a consumer directory would be. */
	dmg_add(cases, n, DMG_STRAY, w->loc[4], 0, "claimed/n-stray");
	/* A message of another inbox copied over one of ours. */
	char **o = dmg_artifacts(w->other);
	for (char **p = o; *p; p++)
		if (!strncmp(*p, "new/", 4) && strlen(*p) > 10)
			snprintf(foreign, sizeof(foreign), "%s/%s", w->other,
			         *p);
	dmg_free_list(o);
	dmg_add(cases, n, DMG_FOREIGN, w->loc[5], 0, foreign);
	dmg_add(cases, n, DMG_FOREIGN, w->loc[0], 0, foreign);
	/* Duplicates: under another id (sequence field changed), and a claim
	   copied back into new/ under its own id. */
	snprintf(extra, sizeof(extra), "new/%.17s%s", w->id[5], "000000000abc");
	snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "%s",
	         w->id[5] + 29);
	dmg_add(cases, n, DMG_DUPLICATE, w->loc[5], 0, extra);
	snprintf(extra, sizeof(extra), "new/%s", w->id[0]);
	dmg_add(cases, n, DMG_DUPLICATE, w->loc[0], 0, extra);
	snprintf(extra, sizeof(extra), "new/%s", w->id[2]);
	dmg_add(cases, n, DMG_DUPLICATE, w->loc[2], 0, extra);
}

static void every_artifact_every_class(void **state)
{
	struct world w = { 0 };
	struct dmg_case *cases = NULL;
	size_t n = 0;
	int st;

	(void)state;
	w.scratch = tu_mkscratch();
	snprintf(w.tmpl, sizeof(w.tmpl), "%s/tmpl", w.scratch);
	snprintf(w.ib, sizeof(w.ib), "%s/ib", w.scratch);
	snprintf(w.other, sizeof(w.other), "%s/other", w.scratch);
	snprintf(w.outside, sizeof(w.outside), "%s/outside", w.scratch);
	assert_int_equal(mkdir(w.outside, 0755), 0);
	tu_put(w.outside, "outside.dat", "outside", 7);
	build_template(&w);
	sh("cp -a '%s' '%s'", w.tmpl, w.ib);
	w.baseline = run_cli(&w, "check", NULL, &st);
	assert_int_equal(st, 1); /* the dead consumer */
	assert_non_null(strstr(w.baseline, "consumer is dead (1 claims)"));

	char **arts = dmg_artifacts(w.tmpl);
	for (char **p = arts; *p; p++) {
		const off_t bounds[] = { 32 };
		char sibling[PATH_MAX] = "";
		/* A link inside: to another message of the same directory. */
		for (int i = 0; i < NMSG; i++) {
			const char *s = strrchr(w.loc[i], '/');
			if (strcmp(w.loc[i], *p) && s &&
			    !strncmp(w.loc[i], *p, (size_t)(s - w.loc[i]) + 1) &&
			    !strchr(*p + (s - w.loc[i]) + 1, '/'))
				snprintf(sibling, sizeof(sibling), "%s", s + 1);
		}
		dmg_cases_for(w.tmpl, *p, bounds, 1,
		              *sibling ? sibling : NULL, &cases, &n);
	}
	dmg_free_list(arts);
	add_special(&w, &cases, &n);
	for (size_t i = 0; i < n; i++)
		run_case(&w, &cases[i]);
	print_message("%zu damage cases, %d failures\n", n, w.failures);
	dmg_tally_print();
	free(cases);
	free(w.baseline);
	tu_rmtree(w.scratch);
	free(w.scratch);
	assert_int_equal(w.failures, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_artifact_every_class),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("damage_inbox", tests, NULL, NULL);
}
