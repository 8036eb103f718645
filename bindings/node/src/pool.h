/*
 * A call of libfsafe on libuv's thread pool, settled as a promise: the
 * shape of every handle operation that may wait on the disk or a lock.
 */
#ifndef FSAFE_NODE_POOL_H
#define FSAFE_NODE_POOL_H

#include "addon.h"

struct pool_call {
	/* On a pool thread: the libfsafe call; its result. */
	int (*run)(struct pool_call *c);
	/* On the loop thread after a result >= 0: the value to resolve
	   with (NULL: undefined). */
	napi_value (*value)(napi_env env, struct pool_call *c);
	/* Frees what the call owns, `c` included (NULL: free(c)). */
	void (*release)(struct pool_call *c);
	struct fsafe_error *error; /* the failure's detail, may be NULL */
	int rc;
	/* set by pool_queue */
	napi_async_work work;
	napi_deferred deferred;
	napi_ref keep;             /* kept alive while the call runs */
};

/* A zeroed call of `size` bytes (a struct that starts with struct
   pool_call) with its run, value and release set; NULL with an exception
   pending. */
void *pool_call_new(napi_env env, size_t size,
                    int (*run)(struct pool_call *c),
                    napi_value (*value)(napi_env env, struct pool_call *c),
                    void (*release)(struct pool_call *c));

/* The most arguments an open takes. */
#define POOL_OPEN_ARGS 5

/*
 * A module's half of an open: its call opening a new handle at `path`
 * (which the call then owns, or this frees on failure) with `flags`
 * (argv[1]) and any further arguments in argv; NULL with an exception
 * pending.
 */
typedef struct pool_call *pool_open_fn(napi_env env, char *path,
                                       uint32_t flags, const napi_value *argv);

/* xOpen(path, flags, ...) of `argc` arguments: the call `open` makes,
   queued as `name`. The promise, or NULL with an exception pending. */
napi_value pool_open(napi_env env, napi_callback_info info, size_t argc,
                     const char *name, pool_open_fn *open);

/* Queue `c`, keeping `keep` (a handle, a buffer; may be NULL) alive until
   it settles. The promise, or NULL with an exception pending (`c` is
   released then). */
napi_value pool_queue(napi_env env, const char *name, struct pool_call *c,
                      napi_value keep);

/* The pointer inside an external, or NULL with an exception pending. */
void *pool_external(napi_env env, napi_value v);

#endif
