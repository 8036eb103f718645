/* The CLI's side of every store's check and repair (fsafe.h, "Damage"). */
#ifndef FSAFE_CLI_DAMAGE_H
#define FSAFE_CLI_DAMAGE_H

#include <stdbool.h>

#include "fsafe.h"

struct cli_damage {
	unsigned unrepaired; /* repair: problems reported with no action */
};

/* The fsafe_damage_fn for `check` ("PATH: WHAT") or `repair` ("PATH:
   WHAT: ACTION", "left as it is" when nothing could be done, counted in
   the struct cli_damage its arg must be) on standard output. */
fsafe_damage_fn cli_damage_printer(bool repair);

/* The same problem as a one-line warning on standard error, for commands
   that meet damage on their way, with what was done about it (or the
   records it cost); arg is the store's "KIND DIR" label. */
int cli_damage_warn(const struct fsafe_damage *d, void *arg);

/*
 * The exit status of `fsafe KIND DIR check|repair` from the walk's result
 * r: check 0 clean, 1 damage found; repair 0 when everything was dealt
 * with, 1 otherwise; 2 when the walk could not run (after a message).
 */
int cli_damage_status(const char *label, bool repair, int r,
                      const struct cli_damage *cd);

#endif
