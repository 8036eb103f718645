/*
 * Layer A: real power cuts.
 *
 * usage: test_power_cut <filesystem>   (see `filesystems` below)
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
 * Two filesystems cannot be shut down that way: this kernel's btrfs
 * refuses FS_IOC_SHUTDOWN (ENOTTY) and ext2 has none. They are cut by
 * copying the loop device's backing image instead (copy_image below), and
 * the copy becomes the filesystem that is mounted and judged. overlayfs
 * (the filesystem of containers) runs the workloads in the merged
 * directory over lower and upper directories on one ext4 or xfs image,
 * with the case starting in the lower layer (so the first change is a
 * copy-up) or in the upper one; the cut shuts the upper filesystem down.
 *
 * Root and loop devices are needed; without them every test says SKIP and
 * why (FSAFE_POWER_REQUIRED=1 makes that a failure, for CI).
 * FSAFE_POWER_REPEATS overrides the repetitions (default 3). On the
 * filesystems added after ext4 and xfs, only a fixed subset of the
 * workloads runs by default (ci_subset, to keep CI's time); FSAFE_POWER_FULL=1
 * runs all of them. Each workload's result is also printed as a line
 * "power-table|fs|ok or the break|module|workload|cut points|repeats|
 * violations|lost renames|seconds", which tests/power/table.sh turns into
 * the table of docs/DESIGN.md.
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

enum cut { CUT_SHUTDOWN, CUT_COPY };
enum layer { NO_OVERLAY, OVL_LOWER, OVL_UPPER };

struct fs {
	const char *name;
	const char *type;
	const char *mkfs;     /* command; the image path is appended */
	unsigned mib;         /* image size: xfsprogs 6 refuses < 300 MiB,
	                         btrfs-progs 6 < 110 MiB */
	const char *options;  /* mount data */
	enum cut cut;
	/* Run on the image before each mount after a cut: the boot-time
	   check of a filesystem without a journal. */
	const char *fsck;
	/* Run on the device when the mount after a cut fails, as a boot
	   would before giving up (NULL: the failure fails the test). */
	const char *repair;
	/* Under overlayfs, with the case in this layer at the start. */
	enum layer overlay;
	/* Workloads whose violations are recorded, not failed: the limits
	   the documentation states for this filesystem from these results.
	   Any other violation fails, as on ext4. */
	const char *const *limits;
	const char *package; /* that provides mkfs */
};

/*
 * ext4 twice: with its defaults (data=ordered, auto_da_alloc), and without
 * auto_da_alloc, the heuristic that starts writeback of a file renamed over
 * another and so can hide a missing data sync in the replace workloads.
 */
/* Without a journal a directory block can reach the disk before the new
   inode it names; e2fsck then drops the name (fsafe.h, FSAFE_NO_SYNC). A
   symbolic link's inode cannot be synced at all (no descriptor of a link
   can be), so fsafe_symlinkat meets the same on ext2 (docs/DESIGN.md). */
static const char *const ext2_limits[] = {
	"replace, FSAFE_NO_SYNC (atomic only)",
	"symbolic link replace (fsafe_symlinkat)", NULL,
};

#define E2FSCK "e2fsck -fy"

static const struct fs filesystems[] = {
	{ "ext4", "ext4", "mkfs.ext4 -q -F", 64, "", .repair = E2FSCK,
	  .package = "e2fsprogs" },
	{ "ext4-noauto", "ext4", "mkfs.ext4 -q -F", 64, "noauto_da_alloc",
	  .repair = E2FSCK, .package = "e2fsprogs" },
	{ "xfs", "xfs", "mkfs.xfs -q -f", 300, "", .package = "xfsprogs" },
	{ "btrfs", "btrfs", "mkfs.btrfs -q -f", 128, "", .cut = CUT_COPY,
	  .package = "btrfs-progs" },
	{ "ext2", "ext2", "mkfs.ext2 -q -F", 64, "", .cut = CUT_COPY,
	  .fsck = E2FSCK, .limits = ext2_limits, .package = "e2fsprogs" },
	{ "overlay-ext4-lower", "ext4", "mkfs.ext4 -q -F", 64, "",
	  .repair = E2FSCK, .overlay = OVL_LOWER,
	  .package = "e2fsprogs" },
	{ "overlay-ext4-upper", "ext4", "mkfs.ext4 -q -F", 64, "",
	  .repair = E2FSCK, .overlay = OVL_UPPER,
	  .package = "e2fsprogs" },
	{ "overlay-xfs-lower", "xfs", "mkfs.xfs -q -f", 300, "",
	  .overlay = OVL_LOWER, .package = "xfsprogs" },
	{ "overlay-xfs-upper", "xfs", "mkfs.xfs -q -f", 300, "",
	  .overlay = OVL_UPPER, .package = "xfsprogs" },
};

