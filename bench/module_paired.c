/*
 * The module floors of issue 19, by the method of paired.c: the arms of a
 * case take turns in one process, each in its own directory, each turn in
 * the next order of the arms, so the disk's drift falls on all alike. The
 * time each arm spends inside its own calls is printed.
 *
 *   module_paired batch DIR TURNS N   a batch of N x 4 KiB (one commit)
 *       | the hand-written atomic loop without any sync, the directory
 *       opened per file (its dirty pages written after its turn, off the
 *       clock) | GLib one by one (durable); a fresh directory per arm and
 *       turn
 *   module_paired batch10 DIR TURNS   a batch of 10 | 10 fsafe_write_fileat
 *   module_paired store DIR TURNS     fsafe_store_put of a new key |
 *       fsafe_store_delete of an existing key | fsafe_write_fileat of a new
 *       file, 4 KiB each
 *   module_paired checkpoint DIR TURNS LARGE
 *       a checkpoint of three files (2 KiB, 64 KiB, 1 MiB, all changed) |
 *       the same three by fsafe_write_fileat | a checkpoint of one file of
 *       LARGE bytes | one fsafe_write_fileat of LARGE bytes; then TURNS
 *       loads of the three-file generation | reloads of it into the last
 *       snapshot | reads of the three files into a page-aligned buffer
 *   module_paired spool DIR TURNS B   fsafe_spool_append of B records of
 *       100 bytes | write of the same B x 100 bytes + fdatasync
 *
 * Output: one line of "ARM SECONDS" pairs.
 *
 *   module_paired trace OP DIR N      set up (one write first: a thread
 *       seeds its staging-name generator once), then N operations of OP
 *       between the markers access("fsafe-bench:begin") and
 *       access("fsafe-bench:end"), for strace; OP is one of write-path-new
 *       write-path-replace write-dirfd-new write-dirfd-replace batch-item
 *       store-put store-delete inbox-deliver inbox-take-ack spool-append-1
 *       spool-append-64 spool-append-1024 checkpoint-save
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fsafe.h"
#include "fsafe/batch.h"
#include "fsafe/checkpoint.h"
#include "fsafe/inbox.h"
#include "fsafe/spool.h"
#include "fsafe/store.h"
#include "floor.h"
#include "glib_write.h"

#define KIB4 4096
#define REC 100
#define MAXARM 4
#define NBUF 1000

static const size_t ck_size[3] = { 2048, 65536, 1 << 20 };
static const char *const ck_name[3] = { "small", "medium", "large" };

_Noreturn static void die(const char *what, int err)
{
	fprintf(stderr, "module_paired: %s: %s\n", what, strerror(err));
	exit(1);
}

static void ok(int r, const char *what)
{
	if (r < 0)
		die(what, -r);
	if (r > 0)
		die(what, EIO); /* a partial batch or a warning: not a clean run */
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long num(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v <= 0)
		die(s, EINVAL);
	return v;
}

static unsigned char *filled(size_t len, unsigned seed)
{
	unsigned char *b = malloc(len ? len : 1);

	if (!b)
		die("malloc", ENOMEM);
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(i * 131u + seed * 7u + 1u);
	return b;
}

static int mkdir_open(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die(path, errno);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die(path, errno);
	return fd;
}

/* ---- the cases ---------------------------------------------------------- */

struct run {
	const char *root;
	int narm;
	const char *arm[MAXARM];
	char dir[MAXARM][4200];
	int dirfd[MAXARM];
	double spent[MAXARM];
	long n;       /* batch: files per turn; spool: records per append */
	size_t large; /* checkpoint: bytes of the one-file arm */
	unsigned char **bufs;
	fsafe_store *store;
	fsafe_checkpoint *cp[2];
	fsafe_spool *spool;
	int raw;
	struct iovec *iov;
	unsigned char *ck[3];
	unsigned char *big;
	void (*turn)(struct run *, int arm, long t);
};

/* A fresh directory of this arm for turn t (made before the clock runs). */
static int turn_dir(struct run *r, int arm, long t, char *path, size_t cap)
{
	snprintf(path, cap, "%s/t%ld", r->dir[arm], t);
	return mkdir_open(path);
}

