/*
 * The checkpoint store: a set of files saved and restored as one unit.
 *
 * A commit fills a fresh generation directory through a batch (the files
 * and the manifest, data synced together, the directory synced once),
 * syncs the checkpoint directory (so the generation's own entry is
 * durable), and only then replaces CURRENT through the writer. CURRENT is
 * the only thing load trusts, so a crash anywhere leaves the old set or
 * the new one. Everything newer than CURRENT is a partial generation and
 * is removed under the lock; nothing is ever written in place, so a file
 * hard-linked into a newer generation cannot change an older one.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "checkpoint.h"
#include "checkpoint_load.h"
#include "crc32c.h"
#include "error.h"
#include "events.h"
#include "fsafe.h"
#include "fsafe/checkpoint.h"
#include "fsafe/lock.h"
#include "manifest.h"
#include "opts.h"
#include "sys.h"
#include "syncmany.h"
#include "thread.h"
#include "util.h"
#include "writer.h"

#define MANIFEST_MAX ((size_t)256 << 20)
#define LOG_MAX ((size_t)256 << 20)
#define GEN_MAX UINT64_C(999999999999)
#define GEN_NAME_LEN (4 + FSAFE__CKPT_GEN_DIGITS)
/* From this many bytes to sum, a commit computes each sum on a thread of
   its own while its files are written and synced; below, a thread costs
   more than it saves. */
#define HASH_THREAD_MIN ((size_t)256 << 10)

/* ---- small helpers ------------------------------------------------------ */

/* seq <= GEN_MAX, so the name always has exactly 12 digits. */
static void gen_name(uint64_t seq, char out[GEN_NAME_LEN + 1])
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "gen-%0*" PRIu64, FSAFE__CKPT_GEN_DIGITS,
	         seq % (GEN_MAX + 1));
	memcpy(out, tmp, GEN_NAME_LEN + 1);
}

/* The sequence number of a generation directory's name, or 0. */
static uint64_t gen_parse(const char *name)
{
	uint64_t seq = 0;

	if (strncmp(name, "gen-", 4) != 0 || strlen(name) != GEN_NAME_LEN)
		return 0;
	for (const char *p = name + 4; *p; p++) {
		if (*p < '0' || *p > '9')
			return 0;
		seq = seq * 10 + (uint64_t)(*p - '0');
	}
	return seq;
}

/* ---- the handle ---------------------------------------------------------- */

/* A sorted set of generation numbers. */
struct u64set {
	uint64_t *v;
	size_t n, cap;
};

/*
 * What the audit trail says: the highest number it names, and the
 * generations saved and never removed or quarantined since ("live"): a
 * live generation newer than CURRENT is no unfinished save but a CURRENT
 * set back; a live one that is missing was lost.
 */
struct trail {
	uint64_t max;
	struct u64set saved, gone;
	size_t torn;  /* bytes of events.log's torn tail */
};

struct reaper {
	pthread_t t;
	pid_t pid;    /* the process that started it; 0: none running */
	uint64_t *v;  /* the generations to remove */
	size_t n;
	int err;      /* the first removal that failed */
};

struct fsafe_checkpoint {
	int dirfd;
	unsigned flags, keep;
	mode_t mode;
	char *revision;
	bool have_revision;
	fsafe_lock *lock;
	int logfd;          /* events.log, or -1 (read-only, or unopenable) */
	bool log_newline;   /* the log ends in a torn record: start afresh */
	bool unclean;
	bool in_tx;
	bool untidy;        /* a generation to remove may be left: see tidy */
	uint64_t current;
	/* Why CURRENT cannot be trusted (0: it can): while it is not, no
	   generation is removed. */
	int cur_err;
	uint64_t seen;      /* the highest generation number ever seen */
	struct trail trail; /* writer: the audit trail as open found it */
	struct reaper reap; /* a save's removals, running (see reap_run) */
	struct fsafe__sync_pool *pool; /* a writer's, for every save's syncs */
	struct fsafe_error *error; /* the caller's, from the open */
};

/* A failed call on the handle or on a transaction or stream of it: its
   detail, to the error member the open was given. */
static int cp_fail(const fsafe_checkpoint *cp, int r, const char *step)
{
	if (r < 0)
		fsafe__error_set(cp->error, r, -r, step, false);
	return r;
}

/* ---- the event log ------------------------------------------------------- */

/*
 * Append events durably: one write and one sync for all of them (a save
 * and the removals it makes due); with `sync` false, only written (a
 * load's: below). pwrite at the size we hold: the fd is O_APPEND, so the
 * kernel appends anyway, and the offset passed is the one the write
 * really lands at (which a recorder of the table sees). An audit failure
 * never fails the operation it records.
 */
struct event {
	enum fsafe_checkpoint_event_kind kind;
	uint64_t gen;
};

static int log_events(fsafe_checkpoint *cp, const struct event *ev, size_t n,
                      bool sync)
{
	char one[FSAFE__EVENT_MAX + 1], *rec = one;
	struct stat st;
	size_t len = 0;
	int r;

	if (!n || cp->logfd < 0)
		return 0;
	if (n > 1 && !(rec = malloc(n * FSAFE__EVENT_MAX + 1)))
		return -ENOMEM;
	if ((r = fsafe__fstat(cp->logfd, &st)) < 0)
		goto out;
	if (cp->log_newline)
		rec[len++] = '\n';
	for (size_t i = 0; i < n; i++)
		len += (size_t)fsafe__event_format(rec + len, FSAFE__EVENT_MAX,
		                                   fsafe__now_ms(), getpid(),
		                                   ev[i].kind, ev[i].gen);
	if ((r = fsafe__pwrite_all(cp->logfd, rec, len, st.st_size)) == 0 &&
	    (!sync || (r = fsafe__fdatasync(cp->logfd)) == 0))
		cp->log_newline = false;
	else
		cp->log_newline = true; /* a short write left a torn record */
out:
	if (rec != one)
		free(rec);
	return r;
}

static void log_event(fsafe_checkpoint *cp, enum fsafe_checkpoint_event_kind k,
                      uint64_t gen)
{
	struct event e = { k, gen };

	(void)log_events(cp, &e, 1, true);
}

/* A load changes nothing in the store, so its event is written and not
   synced: a load never waits for the device (a flush of its own was
   about a fifth of a small load's time here). A crash may lose that
   record and nothing else; the next synced event makes it durable too. */
static void log_load(fsafe_checkpoint *cp, uint64_t gen)
{
	struct event e = { FSAFE_CHECKPOINT_EV_LOADED, gen };

	(void)log_events(cp, &e, 1, false);
}

static int open_log(fsafe_checkpoint *cp)
{
	struct stat st;
	char last = '\n';

	/* Created first, then opened as a regular file: a FIFO or a link in
	   its place must neither block nor lead out of the store. */
	int fd = fsafe__openat(cp->dirfd, FSAFE__CKPT_LOG,
	                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	                       O_NONBLOCK, 0644);
	if (fd >= 0)
		fsafe__close(fd);
	cp->logfd = fsafe__open_regular(cp->dirfd, FSAFE__CKPT_LOG,
	                                O_WRONLY | O_APPEND, &st);
	if (cp->logfd < 0)
		return cp->logfd;
	if (st.st_size > 0) {
		int rfd = fsafe__open_regular(cp->dirfd, FSAFE__CKPT_LOG,
		                              O_RDONLY, NULL);
		if (rfd < 0)
			return rfd;
		if (fsafe__pread_full(rfd, &last, 1, st.st_size - 1) != 1)
			last = 0;
		fsafe__close(rfd);
	}
	cp->log_newline = last != '\n';
	return 0;
}

/* What reading the log found besides its intact records. */
struct log_state {
	size_t bad;       /* damaged lines before the torn tail */
	size_t tail_bad;  /* lines of the torn tail */
	size_t torn;      /* bytes of the torn tail */
};

static int count_event(const struct fsafe_checkpoint_event *e, void *arg)
{
	(void)e;
	(void)arg;
	return 0;
}

/* fn for each intact record of dirfd's events.log. */
static int log_read(int dirfd, fsafe_checkpoint_event_fn fn, void *arg,
                    struct log_state *st)
{
	char *text;
	size_t len;
	int r = fsafe__read_file_at(dirfd, FSAFE__CKPT_LOG, LOG_MAX, &text,
	                            &len);

	memset(st, 0, sizeof(*st));
	if (r < 0)
		return r;
	size_t tail = fsafe__events_tail(text, len);
	st->torn = len - tail;
	/* The tail alone first (parsing cuts lines in place). */
	fsafe__events_parse(text + tail, len - tail, count_event, NULL,
	                    &st->tail_bad);
	r = fsafe__events_parse(text, tail, fn, arg, &st->bad);
	free(text);
	return r;
}

int fsafe_checkpoint_events(int dirfd, const char *path,
                            fsafe_checkpoint_event_fn fn, void *arg,
                            size_t *damaged)
{
	struct log_state st;

	assert(fn);
	int dfd = fsafe__open_dir(dirfd, path);

	if (damaged)
		*damaged = 0;
	if (dfd < 0)
		return dfd;
	int r = log_read(dfd, fn, arg, &st);
	fsafe__close(dfd);
	if (damaged)
		*damaged = st.bad + st.tail_bad;
	return r;
}

/* ---- CURRENT --------------------------------------------------------------- */

/* The generation CURRENT names: 0 when absent, -EBADMSG when malformed. */
static int read_current(int dirfd, uint64_t *seq)
{
	char *text;
	size_t len;
	int r = fsafe__read_file_at(dirfd, FSAFE__CKPT_CURRENT, 4096, &text,
	                            &len);

	*seq = 0;
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r == -EFBIG ? -EBADMSG : r;
	if (len == GEN_NAME_LEN + 1 && text[GEN_NAME_LEN] == '\n') {
		text[GEN_NAME_LEN] = '\0';
		*seq = gen_parse(text);
	}
	free(text);
	return *seq ? 0 : -EBADMSG;
}

/* CURRENT's content naming generation seq: GEN_NAME_LEN + 1 bytes. */
static void current_text(uint64_t seq, char text[GEN_NAME_LEN + 2])
{
	gen_name(seq, text);
	text[GEN_NAME_LEN] = '\n';
}

static struct fsafe_write_opts current_opts(struct fsafe_error *e)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.error = e;
	o.mode = 0644;
	o.flags = FSAFE_NO_FOLLOW | FSAFE_NO_TMPFILE;
	return o;
}

/* The writer's detail of a failure goes to `e` (may be NULL). */
static int write_current(fsafe_checkpoint *cp, uint64_t seq,
                         struct fsafe_error *e)
{
	struct fsafe_write_opts o = current_opts(e);
	char text[GEN_NAME_LEN + 2];

