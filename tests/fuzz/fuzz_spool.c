/*
 * libFuzzer target for the spool's segment reader and recovery.
 *
 * Input: a selector byte, then
 *  - selector even ("damage"): a count byte and a length byte shape a valid
 *    spool of deterministic records over small segments, built in memory
 *    with the frame encoder; the rest is a list of 5-byte edits (op, u32
 *    position over all segment bytes and the cursor): flip a bit, set a
 *    byte, truncate the file there, zero 64 bytes, copy 48 bytes from an
 *    earlier spot, replay one whole frame of a segment over another (a
 *    stale frame with a valid checksum);
 *  - selector odd ("raw"): the rest is the frame area of one segment with a
 *    valid header, as hostile as the fuzzer makes it.
 * The spool is then opened (recovery), read through, opened again, and
 * checked with fsafe_spool_check.
 *
 * abort() (a finding) if: open fails for anything but resources; a record
 * read differs from the one built with its number (damage), or is not
 * exactly a valid frame at its place in the file (raw); numbers go
 * backwards; the second open still repairs something.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsafe.h"
#include "spool.h"

#define MAXSEG 16
#define SEGBYTES 600
#define SALT 0x5eed5a17c0ffee00ull

static char dir[4096];
static int dirfd_ = -1;

struct img {
	unsigned char *seg[MAXSEG];
	size_t len[MAXSEG];
	uint64_t first[MAXSEG];
	int n;
	uint64_t records;
	unsigned reclen;
	size_t frame[MAXSEG][64]; /* offsets of each segment's frames */
	int frames[MAXSEG];
};

static size_t record(uint64_t seq, unsigned reclen, unsigned char *out)
{
	size_t n = reclen ? (seq * 13) % reclen : 0;

	for (size_t i = 0; i < n; i++)
		out[i] = (unsigned char)(seq * 7 + i);
	return n;
}

/* Empty a directory (files and one level of subdirectories). */
static void empty_dir(int fd, bool top)
{
	DIR *d = fdopendir(dup(fd));
	struct dirent *e;

	if (!d)
		abort();
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (e->d_type == DT_DIR && top) {
			int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY);
			empty_dir(sub, false);
			close(sub);
			unlinkat(fd, e->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(fd, e->d_name, 0);
		}
	}
	closedir(d);
}

static void clean(void)
{
	int fd = openat(dirfd_, "sp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		if (mkdirat(dirfd_, "sp", 0700) < 0)
			abort();
		return;
	}
	empty_dir(fd, true);
	close(fd);
}

static void put(const char *name, const void *b, size_t n)
{
	char p[4300];

	snprintf(p, sizeof(p), "%s/sp/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, b, n) != (ssize_t)n)
		abort();
	close(fd);
}

static void seg_start(struct img *m, uint64_t first)
{
	struct fsafe__seg_hdr h = { first, SALT + first, 255 };

	m->first[m->n] = first;
	m->seg[m->n] = calloc(1, SEGBYTES + 300);
	fsafe__seg_hdr_encode(m->seg[m->n], &h);
	m->len[m->n++] = FSAFE__SEG_HDR;
}

static void build(struct img *m, uint64_t count, unsigned reclen)
{
	unsigned char rec[256];

	memset(m, 0, sizeof(*m));
	m->records = count;
	m->reclen = reclen;
	for (uint64_t seq = 1; seq <= count; seq++) {
		size_t n = record(seq, reclen, rec);
		if (!m->n || (m->len[m->n - 1] + FSAFE__FRAME_HDR + n > SEGBYTES &&
		              m->n < MAXSEG))
			seg_start(m, seq);
		unsigned char *p = m->seg[m->n - 1] + m->len[m->n - 1];
		if (m->len[m->n - 1] + FSAFE__FRAME_HDR + n > SEGBYTES + 300) {
			m->records = seq - 1;
			break;
		}
		if (m->frames[m->n - 1] < 64)
			m->frame[m->n - 1][m->frames[m->n - 1]++] =
				m->len[m->n - 1];
		memcpy(p + FSAFE__FRAME_HDR, rec, n);
		fsafe__frame_encode(p, SALT + m->first[m->n - 1], seq,
		                    m->len[m->n - 1], rec, (uint32_t)n);
		m->len[m->n - 1] += FSAFE__FRAME_HDR + n;
	}
}

/* Apply one 5-byte edit at a position over all segments. */
static void edit(struct img *m, const uint8_t *e)
{
	size_t total = 0;

	for (int i = 0; i < m->n; i++)
		total += m->len[i];
	if (!total)
		return;
	uint32_t at = (uint32_t)e[1] | (uint32_t)e[2] << 8 |
	              (uint32_t)e[3] << 16 | (uint32_t)e[4] << 24;
	size_t pos = at % total;
	int s = 0;
	while (pos >= m->len[s])
		pos -= m->len[s++];
	unsigned char *b = m->seg[s];
	switch (e[0] % 6) {
	case 0: b[pos] ^= (unsigned char)(1u << (e[4] & 7)); break;
	case 1: b[pos] = e[4]; break;
	case 2: m->len[s] = pos; break;
	case 3: memset(b + pos, 0, m->len[s] - pos < 64 ? m->len[s] - pos : 64);
		break;
	case 4: {
		size_t from = at % (pos + 1), n = m->len[s] - pos;
		memmove(b + pos, b + from, n < 48 ? n : 48);
		break;
	}
	case 5: { /* replay a whole frame of this segment over another */
		int k = m->frames[s];
		if (k < 2)
			break;
		size_t src = m->frame[s][e[3] % k], dst = m->frame[s][e[4] % k];
		size_t end = e[3] % k + 1 < k ? m->frame[s][e[3] % k + 1]
		                              : m->len[s];
		if (end > m->len[s] || end <= src || dst > m->len[s])
			break; /* cut off by an earlier truncation */
		size_t n = end - src;
		if (dst + n > SEGBYTES + 300)
			break;
		memmove(b + dst, b + src, n);
		if (dst + n > m->len[s])
			m->len[s] = dst + n;
		break;
	}
	}
}

static void write_img(const struct img *m)
{
	char name[FSAFE__SEG_NAME_LEN + 1];

	for (int i = 0; i < m->n; i++) {
		fsafe__seg_name(name, m->first[i]);
		put(name, m->seg[i], m->len[i]);
	}
}

static fsafe_spool *open_spool(void)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.segment_size = SEGBYTES;
	o.max_record = 255;
	int r = fsafe_spool_open(dirfd_, "sp", &o, &s);
	if (r == -ENOMEM || r == -EMFILE)
		return NULL;
	if (r < 0) {
		fprintf(stderr, "open: %s\n", fsafe_strerror(r));
		abort();
	}
	return s;
}

