/*
 * Checkpoint: a set of files saved and loaded as one unit, each call on
 * libuv's thread pool. A save is one pool call (begin, add every file,
 * commit) on copies of the caller's buffers. The JS side runs one call
 * per handle at a time.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct cp_handle {
	fsafe_checkpoint *cp; /* NULL once closed */
	struct fsafe_error error;
};

enum cp_op { OPEN, SAVE, LOAD, GENERATIONS, CLOSE };

struct cp_file {
	char *name;
	void *data;
	size_t len;
};

struct cp_call {
	struct pool_call call;
	enum cp_op op;
	struct cp_handle *h;
	char *path, *revision;
	struct fsafe_checkpoint_opts opts;
	struct cp_file *files;
	size_t n;
	uint64_t generation;  /* SAVE: the new one; LOAD: the one asked */
	unsigned load_flags;
	fsafe_checkpoint_snapshot *snap;
	struct fsafe_checkpoint_damage damage;
	uint64_t *seqs;
	bool unclean;         /* OPEN */
};

static void finalize_cp(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	struct cp_handle *h = data;
	fsafe_checkpoint_close(h->cp);
	free(h);
}

static int save(struct cp_call *c)
{
	fsafe_checkpoint_tx *tx;
	int rc = fsafe_checkpoint_begin(c->h->cp, &tx);
	for (size_t i = 0; rc == 0 && i < c->n; i++)
		rc = fsafe_checkpoint_add(tx, c->files[i].name, c->files[i].data,
		                          c->files[i].len);
	if (rc < 0) {
		fsafe_checkpoint_abort(tx);
		return rc;
	}
	return fsafe_checkpoint_commit(tx, &c->generation);
}

static int generations(struct cp_call *c)
{
	int n = fsafe_checkpoint_generations(c->h->cp, NULL, 0);
	if (n <= 0)
		return n;
	/* more may appear between the calls only with another writer,
	   which the checkpoint's lock rules out */
	if (!(c->seqs = calloc((size_t)n, sizeof *c->seqs)))
		return -ENOMEM;
	int m = fsafe_checkpoint_generations(c->h->cp, c->seqs, (size_t)n);
	c->n = m < 0 ? 0 : (size_t)(m < n ? m : n);
	return m < 0 ? m : 0;
}

static int run(struct pool_call *pc)
{
	struct cp_call *c = (struct cp_call *)pc;
	struct fsafe_checkpoint_load_opts lo = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	int rc;
	switch (c->op) {
	case OPEN:
		rc = fsafe_checkpoint_open(AT_FDCWD, c->path, &c->opts, &c->h->cp);
		if (rc == 0)
			c->unclean = fsafe_checkpoint_was_unclean(c->h->cp);
		return rc;
	case SAVE:
		return save(c);
	case LOAD:
		lo.flags = c->load_flags;
		lo.generation = c->generation;
		lo.damage = &c->damage;
		return fsafe_checkpoint_load(c->h->cp, &lo, &c->snap);
	case GENERATIONS:
		return generations(c);
	case CLOSE:
		rc = fsafe_checkpoint_close(c->h->cp);
		c->h->cp = NULL;
		return rc;
	}
	return -EINVAL;
}

static napi_value set(napi_env env, napi_value obj, const char *key,
                      napi_value v)
{
	if (!v || napi_set_named_property(env, obj, key, v) != napi_ok)
		return NULL;
	return obj;
}

static napi_value num(napi_env env, double d)
{
	napi_value v;
	NAPI_OK(napi_create_double(env, d, &v));
	return v;
}

static napi_value str(napi_env env, const char *s)
{
	napi_value v;
	NAPI_OK(napi_create_string_utf8(env, s ? s : "", NAPI_AUTO_LENGTH, &v));
	return v;
}

static napi_value boolean(napi_env env, bool b)
{
	napi_value v;
	NAPI_OK(napi_get_boolean(env, b, &v));
	return v;
}

/* { generation, revision, timeMs, otherRevision, fellBack,
     files: [[name, Buffer]...] } */
static napi_value snapshot(napi_env env, struct cp_call *c)
{
	const fsafe_checkpoint_snapshot *s = c->snap;
	napi_value obj, files, pair, v;
	size_t n = fsafe_checkpoint_snapshot_count(s);
	int warn = c->call.rc;
	NAPI_OK(napi_create_object(env, &obj));
	if (!set(env, obj, "generation",
	         num(env, (double)fsafe_checkpoint_snapshot_generation(s))) ||
	    !set(env, obj, "revision",
	         str(env, fsafe_checkpoint_snapshot_revision(s))) ||
	    !set(env, obj, "timeMs",
	         num(env, (double)fsafe_checkpoint_snapshot_time_ms(s))) ||
	    !set(env, obj, "otherRevision",
	         boolean(env, warn & FSAFE_CHECKPOINT_OTHER_REVISION)) ||
	    !set(env, obj, "fellBack",
	         boolean(env, warn & FSAFE_CHECKPOINT_FELL_BACK)))
		return NULL;
	NAPI_OK(napi_create_array_with_length(env, n, &files));
	for (size_t i = 0; i < n; i++) {
		NAPI_OK(napi_create_array_with_length(env, 2, &pair));
		NAPI_OK(napi_set_element(env, pair, 0,
		        str(env, fsafe_checkpoint_snapshot_name(s, i))));
		NAPI_OK(napi_create_buffer_copy(env,
		        (size_t)fsafe_checkpoint_snapshot_size(s, i),
		        fsafe_checkpoint_snapshot_data(s, i), NULL, &v));
		NAPI_OK(napi_set_element(env, pair, 1, v));
		NAPI_OK(napi_set_element(env, files, (uint32_t)i, pair));
	}
	return set(env, obj, "files", files);
}

