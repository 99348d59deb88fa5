/* SPDX-License-Identifier: Apache-2.0 */
/* What json-c built for a document, counted as common/jsonscan.h counts the text: objects,
 * arrays and scalars (object keys included) and the deepest nesting (the top level is 1).
 * For check_jsonscan and fuzz_json_scan, which compare the two. */
#ifndef TESTS_FUZZ_JSON_TREE_H
#define TESTS_FUZZ_JSON_TREE_H

#include "common/json.h"
#include "common/jsonscan.h"

static inline void json_tree_count(json_object *o, unsigned depth, struct rts_json_scan *s)
{
	switch (json_object_get_type(o)) {
	case json_type_object:
		s->objects++;
		if (depth > s->depth)
			s->depth = depth;
		json_object_object_foreach(o, k, v)
		{
			(void)k;
			s->scalars++;
			json_tree_count(v, depth + 1, s);
		}
		break;
	case json_type_array:
		s->arrays++;
		if (depth > s->depth)
			s->depth = depth;
		for (size_t i = 0; i < json_object_array_length(o); i++)
			json_tree_count(json_object_array_get_idx(o, i), depth + 1, s);
		break;
	default:
		s->scalars++;
		break;
	}
}

#endif