	current_text(seq, text);
	return fsafe_write_fileat(cp->dirfd, FSAFE__CKPT_CURRENT, text,
	                          GEN_NAME_LEN + 1, &o);
}

/*
 * CURRENT's next content staged ahead, so that its data sync can run
 * beside the manifest's; published by current_publish once the
 * generation is durable. NULL if it could not be started: the save then
 * writes CURRENT whole at the end.
 */
static fsafe_writer *current_stage(fsafe_checkpoint *cp, uint64_t seq,
                                   struct fsafe_error *e)
{
	struct fsafe_write_opts o = current_opts(e);
	char text[GEN_NAME_LEN + 2];
	fsafe_writer *w;

	current_text(seq, text);
	if (fsafe_writer_open(cp->dirfd, FSAFE__CKPT_CURRENT, &o, &w) < 0)
		return NULL;
	if (fsafe_writer_write(w, text, GEN_NAME_LEN + 1) < 0 ||
	    fsafe__writer_link(w) < 0 || fsafe__writer_needs_fsync(w) ||
	    fsafe__writer_data_fd(w) < 0) {
		fsafe_writer_abort(w);
		return NULL;
	}
	return w;
}

/* Publish a staged CURRENT whose data is synced, and sync the directory. */
static int current_publish(fsafe_writer *w)
{
	fsafe__writer_publish(w);
	fsafe__writer_sync_dir(w);
	return fsafe__writer_finish(w);
}

/* ---- generation directories ------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct gens {
	uint64_t *v;
	size_t n, cap;
	bool dirs_only;
};

static int gen_push(int fd, const char *name, unsigned char type, void *arg)
{
	struct gens *g = arg;
	uint64_t seq = gen_parse(name);

	(void)fd;
	if (!seq || (g->dirs_only && type != DT_DIR && type != DT_UNKNOWN))
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 8;
		uint64_t *nv = realloc(g->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		g->v = nv, g->cap = cap;
	}
	g->v[g->n++] = seq;
	return 0;
}

/* Every gen-* entry's sequence number (only directories', or every
   entry's), sorted. */
static int list_gens(int dirfd, bool dirs_only, uint64_t **out, size_t *n)
{
	struct gens g = { .dirs_only = dirs_only };
	int r = fsafe__dir_each(dirfd, gen_push, &g);

	*n = 0;
	if (r < 0) {
		free(g.v);
		return r;
	}
	if (g.n)
		qsort(g.v, g.n, sizeof(*g.v), cmp_u64);
	*out = g.v;
	*n = g.n;
	return 0;
}

/*
 * The generation CURRENT names, or why it cannot be trusted: -ENOENT when
 * it is missing but generations exist (lost, not a new checkpoint),
 * -EBADMSG when malformed, -EISDIR / -EBADFD / -ELOOP when it is not a
 * regular file. 0 with *seq 0: a checkpoint never saved.
 */
static int current_state(int dirfd, uint64_t *seq)
{
	uint64_t *v = NULL;
	size_t n = 0;
	int r = read_current(dirfd, seq);

	if (r < 0 || *seq)
		return r;
	if ((r = list_gens(dirfd, true, &v, &n)) < 0)
		return r;
	free(v);
	return n ? -ENOENT : 0;
}

/* Damage to CURRENT, as opposed to a failure to look at it. */
static bool current_damaged(int r)
{
	return r == -ENOENT || r == -EBADMSG || r == -EISDIR || r == -EBADFD ||
	       r == -ELOOP || r == -ENXIO; /* ENXIO: a socket */
}


static void set_add(struct u64set *s, uint64_t x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		uint64_t *nv = realloc(s->v, cap * sizeof(*nv));
		if (!nv)
			return; /* a shorter set: only less is known */
		s->v = nv, s->cap = cap;
	}
	s->v[s->n++] = x;
}

static bool set_has(const struct u64set *s, uint64_t x)
{
	return s->n && bsearch(&x, s->v, s->n, sizeof(x), cmp_u64);
}

static int trail_event(const struct fsafe_checkpoint_event *e, void *arg)
{
	struct trail *t = arg;

	if (e->generation > GEN_MAX)
		return 0;
	if (e->generation > t->max)
		t->max = e->generation;
	if (e->kind == FSAFE_CHECKPOINT_EV_SAVED)
		set_add(&t->saved, e->generation);
	else if (e->kind == FSAFE_CHECKPOINT_EV_REMOVED ||
	         (e->kind == FSAFE_CHECKPOINT_EV_QUARANTINED && e->generation))
		set_add(&t->gone, e->generation);
	return 0;
}

static void trail_read(int dirfd, struct trail *t)
{
	struct log_state st;

	memset(t, 0, sizeof(*t));
	log_read(dirfd, trail_event, t, &st);
	t->torn = st.torn;
	if (t->saved.n)
		qsort(t->saved.v, t->saved.n, sizeof(uint64_t), cmp_u64);
	if (t->gone.n)
		qsort(t->gone.v, t->gone.n, sizeof(uint64_t), cmp_u64);
}

static bool trail_live(const struct trail *t, uint64_t seq)
{
	return set_has(&t->saved, seq) && !set_has(&t->gone, seq);
}

static void trail_free(struct trail *t)
{
	free(t->saved.v);
	free(t->gone.v);
	memset(t, 0, sizeof(*t));
}

/* A quarantined entry is named for its generation, a suffix after it. */
static int quarantined_max(int fd, const char *name, unsigned char type,
                           void *arg)
{
	uint64_t *max = arg;
	char g[GEN_NAME_LEN + 1];

	(void)fd, (void)type;
	snprintf(g, sizeof(g), "%s", name);
	uint64_t q = gen_parse(g);
	*max = q > *max ? q : *max;
	return 0;
}

/*
 * The highest generation number this checkpoint ever used: every gen-*
 * entry present (of any type), every one in quarantine/, and every one the
 * audit trail names (t). A save takes a number above it, so a lost CURRENT
 * never makes a number stand for two different sets.
 */
static uint64_t seen_max(int dirfd, const struct trail *t)
{
	uint64_t *v = NULL, max = t->max;
	size_t n = 0;
	int qfd;

	if (list_gens(dirfd, false, &v, &n) == 0 && n && v[n - 1] > max)
		max = v[n - 1];
	free(v);
	if ((qfd = fsafe__open_subdir(dirfd, FSAFE__CKPT_QUARANTINE)) >= 0) {
		fsafe__dir_each(qfd, quarantined_max, &max);
		fsafe__close(qfd);
	}
	return max;
}

/* quarantine/ (made when missing and `create`), never through a link. */
static int open_quarantine(int dirfd, bool create)
{
	return create ? fsafe__subdir_make(dirfd, FSAFE__CKPT_QUARANTINE, 0777,
	                                   true)
	              : fsafe__open_subdir(dirfd, FSAFE__CKPT_QUARANTINE);
}

/*
 * Move entry `name` of dirfd, whatever it is, into quarantine/ (as `name`,
 * or `name.N` when that is taken) with a note `<as>.why` saying why: the
 * damaged bytes are kept as they were found, out of the way. The new name
 * goes to `as` (NAME_MAX + 1 bytes). Made durable before it returns.
 */
static int quarantine_from(int dirfd, int srcfd, const char *name,
                           const char *qname, const char *why, char *as)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	char note[NAME_MAX + 1];
	struct stat st;
	int r, qfd = open_quarantine(dirfd, true);

	if (qfd < 0)
		return qfd;
	snprintf(as, NAME_MAX + 1, "%s", qname);
	for (unsigned i = 1; i < 100000 &&
	     fsafe__fstatat(qfd, as, &st, AT_SYMLINK_NOFOLLOW) == 0; i++)
		snprintf(as, NAME_MAX + 1, "%.200s.%u", qname, i);
	r = fsafe__renameat(srcfd, name, qfd, as);
	if (r == 0 && srcfd != dirfd)
		r = fsafe__fsync(srcfd);
	if (r == 0) {
		snprintf(note, sizeof(note), "%.240s.why", as);
		o.flags = FSAFE_NO_FOLLOW;
		o.mode = 0644;
		fsafe_write_fileat(qfd, note, why, strlen(why), &o);
		r = fsafe__fsync(qfd);
		if (r == 0)
			r = fsafe__fsync(dirfd);
	}
	fsafe__close(qfd);
	return r;
}

static int quarantine(int dirfd, const char *name, const char *why, char *as)
{
	return quarantine_from(dirfd, dirfd, name, name, why, as);
}

/* CURRENT into quarantine/, with the reason, and an event. */
static int quarantine_current(fsafe_checkpoint *cp)
{
	char why[128], as[NAME_MAX + 1];

	snprintf(why, sizeof(why), "CURRENT: %s\n", fsafe_strerror(cp->cur_err));
	int r = quarantine(cp->dirfd, FSAFE__CKPT_CURRENT, why, as);
	if (r == 0)
		log_event(cp, FSAFE_CHECKPOINT_EV_QUARANTINED, 0);
	return r;
}

struct kept {
	char *out;
	size_t n;
};

/* An intact record, formatted again (never longer than the line it was
   parsed from, so the buffer of the whole log holds them all). */
static int keep_event(const struct fsafe_checkpoint_event *e, void *arg)
{
	struct kept *k = arg;
	char rec[FSAFE__EVENT_MAX];
	int n = fsafe__event_format(rec, sizeof(rec), e->time_ms, e->pid,
	                            e->kind, e->generation);

	memcpy(k->out + k->n, rec, (size_t)n);
	k->n += (size_t)n;
	return 0;
}

/* A log with damaged records or a torn tail: the whole log to quarantine
   (`why` says why), the intact records back in place. */
static int rewrite_log(int dirfd, const char *why, char *as)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;
	struct kept k = { 0 };
	char *text = NULL;
	size_t len, bad;
	int r = fsafe__read_file_at(dirfd, FSAFE__CKPT_LOG, LOG_MAX, &text,
	                            &len);

	if (r < 0)
		return r;
	k.out = malloc(len + 1);
	if (k.out)
		fsafe__events_parse(text, len, keep_event, &k, &bad);
	free(text);
	if (!k.out)
		return -ENOMEM;
	r = quarantine(dirfd, FSAFE__CKPT_LOG, why, as);
	o.flags = FSAFE_NO_FOLLOW;
	o.mode = 0644;
	if (r == 0)
		r = fsafe_write_fileat(dirfd, FSAFE__CKPT_LOG, k.out, k.n, &o);
	free(k.out);
	return r;
}

/* How a torn tail of `bytes` is reported and noted in quarantine/. */
static void torn_what(char *buf, size_t len, size_t bytes)
{
	snprintf(buf, len, "a torn tail of %zu bytes (an append cut short)",
	         bytes);
}

