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

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

#include "crc32c.h"
#include "error.h"
#include "opts.h"
#include "spool.h"
#include "sys.h"
#include "target.h"
#include "util.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define SEG_MAGIC "FSPSEG1"
#define FRAME_MAGIC 0x52505346u /* "FSPR" */
#define CURSOR_NAME "cursor"
#define HEAD_NAME "head"
#define QUARANTINE "quarantine"
#define WINDOW (64u * 1024)
#define WBUF (256u * 1024)
#define DEFAULT_SEGMENT (64ull << 20)
#define DEFAULT_RECORD (1u << 20)
#define SEGMENT_LIMIT (1ull << 40)
/* Space the appender writes as zeros ahead of the tail, so that an append
   inside it changes neither the file's size nor its blocks and its
   fdatasync commits no metadata: at most RESERVE, and only for appends of
   up to RESERVE_MAX bytes, since for larger ones writing the zeros costs
   more than the commits it saves. RESERVE_PAGE rounds its end. */
#define RESERVE (1u << 20)
#define RESERVE_MAX (RESERVE / 16)
#define RESERVE_PAGE 4096u
/* A segment's header and one frame's. */
#define SEG_OVERHEAD (FSAFE__SEG_HDR + FSAFE__FRAME_HDR)

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
	size_t want = sc->cap;
	if (sc->end && (off >= sc->end || sc->end - off < want))
		want = off >= sc->end ? 0 : (size_t)(sc->end - off);
	ssize_t got = want ? fsafe__pread_full(sc->fd, sc->buf, want, off) : 0;
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
	const unsigned char *p = NULL; /* set whenever scan_ensure says 1 */
	unsigned char *buf = sc->buf;
	size_t cap = sc->cap;
	uint64_t end = sc->end;

	memset(sc, 0, sizeof(*sc));
	sc->buf = buf; /* the window is reused from segment to segment */
	sc->cap = cap;
	sc->end = end;
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

int fsafe__scan_zero_from(struct fsafe__scan *sc, uint64_t from)
{
	const unsigned char *p = NULL; /* set whenever scan_ensure says 1 */

	for (;;) {
		int r = scan_ensure(sc, from, 1, &p);
		if (r <= 0)
			return r < 0 ? r : 1; /* the end of the file */
		size_t n = sc->len - (size_t)(from - sc->off);
		for (size_t i = 0; i < n; i++)
			if (p[i])
				return 0;
		from += n;
	}
}

/* Whether the frame at p (its header at h) could follow sc's chain after
   damage: its own offset, a later number, no more frames lost than could
   fit into the bytes skipped. */
static bool resync_candidate(const struct fsafe__scan *sc, uint64_t p,
                             const unsigned char *h)
{
	uint64_t seq = get64(h + 8);

	return get32(h) == FRAME_MAGIC && get32(h + 4) <= sc->hdr.max_record &&
	       get64(h + 16) == p && get32(h + 24) == 0 &&
	       seq >= sc->next_seq &&
	       seq - sc->next_seq <= (p - sc->pos) / FSAFE__FRAME_HDR;
}

int fsafe__scan_resync(struct fsafe__scan *sc)
{
	const unsigned char *h;

	for (uint64_t p = sc->pos + 1;; p++) {
		int r = scan_ensure(sc, p, FSAFE__FRAME_HDR, &h);
		if (r <= 0)
			return r;
		if (!resync_candidate(sc, p, h))
			continue;
		uint32_t n = get32(h + 4);
		if ((r = scan_ensure(sc, p, FSAFE__FRAME_HDR + (size_t)n, &h)) < 0)
			return r;
		if (r == 1 && get32(h + 28) == frame_crc(sc->hdr.salt, h,
		                                         h + FSAFE__FRAME_HDR, n)) {
			sc->pos = p;
			sc->next_seq = get64(h + 8);
			sc->problem = NULL;
			return 1;
		}
	}
}

/* ---- the handle ------------------------------------------------------------- */

struct fsafe_spool {
	int dirfd; /* the spool directory; its flock is the spool's lock */
	int hfd;   /* the head file (-1: none, read-only) */
	int held;  /* holders of the lock in this handle (0: not locked) */
	bool view_ok; /* the append state below is the spool's, under it */
	bool releasing; /* a round is over: no new holder until it drops */
	unsigned round_syncs; /* syncs begun since the lock was taken */
	bool filling; /* a batch is being framed (a rollover may wait) */
	uint64_t gen; /* the head's gen the append state matches */
	uint64_t segment_size;
	uint32_t max_record;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t *segs; /* first sequence number of each segment, ascending */
	size_t nsegs, segcap;
	int wfd;        /* the last segment, for appending (-1: none yet) */
	struct fsafe__seg_hdr whdr;
	uint64_t tail;  /* its valid length: where the next frame goes */
	uint64_t reserved; /* its size as made here (tail .. reserved: zeros;
	                      below the tail: none, reserve() raises it) */
	uint64_t appended; /* bytes of frames this handle wrote (its reserve
	                      grows with them) */
	uint64_t next_seq, durable_seq; /* records below durable_seq synced */
	uint64_t written_gen, synced_gen; /* group commit generations */
	uint64_t flushes, synced_flushes; /* pwrites done / covered by a sync */
	bool syncing;
	int broken;     /* sticky append error */
	const char *step; /* the step of the last failure under mu */
	struct fsafe_error *error; /* the caller's, from the open */
	unsigned char *wbuf;
	size_t wcap, wlen;
	uint64_t cursor;
	uint64_t quarantined, truncated, dropped; /* see fsafe_spool_stat */
	uint64_t qbytes, salvaged, lost, cursor_ahead;
	int problems; /* found by the last walk */
	int stopped;  /* the damage callback's non-zero return */
	bool rdonly;  /* FSAFE_SPOOL_RDONLY */
	char id[FSAFE__SPOOL_ID_LEN + 1];
	int id_err;   /* why there is no id (fsafe_spool_id) */
};

struct fsafe_spool_reader {
	fsafe_spool *s;
	uint64_t want;   /* the next sequence number to return */
	bool open;       /* sc is on a segment */
	uint64_t seg_next; /* first sequence of the segment after it */
	struct fsafe__scan sc;
};

/* A failed call on the handle (or a reader of it): its detail, to the
   error member the open was given. */
static int spool_fail(const fsafe_spool *s, int r, const char *step)
{
	if (r < 0)
		fsafe__error_set(s->error, r, -r, step, false);
	return r;
}

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
static int seg_found(int fd, const char *name, unsigned char type,
                     void *arg)
{
	uint64_t seq;

	(void)fd, (void)type;
	return fsafe__seg_parse(name, &seq) ? seg_push(arg, seq) : 0;
}

static int list_segments(fsafe_spool *s, int dfd)
{
	int r = fsafe__dir_each(dfd, seg_found, s);

	if (r == 0 && s->nsegs)
		qsort(s->segs, s->nsegs, sizeof(*s->segs), cmp_u64);
	return r;
}

/* fsafe__open_regular's answers for an entry that is not a regular file
   (-ENXIO: a socket, which O_NONBLOCK cannot open). */
static bool not_a_file(int err)
{
	return err == -ELOOP || err == -EISDIR || err == -EBADFD ||
	       err == -ENXIO;
}

static int open_seg(int dfd, uint64_t first, int flags)
{
	char name[FSAFE__SEG_NAME_LEN + 1];

	fsafe__seg_name(name, first);
	return fsafe__open_regular(dfd, name, flags, NULL);
}

/* ---- damage: what check reports, and open and repair mend ------------------ */

/* One walk over the spool's state: repairing (open, repair) or only
   reporting (check, which changes nothing on disk). */
struct walk {
	fsafe_spool *s;
	bool fix;
	fsafe_damage_fn fn;
	void *arg;
	uint64_t chain;  /* the number the next kept record would carry */
};

static void report(struct walk *w, const char *path, const char *what,
                   const char *action, uint64_t lost)
{
	struct fsafe_damage d = { path, what, w->fix ? action : NULL, lost };

	w->s->problems++;
	w->s->lost += lost;
	if (w->fn && !w->s->stopped)
		w->s->stopped = w->fn(&d, w->arg);
}

