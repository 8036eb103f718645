/*
 * sweepAtomicStaging's native half: fsafe_sweep() on libuv's thread pool
 * (a directory walk may take long; it must not hold the loop), with a
 * cancel token the JS side requests when its AbortSignal fires.
 */
#include "addon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

struct sweep_job {
	napi_async_work work;
	napi_deferred deferred;
	napi_ref token_ref;  /* keeps the cancel token alive while we run */
	fsafe_cancel *cancel;
	char *dir;
	uint64_t older_than_ms;
	int rc;
	fsafe_sweep_result *removed;
};

static void free_token(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	fsafe_cancel_free(data);
}

/* cancelToken() -> an external owning an fsafe_cancel. */
static napi_value cancel_token(napi_env env, napi_callback_info info)
{
	(void)info;
	fsafe_cancel *c;
	napi_value out;
	int rc = fsafe_cancel_new(&c);
	if (rc < 0)
		return fsafe_node_throw(env, rc);
	if (napi_create_external(env, c, free_token, NULL, &out) != napi_ok) {
		fsafe_cancel_free(c);
		return NULL;
	}
	return out;
}

/* cancel(token): async-signal-safe in the library, so safe from here
   while a pool thread sweeps. */
static napi_value cancel(napi_env env, napi_callback_info info)
{
	fsafe_cancel *c = fsafe_node_external_arg(env, info);
	if (c)
		fsafe_cancel_request(c);
	return NULL;
}

static void run(napi_env env, void *data)
{
	(void)env;
	struct sweep_job *j = data;
	j->rc = fsafe_sweep(AT_FDCWD, j->dir, j->older_than_ms, 0, j->cancel,
	                    &j->removed);
}

static napi_value names_of(napi_env env, const fsafe_sweep_result *r)
{
	napi_value arr, s;
	size_t n = r ? fsafe_sweep_result_count(r) : 0;
	NAPI_OK(napi_create_array_with_length(env, n, &arr));
	for (size_t i = 0; i < n; i++) {
		NAPI_OK(napi_create_string_utf8(env, fsafe_sweep_result_name(r, i),
		                                NAPI_AUTO_LENGTH, &s));
		NAPI_OK(napi_set_element(env, arr, (uint32_t)i, s));
	}
	return arr;
}

/* Resolves { result, names }: the names removed also when the sweep
   failed or was cancelled, so the JS side can report them. */
static void done(napi_env env, napi_status status, void *data)
{
	struct sweep_job *j = data;
	napi_value out, v;
	if (status == napi_cancelled)
		j->rc = -ECANCELED;
	if (napi_create_object(env, &out) == napi_ok) {
		v = j->rc < 0 ? fsafe_node_result(env, j->rc, NULL) : NULL;
		if (!v)
			napi_get_null(env, &v);
		napi_set_named_property(env, out, "error", v);
		v = names_of(env, j->removed);
		if (v)
			napi_set_named_property(env, out, "names", v);
		napi_resolve_deferred(env, j->deferred, out);
	}
	fsafe_sweep_result_free(j->removed);
	napi_delete_reference(env, j->token_ref);
	napi_delete_async_work(env, j->work);
	free(j->dir);
	free(j);
}

/* sweep(directory, olderThanMs, token) -> Promise<{error, names}>. */
static napi_value sweep(napi_env env, napi_callback_info info)
{
	napi_value argv[3], promise, name;
	double ms;
	NAPI_OK(fsafe_node_args(env, info, 3, argv));
	NAPI_OK(napi_get_value_double(env, argv[1], &ms));
	struct sweep_job *j = calloc(1, sizeof *j);
	if (!j) {
		napi_throw_error(env, "ENOMEM", "out of memory");
		return NULL;
	}
	j->older_than_ms = ms <= 0 ? 0 : (uint64_t)ms;
	if (napi_get_value_external(env, argv[2], (void **)&j->cancel) != napi_ok ||
	    napi_create_reference(env, argv[2], 1, &j->token_ref) != napi_ok ||
	    !(j->dir = fsafe_node_string(env, argv[0]))) {
		if (j->token_ref)
			napi_delete_reference(env, j->token_ref);
		free(j);
		return NULL;
	}
	NAPI_OK(napi_create_string_utf8(env, "fsafe.sweepAtomicStaging",
	                                NAPI_AUTO_LENGTH, &name));
	NAPI_OK(napi_create_promise(env, &j->deferred, &promise));
	NAPI_OK(napi_create_async_work(env, NULL, name, run, done, j, &j->work));
	NAPI_OK(napi_queue_async_work(env, j->work));
	return promise;
}

const struct fsafe_node_fn fsafe_node_sweep[] = {
	{"cancelToken", cancel_token},
	{"cancel", cancel},
	{"sweep", sweep},
	{NULL, NULL},
};
