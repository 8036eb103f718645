/*
 * Spool: the chunk spool's calls on libuv's thread pool (appends sync,
 * reads may touch the disk). A read takes up to a batch of records per
 * pool call, copied there, since a record's bytes live only until the
 * reader's next call. The JS side runs one call per spool at a time.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct spool_handle {
	fsafe_spool *spool;  /* NULL once closed */
	struct fsafe_error error;
};

struct reader_handle {
	fsafe_spool_reader *reader; /* NULL once closed */
};

enum spool_op { OPEN, APPEND, READER, NEXT, ACK, STAT };

#define BATCH_RECORDS 64
#define BATCH_BYTES (1u << 20)

struct record {
	uint64_t seq;
	void *data;
	size_t len;
};

struct spool_call {
	struct pool_call call;
	enum spool_op op;
	struct spool_handle *h;
	struct reader_handle *rh;
	char *path;
	struct fsafe_spool_opts opts;
	struct iovec *recs;  /* APPEND: our copies */
	size_t n;
	uint64_t seq;        /* APPEND: first; READER: from; ACK: up to */
	struct record batch[BATCH_RECORDS]; /* NEXT */
	struct fsafe_spool_stat st;
};

static void finalize_spool(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct spool_handle *h = data;
	fsafe_spool_close(h->spool);
	free(h);
}

static void finalize_reader(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct reader_handle *rh = data;
	fsafe_spool_reader_close(rh->reader);
	free(rh);
}

static int read_batch(struct spool_call *c)
{
	size_t bytes = 0;
	c->n = 0;
	while (c->n < BATCH_RECORDS && bytes < BATCH_BYTES) {
		const void *data;
		size_t len;
		uint64_t seq;
		int rc = fsafe_spool_next(c->rh->reader, &data, &len, &seq);
		if (rc < 0)
			return c->n ? 0 : rc; /* report it on the next call */
		if (rc == 0)
			break;
		struct record *r = &c->batch[c->n];
		if (!(r->data = malloc(len ? len : 1)))
			return c->n ? 0 : -ENOMEM;
		if (len)
			memcpy(r->data, data, len);
		r->len = len;
		r->seq = seq;
		c->n++;
		bytes += len;
	}
	return 0;
}

static int run(struct pool_call *pc)
{
	struct spool_call *c = (struct spool_call *)pc;
	switch (c->op) {
	case OPEN:
		return fsafe_spool_open(AT_FDCWD, c->path, &c->opts, &c->h->spool);
	case APPEND:
		return fsafe_spool_append(c->h->spool, c->recs, c->n, &c->seq);
	case READER:
		return fsafe_spool_reader_open(c->h->spool, c->seq,
		                               &c->rh->reader);
	case NEXT:
		return read_batch(c);
	case ACK:
		return fsafe_spool_ack(c->h->spool, c->seq);
	case STAT:
		c->st = (struct fsafe_spool_stat)FSAFE_SPOOL_STAT_INIT;
		return fsafe_spool_stat(c->h->spool, &c->st);
	}
	return -EINVAL;
}

static napi_value stat_object(napi_env env, const struct fsafe_spool_stat *st)
{
	const struct {
		const char *name;
		uint64_t v;
	} f[] = {
		{"cursor", st->cursor}, {"firstSeq", st->first_seq},
		{"nextSeq", st->next_seq}, {"segments", st->segments},
		{"bytes", st->bytes}, {"quarantined", st->quarantined},
		{"truncated", st->truncated}, {"dropped", st->dropped},
		{"quarantinedBytes", st->quarantined_bytes},
		{"salvaged", st->salvaged}, {"lost", st->lost},
		{"cursorAhead", st->cursor_ahead},
		{"quarantineEntries", st->quarantine_entries},
	};
	napi_value obj, v;
	NAPI_OK(napi_create_object(env, &obj));
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		NAPI_OK(napi_create_double(env, (double)f[i].v, &v));
		NAPI_OK(napi_set_named_property(env, obj, f[i].name, v));
	}
	return obj;
}