/* The writer's log afresh, after the old one went to quarantine. */
static void reopen_log(fsafe_checkpoint *cp)
{
	cp->logfd = fsafe__close(cp->logfd);
	open_log(cp);
}

/*
 * The writer's open: a torn tail (an append a crash or a power cut left
 * short: nothing intact after it) goes to quarantine with the log, and
 * the intact records stay, so the log holds records only and the next
 * append does not bury the tear under a valid record (which would make
 * it damage).
 */
static void log_cut_tail(fsafe_checkpoint *cp)
{
	char what[96], why[128], as[NAME_MAX + 1];

	torn_what(what, sizeof(what), cp->trail.torn);
	snprintf(why, sizeof(why), "events.log: %s\n", what);
	if (rewrite_log(cp->dirfd, why, as) < 0)
		return;
	reopen_log(cp);
	log_event(cp, FSAFE_CHECKPOINT_EV_QUARANTINED, 0);
}

static int unlink_one(int fd, const char *name, unsigned char type,
                      void *arg)
{
	int r = fsafe__unlinkat(fd, name, 0);

	(void)type;
	if (r < 0 && r != -ENOENT)
		return r;
	++*(int *)arg;
	return 0;
}

/* Unlink every entry of fd's directory (a generation holds only files). */
static int empty_dir(int fd)
{
	int r, removed;

	/* Passes until one removes nothing: unlinking while reading a
	   directory may make getdents skip an entry. */
	do {
		removed = 0;
		r = fsafe__dir_each(fd, unlink_one, &removed);
	} while (r == 0 && removed);
	return r;
}

/* Remove generation seq: its files, then the directory. */
static int remove_gen(fsafe_checkpoint *cp, uint64_t seq)
{
	char name[GEN_NAME_LEN + 1];
	int fd, r;

	gen_name(seq, name);
	fd = fsafe__open_subdir(cp->dirfd, name);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	r = empty_dir(fd);
	fsafe__close(fd);
	if (r == 0)
		r = fsafe__unlinkat(cp->dirfd, name, AT_REMOVEDIR);
	return r == -ENOENT ? 0 : r;
}

/*
 * The removals a save made due (recorded already) run on a thread of their
 * own, beside whatever the caller does next: freeing a generation's
 * extents costs about as much as a sync. Anything that lists or reads
 * generations, and close, waits for it first.
 */
static void *reap_run(void *arg)
{
	fsafe_checkpoint *cp = arg;

	for (size_t i = 0; i < cp->reap.n; i++) {
		int r = remove_gen(cp, cp->reap.v[i]);
		if (r < 0 && !cp->reap.err)
			cp->reap.err = r;
	}
	return NULL;
}

/* Take v (n generations) and start removing them: false if no thread. */
static bool reap_start(fsafe_checkpoint *cp, uint64_t *v, size_t n)
{
	cp->reap = (struct reaper){ .v = v, .n = n };
	if (fsafe__thread_start(&cp->reap.t, NULL, reap_run, cp) != 0) {
		cp->reap.v = NULL;
		return false;
	}
	cp->reap.pid = getpid();
	return true;
}

/* Wait for the removals; a failed one is tried again by the next begin.
   A forked child's copy of the handle has no thread to wait for: what is
   left is the next begin's too. */
static void reap_wait(fsafe_checkpoint *cp)
{
	if (!cp->reap.pid)
		return;
	if (cp->reap.pid == getpid())
		pthread_join(cp->reap.t, NULL);
	else
		cp->reap.err = -ECHILD;
	if (cp->reap.err)
		cp->untidy = true;
	free(cp->reap.v);
	cp->reap = (struct reaper){ 0 };
}

/* A transaction's own generation, never complete: no event; if it
   stays, the next begin tries again. */
static void drop_gen(fsafe_checkpoint *cp, uint64_t seq)
{
	if (remove_gen(cp, seq) < 0)
		cp->untidy = true;
}

/*
 * Remove partial generations (newer than CURRENT) and those beyond keep.
 * `saved` (0: none) is the generation a save just made current: its
 * event and the removals it makes due go to the trail in one write and
 * one sync. A removal is recorded before its files go, and not made when
 * the record failed: a stop between the two leaves a generation the trail
 * calls removed (the next open removes it), never one it calls live and
 * that is missing (check's "lost").
 */
static int tidy(fsafe_checkpoint *cp, uint64_t saved)
{
	struct event *ev = NULL;
	uint64_t *v = NULL;
	size_t n = 0, k = 0, nev = 0, older = 0;
	int r, lr = 0, first = 0;

	reap_wait(cp);
	if (!cp->cur_err && (lr = list_gens(cp->dirfd, true, &v, &n)) < 0)
		n = 0;
	if (!(ev = malloc((n + 1) * sizeof(*ev)))) {
		/* No room to record removals: none is made, the save is
		   recorded alone. */
		n = 0, first = -ENOMEM;
		if (saved)
			log_event(cp, FSAFE_CHECKPOINT_EV_SAVED, saved);
	} else if (saved)
		ev[nev++] = (struct event){ FSAFE_CHECKPOINT_EV_SAVED, saved };
	for (size_t i = 0; i < n; i++)
		older += v[i] <= cp->current;
	for (size_t i = 0; i < n; i++) {
		/* Saved once (the trail says so): CURRENT was set back,
		   this is no unfinished save. */
		bool partial = v[i] > cp->current &&
		               !trail_live(&cp->trail, v[i]);
		bool old = !partial && older > cp->keep && i < older - cp->keep;
		/* With no trail to record it in (events.log could not be
		   opened), a generation the trail read at open calls live
		   stays: its removal would read as a loss. */
		if ((partial || old) &&
		    (cp->logfd >= 0 || !trail_live(&cp->trail, v[i]))) {
			ev[nev++] = (struct event){ FSAFE_CHECKPOINT_EV_REMOVED,
			                            v[i] };
			v[k++] = v[i];
		}
	}
	if (ev && (r = log_events(cp, ev, nev, true)) < 0)
		first = r, k = 0;
	free(ev);
	/* A save's removals run beside the caller's next steps. */
	if (saved && k && reap_start(cp, v, k))
		v = NULL, k = 0;
	for (size_t i = 0; i < k; i++)
		if ((r = remove_gen(cp, v[i])) < 0 && !first)
			first = r;
	/* A generation left behind (a failure to remove it, or to list
	   them) is tried again by the next begin. */
	cp->untidy = lr < 0 || first < 0;
	free(v);
	return lr < 0 ? lr : first;
}

/* Read and check generation `gfd`'s manifest; it must name seq. */
static int manifest_read(int gfd, uint64_t seq, struct fsafe__manifest *m)
{
	char *text;
	size_t len;
	int r = fsafe__read_file_at(gfd, FSAFE__CKPT_MANIFEST, MANIFEST_MAX,
	                            &text, &len);

	memset(m, 0, sizeof(*m));
	if (r < 0)
		return r == -EFBIG ? -EBADMSG : r;
	r = fsafe__manifest_parse(text, len, m);
	free(text);
	if (r == 0 && m->seq != seq)
		r = -EBADMSG; /* a generation moved by hand */
	if (r < 0)
		fsafe__manifest_free(m);
	return r;
}

/* ---- what a load or a verify found (files: checkpoint_load.c) ---------------- */

static void damage_set(struct fsafe_checkpoint_damage *dm, uint64_t seq,
                       int code, const char *file)
{
	if (!dm || dm->generation)
		return;
	dm->generation = seq;
	dm->code = code;
	snprintf(dm->file, sizeof(dm->file), "%s", file);
}

/* ---- snapshots ------------------------------------------------------------------ */

struct fsafe_checkpoint_snapshot {
	struct fsafe__manifest m;
	char **data;      /* per file; NULL with MANIFEST_ONLY */
};

void fsafe_checkpoint_snapshot_free(fsafe_checkpoint_snapshot *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->data && i < s->m.n; i++)
		fsafe__io_free(s->data[i]);
	free(s->data);
	fsafe__manifest_free(&s->m);
	free(s);
}

/*
 * Each buffer of *old to the file of s with the same name (both lists
 * are in name order), then *old freed: a reload fills memory whose pages
 * exist instead of faulting in fresh ones.
 */
static void take_buffers(fsafe_checkpoint_snapshot *s,
                         fsafe_checkpoint_snapshot **old)
{
	fsafe_checkpoint_snapshot *o = *old;
	size_t j = 0;

	for (size_t i = 0; o && o->data && i < o->m.n; i++) {
		int c = 1;
		while (j < s->m.n &&
		       (c = strcmp(s->m.e[j].name, o->m.e[i].name)) < 0)
			j++;
		if (c == 0) {
			s->data[j] = o->data[i];
			o->data[i] = NULL;
		}
	}
	fsafe_checkpoint_snapshot_free(o);
	*old = NULL;
}

static int open_gen(fsafe_checkpoint *cp, uint64_t seq)
{
	char name[GEN_NAME_LEN + 1];

	gen_name(seq, name);
	return fsafe__open_subdir(cp->dirfd, name);
}

/* Load generation seq into a new snapshot (the buffers of *reuse, if
   any, taken), or say what is damaged. */
static int load_gen(fsafe_checkpoint *cp, uint64_t seq, unsigned flags,
                    struct fsafe_checkpoint_damage *dm,
                    fsafe_checkpoint_snapshot **reuse,
                    fsafe_checkpoint_snapshot **out)
{
	fsafe_checkpoint_snapshot *s = calloc(1, sizeof(*s));
	int r, gfd = open_gen(cp, seq);

	if (gfd < 0)
		damage_set(dm, seq, gfd, "");
	if (!s || gfd < 0) {
		free(s);
		fsafe__close(gfd);
		return gfd < 0 ? gfd : -ENOMEM;
	}
	if ((r = manifest_read(gfd, seq, &s->m)) < 0)
		damage_set(dm, seq, r, "");
	if (r == 0 && !(flags & FSAFE_CHECKPOINT_MANIFEST_ONLY)) {
		size_t bad;
		s->data = calloc(s->m.n ? s->m.n : 1, sizeof(*s->data));
		if (!s->data)
			r = -ENOMEM;
		else
			take_buffers(s, reuse);
		if (r == 0 &&
		    (r = fsafe__ckpt_load_files(gfd, &s->m, s->data, &bad,
		                                FSAFE__LOAD_AUTO)) < 0 &&
		    bad < s->m.n)
			damage_set(dm, seq, r, s->m.e[bad].name);
	}
	fsafe__close(gfd);
	if (r < 0)
		fsafe_checkpoint_snapshot_free(s);
	else
		*out = s;
	return r;
}

