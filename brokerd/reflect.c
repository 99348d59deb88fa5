/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <openssl/evp.h>

#include "brokerd/brokerd.h"
#include "brokerd/reflect.h"
#include "common/util.h"

/* raw, 4 percent forms, 3 base64, 3 base64url, 2 hex */
#define REFLECT_FORMS_MAX 13u
/* Encoded forms shorter than this would match ordinary text; a real key is far longer. */
#define REFLECT_MIN_ENCODED 8u

struct needle {
	char *s;
	size_t len;
};

struct brokerd_reflect {
	struct needle n[REFLECT_FORMS_MAX];
	size_t count;
};

static void wipe_free(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}

/* Add s (taken) unless it is too short or already present. */
static void add(struct brokerd_reflect *r, char *s, size_t len, bool raw)
{
	if (len == 0 || (!raw && len < REFLECT_MIN_ENCODED) || r->count == REFLECT_FORMS_MAX) {
		wipe_free(s, len);
		return;
	}
	for (size_t i = 0; i < r->count; i++)
		if (r->n[i].len == len && memcmp(r->n[i].s, s, len) == 0) {
			wipe_free(s, len);
			return;
		}
	r->n[r->count++] = (struct needle){.s = s, .len = len};
}

/* RFC 3986 unreserved characters are the ones a URL encoder leaves alone. */
static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
	       c == '_' || c == '~';
}

static void add_percent(struct brokerd_reflect *r, const unsigned char *k, size_t len, bool every, bool upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	char *out = rts_xmalloc(3 * len + 1);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (!every && unreserved(k[i])) {
			out[o++] = (char)k[i];
			continue;
		}
		out[o++] = '%';
		out[o++] = digits[k[i] >> 4];
		out[o++] = digits[k[i] & 15];
	}
	add(r, out, o, false);
}

static void add_hex(struct brokerd_reflect *r, const unsigned char *k, size_t len, bool upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	char *out = rts_xmalloc(2 * len + 1);
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[k[i] >> 4];
		out[2 * i + 1] = digits[k[i] & 15];
	}
	add(r, out, 2 * len, false);
}

/* The base64 characters that depend only on the key when it starts at byte offset
 * `align` (0..2) of a 3-byte group: inside a longer encoded text the key's encoding is one
 * of these three. Characters mixing key bits with neighbouring bytes are left out. */
static void add_base64(struct brokerd_reflect *r, const unsigned char *k, size_t len, unsigned align, bool url)
{
	size_t in_len = align + len;
	unsigned char *in = rts_xcalloc(in_len, 1);
	memcpy(in + align, k, len);
	size_t enc_len = 4 * ((in_len + 2) / 3);
	char *enc = rts_xmalloc(enc_len + 1);
	EVP_EncodeBlock((unsigned char *)enc, in, (int)in_len);
	explicit_bzero(in, in_len);
	free(in);

	/* Leading characters that still carry bits of the alignment filler. */
	static const size_t skip[3] = {0, 2, 3};
	/* Trailing partial group: rem bytes give rem characters made of key bits only. */
	size_t end = 4 * (in_len / 3) + in_len % 3;
	size_t start = skip[align];
	if (end <= start) {
		wipe_free(enc, enc_len + 1);
		return;
	}
	if (url)
		for (size_t i = start; i < end; i++) {
			if (enc[i] == '+')
				enc[i] = '-';
			else if (enc[i] == '/')
				enc[i] = '_';
		}
	size_t n = end - start;
	char *out = rts_xmalloc(n + 1);
	memcpy(out, enc + start, n);
	wipe_free(enc, enc_len + 1);
	add(r, out, n, false);
}

struct brokerd_reflect *brokerd_reflect_new(const char *key, size_t len)
{
	if (len == 0 || len > BROKERD_KEY_MAX)
		return NULL;
	const unsigned char *k = (const unsigned char *)key;
	struct brokerd_reflect *r = rts_xcalloc(1, sizeof(*r));
	add(r, rts_xstrndup(key, len), len, true);
	add_percent(r, k, len, false, true);
	add_percent(r, k, len, false, false);
	add_percent(r, k, len, true, true);
	add_percent(r, k, len, true, false);
	for (unsigned a = 0; a < 3; a++) {
		add_base64(r, k, len, a, false);
		add_base64(r, k, len, a, true);
	}
	add_hex(r, k, len, false);
	add_hex(r, k, len, true);
	return r;
}

void brokerd_reflect_free(struct brokerd_reflect *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		wipe_free(r->n[i].s, r->n[i].len);
	explicit_bzero(r, sizeof(*r));
	free(r);
}

bool brokerd_reflect_text(const struct brokerd_reflect *r, const char *text, size_t len)
{
	if (!r || !text)
		return false;
	for (size_t i = 0; i < r->count; i++)
		if (memmem(text, len, r->n[i].s, r->n[i].len))
			return true;
	return false;
}

bool brokerd_reflect_json(const struct brokerd_reflect *r, json_object *o)
{
	if (!r || !o)
		return false;
	switch (json_object_get_type(o)) {
	case json_type_string:
		return brokerd_reflect_text(r, json_object_get_string(o), (size_t)json_object_get_string_len(o));
	case json_type_array: {
		size_t n = json_object_array_length(o);
		for (size_t i = 0; i < n; i++)
			if (brokerd_reflect_json(r, json_object_array_get_idx(o, i)))
				return true;
		return false;
	}
	case json_type_object: {
		json_object_object_foreach(o, name, val)
		{
			if (brokerd_reflect_text(r, name, strlen(name)) || brokerd_reflect_json(r, val))
				return true;
		}
		return false;
	}
	default:
		/* Numbers, booleans and null cannot carry a key. */
		return false;
	}
}
