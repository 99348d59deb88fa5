/* SPDX-License-Identifier: Apache-2.0 */
/* POST /model: the request validator and upstream-body builder, and the answer rebuild
 * (the schema reference check has its own suite, check_broker_schema). */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/model.h"
#include "common/json.h"
#include "common/util.h"

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_msg(rts_json_parse(text, strlen(text), 64, &o, &why) == 0, "test JSON does not parse: %s", text);
	return o;
}

/* Build with model "cfg-model" and a configured limit of 4096 tokens. */
static int build(const char *body, json_object **out)
{
	cleanup_json json_object *req = parse(body);
	const char *why = NULL;
	int r = brokerd_model_request_build(req, "cfg-model", 4096, out, &why);
	if (r < 0)
		ck_assert_ptr_nonnull(why);
	return r;
}

static void assert_refused(const char *body)
{
	json_object *out = NULL;
	ck_assert_msg(build(body, &out) == -EINVAL, "accepted: %s", body);
	ck_assert_ptr_null(out);
}

static char *dump(json_object *o)
{
	return rts_json_dump(o);
}

START_TEST(test_good_request)
{
	static const char body[] =
		"{\"messages\":["
		"{\"role\":\"system\",\"content\":\"be brief\"},"
		"{\"role\":\"user\",\"content\":\"what time is it?\"},"
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
		"\"function\":{\"name\":\"host_clock\",\"arguments\":\"{}\"}}]},"
		"{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"12:00\"}],"
		"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"host_clock\",\"description\":\"time\","
		"\"parameters\":{\"type\":\"object\",\"properties\":{},\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}}}],"
		"\"tool_choice\":\"auto\",\"max_tokens\":100000}";
	json_object *out = NULL;
	ck_assert_int_eq(build(body, &out), 0);
	cleanup_free char *s = dump(out);
	ck_assert_str_eq(
		s, "{\"model\":\"cfg-model\",\"messages\":["
		   "{\"role\":\"system\",\"content\":\"be brief\"},"
		   "{\"role\":\"user\",\"content\":\"what time is it?\"},"
		   "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
		   "\"function\":{\"name\":\"host_clock\",\"arguments\":\"{}\"}}]},"
		   "{\"role\":\"tool\",\"content\":\"12:00\",\"tool_call_id\":\"call_1\"}],"
		   "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"host_clock\",\"description\":\"time\","
		   "\"parameters\":{\"type\":\"object\",\"properties\":{},\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}}}],"
		   "\"tool_choice\":\"auto\",\"stream\":false,\"max_tokens\":4096}");
	json_object_put(out);
}
END_TEST

START_TEST(test_max_tokens)
{
	json_object *out = NULL;
	ck_assert_int_eq(build("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":100}", &out), 0);
	ck_assert_int_eq(json_object_get_int(rts_json_get(out, "max_tokens")), 100);
	json_object_put(out);
	ck_assert_int_eq(build("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &out), 0);
	ck_assert_int_eq(json_object_get_int(rts_json_get(out, "max_tokens")), 4096);
	ck_assert(!json_object_get_boolean(rts_json_get(out, "stream")));
	ck_assert_str_eq(rts_json_get_string(out, "model"), "cfg-model");
	/* No tools: no tools member and no tool_choice, even when asked. */
	ck_assert_ptr_null(rts_json_get(out, "tools"));
	json_object_put(out);
	ck_assert_int_eq(
		build("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[],\"tool_choice\":\"none\"}", &out),
		0);
	ck_assert(!json_object_object_get_ex(out, "tools", NULL));
	ck_assert(!json_object_object_get_ex(out, "tool_choice", NULL));
	json_object_put(out);
}
END_TEST

#define CALL(id) "{\"id\":\"" id "\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}"
#define CALLS(id) "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[" CALL(id) "]}"
#define ANSWER(id) "{\"role\":\"tool\",\"tool_call_id\":\"" id "\",\"content\":\"r\"}"

static const char *const bad_requests[] = {
	"[]",
	"\"hi\"",
	"{}",
	"{\"messages\":[]}",
	"{\"messages\":{}}",
	/* the guest cannot pick the model, streaming, or anything else */
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"model\":\"other\"}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":1}",
	"{\"messages\":[{\"role\":\"developer\",\"content\":\"hi\"}]}",
	"{\"messages\":[{\"role\":\"user\"}]}",
	"{\"messages\":[{\"content\":\"hi\"}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"name\":\"bob\"}]}",
	/* media, files, audio: content parts are refused */
	"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x\"}}]}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":null}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"audio\":{\"id\":\"a\"}}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":null,\"tool_calls\":[]}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":[]}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"web_search\","
	"\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"\",\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
	"\"function\":{\"name\":\"bad name\",\"arguments\":\"{}\"}}]}]}",
	"{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
	"{\"messages\":[{\"role\":\"tool\",\"content\":\"x\",\"tool_call_id\":7}]}",
	/* native provider tools and extra function members */
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"web_search\"}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"strict\":true}}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\","
	"\"function\":{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"parameters\":{\"$ref\":\"https://evil.example/schema\"}}}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"parameters\":[]}}]}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":{}}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":0}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":-5}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":10.5}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":\"10\"}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":99999999999999999999}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tool_choice\":\"required\"}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tool_choice\":{\"type\":\"function\"}}",
	/* a null member is not a missing one */
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":null}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":null}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":null}]}",
	/* every tool message answers a call of the assistant message before it */
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"r\"}]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"},{\"role\":\"tool\",\"tool_call_id\":\"c\","
	"\"content\":\"r\"}]}",
	"{\"messages\":[" CALLS("c") ",{\"role\":\"tool\",\"tool_call_id\":\"d\",\"content\":\"r\"}]}",
	"{\"messages\":[" CALLS("c") "," ANSWER("c") "," ANSWER("c") "]}",
	"{\"messages\":[" CALLS("c") "," ANSWER("c") ",{\"role\":\"user\",\"content\":\"u\"}," ANSWER("c") "]}",
	"{\"messages\":[" CALLS("c") "," ANSWER("c") "," CALLS("d") "," ANSWER("c") "]}",
	/* call ids of one message must be distinct */
	"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[" CALL("c") "," CALL("c") "]}]}",
};

