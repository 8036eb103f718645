/* Shared by the spool tests: deterministic records and the prefix check. */
#ifndef FSAFE_SPOOLUTIL_H
#define FSAFE_SPOOLUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "fsafe.h"

/* Record `seq`'s bytes (the content every test appends as number seq):
   0..299 bytes, derived from seq, into buf (>= 300 bytes); its length. */
size_t su_record(uint64_t seq, unsigned char *buf);

/* Open (creating) the spool `dir`/`name` with these sizes; asserts. */
fsafe_spool *su_open(int dirfd, const char *name, uint64_t segment_size,
                     uint32_t max_record);

/* Append records first..first+n-1 in batches of `batch`; 0 or the first
   error. */
int su_append(fsafe_spool *s, uint64_t first, uint64_t n, size_t batch);

/*
 * Read everything from `from`: each record must be su_record(seq) and the
 * numbers consecutive. Returns the count (asserting on any violation);
 * *first / *last get the first and last numbers read (0 if none).
 */
uint64_t su_read_all(fsafe_spool *s, uint64_t from, uint64_t *first,
                     uint64_t *last);

/* Files of the spool directory named like segments. */
int su_count_segments(const char *dir);

/* The spool's stat; asserts it succeeds. */
struct fsafe_spool_stat su_stat(fsafe_spool *s);

/* The spool tests' fixture: a fresh scratch directory, held open, and the
   path of the spool "sp" that the tests open in it. */
struct su_fx {
	char *dir;
	int fd;
	char sp[4096];
};
/* For fixtures that hold a struct su_fx among their own fields. */
void su_fx_init(struct su_fx *f);
void su_fx_fini(struct su_fx *f);
/* cmocka setup and teardown of a plain struct su_fx. */
int su_fx_setup(void **state);
int su_fx_teardown(void **state);

#endif
