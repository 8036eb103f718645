/*
 * The checkpoint store: SHA-256 vectors, byte-identical round trips
 * (empty, binary, 100 MiB streamed, 1,000 files), damage and fallback,
 * revisions, generations kept, hard links that a later change never
 * reaches, reloads into an earlier snapshot's buffers (and their failure
 * at every call), partial generations, the unclean-shutdown marker, the
 * audit trail, read-only handles, and failed commits (ENOSPC, EROFS,
 * rename).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "fault.h"
#include "fsafe.h"
#include "testutil.h"

struct fx {
	char *scratch;
	char dir[4096];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->scratch = tu_mkscratch();
	snprintf(f->dir, sizeof(f->dir), "%s/ckpt", f->scratch);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	fault_remove();
	tu_rmtree(f->scratch);
	free(f->scratch);
	free(f);
	return 0;
}

static fsafe_checkpoint *open_rev(const struct fx *f, const char *rev,
                                  unsigned flags)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;

	o.flags = FSAFE_CHECKPOINT_CREATE | flags;
	o.revision = rev;
	int r = fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp);
	if (r < 0)
		fail_msg("open: %s", fsafe_strerror(r));
	return cp;
}

static fsafe_checkpoint *open_cp(const struct fx *f)
{
	return open_rev(f, "r1", 0);
}

struct file {
	const char *name;
	const void *buf;
	size_t len;
};

static uint64_t save(fsafe_checkpoint *cp, const struct file *fs, size_t n)
{
	fsafe_checkpoint_tx *tx;
	uint64_t gen = 0;

	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(fsafe_checkpoint_add(tx, fs[i].name, fs[i].buf,
		                                      fs[i].len), 0);
	int r = fsafe_checkpoint_commit(tx, &gen);
	if (r != 0)
		fail_msg("commit: %s", fsafe_strerror(r));
	return gen;
}

/* The snapshot holds exactly the files fs (any order). */
static void expect_set(const fsafe_checkpoint_snapshot *s,
                       const struct file *fs, size_t n)
{
	assert_int_equal(fsafe_checkpoint_snapshot_count(s), n);
	for (size_t i = 0; i < n; i++) {
		long k = fsafe_checkpoint_snapshot_find(s, fs[i].name);
		if (k < 0)
			fail_msg("%s missing from the snapshot", fs[i].name);
		assert_int_equal(fsafe_checkpoint_snapshot_size(s, (size_t)k),
		                 fs[i].len);
		const void *d = fsafe_checkpoint_snapshot_data(s, (size_t)k);
		assert_non_null(d);
		if (fs[i].len && memcmp(d, fs[i].buf, fs[i].len) != 0)
			fail_msg("%s: bytes differ", fs[i].name);
	}
}

static void expect_loads(fsafe_checkpoint *cp, const struct file *fs,
                         size_t n, uint64_t gen)
{
	fsafe_checkpoint_snapshot *s;
	int r = fsafe_checkpoint_load(cp, NULL, &s);

	if (r != 0)
		fail_msg("load: %s", r > 0 ? "warning" : fsafe_strerror(r));
	assert_int_equal(fsafe_checkpoint_snapshot_generation(s), gen);
	expect_set(s, fs, n);
	fsafe_checkpoint_snapshot_free(s);
}

static char *gen_path(const struct fx *f, uint64_t gen, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/gen-%012llu%s%s", f->dir, (unsigned long long)gen,
	             name ? "/" : "", name ? name : "") < 0)
		abort();
	return p;
}

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

/* ---- round trips ---------------------------------------------------------- */