/* The newest generation older than seq that loads intact. */
static int load_fallback(fsafe_checkpoint *cp, uint64_t seq, unsigned flags,
                         fsafe_checkpoint_snapshot **reuse,
                         fsafe_checkpoint_snapshot **out)
{
	uint64_t *v = NULL;
	size_t n;
	int r = list_gens(cp->dirfd, true, &v, &n);

	if (r < 0)
		return r;
	r = -ENOENT;
	for (size_t i = n; i-- > 0 && r < 0;)
		if (v[i] < seq)
			r = load_gen(cp, v[i], flags, NULL, reuse, out);
	free(v);
	return r;
}

static int load(fsafe_checkpoint *cp,
                const struct fsafe_checkpoint_load_opts *opts,
                fsafe_checkpoint_snapshot **reuse,
                fsafe_checkpoint_snapshot **out)
{
	struct fsafe_checkpoint_load_opts o;
	uint64_t seq;
	int r, warn = 0;

	r = FSAFE__OPTS_COPY(&o, opts, FSAFE_CHECKPOINT_LOAD_OPTS_SIZE_V0);
	if (r < 0)
		return cp_fail(cp, r, "options (size)");
	if (o.flags & ~(unsigned)(FSAFE_CHECKPOINT_FALLBACK |
	                          FSAFE_CHECKPOINT_MANIFEST_ONLY))
		return cp_fail(cp, -EINVAL, "options (flags)");
	if (o.damage)
		memset(o.damage, 0, sizeof(*o.damage));
	/* Read CURRENT afresh: a read-only handle has no lock to keep it. */
	int cur_err = current_state(cp->dirfd, &seq);
	if (cur_err < 0 && !current_damaged(cur_err))
		return cp_fail(cp, cur_err, "read CURRENT");
	if (o.generation) {
		if (!cur_err && o.generation > seq)
			return cp_fail(cp, -ENOENT, "load (no such generation)");
		seq = o.generation;
	} else if (cur_err) {
		/* Without CURRENT only a fallback is possible: the newest
		   generation that is intact. */
		damage_set(o.damage, 0, cur_err, FSAFE__CKPT_CURRENT);
		seq = GEN_MAX + 1;
	}
	if (!seq)
		return cp_fail(cp, -ENOENT, "load (no checkpoint)");
	r = seq > GEN_MAX ? cur_err
	                  : load_gen(cp, seq, o.flags, o.damage, reuse, out);
	if (r < 0 && r != -ENOMEM && (o.flags & FSAFE_CHECKPOINT_FALLBACK)) {
		if (seq <= GEN_MAX)
			damage_set(o.damage, seq, r, "");
		if (load_fallback(cp, seq, o.flags, reuse, out) == 0)
			r = 0, warn |= FSAFE_CHECKPOINT_FELL_BACK;
	}
	if (r < 0)
		return cp_fail(cp, r, seq > GEN_MAX ? "read CURRENT"
		                                    : "load generation");
	if (cp->have_revision && strcmp((*out)->m.revision, cp->revision))
		warn |= FSAFE_CHECKPOINT_OTHER_REVISION;
	if (!(o.flags & FSAFE_CHECKPOINT_MANIFEST_ONLY))
		log_load(cp, (*out)->m.seq);
	return warn;
}

int fsafe_checkpoint_reload(fsafe_checkpoint *cp,
                            const struct fsafe_checkpoint_load_opts *opts,
                            fsafe_checkpoint_snapshot **snap)
{
	assert(cp && snap);
	fsafe_checkpoint_snapshot *reuse = *snap;

	*snap = NULL;
	reap_wait(cp);
	int r = load(cp, opts, &reuse, snap);
	fsafe_checkpoint_snapshot_free(reuse); /* what no load took */
	return r;
}

int fsafe_checkpoint_load(fsafe_checkpoint *cp,
                          const struct fsafe_checkpoint_load_opts *opts,
                          fsafe_checkpoint_snapshot **out)
{
	assert(out);
	*out = NULL;
	return fsafe_checkpoint_reload(cp, opts, out);
}

uint64_t fsafe_checkpoint_snapshot_generation(const fsafe_checkpoint_snapshot *s)
{
	assert(s);
	return s->m.seq;
}

const char *fsafe_checkpoint_snapshot_revision(const fsafe_checkpoint_snapshot *s)
{
	assert(s);
	return s->m.revision;
}

int64_t fsafe_checkpoint_snapshot_time_ms(const fsafe_checkpoint_snapshot *s)
{
	assert(s);
	return s->m.time_ms;
}

size_t fsafe_checkpoint_snapshot_count(const fsafe_checkpoint_snapshot *s)
{
	assert(s);
	return s->m.n;
}

const char *fsafe_checkpoint_snapshot_name(const fsafe_checkpoint_snapshot *s,
                                           size_t i)
{
	assert(s);
	return i < s->m.n ? s->m.e[i].name : NULL;
}

uint64_t fsafe_checkpoint_snapshot_size(const fsafe_checkpoint_snapshot *s,
                                        size_t i)
{
	assert(s);
	return i < s->m.n ? s->m.e[i].size : 0;
}

const void *fsafe_checkpoint_snapshot_data(const fsafe_checkpoint_snapshot *s,
                                           size_t i)
{
	assert(s);
	return i < s->m.n && s->data ? s->data[i] : NULL;
}

const char *fsafe_checkpoint_snapshot_hash(const fsafe_checkpoint_snapshot *s,
                                           size_t i)
{
	assert(s);
	return i < s->m.n ? s->m.e[i].hash : NULL;
}

long fsafe_checkpoint_snapshot_find(const fsafe_checkpoint_snapshot *s,
                                    const char *name)
{
	assert(s && name);
	struct fsafe__ckpt_entry key = { .name = (char *)name };
	const struct fsafe__ckpt_entry *e =
		s->m.n ? bsearch(&key, s->m.e, s->m.n, sizeof(key), fsafe__manifest_cmp_entry)
		       : NULL;

	return e ? (long)(e - s->m.e) : -ENOENT;
}

int fsafe_checkpoint_generations(fsafe_checkpoint *cp, uint64_t *seqs,
                                 size_t max)
{
	uint64_t *v = NULL, cur;
	size_t n, k = 0;

	assert(cp && (seqs || !max));
	reap_wait(cp); /* a save's removal: never list more than keep */
	int r = current_state(cp->dirfd, &cur);
	if (current_damaged(r))
		cur = UINT64_MAX, r = 0; /* every one is a candidate */
	if (r < 0)
		return cp_fail(cp, r, "read CURRENT");
	if ((r = list_gens(cp->dirfd, true, &v, &n)) < 0)
		return cp_fail(cp, r, "list generations");
	for (size_t i = 0; i < n; i++) {
		if (v[i] > cur)
			continue;
		if (k < max)
			seqs[k] = v[i];
		k++;
	}
	free(v);
	return k > INT32_MAX ? cp_fail(cp, -EOVERFLOW, "generations (too many)")
	                     : (int)k;
}

int fsafe_checkpoint_verify(fsafe_checkpoint *cp, uint64_t generation,
                            struct fsafe_checkpoint_damage *damage)
{
	struct fsafe__manifest m;
	uint64_t seq = generation;
	int r = 0, gfd;

	assert(cp);
	reap_wait(cp);
	if (damage)
		memset(damage, 0, sizeof(*damage));
	if (!seq && (r = current_state(cp->dirfd, &seq)) < 0) {
		if (current_damaged(r))
			damage_set(damage, 0, r, FSAFE__CKPT_CURRENT);
		return cp_fail(cp, r, "read CURRENT");
	}
	if (!seq)
		return cp_fail(cp, -ENOENT, "verify (no checkpoint)");
	if ((gfd = open_gen(cp, seq)) < 0) {
		damage_set(damage, seq, gfd, "");
		return cp_fail(cp, gfd, "open generation");
	}
	const char *step = "read manifest";
	if ((r = manifest_read(gfd, seq, &m)) < 0)
		damage_set(damage, seq, r, "");
	for (size_t i = 0; r == 0 && i < m.n; i++)
		if ((r = fsafe__ckpt_check_file(gfd, &m.e[i], NULL)) < 0)
			damage_set(damage, seq, r, m.e[i].name),
				step = "check file";
	fsafe__manifest_free(&m);
	fsafe__close(gfd);
	return cp_fail(cp, r, step);
}

/* ---- open and close ----------------------------------------------------------- */

/* mkdir -p `path` (relative to dirfd), each new entry durable. */
static int make_dir(int dirfd, const char *path)
{
	const char *step;

	return fsafe__mkdir_p(dirfd, path, 0777, true, NULL, &step);
}

static int load_opts(fsafe_checkpoint *cp,
                     const struct fsafe_checkpoint_opts *opts,
                     const char **step)
{
	struct fsafe_checkpoint_opts o;
	unsigned known = FSAFE_CHECKPOINT_NO_WAIT | FSAFE_CHECKPOINT_CREATE |
	                 FSAFE_CHECKPOINT_READ_ONLY | FSAFE_CHECKPOINT_NO_LINK;
	int r = FSAFE__OPTS_COPY(&o, opts, FSAFE_CHECKPOINT_OPTS_SIZE_V0);

	/* A struct too large still has our layout's error member; one too
	   small may lack it. */
	cp->error = r == -E2BIG ? opts->error : o.error;
	*step = "options (size)";
	if (r < 0)
		return r;
	*step = "options (flags)";
	if (o.flags & ~known)
		return -EINVAL;
	/* The revision is one line of the manifest: checked here, so a bad
	   one is named as such and not found by the first commit. */
	*step = "revision (too long)";
	if (o.revision && strnlen(o.revision, FSAFE_CHECKPOINT_REVISION_MAX + 1) >
	                          FSAFE_CHECKPOINT_REVISION_MAX)
		return -EINVAL;
	*step = "revision (control character)";
	if (o.revision && fsafe__ckpt_has_control(o.revision))
		return -EINVAL;
	*step = "allocate";
	cp->flags = o.flags;
	cp->keep = o.keep ? o.keep : FSAFE_CHECKPOINT_KEEP;
	cp->mode = o.mode;
	cp->have_revision = o.revision != NULL;
	cp->revision = strdup(o.revision ? o.revision : "");
	return cp->revision ? 0 : -ENOMEM;
}

/*
 * The marker: created at open, removed by a clean close. Finding it means
 * the last writer died holding the checkpoint. It is made durable (with
 * the directory sync) before anything else changes, so a power cut after
 * any change still finds it.
 */
