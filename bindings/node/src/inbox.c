/*
 * Inbox: the directory inbox's calls on libuv's thread pool. An inbox
 * handle outlives its consumers (a count), so the garbage collector may
 * finalise them in any order. The JS side runs one call per inbox at a
 * time, its consumers' included, except a consumer's wait.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct inbox_handle {
	fsafe_inbox *inbox;  /* NULL once closed */
	struct fsafe_error error;
	unsigned consumers;  /* consumer handles not yet finalised */
	bool dropped;        /* its external was finalised */
};

struct consumer_handle {
	fsafe_inbox_consumer *consumer; /* NULL once closed */
	struct inbox_handle *ib;
};

enum inbox_op {
	OPEN, DELIVER, CONSUMER, TAKE, WAIT, ACK, RELEASE, RELEASE_ALL,
	CONSUMER_CLOSE, RECOVER,
};

struct inbox_call {
	struct pool_call call;
	enum inbox_op op;
	struct inbox_handle *h;
	struct consumer_handle *ch;
	char *str;           /* path, consumer name or message id */
	void *buf;
	size_t len;
	double num;          /* WAIT: ms; RECOVER: stage age */
	struct fsafe_inbox_opts opts;
	char id[FSAFE_INBOX_ID_LEN + 1];
	fsafe_inbox_msg *msg;
	struct fsafe_inbox_recovery rec;
};

static void inbox_free_if_unused(struct inbox_handle *h)
{
	if (h->dropped && h->consumers == 0) {
		fsafe_inbox_close(h->inbox);
		free(h);
	}
}

static void finalize_inbox(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct inbox_handle *h = data;
	h->dropped = true;
	inbox_free_if_unused(h);
}

static void finalize_consumer(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct consumer_handle *ch = data;
	fsafe_inbox_consumer_close(ch->consumer);
	ch->ib->consumers--;
	inbox_free_if_unused(ch->ib);
	free(ch);
}

static uint64_t ms_of(double ms)
{
	return ms < 0 ? FSAFE_FOREVER : (uint64_t)ms;
}

static int run(struct pool_call *pc)
{
	struct inbox_call *c = (struct inbox_call *)pc;
	fsafe_inbox_consumer *con = c->ch ? c->ch->consumer : NULL;
	switch (c->op) {
	case OPEN:
		return fsafe_inbox_open(AT_FDCWD, c->str, &c->opts, &c->h->inbox);
	case DELIVER:
		return fsafe_inbox_deliver(c->h->inbox, c->buf, c->len, c->id);
	case CONSUMER:
		return fsafe_inbox_consumer_open(c->h->inbox, c->str,
		                                 &c->ch->consumer);
	case TAKE:
		return fsafe_inbox_take(con, &c->msg);
	case WAIT:
		return fsafe_inbox_wait(con, ms_of(c->num));
	case ACK:
		return fsafe_inbox_ack(con, c->str);
	case RELEASE:
		return fsafe_inbox_release(con, c->str);
	case RELEASE_ALL:
		return fsafe_inbox_release_all(con);
	case CONSUMER_CLOSE:
		c->ch->consumer = NULL;
		return fsafe_inbox_consumer_close(con);
	case RECOVER:
		c->rec = (struct fsafe_inbox_recovery)FSAFE_INBOX_RECOVERY_INIT;
		return fsafe_inbox_recover(c->h->inbox, ms_of(c->num), &c->rec);
	}
	return -EINVAL;
}

static napi_value set_string(napi_env env, napi_value obj, const char *key,
                             const char *s)
{
	napi_value v;
	NAPI_OK(napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v));
	NAPI_OK(napi_set_named_property(env, obj, key, v));
	return obj;
}

static napi_value set_number(napi_env env, napi_value obj, const char *key,
                             double d)
{
	napi_value v;
	NAPI_OK(napi_create_double(env, d, &v));
	NAPI_OK(napi_set_named_property(env, obj, key, v));
	return obj;
}

/* { id, seq, data } of a taken message. */
static napi_value message(napi_env env, const fsafe_inbox_msg *m)
{
	napi_value obj, v;
	NAPI_OK(napi_create_object(env, &obj));
	if (!set_string(env, obj, "id", fsafe_inbox_msg_id(m)) ||
	    !set_number(env, obj, "seq", (double)fsafe_inbox_msg_seq(m)))
		return NULL;
	NAPI_OK(napi_create_buffer_copy(env, fsafe_inbox_msg_len(m),
	                                fsafe_inbox_msg_data(m), NULL, &v));
	NAPI_OK(napi_set_named_property(env, obj, "data", v));
	return obj;
}

static napi_value value(napi_env env, struct pool_call *pc)
{
	struct inbox_call *c = (struct inbox_call *)pc;
	napi_value v;
	switch (c->op) {
	case OPEN:
		NAPI_OK(napi_create_external(env, c->h, finalize_inbox, NULL, &v));
		c->h = NULL; /* the external owns it now */
		return v;
	case CONSUMER:
		NAPI_OK(napi_create_external(env, c->ch, finalize_consumer, NULL,
		                             &v));
		c->ch->ib->consumers++;
		c->ch = NULL;
		return v;
	case DELIVER:
		NAPI_OK(napi_create_string_utf8(env, c->id, NAPI_AUTO_LENGTH, &v));
		return v;
	case TAKE:
		return message(env, c->msg);
	case RELEASE_ALL:
		NAPI_OK(napi_create_double(env, c->call.rc, &v));
		return v;
	case RECOVER:
		NAPI_OK(napi_create_object(env, &v));
		if (!set_number(env, v, "returned", c->rec.returned) ||
		    !set_number(env, v, "consumers", c->rec.consumers) ||
		    !set_number(env, v, "swept", c->rec.swept) ||
		    !set_number(env, v, "unjudged", c->rec.unjudged))
			return NULL;
		return v;
	case WAIT:
	case ACK:
	case RELEASE:
	case CONSUMER_CLOSE:
		break;
	}
	return NULL;
}