static void no_checkpoint_yet(void **state)
{
	fsafe_checkpoint *cp = open_cp(*state);
	fsafe_checkpoint_snapshot *s;

	assert_int_equal(fsafe_checkpoint_current(cp), 0);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), -ENOENT);
	assert_null(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

static void round_trip_empty_and_binary(void **state)
{
	struct fx *f = *state;
	unsigned char bin[256 * 3];
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (unsigned char)(i * 7);
	const struct file fs[] = {
		{ "empty", "", 0 },
		{ "binary.bin", bin, sizeof(bin) },
		{ "with space and ünïcode", "x\0y\n", 4 },
		{ ".hidden", "h", 1 },
	};
	fsafe_checkpoint *cp = open_cp(f);

	assert_int_equal(save(cp, fs, 4), 1);
	expect_loads(cp, fs, 4, 1);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* And after a reopen, from the disk alone. */
	cp = open_cp(f);
	assert_false(fsafe_checkpoint_was_unclean(cp));
	assert_int_equal(fsafe_checkpoint_current(cp), 1);
	expect_loads(cp, fs, 4, 1);
	assert_int_equal(fsafe_checkpoint_verify(cp, 0, NULL), 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* An empty set is a set too. */
	cp = open_cp(f);
	assert_int_equal(save(cp, NULL, 0), 2);
	expect_loads(cp, NULL, 0, 2);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

static void round_trip_many_files(void **state)
{
	struct fx *f = *state;
	enum { N = 1000 };
	static struct file fs[N];
	static char names[N][32];
	unsigned char *data = tu_pattern(N * 64, 3);
	fsafe_checkpoint *cp = open_cp(f);

	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "part-%04zu.dat", N - i);
		fs[i] = (struct file){ names[i], data + i * 64, i % 65 };
	}
	assert_int_equal(save(cp, fs, N), 1);
	expect_loads(cp, fs, N, 1);
	/* Listing order is name order. */
	fsafe_checkpoint_snapshot *s;
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	lo.flags = FSAFE_CHECKPOINT_MANIFEST_ONLY;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s), 0);
	assert_string_equal(fsafe_checkpoint_snapshot_name(s, 0),
	                    "part-0001.dat");
	assert_null(fsafe_checkpoint_snapshot_data(s, 0));
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(data);
}

/* 100 MiB through a stream (the managed writer), in 1 MiB pieces. */
static void round_trip_large_stream(void **state)
{
	struct fx *f = *state;
	const size_t total = (size_t)100 << 20, piece = (size_t)1 << 20;
	unsigned char *big = tu_pattern(total, 11);
	fsafe_checkpoint *cp = open_cp(f);
	fsafe_checkpoint_tx *tx;
	fsafe_checkpoint_stream *st;
	uint64_t gen;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add_stream(tx, "big.bin", &st), 0);
	for (size_t off = 0; off < total; off += piece)
		assert_int_equal(fsafe_checkpoint_stream_write(st, big + off,
		                                               piece), 0);
	assert_int_equal(fsafe_checkpoint_stream_close(st), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "small", "s", 1), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, &gen), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	const struct file fs[] = { { "big.bin", big, total },
	                           { "small", "s", 1 } };
	expect_loads(cp, fs, 2, gen);
	print_message("100 MiB streamed and committed in %.2f s\n",
	              (double)(t1.tv_sec - t0.tv_sec) +
	                      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(big);
}

/* ---- damage, fallback, revisions ---------------------------------------- */

static void overwrite(const char *path, const char *bytes)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, strlen(bytes), 0),
	                 (ssize_t)strlen(bytes));
	close(fd);
}

static void damage_and_fallback(void **state)
{
	struct fx *f = *state;
	const struct file a[] = { { "x", "old-x", 5 }, { "y", "old-y", 5 } };
	const struct file b[] = { { "x", "new-x", 5 }, { "y", "new-y", 5 } };
	fsafe_checkpoint *cp = open_cp(f);
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	struct fsafe_checkpoint_damage dm;
	fsafe_checkpoint_snapshot *s;

	save(cp, a, 2);
	save(cp, b, 2);
	/* Flip bytes of gen 2's y in place (as bit rot would). */
	char *p = gen_path(f, 2, "y");
	overwrite(p, "NEW");
	free(p);
	lo.damage = &dm;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s), -EBADMSG);
	assert_int_equal(dm.generation, 2);
	assert_int_equal(dm.code, -EBADMSG);
	assert_string_equal(dm.file, "y");
	assert_int_equal(fsafe_checkpoint_verify(cp, 2, &dm), -EBADMSG);
	assert_string_equal(dm.file, "y");
	lo.flags = FSAFE_CHECKPOINT_FALLBACK;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s),
	                 FSAFE_CHECKPOINT_FELL_BACK);
	assert_int_equal(fsafe_checkpoint_snapshot_generation(s), 1);
	assert_string_equal(dm.file, "y");
	expect_set(s, a, 2);
	fsafe_checkpoint_snapshot_free(s);
	/* A missing file and a damaged manifest are named too. */
	p = gen_path(f, 1, "x");
	assert_int_equal(unlink(p), 0);
	free(p);
	assert_int_equal(fsafe_checkpoint_verify(cp, 1, &dm), -ENOENT);
	assert_string_equal(dm.file, "x");
	p = gen_path(f, 2, ".manifest");
	overwrite(p, "fsafe-checkpoint 9");
	free(p);
	lo.flags = 0;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s), -EBADMSG);
	assert_string_equal(dm.file, "");
	/* Nothing intact left to fall back on. */
	lo.flags = FSAFE_CHECKPOINT_FALLBACK;
	assert_true(fsafe_checkpoint_load(cp, &lo, &s) < 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

static void other_revision_warns(void **state)
{
	struct fx *f = *state;
	const struct file a[] = { { "x", "1", 1 } };
	fsafe_checkpoint *cp = open_rev(f, "engine 1.0", 0);
	fsafe_checkpoint_snapshot *s;

	save(cp, a, 1);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	assert_string_equal(fsafe_checkpoint_snapshot_revision(s),
	                    "engine 1.0");
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	cp = open_rev(f, "engine 2.0", 0);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s),
	                 FSAFE_CHECKPOINT_OTHER_REVISION);
	expect_set(s, a, 1);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* No revision given: nothing to compare with. */
	cp = open_rev(f, NULL, 0);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