/* What CI runs on the filesystems added after ext4 and xfs: one workload
   of each module (the inbox's is the claim, the rename whose halves the
   inbox depends on), and the O_TMPFILE stage; the broken build over the
   core ones. 170 s over the six of them on 2 cores; the rest runs with
   FSAFE_POWER_FULL=1. */
static const char *const ci_subset[] = {
	"replace (one-shot: named stage)",
	"managed writer (3 chunks, O_TMPFILE)",
	"inbox claim (take)",
	/* Whether the ack syncs new/ depends on the filesystem: each of
	   its workloads, everywhere (the full table's btrfs and ext2 rows
	   caught an ack that did not). */
	"inbox ack (remove)",
	"inbox ack (done/)",
	"spool: create, append two batches",
	"checkpoint: save 3 files over a set",
	"store put (replace)",
	NULL,
};

/* ext4 and xfs run everything; the others the subset unless asked. */
static bool runs_in_full(const struct fs *fs)
{
	return (fs->cut == CUT_SHUTDOWN && fs->overlay == NO_OVERLAY) ||
	       getenv("FSAFE_POWER_FULL");
}

static bool in_subset(const char *name)
{
	for (const char *const *s = ci_subset; *s; s++)
		if (strcmp(*s, name) == 0)
			return true;
	return false;
}

static bool selected(const struct fs *fs, const struct pw_workload *w)
{
	return runs_in_full(fs) || in_subset(w->name);
}

static struct {
	const struct fs *fs;
	bool ready;
	char why[256];       /* reason to skip */
	char tmp[64];        /* our temp directory */
	char img[96], mnt[96], dev[32];
	char copy[96];       /* CUT_COPY: the image as the cut left it */
	char merged[96];     /* overlay: the merged directory */
	const char *top;     /* where "case" lives: mnt, or merged */
	int loopfd;
	bool mounted, ovl_mounted;
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

static bool ovl_mount(void)
{
	char data[400];

	if (env.fs->overlay == NO_OVERLAY || env.ovl_mounted)
		return true;
	snprintf(data, sizeof(data), "lowerdir=%s/lower,upperdir=%s/upper,"
	         "workdir=%s/work", env.mnt, env.mnt, env.mnt);
	if (mount("overlay", env.merged, "overlay", 0, data) < 0)
		return false;
	env.ovl_mounted = true;
	return true;
}

static void umount_at(const char *dir, bool *mounted)
{
	if (!*mounted)
		return;
	if (umount2(dir, 0) < 0) {
		fprintf(stderr, "power: umount %s: %s; detaching lazily\n",
		        dir, strerror(errno));
		umount2(dir, MNT_DETACH);
	}
	*mounted = false;
}

static bool do_mount(void)
{
	if (mount(env.dev, env.mnt, env.fs->type, 0, env.fs->options) < 0)
		return false;
	env.mounted = true;
	if (env.fs->overlay != NO_OVERLAY) {
		static const char *const dirs[] = { "lower", "upper", "work" };
		char p[128];
		for (int i = 0; i < 3; i++) {
			snprintf(p, sizeof(p), "%s/%s", env.mnt, dirs[i]);
			if (mkdir(p, 0755) < 0 && errno != EEXIST)
				return false;
		}
	}
	return ovl_mount();
}

static void do_umount(void)
{
	umount_at(env.merged, &env.ovl_mounted);
	umount_at(env.mnt, &env.mounted);
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
	snprintf(env.copy, sizeof(env.copy), "%s/image.cut", env.tmp);
	snprintf(env.mnt, sizeof(env.mnt), "%s/mnt", env.tmp);
	snprintf(env.merged, sizeof(env.merged), "%s/merged", env.tmp);
	env.top = fs->overlay == NO_OVERLAY ? env.mnt : env.merged;
	if (mkdir(env.mnt, 0755) < 0 ||
	    (fs->overlay != NO_OVERLAY && mkdir(env.merged, 0755) < 0))
		return skip_because("mkdir: %s", strerror(errno));

	int fd = open(env.img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)fs->mib << 20) < 0)
		return skip_because("image: %s", strerror(errno));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", fs->mkfs, env.img);
	int rc = system(cmd);
	if (rc != 0)
		return skip_because("'%s' failed (status %d): is %s installed?",
		                    cmd, rc, fs->package);
	if ((env.loopfd = loop_attach()) < 0)
		return skip_because("no loop device: %s", strerror(errno));
	if (!do_mount())
		return skip_because("mount %s (%s%s) on %s: %s", env.dev,
		                    fs->type,
		                    fs->overlay ? ", then overlay" : "",
		                    env.mnt, strerror(errno));
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
	if (env.copy[0])
		unlink(env.copy);
	if (env.merged[0])
		rmdir(env.merged);
	if (env.mnt[0])
		rmdir(env.mnt);
	if (env.tmp[0])
		rmdir(env.tmp);
}

