/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/sse.h"
#include "brokerd/upstream.h"
#include "common/util.h"

bool brokerd_content_type_is_sse(const char *ct)
{
	return brokerd_content_type_is(ct, "text/event-stream");
}

/* The field name of a line (up to its first ':', or the whole line) equals name. */
static bool field_is(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);
	return n == k && memcmp(line, name, k) == 0;
}

static int refuse(const char *why_text, const char **why, char *buf)
{
	free(buf);
	*why = why_text;
	return -EINVAL;
}

int brokerd_sse_one_event(const char *body, size_t len, char **data, size_t *data_len, const char **why)
{
	*data = NULL;
	*data_len = 0;
	*why = NULL;
	if (memchr(body, '\0', len))
		return refuse("a NUL byte", why, NULL);
	/* The data buffer never holds more than the body. */
	char *buf = rts_xmalloc(len + 1);
	size_t n = 0;
	bool pending = false;	     /* a data line arrived since the last dispatch */
	bool typed_other = false;    /* an "event" field other than "message" since then */
	unsigned dispatched = 0;
	size_t i = 0;
	if (len >= 3 && memcmp(body, "\xef\xbb\xbf", 3) == 0)
		i = 3;
	while (i < len) {
		/* One line: up to CR, LF or CRLF. A line cut off by the end of the body still
		 * counts as a line; its event is not dispatched without the empty line after it. */
		size_t start = i;
		while (i < len && body[i] != '\r' && body[i] != '\n')
			i++;
		size_t ln = i - start;
		const char *line = body + start;
		if (i < len) {
			if (body[i] == '\r' && i + 1 < len && body[i + 1] == '\n')
				i++;
			i++;
		}
		if (ln == 0) {
			if (pending) {
				if (typed_other)
					return refuse("an event of a type other than message", why, buf);
				if (++dispatched > 1)
					return refuse("more than one event", why, buf);
			}
			/* An empty line also resets the type; an event without data is nothing. */
			pending = false;
			typed_other = false;
			continue;
		}
		if (line[0] == ':')
			continue; /* a comment */
		const char *colon = memchr(line, ':', ln);
		size_t name_len = colon ? (size_t)(colon - line) : ln;
		const char *value = colon ? colon + 1 : line + ln;
		size_t value_len = colon ? ln - name_len - 1 : 0;
		if (value_len > 0 && value[0] == ' ') {
			value++;
			value_len--;
		}
		if (field_is(line, name_len, "data")) {
			if (dispatched)
				return refuse("more than one event", why, buf);
			if (pending)
				buf[n++] = '\n';
			memcpy(buf + n, value, value_len);
			n += value_len;
			pending = true;
		} else if (field_is(line, name_len, "event")) {
			typed_other = !(value_len == 0 || (value_len == 7 && memcmp(value, "message", 7) == 0));
		} else if (!field_is(line, name_len, "id") && !field_is(line, name_len, "retry")) {
			return refuse("a field other than data, event, id and retry", why, buf);
		}
	}
	if (pending)
		return refuse("data at the end not ended by an empty line", why, buf);
	if (dispatched != 1)
		return refuse("no event with data", why, buf);
	buf[n] = '\0';
	*data = buf;
	*data_len = n;
	return 0;
}
