/*
 * Every error at every call: for each write variant, library call N fails
 * (once, or from N on) with each errno a disk, a quota, a signal, a
 * permission or a descriptor limit can produce, or a write is cut short.
 * In process, no fork: what is checked is the result the caller gets and
 * that it tells the truth about the target, plus no leaked staging file
 * and no leaked descriptor.
 *
 * All violations of a variant are listed before the test fails, so one
 * run shows every call that misbehaves, not just the first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "crashutil.h"
#include "fault.h"
#include "testutil.h"

static const int errnos[] = { EIO, ENOSPC, EDQUOT, EINTR, EACCES, EROFS,
                              EMFILE };
#define NERRNOS (sizeof(errnos) / sizeof(errnos[0]))

struct fcase {
	enum fault_kind kind;
	int err;
};

/* Reported violations per variant before the rest are only counted. */
#define MAX_REPORTED 60

struct tally {
	int cases, ok, notdurable, failed, violations;
};

static const char *kind_name(enum fault_kind k)
{
	return k == FAULT_ERRNO ? "once" : k == FAULT_PERSIST ? "persist"
	                                                      : "short";
}

static int count_named(const char *name, int from, int to)
{
	int c = 0;
	for (int i = from; i <= to; i++)
		c += !strcmp(fault_call_name(i), name);
	return c;
}

/* The data syncs: fdatasync, and a one-shot write that syncs itself. */
static bool is_data_sync(const char *name)
{
	return !strcmp(name, "fdatasync") || !strcmp(name, "pwritev2");
}

static int count_data_syncs(int from, int to)
{
	return count_named("fdatasync", from, to) +
	       count_named("pwritev2", from, to);
}

/*
 * Calls whose failure the library may swallow and still return 0:
 *  - close: Linux releases the descriptor whatever close() returns, and
 *    every close of a write is of a directory fd or of the stage after it
 *    was synced and published, so there is nothing to undo or report
 *    (fsafe__close() in src/sys.c never looks at the result, by design).
 *  - unlinkat after publication: only the create-only link+unlink path
 *    makes one (publish_noreplace() in src/writer.c); NEW is already
 *    published under the target name, so failing the write would break
 *    "a negative result means nothing changed". The staging name it
 *    failed to remove stays, as after a crash (fsafe.h says so), and the
 *    sweep must take it: the leftover check below holds it to that.
 *  - unlinkat in fsafe_writer_abort(): it returns nothing to report with;
 *    the leftover check holds it to "no staging file remains" (fsafe.h).
 */
static bool tolerated(const struct cu_variant *v, const struct cu_trace *t,
                      int call)
{
	const char *n = fault_call_name(call);
	return !strcmp(n, "close") ||
	       (!strcmp(n, "unlinkat") &&
	        (call > t->publish || (v->extra & CU_ABORT)));
}

/*
 * Whether fsafe_error.step tells the caller what actually failed, in the
 * words fsafe.h promises. Only a create-only publish has a choice: the
 * no-replace rename and the link fallback are one step to the caller.
 */
/* The step, possibly followed by why in parentheses: "rename (target is
   a mount point)" names a rename. */
static bool same_step(const char *got, const char *want)
{
	size_t n = strlen(want);

	return !strncmp(got, want, n) && (!got[n] || !strncmp(got + n, " (", 2));
}