enum { B_BATCH, B_LOOP, B_GLIB };

static void batch_turn(struct run *r, int arm, long t)
{
	char path[4300], name[32], file[4400];
	int dfd = turn_dir(r, arm, t, path, sizeof(path));
	fsafe_batch *b = NULL;
	double t0 = now();

	if (arm == B_BATCH) {
		ok(fsafe_batch_new(NULL, &b), "fsafe_batch_new");
		for (long i = 0; i < r->n; i++) {
			snprintf(name, sizeof(name), "f%ld", i);
			int rc = fsafe_batch_add(b, dfd, name,
			                         r->bufs[i % NBUF], KIB4, NULL);
			ok(rc < 0 ? rc : 0, "fsafe_batch_add");
		}
		ok(fsafe_batch_commit(b), "fsafe_batch_commit");
		fsafe_batch_free(b);
	}
	for (long i = 0; arm != B_BATCH && i < r->n; i++) {
		snprintf(name, sizeof(name), "f%ld", i);
		if (arm == B_LOOP) {
			/* The loop a caller writes without fsafe: no sync at
			   all, the directory opened by path for each file. */
			int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (d < 0)
				die(path, errno);
			ok(floor_write(d, name, r->bufs[i % NBUF], KIB4,
			               FLOOR_NOSYNC, (unsigned long)i),
			   "floor_write");
			close(d);
		} else {
			snprintf(file, sizeof(file), "%s/%s", path, name);
			ok(glib_durable_write(file, r->bufs[i % NBUF], KIB4), "glib");
		}
	}
	r->spent[arm] += now() - t0;
	/* The loop leaves its files to the kernel's writeback; written off
	   the clock here, or the next arm's sync would write them for it
	   (the batch's syncfs writes every dirty page of the filesystem). */
	if (arm == B_LOOP && syncfs(dfd) < 0)
		die("syncfs", errno);
	close(dfd);
}

enum { S_BATCH, S_SINGLES };

static void batch10_turn(struct run *r, int arm, long t)
{
	char name[32];
	fsafe_batch *b = NULL;
	double t0 = now();

	if (arm == S_BATCH)
		ok(fsafe_batch_new(NULL, &b), "fsafe_batch_new");
	for (long i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "f%ld-%ld", t, i);
		const unsigned char *buf = r->bufs[(t * 10 + i) % NBUF];
		if (arm == S_BATCH) {
			int rc = fsafe_batch_add(b, r->dirfd[arm], name, buf,
			                         KIB4, NULL);
			ok(rc < 0 ? rc : 0, "fsafe_batch_add");
		} else {
			ok(fsafe_write_fileat(r->dirfd[arm], name, buf, KIB4,
			                      NULL),
			   "fsafe_write_fileat");
		}
	}
	if (arm == S_BATCH) {
		ok(fsafe_batch_commit(b), "fsafe_batch_commit");
		fsafe_batch_free(b);
	}
	r->spent[arm] += now() - t0;
}

enum { K_PUT, K_DELETE, K_WRITE };

static void store_turn(struct run *r, int arm, long t)
{
	char key[32];
	const unsigned char *buf = r->bufs[t % NBUF];
	int n = snprintf(key, sizeof(key), arm == K_DELETE ? "d%ld" : "k%ld", t);
	double t0 = now();

	if (arm == K_PUT)
		ok(fsafe_store_put(r->store, key, (size_t)n, buf, KIB4, NULL),
		   "fsafe_store_put");
	else if (arm == K_DELETE)
		ok(fsafe_store_delete(r->store, key, (size_t)n),
		   "fsafe_store_delete");
	else
		ok(fsafe_write_fileat(r->dirfd[arm], key, buf, KIB4, NULL),
		   "fsafe_write_fileat");
	r->spent[arm] += now() - t0;
}

enum { C_CP3, C_W3, C_CP1, C_W1 };

