/*
 * Group commit: many atomic writes, few device flushes.
 *
 * Items go through the writer's own steps, a window at a time (so open
 * descriptors stay bounded): stage and write each, sync all their data at
 * once, publish each. A large batch overlaps its windows: one window's
 * sync runs on a thread while the caller stages the next. Directory syncs
 * are deferred to the end, one per distinct directory. A failure is
 * confined to its own item: the writer steps are sticky per writer, and a
 * failed directory sync marks only the items published into that
 * directory as FSAFE_ENOTDURABLE.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "error.h"
#include "fsafe.h"
#include "batch.h"
#include "opts.h"
#include "syncmany.h"
#include "sys.h"
#include "target.h"
#include "thread.h"
#include "util.h"
#include "writer.h"

/* A failure of a call on the batch (or of its creation), reported. */
static int fail(struct fsafe_error *error, int r, const char *step)
{
	fsafe__error_set(error, r, -r, step, false);
	return r;
}

/* The default window: a quarter of the descriptor limit, within these. */
#define INFLIGHT_MIN 128
#define INFLIGHT_MAX 1024
/* The fewest items a commit must have to ask how its directories link
   (links_whole). */
#define LINK_NEW_MIN 8
/* The most directory fds a commit asks about; items in others stage as
   if their directory did not link whole. */
#define PROBED_MAX 4
/* A batch of this many items overlaps its windows (commit_overlapped);
   a smaller one runs its windows one after another on the caller's
   thread alone, the order of its calls fixed. */
#define OVERLAP_MIN 256
#define NO_DIR ((size_t)-1)

struct item {
	int dirfd;
	char *path;          /* NULL for an added writer */
	const void *buf;
	size_t len;
	struct fsafe__wopts o;
	fsafe_writer *w;
	struct fsafe_error *error;
	size_t dir;          /* index into dirs awaiting a sync, or NO_DIR */
	int result;
};

struct dir {
	dev_t dev;
	ino_t ino;
	int fd;
	int borrowed; /* the caller's fd its items borrowed, or -1 */
};

struct fsafe_batch {
	unsigned flags, inflight, syncfs_min;
	struct fsafe_error *error; /* the options', for add and commit */
	bool committed;
	bool names_unsynced; /* the caller syncs the directories */
	struct fsafe__sync_pool *pool; /* the caller's, or the commit's own */
	struct item *items;
	size_t n, cap;
	struct dir *dirs;
	size_t ndirs, dcap;
	/* The caller's directory fds asked about, and whether each links
	   whole (links_whole). */
	struct probed {
		int fd;
		bool whole;
	} probed[PROBED_MAX];
	size_t nprobed;
};

/*
 * Every window syncs once (a syncfs, or all its files at once), so fewer,
 * larger windows are faster: 1000 files in one window ran 20-30 % faster
 * than in eight of 128 (before windows overlapped, commit_overlapped). But each file of a window holds a descriptor, and
 * the process has other uses for its limit; a quarter of it is ours.
 */
static unsigned default_inflight(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur / 4 < INFLIGHT_MIN)
		return INFLIGHT_MIN;
	return rl.rlim_cur / 4 > INFLIGHT_MAX ? INFLIGHT_MAX
	                                      : (unsigned)(rl.rlim_cur / 4);
}

int fsafe_batch_new(const struct fsafe_batch_opts *opts, fsafe_batch **out)
{
	struct fsafe_batch_opts in;
	int r = FSAFE__OPTS_COPY(&in, opts, FSAFE_BATCH_OPTS_SIZE_V0);

	assert(out);
	*out = NULL;
	if (r < 0)
		return fail(FSAFE__OPTS_ERROR(opts, struct fsafe_batch_opts, r),
		            r, "options");
	if (in.flags & ~(unsigned)(FSAFE_BATCH_NO_URING | FSAFE_BATCH_NO_SYNCFS |
	                           FSAFE_BATCH_SYNCFS_ANY_DIRTY))
		return fail(in.error, -EINVAL, "options");
	fsafe_batch *b = calloc(1, sizeof(*b));
	if (!b)
		return fail(in.error, -ENOMEM, "allocate");
	b->error = in.error;
	b->flags = in.flags;
	b->inflight = in.max_inflight ? in.max_inflight : default_inflight();
	b->syncfs_min = in.syncfs_min ? in.syncfs_min : FSAFE_BATCH_SYNCFS_MIN;
	*out = b;
	return 0;
}

