/* SPDX-License-Identifier: Apache-2.0 */
/* The jansson half of strictjson.h. No json-c header may be included here. */
#include "config.h"

#include <errno.h>
#include <jansson.h>

#include "common/strictjson.h"

void rts_json_strict_init(void)
{
	/* Also links json_strict.c, and with it the start-up check of the link order. */
	rts_json_link_check();
	json_object_seed(0);
}

int rts_json_strict_check(const char *buf, size_t len, const char **why)
{
	return rts_json_strict_check_at(buf, len, why, NULL, NULL);
}

int rts_json_strict_check_at(const char *buf, size_t len, const char **why, size_t *line, size_t *column)
{
	json_error_t e;
	/* No JSON_DECODE_ANY: the top level is an object or an array. No JSON_ALLOW_NUL. */
	json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	if (doc) {
		json_decref(doc);
		return 0;
	}
	if (line)
		*line = e.line > 0 ? (size_t)e.line : 0;
	if (column)
		*column = e.column > 0 ? (size_t)e.column : 0;
	/* e.text quotes the input: only the code and the position are used. */
	switch (json_error_code(&e)) {
	case json_error_duplicate_key:
		*why = "duplicate object key";
		break;
	case json_error_invalid_utf8:
		*why = "invalid UTF-8";
		break;
	case json_error_null_character:
	case json_error_null_byte_in_key:
		*why = "NUL character";
		break;
	case json_error_numeric_overflow:
		*why = "number out of range";
		break;
	case json_error_stack_overflow:
		*why = "nesting too deep";
		break;
	case json_error_premature_end_of_input:
		*why = "truncated JSON text";
		break;
	case json_error_end_of_input_expected:
		*why = "data after the JSON value";
		break;
	case json_error_out_of_memory:
		*why = "out of memory";
		break;
	default:
		*why = "invalid JSON text (control character, bad escape or syntax)";
		break;
	}
	return -EINVAL;
}
