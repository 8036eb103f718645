/* The staging-name predicate and the synchronous one-shot write. */
#include "addon.h"

#include <fcntl.h>
#include <stdlib.h>

static napi_value is_staging_name(napi_env env, napi_callback_info info)
{
	napi_value argv[1], out;
	NAPI_OK(fsafe_node_args(env, info, 1, argv));
	char *name = fsafe_node_string(env, argv[0]);
	if (!name)
		return NULL;
	bool yes = fsafe_is_staging_name(name);
	free(name);
	NAPI_OK(napi_get_boolean(env, yes, &out));
	return out;
}

bool fsafe_node_write_args(napi_env env, napi_callback_info info,
                           struct fsafe_node_write *w)
{
	napi_value argv[4];
	uint32_t flags, mode;
	if (fsafe_node_args(env, info, 4, argv) != napi_ok ||
	    napi_get_buffer_info(env, argv[1], &w->buf, &w->len) != napi_ok ||
	    napi_get_value_uint32(env, argv[2], &flags) != napi_ok ||
	    napi_get_value_uint32(env, argv[3], &mode) != napi_ok ||
	    !(w->path = fsafe_node_string(env, argv[0])))
		return false;
	w->opts = (struct fsafe_write_opts)FSAFE_WRITE_OPTS_INIT;
	w->opts.flags = flags;
	w->opts.mode = (mode_t)mode;
	return true;
}

/* writeSync(path, buffer, flags, mode) -> null | result. On the calling
   thread, as fs.writeFileSync is. */
static napi_value write_sync(napi_env env, napi_callback_info info)
{
	struct fsafe_node_write w;
	napi_value out;
	if (!fsafe_node_write_args(env, info, &w))
		return NULL;
	struct fsafe_error err = {0};
	w.opts.error = &err;
	int rc = fsafe_write_fileat(AT_FDCWD, w.path, w.buf, w.len, &w.opts);
	free(w.path);
	if (rc == 0) {
		NAPI_OK(napi_get_null(env, &out));
		return out;
	}
	return fsafe_node_result(env, rc, &err);
}

napi_value fsafe_node_flags(napi_env env)
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

const struct fsafe_node_fn fsafe_node_write[] = {
	{"isStagingName", is_staging_name},
	{"writeSync", write_sync},
	{NULL, NULL},
};
