/* SPDX-License-Identifier: Apache-2.0 */
/* Text from statd (channel keys, replies a guest can steer) on the operator's terminal. */
#include "config.h"

#include "cli/cli.h"
#include "common/json.h"
#include "common/util.h"

/* Length of the valid UTF-8 sequence at s (at most left bytes), or 0 when it is not one. */
static size_t utf8_seq_len(const unsigned char *s, size_t left)
{
	size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (n == 0 || n > left || !rts_utf8_valid((const char *)s, n))
		return 0;
	return n;
}

/* Code point of the valid n-byte (1..3) UTF-8 sequence at s; 4-byte ones are never special. */
static unsigned utf8_code_point(const unsigned char *s, size_t n)
{
	if (n == 1)
		return s[0];
	if (n == 2)
		return (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu);
	if (n == 3)
		return (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
	return 0x10000;
}

/* C1 control characters (U+0080..U+009F: U+009B is a CSI to some terminals) and the bidi
 * embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069), which reorder what
 * a terminal shows after them ("Trojan Source"). The marks U+200E/U+200F stay: they are
 * ordinary in right-to-left text and reorder nothing beyond their neighbours. */
static bool code_point_disguises(unsigned cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Write the len bytes at s with backslash, C0 control characters, DEL and bytes that are not
 * UTF-8 escaped ("\\", "\xNN"), and the code points code_point_disguises() names as
 * "\uXXXX", so untrusted text cannot move the cursor, rewrite the terminal, reorder what
 * follows it or split a record. keep_layout lets newline and tab through. */
void cli_put_escaped(FILE *f, const char *str, size_t len, bool keep_layout)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		size_t n = utf8_seq_len(s + i, len - i);
		unsigned cp = n ? utf8_code_point(s + i, n) : 0;
		if (keep_layout && (c == '\n' || c == '\t')) {
			fputc(c, f);
			i++;
		} else if (c == '\\') {
			fputs("\\\\", f);
			i++;
		} else if (n > 1 && code_point_disguises(cp)) {
			fprintf(f, "\\u%04x", cp);
			i += n;
		} else if (n == 0 || c < 0x20 || c == 0x7f) {
			size_t k = n ? n : 1;
			for (size_t j = 0; j < k; j++)
				fprintf(f, "\\x%02x", s[i + j]);
			i += k;
		} else {
			fwrite(s + i, 1, n, f);
			i += n;
		}
	}
}

void cli_put_field(FILE *f, json_object *str)
{
	cli_put_escaped(f, json_object_get_string(str), (size_t)json_object_get_string_len(str), false);
}

/* One JSON document and a newline. json-c writes C1 controls and bidi overrides raw; they
 * can only occur inside strings, so they are written as \uXXXX escapes there: still the same
 * JSON, but inert in a terminal. */
void cli_print_json(json_object *answer)
{
	cleanup_free char *s = rts_json_dump(answer);
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq_len(p + i, len - i);
		if (n > 1 && code_point_disguises(utf8_code_point(p + i, n)))
			printf("\\u%04x", utf8_code_point(p + i, n));
		else
			fwrite(p + i, 1, n ? n : 1, stdout);
		i += n ? n : 1;
	}
	putchar('\n');
}
