/*
 * The power-loss harness: workloads and their invariants, shared by the
 * two layers that judge them.
 *
 *   Layer A (cut.c)   runs a workload on a loop-mounted ext4, xfs, btrfs,
 *                     ext2 or overlayfs and cuts power (FS_IOC_SHUTDOWN,
 *                     no log flush; or a copy of the loop image) before
 *                     table call N, for every N.
 *   Layer B (model.c) records the workload's file-system operations once
 *                     and builds every crash state an abstract persistence
 *                     model allows.
 *
 * Both then do the same thing to what survived: a generic leftover check
 * (every unexpected name is a staging name), the workload's recovery (by
 * default a sweep with age 0 of each of its directories: the writer is
 * dead), a check that the recovery left no staging name, and the
 * workload's own invariant check.
 *
 * A module that publishes data (state store, inbox, spool, checkpoint...)
 * joins both layers with an array of `struct pw_workload` in its own file
 * (listed in suites.c), each entry: a setup of the OLD state with plain system calls, a run
 * through the library that reports each operation's result with
 * pw_returned(), and a check. Nothing else needs to change.
 */
#ifndef FSAFE_POWER_H
#define FSAFE_POWER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PW_MAX_OPS 16

/*
 * What the workload's library calls returned before the crash. It lives in
 * memory shared with the child that dies (Layer A), so it must be filled
 * in as each call returns, before the next table call.
 */
struct pw_progress {
	int returned;               /* ops that returned, in order */
	int result[PW_MAX_OPS];     /* their results */
	int calls[PW_MAX_OPS];      /* table calls made when op i returned */
};

/* Record that op `i` (0-based, in order) returned `r`. */
void pw_returned(struct pw_progress *p, int i, int r);

/* Op i returned before the crash with result r. */
static inline bool pw_done(const struct pw_progress *p, int i, int r)
{
	return i < p->returned && p->result[i] == r;
}

/* The count of table calls so far: set by the layer in charge. */
extern int (*pw_calls_now)(void);

struct pw_workload {
	const char *name;
	/* Directories (relative to the case root) the workload publishes in;
	   NULL-terminated, "." first. Missing ones are skipped. */
	const char *const *dirs;
	/* Names other than staging names that may exist in those dirs. */
	const char *const *known;
	/* The module's own leftovers (a lock's private names, say), allowed
	   after a crash like staging names; NULL: none. Recovery must remove
	   them as the sweep removes staging names. */
	bool (*leftover)(const char *name);
	/* Layer A: cut right after a journal commit (an fsync of the case
	   root just before the shutdown), as ext4's commit timer or any
	   other process's fsync may do at any moment: metadata on disk, the
	   data not yet. For workloads that promise something without syncing
	   it themselves. */
	bool commit_before_cut;
	/* Layer B: a rename persists whole, both directories or neither, as
	   filesystems that journal it as one transaction do (ext4, xfs,
	   btrfs; Layer A cuts them for real and counts, with `names`, the
	   cuts that broke this). Only for a protocol
	   that depends on it, the inbox claim; the strict model, which may
	   keep either half alone, is the default. */
	bool rename_whole;
	/* Layer A, for a rename_whole workload: the names the message has
	   right after the cut, before any recovery. 0 means a rename kept
	   only its removal half; the suite counts those, which is how the
	   rename_whole assumption is measured on each filesystem. */
	int (*names)(int root);
	/* FSAFE__BREAK_* switches whose removal this workload must expose
	   (at least one violation in each layer). */
	unsigned catches;
	/* The OLD state, with plain system calls (the harness makes it
	   durable afterwards). */
	void (*setup_old)(int root);
	/* The workload, through the library, calling pw_returned() after
	   each of its library calls. Runs in a child that may die anywhere. */
	void (*run)(int root, struct pw_progress *p);
	/* Recovery after the crash; NULL: pw_sweep_all(). Returns NULL, or
	   a violation written to buf. */
	const char *(*recover)(const struct pw_workload *w, int root,
	                       char *buf, size_t len);
	/* The invariants, given what returned before the crash. */
	const char *(*check)(int root, const struct pw_progress *p, char *buf,
	                     size_t len);
};

/*
 * The workloads of every module, in suites: each module keeps its own in
 * its own file (workloads.c for the core, workloads_<module>.c for a
 * store) and adds one line to the list in suites.c.
 */
struct pw_suite {
	const char *module; /* for reports: "core", "inbox"... */
	const struct pw_workload *workloads;
	const size_t *count;
};
extern const struct pw_workload pw_core_workloads[];
extern const size_t pw_core_nworkloads;

size_t pw_workload_count(void);
const struct pw_workload *pw_workload_at(size_t i);
/* The module of workload i (its suite's name). */
const char *pw_workload_module(size_t i);

/* Fill the OLD/NEW patterns (call once per process). */
void pw_init(void);

/*
 * Judge a case root after a crash: leftovers, recovery, leftovers again,
 * the workload's check. NULL when all invariants hold, else a description
 * in buf.
 */
const char *pw_judge(const struct pw_workload *w, int root,
                     const struct pw_progress *p, char *buf, size_t len);

/* The default recovery: a sweep with age 0 of each of w->dirs. */
const char *pw_sweep_all(const struct pw_workload *w, int root, char *buf,
                         size_t len);

/* ---- helpers for workloads and checks ---------------------------------- */

/* Contents: OLD 8 KiB and NEW 12 KiB, and a long OLD / short NEW pair
   (an in-place overwrite of the long one by the short one leaves a mix).
   Every byte differs between OLD and NEW and none is zero. */
#define PW_OLD_LEN 8192
#define PW_NEW_LEN 12288
extern unsigned char pw_old[PW_OLD_LEN], pw_new[PW_NEW_LEN];
extern unsigned char pw_old_long[PW_NEW_LEN], pw_new_short[PW_OLD_LEN];

/* Plain fixtures: write a file and fsync it; make a hard link. */
void pw_put(int dirfd, const char *name, const void *buf, size_t len);
void pw_link(int dirfd, const char *from, const char *to);
/* Remove the tree `name` in dirfd, if it exists. */
void pw_rmtree_at(int dirfd, const char *name);

/*
 * The atomic-write invariant on `path`: when `returned`, it holds exactly
 * NEW; otherwise exactly OLD (or is absent, when old is NULL) or exactly
 * NEW. Describes a violation (missing, empty, NUL-filled, mixed...) in buf.
 */
const char *pw_expect(int root, const char *path, const void *old,
                      size_t oldlen, const void *new_, size_t newlen,
                      bool returned, char *buf, size_t len);

/* When `path` exists, its permission bits are `mode`. */
const char *pw_expect_mode(int root, const char *path, unsigned mode,
                           char *buf, size_t len);

/* The deterministic getrandom of the workloads (see harness.c). */
struct fsafe_sys;
extern struct fsafe_sys pw_sys_det; /* set up by pw_init() */
/* Restart its sequence (each run starts from the same names). */
void pw_det_reset(void);
/* The staging name its first call yields. */
const char *pw_det_first_name(void);

#endif
