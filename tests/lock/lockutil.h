/* Helpers shared by the lock tests: forged records, dead and live pids. */
#ifndef FSAFE_TEST_LOCKUTIL_H
#define FSAFE_TEST_LOCKUTIL_H

#include <stdint.h>
#include <sys/types.h>

#include "fsafe.h"
#include "owner.h"

/* This process's own record (fresh token), to be altered and forged. */
struct fsafe_lock_owner lu_self(void);
/* Write a record as file `name` in `dir` (plainly, mode 0444). */
void lu_forge(const char *dir, const char *name,
              const struct fsafe_lock_owner *o);
/* A record naming a process that has exited and been reaped. */
struct fsafe_lock_owner lu_dead_owner(void);
/* A child blocked in pause() until lu_stop(); its record, if o != NULL. */
pid_t lu_sleeper(struct fsafe_lock_owner *o);
void lu_stop(pid_t pid);
/* A child that takes a lock with take(arg, &l), then holds it in pause()
   until killed (lu_stop(), or its parent's death). Returns its pid once it
   holds; -1 when the take failed. */
pid_t lu_holder(int (*take)(void *arg, fsafe_lock **l), void *arg);
/* Monotonic milliseconds. */
uint64_t lu_now_ms(void);
/* Entries named .lock-*. */
int lu_count_private(const char *dir);
/* An fd of a directory (O_PATH-free, plain O_DIRECTORY). */
int lu_open_dir(const char *dir);

#endif
