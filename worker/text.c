/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <json.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/json.h"
#include "common/util.h"

#include "worker/text.h"

size_t worker_text_chars(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p & 0xc0) != 0x80)
			n++;
	return n;
}

void worker_text_trim_utf8(char *s)
{
	size_t len = strlen(s);
	/* Look back over at most three continuation bytes for the lead byte. */
	for (size_t back = 1; back <= 4 && back <= len; back++) {
		unsigned char c = (unsigned char)s[len - back];
		if ((c & 0xc0) == 0x80)
			continue;
		size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
		if (need > back)
			s[len - back] = '\0';
		return;
	}
}

char *worker_text_bound(const char *s, size_t max, bool *truncated)
{
	size_t len = strlen(s);
	size_t mark_len = sizeof(WORKER_TRUNCATED_MARK) - 1;

	if (truncated)
		*truncated = false;
	if (rts_json_string_len(s, len) <= max)
		return rts_xstrdup(s);
	if (truncated)
		*truncated = true;

	size_t budget = max > mark_len ? max - mark_len : 0;
	size_t cost = 0, cut = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		/* A cut is only allowed where a character starts. */
		if ((c & 0xc0) != 0x80)
			cut = i;
		cost += rts_json_byte_len(c);
		if (cost > budget)
			break;
	}
	/* cut now names the start of the character that did not fit whole. */
	char *out = rts_xmalloc(cut + mark_len + 1);
	memcpy(out, s, cut);
	memcpy(out + cut, WORKER_TRUNCATED_MARK, mark_len + 1);
	return out;
}

char *worker_text_quote(const char *s)
{
	json_object *o = json_object_new_string(s);
	char *q = rts_xstrdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return q;
}

char *worker_error_json(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	worker_text_trim_utf8(msg);
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "error", json_object_new_string(msg));
	return rts_json_dump(o);
}
