/*
 * The managed writer's native half: open, write and commit each run on
 * libuv's thread pool (each may wait on the disk); abort is one unlink at
 * most and runs in place. The JS side wraps a handle in a Writable stream
 * and never issues two operations on one handle at once.
 */
#include "addon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

struct handle {
	fsafe_writer *w;     /* NULL once committed or aborted */
	struct fsafe_error error;
};

enum op { OP_OPEN, OP_WRITE, OP_COMMIT };

struct job {
	napi_async_work work;
	napi_deferred deferred;
	enum op op;
	struct handle *h;
	napi_ref keep;       /* the handle or buffer the pool thread uses */
	char *path;
	struct fsafe_write_opts opts;
	const void *buf;
	size_t len;
	int rc;
};

/* A handle the program dropped without finishing: abort, as the stream
   does on destroy. */
static void finalize_handle(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct handle *h = data;
	fsafe_writer_abort(h->w);
	free(h);
}

static void run(napi_env env, void *data)
{
	(void)env;
	struct job *j = data;
	switch (j->op) {
	case OP_OPEN:
		j->rc = fsafe_writer_open(AT_FDCWD, j->path, &j->opts, &j->h->w);
		break;
	case OP_WRITE:
		j->rc = fsafe_writer_write(j->h->w, j->buf, j->len);
		break;
	case OP_COMMIT:
		/* commit frees the writer whatever the outcome */
		j->rc = fsafe_writer_commit(j->h->w);
		j->h->w = NULL;
		break;
	}
}

static void done(napi_env env, napi_status status, void *data)
{
	struct job *j = data;
	napi_value v = NULL;
	if (status == napi_cancelled && j->rc == 0)
		j->rc = -ECANCELED;
	if (j->rc < 0) {
		v = fsafe_node_result(env, j->rc, &j->h->error);
		if (!v)
			napi_get_undefined(env, &v);
		napi_reject_deferred(env, j->deferred, v);
		if (j->op == OP_OPEN)
			free(j->h);
	} else if (j->op == OP_OPEN) {
		if (napi_create_external(env, j->h, finalize_handle, NULL, &v) !=
		    napi_ok) {
			fsafe_writer_abort(j->h->w);
			free(j->h);
			napi_get_undefined(env, &v);
		}
		napi_resolve_deferred(env, j->deferred, v);
	} else {
		napi_get_undefined(env, &v);
		napi_resolve_deferred(env, j->deferred, v);
	}
	if (j->keep)
		napi_delete_reference(env, j->keep);
	napi_delete_async_work(env, j->work);
	free(j->path);
	free(j);
}

static napi_value queue(napi_env env, struct job *j)
{
	napi_value promise, name;
	NAPI_OK(napi_create_string_utf8(env, "fsafe.Writer", NAPI_AUTO_LENGTH,
	                                &name));
	NAPI_OK(napi_create_promise(env, &j->deferred, &promise));
	NAPI_OK(napi_create_async_work(env, NULL, name, run, done, j, &j->work));
	NAPI_OK(napi_queue_async_work(env, j->work));
	return promise;
}

static struct job *job_new(napi_env env, enum op op)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		napi_throw_error(env, "ENOMEM", "out of memory");
	else
		j->op = op;
	return j;
}

/* The live handle in `v`, or NULL with an EBADF error thrown. */
static struct handle *live_handle(napi_env env, napi_value v)
{
	struct handle *h;
	if (napi_get_value_external(env, v, (void **)&h) != napi_ok)
		return NULL;
	if (!h->w)
		return fsafe_node_throw(env, -EBADF);
	return h;
}

/* writerOpen(path, flags, mode) -> Promise<handle>. */
static napi_value writer_open(napi_env env, napi_callback_info info)
{
	napi_value argv[3];
	uint32_t flags, mode;
	NAPI_OK(fsafe_node_args(env, info, 3, argv));
	NAPI_OK(napi_get_value_uint32(env, argv[1], &flags));
	NAPI_OK(napi_get_value_uint32(env, argv[2], &mode));
	struct job *j = job_new(env, OP_OPEN);
	if (!j)
		return NULL;
	j->h = calloc(1, sizeof *j->h);
	j->path = j->h ? fsafe_node_string(env, argv[0]) : NULL;
	if (!j->path) {
		free(j->h);
		free(j);
		return NULL;
	}
	j->opts = (struct fsafe_write_opts)FSAFE_WRITE_OPTS_INIT;
	j->opts.flags = flags;
	j->opts.mode = (mode_t)mode;
	j->opts.error = &j->h->error; /* kept by the writer for later calls */
	return queue(env, j);
}

/* writerWrite(handle, buffer) -> Promise; the buffer is held until done. */
static napi_value writer_write(napi_env env, napi_callback_info info)
{
	napi_value argv[2];
	void *buf;
	NAPI_OK(fsafe_node_args(env, info, 2, argv));
	struct handle *h = live_handle(env, argv[0]);
	if (!h)
		return NULL;
	struct job *j = job_new(env, OP_WRITE);
	if (!j)
		return NULL;
	j->h = h;
	if (napi_get_buffer_info(env, argv[1], &buf, &j->len) != napi_ok ||
	    napi_create_reference(env, argv[1], 1, &j->keep) != napi_ok) {
		free(j);
		return NULL;
	}
	j->buf = buf;
	return queue(env, j);
}

/* writerCommit(handle) -> Promise. */
static napi_value writer_commit(napi_env env, napi_callback_info info)
{
	napi_value argv[1];
	NAPI_OK(fsafe_node_args(env, info, 1, argv));
	struct handle *h = live_handle(env, argv[0]);
	if (!h)
		return NULL;
	struct job *j = job_new(env, OP_COMMIT);
	if (!j)
		return NULL;
	j->h = h;
	if (napi_create_reference(env, argv[0], 1, &j->keep) != napi_ok) {
		free(j);
		return NULL;
	}
	return queue(env, j);
}

/* writerAbort(handle): discard now; a no-op on a finished handle. */
static napi_value writer_abort(napi_env env, napi_callback_info info)
{
	struct handle *h = fsafe_node_external_arg(env, info);
	if (h) {
		fsafe_writer_abort(h->w);
		h->w = NULL;
	}
	return NULL;
}

const struct fsafe_node_fn fsafe_node_writer[] = {
	{"writerOpen", writer_open},
	{"writerWrite", writer_write},
	{"writerCommit", writer_commit},
	{"writerAbort", writer_abort},
	{NULL, NULL},
};
