/*
 * libfsafe-nats: a JetStream sink for the forwarder (fsafe/forward.h).
 *
 * Each record is published to `subject` with the header
 * "Nats-Msg-Id: <spool id>-<sequence number>", and a batch counts as
 * delivered only when JetStream acknowledged every record of it; an
 * acknowledgement that the stream already had the record (a duplicate)
 * counts as delivered. So a batch sent again (a retry, or a restart after
 * a crash before the cursor moved) is stored once, as long as the stream
 * still remembers the names: a record sent again after the stream's
 * duplicate window has passed is stored twice. The sink's start refuses
 * (-ERANGE, with the reason in fsafe_nats_sink_message) a stream whose
 * duplicate window is shorter than the forwarder's max_retry_ms.
 *
 * Built only when libnats is found; libfsafe itself has no network code.
 */
#ifndef FSAFE_NATS_H
#define FSAFE_NATS_H

#include "fsafe/forward.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(FSAFE_STATIC_BUILD)
#define FSAFE_NATS_API __attribute__((visibility("default")))
#else
#define FSAFE_NATS_API
#endif

typedef struct fsafe_nats_sink fsafe_nats_sink;

/*
 * A sink publishing to `subject` on the server at `url`
 * ("nats://127.0.0.1:4222"). Nothing is connected until the forwarder
 * starts the sink: start connects (-ECONNREFUSED when that fails) and
 * checks the duplicate window of `stream` (may be NULL: the stream
 * that holds `subject`, asked of the server; -ENOENT when none does).
 * `ack_wait_ms` bounds the wait for a batch's acknowledgements (0: 5000).
 * A batch goes out whole on one connection: when the server goes away,
 * the batch fails (the forwarder retries it) and the next send connects
 * anew, so records reach the stream in spool order; the connection is
 * never resumed with what was published while it was lost.
 * 0, -EINVAL for a missing url or subject (or one with white space or
 * quotes), or -ENOMEM. A record longer than the server's max_payload
 * (1 MiB by default) fails its batch until the forwarder gives up.
 */
FSAFE_NATS_API int fsafe_nats_sink_new(const char *url, const char *subject,
                                       const char *stream,
                                       uint32_t ack_wait_ms,
                                       fsafe_nats_sink **out);

/* The forwarder's sink over `k` (which must outlive the forwarder). */
FSAFE_NATS_API struct fsafe_forward_sink
fsafe_nats_sink_callbacks(fsafe_nats_sink *k);

/* Acknowledgements so far that said the stream already held the record
   (sent again after a crash, a lost acknowledgement or a retry, and
   stored once: the duplicates the message names suppressed). */
FSAFE_NATS_API uint64_t fsafe_nats_sink_duplicates(fsafe_nats_sink *k);

/* Why the last call failed, in words ("" when it did not). */
FSAFE_NATS_API const char *fsafe_nats_sink_message(const fsafe_nats_sink *k);

/* Close the connection and free. NULL: no-op. */
FSAFE_NATS_API void fsafe_nats_sink_free(fsafe_nats_sink *k);

#ifdef __cplusplus
}
#endif

#endif
