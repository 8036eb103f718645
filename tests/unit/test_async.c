/* Asynchronous writes: completion fd, reap, wait, cancel, shutdown. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "fsafe.h"
#include "testutil.h"

#define fx tu_fx
#define setup tu_fx_setup
#define teardown tu_fx_teardown

#define N 40

static sem_t entered, release;
static void hold_worker(int call, const char *name);

static void completions_arrive_on_the_fd(void **state)
{
	struct fx *f = *state;
	static char bodies[N][32];
	fsafe_async *a;
	uint64_t ids[N];

	assert_int_equal(fsafe_async_new(NULL, &a), 0);
	int fd = fsafe_async_fd(a);
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%02d", i);
		snprintf(bodies[i], sizeof(bodies[i]), "body %d", i);
		assert_int_equal(fsafe_async_submit(a, f->dirfd, name, bodies[i],
		                                    strlen(bodies[i]), NULL,
		                                    bodies[i], &ids[i]),
		                 0);
	}
	int seen = 0;
	while (seen < N) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		assert_int_equal(poll(&p, 1, 30000), 1);
		struct fsafe_async_completion c[8];
		int n = fsafe_async_reap(a, c, 8);
		assert_true(n >= 0);
		for (int k = 0; k < n; k++) {
			assert_int_equal(c[k].result, 0);
			int i = (int)(c[k].id - ids[0]);
			assert_ptr_equal(c[k].user, bodies[i]);
		}
		seen += n;
	}
	/* Everything reaped: the fd is quiet and wait says nothing is left. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_int_equal(fsafe_async_wait(a, 0), -ENOENT);
	fsafe_async_free(a);
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%02d", i);
		assert_true(tu_equals(f->dir, name, bodies[i], strlen(bodies[i])));
	}
	assert_int_equal(tu_count_staging(f->dir), 0);
	assert_int_equal(fault_open_fds(), f->fds_before);
}

/* More writes queued than one group takes: every one is committed once,
   in groups of at most max_group. */
static void groups_split_a_long_queue(void **state)
{
	struct fx *f = *state;
	struct fsafe_async_opts ao = FSAFE_ASYNC_OPTS_INIT;
	static char bodies[N][32];
	fsafe_async *a;

	ao.max_group = 3;
	assert_int_equal(fsafe_async_new(&ao, &a), 0);
	sem_init(&entered, 0, 0);
	sem_init(&release, 0, 0);
	/* Hold the worker in its first group so the rest queue up. */
	fault_install(&(struct fault_plan){
		.kind = FAULT_HOOK, .at = 1, .hook = hold_worker });
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "g%02d", i);
		snprintf(bodies[i], sizeof(bodies[i]), "group body %d", i);
		assert_int_equal(fsafe_async_submit(a, f->dirfd, name, bodies[i],
		                                    strlen(bodies[i]), NULL, NULL,
		                                    NULL),
		                 0);
		if (i == 0)
			while (sem_wait(&entered) < 0)
				;
	}
	sem_post(&release);
	int done = 0;
	while (done < N) {
		struct fsafe_async_completion c[N];
		assert_int_equal(fsafe_async_wait(a, 30000), 0);
		int n = fsafe_async_reap(a, c, N);
		for (int k = 0; k < n; k++)
			assert_int_equal(c[k].result, 0);
		done += n;
	}
	fault_remove();
	assert_int_equal(fsafe_async_wait(a, 0), -ENOENT);
	fsafe_async_free(a);
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "g%02d", i);
		assert_true(tu_equals(f->dir, name, bodies[i], strlen(bodies[i])));
	}
	sem_destroy(&entered);
	sem_destroy(&release);
}

