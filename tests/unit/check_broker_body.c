/* SPDX-License-Identifier: Apache-2.0 */
/* Strict parsing of worker bodies (common/strictjson.h): every case json-c alone lets
 * through is refused, ordinary JSON passes, and json-c's calls still bind to json-c with
 * jansson linked in. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/brokerd.h"
#include "common/strictjson.h"
#include "common/json.h"
#include "common/util.h"

#define T(lit) {lit, sizeof(lit) - 1}
static const struct {
	const char *text;
	size_t len;
} refused[] = {
	T("{\"a\":1,\"a\":2}"),
	T("{\"x\":[{\"b\":1,\"c\":{\"d\":1,\"d\":1}}]}"),
	T("{\"a\":1,\"\\u0061\":2}"),
	T("{\"a\":\"x\x01y\"}"),
	T("{\"a\":\"x\ty\"}"),
	T("{\"a\":\"x\ny\"}"),
	T("{\"a\":\"x\x1fy\"}"),
	T("{\"a\":\"\xc3\x28\"}"),
	T("{\"a\":\"\xc0\xaf\"}"),
	T("{\"a\":\"\xed\xa0\x80\"}"),
	T("{\"a\":\"\xf4\x90\x80\x80\"}"),
	T("{\"a\":\"\\ud800\"}"),
	T("{\"a\":\"\\udc00\\ud800\"}"),
	T("{\"a\":\"\\u0000\"}"),
	T("{\"a\\u0000b\":1}"),
	T("{\"a\":\"x\0\"}"),
	T("{'a':1}"),
	T("{\"a\":NaN}"),
	T("{\"a\":Infinity}"),
	T("{\"a\":123456789012345678901234567890}"),
	T("{\"a\":1,}"),
	T("{\"a\":01}"),
	T("{\"a\":1}{}"),
	T("{\"a\":1} x"),
	T("{\"a\":1/*c*/}"),
	T(""),
	T("   "),
	T("\"x\""),
	T("1"),
	T("null"),
	T("\xef\xbb\xbf{\"a\":1}"),
};

START_TEST(test_refused)
{
	json_object *o = (json_object *)1;
	const char *why = NULL;
	ck_assert_msg(brokerd_body_parse(refused[_i].text, refused[_i].len, &o, &why) == -EINVAL, "accepted #%d", _i);
	ck_assert_ptr_null(o);
	ck_assert_ptr_nonnull(why);
	/* The reason never quotes the input. */
	ck_assert_ptr_null(strchr(why, '"'));
}
END_TEST

START_TEST(test_depth)
{
	char buf[512];
	const char *why = NULL;
	json_object *o = NULL;
	for (int depth = RTS_JSON_DEPTH_MAX - 1; depth <= RTS_JSON_DEPTH_MAX + 1; depth++) {
		size_t n = 0;
		for (int i = 0; i < depth; i++)
			buf[n++] = '[';
		for (int i = 0; i < depth; i++)
			buf[n++] = ']';
		int r = brokerd_body_parse(buf, n, &o, &why);
		if (depth <= RTS_JSON_DEPTH_MAX) {
			ck_assert_int_eq(r, 0);
			json_object_put(o);
		} else {
			ck_assert_int_eq(r, -EINVAL);
		}
	}
}
END_TEST

START_TEST(test_accepted)
{
	static const char *const good[] = {
		"{}",
		"[]",
		" {\"a\":[1,-2.5e3,true,false,null,\"\\u00e4\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\"]} \r\n\t",
		"{\"a\":{\"b\":1},\"c\":{\"b\":1}}",
		"{\"\xc3\xa4\":\"\xf0\x9f\x98\x80\x7f\"}",
		"{\"a\":9223372036854775807,\"b\":-9223372036854775808}",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(good); i++) {
		json_object *o = NULL;
		const char *why = NULL;
		ck_assert_msg(brokerd_body_parse(good[i], strlen(good[i]), &o, &why) == 0, "refused %s: %s", good[i],
			      why);
		ck_assert_ptr_nonnull(o);
		json_object_put(o);
	}
}
END_TEST

/* jansson also exports json_object_get: json-c's must be the one bound (strictjson.h). */
START_TEST(test_json_c_symbols_bind_to_json_c)
{
	json_object *o = json_object_new_object();
	ck_assert_ptr_eq(json_object_get(o), o);
	ck_assert_int_eq(json_object_put(o), 0); /* one reference left */
	ck_assert_int_eq(json_object_put(o), 1); /* freed */
	json_object *obj = json_object_new_object();
	json_object_object_add(obj, "k", json_object_new_int(1));
	struct json_object_iterator it = json_object_iter_begin(obj), end = json_object_iter_end(obj);
	ck_assert(!json_object_iter_equal(&it, &end));
	json_object_iter_next(&it);
	ck_assert(json_object_iter_equal(&it, &end));
	json_object_put(obj);
}
END_TEST

int main(void)
{
	rts_json_strict_init();
	Suite *s = suite_create("broker_body");
	TCase *tc = tcase_create("strict");
	tcase_add_loop_test(tc, test_refused, 0, (int)RTS_ARRAY_SIZE(refused));
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_accepted);
	tcase_add_test(tc, test_json_c_symbols_bind_to_json_c);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
