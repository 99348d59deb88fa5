/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a worker's body for POST /anthropic/v1/messages[/count_tokens] through
 * the request rebuild (brokerd/anthropic.h), parsed as brokerd parses worker bodies. The
 * first byte picks the judged level (low bits) and the route (bit 2); the rest is the body.
 * Seed corpus: tests/fuzz/corpus/anthropic_request.
 *
 * Invariants of an accepted body: the rebuilt one names the profile's model, its
 * max_tokens is within the cap (and absent for count_tokens), it holds only members the
 * rebuild writes, every tool is a custom tool, every content block is a text, base64
 * image, tool_use, tool_result, thinking or redacted_thinking block, an effort never ranks
 * above the judged level, a thinking budget is within the level's cap and below max_tokens;
 * rebuilding the rebuilt body gives the same text. A refused body names one of the four
 * rules and builds nothing. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "brokerd/anthropic.h"
#include "brokerd/brokerd.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is(json_object *o, json_type t)
{
	return o && json_object_is_type(o, t);
}

static bool one_of(const char *s, const char *const *list)
{
	for (; s && *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

static int rank(const char *effort)
{
	static const char *const names[] = {"low", "medium", "high", "xhigh", "max"};
	static const int ranks[] = {0, 1, 2, 3, 3};
	for (int i = 0; i < 5; i++)
		if (!strcmp(effort, names[i]))
			return ranks[i];
	return 99;
}

static void check_blocks(json_object *content)
{
	static const char *const kinds[] = {"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking",
					    NULL};
	if (is(content, json_type_string))
		return;
	FUZZ_ASSERT(is(content, json_type_array));
	for (size_t i = 0; i < json_object_array_length(content); i++) {
		json_object *b = json_object_array_get_idx(content, i);
		const char *t = rts_json_get_string(b, "type");
		FUZZ_ASSERT(one_of(t, kinds));
		if (!strcmp(t, "image"))
			FUZZ_ASSERT(!strcmp(rts_json_get_string(rts_json_get(b, "source"), "type"), "base64"));
	}
}

static void check(json_object *o, const struct brokerd_anthropic_policy *p)
{
	static const char *const members[] = {"model", "max_tokens", "messages", "system", "tools", "tool_choice",
					      "thinking", "output_config", "temperature", "top_p", "top_k",
					      "stop_sequences", "stream", NULL};
	json_object_object_foreach(o, key, val)
	{
		(void)val;
		FUZZ_ASSERT(one_of(key, members));
	}
	FUZZ_ASSERT(!strcmp(rts_json_get_string(o, "model"), p->model));
	json_object *mt = rts_json_get(o, "max_tokens");
	if (p->count_tokens) {
		FUZZ_ASSERT(!mt && !rts_json_get(o, "stream") && !rts_json_get(o, "output_config"));
	} else {
		FUZZ_ASSERT(is(mt, json_type_int) && json_object_get_int64(mt) >= 1 &&
			    json_object_get_int64(mt) <= p->max_output_tokens);
	}
	json_object *msgs = rts_json_get(o, "messages");
	for (size_t i = 0; i < json_object_array_length(msgs); i++)
		check_blocks(rts_json_get(json_object_array_get_idx(msgs, i), "content"));
	json_object *tools = rts_json_get(o, "tools");
	for (size_t i = 0; tools && i < json_object_array_length(tools); i++) {
		const char *t = rts_json_get_string(json_object_array_get_idx(tools, i), "type");
		FUZZ_ASSERT(!t || !strcmp(t, "custom"));
	}
	const char *effort = rts_json_get_string(rts_json_get(o, "output_config"), "effort");
	if (effort)
		FUZZ_ASSERT(rank(effort) <= (int)p->judged);
	json_object *th = rts_json_get(o, "thinking");
	json_object *budget = rts_json_get(th, "budget_tokens");
	if (budget) {
		FUZZ_ASSERT(json_object_get_int64(budget) <= brokerd_anthropic_budget_cap(p->judged));
		FUZZ_ASSERT(json_object_get_int64(budget) >= 1024);
		if (mt)
			FUZZ_ASSERT(json_object_get_int64(budget) < json_object_get_int64(mt));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct brokerd_anthropic_policy p = {.count_tokens = data[0] & 4, .model = "claude-profile",
					     .max_output_tokens = 4096 + (data[0] >> 3) * 1000,
					     .judged = (enum rts_effort)(data[0] & 3)};
	json_object *req = NULL;
	const char *why = NULL, *rule = NULL;
	if (brokerd_body_parse((const char *)data + 1, size - 1, &req, &why) < 0)
		return 0;
	struct brokerd_anthropic_rebuilt out;
	if (brokerd_anthropic_request_build(req, &p, &out, &why, &rule) < 0) {
		static const char *const rules[] = {"native_tool", "remote_media", "remote_ref", "shape", NULL};
		FUZZ_ASSERT(why && one_of(rule, rules));
		json_object_put(req);
		return 0;
	}
	check(out.body, &p);
	char *text = rts_json_dump(out.body);
	json_object *again = NULL;
	FUZZ_ASSERT(brokerd_body_parse(text, strlen(text), &again, &why) == 0);
	struct brokerd_anthropic_rebuilt out2;
	FUZZ_ASSERT(brokerd_anthropic_request_build(again, &p, &out2, &why, &rule) == 0);
	char *text2 = rts_json_dump(out2.body);
	FUZZ_ASSERT(!strcmp(text, text2));
	free(text2);
	free(text);
	json_object_put(out2.body);
	json_object_put(again);
	json_object_put(out.body);
	json_object_put(req);
	return 0;
}
