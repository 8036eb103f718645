#define _GNU_SOURCE
#include "fakesink.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <cmocka.h>

struct fakesink *fs_new(void)
{
	void *p = mmap(NULL, sizeof(struct fakesink), PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

void fs_free(struct fakesink *k)
{
	munmap(k, sizeof(*k));
}

size_t fs_record(uint64_t seq, unsigned char *buf)
{
	size_t n = (size_t)((seq * 37) % 300);

	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(seq * 31 + i * 7 + (seq >> 8));
	return n;
}

void fs_append(fsafe_spool *s, uint64_t first, uint64_t n)
{
	static unsigned char b[300];

	for (uint64_t i = 0; i < n; i++) {
		struct iovec v = { b, fs_record(first + i, b) };
		uint64_t got;
		assert_int_equal(fsafe_spool_append(s, &v, 1, &got), 0);
		assert_int_equal(got, first + i);
	}
}

static int k_start(const char *id, uint64_t max_retry_ms, void *arg)
{
	struct fakesink *k = arg;

	assert_int_equal(strlen(id), 32);
	if (k->id[0])
		assert_string_equal(k->id, id); /* the same spool, always */
	memcpy(k->id, id, 33);
	k->max_retry_ms = max_retry_ms;
	return k->refuse;
}

static void keep(struct fakesink *k, const struct fsafe_forward_record *r)
{
	unsigned char b[300];

	assert_true(r->seq >= 1 && r->seq <= FS_MAX);
	assert_int_equal(r->len, fs_record(r->seq, b));
	/* An empty record's too: a sink may memcpy it, and NULL is UB there. */
	assert_non_null(r->data);
	assert_memory_equal(r->data, b, r->len);
	if (k->copies[r->seq]++ == 0)
		k->order[k->stored++] = r->seq;
}

static int k_send(const struct fsafe_forward_record *recs, size_t n,
                  void *arg)
{
	struct fakesink *k = arg;
	uint64_t call = ++k->calls, bytes = 0;
	bool failing = k->fail_at && (call == k->fail_at ||
	                              (k->fail_on && call > k->fail_at));

	for (size_t i = 0; i < n; i++) {
		bytes += recs[i].len;
		if (i)
			assert_int_equal(recs[i].seq, recs[i - 1].seq + 1);
	}
	if (n > k->max_batch)
		k->max_batch = n;
	if (bytes > k->max_batch_bytes)
		k->max_batch_bytes = bytes;
	if (k->cancel)
		fsafe_cancel_request(k->cancel);
	if (failing && !k->store_then_fail)
		return k->err ? k->err : -EIO;
	for (size_t i = 0; i < n; i++)
		keep(k, &recs[i]);
	return failing ? (k->err ? k->err : -EIO) : 0;
}

struct fsafe_forward_sink fs_sink(struct fakesink *k)
{
	return (struct fsafe_forward_sink){ .start = k_start, .send = k_send,
	                                    .arg = k };
}

void fs_assert_all(const struct fakesink *k, uint64_t n)
{
	assert_int_equal(k->stored, n);
	for (uint64_t i = 0; i < n; i++)
		if (k->order[i] != i + 1)
			fail_msg("record %llu arrived at place %llu",
			         (unsigned long long)k->order[i],
			         (unsigned long long)i + 1);
}
