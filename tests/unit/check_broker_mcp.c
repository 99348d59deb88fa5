/* SPDX-License-Identifier: Apache-2.0 */
/* POST /mcp/<server>: only single tools/call requests for declared tools pass, rebuilt;
 * the server's answer is rebuilt to jsonrpc, id and result or error. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/mcp.h"
#include "common/json.h"
#include "common/util.h"

static struct rts_mcp_tool tools[] = {{.name = "search"}, {.name = "fetch_page"}};
static const struct rts_mcp_server srv = {.name = "docs", .url = "https://mcp.example/", .tools = tools, .n_tools = 2};

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_msg(rts_json_parse(text, strlen(text), 64, &o, &why) == 0, "test JSON does not parse: %s", text);
	return o;
}

static enum brokerd_result build(const char *text, char **out_text)
{
	cleanup_json json_object *req = parse(text);
	json_object *out = NULL;
	enum brokerd_result r = brokerd_mcp_request_build(req, &srv, &out);
	*out_text = out ? rts_json_dump(out) : NULL;
	json_object_put(out);
	return r;
}

START_TEST(test_request_good)
{
	cleanup_free char *out = NULL;
	ck_assert_int_eq(build("{\"params\":{\"arguments\":{\"q\":\"x\",\"n\":[1,{}]},\"name\":\"search\"},"
			       "\"method\":\"tools/call\",\"id\":7,\"jsonrpc\":\"2.0\"}",
			       &out),
			 BROKERD_OK);
	ck_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"search\","
			      "\"arguments\":{\"q\":\"x\",\"n\":[1,{}]}}}");
	free(out);
	ck_assert_int_eq(build("{\"jsonrpc\":\"2.0\",\"id\":\"a-1\",\"method\":\"tools/call\","
			       "\"params\":{\"name\":\"fetch_page\",\"arguments\":{}}}",
			       &out),
			 BROKERD_OK);
	ck_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":\"a-1\",\"method\":\"tools/call\",\"params\":{\"name\":"
			      "\"fetch_page\",\"arguments\":{}}}");
}
END_TEST

static const struct {
	const char *body;
	enum brokerd_result want;
} bad[] = {
	/* batches, notifications, odd ids and envelopes */
	{"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}}}]",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}}}",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}}}",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}}}",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}}}",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}}}",
	 BROKERD_BAD_REQUEST},
	{"{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}}}", BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{}},"
	 "\"_meta\":{}}",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":[]}}",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"search\"}}", BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{},"
	 "\"_meta\":{\"progressToken\":1}}}",
	 BROKERD_BAD_REQUEST},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}", BROKERD_BAD_REQUEST},
	/* methods other than tools/call, and undeclared tools */
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"name\":\"search\",\"arguments\":{}}}",
	 BROKERD_FORBIDDEN},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"name\":\"search\",\"arguments\":{}}}",
	 BROKERD_FORBIDDEN},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{\"name\":\"a\",\"arguments\":{}}}",
	 BROKERD_FORBIDDEN},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"a\",\"arguments\":{}}}",
	 BROKERD_FORBIDDEN},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_all\",\"arguments\":{}}}",
	 BROKERD_FORBIDDEN},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"Search\",\"arguments\":{}}}",
	 BROKERD_FORBIDDEN},
};

START_TEST(test_request_refused)
{
	cleanup_free char *out = NULL;
	enum brokerd_result r = build(bad[_i].body, &out);
	ck_assert_msg(r == bad[_i].want, "%s: got %d, want %d", bad[_i].body, r, bad[_i].want);
	ck_assert_ptr_null(out);
}
END_TEST

static int rebuild(const char *answer, const char *id_text, char **out_text)
{
	cleanup_json json_object *ans = parse(answer);
	cleanup_json json_object *id = parse(id_text);
	json_object *out = NULL;
	int r = brokerd_mcp_answer_rebuild(ans, id, &out);
	*out_text = out ? rts_json_dump(out) : NULL;
	json_object_put(out);
	return r;
}

START_TEST(test_answer)
{
	cleanup_free char *out = NULL;
	ck_assert_int_eq(rebuild("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
				 "\"isError\":false},\"x\":1}",
				 "7", &out),
			 0);
	ck_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
			      "\"isError\":false}}");
	free(out);
	ck_assert_int_eq(rebuild("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32602,\"message\":\"bad\","
				 "\"data\":{\"trace\":\"secret path\"}}}",
				 "\"a\"", &out),
			 0);
	ck_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32602,\"message\":\"bad\"}}");
}
END_TEST

START_TEST(test_answer_refused)
{
	static const char *const answers[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}",		 /* other id */
		"{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{}}",	 /* other id type */
		"{\"id\":7,\"result\":{}}",				 /* no jsonrpc */
		"{\"jsonrpc\":\"2.0\",\"id\":7}",			 /* neither */
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{},\"error\":{\"code\":1,\"message\":\"m\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"text\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":\"x\",\"message\":\"m\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":1}}",
		"[{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}]",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(answers); i++) {
		cleanup_free char *out = NULL;
		ck_assert_msg(rebuild(answers[i], "7", &out) == -EINVAL, "accepted: %s", answers[i]);
		ck_assert_ptr_null(out);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_mcp");
	TCase *tc = tcase_create("mcp");
	tcase_add_test(tc, test_request_good);
	tcase_add_loop_test(tc, test_request_refused, 0, (int)RTS_ARRAY_SIZE(bad));
	tcase_add_test(tc, test_answer);
	tcase_add_test(tc, test_answer_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
