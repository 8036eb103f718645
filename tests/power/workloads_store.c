/*
 * The keyed state store's power-loss workloads (issue 7): put (replace,
 * new key, named stage), delete and update of key A in store/, with B
 * beside it. After any cut each key holds its old or its new record (a
 * delete: OLD or nothing), whole and valid; a change that returned 0
 * survives; B is untouched; the next opener takes the dead process's
 * lock at once.
 */
#define _GNU_SOURCE
#include "power.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsafe.h"
#include "sys.h"

static const char *const store_dirs[] = { ".", "store", "store/.lock",
	                                  NULL };
/* The store, its keys A, B, C ("k-" + hex), its lock's directory and
   the lock file (no other file: the lock is a kernel lock on it). */
static const char *const store_known[] = { "store", "k-41", "k-42", "k-43",
	                                   ".lock", "lock", NULL };

static fsafe_store *open_store(int root, unsigned flags, unsigned wflags)
{
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s = NULL;

	o.flags = flags;
	o.write_flags = wflags;
	return fsafe_store_open(root, "store", &o, &s) == 0 ? s : NULL;
}

/* OLD state: A and B hold OLD (made durable by the harness). */
static void store_old(int root)
{
	fsafe_store *s = open_store(root, FSAFE_STORE_CREATE, FSAFE_NO_SYNC);

	if (!s || fsafe_store_put(s, "A", 1, pw_old, PW_OLD_LEN, NULL) < 0 ||
	    fsafe_store_put(s, "B", 1, pw_old, PW_OLD_LEN, NULL) < 0)
		abort();
	fsafe_store_close(s);
}

/* Op 0 opens the store, op 1 is the change. */
static void run_with(int root, struct pw_progress *p, unsigned wflags,
                     int (*change)(fsafe_store *s))
{
	fsafe_store *s = open_store(root, 0, wflags);

	pw_returned(p, 0, s ? 0 : -1);
	if (!s)
		return;
	pw_returned(p, 1, change(s));
	fsafe_store_close(s);
}

static int put_a(fsafe_store *s)
{
	return fsafe_store_put(s, "A", 1, pw_new, PW_NEW_LEN, NULL);
}

static int put_c(fsafe_store *s)
{
	return fsafe_store_put(s, "C", 1, pw_new, PW_NEW_LEN, NULL);
}

static int delete_a(fsafe_store *s)
{
	return fsafe_store_delete(s, "A", 1);
}

static int to_new(const void *old, size_t len, const void **nb,
                  size_t *nl, void *arg)
{
	(void)arg;
	if (!old || len != PW_OLD_LEN || memcmp(old, pw_old, len))
		return -EPROTO;
	*nb = pw_new;
	*nl = PW_NEW_LEN;
	return FSAFE_STORE_WRITE;
}

static int update_a(fsafe_store *s)
{
	return fsafe_store_update(s, "A", 1, to_new, NULL, NULL);
}

static void run_put(int root, struct pw_progress *p)
{
	run_with(root, p, 0, put_a);
}

static void run_put_named(int root, struct pw_progress *p)
{
	run_with(root, p, FSAFE_NO_TMPFILE, put_a);
}

static void run_put_new(int root, struct pw_progress *p)
{
	run_with(root, p, 0, put_c);
}

static void run_delete(int root, struct pw_progress *p)
{
	run_with(root, p, 0, delete_a);
}

static void run_update(int root, struct pw_progress *p)
{
	run_with(root, p, 0, update_a);
}

static int keep(const void *old, size_t len, const void **nb, size_t *nl,
                void *arg)
{
	(void)old, (void)len, (void)nb, (void)nl, (void)arg;
	return FSAFE_STORE_KEEP;
}

/* The sweep, then the next change of the store: its lock must be taken
   at once (the holder died at the cut, and its kernel lock with it). */
static const char *store_recover(const struct pw_workload *w, int root,
                                 char *buf, size_t len)
{
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s;
	const char *bad = pw_sweep_all(w, root, buf, len);

	if (bad)
		return bad;
	o.flags = FSAFE_STORE_NO_SWEEP;
	o.lock_timeout_ms = 1;
	int r = fsafe_store_open(root, "store", &o, &s);
	if (r == 0) {
		r = fsafe_store_update(s, "probe", 5, keep, NULL, NULL);
		fsafe_store_close(s);
	}
	if (r < 0) {
		snprintf(buf, len, "the store's lock after the cut: %s",
		         fsafe_strerror(r));
		return buf;
	}
	return NULL;
}

