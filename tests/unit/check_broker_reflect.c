/* SPDX-License-Identifier: Apache-2.0 */
/* The credential reflection filter (brokerd/reflect.h): every encoding it decodes is
 * caught alone, inside longer text, in every mix, case and alignment, also inside JSON
 * strings after decoding; text that only resembles the key (a prefix, a masked key, one
 * character changed, a truncated encoding) passes. The encoders here are written apart
 * from the filter (OpenSSL for base64), so the test does not share the filter's code. */
#include "config.h"

#include <check.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/brokerd.h"
#include "brokerd/reflect.h"
#include "common/json.h"
#include "common/util.h"

/* Characters a URL encoder changes ('/', '+', '='), both letter cases, digits. */
static const char KEY[] = "sk-proj-Ab9/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ";
/* A key holding the characters the escapes themselves use: '%', '\', '"'. */
static const char ODD_KEY[] = "k%41\\u0041\"x/9_Zz-~%%end";
/* Starts with hex digits, for the alignment of escapes and hex. */
static const char HEXY_KEY[] = "3fA0b7c9d2e1f4a6b8c0d1e2";

static struct brokerd_reflect *r;

static void setup(void)
{
	r = brokerd_reflect_new(KEY, strlen(KEY));
	ck_assert_ptr_nonnull(r);
}

static void teardown(void)
{
	brokerd_reflect_free(r);
	r = NULL;
}

static bool hit_with(const char *key, const char *text, size_t len)
{
	struct brokerd_reflect *k = brokerd_reflect_new(key, strlen(key));
	ck_assert_ptr_nonnull(k);
	bool h = brokerd_reflect_text(k, text, len);
	brokerd_reflect_free(k);
	return h;
}

static bool hit(const char *text)
{
	return brokerd_reflect_text(r, text, strlen(text));
}

/* Deterministic choices for the mixes (xorshift32). */
static uint32_t rng_state;
static uint32_t rnd(void)
{
	uint32_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return rng_state = x;
}

/* "The answer is <s>, bye" */
static char *wrap(const char *s)
{
	return rts_xasprintf("The answer is <%s>, bye", s);
}

static char *b64(const void *data, size_t len, bool url, bool pad)
{
	char *out = rts_xmalloc(4 * ((len + 2) / 3) + 1);
	int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	if (url)
		for (int i = 0; i < n; i++)
			out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	while (!pad && n > 0 && out[n - 1] == '=')
		out[--n] = '\0';
	return out;
}

/* s with sep inserted after every width characters. */
static char *wrap_lines(const char *s, size_t width, const char *sep)
{
	size_t n = strlen(s);
	char *out = rts_xmalloc(n + (n / width + 1) * strlen(sep) + 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		if (i && i % width == 0)
			o = stpcpy(o, sep);
		*o++ = s[i];
	}
	*o = '\0';
	return out;
}

enum hex_case { HEX_LOWER, HEX_UPPER, HEX_MIXED };

static char *hex(const char *s, enum hex_case hc, const char *between)
{
	size_t n = strlen(s);
	char *out = rts_xmalloc(n * (2 + strlen(between)) + 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		for (int half = 0; half < 2; half++) {
			unsigned v = half ? c & 15 : c >> 4;
			bool up = hc == HEX_UPPER || (hc == HEX_MIXED && rnd() & 1);
			*o++ = (up ? "0123456789ABCDEF" : "0123456789abcdef")[v];
		}
		if (i + 1 < n)
			o = stpcpy(o, between);
	}
	*o = '\0';
	return out;
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
	       c == '_' || c == '~';
}

enum mix { MIX_NONE, MIX_ALL, MIX_RESERVED, MIX_RANDOM };

/* Percent-encoding: MIX_ALL every byte, MIX_RESERVED what a URL encoder changes,
 * MIX_RANDOM a random choice per byte; '%' itself is always encoded. Hex digit case per
 * hc. */