/* [[seq, Buffer], ...] of a read batch; empty at the end. */
static napi_value batch_array(napi_env env, struct spool_call *c)
{
	napi_value arr, pair, v;
	NAPI_OK(napi_create_array_with_length(env, c->n, &arr));
	for (size_t i = 0; i < c->n; i++) {
		NAPI_OK(napi_create_array_with_length(env, 2, &pair));
		NAPI_OK(napi_create_double(env, (double)c->batch[i].seq, &v));
		NAPI_OK(napi_set_element(env, pair, 0, v));
		NAPI_OK(napi_create_buffer_copy(env, c->batch[i].len,
		                                c->batch[i].data, NULL, &v));
		NAPI_OK(napi_set_element(env, pair, 1, v));
		NAPI_OK(napi_set_element(env, arr, (uint32_t)i, pair));
	}
	return arr;
}

static napi_value value(napi_env env, struct pool_call *pc)
{
	struct spool_call *c = (struct spool_call *)pc;
	napi_value v;
	switch (c->op) {
	case OPEN:
		NAPI_OK(napi_create_external(env, c->h, finalize_spool, NULL, &v));
		c->h = NULL; /* the external owns it now */
		return v;
	case APPEND:
		NAPI_OK(napi_create_double(env, (double)c->seq, &v));
		return v;
	case READER:
		NAPI_OK(napi_create_external(env, c->rh, finalize_reader, NULL, &v));
		c->rh = NULL;
		return v;
	case NEXT:
		return batch_array(env, c);
	case STAT:
		return stat_object(env, &c->st);
	case ACK:
		break;
	}
	return NULL;
}

static void release(struct pool_call *pc)
{
	struct spool_call *c = (struct spool_call *)pc;
	/* failed, or no external made */
	if (c->op == OPEN && c->h)
		finalize_spool(NULL, c->h, NULL);
	if (c->op == READER && c->rh)
		finalize_reader(NULL, c->rh, NULL);
	if (c->op == NEXT)
		for (size_t i = 0; i < c->n; i++)
			free(c->batch[i].data);
	if (c->op == APPEND)
		for (size_t i = 0; i < c->n; i++)
			free(c->recs[i].iov_base);
	free(c->recs);
	free(c->path);
	free(c);
}

static struct pool_call *open_call(napi_env env, char *path, uint32_t flags,
                                   const napi_value *argv)
{
	(void)argv;
	struct spool_call *c = pool_call_new(env, sizeof *c, run, value,
	                                     release);
	if (!c) {
		free(path);
		return NULL;
	}
	c->op = OPEN;
	c->path = path;
	if (!(c->h = fsafe_node_alloc(env, sizeof *c->h))) {
		release(&c->call);
		return NULL;
	}
	c->opts = (struct fsafe_spool_opts)FSAFE_SPOOL_OPTS_INIT;
	c->opts.flags = flags;
	c->opts.error = &c->h->error; /* kept by the handle */
	c->call.error = &c->h->error;
	return &c->call;
}

/* spoolOpen(path, flags) -> Promise<handle>. */
static napi_value spool_open(napi_env env, napi_callback_info info)
{
	return pool_open(env, info, 2, "fsafe.Spool.open", open_call);
}

static struct spool_handle *open_spool(napi_env env, napi_value v)
{
	struct spool_handle *h = pool_external(env, v);
	if (h && !h->spool)
		return fsafe_node_throw(env, -EBADF);
	return h;
}

