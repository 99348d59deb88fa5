/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: untrusted text on the operator's terminal (common/termtext.h), as the
 * CLI prints channel keys, guest names, replies and statd's answers. The first byte picks
 * the kind of text (a name or prose); the rest is the text, and, when it parses as JSON,
 * the document.
 *
 * Invariants. rts_term_escape() writes valid UTF-8 with no C0 control but (in prose)
 * newline and tab, no DEL, no code point rts_term_disguises() names and, in a name, none
 * rts_code_point_hidden() names; undoing its "\\", "\xNN", "\uXXXX" and "\UXXXXXXXX"
 * escapes gives the input back byte for byte.
 * rts_term_json() of what json-c prints for a document contains no such code point either,
 * and parses back to the same document. */
#include "config.h"

#include <stdint.h>

#include "common/json.h"
#include "common/termtext.h"
#include "common/util.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The len bytes at s through rts_term_json() or rts_term_escape() into a new buffer (*outlen bytes, caller frees). */
static char *captured(const char *s, size_t len, enum rts_term_text kind, bool json, size_t *outlen)
{
	char *out = NULL;
	FILE *f = open_memstream(&out, outlen);
	FUZZ_ASSERT(f);
	if (json)
		rts_term_json(f, s, len);
	else
		rts_term_escape(f, s, len, kind);
	FUZZ_ASSERT(fclose(f) == 0);
	return out;
}

static unsigned hex_digit(char c)
{
	FUZZ_ASSERT((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
	return c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10);
}

/* Every code point of the len bytes at s: valid UTF-8, and nothing a terminal acts on. */
static void assert_inert(const char *s, size_t len, enum rts_term_text kind, bool json)
{
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		size_t n = rts_utf8_decode(s + i, len - i, &cp);
		if (json && n == 0) { /* json-c passed bytes that are not UTF-8 through */
			i++;
			continue;
		}
		FUZZ_ASSERT(n > 0);
		FUZZ_ASSERT(!rts_term_disguises(cp));
		if (!json) {
			bool layout = kind == RTS_TERM_PROSE && (cp == '\n' || cp == '\t');
			FUZZ_ASSERT(cp != 0x7f);
			FUZZ_ASSERT(cp >= 0x20 || layout);
			FUZZ_ASSERT(kind == RTS_TERM_PROSE || !rts_code_point_hidden(cp));
		}
		i += n;
	}
}

/* cp (at least U+0080, not a surrogate) as UTF-8 into out; returns its length. */
static size_t encode(uint32_t cp, char out[4])
{
	FUZZ_ASSERT(cp >= 0x80 && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff));
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Undo rts_term_escape()'s escapes into out (at least len bytes); returns the length. */
static size_t unescape(const char *s, size_t len, enum rts_term_text kind, unsigned char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		if (s[i] != '\\') {
			out[o++] = (unsigned char)s[i++];
			continue;
		}
		FUZZ_ASSERT(i + 1 < len);
		if (s[i + 1] == '\\') {
			out[o++] = '\\';
			i += 2;
		} else if (s[i + 1] == 'x') {
			FUZZ_ASSERT(i + 3 < len);
			out[o++] = (unsigned char)(hex_digit(s[i + 2]) << 4 | hex_digit(s[i + 3]));
			i += 4;
		} else {
			size_t digits = s[i + 1] == 'U' ? 8 : 4;
			FUZZ_ASSERT((s[i + 1] == 'u' || s[i + 1] == 'U') && i + 1 + digits < len);
			uint32_t cp = 0;
			for (size_t k = 2; k < 2 + digits; k++)
				cp = cp << 4 | hex_digit(s[i + k]);
			FUZZ_ASSERT(rts_term_disguises(cp) || (kind == RTS_TERM_NAME && rts_code_point_hidden(cp)));
			FUZZ_ASSERT((digits == 8) == (cp > 0xffff));
			char utf8[4];
			size_t n = encode(cp, utf8);
			memcpy(out + o, utf8, n);
			o += n;
			i += 2 + digits;
		}
	}
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	enum rts_term_text kind = data[0] & 1 ? RTS_TERM_PROSE : RTS_TERM_NAME;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;

	size_t outlen = 0;
	cleanup_free char *out = captured(text, len, kind, false, &outlen);
	assert_inert(out, outlen, kind, false);
	cleanup_free unsigned char *back = malloc(outlen + 1);
	FUZZ_ASSERT(back);
	size_t backlen = unescape(out, outlen, kind, back);
	FUZZ_ASSERT(backlen == len && memcmp(back, text, len) == 0);

	json_object *doc = NULL;
	const char *why = NULL;
	if (rts_json_parse(text, len, 32, &doc, &why) == 0) {
		cleanup_free char *dump = rts_json_dump(doc);
		size_t jlen = 0;
		cleanup_free char *shown = captured(dump, strlen(dump), RTS_TERM_NAME, true, &jlen);
		assert_inert(shown, jlen, RTS_TERM_NAME, true);
		json_object *again = NULL;
		FUZZ_ASSERT(rts_json_parse(shown, jlen, 32, &again, &why) == 0);
		cleanup_free char *dump_again = rts_json_dump(again);
		FUZZ_ASSERT(strcmp(dump_again, dump) == 0);
		json_object_put(again);
		json_object_put(doc);
	}
	return 0;
}
