#define _GNU_SOURCE
#include "cli_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_signal.h"

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("fsafe: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_usage_error(const char *cmd, const char *why, const char *usage)
{
	cli_warn("%s: %s", cmd, why);
	fprintf(stderr, "%s(fsafe %s --help for details)\n", usage, cmd);
	return CLI_USAGE;
}

bool cli_flush_stdout(const char *cmd)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return true;
	cli_warn("%s: writing standard output: %s", cmd,
	         errno ? strerror(errno) : "error");
	return false;
}

int cli_read_all(int fd, uint64_t max, char **buf, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap + 1);

	for (;;) {
		if (!b)
			return -ENOMEM;
		if (n == cap) {
			char *nb = realloc(b, (cap *= 2) + 1);
			if (!nb)
				free(b);
			b = nb;
			continue;
		}
		ssize_t r = read(fd, b + n, cap - n);
		/* A signal we catch ends the read; any other is retried. */
		if (r < 0 && errno == EINTR && !cli_signal_caught())
			continue;
		if (r < 0 || (n += (size_t)r) > max) {
			int err = r < 0 ? -errno : -EMSGSIZE;
			free(b);
			return err;
		}
		if (r == 0)
			break;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int cli_open_std(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* The lowest free number: fd itself. Kept open for good. */
		int nfd = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
		if (nfd < 0)
			return -errno;
		if (nfd != fd) {
			close(nfd);
			return -EBADF;
		}
	}
	return 0;
}

bool cli_root_refusal(const struct fsafe_error *e, int r,
                      const char *root_name, char *buf, size_t len)
{
	/* The errno of a refusal (EXDEV, ELOOP) only blurs what its step
	   says; any other failure is the writer's, reported as such. */
	if ((r != -EXDEV && r != -ELOOP) || !e->step)
		return false;
	snprintf(buf, len, "%s (beneath %s)", e->step, root_name);
	return true;
}

const char *cli_file_type(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return NULL;
	return S_ISREG(st.st_mode)    ? "a regular file"
	       : S_ISLNK(st.st_mode)  ? "a symbolic link"
	       : S_ISDIR(st.st_mode)  ? "a directory"
	       : S_ISFIFO(st.st_mode) ? "a FIFO"
	       : S_ISSOCK(st.st_mode) ? "a socket"
	                              : "a device";
}

void cli_warn_dir(const char *label, const char *path, int r)
{
	const char *what = cli_file_type(path);
	struct stat st;
	bool link = what && !strcmp(what, "a symbolic link");

	if (link && stat(path, &st) < 0 && errno == ENOENT)
		cli_warn("%s: a dangling symbolic link is there, not a "
		         "directory", label);
	else if (r == -ENOTDIR && what && !link)
		cli_warn("%s: %s is there, not a directory", label, what);
	else
		cli_warn("%s: %s", label, fsafe_strerror(r));
}
