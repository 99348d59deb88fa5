/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the pre-scan that weighs a rich request body before it is parsed
 * (rts_json_scan(), common/jsonscan.h). The first two bytes pick a weight bound (0..1020)
 * and a depth bound (0..69); the rest is the body.
 *
 * Invariants. The bounded scan refuses exactly when the unbounded one finds more weight
 * or depth than allowed, and when it accepts, its counts are the unbounded scan's. When
 * the body parses strictly (json-c and jansson, as brokerd parses it), the scan counted
 * exactly the objects, arrays and scalars (object keys included) json-c built and the
 * same nesting depth: so the weight a body passes with bounds the tree brokerd builds. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>

#include "common/json.h"
#include "common/jsonscan.h"
#include "common/limits.h"
#include "common/strictjson.h"
#include "tests/fuzz/json_tree.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t wmax = (size_t)data[0] * 4;
	unsigned dmax = data[1] % 70;
	const char *body = (const char *)data + 2;
	size_t len = size - 2;

	struct rts_json_scan all, bounded;
	FUZZ_ASSERT(rts_json_scan(body, len, SIZE_MAX, UINT_MAX, &all) == 0);
	FUZZ_ASSERT(all.weight == all.objects * RTS_JSON_WEIGHT_OBJECT + all.arrays * RTS_JSON_WEIGHT_ARRAY +
					  all.scalars * RTS_JSON_WEIGHT_SCALAR);
	int r = rts_json_scan(body, len, wmax, dmax, &bounded);
	FUZZ_ASSERT(r == 0 || r == -E2BIG || r == -ELOOP);
	FUZZ_ASSERT((r == 0) == (all.weight <= wmax && all.depth <= dmax));
	if (r == 0)
		FUZZ_ASSERT(bounded.objects == all.objects && bounded.arrays == all.arrays &&
			    bounded.scalars == all.scalars && bounded.depth == all.depth && bounded.weight == all.weight);
	else
		FUZZ_ASSERT(bounded.weight <= wmax);

	json_object *doc = NULL;
	const char *why = NULL;
	if (rts_json_parse_strict(body, len, RTS_JSON_DEPTH_MAX, &doc, &why) == 0) {
		struct rts_json_scan tree = {0};
		json_tree_count(doc, 1, &tree);
		json_object_put(doc);
		FUZZ_ASSERT(tree.objects == all.objects && tree.arrays == all.arrays && tree.scalars == all.scalars &&
			    tree.depth == all.depth);
	}
	return 0;
}
