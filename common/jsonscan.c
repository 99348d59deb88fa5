/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>

#include "common/jsonscan.h"
#include "common/limits.h"

int rts_json_scan(const char *buf, size_t len, size_t weight_max, unsigned depth_max, struct rts_json_scan *out)
{
	*out = (struct rts_json_scan){0};
	unsigned depth = 0;
	bool in_string = false, escaped = false, in_scalar = false;
	for (size_t i = 0; i < len; i++) {
		char ch = buf[i];
		if (in_string) {
			if (escaped)
				escaped = false;
			else if (ch == '\\')
				escaped = true;
			else if (ch == '"')
				in_string = false;
			continue;
		}
		size_t add = 0;
		switch (ch) {
		case '{':
		case '[':
			in_scalar = false;
			if (ch == '{') {
				out->objects++;
				add = RTS_JSON_WEIGHT_OBJECT;
			} else {
				out->arrays++;
				add = RTS_JSON_WEIGHT_ARRAY;
			}
			if (++depth > out->depth)
				out->depth = depth;
			if (depth > depth_max)
				return -ELOOP;
			break;
		case '}':
		case ']':
			in_scalar = false;
			if (depth > 0)
				depth--;
			break;
		case '"':
			in_scalar = false;
			in_string = true;
			out->scalars++;
			add = RTS_JSON_WEIGHT_SCALAR;
			break;
		case ',':
		case ':':
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			in_scalar = false;
			break;
		default:
			/* The first byte of a number, true, false or null (or of junk the parsers
			 * refuse): one node. */
			if (!in_scalar) {
				in_scalar = true;
				out->scalars++;
				add = RTS_JSON_WEIGHT_SCALAR;
			}
			break;
		}
		if (add > weight_max - out->weight) /* out->weight <= weight_max throughout */
			return -E2BIG;
		out->weight += add;
	}
	return 0;
}
