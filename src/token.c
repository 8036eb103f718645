/* The token of the conditional replace: fixed-width hex, no separators. */
#define _GNU_SOURCE
#include "token.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fsafe.h"
#include "target.h"

/* Four 64-bit fields, then the nanoseconds. */
#define TOKEN_FMT "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%08" PRIx32

_Static_assert(FSAFE_TOKEN_LEN == 4 * 16 + 8 + 1, "token layout");

void fsafe__token_of(const struct stat *st, struct fsafe__token *t)
{
	t->dev = (uint64_t)st->st_dev;
	t->ino = (uint64_t)st->st_ino;
	t->size = (uint64_t)st->st_size;
	t->ctime_sec = (uint64_t)st->st_ctim.tv_sec;
	t->ctime_nsec = (uint32_t)st->st_ctim.tv_nsec;
}

static int hex(const char *s, int digits, uint64_t *out)
{
	uint64_t v = 0;

	for (int i = 0; i < digits; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0'
		      : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return -EINVAL;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

int fsafe__token_parse(const char *text, struct fsafe__token *t)
{
	uint64_t ns;

	if (!text || strlen(text) != FSAFE_TOKEN_LEN - 1)
		return -EINVAL;
	if (hex(text, 16, &t->dev) < 0 || hex(text + 16, 16, &t->ino) < 0 ||
	    hex(text + 32, 16, &t->size) < 0 ||
	    hex(text + 48, 16, &t->ctime_sec) < 0 || hex(text + 64, 8, &ns) < 0 ||
	    ns >= 1000000000u)
		return -EINVAL;
	t->ctime_nsec = (uint32_t)ns;
	return 0;
}

bool fsafe__token_matches(const struct fsafe__token *t, const struct stat *st)
{
	struct fsafe__token now;

	fsafe__token_of(st, &now);
	return now.dev == t->dev && now.ino == t->ino && now.size == t->size &&
	       now.ctime_sec == t->ctime_sec && now.ctime_nsec == t->ctime_nsec;
}

int fsafe_token_get(int dirfd, const char *path, unsigned flags,
                    char out[FSAFE_TOKEN_LEN])
{
	struct fsafe__target tg;
	struct fsafe__token t;
	const char *step;
	int r;

	assert(out);
	if (flags & ~(unsigned)FSAFE_NO_FOLLOW)
		return -EINVAL;
	unsigned how = FSAFE__TARGET_BORROW |
	               (flags & FSAFE_NO_FOLLOW ? 0 : FSAFE__TARGET_FOLLOW);
	r = fsafe__target_resolve(dirfd, path, how, &tg, &step);
	if (r < 0)
		return r;
	bool exists = tg.exists;
	fsafe__token_of(&tg.st, &t);
	fsafe__target_close(&tg);
	if (!exists)
		return -ENOENT;
	snprintf(out, FSAFE_TOKEN_LEN, TOKEN_FMT, t.dev, t.ino, t.size,
	         t.ctime_sec, t.ctime_nsec);
	return 0;
}
