/*
 * The CLI tests' view of a JetStream server, without the nats tool:
 *   ns_tool URL add STREAM SUBJECT DUP_WINDOW_MS
 *   ns_tool URL dump STREAM     (each message: "<Nats-Msg-Id> <payload>")
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

static int add(jsCtx *js, char **argv)
{
	jsStreamConfig cfg;
	const char *subjects[] = { argv[4] };

	jsStreamConfig_Init(&cfg);
	cfg.Name = argv[3];
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	cfg.Storage = js_FileStorage;
	cfg.Duplicates = strtoll(argv[5], NULL, 10) * 1000000;
	return js_AddStream(NULL, js, &cfg, NULL, NULL) == NATS_OK ? 0 : 1;
}

static int dump(jsCtx *js, const char *stream)
{
	jsStreamInfo *si = NULL;

	if (js_GetStreamInfo(&si, js, stream, NULL, NULL) != NATS_OK)
		return 1;
	uint64_t first = si->State.FirstSeq, n = si->State.Msgs;
	jsStreamInfo_Destroy(si);
	for (uint64_t i = 0; i < n; i++) {
		natsMsg *m = NULL;
		const char *id = "";
		if (js_GetMsg(&m, js, stream, first + i, NULL, NULL) != NATS_OK)
			return 1;
		natsMsgHeader_Get(m, "Nats-Msg-Id", &id);
		printf("%s %.*s\n", id, natsMsg_GetDataLength(m),
		       natsMsg_GetData(m) ? natsMsg_GetData(m) : "");
		natsMsg_Destroy(m);
	}
	return 0;
}

int main(int argc, char **argv)
{
	natsConnection *nc;
	jsCtx *js;
	int r = 2;

	if (argc < 4 || natsConnection_ConnectTo(&nc, argv[1]) != NATS_OK ||
	    natsConnection_JetStream(&js, nc, NULL) != NATS_OK)
		return 2;
	if (strcmp(argv[2], "add") == 0 && argc == 6)
		r = add(js, argv);
	else if (strcmp(argv[2], "dump") == 0 && argc == 4)
		r = dump(js, argv[3]);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return r;
}
