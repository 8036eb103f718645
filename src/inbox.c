/*
 * The directory inbox (see include/fsafe/inbox.h).
 *
 * Delivery goes through the atomic writer in create-only mode straight into
 * new/, as a one-shot write on the handle's own fd of new/: header and body
 * written and synced in one call, then published and new/ synced. Where a
 * sync of new/ makes a link durable with its inode (renames_whole: ext3,
 * ext4, xfs, tmpfs) the stage is unnamed (O_TMPFILE) and the publish links
 * it at the id; elsewhere it is named in the public staging form from the
 * start and published with renameat2(NOREPLACE) or link. The id is new, so
 * nothing is looked up first. Staging in
 * a separate tmp/ would cost a second rename and a second directory sync
 * per message and buy nothing: consumers tell stages apart by
 * fsafe_is_staging_name(), and recovery sweeps them with fsafe_sweep().
 *
 * A claim is one rename new/X -> claimed/<c>/X, which exactly one consumer
 * wins, then a sync of the claim directory, which makes the rename durable
 * whole on the filesystems the inbox supports (fsafe/inbox.h). Every other
 * move (release, recovery, done/, quarantine) is link, sync, unlink. An ack
 * syncs the claim directory, and new/ first where one directory's sync does
 * not make a rename durable whole (btrfs, ext2: fsafe__renames_whole), so
 * that an acked message never reappears in new/.
 */
#define _GNU_SOURCE
#include "inbox.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "opts.h"
#include "owner.h"
#include "quarantine.h"
#include "random.h"
#include "sys.h"
#include "util.h"
#include "writer.h"

static const char hexd[] = "0123456789abcdef";

#define OWNER_NAME "owner"
#define DIR_MAX (2 + FSAFE_INBOX_NAME_MAX + 1)
/* A claim directory still being born (b-) is left alone this long. */
#define BIRTH_GRACE_MS 60000

struct fsafe_inbox {
	int dirfd, newfd, claimedfd, quarfd, donefd;
	unsigned flags, write_flags;
	/* One sync of a directory makes a rename between new/ and claimed/
	   durable whole (fsafe__renames_whole): the ack need not sync new/. */
	bool renames_whole;
	uint64_t max;
	uint64_t seq;
	struct fsafe_lock_owner self;
	struct fsafe_error *error; /* the caller's, from the open */
};

struct fsafe_inbox_consumer {
	fsafe_inbox *ib;
	int fd;                /* claimed/<dir> */
	bool named;
	char dir[DIR_MAX + 1];
	char **names;          /* the last listing of new/, sorted */
	size_t n, pos;
	unsigned quarantined;
	int ino;               /* inotify fd, -1 when unused */
	bool ino_tried;
};

struct fsafe_inbox_msg {
	char id[FSAFE_INBOX_ID_LEN + 1];
	char path[16 + DIR_MAX + FSAFE_INBOX_ID_LEN];
	uint8_t *data;
	size_t len;
	uint64_t seq;
};

/* ---- ids ---------------------------------------------------------------- */

static char *hex_field(char *p, uint64_t v, int width)
{
	for (int i = width - 1; i >= 0; i--, v >>= 4)
		p[i] = hexd[v & 15];
	return p + width;
}

static int make_id(const fsafe_inbox *ib, uint64_t seq, char *id)
{
	struct timespec ts;
	uint64_t rnd = 0;
	int r = fsafe__csprng(&rnd, 6);

	if (r < 0)
		return r;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t us = (uint64_t)ts.tv_sec * 1000000u +
	              (uint64_t)ts.tv_nsec / 1000u;
	uint64_t boot = 0;
	for (int i = 0; i < 8; i++) /* the boot id's first 32 bits */
		boot = (boot << 4) | (uint64_t)(strchr(hexd, ib->self.boot_id[i]) - hexd);
	char *p = hex_field(id, us, 16);
	*p++ = '.';
	p = hex_field(p, seq, 12);
	*p++ = '.';
	p = hex_field(p, boot, 8);
	*p++ = '.';
	p = hex_field(p, (uint64_t)getpid(), 8);
	*p++ = '.';
	p = hex_field(p, rnd, 12);
	*p = '\0';
	return 0;
}

/* ---- small directory helpers ------------------------------------------- */

/* Create a directory if missing; 1 when created, 0 when it was there. */
static int ensure_dir(int dirfd, const char *name)
{
	int r = fsafe__mkdirat(dirfd, name, 0777);

	return r == 0 ? 1 : r == -EEXIST ? 0 : r;
}

/*
 * Move a message between directories without ever risking it: link the new
 * name, make it durable, then drop the old one. A rename would be one
 * call, but a power cut may keep its two halves apart (the model in
 * tests/power shows the removal surviving alone), losing the message.
 * A crash in between leaves two names of one inode; recovery reads a link
 * count above one as "the message also lives elsewhere". -EEXIST when the
 * new name exists (nothing done).
 */