/* Damage mode: each record read must be the one built with its number. */
static void judge_damage(fsafe_spool *s, const struct img *m)
{
	fsafe_spool_reader *rd;
	unsigned char want[256];
	const void *d;
	size_t len;
	uint64_t seq, prev = 0;

	if (fsafe_spool_reader_open(s, 1, &rd) < 0)
		return;
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		if (seq <= prev || seq > m->records ||
		    len != record(seq, m->reclen, want) ||
		    memcmp(d, want, len) != 0)
			abort();
		prev = seq;
	}
	fsafe_spool_reader_close(rd);
}

/* Raw mode: each record must be exactly a valid frame of the segment,
   numbers ascending, found in file order (records after damage are
   salvaged, so they may follow a gap). */
static void judge_raw(fsafe_spool *s, const unsigned char *seg, size_t n)
{
	fsafe_spool_reader *rd;
	unsigned char hdr[FSAFE__FRAME_HDR];
	const void *d;
	size_t len;
	uint64_t seq, off = FSAFE__SEG_HDR, prev = 0;

	if (fsafe_spool_reader_open(s, 1, &rd) < 0)
		return;
	while (fsafe_spool_next(rd, &d, &len, &seq) == 1) {
		if (seq <= prev)
			abort();
		prev = seq;
		for (;; off++) {
			if (off + FSAFE__FRAME_HDR + len > n)
				abort(); /* not a frame of the segment */
			fsafe__frame_encode(hdr, SALT + 1, seq, off, d,
			                    (uint32_t)len);
			if (!memcmp(hdr, seg + off, FSAFE__FRAME_HDR) &&
			    !memcmp(d, seg + off + FSAFE__FRAME_HDR, len))
				break;
		}
		off += FSAFE__FRAME_HDR + len;
	}
	fsafe_spool_reader_close(rd);
}

/* After repair, check may report only losses that stay: records missing,
   a cursor ahead of the data. */
static int only_lasting(const struct fsafe_damage *d, void *arg)
{
	(void)arg;
	if (!strstr(d->what, "missing") && !strstr(d->what, "ahead"))
		abort(); /* recovery left something check calls bad */
	return 0;
}

static void reopen_settled(void)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	fsafe_spool *s = open_spool();

	if (!s)
		return;
	fsafe_spool_stat(s, &st);
	if (st.quarantined || st.truncated || st.quarantined_bytes ||
	    st.salvaged)
		abort(); /* recovery was not idempotent */
	fsafe_spool_close(s);
	if (fsafe_spool_check(dirfd_, "sp", only_lasting, NULL) < 0)
		abort();
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

/* The scratch directory, gone when the fuzzer exits. */
static void cleanup(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof(dir), "%s/fsafe-fuzz-spool-XXXXXX", base);
	if (!mkdtemp(dir) ||
	    (dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		abort();
	atexit(cleanup);
	return 0;
}

static void run_damage(const uint8_t *data, size_t size)
{
	struct img m;

	if (size < 3)
		return;
	build(&m, data[1] % 64, data[2]);
	for (size_t i = 3; i + 5 <= size && i < 3 + 5 * 32; i += 5)
		edit(&m, data + i);
	clean();
	write_img(&m);
	fsafe_spool *s = open_spool();
	if (s) {
		judge_damage(s, &m);
		fsafe_spool_close(s);
		reopen_settled();
	}
	for (int i = 0; i < m.n; i++)
		free(m.seg[i]);
}

static void run_raw(const uint8_t *data, size_t size)
{
	struct fsafe__seg_hdr h = { 1, SALT + 1, 255 };
	size_t n = FSAFE__SEG_HDR + size - 1;
	unsigned char *seg = malloc(n);

	fsafe__seg_hdr_encode(seg, &h);
	memcpy(seg + FSAFE__SEG_HDR, data + 1, size - 1);
	clean();
	put("00000000000000000001.seg", seg, n);
	fsafe_spool *s = open_spool();
	if (s) {
		judge_raw(s, seg, n);
		fsafe_spool_close(s);
		reopen_settled();
	}
	free(seg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 64 * 1024)
		return 0;
	if (data[0] & 1)
		run_raw(data, size);
	else
		run_damage(data, size);
	return 0;
}
