/* The library's own threads, started with no signal (thread.h). */
#define _GNU_SOURCE
#include "thread.h"

#include <signal.h>

int fsafe__thread_start(pthread_t *t, const pthread_attr_t *attr,
                        void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int r;

	/* The mask is the one thing a thread takes from its creator that
	   cannot be set from outside once it runs. */
	sigfillset(&all);
	r = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (r != 0)
		return -r;
	r = pthread_create(t, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -r;
}