/* Copies of an array of Buffers as iovecs; false with an exception. */
static bool copy_records(napi_env env, napi_value arr, struct spool_call *c)
{
	uint32_t n;
	if (napi_get_array_length(env, arr, &n) != napi_ok)
		return false;
	if (!(c->recs = calloc(n ? n : 1, sizeof *c->recs))) {
		napi_throw_error(env, "ENOMEM", "out of memory");
		return false;
	}
	for (uint32_t i = 0; i < n; i++) {
		napi_value b;
		void *p;
		size_t len;
		if (napi_get_element(env, arr, i, &b) != napi_ok ||
		    napi_get_buffer_info(env, b, &p, &len) != napi_ok)
			return false;
		if (!(c->recs[i].iov_base = fsafe_node_dup(env, p, len)))
			return false;
		c->recs[i].iov_len = len;
		c->n = i + 1;
	}
	return true;
}

/* spoolOp(handle, op, arg): APPEND [Buffer...] | READER from | ACK seq |
   STAT. */
static napi_value spool_op(napi_env env, napi_callback_info info)
{
	napi_value argv[3];
	uint32_t op;
	double num = 0;
	NAPI_OK(fsafe_node_args(env, info, 3, argv));
	struct spool_handle *h = open_spool(env, argv[0]);
	if (!h)
		return NULL;
	NAPI_OK(napi_get_value_uint32(env, argv[1], &op));
	if (op != APPEND && op != READER && op != ACK && op != STAT) {
		napi_throw_range_error(env, NULL, "bad spool operation");
		return NULL;
	}
	struct spool_call *c = pool_call_new(env, sizeof *c, run, value,
	                                     release);
	if (!c)
		return NULL;
	c->op = (enum spool_op)op;
	c->h = h;
	c->call.error = &h->error;
	if (op == APPEND && !copy_records(env, argv[2], c))
		goto fail;
	if ((op == READER || op == ACK) &&
	    napi_get_value_double(env, argv[2], &num) != napi_ok)
		goto fail;
	/* READER: a negative `from` is the cursor */
	c->seq = op == READER && num < 0 ? FSAFE_SPOOL_FROM_CURSOR
	                                 : (uint64_t)(num < 0 ? 0 : num);
	if (op == READER && !(c->rh = calloc(1, sizeof *c->rh))) {
		napi_throw_error(env, "ENOMEM", "out of memory");
		goto fail;
	}
	return pool_queue(env, "fsafe.Spool", &c->call, argv[0]);
fail:
	c->h = NULL;
	release(&c->call);
	return NULL;
}

/* spoolNext(spoolHandle, readerHandle) -> Promise<[[seq, Buffer]...]>. */
static napi_value spool_next(napi_env env, napi_callback_info info)
{
	napi_value argv[2];
	NAPI_OK(fsafe_node_args(env, info, 2, argv));
	struct spool_handle *h = open_spool(env, argv[0]);
	struct reader_handle *rh = h ? pool_external(env, argv[1]) : NULL;
	if (!rh)
		return NULL;
	if (!rh->reader)
		return fsafe_node_throw(env, -EBADF);
	struct spool_call *c = pool_call_new(env, sizeof *c, run, value,
	                                     release);
	if (!c)
		return NULL;
	c->op = NEXT;
	c->rh = rh;
	c->call.error = &h->error;
	return pool_queue(env, "fsafe.Spool.read", &c->call, argv[1]);
}

/* spoolReaderClose(readerHandle) / spoolClose(handle): the JS side waits
   for the spool's last call and closes readers first. */
static napi_value spool_reader_close(napi_env env, napi_callback_info info)
{
	struct reader_handle *rh = fsafe_node_external_arg(env, info);
	if (rh) {
		fsafe_spool_reader_close(rh->reader);
		rh->reader = NULL;
	}
	return NULL;
}

static napi_value spool_close(napi_env env, napi_callback_info info)
{
	struct spool_handle *h = fsafe_node_external_arg(env, info);
	if (h) {
		fsafe_spool_close(h->spool);
		h->spool = NULL;
	}
	return NULL;
}

const struct fsafe_node_fn fsafe_node_spool[] = {
	{"spoolOpen", spool_open},
	{"spoolOp", spool_op},
	{"spoolNext", spool_next},
	{"spoolReaderClose", spool_reader_close},
	{"spoolClose", spool_close},
	{NULL, NULL},
};