static char *pct(const char *s, enum mix mix, enum hex_case hc)
{
	size_t n = strlen(s);
	char *out = rts_xmalloc(3 * n + 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool enc = c == '%' || mix == MIX_ALL || (mix == MIX_RESERVED && !unreserved(c)) ||
			   (mix == MIX_RANDOM && rnd() & 1);
		if (!enc) {
			*o++ = (char)c;
			continue;
		}
		*o++ = '%';
		char one[2] = {(char)c, 0};
		cleanup_free char *h = hex(one, hc, "");
		o = stpcpy(o, h);
	}
	*o = '\0';
	return out;
}

/* JSON string escapes: \uXXXX (hex case per hc) for the bytes chosen by mix, \/ for '/'
 * when short is set, and the '\' and '"' of the key always escaped. */
static char *jesc(const char *s, enum mix mix, enum hex_case hc, bool short_forms)
{
	size_t n = strlen(s);
	char *out = rts_xmalloc(6 * n + 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool enc = mix == MIX_ALL || (mix == MIX_RANDOM && rnd() & 1);
		if (short_forms && (c == '/' || c == '\\' || c == '"') && (enc || c != '/')) {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (enc || c == '\\' || c == '"') {
			char one[2] = {(char)c, 0};
			cleanup_free char *h = hex(one, hc, "");
			o += sprintf(o, "\\u00%s", h);
		} else {
			*o++ = (char)c;
		}
	}
	*o = '\0';
	return out;
}

/* ---- each encoding ---- */

START_TEST(test_raw)
{
	ck_assert(hit(KEY));
	cleanup_free char *t = wrap(KEY);
	ck_assert(hit(t));
	ck_assert(hit_with(ODD_KEY, ODD_KEY, strlen(ODD_KEY)));
}
END_TEST

START_TEST(test_percent_all_and_reserved_in_both_cases)
{
	static const enum mix mixes[] = {MIX_ALL, MIX_RESERVED};
	static const enum hex_case cases[] = {HEX_LOWER, HEX_UPPER, HEX_MIXED};
	rng_state = 7;
	for (size_t m = 0; m < RTS_ARRAY_SIZE(mixes); m++)
		for (size_t c = 0; c < RTS_ARRAY_SIZE(cases); c++) {
			cleanup_free char *e = pct(KEY, mixes[m], cases[c]);
			ck_assert_str_ne(e, KEY);
			cleanup_free char *t = wrap(e);
			ck_assert_msg(hit(t), "percent form missed: %s", e);
			cleanup_free char *o = pct(ODD_KEY, mixes[m], cases[c]);
			ck_assert_msg(hit_with(ODD_KEY, o, strlen(o)), "percent form of the odd key missed: %s", o);
		}
}
END_TEST

/* Any mix of encoded and plain bytes, hex digits in any mix of cases. */
START_TEST(test_percent_random_mixes)
{
	rng_state = 0x9e3779b9u + (uint32_t)_i;
	cleanup_free char *e = pct(KEY, MIX_RANDOM, HEX_MIXED);
	cleanup_free char *t = rts_xasprintf("GET /v1?q=1&token=%s&x=%%41 HTTP/1.1", e);
	ck_assert_msg(hit(t), "mix missed: %s", t);
	cleanup_free char *o = pct(ODD_KEY, MIX_RANDOM, HEX_MIXED);
	ck_assert_msg(hit_with(ODD_KEY, o, strlen(o)), "odd key mix missed: %s", o);
	cleanup_free char *h = pct(HEXY_KEY, MIX_RANDOM, HEX_MIXED);
	cleanup_free char *ht = rts_xasprintf("100%% sure: %s", h);
	ck_assert_msg(hit_with(HEXY_KEY, ht, strlen(ht)), "hex-like key mix missed: %s", ht);
}
END_TEST

START_TEST(test_hex_cases_and_separators)
{
	static const enum hex_case cases[] = {HEX_LOWER, HEX_UPPER, HEX_MIXED};
	static const char *const between[] = {"", " ", "\n", "\r\n", "  \t"};
	rng_state = 11;
	for (size_t c = 0; c < RTS_ARRAY_SIZE(cases); c++)
		for (size_t b = 0; b < RTS_ARRAY_SIZE(between); b++) {
			cleanup_free char *e = hex(KEY, cases[c], between[b]);
			cleanup_free char *t = wrap(e);
			ck_assert_msg(hit(t), "hex missed: %s", e);
		}
	/* As xxd -p prints it: 60 digits per line. */
	cleanup_free char *e = hex(KEY, HEX_LOWER, "");
	cleanup_free char *lines = wrap_lines(e, 60, "\n");
	ck_assert(hit(lines));
	/* Preceded and followed by other hex digits (a longer dump). */
	cleanup_free char *h = hex(HEXY_KEY, HEX_UPPER, "");
	cleanup_free char *t = rts_xasprintf("0x00ff%sdeadbeef", h);
	ck_assert(hit_with(HEXY_KEY, t, strlen(t)));
}
END_TEST

/* The key at every byte alignment inside a longer encoded text (the loop index picks the
 * prefix length 0..8 and the alphabet), padded or not, also wrapped like MIME (76 columns,
 * CRLF) and PEM (64 columns, LF), as coreutils base64 (76, LF) prints it. */
START_TEST(test_base64_alignments_and_line_breaks)
{
	bool url = _i % 2;
	int prefix_len = _i / 2;
	for (int pad = 0; pad < 2; pad++) {
		cleanup_free char *plain = rts_xasprintf("%.*s%s and more text after it", prefix_len, "Bearer: ", KEY);
		cleanup_free char *e = b64(plain, strlen(plain), url, pad);
		ck_assert_msg(hit(e), "base64%s with a %d-byte prefix missed: %s", url ? "url" : "", prefix_len, e);
		cleanup_free char *ends = rts_xasprintf("%.*s%s", prefix_len, "Bearer: ", KEY);
		cleanup_free char *e2 = b64(ends, strlen(ends), url, pad);
		ck_assert_msg(hit(e2), "base64 ending with the key missed: %s", e2);
		cleanup_free char *alone = b64(KEY, strlen(KEY), url, pad);
		cleanup_free char *t = wrap(alone);
		ck_assert(hit(t));
		static const struct {
			size_t width;
			const char *sep;
		} fmts[] = {{76, "\r\n"}, {64, "\n"}, {76, "\n"}, {5, " "}};
		for (size_t f = 0; f < RTS_ARRAY_SIZE(fmts); f++) {
			cleanup_free char *w = wrap_lines(e, fmts[f].width, fmts[f].sep);
			ck_assert_msg(hit(w), "wrapped base64 missed: %s", w);
		}
	}
}
END_TEST

START_TEST(test_json_escapes_in_text)
{
	static const enum mix mixes[] = {MIX_ALL, MIX_NONE, MIX_RANDOM};
	static const enum hex_case cases[] = {HEX_LOWER, HEX_UPPER, HEX_MIXED};
	rng_state = 5 + (uint32_t)_i;
	for (size_t m = 0; m < RTS_ARRAY_SIZE(mixes); m++)
		for (size_t c = 0; c < RTS_ARRAY_SIZE(cases); c++)
			for (int s = 0; s < 2; s++) {
				cleanup_free char *e = jesc(KEY, mixes[m], cases[c], s);
				/* Not JSON as a whole: a log line quoting a JSON fragment. */
				cleanup_free char *t = rts_xasprintf("INFO got {\"auth\": \"%s\"} from upstream", e);
				ck_assert_msg(hit(t), "escaped form missed: %s", t);
				cleanup_free char *o = jesc(ODD_KEY, mixes[m], cases[c], s);
				ck_assert_msg(hit_with(ODD_KEY, o, strlen(o)), "odd key escaped missed: %s", o);
			}
	/* Only the slash escaped, the way some encoders always write it. */
	ck_assert(hit("sk-proj-Ab9\\/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ"));
}
END_TEST

/* ---- inside JSON documents ---- */

static json_object *parse(const char *doc)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rts_json_parse(doc, strlen(doc), RTS_JSON_DEPTH_MAX, &o, &why), 0);
	return o;
}

