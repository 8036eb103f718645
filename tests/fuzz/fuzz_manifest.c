/*
 * libFuzzer target for the checkpoint's manifest parser (src/manifest.c),
 * driven alone. Input: a selector byte, then a manifest's text; with the
 * selector odd the target appends the closing "end <sha256>" line itself,
 * so the fuzzer reaches the body's parser past the checksum.
 *
 * abort() (a finding) if a manifest that parses does not come back the
 * same after formatting it and parsing the result (sequence, time,
 * revision, every entry and its CRC-32C where it has one), if the formatted text does not parse, or if an
 * entry breaks the rules the parser promises (a valid, sorted, unique
 * name; a 64-digit lowercase hash).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "sha256.h"

static void same(const struct fsafe__manifest *a,
                 const struct fsafe__manifest *b)
{
	if (a->seq != b->seq || a->time_ms != b->time_ms || a->n != b->n ||
	    strcmp(a->revision, b->revision) != 0)
		abort();
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->e[i].name, b->e[i].name) ||
		    a->e[i].size != b->e[i].size ||
		    strcmp(a->e[i].hash, b->e[i].hash) ||
		    (a->e[i].has_crc && (!b->e[i].has_crc ||
		                         a->e[i].crc != b->e[i].crc)))
			abort();
}

static void rules(const struct fsafe__manifest *m)
{
	for (size_t i = 0; i < m->n; i++) {
		if (fsafe__ckpt_check_name(m->e[i].name) < 0 ||
		    (i && strcmp(m->e[i - 1].name, m->e[i].name) >= 0) ||
		    strlen(m->e[i].hash) != 64 ||
		    strspn(m->e[i].hash, "0123456789abcdef") != 64)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsafe__manifest m, again;
	char *text, *out;
	size_t len;

	if (size < 1 || size > 256 * 1024)
		return 0;
	bool seal = data[0] & 1;
	data++, size--;
	/* The parser may read text[len - 1] only: no terminator given. */
	if (!(text = malloc(size + 70)))
		return 0;
	memcpy(text, data, size);
	if (seal) {
		char hex[65];
		fsafe__sha256_hex_of(data, size, hex);
		memcpy(text + size, "end ", 4);
		memcpy(text + size + 4, hex, 64);
		text[size + 68] = '\n';
		size += 69;
	}
	int r = fsafe__manifest_parse(text, size, &m);
	free(text);
	if (r == -ENOMEM)
		return 0;
	if (r < 0) {
		if (r != -EBADMSG && r != -EPROTONOSUPPORT)
			abort();
		fsafe__manifest_free(&m);
		return 0;
	}
	rules(&m);
	if (fsafe__manifest_format(&m, &out, &len) < 0) {
		fsafe__manifest_free(&m);
		return 0;
	}
	if (fsafe__manifest_parse(out, len, &again) != 0)
		abort();
	same(&m, &again);
	free(out);
	fsafe__manifest_free(&again);
	fsafe__manifest_free(&m);
	return 0;
}
