/*
 * Layer A: real power cuts.
 *
 * usage: test_power_cut ext4|ext4-noauto|xfs
 *
 * A small image of the filesystem is made once and loop-mounted in a
 * private mount namespace (so no mount outlives this process, whatever
 * kills it; the loop device is attached with autoclear and goes with the
 * last descriptor). For each workload, each table call N of a full run
 * (the last "call" is a marker made after the workload returned, so one
 * cut follows every acknowledged write), and each repetition:
 *
 *   parent: rebuild the OLD state in <mnt>/case and syncfs it
 *   child:  open the mount, install FAULT_HOOK at call N, run the workload;
 *           the hook calls ioctl(FS_IOC_SHUTDOWN, FS_GOING_DOWN_NOLOGFLUSH)
 *           (whatever is not on the device is lost, the journal included)
 *           and SIGKILLs the child before call N runs (a workload may ask
 *           for a journal commit, an fsync of the case root, first)
 *   parent: unmount, mount again (journal recovery: power on), then judge:
 *           leftovers are staging names, a sweep with age 0 removes them,
 *           and the workload's invariant holds (byte equality).
 *
 * Then the same over the test build's broken variants (no directory sync,
 * no data sync, no O_EXCL), which must each produce a violation.
 *
 * Root and loop devices are needed; without them every test says SKIP and
 * why (FSAFE_POWER_REQUIRED=1 makes that a failure, for CI).
 * FSAFE_POWER_REPEATS overrides the repetitions (default 3).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "power.h"
#include "sys.h"

#ifndef FS_IOC_SHUTDOWN
#define FS_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#endif
#ifndef FS_GOING_DOWN_NOLOGFLUSH
#define FS_GOING_DOWN_NOLOGFLUSH 0x2
#endif

struct fs {
	const char *name;
	const char *type;
	const char *mkfs;     /* command; the image path is appended */
	unsigned mib;         /* image size: xfsprogs 6 refuses < 300 MiB */
	const char *options;  /* mount data */
};

/*
 * ext4 twice: with its defaults (data=ordered, auto_da_alloc), and without
 * auto_da_alloc, the heuristic that starts writeback of a file renamed over
 * another and so can hide a missing data sync in the replace workloads.
 */
static const struct fs filesystems[] = {
	{ "ext4", "ext4", "mkfs.ext4 -q -F", 64, "" },
	{ "ext4-noauto", "ext4", "mkfs.ext4 -q -F", 64, "noauto_da_alloc" },
	{ "xfs", "xfs", "mkfs.xfs -q -f", 300, "" },
};

static struct {
	const struct fs *fs;
	bool ready;
	char why[256];       /* reason to skip */
	char tmp[64];        /* our temp directory */
	char img[96], mnt[96], dev[32];
	int loopfd;
	bool mounted;
	int repeats;
} env = { .loopfd = -1 };

/* Shared with the children: what returned before the cut, and the
   outcome of the hook. */
struct shared {
	struct pw_progress prog;
	int calls;                   /* table calls of an uncut run */
	const char *name[512];       /* their names (static strings) */
	int shutdown_errno;          /* nonzero: the ioctl failed */
};
static struct shared *sh;
static int mountfd = -1; /* the child's descriptor on the mount root */
static int casefd = -1;  /* and on the case root, when it commits first */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool skip_because(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(env.why, sizeof(env.why), fmt, ap);
	va_end(ap);
	return false;
}

/* ---- the filesystem ------------------------------------------------------ */

static int loop_attach(void)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	int img = open(env.img, O_RDWR | O_CLOEXEC);
	int fd = -1;

	if (ctl < 0 || img < 0)
		goto out;
	/* Another process may take the free device between our two calls. */
	for (int tries = 0; tries < 32 && fd < 0; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			break;
		snprintf(env.dev, sizeof(env.dev), "/dev/loop%d", n);
		if (access(env.dev, F_OK) < 0)
			mknod(env.dev, S_IFBLK | 0660, makedev(7, (unsigned)n));
		if ((fd = open(env.dev, O_RDWR | O_CLOEXEC)) < 0)
			break;
		struct loop_config cfg = { .fd = (unsigned)img };
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
			break;
		if (errno == EINVAL || errno == ENOTTY) {
			/* Before Linux 5.8: the two-step way. */
			struct loop_info64 info = { .lo_flags = LO_FLAGS_AUTOCLEAR };
			if (ioctl(fd, LOOP_SET_FD, img) == 0 &&
			    ioctl(fd, LOOP_SET_STATUS64, &info) == 0)
				break;
		}
		int e = errno;
		close(fd);
		fd = -1;
		if (e != EBUSY)
			break;
	}
