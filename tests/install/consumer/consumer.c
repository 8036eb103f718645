/*
 * A minimal program built against an installed libfsafe, the way a
 * downstream project would: it only sees <fsafe.h> and the installed
 * library.
 *
 * usage: consumer PATH TEXT
 *   Writes TEXT (plus a newline) to PATH with fsafe_write_file(), reads it
 *   back, checks the staging-name predicate and the version, and exits 0
 *   only if everything held. Every failure prints one line to stderr.
 */
#include <fsafe.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#define HEADER_VERSION                                                        \
	STR(FSAFE_VERSION_MAJOR) "." STR(FSAFE_VERSION_MINOR) "." STR(        \
		FSAFE_VERSION_PATCH)

static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "consumer: FAILED: %s\n", what);
		failures++;
	}
}

static int read_back(const char *path, const char *want, size_t len)
{
	char got[4096];
	FILE *f = fopen(path, "rb");

	if (!f) {
		fprintf(stderr, "consumer: cannot reopen %s: %s\n", path,
		        strerror(errno));
		return 0;
	}
	size_t n = fread(got, 1, sizeof(got), f);
	fclose(f);
	return n == len && memcmp(got, want, len) == 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: consumer PATH TEXT\n");
		return 2;
	}

	char text[2048];
	int len = snprintf(text, sizeof(text), "%s\n", argv[2]);
	if (len < 0 || (size_t)len >= sizeof(text)) {
		fprintf(stderr, "consumer: TEXT too long\n");
		return 2;
	}

	struct fsafe_error err = { 0 };
	struct fsafe_write_opts opts = FSAFE_WRITE_OPTS_INIT;
	opts.mode = 0644;
	opts.error = &err;
	int r = fsafe_write_file(argv[1], text, (size_t)len, &opts);
	if (r != 0)
		fprintf(stderr, "consumer: fsafe_write_file(%s): %s (step %s)\n",
		        argv[1], fsafe_strerror(r), err.step ? err.step : "?");
	check(r == 0, "fsafe_write_file returns 0");
	check(r != 0 || read_back(argv[1], text, (size_t)len),
	      "the written file reads back the same bytes");

	/* The public staging-name contract, through the installed header. */
	check(fsafe_is_staging_name(".fsafe-0123456789abcdef01234567.tmp"),
	      "a well-formed staging name is recognised");
	check(!fsafe_is_staging_name(".fsafe-0123456789ABCDEF01234567.tmp"),
	      "upper-case hex is rejected");
	check(!fsafe_is_staging_name("dir/.fsafe-0123456789abcdef01234567.tmp"),
	      "a path with '/' is rejected");
	check(!fsafe_is_staging_name("notes.txt"), "an ordinary name is rejected");
	check(strlen(".fsafe-0123456789abcdef01234567.tmp") ==
	              FSAFE_STAGING_NAME_LEN,
	      "FSAFE_STAGING_NAME_LEN matches the documented form");

	/* The header and the library it was linked against agree. */
	const char *v = fsafe_version();
	if (!v || strcmp(v, HEADER_VERSION) != 0)
		fprintf(stderr, "consumer: library %s, header %s\n",
		        v ? v : "(null)", HEADER_VERSION);
	check(v && strcmp(v, HEADER_VERSION) == 0,
	      "fsafe_version() matches the installed header");

	if (failures) {
		fprintf(stderr, "consumer: %d check(s) failed\n", failures);
		return 1;
	}
	printf("consumer: ok (libfsafe %s)\n", v);
	return 0;
}
