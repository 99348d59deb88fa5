/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's client side of statd's control socket: <runtime dir>/control.sock, SOCK_STREAM,
 * newline-delimited JSON, one object per line (DESIGN.md section 5, HACKING.md "Control
 * protocol answers"). Answers on one connection come in request order; events for a
 * `sandbox` message arrive later on the same connection with the request's id. */
#ifndef CLI_CONTROL_H
#define CLI_CONTROL_H

#include <json.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/limits.h"

/* Longest answer line we accept from statd, newline excluded (bytes): a rich reply event
 * with its files (RTS_CONTROL_EVENT_MAX); the `channels` answer lists every recorded
 * channel (statd bounds its state file to 4 MiB), which JSON escaping cannot push past
 * this. */
#define CLI_ANSWER_MAX RTS_CONTROL_EVENT_MAX

struct cli_control;

/* Connect to <runtime_dir>/control.sock, retrying a missing or refusing socket for up to
 * retry_ms milliseconds. On success *out is a new connection (free with cli_control_free).
 * Returns 0 or -errno (-ENAMETOOLONG when the path does not fit a socket address). */
int cli_control_open(const char *runtime_dir, unsigned retry_ms, struct cli_control **out);

void cli_control_free(struct cli_control *c);

/* Give req (a JSON object; the caller keeps its reference) the next request id of this
 * connection as "id", serialise it and send it as one line. *id receives the id.
 * Returns 0, -E2BIG when the line (newline excluded) would exceed RTS_CONTROL_RICH_LINE_MAX,
 * the longest statd reads (we refuse to send it rather than have statd reject it), or -errno
 * from the socket
 * (-EPIPE when statd closed the connection). */
int cli_control_send(struct cli_control *c, json_object *req, int64_t *id);

/* Read lines until one that is a JSON object whose "id" is the integer id (or, for an
 * answer, an error answer with no id: statd could not read the request) and which is an
 * event (has an "event" member) when want_event is true, or an answer (has none) when it is
 * false; lines about other ids are skipped. On success *out is that object (caller owns the
 * reference). deadline_ms is a CLOCK_MONOTONIC time in milliseconds (rts_now_ms()) after
 * which waiting stops with -ETIMEDOUT; 0 waits without limit.
 * Returns 0; -ECONNRESET when statd closed the connection first; -EMSGSIZE for a line longer
 * than CLI_ANSWER_MAX; -EBADMSG for a line that is not a JSON object (*why says why, static);
 * or -errno from read(2). */
int cli_control_wait(struct cli_control *c, int64_t id, bool want_event, uint64_t deadline_ms, json_object **out,
		     const char **why);

/* cli_control_wait() for the first line about id, whichever it is: an answer (a request a
 * precheck's statd refused) or an event (its outcome). */
int cli_control_wait_any(struct cli_control *c, int64_t id, uint64_t deadline_ms, json_object **out, const char **why);

static inline void cli_control_freep(struct cli_control **c)
{
	cli_control_free(*c);
}
#define cleanup_control __attribute__((cleanup(cli_control_freep)))

#endif
