/* SPDX-License-Identifier: Apache-2.0 */
/* The request-head gate: the bytes of a worker's request line and header fields are
 * checked here, before libmicrohttpd parses them (issue 3, "Request syntax").
 *
 * libmicrohttpd 0.9.75, even in its strict mode, accepts duplicate Content-Length fields
 * and answers several malformed heads with its own HTML error pages. brokerd therefore
 * accepts each connection itself, peeks at the head (MSG_PEEK, bounded, with a deadline)
 * and hands the connection to libmicrohttpd only when the head passes this check; a
 * refused head gets brokerd's own JSON 400 and the connection is closed, so no byte after
 * it is ever parsed. This is a validator of RFC 9112 message syntax, narrowed to what the
 * worker sends; it extracts nothing but the framing facts it checks. Pure, no I/O. */
#ifndef BROKERD_HEAD_H
#define BROKERD_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest head accepted, request line through the empty line. The worker's is about 170
 * bytes; libmicrohttpd's per-connection memory (turn.c) is several times larger, so it
 * never answers 431 itself. */
#define BROKERD_HEAD_MAX 4096u

enum brokerd_head_verdict {
	BROKERD_HEAD_INCOMPLETE, /* every byte so far is valid; the empty line has not come */
	BROKERD_HEAD_COMPLETE,	 /* a whole, valid head */
	BROKERD_HEAD_INVALID,	 /* refuse with 400 and close */
};

struct brokerd_head {
	size_t len;	    /* COMPLETE: bytes of the head, the final CRLF CRLF included */
	uint64_t content_length; /* COMPLETE: its value, saturated at UINT64_MAX */
	const char *target; /* COMPLETE: the request target, target_len bytes inside buf */
	size_t target_len;
	const char *why;    /* INVALID: a short static reason for the debug log */
};

/* Check the len bytes at buf, the start of what a connection has sent. Accepted:
 *   request line  method SP request-target SP "HTTP/1.1" CRLF, where method is a token
 *                 and the target one or more visible ASCII bytes (0x21-0x7e);
 *   field lines   field-name ":" OWS field-value OWS CRLF, where the name is a token and
 *                 the value visible ASCII, SP and HTAB only;
 *   the end       an empty line (CRLF).
 * Refused (INVALID), as soon as the offending byte is seen: a bare LF or a CR not followed
 * by LF, NUL or any other control byte (HTAB only inside field values), bytes >= 0x80, a
 * line starting with SP or HTAB (obs-fold), an empty line before the request line,
 * whitespace before a field's colon, another version than HTTP/1.1, and a head longer
 * than BROKERD_HEAD_MAX. Once the head is complete, also refused: a Transfer-Encoding
 * field, a Content-Length field missing, repeated or not 1*DIGIT, a Host field missing or
 * repeated (field names compare case-insensitively). Bytes after the head (the body, or
 * anything a client pipelines) are not looked at. */
enum brokerd_head_verdict brokerd_head_scan(const char *buf, size_t len, struct brokerd_head *h);

#endif