static void checkpoint_turn(struct run *r, int arm, long t)
{
	fsafe_checkpoint_tx *tx;

	/* Every file changes every turn: nothing can be hard-linked. */
	for (int i = 0; i < 3; i++)
		r->ck[i][0] = (unsigned char)(t * 4 + arm);
	r->big[0] = (unsigned char)(t * 4 + arm);
	double t0 = now();
	if (arm == C_CP3 || arm == C_CP1) {
		fsafe_checkpoint *cp = r->cp[arm == C_CP1];
		ok(fsafe_checkpoint_begin(cp, &tx), "fsafe_checkpoint_begin");
		for (int i = 0; i < (arm == C_CP3 ? 3 : 1); i++)
			ok(fsafe_checkpoint_add(tx, ck_name[i],
			                        arm == C_CP3 ? r->ck[i] : r->big,
			                        arm == C_CP3 ? ck_size[i]
			                                     : r->large),
			   "fsafe_checkpoint_add");
		ok(fsafe_checkpoint_commit(tx, NULL), "fsafe_checkpoint_commit");
		r->spent[arm] += now() - t0;
		/* Untimed: the removal the save left running ends before the
		   next arm, which must not pay for it. */
		ok(fsafe_checkpoint_generations(cp, NULL, 0) < 0 ? -EIO : 0,
		   "fsafe_checkpoint_generations");
		return;
	} else {
		for (int i = 0; i < (arm == C_W3 ? 3 : 1); i++)
			ok(fsafe_write_fileat(r->dirfd[arm], ck_name[i],
			                      arm == C_W3 ? r->ck[i] : r->big,
			                      arm == C_W3 ? ck_size[i] : r->large,
			                      NULL),
			   "fsafe_write_fileat");
	}
	r->spent[arm] += now() - t0;
}

enum { P_SPOOL, P_RAW };

static void spool_turn(struct run *r, int arm, long t)
{
	size_t bytes = (size_t)r->n * REC;

	(void)t;
	double t0 = now();
	if (arm == P_SPOOL) {
		ok(fsafe_spool_append(r->spool, r->iov, (size_t)r->n, NULL),
		   "fsafe_spool_append");
	} else {
		const unsigned char *p = r->big;
		size_t left = bytes;
		while (left > 0) {
			ssize_t w = write(r->raw, p, left);
			if (w < 0 && errno != EINTR)
				die("write", errno);
			if (w > 0)
				p += w, left -= (size_t)w;
		}
		if (fdatasync(r->raw) < 0)
			die("fdatasync", errno);
	}
	r->spent[arm] += now() - t0;
}

/* Turn t's order of the arms: rotations, every other cycle reversed. */
static int arm_at(int narm, long t, int j)
{
	long cycle = t / narm;
	int k = (int)((t + j) % narm);

	return cycle % 2 ? narm - 1 - k : k;
}

static void run_turns(struct run *r, long turns)
{
	sync();
	for (long t = 0; t < turns; t++)
		for (int j = 0; j < r->narm; j++)
			r->turn(r, arm_at(r->narm, t, j), t);
}

static void arms(struct run *r, int narm, const char *const *names)
{
	r->narm = narm;
	for (int a = 0; a < narm; a++) {
		r->arm[a] = names[a];
		snprintf(r->dir[a], sizeof(r->dir[a]), "%s/%s", r->root,
		         names[a]);
		r->dirfd[a] = mkdir_open(r->dir[a]);
	}
}

static void print_spent(const struct run *r)
{
	for (int a = 0; a < r->narm; a++)
		printf("%s%s %.6f", a ? " " : "", r->arm[a], r->spent[a]);
}

static fsafe_store *open_store(int dirfd)
{
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s;

	o.flags = FSAFE_STORE_CREATE;
	ok(fsafe_store_open(dirfd, "store", &o, &s), "fsafe_store_open");
	return s;
}

static fsafe_checkpoint *open_checkpoint(int dirfd)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;

	o.flags = FSAFE_CHECKPOINT_CREATE;
	ok(fsafe_checkpoint_open(dirfd, "cp", &o, &cp),
	   "fsafe_checkpoint_open");
	return cp;
}

static fsafe_spool *open_spool(int dirfd)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.flags = FSAFE_SPOOL_CREATE;
	ok(fsafe_spool_open(dirfd, "spool", &o, &s), "fsafe_spool_open");
	return s;
}