static const char *type_problem(int err)
{
	return err == -ELOOP    ? "a symbolic link, not a file"
	       : err == -EISDIR ? "a directory, not a file"
	                        : "not a regular file";
}

/* Try dst = "name", "name.1", ... until `try` does not say -EEXIST. */
#define FREE_NAME(dst, name, r, try)                                          \
	for (unsigned i_ = 0; i_ < 1000; i_++) {                              \
		snprintf(dst, sizeof(dst), i_ ? "%s.%u" : "%s", name, i_);    \
		if (((r) = (try)) != -EEXIST)                                 \
			break;                                                \
	}

static int rename_free(int from, const char *name, int to, const char *dst)
{
	int r = fsafe__renameat2(from, name, to, dst, RENAME_NOREPLACE);

	if (r == -ENOSYS || r == -EINVAL)
		r = fsafe__fstatat(to, dst, &(struct stat){ 0 },
		                   AT_SYMLINK_NOFOLLOW) == -ENOENT
		            ? fsafe__renameat(from, name, to, dst)
		            : -EEXIST;
	return r;
}

/*
 * quarantine/, made when missing. Whatever else stands under that name (a
 * symlink, a FIFO...) is never followed: it is moved into a new
 * quarantine/ itself. The directory's fd, or -errno.
 */
static int quarantine_dir(fsafe_spool *s)
{
	char tmp[32];
	int r, qfd = fsafe__open_subdir(s->dirfd, QUARANTINE);

	if (qfd >= 0 || (qfd != -ENOENT && qfd != -ELOOP && qfd != -ENOTDIR))
		return qfd;
	bool displaced = qfd != -ENOENT;
	if (displaced) {
		FREE_NAME(tmp, QUARANTINE ".displaced", r,
		          rename_free(s->dirfd, QUARANTINE, s->dirfd, tmp));
		if (r < 0)
			return r;
	}
	if ((r = fsafe__mkdirat(s->dirfd, QUARANTINE, 0777)) < 0 &&
	    r != -EEXIST)
		return r;
	if ((qfd = fsafe__open_subdir(s->dirfd, QUARANTINE)) < 0)
		return qfd;
	if (displaced) {
		char dst[32];
		FREE_NAME(dst, QUARANTINE, r, rename_free(s->dirfd, tmp, qfd,
		                                         dst));
		if (r == 0)
			r = fsafe__fsync(qfd);
	}
	if (r == 0)
		r = fsafe__fsync(s->dirfd);
	if (r < 0) {
		fsafe__close(qfd);
		return r;
	}
	return qfd;
}

/* Move the entry `name` (any type, never followed) into quarantine/ under
   a name not taken there (the same one may go bad twice), durably. */
static int move_in(fsafe_spool *s, const char *name, char *dst, size_t len)
{
	char d[FSAFE__SEG_NAME_LEN + 16];
	int r, qfd = quarantine_dir(s);

	if (qfd < 0)
		return qfd;
	FREE_NAME(d, name, r, rename_free(s->dirfd, name, qfd, d));
	if (r == 0 && (r = fsafe__fsync(qfd)) == 0)
		r = fsafe__fsync(s->dirfd);
	fsafe__close(qfd);
	snprintf(dst, len, QUARANTINE "/%s", d);
	return r;
}

/* Copy bytes [from, to) of fd into quarantine/NAME@FROM, durably. */
static int copy_out(fsafe_spool *s, int fd, const char *name, uint64_t from,
                    uint64_t to, char *dst, size_t len)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	char base[FSAFE__SEG_NAME_LEN + 24], d[FSAFE__SEG_NAME_LEN + 32];
	unsigned char buf[16384];
	fsafe_writer *wr;
	int r, qfd = quarantine_dir(s);

	if (qfd < 0)
		return qfd;
	wo.flags = FSAFE_CREATE_ONLY;
	snprintf(base, sizeof(base), "%s@%" PRIu64, name, from);
	FREE_NAME(d, base, r,
	          fsafe__fstatat(qfd, d, &(struct stat){ 0 },
	                         AT_SYMLINK_NOFOLLOW) == -ENOENT ? 0 : -EEXIST);
	if (r == 0)
		r = fsafe_writer_open(qfd, d, &wo, &wr);
	for (uint64_t at = from; r == 0 && at < to;) {
		size_t n = to - at < sizeof(buf) ? (size_t)(to - at) : sizeof(buf);
		ssize_t got = fsafe__pread_full(fd, buf, n, at);
		if (got <= 0) {
			fsafe_writer_abort(wr);
			r = got < 0 ? (int)got : -EIO;
			break;
		}
		if ((r = fsafe_writer_write(wr, buf, (size_t)got)) < 0)
			fsafe_writer_abort(wr);
		at += (uint64_t)got;
	}
	if (r == 0)
		r = fsafe_writer_commit(wr);
	fsafe__close(qfd);
	snprintf(dst, len, QUARANTINE "/%s", d);
	return r == FSAFE_ENOTDURABLE ? -EIO : r;
}

/* ---- cursor --------------------------------------------------------------- */

/* The writer names its own failed step in `error` (may be NULL). */
static int cursor_store(int dfd, uint64_t cursor, struct fsafe_error *error)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	unsigned char b[FSAFE__CURSOR_LEN];

	wo.error = error;
	fsafe__cursor_encode(b, cursor);
	return fsafe_write_fileat(dfd, CURSOR_NAME, b, sizeof(b), &wo);
}

/* The stored cursor, or 0 when there is none. A cursor that is not a file
   or does not validate is damage: reading starts at the oldest record
   (redelivery beats loss), and repair moves it to quarantine. */
static int walk_cursor(struct walk *w, uint64_t *cursor)
{
	unsigned char b[FSAFE__CURSOR_LEN + 1];
	char what[64], dst[64];
	const char *why;

	*cursor = 0;
	int fd = fsafe__open_regular(w->s->dirfd, CURSOR_NAME, O_RDONLY, NULL);
	if (fd == -ENOENT)
		return 0;
	if (fd >= 0) {
		ssize_t n = fsafe__pread_full(fd, b, sizeof(b), 0);
		fsafe__close(fd);
		if (n < 0)
			return (int)n;
		if (!(why = fsafe__cursor_decode(b, (size_t)n, cursor)))
			return 0;
		*cursor = 0;
		snprintf(what, sizeof(what), "bad cursor (%s)", why);
	} else if (not_a_file(fd)) {
		snprintf(what, sizeof(what), "%s", type_problem(fd));
	} else {
		return fd;
	}
	int r = w->fix ? move_in(w->s, CURSOR_NAME, dst, sizeof(dst)) : 0;
	if (r < 0)
		return r;
	char action[128];
	snprintf(action, sizeof(action), "moved to %s; reading starts at the "
	         "oldest record", dst);
	report(w, CURSOR_NAME, what, action, 0);
	return 0;
}

/* ---- segments --------------------------------------------------------------- */

/* A stretch of consecutive valid frames in a segment. */
struct run {
	uint64_t start, end;  /* byte range */
	uint64_t first, next; /* numbers: [first, next) */
	const char *why;      /* what ends it (NULL: the end of the file) */
};

/* One segment, scanned past any damage. */
struct seg_scan {
	char name[FSAFE__SEG_NAME_LEN + 1];
	int fd;
	uint64_t size;
	struct fsafe__scan sc;
	const char *bad; /* the whole entry is bad: why */
	struct run *runs;
	size_t nruns;
};

static void seg_scan_free(struct seg_scan *g)
{
	if (g->fd >= 0)
		fsafe__close(g->fd);
	fsafe__scan_free(&g->sc);
	free(g->runs);
}

