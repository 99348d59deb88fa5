/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <openssl/evp.h>

#include "common/base64.h"
#include "common/util.h"

static bool b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

size_t rts_base64_decoded_len(const char *s, size_t n)
{
	if (n % 4 != 0)
		return SIZE_MAX;
	size_t pad = 0;
	if (n > 0 && s[n - 1] == '=')
		pad = n > 1 && s[n - 2] == '=' ? 2 : 1;
	for (size_t i = 0; i < n - pad; i++)
		if (!b64_char(s[i]))
			return SIZE_MAX;
	return n / 4 * 3 - pad;
}

/* EVP_DecodeBlock takes an int length and writes whole groups of three bytes (the
 * padding's zero bytes included), so large input goes in chunks of whole groups. */
#define CHUNK_CHARS (1u << 20)

long rts_base64_decode(const char *s, size_t n, void *out, size_t cap)
{
	size_t want = rts_base64_decoded_len(s, n);
	if (want == SIZE_MAX)
		return -EINVAL;
	if (want > cap || want > LONG_MAX)
		return -ENOBUFS;
	unsigned char *o = out;
	size_t done = 0;
	unsigned char tail[3];
	for (size_t at = 0; at < n; at += CHUNK_CHARS) {
		size_t len = n - at < CHUNK_CHARS ? n - at : CHUNK_CHARS;
		bool last = at + len == n;
		/* The last group may carry padding: it goes through a small buffer so the zero
		 * bytes the padding stands for never land past want. */
		size_t body = last ? len - 4 : len;
		if (body > 0 && EVP_DecodeBlock(o + done, (const unsigned char *)s + at, (int)body) < 0)
			return -EINVAL;
		done += body / 4 * 3;
		if (last) {
			if (EVP_DecodeBlock(tail, (const unsigned char *)s + at + body, 4) != 3)
				return -EINVAL;
			memcpy(o + done, tail, want - done);
			done = want;
		}
	}
	return (long)done;
}

size_t rts_base64_decode_prefix(const char *s, size_t n, unsigned char *out, size_t cap)
{
	unsigned char buf[48];
	size_t want = rts_base64_decoded_len(s, n);
	if (want == SIZE_MAX || n == 0)
		return 0;
	if (cap > sizeof(buf))
		cap = sizeof(buf);
	/* Whole groups covering cap bytes, at most all of s. */
	size_t chars = (cap + 2) / 3 * 4;
	if (chars > n)
		chars = n;
	if (EVP_DecodeBlock(buf, (const unsigned char *)s, (int)chars) < 0)
		return 0;
	size_t got = chars / 4 * 3;
	if (chars == n)
		got = want;
	if (got > cap)
		got = cap;
	memcpy(out, buf, got);
	return got;
}

char *rts_base64_encode(const void *data, size_t len, size_t *out_len)
{
	size_t n = (len + 2) / 3 * 4;
	char *s = rts_xmalloc(n + 1);
	size_t done = 0;
	/* Whole groups per call: EVP_EncodeBlock takes an int and pads only at the end. */
	const size_t step = 3u << 20;
	for (size_t at = 0; at < len; at += step) {
		size_t part = len - at < step ? len - at : step;
		done += (size_t)EVP_EncodeBlock((unsigned char *)s + done, (const unsigned char *)data + at, (int)part);
	}
	s[done] = '\0';
	if (out_len)
		*out_len = done;
	return s;
}