static bool step_names_call(const char *step, const char *call)
{
	static const struct {
		const char *call, *step, *alt;
	} map[] = {
		{ "openat", "open", "open directory" },
		{ "fstatat", "stat", NULL },
		{ "fstat", "stat", NULL },
		{ "readlinkat", "readlink", NULL },
		{ "mkdirat", "mkdir", NULL },
		{ "fcntl", "lock", NULL },
		{ "fchown", "chown", NULL },
		{ "fchmod", "chmod", NULL },
		{ "getrandom", "getrandom", NULL },
		{ "fallocate", "allocate", NULL },
		{ "write", "write", NULL },
		{ "pwritev2", "write", NULL }, /* the write with its data sync */
		{ "linkat", "link", NULL },
		{ "fdatasync", "fsync", NULL },
		{ "renameat", "rename", NULL },
		{ "renameat2", "link", "rename" },
		{ "fsync", "fsync directory", "fsync" }, /* fsync: the data sync after a chown */
		{ "listxattrat", "list xattrs", NULL },
		{ "flistxattr", "list xattrs", NULL },
		{ "getxattrat", "read xattr", NULL },
		{ "fgetxattr", "read xattr", NULL },
		{ "fsetxattr", "copy xattr", NULL },
		{ "symlinkat", "symlink", NULL },
		{ "flock", "lock", NULL },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(call, map[i].call))
			return same_step(step, map[i].step) ||
			       (map[i].alt && same_step(step, map[i].alt));
	return false;
}

/* NULL if the outcome of one case is acceptable, else why not. */
static const char *judge(const struct cu_variant *v, const struct cu_trace *t,
                         int n, struct fcase c, int r,
                         const struct fsafe_error *err,
                         const struct cu_state *s, int ran, char *buf,
                         size_t len, struct tally *tally)
{
	int e = c.err;

	if (!fault_fired())
		return "the fault never fired (the call sequence changed)";
	if (c.kind == FAULT_SHORT || (c.kind == FAULT_ERRNO && e == EINTR)) {
		/* Both are normal events the library must absorb. */
		if (r != 0 || s->content != cu_after(v)) {
			snprintf(buf, len, "returned %d (%s), target %s; "
			         "expected 0 and %s", r, fsafe_strerror(r),
			         cu_content_name(s->content),
			         cu_content_name(cu_after(v)));
			return buf;
		}
		tally->ok++;
		return NULL;
	}
	/* The first failed call that counts: a persistent fault fails every
	   call from n on, and may start at one the library tolerates. */
	int first = 0, last = c.kind == FAULT_PERSIST ? ran : n;
	for (int k = n; k <= last && !first; k++)
		if (!tolerated(v, t, k))
			first = k;
	const char *first_name = first ? fault_call_name(first) : "none";
	if (r == 0) {
		tally->ok++;
		if (s->content != cu_after(v))
			return "returned 0 but the target is not as written";
		if (first) {
			snprintf(buf, len, "returned 0 although call %d (%s) "
			         "failed", first, first_name);
			return buf;
		}
		return NULL;
	}
	if (r == FSAFE_ENOTDURABLE) {
		tally->notdurable++;
		if (s->content != CU_NEW || !err->published ||
		    err->code != r || err->sys_errno != e || !err->step ||
		    strcmp(err->step, "fsync directory") != 0 ||
		    strcmp(first_name, "fsync") != 0 || first <= t->publish) {
			snprintf(buf, len, "ENOTDURABLE with target %s, error "
			         "{code %d, errno %d, step %s, published %d}",
			         cu_content_name(s->content), err->code,
			         err->sys_errno, err->step ? err->step : "NULL",
			         err->published);
			return buf;
		}
		return NULL;
	}
	tally->failed++;
	/*
	 * F_OFD_SETLK reports a conflicting lock as EACCES or EAGAIN, so
	 * fsafe__ofd_lock() folds EACCES into EAGAIN ("in use"). The writer
	 * therefore reports an EACCES of its own stage lock as -EAGAIN; the
	 * stage is fresh, so no real lock conflict can hide behind it.
	 */
	int want = -e;
	if (e == EACCES && !strcmp(first_name, "fcntl"))
		want = -EAGAIN;
	/* A managed writer reports a failed write in the error detail at
	   commit, which an aborted writer never reaches. */
	bool detail = !((v->extra & CU_ABORT) && !strcmp(first_name, "write"));
	if (r != want || s->content != cu_before(v) || !first ||
	    first > t->publish ||
	    (detail && (err->code != r || !err->step || err->published ||
	                err->sys_errno != -want))) {
		snprintf(buf, len, "returned %d (%s), expected %d; target %s "
		         "(expected %s); error {code %d, errno %d, step %s, "
		         "published %d}",
		         r, fsafe_strerror(r), want, cu_content_name(s->content),
		         cu_content_name(cu_before(v)), err->code,
		         err->sys_errno, err->step ? err->step : "NULL",
		         err->published);
		return buf;
	}
	if (detail && !step_names_call(err->step, first_name)) {
		snprintf(buf, len, "step \"%s\" does not name the failed %s",
		         err->step, first_name);
		return buf;
	}
	return NULL;
}