static int move_durably(int ofd, const char *old, int nfd, const char *new_)
{
	int r = fsafe__linkat(ofd, old, nfd, new_, 0);

	if (r < 0 || (r = fsafe__fsync(nfd)) < 0)
		return r;
	r = fsafe__unlinkat(ofd, old, 0);
	return r == -ENOENT ? 0 : r;
}

/* ---- open / close ------------------------------------------------------- */

/* A failed call: its detail, to the error member the open was given. */
static int fail(const fsafe_inbox *ib, int r, const char *step)
{
	if (r < 0)
		fsafe__error_set(ib->error, r, -r, step, false);
	return r;
}

static int load_opts(const struct fsafe_inbox_opts *opts,
                     struct fsafe_inbox_opts *o, const char **step)
{
	int r = FSAFE__OPTS_COPY(o, opts, FSAFE_INBOX_OPTS_SIZE_V0);

	/* A struct too large still has our layout's error member; one too
	   small may lack it. */
	if (r == -E2BIG)
		o->error = opts->error;
	*step = "options (size)";
	if (r < 0)
		return r;
	*step = "options (flags)";
	if (o->flags & ~(unsigned)(FSAFE_INBOX_CREATE | FSAFE_INBOX_KEEP_DONE |
	                           FSAFE_INBOX_NO_INOTIFY))
		return -EINVAL;
	*step = "options (write_flags)";
	if (o->write_flags & ~(unsigned)(FSAFE_NO_TMPFILE | FSAFE_NO_RENAMEAT2))
		return -EINVAL;
	if (!o->max_message)
		o->max_message = FSAFE_INBOX_MAX_DEFAULT;
	return 0;
}

/* Create the inbox directory (missing parents too), durably. */
static int create_top(int dirfd, const char *path)
{
	const char *step;

	return fsafe__mkdir_p(dirfd, path, 0777, true, NULL, &step);
}

static int open_subdirs(fsafe_inbox *ib, bool create)
{
	static const char *const sub[] = { "new", "claimed", "quarantine",
	                                   "done" };
	int *fds[] = { &ib->newfd, &ib->claimedfd, &ib->quarfd, &ib->donefd };
	bool made = false;
	int r = 0; /* only read when create; gcc -Os cannot see that */

	for (int i = 0; i < 4; i++) {
		if (create && (r = ensure_dir(ib->dirfd, sub[i])) < 0)
			return r;
		made |= create && r == 1;
		if ((*fds[i] = fsafe__open_subdir(ib->dirfd, sub[i])) < 0)
			return *fds[i];
	}
	return made ? fsafe__fsync(ib->dirfd) : 0;
}

int fsafe_inbox_open(int dirfd, const char *path,
                     const struct fsafe_inbox_opts *opts, fsafe_inbox **out)
{
	struct fsafe_inbox_opts o;
	const char *step;
	int r = load_opts(opts, &o, &step);

	assert(out);
	*out = NULL;
	if (r == 0 && (!path || !*path))
		r = -EINVAL, step = "path";
	if (r == 0 && (o.flags & FSAFE_INBOX_CREATE))
		r = create_top(dirfd, path), step = "create";
	if (r < 0) {
		fsafe__error_set(o.error, r, -r, step, false);
		return r;
	}
	fsafe_inbox *ib = calloc(1, sizeof(*ib));
	if (!ib) {
		fsafe__error_set(o.error, -ENOMEM, ENOMEM, "allocate", false);
		return -ENOMEM;
	}
	ib->newfd = ib->claimedfd = ib->quarfd = ib->donefd = -1;
	ib->flags = o.flags;
	ib->write_flags = o.write_flags;
	ib->max = o.max_message;
	ib->error = o.error;
	if ((r = ib->dirfd = fsafe__open_dir(dirfd, path)) < 0 ||
	    (step = "open subdirectory",
	     r = open_subdirs(ib, o.flags & FSAFE_INBOX_CREATE)) < 0 ||
	    (step = "owner", r = fsafe__owner_self(&ib->self, false)) < 0) {
		fail(ib, r, ib->dirfd < 0 ? "open" : step);
		fsafe_inbox_close(ib);
		return r;
	}
	ib->renames_whole = fsafe__renames_whole(ib->newfd);
	*out = ib;
	return 0;
}

void fsafe_inbox_close(fsafe_inbox *ib)
{
	if (!ib)
		return;
	int fds[] = { ib->dirfd, ib->newfd, ib->claimedfd, ib->quarfd,
	              ib->donefd };
	for (int i = 0; i < 5; i++)
		if (fds[i] >= 0)
			fsafe__close(fds[i]);
	free(ib);
}

/* ---- deliver ------------------------------------------------------------- */

