/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/json.h"
#include "common/jspec.h"
#include "common/limits.h"
#include "common/tools.h"
#include "common/util.h"
#include "worker/input.h"
#include "worker/worker.h"

/* route is /tools/<name> or /mcp/<name>; names are checked so that nothing but those two
 * shapes can reach a request line. */
static bool route_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *route = json_object_get_string(v);
	bool ok = (strncmp(route, "/tools/", 7) == 0 && rts_name_valid(route + 7, RTS_NAME_MAX)) ||
		  (strncmp(route, "/mcp/", 5) == 0 && rts_name_valid(route + 5, RTS_NAME_MAX));
	return ok || rts_jfail(ctx, "must be /tools/<name> or /mcp/<name>");
}

static bool tool_name_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *name = json_object_get_string(v);
	if (!rts_name_valid(name, RTS_FUNCTION_NAME_MAX))
		return rts_jfail(ctx, "must match [a-z][a-z0-9_]{0,63}");
	/* The memory tools are the worker's own; a public tool must not shadow them. */
	if (strncmp(name, "memory_", 7) == 0)
		return rts_jfail(ctx, "is reserved for the worker's own tools");
	return true;
}

static bool mcp_tool_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return rts_name_valid(json_object_get_string(v), RTS_NAME_MAX) ||
	       rts_jfail(ctx, "must match [a-z][a-z0-9_]{0,47}");
}

/* An MCP route needs the server's own tool name; any other route has none. */
static bool tool_check(struct rts_jctx *ctx, json_object *o, void *base)
{
	struct worker_tool *t = base;
	if (strncmp(json_object_get_string(rts_json_get(o, "route")), "/mcp/", 5) != 0) {
		if (t)
			t->mcp_tool = NULL;
		return true;
	}
	return rts_json_get(o, "mcpTool") || rts_jfail_at(ctx, "mcpTool", "is required for an /mcp/ route");
}

#define TOOL(m) offsetof(struct worker_tool, m)
static const struct rts_jspec tool_spec = {
	.flags = RTS_JO_OPEN,
	.fields = (const struct rts_jfield[]){
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1,
		 .max = RTS_FUNCTION_NAME_MAX,
		 .check = tool_name_check, .store = RTS_JS_STR, .at = TOOL(name)},
		{.key = "description", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .max = RTS_DESCRIPTION_MAX,
		 .store = RTS_JS_STR, .at = TOOL(description)},
		{.key = "parameters", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .store = RTS_JS_JSON,
		 .at = TOOL(parameters)},
		{.key = "route", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 7 + RTS_NAME_MAX,
		 .check = route_check, .store = RTS_JS_STR, .at = TOOL(route)},
		{.key = "mcpTool", .types = RTS_JT_STRING, .min = 1, .max = RTS_NAME_MAX, .check = mcp_tool_check,
		 .store = RTS_JS_STR, .at = TOOL(mcp_tool)},
		{0},
	},
	.check = tool_check,
};

static bool turn_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return rts_jfail(ctx, "must be %u lowercase hex digits", RTS_TURN_ID_LEN);
	return true;
}

#define IN(m) offsetof(struct worker_input, m)
#define STRING_FIELD(k, lo, hi, m)                                                                                     \
	{.key = (k), .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = (lo), .max = (hi),                       \
	 .store = RTS_JS_STR, .at = IN(m)}
#define UINT_FIELD(k, flags_, lo, hi, m)                                                                               \
	{.key = (k), .types = RTS_JT_INT, .flags = (flags_), .min = (lo), .max = (hi), .store = RTS_JS_UINT32,         \
	 .at = IN(m)}

_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "the limits store as uint32");

/* Every field of HACKING.md's example; unknown keys are ignored (RTS_JO_OPEN) so the host
 * can add fields without breaking older images. The limits may lower the seed's 12 model
 * calls and 8 tool calls per response, never raise them. */
