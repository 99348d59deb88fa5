/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: an upstream Chat Completions answer through the answer rebuild
 * (brokerd/model.h, brokerd_model_answer_rebuild), parsed as brokerd_upstream_json() parses
 * it. The seed corpus holds the shapes real servers send (tests/fuzz/corpus/model_answer).
 *
 * Invariants of an accepted answer: the rebuilt one has exactly the members model.h lists,
 * each of the documented type (content a string or null; each tool call an id, type
 * "function", and a function with a string name and string arguments); finish_reason is
 * "tool_calls" exactly when there are tool calls and one of four values otherwise; usage
 * holds only the three counters, non-negative; the whole is at most RTS_BROKER_ANSWER_MAX
 * bytes; and rebuilding it again gives exactly the same text. A refused answer leaves a
 * reason and no output. */
#include "config.h"

#include <stdint.h>

#include "brokerd/brokerd.h"
#include "brokerd/model.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool has_only(json_object *o, const char *const *allowed)
{
	if (!o || !json_object_is_type(o, json_type_object))
		return false;
	json_object_object_foreach(o, name, val)
	{
		(void)val;
		bool ok = false;
		for (const char *const *a = allowed; *a && !ok; a++)
			ok = strcmp(name, *a) == 0;
		if (!ok)
			return false;
	}
	return true;
}

static bool is_string(json_object *o)
{
	return o && json_object_is_type(o, json_type_string);
}

static void check_tool_call(json_object *tc)
{
	static const char *const tc_members[] = {"id", "type", "function", NULL};
	static const char *const fn_members[] = {"name", "arguments", NULL};
	FUZZ_ASSERT(has_only(tc, tc_members) && json_object_object_length(tc) == 3);
	FUZZ_ASSERT(is_string(rts_json_get(tc, "id")));
	FUZZ_ASSERT(!strcmp(rts_json_get_string(tc, "type"), "function"));
	json_object *fn = rts_json_get(tc, "function");
	FUZZ_ASSERT(has_only(fn, fn_members) && json_object_object_length(fn) == 2);
	FUZZ_ASSERT(is_string(rts_json_get(fn, "name")) && is_string(rts_json_get(fn, "arguments")));
}

static void check_rebuilt(json_object *out)
{
	static const char *const top[] = {"choices", "usage", NULL};
	static const char *const choice_members[] = {"index", "message", "finish_reason", NULL};
	static const char *const msg_members[] = {"role", "content", "tool_calls", NULL};
	static const char *const usage_members[] = {"prompt_tokens", "completion_tokens", "total_tokens", NULL};
	FUZZ_ASSERT(has_only(out, top));
	json_object *choices = rts_json_get(out, "choices");
	FUZZ_ASSERT(choices && json_object_is_type(choices, json_type_array) && json_object_array_length(choices) == 1);
	json_object *c = json_object_array_get_idx(choices, 0);
	FUZZ_ASSERT(has_only(c, choice_members) && json_object_object_length(c) == 3);
	FUZZ_ASSERT(json_object_get_int64(rts_json_get(c, "index")) == 0);
	json_object *m = rts_json_get(c, "message");
	FUZZ_ASSERT(has_only(m, msg_members));
	FUZZ_ASSERT(!strcmp(rts_json_get_string(m, "role"), "assistant"));
	json_object *content = NULL;
	FUZZ_ASSERT(json_object_object_get_ex(m, "content", &content));
	FUZZ_ASSERT(!content || is_string(content));
	json_object *calls = rts_json_get(m, "tool_calls");
	FUZZ_ASSERT(json_object_object_length(m) == (calls ? 3 : 2));
	const char *fr = rts_json_get_string(c, "finish_reason");
	FUZZ_ASSERT(fr);
	if (calls) {
		FUZZ_ASSERT(json_object_is_type(calls, json_type_array));
		size_t n = json_object_array_length(calls);
		FUZZ_ASSERT(n >= 1 && n <= RTS_MODEL_TOOL_CALLS_MAX);
		for (size_t i = 0; i < n; i++)
			check_tool_call(json_object_array_get_idx(calls, i));
		FUZZ_ASSERT(!strcmp(fr, "tool_calls"));
	} else {
		FUZZ_ASSERT(!strcmp(fr, "stop") || !strcmp(fr, "length") || !strcmp(fr, "content_filter"));
	}
	json_object *usage = NULL;
	if (json_object_object_get_ex(out, "usage", &usage)) {
		FUZZ_ASSERT(has_only(usage, usage_members));
		json_object_object_foreach(usage, name, count)
		{
			(void)name;
			FUZZ_ASSERT(count && json_object_is_type(count, json_type_int) && json_object_get_int64(count) >= 0);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;
	json_object *ans = NULL;
	if (rts_json_parse((const char *)data, size, RTS_JSON_DEPTH_MAX, &ans, &why) < 0)
		return 0;
	json_object *out = NULL;
	why = NULL;
	if (brokerd_model_answer_rebuild(ans, &out, &why) < 0) {
		FUZZ_ASSERT(why && !out);
		json_object_put(ans);
		return 0;
	}
	FUZZ_ASSERT(out && !why);
	check_rebuilt(out);
	char *text = rts_json_dump(out);
	FUZZ_ASSERT(strlen(text) <= RTS_BROKER_ANSWER_MAX);

	json_object *again = NULL;
	FUZZ_ASSERT(rts_json_parse(text, strlen(text), RTS_JSON_DEPTH_MAX, &again, &why) == 0);
	json_object *out2 = NULL;
	FUZZ_ASSERT(brokerd_model_answer_rebuild(again, &out2, &why) == 0);
	char *text2 = rts_json_dump(out2);
	FUZZ_ASSERT(!strcmp(text, text2));
	free(text2);
	json_object_put(out2);
	json_object_put(again);
	free(text);
	json_object_put(out);
	json_object_put(ans);
	return 0;
}
