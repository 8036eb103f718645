/*
 * Shared by the crash tests: the write variants under test, their
 * fixtures, and an inspector that says what a directory holds after a
 * write was killed or failed.
 *
 * Every variant writes NEW (CU_NEW_LEN bytes) over OLD (CU_OLD_LEN bytes)
 * or into a place with no file. The two differ in length and in every
 * byte pattern, so a mix or a truncation never passes for either.
 *
 * The one-shot variants stage under a name; the managed ones stage with
 * O_TMPFILE unless told not to, so each publish path is covered by both.
 * NEW is large enough that a one-shot write allocates its space first
 * (ALLOCATE_MIN in src/writer.c), so that call is cut and failed too.
 */
#ifndef FSAFE_CRASHUTIL_H
#define FSAFE_CRASHUTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "fsafe.h"

enum cu_layout {
	CU_PLAIN,   /* "target" directly in the case directory */
	CU_MKDIR,   /* "a/b/target", with a and b not existing yet */
	CU_SYMLINK, /* "link" -> "real"; "real" holds OLD */
};

enum {
	/* OLD belongs to another user, whose ownership NEW must keep (only
	   when the tests run as root; otherwise a plain replace). */
	CU_FOREIGN_OWNER = 1u << 0,
	/* Lose CAP_DAC_READ_SEARCH between staging and linking, so that
	   linkat(AT_EMPTY_PATH) is refused as for an unprivileged caller and
	   the O_TMPFILE stage is linked through /proc/self/fd instead (only
	   when the tests run with that capability). */
	CU_NO_FLINK_CAP = 1u << 1,
	/* Managed writer that writes NEW and then aborts: OLD must stay. */
	CU_ABORT = 1u << 2,
	/* OLD carries two user.* extended attributes, which NEW must carry
	   too (so listxattrat, getxattrat and fsetxattr are cut and failed). */
	CU_XATTRS = 1u << 3,
	/* A kernel before 6.13: listxattrat and getxattrat fail with ENOSYS
	   (above the fault layer, so uncounted), and the writer opens OLD to
	   list its attributes by descriptor (flistxattr, fgetxattr). */
	CU_NO_XATTRAT = 1u << 4,
	/* A kernel before 4.7: pwritev2 refuses RWF_DSYNC with EOPNOTSUPP
	   (above the fault layer, so uncounted), and a one-shot write is
	   written and then synced on its own (write, fdatasync). */
	CU_NO_RWF_DSYNC = 1u << 5,
};

struct cu_variant {
	const char *name;
	unsigned flags;     /* FSAFE_* write flags */
	bool old;           /* the target holds OLD before the write */
	bool managed;       /* fsafe_writer_* in chunks, not fsafe_write_fileat */
	enum cu_layout layout;
	unsigned extra;     /* CU_* above */
};

extern const struct cu_variant cu_variants[];
extern const size_t cu_nvariants;
/* The variant of that name (the test fails if there is none). */
const struct cu_variant *cu_variant(const char *name);

#define CU_OLD_LEN 5000
#define CU_NEW_LEN 70000
#define CU_OLD_MODE 0640
#define CU_FOREIGN_UID 1234
#define CU_FOREIGN_GID 2345
extern unsigned char cu_old[CU_OLD_LEN];
extern unsigned char cu_new[CU_NEW_LEN];

/* Fill OLD and NEW, and fix the umask the mode checks assume. */
void cu_init(void);

/* Make `path` an empty directory (removing whatever was there), put the
   variant's fixture in it, and return an fd on it. */
int cu_prepare(const struct cu_variant *v, const char *path);

/* Write NEW as the variant does, into a directory cu_prepare() made;
   the library's result, or CU_EMISMATCH. */
#define CU_EMISMATCH (-100000) /* a managed write's error was not the one
                                  commit reported */
int cu_write(const struct cu_variant *v, int dirfd, struct fsafe_error *err);

enum cu_content { CU_ABSENT, CU_OLD, CU_NEW, CU_OTHER };
const char *cu_content_name(enum cu_content c);

/* What the target held before the write: OLD, or nothing. */
static inline enum cu_content cu_before(const struct cu_variant *v)
{
	return v->old ? CU_OLD : CU_ABSENT;
}

/* What it holds after a write that completed. */
static inline enum cu_content cu_after(const struct cu_variant *v)
{
	return v->extra & CU_ABORT ? cu_before(v) : CU_NEW;
}

#define CU_MAX_STAGING 8

struct cu_state {
	enum cu_content content;  /* what a reader of the target path sees */
	const char *problem;      /* NULL, or anything else found wrong */
	int nstaging;             /* staging names beside the target */
	char staging[CU_MAX_STAGING][FSAFE_STAGING_NAME_LEN + 1];
	const char *stagedir;     /* directory they are in, relative */
	char buf[512];
};

/* Look at the case directory: the target, the names beside it, modes. */
void cu_observe(const struct cu_variant *v, int dirfd, struct cu_state *s);

/* Run fsafe_sweep(older_than 0) where the staging names are and check it
   removed exactly the ones in `s` and that nothing else changed. NULL when
   all is well, else a description. */
const char *cu_sweep_check(const struct cu_variant *v, int dirfd,
                           const struct cu_state *s, char *buf, size_t len);

/* The calls of one full write without faults, as the fault layer names
   them. */
#define CU_MAX_CALLS 256
struct cu_trace {
	int calls;
	const char *name[CU_MAX_CALLS + 1]; /* 1-based */
	int publish;  /* the call that makes NEW visible (rename or link);
	                 calls + 1 for an aborted write, which never does */
};

/* Count a clean write in `scratch`/count; fails the test if it is not
   clean. */
void cu_count(const struct cu_variant *v, const char *scratch,
              struct cu_trace *t);

/* Text of the trace ("openat fstatat ..."), for the test log. */
const char *cu_trace_text(const struct cu_trace *t, char *buf, size_t len);

#endif
