/*
 * The managed writer's native half: open, write and commit each run on
 * libuv's thread pool (each may wait on the disk); abort is one unlink at
 * most and runs in place. The JS side wraps a handle in a Writable stream
 * and never issues two operations on one handle at once.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

struct handle {
	fsafe_writer *w;     /* NULL once committed or aborted */
	struct fsafe_error error;
};

enum op { OP_OPEN, OP_WRITE, OP_COMMIT };

struct writer_call {
	struct pool_call call;
	enum op op;
	struct handle *h;
	char *path;
	struct fsafe_write_opts opts;
	const void *buf;     /* WRITE: the caller's, kept alive by the call */
	size_t len;
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

static int run(struct pool_call *pc)
{
	struct writer_call *c = (struct writer_call *)pc;
	int rc;
	switch (c->op) {
	case OP_OPEN:
		return fsafe_writer_open(AT_FDCWD, c->path, &c->opts, &c->h->w);
	case OP_WRITE:
		return fsafe_writer_write(c->h->w, c->buf, c->len);
	case OP_COMMIT:
		/* commit frees the writer whatever the outcome */
		rc = fsafe_writer_commit(c->h->w);
		c->h->w = NULL;
		return rc;
	}
	return -EINVAL;
}

static napi_value value(napi_env env, struct pool_call *pc)
{
	struct writer_call *c = (struct writer_call *)pc;
	napi_value v;
	if (c->op != OP_OPEN)
		return NULL;
	NAPI_OK(napi_create_external(env, c->h, finalize_handle, NULL, &v));
	c->h = NULL; /* the external owns it now */
	return v;
}

static void release(struct pool_call *pc)
{
	struct writer_call *c = (struct writer_call *)pc;
	if (c->op == OP_OPEN && c->h) /* failed, or no external made */
		finalize_handle(NULL, c->h, NULL);
	free(c->path);
	free(c);
}

/* A call of `op` on the live handle in `v`, or NULL with an exception
   pending (EBADF for a finished handle). */
static struct writer_call *handle_call(napi_env env, napi_value v, enum op op)
{
	struct handle *h = pool_external(env, v);
	if (!h)
		return NULL;
	if (!h->w)
		return fsafe_node_throw(env, -EBADF);
	struct writer_call *c = pool_call_new(env, sizeof *c, run, value,
	                                      release);
	if (c) {
		c->op = op;
		c->h = h;
		c->call.error = &h->error;
	}
	return c;
}

/* argv[2] mode. */
static struct pool_call *open_call(napi_env env, char *path, uint32_t flags,
                                   const napi_value *argv)
{
	uint32_t mode;
	struct writer_call *c = pool_call_new(env, sizeof *c, run, value,
	                                      release);
	if (!c) {
		free(path);
		return NULL;
	}
	c->op = OP_OPEN;
	c->path = path;
	if (napi_get_value_uint32(env, argv[2], &mode) != napi_ok ||
	    !(c->h = fsafe_node_alloc(env, sizeof *c->h))) {
		release(&c->call);
		return NULL;
	}
	c->opts = (struct fsafe_write_opts)FSAFE_WRITE_OPTS_INIT;
	c->opts.flags = flags;
	c->opts.mode = (mode_t)mode;
	c->opts.error = &c->h->error; /* kept by the writer for later calls */
	c->call.error = &c->h->error;
	return &c->call;
}

/* writerOpen(path, flags, mode) -> Promise<handle>. */
static napi_value writer_open(napi_env env, napi_callback_info info)
{
	return pool_open(env, info, 3, "fsafe.Writer", open_call);
}

/* writerWrite(handle, buffer) -> Promise; the buffer is held until done. */
static napi_value writer_write(napi_env env, napi_callback_info info)
{
	napi_value argv[2];
	void *buf;
	NAPI_OK(fsafe_node_args(env, info, 2, argv));
	struct writer_call *c = handle_call(env, argv[0], OP_WRITE);
	if (!c)
		return NULL;
	if (napi_get_buffer_info(env, argv[1], &buf, &c->len) != napi_ok) {
		release(&c->call);
		return NULL;
	}
	c->buf = buf;
	return pool_queue(env, "fsafe.Writer", &c->call, argv[1]);
}

/* writerCommit(handle) -> Promise. */
static napi_value writer_commit(napi_env env, napi_callback_info info)
{
	napi_value argv[1];
	NAPI_OK(fsafe_node_args(env, info, 1, argv));
	struct writer_call *c = handle_call(env, argv[0], OP_COMMIT);
	return c ? pool_queue(env, "fsafe.Writer", &c->call, argv[0]) : NULL;
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
