/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <string.h>
#include <strings.h>

#include "brokerd/head.h"

#define INVALID(msg)                                                                                                   \
	do {                                                                                                           \
		h->why = (msg);                                                                                        \
		return BROKERD_HEAD_INVALID;                                                                           \
	} while (0)

static const char http_version[] = "HTTP/1.1";

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))
		return true;
	switch (c) {
	case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
	case '-': case '.': case '^': case '_': case '`': case '|': case '~':
		return true;
	default:
		return false;
	}
}

static bool is_vchar(unsigned char c)
{
	return c >= 0x21 && c <= 0x7e;
}

static bool is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* The request line's n bytes at s (without CRLF); complete when its CRLF has been seen.
 * Returns NULL when the bytes are valid so far, else the reason. */
static const char *request_line(const unsigned char *s, size_t n, bool complete, struct brokerd_head *h)
{
	size_t i = 0;
	while (i < n && is_tchar(s[i]))
		i++;
	if (i == n)
		return complete ? "request line without target" : NULL;
	if (i == 0 || s[i] != ' ')
		return "malformed method";
	size_t t0 = ++i;
	while (i < n && is_vchar(s[i]))
		i++;
	if (i == n)
		return complete ? "request line without version" : NULL;
	if (i == t0 || s[i] != ' ')
		return "malformed request target";
	size_t t_end = i++;
	size_t v_len = n - i;
	if (v_len > sizeof(http_version) - 1 || memcmp(s + i, http_version, v_len) != 0)
		return "not HTTP/1.1";
	if (!complete)
		return NULL;
	if (v_len != sizeof(http_version) - 1)
		return "not HTTP/1.1";
	h->target = (const char *)s + t0;
	h->target_len = t_end - t0;
	return NULL;
}

/* A field line's n bytes at s (without CRLF). On a complete valid line, *colon is the
 * index of its colon. Returns NULL or the reason, like request_line(). */
static const char *field_line(const unsigned char *s, size_t n, bool complete, size_t *colon)
{
	if (n > 0 && is_ows(s[0]))
		return "obs-fold";
	size_t i = 0;
	while (i < n && is_tchar(s[i]))
		i++;
	if (i == n)
		return complete ? "field line without colon" : NULL;
	if (i == 0 || s[i] != ':')
		return "malformed field name";
	*colon = i;
	for (i++; i < n; i++)
		if (!is_vchar(s[i]) && !is_ows(s[i]))
			return "control or non-ASCII byte in a field value";
	return NULL;
}

static bool name_is(const unsigned char *s, size_t n, const char *want)
{
	return n == strlen(want) && strncasecmp((const char *)s, want, n) == 0;
}

enum brokerd_head_verdict brokerd_head_scan(const char *buf, size_t len, struct brokerd_head *h)
{
	const unsigned char *s = (const unsigned char *)buf;
	*h = (struct brokerd_head){0};
	size_t limit = len < BROKERD_HEAD_MAX ? len : BROKERD_HEAD_MAX;
	unsigned n_length = 0, n_host = 0, n_te = 0;
	bool length_digits = false;

	for (size_t pos = 0, line = 0;; line++) {
		size_t eol = pos;
		while (eol < limit && s[eol] != '\r' && s[eol] != '\n')
			eol++;
		bool complete = false;
		if (eol < limit) {
			if (s[eol] == '\n')
				INVALID("bare LF");
			if (eol + 1 < limit) {
				if (s[eol + 1] != '\n')
					INVALID("CR without LF");
				complete = true;
			}
			/* else the CR is the last byte so far: its LF may still come */
		}

		if (complete && eol == pos) {
			if (line == 0)
				INVALID("empty line before the request line");
			if (n_te)
				INVALID("Transfer-Encoding");
			if (n_length != 1)
				INVALID("Content-Length missing or repeated");
			if (!length_digits)
				INVALID("Content-Length is not a number");
			if (n_host != 1)
				INVALID("Host missing or repeated");
			h->len = eol + 2;
			return BROKERD_HEAD_COMPLETE;
		}

		const char *why;
		size_t colon = 0;
		if (line == 0)
			why = request_line(s + pos, eol - pos, complete, h);
		else
			why = field_line(s + pos, eol - pos, complete, &colon);
		if (why)
			INVALID(why);

		if (!complete) {
			if (limit == BROKERD_HEAD_MAX)
				INVALID("head too long");
			return BROKERD_HEAD_INCOMPLETE;
		}

		if (line > 0) {
			const unsigned char *name = s + pos, *v = s + pos + colon + 1, *v_end = s + eol;
			while (v < v_end && is_ows(*v))
				v++;
			while (v_end > v && is_ows(v_end[-1]))
				v_end--;
			if (name_is(name, colon, "Content-Length")) {
				n_length++;
				length_digits = v < v_end;
				h->content_length = 0;
				for (const unsigned char *p = v; p < v_end; p++) {
					if (*p < '0' || *p > '9') {
						length_digits = false;
						break;
					}
					unsigned d = (unsigned)(*p - '0');
					h->content_length = h->content_length > (UINT64_MAX - d) / 10
								    ? UINT64_MAX
								    : h->content_length * 10 + d;
				}
			} else if (name_is(name, colon, "Transfer-Encoding")) {
				n_te++;
			} else if (name_is(name, colon, "Host")) {
				n_host++;
			}
		}
		pos = eol + 2;
	}
}