enum want { W_OLD = 1, W_NEW = 2, W_ABSENT = 4 };

/* Key holds one of `allowed`, whole and valid. */
static const char *expect_key(fsafe_store *s, const char *key, unsigned allowed,
                              char *buf, size_t len)
{
	void *v = NULL;
	size_t n = 0;
	int r = fsafe_store_get(s, key, 1, &v, &n, NULL);
	unsigned got = r == -ENOENT ? W_ABSENT
	               : r < 0      ? 0
	               : n == PW_OLD_LEN && !memcmp(v, pw_old, n) ? W_OLD
	               : n == PW_NEW_LEN && !memcmp(v, pw_new, n) ? W_NEW
	                                                          : 0;
	free(v);
	if (got & allowed)
		return NULL;
	snprintf(buf, len, "key %s: %s (allowed:%s%s%s)", key,
	         r < 0 && r != -ENOENT ? fsafe_strerror(r)
	         : got == W_ABSENT     ? "absent"
	         : got == W_OLD        ? "OLD"
	         : got == W_NEW        ? "NEW"
	                               : "other bytes",
	         allowed & W_OLD ? " OLD" : "", allowed & W_NEW ? " NEW" : "",
	         allowed & W_ABSENT ? " absent" : "");
	return buf;
}

/* key holds `before` or `after`; `after` once op 1 returned 0; B is OLD. */
static const char *check_key(int root, const struct pw_progress *p,
                             const char *key, unsigned before,
                             unsigned after, char *buf, size_t len)
{
	fsafe_store *s = open_store(root, FSAFE_STORE_NO_SWEEP, 0);

	if (!s) {
		snprintf(buf, len, "the store cannot be opened");
		return buf;
	}
	unsigned allowed = pw_done(p, 1, 0) ? after : before | after;
	const char *bad = expect_key(s, key, allowed, buf, len);
	if (!bad)
		bad = expect_key(s, "B", W_OLD, buf, len);
	fsafe_store_close(s);
	return bad;
}

static const char *check_put(int root, const struct pw_progress *p,
                             char *buf, size_t len)
{
	return check_key(root, p, "A", W_OLD, W_NEW, buf, len);
}

static const char *check_put_new(int root, const struct pw_progress *p,
                                 char *buf, size_t len)
{
	const char *bad = check_key(root, p, "C", W_ABSENT, W_NEW, buf, len);

	return bad ? bad : check_key(root, p, "A", W_OLD, W_OLD, buf, len);
}

static const char *check_delete(int root, const struct pw_progress *p,
                                char *buf, size_t len)
{
	return check_key(root, p, "A", W_OLD, W_ABSENT, buf, len);
}

#define STORE_PUBLISHES (FSAFE__BREAK_DIR_SYNC | FSAFE__BREAK_DATA_SYNC)

const struct pw_workload pw_store_workloads[] = {
	{ .name = "store put (replace)", .dirs = store_dirs,
	  .known = store_known,
	  .catches = STORE_PUBLISHES, .setup_old = store_old,
	  .run = run_put, .recover = store_recover, .check = check_put },
	{ .name = "store put (replace, named stage)", .dirs = store_dirs,
	  .known = store_known,
	  .catches = STORE_PUBLISHES, .setup_old = store_old,
	  .run = run_put_named, .recover = store_recover,
	  .check = check_put },
	{ .name = "store put (new key)", .dirs = store_dirs,
	  .known = store_known,
	  .catches = STORE_PUBLISHES, .setup_old = store_old,
	  .run = run_put_new, .recover = store_recover,
	  .check = check_put_new },
	{ .name = "store delete", .dirs = store_dirs, .known = store_known,
 .setup_old = store_old,
	  .run = run_delete, .recover = store_recover,
	  .check = check_delete },
	{ .name = "store update", .dirs = store_dirs, .known = store_known,
 .catches = STORE_PUBLISHES,
	  .setup_old = store_old, .run = run_update,
	  .recover = store_recover, .check = check_put },
};
const size_t pw_store_nworkloads =
	sizeof(pw_store_workloads) / sizeof(pw_store_workloads[0]);
