/* libfsafe calls on libuv's thread pool, settled as promises. */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>

static void release(struct pool_call *c)
{
	if (c->release)
		c->release(c);
	else
		free(c);
}

static void run(napi_env env, void *data)
{
	(void)env;
	struct pool_call *c = data;
	c->rc = c->run(c);
}

static void done(napi_env env, napi_status status, void *data)
{
	struct pool_call *c = data;
	napi_value v = NULL;
	if (status == napi_cancelled)
		c->rc = -ECANCELED;
	if (c->rc < 0) {
		v = fsafe_node_result(env, c->rc, c->error);
		if (!v)
			napi_get_undefined(env, &v);
		napi_reject_deferred(env, c->deferred, v);
	} else {
		if (c->value)
			v = c->value(env, c);
		if (!v)
			napi_get_undefined(env, &v);
		napi_resolve_deferred(env, c->deferred, v);
	}
	if (c->keep)
		napi_delete_reference(env, c->keep);
	napi_delete_async_work(env, c->work);
	release(c);
}

void *pool_call_new(napi_env env, size_t size,
                    int (*run)(struct pool_call *c),
                    napi_value (*value)(napi_env env, struct pool_call *c),
                    void (*release)(struct pool_call *c))
{
	struct pool_call *c = fsafe_node_alloc(env, size);
	if (!c)
		return NULL;
	c->run = run;
	c->value = value;
	c->release = release;
	return c;
}

napi_value pool_queue(napi_env env, const char *name, struct pool_call *c,
                      napi_value keep)
{
	napi_value promise, n;
	if ((keep && napi_create_reference(env, keep, 1, &c->keep) != napi_ok) ||
	    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &n) != napi_ok ||
	    napi_create_async_work(env, NULL, n, run, done, c, &c->work) != napi_ok) {
		if (c->keep)
			napi_delete_reference(env, c->keep);
		release(c);
		return NULL;
	}
	if (napi_create_promise(env, &c->deferred, &promise) != napi_ok ||
	    napi_queue_async_work(env, c->work) != napi_ok) {
		napi_delete_async_work(env, c->work);
		if (c->keep)
			napi_delete_reference(env, c->keep);
		release(c);
		return NULL;
	}
	return promise;
}

napi_value pool_open(napi_env env, napi_callback_info info, size_t argc,
                     const char *name, pool_open_fn *open)
{
	napi_value argv[POOL_OPEN_ARGS];
	uint32_t flags;
	if (argc > POOL_OPEN_ARGS) { /* a binding bug */
		napi_throw_range_error(env, NULL, "too many open arguments");
		return NULL;
	}
	NAPI_OK(fsafe_node_args(env, info, argc, argv));
	NAPI_OK(napi_get_value_uint32(env, argv[1], &flags));
	char *path = fsafe_node_string(env, argv[0]);
	if (!path)
		return NULL;
	struct pool_call *c = open(env, path, flags, argv);
	return c ? pool_queue(env, name, c, NULL) : NULL;
}

void *pool_external(napi_env env, napi_value v)
{
	void *p = NULL;
	if (napi_get_value_external(env, v, &p) != napi_ok)
		return NULL;
	return p;
}
