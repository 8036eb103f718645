/* The owner record: format, defensive parse, and the verdict on liveness. */
#define _GNU_SOURCE
#include "owner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"
#include "util.h"

#define RECORD_VERSION 1
#define TOKEN_BYTES 16
#define UUID_LEN 36

static const char hexdigits[] = "0123456789abcdef";

/* ---- reading small files of /proc through the system-call table ---- */

/* Read up to cap-1 bytes of a file and NUL-terminate them. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	int fd = fsafe__openat(AT_FDCWD, path, O_RDONLY | O_NOCTTY, 0);
	size_t n = 0;
	ssize_t r = 0;

	if (fd < 0)
		return fd;
	while (n < cap - 1 && (r = fsafe__read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	fsafe__close(fd);
	if (r < 0)
		return r;
	buf[n] = '\0';
	return (ssize_t)n;
}

/* Digits only, no sign, no leading zero, no overflow past `max`. */
static bool parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* The command name (field 2) may hold spaces and ')': fields 3 on start
   after the last ')'. */
int fsafe__proc_stat(pid_t pid, uint64_t *start, char *state)
{
	char path[64], buf[2048];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((n = slurp(path, buf, sizeof(buf))) < 0)
		return (int)n;
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EBADMSG;
	p += 2;
	*state = *p;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EBADMSG;
		p++;
	}
	size_t len = strcspn(p, " \n");
	return parse_u64(p, len, UINT64_MAX, start) ? 0 : -EBADMSG;
}

static bool is_uuid(const char *s, size_t len)
{
	if (len != UUID_LEN)
		return false;
	for (size_t i = 0; i < len; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !strchr(hexdigits, s[i]) || !s[i])
			return false;
	}
	return true;
}

