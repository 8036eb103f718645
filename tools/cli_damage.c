#include "cli_damage.h"

#include <stdio.h>

#include "cli.h"
#include "cli_util.h"

static int print_check(const struct fsafe_damage *d, void *arg)
{
	(void)arg;
	printf("%s: %s\n", d->path, d->what);
	return 0;
}

int cli_damage_warn(const struct fsafe_damage *d, void *arg)
{
	const char *label = arg;

	if (d->action)
		cli_warn("%s: %s: %s: %s", label, d->path, d->what, d->action);
	else if (d->lost)
		cli_warn("%s: %s: %s: %llu records lost", label, d->path,
		         d->what, (unsigned long long)d->lost);
	else
		cli_warn("%s: %s: %s", label, d->path, d->what);
	return 0;
}

static int print_repair(const struct fsafe_damage *d, void *arg)
{
	struct cli_damage *cd = arg;

	if (d->action) {
		printf("%s: %s: %s\n", d->path, d->what, d->action);
		return 0;
	}
	cd->unrepaired++;
	printf("%s: %s: left as it is\n", d->path, d->what);
	return 0;
}

fsafe_damage_fn cli_damage_printer(bool repair)
{
	return repair ? print_repair : print_check;
}

int cli_damage_status(const char *label, bool repair, int r,
                      const struct cli_damage *cd)
{
	if (!cli_flush_stdout(label))
		return CLI_USAGE;
	if (r < 0) {
		cli_warn("%s: %s: %s", label, repair ? "repair" : "check",
		         fsafe_strerror(r));
		return CLI_USAGE;
	}
	if (repair)
		return cd->unrepaired ? CLI_FAIL : CLI_OK;
	return r > 0 ? CLI_FAIL : CLI_OK;
}
