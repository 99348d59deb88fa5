/* SPDX-License-Identifier: Apache-2.0 */
/* One server-sent event: how a precheck's MCP upstream may answer (seed: "url is a fixed
 * HTTPS Streamable HTTP endpoint answering with JSON or one SSE event"). The turn's MCP
 * calls still refuse SSE (brokerd/mcp.h); only a precheck's calls read it, through this.
 *
 * The body is text/event-stream as the WHATWG HTML standard ("Server-sent events",
 * "Interpreting an event stream") defines it, read whole (brokerd never streams it) and
 * held to one event: lines end in CRLF, LF or CR; a leading UTF-8 BOM is dropped; a line
 * starting with ':' is a comment; "data" lines append to the event's data (joined by
 * '\n'); "event" names its type, which must be "message" (the MCP transport's) when given;
 * "id" and "retry" are ignored; an empty line dispatches the event. Pure, no I/O; fuzzed
 * (tests/fuzz/fuzz_sse.c).
 *
 * Why not brokerd/sse_stream.h, the splitter of the Anthropic stream: the two read the
 * same line format but keep different rules. This one sees a whole, bounded body and
 * refuses what the MCP transport never sends (a field other than data, event, id and
 * retry, a second event, a type other than message, data not dispatched at the end),
 * naming the refusal; the splitter takes pieces as they come, keeps state between
 * them, bounds each event, and ignores unknown fields, as the standard says a client
 * should, because the Messages API's stream is filtered event by event afterwards
 * (brokerd/anthropic.h). Rebuilding this on the splitter would need a strict mode, a BOM
 * rule and an end-of-body rule added to it for this one caller, for about 60 lines
 * saved; both are fuzzed as they are. */
#ifndef BROKERD_SSE_H
#define BROKERD_SSE_H

#include <stdbool.h>
#include <stddef.h>

/* True when a Content-Type header value names text/event-stream (case-insensitive,
 * optional parameters). */
bool brokerd_content_type_is_sse(const char *ct);

/* The data of the one event in the len bytes at body. Returns 0 with *data (heap,
 * NUL-terminated, *data_len bytes; caller frees), or -EINVAL with *why (static) when the
 * body dispatches no event with data, more than one, an event of another type, any field
 * name other than data, event, id and retry, a NUL byte, or data left undispatched at the
 * end. Nothing of the body is in *why. */
int brokerd_sse_one_event(const char *body, size_t len, char **data, size_t *data_len, const char **why);

#endif
