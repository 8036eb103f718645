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

const struct fsafe_node_fn fsafe_node_write[] = {
	{"isStagingName", is_staging_name},
	{"writeSync", write_sync},
	{NULL, NULL},
};
