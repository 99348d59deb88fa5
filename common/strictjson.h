/* SPDX-License-Identifier: Apache-2.0 */
/* The strict half of JSON parsing for input from outside the trust boundary: worker bodies
 * at the broker (POST /model, /tools/<name>, /mcp/<server>; issue 3: duplicate keys,
 * invalid UTF-8, raw control characters and excessive depth are refused), the worker's
 * output at runnerd, control-socket requests at statd, the state file and the config.
 *
 * Why two parsers. json-c, which every other JSON surface uses, cannot be made strict
 * enough. Measured with json-c 0.16 in JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8
 * mode, it keeps the last of two duplicate keys (at any depth, also when one is spelled
 * with \u escapes), turns a lone \ud800 escape into U+FFFD, cuts a key at "\u0000" (so
 * "a\u0000b" becomes a second "a"), and accepts raw control characters in strings and keys,
 * NaN, 1e400 and integers beyond 64 bits (99999999999999999999 reads back as INT64_MAX with
 * errno unset). jansson (Debian's libjansson, JSON_REJECT_DUPLICATES) refuses every one of
 * those, so a document has to pass both: json-c's parse (with the caller's depth bound;
 * the tree the callers use) and jansson's check (everything else): rts_json_parse_strict()
 * in json.h.
 *
 * Still needed beside the validation tables (common/jspec.h). The tables judge the shape
 * of a json-c tree, and the worst of the list above leaves no trace in one: the duplicate
 * is gone, the surrogate is a valid character, the cut key is an ordinary key. A parser
 * differential there is a routing decision (two "channel" keys: one reader takes the first,
 * another the last) or a forwarded body that is not what was checked. The tables do repeat
 * two of the checks for the worker, which parses without jansson: "\u0000" in a value and
 * integers out of range. One parser would need jansson everywhere (its tree in every
 * consumer of json-c, the static worker included) or a json-c with a duplicate-key hook
 * (none has one); neither is worth its churn at the measured cost (tests/bench/strict_parse,
 * one run on a shared 2-core machine, medians of 51): a 254 KiB POST /model body takes
 * 0.88 ms with json-c alone and 3.37 ms strictly (3.8x), a 64 KiB control line 0.14 ms and
 * 0.74 ms (5.2x): milliseconds against an upstream call of seconds, and a control line
 * per guest message. The tables add 0.68x (validating and building the upstream body) and
 * 0.02x of the json-c time.
 *
 * jansson's and json-c's headers declare conflicting names (json_object, json_type), so
 * jansson is confined to strictjson.c, which includes no json-c header. Both libraries
 * also export json_object_get and json_object_iter_next; their symbols are versioned
 * (JSONC_0.14, libjansson.so.4) but a reference binds to whichever library comes first on
 * the link line, so json-c must (COMMON_LIBS). That order is checked where it matters, in
 * the program: json_strict.c, which every program that parses strictly links, refuses to
 * start (before main(), with a message naming the library) when either symbol is bound
 * outside json-c; check_broker_body calls both. The static worker links neither this file
 * nor jansson. */
#ifndef RTS_STRICTJSON_H
#define RTS_STRICTJSON_H

#include <stddef.h>

/* Abort with a message when json_object_get or json_object_iter_next is not json-c's
 * (see above). Runs by itself at start-up in every program that links json_strict.c;
 * rts_json_strict_init() calls it too. */
void rts_json_link_check(void);

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
