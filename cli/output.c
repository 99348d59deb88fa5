/* SPDX-License-Identifier: Apache-2.0 */
/* Text from statd (channel keys, replies a guest can steer) on the operator's terminal. */
#include "config.h"

#include "cli/cli.h"
#include "common/json.h"
#include "common/util.h"

/* C1 control characters (U+0080..U+009F: U+009B is a CSI to some terminals) and the bidi
 * embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069), which reorder what
 * a terminal shows after them ("Trojan Source"). The marks U+200E/U+200F stay: they are
 * ordinary in right-to-left text and reorder nothing beyond their neighbours. */
static bool code_point_disguises(uint32_t cp)
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
		uint32_t cp = 0;
		size_t n = rts_utf8_decode(str + i, len - i, &cp); /* 0: not UTF-8 */
		if (keep_layout && (c == '\n' || c == '\t')) {
			fputc(c, f);
			i++;
		} else if (c == '\\') {
			fputs("\\\\", f);
			i++;
		} else if (n > 1 && code_point_disguises(cp)) {
			fprintf(f, "\\u%04x", (unsigned)cp);
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
	size_t len = strlen(s);
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		size_t n = rts_utf8_decode(s + i, len - i, &cp);
		if (n > 1 && code_point_disguises(cp))
			printf("\\u%04x", (unsigned)cp);
		else
			fwrite(s + i, 1, n ? n : 1, stdout);
		i += n ? n : 1;
	}
	putchar('\n');
}
