/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdarg.h>
#include <sys/random.h>
#include <time.h>

#include "common/util.h"

static void oom(void)
{
	/* Never try to log through an allocator that just failed. */
	static const char msg[] = "roundtable-sandbox: out of memory\n";
	ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)r;
	abort();
}

void *rts_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *rts_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom();
	return p;
}

void *rts_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom();
	return q;
}

char *rts_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom();
	return p;
}

char *rts_xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom();
	return p;
}

char *rts_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;
	va_start(ap, fmt);
	int r = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (r < 0)
		oom();
	return p;
}

size_t rts_strv_len(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

char **rts_strv_dup(char *const *v)
{
	size_t n = rts_strv_len(v);
	char **out = rts_xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		out[i] = rts_xstrdup(v[i]);
	return out;
}

void rts_strv_free(char **v)
{
	rts_strvfreep(&v);
}

int rts_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

uint64_t rts_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int rts_format_local_time(time_t t, char *out, size_t outlen)
{
	struct tm tm;
	char raw[40];
	if (outlen < 32 || !localtime_r(&t, &tm))
		return -EINVAL;
	size_t n = strftime(raw, sizeof(raw), "%Y-%m-%dT%H:%M:%S%z", &tm);
	/* %z is "+HHMM"; RFC 3339 wants "+HH:MM". */
	if (n < 5 || (raw[n - 5] != '+' && raw[n - 5] != '-'))
		return -EINVAL;
	snprintf(out, outlen, "%.*s:%s", (int)(n - 2), raw, raw + n - 2);
	return 0;
}

int rts_random_hex(char *out, size_t n_bytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char buf[64];
	if (n_bytes > sizeof(buf))
		return -EINVAL;
	size_t got = 0;
	while (got < n_bytes) {
		ssize_t r = getrandom(buf + got, n_bytes - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	for (size_t i = 0; i < n_bytes; i++) {
		out[2 * i] = hex[buf[i] >> 4];
		out[2 * i + 1] = hex[buf[i] & 15];
	}
	out[2 * n_bytes] = '\0';
	return 0;
}

size_t rts_utf8_decode(const char *str, size_t len, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str;
	if (len == 0)
		return 0;
	unsigned char c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	size_t n;
	uint32_t v;
	if ((c & 0xe0) == 0xc0) {
		n = 1;
		v = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 2;
		v = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 3;
		v = c & 0x07;
	} else {
		return 0;
	}
	if (n >= len)
		return 0;
	for (size_t k = 1; k <= n; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[k] & 0x3f);
	}
	/* Reject overlong forms, surrogates and values past U+10FFFF. */
	if ((n == 1 && v < 0x80) || (n == 2 && v < 0x800) || (n == 3 && v < 0x10000) || (v >= 0xd800 && v <= 0xdfff) ||
	    v > 0x10ffff)
		return 0;
	*cp = v;
	return n + 1;
}

bool rts_utf8_valid(const char *str, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint32_t cp;
		size_t n = rts_utf8_decode(str + i, len - i, &cp);
		if (n == 0 || cp == 0)
			return false;
		i += n;
	}
	return true;
}

bool rts_code_point_hidden(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0xad || cp == 0x61c || cp == 0x180e ||
	       (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) ||
	       cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0xe0000 && cp <= 0xe007f);
}
