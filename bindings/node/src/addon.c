/* Module entry and the helpers every capability shares. */
#include "addon.h"

#include <stdlib.h>

napi_value fsafe_node_result(napi_env env, int code,
                             const struct fsafe_error *err)
{
	napi_value obj, v;
	NAPI_OK(napi_create_object(env, &obj));
	/* FSAFE_ENOTDURABLE names the sync that failed: report that errno,
	   and the library's code beside it. */
	int sys = err && err->sys_errno ? -abs(err->sys_errno) : code;
	NAPI_OK(napi_create_int32(env, sys, &v));
	NAPI_OK(napi_set_named_property(env, obj, "errno", v));
	NAPI_OK(napi_create_int32(env, code, &v));
	NAPI_OK(napi_set_named_property(env, obj, "code", v));
	NAPI_OK(napi_create_string_utf8(env, fsafe_strerror(code),
	                                NAPI_AUTO_LENGTH, &v));
	NAPI_OK(napi_set_named_property(env, obj, "message", v));
	if (err && err->step) {
		NAPI_OK(napi_create_string_utf8(env, err->step,
		                                NAPI_AUTO_LENGTH, &v));
		NAPI_OK(napi_set_named_property(env, obj, "step", v));
	}
	NAPI_OK(napi_get_boolean(env, err && err->published, &v));
	NAPI_OK(napi_set_named_property(env, obj, "published", v));
	return obj;
}

napi_status fsafe_node_args(napi_env env, napi_callback_info info, size_t n,
                            napi_value *argv)
{
	return napi_get_cb_info(env, info, &n, argv, NULL, NULL);
}

void *fsafe_node_alloc(napi_env env, size_t size)
{
	void *p = calloc(1, size);
	if (!p)
		napi_throw_error(env, "ENOMEM", "out of memory");
	return p;
}

char *fsafe_node_string(napi_env env, napi_value v)
{
	size_t len;
	if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok)
		return NULL;
	char *s = malloc(len + 1);
	if (!s) {
		napi_throw_error(env, "ENOMEM", "out of memory");
		return NULL;
	}
	if (napi_get_value_string_utf8(env, v, s, len + 1, &len) != napi_ok) {
		free(s);
		return NULL;
	}
	return s;
}

napi_status fsafe_node_export(napi_env env, napi_value exports,
                              const char *name, napi_callback fn)
{
	napi_value f;
	napi_status st = napi_create_function(env, name, NAPI_AUTO_LENGTH, fn,
	                                      NULL, &f);
	if (st != napi_ok)
		return st;
	return napi_set_named_property(env, exports, name, f);
}

static napi_value init(napi_env env, napi_value exports)
{
	NAPI_OK(fsafe_node_init_write(env, exports));
	NAPI_OK(fsafe_node_init_async(env, exports));
	NAPI_OK(fsafe_node_init_sweep(env, exports));
	NAPI_OK(fsafe_node_init_writer(env, exports));
	NAPI_OK(fsafe_node_init_lock(env, exports));
	NAPI_OK(fsafe_node_init_store(env, exports));
	NAPI_OK(fsafe_node_init_spool(env, exports));
	NAPI_OK(fsafe_node_init_inbox(env, exports));
	NAPI_OK(fsafe_node_init_checkpoint(env, exports));
	return exports;
}

NAPI_MODULE_INIT()
{
	return init(env, exports);
}
