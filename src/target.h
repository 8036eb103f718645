/*
 * Where a write lands: the target's parent directory, held as an fd, and
 * the target's base name in it. Everything after resolution works relative
 * to that fd, so a path is never resolved twice.
 */
#ifndef FSAFE_TARGET_H
#define FSAFE_TARGET_H

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>

struct fsafe__target {
	int dirfd;                 /* O_RDONLY|O_DIRECTORY, ours to close... */
	bool borrowed;             /* ...unless it is the caller's own */
	char name[NAME_MAX + 1];   /* base name inside dirfd */
	bool exists;               /* what lstat of name found at resolution */
	struct stat st;
};

/* Check a base name: not empty, not "." or "..", no '/', <= NAME_MAX. */
int fsafe__check_name(const char *name);

/* How fsafe__target_resolve() goes about it. */
enum {
	/* Create missing parents, each made durable... */
	FSAFE__TARGET_MKDIR = 1u << 0,
	/* ...or not. */
	FSAFE__TARGET_NOSYNC = 1u << 1,
	/* Follow a symbolic link at the target (up to 40 links) to the file
	   it names. */
	FSAFE__TARGET_FOLLOW = 1u << 2,
	/* For a target used only while the caller's call lasts: a path of one
	   component uses the caller's `dirfd` itself (held open for the call)
	   instead of a descriptor of our own, two system calls less. It may
	   be an O_PATH descriptor, which cannot be synced:
	   fsafe__target_sync_dir() copes. */
	FSAFE__TARGET_BORROW = 1u << 3,
	/* The name is new by construction (a fresh random id, and the write
	   is create-only: the no-replace publish is the check), or its
	   caller just saw it free under a lock of its own: no lookup. */
	FSAFE__TARGET_FRESH = 1u << 4,
};

/* Whether FSAFE__TARGET_BORROW would use `dirfd` itself for `path`: a
   name of one component beside a real descriptor. */
bool fsafe__target_borrows(int dirfd, const char *path);

/* Resolve `path` relative to `dirfd`, as FSAFE__TARGET_* `how` says. On
   failure *step names what failed. */
int fsafe__target_resolve(int dirfd, const char *path, unsigned how,
                          struct fsafe__target *t, const char **step);

/* fsync of the target's directory, also through a borrowed O_PATH fd. */
int fsafe__target_sync_dir(const struct fsafe__target *t);

/* lstat t->name into t->st / t->exists. */
int fsafe__target_stat(struct fsafe__target *t, const char **step);

/* Follow a symbolic link at t->name (in t->dirfd) to what it names;
   t->st / t->exists then describe that. */
int fsafe__target_follow(struct fsafe__target *t, const char **step);

void fsafe__target_close(struct fsafe__target *t);

#endif