static bool grow(void **arr, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return true;
	size_t c = *cap ? 2 * *cap : 16;
	void *p = realloc(*arr, c * size);
	if (!p)
		return false;
	*arr = p;
	*cap = c;
	return true;
}

static int add_item(fsafe_batch *b, const struct item *it)
{
	if (b->committed)
		return fail(b->error, -EALREADY, "add (already committed)");
	if (!grow((void **)&b->items, &b->cap, b->n, sizeof(*it)))
		return fail(b->error, -ENOMEM, "allocate");
	b->items[b->n] = *it;
	return (int)b->n++;
}

int fsafe_batch_add(fsafe_batch *b, int dirfd, const char *path,
                    const void *buf, size_t len,
                    const struct fsafe_write_opts *opts)
{
	struct item it = { .dirfd = dirfd, .buf = buf, .len = len,
	                   .dir = NO_DIR };
	int r = fsafe__wopts_load(&it.o, opts);

	assert(b);
	if (r < 0 || !path || (!buf && len > 0))
		return fail(b->error, r < 0 ? r : -EINVAL, "options");
	it.o.one_shot = true;
	it.o.length = len;
	/* Its writer ends inside commit, which needs the caller's dirfd
	   open anyway: for a plain name no directory of its own. */
	it.o.borrow_dirfd = true;
	/* The buffer can be written again: a new file's stage needs no stat
	   after its lock (see publish). */
	it.o.restartable = true;
	if (!(it.path = strdup(path)))
		return fail(b->error, -ENOMEM, "allocate");
	it.error = it.o.error;
	if ((r = add_item(b, &it)) < 0)
		free(it.path);
	return r;
}

int fsafe_batch_add_writer(fsafe_batch *b, fsafe_writer *w)
{
	assert(b && w);
	struct item it = { .w = w, .dir = NO_DIR,
	                   .error = fsafe__writer_error_out(w) };
	int r = add_item(b, &it);

	if (r < 0)
		fsafe_writer_abort(w);
	return r;
}

#ifdef FSAFE_TESTING
volatile int fsafe__test_link_new_min = -1;
#define LINK_NEW_MIN_NOW \
	(fsafe__test_link_new_min >= 0 ? (size_t)fsafe__test_link_new_min \
	                                : LINK_NEW_MIN)
volatile int fsafe__test_overlap_min = -1;
#define OVERLAP_MIN_NOW \
	(fsafe__test_overlap_min >= 0 ? (size_t)fsafe__test_overlap_min \
	                              : OVERLAP_MIN)
#else
#define LINK_NEW_MIN_NOW LINK_NEW_MIN
#define OVERLAP_MIN_NOW OVERLAP_MIN
#endif

/*
 * Whether a new file's stage may stay unnamed until it is linked at its
 * name (fsafe__wopts.link_new): only where the directory's sync makes the
 * link durable with its inode's link count. The journals that commit a
 * rename's two halves together (ext3, ext4, xfs; tmpfs keeps nothing)
 * commit that too. ext2 writes them apart: power cuts after a commit that
 * returned 0 left the name on an inode of no links, which e2fsck then
 * dropped (tests/power, ext2, in full). btrfs is left out with it, as for
 * the rename. Asking costs about 31 us here (fstatfs, fstat, a read of
 * /proc/self/mountinfo), what five items save, so a commit of fewer than
 * LINK_NEW_MIN items does not ask, nor does an item whose target is not
 * in the caller's fd itself (the writer links only there). Once per
 * caller's directory fd a commit (it names the same directory until the
 * commit returns), for at most PROBED_MAX of them, so that items spread
 * over many directory fds cost no more than before.
 */
static bool links_whole(fsafe_batch *b, int dirfd, const char *path)
{
	if (b->n < LINK_NEW_MIN_NOW || !fsafe__target_borrows(dirfd, path))
		return false;
	for (size_t i = 0; i < b->nprobed; i++)
		if (b->probed[i].fd == dirfd)
			return b->probed[i].whole;
	if (b->nprobed == PROBED_MAX)
		return false;
	bool whole = fsafe__renames_whole(dirfd);
	b->probed[b->nprobed++] = (struct probed){ dirfd, whole };
	return whole;
}

/* Stage and fill an item's writer, and give its stage a name (not a new
   file's unnamed one: the publish links that at its name). */
static void stage(fsafe_batch *b, struct item *it)
{
	if (!it->w) {
		it->o.link_new = links_whole(b, it->dirfd, it->path);
		it->result = fsafe__writer_open(it->dirfd, it->path, &it->o, &it->w);
		if (it->result < 0)
			return;
		fsafe_writer_write(it->w, it->buf, it->len);
	}
	fsafe__writer_defer_dir_sync(it->w, true);
	fsafe__writer_link(it->w);
}

