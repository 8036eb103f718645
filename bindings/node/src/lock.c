/*
 * Lock: fsafe_lock_acquire on libuv's thread pool (it may wait for the
 * holder up to its timeout) and release there too (it removes a file).
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

struct lock_handle {
	fsafe_lock *lock;    /* NULL once released */
	struct fsafe_error error;
};

struct lock_call {
	struct pool_call call;
	struct lock_handle *h;
	char *path;
	struct fsafe_lock_opts opts;
};

/* A lock the program dropped unreleased: released when collected, as
   the process's exit would free it. */
static void finalize_lock(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct lock_handle *h = data;
	fsafe_lock_release(h->lock);
	free(h);
}

static int run_acquire(struct pool_call *c)
{
	struct lock_call *lc = (struct lock_call *)c;
	return fsafe_lock_acquire(AT_FDCWD, lc->path, &lc->opts, &lc->h->lock);
}

static napi_value acquired(napi_env env, struct pool_call *c)
{
	struct lock_call *lc = (struct lock_call *)c;
	napi_value v;
	if (napi_create_external(env, lc->h, finalize_lock, NULL, &v) != napi_ok)
		return NULL;
	lc->h = NULL; /* the external owns it now */
	return v;
}

static void release_acquire(struct pool_call *c)
{
	struct lock_call *lc = (struct lock_call *)c;
	if (lc->h) /* failed, or the external could not be made */
		finalize_lock(NULL, lc->h, NULL);
	free(lc->path);
	free(lc);
}

/* lockAcquire(path, flags, timeoutMs) -> Promise<handle>. */
static napi_value lock_acquire(napi_env env, napi_callback_info info)
{
	napi_value argv[3];
	uint32_t flags;
	double timeout;
	NAPI_OK(fsafe_node_args(env, info, 3, argv));
	NAPI_OK(napi_get_value_uint32(env, argv[1], &flags));
	NAPI_OK(napi_get_value_double(env, argv[2], &timeout));
	struct lock_call *lc = pool_call_new(env, sizeof *lc, run_acquire,
	                                     acquired, release_acquire);
	if (!lc)
		return NULL;
	if (!(lc->h = calloc(1, sizeof *lc->h))) {
		free(lc);
		napi_throw_error(env, "ENOMEM", "out of memory");
		return NULL;
	}
	lc->call.error = &lc->h->error;
	lc->opts = (struct fsafe_lock_opts)FSAFE_LOCK_OPTS_INIT;
	lc->opts.flags = flags;
	lc->opts.timeout_ms = timeout <= 0 ? 0 : (uint64_t)timeout;
	lc->opts.error = &lc->h->error;
	if (!(lc->path = fsafe_node_string(env, argv[0]))) {
		release_acquire(&lc->call);
		return NULL;
	}
	return pool_queue(env, "fsafe.Lock.acquire", &lc->call, NULL);
}

struct release_call {
	struct pool_call call;
	fsafe_lock *lock;
	struct fsafe_error error;
};

static int run_release(struct pool_call *c)
{
	return fsafe_lock_release(((struct release_call *)c)->lock);
}

/* lockRelease(handle) -> Promise; a released handle resolves at once. */
static napi_value lock_release(napi_env env, napi_callback_info info)
{
	napi_value argv[1];
	NAPI_OK(fsafe_node_args(env, info, 1, argv));
	struct lock_handle *h = pool_external(env, argv[0]);
	if (!h)
		return NULL;
	struct release_call *rc = pool_call_new(env, sizeof *rc, run_release,
	                                        NULL, NULL);
	if (!rc)
		return NULL;
	/* the handle's error pointer is the one the lock kept */
	rc->call.error = &h->error;
	rc->lock = h->lock;
	h->lock = NULL;
	return pool_queue(env, "fsafe.Lock.release", &rc->call, argv[0]);
}

/* lockBroken(handle) -> number of dead locks this acquisition broke. */
static napi_value lock_broken(napi_env env, napi_callback_info info)
{
	napi_value out;
	struct lock_handle *h = fsafe_node_external_arg(env, info);
	if (!h)
		return NULL;
	NAPI_OK(napi_create_uint32(env, h->lock ? fsafe_lock_broken(h->lock) : 0,
	                           &out));
	return out;
}

const struct fsafe_node_fn fsafe_node_lock[] = {
	{"lockAcquire", lock_acquire},
	{"lockRelease", lock_release},
	{"lockBroken", lock_broken},
	{NULL, NULL},
};
