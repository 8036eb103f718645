/*
 * Termination signals (SIGINT, SIGTERM, SIGHUP, SIGPIPE) for commands that
 * must clean up before they die: the handler only records the signal (and
 * requests a cancellation, if given one); the command then undoes its work
 * and calls cli_signal_reraise(), so its exit status still shows the signal.
 */
#ifndef FSAFE_CLI_SIGNAL_H
#define FSAFE_CLI_SIGNAL_H

#include <signal.h>

#include "fsafe.h"

/* Installs the handlers, without SA_RESTART so blocking calls return EINTR.
   `cancel` may be NULL. Returns 0 or -errno. */
int cli_signal_catch(fsafe_cancel *cancel);

/* The first signal caught, or 0. */
int cli_signal_caught(void);

/*
 * Blocks the signals, and stores in `*waitmask` the mask to hand to
 * ppoll() so that they are let through only while waiting: checking the
 * flag and then starting a read would otherwise leave a window in which a
 * signal is recorded but the read still blocks.
 */
int cli_signal_block(sigset_t *waitmask);

/* Lets through whatever arrived while blocked, then blocks again. */
void cli_signal_deliver_pending(void);

/* Dies by the signal caught (its default action); call only when
   cli_signal_caught() is not 0. Returns 128 + the signal if it survives. */
int cli_signal_reraise(void);

#endif