static void release(struct pool_call *pc)
{
	struct inbox_call *c = (struct inbox_call *)pc;
	if (c->op == OPEN && c->h) /* failed, or no external made */
		finalize_inbox(NULL, c->h, NULL);
	if (c->op == CONSUMER && c->ch) {
		fsafe_inbox_consumer_close(c->ch->consumer);
		free(c->ch);
	}
	fsafe_inbox_msg_free(c->msg);
	free(c->str);
	free(c->buf);
	free(c);
}

static struct pool_call *open_call(napi_env env, char *path, uint32_t flags,
                                   const napi_value *argv)
{
	(void)argv;
	struct inbox_call *c = pool_call_new(env, sizeof *c, run, value,
	                                     release);
	if (!c) {
		free(path);
		return NULL;
	}
	c->op = OPEN;
	c->str = path;
	if (!(c->h = fsafe_node_alloc(env, sizeof *c->h))) {
		release(&c->call);
		return NULL;
	}
	c->opts = (struct fsafe_inbox_opts)FSAFE_INBOX_OPTS_INIT;
	c->opts.flags = flags;
	c->opts.error = &c->h->error; /* kept by the handle and consumers */
	c->call.error = &c->h->error;
	return &c->call;
}

/* inboxOpen(path, flags) -> Promise<handle>. */
static napi_value inbox_open(napi_env env, napi_callback_info info)
{
	return pool_open(env, info, 2, "fsafe.Inbox.open", open_call);
}

/* inboxOp(handle, op, arg): DELIVER Buffer | CONSUMER name|null |
   RECOVER stageAgeMs. */
static napi_value inbox_op(napi_env env, napi_callback_info info)
{
	napi_value argv[3];
	uint32_t op;
	napi_valuetype t;
	void *p;
	NAPI_OK(fsafe_node_args(env, info, 3, argv));
	struct inbox_handle *h = pool_external(env, argv[0]);
	if (!h)
		return NULL;
	if (!h->inbox)
		return fsafe_node_throw(env, -EBADF);
	NAPI_OK(napi_get_value_uint32(env, argv[1], &op));
	if (op != DELIVER && op != CONSUMER && op != RECOVER) {
		napi_throw_range_error(env, NULL, "bad inbox operation");
		return NULL;
	}
	struct inbox_call *c = pool_call_new(env, sizeof *c, run, value,
	                                     release);
	if (!c)
		return NULL;
	c->op = (enum inbox_op)op;
	c->h = h;
	c->call.error = &h->error;
	bool ok = true;
	if (op == DELIVER) {
		ok = napi_get_buffer_info(env, argv[2], &p, &c->len) == napi_ok &&
		     (c->buf = fsafe_node_dup(env, p, c->len));
	} else if (op == CONSUMER) {
		ok = napi_typeof(env, argv[2], &t) == napi_ok &&
		     (t != napi_string ||
		      (c->str = fsafe_node_string(env, argv[2]))) &&
		     (c->ch = calloc(1, sizeof *c->ch));
		if (ok)
			c->ch->ib = h;
	} else {
		ok = napi_get_value_double(env, argv[2], &c->num) == napi_ok;
	}
	if (!ok) {
		c->h = NULL;
		release(&c->call);
		return NULL;
	}
	return pool_queue(env, "fsafe.Inbox", &c->call, argv[0]);
}

/* consumerOp(consumer, op, arg): TAKE | WAIT ms (<0: forever) | ACK id |
   RELEASE id | RELEASE_ALL | CONSUMER_CLOSE. */
static napi_value consumer_op(napi_env env, napi_callback_info info)
{
	napi_value argv[3];
	uint32_t op;
	NAPI_OK(fsafe_node_args(env, info, 3, argv));
	struct consumer_handle *ch = pool_external(env, argv[0]);
	if (!ch)
		return NULL;
	NAPI_OK(napi_get_value_uint32(env, argv[1], &op));
	if (op < TAKE || op > CONSUMER_CLOSE) {
		napi_throw_range_error(env, NULL, "bad consumer operation");
		return NULL;
	}
	if (!ch->consumer || !ch->ib->inbox)
		return fsafe_node_throw(env, -EBADF);
	struct inbox_call *c = pool_call_new(env, sizeof *c, run, value,
	                                     release);
	if (!c)
		return NULL;
	c->op = (enum inbox_op)op;
	c->ch = ch;
	c->call.error = &ch->ib->error;
	bool ok = true;
	if (op == ACK || op == RELEASE)
		ok = (c->str = fsafe_node_string(env, argv[2])) != NULL;
	else if (op == WAIT)
		ok = napi_get_value_double(env, argv[2], &c->num) == napi_ok;
	if (!ok) {
		c->ch = NULL;
		release(&c->call);
		return NULL;
	}
	return pool_queue(env, "fsafe.Inbox.Consumer", &c->call, argv[0]);
}

/* inboxClose(handle): the JS side closes the consumers first. */
static napi_value inbox_close(napi_env env, napi_callback_info info)
{
	struct inbox_handle *h = fsafe_node_external_arg(env, info);
	if (h) {
		fsafe_inbox_close(h->inbox);
		h->inbox = NULL;
	}
	return NULL;
}

const struct fsafe_node_fn fsafe_node_inbox[] = {
	{"inboxOpen", inbox_open},
	{"inboxOp", inbox_op},
	{"consumerOp", consumer_op},
	{"inboxClose", inbox_close},
	{NULL, NULL},
};
