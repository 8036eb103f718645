/*
 * A generation read and checked with reading and hashing overlapped
 * (src/checkpoint_load.c), in every way its work can be shared: the
 * caller's thread alone, a reader thread beside it (the two racing for
 * the files from both ends), and a reader that hashes every file before
 * the caller starts. Each must return every file's exact bytes, and find
 * every kind of damage in every file (a flipped byte, one byte fewer or
 * more, the file missing, a FIFO or a symlink in its place) without
 * hanging, naming the damaged file and leaving no buffer behind; by the
 * CRC-32C a manifest of version 2 has, and by the SHA-256 alone where it
 * has none (version 1). A check (verify) takes both sums.
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
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "checkpoint_load.h"
#include "util.h"
#include "crc32c.h"
#include "fsafe.h"
#include "fsafe/checkpoint.h"
#include "manifest.h"
#include "sha256.h"
#include "sys.h"
#include "testutil.h"
#include "util.h"

/* Name order is the manifest's: the reader thread starts at "a", the
   caller's rival at "e". Two files are pieces long (256 KiB pieces). */
enum { NFILES = 5 };
static const char *const names[NFILES] = { "a", "b", "c", "d", "e" };
static const size_t sizes[NFILES] = { 0, 1, (300 << 10) + 5, 64 << 10,
	                              (1 << 20) + 3 };

static const enum fsafe__load_how hows[] = {
	FSAFE__LOAD_AUTO, FSAFE__LOAD_INLINE, FSAFE__LOAD_THREAD,
	FSAFE__LOAD_READER_FIRST,
};
static const char *const how_names[] = { "auto", "inline", "thread",
	                                 "reader first" };
enum { NHOWS = sizeof(hows) / sizeof(hows[0]) };

struct fx {
	struct tu_fx *t;
	unsigned char *bytes[NFILES];
	char gen[4200];   /* the generation's directory */
	int gfd;
	struct fsafe__manifest m;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	fsafe_checkpoint *cp;
	fsafe_checkpoint_tx *tx;
	uint64_t gen;
	char *text;
	size_t len;

	assert_int_equal(tu_fx_setup((void **)&f->t), 0);
	o.flags = FSAFE_CHECKPOINT_CREATE;
	assert_int_equal(fsafe_checkpoint_open(f->t->dirfd, "cp", &o, &cp), 0);
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	for (int i = 0; i < NFILES; i++) {
		f->bytes[i] = tu_pattern(sizes[i], (unsigned)i + 1);
		assert_int_equal(fsafe_checkpoint_add(tx, names[i], f->bytes[i],
		                                      sizes[i]), 0);
	}
	assert_int_equal(fsafe_checkpoint_commit(tx, &gen), 0);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
	snprintf(f->gen, sizeof(f->gen), "%s/cp/gen-%0*llu", f->t->dir,
	         FSAFE__CKPT_GEN_DIGITS, (unsigned long long)gen);
	f->gfd = open(f->gen, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->gfd >= 0);
	assert_int_equal(fsafe__read_file_at(f->gfd, FSAFE__CKPT_MANIFEST,
	                                     1 << 20, &text, &len), 0);
	assert_int_equal(fsafe__manifest_parse(text, len, &f->m), 0);
	free(text);
	assert_int_equal(f->m.n, NFILES);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	fsafe__manifest_free(&f->m);
	close(f->gfd);
	for (int i = 0; i < NFILES; i++)
		free(f->bytes[i]);
	tu_fx_teardown((void **)&f->t);
	free(f);
	return 0;
}

/* One load of the generation: its result; data[] checked, then freed. */
static int load(struct fx *f, int k, size_t *bad)
{
	char *data[NFILES] = { NULL };
	int r = fsafe__ckpt_load_files(f->gfd, &f->m, data, bad, hows[k]);

	for (int i = 0; i < NFILES; i++) {
		if (r < 0 && data[i])
			fail_msg("%s: %s's buffer left after a failure",
			         how_names[k], names[i]);
		if (r == 0 && (!data[i] ||
		               memcmp(data[i], f->bytes[i], sizes[i]) != 0))
			fail_msg("%s: %s's bytes differ", how_names[k],
			         names[i]);
		fsafe__io_free(data[i]);
	}
	return r;
}

static void intact_every_way(void **state)
{
	struct fx *f = *state;
	size_t bad;

	/* The threads race differently each time. */
	for (int round = 0; round < 25; round++)
		for (int k = 0; k < NHOWS; k++)
			if (load(f, k, &bad) != 0)
				fail_msg("%s: an intact generation failed",
				         how_names[k]);
}

/* ---- damage ---------------------------------------------------------------- */

enum damage { FLIP, SHORTER, LONGER, MISSING, FIFO, SYMLINK, NDAMAGE };
static const char *const damage_names[] = { "a flipped byte", "one byte fewer",
	                                    "one byte more", "missing", "a FIFO",
	                                    "a symlink" };