static int deliver_as(fsafe_inbox *ib, const char *id, uint64_t seq,
                      const void *buf, size_t len, struct fsafe_error *e)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	struct fsafe__wopts o;
	uint8_t h[FSAFE__INBOX_HDR];
	struct iovec iov[2] = { { h, sizeof(h) }, { (void *)buf, len } };

	wo.error = e;
	wo.flags = FSAFE_CREATE_ONLY | FSAFE_NO_FOLLOW | ib->write_flags;
	wo.mode = 0666;
	fsafe__inbox_header(h, seq, buf, len);
	int r = fsafe__wopts_load(&o, &wo);
	if (r < 0)
		return r;
	/* A one-shot write on new/'s fd we hold: header and body written
	   and synced in one call, and no lookup of the id, which is new
	   (one that is not fails the publish with -EEXIST). Where a link
	   is durable with its inode, the stage is unnamed and linked at the
	   id: no staging name to make, lock and rename. */
	o.fresh = true;
	o.link_new = ib->renames_whole;
	return fsafe__write_oneshot(ib->newfd, id, iov, 2, o);
}

int fsafe_inbox_deliver(fsafe_inbox *ib, const void *buf, size_t len,
                        char *id_out)
{
	char id[FSAFE_INBOX_ID_LEN + 1];
	struct fsafe_error e = { 0 };
	int r = -EEXIST;

	assert(ib);
	if (len > ib->max)
		return fail(ib, -EMSGSIZE, "deliver (above max_message)");
	if (!buf && len)
		return fail(ib, -EINVAL, "deliver (no buffer)");
	uint64_t seq = ib->seq++;
	/* An id collides only if 48 random bits do within one microsecond
	   of one process: retrying is for completeness. */
	for (int i = 0; i < 4 && r == -EEXIST; i++) {
		if ((r = make_id(ib, seq, id)) < 0)
			return fail(ib, r, "random");
		r = deliver_as(ib, id, seq, buf, len, &e);
	}
	if ((r == 0 || r == FSAFE_ENOTDURABLE) && id_out)
		memcpy(id_out, id, sizeof(id));
	/* The writer's own detail: its step, and for FSAFE_ENOTDURABLE the
	   sync's errno. */
	if (r < 0 && ib->error)
		*ib->error = e.step ? e : (struct fsafe_error){
			.code = r, .sys_errno = -r, .step = "deliver" };
	return r;
}

/* ---- consumers ------------------------------------------------------------ */

bool fsafe__inbox_valid_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > FSAFE_INBOX_NAME_MAX || name[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
		      ch == '-'))
			return false;
	}
	return true;
}

/*
 * A process consumer's directory is born whole: made as claimed/b-<token>,
 * given its owner record (durably), then renamed to claimed/p-<token>. So
 * every p- directory has a record and recovery never has to guess about
 * one; a b- directory holds no claim, ever.
 */
static int open_process_dir(fsafe_inbox_consumer *c)
{
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_lock_owner me;
	char rec[FSAFE__OWNER_MAX], tmp[DIR_MAX + 1];
	int r, n;

	if ((r = fsafe__owner_self(&me, false)) < 0)
		return r;
	snprintf(tmp, sizeof(tmp), "b-%s", me.token);
	snprintf(c->dir, sizeof(c->dir), "p-%s", me.token);
	if ((r = fsafe__mkdirat(c->ib->claimedfd, tmp, 0777)) < 0 ||
	    (c->fd = fsafe__open_subdir(c->ib->claimedfd, tmp)) < 0)
		return r < 0 ? r : c->fd;
	if ((n = fsafe__owner_format(&me, rec, sizeof(rec))) < 0)
		return n;
	wo.flags = FSAFE_CREATE_ONLY | FSAFE_NO_FOLLOW;
	if ((r = fsafe_write_fileat(c->fd, OWNER_NAME, rec, (size_t)n, &wo)) < 0 ||
	    (r = fsafe__renameat(c->ib->claimedfd, tmp, c->ib->claimedfd,
	                         c->dir)) < 0)
		return r;
	return fsafe__fsync(c->ib->claimedfd);
}

static int open_named_dir(fsafe_inbox_consumer *c, const char *name)
{
	int r;

	snprintf(c->dir, sizeof(c->dir), "n-%s", name);
	if ((r = ensure_dir(c->ib->claimedfd, c->dir)) < 0)
		return r;
	if (r == 1 && (r = fsafe__fsync(c->ib->claimedfd)) < 0)
		return r;
	c->fd = fsafe__open_subdir(c->ib->claimedfd, c->dir);
	return c->fd < 0 ? c->fd : 0;
}

static void free_names(fsafe_inbox_consumer *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	c->names = NULL;
	c->n = c->pos = 0;
}

