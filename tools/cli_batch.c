/*
 * fsafe write --batch: replace many files, each atomically, in group
 * commits that share their device flushes.
 *
 * Input is NUL-separated pairs, TARGET\0SOURCE\0, because every byte but
 * NUL may occur in a file name; for example
 *
 *     find in -type f -printf 'out/%P\0%p\0' | fsafe write --batch -p
 *
 * Sources are streamed into managed writers, GROUP at a time, so memory
 * and open descriptors stay bounded however long the list is.
 */
#define _GNU_SOURCE
#include "cli_batch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_signal.h"
#include "cli_util.h"

/* Pairs per group commit: four descriptors each stay well under the
   default limit of 1024. */
#define GROUP 128

struct pair {
	const char *target, *source;
	struct fsafe_write_opts opts;
	struct fsafe_error err;
	int item; /* index in the batch, or -1 if it failed before */
};


static void pair_fail(struct pair *p, int r, const char *step)
{
	p->err = (struct fsafe_error){ .code = r, .sys_errno = -r,
		                       .step = step };
	p->item = -1;
}

/* Stream SOURCE into a writer for TARGET and hand it to the batch. */
static void stage_pair(fsafe_batch *b, struct pair *p)
{
	static char buf[64 * 1024];
	fsafe_writer *w;
	ssize_t n;
	int fd = open(p->source, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return pair_fail(p, -errno, "open source");
	int r = fsafe_writer_open(AT_FDCWD, p->target, &p->opts, &w);
	if (r < 0) {
		close(fd);
		p->item = -1; /* the writer filled p->err */
		return;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR && !cli_signal_caught())
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if ((r = fsafe_writer_write(w, buf, (size_t)n)) < 0)
			break;
	}
	close(fd);
	if (r < 0 && n < 0) {
		fsafe_writer_abort(w);
		return pair_fail(p, r, "read source");
	}
	/* A write error stays in the writer; the batch reports it. */
	p->item = fsafe_batch_add_writer(b, w);
	if (p->item < 0)
		pair_fail(p, p->item, "batch");
}

static int report(const struct pair *p, int r)
{
	const struct fsafe_error *e = &p->err;
	const char *why = fsafe_strerror(e->sys_errno ? -e->sys_errno : r);

	if (r == FSAFE_ENOTDURABLE || e->published)
		cli_warn("write %s: %s: %s; %s published, but durability "
		         "unknown", p->target, e->step, why, p->target);
	else
		cli_warn("write %s: %s: %s; %s unchanged", p->target,
		         e->step ? e->step : "write", why, p->target);
	return 1;
}

/* One group commit; returns how many pairs failed, or -1 on a signal. */
static int commit_group(struct pair *pairs, size_t n)
{
	fsafe_batch *b;
	int failed = 0;

	if (fsafe_batch_new(NULL, &b) < 0)
		return (int)n;
	for (size_t i = 0; i < n && !cli_signal_caught(); i++)
		stage_pair(b, &pairs[i]);
	if (cli_signal_caught()) {
		fsafe_batch_free(b); /* aborts every staged writer */
		return -1;
	}
	fsafe_batch_commit(b);
	for (size_t i = 0; i < n; i++) {
		struct pair *p = &pairs[i];
		int r = p->item < 0 ? p->err.code
		                    : fsafe_batch_result(b, (size_t)p->item);
		if (r < 0)
			failed += report(p, r);
	}
	fsafe_batch_free(b);
	return failed;
}

/* Split the input into pairs; the count, or -1 if a name is unpaired. */
static ssize_t parse_pairs(char *in, size_t len, struct pair **out,
                           const struct fsafe_write_opts *opts)
{
	size_t names = 0, cap = 0;
	struct pair *pairs = NULL;

	for (char *s = in; s < in + len; s += strlen(s) + 1, names++) {
		if (names % 2)
			continue;
		if (names / 2 == cap) {
			cap = cap ? 2 * cap : 64;
			struct pair *more = realloc(pairs, cap * sizeof(*pairs));
			if (!more) {
				free(pairs);
				return -1;
			}
			pairs = more;
		}
		pairs[names / 2] = (struct pair){ .target = s, .opts = *opts };
	}
	if (names % 2 || (len && in[len - 1] != '\0')) {
		free(pairs);
		return -1;
	}
	for (size_t i = 0; i < names / 2; i++) {
		pairs[i].source = pairs[i].target + strlen(pairs[i].target) + 1;
		pairs[i].opts.error = &pairs[i].err;
	}
	*out = pairs;
	return (ssize_t)(names / 2);
}

int cli_write_batch(const struct fsafe_write_opts *opts)
{
	struct pair *pairs = NULL;
	char *in = NULL;
	size_t len;
	int failed = 0, r;

	if (cli_signal_catch(NULL) < 0)
		return CLI_FAIL;
	r = cli_read_all(STDIN_FILENO, SIZE_MAX, &in, &len);
	if (r < 0) {
		if (cli_signal_caught())
			return cli_signal_reraise();
		cli_warn("write --batch: reading standard input: %s; nothing "
		         "written", strerror(-r));
		return CLI_FAIL;
	}
	ssize_t n = parse_pairs(in, len, &pairs, opts);
	if (n < 0) {
		free(in);
		cli_warn("write --batch: input must be TARGET\\0SOURCE\\0 "
		         "pairs; nothing written");
		return CLI_USAGE;
	}
	for (size_t off = 0; off < (size_t)n && failed >= 0; off += GROUP) {
		size_t k = (size_t)n - off < GROUP ? (size_t)n - off : GROUP;
		int f = commit_group(pairs + off, k);
		failed = f < 0 ? -1 : failed + f;
	}
	free(pairs);
	free(in);
	if (failed < 0)
		return cli_signal_reraise();
	return failed ? CLI_FAIL : CLI_OK;
}
