/*
 * The chunk spool (include/fsafe/spool.h): segments of checksummed frames,
 * a cursor kept with the atomic writer, recovery on open.
 *
 * Durability order, which recovery relies on:
 *  - a segment is published with its header through the atomic writer
 *    (staged, synced, renamed, directory synced) before any frame is
 *    written to it, so a segment file never lacks a valid header after a
 *    crash;
 *  - a segment is synced before the next one is created, so every segment
 *    but the last is whole: only the last can have a torn tail, and a
 *    defect anywhere else is corruption (quarantine), never a crash;
 *  - the cursor is durable before the segments it passes are deleted.
 */
#define _GNU_SOURCE
#include "fsafe/spool.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "crc32c.h"
#include "error.h"
#include "spool.h"
#include "sys.h"
#include "target.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define SEG_MAGIC "FSPSEG1"
#define FRAME_MAGIC 0x52505346u /* "FSPR" */
#define CURSOR_MAGIC "FSPCUR1"
#define CURSOR_NAME "cursor"
#define CURSOR_LEN 20
#define QUARANTINE "quarantine"
#define WINDOW (64u * 1024)
#define WBUF (256u * 1024)
#define DEFAULT_SEGMENT (64ull << 20)
#define DEFAULT_RECORD (1u << 20)

/* ---- little-endian fields ------------------------------------------------ */

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* ---- format ---------------------------------------------------------------- */

void fsafe__seg_hdr_encode(unsigned char out[FSAFE__SEG_HDR],
                           const struct fsafe__seg_hdr *h)
{
	memcpy(out, SEG_MAGIC, 8);
	put64(out + 8, h->first_seq);
	put64(out + 16, h->salt);
	put32(out + 24, h->max_record);
	put32(out + 28, fsafe__crc32c(0, out, 28));
}

static bool seg_hdr_decode(const unsigned char *in, struct fsafe__seg_hdr *h)
{
	if (memcmp(in, SEG_MAGIC, 8) != 0 ||
	    get32(in + 28) != fsafe__crc32c(0, in, 28))
		return false;
	h->first_seq = get64(in + 8);
	h->salt = get64(in + 16);
	h->max_record = get32(in + 24);
	return h->max_record <= FSAFE__RECORD_LIMIT;
}

/* The frame's checksum: the salt ties it to one segment file's life. */
static uint32_t frame_crc(uint64_t salt, const unsigned char *hdr,
                          const void *payload, uint32_t len)
{
	unsigned char s[8];

	put64(s, salt);
	uint32_t c = fsafe__crc32c(0, s, 8);
	c = fsafe__crc32c(c, hdr, 28);
	return fsafe__crc32c(c, payload, len);
}

void fsafe__frame_encode(unsigned char out[FSAFE__FRAME_HDR], uint64_t salt,
                         uint64_t seq, uint64_t off, const void *payload,
                         uint32_t len)
{
	put32(out, FRAME_MAGIC);
	put32(out + 4, len);
	put64(out + 8, seq);
	put64(out + 16, off);
	put32(out + 24, 0); /* flags: none defined; any set bit is invalid */
	put32(out + 28, frame_crc(salt, out, payload, len));
}

void fsafe__seg_name(char *buf, uint64_t seq)
{
	snprintf(buf, FSAFE__SEG_NAME_LEN + 1, "%020" PRIu64 ".seg", seq);
}

