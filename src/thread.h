/*
 * The library's own threads (a load's reader, a save's sums, a batch's
 * sync workers, an fsafe_async's worker, a checkpoint's removals) start
 * here, with every signal blocked. A thread inherits its creator's mask,
 * and the caller's thread usually takes signals: a process-directed one
 * could then run the application's handler on a thread of ours, or end a
 * process that waits for it in sigwait() on a thread of its own.
 */
#ifndef FSAFE_THREAD_H
#define FSAFE_THREAD_H

#include <pthread.h>

/* pthread_create(t, attr, fn, arg) with the new thread's signals all
   blocked; the caller's mask is as it was. 0 or -errno. */
int fsafe__thread_start(pthread_t *t, const pthread_attr_t *attr,
                        void *(*fn)(void *), void *arg);

#endif
