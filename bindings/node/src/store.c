/*
 * Store: each operation of the keyed store on libuv's thread pool (a
 * change waits for the store's lock and syncs). The JS side issues one
 * operation per handle at a time, as the library asks.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct store_handle {
	fsafe_store *store;  /* NULL once closed */
	struct fsafe_error error;
};

enum store_op { OPEN, PUT, GET, DELETE, LIST };

struct store_call {
	struct pool_call call;
	enum store_op op;
	struct store_handle *h;
	char *path;
	struct fsafe_store_opts opts;
	void *key, *val;     /* our copies; val is the library's after GET */
	size_t keylen, vallen;
	double expected;     /* PUT: < 0 unconditional */
	uint64_t version;
	fsafe_store_iter *iter;
};

static void finalize_store(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct store_handle *h = data;
	fsafe_store_close(h->store);
	free(h);
}

static int run(struct pool_call *c)
{
	struct store_call *s = (struct store_call *)c;
	fsafe_store *st = s->h->store;
	switch (s->op) {
	case OPEN:
		return fsafe_store_open(AT_FDCWD, s->path, &s->opts, &s->h->store);
	case PUT:
		if (s->expected < 0)
			return fsafe_store_put(st, s->key, s->keylen, s->val,
			                       s->vallen, &s->version);
		return fsafe_store_put_if(st, s->key, s->keylen, s->val,
		                          s->vallen, (uint64_t)s->expected,
		                          &s->version);
	case GET:
		free(s->val);
		s->val = NULL;
		return fsafe_store_get(st, s->key, s->keylen, &s->val,
		                       &s->vallen, &s->version);
	case DELETE:
		return fsafe_store_delete(st, s->key, s->keylen);
	case LIST:
		return fsafe_store_list(st, NULL, &s->iter);
	}
	return -EINVAL;
}

static napi_value copy_buffer(napi_env env, const void *p, size_t len)
{
	napi_value v;
	NAPI_OK(napi_create_buffer_copy(env, len, p, NULL, &v));
	return v;
}

/* [ { key, version, length } ... ] of a listing. */
static napi_value listing(napi_env env, fsafe_store_iter *it)
{
	napi_value arr, obj, v;
	struct fsafe_store_entry e;
	uint32_t i = 0;
	NAPI_OK(napi_create_array(env, &arr));
	while (fsafe_store_iter_next(it, &e) == 1) {
		NAPI_OK(napi_create_object(env, &obj));
		if (!(v = copy_buffer(env, e.key, e.keylen)))
			return NULL;
		NAPI_OK(napi_set_named_property(env, obj, "key", v));
		NAPI_OK(napi_create_double(env, (double)e.version, &v));
		NAPI_OK(napi_set_named_property(env, obj, "version", v));
		NAPI_OK(napi_create_double(env, (double)e.len, &v));
		NAPI_OK(napi_set_named_property(env, obj, "length", v));
		NAPI_OK(napi_set_element(env, arr, i++, obj));
	}
	return arr;
}

static napi_value value(napi_env env, struct pool_call *c)
{
	struct store_call *s = (struct store_call *)c;
	napi_value v, obj;
	switch (s->op) {
	case OPEN:
		NAPI_OK(napi_create_external(env, s->h, finalize_store, NULL, &v));
		s->h = NULL; /* the external owns it now */
		return v;
	case PUT:
		NAPI_OK(napi_create_double(env, (double)s->version, &v));
		return v;
	case GET:
		NAPI_OK(napi_create_object(env, &obj));
		if (!(v = copy_buffer(env, s->val, s->vallen)))
			return NULL;
		NAPI_OK(napi_set_named_property(env, obj, "value", v));
		NAPI_OK(napi_create_double(env, (double)s->version, &v));
		NAPI_OK(napi_set_named_property(env, obj, "version", v));
		return obj;
	case LIST:
		return listing(env, s->iter);
	case DELETE:
		break;
	}
	return NULL;
}

static void release(struct pool_call *c)
{
	struct store_call *s = (struct store_call *)c;
	if (s->op == OPEN && s->h) /* failed, or no external made */
		finalize_store(NULL, s->h, NULL);
	fsafe_store_iter_free(s->iter);
	free(s->path);
	free(s->key);
	free(s->val);
	free(s);
}

