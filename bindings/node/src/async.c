/*
 * writeFileAtomic's engine: fsafe's async queue (one per Node
 * environment), whose completion descriptor the event loop watches with a
 * uv_poll_t. Writes submitted while earlier ones are in flight are
 * group-committed by the queue; the loop thread only copies the bytes in
 * and settles promises, it never waits on the disk.
 */
#include "addon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

struct engine {
	napi_env env;
	fsafe_async *queue;
	uv_poll_t poll;
	size_t pending;      /* submitted, not yet settled */
	napi_ref resource;   /* the async context's resource object */
	napi_async_context context;
};

struct request {
	napi_deferred deferred;
	void *bytes;         /* our copy: the caller may change its buffer */
	struct fsafe_error error;
};

static void settle(struct engine *e, const struct fsafe_async_completion *c)
{
	struct request *r = c->user;
	napi_value v = NULL;
	if (c->result == 0) {
		napi_get_undefined(e->env, &v);
		napi_resolve_deferred(e->env, r->deferred, v);
	} else {
		v = fsafe_node_result(e->env, c->result, &r->error);
		if (!v) /* a pending exception: reject with something */
			napi_get_undefined(e->env, &v);
		napi_reject_deferred(e->env, r->deferred, v);
	}
	free(r->bytes);
	free(r);
	e->pending--;
}

static void on_completions(uv_poll_t *poll, int status, int events)
{
	(void)status;
	(void)events;
	struct engine *e = poll->data;
	napi_handle_scope hs;
	napi_callback_scope cs;
	napi_value resource;
	if (napi_open_handle_scope(e->env, &hs) != napi_ok)
		return;
	napi_get_reference_value(e->env, e->resource, &resource);
	/* A callback scope, so that promise reactions run when it closes
	   as they do after any of Node's own I/O callbacks. */
	napi_open_callback_scope(e->env, resource, e->context, &cs);
	/* One bounded helping per wake-up: the descriptor stays readable
	   while more wait, and timers get their turn in between. */
	struct fsafe_async_completion done[32];
	int n = fsafe_async_reap(e->queue, done, 32);
	for (int i = 0; i < n; i++)
		settle(e, &done[i]);
	if (e->pending == 0) /* an idle engine must not keep Node alive */
		uv_poll_stop(&e->poll);
	napi_close_callback_scope(e->env, cs);
	napi_close_handle_scope(e->env, hs);
}

static void free_engine_memory(uv_handle_t *h)
{
	free(h->data);
}

static void finalize_engine(napi_env env, void *data, void *hint)
{
	(void)hint;
	struct engine *e = data;
	uv_poll_stop(&e->poll);
	fsafe_async_free(e->queue);
	napi_async_destroy(env, e->context);
	napi_delete_reference(env, e->resource);
	uv_close((uv_handle_t *)&e->poll, free_engine_memory);
}

static struct engine *engine_get(napi_env env)
{
	struct engine *e = NULL;
	if (napi_get_instance_data(env, (void **)&e) == napi_ok && e)
		return e;
	e = calloc(1, sizeof *e);
	struct uv_loop_s *loop;
	napi_value resource, name;
	struct fsafe_error err = {0};
	struct fsafe_async_opts o = FSAFE_ASYNC_OPTS_INIT;
	o.error = &err;
	int rc = e ? fsafe_async_new(&o, &e->queue) : -ENOMEM;
	if (rc < 0) {
		free(e);
		napi_throw(env, fsafe_node_result(env, rc, &err));
		return NULL;
	}
	e->env = env;
	e->poll.data = e;
	if (napi_get_uv_event_loop(env, &loop) != napi_ok ||
	    uv_poll_init(loop, &e->poll, fsafe_async_fd(e->queue)) != 0) {
		fsafe_async_free(e->queue);
		free(e);
		napi_throw_error(env, "EIO", "cannot watch the async queue");
		return NULL;
	}
	napi_create_object(env, &resource);
	napi_create_string_utf8(env, "fsafe.writeFileAtomic",
	                        NAPI_AUTO_LENGTH, &name);
	napi_create_reference(env, resource, 1, &e->resource);
	napi_async_init(env, resource, name, &e->context);
	napi_set_instance_data(env, e, finalize_engine, NULL);
	return e;
}

/* submit(path, buffer, flags, mode) -> Promise<undefined>, rejected with
   a result object. */
static napi_value submit(napi_env env, napi_callback_info info)
{
	struct fsafe_node_write w;
	napi_value promise;
	if (!fsafe_node_write_args(env, info, &w))
		return NULL;
	struct engine *e = engine_get(env);
	struct request *r = e ? fsafe_node_alloc(env, sizeof *r) : NULL;
	void *bytes = r ? fsafe_node_dup(env, w.buf, w.len) : NULL;
	if (!bytes) {
		free(r);
		free(w.path);
		return NULL;
	}
	r->bytes = bytes;
	w.opts.error = &r->error;
	napi_create_promise(env, &r->deferred, &promise);
	int rc = fsafe_async_submit(e->queue, AT_FDCWD, w.path, r->bytes, w.len,
	                            &w.opts, r, NULL);
	free(w.path);
	if (rc < 0) {
		napi_reject_deferred(env, r->deferred,
		                     fsafe_node_result(env, rc, &r->error));
		free(r->bytes);
		free(r);
		return promise;
	}
	if (e->pending++ == 0)
		uv_poll_start(&e->poll, UV_READABLE, on_completions);
	return promise;
}

const struct fsafe_node_fn fsafe_node_async[] = {
	{"submit", submit},
	{NULL, NULL},
};
