/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded text: JSON-encoded sizes and visible truncation at UTF-8 boundaries. */
#ifndef WORKER_TEXT_H
#define WORKER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Appended to every text the worker cuts (seed: "The worker marks truncated text"). */
#define WORKER_TRUNCATED_MARK "\xe2\x80\xa6[truncated]"

/* Number of Unicode characters (code points) in the valid UTF-8 string s. */
size_t worker_text_chars(const char *s);

/* Cut a trailing, incomplete UTF-8 sequence off s in place (what snprintf's byte limit
 * can leave), so a valid UTF-8 string cut anywhere stays valid. */
void worker_text_trim_utf8(char *s);

/* A newly allocated copy of the valid UTF-8 string s whose JSON-encoded length is at most
 * max bytes: unchanged when it fits, otherwise cut at a character boundary with
 * WORKER_TRUNCATED_MARK appended (the mark counts against max). *truncated (may be NULL)
 * says which. max must be at least the mark's length. Never fails (allocation aborts). */
char *worker_text_bound(const char *s, size_t max, bool *truncated);

/* A newly allocated JSON string literal (quotes included) holding s, so text a guest chose
 * (a display name, an id) shows its line breaks and quotes escaped and cannot pose as a
 * line of our own framing. Never fails (allocation aborts). */
char *worker_text_quote(const char *s);

/* A newly allocated tool result {"error": MESSAGE} for the model, MESSAGE formatted like
 * printf and cut to 511 bytes at a character boundary. Never fails (allocation aborts). */
char *worker_error_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