START_TEST(test_json_document_decoded)
{
	/* The JSON text escapes the key; the decoded string is the key. */
	static const char body[] = "{\"choices\":[{\"message\":{\"content\":\"here: "
				   "\\u0073k\\u002dproj-Ab9\\/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ\"}}]}";
	json_object *o = parse(body);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);

	/* Two layers the filter can take apart: JSON text, then in the decoded string an
	 * encoding (base64 broken into lines with \n escapes, percent with \u0025). */
	cleanup_free char *e = b64(KEY, strlen(KEY), false, true);
	cleanup_free char *lines = wrap_lines(e, 16, "\\n");
	cleanup_free char *doc = rts_xasprintf("{\"a\":[1,true,null,{\"b\":\"x%sy\"}]}", lines);
	ck_assert(!hit(doc)); /* the raw text does not show it: "\n" is two characters there */
	o = parse(doc);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);
	cleanup_free char *p = pct(KEY, MIX_RESERVED, HEX_UPPER);
	cleanup_free char *q = rts_xmalloc(6 * strlen(p) + 1);
	char *w = q;
	for (const char *c = p; *c; c++)
		w = *c == '%' ? stpcpy(w, "\\u0025") : (*w = *c, w + 1);
	*w = '\0';
	cleanup_free char *doc2 = rts_xasprintf("{\"url\":\"https://x.example/?k=%s\"}", q);
	o = parse(doc2);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);
}
END_TEST