/* Loads of the three-file generation, into fresh memory and into the
   last snapshot's (fsafe_checkpoint_reload), against reads of the same
   files into memory already mapped, starting on a page as a reload's. */
static void load_vs_read(struct run *r, long turns)
{
	double spent[3] = { 0, 0, 0 };
	fsafe_checkpoint_snapshot *keep = NULL;
	unsigned char *got = aligned_alloc(4096, ck_size[2]);

	if (!got)
		die("aligned_alloc", ENOMEM);
	memset(got, 0, ck_size[2]);
	ok(fsafe_checkpoint_reload(r->cp[0], NULL, &keep),
	   "fsafe_checkpoint_reload");
	for (long t = 0; t < turns; t++)
		for (int j = 0; j < 3; j++) {
			int which = (int)((t + j) % 3);
			double t0 = now();
			if (which == 0) {
				fsafe_checkpoint_snapshot *s;
				ok(fsafe_checkpoint_load(r->cp[0], NULL, &s),
				   "fsafe_checkpoint_load");
				fsafe_checkpoint_snapshot_free(s);
			} else if (which == 1) {
				ok(fsafe_checkpoint_reload(r->cp[0], NULL, &keep),
				   "fsafe_checkpoint_reload");
			}
			for (int i = 0; which == 2 && i < 3; i++) {
				int fd = openat(r->dirfd[C_W3], ck_name[i],
				                O_RDONLY | O_CLOEXEC);
				if (fd < 0 || read(fd, got, ck_size[i]) !=
				                      (ssize_t)ck_size[i])
					die("read", errno);
				close(fd);
			}
			spent[which] += now() - t0;
		}
	printf(" load %.6f reload %.6f read %.6f", spent[0], spent[1],
	       spent[2]);
	fsafe_checkpoint_snapshot_free(keep);
	free(got);
}