/* ---- generations ------------------------------------------------------------- */

static void keeps_k_generations(void **state)
{
	struct fx *f = *state;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;
	uint64_t g[8];
	char v[2] = "0";

	for (int i = 1; i <= 5; i++) {
		cp = open_cp(f);
		v[0] = (char)('0' + i);
		const struct file a[] = { { "v", v, 1 } };
		save(cp, a, 1);
		assert_int_equal(fsafe_checkpoint_close(cp), 0);
	}
	cp = open_cp(f);
	assert_int_equal(fsafe_checkpoint_generations(cp, g, 8), 2);
	assert_int_equal(g[0], 4);
	assert_int_equal(g[1], 5);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* keep = 3 */
	o.keep = 3;
	o.flags = 0;
	o.revision = "r1";
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp), 0);
	for (int i = 0; i < 3; i++)
		save(cp, (const struct file[]){ { "v", "z", 1 } }, 1);
	assert_int_equal(fsafe_checkpoint_generations(cp, g, 8), 3);
	assert_int_equal(g[0], 6);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* A specific generation loads. */
	cp = open_cp(f);
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	fsafe_checkpoint_snapshot *s;
	lo.generation = 7;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s), 0);
	assert_int_equal(fsafe_checkpoint_snapshot_generation(s), 7);
	fsafe_checkpoint_snapshot_free(s);
	lo.generation = 2;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s), -ENOENT);
	lo.generation = 99;
	assert_int_equal(fsafe_checkpoint_load(cp, &lo, &s), -ENOENT);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

static bool is_gen_name(const char *name)
{
	return strncmp(name, "gen-", 4) == 0;
}

/*
 * A save's removal of the oldest generation runs on after commit returns
 * (beside the caller's next steps); anything that lists generations
 * waits for it, so the caller never sees more than `keep`.
 */
static void removal_waited_for(void **state)
{
	struct fx *f = *state;
	fsafe_checkpoint *cp = open_cp(f);
	static unsigned char big[512 * 1024];
	uint64_t g[8];

	for (int i = 1; i <= 6; i++) {
		big[0] = (unsigned char)i;
		const struct file a[] = { { "big", big, sizeof(big) },
		                          { "small", "s", 1 } };
		assert_int_equal(save(cp, a, 2), (uint64_t)i);
		int want = i < 2 ? i : 2;
		assert_int_equal(fsafe_checkpoint_generations(cp, g, 8), want);
		assert_int_equal(g[want - 1], (uint64_t)i);
		assert_int_equal(tu_count_matching(f->dir, is_gen_name), want);
	}
	/* Close waits too: a save, then close at once. */
	big[0] = 7;
	save(cp, (const struct file[]){ { "big", big, sizeof(big) } }, 1);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	assert_int_equal(tu_count_matching(f->dir, is_gen_name), 2);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, f->dir, NULL, NULL),
	                 0);
}

static ino_t ino_of(const char *p)
{
	struct stat st;

	assert_int_equal(lstat(p, &st), 0);
	return st.st_ino;
}

/*
 * An unchanged file is hard-linked from the previous generation; a later
 * change makes a new inode, so the older generations keep their bytes.
 */
