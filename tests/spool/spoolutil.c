#define _GNU_SOURCE
#include "spoolutil.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "spool.h"
#include "testutil.h"

size_t su_record(uint64_t seq, unsigned char *buf)
{
	size_t n = (size_t)((seq * 37) % 300);

	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(seq * 31 + i * 7 + (seq >> 8));
	return n;
}

fsafe_spool *su_open(int dirfd, const char *name, uint64_t segment_size,
                     uint32_t max_record)
{
	struct fsafe_spool_opts o = FSAFE_SPOOL_OPTS_INIT;
	fsafe_spool *s = NULL;

	o.flags = FSAFE_SPOOL_CREATE;
	o.segment_size = segment_size;
	o.max_record = max_record;
	int r = fsafe_spool_open(dirfd, name, &o, &s);
	if (r < 0)
		fail_msg("fsafe_spool_open %s: %s", name, fsafe_strerror(r));
	return s;
}

int su_append(fsafe_spool *s, uint64_t first, uint64_t n, size_t batch)
{
	struct iovec *v = calloc(batch, sizeof(*v));
	unsigned char *bufs = malloc(batch * 300);
	int r = 0;

	for (uint64_t done = 0; r == 0 && done < n;) {
		size_t k = n - done < batch ? (size_t)(n - done) : batch;
		uint64_t got;
		for (size_t i = 0; i < k; i++) {
			v[i].iov_base = bufs + i * 300;
			v[i].iov_len = su_record(first + done + i, bufs + i * 300);
		}
		r = fsafe_spool_append(s, v, k, &got);
		if (r == 0 && got != first + done)
			fail_msg("append got number %llu, expected %llu",
			         (unsigned long long)got,
			         (unsigned long long)(first + done));
		done += k;
	}
	free(v);
	free(bufs);
	return r;
}

uint64_t su_read_all(fsafe_spool *s, uint64_t from, uint64_t *first,
                     uint64_t *last)
{
	fsafe_spool_reader *rd;
	unsigned char want[300];
	const void *d;
	size_t len;
	uint64_t seq, n = 0, prev = 0;
	int r;

	assert_int_equal(fsafe_spool_reader_open(s, from, &rd), 0);
	*first = *last = 0;
	while ((r = fsafe_spool_next(rd, &d, &len, &seq)) == 1) {
		size_t wl = su_record(seq, want);
		if (n && seq != prev + 1)
			fail_msg("record %llu after %llu",
			         (unsigned long long)seq,
			         (unsigned long long)prev);
		if (from != FSAFE_SPOOL_FROM_CURSOR && seq < from)
			fail_msg("record %llu before from=%llu",
			         (unsigned long long)seq,
			         (unsigned long long)from);
		if (len != wl || memcmp(d, want, wl) != 0)
			fail_msg("record %llu: wrong bytes (len %zu, want %zu)",
			         (unsigned long long)seq, len, wl);
		if (!n)
			*first = seq;
		prev = *last = seq;
		n++;
	}
	if (r < 0)
		fail_msg("fsafe_spool_next: %s", fsafe_strerror(r));
	fsafe_spool_reader_close(rd);
	return n;
}

static bool is_segment(const char *name)
{
	uint64_t seq;

	return fsafe__seg_parse(name, &seq);
}

int su_count_segments(const char *dir)
{
	return tu_count_matching(dir, is_segment);
}

struct fsafe_spool_stat su_stat(fsafe_spool *s)
{
	struct fsafe_spool_stat st = FSAFE_SPOOL_STAT_INIT;

	assert_int_equal(fsafe_spool_stat(s, &st), 0);
	return st;
}

void su_fx_init(struct su_fx *f)
{
	f->dir = tu_mkscratch();
	f->fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(f->sp, sizeof(f->sp), "%s/sp", f->dir);
}

void su_fx_fini(struct su_fx *f)
{
	close(f->fd);
	tu_rmtree(f->dir);
	free(f->dir);
}

int su_fx_setup(void **state)
{
	struct su_fx *f = calloc(1, sizeof(*f));

	su_fx_init(f);
	*state = f;
	return 0;
}

int su_fx_teardown(void **state)
{
	su_fx_fini(*state);
	free(*state);
	return 0;
}