out:
	if (ctl >= 0)
		close(ctl);
	if (img >= 0)
		close(img);
	return fd;
}

static bool do_mount(void)
{
	if (mount(env.dev, env.mnt, env.fs->type, 0, env.fs->options) < 0)
		return false;
	env.mounted = true;
	return true;
}

static void do_umount(void)
{
	if (!env.mounted)
		return;
	if (umount2(env.mnt, 0) < 0) {
		fprintf(stderr, "power: umount %s: %s; detaching lazily\n",
		        env.mnt, strerror(errno));
		umount2(env.mnt, MNT_DETACH);
	}
	env.mounted = false;
}

static bool fs_up(const struct fs *fs)
{
	char cmd[256];

	env.fs = fs;
	if (geteuid() != 0)
		return skip_because("not root (loop mounts need root)");
	if (unshare(CLONE_NEWNS) < 0)
		return skip_because("unshare(CLONE_NEWNS): %s", strerror(errno));
	/* Our mounts must not propagate to the host, nor outlive us. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return skip_because("making / private: %s", strerror(errno));

	const char *t = getenv("TMPDIR");
	snprintf(env.tmp, sizeof(env.tmp), "%s/fsafe-power-XXXXXX",
	         t && strlen(t) < 24 ? t : "/tmp");
	if (!mkdtemp(env.tmp))
		return skip_because("mkdtemp: %s", strerror(errno));
	snprintf(env.img, sizeof(env.img), "%s/image", env.tmp);
	snprintf(env.mnt, sizeof(env.mnt), "%s/mnt", env.tmp);
	if (mkdir(env.mnt, 0755) < 0)
		return skip_because("mkdir: %s", strerror(errno));

	int fd = open(env.img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)fs->mib << 20) < 0)
		return skip_because("image: %s", strerror(errno));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", fs->mkfs, env.img);
	int rc = system(cmd);
	if (rc != 0)
		return skip_because("'%s' failed (status %d): is %s installed?",
		                    cmd, rc,
		                    strcmp(fs->type, "xfs") ? "e2fsprogs"
		                                            : "xfsprogs");
	if ((env.loopfd = loop_attach()) < 0)
		return skip_because("no loop device: %s", strerror(errno));
	if (!do_mount())
		return skip_because("mount %s (%s) on %s: %s", env.dev,
		                    fs->type, env.mnt, strerror(errno));
	return true;
}

static void fs_down(void)
{
	do_umount();
	if (env.loopfd >= 0)
		close(env.loopfd); /* autoclear detaches the device */
	env.loopfd = -1;
	if (env.img[0])
		unlink(env.img);
	if (env.mnt[0])
		rmdir(env.mnt);
	if (env.tmp[0])
		rmdir(env.tmp);
}