static void links_never_leak_changes(void **state)
{
	struct fx *f = *state;
	const size_t n = 1 << 20;
	unsigned char *big = tu_pattern(n, 5), *big2 = tu_pattern(n, 6);
	const struct file a[] = { { "big", big, n }, { "s", "a", 1 } };
	const struct file b[] = { { "big", big, n }, { "s", "b", 1 } };
	const struct file c[] = { { "big", big2, n }, { "s", "c", 1 } };
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;

	o.keep = 3;
	o.flags = FSAFE_CHECKPOINT_CREATE;
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp), 0);
	save(cp, a, 2);
	save(cp, b, 2);
	char *p1 = gen_path(f, 1, "big"), *p2 = gen_path(f, 2, "big"),
	     *p3 = gen_path(f, 3, "big"), *s1 = gen_path(f, 1, "s"),
	     *s2 = gen_path(f, 2, "s");
	assert_int_equal(ino_of(p1), ino_of(p2));
	assert_int_not_equal(ino_of(s1), ino_of(s2));
	/* The same through a stream. */
	fsafe_checkpoint_tx *tx;
	fsafe_checkpoint_stream *st;
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add_stream(tx, "big", &st), 0);
	assert_int_equal(fsafe_checkpoint_stream_write(st, big2, n), 0);
	assert_int_equal(fsafe_checkpoint_stream_close(st), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "s", "c", 1), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
	assert_int_not_equal(ino_of(p3), ino_of(p2));
	assert_true(tu_equals(f->dir, "gen-000000000001/big", big, n));
	assert_true(tu_equals(f->dir, "gen-000000000002/big", big, n));
	assert_true(tu_equals(f->dir, "gen-000000000003/big", big2, n));
	/* Every generation still verifies. */
	for (uint64_t g = 1; g <= 3; g++)
		assert_int_equal(fsafe_checkpoint_verify(cp, g, NULL), 0);
	expect_loads(cp, c, 2, 3);
	/* Streaming the same bytes again links instead of writing. */
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add_stream(tx, "big", &st), 0);
	assert_int_equal(fsafe_checkpoint_stream_write(st, big2, n), 0);
	assert_int_equal(fsafe_checkpoint_stream_close(st), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
	char *p4 = gen_path(f, 4, "big");
	assert_int_equal(ino_of(p4), ino_of(p3));
	/* A damaged previous copy is never carried forward. */
	overwrite(p4, "rot");
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "big", big2, n), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
	char *p5 = gen_path(f, 5, "big");
	assert_int_not_equal(ino_of(p5), ino_of(p4));
	assert_int_equal(fsafe_checkpoint_verify(cp, 5, NULL), 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* With NO_LINK, never shared. */
	o.flags = FSAFE_CHECKPOINT_NO_LINK;
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp), 0);
	const struct file d[] = { { "big", big2, n } };
	save(cp, d, 1);
	char *p6 = gen_path(f, 6, "big");
	assert_int_not_equal(ino_of(p6), ino_of(p5));
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(p1), free(p2), free(p3), free(p4), free(p5), free(p6);
	free(s1), free(s2), free(big), free(big2);
}

/* A generation newer than CURRENT is never loaded and goes at open. */
static void partial_generation_ignored_and_removed(void **state)
{
	struct fx *f = *state;
	const struct file a[] = { { "x", "old", 3 } };
	fsafe_checkpoint *cp = open_cp(f);
	fsafe_checkpoint_snapshot *s;

	save(cp, a, 1);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* What a crash before CURRENT leaves: a full-looking generation 2
	   (a copy of 1 renumbered would fail its manifest; copy files). */
	char *g2 = gen_path(f, 2, NULL), *g1m = gen_path(f, 1, ".manifest");
	assert_int_equal(mkdir(g2, 0755), 0);
	tu_put(g2, "x", "new", 3);
	size_t len;
	char *m = tu_get(g2, "../gen-000000000001/.manifest", &len);
	tu_put(g2, ".manifest", m, len);
	free(m);
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	o.flags = FSAFE_CHECKPOINT_READ_ONLY;
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp), 0);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	assert_int_equal(fsafe_checkpoint_snapshot_generation(s), 1);
	fsafe_checkpoint_snapshot_free(s);
	uint64_t g[4];
	assert_int_equal(fsafe_checkpoint_generations(cp, g, 4), 1);
	fsafe_checkpoint_tx *tx;
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), -EROFS);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	assert_true(exists(g2));
	cp = open_cp(f);
	assert_false(exists(g2));
	expect_loads(cp, a, 1, 1);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(g2), free(g1m);
}

/* ---- marker, audit trail, lock ------------------------------------------- */