static const int damage_codes[] = { -EBADMSG, -EBADMSG, -EBADMSG,
	                            -ENOENT, -EBADFD, -ELOOP };

/* Damage file i in place; false where that damage is no damage (a
   flipped byte of an empty file). */
static bool damage(struct fx *f, int i, enum damage d)
{
	const char *n = names[i];
	int fd;

	switch (d) {
	case FLIP: {
		if (!sizes[i])
			return false;
		unsigned char c = f->bytes[i][sizes[i] / 2] ^ 0x20;
		fd = openat(f->gfd, n, O_WRONLY | O_CLOEXEC);
		assert_int_equal(pwrite(fd, &c, 1, (off_t)(sizes[i] / 2)), 1);
		close(fd);
		return true;
	}
	case SHORTER:
		if (!sizes[i])
			return false;
		/* fallthrough */
	case LONGER:
		fd = openat(f->gfd, n, O_WRONLY | O_CLOEXEC);
		assert_int_equal(ftruncate(fd, (off_t)sizes[i] +
		                                       (d == LONGER ? 1 : -1)), 0);
		close(fd);
		return true;
	case MISSING:
	case FIFO:
	case SYMLINK:
		assert_int_equal(unlinkat(f->gfd, n, 0), 0);
		if (d == FIFO)
			assert_int_equal(mkfifoat(f->gfd, n, 0644), 0);
		if (d == SYMLINK)
			assert_int_equal(symlinkat("/etc/passwd", f->gfd, n), 0);
		return true;
	default:
		return false;
	}
}

