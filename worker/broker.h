/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's only way out: one HTTP POST per connection to the turn's broker socket
 * (HACKING.md "Broker HTTP contract"). */
#ifndef WORKER_BROKER_H
#define WORKER_BROKER_H

#include <json.h>
#include <stddef.h>
#include <stdint.h>

/* POST body (len bytes of JSON) to route (an absolute path such as "/model"; the caller
 * has validated it) over the Unix socket at socket_path. Waits at most until deadline_ms
 * (CLOCK_MONOTONIC milliseconds, see rts_now_ms()) for connecting, sending and the whole
 * answer. The answer's headers may take at most WORKER_HTTP_HEADERS_MAX bytes and its body
 * RTS_BROKER_ANSWER_MAX.
 *
 * Returns 0 with the HTTP status in *status and the body parsed as strict JSON in *out
 * (caller owns the reference; NULL when a non-2xx answer has no valid JSON body), or a
 * negative errno: -ETIMEDOUT (deadline), -EFBIG (answer too large), -EPROTO (not a
 * well-formed HTTP/1.x answer), -EBADMSG (a 2xx answer whose body is not JSON),
 * -ENAMETOOLONG (socket path), or the connect/send/recv error. */
int worker_broker_post(const char *socket_path, const char *route, const char *body, size_t len,
		       uint64_t deadline_ms, unsigned *status, json_object **out);

#endif