static int push_run(struct seg_scan *g, const struct run *r)
{
	struct run *n = realloc(g->runs, (g->nruns + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	g->runs = n;
	g->runs[g->nruns++] = *r;
	return 0;
}

/* Every run of valid frames of segment `first`, or g->bad set, or -ENOENT
   when it is gone, or -errno. */
/* Every run of valid frames from sc's position on. */
static int collect_runs(struct seg_scan *g)
{
	const void *d;
	size_t len;
	uint64_t seq;
	int r;

	for (;;) {
		struct run run = { .start = g->sc.pos, .first = g->sc.next_seq };
		while ((r = fsafe__scan_next(&g->sc, &d, &len, &seq)) == 1)
			;
		if (r < 0)
			return r;
		run.end = g->sc.pos;
		run.next = g->sc.next_seq;
		run.why = g->sc.problem;
		/* The space an appender made ahead of its tail reads as
		   zeros: the end of the frames, not a torn tail. */
		if (run.why && (r = fsafe__scan_zero_from(&g->sc, run.end)) != 0) {
			if (r < 0)
				return r;
			run.why = NULL;
		}
		if (run.end == g->size)
			run.why = NULL;
		if ((r = push_run(g, &run)) < 0 || !run.why ||
		    (r = fsafe__scan_resync(&g->sc)) <= 0)
			return r < 0 ? r : 0;
	}
}

/*
 * A damaged header still holds the salt its frames were written with,
 * unless that is damaged too: frames that validate with it, at their own
 * offsets, with numbers from the name on, are this segment's. Their runs
 * (none: the entry is not a segment of this spool).
 */
static int header_salvage(struct seg_scan *g, uint64_t first)
{
	unsigned char raw[FSAFE__SEG_HDR];

	if (strcmp(g->sc.problem, "bad header") != 0 ||
	    fsafe__pread_full(g->fd, raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return 0;
	g->sc.hdr.first_seq = first;
	g->sc.hdr.salt = get64(raw + 16);
	g->sc.hdr.max_record = FSAFE__RECORD_LIMIT;
	g->sc.pos = FSAFE__SEG_HDR;
	g->sc.next_seq = first;
	int r = collect_runs(g);
	size_t k = 0;
	for (size_t i = 0; i < g->nruns; i++) /* keep runs with records */
		if (g->runs[i].next > g->runs[i].first)
			g->runs[k++] = g->runs[i];
	g->nruns = k;
	return r;
}

/* Every run of valid frames of segment `first`, or g->bad set (with runs
   when a bad header's frames can be salvaged), or -ENOENT when it is
   gone, or -errno. */
static int seg_scan(int dfd, uint64_t first, struct seg_scan *g)
{
	struct stat st;
	int r;

	memset(g, 0, sizeof(*g));
	fsafe__seg_name(g->name, first);
	if ((g->fd = fsafe__open_regular(dfd, g->name, O_RDONLY, &st)) < 0) {
		r = g->fd;
		if (!not_a_file(r))
			return r;
		g->bad = type_problem(r);
		return 0;
	}
	g->size = (uint64_t)st.st_size;
	if ((r = fsafe__scan_open(&g->sc, g->fd, first)) != 0) {
		g->bad = g->sc.problem;
		return r < 0 ? r : header_salvage(g, first);
	}
	return collect_runs(g);
}

/* Re-frame run `run` of g as a new segment named by its first number
   (salt and offsets of its own). One left by an earlier repair cut short
   is kept as it is. */
static int write_salvage(fsafe_spool *s, struct seg_scan *g,
                         const struct run *run, bool replace)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	struct fsafe__seg_hdr nh = { .first_seq = run->first,
	                             .max_record = g->sc.hdr.max_record };
	unsigned char h[FSAFE__SEG_HDR];
	char name[FSAFE__SEG_NAME_LEN + 1];
	const void *d;
	size_t len;
	uint64_t seq, off = FSAFE__SEG_HDR;
	fsafe_writer *wr;
	int r = fsafe__random(&nh.salt, sizeof(nh.salt));

	wo.flags = replace ? 0 : FSAFE_CREATE_ONLY;
	fsafe__seg_name(name, run->first);
	if (r == 0)
		r = fsafe_writer_open(s->dirfd, name, &wo, &wr);
	if (r < 0)
		return r == -EEXIST ? 0 : r;
	fsafe__seg_hdr_encode(h, &nh);
	r = fsafe_writer_write(wr, h, sizeof(h));
	g->sc.pos = run->start;
	g->sc.next_seq = run->first;
	while (r == 0 && g->sc.next_seq < run->next) {
		if ((r = fsafe__scan_next(&g->sc, &d, &len, &seq)) != 1) {
			r = r < 0 ? r : -EIO; /* changed under us */
			break;
		}
		fsafe__frame_encode(h, nh.salt, seq, off, d, (uint32_t)len);
		if ((r = fsafe_writer_write(wr, h, FSAFE__FRAME_HDR)) == 0)
			r = fsafe_writer_write(wr, d, len);
		off += FSAFE__FRAME_HDR + len;
	}
	if (r < 0) {
		fsafe_writer_abort(wr);
		return r;
	}
	r = fsafe_writer_commit(wr);
	return r == -EEXIST ? 0 : r == FSAFE_ENOTDURABLE ? -EIO : r;
}

/* Keep the sorted list of segments holding `first` (a salvaged run). */
static int seg_insert(fsafe_spool *s, uint64_t first)
{
	size_t i = 0;

	while (i < s->nsegs && s->segs[i] < first)
		i++;
	if (i < s->nsegs && s->segs[i] == first)
		return 0;
	int r = seg_push(s, first);
	if (r == 0) {
		memmove(s->segs + i + 1, s->segs + i,
		        (s->nsegs - 1 - i) * sizeof(*s->segs));
		s->segs[i] = first;
	}
	return r;
}

/* Records known to be missing between the chain and `upto`, when they are
   not consumed yet. */
static uint64_t missing(const struct walk *w, uint64_t upto)
{
	uint64_t from = w->chain > w->s->cursor ? w->chain : w->s->cursor;

	return upto > from ? upto - from : 0;
}

/*
 * Damage inside a segment: each damaged stretch, and a tail that holds no
 * valid frame, is copied to quarantine; each run of valid frames after
 * damage becomes a segment of its own; then the file is cut to its valid
 * prefix. A crash in between repeats the copies (a second copy, never a
 * loss) and keeps the salvaged segments already written.
 */
static int mend_segment(struct walk *w, struct seg_scan *g, size_t i,
                        bool last)
{
	fsafe_spool *s = w->s;
	char what[96], action[192], dst[96] = "";
	uint64_t chain = w->chain;
	int r = 0;

	for (size_t k = 0; k < g->nruns; k++) {
		const struct run *run = &g->runs[k];
		uint64_t to = k + 1 < g->nruns ? g->runs[k + 1].start : g->size;
		if (!run->why || to == run->end)
			continue;
		uint64_t salvaged = 0, lost;
		for (size_t j = k + 1; j < g->nruns; j++)
			salvaged += g->runs[j].next - g->runs[j].first;
		w->chain = run->next;
		if (k + 1 < g->nruns)
			lost = missing(w, g->runs[k + 1].first);
		else
			lost = last ? 0 : missing(w, s->segs[i + 1]);
		if (w->fix && (r = copy_out(s, g->fd, g->name, run->end, to,
		                            dst, sizeof(dst))) < 0)
			return r;
		bool torn = last && k + 1 == g->nruns;
		snprintf(what, sizeof(what), "%s at offset %" PRIu64 " (%s)",
		         torn ? "torn tail" : "bad frame", run->end, run->why);
		snprintf(action, sizeof(action),
		         "%" PRIu64 " bytes quarantined as %s; %" PRIu64
		         " records after it salvaged", to - run->end, dst,
		         salvaged);
		report(w, g->name, what, action, lost);
		s->qbytes += to - run->end;
		s->salvaged += salvaged;
		if (torn)
			s->truncated += to - run->end;
	}
	/* Losses up to here are counted: the next segment's gap is not
	   (nor, after a salvaged header, the runs already counted). */
	if (g->runs[g->nruns - 1].next > chain)
		chain = g->runs[g->nruns - 1].next;
	w->chain = chain;
	if (!last && g->runs[g->nruns - 1].why && s->segs[i + 1] > w->chain)
		w->chain = s->segs[i + 1];
	for (size_t k = 1; w->fix && k < g->nruns; k++)
		if ((r = write_salvage(s, g, &g->runs[k], false)) < 0 ||
		    (r = seg_insert(s, g->runs[k].first)) < 0)
			return r;
	if (!w->fix)
		return 0;
	int fd = fsafe__open_regular(s->dirfd, g->name, O_WRONLY, NULL);
	if (fd < 0)
		return fd;
	if (SYS->ftruncate(fd, (off_t)g->runs[0].end) < 0)
		r = -errno;
	else
		r = fsafe__fdatasync(fd);
	fsafe__close(fd);
	return r;
}

/* Segment i is gone or is not one of this spool's (not a file, a header
   that is bad or names another number): the entry goes to quarantine. */
static int drop_entry(struct walk *w, struct seg_scan *g, size_t i)
{
	char dst[96] = "", action[128];
	int r = w->fix ? move_in(w->s, g->name, dst, sizeof(dst)) : 0;

	if (r < 0 && r != -ENOENT)
		return r;
	snprintf(action, sizeof(action), "moved to %s", dst);
	report(w, g->name, g->bad, action, 0);
	w->s->quarantined++;
	seg_remove(w->s, i);
	return 0;
}

/* The append position: the last segment's valid end, opened for writing. */
static int open_tail(struct walk *w, const struct seg_scan *g)
{
	fsafe_spool *s = w->s;

	s->whdr = g->sc.hdr;
	s->tail = s->reserved = g->runs[0].end; /* mend_segment cut it there */
	if (!w->fix)
		return 0;
	/* Read too: an abandoned tail is copied to quarantine through it. */
	s->wfd = fsafe__open_regular(s->dirfd, g->name, O_RDWR, NULL);
	return s->wfd < 0 ? s->wfd : 0;
}

/*
 * A segment whose header is damaged but whose frames validate: the whole
 * file is copied to quarantine, its runs are written as segments of their
 * own (the one at its own name last, replacing it), and a file left with
 * no run at its name goes. A crash in between repeats the copy and keeps
 * what was written. 1: look at index i again (fix), 0: go on (check).
 */
static int salvage_whole(struct walk *w, struct seg_scan *g, size_t i)
{
	fsafe_spool *s = w->s;
	char what[96], action[192], dst[96] = "";
	uint64_t salvaged = 0, lost = missing(w, g->runs[0].first);
	bool own = g->runs[0].first == s->segs[i];
	int r = 0;

	for (size_t k = 0; k < g->nruns; k++) {
		salvaged += g->runs[k].next - g->runs[k].first;
		if (k)
			lost += g->runs[k].first - g->runs[k - 1].next;
	}
	if (w->fix && (r = copy_out(s, g->fd, g->name, 0, g->size, dst,
	                            sizeof(dst))) < 0)
		return r;
	snprintf(what, sizeof(what), "%s", g->bad);
	snprintf(action, sizeof(action), "%" PRIu64 " bytes quarantined as "
	         "%s; %" PRIu64 " records salvaged", g->size, dst, salvaged);
	report(w, g->name, what, action, lost);
	s->qbytes += g->size;
	s->salvaged += salvaged;
	w->chain = g->runs[g->nruns - 1].next;
	if (!w->fix)
		return 0;
	for (size_t k = own; k < g->nruns; k++)
		if ((r = write_salvage(s, g, &g->runs[k], false)) < 0 ||
		    (r = seg_insert(s, g->runs[k].first)) < 0)
			return r;
	if (own)
		return (r = write_salvage(s, g, &g->runs[0], true)) < 0 ? r : 1;
	if ((r = fsafe__unlinkat(s->dirfd, g->name, 0)) < 0 && r != -ENOENT)
		return r;
	seg_remove(s, i);
	return (r = fsafe__fsync(s->dirfd)) < 0 ? r : 1;
}

static int walk_segment(struct walk *w, size_t i)
{
	fsafe_spool *s = w->s;
	struct seg_scan g;
	char what[96];
	int r = seg_scan(s->dirfd, s->segs[i], &g);

	if (r == -ENOENT) { /* gone meanwhile: not an error */
		seg_scan_free(&g);
		seg_remove(s, i);
		return 1;
	}
	if (r == 0 && g.bad && g.nruns) {
		r = salvage_whole(w, &g, i);
		seg_scan_free(&g);
		return r;
	}
	if (r == 0 && g.bad)
		r = drop_entry(w, &g, i);
	if (r < 0 || g.bad) {
		seg_scan_free(&g);
		return r < 0 ? r : 1;
	}
	uint64_t gap = missing(w, s->segs[i]);
	if (gap) {
		snprintf(what, sizeof(what), "%" PRIu64 " records before it "
		         "missing (from %" PRIu64 ")", gap,
		         w->chain > s->cursor ? w->chain : s->cursor);
		report(w, g.name, what, "none possible: they are gone", gap);
	}
	bool last = i + 1 == s->nsegs;
	if ((r = mend_segment(w, &g, i, last)) == 0 && i + 1 == s->nsegs &&
	    (r = open_tail(w, &g)) == 0)
		s->next_seq = g.runs[g.nruns - 1].next;
	seg_scan_free(&g);
	return r;
}

/* Entries named like segments that are not (bad header, wrong number,
   not a file) go first, so they never change which segment is last. */
static int drop_strays(struct walk *w)
{
	struct seg_scan g;

	for (size_t i = 0; i < w->s->nsegs;) {
		int r = seg_scan(w->s->dirfd, w->s->segs[i], &g);
		if (r == -ENOENT) {
			seg_remove(w->s, i);
			r = 1;
		} else if (r == 0 && g.bad && !g.nruns &&
		           (r = drop_entry(w, &g, i)) == 0) {
			r = 1;
		}
		seg_scan_free(&g);
		if (r < 0)
			return r;
		i += r == 0;
	}
	return 0;
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

/* The quarantine/ entry, when there is one, must be a directory. */
static int walk_quarantine(struct walk *w)
{
	struct stat st;
	int r = fsafe__fstatat(w->s->dirfd, QUARANTINE, &st,
	                       AT_SYMLINK_NOFOLLOW);

	if (r == -ENOENT || (r == 0 && S_ISDIR(st.st_mode)))
		return 0;
	if (r < 0)
		return r;
	if (w->fix && (r = quarantine_dir(w->s)) < 0)
		return r;
	if (w->fix)
		fsafe__close(r);
	report(w, QUARANTINE, S_ISLNK(st.st_mode) ? "a symbolic link, not a "
	       "directory" : "not a directory", "moved to "
	       QUARANTINE "/" QUARANTINE, 0);
	return 0;
}

/*
 * A cursor ahead of the data: records up to it were acknowledged, so no
 * number below it may be handed out again; the next append starts a
 * segment at the cursor. Nothing is dropped on its word meanwhile.
 */
static void walk_cursor_ahead(struct walk *w)
{
	fsafe_spool *s = w->s;
	char what[96];

	if (s->cursor <= s->next_seq)
		return;
	snprintf(what, sizeof(what), "cursor %" PRIu64 " is ahead of the "
	         "data (next record %" PRIu64 ")", s->cursor, s->next_seq);
	report(w, CURSOR_NAME, what, "the next record appended gets the "
	       "cursor's number: none acknowledged is handed out again", 0);
	s->cursor_ahead = s->cursor - s->next_seq;
	s->next_seq = s->cursor;
	if (s->wfd >= 0)
		s->wfd = fsafe__close(s->wfd);
}

/* Drops of the cursor file are caught when segments were dropped before
   it: a fresh spool has no cursor, but one whose first record is past 1
   had one. */
static void walk_cursor_missing(struct walk *w, bool had_cursor)
{
	fsafe_spool *s = w->s;

	if (had_cursor || !s->nsegs || s->segs[0] <= 1)
		return;
	report(w, CURSOR_NAME, "missing although records were consumed",
	       "reading starts at the oldest record", 0);
}

/* The head must be a regular file (it is rebuilt at every open, so
   nothing in it is damage). */
static int walk_head(struct walk *w)
{
	char dst[64], action[96];
	int fd = fsafe__open_regular(w->s->dirfd, HEAD_NAME, O_RDONLY, NULL);

	if (fd >= 0)
		fsafe__close(fd);
	if (fd >= 0 || fd == -ENOENT)
		return 0;
	if (!not_a_file(fd))
		return fd;
	int r = w->fix ? move_in(w->s, HEAD_NAME, dst, sizeof(dst)) : 0;
	if (r < 0)
		return r;
	snprintf(action, sizeof(action), "moved to %s; made again", dst);
	report(w, HEAD_NAME, type_problem(fd), action, 0);
	return 0;
}

static int walk(struct walk *w)
{
	fsafe_spool *s = w->s;
	int r = w->fix ? fsafe_sweep(s->dirfd, ".", 0, 0, NULL, NULL) : 0;
	bool had;

	had = fsafe__fstatat(s->dirfd, CURSOR_NAME, &(struct stat){ 0 },
	                     AT_SYMLINK_NOFOLLOW) == 0;
	if (r < 0 || (r = walk_quarantine(w)) < 0 ||
	    (r = list_segments(s, s->dirfd)) < 0 ||
	    (r = walk_cursor(w, &s->cursor)) < 0 ||
	    (r = drop_strays(w)) < 0)
		return r;
	walk_cursor_missing(w, had);
	/* Records from the cursor on must all be there: a gap is a loss. */
	w->chain = s->cursor ? s->cursor : s->nsegs ? s->segs[0] : 1;
	s->next_seq = 1;
	for (size_t i = 0; i < s->nsegs;)
		if ((r = walk_segment(w, i)) < 0)
			return r;
		else
			i += r == 0;
	walk_cursor_ahead(w);
	if (s->cursor == 0)
		s->cursor = s->nsegs ? s->segs[0] : s->next_seq;
	if (w->fix && s->cursor_ahead == 0)
		drop_consumed(s);
	/* Whole frames an appender that died left unsynced are records now:
	   durable before the head names them. */
	if (w->fix && s->wfd >= 0 && (r = fsafe__fdatasync(s->wfd)) < 0)
		return r;
	s->durable_seq = s->next_seq;
	return walk_head(w);
}

/* ---- sharing: the lock and the head ---------------------------------------- */

/*
 * Appenders in any number of processes and one reader share a spool. The
 * spool's lock, an flock on its directory (the kernel drops it with its
 * holder, so a killed process never wedges the spool), is held for one
 * append round (write, sync, publish), one ack, one recovery: never for a
 * process's life. Before it is dropped, what the round made durable is
 * published in the head file, so the next holder adopts the tail instead
 * of scanning for it, and readers, which take no lock, read only up to
 * the durable end the head names. Recovery runs under the lock too, so a
 * torn tail it cuts is never one a live appender is still writing.
 */

/* Take the spool's lock for this handle. Its threads share one flock
   (one open file description): the first holder takes it, the last
   drops it. Called with mu held. */
static int excl_take(fsafe_spool *s)
{
	if (s->held == 0) {
		int r = fsafe__flock(s->dirfd, LOCK_EX);
		if (r < 0)
			return r;
		s->view_ok = false; /* others may have appended meanwhile */
		s->round_syncs = 0;
	}
	s->held++;
	return 0;
}

static void excl_drop(fsafe_spool *s)
{
	if (--s->held > 0)
		return;
	/* A failure leaves it to close, which drops it for sure. */
	fsafe__flock(s->dirfd, LOCK_UN);
	s->releasing = false;
	pthread_cond_broadcast(&s->cv);
}

/*
 * A walk that changes nothing (check, a read-only open) takes the lock
 * shared, so that an append in progress is not reported as a torn tail.
 * It waits 2 s at most for one (an older library held the lock for a
 * process's life), then walks without it: reporting never hangs.
 */
static bool share_take(fsafe_spool *s)
{
	for (int i = 0; i < 200; i++) {
		int r = fsafe__flock(s->dirfd, LOCK_SH | LOCK_NB);
		if (r == 0)
			return true;
		if (r != -EWOULDBLOCK)
			return false;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	return false;
}

/* The head: 1 with *h, 0 when missing or invalid, or -errno. A reader
   (no lock) may meet an update half done: it reads again. */
static int head_read(const fsafe_spool *s, struct fsafe__head *h)
{
	unsigned char b[FSAFE__HEAD_LEN + 1];

	if (s->hfd < 0)
		return 0;
	for (int i = 0; i < 4; i++) {
		/* One pread, not pread_full's second one to see the end: a
		   short count here only fails the decode, and we read again. */
		ssize_t n = SYS->pread(s->hfd, b, sizeof(b), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (fsafe__head_decode(b, (size_t)n, h))
			return 1;
	}
	return 0;
}

/* Publish the append state: everything below durable_seq is synced. The
   lock is held. */
static int head_write(fsafe_spool *s)
{
	unsigned char b[FSAFE__HEAD_LEN];
	struct fsafe__head h = { .gen = s->gen, .last = s->whdr.first_seq,
	                         .tail = s->tail, .next = s->durable_seq,
	                         .flags = s->wfd < 0 ? FSAFE__HEAD_ROLL : 0 };

	fsafe__head_encode(b, &h);
	int r = fsafe__pwrite_all(s->hfd, b, sizeof(b), 0);
	if (r < 0)
		s->step = "publish the head";
	return r;
}

/* The segment set changes: every other handle's view of the tail is
   stale from here on. */
static int head_bump(fsafe_spool *s)
{
	struct fsafe__head h;
	int r = head_read(s, &h);

	if (r < 0)
		return r;
	if (r == 1)
		s->gen = h.gen + 1;
	else if ((r = fsafe__random(&s->gen, sizeof(s->gen))) < 0)
		return r;
	return head_write(s);
}

/* The head file, made when missing (read-only: none is fine). */
static int head_open(fsafe_spool *s)
{
	int flags = s->rdonly ? O_RDONLY : O_RDWR | O_CREAT;
	struct stat st;

	if (s->hfd >= 0)
		s->hfd = fsafe__close(s->hfd);
	int fd = fsafe__openat(s->dirfd, HEAD_NAME,
	                       flags | O_NOFOLLOW | O_NONBLOCK, 0666);
	int r = fd < 0 ? fd : fsafe__fstat(fd, &st);
	if (r == 0 && !S_ISREG(st.st_mode))
		r = -EBADFD;
	if (r < 0 && fd >= 0)
		fsafe__close(fd);
	if (r < 0)
		return s->rdonly ? 0 : r; /* read-only: readers use their own */
	s->hfd = fd;
	return 0;
}

/*
 * Bytes past the published tail were written by an appender that died or
 * failed before publishing them: never acknowledged, never read. Like a
 * torn tail at open, they are copied to quarantine, then cut.
 */
static int cut_leftover(fsafe_spool *s, uint64_t size)
{
	char name[FSAFE__SEG_NAME_LEN + 1], dst[96];

	fsafe__seg_name(name, s->whdr.first_seq);
	int r = copy_out(s, s->wfd, name, s->tail, size, dst, sizeof(dst));
	if (r == 0 && SYS->ftruncate(s->wfd, (off_t)s->tail) < 0)
		r = -errno;
	if (r < 0) {
		s->step = "cut an abandoned tail";
		return r;
	}
	s->qbytes += size - s->tail;
	s->truncated += size - s->tail;
	s->reserved = s->tail;
	return 0;
}

/* Another process changed the segment set: take up the last segment the
   head names. 1 when it is not what the head says. */
static int reopen_tail(fsafe_spool *s, const struct fsafe__head *h)
{
	struct fsafe__scan sc = { 0 };

	if (s->wfd >= 0)
		s->wfd = fsafe__close(s->wfd);
	s->whdr = (struct fsafe__seg_hdr){ 0 };
	s->nsegs = 0;
	int r = list_segments(s, s->dirfd);
	if (r < 0)
		return r;
	if ((s->nsegs ? s->segs[s->nsegs - 1] : 0) != h->last)
		return 1; /* a change that died half done */
	if (!h->last)
		return 0;
	int fd = open_seg(s->dirfd, h->last, O_RDWR);
	if (fd < 0)
		return fd == -ENOENT || not_a_file(fd) ? 1 : fd;
	r = fsafe__scan_open(&sc, fd, h->last);
	fsafe__scan_free(&sc);
	if (r == 0 && !(h->flags & FSAFE__HEAD_ROLL)) {
		s->wfd = fd;
		s->reserved = h->tail;
	} else {
		fsafe__close(fd);
		if (r != 0)
			return r;
	}
	s->whdr = sc.hdr;
	return 0;
}

/* Recovery, as at open, under the lock: the head could not be trusted. */
static int recover_view(fsafe_spool *s)
{
	struct walk w = { .s = s, .fix = true };

	if (s->wfd >= 0)
		s->wfd = fsafe__close(s->wfd);
	s->whdr = (struct fsafe__seg_hdr){ 0 };
	s->nsegs = 0;
	s->tail = 0;
	int r = walk(&w);
	if (r == 0)
		r = head_open(s);
	return r < 0 ? r : head_bump(s);
}

/*
 * What lies at the tail: 0 zeros (space made ahead), 1 bytes an appender
 * wrote and never published (every append starts at the tail, so they
 * begin there), 2 the file ends before the tail (cut by hand), 3 it ends
 * at the tail or in the eight bytes after it (no space ahead), or -errno.
 * One read, of the byte before the tail and eight after it.
 */
static int tail_probe(const fsafe_spool *s)
{
	static const unsigned char zero[8];
	unsigned char b[9];
	ssize_t n;

	/* One pread: a regular file reads short only at its end, so a
	   second one to see the end (pread_full's) would learn nothing. */
	do
		n = SYS->pread(s->wfd, b, sizeof(b), (off_t)s->tail - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 2;
	if (memcmp(b + 1, zero, (size_t)n - 1) != 0)
		return 1;
	return n < (ssize_t)sizeof(b) ? 3 : 0;
}

/* A segment no longer appended to ends at its last frame. Best effort,
   the lock held: a reserve left behind reads as zeros, which no walk
   takes for damage. */
static void trim_reserve(fsafe_spool *s)
{
	if (s->reserved > s->tail &&
	    SYS->ftruncate(s->wfd, (off_t)s->tail) == 0)
		s->reserved = s->tail;
}

/*
 * Make the append state the spool's, the lock held: usually the head only
 * moved on (others appended) and the tail is adopted from it; bytes past
 * it are an abandoned append; a new gen means the segments changed; a head
 * that is missing, invalid or names a segment that is not the last means
 * recovery.
 */
static int sync_view(fsafe_spool *s)
{
	struct fsafe__head h;
	uint64_t size;
	int r = head_read(s, &h);

	bool valid = r == 1;

	s->step = "take up the tail";
	if (r < 0)
		return r;
	if (valid && h.gen != s->gen) {
		if ((r = reopen_tail(s, &h)) < 0)
			return r;
		if (r == 0)
			s->gen = h.gen;
	}
	if (!valid || h.gen != s->gen || h.last != s->whdr.first_seq)
		return recover_view(s);
	s->tail = h.tail;
	s->next_seq = s->durable_seq = h.next;
	if (s->wfd < 0 || (r = tail_probe(s)) == 0)
		return r;
	if (r == 3) {
		/* Another handle's close cut the reserve this one made. */
		s->reserved = s->tail;
		return 0;
	}
	if (r == 2) /* cut by hand: damage */
		return recover_view(s);
	if (r < 0 || (r = fsafe__file_size(s->wfd, &size)) < 0)
		return r;
	return size > s->tail ? cut_leftover(s, size) : 0;
}

/* ---- open / close ------------------------------------------------------------ */

struct spool_opts {
	unsigned flags;
	uint64_t segment_size;
	uint32_t max_record;
	struct fsafe_error *error;
	fsafe_damage_fn damage;
	void *damage_arg;
};

/*
 * The caller's options, with defaults for 0. A segment must hold its
 * header and one frame of the longest record (a default max_record
 * shrinks to that): a record larger than a segment would make segments
 * of one record each, over the size asked for. Past SEGMENT_LIMIT a size
 * is a mistake, not a plan (a damaged segment is copied whole).
 */
static int opts_load(struct spool_opts *o, const struct fsafe_spool_opts *in,
                     const char **step)
{
	struct fsafe_spool_opts v;
	int r = FSAFE__OPTS_COPY(&v, in, FSAFE_SPOOL_OPTS_SIZE_V0);

	o->flags = v.flags;
	o->segment_size = v.segment_size ? v.segment_size : DEFAULT_SEGMENT;
	o->max_record = v.max_record;
	if (!o->max_record && o->segment_size > SEG_OVERHEAD)
		o->max_record = o->segment_size - SEG_OVERHEAD < DEFAULT_RECORD
		                        ? (uint32_t)(o->segment_size - SEG_OVERHEAD)
		                        : DEFAULT_RECORD;
	/* A struct too large still has our layout's error member; one too
	   small may lack it. */
	o->error = r == -E2BIG ? in->error : v.error;
	o->damage = v.damage;
	o->damage_arg = v.damage_arg;
	*step = "options (size)";
	if (r < 0)
		return r;
	*step = "options (flags)";
	if (v.flags & ~(unsigned)(FSAFE_SPOOL_CREATE | FSAFE_SPOOL_RDONLY))
		return -EINVAL;
	*step = "options (max_record above 256 MiB)";
	if (o->max_record > FSAFE__RECORD_LIMIT)
		return -EINVAL;
	*step = "options (segment_size below one record)";
	if (o->segment_size <= SEG_OVERHEAD ||
	    o->segment_size < SEG_OVERHEAD + (uint64_t)o->max_record)
		return -EINVAL;
	*step = "options (segment_size above 1 TiB)";
	if (o->segment_size > SEGMENT_LIMIT)
		return -EINVAL;
	*step = "options";
	return 0;
}

/* Create the spool directory (missing parents too), durably. */
static int make_dir(int dirfd, const char *path, const char **step)
{
	return fsafe__mkdir_p(dirfd, path, 0777, true, NULL, step);
}

static fsafe_spool *spool_new(const struct spool_opts *o)
{
	fsafe_spool *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->dirfd = s->wfd = s->hfd = -1;
	s->segment_size = o->segment_size;
	s->max_record = o->max_record;
	s->error = o->error;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

/* Open the directory and recover under the spool's lock (read-only: no
   lock, nothing changed), then publish a new gen: whatever the others
   knew of the tail is checked again. */
static int spool_recover(fsafe_spool *s, int dirfd, const char *path,
                         const struct spool_opts *o, const char **step)
{
	struct walk w = { .s = s, .fix = !s->rdonly, .fn = o->damage,
	                  .arg = o->damage_arg };
	int r;

	*step = "open";
	if ((s->dirfd = fsafe__open_dir(dirfd, path)) < 0)
		return s->dirfd;
	*step = "lock";
	bool shared = s->rdonly && share_take(s);
	if (!s->rdonly && (r = excl_take(s)) < 0)
		return r;
	*step = "recover";
	if ((r = walk(&w)) == 0 && (r = head_open(s)) == 0 && !s->rdonly)
		r = head_bump(s);
	if (!s->rdonly)
		excl_drop(s);
	if (shared)
		fsafe__flock(s->dirfd, LOCK_UN);
	return r;
}

/* A damaged or unreadable id never stops the open; only failing to make
   a missing one does. */
static int spool_id_load(fsafe_spool *s, const char **step)
{
	int r = fsafe__spool_id_load(s->dirfd, !s->rdonly, s->id);

	*step = "id";
	s->id_err = r;
	return r == -ENOENT || r == -EBADMSG || not_a_file(r) ? 0 : r;
}

int fsafe_spool_open(int dirfd, const char *path,
                     const struct fsafe_spool_opts *opts, fsafe_spool **out)
{
	struct spool_opts o;
	const char *step;
	fsafe_spool *s = NULL;
	int r = opts_load(&o, opts, &step);

	assert(out);
	*out = NULL;
	if (r == 0 && (!path || !path[0]))
		r = -EINVAL, step = "path";
	if (r == 0 && (o.flags & FSAFE_SPOOL_CREATE))
		r = make_dir(dirfd, path, &step);
	if (r == 0 && !(s = spool_new(&o)))
		r = -ENOMEM;
	if (r == 0)
		s->rdonly = o.flags & FSAFE_SPOOL_RDONLY;
	if (r == 0)
		r = spool_recover(s, dirfd, path, &o, &step);
	if (r == 0)
		r = spool_id_load(s, &step);
	if (r < 0) {
		fsafe__error_set(o.error, r, -r, step, false);
		fsafe_spool_close(s);
		return r;
	}
	*out = s;
	return 0;
}

int fsafe_spool_id(fsafe_spool *s, char out[33])
{
	if (s->id_err < 0)
		return s->id_err;
	memcpy(out, s->id, sizeof(s->id));
	return 0;
}

/*
 * A closed spool's last segment ends at its last frame, as it would
 * without a reserve: trimmed under the lock when the head still names
 * this handle's tail and nothing was written past it.
 */
static void close_reserve(fsafe_spool *s)
{
	struct fsafe__head h;

	if (s->wfd < 0 || s->reserved <= s->tail || s->broken ||
	    fsafe__flock(s->dirfd, LOCK_EX) < 0)
		return;
	if (head_read(s, &h) == 1 && h.gen == s->gen &&
	    h.last == s->whdr.first_seq && h.tail == s->tail &&
	    tail_probe(s) == 0)
		trim_reserve(s);
	fsafe__flock(s->dirfd, LOCK_UN);
}

void fsafe_spool_close(fsafe_spool *s)
{
	if (!s)
		return;
	close_reserve(s);
	if (s->wfd >= 0)
		fsafe__close(s->wfd);
	if (s->hfd >= 0)
		fsafe__close(s->hfd);
	if (s->dirfd >= 0)
		fsafe__close(s->dirfd); /* drops the flock, if a failure kept it */
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->segs);
	free(s->wbuf);
	free(s);
}

/* ---- append --------------------------------------------------------------- */

/*
 * Make room ahead of the tail for a small append of `len` bytes and a
 * reserve more, within the segment, written as zeros: the file's size and
 * blocks change once a reserve, not with each append. (Allocated but not
 * written, as fallocate leaves them, each first write into a block would
 * convert it: a commit again.) One write, from a calloc'd buffer the
 * kernel maps to its zero page. Best effort: where it fails, the write
 * grows the file as it goes.
 *
 * The reserve is as large as what this handle has appended (a page at
 * least, RESERVE at most), and none before its first append is written:
 * every zero is written out by the next fdatasync, so a one-shot
 * appender would pay for a reserve its own close cuts again, while one
 * that stays pays for its zeros a doubling at a time.
 */
static void reserve(fsafe_spool *s, size_t len)
{
	uint64_t ahead = s->appended < RESERVE ? s->appended : RESERVE;

	if (ahead < RESERVE_PAGE)
		ahead = RESERVE_PAGE;
	uint64_t to = (s->tail + len + ahead + RESERVE_PAGE - 1) &
	              ~(uint64_t)(RESERVE_PAGE - 1);

	if (s->reserved < s->tail) /* never below the frames */
		s->reserved = s->tail;
	if (!s->appended || len > RESERVE_MAX ||
	    s->tail + len <= s->reserved)
		return;
	if (to > s->segment_size)
		to = s->segment_size;
	if (to <= s->reserved)
		return;
	size_t n = (size_t)(to - s->reserved);
	void *zeros = calloc(1, n);
	if (zeros && fsafe__pwrite_all(s->wfd, zeros, n,
	                               (off_t)s->reserved) == 0)
		s->reserved = to;
	free(zeros);
}

/* Write the buffered frames at the tail. Called with mu held. */
static int wbuf_flush(fsafe_spool *s)
{
	reserve(s, s->wlen);
	int r = fsafe__pwrite_all(s->wfd, s->wbuf, s->wlen, (off_t)s->tail);

	if (r < 0) {
		s->step = "write";
		return r;
	}
	s->tail += s->wlen;
	s->appended += s->wlen;
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
	s->step = "roll over";
	if (s->wfd >= 0) {
		/* (Skipped when the last group commit already covered it.) */
		if (s->flushes != s->synced_flushes &&
		    (r = fsafe__fdatasync(s->wfd)) < 0)
			return r;
		s->synced_flushes = s->flushes;
		s->synced_gen = s->written_gen;
		s->durable_seq = s->next_seq;
		trim_reserve(s);
		s->wfd = fsafe__close(s->wfd);
	}
	/* Before the new segment exists: a holder after a crash here sees
	   the gen moved and lists the segments again. */
	if ((r = head_bump(s)) < 0 ||
	    (r = fsafe__random(&nh.salt, sizeof(nh.salt))) < 0)
		return r;
	fsafe__seg_hdr_encode(h, &nh);
	fsafe__seg_name(name, nh.first_seq);
	wo.flags = FSAFE_CREATE_ONLY;
	if ((r = fsafe_write_fileat(s->dirfd, name, h, sizeof(h), &wo)) < 0)
		return r;
	if ((r = seg_push(s, nh.first_seq)) < 0)
		return r;
	if ((s->wfd = open_seg(s->dirfd, nh.first_seq, O_RDWR)) < 0)
		return s->wfd;
	s->whdr = nh;
	s->tail = s->reserved = FSAFE__SEG_HDR;
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
		s->round_syncs++;
		pthread_mutex_unlock(&s->mu);
		int r = fsafe__fdatasync(fd);
		pthread_mutex_lock(&s->mu);
		s->syncing = false;
		if (r < 0) {
			s->broken = r;
			s->step = "fdatasync";
		} else if (target > s->synced_gen) {
			s->synced_gen = target;
			s->durable_seq = seq;
			s->synced_flushes = flushes;
			if ((r = head_write(s)) < 0)
				s->broken = r;
		}
		/* The round is over when this sync covered every write: its
		   appenders drop the lock before new ones take it, so other
		   processes get their turn. */
		s->releasing = s->held > 0 && s->synced_gen == s->written_gen;
		pthread_cond_broadcast(&s->cv);
	}
	return s->synced_gen >= gen ? 0 : s->broken;
}

/* Join the next append round: the lock, and the tail as the spool has
   it. Called with mu held. */
static int round_join(fsafe_spool *s)
{
	int r;

	/* Appenders that come during a round's first sync share its second;
	   later ones wait for the next round, so the lock is held for two
	   syncs at most. */
	while (s->releasing || s->filling ||
	       (s->syncing && s->round_syncs > 1))
		pthread_cond_wait(&s->cv, &s->mu);
	if ((r = s->broken) < 0)
		return r;
	if ((r = excl_take(s)) < 0) {
		s->step = "lock";
		return r;
	}
	if (!s->view_ok && (r = sync_view(s)) < 0) {
		excl_drop(s);
		return r;
	}
	s->view_ok = true;
	return 0;
}

static int append_locked(fsafe_spool *s, const struct iovec *recs, size_t n,
                         uint64_t *first)
{
	int r = round_join(s);

	if (r < 0)
		return r;
	/* A rollover waits for a sync with mu released: no other batch may
	   take numbers inside this one meanwhile. */
	*first = s->next_seq;
	s->filling = true;
	for (size_t i = 0; r == 0 && i < n; i++)
		r = put_record(s, &recs[i]);
	if (r == 0 && n)
		r = wbuf_flush(s);
	s->filling = false;
	pthread_cond_broadcast(&s->cv);
	if (r < 0) {
		/* The tail now holds frames of unknown state: refuse more. */
		s->broken = r;
		s->wlen = 0;
		excl_drop(s);
		pthread_cond_broadcast(&s->cv);
		return r;
	}
	if (n)
		r = wait_durable(s, ++s->written_gen);
	excl_drop(s);
	return r;
}

int fsafe_spool_append(fsafe_spool *s, const struct iovec *recs, size_t n,
                       uint64_t *first_seq)
{
	uint64_t first;

	assert(s && (recs || !n));
	if (s->rdonly)
		return spool_fail(s, -EBADF, "append (read-only)");
	for (size_t i = 0; i < n; i++)
		if (recs[i].iov_len > s->max_record)
			return spool_fail(s, -EMSGSIZE,
			                  "append (record above max_record)");
	pthread_mutex_lock(&s->mu);
	int r = append_locked(s, recs, n, &first);
	if (r < 0)
		spool_fail(s, r, s->step ? s->step : "append");
	pthread_mutex_unlock(&s->mu);
	if (r == 0 && first_seq)
		*first_seq = first;
	return r;
}

/* ---- reading ------------------------------------------------------------------ */

int fsafe_spool_reader_open(fsafe_spool *s, uint64_t from,
                            fsafe_spool_reader **out)
{
	assert(s && out);
	fsafe_spool_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return spool_fail(s, -ENOMEM, "allocate");
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

/*
 * The durable end as readers see it: the head's (appenders in other
 * processes publish there), or this handle's own when it knows more (a
 * read-only handle's walk after a power cut, before any open rebuilt the
 * head) or the head cannot be read (its own is durable too, only maybe
 * behind: the records past it come at a later call).
 */
/* A view that is this handle's own, not the head (never on disk). */
#define VIEW_OWN (1u << 31)

static int spool_view(fsafe_spool *s, struct fsafe__head *h)
{
	struct fsafe__head own = { .last = UINT64_MAX, .flags = VIEW_OWN };
	int r = head_read(s, h);

	pthread_mutex_lock(&s->mu);
	own.next = s->durable_seq;
	pthread_mutex_unlock(&s->mu);
	if (r <= 0 || h->next < own.next)
		*h = own;
	return 0;
}

/* How far into segment `first` a reader may read (0: all of it): to the
   published tail of the last segment, nothing past the header of one
   newer than the head knows. */
static uint64_t read_bound(const struct fsafe__head *h, uint64_t first)
{
	if (first < h->last || (first == h->last &&
	                        (h->flags & FSAFE__HEAD_ROLL)))
		return 0;
	return first == h->last ? h->tail : FSAFE__SEG_HDR;
}

/* The segment list afresh: others roll over and drop segments. */
static int relist(fsafe_spool *s)
{
	pthread_mutex_lock(&s->mu);
	s->nsegs = 0;
	int r = list_segments(s, s->dirfd);
	pthread_mutex_unlock(&s->mu);
	return r;
}

/* Open the segment holding r->want (or the next one kept): 1 when on one,
   0 when there is none, or -errno. */
static int reader_enter(fsafe_spool_reader *r, const struct fsafe__head *v)
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
		if (fd < 0 && !not_a_file(fd))
			return fd;
		/* Bounded before the first read: the window never holds
		   bytes an appender may still replace. */
		r->sc.end = read_bound(v, first);
		int h = fd < 0 ? 1 : fsafe__scan_open(&r->sc, fd, first);
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

static int reader_next(fsafe_spool_reader *r, const void **data, size_t *len,
                       uint64_t *seq)
{
	fsafe_spool *s = r->s;
	struct fsafe__head v;
	int looked = 0; /* the segment list read again, at the end */

	for (;;) {
		int e = spool_view(s, &v);
		if (e < 0)
			return e;
		if (r->want >= v.next)
			return 0;
		e = r->open ? 1 : reader_enter(r, &v);
		if (e < 0)
			return e;
		if (e == 0) {
			/* Below the durable end but in no segment listed:
			   another process rolled over. */
			if (looked++ || (e = relist(s)) < 0)
				return e < 0 ? e : 0;
			continue;
		}
		r->sc.end = read_bound(&v, r->sc.hdr.first_seq);
		uint64_t at = r->sc.pos;
		e = fsafe__scan_next(&r->sc, data, len, seq);
		if (e < 0)
			return e;
		if (e == 1 && *seq >= v.next) { /* not durable yet: later */
			r->sc.pos = at;
			r->sc.next_seq = *seq;
			fsafe__scan_reset(&r->sc);
			return 0;
		}
		if (e == 1 && *seq >= r->want) {
			r->want = *seq + 1;
			/* Read unbounded: what follows in the window may not be
			   durable yet, so it is read again next time. */
			if (v.flags & VIEW_OWN)
				r->sc.len = 0;
			return 1;
		}
		if (e == 1)
			continue; /* before `from`: skip */
		/* Read-only, damage stays in place: go on past it. */
		if (s->rdonly && r->sc.problem &&
		    (e = fsafe__scan_resync(&r->sc)) != 0) {
			if (e < 0)
				return e;
			continue;
		}
		if (r->seg_next == UINT64_MAX) {
			/* The end of what was the last segment: it may have
			   grown, or a rollover made it whole; read afresh
			   (twice at most, then it is the end for now). */
			reader_leave(r);
			if (looked++ > 1)
				return 0;
			if ((e = relist(s)) < 0)
				return e;
			continue;
		}
		/* The segment ends (whole, or corrupt from here on). */
		reader_leave(r);
		if (r->want < r->seg_next)
			r->want = r->seg_next;
	}
}

int fsafe_spool_next(fsafe_spool_reader *r, const void **data, size_t *len,
                     uint64_t *seq)
{
	assert(r && data && len && seq);
	int e = reader_next(r, data, len, seq);

	/* Segments are opened and read, nothing else can fail here. */
	return e < 0 ? spool_fail(r->s, e, "read segment") : e;
}

/* ---- ack, stat ---------------------------------------------------------------- */

int fsafe_spool_ack(fsafe_spool *s, uint64_t seq)
{
	struct fsafe__head v;

	assert(s);
	if (s->rdonly)
		return spool_fail(s, -EBADF, "ack (read-only)");
	int r = spool_view(s, &v);
	if (r < 0)
		return spool_fail(s, r, "ack (read the head)");
	uint64_t cursor = seq >= v.next ? v.next : seq + 1;
	pthread_mutex_lock(&s->mu);
	if (cursor <= s->cursor) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	/* Under the lock: an open's sweep never takes the cursor's staging
	   file, and a drop never races a recovery. */
	if ((r = excl_take(s)) < 0) {
		pthread_mutex_unlock(&s->mu);
		return spool_fail(s, r, "ack (lock)");
	}
	pthread_mutex_unlock(&s->mu);
	r = cursor_store(s->dirfd, cursor, s->error);
	pthread_mutex_lock(&s->mu);
	if (r == 0) { /* FSAFE_ENOTDURABLE too: keep every segment */
		s->cursor = cursor;
		drop_consumed(s);
	}
	excl_drop(s);
	pthread_mutex_unlock(&s->mu);
	return r;
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

/* Entries in quarantine/: what every open since the spool began moved
   there, so the count survives reopening. */
static int count_one(int fd, const char *name, unsigned char type, void *arg)
{
	(void)fd, (void)name, (void)type;
	++*(uint64_t *)arg;
	return 0;
}

static uint64_t quarantine_entries(fsafe_spool *s)
{
	uint64_t n = 0;
	int fd = fsafe__open_subdir(s->dirfd, QUARANTINE);

	if (fd >= 0) {
		fsafe__dir_each(fd, count_one, &n);
		fsafe__close(fd);
	}
	return n;
}

int fsafe_spool_stat(fsafe_spool *s, struct fsafe_spool_stat *out)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;
	struct fsafe__head v;

	assert(s && out);
	int r = spool_view(s, &v);
	if (r < 0)
		return spool_fail(s, r, "stat (read the head)");
	pthread_mutex_lock(&s->mu);
	st.cursor = s->cursor;
	st.next_seq = v.next;
	st.first_seq = s->nsegs && s->segs[0] < st.next_seq ? s->segs[0]
	                                                     : st.next_seq;
	st.segments = s->nsegs;
	st.bytes = spool_bytes(s);
	st.quarantined = s->quarantined;
	st.truncated = s->truncated;
	st.dropped = s->dropped;
	st.quarantined_bytes = s->qbytes;
	st.salvaged = s->salvaged;
	st.lost = s->lost;
	st.cursor_ahead = s->cursor_ahead;
	st.quarantine_entries = quarantine_entries(s);
	pthread_mutex_unlock(&s->mu);
	r = FSAFE__OPTS_COPY_OUT(out, &st, FSAFE_SPOOL_STAT_SIZE_V0);
	return spool_fail(s, r, "stat (size)");
}

/* ---- check, repair --------------------------------------------------------------- */

int fsafe_spool_check(int dirfd, const char *path, fsafe_damage_fn fn,
                      void *arg)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	struct spool_opts so;
	const char *step;

	opts_load(&so, &o, &step);
	fsafe_spool *s = spool_new(&so);
	if (!s)
		return -ENOMEM;
	struct walk w = { .s = s, .fix = false, .fn = fn, .arg = arg };
	int r = (s->dirfd = fsafe__open_dir(dirfd, path));
	if (r >= 0) {
		share_take(s); /* close drops it */
		r = walk(&w);
	}
	if (r >= 0)
		r = s->stopped ? s->stopped : s->problems;
	fsafe_spool_close(s);
	return r;
}

int fsafe_spool_repair(int dirfd, const char *path, fsafe_damage_fn fn,
                       void *arg)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s;

	o.damage = fn;
	o.damage_arg = arg;
	int r = fsafe_spool_open(dirfd, path, &o, &s);
	if (r < 0)
		return r;
	r = s->stopped ? s->stopped : s->problems;
	fsafe_spool_close(s);
	return r;
}
