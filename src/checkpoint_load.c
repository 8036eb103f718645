/* A generation's files checked against its manifest (checkpoint_load.h). */
#define _GNU_SOURCE
#include "checkpoint_load.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "sha256.h"
#include "sys.h"
#include "thread.h"
#include "util.h"

/* From this many bytes in all, the files are read on a thread of their
   own; below, starting one costs more than the overlap saves. */
#define THREAD_MIN ((uint64_t)256 << 10)
/* What one read of a load asks for: the hashing follows a piece behind. */
#define PIECE ((size_t)256 << 10)
/* A check's reads: the whole buffer, and the first when it compares
   bytes (a changed file usually differs early). */
#define CHUNK ((size_t)1 << 20)
#define FIRST_CHUNK ((size_t)16 << 10)

/* A file's read_rc until it is read (then 0 or -errno). */
#define READING 1
/* A file's read_rc when its read was never started: another file failed
   first. Not a verdict on this one. */
#define SKIPPED (-ECANCELED)

enum { UNCLAIMED, BY_CALLER, BY_READER };

struct lfile {
	const struct fsafe__ckpt_entry *e;
	char *buf;             /* the reader's, until the check is done */
	_Atomic uint64_t got;  /* bytes in buf so far (published after them) */
	_Atomic int read_rc;   /* READING, then the read's result */
	_Atomic int owner;     /* which thread hashes it */
	int result;            /* the check's (its owner's): 0 until done */
};

struct load {
	struct lfile *f;
	size_t n;
	int gfd;
	bool threaded;
	atomic_bool stop;      /* a file failed: check no more */
	pthread_mutex_t mu;
	pthread_cond_t more;   /* the reader published something */
};

/* ---- what every check of a file shares ------------------------------------ */

/* File e opened for reading, its size the manifest's: the fd, -EBADMSG,
   or what opening it gave. */
static int open_entry(int gfd, const struct fsafe__ckpt_entry *e)
{
	struct stat st;
	int fd = fsafe__open_regular(gfd, e->name, O_RDONLY, &st);

	if (fd >= 0 && ((uint64_t)st.st_size != e->size ||
	                e->size > SIZE_MAX - 1)) {
		fsafe__close(fd);
		return -EBADMSG;
	}
	return fd;
}

/* Count read n's bytes into *got: READING while the file may hold more;
   at its end 0 if it held exactly `size` bytes, else -EBADMSG (one that
   grew while read is caught as one that is shorter is: the reads ask
   past the size); or the read's failure. */
static int count_read(ssize_t n, uint64_t *got, uint64_t size)
{
	if (n <= 0)
		return n < 0 ? (int)n : *got == size ? 0 : -EBADMSG;
	if ((*got += (uint64_t)n) > size)
		return -EBADMSG;
	return READING;
}

/* What a check computes over a file's bytes: its SHA-256, its CRC-32C,
   or both. A load takes the CRC-32C where the manifest has one (it keeps
   up with reading from memory; SHA-256 is several times slower); a check
   of one file (verify) takes both. */
struct digest {
	bool sha, crc;
	struct fsafe__sha256 s;
	uint32_t c;
};

static void digest_init(struct digest *d, const struct fsafe__ckpt_entry *e,
                        bool full)
{
	d->crc = e->has_crc;
	d->sha = full || !e->has_crc;
	d->c = 0;
	if (d->sha)
		fsafe__sha256_init(&d->s);
}

static void digest_update(struct digest *d, const void *p, size_t n)
{
	if (d->sha)
		fsafe__sha256_update(&d->s, p, n);
	if (d->crc)
		d->c = fsafe__crc32c(d->c, p, n);
}

/* After `rc`, the read's result: rc if it failed, else 0 when the digest
   matches e's, else -EBADMSG. Ends the digest either way. */
static int digest_end(struct digest *d, const struct fsafe__ckpt_entry *e,
                      int rc)
{
	uint8_t md[32];
	char hex[65];

	if (rc < 0) {
		if (d->sha)
			fsafe__sha256_free(&d->s);
		return rc;
	}
	if (d->sha) {
		fsafe__sha256_final(&d->s, md);
		fsafe__sha256_hex(md, hex);
		if (strcmp(hex, e->hash) != 0)
			return -EBADMSG;
	}
	return d->crc && d->c != e->crc ? -EBADMSG : 0;
}

