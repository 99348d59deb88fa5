/* SPDX-License-Identifier: Apache-2.0 */
/* The strict half of JSON parsing for input from outside the trust boundary: worker bodies
 * at the broker (POST /model, /tools/<name>, /mcp/<server>; issue 3: duplicate keys,
 * invalid UTF-8, raw control characters and excessive depth are refused), the worker's
 * output at runnerd, control-socket requests at statd, the state file and the config.
 *
 * json-c, which every other JSON surface uses, cannot be made strict enough: measured
 * with json-c 0.16 in JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8 mode, it keeps the
 * last of two duplicate keys (at any depth, also when one is spelled with \u escapes),
 * and accepts raw control characters in strings, overlong and surrogate UTF-8 sequences,
 * lone \ud800 escapes, \u0000, single-quoted strings, NaN and integers beyond 64 bits.
 * jansson (Debian's libjansson, JSON_REJECT_DUPLICATES) refuses every one of those, so a
 * document has to pass both: json-c's parse (with the caller's depth bound; the tree the
 * callers use) and jansson's check (everything else): rts_json_parse_strict() in json.h.
 *
 * jansson's and json-c's headers declare conflicting names (json_object, json_type), so
 * jansson is confined to strictjson.c, which includes no json-c header. Both libraries
 * also export json_object_get and json_object_iter_next; their symbols are versioned
 * (JSONC_0.14, libjansson.so.4), json-c comes first on the link line (COMMON_LIBS) and
 * strictjson.c calls neither, so every json-c call binds to json-c. check_broker_body
 * asserts that. The static worker links neither this file nor jansson. */
#ifndef RTS_STRICTJSON_H
#define RTS_STRICTJSON_H

#include <stddef.h>

/* Seed jansson's hash function (from /dev/urandom, else the time and pid). Call once at
 * start-up, before any thread and before the seccomp filter; without it jansson seeds
 * itself on first use. */
void rts_json_strict_init(void);

/* Check the len bytes at buf with jansson: one JSON object or array and only whitespace
 * after it, valid UTF-8, no raw control character in a string, no \u0000, no lone
 * surrogate escape, no duplicate key in any object, integers within 64 bits, nesting at
 * most 2048 (the callers bound it further). Returns 0, or -EINVAL with *why set to a
 * short static reason that quotes nothing from buf. */
int rts_json_strict_check(const char *buf, size_t len, const char **why);

/* rts_json_strict_check() that also stores, on failure, the 1-based line and column jansson
 * stopped at (either pointer may be NULL), for messages about operator-written files. */
int rts_json_strict_check_at(const char *buf, size_t len, const char **why, size_t *line, size_t *column);

#endif
