#define _GNU_SOURCE
#include "snap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of `dir` (no "." / ".."); NULL-terminated. */
static char **names(const char *dir)
{
	DIR *d = opendir(dir);
	size_t n = 0, cap = 16;
	char **v = malloc(cap * sizeof(*v));
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n + 1 >= cap)
			v = realloc(v, (cap *= 2) * sizeof(*v));
		v[n++] = strdup(e->d_name);
	}
	if (d)
		closedir(d);
	qsort(v, n, sizeof(*v), by_name);
	v[n] = NULL;
	return v;
}

static void put_file(FILE *out, const char *path)
{
	FILE *f = fopen(path, "rb");
	int c;

	if (!f) {
		fprintf(out, " unreadable:%d", errno);
		return;
	}
	fputc(' ', out);
	while ((c = fgetc(f)) != EOF)
		fprintf(out, "%02x", c);
	fclose(f);
}

static void put_tree(FILE *out, const char *dir, const char *rel,
                     const char *skip)
{
	char **v = names(dir);

	for (char **p = v; *p; p++) {
		char path[PATH_MAX], sub[PATH_MAX], link[PATH_MAX];
		struct stat st;

		if (!*rel && skip && !strcmp(*p, skip))
			goto next;
		snprintf(path, sizeof(path), "%s/%s", dir, *p);
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", *p);
		if (lstat(path, &st) < 0) {
			fprintf(out, "%s gone\n", sub);
			goto next;
		}
		fprintf(out, "%s %o %lld %lld.%09ld ino=%llu", sub,
		        (unsigned)st.st_mode, (long long)st.st_size,
		        (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		        (unsigned long long)st.st_ino);
		if (S_ISREG(st.st_mode))
			put_file(out, path);
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(path, link, sizeof(link) - 1);
			fprintf(out, " -> %.*s", (int)(n > 0 ? n : 0), link);
		}
		fputc('\n', out);
		if (S_ISDIR(st.st_mode))
			put_tree(out, path, sub, NULL);
next:
		free(*p);
	}
	free(v);
}

char *snap_take(const char *dir, const char *skip)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	struct stat st;

	if (!out)
		abort();
	if (stat(dir, &st) == 0)
		fprintf(out, ". %o\n", (unsigned)st.st_mode);
	put_tree(out, dir, "", skip);
	fclose(out);
	return buf;
}

#define WATCH_MASK                                                          \
	(IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO |  \
	 IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)

static void watch_tree(int fd, const char *dir, const char *skip)
{
	char **v = names(dir);

	inotify_add_watch(fd, dir, WATCH_MASK);
	for (char **p = v; *p; p++) {
		char path[PATH_MAX];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, *p);
		if ((!skip || strcmp(*p, skip)) && lstat(path, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			watch_tree(fd, path, NULL);
		free(*p);
	}
	free(v);
}

int snap_watch(const char *dir, const char *skip)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (fd >= 0)
		watch_tree(fd, dir, skip);
	return fd;
}

int snap_events(int fd, const char *skip, char *what, int len)
{
	char buf[64 * 1024] __attribute__((aligned(8)));
	int count = 0;
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (void *)p;
			p += sizeof(*e) + e->len;
			bool on_skip = e->len && skip && !strcmp(e->name, skip);
			if (on_skip && (e->mask & (IN_ATTRIB | IN_MODIFY)))
				continue;
			if (count++ == 0)
				snprintf(what, (size_t)len, "event %#x on '%s'",
				         e->mask, e->len ? e->name : "(dir)");
		}
	}
	return count;
}

void snap_unwatch(int fd)
{
	if (fd >= 0)
		close(fd);
}