bool fsafe__seg_parse(const char *name, uint64_t *seq)
{
	uint64_t v = 0;

	if (strlen(name) != FSAFE__SEG_NAME_LEN ||
	    strcmp(name + 20, ".seg") != 0)
		return false;
	for (int i = 0; i < 20; i++) {
		if (name[i] < '0' || name[i] > '9')
			return false;
		unsigned d = (unsigned)(name[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*seq = v;
	return true;
}

/* ---- the scanner ------------------------------------------------------------ */

void fsafe__scan_reset(struct fsafe__scan *sc)
{
	sc->len = 0;
	sc->off = 0;
}

void fsafe__scan_free(struct fsafe__scan *sc)
{
	free(sc->buf);
	sc->buf = NULL;
	sc->cap = 0;
	fsafe__scan_reset(sc);
}

static int scan_grow(struct fsafe__scan *sc, size_t need)
{
	size_t cap = need < WINDOW ? WINDOW : need;

	if (cap <= sc->cap)
		return 0;
	unsigned char *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	free(sc->buf);
	sc->buf = b;
	sc->cap = cap;
	fsafe__scan_reset(sc);
	return 0;
}

/* pread until len bytes or end of file: the count read, or -errno. */
static ssize_t pread_full(int fd, unsigned char *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = SYS->pread(fd, buf + got, len - got,
		                       (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Make [off, off+n) available at *p: 1, 0 if the file ends first, -errno. */
static int scan_ensure(struct fsafe__scan *sc, uint64_t off, size_t n,
                       const unsigned char **p)
{
	if (off >= sc->off && off + n <= sc->off + sc->len) {
		*p = sc->buf + (off - sc->off);
		return 1;
	}
	int r = scan_grow(sc, n);
	if (r < 0)
		return r;
	ssize_t got = pread_full(sc->fd, sc->buf, sc->cap, off);
	if (got < 0) {
		fsafe__scan_reset(sc);
		return (int)got;
	}
	sc->off = off;
	sc->len = (size_t)got;
	*p = sc->buf;
	return sc->len >= n;
}

int fsafe__scan_open(struct fsafe__scan *sc, int fd, uint64_t name_seq)
{
	const unsigned char *p;

	unsigned char *buf = sc->buf;
	size_t cap = sc->cap;

	memset(sc, 0, sizeof(*sc));
	sc->buf = buf; /* the window is reused from segment to segment */
	sc->cap = cap;
	sc->fd = fd;
	int r = scan_ensure(sc, 0, FSAFE__SEG_HDR, &p);
	if (r < 0)
		return r;
	if (r == 0 || !seg_hdr_decode(p, &sc->hdr)) {
		sc->problem = "bad header";
		return 1;
	}
	if (sc->hdr.first_seq != name_seq) {
		sc->problem = "header does not match the name";
		return 1;
	}
	sc->pos = FSAFE__SEG_HDR;
	sc->next_seq = name_seq;
	return 0;
}

/* What is wrong with the frame header at sc->pos, or NULL. */
static const char *frame_hdr_problem(const struct fsafe__scan *sc,
                                     const unsigned char *h)
{
	if (get32(h) != FRAME_MAGIC)
		return "bad magic";
	if (get32(h + 4) > sc->hdr.max_record)
		return "bad length";
	if (get64(h + 8) != sc->next_seq)
		return "wrong sequence";
	if (get64(h + 16) != sc->pos)
		return "wrong position";
	if (get32(h + 24) != 0)
		return "bad flags";
	return NULL;
}

int fsafe__scan_next(struct fsafe__scan *sc, const void **data, size_t *len,
                     uint64_t *seq)
{
	const unsigned char *h;

	sc->problem = NULL;
	int r = scan_ensure(sc, sc->pos, FSAFE__FRAME_HDR, &h);
	if (r <= 0) {
		if (r == 0 && sc->len > 0)
			sc->problem = "torn frame header";
		return r;
	}
	if ((sc->problem = frame_hdr_problem(sc, h)))
		return 0;
	uint32_t n = get32(h + 4);
	r = scan_ensure(sc, sc->pos, FSAFE__FRAME_HDR + (size_t)n, &h);
	if (r <= 0) {
		if (r == 0)
			sc->problem = "torn record";
		return r;
	}
	if (get32(h + 28) != frame_crc(sc->hdr.salt, h, h + FSAFE__FRAME_HDR,
	                               n)) {
		sc->problem = "bad checksum";
		return 0;
	}
	*data = h + FSAFE__FRAME_HDR;
	*len = n;
	*seq = sc->next_seq++;
	sc->pos += FSAFE__FRAME_HDR + (uint64_t)n;
	return 1;
}

/* ---- the handle ------------------------------------------------------------- */

struct fsafe_spool {
	int dirfd; /* the spool directory; holds the flock */
	uint64_t segment_size;
	uint32_t max_record;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t *segs; /* first sequence number of each segment, ascending */
	size_t nsegs, segcap;
	int wfd;        /* the last segment, for appending (-1: none yet) */
	struct fsafe__seg_hdr whdr;
	uint64_t tail;  /* its valid length: where the next frame goes */
	uint64_t next_seq, durable_seq; /* records below durable_seq synced */
	uint64_t written_gen, synced_gen; /* group commit generations */
	uint64_t flushes, synced_flushes; /* pwrites done / covered by a sync */
	bool syncing;
	int broken;     /* sticky append error */
	unsigned char *wbuf;
	size_t wcap, wlen;
	uint64_t cursor;
	uint64_t quarantined, truncated, dropped;
};

struct fsafe_spool_reader {
	fsafe_spool *s;
	uint64_t want;   /* the next sequence number to return */
	bool open;       /* sc is on a segment */
	uint64_t seg_next; /* first sequence of the segment after it */
	struct fsafe__scan sc;
};

static int seg_push(fsafe_spool *s, uint64_t first)
{
	if (s->nsegs == s->segcap) {
		size_t cap = s->segcap ? 2 * s->segcap : 16;
		uint64_t *n = realloc(s->segs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->segs = n;
		s->segcap = cap;
	}
	s->segs[s->nsegs++] = first;
	return 0;
}

static void seg_remove(fsafe_spool *s, size_t i)
{
	memmove(s->segs + i, s->segs + i + 1,
	        (s->nsegs - i - 1) * sizeof(*s->segs));
	s->nsegs--;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The segment names in the directory, sorted into s->segs. */
static int list_segments(fsafe_spool *s, int dfd)
{
	struct fsafe__dir *d = malloc(sizeof(*d));
	const char *name;
	unsigned char type;
	uint64_t seq;
	int r, fd = fsafe__open_dir(dfd, ".");

	if (fd < 0 || !d) {
		free(d);
		if (fd >= 0)
			fsafe__close(fd);
		return fd < 0 ? fd : -ENOMEM;
	}
	fsafe__dir_init(d, fd);
	while ((r = fsafe__dir_next(d, &name, &type)) > 0)
		if (fsafe__seg_parse(name, &seq) && (r = seg_push(s, seq)) < 0)
			break;
	fsafe__close(fd);
	free(d);
	if (r == 0 && s->nsegs)
		qsort(s->segs, s->nsegs, sizeof(*s->segs), cmp_u64);
	return r;
}

static int open_seg(int dfd, uint64_t first, int flags)
{
	char name[FSAFE__SEG_NAME_LEN + 1];

	fsafe__seg_name(name, first);
	return fsafe__openat(dfd, name, flags | O_NOFOLLOW, 0);
}

/* ---- cursor --------------------------------------------------------------- */

/* The stored cursor, or 0 when it is missing or unreadable (then reading
   starts at the oldest record: redelivery beats loss). */
static uint64_t cursor_load(int dfd)
{
	unsigned char b[CURSOR_LEN + 1];
	int fd = fsafe__openat(dfd, CURSOR_NAME, O_RDONLY | O_NOFOLLOW, 0);

	if (fd < 0)
		return 0;
	ssize_t n = pread_full(fd, b, sizeof(b), 0);
	fsafe__close(fd);
	if (n != CURSOR_LEN || memcmp(b, CURSOR_MAGIC, 8) != 0 ||
	    get32(b + 16) != fsafe__crc32c(0, b, 16))
		return 0;
	return get64(b + 8);
}

static int cursor_store(int dfd, uint64_t cursor)
{
	unsigned char b[CURSOR_LEN];

	memcpy(b, CURSOR_MAGIC, 8);
	put64(b + 8, cursor);
	put32(b + 16, fsafe__crc32c(0, b, 16));
	return fsafe_write_fileat(dfd, CURSOR_NAME, b, sizeof(b), NULL);
}

/* ---- recovery ------------------------------------------------------------- */

/* Move segment `first` into quarantine/ under a name not yet taken there
   (the same sequence may go bad twice), and make the move durable. */
static int quarantine(fsafe_spool *s, uint64_t first)
{
	char name[FSAFE__SEG_NAME_LEN + 1], dst[FSAFE__SEG_NAME_LEN + 16];
	int r = fsafe__mkdirat(s->dirfd, QUARANTINE, 0777);

	if (r < 0 && r != -EEXIST)
		return r;
	int qfd = fsafe__open_dir(s->dirfd, QUARANTINE);
	if (qfd < 0)
		return qfd;
	fsafe__seg_name(name, first);
	for (unsigned i = 0; i < 1000; i++) {
		snprintf(dst, sizeof(dst), i ? "%s.%u" : "%s", name, i);
		r = fsafe__renameat2(s->dirfd, name, qfd, dst,
		                     RENAME_NOREPLACE);
		if (r == -ENOSYS || r == -EINVAL)
			r = fsafe__fstatat(qfd, dst, &(struct stat){ 0 },
			                   AT_SYMLINK_NOFOLLOW) == -ENOENT
			            ? fsafe__renameat(s->dirfd, name, qfd, dst)
			            : -EEXIST;
		if (r != -EEXIST)
			break;
	}
	if (r == 0 && (r = fsafe__fsync(qfd)) == 0)
		r = fsafe__fsync(s->dirfd);
	fsafe__close(qfd);
	if (r == 0)
		s->quarantined++;
	return r;
}

/* Scan a whole segment: 0 with *end / *next at its valid end, and whether
   that end is the file's end; 1 when its header is bad; or -errno. */
static int scan_segment(int dfd, uint64_t first, uint64_t *end,
                        uint64_t *next, bool *whole, struct fsafe__seg_hdr *h)
{
	struct fsafe__scan sc = { .buf = NULL };
	const void *d;
	size_t len;
	uint64_t seq;
	int fd = open_seg(dfd, first, O_RDONLY), r;

	if (fd < 0)
		return fd;
	if ((r = fsafe__scan_open(&sc, fd, first)) == 0) {
		while ((r = fsafe__scan_next(&sc, &d, &len, &seq)) == 1)
			;
		*end = sc.pos;
		*next = sc.next_seq;
		*whole = r == 0 && !sc.problem;
		*h = sc.hdr;
	}
	fsafe__scan_free(&sc);
	fsafe__close(fd);
	return r;
}

/* Cut the torn tail of the last segment and make the cut durable. */
static int truncate_tail(fsafe_spool *s, uint64_t first, uint64_t end)
{
	struct stat st;
	int fd = open_seg(s->dirfd, first, O_WRONLY), r;

	if (fd < 0)
		return fd;
	if ((r = fsafe__fstat(fd, &st)) == 0 && (uint64_t)st.st_size > end) {
		if (SYS->ftruncate(fd, (off_t)end) < 0)
			r = -errno;
		else if ((r = fsafe__fdatasync(fd)) == 0)
			s->truncated += (uint64_t)st.st_size - end;
	}
	if (r == 0) {
		s->wfd = fd;
		return 0;
	}
	fsafe__close(fd);
	return r;
}

/* Validate segment i: a bad one (any defect but a torn tail of the last)
   is quarantined; 1 when it was, else 0 with the last one open for
   appending. */
static int recover_segment(fsafe_spool *s, size_t i, bool last)
{
	uint64_t end = 0, next = 0;
	bool whole = false;
	struct fsafe__seg_hdr h = { 0 };

	/* (Segments that overlap are left be: the reader skips numbers it
	   has passed, so neither can return a record out of order.) */
	int r = scan_segment(s->dirfd, s->segs[i], &end, &next, &whole, &h);

	if (r == -ENOENT) { /* gone meanwhile: not an error */
		seg_remove(s, i);
		return 1;
	}
	if (r < 0)
		return r;
	if (r == 1 || (!last && !whole)) {
		if ((r = quarantine(s, s->segs[i])) < 0 && r != -ENOENT)
			return r;
		seg_remove(s, i);
		return 1;
	}
	if (!last)
		return 0;
	s->whdr = h;
	s->tail = end;
	s->next_seq = next;
	return truncate_tail(s, s->segs[i], end);
}

/* Segments wholly before the cursor go, the oldest first, never the last.
   Only after the cursor is durable; a segment already gone is fine. */
static void drop_consumed(fsafe_spool *s)
{
	char name[FSAFE__SEG_NAME_LEN + 1];

	while (s->nsegs > 1 && s->segs[1] <= s->cursor) {
		fsafe__seg_name(name, s->segs[0]);
		int r = fsafe__unlinkat(s->dirfd, name, 0);
		if (r < 0 && r != -ENOENT)
			return; /* kept; the next ack or open retries */
		seg_remove(s, 0);
		s->dropped++;
	}
}

static int recover(fsafe_spool *s)
{
	int r = fsafe_sweep(s->dirfd, ".", 0, 0, NULL, NULL);

	if (r < 0)
		return r;
	if ((r = list_segments(s, s->dirfd)) < 0)
		return r;
	s->cursor = cursor_load(s->dirfd);
	drop_consumed(s);
	s->next_seq = s->cursor ? s->cursor : 1;
	for (size_t i = 0; i + 1 < s->nsegs;) {
		if ((r = recover_segment(s, i, false)) < 0)
			return r;
		if (r == 0)
			i++;
	}
	/* When the last goes to quarantine, the one before becomes last. */
	while (s->nsegs > 0 &&
	       (r = recover_segment(s, s->nsegs - 1, true)) != 0)
		if (r < 0)
			return r;
	/* A cursor ahead of the data is clamped to the data's end. */
	if (s->cursor > s->next_seq || s->cursor == 0)
		s->cursor = s->cursor ? s->next_seq
		                      : (s->nsegs ? s->segs[0] : s->next_seq);
	s->durable_seq = s->next_seq;
	return 0;
}

/* ---- open / close ------------------------------------------------------------ */

struct spool_opts {
	unsigned flags;
	uint64_t segment_size;
	uint32_t max_record;
	struct fsafe_error *error;
};

static int opts_load(struct spool_opts *o, const struct fsafe_spool_opts *in)
{
	struct fsafe_spool_opts v = FSAFE_SPOOL_OPTS_INIT;

	if (in) {
		size_t n = in->size ? in->size : sizeof(v);
		memcpy(&v, in, n < sizeof(v) ? n : sizeof(v));
	}
	o->flags = v.flags;
	o->segment_size = v.segment_size ? v.segment_size : DEFAULT_SEGMENT;
	o->max_record = v.max_record ? v.max_record : DEFAULT_RECORD;
	o->error = v.error;
	if ((v.flags & ~(unsigned)FSAFE_SPOOL_CREATE) ||
	    o->max_record > FSAFE__RECORD_LIMIT)
		return -EINVAL;
	return 0;
}

/* Create the spool directory (missing parents too), durably. */
static int make_dir(int dirfd, const char *path, const char **step)
{
	struct fsafe__target t;
	int r = fsafe__target_resolve(dirfd, path, true, false, true, &t, step);

	if (r < 0)
		return r;
	*step = "mkdir";
	r = fsafe__mkdirat(t.dirfd, t.name, 0777);
	if (r == 0) {
		*step = "fsync directory";
		r = fsafe__fsync(t.dirfd);
	} else if (r == -EEXIST) {
		r = 0;
	}
	fsafe__target_close(&t);
	return r;
}

static fsafe_spool *spool_new(const struct spool_opts *o)
{
	fsafe_spool *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->dirfd = s->wfd = -1;
	s->segment_size = o->segment_size;
	s->max_record = o->max_record;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

static int spool_lock(fsafe_spool *s, int dirfd, const char *path,
                      const char **step)
{
	*step = "open";
	if ((s->dirfd = fsafe__open_dir(dirfd, path)) < 0)
		return s->dirfd;
	*step = "lock";
	/* One process per spool: its appends assume they own the tail. */
	if (SYS->flock(s->dirfd, LOCK_EX | LOCK_NB) < 0)
		return errno == EINTR ? -EAGAIN : -errno;
	*step = "recover";
	return 0;
}

int fsafe_spool_open(int dirfd, const char *path,
                     const struct fsafe_spool_opts *opts, fsafe_spool **out)
{
	struct spool_opts o;
	const char *step = "options";
	fsafe_spool *s = NULL;
	int r = opts_load(&o, opts);

	*out = NULL;
	if (r == 0 && !path[0])
		r = -EINVAL;
	if (r == 0 && (o.flags & FSAFE_SPOOL_CREATE))
		r = make_dir(dirfd, path, &step);
	if (r == 0 && !(s = spool_new(&o)))
		r = -ENOMEM;
	if (r == 0 && (r = spool_lock(s, dirfd, path, &step)) == 0)
		r = recover(s);
	if (r < 0) {
		fsafe__error_set(o.error, r, -r, step, false);
		fsafe_spool_close(s);
		return r;
	}
	*out = s;
	return 0;
}

void fsafe_spool_close(fsafe_spool *s)
{
	if (!s)
		return;
	if (s->wfd >= 0)
		fsafe__close(s->wfd);
	if (s->dirfd >= 0)
		fsafe__close(s->dirfd); /* drops the flock */
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->segs);
	free(s->wbuf);
	free(s);
}

/* ---- append --------------------------------------------------------------- */

/* Write the buffered frames at the tail. Called with mu held. */
static int wbuf_flush(fsafe_spool *s)
{
	size_t done = 0;

	while (done < s->wlen) {
		ssize_t n = SYS->pwrite(s->wfd, s->wbuf + done, s->wlen - done,
		                        (off_t)(s->tail + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	s->tail += s->wlen;
	s->flushes += s->wlen > 0;
	s->wlen = 0;
	return 0;
}

/* Wait until no sync runs outside the lock (it may use wfd). */
static void wait_sync_idle(fsafe_spool *s)
{
	while (s->syncing)
		pthread_cond_wait(&s->cv, &s->mu);
}

/*
 * Start the segment whose first record is s->next_seq: the current one is
 * synced first (only the last segment may ever be torn), then the new one
 * is published whole with its header through the atomic writer (data and
 * directory entry durable before use). Called with mu held.
 */
static int roll_over(fsafe_spool *s)
{
	unsigned char h[FSAFE__SEG_HDR];
	char name[FSAFE__SEG_NAME_LEN + 1];
	struct fsafe__seg_hdr nh = { .first_seq = s->next_seq,
	                             .max_record = s->max_record };
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	int r;

	wait_sync_idle(s);
	if (s->wfd >= 0) {
		/* (Skipped when the last group commit already covered it.) */
		if (s->flushes != s->synced_flushes &&
		    (r = fsafe__fdatasync(s->wfd)) < 0)
			return r;
		s->synced_flushes = s->flushes;
		s->synced_gen = s->written_gen;
		s->durable_seq = s->next_seq;
		s->wfd = fsafe__close(s->wfd);
	}
	if ((r = fsafe__random(&nh.salt, sizeof(nh.salt))) < 0)
		return r;
	fsafe__seg_hdr_encode(h, &nh);
	fsafe__seg_name(name, nh.first_seq);
	wo.flags = FSAFE_CREATE_ONLY;
	if ((r = fsafe_write_fileat(s->dirfd, name, h, sizeof(h), &wo)) < 0)
		return r;
	if ((r = seg_push(s, nh.first_seq)) < 0)
		return r;
	if ((s->wfd = open_seg(s->dirfd, nh.first_seq, O_WRONLY)) < 0)
		return s->wfd;
	s->whdr = nh;
	s->tail = FSAFE__SEG_HDR;
	return 0;
}

static bool needs_new_segment(const fsafe_spool *s, uint64_t frame)
{
	uint64_t end = s->tail + s->wlen;

	return s->wfd < 0 || frame - FSAFE__FRAME_HDR > s->whdr.max_record ||
	       (end > FSAFE__SEG_HDR && end + frame > s->segment_size);
}

static int wbuf_room(fsafe_spool *s, size_t frame)
{
	if (s->wlen + frame <= s->wcap)
		return 0;
	int r = wbuf_flush(s);
	if (r < 0 || frame <= s->wcap)
		return r;
	size_t cap = frame < WBUF ? WBUF : frame;
	unsigned char *b = realloc(s->wbuf, cap);
	if (!b)
		return -ENOMEM;
	s->wbuf = b;
	s->wcap = cap;
	return 0;
}

/* Frame one record into the write buffer. Called with mu held. */
static int put_record(fsafe_spool *s, const struct iovec *rec)
{
	size_t frame = FSAFE__FRAME_HDR + rec->iov_len;
	int r = 0;

	if (needs_new_segment(s, frame) &&
	    ((r = wbuf_flush(s)) < 0 || (r = roll_over(s)) < 0))
		return r;
	if ((r = wbuf_room(s, frame)) < 0)
		return r;
	unsigned char *p = s->wbuf + s->wlen;
	if (rec->iov_len)
		memcpy(p + FSAFE__FRAME_HDR, rec->iov_base, rec->iov_len);
	fsafe__frame_encode(p, s->whdr.salt, s->next_seq, s->tail + s->wlen,
	                    p + FSAFE__FRAME_HDR, (uint32_t)rec->iov_len);
	s->wlen += frame;
	s->next_seq++;
	return 0;
}

/*
 * Group commit: whoever finds no sync running syncs everything written so
 * far, for every appender queued behind it; the others wait for a sync
 * that covers their generation. Called with mu held.
 */
static int wait_durable(fsafe_spool *s, uint64_t gen)
{
	while (s->synced_gen < gen && !s->broken) {
		if (s->syncing) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		uint64_t target = s->written_gen, seq = s->next_seq;
		uint64_t flushes = s->flushes;
		int fd = s->wfd;
		s->syncing = true;
		pthread_mutex_unlock(&s->mu);
		int r = fsafe__fdatasync(fd);
		pthread_mutex_lock(&s->mu);
		s->syncing = false;
		if (r < 0) {
			s->broken = r;
		} else if (target > s->synced_gen) {
			s->synced_gen = target;
			s->durable_seq = seq;
			s->synced_flushes = flushes;
		}
		pthread_cond_broadcast(&s->cv);
	}
	return s->synced_gen >= gen ? 0 : s->broken;
}

static int append_locked(fsafe_spool *s, const struct iovec *recs, size_t n,
                         uint64_t *first)
{
	int r = s->broken;

	*first = s->next_seq;
	if (n == 0)
		return r;
	for (size_t i = 0; r == 0 && i < n; i++)
		r = put_record(s, &recs[i]);
	if (r == 0)
		r = wbuf_flush(s);
	if (r < 0) {
		/* The tail now holds frames of unknown state: refuse more. */
		s->broken = r;
		s->wlen = 0;
		pthread_cond_broadcast(&s->cv);
		return r;
	}
	return wait_durable(s, ++s->written_gen);
}

int fsafe_spool_append(fsafe_spool *s, const struct iovec *recs, size_t n,
                       uint64_t *first_seq)
{
	uint64_t first;

	for (size_t i = 0; i < n; i++)
		if (recs[i].iov_len > s->max_record)
			return -EMSGSIZE;
	pthread_mutex_lock(&s->mu);
	int r = append_locked(s, recs, n, &first);
	pthread_mutex_unlock(&s->mu);
	if (r == 0 && first_seq)
		*first_seq = first;
	return r;
}

/* ---- reading ------------------------------------------------------------------ */

int fsafe_spool_reader_open(fsafe_spool *s, uint64_t from,
                            fsafe_spool_reader **out)
{
	fsafe_spool_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->s = s;
	r->sc.fd = -1;
	pthread_mutex_lock(&s->mu);
	r->want = from == FSAFE_SPOOL_FROM_CURSOR ? s->cursor : from;
	pthread_mutex_unlock(&s->mu);
	*out = r;
	return 0;
}

static void reader_leave(fsafe_spool_reader *r)
{
	if (r->sc.fd >= 0)
		r->sc.fd = fsafe__close(r->sc.fd);
	r->open = false;
}

void fsafe_spool_reader_close(fsafe_spool_reader *r)
{
	if (!r)
		return;
	reader_leave(r);
	fsafe__scan_free(&r->sc);
	free(r);
}

/* Open the segment holding r->want (or the next one kept): 1 when on one,
   0 when there is none, or -errno. */
static int reader_enter(fsafe_spool_reader *r)
{
	fsafe_spool *s = r->s;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		size_t i = 0;
		while (i + 1 < s->nsegs && s->segs[i + 1] <= r->want)
			i++;
		bool none = s->nsegs == 0;
		uint64_t first = none ? 0 : s->segs[i];
		r->seg_next = i + 1 < s->nsegs ? s->segs[i + 1] : UINT64_MAX;
		pthread_mutex_unlock(&s->mu);
		if (none)
			return 0;
		if (r->want < first)
			r->want = first;
		int fd = open_seg(s->dirfd, first, O_RDONLY);
		if (fd == -ENOENT) { /* dropped by an ack meanwhile */
			if (r->seg_next == UINT64_MAX)
				return 0;
			r->want = r->seg_next > r->want ? r->seg_next : r->want;
			continue;
		}
		if (fd < 0)
			return fd;
		int h = fsafe__scan_open(&r->sc, fd, first);
		r->open = true;
		if (h == 0)
			return 1;
		reader_leave(r);
		if (h < 0)
			return h;
		if (r->seg_next == UINT64_MAX)
			return 0;
		r->want = r->seg_next; /* bad header: skip the segment */
	}
}

/* Whether a segment after `first` exists now. */
static bool rolled_past(fsafe_spool *s, uint64_t first)
{
	pthread_mutex_lock(&s->mu);
	bool yes = s->nsegs && s->segs[s->nsegs - 1] > first;
	pthread_mutex_unlock(&s->mu);
	return yes;
}

int fsafe_spool_next(fsafe_spool_reader *r, const void **data, size_t *len,
                     uint64_t *seq)
{
	fsafe_spool *s = r->s;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		uint64_t limit = s->durable_seq;
		pthread_mutex_unlock(&s->mu);
		if (r->want >= limit)
			return 0;
		int e = r->open ? 1 : reader_enter(r);
		if (e <= 0)
			return e;
		uint64_t at = r->sc.pos;
		e = fsafe__scan_next(&r->sc, data, len, seq);
		if (e < 0)
			return e;
		if (e == 1 && *seq >= limit) { /* not durable yet: later */
			r->sc.pos = at;
			r->sc.next_seq = *seq;
			return 0;
		}
		if (e == 1 && *seq >= r->want) {
			r->want = *seq + 1;
			return 1;
		}
		if (e == 1)
			continue; /* before `from`: skip */
		if (r->seg_next == UINT64_MAX) {
			/* The end of what was the last segment; it may grow,
			   so read afresh next time, or a rollover may have
			   made it whole, so look again now. */
			uint64_t first = r->sc.hdr.first_seq;
			reader_leave(r);
			if (!rolled_past(s, first))
				return 0;
			continue;
		}
		/* The segment ends (whole, or corrupt from here on). */
		reader_leave(r);
		if (r->want < r->seg_next)
			r->want = r->seg_next;
	}
}

/* ---- ack, stat ---------------------------------------------------------------- */

int fsafe_spool_ack(fsafe_spool *s, uint64_t seq)
{
	pthread_mutex_lock(&s->mu);
	uint64_t cursor = seq >= s->durable_seq ? s->durable_seq : seq + 1;
	uint64_t old = s->cursor;
	pthread_mutex_unlock(&s->mu);
	if (cursor <= old)
		return 0;
	int r = cursor_store(s->dirfd, cursor);
	if (r < 0)
		return r; /* FSAFE_ENOTDURABLE too: keep every segment */
	pthread_mutex_lock(&s->mu);
	s->cursor = cursor;
	drop_consumed(s);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static uint64_t spool_bytes(fsafe_spool *s)
{
	char name[FSAFE__SEG_NAME_LEN + 1];
	struct stat st;
	uint64_t total = 0;

	for (size_t i = 0; i < s->nsegs; i++) {
		fsafe__seg_name(name, s->segs[i]);
		if (fsafe__fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			total += (uint64_t)st.st_size;
	}
	return total;
}

int fsafe_spool_stat(fsafe_spool *s, struct fsafe_spool_stat *out)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	size_t n = out->size ? out->size : sizeof(st);

	pthread_mutex_lock(&s->mu);
	st.cursor = s->cursor;
	st.next_seq = s->durable_seq;
	st.first_seq = s->nsegs && s->segs[0] < st.next_seq ? s->segs[0]
	                                                     : st.next_seq;
	st.segments = s->nsegs;
	st.bytes = spool_bytes(s);
	st.quarantined = s->quarantined;
	st.truncated = s->truncated;
	st.dropped = s->dropped;
	pthread_mutex_unlock(&s->mu);
	memcpy(out, &st, n < sizeof(st) ? n : sizeof(st));
	out->size = n;
	return 0;
}

/* ---- check ---------------------------------------------------------------------- */

static void check_one(int dfd, uint64_t first, struct fsafe_spool_segment *g)
{
	struct fsafe__scan sc = { .buf = NULL };
	struct stat st;
	const void *d;
	size_t len;
	uint64_t seq;
	int fd = open_seg(dfd, first, O_RDONLY), r;

	g->first_seq = first;
	if (fd < 0) {
		g->problem = "cannot open";
		return;
	}
	if (fsafe__fstat(fd, &st) == 0)
		g->file_bytes = (uint64_t)st.st_size;
	if ((r = fsafe__scan_open(&sc, fd, first)) == 0) {
		while ((r = fsafe__scan_next(&sc, &d, &len, &seq)) == 1) {
			g->records++;
			g->last_seq = seq;
		}
		g->valid_bytes = sc.pos;
	}
	g->problem = r < 0 ? "read error" : sc.problem;
	fsafe__scan_free(&sc);
	fsafe__close(fd);
}

int fsafe_spool_check(int dirfd, const char *path,
                      void (*each)(const struct fsafe_spool_segment *seg,
                                   void *arg),
                      void *arg)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	struct spool_opts so;
	char name[FSAFE__SEG_NAME_LEN + 1];
	int bad = 0;

	opts_load(&so, &o);
	fsafe_spool *s = spool_new(&so);
	if (!s)
		return -ENOMEM;
	int r = (s->dirfd = fsafe__open_dir(dirfd, path));
	if (r >= 0)
		r = list_segments(s, s->dirfd);
	for (size_t i = 0; r >= 0 && i < s->nsegs; i++) {
		struct fsafe_spool_segment g = { .name = name };
		fsafe__seg_name(name, s->segs[i]);
		check_one(s->dirfd, s->segs[i], &g);
		bad += g.problem != NULL;
		if (each)
			each(&g, arg);
	}
	fsafe_spool_close(s);
	return r < 0 ? r : bad;
}
