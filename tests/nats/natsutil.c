#define _GNU_SOURCE
#include "natsutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nats/nats.h>

#define START_TIMEOUT_MS 10000

const char *ns_binary(void)
{
	static const char *const where[] = { "/usr/sbin/nats-server",
	                                     "/usr/bin/nats-server",
	                                     "/usr/local/bin/nats-server" };

	for (size_t i = 0; i < sizeof(where) / sizeof(*where); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static bool accepts(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

void ns_start(struct ns_server *s, const char *store_dir)
{
	char port[16];

	if (!s->port)
		s->port = free_port();
	if (store_dir)
		snprintf(s->store, sizeof(s->store), "%s", store_dir);
	snprintf(s->url, sizeof(s->url), "nats://127.0.0.1:%d", s->port);
	snprintf(port, sizeof(port), "%d", s->port);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		char log[4200];
		snprintf(log, sizeof(log), "%s/server.log", s->store);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
		              0644);
		if (fd >= 0)
			dup2(fd, 1), dup2(fd, 2);
		execl(ns_binary(), "nats-server", "-js", "-a", "127.0.0.1",
		      "-p", port, "-sd", s->store, (char *)NULL);
		_exit(127);
	}
	for (int waited = 0; !accepts(s->port); waited += 10) {
		int st;
		if (waitpid(s->pid, &st, WNOHANG) == s->pid)
			fail_msg("nats-server exited at start");
		if (waited > START_TIMEOUT_MS)
			fail_msg("nats-server not up after %d ms", waited);
		nanosleep(&(struct timespec){ 0, 10000000L }, NULL);
	}
}

void ns_signal(struct ns_server *s, int sig)
{
	kill(s->pid, sig);
	if (sig == SIGSTOP || sig == SIGCONT)
		return;
	waitpid(s->pid, NULL, 0);
	s->pid = 0;
}

void ns_stop(struct ns_server *s)
{
	if (s->pid > 0)
		ns_signal(s, SIGKILL);
}

static jsCtx *js_connect(const struct ns_server *s, natsConnection **nc)
{
	jsCtx *js = NULL;

	assert_int_equal(natsConnection_ConnectTo(nc, s->url), NATS_OK);
	assert_int_equal(natsConnection_JetStream(&js, *nc, NULL), NATS_OK);
	return js;
}

void ns_add_stream(const struct ns_server *s, const char *name,
                   const char *subject, int64_t dup_window_ms)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		natsConnection *nc;
		jsCtx *js = js_connect(s, &nc);
		jsStreamConfig cfg;
		jsStreamInfo *si = NULL;
		jsErrCode jerr = 0;
		const char *subjects[] = { subject };
		jsStreamConfig_Init(&cfg);
		cfg.Name = name;
		cfg.Subjects = subjects;
		cfg.SubjectsLen = 1;
		cfg.Storage = js_FileStorage;
		cfg.Duplicates = dup_window_ms * 1000000;
		natsStatus r = js_AddStream(&si, js, &cfg, NULL, &jerr);
		jsStreamInfo_Destroy(si);
		_exit(r == NATS_OK ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

void ns_assert_stream(const struct ns_server *s, const char *stream,
                      const char *id, uint64_t n,
                      size_t (*rec)(uint64_t seq, unsigned char *buf))
{
	natsConnection *nc;
	jsCtx *js = js_connect(s, &nc);
	jsStreamInfo *si = NULL;
	unsigned char *want = malloc(1 << 20);
	char name[80];

	assert_int_equal(js_GetStreamInfo(&si, js, stream, NULL, NULL),
	                 NATS_OK);
	uint64_t msgs = si->State.Msgs, first = si->State.FirstSeq;
	jsStreamInfo_Destroy(si);
	if (msgs != n)
		fail_msg("stream %s holds %llu messages, expected %llu", stream,
		         (unsigned long long)msgs, (unsigned long long)n);
	for (uint64_t i = 0; i < n; i++) {
		natsMsg *m = NULL;
		const char *v = NULL;
		assert_int_equal(js_GetMsg(&m, js, stream, first + i, NULL, NULL),
		                 NATS_OK);
		snprintf(name, sizeof(name), "%s-%llu", id,
		         (unsigned long long)i + 1);
		assert_int_equal(natsMsgHeader_Get(m, "Nats-Msg-Id", &v),
		                 NATS_OK);
		if (strcmp(v, name) != 0)
			fail_msg("stream message %llu is %s, expected %s",
			         (unsigned long long)(first + i), v, name);
		size_t len = rec(i + 1, want);
		assert_int_equal((size_t)natsMsg_GetDataLength(m), len);
		if (len)
			assert_memory_equal(natsMsg_GetData(m), want, len);
		natsMsg_Destroy(m);
	}
	free(want);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
}