/*
 * The data fd of each item that a shared sync may cover (-1 otherwise);
 * items whose stage needs a full fsync (metadata set after creation) sync
 * themselves here, one by one: that is rare.
 */
static void collect_fds(struct item *items, size_t k, int *fds)
{
	for (size_t i = 0; i < k; i++) {
		fsafe_writer *w = items[i].w;
		fds[i] = -1;
		if (w && fsafe__writer_needs_fsync(w))
			fsafe__writer_sync_data(w);
		else if (w)
			fds[i] = fsafe__writer_data_fd(w);
	}
}

/*
 * The filesystem of w's stage, (dev_t)-1 if unknown. A stage lives on its
 * directory's filesystem, so items that borrowed the same caller's
 * directory fd share one stat of it (*last and *last_dev remember it).
 */
static dev_t stage_dev(fsafe_writer *w, int *last, dev_t *last_dev)
{
	bool borrowed = fsafe__writer_dir_borrowed(w);
	int fd = borrowed ? fsafe__writer_dir_fd(w) : fsafe__writer_data_fd(w);
	struct stat st;

	if (borrowed && fd == *last)
		return *last_dev;
	dev_t dev = fsafe__fstat(fd, &st) == 0 ? st.st_dev : (dev_t)-1;
	if (borrowed)
		*last = fd, *last_dev = dev;
	return dev;
}

/*
 * A syncfs also waits for every other dirty page of its filesystem. Here,
 * 1000 files of 4 KiB synced in 75 ms by syncfs and in 150 ms each on its
 * own; with 256 MiB of another file's data dirty, in 373 ms and 286 ms:
 * the two meet near 200 KiB of others' dirty data per file.
 */
#define SYNCFS_OTHERS_PER_FILE ((uint64_t)128 << 10)
#define OTHERS_UNREAD (-1)
#define OTHERS_UNKNOWN (-2)

/* Whether one syncfs for `files` of the window's k items beats their own
   syncs. *others: the bytes dirty beside the window's own, read once per
   window, at its first question. /proc/meminfo counts every filesystem's:
   dirty data elsewhere only makes the answer more careful than it need
   be. */
static bool syncfs_pays(const fsafe_batch *b, const struct item *items,
                        size_t k, size_t files, int64_t *others)
{
	uint64_t d, own = 0;

	if (b->flags & FSAFE_BATCH_SYNCFS_ANY_DIRTY)
		return true;
	if (*others == OTHERS_UNREAD) {
		for (size_t i = 0; i < k; i++) /* the window's own is dirty */
			own += items[i].len;
		*others = fsafe__dirty_bytes(&d) < 0 ? OTHERS_UNKNOWN
		          : d > own ? (int64_t)(d - own)
		                    : 0;
	}
	return *others >= 0 &&
	       (uint64_t)*others <= files * SYNCFS_OTHERS_PER_FILE;
}

/*
 * Where one filesystem holds at least syncfs_min of the window's files,
 * and others' dirty data would not make it wait long, one syncfs makes
 * all their data durable; their fds are then taken out of `fds`, and a
 * failure fails each of them. `devs` is scratch space.
 */
static void sync_by_filesystem(fsafe_batch *b, struct item *items, size_t k,
                               int *fds, dev_t *devs)
{
	int last = -1;
	dev_t last_dev = (dev_t)-1;
	int64_t others = OTHERS_UNREAD;

	for (size_t i = 0; i < k; i++)
		devs[i] = fds[i] >= 0 ? stage_dev(items[i].w, &last, &last_dev)
		                      : (dev_t)-1;
	/* Distinct filesystems are few (usually one): a pass per each. */
	for (size_t i = 0; i < k; i++) {
		dev_t dev = devs[i];
		size_t same = 0;
		if (fds[i] < 0 || dev == (dev_t)-1)
			continue;
		for (size_t j = i; j < k; j++)
			same += fds[j] >= 0 && devs[j] == dev;
		int r = same >= b->syncfs_min &&
		                syncfs_pays(b, items, k, same, &others)
		        ? fsafe__syncfs(fds[i])
		        : -ENOSYS;
		for (size_t j = i; j < k; j++) {
			if (fds[j] < 0 || devs[j] != dev)
				continue;
			if (r != -ENOSYS) {
				if (r < 0)
					fsafe__writer_fail(items[j].w, r, "syncfs");
				fds[j] = -1;
			}
			devs[j] = (dev_t)-1; /* this filesystem is decided */
		}
	}
}

