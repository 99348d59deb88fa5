/* Strict parsing of the JSON bodies a worker sends (POST /model, /tools/<name>,
 * /mcp/<server>; issue 3: duplicate keys, invalid UTF-8, raw control characters and
 * excessive depth are refused).
 *
 * json-c, which every other JSON surface uses, cannot be made strict enough: measured
 * with json-c 0.16 in JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8 mode, it keeps the
 * last of two duplicate keys (at any depth, also when one is spelled with \u escapes),
 * and accepts raw control characters in strings, overlong and surrogate UTF-8 sequences,
 * lone \ud800 escapes, \u0000, single-quoted strings, NaN and integers beyond 64 bits.
 * jansson (Debian's libjansson, JSON_REJECT_DUPLICATES) refuses every one of those, so a
 * body has to pass both: json-c's parse (depth at most BROKERD_JSON_DEPTH, the tree the
 * handlers use) and jansson's check (everything else).
 *
 * jansson's and json-c's headers declare conflicting names (json_object, json_type), so
 * jansson is confined to strictjson.c, which includes no json-c header. Both libraries
 * also export json_object_get and json_object_iter_next; their symbols are versioned
 * (JSONC_0.14, libjansson.so.4), json-c comes first on the link line (Makemodule.am) and
 * strictjson.c calls neither, so every json-c call binds to json-c. check_broker_body
 * asserts that. */
#ifndef BROKERD_STRICTJSON_H
#define BROKERD_STRICTJSON_H

#include <stddef.h>

struct json_object;

/* Seed jansson's hash function (from /dev/urandom, else the time and pid). Call once at
 * start-up, before any thread and before the seccomp filter; without it jansson seeds
 * itself on first use. */
void brokerd_json_strict_init(void);

/* Check the len bytes at buf with jansson: one JSON object or array and only whitespace
 * after it, valid UTF-8, no raw control character in a string, no \u0000, no lone
 * surrogate escape, no duplicate key in any object, integers within 64 bits, nesting at
 * most 2048 (the callers bound it further). Returns 0, or -EINVAL with *why set to a
 * short static reason that quotes nothing from buf. */
int brokerd_json_strict_check(const char *buf, size_t len, const char **why);

/* Parse a worker-supplied body: json-c's rts_json_parse() with depth BROKERD_JSON_DEPTH,
 * then brokerd_json_strict_check(). Returns 0 with *out (caller owns the reference), or
 * -EINVAL with *why static (nothing from buf). */
int brokerd_body_parse(const char *buf, size_t len, struct json_object **out, const char **why);

#endif