static int cmd_case(int argc, char **argv)
{
	static const char *const n_batch[] = { "batch", "loop", "glib" };
	static const char *const n_b10[] = { "batch10", "singles10" };
	static const char *const n_store[] = { "put", "delete", "write" };
	static const char *const n_ck[] = { "checkpoint3", "writes3",
		                            "checkpoint1", "write1" };
	static const char *const n_spool[] = { "spool", "raw" };
	struct run r = { .root = argv[2], .raw = -1 };
	const char *c = argv[1];
	long turns = num(argv[3]);

	r.bufs = malloc(NBUF * sizeof(*r.bufs));
	if (!r.bufs)
		die("malloc", ENOMEM);
	for (unsigned i = 0; i < NBUF; i++)
		r.bufs[i] = filled(KIB4, i);
	if (!strcmp(c, "batch") && argc == 5) {
		r.n = num(argv[4]);
		arms(&r, 3, n_batch);
		r.turn = batch_turn;
	} else if (!strcmp(c, "batch10") && argc == 4) {
		arms(&r, 2, n_b10);
		r.turn = batch10_turn;
	} else if (!strcmp(c, "store") && argc == 4) {
		arms(&r, 3, n_store);
		r.store = open_store(r.dirfd[K_PUT]);
		/* The keys the delete arm removes, one per turn. */
		for (long t = 0; t < turns; t++) {
			char key[32];
			int n = snprintf(key, sizeof(key), "d%ld", t);
			ok(fsafe_store_put(r.store, key, (size_t)n,
			                   r.bufs[t % NBUF], KIB4, NULL),
			   "fsafe_store_put");
		}
		r.turn = store_turn;
	} else if (!strcmp(c, "checkpoint") && argc == 5) {
		r.large = (size_t)num(argv[4]);
		arms(&r, 4, n_ck);
		r.cp[0] = open_checkpoint(r.dirfd[C_CP3]);
		r.cp[1] = open_checkpoint(r.dirfd[C_CP1]);
		for (int i = 0; i < 3; i++)
			r.ck[i] = filled(ck_size[i], (unsigned)i);
		r.big = filled(r.large, 9);
		r.turn = checkpoint_turn;
	} else if (!strcmp(c, "spool") && argc == 5) {
		r.n = num(argv[4]);
		arms(&r, 2, n_spool);
		r.spool = open_spool(r.dirfd[P_SPOOL]);
		r.raw = openat(r.dirfd[P_RAW], "raw",
		               O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		r.big = filled((size_t)r.n * REC, 5);
		r.iov = malloc((size_t)r.n * sizeof(*r.iov));
		if (r.raw < 0 || !r.iov)
			die("raw", errno);
		for (long i = 0; i < r.n; i++)
			r.iov[i] = (struct iovec){ r.big + i * REC, REC };
		r.turn = spool_turn;
		/* Set-up, untimed, like the raw file's creation: the spool's
		   first append makes its first segment (a durable create). */
		spool_turn(&r, P_SPOOL, 0);
		spool_turn(&r, P_RAW, 0);
		r.spent[P_SPOOL] = r.spent[P_RAW] = 0;
	} else {
		fprintf(stderr, "module_paired: bad arguments\n");
		return 2;
	}
	run_turns(&r, turns);
	print_spent(&r);
	if (r.cp[0])
		load_vs_read(&r, turns);
	printf("\n");
	fsafe_store_close(r.store);
	for (int i = 0; i < 2; i++)
		if (r.cp[i])
			ok(fsafe_checkpoint_close(r.cp[i]), "close");
	fsafe_spool_close(r.spool);
	return 0;
}

/* ---- system calls per operation ----------------------------------------- */

static void marker(const char *which)
{
	(void)!access(which, F_OK);
}

static void trace_inbox(int dfd, const char *op, long n,
                        const unsigned char *buf)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;
	fsafe_inbox_consumer *c = NULL;
	fsafe_inbox_msg *m;
	int take = !strcmp(op, "inbox-take-ack");

	o.flags = FSAFE_INBOX_CREATE;
	ok(fsafe_inbox_open(dfd, "inbox", &o, &ib), "fsafe_inbox_open");
	for (long i = 0; take && i < n; i++)
		ok(fsafe_inbox_deliver(ib, buf, 1024, NULL), "deliver");
	if (take)
		ok(fsafe_inbox_consumer_open(ib, NULL, &c), "consumer_open");
	marker("fsafe-bench:begin");
	for (long i = 0; i < n; i++) {
		if (!take) {
			ok(fsafe_inbox_deliver(ib, buf, 1024, NULL), "deliver");
			continue;
		}
		ok(fsafe_inbox_take(c, &m), "fsafe_inbox_take");
		ok(fsafe_inbox_ack(c, fsafe_inbox_msg_id(m)), "fsafe_inbox_ack");
		fsafe_inbox_msg_free(m);
	}
	marker("fsafe-bench:end");
	if (c)
		ok(fsafe_inbox_consumer_close(c), "consumer_close");
	fsafe_inbox_close(ib);
}

static void trace_spool(int dfd, long batch, long n)
{
	fsafe_spool *s = open_spool(dfd);
	unsigned char *buf = filled((size_t)batch * REC, 3);
	struct iovec *v = malloc((size_t)batch * sizeof(*v));

	if (!v)
		die("malloc", ENOMEM);
	for (long i = 0; i < batch; i++)
		v[i] = (struct iovec){ buf + i * REC, REC };
	marker("fsafe-bench:begin");
	for (long i = 0; i < n; i++)
		ok(fsafe_spool_append(s, v, (size_t)batch, NULL), "append");
	marker("fsafe-bench:end");
	fsafe_spool_close(s);
	free(v);
	free(buf);
}

static void trace_checkpoint(int dfd, long n)
{
	fsafe_checkpoint *cp = open_checkpoint(dfd);
	unsigned char *b[3];

	for (int i = 0; i < 3; i++)
		b[i] = filled(ck_size[i], (unsigned)i);
	marker("fsafe-bench:begin");
	for (long t = 0; t < n; t++) {
		fsafe_checkpoint_tx *tx;
		ok(fsafe_checkpoint_begin(cp, &tx), "begin");
		for (int i = 0; i < 3; i++) {
			b[i][0] = (unsigned char)t;
			ok(fsafe_checkpoint_add(tx, ck_name[i], b[i], ck_size[i]),
			   "add");
		}
		ok(fsafe_checkpoint_commit(tx, NULL), "commit");
	}
	marker("fsafe-bench:end");
	ok(fsafe_checkpoint_close(cp), "close");
}