/* NULL if nothing was left behind that should not have been. */
static const char *judge_leftovers(const struct cu_variant *v, int dirfd,
                                   int n, struct fcase c, int ran,
                                   const struct cu_state *s, int fds_before,
                                   int fds_after, char *buf, size_t len)
{
	if (fds_after != fds_before) {
		snprintf(buf, len, "%d descriptors open, %d before",
		         fds_after, fds_before);
		return buf;
	}
	if (s->problem)
		return s->problem;
	/*
	 * Only a failed unlinkat of the stage (the fault itself, or a
	 * persistent fault reaching the cleanup) may leave a staging file,
	 * exactly as a crash would; then the sweep must take it.
	 */
	bool unlink_failed =
		(c.kind == FAULT_PERSIST && count_named("unlinkat", n, ran)) ||
		(c.kind == FAULT_ERRNO && !strcmp(fault_call_name(n), "unlinkat"));
	if (s->nstaging && !unlink_failed) {
		snprintf(buf, len, "left staging file %s", s->staging[0]);
		return buf;
	}
	return cu_sweep_check(v, dirfd, s, buf, len);
}

static void every_error(void **state)
{
	const struct cu_variant *v = *state;
	char *scratch = tu_mkscratch();
	char path[4096], buf[1024];
	struct cu_trace t;
	struct tally tally = { 0 };
	struct fcase cases[2 * NERRNOS + 1];
	size_t ncases = 0;

	for (size_t i = 0; i < NERRNOS; i++) {
		cases[ncases++] = (struct fcase){ FAULT_ERRNO, errnos[i] };
		/* EINTR from every call forever would be retried forever, and
		   no kernel does that; once is the real event. */
		if (errnos[i] != EINTR)
			cases[ncases++] = (struct fcase){ FAULT_PERSIST,
			                                  errnos[i] };
	}
	cases[ncases++] = (struct fcase){ FAULT_SHORT, 0 };

	cu_count(v, scratch, &t);
	int syncs = count_data_syncs(1, t.calls);
	snprintf(path, sizeof(path), "%s/case", scratch);

	for (int n = 1; n <= t.calls; n++) {
		for (size_t i = 0; i < ncases; i++) {
			struct fcase c = cases[i];
			struct fsafe_error err = { .code = 1, .sys_errno = -1,
			                           .published = true };
			struct cu_state s;
			int dirfd = cu_prepare(v, path);
			int fds = fault_open_fds();

			fault_install(&(struct fault_plan){
				.at = n, .kind = c.kind, .err = c.err });
			int r = cu_write(v, dirfd, &err);
			int ran = fault_calls();
			fault_remove();

			cu_observe(v, dirfd, &s);
			int fds_after = fault_open_fds();
			const char *why = judge(v, &t, n, c, r, &err, &s, ran,
			                        buf, sizeof(buf), &tally);
			/* A failed fsync must never be retried: the kernel may
			   have dropped the pages it failed to write. (EINTR
			   means it did not run, so that one is retried; a
			   short synced write goes on with the rest.) */
			if (!why && c.err != EINTR && c.kind != FAULT_SHORT &&
			    count_data_syncs(1, ran) > syncs)
				why = "the data sync was retried";
			if (!why)
				why = judge_leftovers(v, dirfd, n, c, ran, &s,
				                      fds, fds_after, buf,
				                      sizeof(buf));
			tally.cases++;
			if (why && tally.violations++ < MAX_REPORTED)
				print_error("%s: call %d (%s) %s %s: %s\n",
				            v->name, n, t.name[n],
				            kind_name(c.kind),
				            c.err ? strerror(c.err) : "", why);
			close(dirfd);
		}
	}
	print_message("[ %-36s ] %2d calls x %zu faults = %d cases: %d "
	              "returned 0, %d ENOTDURABLE, %d -errno; %d violations\n",
	              v->name, t.calls, ncases, tally.cases, tally.ok,
	              tally.notdurable, tally.failed, tally.violations);
	tu_rmtree(scratch);
	free(scratch);
	if (tally.violations)
		fail_msg("%s: %d of %d fault cases misbehaved", v->name,
		         tally.violations, tally.cases);
}

