/* SPDX-License-Identifier: Apache-2.0 */
/* json-c helpers used on every external JSON surface. */
#ifndef RTS_JSON_H
#define RTS_JSON_H

#include <json.h>
#include <stddef.h>

static inline void rts_json_putp(json_object **o)
{
	if (*o)
		json_object_put(*o);
}
#define cleanup_json __attribute__((cleanup(rts_json_putp)))

/* Parse exactly one JSON value from the len bytes at buf: json-c's strict mode with UTF-8
 * validation, nesting depth at most max_depth, only whitespace after the value, no NUL
 * byte anywhere. Returns 0 with *out (caller owns a reference) or -EINVAL with *why set to
 * a short static description. */
int rts_json_parse(const char *buf, size_t len, int max_depth, json_object **out, const char **why);

/* rts_json_parse() that also stores, on failure, the byte offset where parsing stopped in
 * *err_offset (may be NULL), for messages about operator-written files. */
int rts_json_parse_at(const char *buf, size_t len, int max_depth, json_object **out, const char **why,
		      size_t *err_offset);

/* rts_json_parse(), then the strict check of strictjson.h: also refuses duplicate keys at
 * any depth, lone surrogate escapes, \u0000, raw control characters in strings and numbers
 * beyond 64 bits, and a top level that is not an object or array. For input from outside
 * the trust boundary. Same result convention as rts_json_parse(); *why never quotes buf.
 * Not available in the static worker (json_strict.c, jansson). */
int rts_json_parse_strict(const char *buf, size_t len, int max_depth, json_object **out, const char **why);

/* Read the regular file at path (symlinks are followed) of at most max_bytes into a new
 * NUL-terminated buffer (*buf, caller frees; *len excludes the NUL). Returns 0, or -errno /
 * -EFBIG with a message naming path in err. */
int rts_json_read_bytes(const char *path, size_t max_bytes, char **buf, size_t *len, char *err, size_t errlen);

/* rts_json_read_bytes() and rts_json_parse_strict(); messages name path. Not available in
 * the static worker. */
int rts_json_read_file_strict(const char *path, size_t max_bytes, int max_depth, json_object **out, char *err,
			      size_t errlen);

/* Serialise o compactly (no slash escaping). Returns a newly allocated string. */
char *rts_json_dump(json_object *o);

/* strlen(rts_json_dump(o)) without keeping the copy. */
size_t rts_json_dump_len(json_object *o);

/* Bytes the byte c takes inside a JSON string as json-c writes it: 2 for '"', '\\', '/'
 * and the short escapes, 6 for other control characters (\u00XX), else 1. '/' counts as
 * escaped, so sums never underestimate whichever way json-c is told to write it. */
size_t rts_json_byte_len(unsigned char c);

/* The encoded size of the len bytes at s: the sum of rts_json_byte_len() over them,
 * quotes excluded. The measure of every "encoded" limit in common/limits.h. */
size_t rts_json_string_len(const char *s, size_t len);

/* Member lookup that returns NULL when o is not an object or has no such key. */
json_object *rts_json_get(json_object *o, const char *key);
/* The member's string when it is a string, else NULL (borrowed). */
const char *rts_json_get_string(json_object *o, const char *key);

#endif
