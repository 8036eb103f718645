/*
 * fsafe lock: run a command while holding a lock (like flock(1), but the
 * lock survives its holder crashing: see fsafe/lock.h), or show who holds
 * one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_damage.h"
#include "cli_opt.h"
#include "cli_util.h"
#include "fsafe.h"

static const char usage[] =
	"usage: fsafe lock [--timeout DURATION | --no-wait] [--force] [--kernel]"
	" LOCKFILE -- COMMAND [ARGS...]\n"
	"       fsafe lock --status LOCKFILE\n"
	"       fsafe lock --check|--repair DIR\n";

static const char help[] =
	"Run COMMAND while holding the lock LOCKFILE; release it afterwards and\n"
	"exit with COMMAND's status. A holder that dies leaves the lock to be\n"
	"broken by the next taker, once its record proves the holder dead.\n"
	"\n"
	"  -t, --timeout DURATION  give up after DURATION (ms, s, m, h or d;\n"
	"                          no unit: seconds); default: wait for ever\n"
	"  -n, --no-wait           give up at once if the lock is held\n"
	"  -f, --force             also break a lock whose owner cannot be\n"
	"                          judged (another host): ends mutual exclusion\n"
	"                          if that owner is alive\n"
	"  -k, --kernel            kernel (OFD) lock on a file that stays:\n"
	"                          local filesystems only\n"
	"  -s, --status            print the owner record and whether its owner\n"
	"                          is alive, dead or unknown (another host)\n"
	"  -C, --check             report damage in DIR, a directory of lock\n"
	"                          files, one \"PATH: WHAT\" a line\n"
	"  -R, --repair            remove DIR's abandoned locks and dead\n"
	"                          leftovers, move damaged entries into\n"
	"                          DIR/quarantine/; never a live holder's lock\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: COMMAND's (128 + N if killed by signal N); 1 when the\n"
	"lock is held (the holder is named) or fails, or was broken while\n"
	"COMMAND ran; 2 usage error; 126/127 COMMAND could not be run.\n"
	"--status: 0 a record was shown, 1 not held or unreadable.\n"
	"--check: 0 clean, 1 damage found; --repair: 0 all dealt with, 1\n"
	"something left as it is; both 2 when they could not run.\n";

struct lock_args {
	struct fsafe_lock_opts opts;
	bool status, check, repair, have_timeout, no_wait;
	const char *path;
	char **command;
};

static int parse_operands(const struct cli_spec *spec,
                          const struct cli_args *ops, struct lock_args *a)
{
	if (!ops->argc)
		return cli_spec_error(spec, "LOCKFILE is missing");
	a->path = ops->argv[0];
	if (a->status || a->check || a->repair) {
		if (ops->argc != 1 || a->status + a->check + a->repair > 1)
			return cli_spec_error(spec, "--status, --check and "
			                      "--repair take only a path and "
			                      "exclude each other");
		return CLI_CONTINUE;
	}
	if (ops->argc == 1)
		return cli_spec_error(spec, "COMMAND is missing");
	a->command = ops->argv + 1;
	return CLI_CONTINUE;
}

static int parse_args(int argc, char **argv, struct lock_args *a)
{
	const struct cli_opt opts[] = {
		CLI_TIMEOUT('t', "timeout", &a->opts.timeout_ms,
		            &a->have_timeout),
		CLI_FLAG('n', "no-wait", &a->no_wait),
		CLI_BIT('f', "force", &a->opts.flags, FSAFE_LOCK_FORCE),
		CLI_BIT('k', "kernel", &a->opts.flags, FSAFE_LOCK_KERNEL),
		CLI_FLAG('s', "status", &a->status),
		CLI_FLAG('C', "check", &a->check),
		CLI_FLAG('R', "repair", &a->repair),
		CLI_HELP,
		CLI_END,
	};
	/* Options end at COMMAND (or "--"), so COMMAND keeps its own. */
	const struct cli_spec spec = { "lock", usage, help, opts, 1 };
	struct cli_args ops;
	int r = cli_parse(&spec, argc, argv, &ops);

	if (r != CLI_CONTINUE)
		return r;
	if (a->no_wait && a->have_timeout)
		return cli_spec_error(&spec, "--timeout and --no-wait exclude "
		                      "each other");
	/* 0 is "do not wait", as for every timeout argument. */
	if (a->no_wait || (a->have_timeout && !a->opts.timeout_ms))
		a->opts.flags |= FSAFE_LOCK_NO_WAIT;
	/* Longer than any wait: the library's default, no limit. */
	if (a->opts.timeout_ms == FSAFE_FOREVER)
		a->opts.timeout_ms = 0;
	return parse_operands(&spec, &ops, a);
}

static void format_time(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "@%lld", (long long)(ms / 1000));
}

static const char *verdict_name(enum fsafe_lock_liveness v)
{
	switch (v) {
	case FSAFE_OWNER_ALIVE: return "alive";
	case FSAFE_OWNER_DEAD: return "dead";
	default: return "unknown";
	}
}

