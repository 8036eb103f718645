/* A real nats-server for the JetStream sink's tests: started with -js on
   127.0.0.1 (a free port, a scratch store), stopped at the end. */
#ifndef FSAFE_TEST_NATSUTIL_H
#define FSAFE_TEST_NATSUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct ns_server {
	pid_t pid;
	int port;
	char url[64];
	char store[4096];
};

/* The path of nats-server, or NULL when it is not installed. */
const char *ns_binary(void);
/* Start on a free port (or s->port if set again), store in s->store;
   waits (bounded) until it accepts connections. Asserts. */
void ns_start(struct ns_server *s, const char *store_dir);
/* Send `sig`, wait for the process (SIGSTOP: not waited for). */
void ns_signal(struct ns_server *s, int sig);
void ns_stop(struct ns_server *s);

/* In a child process (libnats is never started in a process that forks
   later): create stream `name` on `subject`, file storage, with this
   duplicate window. Asserts. */
void ns_add_stream(const struct ns_server *s, const char *name,
                   const char *subject, int64_t dup_window_ms);

/* Check the stream holds exactly records 1..n of spool `id`, in order,
   each record's bytes as made by `rec` and named <id>-<seq>. */
void ns_assert_stream(const struct ns_server *s, const char *stream,
                      const char *id, uint64_t n,
                      size_t (*rec)(uint64_t seq, unsigned char *buf));

#endif