static int mark_open(fsafe_checkpoint *cp)
{
	int fd = fsafe__openat(cp->dirfd, FSAFE__CKPT_MARKER,
	                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);

	if (fd == -EEXIST)
		cp->unclean = true;
	else if (fd < 0)
		return fd;
	fsafe__close(fd);
	return fsafe__fsync(cp->dirfd);
}

/* CURRENT into the handle; damage to it is remembered, not fatal. */
static int read_cur(fsafe_checkpoint *cp)
{
	int r = current_state(cp->dirfd, &cp->current);

	if (current_damaged(r))
		cp->cur_err = r, cp->current = 0, r = 0;
	return r;
}

static int open_writer(fsafe_checkpoint *cp, const char **step)
{
	struct fsafe_lock_opts lo = FSAFE_LOCK_OPTS_INIT;
	int r;

	if (cp->flags & FSAFE_CHECKPOINT_NO_WAIT)
		lo.flags |= FSAFE_LOCK_NO_WAIT;
	*step = "lock";
	if ((r = fsafe_lock_acquire(cp->dirfd, FSAFE__CKPT_LOCK, &lo,
	                            &cp->lock)) < 0)
		return r;
	*step = "read CURRENT";
	if ((r = read_cur(cp)) < 0)
		return r;
	*step = "mark open";
	if ((r = mark_open(cp)) < 0)
		return r;
	*step = "sweep";
	/* An audit trail that cannot be opened (a FIFO, a directory in its
	   place: damage that check reports) never stops the store. */
	if (open_log(cp) < 0)
		cp->logfd = fsafe__close(cp->logfd);
	trail_read(cp->dirfd, &cp->trail);
	if (cp->trail.torn && cp->logfd >= 0)
		log_cut_tail(cp);
	cp->seen = seen_max(cp->dirfd, &cp->trail);
	/* The recovery: nothing a dead writer left may survive. Under the
	   lock no live writer of ours can own a staging file here. A
	   generation that cannot be removed (damaged) stays for repair. */
	tidy(cp, 0);
	r = fsafe_sweep(cp->dirfd, ".", 0, 0, NULL, NULL);
	if (r < 0)
		return r;
	if (cp->unclean)
		log_event(cp, FSAFE_CHECKPOINT_EV_RECOVERED, cp->current);
	return 0;
}

static void cp_free(fsafe_checkpoint *cp)
{
	fsafe__sync_pool_free(cp->pool);
	fsafe__close(cp->logfd);
	fsafe__close(cp->dirfd);
	trail_free(&cp->trail);
	free(cp->revision);
	free(cp);
}

int fsafe_checkpoint_open(int dirfd, const char *path,
                          const struct fsafe_checkpoint_opts *opts,
                          fsafe_checkpoint **out)
{
	fsafe_checkpoint *cp = calloc(1, sizeof(*cp));
	const char *step = "path";
	int r;

	assert(out);
	*out = NULL;
	if (!cp) {
		if (opts && (!opts->size ||
		             opts->size >= FSAFE_CHECKPOINT_OPTS_SIZE_V0))
			fsafe__error_set(opts->error, -ENOMEM, ENOMEM,
			                 "allocate", false);
		return -ENOMEM;
	}
	cp->dirfd = cp->logfd = -1;
	if ((r = load_opts(cp, opts, &step)) == 0 && (!path || !*path))
		r = -EINVAL, step = "path";
	else if (r == 0 && (cp->flags & FSAFE_CHECKPOINT_CREATE) &&
	         !(cp->flags & FSAFE_CHECKPOINT_READ_ONLY))
		r = make_dir(dirfd, path), step = "create";
	if (r == 0 && (cp->dirfd = fsafe__open_dir(dirfd, path)) < 0)
		r = cp->dirfd, step = "open";
	if (r == 0 && (cp->flags & FSAFE_CHECKPOINT_READ_ONLY))
		r = read_cur(cp), step = "read CURRENT";
	else if (r == 0)
		r = open_writer(cp, &step);
	if (r < 0) {
		cp_fail(cp, r, step);
		if (cp->lock && !cp->unclean)
			fsafe__unlinkat(cp->dirfd, FSAFE__CKPT_MARKER, 0);
		fsafe_lock_release(cp->lock);
		cp_free(cp);
		return r;
	}
	*out = cp;
	return 0;
}

bool fsafe_checkpoint_was_unclean(const fsafe_checkpoint *cp)
{
	assert(cp);
	return cp->unclean;
}

uint64_t fsafe_checkpoint_current(const fsafe_checkpoint *cp)
{
	assert(cp);
	return cp->current;
}

int fsafe_checkpoint_close(fsafe_checkpoint *cp)
{
	int r = 0;

	if (!cp)
		return 0;
	reap_wait(cp);
	if (cp->lock) {
		const char *step = "remove OPEN";
		r = fsafe__unlinkat(cp->dirfd, FSAFE__CKPT_MARKER, 0);
		if (r == 0)
			r = fsafe__fsync(cp->dirfd), step = "fsync directory";
		int l = fsafe_lock_release(cp->lock);
		if (r == 0 && l < 0)
			r = l, step = "unlock";
		cp_fail(cp, r, step);
	}
	cp_free(cp);
	return r;
}

/* ---- transactions ----------------------------------------------------------------- */

struct txfile {
	char *name;
	uint64_t size;
	char hash[65];
	uint32_t crc;
	const void *buf; /* an added buffer still to hash (commit does) */
};

struct fsafe_checkpoint_tx {
	fsafe_checkpoint *cp;
	uint64_t seq;
	int gfd;               /* the new generation */
	int prevfd;            /* the current one, for links; or -1 */
	struct fsafe__manifest prev;  /* its manifest (n == 0 if none) */
	fsafe_batch *batch;
	struct txfile *f;
	size_t n, cap;
	struct fsafe_checkpoint_stream *streams; /* open ones */
	int err;               /* first failure of an add or a stream */
	const char *err_step;  /* its step */
	struct fsafe_error werr;
};

struct fsafe_checkpoint_stream {
	fsafe_checkpoint_tx *tx;
	struct fsafe_checkpoint_stream *next, **prevp;
	size_t idx;
	fsafe_writer *w;
	struct fsafe__sha256 c;
	uint32_t crc;
	uint64_t size;
	int err;
};

static void stream_unlink(fsafe_checkpoint_stream *s)
{
	*s->prevp = s->next;
	if (s->next)
		s->next->prevp = s->prevp;
}

static void tx_free(fsafe_checkpoint_tx *tx)
{
	while (tx->streams) {
		fsafe_checkpoint_stream *s = tx->streams;
		stream_unlink(s);
		fsafe_writer_abort(s->w);
		fsafe__sha256_free(&s->c);
		free(s);
	}
	for (size_t i = 0; i < tx->n; i++)
		free(tx->f[i].name);
	free(tx->f);
	fsafe_batch_free(tx->batch);
	fsafe__manifest_free(&tx->prev);
	fsafe__close(tx->gfd);
	fsafe__close(tx->prevfd);
	tx->cp->in_tx = false;
	free(tx);
}

/* The previous generation, whose unchanged files a commit links. */
static void tx_open_prev(fsafe_checkpoint_tx *tx)
{
	fsafe_checkpoint *cp = tx->cp;

	tx->prevfd = -1;
	if (!cp->current || (cp->flags & FSAFE_CHECKPOINT_NO_LINK))
		return;
	tx->prevfd = open_gen(cp, cp->current);
	if (tx->prevfd >= 0 &&
	    manifest_read(tx->prevfd, cp->current, &tx->prev) < 0)
		tx->prevfd = fsafe__close(tx->prevfd);
}

int fsafe_checkpoint_begin(fsafe_checkpoint *cp, fsafe_checkpoint_tx **out)
{
	char name[GEN_NAME_LEN + 1];
	fsafe_checkpoint_tx *tx;
	int r;

	assert(cp && out);
	*out = NULL;
	if (!cp->lock)
		return cp_fail(cp, -EROFS, "begin (read-only)");
	if (cp->in_tx)
		return cp_fail(cp, -EBUSY, "begin (a transaction is open)");
	uint64_t seq = (cp->seen > cp->current ? cp->seen : cp->current) + 1;
	if (seq > GEN_MAX)
		return cp_fail(cp, -EOVERFLOW, "begin (generation numbers used up)");
	/* A failed commit whose cleanup failed too left a partial one. */
	if (cp->untidy)
		tidy(cp, 0);
	if (!(tx = calloc(1, sizeof(*tx))))
		return cp_fail(cp, -ENOMEM, "allocate");
	tx->cp = cp;
	tx->seq = seq;
	tx->gfd = -1;
	cp->in_tx = true;
	tx_open_prev(tx);
	gen_name(tx->seq, name);
	/* Threads, not a ring, sync a save's files: a ring set up for a
	   few syncs cost more than it saved here (see tx_write_gen). The
	   handle keeps them from its first save on. */
	struct fsafe_batch_opts bo = FSAFE_BATCH_OPTS_INIT;
	bo.flags = FSAFE_BATCH_NO_URING;
	if (!cp->pool) /* NULL still: the syncs start threads of their own */
		cp->pool = fsafe__sync_pool_new(false);
	if ((r = fsafe_batch_new(&bo, &tx->batch)) == 0)
		fsafe__batch_use_pool(tx->batch, cp->pool);
	if (r < 0 ||
	    (r = fsafe__mkdirat(cp->dirfd, name, 0777)) < 0 ||
	    (tx->gfd = open_gen(cp, tx->seq)) < 0) {
		if (r == 0)
			r = tx->gfd;
		if (r != -EEXIST)
			drop_gen(cp, tx->seq);
		tx_free(tx);
		return cp_fail(cp, r, "make generation");
	}
	*out = tx;
	return 0;
}