static void consumer_free(fsafe_inbox_consumer *c)
{
	free_names(c);
	if (c->fd >= 0)
		fsafe__close(c->fd);
	if (c->ino >= 0)
		close(c->ino);
	free(c);
}

int fsafe_inbox_consumer_open(fsafe_inbox *ib, const char *name,
                              fsafe_inbox_consumer **out)
{
	assert(ib && out);
	*out = NULL;
	if (name && !fsafe__inbox_valid_name(name))
		return fail(ib, -EINVAL, "consumer name");
	fsafe_inbox_consumer *c = calloc(1, sizeof(*c));
	if (!c)
		return fail(ib, -ENOMEM, "allocate");
	c->ib = ib;
	c->fd = c->ino = -1;
	c->named = name != NULL;
	int r = name ? open_named_dir(c, name) : open_process_dir(c);
	if (r < 0) {
		/* A half-made process directory holds no claim; recovery
		   removes it. */
		consumer_free(c);
		return fail(ib, r, "consumer directory");
	}
	*out = c;
	return 0;
}

/* Is `name` in a claim directory a claim (not the record or a stage)? */
static bool is_claim(const char *name)
{
	return strcmp(name, OWNER_NAME) != 0 && !fsafe_is_staging_name(name);
}

/* Put one claim of a live consumer back into new/. If new/ already has
   it (an interrupted earlier move), the claim copy is the duplicate. */
static int put_back(fsafe_inbox *ib, int cfd, const char *name)
{
	int r = move_durably(cfd, name, ib->newfd, name);

	if (r == -EEXIST)
		r = fsafe__unlinkat(cfd, name, 0);
	return r;
}

/*
 * A dead consumer's claim. A link count above one means another name of
 * the message exists: new/ (a claim or release it did not finish), done/
 * (an ack it did not finish). Then only its name goes, once the other is
 * durable; else the message goes back.
 */
static int give_back_dead(fsafe_inbox *ib, int cfd, const char *name)
{
	struct stat st;
	int r = fsafe__fstatat(cfd, name, &st, AT_SYMLINK_NOFOLLOW);

	if (r < 0)
		return r;
	if (st.st_nlink <= 1)
		return put_back(ib, cfd, name);
	if ((r = fsafe__fsync(ib->newfd)) < 0 ||
	    (r = fsafe__fsync(ib->donefd)) < 0)
		return r;
	r = fsafe__unlinkat(cfd, name, 0);
	return r < 0 ? r : 1; /* dropped, not returned */
}

struct putback {
	fsafe_inbox *ib;
	int cfd;
	int moved;
	bool seen, dead;
};

static int put_back_one(int fd, const char *name, unsigned char type,
                        void *arg)
{
	struct putback *pb = arg;

	(void)fd, (void)type;
	if (!is_claim(name))
		return 0;
	int r = pb->dead ? give_back_dead(pb->ib, pb->cfd, name)
	                 : put_back(pb->ib, pb->cfd, name);
	if (r < 0 && r != -ENOENT)
		return r;
	pb->moved += r == 0;
	pb->seen = true;
	return 0;
}

/* Return every claim in directory cfd to new/; the count, or -errno.
   Entries move out while we read: list again until a pass finds none
   (getdents is no snapshot). */
static int return_all(fsafe_inbox *ib, int cfd, bool dead)
{
	struct putback pb = { .ib = ib, .cfd = cfd, .dead = dead };
	int r;

	do {
		pb.seen = false;
		if ((r = fsafe__dir_each(cfd, put_back_one, &pb)) < 0)
			return r;
	} while (pb.seen);
	if (pb.moved > 0 && (r = fsafe__fsync(ib->newfd)) < 0)
		return r;
	return (r = fsafe__fsync(cfd)) < 0 ? r : pb.moved;
}

int fsafe_inbox_release_all(fsafe_inbox_consumer *c)
{
	assert(c);
	return fail(c->ib, return_all(c->ib, c->fd, false), "return claims");
}

/*
 * Remove a dead or closed process consumer's directory, its claims already
 * returned. It is first renamed p- -> x-, so a crash in the middle never
 * leaves a p- directory without its record; an x- directory is garbage,
 * finished by the next recovery. Another recoverer may be doing
 * the same: what it already did is no error.
 */
