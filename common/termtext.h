/* SPDX-License-Identifier: Apache-2.0 */
/* Untrusted text on an operator's terminal: channel keys, guest names, replies a guest can
 * steer and statd's answers quoting them, as the CLI prints them. */
#ifndef COMMON_TERMTEXT_H
#define COMMON_TERMTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* True for a code point a terminal acts on or that reorders what it shows after it: the
 * C1 controls (U+0080..U+009F; U+009B is a CSI to some terminals) and the bidi embeddings,
 * overrides and isolates (U+202A..U+202E, U+2066..U+2069, "Trojan Source"). The marks
 * U+200E/U+200F are not: they are ordinary in right-to-left text and reorder nothing
 * beyond their neighbours. */
bool rts_term_disguises(uint32_t cp);

/* What a piece of text is to the reader. */
enum rts_term_text {
	/* A name the operator tells others apart by (a channel key, a mode, a profile): every
	 * code point rts_code_point_hidden() (common/util.h) names is escaped too, so two keys
	 * that differ by a zero-width or tag character never look the same. */
	RTS_TERM_NAME,
	/* Prose (a reply): newline and tab go through, and invisible characters that prose
	 * uses (zero-width joiners in emoji, soft hyphens) stay as they are. */
	RTS_TERM_PROSE,
};

/* Write the len bytes at s to f with backslash, the C0 controls, DEL and bytes that are not
 * UTF-8 escaped as "\\" and "\xNN", the code points rts_term_disguises() names (and, for
 * RTS_TERM_NAME, those rts_code_point_hidden() names) as "\uXXXX" or, above U+FFFF,
 * "\UXXXXXXXX" (lowercase hex), so that the text cannot move the cursor, rewrite the
 * terminal, reorder what follows it, split a record or pass for another name. What is
 * written is valid UTF-8, and undoing those escapes gives the len bytes back. s may hold
 * NULs. Write errors are f's (ferror()). */
void rts_term_escape(FILE *f, const char *s, size_t len, enum rts_term_text kind);

/* Write the len bytes at json, a document as json-c prints it, to f with each code point
 * rts_term_disguises() names written as "\uXXXX". Such code points occur in a JSON text
 * only inside strings, so the result is the same JSON, inert in a terminal. Bytes that
 * are not UTF-8 are written unchanged. */
void rts_term_json(FILE *f, const char *json, size_t len);

#endif