/* File i as it was saved. */
static void restore(struct fx *f, int i)
{
	unlinkat(f->gfd, names[i], 0);
	int fd = openat(f->gfd, names[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	                0644);
	assert_true(fd >= 0);
	assert_int_equal(fsafe__write_all(fd, f->bytes[i], sizes[i]), 0);
	close(fd);
}

/* Whether the manifest's entries carry a CRC-32C (as version 2 saves
   them) or not (as version 1 did). */
static void with_crc(struct fx *f, bool on)
{
	for (size_t i = 0; i < f->m.n; i++)
		f->m.e[i].has_crc = on;
}

static void every_damage_found(struct fx *f, int *tried)
{
	for (int i = 0; i < NFILES; i++)
		for (int d = 0; d < NDAMAGE; d++) {
			if (!damage(f, i, (enum damage)d))
				continue;
			for (int k = 0; k < NHOWS; k++) {
				size_t bad = 99;
				int r = load(f, k, &bad);
				if (r != damage_codes[d] || bad != (size_t)i)
					fail_msg("%s, %s %s: %d (file %zu)",
					         how_names[k], names[i],
					         damage_names[d], r, bad);
				++*tried;
			}
			restore(f, i);
		}
}

static void every_damage_found_every_way(void **state)
{
	struct fx *f = *state;
	int tried = 0;
	size_t bad;

	for (int crc = 1; crc >= 0; crc--) {
		with_crc(f, crc);
		every_damage_found(f, &tried);
		assert_int_equal(load(f, 1, &bad), 0);
	}
	print_message("%d damaged loads, each found\n", tried);
}

/*
 * What each check compares: a load the CRC-32C where the entry has one,
 * else the SHA-256; a check of one file (verify) both. A sum changed in
 * the manifest stands for bytes that no longer match it.
 */
static void load_takes_crc_check_takes_both(void **state)
{
	struct fx *f = *state;
	size_t bad;

	for (int i = 0; i < NFILES; i++) {
		struct fsafe__ckpt_entry *e = &f->m.e[i];
		char hash = e->hash[7];

		assert_true(e->has_crc);
		e->hash[7] = hash == '0' ? '1' : '0';
		for (int k = 0; k < NHOWS; k++)
			assert_int_equal(load(f, k, &bad), 0);
		assert_int_equal(fsafe__ckpt_check_file(f->gfd, e, NULL),
		                 -EBADMSG);
		with_crc(f, false);
		for (int k = 0; k < NHOWS; k++) {
			assert_int_equal(load(f, k, &bad), -EBADMSG);
			assert_int_equal(bad, i);
		}
		with_crc(f, true);
		e->hash[7] = hash;
		assert_int_equal(fsafe__ckpt_check_file(f->gfd, e, NULL), 0);

		e->crc ^= 1u << (i * 5);
		for (int k = 0; k < NHOWS; k++) {
			assert_int_equal(load(f, k, &bad), -EBADMSG);
			assert_int_equal(bad, i);
		}
		assert_int_equal(fsafe__ckpt_check_file(f->gfd, e, NULL),
		                 -EBADMSG);
		e->has_crc = false; /* version 1: the SHA-256 alone */
		assert_int_equal(fsafe__ckpt_check_file(f->gfd, e, NULL), 0);
		e->has_crc = true;
		e->crc ^= 1u << (i * 5);
	}
}

/* The generation's manifest rewritten as version 1 wrote it: no CRC-32C. */
static void write_version_1(struct fx *f)
{
	char text[4096], hex[65];
	int n = snprintf(text, sizeof(text),
	                 "fsafe-checkpoint 1\nrevision %s\nsequence %llu\n"
	                 "time %lld\nfiles %zu\n", f->m.revision,
	                 (unsigned long long)f->m.seq, (long long)f->m.time_ms,
	                 f->m.n);
	for (size_t i = 0; i < f->m.n; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%llu %s %s\n",
		              (unsigned long long)f->m.e[i].size, f->m.e[i].hash,
		              f->m.e[i].name);
	fsafe__sha256_hex_of(text, (size_t)n, hex);
	n += snprintf(text + n, sizeof(text) - (size_t)n, "end %s\n", hex);
	tu_put(f->gen, FSAFE__CKPT_MANIFEST, text, (size_t)n);
}

/* A store saved before the CRC-32C: loads and verifies by the SHA-256,
   and finds damage; its next save writes version 2. */
static void version_1_manifest_loads(void **state)
{
	struct fx *f = *state;
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	struct fsafe__manifest m;
	fsafe_checkpoint_snapshot *s;
	fsafe_checkpoint *cp;
	char *text;
	size_t len;

	write_version_1(f);
	assert_int_equal(fsafe__read_file_at(f->gfd, FSAFE__CKPT_MANIFEST,
	                                     1 << 20, &text, &len), 0);
	assert_int_equal(fsafe__manifest_parse(text, len, &m), 0);
	free(text);
	for (size_t i = 0; i < m.n; i++)
		assert_false(m.e[i].has_crc);
	fsafe__manifest_free(&m);

	assert_int_equal(fsafe_checkpoint_open(f->t->dirfd, "cp", &o, &cp), 0);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	for (int i = 0; i < NFILES; i++)
		assert_memory_equal(fsafe_checkpoint_snapshot_data(s, (size_t)i),
		                    f->bytes[i], sizes[i]);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_verify(cp, 0, NULL), 0);
	assert_true(damage(f, 2, FLIP));
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), -EBADMSG);
	assert_int_equal(fsafe_checkpoint_verify(cp, 0, NULL), -EBADMSG);
	restore(f, 2);

	/* The next save links the unchanged files and gives them a CRC. */
	fsafe_checkpoint_tx *tx;
	uint64_t gen;
	assert_int_equal(fsafe_checkpoint_begin(cp, &tx), 0);
	for (int i = 0; i < NFILES; i++)
		assert_int_equal(fsafe_checkpoint_add(tx, names[i], f->bytes[i],
		                                      sizes[i]), 0);
	assert_int_equal(fsafe_checkpoint_commit(tx, &gen), 0);
	char gen_name[64];
	snprintf(gen_name, sizeof(gen_name), "cp/gen-%0*llu/%s",
	         FSAFE__CKPT_GEN_DIGITS, (unsigned long long)gen,
	         FSAFE__CKPT_MANIFEST);
	assert_int_equal(fsafe__read_file_at(f->t->dirfd, gen_name, 1 << 20,
	                                     &text, &len), 0);
	assert_int_equal(fsafe__manifest_parse(text, len, &m), 0);
	free(text);
	for (int i = 0; i < NFILES; i++) {
		assert_true(m.e[i].has_crc);
		assert_int_equal(m.e[i].crc, fsafe__crc32c(0, f->bytes[i],
		                                           sizes[i]));
	}
	fsafe__manifest_free(&m);
	assert_int_equal(fsafe_checkpoint_load(cp, NULL, &s), 0);
	fsafe_checkpoint_snapshot_free(s);
	assert_int_equal(fsafe_checkpoint_close(cp), 0);
}

/*
 * With two files damaged, the first found is named: the first in name
 * order when the caller hashes alone, the last when the reader hashes
 * from the end before the caller starts, either when they race. Either
 * way the check stops there.
 */
static void first_damage_found_is_named(void **state)
{
	struct fx *f = *state;
	size_t bad;

	assert_true(damage(f, 1, FLIP));
	assert_true(damage(f, 4, FLIP));
	assert_int_equal(load(f, 1, &bad), -EBADMSG); /* inline */
	assert_int_equal(bad, 1);
	assert_int_equal(load(f, 3, &bad), -EBADMSG); /* reader first */
	assert_int_equal(bad, 4);
	for (int round = 0; round < 10; round++) {
		assert_int_equal(load(f, 2, &bad), -EBADMSG); /* racing */
		assert_true(bad == 1 || bad == 4);
	}
	restore(f, 1);
	restore(f, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(intact_every_way, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(every_damage_found_every_way,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(first_damage_found_is_named,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(load_takes_crc_check_takes_both,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(version_1_manifest_loads,
		                                setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
