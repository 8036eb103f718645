/*
 * Group commit and asynchronous writes. Included by <fsafe.h>.
 *
 * A batch commits many atomic writes with far fewer device flushes than one
 * after another: everything is staged, all data syncs are issued at once
 * (io_uring where the kernel allows it, a small thread pool otherwise), each
 * file is published, and each distinct directory is synced once.
 *
 * A batch is NOT a transaction across files: each file is individually
 * atomic and durable with exactly the guarantees of fsafe_write_fileat(),
 * and after a crash some files may be new and others old. For a set of
 * files that must change together, use the checkpoint store.
 */
#ifndef FSAFE_BATCH_H
#define FSAFE_BATCH_H

#include "fsafe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsafe_batch fsafe_batch;

enum {
	/* Sync with the thread pool even where io_uring works. */
	FSAFE_BATCH_NO_URING = 1u << 0,
	/* Never replace per-file data syncs by one syncfs (see below). */
	FSAFE_BATCH_NO_SYNCFS = 1u << 1,
	/* Replace them by one syncfs however much other data is dirty. */
	FSAFE_BATCH_SYNCFS_ANY_DIRTY = 1u << 2,
};

/*
 * Large batches: when one window holds at least `syncfs_min` files on one
 * filesystem, their data is made durable by a single syncfs(2) of that
 * filesystem instead of one data sync per file: one journal commit instead
 * of dozens (about twice as fast for 1000 small files on ext4). The price
 * is that syncfs also waits for other processes' dirty data on that
 * filesystem. So it is used only while the system's dirty and writeback
 * pages (/proc/meminfo), less the window's own data, come to at most
 * 128 KiB per file it syncs; where that cannot be read, the files sync one
 * by one. FSAFE_BATCH_SYNCFS_ANY_DIRTY skips that look;
 * FSAFE_BATCH_NO_SYNCFS never uses syncfs. A syncfs failure fails every
 * file it covered (none is published), since it cannot say which file's
 * data was lost.
 */
#define FSAFE_BATCH_SYNCFS_MIN 64

struct fsafe_batch_opts {
	size_t size;           /* sizeof(struct fsafe_batch_opts), or 0 */
	unsigned flags;        /* FSAFE_BATCH_* */
	/* Files staged (descriptors open) at once; 0: a quarter of the soft
	   RLIMIT_NOFILE at fsafe_batch_new(), within 128..1024. A window is
	   that many files; from 256 items, half that many, each staged
	   while the one before syncs on a thread of the batch's. */
	unsigned max_inflight;
	unsigned syncfs_min;   /* 0: FSAFE_BATCH_SYNCFS_MIN */
	/* Optional: filled when fsafe_batch_new() fails, and kept by the
	   batch for fsafe_batch_add(), fsafe_batch_add_writer() and
	   fsafe_batch_commit() when they fail (an item's own failure goes
	   to that item's write options). */
	struct fsafe_error *error;
};

/* The first published layout (0.1.0): what a `size` of 0 means. */
#define FSAFE_BATCH_OPTS_SIZE_V0 \
	(offsetof(struct fsafe_batch_opts, error) + \
	 sizeof(struct fsafe_error *))

#define FSAFE_BATCH_OPTS_INIT FSAFE__INIT(struct fsafe_batch_opts)

FSAFE_API int fsafe_batch_new(const struct fsafe_batch_opts *opts,
                              fsafe_batch **out);

/*
 * Add a write of `len` bytes at `buf` to `path` (relative to `dirfd`). The
 * buffer is not copied: it must stay valid until fsafe_batch_commit()
 * returns. `opts` is read now (NULL for defaults); its `error`, if set,
 * is filled in at commit. Returns the item's index (>= 0) or a negative
 * errno (-EINVAL for a NULL path, or a NULL buf with a non-zero len).
 */
FSAFE_API int fsafe_batch_add(fsafe_batch *b, int dirfd, const char *path,
                              const void *buf, size_t len,
                              const struct fsafe_write_opts *opts);

/*
 * Add an open managed writer; the batch takes it over (commit or abort it
 * no more). Returns the item's index or a negative errno (the writer is
 * then aborted).
 */
