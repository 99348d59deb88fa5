/* SPDX-License-Identifier: Apache-2.0 */
/* The json-c side of strict parsing (see strictjson.h for why two libraries). Kept out of
 * json.c, which the static worker compiles without jansson. */
#include "config.h"

#include "common/json.h"
#include "common/strictjson.h"
#include "common/util.h"

int rts_json_parse_strict(const char *buf, size_t len, int max_depth, json_object **out, const char **why)
{
	int r = rts_json_parse(buf, len, max_depth, out, why);
	if (r < 0)
		return r;
	r = rts_json_strict_check(buf, len, why);
	if (r < 0) {
		json_object_put(*out);
		*out = NULL;
	}
	return r;
}

int rts_json_read_file_strict(const char *path, size_t max_bytes, int max_depth, json_object **out, char *err,
			      size_t errlen)
{
	*out = NULL;
	cleanup_free char *buf = NULL;
	size_t len = 0;
	int r = rts_json_read_bytes(path, max_bytes, &buf, &len, err, errlen);
	if (r < 0)
		return r;
	/* Operator-written files get a position, so "duplicate object key" or a stray comma can
	 * be found; network input never does (it would help nobody but a prober). */
	const char *why = NULL;
	size_t off = 0, line = 0, col = 0;
	r = rts_json_parse_at(buf, len, max_depth, out, &why, &off);
	if (r == 0) {
		r = rts_json_strict_check_at(buf, len, &why, &line, &col);
		if (r < 0) {
			json_object_put(*out);
			*out = NULL;
		}
	} else {
		line = 1;
		col = 1;
		for (size_t i = 0; i < off && i < len; i++) {
			if (buf[i] == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
	}
	if (r < 0) {
		if (line > 0)
			snprintf(err, errlen, "%s:%zu:%zu: %s", path, line, col, why);
		else
			snprintf(err, errlen, "%s: %s", path, why);
		return -EINVAL;
	}
	return 0;
}