static void sync_data(fsafe_batch *b, struct item *items, size_t k)
{
	int *fds = malloc(k * sizeof(int)), *errs = malloc(k * sizeof(int));
	dev_t *devs = malloc(k * sizeof(dev_t));

	if (!fds || !errs || !devs) {
		/* Out of memory: sync one by one rather than fail the items. */
		for (size_t i = 0; i < k; i++)
			if (items[i].w)
				fsafe__writer_sync_data(items[i].w);
	} else {
		collect_fds(items, k, fds);
		if (!(b->flags & FSAFE_BATCH_NO_SYNCFS))
			sync_by_filesystem(b, items, k, fds, devs);
		if (b->pool)
			fsafe__sync_pool_run(b->pool, fds, NULL, k, errs);
		else
			fsafe__sync_many(fds, k, errs,
			                 b->flags & FSAFE_BATCH_NO_URING);
		for (size_t i = 0; i < k; i++)
			if (errs[i] < 0)
				fsafe__writer_fail(items[i].w, errs[i], "fsync");
	}
	free(fds);
	free(errs);
	free(devs);
}

/* The index of w's directory among those awaiting a sync. A borrowed
   caller's fd found again needs no stat: during commit it still names
   the directory it named. */
static size_t dir_register(fsafe_batch *b, fsafe_writer *w)
{
	int dirfd = fsafe__writer_dir_fd(w);
	int borrowed = fsafe__writer_dir_borrowed(w) ? dirfd : -1;
	struct stat st;

	for (size_t i = 0; borrowed >= 0 && i < b->ndirs; i++)
		if (b->dirs[i].borrowed == borrowed)
			return i;
	if (fsafe__fstat(dirfd, &st) < 0)
		return NO_DIR;
	for (size_t i = 0; i < b->ndirs; i++) {
		if (b->dirs[i].dev != st.st_dev || b->dirs[i].ino != st.st_ino)
			continue;
		if (borrowed >= 0) /* another fd of it: the next item's, likely */
			b->dirs[i].borrowed = borrowed;
		return i;
	}
	if (!grow((void **)&b->dirs, &b->dcap, b->ndirs, sizeof(*b->dirs)))
		return NO_DIR;
	int fd = fsafe__open_dir(dirfd, ".");
	if (fd < 0)
		return NO_DIR;
	b->dirs[b->ndirs] = (struct dir){ st.st_dev, st.st_ino, fd, borrowed };
	return b->ndirs++;
}

static void publish(fsafe_batch *b, struct item *it)
{
	if (!it->w)
		return;
	fsafe__writer_publish(it->w);
	if (fsafe__writer_stage_lost(it->w)) {
		/* A sweep took the stage before its lock: this item alone
		   starts again, as a one-shot write (rare). */
		fsafe_writer_abort(it->w);
		it->w = NULL;
		struct iovec iov = { (void *)it->buf, it->len };
		it->result = fsafe__write_oneshot(it->dirfd, it->path, &iov, 1,
		                                  it->o);
		return;
	}
	if (fsafe__writer_needs_dir_sync(it->w) && !b->names_unsynced &&
	    (it->dir = dir_register(b, it->w)) == NO_DIR) {
		/* Could not share the sync: this one syncs its own. */
		fsafe__writer_defer_dir_sync(it->w, false);
		fsafe__writer_sync_dir(it->w);
	}
	it->result = fsafe__writer_finish(it->w);
	it->w = NULL;
}

static void stage_window(fsafe_batch *b, struct item *items, size_t k)
{
	for (size_t i = 0; i < k; i++)
		stage(b, &items[i]);
}

static void publish_window(fsafe_batch *b, struct item *items, size_t k)
{
	for (size_t i = 0; i < k; i++)
		publish(b, &items[i]);
}

/* A window whose data syncs on a thread of its own (or, where none can
   start, on the caller's). The sync touches the window's items alone. */
struct syncing {
	fsafe_batch *b;
	struct item *items;
	size_t k;
	pthread_t t;
	bool threaded;
};

static void *sync_thread(void *arg)
{
	struct syncing *s = arg;

	sync_data(s->b, s->items, s->k);
	return NULL;
}

static void sync_start(struct syncing *s)
{
	s->threaded = fsafe__thread_start(&s->t, NULL, sync_thread, s) == 0;
	if (!s->threaded)
		sync_data(s->b, s->items, s->k);
}