static const struct rts_jspec input_spec = {
	.flags = RTS_JO_OPEN,
	.fields = (const struct rts_jfield[]){
		/* First: another version may mean another shape. */
		{.key = "v", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 1, .max = 1},
		{.key = "turn", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = RTS_TURN_ID_LEN,
		 .max = RTS_TURN_ID_LEN, .check = turn_check, .store = RTS_JS_STR, .at = IN(turn)},
		{.key = "speaker", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .store = RTS_JS_OBJECT,
		 .object = &(const struct rts_jspec){
			 .flags = RTS_JO_OPEN,
			 .fields = (const struct rts_jfield[]){
				 STRING_FIELD("id", 1, RTS_SPEAKER_FIELD_MAX, speaker_id),
				 STRING_FIELD("name", 1, RTS_SPEAKER_FIELD_MAX, speaker_name),
				 {0},
			 },
		 }},
		STRING_FIELD("text", 0, RTS_TEXT_MAX, text),
		UINT_FIELD("attachments", RTS_JF_REQUIRED, 0, UINT32_MAX, attachments),
		STRING_FIELD("systemPrompt", 0, RTS_SYSTEM_PROMPT_MAX, system_prompt),
		STRING_FIELD("timeZone", 1, RTS_TIME_ZONE_MAX, time_zone),
		STRING_FIELD("now", 1, RTS_WORKER_NOW_MAX, now),
		{.key = "startFresh", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED, .store = RTS_JS_BOOL,
		 .at = IN(start_fresh)},
		{.key = "limits", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .store = RTS_JS_OBJECT,
		 .object = &(const struct rts_jspec){
			 .flags = RTS_JO_OPEN,
			 .fields = (const struct rts_jfield[]){
				 UINT_FIELD("modelCalls", RTS_JF_REQUIRED, 1, RTS_MODEL_CALLS_PER_TURN, model_calls),
				 UINT_FIELD("toolCallsPerResponse", RTS_JF_REQUIRED, 1, RTS_TOOL_CALLS_PER_RESPONSE,
					    tool_calls_per_response),
				 UINT_FIELD("maxOutputTokens", RTS_JF_REQUIRED, RTS_MAX_OUTPUT_TOKENS_MIN,
					    RTS_MAX_OUTPUT_TOKENS_MAX, max_output_tokens),
				 /* Optional (0: not given). */
				 UINT_FIELD("turnTimeoutMs", 0, RTS_TURN_TIMEOUT_MS_MIN, RTS_TURN_TIMEOUT_MS_MAX,
					    turn_timeout_ms),
				 {0},
			 },
		 }},
		{.key = "tools", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED | RTS_JF_COUNT,
		 .max = RTS_PUBLIC_TOOLS_MAX, .unique = "name", .items = "tools",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &tool_spec,
		 	.store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = IN(tools), .count_at = IN(n_tools),
		 	.elem_size = sizeof(struct worker_tool)},
		{0},
	},
};
static const struct rts_jfield input_root = RTS_JSPEC_ROOT(&input_spec);

int worker_input_parse(const char *buf, size_t len, struct worker_input **out, char *why, size_t whylen)
{
	*out = NULL;
	if (len > RTS_WORKER_INPUT_MAX) {
		snprintf(why, whylen, "input too large");
		return -EINVAL;
	}
	struct worker_input *in = rts_xcalloc(1, sizeof(*in));
	const char *parse_why = NULL;
	if (rts_json_parse(buf, len, RTS_JSON_DEPTH_MAX, &in->root, &parse_why) < 0) {
		snprintf(why, whylen, "%s", parse_why);
		worker_input_free(in);
		return -EINVAL;
	}
	struct rts_jerr e;
	if (rts_jspec_validate(in->root, &input_root, in, 0, &e) < 0) {
		rts_jerr_join(&e, ": ", why, whylen);
		worker_input_free(in);
		return -EINVAL;
	}
	*out = in;
	return 0;
}

void worker_input_free(struct worker_input *in)
{
	if (!in)
		return;
	free(in->tools);
	if (in->root)
		json_object_put(in->root);
	free(in);
}

const struct worker_tool *worker_input_tool(const struct worker_input *in, const char *name)
{
	for (size_t i = 0; i < in->n_tools; i++)
		if (strcmp(in->tools[i].name, name) == 0)
			return &in->tools[i];
	return NULL;
}
