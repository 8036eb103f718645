/*
 * libFuzzer target for the inbox's message parser (src/inbox_format.c).
 *
 * Input: a selector byte, then the bytes of one message file. The file is
 * named by an id whose sequence field is, for an even selector, the low
 * 48 bits of the header's own sequence (so valid headers are reachable),
 * and otherwise a fixed one. The header and payload verdicts are taken
 * from the pure parser; with selector bit 1 set the file is also written
 * into new/ of a real inbox and judged by fsafe_inbox_check and taken.
 *
 * abort() (a finding) if: a file the parser accepts does not re-encode to
 * the same header from its payload; its length is not header + payload;
 * check's verdict differs from the parser's; take returns other bytes
 * than the payload, or neither takes nor quarantines the file; the id
 * predicate accepts a string that is not of the id's exact form.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsafe.h"
#include "inbox.h"

static char dir[4096];
static int dirfd_ = -1;
static fsafe_inbox *ib;

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? 0 : 0;
}

/* The scratch inbox goes when the run ends. */
static void cleanup(void)
{
	fsafe_inbox_close(ib);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct fsafe_inbox_opts o = FSAFE_INBOX_OPTS_INIT;

	(void)argc;
	(void)argv;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof(dir), "%s/fsafe-fuzz-inbox-XXXXXX", base);
	o.flags = FSAFE_INBOX_CREATE;
	if (!mkdtemp(dir) ||
	    (dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    fsafe_inbox_open(dirfd_, "ib", &o, &ib) < 0)
		abort();
	atexit(cleanup);
	return 0;
}

/* The id's exact form, spelled out independently of the parser. */
static int id_form(const char *s)
{
	static const int w[] = { 16, 12, 8, 8, 12 };

	for (int f = 0; f < 5; f++) {
		if (f && *s++ != '.')
			return 0;
		for (int i = 0; i < w[f]; i++, s++)
			if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
				return 0;
	}
	return *s == '\0';
}

static void make_id(const uint8_t *file, size_t size, int own_seq, char *id)
{
	uint64_t seq = 0x123;

	if (own_seq && size >= 16) {
		seq = 0;
		for (int i = 13; i >= 8; i--)
			seq = (seq << 8) | file[i];
	}
	snprintf(id, FSAFE_INBOX_ID_LEN + 1,
	         "0001020304050607.%012llx.01020304.00000001.0a0b0c0d0e0f",
	         (unsigned long long)seq);
}

/* Empty new/, claimed/ (with its directories) and quarantine/. */
static void empty(const char *sub)
{
	char path[8192];

	snprintf(path, sizeof(path), "%s/ib/%s", dir, sub);
	DIR *d = opendir(path);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		char p[8448];
		if (e->d_name[0] == '.' && (!e->d_name[1] ||
		                            !strcmp(e->d_name, "..")))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (e->d_type == DT_DIR) {
			char inner[8448];
			snprintf(inner, sizeof(inner), "%s/%s", sub, e->d_name);
			empty(inner);
			rmdir(p);
		} else {
			unlink(p);
		}
	}
	closedir(d);
}

static void through_the_inbox(const uint8_t *file, size_t size,
                              const char *id, int valid)
{
	char path[8192];

	snprintf(path, sizeof(path), "%s/ib/new/%s", dir, id);
	FILE *f = fopen(path, "w");
	if (!f || fwrite(file, 1, size, f) != size || fclose(f) != 0)
		abort();
	if (fsafe_inbox_check(dirfd_, "ib", NULL, NULL) != !valid)
		abort(); /* check and the parser disagree */
	fsafe_inbox_consumer *c;
	fsafe_inbox_msg *m = NULL;
	if (fsafe_inbox_consumer_open(ib, "f", &c) < 0)
		abort();
	int r = fsafe_inbox_take(c, &m);
	if (valid && (r != 0 || fsafe_inbox_msg_len(m) != size - 32 ||
	              memcmp(fsafe_inbox_msg_data(m), file + 32, size - 32)))
		abort();
	if (!valid && (r != -EAGAIN || fsafe_inbox_quarantined(c) != 1))
		abort();
	fsafe_inbox_msg_free(m);
	fsafe_inbox_consumer_close(c);
	empty("new");
	empty("claimed");
	empty("quarantine");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char id[FSAFE_INBOX_ID_LEN + 1], str[128];
	struct fsafe__inbox_hdr h;

	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	const uint8_t *file = data + 1;
	size_t n = size - 1;

	/* The id predicate, on the input as a string. */
	size_t k = n < sizeof(str) - 1 ? n : sizeof(str) - 1;
	memcpy(str, file, k);
	str[k] = '\0';
	if (fsafe__inbox_valid_id(str) != (bool)id_form(str))
		abort();

	make_id(file, n, !(sel & 1), id);
	const char *why = fsafe__inbox_check_header(file, n, 1u << 20, id, &h);
	if (!why)
		why = fsafe__inbox_check_payload(&h, file + 32);
	if (!why) {
		uint8_t again[32];
		if (n != 32 + h.len)
			abort();
		fsafe__inbox_header(again, h.seq, file + 32, (size_t)h.len);
		if (memcmp(again, file, 32) != 0)
			abort(); /* accepted a header it would not write */
	}
	if (sel & 2)
		through_the_inbox(file, n, id, !why);
	return 0;
}