struct evlist {
	int n;
	struct fsafe_checkpoint_event e[64];
};

static int collect(const struct fsafe_checkpoint_event *e, void *arg)
{
	struct evlist *l = arg;

	if (l->n < 64)
		l->e[l->n++] = *e;
	return 0;
}

static int count_kind(const struct evlist *l,
                      enum fsafe_checkpoint_event_kind k)
{
	int n = 0;

	for (int i = 0; i < l->n; i++)
		n += l->e[i].kind == k;
	return n;
}

static void unclean_shutdown_and_events(void **state)
{
	struct fx *f = *state;
	const struct file a[] = { { "x", "1", 1 } };
	struct evlist l = { 0 };
	size_t damaged;
	fsafe_checkpoint *cp = open_cp(f);
	fsafe_checkpoint_snapshot *s;

	save(cp, a, 1);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* A writer that dies holding the checkpoint. */
	pid_t pid = fork();
	if (pid == 0) {
		fsafe_checkpoint *c2;
		struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
		_exit(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &c2) ? 1 : 0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cp = open_cp(f);
	assert_true(fsafe_checkpoint_was_unclean(cp));
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	cp = open_cp(f);
	assert_false(fsafe_checkpoint_was_unclean(cp));
	assert_int_equal(fsafe_checkpoint_close(cp), 0);

	assert_int_equal(fsafe_checkpoint_events(AT_FDCWD, f->dir, collect, &l,
	                                         &damaged), 0);
	assert_int_equal(damaged, 0);
	assert_int_equal(count_kind(&l, FSAFE_CHECKPOINT_EV_SAVED), 1);
	assert_int_equal(count_kind(&l, FSAFE_CHECKPOINT_EV_RECOVERED), 1);
	assert_int_equal(count_kind(&l, FSAFE_CHECKPOINT_EV_LOADED), 1);
	for (int i = 0; i < l.n; i++) {
		assert_int_equal(l.e[i].generation, 1);
		assert_true(l.e[i].time_ms > 1600000000000);
		assert_true(l.e[i].pid > 0);
	}
	assert_string_equal(fsafe_checkpoint_event_name(
		                    FSAFE_CHECKPOINT_EV_REMOVED), "removed");

	/* A torn tail (a cut append) is skipped by a reader; the writer's
	   open sets it aside (the whole log to quarantine, the intact
	   records back), so later records do not bury it as damage. */
	char *log = NULL;
	if (asprintf(&log, "%s/events.log", f->dir) < 0)
		abort();
	int fd = open(log, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, "17000 12 sav", 12), 12);
	close(fd);
	assert_int_equal(fsafe_checkpoint_events(AT_FDCWD, f->dir, collect, &l,
	                                         &damaged), 0);
	assert_int_equal(damaged, 1);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, f->dir, NULL, NULL),
	                 1);
	cp = open_cp(f);
	save(cp, a, 1);
	save(cp, a, 1); /* removes gen 1 (keep 2) */
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	l.n = 0;
	assert_int_equal(fsafe_checkpoint_events(AT_FDCWD, f->dir, collect, &l,
	                                         &damaged), 0);
	assert_int_equal(damaged, 0);
	assert_int_equal(count_kind(&l, FSAFE_CHECKPOINT_EV_SAVED), 3);
	assert_int_equal(count_kind(&l, FSAFE_CHECKPOINT_EV_REMOVED), 1);
	assert_int_equal(count_kind(&l, FSAFE_CHECKPOINT_EV_QUARANTINED), 1);
	assert_int_equal(fsafe_checkpoint_check(AT_FDCWD, f->dir, NULL, NULL),
	                 0);
	/* The torn bytes are kept, not deleted. */
	size_t tl = 0;
	char *text = tu_get(f->dir, "quarantine/events.log", &tl);
	assert_non_null(text);
	assert_true(tl >= 12 && memcmp(text + tl - 12, "17000 12 sav", 12) == 0);
	free(text);
	free(log);
}

/* A load records its event without waiting for the device: no sync of
   any kind goes through the system-call table, and the event is there. */