/* ---- one file, checked a piece at a time ------------------------------------ */

int fsafe__ckpt_check_file(int gfd, const struct fsafe__ckpt_entry *e,
                           const unsigned char *same)
{
	struct digest d;
	uint64_t got = 0;
	unsigned char *buf;
	int r, fd = open_entry(gfd, e);

	if (fd < 0)
		return fd;
	if (!(buf = fsafe__io_alloc(CHUNK))) {
		fsafe__close(fd);
		return -ENOMEM;
	}
	digest_init(&d, e, true);
	do {
		ssize_t n = fsafe__read(fd, buf,
		                        same && !got ? FIRST_CHUNK : CHUNK);
		r = count_read(n, &got, e->size);
		if (r == READING && same &&
		    memcmp(same + got - (uint64_t)n, buf, (size_t)n) != 0)
			r = -ESTALE; /* not the bytes compared: stop early */
		if (r == READING)
			digest_update(&d, buf, (size_t)n);
	} while (r == READING);
	fsafe__close(fd);
	fsafe__io_free(buf);
	return digest_end(&d, e, r);
}

/* ---- a whole generation kept in memory, for a load ------------------------- */

/* Wake a hasher waiting for what the reader just published. */
static void publish(struct load *l)
{
	if (!l->threaded)
		return;
	pthread_mutex_lock(&l->mu);
	pthread_cond_broadcast(&l->more);
	pthread_mutex_unlock(&l->mu);
}

/* Room for `need` bytes in f->buf: an earlier load's buffer when it is
   large enough, else a new one (nothing in the old is kept: realloc
   would copy it, and lose the new one's alignment for reads). */
static int room(struct lfile *f, size_t need)
{
	if (f->buf && fsafe__io_size(f->buf) >= need)
		return 0;
	fsafe__io_free(f->buf);
	return (f->buf = fsafe__io_alloc(need)) ? 0 : -ENOMEM;
}

/* Read f whole into its buffer, a piece at a time, each piece published
   as it lands. One byte more than the manifest's size is asked for, so a
   file that grew is caught, as one that is shorter is. */
static int read_file(struct load *l, struct lfile *f)
{
	uint64_t size = f->e->size, got = 0;
	int r, fd = open_entry(l->gfd, f->e);

	if (fd < 0)
		return fd;
	r = room(f, (size_t)size + 1) < 0 ? -ENOMEM : READING;
	while (r == READING) {
		uint64_t left = size + 1 - got;
		ssize_t n = fsafe__read(fd, f->buf + got,
		                        left < PIECE ? (size_t)left : PIECE);
		if ((r = count_read(n, &got, size)) == READING) {
			atomic_store_explicit(&f->got, got,
			                      memory_order_release);
			publish(l);
		}
	}
	fsafe__close(fd);
	return r;
}

static void read_all(struct load *l)
{
	for (size_t i = 0; i < l->n; i++) {
		struct lfile *f = &l->f[i];
		int r = atomic_load(&l->stop) ? SKIPPED : read_file(l, f);
		atomic_store_explicit(&f->read_rc, r, memory_order_release);
		publish(l);
	}
}

