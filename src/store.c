/*
 * The keyed state store (include/fsafe/store.h): one record file a key,
 * published only through the writer, changed only under the store's lock
 * (store_lock.h: kernel locks on a file the handle keeps open), read
 * without it (the writer's rename makes every read see a whole record).
 * Every system call goes through the table (sys.h).
 */
#define _GNU_SOURCE
#include "fsafe/store.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "crc32c.h"
#include "error.h"
#include "opts.h"
#include "store_check.h"
#include "store_lock.h"
#include "store_record.h"
#include "sys.h"
#include "util.h"
#include "writer.h"

/* The lock module's private files (.lock-<uuid>.tmp / .broken), should
   any appear beside the records (a store locked through fsafe_lock, before
   store_lock.c, could leave them). */
#define LOCK_PRIV_PREFIX ".lock-"
#define KEY_PREFIX "k-"
#define KEY_PREFIX_LEN 2
#define NAME_CAP (KEY_PREFIX_LEN + 2 * FSAFE_STORE_KEY_MAX + 1)
_Static_assert(NAME_CAP - 1 <= 255, "a key's name fits NAME_MAX");

/* ---- record format: store_record.h ------------------------------------- */

#define REC_HDR FSAFE__REC_HDR

struct fsafe_store {
	int dirfd;
	unsigned flags, write_flags;
	mode_t mode;
	uint64_t lock_timeout_ms;
	unsigned swept;
	/* The caller's door for error detail (the options' `error`). */
	struct fsafe_error *error;
	/* The lock is held through this handle: a change from inside an
	   update callback would wait for itself. */
	bool locked;
	struct fsafe__store_lock lock;
	/* A sync of the directory makes a link durable with its inode
	   (fsafe__renames_whole, asked at open): a new key's record is
	   staged unnamed and linked at its name. */
	bool links_whole;
};

/* A failed step of a call on the handle, told through its error door.
   FSAFE_E* codes are no system call's errno: sys_errno 0 for them. */
static int fail(const fsafe_store *s, int r, const char *step)
{
	fsafe__error_set(s->error, r, r > -4096 ? -r : 0, step, false);
	return r;
}

/* ---- keys and names ------------------------------------------------------ */

static int key_check(const void *key, size_t klen)
{
	if (!key || klen == 0)
		return -EINVAL;
	return klen > FSAFE_STORE_KEY_MAX ? -ENAMETOOLONG : 0;
}


/* "k-" + lowercase hex: case-safe, no '/', no leading '.', and ordered as
   the key bytes are. */
static int key_name(const void *key, size_t klen, char name[NAME_CAP])
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *k = key;
	int r = key_check(key, klen);

	if (r < 0)
		return r;
	memcpy(name, KEY_PREFIX, KEY_PREFIX_LEN);
	for (size_t i = 0; i < klen; i++) {
		name[KEY_PREFIX_LEN + 2 * i] = hex[k[i] >> 4];
		name[KEY_PREFIX_LEN + 2 * i + 1] = hex[k[i] & 15];
	}
	name[KEY_PREFIX_LEN + 2 * klen] = '\0';
	return 0;
}

/* The checks every keyed call starts with: the key's name, and a buffer
   that is there when it has a length. */
