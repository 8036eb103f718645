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
	struct pool_call *c = calloc(1, size);
	if (!c) {
		napi_throw_error(env, "ENOMEM", "out of memory");
		return NULL;
	}
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

void *pool_external(napi_env env, napi_value v)
{
	void *p = NULL;
	if (napi_get_value_external(env, v, &p) != napi_ok)
		return NULL;
	return p;
}