/* ---- the cut by copy ------------------------------------------------------ */

/*
 * The loop driver writes what the filesystem submits into the backing
 * file's page cache, so a read of the backing file sees exactly what has
 * reached the "device"; what the filesystem still holds in its own memory
 * (dirty pages, an open transaction) is not there. A copy of the image is
 * therefore the disk as a power cut at that moment would leave it, with a
 * device that has no volatile cache of its own (a stricter cut, one that
 * also drops acknowledged cache flushes, needs device-mapper).
 *
 * The copy is made while the workload's process is stopped (SIGSTOP from
 * the hook, before call N) and only then is it killed: killing first would
 * let its exit close its files, and closing can start writeback (btrfs
 * flushes a file truncated and rewritten when it is closed), which no power
 * cut does. Kernel threads run on during the copy; only data extents are
 * copied (a few MiB), so it takes milliseconds, well inside the 30 s of
 * the commit and writeback timers.
 */
static int copy_image(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct stat st;
	int err = 0;

	if (in < 0 || out < 0 || fstat(in, &st) < 0 ||
	    ftruncate(out, st.st_size) < 0)
		err = errno;
	for (off_t at = 0; !err && at < st.st_size;) {
		off_t data = lseek(in, at, SEEK_DATA);
		if (data < 0) {
			err = errno == ENXIO ? 0 : errno; /* a hole to the end */
			break;
		}
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0) {
			err = errno;
			break;
		}
		for (off_t o = data; !err && o < hole;) {
			off_t src = o, dst = o;
			ssize_t n = copy_file_range(in, &src, out, &dst,
			                            (size_t)(hole - o), 0);
			if (n > 0)
				o += n;
			else
				err = n == 0 ? EIO : errno;
		}
		at = hole;
	}
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) < 0 && !err)
		err = errno;
	return -err;
}

/* Check (and mend) the unmounted filesystem on `target`, as at boot. */
static void run_fsck(const char *fsck, const char *target)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", fsck, target);
	int rc = system(cmd);
	/* e2fsck: 1 and 2 are "errors corrected" (1 after every cut: the
	   filesystem was not cleanly unmounted). */
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) > 2)
		fail_msg("'%s' left errors (status %#x)", cmd, rc);
}

/* Power on after the cut: the copy is the disk from now on. */
static bool power_on_copy(void)
{
	do_umount();
	close(env.loopfd); /* autoclear: the original device goes */
	env.loopfd = -1;
	if (rename(env.copy, env.img) < 0)
		fail_msg("rename %s: %s", env.copy, strerror(errno));
	if (env.fs->fsck)
		run_fsck(env.fs->fsck, env.img);
	if ((env.loopfd = loop_attach()) < 0)
		fail_msg("loop device for the copy: %s", strerror(errno));
	return do_mount();
}

/*
 * A mount after a cut that fails (the kernel refused to replay the
 * journal: seen once on ext4, EBADMSG) gets what a boot would give it,
 * the filesystem's check, and what that leaves is judged like any other
 * cut. It is said, with the kernel's last words on the device, never
 * passed over.
 */
static bool repair_after_cut(int *repaired)
{
	char cmd[256];
	int err = errno;

	if (!env.fs->repair || env.mounted) {
		errno = err;
		return false;
	}
	print_message("    mount after the cut: %s; running %s on %s\n",
	              strerror(err), env.fs->repair, env.dev);
	fflush(stdout);
	const char *slash = strrchr(env.dev, '/');
	snprintf(cmd, sizeof(cmd), "dmesg 2>/dev/null | grep -E '[(/]%s[)-]' "
	         "| tail -n 4 | sed 's/^/    kernel: /'",
	         slash ? slash + 1 : env.dev);
	if (system(cmd) != 0)
		print_message("    (no kernel log)\n");
	run_fsck(env.fs->repair, env.dev);
	(*repaired)++;
	return do_mount();
}

