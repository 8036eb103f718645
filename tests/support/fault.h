/*
 * Fault injection through the library's own system-call table.
 *
 * Every entry of the table is wrapped: calls are counted (1-based, across
 * all threads) and named, and at call N the plan can fail it with an errno
 * (once, or from N on), cut a write short, kill the process (SIGKILL,
 * before the call runs) or run a hook (a power cut, for example).
 */
#ifndef FSAFE_TEST_FAULT_H
#define FSAFE_TEST_FAULT_H

#include <stdbool.h>

enum fault_kind {
	FAULT_NONE,    /* count only */
	FAULT_ERRNO,   /* call N fails with err, nothing done */
	FAULT_PERSIST, /* calls N, N+1, ... fail with err */
	FAULT_SHORT,   /* write N (or the first write from N on) is cut short */
	FAULT_KILL,    /* SIGKILL before call N runs */
	FAULT_HOOK,    /* hook(N, name) runs before call N, which then runs */
};

struct fault_plan {
	int at;
	enum fault_kind kind;
	int err;
	void (*hook)(int call, const char *name);
};

/* The table the wrappers pass calls on to (NULL: libc), for tests that
   also need a call to behave differently (a deterministic getrandom, say).
   Set it before fault_install(); fault_remove() does not reset it. */
struct fsafe_sys;
void fault_set_real(const struct fsafe_sys *table);
/* Make the real table's openat give the library `text` as /proc/meminfo
   (NULL: there is none, ENOENT), so that a batch's choice of syncfs does
   not hang on the machine's dirty data. fault_set_real(NULL) ends it. */
void fault_fake_meminfo(const char *text);

/* Install a plan (resets the count); fault_remove() restores libc. */
void fault_install(const struct fault_plan *plan);
void fault_remove(void);

/* Calls made since fault_install(). */
int fault_calls(void);
/* Name of call n (1-based) since install, for messages; "?" if unknown. */
const char *fault_call_name(int n);
/* How many calls since install were named `name` ("fsync", "syncfs"...). */
int fault_calls_named(const char *name);
/* The first call since install named `name` (1-based; 0 if none). */
int fault_first_call_named(const char *name);
/* Whether the planned fault has fired. */
bool fault_fired(void);

/* Open file descriptors of this process (count of /proc/self/fd). */
int fault_open_fds(void);

#endif
