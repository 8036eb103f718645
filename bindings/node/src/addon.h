/*
 * The Node binding's native half: thin Node-API (C) wrappers over
 * libfsafe. Everything Node-shaped (Error objects, options, streams,
 * AbortSignal) lives in lib/; this side only moves bytes and results.
 */
#ifndef FSAFE_NODE_ADDON_H
#define FSAFE_NODE_ADDON_H

/* openat and friends from the C17 headers */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <fsafe.h>

/* Bail out of a napi_callback on a failed Node-API call: the failure has
   left a pending JS exception or is a binding bug either way. */
#define NAPI_OK(call)                                  \
	do {                                           \
		if ((call) != napi_ok)                 \
			return NULL;                   \
	} while (0)

/*
 * A failed call's detail as the JS side wants it:
 * { errno (negative), step, published }. The JS side turns it into an
 * Error with Node's code/errno/syscall/path.
 */
napi_value fsafe_node_result(napi_env env, int code,
                             const struct fsafe_error *err);

/* Throws the result object of `code` (a negative errno): NULL, for the
   caller to return. */
void *fsafe_node_throw(napi_env env, int code);

/* The first `n` arguments of a call into `argv` (undefined where the
   caller passed fewer). */
napi_status fsafe_node_args(napi_env env, napi_callback_info info, size_t n,
                            napi_value *argv);

/* The pointer inside the external that is a call's first argument, or
   NULL with an exception pending. */
void *fsafe_node_external_arg(napi_env env, napi_callback_info info);

/* calloc(1, size), or NULL with an ENOMEM error thrown. */
void *fsafe_node_alloc(napi_env env, size_t size);

/* A heap copy of the len bytes at p, or NULL with an ENOMEM error thrown.
   At least one byte is allocated, and an empty Buffer (whose data
   pointer may be NULL) copies nothing from it. */
void *fsafe_node_dup(napi_env env, const void *p, size_t len);

/* A string argument copied to the heap (free() it); NULL on failure with a
   JS exception pending. */
char *fsafe_node_string(napi_env env, napi_value v);

/* One native function on the module's exports. */
struct fsafe_node_fn {
	const char *name;
	napi_callback fn;
};

/* Each capability's functions, up to a {NULL, NULL}. */
extern const struct fsafe_node_fn fsafe_node_write[], fsafe_node_async[],
	fsafe_node_sweep[], fsafe_node_writer[], fsafe_node_lock[],
	fsafe_node_store[], fsafe_node_spool[], fsafe_node_inbox[],
	fsafe_node_checkpoint[];

/* The arguments (path, buffer, flags, mode) of a one-shot write. */
struct fsafe_node_write {
	char *path;          /* a copy: free() it */
	void *buf;           /* the caller's */
	size_t len;
	struct fsafe_write_opts opts; /* flags and mode set, no error door */
};

/* Fetches them; false with an exception pending. */
bool fsafe_node_write_args(napi_env env, napi_callback_info info,
                           struct fsafe_node_write *w);

#endif