static int tx_new_file(fsafe_checkpoint_tx *tx, const char *name)
{
	int r = fsafe__ckpt_check_name(name);

	if (r < 0)
		return r;
	for (size_t i = 0; i < tx->n; i++)
		if (strcmp(tx->f[i].name, name) == 0)
			return -EEXIST;
	if (tx->n == tx->cap) {
		size_t cap = tx->cap ? 2 * tx->cap : 16;
		struct txfile *nf = realloc(tx->f, cap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		tx->f = nf, tx->cap = cap;
	}
	memset(&tx->f[tx->n], 0, sizeof(tx->f[0]));
	if (!(tx->f[tx->n].name = strdup(name)))
		return -ENOMEM;
	return (int)tx->n++;
}

/*
 * Link file i from the previous generation if it has the same content
 * there: the same hash (a stream's, known), or the same bytes as `same`
 * (an added buffer, not hashed yet: compared as the old copy is read, so
 * a changed file usually costs one read of its first 16 KiB). The old
 * copy is re-read and re-hashed first either way: a damaged file must
 * not be carried into the new generation under a hash it no longer has.
 * Linking is safe because no generation's file is ever written again:
 * every write makes a new inode.
 */
static bool tx_try_link(fsafe_checkpoint_tx *tx, size_t i, const void *same)
{
	struct txfile *f = &tx->f[i];
	struct fsafe__ckpt_entry key = { .name = f->name };
	const struct fsafe__ckpt_entry *e;

	if (tx->prevfd < 0 || !tx->prev.n)
		return false;
	e = bsearch(&key, tx->prev.e, tx->prev.n, sizeof(key), fsafe__manifest_cmp_entry);
	if (!e || e->size != f->size || (!same && strcmp(e->hash, f->hash)) ||
	    fsafe__ckpt_check_file(tx->prevfd, e, same) < 0 ||
	    fsafe__linkat(tx->prevfd, f->name, tx->gfd, f->name, 0) < 0)
		return false;
	memcpy(f->hash, e->hash, sizeof(f->hash));
	if (same) /* a stream's CRC is known; an old copy may have none */
		f->crc = e->has_crc ? e->crc
		                    : fsafe__crc32c(0, same, (size_t)f->size);
	return true;
}

/* A name refused (bad, or added already): the transaction goes on. */
static int new_file_fail(fsafe_checkpoint_tx *tx, int r)
{
	return cp_fail(tx->cp, r, r == -EEXIST ? "add (name added already)"
	                                       : "add (bad name)");
}

static struct fsafe_write_opts tx_wopts(fsafe_checkpoint_tx *tx)
{
	struct fsafe_write_opts o = FSAFE_WRITE_OPTS_INIT;

	o.mode = tx->cp->mode;
	o.error = &tx->werr;
	return o;
}

/* A failure that dooms the transaction: commit will return it. */
static int tx_fail(fsafe_checkpoint_tx *tx, int r, const char *step)
{
	if (r < 0 && !tx->err)
		tx->err = r, tx->err_step = step;
	return cp_fail(tx->cp, r, step);
}

int fsafe_checkpoint_add(fsafe_checkpoint_tx *tx, const char *name,
                         const void *buf, size_t len)
{
	assert(tx);
	int i = tx_new_file(tx, name);
	if (i < 0)
		return i == -EINVAL || i == -EEXIST ? new_file_fail(tx, i)
		                                    : tx_fail(tx, i, "allocate");
	if (!buf && len)
		return tx_fail(tx, -EINVAL, "add (no buffer)");
	tx->f[i].size = len;
	if (tx_try_link(tx, (size_t)i, len ? buf : ""))
		return 0;
	/* Hashed at commit, while the files are written and synced. */
	tx->f[i].buf = len ? buf : "";
	struct fsafe_write_opts o = tx_wopts(tx);
	int r = fsafe_batch_add(tx->batch, tx->gfd, name, buf, len, &o);
	return r < 0 ? tx_fail(tx, r, "add") : 0;
}

int fsafe_checkpoint_add_stream(fsafe_checkpoint_tx *tx, const char *name,
                                fsafe_checkpoint_stream **out)
{
	fsafe_checkpoint_stream *s;

	assert(tx && out);
	*out = NULL;
	int i = tx_new_file(tx, name);
	if (i < 0)
		return i == -EINVAL || i == -EEXIST ? new_file_fail(tx, i)
		                                    : tx_fail(tx, i, "allocate");
	if (!(s = calloc(1, sizeof(*s))))
		return tx_fail(tx, -ENOMEM, "allocate");
	struct fsafe_write_opts o = tx_wopts(tx);
	int r = fsafe_writer_open(tx->gfd, name, &o, &s->w);
	if (r < 0) {
		free(s);
		return tx_fail(tx, r, tx->werr.step ? tx->werr.step : "open");
	}
	s->tx = tx;
	s->idx = (size_t)i;
	fsafe__sha256_init(&s->c);
	s->next = tx->streams;
	s->prevp = &tx->streams;
	if (s->next)
		s->next->prevp = &s->next;
	tx->streams = s;
	*out = s;
	return 0;
}

int fsafe_checkpoint_stream_write(fsafe_checkpoint_stream *s, const void *buf,
                                  size_t len)
{
	assert(s);
	if (s->err)
		return cp_fail(s->tx->cp, s->err, "write (an earlier one failed)");
	int r = fsafe_writer_write(s->w, buf, len);
	if (r < 0)
		return cp_fail(s->tx->cp, s->err = r, "write");
	fsafe__sha256_update(&s->c, buf, len);
	s->crc = fsafe__crc32c(s->crc, buf, len);
	s->size += len;
	return 0;
}

int fsafe_checkpoint_stream_close(fsafe_checkpoint_stream *s)
{
	assert(s);
	fsafe_checkpoint_tx *tx = s->tx;
	struct txfile *f = &tx->f[s->idx];
	uint8_t d[32];
	int r = s->err;
	const char *step = "write";

	fsafe__sha256_final(&s->c, d);
	fsafe__sha256_hex(d, f->hash);
	f->crc = s->crc;
	f->size = s->size;
	stream_unlink(s);
	if (r == 0 && tx_try_link(tx, s->idx, NULL)) {
		/* Same bytes as before: drop the stage, skip its sync. */
		fsafe_writer_abort(s->w);
	} else if (r == 0) {
		r = fsafe_batch_add_writer(tx->batch, s->w);
		r = r < 0 ? r : 0;
		step = "add";
	} else {
		fsafe_writer_abort(s->w);
	}
	free(s);
	return tx_fail(tx, r, step);
}

static int cmp_txfile(const void *a, const void *b)
{
	return strcmp(((const struct txfile *)a)->name,
	              ((const struct txfile *)b)->name);
}

static int tx_manifest(fsafe_checkpoint_tx *tx, char **text, size_t *len)
{
	struct fsafe__manifest m = { .seq = tx->seq, .time_ms = fsafe__now_ms(),
	                             .revision = tx->cp->revision, .n = tx->n };
	int r;

	if (tx->n)
		qsort(tx->f, tx->n, sizeof(*tx->f), cmp_txfile);
	if (!(m.e = calloc(tx->n ? tx->n : 1, sizeof(*m.e))))
		return -ENOMEM;
	for (size_t i = 0; i < tx->n; i++) {
		m.e[i].name = tx->f[i].name;
		m.e[i].size = tx->f[i].size;
		memcpy(m.e[i].hash, tx->f[i].hash, sizeof(m.e[i].hash));
		m.e[i].crc = tx->f[i].crc;
		m.e[i].has_crc = true;
	}
	r = fsafe__manifest_format(&m, text, len);
	free(m.e);
	return r;
}

/* The batch's first failure, as an errno: a directory sync that failed
   after publishing is still a failure of the whole generation. */
static int batch_error(fsafe_checkpoint_tx *tx)
{
	for (size_t i = 0; i < fsafe_batch_count(tx->batch); i++) {
		int r = fsafe_batch_result(tx->batch, i);
		if (r == FSAFE_ENOTDURABLE)
			return tx->werr.sys_errno > 0 ? -tx->werr.sys_errno
			                              : -EIO;
		if (r < 0)
			return r;
	}
	return -EIO;
}

/* The added buffers' SHA-256 (a thread's body, or called inline). */
static void *sha_added(void *arg)
{
	fsafe_checkpoint_tx *tx = arg;

	for (size_t i = 0; i < tx->n; i++)
		if (tx->f[i].buf)
			fsafe__sha256_hex_of(tx->f[i].buf, (size_t)tx->f[i].size,
			                     tx->f[i].hash);
	return NULL;
}

/* Their CRC-32C, likewise. */
static void *crc_added(void *arg)
{
	fsafe_checkpoint_tx *tx = arg;

	for (size_t i = 0; i < tx->n; i++)
		if (tx->f[i].buf)
			tx->f[i].crc = fsafe__crc32c(0, tx->f[i].buf,
			                             (size_t)tx->f[i].size);
	return NULL;
}

/* Sum the added buffers while the batch writes them: with enough bytes,
   each sum on a thread of its own (SHA-256 takes several times as long
   as the CRC-32C: apart, the CRC-32C never lengthens the save); else, or
   where a thread cannot start, inline. t[k] is started when started[k]. */
static void sums_start(fsafe_checkpoint_tx *tx, pthread_t t[2],
                       bool started[2])
{
	void *(*const fn[2])(void *) = { sha_added, crc_added };
	size_t bytes = 0;

	for (size_t i = 0; i < tx->n; i++)
		if (tx->f[i].buf)
			bytes += (size_t)tx->f[i].size;
	for (int k = 0; k < 2; k++) {
		started[k] = bytes >= HASH_THREAD_MIN &&
		             fsafe__thread_start(&t[k], NULL, fn[k], tx) == 0;
		if (!started[k])
			fn[k](tx);
	}
}

static void sums_wait(fsafe_checkpoint_tx *tx, pthread_t t[2],
                      const bool started[2])
{
	for (int k = 0; k < 2; k++)
		if (started[k])
			pthread_join(t[k], NULL);
	for (size_t i = 0; i < tx->n; i++)
		tx->f[i].buf = NULL;
}

/*
 * Files, manifest, the generation directory, and its entry: durable. The
 * batch syncs the files' data; the manifest's bytes (the hashes, computed
 * meanwhile) are written after, in place, and synced at once with the
 * generation directory (the files' names and the manifest's), the
 * generation's entry in the store, and CURRENT's stage. No rename is
 * needed for the manifest: nothing reads a generation before CURRENT
 * names it, and one whose manifest is short is not intact (recovery
 * removes it).
 */
static int tx_write_gen(fsafe_checkpoint_tx *tx, fsafe_writer *cw)
{
	char *text = NULL;
	size_t len = 0;
	pthread_t t[2];
	bool started[2];
	int r, mfd = fsafe__openat(tx->gfd, FSAFE__CKPT_MANIFEST,
	                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
	                           tx->cp->mode ? tx->cp->mode : 0666);

	if (mfd < 0) {
		tx->werr.step = "create manifest";
		return mfd;
	}
	sums_start(tx, t, started);
	r = fsafe__batch_commit_names_unsynced(tx->batch) ? batch_error(tx) : 0;
	sums_wait(tx, t, started);
	if (r == 0 && (r = tx_manifest(tx, &text, &len)) < 0)
		tx->werr.step = "manifest";
	if (r == 0 && (r = fsafe__pwrite_all(mfd, text, len, 0)) < 0)
		tx->werr.step = "write manifest";
	if (r == 0) {
		/* On threads, not an io_uring ring: set up per call, a ring's
		   fdatasyncs of a few files ran about one after the other on
		   this ext4 (n = 10: 0.9-1.4 ms on threads, 1.4-2.2 ms on a
		   ring), and a save of three files took 2.77 ms against 3.20
		   with both of its syncs on rings. */
		int fds[4] = { mfd, tx->gfd, tx->cp->dirfd,
		               cw ? fsafe__writer_data_fd(cw) : -1 };
		static const bool full[4] = { false, true, true, false };
		int errs[4];
		fsafe__sync_pool_run(tx->cp->pool, fds, full, 4, errs);
		if ((r = errs[0]) < 0)
			tx->werr.step = "fsync manifest";
		else if ((r = errs[1] < 0 ? errs[1] : errs[2]) < 0)
			tx->werr.step = "fsync directory";
		else if (errs[3] < 0)
			fsafe__writer_fail(cw, errs[3], "fsync");
	}
	free(text);
	fsafe__close(mfd);
	return r;
}

int fsafe_checkpoint_commit(fsafe_checkpoint_tx *tx, uint64_t *generation)
{
	assert(tx);
	fsafe_checkpoint *cp = tx->cp;
	uint64_t seq = tx->seq;
	int r = tx->streams ? -EBUSY : tx->err;
	const char *step = tx->streams ? "commit (a stream is open)"
	                               : tx->err_step;
	bool was_lost = cp->cur_err != 0;

	struct fsafe_error we = { 0 };
	/* A damaged CURRENT is kept (quarantined), not overwritten; and one
	   that is a link must not be written through: not staged ahead. */
	bool sound = !cp->cur_err || cp->cur_err == -ENOENT;
	fsafe_writer *cw = r == 0 && sound ? current_stage(cp, seq, &we) : NULL;

	if (r == 0) {
		r = tx_write_gen(tx, cw);
		step = tx->werr.step ? tx->werr.step : "write generation";
	}
	if (r == 0 && !sound)
		r = quarantine_current(cp), step = "quarantine CURRENT";
	if (r == 0 && cw)
		r = current_publish(cw), step = "write CURRENT";
	else if (r == 0)
		r = write_current(cp, seq, &we), step = "write CURRENT";
	else
		fsafe_writer_abort(cw);
	tx_free(tx);
	/* The writer's own detail where it has one: its step, and for
	   FSAFE_ENOTDURABLE the failed sync's errno. */
	if (r < 0 && we.step && cp->error)
		*cp->error = we;
	else if (r < 0)
		cp_fail(cp, r, step);
	if (r < 0 && r != FSAFE_ENOTDURABLE) {
		/* CURRENT still names the old set; this one goes (if that
		   fails too, the next open or begin removes it). */
		drop_gen(cp, seq);
		return r;
	}
	cp->current = cp->seen = seq;
	cp->cur_err = 0;
	if (generation)
		*generation = seq;
	/* Older generations go only once CURRENT is durable, and not in the
	   save that found CURRENT lost: that one removes nothing. */
	if (r == 0 && !was_lost)
		tidy(cp, seq);
	else
		log_event(cp, FSAFE_CHECKPOINT_EV_SAVED, seq);
	return r;
}

void fsafe_checkpoint_abort(fsafe_checkpoint_tx *tx)
{
	if (!tx)
		return;
	fsafe_checkpoint *cp = tx->cp;
	uint64_t seq = tx->seq;

	tx_free(tx);
	drop_gen(cp, seq);
}

/* ---- check and repair -------------------------------------------------------- */

struct walk {
	int dirfd;
	fsafe_checkpoint *cp; /* repair: the writer; check: NULL */
	fsafe_damage_fn fn;
	void *arg;
	int count, stop;
	bool unfixed;         /* something repair could not deal with */
	struct trail trail;   /* what the audit trail says */
};

static int report(struct walk *w, const char *path, const char *what,
                  const char *action, uint64_t lost)
{
	struct fsafe_damage d = { .path = path, .what = what,
	                          .action = action, .lost = lost };

	w->count++;
	if (w->fn && !w->stop)
		w->stop = w->fn(&d, w->arg);
	return w->stop;
}

static const char *kind_of(mode_t m)
{
	return S_ISLNK(m) ? "symlink" : S_ISFIFO(m) ? "FIFO" :
	       S_ISSOCK(m) ? "socket" : S_ISDIR(m) ? "directory" :
	       S_ISREG(m) ? "regular file" : "device";
}

/* What an open or a check of `name` (in dirfd) said, in words. */
static void describe(int r, int dirfd, const char *name, char *buf, size_t len)
{
	struct stat st;

	if ((r == -ELOOP || r == -EISDIR || r == -EBADFD || r == -ENOTDIR ||
	     r == -ENXIO) &&
	    fsafe__fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		snprintf(buf, len, "not a %s (%s)",
		         r == -ENOTDIR || S_ISREG(st.st_mode) ? "directory"
		                                              : "regular file",
		         kind_of(st.st_mode));
	else if (r == -ENOENT)
		snprintf(buf, len, "missing");
	else if (r == -EBADMSG)
		snprintf(buf, len, "damaged (does not match its checksum or "
		         "its generation)");
	else if (r == -EPROTONOSUPPORT)
		snprintf(buf, len, "an unknown format version");
	else
		snprintf(buf, len, "%s", fsafe_strerror(r));
}

/* 0 if generation seq is intact; 1 with `path` and `what` naming the
   first damage; a negative errno when it could not be looked at. */
static int gen_verify(int dirfd, uint64_t seq, char *path, char *what,
                      size_t len)
{
	char name[GEN_NAME_LEN + 1];
	struct fsafe__manifest m;
	int r, gfd;

	gen_name(seq, name);
	snprintf(path, len, "%s", name);
	if ((gfd = fsafe__open_subdir(dirfd, name)) < 0) {
		if (gfd == -ELOOP && dirfd >= 0) {
			struct stat st;
			if (fsafe__fstatat(dirfd, name, &st,
			                   AT_SYMLINK_NOFOLLOW) == 0 &&
			    !S_ISDIR(st.st_mode))
				gfd = -ENOTDIR;
		}
		describe(gfd, dirfd, name, what, len);
		return gfd == -ENOMEM ? gfd : 1;
	}
	if ((r = manifest_read(gfd, seq, &m)) < 0) {
		snprintf(path, len, "%s/%s", name, FSAFE__CKPT_MANIFEST);
		describe(r, gfd, FSAFE__CKPT_MANIFEST, what, len);
	}
	for (size_t i = 0; r == 0 && i < m.n; i++) {
		if ((r = fsafe__ckpt_check_file(gfd, &m.e[i], NULL)) < 0) {
			snprintf(path, len, "%s/%.255s", name, m.e[i].name);
			describe(r, gfd, m.e[i].name, what, len);
		}
	}
	fsafe__manifest_free(&m); /* also when a file failed its check */
	fsafe__close(gfd);
	return r == -ENOMEM ? r : r < 0;
}

/* What a quarantine's result `r` did, in words, into `action`. */
static void say_quarantined(int r, const char *as, char *action, size_t len)
{
	if (r == 0)
		snprintf(action, len, "quarantined as %s/%s",
		         FSAFE__CKPT_QUARANTINE, as);
	else
		snprintf(action, len, "not quarantined: %s", fsafe_strerror(r));
}

/* Repair: move `name` to quarantine and say so in `action`. */
static void fix_quarantine(struct walk *w, const char *name, const char *why,
                           uint64_t seq, char *action, size_t len)
{
	char as[NAME_MAX + 1];
	int r = quarantine(w->dirfd, name, why, as);

	say_quarantined(r, as, action, len);
	if (r == 0)
		log_event(w->cp, FSAFE_CHECKPOINT_EV_QUARANTINED, seq);
	else
		w->unfixed = true;
}

/*
 * Entries of an intact generation that its manifest does not name (a
 * file copied in, a leftover): not part of the set, so each goes to
 * quarantine alone as "gen-N.NAME"; the generation itself stays.
 */
struct strays {
	struct walk *w;
	const struct fsafe__manifest *m;
	const char *g; /* the generation's name */
	int gfd;
};

static int stray_one(int fd, const char *name, unsigned char type, void *arg)
{
	const struct strays *s = arg;
	struct walk *w = s->w;
	char path[600], qname[NAME_MAX + 1], why[700];
	char action[600], as[NAME_MAX + 1];
	struct fsafe__ckpt_entry key = { .name = (char *)name };

	(void)fd, (void)type;
	if (w->stop)
		return 1;
	if (!strcmp(name, FSAFE__CKPT_MANIFEST) ||
	    (s->m->n && bsearch(&key, s->m->e, s->m->n, sizeof(key),
	                        fsafe__manifest_cmp_entry)))
		return 0;
	snprintf(path, sizeof(path), "%s/%.255s", s->g, name);
	snprintf(qname, sizeof(qname), "%s.%.200s", s->g, name);
	snprintf(why, sizeof(why), "%s: not in the manifest\n", path);
	if (w->cp) {
		int r = quarantine_from(w->dirfd, s->gfd, name, qname, why, as);
		say_quarantined(r, as, action, sizeof(action));
		w->unfixed |= r < 0;
	}
	report(w, path, "not in the manifest (a stray entry)",
	       w->cp ? action : NULL, 0);
	return 0;
}

static void walk_strays(struct walk *w, uint64_t seq)
{
	char g[GEN_NAME_LEN + 1];
	struct fsafe__manifest m;
	struct strays s = { .w = w, .m = &m, .g = g };

	gen_name(seq, g);
	if ((s.gfd = fsafe__open_subdir(w->dirfd, g)) < 0)
		return;
	if (manifest_read(s.gfd, seq, &m) == 0) {
		fsafe__dir_each(s.gfd, stray_one, &s);
		fsafe__manifest_free(&m);
	}
	fsafe__close(s.gfd);
}

/*
 * Generations the trail says were saved and never removed, but that are
 * not there (present: v, n entries, sorted): lost, and only the trail
 * knows. Repair records the loss (a "removed" event), nothing else can
 * be done. (A removal is recorded before it starts: a crash in between
 * does not show here.)
 */
static void walk_missing(struct walk *w, const uint64_t *v, size_t n)
{
	char name[GEN_NAME_LEN + 1];

	for (size_t i = 0; i < w->trail.saved.n && !w->stop; i++) {
		uint64_t s = w->trail.saved.v[i];
		if ((i && s == w->trail.saved.v[i - 1]) ||
		    !trail_live(&w->trail, s) ||
		    (n && bsearch(&s, v, n, sizeof(s), cmp_u64)))
			continue;
		gen_name(s, name);
		if (w->cp)
			log_event(w->cp, FSAFE_CHECKPOINT_EV_REMOVED, s);
		report(w, name, "missing (saved, and never removed)",
		       w->cp ? "recorded as lost in events.log" : NULL, 1);
	}
}

/*
 * Whether a live writer holds the checkpoint: then a generation newer than
 * CURRENT is its save in progress, not damage. LOCK is looked at only if it
 * is a regular file (a FIFO there must not block the check).
 */
static bool writer_alive(int dirfd)
{
	struct fsafe_lock_owner o = { .size = sizeof(o) };
	struct stat st;

	if (fsafe__fstatat(dirfd, FSAFE__CKPT_LOCK, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode) ||
	    fsafe_lock_inspect(dirfd, FSAFE__CKPT_LOCK, &o) < 0)
		return false;
	return o.liveness != FSAFE_OWNER_DEAD;
}

/* Every generation; returns the newest intact one load may use. */
static uint64_t walk_gens(struct walk *w, uint64_t cur, int cur_err)
{
	char path[512], what[512], action[600], name[GEN_NAME_LEN + 1];
	uint64_t *v = NULL, best = 0;
	size_t n = 0;

	if (list_gens(w->dirfd, false, &v, &n) < 0)
		return 0;
	for (size_t i = 0; i < n && !w->stop; i++) {
		bool partial = !cur_err && v[i] > cur &&
		               !trail_live(&w->trail, v[i]);
		/* Recorded as removed, yet here: a removal a stop cut short,
		   no damage (the next writer's open finishes it). */
		bool removing = !partial && set_has(&w->trail.gone, v[i]);
		int r = gen_verify(w->dirfd, v[i], path, what, sizeof(path));
		if (r == 0 && !partial) {
			best = v[i];
			walk_strays(w, v[i]);
			continue;
		}
		if (r < 0)
			break;
		/* check beside a live writer: its save or removal, not damage.
		   (repair holds the lock itself.) */
		if ((partial || removing) && !w->cp && writer_alive(w->dirfd))
			continue;
		gen_name(v[i], name);
		if (partial || removing) {
			snprintf(path, sizeof(path), "%s", name);
			snprintf(what, sizeof(what), "%s", partial
			         ? "newer than CURRENT (a save that did not finish)"
			         : "removed in events.log, yet here (a removal "
			           "that did not finish)");
		}
		char why[1100];
		snprintf(why, sizeof(why), "%s: %s\n", path, what);
		if (w->cp)
			fix_quarantine(w, name, why, v[i], action,
			               sizeof(action));
		report(w, path, what, w->cp ? action : NULL,
		       partial || removing ? 0 : 1);
	}
	walk_missing(w, v, n);
	free(v);
	return best;
}

/* CURRENT: missing, malformed, not a file, or naming what is not there. */
static void walk_current(struct walk *w, uint64_t cur, int cur_err,
                         uint64_t best)
{
	char what[512], action[600] = "", why[600], g[GEN_NAME_LEN + 1];

	if (!cur_err && (!cur || best == cur))
		return;
	if (cur_err) {
		describe(cur_err, w->dirfd, FSAFE__CKPT_CURRENT, what,
		         sizeof(what));
		if (cur_err == -EBADMSG)
			snprintf(what, sizeof(what), "malformed");
	} else if (best > cur) {
		char b[GEN_NAME_LEN + 1];
		gen_name(cur, g);
		gen_name(best, b);
		snprintf(what, sizeof(what), "names %s, but %s was saved after "
		         "it", g, b);
	} else {
		gen_name(cur, g);
		snprintf(what, sizeof(what), "names %s, which is missing or "
		         "damaged", g);
	}
	if (w->cp) {
		snprintf(why, sizeof(why), "CURRENT: %s\n", what);
		if (cur_err != -ENOENT && (cur_err || !best))
			fix_quarantine(w, FSAFE__CKPT_CURRENT, why, 0, action,
			               sizeof(action));
		if (best && !w->unfixed) {
			int r = write_current(w->cp, best, NULL);
			gen_name(best, g);
			if (r == 0) {
				w->cp->current = best;
				w->cp->cur_err = 0;
				log_event(w->cp, FSAFE_CHECKPOINT_EV_REPAIRED,
				          best);
			} else {
				w->unfixed = true;
			}
			snprintf(action + strlen(action),
			         sizeof(action) - strlen(action), "%s%s %s",
			         *action ? "; " : "",
			         r == 0 ? "rebuilt from" : "could not rebuild from",
			         g);
		} else if (!best) {
			snprintf(action + strlen(action),
			         sizeof(action) - strlen(action),
			         "%sno intact generation left",
			         *action ? "; " : "");
		}
	}
	report(w, FSAFE__CKPT_CURRENT, what, w->cp ? action : NULL, 0);
}

/* events.log, OPEN and LOCK: files, or damage. */
static void walk_files(struct walk *w)
{
	static const char *const names[] = { FSAFE__CKPT_LOG,
	                                     FSAFE__CKPT_MARKER,
	                                     FSAFE__CKPT_LOCK };
	char what[128], action[600], why[200], as[NAME_MAX + 1];
	struct stat st;

	for (size_t i = 0; i < 3 && !w->stop; i++) {
		if (fsafe__fstatat(w->dirfd, names[i], &st,
		                   AT_SYMLINK_NOFOLLOW) < 0 ||
		    S_ISREG(st.st_mode))
			continue;
		snprintf(what, sizeof(what), "not a regular file (%s)",
		         kind_of(st.st_mode));
		snprintf(why, sizeof(why), "%s: %s\n", names[i], what);
		if (w->cp)
			fix_quarantine(w, names[i], why, 0, action,
			               sizeof(action));
		report(w, names[i], what, w->cp ? action : NULL, 0);
		if (w->cp && i == 0)
			reopen_log(w->cp);
	}
	struct log_state ls;
	if (w->stop || log_read(w->dirfd, count_event, NULL, &ls) < 0 ||
	    (!ls.bad && !ls.torn))
		return;
	if (ls.bad)
		snprintf(what, sizeof(what), "%zu damaged record%s", ls.bad,
		         ls.bad == 1 ? "" : "s");
	else
		torn_what(what, sizeof(what), ls.torn);
	if (w->cp) {
		snprintf(why, sizeof(why), "events.log: %s\n", what);
		int r = rewrite_log(w->dirfd, why, as);
		if (r == 0)
			snprintf(action, sizeof(action), "quarantined as %s/%s; "
			         "intact records kept", FSAFE__CKPT_QUARANTINE,
			         as);
		else
			snprintf(action, sizeof(action), "not rewritten: %s",
			         fsafe_strerror(r));
		w->unfixed |= r < 0;
		reopen_log(w->cp);
	}
	report(w, FSAFE__CKPT_LOG, what, w->cp ? action : NULL, 0);
}

static void walk_store(struct walk *w)
{
	struct stat st;
	uint64_t cur = 0;
	int cur_err = current_state(w->dirfd, &cur);

	if (fsafe__fstatat(w->dirfd, FSAFE__CKPT_QUARANTINE, &st,
	                   AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
		char what[64];
		snprintf(what, sizeof(what), "not a directory (%s)",
		         kind_of(st.st_mode));
		report(w, FSAFE__CKPT_QUARANTINE, what,
		       w->cp ? "not repaired: move it out of the way" : NULL, 0);
		w->unfixed = true;
		if (w->cp)
			return; /* nothing can be kept safe: change nothing */
	}
	trail_read(w->dirfd, &w->trail);
	if (cur_err < 0 && !current_damaged(cur_err)) {
		/* Not damage but a failure to look: which generation is
		   complete is unknown, so nothing is judged or moved. */
		char what[128];
		snprintf(what, sizeof(what), "cannot be read: %s",
		         fsafe_strerror(cur_err));
		report(w, FSAFE__CKPT_CURRENT, what,
		       w->cp ? "not repaired" : NULL, 0);
		w->unfixed = true;
		return;
	}
	uint64_t best = walk_gens(w, cur, cur_err);
	if (!w->stop)
		walk_current(w, cur, cur_err, best);
	if (!w->stop && !w->cp)
		walk_files(w);
}

int fsafe_checkpoint_check(int dirfd, const char *path, fsafe_damage_fn fn,
                           void *arg)
{
	struct walk w = { .fn = fn, .arg = arg };

	if (!path || !*path)
		return -EINVAL;
	if ((w.dirfd = fsafe__open_dir(dirfd, path)) < 0)
		return w.dirfd;
	walk_store(&w);
	trail_free(&w.trail);
	fsafe__close(w.dirfd);
	return w.stop ? w.stop : w.count;
}

/* A LOCK that is not a file keeps every writer out, repair included: it
   goes to quarantine before repair takes the lock. */
static void repair_lock(struct walk *w, int dfd)
{
	char what[64], why[128], action[600], as[NAME_MAX + 1];
	struct stat st;

	if (fsafe__fstatat(dfd, FSAFE__CKPT_LOCK, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    S_ISREG(st.st_mode))
		return;
	snprintf(what, sizeof(what), "not a regular file (%s)",
	         kind_of(st.st_mode));
	snprintf(why, sizeof(why), "LOCK: %s\n", what);
	int r = quarantine(dfd, FSAFE__CKPT_LOCK, why, as);
	say_quarantined(r, as, action, sizeof(action));
	report(w, FSAFE__CKPT_LOCK, what, action, 0);
}

int fsafe_checkpoint_repair(int dirfd, const char *path, fsafe_damage_fn fn,
                            void *arg)
{
	struct fsafe_checkpoint_opts o = FSAFE_CHECKPOINT_OPTS_INIT;
	struct walk w = { .fn = fn, .arg = arg };
	fsafe_checkpoint *cp;
	int r = 0, dfd; /* r is only read when the open ran */

	if (!path || !*path)
		return -EINVAL;
	if ((dfd = fsafe__open_dir(dirfd, path)) < 0)
		return dfd;
	repair_lock(&w, dfd);
	fsafe__close(dfd);
	o.flags = FSAFE_CHECKPOINT_NO_WAIT;
	if (w.stop || (r = fsafe_checkpoint_open(dirfd, path, &o, &cp)) < 0)
		return w.stop ? w.stop : r;
	w.cp = cp;
	w.dirfd = cp->dirfd;
	walk_store(&w);
	/* The files last: the log takes the events above first. */
	if (!w.stop)
		walk_files(&w);
	trail_free(&w.trail);
	/* OPEN may have gone to quarantine: close expects its own. */
	int m = fsafe__openat(cp->dirfd, FSAFE__CKPT_MARKER,
	                      O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK,
	                      0644);
	fsafe__close(m);
	r = fsafe_checkpoint_close(cp);
	if (w.stop)
		return w.stop;
	return r < 0 ? r : w.count;
}

int fsafe_checkpoint_current_error(const fsafe_checkpoint *cp)
{
	assert(cp);
	return cp->cur_err;
}
