/* The checkpoint's manifest: its text, written and parsed (manifest.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsafe.h"
#include "checkpoint.h"
#include "manifest.h"
#include "sha256.h"

bool fsafe__ckpt_has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int fsafe__ckpt_check_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > FSAFE_CHECKPOINT_NAME_MAX || strchr(name, '/') ||
	    !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strcmp(name, FSAFE__CKPT_MANIFEST) || fsafe__ckpt_has_control(name) ||
	    fsafe_is_staging_name(name))
		return -EINVAL;
	return 0;
}

void fsafe__manifest_free(struct fsafe__manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->e[i].name);
	free(m->e);
	free(m->revision);
	memset(m, 0, sizeof(*m));
}

int fsafe__manifest_cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct fsafe__ckpt_entry *)a)->name,
	              ((const struct fsafe__ckpt_entry *)b)->name);
}

/* Append to a growing string; false when out of memory. */
struct sbuf {
	char *p;
	size_t n, cap;
	bool oom;
};

static void sb_add(struct sbuf *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sb_add(struct sbuf *s, const char *fmt, ...)
{
	va_list ap;

	for (int tries = 0; tries < 2 && !s->oom; tries++) {
		va_start(ap, fmt);
		int k = vsnprintf(s->p ? s->p + s->n : NULL,
		                  s->p ? s->cap - s->n : 0, fmt, ap);
		va_end(ap);
		if (s->p && s->n + (size_t)k < s->cap) {
			s->n += (size_t)k;
			return;
		}
		size_t cap = (s->cap ? s->cap : 4096);
		while (cap <= s->n + (size_t)k)
			cap *= 2;
		char *np = realloc(s->p, cap);
		if (!np)
			s->oom = true;
		else
			s->p = np, s->cap = cap;
	}
}

/* The manifest's last line carries the hash of everything before it. */
int fsafe__manifest_format(const struct fsafe__manifest *m, char **out,
                           size_t *len)
{
	struct sbuf s = { 0 };
	char hex[65];

	sb_add(&s, "fsafe-checkpoint %d\nrevision %s\nsequence %" PRIu64
	       "\ntime %" PRId64 "\nfiles %zu\n", FSAFE__MANIFEST_VERSION,
	       m->revision, m->seq, m->time_ms, m->n);
	for (size_t i = 0; i < m->n; i++)
		sb_add(&s, "%" PRIu64 " %s %08" PRIx32 " %s\n", m->e[i].size,
		       m->e[i].hash, m->e[i].crc, m->e[i].name);
	if (!s.oom) {
		fsafe__sha256_hex_of(s.p, s.n, hex);
		sb_add(&s, "end %s\n", hex);
	}
	if (s.oom) {
		free(s.p);
		return -ENOMEM;
	}
	*out = s.p;
	*len = s.n;
	return 0;
}

/* n lowercase hex digits at s (a NUL ends them early: false). */
static bool is_hex(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* "<crc32c, 8 hex> " at *s (version 2): moved past it, or false. */
static bool take_crc(char **s, struct fsafe__ckpt_entry *e)
{
	if (!is_hex(*s, 8) || (*s)[8] != ' ')
		return false;
	e->crc = (uint32_t)strtoul(*s, NULL, 16);
	e->has_crc = true;
	*s += 9;
	return true;
}

/* The next line of *p (NUL-terminated in place), or NULL at the end. */
static char *next_line(char **p)
{
	char *s = *p, *nl = s ? strchr(s, '\n') : NULL;

	if (!nl)
		return NULL;
	*nl = '\0';
	*p = nl + 1;
	return s;
}

static int parse_entries(char **p, struct fsafe__manifest *m, size_t n,
                         int version)
{
	if (n > (size_t)1 << 24 || !(m->e = calloc(n ? n : 1, sizeof(*m->e))))
		return n > (size_t)1 << 24 ? -EBADMSG : -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char *line = next_line(p), *sp;
		unsigned long long size;
		int at = 0;
		if (!line || sscanf(line, "%llu %n", &size, &at) != 1 || !at ||
		    strlen(line + at) < 66 || !is_hex(line + at, 64) ||
		    line[at + 64] != ' ')
			return -EBADMSG;
		sp = line + at + 65;
		if ((version >= 2 && !take_crc(&sp, &m->e[i])) ||
		    fsafe__ckpt_check_name(sp) < 0 ||
		    (i && strcmp(m->e[i - 1].name, sp) >= 0))
			return -EBADMSG; /* sorted and unique, or not ours */
		m->e[i].size = size;
		memcpy(m->e[i].hash, line + at, 64);
		m->e[i].hash[64] = '\0';
		if (!(m->e[i].name = strdup(sp)))
			return -ENOMEM;
		m->n = i + 1;
	}
	return 0;
}

int fsafe__manifest_parse(char *text, size_t len, struct fsafe__manifest *m)
{
	char hex[65], *p = text, *endl = NULL;
	int version;
	size_t n;
	long long t;
	unsigned long long seq;

	memset(m, 0, sizeof(*m));
	/* The last line carries the hash of everything before it. */
	if (len < 70 || text[len - 1] != '\n' || memchr(text, '\0', len))
		return -EBADMSG;
	text[len - 1] = '\0';
	endl = strrchr(text, '\n');
	if (!endl || strncmp(endl + 1, "end ", 4) || strlen(endl + 5) != 64)
		return -EBADMSG;
	fsafe__sha256_hex_of(text, (size_t)(endl + 1 - text), hex);
	if (strcmp(hex, endl + 5) != 0)
		return -EBADMSG;
	endl[1] = '\0';
	char *l = next_line(&p);
	if (!l || sscanf(l, "fsafe-checkpoint %d", &version) != 1)
		return -EBADMSG;
	if (version < 1 || version > FSAFE__MANIFEST_VERSION)
		return -EPROTONOSUPPORT;
	if (!(l = next_line(&p)) || strncmp(l, "revision ", 9) ||
	    !(m->revision = strdup(l + 9)))
		return l ? -ENOMEM : -EBADMSG;
	if (!(l = next_line(&p)) || sscanf(l, "sequence %llu", &seq) != 1 ||
	    !(l = next_line(&p)) || sscanf(l, "time %lld", &t) != 1 ||
	    !(l = next_line(&p)) || sscanf(l, "files %zu", &n) != 1)
		return -EBADMSG;
	m->seq = seq;
	m->time_ms = t;
	int r = parse_entries(&p, m, n, version);
	return r < 0 ? r : (*p ? -EBADMSG : 0);
}