static void load_never_syncs(void **state)
{
	struct fx *f = *state;
	unsigned char *big = tu_pattern((size_t)1 << 20, 5);
	const struct file a[] = { { "x", "1", 1 }, { "big", big, 1 << 20 } };
	struct evlist l = { 0 };
	size_t damaged;
	fsafe_checkpoint *cp = open_cp(f);
	fsafe_checkpoint_snapshot *s;

	save(cp, a, 2);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	int syncs = fault_calls_named("fsync") + fault_calls_named("fdatasync") +
	            fault_calls_named("syncfs");
	fault_remove();
	assert_int_equal(syncs, 0);
	expect_set(s, a, 2);
	/* A large file's bytes start on a page (see fsafe__io_alloc). */
	long k = fsafe_checkpoint_snapshot_find(s, "big");
	assert_true(k >= 0);
	assert_int_equal((uintptr_t)fsafe_checkpoint_snapshot_data(s, (size_t)k) %
	                 4096, 0);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	assert_int_equal(fsafe_checkpoint_events(AT_FDCWD, f->dir, collect, &l,
	                                         &damaged), 0);
	assert_int_equal(damaged, 0);
	assert_int_equal(count_kind(&l, FSAFE_CHECKPOINT_EV_LOADED), 1);
	free(big);
}

static uintptr_t data_at(const fsafe_checkpoint_snapshot *s, const char *name)
{
	long k = fsafe_checkpoint_snapshot_find(s, name);

	assert_true(k >= 0);
	return (uintptr_t)fsafe_checkpoint_snapshot_data(s, (size_t)k);
}

/* A reload hands in the last snapshot: a file of the same name is read
   into its old buffer (the same one when it fits), larger ones and new
   files get room of their own, the rest is freed (ASan's leak check sees
   it), and a failed load frees it too. */
static void reload_reuses_buffers(void **state)
{
	struct fx *f = *state;
	unsigned char *p1 = tu_pattern(300 << 10, 1);
	unsigned char *p2 = tu_pattern(200 << 10, 2);
	const struct file g1[] = {
		{ "a", p1, 300 << 10 }, { "b", "0123456789", 10 },
		{ "c", p1, 1000 },
	};
	const struct file g2[] = {
		{ "a", p2, 200 << 10 }, { "b", p2, 20 << 10 }, { "d", "new", 3 },
	};
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	fsafe_checkpoint *cp = open_cp(f);
	fsafe_checkpoint_snapshot *s = NULL, *plain;

	save(cp, g1, 3);
	/* From nothing: a plain load. */
	assert_int_equal(fsafe_checkpoint_reload(cp, NULL, &s), 0);
	expect_set(s, g1, 3);
	uintptr_t a1 = data_at(s, "a");
	save(cp, g2, 3);
	assert_int_equal(fsafe_checkpoint_reload(cp, NULL, &s), 0);
	expect_set(s, g2, 3);
	assert_true(data_at(s, "a") == a1);
	/* Again, from the buffers reused (b's is the grown one now). */
	assert_int_equal(fsafe_checkpoint_reload(cp, NULL, &s), 0);
	expect_set(s, g2, 3);
	assert_true(data_at(s, "a") == a1);
	/* A plain load takes fresh memory. */
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &plain), 0);
	assert_true(data_at(plain, "a") != a1);
	fsafe_checkpoint_snapshot_free(plain);
	/* A damaged generation: the reload fails and takes s with it; with
	   a fallback, the reused snapshot serves the older generation. */
	char *path = gen_path(f, 2, "b");
	overwrite(path, "damage");
	free(path);
	assert_int_equal(fsafe_checkpoint_reload(cp, NULL, &s), -EBADMSG);
	assert_null(s);
	lo.generation = 1;
	assert_int_equal(fsafe_checkpoint_reload(cp, &lo, &s), 0);
	lo.generation = 0;
	lo.flags = FSAFE_CHECKPOINT_FALLBACK;
	assert_int_equal(fsafe_checkpoint_reload(cp, &lo, &s),
	                 FSAFE_CHECKPOINT_FELL_BACK);
	expect_set(s, g1, 3);
	/* A snapshot without data (MANIFEST_ONLY) has nothing to give. */
	lo.flags = FSAFE_CHECKPOINT_MANIFEST_ONLY;
	assert_int_equal(fsafe_checkpoint_reload(cp, &lo, &s), 0);
	assert_null(fsafe_checkpoint_snapshot_data(s, 0));
	lo.flags = 0;
	lo.generation = 1;
	assert_int_equal(fsafe_checkpoint_reload(cp, &lo, &s), 0);
	expect_set(s, g1, 3);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(p1);
	free(p2);
}

/* A reload that fails at any one of its calls (EIO) leaves no snapshot
   and frees the one it was handed (ASan's leak check sees the rest); one
   that succeeds despite it holds the right bytes. */
