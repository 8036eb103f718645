/* Every module's power-loss workloads: one line per module. */
#include "power.h"

extern const struct pw_workload pw_store_workloads[]; /* store */
extern const size_t pw_store_nworkloads;

extern const struct pw_workload pw_checkpoint_workloads[]; extern const size_t pw_checkpoint_nworkloads; /* checkpoint */

extern const struct pw_workload pw_spool_workloads[]; extern const size_t pw_spool_nworkloads; /* spool */

extern const struct pw_workload pw_inbox_workloads[]; extern const size_t pw_inbox_nworkloads; /* inbox */

static const struct pw_suite suites[] = {
	{ "core", pw_core_workloads, &pw_core_nworkloads },
	{ "inbox", pw_inbox_workloads, &pw_inbox_nworkloads },
	{ "spool", pw_spool_workloads, &pw_spool_nworkloads },
	{ "checkpoint", pw_checkpoint_workloads, &pw_checkpoint_nworkloads },
	{ "store", pw_store_workloads, &pw_store_nworkloads },
};

size_t pw_workload_count(void)
{
	size_t n = 0;

	for (size_t s = 0; s < sizeof(suites) / sizeof(suites[0]); s++)
		n += *suites[s].count;
	return n;
}

static const struct pw_suite *suite_of(size_t *i)
{
	for (size_t s = 0; s < sizeof(suites) / sizeof(suites[0]); s++) {
		if (*i < *suites[s].count)
			return &suites[s];
		*i -= *suites[s].count;
	}
	return NULL;
}

const char *pw_workload_module(size_t i)
{
	const struct pw_suite *s = suite_of(&i);

	return s ? s->module : NULL;
}

const struct pw_workload *pw_workload_at(size_t i)
{
	const struct pw_suite *s = suite_of(&i);

	return s ? &s->workloads[i] : NULL;
}