static int group_setup(void **state)
{
	(void)state;
	const char *r = getenv("FSAFE_POWER_REPEATS");
	env.repeats = r && atoi(r) > 0 ? atoi(r) : 3;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return -1;
	pw_init();
	env.ready = fs_up(env.fs);
	if (!env.ready) {
		print_message("SKIP: power cuts on %s: %s\n", env.fs->name,
		              env.why);
		fs_down();
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	fs_down();
	return 0;
}

/* ---- one cut ------------------------------------------------------------- */

static void cut_power(int call, const char *name)
{
	uint32_t how = FS_GOING_DOWN_NOLOGFLUSH;

	(void)call, (void)name;
	if (casefd >= 0 && fsync(casefd) < 0)
		sh->shutdown_errno = errno;
	if (ioctl(mountfd, FS_IOC_SHUTDOWN, &how) < 0)
		sh->shutdown_errno = errno ? errno : EIO;
	raise(SIGKILL);
}

static int open_case(void)
{
	int fd = open(env.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int c = openat(fd, "case", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || c < 0)
		fail_msg("open %s/case: %s", env.mnt, strerror(errno));
	close(fd);
	return c;
}

/* The OLD state, durable (the cut must not take it away). */
static void prepare(const struct pw_workload *w)
{
	int m = open(env.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (m < 0)
		fail_msg("open %s: %s", env.mnt, strerror(errno));
	pw_rmtree_at(m, "case");
	if (mkdirat(m, "case", 0755) < 0)
		fail_msg("mkdir case: %s", strerror(errno));
	close(m);
	int c = open_case();
	if (w->setup_old)
		w->setup_old(c);
	if (syncfs(c) < 0)
		fail_msg("syncfs: %s", strerror(errno));
	close(c);
}

/* Run the workload in a child cut before call `at` (0: not cut, count). */
static int run_child(const struct pw_workload *w, int at)
{
	int status;

	memset(sh, 0, sizeof(*sh));
	pid_t pid = fork();
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		struct stat st;
		mountfd = open(env.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int root = openat(mountfd, "case", O_RDONLY | O_DIRECTORY);
		if (mountfd < 0 || root < 0)
			_exit(2);
		if (w->commit_before_cut)
			casefd = root;
		pw_det_reset();
		pw_calls_now = fault_calls;
		fault_set_real(&pw_sys_det);
		fault_install(&(struct fault_plan){
			.at = at, .kind = at ? FAULT_HOOK : FAULT_NONE,
			.hook = cut_power });
		w->run(root, &sh->prog);
		/* The marker: one more table call, so the last cut point
		   lies after the workload returned. */
		SYS->fstat(root, &st);
		sh->calls = fault_calls();
		for (int i = 1; i <= sh->calls && i < 512; i++)
			sh->name[i] = fault_call_name(i);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid)
		fail_msg("waitpid: %s", strerror(errno));
	return status;
}

struct tally {
	int cuts, violations;
	char first[3][600];
};

/* Every cut point of one workload, `repeats` times each. */
static void cut_every_call(const struct pw_workload *w, int repeats,
                           struct tally *t)
{
	char why[512];
	double t0 = now_s();

	memset(t, 0, sizeof(*t));
	prepare(w);
	int status = run_child(w, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s: uncut run failed, status %#x", w->name, status);
	int calls = sh->calls;
	const char *names[512];
	memcpy(names, sh->name, sizeof(names));
	/* The uncut run must hold the invariants too (no power cut at all). */
	int c = open_case();
	const char *bad = pw_judge(w, c, &sh->prog, why, sizeof(why));
	close(c);
	if (bad) {
		snprintf(t->first[t->violations++], sizeof(t->first[0]),
		         "uncut run: %s", bad);
	}

	for (int n = 1; n <= calls; n++) {
		for (int rep = 0; rep < repeats; rep++) {
			prepare(w);
			status = run_child(w, n);
			if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
				fail_msg("%s: cut at call %d (%s): child not "
				         "killed (status %#x; it made %d calls, "
				         "the uncut run %d)", w->name, n,
				         n < 512 && names[n] ? names[n] : "?",
				         status, sh->calls, calls);
			if (sh->shutdown_errno)
				fail_msg("FS_IOC_SHUTDOWN on %s: %s",
				         env.fs->name,
				         strerror(sh->shutdown_errno));
			do_umount();
			if (!do_mount())
				fail_msg("remount after the cut: %s",
				         strerror(errno));
			c = open_case();
			bad = pw_judge(w, c, &sh->prog, why, sizeof(why));
			close(c);
			t->cuts++;
			if (bad) {
				if (t->violations < 3)
					snprintf(t->first[t->violations],
					         sizeof(t->first[0]),
					         "cut before call %d/%d (%s%s), "
					         "run %d: %s", n, calls,
					         names[n],
					         n == calls ? ": after return"
					                    : "",
					         rep + 1, bad);
				t->violations++;
			}
		}
	}
	print_message("[ %-11s %-38s ] %2d cut points x %d: %3d violations "
	              "(%.1f s)\n", env.fs->name, w->name, calls, repeats,
	              t->violations, now_s() - t0);
	for (int i = 0; i < t->violations && i < 3; i++)
		print_message("    %s\n", t->first[i]);
}

/* ---- tests --------------------------------------------------------------- */

static void require_fs(void)
{
	if (!env.ready && getenv("FSAFE_POWER_REQUIRED"))
		fail_msg("power cuts required but impossible: %s", env.why);
	if (!env.ready) {
		print_message("SKIP: %s\n", env.why);
		skip();
	}
	/* An earlier test may have failed anywhere in a cut: start from a
	   fresh mount. */
	do_umount();
	if (!do_mount())
		fail_msg("mount %s: %s", env.dev, strerror(errno));
}

static void cut_workload(void **state)
{
	const struct pw_workload *w = *state;
	struct tally t;

	require_fs();
	fsafe__test_break = 0;
	cut_every_call(w, env.repeats, &t);
	if (t.violations)
		fail_msg("%s on %s: %d of %d power cuts broke an invariant; "
		         "first: %s", w->name, env.fs->name, t.violations,
		         t.cuts, t.first[0]);
}

static const struct {
	unsigned bit;
	const char *name;
} breaks[] = {
	{ FSAFE__BREAK_DIR_SYNC, "no directory sync" },
	{ FSAFE__BREAK_DATA_SYNC, "no data sync" },
	{ FSAFE__BREAK_EXCL, "no O_EXCL" },
};

/* A harness that cannot see a missing safety step is itself broken. */
static void cut_broken(void **state)
{
	const unsigned *bit = *state;
	int total = 0, cuts = 0;
	struct tally t;

	require_fs();
	fsafe__test_break = *bit;
	for (size_t i = 0; i < pw_workload_count(); i++) {
		const struct pw_workload *w = pw_workload_at(i);
		if (!(w->catches & *bit))
			continue;
		cut_every_call(w, env.repeats, &t);
		total += t.violations;
		cuts += t.cuts;
	}
	fsafe__test_break = 0;
	print_message("[ %-11s broken: %-30s ] %d violations in %d cuts\n",
	              env.fs->name,
	              *bit == FSAFE__BREAK_DIR_SYNC ? breaks[0].name
	              : *bit == FSAFE__BREAK_DATA_SYNC ? breaks[1].name
	                                               : breaks[2].name,
	              total, cuts);
	if (total == 0)
		fail_msg("power cuts on %s found no violation with a safety "
		         "step removed: the harness cannot fail", env.fs->name);
}

int main(int argc, char **argv)
{
	enum { MAX = 64 };
	struct CMUnitTest tests[MAX];
	static char names[MAX][128];
	static unsigned bits[3];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(filesystems) / sizeof(filesystems[0]); i++)
		if (argc > 1 && strcmp(argv[1], filesystems[i].name) == 0)
			env.fs = &filesystems[i];
	if (!env.fs) {
		fprintf(stderr, "usage: %s ext4|ext4-noauto|xfs\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < pw_workload_count() && n < MAX; i++, n++) {
		snprintf(names[n], sizeof(names[n]), "cut %s: %s",
		         env.fs->name, pw_workload_at(i)->name);
		tests[n] = (struct CMUnitTest){
			.name = names[n], .test_func = cut_workload,
			.initial_state = (void *)pw_workload_at(i) };
	}
	for (size_t i = 0; i < 3 && n < MAX; i++, n++) {
		bits[i] = breaks[i].bit;
		snprintf(names[n], sizeof(names[n]), "cut %s, broken: %s",
		         env.fs->name, breaks[i].name);
		tests[n] = (struct CMUnitTest){
			.name = names[n], .test_func = cut_broken,
			.initial_state = &bits[i] };
	}
	return _cmocka_run_group_tests("power_cut", tests, n, group_setup,
	                               group_teardown);
}
