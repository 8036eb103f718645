/* The owner record: format/parse round trip, defensive parsing, verdicts. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "lockutil.h"

static int format(const struct fsafe_lock_owner *o, char *buf)
{
	int n = fsafe__owner_format(o, buf, FSAFE__OWNER_MAX);

	assert_true(n > 0);
	return n;
}

static void round_trip(void **state)
{
	(void)state;
	struct fsafe_lock_owner o = lu_self(), back;
	char buf[FSAFE__OWNER_MAX];
	int n = format(&o, buf);

	assert_int_equal(fsafe__owner_parse(buf, (size_t)n, &back), 0);
	assert_int_equal(back.pid, getpid());
	assert_true(back.start == o.start);
	assert_string_equal(back.boot_id, o.boot_id);
	assert_string_equal(back.host, o.host);
	assert_string_equal(back.token, o.token);
	assert_true(back.time_ms == o.time_ms);
	assert_false(back.kernel);
	assert_true(back.pidns == o.pidns);
	assert_memory_equal(buf, "fsafe-lock 1\nmode link\npid ", 27);

	o.kernel = true;
	n = format(&o, buf);
	assert_int_equal(fsafe__owner_parse(buf, (size_t)n, &back), 0);
	assert_true(back.kernel);
}

/* Every proper prefix of a valid record is malformed: a torn record can
   never pass for a whole one. */
static void truncated(void **state)
{
	(void)state;
	struct fsafe_lock_owner o = lu_self(), back;
	char buf[FSAFE__OWNER_MAX];
	int n = format(&o, buf);

	for (int len = 0; len < n; len++)
		assert_int_equal(fsafe__owner_parse(buf, (size_t)len, &back),
		                 -EBADMSG);
}

static void expect_bad(const char *rec)
{
	struct fsafe_lock_owner back;

	if (fsafe__owner_parse(rec, strlen(rec), &back) != -EBADMSG)
		fail_msg("accepted: %s", rec);
}

#define HEAD "fsafe-lock 1\nmode link\n"
#define BOOT "boot 9855fd0c-fc2b-4598-b046-de710a3c6c0a\n"
#define TOKEN "token 0123456789abcdef0123456789abcdef\n"
#define GOOD HEAD "pid 42\nstart 7\n" BOOT "host h\npidns 0\n" TOKEN "time 1\n"

static void bad_fields(void **state)
{
	(void)state;
	struct fsafe_lock_owner back;

	assert_int_equal(fsafe__owner_parse(GOOD, strlen(GOOD), &back), 0);
	expect_bad("");
	expect_bad("\n");
	expect_bad(GOOD "extra\n");
	expect_bad(GOOD "\n");
	expect_bad("fsafe-lock 01\n");
	expect_bad("fsafe-lock -1\n");
	expect_bad("fsafe-lock 0\n");
	expect_bad("FSAFE-LOCK 1\n");
	expect_bad(HEAD "pid 0\nstart 7\n" BOOT "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid -4\nstart 7\n" BOOT "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 2147483648\nstart 7\n" BOOT "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 4 \nstart 7\n" BOOT "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 42\nstart 18446744073709551616\n" BOOT "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 42\nstart 7\nboot 9855fd0c-fc2b-4598-b046-de710a3c6c0\n"
	           "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 42\nstart 7\nboot 9855fd0c+fc2b-4598-b046-de710a3c6c0a\n"
	           "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 42\nstart 7\n" BOOT "host \npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 42\nstart 7\n" BOOT "host a b\npidns 0\n" TOKEN "time 1\n");
	expect_bad(HEAD "pid 42\nstart 7\n" BOOT "host h\npidns 0\n"
	           "token 0123456789ABCDEF0123456789abcdef\ntime 1\n");
	expect_bad(HEAD "pid 42\nstart 7\n" BOOT "host h\npidns 0\n"
	           "token 0123456789abcdef0123456789abcde\ntime 1\n");
	expect_bad(HEAD "pid 42\nstart 7\n" BOOT "host h\npidns 0\n" TOKEN
	           "time 9223372036854775808\n");
	expect_bad(HEAD "start 7\npid 42\n" BOOT "host h\npidns 0\n" TOKEN "time 1\n");
	expect_bad("fsafe-lock 1\nmode flock\npid 42\nstart 7\n" BOOT
	           "host h\npidns 0\n" TOKEN "time 1\n");

	/* A NUL inside a field. */
	char nul[] = GOOD;
	nul[strlen(HEAD) + 4] = '\0';
	assert_int_equal(fsafe__owner_parse(nul, sizeof(nul) - 1, &back), -EBADMSG);

	/* A host of 256 characters. */
	char *big;
	char host[257];
	memset(host, 'x', 256);
	host[256] = '\0';
	assert_true(asprintf(&big, HEAD "pid 42\nstart 7\n" BOOT "host %s\npidns 0\n"
	                     TOKEN "time 1\n", host) > 0);
	expect_bad(big);
	free(big);
}

static void other_version(void **state)
{
	(void)state;
	struct fsafe_lock_owner back;
	const char *v2 = "fsafe-lock 2\nwhatever comes next\n";

	assert_int_equal(fsafe__owner_parse(v2, strlen(v2), &back),
	                 -EPROTONOSUPPORT);
	assert_int_equal(back.version, 2);
}

