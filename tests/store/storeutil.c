#define _GNU_SOURCE
#include "storeutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

fsafe_store *su_open(const char *path, unsigned flags, unsigned write_flags)
{
	struct fsafe_store_opts o = FSAFE_STORE_OPTS_INIT;
	fsafe_store *s = NULL;

	o.flags = flags | FSAFE_STORE_CREATE;
	o.write_flags = write_flags;
	o.lock_timeout_ms = 20000; /* a stuck lock fails, never hangs */
	int r = fsafe_store_open(AT_FDCWD, path, &o, &s);
	if (r < 0)
		fail_msg("open store %s: %s", path, fsafe_strerror(r));
	return s;
}

void su_put(fsafe_store *s, const char *key, const void *buf, size_t len)
{
	int r = fsafe_store_put(s, key, strlen(key), buf, len, NULL);

	if (r < 0)
		fail_msg("put %s: %s", key, fsafe_strerror(r));
}

enum su_content su_content(fsafe_store *s, const char *key, const void *old,
                           size_t oldlen, const void *new_, size_t newlen)
{
	void *buf = NULL;
	size_t len = 0;
	int r = fsafe_store_get(s, key, strlen(key), &buf, &len, NULL);
	enum su_content c = SU_OTHER;

	if (r == -ENOENT)
		return SU_ABSENT;
	if (r == -EBADMSG)
		return SU_BAD;
	if (r == 0 && old && len == oldlen && !memcmp(buf, old, len))
		c = SU_OLD;
	else if (r == 0 && new_ && len == newlen && !memcmp(buf, new_, len))
		c = SU_NEW;
	free(buf);
	return c;
}

const char *su_content_name(enum su_content c)
{
	static const char *const n[] = { "absent", "OLD", "NEW",
		                         "an invalid record", "other bytes" };
	return n[c];
}

static void append(char *buf, size_t cap, const char *sep, const char *s,
                   size_t n)
{
	size_t used = strlen(buf);

	if (used && used + 1 < cap)
		strncat(buf, sep, cap - used - 1);
	used = strlen(buf);
	if (n > cap - used - 1)
		n = cap - used - 1;
	memcpy(buf + used, s, n);
	buf[used + n] = '\0';
}

static void on_skip(enum fsafe_store_skip why, const char *name,
                    const void *key, size_t keylen, int err, void *arg)
{
	struct su_listing *l = arg;

	(void)key, (void)keylen, (void)err;
	if ((int)why > 0 && (int)why < 8)
		l->skipped[why]++;
	append(l->skipped_names, sizeof(l->skipped_names), ",", name,
	       strlen(name));
}

size_t su_key_text(const void *key, size_t len, char *out)
{
	const unsigned char *k = key;
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		if (k[i] < 0x20 || k[i] >= 0x7f)
			n += (size_t)sprintf(out + n, "\\x%02x", k[i]);
		else
			out[n++] = (char)k[i];
	}
	out[n] = '\0';
	return n;
}

int su_list(fsafe_store *s, unsigned flags, struct su_listing *out)
{
	struct fsafe_store_list_opts o = FSAFE_STORE_LIST_OPTS_INIT;
	struct fsafe_store_entry e;
	fsafe_store_iter *it;

	memset(out, 0, sizeof(*out));
	o.flags = flags;
	o.skipped = on_skip;
	o.arg = out;
	int r = fsafe_store_list(s, &o, &it);
	if (r < 0)
		return r;
	while ((r = fsafe_store_iter_next(it, &e)) > 0) {
		char text[4 * FSAFE_STORE_KEY_MAX + 1];
		append(out->keys, sizeof(out->keys), ",", text,
		       su_key_text(e.key, e.keylen, text));
	}
	fsafe_store_iter_free(it);
	return r;
}

const char *su_strays(const char *dir, const char *const *allowed, char *buf,
                      size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	buf[0] = '\0';
	if (!d)
		fail_msg("opendir %s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		bool ok = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		          !strncmp(e->d_name, "k-", 2);
		for (const char *const *a = allowed; a && *a && !ok; a++)
			ok = !strcmp(e->d_name, *a);
		if (!ok)
			append(buf, len, " ", e->d_name, strlen(e->d_name));
	}
	closedir(d);
	return buf;
}