static void trace_store(int dfd, int del, long n, const unsigned char *buf)
{
	fsafe_store *s = open_store(dfd);
	char key[32];

	for (long i = 0; del && i < n; i++) {
		int kl = snprintf(key, sizeof(key), "k%ld", i);
		ok(fsafe_store_put(s, key, (size_t)kl, buf, KIB4, NULL), "put");
	}
	marker("fsafe-bench:begin");
	for (long i = 0; i < n; i++) {
		int kl = snprintf(key, sizeof(key), "k%ld", i);
		ok(del ? fsafe_store_delete(s, key, (size_t)kl)
		       : fsafe_store_put(s, key, (size_t)kl, buf, KIB4, NULL),
		   del ? "delete" : "put");
	}
	marker("fsafe-bench:end");
	fsafe_store_close(s);
}

static void trace_writes(const char *dir, int dfd, const char *op, long n,
                         const unsigned char *buf)
{
	int replace = strstr(op, "replace") != NULL;
	int path_api = !strncmp(op, "write-path", 10);
	char name[32], path[4400];

	if (replace)
		ok(fsafe_write_fileat(dfd, "target", buf, KIB4, NULL), "first");
	marker("fsafe-bench:begin");
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), replace ? "target" : "t%ld", i);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		ok(path_api ? fsafe_write_file(path, buf, KIB4, NULL)
		            : fsafe_write_fileat(dfd, name, buf, KIB4, NULL),
		   op);
	}
	marker("fsafe-bench:end");
}

static void trace_batch(int dfd, long n, const unsigned char *buf)
{
	fsafe_batch *b;
	char name[32];

	ok(fsafe_batch_new(NULL, &b), "fsafe_batch_new");
	marker("fsafe-bench:begin");
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "t%ld", i);
		int rc = fsafe_batch_add(b, dfd, name, buf, KIB4, NULL);
		ok(rc < 0 ? rc : 0, "fsafe_batch_add");
	}
	ok(fsafe_batch_commit(b), "fsafe_batch_commit");
	marker("fsafe-bench:end");
	fsafe_batch_free(b);
}

static int cmd_trace(char **argv)
{
	const char *op = argv[2], *dir = argv[3];
	long n = num(argv[4]);
	unsigned char *buf = filled(KIB4, 1);
	int dfd = mkdir_open(dir);

	/* Set-up like the rest: the thread's staging-name generator takes its
	   one getrandom at its first draw, not per operation. */
	ok(fsafe_write_fileat(dfd, "warm-up", buf, KIB4, NULL), "warm-up");
	if (!strncmp(op, "write-", 6))
		trace_writes(dir, dfd, op, n, buf);
	else if (!strcmp(op, "batch-item"))
		trace_batch(dfd, n, buf);
	else if (!strncmp(op, "store-", 6))
		trace_store(dfd, !strcmp(op, "store-delete"), n, buf);
	else if (!strncmp(op, "inbox-", 6))
		trace_inbox(dfd, op, n, buf);
	else if (!strncmp(op, "spool-append-", 13))
		trace_spool(dfd, num(op + 13), n);
	else if (!strcmp(op, "checkpoint-save"))
		trace_checkpoint(dfd, n);
	else
		die(op, EINVAL);
	close(dfd);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	/* libc's one-time malloc set-up happens here, outside any marker. */
	void *volatile warm = malloc(1024);
	free(warm);
	if (argc == 5 && !strcmp(argv[1], "trace"))
		return cmd_trace(argv);
	if (argc >= 4)
		return cmd_case(argc, argv);
	fprintf(stderr, "usage: module_paired batch|batch10|store|checkpoint|"
	                "spool DIR TURNS [N]\n"
	                "       module_paired trace OP DIR N\n");
	return 2;
}