/* Huge and random inputs: refused, never read past, never crash. */
static void garbage(void **state)
{
	(void)state;
	struct fsafe_lock_owner back;
	size_t huge = 1 << 20;
	char *buf = malloc(huge);

	for (size_t i = 0; i < huge; i++)
		buf[i] = "fsafe-lock 1\n"[i % 13];
	assert_int_equal(fsafe__owner_parse(buf, huge, &back), -EBADMSG);
	assert_int_equal(fsafe__owner_parse(buf, FSAFE__OWNER_MAX + 1, &back),
	                 -EBADMSG);

	srand(1);
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t)rand() % 300;
		/* Start from a valid record, then damage some bytes. */
		size_t good = strlen(GOOD);
		memcpy(buf, GOOD, good);
		for (size_t i = good; i < len; i++)
			buf[i] = (char)rand();
		for (int k = rand() % 4; k >= 0; k--)
			buf[(size_t)rand() % (len > good ? len : good)] =
				(char)rand();
		int r = fsafe__owner_parse(buf, len, &back);
		assert_true(r == 0 || r == -EBADMSG || r == -EPROTONOSUPPORT);
	}
	free(buf);
}

static enum fsafe_lock_liveness judge(const struct fsafe_lock_owner *o)
{
	struct fsafe_lock_owner self = lu_self();

	return fsafe__owner_judge(o, &self);
}

static void verdicts(void **state)
{
	(void)state;
	struct fsafe_lock_owner o = lu_self();

	assert_int_equal(judge(&o), FSAFE_OWNER_ALIVE);

	struct fsafe_lock_owner other = o;
	strcpy(other.host, "some-other-host");
	assert_int_equal(judge(&other), FSAFE_OWNER_UNKNOWN);

	struct fsafe_lock_owner ns = o;
	ns.pidns = o.pidns ? o.pidns + 1 : 1;
	if (o.pidns)
		assert_int_equal(judge(&ns), FSAFE_OWNER_UNKNOWN);

	struct fsafe_lock_owner boot = o;
	boot.boot_id[0] = boot.boot_id[0] == 'a' ? 'b' : 'a';
	assert_int_equal(judge(&boot), FSAFE_OWNER_DEAD);

	struct fsafe_lock_owner dead = lu_dead_owner();
	assert_int_equal(judge(&dead), FSAFE_OWNER_DEAD);
}

/* A live pid with another start time is a reused pid: dead. */
static void pid_reuse(void **state)
{
	(void)state;
	struct fsafe_lock_owner o;
	pid_t pid = lu_sleeper(&o);

	assert_int_equal(judge(&o), FSAFE_OWNER_ALIVE);
	o.start += 1;
	assert_int_equal(judge(&o), FSAFE_OWNER_DEAD);
	o.start -= 2;
	assert_int_equal(judge(&o), FSAFE_OWNER_DEAD);
	lu_stop(pid);
}

/* A zombie holds nothing, even before its parent reaps it. */
static void zombie(void **state)
{
	(void)state;
	struct fsafe_lock_owner o;
	pid_t pid = lu_sleeper(&o);
	siginfo_t si;

	kill(pid, SIGKILL);
	assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(judge(&o), FSAFE_OWNER_DEAD);
	waitpid(pid, NULL, 0);
	assert_int_equal(judge(&o), FSAFE_OWNER_DEAD);
}

/* Find the first call named `name` in a traced run of judge(). */
static int call_index(const struct fsafe_lock_owner *o, const char *name)
{
	struct fault_plan count = { .kind = FAULT_NONE };
	struct fsafe_lock_owner self = lu_self();

	fault_install(&count);
	fsafe__owner_judge(o, &self);
	int n = fault_calls();
	fault_remove();
	for (int i = 1; i <= n; i++)
		if (strcmp(fault_call_name(i), name) == 0)
			return i;
	fail_msg("no %s call", name);
	return 0;
}

/* EPERM from kill() means alive: a pid we may not signal still lives. */
static void eperm_is_alive(void **state)
{
	(void)state;
	struct fsafe_lock_owner dead = lu_dead_owner();
	struct fsafe_lock_owner self = lu_self();
	struct fault_plan plan = { .kind = FAULT_ERRNO, .err = EPERM };

	plan.at = call_index(&dead, "kill");
	fault_install(&plan);
	enum fsafe_lock_liveness v = fsafe__owner_judge(&dead, &self);
	assert_true(fault_fired());
	fault_remove();
	assert_int_equal(v, FSAFE_OWNER_ALIVE);
	/* Without the injected EPERM the same record is dead. */
	assert_int_equal(judge(&dead), FSAFE_OWNER_DEAD);

	/* EPERM with a live pid and its own start time: alive too. */
	struct fsafe_lock_owner live;
	pid_t pid = lu_sleeper(&live);
	plan.at = call_index(&live, "kill");
	fault_install(&plan);
	v = fsafe__owner_judge(&live, &self);
	fault_remove();
	assert_int_equal(v, FSAFE_OWNER_ALIVE);
	lu_stop(pid);
}

/* The lock's private names are not atomic-write staging names. */
static void not_staging_names(void **state)
{
	(void)state;
	assert_false(fsafe_is_staging_name(
		".lock-0b3c5e7a-1d2f-4a6b-8c9d-0e1f2a3b4c5d.tmp"));
	assert_false(fsafe_is_staging_name(
		".lock-0b3c5e7a-1d2f-4a6b-8c9d-0e1f2a3b4c5d.broken"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(truncated),
		cmocka_unit_test(bad_fields),
		cmocka_unit_test(other_version),
		cmocka_unit_test(garbage),
		cmocka_unit_test(verdicts),
		cmocka_unit_test(pid_reuse),
		cmocka_unit_test(zombie),
		cmocka_unit_test(eperm_is_alive),
		cmocka_unit_test(not_staging_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