/* Until the reader has published more of f than `hashed`, or is done. */
static void wait_more(struct load *l, struct lfile *f, uint64_t hashed)
{
	pthread_mutex_lock(&l->mu);
	while (atomic_load(&f->got) == hashed &&
	       atomic_load(&f->read_rc) == READING)
		pthread_cond_wait(&l->more, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

/* Hash f as its pieces arrive and compare: 0, -EBADMSG, the read's
   failure, or SKIPPED. */
static int hash_file(struct load *l, struct lfile *f)
{
	struct digest d;
	uint64_t hashed = 0;
	int rc;

	digest_init(&d, f->e, false);
	for (;;) {
		/* read_rc first: once it is final, so is got. */
		rc = atomic_load_explicit(&f->read_rc, memory_order_acquire);
		uint64_t got = atomic_load_explicit(&f->got,
		                                    memory_order_acquire);
		if (got > hashed) {
			digest_update(&d, f->buf + hashed,
			              (size_t)(got - hashed));
			hashed = got;
		} else if (rc != READING) {
			break;
		} else {
			wait_more(l, f, hashed);
		}
	}
	return digest_end(&d, f->e, rc);
}

/* Check f if no other thread has claimed it: false if one had. */
static bool check(struct load *l, struct lfile *f, int who)
{
	int none = UNCLAIMED;

	if (!atomic_compare_exchange_strong(&f->owner, &none, who))
		return false;
	if ((f->result = hash_file(l, f)) < 0)
		atomic_store(&l->stop, true);
	return true;
}

/* The caller hashes in name order, behind the reader, until it meets a
   file the reader took. */
static void hash_forward(struct load *l)
{
	for (size_t i = 0; i < l->n && !atomic_load(&l->stop); i++)
		if (!check(l, &l->f[i], BY_CALLER))
			break;
}

/* The reader, with every file read, hashes from the last file back until
   it meets one the caller took. */
static void *reader(void *arg)
{
	struct load *l = arg;

	read_all(l);
	for (size_t i = l->n; i-- > 0 && !atomic_load(&l->stop);)
		if (!check(l, &l->f[i], BY_READER))
			break;
	return NULL;
}

static bool large(const struct fsafe__manifest *m)
{
	uint64_t total = 0;

	for (size_t i = 0; i < m->n && total < THREAD_MIN; i++)
		total += m->e[i].size < THREAD_MIN ? m->e[i].size : THREAD_MIN;
	return total >= THREAD_MIN;
}

static void start(struct load *l, const struct fsafe__manifest *m,
                  enum fsafe__load_how how, pthread_t *t)
{
	l->threaded = how == FSAFE__LOAD_AUTO ? large(m)
	                                      : how != FSAFE__LOAD_INLINE;
	if (l->threaded && fsafe__thread_start(t, NULL, reader, l) != 0)
		l->threaded = false;
	if (!l->threaded)
		read_all(l); /* then hashed one by one by the caller */
}

/* The first file in name order found damaged: its failure, *bad its
   index; else 0. Every file was checked unless one failed: the caller
   and the reader claim from both ends until they meet. */
static int verdict(const struct load *l, size_t *bad)
{
	for (size_t i = 0; i < l->n; i++) {
		if (l->f[i].result < 0 && l->f[i].result != SKIPPED) {
			*bad = i;
			return l->f[i].result;
		}
	}
	return 0;
}

/* No buffer left behind: the load failed. */
static void drop_all(char **data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fsafe__io_free(data[i]);
		data[i] = NULL;
	}
}

int fsafe__ckpt_load_files(int gfd, const struct fsafe__manifest *m,
                           char **data, size_t *bad, enum fsafe__load_how how)
{
	struct load l = { .n = m->n, .gfd = gfd };
	pthread_t t;

	*bad = m->n;
	if (!(l.f = calloc(m->n ? m->n : 1, sizeof(*l.f)))) {
		drop_all(data, m->n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n; i++) {
		l.f[i].e = &m->e[i];
		l.f[i].buf = data[i];
		atomic_init(&l.f[i].read_rc, READING);
	}
	pthread_mutex_init(&l.mu, NULL);
	pthread_cond_init(&l.more, NULL);
	start(&l, m, how, &t);
	bool joined = l.threaded && how == FSAFE__LOAD_READER_FIRST &&
	              pthread_join(t, NULL) == 0;
	hash_forward(&l);
	if (l.threaded && !joined)
		pthread_join(t, NULL);
	int r = verdict(&l, bad);
	for (size_t i = 0; i < m->n; i++)
		data[i] = l.f[i].buf;
	if (r < 0)
		drop_all(data, m->n);
	pthread_cond_destroy(&l.more);
	pthread_mutex_destroy(&l.mu);
	free(l.f);
	return r;
}