START_TEST(test_json_member_name_and_nested)
{
	cleanup_free char *e = hex(KEY, HEX_LOWER, "");
	cleanup_free char *doc = rts_xasprintf("{\"a\":[1,true,null,{\"b\":\"x%sy\"}]}", e);
	json_object *o = parse(doc);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);

	cleanup_free char *doc2 = rts_xasprintf("{\"%s\":1}", KEY);
	o = parse(doc2);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);
	ck_assert(!brokerd_reflect_json(r, NULL));
}
END_TEST

/* The walk reuses one scratch buffer: a short string first, then a longer one holding
 * the key, then short ones again. */
START_TEST(test_json_strings_of_growing_size)
{
	cleanup_free char *e = pct(KEY, MIX_ALL, HEX_LOWER);
	cleanup_free char *doc = rts_xasprintf("[\"%%\",\"%%41\",\"%s\",\"%%\"]", e);
	json_object *o = parse(doc);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);
	o = parse("[\"%\",\"%41%42%43%44%45%46%47%48%49%4a%4b%4c\",\"\\\\\",\"abc\"]");
	ck_assert(!brokerd_reflect_json(r, o));
	json_object_put(o);
}
END_TEST

/* ---- what passes ---- */

START_TEST(test_look_alikes_pass)
{
	static const char *const ok[] = {
		"Your key starts with sk-proj- and that is all I know.",
		"sk-...cdefQ",
		"sk-proj-Ab9/****************************defQ",
		/* one character changed */
		"sk-proj-Ab9/Zq+x=Lm_7Tt~Yy.0123456789abcdefR",
		/* the first half only */
		"sk-proj-Ab9/Zq+x=Lm_7",
		/* the key without its last character, plain and escaped */
		"sk-proj-Ab9/Zq+x=Lm_7Tt~Yy.0123456789abcdef",
		"sk%2Dproj-Ab9%2FZq%2Bx%3DLm_7Tt~Yy.0123456789abcdef",
		/* a broken escape is not the byte */
		"sk-proj-Ab9%2Zq+x=Lm_7Tt~Yy.0123456789abcdefQ",
		"sk-proj-Ab9\\u02FZq+x=Lm_7Tt~Yy.0123456789abcdefQ",
		/* a non-ASCII escape in the middle */
		"sk-proj-Ab9\\u00e9/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ",
		/* U+0141 is not 'A' (0x41), though its low byte is */
		"sk-proj-\\u0141b9/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ",
		/* split by a line break (whitespace is dropped only for hex and base64) */
		"sk-proj-Ab9/Zq+x=Lm_7Tt\n~Yy.0123456789abcdefQ",
		("{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello!\"},"
		 "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3}}"),
		"",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++)
		ck_assert_msg(!hit(ok[i]), "false positive on: %s", ok[i]);
}
END_TEST

