/*
 * The spool's on-disk format and its segment scanner, shared by the
 * spool, its check and the fuzz target.
 *
 * Segment file: a 32-byte header, then frames back to back.
 *   header: "FSPSEG1\0" | first_seq u64 | salt u64 | max_record u32 |
 *           crc u32 (CRC-32C of the 28 bytes before it)
 *   frame:  magic u32 | len u32 | seq u64 | offset u64 | flags u32 |
 *           crc u32 (CRC-32C of salt, the 28 header bytes, payload) |
 *           payload
 * All integers little-endian. A frame is valid only at the offset it
 * names, with the next sequence number, under its own segment's random
 * salt: stale bytes of an earlier file, or a frame from another segment,
 * fail even with a correct checksum. Zeros may follow the last frame: the
 * space an appender writes ahead of its tail (no frame starts with a zero
 * byte), never a torn tail.
 */
#ifndef FSAFE_SPOOL_INTERNAL_H
#define FSAFE_SPOOL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FSAFE__SEG_HDR 32
#define FSAFE__FRAME_HDR 32
#define FSAFE__RECORD_LIMIT (256u << 20)
#define FSAFE__SEG_NAME_LEN 24 /* 20 digits + ".seg" */

struct fsafe__seg_hdr {
	uint64_t first_seq, salt;
	uint32_t max_record;
};

void fsafe__seg_hdr_encode(unsigned char out[FSAFE__SEG_HDR],
                           const struct fsafe__seg_hdr *h);
/* Fill in the 32-byte frame header for the payload. */
void fsafe__frame_encode(unsigned char out[FSAFE__FRAME_HDR], uint64_t salt,
                         uint64_t seq, uint64_t off, const void *payload,
                         uint32_t len);
/* Segment name of `seq` into buf (at least FSAFE__SEG_NAME_LEN + 1). */
void fsafe__seg_name(char *buf, uint64_t seq);
/* True with *seq for a segment name exactly of that form. */
bool fsafe__seg_parse(const char *name, uint64_t *seq);

/* Reads one segment front to back through a bounded window. */
struct fsafe__scan {
	int fd;
	struct fsafe__seg_hdr hdr;
	uint64_t pos;      /* offset of the next frame */
	uint64_t next_seq; /* the sequence number it must carry */
	const char *problem; /* why the last next() stopped, NULL: clean end */
	unsigned char *buf;
	size_t cap, len;
	uint64_t off; /* file offset of buf[0] */
	/* Bytes at or past this offset are never read (0: no bound): a
	   reader beside live appenders reads only what is durable, so its
	   window never holds bytes that an appender may still replace. */
	uint64_t end;
};

/* Start on `fd` (not owned); sc's buf and cap must be zero or a window
   of an earlier scan (reused). Its name says `name_seq`. 0, 1 if the
   header is invalid (problem set), or a negative errno. */
int fsafe__scan_open(struct fsafe__scan *sc, int fd, uint64_t name_seq);
/* 1: a valid record (data points into the window, valid until the next
   call); 0: no valid record at pos (problem NULL at a clean end of file),
   pos unchanged; negative errno. */
int fsafe__scan_next(struct fsafe__scan *sc, const void **data, size_t *len,
                     uint64_t *seq);
/* Forget the window (the file may have grown since it was read). */
void fsafe__scan_reset(struct fsafe__scan *sc);
void fsafe__scan_free(struct fsafe__scan *sc);
/* 1 when every byte from `from` to the end of the file is zero (the space
   an appender makes ahead of its tail, never written), 0 when one is
   not, or -errno. */
int fsafe__scan_zero_from(struct fsafe__scan *sc, uint64_t from);
/* After a 0 from next() with a problem: search on from pos for the next
   frame that is valid here (this segment's salt, its own offset, a later
   sequence number than next_seq, at most one per 32 bytes skipped). 1
   with pos and next_seq on it, 0 when none follows, or -errno. */
int fsafe__scan_resync(struct fsafe__scan *sc);

/* The cursor file (spool_cursor.c). */
#define FSAFE__CURSOR_LEN 20
void fsafe__cursor_encode(unsigned char out[FSAFE__CURSOR_LEN],
                          uint64_t cursor);
/* NULL with *cursor set, or what is wrong with the `len` bytes. */
const char *fsafe__cursor_decode(const unsigned char *in, size_t len,
                                 uint64_t *cursor);

/* The spool's id (spool_id.c): 32 hex digits. 0 with `out`; -ENOENT
   when there is none (made first when `create`), -EBADMSG when the file
   "id" holds something else, or another negative errno. */
#define FSAFE__SPOOL_ID_LEN 32
int fsafe__spool_id_load(int dfd, bool create,
                         char out[FSAFE__SPOOL_ID_LEN + 1]);

/* The head file (spool_head.c): where the durable end is, shared by the
   processes that have the spool open. */
#define FSAFE__HEAD_LEN 48
/* The last segment takes no more frames: the next append starts one. */
#define FSAFE__HEAD_ROLL 1u
struct fsafe__head {
	uint64_t gen;  /* changes with every change of the segment set */
	uint64_t last; /* first number of the last segment (0: none) */
	uint64_t tail; /* its durable end (bytes) */
	uint64_t next; /* every record below it is durable */
	uint32_t flags; /* FSAFE__HEAD_* */
};
void fsafe__head_encode(unsigned char out[FSAFE__HEAD_LEN],
                        const struct fsafe__head *h);
/* True with *h set when the `len` bytes are a valid head. */
bool fsafe__head_decode(const unsigned char *in, size_t len,
                        struct fsafe__head *h);

#endif
