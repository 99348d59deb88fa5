/* SPDX-License-Identifier: Apache-2.0 */
/* Credential reflection filter (seed, "Threat model": obvious raw, URL-encoded, base64,
 * base64url and hex reflections of a credential are refused after JSON decoding).
 *
 * Defence in depth for trusted upstreams, not a detector for every encoding or every
 * fragment of a secret: it looks for the whole key, in the text as it is and after undoing
 * one layer of encoding. A text holds the key when it contains
 *   - the key itself;
 *   - the key percent-encoded: every byte either as itself or as %XX, hex digits in either
 *     case, in any mix (a '%' of the key itself as %25, as every URL encoder writes it);
 *   - the key with JSON string escapes: every byte either as itself or escaped (\uXXXX in
 *     either case, \/ \" \\), in any mix (a '\' of the key itself escaped);
 *   - the key as hex, digits in any mix of cases, whitespace (line breaks) allowed
 *     anywhere in between;
 *   - the key as base64 or base64url, starting at any byte of a 3-byte group (inside a
 *     longer encoded text too), padded or not, whitespace allowed anywhere in between.
 * Hex and base64 are looked for only for keys of at least BROKERD_REFLECT_MIN_ENCODED
 * bytes: the encoding of a shorter key is too short to tell from ordinary text.
 * Not caught: a '%' or '\' right before the key that swallows its first characters into a
 * bogus escape (text no encoder produces), two layers of encoding, the key split by other
 * text or in pieces, and any other transformation. Text that only looks like a key (a
 * prefix, a masked "sk-...xyz", the key with one character changed) passes; only in
 * base64 are a few bits of the key's first and last byte left out (they share a character
 * with the neighbouring bytes), so there a key differing in just those bits matches too.
 *
 * Pure functions, no I/O, no locking: callers serialise (keys.c). */
#ifndef BROKERD_REFLECT_H
#define BROKERD_REFLECT_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>

#define BROKERD_REFLECT_MIN_ENCODED 8u

struct brokerd_reflect;

/* Precompute what the filter looks for in a key of len bytes (1..BROKERD_KEY_MAX, every
 * byte printable ASCII other than space, as brokerd_key_valid() requires): the key, its
 * lower-case hex, and the base64 characters that depend on the key alone at each of the
 * three byte alignments. Returns NULL for an empty, too long or non-printable key. The
 * result holds key material: free it with brokerd_reflect_free(), which wipes it. */
struct brokerd_reflect *brokerd_reflect_new(const char *key, size_t len);
void brokerd_reflect_free(struct brokerd_reflect *r);

/* True when the len bytes at text hold any of the n keys in any form listed above. keys
 * may contain NULL entries (skipped). Cost: a few linear passes over text plus a few
 * linear searches per key. */
bool brokerd_reflect_scan_text(const struct brokerd_reflect *const *keys, size_t n, const char *text, size_t len);

/* The same for every string and object member name in o, after JSON decoding (so
 * \u escapes of the JSON text itself are already resolved). o must be no deeper than the
 * parser's limit (RTS_JSON_DEPTH_MAX): the walk recurses. NULL o is clean. */
bool brokerd_reflect_scan_json(const struct brokerd_reflect *const *keys, size_t n, json_object *o);

/* One key: brokerd_reflect_scan_text() / brokerd_reflect_scan_json() with n = 1. */
bool brokerd_reflect_text(const struct brokerd_reflect *r, const char *text, size_t len);
bool brokerd_reflect_json(const struct brokerd_reflect *r, json_object *o);

/* ---- a running text ----
 *
 * A text that comes in pieces (a streamed answer's strings, one event at a time) checked as
 * one: a key whose form (any listed above) spans pieces is found when the piece holding its
 * last byte is fed, however the pieces cut it (inside an escape too). Each view keeps the
 * last (its longest form - 1) bytes it produced from earlier pieces, so a piece costs a
 * pass over it and that tail: linear in what is fed. Hex and base64 forms are found
 * across pieces whatever whitespace separates them. The result holds answer bytes and
 * maybe part of a key: brokerd_reflect_run_free() wipes it. */
struct brokerd_reflect_run;

struct brokerd_reflect_run *brokerd_reflect_run_new(void);
void brokerd_reflect_run_free(struct brokerd_reflect_run *run);

/* Append the len bytes at text to the running text and check it against the n keys (NULL
 * entries skipped; pass the same keys every time). True when the running text fed so far
 * holds a key. final: no piece follows, so an escape left open at the end is read as the
 * plain bytes it is (a later piece could still have closed it). */
bool brokerd_reflect_run_feed(struct brokerd_reflect_run *run, const struct brokerd_reflect *const *keys, size_t n,
			      const char *text, size_t len, bool final);

#endif