/* Encodings of a prefix of the key (all but the last byte, half) are not the key, in any
 * alignment. */
START_TEST(test_encoded_prefixes_pass)
{
	size_t cut = _i ? strlen(KEY) / 2 : strlen(KEY) - 1;
	cleanup_free char *part = rts_xstrndup(KEY, cut);
	rng_state = 3;
	cleanup_free char *h = hex(part, HEX_MIXED, "");
	cleanup_free char *p = pct(part, MIX_ALL, HEX_UPPER);
	cleanup_free char *j = jesc(part, MIX_ALL, HEX_LOWER, false);
	ck_assert_msg(!hit(h), "hex of a prefix: %s", h);
	ck_assert_msg(!hit(p), "percent of a prefix: %s", p);
	ck_assert_msg(!hit(j), "escapes of a prefix: %s", j);
	for (int prefix_len = 0; prefix_len < 3; prefix_len++)
		for (int url = 0; url < 2; url++) {
			cleanup_free char *plain = rts_xasprintf("%.*s%s", prefix_len, "xy", part);
			cleanup_free char *b = b64(plain, strlen(plain), url, true);
			ck_assert_msg(!hit(b), "base64 of a prefix: %s", b);
		}
}
END_TEST

START_TEST(test_other_key_is_not_this_key)
{
	struct brokerd_reflect *other = brokerd_reflect_new("another-key-0000000000", 22);
	ck_assert(!brokerd_reflect_text(other, KEY, strlen(KEY)));
	cleanup_free char *e = b64(KEY, strlen(KEY), false, true);
	ck_assert(!brokerd_reflect_text(other, e, strlen(e)));
	brokerd_reflect_free(other);
}
END_TEST

/* Several keys at once, NULL entries skipped; nothing found with no key. */
START_TEST(test_several_keys)
{
	struct brokerd_reflect *a = brokerd_reflect_new("first-key-0123456789", 20);
	struct brokerd_reflect *b = brokerd_reflect_new(HEXY_KEY, strlen(HEXY_KEY));
	const struct brokerd_reflect *keys[] = {a, NULL, b};
	cleanup_free char *e = b64(HEXY_KEY, strlen(HEXY_KEY), true, false);
	ck_assert(brokerd_reflect_scan_text(keys, 3, e, strlen(e)));
	ck_assert(brokerd_reflect_scan_text(keys, 3, "x first-key-0123456789 y", 24));
	ck_assert(!brokerd_reflect_scan_text(keys, 3, "nothing here", 12));
	ck_assert(!brokerd_reflect_scan_text(keys, 0, "first-key-0123456789", 20));
	ck_assert(!brokerd_reflect_scan_text(NULL, 3, "first-key-0123456789", 20));
	json_object *o = parse("{\"k\":\"first-key-0123456789\"}");
	ck_assert(brokerd_reflect_scan_json(keys, 3, o));
	json_object_put(o);
	brokerd_reflect_free(a);
	brokerd_reflect_free(b);
}
END_TEST

START_TEST(test_short_key_raw_and_escapes_only)
{
	/* Hex and base64 of a 3-byte key would be 4-6 characters and match ordinary text;
	 * the key itself and its escaped forms are still looked for. */
	struct brokerd_reflect *s = brokerd_reflect_new("k3y", 3);
	ck_assert(brokerd_reflect_text(s, "a k3y here", 10));
	ck_assert(brokerd_reflect_text(s, "a k%33y here", 12));
	ck_assert(brokerd_reflect_text(s, "a \\u006b3y here", 15));
	ck_assert(!brokerd_reflect_text(s, "azN5 6b3379", 11)); /* base64 and hex of "k3y" */
	brokerd_reflect_free(s);
}
END_TEST

