/* SPDX-License-Identifier: Apache-2.0 */
/* A server-sent events splitter (the WHATWG "event stream" format): upstream bytes in, in
 * whatever pieces TCP and TLS deliver them, whole events out. Pure, no I/O.
 *
 * Lines end with CRLF, LF or CR (a CR at the end of one piece and an LF at the start of
 * the next are one line end). A line starting with ':' is a comment; "event" sets the
 * event's name, "data" appends a line to its data (joined with LF), "id" and "retry" are
 * read and dropped; a field name without a colon is the field with an empty value; any
 * other field is ignored; one space after the colon is dropped. An empty line dispatches
 * the event when it has data (an event with a name but no data line is dropped, as a
 * browser drops it). What is left at the end of the stream without an empty line is not
 * an event.
 *
 * Bounds: an event's data at most max_event bytes and its name at most
 * BROKERD_SSE_NAME_MAX, a line at most max_event + 64 bytes; beyond that the stream is
 * refused (-EFBIG). A NUL byte is refused (-EBADMSG): no event format we forward has one. */
#ifndef BROKERD_SSE_STREAM_H
#define BROKERD_SSE_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#define BROKERD_SSE_NAME_MAX 64u

/* One whole event: name ("message" when the stream gave none) and data (data_len bytes
 * plus a NUL), valid during the call. Return 0 to go on, a negative errno to stop the
 * stream (brokerd_sse_feed() returns it). */
typedef int (*brokerd_sse_event_fn)(const char *name, const char *data, size_t data_len, void *arg);

struct brokerd_sse {
	size_t max_event;
	char *line;	     /* the current, unfinished line */
	size_t line_len, line_cap;
	bool after_cr;	     /* the last byte was a CR: an LF now ends nothing */
	char name[BROKERD_SSE_NAME_MAX + 1];
	size_t name_len;
	bool has_name;
	char *data;	     /* the event's data so far, lines joined by LF */
	size_t data_len, data_cap;
	bool has_data;
	bool failed;	     /* a feed returned an error: every later one does too */
};

/* Start a splitter for events of at most max_event bytes of data. */
void brokerd_sse_init(struct brokerd_sse *s, size_t max_event);
void brokerd_sse_release(struct brokerd_sse *s);

/* Feed len bytes; cb runs once per whole event, in order. Returns 0, -EFBIG, -EBADMSG, or
 * what cb returned. After a failure the splitter refuses every later call. */
int brokerd_sse_feed(struct brokerd_sse *s, const char *buf, size_t len, brokerd_sse_event_fn cb, void *arg);

/* True when nothing of an unfinished line or event is buffered (the stream ended at an
 * event boundary). */
bool brokerd_sse_idle(const struct brokerd_sse *s);

#endif