FSAFE_API int fsafe_batch_add_writer(fsafe_batch *b, fsafe_writer *w);

/*
 * Commit every item. Returns 0 if all succeeded, else the number of items
 * that failed (see fsafe_batch_result()). A batch commits once.
 */
FSAFE_API int fsafe_batch_commit(fsafe_batch *b);

FSAFE_API size_t fsafe_batch_count(const fsafe_batch *b);
/* Item i's result, as fsafe_write_fileat() would return it. */
FSAFE_API int fsafe_batch_result(const fsafe_batch *b, size_t i);
/* Frees the batch; uncommitted items are discarded (targets untouched). */
FSAFE_API void fsafe_batch_free(fsafe_batch *b);

/* ------------------------------------------------------------------------ */
/* Asynchronous writes                                                       */
/* ------------------------------------------------------------------------ */

typedef struct fsafe_async fsafe_async;

struct fsafe_async_opts {
	size_t size;         /* sizeof(struct fsafe_async_opts), or 0 */
	unsigned flags;      /* FSAFE_BATCH_NO_URING, FSAFE_BATCH_NO_SYNCFS,
	                        FSAFE_BATCH_SYNCFS_ANY_DIRTY (each applies
	                        to every group commit) */
	unsigned max_group;  /* writes committed together at most; 0: 128 */
	/* Optional: filled when fsafe_async_new() fails, and kept by the
	   engine for fsafe_async_submit() when it fails (a write's own
	   failure is its completion's result, and goes to its write
	   options' error). */
	struct fsafe_error *error;
};

/* The first published layout (0.1.0): what a `size` of 0 means. */
#define FSAFE_ASYNC_OPTS_SIZE_V0 \
	(offsetof(struct fsafe_async_opts, error) + \
	 sizeof(struct fsafe_error *))

#define FSAFE_ASYNC_OPTS_INIT FSAFE__INIT(struct fsafe_async_opts)

struct fsafe_async_completion {
	uint64_t id;      /* as returned by fsafe_async_submit() */
	int result;       /* as fsafe_write_fileat(); -ECANCELED if cancelled */
	void *user;       /* the submitter's pointer */
};

/* Start the engine (one background thread, started on first submit). */
FSAFE_API int fsafe_async_new(const struct fsafe_async_opts *opts,
                              fsafe_async **out);

/*
 * A descriptor that is readable while completions wait to be reaped: add it
 * to poll/epoll, libuv (uv_poll_t) or libevent. Do not read or close it.
 */
FSAFE_API int fsafe_async_fd(const fsafe_async *a);

/*
 * Queue a write and return at once. `buf` must stay valid until the write's
 * completion is reaped; `opts` (its if_unchanged token included) is read
 * now. Writes queued together are group-committed. `*id`
 * (if not NULL) receives the write's id. Returns 0 or a negative errno
 * (-EINVAL for a NULL path, or a NULL buf with a non-zero len).
 */
FSAFE_API int fsafe_async_submit(fsafe_async *a, int dirfd, const char *path,
                                 const void *buf, size_t len,
                                 const struct fsafe_write_opts *opts,
                                 void *user, uint64_t *id);

/*
 * Cancel a queued write: 0 if it had not started (its completion reports
 * -ECANCELED and the target is untouched), -EBUSY if it already started
 * (it completes normally), -ENOENT if unknown or already reaped.
 */
FSAFE_API int fsafe_async_cancel(fsafe_async *a, uint64_t id);

/* Take up to `max` completions without blocking; returns how many. */
FSAFE_API int fsafe_async_reap(fsafe_async *a,
                               struct fsafe_async_completion *out,
                               size_t max);

/*
 * Block until at least one completion is ready or `timeout_ms` passes
 * (FSAFE_FOREVER: without limit; 0: do not wait, only look). Returns 0
 * when one is ready, -ETIMEDOUT, or -ENOENT when nothing is pending at
 * all.
 */
FSAFE_API int fsafe_async_wait(fsafe_async *a, uint64_t timeout_ms);

/* Waits for writes in progress, cancels queued ones, frees everything. */
FSAFE_API void fsafe_async_free(fsafe_async *a);

#ifdef __cplusplus
}
#endif

#endif