static napi_value value(napi_env env, struct pool_call *pc)
{
	struct cp_call *c = (struct cp_call *)pc;
	napi_value v, obj;
	switch (c->op) {
	case OPEN:
		NAPI_OK(napi_create_object(env, &obj));
		NAPI_OK(napi_create_external(env, c->h, finalize_cp, NULL, &v));
		c->h = NULL; /* the external owns it now */
		if (!set(env, obj, "handle", v) ||
		    !set(env, obj, "unclean", boolean(env, c->unclean)))
			return NULL;
		return obj;
	case SAVE:
		return num(env, (double)c->generation);
	case LOAD:
		return snapshot(env, c);
	case GENERATIONS:
		NAPI_OK(napi_create_array_with_length(env, c->n, &v));
		for (size_t i = 0; i < c->n; i++)
			NAPI_OK(napi_set_element(env, v, (uint32_t)i,
			                         num(env, (double)c->seqs[i])));
		return v;
	case CLOSE:
		break;
	}
	return NULL;
}

static void release(struct pool_call *pc)
{
	struct cp_call *c = (struct cp_call *)pc;
	if (c->op == OPEN && c->h) /* failed, or no external made */
		finalize_cp(NULL, c->h, NULL);
	for (size_t i = 0; c->files && i < c->n; i++) {
		free(c->files[i].name);
		free(c->files[i].data);
	}
	free(c->files);
	free(c->seqs);
	fsafe_checkpoint_snapshot_free(c->snap);
	free(c->path);
	free(c->revision);
	free(c);
}

/* argv[2] keep, argv[3] revision. */
static struct pool_call *open_call(napi_env env, char *path, uint32_t flags,
                                   const napi_value *argv)
{
	uint32_t keep;
	struct cp_call *c = pool_call_new(env, sizeof *c, run, value,
	                                  release);
	if (!c) {
		free(path);
		return NULL;
	}
	c->op = OPEN;
	c->path = path;
	c->opts = (struct fsafe_checkpoint_opts)FSAFE_CHECKPOINT_OPTS_INIT;
	if (napi_get_value_uint32(env, argv[2], &keep) != napi_ok ||
	    !(c->h = fsafe_node_alloc(env, sizeof *c->h)) ||
	    !(c->revision = fsafe_node_string(env, argv[3]))) {
		release(&c->call);
		return NULL;
	}
	c->opts.flags = flags;
	c->opts.keep = keep;
	c->opts.revision = c->revision; /* read by the open */
	c->opts.error = &c->h->error;   /* kept by the handle */
	c->call.error = &c->h->error;
	return &c->call;
}

/* checkpointOpen(path, flags, keep, revision) -> Promise<{handle, unclean}>. */
static napi_value cp_open(napi_env env, napi_callback_info info)
{
	return pool_open(env, info, 4, "fsafe.Checkpoint.open", open_call);
}

/* Copies of [[name, Buffer]...]; false with an exception pending. */
static bool copy_files(napi_env env, napi_value arr, struct cp_call *c)
{
	uint32_t n;
	if (napi_get_array_length(env, arr, &n) != napi_ok)
		return false;
	if (!(c->files = calloc(n ? n : 1, sizeof *c->files))) {
		napi_throw_error(env, "ENOMEM", "out of memory");
		return false;
	}
	for (uint32_t i = 0; i < n; i++) {
		napi_value pair, name, buf;
		void *p;
		struct cp_file *f = &c->files[i];
		c->n = i + 1;
		if (napi_get_element(env, arr, i, &pair) != napi_ok ||
		    napi_get_element(env, pair, 0, &name) != napi_ok ||
		    napi_get_element(env, pair, 1, &buf) != napi_ok ||
		    !(f->name = fsafe_node_string(env, name)) ||
		    napi_get_buffer_info(env, buf, &p, &f->len) != napi_ok)
			return false;
		if (!(f->data = fsafe_node_dup(env, p, f->len)))
			return false;
	}
	return true;
}

/* checkpointOp(handle, op, arg, flags): SAVE files | LOAD generation
   (flags) | GENERATIONS | CLOSE. */
static napi_value cp_op(napi_env env, napi_callback_info info)
{
	napi_value argv[4];
	uint32_t op;
	double gen;
	NAPI_OK(fsafe_node_args(env, info, 4, argv));
	struct cp_handle *h = pool_external(env, argv[0]);
	if (!h)
		return NULL;
	if (!h->cp)
		return fsafe_node_throw(env, -EBADF);
	NAPI_OK(napi_get_value_uint32(env, argv[1], &op));
	if (op < SAVE || op > CLOSE) {
		napi_throw_range_error(env, NULL, "bad checkpoint operation");
		return NULL;
	}
	struct cp_call *c = pool_call_new(env, sizeof *c, run, value,
	                                  release);
	if (!c)
		return NULL;
	c->op = (enum cp_op)op;
	c->h = h;
	c->call.error = &h->error;
	bool ok = true;
	if (op == SAVE)
		ok = copy_files(env, argv[2], c);
	else if (op == LOAD)
		ok = napi_get_value_double(env, argv[2], &gen) == napi_ok &&
		     napi_get_value_uint32(env, argv[3], &c->load_flags) == napi_ok;
	if (!ok) {
		c->h = NULL;
		release(&c->call);
		return NULL;
	}
	if (op == LOAD)
		c->generation = gen < 0 ? 0 : (uint64_t)gen;
	return pool_queue(env, "fsafe.Checkpoint", &c->call, argv[0]);
}

const struct fsafe_node_fn fsafe_node_checkpoint[] = {
	{"checkpointOpen", cp_open},
	{"checkpointOp", cp_op},
	{NULL, NULL},
};
