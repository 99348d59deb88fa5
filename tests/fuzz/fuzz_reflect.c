/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the credential reflection filter (brokerd/reflect.h).
 *
 * The input is read two ways:
 *   - as it is: scanned as text and, when it parses, as a JSON document, against a fixed
 *     key and against the key it describes (below): no crash, no leak, no overread;
 *   - as a description: byte 0 picks the encoding, bytes 1..4 seed the choices inside it
 *     (which bytes are escaped, digit cases, line width, alignment, padding), byte 5 the
 *     key length, byte 6 the prefix length; then the key bytes (mapped to the printable
 *     ASCII a key has), then the text around it. The text prefix + encoding(key) + suffix
 *     must be flagged, alone and as a JSON string; that is the filter's promise in
 *     reflect.h. The one exception reflect.h documents is skipped: a stray '%' or '\' just
 *     before the key that joins its first characters into an escape.
 * Both texts are also fed to a running text (reflect.h) in pieces of 1 to 16 bytes the
 * seed picks: it must find a key exactly when the text read whole does.
 * The encoders below are written apart from the filter (OpenSSL for base64). */
#include "config.h"

#include <openssl/evp.h>
#include <stdint.h>

#include "brokerd/brokerd.h"
#include "brokerd/reflect.h"
#include "tests/fuzz/fuzz_common.h"

#define HEADER 7u
#define KEY_LEN_MAX 72u

enum form { F_RAW, F_PERCENT, F_JSON, F_HEX, F_BASE64, F_COUNT };

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct brokerd_reflect *fixed;
static const char FIXED_KEY[] = "sk-proj-Ab9/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fixed = brokerd_reflect_new(FIXED_KEY, strlen(FIXED_KEY));
	if (!fixed)
		abort();
	return 0;
}

struct rng {
	uint32_t s;
};

static uint32_t next(struct rng *r)
{
	uint32_t x = r->s ? r->s : 0x9e3779b9u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return r->s = x;
}

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = 2 * (b->len + n + 1);
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void put_hex(struct buf *b, unsigned char c, struct rng *r)
{
	char two[2];
	for (int half = 0; half < 2; half++) {
		unsigned v = half ? c & 15u : c >> 4;
		two[half] = (next(r) & 1 ? "0123456789ABCDEF" : "0123456789abcdef")[v];
	}
	put(b, two, 2);
}

static void encode_percent(struct buf *b, const unsigned char *k, size_t n, struct rng *r)
{
	for (size_t i = 0; i < n; i++) {
		if (k[i] == '%' || next(r) & 1) {
			put(b, "%", 1);
			put_hex(b, k[i], r);
		} else {
			put(b, (const char *)&k[i], 1);
		}
	}
}

static void encode_json(struct buf *b, const unsigned char *k, size_t n, struct rng *r)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t c = next(r) % 3;
		bool special = k[i] == '\\' || k[i] == '"' || k[i] == '/';
		if (special && c == 0) {
			put(b, "\\", 1);
			put(b, (const char *)&k[i], 1);
		} else if (c == 1 || k[i] == '\\') {
			put(b, "\\u00", 4);
			put_hex(b, k[i], r);
		} else {
			put(b, (const char *)&k[i], 1);
		}
	}
}

static const char *const spaces[] = {" ", "\n", "\r\n", "\t"};

static void encode_hex(struct buf *b, const unsigned char *k, size_t n, struct rng *r)
{
	uint32_t gaps = next(r) % 4; /* how often whitespace comes between two digits */
	for (size_t i = 0; i < n; i++) {
		put_hex(b, k[i], r);
		if (gaps && next(r) % (4 * gaps) == 0) {
			const char *s = spaces[next(r) % 4];
			put(b, s, strlen(s));
		}
	}
}

/* The key after 0..2 other bytes and before 0..2 more, in one base64 text. */
static void encode_base64(struct buf *b, const unsigned char *k, size_t n, struct rng *r)
{
	size_t pre = next(r) % 3, post = next(r) % 3;
	unsigned char plain[2 + KEY_LEN_MAX + 2];
	for (size_t i = 0; i < pre; i++)
		plain[i] = (unsigned char)next(r);
	memcpy(plain + pre, k, n);
	for (size_t i = 0; i < post; i++)
		plain[pre + n + i] = (unsigned char)next(r);
	size_t len = pre + n + post;
	char enc[4 * ((sizeof(plain) + 2) / 3) + 1];
	int m = EVP_EncodeBlock((unsigned char *)enc, plain, (int)len);
	bool url = next(r) & 1;
	if (next(r) & 1)
		while (m > 0 && enc[m - 1] == '=')
			m--;
	uint32_t width = next(r) % 80; /* 0: one line */
	const char *sep = next(r) & 1 ? "\r\n" : "\n";
	for (int i = 0; i < m; i++) {
		if (width >= 4 && i && i % (int)width == 0)
			put(b, sep, strlen(sep));
		char c = enc[i];
		if (url)
			c = c == '+' ? '-' : c == '/' ? '_' : c;
		put(b, &c, 1);
	}
}

