/*
 * The damage harness: the counterpart of the kill, error and power
 * harnesses, for state that a disk, an operator or a neighbour leaves
 * behind instead of a crash.
 *
 * A store's test builds a populated store (its workload), lists the
 * store's artifacts, asks for every damage case of each, and for each case:
 * rebuilds the store, applies the damage, runs every command of the store
 * under a time bound (dmg_run / dmg_call), checks that nothing outside the
 * store changed (tests/root/snap.h), that every acknowledged record not
 * held in the damaged artifact comes back byte-identical, and that check
 * reports the damage. dmg_tally() records each case's outcome; the test's
 * last step prints the matrix (store x artifact x class: cases, records
 * lost, reported), which is where the closing notes take their figures.
 */
#ifndef FSAFE_TEST_DAMAGE_H
#define FSAFE_TEST_DAMAGE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum dmg_kind {
	DMG_DELETE,       /* the artifact removed (a directory: with its tree) */
	DMG_TRUNCATE,     /* cut to `off` bytes */
	DMG_FLIP,         /* one byte at `off` XOR 0xff */
	DMG_ZERO8,        /* 8 bytes from `off` (clipped to the size) zeroed */
	DMG_FIFO,         /* replaced by a FIFO */
	DMG_SOCKET,       /* replaced by a bound Unix socket */
	DMG_DIR,          /* replaced by an empty directory */
	DMG_SYMLINK_IN,   /* replaced by a symlink to `extra` (inside) */
	DMG_SYMLINK_OUT,  /* replaced by a symlink to a file outside */
	DMG_SYMLINK_DANGLING, /* replaced by a symlink to nothing */
	DMG_STRAY,        /* a new regular file `extra` beside it (its bytes) */
	DMG_FOREIGN,      /* `extra` (absolute) copied over the artifact */
	DMG_DUPLICATE,    /* a copy of the artifact under the name `extra` */
	DMG_KINDS
};

struct dmg_case {
	enum dmg_kind kind;
	char path[PATH_MAX];  /* the artifact, relative to the store's root */
	off_t off;            /* TRUNCATE: new size; FLIP, ZERO8: offset */
	char extra[PATH_MAX]; /* see the kinds */
};

/* "delete", "truncate", ... (stable: the matrix and messages use it). */
const char *dmg_kind_name(enum dmg_kind kind);
/* "truncate spool/00000001.seg at 200" into buf; returns buf. */
const char *dmg_case_name(const struct dmg_case *c, char *buf, size_t len);

/* Every entry below `root` (files, directories, links), as paths relative
   to it, sorted; NULL-terminated, malloc'd (free with dmg_free_list). */
char **dmg_artifacts(const char *root);
void dmg_free_list(char **list);

/*
 * The cases for one artifact, appended to *cases (malloc'd, *n counts):
 * for a regular file: delete; truncate at each of `bounds` (the frame or
 * record boundaries the caller knows; 0 and the size are added) and in the
 * middle of each frame; FLIP and ZERO8 every 512 bytes of the file (at
 * most 64 offsets, spread evenly over larger files); FIFO, SOCKET, DIR,
 * SYMLINK_IN (to `sibling`, when not NULL), SYMLINK_OUT, SYMLINK_DANGLING.
 * For a directory: delete, FIFO, SYMLINK_OUT, SYMLINK_DANGLING, and a
 * regular file in its place (DIR's counterpart, recorded as DMG_DIR).
 * Stray, foreign and duplicate entries are store-specific: the caller adds
 * them with dmg_add().
 */
void dmg_cases_for(const char *root, const char *rel, const off_t *bounds,
                   size_t nbounds, const char *sibling,
                   struct dmg_case **cases, size_t *n);
void dmg_add(struct dmg_case **cases, size_t *n, enum dmg_kind kind,
             const char *rel, off_t off, const char *extra);

/* Apply one case to the store at `root`; `outside` is a directory outside
   the store where SYMLINK_OUT points (its file "outside.dat" is made if
   missing). 0 or -errno. */
int dmg_apply(const char *root, const struct dmg_case *c,
              const char *outside);

/*
 * Run argv (argv[0] a path) with stdin from /dev/null, stdout and stderr
 * into malloc'd NUL-terminated buffers (either pointer may be NULL), and
 * kill it after timeout_ms. Returns its exit status (0..255), 128+signal
 * when a signal ended it, or -ETIMEDOUT when it had to be killed: a hang.
 */
int dmg_run(int timeout_ms, char *const argv[], char **out, char **err);
/* The same for a function, run in a child: its return value (0..255). */
int dmg_call(int timeout_ms, int (*fn)(void *arg), void *arg);

/* One case's outcome into the matrix (artifact classes are the store's
   own words: "segment", "cursor", "CURRENT"...). */
void dmg_tally(const char *store, const char *artifact_class,
               enum dmg_kind kind, unsigned records_lost, bool reported,
               bool hung);
/* The matrix so far, one line a row, each starting "damage-matrix:". */
void dmg_tally_print(void);

#endif
