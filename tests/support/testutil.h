/* Small helpers shared by the C tests: scratch dirs and byte-exact files. */
#ifndef FSAFE_TESTUTIL_H
#define FSAFE_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>

/* 1 in a build under AddressSanitizer (gcc or clang), else 0: its shadow,
   redzones and quarantine add their own to any bound on memory. */
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

/* Make a fresh scratch directory (under $TMPDIR or /tmp); returns its path
   (static storage per call site is the caller's: copy it). */
char *tu_mkscratch(void);
/* Remove a directory tree (best effort). */
void tu_rmtree(const char *path);
/* Write a file plainly (not through fsafe), for fixtures. */
void tu_put(const char *dir, const char *name, const void *buf, size_t len);
/* Read a whole file into a malloc'd buffer; NULL if missing. */
char *tu_get(const char *dir, const char *name, size_t *len);
/* n pseudo-random bytes (xorshift from `seed`: the same seed, the same
   bytes), malloc'd (at least 1 byte, so never NULL for n = 0); aborts
   when out of memory. */
unsigned char *tu_pattern(size_t n, unsigned seed);
/* True when the file's bytes equal buf exactly. */
bool tu_equals(const char *dir, const char *name, const void *buf, size_t len);
/* Number of directory entries (not "." / "..") in dir. */
int tu_count_entries(const char *dir);
/* Number of entries satisfying fsafe_is_staging_name(). */
int tu_count_staging(const char *dir);
/* Number of entries (not "." / "..") whose name satisfies match(); -1 when
   dir cannot be opened. */
int tu_count_matching(const char *dir, bool (*match)(const char *name));

/* A Unix socket bound at path, however long the path: sun_path holds 108
   bytes, and a long $TMPDIR alone can pass that, so it binds the last
   component from inside its directory. Returns the socket's fd (nobody
   listens; the socket file stays after close) or -errno. It changes the
   working directory for the moment of the bind: not for threads that use
   relative paths meanwhile. */
int tu_bind_socket(const char *path);

/* A cmocka fixture: a fresh scratch directory, held open, and the number
   of descriptors open before the test (to check none leaks). */
struct tu_fx {
	char *dir;
	int dirfd;
	int fds_before;
};
int tu_fx_setup(void **state);
int tu_fx_teardown(void **state);

/* One test of a parameterised group: named "<what>: <name>", with `state`
   as its initial state. The name lives as long as the process (cmocka
   only copies the pointer). */
struct CMUnitTest;
void tu_case_test(struct CMUnitTest *t, const char *what, const char *name,
                  void (*fn)(void **state), const void *state);

/* Assert that an options' error member holds this result, errno (positive)
   and step. */
struct fsafe_error;
void tu_assert_error(const struct fsafe_error *e, int code, int sys_errno,
                     const char *step);

/* A system-call table entry (fd-taking, int result) that fails with EIO. */
int tu_fail_eio(int fd);

/* A damage callback (fsafe_damage_fn) adding each report's `lost` to the
   uint64_t at arg. */
struct fsafe_damage;
int tu_add_lost(const struct fsafe_damage *d, void *arg);

#endif