static void blocking_wait_and_errors(void **state)
{
	struct fx *f = *state;
	struct fsafe_write_opts co = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_async_completion c;
	fsafe_async *a;

	tu_put(f->dir, "taken", "old", 3);
	co.flags = FSAFE_CREATE_ONLY;
	assert_int_equal(fsafe_async_new(NULL, &a), 0);
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "taken", "new", 3, &co,
	                                    NULL, NULL),
	                 0);
	assert_int_equal(fsafe_async_wait(a, FSAFE_FOREVER), 0);
	assert_int_equal(fsafe_async_reap(a, &c, 1), 1);
	assert_int_equal(c.result, -EEXIST);
	assert_true(tu_equals(f->dir, "taken", "old", 3));
	/* Bad options are refused at submit. */
	co.flags = 1u << 30;
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "x", "x", 1, &co, NULL,
	                                    NULL),
	                 -EINVAL);
	fsafe_async_free(a);
}

/* Hold the worker inside its first system call until released, so that
   a later submission is certainly still queued when it is cancelled. */
static void hold_worker(int call, const char *name)
{
	(void)call, (void)name;
	sem_post(&entered);
	while (sem_wait(&release) < 0)
		;
}

static void cancel_only_touches_queued_writes(void **state)
{
	struct fx *f = *state;
	fsafe_async *a;
	uint64_t first, second;

	sem_init(&entered, 0, 0);
	sem_init(&release, 0, 0);
	assert_int_equal(fsafe_async_new(NULL, &a), 0);
	fault_install(&(struct fault_plan){
		.kind = FAULT_HOOK, .at = 1, .hook = hold_worker });
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "first", "1", 1, NULL,
	                                    NULL, &first),
	                 0);
	while (sem_wait(&entered) < 0)
		;
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "second", "2", 1, NULL,
	                                    NULL, &second),
	                 0);
	assert_int_equal(fsafe_async_cancel(a, second), 0);
	assert_int_equal(fsafe_async_cancel(a, first), -EBUSY);
	assert_int_equal(fsafe_async_cancel(a, 987654), -ENOENT);
	sem_post(&release);

	struct fsafe_async_completion c[2];
	int got = 0;
	while (got < 2) {
		assert_int_equal(fsafe_async_wait(a, 30000), 0);
		got += fsafe_async_reap(a, c + got, (size_t)(2 - got));
	}
	fault_remove();
	for (int i = 0; i < 2; i++)
		assert_int_equal(c[i].result, c[i].id == first ? 0 : -ECANCELED);
	assert_int_equal(fsafe_async_cancel(a, first), -ENOENT);
	fsafe_async_free(a);
	assert_true(tu_equals(f->dir, "first", "1", 1));
	assert_int_equal(tu_count_entries(f->dir), 1); /* "second" untouched */
	sem_destroy(&entered);
	sem_destroy(&release);
}

static void *free_in_thread(void *a)
{
	fsafe_async_free(a);
	return NULL;
}

static void free_cancels_queued_writes(void **state)
{
	struct fx *f = *state;
	fsafe_async *a;
	pthread_t t;

	sem_init(&entered, 0, 0);
	sem_init(&release, 0, 0);
	assert_int_equal(fsafe_async_new(NULL, &a), 0);
	fault_install(&(struct fault_plan){
		.kind = FAULT_HOOK, .at = 1, .hook = hold_worker });
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "running", "r", 1, NULL,
	                                    NULL, NULL),
	                 0);
	while (sem_wait(&entered) < 0)
		;
	for (int i = 0; i < 5; i++)
		assert_int_equal(fsafe_async_submit(a, f->dirfd, "queued", "q", 1,
		                                    NULL, NULL, NULL),
		                 0);
	/* free() cancels the queued writes (announced on the fd) before it
	   waits for the running one, which it finishes. */
	int fd = fsafe_async_fd(a);
	assert_int_equal(pthread_create(&t, NULL, free_in_thread, a), 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 30000), 1);
	sem_post(&release);
	pthread_join(t, NULL);
	fault_remove();
	assert_true(tu_equals(f->dir, "running", "r", 1));
	assert_int_equal(tu_count_entries(f->dir), 1);
	assert_int_equal(fault_open_fds(), f->fds_before);
	fsafe_async_free(NULL);
	sem_destroy(&entered);
	sem_destroy(&release);
}