static int key_args(const fsafe_store *s, const void *key, size_t klen,
                    const void *buf, size_t len, char name[NAME_CAP])
{
	int r = key_name(key, klen, name);

	if (r < 0)
		return fail(s, r, "key");
	return !buf && len ? fail(s, -EINVAL, "buffer") : 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The key a name encodes; false for any name key_name() cannot produce. */
static bool name_key(const char *name, uint8_t key[FSAFE_STORE_KEY_MAX],
                     size_t *klen)
{
	size_t n = strlen(name);

	if (strncmp(name, KEY_PREFIX, KEY_PREFIX_LEN) != 0 || n % 2 ||
	    n == KEY_PREFIX_LEN || n > NAME_CAP - 1)
		return false;
	*klen = (n - KEY_PREFIX_LEN) / 2;
	for (size_t i = 0; i < *klen; i++) {
		int hi = hex_digit(name[KEY_PREFIX_LEN + 2 * i]);
		int lo = hex_digit(name[KEY_PREFIX_LEN + 2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

/* The lock, its private files and the quarantine: expected, never
   reported by a listing. */
static bool lock_own(const char *name)
{
	return strcmp(name, FSAFE__STORE_LOCK_DIR) == 0 ||
	       strcmp(name, FSAFE__STORE_QUARANTINE) == 0 ||
	       strncmp(name, LOCK_PRIV_PREFIX, strlen(LOCK_PRIV_PREFIX)) == 0;
}

/* ---- reading a record ---------------------------------------------------- */

/* Exactly n bytes, or -EBADMSG at an early end of file. */
static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = fsafe__read(fd, p, n);
		if (r < 0)
			return (int)r;
		if (r == 0)
			return -EBADMSG;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Read and check the header (and the key in it) against the file size. */
static int rec_read_header(int fd, const struct stat *st, const void *key,
                           size_t klen, struct fsafe__rec *rec,
                           const char **why)
{
	uint8_t h[REC_HDR + FSAFE_STORE_KEY_MAX];
	size_t n = (uint64_t)st->st_size < REC_HDR + klen ? (size_t)st->st_size
	                                                  : REC_HDR + klen;
	int r = read_full(fd, h, n);

	if (r < 0)
		return r;
	return fsafe__rec_parse(h, n, key, klen, (uint64_t)st->st_size, rec,
	                        why);
}

/* Read the payload into dst (NULL: only check it) and verify its CRC. */
static int rec_read_payload(int fd, const struct fsafe__rec *rec, void *dst)
{
	char chunk[16384];
	uint64_t left = rec->len;
	uint32_t crc = 0;
	char *p = dst;

	while (left > 0) {
		size_t n = left < sizeof(chunk) ? (size_t)left : sizeof(chunk);
		char *at = p ? p : chunk;
		int r = read_full(fd, at, n);
		if (r < 0)
			return r;
		crc = fsafe__crc32c(crc, at, n);
		left -= n;
		if (p)
			p += n;
	}
	return crc == rec->crc ? 0 : -EBADMSG;
}

/*
 * Read key's record. mode: 0 header only, 1 verify the payload, 2 also
 * return it (malloc'd in *out, or into cap bytes of dst).
 */
struct rec_read {
	int mode;
	void *dst;
	size_t cap;
	void *out;
};

static int rec_body(int fd, struct fsafe__rec *rec, struct rec_read *rr)
{
	if (rr->mode == 0)
		return 0;
	if (rr->mode == 1)
		return rec_read_payload(fd, rec, NULL);
	if (rr->dst) {
		if (rec->len > rr->cap)
			return -EMSGSIZE;
		return rec_read_payload(fd, rec, rr->dst);
	}
	if (rec->len > SIZE_MAX - 1)
		return -ENOMEM;
	rr->out = malloc(rec->len ? (size_t)rec->len : 1);
	if (!rr->out)
		return -ENOMEM;
	int r = rec_read_payload(fd, rec, rr->out);
	if (r < 0) {
		free(rr->out);
		rr->out = NULL;
	}
	return r;
}

/* What a directory at a key's name is, as check and repair say it (a put
   or delete tells it by this address). */
static const char WHY_DIR[] = "not a regular file (directory)";

/* An update callback's *new_buf before it sets it. */
static const char unset_mark;
#define UNSET ((const void *)&unset_mark)

/* Why a name that is no regular file is no record (lstat tells a FIFO
   from a device; it never opens anything). */
static const char *not_regular(int dirfd, const char *name, int r)
{
	struct stat st;

	if (r == -EBADFD &&
	    fsafe__fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISFIFO(st.st_mode))
		return "not a regular file (FIFO)";
	return r == -ELOOP    ? "not a regular file (symbolic link)"
	       : r == -EISDIR ? WHY_DIR
	       : r == -ENXIO  ? "not a regular file (socket)"
	                      : "not a regular file (device)";
}

/* A record is opened without following a link or blocking on a FIFO;
   anything at a key's name that is not a regular file is an invalid
   record of that key (-EBADMSG), never an error of the store. */
static int rec_read_why(int dirfd, const char *name, const void *key,
                        size_t klen, struct fsafe__rec *rec,
                        struct rec_read *rr, const char **why)
{
	struct stat st;
	int fd = fsafe__open_regular(dirfd, name, O_RDONLY, &st);
	int r;

	*why = NULL;
	/* A socket fails the open itself (ENXIO). */
	if (fd == -ELOOP || fd == -EISDIR || fd == -EBADFD || fd == -ENXIO) {
		*why = not_regular(dirfd, name, fd);
		return -EBADMSG;
	}
	if (fd < 0)
		return fd;
	r = rec_read_header(fd, &st, key, klen, rec, why);
	if (r == 0)
		r = rec_body(fd, rec, rr);
	if (r == -EBADMSG && !*why)
		*why = "payload cut short or checksum mismatch";
	fsafe__close(fd);
	return r;
}

static int rec_read(int dirfd, const char *name, const void *key,
                    size_t klen, struct fsafe__rec *rec, struct rec_read *rr)
{
	const char *why;

	return rec_read_why(dirfd, name, key, klen, rec, rr, &why);
}

/* ---- changing records (under the lock) ----------------------------------- */

/* The store's wait (0: its default, FSAFE_FOREVER: no limit, which the
   lock module takes as it is). */
static uint64_t lock_wait_ms(uint64_t timeout_ms)
{
	return timeout_ms ? timeout_ms : FSAFE_STORE_LOCK_TIMEOUT_MS;
}

/* The lock's directory and file are never followed out of the store: a
   symbolic link or anything else at either name fails every change
   (-ENOTDIR, -ELOOP, ...) until repair quarantines it. */
static int store_lock(fsafe_store *s)
{
	const char *step;
	int r;

	if (s->locked)
		return fail(s, -EDEADLK, "store's lock already held by this "
		                         "handle");
	r = fsafe__store_lock_take(&s->lock, s->dirfd,
	                           lock_wait_ms(s->lock_timeout_ms), &step);
	if (r < 0)
		return fail(s, r, step);
	s->locked = true;
	return 0;
}

/* Release; the change's result stands (a lock that will not let go is
   dropped with its file's description, so nothing fails here). */
static int store_unlock(fsafe_store *s, int r)
{
	fsafe__store_lock_drop(&s->lock);
	s->locked = false;
	return r;
}

/* Publish header + key + payload as one one-shot write on the store's
   own directory fd (a named stage, written and synced in one call), which
   tells its failed step through the handle's door. A symbolic link at
   the name is replaced, never followed out of the store. A key `absent`
   under the lock is not looked up again, and where the directory links
   whole its record is staged unnamed and linked at the name: one name
   made, no staging name, no rename, no lock on the stage. */
static int rec_write(const fsafe_store *s, const char *name, const void *key,
                     size_t klen, uint64_t version, const void *buf,
                     size_t len, bool absent)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	struct fsafe__wopts o;
	uint8_t h[REC_HDR + FSAFE_STORE_KEY_MAX];
	size_t hl = fsafe__rec_format(h, key, klen, version, buf, len);
	struct iovec iov[2] = { { h, hl }, { (void *)buf, len } };

	wo.flags = s->write_flags | FSAFE_NO_FOLLOW;
	wo.mode = s->mode;
	wo.error = s->error;
	int r = fsafe__wopts_load(&o, &wo);
	o.absent = absent;
	o.link_new = absent && s->links_whole;
	return r < 0 ? r : fsafe__write_oneshot(s->dirfd, name, iov, 2, o);
}

/* A directory at a key's name: no rename replaces it and its contents are
   not ours to delete, so it goes into quarantine/ as repair would move
   it, and the key's name is free again. */
static int quarantine_dir(const fsafe_store *s, const char *name)
{
	bool sync = !(s->write_flags & FSAFE_NO_SYNC);
	char dest[NAME_CAP + 16];
	int qfd = fsafe__quarantine_open(s->dirfd, sync);
	int r = qfd < 0 ? qfd
	                : fsafe__quarantine_move(s->dirfd, name, qfd, WHY_DIR,
	                                         sync, dest, sizeof(dest));

	if (qfd >= 0)
		fsafe__close(qfd);
	return r < 0 ? fail(s, r, "quarantine the directory at the key's name")
	             : 0;
}

static int rec_unlink(const fsafe_store *s, const char *name)
{
	int r = fsafe__unlinkat(s->dirfd, name, 0);

	if (r == -EISDIR)
		return quarantine_dir(s, name);
	if (r < 0)
		return fail(s, r, "unlink record");
	if (s->write_flags & FSAFE_NO_SYNC)
		return 0;
	r = fsafe__fsync(s->dirfd);
	if (r < 0)
		fsafe__error_set(s->error, FSAFE_ENOTDURABLE, -r,
		                 "fsync directory", true);
	return r < 0 ? FSAFE_ENOTDURABLE : 0;
}

/* A record that could not be read, through the handle's door: an invalid
   one names what is wrong with it. */
static int read_fail(const fsafe_store *s, int r, const char *why)
{
	return fail(s, r, r == -EBADMSG && why ? why : "read record");
}

/* The next version after the current record's (header-checked only: a
   plain put overwrites whatever is there, even an invalid record, and
   quarantines a directory). An error reading it fails the put: restarting
   at 1 could let a stale compare-and-swap through. */
static int next_version(const fsafe_store *s, const char *name,
                        const void *key, size_t klen, uint64_t *v,
                        bool *absent)
{
	struct rec_read rr = { .mode = 0 };
	struct fsafe__rec rec;
	const char *why;
	int r = rec_read_why(s->dirfd, name, key, klen, &rec, &rr, &why);

	*v = r == 0 && rec.version + 1 ? rec.version + 1 : 1;
	*absent = r == -ENOENT;
	if (r == -EBADMSG && why == WHY_DIR)
		return quarantine_dir(s, name);
	if (r == 0 || r == -ENOENT || r == -EBADMSG)
		return 0;
	return read_fail(s, r, why);
}

static void set_version(uint64_t *out, uint64_t v)
{
	if (out)
		*out = v;
}

int fsafe_store_put(fsafe_store *s, const void *key, size_t klen,
                    const void *buf, size_t len, uint64_t *version)
{
	char name[NAME_CAP];
	uint64_t v;
	bool absent;
	int r;

	assert(s);
	if ((r = key_args(s, key, klen, buf, len, name)) < 0 ||
	    (r = store_lock(s)) < 0)
		return r;
	if ((r = next_version(s, name, key, klen, &v, &absent)) < 0)
		return store_unlock(s, r);
	r = rec_write(s, name, key, klen, v, buf ? buf : "", len, absent);
	if (r == 0 || r == FSAFE_ENOTDURABLE)
		set_version(version, v);
	return store_unlock(s, r);
}

/* The current record's version, fully verified; 0 when there is none. */
static int current_version(const fsafe_store *s, const char *name,
                           const void *key, size_t klen, uint64_t *v,
                           bool *absent)
{
	struct rec_read rr = { .mode = 1 };
	struct fsafe__rec rec;
	int r = rec_read(s->dirfd, name, key, klen, &rec, &rr);

	*v = r == 0 ? rec.version : 0;
	*absent = r == -ENOENT;
	return *absent ? 0 : r;
}

int fsafe_store_put_if(fsafe_store *s, const void *key, size_t klen,
                       const void *buf, size_t len, uint64_t expected,
                       uint64_t *version)
{
	char name[NAME_CAP];
	uint64_t cur;
	bool absent;
	int r;

	assert(s);
	if ((r = key_args(s, key, klen, buf, len, name)) < 0 ||
	    (r = store_lock(s)) < 0)
		return r;
	r = current_version(s, name, key, klen, &cur, &absent);
	if (r == -EBADMSG || (r == 0 && cur != expected))
		return store_unlock(s, fail(s, FSAFE_ECONFLICT,
		                               "compare version"));
	if (r < 0)
		return store_unlock(s, read_fail(s, r, NULL));
	r = rec_write(s, name, key, klen, cur + 1, buf ? buf : "", len,
	              absent);
	if (r == 0 || r == FSAFE_ENOTDURABLE)
		set_version(version, cur + 1);
	return store_unlock(s, r);
}

int fsafe_store_delete(fsafe_store *s, const void *key, size_t klen)
{
	char name[NAME_CAP];
	int r;

	assert(s);
	if ((r = key_args(s, key, klen, NULL, 0, name)) < 0 ||
	    (r = store_lock(s)) < 0)
		return r;
	return store_unlock(s, rec_unlink(s, name));
}

/* What the callback asked for, carried out: a verdict is never 0, and a
   write names its new value, so a callback that forgot both changes
   nothing. */
static int update_apply(const fsafe_store *s, const char *name,
                        const void *key, size_t klen, int verdict,
                        const void *nb, size_t nl,
                        const struct fsafe__rec *old, uint64_t *version)
{
	int r;

	if (verdict < 0)
		return fail(s, verdict, "update callback");
	if (verdict == FSAFE_STORE_KEEP)
		return 0;
	if (verdict == FSAFE_STORE_DELETE) {
		r = old ? rec_unlink(s, name) : 0;
		if (r == 0 || r == FSAFE_ENOTDURABLE)
			set_version(version, 0);
		return r;
	}
	if (verdict != FSAFE_STORE_WRITE)
		return fail(s, -EINVAL, "update callback's verdict");
	if (nb == UNSET || nl == SIZE_MAX || (!nb && nl))
		return fail(s, -EINVAL,
		            "update callback's new value (not set)");
	uint64_t v = old && old->version + 1 ? old->version + 1 : 1;
	r = rec_write(s, name, key, klen, v, nb ? nb : "", nl, false);
	if (r == 0 || r == FSAFE_ENOTDURABLE)
		set_version(version, v);
	return r;
}

/* Under the lock: the current record read, the callback asked. */
static int update_locked(const fsafe_store *s, const char *name,
                         const void *key, size_t klen,
                         fsafe_store_update_fn fn, void *arg,
                         uint64_t *version)
{
	struct rec_read rr = { .mode = 2 };
	struct fsafe__rec rec = { 0 };
	const void *nb = UNSET;
	size_t nl = SIZE_MAX;
	const char *why;
	int r = rec_read_why(s->dirfd, name, key, klen, &rec, &rr, &why);

	if (r < 0 && r != -ENOENT)
		return read_fail(s, r, why);
	bool exists = r == 0;
	set_version(version, exists ? rec.version : 0);
	r = fn(exists ? rr.out : NULL, exists ? (size_t)rec.len : 0, &nb, &nl,
	       arg);
	free(rr.out);
	return update_apply(s, name, key, klen, r, nb, nl,
	                    exists ? &rec : NULL, version);
}

int fsafe_store_update(fsafe_store *s, const void *key, size_t klen,
                       fsafe_store_update_fn fn, void *arg, uint64_t *version)
{
	char name[NAME_CAP];
	int r;

	assert(s);
	if ((r = key_args(s, key, klen, NULL, 0, name)) < 0)
		return r;
	if (!fn)
		return fail(s, -EINVAL, "update callback");
	if ((r = store_lock(s)) < 0)
		return r;
	return store_unlock(s, update_locked(s, name, key, klen, fn, arg,
	                                        version));
}

/* ---- reading ------------------------------------------------------------- */

static int get_common(fsafe_store *s, const void *key, size_t klen,
                      struct rec_read *rr, size_t *len, uint64_t *version)
{
	char name[NAME_CAP];
	struct fsafe__rec rec;
	const char *why;
	int r;

	assert(s && len);
	if ((r = key_args(s, key, klen, NULL, 0, name)) < 0)
		return r;
	r = rec_read_why(s->dirfd, name, key, klen, &rec, rr, &why);
	if (r == 0 || r == -EMSGSIZE)
		*len = (size_t)rec.len;
	if (r == 0)
		set_version(version, rec.version);
	if (r == -EMSGSIZE)
		return fail(s, r, "buffer too small");
	return r < 0 ? read_fail(s, r, why) : 0;
}

int fsafe_store_get(fsafe_store *s, const void *key, size_t klen, void **buf,
                    size_t *len, uint64_t *version)
{
	struct rec_read rr = { .mode = 2 };

	assert(buf);
	int r = get_common(s, key, klen, &rr, len, version);
	if (r == 0)
		*buf = rr.out;
	return r;
}

int fsafe_store_get_into(fsafe_store *s, const void *key, size_t klen,
                         void *buf, size_t cap, size_t *len,
                         uint64_t *version)
{
	char one;
	struct rec_read rr = { .mode = 2, .dst = buf ? buf : &one, .cap = cap };

	assert(s);
	if (!buf && cap)
		return fail(s, -EINVAL, "buffer");
	return get_common(s, key, klen, &rr, len, version);
}

/* ---- open / close -------------------------------------------------------- */

/* The caller's options in our layout, a failure told through their error
   member when the caller's layout holds one (any size from V0 up). */
static int opts_load(struct fsafe_store_opts *o,
                     const struct fsafe_store_opts *in)
{
	int r = FSAFE__OPTS_COPY(o, in, FSAFE_STORE_OPTS_SIZE_V0);

	if (r == 0 &&
	    ((o->flags & ~(unsigned)(FSAFE_STORE_CREATE | FSAFE_STORE_NO_SWEEP |
	                             FSAFE_STORE_LOCK_KERNEL)) ||
	     (o->write_flags & ~(unsigned)(FSAFE_NO_SYNC | FSAFE_NO_TMPFILE))))
		r = -EINVAL;
	if (r < 0) {
		if (r == -E2BIG || o->error)
			fsafe__error_set(r == -E2BIG ? in->error : o->error, r,
			                 -r, "options", false);
		return r;
	}
	if (!o->sweep_older_than_ms)
		o->sweep_older_than_ms = FSAFE_STORE_SWEEP_MS;
	return 0;
}

static int open_dir(int dirfd, const char *path,
                    const struct fsafe_store_opts *o)
{
	int fd = fsafe__open_dir(dirfd, path);
	const char *step;

	if (fd != -ENOENT || !(o->flags & FSAFE_STORE_CREATE))
		return fd;
	int r = fsafe__mkdir_p(dirfd, path, o->mode ? o->mode | 0700 : 0777,
	                       !(o->write_flags & FSAFE_NO_SYNC), &fd, &step);
	return r < 0 ? r : fd;
}

int fsafe_store_open(int dirfd, const char *path,
                     const struct fsafe_store_opts *opts, fsafe_store **out)
{
	struct fsafe_store_opts o;
	fsafe_store *s;
	int r;

	assert(out);
	if ((r = opts_load(&o, opts)) < 0)
		return r;
	if (!path || !*path) {
		fsafe__error_set(o.error, -EINVAL, EINVAL, "path", false);
		return -EINVAL;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		fsafe__error_set(o.error, -ENOMEM, ENOMEM, "allocate", false);
		return -ENOMEM;
	}
	if ((s->dirfd = open_dir(dirfd, path, &o)) < 0) {
		r = s->dirfd;
		free(s);
		fsafe__error_set(o.error, r, -r, "open the store's directory",
		                 false);
		return r;
	}
	s->error = o.error;
	s->flags = o.flags;
	s->write_flags = o.write_flags;
	s->mode = o.mode;
	s->lock_timeout_ms = o.lock_timeout_ms;
	s->links_whole = fsafe__renames_whole(s->dirfd);
	fsafe__store_lock_init(&s->lock);
	/* Best effort: a store on a read-only filesystem still reads. */
	if (!(o.flags & FSAFE_STORE_NO_SWEEP)) {
		r = fsafe_sweep(s->dirfd, ".", o.sweep_older_than_ms, 0, NULL,
		                NULL);
		s->swept = r > 0 ? (unsigned)r : 0;
	}
	*out = s;
	return 0;
}

unsigned fsafe_store_swept(const fsafe_store *s)
{
	assert(s);
	return s->swept;
}

void fsafe_store_close(fsafe_store *s)
{
	if (!s)
		return;
	fsafe__store_lock_close(&s->lock);
	fsafe__close(s->dirfd);
	free(s);
}

/* ---- listing ------------------------------------------------------------- */

struct item {
	uint8_t *key;
	size_t klen;
	uint64_t version, len;
};

struct fsafe_store_iter {
	struct item *items;
	size_t n, cap, pos;
};

struct lister {
	fsafe_store *s;
	struct fsafe_store_list_opts o;
	fsafe_store_iter *it;
};

static void report(struct lister *ls, enum fsafe_store_skip why,
                   const char *name, const void *key, size_t klen, int err)
{
	if (ls->o.skipped)
		ls->o.skipped(why, name, key, klen, err, ls->o.arg);
}

static int add_item(fsafe_store_iter *it, const uint8_t *key, size_t klen,
                    const struct fsafe__rec *rec)
{
	if (it->n == it->cap) {
		size_t cap = it->cap ? 2 * it->cap : 64;
		struct item *n = realloc(it->items, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		it->items = n;
		it->cap = cap;
	}
	struct item *i = &it->items[it->n];
	if (!(i->key = malloc(klen)))
		return -ENOMEM;
	memcpy(i->key, key, klen);
	i->klen = klen;
	i->version = rec->version;
	i->len = rec->len;
	it->n++;
	return 0;
}

/* The entry's type, asking the filesystem only when getdents did not say. */
static unsigned char entry_type(int dirfd, const char *name,
                                unsigned char type)
{
	struct stat st;

	if (type != DT_UNKNOWN)
		return type;
	if (fsafe__fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return DT_UNKNOWN;
	return S_ISREG(st.st_mode)   ? DT_REG
	       : S_ISDIR(st.st_mode) ? DT_DIR
	       : S_ISLNK(st.st_mode) ? DT_LNK
	                             : DT_FIFO;
}

static enum fsafe_store_skip skip_kind(unsigned char type)
{
	return type == DT_DIR ? FSAFE_STORE_SKIP_DIR
	       : type == DT_LNK ? FSAFE_STORE_SKIP_SYMLINK
	                        : FSAFE_STORE_SKIP_OTHER;
}

/* One directory entry: listed, reported, or passed over in silence. */
static int list_entry(int dfd, const char *name, unsigned char type,
                      void *arg)
{
	struct lister *ls = arg;
	uint8_t key[FSAFE_STORE_KEY_MAX];
	struct fsafe__rec rec = { 0 };
	size_t klen;

	if (fsafe_is_staging_name(name) || lock_own(name))
		return 0;
	type = entry_type(dfd, name, type);
	if (type == DT_UNKNOWN) /* vanished meanwhile */
		return 0;
	bool is_key = name_key(name, key, &klen);
	if (type != DT_REG) {
		report(ls, skip_kind(type), name, is_key ? key : NULL,
		       is_key ? klen : 0, 0);
		return 0;
	}
	if (!is_key) {
		report(ls, FSAFE_STORE_SKIP_UNKNOWN, name, NULL, 0, 0);
		return 0;
	}
	if (!(ls->o.flags & FSAFE_STORE_LIST_NAMES_ONLY)) {
		struct rec_read rr = { .mode = 1 };
		int r = rec_read(dfd, name, key, klen, &rec, &rr);
		if (r == -ENOENT)
			return 0;
		if (r < 0) {
			report(ls, FSAFE_STORE_SKIP_BAD_RECORD, name, key, klen,
			       r);
			return r == -ENOMEM ? r : 0;
		}
	}
	return add_item(ls->it, key, klen, &rec);
}

static int item_cmp(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);

	if (c)
		return c;
	return (x->klen > y->klen) - (x->klen < y->klen);
}

static int list_dir(struct lister *ls)
{
	return fsafe__dir_each(ls->s->dirfd, list_entry, ls);
}

int fsafe_store_list(fsafe_store *s, const struct fsafe_store_list_opts *opts,
                     fsafe_store_iter **out)
{
	struct lister ls = { .s = s };
	int r;

	assert(s && out);
	r = FSAFE__OPTS_COPY(&ls.o, opts, FSAFE_STORE_LIST_OPTS_SIZE_V0);
	if (r == 0 && (ls.o.flags & ~(unsigned)FSAFE_STORE_LIST_NAMES_ONLY))
		r = -EINVAL;
	if (r < 0)
		return fail(s, r, "options");
	if (!(ls.it = calloc(1, sizeof(*ls.it))))
		return fail(s, -ENOMEM, "allocate");
	if ((r = list_dir(&ls)) < 0) {
		fsafe_store_iter_free(ls.it);
		return fail(s, r, "read the store's directory");
	}
	if (ls.it->n)
		qsort(ls.it->items, ls.it->n, sizeof(struct item), item_cmp);
	*out = ls.it;
	return 0;
}

int fsafe_store_iter_next(fsafe_store_iter *it, struct fsafe_store_entry *e)
{
	assert(it && e);
	if (it->pos == it->n)
		return 0;
	const struct item *i = &it->items[it->pos++];
	*e = (struct fsafe_store_entry){ .key = i->key, .keylen = i->klen,
		                         .version = i->version, .len = i->len };
	return 1;
}

size_t fsafe_store_iter_count(const fsafe_store_iter *it)
{
	assert(it);
	return it->n;
}

void fsafe_store_iter_free(fsafe_store_iter *it)
{
	if (!it)
		return;
	for (size_t i = 0; i < it->n; i++)
		free(it->items[i].key);
	free(it->items);
	free(it);
}

/* ---- one entry, for check and repair (store_check.c) --------------------- */

int fsafe__store_classify(int dfd, const char *name, const char **why)
{
	uint8_t key[FSAFE_STORE_KEY_MAX];
	struct rec_read rr = { .mode = 1 };
	struct fsafe__rec rec;
	size_t klen;

	if (fsafe_is_staging_name(name) ||
	    strncmp(name, LOCK_PRIV_PREFIX, strlen(LOCK_PRIV_PREFIX)) == 0)
		return FSAFE__STORE_FINE;
	if (!name_key(name, key, &klen)) {
		*why = "stray entry: not a key's name";
		return FSAFE__STORE_STRAY;
	}
	int r = rec_read_why(dfd, name, key, klen, &rec, &rr, why);
	if (r == -ENOENT)
		return FSAFE__STORE_FINE; /* deleted meanwhile */
	return r == -EBADMSG ? FSAFE__STORE_BAD : r;
}