/*
 * The one rule stated on its own: EIO from the data sync is -EIO, the
 * target stays OLD, and the sync is not tried again.
 */
static void fsync_eio_is_reported(void **state)
{
	(void)state;
	char *scratch = tu_mkscratch();
	char path[4096];
	int checked = 0;

	for (size_t i = 0; i < cu_nvariants; i++) {
		const struct cu_variant *v = &cu_variants[i];
		struct cu_trace t;
		int at = 0;

		cu_count(v, scratch, &t);
		for (int k = 1; k <= t.calls && !at; k++)
			if (is_data_sync(t.name[k]))
				at = k;
		if (!at)
			continue; /* FSAFE_NO_SYNC or aborted: no data sync */
		/* A write that syncs itself fails as the write. */
		const char *step = strcmp(t.name[at], "pwritev2") ? "fsync"
		                                                  : "write";

		struct fsafe_error err = { 0 };
		struct cu_state s;
		snprintf(path, sizeof(path), "%s/case", scratch);
		int dirfd = cu_prepare(v, path);
		fault_install(&(struct fault_plan){ .at = at,
		                                    .kind = FAULT_ERRNO,
		                                    .err = EIO });
		int r = cu_write(v, dirfd, &err);
		int ran = fault_calls();
		fault_remove();
		cu_observe(v, dirfd, &s);
		if (r != -EIO || err.code != -EIO || !err.step ||
		    strcmp(err.step, step) != 0 || err.published)
			fail_msg("%s: EIO at %s gave %d (%s), step %s",
			         v->name, t.name[at], r, fsafe_strerror(r),
			         err.step ? err.step : "NULL");
		if (count_data_syncs(1, ran) != 1)
			fail_msg("%s: data sync retried after EIO", v->name);
		if (s.content != cu_before(v) || s.nstaging || s.problem)
			fail_msg("%s: after EIO at %s: %s, %d staging",
			         v->name, t.name[at], cu_content_name(s.content),
			         s.nstaging);
		close(dirfd);
		checked++;
	}
	print_message("EIO at the data sync checked in %d variants\n",
	              checked);
	assert_true(checked > 0);
	tu_rmtree(scratch);
	free(scratch);
}

int main(void)
{
	struct CMUnitTest tests[33];
	char names[32][96];
	size_t n = 0;

	cu_init();
	tests[n++] = (struct CMUnitTest){
		.name = "data fsync EIO is -EIO, never retried",
		.test_func = fsync_eio_is_reported,
	};
	for (size_t i = 0; i < cu_nvariants && i < 32; i++, n++) {
		snprintf(names[i], sizeof(names[i]), "errors: %s",
		         cu_variants[i].name);
		tests[n] = (struct CMUnitTest){
			.name = names[i],
			.test_func = every_error,
			.initial_state = (void *)&cu_variants[i],
		};
	}
	return _cmocka_run_group_tests("crash_errors", tests, n, NULL, NULL);
}