static void reload_fails_at_every_call(void **state)
{
	struct fx *f = *state;
	unsigned char *big = tu_pattern(300 << 10, 3);
	const struct file g[] = { { "a", "x", 1 }, { "big", big, 300 << 10 } };
	fsafe_checkpoint *cp = open_cp(f);
	fsafe_checkpoint_snapshot *s = NULL;
	int calls, failed = 0;

	save(cp, g, 2);
	assert_int_equal(fsafe_checkpoint_reload(cp, NULL, &s), 0);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_checkpoint_reload(cp, NULL, &s), 0);
	calls = fault_calls();
	fault_remove();
	for (int n = 1; n <= calls; n++) {
		if (!s)
			assert_int_equal(fsafe_checkpoint_reload(cp, NULL, &s), 0);
		fault_install(&(struct fault_plan){
			.at = n, .kind = FAULT_ERRNO, .err = EIO });
		int r = fsafe_checkpoint_reload(cp, NULL, &s);
		fault_remove();
		if (r < 0 && s)
			fail_msg("call %d: failed (%d) with a snapshot", n, r);
		if (r >= 0)
			expect_set(s, g, 2);
		failed += r < 0;
	}
	assert_true(calls > 0 && failed > 0);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	free(big);
}

static void one_writer_at_a_time(void **state)
{
	struct fx *f = *state;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp = open_cp(f), *c2;

	o.flags = FSAFE_CHECKPOINT_NO_WAIT;
	pid_t pid = fork();
	if (pid == 0)
		_exit(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &c2) ==
		      -EWOULDBLOCK ? 0 : 1);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* A reader does not need the lock. */
	o.flags = FSAFE_CHECKPOINT_READ_ONLY;
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &c2), 0);
	assert_int_equal(fsafe_checkpoint_close(c2), 0);
	/* One transaction at a time per handle. */
	fsafe_checkpoint_tx *tx, *tx2;
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx2), -EBUSY);
	fsafe_checkpoint_abort(tx);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	/* Only the log remains: no CURRENT, no LOCK, no OPEN, no gen-*. */
	assert_int_equal(tu_count_entries(f->dir), 1);
}

static void bad_arguments(void **state)
{
	struct fx *f = *state;
	fsafe_checkpoint *cp = open_cp(f);
	fsafe_checkpoint_tx *tx;
	fsafe_checkpoint_stream *st;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;

	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	static const char *const bad[] = { "", ".", "..", "a/b", ".manifest",
	                                   "new\nline",
	                                   ".fsafe-0123456789abcdef01234567.tmp" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(fsafe_checkpoint_add(tx, bad[i], "x", 1),
		                 -EINVAL);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", "x", 1), 0);
	assert_int_equal(fsafe_checkpoint_add(tx, "a", "y", 1), -EEXIST);
	/* A stream left open: the commit refuses and changes nothing. */
	assert_int_equal(fsafe_checkpoint_add_stream(tx, "s", &st), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), -EBUSY);
	assert_int_equal(fsafe_checkpoint_current(cp), 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	o.revision = "bad\trev";
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp),
	                 -EINVAL);
	o.revision = NULL;
	o.flags = 1u << 20;
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp),
	                 -EINVAL);
	/* A malformed CURRENT is damage, not "no checkpoint": the open says
	   so (and nothing is removed until a repair or a save). */
	tu_put(f->dir, "CURRENT", "gen-1\n", 6);
	o.flags = 0;
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, f->dir, &o, &cp), 0);
	assert_int_equal(fsafe_checkpoint_current_error(cp), -EBADMSG);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

/* ---- failed commits ---------------------------------------------------------- */

/* The names in the checkpoint directory that look like generations newer
   than CURRENT (which load could never pick, but must not exist after a
   failed commit either). */
static int partial_count(const struct fx *f, uint64_t current)
{
	int n = 0;

	for (uint64_t g = current + 1; g < current + 4; g++) {
		char *p = gen_path(f, g, NULL);
		n += exists(p);
		free(p);
	}
	return n;
}

static const struct file fa[] = { { "m.json", "{\"v\":1}", 7 },
                                  { "r.jsonl", "old\n", 4 } };
static const struct file fb[] = { { "m.json", "{\"v\":2}", 7 },
                                  { "r.jsonl", "new\nnew\n", 8 } };