START_TEST(test_unusable_keys)
{
	ck_assert_ptr_null(brokerd_reflect_new("", 0));
	ck_assert_ptr_null(brokerd_reflect_new(NULL, 3));
	ck_assert_ptr_null(brokerd_reflect_new("a b", 3));
	ck_assert_ptr_null(brokerd_reflect_new("a\nb", 3));
	ck_assert_ptr_null(brokerd_reflect_new("a\xc3\xa9", 3));
	ck_assert_ptr_null(brokerd_reflect_new("ab\0", 3));
	char *big = rts_xmalloc(BROKERD_KEY_MAX + 1);
	memset(big, 'k', BROKERD_KEY_MAX + 1);
	ck_assert_ptr_null(brokerd_reflect_new(big, BROKERD_KEY_MAX + 1));
	struct brokerd_reflect *m = brokerd_reflect_new(big, BROKERD_KEY_MAX);
	ck_assert_ptr_nonnull(m);
	ck_assert(brokerd_reflect_text(m, big, BROKERD_KEY_MAX));
	ck_assert(!brokerd_reflect_text(m, big, BROKERD_KEY_MAX - 1));
	brokerd_reflect_free(m);
	free(big);
}
END_TEST

/* What reflect.h says is not caught, pinned so a change to it is a change to the man
 * page too: a stray '%' or '\' that joins the key's first characters into an escape (no
 * encoder writes that), and two layers of encoding. */
START_TEST(test_documented_limits)
{
	cleanup_free char *stray = rts_xasprintf("50%%%s", "3f%41%30b7c9d2e1f4a6b8c0d1e2");
	ck_assert(!hit_with(HEXY_KEY, stray, strlen(stray)));
	/* The same text with a space before the key is caught. */
	cleanup_free char *spaced = rts_xasprintf("50%% %s", "3f%41%30b7c9d2e1f4a6b8c0d1e2");
	ck_assert(hit_with(HEXY_KEY, spaced, strlen(spaced)));
	cleanup_free char *e = b64(KEY, strlen(KEY), false, true);
	cleanup_free char *twice = b64(e, strlen(e), false, true);
	ck_assert(!hit(twice));
}
END_TEST

/* ---- a running text ---- */

/* The forms of KEY a running text must find across pieces, each inside other text. */
static char *run_form(int which)
{
	rng_state = 0x5eed1u + (uint32_t)which;
	switch (which) {
	case 0:
		return wrap(KEY);
	case 1:
		return pct(KEY, MIX_RANDOM, HEX_MIXED);
	case 2:
		return jesc(KEY, MIX_ALL, HEX_UPPER, false);
	case 3:
		return hex(KEY, HEX_MIXED, "\n");
	case 4: {
		cleanup_free char *plain = rts_xasprintf("ab%s!", KEY);
		cleanup_free char *e = b64(plain, strlen(plain), true, false);
		return wrap_lines(e, 7, " ");
	}
	default:
		return jesc(KEY, MIX_RANDOM, HEX_LOWER, true);
	}
}

/* Feeds [0,len) of text in pieces cut at cut[0..n); true when the last piece (and not an
 * earlier one) finds the key. */
static int run_pieces(const char *text, size_t len, const size_t *cut, size_t n)
{
	struct brokerd_reflect_run *run = brokerd_reflect_run_new();
	const struct brokerd_reflect *keys[] = {NULL, r};
	int first_hit = -1;
	size_t at = 0;
	for (size_t i = 0; i <= n && first_hit < 0; i++) {
		size_t to = i < n ? cut[i] : len;
		if (brokerd_reflect_run_feed(run, keys, 2, text + at, to - at, false))
			first_hit = (int)i;
		at = to;
	}
	brokerd_reflect_run_free(run);
	return first_hit;
}

/* Every form cut in two at every byte: found in the piece that completes it. */
START_TEST(test_run_every_cut)
{
	cleanup_free char *text = run_form(_i);
	size_t len = strlen(text);
	ck_assert(hit(text));
	for (size_t c = 0; c <= len; c++) {
		int h = run_pieces(text, len, &c, 1);
		ck_assert_msg(h >= 0, "form %d cut at %zu missed", _i, c);
		/* Found early only when the first piece holds the whole form already. */
		if (h == 0)
			ck_assert_msg(hit_with(KEY, text, c), "form %d found before it was complete (cut %zu)", _i, c);
	}
}
END_TEST