/* Every flag batch.h names applies to an async engine; a wait of 0 only
   looks (-ETIMEDOUT at once while a write is in progress). */
static void batch_flags_and_a_wait_of_zero(void **state)
{
	struct fx *f = *state;
	struct fsafe_async_opts ao = FSAFE_ASYNC_OPTS_INIT;
	struct fsafe_async_completion c;
	struct timespec t0, t1;
	fsafe_async *a;

	ao.flags = FSAFE_BATCH_NO_URING | FSAFE_BATCH_NO_SYNCFS;
	assert_int_equal(fsafe_async_new(&ao, &a), 0);
	sem_init(&entered, 0, 0);
	sem_init(&release, 0, 0);
	fault_install(&(struct fault_plan){
		.kind = FAULT_HOOK, .at = 1, .hook = hold_worker });
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "z", "zz", 2, NULL,
	                                    NULL, NULL),
	                 0);
	while (sem_wait(&entered) < 0)
		;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fsafe_async_wait(a, 0), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 2);
	sem_post(&release);
	assert_int_equal(fsafe_async_wait(a, FSAFE_FOREVER), 0);
	fault_remove();
	assert_int_equal(fsafe_async_reap(a, &c, 1), 1);
	assert_int_equal(c.result, 0);
	fsafe_async_free(a);
	assert_true(tu_equals(f->dir, "z", "zz", 2));
	sem_destroy(&entered);
	sem_destroy(&release);
}

/* if_unchanged holds for an async write as for any other: a file changed
   after its token was taken is left alone (FSAFE_ECONFLICT). The token string is
   the caller's only during the submit. */
static void if_unchanged_is_kept(void **state)
{
	struct fx *f = *state;
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_async_completion c;
	char tok[FSAFE_TOKEN_LEN];
	fsafe_async *a;

	tu_put(f->dir, "t", "v1", 2);
	assert_int_equal(fsafe_token_get(f->dirfd, "t", 0, tok), 0);
	tu_put(f->dir, "t", "v2 by another", 13);
	o.if_unchanged = tok;
	assert_int_equal(fsafe_async_new(NULL, &a), 0);
	assert_int_equal(fsafe_async_submit(a, f->dirfd, "t", "mine", 4, &o,
	                                    NULL, NULL),
	                 0);
	memset(tok, 'x', sizeof(tok) - 1); /* the caller's string is gone */
	assert_int_equal(fsafe_async_wait(a, FSAFE_FOREVER), 0);
	assert_int_equal(fsafe_async_reap(a, &c, 1), 1);
	assert_int_equal(c.result, FSAFE_ECONFLICT);
	fsafe_async_free(a);
	assert_true(tu_equals(f->dir, "t", "v2 by another", 13));
}

/* The engine's options' error: its creation and a submit that fail fill
   it. */
static void async_error_detail(void **state)
{
	struct fx *f = *state;
	struct fsafe_async_opts ao = FSAFE_ASYNC_OPTS_INIT;
	struct fsafe_error e = { 0 };
	fsafe_async *a;

	ao.error = &e;
	ao.flags = 1u << 20;
	assert_int_equal(fsafe_async_new(&ao, &a), -EINVAL);
	assert_int_equal(e.code, -EINVAL);
	assert_string_equal(e.step, "options");
	ao.flags = 0;
	memset(&e, 0, sizeof(e));
	assert_int_equal(fsafe_async_new(&ao, &a), 0);
	assert_int_equal(fsafe_async_submit(a, f->dirfd, NULL, "x", 1, NULL,
	                                    NULL, NULL),
	                 -EINVAL);
	assert_int_equal(e.code, -EINVAL);
	assert_string_equal(e.step, "options");
	fsafe_async_free(a);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(completions_arrive_on_the_fd),
		T(groups_split_a_long_queue),
		T(blocking_wait_and_errors),
		T(cancel_only_touches_queued_writes),
		T(free_cancels_queued_writes),
		T(batch_flags_and_a_wait_of_zero),
		T(if_unchanged_is_kept),
		T(async_error_detail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