/* Name the holder, for a lock we could not get. */
static int report_holder(const char *path, int why)
{
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	char when[64];
	int r = fsafe_lock_inspect(AT_FDCWD, path, &o);

	if (r == 0) {
		format_time(o.time_ms, when, sizeof(when));
		cli_warn("%s is held by pid %d (started %s) on host %s", path,
		         (int)o.pid, when, o.host);
	} else if (r == -EBADMSG) {
		cli_warn("%s is held, but its owner record is malformed "
		         "(it is broken once older than the grace period)", path);
	} else if (r == -EPROTONOSUPPORT) {
		cli_warn("%s is held by a newer fsafe (record version %u)", path,
		         o.version);
	} else {
		cli_warn("%s: %s", path, fsafe_strerror(why));
	}
	return CLI_FAIL;
}

/* What is at a lock's name that is no lock file, in words. */
static const char *not_a_lock(const char *path)
{
	const char *what = cli_file_type(path);

	return what && strcmp(what, "a regular file") ? what : NULL;
}

static int show_status(const char *path)
{
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	char when[64];
	int r = fsafe_lock_inspect(AT_FDCWD, path, &o);

	if (r == -ENOENT) {
		printf("%s: not held\n", path);
		cli_flush_stdout("lock");
		return CLI_FAIL;
	}
	const char *what = r < 0 ? not_a_lock(path) : NULL;
	if (what) {
		cli_warn("lock --status %s: %s is there, not a lock file", path,
		         what);
		return CLI_FAIL;
	}
	if (r < 0) {
		cli_warn("lock --status %s: %s", path, r == -EBADMSG
		         ? "malformed owner record" : fsafe_strerror(r));
		return CLI_FAIL;
	}
	format_time(o.time_ms, when, sizeof(when));
	printf("lock %s\nmode %s\npid %d\nstart %llu\nboot %s\nhost %s\n"
	       "pidns %llu\ntoken %s\ntime %lld (%s)\nowner %s\n",
	       path, o.kernel ? "kernel" : "link", (int)o.pid,
	       (unsigned long long)o.start, o.boot_id, o.host,
	       (unsigned long long)o.pidns, o.token, (long long)o.time_ms,
	       when, verdict_name(o.liveness));
	return cli_flush_stdout("lock") ? CLI_OK : CLI_FAIL;
}

static int check_dir(const char *dir, bool repair)
{
	struct cli_damage cd = { 0 };
	char label[PATH_MAX + 8];
	int r = repair ? fsafe_lock_repair(AT_FDCWD, dir,
	                                   cli_damage_printer(true), &cd)
	               : fsafe_lock_check(AT_FDCWD, dir,
	                                  cli_damage_printer(false), &cd);

	snprintf(label, sizeof(label), "lock %s", dir);
	return cli_damage_status(label, repair, r, &cd);
}

static volatile sig_atomic_t child_pid;

/* Termination requests go to COMMAND, so that we outlive it, release the
   lock and report its status. */
static void forward(int sig)
{
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
}

static void set_handlers(void (*fn)(int))
{
	static const int sigs[] = { SIGTERM, SIGHUP, SIGINT, SIGQUIT };
	struct sigaction sa = { .sa_handler = fn };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;
		sigaction(sigs[i], NULL, &old);
		if (old.sa_handler != SIG_IGN) /* an ignored one stays so */
			sigaction(sigs[i], &sa, NULL);
	}
}

static int run(char **command)
{
	int st;
	pid_t pid = fork();

	if (pid < 0) {
		cli_warn("lock: fork: %s", strerror(errno));
		return CLI_FAIL;
	}
	if (pid == 0) {
		set_handlers(SIG_DFL);
		execvp(command[0], command);
		cli_warn("lock: %s: %s", command[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	child_pid = pid;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return CLI_FAIL;
	child_pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int hold_and_run(struct lock_args *a)
{
	fsafe_lock *l;
	int r = fsafe_lock_acquire(AT_FDCWD, a->path, &a->opts, &l);

	if (r == -EWOULDBLOCK || r == -ETIMEDOUT)
		return report_holder(a->path, r);
	const char *what = r < 0 ? not_a_lock(a->path) : NULL;
	if (what) {
		cli_warn("lock %s: %s is there, not a lock file (fsafe lock "
		         "--repair on its directory moves it aside)", a->path,
		         what);
		return CLI_FAIL;
	}
	if (r < 0) {
		cli_warn("lock %s: %s", a->path, fsafe_strerror(r));
		return CLI_FAIL;
	}
	set_handlers(forward);
	int status = run(a->command);
	set_handlers(SIG_DFL);
	r = fsafe_lock_release(l);
	if (r == -ESTALE) {
		cli_warn("%s was broken while %s ran: mutual exclusion may have "
		         "been lost", a->path, a->command[0]);
		return status ? status : CLI_FAIL;
	}
	if (r < 0)
		cli_warn("lock %s: release: %s", a->path, fsafe_strerror(r));
	return status;
}

int cmd_lock(void *ctx, int argc, char **argv)
{
	struct lock_args a = { .opts = FSAFE_LOCK_OPTS_INIT };
	int r = parse_args(argc, argv, &a);

	(void)ctx;
	if (r != CLI_CONTINUE)
		return r;
	if (a.check || a.repair)
		return check_dir(a.path, a.repair);
	return a.status ? show_status(a.path) : hold_and_run(&a);
}
