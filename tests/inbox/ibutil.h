/* Helpers shared by the inbox tests. */
#ifndef FSAFE_IBUTIL_H
#define FSAFE_IBUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsafe.h"

/* Open (creating) the inbox `dir`; fails the test on error. */
fsafe_inbox *ibu_open(const char *dir, unsigned flags);

/* The fixture of the API tests: a scratch directory holding the inbox
   `dir` (scratch/ib, open as `ib`) and an empty directory `out`
   (scratch/outside) for damage that points out of the inbox; `c` is a
   process consumer when the setup asked for one. The setups stop a test
   that runs past `IBU_HANG_S` seconds (SIGALRM), so a hang fails. */
#define IBU_HANG_S 20
struct ibu_fx {
	char *scratch;
	char dir[1024], out[1024];
	fsafe_inbox *ib;
	fsafe_inbox_consumer *c;
};
int ibu_setup(void **state);
int ibu_setup_consumer(void **state);
int ibu_teardown(void **state);

/* Deliver the string `text` into f's inbox; `id` gets its id. */
void ibu_put(struct ibu_fx *f, const char *text, char *id);

/* A deterministic payload for (producer, index): "p<i> k<k> " then a
   pattern, `len` bytes in all (len >= 32). */
void ibu_payload(unsigned producer, unsigned index, size_t len, char *buf);
/* True when buf is exactly such a payload; sets producer and index. */
bool ibu_payload_ok(const void *buf, size_t len, unsigned *producer,
                    unsigned *index);

/* Recover (stage age 0), then take and ack everything in the inbox with a
   fresh process consumer. Fills up to `cap` ids (each
   FSAFE_INBOX_ID_LEN + 1 bytes) and payload copies (malloc'd; NULL to
   skip); returns the count. Fails the test on a quarantined file. */
size_t ibu_drain(const char *dir, unsigned flags, char (*ids)[64],
                 char **payloads, size_t *lens, size_t cap);

/* Entries in dir/sub that are neither "." nor ".." nor staging names. */
int ibu_count(const char *dir, const char *sub);

#endif
