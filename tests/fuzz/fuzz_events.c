/*
 * libFuzzer target for the checkpoint's audit trail parser
 * (src/events.c), driven alone: the input is an events.log.
 *
 * abort() (a finding) if an intact record does not come back the same
 * after formatting and parsing it again, if its kind has no name, if the
 * count of intact and damaged lines does not add up to the non-empty
 * lines of the input, if a record formatted from a parsed one is
 * longer than FSAFE__EVENT_MAX, or if the torn tail fsafe__events_tail
 * finds does not start after a newline or holds an intact record.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"

static int again(const struct fsafe_checkpoint_event *e, void *arg)
{
	char rec[FSAFE__EVENT_MAX + 64];
	struct fsafe_checkpoint_event b;
	size_t *intact = arg;

	if (!fsafe_checkpoint_event_name(e->kind))
		abort();
	int n = fsafe__event_format(rec, sizeof(rec), e->time_ms, e->pid,
	                            e->kind, e->generation);
	if (n <= 0 || n > FSAFE__EVENT_MAX || rec[n - 1] != '\n')
		abort();
	rec[n - 1] = '\0';
	if (!fsafe__event_parse(rec, &b) || b.time_ms != e->time_ms ||
	    b.pid != e->pid || b.kind != e->kind ||
	    b.generation != e->generation)
		abort();
	(*intact)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t intact = 0, bad = 0, lines = 0;
	char *text;

	if (size > 256 * 1024 || !(text = malloc(size ? size : 1)))
		return 0;
	memcpy(text, data, size);
	size_t tail = fsafe__events_tail(text, size);
	if (tail > size || (tail && text[tail - 1] != '\n'))
		abort();
	size_t in_tail = 0, tail_bad = 0;
	if (fsafe__events_parse(text + tail, size - tail, again, &in_tail,
	                        &tail_bad) != 0 || in_tail)
		abort();
	memcpy(text, data, size);
	for (size_t i = 0, start = 0; i <= size; i++) {
		if (i == size || data[i] == '\n') {
			lines += i > start;
			start = i + 1;
		}
	}
	if (fsafe__events_parse(text, size, again, &intact, &bad) != 0 ||
	    intact + bad != lines)
		abort();
	free(text);
	return 0;
}