static int retire(fsafe_inbox *ib, int cfd, const char *dir)
{
	char t[DIR_MAX + 1];
	int r;

	if (dir[0] == 'p') {
		snprintf(t, sizeof(t), "x%s", dir + 1);
		r = fsafe__renameat(ib->claimedfd, dir, ib->claimedfd, t);
		/* overlayfs (without redirect_dir) cannot rename a directory
		   of a lower layer: its claims are back in new/ already, so
		   it stays, empty, with its record, and every recovery finds
		   it dead and empty again. */
		if (r == -EXDEV)
			return 0;
		if (r < 0)
			return r == -ENOENT ? 0 : r;
		dir = t;
	}
	if ((r = fsafe_sweep(cfd, ".", 0, 0, NULL, NULL)) < 0)
		return r;
	if ((r = fsafe__unlinkat(cfd, OWNER_NAME, 0)) < 0 && r != -ENOENT)
		return r;
	r = fsafe__unlinkat(ib->claimedfd, dir, AT_REMOVEDIR);
	if (r == -ENOTEMPTY || r == -EEXIST)
		return 0; /* a racing recoverer still moving claims out */
	if (r < 0 && r != -ENOENT)
		return r;
	return fsafe__fsync(ib->claimedfd);
}

int fsafe_inbox_consumer_close(fsafe_inbox_consumer *c)
{
	int r = 0;

	if (!c)
		return 0;
	fsafe_inbox *ib = c->ib;
	const char *step = "return claims";
	if (!c->named) {
		r = return_all(c->ib, c->fd, false);
		if (r >= 0)
			r = retire(c->ib, c->fd, c->dir), step = "retire";
	}
	consumer_free(c);
	return r < 0 ? fail(ib, r, step) : 0;
}

unsigned fsafe_inbox_quarantined(const fsafe_inbox_consumer *c)
{
	assert(c);
	return c->quarantined;
}

/* ---- listing ------------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct listing {
	fsafe_inbox_consumer *c;
	size_t cap;
};

static int list_one(int fd, const char *name, unsigned char type, void *arg)
{
	struct listing *l = arg;

	(void)fd, (void)type;
	return fsafe_is_staging_name(name)
	               ? 0 : fsafe__strv_push(&l->c->names, &l->c->n, &l->cap,
	                                      name);
}

/* One pass over new/: every name but the writer's stages, sorted, so ids
   come out oldest first (foreign names too: they get quarantined). */
static int relist(fsafe_inbox_consumer *c)
{
	struct listing l = { .c = c };
	int r;

	free_names(c);
	if ((r = fsafe__dir_each(c->ib->newfd, list_one, &l)) < 0)
		return r;
	if (c->n > 1)
		qsort(c->names, c->n, sizeof(*c->names), cmp_names);
	return 0;
}

/* ---- take ---------------------------------------------------------------- */

/* Move a non-message aside, with a reason beside it. */
int fsafe__inbox_quarantine(int quarfd, int srcfd, const char *name,
                            const char *why, char *dest_out)
{
	char dest[NAME_MAX + 1];

	return fsafe__quarantine_link(srcfd, name, quarfd, why,
	                              dest_out ? dest_out : dest, sizeof(dest));
}

static int quarantine(fsafe_inbox_consumer *c, const char *name,
                      const char *why)
{
	int r = fsafe__inbox_quarantine(c->ib->quarfd, c->fd, name, why,
	                                NULL);

	c->quarantined += r == 0;
	return r;
}

/* Read exactly len bytes at off; -EBADMSG when the file is shorter. */
static int read_exact(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = fsafe__pread_full(fd, buf, len, off);

	return n < 0 ? (int)n : (size_t)n < len ? -EBADMSG : 0;
}

const char *fsafe__inbox_type_name(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFLNK: return "symbolic link";
	case S_IFDIR: return "directory";
	case S_IFIFO: return "FIFO";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "character device";
	case S_IFBLK: return "block device";
	default: return "regular file";
	}
}

/* The verdict on an open regular file (see fsafe__inbox_verify). */
static int verify_fd(int fd, const struct stat *st, const char *name,
                     uint64_t max, const char **why, uint8_t **data,
                     struct fsafe__inbox_hdr *h)
{
	uint8_t hdr[FSAFE__INBOX_HDR];
	int r;

	if ((uint64_t)st->st_size >= FSAFE__INBOX_HDR &&
	    (r = read_exact(fd, hdr, sizeof(hdr), 0)) < 0)
		return r == -EBADMSG ? (*why = "truncated header", 0) : r;
	if ((*why = fsafe__inbox_check_header(hdr, (uint64_t)st->st_size,
	                                      max, name, h)))
		return 0;
	if (!(*data = malloc(h->len ? (size_t)h->len : 1)))
		return -ENOMEM;
	if ((r = read_exact(fd, *data, (size_t)h->len, FSAFE__INBOX_HDR)) < 0)
		return r == -EBADMSG ? (*why = "truncated payload", 0) : r;
	*why = fsafe__inbox_check_payload(h, *data);
	return 0;
}

