/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "brokerd/sse_stream.h"
#include "common/util.h"

void brokerd_sse_init(struct brokerd_sse *s, size_t max_event)
{
	*s = (struct brokerd_sse){.max_event = max_event};
}

void brokerd_sse_release(struct brokerd_sse *s)
{
	free(s->line);
	free(s->data);
	*s = (struct brokerd_sse){.max_event = s->max_event};
}

bool brokerd_sse_idle(const struct brokerd_sse *s)
{
	return s->line_len == 0 && !s->has_data && !s->has_name;
}

static void grow(char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	*buf = rts_xrealloc(*buf, c);
	*cap = c;
}

static void reset_event(struct brokerd_sse *s)
{
	s->name_len = 0;
	s->has_name = false;
	s->data_len = 0;
	s->has_data = false;
}

/* One whole line (without its end). */
static int line_done(struct brokerd_sse *s, brokerd_sse_event_fn cb, void *arg)
{
	const char *l = s->line ? s->line : "";
	size_t n = s->line_len;
	s->line_len = 0;
	if (n == 0) {
		if (!s->has_data) {
			reset_event(s);
			return 0;
		}
		grow(&s->data, &s->data_cap, s->data_len + 1);
		s->data[s->data_len] = '\0';
		s->name[s->name_len] = '\0';
		int r = cb(s->has_name ? s->name : "message", s->data, s->data_len, arg);
		reset_event(s);
		return r;
	}
	if (l[0] == ':')
		return 0;
	const char *colon = memchr(l, ':', n);
	size_t field_len = colon ? (size_t)(colon - l) : n;
	const char *value = colon ? colon + 1 : l + n;
	size_t value_len = (size_t)(l + n - value);
	if (value_len > 0 && value[0] == ' ') {
		value++;
		value_len--;
	}
	if (field_len == 5 && memcmp(l, "event", 5) == 0) {
		if (value_len > BROKERD_SSE_NAME_MAX)
			return -EFBIG;
		memcpy(s->name, value, value_len);
		s->name_len = value_len;
		s->has_name = true;
	} else if (field_len == 4 && memcmp(l, "data", 4) == 0) {
		size_t need = s->data_len + (s->has_data ? 1 : 0) + value_len;
		if (need > s->max_event)
			return -EFBIG;
		grow(&s->data, &s->data_cap, need + 1);
		if (s->has_data)
			s->data[s->data_len++] = '\n';
		memcpy(s->data + s->data_len, value, value_len);
		s->data_len += value_len;
		s->has_data = true;
	}
	/* "id", "retry" and unknown fields: nothing we forward. */
	return 0;
}

int brokerd_sse_feed(struct brokerd_sse *s, const char *buf, size_t len, brokerd_sse_event_fn cb, void *arg)
{
	if (s->failed)
		return -EBADMSG;
	size_t line_max = s->max_event + 64;
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		int r = 0;
		if (c == '\0') {
			r = -EBADMSG;
		} else if (c == '\n' && s->after_cr) {
			s->after_cr = false; /* the LF of a CRLF */
			continue;
		} else if (c == '\r' || c == '\n') {
			s->after_cr = c == '\r';
			r = line_done(s, cb, arg);
		} else {
			s->after_cr = false;
			/* Runs of ordinary bytes are copied at once. */
			size_t j = i;
			while (j < len && buf[j] != '\r' && buf[j] != '\n' && buf[j] != '\0')
				j++;
			size_t run = j - i;
			if (s->line_len + run > line_max) {
				r = -EFBIG;
			} else {
				grow(&s->line, &s->line_cap, s->line_len + run);
				memcpy(s->line + s->line_len, buf + i, run);
				s->line_len += run;
				i = j - 1;
			}
		}
		if (r < 0) {
			s->failed = true;
			return r;
		}
	}
	return 0;
}
