/*
 * Small helpers the modules share: positional I/O loops, a small file read
 * whole, the clocks, the durable mkdir of a store's directory, a scan of a
 * directory, and whether a filesystem makes a rename durable whole. Every
 * system call goes through the SYS table (sys.h), so a fault plan sees
 * each one.
 */
#ifndef FSAFE_UTIL_H
#define FSAFE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* pread until len bytes or the end of the file: the count read (less than
   len only at the end), or -errno. EINTR is retried. */
ssize_t fsafe__pread_full(int fd, void *buf, size_t len, off_t off);

/* pwrite all of buf at off: 0 or -errno. EINTR is retried, a short write
   continued; a write of 0 bytes is -EIO (a regular file never does it). */
int fsafe__pwrite_all(int fd, const void *buf, size_t len, off_t off);

/*
 * Memory for n bytes that reads from files will fill, or NULL; freed
 * with fsafe__io_free alone. From 64 KiB it starts on a 4 KiB boundary:
 * malloc puts a large block 16 bytes into a page, and the kernel's copy
 * from the page cache to an address a few bytes past a page boundary runs
 * at a sixth of its speed on some CPUs (this machine's AMD EPYC: 1 MiB
 * read from tmpfs in 402 us at page offset 16, 66 us at offset 0). Not
 * posix_memalign: what it frees resets malloc's threshold for mapping a
 * block of its own just below the next such request, so every one would
 * map (and fault in) fresh pages.
 */
void *fsafe__io_alloc(size_t n);
/* The n that fsafe__io_alloc was asked for: what p may hold. */
size_t fsafe__io_size(const void *p);
void fsafe__io_free(void *p);

/* The whole of regular file `name` in dirfd (fsafe__open_regular: never a
   symlink, a FIFO never blocks) as a malloc'd, NUL-terminated buffer of
   *len bytes. -EFBIG when it holds more than max bytes. */
int fsafe__read_file_at(int dirfd, const char *name, size_t max, char **out,
                        size_t *len);

/* Wall-clock time (CLOCK_REALTIME) in ms since the epoch: for what is
   stored or compared with file times. */
int64_t fsafe__now_ms(void);

/* CLOCK_MONOTONIC, for timeouts and deadlines: never jumps. */
uint64_t fsafe__mono_ns(void);
uint64_t fsafe__mono_ms(void);

/*
 * One sleep of a waiter that polls (for a lock another process holds):
 * -ETIMEDOUT, without sleeping, once limit_ns (0: none) has passed since
 * t0 (fsafe__mono_ns); else 0 after a sleep drawn with `random` from the
 * upper half of *step_ns, cut at the deadline, and *step_ns doubles up to
 * max_ns. Full jitter in the upper half keeps waiters from waking in
 * step. A signal ends the sleep early: the caller re-checks either way.
 */
int fsafe__backoff_sleep(uint64_t t0, uint64_t limit_ns, uint64_t *step_ns,
                         uint64_t max_ns, uint64_t random);

/*
 * Open directory `path` at dirfd, making it and its missing parents first,
 * as mkdir -p does: every store's CREATE, and the writer's FSAFE_MKDIR.
 * The directory gets `mode` and new parents 0777, less the umask, as
 * mkdir -p -m. With `sync`, each directory on the way has its entry for
 * the next synced, made or found, before anything is made beneath it, so
 * what is later published in it survives a power cut. A symlink to a
 * directory is followed, as for any path the caller names. 0 with the
 * directory's fd (O_CLOEXEC) in *fd (NULL: closed), or -errno with *step
 * naming the failed step ("mkdir", "open directory", "fsync directory").
 */
int fsafe__mkdir_p(int dirfd, const char *path, mode_t mode, bool sync,
                   int *fd, const char **step);

/*
 * Whether a rename between two directories of fd's filesystem is made
 * durable whole, both its halves, by a sync of either directory: a
 * journal that commits the two in one transaction, which the sync commits
 * (ext3, ext4, xfs; and tmpfs, where a power cut keeps nothing to split).
 * btrfs logs only the synced directory's changes and ext2 writes the two
 * apart, so there, as on any other or unknown filesystem (or when asking
 * fails), false: a caller that needs both halves syncs both directories.
 * ext3 and ext4 are told from ext2, which has their magic number, by the
 * type /proc/self/mountinfo names for fd's device. The same journals make
 * a new link durable with its inode's link count by a sync of the link's
 * directory, which the unnamed stages linked at their names rely on
 * (a batch's new files, an inbox's deliveries: fsafe__wopts.link_new).
 */
bool fsafe__renames_whole(int fd);

#ifdef FSAFE_TESTING
/* Test builds only: -1 asks the filesystem; 0 or 1 is the answer. */
extern volatile int fsafe__test_renames_whole;
#endif

/* The bytes of the whole system's page cache waiting to be written (its
   Dirty and Writeback pages, from /proc/meminfo, through the table),
   below INT64_MAX: 0, or -errno (-ENOENT where there is no /proc, -EBADMSG when the fields
   are not there). */
int fsafe__dirty_bytes(uint64_t *out);

/* Subdirectory `name` of dfd, never through a symlink (fsafe__open_subdir),
   made first when missing (`mode` less the umask); with `sync`, a new
   one's entry is fsynced into dfd. Its fd, or -errno. */
int fsafe__subdir_make(int dfd, const char *name, mode_t mode, bool sync);

/*
 * Call fn(fd, name, type, arg) for each entry of directory dirfd but "."
 * and "..", through a fresh descriptor of it (fd; a held one has a shared
 * offset, and rewinding is no table call). `type` is the entry's DT_*. A
 * non-zero result of fn stops the scan and is returned; else 0 or -errno.
 */
typedef int fsafe__dir_fn(int fd, const char *name, unsigned char type,
                          void *arg);
int fsafe__dir_each(int dirfd, fsafe__dir_fn *fn, void *arg);

/* Append a copy of s to the vector *v of *n strings (room for *cap, grown
   as needed). 0 or -ENOMEM (the vector unchanged). */
int fsafe__strv_push(char ***v, size_t *n, size_t *cap, const char *s);

/* The names in directory dfd, sorted (a stable report order, and no entry
   skipped or seen twice while a repair renames some): 0 with a malloc'd
   vector in *out and its length in *n, or -errno (nothing to free). */
int fsafe__dir_names(int dfd, char ***out, size_t *n);
void fsafe__dir_names_free(char **v, size_t n);

#endif
