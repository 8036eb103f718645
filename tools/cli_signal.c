#define _POSIX_C_SOURCE 200809L
#include "cli_signal.h"

#include <errno.h>
#include <stddef.h>

static const int signals[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
#define NSIGNALS (sizeof(signals) / sizeof(signals[0]))

static volatile sig_atomic_t caught;
static fsafe_cancel *cancel_token;

static void on_signal(int sig)
{
	if (!caught)
		caught = sig;
	if (cancel_token)
		fsafe_cancel_request(cancel_token);
}

static void our_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < NSIGNALS; i++)
		sigaddset(set, signals[i]);
}

int cli_signal_catch(fsafe_cancel *cancel)
{
	struct sigaction sa = { .sa_handler = on_signal };

	cancel_token = cancel;
	/* Another of ours arriving mid-handler must not race on `caught`. */
	our_set(&sa.sa_mask);
	for (size_t i = 0; i < NSIGNALS; i++) {
		struct sigaction old;
		if (sigaction(signals[i], NULL, &old) < 0)
			return -errno;
		/* Ignored on entry (nohup, a parent's SIGPIPE policy): the
		   caller asked us not to react, so keep it that way. */
		if (old.sa_handler == SIG_IGN)
			continue;
		if (sigaction(signals[i], &sa, NULL) < 0)
			return -errno;
	}
	return 0;
}

int cli_signal_caught(void)
{
	return caught;
}

int cli_signal_block(sigset_t *waitmask)
{
	sigset_t set;

	our_set(&set);
	if (sigprocmask(SIG_BLOCK, &set, waitmask) < 0)
		return -errno;
	for (size_t i = 0; i < NSIGNALS; i++)
		sigdelset(waitmask, signals[i]);
	return 0;
}

void cli_signal_deliver_pending(void)
{
	sigset_t set;

	our_set(&set);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

int cli_signal_reraise(void)
{
	int sig = caught;
	sigset_t set;

	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	/* Only reached if the default action does not end the process. */
	return 128 + sig;
}