static bool power_on(int *repaired)
{
	if (env.fs->cut == CUT_COPY)
		return power_on_copy();
	do_umount(); /* after a shutdown: journal recovery at the next mount */
	return do_mount() || repair_after_cut(repaired);
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
	if (env.fs->cut == CUT_COPY) {
		/* Every thread stops here; the parent copies the image, then
		   kills us (see copy_image). */
		raise(SIGSTOP);
	} else if (ioctl(mountfd, FS_IOC_SHUTDOWN, &how) < 0) {
		sh->shutdown_errno = errno ? errno : EIO;
	}
	raise(SIGKILL);
}

static int open_at_top(const char *name)
{
	int fd = open(env.top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int c = fd < 0 ? -1
	               : openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return c;
}

static int open_case(void)
{
	int c = open_at_top("case");

	if (c < 0)
		fail_msg("open %s/case: %s", env.top, strerror(errno));
	return c;
}

static void fresh_dir(int at, const char *name)
{
	pw_rmtree_at(at, name);
	if (mkdirat(at, name, 0755) < 0)
		fail_msg("mkdir %s: %s", name, strerror(errno));
}

/*
 * Under overlayfs the layers are rebuilt with the overlay unmounted (a
 * lower layer must not change under a mount). A lower case is made there;
 * an upper one through the merged directory, which puts it in upper/.
 */
static void prepare_overlay(const struct pw_workload *w)
{
	umount_at(env.merged, &env.ovl_mounted);
	int m = open(env.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int lower = openat(m, "lower", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int upper = openat(m, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (m < 0 || lower < 0 || upper < 0)
		fail_msg("open %s layers: %s", env.mnt, strerror(errno));
	pw_rmtree_at(lower, "case");
	pw_rmtree_at(upper, "case");
	fresh_dir(m, "work");
	if (env.fs->overlay == OVL_LOWER) {
		fresh_dir(lower, "case");
		int c = openat(lower, "case", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (w->setup_old)
			w->setup_old(c);
		close(c);
	}
	if (syncfs(m) < 0)
		fail_msg("syncfs: %s", strerror(errno));
	close(lower);
	close(upper);
	close(m);
	if (!ovl_mount())
		fail_msg("mount overlay on %s: %s", env.merged, strerror(errno));
}

/* The OLD state, durable (the cut must not take it away). */
static void prepare(const struct pw_workload *w)
{
	if (env.fs->overlay != NO_OVERLAY)
		prepare_overlay(w);
	if (env.fs->overlay == OVL_LOWER)
		return;
	int m = open(env.top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (m < 0)
		fail_msg("open %s: %s", env.top, strerror(errno));
	fresh_dir(m, "case");
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
		/* The filesystem to shut down: under overlayfs, the upper. */
		mountfd = open(env.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int root = open_at_top("case");
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
	if (waitpid(pid, &status, WUNTRACED) != pid)
		fail_msg("waitpid: %s", strerror(errno));
	if (WIFSTOPPED(status)) {
		int r = copy_image(env.img, env.copy);
		kill(pid, SIGKILL);
		if (waitpid(pid, &status, 0) != pid)
			fail_msg("waitpid: %s", strerror(errno));
		if (r < 0)
			fail_msg("copy of the image at the cut: %s",
			         strerror(-r));
	}
	return status;
}

static const struct {
	unsigned bit;
	const char *name;
} breaks[] = {
	{ FSAFE__BREAK_DIR_SYNC, "no directory sync" },
	{ FSAFE__BREAK_DATA_SYNC, "no data sync" },
	{ FSAFE__BREAK_EXCL, "no O_EXCL" },
};

static const char *break_name(unsigned bit)
{
	for (size_t i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++)
		if (breaks[i].bit == bit)
			return breaks[i].name;
	return bit ? "?" : "ok";
}

struct tally {
	int cuts, violations;
	int lost;        /* cuts that left a renamed message no name */
	int repaired;    /* cuts whose mount needed the filesystem's check */
	char first[3][600];
};

static const char *module_of(const struct pw_workload *w)
{
	for (size_t i = 0; i < pw_workload_count(); i++)
		if (pw_workload_at(i) == w)
			return pw_workload_module(i);
	return "?";
}

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
			if (!power_on(&t->repaired))
				fail_msg("mount after the cut: %s",
				         strerror(errno));
			c = open_case();
			if (w->names && w->names(c) == 0)
				t->lost++;
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
	if (t->repaired)
		print_message("    %d of %d cuts mounted only after %s\n",
		              t->repaired, t->cuts, env.fs->repair);
	for (int i = 0; i < t->violations && i < 3; i++)
		print_message("    %s\n", t->first[i]);
	/* For tests/power/table.sh; "-": the workload has no rename to
	   measure. */
	char lost[16] = "-";
	if (w->names)
		snprintf(lost, sizeof(lost), "%d", t->lost);
	print_message("power-table|%s|%s|%s|%s|%d|%d|%d|%s|%.1f\n",
	              env.fs->name, break_name(fsafe__test_break),
	              module_of(w), w->name, calls, repeats, t->violations,
	              lost, now_s() - t0);
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
	if (env.loopfd < 0 && (env.loopfd = loop_attach()) < 0)
		fail_msg("loop device: %s", strerror(errno));
	if (!do_mount())
		fail_msg("mount %s: %s", env.dev, strerror(errno));
}

static bool is_limit(const struct fs *fs, const struct pw_workload *w)
{
	for (const char *const *l = fs->limits; l && *l; l++)
		if (strcmp(*l, w->name) == 0)
			return true;
	return false;
}

static void cut_workload(void **state)
{
	const struct pw_workload *w = *state;
	struct tally t;

	require_fs();
	fsafe__test_break = 0;
	cut_every_call(w, env.repeats, &t);
	if (t.violations && is_limit(env.fs, w))
		print_message("RECORDED (not a failure on %s, whose limits "
		              "docs/DESIGN.md states): %d of %d cuts\n",
		              env.fs->name, t.violations, t.cuts);
	else if (t.violations)
		fail_msg("%s on %s: %d of %d power cuts broke an invariant; "
		         "first: %s", w->name, env.fs->name, t.violations,
		         t.cuts, t.first[0]);
}

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
		/* In CI's subset, the writer's own workloads show it. */
		if (!(w->catches & *bit) || !selected(env.fs, w) ||
		    (!runs_in_full(env.fs) && strcmp(module_of(w), "core")))
			continue;
		cut_every_call(w, env.repeats, &t);
		total += t.violations;
		cuts += t.cuts;
	}
	fsafe__test_break = 0;
	print_message("[ %-11s broken: %-30s ] %d violations in %d cuts\n",
	              env.fs->name, break_name(*bit), total, cuts);
	if (total == 0)
		fail_msg("power cuts on %s found no violation with a safety "
		         "step removed: the harness cannot fail", env.fs->name);
}

/* Lists of workload names must not rot as workloads are renamed. */
static bool names_exist(const char *const *list)
{
	for (const char *const *s = list; *s; s++) {
		size_t i = 0;
		while (i < pw_workload_count() &&
		       strcmp(pw_workload_at(i)->name, *s) != 0)
			i++;
		if (i == pw_workload_count()) {
			fprintf(stderr, "no workload is named \"%s\"\n", *s);
			return false;
		}
	}
	return true;
}

int main(int argc, char **argv)
{
	enum { MAX = 64 };
	struct CMUnitTest tests[MAX];
	static char names[MAX][128];
	static unsigned bits[3];
	size_t n = 0;

	size_t nfs = sizeof(filesystems) / sizeof(filesystems[0]);

	for (size_t i = 0; i < nfs; i++)
		if (argc > 1 && strcmp(argv[1], filesystems[i].name) == 0)
			env.fs = &filesystems[i];
	if (!env.fs) {
		fprintf(stderr, "usage: %s FILESYSTEM, one of:", argv[0]);
		for (size_t i = 0; i < nfs; i++)
			fprintf(stderr, " %s", filesystems[i].name);
		fprintf(stderr, "\n");
		return 2;
	}
	if (!names_exist(ci_subset) || !names_exist(ext2_limits))
		return 2;
	for (size_t i = 0; i < pw_workload_count() && n < MAX; i++) {
		if (!selected(env.fs, pw_workload_at(i)))
			continue;
		snprintf(names[n], sizeof(names[n]), "cut %s: %s",
		         env.fs->name, pw_workload_at(i)->name);
		tests[n] = (struct CMUnitTest){
			.name = names[n], .test_func = cut_workload,
			.initial_state = (void *)pw_workload_at(i) };
		n++;
	}
	/* On the later filesystems the point is the directory sync, which
	   is what they were suspected of handling differently. */
	size_t nbreaks = env.fs->cut == CUT_SHUTDOWN && !env.fs->overlay ? 3
	                                                                  : 1;
	for (size_t i = 0; i < nbreaks && n < MAX; i++, n++) {
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
