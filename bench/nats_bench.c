/*
 * Forwarding throughput: records/s moved from a spool to a JetStream
 * stream by the forwarder and libfsafe-nats (each batch acknowledged by
 * JetStream before the spool's cursor moves past it), against a plain
 * libnats loop that publishes the same records with the same Nats-Msg-Id
 * headers and waits for the same acknowledgements per batch, but keeps
 * no cursor. 100-byte and 4 KiB records, measured in one run.
 *
 *   cc -O2 -Iinclude -Inats/include bench/nats_bench.c \
 *      build/nats/libfsafe-nats.a build/libfsafe.a -lnats -lpthread [-luring]
 *   bench/nats_bench.sh [RECORDS] [BATCH]     # starts a nats-server -js
 *   ./a.out URL DIR [RECORDS] [BATCH]
 *
 * DIR holds the spool (on the filesystem to measure). The stream
 * "FSAFE_BENCH" (subject "fsafe.bench", file storage, duplicate window 2
 * min) is made afresh for each case.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "fsafe.h"
#include "fsafe/forward.h"
#include "fsafe/nats.h"

#define STREAM "FSAFE_BENCH"
#define SUBJECT "fsafe.bench"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, int r)
{
	fprintf(stderr, "nats_bench: %s: %d\n", what, r);
	exit(1);
}

static void fresh_stream(jsCtx *js)
{
	jsStreamConfig cfg;
	const char *subjects[] = { SUBJECT };

	js_DeleteStream(js, STREAM, NULL, NULL);
	jsStreamConfig_Init(&cfg);
	cfg.Name = STREAM;
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	cfg.Storage = js_FileStorage;
	cfg.Duplicates = 120 * 1000000000LL;
	natsStatus st = js_AddStream(NULL, js, &cfg, NULL, NULL);
	if (st != NATS_OK)
		die("add stream", (int)st);
}

/* Publish n records of `size` bytes, `batch` at a time, each batch waited
   for until every acknowledgement is in. */
static double plain(jsCtx *js, uint64_t n, size_t size, uint32_t batch)
{
	char *buf = calloc(1, size), name[64];
	jsPubOptions po;
	double t0 = now();

	jsPubOptions_Init(&po);
	po.MaxWait = 10000;
	for (uint64_t seq = 1; seq <= n;) {
		for (uint32_t i = 0; i < batch && seq <= n; i++, seq++) {
			natsMsg *m = NULL;
			snprintf(name, sizeof(name), "plain-%" PRIu64, seq);
			natsMsg_Create(&m, SUBJECT, NULL, buf, (int)size);
			natsMsgHeader_Set(m, "Nats-Msg-Id", name);
			if (js_PublishMsgAsync(js, &m, NULL) != NATS_OK)
				die("publish", 0);
			natsMsg_Destroy(m);
		}
		if (js_PublishAsyncComplete(js, &po) != NATS_OK)
			die("acks", 0);
	}
	free(buf);
	return (double)n / (now() - t0);
}

static double forwarded(const char *url, const char *dir, uint64_t n,
                        size_t size, uint32_t batch)
{
	struct fsafe_spool_opts so = FSAFE_SPOOL_OPTS_INIT;
	struct fsafe_forward_opts fo = FSAFE_FORWARD_OPTS_INIT;
	char path[4200], *buf = calloc(1, size);
	fsafe_spool *s;
	fsafe_nats_sink *k;
	fsafe_forward *fw;
	int r;

	snprintf(path, sizeof(path), "rm -rf '%s/nats-bench-spool'", dir);
	if (system(path) != 0)
		die("rm", 0);
	snprintf(path, sizeof(path), "%s/nats-bench-spool", dir);
	so.flags = FSAFE_SPOOL_CREATE;
	if ((r = fsafe_spool_open(AT_FDCWD, path, &so, &s)) < 0)
		die("spool", r);
	struct iovec v[256];
	for (uint64_t done = 0; done < n;) {
		size_t m = n - done < 256 ? (size_t)(n - done) : 256;
		for (size_t i = 0; i < m; i++)
			v[i] = (struct iovec){ buf, size };
		if ((r = fsafe_spool_append(s, v, m, NULL)) < 0)
			die("append", r);
		done += m;
	}
	if ((r = fsafe_nats_sink_new(url, SUBJECT, STREAM, 10000, &k)) < 0)
		die("sink", r);
	struct fsafe_forward_sink sink = fsafe_nats_sink_callbacks(k);
	fo.flags = FSAFE_FORWARD_ONCE;
	fo.batch = batch;
	fo.batch_bytes = batch * (uint32_t)size;
	if ((r = fsafe_forward_open(s, &sink, &fo, &fw)) < 0) {
		fprintf(stderr, "%s\n", fsafe_nats_sink_message(k));
		die("forward open", r);
	}
	double t0 = now();
	if ((r = fsafe_forward_run(fw, NULL)) < 0)
		die("forward", r);
	double rate = (double)n / (now() - t0);
	fsafe_forward_close(fw);
	fsafe_nats_sink_free(k);
	fsafe_spool_close(s);
	free(buf);
	return rate;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: nats_bench URL DIR [RECORDS] [BATCH]\n");
		return 2;
	}
	uint64_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : 50000;
	uint32_t batch = argc > 4 ? (uint32_t)atoi(argv[4]) : 256;
	static const size_t sizes[] = { 100, 4096 };
	natsConnection *nc;
	jsCtx *js;

	if (natsConnection_ConnectTo(&nc, argv[1]) != NATS_OK ||
	    natsConnection_JetStream(&js, nc, NULL) != NATS_OK)
		die("connect", 0);
	printf("| record | batch | records | forwarder rec/s | plain libnats rec/s | ratio |\n");
	printf("|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < 2; i++) {
		fresh_stream(js);
		double p = plain(js, n, sizes[i], batch);
		fresh_stream(js);
		double f = forwarded(argv[1], argv[2], n, sizes[i], batch);
		printf("| %zu B | %u | %" PRIu64 " | %.0f | %.0f | %.2f |\n",
		       sizes[i], batch, n, f, p, f / p);
	}
	js_DeleteStream(js, STREAM, NULL, NULL);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return 0;
}