/* Every form spelled out a byte at a time, and in pieces of three. */
START_TEST(test_run_many_pieces)
{
	cleanup_free char *text = run_form(_i);
	size_t len = strlen(text);
	for (size_t step = 1; step <= 3; step += 2) {
		size_t *cut = rts_xcalloc(len + 1, sizeof(*cut));
		size_t n = 0;
		for (size_t c = step; c < len; c += step)
			cut[n++] = c;
		ck_assert_msg(run_pieces(text, len, cut, n) >= 0, "form %d in pieces of %zu missed", _i, step);
		free(cut);
	}
}
END_TEST

/* One character changed, cut anywhere: never found. */
START_TEST(test_run_look_alike_passes)
{
	cleanup_free char *k = rts_xstrdup(KEY);
	k[strlen(k) / 2] ^= 1;
	cleanup_free char *text = wrap(k);
	size_t len = strlen(text);
	for (size_t c = 0; c <= len; c++)
		ck_assert_int_eq(run_pieces(text, len, &c, 1), -1);
	cleanup_free char *j = jesc(k, MIX_ALL, HEX_LOWER, false);
	for (size_t c = 0; c <= strlen(j); c++)
		ck_assert_int_eq(run_pieces(j, strlen(j), &c, 1), -1);
}
END_TEST

/* An escape open at the end of a piece is read when the next piece closes it, or as the
 * plain bytes it is when the text ends there. */
START_TEST(test_run_open_escape)
{
	static const char key[] = "abcdefgh%4";
	struct brokerd_reflect *k = brokerd_reflect_new(key, strlen(key));
	const struct brokerd_reflect *keys[] = {k};
	struct brokerd_reflect_run *run = brokerd_reflect_run_new();
	ck_assert(!brokerd_reflect_run_feed(run, keys, 1, "%61bcdefgh%4", 12, false));
	ck_assert(brokerd_reflect_run_feed(run, keys, 1, NULL, 0, true));
	brokerd_reflect_run_free(run);
	/* Closed by the next piece it is another byte: no key. */
	run = brokerd_reflect_run_new();
	ck_assert(!brokerd_reflect_run_feed(run, keys, 1, "%61bcdefgh%4", 12, false));
	ck_assert(!brokerd_reflect_run_feed(run, keys, 1, "1", 1, true));
	brokerd_reflect_run_free(run);
	/* No keys: nothing found, nothing kept. */
	run = brokerd_reflect_run_new();
	ck_assert(!brokerd_reflect_run_feed(run, keys, 0, key, strlen(key), true));
	brokerd_reflect_run_free(run);
	brokerd_reflect_free(k);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_reflect");
	TCase *tc = tcase_create("reflect");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_raw);
	tcase_add_test(tc, test_percent_all_and_reserved_in_both_cases);
	tcase_add_loop_test(tc, test_percent_random_mixes, 0, 64);
	tcase_add_test(tc, test_hex_cases_and_separators);
	tcase_add_loop_test(tc, test_base64_alignments_and_line_breaks, 0, 2 * 9);
	tcase_add_loop_test(tc, test_json_escapes_in_text, 0, 16);
	tcase_add_test(tc, test_json_document_decoded);
	tcase_add_test(tc, test_json_member_name_and_nested);
	tcase_add_test(tc, test_json_strings_of_growing_size);
	tcase_add_test(tc, test_look_alikes_pass);
	tcase_add_loop_test(tc, test_encoded_prefixes_pass, 0, 2);
	tcase_add_test(tc, test_other_key_is_not_this_key);
	tcase_add_test(tc, test_several_keys);
	tcase_add_test(tc, test_short_key_raw_and_escapes_only);
	tcase_add_test(tc, test_unusable_keys);
	tcase_add_test(tc, test_documented_limits);
	tcase_add_loop_test(tc, test_run_every_cut, 0, 6);
	tcase_add_loop_test(tc, test_run_many_pieces, 0, 6);
	tcase_add_test(tc, test_run_look_alike_passes);
	tcase_add_test(tc, test_run_open_escape);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
