/*
 * The spool's identity: 128 random bits as 32 lowercase hex digits and a
 * newline, in the file "id" of the spool, made once and never changed. A
 * consumer that hands records on (the forwarder) names each one
 * "<id>-<sequence number>", so a receiver can drop a record sent twice;
 * a spool made before ids existed gets one the first time it is opened
 * for writing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "fsafe.h"
#include "spool.h"
#include "sys.h"

#define ID_NAME "id"
#define ID_BYTES 16
#define ID_FILE_LEN (2 * ID_BYTES + 1)

static bool id_valid(const char *b, size_t len)
{
	if (len != ID_FILE_LEN || b[2 * ID_BYTES] != '\n')
		return false;
	for (size_t i = 0; i < 2 * ID_BYTES; i++)
		if (!strchr("0123456789abcdef", b[i]) || !b[i])
			return false;
	return true;
}

/* 0 with the id, -ENOENT when there is none, -EBADMSG when the file does
   not hold one, or another negative errno. */
static int id_read(int dfd, char out[FSAFE__SPOOL_ID_LEN + 1])
{
	char b[ID_FILE_LEN + 1];
	int fd = fsafe__open_regular(dfd, ID_NAME, O_RDONLY | O_CLOEXEC, NULL);

	if (fd < 0)
		return fd;
	ssize_t n = fsafe__read(fd, b, sizeof(b));
	fsafe__close(fd);
	if (n < 0)
		return (int)n;
	if (!id_valid(b, (size_t)n))
		return -EBADMSG;
	memcpy(out, b, 2 * ID_BYTES);
	out[2 * ID_BYTES] = '\0';
	return 0;
}

/* A fresh id, durably, unless another opener made one first. */
static int id_make(int dfd)
{
	static const char hex[] = "0123456789abcdef";
	struct fsafe_write_opts wo = FSAFE_WRITE_OPTS_INIT;
	unsigned char rnd[ID_BYTES];
	char b[ID_FILE_LEN];
	int r = fsafe__random(rnd, sizeof(rnd));

	if (r < 0)
		return r;
	for (size_t i = 0; i < ID_BYTES; i++) {
		b[2 * i] = hex[rnd[i] >> 4];
		b[2 * i + 1] = hex[rnd[i] & 0xf];
	}
	b[2 * ID_BYTES] = '\n';
	wo.flags = FSAFE_CREATE_ONLY | FSAFE_NO_FOLLOW;
	r = fsafe_write_fileat(dfd, ID_NAME, b, sizeof(b), &wo);
	return r == -EEXIST ? 0 : r;
}

int fsafe__spool_id_load(int dfd, bool create, char out[FSAFE__SPOOL_ID_LEN + 1])
{
	int r = id_read(dfd, out);

	if (r != -ENOENT || !create)
		return r;
	if ((r = id_make(dfd)) < 0)
		return r;
	return id_read(dfd, out);
}
