/*
 * Peer driver: GLib's g_file_set_contents_full() with
 * G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE.
 *
 *   glib DIR K SIZE distinct|same
 *
 * Writes K payloads of SIZE bytes (distinct buffers made before the clock)
 * to DIR/t0, DIR/t1, ... or to DIR/target, in one process; prints the
 * elapsed seconds. The loop sits between the access() markers that
 * bench/run cuts strace output at.
 */
#define _GNU_SOURCE
#include <glib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BUFS 1000

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: glib DIR K SIZE distinct|same\n");
		return 2;
	}
	const char *dir = argv[1];
	long k = atol(argv[2]);
	size_t len = (size_t)atol(argv[3]);
	int same = strcmp(argv[4], "same") == 0;
	size_t nbuf = k < MAX_BUFS ? (size_t)k : MAX_BUFS;
	char **bufs = calloc(nbuf, sizeof(*bufs));
	char path[4096];

	if (k <= 0 || len == 0 || !bufs)
		return 2;
	for (size_t i = 0; i < nbuf; i++) {
		if (!(bufs[i] = malloc(len)))
			return 1;
		for (size_t j = 0; j < len; j++)
			bufs[i][j] = (char)(j * 131u + i * 7u + 1u);
	}
	(void)!access("fsafe-bench:begin", F_OK);
	double t0 = now();
	for (long i = 0; i < k; i++) {
		GError *err = NULL;
		if (same)
			snprintf(path, sizeof(path), "%s/target", dir);
		else
			snprintf(path, sizeof(path), "%s/t%ld", dir, i);
		if (!g_file_set_contents_full(path, bufs[(size_t)i % nbuf],
		                              (gssize)len,
		                              G_FILE_SET_CONTENTS_CONSISTENT |
		                                      G_FILE_SET_CONTENTS_DURABLE,
		                              0666, &err)) {
			fprintf(stderr, "glib: %s\n", err->message);
			return 1;
		}
	}
	double t = now() - t0;
	(void)!access("fsafe-bench:end", F_OK);
	printf("%.9f\n", t);
	return 0;
}
