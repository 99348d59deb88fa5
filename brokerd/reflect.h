/* SPDX-License-Identifier: Apache-2.0 */
/* Credential reflection filter (seed, "Threat model": obvious raw, URL-encoded, base64,
 * base64url and hex reflections of a credential are refused after JSON decoding).
 *
 * Defence in depth for trusted upstreams, not a detector for every encoding: it looks for
 * the whole key in the encodings an echo would plausibly produce. Text that only looks like
 * a key (an "sk-" prefix, a masked "sk-...xyz") passes. Pure functions, no I/O. */
#ifndef BROKERD_REFLECT_H
#define BROKERD_REFLECT_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>

struct brokerd_reflect;

/* Precompute the forms of the key (len bytes, 1..BROKERD_KEY_MAX) that are searched for:
 * raw; percent-encoded (reserved bytes only, and every byte) in upper- and lower-case hex;
 * standard base64 and base64url at each of the three byte alignments a key can have inside
 * a longer encoded text (only the characters that depend on the key alone, so padding and
 * neighbours do not matter); hex in lower and upper case. Encoded forms shorter than 8
 * characters are skipped (they would match ordinary text). Returns NULL when len is 0 or
 * too large. The result holds key material: free it with brokerd_reflect_free(), which
 * wipes it. */
struct brokerd_reflect *brokerd_reflect_new(const char *key, size_t len);
void brokerd_reflect_free(struct brokerd_reflect *r);

/* True when the len bytes at text contain any precomputed form. */
bool brokerd_reflect_text(const struct brokerd_reflect *r, const char *text, size_t len);

/* True when any string or object member name anywhere in o (after JSON decoding, so
 * \u escapes are already resolved) contains a precomputed form. NULL o is clean. */
bool brokerd_reflect_json(const struct brokerd_reflect *r, json_object *o);

#endif
