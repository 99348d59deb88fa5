/* SPDX-License-Identifier: Apache-2.0 */
/* A linear pre-scan of a JSON text that bounds what a parse of it would build, before
 * json-c and jansson build it (brokerd's rich listener, issue 16). It is no parser: it
 * does not validate, it only counts what a parser would allocate a node for, so a body
 * whose tree would be out of proportion to its bytes ("[{},{},...]": an empty object costs
 * about 1 KiB across both libraries for its 3 bytes) is refused before either sees it.
 * Malformed text is left to the parsers, which refuse it anyway. */
#ifndef RTS_JSONSCAN_H
#define RTS_JSONSCAN_H

#include <stddef.h>

/* What rts_json_scan() counted outside strings. */
struct rts_json_scan {
	size_t objects;	   /* '{' */
	size_t arrays;	   /* '[' */
	size_t scalars;	   /* strings (object keys included), numbers, true, false, null */
	unsigned depth;	   /* the deepest nesting of objects and arrays seen */
	size_t weight;	   /* RTS_JSON_WEIGHT() of the counts */
};

/* Scan the len bytes at buf (no NUL needed). Counts every object, array and scalar (an
 * object's key counts as a scalar: both parsers allocate one) and the deepest nesting,
 * stopping at the first byte where the weight would exceed weight_max or the nesting
 * depth_max. Returns 0 with *out filled; -E2BIG when weight_max was exceeded, -ELOOP when
 * depth_max was (*out then holds the counts up to that byte). Linear in len, no
 * allocation. */
int rts_json_scan(const char *buf, size_t len, size_t weight_max, unsigned depth_max, struct rts_json_scan *out);

#endif