/* A heap copy of a Buffer argument (at least one byte allocated). */
static void *dup_buffer(napi_env env, napi_value v, size_t *len)
{
	void *p;
	if (napi_get_buffer_info(env, v, &p, len) != napi_ok)
		return NULL;
	return fsafe_node_dup(env, p, *len);
}

/* argv[2] writeFlags, argv[3] mode, argv[4] lockTimeoutMs. */
static struct pool_call *open_call(napi_env env, char *path, uint32_t flags,
                                   const napi_value *argv)
{
	uint32_t wflags, mode;
	double timeout;
	struct store_call *s = pool_call_new(env, sizeof *s, run, value,
	                                     release);
	if (!s) {
		free(path);
		return NULL;
	}
	s->op = OPEN;
	s->path = path;
	s->opts = (struct fsafe_store_opts)FSAFE_STORE_OPTS_INIT;
	if (napi_get_value_uint32(env, argv[2], &wflags) != napi_ok ||
	    napi_get_value_uint32(env, argv[3], &mode) != napi_ok ||
	    napi_get_value_double(env, argv[4], &timeout) != napi_ok ||
	    !(s->h = fsafe_node_alloc(env, sizeof *s->h))) {
		release(&s->call);
		return NULL;
	}
	s->opts.flags = flags;
	s->opts.write_flags = wflags;
	s->opts.mode = (mode_t)mode;
	s->opts.lock_timeout_ms = timeout <= 0 ? 0 : (uint64_t)timeout;
	s->opts.error = &s->h->error; /* kept by the handle */
	s->call.error = &s->h->error;
	return &s->call;
}

/* storeOpen(path, flags, writeFlags, mode, lockTimeoutMs) -> Promise<handle>. */
static napi_value store_open(napi_env env, napi_callback_info info)
{
	return pool_open(env, info, 5, "fsafe.Store.open", open_call);
}

/* The open handle in `v`, or NULL with an error thrown. */
static struct store_handle *open_handle(napi_env env, napi_value v)
{
	struct store_handle *h = pool_external(env, v);
	if (h && !h->store)
		return fsafe_node_throw(env, -EBADF);
	return h;
}

/* storeOp(handle, op, key, value, expected): PUT/GET/DELETE/LIST. */
static napi_value store_op(napi_env env, napi_callback_info info)
{
	napi_value argv[5];
	uint32_t op;
	NAPI_OK(fsafe_node_args(env, info, 5, argv));
	struct store_handle *h = open_handle(env, argv[0]);
	if (!h)
		return NULL;
	NAPI_OK(napi_get_value_uint32(env, argv[1], &op));
	if (op < PUT || op > LIST) {
		napi_throw_range_error(env, NULL, "bad store operation");
		return NULL;
	}
	struct store_call *s = pool_call_new(env, sizeof *s, run, value,
	                                     release);
	if (!s)
		return NULL;
	s->op = (enum store_op)op;
	s->h = h;
	s->call.error = &h->error;
	if (op != LIST && !(s->key = dup_buffer(env, argv[2], &s->keylen)))
		goto fail;
	if (op == PUT) {
		if (!(s->val = dup_buffer(env, argv[3], &s->vallen)) ||
		    napi_get_value_double(env, argv[4], &s->expected) != napi_ok)
			goto fail;
	}
	return pool_queue(env, "fsafe.Store", &s->call, argv[0]);
fail:
	s->h = NULL;
	release(&s->call);
	return NULL;
}

/* storeClose(handle): the JS side waits for the handle's last call. */
static napi_value store_close(napi_env env, napi_callback_info info)
{
	struct store_handle *h = fsafe_node_external_arg(env, info);
	if (h) {
		fsafe_store_close(h->store);
		h->store = NULL;
	}
	return NULL;
}

const struct fsafe_node_fn fsafe_node_store[] = {
	{"storeOpen", store_open},
	{"storeOp", store_op},
	{"storeClose", store_close},
	{NULL, NULL},
};