static bool is_host(const char *s, size_t len)
{
	if (len == 0 || len > FSAFE_LOCK_HOST_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

static bool is_hex(const char *s, size_t len, size_t want)
{
	if (len != want)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr(hexdigits, s[i]))
			return false;
	return true;
}

static int read_boot_id(char out[UUID_LEN + 1])
{
	char buf[64];
	ssize_t n = slurp("/proc/sys/kernel/random/boot_id", buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	if (n < UUID_LEN || !is_uuid(buf, UUID_LEN))
		return -EBADMSG;
	memcpy(out, buf, UUID_LEN);
	out[UUID_LEN] = '\0';
	return 0;
}

/* "pid:[4026531836]" -> 4026531836; 0 where namespaces are not visible. */
static uint64_t read_pidns(void)
{
	char buf[64];
	ssize_t n = SYS->readlinkat(AT_FDCWD, "/proc/self/ns/pid", buf,
	                            sizeof(buf) - 1);
	uint64_t v;

	if (n < 7 || memcmp(buf, "pid:[", 5) != 0 || buf[n - 1] != ']')
		return 0;
	return parse_u64(buf + 5, (size_t)n - 6, UINT64_MAX, &v) ? v : 0;
}

int fsafe__owner_self(struct fsafe_lock_owner *o, bool kernel)
{
	uint8_t rnd[TOKEN_BYTES];
	char state;
	int r;

	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->version = RECORD_VERSION;
	o->kernel = kernel;
	o->pid = getpid();
	if ((r = fsafe__proc_stat(o->pid, &o->start, &state)) < 0)
		return r;
	if ((r = read_boot_id(o->boot_id)) < 0)
		return r;
	if (gethostname(o->host, sizeof(o->host) - 1) < 0)
		return -errno;
	if (!is_host(o->host, strlen(o->host)))
		return -EINVAL;
	o->pidns = read_pidns();
	if ((r = fsafe__random(rnd, sizeof(rnd))) < 0)
		return r;
	for (int i = 0; i < TOKEN_BYTES; i++) {
		o->token[2 * i] = hexdigits[rnd[i] >> 4];
		o->token[2 * i + 1] = hexdigits[rnd[i] & 0xf];
	}
	o->time_ms = fsafe__now_ms();
	o->liveness = FSAFE_OWNER_ALIVE;
	return 0;
}

int fsafe__owner_format(const struct fsafe_lock_owner *o, char *buf,
                        size_t cap)
{
	int n = snprintf(buf, cap,
	                 "fsafe-lock %u\nmode %s\npid %d\nstart %llu\n"
	                 "boot %s\nhost %s\npidns %llu\ntoken %s\ntime %lld\n",
	                 o->version, o->kernel ? "kernel" : "link", (int)o->pid,
	                 (unsigned long long)o->start, o->boot_id, o->host,
	                 (unsigned long long)o->pidns, o->token,
	                 (long long)o->time_ms);
	return n < 0 || (size_t)n >= cap ? -EOVERFLOW : n;
}

/* ---- parsing: one expected line at a time ---- */

struct cursor {
	const char *p, *end;
};

/* The value of the next line if it is "key value\n". */
static bool next_field(struct cursor *c, const char *key, const char **val,
                       size_t *len)
{
	size_t klen = strlen(key);
	size_t left = (size_t)(c->end - c->p);

	if (left < klen + 2 || memcmp(c->p, key, klen) != 0 || c->p[klen] != ' ')
		return false;
	const char *v = c->p + klen + 1;
	const char *nl = memchr(v, '\n', (size_t)(c->end - v));
	if (!nl)
		return false;
	*val = v;
	*len = (size_t)(nl - v);
	c->p = nl + 1;
	return true;
}

static bool field_u64(struct cursor *c, const char *key, uint64_t max,
                      uint64_t *out)
{
	const char *v;
	size_t n;

	return next_field(c, key, &v, &n) && parse_u64(v, n, max, out);
}

static bool field_text(struct cursor *c, const char *key,
                       bool (*valid)(const char *, size_t), char *out)
{
	const char *v;
	size_t n;

	if (!next_field(c, key, &v, &n) || !valid(v, n))
		return false;
	memcpy(out, v, n);
	out[n] = '\0';
	return true;
}

static bool valid_host(const char *s, size_t n) { return is_host(s, n); }
static bool valid_uuid(const char *s, size_t n) { return is_uuid(s, n); }
static bool valid_token(const char *s, size_t n)
{
	return is_hex(s, n, 2 * TOKEN_BYTES);
}

static bool field_mode(struct cursor *c, bool *kernel)
{
	const char *v;
	size_t n;

	if (!next_field(c, "mode", &v, &n))
		return false;
	*kernel = n == 6 && memcmp(v, "kernel", 6) == 0;
	return *kernel || (n == 4 && memcmp(v, "link", 4) == 0);
}

static bool parse_body(struct cursor *c, struct fsafe_lock_owner *o)
{
	uint64_t pid, time;

	if (!field_mode(c, &o->kernel) ||
	    !field_u64(c, "pid", INT32_MAX, &pid) || pid == 0 ||
	    !field_u64(c, "start", UINT64_MAX, &o->start) ||
	    !field_text(c, "boot", valid_uuid, o->boot_id) ||
	    !field_text(c, "host", valid_host, o->host) ||
	    !field_u64(c, "pidns", UINT64_MAX, &o->pidns) ||
	    !field_text(c, "token", valid_token, o->token) ||
	    !field_u64(c, "time", INT64_MAX, &time))
		return false;
	o->pid = (pid_t)pid;
	o->time_ms = (int64_t)time;
	return c->p == c->end;
}

int fsafe__owner_parse(const char *buf, size_t len,
                       struct fsafe_lock_owner *o)
{
	struct cursor c = { buf, buf + len };
	uint64_t version;

	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	if (len > FSAFE__OWNER_MAX ||
	    !field_u64(&c, "fsafe-lock", UINT32_MAX, &version) || version == 0)
		return -EBADMSG;
	o->version = (unsigned)version;
	if (version != RECORD_VERSION)
		return -EPROTONOSUPPORT;
	if (!parse_body(&c, o)) {
		memset(o, 0, sizeof(*o));
		o->size = sizeof(*o);
		return -EBADMSG;
	}
	return 0;
}

ssize_t fsafe__owner_read_raw(int fd, char *buf)
{
	return fsafe__pread_full(fd, buf, FSAFE__OWNER_MAX + 1, 0);
}

/* ---- the verdict ---- */

/* Same host, boot and pid namespace: judge the pid itself. */
static enum fsafe_lock_liveness judge_pid(const struct fsafe_lock_owner *o)
{
	uint64_t start;
	char state;
	int k = SYS->kill(o->pid, 0) < 0 ? errno : 0;

	if (k == ESRCH)
		return FSAFE_OWNER_DEAD;
	if (k != 0 && k != EPERM)
		return FSAFE_OWNER_ALIVE; /* no proof either way */
	int r = fsafe__proc_stat(o->pid, &start, &state);
	if (r == -ENOENT && k == 0)
		return FSAFE_OWNER_DEAD; /* exited since kill() */
	if (r < 0)
		return FSAFE_OWNER_ALIVE;
	/* A different start time is another process under a reused pid; a
	   zombie can hold nothing. Either is proof, even behind EPERM. */
	if (start != o->start || state == 'Z' || state == 'X')
		return FSAFE_OWNER_DEAD;
	return FSAFE_OWNER_ALIVE;
}

enum fsafe_lock_liveness fsafe__owner_judge(const struct fsafe_lock_owner *o,
                                            const struct fsafe_lock_owner *self)
{
	if (o->version != RECORD_VERSION || strcmp(o->host, self->host) != 0)
		return FSAFE_OWNER_UNKNOWN;
	if (strcmp(o->boot_id, self->boot_id) != 0)
		return FSAFE_OWNER_DEAD; /* that boot's processes are all gone */
	/* Containers may share a host name and a boot: another pid
	   namespace's pids mean nothing here. */
	if (o->pidns && self->pidns && o->pidns != self->pidns)
		return FSAFE_OWNER_UNKNOWN;
	return judge_pid(o);
}