static void sync_wait(struct syncing *s)
{
	if (s->threaded)
		pthread_join(s->t, NULL);
}

/*
 * Windows of half the descriptors allowed, each staged while the one
 * before syncs: stage 1, sync 1 | stage 2, sync 2 | publish 1, ... A
 * window's data is durable before any of its files is published, as in
 * the plain order; two windows' stages are open at once, so max_inflight
 * still bounds the descriptors. The kernel's work of staging one window
 * runs beside the device's flush of the one before (ext4, 10,000 x 4 KiB:
 * 0.39-0.46 s in windows of 1024 one after another, 0.29-0.36 s
 * overlapped). The sync thread touches the synced window's writers
 * alone; the user's error structs are written at publish, here.
 */
static void commit_overlapped(fsafe_batch *b, size_t per)
{
	struct syncing s[2];
	struct syncing *prev = NULL;

	for (size_t off = 0, w = 0; off < b->n; off += per, w ^= 1) {
		struct syncing *cur = &s[w];
		*cur = (struct syncing){ .b = b, .items = b->items + off,
		                         .k = b->n - off < per ? b->n - off : per };
		stage_window(b, cur->items, cur->k);
		if (prev)
			sync_wait(prev);
		sync_start(cur);
		if (prev)
			publish_window(b, prev->items, prev->k);
		prev = cur;
	}
	sync_wait(prev);
	publish_window(b, prev->items, prev->k);
}

static void commit_windows(fsafe_batch *b)
{
	size_t per = b->inflight / 2 ? b->inflight / 2 : 1;

	if (b->n >= OVERLAP_MIN_NOW && b->n > per) {
		commit_overlapped(b, per);
		return;
	}
	for (size_t off = 0; off < b->n; off += b->inflight) {
		size_t k = b->n - off < b->inflight ? b->n - off : b->inflight;
		stage_window(b, b->items + off, k);
		sync_data(b, b->items + off, k);
		publish_window(b, b->items + off, k);
	}
}

static void sync_dirs(fsafe_batch *b)
{
	for (size_t d = 0; d < b->ndirs; d++) {
		int r = fsafe__fsync(b->dirs[d].fd);
		b->dirs[d].fd = fsafe__close(b->dirs[d].fd);
		if (r == 0)
			continue;
		for (size_t i = 0; i < b->n; i++) {
			struct item *it = &b->items[i];
			if (it->dir != d || it->result < 0)
				continue;
			it->result = FSAFE_ENOTDURABLE;
			fsafe__error_set(it->error, FSAFE_ENOTDURABLE, -r,
			                 "fsync directory", true);
		}
	}
}

static int commit(fsafe_batch *b)
{
	if (b->committed)
		return fail(b->error, -EALREADY, "commit (already committed)");
	b->committed = true;
	/* One ring (or set of threads) for every window, not one each. */
	struct fsafe__sync_pool *own = NULL;
	if (!b->pool)
		b->pool = own = fsafe__sync_pool_new(
		        !(b->flags & FSAFE_BATCH_NO_URING));
	commit_windows(b);
	if (own) {
		fsafe__sync_pool_free(own);
		b->pool = NULL;
	}
	sync_dirs(b);
	int failed = 0;
	for (size_t i = 0; i < b->n; i++)
		failed += b->items[i].result < 0;
	return failed;
}

int fsafe_batch_commit(fsafe_batch *b)
{
	assert(b);
	return commit(b);
}

void fsafe__batch_use_pool(fsafe_batch *b, struct fsafe__sync_pool *pool)
{
	assert(b);
	b->pool = pool;
}

int fsafe__batch_commit_names_unsynced(fsafe_batch *b)
{
	assert(b);
	b->names_unsynced = true;
	return commit(b);
}

size_t fsafe_batch_count(const fsafe_batch *b)
{
	assert(b);
	return b->n;
}

int fsafe_batch_result(const fsafe_batch *b, size_t i)
{
	assert(b);
	if (i >= b->n)
		return -ENOENT;
	return b->committed ? b->items[i].result : -EAGAIN;
}

void fsafe_batch_free(fsafe_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		fsafe_writer_abort(b->items[i].w);
		free(b->items[i].path);
	}
	for (size_t d = 0; d < b->ndirs; d++)
		if (b->dirs[d].fd >= 0)
			fsafe__close(b->dirs[d].fd);
	free(b->items);
	free(b->dirs);
	free(b);
}