static const char *const good_shapes[] = {
	"{\"messages\":[" CALLS("c") "," ANSWER("c") "]}",
	"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[" CALL("a") "," CALL("b") "]},"
	ANSWER("b") "," ANSWER("a") ",{\"role\":\"user\",\"content\":\"u\"}]}",
	"{\"messages\":[" CALLS("c") ",{\"role\":\"user\",\"content\":\"unanswered is fine\"}]}",
	"{\"messages\":[" CALLS("c") "," ANSWER("c") "," CALLS("c") "," ANSWER("c") "]}",
};

START_TEST(test_good_shape)
{
	json_object *out = NULL;
	ck_assert_msg(build(good_shapes[_i], &out) == 0, "refused: %s", good_shapes[_i]);
	json_object_put(out);
}
END_TEST

START_TEST(test_bad_request)
{
	assert_refused(bad_requests[_i]);
}
END_TEST

static int rebuild(const char *text, char **out_text)
{
	cleanup_json json_object *ans = parse(text);
	json_object *out = NULL;
	const char *why = NULL;
	int r = brokerd_model_answer_rebuild(ans, &out, &why);
	*out_text = out ? dump(out) : NULL;
	json_object_put(out);
	return r;
}

START_TEST(test_answer_rebuild_drops_unknown)
{
	static const char ans[] =
		"{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"system_fingerprint\":\"fp\","
		"\"choices\":[{\"index\":3,\"logprobs\":null,\"message\":{\"role\":\"assistant\",\"content\":\"Hello\","
		"\"refusal\":null,\"annotations\":[{\"url\":\"https://x\"}]},\"finish_reason\":\"stop\"},"
		"{\"index\":1,\"message\":{\"role\":\"assistant\",\"content\":\"second\"},\"finish_reason\":\"stop\"}],"
		"\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7,"
		"\"prompt_tokens_details\":{\"cached_tokens\":0},\"note\":\"x\"},\"x_extra\":{\"a\":1}}";
	cleanup_free char *out = NULL;
	ck_assert_int_eq(rebuild(ans, &out), 0);
	ck_assert_str_eq(out, "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello\"},"
			      "\"finish_reason\":\"stop\"}],"
			      "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}");
}
END_TEST

START_TEST(test_answer_rebuild_tool_calls)
{
	static const char ans[] =
		"{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
		"\"function\":{\"name\":\"host_clock\",\"arguments\":\"{}\",\"extra\":1},\"x\":2}]},"
		"\"finish_reason\":\"tool_calls\"}]}";
	cleanup_free char *out = NULL;
	ck_assert_int_eq(rebuild(ans, &out), 0);
	ck_assert_str_eq(out, "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,"
			      "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"host_clock\","
			      "\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}");
	/* no finish_reason: "stop" */
	free(out);
	ck_assert_int_eq(rebuild("{\"choices\":[{\"message\":{\"content\":\"x\"}}]}", &out), 0);
	ck_assert_str_eq(out, "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"x\"},"
			      "\"finish_reason\":\"stop\"}]}");
}
END_TEST

static const char *const bad_answers[] = {
	"[]",
	"{}",
	"{\"choices\":[]}",
	"{\"choices\":{}}",
	"{\"error\":{\"message\":\"quota\"},\"choices\":[{\"message\":{\"content\":\"x\"}}]}",
	"{\"choices\":[{\"message\":\"x\"}]}",
	"{\"choices\":[{\"message\":{\"role\":\"user\",\"content\":\"x\"}}]}",
	"{\"choices\":[{\"message\":{\"content\":\"x\",\"tool_calls\":{}}}]}",
	"{\"choices\":[{\"message\":{\"content\":\"x\",\"tool_calls\":[{\"id\":1,\"function\":{\"name\":\"f\","
	"\"arguments\":\"{}\"}}]}}]}",
	"{\"choices\":[{\"message\":{\"content\":\"x\",\"tool_calls\":[{\"id\":\"1\",\"type\":\"custom\","
	"\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}",
	"{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":5}]}",
};

START_TEST(test_answer_refused)
{
	cleanup_free char *out = NULL;
	ck_assert_msg(rebuild(bad_answers[_i], &out) == -EINVAL, "accepted: %s", bad_answers[_i]);
	ck_assert_ptr_null(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_model");
	TCase *tc = tcase_create("request");
	tcase_add_test(tc, test_good_request);
	tcase_add_test(tc, test_max_tokens);
	tcase_add_loop_test(tc, test_bad_request, 0, (int)RTS_ARRAY_SIZE(bad_requests));
	tcase_add_loop_test(tc, test_good_shape, 0, (int)RTS_ARRAY_SIZE(good_shapes));
	suite_add_tcase(s, tc);
	tc = tcase_create("answer");
	tcase_add_test(tc, test_answer_rebuild_drops_unknown);
	tcase_add_test(tc, test_answer_rebuild_tool_calls);
	tcase_add_loop_test(tc, test_answer_refused, 0, (int)RTS_ARRAY_SIZE(bad_answers));
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