int fsafe__inbox_verify(int dirfd, const char *name, uint64_t max,
                        const char **why, uint8_t **data, size_t *len,
                        uint64_t *seq)
{
	struct fsafe__inbox_hdr h = { 0 };
	uint8_t *buf = NULL;
	struct stat st;
	int r = 0, fd;

	*why = NULL;
	if (!fsafe__inbox_valid_id(name)) {
		*why = "foreign name (not an inbox message id)";
		return 0;
	}
	/* Never follow a link, never block on a FIFO: the type is judged
	   on what the name itself is. */
	fd = fsafe__open_regular(dirfd, name, O_RDONLY, &st);
	if (fd == -ELOOP || fd == -EISDIR || fd == -EBADFD || fd == -ENXIO ||
	    fd == -ENOTDIR) {
		if (fsafe__fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			st.st_mode = S_IFLNK;
		*why = S_ISLNK(st.st_mode) ? "a symbolic link" :
		       S_ISDIR(st.st_mode) ? "not a regular file (directory)" :
		       S_ISFIFO(st.st_mode) ? "not a regular file (FIFO)" :
		       S_ISSOCK(st.st_mode) ? "not a regular file (socket)" :
		                              "not a regular file (device)";
		return 0;
	}
	if (fd < 0)
		return fd;
	r = verify_fd(fd, &st, name, max, why, &buf, &h);
	fsafe__close(fd);
	if (r == 0 && !*why && data) {
		*data = buf;
		*len = (size_t)h.len;
		*seq = h.seq;
		return 0;
	}
	free(buf);
	return r;
}

/* Having won `name`: a message in *out, or quarantine it (1: try the
   next), or on an error give it back and fail. */
static int examine(fsafe_inbox_consumer *c, const char *name,
                   fsafe_inbox_msg **out)
{
	fsafe_inbox_msg *m = calloc(1, sizeof(*m));
	char why[128];
	const char *w = NULL;
	int r;

	if (!m)
		return -ENOMEM;
	r = fsafe__inbox_verify(c->fd, name, c->ib->max, &w, &m->data,
	                        &m->len, &m->seq);
	if (r == 0 && !w) {
		memcpy(m->id, name, FSAFE_INBOX_ID_LEN + 1);
		snprintf(m->path, sizeof(m->path), "claimed/%s/%s", c->dir,
		         name);
		*out = m;
		return 0;
	}
	fsafe_inbox_msg_free(m);
	if (r < 0) {
		/* Not the message's fault: let someone try again. */
		put_back(c->ib, c->fd, name);
		return r;
	}
	snprintf(why, sizeof(why), "%s\n", w);
	return (r = quarantine(c, name, why)) < 0 ? r : 1;
}

/*
 * Claim new/<name>: one rename into our directory, which exactly one
 * consumer wins (the others get ENOENT), then a sync of our directory so
 * a returned claim is durable.
 *
 * Known limit: a power cut may keep a rename's two halves apart on a
 * filesystem that does not journal a rename as one transaction (ext4, xfs
 * and btrfs do); the abstract model in tests/power allows that and then
 * loses the message. A link+unlink claim survives the model but needs
 * losers' links cleaned up across consumers, and the version tried lost
 * a live consumer's claim under the stress test; it is not used.
 */
static int claim(fsafe_inbox_consumer *c, const char *name)
{
	int r = fsafe__renameat(c->ib->newfd, name, c->fd, name);

	return r < 0 ? r : fsafe__fsync(c->fd);
}

static int take(fsafe_inbox_consumer *c, fsafe_inbox_msg **out,
                const char **step)
{
	bool fresh = false;
	int r;

	for (;;) {
		*step = "take (nothing to take)";
		if (c->pos == c->n) {
			/* A fresh pass that found nothing to win ends it. */
			if (fresh && c->n == 0)
				return -EAGAIN;
			*step = "list new/";
			if ((r = relist(c)) < 0)
				return r;
			*step = "take (nothing to take)";
			if (fresh && c->n == 0)
				return -EAGAIN;
			fresh = true;
			if (c->n == 0)
				return -EAGAIN;
			continue;
		}
		const char *name = c->names[c->pos++];
		*step = "claim";
		r = claim(c, name);
		if (r == -ENOENT)
			continue; /* another consumer won it */
		if (r < 0)
			return r;
		*step = "read message";
		if ((r = examine(c, name, out)) <= 0)
			return r;
	}
}

int fsafe_inbox_take(fsafe_inbox_consumer *c, fsafe_inbox_msg **out)
{
	const char *step;

	assert(c && out);
	*out = NULL;
	int r = take(c, out, &step);
	return fail(c->ib, r, step);
}

/* ---- ack / release -------------------------------------------------------- */

static bool valid_ref(const char *id)
{
	return id && *id && !strchr(id, '/') && strcmp(id, ".") != 0 &&
	       strcmp(id, "..") != 0 && is_claim(id);
}

int fsafe_inbox_ack(fsafe_inbox_consumer *c, const char *id)
{
	assert(c);
	fsafe_inbox *ib = c->ib;
	struct stat st;
	int r;

	if (!valid_ref(id))
		return fail(ib, -EINVAL, "message id");
	if ((r = fsafe__fstatat(c->fd, id, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		return fail(ib, r, "stat claim");
	/* The claim's removal from new/ must be durable before the message
	   goes, or a power cut could bring an acked message back. Where a
	   rename is journaled whole (ext3, ext4, xfs), the claim's sync of
	   our directory made it so; elsewhere (btrfs logs only the directory
	   it syncs; ext2) new/ is synced here. */
	if (!ib->renames_whole && (r = fsafe__fsync(ib->newfd)) < 0)
		return fail(ib, r, "fsync new/");
	if (ib->flags & FSAFE_INBOX_KEEP_DONE) {
		r = move_durably(c->fd, id, ib->donefd, id);
		if (r == -EEXIST) /* an earlier ack that was interrupted */
			r = fsafe__unlinkat(c->fd, id, 0);
	} else {
		r = fsafe__unlinkat(c->fd, id, 0);
	}
	if (r < 0)
		return fail(ib, r, ib->flags & FSAFE_INBOX_KEEP_DONE
		                           ? "move to done/" : "unlink claim");
	return fail(ib, fsafe__fsync(c->fd), "fsync claim directory");
}

int fsafe_inbox_release(fsafe_inbox_consumer *c, const char *id)
{
	int r;

	assert(c);
	if (!valid_ref(id))
		return fail(c->ib, -EINVAL, "message id");
	if ((r = put_back(c->ib, c->fd, id)) < 0)
		return fail(c->ib, r, "return to new/");
	if ((r = fsafe__fsync(c->ib->newfd)) < 0)
		return fail(c->ib, r, "fsync new/");
	return fail(c->ib, fsafe__fsync(c->fd), "fsync claim directory");
}

/* ---- message accessors ----------------------------------------------------- */

const char *fsafe_inbox_msg_id(const fsafe_inbox_msg *m)
{
	assert(m);
	return m->id;
}

const char *fsafe_inbox_msg_path(const fsafe_inbox_msg *m)
{
	assert(m);
	return m->path;
}

const void *fsafe_inbox_msg_data(const fsafe_inbox_msg *m)
{
	assert(m);
	return m->data;
}

size_t fsafe_inbox_msg_len(const fsafe_inbox_msg *m)
{
	assert(m);
	return m->len;
}

uint64_t fsafe_inbox_msg_seq(const fsafe_inbox_msg *m)
{
	assert(m);
	return m->seq;
}

void fsafe_inbox_msg_free(fsafe_inbox_msg *m)
{
	if (!m)
		return;
	free(m->data);
	free(m);
}

/* ---- wait ------------------------------------------------------------------ */

static int found_one(int fd, const char *name, unsigned char type, void *arg)
{
	(void)fd, (void)type, (void)arg;
	return !fsafe_is_staging_name(name);
}

/* Does new/ hold anything but stages? 1, 0 or -errno. */
static int anything_new(fsafe_inbox *ib)
{
	return fsafe__dir_each(ib->newfd, found_one, NULL);
}

/* inotify on new/, as a wake-up hint only: failing to set it up just
   means polling. It is not a filesystem operation, so it bypasses the
   system-call table (like the async engine's eventfd). */
static void watch(fsafe_inbox_consumer *c)
{
	char path[64];

	if (c->ino_tried || (c->ib->flags & FSAFE_INBOX_NO_INOTIFY))
		return;
	c->ino_tried = true;
	if ((c->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", c->ib->newfd);
	if (inotify_add_watch(c->ino, path,
	                      IN_MOVED_TO | IN_CREATE | IN_ONLYDIR) < 0) {
		close(c->ino);
		c->ino = -1;
	}
}

static void drain(int fd)
{
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

int fsafe_inbox_wait(fsafe_inbox_consumer *c, uint64_t timeout_ms)
{
	uint64_t start = fsafe__mono_ms();
	uint64_t slice = 1;
	int r;

	assert(c);
	/* Watch before looking, so a delivery between the look and the
	   sleep still wakes us. */
	watch(c);
	for (;;) {
		if ((r = anything_new(c->ib)) != 0)
			return r < 0 ? fail(c->ib, r, "list new/") : 0;
		/* A timeout of 0 looks once and never sleeps. */
		uint64_t spent = fsafe__mono_ms() - start;
		if (timeout_ms != FSAFE_FOREVER && spent >= timeout_ms)
			return fail(c->ib, -ETIMEDOUT, "wait (timed out)");
		uint64_t left = timeout_ms == FSAFE_FOREVER
		                        ? UINT64_MAX : timeout_ms - spent;
		/* With inotify the slice only bounds a missed event (network
		   filesystems send none); without it, backoff to 200 ms. */
		uint64_t cap = c->ino >= 0 ? 1000 : 200;
		uint64_t s = slice < left ? slice : left;
		if (poll(&(struct pollfd){ .fd = c->ino, .events = POLLIN },
		         c->ino >= 0 ? 1 : 0, (int)s) > 0)
			drain(c->ino);
		slice = slice * 2 > cap ? cap : slice * 2;
	}
}

/* ---- recovery --------------------------------------------------------------- */

/* A process consumer's directory: return its claims if it is dead. */
static int recover_one(fsafe_inbox *ib, const char *dir,
                       const struct fsafe_lock_owner *self,
                       struct fsafe_inbox_recovery *rep)
{
	char buf[FSAFE__OWNER_MAX + 1];
	struct fsafe_lock_owner o;
	int cfd = fsafe__open_subdir(ib->claimedfd, dir);
	int r, fd;

	/* Not a directory, or a link: damage for check and repair to
	   report; never followed. */
	if (cfd < 0)
		return cfd == -ENOENT || cfd == -ENOTDIR || cfd == -ELOOP
		               ? 0 : cfd;
	if (dir[0] == 'x') {
		/* Retired by someone who died before finishing. */
		r = return_all(ib, cfd, true);
		r = r < 0 ? r : retire(ib, cfd, dir);
		fsafe__close(cfd);
		return r;
	}
	fd = fsafe__open_regular(cfd, OWNER_NAME, O_RDONLY, NULL);
	if (fd == -ENOENT && dir[0] == 'b') {
		/* A consumer being born, or one that died before its record
		   was whole. It holds no claim, so age may judge it. */
		struct stat st;
		if (fsafe__fstat(cfd, &st) == 0 &&
		    fsafe__now_ms() - (int64_t)st.st_mtime * 1000 > BIRTH_GRACE_MS)
			retire(ib, cfd, dir); /* best effort: litter only */
		fsafe__close(cfd);
		return 0;
	}
	ssize_t n = fd < 0 ? fd : fsafe__owner_read_raw(fd, buf);
	if (fd >= 0)
		fsafe__close(fd);
	if (n < 0 || fsafe__owner_parse(buf, (size_t)n, &o) < 0 ||
	    fsafe__owner_judge(&o, self) != FSAFE_OWNER_DEAD) {
		rep->unjudged++;
		fsafe__close(cfd);
		return 0;
	}
	r = return_all(ib, cfd, true);
	if (r >= 0) {
		rep->returned += (unsigned)r;
		r = retire(ib, cfd, dir);
		rep->consumers += r == 0 && dir[0] == 'p';
	}
	fsafe__close(cfd);
	return r < 0 ? r : 0;
}

int fsafe__inbox_return_claims(fsafe_inbox *ib, const char *dir)
{
	int cfd = fsafe__open_subdir(ib->claimedfd, dir);
	int r, n;

	if (cfd < 0)
		return cfd;
	n = r = return_all(ib, cfd, true);
	if (r >= 0)
		r = retire(ib, cfd, dir);
	fsafe__close(cfd);
	return r < 0 ? r : n;
}

struct recovery {
	fsafe_inbox *ib;
	struct fsafe_inbox_recovery rep;
};

static int recover_entry(int fd, const char *name, unsigned char type,
                         void *arg)
{
	struct recovery *rc = arg;
	char dir[DIR_MAX + 1];

	(void)fd, (void)type;
	/* Named consumers are never judged. */
	if (!strchr("pbx", name[0]) || name[1] != '-' || strlen(name) > DIR_MAX)
		return 0;
	snprintf(dir, sizeof(dir), "%s", name);
	return recover_one(rc->ib, dir, &rc->ib->self, &rc->rep);
}

int fsafe_inbox_recover(fsafe_inbox *ib, uint64_t stage_age_ms,
                        struct fsafe_inbox_recovery *out)
{
	struct recovery rc = { .ib = ib, .rep = { .size = sizeof(rc.rep) } };
	const char *step = "sweep new/";
	int r;

	assert(ib);
	/* An out struct we cannot fill is refused before anything moves. */
	if (out && (r = FSAFE__OPTS_COPY_OUT(out, &rc.rep,
	                                     FSAFE_INBOX_RECOVERY_SIZE_V0)) < 0)
		return fail(ib, r, "recovery (size)");
	r = fsafe_sweep(ib->newfd, ".", stage_age_ms, 0, NULL, NULL);
	if (r >= 0) {
		rc.rep.swept = (unsigned)r;
		r = fsafe__dir_each(ib->claimedfd, recover_entry, &rc),
		step = "recover claims";
	}
	if (out)
		FSAFE__OPTS_COPY_OUT(out, &rc.rep, FSAFE_INBOX_RECOVERY_SIZE_V0);
	return r < 0 ? fail(ib, r, step) : 0;
}
