#define _GNU_SOURCE
#include "lockutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

struct fsafe_lock_owner lu_self(void)
{
	struct fsafe_lock_owner o;

	if (fsafe__owner_self(&o, false) != 0)
		abort();
	return o;
}

void lu_forge(const char *dir, const char *name,
              const struct fsafe_lock_owner *o)
{
	char buf[FSAFE__OWNER_MAX], *path;
	int n = fsafe__owner_format(o, buf, sizeof(buf));

	if (n < 0 || asprintf(&path, "%s/%s", dir, name) < 0)
		abort();
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd) != 0)
		abort();
	free(path);
}

static struct fsafe_lock_owner owner_of(pid_t pid)
{
	struct fsafe_lock_owner o = lu_self();
	char state;

	o.pid = pid;
	if (fsafe__proc_stat(pid, &o.start, &state) != 0)
		abort();
	return o;
}

struct fsafe_lock_owner lu_dead_owner(void)
{
	int p[2];
	char c;

	if (pipe(p) != 0)
		abort();
	pid_t pid = fork();
	if (pid == 0) {
		close(p[1]);
		(void)!read(p[0], &c, 1);
		_exit(0);
	}
	close(p[0]);
	struct fsafe_lock_owner o = owner_of(pid);
	close(p[1]);
	waitpid(pid, NULL, 0);
	return o;
}

pid_t lu_sleeper(struct fsafe_lock_owner *o)
{
	pid_t pid = fork();

	if (pid == 0) {
		/* Never outlive a test that failed before lu_stop(). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	if (o) {
		/* Its start time is fixed from fork(): readable at once. */
		*o = owner_of(pid);
	}
	return pid;
}

void lu_stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

pid_t lu_holder(int (*take)(void *arg, fsafe_lock **l), void *arg)
{
	int p[2];
	char c;

	if (pipe(p) != 0)
		abort();
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		fsafe_lock *l;
		if (take(arg, &l) != 0)
			_exit(1);
		(void)!write(p[1], "x", 1);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	/* Only the child's write end left open: its exit ends the read. */
	close(p[1]);
	ssize_t got = read(p[0], &c, 1);
	close(p[0]);
	if (got != 1) {
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

uint64_t lu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool is_private(const char *name)
{
	return strncmp(name, ".lock-", 6) == 0;
}

int lu_count_private(const char *dir)
{
	return tu_count_matching(dir, is_private);
}

int lu_open_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		abort();
	return fd;
}
