/* Module entry and the helpers every capability shares. */
#include "addon.h"

#include <stdlib.h>
#include <string.h>

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

void *fsafe_node_throw(napi_env env, int code)
{
	napi_value v = fsafe_node_result(env, code, NULL);
	if (v)
		napi_throw(env, v);
	return NULL;
}

napi_status fsafe_node_args(napi_env env, napi_callback_info info, size_t n,
                            napi_value *argv)
{
	return napi_get_cb_info(env, info, &n, argv, NULL, NULL);
}

void *fsafe_node_external_arg(napi_env env, napi_callback_info info)
{
	napi_value v;
	void *p;
	if (fsafe_node_args(env, info, 1, &v) != napi_ok ||
	    napi_get_value_external(env, v, &p) != napi_ok)
		return NULL;
	return p;
}

void *fsafe_node_alloc(napi_env env, size_t size)
{
	void *p = calloc(1, size);
	if (!p)
		napi_throw_error(env, "ENOMEM", "out of memory");
	return p;
}

void *fsafe_node_dup(napi_env env, const void *p, size_t len)
{
	void *copy = malloc(len ? len : 1);
	if (!copy)
		napi_throw_error(env, "ENOMEM", "out of memory");
	else if (len)
		memcpy(copy, p, len);
	return copy;
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

static napi_status export_all(napi_env env, napi_value exports,
                              const struct fsafe_node_fn *fns)
{
	napi_value f;
	napi_status st = napi_ok;
	for (; st == napi_ok && fns->name; fns++) {
		st = napi_create_function(env, fns->name, NAPI_AUTO_LENGTH,
		                          fns->fn, NULL, &f);
		if (st == napi_ok)
			st = napi_set_named_property(env, exports, fns->name, f);
	}
	return st;
}

/* Every module's flags and the codes the JS side passes or compares,
   exported once as the addon's `flags`. */
static napi_value fsafe_node_flags(napi_env env)
{
	static const struct {
		const char *name;
		uint32_t value;
	} flags[] = {
		{"NO_SYNC", FSAFE_NO_SYNC},
		{"CREATE_ONLY", FSAFE_CREATE_ONLY},
		{"NO_FOLLOW", FSAFE_NO_FOLLOW},
		{"MKDIR", FSAFE_MKDIR},
		{"LOCK_NO_WAIT", FSAFE_LOCK_NO_WAIT},
		{"LOCK_KERNEL", FSAFE_LOCK_KERNEL},
		{"STORE_CREATE", FSAFE_STORE_CREATE},
		{"STORE_LOCK_KERNEL", FSAFE_STORE_LOCK_KERNEL},
		{"SPOOL_CREATE", FSAFE_SPOOL_CREATE},
		{"SPOOL_RDONLY", FSAFE_SPOOL_RDONLY},
		{"INBOX_CREATE", FSAFE_INBOX_CREATE},
		{"INBOX_KEEP_DONE", FSAFE_INBOX_KEEP_DONE},
		{"CHECKPOINT_NO_WAIT", FSAFE_CHECKPOINT_NO_WAIT},
		{"CHECKPOINT_CREATE", FSAFE_CHECKPOINT_CREATE},
		{"CHECKPOINT_READ_ONLY", FSAFE_CHECKPOINT_READ_ONLY},
		{"CHECKPOINT_FALLBACK", FSAFE_CHECKPOINT_FALLBACK},
		{"ENOTDURABLE", (uint32_t)-FSAFE_ENOTDURABLE},
		{"ECONFLICT", (uint32_t)-FSAFE_ECONFLICT},
	};
	napi_value obj, v;
	NAPI_OK(napi_create_object(env, &obj));
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
		NAPI_OK(napi_create_uint32(env, flags[i].value, &v));
		NAPI_OK(napi_set_named_property(env, obj, flags[i].name, v));
	}
	return obj;
}

static napi_value init(napi_env env, napi_value exports)
{
	static const struct fsafe_node_fn *const all[] = {
		fsafe_node_write, fsafe_node_async, fsafe_node_sweep,
		fsafe_node_writer, fsafe_node_lock, fsafe_node_store,
		fsafe_node_spool, fsafe_node_inbox, fsafe_node_checkpoint,
	};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		NAPI_OK(export_all(env, exports, all[i]));
	napi_value flags = fsafe_node_flags(env);
	if (!flags)
		return NULL;
	NAPI_OK(napi_set_named_property(env, exports, "flags", flags));
	return exports;
}

NAPI_MODULE_INIT()
{
	return init(env, exports);
}