/* Open `dir`, save fa, begin a transaction adding fb. */
static fsafe_checkpoint *prepare(const char *dir, fsafe_checkpoint_tx **tx)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;

	o.flags = FSAFE_CHECKPOINT_CREATE;
	o.revision = "r1";
	assert_int_equal(fsafe_checkpoint_open(AT_FDCWD, dir, &o, &cp), 0);
	save(cp, fa, 2);
	assert_int_equal(fsafe_checkpoint_begin(cp, tx), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fsafe_checkpoint_add(*tx, fb[i].name,
		                                      fb[i].buf, fb[i].len), 0);
	return cp;
}

/* The commit's first (or last) call named `name`, counted in a twin
   directory. */
static int find_call(const struct fx *f, const char *name, bool last)
{
	char twin[4200];
	fsafe_checkpoint_tx *tx;
	int at = 0;

	snprintf(twin, sizeof(twin), "%s-twin", f->dir);
	fsafe_checkpoint *cp = prepare(twin, &tx);
	fault_install(&(struct fault_plan){ .kind = FAULT_NONE });
	assert_int_equal(fsafe_checkpoint_commit(tx, NULL), 0);
	for (int i = 1; i <= fault_calls() && (last || !at); i++)
		if (strcmp(fault_call_name(i), name) == 0)
			at = i;
	fault_remove();
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	if (!at)
		fail_msg("no %s call in a commit", name);
	return at;
}

/*
 * A commit failing at its first `name` call (from then on, as a full or
 * read-only filesystem does; or once, as a failed rename) leaves the
 * previous checkpoint loadable and byte-identical, and no generation load
 * could pick; once the fault is gone, the next open removes the partial
 * one (a read-only filesystem may keep it until then) and a save works.
 */
static void failed_commit_with(const struct fx *f, const char *name, int err,
                               bool persist, bool last)
{
	fsafe_checkpoint_tx *tx;
	int at = find_call(f, name, last);
	fsafe_checkpoint *cp = prepare(f->dir, &tx);
	uint64_t g[4];

	fault_install(&(struct fault_plan){
		.at = at, .kind = persist ? FAULT_PERSIST : FAULT_ERRNO,
		.err = err });
	int r = fsafe_checkpoint_commit(tx, NULL);
	bool fired = fault_fired();
	fault_remove();
	print_message("%s %s at call %d: commit %s\n", name, strerror(err), at,
	              fsafe_strerror(r));
	assert_true(fired);
	assert_int_equal(r, -err);
	assert_int_equal(fsafe_checkpoint_current(cp), 1);
	expect_loads(cp, fa, 2, 1);
	assert_int_equal(fsafe_checkpoint_generations(cp, g, 4), 1);
	assert_int_equal(fsafe_checkpoint_verify(cp, 0, NULL), 0);
	if (!persist)
		assert_int_equal(partial_count(f, 1), 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	cp = open_cp(f);
	assert_int_equal(partial_count(f, 1), 0);
	expect_loads(cp, fa, 2, 1);
	/* The partial one's number is not reused once the audit trail
	   names it (its removal was recorded). */
	uint64_t g2 = save(cp, fb, 2);
	assert_true(g2 == 2 || g2 == 3);
	expect_loads(cp, fb, 2, g2);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

static void failed_commit_enospc(void **state)
{
	failed_commit_with(*state, "write", ENOSPC, true, false);
}

static void failed_commit_erofs(void **state)
{
	failed_commit_with(*state, "openat", EROFS, true, false);
}

static void failed_commit_erofs_fsync(void **state)
{
	failed_commit_with(*state, "fsync", EROFS, true, false);
}

static void failed_commit_rename(void **state)
{
	failed_commit_with(*state, "renameat", EIO, false, false);
}

/* The last rename of a commit is CURRENT's own. */
static void failed_commit_current_rename(void **state)
{
	failed_commit_with(*state, "renameat", EIO, false, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(no_checkpoint_yet, setup, teardown),
		cmocka_unit_test_setup_teardown(round_trip_empty_and_binary,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(round_trip_many_files, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(round_trip_large_stream, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(damage_and_fallback, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(other_revision_warns, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(removal_waited_for, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(keeps_k_generations, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(links_never_leak_changes, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(
			partial_generation_ignored_and_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(load_never_syncs, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(unclean_shutdown_and_events,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(reload_reuses_buffers, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(reload_fails_at_every_call,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(one_writer_at_a_time, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(bad_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(failed_commit_enospc, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(failed_commit_erofs, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(failed_commit_erofs_fsync, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(failed_commit_rename, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(failed_commit_current_rename,
		                                setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
