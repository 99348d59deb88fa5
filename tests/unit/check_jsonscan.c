/* SPDX-License-Identifier: Apache-2.0 */
/* The pre-scan that weighs a rich request body before json-c and jansson parse it
 * (common/jsonscan.h, the bound in common/limits.h; issue 16). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/jsonscan.h"
#include "common/limits.h"
#include "common/strictjson.h"
#include "tests/fuzz/json_tree.h"
#include "common/util.h"

static int scan(const char *text, size_t wmax, unsigned dmax, struct rts_json_scan *s)
{
	return rts_json_scan(text, strlen(text), wmax, dmax, s);
}

START_TEST(test_counts)
{
	struct rts_json_scan s;
	ck_assert_int_eq(scan("[{},{},{}]", SIZE_MAX, 64, &s), 0);
	ck_assert_uint_eq(s.objects, 3);
	ck_assert_uint_eq(s.arrays, 1);
	ck_assert_uint_eq(s.scalars, 0);
	ck_assert_uint_eq(s.depth, 2);
	ck_assert_uint_eq(s.weight, 3 * RTS_JSON_WEIGHT_OBJECT + RTS_JSON_WEIGHT_ARRAY);

	ck_assert_int_eq(scan("[1,-2.5e3,true,false,null,\"x\"]", SIZE_MAX, 64, &s), 0);
	ck_assert_uint_eq(s.scalars, 6);
	ck_assert_int_eq(scan(" [ 1 ,\t2\r\n, 33 ] ", SIZE_MAX, 64, &s), 0);
	ck_assert_uint_eq(s.scalars, 3);
	ck_assert_uint_eq(s.arrays, 1);

	/* Braces, brackets, commas and escaped quotes inside strings are no structure. */
	ck_assert_int_eq(scan("{\"a\\\"{[,\":\"}],\\\\\",\"b\":\"\\u005b\"}", SIZE_MAX, 64, &s), 0);
	ck_assert_uint_eq(s.objects, 1);
	ck_assert_uint_eq(s.arrays, 0);
	ck_assert_uint_eq(s.scalars, 4);
	ck_assert_uint_eq(s.depth, 1);

	ck_assert_int_eq(scan("", SIZE_MAX, 64, &s), 0);
	ck_assert_uint_eq(s.weight, 0);
}
END_TEST

START_TEST(test_matches_json_c)
{
	static const char *const docs[] = {
		("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],"
		 "\"max_tokens\":10,\"stream\":true,\"metadata\":null}"),
		"[[],[[]],{\"a\":{\"b\":[1,2,{\"c\":false}]}}]",
		"{\"k\\\"}\":\"v\\\\\",\"n\":-0.5E+2}",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(docs); i++) {
		struct rts_json_scan s, want = {0};
		json_object *o = NULL;
		const char *why = NULL;
		ck_assert_int_eq(rts_json_parse_strict(docs[i], strlen(docs[i]), 64, &o, &why), 0);
		json_tree_count(o, 1, &want);
		json_object_put(o);
		ck_assert_int_eq(scan(docs[i], SIZE_MAX, 64, &s), 0);
		ck_assert_uint_eq(s.objects, want.objects);
		ck_assert_uint_eq(s.arrays, want.arrays);
		ck_assert_uint_eq(s.scalars, want.scalars);
		ck_assert_uint_eq(s.depth, want.depth);
	}
}
END_TEST

START_TEST(test_bounds)
{
	struct rts_json_scan s;
	/* Weight: at the bound passes, one unit more is refused. */
	ck_assert_int_eq(scan("[1,2]", RTS_JSON_WEIGHT_ARRAY + 2, 64, &s), 0);
	ck_assert_int_eq(scan("[1,2]", RTS_JSON_WEIGHT_ARRAY + 1, 64, &s), -E2BIG);
	ck_assert_int_eq(scan("{}", RTS_JSON_WEIGHT_OBJECT - 1, 64, &s), -E2BIG);

	/* Depth: 64 nested arrays pass, 65 are refused. */
	char deep[200];
	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	deep[130] = '\0';
	ck_assert_int_eq(scan(deep + 1, SIZE_MAX, RTS_JSON_DEPTH_MAX, &s), 0);
	ck_assert_uint_eq(s.depth, 64);
	ck_assert_int_eq(scan(deep, SIZE_MAX, RTS_JSON_DEPTH_MAX, &s), -ELOOP);
	/* Closers never underflow the depth. */
	ck_assert_int_eq(scan("]]]]}}[", SIZE_MAX, 1, &s), 0);
	ck_assert_uint_eq(s.depth, 1);
}
END_TEST

static char *repeat(const char *head, const char *unit, size_t n, const char *tail, size_t *len)
{
	size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
	char *b = rts_xmalloc(hl + n * (ul + 1) + tl + 1);
	size_t o = 0;
	memcpy(b, head, hl);
	o += hl;
	for (size_t i = 0; i < n; i++) {
		if (i)
			b[o++] = ',';
		memcpy(b + o, unit, ul);
		o += ul;
	}
	memcpy(b + o, tail, tl);
	o += tl;
	b[o] = '\0';
	*len = o;
	return b;
}

/* The reviewer's bodies (issue 16) are refused with the real bound; a long conversation
 * is not. */
START_TEST(test_real_bound)
{
	struct rts_json_scan s;
	size_t len;
	/* 1 MiB of empty objects: +342 MiB before the pre-scan. */
	char *b = repeat("{\"turnId\":\"t\",\"request\":{\"x\":[", "{}", 1024 * 1024 / 3, "]}}", &len);
	ck_assert_int_eq(rts_json_scan(b, len, RTS_RICH_JSON_WEIGHT_MAX, RTS_JSON_DEPTH_MAX, &s), -E2BIG);
	free(b);
	/* 8 MiB of empty text blocks. */
	b = repeat("{\"messages\":[{\"role\":\"user\",\"content\":[", "{\"type\":\"text\",\"text\":\"\"}",
		   8 * 1024 * 1024 / 30, "]}]}", &len);
	ck_assert_int_eq(rts_json_scan(b, len, RTS_RICH_JSON_WEIGHT_MAX, RTS_JSON_DEPTH_MAX, &s), -E2BIG);
	free(b);
	/* 20,000 messages of a text block each, with a 2,000-byte text: 40 MiB, passes. */
	char unit[2200];
	int n = snprintf(unit, sizeof(unit), "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"");
	memset(unit + n, 'w', 2000);
	strcpy(unit + n + 2000, "\"}]}");
	b = repeat("{\"model\":\"m\",\"max_tokens\":1000,\"messages\":[", unit, 20000, "]}", &len);
	ck_assert_int_eq(rts_json_scan(b, len, RTS_RICH_JSON_WEIGHT_MAX, RTS_JSON_DEPTH_MAX, &s), 0);
	ck_assert_uint_eq(s.objects, 1 + 2 * 20000);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jsonscan");
	TCase *tc = tcase_create("scan");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_counts);
	tcase_add_test(tc, test_matches_json_c);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_real_bound);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
