/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/termtext.h"
#include "common/util.h"

bool rts_term_disguises(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void rts_term_escape(FILE *f, const char *str, size_t len, enum rts_term_text kind)
{
	const unsigned char *s = (const unsigned char *)str;
	bool prose = kind == RTS_TERM_PROSE;
	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		uint32_t cp = 0;
		size_t n = rts_utf8_decode(str + i, len - i, &cp); /* 0: not UTF-8 */
		if (prose && (c == '\n' || c == '\t')) {
			fputc(c, f);
			i++;
		} else if (c == '\\') {
			fputs("\\\\", f);
			i++;
		} else if (n > 1 && (rts_term_disguises(cp) || (!prose && rts_code_point_hidden(cp)))) {
			fprintf(f, cp > 0xffff ? "\\U%08x" : "\\u%04x", (unsigned)cp);
			i += n;
		} else if (n == 0 || c < 0x20 || c == 0x7f) {
			/* A NUL decodes as one byte of U+0000: escaped like any C0 control. */
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

void rts_term_json(FILE *f, const char *json, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		size_t n = rts_utf8_decode(json + i, len - i, &cp);
		if (n > 1 && rts_term_disguises(cp))
			fprintf(f, "\\u%04x", (unsigned)cp);
		else
			fwrite(json + i, 1, n ? n : 1, f);
		i += n ? n : 1;
	}
}