/* True when the prefix ends the way reflect.h says can hide the key for this form. */
static bool stray_escape_before(enum form f, const uint8_t *prefix, size_t n)
{
	if (f == F_PERCENT)
		return (n >= 1 && prefix[n - 1] == '%') || (n >= 2 && prefix[n - 2] == '%');
	if (f == F_JSON)
		for (size_t i = n > 5 ? n - 5 : 0; i < n; i++)
			if (prefix[i] == '\\')
				return true;
	return false;
}

static void scan_as_is(const struct brokerd_reflect *described, const uint8_t *data, size_t size)
{
	const struct brokerd_reflect *both[] = {fixed, described};
	(void)brokerd_reflect_scan_text(both, 2, (const char *)data, size);
	json_object *o = NULL;
	const char *why = NULL;
	if (rts_json_parse((const char *)data, size, RTS_JSON_DEPTH_MAX, &o, &why) == 0) {
		(void)brokerd_reflect_scan_json(both, 2, o);
		json_object_put(o);
	}
}

/* The running text over len bytes at text, cut in pieces r picks, finds what the whole
 * text holds: no more, no less. */
static void run_matches_whole(const struct brokerd_reflect *described, const char *text, size_t len, struct rng *r)
{
	const struct brokerd_reflect *both[] = {fixed, described};
	bool whole = brokerd_reflect_scan_text(both, 2, text, len);
	struct brokerd_reflect_run *run = brokerd_reflect_run_new();
	bool found = false;
	size_t at = 0;
	while (!found && at < len) {
		size_t n = 1 + next(r) % 16;
		if (n > len - at)
			n = len - at;
		found = brokerd_reflect_run_feed(run, both, 2, text + at, n, false);
		at += n;
	}
	if (!found)
		found = brokerd_reflect_run_feed(run, both, 2, NULL, 0, true);
	brokerd_reflect_run_free(run);
	FUZZ_ASSERT(found == whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HEADER) {
		scan_as_is(NULL, data, size);
		return 0;
	}
	enum form f = (enum form)(data[0] % F_COUNT);
	struct rng r = {.s = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 |
			     (uint32_t)data[4] << 24};
	size_t key_len = 1 + data[5] % KEY_LEN_MAX;
	/* Hex and base64 are looked for only in keys of BROKERD_REFLECT_MIN_ENCODED bytes. */
	if ((f == F_HEX || f == F_BASE64) && key_len < BROKERD_REFLECT_MIN_ENCODED)
		key_len += BROKERD_REFLECT_MIN_ENCODED;
	const uint8_t *rest = data + HEADER;
	size_t rest_len = size - HEADER;
	unsigned char key[KEY_LEN_MAX + BROKERD_REFLECT_MIN_ENCODED];
	for (size_t i = 0; i < key_len; i++)
		key[i] = (unsigned char)(0x21 + (i < rest_len ? rest[i] : 'k') % 94);
	size_t used = key_len < rest_len ? key_len : rest_len;
	rest += used;
	rest_len -= used;
	size_t prefix_len = rest_len ? data[6] % (rest_len + 1) : 0;

	struct brokerd_reflect *k = brokerd_reflect_new((const char *)key, key_len);
	FUZZ_ASSERT(k);
	scan_as_is(k, data, size);
	run_matches_whole(k, (const char *)data, size, &r);

	struct buf b = {0};
	put(&b, (const char *)rest, prefix_len);
	switch (f) {
	case F_RAW:
		put(&b, (const char *)key, key_len);
		break;
	case F_PERCENT:
		encode_percent(&b, key, key_len, &r);
		break;
	case F_JSON:
		encode_json(&b, key, key_len, &r);
		break;
	case F_HEX:
		encode_hex(&b, key, key_len, &r);
		break;
	case F_BASE64:
		encode_base64(&b, key, key_len, &r);
		break;
	case F_COUNT:
		abort();
	}
	put(&b, (const char *)rest + prefix_len, rest_len - prefix_len);
	run_matches_whole(k, b.p, b.len, &r);

	if (!stray_escape_before(f, rest, prefix_len)) {
		FUZZ_ASSERT(brokerd_reflect_text(k, b.p, b.len));
		json_object *s = json_object_new_string_len(b.p, (int)b.len);
		json_object *doc = json_object_new_array();
		json_object_array_add(doc, s);
		FUZZ_ASSERT(brokerd_reflect_json(k, doc));
		json_object_put(doc);
	}
	free(b.p);
	brokerd_reflect_free(k);
	return 0;
}
