/*
 * Kill at every system call: for each write variant, a child process is
 * SIGKILLed just before library call N, for every N of a full write, and
 * the parent checks what a crash at that point leaves: the target is whole
 * OLD (or absent) before the publishing call ran and whole NEW after it,
 * nothing but staging names lie beside it, and one sweep clears those.
 *
 * A SIGKILL keeps everything the kernel already did (page cache included),
 * so this is the process-crash model; power cuts are tests/power's job.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "crashutil.h"
#include "fault.h"
#include "testutil.h"

/* Runs the write in a child killed before call `at`; returns its status. */
static int run_child(const struct cu_variant *v, int dirfd, int at)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		fault_install(&(struct fault_plan){ .at = at,
		                                    .kind = FAULT_KILL });
		int r = cu_write(v, dirfd, NULL);
		/* _exit: the child must not run cmocka's or the sanitizers'
		   exit handlers on the parent's behalf. */
		_exit(r == 0 ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) != pid)
		fail_msg("waitpid: %s", strerror(errno));
	return status;
}

static void kill_every_call(void **state)
{
	const struct cu_variant *v = *state;
	char *scratch = tu_mkscratch();
	char path[4096], text[4096], why[512];
	struct cu_trace t;
	int staged = 0;

	cu_count(v, scratch, &t);
	print_message("[ %-36s ] %2d calls: %s\n", v->name, t.calls,
	              cu_trace_text(&t, text, sizeof(text)));
	snprintf(path, sizeof(path), "%s/case", scratch);

	/* calls + 1: the last child is not killed and must finish cleanly. */
	for (int n = 1; n <= t.calls + 1; n++) {
		const char *at = n <= t.calls ? t.name[n] : "(none)";
		int dirfd = cu_prepare(v, path);
		int status = run_child(v, dirfd, n);
		struct cu_state s;

		if (n <= t.calls) {
			if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
				fail_msg("%s: kill before call %d (%s): child "
				         "not killed, status %#x",
				         v->name, n, at, status);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fail_msg("%s: unkilled child failed, status %#x",
			         v->name, status);
		}

		/* Killed before call n runs: the publishing call ran iff
		   n > publish. */
		enum cu_content want = n > t.publish ? cu_after(v) : cu_before(v);
		cu_observe(v, dirfd, &s);
		if (s.content != want || s.problem)
			fail_msg("%s: kill before call %d (%s): target %s, "
			         "expected %s; %s",
			         v->name, n, at, cu_content_name(s.content),
			         cu_content_name(want),
			         s.problem ? s.problem : "no other problem");
		if (n > t.calls && s.nstaging)
			fail_msg("%s: a completed write left %d staging files",
			         v->name, s.nstaging);
		staged += s.nstaging > 0;
		if (cu_sweep_check(v, dirfd, &s, why, sizeof(why)))
			fail_msg("%s: kill before call %d (%s): %s", v->name,
			         n, at, why);
		close(dirfd);
	}
	print_message("[ %-36s ] %2d kill points, %d left a staging file "
	              "(all swept)\n",
	              v->name, t.calls + 1, staged);
	tu_rmtree(scratch);
	free(scratch);
}

int main(void)
{
	struct CMUnitTest tests[32];
	char names[32][96];
	size_t n = 0;

	cu_init();
	for (size_t i = 0; i < cu_nvariants && n < 32; i++, n++) {
		snprintf(names[n], sizeof(names[n]), "kill: %s",
		         cu_variants[i].name);
		tests[n] = (struct CMUnitTest){
			.name = names[n],
			.test_func = kill_every_call,
			.initial_state = (void *)&cu_variants[i],
		};
	}
	return _cmocka_run_group_tests("crash_kill", tests, n, NULL, NULL);
}
