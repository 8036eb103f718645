#define _GNU_SOURCE
#include "ibutil.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

fsafe_inbox *ibu_open(const char *dir, unsigned flags)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;
	fsafe_inbox *ib;

	o.flags = flags | FSAFE_INBOX_CREATE;
	int r = fsafe_inbox_open(AT_FDCWD, dir, &o, &ib);
	if (r < 0)
		fail_msg("fsafe_inbox_open %s: %s", dir, fsafe_strerror(r));
	return ib;
}

int ibu_setup(void **state)
{
	struct ibu_fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->scratch = tu_mkscratch();
	snprintf(f->dir, sizeof(f->dir), "%s/ib", f->scratch);
	snprintf(f->out, sizeof(f->out), "%s/outside", f->scratch);
	assert_int_equal(mkdir(f->out, 0755), 0);
	f->ib = ibu_open(f->dir, 0);
	*state = f;
	alarm(IBU_HANG_S);
	return 0;
}

int ibu_setup_consumer(void **state)
{
	ibu_setup(state);
	struct ibu_fx *f = *state;
	assert_int_equal(fsafe_inbox_consumer_open(f->ib, NULL, &f->c), 0);
	return 0;
}

int ibu_teardown(void **state)
{
	struct ibu_fx *f = *state;

	alarm(0);
	fsafe_inbox_consumer_close(f->c);
	fsafe_inbox_close(f->ib);
	tu_rmtree(f->scratch);
	free(f->scratch);
	free(f);
	return 0;
}

void ibu_put(struct ibu_fx *f, const char *text, char *id)
{
	assert_int_equal(fsafe_inbox_deliver(f->ib, text, strlen(text), id), 0);
}

void ibu_payload(unsigned producer, unsigned index, size_t len, char *buf)
{
	int n = snprintf(buf, len, "p%u k%u ", producer, index);

	for (size_t i = (size_t)n; i < len; i++)
		buf[i] = (char)('a' + (producer * 7 + index * 13 + i) % 26);
}

bool ibu_payload_ok(const void *buf, size_t len, unsigned *producer,
                    unsigned *index)
{
	char head[32], want[2048];
	size_t h = len < sizeof(head) - 1 ? len : sizeof(head) - 1;

	if (len < 32 || len > sizeof(want))
		return false;
	memcpy(head, buf, h);
	head[h] = '\0';
	if (sscanf(head, "p%u k%u ", producer, index) != 2)
		return false;
	ibu_payload(*producer, *index, len, want);
	return memcmp(buf, want, len) == 0;
}

size_t ibu_drain(const char *dir, unsigned flags, char (*ids)[64],
                 char **payloads, size_t *lens, size_t cap)
{
	fsafe_inbox *ib = ibu_open(dir, flags);
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m;
	size_t n = 0;
	int r;

	if ((r = fsafe_inbox_recover(ib, 0, NULL)) < 0)
		fail_msg("recover: %s", fsafe_strerror(r));
	if ((r = fsafe_inbox_consumer_open(ib, NULL, &c)) < 0)
		fail_msg("consumer_open: %s", fsafe_strerror(r));
	while ((r = fsafe_inbox_take(c, &m)) == 0) {
		if (n < cap) {
			snprintf(ids[n], 64, "%s", fsafe_inbox_msg_id(m));
			if (payloads) {
				lens[n] = fsafe_inbox_msg_len(m);
				payloads[n] = malloc(lens[n] + 1);
				memcpy(payloads[n], fsafe_inbox_msg_data(m),
				       lens[n]);
			}
		}
		n++;
		if ((r = fsafe_inbox_ack(c, fsafe_inbox_msg_id(m))) < 0)
			fail_msg("ack: %s", fsafe_strerror(r));
		fsafe_inbox_msg_free(m);
	}
	if (r != -EAGAIN)
		fail_msg("take: %s", fsafe_strerror(r));
	if (fsafe_inbox_quarantined(c))
		fail_msg("%u files quarantined", fsafe_inbox_quarantined(c));
	if ((r = fsafe_inbox_consumer_close(c)) < 0)
		fail_msg("consumer_close: %s", fsafe_strerror(r));
	fsafe_inbox_close(ib);
	return n;
}

static bool not_staging(const char *name)
{
	return !fsafe_is_staging_name(name);
}

int ibu_count(const char *dir, const char *sub)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	return tu_count_matching(path, not_staging);
}
